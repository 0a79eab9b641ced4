"""The C allocator's reuse of freed memory, for programs that run on the CPU.

XLA's CPU programs allocate their temporary buffer on every call (a BatchNorm CNN's training
backward: 52 MB). glibc's malloc serves a block above its mmap threshold (at most 32 MB) with
a fresh mapping and unmaps it on free, so every call touched that memory afresh: ~20k page
faults a training step against eager's 4-11k, a third of the step's time on a loaded VM
(benchmarks/analysis.md, "Session 12: issue 25's BatchNorm CNN"). With the threshold at 256 MB
and freed memory kept up to 512 MB at the heap's top (``tune``), the buffer is reused: 5-6k
faults a step.

Done once, when the first CPU program is built, and only where the process runs glibc and the
user has not chosen an allocator or its settings (``GLIBC_TUNABLES`` with malloc settings,
``MALLOC_*_`` variables, jemalloc or tcmalloc preloaded). The cost: up to that much freed
memory stays with the process instead of going back to the system, as with jemalloc or
torch's own caching allocators. ``TORCH2XLA_MALLOC_TUNING=0`` leaves malloc as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 20
TRIM_THRESHOLD = 512 << 20

_done = False


def user_chose() -> bool:
    """Whether the process's allocator or its settings were chosen by the user."""
    env = os.environ
    if env.get("TORCH2XLA_MALLOC_TUNING", "1") == "0":
        return True
    if "malloc" in env.get("GLIBC_TUNABLES", ""):
        return True
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in env):
        return True
    preload = env.get("LD_PRELOAD", "")
    return "jemalloc" in preload or "tcmalloc" in preload or "mimalloc" in preload


def tune() -> bool:
    """Raise glibc's mmap and trim thresholds once (see the module's doc); whether it did now."""
    global _done
    if _done:
        return False
    _done = True
    if not sys.platform.startswith("linux") or user_chose():
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return False
    # (glibc's mallopt only: other C libraries' take other parameters)
    if not (hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt")):
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
