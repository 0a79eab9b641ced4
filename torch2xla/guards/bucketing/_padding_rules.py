"""Padding rules per ATen op: how each op moves padded dimensions, or why it cannot.

Every rule takes ``(interp, node, bound)`` (the interpreter of ``_padding.py``, the fx node and
its arguments by schema name) and returns the output's dims as atoms, a list of them for ops
with several outputs, or refuses through ``interp.refuse``/``interp.require_clean``. Ops that
carry ``torch.Tag.pointwise`` and have no rule here broadcast their inputs' atoms. Rules that
can keep a padded dimension exact by reading its real length at run time record a ``Fix``
through ``interp.fix``.
"""

from __future__ import annotations

from collections import deque

import sympy
import torch

from torch2xla.guards.bucketing._padding import (
    _ONE,
    RULES,
    Atom,
    Dim,
    Rule,
    State,
    _bind,
    _dim_pads,
    _equal,
    _is_one,
    _norm,
    _pads,
    _pointwise,
    _same_dim,
    _shape,
    expr_of,
    padded_atom,
    rule,
)
from torch2xla.ops import _padded  # noqa: F401  (defines the ops the fixes insert)
from torch2xla.ops._sdpa import sdpa

aten = torch.ops.aten
fill_tail = torch.ops.torch2xla.fill_tail.default
write_at = torch.ops.torch2xla.write_at.default
key_mask = torch.ops.torch2xla.key_mask.default
slice_at = torch.ops.torch2xla.slice_at.default


def _mask(interp, node, arg: str, state: State, d: int, fill: str, what: str) -> None:
    """Set the positions of ``node``'s argument ``arg`` past the real length of its padded
    dimension ``d`` to ``fill`` before ``node`` reads it (``fill_tail``)."""
    atom = padded_atom(state[d])
    if atom is None:
        interp.refuse(_dim_pads(state[d]), f"{what} (flattened with another dimension)")
    size, sym = atom

    def apply(rw):
        x = rw.arg(node, arg)
        rw.set_arg(node, arg, rw.call_before(node, fill_tail, (x, d, rw.length(size), fill)))

    interp.fix({sym}, what, apply)


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
def _exact_division(expr: sympy.Expr) -> sympy.Expr:
    """``a // b`` as ``a / b``: in a view's sizes the division is exact (numels are equal)."""
    return expr.replace(
        lambda e: type(e).__name__ in ("FloorDiv", "CleanDiv"), lambda e: e.args[0] / e.args[1]
    )


@rule(
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, size_args=("size", "shape")
)
def _view(interp, node, bound):
    state = interp.state(bound["self"])
    out = interp.out_shape()
    if not _pads(state):
        return tuple(interp.classify(e) for e in out)
    # Row-major factors of the input, consecutive clean factors merged; then each output
    # dim takes whole factors, splitting only clean ones: a padded factor must stay whole.
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
    what = "reshapes a padded dimension into a different layout"
    for o in out:
        if o == _ONE:
            result.append(((_ONE, None),))
            continue
        group: list[Atom] = []
        rest = _exact_division(o)
        while rest != _ONE:
            if not queue:
                interp.refuse(_pads(state), what)
            e, s = queue.popleft()
            num, den = sympy.fraction(sympy.cancel(rest / e))
            if den == _ONE:
                group.append((e, s))
                rest = num
                continue
            if s is not None:
                interp.refuse({s}, what)
            if rest.free_symbols & interp.cands:
                interp.refuse(rest.free_symbols & interp.cands, what)
            # A clean factor may split anyhow: only padded factors' places matter.
            group.append((rest, None))
            queue.appendleft((sympy.cancel(e / rest), None))
            rest = _ONE
        result.append(tuple(group))
    if any(e != _ONE for e, _ in queue):
        interp.refuse(_pads(state), what)
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


def _slice_like(interp, state, d, start, length_expr, step=1, node=None, end=None):
    """A contiguous range along ``d``; the output's length is ``length_expr``."""
    dim = state[d]
    if not _dim_pads(dim):
        return (*state[:d], interp.classify(length_expr), *state[d + 1 :])
    full = len(dim) == 1 and _equal(length_expr, dim[0][0])
    if full and expr_of(start) == 0 and step == 1:
        return state
    what = f"takes a part of padded dimension {d}"
    atom, first = padded_atom(dim), expr_of(start)
    if atom is None or step != 1 or first is None or not first.is_Integer or node is None:
        interp.refuse(_dim_pads(dim), what)
    size, sym = atom
    last = expr_of(end) if end is not None else None
    to_end = last is None or (last.is_Integer and int(last) >= 2**62)
    if int(first) >= 0 and (to_end or (last.is_Integer and int(last) < 0)):
        # x[:, c:] or x[:, c:-k]: the real rows still come first, fewer of them.
        return (*state[:d], interp.classify(length_expr), *state[d + 1 :])
    if int(first) >= 0 and length_expr.is_Integer and last.is_Integer and int(last) > 0:
        # x[:, :k]: a constant length means the trace proved k real rows.
        return (*state[:d], ((length_expr, None),), *state[d + 1 :])
    if int(first) < 0 and (to_end or (last.is_Integer and int(first) < int(last) < 0)):
        # Counted from the end (x[:, -1:]): from the real end, at run time.
        if not length_expr.is_Integer:
            interp.refuse({sym}, what)
        _from_real_end(interp, node, size, sym, d, int(first), int(length_expr), what)
        return (*state[:d], ((length_expr, None),), *state[d + 1 :])
    interp.refuse(_dim_pads(dim), what)


def _from_real_end(interp, node, size, sym, d, first: int, length: int, what: str) -> None:
    """Replace ``node`` by ``slice_at`` from ``first`` past the real end (and a squeeze for
    ``select``)."""
    squeeze = node.target is aten.select.int

    def apply(rw):
        x = rw.arg(node, "self")
        new = rw.call_before(node, slice_at, (x, d, rw.length(size + first), length))
        if squeeze:
            new = rw.call_before(node, aten.squeeze.dim, (new, d))
        node.replace_all_uses_with(new)
        rw.graph.erase_node(node)

    interp.fix({sym}, what, apply)


@rule(aten.slice.Tensor, size_args=("end",))
def _slice(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    start = bound["start"] if bound["start"] is not None else 0
    return _slice_like(
        interp, state, d, start, interp.out_shape()[d], bound["step"], node, bound["end"]
    )


@rule(aten.narrow.default, size_args=("length",))
def _narrow(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    return _slice_like(interp, state, d, bound["start"], interp.out_shape()[d])


@rule(aten.select.int)
def _select(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    what = f"selects one index of padded dimension {d}"
    index, atom = expr_of(bound["index"]), padded_atom(state[d])
    if _dim_pads(state[d]):
        if atom is None or index is None or not index.is_Integer:
            interp.refuse(_dim_pads(state[d]), what)
        if int(index) >= 0:
            # A real row whenever eager has it (eager raises past the real length).
            interp.assumptions.append(sympy.expand(atom[0] - int(index) - 1))
        else:
            _from_real_end(interp, node, atom[0], atom[1], d, int(index), 1, what)
    return (*state[:d], *state[d + 1 :])


@rule(aten.split.Tensor, aten.split_with_sizes.default)
def _split(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    interp.require_clean(state[d], f"splits padded dimension {d}")
    return [(*state[:d], interp.classify(_shape(v)[d]), *state[d + 1 :]) for v in node.meta["val"]]


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
    tensors = [t for t in bound["tensors"] if len(_shape(t.meta["val"])) == len(out)]
    states = [interp.state(t) for t in tensors]
    others = [tuple(dim for i, dim in enumerate(st) if i != d) for st in states]
    merged = list(interp.broadcast(others, [e for i, e in enumerate(out) if i != d]))
    pads = set().union(*(_dim_pads(st[d]) for st in states)) if states else set()
    if not pads:
        merged.insert(d, interp.classify(out[d]))
        return tuple(merged)
    what = f"concatenates along padded dimension {d}"
    if len(pads) != 1 or any(_dim_pads(st[d]) and padded_atom(st[d]) is None for st in states):
        interp.refuse(pads, what)
    sym = next(iter(pads))
    # The real rows of each operand, written one after another from the start: the cat puts
    # operand 0 there, each later one is written at the real end of those before it (its own
    # padding is overwritten by the next, the last one's lies past the real end).
    sizes = [sympy.Mul(*(e for e, _ in st[d])) for st in states]
    padded = [bool(_dim_pads(st[d])) for st in states]
    offsets, total = [], sympy.Integer(0)
    for size in sizes:
        offsets.append(total)
        total = total + size
    writes = [(tensors[k], offsets[k]) for k in range(1, len(tensors)) if any(padded[:k])]

    def apply(rw):
        users = list(node.users)
        cur = node
        for t, offset in writes:
            with rw.graph.inserting_after(cur):
                cur = rw.graph.call_function(write_at, (cur, t, d, rw.length(offset)))
        for user in users:
            user.replace_input_with(node, cur)

    if writes:
        interp.fix({sym}, what, apply)
    merged.insert(d, ((sympy.expand(total), sym),))
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
def _reduce(
    interp, state: State, dims, keepdim: bool, what: str, node=None, fill: str | None = None
) -> State:
    """The reduced state; a padded reduced dim is masked with ``fill`` (the reduction's
    identity) when there is one, else refused."""
    n = len(state)
    whole = dims is None or (isinstance(dims, list | tuple) and len(dims) == 0)
    if whole:
        dims = range(n)
    elif isinstance(dims, int):
        dims = [dims]
    dims = {_norm(d, n) for d in dims} if n else set()
    for d in sorted(dims):
        if not _dim_pads(state[d]):
            continue
        if fill is None:
            interp.require_clean(state[d], f"{what} over padded dimension {d}")
        _mask(interp, node, "self", state, d, fill, f"{what} over padded dimension {d}")
    if keepdim:
        return tuple(((_ONE, None),) if i in dims else dim for i, dim in enumerate(state))
    return tuple(dim for i, dim in enumerate(state) if i not in dims)


# The value a padded position takes so that the reduction ignores it (None: there is none;
# the mean and the variance count positions).
_IDENTITY = {
    aten.sum.dim_IntList: "zero",
    aten.sum.default: "zero",
    aten.prod.dim_int: "one",
    aten.prod.default: "one",
    aten.any.dim: "zero",
    aten.any.dims: "zero",
    aten.any.default: "zero",
    aten.all.dim: "one",
    aten.all.dims: "one",
    aten.all.default: "one",
    aten.amax.default: "lowest",
    aten.max.dim: "lowest",
    aten.max.default: "lowest",
    aten.logsumexp.default: "lowest",
    aten.argmax.default: "lowest",
    aten.amin.default: "highest",
    aten.min.dim: "highest",
    aten.min.default: "highest",
    aten.argmin.default: "highest",
}


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
    fill = _IDENTITY.get(node.target)
    if node.target in (aten.argmax.default, aten.argmin.default) and bound.get("dim") is None:
        fill = None  # an index into the flattened tensor counts padded positions
    if node.target is aten.linalg_vector_norm.default:
        ord_ = bound.get("ord", 2)
        if isinstance(ord_, int | float) and ord_ > 0:
            fill = "zero"  # |0|^p adds nothing, and max |x| is at least 0
    out = _reduce(
        interp, state, bound.get("dim"), bool(bound.get("keepdim")), "reduces", node, fill
    )
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
    state = interp.state(bound["self"])
    return _reduce(interp, state, None, False, "reduces", node, _IDENTITY.get(node.target))


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
    if state and _dim_pads(state[d]):
        # -inf past the real length: exp gives 0 there (log_softmax: -inf), real rows exact.
        _mask(
            interp,
            node,
            "self",
            state,
            d,
            "lowest",
            f"normalizes (softmax) over padded dimension {d}",
        )
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
def _contract(interp, a: Dim, b: Dim, node=None, operands=None) -> None:
    """A product contracting dims ``a`` and ``b``: exact on padding when both are the same
    padded dim and both operands are zero past its real length (``operands``: the argument
    names and contracted axes, for the fix; None: refuse)."""
    what = "contracts (matrix product) over a padded dimension"
    if not (_dim_pads(a) or _dim_pads(b)):
        return
    if operands is None or not _same_dim(a, b) or padded_atom(a) is None:
        interp.require_clean(a, what)
        interp.require_clean(b, what)
    (na, da), (nb, db) = operands
    bound = _bind(node)
    _mask(interp, node, na, interp.state(bound[na]), da, "zero", what)
    _mask(interp, node, nb, interp.state(bound[nb]), db, "zero", what)


@rule(aten.mm.default)
def _mm(interp, node, bound):
    a, b = interp.state(bound["self"]), interp.state(bound["mat2"])
    _contract(interp, a[1], b[0], node, (("self", 1), ("mat2", 0)))
    return (a[0], b[1])


@rule(aten.addmm.default)
def _addmm(interp, node, bound):
    a, b = interp.state(bound["mat1"]), interp.state(bound["mat2"])
    _contract(interp, a[1], b[0], node, (("mat1", 1), ("mat2", 0)))
    return interp.broadcast([interp.state(bound["self"]), (a[0], b[1])], interp.out_shape())


@rule(aten.bmm.default)
def _bmm(interp, node, bound):
    a, b = interp.state(bound["self"]), interp.state(bound["mat2"])
    _contract(interp, a[2], b[1], node, (("self", 2), ("mat2", 1)))
    batch = interp.broadcast([a[:1], b[:1]], interp.out_shape()[:1])
    return (*batch, a[1], b[2])


@rule(aten.baddbmm.default)
def _baddbmm(interp, node, bound):
    a, b = interp.state(bound["batch1"]), interp.state(bound["batch2"])
    _contract(interp, a[2], b[1], node, (("batch1", 2), ("batch2", 1)))
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
    a, b = (
        interp.state(bound["self"]),
        interp.state(bound["other" if "other" in bound else "tensor"]),
    )
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
    batch = interp.broadcast(
        [a[:-2] if len(a) > 1 else (), b[:-2] if len(b) > 1 else ()], out[:nbatch]
    )
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
        for d, dim in enumerate(x):
            if training and d != 1 and _dim_pads(dim):
                interp.refuse(
                    _dim_pads(dim),
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
        is_mask = indices[i].meta["val"].dtype in (torch.bool, torch.uint8)
        if is_mask and (_pads(x) or _pads(interp.env.get(indices[i]))):
            interp.refuse(_pads(x), "indexes with a boolean mask")
        if _dim_pads(x[i]) and not _within(interp, indices[i], x[i]):
            interp.refuse(_dim_pads(x[i]), f"indexes into padded dimension {i}")
    idx_states = [interp.state(indices[i]) for i in positions]
    out = interp.out_shape()
    contiguous = positions == list(range(positions[0], positions[-1] + 1)) if positions else True
    rest_before = [x[i] for i in range(positions[0])] if contiguous and positions else []
    rest_after = [
        x[i] for i in range(len(x)) if i not in positions and (not contiguous or i > positions[-1])
    ]
    nb = len(out) - len(rest_before) - len(rest_after)
    start = len(rest_before) if contiguous else 0
    middle = interp.broadcast(idx_states, out[start : start + nb])
    return (*rest_before, *middle, *rest_after)


def _within(interp, index, dim: Dim) -> bool:
    """Whether ``index``'s values at real positions are below ``dim``'s real length (an
    ``arange`` of a size no longer than it): then gathering from ``dim`` reads real rows."""
    atom = padded_atom(dim)
    bound = interp.bounds.get(index)
    if atom is None or bound is None:
        return False
    slack = sympy.expand(atom[0] - bound)
    if slack.is_Integer:
        return int(slack) >= 0
    # Two sizes the trace does not relate (HF's attention mask is one longer than the cache it
    # indexes with arange): eager raises unless the slack is >= 0, checked per call.
    interp.assumptions.append(slack)
    return True


@rule(aten.slice_scatter.default)
def _slice_scatter(interp, node, bound):
    x, src = interp.state(bound["self"]), interp.state(bound["src"])
    d = _norm(bound["dim"], len(x))
    interp.require_clean(x[d], f"writes a part of padded dimension {d}")
    interp.require_clean(src[d], f"writes a part of padded dimension {d}")
    out = interp.out_shape()
    merged = list(
        interp.broadcast([x[:d] + x[d + 1 :], src[:d] + src[d + 1 :]], out[:d] + out[d + 1 :])
    )
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
    masked = False  # padded keys hidden by a key mask (the fix below)
    if _dim_pads(keys) or _dim_pads(v[-2]):
        if not _same_dim(keys, v[-2]):
            interp.refuse(_dim_pads(keys) | _dim_pads(v[-2]), "keys and values padded differently")
        causal = bool(bound.get("is_causal")) and mask is None and _same_dim(q[-2], keys)
        if not causal:
            what = "attends over padded keys without a causal mask (padded keys would get weight)"
            if node.target not in _MASKABLE_ATTENTION or bound.get("is_causal"):
                interp.refuse(_dim_pads(keys), what)
            _key_mask(interp, node, keys, what)
            masked = True
    val = node.meta["val"]
    out_val = val[0] if isinstance(val, list | tuple) else val
    out = _shape(out_val)
    batch = interp.broadcast([q[:-2], k[:-2], v[:-2]], out[:-2])
    if mask is not None:
        m = interp.state(mask)
        if m and _dim_pads(m[-1]) and not (masked and _same_dim(m[-1], keys)):
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


def _key_mask(interp, node, keys: Dim, what: str) -> None:
    """Hide the keys past the real length: the mask argument becomes ``key_mask``'s."""
    atom = padded_atom(keys)
    if atom is None:
        interp.refuse(_dim_pads(keys), f"{what} (flattened with another dimension)")
    size, sym = atom

    def apply(rw):
        mask, key = rw.arg(node, "attn_mask"), rw.arg(node, "key")
        rw.set_arg(node, "attn_mask", rw.call_before(node, key_mask, (mask, key, rw.length(size))))

    interp.fix({sym}, what, apply)


# torch2xla's sdpa ops take any mask: the key mask is added there (export's aten kernels
# are left as they are).
_MASKABLE_ATTENTION = frozenset({sdpa._opoverload, torch.ops.torch2xla.sdpa_dropout.default})

for _name in (
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
):
    if hasattr(aten, _name):
        RULES[getattr(aten, _name)] = Rule(_attention)
RULES[sdpa._opoverload] = Rule(_attention)
RULES[torch.ops.torch2xla.sdpa_dropout.default] = Rule(_attention)


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
    state = interp.fresh(node.meta["val"])
    start, step = expr_of(bound.get("start", 0)), expr_of(bound.get("step", 1))
    end = expr_of(bound.get("end"))
    if start == 0 and step == 1 and end is not None and end.free_symbols & interp.cands:
        interp.bounds[node] = end  # at real position i the value is i < the real end
    return state


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
