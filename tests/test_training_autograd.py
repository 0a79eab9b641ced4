"""Issue 3 parts 1-2: autograd semantics of compiled regions against eager: which inputs get
gradients, non-differentiable outputs, unusual cotangents, accumulation, retain_graph, mixing
with eager code, torch.autograd.grad, stop points (detach/no_grad) and double backward."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests._training import assert_grads, ran_in_xla, twins


def _compile(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _leaf(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_()


def _grads_of(fn, *leaves, backward=lambda out: out.sum().backward()):
    """Gradients of ``leaves`` (fresh copies) after ``backward(fn(*copies))``."""
    copies = [t.detach().clone().requires_grad_(t.requires_grad) for t in leaves]
    out = fn(*copies)
    backward(out)
    return out, [c.grad for c in copies]


def _assert_same_grads(fn, *leaves, backward=lambda out: out.sum().backward()):
    out, got = _grads_of(_compile(fn), *leaves, backward=backward)
    _, expected = _grads_of(fn, *leaves, backward=backward)
    for g, e in zip(got, expected):
        if e is None:
            assert g is None
        else:
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    return out


# -- which inputs get gradients --------------------------------------------------------------
def test_frozen_parameters_and_buffers_get_no_gradient():
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))
    model[0].weight.requires_grad_(False)
    compiled, model, ref = twins(model)
    x = torch.randn(5, 6)
    out = compiled(x)
    assert ran_in_xla(out)
    out.square().sum().backward()
    ref(x).square().sum().backward()
    assert model[0].weight.grad is None and model[0].bias.grad is not None
    assert_grads(model, ref)
    assert all(not b.requires_grad for b in model.buffers())


def test_integer_inputs_and_outputs():
    emb = nn.Embedding(10, 4)
    compiled, emb_x, ref = twins(emb)
    idx = torch.tensor([[1, 2, 2], [9, 0, 1]])
    out = compiled(idx)
    out.sum().backward()
    ref(idx).sum().backward()
    assert_grads(emb_x, ref)
    assert idx.grad is None


def test_non_differentiable_outputs_match_eager():
    def f(x, w):
        h = x @ w
        return h, h.argmax(-1), h.detach() * 2, (h > 0), h.sum(-1).to(torch.int32)

    x, w = _leaf(4, 3), _leaf(3, 5, seed=1)
    outs = _compile(f)(x, w)
    refs = f(x, w)
    for o, r in zip(outs, refs):
        assert o.dtype == r.dtype and o.requires_grad == r.requires_grad
        assert (o.grad_fn is None) == (r.grad_fn is None)
        torch.testing.assert_close(o, r)
    assert ran_in_xla(outs[0])


def test_unused_outputs_give_no_gradient_to_parameters_only_they_reach():
    """Eager leaves .grad None for a head the loss does not use; optimizers skip such
    parameters (no weight decay, no momentum), so zeros would change training."""

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x):
            h = self.body(x).tanh()
            return self.a(h), self.b(h)

    compiled, model, ref = twins(TwoHeads())
    x = torch.randn(3, 4)
    compiled(x)[0].sum().backward()
    ref(x)[0].sum().backward()
    assert model.b.weight.grad is None
    assert_grads(model, ref)


def test_parameter_used_only_without_gradient_gets_none():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.scale = nn.Linear(4, 4), nn.Parameter(torch.ones(4))

        def forward(self, x):
            return self.lin(x) * self.scale.detach() + self.scale.argmax()

    compiled, model, ref = twins(M())
    x = torch.randn(2, 4)
    compiled(x).sum().backward()
    ref(x).sum().backward()
    assert model.scale.grad is None
    assert_grads(model, ref)


# -- cotangents ------------------------------------------------------------------------------
def test_expanded_none_and_zero_size_cotangents():
    def f(x):
        return x.tanh(), x[:0] * 3, x.exp()

    x = _leaf(4, 3)
    # out.sum() sends an expanded (stride 0) cotangent; the second output gets None.
    _assert_same_grads(f, x, backward=lambda o: (o[0].sum() + o[2][1].sum()).backward())
    # A zero-size cotangent together with a non-contiguous one.
    ct = torch.randn(3, 4).t()
    _assert_same_grads(
        f, x, backward=lambda o: torch.autograd.backward([o[1], o[0]], [torch.ones(0, 3), ct])
    )


def test_complex_gradients_follow_torch_convention():
    def f(w, x):
        return (w * x * w + x.exp()).abs()

    _assert_same_grads(f, _leaf(3, dtype=torch.complex64), _leaf(3, dtype=torch.complex64, seed=1))


# -- accumulation, retain_graph, second backward ---------------------------------------------
def test_gradient_accumulation_over_two_backwards():
    compiled, model, ref = twins(nn.Linear(4, 3))
    for scale in (1.0, 2.0):
        x = torch.randn(5, 4) * scale
        compiled(x).square().sum().backward()
        ref(x).square().sum().backward()
    assert_grads(model, ref)


def test_retain_graph_then_second_backward():
    compiled, model, ref = twins(nn.Linear(4, 3))
    x = torch.randn(5, 4)
    for net in (compiled, ref):
        loss = net(x).tanh().sum()
        loss.backward(retain_graph=True)
        loss.backward()
    assert_grads(model, ref)


def test_second_backward_without_retain_graph_raises_like_eager():
    compiled = _compile(nn.Linear(4, 3))
    loss = compiled(torch.randn(5, 4)).tanh().sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


# -- mixing with eager code and torch.autograd.grad -----------------------------------------
def test_gradients_flow_through_eager_code_before_and_after():
    lin = nn.Linear(4, 4)
    compiled, lin_x, ref = twins(lin)

    def pipeline(net, x, w):
        h = (x * w).sin()  # eager, before
        out = net(h)  # compiled
        return (out.exp() * w.sum()).sum()  # eager, after

    x, w = _leaf(3, 4), _leaf(4, seed=1)
    (x1, w1), (x2, w2) = [[t.detach().clone().requires_grad_() for t in (x, w)] for _ in "ab"]
    pipeline(compiled, x1, w1).backward()
    pipeline(ref, x2, w2).backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    torch.testing.assert_close(w1.grad, w2.grad)
    assert_grads(lin_x, ref)


def test_autograd_grad_leaves_dot_grad_untouched():
    compiled, model, ref = twins(nn.Linear(4, 2))
    x = _leaf(3, 4)
    got = torch.autograd.grad(compiled(x).tanh().sum(), [x, model.weight])
    expected = torch.autograd.grad(ref(x).tanh().sum(), [x, ref.weight])
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    assert model.weight.grad is None and x.grad is None


def test_double_backward_gradient_penalty_matches_eager():
    """create_graph=True through the compiled region, then a loss on the gradients (a gradient
    penalty): second derivatives reach the parameters and the input."""

    def penalty(net, x):
        out = net(x)
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        return out.sum() + (g.norm(dim=1) - 1).square().mean()

    torch.manual_seed(0)
    compiled, model, ref = twins(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    x = _leaf(5, 4)
    x_ref = x.detach().clone().requires_grad_()
    penalty(compiled, x).backward()
    penalty(ref, x_ref).backward()
    assert_grads(model, ref)
    torch.testing.assert_close(x.grad, x_ref.grad)


def test_third_order_gradients():
    def f(x):
        return (x.sin() * x).sum()

    def third(fn, x):
        (g1,) = torch.autograd.grad(fn(x), x, create_graph=True)
        (g2,) = torch.autograd.grad(g1.sum(), x, create_graph=True)
        return torch.autograd.grad(g2.sum(), x)[0]

    x = _leaf(3)
    torch.testing.assert_close(third(_compile(f), x), third(f, x))


def test_create_graph_first_order_gradients_are_right():
    x = _leaf(3, 4)
    f = lambda x: x.sin() * x
    (got,) = torch.autograd.grad(_compile(f)(x).sum(), x, create_graph=True)
    (expected,) = torch.autograd.grad(f(x).sum(), x)
    torch.testing.assert_close(got, expected)


# -- eager's stop points inside the compiled region -----------------------------------------
def test_detach_data_and_no_grad_blocks_stop_gradients():
    def f(x, w):
        a = x * x.detach() + x * x.data
        with torch.no_grad():
            b = w * 3
            v, _ = w.max(0)
        with torch.set_grad_enabled(False):
            q = w.exp()
        return a.sum() + (w * b).sum() + (q * w).sum() + v * w.sum()

    _assert_same_grads(f, _leaf(4), _leaf(3, seed=1))


def _scale_in_place(w):  # an optimizer-like step on a leaf, then a use of its new value
    with torch.no_grad():
        w.mul_(2)
    return w * 3


def _write_a_row(w):
    with torch.no_grad():
        w[0].add_(1)
    return w * w


def _write_a_transposed_view(w):
    with torch.no_grad():
        w.t().mul_(2)
    return w.sin()


def _write_an_intermediate(w, x):
    h = w * x
    with torch.no_grad():
        h.add_(1)
    return h * x


def _write_through_data(w):
    w.data.mul_(2)
    w.detach()[1] = 5
    return w * w


def _init_zeros(w):
    nn.init.zeros_(w)
    return w * 2


def _write_out_argument(w, x):
    with torch.no_grad():
        torch.mul(x, 2, out=w)
    return w * x


def _read_a_view_and_the_value_before(w):
    v, y = w[1:], w * 2
    with torch.no_grad():
        w.sub_(0.1 * w)
    return (v * v).sum() + (y * w).sum()


@pytest.mark.parametrize(
    "fn, shapes",
    [
        (_scale_in_place, [(3,)]),
        (_write_a_row, [(3, 2)]),
        (_write_a_transposed_view, [(2, 3)]),
        (_write_an_intermediate, [(3,), (3,)]),
        (_write_through_data, [(3,)]),
        (_init_zeros, [(3,)]),
        (_write_out_argument, [(3,), (3,)]),
        (_read_a_view_and_the_value_before, [(4,)]),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else "f",
)
def test_writes_autograd_does_not_record_keep_the_gradient(fn, shapes):
    """A write under no_grad or through .data changes a tracked tensor's value, not its
    gradient: eager differentiates later uses as if it had held the new value all along
    (w.mul_(2) under no_grad, then w * 3: w.grad is 3, not 6)."""
    leaves = [_leaf(*s, seed=i) for i, s in enumerate(shapes)]
    out = _assert_same_grads(fn, *leaves)
    assert ran_in_xla(out)


def test_backward_and_optimizer_step_inside_the_compiled_function():
    """loss.backward() inside a compiled function: autograd runs our backward from the graph
    break's eager code, where Dynamo must not trace it (it failed in a JAX pytree call)."""
    torch.manual_seed(0)
    model, ref = nn.Linear(3, 2), nn.Linear(3, 2)
    ref.load_state_dict(model.state_dict())

    def step(m, opt, x):
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    opt, ref_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
    compiled = torch.compile(step, backend="xla")
    for i in range(2):
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(i))
        torch.testing.assert_close(compiled(model, opt, x), step(ref, ref_opt, x))
    torch.testing.assert_close(model.weight, ref.weight)
    torch.testing.assert_close(model.bias, ref.bias)


def test_hooks_on_intermediates_change_gradients_as_in_eager():
    """y.register_hook(fn) inside a compiled function (the ATen export, traced without
    autograd, could not run it): the hook runs in eager on the value XLA computed."""
    import torch2xla

    def f(x, w):
        y = x * w
        y.register_hook(lambda g: g * 10)
        z = y.sin()
        z.register_hook(lambda g: g + 1)
        return (z * w).sum()

    compiled = torch.compile(f, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning, match="autograd hook"):
        _, got = _grads_of(compiled, _leaf(3), _leaf(3, seed=1))
    _, expected = _grads_of(f, _leaf(3), _leaf(3, seed=1))
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "act",
    [nn.ELU(), nn.CELU(0.8), nn.SELU(), nn.Softplus(3, 0.2), nn.Mish()],
    ids=lambda m: type(m).__name__,
)
def test_activation_gradients_at_large_inputs_are_finite_as_in_eager(act):
    """Where a lowering selects between branches, the branch not taken must not overflow:
    exp(501) is inf, and the select's gradient (0 times inf) was NaN where eager's is finite."""
    x = torch.tensor([-3.0, -0.5, 0.0, 2.0, 90.0, 501.0, float("nan")])
    _, got = _grads_of(_compile(act), x.requires_grad_())
    _, expected = _grads_of(act, x)
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-6, equal_nan=True)
    assert got[0][:6].isfinite().all()
