"""The FX sources a build registers, released with what it built.

NOTE: every ``GraphModule.recompile()`` stores the generated source in FX's loader
(``torch.fx.graph_module._loader.eval_cache``) and in ``linecache``, under a fresh
``<eval_with_key>.N`` name, so that tracebacks can show it; nothing removes them. A build makes
several graph modules per signature (the ATen export, the rewrites before it, split
partitions), so a session that compiles and drops graphs all day kept every one's source. The
build's registrations are forgotten when the entry it built dies.
"""

from __future__ import annotations

import linecache
import re
import weakref
from typing import Any

from torch.fx import graph_module as _graph_module

_loader = getattr(_graph_module, "_loader", None)  # torch 2.11-2.13
_KEY = re.compile(r"<eval_with_key>\.(\d+)")


class FxSources:
    """``with FxSources() as s:`` records the FX source registrations made inside;
    ``s.release_with(obj)`` forgets them when ``obj`` dies. A block that raises forgets them
    at once."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._first = 0

    def __enter__(self) -> FxSources:
        if _loader is not None:
            self._first = _loader.next_id
        return self

    def __exit__(self, kind, value, tb) -> None:
        if _loader is None:
            return
        ids = range(self._first, _loader.next_id)
        if ids:
            for key in list(_loader.eval_cache):
                m = _KEY.match(key)
                if m and int(m.group(1)) in ids:
                    self.keys.append(key)
        if kind is not None:
            _forget(self.keys)

    def release_with(self, owner: Any) -> None:
        if self.keys:
            weakref.finalize(owner, _forget, tuple(self.keys))


def _forget(keys) -> None:
    if _loader is None:
        return
    for key in keys:
        _loader.eval_cache.pop(key, None)
        linecache.cache.pop(key, None)
