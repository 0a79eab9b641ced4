"""Errors that name the graph, the ATen node and the user's source line."""

from __future__ import annotations

import dataclasses
import re

import torch


def source_line(node: torch.fx.Node) -> str:
    """``file:line: code`` of the user code that produced ``node``, or '<unknown>'."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)', trace)
    if not frames:
        return "<unknown source>"
    file, line, code = frames[-1]
    return f"{file}:{line}: {code.strip()}"


def describe(node: torch.fx.Node) -> str:
    return f"{node.target} (node {node.name!r}) from {source_line(node)}"


@dataclasses.dataclass(frozen=True)
class Unsupported:
    """An ATen node that cannot run in XLA, and why."""

    node: torch.fx.Node
    reason: str

    def __str__(self) -> str:
        return f"  {self.node.target}: {self.reason}\n      at {source_line(self.node)}"


class UnsupportedOpsError(RuntimeError):
    """Raised in strict mode when a graph holds ops that torch2xla cannot lower."""

    def __init__(self, graph_name: str, unsupported: list[Unsupported]) -> None:
        listing = "\n".join(str(u) for u in unsupported)
        super().__init__(
            f"torch2xla: graph {graph_name} has {len(unsupported)} op(s) that cannot run in XLA:"
            f"\n{listing}\nDrop options={{'strict': True}} to run them in eager PyTorch instead, "
            "or open an issue asking for the missing lowering."
        )
        self.unsupported = unsupported


class LoweringError(RuntimeError):
    """A lowering failed while tracing a graph to JAX."""
