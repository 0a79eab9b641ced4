"""Batch normalization with batch statistics, with the closed-form gradient torch's kernels use.

JAX differentiates the mean, the variance and the normalization separately: five reductions
over the activation per batch norm, and layout copies around them on XLA's CPU backend. The
closed form needs two (the sums of ``dy`` and of ``dy * x_hat``) and one elementwise pass.

``batch_norm_train_channels_last`` is the same computed on channels-last data, for a batch
norm that reads a convolution's output on CPU (see its docstring).
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


def _reduced(ndim: int, axis: int) -> tuple[int, ...]:
    """Every dim but the channel dim ``axis``."""
    return tuple(d for d in range(ndim) if d != axis)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def batch_norm_train(x, weight, bias, eps):
    """``(out, mean, biased var)`` of ``x`` (N, C, ...) normalized over all dims but 1, then
    scaled by ``weight`` and shifted by ``bias`` (arrays of C elements). Computed in
    ``weight``'s dtype (float32 for a half-precision ``x``), as are the results; the backward
    keeps ``x`` in its own dtype, as eager does (a bfloat16 activation is kept at half the
    bytes of its float32 copy)."""
    out, mean, var, _ = _forward(x, weight, bias, eps, 1)
    return out, mean, var


def _forward(x, weight, bias, eps, axis):
    axes = _reduced(x.ndim, axis)
    x = x.astype(weight.dtype)
    mean, var = _stats(x, axes)
    invstd = lax.rsqrt(var + eps)
    x_hat = (x - jnp.expand_dims(mean, axes)) * jnp.expand_dims(invstd, axes)
    # (behind a barrier: eager adds its bias, zeros where none is given, and -0.0 + 0.0 is
    # +0.0; XLA folds an add of constant zeros away)
    bias = lax.optimization_barrier(bias)
    out = x_hat * jnp.expand_dims(weight, axes) + jnp.expand_dims(bias, axes)
    return out, mean, var, invstd


def _fwd(x, weight, bias, eps):
    out, mean, var, invstd = _forward(x, weight, bias, eps, 1)
    return (out, mean, var), (x, weight, mean, invstd)


def _bwd(eps, residuals, cts):
    x, weight, mean, invstd = residuals
    centered = x.astype(weight.dtype) - jnp.expand_dims(mean, _reduced(x.ndim, 1))
    d_x, d_weight, d_bias = _grads(centered, weight, invstd, cts, 1)
    return d_x.astype(x.dtype), d_weight, d_bias


def _grads(centered, weight, invstd, cts, axis):
    """Gradients of x, weight and bias from ``centered`` (``x - mean``)."""
    d_out, d_mean, d_var = cts
    axes = _reduced(centered.ndim, axis)
    n = centered.size // centered.shape[axis]

    def channel(v):
        return jnp.expand_dims(v, axes)

    x_hat = centered * channel(invstd)
    d_bias = jnp.sum(d_out, axis=axes)
    d_weight = jnp.sum(d_out * x_hat, axis=axes)
    scale = weight * invstd / n
    d_x = channel(scale) * (n * d_out - channel(d_bias) - x_hat * channel(d_weight))
    # The statistics are outputs too (torch returns them): their cotangents, usually zero.
    d_x = d_x + channel(d_mean / n) + channel(2 * d_var / n) * centered
    return d_x, d_weight, d_bias


batch_norm_train.defvjp(_fwd, _bwd)


def _perms(ndim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(N, C, ...) -> (N, ..., C) and back."""
    return (0, *range(2, ndim), 1), (0, ndim - 1, *range(1, ndim - 1))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def batch_norm_train_channels_last(x, weight, bias, eps):
    """``batch_norm_train`` of ``x`` (N, C, ...), computed on ``x`` moved to channels-last.

    XLA's CPU compiler runs convolutions channels-last (explicit transposes around NCHW ones);
    computed channels-last, the batch norm's transposes cancel against the convolution's, in
    the forward and in the backward. The backward keeps ``x - mean`` (channels-last) rather
    than ``x``: a kept transpose is recomputed in the backward from its NCHW operand
    (``_residuals.RECOMPUTED``), whose elementwise uses would then be transposed reads.
    """
    perm, back = _perms(x.ndim)
    out, mean, var, _ = _forward(jnp.transpose(x, perm), weight, bias, eps, x.ndim - 1)
    return jnp.transpose(out, back), mean, var


def _fwd_channels_last(x, weight, bias, eps):
    perm, back = _perms(x.ndim)
    xl = jnp.transpose(x, perm)
    out, mean, var, invstd = _forward(xl, weight, bias, eps, x.ndim - 1)
    if x.dtype != weight.dtype:  # half precision: its input, at half the bytes of x - mean
        return (jnp.transpose(out, back), mean, var), (xl, mean, weight, invstd)
    centered = xl - jnp.expand_dims(mean, _reduced(x.ndim, x.ndim - 1))
    return (jnp.transpose(out, back), mean, var), (centered, None, weight, invstd)


def _bwd_channels_last(eps, residuals, cts):
    kept, mean, weight, invstd = residuals
    perm, back = _perms(kept.ndim)
    axis = kept.ndim - 1
    centered = kept
    if mean is not None:
        centered = kept.astype(weight.dtype) - jnp.expand_dims(mean, _reduced(kept.ndim, axis))
    d_out, d_mean, d_var = cts
    d_x, d_weight, d_bias = _grads(
        centered, weight, invstd, (jnp.transpose(d_out, perm), d_mean, d_var), axis
    )
    return jnp.transpose(d_x, back).astype(kept.dtype), d_weight, d_bias


batch_norm_train_channels_last.defvjp(_fwd_channels_last, _bwd_channels_last)
