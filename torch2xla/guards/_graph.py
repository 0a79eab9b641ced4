"""One graph's guards: key, cache, bucketing, compile accounting and logging."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch2xla._errors import OpError, warn
from torch2xla.capture._fx_sources import FxSources
from torch2xla.guards import _persistent
from torch2xla.guards._cache import CompileRecord, ProgramCache
from torch2xla.guards._key import SignatureKey
from torch2xla.guards._log import (
    BucketingWarning,
    IntArgumentWarning,
    compile_log,
    configure,
    frame_label,
    frame_name,
    log,
    note_frame,
)
from torch2xla.guards.bucketing._bucket import (
    NOT_A_SIZE,
    RUNS_EAGER_OPS,
    Bucketing,
    BucketSpec,
)
from torch2xla.runtime import _fork
from torch2xla.runtime._interop import no_stack_capture

# Builds are serialized with each other and with Dynamo's own frame compiles (this is Dynamo's
# compile lock): tracing (fake modes, aot_export) is not thread-safe, and one lock makes "each
# signature compiles once" hold across threads.
BUILD_LOCK = torch._dynamo.convert_frame.compile_lock


_registry: weakref.WeakSet[GraphGuards] = weakref.WeakSet()
_registry_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class DynamoContext:
    """Where a graph came from, read from Dynamo while it calls the backend.

    Attributes:
        frame: the user's compiled function or module, ``'Net.forward' (/path/model.py:12)``.
        reason: Dynamo's reason for compiling the frame again (None on its first compile).
        owner: weak reference to the ``torch.compile`` context that traced the frame.
        dynamo_frame: the frame as Dynamo's messages name it, ``'forward' (/path/model.py:12)``.
    """

    frame: str | None = None
    reason: str | None = None
    owner: weakref.ref | None = None
    dynamo_frame: str | None = None


def dynamo_context() -> DynamoContext:
    """The context of the backend call in progress (empty outside a Dynamo compile)."""
    from torch._dynamo import symbolic_convert, utils

    tx = getattr(symbolic_convert.tls, "current_tx", None)
    code = getattr(tx, "f_code", None)
    frame = frame_label(code, getattr(tx, "f_locals", None) or {}) if code is not None else None
    metrics = getattr(utils.get_metrics_context(), "_metrics", None)
    reason = metrics.get("recompile_reason") if isinstance(metrics, dict) else None
    owner = None
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "compile_wrapper" and f.f_code.co_filename.endswith("eval_frame.py"):
            ctx = f.f_locals.get("self")
            if ctx is not None:
                owner = weakref.ref(ctx)
                break
        f = f.f_back
    return DynamoContext(frame, reason, owner, frame_name(code) if code is not None else None)


class GraphGuards:
    """Everything between a Dynamo graph's call and its compiled program for that call.

    ``run(args)`` computes the signature key, returns the cached program's result, or
    compiles the signature once (under ``BUILD_LOCK``), timing it and recording why.

    Args:
        gm: the Dynamo graph.
        name: the graph's name (``graph_3``) in logs and reports.
        build: ``build(args) -> entry``; an entry is called as ``entry(args)``.
        cache_size: most programs kept (least recently used dropped).
        buckets: bucket sizes for dynamic dimensions (None: compile every size).
    """

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        name: str,
        build: Callable[[Sequence], Any],
        cache_size: int,
        buckets: BucketSpec | None = None,
        context: DynamoContext | None = None,
        int_arguments: dict[str, str] | None = None,
    ) -> None:
        configure()  # (logging: at the first graph, not on import)
        self.gm, self.name, self.build = gm, name, build
        self.key = SignatureKey(gm)
        self.cache = ProgramCache(cache_size)
        self.spec = buckets
        self.bucketing: Bucketing | None = None
        self.analysis_seconds = 0.0
        self.recompile_reasons: list[str] = []
        self.context = context if context is not None else dynamo_context()
        if self.context.dynamo_frame:
            note_frame(self.context.dynamo_frame)
        self._warned: set[str] = set()
        # int arguments still keyed by value (``capture/_int_values.py``), with why
        self.int_arguments = int_arguments or {}
        self._warned_int = False
        self._next_index = 0
        # The record of the compile in progress (under BUILD_LOCK), for the build to fill in.
        self.compiling: CompileRecord | None = None
        # (a graph without size symbols has no dimension to pad: its analysis would find none,
        # so its calls skip ``_first``, which training calls would otherwise go through forever)
        pads = buckets is not None and bool(self.key.sources)
        self.run: Callable[[Sequence], Any] = self._first if pads else self._run
        with _registry_lock:
            _registry.add(self)

    # -- the per-call path ----------------------------------------------------------------
    def _run(self, args: Sequence):
        key = self.key.compute(args)
        entry = self.cache.get(key)
        if entry is None:
            return self._miss(key, args)
        try:
            return entry(args)
        except OpError as e:
            return self._exactly(key, args, e)

    def _exactly(self, key: tuple, args: Sequence, error: OpError):
        """A call whose padded program raised eager's error for its values (an index check):
        run at its exact sizes, whose program raises the error eager raises, with eager's
        sizes in its message (the padded one named the bucket's)."""
        exact = self.key.exact(args)
        if exact == key:
            raise error
        entry = self.cache.get(exact)
        if entry is None:
            return self._miss(exact, args, self.key.exact)
        return entry(args)

    def _first(self, args: Sequence):
        if self.key.requires_grad and torch.is_grad_enabled():
            # Calls that record autograd are never padded: analyze at the first that may be.
            return self._run(args)
        with BUILD_LOCK:
            if self.bucketing is None:
                t0 = time.perf_counter()
                with FxSources() as sources:
                    self.bucketing = Bucketing(self.gm, self.key, self.spec, args)
                sources.release_with(self)
                self.analysis_seconds = time.perf_counter() - t0
                self.key.set_bucketing(self.bucketing.bucket)
                safe = [self.key.sources[j].label for j in self.bucketing.safe]
                log.info(
                    "%s: buckets %s for %s%s",
                    self.name,
                    self.spec,
                    ", ".join(safe) or "no dimension",
                    "".join(f"; not {k}: {v}" for k, v in self.bucketing.refused.items()),
                )
            self.run = self._run
        return self._run(args)

    def _miss(self, key: tuple, args: Sequence, rekey: Callable | None = None):
        with BUILD_LOCK:
            # The key again, now that no build runs: the process state it reads (oneDNN's
            # switch, ...) was read before the lock, while another thread's build may have set
            # it for a moment; this build reads it now, so the key must say what it sees (a
            # program built with oneDNN on was stored under "off").
            key = (rekey or self.key.compute)(args)
            entry = self.cache.get(key)
            if entry is None:
                return self._compile(key, args)
        return entry(args)

    def new_record(self, signature: str = "", reason: str = "") -> CompileRecord:
        """The record of this graph's next compile, numbered in order (``graph_0.s1``)."""
        record = CompileRecord(self.name, self._next_index, signature, reason)
        self._next_index += 1
        return record

    def _compile(self, key: tuple, args: Sequence):
        _fork.started()  # (a process forked after this cannot run JAX: runtime/_fork.py)
        _persistent.activate()
        first = not self.cache.records
        record = self.new_record(reason=self._reason(key))
        hits = _persistent.hits()
        t0 = time.perf_counter()
        padded = self._padded_values(key)
        failed = entry = None
        self.compiling = record
        with no_stack_capture(), FxSources() as sources:
            try:
                if padded is not None:
                    entry = self.bucketing.make_entry(args, padded, self.build)
                    if getattr(entry.inner, "runs_eager_ops", False):
                        entry = None  # (refused below, after the scopes)
                else:
                    entry = self.build(args)
                if entry is not None:
                    out = entry(args)
            except OpError as e:  # eager's error for these values (``_checks``)
                if entry is None:  # (raised by the build: nothing to keep)
                    raise
                out, failed = None, e  # the entry is sound: kept, and the error raised
            except Exception as e:
                if padded is None or self.bucketing.masked is None:
                    raise
                # a padded program reading the real sizes failed: compiled exactly instead
                return self._unpadded(args, e)
            finally:
                self.compiling = None
        if entry is None:
            # A graph cut around ops that run in eager PyTorch (data-dependent sizes, hooks):
            # those ops would see the padded sizes (a size Dynamo baked in no longer matches,
            # a nonzero counts the padding), so it compiles per size.
            self.bucketing.refuse(RUNS_EAGER_OPS)
            return self._compile(self.key(args), args)
        sources.release_with(entry)
        record.seconds = time.perf_counter() - t0
        record.signature = self.key.format(key, self._bucketed_labels(key))
        record.persistent_hits = _persistent.hits() - hits
        self.cache.insert(key, entry, record)
        if not first:
            self.recompile_reasons.append(record.reason)
        compile_log(first).info(
            "%s%s: %s (%s) in %.3f s%s: %s",
            record.name,
            f" {self.context.frame}" if self.context.frame else "",
            "compiled" if first else "recompiled",
            record.signature,
            record.seconds,
            f", {record.persistent_hits} executable(s) from the persistent cache"
            if record.persistent_hits
            else "",
            record.reason,
        )
        if failed is not None:
            return self._exactly(key, args, failed)
        return out

    # -- bucketing ---------------------------------------------------------------------------
    def _unpadded(self, args: Sequence, error: Exception):
        """A padded program that reads the real sizes failed to build or run: this graph pads
        nothing from now on, and the call compiles (or raises) as without buckets."""
        why = f"its padded program failed ({type(error).__name__}: {str(error)[:300]})"
        warn(
            f"torch2xla: {self.name}: {why}; it compiles one program per size from now on. "
            "Please report it (options={'buckets': None} avoids it).",
            BucketingWarning,
        )
        self._warned.update(self.key.sources[j].label for j in self.bucketing.safe)
        self.bucketing.give_up(why)
        return self._compile(self.key(args), args)

    def _padded_values(self, key: tuple) -> tuple | None:
        b = self.bucketing
        if b is None or not b.safe or (key[0] and self.key.requires_grad):
            return None
        if self.key.shares_memory(key):  # (inputs overlapping in memory: exact sizes)
            return None
        values = tuple(key[1 : 1 + self.key.num_symbols])
        if not b.traced_for(values):  # (an int argument below 2: Dynamo's graph, exactly)
            return None
        return values

    def _bucketed_labels(self, key: tuple) -> frozenset[int]:
        if self._padded_values(key) is None:
            return frozenset()
        return frozenset(1 + j for j in self.bucketing.safe)

    # -- reasons -----------------------------------------------------------------------------
    def _reason(self, key: tuple) -> str:
        if not self.cache.records:
            if self.context.reason:
                return f"first call of a graph Dynamo traced again ({self.context.reason})"
            return "first call"
        if self.cache.cleared:
            return "caches were cleared (torch2xla.clear_caches())"
        if self.cache.was_evicted(key):
            return (
                f"this signature was compiled before and evicted (cache_size="
                f"{self.cache.max_entries}; raise it in options)"
            )
        previous = self.cache.most_recent_key()
        if previous is None:
            return "no signature of this graph is cached"
        changes = self.key.describe(previous, key, self._bucketed_labels(key))
        text = "; ".join(changes) or "new signature"
        self._warn_int_argument(previous, key)
        if self.bucketing is not None and self.bucketing.refused:
            text += self._refusals(previous, key)
        return text

    def _warn_int_argument(self, previous: tuple, key: tuple) -> None:
        """Once per graph: a new value of an int argument compiles a program of its own, because
        the graph uses it otherwise than as a value (``capture/_int_values.py`` says how)."""
        if self._warned_int:
            return
        for j, src in enumerate(self.key.sources):
            why = self.int_arguments.get(src.label)
            if why is None or src.dim is not None or src.symbol in self.key.size_symbols:
                continue
            if self.bucketing is not None and j in self.bucketing.safe:
                continue  # (padded to buckets: one program per bucket, not per value)
            if previous[1 + j] == key[1 + j]:
                continue
            self._warned_int = True
            static = (
                " If it is a cache's length, generate(..., cache_implementation='static') keeps "
                "the cache's shapes fixed."
                if "cache" in src.label.lower()
                else ""
            )
            warn(
                f"torch2xla: {self.name} compiles one program for every value of the int "
                f"argument {src.label} (now {key[1 + j]}, was {previous[1 + j]}): {why}, so "
                "each value is a constant of its program (an int the graph only computes "
                f"with is passed to one program as a tensor).{static}",
                IntArgumentWarning,
            )
            return

    def _refusals(self, previous: tuple, key: tuple) -> str:
        notes = []
        for j, src in enumerate(self.key.sources):
            why = self.bucketing.refused.get(src.label)
            if why is None or previous[1 + j] == key[1 + j]:
                continue
            notes.append(f" ({src.label} is not bucketed: {why})")
            if why == NOT_A_SIZE:
                continue  # no warning: an int argument is no size to pad
            if self.spec.auto:
                if not self._warned:  # once per graph: the user did not ask for buckets
                    self._warned.add(src.label)
                    warn(
                        f"torch2xla: {self.name} compiles one program for every size of "
                        f"{src.label} (now {key[1 + j]}, was {previous[1 + j]}): padding it to a "
                        f"bucket could change real results because the graph {why}. If this is "
                        "an LLM's KV cache, generate(..., cache_implementation='static') keeps "
                        "one program for the whole generation; options={'buckets': None} "
                        "silences this warning.",
                        BucketingWarning,
                    )
            elif src.label not in self._warned:
                self._warned.add(src.label)
                warn(
                    f"torch2xla: {self.name} recompiles for {src.label} = {key[1 + j]} "
                    f"(was {previous[1 + j]}) although buckets {self.spec} were asked for: "
                    f"padding {src.label} could change real results because the graph {why}. "
                    "Every size of it compiles its own program.",
                    BucketingWarning,
                )
        return "".join(notes)

    def clear(self) -> None:
        self.cache.clear()


def all_graphs() -> list[GraphGuards]:
    with _registry_lock:
        graphs = list(_registry)
    return sorted(graphs, key=lambda g: int(g.name.rpartition("_")[2] or 0))
