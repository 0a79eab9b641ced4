"""Public views of the caches: ``cache_info`` and ``clear_caches``."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterator
from typing import Any

from torch2xla.guards._graph import GraphGuards, all_graphs


@dataclasses.dataclass(frozen=True)
class SignatureInfo:
    """One compiled signature of a graph.

    Attributes:
        name: the signature's label, ``graph_0.s1``, as in explain, dumps and logs.
        index: its number within the graph, from 0 (a compile that failed takes one too).
        signature: what the program was compiled for, e.g. ``grad mode off, x dim 1=128``.
        reason: why it compiled: ``first call``, ``x dim 1: 128 -> 256``, ...
        seconds: compile time, first run included (lowering, tracing, XLA compile).
        persistent_hits: XLA executables that came from the persistent cache.
        hits: calls served since.
        cached: whether the program is still in the cache (False: evicted or cleared).
    """

    name: str
    index: int
    signature: str
    reason: str
    seconds: float
    persistent_hits: int
    hits: int
    cached: bool


@dataclasses.dataclass(frozen=True)
class GraphInfo:
    """The cache of one Dynamo graph.

    Attributes:
        name: ``graph_N``, as in logs, dumps and errors.
        frame: the user's function or module Dynamo compiled (``'Net.forward' (/path/model.py:12)``,
            ``'Sequential' (torch.nn.Sequential)``).
        dynamo_reason: why Dynamo traced the frame again to produce this graph (None for a
            frame's first graph): guard failures such as ``tensor 'x' requires_grad mismatch``.
        entries: programs in the cache now.
        hits: calls that found their program.
        misses: calls that compiled (one per signature, whatever the number of threads).
        evictions: programs dropped by the LRU bound (``options={"cache_size": n}``).
        signatures: every compile, in order.
        buckets: bucket sizes asked for (None: off).
        analysis_seconds: time spent deciding which dimensions can be padded (once per graph).
        bucketed: the dimensions that are padded to buckets.
        not_bucketed: the dimensions that are not, and why.
        padding_fixes: what the padded programs do with the real sizes to stay exact (mask a
            softmax, write a ``cat``'s new rows at the real end, ...), one line each.
    """

    name: str
    frame: str | None
    dynamo_reason: str | None
    entries: int
    hits: int
    misses: int
    evictions: int
    signatures: tuple[SignatureInfo, ...]
    buckets: str | None
    analysis_seconds: float
    bucketed: tuple[str, ...]
    not_bucketed: dict[str, str]
    padding_fixes: tuple[str, ...] = ()

    @property
    def compile_seconds(self) -> float:
        return sum(s.seconds for s in self.signatures)

    @property
    def recompile_reasons(self) -> list[str]:
        return [s.reason for s in self.signatures[1:]]

    def _head(self) -> str:
        return (
            f"{self.name}{' ' + self.frame if self.frame else ''}: {self.entries} cached, "
            f"{self.hits} hits, {self.misses} compiles ({self.compile_seconds:.2f} s), "
            f"{self.evictions} evicted"
        )

    def _notes(self) -> list[str]:
        lines = []
        if self.dynamo_reason:
            lines.append(f"traced again by Dynamo: {self.dynamo_reason}")
        if self.buckets and (
            self.bucketed or self.not_bucketed or not self.buckets.startswith("auto")
        ):
            lines.append(
                f"buckets {self.buckets}: {', '.join(self.bucketed) or 'none'} "
                f"(analysis {self.analysis_seconds:.2f} s)"
            )
            lines.extend(f"  not {k}: {v}" for k, v in self.not_bucketed.items())
            lines.extend(f"  exact with the real sizes: {f}" for f in self.padding_fixes)
        return lines

    @staticmethod
    def _compile(s: SignatureInfo) -> str:
        extra = f", {s.persistent_hits} from persistent cache" if s.persistent_hits else ""
        gone = "" if s.cached else " [evicted]"
        return f"{s.name} {s.seconds:.3f} s{extra}, {s.hits} hits{gone}"

    def __repr__(self) -> str:
        return f"<torch2xla GraphInfo {self._head()}>"

    def __str__(self) -> str:
        lines = [self._head(), *("  " + line for line in self._notes())]
        for s in self.signatures:
            lines.append(f"  {self._compile(s)}: {s.signature}\n      because: {s.reason}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The same content as the text, as HTML (Jupyter): one table row per compile."""
        e = html.escape
        notes = "".join(f"<br>{e(line)}" for line in self._notes())
        rows = "".join(
            f"<tr><td>{e(self._compile(s))}</td><td><code>{e(s.signature)}</code></td>"
            f"<td>{e(s.reason)}</td></tr>"
            for s in self.signatures
        )
        table = (
            f"<table><tr><th>compile</th><th>signature</th><th>because</th></tr>{rows}</table>"
            if rows
            else ""
        )
        return f"<div><p><b>{e(self._head())}</b>{notes}</p>{table}</div>"


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """The caches of the graphs of one compiled function or module (or of all of them).

    Iterating gives one ``GraphInfo`` per Dynamo graph; the totals are properties.
    """

    graphs: tuple[GraphInfo, ...]

    def __iter__(self) -> Iterator[GraphInfo]:
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, i: int) -> GraphInfo:
        return self.graphs[i]

    @property
    def entries(self) -> int:
        return sum(g.entries for g in self.graphs)

    @property
    def hits(self) -> int:
        return sum(g.hits for g in self.graphs)

    @property
    def misses(self) -> int:
        return sum(g.misses for g in self.graphs)

    @property
    def compiles(self) -> int:
        return self.misses

    @property
    def compile_seconds(self) -> float:
        return sum(g.compile_seconds for g in self.graphs)

    def _head(self) -> str:
        return (
            f"torch2xla cache: {len(self.graphs)} graph(s), {self.entries} programs cached, "
            f"{self.hits} hits, {self.compiles} compiles ({self.compile_seconds:.2f} s)"
        )

    def __str__(self) -> str:
        return "\n".join([self._head(), *(str(g) for g in self.graphs)])

    def __repr__(self) -> str:  # (print() or Jupyter's HTML show the whole report)
        return f"<{self._head()}>"

    def _repr_html_(self) -> str:
        """The same content as the text, as HTML (Jupyter)."""
        graphs = "".join(g._repr_html_() for g in self.graphs)
        return f"<div class='torch2xla-cache'><p>{html.escape(self._head())}</p>{graphs}</div>"


def _info(g: GraphGuards) -> GraphInfo:
    cache = g.cache
    cached = {id(rec) for rec in _live_records(g)}
    b = g.bucketing
    return GraphInfo(
        name=g.name,
        frame=g.context.frame,
        dynamo_reason=g.context.reason,
        entries=len(cache),
        hits=cache.hits,
        misses=cache.misses,
        evictions=cache.evictions,
        signatures=tuple(
            SignatureInfo(
                r.name,
                r.index,
                r.signature,
                r.reason,
                r.seconds,
                r.persistent_hits,
                r.hits,
                id(r) in cached,
            )
            for r in list(cache.records)
        ),
        buckets=None if g.spec is None else str(g.spec),
        analysis_seconds=g.analysis_seconds,
        bucketed=tuple(g.key.sources[j].label for j in b.safe) if b else (),
        not_bucketed=dict(b.refused) if b else {},
        padding_fixes=b.fixes if b else (),
    )


def _live_records(g: GraphGuards) -> list:
    with g.cache._lock:
        return [rec for _, rec in g.cache._entries.values()]


def _dynamo_context_of(obj: Any) -> Any:
    """The ``torch.compile`` context object behind a compiled module or function."""
    ctx = getattr(obj, "dynamo_ctx", None)  # OptimizedModule
    if ctx is not None:
        return ctx
    fn = getattr(obj, "_compiled_call_impl", None) or obj  # module.compile(), or a function
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None)
    if code is not None and closure and "self" in code.co_freevars:
        return closure[code.co_freevars.index("self")].cell_contents
    return None


def _graphs_of(compiled: Any) -> list[GraphGuards]:
    if compiled is None:
        return all_graphs()
    if isinstance(compiled, GraphGuards):
        return [compiled]
    guards = getattr(compiled, "guards", None)
    if isinstance(guards, GraphGuards):  # a CompiledGraph
        return [guards]
    ctx = _dynamo_context_of(compiled)
    if ctx is None:
        raise TypeError(
            f"torch2xla.cache_info: {type(compiled).__name__} is not something torch.compile "
            "returned (a compiled module or function); pass the result of "
            "torch.compile(..., backend='xla'), or nothing for every graph"
        )
    return [g for g in all_graphs() if g.context.owner is not None and g.context.owner() is ctx]


def cache_info(compiled: Any = None) -> CacheInfo:
    """What torch2xla compiled for ``compiled`` and why: entries, hits, compiles, reasons.

    Args:
        compiled: what ``torch.compile(..., backend="xla")`` returned (a module or a function),
            or None for every live graph of the process. Graphs of functions that Dynamo
            compiled as separate frames (called from ``compiled`` after a graph break) are
            found through ``compiled`` too, as long as ``compiled`` was running when Dynamo
            traced them.

    Returns:
        A ``CacheInfo``: one ``GraphInfo`` per Dynamo graph with its cache entries, hits,
        misses, evictions, and every compile with its time and reason in words
        (``"x dim 1: 128 -> 256"``). ``print`` it for a report.

    Example::

        model = torch.compile(model, backend="xla", dynamic=True)
        model(x)
        print(torch2xla.cache_info(model))
    """
    return CacheInfo(tuple(_info(g) for g in _graphs_of(compiled)))


def clear_caches() -> int:
    """Drop every compiled program of every graph; the next call of each graph compiles again.

    JAX's in-memory caches are cleared too (``jax.clear_caches()``: they keep what our
    programs traced, and JAX code of your own traces again on its next call). Dynamo's own
    caches (its traced graphs and guards) are untouched (that is ``torch._dynamo.reset()``),
    and so is the persistent cache on disk, which makes the recompiles fast. Counters and
    compile records are kept. Returns the number of programs dropped.
    """
    import jax

    dropped = 0
    for g in all_graphs():
        dropped += len(g.cache)
        g.clear()
    # NOTE: JAX caches traces and lowerings under what they were made for, some in bounded
    # caches with strong keys (up to 4096 entries): a dropped graph's jaxprs stayed there.
    jax.clear_caches()
    return dropped
