"""The compile stages of one signature of a graph: timing, progress, and the ahead-of-time compile.

One signature of a Dynamo graph compiles in stages: Dynamo's capture (before the backend is
called, so only ``explain`` can time it), export to ATen (``lowering``), graph ``passes``, JAX
``tracing``, ``stablehlo`` emission and XLA's compile (``xla``). ``CompiledGraph._build`` runs
them inside a ``Compilation``, which times each stage, logs progress through the
``torch2xla.compile`` logger when a compile runs long, and shows a progress bar in Jupyter.

``precompile`` traces, lowers and compiles a program ahead of its first call, with exactly the
arguments the first call will pass; JAX keeps the executable in the cache that the call then
hits, so the split into stages costs nothing.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import logging
import operator
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
import torch

from torch2xla._errors import (
    CompileError,
    LoweringError,
    OpError,
    Unsupported,
    full_traceback,
    lowering_failed,
    source_line,
)
from torch2xla._options import env_flag
from torch2xla.capture._passes import run_passes
from torch2xla.debug._dump import DumpRun, dump_run, readable
from torch2xla.guards import _persistent
from torch2xla.guards._cache import CompileRecord  # (one record: cache_info's, explain's, dumps')
from torch2xla.runtime._interop import dtype_name
from torch2xla.runtime._jax_scope import x64

if TYPE_CHECKING:
    from typing import Self  # Python 3.11+; annotations only

log = logging.getLogger("torch2xla.compile")

STAGES = ("capture", "lowering", "passes", "tracing", "stablehlo", "xla")

# A compile that runs longer than PROGRESS_AFTER_S seconds reports its progress through the
# logger every PROGRESS_EVERY_S seconds, and, refreshed every PROGRESS_TICK_S seconds, as a
# progress bar in Jupyter or one status line on an interactive terminal's stderr. Neither shows
# in CI (the CI variable) or where stderr is not a terminal (logs, pytest); TORCH2XLA_PROGRESS=0
# turns both off, =1 on (a terminal line even where stderr is not a terminal).
PROGRESS_AFTER_S = 3.0
PROGRESS_EVERY_S = 10.0
PROGRESS_TICK_S = 0.5
PROGRESS_ENV = "TORCH2XLA_PROGRESS"


_DETAILED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "torch2xla_detailed", default=False
)


@contextlib.contextmanager
def detailed() -> Iterator[None]:
    """Within this context, compiles also build the backward ahead of time (for ``explain``)."""
    token = _DETAILED.set(True)
    try:
        yield
    finally:
        _DETAILED.reset(token)


def is_detailed() -> bool:
    return _DETAILED.get()


@dataclasses.dataclass(frozen=True)
class OpPlacement:
    """Where one ATen node of a compiled graph runs.

    Attributes:
        node: the node's name in the ATen graph.
        target: the ATen overload, e.g. ``aten.mm.default``.
        where: ``"xla"`` or ``"eager"``.
        reason: why the node runs in eager PyTorch (None when it runs in XLA).
        source: ``file:line: code`` of the user code that produced the node.
    """

    node: str
    target: str
    where: str
    reason: str | None
    source: str

    def place(self, eager: dict[str, str]) -> OpPlacement:
        """This node in eager PyTorch if ``eager`` (node name -> reason) lists it."""
        reason = eager.get(self.node)
        return self if reason is None else dataclasses.replace(self, where="eager", reason=reason)


@dataclasses.dataclass(frozen=True)
class Executable:
    """One XLA executable of a signature (``inference``, ``forward`` or ``backward``)."""

    name: str
    traced: Any  # jax.stages.Traced
    lowered: Any  # jax.stages.Lowered
    compiled: Any  # jax.stages.Compiled


def wrapped_module() -> Any:
    """The module Dynamo is compiling through its wrapper frame, while it calls the backend
    (``torch.compile`` of a ``torch.nn`` module such as ``nn.Sequential``), else None."""
    from torch._dynamo import symbolic_convert

    from torch2xla.guards._log import is_dynamo_wrapper

    tx = getattr(symbolic_convert.tls, "current_tx", None)
    code = getattr(tx, "f_code", None)
    if code is None or not is_dynamo_wrapper(code):
        return None
    fn = (getattr(tx, "f_locals", None) or {}).get("fn")
    return fn if isinstance(fn, torch.nn.Module) else None


def describe_signature(args: Sequence, names: Sequence[str] = ()) -> str:
    """``x: f32[8, 32], n: i64[], 3`` for a call's arguments (named where ``names`` has one)."""
    parts = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            dtype = dtype_name(a.dtype, "short")
            grad = "*" if a.requires_grad else ""
            part = f"{dtype}[{', '.join(str(s) for s in a.shape)}]{grad}"
        else:
            part = repr(a)
        parts.append(f"{names[i]}: {part}" if i < len(names) and names[i] else part)
    return ", ".join(parts)


def input_names(gm: torch.fx.GraphModule, wrapped: Any = None) -> list[str]:
    """The user's name of each input of a Dynamo graph: ``x``, ``self.fc1.weight``, ``x.size()[0]``
    (from the source Dynamo records for it), else the placeholder's name; '' for Dynamo's own
    (``___stack0``: a value live across a graph break). Dynamo drops the sources once the
    backend returns: call it from the backend. ``wrapped``: the module Dynamo compiled through
    its wrapper frame (``inner(*args, **kwargs)`` around ``fn``), whose names become ``self``
    and its ``forward``'s parameters."""
    params: list[str] = []
    if wrapped is not None:
        try:
            params = [
                p.name
                for p in inspect.signature(wrapped.forward).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
        except (TypeError, ValueError):  # no signature to read
            params = []
    names = []
    for node in gm.graph.find_nodes(op="placeholder"):
        source = getattr(node.meta.get("grapharg"), "source", None)
        name = getattr(source, "name", None)
        name = name() if callable(name) else name  # (a method before torch 2.13)
        if not isinstance(name, str):
            names.append(node.name)
            continue
        name = re.sub(r"^[LG]\['([^']+)'\]", r"\1", name)
        name = re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", name)
        if wrapped is not None:
            name = re.sub(r"^fn\b", "self", name)
            name = re.sub(r"^kwargs\['([^']+)'\]", r"\1", name)
            name = re.sub(
                r"^args\[(\d+)\]",
                lambda m: params[int(m[1])] if int(m[1]) < len(params) else m[0],
                name,
            )
        names.append("" if name.startswith("___") else name)
    return names


def placements(gm: torch.fx.GraphModule) -> list[OpPlacement]:
    """Each call node of the ATen graph ``gm``, placed in XLA (see ``OpPlacement.place``)."""
    return [
        OpPlacement(node.name, str(node.target), "xla", None, source_line(node))
        for node in gm.graph.nodes
        if node.op == "call_function" and node.target is not operator.getitem
    ]


class Compilation:
    """Times the stages of one compile and reports progress while it runs long.

    Use as a context manager around the whole compile, and ``stage(name)`` around each stage.
    """

    def __init__(self, record: CompileRecord, part: str = "") -> None:
        # graph_0.s1, or graph_0.s1:fused_0 for an XLA partition of a split graph
        self.label = record.name + (f":{part}" if part else "")
        self.times: dict[str, float] = {}
        self.current: str | None = None
        self.failed: str | None = None
        self._start = 0.0
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None
        self._bar: _NotebookBar | None = None

    def __enter__(self) -> Self:
        self._start = time.perf_counter()
        self._watcher = threading.Thread(
            target=self._watch, name=f"torch2xla-progress-{self.label}", daemon=True
        )
        self._watcher.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()
        elapsed = time.perf_counter() - self._start
        if self._bar is not None:
            self._bar.finish(self, elapsed, failed=exc_type is not None)
        if exc_type is None:
            level = logging.INFO if elapsed >= PROGRESS_AFTER_S else logging.DEBUG
            log.log(
                level, "%s compiled in %.2fs (%s)", self.label, elapsed, format_times(self.times)
            )

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the stage ``name`` (one of ``STAGES``); time spent twice adds up."""
        self.current = name
        log.debug("%s: %s", self.label, name)
        t0 = time.perf_counter()
        try:
            yield
        except BaseException:
            self.failed = name
            raise
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0
            self.current = None

    def _watch(self) -> None:
        if self._done.wait(PROGRESS_AFTER_S):
            return
        last_log = -PROGRESS_EVERY_S
        bar_tried = False
        while True:
            elapsed = time.perf_counter() - self._start
            if elapsed - last_log >= PROGRESS_EVERY_S:
                last_log = elapsed
                log.info(
                    "compiling %s: stage %s, %.1fs elapsed",
                    self.label,
                    self.current or "-",
                    elapsed,
                )
            if not bar_tried:
                bar_tried = True
                self._bar = progress_display()
            if self._bar is not None:
                self._bar.update(self, elapsed)
            if self._done.wait(PROGRESS_TICK_S):
                return


def format_times(times: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}s" for k, v in times.items()) or "no stages"


def progress_display() -> _NotebookBar | _TerminalLine | None:
    """Where a long compile shows its progress: a Jupyter bar, a terminal line, or nowhere."""
    switch = env_flag(PROGRESS_ENV, None)
    if switch is False:
        return None
    forced = bool(switch)
    if not forced and os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        return None
    return _NotebookBar.create() or _TerminalLine.create(forced)


class _TerminalLine:
    """One status line on stderr, rewritten in place (``\\r``) while the compile runs."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._width = 0

    @classmethod
    def create(cls, forced: bool = False) -> _TerminalLine | None:
        stream = sys.stderr
        isatty = getattr(stream, "isatty", None)
        if stream is None or not (forced or (isatty is not None and isatty())):
            return None
        return cls(stream)

    def _show(self, text: str, end: str = "") -> None:
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self._stream.write(f"\r{text}{pad}{end}")
        self._stream.flush()

    def update(self, comp: Compilation, elapsed: float) -> None:
        self._show(
            f"torch2xla: compiling {comp.label}: stage {comp.current or '-'}, {elapsed:.0f}s"
        )

    def finish(self, comp: Compilation, elapsed: float, failed: bool) -> None:
        status = "failed" if failed else "compiled"
        self._show(f"torch2xla: {comp.label} {status} in {elapsed:.1f}s", end="\n")


class _NotebookBar:
    """A progress bar in the output of the running Jupyter cell (IPython display)."""

    def __init__(self, handle: Any, html: type) -> None:
        self._handle = handle
        self._html = html

    @classmethod
    def create(cls) -> _NotebookBar | None:
        # Only inside a running IPython kernel; never import IPython ourselves.
        ipython = sys.modules.get("IPython")
        if ipython is None:
            return None
        shell = ipython.get_ipython()
        if shell is None or not hasattr(shell, "kernel"):
            return None
        from IPython.display import HTML, display

        return cls(display(HTML(""), display_id=True), HTML)

    def update(self, comp: Compilation, elapsed: float) -> None:
        self._handle.update(self._html(render_bar(comp, elapsed)))

    def finish(self, comp: Compilation, elapsed: float, failed: bool) -> None:
        status = "failed" if failed else "done"
        self._handle.update(self._html(render_bar(comp, elapsed, status=status)))


def render_bar(comp: Compilation, elapsed: float, status: str | None = None) -> str:
    """HTML of the progress bar: one step per stage, the current stage and the time spent."""
    steps = STAGES[1:]
    done = len([s for s in steps if s in comp.times and s != comp.current])
    label = status or f"stage {comp.current or '-'}"
    if status == "done":
        done = len(steps)
    return (
        f"<div><code>torch2xla</code> compiling <b>{comp.label}</b>: "
        f'<progress value="{done}" max="{len(steps)}"></progress> {label}, {elapsed:.1f}s</div>'
    )


def precompile(
    program: Any, inputs: Sequence, comp: Compilation, *, backward: bool
) -> tuple[str, list[Executable]]:
    """Trace, lower and compile ``program`` for the call it is about to get, ahead of time.

    Follows the path ``XlaProgram.__call__`` takes for ``inputs`` under the current grad mode:
    the inference executable, or the training forward (and, if ``backward``, the backward).
    Returns the mode (``inference`` or ``training``) and the executables.
    """
    tensors = [inputs[i] for i in program.tensor_pos]
    if program.foreign_in:  # as the call moves them (a tensor of another GPU: by torch)
        tensors = program.move_foreign(tensors)
    seed = np.uint32(0) if program.rng else None
    diff_in: tuple[int, ...] = ()
    if torch.is_grad_enabled():
        diff_in = tuple(
            k
            for k, t in enumerate(tensors)
            if t.requires_grad  # float or complex, by torch's rule
        )
    with x64(), program.placement():
        views = program.jax_inputs(tensors)
        target = (program.compiler_options, program.device)
        if not (diff_in and program.diff_out):
            return "inference", [_stages(program._infer, (seed, *views), comp, "inference", target)]
        fwd, bwd, _ = program.train_fns(diff_in)
        diff_set = set(diff_in)
        jdiff = [views[k] for k in diff_in]
        jrest = [v for k, v in enumerate(views) if k not in diff_set]
        forward = _stages(fwd, (seed, jdiff, jrest), comp, "forward", target)
        if not backward:
            return "training", [forward]
        douts, _, vjp_fn = forward.traced.out_info
        cts = [jax.ShapeDtypeStruct(d.shape, d.dtype) for d in douts]
        return "training", [forward, _stages(bwd, (vjp_fn, cts), comp, "backward", target)]


def _stages(jitted: Any, args: tuple, comp: Compilation, name: str, target: tuple) -> Executable:
    """Trace, lower and compile ``jitted`` (through the persistent cache: ``target`` is the
    program's compiler options and device); an ``_Aot`` then calls this executable."""
    with comp.stage("tracing"):
        traced = jitted.trace(*args)
    with comp.stage("stablehlo"):
        lowered = traced.lower()
    with comp.stage("xla"):
        compiled, key = _persistent.compile_any(lowered, *target)
    adopt = getattr(jitted, "adopt", None)
    if adopt is not None:
        adopt(compiled, key)
    return Executable(name, traced, lowered, compiled)


def cost_analysis(executables: Sequence[Executable]) -> dict[str, float] | None:
    """XLA's estimate of flops, transcendentals and bytes accessed, summed over executables."""
    total: dict[str, float] = {}
    for ex in executables:
        cost = ex.compiled.cost_analysis()
        if isinstance(cost, list | tuple):  # older JAX: one dict per device
            cost = cost[0] if cost else {}
        for key in ("flops", "transcendentals", "bytes accessed"):
            if key in (cost or {}):
                total[key] = total.get(key, 0.0) + float(cost[key])
    return total or None


def format_record(record: CompileRecord) -> str:
    """Plain-text summary of one compiled signature: mode, times, cost and op placement."""
    n_eager = sum(1 for op in record.ops if op.where == "eager")
    lines = [
        f"{record.name}: {record.mode}, inputs ({record.inputs})"
        + (" (* requires grad)" if "]*" in record.inputs else ""),
        f"  compile time: {format_times(record.times)} (total {record.total_time:.2f}s)",
    ]
    if record.mode == "split":
        lines[-1] += f"; {format_partitions(record.partitions, record.pieces)}"
    if record.cost:
        lines.append(f"  XLA cost: {format_cost(record.cost)}")
    lines.append(
        f"  ATen ops: {len(record.ops)} ({len(record.ops) - n_eager} in XLA, "
        f"{n_eager} in eager PyTorch)"
    )
    for target, count, where, reason, sources in group_ops(record.ops):
        line = f"    {count:>4} x {target}  [{where}]"
        if reason:
            line += f"  {reason}"
        lines.append(line)
        if where == "eager":
            lines.extend(f"           at {s}" for s in sources)
    return "\n".join(lines)


def format_partitions(partitions: dict[str, bool], pieces: Sequence[str] = ()) -> str:
    """``2 XLA partitions, compiled on first call`` (or ``compile on first call`` before it);
    for a graph cut around data-dependent ops, the graphs its ``pieces`` compile as."""
    if pieces:
        return f"XLA pieces compiled as graphs of their own: {', '.join(pieces)}"
    n = len(partitions)
    head = f"{n} XLA partition{'s' * (n != 1)}"
    if all(partitions.values()):
        return f"{head}, compiled on first call (included above)"
    return f"{head}, compile{'s' * (n == 1)} on first call"


def group_ops(ops: Sequence[OpPlacement]) -> list[tuple[str, int, str, str | None, list[str]]]:
    """(target, count, where, reason, distinct sources) per op and placement, eager ones first."""
    groups: dict[tuple[str, str, str | None], list[str]] = {}
    for op in ops:
        groups.setdefault((op.target, op.where, op.reason), []).append(op.source)
    rows = [
        (target, len(srcs), where, reason, list(dict.fromkeys(srcs)))
        for (target, where, reason), srcs in groups.items()
    ]
    rows.sort(key=lambda r: (r[2] != "eager", -r[1], r[0]))
    return rows


def format_cost(cost: dict[str, float]) -> str:
    parts = []
    if "flops" in cost:
        parts.append(f"{_si(cost['flops'])}FLOP")
    if "transcendentals" in cost:
        parts.append(f"{_si(cost['transcendentals'])}transcendentals")
    if "bytes accessed" in cost:
        parts.append(f"{_si(cost['bytes accessed'])}B accessed")
    return ", ".join(parts)


def _si(x: float) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} "


class RecordLog:
    """The ``CompileRecord`` of each of a graph's most recently built signatures (for
    ``explain``); the graph's cache keeps every record (for ``cache_info``)."""

    def __init__(self, maxlen: int) -> None:
        self._records: collections.deque[CompileRecord] = collections.deque(maxlen=maxlen)

    def add(self, record: CompileRecord) -> None:
        if len(self._records) == self._records.maxlen and self._records:
            # The oldest leaves explain's view: ``cache_info`` keeps its record without the
            # per-node placements, so that a graph compiled for many sizes does not hoard them.
            self._records[0].ops = []
        self._records.append(record)

    def __iter__(self) -> Iterator[CompileRecord]:
        return iter(list(self._records))

    def __len__(self) -> int:
        return len(self._records)


class Build:
    """One signature's compile inside ``CompiledGraph._build``: stages, record, dumps, errors.

    ``with Build(graph, args) as b:`` times the stages run through ``b.run``/``b.passes``/
    ``b.program``, turns failures into errors that name the graph, the stage, the ATen node and
    the user's source line, and on ``b.done(entry)`` records the signature and writes dumps.
    """

    def __init__(self, graph: Any, args: Sequence) -> None:
        self.graph = graph
        self.options = graph.options
        # The record ``GraphGuards`` made for this compile (a new one for a build of its own).
        self.record = graph.guards.compiling or graph.guards.new_record()
        self.record.inputs = describe_signature(args, graph.input_names)
        self.comp = Compilation(self.record)
        self.dump = dump_run(self.options.dump_dir)
        self.executables: list[Executable] = []
        self.aten_text: str | None = None

    def __enter__(self) -> Self:
        if self.dump is not None and self.record.index == 0:
            self.dump.graph(self.graph.name, self.graph.guards.context.frame, self.graph.gm)
        self.comp.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.comp.__exit__(exc_type, exc, tb)
        if exc is None or not isinstance(exc, Exception):
            return
        new = self._translate(exc)
        if new is not None:
            if full_traceback():
                raise new from exc
            raise new from None

    def run(self, stage: str, fn: Callable, *args: Any) -> Any:
        with self.comp.stage(stage):
            return fn(*args)

    def passes(self, lowered: Any) -> Any:
        """Run the built-in and the user's graph passes on the lowered graph."""
        with self.comp.stage("passes"):
            gm = run_passes(lowered.gm, self.options.passes, self.graph.name)
        # Taken now: splitting for eager fallback rewrites the graph in place.
        self.record.ops = placements(gm)
        if self.dump is not None:
            self.aten_text = readable(gm)
        return dataclasses.replace(lowered, gm=gm)

    def eager_ops(self, gm: torch.fx.GraphModule, unsupported: Sequence) -> list:
        """``Unsupported`` entries for nodes whose op the user listed in ``eager_ops``."""
        if not self.options.eager_ops:
            return []
        seen = {u.node for u in unsupported}
        return [
            Unsupported(n, "listed in options['eager_ops']", by_design=True)
            for n in gm.graph.nodes
            if n.op == "call_function" and n.target in self.options.eager_ops and n not in seen
        ]

    def program(self, program: Any, inputs: Sequence) -> Any:
        """Name the whole-graph ``program`` and compile it ahead of its first call."""
        program.label = f"torch2xla:{self.graph.name}"
        backward = is_detailed() or self.dump is not None
        self.record.mode, self.executables = precompile(
            program, inputs, self.comp, backward=backward
        )
        self.record.cost = cost_analysis(self.executables)
        return program

    def split(self, split_gm: torch.fx.GraphModule, names: Sequence[str]) -> None:
        """Name the XLA partitions of a graph some of whose ops run in eager PyTorch, and have
        each compile ahead of its first call, timed into this signature's record."""
        self.record.mode = "split"
        backward = is_detailed() or self.dump is not None
        for name in names:
            sub = getattr(split_gm, name)
            sub.program.label = f"torch2xla:{self.graph.name}:{name}"
            sub.first_call = functools.partial(
                _compile_partition, self.record, name, backward, self.dump
            )
            self.record.partitions[name] = False

    def done(self, entry: Any, unsupported: Sequence = ()) -> Any:
        """Record the signature (and dump it); returns ``entry``."""
        self.record.times = dict(self.comp.times)
        eager = {u.node.name: u.reason for u in unsupported}
        if eager:
            self.record.ops = [op.place(eager) for op in self.record.ops]
        if self.dump is not None and self.aten_text is not None:
            self.dump.signature(
                self.record, self.aten_text, self.executables, format_record(self.record)
            )
        self.executables = []
        self.graph.records.add(self.record)
        return entry

    def _translate(self, exc: Exception) -> Exception | None:
        name, stage = self.graph.name, self.comp.failed
        if isinstance(exc, LoweringError):
            return lowering_failed(exc, name)
        if isinstance(exc, CompileError | OpError):  # (OpError: eager's own error, as it is)
            return None
        if stage == "lowering":
            return CompileError(
                f"torch2xla: {name} could not be exported to ATen (AOTAutograd failed): "
                f"{type(exc).__name__}: {exc}\nWhat to do: the Dynamo graph uses something "
                "AOTAutograd cannot functionalize; run that code eagerly with "
                "torch.compiler.disable, and please report it.",
                graph=name,
                stage=stage,
            )
        if stage in ("tracing", "stablehlo", "xla"):
            return CompileError(
                f"torch2xla: {name} failed in stage {stage}: {type(exc).__name__}: {exc}\n"
                "What to do: this is a bug in torch2xla; please report it. To see what was "
                "being compiled, set options={'dump_dir': ...} or TORCH2XLA_DUMP_DIR.",
                graph=name,
                stage=stage,
            )
        return None


def _compile_partition(
    record: CompileRecord,
    name: str,
    backward: bool,
    dump: DumpRun | None,
    program: Any,
    args: Sequence,
) -> None:
    """Compile the XLA partition ``name`` of a split graph ahead of its first call (``args``),
    adding its stage times and cost to the signature's ``record`` and dumping its IRs."""
    with Compilation(record, part=name) as comp:
        _, executables = precompile(program, args, comp, backward=backward)
    for stage, seconds in comp.times.items():
        record.times[stage] = record.times.get(stage, 0.0) + seconds
    cost = cost_analysis(executables)
    if cost:
        total = record.cost or {}
        record.cost = {k: total.get(k, 0.0) + cost.get(k, 0.0) for k in {*total, *cost}}
    record.partitions[name] = True
    if dump is not None:
        dump.partition(record, name, executables, format_record(record))
