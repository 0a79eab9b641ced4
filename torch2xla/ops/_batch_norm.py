"""Batch normalization with batch statistics, with the closed-form gradient torch's kernels use.

JAX differentiates the mean, the variance and the normalization separately: five reductions
over the activation per batch norm, and layout copies around them on XLA's CPU backend. The
closed form needs two (the sums of ``dy`` and of ``dy * x_hat``) and one elementwise pass.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax


def _stats(x, axes):
    mean = jnp.mean(x, axis=axes)
    centered = x - jnp.expand_dims(mean, axes)
    var = jnp.mean(jnp.square(centered), axis=axes)
    return mean, var


def _channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def batch_norm_train(x, weight, bias, eps):
    """``(out, mean, biased var)`` of ``x`` (N, C, ...) normalized over all dims but 1, then
    scaled by ``weight`` and shifted by ``bias`` (arrays of C elements, in ``x``'s dtype)."""
    out, mean, var, _ = _forward(x, weight, bias, eps)
    return out, mean, var


def _forward(x, weight, bias, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    mean, var = _stats(x, axes)
    invstd = lax.rsqrt(var + eps)
    x_hat = (x - _channel(mean, x.ndim)) * _channel(invstd, x.ndim)
    out = x_hat * _channel(weight, x.ndim) + _channel(bias, x.ndim)
    return out, mean, var, invstd


def _fwd(x, weight, bias, eps):
    out, mean, var, invstd = _forward(x, weight, bias, eps)
    return (out, mean, var), (x, weight, mean, invstd)


def _bwd(eps, residuals, cts):
    x, weight, mean, invstd = residuals
    d_out, d_mean, d_var = cts
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    centered = x - _channel(mean, x.ndim)
    x_hat = centered * _channel(invstd, x.ndim)
    d_bias = jnp.sum(d_out, axis=axes)
    d_weight = jnp.sum(d_out * x_hat, axis=axes)
    scale = weight * invstd / n
    d_x = _channel(scale, x.ndim) * (
        n * d_out - _channel(d_bias, x.ndim) - x_hat * _channel(d_weight, x.ndim)
    )
    # The statistics are outputs too (torch returns them): their cotangents, usually zero.
    d_x = d_x + _channel(d_mean / n, x.ndim) + _channel(2 * d_var / n, x.ndim) * centered
    return d_x, d_weight, d_bias


batch_norm_train.defvjp(_fwd, _bwd)
