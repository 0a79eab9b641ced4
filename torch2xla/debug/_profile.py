"""Profiling: a named range per compiled call, and JAX profiler traces of a region.

Every call of a compiled graph appears in ``torch.profiler`` traces as a range named
``torch2xla:graph_N`` (``torch2xla:graph_N:backward`` for its backward), the name the graph has
in ``explain``, dumps and errors. The range costs one check per call when no profiler runs.

``torch2xla.profile(log_dir)`` captures a JAX profiler trace (XLA's own view: executables,
thunks, host transfers) of the code it wraps, with the same names annotated.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import jax
from torch.autograd import _profiler_enabled
from torch.autograd.profiler import record_function

# True while torch2xla.profile() captures a JAX trace; read on every call, so a plain global.
_jax_tracing = False


def ranged(program, args):
    """``program(args)`` (an ``XlaProgram``) inside a range named after the program's graph:
    what its ``__call__`` runs while a profiler runs."""
    with _ranges(getattr(program, "label", "torch2xla")):
        return program(args, True)


def profiled_backward(backward: Callable) -> Callable:
    """Decorate ``XlaFunction.backward``: a ``<label>:backward`` range around it."""

    @functools.wraps(backward)
    def wrapper(ctx, *grads, **kwargs):
        if not (_jax_tracing or _profiler_enabled()):
            return backward(ctx, *grads, **kwargs)
        label = getattr(ctx.plan.program, "label", "torch2xla")
        with _ranges(f"{label}:backward"):
            return backward(ctx, *grads, **kwargs)

    return wrapper


@contextlib.contextmanager
def _ranges(name: str) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if _profiler_enabled():
            stack.enter_context(record_function(name))
        if _jax_tracing:
            stack.enter_context(jax.profiler.TraceAnnotation(name))
        yield


@contextlib.contextmanager
def profile(log_dir: str | os.PathLike, *, create_perfetto_trace: bool = False) -> Iterator[Any]:
    """Capture a JAX profiler trace of the wrapped region into ``log_dir``.

    Each compiled call inside the region is annotated with its graph's name
    (``torch2xla:graph_N``). View the trace with TensorBoard's profile plugin or XProf, or pass
    ``create_perfetto_trace=True`` for a file that https://ui.perfetto.dev opens. To see
    torch2xla's calls next to PyTorch's own ops, use ``torch.profiler.profile`` instead (or
    around this): the same names appear there.

    Example::

        with torch2xla.profile("/tmp/trace"):
            for _ in range(3):
                compiled_model(x)
    """
    global _jax_tracing
    if _jax_tracing:
        raise RuntimeError("torch2xla.profile: a JAX trace is already being captured")
    with jax.profiler.trace(os.fspath(log_dir), create_perfetto_trace=create_perfetto_trace):
        _jax_tracing = True
        try:
            yield
        finally:
            _jax_tracing = False
