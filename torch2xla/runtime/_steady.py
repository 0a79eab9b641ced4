"""A steady call of an ahead-of-time executable without JAX's per-argument checks.

A ``jax.stages.Compiled`` is called through jaxlib's C++ ``pjit`` path (``_interop.direct_call``),
which checks every argument against the executable's signature on every call (its type,
dtype, shape, weak type, sharding and layout: ~0.3 us an argument, ~250 us of a compiled AdamW
step of 146 parameters, whose program takes 730 arguments). A CPU program's steady call passes
the very same ``jax.Array`` objects call after call (``ViewCache``'s cached views of its
parameters, buffers and optimizer state), and JAX arrays never change their signature. So once
the checked path has accepted a tuple of views, the same tuple runs the executable through
jaxlib's ``LoadedExecutable.execute_sharded`` and the executable's own result handlers (what
``pjit``'s path runs after its checks), without the checks. Its arguments are arrays already
made and its outputs' types and devices are the executable's (fixed when it was compiled,
inside ``x64()``), so a 64-bit CPU program's steady call runs outside ``x64()`` and the device
context, which imports and ``pjit``'s path need (``settled``: the cached tuple, found without
importing anything).

Used only where that path does nothing more: no hoisted constants, no effects or host
callbacks, no mutable arrays, every argument kept, flat argument and result trees, and JAX's
``debug_nans``/``debug_infs`` off (their checks run in ``pjit``'s path). Anything else, and any
jax whose internals are laid out otherwise (``SteadyCall.of`` returns None), calls through
``pjit`` as before (checked on jax 0.10.2; a jax without one of the internals ``of`` reads has
no steady call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import torch

from torch2xla.runtime._interop import ViewCache

try:  # (JAX's internals: every name is looked up, and a jax without them has no steady call)
    from jax._src import dispatch as _dispatch
    from jax._src.interpreters.pxla import ExecuteReplicated as _Replicated
except ImportError:  # pragma: no cover - a jax laid out otherwise
    _dispatch = _Replicated = None


class SteadyCall:
    """Runs an executable on arguments its checked call accepted before: ``run(args)
    .consume_with_handlers(handlers)`` (inlined by the caller: a frame less) for a tuple
    ``args`` of ``jax.Array`` that the checked call accepted, while ``special_checks()`` is
    false (``__call__`` is the same, with its frame)."""

    __slots__ = ("handlers", "run")

    def __init__(self, run, handlers: Sequence) -> None:
        self.run = run  # LoadedExecutable.execute_sharded
        self.handlers = list(handlers)

    @staticmethod
    def of(compiled: Any, num_args: int) -> SteadyCall | None:
        """The steady call of the ``jax.stages.Compiled`` ``compiled`` (taking ``seed`` None
        and ``num_args`` arrays, returning a flat sequence), or None where its call does more
        than run the executable and wrap its results, or where JAX's internals are not the
        ones this reads (another jax)."""
        if _Replicated is None or not isinstance(compiled, jax.stages.Compiled):
            return None
        try:
            return SteadyCall._of(compiled, num_args)
        except AttributeError:  # (a jax whose Compiled holds its executable otherwise)
            return None

    @staticmethod
    def _of(compiled: Any, num_args: int) -> SteadyCall | None:
        params, unsafe = compiled._params, compiled._executable.unsafe_call
        if not isinstance(unsafe, _Replicated):
            return None
        if (
            params.const_args  # (constants JAX hoisted out of the program: passed first)
            or unsafe.ordered_effects
            or unsafe.has_unordered_effects
            or unsafe.has_host_callbacks
            or unsafe.mut is not None
            or set(unsafe.kept_var_idx) != set(range(num_args))
        ):
            return None
        leaves = [0] * num_args
        if compiled.in_tree != jax.tree.structure(((None, *leaves), {})):
            return None
        handlers = unsafe.out_handler.handlers
        flat = [0] * len(handlers)
        if compiled.out_tree not in (jax.tree.structure(tuple(flat)), jax.tree.structure(flat)):
            return None
        run = unsafe.xla_executable.execute_sharded
        return SteadyCall(run, handlers)

    def __call__(self, args: tuple) -> list:
        """The executable's outputs for ``args``."""
        return self.run(args).consume_with_handlers(self.handlers)


def _always() -> bool:
    return True


# Whether JAX checks outputs for NaNs or infinities (``debug_nans``, ``debug_infs``), which its
# checked call does and the steady call does not (JAX's own function: no frame of ours).
special_checks = getattr(_dispatch, "needs_check_special", _always)


def steady_call(compiled: Any) -> SteadyCall | None:
    """``SteadyCall.of`` an executable taking ``(seed, *arrays)``, its count read off its
    argument tree (None for other trees)."""
    tree = getattr(compiled, "in_tree", None)
    if tree is None:
        return None
    return SteadyCall.of(compiled, tree.num_leaves)


def trusted(steady: SteadyCall | None, views: tuple, seed) -> SteadyCall | bool:
    """What ``_Fast.trusted`` becomes once the checked call accepted ``(seed, *views)``: the
    steady call where it can run them (no seed, every view a ``jax.Array``), else False."""
    if steady is None or seed is not None:
        return False
    return steady if all(isinstance(v, jax.Array) for v in views) else False


_data_ptr = torch.Tensor.data_ptr


def settled(cache: ViewCache, tensors: Sequence) -> tuple | None:
    """The cached tuple (``_Fast.views``) that ``cache(tensors, whole=True)`` would return
    (every tensor the cached one, in a cache that tracks no writes: a CPU program's), else
    None: found without importing anything, so outside ``x64()`` (a 64-bit CPU program's
    steady call, ``XlaProgram.__call__``). (``ViewCache.__call__``'s check, which it inlines.)"""
    if cache._writes:
        return None
    with cache._lock:
        fast = cache._fast
        if fast is None or fast.volatile:
            return None
        cached = fast.pick(tensors)
        if list(map(id, cached)) == fast.ids and list(map(_data_ptr, cached)) == fast.ptrs:
            return fast.views
        return None
