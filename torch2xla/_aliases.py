"""Outputs that eager returns as views of inputs.

XLA programs return fresh buffers. Where eager's output is a view of a graph input (``x.t()``,
``x.view(-1)``, a slice), later in-place writes to one would show in the other in eager; so the
output is regenerated as a view of the real input, from Dynamo's fake-tensor metadata, as
AOTAutograd does for other backends.
"""

from __future__ import annotations

import dataclasses
import operator

import torch
from torch.multiprocessing.reductions import StorageWeakRef


@dataclasses.dataclass(frozen=True)
class OutputAlias:
    """Output ``output`` is ``inputs[input].as_strided(size, stride, offset)`` in eager, or the
    input itself when ``size`` is None (a mutated input returned by the function)."""

    output: int
    input: int
    size: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None
    offset: int = 0  # relative to the input's own storage offset (Dynamo does not guard it)

    def regenerate(self, args) -> torch.Tensor:
        if self.size is None:
            return args[self.input]
        base = args[self.input]
        return base.as_strided(self.size, self.stride, base.storage_offset() + self.offset)


def _static(values) -> tuple[int, ...] | None:
    return tuple(values) if all(isinstance(v, int) for v in values) else None


# Calls whose fake kernel returns its input where the eager kernel returns a copy: torch's
# native_dropout decomposition returns ``input`` itself unless ``train and p != 0`` (so also for
# ``train=None``, which eager reads as training).
_FRESH_IN_EAGER = (torch.native_dropout, torch.ops.aten.native_dropout,
                   torch.ops.aten.native_dropout.default)


def _fresh_in_eager(node: torch.fx.Node) -> bool:
    while node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    return node.op == "call_function" and node.target in _FRESH_IN_EAGER


def output_aliases(gm: torch.fx.GraphModule) -> tuple[OutputAlias, ...]:
    """Outputs of a Dynamo graph that are views of its tensor inputs (static layouts only)."""
    storages = {}
    placeholders = gm.graph.find_nodes(op="placeholder")
    position = {node: i for i, node in enumerate(placeholders)}
    for i, node in enumerate(placeholders):
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.Tensor):
            storages.setdefault(StorageWeakRef(ex.untyped_storage()), i)
    out = gm.graph.find_nodes(op="output")[0].args[0]
    found = []
    for k, node in enumerate(out if isinstance(out, list | tuple) else (out,)):
        if isinstance(node, torch.fx.Node) and node in position:
            found.append(OutputAlias(k, position[node]))
            continue
        ex = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        if not isinstance(ex, torch.Tensor) or _fresh_in_eager(node):
            continue
        src = storages.get(StorageWeakRef(ex.untyped_storage()))
        size, stride = _static(ex.shape), _static(ex.stride())
        offset = ex.storage_offset()
        if src is not None:
            offset = offset - placeholders[src].meta["example_value"].storage_offset()
        # Views that reinterpret the dtype (view_as_complex, view(dtype)) stay fresh buffers:
        # as_strided on the input would keep the input's dtype.
        if src is not None and placeholders[src].meta["example_value"].dtype != ex.dtype:
            continue
        if src is not None and size is not None and stride is not None and isinstance(offset, int):
            found.append(OutputAlias(k, src, size, stride, offset))
    return tuple(found)
