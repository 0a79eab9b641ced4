"""Counts JAX work run eagerly, outside any compiled program: each such op dispatches its own
small executable (and copies its Python scalars to the device), ~0.3-0.5 ms of host time on a
GPU machine. Steady calls of compiled graphs should run none.

Counted: primitives bound on concrete arrays (``jnp.zeros(3)``, ``x.astype(...)``, ``x[1:]``)
and jax's own jitted helpers called from Python (``jnp.ravel``, ``jnp.where``). Not counted:
calls of programs that torch2xla (or the user) jitted or compiled. Traces and compilations
of JAX functions (a jit made anew on every call) are counted apart (``compiles``).
"""

from __future__ import annotations

import collections
import contextlib
import traceback
from collections.abc import Iterator

import jax
from jax._src import core, dispatch, pjit

_COMPILE_EVENTS = (dispatch.JAXPR_TRACE_EVENT, dispatch.BACKEND_COMPILE_EVENT)


class EagerOps:
    def __init__(self) -> None:
        self.ops: collections.Counter = collections.Counter()  # op name -> executions
        self.where: collections.Counter = collections.Counter()  # (op, torch2xla frames) -> n
        self.compiles: collections.Counter = collections.Counter()  # (event, function) -> n

    def total(self) -> int:
        return sum(self.ops.values())

    def _count(self, name: str, stacks: bool) -> None:
        self.ops[name] += 1
        if stacks:
            frames = [f for f in traceback.extract_stack()[:-2] if "torch2xla" in f.filename]
            at = tuple(f"{f.filename.rsplit('torch2xla/', 1)[-1]}:{f.lineno}" for f in frames[-3:])
            self.where[(name, at)] += 1

    @contextlib.contextmanager
    def watch(self, stacks: bool = False) -> Iterator[EagerOps]:
        """Counts while inside. jit's C++ fast path is off meanwhile (every call of a jitted
        function goes through Python, where it can be seen); its caches are cleared on entry
        and exit, so no call is served by an entry made before or during the watch."""
        process, run, fastpath = (
            core.EvalTrace.process_primitive,
            pjit._run_python_pjit,
            pjit._get_fastpath_data,
        )

        def counting_process(trace, prim, args, params, /):
            self._count(prim.name, stacks)
            return process(trace, prim, args, params)

        def counting_run(p, args_flat, fun, args, kwargs):
            # jax's own jitted helpers; a primitive's own program was counted as its bind
            mod = getattr(fun, "__module__", None) or ""
            if (
                mod.split(".")[0] == "jax"
                and not getattr(fun, "_apply_primitive", False)
                and core.trace_state_clean()  # (not traced into a program being built)
            ):
                self._count(f"jit:{getattr(fun, '__name__', fun)}", stacks)
            return run(p, args_flat, fun, args, kwargs)

        def compiled(event, duration, **kwargs):
            if event in _COMPILE_EVENTS:
                self.compiles[(event, kwargs.get("fun_name"))] += 1

        def clear():
            pjit._cpp_pjit_cache_fun_only.clear()
            pjit._cpp_pjit_cache_explicit_attributes.clear()

        core.EvalTrace.process_primitive = counting_process
        pjit._run_python_pjit = counting_run
        pjit._get_fastpath_data = lambda *a, **k: None
        jax.monitoring.register_event_duration_secs_listener(compiled)
        clear()
        try:
            yield self
        finally:
            core.EvalTrace.process_primitive = process
            pjit._run_python_pjit = run
            pjit._get_fastpath_data = fastpath
            jax.monitoring.unregister_event_duration_listener(compiled)
            clear()
