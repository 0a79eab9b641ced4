"""torch's process state that the export and the lowerings read: described in a stored
signature's key (``_stored_key``), and taken when a signature is restored, so that what its
record does not hold is built later under the state the first build saw.

A restored signature builds the rest of its program (export, lowering, tracing) at its first
need (``_stored.StoredProgram.full``): a backward that keeps the graph, another set of
differentiated inputs. That may run under other state than the call that built the signature
(a backward runs with grad mode off: the export then saw no ``.detach()``, and the rebuilt
forward kept other residuals than the stored one). ``BuildState`` puts the state back for it.

Each switch is ``(name, get, set)``; ``set`` None where it cannot be set (the CPU capability,
read from the environment at import: the key holds it all the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch._functorch.config as functorch_config

_cuda = torch.backends.cuda
_cudnn = torch.backends.cudnn


def _attr(obj: Any, name: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    return (lambda: getattr(obj, name)), (lambda v: setattr(obj, name, v))


def _autocast(device: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    def get():
        return torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)

    def set_(v):
        torch.set_autocast_enabled(device, v[0])
        torch.set_autocast_dtype(device, v[1])

    return get, set_


def _deterministic_get():
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )


def _deterministic_set(v) -> None:
    torch.use_deterministic_algorithms(v[0], warn_only=v[1])


def _opt_einsum_get():
    return torch.backends.opt_einsum.enabled, torch.backends.opt_einsum.strategy


def _opt_einsum_set(v) -> None:
    # (torch refuses a strategy while opt_einsum is disabled; it keeps it when disabled)
    oe = torch.backends.opt_einsum
    if v[1] is not None and oe.strategy != v[1]:
        oe.enabled = True
        oe.strategy = v[1]
    if oe.enabled != v[0]:
        oe.enabled = v[0]


def _functorch_get():
    return functorch_config.get_config_copy()


def _functorch_set(v: dict) -> None:
    current = functorch_config.get_config_copy()
    for k, value in v.items():
        if current.get(k) != value:
            setattr(functorch_config, k, value)


SWITCHES: tuple[tuple[str, Callable[[], Any], Callable[[Any], None] | None], ...] = (
    ("grad", torch.is_grad_enabled, torch._C._set_grad_enabled),
    ("autocast_cpu", *_autocast("cpu")),
    ("autocast_cuda", *_autocast("cuda")),
    ("autocast_cache", torch.is_autocast_cache_enabled, torch.set_autocast_cache_enabled),
    ("default_dtype", torch.get_default_dtype, torch.set_default_dtype),
    ("deterministic", _deterministic_get, _deterministic_set),
    (
        "fill_uninitialized_memory",
        torch._C._get_deterministic_fill_uninitialized_memory,
        torch._C._set_deterministic_fill_uninitialized_memory,
    ),
    (
        "matmul_precision",
        torch.get_float32_matmul_precision,
        torch.set_float32_matmul_precision,
    ),
    ("matmul_tf32", *_attr(_cuda.matmul, "allow_tf32")),
    ("matmul_fp16_reduced", *_attr(_cuda.matmul, "allow_fp16_reduced_precision_reduction")),
    ("matmul_bf16_reduced", *_attr(_cuda.matmul, "allow_bf16_reduced_precision_reduction")),
    ("cudnn", *_attr(_cudnn, "enabled")),
    ("cudnn_tf32", *_attr(_cudnn, "allow_tf32")),
    ("cudnn_deterministic", *_attr(_cudnn, "deterministic")),
    ("flash_sdp", _cuda.flash_sdp_enabled, _cuda.enable_flash_sdp),
    ("mem_efficient_sdp", _cuda.mem_efficient_sdp_enabled, _cuda.enable_mem_efficient_sdp),
    ("math_sdp", _cuda.math_sdp_enabled, _cuda.enable_math_sdp),
    ("cudnn_sdp", _cuda.cudnn_sdp_enabled, _cuda.enable_cudnn_sdp),
    ("mkldnn", torch._C._get_mkldnn_enabled, torch._C._set_mkldnn_enabled),
    # the export's einsum contraction order (``capture/_untracked.py``)
    ("opt_einsum", _opt_einsum_get, _opt_einsum_set),
    # read by lowerings that follow eager's CPU kernels: which elements take the vectorized
    # loop (``ops/_loops.py``: the walk is cut per thread above GRAIN_SIZE) and the vector
    # width (``ops/_arithmetic.py``); Dynamo guards the thread count of one process, a record
    # is read by others
    ("threads", torch.get_num_threads, torch.set_num_threads),
    ("cpu_capability", torch.backends.cpu.get_cpu_capability, None),
    ("functorch", _functorch_get, _functorch_set),
)


def describe() -> str:
    """The state as a stored signature's key holds it (inference mode too, which a build
    under it cannot leave: ``BuildState`` does not set it)."""
    values = [(name, get()) for name, get, _ in SWITCHES]
    values.append(("inference_mode", torch.is_inference_mode_enabled()))
    return repr(
        [
            (n, sorted((k, repr(x)) for k, x in v.items()) if isinstance(v, dict) else v)
            for n, v in values
        ]
    )


class BuildState:
    """The state now (taken at construction); ``with`` it, the state is that again, and is put
    back as it was at the end. Re-entrant across threads only as torch's own switches are:
    it is used around a build that holds the build lock."""

    def __init__(self) -> None:
        self._values = [(s, s[1]()) for s in SWITCHES if s[2] is not None]
        self._inference = torch.is_inference_mode_enabled()
        self._entered: list = []  # per entry not exited yet: (what to set back, the mode)

    def __enter__(self) -> BuildState:
        undo = []
        try:
            for (_, get, set_), value in self._values:
                now = get()
                if now != value:
                    set_(value)
                    undo.append((set_, now))
        except BaseException:
            _apply(undo)
            raise
        # (inference mode is a scope, not a switch)
        mode = torch.inference_mode(self._inference)
        try:
            mode.__enter__()
        except BaseException:
            _apply(undo)
            raise
        self._entered.append((undo, mode))
        return self

    def __exit__(self, *exc) -> None:
        undo, mode = self._entered.pop()
        try:
            mode.__exit__(*exc)
        finally:
            _apply(undo)


def _apply(undo: list) -> None:
    for set_, value in reversed(undo):
        set_(value)


__all__ = ["SWITCHES", "BuildState", "describe"]
