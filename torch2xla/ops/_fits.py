"""Eager's overflow check of a Scalar: "value cannot be converted to type X without overflow".

``check_fits`` checks a one-element tensor's value in the program (a value eager reads back
as a Scalar: ``masked_fill``'s CPU value tensor, ``index_fill``'s); ``torch2xla::fits`` is
a 0-d tensor that holds a Python float the graph takes as a tensor (``capture/_float_values``),
checked as eager checks the number where the op converts it (``torch.where(c, x, s)`` whose
result is float32 converts ``s`` to float with the check).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import torch

from torch2xla.ops._registry import ctx, register

# eager's names of the types ``checked_convert`` converts a Scalar to
_CONVERTED_NAMES = {
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.int16: "int16_t",
    torch.int32: "int",
    torch.int64: "int64_t",
    torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16",
    torch.float32: "float",
    torch.float64: "double",  # (only a complex value's imaginary part overflows it)
}


def message(dtype: torch.dtype) -> str:
    return f"value cannot be converted to type {_CONVERTED_NAMES[dtype]} without overflow"


def check_fits(value, dtype: torch.dtype) -> None:
    """Eager's overflow error where the one-element tensor ``value``, read as a Scalar, does
    not fit ``dtype`` (``int8_t.masked_fill_(m, torch.tensor(300))``): an integer target takes
    no NaN, infinity or value past its range, a floating one no finite value past its range,
    a real one no imaginary part. A runtime check (``ctx().check``)."""
    if dtype not in _CONVERTED_NAMES or not ctx().checking or value.dtype == jnp.bool_:
        return
    v = jnp.ravel(value)[0]
    failed = jnp.zeros((), jnp.bool_)
    if jnp.iscomplexobj(v):
        failed = jnp.imag(v) != 0
        v = jnp.real(v)
    floating = jnp.issubdtype(v.dtype, jnp.floating)
    v = v.astype(jnp.float64 if floating else jnp.int64)
    if dtype.is_floating_point:
        top = float(torch.finfo(dtype).max)
        failed |= jnp.isfinite(v) & (jnp.abs(v.astype(jnp.float64)) > top)
    else:
        info = torch.iinfo(dtype)
        # (NaN compares False both ways: it overflows)
        failed |= ~((v >= info.min) & (v <= info.max))
    ctx().check(failed, message(dtype))


def _fits_float(value: float, dtype: torch.dtype) -> bool:
    return not math.isfinite(value) or abs(value) <= torch.finfo(dtype).max


@torch.library.custom_op("torch2xla::fits", mutates_args=())
def fits(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``value`` (a copy of the 0-d float tensor of a Python float), where the float fits the
    floating ``dtype`` as eager's Scalar conversion checks it; else eager's RuntimeError."""
    if not _fits_float(value.item(), dtype):
        raise RuntimeError(message(dtype))
    return value.clone()


@fits.register_fake
def _(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty_like(value)


@fits.register_vmap
def _(info, in_dims, value: torch.Tensor, dtype: torch.dtype):
    # every batch element's float is checked, as eager checks each call's
    if any(not _fits_float(v, dtype) for v in value.reshape(-1).tolist()):
        raise RuntimeError(message(dtype))
    return value.clone(), in_dims[0]


fits.register_autograd(
    lambda ctx, grad: (grad, None), setup_context=lambda ctx, inputs, output: None
)


@register(torch.ops.torch2xla.fits.default)
def fits_lowering(value, dtype):
    check_fits(value, dtype)
    return value


__all__ = ["check_fits", "fits", "message"]
