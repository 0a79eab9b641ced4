"""Complex arithmetic and elementary functions with eager's special values.

Eager's CPU kernels compute complex numbers with C++'s ``std::complex`` functions (glibc's, which
follow C99 Annex G for infinities, NaN and signed zeros) and ``c10::complex`` arithmetic; XLA's
complex ops return NaN for most non-finite inputs and put ``sqrt``'s branch cut on the wrong side
of a negative zero. Each function here takes the operands in their computation dtype and
defers to its real counterpart (``real``) where they are not complex.

# NOTE: what eager gives, per function (``x + iy`` the argument):
# - ``mul``: (xu - yv) + (xv + yu)i, as written (a real operand is first made complex, so
#   (1 + inf i) * 2 is NaN + inf i);
# - ``div``: c10::complex's division (Smith's, numpy's): the larger part of the divisor
#   scales, a zero divisor divides each part by zero ((1 + 2i) / 0 is inf + inf i);
#   ``reciprocal`` is 1 / z by it, ``rsqrt`` 1 / sqrt(z), ``sigmoid`` 1 / (1 + exp(-z));
# - ``abs`` is hypot: inf where either part is infinite, NaN beside it or not;
# - ``sgn`` is 0 where abs is 0 (+0, whatever the zeros' signs), else each part / abs;
# - ``sqrt``: sqrt(conj z) = conj sqrt(z) (sqrt(-1.5 - 0i) is -1.22i), inf + inf i where y is
#   infinite, 0 + inf i from x = -inf, inf + 0i from x = +inf;
# - ``exp`` from x = +inf with y infinite or NaN: inf + NaN i; from x = -inf: +-0 (y's sign);
# - ``log``: real part inf where either part is infinite (log(inf + NaN i) is inf + NaN i);
#   log2 and log10 divide it by ln 2, ln 10;
# - ``pow`` by 0.5, 2, 3, -0.5, -1, -2: sqrt, z * z, z * z * z, rsqrt, reciprocal, 1 / (z * z);
# - ``tanh`` of +-0 + iy with y infinite or NaN: +-0 + NaN i; of +-inf + iy with y infinite
#   or NaN: +-1 + 0i (y's sign).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax


def _is_complex(*xs) -> bool:
    return any(jnp.issubdtype(jnp.result_type(x), jnp.complexfloating) for x in xs)


def _parts(z):
    return jnp.real(z), jnp.imag(z)


def mul(a, b):
    if not _is_complex(a, b):
        return jnp.multiply(a, b)
    a, b = jnp.broadcast_arrays(a, b)
    (x, y), (u, v) = _parts(a), _parts(b)
    return lax.complex(x * u - y * v, x * v + y * u)


def div(a, b):
    if not _is_complex(a, b):
        return jnp.true_divide(a, b)
    a, b = jnp.broadcast_arrays(a, b)
    (x, y), (c, d) = _parts(a), _parts(b)
    ac, ad = jnp.abs(c), jnp.abs(d)
    first, zero = ac >= ad, (ac == 0) & (ad == 0)
    # (each branch reads safe stand-ins where it is not taken: its gradient there is 0, not NaN)
    one, nil = jnp.ones_like(c), jnp.zeros_like(c)
    # |c| >= |d|: scaled by c (or, both zero, each part divided by zero)
    c1, d1 = jnp.where(first & ~zero, c, one), jnp.where(first & ~zero, d, nil)
    rat = d1 / c1
    scl = 1 / (c1 + d1 * rat)
    re1, im1 = (x + y * rat) * scl, (y - x * rat) * scl
    re1 = jnp.where(zero, x / jnp.where(zero, ac, one), re1)
    im1 = jnp.where(zero, y / jnp.where(zero, ad, one), im1)
    # |c| < |d| (or a NaN part): scaled by d
    c2, d2 = jnp.where(first, nil, c), jnp.where(first, one, d)
    rat = c2 / d2
    scl = 1 / (d2 + c2 * rat)
    re2, im2 = (x * rat + y) * scl, (y * rat - x) * scl
    return lax.complex(jnp.where(first, re1, re2), jnp.where(first, im1, im2))


def reciprocal(z, real=jnp.reciprocal):
    if not _is_complex(z):
        return real(z)
    return div(_one(z), z)


def _one(z):
    # (opaque: XLA would fold its zero imaginary part out of sums, losing a zero's sign)
    return lax.optimization_barrier(jnp.ones_like(z))


def abs_(z):
    x, y = _parts(z)
    return jnp.where(jnp.isinf(x) | jnp.isinf(y), jnp.asarray(jnp.inf, x.dtype), jnp.abs(z))


def sgn(z, real):
    if not _is_complex(z):
        return real(z)
    a = abs_(z)
    x, y = _parts(z)
    zero, safe = jnp.zeros_like(a), jnp.where(a == 0, 1, a)
    return lax.complex(jnp.where(a == 0, zero, x / safe), jnp.where(a == 0, zero, y / safe))


def sqrt(z, real=jnp.sqrt):
    if not _is_complex(z):
        return real(z)
    x, y = _parts(z)
    w = jnp.sqrt(lax.complex(x, jnp.abs(y)))  # the upper half plane's root, then y's sign
    re, im = jnp.real(w), jnp.copysign(jnp.imag(w), y)
    inf, zero = jnp.asarray(jnp.inf, x.dtype), jnp.zeros_like(x)
    finite_y = jnp.isfinite(y)
    re = jnp.where((x == -inf) & finite_y, zero, re)
    im = jnp.where((x == -inf) & finite_y, jnp.copysign(inf, y), im)
    re = jnp.where(x == inf, inf, re)
    im = jnp.where((x == inf) & finite_y, jnp.copysign(zero, y), im)
    im = jnp.where((x == -inf) & jnp.isnan(y), inf, im)
    re = jnp.where(jnp.isinf(y), inf, re)
    im = jnp.where(jnp.isinf(y), y, im)
    return lax.complex(re, im)


def rsqrt(z, real=lax.rsqrt):
    if not _is_complex(z):
        return real(z)
    return reciprocal(sqrt(z))


def exp(z, real=jnp.exp):
    if not _is_complex(z):
        return real(z)
    x, y = _parts(z)
    w = jnp.exp(z)
    bad_y = ~jnp.isfinite(y)
    nan, inf = jnp.asarray(jnp.nan, x.dtype), jnp.asarray(jnp.inf, x.dtype)
    re = jnp.where((x == inf) & bad_y, inf, jnp.real(w))
    im = jnp.where(y == 0, y, jnp.imag(w))  # (XLA's loses the zero's sign)
    im = jnp.where((x == inf) & bad_y, nan, im)
    re = jnp.where((x == -inf) & bad_y, jnp.zeros_like(x), re)
    im = jnp.where((x == -inf) & bad_y, jnp.copysign(jnp.zeros_like(x), y), im)
    return lax.complex(re, im)


def log(z, real=jnp.log, base: float | None = None):
    if not _is_complex(z):
        return real(z)
    x, y = _parts(z)
    w = jnp.log(z)
    re = jnp.where(jnp.isinf(x) | jnp.isinf(y), jnp.asarray(jnp.inf, x.dtype), jnp.real(w))
    im = jnp.imag(w)
    if base is not None:
        ln = jnp.asarray(math.log(base), x.dtype)
        re, im = re / ln, im / ln
    return lax.complex(re, im)


def tanh(z, real=jnp.tanh):
    if not _is_complex(z):
        return real(z)
    x, y = _parts(z)
    w = jnp.tanh(z)
    edge = (x == 0) & ~jnp.isfinite(y)
    re = jnp.where(edge, x, jnp.real(w))
    im = jnp.where(y == 0, y, jnp.imag(w))  # (XLA's loses the zero's sign)
    im = jnp.where(jnp.isinf(x) & ~jnp.isfinite(y), jnp.copysign(jnp.zeros_like(y), y), im)
    im = jnp.where(edge, jnp.asarray(jnp.nan, x.dtype), im)
    return lax.complex(re, im)


def sigmoid(z, real):
    if not _is_complex(z):
        return real(z)
    e = exp(-z)
    return div(_one(z), lax.complex(1 + jnp.real(e), jnp.imag(e)))


def _cube(z):
    return mul(mul(z, z), z)


# pow(z, exponent) where eager's kernel computes it otherwise than as std::pow
POWERS = {
    0.5: sqrt,
    2.0: lambda z: mul(z, z),
    3.0: _cube,
    -0.5: rsqrt,
    -1.0: reciprocal,
    -2.0: lambda z: reciprocal(mul(z, z)),
}
