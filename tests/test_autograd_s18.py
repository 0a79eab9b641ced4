"""Autograd classes found by scripts/probe_autograd2.py (session 18), against eager strictly:
values, dtypes, None-ness of gradients, errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._util import check_scenario, leaf

OPTIONS = {"strict": True}


def _check(scenario, options: dict = OPTIONS) -> list:
    # float32 programs against eager's float32 kernels: a few ulps
    return check_scenario(scenario, options, tol=1e-6)


# -- outputs of one call backpropagated separately ----------------------------------------------
_BACKWARD_TWICE = "Trying to backward through the graph a second time"


def _separate(f, make, backwards):
    def scenario(C, rec):
        inputs = make()
        outs = C(f)(*inputs)
        for k, run in enumerate(backwards):
            run(outs, inputs, rec)
            rec(f"grads{k}", [t.grad for t in inputs if t.requires_grad])

    return scenario


def _bw(i):
    return lambda outs, inputs, rec: outs[i].sum().backward()


def _ag(i, *which):
    def run(outs, inputs, rec):
        rec("autograd.grad", torch.autograd.grad(outs[i].sum(), [inputs[k] for k in which]))

    return run


def _two(x, w):
    return (x * w).sin(), (x + 1).exp()


def _shared(x, w):
    h = (x * w).exp()
    return h.sin(), h.cos()


def _shared_add(x, w):
    h = x + w  # (add saves nothing: both backwards may run)
    return h.sin(), h.cos()


def _xw():
    return leaf(3), leaf(3, seed=1)


_SEPARATE = {
    "disjoint": (_two, [_bw(0), _bw(1)], None),
    "disjoint_reversed": (_two, [_bw(1), _bw(0)], None),
    "shared_saved": (_shared, [_bw(0), _bw(1)], _BACKWARD_TWICE),
    "shared_node_saves_nothing": (_shared_add, [_bw(0), _bw(1)], None),
    "same_output_twice": (_two, [_bw(0), _bw(1), _bw(0)], _BACKWARD_TWICE),
    "autograd_grad": (_two, [_ag(0, 0, 1), _ag(1, 0)], None),
    "autograd_grad_shared": (_shared, [_ag(0, 0), _ag(1, 1)], _BACKWARD_TWICE),
    "one_output_only": (_two, [_bw(1)], None),
}


@pytest.mark.parametrize("name", list(_SEPARATE))
def test_outputs_backpropagated_separately_free_and_raise_as_eager(name):
    """One autograd node stands for the whole graph: a backward without retain_graph through
    one output freed the residuals of all, and a backward through another raised 'backward
    through the graph a second time' where eager runs it (the two share no node that saves
    tensors). Now the node frees per eager's nodes: it raises where eager raises, and keeps
    the residuals while another output's backward may run."""
    f, backwards, error = _SEPARATE[name]
    seen = _check(_separate(f, _xw, backwards))
    if error is None:
        assert seen[-1][0] != "raised", seen[-1]
    else:
        assert seen[-1][0] == "raised" and error in seen[-1][1][1]


def test_loss_and_logits_second_backward_raises_as_eager():
    """The common ``loss, logits = model(x)``: logits' backward runs nodes loss's freed."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)

    def scenario(C, rec):
        def f(x, y):
            logits = lin(x)
            return F.cross_entropy(logits, y), logits

        lin.zero_grad(set_to_none=True)
        x = leaf(5, 4).detach()
        loss, logits = C(f)(x, torch.tensor([0, 1, 2, 0, 1]))
        loss.backward()
        rec("grads", [p.grad for p in lin.parameters()])
        logits.sum().backward()

    seen = _check(scenario)
    assert seen[-1][0] == "raised" and _BACKWARD_TWICE in seen[-1][1][1]


def test_retain_graph_then_separate_outputs():
    def scenario(C, rec):
        x, w = _xw()
        a, c = C(_two)(x, w)
        a.sum().backward(retain_graph=True)
        a.sum().backward()
        rec("g1", [x.grad, w.grad])
        c.sum().backward()
        rec("g2", [x.grad, w.grad])
        c.sum().backward()

    seen = _check(scenario)
    assert seen[-1][0] == "raised" and _BACKWARD_TWICE in seen[-1][1][1]


# -- inputs sharing memory that are separate autograd leaves -------------------------------------
def test_detached_leaf_sharing_memory_gets_its_own_gradient():
    """``d = x.detach().requires_grad_()`` shares x's memory: the graph after the break took
    both as one base (a view of d), so x's gradient went into d and x.grad stayed None."""

    def scenario(C, rec):
        def f(x):
            d = x.detach().requires_grad_()
            return (d * x.sin()).sum(), d

        x = leaf(3)
        out, d = C(f)(x)
        out.backward()
        rec("grads", [x.grad, d.grad])

    seen = _check(scenario)
    assert all(g is not None for g in seen[0][1])


def test_parameters_made_from_one_tensor_get_their_own_gradients():
    def scenario(C, rec):
        w = leaf(3, 4).detach()
        p, q = nn.Parameter(w), nn.Parameter(w[1:])  # (one memory, two leaves)

        def f(x):
            return ((x @ p).tanh() * q[0].sum()).sum()

        C(f)(leaf(2, 3).detach()).backward()
        rec("grads", [p.grad, q.grad])

    _check(scenario)


# -- custom autograd.Function: double backward ---------------------------------------------------
class _Scale(torch.autograd.Function):
    """A backward eager differentiates again (it is not @once_differentiable)."""

    @staticmethod
    def forward(ctx, x, k: float):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x * ctx.k, None


class _OnceMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


def _first_and_second(fn, compiled: bool):
    torch._dynamo.reset()
    x = leaf(3)
    g = torch.compile(fn, backend="xla") if compiled else fn
    (gx,) = torch.autograd.grad(g(x), x, create_graph=True)
    try:
        gx.sum().backward()
    except RuntimeError as e:
        return gx, e
    return gx, x.grad


@pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")
def test_custom_function_double_backward_as_eager():
    """Dynamo traces a custom Function's backward with autograd off, so a create_graph
    backward through it (run in eager inside the graph) took its gradients as constants: the
    second derivatives were silently wrong, then (session 18) raised. Its backward now runs in
    the backward call's grad mode, as eager's (``capture/_custom_backward``): eager's values."""

    def f(x):
        return _Scale.apply(x.sin(), 1.5).pow(2).sum()

    want_g, want_gg = _first_and_second(f, False)
    got_g, got_gg = _first_and_second(f, True)
    torch.testing.assert_close(got_g, want_g, rtol=1e-6, atol=1e-6)
    assert isinstance(want_gg, torch.Tensor)
    torch.testing.assert_close(got_gg, want_gg, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")
def test_once_differentiable_double_backward_raises_as_eager():
    """(Its incoming gradient requires grad, so eager's @once_differentiable raises, with
    its message; where only its saved tensors do, eager's gradients are constants:
    test_training_utils.)"""

    def f(x):
        return _OnceMul.apply(x.exp(), x * 2).pow(2).sum()

    want_g, want = _first_and_second(f, False)
    got_g, got = _first_and_second(f, True)
    torch.testing.assert_close(got_g, want_g, rtol=1e-6, atol=1e-6)
    assert isinstance(want, RuntimeError) and "once_differentiable" in str(want)
    assert isinstance(got, RuntimeError) and str(got) == str(want)


@pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")
def test_custom_function_create_graph_without_second_backward_through_it():
    """create_graph=True where the second backward does not reach the Function's gradients
    (they flow into a detached use): runs, with eager's values."""

    def scenario(C, rec):
        def f(x, w):
            return _Scale.apply(x, 2.0).sum() + (x * w).pow(2).sum()

        x, w = _xw()
        gx, gw = torch.autograd.grad(C(f)(x, w), [x, w], create_graph=True)
        rec("g", [gx, gw])
        gw.sum().backward()
        rec("grads", [x.grad, w.grad])

    _check(scenario, {})
