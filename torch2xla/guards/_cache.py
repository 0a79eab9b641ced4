"""A bounded, thread-safe cache of compiled programs keyed by input signature."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch2xla.debug._stages import OpPlacement

# Keys evicted by the LRU bound that are remembered, to say so when they come back.
_EVICTED_MEMORY = 1024


@dataclasses.dataclass
class CompileRecord:
    """One compile of one signature of a graph: why it compiled, how long it took, what it made.

    The one record of a signature: ``GraphGuards`` makes it when the signature misses the cache
    (``signature``, ``reason``) and times the build and first run (``seconds``); the build fills
    in what it made (``_stages.Build``: ``inputs``, ``mode``, stage ``times``, ``ops``,
    ``cost``); calls count ``hits``. ``cache_info``, ``explain``, dumps, logs and progress all
    show it under its ``name``, ``graph_0.s1``.

    Attributes:
        graph: the graph's name (``graph_0``), shared by its dumps, profiler ranges and errors.
        index: the signature's number within the graph, from 0 (the ``1`` of ``graph_0.s1``);
            every compile of the graph takes the next one, a failed one too.
        signature: what varies between the graph's programs, as the cache key says it:
            ``grad mode off, x dim 1=128``.
        reason: why it compiled: ``first call``, ``x dim 1: 128 -> 256``, ...
        seconds: compile time, first run included (lowering, tracing, XLA compile).
        persistent_hits: XLA executables that came from the persistent cache.
        hits: calls served since.
        inputs: the inputs' dtypes and shapes, e.g. ``x: f32[8, 32], n: i64[]`` (``*``:
            requires grad).
        mode: ``inference``, ``training`` or ``split`` (some ops run in eager PyTorch).
        times: seconds per stage (see ``_stages.STAGES``); stages that did not run are absent.
        ops: where each ATen node runs (``_stages.OpPlacement``).
        cost: XLA's cost analysis summed over the signature's executables (``flops``,
            ``bytes accessed``, ``transcendentals``), None when nothing was compiled ahead.
        partitions: in ``split`` mode, the XLA partitions (``fused_0``...) and whether each
            has compiled (on the signature's first call, which its times and cost include).
        pieces: in ``split`` mode of a graph cut around data-dependent ops, the graphs its XLA
            pieces compile as (``graph_3``...), each with records of its own.
    """

    graph: str
    index: int
    signature: str = ""
    reason: str = ""
    seconds: float = 0.0
    persistent_hits: int = 0
    hits: int = 0
    inputs: str = ""
    mode: str = "inference"
    times: dict[str, float] = dataclasses.field(default_factory=dict)
    ops: list[OpPlacement] = dataclasses.field(default_factory=list)
    cost: dict[str, float] | None = None
    partitions: dict[str, bool] = dataclasses.field(default_factory=dict)
    pieces: list[str] = dataclasses.field(default_factory=list)

    @property
    def name(self) -> str:
        """The signature's label everywhere: ``graph_0.s1``."""
        return f"{self.graph}.s{self.index}"

    @property
    def total_time(self) -> float:
        """Seconds of the compile's stages (``times``) together."""
        return sum(self.times.values())


class ProgramCache:
    """LRU cache of compiled programs with hit/miss/eviction counters.

    ``get`` is the per-call path: a short lock, a dict lookup, an LRU touch. Building is the
    caller's business (see ``GraphGuards``); ``insert`` stores a built entry and evicts the
    least recently used ones beyond ``max_entries``.
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[Any, CompileRecord]] = OrderedDict()
        self._evicted: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.records: list[CompileRecord] = []
        self.cleared = False

    def get(self, key: Hashable) -> Any:
        with self._lock:
            item = self._entries.get(key)
            if item is None:
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            item[1].hits += 1
            return item[0]

    def insert(self, key: Hashable, entry: Any, record: CompileRecord) -> None:
        with self._lock:
            self.misses += 1
            self.records.append(record)
            self._entries[key] = (entry, record)
            self._evicted.pop(key, None)
            while len(self._entries) > self.max_entries:
                old, _ = self._entries.popitem(last=False)
                self.evictions += 1
                self._evicted[old] = None
                if len(self._evicted) > _EVICTED_MEMORY:
                    self._evicted.popitem(last=False)
            self.cleared = False

    def most_recent_key(self) -> Hashable | None:
        with self._lock:
            return next(reversed(self._entries), None)

    def was_evicted(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._evicted

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._evicted.clear()
            self.cleared = True
