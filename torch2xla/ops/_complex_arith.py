"""Complex sums with a scalar factor as eager's CPU kernels compute them: add, sub and rsub
(with ``alpha``), addcmul, addcdiv, lerp and fma.

# NOTE: eager computes ``add(a, b, alpha)`` as ``a + alpha * b`` for every alpha (1 by
# default), the product complex: alpha is made ``alpha + 0i`` (a complex alpha as given), and
# each of its four real products rounded on its own. So an infinite part of ``b`` meets a zero
# part of alpha: ``0 + (0 + inf i)`` is NaN + inf i where ``(0 + inf i) + 0`` is 0 + inf i,
# ``z + inf`` is inf + NaN i, ``z + NaN`` NaN + NaN i, and the zeros' signs follow the products
# (``(-0 - 0i) + 0.0`` is +0 + 0i, ``(-0 - 0i) - 0.0`` -0 + 0i). A real operand (a Python
# number, a real tensor) is first made complex (x + 0i). ``sub`` is ``add`` by ``-alpha``
# (a complex alpha negated in both parts: ``-(2j)`` is -0 - 2i), ``rsub(a, b, alpha)``
# ``b + (-alpha) * a``. ``addcmul(s, t1, t2, value)`` is ``s + (value * t1) * t2``,
# ``addcdiv`` ``s + (value * t1) / t2`` (c10::complex's division, ``_complex.div``), both
# products complex. The products here are eager's vectorized loop's, each rounded on its
# own (``_complex._rounded_mul``): its scalar loop (the last ``numel % W`` elements, W the
# complex numbers of a vector register) is the same for complex64, but contracted into fused
# multiply-adds for complex128, which differs where a product overflows (left).
# ``lerp(s, e, w)``: eager's vectorized loop computes ``coeff * (e - s) + base`` with
# ``coeff, base = (w, s)`` where ``|w|^2 < 0.25``, else ``(w - 1, e)``; its scalar loop
# ``s + w * (e - s)`` or ``e - (e - s) * (1 - w)``, which differ in zeros' signs and NaN
# parts (``(e - s) * (1 - w)`` with ``1 - w`` = 0.5 - 0i against -0.5 + 0i). Both are
# followed, the scalar one for the last ``numel % (2 * W)`` flat positions of the result. (Eager's
# complex64 AVX-512 loop tests an element's |w|^2 on a neighbouring element's weight:
# not followed.)
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from torch2xla.ops import _complex
from torch2xla.ops._common import scalar_tail
from torch2xla.ops._registry import ctx


def _constant(value, like):
    """The real array ``value`` (a Python number) shaped as ``like``'s parts, opaque to XLA's
    simplifier (which folds products by 0 and 1 of constants)."""
    return lax.optimization_barrier(jnp.full((), value, jnp.real(like).dtype))


def scaled(b, alpha):
    """``alpha * b`` for a Python number ``alpha`` and a complex array ``b``: eager's complex
    product by ``alpha + 0i``."""
    alpha = complex(alpha)
    ar, ai = _constant(alpha.real, b), _constant(alpha.imag, b)
    u, v = _complex._parts(b)
    return lax.complex(_complex._difference(ar * u, ai * v), _complex._sum(ar * v, ai * u))


def _plus(a, p):
    (x, y), (u, v) = _complex._parts(a), _complex._parts(p)
    return lax.complex(x + u, y + v)


def add(a, b, alpha=1):
    a, b = jnp.broadcast_arrays(a, b)
    return _plus(a, scaled(b, alpha))


def negated(alpha):
    """``-alpha`` as eager's sub negates its Scalar (a real one stays real: + 0i later)."""
    return -alpha if not isinstance(alpha, bool) else -int(alpha)


def addcmul(s, t1, t2, value=1):
    s, t1, t2 = jnp.broadcast_arrays(s, t1, t2)
    return _plus(s, _complex._rounded_mul(scaled(t1, value), t2))


def addcdiv(s, t1, t2, value=1):
    s, t1, t2 = jnp.broadcast_arrays(s, t1, t2)
    return _plus(s, _complex.div(scaled(t1, value), t2))


def _select(mask, a, b):
    return lax.complex(
        jnp.where(mask, jnp.real(a), jnp.real(b)), jnp.where(mask, jnp.imag(a), jnp.imag(b))
    )


def _minus(a, p):
    (x, y), (u, v) = _complex._parts(a), _complex._parts(p)
    return lax.complex(x - u, y - v)


def _shifted(w, c):
    """w - c for a real c, as c10::complex subtracts a real number (the imaginary part
    minus +0: -0 stays -0 only as -0 - 0)."""
    x, y = _complex._parts(w)
    zero = _constant(0.0, w)
    return lax.complex(x - _constant(c, w), y - zero)


def _from(c, w):
    """c - w for a real c (``opmath_t(1) - weight``: (c - x) + (0 - y)i)."""
    x, y = _complex._parts(w)
    return lax.complex(_constant(c, w) - x, _constant(0.0, w) - y)


def lerp(s, e, w):
    s, e, w = jnp.broadcast_arrays(s, e, w)
    wx, wy = _complex._parts(w)
    small = wx * wx + wy * wy < 0.25  # (eager's test: |w|^2, inf past its overflow)
    diff = _minus(e, s)
    vector = _plus(
        _select(small, s, e), _complex._rounded_mul(_select(small, w, _shifted(w, 1.0)), diff)
    )
    if ctx().on_cuda:
        return vector
    scalar = _select(
        small,
        _plus(s, _complex._rounded_mul(w, diff)),
        _minus(e, _complex._rounded_mul(diff, _from(1.0, w))),
    )
    return _tail_select(vector, scalar)


def _tail_select(vector, scalar):
    """``vector`` with eager's scalar-tail positions from ``scalar``."""
    return _select(scalar_tail(vector.shape, vector.dtype), scalar, vector)
