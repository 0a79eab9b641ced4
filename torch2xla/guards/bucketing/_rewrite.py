"""Apply the padding analysis's fixes: the graph a bucket's program is lowered from.

The rewritten graph takes, after the original inputs, one 0-d int64 tensor per symbol in
``Analysis.lengths``: the symbol's real value in this call (the program's sizes are the
bucket's). Each ``Fix`` edits its node through a ``Rewriter``, which builds the real value of
a size expression (``a*s + b``, or a ``Max``/``Min`` of such) from those inputs.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import sympy
import torch

from torch2xla.guards.bucketing._padding import Analysis, _bind, linear_in
from torch2xla.ops import _padded  # noqa: F401  (defines the ops the fixes insert)

aten = torch.ops.aten
fill_tail = torch.ops.torch2xla.fill_tail.default


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
        self._sizes: dict = {}

    def length(self, expr: sympy.Expr, dtype: torch.dtype = torch.int64) -> torch.fx.Node:
        """A node holding the real value of ``expr`` as a 0-d tensor: ``a*s + b``, or sums,
        integer multiples, ``Max`` and ``Min`` of such (``_padding.piecewise_linear_in``)."""
        expr = sympy.expand(sympy.sympify(expr))
        key = (expr, dtype)
        if key in self._lengths:
            return self._lengths[key]
        with self.graph.inserting_before(self._first):
            node = self._real(expr)
            if not isinstance(node, torch.fx.Node):
                node = self.graph.call_function(
                    aten.scalar_tensor.default, (node,), {"dtype": torch.int64}
                )
            if dtype != torch.int64:
                node = self.graph.call_function(aten._to_copy.default, (node,), {"dtype": dtype})
        self._lengths[key] = node
        return node

    def _real(self, expr: sympy.Expr):
        """``expr`` at the real sizes: an int where it has no symbol, else a 0-d int64 node."""
        if expr.is_Integer:
            return int(expr)
        if expr in self.inputs:
            return self.inputs[expr]
        syms = [s for s in expr.free_symbols if s in self.inputs]
        if len(syms) == 1 and linear_in(expr, syms[0], positive=False):
            poly = sympy.Poly(expr, syms[0])
            a, b = int(poly.coeff_monomial(syms[0])), int(poly.coeff_monomial(1))
            node = self.inputs[syms[0]]
            if a != 1:
                node = self.graph.call_function(aten.mul.Tensor, (node, a))
            if b != 0:
                node = self.graph.call_function(aten.add.Tensor, (node, b))
            return node
        parts = [self._real(a) for a in expr.args]
        ints = [p for p in parts if not isinstance(p, torch.fx.Node)]
        nodes = [p for p in parts if isinstance(p, torch.fx.Node)]
        name = type(expr).__name__
        if name not in ("Add", "Mul", "Max", "Min") or not nodes:
            raise NotImplementedError(f"torch2xla: real value of {expr}")
        both = {"Add": aten.add.Tensor, "Mul": aten.mul.Tensor}
        both |= {"Max": aten.maximum.default, "Min": aten.minimum.default}
        node = nodes[0]
        for other in nodes[1:]:
            node = self.graph.call_function(both[name], (node, other))
        if name == "Add" and ints:
            node = self.graph.call_function(aten.add.Tensor, (node, sum(ints)))
        elif name == "Mul" and ints:
            node = self.graph.call_function(aten.mul.Tensor, (node, int(sympy.Mul(*ints))))
        elif ints:  # Max, Min: an int bound (clamp keeps int64)
            op, bound = (
                (aten.clamp_min.default, max(ints))
                if name == "Max"
                else (aten.clamp_max.default, min(ints))
            )
            node = self.graph.call_function(op, (node, bound))
        return node

    def size(self, expr: sympy.Expr):
        """A graph value holding ``expr``, a size of the symbolic trace (a polynomial in its
        symbols), at the program's sizes (the bucket's): an int, or a SymInt node that the
        export of each bucket's program makes an int."""
        expr = sympy.expand(sympy.sympify(expr))
        if expr.is_Integer:
            return int(expr)
        if expr in self._sizes:
            return self._sizes[expr]
        if expr.is_Symbol:
            node = self._symbol(expr)
        elif isinstance(expr, sympy.Add | sympy.Mul):
            op = operator.add if isinstance(expr, sympy.Add) else operator.mul
            parts = [self.size(a) for a in expr.args]
            node = parts[0]
            with self.graph.inserting_before(self._first):
                for part in parts[1:]:
                    node = self.graph.call_function(op, (node, part))
        elif isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            base = self.size(expr.base)
            node = base
            with self.graph.inserting_before(self._first):
                for _ in range(int(expr.exp) - 1):
                    node = self.graph.call_function(operator.mul, (node, base))
        else:
            raise NotImplementedError(f"torch2xla: size expression {expr}")
        self._sizes[expr] = node
        return node

    def _symbol(self, sym: sympy.Symbol):
        """The graph's value of size symbol ``sym``: an int input, or a tensor input's size."""
        for p in self.graph.find_nodes(op="placeholder"):
            val = p.meta.get("val")
            if isinstance(val, torch.SymInt) and val.node.expr == sym:
                return p
        for p in self.graph.find_nodes(op="placeholder"):
            val = p.meta.get("val")
            if isinstance(val, torch.Tensor):
                for d, n in enumerate(val.shape):
                    if isinstance(n, torch.SymInt) and n.node.expr == sym:
                        with self.graph.inserting_before(self._first):
                            return self.graph.call_function(aten.sym_size.int, (p, d))
        raise NotImplementedError(f"torch2xla: no input has size {sym}")

    def fill_padded(self, before: torch.fx.Node, x: torch.fx.Node, state, fill: str):
        """``x`` (whose dims are ``state``, the analysis's atoms) with every padded position,
        any padded atom past its real length, set to ``fill`` (``fill_tail``'s), inserted
        before ``before``. A dim flattened from several is unflattened into its atoms for it."""
        for d, dim in enumerate(state):
            padded = [k for k, (_, sym) in enumerate(dim) if sym is not None]
            if not padded:
                continue
            if len(dim) == 1:
                x = self.call_before(before, fill_tail, (x, d, self.length(dim[0][0]), fill))
                continue
            sizes = [self.size(e) for e, _ in dim]
            x = self.call_before(before, aten.unflatten.int, (x, d, sizes))
            for k in padded:
                x = self.call_before(before, fill_tail, (x, d + k, self.length(dim[k][0]), fill))
            x = self.call_before(before, aten.flatten.using_ints, (x, d, d + len(dim) - 1))
        return x

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
