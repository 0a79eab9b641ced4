"""Activation functions (gelu, silu, hardtanh and relu6, leaky_relu, elu, celu, softplus,
hardshrink and softshrink, logit): their values and the derivatives of eager's kernels, NaN and bounds included."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops import _elementwise, _float_bits, _loops, _saved
from torch2xla.ops._common import Kind, as_dtype, half_rounding, is_half, opmath_dtype, promote
from torch2xla.ops._derivatives import with_partials
from torch2xla.ops._elementwise import (
    _channels_last,
    _negative,
    _pointwise,
)
from torch2xla.ops._registry import ctx, register
from torch2xla.runtime._interop import torch_dtype

aten = ops.aten


@register(aten.gelu.default)
def gelu(self, *, approximate="none"):
    if jnp.issubdtype(self.dtype, jnp.floating):  # the backward keeps the input only
        out = _saved.gelu(self, approximate == "tanh")
        if approximate == "none" and _onednn_gelu() and _onednn_gelu_zero_is_positive(out.dtype):
            # (adding +0 turns only -0 into +0; the gradient passes unchanged)
            return out + lax.optimization_barrier(jnp.zeros((), out.dtype))
        return out
    compute, result = promote(Kind.INT_TO_FLOAT, self)
    x = as_dtype(self, compute)
    return as_dtype(jax.nn.gelu(x, approximate=approximate == "tanh"), result)


def _onednn_gelu() -> bool:
    """Whether eager's exact gelu of the node's input runs oneDNN's ``eltwise_gelu_erf``
    (``use_mkldnn`` of Activation.cpp: oneDNN enabled, a contiguous CPU input of more than one
    element; the dtype's support is ``_onednn_gelu_zero_is_positive``'s probe)."""
    c = ctx()
    node = c.node.args[0] if c.node.args else None
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return (
        not c.on_cuda
        and torch._C._get_mkldnn_enabled()
        and isinstance(value, torch.Tensor)
        and value.is_contiguous()
        and value.numel() > 1
    )


@functools.cache
def _onednn_gelu_zero_is_positive(dtype) -> bool:
    """Whether eager's gelu of ``dtype`` through oneDNN gives +0 where its result is zero
    (probed: gelu(-0), gelu(-30)). oneDNN's kernel is built for the CPU at run time: its AVX2
    one (an AMD EPYC) gives +0 for every zero result of float32 (gelu(-0), gelu(-8),
    gelu(-1e30)), where torch's own kernel and oneDNN's AVX-512 one give -0
    (``x * 0.5 * (1 + erf(x / sqrt2))``, the float64 value's sign). Called with oneDNN
    enabled."""
    with torch.utils._python_dispatch._disable_current_modes():
        x = torch.tensor([-0.0, -30.0], dtype=torch_dtype(dtype), device="cpu")
        return not bool(torch.nn.functional.gelu(x).signbit().any())


@register(aten.silu.default)
def silu(self):
    if jnp.issubdtype(self.dtype, jnp.floating):  # the backward keeps the input only
        return _saved.silu(self)
    return _pointwise(jax.nn.silu, Kind.INT_TO_FLOAT)(self)


@register(aten.hardtanh.default)
def hardtanh(self, min_val=-1.0, max_val=1.0):
    if not jnp.issubdtype(self.dtype, jnp.floating):
        return _hardtanh_value(self, min_val, max_val)
    lo, hi = float(min_val), float(max_val)
    nan_walk = _loops.walk(_hardtanh_kernel, lo, hi)
    return _hardtanh_exact(self, lo, hi, _elementwise._after_cpu_convolution(self), nan_walk)


def _hardtanh_kernel(x, lo, hi):
    return aten.hardtanh_backward(torch.ones_like(x), x, lo, hi)


def _below(x, bound: float):
    """``x < bound``; from the bits where ``bound`` is 0 (see ``_negative``)."""
    return _negative(x) if bound == 0 else x < as_dtype(bound, x.dtype)


def _above(x, bound: float):
    """``x > bound``; from the bits where ``bound`` is 0 (see ``_negative``)."""
    if bound != 0:
        return x > as_dtype(bound, x.dtype)
    return _float_bits.positive(x)


def _hardtanh_value(x, min_val, max_val):
    # NOTE: torch keeps x itself at a bound (relu6(-0.0) is -0.0); jnp.clip gives the bound.
    lo, hi = as_dtype(min_val, x.dtype), as_dtype(max_val, x.dtype)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.where(x < lo, lo, jnp.where(x > hi, hi, x))
    return jnp.where(_below(x, min_val), lo, jnp.where(_above(x, max_val), hi, x))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3, 4))
def _hardtanh_exact(x, min_val: float, max_val: float, channels_last: bool, nan_walk):
    fn = functools.partial(_hardtanh_value, min_val=min_val, max_val=max_val)
    return _channels_last(fn, x) if channels_last else fn(x)


@_hardtanh_exact.defjvp
def _hardtanh_exact_jvp(min_val, max_val, channels_last, nan_walk, primals, tangents):
    (x,), (t,) = primals, tangents
    # (the mask of eager's vectorized blocks is made in x's layout, then moved with it)
    vec = _loops.mask(nan_walk, x)

    def fn(x, t, *vec):
        grad = hardtanh_grad(x, t, min_val, max_val, vec[0] if vec else None)
        return _hardtanh_value(x, min_val, max_val), grad

    args = (x, t) if vec is None else (x, t, vec)
    return _channels_last(fn, *args) if channels_last else fn(*args)  # see relu's


def hardtanh_grad(x, t, min_val: float, max_val: float, vec):
    """Eager's ``hardtanh_backward(t, x)``: ``t`` strictly inside the bounds, 0 outside and
    at them (jnp.clip's derivative is 1/2 there). At NaN eager's scalar loop passes ``t``
    and its vectorized one (where ``vec``: ``_loops.mask``) gives 0."""
    inside = _above(x, min_val) & _below(x, max_val)
    passes = _loops.at_nan(x, inside | jnp.isnan(x), False, vec)
    return jnp.where(passes, t, jnp.zeros_like(t))


@register(aten.threshold.default)
def threshold(self, threshold, value):
    """Eager's threshold: ``value`` where ``x <= threshold``, ``x`` elsewhere (NaN kept), both
    numbers converted to the input's dtype (truncated for integers; half precision compares
    in float32, as eager's kernel).

    Lowered rather than decomposed (torch's decomposition is a select): eager's derivative,
    ``threshold_backward``, is itself differentiable in the input (its derivative 0), so a
    gradient of it requires grad where the select's does not (a gradient penalty of it
    raised "does not require grad" on its double backward)."""
    if jnp.issubdtype(self.dtype, jnp.integer):
        lo, fill = (as_dtype(int(v), self.dtype) for v in (threshold, value))
        return jnp.where(self <= lo, fill, self)
    if not jnp.issubdtype(self.dtype, jnp.floating):
        return jnp.where(self <= threshold, as_dtype(value, self.dtype), self)
    return _threshold(self, float(threshold), float(value))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _threshold(x, threshold: float, value: float):
    fill = as_dtype(jnp.asarray(value, opmath_dtype(x.dtype)), x.dtype)
    return jnp.where(_at_most(x, threshold), fill, x)


@_threshold.defjvp
def _threshold_jvp(threshold, value, primals, tangents):
    (x,), (t,) = primals, tangents
    # eager's threshold_backward: 0 where x <= threshold, the gradient elsewhere (NaN too)
    return _threshold(x, threshold, value), jnp.where(_at_most(x, threshold), 0, t)


def _at_most(x, bound: float):
    """``x <= bound`` as eager's kernel compares (in float32 for half precision; subnormals
    read from the bits, ``_float_bits.compare``)."""
    compute = opmath_dtype(x.dtype)
    x = as_dtype(x, compute)
    return _float_bits.compare(jnp.less_equal, x, jnp.asarray(bound, compute))


@register(aten.leaky_relu.default)
def leaky_relu(self, negative_slope=0.01):
    return jnp.where(self > 0, self, self * as_dtype(negative_slope, self.dtype))


@register(aten.elu.default)
def elu(self, alpha=1, scale=1, input_scale=1):
    def fn(x):
        # NOTE: the negative branch sees 0 where x > 0: expm1 of a large x is inf, and the
        # where's gradient (0 times inf) would be NaN where eager's is finite.
        neg_side = x <= 0
        xn = jnp.where(neg_side, x, 0)
        neg = as_dtype(alpha, x.dtype) * jnp.expm1(xn * as_dtype(input_scale, x.dtype))
        return jnp.where(neg_side, neg, x) * as_dtype(scale, x.dtype)

    if jnp.issubdtype(self.dtype, jnp.floating):  # the derivative of eager's elu_backward
        params = (float(alpha), float(scale), float(input_scale))
        fn = _elu_with_gradient(fn, *params, _loops.walk(_elu_kernel, *params, False))
    return _pointwise(fn, Kind.DEFAULT)(self)  # half precision computes in float32, as torch


def _elu_kernel(x, alpha, scale, input_scale, is_result):
    return aten.elu_backward(torch.ones_like(x), alpha, scale, input_scale, is_result, x)


def elu_grad(x, t, alpha, scale, input_scale, is_result: bool, vec):
    """Eager's ``elu_backward(t, alpha, scale, input_scale, is_result, x)`` (``x`` the input,
    or the result where ``is_result``): ``t * input_scale * alpha * scale * exp(x *
    input_scale)`` (``t * input_scale * (x + alpha * scale)`` of a result) where ``x <= 0``,
    ``t * scale`` elsewhere; at NaN ``t * scale`` (scalar loop) or NaN (vectorized, where
    ``vec``: ``_loops.mask``)."""
    neg_side = x <= 0
    # (each a constant XLA cannot fold into another: eager rounds each product)
    negcoef, poscoef, negiptcoef = (
        jax.lax.optimization_barrier(jnp.asarray(c, x.dtype))
        for c in (alpha * scale, scale, input_scale)
    )
    # Its derivative in x (double backward) is eager's ``elu_double_backward``: this times
    # ``input_scale`` (of the input: also times the gradient's own factor) where ``x < 0``,
    # 0 elsewhere, at 0 too (``_negative_part``'s derivative).
    if is_result:
        neg = t * negiptcoef * (_negative_part(x) + negcoef)
    else:  # (exp sees 0 where x > 0: exp's inf there would make the derivative NaN)
        neg = t * negiptcoef * negcoef * jnp.exp(_negative_part(x) * negiptcoef)
    scalar = jnp.where(neg_side, neg, t * poscoef)
    if vec is None:
        return scalar
    # (t times NaN only where it is NaN: a constant NaN factor would reach every element in
    # the transpose of the where, as 0 * NaN). Of the input, that NaN is x * x, so that the
    # double backward is NaN there too, as eager's (elu_backward's NaN times 0); of a result,
    # eager's double backward is 0 there.
    nan = jnp.isnan(x) & vec
    if is_result:
        factor = jnp.where(nan, jnp.nan, 1)
    else:
        v = jnp.where(nan, x, 0)
        factor = jnp.where(nan, v * v, 1)
    return _loops.at_nan(x, scalar, t * factor, vec)


@jax.custom_jvp
def _negative_part(x):
    """``x`` where ``x <= 0``, else 0, whose derivative is 1 where ``x < 0`` only (eager's
    ``elu_double_backward`` masks with ``x < 0``: 0 at 0)."""
    return jnp.where(x <= 0, x, 0)


@_negative_part.defjvp
def _negative_part_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _negative_part(x), jnp.where(x < 0, t, jnp.zeros_like(t))


def _elu_with_gradient(value, alpha, scale, input_scale, nan_walk):
    """``value`` (elu) whose derivative is eager's ``elu_backward`` of the input."""
    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        grad = elu_grad(x, t, alpha, scale, input_scale, False, _loops.mask(nan_walk, x))
        return fn(x), grad

    return fn


@register(aten.celu.default)
def celu(self, alpha=1.0):
    # Not decomposed: torch's decomposition selects between x and expm1(x / alpha), whose
    # gradient is NaN wherever expm1 overflows (see elu's).
    return elu(self, alpha, 1, 1 / alpha)


def shrink_grad(x, t, lambd: float, vec):
    """Eager's ``hardshrink_backward``/``softshrink_backward(t, x, lambd)``: 0 where
    ``-lambd <= x <= lambd``, ``t`` elsewhere; at NaN ``t`` (scalar loop) or 0 (vectorized,
    where ``vec``: ``_loops.mask``)."""
    bound = as_dtype(lambd, x.dtype)
    zero = _loops.at_nan(x, (x >= -bound) & (x <= bound), True, vec)
    return jnp.where(zero, jnp.zeros_like(t), t)


SHRINK_KERNELS = {
    False: _loops.backward_kernel(aten.hardshrink_backward),
    True: _loops.backward_kernel(aten.softshrink_backward),
}


@register(aten.hardshrink.default, aten.softshrink.default)
def shrink(self, lambd=0.5):
    """Eager's hardshrink/softshrink (``x`` or ``x -+ lambd`` outside ``[-lambd, lambd]``, 0
    inside, NaN kept), whose derivative is eager's ``*shrink_backward`` (NaN included)."""
    soft = ctx().node.target is aten.softshrink.default
    lambd = float(lambd)
    value = functools.partial(_softshrink if soft else _hardshrink, lambd=lambd)
    if not jnp.issubdtype(self.dtype, jnp.floating):
        return value(self)
    nan_walk = _loops.walk(SHRINK_KERNELS[soft], lambd)
    return _shrink_exact(self, soft, lambd, nan_walk)


def _hardshrink(x, lambd):
    # (eager compares with lambd in x's dtype: 0.502 is 0.50390625 in bfloat16)
    bound = as_dtype(lambd, x.dtype)
    return jnp.where((x >= -bound) & (x <= bound), jnp.zeros_like(x), x)


def _softshrink(x, lambd):
    # (half precision computes in float32 with a float32 lambd, as eager's kernel)
    def fn(v):
        bound = as_dtype(lambd, v.dtype)
        return jnp.where(v > bound, v - bound, jnp.where(v < -bound, v + bound, v * 0))

    return _pointwise(fn, Kind.DEFAULT)(x)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _shrink_exact(x, soft: bool, lambd: float, nan_walk):
    return (_softshrink if soft else _hardshrink)(x, lambd)


@_shrink_exact.defjvp
def _shrink_exact_jvp(soft, lambd, nan_walk, primals, tangents):
    (x,), (t,) = primals, tangents
    grad = shrink_grad(x, t, lambd, _loops.mask(nan_walk, x))
    return _shrink_exact(x, soft, lambd, nan_walk), grad


# torch decomposes hardshrink and softshrink at their autograd key while tracing
# (``py_impl(DispatchKey.Autograd)``), before any table of ours, into a select whose
# derivative takes the scalar loop's rule at NaN everywhere (softshrink's: 0, where eager's
# scalar loop passes the gradient). Without that kernel, tracing takes eager's own autograd
# kernel (its derivative ``*shrink_backward``, lowered in ``_activation_backward``) and keeps
# the op for the lowering above. (Eager runs the C++ kernels, never these.)
for _op in (aten.hardshrink.default, aten.softshrink.default):
    _op.py_kernels.pop(torch._C.DispatchKey.Autograd, None)
    _op._dispatch_cache.clear()


@register(aten.softplus.default)
def softplus(self, beta=1, threshold=20):
    def fn(x):
        bx = x * beta
        # NOTE: exp sees 0 above the threshold (see elu's: inf there made the gradient NaN).
        small = jnp.where(bx > threshold, 0, bx)
        return jnp.where(bx > threshold, x, jnp.log1p(jnp.exp(small)) / beta)

    if jnp.issubdtype(self.dtype, jnp.floating):  # the derivative of eager's softplus_backward
        fn = _softplus_with_gradient(fn, beta, threshold)
    # NOTE: half precision computes in float32 (exp(12) overflows float16), as torch.
    return _pointwise(fn, Kind.DEFAULT)(self)


def _softplus_with_gradient(value, beta, threshold):
    """``value`` (softplus) whose derivative is eager's ``softplus_backward``: ``t * z / (z +
    1)``, ``z = exp(x * beta)``, where ``x * beta <= threshold``, ``t`` above; whose own
    derivative (double backward) is eager's ``softplus_double_backward``: masked by ``x * beta
    < threshold`` (0 at the threshold itself, where JAX's derivative of the select is not;
    NaN at NaN, as eager's product by the mask)."""
    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        bx = x * beta
        above = bx > threshold
        z = jnp.exp(jnp.where(above, 0, bx))
        live = (bx < threshold).astype(x.dtype)
        held = lax.stop_gradient(z)
        z = held + (z - held) * live  # (z itself; its derivative masked)
        # (t / (z + 1) * z: its transpose is eager's (grad * z) / (z + 1))
        return fn(x), jnp.where(above, t, t / (z + 1) * z)

    return fn


# eager's exp(-|x|) is subnormal for |x| past -log(float's least normal) (87.3 in float32,
# 708 in float64) and 0 only past -log(half its least subnormal): in between eager's
# log-sigmoid of a positive x is a negative subnormal (-0.0 once rounded to half precision),
# where XLA's CPU flushes exp to +0.0 and gives +0.0 (see _float_bits).
_EXP_NONZERO_BELOW = {
    np.dtype(np.float32): 150 * math.log(2),
    np.dtype(np.float64): 1075 * math.log(2),
}


def _log_sigmoid_value(x):
    z = jnp.exp(-jnp.abs(x))
    out = jnp.minimum(x, jnp.zeros((), x.dtype)) - jnp.log1p(z)
    if _float_bits.flushed(x.dtype) and x.dtype in _EXP_NONZERO_BELOW:
        underflowed = _float_bits.is_zero(out) & (jnp.abs(x) < _EXP_NONZERO_BELOW[x.dtype])
        out = jnp.where(underflowed, jnp.array(-0.0, x.dtype), out)
    return out


def _log_sigmoid_partial(x):
    # eager's log_sigmoid_backward: (x < 0) - sign * z / (1 + z), sign 1 below 0, else -1
    z = jnp.exp(-jnp.abs(x))
    below = x < 0
    sign = jnp.where(below, jnp.ones((), x.dtype), -jnp.ones((), x.dtype))
    return (below.astype(x.dtype) - sign * (z / (1 + z)),)


_log_sigmoid = with_partials(_log_sigmoid_value, _log_sigmoid_partial)


@register(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(self):
    # (computed in float32 for half precision and rounded once, as eager's kernel; the
    # buffer, exp(-|x|), is what eager's CPU kernel keeps for its backward, CUDA's is empty)
    compute, result = promote(Kind.DEFAULT, self)
    x = as_dtype(self, compute)
    out = as_dtype(_log_sigmoid(x), result)
    if math.prod(ctx().out[1].shape) == 0:
        return out, jnp.zeros(ctx().out[1].shape, result)
    return out, as_dtype(jnp.exp(-jnp.abs(x)), result)


def _in_dtype(dtype):
    """Rounding of a float32 value to ``dtype`` (half precision; identity otherwise), kept by
    XLA (which may drop a float32 -> half -> float32 convert pair: excess precision)."""
    if is_half(dtype):
        return functools.partial(half_rounding, dtype=np.dtype(dtype))
    return lambda v: v


def _logit_with_gradient(eps, nan_walk=None):
    """logit whose gradient is eager's kernel's (``logit_backward``): ``dy / (x * (1 - x))``
    inside ``[lo, hi]``, both ends included, 0 outside (NaN outside [0, 1] without eps), each
    operation rounded to the input's dtype (half precision computes each in float32 and
    rounds it), with ``lo = eps`` and ``hi = 1 - lo`` in that dtype."""

    @jax.custom_jvp
    def fn(x):
        return _logit(x, eps)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return fn(x), logit_grad(x, t, eps, _loops.mask(nan_walk, x))

    return fn


def logit_grad(x, t, eps, vec):
    """Eager's ``logit_backward(t, x, eps)`` (see ``_logit_with_gradient``); a NaN ``x`` is
    inside ``[lo, hi]`` in eager's scalar loop, outside in its vectorized one (where ``vec``,
    ``_loops.mask``)."""
    dtype = x.dtype
    compute = jnp.promote_types(dtype, jnp.float32)
    r = _in_dtype(dtype)
    xc = x.astype(compute)
    den = r(xc * r(1 - xc))
    # at x == 0 eager's scalar loop gives t * inf (+inf at -0), its vectorized one t / den
    scalar_zero = xc == 0 if vec is None else (xc == 0) & ~vec
    den = jnp.where(scalar_zero, jnp.zeros_like(den), den)
    t = t.astype(compute)
    if eps is None or eps < 0:  # NaN outside [0, 1] (as t / NaN: the tangent's rule)
        den = jnp.where((xc >= 0) & (xc <= 1), den, jnp.nan)
    else:  # 0 outside [lo, hi]: masked before dividing by a denominator made 1 there
        lo = np.float64(eps).astype(np.float32 if dtype != jnp.float64 else np.float64)
        lo = np.asarray(lo).astype(dtype)
        hi = np.asarray(np.asarray(1, compute) - np.asarray(lo, compute)).astype(dtype)
        inside = _loops.at_nan(x, ~((x < lo) | (x > hi)), False, vec)
        t, den = jnp.where(inside, t, 0), jnp.where(inside, den, 1)
    return (t / den).astype(dtype)


@register(aten.logit.default)
def logit(self, eps=None):
    if not jnp.issubdtype(self.dtype, jnp.floating):
        return _logit(self, eps)
    nan_walk = _loops.walk(_logit_kernel, None if eps is None else float(eps))
    return _logit_with_gradient(eps, nan_walk)(self)


def _logit_kernel(x, eps):
    return aten.logit_backward(torch.ones_like(x), x, eps)


def _logit_clamp(x, lo, hi):
    """Eager's clamp of logit's input: ``x < lo ? lo : (x > hi ? hi : x)``. The lower end wins
    where eps > 0.5 makes lo > hi (jnp.clip gives the upper one there)."""
    return jnp.where(x < lo, lo, jnp.where(x > hi, hi, x))


def _logit(self, eps):
    def fn(x):
        x = x if eps is None else _logit_clamp(x, eps, 1 - eps)
        return jnp.log(x / (1 - x))

    if self.dtype == jnp.float16:
        # NOTE: torch's float16/bfloat16 logit rounds 1 - x and x / (1 - x) to the half type.
        return as_dtype(jnp.log(_half_ratio(self, eps).astype(jnp.float32)), self.dtype)
    if self.dtype == jnp.bfloat16:
        # XLA keeps bfloat16 intermediates in float32 (excess precision): round explicitly.
        bf16 = functools.partial(lax.reduce_precision, exponent_bits=8, mantissa_bits=7)
        x = self.astype(jnp.float32)
        if eps is not None:
            x = _logit_clamp(x, bf16(jnp.float32(eps)), bf16(jnp.float32(1 - eps)))
        return as_dtype(jnp.log(bf16(x / bf16(1 - x))), self.dtype)
    return _pointwise(fn, Kind.INT_TO_FLOAT)(self)


def _half_ratio(x, eps):
    x = x if eps is None else _logit_clamp(x, as_dtype(eps, x.dtype), as_dtype(1 - eps, x.dtype))
    return x / (1 - x)
