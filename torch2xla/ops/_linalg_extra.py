"""Matrix decompositions and solvers (``torch.linalg`` and friends); vector norms are ``_norms``'.

Singular or non-positive-definite inputs raise eager's ``torch.linalg.LinAlgError`` through
runtime checks of ``info`` (``_effects.check_linalg``): from the ``_linalg_check_errors`` nodes
of the ``torch.linalg.*`` functions, and from the ``_ex`` functions called with
``check_errors=True``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from jax.lax import linalg as lax_linalg
from torch._ops import OpOverload, ops
from torch.fx.experimental.symbolic_shapes import guard_or_true

from torch2xla.ops._common import (
    Kind,
    as_dtype,
    is_half,
    out_dtype,
    promote,
)
from torch2xla.ops._effects import check_linalg
from torch2xla.ops._linalg import scale_add
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mH(x):
    return jnp.conj(_mT(x)) if jnp.iscomplexobj(x) else _mT(x)


def _mm(a, b):
    return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)


def _empty(index: int):
    """Zeros shaped like the node's ``index``-th output (outputs torch leaves empty)."""
    val = ctx().out[index]
    return jnp.zeros(tuple(val.shape), out_dtype(index))


def _first_bad(bad, index: int | None):
    """LAPACK's info: 1 + the position of the first True along the last dim, else 0; as the
    node's output ``index``, or (None) as int32 codes for a check (``check_linalg``)."""
    if bad.shape[-1] == 0:
        return jnp.zeros(bad.shape[:-1], jnp.int32) if index is None else _empty(index)
    pos = jnp.argmax(bad, axis=-1) + 1
    info = jnp.where(jnp.any(bad, axis=-1), pos, 0)
    if index is None:
        return info.astype(jnp.int32)
    return as_dtype(info.reshape(ctx().out[index].shape), out_dtype(index))


def _check_errors(check_errors: bool, info, api_name: str, A) -> None:
    """The ``_ex`` functions' ``check_errors=True``: eager raises what the plain function
    raises for ``info`` (``torch.linalg.LinAlgError``), named by the ``_ex`` function."""
    if check_errors:
        check_linalg(info, api_name, A.ndim == 2)


def _lu_info(lu, index: int | None):
    """info of an LU factorization: the first zero pivot of U (1-based), else 0."""
    return _first_bad(jnp.diagonal(lu, axis1=-2, axis2=-1) == 0, index)


def _chol_info(low, index: int | None, a=None):
    """info of a Cholesky factorization: the order of the first non-positive-definite leading
    minor of the Hermitian ``a`` (what LAPACK reads), found only where the factorization
    failed (XLA's factor is then NaN throughout); without ``a``, the first NaN of ``low``."""
    failed = ~jnp.isfinite(jnp.diagonal(low, axis1=-2, axis2=-1))
    if a is None or a.shape[-1] == 0:
        return _first_bad(failed, index)
    info = jax.lax.cond(
        jnp.any(failed), _first_minor, lambda a: jnp.zeros(a.shape[:-2], jnp.int32), a
    )
    if index is None:
        return info
    return as_dtype(info.reshape(ctx().out[index].shape), out_dtype(index))


def _first_minor(a):
    """The order of the first leading minor of the Hermitian ``a`` that is not positive
    definite, else 0: an unblocked Cholesky's first pivot that is not positive, as LAPACK's
    potrf reports it (one Schur-complement update per column)."""
    n = a.shape[-1]
    idx = jnp.arange(n)

    def step(k, state):
        a, info = state
        d = jnp.real(a[..., k, k])
        bad = ~(d > 0)
        info = jnp.where((info == 0) & bad, k + 1, info)
        col = jnp.where(idx > k, a[..., :, k], 0)
        scale = jnp.where(bad, 0, 1 / jnp.where(bad, 1, d))
        a = a - col[..., :, None] * jnp.conj(col)[..., None, :] * scale[..., None, None]
        return a, info

    _, info = jax.lax.fori_loop(0, n, step, (a, jnp.zeros(a.shape[:-2], jnp.int32)))
    return info


# -- products --------------------------------------------------------------------------------
@register(aten.addbmm.default)
def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    _, result = promote(Kind.DEFAULT, batch1, batch2)
    b1, b2 = as_dtype(batch1, result), as_dtype(batch2, result)
    if is_half(result):
        # Sum over the batch inside one float32 contraction, rounded once: at least as
        # accurate as torch, which rounds after every batch.
        prod = jnp.einsum(
            "bnk,bkm->nm",
            b1,
            b2,
            precision=lax.Precision.HIGHEST,
            preferred_element_type=np.float32,
        )
        return scale_add(prod, self, beta, alpha, out_dtype())
    # NOTE: torch accumulates batch by batch (one GEMM per batch into the result); summing in
    # the same order keeps float32 results within tolerance when the sum cancels.
    shape = ctx().out.shape
    out = (
        jnp.zeros(shape, result)
        if beta == 0
        else jnp.broadcast_to(as_dtype(self, result) * as_dtype(beta, result), shape)
    )
    for b in range(b1.shape[0]):
        prod = jnp.matmul(b1[b], b2[b], precision=lax.Precision.HIGHEST)
        out = out + (prod if alpha == 1 else prod * as_dtype(alpha, result))
    return out


@register(aten._trilinear.default)
def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    def expand(x, dims):
        for d in sorted(dims):
            x = jnp.expand_dims(x, d)
        return x

    prod = expand(i1, expand1) * expand(i2, expand2) * expand(i3, expand3)
    out = jnp.sum(prod, axis=tuple(sumdim), keepdims=True) if sumdim else prod
    return as_dtype(jnp.reshape(out, ctx().out.shape), out_dtype())


# -- factorizations ----------------------------------------------------------------------------
@register(aten._linalg_svd.default)
def _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None):
    if driver is not None:
        raise NotImplementedError("svd(driver=...) selects a cuSOLVER routine; CPU has none")
    _check_svd_input(A)
    if not compute_uv:
        s = jnp.linalg.svd(A, compute_uv=False)
        return _empty(0), as_dtype(s, out_dtype(1)), _empty(2)
    u, s, vh = _svd(A, full_matrices)
    return u, as_dtype(s, out_dtype(1)), vh


def _check_svd_input(A) -> None:
    """Eager's CPU error for an SVD of a matrix with a NaN.

    NOTE: LAPACK's gesdd refuses such a matrix (info -4) and eager raises its "contained
    non-finite values" error (an inf alone passes); XLA's SVD returns NaNs."""
    c = ctx()
    if c.checking and not c.on_cuda and A.size:
        has_nan = jnp.any(jnp.isnan(A), axis=(-2, -1))
        check_linalg(jnp.where(has_nan, -4, 0).astype(jnp.int32), "linalg.svd", A.ndim == 2)


def _svd(A, full_matrices: bool):
    """``jnp.linalg.svd`` with singular vectors; NaN factors for a matrix with an inf or NaN.

    NOTE: XLA's CPU SVD with singular vectors never returns on a matrix holding an inf (jax
    0.10; without vectors it gives NaNs). Such matrices are factored as zeros and their
    factors replaced by NaN: eager's singular values there are NaN as well (its vectors are
    whatever LAPACK left)."""
    finite = jnp.all(jnp.isfinite(A), axis=(-2, -1))[..., None, None]
    u, s, vh = jnp.linalg.svd(jnp.where(finite, A, 0), full_matrices=full_matrices)
    nan = jnp.asarray(jnp.nan, s.dtype)
    return jnp.where(finite, u, nan), jnp.where(finite[..., 0], s, nan), jnp.where(finite, vh, nan)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _hermitian(a, lower: bool):
    """The Hermitian matrix whose lower (else upper) triangle is ``a``'s, real diagonal
    included: what LAPACK's eigh and Cholesky read of ``a``.

    NOTE: its gradient is the cotangent unchanged. torch's backward for these ops returns the
    gradient of a Hermitian input (symmetric, spread over both triangles: cholesky_backward
    symmetrizes ``L^H gL``), and JAX's rules give the same when they symmetrize their input
    (cholesky's ``symmetrize_input``; eigh's JVP always does), which is a no-op on the value
    here. Without this, JAX's eigh under differentiation would symmetrize the whole input
    (not read one triangle) and its cholesky would give an unsymmetric gradient."""
    tri = jnp.tril(a, -1) if lower else jnp.triu(a, 1)
    diag = jnp.real(jnp.diagonal(a, axis1=-2, axis2=-1)).astype(a.dtype)
    return tri + _mH(tri) + diag[..., None] * jnp.eye(a.shape[-1], dtype=a.dtype)


_hermitian.defvjp(lambda a, lower: (_hermitian(a, lower), None), lambda lower, _, g: (g,))


@register(aten._linalg_eigh.default)
def _linalg_eigh(A, UPLO="L", compute_v=True):
    # torch reads only the UPLO triangle, as LAPACK does.
    v, w = lax_linalg.eigh(_hermitian(A, UPLO == "L"), lower=True, symmetrize_input=True)
    w = as_dtype(w, out_dtype(0))
    return (w, v) if compute_v else (w, _empty(1))


def _qr_gradient(node: torch.fx.Node) -> str | None:
    mode = _node_arg(node, 1, "mode", "reduced")
    if mode == "r":
        return "mode='r': eager's backward raises (the derivative needs Q)"
    m, n = node.args[0].meta["val"].shape[-2:]
    if mode == "complete" and guard_or_true(m > n):
        return "mode='complete' of a tall matrix: eager's backward raises"
    return None


def _svd_gradient(node: torch.fx.Node) -> str | None:
    full = _node_arg(node, 1, "full_matrices", False)
    uv = _node_arg(node, 2, "compute_uv", True)
    m, n = node.args[0].meta["val"].shape[-2:]
    if full and uv and guard_or_true(m != n):
        return "full_matrices=True of a non-square matrix: JAX has no gradient for it"
    return None


def _node_arg(node: torch.fx.Node, k: int, name: str, default):
    return node.args[k] if len(node.args) > k else node.kwargs.get(name, default)


# Lowerings whose JAX functions have no reverse-mode rule, or one that differs from eager's
# (eager raises in backward), always or for some arguments (a function of the node: the
# reason, or None). Where a gradient flows through one of these nodes, the node runs in eager
# PyTorch instead (capture/_partition.find_unsupported), so its gradient, and eager's errors
# about it, are eager's; without a gradient it runs in XLA.
NO_JAX_GRADIENT: dict[OpOverload, str | Callable[[torch.fx.Node], str | None]] = {
    aten.linalg_eig.default: "JAX differentiates eigenvectors of non-symmetric matrices only "
    "under assumptions it cannot check",
    aten.linalg_eigvals.default: "JAX differentiates eigenvalues of non-symmetric matrices "
    "through eig's eigenvector rule",
    aten.linalg_householder_product.default: "JAX has no gradient for householder_product",
    aten.ormqr.default: "JAX has no gradient for ormqr",
    aten.linalg_qr.default: _qr_gradient,
    aten._linalg_svd.default: _svd_gradient,
}


def no_jax_gradient(node: torch.fx.Node) -> str | None:
    """Why JAX cannot give eager's gradient through ``node`` (None: it can)."""
    why = NO_JAX_GRADIENT.get(node.target)
    return why(node) if callable(why) else why


@register(aten.linalg_eig.default)
def linalg_eig(self):
    # eager checks its input first, on every device
    ctx().check(
        ~jnp.all(jnp.isfinite(self)),
        "torch.linalg.eig: input tensor should not contain infs or NaNs.",
    )
    w, v = jnp.linalg.eig(self)
    return as_dtype(w, out_dtype(0)), as_dtype(v, out_dtype(1))


@register(aten.linalg_eigvals.default)
def linalg_eigvals(self):
    # NOTE: not decomposed into linalg_eig: eager's eigvals of an input that does not require
    # grad skips eig's finiteness check (NaN eigenvalues); one that requires grad goes
    # through eig and raises, which the ATen graph (exported without grad) cannot tell.
    return as_dtype(jnp.linalg.eigvals(self), out_dtype())


@register(aten.linalg_qr.default)
def linalg_qr(A, mode="reduced"):
    if mode == "r":
        return _empty(0), jnp.linalg.qr(A, mode="r")
    return jnp.linalg.qr(A, mode=mode)


def _geqrf_2d(a):
    """LAPACK's geqr2 (unblocked Householder QR) on one real matrix: R on and above the
    diagonal, the Householder vectors (unit first entry implied) below, and their taus."""
    m, n = a.shape
    rows, cols = jnp.arange(m), jnp.arange(n)

    def step(j, carry):
        a, tau = carry
        col = lax.dynamic_index_in_dim(a, j, axis=1, keepdims=False)
        alpha = col[j]
        tail = jnp.where(rows > j, col, 0)
        xnorm = jnp.sqrt(jnp.sum(tail * tail))
        beta = -jnp.copysign(jnp.hypot(alpha, xnorm), alpha)
        reflect = xnorm != 0
        t = jnp.where(reflect, (beta - alpha) / jnp.where(reflect, beta, 1), 0)
        v = jnp.where(rows > j, col / jnp.where(reflect, alpha - beta, 1), 0)
        v = jnp.where(rows == j, 1, jnp.where(reflect, v, 0))
        # Apply H = I - t v v^T to the columns right of j.
        w = v @ a
        a = jnp.where(cols[None, :] > j, a - t * v[:, None] * w[None, :], a)
        new_col = jnp.where(rows < j, col, jnp.where(rows == j, jnp.where(reflect, beta, alpha), v))
        a = lax.dynamic_update_index_in_dim(a, new_col[:, None], j, axis=1)
        return a, tau.at[j].set(t)

    k = min(m, n)
    if k == 0:
        return a, jnp.zeros((0,), a.dtype)
    return lax.fori_loop(0, k, step, (a, jnp.zeros((k,), a.dtype)))


@register(aten.geqrf.default)
def geqrf(self):
    if jnp.iscomplexobj(self):
        raise NotImplementedError("geqrf of complex matrices is not lowered")
    fn = _geqrf_2d
    for _ in range(self.ndim - 2):
        fn = jax.vmap(fn)
    return fn(self)


@register(aten.ormqr.default)
def ormqr(self, input2, input3, left=True, transpose=False):
    return lax_linalg.ormqr(self, input2, input3, left=left, transpose=transpose)


@register(aten.linalg_householder_product.default)
def linalg_householder_product(input, tau):
    return lax_linalg.householder_product(input, tau)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _cholesky_lower(x, upper):
    """The lower Cholesky factor of the Hermitian matrix of ``x``'s lower (``upper``: upper)
    triangle, the triangle torch reads; its gradient is torch's (``cholesky_backward``)."""
    return lax_linalg.cholesky(_hermitian(x, not upper), symmetrize_input=False)


def _cholesky_lower_fwd(x, upper):
    low = _cholesky_lower(x, upper)
    return low, low


def _cholesky_lower_bwd(upper, low, g):
    # torch's formula on torch's (conjugate) cotangent: with P = tril(L^H gL),
    # gA = L^{-H} (P + tril(P, -1)^H) / 2 L^{-1}.
    p = jnp.tril(_mm(_mH(low), jnp.conj(g)))
    p = 0.5 * (p + _mH(jnp.tril(p, -1)))
    p = lax_linalg.triangular_solve(
        low, p, left_side=True, lower=True, transpose_a=True, conjugate_a=True
    )
    p = lax_linalg.triangular_solve(low, p, left_side=False, lower=True)
    return (jnp.conj(p),)


_cholesky_lower.defvjp(_cholesky_lower_fwd, _cholesky_lower_bwd)


def _cholesky(x, upper):
    low = _cholesky_lower(x, upper)
    return _mH(low) if upper else low


@register(aten.linalg_cholesky_ex.default)
def linalg_cholesky_ex(self, *, upper=False, check_errors=False):
    low = _cholesky_lower(self, upper)
    a = _mH(self) if upper else self  # (potf2 reads the lower triangle as given)
    if a.shape[-1] == 0:
        return (_mH(low) if upper else low), _empty(1)
    # XLA's factor of a matrix that is not positive-definite is NaN throughout; eager's is what
    # LAPACK's potrf leaves: computed only where some factorization failed.
    failed = ~jnp.isfinite(jnp.diagonal(low, axis1=-2, axis2=-1))
    low, info = jax.lax.cond(
        jnp.any(failed),
        _partial_factor,
        lambda low, a: (low, jnp.zeros(a.shape[:-2], jnp.int32)),
        low,
        a,
    )
    info = as_dtype(info.reshape(ctx().out[1].shape), out_dtype(1))
    _check_errors(check_errors, info, "linalg.cholesky_ex", self)
    return (_mH(low) if upper else low), info


def _partial_factor(low, a):
    """``low`` where the factorization succeeded, else LAPACK's partial factor of ``a`` (not
    differentiated), and LAPACK's info."""
    partial, info = _potf2(a)
    ok = (info == 0)[..., None, None]
    return jnp.where(ok, low, lax.stop_gradient(partial)), info


def _potf2(a):
    """LAPACK's unblocked lower Cholesky (``potf2``) of the Hermitian ``a`` and its info: the
    columns before the first pivot that is not positive are the factor's, that pivot holds its
    Schur complement (not a square root), the rest is ``a``'s lower triangle as given. MKL's
    potrf leaves exactly this for matrices up to 128 (measured); on larger ones it works in
    blocks and the entries after the failed minor differ (the leading minor is the same)."""
    n = a.shape[-1]
    idx = jnp.arange(n)
    a = jnp.tril(a)

    def step(j, state):
        a, info = state
        row = jnp.where(idx < j, a[..., j, :], 0)  # L[j, :j]
        d = jnp.real(a[..., j, j]) - jnp.sum(jnp.real(row * jnp.conj(row)), axis=-1)
        active, bad = info == 0, ~(d > 0)
        pivot = jnp.where(bad, d, jnp.sqrt(jnp.where(bad, 1, d))).astype(a.dtype)
        below = (a[..., :, j] - _mm(a, jnp.conj(row)[..., :, None])[..., 0]) / pivot[..., None]
        old = a[..., :, j]
        solved = (active & ~bad)[..., None]
        col = jnp.where(idx > j, jnp.where(solved, below, old), old)
        col = jnp.where((idx == j) & active[..., None], pivot[..., None], col)
        info = jnp.where(active & bad, j + 1, info)
        return a.at[..., :, j].set(col), info

    return jax.lax.fori_loop(0, n, step, (a, jnp.zeros(a.shape[:-2], jnp.int32)))


def cholesky(self, upper=False):
    # (the deprecated torch.cholesky: eager raises for a matrix that is not positive-definite)
    low = _cholesky_lower(self, upper)
    check_linalg(_chol_info(low, None, _hermitian(self, not upper)), "cholesky", self.ndim == 2)
    return _mH(low) if upper else low


if hasattr(aten, "cholesky"):  # (deprecated for torch.linalg.cholesky; gone in torch 2.14)
    register(aten.cholesky.default)(cholesky)


def _cho_solve(low, b):
    y = lax_linalg.triangular_solve(low, b, left_side=True, lower=True)
    return lax_linalg.triangular_solve(
        low, y, left_side=True, lower=True, conjugate_a=True, transpose_a=True
    )


# NOTE: cholesky_solve and cholesky_inverse read one triangle of the factor, but torch's
# backward differentiates them as functions of the whole factor (A = L L^H with every entry of
# L): the other triangle gets a gradient too. The custom VJPs below are torch's formulas.
@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _cholesky_solve(b, factor, upper):
    return _cho_solve(_mH(factor) if upper else factor, b)


def _cholesky_solve_fwd(b, factor, upper):
    x = _cholesky_solve(b, factor, upper)
    return x, (factor, x)


def _cholesky_solve_bwd(upper, residuals, g):
    factor, x = residuals
    g_b = _cholesky_solve(jnp.conj(g), factor, upper)  # torch's (conjugate) convention
    common = _mm(g_b, _mH(x))
    common = common + _mH(common)
    g_factor = -_mm(factor, common) if upper else -_mm(common, factor)
    return jnp.conj(g_b), jnp.conj(g_factor)


_cholesky_solve.defvjp(_cholesky_solve_fwd, _cholesky_solve_bwd)


@register(aten.cholesky_solve.default)
def cholesky_solve(self, input2, upper=False):
    batch = jnp.broadcast_shapes(self.shape[:-2], input2.shape[:-2])
    b = jnp.broadcast_to(self, batch + self.shape[-2:])
    f = jnp.broadcast_to(input2, batch + input2.shape[-2:])
    return _cholesky_solve(b, f, upper)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _cholesky_inverse(factor, upper):
    low = _mH(factor) if upper else factor
    eye = jnp.broadcast_to(jnp.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    return _cho_solve(low, eye)


def _cholesky_inverse_fwd(factor, upper):
    inverse = _cholesky_inverse(factor, upper)
    return inverse, (factor, inverse)


def _cholesky_inverse_bwd(upper, residuals, g):
    factor, inverse = residuals
    g = jnp.conj(g)  # torch's (conjugate) convention
    common = _mm(inverse, _mm(g + _mH(g), inverse))
    return (jnp.conj(-_mm(factor, common) if upper else -_mm(common, factor)),)


_cholesky_inverse.defvjp(_cholesky_inverse_fwd, _cholesky_inverse_bwd)


@register(aten.cholesky_inverse.default)
def cholesky_inverse(self, upper=False):
    # eager raises for a factor with a zero on its diagonal (a singular matrix)
    check_linalg(_lu_info(self, None), "cholesky_inverse", self.ndim == 2)
    return _cholesky_inverse(self, upper)


def _lu(A):
    """(LU, 1-based int32 pivots as LAPACK/torch, permutation) of ``A``."""
    lu, piv, perm = lax_linalg.lu(A)
    return lu, (piv + 1).astype(jnp.int32), perm


@register(aten.linalg_lu_factor_ex.default)
def linalg_lu_factor_ex(A, *, pivot=True, check_errors=False):
    if not pivot:
        raise NotImplementedError("LU without pivoting is not available on CPU (torch: same)")
    lu, piv, _ = _lu(A)
    info = _lu_info(lu, 2)
    _check_errors(check_errors, info, "torch.linalg.lu_factor_ex", A)
    return lu, as_dtype(piv, out_dtype(1)), info


def _unpack(lu, m, n):
    k = min(m, n)
    low = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=lu.dtype)
    up = jnp.triu(lu[..., :k, :])
    return low, up


def _perm_matrix(perm, m, dtype):
    # P with A = P @ L @ U: column j of P is e_{perm[j]}.
    return jnp.swapaxes(jax.nn.one_hot(perm, m, dtype=dtype), -1, -2)


@register(aten.linalg_lu.default)
def linalg_lu(A, *, pivot=True):
    if not pivot:
        raise NotImplementedError("LU without pivoting is not available on CPU (torch: same)")
    m, n = A.shape[-2:]
    lu, _, perm = _lu(A)
    low, up = _unpack(lu, m, n)
    return _perm_matrix(perm, m, A.dtype), low, up


@register(aten.lu_unpack.default)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    m, n = LU_data.shape[-2:]
    if unpack_data:
        low, up = _unpack(LU_data, m, n)
    else:
        low, up = _empty(1), _empty(2)
    if unpack_pivots:
        perm = lax_linalg.lu_pivots_to_permutation(LU_pivots.astype(jnp.int32) - 1, m)
        p = _perm_matrix(perm, m, LU_data.dtype)
    else:
        p = _empty(0)
    return p, low, up


def _lu_solve(lu, perm, b, adjoint):
    """Solve A X = B (or A^H X = B) from A's LU factors (P^T A = L U, P^T = rows ``perm``)."""
    if not adjoint:
        pb = jnp.take_along_axis(b, jnp.broadcast_to(perm[..., None], b.shape[:-1] + (1,)), -2)
        y = lax_linalg.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
        return lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)
    y = lax_linalg.triangular_solve(
        lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=True
    )
    z = lax_linalg.triangular_solve(
        lu, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True, conjugate_a=True
    )
    inv = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(z, jnp.broadcast_to(inv[..., None], z.shape[:-1] + (1,)), -2)


def _batch(*xs):
    batch = jnp.broadcast_shapes(*(x.shape[:-2] for x in xs))
    return [jnp.broadcast_to(x, batch + x.shape[-2:]) for x in xs]


@register(aten.linalg_lu_solve.default)
def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    m = LU.shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, m)
    if not left:
        # X A = B  <=>  A^H X^H = B^H
        return _mH(linalg_lu_solve(LU, pivots, _mH(B), left=True, adjoint=not adjoint))
    lu, b = _batch(LU, B)
    perm = jnp.broadcast_to(perm, lu.shape[:-1])
    return _lu_solve(lu, perm, b, adjoint)


@register(aten._linalg_solve_ex.default)
def _linalg_solve_ex(A, B, *, left=True, check_errors=False):
    result = ctx().out[0]
    # torch treats B as a (batch of) vector(s) when it has one dim less than A.
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    b = B[..., None] if vector else B
    lu, piv, perm = _lu(A)
    if left:
        lub, bb = _batch(lu, b)
        x = _lu_solve(lub, jnp.broadcast_to(perm, lub.shape[:-1]), bb, False)
    else:
        lub, bb = _batch(lu, _mH(b))
        x = _mH(_lu_solve(lub, jnp.broadcast_to(perm, lub.shape[:-1]), bb, True))
    x = x[..., 0] if vector else x
    info = _lu_info(lu, 3)
    _check_errors(check_errors, info, "torch.linalg.solve_ex", A)
    return (jnp.reshape(x, tuple(result.shape)), lu, as_dtype(piv, out_dtype(2)), info)


@register(aten.linalg_inv_ex.default)
def linalg_inv_ex(A, *, check_errors=False):
    lu, _, _ = _lu(A)
    info = _lu_info(lu, 1)
    _check_errors(check_errors, info, "linalg.inv_ex", A)
    return jnp.linalg.inv(A), info


@register(aten._linalg_det.default)
def _linalg_det(A):
    if A.shape[-1] == 0:  # the empty product
        return jnp.ones(A.shape[:-2], A.dtype), A, jnp.zeros(A.shape[:-1], out_dtype(2))
    lu, piv, _ = _lu(A)
    # jnp.linalg.det has a gradient that is correct for singular matrices too.
    return jnp.linalg.det(A), lu, as_dtype(piv, out_dtype(2))


@register(aten._linalg_slogdet.default)
def _linalg_slogdet(A):
    lu, piv, _ = _lu(A)
    sign, logabsdet = jnp.linalg.slogdet(A)
    return (
        as_dtype(sign, out_dtype(0)),
        as_dtype(logabsdet, out_dtype(1)),
        lu,
        as_dtype(piv, out_dtype(3)),
    )


@register(aten.linalg_solve_triangular.default)
def linalg_solve_triangular(self, B, *, upper, left=True, unitriangular=False):
    # NOTE: eager accepts operands of different dtypes (the result's is the fake tensor's)
    dtype = out_dtype()
    a, b = _batch(as_dtype(self, dtype), as_dtype(B, dtype))
    return lax_linalg.triangular_solve(
        a, b, left_side=left, lower=not upper, unit_diagonal=unitriangular
    )


@register(aten.triangular_solve.default)
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    b, a = _batch(self, A)
    x = lax_linalg.triangular_solve(
        a, b, left_side=True, lower=not upper, transpose_a=transpose, unit_diagonal=unitriangular
    )
    return x, a


@register(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(self):
    # Evaluated in float64 for real inputs (complex128 for complex): JAX's Pade approximant
    # loses more to rounding in float32 than torch's Taylor scheme; rounded once at the end.
    wide = np.dtype(np.complex128) if jnp.iscomplexobj(self) else np.dtype(np.float64)
    return as_dtype(jax.scipy.linalg.expm(as_dtype(self, wide)), self.dtype)


def _pinv(A, atol, rtol, hermitian):
    m, n = A.shape[-2:]
    if hermitian:
        # torch reads the lower triangle only (no symmetrization).
        v, w = lax_linalg.eigh(A, lower=True, symmetrize_input=False)
        s, u, vh = jnp.abs(w), v, _mH(v) * jnp.sign(w)[..., :, None]
    else:
        u, s, vh = _svd(A, full_matrices=False)
    smax = jnp.max(s, axis=-1, keepdims=True, initial=0)
    if atol is None and rtol is None:
        rtol = np.finfo(np.dtype(s.dtype)).eps * max(m, n)
    atol = 0 if atol is None else (atol[..., None] if hasattr(atol, "ndim") else atol)
    rtol = 0 if rtol is None else (rtol[..., None] if hasattr(rtol, "ndim") else rtol)
    cutoff = jnp.maximum(atol, rtol * smax)
    keep = s > cutoff
    s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(A.dtype)
    return _mm(_mH(vh) * s_inv[..., None, :], _mH(u))


def _pinv_differentiable(A, atol, rtol, hermitian):
    """pinv with the derivative of the pseudo-inverse at constant rank (torch's rule): with
    X = A+, dX = -X dA X + X X^H dA^H (I - A X) + (I - X A) dA^H X^H X. JAX's rule goes
    through the SVD and, on rank-deficient input, through the noise in its zero singular
    values."""

    @jax.custom_vjp
    def pinv(a):
        return _pinv(a, atol, rtol, hermitian)

    def fwd(a):
        x = pinv(a)
        return x, (a, x)

    def bwd(residuals, g):
        a, x = residuals
        m, n = a.shape[-2:]
        eye_m = jnp.eye(m, dtype=a.dtype)
        eye_n = jnp.eye(n, dtype=a.dtype)
        gh, xh = _mH(g), _mH(x)
        grad = (
            -_mm(_mm(xh, g), xh)
            + _mm(_mm(eye_m - _mm(a, x), gh), _mm(x, xh))
            + _mm(_mm(xh, x), _mm(gh, eye_n - _mm(x, a)))
        )
        return (grad,)

    pinv.defvjp(fwd, bwd)
    return pinv(A)


@register(aten.linalg_pinv.atol_rtol_tensor, aten.linalg_pinv.atol_rtol_float)
def linalg_pinv(self, *, atol=None, rtol=None, hermitian=False):
    if not hermitian:
        _check_svd_input(self)
    return as_dtype(_pinv_differentiable(self, atol, rtol, hermitian), out_dtype())


@register(aten.linalg_pinv.default, aten.linalg_pinv.rcond_tensor)
def linalg_pinv_rcond(self, rcond, hermitian=False):
    if not hermitian:
        _check_svd_input(self)
    return as_dtype(_pinv_differentiable(self, 0, rcond, hermitian), out_dtype())
