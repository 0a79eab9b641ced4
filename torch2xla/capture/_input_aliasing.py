"""Inputs that overlap in memory (``f(x[0:4], x[2:6])``): found (``alias_signature``,
``storage_classes``) and lowered as one base per group (``InputAliasing``). Outputs that are
views of inputs are ``_aliases``'."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from torch2xla.capture._aliases import _plain

# NOTE: AOT export refuses a graph that mutates inputs overlapping in memory (``f(x[0:4],
# x[2:6])`` writing to both): eager's result depends on the order of the writes through the
# shared memory. AOTAutograd's own compile path passes such inputs as one "synthetic base" and
# regenerates each as a view inside the graph. So do we: each group of overlapping inputs
# reaches the exported graph as one flat base (a view of the inputs' memory, so no copy), and
# the graph takes each input back out of it with ``as_strided``; functionalization then writes
# every mutation into the base, whose new value is written back into the shared memory.
# Dynamo guards nothing about overlap: where its example inputs were distinct, it guards that
# the inputs are distinct tensors, not that their memory is (``f(a, b)`` then ``f(x[:4],
# x[2:6])``). So the cache key holds ``alias_signature`` for every graph that writes into an
# input, and for those whose example inputs shared memory.


def _extent(t: torch.Tensor) -> int:
    """Elements of ``t``'s storage from its first element to its last, inclusive."""
    return 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))


def _overlapping(tensors: Sequence) -> list[list[int]]:
    """Positions of tensors whose memory ranges overlap, grouped (two or more per group)."""
    by_storage: dict = {}
    for i, t in enumerate(tensors):
        if isinstance(t, torch.Tensor) and t.numel() and t.layout == torch.strided:
            by_storage.setdefault(StorageWeakRef(t.untyped_storage()), []).append(i)
    groups = []
    for positions in by_storage.values():
        if len(positions) < 2:
            continue
        size = {i: tensors[i].element_size() for i in positions}
        spans = sorted(
            (
                tensors[i].storage_offset() * size[i],
                (tensors[i].storage_offset() + _extent(tensors[i])) * size[i],
                i,
            )
            for i in positions
        )
        group, end = [spans[0][2]], spans[0][1]
        for start, stop, i in spans[1:]:
            if start < end:
                group.append(i)
                end = max(end, stop)
                continue
            if len(group) > 1:
                groups.append(sorted(group))
            group, end = [i], stop
        if len(group) > 1:
            groups.append(sorted(group))
    return groups


def alias_signature(tensors: Sequence, positions: Sequence[int] | None = None) -> tuple:
    """What ``InputAliasing`` depends on in a call: which inputs overlap, and their layouts
    relative to each other (hashable; ``()`` when no inputs overlap). ``positions``: the
    strided tensors that may overlap (the cache key's choice); None: every tensor."""
    # (per call, in the cache key: no two tensors sharing a storage is the common case, found
    # from the storages' addresses at a tenth of ``_overlapping``'s cost)
    seen = set()
    if positions is None:
        positions = [
            i
            for i, t in enumerate(tensors)
            if isinstance(t, torch.Tensor) and t.layout == torch.strided
        ]
    for i in positions:
        ptr = tensors[i].untyped_storage().data_ptr()
        if ptr in seen:
            break
        seen.add(ptr)
    else:
        return ()
    out = []
    for group in _overlapping(tensors):
        first = min(tensors[i].storage_offset() for i in group)
        out.append(
            tuple(
                (i, tuple(tensors[i].stride()), tensors[i].storage_offset() - first) for i in group
            )
        )
    return tuple(out)


def storage_classes(tensors: Sequence) -> tuple[int | None, ...]:
    """Per tensor, the first position of a tensor sharing its storage (None: not a strided
    tensor); of fake tensors too (Dynamo's example values)."""
    first: dict = {}
    out: list[int | None] = []
    for i, t in enumerate(tensors):
        t = _plain(t)
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            out.append(None)
            continue
        out.append(first.setdefault(StorageWeakRef(t.untyped_storage()), i))
    return tuple(out)


def may_alias(gm: torch.fx.GraphModule) -> bool:
    """Whether some of the Dynamo graph's example inputs share memory (Dynamo then does not
    guard against aliasing, so any call's inputs may overlap)."""
    seen = set()
    for node in gm.graph.find_nodes(op="placeholder"):
        ex = _plain(node.meta.get("example_value"))
        if isinstance(ex, torch.Tensor) and ex.layout == torch.strided:
            ref = StorageWeakRef(ex.untyped_storage())
            if ref in seen:
                return True
            seen.add(ref)
    return False


def _root(t: torch.Tensor) -> torch.Tensor:
    return t if t._base is None else t._base


@dataclasses.dataclass(frozen=True)
class _Group:
    positions: tuple[int, ...]
    views: tuple[tuple[tuple[int, ...], tuple[int, ...], int], ...]  # size, stride, offset
    length: int  # elements of the base
    dtype: torch.dtype
    # (per input, whether it is cut off autograd beside one that requires grad: a detached
    # alias, ``d = h.detach()``, whose writes autograd does not record into ``h``'s history)
    detached: tuple[bool, ...] = ()


@dataclasses.dataclass(frozen=True)
class InputAliasing:
    """Groups of graph inputs that overlap in memory, each passed as one flat base.

    The exported graph takes the inputs outside every group, in order, then one base per
    group (``program_args``); ``rewrite`` makes a Dynamo graph of that signature.
    """

    groups: tuple[_Group, ...]
    num_args: int

    @classmethod
    def of(
        cls, args: Sequence, written: frozenset[int] | None = None, from_start: bool = False
    ) -> InputAliasing | None:
        """The groups of ``args`` that overlap and of which the graph writes into some input
        (``written``, positions; None: every group). A group that is only read is left to
        the export as separate inputs: one base would send the gradients of all its inputs
        into the first one's history, where they may be separate leaves (``d =
        x.detach().requires_grad_()``, two parameters made from one tensor's data).
        ``from_start``: each base starts at the storage's first element, not the first
        input's (the graph reads storage offsets: ``as_strided``'s explicit one counts from
        the storage's start, and the export's base starts a storage of its own); it ends
        where the inputs end, so the program depends on nothing the key does not hold (the
        storage offsets of such graphs, their inputs' sizes and strides)."""
        groups = []
        for positions in _overlapping(args):
            if written is not None and written.isdisjoint(positions):
                continue
            tensors = [args[i] for i in positions]
            if len({t.dtype for t in tensors}) > 1:
                continue  # views of one memory as two dtypes: left to the export, which refuses
            first = min(t.storage_offset() for t in tensors)
            length = max(t.storage_offset() + _extent(t) for t in tensors) - first
            if from_start:
                first, length = 0, first + length
            views = tuple(
                (tuple(t.shape), tuple(t.stride()), t.storage_offset() - first) for t in tensors
            )
            grads = [t.requires_grad for t in tensors]
            detached = tuple(not g for g in grads) if any(grads) else ()
            groups.append(_Group(tuple(positions), views, length, tensors[0].dtype, detached))
        return cls(tuple(groups), len(args)) if groups else None

    def program_args(self, args: Sequence) -> list:
        """The exported graph's arguments for a call's ``args`` (bases are views, not copies)."""
        grouped = {i for g in self.groups for i in g.positions}
        out = [a for i, a in enumerate(args) if i not in grouped]
        for g in self.groups:
            t = args[g.positions[0]]
            start = t.storage_offset() - g.views[0][2]
            # A view of the tensor the inputs are views of, where they share one, so that
            # autograd takes the base's gradient back into it (a view of one input would drop
            # the gradient of the memory outside that input).
            roots = {id(_root(args[i])) for i in g.positions}
            if len(roots) == 1:
                t = _root(t)
            elif not t.requires_grad:
                # (the memory of a tensor that requires grad, written through a detached
                # alias of it, ``d = h.detach()``: the base is a view of the one autograd
                # follows, so that what the graph computes from it keeps its gradient)
                t = next((args[i] for i in g.positions if args[i].requires_grad), t)
            out.append(t.as_strided((g.length,), (1,), start))
        return out

    def export_args(self, args: Sequence) -> list:
        """``program_args`` for the export: fresh bases, whose storage starts where the base
        does (``as_strided`` offsets count from the storage's start)."""
        out = self.program_args(args)
        for k, g in enumerate(self.groups):
            grad = any(args[i].requires_grad for i in g.positions)
            base = out[len(out) - len(self.groups) + k]
            out[len(out) - len(self.groups) + k] = torch.empty(
                g.length, dtype=g.dtype, device=base.device
            ).requires_grad_(grad)
        return out

    def rewrite(self, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
        """A copy of the Dynamo graph ``gm`` taking ``program_args``: grouped inputs become
        ``as_strided`` views of their group's base."""
        graph = copy.deepcopy(gm.graph)
        placeholders = list(graph.find_nodes(op="placeholder"))
        last = placeholders[-1]
        for k, g in enumerate(self.groups):
            with graph.inserting_after(last):
                base = graph.placeholder(f"aliased_base_{k}")
            last = base
            base.meta["example_value"] = None
            detached = g.detached or (False,) * len(g.positions)
            for i, (size, stride, offset), cut in zip(g.positions, g.views, detached):
                old = placeholders[i]
                with graph.inserting_after(base):
                    view = graph.call_function(torch.as_strided, (base, size, stride, offset))
                view.meta = dict(old.meta)
                if cut:  # (its writes are not recorded: ``_stop_gradient`` keeps the detach)
                    example = old.meta.get("example_value")
                    if isinstance(example, torch.Tensor):  # (the view of a tracked base)
                        view.meta["example_value"] = example.detach().requires_grad_(True)
                    with graph.inserting_after(view):
                        view = graph.call_method("detach", (view,))
                    view.meta = dict(old.meta)
                old.replace_all_uses_with(view)
        for g in self.groups:
            for i in g.positions:
                graph.erase_node(placeholders[i])
        new = torch.fx.GraphModule(gm, graph)
        new.meta.update(gm.meta)
        return new
