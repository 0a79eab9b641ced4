"""Autograd classes found by scripts/probe_autograd3.py (session 19), against eager strictly:
values, dtypes, None-ness of gradients, errors.

- A custom ``autograd.Function``'s backward (run in eager inside the graph) runs in the grad
  mode of the backward call, as eager's: double backward through it (its saved inputs,
  outputs, a helper it calls) gives eager's second derivatives instead of silently wrong
  ones; ``@once_differentiable`` keeps eager's rules and message.
- Batched cotangents (``torch.autograd.grad(..., is_grads_batched=True)``,
  ``jacobian``/``hessian`` with ``vectorize=True``) reach the compiled backward.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.autograd.function import once_differentiable

from tests._util import assert_same_recorded, check_scenario, leaf, observe_scenario

pytestmark = pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")


def _check(scenario) -> list:
    # float32 programs against eager's float32 kernels (second derivatives: a few more
    # roundings, checked against float64 in test_double_backward_against_float64)
    return check_scenario(scenario, None, tol=1e-5)


# -- custom autograd.Function: double backward --------------------------------------------------
class _Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


class _Tanh(torch.autograd.Function):
    """Saves its output."""

    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class _SinW(torch.autograd.Function):
    """The forward/setup_context style."""

    @staticmethod
    def forward(x, w):
        return x.sin() * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * x.cos() * w, g * x.sin()


def _exp_grad(g, x):
    return g * x.exp()


class _Exp(torch.autograd.Function):
    """Its backward calls a helper."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _exp_grad(g, x)


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.pow(3)

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


class _Scaled(torch.autograd.Function):
    """``torch.no_grad()`` inside its backward: which values eager records is unknown to the
    traced graph."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            scale = x.abs() + 1
        return g * 2 * x * scale


class _Ste(torch.autograd.Function):
    """A straight-through estimator: a backward without ops of its own."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class _SteOnce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        return g


class _MethodsOnly(torch.autograd.Function):
    """Its backward's ops are all methods (``call_method`` nodes)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g.mul(x.cos())


def _second(f, *shapes, wrt=None):
    """A scenario: the first derivatives of ``f`` with create_graph, then the gradients of
    their sum (through the Function's backward) on the leaves' ``.grad``."""

    def scenario(C, rec):
        leaves = [leaf(*s, seed=i) for i, s in enumerate(shapes)]
        take = leaves if wrt is None else [leaves[i] for i in wrt]
        gs = torch.autograd.grad(C(f)(*leaves), take, create_graph=True)
        rec("g", list(gs))
        sum(g.pow(2).sum() for g in gs).backward()
        rec("gg", [t.grad for t in leaves])

    return scenario


_DOUBLE = {
    "saved_inputs": (lambda x, w: _Mul.apply(x.sin(), w).pow(2).sum(), (3,), (3,)),
    "saved_output": (lambda x: _Tanh.apply(x * 2).sum(), (3,)),
    "saved_output_only_grad": (lambda x: _Tanh.apply(x).pow(2).sum(), (4,)),
    "setup_context": (lambda x, w: _SinW.apply(x, w).pow(2).sum(), (3,), (3,)),
    "helper_in_backward": (lambda x: _Exp.apply(x * 2).sum(), (3,)),
    "straight_through": (lambda x: _Ste.apply(x * 3).pow(2).sum(), (3,)),
    "methods_only": (lambda x: _MethodsOnly.apply(x * 2).sum(), (3,)),
    "product_of_two_calls": (
        lambda x, w: _Mul.apply(x, w).sum() * _Mul.apply(x, x).sum(),
        (3,),
        (3,),
    ),
}


@pytest.mark.parametrize("name", list(_DOUBLE))
def test_custom_function_double_backward_as_eager(name):
    """Were silently wrong: the traced backward ran with autograd off, so its gradients were
    constants to the second backward (an HVP off by 4, a penalty's input gradient None)."""
    f, *shapes = _DOUBLE[name]
    seen = _check(_second(f, *shapes))
    assert all(g is not None for g in seen[-1][1])


def test_custom_function_gradient_penalty_in_module():
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)

    def scenario(C, rec):
        def f(x):
            return _Tanh.apply(lin(x)).sum()

        x = leaf(4, 3)
        (gx,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
        gx.pow(2).sum().backward()
        rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])
        lin.zero_grad(set_to_none=True)

    seen = _check(scenario)
    assert all(g is not None for g in seen[0][1])


def test_custom_function_hvp_against_float64():
    """The second derivatives themselves, against float64 eager (not only float32 eager)."""

    def f(x, w):
        return _Mul.apply(x, w).sum() * _Mul.apply(x, x).sum()

    def hvp(fn, dtype):
        x, w = leaf(3, dtype=dtype), leaf(3, seed=1, dtype=dtype)
        (g,) = torch.autograd.grad(fn(x, w), x, create_graph=True)
        return torch.autograd.grad(g, [x, w], torch.ones(3, dtype=dtype))

    torch._dynamo.reset()
    got = hvp(torch.compile(f, backend="xla"), torch.float32)
    want = hvp(f, torch.float64)
    for g, w in zip(got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.double(), w, rtol=1e-5, atol=1e-6)


def test_once_differentiable_saved_only_gradients_are_constants_as_eager():
    """Eager's @once_differentiable takes its saved tensors as constants where the incoming
    gradient does not require grad: the second derivative has only the term through ``sin``'s
    backward, in eager and here."""

    def scenario(C, rec):
        x = leaf(3)
        (g,) = torch.autograd.grad(C(lambda t: _Cube.apply(t.sin()).sum())(x), x, create_graph=True)
        rec("g", g)
        g.sum().backward()
        rec("gg", x.grad)

    _check(scenario)


def test_once_differentiable_raises_eagers_message():
    def scenario(C, rec):
        x = leaf(3)
        (g,) = torch.autograd.grad(
            C(lambda t: _Cube.apply(t.sin()).pow(2).sum())(x), x, create_graph=True
        )
        rec("g", g)
        g.sum().backward()

    seen = _check(scenario)
    assert seen[-1][0] == "raised" and "once_differentiable" in seen[-1][1][1]


def test_once_differentiable_straight_through_raises_eagers_message():
    seen = _check(_second(lambda x: _SteOnce.apply(x * 3).pow(2).sum(), (3,)))
    assert seen[-1][0] == "raised" and "once_differentiable" in seen[-1][1][1]


def test_grad_mode_switch_in_backward_first_order_as_eager_second_raises():
    """``torch.no_grad()`` inside the backward: first derivatives as eager; differentiating
    them again raises (which values eager records is unknown) rather than give numbers that
    may be wrong."""

    def f(x):
        return _Scaled.apply(x.sin()).sum()

    def first(C, rec):
        x = leaf(3)
        C(f)(x).backward()
        rec("grad", x.grad)

    _check(first)
    torch._dynamo.reset()
    x = leaf(3)
    (g,) = torch.autograd.grad(torch.compile(f, backend="xla")(x), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiating twice"):
        g.sum().backward()


class _Affine3(torch.autograd.Function):
    """Three tensor inputs, the middle one's gradient None."""

    @staticmethod
    def forward(ctx, x, m, w):
        ctx.save_for_backward(x, w)
        return x * w + m.detach()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, None, g * x


def _same_tensor_twice(alias: bool):
    def f(x, w):
        y = x if alias else w
        return _Affine3.apply(x, w, y).pow(2).sum() + _Mul.apply(x, x).sum()

    return f


@pytest.mark.parametrize(
    "name,f",
    [
        ("mul_x_x", lambda x, w: _Mul.apply(x, x).sum()),
        ("mul_x_x_times_mul_x_w", lambda x, w: _Mul.apply(x, x).sum() * _Mul.apply(x, w).sum()),
        ("alias_and_none_gradient", _same_tensor_twice(True)),
        ("beside_a_none_gradient", _same_tensor_twice(False)),
    ],
)
def test_custom_function_given_one_tensor_twice(name, f):
    """torch 2.11's Dynamo kept one of the gradients of a tensor given to a Function twice
    (half the gradient of ``Mul.apply(x, x)``, first order already, any backend): it breaks
    the graph there, as torch 2.13's Dynamo does."""

    def first(C, rec):
        x, w = leaf(3), leaf(3, seed=1)
        C(f)(x, w).backward()
        rec("grads", [x.grad, w.grad])

    _check(first)
    _check(_second(f, (3,), (3,)))


# -- hooks on intermediates, differentiated twice ----------------------------------------------
# (torch 2.11's Dynamo traces ``y.register_hook(fn)`` as an autograd.Function: forward
# ``y.view_as(y)``, backward ``fn``; torch 2.13's keeps it as the ``register_hook`` op)
_HOOK_AS_FUNCTION = hasattr(torch._dynamo.external_utils, "_ApplyBackwardHook")


def _hooked(reads_y: bool):
    def f(x, w):
        y = x * w
        y.register_hook((lambda g: g * y) if reads_y else (lambda g: g * 10 * y.detach()))
        z = y.sin()
        z.register_hook(lambda g: g + 1)
        return (z * w).sum()

    return f


def test_hook_on_intermediate_double_backward_as_eager():
    _check(_second(_hooked(reads_y=False), (3,), (3,)))


def test_hook_reading_its_tensor_double_backward_as_eager_or_raises_on_hook_as_function():
    """A hook reading the hooked tensor: eager's second backward takes that read's gradient
    through the hook; traced as a Function (torch 2.11) it went past it, silently wrong: first
    derivatives as eager, differentiating them again raises there."""
    if not _HOOK_AS_FUNCTION:
        _check(_second(_hooked(reads_y=True), (3,), (3,)))
        return
    got = observe_scenario(_second(_hooked(reads_y=True), (3,), (3,)), True)
    want = observe_scenario(_second(_hooked(reads_y=True), (3,), (3,)), False)
    assert_same_recorded(got[0][1], want[0][1], "g", 1e-5)
    assert got[1][0] == "raised" and "tensor hook (register_hook)" in got[1][1][1], got[1]


def test_two_hooks_on_one_tensor_as_eager_or_raise_on_hook_as_function():
    """Eager runs a tensor's hooks in the order they were registered; traced as Functions
    (torch 2.11) they ran in reverse, silently wrong first derivatives: the backward raises
    there."""

    def f(x, w):
        y = x * w
        y.register_hook(lambda g: g * 2)
        y.register_hook(lambda g: g.pow(2))
        return (y.sin() * w).sum()

    def first(C, rec):
        x, w = leaf(3), leaf(3, seed=1)
        C(f)(x, w).backward()
        rec("grads", [x.grad, w.grad])

    if not _HOOK_AS_FUNCTION:
        _check(first)
        return
    got = observe_scenario(first, True)
    assert got[0][0] == "raised" and "two hooks (register_hook)" in got[0][1][1], got


# -- batched cotangents ---------------------------------------------------------------------
def test_is_grads_batched():
    def scenario(C, rec):
        x, w = leaf(2, 3), leaf(3, 4, seed=1)
        out = C(lambda a, b: (a @ b).tanh())(x, w)
        go = torch.randn(5, 2, 4, generator=torch.Generator().manual_seed(2))
        rec("g", list(torch.autograd.grad(out, [x, w], go, is_grads_batched=True)))

    _check(scenario)


def test_is_grads_batched_one_output_without_cotangent():
    def scenario(C, rec):
        x, w = leaf(3), leaf(3, seed=1)
        a, _ = C(lambda x, w: (x * w, w.exp()))(x, w)
        go = torch.randn(4, 3, generator=torch.Generator().manual_seed(2))
        rec("g", list(torch.autograd.grad([a], [x, w], [go], is_grads_batched=True)))

    _check(scenario)


def test_is_grads_batched_create_graph():
    def scenario(C, rec):
        x = leaf(3)
        out = C(lambda t: t.pow(3))(x)
        (g,) = torch.autograd.grad(out, x, torch.eye(3), is_grads_batched=True, create_graph=True)
        rec("g", g)
        g.sum().backward()
        rec("gg", x.grad)

    _check(scenario)


def test_is_grads_batched_keeps_graph_for_a_later_backward_only_with_retain_graph():
    def scenario(C, rec):
        x = leaf(3)
        out = C(lambda t: (t.exp() * t).sum(0, keepdim=True) * t)(x)
        (g,) = torch.autograd.grad(out, x, torch.eye(3), is_grads_batched=True)
        rec("g", g)
        out.sum().backward()

    seen = _check(scenario)
    assert seen[-1][0] == "raised"  # (the batched backward freed the graph, as eager's)


@pytest.mark.parametrize("kind", ["jacobian", "hessian"])
def test_functional_vectorized(kind):
    def scenario(C, rec):
        x = leaf(3, rg=False)
        if kind == "jacobian":
            fn = C(lambda t: t.sin() * t.sum())
            rec("jac", torch.autograd.functional.jacobian(fn, x, vectorize=True))
        else:
            fn = C(lambda t: (t.sin() * t.pow(2)).sum())
            rec("hess", torch.autograd.functional.hessian(fn, x, vectorize=True))

    _check(scenario)
