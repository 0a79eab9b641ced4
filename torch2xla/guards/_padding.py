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
from collections import deque
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
                    self.refuse(syms, f"uses the padded size {sorted(map(str, syms))} as a value")
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


# -- rules -----------------------------------------------------------------------------------
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


for _op in (
    aten.where.self,
    aten.masked_fill.Scalar,
    aten.masked_fill.Tensor,
    aten.clone.default,
    aten._to_copy.default,
    aten.alias.default,
    aten.lift_fresh_copy.default,
    aten.copy.default,
    aten.fill.Scalar,
    aten.fill.Tensor,
    aten.native_dropout.default,
    aten.bernoulli.default,
    aten.bernoulli.p,
    aten.rsub.Tensor,
    aten.rsub.Scalar,
    aten.floor_divide.default,
    aten.floor_divide.Scalar,
    aten.tril.default,  # positions relative to the top-left corner: padding stays at the end
    aten.triu.default,
    aten.uniform.default,
    aten.normal.Tensor_Tensor,
    aten.normal.Tensor_float,
    aten.normal.float_Tensor,
    aten.empty_like.default,
    aten.zeros_like.default,
    aten.ones_like.default,
    aten.full_like.default,
    aten.rand_like.default,
    aten.randn_like.default,
    aten.detach.default,
    aten.logit.default,
    aten.nan_to_num.default,
):
    RULES[_op] = Rule(_pointwise)


@rule(aten._assert_tensor_metadata.default, aten._assert_scalar.default)
def _no_output(interp, node, bound):
    return None


@rule(aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int, aten.sym_storage_offset)
def _size_query(interp, node, bound):
    return None


@rule(aten._local_scalar_dense.default)
def _item(interp, node, bound):
    pads = _pads(interp.state(bound["self"]))
    if pads:
        interp.refuse(pads, "reads a padded tensor into Python")


# views and layout -----------------------------------------------------------------------
@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default, size_args=("size", "shape"))
def _view(interp, node, bound):
    state = interp.state(bound["self"])
    out = interp.out_shape()
    if not _pads(state):
        return tuple(interp.classify(e) for e in out)
    atoms: list[Atom] = []
    for dim in state:
        for e, s in dim:
            if e == _ONE:
                continue
            if s is None and atoms and atoms[-1][1] is None:
                atoms[-1] = (atoms[-1][0] * e, None)
            else:
                atoms.append((e, s))
    queue = deque(atoms)
    result = []
    for o in out:
        if o == _ONE:
            result.append(((_ONE, None),))
            continue
        group: list[Atom] = []
        rest = o
        while rest != _ONE:
            if not queue:
                interp.refuse(_pads(state), "reshapes a padded dimension into a different layout")
            e, s = queue.popleft()
            num, den = sympy.fraction(sympy.cancel(rest / e))
            if den == _ONE:
                group.append((e, s))
                rest = num
                continue
            num2, den2 = sympy.fraction(sympy.cancel(e / rest))
            if s is not None or den2 != _ONE:
                interp.refuse(
                    _pads(state), "reshapes a padded dimension into a different layout"
                )
            group.append((rest, None))
            queue.appendleft((num2, None))
            rest = _ONE
        result.append(tuple(group))
    if any(e != _ONE for e, _ in queue):
        interp.refuse(_pads(state), "reshapes a padded dimension into a different layout")
    return tuple(result)


@rule(aten.view.dtype)
def _view_dtype(interp, node, bound):
    state = interp.state(bound["self"])
    out = interp.out_shape()
    if not state or _equal(out[-1], sympy.Mul(*[e for e, _ in state[-1]])):
        return state
    interp.require_clean(state[-1], "reinterprets the padded last dimension as another dtype")
    return (*state[:-1], interp.classify(out[-1]))


@rule(aten.expand.default, size_args=("size",))
def _expand(interp, node, bound):
    state = interp.state(bound["self"])
    out = interp.out_shape()
    n, m = len(state), len(out)
    result = []
    for k in range(m):
        j = k - (m - n)
        if j < 0 or (_is_one(state[j]) and out[k] != _ONE):
            result.append(interp.classify(out[k]))  # broadcast: every position is valid
        else:
            result.append(state[j])
    return tuple(result)


@rule(aten.permute.default)
def _permute(interp, node, bound):
    state = interp.state(bound["self"])
    return tuple(state[_norm(d, len(state))] for d in bound["dims"])


@rule(aten.transpose.int)
def _transpose(interp, node, bound):
    state = list(interp.state(bound["self"]))
    if not state:
        return ()
    a, b = _norm(bound["dim0"], len(state)), _norm(bound["dim1"], len(state))
    state[a], state[b] = state[b], state[a]
    return tuple(state)


@rule(aten.t.default)
def _t(interp, node, bound):
    return tuple(reversed(interp.state(bound["self"])))


@rule(aten.unsqueeze.default)
def _unsqueeze(interp, node, bound):
    state = list(interp.state(bound["self"]))
    state.insert(_norm(bound["dim"], len(state) + 1), ((_ONE, None),))
    return tuple(state)


@rule(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def _squeeze(interp, node, bound):
    state = interp.state(bound["self"])
    dims = bound.get("dim")
    if dims is None:
        dims = range(len(state))
    elif isinstance(dims, int):
        dims = [dims]
    drop = {_norm(d, len(state)) for d in dims} if state else set()
    return tuple(d for i, d in enumerate(state) if not (i in drop and _is_one(d)))


def _slice_like(interp, state, d, start, length_expr, step=1):
    """A contiguous range along ``d``; the output's length is ``length_expr``."""
    dim = state[d]
    if not _dim_pads(dim):
        return (*state[:d], interp.classify(length_expr), *state[d + 1 :])
    full = len(dim) == 1 and _equal(length_expr, dim[0][0])
    if full and expr_of(start) == 0 and step == 1:
        return state
    interp.refuse(_dim_pads(dim), f"takes a part of padded dimension {d}")


@rule(aten.slice.Tensor, size_args=("end",))
def _slice(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    start = bound["start"] if bound["start"] is not None else 0
    return _slice_like(interp, state, d, start, interp.out_shape()[d], bound["step"])


@rule(aten.narrow.default, size_args=("length",))
def _narrow(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    return _slice_like(interp, state, d, bound["start"], interp.out_shape()[d])


@rule(aten.select.int)
def _select(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    interp.require_clean(state[d], f"selects one index of padded dimension {d}")
    return (*state[:d], *state[d + 1 :])


@rule(aten.split.Tensor, aten.split_with_sizes.default)
def _split(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    interp.require_clean(state[d], f"splits padded dimension {d}")
    return [
        (*state[:d], interp.classify(_shape(v)[d]), *state[d + 1 :]) for v in node.meta["val"]
    ]


@rule(aten.unbind.int)
def _unbind(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    interp.require_clean(state[d], f"unbinds padded dimension {d}")
    return [(*state[:d], *state[d + 1 :]) for _ in node.meta["val"]]


@rule(aten.cat.default)
def _cat(interp, node, bound):
    out = interp.out_shape()
    d = _norm(bound["dim"], len(out))
    states = [
        interp.state(t) for t in bound["tensors"] if len(_shape(t.meta["val"])) == len(out)
    ]
    for st in states:
        interp.require_clean(st[d], f"concatenates along padded dimension {d}")
    others = [tuple(dim for i, dim in enumerate(st) if i != d) for st in states]
    merged = list(interp.broadcast(others, [e for i, e in enumerate(out) if i != d]))
    merged.insert(d, interp.classify(out[d]))
    return tuple(merged)


@rule(aten.stack.default)
def _stack(interp, node, bound):
    out = interp.out_shape()
    d = _norm(bound["dim"], len(out))
    states = [interp.state(t) for t in bound["tensors"]]
    merged = list(interp.broadcast(states, [e for i, e in enumerate(out) if i != d]))
    merged.insert(d, ((out[d], None),))
    return tuple(merged)


@rule(aten.constant_pad_nd.default)
def _constant_pad(interp, node, bound):
    state = interp.state(bound["self"])
    out = interp.out_shape()
    pad = list(bound["pad"])
    result = list(state)
    for k in range(len(pad) // 2):
        d = len(state) - 1 - k
        if expr_of(pad[2 * k]) != 0 or expr_of(pad[2 * k + 1]) != 0:
            interp.require_clean(state[d], f"pads padded dimension {d} again")
            result[d] = interp.classify(out[d])
    return tuple(result)


@rule(aten.flip.default)
def _flip(interp, node, bound):
    state = interp.state(bound["self"])
    for d in bound["dims"]:
        interp.require_clean(state[_norm(d, len(state))], "flips a padded dimension")
    return state


@rule(aten.roll.default)
def _roll(interp, node, bound):
    state = interp.state(bound["self"])
    dims = list(bound["dims"]) or list(range(len(state)))
    for d in dims:
        interp.require_clean(state[_norm(d, len(state))], "rolls a padded dimension")
    return state


@rule(aten.repeat.default)
def _repeat(interp, node, bound):
    state = interp.state(bound["self"])
    out = interp.out_shape()
    reps = list(bound["repeats"])
    lead = len(reps) - len(state)
    result = [interp.classify(out[k]) for k in range(lead)]
    for j, dim in enumerate(state):
        if expr_of(reps[lead + j]) != 1:
            interp.require_clean(dim, f"repeats padded dimension {j}")
            dim = interp.classify(out[lead + j])
        result.append(dim)
    return tuple(result)


@rule(aten.diagonal.default)
def _diagonal(interp, node, bound):
    state = interp.state(bound["self"])
    d1, d2 = _norm(bound["dim1"], len(state)), _norm(bound["dim2"], len(state))
    interp.require_clean(state[d1], "takes a diagonal over a padded dimension")
    interp.require_clean(state[d2], "takes a diagonal over a padded dimension")
    rest = [dim for i, dim in enumerate(state) if i not in (d1, d2)]
    return (*rest, interp.classify(interp.out_shape()[-1]))


# reductions, scans, softmax, sorting -------------------------------------------------------
def _reduce(interp, state: State, dims, keepdim: bool, what: str) -> State:
    n = len(state)
    if dims is None or (isinstance(dims, list | tuple) and len(dims) == 0):
        dims = range(n)
    elif isinstance(dims, int):
        dims = [dims]
    dims = {_norm(d, n) for d in dims} if n else set()
    for d in sorted(dims):
        interp.require_clean(state[d], f"{what} over padded dimension {d}")
    if keepdim:
        return tuple(((_ONE, None),) if i in dims else dim for i, dim in enumerate(state))
    return tuple(dim for i, dim in enumerate(state) if i not in dims)


@rule(
    aten.sum.dim_IntList,
    aten.mean.dim,
    aten.amax.default,
    aten.amin.default,
    aten.any.dim,
    aten.any.dims,
    aten.all.dim,
    aten.all.dims,
    aten.prod.dim_int,
    aten.logsumexp.default,
    aten.var.correction,
    aten.std.correction,
    aten.var_mean.correction,
    aten.argmax.default,
    aten.argmin.default,
    aten.max.dim,
    aten.min.dim,
    aten.linalg_vector_norm.default,
)
def _reduction(interp, node, bound):
    state = interp.state(bound["self"])
    out = _reduce(interp, state, bound.get("dim"), bool(bound.get("keepdim")), "reduces")
    return [out, out] if isinstance(node.meta["val"], list | tuple) else out


@rule(
    aten.sum.default,
    aten.mean.default,
    aten.max.default,
    aten.min.default,
    aten.any.default,
    aten.all.default,
    aten.prod.default,
)
def _full_reduction(interp, node, bound):
    return _reduce(interp, interp.state(bound["self"]), None, False, "reduces")


@rule(aten.cumsum.default, aten.cumprod.default, aten.logcumsumexp.default)
def _scan(interp, node, bound):
    # A prefix scan: real positions only see earlier positions, and padding sits at the end.
    return interp.state(bound["self"])


@rule(aten.cummax.default, aten.cummin.default)
def _scan2(interp, node, bound):
    state = interp.state(bound["self"])
    return [state, state]


@rule(aten._softmax.default, aten._log_softmax.default)
def _softmax(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state)) if state else 0
    if state:
        interp.require_clean(state[d], f"normalizes (softmax) over padded dimension {d}")
    return state


@rule(aten.sort.default, aten.sort.stable, aten.topk.default)
def _sort(interp, node, bound):
    state = interp.state(bound["self"])
    if not state:
        return [state, state]
    d = _norm(bound["dim"], len(state))
    interp.require_clean(state[d], f"sorts along padded dimension {d}")
    out = (*state[:d], interp.classify(_shape(node.meta["val"][0])[d]), *state[d + 1 :])
    return [out, out]


# matrix products, convolutions, pooling -----------------------------------------------------
def _contract(interp, a: Dim, b: Dim) -> None:
    interp.require_clean(a, "contracts (matrix product) over a padded dimension")
    interp.require_clean(b, "contracts (matrix product) over a padded dimension")


@rule(aten.mm.default)
def _mm(interp, node, bound):
    a, b = interp.state(bound["self"]), interp.state(bound["mat2"])
    _contract(interp, a[1], b[0])
    return (a[0], b[1])


@rule(aten.addmm.default)
def _addmm(interp, node, bound):
    a, b = interp.state(bound["mat1"]), interp.state(bound["mat2"])
    _contract(interp, a[1], b[0])
    return interp.broadcast([interp.state(bound["self"]), (a[0], b[1])], interp.out_shape())


@rule(aten.bmm.default)
def _bmm(interp, node, bound):
    a, b = interp.state(bound["self"]), interp.state(bound["mat2"])
    _contract(interp, a[2], b[1])
    batch = interp.broadcast([a[:1], b[:1]], interp.out_shape()[:1])
    return (*batch, a[1], b[2])


@rule(aten.baddbmm.default)
def _baddbmm(interp, node, bound):
    a, b = interp.state(bound["batch1"]), interp.state(bound["batch2"])
    _contract(interp, a[2], b[1])
    out = interp.out_shape()
    batch = interp.broadcast([a[:1], b[:1]], out[:1])
    return interp.broadcast([interp.state(bound["self"]), (*batch, a[1], b[2])], out)


@rule(aten.mv.default)
def _mv(interp, node, bound):
    a, v = interp.state(bound["self"]), interp.state(bound["vec"])
    _contract(interp, a[1], v[0])
    return (a[0],)


@rule(aten.addmv.default)
def _addmv(interp, node, bound):
    a, v = interp.state(bound["mat"]), interp.state(bound["vec"])
    _contract(interp, a[1], v[0])
    return interp.broadcast([interp.state(bound["self"]), (a[0],)], interp.out_shape())


@rule(aten.dot.default, aten.vdot.default)
def _dot(interp, node, bound):
    a, b = interp.state(bound["self"]), interp.state(bound["other" if "other" in bound else "tensor"])
    _contract(interp, a[0], b[0])
    return ()


@rule(aten.matmul.default)
def _matmul(interp, node, bound):
    a, b = interp.state(bound["self"]), interp.state(bound["other"])
    out = interp.out_shape()
    if len(a) == 1 and len(b) == 1:
        _contract(interp, a[0], b[0])
        return ()
    ka = a[-1]
    kb = b[0] if len(b) == 1 else b[-2]
    _contract(interp, ka, kb)
    rows = () if len(a) == 1 else (a[-2],)
    cols = () if len(b) == 1 else (b[-1],)
    nbatch = len(out) - len(rows) - len(cols)
    batch = interp.broadcast([a[:-2] if len(a) > 1 else (), b[:-2] if len(b) > 1 else ()], out[:nbatch])
    return (*batch, *rows, *cols)


@rule(aten.convolution.default)
def _conv(interp, node, bound):
    x = interp.state(bound["input"])
    for d in range(1, len(x)):
        interp.require_clean(x[d], f"convolves over padded dimension {d}")
    for dim in interp.state(bound["weight"]):
        interp.require_clean(dim, "the convolution weight is padded")
    out = interp.out_shape()
    return (x[0], *(interp.classify(e) for e in out[1:]))


def _pool(spatial: int):
    def fn(interp, node, bound):
        x = interp.state(bound["self"])
        for d in range(len(x) - spatial, len(x)):
            interp.require_clean(x[d], f"pools over padded dimension {d}")
        val = node.meta["val"]
        outs = val if isinstance(val, list | tuple) else [val]
        states = []
        for v in outs:
            shape = _shape(v)
            states.append((*x[: len(x) - spatial], *(interp.classify(e) for e in shape[-spatial:])))
        return states if isinstance(val, list | tuple) else states[0]

    return fn


for _op, _k in (
    (aten.avg_pool1d.default, 1),
    (aten.adaptive_avg_pool1d.default, 1),
    (aten.avg_pool2d.default, 2),
    (aten.max_pool2d_with_indices.default, 2),
    (aten._adaptive_avg_pool2d.default, 2),
    (aten.avg_pool3d.default, 3),
    (aten.max_pool3d_with_indices.default, 3),
    (aten._adaptive_avg_pool3d.default, 3),
):
    RULES[_op] = Rule(_pool(_k))


# normalization ------------------------------------------------------------------------------
@rule(aten.native_layer_norm.default, size_args=("normalized_shape",))
def _layer_norm(interp, node, bound):
    x = interp.state(bound["input"])
    k = len(bound["normalized_shape"])
    for d in range(len(x) - k, len(x)):
        interp.require_clean(x[d], f"normalizes (layer norm) over padded dimension {d}")
    stats = (*x[: len(x) - k], *(((_ONE, None),) for _ in range(k)))
    return [x, stats, stats]


@rule(aten.native_group_norm.default)
def _group_norm(interp, node, bound):
    x = interp.state(bound["input"])
    for d in range(1, len(x)):
        interp.require_clean(x[d], f"normalizes (group norm) over padded dimension {d}")
    val = node.meta["val"]
    return [x, *((x[0], interp.classify(_shape(v)[1])) for v in val[1:])]


def _batch_norm(training_arg: str | None):
    def fn(interp, node, bound):
        x = interp.state(bound["input"])
        training = bool(bound[training_arg]) if training_arg else False
        if training and _pads(x):
            d = next(i for i, dim in enumerate(x) if _dim_pads(dim))
            interp.refuse(
                _pads(x),
                f"batch norm in training mode takes statistics over padded dimension {d}",
            )
        if len(x) > 1:
            interp.require_clean(x[1], "batch norm over a padded channel dimension")
        return [x, *(interp.fresh(v) for v in node.meta["val"][1:])]

    return fn


RULES[aten._native_batch_norm_legit_no_training.default] = Rule(_batch_norm(None))
RULES[aten._native_batch_norm_legit_functional.default] = Rule(_batch_norm("training"))
RULES[aten._native_batch_norm_legit.default] = Rule(_batch_norm("training"))
RULES[aten._native_batch_norm_legit.no_stats] = Rule(_batch_norm("training"))
RULES[aten.native_batch_norm.default] = Rule(_batch_norm("training"))


# indexing -----------------------------------------------------------------------------------
@rule(aten.embedding.default)
def _embedding(interp, node, bound):
    w = interp.state(bound["weight"])
    for dim in w:
        interp.require_clean(dim, "the embedding table is padded")
    return (*interp.state(bound["indices"]), w[1])


@rule(aten.index_select.default)
def _index_select(interp, node, bound):
    x, idx = interp.state(bound["self"]), interp.state(bound["index"])
    if not x:
        return ()
    d = _norm(bound["dim"], len(x))
    interp.require_clean(x[d], f"indexes into padded dimension {d}")
    return (*x[:d], idx[0] if idx else ((_ONE, None),), *x[d + 1 :])


@rule(aten.gather.default)
def _gather(interp, node, bound):
    x = interp.state(bound["self"])
    if x:
        interp.require_clean(x[_norm(bound["dim"], len(x))], "gathers along a padded dimension")
    return interp.state(bound["index"])


@rule(aten.index.Tensor)
def _index(interp, node, bound):
    x = interp.state(bound["self"])
    indices = list(bound["indices"])
    positions = [i for i, t in enumerate(indices) if t is not None]
    for i in positions:
        interp.require_clean(x[i], f"indexes into padded dimension {i}")
        is_mask = indices[i].meta["val"].dtype in (torch.bool, torch.uint8)
        if is_mask and (_pads(x) or _pads(interp.env.get(indices[i]))):
            interp.refuse(_pads(x), "indexes with a boolean mask")
    idx_states = [interp.state(indices[i]) for i in positions]
    out = interp.out_shape()
    contiguous = positions == list(range(positions[0], positions[-1] + 1)) if positions else True
    rest_before = [x[i] for i in range(positions[0])] if contiguous and positions else []
    rest_after = [x[i] for i in range(len(x)) if i not in positions and (not contiguous or i > positions[-1])]
    nb = len(out) - len(rest_before) - len(rest_after)
    start = len(rest_before) if contiguous else 0
    middle = interp.broadcast(idx_states, out[start : start + nb])
    return (*rest_before, *middle, *rest_after)


@rule(aten.slice_scatter.default)
def _slice_scatter(interp, node, bound):
    x, src = interp.state(bound["self"]), interp.state(bound["src"])
    d = _norm(bound["dim"], len(x))
    interp.require_clean(x[d], f"writes a part of padded dimension {d}")
    interp.require_clean(src[d], f"writes a part of padded dimension {d}")
    out = interp.out_shape()
    merged = list(interp.broadcast([x[:d] + x[d + 1 :], src[:d] + src[d + 1 :]], out[:d] + out[d + 1 :]))
    merged.insert(d, x[d])
    return tuple(merged)


@rule(aten.select_scatter.default)
def _select_scatter(interp, node, bound):
    x, src = interp.state(bound["self"]), interp.state(bound["src"])
    d = _norm(bound["dim"], len(x))
    interp.require_clean(x[d], f"writes one index of padded dimension {d}")
    out = interp.out_shape()
    merged = list(interp.broadcast([x[:d] + x[d + 1 :], src], out[:d] + out[d + 1 :]))
    merged.insert(d, x[d])
    return tuple(merged)


# attention ----------------------------------------------------------------------------------
def _attention(interp, node, bound):
    q, k, v = (interp.state(bound[n]) for n in ("query", "key", "value"))
    mask = bound.get("attn_mask", bound.get("attn_bias"))
    interp.require_clean(q[-1], "attention over a padded head dimension")
    interp.require_clean(k[-1], "attention over a padded head dimension")
    interp.require_clean(v[-1], "attention over a padded head dimension")
    keys = k[-2]
    if _dim_pads(keys) or _dim_pads(v[-2]):
        if not _same_dim(keys, v[-2]):
            interp.refuse(_dim_pads(keys) | _dim_pads(v[-2]), "keys and values padded differently")
        causal = bool(bound.get("is_causal")) and mask is None and _same_dim(q[-2], keys)
        if not causal:
            interp.refuse(
                _dim_pads(keys),
                "attends over padded keys without a causal mask (padded keys would get weight)",
            )
    val = node.meta["val"]
    out_val = val[0] if isinstance(val, list | tuple) else val
    out = _shape(out_val)
    batch = interp.broadcast([q[:-2], k[:-2], v[:-2]], out[:-2])
    if mask is not None:
        m = interp.state(mask)
        if m and _dim_pads(m[-1]):
            interp.refuse(_dim_pads(m[-1]), "the attention mask is padded along the keys")
        rows = interp.broadcast([q[:-1] if len(m) < 2 else (*q[:-2], q[-2]), m[:-1]], out[:-1])
        qrows = rows[-1]
    else:
        qrows = q[-2]
    result = (*batch, qrows, v[-1])
    if not isinstance(val, list | tuple):
        return result
    states = [result]
    for extra in val[1:]:
        if isinstance(extra, torch.Tensor):
            shape = _shape(extra)
            if len(shape) == len(out) - 1 and shape[: len(batch)] == out[: len(batch)]:
                states.append((*batch, qrows))  # logsumexp: (batch..., L)
            else:
                states.append(interp.fresh(extra))
        else:
            states.append(None)
    return states


for _name in (
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
):
    if hasattr(aten, _name):
        RULES[getattr(aten, _name)] = Rule(_attention)


@rule(aten._transformer_encoder_layer_fwd.default)
def _encoder_layer(interp, node, bound):
    src = interp.state(bound["src"])
    for d in range(1, len(src)):
        interp.require_clean(src[d], f"self-attention over padded dimension {d}")
    mask = bound.get("mask")
    if mask is not None and _pads(interp.state(mask)):
        interp.refuse(_pads(interp.state(mask)), "the attention mask is padded")
    return src


# factories ----------------------------------------------------------------------------------
@rule(aten.arange.default, aten.arange.start, aten.arange.start_step, size_args=("end",))
def _arange(interp, node, bound):
    # Values start + i * step: the first L are the same whatever the end, so a length of
    # exactly the padded size is a valid padded dimension.
    return interp.fresh(node.meta["val"])


@rule(
    aten.full.default,
    aten.zeros.default,
    aten.ones.default,
    aten.empty.memory_format,
    aten.rand.default,
    aten.randn.default,
    aten.randint.default,
    aten.randint.low,
    aten.new_zeros.default,
    aten.new_ones.default,
    aten.new_empty.default,
    aten.new_full.default,
    size_args=("size",),
)
def _factory(interp, node, bound):
    return interp.fresh(node.meta["val"])


@rule(aten.empty_strided.default, aten.new_empty_strided.default, size_args=("size", "stride"))
def _factory_strided(interp, node, bound):
    return interp.fresh(node.meta["val"])


@rule(aten.scalar_tensor.default)
def _scalar_tensor(interp, node, bound):
    return ()
