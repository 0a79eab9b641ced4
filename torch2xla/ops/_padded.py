"""Ops that read a dimension's real length at run time, for programs on padded inputs.

Bucketing (``torch2xla/guards``) runs one program for every size of a bucket: the inputs are
zero-padded at the end of their dynamic dimensions and the real sizes reach the program as
0-d integer tensors. Where padding would otherwise change real values, the padding analysis
rewrites the graph with these ops:

- ``fill_tail``: positions at or past the real length set to a reduction's identity, before a
  reduction, softmax or product over the padded dimension;
- ``write_at``: ``cat`` along a padded dimension writes each later operand at the real end of
  the ones before it (in the padded result the real rows of the cache come first, the new row
  right after them, the padding last);
- ``key_mask``: attention's mask extended to hide keys past the real length;
- ``slice_at``: a slice counted from a padded dimension's real end (``x[:, -1:]``);
- ``real_index``: indices into a padded dimension taken against its real length (a negative
  index counts from the real end; one out of the real range stays out of the padded range).

Each op's eager kernel is what it does in an unpadded graph too, so a partition left to torch
stays correct.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch
from jax import lax

from torch2xla.ops import _vmap
from torch2xla.ops._registry import ctx, register

FILLS = ("zero", "one", "lowest", "highest")


def _fill_value(dtype: torch.dtype, fill: str):
    if fill not in FILLS:
        raise ValueError(f"torch2xla::fill_tail: fill must be one of {FILLS}, got {fill!r}")
    if fill in ("zero", "one"):
        return 0 if fill == "zero" else 1
    if dtype == torch.bool:
        return fill == "highest"
    if dtype.is_floating_point:
        return float("-inf") if fill == "lowest" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if fill == "lowest" else info.max


def _valid(n: int, length: torch.Tensor, ndim: int, dim: int, device) -> torch.Tensor:
    shape = [1] * ndim
    shape[dim] = n
    return (torch.arange(n, device=device) < length.to(device)).reshape(shape)


@torch.library.custom_op("torch2xla::fill_tail", mutates_args=())
def fill_tail(self: torch.Tensor, dim: int, length: torch.Tensor, fill: str) -> torch.Tensor:
    """``self`` with the positions at or past ``length`` along ``dim`` set to ``fill``
    (``zero``, ``one``, ``lowest`` or ``highest`` of the dtype: -inf, +inf for floats)."""
    dim = dim % self.ndim
    keep = _valid(self.shape[dim], length, self.ndim, dim, self.device)
    value = torch.tensor(_fill_value(self.dtype, fill), dtype=self.dtype, device=self.device)
    return torch.where(keep, self, value)


@fill_tail.register_fake
def _(self, dim, length, fill):
    return torch.empty_like(self)


@register(torch.ops.torch2xla.fill_tail.default)
def _fill_tail_lowering(self, dim, length, fill):
    dim = dim % self.ndim
    keep = lax.broadcasted_iota(length.dtype, self.shape, dim) < length
    value = _fill_value(ctx().out.dtype, fill)
    return jnp.where(keep, self, jnp.asarray(value, dtype=self.dtype))


@torch.library.custom_op("torch2xla::write_at", mutates_args=())
def write_at(self: torch.Tensor, src: torch.Tensor, dim: int, offset: torch.Tensor) -> torch.Tensor:
    """A copy of ``self`` with ``src`` written from index ``offset`` along ``dim``."""
    out = self.clone()
    out.narrow(dim, int(offset), src.shape[dim]).copy_(src)
    return out


@write_at.register_fake
def _(self, src, dim, offset):
    return torch.empty_like(self)


@register(torch.ops.torch2xla.write_at.default)
def _write_at_lowering(self, src, dim, offset):
    return lax.dynamic_update_slice_in_dim(self, src.astype(self.dtype), offset, dim % self.ndim)


@torch.library.custom_op("torch2xla::slice_at", mutates_args=())
def slice_at(self: torch.Tensor, dim: int, start: torch.Tensor, length: int) -> torch.Tensor:
    """``self.narrow(dim, start, length)`` for a ``start`` known only at run time."""
    return self.narrow(dim, int(start), length).clone()


@slice_at.register_fake
def _(self, dim, start, length):
    shape = list(self.shape)
    shape[dim] = length
    return self.new_empty(shape)


@register(torch.ops.torch2xla.slice_at.default)
def _slice_at_lowering(self, dim, start, length):
    return lax.dynamic_slice_in_dim(self, start, length, dim % self.ndim)


@torch.library.custom_op("torch2xla::key_mask", mutates_args=())
def key_mask(
    attn_mask: torch.Tensor | None, key: torch.Tensor, length: torch.Tensor
) -> torch.Tensor:
    """``attn_mask`` (None, boolean or additive) extended to hide the keys at or past
    ``length``: a boolean mask (None gives one of shape (1, keys): sdpa takes no 1-D mask)
    or an additive one (-inf there)."""
    n = key.shape[-2]
    valid = torch.arange(n, device=key.device) < length.to(key.device)
    if attn_mask is None:
        return valid[None]
    if attn_mask.dtype == torch.bool:
        return attn_mask & valid
    return attn_mask.masked_fill(~valid, float("-inf"))


@key_mask.register_fake
def _(attn_mask, key, length):
    n = key.shape[-2]
    if attn_mask is None:
        return key.new_empty((1, n), dtype=torch.bool)
    shape = torch.broadcast_shapes(attn_mask.shape, (n,))
    return attn_mask.new_empty(shape)


@register(torch.ops.torch2xla.key_mask.default)
def _key_mask_lowering(attn_mask, key, length):
    n = key.shape[-2]
    valid = lax.iota(length.dtype, n) < length
    if attn_mask is None:
        return valid[None]
    if attn_mask.dtype == jnp.bool_:
        return attn_mask & valid
    return jnp.where(valid, attn_mask, jnp.asarray(-jnp.inf, dtype=attn_mask.dtype))


def _real_index(index, length, size: int, negative: bool, where):
    # Valid indices (of the real length) map to [0, length); invalid ones move out by the
    # padding (size - length), so the padded program's check fails where eager's raises.
    # Unpadded (size == length) it is the identity on invalid indices: eager's error.
    shift = size - length
    if negative:
        valid = (index >= -length) & (index < length)
        inside = where(index < 0, index + length, index)
    else:
        valid = (index >= 0) & (index < length)
        inside = index
    outside = where(index >= 0, index + shift, index - shift)
    return where(valid, inside, outside)


@torch.library.custom_op("torch2xla::real_index", mutates_args=())
def real_index(
    index: torch.Tensor, length: torch.Tensor, size: int, negative: bool
) -> torch.Tensor:
    """``index`` into a dimension of real ``length`` padded to ``size``: a valid index (of
    ``[-length, length)``, or ``[0, length)`` unless ``negative``) as one of ``[0, length)``,
    an invalid one moved outside ``[-size, size)`` (the identity where ``size == length``)."""
    length = length.to(index.device, index.dtype)
    return _real_index(index, length, size, negative, torch.where)


@real_index.register_fake
def _(index, length, size, negative):
    return torch.empty_like(index)


@register(torch.ops.torch2xla.real_index.default)
def _real_index_lowering(index, length, size, negative):
    return _real_index(index, length.astype(index.dtype), size, negative, jnp.where)


# Batching rules (every custom op has one, ``_vmap``): these ops appear only in graphs the
# padding rewrite made, after export, so a batched call is rare: once per element.
for _op in (fill_tail, write_at, slice_at, key_mask, real_index):
    _op.register_vmap(
        lambda info, in_dims, *args, _op=_op: _vmap.per_element(_op, info, in_dims, args)
    )

__all__ = ["FILLS", "fill_tail", "key_mask", "real_index", "slice_at", "write_at"]
