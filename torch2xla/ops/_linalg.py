"""Matrix products."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops._common import Kind, as_dtype, promote
from torch2xla.ops._registry import register

aten = ops.aten


def precision() -> lax.Precision:
    """Matmul precision following torch's setting (TF32 only where torch allows it)."""
    if torch.get_float32_matmul_precision() == "highest" and not torch.backends.cuda.matmul.allow_tf32:
        return lax.Precision.HIGHEST
    return lax.Precision.DEFAULT


def _acc(dtype: np.dtype) -> np.dtype | None:
    # Half-precision products accumulate in float32, as torch's kernels do.
    if dtype in (np.dtype(jnp.bfloat16), np.dtype(jnp.float16)):
        return np.dtype(np.float32)
    return None


def matmul(a, b):
    _, result = promote(Kind.DEFAULT, a, b)
    a, b = as_dtype(a, result), as_dtype(b, result)
    acc = _acc(result)
    out = jnp.matmul(a, b, precision=precision(), preferred_element_type=acc)
    return as_dtype(out, result)


@register(aten.mm.default, aten.bmm.default, aten.matmul.default)
def mm(self, mat2):
    return matmul(self, mat2)


@register(aten.addmm.default, aten.baddbmm.default)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    prod = matmul(mat1, mat2)
    if alpha != 1:
        prod = prod * as_dtype(alpha, prod.dtype)
    if beta == 0:
        return prod + jnp.zeros_like(self, prod.dtype)
    bias = as_dtype(self, prod.dtype)
    return prod + (bias if beta == 1 else bias * as_dtype(beta, prod.dtype))


@register(aten.dot.default, aten.vdot.default, aten.mv.default)
def dot(self, other):
    return matmul(self, other)


@register(aten.addmv.default)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    return addmm(self, mat, vec, beta=beta, alpha=alpha)
