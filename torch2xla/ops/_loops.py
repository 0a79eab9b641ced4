"""Which elements eager's CPU kernels compute in their vectorized loop, for the ops whose
vectorized and scalar code disagree at NaN (``hardtanh_backward``, ``logit_backward``).

``cpu_kernel_vec`` runs its vectorized code on blocks of ``2 * Vectorized<T>::size()``
elements and its scalar code on the rest of each run of contiguous elements; a NaN input
compares false in both, which zeroes the gradient in one and passes it (or gives NaN) in the
other. Which elements are in whole blocks depends on:
- the block, per kernel and dtype (torch builds some kernels for AVX512, others for AVX2):
  found by calling the kernel on NaN (``block``), cached;
- the runs: TensorIterator walks the input in memory order, coalescing dims it can; the
  innermost run is a row (a whole dense tensor is one row); a row whose elements are not
  adjacent in memory is all scalar;
- the threads: above 32768 elements (``GRAIN_SIZE``) the walk is cut in one chunk per thread
  (``at::parallel_for``), each with its own tail.
Assumed: the gradient has the input's layout or is broadcast (other layouts make eager use
its scalar loop everywhere); the thread count of the trace. On CUDA every element takes the
scalar rule (``gpu_kernel``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax.numpy as jnp
import torch
from jax import lax

GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE


@functools.cache
def block(kernel: Callable[..., torch.Tensor], params: tuple, dtype: torch.dtype) -> int | None:
    """The block of ``kernel`` (``kernel(x, *params)`` for a NaN input ``x`` of ``dtype``
    returns its result) in elements: the smallest run whose first element takes the
    vectorized rule, or None where the two rules agree for runs up to 512."""
    with torch.utils._python_dispatch._disable_current_modes():
        scalar = kernel(torch.full((1,), float("nan"), dtype=dtype), *params)[0]
        n = 2
        while n <= 512:
            first = kernel(torch.full((n,), float("nan"), dtype=dtype), *params)[0]
            if not (first == scalar or (first.isnan() and scalar.isnan())):
                return n
            n *= 2
    return None


def walk(kernel: Callable[..., torch.Tensor], *params) -> tuple | None:
    """For the node being lowered (whose first argument is the input ``kernel``, eager's
    backward kernel on it with ``params``, reads): ``(shape, strides, block, threads)`` for
    ``vectorized``, or None where every element takes the scalar rule (CUDA; kernels whose
    rules agree)."""
    from torch2xla.ops._registry import ctx

    c = ctx()
    arg = c.node.args[0] if c.node.args else None
    value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if c.on_cuda or not isinstance(value, torch.Tensor) or value.numel() == 0:
        return None
    n_block = block(kernel, params, value.dtype)
    if n_block is None:
        return None
    return tuple(value.shape), tuple(value.stride()), n_block, torch.get_num_threads()


def fits(nan_walk: tuple | None, x) -> bool:
    """Whether ``nan_walk`` (``walk``'s) describes the array ``x`` (not, e.g., a padded one)."""
    return nan_walk is not None and tuple(x.shape) == nan_walk[0]


def vectorized(shape: tuple, strides: tuple, n_block: int, threads: int):
    """(traced) Per element of a tensor of ``shape`` and eager's ``strides``, whether eager's
    CPU kernel computes it in its vectorized loop (blocks of ``n_block``)."""
    numel = math.prod(shape)
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    if not dims:
        return jnp.zeros(shape, bool)
    # memory order: outermost first; coalesce dims that are adjacent in memory
    order = sorted(dims, key=lambda d: strides[d], reverse=True)
    row = shape[order[-1]] if strides[order[-1]] == 1 else 0
    for outer, inner in zip(order[-2::-1], order[:0:-1], strict=True):
        if row and strides[outer] == strides[inner] * shape[inner]:
            row *= shape[outer]
        else:
            break
    if row == 0:  # no adjacent elements: the scalar loop
        return jnp.zeros(shape, bool)
    # each element's position in the walk
    position = jnp.zeros(shape, jnp.int32)
    step = 1
    for d in reversed(order):
        position = position + lax.broadcasted_iota(jnp.int32, shape, d) * step
        step *= shape[d]
    chunk = numel
    if numel >= GRAIN_SIZE and threads > 1:
        tasks = min(threads, -(-numel // GRAIN_SIZE))
        chunk = -(-numel // tasks)
    n = numel - numel % n_block if row == numel and chunk == numel else None
    if n is not None:  # (one run: the common case, one compare)
        return position < n
    run_start = jnp.maximum(position // row * row, position // chunk * chunk)
    run_end = jnp.minimum(
        position // row * row + row, jnp.minimum(position // chunk * chunk + chunk, numel)
    )
    n = run_end - run_start
    return position - run_start < n - n % n_block
