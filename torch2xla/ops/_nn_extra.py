"""More neural-network ops: adaptive max pooling, max unpooling, grid sampling, embedding
bags, anti-aliased resizing, masked-safe softmax, batch norm with running-stat updates."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla._errors import OpIndexError
from torch2xla.ops import _saved
from torch2xla.ops._bounds import check_index
from torch2xla.ops._common import as_dtype, jdt, opmath_dtype, out_dtype
from torch2xla.ops._nn import batch_norm_functional
from torch2xla.ops._registry import ctx, register
from torch2xla.ops._resize_uint8 import resize_uint8

aten = ops.aten
_I64 = np.dtype(np.int64)


# -- adaptive max pooling --------------------------------------------------------------------
def _adaptive_windows(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, valid) of shape (n_out, k): the input positions of each output's window."""
    starts = np.array([(i * n_in) // n_out for i in range(n_out)])
    ends = np.array([-(-((i + 1) * n_in) // n_out) for i in range(n_out)])
    k = int((ends - starts).max()) if n_out else 0
    pos = starts[:, None] + np.arange(k)[None, :]
    return np.minimum(pos, n_in - 1), pos < ends[:, None]


def _adaptive_max_pool(self, output_size):
    nd = len(output_size)
    lead = self.ndim - nd
    spatial = self.shape[lead:]
    x = self
    valid = np.ones((), bool)
    flat = np.zeros((), np.int64)
    # Gather every window: x[..., o1, ..., on, k1, ..., kn] with a validity mask.
    index = []
    for d, (n_in, n_out) in enumerate(zip(spatial, output_size)):
        pos, ok = _adaptive_windows(n_in, n_out)
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = pos.shape
        index.append(pos.reshape(shape))
        valid = valid & ok.reshape(shape)
        stride = int(np.prod(spatial[d + 1 :]))
        flat = flat + pos.reshape(shape) * stride
    windows = x[(Ellipsis, *index)]
    k = int(np.prod(windows.shape[self.ndim :]))
    windows = windows.reshape(windows.shape[: self.ndim] + (k,))
    valid = np.broadcast_to(valid, tuple(output_size) + valid.shape[nd:]).reshape(
        tuple(output_size) + (k,)
    )
    flat = np.broadcast_to(flat, valid.shape[:nd] + flat.shape[nd:]).reshape(valid.shape)
    if jnp.issubdtype(self.dtype, jnp.floating):
        low = -jnp.inf
        nan = jnp.isnan(windows) & valid
    else:
        low = np.iinfo(self.dtype).min
        nan = jnp.zeros(windows.shape, bool)
    masked = jnp.where(valid, windows, low)
    # NOTE: torch takes the first maximum, but a NaN always wins (the last NaN of the window).
    first_max = jnp.argmax(masked, axis=-1)
    last_nan = k - 1 - jnp.argmax(nan[..., ::-1], axis=-1)
    choice = jnp.where(jnp.any(nan, axis=-1), last_nan, first_max)
    values = jnp.take_along_axis(windows, choice[..., None], axis=-1)[..., 0]
    indices = jnp.take_along_axis(
        jnp.broadcast_to(flat, windows.shape), choice[..., None], axis=-1
    )[..., 0]
    return values, as_dtype(indices, _I64)


@register(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool(self, output_size):
    return _adaptive_max_pool(self, tuple(output_size))


# -- max unpooling ---------------------------------------------------------------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _unpool(x, flat_index, size):
    """Zeros of ``size`` elements with ``x``'s elements written at ``flat_index``."""
    return jnp.zeros((size,), x.dtype).at[flat_index].set(x.reshape(-1), mode="drop")


def _unpool_fwd(x, flat_index, size):
    return _unpool(x, flat_index, size), (flat_index, x.shape)


def _unpool_bwd(size, residuals, g):
    # NOTE: torch's gradient (max_pool_double_backward) reads the output gradient at every
    # index, also where a repeated index had its value overwritten by another element;
    # JAX's scatter rule gives it to the element that was written last only.
    flat_index, shape = residuals
    return g.at[flat_index].get(mode="fill", fill_value=0).reshape(shape), None


_unpool.defvjp(_unpool_fwd, _unpool_bwd)


def _max_unpool(self, indices, output_size):
    nd = len(output_size)
    lead = self.shape[:-nd]
    plane = int(np.prod(output_size))
    planes = int(np.prod(lead))
    index = indices.reshape(planes, -1)
    c = ctx()
    if c.checking and index.size:
        # eager raises for an index outside the output plane, naming the first one
        bad = ((index < 0) | (index >= plane)).reshape(-1)
        sizes = "x".join(str(n) for n in output_size)
        message = f"Found an invalid max index: {{value}} (output volumes are of size {sizes})"
        c.check(jnp.any(bad), message, index.reshape(-1)[jnp.argmax(bad)])
    index = jnp.where((index >= 0) & (index < plane), index, plane * planes)
    flat = (index + jnp.arange(planes, dtype=index.dtype)[:, None] * plane).reshape(-1)
    return _unpool(self, flat, plane * planes).reshape(tuple(lead) + tuple(output_size))


@register(aten.max_unpool2d.default)
def max_unpool2d(self, indices, output_size):
    return _max_unpool(self, indices, output_size)


@register(aten.max_unpool3d.default)
def max_unpool3d(self, indices, output_size, stride, padding):
    # stride and padding enter only eager's argument checks, which the trace has run.
    return _max_unpool(self, indices, output_size)


# -- grid sampling ---------------------------------------------------------------------------
def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord, twice_low, twice_high):
    if twice_low == twice_high:
        return jnp.zeros_like(coord)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = jnp.abs(coord - low)
    extra = jnp.fmod(c, span)
    flips = jnp.floor(c / span)
    return jnp.where(flips % 2 == 0, extra + low, span - extra + low)


def _pad_coord(coord, size, padding_mode, align_corners):
    """Apply grid_sample's padding rule to source coordinates (0: zeros, 1: border,
    2: reflection)."""
    if padding_mode == 1:
        return _clip_coord(coord, size - 1)
    if padding_mode == 2:
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        return _clip_coord(coord, size - 1)
    return coord


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _clip_coord(coord, high):
    """``coord`` clipped to ``[0, high]``, whose derivative is eager's
    (``clip_coordinates_set_grad``): 1 strictly inside and at NaN, 0 outside and on either
    bound (a grid point exactly on the border; JAX's clip gives half there)."""
    return jnp.clip(coord, 0, high)


@_clip_coord.defjvp
def _clip_coord_jvp(high, primals, tangents):
    (coord,), (t,) = primals, tangents
    inside = ((coord > 0) & (coord < high)) | jnp.isnan(coord)
    return _clip_coord(coord, high), jnp.where(inside, t, jnp.zeros_like(t))


def _gather(inp, coords, sizes):
    """inp[n, :, c1, c2, ...] at integer coords (each (N, *out)), 0 where out of bounds.
    Returns (N, C, *out)."""
    valid = jnp.ones(coords[0].shape, bool)
    clipped = []
    for c, size in zip(coords, sizes):
        valid = valid & (c >= 0) & (c <= size - 1)
        clipped.append(jnp.clip(c, 0, size - 1).astype(jnp.int32))
    n = jnp.arange(inp.shape[0]).reshape((-1,) + (1,) * (coords[0].ndim - 1))
    vals = inp[(n, slice(None), *clipped)]  # (N, *out, C)
    vals = jnp.where(valid[..., None], vals, 0)
    return jnp.moveaxis(vals, -1, 1)


def _cubic_weights(t):
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners):
    nd = input.ndim - 2
    sizes = input.shape[2:]
    # grid's last dim is (x, y[, z]): x indexes the last spatial dim.
    coords = [_unnormalize(grid[..., nd - 1 - d], sizes[d], align_corners) for d in range(nd)]
    if interpolation_mode == 2:  # bicubic (2-D only); padding applies to every tap
        floors = [jnp.floor(c) for c in coords]
        weights = [_cubic_weights(c - f) for c, f in zip(coords, floors)]
        out = 0
        for i in range(4):
            for j in range(4):
                taps = [floors[0] - 1 + i, floors[1] - 1 + j]
                taps = [_pad_coord(t, s, padding_mode, align_corners) for t, s in zip(taps, sizes)]
                w = weights[0][i] * weights[1][j]
                out = out + _gather(input, taps, sizes) * w[:, None]
        return out
    coords = [_pad_coord(c, s, padding_mode, align_corners) for c, s in zip(coords, sizes)]
    if interpolation_mode == 1:  # nearest, rounding half to even like nearbyint
        return _gather(input, [jnp.round(c) for c in coords], sizes)
    floors = [jnp.floor(c) for c in coords]
    fracs = [c - f for c, f in zip(coords, floors)]
    out = 0
    for corner in range(2**nd):
        bits = [(corner >> (nd - 1 - d)) & 1 for d in range(nd)]
        taps = [f + b for f, b in zip(floors, bits)]
        w = 1
        for frac, b in zip(fracs, bits):
            w = w * (frac if b else 1 - frac)
        out = out + _gather(input, taps, sizes) * w[:, None]
    return out


@register(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    result = out_dtype()
    acc = opmath_dtype(result)
    out = _grid_sample(
        as_dtype(input, acc), as_dtype(grid, acc), interpolation_mode, padding_mode, align_corners
    )
    return as_dtype(out, result)


# -- embedding bags --------------------------------------------------------------------------
@register(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def _embedding_bag(
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_bag(scale_grad_by_freq=True) is not supported")
    check_index(indices, weight.shape[0], 0)
    n = indices.shape[0]
    _check_offsets(offsets, n)
    n_bags = offsets.shape[0] - (1 if include_last_offset else 0)
    bag = jnp.searchsorted(offsets, jnp.arange(n), side="right") - 1
    bag = jnp.clip(bag, 0, max(n_bags - 1, 0))
    keep = jnp.ones((n,), bool)
    if padding_idx is not None and padding_idx >= 0:
        keep = indices != padding_idx
    # Half-precision bags accumulate in float32 (torch's opmath), rounded once.
    acc = opmath_dtype(weight.dtype)
    rows = as_dtype(jnp.take(weight, indices, axis=0), acc)
    if per_sample_weights is not None:
        rows = rows * as_dtype(per_sample_weights, rows.dtype)[:, None]
    seg = jnp.where(keep, bag, n_bags)  # dropped entries go to an extra segment
    counts = jax.ops.segment_sum(keep.astype(jnp.int64), seg, n_bags + 1)[:n_bags]
    if mode == 2:
        low = jnp.asarray(-jnp.inf, rows.dtype)
        out = jax.ops.segment_max(jnp.where(keep[:, None], rows, low), seg, n_bags + 1)[:n_bags]
        out = jnp.where(counts[:, None] > 0, out, 0)
        # Row (of weight) holding each bag's maximum, per feature.
        hit = (rows == out[jnp.clip(seg, 0, max(n_bags - 1, 0))]) & keep[:, None]
        pos = jnp.where(hit, jnp.arange(n)[:, None], n)
        first = jax.ops.segment_min(pos, seg, n_bags + 1)[:n_bags]
        max_idx = jnp.where(first < n, indices[jnp.clip(first, 0, max(n - 1, 0))], -1)
    else:
        out = jax.ops.segment_sum(jnp.where(keep[:, None], rows, 0), seg, n_bags + 1)[:n_bags]
        if mode == 1:
            out = out / jnp.maximum(counts, 1)[:, None].astype(out.dtype)
        max_idx = None
    result = [as_dtype(out, out_dtype(0))]
    for i, value in ((1, bag), (2, counts), (3, max_idx)):
        shape = tuple(ctx().out[i].shape)
        if value is not None and value.shape == shape:
            result.append(as_dtype(value, out_dtype(i)))
        else:
            result.append(jnp.zeros(shape, out_dtype(i)))
    return tuple(result)


def _check_offsets(offsets, n: int) -> None:
    """Eager's checks of a bag's offsets, in its order: the first is 0, the last is at most
    the number of indices, and none is negative (a bag would start before the indices)."""
    c = ctx()
    if not c.checking or offsets.shape[0] == 0:
        return
    first, last = offsets[0].astype(jnp.int64), offsets[-1].astype(jnp.int64)
    c.check(
        first != 0,
        "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
        "position 0. However, got {value}",
        first,
    )
    c.check(
        last > n,
        f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {{value}}",
        last,
    )
    low = jnp.min(offsets).astype(jnp.int64)
    c.check(low < 0, "index out of range in self", low, OpIndexError)


# -- anti-aliased resize -----------------------------------------------------------------------
def _triangle(x):
    return np.maximum(0.0, 1.0 - np.abs(x))


def _keys_cubic(x):
    """Keys' cubic convolution kernel with a = -0.5 (eager's anti-aliased bicubic filter)."""
    a, x = -0.5, np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


# filter and its width in input pixels at scale 1
_AA_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_keys_cubic, 4)}


def _aa_matrix(
    n_in: int, n_out: int, align_corners: bool, scale: float | None, mode: str
) -> np.ndarray:
    """(n_out, n_in) weights of torch's anti-aliased (PIL-style) resampling."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    kernel, width = _AA_FILTERS[mode]
    support = width / 2 * max(s, 1.0)
    inv = 1.0 / s if s >= 1.0 else 1.0
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        j = np.arange(lo, hi)
        w = kernel((j - center + 0.5) * inv)
        total = w.sum()
        if total != 0:
            m[i, lo:hi] = w / total
    return m


def _upsample_aa(self, output_size, align_corners, scales, mode: str):
    if self.dtype == jnp.uint8:  # eager's fixed-point kernel
        return resize_uint8(self, output_size, align_corners, scales, mode, antialias=True)
    acc = opmath_dtype(self.dtype)
    x = as_dtype(self, acc)
    for i, (n_out, scale) in enumerate(zip(output_size, scales)):
        axis = self.ndim - len(output_size) + i
        m = _aa_matrix(self.shape[axis], n_out, align_corners, scale, mode).astype(acc)
        x = jnp.moveaxis(
            jnp.tensordot(x, m, axes=([axis], [1]), precision=jax.lax.Precision.HIGHEST), -1, axis
        )
    return as_dtype(x, self.dtype)


def _aa_mode(target) -> str:
    return "bicubic" if "bicubic" in target.__name__ else "bilinear"


@register(aten._upsample_bilinear2d_aa.default, aten._upsample_bicubic2d_aa.default)
def _upsample_2d_aa(self, output_size, align_corners, scales_h=None, scales_w=None):
    mode = _aa_mode(ctx().node.target)
    return _upsample_aa(self, tuple(output_size), align_corners, (scales_h, scales_w), mode)


@register(aten._upsample_bilinear2d_aa.vec, aten._upsample_bicubic2d_aa.vec)
def _upsample_2d_aa_vec(input, output_size, align_corners, scale_factors):
    size = tuple(ctx().out.shape[-2:])
    scales = tuple(scale_factors) if scale_factors is not None else (None, None)
    return _upsample_aa(input, size, align_corners, scales, _aa_mode(ctx().node.target))


@register(
    aten._upsample_bilinear2d_aa_backward.default, aten._upsample_bicubic2d_aa_backward.default
)
def _upsample_2d_aa_backward(
    grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None
):
    # the derivative of the forward lowering (a product with each axis's weights)
    mode = _aa_mode(ctx().node.target)
    zeros = jnp.zeros(tuple(input_size), grad_output.dtype)
    scales = (scales_h, scales_w)
    _, vjp = jax.vjp(
        lambda x: _upsample_aa(x, tuple(output_size), align_corners, scales, mode), zeros
    )
    return as_dtype(vjp(grad_output)[0], out_dtype())


# -- softmax that is 0 on fully masked rows ----------------------------------------------------
@register(aten._safe_softmax.default)
def _safe_softmax(self, dim, dtype=None):
    result = out_dtype()
    acc = opmath_dtype(result)
    x = as_dtype(self, jdt(dtype) or acc)
    x = as_dtype(x, acc)
    if x.ndim == 0:
        x, dim = x[None], 0
        squeeze = True
    else:
        squeeze = False
    # NOTE: rows that are all -inf give 0 (not NaN); the gradient, from the output only as
    # eager's, is 0 there. One (L, S) matrix is kept, the output, which the attention's
    # product with v keeps anyway (a softmax and a select each kept their own before).
    out = _saved.safe_softmax(x, dim, x.dtype)
    return as_dtype(out[0] if squeeze else out, result)


# -- batch norm with running-stat updates ----------------------------------------------------
@register(aten._batch_norm_with_update_functional.default)
def _batch_norm_with_update_functional(
    input, weight, bias, running_mean, running_var, momentum, eps
):
    out, mean, invstd, new_mean, new_var = batch_norm_functional(
        input, weight, bias, running_mean, running_var, True, momentum, eps
    )
    reserve = jnp.zeros(tuple(ctx().out[3].shape), out_dtype(3))
    return (
        out,
        as_dtype(mean, out_dtype(1)),
        as_dtype(invstd, out_dtype(2)),
        reserve,
        new_mean,
        new_var,
    )


# -- col2im (fold) ---------------------------------------------------------------------------
@register(aten.col2im.default)
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    unbatched = self.ndim == 2
    cols = self[None] if unbatched else self
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel_size, dilation, padding, stride
    h, w = output_size
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    n, ckk = cols.shape[:2]
    c = ckk // (kh * kw)
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    out = jnp.zeros((n, c, h + 2 * ph, w + 2 * pw), self.dtype)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols_ = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            out = out.at[:, :, rows, cols_].add(blocks[:, :, i, j])
    out = out[:, :, ph : ph + h, pw : pw + w]
    return out[0] if unbatched else out


# -- fractional max pooling --------------------------------------------------------------------
def _fractional_starts(sample, n_in: int, n_out: int, pool: int):
    """Window starts from one uniform sample per plane (torch's generate_intervals)."""
    if n_out == 1:
        return jnp.full(sample.shape + (1,), n_in - pool, jnp.int64)
    alpha = (n_in - pool) / (n_out - 1)
    i = jnp.arange(n_out - 1, dtype=sample.dtype)
    starts = jnp.floor((i + sample[..., None]) * alpha) - jnp.floor(sample[..., None] * alpha)
    last = jnp.full(sample.shape + (1,), n_in - pool, jnp.int64)
    return jnp.concatenate([starts.astype(jnp.int64), last], axis=-1)


def _fractional_max_pool(self, kernel_size, output_size, random_samples):
    nd = len(output_size)
    unbatched = self.ndim == nd + 1
    x = self[None] if unbatched else self
    samples = random_samples[None] if unbatched and random_samples.ndim == 2 else random_samples
    spatial = x.shape[2:]
    lead = (jnp.arange(x.shape[0])[:, None], jnp.arange(x.shape[1])[None, :])
    # NOTE: torch pairs samples with dims as (W, H) in 2-D but (T, H, W) in 3-D.
    order = [1, 0] if nd == 2 else [0, 1, 2]
    index, flat = [], 0
    for d in range(nd):
        starts = _fractional_starts(
            samples[..., order[d]], spatial[d], output_size[d], kernel_size[d]
        )
        pos = starts[..., :, None] + jnp.arange(kernel_size[d])  # (N, C, out_d, k_d)
        shape = [x.shape[0], x.shape[1]] + [1] * (2 * nd)
        shape[2 + d], shape[2 + nd + d] = output_size[d], kernel_size[d]
        pos = pos.reshape(shape)
        index.append(pos)
        flat = flat + pos * int(np.prod(spatial[d + 1 :]))
    n = lead[0].reshape((-1, 1) + (1,) * (2 * nd))
    c = lead[1].reshape((1, -1) + (1,) * (2 * nd))
    windows = x[(n, c, *index)]
    k = int(np.prod(kernel_size))
    windows = windows.reshape(windows.shape[: 2 + nd] + (k,))
    flat = jnp.broadcast_to(flat, windows.shape[: 2 + nd] + flat.shape[2 + nd :]).reshape(
        windows.shape
    )
    nan = (
        jnp.isnan(windows)
        if jnp.issubdtype(windows.dtype, jnp.floating)
        else jnp.zeros(windows.shape, bool)
    )
    first_max = jnp.argmax(jnp.where(nan, -jnp.inf, windows), axis=-1)
    last_nan = k - 1 - jnp.argmax(nan[..., ::-1], axis=-1)
    choice = jnp.where(jnp.any(nan, axis=-1), last_nan, first_max)[..., None]
    values = jnp.take_along_axis(windows, choice, axis=-1)[..., 0]
    indices = as_dtype(jnp.take_along_axis(flat, choice, axis=-1)[..., 0], _I64)
    return (values[0], indices[0]) if unbatched else (values, indices)


@register(aten.fractional_max_pool2d.default, aten.fractional_max_pool3d.default)
def fractional_max_pool(self, kernel_size, output_size, random_samples):
    return _fractional_max_pool(self, tuple(kernel_size), tuple(output_size), random_samples)


@register(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default)
def grid_sampler_backward(
    grad_output, input, grid, interpolation_mode, padding_mode, align_corners, output_mask
):
    # The derivative of the forward lowering, in its compute dtype; an input's gradient not
    # asked for (``output_mask``) is None (eager's undefined tensor) or zeros.
    acc = opmath_dtype(out_dtype(0))

    def forward(x, g):
        return _grid_sample(x, g, interpolation_mode, padding_mode, align_corners)

    _, vjp = jax.vjp(forward, as_dtype(input, acc), as_dtype(grid, acc))
    grads = vjp(as_dtype(grad_output, acc))
    out = []
    for i, (g, want) in enumerate(zip(grads, output_mask)):
        val = ctx().out[i]
        if val is None:
            out.append(None)
        else:
            out.append(as_dtype(g if want else jnp.zeros_like(g), out_dtype(i)))
    return tuple(out)
