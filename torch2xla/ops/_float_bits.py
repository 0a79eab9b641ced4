"""Floats read from their bits, where XLA's CPU reads subnormals as zero.

# NOTE: XLA's CPU runtime runs every program with the x86 flags flush-to-zero and
# denormals-are-zero set (PJRT's CPU client wraps each execution in
# ``tsl::port::ScopedFlushDenormal``, to follow TensorFlow): a subnormal operand reads as 0 in a
# comparison or a conversion, a subnormal result is 0. It is not a compiler option:
# ``xla_cpu_ftz=False`` (in jaxlib 0.10) only drops LLVM's ``denormal-fp-math`` attribute and
# the runtime sets the flags anyway; changing them around the call does nothing either. Eager
# keeps subnormals: ``torch.tensor(1e-40) != 0`` is True, ``torch.sign`` of it 1,
# ``.double()`` of it 1e-40. The arithmetic that makes or consumes them stays flushed (the
# "subnormal" limitation, torch2xla/testing/README.md); what only reads them, comparisons,
# truth values, signs and float32 <-> float64 conversions, is computed here from the bits:
# a few integer operations fused beside the load, on the CPU only (CUDA keeps subnormals).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

_INTS = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
# floats whose subnormals XLA's CPU flushes (float16 is compared and converted in float32,
# where its subnormals are normal)
FLUSHED = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(jnp.bfloat16))


def bits(x: Any) -> tuple[Any, np.iinfo]:
    """``x``'s bits as a signed integer array of its width, and that width's iinfo."""
    ints = _INTS[x.dtype.itemsize]
    return lax.bitcast_convert_type(x, ints), np.iinfo(ints)


def is_zero(x: Any) -> Any:
    """``x == 0`` for floats (either zero; subnormals are not zero)."""
    b, info = bits(x)
    return (b & info.max) == 0


def nonzero(x: Any) -> Any:
    """``x != 0`` for floats and complex numbers (subnormals are not zero; NaN is not)."""
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return nonzero(jnp.real(x)) | nonzero(jnp.imag(x))
    b, info = bits(x)
    return (b & info.max) != 0


def negative(x: Any) -> Any:
    """``x < 0`` for floats (-0.0 and NaN are not negative, a negative subnormal is)."""
    b, info = bits(x)
    neg_inf = lax.bitcast_convert_type(jnp.array(-jnp.inf, x.dtype), b.dtype)
    return (b > info.min) & (b <= neg_inf)  # sign set: -0.0 < ... <= -inf < -NaN


def positive(x: Any) -> Any:
    """``x > 0`` for floats (+0.0 and NaN are not positive, a positive subnormal is)."""
    b, _ = bits(x)
    inf = lax.bitcast_convert_type(jnp.array(jnp.inf, x.dtype), b.dtype)
    return (b > 0) & (b <= inf)


def _ordered(x: Any) -> tuple[Any, Any]:
    """An integer with the order of the float ``x`` (both zeros 0), and where ``x`` is NaN:
    from the bits alone (a float test beside them, ``x != x``, let LLVM merge the two into
    one float comparison, which reads subnormals as zero again)."""
    b, info = bits(x)
    magnitude = b & info.max
    inf = lax.bitcast_convert_type(jnp.array(jnp.inf, x.dtype), b.dtype)
    return jnp.where(b < 0, -magnitude, magnitude), magnitude > inf


def flushed(dtype: Any) -> bool:
    """Whether XLA on this device reads ``dtype``'s subnormals as zero."""
    from torch2xla.ops._registry import lowering_on_cuda  # (the registry imports the ops)

    return not lowering_on_cuda() and np.dtype(dtype) in FLUSHED


def normal_number(v: Any, dtype: Any) -> bool:
    """Whether ``v`` is a Python number that ``dtype`` holds as a normal nonzero (or NaN or
    infinite) value: a comparison with it reads the other operand right even where a
    subnormal reads as zero (``x > 0.5`` is ``0 > 0.5`` for any subnormal ``x``)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    if not math.isfinite(v):
        return True
    with np.errstate(all="ignore"):
        return float(abs(np.asarray(v).astype(dtype))) >= float(jnp.finfo(dtype).tiny)


def compare(jfn: Any, a: Any, b: Any) -> Any:
    """``jfn(a, b)`` (``jnp.less``, ``jnp.equal``...) with subnormals read as eager reads
    them: ``a`` and ``b`` floats of one dtype, compared as integers ordered as the floats,
    NaN unordered (``!=`` True, the rest False); complex numbers part by part (``==``,
    ``!=`` only)."""
    if jnp.issubdtype(a.dtype, jnp.complexfloating):
        real = compare(jfn, jnp.real(a), jnp.real(b))
        imag = compare(jfn, jnp.imag(a), jnp.imag(b))
        return real | imag if jfn is jnp.not_equal else real & imag
    if not flushed(a.dtype):
        return jfn(a, b)
    a, b = jnp.broadcast_arrays(a, b)
    (ka, nan_a), (kb, nan_b) = _ordered(a), _ordered(b)
    return jnp.where(nan_a | nan_b, jfn is jnp.not_equal, jfn(ka, kb))


@jax.custom_jvp
def positive_zero(x: Any) -> Any:
    """``x`` with its zeros +0.0 (a select XLA's simplifier keeps; subnormals kept), as
    ``x + 0.0`` is in eager. Its derivative is the identity's (a plain select would give a
    zero gradient wherever ``x`` is zero)."""
    zero = is_zero(x) if jnp.issubdtype(x.dtype, jnp.floating) else x == 0
    return jnp.where(zero, jnp.zeros((), x.dtype), x)


@positive_zero.defjvp
def _positive_zero_jvp(primals, tangents):
    return positive_zero(primals[0]), tangents[0]


_F32_SUBNORMAL = 2.0**-149  # float32's least subnormal, and the unit of its subnormals
_F32_TINY = 2.0**-126  # float32's least normal


@jax.custom_jvp
def widen(x: Any) -> Any:
    """The float32 array ``x`` as float64, subnormals included (XLA's CPU conversion reads
    them as zero): those are an integer count of 2**-149 (converted exactly). Its derivative
    is the conversion's (the bits carry none)."""
    b, info = bits(x)
    magnitude = b & info.max
    scaled = magnitude.astype(np.float64) * _F32_SUBNORMAL  # (a normal float64: exact)
    subnormal = jnp.where(b < 0, -scaled, scaled)
    return jnp.where(magnitude < (1 << 23), subnormal, x.astype(np.float64))


@jax.custom_jvp
def narrow(x: Any) -> Any:
    """The float64 array ``x`` as float32, rounded once (half to even) as eager's conversion,
    subnormal results included (XLA's CPU conversion flushes them to zero): those are
    ``|x| / 2**-149`` rounded to an integer, which is their bits (2**23 is the least normal).
    Its derivative is the conversion's."""
    small = jnp.abs(x) < _F32_TINY  # (x normal float64 or zero: the comparison is exact)
    scaled = jnp.abs(x) * 2.0**149  # (exact: a power of two)
    count = lax.round(scaled, lax.RoundingMethod.TO_NEAREST_EVEN).astype(np.int32)
    sign = jnp.where(jnp.signbit(x), np.int32(np.iinfo(np.int32).min), np.int32(0))
    subnormal = lax.bitcast_convert_type(count | sign, np.float32)
    return jnp.where(small, subnormal, x.astype(np.float32))


@widen.defjvp
def _widen_jvp(primals, tangents):
    return widen(primals[0]), tangents[0].astype(np.float64)


@narrow.defjvp
def _narrow_jvp(primals, tangents):
    return narrow(primals[0]), tangents[0].astype(np.float32)
