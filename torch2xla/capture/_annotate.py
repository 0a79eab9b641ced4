"""Analyses of an ATen graph for its lowerings, recorded in each node's ``node.meta``.

A lowering reads its arguments and its own node only; where its best form depends on the
graph around the node (what feeds it, who reads it), a pass here decides it once, before
translation, under a key of ``torch2xla/ops/_registry.py``:

- ``AFTER_CONVOLUTION`` (relu, hardtanh, training batch norms): the first argument is a
  convolution's output through at most ``CONVOLUTION_PATH`` elementwise, batch-norm or getitem
  nodes; on CPU these compute on channels-last data (``ops/_elementwise.py``, ``ops/_nn.py``).
- ``KEPT_BY_USERS`` (relu): whether some or every user keeps the output for its backward; relu
  then recomputes its gradient's mask from the output instead of keeping a mask.
- ``UNEXPANDED`` (bmm): an operand that is one matrix expanded over the batch, multiplied as
  that matrix (``ops/_linalg.py``).
- ``ON_CUDA`` (_assert_async, which has no output): whether its argument is on a CUDA device,
  where eager's assert is a device-side one, not checked (``ops/_bounds.py``).
- ``STORAGE_ORDER`` (the as_strided family): the order of the input's dims in memory, from
  which the lowering rebuilds the storage it indexes (``ops/_shape.py``); ``STORAGE_OFFSET``:
  the input's storage offset, from which an explicit ``storage_offset`` counts.

``annotate`` runs them all on the graph about to be translated (``XlaProgram``, each remat
segment): the answers describe that graph, so a partition of a graph is annotated on its own.
Every key is written on every node it applies to, so that meta copied from another graph
(``split_module`` copies it) never survives.
"""

from __future__ import annotations

import math
import operator

import torch

from torch2xla.ops._registry import (
    AFTER_CONVOLUTION,
    CONVOLUTION_PATH,
    KEPT_BY_USERS,
    ON_CUDA,
    STORAGE_OFFSET,
    STORAGE_ORDER,
    UNEXPANDED,
)

aten = torch.ops.aten

# the nodes whose lowerings read each key
_READS_AFTER_CONVOLUTION = frozenset(
    {
        aten.relu.default,
        aten.hardtanh.default,
        aten._native_batch_norm_legit_functional.default,
        aten._native_batch_norm_legit.no_stats,
        aten._batch_norm_with_update_functional.default,
    }
)
_READS_KEPT_BY_USERS = frozenset({aten.relu.default})
_READS_UNEXPANDED = frozenset({aten.bmm.default})
_READS_ON_CUDA = frozenset({aten._assert_async.default, aten._assert_async.msg})
_READS_STORAGE_ORDER = frozenset(
    {
        aten.as_strided.default,
        aten.as_strided_copy.default,
        aten.as_strided_scatter.default,
        aten._reshape_alias_copy.default,
    }
)

# Ops that keep their (first) input as it is for their backward: a relu feeding only these
# need not keep a mask of its own (the mask is recomputed from the kept output).
_KEEP_INPUT = frozenset(
    {aten.convolution.default, aten.mm.default, aten.addmm.default, aten.bmm.default}
)

_SAME_VALUE_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def annotate(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Run every analysis on ``gm``, recording the answers in its nodes' meta; returns ``gm``."""
    distance = convolution_distances(gm.graph)
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in _READS_AFTER_CONVOLUTION:
            source = node.args[0] if node.args else None
            node.meta[AFTER_CONVOLUTION] = (
                isinstance(source, torch.fx.Node) and distance[source] <= CONVOLUTION_PATH
            )
        if node.target in _READS_KEPT_BY_USERS:
            node.meta[KEPT_BY_USERS] = kept_by_users(node)
        if node.target in _READS_UNEXPANDED:
            node.meta[UNEXPANDED] = unexpanded_operand(node)
        if node.target in _READS_ON_CUDA:
            val = node.args[0].meta.get("val") if node.args else None
            node.meta[ON_CUDA] = getattr(getattr(val, "device", None), "type", "cpu") == "cuda"
        if node.target in _READS_STORAGE_ORDER:
            node.meta[STORAGE_ORDER] = storage_order(node.args[0])
            node.meta[STORAGE_OFFSET] = storage_offset(node.args[0])
    return gm


def convolution_distances(graph: torch.fx.Graph) -> dict[torch.fx.Node, float]:
    """Per node, how many elementwise, batch-norm or getitem nodes (residual adds included)
    lie between it and the nearest convolution it reads (0 for a convolution; ``inf`` where
    no convolution is reached that way). One walk in graph order."""
    distance: dict[torch.fx.Node, float] = {}
    for node in graph.nodes:
        if node.op != "call_function":
            distance[node] = math.inf
        elif node.target is aten.convolution.default:
            distance[node] = 0
        elif _passes_layout(node.target):
            inputs = [distance[a] for a in node.all_input_nodes]
            distance[node] = 1 + min(inputs, default=math.inf)
        else:
            distance[node] = math.inf
    return distance


def _passes_layout(target) -> bool:
    """Whether a convolution's layout reaches through an op of ``target``."""
    return target is operator.getitem or (
        isinstance(target, torch._ops.OpOverload)
        and (torch.Tag.pointwise in target.tags or "batch_norm" in target.name())
    )


def kept_by_users(node: torch.fx.Node) -> str:
    """``"every"``, ``"some"`` or ``"none"``: how many users of ``node`` keep it, unconverted,
    for their backward (a convolution or matrix product reading it directly).

    A relu whose output is kept recomputes its gradient's mask from it: where some user keeps
    it (a residual block's shortcut add may read it too), or on channels-last data only where
    every user does. Not so under autocast, where a bf16 copy is kept: there recomputing the
    mask would keep the float32 output beside it (4 bytes an element instead of the mask's 1).
    """
    kept = [u.target in _KEEP_INPUT for u in node.users]
    if not any(kept):
        return "none"
    return "every" if all(kept) else "some"


def _shape(arg) -> tuple[int, ...] | None:
    """A graph node's (fake) output shape; None for a non-node or a node without one."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def unexpanded_operand(node: torch.fx.Node) -> tuple[int, torch.fx.Node, bool] | None:
    """``(operand, source, first)`` where operand ``operand`` of the bmm ``node`` is the
    matrix ``source`` (``first``: ``source[0]``, a batch of one) expanded over the batch,
    through views that keep its shape; the right operand is looked at first. None if neither
    is."""
    for operand in (1, 0):
        found = _expanded_from(node.args[operand])
        if found is not None:
            return (operand, *found)
    return None


def _expanded_from(arg) -> tuple[torch.fx.Node, bool] | None:
    shape = _shape(arg)
    if shape is None:
        return None
    node = arg
    while (
        node.op == "call_function"
        and node.target in _SAME_VALUE_VIEWS
        and _shape(node.args[0]) == shape
    ):
        node = node.args[0]
    if node.op != "call_function" or node.target is not aten.expand.default:
        return None
    src = node.args[0]
    src_shape = _shape(src)
    if src_shape is None:
        return None
    if src_shape == shape[1:]:
        return src, False
    if src_shape == (1, *shape[1:]) and shape[0] != 1:
        return src, True
    return None


def storage_offset(arg) -> int | None:
    """The storage offset of ``arg``'s fake value (0 without one; None where symbolic)."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return 0
    offset = val.storage_offset()
    return offset if isinstance(offset, int) else None


def storage_order(arg) -> tuple[int, ...] | None:
    """The dims of ``arg`` (a graph node) ordered outermost-first in memory, from its fake
    value's strides, so that ``transpose(x, order).reshape(-1)`` lists its elements in storage
    order; None where it is not dense in memory (overlapping or with gaps). A node without a
    fake value is taken as contiguous."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return tuple(range(len(_shape(arg) or ())))
    strides, sizes = val.stride(), val.shape
    order = sorted(range(val.ndim), key=lambda d: (-strides[d], -sizes[d]))
    expected = 1
    for d in reversed(order):
        if sizes[d] != 1 and strides[d] != expected:
            return None
        expected *= sizes[d]
    return tuple(order)
