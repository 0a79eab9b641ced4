"""torchvision's ops (``torch.ops.torchvision``): RoI Align.

torch2xla never imports torchvision: ``register_lowerings`` runs the first time the registry is
asked about an op of the ``torchvision`` namespace, which only a graph of a process that has
loaded torchvision holds (``_registry.defer``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch
from jax import lax

from torch2xla.ops._common import as_dtype, opmath_dtype
from torch2xla.ops._registry import register


def register_lowerings() -> None:
    ops = torch.ops.torchvision
    if hasattr(ops, "roi_align"):
        register(ops.roi_align.default)(roi_align)


# -- RoI Align ---------------------------------------------------------------------------------
# Each RoI's bin averages the bilinear samples of a grid_h x grid_w grid (torchvision's
# roi_align_kernel). With sampling_ratio <= 0 the grid of each RoI is ceil(roi size / bins), a
# count that depends on the boxes: the samples are then visited in a loop up to the largest
# grid, each masked for the RoIs whose grid is smaller, in the forward and in the backward.
def _geometry(rois, spatial_scale, pooled, sampling_ratio, aligned):
    """Per RoI: batch index, (y1, x1), bin sizes, grid sizes (int32) and 1 / sample count."""
    offset = 0.5 if aligned else 0.0
    batch = rois[:, 0].astype(jnp.int32)
    start = rois[:, 1:3][:, ::-1] * spatial_scale - offset  # (y1, x1)
    end = rois[:, 3:5][:, ::-1] * spatial_scale - offset
    size = end - start
    if not aligned:  # torchvision forces malformed RoIs to 1x1
        size = jnp.maximum(size, 1.0)
    bins = size / jnp.asarray(pooled, size.dtype)
    if sampling_ratio > 0:
        grid = jnp.full(size.shape, sampling_ratio, jnp.int32)
    else:
        grid = jnp.ceil(bins).astype(jnp.int32)
    inv_count = 1.0 / jnp.maximum(grid[:, 0] * grid[:, 1], 1).astype(size.dtype)
    return batch, start, bins, grid, inv_count


def _corners(n, pooled, start, bins, grid, i):
    """Bilinear corners along one axis for sample ``i`` of every bin: (low, high) indices,
    (low, high) weights, validity; each (K, pooled)."""
    p = jnp.arange(pooled, dtype=start.dtype)
    coord = start[:, None] + p * bins[:, None] + (i + 0.5) * bins[:, None] / grid[:, None]
    valid = (coord >= -1.0) & (coord <= n)
    coord = jnp.maximum(coord, 0.0)
    low = jnp.minimum(jnp.floor(coord).astype(jnp.int32), n - 1)
    high = jnp.minimum(low + 1, n - 1)
    coord = jnp.where(low >= n - 1, low.astype(coord.dtype), coord)
    frac = coord - low
    return (low, high), (1.0 - frac, frac), valid


def _samples(shape, geometry, pooled, t, grid_w_max):
    """The four (indices, weight) pairs of sample ``t`` of every bin, weights already divided
    by the sample count and zero where the sample is out of the image or of the RoI's grid."""
    _, _, h, w = shape
    batch, start, bins, grid, inv_count = geometry
    iy, ix = t // grid_w_max, t % grid_w_max
    (y_idx, y_w, y_ok) = _corners(h, pooled[0], start[:, 0], bins[:, 0], grid[:, 0], iy)
    (x_idx, x_w, x_ok) = _corners(w, pooled[1], start[:, 1], bins[:, 1], grid[:, 1], ix)
    inside = (iy < grid[:, 0]) & (ix < grid[:, 1])
    scale = jnp.where(inside, inv_count, 0.0)[:, None, None]
    ok = y_ok[:, :, None] & x_ok[:, None, :]
    out = []
    for yi, yw in zip(y_idx, y_w):
        for xi, xw in zip(x_idx, x_w):
            weight = jnp.where(ok, yw[:, :, None] * xw[:, None, :], 0.0) * scale
            index = (batch[:, None, None], slice(None), yi[:, :, None], xi[:, None, :])
            out.append((index, weight))  # input[index]: (K, ph, pw, C)
    return out


def _loop_bounds(geometry, sampling_ratio):
    grid = geometry[3]
    if sampling_ratio > 0:
        return sampling_ratio * sampling_ratio, sampling_ratio
    if grid.shape[0] == 0:
        return 0, 1
    grid_w_max = jnp.max(grid[:, 1])
    return jnp.max(grid[:, 0]) * grid_w_max, grid_w_max


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5))
def _roi_align(x, rois, spatial_scale, pooled, sampling_ratio, aligned):
    geometry = _geometry(rois, spatial_scale, pooled, sampling_ratio, aligned)
    n_samples, grid_w_max = _loop_bounds(geometry, sampling_ratio)

    def step(t, acc):
        for index, weight in _samples(x.shape, geometry, pooled, t, grid_w_max):
            acc = acc + x[index] * weight[..., None]
        return acc

    acc = jnp.zeros((rois.shape[0], *pooled, x.shape[1]), x.dtype)
    return jnp.moveaxis(lax.fori_loop(0, n_samples, step, acc), -1, 1)  # (K, C, ph, pw)


def _roi_align_fwd(x, rois, spatial_scale, pooled, sampling_ratio, aligned):
    return _roi_align(x, rois, spatial_scale, pooled, sampling_ratio, aligned), (x.shape, rois)


def _roi_align_bwd(spatial_scale, pooled, sampling_ratio, aligned, residuals, g):
    # NOTE: torchvision's backward: each sample's weighted gradient added into the input at
    # its four corners; the boxes get none (torchvision's autograd returns none for them).
    shape, rois = residuals
    geometry = _geometry(rois, spatial_scale, pooled, sampling_ratio, aligned)
    n_samples, grid_w_max = _loop_bounds(geometry, sampling_ratio)
    g = jnp.moveaxis(g, 1, -1)  # (K, ph, pw, C)

    def step(t, grad):
        for index, weight in _samples(shape, geometry, pooled, t, grid_w_max):
            grad = grad.at[index].add(g * weight[..., None])
        return grad

    grad = lax.fori_loop(0, n_samples, step, jnp.zeros(shape, g.dtype))
    return grad, jnp.zeros_like(rois)


_roi_align.defvjp(_roi_align_fwd, _roi_align_bwd)


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    # Half precision accumulates in float32, as torchvision's kernels (acc_type) do.
    acc = opmath_dtype(input.dtype)
    out = _roi_align(
        as_dtype(input, acc),
        as_dtype(rois, acc),
        float(spatial_scale),
        (int(pooled_height), int(pooled_width)),
        int(sampling_ratio),
        bool(aligned),
    )
    return as_dtype(out, input.dtype)
