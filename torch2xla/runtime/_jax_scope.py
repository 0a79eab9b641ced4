"""The JAX configuration our traces, compiles and calls run under (``x64()``): 64-bit types on,
and the switches a user may set globally in JAX (rank and dtype promotion, NaN/inf checks,
``disable_jit``, matmul precision, transfer guards) at JAX's defaults, so that a program
computes what eager PyTorch does whatever else the process runs in JAX. ``unchecked()`` pins
the call-time switches around one call of a program."""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any

import jax

# x64 is scoped to our own tracing and calls; the user's global JAX config is never touched.
_x64_only = functools.partial(jax.enable_x64, True)


class _Read:
    """A switch of ``jax.config`` read by name (``.value``), where JAX has no State object."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def value(self) -> Any:
        return getattr(jax.config, self.name)


def _state(public: Any, name: str) -> Any:
    """JAX's State object of its switch ``name`` (``.value``: a C++ property, read without a
    Python frame on a call's hot path), or a ``_Read`` of it."""
    if hasattr(public, "value"):
        return public
    try:  # (``jax.disable_jit`` is a function: its State is internal)
        from jax._src import config as _config

        return getattr(_config, name)
    except (ImportError, AttributeError):  # pragma: no cover - a jax laid out otherwise
        return _Read(f"jax_{name}")


# The rest of JAX's configuration that our lowerings and calls assume: a notebook that also
# runs JAX code may set any of it globally (or in a ``with`` around a compiled call), where eager
# PyTorch never sees it. With rank promotion "raise", a LayerNorm's lowering failed; with
# ``debug_nans``, an output eager returns as NaN raised FloatingPointError; under
# ``disable_jit``, a training forward's two traces differed and an ahead-of-time executable
# refused to run; ``default_matmul_precision`` changes every dot and convolution our lowerings
# leave at JAX's default precision (a GPU's float32 matmuls). Each: its State, its default, its
# scoped switch.
RANKS = _state(jax.numpy_rank_promotion, "numpy_rank_promotion")
PROMOTION = _state(jax.numpy_dtype_promotion, "numpy_dtype_promotion")
NANS = _state(jax.debug_nans, "debug_nans")
INFS = _state(jax.debug_infs, "debug_infs")
NO_JIT = _state(jax.disable_jit, "disable_jit")
PRECISION = _state(jax.default_matmul_precision, "default_matmul_precision")
# (``jax_transfer_guard`` sets all three: a guard "disallow" refused our imports of inputs)
H2D = _state(jax.transfer_guard_host_to_device, "transfer_guard_host_to_device")
D2H = _state(jax.transfer_guard_device_to_host, "transfer_guard_device_to_host")
D2D = _state(jax.transfer_guard_device_to_device, "transfer_guard_device_to_device")
_PINNED = (
    (RANKS, "allow", functools.partial(jax.numpy_rank_promotion, "allow")),
    (PROMOTION, "standard", functools.partial(jax.numpy_dtype_promotion, "standard")),
    (NANS, False, functools.partial(jax.debug_nans, False)),
    (INFS, False, functools.partial(jax.debug_infs, False)),
    (NO_JIT, False, functools.partial(jax.disable_jit, False)),
    (PRECISION, None, functools.partial(jax.default_matmul_precision, None)),
    (H2D, None, functools.partial(jax.transfer_guard_host_to_device, "allow")),
    (D2H, None, functools.partial(jax.transfer_guard_device_to_host, "allow")),
    (D2D, None, functools.partial(jax.transfer_guard_device_to_device, "allow")),
)


def x64() -> contextlib.AbstractContextManager:
    """The scope of our tracing, compiles and calls: 64-bit types on, and the switches of
    ``_PINNED`` at their defaults where the user changed them."""
    if (
        RANKS.value == "allow"
        and PROMOTION.value == "standard"
        and not (NANS.value or INFS.value or NO_JIT.value)
        and PRECISION.value is None
        and not (H2D.value or D2H.value or D2D.value)
    ):
        return _x64_only()
    return _pinned(_x64_only())


class _Pinning(threading.local):
    on = False  # (inside ``unchecked()``: a guard pinned "allow" still reads as on)


PINNING = _Pinning()


def switched() -> bool:
    """Whether one of the switches ``unchecked()`` pins is on, outside ``unchecked()`` (our
    hot paths read it inline: no frame)."""
    return bool(
        (NANS.value or INFS.value or NO_JIT.value or H2D.value or D2H.value or D2D.value)
        and not PINNING.on
    )


@contextlib.contextmanager
def unchecked():
    """The switches that change how a compiled program is called (``debug_nans``,
    ``debug_infs``, ``disable_jit``, the transfer guards: "allow", as None falls back to
    ``jax_transfer_guard``) at their defaults, around one call of a program, where
    ``switched()``."""
    before, PINNING.on = PINNING.on, True
    try:
        with _pinned(contextlib.nullcontext()):
            yield
    finally:
        PINNING.on = before


@contextlib.contextmanager
def _pinned(first: contextlib.AbstractContextManager):
    with contextlib.ExitStack() as stack:
        stack.enter_context(first)
        for state, default, switch in _PINNED:
            if state.value != default:
                stack.enter_context(switch())
        yield
