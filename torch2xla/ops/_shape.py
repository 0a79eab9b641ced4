"""Views, shape changes, concatenation and tensor creation."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla.ops._common import as_dtype, canonical_dim, out_dtype
from torch2xla.ops._registry import STORAGE_OFFSET, STORAGE_ORDER, ctx, register
from torch2xla.runtime._interop import to_jax, torch_dtype

aten = ops.aten
_INT64_MAX = 2**63 - 1


def _shape(size) -> tuple[int, ...]:
    return tuple(int(s) for s in size)


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(self, size):
    return jnp.reshape(self, _shape(size))


@register(aten.view.dtype)
def view_dtype(self, dtype):
    # NOTE: bit reinterpretation; when widths differ, the last dim is resized (as torch does).
    target = out_dtype()
    if target.itemsize == self.dtype.itemsize:
        return lax.bitcast_convert_type(self, target)
    return jnp.reshape(self, self.shape).view(target)


@register(aten.permute.default)
def permute(self, dims):
    return jnp.transpose(self, [d % max(self.ndim, 1) for d in dims]) if self.ndim else self


@register(aten.t.default)
def t(self):
    return self.T


@register(aten.transpose.int)
def transpose(self, dim0, dim1):
    if self.ndim == 0:
        return self
    return jnp.swapaxes(self, dim0, dim1)


@register(aten.expand.default)
def expand(self, size, *, implicit=False):
    size = list(_shape(size))
    lead = len(size) - self.ndim
    # NOTE: -1 keeps the existing size.
    shape = [self.shape[i - lead] if s == -1 else s for i, s in enumerate(size)]
    return jnp.broadcast_to(self, tuple(shape))


@register(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(self, dim=None):
    if self.ndim == 0:
        return self
    if dim is None:
        dims = [i for i, s in enumerate(self.shape) if s == 1]
    else:
        dims = dim if isinstance(dim, list | tuple) else [dim]
        # NOTE: squeezing a dim whose size is not 1 is a no-op in torch, an error in jnp.
        dims = [d % self.ndim for d in dims if self.shape[d % self.ndim] == 1]
    return jnp.squeeze(self, tuple(dims)) if dims else self


@register(aten.unsqueeze.default)
def unsqueeze(self, dim):
    return jnp.expand_dims(self, dim % (self.ndim + 1))


@register(aten.slice.Tensor)
def slice_(self, dim=0, start=None, end=None, step=1):
    dim = canonical_dim(dim, self.ndim)
    n = self.shape[dim]
    # NOTE: ends may be INT64_MAX and starts/ends may be negative or out of range.
    start, end, _ = slice(start, None if end is None or end >= _INT64_MAX else end).indices(n)
    end = max(end, start)
    return (
        lax.slice_in_dim(self, start, end, step, axis=dim)
        if step == 1
        else self[(slice(None),) * dim + (slice(start, end, step),)]
    )


@register(aten.select.int)
def select(self, dim, index):
    dim = canonical_dim(dim, self.ndim)
    return lax.index_in_dim(self, index % self.shape[dim], axis=dim, keepdims=False)


@register(aten.narrow.default)
def narrow(self, dim, start, length):
    axis = canonical_dim(dim, self.ndim)
    start = start + self.shape[axis] if start < 0 else start  # (from the end, as eager)
    return lax.slice_in_dim(self, start, start + length, axis=axis)


@register(aten.cat.default)
def cat(tensors, dim=0):
    result = out_dtype()
    # NOTE: torch.cat skips legacy empty 1-d tensors of shape (0,) and promotes dtypes.
    parts = [as_dtype(t, result) for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not parts:
        return jnp.zeros((0,), result)
    return jnp.concatenate(parts, axis=canonical_dim(dim, parts[0].ndim))


@register(aten.stack.default)
def stack(tensors, dim=0):
    result = out_dtype()
    return jnp.stack([as_dtype(t, result) for t in tensors], axis=dim)


@register(aten.split_with_sizes.default)
def split_with_sizes(self, split_sizes, dim=0):
    dim = canonical_dim(dim, self.ndim)
    offsets = np.cumsum([0, *split_sizes])
    return [
        lax.slice_in_dim(self, int(a), int(b), axis=dim) for a, b in itertools.pairwise(offsets)
    ]


@register(aten.split.Tensor)
def split(self, split_size, dim=0):
    dim = canonical_dim(dim, self.ndim)
    n = self.shape[dim]
    sizes = [min(split_size, n - i) for i in range(0, n, split_size)] or [0]
    return split_with_sizes(self, sizes, dim)


@register(aten.unbind.int)
def unbind(self, dim=0):
    dim = canonical_dim(dim, self.ndim)
    return [lax.index_in_dim(self, i, axis=dim, keepdims=False) for i in range(self.shape[dim])]


@register(aten.flip.default)
def flip(self, dims):
    return jnp.flip(self, tuple(dims)) if self.ndim else self


@register(aten.roll.default)
def roll(self, shifts, dims=()):
    if not dims:
        return jnp.roll(self.reshape(-1), tuple(shifts)).reshape(self.shape)
    return jnp.roll(self, tuple(shifts), tuple(dims))


@register(aten.repeat.default)
def repeat(self, repeats):
    lead = len(repeats) - self.ndim
    x = self.reshape((1,) * lead + self.shape)
    return jnp.tile(x, tuple(repeats))


@register(aten.constant_pad_nd.default)
def constant_pad_nd(self, pad, value=0):
    # pad lists (before, after) pairs from the last dim backwards; negative values crop.
    cfg = [(0, 0, 0)] * self.ndim
    for i in range(len(pad) // 2):
        cfg[self.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return lax.pad(self, as_dtype(value, self.dtype), cfg)


@register(aten.diagonal.default)
def diagonal(self, offset=0, dim1=0, dim2=1):
    return jnp.diagonal(self, offset, dim1, dim2)


@register(aten.tril.default)
def tril(self, diagonal=0):
    return jnp.tril(self, diagonal)


@register(aten.triu.default)
def triu(self, diagonal=0):
    return jnp.triu(self, diagonal)


# -- creation -----------------------------------------------------------------------------------
@register(aten.full.default)
def full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    # (the number converted as eager converts it: 1e10 into float16 is inf, a C cast)
    return jnp.full(_shape(size), as_dtype(fill_value, out_dtype()), out_dtype())


@register(aten.zeros.default)
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), out_dtype())


@register(aten.ones.default)
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(_shape(size), out_dtype())


def uninitialized(shape, dtype) -> jax.Array:
    """A new tensor's contents that eager leaves uninitialized (``empty``): under
    ``torch.use_deterministic_algorithms(True)`` with
    ``torch.utils.deterministic.fill_uninitialized_memory`` (the default) eager fills them with
    NaN (floating and complex: NaN + 0j) or the dtype's largest value (integers; bool: True);
    otherwise they are undefined, and zeros here. (Dynamo guards deterministic mode; the fill
    switch is in the cache key: ``capture/_untracked.py``.)"""
    if not (
        torch.are_deterministic_algorithms_enabled()
        and torch._C._get_deterministic_fill_uninitialized_memory()
    ):
        return jnp.zeros(shape, dtype)
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.full(shape, jnp.nan, dtype)
    if dtype == jnp.bool_:
        return jnp.ones(shape, dtype)
    return jnp.full(shape, jnp.iinfo(dtype).max, dtype)


@register(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return uninitialized(_shape(size), out_dtype())


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return uninitialized(_shape(size), out_dtype())


@register(aten.full_like.default)
def full_like(
    self, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    return jnp.full(self.shape, as_dtype(fill_value, out_dtype()), out_dtype())


@register(aten.zeros_like.default)
def zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.zeros(self.shape, out_dtype())


@register(aten.empty_like.default)
def empty_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return uninitialized(self.shape, out_dtype())


@register(aten.ones_like.default)
def ones_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jnp.ones(self.shape, out_dtype())


@register(aten.new_zeros.default)
def new_zeros(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), out_dtype())


@register(aten.new_empty.default)
def new_empty(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return uninitialized(_shape(size), out_dtype())


@register(aten.new_ones.default)
def new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.ones(_shape(size), out_dtype())


@register(aten.new_full.default)
def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.full(_shape(size), as_dtype(fill_value, out_dtype()), out_dtype())


@register(aten.new_empty_strided.default)
def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return uninitialized(_shape(size), out_dtype())


@register(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    # The fake output tells the length and dtype; compute in float64/int64 then cast, as torch.
    n = ctx().out.shape[0]
    start, step = (0, 1) if len(args) == 1 else (args[0], args[2] if len(args) > 2 else 1)
    result = out_dtype()
    end = args[1] if len(args) > 1 else args[0]
    if _constant(start, end, step) and _rounds(start, step, int(n), result):
        values = _eager_values(torch.arange, start, end, step)
        if values is not None:
            return values
    acc = np.dtype(np.float64) if jnp.issubdtype(result, jnp.inexact) else np.dtype(np.int64)
    return (
        jnp.asarray(start, acc) + jnp.arange(int(n), dtype=acc) * jnp.asarray(step, acc)
    ).astype(result)


def _rounds(start, step, n: int, result) -> bool:
    """Whether a floating arange of constant ``start`` and ``step`` has values that eager's
    kernel may round otherwise than ``start + i * step`` rounded once (every value an integer
    the dtype holds exactly: none)."""
    if not jnp.issubdtype(result, jnp.floating) or n == 0:
        return False
    exact = 2 ** (jnp.finfo(result).nmant + 1)
    whole = float(start).is_integer() and float(step).is_integer()
    return not (whole and abs(start) + abs(step) * n < exact)


def _constant(*args) -> bool:
    """Whether a CPU factory's arguments are constants of the graph (eager can compute it)."""
    return all(isinstance(v, int | float) for v in args) and not ctx().on_cuda


@register(aten.linspace.default)
def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    values = (
        _eager_values(torch.linspace, start, end, steps) if _constant(start, end, steps) else None
    )
    if values is not None:
        return values
    # (as torch's decomposition: one step, the first half counted up from ``start``, the
    # rest down from ``end``)
    result, n = out_dtype(), int(steps)
    acc = np.dtype(np.float64) if jnp.issubdtype(result, jnp.integer) else result
    lo, hi = jnp.asarray(start, acc), jnp.asarray(end, acc)
    step = (hi - lo) / max(n - 1, 1)
    i = jnp.arange(n)
    up = lo + step * i.astype(acc)
    down = hi - step * (n - 1 - i).astype(acc)
    return as_dtype(jnp.where(i < n // 2, up, down), result)


@register(aten.logspace.default)
def logspace(
    start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, pin_memory=None
):
    # NOTE: eager's CPU kernel casts ``start`` and ``end`` to the result dtype first (an
    # integer dtype truncates 2.5 to 2, uint8 wraps -1 to 255), subtracts them in that dtype,
    # then raises ``base`` to ``start + i * step`` in float64 and rounds once; torch's
    # decomposition (pow of a linspace in the result dtype) gave other values for every dtype
    # but float64, and ``[0, 0, 3, 17, 100]`` for eager's ``[0, 0, 0, 0, 100]`` in uint8.
    if _constant(start, end, steps, base):
        values = _eager_values(torch.logspace, start, end, steps, base=base)
        if values is not None:
            return values
    result, n = out_dtype(), int(steps)
    if jnp.issubdtype(result, jnp.complexfloating):  # (XLA's complex power: within rounding)
        exponent = linspace(start, end, steps)
        return jnp.power(as_dtype(base, result), exponent).astype(result)
    f64 = np.dtype(np.float64)
    if n == 1:  # (a fill of base ** start, ``start`` not cast to the dtype)
        return as_dtype(jnp.power(as_dtype(base, f64), as_dtype(start, f64)), result)[None]
    lo, hi = as_dtype(start, result), as_dtype(end, result)
    if jnp.issubdtype(result, jnp.integer) and result.itemsize < 4:  # (C++'s int promotion)
        lo, hi = lo.astype(np.int32), hi.astype(np.int32)
    step = (hi - lo).astype(f64) / max(n - 1, 1)
    i = jnp.arange(n)
    up = lo.astype(f64) + step * i.astype(f64)
    down = hi.astype(f64) - step * (n - 1 - i).astype(f64)
    exponent = jnp.where(i < n // 2, up, down)
    values = jnp.power(as_dtype(base, f64), exponent)
    if jnp.issubdtype(result, jnp.integer) and result.itemsize < 4:
        # (a C++ store of a double into a narrow integer converts to int32 first: out of its
        # range, x86 gives INT_MIN, whose low bits are 0; a tensor's cast goes through int64)
        return as_dtype(values, np.dtype(np.int32)).astype(result)
    return as_dtype(values, result)


def _eager_values(factory, *args, **kwargs) -> jax.Array | None:
    """The result of eager's CPU factory ``factory(*args, dtype=, **kwargs)`` for the node's
    output dtype, as a constant; None where its shape is not the node's (a length padded to
    its bucket, guards/bucketing).

    NOTE: eager's CPU range kernels (RangeFactoriesKernel: ``arange``, ``linspace``) round
    per vector: ``Vectorized<T>::arange(base, step)`` rounds each vector's ``base`` to the
    dtype and computes its lanes from it, the scalar tail and per-thread chunks (from
    ``GRAIN_SIZE`` elements) count from ``start``, and every ``a * b + c`` is one fused
    multiply-add: ``arange(-1., 1., 0.1)[10]`` is -2.98e-09 in float32, not 0, and
    ``linspace(-3, 7, 1000)[291]`` is one ulp off ``start + i * step``. Their constant
    arguments make the result a constant: eager computes it."""
    dtype = torch_dtype(out_dtype())
    with torch.no_grad():
        out = factory(*args, dtype=dtype, device="cpu", **kwargs)
    if tuple(out.shape) != tuple(ctx().out.shape):
        return None
    return jnp.asarray(to_jax(out))


@register(aten.fill.Scalar, aten.fill.Tensor)
def fill(self, value):
    return jnp.full(self.shape, as_dtype(value, self.dtype), self.dtype)


@register(aten.copy.default)
def copy(self, src, non_blocking=False):
    return jnp.broadcast_to(as_dtype(src, self.dtype), self.shape)


@register(aten.slice_scatter.default)
def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    dim = canonical_dim(dim, self.ndim)
    start, end, _ = slice(start, None if end is None or end >= _INT64_MAX else end).indices(
        self.shape[dim]
    )
    idx = (slice(None),) * dim + (slice(start, max(end, start), step),)
    return self.at[idx].set(as_dtype(src, self.dtype))


@register(aten.select_scatter.default)
def select_scatter(self, src, dim, index):
    dim = canonical_dim(dim, self.ndim)
    idx = (slice(None),) * dim + (index % self.shape[dim],)
    return self.at[idx].set(as_dtype(src, self.dtype))


@register(aten.diagonal_scatter.default)
def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    moved = jnp.moveaxis(self, (dim1, dim2), (-2, -1))
    n1, n2 = moved.shape[-2:]
    rows, cols = jnp.arange(n1)[:, None], jnp.arange(n2)[None, :]
    mask = (cols - rows) == offset
    # Position (r, c) on the diagonal holds src[..., r] (offset >= 0) or src[..., c] (offset < 0).
    k = jnp.broadcast_to(rows if offset >= 0 else cols, (n1, n2))
    k = jnp.clip(k, 0, max(src.shape[-1] - 1, 0))
    expanded = jnp.take(as_dtype(src, self.dtype), k, axis=-1)
    out = jnp.where(mask, expanded, moved)
    return jnp.moveaxis(out, (-2, -1), (dim1, dim2))


# -- copying variants of views (functionalization emits them) -----------------------------------
register(aten.view_copy.default)(view)
register(aten.view_copy.dtype)(view_dtype)
register(aten.permute_copy.default)(permute)
register(aten.unbind_copy.int)(unbind)
register(aten.narrow_copy.default)(narrow)
register(aten.select_copy.int)(select)
register(aten.slice_copy.Tensor)(slice_)
register(aten.split_copy.Tensor)(split)


@register(aten.detach_copy.default)
def detach_copy(self):
    # NOTE: detach's gradient (none); eager's detach_copy has no derivative formula and its
    # backward raises "not implemented".
    return lax.stop_gradient(self)


@register(aten.empty_permuted.default)
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(_shape(size), out_dtype())


# -- strided views over the input's storage -----------------------------------------------------
def _storage_order(ndim: int) -> tuple[int, ...]:
    """The node's first argument's dims ordered outermost-first in memory (``STORAGE_ORDER``,
    ``capture/_annotate.py``; contiguous where unannotated), so ``transpose(x, order)
    .reshape(-1)`` lists its elements in storage order."""
    order = ctx().node.meta.get(STORAGE_ORDER, tuple(range(ndim)))
    if order is None:
        raise NotImplementedError(
            "as_strided on an input that is not dense in memory (overlapping or with gaps)"
        )
    return order


def _strided_index(size, stride, offset) -> np.ndarray:
    idx = np.full(tuple(size), offset or 0, dtype=np.int64)
    for d, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n) * st).reshape(shape)
    return idx


def _own_index(size, stride, storage_offset, n: int) -> np.ndarray:
    """The positions in the input's own memory (``n`` elements, from its first) that an
    as_strided view reads: an explicit ``storage_offset`` counts from the storage's start
    (``STORAGE_OFFSET``: where the input starts in it)."""
    start = 0
    if storage_offset is not None:
        own = ctx().node.meta.get(STORAGE_OFFSET, 0)
        if own is None:
            raise NotImplementedError("as_strided with a storage offset on a symbolic one")
        start = storage_offset - own
    idx = _strided_index(_shape(size), _shape(stride), start)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        # (eager reads memory of the storage around the input: not among its values here)
        raise NotImplementedError(
            "as_strided reading memory outside its input (a storage offset before the "
            "input's first element, or a view of a larger tensor)"
        )
    return idx


@register(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(self, size, stride, storage_offset=None):
    # NOTE: torch indexes the input's storage; the bridge sees logical values, so the storage
    # is rebuilt from the input's strides (dense inputs only), from its first element.
    order = _storage_order(self.ndim)
    storage = jnp.transpose(self, order).reshape(-1) if self.ndim else self.reshape(-1)
    return storage[_own_index(size, stride, storage_offset, storage.shape[0])]


@register(aten._reshape_alias_copy.default)
def _reshape_alias_copy(self, size, stride):
    return as_strided(self, size, stride)


@jax.custom_vjp
def _scatter_set(storage, idx, src):
    return storage.at[idx].set(src)


def _scatter_set_fwd(storage, idx, src):
    return storage.at[idx].set(src), idx


def _scatter_set_bwd(idx, g):
    # NOTE: torch's as_strided_scatter backward gives every src element the gradient at its
    # position, even when positions repeat; JAX's scatter gives it to one of them only.
    return g.at[idx].set(0), None, g[idx]


_scatter_set.defvjp(_scatter_set_fwd, _scatter_set_bwd)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(self, src, size, stride, storage_offset=None):
    order = _storage_order(self.ndim)
    moved = jnp.transpose(self, order) if self.ndim else self
    storage = moved.reshape(-1)
    idx = _own_index(size, stride, storage_offset, storage.shape[0])
    storage = _scatter_set(storage, idx, as_dtype(src, self.dtype).reshape(idx.shape))
    moved = storage.reshape(moved.shape)
    return jnp.transpose(moved, np.argsort(order)) if self.ndim else moved


@register(aten.unfold.default)
def unfold(self, dimension, size, step):
    if self.ndim == 0:
        return self.reshape(1)
    dim = canonical_dim(dimension, self.ndim)
    n = (self.shape[dim] - size) // step + 1
    windows = np.arange(n)[:, None] * step + np.arange(size)[None, :]
    x = jnp.moveaxis(self, dim, -1)[..., windows]  # (..., n, size)
    return jnp.moveaxis(x, -2, dim)


@register(aten.triu_indices.default, aten.tril_indices.default)
def tri_indices(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
    upper = ctx().node.target is aten.triu_indices.default
    rows, cols = (np.triu_indices if upper else np.tril_indices)(row, offset, col)
    return jnp.asarray(np.stack([rows, cols]), out_dtype())


# -- symbolic sizes (concrete per compiled signature) --------------------------------------------
@register(aten.sym_size.int)
def sym_size(self, dim):
    return self.shape[dim]


@register(aten.sym_numel.default)
def sym_numel(self):
    return int(np.prod(self.shape))


@register(aten.sym_stride.int)
def sym_stride(self, dim):
    # The bridge's arrays are logically contiguous.
    return int(np.prod(self.shape[dim % self.ndim + 1 :])) if self.ndim else 1


@register(aten.sym_storage_offset.default)
def sym_storage_offset(self):
    return 0


# -- reflection and replication padding ----------------------------------------------------------
def _pad_widths(self, padding) -> list[tuple[int, int]]:
    """jnp.pad widths from ATen's (last-dim first) (before, after) pairs."""
    widths = [(0, 0)] * self.ndim
    for i in range(len(padding) // 2):
        widths[self.ndim - 1 - i] = (padding[2 * i], padding[2 * i + 1])
    return widths


@register(
    aten.reflection_pad1d.default, aten.reflection_pad2d.default, aten.reflection_pad3d.default
)
def reflection_pad(self, padding):
    # out[i] = x[|i - before|] mirrored at the far end along each padded dim: negative widths
    # crop (eager accepts them; jnp.pad's reflect does not)
    out = self
    for axis, (lo, hi) in enumerate(_pad_widths(self, padding)):
        if lo or hi:
            n = self.shape[axis]
            idx = np.abs(np.arange(n + lo + hi) - lo)
            idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
            out = jnp.take(out, idx, axis=axis)
    return out


@register(
    aten.replication_pad1d.default, aten.replication_pad2d.default, aten.replication_pad3d.default
)
def replication_pad(self, padding):
    # out[i] = x[clip(i - before, 0, n - 1)] along each padded dim; negative widths crop.
    out = self
    for axis, (lo, hi) in enumerate(_pad_widths(self, padding)):
        if lo or hi:
            n = self.shape[axis]
            idx = np.clip(np.arange(n + lo + hi) - lo, 0, n - 1)
            out = jnp.take(out, idx, axis=axis)
    return out
