"""Dumps of what each graph became, stage by stage, one folder per process, with an index.

Turned on by ``options={"dump_dir": path}`` or the ``TORCH2XLA_DUMP_DIR`` environment variable.
Each process writes into its own folder under ``path``, ``run-<date>-<time>-pid<pid>``, so that
runs never mix (graph numbers count per process). File names tie the stages together:
``graph_3`` is the name of a Dynamo graph (the same name appears in ``explain``, profiler
ranges, logs and errors) and ``s0`` its first compiled signature::

    index.json                       the run: every graph, signature, stage and file
    index.html                       the same, as a page that links the files
    graph_3.dynamo.txt               the FX graph Dynamo captured (torch-level calls)
    graph_3.s0.aten.txt              the functional core-ATen graph, after graph passes
    graph_3.s0.<program>.jaxpr.txt   the jaxpr of each program: inference, or forward+backward
    graph_3.s0.<program>.stablehlo.mlir   the StableHLO handed to XLA
    graph_3.s0.<program>.hlo.txt     XLA's optimized HLO
    graph_3.s0.summary.txt           inputs, compile time per stage, XLA cost, op placement

A graph some of whose ops run in eager PyTorch compiles its XLA partitions on its first call;
their programs are ``graph_3.s0.fused_0.<program>.*``.
"""

from __future__ import annotations

import datetime
import html
import importlib.metadata
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch2xla.debug._stages import CompileRecord, Executable

DUMP_DIR_ENV = "TORCH2XLA_DUMP_DIR"
log = logging.getLogger("torch2xla")

# A program's files: (stage, suffix), in the order the stages run.
_PROGRAM_FILES = (("tracing", "jaxpr.txt"), ("stablehlo", "stablehlo.mlir"), ("xla", "hlo.txt"))


class DumpRun:
    """This process's dump folder under one dump root, and its index.

    The folder is created on the first dump. Every write rewrites ``index.json`` and
    ``index.html``, so they list everything dumped so far even if the process dies.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        now = datetime.datetime.now()
        self.started = now.isoformat(timespec="seconds")
        self.directory = root / f"run-{now:%Y%m%d-%H%M%S}-pid{os.getpid()}"
        self._created = False
        self._graphs: dict[str, dict[str, Any]] = {}
        self._records: dict[str, tuple[CompileRecord, dict[str, list[str]]]] = {}
        self._lock = threading.Lock()

    # -- writes ------------------------------------------------------------------------------
    def graph(self, name: str, frame: str | None, gm: torch.fx.GraphModule) -> None:
        """The Dynamo graph ``name`` (``graph_3``) of the user's ``frame``."""
        with self._lock:
            self._write(f"{name}.dynamo.txt", readable(gm))
            self._graphs[name] = {"frame": frame, "dynamo": f"{name}.dynamo.txt"}
            self._write_index()

    def signature(
        self, record: CompileRecord, aten: str, executables: Sequence[Executable], summary: str
    ) -> None:
        """One compiled signature: its ATen graph (``readable`` text), programs and summary."""
        with self._lock:
            self._write(f"{record.name}.aten.txt", aten)
            programs = self._programs(record.name, executables)
            self._write(f"{record.name}.summary.txt", summary + "\n")
            self._records[record.name] = (record, programs)
            self._graphs.setdefault(record.graph, {"frame": None, "dynamo": None})
            self._write_index()

    def partition(
        self, record: CompileRecord, part: str, executables: Sequence[Executable], summary: str
    ) -> None:
        """The programs of the XLA partition ``part`` of a split signature, and its new summary."""
        with self._lock:
            entry = self._records.get(record.name)
            programs = self._programs(f"{record.name}.{part}", executables)
            if entry is not None:
                for program, files in programs.items():
                    entry[1][f"{part}.{program}"] = files
            self._write(f"{record.name}.summary.txt", summary + "\n")
            self._write_index()

    # -- helpers -----------------------------------------------------------------------------
    def _programs(self, base: str, executables: Sequence[Executable]) -> dict[str, list[str]]:
        programs = {}
        for ex in executables:
            texts = (
                ex.traced.jaxpr.pretty_print(use_color=False),
                ex.lowered.as_text(),
                ex.compiled.as_text(),
            )
            files = []
            for (_, suffix), text in zip(_PROGRAM_FILES, texts):
                files.append(f"{base}.{ex.name}.{suffix}")
                self._write(files[-1], text)
            programs[ex.name] = files
        return programs

    def _write(self, name: str, text: str) -> None:
        if not self._created:
            self._create()
        (self.directory / name).write_text(text)

    def _create(self) -> None:
        """Make this run's folder: a new one, never another run's (same second and pid)."""
        self.root.mkdir(parents=True, exist_ok=True)
        base, n = self.directory, 1
        while True:
            try:
                self.directory.mkdir()
                break
            except FileExistsError:
                n += 1
                self.directory = base.with_name(f"{base.name}-{n}")
        self._created = True
        log.info("dumps of this process go to %s", self.directory)

    def index(self) -> dict[str, Any]:
        """What ``index.json`` holds: the run, and per graph its signatures, stages and files."""
        graphs = []
        for name, graph in sorted(self._graphs.items(), key=lambda kv: _number(kv[0])):
            signatures = []
            for sig, (record, programs) in sorted(self._records.items()):
                if record.graph != name:
                    continue
                stages = [
                    {"stage": stage, "seconds": round(seconds, 4)}
                    for stage, seconds in record.times.items()
                ]
                files = {"aten": f"{sig}.aten.txt", "summary": f"{sig}.summary.txt"}
                signatures.append(
                    {
                        "name": sig,
                        "inputs": record.inputs,
                        "mode": record.mode,
                        "stages": stages,
                        "total_seconds": round(record.total_time, 4),
                        "cost": record.cost,
                        "partitions": sorted(record.partitions),
                        "files": files,
                        "programs": {
                            program: dict(zip((s for s, _ in _PROGRAM_FILES), paths))
                            for program, paths in programs.items()
                        },
                    }
                )
            graphs.append({"name": name, **graph, "signatures": signatures})
        return {
            "torch2xla": _version(),
            "torch": torch.__version__,
            "jax": _jax_version(),
            "pid": os.getpid(),
            "started": self.started,
            "command": list(sys.argv),
            "graphs": graphs,
        }

    def _write_index(self) -> None:
        index = self.index()
        self._write("index.json", json.dumps(index, indent=1) + "\n")
        self._write("index.html", _index_html(index))


_runs: dict[Path, DumpRun] = {}
_runs_lock = threading.Lock()


def _dump_path(option: str | os.PathLike | None) -> str | os.PathLike | None:
    """The option's directory, else ``TORCH2XLA_DUMP_DIR``; None: no dumps."""
    return option or os.environ.get(DUMP_DIR_ENV) or None


def dumping(option: str | os.PathLike | None) -> bool:
    """Whether the option or ``TORCH2XLA_DUMP_DIR`` asks for dumps."""
    return _dump_path(option) is not None


def dump_run(option: str | os.PathLike | None) -> DumpRun | None:
    """This process's dump folder under the option's directory, else under
    ``TORCH2XLA_DUMP_DIR``; None: no dumps."""
    path = _dump_path(option)
    if path is None:
        return None
    root = Path(path).expanduser().absolute()
    with _runs_lock:
        run = _runs.get(root)
        if run is None:
            run = _runs[root] = DumpRun(root)
        return run


def readable(gm: torch.fx.GraphModule) -> str:
    return gm.print_readable(print_output=False, include_stride=False, include_device=True)


def _number(name: str) -> int:
    tail = name.rpartition("_")[2]
    return int(tail) if tail.isdigit() else -1


def _version() -> str:
    try:
        return importlib.metadata.version("torch2xla")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _jax_version() -> str:
    import jax

    return jax.__version__


def _index_html(index: dict[str, Any]) -> str:
    e = html.escape

    def link(name: str | None, label: str | None = None) -> str:
        return f"<a href='{e(name)}'>{e(label or name)}</a>" if name else "-"

    rows = []
    for g in index["graphs"]:
        rows.append(
            f"<h2>{e(g['name'])} <small>{e(g.get('frame') or '')}</small></h2>"
            f"<p>Dynamo graph: {link(g.get('dynamo'))}</p>"
        )
        if not g["signatures"]:
            continue
        rows.append(
            "<table border='1' cellspacing='0' cellpadding='3'><tr><th>signature</th>"
            "<th>mode</th><th>inputs</th><th>compile time</th><th>files</th></tr>"
        )
        for s in g["signatures"]:
            times = ", ".join(f"{t['stage']} {t['seconds']:.2f}s" for t in s["stages"])
            files = [link(s["files"]["summary"], "summary"), link(s["files"]["aten"], "aten")]
            for program, paths in s["programs"].items():
                files.append(
                    f"{e(program)}: " + " ".join(link(path, stage) for stage, path in paths.items())
                )
            rows.append(
                f"<tr><td>{e(s['name'])}</td><td>{e(s['mode'])}</td>"
                f"<td><code>{e(s['inputs'])}</code></td>"
                f"<td>{e(times)} (total {s['total_seconds']:.2f}s)</td>"
                f"<td>{'<br>'.join(files)}</td></tr>"
            )
        rows.append("</table>")
    head = (
        f"torch2xla {e(index['torch2xla'])}, torch {e(index['torch'])}, jax {e(index['jax'])}; "
        f"pid {index['pid']}, started {e(index['started'])}: <code>"
        f"{e(' '.join(index['command']))}</code>"
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>torch2xla dumps</title>"
        f"<h1>torch2xla dumps</h1><p>{head}</p>{''.join(rows)}\n"
    )
