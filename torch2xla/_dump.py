"""Dumps of what each graph became, stage by stage, to a directory.

Turned on by ``options={"dump_dir": path}`` or the ``TORCH2XLA_DUMP_DIR`` environment variable.
File names tie the stages together: ``graph_3`` is the name of a Dynamo graph (the same name
appears in ``explain``, profiler ranges and errors) and ``s0`` its first compiled signature::

    graph_3.dynamo.txt               the FX graph Dynamo captured (torch-level calls)
    graph_3.s0.aten.txt              the functional core-ATen graph, after graph passes
    graph_3.s0.<program>.jaxpr.txt   the jaxpr of each program: inference, or forward+backward
    graph_3.s0.<program>.stablehlo.mlir   the StableHLO handed to XLA
    graph_3.s0.<program>.hlo.txt     XLA's optimized HLO
    graph_3.s0.summary.txt           inputs, compile time per stage, XLA cost, op placement

Graphs some of whose ops run in eager PyTorch compile their XLA partitions on first call; for
them the ATen graph and the summary are written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch2xla._stages import Executable

DUMP_DIR_ENV = "TORCH2XLA_DUMP_DIR"


def dump_dir(option: str | None) -> Path | None:
    """The dump directory from the option, else from ``TORCH2XLA_DUMP_DIR``; None: no dumps."""
    path = option or os.environ.get(DUMP_DIR_ENV)
    return Path(path) if path else None


def dump_dynamo_graph(directory: Path, graph: str, gm: torch.fx.GraphModule) -> None:
    _write(directory / f"{graph}.dynamo.txt", readable(gm))


def dump_signature(
    directory: Path,
    name: str,
    aten: str,
    executables: Sequence[Executable],
    summary: str,
) -> None:
    """Write one signature's (``name``: ``graph_3.s0``) ATen graph (``aten``: its ``readable``
    text), its programs' IRs and its summary."""
    _write(directory / f"{name}.aten.txt", aten)
    dump_executables(directory, name, executables)
    _write(directory / f"{name}.summary.txt", summary + "\n")


def dump_executables(directory: Path, name: str, executables: Sequence[Executable]) -> None:
    """Write the jaxpr, StableHLO and optimized HLO of each executable of ``name``."""
    for ex in executables:
        base = f"{name}.{ex.name}"
        _write(directory / f"{base}.jaxpr.txt", ex.traced.jaxpr.pretty_print(use_color=False))
        _write(directory / f"{base}.stablehlo.mlir", ex.lowered.as_text())
        _write(directory / f"{base}.hlo.txt", ex.compiled.as_text())


def readable(gm: torch.fx.GraphModule) -> str:
    return gm.print_readable(print_output=False, include_stride=False, include_device=True)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
