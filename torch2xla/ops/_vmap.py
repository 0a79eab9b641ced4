"""Batching rules (``torch.vmap``) shared by torch2xla's custom ops.

Our custom ops (``torch2xla::stop_gradient``, the RNN ops, ``torch2xla::sdpa``...) stand in
for torch code in the Dynamo graph, and that code may run under ``torch.vmap`` (transformers
builds attention masks with it; a user's selective scan may too). Without a rule of its own an
op falls back to functorch's per-element loop, with a warning, inside the exported graph. Each
op registers a rule with ``register_vmap``; the helpers here move the vmapped dimension to the
front (or create it) and run an op once per batch element where no better rule exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def front(t: torch.Tensor, bdim: int | None, size: int) -> torch.Tensor:
    """``t`` with the vmapped dimension first: moved there, or (unbatched) a broadcast view."""
    if bdim is None:
        return t.unsqueeze(0).expand(size, *t.shape)
    return t.movedim(bdim, 0)


def _select(value: Any, dims: Any, i: int) -> Any:
    """The ``i``-th batch element of an argument (a tensor, a list of tensors, or anything
    else, which is the same for every element)."""
    if isinstance(value, torch.Tensor):
        return value if dims is None else value.select(dims, i)
    if isinstance(value, list | tuple) and isinstance(dims, list | tuple):
        return type(value)(_select(v, d, i) for v, d in zip(value, dims, strict=True))
    return value


def per_element(op: Callable, info: Any, in_dims: Sequence, args: Sequence) -> tuple:
    """Run ``op`` once per batch element and stack the results along a new first dimension
    (the rule for ops whose batched form has no cheaper equivalent). Returns ``(outputs,
    out_dims)`` as ``register_vmap`` expects."""
    results = [
        op(*(_select(a, d, i) for a, d in zip(args, in_dims, strict=True)))
        for i in range(info.batch_size)
    ]
    if isinstance(results[0], torch.Tensor):
        return torch.stack(results), 0
    outs = tuple(torch.stack(parts) for parts in zip(*results, strict=True))
    return outs, (0,) * len(outs)


__all__ = ["front", "per_element"]
