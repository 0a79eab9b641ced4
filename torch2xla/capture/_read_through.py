"""Views that an op reading its argument's memory takes its argument through, where that op
runs in eager: they run in eager too (``views_read_through``)."""

from __future__ import annotations

import operator

import torch

from torch2xla._errors import Unsupported, is_custom_op, op_name

_READS_STORAGE = frozenset(
    {
        torch.ops.aten.as_strided.default,
        torch.ops.aten.as_strided_copy.default,
        torch.ops.aten.as_strided_scatter.default,
    }
)


def _memory_arguments(node: torch.fx.Node) -> list:
    """The arguments whose memory (storage offset, strides, neighbours) ``node`` reads:
    ``as_strided``'s input (its storage offset counts from the storage's start); every tensor
    argument of a user's ``torch.library`` op (opaque: its kernel sees the layout eager gives
    it, as inductor's exact-strides rule for custom ops keeps it); none for other ops."""
    if node.op != "call_function":
        return []
    if node.target in _READS_STORAGE:
        return node.args[:1]
    if is_custom_op(node.target):
        return [node.args, node.kwargs]
    return []


def views_read_through(unsupported: list[Unsupported]) -> list[Unsupported]:
    """The views an op that reads its argument's memory takes its argument through, where
    that op runs in eager: they run in eager too, so that it gets a view of the input's own
    memory, laid out as eager's (an XLA partition's output is a fresh contiguous tensor:
    ``x[1:].as_strided(size, stride, 0)`` read ``x[1]``'s memory as its start, and a user's op
    given ``x[:, ::2]`` saw strides ``(3, 1)`` and storage offset 0 where eager's saw
    ``(6, 2)``)."""
    found: list[Unsupported] = []
    seen = {u.node for u in unsupported}
    for u in unsupported:
        for arg in _flat_nodes(_memory_arguments(u.node)):
            while isinstance(arg, torch.fx.Node) and arg.op == "call_function":
                if arg.target is operator.getitem:  # one view of split/unbind's list
                    arg = arg.args[0]
                    continue
                if not getattr(arg.target, "is_view", False) or arg in seen:
                    break
                seen.add(arg)
                found.append(
                    Unsupported(
                        arg, f"a view that {op_name(u.node)}, run in eager, reads the memory of"
                    )
                )
                arg = arg.args[0] if arg.args else None
    return found


def _flat_nodes(args: list) -> list[torch.fx.Node]:
    out: list[torch.fx.Node] = []
    torch.fx.node.map_arg(args, out.append)
    return out
