"""Dynamo's example values inside ``torch.func`` transforms (``vmap``, ``grad``, ``jvp``) are
functorch wrappers (``BatchedTensor``, ``GradTrackingTensor``): they have no storage of their
own, and once the trace ends their levels are gone (indexing or viewing one raises functorch's
"tensor may have escaped" error). What a pass asks of their memory is asked of the tensor
inside them, at the levels that wrap it.
"""

from __future__ import annotations

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from torch2xla.capture._hinted import hint

_functorch = torch._C._functorch


def unwrapped(value: torch.Tensor) -> tuple[tuple[int, ...], torch.Tensor]:
    """The functorch levels wrapping ``value``, outermost first, and the tensor inside them."""
    levels = []
    while _functorch.is_functorch_wrapped_tensor(value):
        levels.append(_functorch.maybe_get_level(value))
        value = _functorch.get_unwrapped(value)
    return tuple(levels), value


def shares_memory(a: torch.Tensor, b: torch.Tensor, *, across_levels: bool = False) -> bool:
    """Whether the strided example values ``a`` and ``b`` are views of one memory: at the same
    functorch levels (``_wrap_for_grad``, ``_add_batch_dim`` and their inverses change the
    levels: they make new values at another level, not views of them as the function sees
    its values), or at any (``across_levels``: the memory itself, as inference tensors are)."""
    (a_levels, a), (b_levels, b) = unwrapped(a), unwrapped(b)
    if a_levels != b_levels and not across_levels:
        return False
    if a.layout != torch.strided or b.layout != torch.strided:
        return False
    return StorageWeakRef(a.untyped_storage()) == StorageWeakRef(b.untyped_storage())


def logical_layout(t: torch.Tensor) -> torch.Tensor | None:
    """A meta tensor with the sizes, strides, offset and dtype that the functorch wrapper
    ``t`` shows the function inside its transform, symbolic ones at their hints (no memory:
    its elements share memory exactly where ``t``'s do); None where a size has no hint."""
    sizes = [hint(n) for n in t.shape]
    strides = [hint(n) for n in t.stride()]
    offset = hint(t.storage_offset())
    if None in sizes or None in strides or offset is None:
        return None
    extent = offset + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
    base = torch.empty(extent if 0 not in sizes else 0, dtype=t.dtype, device="meta")
    return base.as_strided(sizes, strides, offset)
