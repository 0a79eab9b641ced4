"""Special functions (``torch.special``), integer number theory, float decomposition and
complex-number views."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla.ops._binary_math import _atan2
from torch2xla.ops._common import Kind, as_dtype, out_dtype, promote
from torch2xla.ops._elementwise import WIDE_EXP2, _pointwise, _wide
from torch2xla.ops._powers_of_two import exact_exp2, times_power_of_two
from torch2xla.ops._registry import register

aten = ops.aten


def _f64(fn):
    """``fn`` evaluated in float64 (more accurate than torch's float32 kernels), then cast."""

    def wrapped(*xs):
        dtype = xs[0].dtype
        return fn(*(x.astype(jnp.float64) for x in xs)).astype(dtype)

    return wrapped


def _cot_derivative_poly(n: int) -> np.ndarray:
    """Coefficients (lowest degree first) of P_n with d^n/dy^n cot(y) = P_n(cot(y)), from
    P_0(c) = c and P_{k+1}(c) = -(1 + c^2) P_k'(c)."""
    p = np.array([0.0, 1.0])
    for _ in range(n):
        dp = np.polynomial.polynomial.polyder(p)
        p = -np.polynomial.polynomial.polymul([1.0, 0.0, 1.0], dp)
    return p


def _polygamma_reflected(n: int, x):
    """psi^(n)(x) for x < 1/2 from (-1)^n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x)."""
    c = 1 / jnp.tan(np.pi * x)
    cot_n = jnp.polyval(jnp.asarray(_cot_derivative_poly(n)[::-1], x.dtype), c) * np.pi**n
    return (-1) ** n * jsp.polygamma(n, 1 - x) - np.pi * cot_n


@jax.custom_jvp
def _digamma(x):
    # NOTE: torch gives digamma(+-0) = -+inf; jax.scipy gives NaN. XLA's float32 digamma is
    # up to 45 ulp off (digamma(2) 7 ulp): computed in float64.
    wide = x.astype(jnp.float64) if x.dtype == jnp.float32 else x
    value = jsp.digamma(wide).astype(x.dtype)
    return jnp.where(x == 0, jnp.copysign(jnp.inf, -x), value)


@_digamma.defjvp
def _digamma_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _digamma(x), _polygamma(1, x) * t


def _polygamma(n: int, x):
    """torch.polygamma: jax.scipy's is only right for x > 0 when n >= 1 (it is built on the
    Hurwitz zeta), so negative arguments go through the reflection formula."""
    if n == 0:
        return _digamma(x)
    if n == 1:
        return _trigamma(x)
    return _polygamma_n(n, x)


def _trigamma_value(x):
    """Eager's own trigamma (``calc_trigamma`` in ATen's Math.h), step by step in ``x``'s
    dtype: the reflection ``pi^2 / sin(pi x)^2`` below 1/2, six terms of the series, then the
    asymptotic tail, whose coefficients are C++ double literals (so the tail of a float is
    computed in double). Its values at the poles (finite: ``sin`` of the rounded ``pi x`` is
    not 0), at +-inf (0, NaN) and beyond float32's integers are eager's; jax.scipy's polygamma
    gives inf, NaN, inf there and loses float32 values below ~1e-30 to underflow."""
    dtype = x.dtype
    pi = jnp.asarray(np.pi, dtype)
    reflect = x < 0.5
    s = jnp.sin(pi * x)
    result = jnp.where(reflect, -((pi * pi) / (s * s)), jnp.zeros((), dtype))
    y = jnp.where(reflect, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (y * y)
        y = y + 1
    ixx = 1 / (y * y)
    wide = jnp.promote_types(dtype, jnp.float64)
    tail = (1 + 1 / (2 * y)).astype(wide) + ixx.astype(wide) * (
        1.0 / 6 - ixx.astype(wide) * (1.0 / 30 - ixx.astype(wide) * (1.0 / 42))
    )
    result = (result.astype(wide) + tail / y.astype(wide)).astype(dtype)
    return jnp.where(reflect, -result, result)


@jax.custom_jvp
def _trigamma(x):
    if x.dtype in (jnp.float16, jnp.bfloat16):  # (eager computes in float32, rounds once)
        return _trigamma_value(x.astype(jnp.float32)).astype(x.dtype)
    return _trigamma_value(x)


@_trigamma.defjvp
def _trigamma_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    # (the reflection formula cancels badly in float32: evaluated in float64, as polygamma)
    return _trigamma(x), _f64(lambda y: _polygamma_n(2, y))(x) * t


def _polygamma_n(n: int, x):
    reflect = x < 0.5
    safe = jnp.where(reflect, jnp.where(x == jnp.floor(x), 0.25, x), 1.0)
    # At the poles 0, -1, -2, ... torch gives (-1)^(n+1) inf.
    pole = jnp.asarray(np.inf if n % 2 == 1 else -np.inf, x.dtype)
    low = jnp.where(x == jnp.floor(x), pole, _polygamma_reflected(n, safe))
    high = jsp.polygamma(n, jnp.where(reflect, 1.0, x))
    return jnp.where(reflect, low, high)


_polygamma_n = jax.custom_jvp(_polygamma_n, nondiff_argnums=(0,))


@_polygamma_n.defjvp
def _polygamma_n_jvp(n, primals, tangents):
    (x,), (t,) = primals, tangents
    return _polygamma_n(n, x), _polygamma_n(n + 1, x) * t


register(aten.digamma.default)(_pointwise(_digamma, Kind.INT_TO_FLOAT))


@jax.custom_jvp
def _lgamma(x):
    return _wide(jsp.gammaln)(x)


@_lgamma.defjvp
def _lgamma_jvp(primals, tangents):
    # eager's derivative is its digamma: -+inf at +-0, where JAX's (its own digamma) is NaN
    (x,), (t,) = primals, tangents
    return _lgamma(x), _digamma(x) * t


register(aten.lgamma.default)(_pointwise(_lgamma, Kind.INT_TO_FLOAT))


@register(aten.polygamma.default)
def polygamma(n, self):
    if n == 0:
        return _pointwise(_digamma, Kind.INT_TO_FLOAT)(self)
    if n == 1:
        return _pointwise(_trigamma, Kind.INT_TO_FLOAT)(self)
    # The reflection formula cancels badly in float32: evaluate in float64, round once.
    return _pointwise(_f64(lambda x: _polygamma(n, x)), Kind.INT_TO_FLOAT)(self)


# NOTE: jax.scipy differentiates the modified Bessel functions through |x| (i0 = e^|x| i0e),
# which gives i0'(0) = 1; these carry torch's derivative formulas instead.
@jax.custom_jvp
def _i0(x):
    return jsp.i0(x)


@jax.custom_jvp
def _i0e(x):
    return jsp.i0e(x)


# NOTE: eager's i1 and i1e are +0.0 at -0.0 (jax.scipy's keep the sign).
@jax.custom_jvp
def _i1(x):
    return jnp.where(x == 0, jnp.zeros_like(x), jsp.i1(x))


@jax.custom_jvp
def _i1e(x):
    return jnp.where(x == 0, jnp.zeros_like(x), jsp.i1e(x))


_i0.defjvp(lambda p, t: (_i0(p[0]), _i1(p[0]) * t[0]))
_i0e.defjvp(lambda p, t: (_i0e(p[0]), (_i1e(p[0]) - jnp.sign(p[0]) * _i0e(p[0])) * t[0]))


def _bessel1_jvp(fn, scaled: bool):
    """eager's ``i1_backward`` / ``i1e_backward``: 1/2 where ``|x| <= eps`` (NaN too: the
    comparison is false), else the derivative at ``x`` (``i0(x) - i1(x) * (1 / x)``; the
    scaled one's ``i0e(x) - i1e(x) * (sgn(x) + 1 / x)``)."""

    def jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = fn(x)
        eps = jnp.finfo(x.dtype).eps
        big = jnp.abs(x) > eps
        safe = jnp.where(big, x, eps)
        if scaled:
            d = _i0e(safe) - out * (jnp.sign(safe) + 1 / safe)
        else:
            d = _i0(safe) - out * (1 / safe)
        return out, t * jnp.where(big, d, 0.5).astype(x.dtype)

    return jvp


_i1.defjvp(_bessel1_jvp(_i1, scaled=False))
_i1e.defjvp(_bessel1_jvp(_i1e, scaled=True))


@jax.custom_jvp
def _ndtri(x):
    return jsp.ndtri(x)


@_ndtri.defjvp
def _ndtri_jvp(primals, tangents):
    # eager's formula: grad * sqrt(2 pi) * exp(result ** 2 / 2), +-inf at 0 and 1 (JAX's
    # derivative is 0 there), NaN outside [0, 1]. (the tangent times the exponential first:
    # its transpose multiplies the gradient by sqrt(2 pi) first, as eager)
    (x,), (t,) = primals, tangents
    out = _ndtri(x)
    return out, t * jnp.exp(out * out / 2) * np.asarray(math.sqrt(2 * math.pi), x.dtype)


for _op, _fn in [
    (aten.special_erfcx.default, jsp.erfcx),
    (aten.special_i0e.default, _i0e),
    (aten.special_i1.default, _i1),
    (aten.special_i1e.default, _i1e),
    (aten.i0.default, _i0),
    (aten.special_modified_bessel_i0.default, _i0),
    (aten.special_modified_bessel_i1.default, _i1),
    (aten.special_ndtri.default, _ndtri),
]:
    register(_op)(_pointwise(_fn, Kind.INT_TO_FLOAT))


def _zeta(x, q):
    # NOTE: torch (Cephes) gives inf at x == 1 and NaN for x < 1; jax.scipy gives inf there.
    return jnp.where(x == 1, jnp.inf, jnp.where(x < 1, jnp.nan, jsp.zeta(x, q)))


@register(aten.special_zeta.default, aten.special_zeta.other_scalar, aten.special_zeta.self_scalar)
def special_zeta(self, other):
    return _pointwise(_zeta, Kind.INT_TO_FLOAT)(self, other)


@jax.custom_jvp
def _log_ndtr(x):
    # NOTE: eager's formula (t = x / sqrt(2): log(erfcx(-t) / 2) - t^2 below -1, else
    # log1p(-erfc(t) / 2)); JAX's log_ndtr was 4% off at x = 5 in float32 (7% at 8 in float64).
    t = x * np.asarray(np.sqrt(0.5), x.dtype)
    low = x < -1
    tail = jnp.log(jsp.erfcx(-jnp.where(low, t, -1)) / 2) - t * t
    return jnp.where(low, tail, jnp.log1p(-jsp.erfc(jnp.where(low, 0, t)) / 2))


@_log_ndtr.defjvp
def _log_ndtr_jvp(primals, tangents):
    # d/dx log(Phi(x)) = phi(x) / Phi(x). Above -1 as eager evaluates it, exp(-x^2/2 - log
    # Phi(x)) / sqrt(2 pi); below, where that difference of two large numbers cancels (eager's
    # float32 gradient is 4% off at x = -1000, 5.5x at -1e4, 0 at -1e10, NaN at -1e30), as
    # sqrt(2 / pi) / erfcx(-x / sqrt(2)), which has no cancellation (within 1e-7 of the exact
    # value). -inf gives NaN, as eager's (inf - inf).
    (x,), (t,) = primals, tangents
    y = _log_ndtr(x)
    head = jnp.exp(-0.5 * x * x - y) / float(np.sqrt(2 * np.pi))
    low = x < -1
    tail = float(np.sqrt(2 / np.pi)) / jsp.erfcx(-jnp.where(low, x, -2) * float(np.sqrt(0.5)))
    d = jnp.where(x == -jnp.inf, jnp.nan, jnp.where(low, tail, head))
    return y, d * t


register(aten.special_log_ndtr.default)(_pointwise(_log_ndtr, Kind.INT_TO_FLOAT))


register(aten.igamma.default)(_pointwise(jsp.gammainc, Kind.INT_TO_FLOAT))
register(aten.igammac.default)(_pointwise(jsp.gammaincc, Kind.INT_TO_FLOAT))


@register(aten.special_spherical_bessel_j0.default)
def special_spherical_bessel_j0(x):
    def j0(v):
        safe = jnp.where((v == 0) | jnp.isinf(v), 1, v)
        # torch: 1 at 0 and 0 at the infinities (sin(inf) / inf is NaN)
        return jnp.where(v == 0, 1, jnp.where(jnp.isinf(v), 0, jnp.sin(safe) / safe))

    return _pointwise(j0, Kind.INT_TO_FLOAT)(x)


# -- Bessel functions by quadrature ----------------------------------------------------------
def _trapezoid_nodes(t_max: float, n: int):
    t = np.linspace(0.0, t_max, n + 1)
    w = np.full(n + 1, t_max / n)
    w[0] = w[-1] = t_max / (2 * n)
    return t, w


# NOTE: J_n(x) = (1/pi) int_0^pi cos(n t - x sin t) dt has a smooth periodic integrand, so the
# trapezoid rule converges geometrically once the node count exceeds e|x|/2 (256 nodes reach
# float64 rounding up to |x| = 100); beyond, the Hankel asymptotic expansion is as accurate.
_J_T, _J_W = _trapezoid_nodes(np.pi, 256)
_J_SWITCH = 100.0


def _bessel_j(order: int, x):
    t = jnp.asarray(_J_T)
    small = jnp.sum(jnp.cos(order * t - x[..., None] * jnp.sin(t)) * _J_W, axis=-1) / np.pi
    ax = jnp.maximum(jnp.abs(x), 1.0)
    mu = 4.0 * order * order
    # Hankel expansion to four terms: J = sqrt(2/(pi x)) (P cos(w) - Q sin(w)).
    z8 = 8.0 * ax
    p = (
        1
        - (mu - 1) * (mu - 9) / (2 * z8**2)
        + (mu - 1) * (mu - 9) * (mu - 25) * (mu - 49) / (24 * z8**4)
    )
    q = (mu - 1) / z8 - (mu - 1) * (mu - 9) * (mu - 25) / (6 * z8**3)
    w = ax - (0.5 * order + 0.25) * np.pi
    large = jnp.sqrt(2 / (np.pi * ax)) * (p * jnp.cos(w) - q * jnp.sin(w))
    large = large * (jnp.sign(x) ** order)
    return jnp.where(jnp.abs(x) <= _J_SWITCH, small, large)


register(aten.special_bessel_j0.default)(
    _pointwise(_f64(lambda x: _bessel_j(0, x)), Kind.INT_TO_FLOAT)
)
register(aten.special_bessel_j1.default)(
    _pointwise(_f64(lambda x: _bessel_j(1, x)), Kind.INT_TO_FLOAT)
)


def _gauss_legendre(lo: float, hi: float, panels: int, n: int):
    """Nodes and weights of composite Gauss-Legendre quadrature on [lo, hi]."""
    x, w = np.polynomial.legendre.leggauss(n)
    edges = np.linspace(lo, hi, panels + 1)
    nodes = np.concatenate([(x + 1) / 2 * (b - a) + a for a, b in itertools.pairwise(edges)])
    weights = np.concatenate([w * (b - a) / 2 for a, b in itertools.pairwise(edges)])
    return nodes, weights


# NOTE: for x > 0, Y_n(x) = (1/pi) int_0^pi sin(x sin t - n t) dt
#   - (1/pi) int_0^inf (e^{nt} + (-1)^n e^{-nt}) e^{-x sinh t} dt.
# Both integrands are smooth and the second decays double-exponentially: Gauss-Legendre
# quadrature reaches float64 rounding for x <= 100 (checked against scipy.special.yv); beyond,
# the Hankel expansion is as accurate.
_Y_T, _Y_TW = _gauss_legendre(0.0, np.pi, 1, 256)
_Y_S, _Y_SW = _gauss_legendre(0.0, 28.0, 64, 16)


# Below this, Y_n by its power series: the second integral reaches past s = 28 for x below
# ~1e-11 (Y_0(1e-30) came out -17.8 for -44.0).
_Y_SERIES = 1e-3


def _bessel_y_series(order: int, x):
    """Y_order(x) for 0 < x <= _Y_SERIES (other x: any finite value), from the series
    Y_n(x) = (2/pi) log(x/2) J_n(x) - (1/pi) sum_k c_k(n) (x/2)^(2k+n) / (k! (k+n)!)
    (- (1/pi) (n-1)! (x/2)^-n for n = 1), c_k(n) = (-1)^k (psi(k+1) + psi(k+n+1))."""
    x = jnp.where((x > 0) & (x <= _Y_SERIES), x, _Y_SERIES)
    h = 0.5 * x
    q = -h * h
    euler = 0.57721566490153286061
    j, rest, term = jnp.zeros_like(x), jnp.zeros_like(x), h**order / math.factorial(order)
    for k in range(6):
        psi = (
            -2 * euler
            + sum(1 / i for i in range(1, k + 1))
            + sum(1 / i for i in range(1, k + order + 1))
        )
        j = j + term
        rest = rest + psi * term
        term = term * q / ((k + 1) * (k + 1 + order))
    out = (2 / np.pi) * jnp.log(h) * j - rest / np.pi
    return out - 1 / (np.pi * h) if order == 1 else out


def _bessel_y(order: int, x):
    safe = jnp.where(x > 0, x, 1.0)
    t, s = jnp.asarray(_Y_T), jnp.asarray(_Y_S)
    first = jnp.sum(jnp.sin(safe[..., None] * jnp.sin(t) - order * t) * _Y_TW, axis=-1)
    kernel = jnp.exp(order * s) + (-1) ** order * jnp.exp(-order * s)
    second = jnp.sum(kernel * jnp.exp(-safe[..., None] * jnp.sinh(s)) * _Y_SW, axis=-1)
    small = (first - second) / np.pi
    ax = jnp.maximum(safe, 1.0)
    mu = 4.0 * order * order
    z8 = 8.0 * ax
    p = (
        1
        - (mu - 1) * (mu - 9) / (2 * z8**2)
        + (mu - 1) * (mu - 9) * (mu - 25) * (mu - 49) / (24 * z8**4)
    )
    q = (mu - 1) / z8 - (mu - 1) * (mu - 9) * (mu - 25) / (6 * z8**3)
    w = ax - (0.5 * order + 0.25) * np.pi
    large = jnp.sqrt(2 / (np.pi * ax)) * (p * jnp.sin(w) + q * jnp.cos(w))
    out = jnp.where(safe <= _J_SWITCH, small, large)
    out = jnp.where(safe <= _Y_SERIES, _bessel_y_series(order, safe), out)
    # torch: -inf at 0, NaN below.
    return jnp.where(x > 0, out, jnp.where(x == 0, -jnp.inf, jnp.nan))


register(aten.special_bessel_y0.default)(
    _pointwise(_f64(lambda x: _bessel_y(0, x)), Kind.INT_TO_FLOAT)
)
register(aten.special_bessel_y1.default)(
    _pointwise(_f64(lambda x: _bessel_y(1, x)), Kind.INT_TO_FLOAT)
)


# -- the Airy function ---------------------------------------------------------------------------
_A_S, _A_SW = _gauss_legendre(0.0, 32.0, 64, 16)


def _hankel(nu: float, z):
    """J_nu(z) for large z > 0 from the Hankel expansion (four terms)."""
    mu = 4.0 * nu * nu
    z8 = 8.0 * z
    p = (
        1
        - (mu - 1) * (mu - 9) / (2 * z8**2)
        + (mu - 1) * (mu - 9) * (mu - 25) * (mu - 49) / (24 * z8**4)
    )
    q = (mu - 1) / z8 - (mu - 1) * (mu - 9) * (mu - 25) / (6 * z8**3)
    w = z - (0.5 * nu + 0.25) * np.pi
    return jnp.sqrt(2 / (np.pi * z)) * (p * jnp.cos(w) - q * jnp.sin(w))


def _bessel_j_nu(nu: float, z):
    """J_nu(z) for real order nu and z > 0: (1/pi) int_0^pi cos(nu t - z sin t) dt
    - (sin(nu pi)/pi) int_0^inf e^{-z sinh s - nu s} ds, by Gauss-Legendre quadrature."""
    t, s = jnp.asarray(_Y_T), jnp.asarray(_A_S)
    first = jnp.sum(jnp.cos(nu * t - z[..., None] * jnp.sin(t)) * _Y_TW, axis=-1) / np.pi
    second = jnp.sum(jnp.exp(-z[..., None] * jnp.sinh(s) - nu * s) * _A_SW, axis=-1)
    small = first - np.sin(nu * np.pi) / np.pi * second
    return jnp.where(z <= _J_SWITCH, small, _hankel(nu, jnp.maximum(z, 1.0)))


def _airy_ai(x):
    # NOTE: Ai(x) = (1/pi) sqrt(x/3) K_{1/3}(z) for x > 0 and
    # Ai(-y) = (sqrt(y)/3) (J_{1/3}(z) + J_{-1/3}(z)) for y > 0, with z = (2/3) |x|^{3/2}.
    pos = x > 0
    y = jnp.where(pos, x, -x)
    y = jnp.where(y > 0, y, 1.0)
    z = (2.0 / 3.0) * y**1.5
    s = jnp.asarray(_A_S)
    k_scaled = jnp.sum(
        jnp.exp(-z[..., None] * (jnp.cosh(s) - 1)) * jnp.cosh(s / 3) * _A_SW, axis=-1
    )
    right = jnp.sqrt(y / 3) * k_scaled * jnp.exp(-z) / np.pi
    left = jnp.sqrt(y) / 3 * (_bessel_j_nu(1 / 3, z) + _bessel_j_nu(-1 / 3, z))
    out = jnp.where(pos, right, left)
    # NOTE: near 0 the integral of K_1/3 reaches past s = 32 (Ai(1e-30) came out 1e-11, not
    # Ai(0)): |x| <= 1 takes the Maclaurin series Ai(x) = Ai(0) f(x) + Ai'(0) g(x),
    # f = sum 3^k (1/3)_k x^3k / (3k)!, g = sum 3^k (2/3)_k x^(3k+1) / (3k+1)!.
    t = jnp.where(jnp.abs(x) <= 1, x, 0.0)
    cube = t * t * t
    f, g, tf, tg = jnp.ones_like(t), t, jnp.ones_like(t), t
    for k in range(1, 12):
        tf = tf * cube / ((3 * k - 1) * (3 * k))
        tg = tg * cube / ((3 * k) * (3 * k + 1))
        f, g = f + tf, g + tg
    series = 0.355028053887817239 * f - 0.258819403792806798 * g  # Ai(0), -Ai'(0)
    out = jnp.where(jnp.abs(x) <= 1, series, out)
    return jnp.where(jnp.isnan(x), x, out)


register(aten.special_airy_ai.default)(_pointwise(_f64(_airy_ai), Kind.INT_TO_FLOAT))

# NOTE: K_v(x) = int_0^inf exp(-x cosh t) cosh(v t) dt decays double-exponentially, so the
# trapezoid rule on [0, 20] is accurate to float64 rounding for x > 2. Below, the integrand
# reaches past t = 20 (K_0(x) ~ -log(x / 2): at x = 1e-30 the rule gave 20 for 69.2), and
# eager's Cephes series in x^2 - 2 (`_K_SMALL`) is used as eager computes it.
_K_T, _K_W = _trapezoid_nodes(20.0, 320)

# Cephes' Chebyshev coefficients of K_0(x) + log(x / 2) I_0(x) and of
# x K_1(x) - x log(x / 2) I_1(x) on (0, 2] (ATen/native/Math.h, modified_bessel_k*_forward).
_K_SMALL = {
    0: (
        1.37446543561352307156e-16,
        4.25981614279661018399e-14,
        1.03496952576338420167e-11,
        1.90451637722020886025e-09,
        2.53479107902614945675e-07,
        2.28621210311945178607e-05,
        1.26461541144692592338e-03,
        3.59799365153615016266e-02,
        3.44289899924628486886e-01,
        -5.35327393233902768720e-01,
    ),
    1: (
        -7.02386347938628759343e-18,
        -2.42744985051936593393e-15,
        -6.66690169419932900609e-13,
        -1.41148839263352776110e-10,
        -2.21338763073472585583e-08,
        -2.43340614156596823496e-06,
        -1.73028895751305206302e-04,
        -6.97572385963986435018e-03,
        -1.22611180822657148235e-01,
        -3.53155960776544875667e-01,
        1.52530022733894777053e00,
    ),
}


def _bessel_k_small(order: int, x):
    """K_order(x) for 0 < x <= 2 (other x: any finite value), as Cephes computes it."""
    x = jnp.where((x > 0) & (x <= 2), x, 1.0)
    coef = _K_SMALL[order]
    y = x * x - 2.0
    a, q, p = jnp.full_like(x, coef[0]), jnp.zeros_like(x), jnp.zeros_like(x)
    for c in coef[1:]:
        p, q = q, a
        a = y * q - p + c
    cheb = 0.5 * (a - p)
    if order == 0:
        return cheb - jnp.log(0.5 * x) * jsp.i0(x)
    return jnp.log(0.5 * x) * jsp.i1(x) + cheb / x


# Above this, exp(x) K_v(x) by its asymptotic series: the integrand's width, ~1/sqrt(x),
# falls below the trapezoid's step (at x = 1e20 the rule gave its first weight, 1/32).
_K_ASYMPTOTIC = 64.0


def _bessel_k_scaled(order: int, x):
    """exp(x) K_order(x) for x > 0; inf at 0 and NaN below, as torch."""
    t = jnp.asarray(_K_T)
    safe = jnp.where(x > 0, jnp.minimum(x, _K_ASYMPTOTIC), 1.0)
    integrand = jnp.exp(-safe[..., None] * (jnp.cosh(t) - 1)) * jnp.cosh(order * t)
    val = jnp.sum(integrand * _K_W, axis=-1)
    # exp(x) K_v(x) ~ sqrt(pi / 2x) sum_k prod_{j<=k} (4v^2 - (2j-1)^2) / (j 8x): at x >= 64
    # the ninth term is below float64 rounding for v = 0, 1.
    big = jnp.where(x > _K_ASYMPTOTIC, x, 2 * _K_ASYMPTOTIC)
    mu, term, series = 4.0 * order * order, jnp.ones_like(big), jnp.ones_like(big)
    for k in range(1, 10):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8 * big)
        series = series + term
    val = jnp.where(x > _K_ASYMPTOTIC, jnp.sqrt(np.pi / (2 * big)) * series, val)
    val = jnp.where(x <= 2, _bessel_k_small(order, x) * jnp.exp(jnp.minimum(x, 2)), val)
    return jnp.where(x > 0, val, jnp.where(x == 0, jnp.inf, jnp.nan))


register(aten.special_modified_bessel_k0.default)(
    _pointwise(_f64(lambda x: _bessel_k_scaled(0, x) * jnp.exp(-x)), Kind.INT_TO_FLOAT)
)
register(aten.special_modified_bessel_k1.default)(
    _pointwise(_f64(lambda x: _bessel_k_scaled(1, x) * jnp.exp(-x)), Kind.INT_TO_FLOAT)
)
register(aten.special_scaled_modified_bessel_k0.default)(
    _pointwise(_f64(lambda x: _bessel_k_scaled(0, x)), Kind.INT_TO_FLOAT)
)
register(aten.special_scaled_modified_bessel_k1.default)(
    _pointwise(_f64(lambda x: _bessel_k_scaled(1, x)), Kind.INT_TO_FLOAT)
)


# -- orthogonal polynomials ----------------------------------------------------------------
def _recurrence(x, n, p0, p1, step):
    """Evaluate the polynomial of degree ``n`` (elementwise) from P_0, P_1 and
    P_{k} = step(k, P_{k-1}, P_{k-2}), iterating up to the largest degree present."""
    top = jnp.max(jnp.where(n >= 2, n, 1)) if n.size else jnp.asarray(1, n.dtype)

    def body(k, carry):
        p, q = carry
        r = step(k.astype(x.dtype), q, p)
        live = k <= n
        return jnp.where(live, q, p), jnp.where(live, r, q)

    _, q = lax.fori_loop(jnp.asarray(2, n.dtype), top + 1, body, (p0, p1))
    return jnp.where(n == 0, p0, jnp.where(n == 1, p1, q))


def _degree(n, x):
    # NOTE: torch truncates a floating degree toward zero (a C cast to int64).
    n = jnp.broadcast_to(n, jnp.broadcast_shapes(jnp.shape(n), jnp.shape(x)))
    return (
        jnp.trunc(n).astype(jnp.int64)
        if jnp.issubdtype(n.dtype, jnp.inexact)
        else n.astype(jnp.int64)
    )


def _poly(fn):
    def lowering(x, n):
        compute, result = promote(Kind.INT_TO_FLOAT, x, n)
        shape = jnp.broadcast_shapes(jnp.shape(x), jnp.shape(n))
        xv = jnp.broadcast_to(as_dtype(x, compute), shape)
        return as_dtype(fn(xv, _degree(jnp.asarray(n), xv)), result)

    return lowering


def _cheb_t(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x, lambda k, q, p: (x + x) * q - p)
    big = (n > 6) & (jnp.abs(x) < 1)
    out = jnp.where(big, jnp.cos(n * jnp.arccos(x)), rec)
    edge = jnp.where((x > 0) | (n % 2 == 0), 1, -1).astype(x.dtype)
    out = jnp.where(jnp.abs(x) == 1, edge, out)
    return jnp.where(n < 0, 0, out)


def _cheb_u(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x + x, lambda k, q, p: (x + x) * q - p)
    theta = jnp.arccos(x)
    s = jnp.sin(theta)
    trig = jnp.where(
        s != 0,
        jnp.sin((n + 1) * theta) / jnp.where(s != 0, s, 1),
        (n + 1) * jnp.cos((n + 1) * theta) / x,
    )
    out = jnp.where((n > 8) & (jnp.abs(x) < 1), trig, rec)
    edge = jnp.where((x > 0) | (n % 2 == 0), n + 1, -(n + 1)).astype(x.dtype)
    out = jnp.where(jnp.abs(x) == 1, edge, out)
    return jnp.where(n < 0, 0, out)


def _cheb_v(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x + x - 1, lambda k, q, p: (x + x) * q - p)
    theta = jnp.arccos(x)
    odd_edge = jnp.where(n % 2 == 0, n + n + 1, -(n + n + 1)).astype(x.dtype)
    half = jnp.sin(theta / 2)
    trig = jnp.where(half != 1, jnp.cos((n + 0.5) * theta) / jnp.cos(theta / 2), odd_edge)
    out = jnp.where((n > 8) & (jnp.abs(x) < 1), trig, rec)
    out = jnp.where(jnp.abs(x) == 1, jnp.where(x > 0, 1, odd_edge).astype(x.dtype), out)
    return jnp.where(n < 0, 0, out)


def _cheb_w(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x + x + 1, lambda k, q, p: (x + x) * q - p)
    theta = jnp.arccos(x)
    edge = jnp.where(x > 0, n + n + 1, jnp.where(n % 2 == 0, 1, -1)).astype(x.dtype)
    half = jnp.cos(theta / 2)
    trig = jnp.where(half != 1, jnp.sin((n + 0.5) * theta) / jnp.sin(theta / 2), edge)
    out = jnp.where((n > 8) & (jnp.abs(x) < 1), trig, rec)
    out = jnp.where(jnp.abs(x) == 1, edge, out)
    return jnp.where(n < 0, 0, out)


def _shifted(fn):
    return lambda x, n: fn(x + x - 1, n)


def _hermite_h(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x + x, lambda k, q, p: (x + x) * q - (k + k - 2) * p)
    return jnp.where(n < 0, 0, rec)


def _hermite_he(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x, lambda k, q, p: x * q - (k - 1) * p)
    return jnp.where(n < 0, 0, rec)


def _laguerre_l(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, one - x, lambda k, q, p: ((k + k - 1 - x) * q - (k - 1) * p) / k)
    out = jnp.where(jnp.abs(x) == 0, 1, rec)
    return jnp.where(n < 0, 0, out)


def _legendre_p(x, n):
    one = jnp.ones_like(x)
    rec = _recurrence(x, n, one, x, lambda k, q, p: ((k + k - 1) * x * q - (k - 1) * p) / k)
    edge = jnp.where((x > 0) | (n == 0) | (n % 2 == 0), 1, -1).astype(x.dtype)
    out = jnp.where(jnp.abs(x) == 1, edge, rec)
    return jnp.where(n < 0, 0, out)


for _packet, _fn in [
    (aten.special_chebyshev_polynomial_t, _cheb_t),
    (aten.special_chebyshev_polynomial_u, _cheb_u),
    (aten.special_chebyshev_polynomial_v, _cheb_v),
    (aten.special_chebyshev_polynomial_w, _cheb_w),
    (aten.special_shifted_chebyshev_polynomial_t, _shifted(_cheb_t)),
    (aten.special_shifted_chebyshev_polynomial_u, _shifted(_cheb_u)),
    (aten.special_shifted_chebyshev_polynomial_v, _shifted(_cheb_v)),
    (aten.special_shifted_chebyshev_polynomial_w, _shifted(_cheb_w)),
    (aten.special_hermite_polynomial_h, _hermite_h),
    (aten.special_hermite_polynomial_he, _hermite_he),
    (aten.special_laguerre_polynomial_l, _laguerre_l),
    (aten.special_legendre_polynomial_p, _legendre_p),
]:
    register(_packet.default, _packet.x_scalar, _packet.n_scalar)(_poly(_fn))


# -- integers and float decomposition ------------------------------------------------------
def _gcd(a, b):
    # NOTE: eager's calc_gcd (Euclid's loop on std::abs of each, which wraps the minimum of
    # int8..int64 to itself): gcd(127, -128) in int8 is -1. jnp.gcd orders the pair by value
    # and never ended on a wrapped minimum.
    a, b = jnp.broadcast_arrays(jnp.abs(a), jnp.abs(b))

    def step(pair):
        a, b = pair
        live = a != 0
        return jnp.where(live, lax.rem(b, jnp.where(live, a, 1)), a), jnp.where(live, a, b)

    return lax.while_loop(lambda pair: jnp.any(pair[0] != 0), step, (a, b))[1]


def _lcm(a, b):
    # eager's formula: abs(a / gcd * b), C's truncating division, in C's int for narrower
    # integers (abs before the wrap to int8: 12 * 12 is -112, not 112); 0 where the gcd is 0
    g, dtype = _gcd(a, b), a.dtype
    wide = jnp.int32 if dtype.itemsize < 4 else dtype
    a, b, g = (v.astype(wide) for v in (a, b, g))
    value = jnp.abs(lax.div(a, jnp.where(g == 0, 1, g)) * b)
    return jnp.where(g == 0, 0, value).astype(dtype)


register(aten.gcd.default)(_pointwise(_gcd, Kind.DEFAULT))
register(aten.lcm.default)(_pointwise(_lcm, Kind.DEFAULT))


@register(aten.frexp.Tensor)
def frexp(self):
    mantissa, exponent = jnp.frexp(self)
    return mantissa, as_dtype(exponent, out_dtype(1))


@register(aten.ldexp.Tensor)
def ldexp(self, other):
    # NOTE: eager multiplies by the power of two: for integer exponents exactly, rounded once
    # (float16 1000 * 2**-20 is 9.5367e-04; float32 0.5 * 2**128 is 2**127, not inf); for
    # float exponents as ``self * pow(2.0, other)``. XLA's exp2 is not exact at integers (in
    # float16 2**3 was below 8: every product a unit low; in float64 a unit off too).
    result = out_dtype()
    if jnp.issubdtype(result, jnp.complexfloating):
        return as_dtype(self, result) * jnp.exp2(as_dtype(other, result))
    compute = np.promote_types(np.dtype(result), np.float32)
    x = as_dtype(self, compute)
    if not jnp.issubdtype(other.dtype, jnp.inexact):
        return as_dtype(times_power_of_two(x, other), result)
    _, power = promote(Kind.DEFAULT, 2.0, other)
    wide = np.promote_types(np.dtype(power), np.float32)
    p = as_dtype(exact_exp2(as_dtype(other, wide), WIDE_EXP2), power)
    return as_dtype(x * as_dtype(p, compute), result)


# -- complex numbers -------------------------------------------------------------------------
@register(
    aten._conj.default,
    aten._conj_copy.default,
    aten._conj_physical.default,
    aten.conj_physical.default,
)
def conj(self):
    return jnp.conj(self) if jnp.iscomplexobj(self) else self


@register(aten._neg_view.default, aten._neg_view_copy.default)
def _neg_view(self):
    return jnp.negative(self)


@register(aten.view_as_real.default, aten.view_as_real_copy.default)
def view_as_real(self):
    return jnp.stack([jnp.real(self), jnp.imag(self)], axis=-1)


@register(aten.view_as_complex.default, aten.view_as_complex_copy.default)
def view_as_complex(self):
    return lax.complex(self[..., 0], self[..., 1])


@register(aten.complex.default)
def complex_(real, imag):
    dtype = np.dtype(out_dtype())
    part = np.dtype(np.float64) if dtype == np.complex128 else np.dtype(np.float32)
    re, im = jnp.broadcast_arrays(as_dtype(real, part), as_dtype(imag, part))
    return lax.complex(re, im)


@register(aten.polar.default)
def polar(abs, angle):
    return lax.complex(*jnp.broadcast_arrays(abs * jnp.cos(angle), abs * jnp.sin(angle)))


@register(aten.angle.default)
def angle(self):
    result = out_dtype()
    if jnp.iscomplexobj(self):  # (eager's derivative at 0 is 0, as _atan2's)
        return as_dtype(_atan2(jnp.imag(self), jnp.real(self)), result)
    x = as_dtype(self, result)
    # NOTE: torch.angle of a real number is pi for negatives, 0 otherwise, NaN for NaN.
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, np.pi, 0).astype(result))
