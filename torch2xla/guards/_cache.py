"""A bounded, thread-safe cache of compiled programs keyed by input signature."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

# Keys evicted by the LRU bound that are remembered, to say so when they come back.
_EVICTED_MEMORY = 1024


@dataclasses.dataclass
class CompileRecord:
    """One compile of one signature of a graph (mutable: ``hits`` counts on)."""

    index: int
    signature: str
    reason: str
    seconds: float
    persistent_hits: int = 0
    hits: int = 0


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
