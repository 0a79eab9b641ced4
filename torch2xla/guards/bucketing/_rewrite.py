"""Apply the padding analysis's fixes: the graph a bucket's program is lowered from.

The rewritten graph takes, after the original inputs, one 0-d int64 tensor per symbol in
``Analysis.lengths``: the symbol's real value in this call (the program's sizes are the
bucket's). Each ``Fix`` edits its node through a ``Rewriter``, which builds the real value of
a size expression ``a*s + b`` from those inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
import torch

from torch2xla.guards.bucketing._padding import Analysis, _bind

aten = torch.ops.aten


class Rewriter:
    """Edits one ATen graph in place for its fixes (see ``_padding.Fix``)."""

    def __init__(self, gm: torch.fx.GraphModule, symbols: Sequence) -> None:
        self.gm, self.graph = gm, gm.graph
        placeholders = list(self.graph.find_nodes(op="placeholder"))
        self._first = next(n for n in self.graph.nodes if n.op != "placeholder")
        self.inputs: dict = {}
        last = placeholders[-1] if placeholders else None
        for sym in symbols:
            if last is None:
                with self.graph.inserting_before(self._first):
                    node = self.graph.placeholder(f"torch2xla_length_{sym}")
            else:
                with self.graph.inserting_after(last):
                    node = self.graph.placeholder(f"torch2xla_length_{sym}")
            self.inputs[sym] = last = node
        self._lengths: dict = {}

    def length(self, expr: sympy.Expr, dtype: torch.dtype = torch.int64) -> torch.fx.Node:
        """A node holding the real value of ``expr`` (``a*s + b``) as a 0-d tensor."""
        expr = sympy.expand(sympy.sympify(expr))
        key = (expr, dtype)
        if key in self._lengths:
            return self._lengths[key]
        syms = [s for s in expr.free_symbols if s in self.inputs]
        with self.graph.inserting_before(self._first):
            if not syms:
                node = self.graph.call_function(
                    aten.scalar_tensor.default, (int(expr),), {"dtype": torch.int64}
                )
            else:
                (sym,) = syms
                poly = sympy.Poly(expr, sym)
                a, b = int(poly.coeff_monomial(sym)), int(poly.coeff_monomial(1))
                node = self.inputs[sym]
                if a != 1:
                    node = self.graph.call_function(aten.mul.Tensor, (node, a))
                if b != 0:
                    node = self.graph.call_function(aten.add.Tensor, (node, b))
            if dtype != torch.int64:
                node = self.graph.call_function(aten._to_copy.default, (node,), {"dtype": dtype})
        self._lengths[key] = node
        return node

    def arg(self, node: torch.fx.Node, name: str):
        """``node``'s argument ``name`` as it is now (an earlier fix may have replaced it)."""
        return _bind(node)[name]

    def set_arg(self, node: torch.fx.Node, name: str, value) -> None:
        schema = node.target._schema
        index = next(i for i, a in enumerate(schema.arguments) if a.name == name)
        if index < len(node.args) and not schema.arguments[index].kwarg_only:
            args = list(node.args)
            args[index] = value
            node.args = tuple(args)
        else:
            node.kwargs = {**node.kwargs, name: value}

    def call_before(self, node: torch.fx.Node, op, args: tuple) -> torch.fx.Node:
        """A new node ``op(*args)`` just before ``node``, with ``node``'s source line."""
        with self.graph.inserting_before(node):
            new = self.graph.call_function(op, args)
        for k in ("stack_trace", "nn_module_stack"):
            if k in node.meta:
                new.meta[k] = node.meta[k]
        return new


def rewrite(gm: torch.fx.GraphModule, analysis: Analysis) -> torch.fx.GraphModule:
    """``gm`` (changed in place) with ``analysis``'s fixes applied and one input per length."""
    rw = Rewriter(gm, analysis.lengths)
    for fix in analysis.fixes:
        fix.apply(rw)
    # The symbolic trace's fake values go: export would take their ShapeEnv from them and
    # trace every bucket with symbolic sizes again (3x slower, and not what it is for).
    for node in gm.graph.nodes:
        for k in ("val", "tensor_meta", "example_value", "unbacked_bindings"):
            node.meta.pop(k, None)
    gm.graph.lint()
    gm.recompile()
    return gm
