"""Vector norms and distances (``linalg_vector_norm``, ``dist``), with eager's derivatives
(``norm_backward``) where JAX's differ: NaN, infinities, zero vectors and ties."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from torch._ops import ops

from torch2xla.ops._common import as_dtype, jdt, opmath_dtype, out_dtype
from torch2xla.ops._elementwise import _abs
from torch2xla.ops._registry import register

aten = ops.aten


def _safe_root(s, p):
    """``s ** (1/p)`` whose gradient at ``s == 0`` is 0 (torch's subgradient), not inf/NaN."""
    zero = s == 0
    root = jnp.where(zero, 1, s) ** (1.0 / p)
    return jnp.where(zero, 0, root)


def _extreme_norm(x, ord, axes, keepdim):
    """The +-inf norm of a real ``x`` with eager's derivative (``norm_backward``):
    ``sgn(x) * grad / count`` on the ``count`` elements whose magnitude is the norm or NaN
    (JAX's derivative of max was NaN everywhere at a NaN), where ``sgn(NaN)`` is 0."""

    def value(x):
        a = jnp.abs(x)
        if ord > 0:
            return jnp.max(a, axis=axes, keepdims=keepdim, initial=0)
        return jnp.min(a, axis=axes, keepdims=keepdim)

    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = fn(x)
        kept = jnp.max if ord > 0 else jnp.min
        norm = kept(jnp.abs(x), axis=axes, keepdims=True, **({"initial": 0} if ord > 0 else {}))
        a = jnp.abs(x)
        mask = (a == norm) | jnp.isnan(a)
        count = jnp.sum(mask, axis=axes, keepdims=keepdim).astype(x.dtype)
        # sgn(x) * mask as constants: -0 off the mask where x < 0, as eager's sgn(x) * 0
        # (a product with the mask converted to floats became a select of +0 in XLA)
        sgn = jnp.where(x < 0, -1.0, jnp.where(x > 0, 1.0, 0.0)).astype(x.dtype)
        coef = jnp.where(mask, sgn, jnp.where(x < 0, -0.0, 0.0).astype(x.dtype))
        return out, jnp.sum(coef * t, axis=axes, keepdims=keepdim) / count

    return fn(x)


def _vector_norm(x, ord, axes, keepdim):
    if math.isinf(ord) and not jnp.iscomplexobj(x) and jnp.issubdtype(x.dtype, jnp.floating):
        return _extreme_norm(x, ord, axes, keepdim)
    a = jnp.abs(x) if jnp.iscomplexobj(x) else _abs(x)  # (torch's derivative: 0 at 0)
    if ord == float("inf"):
        return jnp.max(a, axis=axes, keepdims=keepdim, initial=0)
    if ord == float("-inf"):
        return jnp.min(a, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum((a != 0).astype(a.dtype), axis=axes, keepdims=keepdim)
    if ord == 1:
        return jnp.sum(a, axis=axes, keepdims=keepdim)
    if ord == 2:
        if jnp.iscomplexobj(x) or not jnp.issubdtype(x.dtype, jnp.floating):
            return _safe_root(jnp.sum(a * a, axis=axes, keepdims=keepdim), 2)
        return _euclidean_norm(x, axes, keepdim)

    # NOTE: torch's p-norm gradient is 0 where the norm is 0; keep |x|**p finite there too.
    def value(x):
        a = jnp.abs(x)
        safe = jnp.where(a == 0, 1, a)
        # (a negative p: |0|^p is inf, the norm 0, as eager's)
        powered = a**ord if ord < 0 else jnp.where(a == 0, 0, safe**ord)
        return _safe_root(jnp.sum(powered, axis=axes, keepdims=keepdim), ord)

    if jnp.iscomplexobj(x) or not jnp.issubdtype(x.dtype, jnp.floating):
        return value(x)
    return _with_norm_backward(value, ord, axes, keepdim)(x)


def _kept(out, x, axes):
    """The norm ``out`` of ``x`` over ``axes`` shaped to broadcast against ``x`` (the reduced
    dims kept as 1)."""
    return out.reshape(tuple(1 if axes is None or d in axes else n for d, n in enumerate(x.shape)))


def _euclidean_norm(x, axes, keepdim):
    """The 2-norm of a real ``x`` with eager's derivative (``norm_backward``): ``grad * (x /
    norm)``, the ratio 0 where the norm is 0, so that a NaN or infinite gradient at a zero
    vector stays NaN (JAX's derivative of ``_safe_root``'s select gave 0 there: the
    ``F.normalize(x, eps=0)`` of a zero row)."""

    def value(x):
        return _safe_root(jnp.sum(x * x, axis=axes, keepdims=keepdim), 2)

    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = fn(x)
        norm = _kept(out, x, axes)
        # (divided by the norm itself, 0 too: eager's double backward is NaN there)
        ratio = jnp.where(norm == 0, 0, x / norm)
        return out, jnp.sum(ratio * t, axis=axes, keepdims=keepdim)

    return fn(x)


def _with_norm_backward(value, p, axes, keepdim):
    """``value`` (the ``p``-norm, p not 0, 1, 2 or infinite) with eager's derivative
    (``norm_backward``), NaN wherever the norm is NaN (JAX's was 0 at the zeros)."""
    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = fn(x)
        norm = _kept(out, x, axes)
        a = jnp.abs(x)
        sgn = jnp.where(x < 0, -1.0, jnp.where(x > 0, 1.0, 0.0)).astype(x.dtype)
        if p < 1:  # sgn(x) * |x|^(p-1) (0 at 0) * grad * norm^(1-p)
            scaled = sgn * jnp.where(x == 0, 0, a ** (p - 1))
            tangent = (t * norm ** (1 - p)) * scaled
            return out, jnp.sum(tangent, axis=axes, keepdims=keepdim)
        scaled = sgn * a ** (p - 1) if p < 2 else x * a ** (p - 2)
        # grad / norm^(p-1), 0 where the norm is 0
        zero = norm == 0
        total = jnp.sum(scaled * t, axis=axes, keepdims=True)
        tangent = jnp.where(zero, 0, total / jnp.where(zero, 1, norm ** (p - 1)))
        return out, tangent if keepdim else jnp.squeeze(tangent, axes)

    return fn


def _norm_axes(dim, ndim):
    # NOTE: dim=None and dim=[] both mean every dim.
    if ndim == 0 or dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        return None
    dims = dim if isinstance(dim, list | tuple) else (dim,)
    return tuple(d % max(ndim, 1) for d in dims) if ndim else None


@register(aten.linalg_vector_norm.default)
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    result = out_dtype()
    x = self if dtype is None else as_dtype(self, jdt(dtype))
    if not jnp.iscomplexobj(x):
        x = as_dtype(x, opmath_dtype(result) if dtype is None else x.dtype)
    return as_dtype(_vector_norm(x, float(ord), _norm_axes(dim, self.ndim), keepdim), result)


@register(aten.dist.default)
def dist(self, other, p=2):
    result = out_dtype()
    a, b = as_dtype(self, result), as_dtype(other, result)
    return as_dtype(_vector_norm(a - b, float(p), None, False), result)


@register(aten.renorm.default)
def renorm(self, p, dim, maxnorm):
    """Each slice along ``dim`` whose ``p``-norm passes ``maxnorm`` scaled by
    ``maxnorm / (norm + 1e-7)`` (torch's decomposition), with eager's derivative
    (``renorm_backward``): the gradient passed through where the norm does not pass (a NaN
    norm included; JAX's derivative of the unchosen factor made NaN there)."""
    if not jnp.issubdtype(self.dtype, jnp.floating):
        raise NotImplementedError(f"renorm of {self.dtype}")
    dim = dim % self.ndim
    axes = tuple(d for d in range(self.ndim) if d != dim)
    acc = opmath_dtype(self.dtype)
    p = float(p)

    def norm_of(x):
        return _vector_norm(as_dtype(x, acc), p, axes, True)

    def scale(norm):
        passes = norm > maxnorm
        factor = jnp.where(passes, maxnorm / (norm + 1e-7), 1.0).astype(acc)
        return passes, factor

    fn = jax.custom_jvp(lambda x: x * scale(norm_of(x))[1].astype(x.dtype))

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        norm = norm_of(x)
        passes, factor = scale(norm)
        # eager: where(passes, factor * grad - factor / (norm + 1e-7) * norm_backward(
        # sum(x * grad)), grad); the norm's tangent taken of the tangent masked to those rows
        _, d_norm = jax.jvp(norm_of, (x,), (jnp.where(passes, t, 0),))
        k = factor / (norm + 1e-7)
        own = jnp.where(passes, factor.astype(x.dtype) * t, t)
        through_norm = x * jnp.where(passes, k * d_norm, 0).astype(x.dtype)
        return fn(x), own - through_norm

    return as_dtype(fn(self), out_dtype())
