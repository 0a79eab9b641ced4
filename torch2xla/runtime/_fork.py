"""Processes forked from one whose JAX runtime had started: JAX cannot run there.

XLA's CPU client runs its compiles and programs on thread pools, and ``os.fork`` copies only
the forking thread: in the child a program's call or a compile waits forever on threads that
are gone, or aborts on a lock they held (``jax.extend.backend.clear_backends`` aborts too).
Eager PyTorch runs there (a DataLoader's workers, ``multiprocessing``'s default start method
on Linux), so torch2xla's compiled graphs run in eager PyTorch in such a child
(``CompiledGraph``), with one ``FallbackWarning``.

``started()`` marks that torch2xla started JAX in this process (at every compile); a fork
after that makes ``IN_CHILD`` true in the child.
"""

from __future__ import annotations

import os

# Whether torch2xla compiled or ran anything through JAX in this process (or its parent
# before a fork: a child's runtime is as unusable as its parent's was started).
STARTED = False
# Whether this process is a fork of one whose JAX runtime had started.
IN_CHILD = False


# A backward through a graph whose forward ran in the parent: its program is the parent's.
PARENT_GRAPH = (
    "torch2xla: this backward goes through a compiled graph whose forward ran before this "
    "process was forked, and XLA cannot run in a forked process (its threads do not survive "
    "the fork). Run the forward in this process (compiled graphs run in eager PyTorch here), "
    "or start the process with 'spawn' or 'forkserver'"
)


# Why compiled graphs run in eager PyTorch in such a child; ``warned``: said once.
REASON = (
    "this process was forked (os.fork, multiprocessing's 'fork' start method, DataLoader "
    "workers) from one where JAX had started, and XLA's threads do not survive a fork (its "
    "programs and compiles would wait forever): compiled graphs run in eager PyTorch here. "
    "Start processes with 'spawn' or 'forkserver' (multiprocessing.get_context('spawn'), "
    "DataLoader(..., multiprocessing_context='spawn')) to run XLA in them"
)
warned = False


def started() -> None:
    """Note that JAX's runtime has started in this process (called before each compile)."""
    global STARTED
    STARTED = True


def _after_in_child() -> None:
    global IN_CHILD
    IN_CHILD = IN_CHILD or STARTED


if hasattr(os, "register_at_fork"):  # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=_after_in_child)
