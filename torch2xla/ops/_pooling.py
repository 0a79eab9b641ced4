"""Pooling: max pooling as strided slices (values, indices and eager's gradient; a window
reduction for large windows), average pooling as window sums, adaptive average pooling as
products with averaging matrices. (Adaptive max pooling and max unpooling: ``_nn_extra``.)"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla.ops._common import as_dtype, opmath_dtype
from torch2xla.ops._nn import _tuple
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _pool_padding(in_sizes, out_sizes, kernel, stride, padding, dilation):
    """(lo, hi) padding per spatial dim that yields torch's output size (ceil_mode included)."""
    return [
        (p, max((o - 1) * s + d * (k - 1) + 1 - n - p, 0))
        for n, o, k, s, p, d in zip(in_sizes, out_sizes, kernel, stride, padding, dilation)
    ]


# Windows of more elements than this are pooled by a window reduction (a slice per element,
# each of the output's size, would grow the program with the window).
_MAX_TAPS = 27


def _max_pool(self, kernel_size, stride, padding, dilation, nd):
    """Max pooling as torch's kernels scan each window, over whole strided slices of the input
    (one per window element, "tap"): each window's value and the tap it chose (an int8 per
    output), and torch's flat indices from the tap.

    Exact where eager is: a window keeps its first maximum, but the last NaN; padding is never
    chosen, and a window of -inf only keeps its first real element. The gradient goes to the
    chosen element (a ``custom_jvp``: ``select_n`` of the tangent's slices by the chosen tap,
    transposed into interior-padded slices summed where windows overlap), as torch's backward
    scatters by the indices; a call without gradients runs the scan alone.

    NOTE: XLA's CPU window reductions are slow here, and the gradient of a max
    ``reduce_window`` (``select_and_scatter_add``) slower still: the 2x2 pool of a
    32x32x64x64 activation took 8.5 ms forward and 172 ms backward on one core, against 0.9
    and 10 ms for these slices (4 ms forward and 84 ms backward at 32x64x32x32 against 0.6
    and 5; issue 25's BatchNorm CNN).
    """
    kernel = _tuple(kernel_size, nd)
    stride = _tuple(stride, nd) if stride else kernel
    padding, dilation = _tuple(padding, nd), _tuple(dilation, nd)
    if math.prod(kernel) > _MAX_TAPS:
        return _max_pool_windowed(self, kernel, stride, padding, dilation, nd)
    out_shape = ctx().out[0].shape
    lead = self.ndim - nd
    sizes, out_sizes = self.shape[lead:], tuple(out_shape[lead:])
    pads = _pool_padding(sizes, out_sizes, kernel, stride, padding, dilation)
    floating = jnp.issubdtype(self.dtype, jnp.floating)
    low = np.array(-np.inf if floating else np.iinfo(self.dtype).min, self.dtype)
    x = self
    if any(lo or hi for lo, hi in pads):
        x = lax.pad(x, low, [(0, 0, 0)] * lead + [(lo, hi, 0) for lo, hi in pads])
    taps = list(itertools.product(*(range(k) for k in kernel)))

    def window(a, tap):
        start = (0,) * lead + tuple(t * d for t, d in zip(tap, dilation))
        limit = tuple(a.shape[:lead]) + tuple(
            t * d + (o - 1) * s + 1 for t, d, o, s in zip(tap, dilation, out_sizes, stride)
        )
        return lax.slice(a, start, limit, (1,) * lead + stride)

    # Per tap, which windows it lies inside the input for (None: all); each window's first
    # such tap is where torch's scan starts.
    grids = [np.arange(o) * s - p for o, s, p in zip(out_sizes, stride, padding)]
    inside = []
    for tap in taps:
        axes = [
            (g + t * d >= 0) & (g + t * d < n) for g, t, d, n in zip(grids, tap, dilation, sizes)
        ]
        mask = functools.reduce(np.logical_and, _outer(axes))
        inside.append(None if mask.all() else mask)
    first = np.argmax(np.stack([np.ones(out_sizes, bool) if m is None else m for m in inside]), 0)

    def scan(a):
        """torch's scan over the taps: (each window's value, the tap it chose)."""
        chosen = jnp.broadcast_to(first.astype(np.int8), out_shape)
        best = jnp.full(out_shape, low)
        for i, tap in enumerate(taps):
            v = window(a, tap)
            take = (v > best) | jnp.isnan(v) if floating else v > best
            if inside[i] is not None:
                take = take & inside[i]
            best = jnp.where(take, v, best)
            chosen = jnp.where(take, np.int8(i), chosen)
        return best, chosen

    @jax.custom_jvp
    def pooled(a):
        return scan(a)[0]

    @pooled.defjvp
    def _(primals, tangents):
        # The tangent of the chosen tap's element: linear in the tangent, so the gradient
        # is ``select_n``'s transpose (each window's cotangent at its chosen element).
        values, chosen = scan(primals[0])
        return values, lax.select_n(chosen, *(window(tangents[0], tap) for tap in taps))

    values = pooled(x) if floating else scan(x)[0]
    chosen = scan(lax.stop_gradient(x))[1]  # the same scan (XLA computes it once)
    # torch's index: the chosen element's flat position in its input plane.
    plane = np.cumprod((1,) + tuple(sizes[::-1]))[:-1][::-1]  # element strides of the plane
    base = sum(_outer([g * e for g, e in zip(grids, plane)])).astype(np.int64)
    offsets = np.array([sum(t * d * e for t, d, e in zip(tap, dilation, plane)) for tap in taps])
    indices = jnp.asarray(offsets, jnp.int64)[chosen.astype(jnp.int32)] + base
    return values, indices


def _max_pool_windowed(self, kernel, stride, padding, dilation, nd):
    """``_max_pool`` for windows of many elements: the indices by a window reduction, the
    values gathered at them (so the gradient reaches each window's index, as torch's backward
    does; a max window reduction's own gradient differs at NaN and -inf)."""
    out_shape = ctx().out[0].shape
    lead = self.ndim - nd
    pads = _pool_padding(self.shape[lead:], out_shape[lead:], kernel, stride, padding, dilation)
    cfg = {
        "window_dimensions": (1,) * lead + kernel,
        "window_strides": (1,) * lead + stride,
        "padding": [(0, 0)] * lead + pads,
        "window_dilation": (1,) * lead + dilation,
    }
    # NOTE: a numpy scalar init keeps max-pool differentiable in JAX.
    if jnp.issubdtype(self.dtype, jnp.floating):
        init = np.array(-np.inf, self.dtype)
    else:
        init = np.array(np.iinfo(self.dtype).min, self.dtype)
    # Indices (flat over the spatial dims, as torch) via a variadic window reduction.
    spatial = self.shape[lead:]
    flat = jnp.arange(math.prod(spatial), dtype=jnp.int64).reshape(spatial)
    flat = jnp.broadcast_to(flat, self.shape)

    def pick(a, b):
        # NOTE: torch scans each window keeping the first maximum but the last NaN, and any
        # real element (even -inf) beats padding (index -1). As a total order, so the
        # reduction may combine in any order: NaN > numbers; among NaNs the larger index;
        # among equal numbers a real index before padding, then the smaller index.
        (av, ai), (bv, bi) = a, b
        a_nan, b_nan = jnp.isnan(av), jnp.isnan(bv)
        earlier = (bi >= 0) & ((ai < 0) | (bi < ai))
        take_b = jnp.where(
            a_nan | b_nan,
            b_nan & (~a_nan | (bi > ai)),
            (bv > av) | ((bv == av) & earlier),
        )
        return jnp.where(take_b, bv, av), jnp.where(take_b, bi, ai)

    _, indices = lax.reduce_window(
        (lax.stop_gradient(self), flat), (init, np.array(-1, np.int64)), pick, **cfg
    )
    flat_x = self.reshape(self.shape[:lead] + (-1,))
    picked = indices.reshape(indices.shape[:lead] + (-1,))
    values = jnp.take_along_axis(flat_x, picked, axis=-1).reshape(indices.shape)
    return values, indices


def _outer(vectors):
    """1-d arrays, each shaped to run along its own axis of their broadcast (``np.ix_``, which
    reads boolean arrays as masks)."""
    n = len(vectors)
    return [np.reshape(v, (1,) * i + (-1,) + (1,) * (n - 1 - i)) for i, v in enumerate(vectors)]


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(self, kernel_size, stride, padding, dilation, 2)


@register(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(self, kernel_size, stride, padding, dilation, 3)


def _avg_pool(
    self,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
    nd,
    out_shape=None,
):
    kernel = _tuple(kernel_size, nd)
    stride = _tuple(stride, nd) if stride else kernel
    padding = _tuple(padding, nd)
    lead = self.ndim - nd
    out_shape = ctx().out.shape if out_shape is None else out_shape
    pads = _pool_padding(self.shape[lead:], out_shape[lead:], kernel, stride, padding, (1,) * nd)
    acc = opmath_dtype(self.dtype)
    x = as_dtype(self, acc)
    cfg = {
        "window_dimensions": (1,) * lead + kernel,
        "window_strides": (1,) * lead + stride,
        "padding": [(0, 0)] * lead + pads,
    }
    sums = lax.reduce_window(x, np.array(0, acc), lax.add, **cfg)
    if divisor_override:
        return as_dtype(sums / divisor_override, self.dtype)
    # Divisor per window: the padded extent (user padding, not ceil-mode overhang) when
    # count_include_pad, else the number of real elements.
    ones = jnp.ones(self.shape[lead:], acc)
    if count_include_pad:
        ones = lax.pad(ones, np.array(1, acc), [(p, p, 0) for p in padding])
        extra = [(0, hi - p) for (lo, hi), p in zip(pads, padding)]
    else:
        extra = pads
    counts = lax.reduce_window(ones, np.array(0, acc), lax.add, kernel, stride, extra)
    return as_dtype(sums / counts, self.dtype)


@register(aten.avg_pool2d.default, aten.avg_pool3d.default)
def avg_pool(
    self,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    nd = 3 if ctx().node.target is aten.avg_pool3d.default else 2
    return _avg_pool(
        self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd
    )


@register(aten.avg_pool1d.default)
def avg_pool1d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(self, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


def _adaptive_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, inside, counts): each output's window ``[floor(i*n_in/n_out),
    ceil((i+1)*n_in/n_out))`` as (n_out, k) positions (clamped), whether each is in it, and
    its length."""
    lo = np.array([(i * n_in) // n_out for i in range(n_out)], dtype=np.int64)
    hi = np.array([-(-((i + 1) * n_in) // n_out) for i in range(n_out)], dtype=np.int64)
    k = int((hi - lo).max()) if n_out else 0
    pos = lo[:, None] + np.arange(k)[None, :]
    return np.minimum(pos, n_in - 1), pos < hi[:, None], hi - lo


@register(
    aten._adaptive_avg_pool2d.default,
    aten._adaptive_avg_pool3d.default,
    aten.adaptive_avg_pool1d.default,
)
def adaptive_avg_pool(self, output_size):
    """Eager's window sums divided by each window's length per axis (``sum / kh / kw``). The
    sums select the window's elements (a product with a 0/1 matrix made NaN of every output
    beside an infinity: ``inf * 0``)."""
    nd = len(output_size)
    acc = opmath_dtype(self.dtype)
    x = as_dtype(self, acc)
    counts = []
    for i, n_out in enumerate(output_size):
        axis = self.ndim - nd + i
        pos, inside, count = _adaptive_taps(self.shape[axis], n_out)
        g = jnp.take(x, jnp.asarray(pos.reshape(-1)), axis=axis)
        g = g.reshape(x.shape[:axis] + pos.shape + x.shape[axis + 1 :])
        mask = inside.reshape((1,) * axis + inside.shape + (1,) * (x.ndim - axis - 1))
        x = jnp.sum(jnp.where(jnp.asarray(mask), g, jnp.zeros((), acc)), axis=axis + 1)
        shape = [1] * x.ndim
        shape[axis] = n_out
        counts.append(count.astype(acc).reshape(shape))
    for count in counts:
        x = x / jnp.asarray(count)
    return as_dtype(x, self.dtype)
