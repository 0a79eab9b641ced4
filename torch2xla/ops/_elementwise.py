"""Elementwise ops. Every op declares its torch type-promotion kind; ``_pointwise`` owns the
policy (cast to the computation dtype, compute, cast to the result dtype)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops import (
    _autodiff,  # noqa: F401  (defines torch2xla::stop_gradient)
    _complex,
    _complex_arith,
    _complex_trig,
    _loops,
)
from torch2xla.ops import _float_bits as fbits
from torch2xla.ops._common import (
    Kind,
    as_dtype,
    cast,
    is_array,
    is_half,
    jdt,
    promote,
    scalar_tail,
)
from torch2xla.ops._derivatives import with_partials
from torch2xla.ops._powers_of_two import exact_exp2
from torch2xla.ops._registry import AFTER_CONVOLUTION, KEPT_BY_USERS, ctx, register
from torch2xla.runtime._interop import torch_dtype

aten = ops.aten


def _operands(args, kind: Kind, scalar_in_opmath: bool = False):
    """``args`` in the computation dtype, and the result dtype.

    # NOTE: torch converts every operand to the common dtype before computing in the wider
    # opmath dtype, so a 0-dim float32 tensor or Python float meeting a float16 tensor is
    # rounded to float16 first (jnp would keep its full value). CPU mul and the divisions are
    # the exception: for float16/bfloat16 they keep a scalar divisor's full value. (CUDA
    # kernels keep it for either operand and for more ops; this follows the CPU kernels.)
    """
    compute, result = promote(kind, *args)
    if kind in (Kind.DEFAULT, Kind.INT_TO_FLOAT, Kind.BOOL_TO_LONG):
        common = result  # e.g. true division converts int operands straight to the float dtype
    else:
        common, _ = promote(Kind.NO_OPMATH, *args)
    out = []
    for i, a in enumerate(args):
        scalar = not is_array(a) or a.ndim == 0
        if not (scalar_in_opmath and i == 1 and scalar and is_half(common)):
            a = as_dtype(a, common)
        out.append(as_dtype(a, compute))
    return out, result


def _pointwise(jfn, kind: Kind = Kind.DEFAULT, scalar_in_opmath: bool = False):
    def lowering(*args):
        operands, result = _operands(args, kind, scalar_in_opmath)
        return as_dtype(jfn(*operands), result)

    return lowering


def _wide(jfn):
    """``jfn`` computed in float64 for float32 inputs.

    # NOTE: XLA's float32 exp2/sinh/cosh reduce their argument in float32 (x * ln 2,
    # x - ln 2), losing up to ~30 ulp for |x| in the tens; eager's libm is within 1 ulp.
    # Its float32 special functions are further off: lgamma(1) and lgamma(2) were 4.8e-7, not
    # 0 (0.15% off at 0.999), erfinv(0.999) 16 ulp, erfc(0.999) 5 ulp.
    """

    def fn(x):
        if x.dtype == jnp.float32:
            return jfn(x.astype(jnp.float64)).astype(jnp.float32)
        return jfn(x)

    return fn


WIDE_EXP2 = _wide(jnp.exp2)


def _real_exp2(x):
    """eager's exp2: exact at whole numbers (XLA's float64 exp2 was a unit off there)."""
    if x.dtype in (jnp.float32, jnp.float64):
        return exact_exp2(x, WIDE_EXP2)
    return WIDE_EXP2(x)


def _max(a, b):
    # NOTE: torch's max/min keep the first operand on ties (maximum(-0.0, 0.0) is -0.0) and
    # propagate NaN from either; XLA's max/min may return the other zero. (maximum/minimum
    # split the gradient at ties, see _balanced; clamp's derivative is in _clamp.py.)
    return jnp.where(jnp.isnan(a) | (a >= b), a, b)


def _min(a, b):
    return jnp.where(jnp.isnan(a) | (a <= b), a, b)


def _balanced(pick, jnp_fn, greater):
    """``pick``'s values with eager's derivative of maximum/minimum: half the gradient to each
    operand where they are equal, none to the operand that loses (``greater(a, b)``: ``a``
    wins), all of it to both where neither wins, which a NaN makes (``maximum(nan, 0)``: eager
    gives both operands the whole gradient; JAX's derivative gave them none)."""

    @jax.custom_jvp
    def fn(a, b):
        return pick(a, b)

    @fn.defjvp
    def fn_jvp(primals, tangents):
        a, b = primals
        out = pick(a, b)
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            return out, jax.jvp(jnp_fn, primals, tangents)[1]
        ta, tb = (t.astype(out.dtype) for t in tangents)
        tie = a == b
        half, zero, one = (jnp.asarray(v, out.dtype) for v in (0.5, 0.0, 1.0))
        to_a = jnp.where(tie, half, jnp.where(greater(b, a), zero, one))
        to_b = jnp.where(tie, half, jnp.where(greater(a, b), zero, one))
        return out, jnp.broadcast_to(to_a * ta + to_b * tb, out.shape)

    return fn


def _fmax(a, b):
    return jnp.where(jnp.isnan(b) | (a >= b), a, b)


def _fmin(a, b):
    return jnp.where(jnp.isnan(b) | (a <= b), a, b)


# (XLA's CPU reads subnormals as zero: zeros and signs read from the bits, see _float_bits)
_negative, _is_zero, _nonzero = fbits.negative, fbits.is_zero, fbits.nonzero


def relu_value(x):
    """torch's relu value: 0 where ``x < 0``; ``x`` itself elsewhere (-0.0 and NaN included).

    # NOTE: jax.nn.relu and jnp.maximum(x, 0) give +0.0 at -0.0, and XLA on CPU flushes a
    # subnormal through max; torch keeps -0.0 and positive subnormals.
    """
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.where(x < 0, jnp.zeros_like(x), x)
    return jnp.where(_negative(x), jnp.zeros_like(x), x)


def _channels_last(fn, *xs):
    """``fn(*xs)`` computed on ``xs`` moved to channels-last (dim 1 last), its results moved
    back.

    XLA's CPU compiler runs convolutions channels-last and moves its layout transposes
    through elementwise ops with one non-scalar operand, but stops at a select of a compare
    of ``x`` and ``x`` (two operands): every relu then costs two transposed copies of the
    activation. Computed here on explicitly transposed data, the inner transposes cancel
    against the convolution's and the outer one moves on to the next convolution.
    """
    ndim = xs[0].ndim
    perm = (0, *range(2, ndim), 1)
    back = (0, ndim - 1, *range(1, ndim - 1))
    out = fn(*(jnp.transpose(x, perm) for x in xs))
    return jax.tree.map(lambda o: jnp.transpose(o, back), out)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _relu_exact(x, channels_last: bool, keep_mask: bool):
    return _channels_last(relu_value, x) if channels_last else relu_value(x)


@_relu_exact.defjvp
def _relu_exact_jvp(channels_last, keep_mask, primals, tangents):
    (x,), (t,) = primals, tangents

    def fn(x, t):
        y = relu_value(x)
        # NOTE: torch's backward (threshold_backward on the result) is 0 where result <= 0
        # (x == 0 and -0.0 included) and the gradient elsewhere (NaN and subnormals included);
        # jnp.where's derivative would pass the gradient at 0 and jnp.maximum's would halve it.
        if keep_mask:  # a bool mask kept for the backward (``ne`` results are kept)
            return y, jnp.where(_nonzero(y), t, jnp.zeros_like(t))
        # the mask recomputed in the backward from ``y`` (kept anyway by the next layer: the
        # training policy recomputes ``eq`` of a float's bits, ``_residuals._BIT_OPS``)
        return y, jnp.where(_is_zero(y), jnp.zeros_like(t), t)

    # The gradient's select too on channels-last data: the mask the backward keeps is then
    # channels-last, as the backward's convolutions and batch norms read their data (in NCHW
    # every use of it in the backward was a transposed read; CPU CNN training step -13%).
    return _channels_last(fn, x, t) if channels_last else fn(x, t)


def relu(x, channels_last: bool = False, keep_mask: bool = True):
    """torch's relu: value (-0.0, NaN) and gradient (0 at 0, NaN passed) as eager's;
    ``channels_last`` computes it on channels-last data (see ``_channels_last``); without
    ``keep_mask`` training recomputes the gradient's mask from the output instead of keeping it
    (for an output the next layer keeps anyway)."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return relu_value(x)
    return _relu_exact(x, channels_last and x.ndim in (4, 5), keep_mask)


def _after_cpu_convolution(x) -> bool:
    """Whether the node being lowered (a 4-D or 5-D activation on CPU) reads a convolution's
    output (``AFTER_CONVOLUTION``, ``capture/_annotate.py``): there XLA's CPU compiler gives
    the data channels-last (see ``_channels_last``). Elsewhere channels-last would add
    transposed reads (measured on a 4-D attention's gradient)."""
    device = getattr(getattr(ctx().out, "device", None), "type", None)
    return device == "cpu" and x.ndim in (4, 5) and ctx().node.meta.get(AFTER_CONVOLUTION, False)


def _relu(x):
    channels_last = _after_cpu_convolution(x)
    # NOTE: a channels-last relu (CPU) recomputes its mask only where every user keeps its
    # output: with a shortcut reading it too, the CPU CNN's training step measured 2% slower
    # (29.4 -> 30.1 ms, 11 runs each) for 0.5 of 19.6 MiB of residuals.
    # (a user keeps the output: capture/_annotate.kept_by_users)
    users = ctx().node.meta.get(KEPT_BY_USERS, "none")
    kept = users == "every" if channels_last else users != "none"
    return relu(x, channels_last, keep_mask=not kept)


def _unary(op, jfn, kind: Kind = Kind.DEFAULT) -> None:
    register(op)(_pointwise(jfn, kind))


@jax.custom_jvp
def _real_rsqrt(x):
    return lax.rsqrt(x)


@_real_rsqrt.defjvp
def _real_rsqrt_jvp(primals, tangents):
    # eager's formula: -0.5 * grad * result**3 (+inf at -0, where rsqrt is -inf; JAX's
    # -0.5 * rsqrt(x) / x gave -inf)
    (x,), (t,) = primals, tangents
    r = _real_rsqrt(x)
    return r, (-0.5 * t) * (r * r * r)


# -- unary float ops (ints promote to the default float dtype) ---------------------------------
for _op, _fn in [
    (aten.exp, _complex.exp),
    (aten.exp2, functools.partial(_complex.exp2, real=_real_exp2)),
    (aten.expm1, _complex.expm1),
    (aten.log2, functools.partial(_complex.log, real=jnp.log2, base=2)),
    (aten.log10, functools.partial(_complex.log, real=jnp.log10, base=10)),
    (aten.log1p, _complex.log1p),
    (aten.sqrt, _complex.sqrt),
    (aten.rsqrt, functools.partial(_complex.rsqrt, real=_real_rsqrt)),
    (aten.sin, _complex_trig.sin),
    (aten.cos, _complex_trig.cos),
    (aten.tan, _complex_trig.tan),
    (aten.asin, _complex_trig.asin),
    (aten.acos, _complex_trig.acos),
    (aten.atan, _complex_trig.atan),
    (aten.tanh, _complex.tanh),
    (aten.asinh, _complex_trig.asinh),
    (aten.acosh, _complex_trig.acosh),
    (aten.atanh, _complex_trig.atanh),
    (aten.sigmoid, functools.partial(_complex.sigmoid, real=jax.nn.sigmoid)),
    (aten.erf, jax.scipy.special.erf),
    (aten.erfc, _wide(jax.scipy.special.erfc)),
    (aten.erfinv, _wide(jax.scipy.special.erfinv)),
    (aten.reciprocal, _complex.reciprocal),
]:
    _unary(_op.default, _fn, Kind.INT_TO_FLOAT)


# The largest |x| whose exp is finite, by the float width eager's vectorized loop computes in.
_EXP_FINITE = {
    jnp.dtype(jnp.float64): 709.782712893384,
    jnp.dtype(jnp.float32): float(np.float32(88.72283172607422)),
}


def _hyperbolic(odd: bool):
    """sinh (``odd``) or cosh, as eager's CPU loop computes them, and their derivatives as
    eager's (``grad * cosh(x)``, ``grad * sinh(x)``, by the same loop).

    # NOTE: eager's vectorized sinh/cosh (Sleef) give +-inf once exp(|x|) overflows
    # (|x| > 88.7228 in float32, where half precision computes too; 709.7827 in float64), the
    # true value stays finite up to |x| = 89.4159 (710.4758); its scalar tail (libm) is exact
    # there, as XLA's is everywhere: the vectorized positions (``_loops``; the block probed
    # at 89 and 710, AVX-512 on a CPU with it) are set to eager's infinity.
    """

    def lowering(self):
        (x,), result = _operands((self,), Kind.INT_TO_FLOAT, False)
        if not jnp.issubdtype(x.dtype, jnp.floating):
            complex_fn = _complex_trig.sinh if odd else _complex_trig.cosh
            return as_dtype(complex_fn(x, real=None), result)
        cut = _EXP_FINITE.get(jnp.dtype(x.dtype))
        walk = None
        if cut is not None:
            probes = (710.0,) if x.dtype == jnp.float64 else (89.0,)
            loop = self.dtype if jnp.issubdtype(self.dtype, jnp.floating) else result
            kernel = torch.sinh if odd else torch.cosh
            walk = _loops.walk(kernel, probes=probes, dtype=torch_dtype(jnp.dtype(loop)))

        def value(x, sinh: bool):
            y = _wide(jnp.sinh if sinh else jnp.cosh)(x)
            vec = _loops.mask(walk, x)
            if vec is None:
                return y
            inf = jnp.copysign(jnp.asarray(jnp.inf, x.dtype), x) if sinh else jnp.inf
            return jnp.where((jnp.abs(x) > cut) & vec, jnp.asarray(inf, x.dtype), y)

        fn = with_partials(lambda x: value(x, odd), lambda x: (value(x, not odd),))
        return as_dtype(fn(x), result)

    return lowering


register(aten.sinh.default)(_hyperbolic(odd=True))
register(aten.cosh.default)(_hyperbolic(odd=False))


def _after_exp(jfn, kind: Kind, positions: tuple[int, ...], scalar_in_opmath: bool = False):
    """The lowering of ``jfn`` with its operands at ``positions`` behind an optimization
    barrier where an ``exp`` made them.

    # NOTE: XLA's algebraic simplifier rewrites ``log(exp(x))`` to ``x`` and
    # ``exp(a) / exp(b)`` to ``exp(a - b)``: eager's exp overflows first (log(exp(100.)) is
    # inf, exp(100.) / exp(50.) inf), the rewrite returned finite values.
    """

    def lowering(*args):
        operands, result = _operands(args, kind, scalar_in_opmath)
        node = ctx().node
        operands = [
            lax.optimization_barrier(a) if k in positions and _exp_of(node.args[k]) else a
            for k, a in enumerate(operands)
        ]
        return as_dtype(jfn(*operands), result)

    return lowering


register(aten.log.default)(_after_exp(_complex.log, Kind.INT_TO_FLOAT, (0,)))


def _exp_of(arg) -> bool:
    return getattr(arg, "target", None) in (aten.exp.default, aten.exp_.default)


def _truth(x):
    """``x != 0`` as a bool array (a float's subnormals are true, ``_float_bits``)."""
    if jnp.issubdtype(x.dtype, jnp.inexact):
        return fbits.nonzero(x)
    return x.astype(bool)


def _sign(x):
    # NOTE: torch.sign(NaN) is 0 ((0 < x) - (x < 0)); jnp.sign(NaN) is NaN.
    if x.dtype == jnp.bool_:
        return x
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return _complex.sgn(x, jnp.sign)
    if jnp.issubdtype(x.dtype, jnp.floating) and fbits.flushed(x.dtype):
        positive, negative = fbits.positive(x), fbits.negative(x)  # (subnormals)
    else:
        positive, negative = x > 0, x < 0
    return positive.astype(x.dtype) - negative.astype(x.dtype)


# relu is a select, exact in any float dtype: computed in its input's (a half-precision relu
# widened to float32 would keep a float32 output for its backward beside the half-precision
# copy the next layer keeps).
_unary(aten.relu.default, _relu, Kind.NO_OPMATH)

# digamma and polygamma live in _special (their gradients need torch's trigamma).

# -- unary ops that keep the input dtype -------------------------------------------------------
for _op, _fn in [
    (aten.neg, jnp.negative),
    (aten.ceil, jnp.ceil),
    (aten.floor, jnp.floor),
    (aten.round, jnp.round),
    (aten.trunc, jnp.trunc),
    (aten.sign, _sign),
    (aten.bitwise_not, jnp.invert),
]:
    _unary(_op.default, _fn, Kind.DEFAULT)


@jax.custom_jvp
def _abs(x):
    return _complex.abs_(x) if jnp.issubdtype(x.dtype, jnp.complexfloating) else jnp.abs(x)


@_abs.defjvp
def _abs_jvp(primals, tangents):
    # NOTE: torch's derivative of abs at 0 is sign(0) = 0; JAX's is 1. (The primal is
    # ``_abs`` itself: a derivative of this rule, reverse over reverse, differentiates it too)
    (x,), (t,) = primals, tangents
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jax.jvp(jnp.abs, (x,), (t,))
    return _abs(x), t * _sign(x)


_unary(aten.abs.default, _abs, Kind.COMPLEX_TO_FLOAT)  # |complex| is real, as in torch
_unary(aten.isnan.default, jnp.isnan, Kind.ALWAYS_BOOL)
_unary(aten.isinf.default, jnp.isinf, Kind.ALWAYS_BOOL)
_unary(aten.logical_not.default, lambda x: ~_truth(x), Kind.ALWAYS_BOOL)
_unary(aten.signbit.default, jnp.signbit, Kind.ALWAYS_BOOL)
_unary(aten.sgn.default, _sign, Kind.DEFAULT)
_unary(aten.frac.default, lambda x: x - jnp.trunc(x), Kind.DEFAULT)


@register(aten.isfinite.default)
def isfinite(self):
    return (
        jnp.isfinite(self) if jnp.issubdtype(self.dtype, jnp.inexact) else jnp.ones_like(self, bool)
    )


# -- binary ops (pow, atan2, hypot, copysign, nextafter, xlogy: ``_binary_math``) ---------

for _ops, _fn, _kind in [
    ((aten.bitwise_and.Tensor, aten.bitwise_and.Scalar), jnp.bitwise_and, Kind.DEFAULT),
    ((aten.bitwise_or.Tensor, aten.bitwise_or.Scalar), jnp.bitwise_or, Kind.DEFAULT),
    ((aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar), jnp.bitwise_xor, Kind.DEFAULT),
    (
        (
            aten.bitwise_left_shift.Tensor,
            aten.bitwise_left_shift.Tensor_Scalar,
            aten.bitwise_left_shift.Scalar_Tensor,  # ``1 << t``
            aten.__lshift__.Tensor,
            aten.__lshift__.Scalar,
        ),
        jnp.left_shift,
        Kind.DEFAULT,
    ),
    (
        (
            aten.bitwise_right_shift.Tensor,
            aten.bitwise_right_shift.Tensor_Scalar,
            aten.bitwise_right_shift.Scalar_Tensor,
            aten.__rshift__.Tensor,
            aten.__rshift__.Scalar,
        ),
        jnp.right_shift,
        Kind.DEFAULT,
    ),
    ((aten.logical_and.default,), lambda a, b: _truth(a) & _truth(b), Kind.ALWAYS_BOOL),
    ((aten.logical_or.default,), lambda a, b: _truth(a) | _truth(b), Kind.ALWAYS_BOOL),
    ((aten.logical_xor.default,), lambda a, b: _truth(a) ^ _truth(b), Kind.ALWAYS_BOOL),
]:
    register(*_ops)(_pointwise(_fn, _kind))


def _comparison(jfn):
    """A comparison lowering: ``jfn`` on the operands in their common dtype, with floats'
    subnormals read as eager reads them (``_float_bits.compare``) unless one operand is a
    Python number the dtype holds as a normal value (then XLA's comparison is exact)."""

    def lowering(self, other):
        (a, b), result = _operands((self, other), Kind.ALWAYS_BOOL)
        if jnp.issubdtype(a.dtype, jnp.inexact) and not any(
            fbits.normal_number(v, a.dtype) for v in (self, other)
        ):
            return as_dtype(fbits.compare(jfn, a, b), result)
        return as_dtype(jfn(a, b), result)

    lowering.__name__ = jfn.__name__
    return lowering


for _ops, _fn in [
    ((aten.eq.Tensor, aten.eq.Scalar), jnp.equal),
    ((aten.ne.Tensor, aten.ne.Scalar), jnp.not_equal),
    ((aten.lt.Tensor, aten.lt.Scalar), jnp.less),
    ((aten.le.Tensor, aten.le.Scalar), jnp.less_equal),
    ((aten.gt.Tensor, aten.gt.Scalar), jnp.greater),
    ((aten.ge.Tensor, aten.ge.Scalar), jnp.greater_equal),
]:
    register(*_ops)(_comparison(_fn))


@register(aten.where.self)
def where(condition, self, other):
    _compute, result = promote(Kind.DEFAULT, self, other)
    return jnp.where(condition, as_dtype(self, result), as_dtype(other, result))


def _kernel_operands(compute, result, *args):
    """``args`` as eager's kernels of several tensors (lerp, addcmul, addcdiv) read them: a
    tensor converted to the result's dtype by TensorIterator, then to the computation dtype;
    a Python number straight to the computation dtype (the kernels take it as ``opmath_t``).

    # NOTE: a 0-dim float32 tensor weighing float16 tensors (``torch.lerp(a, b,
    # torch.tensor(0.3))``, ``addcmul(h, h, torch.tensor(0.1))``) is rounded to float16 first;
    # kept in float32 it moved a unit in the last place in a third of the elements.
    """
    return [as_dtype(as_dtype(v, result) if is_array(v) else v, compute) for v in args]


@register(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(self, end, weight):
    compute, result = promote(Kind.DEFAULT, self, end, weight)
    s, e, w = _kernel_operands(compute, result, self, end, weight)
    if jnp.issubdtype(compute, jnp.complexfloating):
        return as_dtype(_complex_arith.lerp(s, e, w), result)
    # NOTE: torch interpolates from the nearer end (exact at weight 1, keeps -0.0 at 0.5):
    # its vectorized loop as ``coeff * (e - s) + base`` (a fused multiply-add) with
    # ``coeff, base = (w, s)`` where |w| < 0.5, else ``(w - 1, e)``; its scalar loop (the
    # last ``numel % (2 * W)`` elements) as ``s + w (e - s)`` or ``e - (e - s)(1 - w)``. The zeros'
    # signs differ at weight 1: lerp(0, -0, 1) is -0 in the first, +0 in the second.
    on_cuda = ctx().on_cuda

    def value(s, e, w):
        diff = e - s
        small = jnp.abs(w) < 0.5
        scalar = jnp.where(small, s + w * diff, e - diff * (1 - w))
        if on_cuda:
            return scalar
        vector = jnp.where(small, w, w - 1) * diff + jnp.where(small, s, e)
        return jnp.where(scalar_tail(vector.shape, result), scalar, vector)

    if not jnp.issubdtype(compute, jnp.floating):
        return as_dtype(value(s, e, w), result)
    # eager's derivatives: grad * (1 - weight), grad * weight, grad * (end - self) (JAX's,
    # through the unchosen branch, are NaN where end - self is infinite)
    lerp_ = with_partials(value, lambda s, e, w: (1 - w, w, e - s))
    return as_dtype(lerp_(*jnp.broadcast_arrays(s, e, w)), result)


@register(aten.addcmul.default)
def addcmul(self, tensor1, tensor2, *, value=1):
    compute, result = promote(Kind.DEFAULT, self, tensor1, tensor2)
    s, a, b = _kernel_operands(compute, result, self, tensor1, tensor2)
    if jnp.issubdtype(compute, jnp.complexfloating):
        return as_dtype(_complex_arith.addcmul(s, a, b, value), result)
    return as_dtype(s + as_dtype(value, compute) * a * b, result)


@register(aten.addcdiv.default)
def addcdiv(self, tensor1, tensor2, *, value=1):
    compute, result = promote(Kind.DEFAULT, self, tensor1, tensor2)
    s, a, b = _kernel_operands(compute, result, self, tensor1, tensor2)
    if jnp.issubdtype(compute, jnp.complexfloating):
        return as_dtype(_complex_arith.addcdiv(s, a, b, value), result)
    return as_dtype(s + as_dtype(value, compute) * a / b, result)


# Dynamo rewrites `t.addcmul_(t1, t2, value=v)` (optimizer steps) to fma(t1 * t2, v, t).
@register(ops.prims.fma.default)
def fma(a, b, c):
    compute, result = promote(Kind.DEFAULT, a, b, c)
    return as_dtype(as_dtype(a, compute) * as_dtype(b, compute) + as_dtype(c, compute), result)


@register(aten.nan_to_num.default)
def nan_to_num(self, nan=None, posinf=None, neginf=None):
    if not jnp.issubdtype(self.dtype, jnp.inexact):
        return self
    if jnp.issubdtype(self.dtype, jnp.complexfloating):  # each part on its own, as eager
        parts = (nan_to_num(p, nan, posinf, neginf) for p in (jnp.real(self), jnp.imag(self)))
        return lax.complex(*parts)
    fi = jnp.finfo(self.dtype)

    def value(v, default):
        # NOTE: eager casts the replacement to the tensor's dtype: past its range it is an
        # infinity (nan=1e10 on float16 gives inf), where jnp.nan_to_num clips.
        with np.errstate(over="ignore"):
            return jnp.asarray(np.asarray(default if v is None else v, self.dtype))

    x = jnp.where(jnp.isnan(self), value(nan, 0.0), self)
    x = jnp.where(self == jnp.inf, value(posinf, fi.max), x)
    return jnp.where(self == -jnp.inf, value(neginf, fi.min), x)


@register(aten.heaviside.default)
def heaviside(self, values):
    # torch's rule: ``values`` where x == 0, else x > 0 (0 at NaN, where jnp.heaviside gives
    # NaN); compared from the bits, as subnormals are not zero to eager.
    compute, result = promote(Kind.DEFAULT, self, values)
    x, v = as_dtype(self, compute), as_dtype(values, compute)
    if jnp.issubdtype(compute, jnp.floating):
        zero, positive = _is_zero(x), ~_negative(x) & _nonzero(x) & ~jnp.isnan(x)
    else:
        zero, positive = x == 0, x > 0
    return as_dtype(jnp.where(zero, v, positive.astype(compute)), result)


@register(aten._to_copy.default)
def _to_copy(
    self,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=None,
    non_blocking=False,
    memory_format=None,
):
    # NOTE: device moves are the bridge's job (outputs land on the input's device).
    if not is_array(self):  # a Python number (functorch's batching leaves wrapped numbers)
        return jnp.asarray(self, dtype=jdt(ctx().out.dtype))
    return self if dtype is None else cast(self, jdt(dtype))


@register(ops.prims.convert_element_type.default)
def convert_element_type(a, dtype):
    return cast(a, jdt(dtype))


@register(aten.clone.default)
def clone(self, *, memory_format=None):
    return self


@register(ops.prims.copy_strided.default)
def copy_strided(a, stride):
    # (a copy laid out with ``stride``: the layout is the bridge's, from the node's value;
    # decompositions put it after ``index_fill``/``lerp`` of a non-contiguous tensor)
    return a


@register(aten.alias.default, aten.lift_fresh_copy.default)
def alias(self):
    return self


@register(aten.scalar_tensor.default, ops.prims.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    from torch2xla.ops._common import out_dtype

    return as_dtype(s, out_dtype())
