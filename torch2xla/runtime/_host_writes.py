"""A CPU program's packed writes into its inputs, scattered into their memory in one numpy op.

A graph that writes into its inputs (an optimizer step: a parameter, two moments and a step
counter per parameter) returns their new values, which the entry copies into them
(``_entry.Entry``). On the CPU the small ones come packed in one buffer per dtype (``_pack``),
which was cut into one torch view per value (an ``unbind``, ~0.3 us a view) and copied with one
``_foreach_copy_`` (a ``copy_`` a value on the CPU, ~0.35 us each): ~400 us of a compiled AdamW
step of 146 parameters (584 values), more than the rest of its call.

Here the program itself writes a packed group's values into their inputs (``HostWrites``): the
inputs' memory is one numpy array spanning them (over ctypes memory at the lowest address),
and a precomputed index array scatters the buffer into it (``span[index] = buffer``: one C call,
~2 ns an element). The call hands the entry each input's own tensor as its new value, and the
entry, seeing that value *is* its target, only moves the version counters as the copies would
(``_entry._settle_done``).

Safe where the memory is the inputs' own and stays theirs: the plan is made per ``ViewCache``
fast check (``_Fast.writes``), which a call uses only when that check found the very tensors it
was made for, at the same data pointers (``XlaProgram`` passes the tuple of views the cache
returned whole), and which the cache drops when one of them dies. Only inputs the copy would
treat as raw memory take part: plain CPU tensors, contiguous, of the group's dtype and the
value's shape, not empty, aligned, not inference tensors (eager raises on those), without a
conjugate or negative bit, none overlapping another; a group with any other member is cut and
copied as before.
"""

from __future__ import annotations

import ctypes
import itertools
import operator
from collections.abc import Sequence

import numpy as np
import torch

from torch2xla.runtime._interop import (
    _HOST_TYPES,
    TORCH_TO_JAX_DTYPE,
    _host_memory_of,
    _row_major,
)


def write_positions(packing, writes: Sequence[int], tensor_pos: Sequence[int]) -> dict | None:
    """``{output: tensor position}`` for the members of ``packing``'s groups whose every member
    is the new value of an input (``writes[i]``: the argument position output ``i`` is written
    into), or None where no group is."""
    if packing is None or not writes:
        return None
    position = {p: k for k, p in enumerate(tensor_pos)}
    out = {}
    for g in packing.groups:
        ks = [position.get(writes[i]) if i < len(writes) else None for i in g.positions]
        if None not in ks and len(set(ks)) == len(ks):
            out.update(zip(g.positions, ks))
    return out or None


class _Scatter:
    """One group's scatter: ``span[index] = buffer``, ``span`` over the inputs' memory."""

    __slots__ = ("index", "span")

    def __init__(self, span: np.ndarray, index: np.ndarray) -> None:
        self.span, self.index = span, index


class HostWrites:
    """A call's packed outputs as ``Packing.unpack`` gives them, with the groups whose members
    are all writes scattered into their inputs (whose own tensors stand for those values)."""

    __slots__ = ("_pick", "_scatters")

    def __init__(self, scatters: list, pick) -> None:
        self._scatters = scatters  # per group: a _Scatter, or None (cut as before)
        self._pick = pick  # per scattered group: tensors -> its inputs, in the group's order

    @staticmethod
    def plan(packing, positions: dict, tensors: Sequence[torch.Tensor]) -> HostWrites | None:
        """The writes of ``packing``'s groups into ``tensors`` (``positions``: from
        ``write_positions``), or None where no group can be scattered."""
        scatters: list = []
        picks: list = []
        ranges: list = []
        for g in packing.groups:
            ks = [positions.get(i) for i in g.positions]
            scatter = None
            if None not in ks:
                targets = [tensors[k] for k in ks]
                scatter = _scatter_of(g, targets, ranges)
            scatters.append(scatter)
            picks.append(None if scatter is None else operator.itemgetter(*ks))
        if not any(scatters) or _overlapping(ranges):
            return None
        return HostWrites(scatters, picks)

    def unpack(self, packing, outs: Sequence, tensors: Sequence, to_torch, cut) -> list:
        """``packing.unpack(outs, to_torch, cut)``, the scattered groups' values written into
        their inputs, which stand for them."""
        rest = len(packing.rest)
        parts = list(map(to_torch, outs[:rest]))
        for g, buf, scatter, pick in zip(packing.groups, outs[rest:], self._scatters, self._pick):
            if scatter is None:
                parts += cut(buf, g)
                continue
            memory, view, _ = _host_memory_of(buf)  # (the program has finished)
            scatter.span[scatter.index] = np.ndarray(scatter.index.shape, view, memory)
            parts += pick(tensors)
        return list(packing._gather(parts))


def _scatter_of(group, targets: list, ranges: list) -> _Scatter | None:
    for t, shape in zip(targets, group.shapes):
        if not _plain(t, group.dtype, shape):
            return None
    view = _HOST_TYPES[group.dtype][0]
    itemsize = view.itemsize
    ptrs = [t.data_ptr() for t in targets]
    if any(p % itemsize for p in ptrs):
        return None
    base = min(ptrs)
    end = max(p + t.numel() * itemsize for p, t in zip(ptrs, targets))
    ranges += [(p, p + t.numel() * itemsize) for p, t in zip(ptrs, targets)]
    index = np.concatenate(
        [
            np.arange(t.numel(), dtype=np.intp) + (p - base) // itemsize
            for p, t in zip(ptrs, targets)
        ]
    )
    span = np.ndarray(
        ((end - base) // itemsize,), view, (ctypes.c_char * (end - base)).from_address(base)
    )
    return _Scatter(span, index)


def _plain(t, dtype: np.dtype, shape: tuple) -> bool:
    return (
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.layout == torch.strided
        and t.device.type == "cpu"
        and TORCH_TO_JAX_DTYPE.get(t.dtype) == dtype
        and tuple(t.shape) == tuple(shape)
        and t.numel() > 0
        and t.stride() == _row_major(t.shape)
        and not (t.is_inference() or t.is_conj() or t.is_neg())
    )


def _overlapping(ranges: list) -> bool:
    ranges = sorted(ranges)
    return any(a[1] > b[0] for a, b in itertools.pairwise(ranges))
