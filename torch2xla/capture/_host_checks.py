"""Composite kernels whose value check on the host stops Dynamo's trace.

torch 2.11's ``quantile``/``nanquantile`` composites check a tensor ``q`` in [0, 1] by asking
``aten.equal`` (a bool read from the data) before computing: under Dynamo's fake tensors the
question has no answer, so Dynamo broke the graph there and ran the call eagerly (its error
came without the op and the user's line, and the frame was cut in two). torch 2.13's
composites skip that check while tracing. Where the installed torch asks, the tracing
kernels (the Python dispatcher's, on only while Dynamo and export trace) run torch's own
composite with that unanswerable question answered "in range", as torch 2.13 does;
``_eager_calls.margin_losses`` asserts eager's check in the program instead. A question with
an answer (real tensors) is asked as eager asks it.
"""

from __future__ import annotations

import torch
from torch._C import DispatchKey
from torch._subclasses.fake_tensor import DataDependentOutputException
from torch.utils._python_dispatch import TorchDispatchMode

# (those with a float ``q`` check it on the host too, then ask again of a tensor made of it)
_CHECKED = tuple(
    getattr(getattr(torch.ops.aten, name), overload)
    for name in ("quantile", "nanquantile")
    for overload in ("default", "out", "scalar", "scalar_out")
)


class _CheckAnswered(TorchDispatchMode):
    """Answers ``aten.equal`` that fake tensors cannot answer with True: the composites
    above ask it only for their range check (``_asks_equal`` confirms they ask)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is not torch.ops.aten.equal.default:
            return func(*args, **(kwargs or {}))
        try:
            return func(*args, **(kwargs or {}))
        except DataDependentOutputException:
            return True


def _traced_without_check(op: torch._ops.OpOverload):
    def kernel(*args, **kwargs):
        with torch._C._DisablePythonDispatcher(), _CheckAnswered():
            return op._op_dk(DispatchKey.CompositeImplicitAutograd, *args, **kwargs)

    return kernel


def _asks_equal() -> bool:
    """Whether the installed torch's quantile composite reads its check from the data."""
    asked = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            asked.append(func)
            return func(*args, **(kwargs or {}))

    with Log():
        cpu = {"dtype": torch.float32, "device": "cpu"}  # (not the user's defaults)
        torch.quantile(torch.zeros(2, **cpu), torch.tensor([0.5], **cpu))
    return torch.ops.aten.equal.default in asked


if _asks_equal():
    for _op in _CHECKED:
        _op.py_impl(DispatchKey.CompositeImplicitAutograd)(_traced_without_check(_op))
