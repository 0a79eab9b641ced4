"""Can a dynamic dimension be padded without changing the real rows? A per-graph analysis.

Bucketing runs a graph on inputs zero-padded along dynamic dimensions and slices the outputs
back. That is exact only if no value at a real position (index < real size along every padded
dimension) depends on a padded position. This module decides it for one Dynamo graph by
abstract interpretation of its ATen graph traced with symbolic sizes.

Every tensor dimension is described as a tuple of *atoms*, its factors in row-major order:
``(size, symbol)`` where ``symbol`` is the padded size symbol when the atom is that symbol's
dimension, else None (a clean factor, free of padded symbols). ``((s1, s1),)`` is a padded
dimension; ``((s0, None), (s1, s1))`` is a batch and a padded sequence flattened together (as
``nn.Linear`` does on 3-d inputs); ``((32, None),)`` is clean. The invariant: restricting each
padded atom to its real prefix gives exactly the unpadded computation's value.

Each op has a rule that computes its outputs' atoms from its inputs' or refuses, naming the
padded symbol and the reason (reductions, softmax, sorts, contractions over a padded dim,
batch norm statistics, attention over padded keys without a causal mask, flips, shifts, sizes
used as values, ops without a rule). A refused symbol is dropped and the analysis runs again
until what is left is safe.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from torch2xla._errors import source_line

aten = torch.ops.aten

Atom = tuple[sympy.Expr, Any]  # (size, padded symbol or None)
Dim = tuple[Atom, ...]
State = tuple[Dim, ...]

_ONE = sympy.Integer(1)


class Refusal(Exception):
    """Padding ``symbols`` would let padded rows reach real rows (``reason`` says how)."""

    def __init__(self, symbols, reason: str, node: torch.fx.Node | None = None) -> None:
        self.symbols = frozenset(symbols)
        where = ""
        if node is not None:
            where = f" ({node.target}, node {node.name!r}, at {source_line(node)})"
        self.reason = reason + where
        super().__init__(self.reason)


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What padding is safe in one ATen graph.

    Attributes:
        safe: symbols that can be padded together.
        refused: for every other candidate, why not.
        outputs: per user output, its dims' atoms (None for non-tensor outputs).
        mutated_inputs: positions (among the graph's user inputs) written back in place.
    """

    safe: frozenset
    refused: dict
    outputs: tuple
    mutated_inputs: tuple[int, ...]


def analyze(
    gm: torch.fx.GraphModule,
    candidates: set,
    num_lifted: int,
    mutations: Sequence[int],
    num_user_outputs: int,
) -> Analysis:
    """Find the candidate symbols that can be padded together in ``gm``.

    Args:
        gm: ATen graph traced with symbolic sizes (node ``meta["val"]`` holds fake values).
        candidates: sympy symbols of the dimensions one would like to pad.
        num_lifted: leading placeholders that are parameters/buffers owned by the graph.
        mutations: for each leading output, the placeholder index it is written back to.
        num_user_outputs: the outputs after the mutations.
    """
    cands = set(candidates)
    refused: dict = {}
    while True:
        try:
            outputs = _Interpreter(gm, cands, num_lifted, mutations).run()
        except Refusal as r:
            hit = (r.symbols & cands) or set(cands)
            for s in hit:
                refused.setdefault(s, r.reason)
            cands -= hit
            if not cands:
                return Analysis(frozenset(), refused, (), ())
            continue
        user = tuple(outputs[len(mutations) :])
        assert len(user) == num_user_outputs, (len(user), num_user_outputs)
        mutated = tuple(i - num_lifted for i in mutations if i >= num_lifted)
        return Analysis(frozenset(cands), refused, user, mutated)


# -- helpers on atoms ------------------------------------------------------------------------
def expr_of(value) -> sympy.Expr | None:
    """sympy expression of an int/SymInt (or fx node holding one); None for anything else."""
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return value.node.expr
    return None


def _shape(val) -> list[sympy.Expr]:
    return [sympy.Integer(s) if isinstance(s, int) else s.node.expr for s in val.shape]


def _pads(state) -> set:
    if state is None:
        return set()
    if isinstance(state, list):
        return set().union(*(_pads(s) for s in state)) if state else set()
    return {sym for dim in state for _, sym in dim if sym is not None}


def _dim_pads(dim: Dim) -> set:
    return {sym for _, sym in dim if sym is not None}


def _is_one(dim: Dim) -> bool:
    return all(e == _ONE for e, _ in dim)


def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    return a == b or sympy.expand(a - b) == 0


def _same_dim(a: Dim, b: Dim) -> bool:
    if len(a) != len(b):
        return False
    return all(sa == sb and _equal(ea, eb) for (ea, sa), (eb, sb) in zip(a, b))


def _norm(d: int, ndim: int) -> int:
    return d + ndim if d < 0 else d


class _Interpreter:
    def __init__(self, gm, cands: set, num_lifted: int, mutations: Sequence[int]) -> None:
        self.gm, self.cands, self.num_lifted, self.mutations = gm, cands, num_lifted, mutations
        self.env: dict[torch.fx.Node, Any] = {}
        self.node: torch.fx.Node | None = None

    # -- refusals and classification ----------------------------------------------------
    def refuse(self, symbols, reason: str):
        raise Refusal(set(symbols) & self.cands or self.cands, reason, self.node)

    def classify(self, expr: sympy.Expr) -> Dim:
        """A fresh dimension of size ``expr`` whose every position holds a valid value."""
        syms = expr.free_symbols & self.cands
        if not syms:
            return ((expr, None),)
        if expr in self.cands:
            return ((expr, expr),)
        self.refuse(syms, f"a dimension of size {expr} is derived from a padded size")

    def fresh(self, val) -> State:
        return tuple(self.classify(e) for e in _shape(val))

    def value_syms(self, value) -> set:
        if isinstance(value, list | tuple):
            return set().union(*(self.value_syms(v) for v in value)) if value else set()
        e = expr_of(value)
        return (e.free_symbols & self.cands) if e is not None else set()

    # -- the walk -----------------------------------------------------------------------
    def run(self) -> list:
        placeholders = list(self.gm.graph.find_nodes(op="placeholder"))
        for i, node in enumerate(placeholders):
            self.node = node
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                state = self.fresh(val)
                if i < self.num_lifted and _pads(state):
                    self.refuse(_pads(state), "a parameter or buffer has a padded dimension")
                self.env[node] = state
            else:
                self.env[node] = None
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "call_function":
                self.env[node] = self.call(node)
            elif node.op == "get_attr":
                val = getattr(self.gm, node.target, None)
                self.env[node] = self.fresh(val) if isinstance(val, torch.Tensor) else None
            elif node.op == "output":
                return self.outputs(node, placeholders)
        raise Refusal(self.cands, "the graph has no output")

    def outputs(self, node: torch.fx.Node, placeholders: list) -> list:
        outs = list(node.args[0])
        states = []
        for k, out in enumerate(outs):
            state = self.env.get(out) if isinstance(out, torch.fx.Node) else None
            if state is None:
                syms = self.value_syms(out)
                if syms:
                    self.refuse(syms, "the graph returns a padded size as a value")
            if k < len(self.mutations):
                target = self.mutations[k]
                if target < self.num_lifted and _pads(state):
                    self.refuse(_pads(state), "a buffer is updated from padded rows")
                if target >= self.num_lifted and _pads(state):
                    in_state = self.env[placeholders[target]]
                    if len(in_state) != len(state) or not all(
                        _same_dim(a, b) for a, b in zip(in_state, state)
                    ):
                        self.refuse(_pads(state), "an input is updated in place in another layout")
            states.append(state)
        return states

    def call(self, node: torch.fx.Node):
        target = node.target
        if target is operator.getitem:
            src = self.env.get(node.args[0])
            return src[node.args[1]] if isinstance(src, list) else None
        if not isinstance(target, torch._ops.OpOverload):
            # SymInt arithmetic (operator.mul, sym_float, ...): sizes, checked where used.
            if any(isinstance(a, torch.fx.Node) and _pads(self.env.get(a)) for a in node.args):
                self.refuse(_pads_of_args(self, node.args), f"no padding rule for {target}")
            return None
        bound = _bind(node)
        packet = target.overloadpacket
        rule = RULES.get(target) or RULES.get(packet)
        exempt = rule.size_args if rule is not None else frozenset()
        for name, value in bound.items():
            if name not in exempt:
                syms = self.value_syms(value) if not _is_tensor_arg(value) else set()
                if syms:
                    self.refuse(syms, f"uses a padded size as a value (argument {name!r})")
        if rule is not None:
            return rule.fn(self, node, bound)
        if torch.Tag.pointwise in target.tags:
            return _pointwise(self, node, bound)
        involved = set()
        for value in bound.values():
            for n in _nodes(value):
                involved |= _pads(self.env.get(n))
        if involved:
            self.refuse(involved, f"no padding rule for {packet}")
        val = node.meta.get("val")
        return _fresh_any(self, val)

    def state(self, value) -> State:
        st = self.env.get(value) if isinstance(value, torch.fx.Node) else None
        if st is None or isinstance(st, list):
            raise Refusal(self.cands, f"expected a tensor argument, got {value!r}", self.node)
        return st

    def out_shape(self, index: int | None = None) -> list[sympy.Expr]:
        val = self.node.meta["val"]
        if index is not None:
            val = val[index]
        return _shape(val)

    # -- shared rule pieces -------------------------------------------------------------
    def broadcast(self, states: Sequence[State], out: Sequence[sympy.Expr]) -> State:
        n = len(out)
        result = []
        for k in range(n):
            dims = []
            for st in states:
                j = k - (n - len(st))
                if j >= 0 and not _is_one(st[j]):
                    dims.append(st[j])
            if not dims:
                result.append(self.classify(out[k]))
                continue
            first = next((d for d in dims if _dim_pads(d)), dims[0])
            for d in dims:
                if (_dim_pads(d) or _dim_pads(first)) and not _same_dim(d, first):
                    self.refuse(
                        _dim_pads(d) | _dim_pads(first),
                        "combines a padded dimension with a differently laid out one",
                    )
            result.append(first)
        return tuple(result)

    def require_clean(self, dim: Dim, what: str) -> None:
        if _dim_pads(dim):
            self.refuse(_dim_pads(dim), what)


def _fresh_any(interp: _Interpreter, val):
    if isinstance(val, torch.Tensor):
        return interp.fresh(val)
    if isinstance(val, list | tuple):
        return [_fresh_any(interp, v) for v in val]
    return None


def _nodes(value) -> list[torch.fx.Node]:
    if isinstance(value, torch.fx.Node):
        return [value]
    if isinstance(value, list | tuple):
        return [n for v in value for n in _nodes(v)]
    return []


def _pads_of_args(interp: _Interpreter, args) -> set:
    return set().union(*(_pads(interp.env.get(n)) for n in _nodes(args))) if args else set()


def _is_tensor_arg(value) -> bool:
    if isinstance(value, torch.fx.Node):
        return isinstance(value.meta.get("val"), torch.Tensor | list | tuple)
    if isinstance(value, list | tuple):
        return any(_is_tensor_arg(v) for v in value)
    return False


def _bind(node: torch.fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    bound: dict[str, Any] = {}
    args = list(node.args)
    for i, arg in enumerate(schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            bound[arg.name] = args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            bound[arg.name] = None
    return bound


# -- the rule registry (rules: _padding_rules.py) ---------------------------------------------
@dataclasses.dataclass(frozen=True)
class Rule:
    fn: Callable
    size_args: frozenset = frozenset()


RULES: dict = {}


def rule(*ops, size_args: tuple[str, ...] = ()):
    def deco(fn):
        for op in ops:
            RULES[op] = Rule(fn, frozenset(size_args))
        return fn

    return deco


def _tensor_states(interp: _Interpreter, bound: dict) -> list[State]:
    states = []
    for value in bound.values():
        for n in _nodes(value):
            st = interp.env.get(n)
            if st is not None and not isinstance(st, list):
                states.append(st)
    return states


def _pointwise(interp: _Interpreter, node, bound):
    states = _tensor_states(interp, bound)
    val = node.meta["val"]
    if isinstance(val, list | tuple):
        return [interp.broadcast(states, _shape(v)) for v in val]
    return interp.broadcast(states, _shape(val))


# Registers the rules (after RULES exists).
from torch2xla.guards import _padding_rules  # noqa: F401
