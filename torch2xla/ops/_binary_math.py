"""Binary float functions with eager's values and derivatives at their edges: ``pow`` (integer
exponents wrapping as eager's squarings, its roots as eager's sqrt/rsqrt kernels), ``atan2``,
``hypot``, ``copysign``, ``nextafter`` and ``xlogy``. Split from ``_elementwise``, whose
``_pointwise`` owns their type promotion."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from torch._ops import ops

from torch2xla.ops import _complex
from torch2xla.ops._common import Kind, cast, cpu_half_step, out_dtype
from torch2xla.ops._derivatives import with_partials
from torch2xla.ops._elementwise import _pointwise
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _power(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        # NOTE: torch's integer pow with a negative exponent is 0 (1 and -1 excepted: 1 and
        # +-1 by parity); jnp's is not defined for it.
        neg = b < 0
        unit = jnp.where(a == 1, 1, jnp.where(a == -1, jnp.where(b % 2 == 0, 1, -1), 0))
        return jnp.where(neg, unit.astype(a.dtype), _int_power(a, jnp.where(neg, 0, b)))
    if jnp.issubdtype(a.dtype, jnp.floating):
        return _float_power(*jnp.broadcast_arrays(a, b))
    if jnp.issubdtype(a.dtype, jnp.complexfloating):
        return _complex.pow_(a, b)
    return jnp.power(a, b)


def _float_power_partials(a, b):
    # NOTE: eager's derivatives of pow are 0 where the exponent is 0 (x ** 0 at x = 0, where
    # 0 * 0 ** -1 is NaN) and, for the exponent, where the base is 0 and the exponent >= 0.
    # Each a formula of pow itself, so that its own derivative (double backward) is eager's
    # too: 0 for x ** 1 at x = 0 (JAX's derivative of x ** 0 there is 0 * inf, NaN).
    da = jnp.where(b == 0, 0, b * _float_power(a, b - 1))
    db = jnp.where((a == 0) & (b >= 0), 0, _float_power(a, b) * jnp.log(a))
    return da, db


def _atan2_partials(a, b):
    # NOTE: eager's derivative of atan2 is 0 where a * a + b * b is 0, not 0 / 0: its
    # reciprocal masked after the division (so that its own derivative there, a double
    # backward's, is NaN as eager's masked_fill of an infinite reciprocal).
    denom = a * a + b * b
    recip = jnp.where(denom == 0, 0, 1 / denom)
    return b * recip, -a * recip


_float_power = with_partials(jnp.power, _float_power_partials)
_atan2 = with_partials(jnp.arctan2, _atan2_partials)


def _int_power(a, b):
    """``a ** b`` for integer arrays of one dtype, ``b >= 0``, wrapping as eager's squarings.

    NOTE: jnp.power skips an unsigned exponent's top bit (uint8 ``2 ** 128`` gave 1, not 0)."""
    a, b = jnp.broadcast_arrays(a, b)
    result = jnp.ones_like(a)
    for _ in range(jnp.iinfo(b.dtype).bits):
        result = jnp.where((b & 1) == 1, result * a, result)
        a, b = a * a, lax.shift_right_logical(b, jnp.ones_like(b))
    return result


def _next_toward(a, b):
    """The float after ``a`` toward ``b`` from the bits (C's nextafter, as eager's kernels for
    every float dtype): ``b`` where equal, NaN where either is, the least subnormal of ``b``'s
    sign from zero; the largest finite float from an infinity, an infinity past the largest."""
    a, b = jnp.broadcast_arrays(a, b)
    bits = jnp.dtype(f"uint{jnp.finfo(a.dtype).bits}")
    ia = lax.bitcast_convert_type(a, bits)
    one = jnp.ones_like(ia)
    away = (a < b) == (a > 0)  # the magnitude grows: one bit pattern up, else one down
    stepped = lax.bitcast_convert_type(jnp.where(away, ia + one, ia - one), a.dtype)
    tiny = lax.bitcast_convert_type(one, a.dtype)  # the least subnormal
    from_zero = jnp.where(b > 0, tiny, -tiny)
    out = jnp.where(a == 0, from_zero, stepped)
    out = jnp.where(a == b, b, out)
    return jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.asarray(jnp.nan, a.dtype), out)


@jax.custom_jvp
def _nextafter(a, b):
    return _next_toward(a, b)


@_nextafter.defjvp
def _nextafter_jvp(primals, tangents):
    # NOTE: torch differentiates nextafter as the identity in its first argument (the step is
    # one ulp) and not at all in the second; eager's formula ``where(self != other, grad, 0)``
    # gives 0 where the operands are equal.
    a, b = jnp.broadcast_arrays(*primals)
    out = _nextafter(*primals)
    t = jnp.broadcast_to(tangents[0], out.shape).astype(out.dtype)
    return out, jnp.where(a != b, t, jnp.zeros_like(t))


@jax.custom_jvp
def _copysign_exact(a, b):
    return jnp.copysign(a, b)


@_copysign_exact.defjvp
def _copysign_exact_jvp(primals, tangents):
    # eager's formula: the cotangent times result / self, 0 where self is 0 (NaN at +-inf and
    # NaN); nothing for the sign's operand
    (a, b), (ta, _) = primals, tangents
    # (result / self masked after the division, as eager's masked_fill: its derivative, a
    # double backward's, is NaN at 0 as eager's)
    out = _copysign_exact(a, b)
    return out, ta * jnp.where(a == 0, 0, out / a)


def _copysign(a, b):
    if not jnp.issubdtype(jnp.result_type(a), jnp.floating):
        return jnp.copysign(a, b)
    return _copysign_exact(a, jnp.asarray(b, jnp.result_type(a)))


register(aten.pow.Tensor_Tensor, aten.pow.Scalar)(_pointwise(_power, Kind.BOOL_TO_LONG))


@register(aten.pow.Tensor_Scalar)
def pow_tensor_scalar(self, exponent):
    # NOTE: eager's pow by a bool exponent is a copy (True) or ones (False) in the base's dtype
    # (bool stays bool: promotion would give int64).
    if isinstance(exponent, bool) and self.dtype == jnp.bool_:
        return self if exponent else jnp.ones_like(self)
    result = out_dtype()
    if jnp.issubdtype(result, jnp.complexfloating) and complex(exponent).imag == 0:
        # eager's kernels for these exponents (0.5: sqrt, 2: z * z...), a complex one with no
        # imaginary part too (``float_power(z, 3)`` passes 3 + 0j; ``x ** (2 + 0j)``)
        special = _complex.POWERS.get(complex(exponent).real)
        if special is not None:
            return special(cast(self, result))
    if (
        not (isinstance(exponent, bool | complex) or self.dtype == jnp.float16)
        and exponent in _ROOTS
    ):
        # eager's kernel takes sqrt and rsqrt for these (a -0.0 base: -0.0 and -inf; -inf: NaN)
        # for bfloat16 too, not for float16 (its pow: 0.0 and inf, inf and 0.0); a tensor
        # exponent is pow's for every dtype
        return _pointwise(_ROOTS[exponent], Kind.BOOL_TO_LONG)(self, exponent)
    return _pointwise(_power, Kind.BOOL_TO_LONG)(self, exponent)


@jax.custom_jvp
def _hypot(a, b):
    return jnp.hypot(a, b)


@_hypot.defjvp
def _hypot_jvp(primals, tangents):
    # eager's formula: grad * a / hypot(a, b), NaN at (0, 0) (JAX's: 0.5 there, NaN where
    # the other operand is infinite, where eager's is 0). (t / h * a: its transpose is
    # eager's (grad * a) / h)
    (a, b), (ta, tb) = primals, tangents
    h = _hypot(a, b)
    return h, ta.astype(h.dtype) / h * a + tb.astype(h.dtype) / h * b


def _rsqrt_power(a, _):
    # eager's CPU rsqrt is 1 / sqrt(x), two roundings (the root kept from XLA's rewrite of a
    # division by a root into its one-rounding rsqrt); its CUDA one is CUDA's rsqrt
    if ctx().on_cuda:
        return lax.rsqrt(a)
    from torch2xla.ops._arithmetic import true_divide  # (which imports this module)

    root = lax.optimization_barrier(lax.sqrt(a))
    value = true_divide(jnp.ones_like(root), root)  # (rounded once, as eager divides)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        return value
    return _rsqrt_power_given(a, lax.stop_gradient(value))


# eager's derivative of x ** -0.5 is pow's, -0.5 * x ** -1.5: -inf at -0 and -0 at -inf,
# where JAX's derivative of 1 / sqrt(x) gave +inf and NaN (the value is computed in the
# lowering's context, passed in undifferentiated)
_rsqrt_power_given = with_partials(
    lambda a, value: value, lambda a, value: (-0.5 * jnp.power(a, -1.5), jnp.zeros_like(value))
)


_ROOTS = {0.5: lambda a, _: lax.sqrt(a), -0.5: _rsqrt_power}


for _ops, _fn, _kind in [
    ((aten.atan2.default,), lambda a, b: _atan2(*jnp.broadcast_arrays(a, b)), Kind.INT_TO_FLOAT),
    ((aten.hypot.default,), _hypot, Kind.DEFAULT),
    ((aten.copysign.Tensor, aten.copysign.Scalar), _copysign, Kind.INT_TO_FLOAT),
    ((aten.nextafter.default,), _nextafter, Kind.NO_OPMATH),  # bits of its own dtype
]:
    register(*_ops)(_pointwise(_fn, _kind))


def _xlogy_value(x, y):
    # NOTE: 0 * log(y) is 0 (even for y = 0 or inf) unless y is NaN, as torch.xlogy.
    # (eager's CPU kernel rounds log(y) to a half-precision result's dtype first)
    return jnp.where(jnp.isnan(y), jnp.nan, jnp.where(x == 0, 0, x * cpu_half_step(jnp.log(y))))


def _xlogy_partials(x, y):
    # eager's derivative in x: xlogy(grad, y), made 0 where x == 0 and y <= 0 (log(y) at
    # x = 0 otherwise: inf at y = inf, log(0.5) at 0.5)
    return (jnp.where((x == 0) & (y <= 0), 0, jnp.log(y)), jnp.isnan(y)), x / y


def _xlogy(x, y):
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return _xlogy_value(x, y)
    x, y = jnp.broadcast_arrays(x, y)
    # (eager's derivative in x is ``xlogy(grad, y)``: 0 where the gradient is 0, y = inf too)
    return with_partials(_xlogy_value, _xlogy_partials, (0,))(x, y)


# Lowered rather than decomposed: torch's decomposition computes before rounding a 0-d operand
# to the common dtype, unlike the eager kernel; _pointwise rounds first.
register(aten.xlogy.Tensor, aten.xlogy.Scalar_Self, aten.xlogy.Scalar_Other)(
    _pointwise(_xlogy, Kind.INT_TO_FLOAT)
)
