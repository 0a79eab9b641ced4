"""Matrix products."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops._common import Kind, as_dtype, out_dtype, promote
from torch2xla.ops._registry import ctx, register

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


def product(a, b):
    """``a @ b`` in torch's accumulation dtype (float32 for half inputs), not yet rounded, and
    the result dtype."""
    _, result = promote(Kind.DEFAULT, a, b)
    a, b = as_dtype(a, result), as_dtype(b, result)
    out = jnp.matmul(a, b, precision=precision(), preferred_element_type=_acc(result))
    return out, result


def matmul(a, b):
    out, result = product(a, b)
    return as_dtype(out, result)


@register(aten.mm.default, aten.bmm.default, aten.matmul.default)
def mm(self, mat2):
    return matmul(self, mat2)


def scale_add(prod, self, beta, alpha, result):
    """``beta * self + alpha * prod`` computed in ``prod``'s (accumulation) dtype and rounded
    once, as torch's BLAS-backed kernels do; ``self`` is ignored when ``beta == 0``."""
    acc = prod.dtype
    if alpha != 1:
        prod = prod * as_dtype(alpha, acc)
    shape = ctx().out.shape
    if beta == 0:
        return as_dtype(jnp.broadcast_to(prod, shape), result)
    bias = as_dtype(self, acc)
    out = prod + (bias if beta == 1 else bias * as_dtype(beta, acc))
    return as_dtype(jnp.broadcast_to(out, shape), result)


@register(aten.addmm.default, aten.baddbmm.default)
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    prod, _ = product(mat1, mat2)
    return scale_add(prod, self, beta, alpha, out_dtype())


@register(aten.dot.default, aten.mv.default)
def dot(self, other):
    return matmul(self, other)


@register(aten.vdot.default)
def vdot(self, other):
    # NOTE: vdot conjugates its first argument.
    return matmul(jnp.conj(self) if jnp.iscomplexobj(self) else self, other)


@register(aten.addmv.default)
def addmv(self, mat, vec, *, beta=1, alpha=1):
    return addmm(self, mat, vec, beta=beta, alpha=alpha)
