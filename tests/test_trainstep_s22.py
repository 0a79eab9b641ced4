"""A compiled training step's own Python calls (issue 24 item 3), and the semantics of the
checks made cheaper on its path: hooks on differentiated leaves, batched cotangents, and
cotangents with a conjugate or negative bit.

The Python calls of torch2xla's code in one steady step (``sys.setprofile``: function frames
and the builtins they call) are the same on every run, where the time is not; the bound is the
count measured when the path was trimmed (session 22: 57 for a Linear(8, 8) forward and
``.sum().backward()``; 59 before), with a little headroom. Every step is also checked against
eager.
"""

from __future__ import annotations

import copy
import pathlib
import sys

import jax
import pytest
import torch
from torch import nn

import torch2xla
from tests._util import assert_same

_ROOT = str(pathlib.Path(torch2xla.__file__).parent)

_CPU_DEFAULT = pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="JAX's default device is not the CPU here"
)


def _our_calls(fn) -> tuple[int, list[str]]:
    """The Python calls (frames and builtins) ``fn()`` makes in torch2xla's code, and the names
    of its frames."""
    count, names = [0], []

    def profile(frame, event, arg):
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(_ROOT):
            count[0] += 1
            if event == "call":
                names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0], names


def _grads(model: nn.Module) -> list:
    return [p.grad for p in model.parameters()]


@_CPU_DEFAULT
def test_steady_training_step_python_calls():
    torch.manual_seed(0)
    model = nn.Linear(8, 8)
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    x = torch.randn(4, 8)

    def step(net, module):
        module.zero_grad(set_to_none=True)
        out = net(x)
        out.sum().backward()
        return out.detach()

    for _ in range(3):
        assert_same(step(compiled, model), step(ref, ref))
        assert_same(_grads(model), _grads(ref))
    counts = {_our_calls(lambda: step(compiled, model))[0] for _ in range(3)}
    assert len(counts) == 1, counts  # the same every step
    (n,) = counts
    _, names = _our_calls(lambda: step(compiled, model))
    # (the hook check, the batched-cotangent check and a CPU cotangent's view run in the
    # forward's and the backward's own frames)
    assert not {"hooked", "_is_batched", "to_jax"} & set(names), names
    assert n <= 60, (n, names)
    assert_same(step(compiled, model), step(ref, ref))
    assert_same(_grads(model), _grads(ref))


class _Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def _hook_order(compile_it: bool, plan: str) -> list:
    """The order the hooks on the parameters fire in, over steady steps between which hooks
    are added and removed (the check runs on every call)."""
    torch.manual_seed(0)
    model = _Two()
    net = torch.compile(model, backend="xla", options={"strict": True}) if compile_it else model
    x = torch.randn(3, 4)
    fired: list = []
    handles = []
    now = [0]  # (the step the hooks record)
    for step in range(6):
        now[0] = step
        if step == 2:  # hooks from the third step on, on steady calls
            for name, p in model.named_parameters():
                if plan == "post":
                    hook = p.register_post_accumulate_grad_hook(
                        lambda t, name=name: fired.append((now[0], name, t.grad.sum().item()))
                    )
                else:
                    hook = p.register_hook(
                        lambda g, name=name: fired.append((now[0], name, g.sum().item()))
                    )
                handles.append(hook)
        if step == 4:  # removed again: the dict of hooks stays, empty
            for h in handles:
                h.remove()
        model.zero_grad(set_to_none=True)
        net(x).square().sum().backward()
        fired.append((step, "grads", [round(p.grad.sum().item(), 4) for p in model.parameters()]))
    return fired


@pytest.mark.parametrize("plan", ["post", "tensor"])
def test_hooks_on_leaves_added_and_removed_on_steady_steps_fire_as_eager(plan):
    got, want = _hook_order(True, plan), _hook_order(False, plan)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    for g, w in zip(got, want):
        torch.testing.assert_close(torch.tensor(g[2]), torch.tensor(w[2]), rtol=1e-5, atol=1e-5)


def test_batched_cotangents_after_steady_steps_as_eager():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    x = torch.randn(4, 3)
    for _ in range(3):  # the steady path first
        model.zero_grad(set_to_none=True)
        compiled(x).sum().backward()
    cts = torch.randn(5, 4, 2)
    got = torch.autograd.grad(compiled(x), model.weight, cts, is_grads_batched=True)
    want = torch.autograd.grad(model(x), model.weight, cts, is_grads_batched=True)
    assert_same(got, want)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_cotangent_with_a_lazy_bit_as_eager(bit):
    """A cotangent passed with a conjugate or negative bit (a lazy view, whose memory holds the
    unconjugated or unnegated values) reaches the program as its values."""
    torch.manual_seed(0)
    dtype = torch.complex64 if bit == "conj" else torch.float32

    def f(x, w):
        return x * w + x

    compiled = torch.compile(f, backend="xla", options={"strict": True})
    x, w = torch.randn(6, dtype=dtype), torch.randn(6, dtype=dtype, requires_grad=True)
    base = torch.randn(6, dtype=dtype)
    ct = base.conj() if bit == "conj" else torch._neg_view(base)
    assert ct.is_conj() if bit == "conj" else ct.is_neg()
    for _ in range(3):  # steady first
        w.grad = None
        compiled(x, w).backward(ct)
    got = w.grad
    w.grad = None
    f(x, w).backward(ct)
    assert_same(got, w.grad)
