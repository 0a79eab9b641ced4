"""Gradients that keep what eager's autograd keeps.

``jax.vjp`` keeps every intermediate its linearization needs: five full-size tensors for a
GELU(tanh), the unnormalized exponentials and the probabilities of a softmax, ``x - mean`` and
the normalized value of a layer norm, and every (L, S) matrix of an attention. Eager keeps the
input of GELU/SiLU, the output of softmax, the input with per-row mean and rstd for layer norm,
and for fused attention only q, k, v, the output and the per-row logsumexp. Each function
here is a ``jax.custom_vjp`` whose forward is the lowering's own computation and whose
backward recomputes the cheap parts from what eager keeps, with torch's derivative formulas
(``tools/autograd/derivatives.yaml``), in float32 for half-precision inputs as torch's kernels.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from torch2xla.ops._common import opmath_dtype
from torch2xla.ops._registry import ctx


# -- activations -----------------------------------------------------------------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def gelu(x, approximate: bool):
    """GELU of a real float array in its opmath dtype, rounded once to ``x.dtype``."""
    xf = x.astype(opmath_dtype(x.dtype))
    if approximate:
        return jax.nn.gelu(xf, approximate=True).astype(x.dtype)
    # torch's formula (its CPU and CUDA kernels). jax.nn.gelu computes x * erfc(-x / sqrt2) / 2,
    # and XLA's GPU erfc, a branch between two polynomials, ran ViT's GELU at half the speed of
    # inductor's erf. Neither form is torch's bit for bit in the far negative tail (below -5
    # the values are under 2e-7 in size, torch's erf and XLA's differ there).
    return (xf * _normal_cdf(xf)).astype(x.dtype)


def _normal_cdf(x):
    return 0.5 * (1 + lax.erf(x * (1 / math.sqrt(2.0))))


def _gelu_fwd(x, approximate):
    return gelu(x, approximate), x


def _gelu_bwd(approximate, x, dy):
    xf = x.astype(opmath_dtype(x.dtype))
    if approximate:  # torch's GeluBackward, approximate='tanh'
        beta, kappa = math.sqrt(2.0 / math.pi), 0.044715
        x_sq = xf * xf
        t = jnp.tanh(beta * (xf + kappa * x_sq * xf))
        left_d = 0.5 * (1 + t)
        right_d = 0.5 * xf * (1 - t * t) * beta * (1 + 3 * kappa * x_sq)
        d = left_d + right_d
    else:  # cdf + x * pdf
        cdf = _normal_cdf(xf)
        pdf = jnp.exp(-0.5 * xf * xf) * (1 / math.sqrt(2.0 * math.pi))
        d = cdf + xf * pdf
    return ((dy.astype(xf.dtype) * d).astype(x.dtype),)


gelu.defvjp(_gelu_fwd, _gelu_bwd)


@jax.custom_vjp
def silu(x):
    """SiLU of a real float array in its opmath dtype, rounded once to ``x.dtype``."""
    return jax.nn.silu(x.astype(opmath_dtype(x.dtype))).astype(x.dtype)


def _silu_fwd(x):
    return silu(x), x


def _silu_bwd(x, dy):
    xf = x.astype(opmath_dtype(x.dtype))
    s = jax.nn.sigmoid(xf)
    return ((dy.astype(xf.dtype) * s * (1 + xf * (1 - s))).astype(x.dtype),)


silu.defvjp(_silu_fwd, _silu_bwd)


# -- softmax ---------------------------------------------------------------------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def softmax(x, axis: int, out_dtype, log: bool):
    """(log-)softmax of ``x`` computed in its opmath dtype, returned as ``out_dtype``; the
    backward keeps the output only (``_softmax_backward_data``)."""
    xf = x.astype(opmath_dtype(x.dtype))
    fn = jax.nn.log_softmax if log else jax.nn.softmax
    return fn(xf, axis=axis).astype(out_dtype)


def _softmax_fwd(x, axis, out_dtype, log):
    y = softmax(x, axis, out_dtype, log)
    return y, (y, jnp.zeros((0,), x.dtype))  # the empty array carries x's dtype


def _softmax_bwd(axis, out_dtype, log, res, dy):
    y, like = res
    acc = jnp.promote_types(opmath_dtype(y.dtype), opmath_dtype(like.dtype))
    yf, g = y.astype(acc), dy.astype(acc)
    if log:
        dx = g - jnp.exp(yf) * jnp.sum(g, axis=axis, keepdims=True)
    else:
        dx = yf * (g - jnp.sum(g * yf, axis=axis, keepdims=True))
    return (dx.astype(like.dtype),)


softmax.defvjp(_softmax_fwd, _softmax_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def safe_softmax(x, axis: int, out_dtype):
    """softmax of ``x`` (already in its opmath dtype) that is 0 on rows entirely -inf, returned
    as ``out_dtype``; the backward keeps the output only, as eager's ``_safe_softmax``
    (``_softmax_backward_data`` on the result: 0 on the masked rows, whose output is 0)."""
    # NOTE: rows that are all -inf give 0 (not NaN), with no third reduction (which rows are
    # all -inf) and select (``_softmax_rows``).
    return _softmax_rows(x, axis)[0].astype(out_dtype)


def _safe_softmax_fwd(x, axis, out_dtype):
    y = safe_softmax(x, axis, out_dtype)
    return y, (y, jnp.zeros((0,), x.dtype))


def _safe_softmax_bwd(axis, out_dtype, res, dy):
    return _softmax_bwd(axis, out_dtype, False, res, dy)


safe_softmax.defvjp(_safe_softmax_fwd, _safe_softmax_bwd)


# -- layer norm ------------------------------------------------------------------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def layer_norm(x, weight, bias, axes: tuple[int, ...], eps: float, stat_dtypes: tuple):
    """``native_layer_norm``: (out, mean, rstd); the backward keeps x, mean and rstd."""
    out, mean, rstd = _layer_norm(x, weight, bias, axes, eps)
    return out, mean.astype(stat_dtypes[0]), rstd.astype(stat_dtypes[1])


def _layer_norm(x, weight, bias, axes, eps):
    acc = opmath_dtype(x.dtype)
    xf = x.astype(acc)
    mean = jnp.mean(xf, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=axes, keepdims=True)
    rstd = lax.rsqrt(var + eps)
    out = (xf - mean) * rstd
    if weight is not None:
        out = out * weight.astype(acc)
    out = add_bias(out, None if bias is None else bias.astype(acc))
    return out.astype(x.dtype), mean, rstd


def add_bias(out, bias):
    """``out + bias`` as eager's normalization kernels add it: always, a zero where no bias
    is given, so that a -0.0 result is +0.0; behind a barrier, as XLA folds an add of
    constant zeros (a bias of ``torch.zeros``) away."""
    if bias is None:
        bias = jnp.zeros((), out.dtype)
    return out + lax.optimization_barrier(bias)


def _layer_norm_fwd(x, weight, bias, axes, eps, stat_dtypes):
    out, mean, rstd = _layer_norm(x, weight, bias, axes, eps)
    outs = (out, mean.astype(stat_dtypes[0]), rstd.astype(stat_dtypes[1]))
    return outs, (x, weight, bias is not None, mean, rstd)


def _layer_norm_bwd(axes, eps, stat_dtypes, res, cts):
    x, weight, has_bias, mean, rstd = res
    d_out, d_mean, d_rstd = cts
    acc = mean.dtype
    xf, g = x.astype(acc), d_out.astype(acc)
    n = math.prod(x.shape[a] for a in axes)
    xhat = (xf - mean) * rstd
    dxhat = g if weight is None else g * weight.astype(acc)
    dx = rstd * (
        dxhat
        - jnp.mean(dxhat, axis=axes, keepdims=True)
        - xhat * jnp.mean(dxhat * xhat, axis=axes, keepdims=True)
    )
    # the mean and rstd outputs, where they are used: d mean/dx = 1/n, d rstd/dx = -rstd^3 (x - mean)/n
    dx = dx + d_mean.astype(acc) / n - d_rstd.astype(acc) * rstd**3 * (xf - mean) / n
    batch = tuple(a for a in range(x.ndim) if a not in axes)
    dw = None if weight is None else jnp.sum(g * xhat, axis=batch).astype(weight.dtype)
    db = (
        jnp.sum(g, axis=batch).astype(x.dtype if weight is None else weight.dtype)
        if has_bias
        else None
    )
    return dx.astype(x.dtype), dw, db


layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)


# -- attention -------------------------------------------------------------------------------
def attention(
    q,
    k,
    v,
    mask,
    bias,
    *,
    scale: float,
    is_causal: bool,
    precision,
    dropout_p: float = 0.0,
    seed=None,
):
    """softmax(q k^T * scale [+ causal/bool mask] [+ bias]) v, and the per-row logsumexp of the
    scores, in the opmath dtype of ``q``. The backward keeps q, k, v and the masks (eager's
    fused attention keeps the output and the logsumexp too) and recomputes the scores and
    their softmax.
    ``q``, ``k``, ``v`` share their leading (batch, head) dims; ``mask``/``bias`` broadcast.
    With ``dropout_p``, probabilities are dropped with that probability and the rest scaled by
    1 / (1 - dropout_p), by a mask drawn from ``seed`` (a uint32 scalar), which the backward
    draws again rather than keeping it (as eager's fused kernels keep their generator's state)."""
    probs = probs_dtype(q.dtype)
    return _attention(
        q, k, v, mask, bias, seed, scale, is_causal, precision, float(dropout_p), probs
    )


def probs_dtype(dtype) -> np.dtype:
    """The dtype attention's probabilities (and their gradient) enter its products in, for
    operands of ``dtype``.

    NOTE: on the CPU eager computes half-precision attention in float32 (its math path casts
    q, k and v to float32, the flash kernel keeps float32 probabilities up to a last rounding
    of the exponentials) and rounds the output once; rounding the probabilities to the
    operands' dtype before the product with v doubled eager's error (3.5% of a bfloat16
    output near 0). CUDA's fused kernels multiply half-precision probabilities."""
    try:
        on_cuda = ctx().on_cuda
    except LookupError:  # (called outside a lowering: JAX's default device decides)
        on_cuda = jax.default_backend() == "gpu"
    return np.dtype(dtype) if on_cuda else opmath_dtype(dtype)


def _scores(q, k, mask, bias, scale, is_causal, precision):
    acc = opmath_dtype(q.dtype)
    s = jnp.matmul(
        q, jnp.swapaxes(k, -1, -2), precision=precision, preferred_element_type=acc
    ) * jnp.asarray(scale, acc)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        s = jnp.where(jnp.tril(jnp.ones((L, S), bool)), s, -jnp.inf)
    if mask is not None:
        s = jnp.where(mask, s, -jnp.inf)
    if bias is not None:
        s = s + bias.astype(acc)
    return s


def keep_mask(key, p_keep: float, shape):
    """A boolean mask of ``shape``, each element True with probability ``p_keep``.

    NOTE: drawn with threefry's original (non-partitionable) layout, where one threefry block
    gives the random words of two elements; the partitionable default spends a block per
    element and drops half of it. Same distribution (uniform floats of 23 random bits against
    ``p_keep``), 2.4x faster to draw on the CPU; a dropout mask is the largest random draw of a
    training step (GPT-2's attention: 8x12x512x512 per layer)."""
    with jax.threefry_partitionable(False):
        return jax.random.bernoulli(key, p_keep, shape)


def dropout(x, key, p: float):
    """``x`` with each element dropped with probability ``p`` (0 < p < 1) by a mask drawn from
    ``key`` and the rest scaled by 1 / (1 - p), as torch's dropout; and the mask of those kept."""
    keep = keep_mask(key, 1.0 - p, x.shape)
    # (a dropped element is ``x * 0``, as eager's ``x * mask * scale``: -0.0 for negative x,
    # NaN for infinite x)
    return jnp.where(keep, x * jnp.asarray(1.0 / (1.0 - p), x.dtype), x * 0), keep


def _dropped(p, seed, dropout_p):
    """``p`` with attention dropout applied (the same mask for the same seed), and the mask."""
    if not dropout_p:
        return p, None
    return dropout(p, jax.random.key(seed), dropout_p)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6, 7, 8, 9, 10))
def _attention(q, k, v, mask, bias, seed, scale, is_causal, precision, dropout_p, probs):
    return _attention_fwd(q, k, v, mask, bias, seed, scale, is_causal, precision, dropout_p, probs)[
        0
    ]


def _softmax_rows(s, axis: int = -1):
    """softmax of the scores ``s`` over ``axis`` and their logsumexp per row.

    NOTE: a row that attends nowhere (every score -inf) gives zeros and zero gradients, as
    eager's sdpa (its math path's _safe_softmax), not NaN; its logsumexp is -inf. The guards
    are maxima with a constant, which change nothing in a live row (its maximum is finite, its
    sum near 1 or more; XLA's CPU exp(0) is 1 - 8e-7, so the floor is the smallest normal
    float, not 1): XLA's GPU softmax fusion (one Triton kernel per row) follows a reduction
    through elementwise ops with a constant operand, not through a select, and only where
    the reduction has no other reader (an unused logsumexp is dropped)."""
    info = jnp.finfo(s.dtype)
    m = jnp.maximum(lax.stop_gradient(jnp.max(s, axis=axis, keepdims=True)), info.min)
    e = jnp.exp(s - m)
    total = jnp.sum(e, axis=axis, keepdims=True)
    lse = jnp.squeeze(m + jnp.log(total), axis)
    return e / jnp.maximum(total, info.tiny), lse


def _attention_fwd(q, k, v, mask, bias, seed, scale, is_causal, precision, dropout_p, probs):
    acc = opmath_dtype(q.dtype)
    p, lse = _softmax_rows(_scores(q, k, mask, bias, scale, is_causal, precision))
    p, _ = _dropped(p, seed, dropout_p)
    out = jnp.matmul(p.astype(probs), v, precision=precision, preferred_element_type=acc)
    # NOTE: the backward recomputes the scores and their softmax exactly as the forward did
    # (not exp(s - lse), which loses |lse| ulps of the scores' scale: up to 30x eager's error
    # in q's and k's gradients). Keeping the row maximum and sum instead gave each softmax
    # reduction a second reader, the forward's residual, which kept XLA's GPU compiler from
    # fusing the forward's softmax.
    return (out.astype(q.dtype), lse), (q, k, v, mask, bias, seed)


def _attention_bwd(scale, is_causal, precision, dropout_p, probs, res, cts):
    q, k, v, mask, bias, seed = res
    d_out, d_lse = cts
    acc = opmath_dtype(q.dtype)
    p, _ = _softmax_rows(_scores(q, k, mask, bias, scale, is_causal, precision))
    kept, keep = _dropped(p, seed, dropout_p)
    do = d_out.astype(q.dtype)
    dv = jnp.matmul(
        jnp.swapaxes(kept.astype(probs), -1, -2),
        do,
        precision=precision,
        preferred_element_type=acc,
    ).astype(v.dtype)
    dp = jnp.matmul(do, jnp.swapaxes(v, -1, -2), precision=precision, preferred_element_type=acc)
    if keep is not None:  # through the dropout: the gradient of the kept, scaled values
        dp = jnp.where(keep, dp * jnp.asarray(1.0 / (1.0 - dropout_p), acc), 0)
    ds = p * (dp - jnp.sum(p * dp, axis=-1, keepdims=True))
    ds = ds + p * d_lse.astype(acc)[..., None]  # d lse / d s = p
    d_bias = None if bias is None else _sum_to(ds, bias.shape).astype(bias.dtype)
    ds = (ds * jnp.asarray(scale, acc)).astype(probs)
    dq = jnp.matmul(ds, k, precision=precision, preferred_element_type=acc).astype(q.dtype)
    dk = jnp.matmul(
        jnp.swapaxes(ds, -1, -2), q, precision=precision, preferred_element_type=acc
    ).astype(k.dtype)
    d_mask = None if mask is None else np.zeros(mask.shape, jax.dtypes.float0)
    d_seed = None if seed is None else np.zeros(np.shape(seed), jax.dtypes.float0)
    return dq, dk, dv, d_mask, d_bias, d_seed


def _sum_to(x, shape):
    """``x`` summed over the dimensions broadcasting expanded from ``shape``."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and x.shape[i + lead] != 1
    )
    return jnp.sum(x, axis=axes, keepdims=True).reshape(shape) if axes else x


_attention.defvjp(_attention_fwd, _attention_bwd)


# -- a kernel whose gradient may be refused --------------------------------------------------
@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def with_fallback_vjp(primary, fallback, *args):
    """``primary(*args)``, differentiated through ``primary`` where its own vjp accepts the
    arguments and through ``fallback`` (the same function) where it refuses them.

    cuDNN's fused attention accepts some shapes (ViT's 197 tokens) for its forward but not for
    its backward, and says so only when differentiated, outside the lowering that could choose
    another kernel.
    """
    return primary(*args)


def _fallback_fwd(primary, fallback, *args):
    try:
        return jax.vjp(primary, *args)
    except (ValueError, NotImplementedError, TypeError):  # the kernel refuses its backward
        return jax.vjp(fallback, *args)


def _fallback_bwd(primary, fallback, vjp_fn, ct):
    return vjp_fn(ct)


with_fallback_vjp.defvjp(_fallback_fwd, _fallback_bwd)
