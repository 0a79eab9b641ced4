"""Autograd scenarios where torch 2.11's Dynamo and torch 2.13's trace differently (session
19), run as ``scripts/probe_autograd.py``, under both torch versions:

    PYTHONPATH=. python scripts/probe_autograd_torch211.py [substring ...]
    PROBE_BACKEND=eager PYTHONPATH=. python scripts/probe_autograd_torch211.py   # torch's own

A custom ``autograd.Function`` given one tensor twice; ``register_hook`` on intermediates
(torch 2.11 traces each hook as an ``autograd.Function``), differentiated once and twice.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd as base
from probe_autograd import leaf

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


class _Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


def _twice(C, rec, f):
    """First derivatives with create_graph, then the gradients of their squares' sum."""
    x, w = leaf(3), leaf(3, seed=1)
    gs = torch.autograd.grad(C(f)(x, w), [x, w], create_graph=True)
    rec("g", list(gs))
    sum(g.pow(2).sum() for g in gs).backward()
    rec("gg", [x.grad, w.grad])


@scenario
def function_one_tensor_twice(C, rec):
    _twice(C, rec, lambda x, w: _Mul.apply(x, x).sum() * _Mul.apply(x, w).sum())


@scenario
def hook_reading_hooked_tensor_twice(C, rec):
    def f(x, w):
        y = x * w
        y.register_hook(lambda g: g * y)
        return (y.sin() * w).sum()

    _twice(C, rec, f)


@scenario
def hook_reading_other_leaf_twice(C, rec):
    def f(x, w):
        y = x * w
        y.register_hook(lambda g: g * w)
        return (y.sin() * w).sum()

    _twice(C, rec, f)


@scenario
def hook_reading_value_of_hooked_tensor_twice(C, rec):
    def f(x, w):
        y = (x * w).exp()
        t = y * 3
        y.register_hook(lambda g: g * t)
        return (y.sin() * w).sum()

    _twice(C, rec, f)


@scenario
def two_hooks_on_one_intermediate(C, rec):
    def f(x, w):
        y = x * w
        y.register_hook(lambda g: g * 2)
        y.register_hook(lambda g: g.pow(2))
        return (y.sin() * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def eager_hook_on_output_reading_other_output_twice(C, rec):
    def f(x, w):
        y = (x * w).exp()
        return y, y * 3

    x, w = leaf(3), leaf(3, seed=1)
    y, t = C(f)(x, w)
    y.register_hook(lambda g: g * t)
    gs = torch.autograd.grad((y.sin() * w).sum(), [x, w], create_graph=True)
    rec("g", list(gs))
    sum(g.pow(2).sum() for g in gs).backward()
    rec("gg", [x.grad, w.grad])


@scenario
def eager_hook_on_output_another_output_reads(C, rec):
    """Eager's hook on ``y`` sees the gradient reaching ``y`` through ``t = y * 3`` too; an
    output of a compiled function has its own gradient slot (torch's aot_eager as well)."""

    def f(x):
        y = x.exp()
        return y, y * 3

    x = leaf(3)
    y, t = C(f)(x)
    y.register_hook(lambda g: g * 10)
    (y.sum() + t.sum()).backward()
    rec("grad", x.grad)


def main(argv) -> int:
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = base.compare(n, SCENARIOS[n])
        except Exception:  # noqa: BLE001  (a failure of the probe itself)
            import traceback

            line = f"CRASH {n}: {traceback.format_exc().strip().splitlines()[-1]}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
