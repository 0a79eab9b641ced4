"""User-defined torch.library ops inside compiled graphs, against eager (session 33).

- A user's op that runs in eager PyTorch between XLA partitions gets its tensor arguments laid
  out as eager gives them (strides, storage offset), views of an input or of an intermediate
  included: its kernel may read the layout (inductor keeps exact strides for custom ops too).
- A ``torch.library.Library`` op with a ``register_lowering`` but no autograd kernel of its own
  is differentiated as eager's autograd fallback does (through its kernel) where a gradient
  flows: it runs in eager there, in XLA elsewhere; the lowering's backward used to raise.
- An op whose registered autograd formula is not its derivative (a straight-through
  estimator) keeps that formula where it has a lowering: ``jax.vjp`` of ``jnp.round`` gave
  zero gradients. A lowering whose ``jax.custom_vjp`` gives the formula stays in XLA.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import pytest
import torch

import torch2xla
from tests._util import assert_same, no_fallback

NS = "t2x_s33"


# -- the user's ops, as a user writes them ---------------------------------------------------------
@torch.library.custom_op(f"{NS}::layout", mutates_args=())
def layout(xs: list[torch.Tensor], y: torch.Tensor | None = None) -> torch.Tensor:
    """Each argument's strides and storage offset, as values (a kernel that reads them)."""
    ts = [*xs, *([] if y is None else [y])]
    return torch.tensor([v for t in ts for v in (*t.stride(), t.storage_offset())])


@layout.register_fake
def _(xs, y=None):
    ts = [*xs, *([] if y is None else [y])]
    return torch.empty(sum(t.dim() + 1 for t in ts), dtype=torch.long)


@torch.library.custom_op(f"{NS}::flat_fill", mutates_args=("out",))
def flat_fill(out: torch.Tensor) -> None:
    out.view(-1).copy_(torch.arange(out.numel(), dtype=out.dtype))  # raises where not viewable


@flat_fill.register_fake
def _(out):
    return None


@torch.library.custom_op(f"{NS}::scaled_mul", mutates_args=())
def scaled_mul(x: torch.Tensor, w: torch.Tensor, s: float) -> torch.Tensor:
    return x * w * s


@scaled_mul.register_fake
def _(x, w, s):
    return torch.empty_like(x)


def _sm_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.s = inputs[2]


def _sm_backward(ctx, g):
    x, w = ctx.saved_tensors
    return g * w * ctx.s, g * x * ctx.s, None


scaled_mul.register_autograd(_sm_backward, setup_context=_sm_setup)


@torch.library.custom_op(f"{NS}::ste_round", mutates_args=())
def ste_round(x: torch.Tensor) -> torch.Tensor:
    return torch.round(x)


ste_round.register_fake(lambda x: torch.empty_like(x))
ste_round.register_autograd(lambda ctx, g: g, setup_context=lambda ctx, inputs, output: None)
torch2xla.register_lowering(ste_round, lambda x: jnp.round(x))  # jax.vjp: zero gradient


@torch.library.custom_op(f"{NS}::ste_round_vjp", mutates_args=())
def ste_round_vjp(x: torch.Tensor) -> torch.Tensor:
    return torch.round(x)


ste_round_vjp.register_fake(lambda x: torch.empty_like(x))
ste_round_vjp.register_autograd(lambda ctx, g: g, setup_context=lambda ctx, inputs, output: None)


@jax.custom_vjp
def _jax_ste(x):
    return jnp.round(x)


_jax_ste.defvjp(lambda x: (jnp.round(x), None), lambda _, g: (g,))
torch2xla.register_lowering(ste_round_vjp, _jax_ste)

LIB = torch.library.Library(NS, "FRAGMENT")
# a Python composite kernel: eager's autograd fallback differentiates the ops it calls
LIB.define("composite_exp(Tensor x, float s) -> Tensor")
LIB.impl("composite_exp", lambda x, s: x.exp() * s, "CompositeExplicitAutograd")
torch2xla.register_lowering(torch.ops.t2x_s33.composite_exp, lambda x, s: jnp.exp(x) * s)
# a kernel autograd does not see (as a C++ kernel's): eager's fallback passes no gradient
LIB.define("opaque_twice(Tensor x) -> Tensor")


def _opaque_twice(x):
    with torch.no_grad():
        return x * 2


LIB.impl("opaque_twice", _opaque_twice, "CPU")
torch.library.register_fake(f"{NS}::opaque_twice", lambda x: torch.empty_like(x), lib=LIB)
torch2xla.register_lowering(torch.ops.t2x_s33.opaque_twice, lambda x: x * 2)


def _views(x):
    return layout(
        [
            *(x[:, ::2], x.t(), x[1:3], x[:, 1:4], (x * 2)[:, ::3], x.unsqueeze(1)[:, :, 2:]),
            *(x.unbind(0)[1], x.split(2, 1)[1], x.t().chunk(2, 1)[1]),  # items of a list
        ],
        y=x.diagonal(),
    )


# -- tests ---------------------------------------------------------------------------------------
def test_users_op_in_eager_sees_eager_layouts_of_views():
    x = torch.arange(24.0).view(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        got = torch.compile(_views, backend="xla")(x)
    assert torch.equal(got, _views(x)), (got, _views(x))


def test_users_mutating_op_on_a_view_raises_or_writes_as_eager():
    def rows(b):
        flat_fill(b[1:3])

    def transposed(b):
        flat_fill(b.t())

    want, got = torch.zeros(4, 6), torch.zeros(4, 6)
    rows(want)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        torch.compile(rows, backend="xla")(got)
        assert torch.equal(got, want)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            transposed(want)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            torch.compile(transposed, backend="xla")(got)
    assert torch.equal(got, want)


def test_strided_views_into_users_op_keep_eager_gradients():
    def f(x, w):
        return scaled_mul(x[:, ::2], w.t()[1:], 0.5).tanh().sum()

    x, w = torch.randn(4, 6, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = torch.compile(f, backend="xla")(x, w)
    ref = f(xr, wr)
    assert_same(out, ref)
    out.backward()
    ref.backward()
    assert_same((x.grad, w.grad), (xr.grad, wr.grad))


@pytest.mark.parametrize(
    ("op", "args"),
    [
        (torch.ops.t2x_s33.composite_exp, (0.5,)),  # eager: the kernel's own gradient
        (torch.ops.t2x_s33.opaque_twice, ()),  # eager: no gradient through the op
    ],
)
def test_lowered_library_op_without_autograd_kernel_differentiates_as_eager(op, args):
    def f(x):
        return (op(x, *args) * x).sum()

    x = torch.randn(4, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    compiled = torch.compile(f, backend="xla")
    with torch.no_grad():  # no gradient flows: the lowering runs in XLA
        assert_same(no_fallback(compiled, x), f(xr))
    with warnings.catch_warnings():
        # (eager's own: "an autograd kernel was not registered to the Autograd key(s)")
        warnings.simplefilter("ignore")
        out = compiled(x)
        ref = f(xr)
        assert_same(out, ref)
        out.backward()
        ref.backward()
    assert_same(x.grad, xr.grad)


def test_lowered_op_keeps_a_registered_formula_that_is_not_its_derivative():
    def f(x):
        return (ste_round(x * 3) * x).sum()

    x = torch.randn(5, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    compiled = torch.compile(f, backend="xla")
    with torch.no_grad():  # no gradient flows: the lowering runs in XLA
        assert_same(no_fallback(compiled, x), f(xr))
    with pytest.warns(torch2xla.FallbackWarning, match="t2x_s33.ste_round.default"):
        out = compiled(x)
    ref = f(xr)
    assert_same(out, ref)
    out.backward()
    ref.backward()
    assert_same(x.grad, xr.grad)
    assert x.grad.abs().sum() > 0


def test_lowering_with_the_formula_as_custom_vjp_stays_in_xla():
    def f(x):
        return (ste_round_vjp(x * 3) * x).sum()

    x = torch.randn(5, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    out = no_fallback(torch.compile(f, backend="xla", options={"strict": True}), x)
    ref = f(xr)
    assert_same(out, ref)
    out.backward()
    ref.backward()
    assert_same(x.grad, xr.grad)
