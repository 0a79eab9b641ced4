"""Autograd semantics as users drive it (session 24, ``scripts/probe_autograd24.py``): None or
zeros for parameters an output reaches only through integer paths, argmax, ``.detach()``, a
fully-true mask, a product with zero or an empty index; double backward (gradient penalties)
through norms and convolutions, whose second derivatives and None-ness are eager's; complex
second derivatives; calls under ``inference_mode``; writes under ``no_grad`` through a view of
a view of a leaf; anomaly mode naming eager's node."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._util import leaf


def _compiled(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _both(scenario):
    """``scenario(C)``'s result with ``C`` the identity (eager) and ``torch.compile``."""
    torch._dynamo.reset()
    expected = scenario(lambda f: f)
    torch._dynamo.reset()
    return scenario(_compiled), expected


def _assert_grads(got, expected, tol=1e-9):
    """Gradient lists: the same None-ness, dtypes and values (float64: ``tol``)."""
    assert [g is None for g in got] == [e is None for e in expected], (got, expected)
    for g, e in zip(got, expected):
        if e is not None:
            assert g.dtype == e.dtype
            torch.testing.assert_close(g, e, rtol=tol, atol=tol)


# name -> loss of (x, w): w reaches it through a path eager differentiates to zeros (a
# gradient of zeros) or through none (None)
_PATHS = {
    "long": lambda x, w: (x * (w * 3).long()).sum(),
    "bool": lambda x, w: (x * (w > 0)).sum(),
    "argmax": lambda x, w: x[w.argmax()] * 2,
    "detach": lambda x, w: (x * w.detach()).sum(),
    "data": lambda x, w: (x * w.data).sum(),
    "masked_fill_all_true": lambda x, w: (x + w.masked_fill(w.isfinite(), 0.0)).sum(),
    "times_zero": lambda x, w: (x + w * 0).sum(),
    "empty_index": lambda x, w: x.sum() + w[torch.tensor([], dtype=torch.long)].sum(),
    "where_never": lambda x, w: torch.where(x > 100, w, x).sum(),
    "sign_round": lambda x, w: (x * w.sign() + w.round()).sum(),
    "norm_p0": lambda x, w: x.sum() + w.norm(p=0),
    "topk_indices": lambda x, w: x[w.topk(2).indices].sum(),
}


@pytest.mark.parametrize("name", list(_PATHS))
def test_none_or_zeros_through_paths_as_eager(name):
    def scenario(C):
        x, w = leaf(4, dtype=torch.float64), leaf(4, seed=1, dtype=torch.float64)
        C(_PATHS[name])(x, w).backward()
        return [x.grad, w.grad]

    _assert_grads(*_both(scenario))


def _mlp(norm):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), norm, nn.Linear(5, 2)).double()


@pytest.mark.parametrize(
    "norm", [lambda: nn.LayerNorm(5), lambda: nn.BatchNorm1d(5)], ids=["layernorm", "batchnorm"]
)
def test_gradient_penalty_through_norms_gives_eagers_none(norm):
    """A penalty on the input gradient: the norm's bias does not reach it (eager's double
    backward nodes pass it no gradient, native_layer_norm_backward's bias is ``Tensor()``):
    None, not zeros (AdamW would decay and step it)."""

    def scenario(C):
        m = _mlp(norm())
        x = leaf(4, 3, dtype=torch.float64)
        (g,) = torch.autograd.grad(C(m)(x).sum(), x, create_graph=True)
        ((g.norm(2, dim=1) - 1) ** 2).mean().backward()
        return [x.grad, *(p.grad for p in m.parameters())]

    got, expected = _both(scenario)
    assert expected[4] is None  # (the norm's bias)
    _assert_grads(got, expected)


def test_double_backward_through_convolution_is_eagers():
    """Mixed second derivatives of a convolution (WGAN-GP critics): XLA laid a residual of the
    double backward's forward out (0, 2, 1) and the backward read it as row-major."""

    def scenario(C):
        x = leaf(2, 2, 5, dtype=torch.float64)
        w, b = leaf(3, 2, 2, seed=1, dtype=torch.float64), leaf(3, seed=2, dtype=torch.float64)
        gx, gw, gb = torch.autograd.grad(
            C(lambda x, w, b: F.conv1d(x, w, b).pow(2).sum())(x, w, b), [x, w, b], create_graph=True
        )
        first = torch.autograd.grad(
            gx.pow(2).sum(), [x, w, b], allow_unused=True, retain_graph=True
        )
        second = torch.autograd.grad(gw.pow(2).sum(), [x, w, b], allow_unused=True)
        return [gx, gw, gb, *first, *second]

    _assert_grads(*_both(scenario), tol=1e-10)


def test_gradient_penalty_through_an_lstm_is_eagers():
    """The LSTM's custom op had a backward of constants for the connectivity's create_graph
    run: the input gradient did not require grad, and the penalty's backward raised."""

    def scenario(C):
        torch.manual_seed(0)
        lstm, head = nn.LSTM(3, 4, batch_first=True).double(), nn.Linear(4, 1).double()
        x = leaf(2, 4, 3, dtype=torch.float64)
        f = C(lambda x: head(lstm(x)[0][:, -1]).sum())
        (g,) = torch.autograd.grad(f(x), x, create_graph=True)
        g.pow(2).sum().backward()
        return [g, x.grad, *(p.grad for p in [*lstm.parameters(), *head.parameters()])]

    _assert_grads(*_both(scenario))


def test_double_backward_through_cpu_attention_raises_eagers_error():
    """Eager's CPU flash attention backward has no derivative: a second backward raises; ours
    raises the same error (found by running eager's backward on fake tensors), every time."""

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v).pow(2).sum()

    q, k, v = (leaf(1, 2, 3, 4, seed=i, dtype=torch.float64) for i in range(3))
    (gq,) = torch.autograd.grad(f(q, k, v), q, create_graph=True)
    with pytest.raises(RuntimeError) as eager:
        torch.autograd.grad(gq.pow(2).sum(), [q, k, v], allow_unused=True)
    compiled = _compiled(f)
    for _ in range(2):
        (gq,) = torch.autograd.grad(compiled(q, k, v), q, create_graph=True)
        with pytest.raises(RuntimeError, match=str(eager.value).split("\n")[0]):
            torch.autograd.grad(gq.pow(2).sum(), [q, k, v], allow_unused=True)


@pytest.mark.parametrize(
    "fn",
    [torch.exp, torch.sin, torch.tanh, torch.sqrt, lambda z: z * z, lambda z: z**2.5],
    ids=["exp", "sin", "tanh", "sqrt", "square", "pow"],
)
def test_complex_second_derivatives_are_eagers(fn):
    """Holomorphic functions' JVP rules had stopped their derivative's gradient (second
    derivatives zeros; pow's NaN)."""

    def scenario(C):
        z = torch.tensor([0.3 + 0.4j, -0.5 + 0.2j], dtype=torch.complex128, requires_grad=True)
        (g,) = torch.autograd.grad(C(lambda z: fn(z).abs().sum())(z), z, create_graph=True)
        return [g, *torch.autograd.grad(g.real.sum() + (g * g).imag.sum(), z)]

    _assert_grads(*_both(scenario))


def test_call_under_inference_mode_with_inputs_that_require_grad():
    """The build walks autograd graphs, which inference mode does not make (it raised)."""

    def scenario(C):
        x, w = leaf(4), leaf(4, seed=1)
        with torch.inference_mode():
            out, view = C(lambda x, w: (x * w, w.view(2, 2)))(x, w)
        return [out, view, out.is_inference(), view.requires_grad]

    got, expected = _both(scenario)
    torch.testing.assert_close(got[:2], expected[:2])
    assert got[2:] == expected[2:]


def test_no_grad_write_through_view_of_view_of_leaf():
    """``w.t()[0].zero_()`` under no_grad: the inner view requires grad in eager too (not
    tracked); it was read through a stop point, a copy, and the write was lost."""

    def scenario(C):
        x, w = leaf(2, 3), leaf(3, 2, seed=1)

        def f(x, w):
            with torch.no_grad():
                w.t()[0].zero_()
                w.T[1].mul_(3)
            return (x @ w).exp().sum()

        C(f)(x, w).backward()
        return [w.detach().clone(), x.grad, w.grad]

    got, expected = _both(scenario)
    torch.testing.assert_close(got, expected)


def test_anomaly_mode_names_eagers_node():
    def f(x):
        return (x.log() * x).sum()

    def run(C):
        x = torch.tensor([-1.0, 1.0], requires_grad=True)
        # (anomaly mode warns that it is on, and with the traceback of the failing node's
        # forward: eager's, then ours, where our node ran eager's backward again)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.autograd.detect_anomaly():
                out = C(f)(x)
                with pytest.raises(RuntimeError) as info:
                    out.backward()
        assert any("Error detected in MulBackward0" in str(w.message) for w in caught)
        return str(info.value).splitlines()[0]

    got, expected = _both(run)
    assert expected == "Function 'MulBackward0' returned nan values in its 1th output."
    assert got == expected
