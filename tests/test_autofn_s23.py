"""A ``torch.autograd.Function`` with its own backward, lowered inside the XLA program as a
``jax.custom_vjp`` (``capture/_custom_function.py``, ``ops/_custom_function.py``): one
program, no FallbackWarning, and eager's outputs and gradients (values and None-ness). The
Functions JAX cannot run as eager does stay in eager PyTorch (a FallbackWarning), as before.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torch2xla
from tests._util import ProgramCounter, check_scenario, leaf, no_fallback


class _Quantize(torch.autograd.Function):
    """A straight-through quantizer (QAT): gradient passed where the value is in range."""

    @staticmethod
    def forward(ctx, x, scale: float, bound: float):
        ctx.save_for_backward(x)
        ctx.bound = bound
        return torch.round(x * scale).clamp(-scale * bound, scale * bound) / scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= ctx.bound), None, None


class _Reverse(torch.autograd.Function):
    """A gradient reversal layer (domain adaptation)."""

    @staticmethod
    def forward(ctx, x, alpha: float):
        ctx.alpha = alpha
        return x.view_as(x) * 1.0

    @staticmethod
    def backward(ctx, g):
        return -g * ctx.alpha, None


class _QatNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 3)

    def forward(self, x):
        h = _Quantize.apply(torch.relu(self.a(x)), 4.0, 1.0)
        return self.b(h)


class _DannNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Linear(8, 8)
        self.label = nn.Linear(8, 3)
        self.domain = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.tanh(self.features(x))
        return self.label(h), self.domain(_Reverse.apply(h, 0.3))


# torch < 2.13: Dynamo hands a Function's intermediates out as outputs too, and the backward's
# placeholders for their gradients carry no example values: such Functions stay in eager
# there, as before (values and gradients still eager's; what is asserted below)
KEPT_IN_XLA = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 13)
if not KEPT_IN_XLA:

    def no_fallback(fn, *args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.FallbackWarning)
            return fn(*args, **kwargs)


def _fallbacks(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]


@pytest.mark.parametrize("net", [_QatNet, _DannNet])
def test_one_program_no_fallback_eagers_gradients(net, monkeypatch):
    """Before: the Function ran in eager between two XLA programs (one FallbackWarning)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    ref = net()
    model = net()
    model.load_state_dict(ref.state_dict())
    x = leaf(5, 8, rg=False)
    counter = ProgramCounter(monkeypatch)
    compiled = torch.compile(model, backend="xla")
    out = no_fallback(compiled, x)
    want = ref(x)
    out = out if isinstance(out, tuple) else (out,)
    want = want if isinstance(want, tuple) else (want,)
    for o, w in zip(out, want):
        torch.testing.assert_close(o, w, rtol=1e-6, atol=1e-6)
    sum(o.square().sum() for o in out).backward()
    sum(w.square().sum() for w in want).backward()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, r.grad, rtol=1e-5, atol=1e-6, msg=name)
    assert counter.count == 1 or not KEPT_IN_XLA
    explain = torch._dynamo.explain(net())(x)
    assert explain.graph_count == 1 and explain.graph_break_count == 0


class _Two(torch.autograd.Function):
    """Two outputs, a saved output and a saved intermediate, a tensor and a float input."""

    @staticmethod
    def forward(ctx, x, w, k: float):
        y = torch.tanh(x * w)
        s = x.sin()
        ctx.save_for_backward(y, s, w)
        ctx.k = k
        return y, s * k

    @staticmethod
    def backward(ctx, gy, gs):
        y, s, w = ctx.saved_tensors
        gx = gy * (1 - y * y) * w + gs * ctx.k * s.cos()
        gw = (gy * (1 - y * y) * s).sum(0) if ctx.needs_input_grad[1] else None
        return gx, gw, None


class _ArgmaxToo(torch.autograd.Function):
    """A non-differentiable integer output and a non-differentiable float output."""

    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(-1)
        mask = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(idx, mask)
        return x * 2, idx, mask

    @staticmethod
    def backward(ctx, g, gi, gm):
        return g * 3 + gm  # (gm: zeros, as eager materializes them)


class _Cast(torch.autograd.Function):
    """A backward whose gradient comes in another dtype (eager's engine casts it)."""

    @staticmethod
    def forward(ctx, x):
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        return g.double() * 2


class _Gather(torch.autograd.Function):
    """An integer tensor input (its gradient None) beside a float one."""

    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        return x[index]

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        out = torch.zeros(5, 3, dtype=g.dtype).index_add(0, index, g)
        return out, None


def _scenario_two(w_grad: bool):
    def scenario(C, rec):
        x, w = leaf(4, 3), leaf(3, seed=1, rg=w_grad)

        def f(x, w):
            y, s = _Two.apply(x, w, 0.5)
            return (y * 2).sum() + s.pow(2).sum()

        loss = C(f)(x, w)
        loss.backward()
        rec("loss", loss.detach())
        rec("grads", [x.grad, w.grad])

    return scenario


@pytest.mark.parametrize("w_grad", [True, False])
def test_two_outputs_saved_values_needs_input_grad(w_grad):
    no_fallback(check_scenario, _scenario_two(w_grad), None, 1e-5)


def test_output_unused_by_the_loss():
    def scenario(C, rec):
        x, w = leaf(4, 3), leaf(3, seed=1)

        def f(x, w):
            y, s = _Two.apply(x, w, 0.5)
            return y.sum(), s

        loss, s = C(f)(x, w)
        loss.backward()
        rec("out", [loss.detach(), s.detach(), s.requires_grad])
        rec("grads", [x.grad, w.grad])

    no_fallback(check_scenario, scenario, None, 1e-5)


def test_non_differentiable_outputs_used_downstream():
    def scenario(C, rec):
        x = leaf(4, 5)

        def f(x):
            y, idx, mask = _ArgmaxToo.apply(x)
            return (y * mask).sum() + idx.sum() * y.mean(), idx, mask

        loss, idx, mask = C(f)(x)
        rec("flags", [idx.requires_grad, mask.requires_grad, idx.dtype])
        loss.backward()
        rec("out", [loss.detach(), idx, mask])
        rec("grad", x.grad)

    no_fallback(check_scenario, scenario, None, 1e-5)


def test_gradient_cast_to_the_inputs_dtype():
    def scenario(C, rec):
        x = leaf(3)
        C(lambda x: _Cast.apply(x).sum())(x).backward()
        rec("grad", [x.grad, x.grad.dtype])

    no_fallback(check_scenario, scenario, None, 1e-6)


def test_integer_tensor_input():
    def scenario(C, rec):
        x = leaf(5, 3)
        index = torch.tensor([0, 2, 2, 4])
        C(lambda x, i: _Gather.apply(x, i).pow(2).sum())(x, index).backward()
        rec("grad", x.grad)

    no_fallback(check_scenario, scenario, None, 1e-6)


def test_double_backward_through_a_straight_through_output():
    """A second backward differentiates the Function's output through its own backward (as
    eager), its saved intermediates as constants, its saved inputs as themselves."""

    def scenario(C, rec):
        x = leaf(3, 4)

        def f(x):
            q = _Quantize.apply(x.sum(0) * 2, 4.0, 5.0)
            y, s = _Two.apply(x, q, 0.5)
            return (q.pow(3) + y).sum() + s.sum()

        (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
        rec("g", g.detach())
        g.pow(2).sum().backward()
        rec("gg", x.grad)

    no_fallback(check_scenario, scenario, None, 1e-5)


# -- kept in eager PyTorch, as before ---------------------------------------------------------
class _NoneForTracked(torch.autograd.Function):
    """A backward returning None for an input that requires grad: eager leaves it None."""

    @staticmethod
    def forward(ctx, x, m):
        return x * m

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


class _Lazy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        if g2 is None:
            return g1 * 2
        return g1 * 2 + g2 * 3


class _Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        return g


class _DetachInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.detach().cos()


def _kept(f, *shapes, leaves_grad=True):
    def scenario(C, rec):
        leaves = [leaf(*s, seed=i) for i, s in enumerate(shapes)]
        if not leaves_grad:
            leaves = [t.detach().clone().requires_grad_() for t in leaves]
        out = C(f)(*leaves)
        out.backward()
        rec("out", out.detach())
        rec("grads", [t.grad for t in leaves])

    return scenario


@pytest.mark.parametrize(
    "f, shapes",
    [
        (lambda x, m: _NoneForTracked.apply(x, m).sum(), ((3,), (3,))),
        (lambda x: _Lazy.apply(x)[0].sum(), ((3,),)),
        (lambda x: _Once.apply(x * 3).pow(2).sum(), ((3,),)),
        (lambda x: _DetachInBackward.apply(x).sum(), ((3,),)),
    ],
    ids=["none_for_tracked_input", "materialize_grads_false", "once_differentiable", "detach"],
)
def test_kept_in_eager_as_before(f, shapes):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_scenario(_kept(f, *shapes), None, 1e-6)
    assert any("autograd.Function" in m for m in _fallbacks(caught))


def test_mark_dirty_kept_in_eager():
    def scenario(C, rec):
        x = leaf(3)

        def f(x):
            return _Dirty.apply(x * 1.0).sum()

        out = C(f)(x)
        out.backward()
        rec("out", [out.detach(), x.grad])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_scenario(scenario, None, 1e-6)
    assert any("autograd.Function" in m for m in _fallbacks(caught))


@pytest.mark.skipif(not KEPT_IN_XLA, reason="kept in eager before torch 2.13 (see KEPT_IN_XLA)")
def test_beside_a_data_dependent_op():
    """A graph cut for a data-dependent op (``nonzero``) keeps the Function in a piece."""

    def scenario(C, rec):
        x = leaf(6)

        def f(x):
            q = _Quantize.apply(x, 4.0, 1.0)
            return q[torch.nonzero(x > 0).flatten()].sum() + q.pow(2).sum()

        out = C(f)(x)
        out.backward()
        rec("out", out.detach())
        rec("grad", x.grad)

    with (
        torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        check_scenario(scenario, None, 1e-6)
    assert not any("autograd.Function" in m for m in _fallbacks(caught))


def test_without_autograd_inlined():
    """Under no_grad the Function's forward is inlined as before (no custom op)."""

    def scenario(C, rec):
        x = leaf(3, rg=False)
        rec("out", C(lambda x: _Quantize.apply(x, 4.0, 1.0) * 2)(x))

    no_fallback(check_scenario, scenario, None, 0)


class _XSoftmax(torch.autograd.Function):
    """SEW-D's / DeBERTa's masked softmax: an in-place fill of an intermediate, a saved
    output, a boolean tensor input and an int argument, ``_softmax_backward_data``."""

    @staticmethod
    def forward(ctx, x, mask, dim: int):
        ctx.dim = dim
        rmask = ~(mask.to(torch.bool))
        out = x.masked_fill(rmask, torch.finfo(x.dtype).min)
        out = torch.softmax(out, ctx.dim)
        out.masked_fill_(rmask, 0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return torch._softmax_backward_data(g, out, ctx.dim, out.dtype), None, None


@pytest.mark.skipif(
    not KEPT_IN_XLA,
    reason="torch 2.11's Dynamo gives this Function wrong input gradients with any backend "
    "(backend='eager' too: 2.38 off eager's); from 2.13 the Function is kept in XLA",
)
def test_masked_softmax_function():
    def scenario(C, rec):
        x = leaf(2, 4, 5)
        mask = torch.tensor([1, 1, 0, 1, 0], dtype=torch.bool).expand(2, 4, 5)
        w = leaf(5, 5, seed=1)

        def f(x, mask, w):
            return (_XSoftmax.apply(x, mask, -1) @ w).pow(2).sum()

        loss = C(f)(x, mask, w)
        loss.backward()
        rec("out", loss.detach())
        rec("grads", [x.grad, w.grad])

    no_fallback(check_scenario, scenario, None, 1e-5)


class _Noisy(torch.autograd.Function):
    """A forward drawing random numbers."""

    @staticmethod
    def forward(ctx, x):
        return x + torch.rand_like(x) * 0

    @staticmethod
    def backward(ctx, g):
        return g * 3


@pytest.mark.parametrize("function", [_Noisy], ids=["random_forward"])
def test_forward_kept_in_eager(function):
    def scenario(C, rec):
        x = leaf(5)
        out = C(lambda x: function.apply(x).pow(2).sum())(x)
        out.backward()
        rec("out", [out.detach(), x.grad])

    with (
        torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        check_scenario(scenario, None, 1e-6)
    assert any("autograd.Function" in m for m in _fallbacks(caught))


def test_function_outputs_all_unused_input_grad_none():
    """No output of the Function reaches the loss: eager never calls its backward, and the
    input only it reads keeps a None gradient."""

    def scenario(C, rec):
        x, w = leaf(3), leaf(3, seed=1)

        def f(x, w):
            return x.pow(2).sum(), _Reverse.apply(w * 2, 0.5)

        loss, y = C(f)(x, w)
        loss.backward()
        rec("out", [loss.detach(), y.detach(), y.requires_grad])
        rec("grads", [x.grad, w.grad])

    no_fallback(check_scenario, scenario, None, 1e-6)


def test_two_calls_and_bfloat16():
    def scenario(C, rec):
        x = leaf(4, 6, dtype=torch.bfloat16)
        lin = nn.Linear(6, 6).to(torch.bfloat16)

        def f(x):
            h = _Quantize.apply(lin(x), 8.0, 2.0)
            return _Reverse.apply(_Quantize.apply(h * 3, 2.0, 1.0), 2.0).float().pow(2).sum()

        out = C(f)(x)
        out.backward()
        rec("out", out.detach())
        rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])

    no_fallback(check_scenario, scenario, None, 0)


class _Rotate(torch.autograd.Function):
    """Complex values: eager's gradient convention (the conjugate of JAX's cotangent)."""

    @staticmethod
    def forward(ctx, z, c):
        ctx.save_for_backward(c)
        return z * c

    @staticmethod
    def backward(ctx, g):
        (c,) = ctx.saved_tensors
        return g * c.conj(), None


def test_complex_function():
    def scenario(C, rec):
        z = leaf(4, dtype=torch.float64).to(torch.complex128).detach().requires_grad_()
        c = torch.tensor([1 + 2j, 0.5 - 1j, 3j, -1 + 0j], dtype=torch.complex128)
        out = C(lambda z, c: (_Rotate.apply(z * (1 + 1j), c) * (2 - 1j)).abs().sum())(z, c)
        out.backward()
        rec("out", [out.detach(), z.grad])

    no_fallback(check_scenario, scenario, None, 1e-12)


def test_sizes_that_change():
    """A second size makes Dynamo's graph dynamic (symbolic sizes): the Function then runs in
    eager as before; each call gives eager's values and gradients."""

    def scenario(C, rec):
        f = C(lambda x: _Quantize.apply(x * 2, 4.0, 1.0).pow(2).sum())
        for n in (4, 6, 9):
            x = leaf(n, seed=n)
            out = f(x)
            out.backward()
            rec(f"out{n}", [out.detach(), x.grad])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_scenario(scenario, None, 1e-6)


class _Middle(torch.autograd.Function):
    """A non-tensor argument between two tensors: the gradients keep their inputs' places."""

    @staticmethod
    def forward(ctx, x, k: float, w):
        ctx.save_for_backward(x, w)
        ctx.k = k
        return x * w * k

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.k * 3, None, g * x * ctx.k * 5


def test_non_tensor_argument_between_tensors():
    def scenario(C, rec):
        x, w = leaf(3), leaf(3, seed=1)
        C(lambda x, w: _Middle.apply(x, 2.0, w).sum())(x, w).backward()
        rec("grads", [x.grad, w.grad])

    no_fallback(check_scenario, scenario, None, 1e-6)
