"""The persistent cache: compiled programs reused across processes.

torch2xla keeps its own store under ``<root>/<versions>``, where ``<root>`` is
``$TORCH2XLA_CACHE_DIR`` or the user cache directory (``~/.cache/torch2xla`` on Linux) and
``<versions>`` names the torch, jax, jaxlib and torch2xla versions. ``TORCH2XLA_PERSISTENT_CACHE=0``
or ``torch2xla.set_persistent_cache(None)`` switches it off. JAX's own persistent cache is left
as the user configured it (torch2xla no longer points it anywhere).

Two kinds of entries, one file each:

- ``programs/<key>``: one XLA executable (``jax.experimental.serialize_executable``), keyed by
  the lowered StableHLO text, its argument and result trees (jit drops unused arguments: one
  text may map its parameters to other arguments), the XLA options, the device and the
  environment (``environment``). Every compile of torch2xla goes through ``compile`` and finds its
  executable here when another process compiled the same module: XLA's compile is skipped.
- ``graphs/<key>``: one signature of a Dynamo graph (``torch2xla/runtime/_stored.py``): what its first
  call compiled, the keys of those executables, and what is needed to call them, keyed by the
  Dynamo graph, its inputs, the options, torch's global state, the environment and a digest
  of torch2xla's source. A hit skips the ATen export, JAX's tracing and lowering as well.

Keys hold no path, so a cache copied or moved elsewhere still hits. Every entry verifies
itself: it starts with its own key and a blake2b digest of key and payload, so an entry under
another entry's name (swapped, copied over), a torn or truncated write, or any corruption is
seen when it is read; it is then ignored (logged, deleted where possible) and recompiled.
Files are written to a temporary name and renamed, without write permission for others
whatever the umask. A location that cannot be used (read-only, not a directory, out of space)
gives one ``PersistentCacheWarning``; the process then runs without the persistent cache.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.metadata
import logging
import os
import pathlib
import re
import sys
import threading

import jax
import torch

from torch2xla._errors import warn
from torch2xla._options import env_flag

CACHE_DIR_ENV = "TORCH2XLA_CACHE_DIR"
SWITCH_ENV = "TORCH2XLA_PERSISTENT_CACHE"
_UNSET = object()
FORMAT = 1  # bumped when the layout of an entry or of a graph record changes

log = logging.getLogger("torch2xla")


class PersistentCacheWarning(UserWarning):
    """The persistent cache could not be used (the run goes on without it), or held a corrupt
    or mismatched entry (ignored and recompiled)."""


_lock = threading.RLock()
_explicit: object = _UNSET  # set_persistent_cache(...) overrides the environment
_wanted_path: pathlib.Path | None = None  # what the settings asked for when last activated
_store: Store | None = None  # the usable store (None: off, or the location is unusable)
_hits = 0  # entries loaded from the persistent cache in this process
_warned_corrupt = False


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
    elif not env_flag(SWITCH_ENV, True):
        root = None
    else:
        root = default_root()
    return None if root is None else pathlib.Path(root) / version_tag()


def set_persistent_cache(directory: str | os.PathLike | None) -> pathlib.Path | None:
    """Use ``directory`` for the persistent cache, or switch it off with None.

    Entries go to a subdirectory named after the torch, jax, jaxlib and torch2xla versions.
    Takes effect for compiles from now on; overrides ``TORCH2XLA_CACHE_DIR`` and
    ``TORCH2XLA_PERSISTENT_CACHE``. Returns the versioned directory (None when off, or when
    the directory cannot be used: a ``PersistentCacheWarning`` says why).

    Example::

        torch2xla.set_persistent_cache("/scratch/xla-cache")
        torch2xla.set_persistent_cache(None)  # off
    """
    global _explicit
    with _lock:
        _explicit = None if directory is None else pathlib.Path(directory).expanduser()
        store = activate()
        return None if store is None else store.path


def persistent_cache_dir() -> pathlib.Path | None:
    """The directory of the persistent cache in use, or None when it is off or unusable."""
    store = activate()
    return None if store is None else store.path


def activate() -> Store | None:
    """The store the settings ask for (called before every compile); None when off or unusable.

    A location that cannot be used warns once (``PersistentCacheWarning``) and is not tried
    again until the settings change.
    """
    global _wanted_path, _store
    with _lock:
        wanted = _wanted()
        if wanted == _wanted_path:
            return _store
        _wanted_path, _store = wanted, None
        if wanted is None:
            return None
        try:
            store = Store(wanted)
        except OSError as e:
            _unusable(wanted, e)
            return None
        _store = store
        return store


def store() -> Store | None:
    """The store in use, without looking at the settings again (None: off or unusable)."""
    return _store


def _unusable(path: pathlib.Path, error: OSError, failed: Store | None = None) -> None:
    """Warn once that ``path`` cannot be used, and run on without the persistent cache
    (``failed``: the store whose write failed)."""
    global _store
    if failed is not None:
        with _lock:
            if failed.broken:
                return  # warned already (another thread's write failed first)
            failed.broken = True
            if _store is failed:
                _store = None
    reason = error.strerror or str(error)
    if error.errno == errno.ENOSPC:
        reason = "no space left on the device"
    _warn(
        f"torch2xla: the persistent cache at {path} cannot be used ({type(error).__name__}: "
        f"{reason}); this process runs without it, compiling every program. Point "
        f"{CACHE_DIR_ENV} (or torch2xla.set_persistent_cache) at a writable directory, or set "
        f"{SWITCH_ENV}=0 to switch it off."
    )


def _warn(message: str) -> None:
    """A ``PersistentCacheWarning`` attributed to the user's line that led to the compile."""
    warn(message, PersistentCacheWarning)


# -- the store ---------------------------------------------------------------------------------
_MAGIC = b"torch2xla-cache\x01"
_KEY_LEN = 64  # hex digits of a blake2b-256 key
_DIGEST_LEN = 32
PROGRAMS, GRAPHS = "programs", "graphs"
_DIR_MODE = 0o755  # no write permission for others, whatever the umask (23.7)
_FILE_MODE = 0o644


def key_of(*parts: bytes | str) -> str:
    """A blake2b-256 hex key of ``parts`` (each length-prefixed, so no two lists collide)."""
    h = hashlib.blake2b(digest_size=_KEY_LEN // 2)
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _entry_digest(key: bytes, payload: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=_DIGEST_LEN)
    h.update(_MAGIC)
    h.update(key)
    h.update(payload)
    return h.digest()


class Store:
    """The versioned directory: ``read``/``write`` verified entries of a kind by key."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.broken = False
        for d in (path, path / PROGRAMS, path / GRAPHS):
            _mkdirs(d)
        # A probe write: a read-only mount or a directory we may not write fails here, once.
        probe = path / f".probe-{os.getpid()}-{threading.get_ident()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
        try:
            os.write(fd, b"ok")
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)

    def read(self, kind: str, key: str) -> bytes | None:
        """The payload of entry ``key``, or None when absent or not sound (then logged and
        deleted: it will be recompiled and written again)."""
        path = self.path / kind / key
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning(
                "torch2xla: persistent cache entry %s could not be read (%s); recompiling", path, e
            )
            return None
        head = len(_MAGIC) + _KEY_LEN + _DIGEST_LEN
        problem = None
        if len(data) < head or not data.startswith(_MAGIC):
            problem = "not a torch2xla cache entry, or truncated"
        else:
            stored_key = data[len(_MAGIC) : len(_MAGIC) + _KEY_LEN]
            digest = data[len(_MAGIC) + _KEY_LEN : head]
            payload = data[head:]
            if stored_key != key.encode():
                problem = "it is the entry of another program (moved or swapped)"
            elif _entry_digest(stored_key, payload) != digest:
                problem = "its contents do not match its digest (torn write or corruption)"
        if problem is not None:
            self.reject(kind, key, problem)
            return None
        return payload

    def reject(self, kind: str, key: str, problem: str) -> None:
        """Log and delete a bad entry (it is recompiled and written again)."""
        global _warned_corrupt
        path = self.path / kind / key
        log.warning("torch2xla: persistent cache entry %s ignored: %s; recompiling", path, problem)
        try:
            path.unlink(missing_ok=True)
        except OSError as e:  # a read-only cache: the entry stays, and is ignored each time
            log.debug("torch2xla: could not delete %s: %s", path, e)
        with _lock:
            first, _warned_corrupt = not _warned_corrupt, True
        if first:
            _warn(
                f"torch2xla: a corrupt or mismatched persistent cache entry was ignored "
                f"({path}: {problem}); it is recompiled (later ones are logged only)"
            )

    def write(self, kind: str, key: str, payload: bytes) -> bool:
        """Write entry ``key`` atomically; False (after one warning, the cache off for this
        process) when the location fails."""
        if self.broken:
            return False
        final = self.path / kind / key
        tmp = final.with_name(f".{key}.{os.getpid()}.{threading.get_ident()}.tmp")
        k = key.encode()
        try:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
            except FileNotFoundError:  # the directory was removed meanwhile: made again
                _mkdirs(final.parent)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _FILE_MODE)
            try:
                for part in (_MAGIC, k, _entry_digest(k, payload), payload):
                    _write_all(fd, part)
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except OSError as e:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                log.debug("torch2xla: could not delete %s", tmp)
            _unusable(self.path, e, self)
            return False
        return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _mkdirs(path: pathlib.Path) -> None:
    """``mkdir -p`` with mode 0755 for every directory it creates (a umask of 0 would give
    0777 to ``Path.mkdir(parents=True)``'s parents); raises OSError when ``path`` is not a
    usable directory."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, _DIR_MODE)
        except FileExistsError:
            pass  # made by another process meanwhile (checked below)
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))


def count_hit(n: int = 1) -> None:
    """Count ``n`` executables taken from the persistent cache (when they are used: a
    background load that is never used does not count)."""
    global _hits
    with _lock:
        _hits += n


def hits() -> int:
    """Executables taken from the persistent cache so far in this process."""
    return _hits


# -- keys: the environment ----------------------------------------------------------------------
# jax config values that do not change what a program computes (logging, caches, dumps,
# tracebacks) and may hold paths: left out of keys.
_JAX_IGNORED = (
    "jax_compilation_cache",
    "jax_persistent_cache",
    "jax_enable_compilation_cache",
    "jax_raise_persistent_cache",
    "jax_log",
    "jax_explain",
    "jax_dump",
    "jax_pprint",
    "jax_traceback",
    "jax_include_",
    "jax_tracer_error",
    "jax_debug_log",
    "jax_source_url",
    "jax_hlo_source_file",
    "jax_compiler_detailed_logging",
    "jax_captured_constants",
    # (pinned to their defaults around our traces and calls: ``runtime/_jax_scope._PINNED``)
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_disable_jit",
    "jax_default_matmul_precision",
    "jax_transfer_guard",
)
# torch2xla's environment variables that do not change programs.
_ENV_IGNORED = frozenset(
    {
        CACHE_DIR_ENV,
        SWITCH_ENV,
        "TORCH2XLA_LOG",
        "TORCH2XLA_DUMP_DIR",
        "TORCH2XLA_TRACEBACK",
        "TORCH2XLA_STRICT",
    }
)


def environment() -> str:
    """What every key holds besides its program: versions, XLA's flags, JAX's configuration
    and torch2xla's environment variables (never a path of the cache)."""
    import jaxlib

    values = jax.config.values
    config = sorted((k, repr(v)) for k, v in values.items() if not k.startswith(_JAX_IGNORED))
    env = sorted(
        (k, v)
        for k, v in os.environ.items()
        if (k.startswith("TORCH2XLA_") and k not in _ENV_IGNORED) or k == "XLA_FLAGS"
    )
    return repr(
        (
            FORMAT,
            sys.version_info[:2],
            torch.__version__,
            jax.__version__,
            jaxlib.__version__,
            config,
            env,
        )
    )


def device_tag(device: jax.Device) -> str:
    """The device an executable is compiled for and loaded on."""
    return repr(
        (
            device.platform,
            device.device_kind,
            device.client.platform_version,
            device.id,
            device.process_index,
        )
    )


# -- executables --------------------------------------------------------------------------------
def compile(lowered, compiler_options: dict | None, device: jax.Device):
    """``lowered.compile()`` through the persistent cache. Returns ``(compiled, key)``, key
    None where the executable cannot be stored (host callbacks, hoisted constants).

    ``compiler_options`` must be those the jit was created with, and ``device`` the one the
    program runs on: both are part of the key, with the StableHLO text.
    """
    store = activate()
    if store is None:
        return lowered.compile(), None
    text = lowered.as_text()
    if _CALLBACK.search(text):  # host callbacks are Python objects of this process
        return lowered.compile(), None
    if _num_parameters(text) != lowered.in_tree.num_leaves:
        # NOTE: jit dropped unused arguments (jit's default ``keep_unused=False``; torch2xla's
        # own jits keep them): the text does not say which arguments its parameters are, so
        # ``f(y, z) -> 2 * y`` and ``f(y, z) -> 2 * z`` have one text and one argument tree,
        # and the second loaded the first's executable, which read y where z was (a training
        # forward whose graph read only its second input returned its first input's values).
        return lowered.compile(), None
    # (the argument and result trees too: a stored executable maps them to its parameters,
    # and jit drops unused arguments, so one StableHLO text serves functions whose arguments
    # are grouped otherwise: ``y.copy_(z)`` differentiated in y and z, or in z alone)
    key = key_of(
        "executable",
        environment(),
        device_tag(device),
        repr(sorted((compiler_options or {}).items())),
        _tree(lowered.in_tree),
        _tree(lowered.out_tree),
        text,
    )
    compiled = load_executable(store, key, lowered.in_tree, lowered.out_tree, device)
    if compiled is not None:
        count_hit()
        return compiled, key
    compiled = lowered.compile()
    return compiled, (key if save_executable(store, key, compiled) else None)


def _num_parameters(text: str) -> int:
    """The number of parameters of the StableHLO ``text``'s ``main`` (-1 where not found)."""
    start = text.find("@main(")
    if start < 0:
        return -1
    depth, i = 0, start + len("@main")
    for i in range(start + len("@main"), len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            break
    return len(_PARAMETER.findall(text, start, i))


_PARAMETER = re.compile(r"%arg\d+:")


def _tree(treedef) -> str:
    """A pytree structure's text without the addresses its custom nodes' data print."""
    return _ADDRESS.sub("", repr(treedef))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def compile_any(lowered, compiler_options: dict | None, device: jax.Device | None):
    """``compile`` for a ``jax.stages.Lowered``; torch2xla's own lowered stages (the training
    forward's) compile through the cache themselves and carry their key as ``exe_key``."""
    if device is not None and isinstance(lowered, jax.stages.Lowered):
        return compile(lowered, compiler_options, device)
    compiled = lowered.compile()
    return compiled, getattr(compiled, "exe_key", None)


_CALLBACK = re.compile(r"custom_call_target\s*=\s*\"[^\"]*callback|@[A-Za-z_]*callback")


def load_executable(store: Store, key: str, in_tree, out_tree, device: jax.Device):
    """The stored executable ``key`` loaded on ``device`` (None when absent or unsound)."""
    from jax.experimental import serialize_executable

    payload = store.read(PROGRAMS, key)
    if payload is None:
        return None
    _load_lapack(device.platform)
    try:
        compiled = serialize_executable.deserialize_and_load(
            payload, in_tree, out_tree, backend=device.client, execution_devices=[device]
        )
    except Exception as e:  # noqa: BLE001  (whatever the loader raises: the entry is unusable)
        store.reject(PROGRAMS, key, f"it could not be loaded ({type(e).__name__}: {e})")
        return None
    return compiled


@functools.cache
def _load_lapack(platform: str) -> None:
    """Points jaxlib's CPU LAPACK kernels (``lu``, ``qr``, ``eigh``, ``svd``, triangular solves:
    ``torch.linalg.*``, ``matrix_exp``, orthogonal parametrizations) at scipy's LAPACK; on a
    GPU, its hybrid kernels (``eig``, computed on the host).

    NOTE: jaxlib does this while it lowers a program that calls them, and a program loaded
    from the store was not lowered in this process: until something else lowered one, its
    first call jumped to a null kernel (a segmentation fault at a warm start's first
    ``torch.linalg.solve``). ``jax.export`` does the same before it runs a deserialized
    module. ``prepare_lapack_call`` is jaxlib's entry for it; where a jaxlib lacks it, the
    lowering of a 1x1 ``lu`` does it (~0.5 s, once)."""
    import numpy as np

    if platform != "cpu":
        try:
            from jaxlib import gpu_solver

            init = gpu_solver.initialize_hybrid_kernels
        except (ImportError, AttributeError):
            return
        init()
        return
    try:
        from jaxlib import lapack

        lapack.prepare_lapack_call("getrf", np.dtype(np.float32))
    except (ImportError, AttributeError, KeyError, TypeError):
        cpu = jax.devices("cpu")[0]
        one = jax.ShapeDtypeStruct(
            (1, 1), np.float32, sharding=jax.sharding.SingleDeviceSharding(cpu)
        )
        jax.jit(jax.lax.linalg.lu).lower(one)


def save_executable(store: Store, key: str, compiled) -> bool:
    """Write ``compiled`` under ``key``; False where it cannot be serialized or written."""
    from jax.experimental import serialize_executable

    try:
        payload, _, _ = serialize_executable.serialize(compiled)
    except (ValueError, NotImplementedError, TypeError) as e:
        log.debug("torch2xla: executable not stored in the persistent cache: %s", e)
        return False
    return store.write(PROGRAMS, key, payload)
