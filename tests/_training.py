"""Helpers for the training tests: run a model compiled with backend="xla" and its eager twin
side by side, and compare outputs, gradients, parameters and buffers."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from tests._util import assert_same


def xla_node(out: torch.Tensor):
    """The autograd node of the differentiable XLA program that produced ``out`` (directly, or
    as a view of one of its outputs: an output that is eager's only view of a hidden
    intermediate); None if none did."""
    node = out.grad_fn
    while node is not None and type(node).__name__ in ("ViewBackward0", "AsStridedBackward0"):
        node = node.next_functions[0][0]
    return node if type(node).__name__ == "XlaFunctionBackward" else None


def ran_in_xla(out: torch.Tensor) -> bool:
    """Whether ``out`` was produced by a differentiable XLA program (``xla_node``)."""
    return xla_node(out) is not None


def assert_grads(model: torch.nn.Module, ref: torch.nn.Module, rtol=1e-4, atol=1e-5) -> None:
    """Same parameter gradients, None where eager has None."""
    for (name, p), (_, r) in zip(model.named_parameters(), ref.named_parameters()):
        if r.grad is None:
            assert p.grad is None, f"{name}: eager has no gradient, xla has one"
            continue
        assert p.grad is not None, f"{name}: xla has no gradient"
        assert p.grad.dtype == r.grad.dtype, name
        torch.testing.assert_close(
            p.grad, r.grad, rtol=rtol, atol=atol, msg=lambda m, n=name: f"{n}: {m}"
        )


def twins(model: torch.nn.Module, **compile_kw):
    """(compiled model, the module it wraps, an eager deep copy)."""
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", **({"options": {"strict": True}} | compile_kw))
    return compiled, model, ref


def grad_parity(
    model: torch.nn.Module,
    *inputs,
    loss: Callable[[torch.Tensor], torch.Tensor] = lambda out: out.float().square().mean(),
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """One forward and backward of ``model`` compiled and eager: same loss, outputs, gradients
    (of parameters and of float inputs) and buffers."""
    compiled, model, ref = twins(model)
    xs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    rs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    torch.manual_seed(0)
    out = compiled(*xs)
    torch.manual_seed(0)
    expected = ref(*rs)
    assert ran_in_xla(out)
    assert_same(out, expected, rtol=rtol, atol=atol)
    loss(out).backward()
    loss(expected).backward()
    assert_grads(model, ref, rtol=rtol, atol=atol)
    for x, r in zip(xs, rs):
        if r.requires_grad:
            torch.testing.assert_close(x.grad, r.grad, rtol=rtol, atol=atol)
    assert_same(dict(model.named_buffers()), dict(ref.named_buffers()), rtol=rtol, atol=atol)
