"""Order statistics, cumulative extremes, sorted search and histograms."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla.ops._common import (
    as_dtype,
    canonical_dim,
    half_rounding,
    is_half,
    opmath_dtype,
    out_dtype,
)
from torch2xla.ops._quickselect import kth_index
from torch2xla.ops._reduction import evenly_distributed
from torch2xla.ops._registry import ctx, register

aten = ops.aten
_I64 = np.dtype(np.int64)


def _is_float(x) -> bool:
    return jnp.issubdtype(x.dtype, jnp.inexact)


def _pick(x, order, pos, dim, keepdim):
    """Values and indices of the ``pos``-th element (along ``dim``) of ``x`` sorted by ``order``
    (a stable argsort); values are gathered from ``x`` so gradients reach the chosen element."""
    idx = jnp.take_along_axis(order, jnp.expand_dims(pos, dim), axis=dim)
    values = jnp.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        values, idx = jnp.squeeze(values, dim), jnp.squeeze(idx, dim)
    return values, as_dtype(idx, _I64)


def _scalar_pair(self):
    return self, jnp.zeros((), _I64)


# NOTE: NaN sorts last (it is the largest value for torch's selection ops); jnp's stable argsort
# does the same.
def _median(self, dim, keepdim, ignore_nan, eager_cpu=False):
    if self.ndim == 0:
        return _scalar_pair(self)
    dim = canonical_dim(dim, self.ndim)
    n = self.shape[dim]
    order = jnp.argsort(self, axis=dim, stable=True)
    if _is_float(self):
        nans = jnp.sum(jnp.isnan(self), axis=dim)
        if ignore_nan:
            pos = jnp.maximum((n - nans - 1) // 2, 0)
            # (a slice of NaN only: eager's CPU nth_element over elements its comparison
            # holds equal leaves some NaN there, which depends on the length only)
            if eager_cpu:
                pos = jnp.where(nans == n, _all_nan_position(n), pos)
        else:
            # torch.median returns NaN (the first one) when a slice holds any.
            pos = jnp.where(nans > 0, n - nans, (n - 1) // 2)
    else:
        pos = jnp.full(order.shape[:dim] + order.shape[dim + 1 :], (n - 1) // 2)
    return _pick(self, order, pos, dim, keepdim)


@functools.cache
def _all_nan_position(n: int) -> int:
    """The index eager's CPU ``nanmedian`` returns for ``n`` NaNs (asked of eager)."""
    import torch

    return int(torch.full((n,), math.nan, dtype=torch.float32, device="cpu").nanmedian(0).indices)


@register(aten.median.dim)
def median_dim(self, dim, keepdim=False):
    return _median(self, dim, keepdim, ignore_nan=False)


@register(aten.nanmedian.dim)
def nanmedian_dim(self, dim, keepdim=False):
    return _median(self, dim, keepdim, ignore_nan=True, eager_cpu=not ctx().on_cuda)


# (the whole-array medians' gradient is eager's evenly_distribute_backward: shared among
# the elements tied with the median, or the NaNs; the .dim overloads' goes to the index)
@register(aten.median.default)
def median(self):
    if self.size == 0:
        return jnp.full((), jnp.nan, self.dtype)
    return evenly_distributed(lambda x: _median(x.reshape(-1), 0, False, False)[0])(self)


@register(aten.nanmedian.default)
def nanmedian(self):
    if self.size == 0:
        return jnp.full((), jnp.nan, self.dtype)
    return evenly_distributed(lambda x: _median(x.reshape(-1), 0, False, True)[0])(self)


@register(aten.kthvalue.default)
def kthvalue(self, k, dim=-1, keepdim=False):
    if self.ndim == 0:
        return _scalar_pair(self)
    dim = canonical_dim(dim, self.ndim)
    if ctx().on_cuda:
        order = jnp.argsort(self, axis=dim, stable=True)
        pos = jnp.full(order.shape[:dim] + order.shape[dim + 1 :], k - 1)
        return _pick(self, order, pos, dim, keepdim)
    # NOTE: among equal elements eager's CPU kernel indexes the one its quickselect leaves
    # at k - 1 (``_quickselect``); the value is read at that index, so its gradient goes there.
    x = jnp.moveaxis(lax.stop_gradient(self), dim, -1)
    idx = kth_index(x.reshape((-1, x.shape[-1])), k - 1).reshape(x.shape[:-1])
    idx = as_dtype(jnp.expand_dims(idx, dim), _I64)
    values = jnp.take_along_axis(self, idx, axis=dim)
    if not keepdim:
        values, idx = jnp.squeeze(values, dim), jnp.squeeze(idx, dim)
    return values, idx


@register(aten.mode.default)
def mode(self, dim=-1, keepdim=False):
    if self.ndim == 0:
        return _scalar_pair(self)
    dim = canonical_dim(dim, self.ndim)
    x = jnp.moveaxis(self, dim, -1)
    n = x.shape[-1]
    order = jnp.argsort(x, axis=-1, stable=True)
    s = jnp.take_along_axis(x, order, axis=-1)
    pos = jnp.arange(n)
    # Runs of equal values in sorted order; the longest wins, the smallest value on ties,
    # and its index is that of the run's last element (torch's CPU kernel).
    start = jnp.concatenate([jnp.ones(s.shape[:-1] + (1,), bool), s[..., 1:] != s[..., :-1]], -1)
    end = jnp.concatenate([s[..., 1:] != s[..., :-1], jnp.ones(s.shape[:-1] + (1,), bool)], -1)
    run_start = lax.cummax(jnp.where(start, pos, 0), axis=x.ndim - 1)
    count = jnp.where(end, pos - run_start + 1, 0)
    best = jnp.argmax(count, axis=-1)
    idx = jnp.take_along_axis(order, best[..., None], axis=-1)
    values = jnp.take_along_axis(x, idx, axis=-1)
    values, idx = jnp.moveaxis(values, -1, dim), jnp.moveaxis(idx, -1, dim)
    if not keepdim:
        values, idx = jnp.squeeze(values, dim), jnp.squeeze(idx, dim)
    return values, as_dtype(idx, _I64)


def _cum_extreme(self, dim, maximum: bool):
    if self.ndim == 0:
        return _scalar_pair(self)
    dim = canonical_dim(dim, self.ndim)
    idx = lax.broadcasted_iota(_I64, self.shape, dim)
    nan = _is_float(self)

    # NOTE: torch updates on ties (the latest index wins) and once a NaN appears it stays the
    # extreme, later NaNs taking over the index.
    def combine(a, b):
        (av, ai), (bv, bi) = a, b
        take = (bv >= av) if maximum else (bv <= av)
        if nan:
            take = (take & ~jnp.isnan(av)) | jnp.isnan(bv)
        return jnp.where(take, bv, av), jnp.where(take, bi, ai)

    _, indices = lax.associative_scan(combine, (lax.stop_gradient(self), idx), axis=dim)
    return jnp.take_along_axis(self, indices, axis=dim), indices


@register(aten.cummax.default)
def cummax(self, dim):
    return _cum_extreme(self, dim, maximum=True)


@register(aten.cummin.default)
def cummin(self, dim):
    return _cum_extreme(self, dim, maximum=False)


@register(aten.logcumsumexp.default)
def logcumsumexp(self, dim):
    result = out_dtype()
    if self.ndim == 0:
        return as_dtype(self, result)
    acc = opmath_dtype(result)
    return as_dtype(_logcumsumexp(as_dtype(self, acc), canonical_dim(dim, self.ndim)), result)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _logcumsumexp(x, axis):
    return lax.cumlogsumexp(x, axis=axis)


def _logcumsumexp_fwd(x, axis):
    out = lax.cumlogsumexp(x, axis=axis)
    return out, (x, out)


def _logcumsumexp_bwd(axis, residuals, g):
    # NOTE: torch's formula, in log space: dx_i = e^{x_i} sum_{j >= i} g_j e^{-out_j}, summed
    # separately over positive and negative g so nothing overflows (JAX's own rule loses
    # float32 accuracy through the scan).
    x, out = residuals
    dtype = g.dtype
    wide = {jnp.float32: jnp.float64, jnp.complex64: jnp.complex128}.get(jnp.dtype(dtype).type)
    if wide is not None:
        # x - out cancels for large x: float64 keeps the float32 gradient accurate.
        x, g = x.astype(wide), g.astype(wide)
        out = lax.cumlogsumexp(x, axis=axis)  # the float32 output's rounding would dominate

    def reverse_lcse(v):
        return jnp.flip(lax.cumlogsumexp(jnp.flip(v, axis), axis=axis), axis)

    if jnp.iscomplexobj(g):
        # torch's complex branch, conj(exp(x + rlcse(log(conj(grad)) - out))), for JAX's
        # cotangent (the conjugate of torch's gradient): no split by sign.
        return (jnp.exp(x + reverse_lcse(jnp.log(g) - out)).astype(dtype),)

    pos = jnp.where(g > 0, jnp.log(jnp.where(g > 0, g, 1)) - out, -jnp.inf)
    neg = jnp.where(g < 0, jnp.log(jnp.where(g < 0, -g, 1)) - out, -jnp.inf)
    return ((jnp.exp(x + reverse_lcse(pos)) - jnp.exp(x + reverse_lcse(neg))).astype(dtype),)


_logcumsumexp.defvjp(_logcumsumexp_fwd, _logcumsumexp_bwd)


# -- sorted search -------------------------------------------------------------------------------
# NOTE: eager's CPU kernel is a plain lower (upper) bound, ``start = mid + 1`` while not
# ``seq[mid] >= v`` (``>``): a NaN compares false everywhere, so a NaN value goes past every
# boundary and a NaN boundary acts as smaller than any value, and an unsorted sequence gives
# whatever that path finds. jnp.searchsorted orders NaN last (NumPy's rule) and halves the
# range another way, so its answers differ there: the same search is run here, on every
# value at once, one step per bit of the length.
def _bound(seq, values, right):
    """Eager's insertion points of ``values`` (its leading dims ``seq``'s batch dims) into the
    last dim of ``seq``."""
    n = seq.shape[-1]
    batch = seq.shape[:-1]
    rows = seq.reshape((math.prod(batch), n))
    flat = values.reshape((rows.shape[0], math.prod(values.shape[len(batch) :])))
    start = jnp.zeros(flat.shape, jnp.int64)
    if n == 0:
        return start.reshape(batch + values.shape[len(batch) :])
    end = jnp.full(flat.shape, n, jnp.int64)
    for _ in range(max(n, 1).bit_length()):
        mid = start + ((end - start) >> 1)
        at = jnp.take_along_axis(rows, jnp.clip(mid, 0, n - 1), axis=-1)
        below = ~(at > flat) if right else ~(at >= flat)
        live = start < end
        start = jnp.where(live & below, mid + 1, start)
        end = jnp.where(live & ~below, mid, end)
    return start.reshape(batch + values.shape[len(batch) :])


def _common(seq, values):
    """Both operands in eager's promoted dtype (which it compares in)."""
    from torch2xla.runtime._interop import jax_dtype, torch_dtype

    if not hasattr(values, "shape"):
        return seq, jnp.asarray(values, seq.dtype)
    if seq.dtype == values.dtype:
        return seq, values
    import torch

    common = jax_dtype(torch.promote_types(torch_dtype(seq.dtype), torch_dtype(values.dtype)))
    return seq.astype(common), values.astype(common)


@register(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    if side is not None:
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        c = ctx()
        if c.checking and sorter.size:
            bad = (sorter < 0) | (sorter >= seq.shape[-1])
            c.check(jnp.any(bad), "torch.searchsorted(): sorter index out of range")
        seq = jnp.take_along_axis(seq, sorter, axis=-1)
    seq, values = _common(seq, self)
    if seq.ndim == 1:
        out = _bound(seq, values.reshape((1, -1)), right).reshape(values.shape)
    else:
        out = _bound(seq, values, right)
    return as_dtype(out, out_dtype())


@register(aten.bucketize.Tensor, aten.bucketize.Scalar)
def bucketize(self, boundaries, *, out_int32=False, right=False):
    boundaries, values = _common(boundaries, self)
    out = _bound(boundaries, values.reshape((1, -1)), right).reshape(values.shape)
    return as_dtype(out, out_dtype())


# -- histograms ----------------------------------------------------------------------------------
def _edges(lo, hi, bins, dtype):
    """``bins + 1`` equal-width bin edges over [lo, hi] as eager's linspace computes them in
    ``dtype``: one rounded step, the first half counted up from ``lo``, the rest down from
    ``hi`` (each product and sum rounded to ``dtype``)."""
    lo, hi = jnp.asarray(lo, dtype), jnp.asarray(hi, dtype)
    step = (hi - lo) / jnp.asarray(bins, dtype)
    i = jnp.arange(bins + 1)
    up = lo + step * i.astype(dtype)
    down = hi - step * (bins - i).astype(dtype)
    return jnp.where(i < (bins + 1) // 2, up, down)


def _hist_counts(x, edges, weight, dtype, local_search=True):
    """Counts of ``x`` in the bins between ``edges`` (the last bin holds its right edge)."""
    # NOTE: torch interpolates an element's bin, (x - lo) * bins / (hi - lo) truncated, each
    # step rounded to the input's dtype. torch.histogram then corrects it against the edges on
    # either side (so the bin is where the element falls among the edges); histc does not.
    # NaN and values outside [edges[0], edges[-1]] are not counted.
    bins = edges.shape[0] - 1
    lo, hi = edges[0], edges[-1]
    if local_search:
        pos = jnp.searchsorted(edges, x, side="right") - 1
    else:
        dt = x.dtype
        # (the divisor spread over the elements behind a barrier: XLA divides by a broadcast
        # scalar as a multiply by its reciprocal, one ulp off, a whole bin at a bin's edge)
        width = lax.optimization_barrier(jnp.broadcast_to(hi - lo, x.shape))
        pos = _rounded(_rounded(x - lo, dt) * jnp.asarray(bins, dt), dt) / width
        pos = jnp.trunc(_rounded(pos, dt)).astype(jnp.int64)
    pos = jnp.minimum(pos, bins - 1)
    valid = (x >= lo) & (x <= hi)
    w = jnp.ones_like(x, dtype) if weight is None else as_dtype(weight.reshape(-1), dtype)
    w = jnp.where(valid, w, 0)
    return jnp.zeros((bins,), dtype).at[jnp.where(valid, jnp.maximum(pos, 0), 0)].add(w)


def _rounded(v, dtype):
    """``v`` rounded to ``dtype`` where XLA would keep a half-precision intermediate wider."""
    return half_rounding(v, np.dtype(dtype)) if is_half(dtype) else v


def _range(x, lo, hi, widen, data):
    """[lo, hi] from the arguments, or from the data where ``data`` (histc: min == max;
    histogram: no range); an empty range is widened by ``widen`` on each side (1 for histc,
    0.5 for histogram)."""
    if data:
        lo, hi = (jnp.min(x, initial=np.inf), jnp.max(x, initial=-np.inf)) if x.size else (0, 0)
        lo = jnp.where(jnp.isfinite(lo), lo, 0)
        hi = jnp.where(jnp.isfinite(hi), hi, 0)
    elif lo == hi:  # widened in double precision, as eager does, then rounded to the dtype
        return jnp.asarray(lo - widen, x.dtype), jnp.asarray(hi + widen, x.dtype)
    lo, hi = jnp.asarray(lo, x.dtype), jnp.asarray(hi, x.dtype)
    same = lo == hi
    return jnp.where(same, lo - widen, lo), jnp.where(same, hi + widen, hi)


@register(aten.histc.default)
def histc(self, bins=100, min=0, max=0):
    x = self.reshape(-1)
    data = min == max and x.size > 0  # eager bins the data's range where min == max
    if data:
        # (eager raises where the data's range is not finite: a NaN or an infinity in it)
        lo, hi = jnp.min(x).astype(jnp.float32), jnp.max(x).astype(jnp.float32)
        bits = [lax.bitcast_convert_type(v, jnp.uint32).astype(jnp.int64) for v in (lo, hi)]
        ctx().check(
            ~(jnp.isfinite(lo) & jnp.isfinite(hi)),
            "",
            (bits[0] << 32) | bits[1],
            explain=_histc_range,
        )
    lo, hi = _range(x, min, max, 1, data)
    return _hist_counts(x, _edges(lo, hi, bins, x.dtype), None, out_dtype(), False)


def _histc_range(value: int) -> tuple:
    """Eager's error for a histc whose data range (two float32 bit patterns in ``value``) is
    not finite, formatted as eager's (``[-nan, -nan]``, ``[1, inf]``: its min/max of data
    holding a NaN is the x86 default NaN, whose sign bit is set)."""
    from torch2xla._errors import OpError

    def shown(bits: int) -> str:
        v = float(np.array(bits & 0xFFFFFFFF, np.uint32).view(np.float32))
        if np.isnan(v):
            return "-nan"
        return f"{v:g}"

    ends = f"[{shown(value >> 32)}, {shown(value)}]"
    return f"torch.histc: range of {ends} is not finite", OpError


def _density(hist, edges):
    widths = edges[1:] - edges[:-1]
    return hist / (jnp.sum(hist) * widths)


@register(aten.histogram.bin_ct)
def histogram_bin_ct(self, bins=100, *, range=None, weight=None, density=False):
    x = self.reshape(-1)
    lo, hi = _range(x, *(range if range is not None else (None, None)), 0.5, range is None)
    edges = _edges(lo, hi, bins, self.dtype)
    hist = _hist_counts(x, edges, weight, out_dtype(0))
    return (_density(hist, edges) if density else hist), edges


@register(aten.histogram.bins_tensor)
def histogram_bins_tensor(self, bins, *, weight=None, density=False):
    x = self.reshape(-1)
    n = bins.shape[0] - 1
    pos = jnp.searchsorted(bins, x, side="right") - 1
    pos = jnp.where(x == bins[-1], n - 1, pos)
    valid = (x >= bins[0]) & (x <= bins[-1]) & ~jnp.isnan(x)
    dtype = out_dtype(0)
    w = jnp.ones_like(x, dtype) if weight is None else as_dtype(weight.reshape(-1), dtype)
    hist = jnp.zeros((n,), dtype).at[jnp.where(valid, pos, 0)].add(jnp.where(valid, w, 0))
    return (_density(hist, bins) if density else hist), bins


# -- static-size nonzero -------------------------------------------------------------------------
@register(aten.nonzero_static.default)
def nonzero_static(self, *, size, fill_value=-1):
    if self.ndim == 0:
        coords = jnp.zeros((size, 0), _I64)
        return coords
    idx = jnp.nonzero(self, size=size, fill_value=fill_value)
    return jnp.stack([as_dtype(i, _I64) for i in idx], axis=-1).reshape(ctx().out.shape)


# -- segment reductions ------------------------------------------------------------------------
def _check_segments(counts, size: int, lengths: bool, unsafe: bool) -> None:
    """Eager's checks of the segments: ``lengths`` (unless ``unsafe``) not negative and
    summing to the reduced dimension's ``size``; ``offsets`` not decreasing."""
    c = ctx()
    if not c.checking or counts.size == 0:
        return
    negative = jnp.any(counts < 0)
    if not lengths:
        message = (
            "Expected segment_length >= 0 to be true, but got false.  (Could this error message "
            "be improved?  If so, please report an enhancement request to PyTorch.)"
        )
        c.check(negative, message)
    elif not unsafe:
        c.check(negative, "lengths contains negative value!")
        message = (
            "segment_reduce(): Expected all rows of lengths along axis to sum to "
            "data.size(lengths.dim()-1) when !unsafe."
        )
        c.check(jnp.sum(counts) != size, message)


@register(aten.segment_reduce.default)
def segment_reduce(
    data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None
):
    if indices is not None:
        raise NotImplementedError("segment_reduce(indices=...) is not supported by torch either")
    counts = lengths if lengths is not None else offsets[..., 1:] - offsets[..., :-1]
    if counts.ndim != 1:
        raise NotImplementedError("segment_reduce with batched lengths/offsets is not lowered")
    axis = canonical_dim(axis, data.ndim)
    _check_segments(counts, data.shape[axis], lengths is not None, unsafe)
    n_seg = counts.shape[0]
    x = jnp.moveaxis(data, axis, 0)
    ends = jnp.cumsum(counts)
    position = jnp.arange(x.shape[0])
    if offsets is not None:  # (the segments start at offsets[0], which may not be 0)
        ends = ends + offsets[..., 0]
    seg = jnp.searchsorted(ends, position, side="right")
    if offsets is not None:
        seg = jnp.where(position < offsets[..., 0], n_seg, seg)  # (dropped: out of range)
    # NOTE: torch starts every segment from `initial` when given (a mean divides by the count
    # only); an empty segment is `initial`, else 0 (sum), 1 (prod), NaN (mean), -inf/inf.
    if reduce in ("sum", "mean"):
        out = jax.ops.segment_sum(x, seg, n_seg)
    elif reduce == "prod":
        out = jax.ops.segment_prod(x, seg, n_seg)
    elif reduce == "max":
        out = jax.ops.segment_max(x, seg, n_seg)
    elif reduce == "min":
        out = jax.ops.segment_min(x, seg, n_seg)
    else:
        raise NotImplementedError(f"segment_reduce(reduce={reduce!r})")
    shape = (-1,) + (1,) * (x.ndim - 1)
    empty = (counts == 0).reshape(shape)
    if initial is not None:
        init = jnp.asarray(initial, x.dtype)
        combine = {
            "sum": jnp.add,
            "mean": jnp.add,
            "prod": jnp.multiply,
            "max": jnp.maximum,
            "min": jnp.minimum,
        }[reduce]
        out = jnp.where(empty, init, combine(out, init))
    if reduce == "mean":
        n = counts.reshape(shape).astype(x.dtype)
        fallback = jnp.asarray(initial, x.dtype) if initial is not None else jnp.nan
        out = jnp.where(empty, fallback, out / jnp.where(empty, 1, n))
    elif initial is None and reduce in ("max", "min"):
        out = jnp.where(empty, -jnp.inf if reduce == "max" else jnp.inf, out)
    return as_dtype(jnp.moveaxis(out, 0, axis), out_dtype())


# -- hashing -------------------------------------------------------------------------------------
@register(aten.hash_tensor.default)
def hash_tensor(self, dim=(), *, keepdim=False, mode=0):
    if mode != 0:
        raise NotImplementedError(f"hash_tensor(mode={mode}) is not lowered")
    # mode 0: XOR of the elements' bits, floats as float64 and integers as int64.
    wide = jnp.float64 if jnp.issubdtype(self.dtype, jnp.floating) else jnp.int64
    bits = lax.bitcast_convert_type(self.astype(wide), jnp.uint64)
    if self.ndim == 0:
        return bits
    axes = tuple(range(self.ndim)) if not dim else tuple(d % self.ndim for d in dim)
    out = lax.reduce(bits, np.uint64(0), lax.bitwise_xor, axes)
    if keepdim:
        out = jnp.expand_dims(out, axes)
    return out


# -- multi-dimensional histograms ----------------------------------------------------------------
def _dd_points(self):
    return self.reshape(-1, self.shape[-1])


def _dd_edges(points, bins, range_, dtype):
    """Equal-width bin edges per dim: over ``range_`` or the data, an empty range widened by 0.5
    on each side (torch's rule)."""
    edges = []
    for d, n in enumerate(bins):
        col = points[:, d]
        if range_ is not None:
            lo, hi = (
                jnp.asarray(range_[2 * d], col.dtype),
                jnp.asarray(range_[2 * d + 1], col.dtype),
            )
        elif col.size:
            lo, hi = jnp.min(col), jnp.max(col)
        else:
            lo, hi = jnp.asarray(0, col.dtype), jnp.asarray(0, col.dtype)
        same = lo == hi
        lo, hi = jnp.where(same, lo - 0.5, lo), jnp.where(same, hi + 0.5, hi)
        edges.append(jnp.linspace(lo, hi, n + 1).astype(dtype))
    return edges


def _dd_hist(points, edges, weight, density, dtype, linear):
    """Counts of ``points`` (N, D) in the grid of ``edges``; ``linear`` edges are located by
    interpolation and corrected against the edges, others by binary search."""
    n_bins = [e.shape[0] - 1 for e in edges]
    flat = jnp.zeros(points.shape[:1], jnp.int64)
    valid = jnp.ones(points.shape[:1], bool)
    for d, (e, n) in enumerate(zip(edges, n_bins)):
        x = points[:, d]
        if linear:
            pos = jnp.floor((x - e[0]) * n / (e[-1] - e[0])).astype(jnp.int64)
            pos = jnp.clip(pos, 0, n - 1)
            pos = jnp.where(x < e[pos], pos - 1, pos)
            pos = jnp.where((pos < n - 1) & (x >= e[jnp.minimum(pos + 1, n)]), pos + 1, pos)
        else:
            pos = jnp.searchsorted(e, x, side="right") - 1
        pos = jnp.where(x == e[-1], n - 1, pos)
        valid = valid & (x >= e[0]) & (x <= e[-1]) & ~jnp.isnan(x)
        flat = flat * n + jnp.clip(pos, 0, n - 1)
    w = jnp.ones(points.shape[:1], dtype) if weight is None else as_dtype(weight.reshape(-1), dtype)
    hist = jnp.zeros((int(np.prod(n_bins)),), dtype).at[flat].add(jnp.where(valid, w, 0))
    hist = hist.reshape(n_bins)
    if density:
        widths = 1
        for d, e in enumerate(edges):
            shape = [1] * len(edges)
            shape[d] = -1
            widths = widths * (e[1:] - e[:-1]).reshape(shape)
        hist = hist / (jnp.sum(hist) * widths)
    return hist


@register(aten._histogramdd_bin_edges.default)
def _histogramdd_bin_edges(self, bins, *, range=None, weight=None, density=False):
    return _dd_edges(_dd_points(self), bins, range, self.dtype)


@register(aten._histogramdd_from_bin_cts.default)
def _histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density=False):
    points = _dd_points(self)
    edges = _dd_edges(points, bins, range, self.dtype)
    return _dd_hist(points, edges, weight, density, out_dtype(), linear=True)


@register(aten._histogramdd_from_bin_tensors.default)
def _histogramdd_from_bin_tensors(self, bins, *, weight=None, density=False):
    return _dd_hist(_dd_points(self), list(bins), weight, density, out_dtype(), linear=False)
