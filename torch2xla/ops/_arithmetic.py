"""Add, subtract, multiply and divide (with their rounding modes and remainders), kept exact
against XLA's algebraic simplifier: constant operands behind optimization barriers, zero sums
as selects, and eager's half-precision rounding of ``alpha`` products."""

from __future__ import annotations

import math
import operator

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops import _complex, _complex_arith
from torch2xla.ops._bounds import check_divisor
from torch2xla.ops._common import (
    Kind,
    as_dtype,
    is_array,
    is_half,
    promote,
    rounded_to,
    scalar_tail,
)
from torch2xla.ops._derivatives import with_partials
from torch2xla.ops._elementwise import _exp_of, _operands, _pointwise
from torch2xla.ops._float_bits import positive_zero
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _kept_constants(
    jfn, kind: Kind, scalar_in_opmath: bool = False, after_exp: tuple[int, ...] = ()
):
    """The lowering of ``jfn`` (add, subtract, multiply, divide) with its floating operands
    that are constants of the program (Python numbers, tensors made in the function from
    values: ``torch.tensor(0.5)``) behind an optimization barrier; and those at positions
    ``after_exp`` that an ``exp`` made (``_after_exp``).

    # NOTE: XLA's algebraic simplifier reassociates arithmetic with constants as if floats were
    # reals: ``(x + 12582912.0) - 12582912.0`` (rounding to an integer by the float's
    # precision, as fake quantization writes it) became ``x``, ``(x + 0.1) + 0.2`` became
    # ``x + 0.3``. Eager rounds each step. A constant it cannot see stays a scalar operand of
    # the fused loop. (It divides by a broadcast divisor as a multiply by its reciprocal:
    # ``true_divide`` below keeps such quotients exact.)
    # (A bool operand converted to a float is kept opaque by ``_common.cast``.)
    """

    def lowering(*args):
        operands, result = _operands(args, kind, scalar_in_opmath)
        node = ctx().node
        kept = [
            not is_array(a) or _made_in_program(n) or (k in after_exp and _exp_of(n))
            for k, (a, n) in enumerate(zip(args, [*node.args, *([None] * len(args))]))
        ]
        operands = [_opaque(a) if c else a for a, c in zip(operands, kept)]
        return as_dtype(jfn(*operands), result)

    return lowering


def _opaque(a):
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        return a
    return lax.optimization_barrier(a)


# NOTE: eager's CPU add/sub with ``alpha`` on float16/bfloat16 tensors computes in float32
# two ways: its vectorized loop multiplies by alpha rounded to the tensors' dtype and rounds
# once (``x.add_(grad, alpha=-lr)``, an SGD step), its scalar loop, which takes the last
# ``numel % (2 * W)`` elements (W: the elements of one vector register, 32 with AVX-512,
# else 16: ``scalar_tail``), rounds that product to the dtype first. Followed for the flat
# (row-major) positions of the result; where eager's loop runs along a strided or broadcast
# inner dimension its tails fall elsewhere (1 ulp).


def _half_alpha_product(b, alpha, common, prod):
    """``alpha * b`` (float32 ``b``; ``prod``: the product in float32) as eager's kernel for
    the half dtype ``common``."""
    vector = b * _opaque(as_dtype(as_dtype(alpha, common), b.dtype))
    scalar = as_dtype(as_dtype(vector, common), vector.dtype)
    if ctx().on_cuda:
        return prod  # (CUDA: alpha and the product in float32)
    shape = ctx().out.shape
    tail = scalar_tail(shape, common)
    return jnp.where(tail, jnp.broadcast_to(scalar, shape), jnp.broadcast_to(vector, shape))


def _with_alpha(jfn):
    def lowering(self, other, alpha=1):
        if jnp.issubdtype(promote(Kind.DEFAULT, self, other)[1], jnp.complexfloating):
            # (eager's complex a + alpha * b, ``_complex_arith``)
            factor = alpha if jfn is jnp.add else _complex_arith.negated(alpha)

            def complex_add(a, b):
                return _complex_arith.add(a, b, factor)

            return _kept_constants(complex_add, Kind.DEFAULT)(self, other)
        if alpha != 1:
            (a, b), result = _operands((self, other), Kind.DEFAULT)
            common, _ = promote(Kind.NO_OPMATH, self, other)
            prod = b * _opaque(as_dtype(alpha, b.dtype))
            if is_half(common):
                prod = _half_alpha_product(b, alpha, common, prod)
            return as_dtype(jfn(a, prod), result)
        return _kept_constants(jfn, Kind.DEFAULT)(self, other)

    return lowering


# NOTE: XLA's algebraic simplifier rewrites ``x + 0`` (and ``x - 0``, either zero) to ``x``
# where the zero is a constant of the program: a Python number, or a tensor made of zeros in
# the graph (``torch.zeros_like(x) + x``, an accumulator started at zeros). IEEE (and eager)
# make -0.0 + 0.0 = +0.0: the rewrite returned -0.0. The sums with such a zero are written
# as a select, which the simplifier keeps.
_ZERO_FILLS = {  # ops that make a constant tensor: where their fill value is (None: zeros)
    aten.full.default: 1,
    aten.full_like.default: 1,
    aten.new_full.default: 2,
    aten.scalar_tensor.default: 0,
    aten.zeros.default: None,
    aten.zeros_like.default: None,
    aten.new_zeros.default: None,
}
_SAME_VALUES = frozenset(  # ops whose result holds their first argument's values
    (
        aten.expand.default,
        aten.view.default,
        aten.reshape.default,
        aten.unsqueeze.default,
        aten.squeeze.dim,
        aten.squeeze.default,
        aten.clone.default,
        aten.lift_fresh_copy.default,
        aten._to_copy.default,
        aten.permute.default,
        aten.t.default,
        aten.slice.Tensor,
        aten.select.int,
        ops.prims.convert_element_type.default,
        ops.torch2xla.stop_gradient.default,  # (a constant in a training graph)
    )
)


def _constant_zero(arg, negative: bool = False) -> bool:
    """Whether the ATen argument ``arg`` is +0.0 (``negative``: -0.0) everywhere by
    construction: a constant of the program, which XLA's simplifier folds."""
    for _ in range(32):
        if isinstance(arg, bool):
            return False
        if isinstance(arg, int | float):
            return arg == 0 and (math.copysign(1.0, arg) < 0) == negative
        if getattr(arg, "op", None) == "get_attr":  # (``torch.tensor(0.0)`` in the function)
            value = operator.attrgetter(arg.target)(arg.graph.owning_module)
            return (
                isinstance(value, torch.Tensor)
                and value.numel() <= 1 << 16
                and bool(((value == 0) & (value.signbit() == negative)).all())
            )
        target = getattr(arg, "target", None)
        if target in _ZERO_FILLS:
            where = _ZERO_FILLS[target]
            if where is None:
                return not negative
            if where >= len(arg.args):
                return False
            arg = arg.args[where]
            continue
        if target not in _SAME_VALUES or not arg.args:
            return False
        arg = arg.args[0]
    return False


def _made_in_program(arg) -> bool:
    """Whether the ATen argument ``arg`` is a tensor the program makes from constant values
    (``torch.tensor(0.5)``, ``torch.full``), seen through views and copies."""
    for _ in range(32):
        if getattr(arg, "op", None) == "get_attr":
            return True
        target = getattr(arg, "target", None)
        if target in _ZERO_FILLS:
            return True
        if target not in _SAME_VALUES or not arg.args:
            return False
        arg = arg.args[0]
    return False


def _add_keeping_zero_signs(jfn, negated: bool):
    """``jfn`` (add or subtract) where one operand may be a constant zero: -0.0 plus +0.0
    (minus -0.0) is +0.0, not the folded -0.0."""

    def lowering(self, other, alpha=1):
        out = _with_alpha(jfn)(self, other, alpha)
        if not jnp.issubdtype(out.dtype, jnp.floating) or alpha == 0:
            return out
        node = ctx().node
        given = [*node.args[:2], None, None][:2]
        if "other" in node.kwargs:
            given[1] = node.kwargs["other"]
        # (x - 0.0 is x; x - (-0.0) is x + 0.0; 0.0 - x is not folded)
        zero = _constant_zero(given[1], negative=negated) or (
            not negated and _constant_zero(given[0])
        )
        if not zero:
            return out
        return positive_zero(out)

    return lowering


register(aten.add.Tensor, aten.add.Scalar)(_add_keeping_zero_signs(jnp.add, negated=False))
register(aten.sub.Tensor, aten.sub.Scalar)(_add_keeping_zero_signs(jnp.subtract, negated=True))


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(self, other, alpha=1):
    return _with_alpha(jnp.subtract)(other, self, alpha)


register(aten.mul.Tensor, aten.mul.Scalar)(
    _kept_constants(_complex.mul, Kind.DEFAULT, scalar_in_opmath=True)
)


def true_divide(a, b):
    """``a / b`` rounded once, as eager's CPU kernel divides.

    # NOTE: XLA's algebraic simplifier rewrites a division by a broadcast divisor (a number,
    # a 0-dim tensor, a row, a ``keepdim`` sum, an ``expand``) as a multiply by its
    # reciprocal: 1 ulp off eager's quotient in a third to a half of the elements (an
    # optimizer's ``exp_avg / bias_correction``, ``x / x.sum(-1, keepdim=True)``; a truncated
    # or floored quotient a whole unit off at an exact integer). A float32 quotient is computed
    # in float64 (the reciprocal's two roundings there are far below float32's: the float64
    # quotient rounds to the correctly rounded float32 one; the loop stays fused and as fast,
    # being memory-bound). A float64 one divides by a divisor of fewer elements spread over
    # the result behind a barrier (a divisor broadcast before the division, as ``expand``,
    # is not seen). CUDA's eager kernel itself multiplies by the reciprocal of a CPU scalar
    # divisor: left to XLA there.
    """
    if not (is_array(a) and is_array(b)) or _complex._is_complex(a, b):
        return _complex.div(a, b)
    if not jnp.issubdtype(b.dtype, jnp.floating) or ctx().on_cuda:
        return jnp.true_divide(a, b)
    if a.dtype == b.dtype == jnp.float32:
        wide = jnp.float64
        return jnp.true_divide(a.astype(wide), b.astype(wide)).astype(a.dtype)
    shape = jnp.broadcast_shapes(a.shape, b.shape)
    if b.shape == shape:
        return jnp.true_divide(a, b)
    return jnp.true_divide(a, lax.optimization_barrier(jnp.broadcast_to(b, shape)))


register(aten.div.Tensor, aten.div.Scalar)(
    _kept_constants(true_divide, Kind.INT_TO_FLOAT, scalar_in_opmath=True, after_exp=(1,))
)


@register(aten.round.decimals)
def round_decimals(self, *, decimals=0):
    # NOTE: eager's kernel scales by 10**|decimals| (a double, then its opmath type: float
    # for float16/bfloat16/float32) and divides for negative decimals:
    # nearbyint(x * p) / p, or nearbyint(x / p) * p. jnp.round multiplies by 10**decimals in
    # x's dtype: for decimals < 0 a different rounding (x * 0.001 is not x / 1000), and where
    # the power overflows float32 (decimals=40) x itself where eager's is NaN.
    if not jnp.issubdtype(self.dtype, jnp.floating):
        return self
    opmath = jnp.float64 if self.dtype == jnp.float64 else jnp.float32
    x = self.astype(opmath)
    with np.errstate(over="ignore"):  # (10**40 in float is inf, as eager's cast)
        p = np.asarray(_power_of_ten(abs(decimals))).astype(opmath)
    # (divided as eager rounds a quotient: XLA would multiply by the reciprocal of a constant)
    p = jnp.asarray(p)
    if decimals < 0:
        out = lax.round(true_divide(x, p), _EVEN) * p
    else:
        out = true_divide(lax.round(x * p, _EVEN), p)
    return out.astype(self.dtype)


_EVEN = lax.RoundingMethod.TO_NEAREST_EVEN


def _power_of_ten(n: int) -> float:
    """``std::pow(10, n)``: inf past double's range (Python raises)."""
    return 10.0**n if n <= 308 else float("inf")


def _trunc_div(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        # NOTE: torch truncates integer division toward zero; jnp's // floors.
        return lax.div(a, b)
    return jnp.trunc(true_divide(a, b))


def _trunc_div_rounded(dtype):
    """``_trunc_div`` of float32 operands whose quotient eager rounds to the half-precision
    ``dtype`` before truncating it."""

    def fn(a, b):
        return jnp.trunc(rounded_to(true_divide(a, b), dtype).astype(a.dtype))

    return fn


def _floor_div(a, b):
    if jnp.issubdtype(a.dtype, jnp.integer):
        return jnp.floor_divide(a, b)
    # NOTE: torch floors floats the way Python does, through fmod, not floor(a / b): inf // 1
    # is NaN, 1 // -inf is -1, and a quotient within 0.5 of the next integer rounds up to it.
    mod = jnp.fmod(a, b)
    div = true_divide(a - mod, b)
    div = jnp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    floor = jnp.floor(div)
    floor = jnp.where(div - floor > 0.5, floor + 1, floor)
    quotient = true_divide(a, b)
    out = jnp.where(div != 0, floor, jnp.copysign(jnp.zeros_like(div), quotient))
    return jnp.where(b == 0, quotient, out)


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _pointwise(true_divide, Kind.INT_TO_FLOAT, scalar_in_opmath=True)(self, other)
    check_divisor(other)
    # NOTE: eager's derivative of a rounded quotient is 0 (JAX's, through floor or trunc of
    # a / b, is 0 * inf = NaN where b is 0)
    self, other = (lax.stop_gradient(v) if is_array(v) else v for v in (self, other))
    fn = {"trunc": _trunc_div, "floor": _floor_div}[rounding_mode]
    common, _ = promote(Kind.NO_OPMATH, self, other)
    if rounding_mode == "trunc" and is_half(common) and is_array(other) and other.size != 1:
        # NOTE: eager's CPU kernel divides half-precision tensors in their dtype (a / b
        # rounded) and truncates that: 3 / bf16(0.1) = 29.97 rounds to 30. A divisor of one
        # element (a number, a broadcast) is divided in float32 (29).
        fn = _trunc_div_rounded(common)
    return _pointwise(fn, Kind.DEFAULT, scalar_in_opmath=True)(self, other)


@register(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(self, other):
    check_divisor(other)
    return _pointwise(_floor_div, Kind.DEFAULT, scalar_in_opmath=True)(self, other)


def _checked_divisor(lowering):
    def checked(self, other):
        check_divisor(other)
        return lowering(self, other)

    return checked


# NOTE: torch.fmod keeps the dividend's sign (C fmod); torch.remainder the divisor's (Python %).
register(aten.fmod.Tensor, aten.fmod.Scalar)(_checked_divisor(_pointwise(jnp.fmod, Kind.DEFAULT)))
# eager's derivative of remainder in the divisor is -floor(a / b) by its own floor division,
# NaN where a is infinite (JAX's floor(a / b) is inf there). (The quotient is computed with
# the forward, in the lowering's context, and passed in undifferentiated.)
_remainder_given_quotient = with_partials(
    lambda a, b, _: jnp.remainder(a, b),
    lambda a, b, q: (jnp.ones_like(a), -q, jnp.zeros_like(q)),
)


def _remainder(a, b):
    if not jnp.issubdtype(jnp.result_type(a, b), jnp.floating):
        return jnp.remainder(a, b)
    quotient = lax.stop_gradient(_floor_div(*jnp.broadcast_arrays(a, b)))
    return _remainder_given_quotient(a, b, quotient)


register(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)(
    _checked_divisor(_pointwise(_remainder, Kind.DEFAULT))
)
