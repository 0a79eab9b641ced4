"""Shared policy for lowerings: torch type promotion and dtype conversion."""

from __future__ import annotations

import functools
import math
import platform
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import torch
from jax import lax
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind
from torch._prims_common import elementwise_dtypes

from torch2xla.ops import _float_bits
from torch2xla.ops._registry import ctx, lowering_on_cuda
from torch2xla.runtime._interop import jax_dtype, torch_dtype

__all__ = [
    "HALF_FLOATS",
    "Kind",
    "as_dtype",
    "canonical_dim",
    "cast",
    "half_rounding",
    "is_array",
    "is_half",
    "jdt",
    "opmath_dtype",
    "out_dtype",
    "promote",
]

# Half precision: torch's kernels compute these in float32 (their "opmath" type) and round once.
HALF_FLOATS = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def is_half(dtype: Any) -> bool:
    """Whether ``dtype`` is float16 or bfloat16."""
    return np.dtype(dtype) in HALF_FLOATS


_HALF_BITS = {np.dtype(jnp.bfloat16): (8, 7), np.dtype(jnp.float16): (5, 10)}
_F16_SUBNORMAL_SCALE = 2.0**24  # (float16's subnormals are the multiples of 2**-24)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def half_rounding(x: Any, dtype: Any) -> Any:
    """The wider float array ``x`` rounded to the values of the half-precision ``dtype``, as
    ``x.dtype``: a rounding XLA keeps (``rounded_to``). Its derivative is the identity's
    (the conversion that follows rounds the tangent; ``reduce_precision``'s own rule rounded
    it here, flushing float16 subnormals of a gradient to zero).

    NOTE: XLA's ``reduce_precision`` flushes results below the format's normal range to zero:
    float16's subnormals (below 2**-14 = 6.1e-5, gradients of a float16 model often are)
    became 0 where eager keeps them. They are rounded in ``x``'s dtype instead, exactly: scaled
    by 2**24 to integers (exact: a power of two, far from float32's own subnormals), rounded
    half to even, scaled back. (bfloat16's subnormals are float32's, which XLA's CPU flushes
    in every operation.)"""
    dtype = np.dtype(dtype)
    out = lax.reduce_precision(x, *_HALF_BITS[dtype])
    if dtype != np.dtype(jnp.float16) or np.dtype(x.dtype).itemsize <= 2:
        return out
    scale = np.asarray(_F16_SUBNORMAL_SCALE, x.dtype)
    tiny = lax.round(x * scale, lax.RoundingMethod.TO_NEAREST_EVEN) * (1 / scale)
    return jnp.where(jnp.abs(x) < np.asarray(2.0**-14, x.dtype), tiny, out)


@half_rounding.defjvp
def _half_rounding_jvp(dtype, primals, tangents):
    return half_rounding(primals[0], dtype), tangents[0]


def cpu_half_step(v: Any) -> Any:
    """``v`` (float32) rounded to the node's float16/bfloat16 result dtype where eager's CPU
    kernel computes that step in its ``scalar_t`` (c10's math functions of Half and BFloat16
    return Half and BFloat16: ``x * std::log(y)`` in xlogy rounds the logarithm first);
    ``v`` itself on CUDA (whose kernels compute in float32), for other dtypes, and outside a
    lowering (a derivative traced with the backward: eager's is another kernel)."""
    try:
        if ctx().on_cuda or not is_half(out_dtype()):
            return v
    except LookupError:
        return v
    return half_rounding(v, out_dtype())


def rounded_to(x: Any, dtype: Any) -> Any:
    """The float32 array ``x`` rounded once to the half-precision ``dtype``, as ``dtype``.

    NOTE: XLA (``xla_allow_excess_precision``, on by default) may drop a float32 -> half ->
    float32 convert pair, and its CPU compiler runs half-precision products and convolutions
    in float32 and converts the result: a consumer that widens such a result to float32 again
    read it unrounded. ``reduce_precision`` is a rounding XLA keeps (``half_rounding``)."""
    return half_rounding(x, np.dtype(dtype)).astype(dtype)


def opmath_dtype(dtype: Any) -> np.dtype:
    """The dtype torch's kernels compute ``dtype`` in: float32 for half precision, as
    ``at::opmath_type``; ``dtype`` itself otherwise. The one place of that policy."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in HALF_FLOATS else dtype


# The bytes of one vector register of eager's CPU kernels built for this CPU's capability
# (``_half_product``).
VECTOR_BYTES = 64 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 32


def _lerp_from_zero(x: torch.Tensor) -> torch.Tensor:
    return torch.lerp(torch.zeros_like(x), x, 1.0)


@functools.cache
def _loop_block_bytes() -> int | None:
    """The bytes of one block of eager's ``cpu_kernel_vec`` loop (two ``Vectorized<T>``,
    ATen/native/cpu/Loops.h ``vectorized_loop``), probed on float32 lerp, whose vector and
    scalar rules give -0 and +0 at lerp(0, -0, 1). Not the CPU's register: lerp and add
    register no AVX-512 build (``REGISTER_DISPATCH``), so an AVX-512 CPU runs their AVX2 one
    (64 bytes on both)."""
    from torch2xla.ops._loops import block

    n = block(_lerp_from_zero, (), torch.float32)
    return None if n is None else 4 * n


def scalar_tail(shape: tuple[int, ...], dtype: Any) -> Any:
    """A bool array of ``shape``: the flat (row-major) positions eager's CPU loop over
    contiguous ``dtype`` elements (``cpu_kernel_vec``: lerp's, add's) computes in its scalar
    tail, which may round otherwise than its vectorized loop: the last ``numel % B`` of each
    run, B one block of the loop in elements (two vectors: ``_loop_block_bytes``, probed;
    complex64 lerp of 37 elements on AVX2: its last 5), a run the whole tensor or, from
    ``GRAIN_SIZE`` elements with several threads, its chunk per thread
    (``_loops.vectorized``). Where eager's loop runs along a strided or broadcast inner
    dimension its tails fall elsewhere."""
    from torch2xla.ops import _loops  # (which reads no lowering: no cycle)

    shape = tuple(shape)
    block = _loop_block_bytes()
    if math.prod(shape) == 0 or block is None:  # (None: no vectorized rule that differs)
        return jnp.zeros(shape, bool)
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= size
    width = block // np.dtype(dtype).itemsize
    vec = _loops.vectorized(shape, (tuple(strides),), width, torch.get_num_threads())
    return ~vec


def is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, torch.Tensor)


def _meta(x: Any) -> Any:
    if is_array(x):
        return torch.empty(x.shape, dtype=torch_dtype(x.dtype), device="meta")
    return x


def promote(kind: Kind, *args: Any) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype) of an elementwise op on ``args``, by torch's rules."""
    metas = [_meta(a) for a in args if a is not None]
    compute, result = elementwise_dtypes(*metas, type_promotion_kind=kind)
    return jax_dtype(compute), jax_dtype(result)


# Float to integer casts where C++ leaves them undefined (NaN, infinities, out of range) give
# what eager's kernels give: c10 converts to uint8 through int64 (on every device), and on an
# x86 CPU the conversion instructions (``cvttss2si``, 32 or 64 bits) give the lowest integer,
# which int8 and int16 then wrap. CUDA's and ARM's conversions saturate (NaN to 0), as XLA's.
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
_NARROW_INTS = frozenset(np.dtype(d) for d in (np.int8, np.int16))


# NOTE: c10 converts a double to Half or BFloat16 through float (their constructors take a
# float): a float64 tensor or Python float is rounded twice, 1 + 2**-11 + 2**-40 to float16 is
# 1.0 in eager (through float32: 1 + 2**-11, a tie, to even), 1.0009765625 rounded once as
# numpy and XLA's convert round it (XLA's simplifier also merges two converts into one: the
# float32 value is kept opaque to it). Both conversions below go through float32.


FLOAT8 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))
_E4M3FN_MAX = 448.0


@functools.cache
def _e4m3fn_saturates() -> bool:
    """Whether eager's conversion to float8_e4m3fn saturates: torch 2.13's c10 gives the
    largest finite value (448) to anything beyond it, infinities included (NaN stays NaN);
    earlier releases gave NaN, as XLA's conversion does."""
    probe = torch.tensor([float("inf"), -480.0], dtype=torch.float32, device="cpu")
    probe = probe.to(torch.float8_e4m3fn).float()
    return probe.tolist() == [_E4M3FN_MAX, -_E4M3FN_MAX]


def _to_float8(x: Any, dtype: np.dtype) -> Any:
    """``x`` as the float8 ``dtype`` as c10 converts it: through float32 (a float64 or an
    integer is rounded twice), float8_e4m3fn saturating where eager's does."""
    if x.dtype not in FLOAT8 and x.dtype != np.float32 and x.dtype != np.bool_:
        x = lax.optimization_barrier(x.astype(np.float32))
    if dtype == FLOAT8[0] and x.dtype != dtype and _e4m3fn_saturates():
        x = x.astype(np.float32)
        top = np.asarray(_E4M3FN_MAX, np.float32)
        x = jnp.where(jnp.isnan(x), x, jnp.clip(x, -top, top))
    return x.astype(dtype)


_NARROW_FLOATS = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16))


def cast(x: Any, dtype: Any) -> Any:
    """The array ``x`` as ``dtype``, with eager's values for a float to integer cast."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and not (
        dtype == np.bool_ or jnp.issubdtype(dtype, jnp.complexfloating)
    ):
        # NOTE: eager casts a complex value to a real dtype as its real part is cast (an
        # integer wraps, NaN is the lowest, subnormals stay); jnp's ``astype`` saturated,
        # flushed and warned that it will raise.
        return cast(jnp.real(x), dtype)
    if jnp.issubdtype(x.dtype, jnp.complexfloating) and jnp.issubdtype(dtype, jnp.complexfloating):
        # (part by part, as eager: a subnormal part kept through the float casts below)
        part = np.dtype(np.float64 if dtype == np.complex128 else np.float32)
        return lax.complex(cast(jnp.real(x), part), cast(jnp.imag(x), part))
    if x.dtype == np.bool_ and jnp.issubdtype(dtype, jnp.inexact):
        # NOTE: XLA's simplifier rewrites a product with a bool converted to a float
        # (``x * mask``, ``addcmul(z, x, mask.float())``, a lerp weight, a product reduction)
        # as a select of ``x`` and 0: NaN and inf times False became 0 (eager: NaN), -2.0
        # times False +0.0 (eager: -0.0). The converted value is kept opaque to it.
        return lax.optimization_barrier(x.astype(dtype))
    if x.dtype == np.float64 and dtype in HALF_FLOATS:  # (through float32: the NOTE above)
        return lax.optimization_barrier(cast(x, np.dtype(np.float32))).astype(dtype)
    if dtype == np.float64 and x.dtype in _NARROW_FLOATS and _float_bits.flushed(x.dtype):
        # (float32's and bfloat16's subnormals read from the bits: see _float_bits)
        wide = x if x.dtype == np.float32 else x.astype(np.float32)  # (bfloat16: exact)
        return _float_bits.widen(wide)
    if x.dtype == np.float64 and dtype == np.float32 and _float_bits.flushed(x.dtype):
        return _float_bits.narrow(x)
    if dtype in FLOAT8:
        return _to_float8(x, dtype)
    if dtype == np.bool_ and jnp.issubdtype(x.dtype, jnp.inexact):
        return _float_bits.nonzero(x)  # (subnormals are True, as eager's)
    if not (jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(dtype, jnp.integer)):
        return x.astype(dtype)
    on_cuda = lowering_on_cuda()
    if dtype == np.uint8:
        wide = np.dtype(np.int64)
    elif dtype in _NARROW_INTS and not on_cuda:
        wide = np.dtype(np.int32)
    else:
        wide = dtype
    if x.dtype.itemsize < 4:  # eager converts half precision and float8 to float32 first
        # (XLA's CPU conversion of float8_e4m3fn to an integer gave the lowest integer)
        x = x.astype(np.float32)
    out = x.astype(wide)  # saturating, NaN to 0
    if _X86 and not on_cuda and wide.itemsize >= 4:
        bound = float(2 ** (8 * wide.itemsize - 1))
        inside = (x >= -bound) & (x < bound)  # False for NaN
        out = jnp.where(inside, out, jnp.asarray(np.iinfo(wide).min, wide))
    return out if wide == dtype else out.astype(dtype)  # integer narrowing wraps


def as_dtype(x: Any, dtype: np.dtype) -> Any:
    """``x`` (array or Python scalar) as an array of ``dtype``."""
    if is_array(x):
        return x if x.dtype == dtype else cast(x, dtype)
    if isinstance(x, complex) and not jnp.issubdtype(dtype, jnp.complexfloating):
        # (eager converts a complex number without imaginary part to a real dtype; one with
        # it raises, before: the trace, ``_arg_checks``)
        x = bool(x) if dtype == np.bool_ else x.real  # (into bool: nonzero, 1j included)
    if isinstance(x, bool | int | float):
        # NOTE: torch converts Python scalars with C casts: 300 into int8 wraps to 44, 1e6 into
        # float16 is inf; jnp.asarray raises on out-of-range ints instead.
        with np.errstate(all="ignore"):
            if isinstance(x, float) and dtype in HALF_FLOATS:  # (through float32: the NOTE above)
                return jnp.asarray(np.float32(x).astype(dtype))
            if dtype in FLOAT8:
                return _to_float8(jnp.asarray(np.float32(x)), dtype)
            return jnp.asarray(np.asarray(x).astype(dtype))
    return jnp.asarray(x, dtype=dtype)


def jdt(dtype: torch.dtype | None) -> np.dtype | None:
    return None if dtype is None else jax_dtype(dtype)


def out_dtype(index: int | None = None) -> np.dtype:
    """The dtype torch gives this node's output (ground truth from the fake tensor)."""
    val = ctx().out
    if index is not None:
        val = val[index]
    return jax_dtype(val.dtype)


def canonical_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"dim {dim} out of range for a tensor of {ndim} dims")
    return dim % n
