"""The persistent compilation cache: XLA executables reused across processes.

torch2xla points JAX's persistent compilation cache at ``<root>/<versions>/xla``, where
``<root>`` is ``$TORCH2XLA_CACHE_DIR`` or the user cache directory (``~/.cache/torch2xla`` on
Linux) and ``<versions>`` names the torch, jax, jaxlib and torch2xla versions, so entries
written by other versions are never looked at. ``TORCH2XLA_PERSISTENT_CACHE=0`` or
``torch2xla.set_persistent_cache(None)`` switches it off. A user who configured JAX's cache
themselves (``jax_compilation_cache_dir``) keeps their setting.

JAX reads an entry it cannot decompress with a warning and recompiles, but never rewrites the
broken file, so a corrupt entry would cost a compile in every process. torch2xla therefore
keeps a checksum per entry (``<versions>/checksums.json``) and checks the entries when the
cache is first used in a process: a file whose checksum no longer matches, or that does not decompress,
is deleted (with a ``PersistentCacheWarning``) and is recompiled and rewritten on its next use.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import pathlib
import re
import sys
import threading
import zlib

import jax
import torch

from torch2xla._errors import warn

CACHE_DIR_ENV = "TORCH2XLA_CACHE_DIR"
SWITCH_ENV = "TORCH2XLA_PERSISTENT_CACHE"
_OFF = ("0", "off", "false", "no")
_SUFFIX = "-cache"
_UNSET = object()


class PersistentCacheWarning(UserWarning):
    """A persistent cache entry was corrupt: it was deleted and will be recompiled."""


_lock = threading.RLock()
_explicit: object = _UNSET  # set_persistent_cache(...) overrides the environment
_active: pathlib.Path | None = None  # the versioned directory torch2xla set JAX to use
_saved_min_time: float | None = None
_hits = 0  # JAX persistent-cache hits seen by the monitoring listener


def default_root() -> pathlib.Path:
    """``$TORCH2XLA_CACHE_DIR``, else the platform's user cache directory + ``torch2xla``."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return pathlib.Path(env).expanduser()
    if sys.platform == "darwin":
        base = pathlib.Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = pathlib.Path(os.environ.get("LOCALAPPDATA", pathlib.Path.home() / "AppData/Local"))
    else:
        base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return base / "torch2xla"


def version_tag() -> str:
    """The directory name that isolates entries of one set of versions from all others."""
    import jaxlib

    parts = {
        "torch": torch.__version__,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "torch2xla": torch2xla_version(),
    }
    tag = "_".join(f"{k}-{v}" for k, v in parts.items())
    return re.sub(r"[^A-Za-z0-9._+-]", "-", tag)


@functools.cache
def torch2xla_version() -> str:
    try:
        return importlib.metadata.version("torch2xla")
    except importlib.metadata.PackageNotFoundError:
        return "source"


def _wanted() -> pathlib.Path | None:
    if _explicit is not _UNSET:
        root = _explicit
    elif os.environ.get(SWITCH_ENV, "").strip().lower() in _OFF:
        root = None
    else:
        root = default_root()
    return None if root is None else pathlib.Path(root) / version_tag()


def set_persistent_cache(directory: str | os.PathLike | None) -> pathlib.Path | None:
    """Use ``directory`` for the persistent compilation cache, or switch it off with None.

    Entries go to a subdirectory named after the torch, jax, jaxlib and torch2xla versions.
    Takes effect for compiles from now on; overrides ``TORCH2XLA_CACHE_DIR`` and
    ``TORCH2XLA_PERSISTENT_CACHE``. Returns the versioned directory (None when off).

    Example::

        torch2xla.set_persistent_cache("/scratch/xla-cache")
        torch2xla.set_persistent_cache(None)  # off
    """
    global _explicit
    with _lock:
        _explicit = None if directory is None else pathlib.Path(directory).expanduser()
        activate()
        return _active


def persistent_cache_dir() -> pathlib.Path | None:
    """The directory of the persistent cache in use (JAX's own setting when the user made one),
    or None when it is off."""
    with _lock:
        activate()
        if _active is not None:
            return _active
        user = jax.config.jax_compilation_cache_dir
        return pathlib.Path(user) if user else None


def activate() -> None:
    """Point JAX's persistent cache where the settings say (called before every compile)."""
    global _active, _saved_min_time
    with _lock:
        wanted = _wanted()
        if wanted == _active:
            return
        current = jax.config.jax_compilation_cache_dir
        ours = None if _active is None else str(_active / "xla")
        if current is not None and current != ours:
            return  # the user configured JAX's cache: theirs wins
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()
        if wanted is None:
            jax.config.update("jax_compilation_cache_dir", None)
            if _saved_min_time is not None:
                jax.config.update("jax_persistent_cache_min_compile_time_secs", _saved_min_time)
                _saved_min_time = None
            _active = None
            return
        (wanted / "xla").mkdir(parents=True, exist_ok=True)
        verify(wanted)
        jax.config.update("jax_compilation_cache_dir", str(wanted / "xla"))
        if _saved_min_time is None:
            _saved_min_time = jax.config.jax_persistent_cache_min_compile_time_secs
            # JAX's default only keeps compiles over 1 s; ours are mostly shorter.
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        _active = wanted


# -- integrity --------------------------------------------------------------------------------
# One manifest per versioned directory, ``checksums.json``: entry name -> [size, mtime_ns,
# blake2b]. Reading it and stat-ing the entries is all a process start costs; an entry is only
# read (hashed, or decompressed when it has no record) when its size or mtime changed.
_MANIFEST = "checksums.json"


def _digest(path: pathlib.Path) -> str:
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _decompresses(path: pathlib.Path) -> bool:
    data = path.read_bytes()
    try:
        zlib.decompress(data)
    except zlib.error:
        # Not zlib: JAX writes zstd when a zstd module is installed.
        return _zstd_decompresses(data)
    return True


def _zstd_decompresses(data: bytes) -> bool:
    try:
        import zstandard
    except ImportError:
        return False
    try:
        zstandard.ZstdDecompressor().decompress(data)
    except zstandard.ZstdError:
        return False
    return True


def _load_manifest(directory: pathlib.Path) -> dict[str, list]:
    path = directory / _MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}  # a torn or damaged manifest: entries are checked by decompressing instead
    return data if isinstance(data, dict) else {}


def _save_manifest(directory: pathlib.Path, changes: dict, removed: set[str]) -> None:
    """Merge ``changes`` into the manifest on disk (other processes may have written since)."""
    if not changes and not removed:
        return
    manifest = _load_manifest(directory)
    manifest.update(changes)
    for name in removed:
        manifest.pop(name, None)
    tmp = directory / f"{_MANIFEST}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(manifest))
    os.replace(tmp, directory / _MANIFEST)


def _entries(xla: pathlib.Path):
    with os.scandir(xla) as it:
        for entry in it:
            if entry.name.endswith(_SUFFIX) and entry.is_file():
                st = entry.stat()
                yield entry.name, pathlib.Path(entry.path), st.st_size, st.st_mtime_ns


def verify(directory: pathlib.Path) -> list[str]:
    """Delete corrupt entries of ``directory`` (warning once); return their names."""
    xla = directory / "xla"
    if not xla.is_dir():
        return []
    manifest = _load_manifest(directory)
    changes: dict[str, list] = {}
    corrupt: list[str] = []
    present = set()
    for name, path, size, mtime in _entries(xla):
        present.add(name)
        record = manifest.get(name)
        if record and record[0] == size and record[1] == mtime:
            continue
        digest = _digest(path)
        ok = digest == record[2] if record else _decompresses(path)
        if ok:
            changes[name] = [size, mtime, digest]
            continue
        corrupt.append(name)
        path.unlink(missing_ok=True)
        (xla / (name[: -len(_SUFFIX)] + "-atime")).unlink(missing_ok=True)
    removed = (set(manifest) - present) | set(corrupt)
    _save_manifest(directory, changes, removed)
    if corrupt:
        warn(
            f"torch2xla: {len(corrupt)} corrupt persistent cache entr"
            f"{'y' if len(corrupt) == 1 else 'ies'} in {xla} deleted; they will be recompiled",
            PersistentCacheWarning,
        )
    return sorted(corrupt)


def record_new_entries() -> None:
    """Checksum the entries that have no record yet (after each compile: JAX just wrote them).

    Entries whose size or mtime changed since their record are left for ``verify``.
    """
    with _lock:
        if _active is None:
            return
        manifest = _load_manifest(_active)
        changes = {
            name: [size, mtime, _digest(path)]
            for name, path, size, mtime in _entries(_active / "xla")
            if name not in manifest
        }
        _save_manifest(_active, changes, set())


# -- hits ---------------------------------------------------------------------------------------
def _listener(event: str, **kwargs) -> None:
    global _hits
    if event == "/jax/compilation_cache/cache_hits":
        _hits += 1


def hits() -> int:
    """JAX persistent-cache hits so far in this process."""
    return _hits


jax.monitoring.register_event_listener(_listener)
