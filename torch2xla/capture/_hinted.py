"""A dynamic-shape Dynamo graph's example values with their sizes at the example's values.

The checks that find eager's errors by running eager on tensors laid out like the example
values (``_writes.check_writes``: writes into memory that overlaps, out= tensors, Python
numbers that overflow; ``ops/_dtype_probes``: dtypes a kernel refuses) need concrete sizes,
strides and offsets. Under dynamic shapes (``dynamic=True``, or Dynamo's recompile for a new
size) those are SymInts, and the checks found nothing, so eager's error went unraised (or the
export refused the graph). Each SymInt has a hint, its value in the call Dynamo traced (the
graph's first call): ``examples_at_hints`` swaps every tensor example for a meta tensor of that
layout, the views of one fake storage views of one meta storage, while the checks run. A call
of other sizes whose answer would differ is rare; where a check raised and eager, run again,
does not, the call returns eager's results (``_fallback.replay``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.fx.node import map_aggregate
from torch.multiprocessing.reductions import StorageWeakRef

KEY = "example_value"


def hint(n: Any) -> int | None:
    """``n`` as an int: itself, or a SymInt's hint (None where it has none: unbacked)."""
    if isinstance(n, int):
        return n
    if isinstance(n, torch.SymInt):
        if n.node.is_nested_int():  # (a jagged tensor's ragged size: no one value)
            return None
        h = n.node.hint
        return int(h) if h is not None else None
    return None


def hinted_shape(t: torch.Tensor) -> tuple[int, ...] | None:
    """``t``'s sizes at their hints (None where one has none)."""
    sizes = tuple(hint(n) for n in t.shape)
    return None if any(n is None for n in sizes) else sizes


def _symbolic(value: Any) -> bool:
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return True
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return not all(
            isinstance(n, int) for n in (*value.shape, *value.stride(), value.storage_offset())
        )
    return False


def _leaves(value: Any) -> list:
    found: list = []
    map_aggregate(value, found.append)
    return found


def _storage(t: torch.Tensor) -> StorageWeakRef | None:
    try:
        return StorageWeakRef(t.untyped_storage())
    except (RuntimeError, NotImplementedError):  # (a subclass without one: left as it is)
        return None


class _Layouts:
    """Meta tensors laid out as fake ones at their hints, one meta storage per fake one."""

    def __init__(self) -> None:
        self.bases: dict = {}

    def layout(self, t: torch.Tensor) -> tuple | None:
        ints = [hint(n) for n in (*t.shape, *t.stride(), t.storage_offset())]
        if any(n is None for n in ints):
            return None
        d = t.dim()
        return tuple(ints[:d]), tuple(ints[d : 2 * d]), ints[-1]

    def reserve(self, t: torch.Tensor) -> None:
        """Count ``t``'s bytes in its storage's meta base."""
        layout, ref = self.layout(t), _storage(t)
        if layout is None or ref is None:
            return
        size, stride, offset = layout
        end = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
        self.bases[ref] = max(self.bases.get(ref, 0), end * t.element_size())

    def make(self) -> None:
        # (bytes rounded up to 16: every dtype's view of the base divides them)
        self.bases = {
            ref: torch.empty(-(-n // 16) * 16, dtype=torch.uint8, device="meta")
            for ref, n in self.bases.items()
        }

    def of(self, t: torch.Tensor) -> torch.Tensor:
        layout, ref = self.layout(t), _storage(t)
        base = self.bases.get(ref) if ref is not None else None
        if layout is None or base is None:
            return t
        size, stride, offset = layout
        return base.view(t.dtype).as_strided(size, stride, offset)


@contextlib.contextmanager
def examples_at_hints(gm: torch.fx.GraphModule) -> Iterator[bool]:
    """While open, the example values of ``gm``'s nodes laid out at their hints (meta tensors,
    ints) where some example is symbolic; yields whether any was."""
    nodes = [n for n in gm.graph.nodes if KEY in n.meta]
    if not any(_symbolic(leaf) for n in nodes for leaf in _leaves(n.meta[KEY])):
        yield False
        return
    layouts = _Layouts()
    for n in nodes:
        for leaf in _leaves(n.meta[KEY]):
            if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided:
                layouts.reserve(leaf)
    layouts.make()

    def concrete(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.layout == torch.strided:
            return layouts.of(value)
        if isinstance(value, torch.SymInt):
            h = hint(value)
            return value if h is None else h
        return value

    saved = {n: n.meta[KEY] for n in nodes}
    try:
        for n in nodes:
            n.meta[KEY] = map_aggregate(saved[n], concrete)
        yield True
    finally:
        for n, value in saved.items():
            n.meta[KEY] = value


__all__ = ["examples_at_hints", "hint", "hinted_shape"]
