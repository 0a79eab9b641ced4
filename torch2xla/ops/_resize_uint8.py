"""uint8 bilinear and bicubic resizing (anti-aliased or not) as eager's CPU kernels compute it
(``UpSampleKernel.cpp``: ``_compute_index_ranges_int16_weights`` and the separable uint8
loops, PIL's method): one pass per resized axis, the last axis first, each output a sum of
int16 fixed-point weights times the uint8 taps in int32, rounded by the shift
``(sum + 2**(p-1)) >> p`` and clamped to [0, 255] between passes. An axis whose size does not
change is not passed over.

Each axis's taps and int16 weights are computed on the host, in float64, as eager does."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np


def _scale(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> float:
    # area_pixel_compute_scale<double>
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return n_in / n_out


def _triangle(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _cubic(a: float):
    def kernel(x: float) -> float:
        x = abs(x)
        if x < 1.0:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        if x < 2.0:
            return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return 0.0

    return kernel


def _trunc(v: float) -> int:
    """C's ``static_cast<int64_t>`` of a double (toward zero)."""
    return int(v)


def _aa_weights(n_in, n_out, scale, width, kernel):
    """``_compute_indices_min_size_weights_aa`` for every output: (starts, sizes, weights)."""
    support = width * 0.5 * scale if scale >= 1.0 else width * 0.5
    size = math.ceil(support) * 2 + 1
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    starts, sizes = np.zeros(n_out, np.int64), np.zeros(n_out, np.int64)
    weights = np.zeros((n_out, size))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(_trunc(center - support + 0.5), 0)
        n = min(max(min(_trunc(center + support + 0.5), n_in) - lo, 0), size)
        w = [kernel((j + lo - center + 0.5) * inv) for j in range(n)]
        total = sum(w)  # (eager's order of additions)
        if total != 0.0:
            w = [v / total for v in w]
        starts[i], sizes[i] = lo, n
        weights[i, :n] = w
    return starts, sizes, weights


def _plain_weights(n_in, n_out, scale, align_corners, width, kernel):
    """``_compute_indices_min_size_weights`` (no anti-aliasing) for every output: the taps
    of the index eager's float kernels read, weights of taps outside the input added to the
    nearest tap inside."""
    cubic = width > 2
    support = width // 2
    starts, sizes = np.zeros(n_out, np.int64), np.zeros(n_out, np.int64)
    weights = np.zeros((n_out, width))
    for i in range(n_out):
        if align_corners:
            real = scale * i
        else:
            real = scale * (i + 0.5) - 0.5
            if not cubic and real < 0:
                real = 0.0
        # guard_index_and_lambda: floorf (the index read as a float32)
        index = min(math.floor(float(np.float32(real))), n_in - 1)
        lam = min(max(real - index, 0.0), 1.0)
        lo_unbound = index - support + 1
        lo = max(lo_unbound, 0)
        n = min(max(min(index + support + 1, n_in) - lo, 0), width)
        w = [0.0] * (width + 1)
        k = 0
        for j in range(width):
            v = kernel(float(j + 1 - support) - lam)
            if lo_unbound + j <= 0:
                k = 0
            elif lo_unbound + j >= n_in - 1:
                k = n - 1
            w[k] += v
            k += 1
        starts[i], sizes[i] = lo, n
        weights[i] = w[:width]
    return starts, sizes, weights


def _int16(weights: np.ndarray) -> tuple[np.ndarray, int]:
    """Eager's fixed-point weights and their precision (bits)."""
    w_max = float(weights.max()) if weights.size else 0.0
    precision = 0
    while precision < 22:
        if int(0.5 + w_max * (1 << (precision + 1))) >= (1 << 15):
            break
        precision += 1
    v = weights * (1 << precision)
    fixed = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int16)
    return fixed, precision


def axis_plan(n_in, n_out, align_corners, scale, mode: str, antialias: bool):
    """(indices (n_out, k), int32 weights (n_out, k), precision) of one axis."""
    s = _scale(n_in, n_out, align_corners, scale)
    width = 2 if mode == "bilinear" else 4
    if mode == "bilinear":
        kernel = _triangle
    else:  # Keys' cubic: a = -0.5 anti-aliased (PIL), -0.75 otherwise (OpenCV)
        kernel = _cubic(-0.5 if antialias else -0.75)
    if antialias:
        starts, sizes, weights = _aa_weights(n_in, n_out, s, width, kernel)
    else:
        starts, sizes, weights = _plain_weights(n_in, n_out, s, align_corners, width, kernel)
    fixed, precision = _int16(weights)
    k = weights.shape[1]
    taps = np.arange(k)[None, :]
    used = taps < sizes[:, None]
    index = np.where(used, np.minimum(starts[:, None] + taps, n_in - 1), 0)
    return index, np.where(used, fixed, 0).astype(np.int32), precision


def resize_uint8(x, output_size, align_corners, scales, mode: str, antialias: bool):
    """``x`` (uint8) resized over its last ``len(output_size)`` axes as eager's kernels do."""
    nd = len(output_size)
    y = x
    for i in reversed(range(nd)):  # the last (contiguous) axis first
        axis = x.ndim - nd + i
        n_in, n_out = x.shape[axis], output_size[i]
        if n_in == n_out:
            continue
        index, weights, precision = axis_plan(
            n_in, n_out, align_corners, scales[i], mode, antialias
        )
        shape = [1] * y.ndim
        shape[axis] = n_out
        acc = jnp.full((), 1 << (precision - 1), jnp.int32)
        wide = y.astype(jnp.int32)
        for j in range(index.shape[1]):
            if not weights[:, j].any():
                continue
            tap = jnp.take(wide, jnp.asarray(index[:, j]), axis=axis)
            acc = acc + tap * jnp.asarray(weights[:, j].reshape(shape))
        acc = jnp.broadcast_to(acc, y.shape[:axis] + (n_out,) + y.shape[axis + 1 :])
        y = jnp.clip(acc >> precision, 0, 255).astype(jnp.uint8)
    return y
