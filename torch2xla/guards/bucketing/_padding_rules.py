"""Padding rules per ATen op: how each op moves padded dimensions, or why it cannot. Here the
ops that move or pick positions (views, slices, joins, indexing, factories); the ops that read
across a dimension (reductions, products, normalization, attention) are in
``_padding_reductions.py``.

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
    _dim_pads,
    _equal,
    _is_one,
    _norm,
    _pads,
    _pointwise,
    _shape,
    expr_of,
    padded_atom,
    rule,
)
from torch2xla.ops import _padded  # noqa: F401  (defines the ops the fixes insert)
from torch2xla.ops._bounds import negative_indices

aten = torch.ops.aten
write_at = torch.ops.torch2xla.write_at.default
slice_at = torch.ops.torch2xla.slice_at.default
real_index = torch.ops.torch2xla.real_index.default


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
    if full and step == 1:
        # A range as long as the dim is all of it, wherever it starts: ``x[:, -w:]`` of a
        # sliding window's cache shorter than ``w`` (the trace's guard ``s <= w``, which the
        # bucket keeps too: ``Bucketing._holds``).
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


@rule(aten.slice.Tensor, size_args=("start", "end"))
def _slice(interp, node, bound):
    state = interp.state(bound["self"])
    d = _norm(bound["dim"], len(state))
    start = bound["start"] if bound["start"] is not None else 0
    if interp.value_syms(start):
        return _tail_past_a_size(interp, node, bound, state, d, start)
    return _slice_like(
        interp, state, d, start, interp.out_shape()[d], bound["step"], node, bound["end"]
    )


def _tail_past_a_size(interp, node, bound, state, d, start):
    """``x[:, n:]`` where ``n`` is a padded size and ``x`` is ``n + k`` long (OPT's positions
    past the cache's length, ``cumsum(mask)[:, past:]``): its last ``k`` real rows, taken from
    the real end at run time. Any other start that is a padded size is refused."""
    syms = interp.value_syms(start)
    atom, length = padded_atom(state[d]), sympy.expand(interp.out_shape()[d])
    end = expr_of(bound["end"]) if bound["end"] is not None else None
    to_end = end is None or (end.is_Integer and int(end) >= 2**62)
    if (
        atom is None
        or bound["step"] != 1
        or not to_end
        or not length.is_Integer
        or int(length) < 1
        or sympy.expand(atom[0] - expr_of(start)) != length
    ):
        interp.refuse(syms, "uses a padded size as a value (argument 'start')")
    what = f"takes the rows of padded dimension {d} past a padded size"
    _from_real_end(interp, node, atom[0], atom[1], d, -int(length), int(length), what)
    return (*state[:d], ((length, None),), *state[d + 1 :])


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


# A pad value that fill_tail can write (its named fills), for the positions a pad of a padded
# dimension puts right after the real rows.
def _pad_fill(value, dtype: torch.dtype) -> str | None:
    if isinstance(value, bool) or dtype == torch.bool:
        return "one" if value else "zero"
    if not isinstance(value, int | float):
        return None
    if value == 0 or value == 1:
        return "zero" if value == 0 else "one"
    if dtype.is_floating_point and value in (float("-inf"), float("inf")):
        return "lowest" if value < 0 else "highest"
    return None


@rule(aten.constant_pad_nd.default, size_args=("pad",))
def _constant_pad(interp, node, bound):
    """Each padded dim ``d``: ``(before, after)``. A pad of a clean dim whose ``after`` grows
    with a padded size keeps its real rows first. A padded dim padded after its real rows
    (``F.pad(mask, (0, max_len - n))``, HF's padding mask against a static cache) is exact
    once its padded positions hold the pad value: the real result is then a prefix of the
    padded one, or all of it where the total is a constant."""
    x = bound["self"]
    state = interp.state(x)
    out = interp.out_shape()
    pad = list(bound["pad"])
    result = list(state)
    refill = False
    for k in range(len(pad) // 2):
        d = len(state) - 1 - k
        before, after = expr_of(pad[2 * k]), expr_of(pad[2 * k + 1])
        if before == 0 and after == 0:
            continue
        what = f"pads padded dimension {d}"
        dim_pads = _dim_pads(state[d])
        if before is None or after is None or (before.free_symbols & interp.cands):
            interp.refuse(dim_pads | interp.value_syms(pad), what)
        if dim_pads:
            if padded_atom(state[d]) is None or not before.is_Integer or int(before) < 0:
                interp.refuse(dim_pads, what)
            refill = True
        result[d] = interp.classify(out[d])
    if refill:
        val = x.meta["val"]
        fill = _pad_fill(bound.get("value", 0), val.dtype)
        if fill is None:
            interp.refuse(_pads(state), f"pads a padded dimension with {bound.get('value')}")

        def apply(rw, node=node, state=state, fill=fill):
            rw.set_arg(node, "self", rw.fill_padded(node, rw.arg(node, "self"), state, fill))

        interp.fix(_pads(state), f"pads after the real rows (padding set to {fill})", apply)
    return tuple(result)


_HALF = (torch.float16, torch.bfloat16)


@rule(aten.add.Tensor, aten.sub.Tensor, pointwise=True)
def _add_with_alpha(interp, node, bound):
    # NOTE: eager's CPU add/sub with ``alpha`` of half-precision tensors rounds the product
    # of the last ``numel % W`` elements apart (its scalar tail, ``ops/_arithmetic.py``): the
    # tail is counted from the end of the result, which padding moves.
    state = _pointwise(interp, node, bound)
    val, alpha = node.meta["val"], bound.get("alpha")
    if (
        alpha is not None
        and alpha != 1
        and val.dtype in _HALF
        and val.device.type == "cpu"
        and _pads(state)
    ):
        interp.refuse(_pads(state), "adds a product with alpha in half precision on the CPU")
    return state


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
    if _dim_pads(x[d]) and not _within(interp, bound["index"], x[d]):
        _index_real_length(interp, node, "index", None, x[d], f"indexes into padded dimension {d}")
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
            _index_real_length(
                interp, node, "indices", i, x[i], f"indexes into padded dimension {i}"
            )
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


def _index_real_length(interp, node, name: str, at: int | None, dim: Dim, what: str) -> None:
    """Indices of any value into padded ``dim``: taken against its real length at run time
    (``real_index``): a negative one counts from the real end, and one that eager refuses
    stays out of the padded range, so the program's index check fails (and the call runs
    unpadded, raising eager's error)."""
    atom, negative = padded_atom(dim), negative_indices(node)
    if atom is None or negative is None:
        interp.refuse(_dim_pads(dim), what)
    size, sym = atom

    def apply(rw):
        current = rw.arg(node, name)
        items = list(current) if at is not None else [current]
        k = at if at is not None else 0
        items[k] = rw.call_before(
            node, real_index, (items[k], rw.length(size), rw.size(size), negative)
        )
        rw.set_arg(node, name, items if at is not None else items[0])

    interp.fix({sym}, f"{what} (taken against its real length)", apply)


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
