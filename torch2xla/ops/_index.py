"""Indexing, gathers and scatters, sorting."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla._errors import OpIndexError
from torch2xla.ops._bounds import (
    INDEX_SELECT_DIM1,
    check_flat_index,
    check_index,
    check_indices,
)
from torch2xla.ops._common import as_dtype, canonical_dim
from torch2xla.ops._fits import check_fits
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _bool_as_int(fn):
    """Run a scatter-style lowering on bool tensors through int32: torch's add on bools is
    logical or, multiply logical and, max/min or/and; XLA scatters reject bools."""

    def lowering(self, *args, **kwargs):
        if self.dtype != jnp.bool_:
            return fn(self, *args, **kwargs)
        args = [
            a.astype(jnp.int32) if hasattr(a, "dtype") and a.dtype == jnp.bool_ else a for a in args
        ]
        return fn(self.astype(jnp.int32), *args, **kwargs) != 0

    return lowering


_HALF = (jnp.float16, jnp.bfloat16)


def _half_in_float32(fn):
    """Run a scatter that accumulates (``scatter_add``, ``scatter_reduce``) on float16/bfloat16
    tensors in float32, rounded once at the end: eager's CPU kernels accumulate in float32
    (600 bf16 ones scattered into one element make 600; added in bf16 they stop at 256)."""

    def lowering(self, *args, **kwargs):
        if self.dtype not in _HALF:
            return fn(self, *args, **kwargs)
        args = [
            a.astype(jnp.float32) if hasattr(a, "dtype") and a.dtype in _HALF else a for a in args
        ]
        return fn(self.astype(jnp.float32), *args, **kwargs).astype(self.dtype)

    return lowering


@jax.custom_vjp
def _scatter_multiply(base, idx, src):
    """``base.at[idx].multiply(src)`` with the exact gradient: each factor gets the product of
    the other factors at its position (zeros included), as torch's backward gives; JAX
    differentiates scatter-multiply only with unique indices."""
    return base.at[idx].multiply(src)


def _scatter_multiply_fwd(base, idx, src):
    return base.at[idx].multiply(src), (base, idx, src)


def _scatter_multiply_bwd(residuals, g):
    base, idx, src = residuals
    zb, zs = base == 0, src == 0
    zeros = zb.astype(jnp.int32).at[idx].add(zs.astype(jnp.int32))  # zero factors per position
    nonzero = jnp.where(zb, 1, base).at[idx].multiply(jnp.where(zs, 1, src))

    def others(x, z, n_zero, prod):
        # The product of the other factors: prod / x without zeros, else 0 or the product of
        # the nonzero ones when x is the only zero.
        return jnp.where(
            z, jnp.where(n_zero == 1, prod, 0), jnp.where(n_zero == 0, prod / jnp.where(z, 1, x), 0)
        )

    g_base = g * others(base, zb, zeros, nonzero)
    g_src = g[idx] * others(src, zs, zeros[idx], nonzero[idx])
    return g_base, None, g_src


_scatter_multiply.defvjp(_scatter_multiply_fwd, _scatter_multiply_bwd)


def _scatter_extreme(self, idx, src, reduce: str, include_self: bool):
    """``scatter_reduce``/``index_reduce``'s amax/amin of ``src`` into ``self`` at ``idx`` (an
    index for ``.at[]``), with eager's derivative: the gradient of each result is shared
    evenly by the values equal to it, ``self``'s counted among them where it equals the
    result even when ``include_self=False`` (whose own gradient is then zero there), as
    torch's formula does; JAX's derivative shared it among the scattered values only."""

    def forward(self, src, idx):
        if jnp.issubdtype(self.dtype, jnp.inexact):
            init = -np.inf if reduce == "amax" else np.inf
        else:
            info = np.iinfo(self.dtype)
            init = info.min if reduce == "amax" else info.max
        base = self if include_self else jnp.full(self.shape, init, self.dtype)
        out = base.at[idx].max(src) if reduce == "amax" else base.at[idx].min(src)
        if include_self:
            return out
        touched = jnp.zeros(self.shape, bool).at[idx].set(True)
        return jnp.where(touched, out, self)

    if not jnp.issubdtype(self.dtype, jnp.inexact):
        return forward(self, src, idx)

    @jax.custom_vjp
    def extreme(self, src, idx):
        return forward(self, src, idx)

    def extreme_fwd(self, src, idx):
        out = forward(self, src, idx)
        return out, (self, src, idx, out)

    def extreme_bwd(residuals, g):
        self, src, idx, out = residuals
        self_is = (self == out).astype(g.dtype)
        src_is = (src == out[idx]).astype(g.dtype)
        shared = g / self_is.at[idx].add(src_is)
        g_self = self_is * shared
        if not include_self:
            g_self = g_self.at[idx].set(0)
        return g_self, src_is * shared[idx], None

    extreme.defvjp(extreme_fwd, extreme_bwd)
    return extreme(self, src, idx)


def _scatter_set(x, idx: tuple, values, mode: str | None = None):
    """``x.at[idx].set(values, mode=mode)`` with eager's gradient of ``values``: the output's
    gradient at the position each value was written to, duplicates included (eager's is
    ``grad[idx]``); JAX gives a position's gradient only to the value that won it."""
    slots = [k for k, i in enumerate(idx) if hasattr(i, "shape")]

    def at(arrays):
        full = list(idx)
        for k, a in zip(slots, arrays):
            full[k] = a
        return tuple(full)

    arrays = [idx[k] for k in slots]
    shape = jax.eval_shape(lambda x, arrays: x[at(arrays)], x, arrays).shape
    values = jnp.broadcast_to(as_dtype(values, x.dtype), shape)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        return x.at[idx].set(values, mode=mode)
    get = {"mode": "fill", "fill_value": 0} if mode == "drop" else {}

    @jax.custom_vjp
    def put(x, values, arrays):
        return x.at[at(arrays)].set(values, mode=mode)

    def put_fwd(x, values, arrays):
        return put(x, values, arrays), arrays

    def put_bwd(arrays, g):
        where = at(arrays)
        return g.at[where].set(0, mode=mode), g.at[where].get(**get), None

    put.defvjp(put_fwd, put_bwd)
    return put(x, values, arrays)


def _index_tuple(indices):
    # NOTE: None entries mean "whole dim"; jnp reads None as newaxis, so use slices.
    return tuple(slice(None) if i is None else i for i in indices)


_MASK_DTYPES = (jnp.bool_, jnp.uint8)  # torch reads a uint8 index as a mask (deprecated)


def _is_mask(index) -> bool:
    return index is not None and index.dtype in _MASK_DTYPES


@register(aten.index.Tensor)
def index(self, indices):
    if any(_is_mask(i) for i in indices):
        raise NotImplementedError("boolean-mask indexing has a data-dependent shape")
    check_indices(self, indices)
    return self[_index_tuple(indices)]


@register(aten.index_put.default)
def index_put(self, indices, values, accumulate=False):
    check_indices(self, indices)
    given = [i for i in indices if i is not None]
    called = getattr(ctx().node.meta.get("original_aten"), "overloadpacket", None)
    if not accumulate and len(given) == 1 and _is_mask(given[0]) and values.size == 1:
        check_fits(values, ctx().out.dtype)  # (eager fills a mask with one value as masked_fill_)
    elif called in (aten.index_fill, aten.index_fill_) and values.size:
        check_fits(values, ctx().out.dtype)  # (eager fills ``value.item()``)
    # (cast before a bool ``self`` goes through int32: 0.3 written into a bool tensor is True,
    # as eager's; through int32 it was 0, False)
    return _index_put(self, indices, as_dtype(values, self.dtype), accumulate, called)


@_bool_as_int
def _index_put(self, indices, values, accumulate, called):
    masks = [k for k, i in enumerate(indices) if _is_mask(i)]
    if not masks and called in (aten.index_fill, aten.index_fill_) and not accumulate:
        # One value (expanded by the decomposition) at each named position: a select, whose
        # derivative gives the value each position's gradient once, duplicate indices
        # included, as eager's (``grad.index_select(dim, unique(index)).sum()``); a scatter's
        # gave it once per index.
        if not values.size:
            return self
        filled = jnp.zeros(self.shape, bool).at[_index_tuple(indices)].set(True)
        return jnp.where(filled, values.reshape(-1)[0], self)
    if not masks:
        idx = _index_tuple(indices)
        return self.at[idx].add(values) if accumulate else _scatter_set(self, idx, values)
    if len(masks) == 1 and all(i is None for k, i in enumerate(indices) if k != masks[0]):
        return _put_by_mask(self, masks[0], indices[masks[0]] != 0, values, accumulate)
    return _put_by_positions(self, indices, values, accumulate)


# NOTE: torch turns a boolean index into ``mask.nonzero()``: the values go to the True
# positions in row-major order, and ``values`` broadcasts against an indexing result whose
# extent along the "count" axis is the number of True elements, N, a data-dependent size. An XLA
# program has static shapes, so the lowerings below work with N's static bound (the mask's size)
# or with N as ``values`` or another index fixes it when one of them has that axis.
#
# Where ``values`` (or an integer index) fixes N, eager raises "shape mismatch: value tensor of
# shape ... cannot be broadcast to indexing result of shape ..." when the mask holds another
# number of True elements: a check on tensor values, made at run time (``_count_check``, raised
# after the call as an ``OpError`` naming the op and the user's line). With checks off
# (``checks=False``, or on a GPU by default) a mismatch writes the first N True positions.


def _count_check(count, n: int, values_shape, lead=(), trail=()) -> None:
    """Register eager's shape-mismatch error for a boolean index with ``count`` True elements
    (traced) where the values give the count axis ``n`` elements."""
    dims = [*map(str, lead), "{value}", *map(str, trail)]
    ctx().check(
        count != n,
        f"shape mismatch: value tensor of shape {list(values_shape)} cannot be broadcast to "
        f"indexing result of shape [{', '.join(dims)}]",
        count,
    )


def _put_by_mask(self, dim, mask, values, accumulate):
    """``self[:, ..., mask] = values`` (``dim`` leading full slices): an elementwise select."""
    lead, trail = self.shape[:dim], self.shape[dim + mask.ndim :]
    size = mask.size
    flat = mask.reshape(-1)
    if mask.ndim:  # the indexing result: lead + (N,) + trail
        result_ndim = len(lead) + 1 + len(trail)
        axis = dim - (result_ndim - values.ndim)  # the count axis in values, if it has it
        if axis >= 0 and values.shape[axis] != 1:
            # The k-th True position (row-major) takes the k-th slice of values.
            n = values.shape[axis]
            rank = jnp.cumsum(flat, dtype=jnp.int32) - 1
            _count_check(rank[-1] + 1, n, values.shape, lead, trail)
            flat = flat & (rank < n)  # (checks off: a mismatch writes no further)
            values = (
                jnp.take(values, jnp.clip(rank, 0, n - 1), axis=axis)
                if n
                else jnp.zeros(
                    values.shape[:axis] + (size,) + values.shape[axis + 1 :], values.dtype
                )
            )
        values = jnp.broadcast_to(values, lead + (size,) + trail).reshape(self.shape)
    # NOTE: a 0-d mask covers no dimension of self: all of self is written, or none of it.
    where = flat.reshape((1,) * dim + mask.shape + (1,) * len(trail))
    if accumulate:
        return self + jnp.where(where, values, jnp.zeros((), self.dtype))
    return jnp.where(where, values, self)


def _put_by_positions(self, indices, values, accumulate):
    """``index_put`` with masks among integer indices: each mask becomes its True positions
    (``nonzero`` padded to a static size with out-of-range positions, which the scatter drops)."""
    slots, tensors, masks = [], [], []  # slots: the self dim each index entry starts at
    d = 0
    for i in indices:
        slots.append(d)
        if _is_mask(i):
            if i.ndim == 0:
                raise NotImplementedError("a 0-d boolean index beside other indices")
            masks.append(i != 0)
            d += i.ndim
        else:
            if i is not None:
                tensors.append(i)
            d += 1
    # The integer indices broadcast with the masks' (N,): their last axis is N's.
    ints = np.broadcast_shapes(*(t.shape for t in tensors))
    int_n = ints[-1] if ints and ints[-1] != 1 else None
    batch = ints[:-1] if ints else ()
    # Where the broadcast positions sit in the indexing result (numpy's and torch's rule).
    used = [k for k, i in enumerate(indices) if i is not None]
    dims = [
        list(range(slots[k], slots[k] + (indices[k].ndim if _is_mask(indices[k]) else 1)))
        for k in used
    ]
    flat_dims = [x for ds in dims for x in ds]
    adjacent = flat_dims == list(range(flat_dims[0], flat_dims[-1] + 1))
    rest = [s for x, s in enumerate(self.shape) if x not in flat_dims]
    front = flat_dims[0] if adjacent else 0
    count_axis = front + len(batch)
    result_ndim = len(rest) + len(batch) + 1
    axis = count_axis - (result_ndim - values.ndim)
    value_n = values.shape[axis] if axis >= 0 and values.shape[axis] != 1 else None
    if int_n is not None and value_n is not None and int_n != value_n:
        raise ValueError(
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be "
            f"broadcast to the indexing result (count axis {int_n})"
        )
    size = next((s for s in (int_n, value_n) if s is not None), max(m.size for m in masks))
    counts = [jnp.sum(m, dtype=jnp.int32) for m in masks]
    # N: an integer index of extent n > 1 broadcasts masks of one True element to n.
    n = int_n if int_n is not None else functools.reduce(jnp.maximum, counts)
    if len(counts) + (int_n is not None) > 1:  # the indices broadcast: each count 1 or N
        ctx().check(
            functools.reduce(jnp.logical_or, [(c != 1) & (c != n) for c in counts]),
            "shape mismatch: indexing tensors could not be broadcast together (a boolean "
            "index with {value} True elements)",
            functools.reduce(jnp.minimum, [jnp.where(c == 1, n, c) for c in counts]),
            error=OpIndexError,
        )
    if int_n is None and value_n is not None:  # values fix N: the masks must give it
        ctx().check(
            n != value_n,
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast "
            "to indexing result of {value} elements along its boolean-index axis",
            n,
        )
    if size == 0:  # nothing to write
        return self
    valid = jnp.arange(size) < n
    positions = {}
    for k, mask, count in zip([k for k in used if _is_mask(indices[k])], masks, counts):
        cols = jnp.nonzero(mask, size=size, fill_value=mask.shape)
        cols = [
            jnp.where(valid, jnp.where(count == 1, c[0], c), bound)
            for c, bound in zip(cols, mask.shape)
        ]
        positions[k] = cols
    idx = []
    for k, i in enumerate(indices):
        if k in positions:
            idx.extend(positions[k])
        else:
            idx.append(slice(None) if i is None else i)
    if accumulate:
        return self.at[tuple(idx)].add(values, mode="drop")
    return _scatter_set(self, tuple(idx), values, mode="drop")


@register(aten.index_select.default)
def index_select(self, dim, index):
    size = self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1
    if self.ndim > 1 and canonical_dim(dim, self.ndim) == 1:
        # NOTE: eager's CPU kernel has a path of its own for dimension 1, with its message
        check_index(index, size, dim, INDEX_SELECT_DIM1)
    else:
        check_index(index, size, dim)
    if self.ndim == 0:
        return self
    # (a 0-d index selects as a vector of one: the dim is kept)
    return jnp.take(self, index.reshape(-1), axis=canonical_dim(dim, self.ndim))


def _along(dim, index, ndim):
    """Full index tuple for a scatter/gather along ``dim`` (torch's index tensor semantics)."""
    # list(): jnp.meshgrid returns a tuple in newer JAX (0.11).
    grids = list(jnp.meshgrid(*(jnp.arange(s) for s in index.shape), indexing="ij"))
    grids[dim] = index
    return tuple(grids)


def _gather_half(x, idx: tuple):
    """``x[idx]`` of a float16/bfloat16 ``x`` whose derivative sums the gradients in float32,
    rounded once, as eager's gather backward (a ``scatter_add``: its CPU kernel accumulates in
    float32); JAX's transpose added them in bfloat16 (600 ones made 320 where eager's 296)."""
    shape, dtype = x.shape, x.dtype

    @jax.custom_vjp
    def take(x, idx):
        return x[idx]

    def take_fwd(x, idx):
        return x[idx], idx

    def take_bwd(idx, g):
        summed = jnp.zeros(shape, jnp.float32).at[idx].add(g.astype(jnp.float32))
        return summed.astype(dtype), None

    take.defvjp(take_fwd, take_bwd)
    return take(x, idx)


@register(aten.gather.default)
def gather(self, dim, index, *, sparse_grad=False):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        return self
    dim = canonical_dim(dim, self.ndim)
    idx = _along(dim, index, self.ndim)
    return _gather_half(self, idx) if self.dtype in _HALF else self[idx]


@register(aten.scatter.src, aten.scatter.value)
def scatter(self, dim, index, src):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        return as_dtype(src, self.dtype).reshape(())
    dim = canonical_dim(dim, self.ndim)
    if not hasattr(src, "shape"):  # (a number, converted as eager converts it: -1 into uint8)
        src = jnp.full(index.shape, as_dtype(src, self.dtype), self.dtype)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    return _scatter_set(self, _along(dim, index, self.ndim), src)


@register(aten.scatter_add.default)
@_bool_as_int
@_half_in_float32
def scatter_add(self, dim, index, src):
    dim = canonical_dim(dim, self.ndim)
    check_index(index, self.shape[dim] if self.ndim else 1, dim)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    return self.at[_along(dim, index, self.ndim)].add(src)


@register(aten.scatter_reduce.two)
@_bool_as_int
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    if self.dtype in _HALF and reduce in ("sum", "prod", "mean"):
        # (eager accumulates in float32; a mean's total and count are rounded to self's dtype
        # before the one is divided by the other)
        out = _scatter_reduce(
            self.astype(jnp.float32),
            dim,
            index,
            as_dtype(src, self.dtype).astype(jnp.float32),
            reduce,
            include_self=include_self,
            _rounding=self.dtype,
        )
        return out.astype(self.dtype)
    return _scatter_reduce(self, dim, index, src, reduce, include_self=include_self)


def _scatter_reduce(self, dim, index, src, reduce, *, include_self=True, _rounding=None):
    dim = canonical_dim(dim, self.ndim)
    check_index(index, self.shape[dim] if self.ndim else 1, dim)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    idx = _along(dim, index, self.ndim)
    if reduce == "mean":
        base = self if include_self else jnp.zeros_like(self)
        total = base.at[idx].add(src)
        if _rounding is not None:
            total = total.astype(_rounding).astype(total.dtype)
        count = jnp.full(self.shape, 1 if include_self else 0, self.dtype).at[idx].add(1)
        count = jnp.maximum(count, 1)
        if _rounding is not None:  # (eager's count is a tensor of self's dtype too: 3001 is 3000)
            count = count.astype(_rounding).astype(count.dtype)
        out = total / count if jnp.issubdtype(self.dtype, jnp.inexact) else total // count
        touched = jnp.zeros(self.shape, bool).at[idx].set(True)
        return jnp.where(touched, out, self)
    if reduce in ("amax", "amin"):
        return _scatter_extreme(self, idx, src, reduce, include_self)
    base = self if include_self else jnp.full(self.shape, {"sum": 0, "prod": 1}[reduce], self.dtype)
    out = _scatter_multiply(base, idx, src) if reduce == "prod" else base.at[idx].add(src)
    if include_self:
        return out
    touched = jnp.zeros(self.shape, bool).at[idx].set(True)
    return jnp.where(touched, out, self)


@register(aten.sort.default, aten.sort.stable)
def sort(self, dim=-1, descending=False, *, stable=False):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = canonical_dim(dim, self.ndim)
    idx = jnp.argsort(self, axis=dim, stable=True, descending=descending)
    return jnp.take_along_axis(self, idx, axis=dim), as_dtype(idx, np.dtype(np.int64))


def _topk_key(x, largest: bool):
    """``x`` mapped so that lax.top_k's largest come first in eager's order: NaN of either
    sign above every number (lax.top_k orders by the bits' total order, which puts -NaN, as
    ``0 / 0`` makes it on x86, below -inf)."""
    if jnp.issubdtype(x.dtype, jnp.inexact):
        nan = jnp.full_like(x, jnp.nan)
        return jnp.where(jnp.isnan(x), nan if largest else -nan, x if largest else -x)
    # NOTE: the order is reversed by ~x for integers: -x wraps (uint8's 0 stays the
    # largest, -INT_MIN is INT_MIN); bitwise not reverses every integer order exactly.
    return x if largest else jnp.invert(x)


@register(aten.topk.default)
def topk(self, k, dim=-1, largest=True, sorted=True):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = canonical_dim(dim, self.ndim)
    x = jnp.moveaxis(self, dim, -1)
    _, idx = lax.top_k(_topk_key(lax.stop_gradient(x), largest), k)
    values = jnp.take_along_axis(x, idx, axis=-1)
    return (jnp.moveaxis(values, -1, dim), jnp.moveaxis(as_dtype(idx, np.dtype(np.int64)), -1, dim))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(self, mask, value):
    given = ctx().node.args[2] if len(ctx().node.args) > 2 else None
    device = getattr(getattr(given, "meta", {}).get("val"), "device", None)
    if hasattr(value, "dtype") and getattr(device, "type", None) == "cpu":
        check_fits(value, ctx().out.dtype)  # (eager converts a CPU value's ``.item()``)
    return jnp.where(mask, as_dtype(value, self.dtype), self)


@register(aten.scatter.reduce, aten.scatter.value_reduce)
@_bool_as_int
@_half_in_float32
def scatter_legacy_reduce(self, dim, index, src, *, reduce):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        src = jnp.asarray(src, self.dtype).reshape(())
        return self + src if reduce == "add" else self * src
    dim = canonical_dim(dim, self.ndim)
    if not hasattr(src, "shape"):
        src = jnp.full(index.shape, src, self.dtype)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    idx = _along(dim, index, self.ndim)
    # (eager has no derivative for it: ``_scatter_multiply``'s lets the program trace, and
    # the backward raises eager's error, autodiff/_eager_backward.py)
    return self.at[idx].add(src) if reduce == "add" else _scatter_multiply(self, idx, src)


@register(aten.index_reduce.default)
@_bool_as_int
def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if self.ndim == 0:
        out = index_reduce(
            self.reshape(1),
            0,
            index.reshape(-1),
            jnp.reshape(source, (-1,)),
            reduce,
            include_self=include_self,
        )
        return out.reshape(())
    dim = canonical_dim(dim, self.ndim)
    check_index(index, self.shape[dim], dim)
    x = jnp.moveaxis(self, dim, 0)
    src = jnp.moveaxis(as_dtype(source, self.dtype), dim, 0)
    floating = jnp.issubdtype(self.dtype, jnp.inexact)
    touched = jnp.zeros(x.shape[:1], bool).at[index].set(True)
    touched = touched.reshape((-1,) + (1,) * (x.ndim - 1))
    if reduce == "mean":
        base = x if include_self else jnp.zeros_like(x)
        total = base.at[index].add(src)
        count = jnp.full(x.shape[:1], 1 if include_self else 0, self.dtype).at[index].add(1)
        count = jnp.maximum(count, 1).reshape(touched.shape)
        # NOTE: integer means round down (torch divides with rounding_mode="floor").
        out = total / count if floating else jnp.floor_divide(total, count)
    elif reduce == "prod":
        base = x if include_self else jnp.where(touched, jnp.ones((), self.dtype), x)
        out = _scatter_multiply(base, index, src)
    else:  # (untouched rows are ``x``'s already)
        return jnp.moveaxis(_scatter_extreme(x, index, src, reduce, include_self), 0, dim)
    return jnp.moveaxis(jnp.where(touched, out, x), 0, dim)


@register(aten.put.default)
@_bool_as_int
def put(self, index, source, accumulate=False):
    check_flat_index(self, index)
    flat = self.reshape(-1)
    idx = index.reshape(-1)
    idx = jnp.where(idx < 0, idx + flat.shape[0], idx)
    values = as_dtype(source, self.dtype).reshape(-1)
    flat = flat.at[idx].add(values) if accumulate else _scatter_set(flat, (idx,), values)
    return flat.reshape(self.shape)


@register(aten.masked_scatter.default)
def masked_scatter(self, mask, source):
    # The k-th True position (row-major) takes source's k-th element: a static-shape gather.
    shape = tuple(ctx().out.shape)  # self and mask broadcast together
    flat_mask = jnp.broadcast_to(mask, shape).reshape(-1)
    flat_self = jnp.broadcast_to(self, shape).reshape(-1)
    pos = jnp.cumsum(flat_mask.astype(jnp.int64)) - 1
    src = as_dtype(source, self.dtype).reshape(-1)
    c = ctx()
    if c.checking and pos.size:
        # (eager's CUDA kernel checks the count too, on the host)
        c.check(pos[-1] >= src.shape[0], "Number of elements of source < number of ones in mask")
    taken = (
        src[jnp.clip(pos, 0, max(src.shape[0] - 1, 0))]
        if src.shape[0]
        else jnp.zeros_like(pos, self.dtype)
    )
    return jnp.where(flat_mask, taken, flat_self).reshape(shape)
