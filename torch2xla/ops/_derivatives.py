"""Ops whose eager derivative is a formula of its own, unlike JAX's derivative of the forward
at the edges: the boundaries of piecewise functions (hardsigmoid's is 0 at +-3, clamp's
would pass there) and the points where the chain rule meets 0 * inf (binary cross entropy at
a probability of exactly 0 or 1, sinc at 0). ``with_partials`` gives a forward the partial
derivatives eager's formulas give; the ops below would otherwise be decomposed into ops whose
derivatives disagree there.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla._errors import OpError
from torch2xla.ops import _loops
from torch2xla.ops._common import Kind, as_dtype, cpu_half_step, opmath_dtype, out_dtype, promote
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def with_partials(forward: Callable, partials: Callable, zero_at_zero: tuple = ()) -> Callable:
    """``forward`` (elementwise, on arrays of one shape) whose derivative in its i-th argument
    is ``partials(*args)[i]``: the gradient times it (NaN at 0 * inf, as eager's ``grad *
    partial``). For the arguments in ``zero_at_zero`` the partial is a pair ``(d, nan)``:
    eager's ``xlogy(grad, y)``, 0 where the gradient is 0 however infinite or NaN ``d`` is,
    except where ``nan`` (y is NaN)."""
    fn = jax.custom_jvp(forward)

    @fn.defjvp
    def _jvp(primals, tangents):
        out = forward(*primals)
        total = None
        for i, (d, t) in enumerate(zip(partials(*primals), tangents, strict=True)):
            if i in zero_at_zero:
                term = times_zero_at_zero(t, as_dtype(d[0], t.dtype), d[1])
            else:
                term = as_dtype(d, t.dtype) * t
            total = term if total is None else total + term
        return out, total

    fn.__name__ = getattr(forward, "__name__", "with_partials")
    return fn


def times_zero_at_zero(t, d, nan):
    """``t * d``, linear in ``t``, but 0 where ``t`` is 0 and ``d`` infinite or NaN (NaN
    everywhere ``nan``): four multiplications by the dtype's largest number take every
    nonzero ``t`` to an infinity of its sign (the least subnormal too) and keep a zero a
    zero; times ``sign(d)`` where ``d`` is infinite, times 0 (NaN from an infinity) where
    it is NaN."""
    big = jax.lax.optimization_barrier(jnp.asarray(jnp.finfo(t.dtype).max, t.dtype))
    finite = jnp.isfinite(d)
    sign = jnp.where(jnp.isnan(d), 0, jnp.sign(d)).astype(t.dtype)
    # (the sign between two overflows: a transpose multiplies in the reverse order)
    edge = (t * big * big * big * big * sign) * big * big * big * big
    out = jnp.where(finite, t * jnp.where(finite, d, 0), edge)
    # (each branch's factors finite outside its mask: the transpose multiplies the masked
    # zeros by them)
    return jnp.where(nan, t * jnp.where(nan, jnp.nan, 0).astype(t.dtype), out)


def _opmath(lowering: Callable, kind: Kind = Kind.DEFAULT) -> Callable:
    """Run ``lowering`` on its tensor arguments broadcast and in the computation dtype (half
    precision in float32, as torch's decompositions), returning the node's dtype."""

    def run(*args):
        compute, _ = promote(kind, *args)
        compute = opmath_dtype(compute)
        arrays = jnp.broadcast_arrays(*(as_dtype(a, compute) for a in args))
        return as_dtype(lowering(*arrays), out_dtype())

    return run


# eager's hardsigmoid_backward multiplies by a float literal 1.0f / 6.0f, in float64 too
_ONE_SIXTH = float(np.float32(1.0) / np.float32(6.0))
_hardsigmoid = with_partials(
    lambda x: jnp.clip(x + 3, 0, 6) / 6,
    lambda x: (jnp.where((x > -3) & (x < 3), _ONE_SIXTH, 0),),
)
register(aten.hardsigmoid.default)(_opmath(_hardsigmoid))


def _hardswish_value(x):
    return x * jnp.clip(x + 3, 0, 6) / 6


def hardswish_partial(x, vec=None):
    """The factor of eager's ``hardswish_backward``: 0 where ``x <= -3``, ``x / 3 + 0.5``
    where ``x < 3``, 1 elsewhere; at NaN 1 (its scalar loop) or NaN (its vectorized one,
    where ``vec``: ``_loops.mask``)."""
    # (a divisor XLA sees as a broadcast constant becomes a multiply by its reciprocal, 1 ulp
    # off eager's quotient: an opaque array)
    three = jax.lax.optimization_barrier(jnp.full(x.shape, 3, x.dtype))
    half = jax.lax.optimization_barrier(jnp.asarray(0.5, x.dtype))
    partial = jnp.where(x <= -3, 0, jnp.where(x < 3, x / three + half, 1)).astype(x.dtype)
    return _loops.at_nan(x, partial, jnp.nan, vec)


HARDSWISH_KERNEL = _loops.backward_kernel(aten.hardswish_backward)


@register(aten.hardswish.default)
def hardswish(self):
    nan_walk = _loops.walk(HARDSWISH_KERNEL) if jnp.issubdtype(self.dtype, jnp.floating) else None
    forward = with_partials(
        _hardswish_value, lambda x: (hardswish_partial(x, _loops.mask(nan_walk, x)),)
    )
    return _opmath(forward)(self)


def _sinc_value(x):
    a = math.pi * x
    return jnp.where(a == 0, 1, jnp.sin(a) / jnp.where(a == 0, 1, a))


def _sinc_partial(x):
    # (masked after the division, as eager's where: its derivative, a double backward's, is
    # NaN at 0 as eager's)
    a = math.pi * x
    return (jnp.where(x == 0, 0, (a * jnp.cos(a) - jnp.sin(a)) / (math.pi * x * x)),)


register(aten.sinc.default)(_opmath(with_partials(_sinc_value, _sinc_partial), Kind.INT_TO_FLOAT))


def _entr_value(x):
    return jnp.where(
        jnp.isnan(x), x, jnp.where(x > 0, -x * jnp.log(x), jnp.where(x == 0, 0, -jnp.inf))
    )


# eager's derivative: grad * -(1 + log(x)) (-inf at inf, +inf at 0, NaN below; JAX's
# derivative of x * log(x) is NaN at inf)
register(aten.special_entr.default)(
    _opmath(with_partials(_entr_value, lambda x: (-(1 + jnp.log(x)),)), Kind.INT_TO_FLOAT)
)


def _xlog1py_value(x, y):
    # (eager's CPU kernel rounds log1p(y) to a half-precision result's dtype first)
    return jnp.where(jnp.isnan(y), jnp.nan, jnp.where(x == 0, 0, x * cpu_half_step(jnp.log1p(y))))


def _xlog1py_partials(x, y):
    dx = jnp.where((x == 0) & (y <= -1), 0, jnp.log1p(y))
    return (dx, jnp.isnan(y)), x / (y + 1)


# (eager's derivative in x is ``xlog1py(grad, y)``: 0 where the gradient is 0, y = inf too)
register(
    aten.special_xlog1py.default,
    aten.special_xlog1py.self_scalar,
    aten.special_xlog1py.other_scalar,
)(_opmath(with_partials(_xlog1py_value, _xlog1py_partials, (0,)), Kind.INT_TO_FLOAT))


def _bce_value(x, t):
    return (t - 1) * jnp.maximum(jnp.log1p(-x), -100) - t * jnp.maximum(jnp.log(x), -100)


def _bce_partials(x, t):
    # eager: (x - t) / max((1 - x) * x, 1e-12), finite at x = 0 and 1
    dx = (x - t) / jnp.maximum((1 - x) * x, 1e-12)
    return dx, -jnp.log(x / (1 - x))  # eager: -logit(x), not clamped


_bce = with_partials(_bce_value, _bce_partials)


def _bce_error(value: int) -> tuple[str, type]:
    which = "target" if value % 2 else "input"
    return f"all elements of {which} should be between 0 and 1", OpError


@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(self, target, weight=None, reduction=1):
    compute = opmath_dtype(promote(Kind.DEFAULT, self, target)[0])
    x, t = jnp.broadcast_arrays(as_dtype(self, compute), as_dtype(target, compute))
    c = ctx()
    if c.checking and not c.on_cuda:  # eager's CPU kernel checks (NaN fails them too),
        # element by element, the input before the target: the first element outside [0, 1]
        # names which. (value: 2 * its position, + 1 where its input is inside)
        bad_x, bad_t = ~((x >= 0) & (x <= 1)), ~((t >= 0) & (t <= 1))
        bad, bad_x = (bad_x | bad_t).reshape(-1), bad_x.reshape(-1)
        if bad.size:
            first = jnp.argmax(bad)
            value = 2 * first.astype(jnp.int64) + (~bad_x[first]).astype(jnp.int64)
            c.check(jnp.any(bad), "", value, explain=_bce_error)
    loss = _bce(x, t)
    if weight is not None:
        loss = loss * as_dtype(weight, compute)
    if reduction == 1:
        loss = jnp.mean(loss)
    elif reduction == 2:
        loss = jnp.sum(loss)
    elif reduction != 0:
        raise ValueError(f"binary_cross_entropy: reduction {reduction} is not 0, 1 or 2")
    return as_dtype(loss, out_dtype())


# -- smooth_l1 and huber losses: eager's backward kernels, ``f(input - target)`` for the input
# and ``f(target - input)`` for the target (not its negation: the signs of zeros differ), each
# piece chosen by comparisons, so an infinite difference gives +-1 (JAX's derivative of the
# unchosen quadratic piece made NaN there)
def _smooth_l1_value(beta):
    def value(x, t):
        z = jnp.abs(x - t)
        return jnp.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)

    return value


def _smooth_l1_slope(beta):
    def slope(d):
        return jnp.where(d <= -beta, -1, jnp.where(d >= beta, 1, d / beta))

    return slope


def _huber_value(delta):
    def value(x, t):
        z = jnp.abs(x - t)
        return jnp.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))

    return value


def _huber_slope(delta):
    def slope(d):
        return jnp.where(d <= -delta, -delta, jnp.where(d >= delta, delta, d))

    return slope


def _pointwise_loss(value, slope, reduction):
    fn = with_partials(value, lambda x, t: (slope(x - t), slope(t - x)))

    return _opmath(lambda x, t: _reduced(fn(x, t), reduction))


def _reduced(loss, reduction):
    if reduction == 1:
        return jnp.mean(loss)
    if reduction == 2:
        return jnp.sum(loss)
    if reduction != 0:
        raise ValueError(f"reduction {reduction} is not 0, 1 or 2")
    return loss


@register(aten.smooth_l1_loss.default)
def smooth_l1_loss(self, target, reduction=1, beta=1.0):
    beta = float(beta)
    if beta < 0:  # (eager's kernel checks it; torch's meta kernel does not)
        raise OpError("smooth_l1_loss does not support negative values for beta.", ctx().node)
    if beta == 0:  # eager's is l1_loss then, its gradient abs's of the difference
        from torch2xla.ops._elementwise import _abs  # (which imports this module)

        return _opmath(lambda x, t: _reduced(_abs(x - t), reduction))(self, target)
    return _pointwise_loss(_smooth_l1_value(beta), _smooth_l1_slope(beta), reduction)(self, target)


@register(aten.huber_loss.default)
def huber_loss(self, target, reduction=1, delta=1.0):
    delta = float(delta)
    return _pointwise_loss(_huber_value(delta), _huber_slope(delta), reduction)(self, target)
