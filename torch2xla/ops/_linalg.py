"""Matrix products."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops import _common
from torch2xla.ops._common import Kind, as_dtype, is_half, out_dtype, promote
from torch2xla.ops._registry import UNEXPANDED, ctx, register

aten = ops.aten


def precision() -> lax.Precision:
    """Matmul precision following torch's setting (TF32 only where torch allows it)."""
    if (
        torch.get_float32_matmul_precision() == "highest"
        and not torch.backends.cuda.matmul.allow_tf32
    ):
        return lax.Precision.HIGHEST
    return lax.Precision.DEFAULT


def _half_out() -> bool:
    """Whether a half-precision product or convolution returns half precision directly.

    On CUDA, cuBLAS and cuDNN accumulate half-precision products in float32 and round once,
    as torch's CUDA kernels do. Asked for a float32 result instead, XLA's GPU compiler runs a
    convolution on float32 (TF32) operands, and writes every GEMM's result at twice the bytes
    before rounding it in a separate pass (H100, bf16 inference: ResNet-50 5.5 -> 3.8 ms,
    GPT-2 4.1 -> 3.3 ms). XLA's CPU products of half operands lose several units in the last
    place to torch's unless asked for float32 (``half_product``).
    """
    return ctx().on_cuda


def product(a, b):
    """``a @ b`` and the result dtype: for half-precision inputs in float32, not yet rounded,
    except on CUDA (``_half_out``)."""
    _, result = promote(Kind.DEFAULT, a, b)
    a, b = as_dtype(a, result), as_dtype(b, result)
    if is_half(result):  # accumulated in float32, as torch's kernels do
        if _half_out():
            return jnp.matmul(a, b), result
        return half_product(a, b), result
    if (
        a.ndim == b.ndim == 2
        and a.shape[0] >= 128
        and not ctx().on_cuda
        and jnp.issubdtype(result, jnp.floating)
    ):
        return cpu_product(a, b, precision()), result
    return jnp.matmul(a, b, precision=precision()), result


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def cpu_product(a, b, precision):
    """``a @ b`` of two real matrices on the CPU, whose gradient for ``b`` is a plain product.

    NOTE: XLA's CPU compiler folds transposes into a product's dimension numbers, and runs a
    product that contracts both operands over their first dimension (JAX's rule for ``b``'s
    gradient, ``a^T ct``: a layer's weight gradient, contracted over the tokens) at about half
    the rate of a plain one in one of the two output orientations: 1024 tokens, one core,
    ``nn.Linear(256, 1024)``'s weight gradient 4.4 ms, 2.3 with ``ct``'s transpose
    materialized first. The gradient is computed as ``(ct^T a)^T`` from that materialized
    transpose, the barriers keeping the compiler from folding it back; ``nn.Linear``'s
    ``b`` is its weight's transpose, so the outer transpose cancels against it. Used where
    ``a`` has 128 rows or more: with 64 (a batch of 64 samples) JAX's form is as fast in
    both orientations, and the materialized transpose made ``b``'s own orientation slower.
    """
    return jnp.matmul(a, b, precision=precision)


def _cpu_product_fwd(a, b, precision):
    return cpu_product(a, b, precision), (a, b)


def _cpu_product_bwd(precision, residuals, ct):
    a, b = residuals
    da = jnp.matmul(ct, b.T, precision=precision)
    db_t = jnp.matmul(lax.optimization_barrier(ct.T), a, precision=precision)
    return da, lax.optimization_barrier(db_t).T


cpu_product.defvjp(_cpu_product_fwd, _cpu_product_bwd)


@jax.custom_vjp
def half_product(a, b):
    """``a @ b`` of half-precision operands, accumulated and returned in float32.

    NOTE: its gradients are half-precision products (float32 accumulation, rounded once), as
    torch's backward computes them. JAX's own rule would differentiate the float32 product
    with float32 cotangents, unrounded. Used on the CPU only (``_half_out``).
    """
    return jnp.matmul(a, b, preferred_element_type=np.float32)


def _half_product_fwd(a, b):
    return half_product(a, b), (a, b)


def _half_product_bwd(residuals, ct):
    a, b = residuals
    # torch's gradients: products of the half-precision cotangent, accumulated in float32 and
    # rounded once. (Products of half-precision values are exact in float32; as half-precision
    # products, XLA's CPU compiler ran them in float32 and a consumer that widened the gradient
    # again read it unrounded: ``rounded_to``.)
    wide = np.float32
    _, vjp = jax.vjp(
        functools.partial(jnp.matmul, precision=lax.Precision.HIGHEST),
        a.astype(wide),
        b.astype(wide),
    )
    da, db = vjp(ct.astype(a.dtype).astype(wide))
    return _common.rounded_to(da, a.dtype), _common.rounded_to(db, b.dtype)


half_product.defvjp(_half_product_fwd, _half_product_bwd)


def matmul(a, b):
    out, result = product(a, b)
    return as_dtype(out, result)


@register(aten.mm.default, aten.matmul.default)
def mm(self, mat2):
    return matmul(self, mat2)


@register(aten._int_mm.default)
def _int_mm(self, mat2):
    """int8 @ int8 accumulated and returned in int32 (the meta kernel checks the dtypes and
    shapes, as eager's CPU kernel does)."""
    return lax.dot_general(self, mat2, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)


@register(aten.bmm.default)
def bmm(self, mat2):
    """A batched product; an operand expanded over the batch from one matrix is multiplied as
    that matrix.

    torch's matmul decomposition turns ``x @ W`` with a non-contiguous 3-D ``x`` into a bmm
    against ``W`` expanded over ``x``'s batch (``nn.MultiheadAttention``'s input projection
    of a batch-first input: ViT's). XLA's GPU compiler ran that as a batch of 197 small GEMMs,
    ~3x slower on an H100 than the one GEMM it makes of ``x @ W`` (batch folded into rows),
    and its gradient would sum a batch of weight gradients.
    """
    found = ctx().node.meta.get(UNEXPANDED)  # (capture/_annotate.unexpanded_operand)
    if found is None:
        return matmul(self, mat2)
    operand, source, first = found
    # (the one value a lowering reads that is not its argument: the node its meta names)
    matrix = ctx().value(source)
    if first:
        matrix = matrix[0]
    return matmul(self, matrix) if operand == 1 else matmul(matrix, mat2)


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


def grouped_product(a, b, offs, result):
    """torch's grouped matrix product (``torch._grouped_mm``, ``F.grouped_mm``), of ``result``
    dtype: the product of each group of rows (or columns, or of the contracted dimension) with
    its own matrix, the groups ending at ``offs`` (cumulative, int32), a count that only the
    values know (the tokens routed to each expert of a mixture of experts).

    ``a`` (M, K) and ``b`` (G, K, N): rows ``offs[g-1]:offs[g]`` times ``b[g]`` (M, N);
    ``a`` (G, M, K) and ``b`` (K, N): columns ``offs[g-1]:offs[g]`` of ``a[g] @ b`` (M, N);
    ``a`` (M, K) and ``b`` (K, N): ``a[:, s] @ b[s]`` for each group ``s`` of K (G, M, N);
    ``a`` (G, M, K) and ``b`` (G, K, N): a batched product. Rows (columns) past ``offs[-1]``,
    which torch leaves unwritten, are zeros. Half-precision operands accumulate in float32 and
    round once, as torch's kernels do.
    """
    if is_half(result) and not _half_out():
        # (exact in float32; XLA's CPU products of half operands into float32 are not
        # implemented in every orientation that JAX's ragged products take)
        a, b = a.astype(np.float32), b.astype(np.float32)
    kw = {"precision": precision()}
    if a.ndim == 3 and b.ndim == 3:
        return as_dtype(jnp.matmul(a, b, **kw), result)
    ends = offs.astype(np.int32)
    sizes = jnp.diff(ends, prepend=0)
    if a.ndim == 2 and b.ndim == 3:
        out = lax.ragged_dot(a, b, sizes, **kw)
    elif a.ndim == 3:  # ragged columns: the same product, transposed
        out = lax.ragged_dot(b.T, jnp.swapaxes(a, 1, 2), sizes, **kw).T
    else:
        # NOTE: JAX's ragged product over the contracted dimension has no gradient for ``b``:
        # each group's slice of K is selected by a mask instead (G products of the full K).
        k = jnp.arange(a.shape[1], dtype=np.int32)
        mask = (k >= (ends - sizes)[:, None]) & (k < ends[:, None])  # (G, K)
        out = jnp.matmul(jnp.where(mask[:, None, :], a, jnp.zeros((), a.dtype)), b, **kw)
    return as_dtype(out, result)


@register(aten._grouped_mm.default)
def grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None):
    # (torch's meta function refuses a bias, and out_dtypes other than bfloat16)
    return grouped_product(self, mat2, offs, _common.out_dtype())
