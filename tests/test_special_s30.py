"""Tensors that are not plain dense ones, compiled with backend="xla", strictly against eager:
jagged nested tensors (inputs and made inside), ``__torch_dispatch__`` subclasses made inside,
sparse embedding gradients through ops that compute the weight, ``max_norm=`` beside an eager
island, EmbeddingBag ``per_sample_weights`` with ``sparse=True``
(``scripts/probe_special30.py`` probes more)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2xla


def _compile(f, **kw):
    torch._dynamo.reset()
    return torch.compile(f, backend="xla", **kw)


def _njt():
    return torch.nested.nested_tensor(
        [torch.arange(6.0).view(2, 3), torch.arange(12.0).view(4, 3)], layout=torch.jagged
    )


def _same_grad(got, want):
    assert (got is None) == (want is None)
    if want is None:
        return
    assert got.layout == want.layout
    if want.layout == torch.sparse_coo:
        got, want = got.coalesce(), want.coalesce()
        torch.testing.assert_close(got.indices(), want.indices(), rtol=0, atol=0)
        got, want = got.values(), want.values()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


# -- jagged nested tensors: the graph runs in eager, saying why (it crashed reading sizes) --
def test_jagged_input_runs_in_eager_with_a_clear_warning():
    def f(nt):
        return (nt.sin() * 2).values()

    want = f(_njt())
    c = _compile(f)
    with pytest.warns(torch2xla.FallbackWarning, match="input 'nt' is a jagged nested tensor"):
        got = c(_njt())
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # (dynamic shapes, another ragged length)
    c = _compile(f, dynamic=True)
    other = torch.nested.nested_tensor(
        [torch.ones(1, 3), torch.ones(2, 3), torch.ones(5, 3)], layout=torch.jagged
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        c(_njt())
        got = c(other)
    torch.testing.assert_close(got, f(other), rtol=0, atol=0)


def test_jagged_input_returned_keeps_its_layout():
    def f(nt):
        return nt.cos() + 1

    c = _compile(f)
    with pytest.warns(torch2xla.FallbackWarning):
        got = c(_njt())
    want = f(_njt())
    assert got.is_nested and got.layout == torch.jagged
    for g, w in zip(got.unbind(), want.unbind()):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_jagged_input_strict_raises_naming_the_input():
    c = torch.compile(lambda nt: nt * 2, backend="xla", options={"strict": True})
    torch._dynamo.reset()
    with pytest.raises(torch2xla.UnsupportedOpsError, match="jagged nested tensor"):
        c(_njt())


def test_jagged_made_inside_with_gradients():
    def f(a, b):
        nt = torch.nested.as_nested_tensor([a, b], layout=torch.jagged)
        return (nt.sin() * 2).values().sum()

    gen = torch.Generator().manual_seed(0)
    a0, b0 = torch.randn(2, 3, generator=gen), torch.randn(3, 3, generator=gen)
    a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    f(a, b).backward()
    ga, gb = a0.clone().requires_grad_(), b0.clone().requires_grad_()
    c = _compile(f)
    with pytest.warns(torch2xla.FallbackWarning, match="makes a jagged nested tensor") as rec:
        out = c(ga, gb)
    assert not any("bug in torch2xla" in str(w.message) for w in rec)
    out.backward()
    torch.testing.assert_close(ga.grad, a.grad, rtol=0, atol=0)
    torch.testing.assert_close(gb.grad, b.grad, rtol=0, atol=0)


# -- __torch_dispatch__ subclasses made inside the graph ---------------------------------
def test_two_tensor_made_and_unwrapped_inside_stays_compiled():
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        u = TwoTensor(x * 2, x + 1).sin() * 3
        return u.a + u.b

    x0 = torch.linspace(-1, 1, 5)
    want = f(x0.clone().requires_grad_())
    c = _compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.FallbackWarning)
        got = c(x0.clone().requires_grad_())
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert got.requires_grad == want.requires_grad  # (False: eager's parts are no history)


def test_two_tensor_made_and_returned_runs_in_eager_saying_why():
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        return TwoTensor(x * 2, x + 1) + 1

    c = _compile(f)
    with pytest.warns(torch2xla.FallbackWarning, match="makes a TwoTensor") as rec:
        got = c(torch.arange(3.0))
    assert not any("bug in torch2xla" in str(w.message) for w in rec)
    want = f(torch.arange(3.0))
    assert type(got) is TwoTensor
    torch.testing.assert_close(got.a, want.a, rtol=0, atol=0)
    torch.testing.assert_close(got.b, want.b, rtol=0, atol=0)


# -- sparse embedding gradients ----------------------------------------------------------
def _emb_grads(f, weight, idx):
    """``f(w, idx).backward()`` compiled as in eager: the gradient (sparse), or eager's error
    (its backward of a view or a cast has no sparse form: ``reshape``, ``to``)."""
    w = weight.clone().requires_grad_()
    error = None
    try:
        f(w, idx).backward()
    except RuntimeError as e:
        error = e
    cw = weight.clone().requires_grad_()
    c = _compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = c(cw, idx)
    torch.testing.assert_close(out, f(weight.clone(), idx), rtol=1e-6, atol=1e-6)
    if error is not None:
        with pytest.raises(type(error), match=re.escape(str(error).split("\n")[0])):
            out.backward()
        return
    out.backward()
    _same_grad(cw.grad, w.grad)


@pytest.mark.parametrize(
    "make",
    [lambda w: w * 2, lambda w: w.view(5, 3), lambda w: w.double()],
    ids=["scaled", "view", "cast"],
)
def test_sparse_embedding_of_a_computed_weight(make):
    def f(w, i):
        return (F.embedding(i, make(w), sparse=True) * torch.arange(3.0)).sum()

    _emb_grads(
        f,
        torch.randn(5, 3, generator=torch.Generator().manual_seed(1)),
        torch.tensor([[0, 4], [4, 1]]),
    )


def test_sparse_embedding_max_norm():
    def f(w, i):
        return (F.embedding(i, w, max_norm=1.0, sparse=True) * torch.arange(3.0)).sum()

    weight = torch.randn(6, 3, generator=torch.Generator().manual_seed(2))
    idx = torch.tensor([[0, 2, 2], [5, 0, 1]])
    w, cw = weight.clone().requires_grad_(), weight.clone().requires_grad_()
    f(w, idx).backward()
    c = _compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        c(cw, idx).backward()
    _same_grad(cw.grad, w.grad)
    torch.testing.assert_close(cw.detach(), w.detach(), rtol=0, atol=0)  # (renormed in place)


def test_dense_max_norm_beside_an_eager_island():
    torch.manual_seed(0)
    a, b = nn.Embedding(6, 3, max_norm=1.0), nn.Embedding(6, 3, sparse=True)
    a2, b2 = nn.Embedding(6, 3, max_norm=1.0), nn.Embedding(6, 3, sparse=True)
    a2.load_state_dict(a.state_dict())
    b2.load_state_dict(b.state_dict())
    idx = torch.tensor([[0, 2, 2], [5, 0, 1]])
    want = (a(idx) * b(idx)).sum()
    want.backward()
    c = _compile(lambda i: (a2(i) * b2(i)).sum())
    with pytest.warns(torch2xla.FallbackWarning, match="sparse=True"):
        got = c(idx)
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    _same_grad(a2.weight.grad, a.weight.grad)
    _same_grad(b2.weight.grad, b.weight.grad)
    torch.testing.assert_close(a2.weight.detach(), a.weight.detach(), rtol=0, atol=0)


def test_sparse_embedding_bag_per_sample_weights():
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(6, 3, mode="sum", sparse=True)
    bag2 = nn.EmbeddingBag(6, 3, mode="sum", sparse=True)
    bag2.load_state_dict(bag.state_dict())
    psw0 = torch.randn(5)
    psw, psw2 = psw0.clone().requires_grad_(), psw0.clone().requires_grad_()
    i, o = torch.tensor([0, 2, 2, 5, 1]), torch.tensor([0, 2])
    want = bag(i, o, per_sample_weights=psw).pow(2).sum()
    want.backward()
    c = _compile(lambda i, o: bag2(i, o, per_sample_weights=psw2).pow(2).sum())
    with pytest.warns(torch2xla.FallbackWarning, match="sparse=True"):
        got = c(i, o)
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    _same_grad(bag2.weight.grad, bag.weight.grad)
    _same_grad(psw2.grad, psw.grad)
