"""Graph outputs that are Python numbers in eager (an ``int`` from ``x.size(0) * 2``, a
``float`` from ``.item()``): the program returns them as 0-d tensors, the call hands back
Python numbers of eager's kind."""

from __future__ import annotations

from collections.abc import Sequence

import torch

SCALAR_KINDS = ((torch.SymBool, bool), (torch.SymInt, int), (torch.SymFloat, float))


def scalar_kind(node) -> type | None:
    """``int``, ``float`` or ``bool`` for a graph output that is a Python number in eager."""
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    for sym, kind in SCALAR_KINDS:
        if isinstance(value, sym | kind):
            return kind
    return None


def as_scalars(outs, kinds: Sequence[tuple[int, type]]):
    outs = list(outs)
    for i, kind in kinds:
        if isinstance(outs[i], torch.Tensor):
            outs[i] = kind(outs[i].item())
    return outs
