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

The program reads each padded symbol's *real* value at run time where it needs it, so several
of those patterns are made exact instead of refused: each becomes a ``Fix``, a rewrite
of its node that ``_rewrite.py`` applies to the graph (ops of ``torch2xla/ops/_padded.py``).
Reductions, softmax and products over a padded dimension first set the positions past the
real length to the reduction's identity; ``cat`` along a padded dimension writes each later
operand at the real end of the ones before it; attention hides keys past the real length; an
integer size used as a value (``arange(n) + past_length``) reads the real value. A padded atom
may then be an expression ``a*s + b`` (``a >= 1``) of its symbol: the real rows are the first
``a*r + b`` of ``a*p + b`` (real value ``r``, bucket ``p``), as the cache after ``cat`` is.
Integer tensors whose real positions hold indices below a padded dimension's real length
(``arange`` of it) are tracked (``bounds``), so indexing that dimension with them is exact.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from torch2xla._errors import source_line
from torch2xla.ops._bounds import DIVISIONS, checks_values

aten = torch.ops.aten

_INDEX_DTYPES = frozenset({torch.int32, torch.int64})
# Ops whose every output position holds the value of one input position (real ones of real
# ones), so an index bound carries over.
_BOUND_KEEPING = frozenset(
    {
        aten.view.default,
        aten._unsafe_view.default,
        aten.reshape.default,
        aten.unsqueeze.default,
        aten.squeeze.default,
        aten.squeeze.dim,
        aten.squeeze.dims,
        aten.expand.default,
        aten.permute.default,
        aten.transpose.int,
        aten.clone.default,
        aten.alias.default,
        aten.lift_fresh_copy.default,
        aten._to_copy.default,
    }
)

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


@dataclasses.dataclass(frozen=True, eq=False)
class Fix:
    """A rewrite of one node that keeps its real positions exact on padded inputs, given the
    real values of ``symbols`` at run time (see ``_rewrite.Rewriter``).

    Attributes:
        node: the node rewritten.
        symbols: the symbols whose real values the rewrite reads.
        what: what the node does with the padded dimension, in words (for reports).
        apply: ``apply(rewriter)``, called once on the graph being rewritten.
    """

    node: torch.fx.Node
    symbols: frozenset
    what: str
    apply: Callable


@dataclasses.dataclass(frozen=True)
class SizeValue:
    """A user output that is a size expression, a Python number in eager (a returned
    ``x.shape[0] + 1``; ``layer.n += x.shape[0]`` written back by Dynamo: HF's sliding-window
    cache length). A padded program computes it at the bucket's sizes; the call returns its
    value at the real sizes instead (``PaddedEntry``)."""

    expr: sympy.Expr


@dataclasses.dataclass(frozen=True)
class Analysis:
    """What padding is safe in one ATen graph.

    Attributes:
        safe: symbols that can be padded together.
        refused: for every other candidate, why not.
        outputs: per user output, its dims' atoms (None for non-tensor outputs; a
            ``SizeValue`` for a size expression of padded symbols).
        mutated_inputs: positions (among the graph's user inputs) written back in place.
        fixes: the rewrites that padding ``safe`` needs.
        assumptions: size expressions that must be >= 0 at a call's real sizes for its padded
            run to be exact; each holds whenever eager runs without an error (an index is
            below the length it indexes), and a call where one fails is not padded.
    """

    safe: frozenset
    refused: dict
    outputs: tuple
    mutated_inputs: tuple[int, ...]
    fixes: tuple[Fix, ...] = ()
    assumptions: tuple[sympy.Expr, ...] = ()

    @property
    def lengths(self) -> tuple:
        """The symbols whose real values the rewritten program reads, in a fixed order."""
        return tuple(sorted({s for f in self.fixes for s in f.symbols}, key=str))


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
        interp = _Interpreter(gm, cands, num_lifted, mutations)
        try:
            outputs = interp.run()
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
        return Analysis(
            frozenset(cands),
            refused,
            user,
            mutated,
            tuple(interp.fixes),
            tuple(dict.fromkeys(interp.assumptions)),
        )


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


def linear_in(expr: sympy.Expr, sym, positive: bool = True) -> bool:
    """Whether ``expr`` is ``a*sym + b`` for integers ``a`` (``>= 1`` if ``positive``) and ``b``."""
    try:
        poly = sympy.Poly(expr, sym)
    except sympy.PolynomialError:
        return False
    if poly.degree() != 1:
        return False
    a, b = poly.coeff_monomial(sym), poly.coeff_monomial(1)
    return a.is_Integer and b.is_Integer and (int(a) >= 1 if positive else int(a) != 0)


def piecewise_linear_in(expr: sympy.Expr, sym) -> bool:
    """Whether ``expr`` is built from ``a*sym + b`` terms by sums, integer multiples, ``Max``
    and ``Min`` (``max(n - window + 1, 0)``: a sliding window's offset), and involves ``sym``:
    a value the rewritten program computes exactly from ``sym``'s real value (``Rewriter.length``)."""

    def ok(e) -> bool:
        if e.is_Integer or e == sym or linear_in(e, sym, positive=False):
            return True
        if isinstance(e, sympy.Add) or type(e).__name__ in ("Max", "Min"):
            return all(ok(a) for a in e.args)
        if isinstance(e, sympy.Mul):
            ints = [a for a in e.args if a.is_Integer]
            return len(ints) == len(e.args) - 1 and all(ok(a) for a in e.args)
        return False

    return sym in expr.free_symbols and ok(expr)


def padded_atom(dim: Dim) -> Atom | None:
    """The dim's only atom when it is a padded one (a dim that is not flattened)."""
    if len(dim) == 1 and dim[0][1] is not None:
        return dim[0]
    return None


def keeps_positions(dim: Dim) -> bool:
    """Whether every real position of ``dim`` has the index it has in the unpadded tensor,
    with the padding after all of them: no padded atom but the outermost one (ignoring
    size-1 atoms). ``(b*s)`` flattened from ``(b, s)`` with ``s`` padded does not: real row
    ``(1, 0)`` sits at ``p``, not ``r``, after padded positions (``(0, r)``..``(0, p-1)``), so
    an op that reads positions in order (a scan, ``tril``, a causal mask) would see them."""
    atoms = [a for a in dim if a[0] != _ONE]
    return all(s is None for _, s in atoms[1:])


class _Interpreter:
    def __init__(self, gm, cands: set, num_lifted: int, mutations: Sequence[int]) -> None:
        self.gm, self.cands, self.num_lifted, self.mutations = gm, cands, num_lifted, mutations
        self.env: dict[torch.fx.Node, Any] = {}
        # Integer tensors whose values at real positions are in [0, bound) (bound: a size).
        self.bounds: dict[torch.fx.Node, sympy.Expr] = {}
        self.fixes: list[Fix] = []
        self.assumptions: list[sympy.Expr] = []
        self.node: torch.fx.Node | None = None

    # -- refusals, fixes and classification ---------------------------------------------
    def refuse(self, symbols, reason: str):
        raise Refusal(set(symbols) & self.cands or self.cands, reason, self.node)

    def fix(self, symbols, what: str, apply: Callable) -> None:
        """Keep ``symbols`` padded by rewriting the current node with ``apply``."""
        self.fixes.append(Fix(self.node, frozenset(symbols), what, apply))

    def classify(self, expr: sympy.Expr) -> Dim:
        """A fresh dimension of size ``expr`` whose every position holds a valid value."""
        syms = expr.free_symbols & self.cands
        if not syms:
            return ((expr, None),)
        if expr in self.cands:
            return ((expr, expr),)
        if len(syms) == 1 and linear_in(expr, next(iter(syms))):
            return ((expr, next(iter(syms))),)
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
                val = out.meta.get("val") if isinstance(out, torch.fx.Node) else None
                if syms and (
                    k < len(self.mutations) or not isinstance(val, torch.SymInt | torch.SymBool)
                ):
                    self.refuse(syms, "the graph returns a padded size as a value")
                if syms:
                    state = SizeValue(expr_of(out))
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
        if isinstance(target, torch._ops.HigherOrderOperator):
            # (cond, scan, ...: their subgraphs are not analyzed; an operand, nested in the
            # op's tuples, with a padded dimension or a padded size keeps its symbol unpadded)
            involved = set()
            for n in _nodes((node.args, tuple(node.kwargs.values()))):
                state = self.env.get(n)
                involved |= _pads(state) if state is not None else self.value_syms(n)
            if involved:
                self.refuse(involved, f"no padding rule for {target.name()}")
            return _fresh_any(self, node.meta.get("val"))
        if not isinstance(target, torch._ops.OpOverload):
            # SymInt arithmetic (operator.mul, sym_float, ...): sizes, checked where used.
            if any(isinstance(a, torch.fx.Node) and _pads(self.env.get(a)) for a in node.args):
                self.refuse(_pads_of_args(self, node.args), f"no padding rule for {target}")
            return None
        bound = _bind(node)
        packet = target.overloadpacket
        rule = RULES.get(target) or RULES.get(packet)
        exempt = rule.size_args if rule is not None else frozenset()
        if rule is not None:
            pointwise = rule.fn is _pointwise or rule.pointwise
        else:
            pointwise = torch.Tag.pointwise in target.tags
        for name, value in bound.items():
            if name not in exempt:
                syms = self.value_syms(value) if not _is_tensor_arg(value) else set()
                if syms:
                    self.size_as_value(node, bound, name, value, syms, pointwise)
        if rule is not None:
            state = rule.fn(self, node, bound)
        elif pointwise:
            state = _pointwise(self, node, bound)
        else:
            involved = set()
            for value in bound.values():
                for n in _nodes(value):
                    involved |= _pads(self.env.get(n))
            if involved:
                self.refuse(involved, f"no padding rule for {packet}")
            state = _fresh_any(self, node.meta.get("val"))
        if checks_values(node):
            self._passing_tails(node, bound)
        self._keep_bound(node, bound)
        return state

    def _passing_tails(self, node: torch.fx.Node, bound: dict) -> None:
        """A lowering that checks values at run time (an index within its dimension, an
        integer divisor not zero: ``ops/_bounds.py``) checks the padded positions too, which
        hold whatever the ops before made of the zero padding (``i - 1`` is -1 there). Those
        positions of the checked operands are set to a value that passes first: 0 for an
        index (any dimension has it where eager's real indices are valid), 1 for a divisor."""
        division = node.target in DIVISIONS
        for name, value in bound.items():
            for k, n in enumerate(_nodes(value)):
                state = self.env.get(n)
                val = n.meta.get("val")
                if isinstance(state, list) or not _pads(state) or not isinstance(val, torch.Tensor):
                    continue
                if division and name != "other":
                    continue
                if not division and (val.dtype.is_floating_point or val.dtype.is_complex):
                    continue
                fill = "one" if division else "zero"
                what = f"checks the values of {name!r} (the padded positions are set to {fill})"

                def apply(rw, node=node, name=name, k=k, state=state, fill=fill):
                    current = rw.arg(node, name)
                    if isinstance(current, list | tuple):
                        items = list(current)
                        at = [i for i, v in enumerate(items) if isinstance(v, torch.fx.Node)][k]
                        items[at] = rw.fill_padded(node, items[at], state, fill)
                        rw.set_arg(node, name, items)
                    else:
                        rw.set_arg(node, name, rw.fill_padded(node, current, state, fill))

                self.fix(_pads(state), what, apply)

    def size_as_value(self, node, bound: dict, name: str, value, syms: set, pointwise: bool):
        """A padded size used as a value: read the real value at run time, or refuse."""
        reason = f"uses a padded size as a value (argument {name!r})"
        arg = next((a for a in node.target._schema.arguments if a.name == name), None)
        e = expr_of(value)
        if not (
            pointwise
            and isinstance(value, torch.fx.Node)
            and arg is not None
            and isinstance(arg.type, torch.TensorType)
            and e is not None
            and len(syms) == 1
            and piecewise_linear_in(e, next(iter(syms)))
        ):
            self.refuse(syms, reason)
        dtypes = [
            n.meta["val"].dtype
            for v in bound.values()
            for n in _nodes(v)
            if isinstance(n.meta.get("val"), torch.Tensor)
        ]
        dtype = functools.reduce(torch.promote_types, dtypes) if dtypes else None
        # The real value becomes a 0-d tensor of the other operands' dtype: exactly the
        # Python int's value and promotion, for these dtypes.
        if dtype not in (torch.int32, torch.int64, torch.float32, torch.float64):
            self.refuse(syms, f"{reason} with {dtype} operands")

        def apply(rw, node=node, name=name, e=e, dtype=dtype):
            rw.set_arg(node, name, rw.length(e, dtype))

        self.fix(syms, reason, apply)

    def _keep_bound(self, node: torch.fx.Node, bound: dict) -> None:
        """Carry an index bound through ops that move integer values without changing them."""
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dtype not in _INDEX_DTYPES:
            return
        first = next(iter(bound.values()), None)
        b = self.bounds.get(first) if isinstance(first, torch.fx.Node) else None
        if b is None:
            return
        target = node.target
        keeps = (
            target in _BOUND_KEEPING
            or (
                target is aten.add.Tensor
                and expr_of(bound.get("other")) == 0
                and expr_of(bound.get("alpha", 1)) == 1
            )
            or (  # a slice that keeps everything
                target is aten.slice.Tensor
                and expr_of(bound.get("start") or 0) == 0
                and expr_of(bound.get("step")) == 1
                and _shape(val) == _shape(first.meta["val"])
            )
        )
        if keeps:
            self.bounds[node] = b

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


# -- the rule registry (rules: _padding_rules.py, _padding_reductions.py) -------------------
@dataclasses.dataclass(frozen=True)
class Rule:
    fn: Callable
    size_args: frozenset = frozenset()
    pointwise: bool = False  # (an elementwise op's rule: a padded size as a value is read)


RULES: dict = {}


def rule(*ops, size_args: tuple[str, ...] = (), pointwise: bool = False):
    def deco(fn):
        for op in ops:
            RULES[op] = Rule(fn, frozenset(size_args), pointwise)
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
from torch2xla.guards.bucketing import _padding_reductions, _padding_rules  # noqa: F401
