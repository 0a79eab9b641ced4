"""Shared policy for lowerings: torch type promotion and dtype conversion."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Kind
from torch._prims_common import elementwise_dtypes

from torch2xla.ops._registry import ctx
from torch2xla.runtime._interop import jax_dtype, torch_dtype

__all__ = [
    "HALF_FLOATS",
    "Kind",
    "as_dtype",
    "canonical_dim",
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


def opmath_dtype(dtype: Any) -> np.dtype:
    """The dtype torch's kernels compute ``dtype`` in: float32 for half precision, as
    ``at::opmath_type``; ``dtype`` itself otherwise. The one place of that policy."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in HALF_FLOATS else dtype


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


def as_dtype(x: Any, dtype: np.dtype) -> Any:
    """``x`` (array or Python scalar) as an array of ``dtype``."""
    if is_array(x):
        return x if x.dtype == dtype else x.astype(dtype)
    if isinstance(x, bool | int | float):
        # NOTE: torch converts Python scalars with C casts: 300 into int8 wraps to 44, 1e6 into
        # float16 is inf; jnp.asarray raises on out-of-range ints instead.
        with np.errstate(all="ignore"):
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
