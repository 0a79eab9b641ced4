"""``torch2xla.explain``: what Dynamo captured, what ran in XLA, what it cost to compile.

The report combines Dynamo's view (graphs, graph breaks and their reasons, recompiles; the
same data ``torch._dynamo.explain`` collects, through ``ExplainWithBackend``) with torch2xla's
(per graph and input signature: the ATen ops and where each runs, with the user's source line
for those that fall back to eager PyTorch; compile time per stage; XLA's cost analysis; the
graph's cache). It prints as text and renders as HTML in Jupyter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._dynamo.backends.debugging import ExplainWithBackend

from torch2xla._backend import CompiledGraph, xla_backend
from torch2xla._options import Options
from torch2xla.debug._stages import (
    STAGES,
    CompileRecord,
    detailed,
    format_cost,
    format_partitions,
    format_record,
    group_ops,
)


@dataclasses.dataclass(frozen=True)
class GraphBreak:
    """A graph break: why Dynamo cut the graph, and where in the user's code."""

    reason: str
    frames: tuple[str, ...]

    @property
    def summary(self) -> str:
        """Dynamo's reason without its developer debug context."""
        lines = [line.strip() for line in self.reason.splitlines()]
        return "\n".join(
            line for line in lines if line and not line.startswith("Developer debug context")
        )

    @classmethod
    def from_dynamo(cls, reason: Any) -> GraphBreak:
        frames = tuple(
            f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
            for f in reason.user_stack
        )
        return cls(str(reason.reason).strip(), frames)


@dataclasses.dataclass
class GraphReport:
    """One Dynamo graph: its FX graph, Dynamo capture time and its compiled signatures.

    Attributes:
        name: ``graph_N``, as in dumps, profiler ranges and errors.
        gm: the FX graph Dynamo captured.
        capture_time: seconds Dynamo spent tracing the frame that produced the graph.
        compiled: the backend's ``CompiledGraph`` (its ``records`` are the signatures).
        piece_of: for an XLA piece of a graph cut around data-dependent ops (a graph of its
            own, not Dynamo's), the name of the graph it is a piece of.
    """

    name: str
    gm: torch.fx.GraphModule
    capture_time: float | None
    compiled: CompiledGraph
    piece_of: str | None = None

    @property
    def records(self) -> list[CompileRecord]:
        return list(self.compiled.records)

    @property
    def frame(self) -> str | None:
        """The user's function or module the graph came from: ``'Net.forward' (model.py:7)``."""
        return self.compiled.guards.context.frame

    @property
    def title(self) -> str:
        title = f"{self.name} {self.frame}" if self.frame else self.name
        return f"{title}, a piece of {self.piece_of}" if self.piece_of else title

    @property
    def dynamo_ops(self) -> int:
        return sum(1 for n in self.gm.graph.nodes if n.op in ("call_function", "call_method"))

    @property
    def cache_entries(self) -> int:
        return len(self.compiled.cache)

    @property
    def recompile_reasons(self) -> list[str]:
        """Why this graph compiled more than one signature (from torch2xla's guards, if any)."""
        reasons = getattr(self.compiled, "recompile_reasons", None)
        return [str(r) for r in reasons] if reasons else []


class Explanation:
    """A report on compiling ``fn`` with ``backend="xla"`` and calling it.

    ``torch2xla.explain(fn, *args, **kwargs)`` builds one and runs ``fn`` once. Construct it
    directly to pass ``mode``, ``options`` or ``dynamic`` as ``torch.compile`` takes them, then
    call ``run`` once per set of inputs: each run adds the graphs, signatures and recompiles
    that the call caused.

    Attributes:
        graphs: one ``GraphReport`` per Dynamo graph, in capture order, each followed by
            its XLA pieces where data-dependent ops cut it (``piece_of`` set).
        breaks: the graph breaks, with Dynamo's reason and the user's source line.
        recompiles: Dynamo's reasons for recompiling a frame (guard failures).
        output: what the last ``run`` returned.

    Example::

        report = torch2xla.explain(model, x)
        print(report)                       # or display it in a notebook
        report.run(x_longer)                # see what a new sequence length recompiles
    """

    def __init__(
        self,
        fn: Callable,
        *,
        mode: str | None = None,
        options: dict | None = None,
        dynamic: bool | None = None,
    ) -> None:
        Options.parse(mode, options)  # (an OptionError now, not Dynamo's wrapping of it)
        self.fn = _unwrap(fn)
        self.graphs: list[GraphReport] = []
        self.breaks: list[GraphBreak] = []
        self.recompiles: list[str] = []
        self.output: Any = None
        self._frame_times: list[float] = []

        def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
            compiled = xla_backend(gm, example_inputs, mode=mode, options=options)
            if not isinstance(compiled, CompiledGraph):
                raise TypeError(
                    f"torch2xla.explain expected the backend to return a CompiledGraph, got "
                    f"{type(compiled).__name__}"
                )
            self.graphs.append(GraphReport(compiled.name, gm, None, compiled))
            return compiled

        self._explainer = ExplainWithBackend(backend)
        kwargs: dict[str, Any] = {"guard_fail_fn": self._on_guard_fail, "dynamic": dynamic}
        if "isolate_recompiles" in inspect.signature(torch._dynamo.eval_frame._optimize).parameters:
            # explain's own compiles must not use up the recompile limit of fn's frames.
            kwargs["isolate_recompiles"] = True
        self._compiled = torch._dynamo.optimize(self._explainer, **kwargs)(self.fn)

    def _on_guard_fail(self, failure: Any) -> None:
        self.recompiles.append(str(failure.reason))

    def run(self, *args: Any, **kwargs: Any) -> Explanation:
        """Call ``fn(*args, **kwargs)`` through the compiled function and record what happened."""
        seen_breaks = len(self._explainer.break_reasons)
        counted = dict(_break_counter())
        with _capture_timer(self), detailed():
            self.output = self._compiled(*args, **kwargs)
        new = [GraphBreak.from_dynamo(r) for r in self._explainer.break_reasons[seen_breaks:]]
        # Breaks that cut no graph (nothing to compile before them) have no compiled graph to
        # carry their reason: Dynamo only counts them, without the user's line.
        known = {_first_lines(b.reason) for b in new}
        for reason, count in _break_counter().items():
            if count > counted.get(reason, 0) and _first_lines(reason) not in known:
                new.append(GraphBreak(str(reason).strip(), ()))
        self.breaks.extend(new)
        self._add_pieces()
        return self

    def _add_pieces(self) -> None:
        """Report the XLA pieces of graphs cut around data-dependent ops (made at the graph's
        first call, each a graph of its own) after the graph they are pieces of."""
        known = {g.name for g in self.graphs}
        graphs: list[GraphReport] = []
        for g in self.graphs:
            graphs.append(g)
            cut = getattr(g.compiled, "_cut", None)
            if g.piece_of is not None or cut is None:
                continue
            for module in cut.top.children():
                piece = getattr(module, "compiled", None)
                if isinstance(piece, CompiledGraph) and piece.name not in known:
                    graphs.append(GraphReport(piece.name, piece.gm, None, piece, g.name))
        self.graphs[:] = graphs

    @property
    def _dynamo_graphs(self) -> int:
        return sum(1 for g in self.graphs if g.piece_of is None)

    # -- rendering ---------------------------------------------------------------------------
    def __str__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        n = self._dynamo_graphs
        lines = [
            f"torch2xla.explain: {name}",
            (
                f"Dynamo captured {n} graph{'s' * (n != 1)} with {len(self.breaks)} graph "
                f"break{'s' * (len(self.breaks) != 1)}."
            ),
        ]
        for i, br in enumerate(self.breaks, 1):
            first, *rest = br.summary.splitlines() or [""]
            lines.append(f"  break {i}: {first}")
            lines.extend(
                f"      at {f}" for f in br.frames[-1:] or ["(Dynamo kept no source line)"]
            )
            lines.extend(f"      {line}" for line in rest)
        for g in self.graphs:
            lines.append("")
            capture = f", Dynamo capture {g.capture_time:.2f}s" if g.capture_time else ""
            lines.append(
                f"{g.title}: {g.dynamo_ops} Dynamo ops{capture}; "
                f"cache: {g.cache_entries} entr{'y' if g.cache_entries == 1 else 'ies'}"
            )
            if not g.records:
                lines.append("  (not compiled yet: the graph was never called)")
            for rec in g.records:
                lines.extend("  " + line for line in format_record(rec).splitlines())
            for reason in g.recompile_reasons:
                lines.append(f"  recompiled: {reason}")
        lines.append("")
        if self.recompiles:
            lines.append("Dynamo recompiles:")
            lines.extend(f"  {r}" for r in self.recompiles)
        else:
            lines.append("Dynamo recompiles: none")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<torch2xla Explanation: {self._dynamo_graphs} graphs, {len(self.breaks)} breaks>"

    def _repr_html_(self) -> str:
        """The report as HTML (Jupyter): the text's content, with tables."""
        e = html.escape
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        n, nb = self._dynamo_graphs, len(self.breaks)
        parts = [
            "<div class='torch2xla-explain'>",
            f"<h3>torch2xla.explain: <code>{e(name)}</code></h3>",
            (
                f"<p>Dynamo captured <b>{n}</b> graph{'s' * (n != 1)} with <b>{nb}</b> graph "
                f"break{'s' * (nb != 1)}.</p>"
            ),
        ]
        if self.breaks:
            parts.append("<ol>")
            for br in self.breaks:
                first, *rest = br.summary.splitlines() or [""]
                where = br.frames[-1] if br.frames else "(Dynamo kept no source line)"
                more = "".join(f"<br><small>{e(line)}</small>" for line in rest)
                parts.append(f"<li><b>{e(first)}</b><br>at <code>{e(where)}</code>{more}</li>")
            parts.append("</ol>")
        for g in self.graphs:
            capture = f", Dynamo capture {g.capture_time:.2f}s" if g.capture_time else ""
            entries = f"{g.cache_entries} entr{'y' if g.cache_entries == 1 else 'ies'}"
            parts.append(
                f"<h4>{e(g.title)}</h4><p>{g.dynamo_ops} Dynamo ops{capture}; cache: {entries}</p>"
            )
            if not g.records:
                parts.append("<p>(not compiled yet: the graph was never called)</p>")
            for rec in g.records:
                parts.append(_record_html(rec))
            for reason in g.recompile_reasons:
                parts.append(f"<p>recompiled: {e(reason)}</p>")
        recompiles = "".join(f"<li>{e(r)}</li>" for r in self.recompiles)
        parts.append(
            f"<p>Dynamo recompiles:</p><ul>{recompiles}</ul>"
            if recompiles
            else "<p>Dynamo recompiles: none</p>"
        )
        parts.append("</div>")
        return "".join(parts)


def _record_html(rec: CompileRecord) -> str:
    e = html.escape
    stages = [s for s in STAGES if s in rec.times]
    head = "".join(f"<th>{s}</th>" for s in stages)
    times = "".join(f"<td>{rec.times[s]:.2f}s</td>" for s in stages)
    if not stages:  # (the text's "no stages")
        head, times = "<th>stages</th>", "<td>no stages</td>"
    partitions = (
        f"<p>{e(format_partitions(rec.partitions, rec.pieces))}</p>" if rec.mode == "split" else ""
    )
    grad = " (* requires grad)" if "]*" in rec.inputs else ""
    n_eager = sum(1 for op in rec.ops if op.where == "eager")
    rows = []
    for target, count, where, reason, sources in group_ops(rec.ops):
        detail = e(reason or "")
        if where == "eager":
            detail += "".join(f"<br>at <code>{e(s)}</code>" for s in sources)
        style = " style='color:#b00'" if where == "eager" else ""
        rows.append(
            f"<tr><td>{count} x</td><td><code>{e(target)}</code></td>"
            f"<td{style}>{where}</td><td>{detail}</td></tr>"
        )
    cost = f"<p>XLA cost: {e(format_cost(rec.cost))}</p>" if rec.cost else ""
    return (
        f"<p><b>{e(rec.name)}</b>: {e(rec.mode)}, inputs (<code>{e(rec.inputs)}</code>)"
        f"{grad}</p>"
        f"<table><caption>compile time</caption><tr>{head}<th>total</th></tr>"
        f"<tr>{times}<td>{rec.total_time:.2f}s</td></tr></table>{partitions}{cost}"
        f"<p>ATen ops: {len(rec.ops)} ({len(rec.ops) - n_eager} in XLA, {n_eager} in eager "
        "PyTorch)</p>"
        "<table><tr><th>count</th><th>ATen op</th><th>runs in</th><th>why / where</th></tr>"
        f"{''.join(rows)}</table>"
    )


def explain(fn: Callable, *args: Any, **kwargs: Any) -> Explanation:
    """Compile ``fn`` with ``backend="xla"``, call it once on ``args``/``kwargs``, and report.

    The report lists the graphs Dynamo captured and the graph breaks with their reasons; per
    graph, the ATen ops and which run in XLA or fall back to eager PyTorch (with the user's
    source line), compile time per stage (capture, lowering, passes, tracing, StableHLO, XLA),
    XLA's cost analysis (flops, bytes accessed) and the graph's cache entries and recompiles.
    ``print(report)`` shows it as text; Jupyter renders it as HTML. ``report.output`` is what
    ``fn`` returned. ``fn`` really runs once (its side effects happen once), compiled.

    ``fn`` may be a function, an ``nn.Module`` or a ``torch.compile`` result (its original
    function is compiled afresh with default options; use ``Explanation(fn, options=...)`` to
    pass options).

    Example::

        >>> report = torch2xla.explain(model, torch.randn(8, 32))
        >>> print(report)
    """
    return Explanation(fn).run(*args, **kwargs)


def _break_counter() -> dict:
    return torch._dynamo.utils.counters["graph_break"]


def _first_lines(reason: str) -> str:
    return "\n".join(line.strip() for line in str(reason).strip().splitlines()[:2])


def _unwrap(fn: Callable) -> Callable:
    if isinstance(fn, torch._dynamo.eval_frame.OptimizedModule):
        return fn._orig_mod
    return getattr(fn, "_torchdynamo_orig_callable", fn)


@contextlib.contextmanager
def _capture_timer(report: Explanation) -> Iterator[None]:
    """Attribute the time of each Dynamo frame compile to the graph it produced."""
    handler = torch._dynamo.callback_handler
    state: dict[str, Any] = {}

    def start(_args: Any) -> None:
        state["t0"] = time.perf_counter()
        state["n"] = len(report.graphs)

    def end(_args: Any) -> None:
        t0, n = state.pop("t0", None), state.pop("n", 0)
        if t0 is None or len(report.graphs) == n:
            return
        elapsed = time.perf_counter() - t0
        new = report.graphs[n:]
        for g in new:
            g.capture_time = elapsed / len(new)

    handler.register_start_callback(start)
    handler.register_end_callback(end)
    try:
        yield
    finally:
        handler.remove_start_callback(start)
        handler.remove_end_callback(end)
