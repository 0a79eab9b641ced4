"""The name ``xla`` in Dynamo's backend registry, registered once however many threads ask.

Dynamo finds ``backend="xla"`` through the entry point the first time a ``torch.compile``
asks for it: ``lookup_backend`` sees the name missing from its table of loaded backends
(``_COMPILER_FNS``), loads the entry point (importing torch2xla, seconds) and then calls
``register_backend``, which refuses a name already in the table. Threads whose first
``torch.compile(..., backend="xla")`` overlap all saw the name missing, and every one of them
but the first to finish raised ``AssertionError: duplicate name: xla`` (a thread pool whose
workers each compile their own model; eager runs there, and so do torch's built-in backends,
registered when Dynamo loads). Those threads hold torch's own ``register_backend`` (Python
looks up the function before it loads the argument), so a wrapper installed by the import
cannot reach them; what they read when they call it is the table.

``install(fn)`` puts ``fn`` in the table under ``xla`` and makes the table a ``_Table``, which
answers that the name is not in it: a lookup then loads the entry point again (the module is
imported: microseconds) and registers ``fn`` again, which changes nothing. A second
registration of ``fn`` under ``xla`` is a no-op; another function under the name is refused
as torch refuses it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()


class _Table(dict):
    """Dynamo's table of loaded backends, where a name registered by ``install`` reads as
    missing while it holds ``install``'s function (so that registering it again passes
    ``register_backend``'s check)."""

    own: dict[str, Callable]

    def __contains__(self, name: object) -> bool:
        fn = self.own.get(name) if isinstance(name, str) else None
        if fn is not None and dict.get(self, name) is fn:
            return False
        return dict.__contains__(self, name)


def install(name: str, fn: Callable) -> None:
    """Register ``fn`` as Dynamo's backend ``name`` so that registering it again, from any
    number of threads, never raises; left as it is where the installed torch lays its registry
    out otherwise (``_COMPILER_FNS``, ``_BACKENDS``, ``register_backend``)."""
    try:
        from torch._dynamo.backends import registry
    except ImportError:
        return
    table, backends = getattr(registry, "_COMPILER_FNS", None), getattr(registry, "_BACKENDS", None)
    original = getattr(registry, "register_backend", None)
    if not isinstance(table, dict) or not isinstance(backends, dict) or original is None:
        return
    with _lock:
        if not isinstance(table, _Table):
            table = _Table(table)
            table.own = {}
            registry._COMPILER_FNS = table
            registry.register_backend = _once(getattr(original, "__wrapped__", original), table)
        if dict.get(table, name, fn) is not fn:
            return  # (another backend took the name first: torch refuses ours at lookup)
        fn._tags = ()  # type: ignore[attr-defined]  (as register_backend sets it)
        table.own[name] = fn
        dict.__setitem__(table, name, fn)
        backends.setdefault(name, None)  # (no entry point: a source tree on the path)


def _once(original: Callable, table: _Table) -> Callable:
    @functools.wraps(original)
    def register_backend(
        compiler_fn: Callable | None = None, name: str | None = None, tags: Any = ()
    ) -> Any:
        if compiler_fn is None:  # (the decorator form: it calls back with the function)
            return functools.partial(register_backend, name=name, tags=tags)
        key = name or getattr(compiler_fn, "__name__", None)
        own = table.own.get(key) if isinstance(key, str) else None
        if own is compiler_fn:
            return compiler_fn  # (registered already: the same backend)
        if own is not None and dict.get(table, key) is own:
            raise AssertionError(f"duplicate name: {key}")  # (torch's words)
        return original(compiler_fn=compiler_fn, name=name, tags=tags)

    return register_backend
