"""Which elements eager's CPU kernels compute in their vectorized loop, for the ops whose
vectorized and scalar code disagree at NaN (the backward ops of hardtanh, elu, hardswish,
hardshrink, softshrink and logit: ``_activation_backward``).

``cpu_kernel_vec`` runs its vectorized code on blocks of ``2 * Vectorized<T>::size()``
elements and its scalar code on the rest of each run of contiguous elements; a NaN input
compares false in both, which zeroes the gradient in one and passes it (or gives NaN) in the
other. Which elements are in whole blocks depends on:
- the block, per kernel and dtype (torch builds some kernels for AVX512, others for AVX2):
  found by calling the kernel on NaN (``block``), cached;
- the runs: TensorIterator walks its operands in one order of their dims (``_order``: by
  the first operand whose strides tell two dims apart), coalescing dims it can in all of
  them; the innermost run is a row (a whole dense tensor is one row); a row that is not
  contiguous in every input (but one, read as a broadcast scalar) is all scalar: a
  gradient laid out otherwise than the input makes every element scalar;
- the threads: above 32768 elements (``GRAIN_SIZE``) the walk is cut in one chunk per thread
  (``at::parallel_for``), each with its own tail.
Backward ops' lowerings know both operands (``walk``'s ``operands``); the derivatives of
forward lowerings assume the gradient has the input's layout. Assumed: the thread count of
the trace. On CUDA every element takes the scalar rule (``gpu_kernel``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable

import jax.numpy as jnp
import torch
from jax import lax

GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE


@functools.cache
def block(
    kernel: Callable[..., torch.Tensor],
    params: tuple,
    dtype: torch.dtype,
    probes: tuple[float, ...] = (float("nan"), -0.0),
) -> int | None:
    """The block of ``kernel`` (``kernel(x, *params)`` for an input ``x`` of ``dtype``
    returns its result) in elements: the smallest run whose first element takes the
    vectorized rule, or None where the two rules agree for runs up to 512, on the ``probes``
    (by default NaN and -0: logit_backward's scalar rule is +inf at -0, its vectorized one
    -inf)."""

    def same(a, b):
        return bool(a == b and torch.signbit(a) == torch.signbit(b)) or bool(
            a.isnan() and b.isnan()
        )

    if not (dtype.is_floating_point or dtype.is_complex):
        return None  # (no NaN, no -0: the two rules agree)
    with torch.utils._python_dispatch._disable_current_modes():
        for probe in probes:
            scalar = kernel(torch.full((1,), probe, dtype=dtype, device="cpu"), *params)[0]
            n = 2
            while n <= 512:
                first = kernel(torch.full((n,), probe, dtype=dtype, device="cpu"), *params)[0]
                if not same(first, scalar):
                    return n
                n *= 2
    return None


def backward_kernel(op) -> Callable[..., torch.Tensor]:
    """Eager's backward op ``op(grad, self, *params)`` as a ``kernel(x, *params)`` of
    ``block`` (a gradient of ones)."""

    def kernel(x, *params):
        return op(torch.ones_like(x), x, *params)

    kernel.__name__ = f"{op}_kernel"
    return kernel


def walk(
    kernel: Callable[..., torch.Tensor],
    *params,
    arg: int = 0,
    operands: tuple[int, ...] = (),
    probes: tuple[float, ...] = (float("nan"), -0.0),
    dtype: torch.dtype | None = None,
) -> tuple | None:
    """For the node being lowered (whose argument ``arg`` is the input ``kernel``, eager's
    backward kernel on it with ``params``, reads: the input of a forward op, the ``self`` of
    a backward op; ``operands``: the positions of the kernel's tensor inputs in its order,
    default ``(arg,)``): ``(shape, strides, block, threads)`` for ``vectorized`` (``strides``
    one tuple per operand, broadcast dims 0), or None where every element takes the scalar
    rule (CUDA; kernels whose rules agree on ``probes``, see ``block``). ``dtype``: the
    loop's, where it is not the input's (an integer input computed in float)."""
    from torch2xla.ops._registry import ctx

    c = ctx()
    values = []
    for i in operands or (arg,):
        node = c.node.args[i] if len(c.node.args) > i else None
        values.append(node.meta.get("val") if isinstance(node, torch.fx.Node) else None)
    node = c.node.args[arg] if len(c.node.args) > arg else None
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if c.on_cuda or not isinstance(value, torch.Tensor) or value.numel() == 0:
        return None
    n_block = block(kernel, params, dtype or value.dtype, probes)
    if n_block is None:
        return None
    shape = tuple(torch.broadcast_shapes(*(t.shape for t in tensors)))
    return (
        shape,
        tuple(_broadcast_strides(t, shape) for t in tensors),
        n_block,
        torch.get_num_threads(),
    )


def _broadcast_strides(t: torch.Tensor, shape: tuple) -> tuple:
    """``t``'s strides as TensorIterator reads it broadcast to ``shape`` (0 where expanded)."""
    lead = len(shape) - t.ndim
    return tuple(
        0 if d < lead or (t.shape[d - lead] == 1 and shape[d] != 1) else t.stride(d - lead)
        for d in range(len(shape))
    )


def fits(nan_walk: tuple | None, x) -> bool:
    """Whether ``nan_walk`` (``walk``'s) describes the array ``x`` (not, e.g., a padded one)."""
    return nan_walk is not None and tuple(x.shape) == nan_walk[0]


def _order(shape: tuple, strides: tuple) -> list[int]:
    """TensorIterator's order of the dims (innermost first): by the first operand whose
    strides tell two dims apart (broadcast dims tell nothing), equal strides by size."""

    def should_swap(d0: int, d1: int) -> int:
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(shape)):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            c = should_swap(perm[dim0], perm[dim1])
            if c > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif c < 0:
                break
    return perm


def _inner_run(shape: tuple, strides: tuple, perm: list[int]) -> tuple[int, bool]:
    """The length of TensorIterator's inner loop (its innermost dims coalesced) and whether
    its vectorized loop runs it: every input contiguous there, or all but one, read as a
    broadcast scalar."""
    dims = [d for d in perm if shape[d] != 1]
    if not dims:
        return 1, False
    inner = dims[0]
    run = shape[inner]
    for prev, outer in itertools.pairwise(dims):
        if all(st[outer] == st[prev] * shape[prev] for st in strides):
            run *= shape[outer]
        else:
            break
    inner_strides = [st[inner] for st in strides]
    contiguous = all(s == 1 for s in inner_strides)
    one_scalar = inner_strides.count(0) == 1 and inner_strides.count(1) == len(strides) - 1
    return run, contiguous or one_scalar


def vectorized(shape: tuple, strides: tuple, n_block: int, threads: int):
    """(traced) Per element of a result of ``shape`` (its operands' ``strides``, one tuple
    each), whether eager's CPU kernel computes it in its vectorized loop (blocks of
    ``n_block``)."""
    numel = math.prod(shape)
    perm = _order(shape, strides)
    row, vec = _inner_run(shape, strides, perm)
    if not vec:  # the scalar loop everywhere
        return jnp.zeros(shape, bool)
    # each element's position in the walk (the dims in TensorIterator's order)
    position = jnp.zeros(shape, jnp.int32)
    step = 1
    for d in perm:
        if shape[d] != 1:
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


def mask(nan_walk: tuple | None, *arrays):
    """(traced) ``vectorized`` for the result of the operands ``arrays`` (broadcast) that
    ``nan_walk`` describes; None where it describes none (every element then takes the
    scalar rule)."""
    shape = jnp.broadcast_shapes(*(tuple(a.shape) for a in arrays))
    if nan_walk is None or tuple(shape) != nan_walk[0]:
        return None
    return vectorized(*nan_walk)


def at_nan(x, scalar, vector, vec):
    """``scalar`` (eager's scalar rule, computed everywhere), with ``vector`` (its vectorized
    rule) where ``x`` is NaN in a vectorized block (where ``vec``, ``mask``'s; None: none)."""
    if vec is None:
        return scalar
    return jnp.where(jnp.isnan(x) & vec, vector, scalar)
