"""torch2xla.register_lowering: a JAX implementation for the user's own torch.library op."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import pytest
import torch

import torch2xla
from tests._util import assert_same


# -- the user's ops, as a user writes them ---------------------------------------------------------
@torch.library.custom_op("t2x_custom::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x.sin() * scale


@scaled_sin.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _scaled_sin_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * ctx.scale * x.cos(), None


def _scaled_sin_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.scale = inputs[1]


scaled_sin.register_autograd(_scaled_sin_backward, setup_context=_scaled_sin_setup)


@torch2xla.register_lowering(scaled_sin)
def _(x, scale):
    return jnp.sin(x) * scale


@torch.library.custom_op("t2x_custom::split_at", mutates_args=())
def split_at(x: torch.Tensor, sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = x.split(sizes, dim=-1)
    return a.clone(), b.exp()


@split_at.register_fake
def _(x, sizes):
    return x.new_empty((*x.shape[:-1], sizes[0])), x.new_empty((*x.shape[:-1], sizes[1]))


torch2xla.register_lowering(
    torch.ops.t2x_custom.split_at,  # the packet: every overload
    lambda x, sizes: (x[..., : sizes[0]], jnp.exp(x[..., sizes[0] :])),
)


@torch.library.custom_op("t2x_custom::no_grad_formula", mutates_args=())
def no_grad_formula(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@no_grad_formula.register_fake
def _(x):
    return torch.empty_like(x)


torch2xla.register_lowering(no_grad_formula, lambda x: x * 3)


@torch.library.custom_op("t2x_custom::unlowered", mutates_args=())
def unlowered(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@unlowered.register_fake
def _(x):
    return torch.empty_like(x)


def _model(x, w):
    h = torch.relu(x @ w)
    return scaled_sin(h, 0.5).sum(-1)


# -- tests ---------------------------------------------------------------------------------------
def test_registered_op_runs_in_xla_with_eager_values_and_gradients():
    x = torch.randn(4, 5, requires_grad=True)
    w = torch.randn(5, 3, requires_grad=True)
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    f = torch.compile(_model, backend="xla", options={"strict": True})  # strict: no fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = f(x, w)
    ref = _model(xr, wr)
    assert_same(out, ref)
    gx, gw = torch.autograd.grad(out.sum(), (x, w))
    rx, rw = torch.autograd.grad(ref.sum(), (xr, wr))
    assert_same((gx, gw), (rx, rw))
    info = torch2xla.cache_info(f)
    assert info.misses == 1


def test_tuple_outputs_and_list_arguments():
    def f(x):
        a, b = torch.ops.t2x_custom.split_at(x, [2, 3])
        return a * 2, b.sum(-1)

    x = torch.randn(3, 5)
    out = torch.compile(f, backend="xla", options={"strict": True})(x)
    assert_same(out, f(x))


def test_op_without_autograd_formula_raises_on_backward_as_eager():
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        no_grad_formula(x).sum().backward()
    f = torch.compile(lambda x: no_grad_formula(x).sum(), backend="xla", options={"strict": True})
    y = f(x)
    assert_same(y, (x * 3).sum())
    with pytest.raises(RuntimeError, match="no autograd formula was registered"):
        y.backward()
    with torch.no_grad():  # inference never asks for the formula
        assert_same(f(x), (x * 3).sum())


def test_strict_mode_names_register_lowering_for_a_users_op():
    f = torch.compile(lambda x: unlowered(x) * 2, backend="xla", options={"strict": True})
    with pytest.raises(torch2xla.UnsupportedOpsError) as info:
        f(torch.randn(3))
    message = str(info.value)
    assert "t2x_custom.unlowered.default" in message
    assert "torch2xla.register_lowering" in message
    assert "open an issue" not in message  # the remedy is the user's, not ours


def test_a_wrong_lowering_says_whose_it_is_and_what_it_returned():
    @torch.library.custom_op("t2x_custom::wrong_dtype", mutates_args=())
    def wrong_dtype(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @wrong_dtype.register_fake
    def _(x):
        return torch.empty_like(x)

    torch2xla.register_lowering(wrong_dtype, lambda x: x.astype(jnp.int32))
    f = torch.compile(lambda x: wrong_dtype(x) + 1, backend="xla")
    with pytest.raises(torch2xla.LoweringError) as info:
        f(torch.randn(3))
    message = str(info.value)
    assert "t2x_custom.wrong_dtype.default" in message
    assert "returned int32[3]" in message and "gives float32[3]" in message
    assert "The lowering is yours" in message

    # Registering again replaces the implementation (for graphs compiled from then on).
    torch2xla.register_lowering(wrong_dtype, lambda x: x)
    torch._dynamo.reset()
    x = torch.randn(3)
    assert_same(torch.compile(lambda x: wrong_dtype(x) + 1, backend="xla")(x), x + 1)


def test_register_lowering_refuses_ops_it_cannot_serve():
    with pytest.raises(ValueError, match="torch2xla lowers itself"):
        torch2xla.register_lowering(torch.ops.aten.sin.default, jnp.sin)

    @torch.library.custom_op("t2x_custom::in_place", mutates_args=("x",))
    def in_place(x: torch.Tensor) -> None:
        x.mul_(2)

    with pytest.raises(ValueError, match="mutates its inputs"):
        torch2xla.register_lowering(in_place, lambda x: None)
    with pytest.raises(TypeError, match="expected an op"):
        torch2xla.register_lowering("t2x_custom::scaled_sin", jnp.sin)
