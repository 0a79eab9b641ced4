"""Warnings silenced for the calling thread only, without touching other threads' warnings.

Compiling calls eager ops on small real tensors (probes for eager's errors and dtypes) and
traces JAX code whose warnings are not the user's. ``warnings.catch_warnings`` silenced them by
replacing the process-wide filter list and restoring it afterwards, which is not thread-safe:
while one thread compiled, every other thread's warnings were dropped, a filter another thread
added meanwhile was undone at the restore, and two interleaved ``catch_warnings`` blocks (ours
and a user's ``catch_warnings(record=True)``) could leave our "ignore everything" filter in
place for good.

``quiet()`` instead keeps one filter per pattern at the front of ``warnings.filters``, whose
module matcher answers yes only in a thread inside ``quiet()`` with that pattern: other threads
never match it. The list is changed only when that filter is missing or no longer first (a user
inserted one since), so that ``simplefilter("error")`` does not turn a probe's warning into an
exception.
"""

from __future__ import annotations

import contextlib
import re
import threading
import warnings

_local = threading.local()


class _InQuietThread:
    """A filter's module matcher that matches in threads inside ``quiet(pattern)``."""

    # (what code that reads filters as compiled regexes finds: no module is named so)
    pattern = "<torch2xla: a thread inside quiet()>"

    def __init__(self, message: str | None) -> None:
        self._message = message

    def match(self, module: str) -> bool:
        return self._message in getattr(_local, "active", ())

    def __repr__(self) -> str:
        return f"<torch2xla: threads silencing {self._message or 'every warning'}>"


_filters: dict[str | None, tuple] = {}
_lock = threading.Lock()


def _filter(pattern: str | None) -> tuple:
    entry = _filters.get(pattern)
    if entry is None:
        message = None if pattern is None else re.compile(pattern, re.IGNORECASE)
        entry = _filters[pattern] = ("ignore", message, Warning, _InQuietThread(pattern), 0)
    return entry


def _leading(entry: tuple, filters: list) -> bool:
    """Whether ``entry`` is among the filters of ours that lead ``filters``."""
    for f in filters:
        if f is entry:
            return True
        if not isinstance(f[3], _InQuietThread):
            return False
    return False


def _first(entry: tuple) -> None:
    """``entry`` ahead of every filter not ours in the current list (moved there where it is
    not)."""
    if _leading(entry, warnings.filters):
        return
    with _lock:
        filters = warnings.filters
        if _leading(entry, filters):
            return
        if entry in filters:
            filters.remove(entry)
        filters.insert(0, entry)
        warnings._filters_mutated()


@contextlib.contextmanager
def quiet(pattern: str | None = None):
    """No warnings (``pattern``: those whose message matches it) from this thread inside."""
    entry = _filter(pattern)
    _first(entry)
    active = getattr(_local, "active", ())
    _local.active = (*active, pattern)
    try:
        yield
    finally:
        _local.active = active
