"""Views that an op reading its argument's storage (``as_strided``) takes its argument
through, where that op runs in eager: they run in eager too (``views_read_through``)."""

from __future__ import annotations

import torch

from torch2xla._errors import Unsupported, op_name

_READS_STORAGE = frozenset(
    {
        torch.ops.aten.as_strided.default,
        torch.ops.aten.as_strided_copy.default,
        torch.ops.aten.as_strided_scatter.default,
    }
)


def views_read_through(unsupported: list[Unsupported]) -> list[Unsupported]:
    """The views an op reading its argument's storage (``as_strided``: its storage offset
    counts from the storage's start) takes its argument through, where that op runs in
    eager: they run in eager too, so that it gets a view of the input's own memory (an XLA
    partition's output is a fresh tensor: ``x[1:].as_strided(size, stride, 0)`` read
    ``x[1]``'s memory as its start)."""
    found: list[Unsupported] = []
    seen = {u.node for u in unsupported}
    for u in unsupported:
        if u.node.op != "call_function" or u.node.target not in _READS_STORAGE:
            continue
        arg = u.node.args[0] if u.node.args else None
        while (
            isinstance(arg, torch.fx.Node)
            and arg.op == "call_function"
            and getattr(arg.target, "is_view", False)
            and arg not in seen
        ):
            seen.add(arg)
            found.append(
                Unsupported(
                    arg, f"a view that {op_name(u.node)}, run in eager, reads the memory of"
                )
            )
            arg = arg.args[0] if arg.args else None
    return found
