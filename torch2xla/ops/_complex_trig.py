"""Complex trigonometric and hyperbolic functions and their inverses with eager's special values.

Eager's CPU kernels call ``std::sin`` & co. on ``std::complex`` (glibc's ``csin``... which follow
C99 Annex G for infinities, NaN and signed zeros); XLA's complex ops give NaN for most
non-finite parts and lose zeros' signs (``sin(-0 + 1i)`` was ``+0 + 1.18i``, ``atan(-0 + inf i)`` was ``+pi/2``). Each function takes
its operand in the computation dtype and defers to ``real`` where it is not complex; each has
eager's derivative (its backward formula, ``_holomorphic``), so the special values' selects
never leak NaN into gradients.

# NOTE: what eager gives (``x + iy`` the argument):
# - ``sinh``/``cosh`` compute sinh(x)cos(y) + i cosh(x)sin(y) (cosh(x)cos(y) + i sinh(x)sin(y))
#   without intermediate overflow; a zero y keeps its sign (times x's sign for cosh); from
#   x = +-0 with y infinite or NaN: +-0 + NaN i (sinh), NaN + 0i (cosh); from x = +-inf with y
#   infinite or NaN: inf + NaN i; ``sin(z)`` is -i sinh(iz), ``cos(z)`` cosh(iz), ``tan(z)``
#   -i tanh(iz) (each as a swap of parts, which keeps zeros' signs; csin's imaginary part is
#   +inf where y is infinite and x not finite);
# - ``asinh``/``atanh`` are odd in each part: computed in the first quadrant, each part then
#   takes the sign of its argument's part; ``asin(z)`` is -i asinh(iz), ``atan(z)`` -i atanh(iz);
#   ``acos(conj z)`` is conj(acos z), ``acosh(z)`` is |Im acos(z')| + i Re acos(z') (z' in the
#   upper half plane) with the imaginary part's sign from y; complex128's acos of a real in
#   [-1, 1] has a +0 imaginary part whatever y's sign (glibc's cacos; cacosf keeps -y's).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

from torch2xla.ops._complex import (
    _holomorphic,
    _is_complex,
    _shift,
    _wide,
    mul,
    reciprocal,
    rsqrt,
    tanh_,
)

_PI = math.pi


def _parts(z):
    return jnp.real(z), jnp.imag(z)


def _times_cosh_sinh(x, c, s):
    """cosh(x) * c and sinh(x) * s for real x, without overflow before the products'."""
    a = jnp.abs(x)
    big = a > 20
    small = jnp.where(big, jnp.zeros_like(a), a)
    em = jnp.expm1(small)
    ch = 1 + em * em / (2 * (em + 1))
    sh = (em + em / (em + 1)) / 2
    half = jnp.exp(jnp.where(big, a, jnp.zeros_like(a)) / 2)  # e^|x| / 2 = (half / 2) half
    ch = jnp.where(big, ((half * 0.5) * c) * half, ch * c)
    sh = jnp.where(big, ((half * 0.5) * s) * half, sh * s)
    return ch, jnp.copysign(jnp.ones_like(x), x) * sh


def _sinh_parts(x, y):
    """The parts of sinh(x + iy) (csinh), in x's dtype."""
    inf, nan = jnp.asarray(jnp.inf, x.dtype), jnp.asarray(jnp.nan, x.dtype)
    wx, wy = _wide(x), _wide(y)
    im, re = _times_cosh_sinh(wx, jnp.sin(wy), jnp.cos(wy))
    re, im = re.astype(x.dtype), im.astype(x.dtype)
    im = jnp.where(y == 0, y, im)
    bad_y = ~jnp.isfinite(y)
    re = jnp.where(bad_y & (x == 0), x, re)
    re = jnp.where(bad_y & jnp.isinf(x), inf, re)
    im = jnp.where(bad_y, nan, im)
    return re, im


def _cosh_parts(x, y):
    """The parts of cosh(x + iy) (ccosh), in x's dtype."""
    inf, nan = jnp.asarray(jnp.inf, x.dtype), jnp.asarray(jnp.nan, x.dtype)
    wx, wy = _wide(x), _wide(y)
    re, im = _times_cosh_sinh(wx, jnp.cos(wy), jnp.sin(wy))
    re, im = re.astype(x.dtype), im.astype(x.dtype)
    im = jnp.where(y == 0, jnp.where(jnp.isnan(x), y, jnp.copysign(jnp.zeros_like(x), x) * y), im)
    bad_y = ~jnp.isfinite(y)
    re = jnp.where(bad_y & jnp.isinf(x), inf, re)
    im = jnp.where(bad_y, jnp.where(x == 0, jnp.zeros_like(x), nan), im)
    return re, im


def _sinh(z):
    return lax.complex(*_sinh_parts(*_parts(z)))


def _cosh(z):
    return lax.complex(*_cosh_parts(*_parts(z)))


def _sin(z):
    x, y = _parts(z)
    re, im = _sinh_parts(-y, x)
    # (csin's imaginary part is +inf where y is infinite and x not finite, whatever y's sign)
    im_out = jnp.where(jnp.isinf(y) & ~jnp.isfinite(x), jnp.asarray(jnp.inf, x.dtype), -re)
    return lax.complex(im, im_out)


def _cos(z):
    x, y = _parts(z)
    return lax.complex(*_cosh_parts(-y, x))


def _neg(z):
    x, y = _parts(z)
    return lax.complex(-x, -y)


sinh_ = _holomorphic(_sinh, lambda z, w: _cosh(z))
cosh_ = _holomorphic(_cosh, lambda z, w: _sinh(z))
sin_ = _holomorphic(_sin, lambda z, w: _cos(z))
cos_ = _holomorphic(_cos, lambda z, w: _neg(_sin(z)))


def sinh(z, real):
    return sinh_(z) if _is_complex(z) else real(z)


def cosh(z, real):
    return cosh_(z) if _is_complex(z) else real(z)


def sin(z, real=jnp.sin):
    return sin_(z) if _is_complex(z) else real(z)


def cos(z, real=jnp.cos):
    return cos_(z) if _is_complex(z) else real(z)


def _tan(z):
    x, y = _parts(z)
    w = tanh_(lax.complex(_wide(-y), _wide(x)))  # (XLA's complex64 tanh: ~6 ulp off near poles)
    return lax.complex(jnp.imag(w).astype(x.dtype), (-jnp.real(w)).astype(x.dtype))


def _xla_wide(fn, x, y):
    """The parts of XLA's complex ``fn(x + iy)``, complex64 computed in complex128 (XLA's
    complex64 inverse functions underflow: acos(1 + 2e-38i) had no imaginary part)."""
    w = fn(lax.complex(_wide(x), _wide(y)))
    return jnp.real(w).astype(x.dtype), jnp.imag(w).astype(x.dtype)


def _consts(x):
    def c(v):
        return jnp.full_like(x, v)

    return c


def _asinh_parts(x, y):
    """The parts of asinh(x + iy) (casinh): odd in each part, from the first quadrant."""
    c = _consts(x)
    ax, ay = jnp.abs(x), jnp.abs(y)
    re, im = _xla_wide(jnp.arcsinh, ax, ay)
    inf_x, inf_y, nan_x, nan_y = jnp.isinf(ax), jnp.isinf(ay), jnp.isnan(ax), jnp.isnan(ay)
    re = jnp.where(inf_x | inf_y, c(jnp.inf), re)
    im = jnp.where(
        inf_y, jnp.where(inf_x, c(_PI / 4), jnp.where(nan_x, c(jnp.nan), c(_PI / 2))), im
    )
    im = jnp.where(inf_x & ~inf_y, jnp.where(nan_y, c(jnp.nan), c(0)), im)
    nan = (nan_x | nan_y) & ~(inf_x | inf_y)
    re = jnp.where(nan, c(jnp.nan), re)
    im = jnp.where(nan, jnp.where(nan_x & (ay == 0), c(0), c(jnp.nan)), im)
    return jnp.copysign(re, x), jnp.copysign(im, y)


def _atanh_parts(x, y):
    """The parts of atanh(x + iy) (catanh): odd in each part, from the first quadrant."""
    c = _consts(x)
    ax, ay = jnp.abs(x), jnp.abs(y)
    re, im = _xla_wide(jnp.arctanh, ax, ay)
    # (XLA's underflows to inf at 1 + tiny i: 1/2 log(|1 + z| / |1 - z|) where |1 - z| is small)
    near = jnp.hypot(1 - ax, ay)
    safe = jnp.where(near < 0.5, near, jnp.ones_like(near))
    re = jnp.where(near < 0.5, (jnp.log(jnp.hypot(1 + ax, ay)) - jnp.log(safe)) / 2, re)
    inf = jnp.isinf(ax) | jnp.isinf(ay)
    re = jnp.where(inf, c(0), re)
    im = jnp.where(inf, jnp.where(jnp.isnan(ay), c(jnp.nan), c(_PI / 2)), im)
    nan = (jnp.isnan(ax) | jnp.isnan(ay)) & ~inf
    re = jnp.where(nan, jnp.where(ax == 0, c(0), c(jnp.nan)), re)
    im = jnp.where(nan, c(jnp.nan), im)
    return jnp.copysign(re, x), jnp.copysign(im, y)


def _acos_upper(x, ay):
    """The parts of acos(x + i ay), ay >= 0 (or NaN): the imaginary part <= 0."""
    c = _consts(x)
    re, im = _xla_wide(jnp.arccos, x, ay)
    inf_x, inf_y = jnp.isinf(x), jnp.isinf(ay)
    edge = jnp.where(x > 0, c(0), c(_PI))
    re = jnp.where(inf_y, jnp.where(inf_x, (c(_PI / 2) + edge) / 2, c(_PI / 2)), re)
    re = jnp.where(inf_y & jnp.isnan(x), c(jnp.nan), re)
    re = jnp.where(inf_x & ~inf_y, jnp.where(jnp.isnan(ay), c(jnp.nan), edge), re)
    im = jnp.where(inf_x | inf_y, c(-jnp.inf), im)
    nan = (jnp.isnan(x) | jnp.isnan(ay)) & ~(inf_x | inf_y)
    re = jnp.where(nan, jnp.where(x == 0, c(_PI / 2), c(jnp.nan)), re)
    im = jnp.where(nan, c(jnp.nan), im)
    return re, im


def _asinh(z):
    return lax.complex(*_asinh_parts(*_parts(z)))


def _atanh(z):
    return lax.complex(*_atanh_parts(*_parts(z)))


def _asin(z):
    x, y = _parts(z)
    re, im = _asinh_parts(-y, x)
    return lax.complex(im, -re)


def _atan(z):
    x, y = _parts(z)
    re, im = _atanh_parts(-y, x)
    return lax.complex(im, -re)


def _acos(z):
    x, y = _parts(z)
    re, im = _acos_upper(x, jnp.abs(y))
    im = jnp.copysign(jnp.abs(im), -y)
    if x.dtype == jnp.float64:  # (glibc's cacos, not cacosf: a zero imaginary part is +0)
        im = jnp.where(im == 0, jnp.zeros_like(im), im)
    return lax.complex(re, im)


def _acosh(z):
    x, y = _parts(z)
    re, im = _acos_upper(x, jnp.abs(y))
    return lax.complex(jnp.abs(im), jnp.copysign(re, y))


# eager's backward formulas (derivatives.yaml), the derivative the gradient's conjugate multiplies
tan_ = _holomorphic(_tan, lambda z, w: _shift(mul(w, w), 1))
asinh_ = _holomorphic(_asinh, lambda z, w: rsqrt(_shift(mul(z, z), 1)))
acosh_ = _holomorphic(_acosh, lambda z, w: mul(rsqrt(_shift(z, 1)), rsqrt(_shift(z, -1))))
atanh_ = _holomorphic(_atanh, lambda z, w: reciprocal(_shift(_neg(mul(z, z)), 1)))
asin_ = _holomorphic(_asin, lambda z, w: rsqrt(_shift(mul(_neg(z), z), 1)))
acos_ = _holomorphic(_acos, lambda z, w: _neg(rsqrt(_shift(mul(_neg(z), z), 1))))
atan_ = _holomorphic(_atan, lambda z, w: reciprocal(_shift(mul(z, z), 1)))


def _unary(fn, real):
    def lowering(z):
        return fn(z) if _is_complex(z) else real(z)

    return lowering


tan = _unary(tan_, jnp.tan)
asin = _unary(asin_, jnp.arcsin)
acos = _unary(acos_, jnp.arccos)
atan = _unary(atan_, jnp.arctan)
asinh = _unary(asinh_, jnp.arcsinh)
acosh = _unary(acosh_, jnp.arccosh)
atanh = _unary(atanh_, jnp.arctanh)
