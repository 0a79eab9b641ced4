"""The reparameterized derivative of a standard gamma draw as eager computes it: the
approximation of ``aten/src/ATen/native/Distributions.h``'s ``standard_gamma_grad_one``
(a Taylor series for small draws, Rice's saddle point for large concentrations, a bivariate
rational function otherwise), with its own Cephes ``digamma_one``, in float64 as eager's CPU
kernel. ``_standard_gamma``'s draws take it as their derivative (``reparameterized``: eager's
``grad * _standard_gamma_grad(self, result)``) and ``aten._standard_gamma_grad`` lowers to
it: JAX's implicit derivative of ``jax.random.gamma`` is another approximation (it differed
from eager's by 5e-5 relative in ``Gamma.rsample``'s gradient).

NOTE: eager's CUDA kernel computes in float for float32; this computes in float64 always.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla.ops._common import as_dtype
from torch2xla.ops._registry import register

aten = ops.aten
_F64 = np.dtype(np.float64)


def _f(x: float) -> float:
    """A C ``float`` literal (``0.8f``) as the double it becomes in a double expression."""
    return float(np.float32(x))


_PSI_10 = 2.25175258906672110764
_DIGAMMA_A = (
    8.33333333333333333333e-2,
    -2.10927960927960927961e-2,
    7.57575757575757575758e-3,
    -4.16666666666666666667e-3,
    3.96825396825396825397e-3,
    -8.33333333333333333333e-3,
    8.33333333333333333333e-2,
)


def _digamma_one(x):
    """Eager's ``digamma_one<double, double>`` (float64 ``x``)."""
    pole = (x == 0) | ((x < 0) & (x == jnp.floor(x)))
    neg = x < 0
    extra = jnp.where(neg, -np.pi / jnp.tan(np.pi * x), 0.0)
    x = jnp.where(neg, 1 - x, x)
    result = jnp.zeros_like(x)
    for _ in range(10):  # (``while (x < 10)``: x > 0 here, so at most ten steps)
        below = x < 10
        result = jnp.where(below, result - 1 / x, result)
        x = jnp.where(below, x + 1, x)
    z = 1.0 / (x * x)
    poly = jnp.zeros_like(x)
    for a in _DIGAMMA_A:
        poly = poly * z + a
    y = jnp.where(x < _f(1.0e17), z * poly, 0.0)
    out = result + jnp.log(x) - (0.5 / x) - y + extra
    out = jnp.where(x == 10, result + _PSI_10 + extra, out)
    return jnp.where(pole, jnp.inf, out)


_COEF_UV = (
    (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
    (
        0.53487893,
        0.1298071,
        0.065735949,
        -0.0015649758,
        0.16639465,
        0.020070113,
        -0.0035938915,
        -0.00058392623,
    ),
    (
        0.040121004,
        -0.0065914022,
        -0.0026286047,
        -0.0013441777,
        0.017050642,
        -0.0021309326,
        0.00085092367,
        -1.5247877e-07,
    ),
)


def standard_gamma_grad(alpha, x):
    """Eager's ``standard_gamma_grad_one<scalar_t, double>``: ``-(d/dalpha cdf(x; alpha)) /
    pdf(x; alpha)`` for a draw ``x`` of ``Gamma(alpha, 1)``; float64 arrays in and out."""
    # Taylor series for small x
    numer = jnp.ones_like(x)
    denom = alpha
    series1 = numer / denom
    series2 = numer / (denom * denom)
    for i in range(1, 6):
        numer = numer * (-x / float(i))
        denom = denom + 1
        series1 = series1 + numer / denom
        series2 = series2 + numer / (denom * denom)
    pow_x_alpha = jnp.power(x, alpha)
    gamma_pdf = jnp.power(x, alpha - 1) * jnp.exp(-x)
    gamma_cdf = pow_x_alpha * series1
    gamma_cdf_alpha = (jnp.log(x) - _digamma_one(alpha)) * gamma_cdf - pow_x_alpha * series2
    small = -gamma_cdf_alpha / gamma_pdf
    small = jnp.where(jnp.isnan(small), 0.0, small)

    # Rice saddle point for large alpha: near the mode, then away from it
    numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
    numer_2 = (
        1440 * (alpha * alpha)
        + 6 * x * (53 - 120 * x)
        - 65 * x * x / alpha
        + alpha * (107 + 3600 * x)
    )
    near = numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))
    sq = jnp.sqrt(8 * alpha)
    term2 = sq / (alpha - x)
    term3 = jnp.power(x - alpha - alpha * jnp.log(x / alpha), -1.5)
    term23 = jnp.where(x < alpha, term2 - term3, term2 + term3)
    term1 = jnp.log(x / alpha) * term23 - jnp.sqrt(2 / alpha) * (alpha + x) / (
        (alpha - x) * (alpha - x)
    )
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    far = -stirling * (x * term1) / sq
    large = jnp.where((_f(0.9) * alpha <= x) & (x <= _f(1.1) * alpha), near, far)

    # bivariate rational approximation
    u = jnp.log(x / alpha)
    v = jnp.log(alpha)
    c = [a + u * (b + u * d) for a, b, d in zip(*_COEF_UV, strict=True)]
    p = c[0] + v * (c[1] + v * (c[2] + v * c[3]))
    q = c[4] + v * (c[5] + v * (c[6] + v * c[7]))
    rational = jnp.exp(p / q)

    return jnp.where(x < _f(0.8), small, jnp.where(alpha > 8.0, large, rational))


@jax.custom_jvp
def reparameterized(alpha, draws):
    """``draws`` (standard gamma draws of concentration ``alpha``, of its dtype), whose
    derivative in ``alpha`` is eager's: ``_standard_gamma_grad(alpha, draws)`` in the dtype."""
    return draws


@reparameterized.defjvp
def _reparameterized_jvp(primals, tangents):
    alpha, draws = primals
    t_alpha, _ = tangents
    grad = standard_gamma_grad(as_dtype(alpha, _F64), as_dtype(draws, _F64))
    return draws, t_alpha * as_dtype(grad, draws.dtype)


@register(aten._standard_gamma_grad.default)
def _standard_gamma_grad(self, output):
    return as_dtype(standard_gamma_grad(as_dtype(self, _F64), as_dtype(output, _F64)), self.dtype)
