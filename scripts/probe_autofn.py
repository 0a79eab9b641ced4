"""Probe: a torch.autograd.Function with its own backward inside a compiled graph (a
straight-through quantizer and a gradient reversal layer): XLA programs built, FallbackWarnings,
Dynamo graphs and breaks, and the gradients against eager.

Run from a worktree's root: ``PYTHONPATH=. python scripts/probe_autofn.py``.
"""

import copy
import warnings

import torch

import torch2xla
import torch2xla.runtime._program as program
from tests.test_autofn_s23 import _DannNet, _QatNet


def run(net) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = net()
    ref = copy.deepcopy(model)
    x = torch.randn(5, 8)
    built = [0]
    original = program.XlaProgram.__init__

    def counting(self, *a, **k):
        built[0] += 1
        original(self, *a, **k)

    program.XlaProgram.__init__ = counting
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = torch.compile(model, backend="xla")(x)
            out = out if isinstance(out, tuple) else (out,)
            sum(o.square().sum() for o in out).backward()
    finally:
        program.XlaProgram.__init__ = original
    want = ref(x)
    want = want if isinstance(want, tuple) else (want,)
    sum(w.square().sum() for w in want).backward()
    same = all(
        torch.allclose(p.grad, r.grad, rtol=1e-5, atol=1e-6)
        for p, r in zip(model.parameters(), ref.parameters())
    )
    fallbacks = [w for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    explain = torch._dynamo.explain(net())(x)
    print(
        f"{net.__name__}: programs {built[0]}, FallbackWarnings {len(fallbacks)}, "
        f"Dynamo graphs {explain.graph_count}, breaks {explain.graph_break_count}, "
        f"gradients as eager's {same}"
    )


if __name__ == "__main__":
    run(_QatNet)
    run(_DannNet)
