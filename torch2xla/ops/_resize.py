"""Linear, bilinear, trilinear and bicubic resizing as eager's CPU kernels compute them: each
output element a sum of taps ``x[i0] * w0 + x[i1] * w1 (+ ...)`` along each axis, the last
axis innermost. torch's decomposition writes the linear case as ``x0 + (x1 - x0) * w``
instead, which is NaN next to an infinity (``inf - inf``) where eager's sum is inf; and a tap of
weight 0 must still be read (``inf * 0`` is NaN in eager too), except where eager reads the
same element twice (an output size equal to the input's: weights 1 and 0 on one element).

Positions and weights follow eager's ``area_pixel_compute_scale`` /
``area_pixel_compute_source_index`` in the kernel's compute type (float32 for float32 and
half inputs), computed here on the host."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from torch._ops import ops
from torch._prims_common import suggest_memory_format

from torch2xla.ops._common import opmath_dtype
from torch2xla.ops._registry import ctx, register
from torch2xla.ops._resize_uint8 import resize_uint8

aten = ops.aten


def _scale(n_in: int, n_out: int, align_corners: bool, scale: float | None, t) -> np.ndarray:
    if align_corners:
        return t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
    if scale is not None and scale > 0:
        return t(1.0 / scale)
    return t(n_in) / t(n_out)


def _source(n_in, n_out, align_corners, scale, t, cubic) -> np.ndarray:
    """Each output's real-valued source position, in the compute type ``t``."""
    s = _scale(n_in, n_out, align_corners, scale, t)
    i = np.arange(n_out).astype(t)
    if align_corners:
        return s * i
    real = s * (i + t(0.5)) - t(0.5)
    return real if cubic else np.maximum(real, t(0))


def _linear_taps(n_in, n_out, align_corners, scale, t):
    """(indices, weights), each (n_out, 2)."""
    if n_in == n_out:  # eager copies: both taps on the same element, weights 1 and 0
        i = np.arange(n_out)
        return np.stack([i, i], 1), np.stack([np.ones(n_out, t), np.zeros(n_out, t)], 1)
    real = _source(n_in, n_out, align_corners, scale, t, cubic=False)
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    lam1 = np.clip(real - i0.astype(t), t(0), t(1)).astype(t)
    i1 = i0 + (i0 < n_in - 1)
    return np.stack([i0, i1], 1), np.stack([t(1) - lam1, lam1], 1).astype(t)


def _cubic_taps(n_in, n_out, align_corners, scale, t):
    """(indices, weights), each (n_out, 4): Keys' cubic convolution with A = -0.75, the
    indices clamped into the input (eager's ``upsample_bicubic2d``)."""
    real = _source(n_in, n_out, align_corners, scale, t, cubic=True)
    i0 = np.floor(real).astype(np.int64)
    x1 = (real - i0.astype(t)).astype(t)
    a = t(-0.75)

    def near(x):  # |x| <= 1
        return ((a + t(2)) * x - (a + t(3))) * x * x + t(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - t(5) * a) * x + t(8) * a) * x - t(4) * a

    x2 = t(1) - x1
    w = np.stack([far(x1 + t(1)), near(x1), near(x2), far(x2 + t(1))], 1).astype(t)
    idx = np.clip(i0[:, None] - 1 + np.arange(4)[None, :], 0, n_in - 1)
    return idx, w


def _resize(x, output_size, align_corners, scales, taps):
    """``x`` resized over its last ``len(output_size)`` axes by the taps of ``taps``."""
    dtype = x.dtype
    if dtype == jnp.uint8 and len(output_size) == 2:  # eager's fixed-point kernels
        mode = "bicubic" if taps is _cubic_taps else "bilinear"
        return resize_uint8(x, output_size, align_corners, scales, mode, antialias=False)
    floating = jnp.issubdtype(dtype, jnp.floating)
    acc = opmath_dtype(dtype) if floating else np.dtype(np.float32)
    t = acc.type
    y = x.astype(acc)
    nd = len(output_size)
    for i in reversed(range(nd)):  # the last axis innermost, as eager nests its taps
        axis = x.ndim - nd + i
        idx, w = taps(x.shape[axis], output_size[i], align_corners, scales[i], t)
        shape = [1] * y.ndim
        shape[axis] = output_size[i]
        out = None
        for j in range(idx.shape[1]):
            term = jnp.take(y, jnp.asarray(idx[:, j]), axis=axis) * jnp.asarray(
                w[:, j].reshape(shape)
            )
            out = term if out is None else out + term
        y = out
    if floating:
        return y.astype(dtype)
    info = np.iinfo(dtype)
    return jnp.clip(jnp.round(y), info.min, info.max).astype(dtype)


def _scales(scale_factors, nd):
    return tuple(scale_factors) if scale_factors is not None else (None,) * nd


def _size(nd):
    return tuple(ctx().out.shape[-nd:])


@register(aten.upsample_linear1d.default)
def upsample_linear1d(self, output_size, align_corners, scales=None):
    return _resize(self, tuple(output_size), align_corners, (scales,), _linear_taps)


@register(aten.upsample_bilinear2d.default)
def upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    return _resize(self, tuple(output_size), align_corners, (scales_h, scales_w), _linear_taps)


@register(aten.upsample_trilinear3d.default)
def upsample_trilinear3d(
    self, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None
):
    scales = (scales_d, scales_h, scales_w)
    return _resize(self, tuple(output_size), align_corners, scales, _linear_taps)


@register(aten.upsample_bicubic2d.default)
def upsample_bicubic2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    return _resize(self, tuple(output_size), align_corners, (scales_h, scales_w), _cubic_taps)


def _vec(nd, taps):
    def lowering(input, output_size, align_corners, scale_factors):
        return _resize(input, _size(nd), align_corners, _scales(scale_factors, nd), taps)

    return lowering


register(aten.upsample_linear1d.vec)(_vec(1, _linear_taps))
register(aten.upsample_bilinear2d.vec)(_vec(2, _linear_taps))
register(aten.upsample_trilinear3d.vec)(_vec(3, _linear_taps))
register(aten.upsample_bicubic2d.vec)(_vec(2, _cubic_taps))


# -- the composite traced in place of torch's ------------------------------------------------
# torch decomposes ``upsample_*.vec`` (and ``upsample_bilinear2d``/``upsample_bicubic2d``) at
# their autograd and composite keys while tracing (``py_impl``), before any table of ours, into
# the lerp form above. The kernels below, traced there instead, are eager's sums of taps in
# torch ops (their derivative: autograd's of the taps, as before).
def _torch_taps(n_in, n_out, align_corners, scale, dtype, device, cubic):
    """[(indices, weights)] of each tap, 1-D tensors of length ``n_out``."""
    t = np.dtype(str(dtype).removeprefix("torch.")).type if dtype.is_floating_point else None
    # (a tensor of the compute type: a Python float multiplies in float64 once lowered)
    s = torch.scalar_tensor(
        float(_scale(n_in, n_out, align_corners, scale, t)), dtype=dtype, device=device
    )
    i = torch.arange(n_out, device=device).to(dtype)
    if not cubic and n_in == n_out:
        idx = torch.arange(n_out, device=device)
        return [(idx, torch.ones_like(i)), (idx, torch.zeros_like(i))]
    real = i * s if align_corners else (i + 0.5) * s - 0.5
    if cubic:
        i0 = torch.floor(real).to(torch.int64)
        x1 = real - i0.to(dtype)
        a = -0.75
        near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1
        far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        x2 = 1 - x1
        ws = [far(x1 + 1), near(x1), near(x2), far(x2 + 1)]
        return [((i0 - 1 + j).clamp(0, n_in - 1), w) for j, w in enumerate(ws)]
    real = real if align_corners else real.clamp(min=0)
    i0 = torch.floor(real).to(torch.int64).clamp(max=n_in - 1)
    lam1 = (real - i0.to(dtype)).clamp(0, 1)
    i1 = i0 + (i0 < n_in - 1).to(torch.int64)
    return [(i0, 1 - lam1), (i1, lam1)]


def _traced_resize(x, output_size, align_corners, scales, cubic):
    compute = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    y = x.to(compute)
    nd = len(output_size)
    for i in reversed(range(nd)):
        axis = x.ndim - nd + i
        shape = [1] * x.ndim
        shape[axis] = output_size[i]
        taps = _torch_taps(
            x.shape[axis], output_size[i], align_corners, scales[i], compute, x.device, cubic
        )
        out = None
        for idx, w in taps:
            term = torch.index_select(y, axis, idx) * w.reshape(shape)
            out = term if out is None else out + term
        y = out
    if x.is_floating_point():
        y = y.to(x.dtype)
    else:
        y = y.round().clamp(torch.iinfo(x.dtype).min, torch.iinfo(x.dtype).max).to(x.dtype)
    # eager's memory format (torch's decompositions say the same): the input's suggested one
    # (channels_last in, channels_last out), but contiguous from a CUDA linear kernel of fewer
    # than 16 channels
    memory_format = suggest_memory_format(x)
    if not cubic and x.device.type == "cuda" and x.shape[1] < 16:
        memory_format = torch.contiguous_format
    return y.contiguous(memory_format=memory_format)


def _static(*sizes) -> bool:
    return all(isinstance(s, int) for s in sizes)


def _fixed_point(name: str, input, output_size) -> bool:
    """Whether eager resizes ``input`` with its uint8 fixed-point kernels (2-d bilinear and
    bicubic), which the lowering follows (``_resize_uint8``): the op is kept whole (on CUDA,
    whose kernels round otherwise, ``capture/_partition`` runs it in eager)."""
    return (
        input.dtype == torch.uint8
        and name in ("upsample_bilinear2d", "upsample_bicubic2d")
        and _static(*input.shape, *output_size)
    )


def _install_traced_kernels() -> None:
    from torch._decomp import decomposition_table
    from torch._decomp import decompositions as d

    def vec(name, cubic, original, default_op):
        def kernel(input, output_size, align_corners, scale_factors):
            osize = d.upsample_compute_output_size(input.size(), output_size, scale_factors)
            if _fixed_point(name, input, osize):
                scales = tuple(scale_factors) if scale_factors else (None,) * len(osize)
                return default_op(input, list(osize), align_corners, *scales)
            # (other dtypes: torch's own, which raises eager's error for complex ones)
            if not (input.is_floating_point() and _static(*input.shape, *osize)):
                return original(input, output_size, align_corners, scale_factors)
            scales = tuple(scale_factors) if scale_factors else (None,) * len(osize)
            return _traced_resize(input, list(osize), align_corners, scales, cubic)

        return kernel

    def default(name, cubic, original, op):
        def kernel(input, output_size, align_corners, *scales):
            if _fixed_point(name, input, output_size):
                # (uint8 has no gradient: the op itself, for its lowering)
                with torch._C._AutoDispatchBelowAutograd():
                    return op(input, output_size, align_corners, *scales)
            if not (input.is_floating_point() and _static(*input.shape, *output_size)):
                return original(input, output_size, align_corners, *scales)
            nd = len(output_size)
            scales = tuple(scales) + (None,) * (nd - len(scales))
            return _traced_resize(input, list(output_size), align_corners, scales, cubic)

        return kernel

    keys = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)
    for name, cubic in (
        ("upsample_linear1d", False),
        ("upsample_bilinear2d", False),
        ("upsample_trilinear3d", False),
        ("upsample_bicubic2d", True),
    ):
        packet = getattr(aten, name)
        v = packet.vec
        for key in keys:
            original = v.py_kernels.get(key, decomposition_table.get(v))
            v.py_kernels.pop(key, None)
            v.py_impl(key)(vec(name, cubic, original, packet.default))
        dv = packet.default
        original = dv.py_kernels.get(torch._C.DispatchKey.Autograd, decomposition_table[dv])
        dv.py_kernels.pop(torch._C.DispatchKey.Autograd, None)
        dv.py_impl(torch._C.DispatchKey.Autograd)(default(name, cubic, original, dv))
        for op in (v, dv):
            op._dispatch_cache.clear()


_install_traced_kernels()
