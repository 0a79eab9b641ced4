"""Reductions. ``_reduce`` owns the policy for ``dim``, ``keepdim`` and ``dtype``."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla.ops._common import (
    Kind,
    as_dtype,
    is_half,
    jdt,
    opmath_dtype,
    out_dtype,
    promote,
)
from torch2xla.ops._derivatives import with_partials
from torch2xla.ops._float_bits import positive_zero
from torch2xla.ops._grad_mode import backward_grad_mode
from torch2xla.ops._half_product import half_product
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _axes(dim, ndim: int) -> tuple[int, ...] | None:
    # NOTE: in ATen reductions dim=None and dim=[] both mean every dim.
    if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        return None
    dims = dim if isinstance(dim, list | tuple) else (dim,)
    return tuple(sorted({d % max(ndim, 1) for d in dims})) if ndim else None


def _reduce(jfn, x, dim, keepdim, compute=None, **kw):
    """Reduce ``x`` over ``dim`` with ``jfn``, computing in ``compute`` and returning the node's
    torch output dtype (integer sums give int64, half means accumulate in float32, ...)."""
    result = out_dtype()
    x = as_dtype(x, compute or result)
    axes = _axes(dim, x.ndim)
    return as_dtype(jfn(x, axis=axes, keepdims=keepdim, **kw), result)


def _acc_dtype(x, dtype, index: int | None = None):
    """Accumulation dtype: the requested one, else float32 for half floats, else the dtype of
    the node's output (its ``index``-th output for multi-output ops)."""
    if dtype is not None:
        return jdt(dtype)
    return opmath_dtype(x.dtype) if is_half(x.dtype) else out_dtype(index)


def _summed(jfn):
    """``jfn`` (jnp.sum, jnp.mean) with eager's zero sign where each result sums one element:
    eager adds it to a +0.0 accumulator (the sum of -0.0 alone is +0.0); XLA's simplifier
    makes a reduction of one element the element itself (-0.0)."""

    def fn(x, axis=None, keepdims=False, **kw):
        out = jfn(x, axis=axis, keepdims=keepdims, **kw)
        one = math.prod(x.shape[a] for a in (range(x.ndim) if axis is None else axis)) == 1
        if one and jnp.issubdtype(out.dtype, jnp.floating):
            return positive_zero(out)
        return out

    fn.__name__ = jfn.__name__
    return fn


_sum, _mean = _summed(jnp.sum), _summed(jnp.mean)


@register(aten.sum.dim_IntList, aten.sum.default)
def sum_(self, dim=None, keepdim=False, *, dtype=None):
    return _reduce(_sum, self, dim, keepdim, _acc_dtype(self, dtype))


# NOTE: eager's derivative of nansum is ``grad * ~isnan(self)``: NaN where the gradient is
# infinite at a NaN element (``nanmean`` of an all-NaN slice divides it by a count of 0);
# torch's decomposition (``sum(where(isnan(x), 0, x))``) gives 0 there.
_nan_to_zero = with_partials(
    lambda x: jnp.where(jnp.isnan(x), jnp.zeros((), x.dtype), x),
    lambda x: (~jnp.isnan(x),),
)


@register(aten.nansum.default)
def nansum(self, dim=None, keepdim=False, *, dtype=None):
    x = _nan_to_zero(self) if jnp.issubdtype(self.dtype, jnp.floating) else self
    return _reduce(_sum, x, dim, keepdim, _acc_dtype(self, dtype))


@register(aten.mean.dim, aten.mean.default)
def mean(self, dim=None, keepdim=False, *, dtype=None):
    return _reduce(_mean, self, dim, keepdim, _acc_dtype(self, dtype))


@register(aten.prod.dim_int, aten.prod.default)
def prod(self, dim=None, keepdim=False, *, dtype=None):
    computed = jdt(dtype) if dtype is not None else self.dtype
    if is_half(computed) and not ctx().on_cuda:
        # NOTE: eager's CPU product of float16/bfloat16 is not accumulated in float32, as
        # its sums are: every product is rounded to the dtype, in eager's order
        # (``half_product``). CUDA's accumulates in float32.
        return _reduce(functools.partial(_prod, value=half_product), self, dim, keepdim, computed)
    return _reduce(_prod, self, dim, keepdim, _acc_dtype(self, dtype))


def _prod(x, axis=None, keepdims=False, value=jnp.prod):
    """``value`` (jnp.prod) with eager's derivative (``prod_backward``), which picks its
    formula by the zeros of the whole input: none, ``result / x`` (NaN at an infinite
    element, where JAX's product of the others is finite); else the product of the others
    (exclusive cumulative products from both ends); for the whole-array product, 0 where two
    or more are zero."""
    if not jnp.issubdtype(x.dtype, jnp.floating) or x.ndim == 0 or x.size == 0:
        return value(x, axis=axis, keepdims=keepdims)
    fn = jax.custom_jvp(lambda x: value(x, axis=axis, keepdims=keepdims))

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        whole = axis is None or len(axis) == x.ndim
        coef = _prod_partials(x.reshape(-1) if whole else x, 0 if whole else axis[0], whole)
        return fn(x), jnp.sum(coef.reshape(x.shape) * t, axis=axis, keepdims=keepdims)

    return fn(x)


def _prod_partials(v, ax, whole):
    # (eager counts the zeros of the whole input, for a product along a dim too; divided by 1
    # where a zero makes ``plain`` unused: its derivative, in a double backward, was NaN)
    zeros = jnp.sum(v == 0)
    plain = jnp.prod(v, axis=ax, keepdims=True) / jnp.where(zeros == 0, v, 1)
    n = v.shape[ax]
    ones = jnp.ones_like(lax.slice_in_dim(v, 0, 1, axis=ax))
    before = jnp.cumprod(jnp.concatenate([ones, lax.slice_in_dim(v, 0, n - 1, axis=ax)], ax), ax)
    rest = jnp.flip(lax.slice_in_dim(v, 1, n, axis=ax), ax)
    after = jnp.flip(jnp.cumprod(jnp.concatenate([ones, rest], ax), ax), ax)
    coef = jnp.where(zeros == 0, plain, before * after)
    # (eager's grad-mode backward, ``_grad_mode``, keeps the products: their derivative is the
    # second derivative, nonzero between two zeros)
    return jnp.where(zeros > 1, 0, coef) if whole and not backward_grad_mode() else coef


@register(aten.amax.default)
def amax(self, dim=(), keepdim=False):
    return _reduce(jnp.max, self, dim, keepdim)


@register(aten.amin.default)
def amin(self, dim=(), keepdim=False):
    return _reduce(jnp.min, self, dim, keepdim)


@register(aten.any.default, aten.any.dim, aten.any.dims)
def any_(self, dim=None, keepdim=False):
    if isinstance(dim, list | tuple) and not dim:  # see all_
        return as_dtype(self != 0, out_dtype())
    return _reduce(jnp.any, self, dim, keepdim, np.dtype(bool))


@register(aten.all.default, aten.all.dim, aten.all.dims)
def all_(self, dim=None, keepdim=False):
    # NOTE: unlike the other reductions, any.dims and all.dims read dim=[] as no dim at all
    # (an elementwise test); only dim=None means every dim.
    if isinstance(dim, list | tuple) and not dim:
        return as_dtype(self != 0, out_dtype())
    return _reduce(jnp.all, self, dim, keepdim, np.dtype(bool))


def _correction(correction, unbiased=None):
    if correction is None:
        return 1 if unbiased is None or unbiased else 0
    return correction


def _spread_dtype(x, index: int | None = None):
    """Where var and std (and their means) compute: ``_acc_dtype``, but a complex input's own
    complex dtype (its result is real: casting the input to it first dropped the imaginary
    part), and on the CPU float64 for float32 and half precision.

    NOTE: eager's CPU kernels accumulate the variance of float32 (and of half precision,
    computed as float32) in float64 and take the square root there: the std of
    [1e20, -1e20, 3e19] is 1.01e20 in eager, inf from float32 squares. CUDA's accumulate in
    float32. (A complex variance is the sum of its parts' variances, each rounded to the
    real dtype first: kept in the complex dtype.)"""
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return x.dtype
    acc = _acc_dtype(x, None, index)
    if acc == np.float32 and not ctx().on_cuda:
        return np.dtype(np.float64)
    return acc


def _var(x, axis=None, keepdims=False, ddof=0):
    """``jnp.var`` with eager's divisor where the degrees of freedom are not positive, and
    eager's derivative (``var_backward``); complex inputs with positive degrees of freedom
    keep JAX's (the same values: no infinities in play).

    NOTE: eager divides the sum of squares by ``max(0, n - correction)`` (inf, or NaN for a
    constant slice; JAX's ``var`` is NaN). Its derivative is ``2 / (n - correction) * (x -
    mean)``, unclamped along dims (finite and of the other sign for ``correction > n``) and,
    for the whole input past its degrees of freedom, ``inf`` (NaN at the mean). JAX's
    derivative of ``jnp.var`` adds the mean's term, ``-2 / dof * mean(x - mean)``: zero for
    finite slices, but NaN on every element of a slice holding an infinity, where eager's is
    ``-inf``/``inf`` on the finite ones."""
    n = x.size if axis is None else int(np.prod([x.shape[a] for a in axis]))
    dof = n - ddof
    complex_ = jnp.issubdtype(x.dtype, jnp.complexfloating)
    if not jnp.issubdtype(x.dtype, jnp.inexact) or (complex_ and dof > 0):
        return jnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof)

    def forward(x):
        if dof > 0:
            return jnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof)
        centered = x - jnp.mean(x, axis=axis, keepdims=True)
        squares = jnp.sum(jnp.real(centered * jnp.conj(centered)), axis=axis, keepdims=keepdims)
        return squares / jnp.zeros((), squares.dtype)

    fn = jax.custom_jvp(forward)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        centered = x - jnp.mean(x, axis=axis, keepdims=True)
        if dof <= 0 and (axis is None or x.ndim == 0):
            partial = jnp.where(centered == 0, jnp.nan, jnp.inf).astype(t.real.dtype)
            if complex_:  # (eager's derivative is real there: the real parts get it)
                t = jnp.real(t)
        elif complex_:
            # Re(conj(partial) * t) by parts: a complex product with the real cotangent
            # (promoted to complex) made 0 * inf = NaN where eager's is +-inf
            k = jnp.inf if dof == 0 else 2.0 / dof
            re, im = k * jnp.real(centered), k * jnp.imag(centered)
            tangent = jnp.real(t) * re + jnp.imag(t) * im
            return fn(x), jnp.sum(tangent, axis=axis, keepdims=keepdims)
        else:
            partial = (jnp.inf if dof == 0 else 2.0 / dof) * centered
        return fn(x), jnp.sum(partial * t, axis=axis, keepdims=keepdims)

    return fn(x)


@register(aten.var.correction)
def var(self, dim=None, *, correction=None, keepdim=False):
    return _reduce(_var, self, dim, keepdim, _spread_dtype(self), ddof=_correction(correction))


@register(aten.var.dim)
def var_dim(self, dim=None, unbiased=True, keepdim=False):
    return var(self, dim, correction=1 if unbiased else 0, keepdim=keepdim)


@register(aten.var_mean.correction)
def var_mean(self, dim=None, *, correction=None, keepdim=False):
    acc = _spread_dtype(self, 0)
    x, axes = as_dtype(self, acc), _axes(dim, self.ndim)
    v = _var(x, axis=axes, keepdims=keepdim, ddof=_correction(correction))
    m = jnp.mean(x, axis=axes, keepdims=keepdim)
    return as_dtype(v, out_dtype(0)), as_dtype(m, out_dtype(1))


def _std(x, axis=None, keepdims=False, ddof=0):
    # NOTE: eager's std gradient is 0 where std is 0 (a constant row), not 0 * inf = NaN.
    v = _var(x, axis=axis, keepdims=keepdims, ddof=ddof)
    zero = v == 0
    return jnp.where(zero, 0, jnp.sqrt(jnp.where(zero, 1, v)))


@register(aten.std_mean.correction)
def std_mean(self, dim=None, *, correction=None, keepdim=False):
    acc = _spread_dtype(self, 0)
    x, axes = as_dtype(self, acc), _axes(dim, self.ndim)
    s = _std(x, axis=axes, keepdims=keepdim, ddof=_correction(correction))
    m = jnp.mean(x, axis=axes, keepdims=keepdim)
    return as_dtype(s, out_dtype(0)), as_dtype(m, out_dtype(1))


@register(aten.std.correction)
def std(self, dim=None, *, correction=None, keepdim=False):
    return _reduce(_std, self, dim, keepdim, _spread_dtype(self), ddof=_correction(correction))


def _arg(jfn, self, dim, keepdim):
    if dim is None:
        out = jfn(self.reshape(-1))
        return out.reshape((1,) * self.ndim) if keepdim else out
    if self.ndim == 0:
        return jnp.zeros((), jnp.int64)
    return jfn(self, axis=dim, keepdims=keepdim)


@register(aten.argmax.default)
def argmax(self, dim=None, keepdim=False):
    return as_dtype(_arg(jnp.argmax, self, dim, keepdim), out_dtype())


@register(aten.argmin.default)
def argmin(self, dim=None, keepdim=False):
    return as_dtype(_arg(jnp.argmin, self, dim, keepdim), out_dtype())


def _max_min_dim(argfn, self, dim, keepdim):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    # NOTE: the values are read at the indices, so that their gradient goes to the index
    # returned (the first of tied elements), as eager's; jnp.max's is shared among ties.
    index = argfn(self, axis=dim, keepdims=True)
    values = jnp.take_along_axis(self, index, axis=dim)
    if not keepdim:
        values, index = jnp.squeeze(values, dim), jnp.squeeze(index, dim)
    return values, as_dtype(index, np.dtype(np.int64))


@register(aten.max.dim)
def max_dim(self, dim, keepdim=False):
    return _max_min_dim(jnp.argmax, self, dim, keepdim)


@register(aten.min.dim)
def min_dim(self, dim, keepdim=False):
    return _max_min_dim(jnp.argmin, self, dim, keepdim)


def evenly_distributed(reduce):
    """``reduce`` (of a whole array to one of its elements) with the derivative of eager's
    ``evenly_distribute_backward``: the gradient shared among the elements equal to the
    result, or among the NaNs where it is NaN (JAX's derivative of max gave NaN everywhere
    there: no element equals NaN)."""

    @jax.custom_jvp
    def fn(x):
        return reduce(x)

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = fn(x)
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            return out, jax.jvp(reduce, primals, tangents)[1]
        mask = jnp.where(jnp.isnan(out), jnp.isnan(x), x == out)
        count = jnp.sum(mask).astype(out.dtype)
        return out, jnp.sum(jnp.where(mask, t.astype(out.dtype), 0)) / count

    return fn


_max_all, _min_all = evenly_distributed(jnp.max), evenly_distributed(jnp.min)


@register(aten.max.default)
def max_(self):
    return _max_all(self)


@register(aten.min.default)
def min_(self):
    return _min_all(self)


@register(aten.logsumexp.default)
def logsumexp(self, dim, keepdim=False):
    compute, result = promote(Kind.INT_TO_FLOAT, self)
    x = as_dtype(self, compute)
    return as_dtype(jax.nn.logsumexp(x, axis=_axes(dim, x.ndim), keepdims=keepdim), result)


def _cum(jfn, self, dim, dtype, result=None):
    """``jfn`` along ``dim`` in the dtype eager accumulates in, as ``result`` (the node's
    output dtype unless given)."""
    # Half-precision scans accumulate in float32, as torch's CPU kernels do (a requested half
    # dtype too: the input rounded to it first).
    result = out_dtype() if result is None else result
    if dtype is not None:
        x = as_dtype(self, jdt(dtype))
        x = as_dtype(x, opmath_dtype(x.dtype))
    else:
        x = as_dtype(self, opmath_dtype(self.dtype) if is_half(self.dtype) else result)
    if x.ndim == 0:
        return as_dtype(x, result)
    return as_dtype(jfn(x, axis=dim % x.ndim), result)


@register(aten.cumsum.default)
def cumsum(self, dim, *, dtype=None):
    requested = None if dtype is None else jdt(dtype)
    floats = requested is not None and jnp.issubdtype(requested, jnp.floating)
    if not floats or requested == self.dtype or not jnp.issubdtype(self.dtype, jnp.floating):
        return _cum(jnp.cumsum, self, dim, dtype)
    # NOTE: eager's derivative casts the gradient to the input's dtype first
    # (``cumsum_backward(grad.to(self.scalar_type()))``): the reversed sums run in the
    # input's dtype (a float32 input summed in float16 gets float32 sums of its gradient,
    # where the transpose of the casts rounded them to float16).
    result, own = out_dtype(), self.dtype
    fn = jax.custom_jvp(lambda x: _cum(jnp.cumsum, x, dim, dtype, result))

    @fn.defjvp
    def _jvp(primals, tangents):
        # (plain conversions: ``as_dtype``'s of float32 to float64 reads the values, which a
        # tangent's transpose cannot)
        (x,), (t,) = primals, tangents
        if t.ndim:
            t = jnp.cumsum(t.astype(opmath_dtype(own)), axis=dim % t.ndim).astype(own)
        return fn(x), t.astype(result)

    return fn(self)


@register(aten.cumprod.default)
def cumprod(self, dim, *, dtype=None):
    return _cum(_cumprod, self, dim, dtype)


def _cumprod(x, axis):
    """jnp.cumprod with eager's derivative (``cumprod_backward``), per slice along ``axis``
    with its first zero at z1 and second at z2: before z1, ``sum(out[j] * grad[j], k <= j <
    z1) / x[k]``; at z1, the product before z1 times ``sum(grad[j] * prod(x[z1+1..j]),
    z1 <= j < z2)``; after z1, 0 (JAX's derivative is NaN there where a NaN precedes).

    In a grad-mode backward (``_grad_mode``: create_graph) with a zero anywhere in the input,
    eager's is a sum of products that omit each element, whose own derivative is the second
    derivative: there the product rule's tangent (JAX's derivative of ``lax.cumprod``), whose
    derivative in a zero is not masked away."""
    if not jnp.issubdtype(x.dtype, jnp.floating) or x.shape[axis] <= 1:
        return jnp.cumprod(x, axis=axis)
    fn = jax.custom_jvp(lambda x: jnp.cumprod(x, axis=axis))

    @fn.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        out = fn(x)
        if not backward_grad_mode():
            return out, _cumprod_tangent(x, t, out, axis)
        zero = jnp.any(x == 0)
        # (each formula on ones where the other is taken: the transpose multiplies the masked
        # cotangent by its coefficients)
        masked = _cumprod_tangent(jnp.where(zero, 1, x), t, jnp.where(zero, 1, out), axis)
        by_products = functools.partial(lax.cumprod, axis=axis)
        exact = jax.jvp(by_products, (jnp.where(zero, x, 1),), (t,))[1]
        return out, jnp.where(zero, exact, masked)

    return fn(x)


def _exclusive(out, axis):
    """``out`` shifted one place along ``axis``, 1 first: the exclusive cumulative product."""
    ones = jnp.ones_like(lax.slice_in_dim(out, 0, 1, axis=axis))
    n = out.shape[axis]
    return jnp.concatenate([ones, lax.slice_in_dim(out, 0, n - 1, axis=axis)], axis)


def _cumprod_tangent(x, t, out, axis):
    """The tangent of eager's ``cumprod_backward`` (see ``_cumprod``) at ``x`` (``out`` its
    cumulative product)."""
    zeros = jnp.cumsum(x == 0, axis=axis)
    before = zeros == 0
    first = (x == 0) & (zeros == 1)
    # (divided by 1 where masked: the transpose divides the masked cotangent by it)
    scaled = jnp.where(before, t / jnp.where(before, x, 1), 0)
    # (each coefficient 0 where masked, and masked again: the transposes mask the
    # cotangent, then multiply by it, as eager masks the gradient)
    kept = jnp.where(before, out, 0)
    to_first = jnp.where(before, kept * jnp.cumsum(scaled, axis), 0)
    prefix = jnp.sum(jnp.where(first, _exclusive(out, axis), 0), axis, keepdims=True)
    t_first = jnp.sum(jnp.where(first, t, 0), axis, keepdims=True)
    # (not masked: eager multiplies the masked gradient by it, NaN at 0 * inf)
    between = jnp.cumprod(jnp.where((zeros == 1) & ~first, x, 1), axis)
    at_first = jnp.where(zeros == 1, between * (prefix * t_first), 0)
    return to_first + at_first
