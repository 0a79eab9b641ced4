"""Pairwise distances (``torch.cdist``, ``F.pdist``) as eager's CPU kernels compute them
(``DistanceOpsKernel``), with eager's derivative in every path: the forwards' derivative
(``jax.custom_vjp``: the bridge's backward) and the backward ops AOT puts into graphs that take
a derivative inside (``_cdist_backward``, ``_pdist_backward``) are one formula.

Eager's rules that JAX's derivative of a norm does not have: every coordinate that ties for
the maximum takes the whole gradient (p = inf), a pair at distance 0 passes none, a NaN
coordinate makes its row's gradient NaN (the kernels' sign is NaN at NaN), and cdist's
infinity norm skips NaN (``std::max(agg, NaN)`` keeps ``agg``) where pdist's keeps it.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla.ops._common import as_dtype, out_dtype
from torch2xla.ops._registry import register

aten = ops.aten


def _norms(diff, p: float, skip_nan: bool):
    """The p-norm of each ``diff`` over its last axis, as eager's kernels reduce it."""
    d = jnp.abs(diff)
    if p == 0:
        return jnp.sum(jnp.minimum(jnp.ceil(d), 1), axis=-1)
    if p == 1:
        return jnp.sum(d, axis=-1)
    if p == 2:
        return jnp.sqrt(jnp.sum(d * d, axis=-1))
    if math.isinf(p):
        # (the maximum starts at 0: an empty row is at distance 0)
        return jnp.max(jnp.where(jnp.isnan(d), 0, d) if skip_nan else d, axis=-1, initial=0)
    return jnp.sum(d**p, axis=-1) ** (1 / p)


def _sign(x):
    """The kernels' sign: -1, 0 or 1, NaN at NaN (their vectorized min/max)."""
    return jnp.where(jnp.isnan(x), x, jnp.sign(x))


def _terms(diff, grad, dist, p: float):
    """Each pair's term of eager's backward: ``diff`` the pair's x_i - x_j (..., m), ``grad``
    and ``dist`` the pair's (..., 1), multiplied in eager's order. A pair at distance 0 passes
    0 (a NaN distance does not compare)."""
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.zeros_like(diff * grad)
    if p == 1:
        return grad * _sign(diff)
    if math.isinf(p):
        # ``1 - min(1, ceil(||diff| - dist|))``: 1 on every coordinate at the maximum
        hit = 1 - jnp.minimum(1, jnp.ceil(jnp.abs(jnp.abs(diff) - dist)))
        return grad * _sign(diff) * hit
    if p == 2:
        return jnp.where(dist == 0, zero, grad * diff / dist)
    if p < 2:
        out = _sign(diff) * jnp.abs(diff) ** (p - 1) * grad / dist ** (p - 1)
        out = jnp.where(dist == 0, zero, out)
        return jnp.where((diff == 0) & (p < 1), zero, out)
    out = diff * jnp.abs(diff) ** (p - 2) * grad / dist ** (p - 1)
    return jnp.where(dist == 0, zero, out)


def _pairs(a, b):
    return a[..., :, None, :] - b[..., None, :, :]


def _cdist_grad(grad, a, b, dist, p: float):
    """``a``'s gradient (``b``'s: the same with the two swapped and ``grad``/``dist``
    transposed): the terms of every row of ``b`` summed."""
    return jnp.sum(_terms(_pairs(a, b), grad[..., None], dist[..., None], p), axis=-2)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _cdist(a, b, p: float):
    return _norms(_pairs(a, b), p, skip_nan=True)


def _cdist_fwd(a, b, p):
    dist = _cdist(a, b, p)
    return dist, (a, b, dist)


def _cdist_bwd(p, res, grad):
    a, b, dist = res
    t = functools.partial(jnp.swapaxes, axis1=-1, axis2=-2)
    return _cdist_grad(grad, a, b, dist, p), _cdist_grad(t(grad), b, a, t(dist), p)


_cdist.defvjp(_cdist_fwd, _cdist_bwd)


def _broadcast(x1, x2, batch):
    return tuple(jnp.broadcast_to(x, batch + x.shape[-2:]) for x in (x1, x2))


@register(aten._cdist_forward.default)
def _cdist_forward(x1, x2, p, compute_mode=None):
    # NOTE: torch may use a matmul-based formula for p=2 (compute_mode); the direct difference
    # formula here is at least as accurate.
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return as_dtype(_cdist(*_broadcast(x1, x2, batch), float(p)), out_dtype())


@register(aten._cdist_backward.default)
def _cdist_backward(grad, x1, x2, p, cdist):
    # x1's gradient, of the batch dimensions the forward broadcast to (x2's is this op with
    # x1 and x2 swapped)
    a, b = _broadcast(x1, x2, tuple(cdist.shape[:-2]))
    return as_dtype(_cdist_grad(grad, a, b, cdist, float(p)), out_dtype())


def _pdist_pairs(n: int):
    """Pair k = (rows[k], cols[k]), rows[k] < cols[k], in eager's (row-major) order."""
    return np.triu_indices(n, k=1)


def _pdist_grad(grad, x, dist, p: float):
    """Each pair's term added to its first row and subtracted from its second."""
    rows, cols = _pdist_pairs(x.shape[0])
    terms = _terms(x[rows] - x[cols], grad[:, None], dist[:, None], p)
    return jnp.zeros(x.shape, x.dtype).at[rows].add(terms).at[cols].add(-terms)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _pdist(x, p: float):
    rows, cols = _pdist_pairs(x.shape[0])
    return _norms(x[rows] - x[cols], p, skip_nan=False)


def _pdist_fwd(x, p):
    dist = _pdist(x, p)
    return dist, (x, dist)


def _pdist_bwd(p, res, grad):
    x, dist = res
    return (_pdist_grad(grad, x, dist, p),)


_pdist.defvjp(_pdist_fwd, _pdist_bwd)


@register(aten._pdist_forward.default)
def _pdist_forward(self, p=2.0):
    return as_dtype(_pdist(self, float(p)), out_dtype())


@register(aten._pdist_backward.default)
def _pdist_backward(grad, self, p, pdist):
    return as_dtype(_pdist_grad(grad, self, pdist, float(p)), out_dtype())
