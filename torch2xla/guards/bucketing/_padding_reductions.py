"""Padding rules of the ops that read across a dimension: reductions, scans, softmax, sorting,
matrix products, convolution, pooling, normalization and attention. A padded dimension such an
op reads across is exact only where its padded positions are set to a value the op ignores
before it reads them (``_mask``: ``fill_tail``, the reduction's identity; attention's
``key_mask``); otherwise the rule refuses. The rules' protocol is ``_padding_rules.py``'s.
"""

from __future__ import annotations

import torch

from torch2xla.guards.bucketing._padding import (
    _ONE,
    RULES,
    Dim,
    Rule,
    State,
    _bind,
    _dim_pads,
    _norm,
    _pads,
    _pointwise,
    _same_dim,
    _shape,
    keeps_positions,
    padded_atom,
    rule,
)
from torch2xla.ops import _padded  # noqa: F401  (defines the ops the fixes insert)
from torch2xla.ops._sdpa import sdpa

aten = torch.ops.aten
fill_tail = torch.ops.torch2xla.fill_tail.default
key_mask = torch.ops.torch2xla.key_mask.default


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


def _in_order(interp, state: State, d: int, what: str) -> None:
    """Refuse an op that reads dim ``d`` in order (a prefix scan, a triangle) unless its real
    positions come first, in their unpadded order (``keeps_positions``)."""
    if state and not keeps_positions(state[d]):
        inner = [a for a in state[d] if a[0] != _ONE][1:]
        interp.refuse(
            {s for _, s in inner if s is not None},
            f"{what} along dimension {d}, flattened with a padded dimension inside it (padded "
            "positions lie between real ones)",
        )


@rule(aten.cumsum.default, aten.cumprod.default, aten.logcumsumexp.default)
def _scan(interp, node, bound):
    # A prefix scan: real positions only see earlier positions, and padding sits at the end.
    state = interp.state(bound["self"])
    _in_order(interp, state, _norm(bound["dim"], len(state)) if state else 0, "scans")
    return state


@rule(aten.cummax.default, aten.cummin.default)
def _scan2(interp, node, bound):
    state = interp.state(bound["self"])
    _in_order(interp, state, _norm(bound["dim"], len(state)) if state else 0, "scans")
    return [state, state]


@rule(aten.tril.default, aten.triu.default)
def _triangle(interp, node, bound):
    # Positions relative to the top-left corner: exact while the padding stays at the end.
    state = interp.state(bound["self"])
    for d in (len(state) - 2, len(state) - 1):
        _in_order(interp, state, d, f"takes a triangle ({node.target.__name__})")
    return _pointwise(interp, node, bound)


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
        if padded_atom(keys) is None:
            # (a causal mask over (b*s) keys with s padded lets later real queries see the
            # padded keys between real ones; a key mask would need the flattened layout)
            interp.refuse(_dim_pads(keys), "attends over keys flattened with a padded dimension")
        causal = bool(bound.get("is_causal")) and mask is None and _same_dim(q[-2], keys)
        if not causal:
            what = "attends over padded keys without a causal mask (padded keys would get weight)"
            if node.target not in _MASKABLE_ATTENTION or bound.get("is_causal"):
                interp.refuse(_dim_pads(keys), what)
            _key_mask(interp, node, keys, what)
            masked = True
        # Hidden keys get weight 0, but 0 * inf is NaN: the padded keys and values are zeroed
        # (they hold whatever the ops before made of the padding: 1 / 0, log 0).
        for name, st in (("key", k), ("value", v)):
            _mask(interp, node, name, st, len(st) - 2, "zero", "attends over padded keys")
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
