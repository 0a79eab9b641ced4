"""Indexing, gathers and scatters, sorting."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla.ops._bounds import check_flat_index, check_index, check_indices
from torch2xla.ops._common import as_dtype, canonical_dim
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _bool_as_int(fn):
    """Run a scatter-style lowering on bool tensors through int32: torch's add on bools is
    logical or, multiply logical and, max/min or/and; XLA scatters reject bools."""

    def lowering(self, *args, **kwargs):
        if self.dtype != jnp.bool_:
            return fn(self, *args, **kwargs)
        args = [a.astype(jnp.int32) if hasattr(a, "dtype") and a.dtype == jnp.bool_ else a
                for a in args]
        return fn(self.astype(jnp.int32), *args, **kwargs) != 0

    return lowering


@jax.custom_vjp
def _scatter_multiply(base, idx, src):
    """``base.at[idx].multiply(src)`` with the exact gradient: each factor gets the product of
    the other factors at its position (zeros included), as torch's backward gives; JAX
    differentiates scatter-multiply only with unique indices."""
    return base.at[idx].multiply(src)


def _scatter_multiply_fwd(base, idx, src):
    return base.at[idx].multiply(src), (base, idx, src)


def _scatter_multiply_bwd(residuals, g):
    base, idx, src = residuals
    zb, zs = base == 0, src == 0
    zeros = zb.astype(jnp.int32).at[idx].add(zs.astype(jnp.int32))  # zero factors per position
    nonzero = jnp.where(zb, 1, base).at[idx].multiply(jnp.where(zs, 1, src))

    def others(x, z, n_zero, prod):
        # The product of the other factors: prod / x without zeros, else 0 or the product of
        # the nonzero ones when x is the only zero.
        return jnp.where(z, jnp.where(n_zero == 1, prod, 0),
                         jnp.where(n_zero == 0, prod / jnp.where(z, 1, x), 0))

    g_base = g * others(base, zb, zeros, nonzero)
    g_src = g[idx] * others(src, zs, zeros[idx], nonzero[idx])
    return g_base, None, g_src


_scatter_multiply.defvjp(_scatter_multiply_fwd, _scatter_multiply_bwd)


def _index_tuple(indices):
    # NOTE: None entries mean "whole dim"; jnp reads None as newaxis, so use slices.
    return tuple(slice(None) if i is None else i for i in indices)


@register(aten.index.Tensor)
def index(self, indices):
    if any(i is not None and i.dtype == jnp.bool_ for i in indices):
        raise NotImplementedError("boolean-mask indexing has a data-dependent shape")
    check_indices(self, indices)
    return self[_index_tuple(indices)]


@register(aten.index_put.default)
@_bool_as_int
def index_put(self, indices, values, accumulate=False):
    check_indices(self, indices)
    values = as_dtype(values, self.dtype)
    if len(indices) == 1 and indices[0] is not None and indices[0].dtype == jnp.bool_:
        # NOTE: a boolean mask becomes a `where`, which keeps the shape static.
        mask = indices[0]
        mask = mask.reshape(mask.shape + (1,) * (self.ndim - mask.ndim))
        if accumulate:
            return jnp.where(mask, self + values, self)
        return jnp.where(mask, values, self)
    idx = _index_tuple(indices)
    return self.at[idx].add(values) if accumulate else self.at[idx].set(values)


@register(aten.index_select.default)
def index_select(self, dim, index):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        return self
    return jnp.take(self, index, axis=canonical_dim(dim, self.ndim))


def _along(dim, index, ndim):
    """Full index tuple for a scatter/gather along ``dim`` (torch's index tensor semantics)."""
    # list(): jnp.meshgrid returns a tuple in newer JAX (0.11).
    grids = list(jnp.meshgrid(*(jnp.arange(s) for s in index.shape), indexing="ij"))
    grids[dim] = index
    return tuple(grids)


@register(aten.gather.default)
def gather(self, dim, index, *, sparse_grad=False):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        return self
    dim = canonical_dim(dim, self.ndim)
    return self[_along(dim, index, self.ndim)]


@register(aten.scatter.src, aten.scatter.value)
def scatter(self, dim, index, src):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        return jnp.asarray(src, self.dtype).reshape(())
    dim = canonical_dim(dim, self.ndim)
    if not hasattr(src, "shape"):
        src = jnp.full(index.shape, src, self.dtype)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    return self.at[_along(dim, index, self.ndim)].set(src)


@register(aten.scatter_add.default)
@_bool_as_int
def scatter_add(self, dim, index, src):
    dim = canonical_dim(dim, self.ndim)
    check_index(index, self.shape[dim] if self.ndim else 1, dim)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    return self.at[_along(dim, index, self.ndim)].add(src)


@register(aten.scatter_reduce.two)
@_bool_as_int
def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    dim = canonical_dim(dim, self.ndim)
    check_index(index, self.shape[dim] if self.ndim else 1, dim)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    idx = _along(dim, index, self.ndim)
    if reduce == "mean":
        base = self if include_self else jnp.zeros_like(self)
        total = base.at[idx].add(src)
        count = jnp.full(self.shape, 1 if include_self else 0, self.dtype).at[idx].add(1)
        count = jnp.maximum(count, 1)
        out = total / count if jnp.issubdtype(self.dtype, jnp.inexact) else total // count
        touched = jnp.zeros(self.shape, bool).at[idx].set(True)
        return jnp.where(touched, out, self)
    init = {"sum": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
    if not jnp.issubdtype(self.dtype, jnp.inexact) and reduce in ("amax", "amin"):
        info = np.iinfo(self.dtype)
        init = info.min if reduce == "amax" else info.max
    base = self if include_self else jnp.full(self.shape, init, self.dtype)
    ref = base.at[idx]
    if reduce == "prod":
        out = _scatter_multiply(base, idx, src)
    else:
        out = {"sum": ref.add, "amax": ref.max, "amin": ref.min}[reduce](src)
    if include_self:
        return out
    touched = jnp.zeros(self.shape, bool).at[idx].set(True)
    return jnp.where(touched, out, self)


@register(aten.sort.default, aten.sort.stable)
def sort(self, dim=-1, descending=False, *, stable=False):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = canonical_dim(dim, self.ndim)
    idx = jnp.argsort(self, axis=dim, stable=True, descending=descending)
    return jnp.take_along_axis(self, idx, axis=dim), as_dtype(idx, np.dtype(np.int64))


@register(aten.topk.default)
def topk(self, k, dim=-1, largest=True, sorted=True):
    if self.ndim == 0:
        return self, jnp.zeros((), jnp.int64)
    dim = canonical_dim(dim, self.ndim)
    x = jnp.moveaxis(self, dim, -1)
    if largest:
        values, idx = lax.top_k(x, k)
    else:
        values, idx = lax.top_k(-x, k)
        values = -values
    return (jnp.moveaxis(values, -1, dim),
            jnp.moveaxis(as_dtype(idx, np.dtype(np.int64)), -1, dim))


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(self, mask, value):
    return jnp.where(mask, as_dtype(value, self.dtype), self)


@register(aten.scatter.reduce, aten.scatter.value_reduce)
@_bool_as_int
def scatter_legacy_reduce(self, dim, index, src, *, reduce):
    check_index(index, self.shape[canonical_dim(dim, self.ndim)] if self.ndim else 1, dim)
    if self.ndim == 0:
        src = jnp.asarray(src, self.dtype).reshape(())
        return self + src if reduce == "add" else self * src
    dim = canonical_dim(dim, self.ndim)
    if not hasattr(src, "shape"):
        src = jnp.full(index.shape, src, self.dtype)
    src = as_dtype(src, self.dtype)[tuple(slice(0, s) for s in index.shape)]
    ref = self.at[_along(dim, index, self.ndim)]
    return {"add": ref.add, "multiply": ref.multiply}[reduce](src)


@register(aten.index_reduce.default)
@_bool_as_int
def index_reduce(self, dim, index, source, reduce, *, include_self=True):
    if self.ndim == 0:
        out = index_reduce(self.reshape(1), 0, index.reshape(-1), jnp.reshape(source, (-1,)),
                           reduce, include_self=include_self)
        return out.reshape(())
    dim = canonical_dim(dim, self.ndim)
    check_index(index, self.shape[dim], dim)
    x = jnp.moveaxis(self, dim, 0)
    src = jnp.moveaxis(as_dtype(source, self.dtype), dim, 0)
    floating = jnp.issubdtype(self.dtype, jnp.inexact)
    touched = jnp.zeros(x.shape[:1], bool).at[index].set(True)
    touched = touched.reshape((-1,) + (1,) * (x.ndim - 1))
    if reduce == "mean":
        base = x if include_self else jnp.zeros_like(x)
        total = base.at[index].add(src)
        count = jnp.full(x.shape[:1], 1 if include_self else 0, self.dtype).at[index].add(1)
        count = jnp.maximum(count, 1).reshape(touched.shape)
        # NOTE: integer means round down (torch divides with rounding_mode="floor").
        out = total / count if floating else jnp.floor_divide(total, count)
    else:
        if floating:
            init = {"prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        else:
            info = np.iinfo(self.dtype)
            init = {"prod": 1, "amax": info.min, "amin": info.max}[reduce]
        base = x if include_self else jnp.where(touched, jnp.asarray(init, self.dtype), x)
        if reduce == "prod":
            out = _scatter_multiply(base, index, src)
        else:
            ref = base.at[index]
            out = {"amax": ref.max, "amin": ref.min}[reduce](src)
    return jnp.moveaxis(jnp.where(touched, out, x), 0, dim)


@register(aten.put.default)
@_bool_as_int
def put(self, index, source, accumulate=False):
    check_flat_index(self, index)
    flat = self.reshape(-1)
    idx = index.reshape(-1)
    idx = jnp.where(idx < 0, idx + flat.shape[0], idx)
    values = as_dtype(source, self.dtype).reshape(-1)
    flat = flat.at[idx].add(values) if accumulate else flat.at[idx].set(values)
    return flat.reshape(self.shape)


@register(aten.masked_scatter.default)
def masked_scatter(self, mask, source):
    # The k-th True position (row-major) takes source's k-th element: a static-shape gather.
    shape = tuple(ctx().out.shape)  # self and mask broadcast together
    flat_mask = jnp.broadcast_to(mask, shape).reshape(-1)
    flat_self = jnp.broadcast_to(self, shape).reshape(-1)
    pos = jnp.cumsum(flat_mask.astype(jnp.int64)) - 1
    src = as_dtype(source, self.dtype).reshape(-1)
    taken = src[jnp.clip(pos, 0, max(src.shape[0] - 1, 0))] if src.shape[0] else jnp.zeros_like(
        pos, self.dtype)
    return jnp.where(flat_mask, taken, flat_self).reshape(shape)
