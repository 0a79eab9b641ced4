"""A custom ``torch.autograd.Function`` given one tensor as two of its inputs
(``Mul.apply(x, x)``): Dynamo breaks the graph there, as torch 2.13's does.

Dynamo traces such a Function as the ``autograd_function_apply`` op, whose inputs are the
tensors the forward reads, each once. Eager gives the tensor the sum of the gradients the
backward returns for its two inputs; torch 2.11's Dynamo maps the backward's gradients to the
op's inputs through a dict keyed by the tensor, so the last one overwrites the others (half
the gradient of ``Mul.apply(x, x)``, with any backend), and the graph it hands the backend
cannot show that it happened. torch 2.13's Dynamo refuses to trace such a call (a graph
break: the Function runs in eager between graphs). ``install`` gives older torch versions the
same check, before Dynamo traces the Function; torch 2.13 and later are left as they are.
"""

from __future__ import annotations

import functools

_GB_TYPE = "autograd.Function.apply: duplicate tensor input"


@functools.cache
def install() -> None:
    """Patch Dynamo's tracing of ``Function.apply`` where the installed torch lacks the check
    (before 2.13; from 2.13 Dynamo checks itself and nothing is patched)."""
    import torch

    if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13):
        return
    try:
        from torch._dynamo import graph_break_hints
        from torch._dynamo.exc import unimplemented
        from torch._dynamo.variables.higher_order_ops import (
            AutogradFunctionApplyVariable,
            _get_fake_value,
        )
    except ImportError:  # (another layout of Dynamo's internals: left as it is)
        return

    traced = AutogradFunctionApplyVariable.call_function

    @functools.wraps(traced)
    def call_function(self, tx, args, kwargs):
        seen: list = []
        for arg in args:
            if not arg.is_tensor():
                continue
            fake = _get_fake_value(arg)
            if any(fake is s for s in seen):
                unimplemented(
                    gb_type=_GB_TYPE,
                    context="",
                    explanation="Dynamo does not support tracing autograd.Function.apply "
                    "when the same tensor is passed to multiple forward inputs (torch2xla: "
                    "torch 2.11's Dynamo drops all but one of their gradients).",
                    hints=[*graph_break_hints.SUPPORTABLE],
                )
            seen.append(fake)
        return traced(self, tx, args, kwargs)

    AutogradFunctionApplyVariable.call_function = call_function
