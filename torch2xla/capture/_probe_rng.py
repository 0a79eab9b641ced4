"""The random generator around the eager probes that compiling runs (an op called on small real
tensors to learn eager's error or dtype: ``_numbers``, ``_writes``, ``ops/_dtype_probes``).

A probe of an op that draws random numbers must leave torch's CPU generator as it found it (the
user's stream of numbers does not move because we compiled). Saving and restoring the
generator around every probe was wrong beside other threads: the generator is process-wide,
so the restore rewound the numbers another thread drew meanwhile (its next ``torch.rand``
repeated earlier values: a data-loading thread's augmentations, a second model's dropout).
Only probes of ops that draw keep the generator now; an op draws when ATen tags it
``nondeterministic_seeded`` (functions and methods by their ATen name, Python's operators never;
a callable no ATen op names is taken to draw).
"""

from __future__ import annotations

import contextlib
import functools

import torch


@functools.cache
def _named_draws(name: str) -> bool:
    packet = getattr(torch.ops.aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return True  # (no ATen op of that name: it may draw)
    return any(
        torch.Tag.nondeterministic_seeded in getattr(packet, overload).tags
        for overload in packet.overloads()
    )


def draws(target) -> bool:
    """Whether calling ``target`` (an FX node's target: an ATen op, a torch function, a
    method's name) may draw from torch's random generator."""
    if isinstance(target, torch._ops.OpOverload):
        return torch.Tag.nondeterministic_seeded in target.tags
    if isinstance(target, torch._ops.OpOverloadPacket):
        return _named_draws(target._qualified_op_name.split("::")[-1])
    if getattr(target, "__module__", None) == "_operator":
        return False  # (Python's operators on tensors: indexing, arithmetic, comparisons)
    name = target if isinstance(target, str) else getattr(target, "__name__", None)
    if not isinstance(name, str):
        return True
    return _named_draws(name)


def kept_rng(target):
    """The context for a probe of ``target``: the CPU generator's state restored after it
    where ``target`` draws, nothing otherwise."""
    if draws(target):
        return torch.random.fork_rng(devices=[])
    return contextlib.nullcontext()
