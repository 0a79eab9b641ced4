"""The JAX arrays behind torch tensors our CUDA programs exported, for handing them back to JAX
without a DLPack import.

A gradient an XLA backward returned is a torch tensor over a JAX buffer; the optimizer step
that reads it next passes it back to JAX. Imported again through DLPack, that costs ~8 us a
tensor, and measured on an H200 (Llama-1B training step, 146 gradients) the imports blocked
the host until the backward had finished on the GPU (~110 ms a step), so the optimizer's host
work could not overlap the backward. The array the tensor was made from is the same memory,
already ordered on JAX's stream: ``array_of`` gives it back while that is known to hold.

It holds while the tensor is the one exported (the same object, so the same shape, dtype and
strides), torch has not written to it since (its version counter: a write of torch's is on
torch's stream, which only an import orders JAX after), and the array is alive (not donated).
Callers use it only for arguments the program does not donate: JAX refuses to donate an
array whose memory torch still references.
"""

from __future__ import annotations

import functools
import weakref

import torch

# data pointer -> (weak reference to the exported tensor, the JAX array, its version then)
_EXPORTS: dict[int, tuple[weakref.ref, object, int]] = {}


def _forget(ptr: int, ref: weakref.ref) -> None:
    entry = _EXPORTS.get(ptr)
    if entry is not None and entry[0] is ref:
        del _EXPORTS[ptr]


def note(t: torch.Tensor, a) -> torch.Tensor:
    """Record that ``t`` was exported from the JAX array ``a``; returns ``t``."""
    ptr = t.data_ptr()
    _EXPORTS[ptr] = (weakref.ref(t, functools.partial(_forget, ptr)), a, t._version)
    return t


def forget(t: torch.Tensor) -> None:
    """Drop the record of ``t`` (its weak reference goes: ``_swap``)."""
    entry = _EXPORTS.get(t.data_ptr())
    if entry is not None and entry[0]() is t:
        del _EXPORTS[t.data_ptr()]


def array_of(t: torch.Tensor):
    """The JAX array ``t`` was exported from, where it still is ``t``'s value and ordered on
    JAX's stream (see the module); None otherwise."""
    entry = _EXPORTS.get(t.data_ptr())
    if entry is None or entry[0]() is not t or entry[2] != t._version:
        return None
    a = entry[1]
    return None if a.is_deleted() else a
