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
# - ``pow`` by 0 and 1: 1 and z; by 0.5, 2, 3, -0.5, -1, -2: sqrt, z * z, z * z * z, rsqrt,
#   reciprocal, 1 / (z * z) (the squares' products rounded apart, ``_difference``); by any
#   other exponent w: glibc's cpow, exp(w log z) with C's product (Annex G: infinities
#   recovered from NaN + NaN i);
# - ``expm1`` is expm1(x)cos(y) - 2 sin(y/2)^2 + i exp(x)sin(y); ``log1p`` log(u) z / (u - 1)
#   for u = 1 + z rounded (z where u is 1, log(u) where u - 1 is z); ``exp2(z)`` exp(z ln 2),
#   ln 2 real (exp2(inf + 0i) is inf + 0i);
# - ``tanh`` of +-0 + iy with y infinite or NaN: +-0 + NaN i; of +-inf + iy with y infinite
#   or NaN: +-1 + 0i (y's sign).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax


def _is_complex(*xs) -> bool:
    return any(jnp.issubdtype(jnp.result_type(x), jnp.complexfloating) for x in xs)


def _parts(z):
    return jnp.real(z), jnp.imag(z)


def _holomorphic(forward, derivative):
    """``forward`` whose derivative at z is ``derivative(z, forward(z))`` (eager's backward
    multiplies the gradient by its conjugate; ``mul`` keeps eager's special values)."""
    fn = jax.custom_jvp(forward)

    @fn.defjvp
    def _jvp(primals, tangents):
        (z,), (t,) = primals, tangents
        w = forward(z)
        return w, _linear_mul(t, derivative(z, w))

    return fn


def _wide(x):
    """``x`` in float64 where it is float32: complex64's real functions are computed there
    (XLA's float32 cosh/sinh lose ulps; float64 does not overflow before float32 does)."""
    return x.astype(jnp.float64) if x.dtype == jnp.float32 else x


def _shift(z, c: float):
    """z + c for a real c as eager adds a Python number to a complex tensor: (c + 0i), which
    makes a zero imaginary part +0."""
    x, y = _parts(z)
    return lax.complex(x + c, jnp.where(y == 0, jnp.zeros_like(y), y))


def mul(a, b):
    if not _is_complex(a, b):
        return jnp.multiply(a, b)
    if a is b:  # z * z (a square overflows in both parts at once, see _difference)
        return _square(a)
    return _rounded_mul(a, b)


def _linear_mul(t, d):
    """The tangent ``t`` times a derivative ``d`` in a JVP rule: a plain product, linear in
    ``t`` (``_rounded_mul``'s selects read their operands' values, which a transpose cannot)."""
    t, d = jnp.broadcast_arrays(t, d)
    (x, y), (u, v) = _parts(t), _parts(d)
    return lax.complex(x * u - y * v, x * v + y * u)


def _rounded_mul(a, b):
    """a * b with each product rounded on its own, as eager's vectorized loop (XLA's CPU
    compiler would contract ``x * u - y * v``: (1 - 1.5i)(3e38 + 3e38i) was inf - 1.5e38i,
    eager's inf - inf i)."""
    a, b = jnp.broadcast_arrays(a, b)
    (x, y), (u, v) = _parts(a), _parts(b)
    return lax.complex(_difference(x * u, y * v), _sum(x * v, y * u))


def _difference(p, q):
    """p - q of two products as eager rounds them, each on its own.

    # NOTE: XLA's CPU compiler contracts ``x * u - y * v`` into a fused multiply-add, which
    # rounds the product only once: where a product overflows, eager's ``inf - inf`` is NaN
    # and ``inf - finite`` inf, the fused result -inf or finite ((1e30 + 1e30i)**2 in
    # complex64). Where both products are finite the fused difference is as exact; elsewhere
    # eager's value is a select of the products' (no arithmetic left to contract): a NaN
    # operand passes as it is, inf - inf is the CPU's default NaN (its sign bit set, which a
    # later copysign reads: 0 ** 2.5 is 0 - 0i)."""
    return _combine(p - q, p, q, -q, p == q)


def _sum(p, q):
    """p + q of two products as eager rounds them (``_difference``)."""
    return _combine(p + q, p, q, q, p == -q)


def _combine(fused, p, q, signed_q, opposed):
    default_nan = jnp.asarray(-jnp.nan, p.dtype)
    special = jnp.where(opposed, default_nan, jnp.where(jnp.isinf(p), p, signed_q))
    special = jnp.where(jnp.isnan(q), q, special)
    special = jnp.where(jnp.isnan(p), p, special)
    return jnp.where(jnp.isfinite(p) & jnp.isfinite(q), fused, special)


def div(a, b):
    if not _is_complex(a, b):
        return jnp.true_divide(a, b)
    a, b = jnp.broadcast_arrays(a, b)
    (x, y), (c, d) = _parts(a), _parts(b)
    ac, ad = jnp.abs(c), jnp.abs(d)
    first, zero = ac >= ad, (ac == 0) & (ad == 0)
    # (each branch reads safe stand-ins where it is not taken: its gradient there is 0, not NaN)
    # NOTE: eager multiplies by 1 / den, subnormal for |den| > 1 / the least normal float;
    # XLA's CPU flushes it to 0 ((1 + 3e38i) / 3e38i was 0): each part divides instead.
    one, nil = jnp.ones_like(c), jnp.zeros_like(c)
    # |c| >= |d|: scaled by c (or, both zero, each part divided by zero)
    c1, d1 = jnp.where(first & ~zero, c, one), jnp.where(first & ~zero, d, nil)
    rat = d1 / c1
    den = c1 + d1 * rat
    re1, im1 = (x + y * rat) / den, (y - x * rat) / den
    re1 = jnp.where(zero, x / jnp.where(zero, ac, one), re1)
    im1 = jnp.where(zero, y / jnp.where(zero, ad, one), im1)
    # |c| < |d| (or a NaN part): scaled by d
    c2, d2 = jnp.where(first, nil, c), jnp.where(first, one, d)
    rat = c2 / d2
    den = d2 + c2 * rat
    re2, im2 = (x * rat + y) / den, (y * rat - x) / den
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
    return sqrt_(z) if _is_complex(z) else real(z)


def _sqrt(z):
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


def real_exp(x):
    """``jnp.exp`` of a real array whose overflow is an explicit inf.

    # NOTE: XLA's CPU float32 exp is 2^n * p(r) with n clamped; fused with a following add or
    # subtract, LLVM contracts that product into a fused multiply-add, so an overflowing exp
    # is never inf there: exp(inf) - 0.5 * inf was -inf (eager: NaN) and exp(3e38) - 3e38
    # 6.8e37 (eager: inf, F.poisson_nll_loss at a large input). A select is not contracted.
    """
    if x.dtype != jnp.float32:
        return jnp.exp(x)
    return _f32_exp(x)


@jax.custom_jvp
def _f32_exp(x):
    y = jnp.exp(x)
    return jnp.where(x > jnp.float32(88.72283172607422), jnp.asarray(jnp.inf, x.dtype), y)


@_f32_exp.defjvp
def _f32_exp_jvp(primals, tangents):
    # exp's derivative is its value (the select's own would be 0 past the overflow)
    y = _f32_exp(primals[0])
    return y, y * tangents[0]


def exp(z, real=real_exp):
    return exp_(z) if _is_complex(z) else real(z)


def _exp(z):
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
    return tanh_(z) if _is_complex(z) else real(z)


def _tanh(z):
    x, y = _parts(z)
    # (complex64 through complex128: XLA's complex64 tanh is ~6 ulp off near its poles)
    w = jnp.tanh(lax.complex(_wide(x), _wide(y))).astype(z.dtype)
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


def _two_times(z):
    return mul(lax.complex(jnp.full_like(jnp.real(z), 2), jnp.zeros_like(jnp.real(z))), z)


# eager's derivatives (derivatives.yaml: exp's result, sqrt's 1 / (2 result), tanh's
# 1 - result^2, pow's exponent * z^(exponent - 1)), not the chain rule through the selects
exp_ = _holomorphic(_exp, lambda z, w: w)
sqrt_ = _holomorphic(_sqrt, lambda z, w: reciprocal(_two_times(w)))
tanh_ = _holomorphic(_tanh, lambda z, w: _shift(lax.neg(_rounded_mul(w, w)), 1))
_square = _holomorphic(lambda z: _rounded_mul(z, z), lambda z, w: _two_times(z))


def _times_square(z):
    three = lax.complex(jnp.full_like(jnp.real(z), 3), jnp.zeros_like(jnp.real(z)))
    return mul(three, _rounded_mul(z, z))


_cube = _holomorphic(lambda z: _rounded_mul(_rounded_mul(z, z), z), lambda z, w: _times_square(z))


# pow(z, exponent) where eager's kernel computes it otherwise than as std::pow
POWERS = {
    0.0: lambda z: jnp.ones_like(z),
    1.0: lambda z: z,
    0.5: sqrt,
    2.0: _square,
    3.0: _cube,
    -0.5: rsqrt,
    -1.0: reciprocal,
    -2.0: lambda z: reciprocal(_square(z)),
}


def _expm1(z):
    x, y = _parts(z)
    wx, wy = _wide(x), _wide(y)  # (each factor rounded to the dtype, overflowing as eager's)
    em, e = jnp.expm1(wx).astype(x.dtype), jnp.exp(wx).astype(x.dtype)
    c, s = jnp.cos(wy).astype(x.dtype), jnp.sin(wy).astype(x.dtype)
    h = jnp.sin(wy / 2).astype(x.dtype)
    return lax.complex(em * c - 2 * h * h, e * s)


def _log1p(z):
    x, y = _parts(z)
    one = jnp.ones_like(x)
    # (opaque: XLA folds (x + 1) - 1 to x, which eager's rounding of x + 1 keeps apart)
    u = lax.optimization_barrier(lax.complex(x + 1, y))
    um1 = lax.complex(jnp.real(u) - 1, y)
    log_u = log(u)
    same = (jnp.real(um1) == x) & ~jnp.isnan(y)  # (u - 1 == z; NaN parts compare unequal)
    exact = (jnp.real(u) == 1) & (y == 0)
    safe = jnp.where(same | exact, lax.complex(one, one), um1)
    scaled = mul(log_u, div(z, safe))
    return jnp.where(exact, z, jnp.where(same, log_u, scaled))


def _exp2(z):
    x, y = _parts(z)
    ln2 = jnp.asarray(math.log(2), x.dtype)
    return _exp(lax.complex(x * ln2, y * ln2))


_LN2 = math.log(2)
expm1_ = _holomorphic(_expm1, lambda z, w: _shift(w, 1))
log1p_ = _holomorphic(_log1p, lambda z, w: reciprocal(_shift(z, 1)))
exp2_ = _holomorphic(
    _exp2, lambda z, w: mul(w, lax.complex(_LN2 + 0 * jnp.real(w), 0 * jnp.real(w)))
)


def expm1(z, real=jnp.expm1):
    return expm1_(z) if _is_complex(z) else real(z)


def log1p(z, real=jnp.log1p):
    return log1p_(z) if _is_complex(z) else real(z)


def exp2(z, real):
    return exp2_(z) if _is_complex(z) else real(z)


def pow_(z, w):
    """z ** w for a general exponent: exp(w log z), as glibc's cpow (its product is C's)."""
    z, w = jnp.broadcast_arrays(z, w)
    return _pow(z, w)


def _pow_value(z, w):
    return _exp(_c_mul(w, log(z)))


@jax.custom_jvp
def _pow(z, w):
    return _pow_value(z, w)


@_pow.defjvp
def _pow_jvp(primals, tangents):
    # eager's pow_backward_self and pow_backward_exponent: w z^(w - 1), 0 where w is 0;
    # z^w log z, 0 where z is 0 and Re w >= 0
    # (through ``_pow`` itself, not its value: a second derivative differentiates this rule,
    # and ``_c_mul``'s recovered infinities would give it NaN)
    (z, w), (tz, tw) = primals, tangents
    out = _pow(z, w)
    zero = jnp.zeros_like(z)
    dz = jnp.where(w == 0, zero, mul(w, _pow(z, _shift(w, -1))))
    dw = jnp.where((z == 0) & (jnp.real(w) >= 0), zero, mul(out, log(z)))
    return out, _linear_mul(tz, dz) + _linear_mul(tw, dw)


def _c_mul(a, b):
    """a * b as C's complex product (C99 Annex G): where both parts are NaN but an operand
    or a product was infinite, the infinity is recovered ((0.5 + i)(inf + NaN i) is
    inf + inf i, not NaN + NaN i)."""
    (x, y), (u, v) = _parts(a), _parts(b)
    p, q, r, s = x * u, y * v, x * v, y * u
    re, im = _difference(p, q), _sum(r, s)
    zero, one = jnp.zeros_like(x), jnp.ones_like(x)

    def box(t):  # an infinity to +-1, a finite part to +-0
        return jnp.copysign(jnp.where(jnp.isinf(t), one, zero), t)

    def unnan(t):
        return jnp.where(jnp.isnan(t), jnp.copysign(zero, t), t)

    inf_a, inf_b = jnp.isinf(x) | jnp.isinf(y), jnp.isinf(u) | jnp.isinf(v)
    x, y = jnp.where(inf_a, box(x), x), jnp.where(inf_a, box(y), y)
    u, v = jnp.where(inf_a, unnan(u), u), jnp.where(inf_a, unnan(v), v)
    u, v = jnp.where(inf_b, box(u), u), jnp.where(inf_b, box(v), v)
    x, y = jnp.where(inf_b, unnan(x), x), jnp.where(inf_b, unnan(y), y)
    big = ~(inf_a | inf_b) & (jnp.isinf(p) | jnp.isinf(q) | jnp.isinf(r) | jnp.isinf(s))
    x, y, u, v = (jnp.where(big, unnan(t), t) for t in (x, y, u, v))
    inf = jnp.asarray(jnp.inf, x.dtype)
    recover = jnp.isnan(re) & jnp.isnan(im) & (inf_a | inf_b | big)
    re = jnp.where(recover, inf * (x * u - y * v), re)
    im = jnp.where(recover, inf * (x * v + y * u), im)
    return lax.complex(re, im)
