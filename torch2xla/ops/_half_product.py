"""Eager's CPU product of float16/bfloat16 tensors, rounded as its kernel rounds.

``prod_kernel_impl`` (``binary_kernel_reduce_vec``) multiplies in the tensor's own dtype, every
product rounded (two halves' product is exact in float32: one rounding each), in this order:

- along the innermost dimension of a row-major tensor (or a whole tensor: TensorIterator
  coalesces it into one row; trailing dimensions of size 1 do not count): blocks of
  ``4 * W`` elements (``W`` the lanes of one ``Vectorized<T>``: 16 on AVX2, 32 on AVX512),
  four accumulators of ``W`` lanes multiplied block by block, combined as
  ``(a0 * a1) * (a2 * a3)``, then their lanes one by one into the result; the last
  ``n % (4 * W)`` elements one by one after them;
- along any other dimension: each output element by itself, its elements one by one;
- a whole-tensor product of ``GRAIN_SIZE`` elements or more with several threads
  (``two_pass_reduction``): one contiguous chunk per thread, each as above, then the chunks'
  products one by one. The thread count is the trace's (part of the build's key).

Eager's error grows with every rounding (64 float16 numbers in [0.5, 1.5): 24 ulps from the
exact product; bfloat16's 4097 numbers: 1.6%), which a float32 accumulation does not reproduce.
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from torch2xla.ops._common import VECTOR_BYTES, rounded_to
from torch2xla.ops._loops import GRAIN_SIZE

__all__ = ["half_product"]


def half_product(x, axis=None, keepdims=False):
    """The product of the float16/bfloat16 array ``x`` over ``axis`` (None: every dim, or a
    tuple of one dim) as eager's CPU kernel computes it, in ``x``'s dtype."""
    dtype = x.dtype
    shape = x.shape
    if axis is None or all(d == 1 for d in shape[axis[0] + 1 :]):
        rows = x.reshape(1, -1) if axis is None else jnp.moveaxis(x, axis[0], -1)
        rows = rows.reshape(-1, rows.shape[-1]).astype(jnp.float32)
        if axis is None:
            out = _whole(rows[0], dtype)[None]
        else:
            out = _inner(rows, dtype)
    else:
        out = _sequential(jnp.moveaxis(x, axis[0], 0).astype(jnp.float32), dtype)
    out = out.astype(dtype)
    if axis is None:
        return out.reshape((1,) * len(shape) if keepdims else ())
    if keepdims:
        return out.reshape([1 if d == axis[0] else s for d, s in enumerate(shape)])
    return out.reshape([s for d, s in enumerate(shape) if d != axis[0]])


def _times(a, b, dtype):
    return rounded_to(a * b, dtype).astype(jnp.float32)


def _sequential(x, dtype):
    """The products of ``x`` (float32) along its first dim, one element after the other."""
    if x.shape[0] == 1:
        return x[0]
    out, _ = lax.scan(lambda acc, v: (_times(acc, v, dtype), None), x[0], x[1:])
    return out


def _inner(rows, dtype):
    """Each row's product (``rows``: float32, one row per output), eager's vectorized order."""
    lanes = _lanes(np.dtype(dtype).name)
    block = 4 * lanes
    n = rows.shape[-1]
    count = n // block
    out = jnp.ones(rows.shape[:-1], jnp.float32)
    if count:
        blocks = rows[:, : count * block].reshape(rows.shape[0], count, 4, lanes)
        acc = _sequential(jnp.moveaxis(blocks, 1, 0), dtype)  # (rows, 4, lanes)
        pair = _times(
            _times(acc[:, 0], acc[:, 1], dtype), _times(acc[:, 2], acc[:, 3], dtype), dtype
        )
        lane = pair[:, 0]
        for j in range(1, lanes):
            lane = _times(lane, pair[:, j], dtype)
        out = lane
    for i in range(count * block, n):
        out = _times(out, rows[:, i], dtype)
    return out


@functools.cache
def _lanes(dtype_name: str) -> int:
    """The lanes ``W`` of eager's product kernel for ``dtype_name`` (float16, bfloat16): the
    count whose order reproduces eager's product of a probe vector. The CPU's capability
    does not tell: torch builds some kernels for AVX512 and others only for AVX2 (an AVX512
    host gave other products than 32 lanes' order). The vector size's own count where none
    matches."""
    dtype = getattr(torch, dtype_name)
    guess = VECTOR_BYTES // dtype.itemsize
    with torch.utils._python_dispatch._disable_current_modes():
        probe = torch.linspace(0.9, 1.1, 4 * 64 * 2 + 5, dtype=torch.float32, device="cpu")
        probe = probe.to(dtype)
        probe = probe[
            torch.randperm(probe.numel(), generator=torch.Generator().manual_seed(0), device="cpu")
        ]
        want = probe.prod().float().item()
        for lanes in (guess, 16, 32, 8, 64):
            if _torch_inner(probe.float(), dtype, lanes) == want:
                return lanes
    return guess


def _torch_inner(v: torch.Tensor, dtype: torch.dtype, lanes: int) -> float:
    """``_inner``'s order for one row with ``lanes`` lanes, in torch (float32 ``v``)."""

    def times(a, b):
        return (a * b).to(dtype).float()

    block = 4 * lanes
    count = v.numel() // block
    out = torch.ones((), dtype=torch.float32, device="cpu")
    if count:
        blocks = v[: count * block].reshape(count, 4, lanes)
        acc = blocks[0]
        for k in range(1, count):
            acc = times(acc, blocks[k])
        pair = times(times(acc[0], acc[1]), times(acc[2], acc[3]))
        out = pair[0]
        for j in range(1, lanes):
            out = times(out, pair[j])
    for i in range(count * block, v.numel()):
        out = times(out, v[i])
    return out.item()


def _whole(v, dtype):
    """The product of the flat float32 array ``v``: by chunks of threads where eager splits."""
    n, threads = v.shape[0], torch.get_num_threads()
    if n < GRAIN_SIZE or threads == 1:
        return _inner(v[None], dtype)[0]
    tasks = min(threads, math.ceil(n / GRAIN_SIZE))
    chunk = math.ceil(n / tasks)
    out = jnp.ones((), jnp.float32)
    for start in range(0, n, chunk):
        out = _times(out, _inner(v[None, start : start + chunk], dtype)[0], dtype)
    return out
