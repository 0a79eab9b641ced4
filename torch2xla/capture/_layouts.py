"""Output layouts eager's kernels choose: ``eager_layouts`` makes the results of calls whose
eager kernels choose their output's memory format (batch norm, CPU ``max_pool1d`` without
grad, ``roll``, ``pad``, ``max_unpool``) contiguous in it on the Dynamo graph, so that outputs
computed from them have eager's strides (the fake kernels keep the input's; a no-op in XLA;
``runtime/_output_layout.OutputLayout``)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from torch2xla.capture._rewrites import _rewritten


# -- output layouts eager's kernels choose (runtime/_output_layout.OutputLayout) ----------------------
# An output's strides are its fake value's, and fake kernels mostly follow eager's. These
# kernels choose their output's memory format themselves where the fake kernels keep the
# input's strides: a call's result is made contiguous in that format (a no-op in XLA), so that
# it and what is computed from it have eager's layout.
def _batch_norm_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format:
    # (eager's kernels write into ``empty_like(input, input.suggest_memory_format())``: a
    # transposed (N, C, L) input gives a contiguous result, a channels_last one stays)
    if x.ndim in (4, 5) and _strides_like_channels_last(x.shape, x.stride()):
        return torch.channels_last if x.ndim == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _strides_like_channels_last(sizes, strides) -> bool:
    """c10's ``is_channels_last_strides_2d``/``_3d`` (``suggest_memory_format``'s test): the
    strides grow from the channels through the spatial dims (innermost last) to the batch;
    ambiguous cases (a trivial channel dim, size-1 dims with equal strides) are row-major."""
    if strides[1] == 0:
        return False
    smallest = 0
    for d in (1, *range(len(sizes) - 1, 1, -1), 0):
        if sizes[d] == 0 or strides[d] < smallest:
            return False
        if d == 0 and smallest == strides[1]:
            return False
        smallest = strides[d] * max(1, sizes[d])
    return True


def _max_pool1d_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    # (eager's CPU max_pool1d without grad runs ``max_pool1d_impl``, which writes a new
    # contiguous tensor; with grad, ``max_pool1d_with_indices``, whose strides the fake
    # kernel has)
    value = node.meta.get("example_value")
    if x.device.type != "cpu" or not isinstance(value, torch.Tensor) or value.requires_grad:
        return None
    return torch.contiguous_format


def _suggested(x: torch.Tensor) -> torch.memory_format:
    """``x.suggest_memory_format()`` (a 4-d tensor of channels-last strides: channels_last,
    also where a 3-d op reads it as an unbatched volume)."""
    if x.ndim in (4, 5) and _strides_like_channels_last(x.shape, x.stride()):
        return torch.channels_last if x.ndim == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _roll_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    # (eager rolls along dims by ``cat``s of slices, in the input's suggested format; a roll
    # of the flattened tensor is contiguous, as its fake value)
    dims = node.args[2] if len(node.args) > 2 else node.kwargs.get("dims")
    return None if dims in (None, (), []) else _suggested(x)


def _pad_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    # (eager's reflection and replication pads of three dims write into the input's suggested
    # format; their fake kernels give a contiguous result. Two dims: the fake kernels agree)
    mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
    return _suggested(x) if mode in ("reflect", "replicate") else None


def _unpool_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    return _suggested(x)  # (eager's max_unpool2d: the input's suggested format)


_LAYOUTS: dict[Callable, Callable] = {
    F.batch_norm: _batch_norm_format,
    torch.batch_norm: _batch_norm_format,
    F.max_pool1d: _max_pool1d_format,
    torch.max_pool1d: _max_pool1d_format,
    torch.roll: _roll_format,
    F.pad: _pad_format,
    torch._C._nn.pad: _pad_format,
    F.max_unpool2d: _unpool_format,
    torch._C._nn.max_unpool2d: _unpool_format,
}
# Tensor methods, by name
_METHOD_LAYOUTS: dict[str, Callable] = {"roll": _roll_format}


def eager_layouts(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy in which the results of the calls ``_LAYOUTS`` lists are made
    contiguous in the memory format eager's kernels give them (``gm`` itself is never
    changed)."""
    return _rewritten(gm, lambda node: _eager_format(node) is not None, _relayout)


def _eager_format(node: torch.fx.Node) -> torch.memory_format | None:
    """The memory format eager gives ``node``'s result where its fake value has another."""
    if node.op == "call_function":
        rule = _LAYOUTS.get(node.target)
    else:
        rule = _METHOD_LAYOUTS.get(node.target) if node.op == "call_method" else None
    value = node.meta.get("example_value")
    x = node.args[0] if node.args else node.kwargs.get("input")
    x = x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
    if rule is None or not isinstance(value, torch.Tensor) or not isinstance(x, torch.Tensor):
        return None
    fmt = rule(node, x)
    return None if fmt is None or value.is_contiguous(memory_format=fmt) else fmt


def _relayout(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    fmt = _eager_format(node)
    with graph.inserting_after(node):
        made = graph.call_method("contiguous", (node,), {"memory_format": fmt})
    node.replace_all_uses_with(made, delete_user_cb=lambda user: user is not made)
    made.meta = dict(node.meta)
    made.meta["example_value"] = node.meta["example_value"].contiguous(memory_format=fmt)
