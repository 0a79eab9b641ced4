"""Session 21: backward ops that ``torch.func`` transforms put into compiled graphs from user
code (``scripts/probe_bwdops.py``), each compiled in strict mode (an op without a lowering
raises) and compared with eager: values, dtypes, None-ness; NaN, ties and zero distances where
eager's kernels have rules of their own."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2xla

NAN, INF = float("nan"), float("inf")
DTYPES = (torch.float32, torch.float64)


def _compile(f, strict=True):
    torch._dynamo.reset()
    return torch.compile(f, backend="xla", options={"strict": strict}, dynamic=False)


def _same(got, exp):
    """float32: sums of a few products in another order than eager's; float64 to 1e-12."""
    assert type(got) is type(exp)
    if isinstance(exp, dict):
        assert got.keys() == exp.keys()
        for k in exp:
            _same(got[k], exp[k])
        return
    if isinstance(exp, tuple | list):
        assert len(got) == len(exp)
        for a, b in zip(got, exp):
            _same(a, b)
        return
    assert got.dtype == exp.dtype and got.shape == exp.shape
    tol = (1e-12, 1e-12) if exp.dtype == torch.float64 else (1e-5, 1e-6)
    torch.testing.assert_close(got, exp, rtol=tol[0], atol=tol[1], equal_nan=True)


def _weights(y):
    return torch.linspace(0.1, 3.0, y.numel(), dtype=y.dtype).view(y.shape)


def _grad(f, argnums=0):
    """torch.func.grad of a weighted sum of ``f``'s output (the backward op in the graph)."""

    def g(*args):
        return torch.func.grad(lambda *a: (f(*a) * _weights(f(*a))).sum(), argnums)(*args)

    return g


def _check(f, *args, argnums=0):
    g = _grad(f, argnums)
    _same(_compile(g)(*args), g(*args))


def _train(run, *args):
    """The bridge's backward (jax.vjp of the forward lowering) against eager's."""
    leaves = [a.clone().requires_grad_() for a in args]
    y = run(*leaves)
    (y * _weights(y)).sum().backward()
    return [y.detach()] + [a.grad for a in leaves]


# -- distances ---------------------------------------------------------------------------------
def _points(dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, dtype=dtype, generator=gen)
    y = torch.randn(2, 4, 3, dtype=dtype, generator=gen)
    x[0, 1] = y[0, 2]  # a pair at distance 0
    x[1, 0, :2] = y[1, 0, :2] + torch.tensor([3.0, -3.0], dtype=dtype)  # tie for the maximum
    x[0, 3, 2] = y[0, 1, 2]  # one coordinate equal (p < 1)
    x[1, 4, 1] = NAN
    return x, y


PS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, INF)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cdist_pdist_func_grad(dtype):
    """_cdist_backward/_pdist_backward: every p of eager's kernel, one graph each."""
    x, y = _points(dtype)

    def f(a, b):
        parts = [torch.cdist(a, b, p=p).flatten() for p in PS]
        parts += [torch.cdist(a[:1], b, p=p).flatten() for p in (1.0, 2.0)]  # broadcast batch
        parts += [F.pdist(torch.cat([a[0], b[0]]), p) for p in PS]
        parts += [F.pdist(a[1], p) for p in PS]  # NaN rows
        return torch.cat(parts)

    _check(f, x, y, argnums=(0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", PS)
def test_cdist_pdist_train(dtype, p):
    """The forwards' derivative is eager's kernel too (ties, zero distances, NaN), and
    cdist's infinity norm skips NaN where pdist's and p = 0 keep it (eager's forwards)."""
    x, y = _points(dtype)
    for f, args in (
        (lambda a, b: torch.cdist(a, b, p=p), (x, y)),
        (lambda a: F.pdist(a, p), (torch.cat([x[1], y[1]]),)),
    ):
        _same(_train(_compile(f), *args), _train(f, *args))


# -- masked scatter, abs's second derivative, forward-mode zeros -------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_scatter_backward(dtype):
    gen = torch.Generator().manual_seed(1)
    mask = torch.rand(3, 4, generator=gen) > 0.5
    x = torch.randn(3, 4, dtype=dtype, generator=gen)
    src = torch.randn(2, 9, dtype=dtype, generator=gen)  # more than the mask takes

    def f(x, s):
        return torch.stack([x.masked_scatter(mask, s), x.masked_scatter(mask[0], s)])

    _check(f, x, src, argnums=(0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_abs_second_derivative(dtype):
    """_efficientzerotensor: abs's second derivative."""
    x = torch.tensor([-2.0, 0.0, 3.0, NAN, -INF, -0.0], dtype=dtype)

    def g(x):
        return torch.func.grad(lambda y: torch.func.grad(lambda z: z.abs().sum())(y).sum())(x)

    _same(_compile(g)(x), g(x))


def test_layer_norm_hessian():
    """_new_zeros_with_same_feature_meta (forward-mode AD in torch.func.hessian)."""
    x = torch.randn(2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))

    def h(x):
        return torch.func.hessian(lambda a: (F.layer_norm(a, (2,)) ** 3).sum())(x)

    _same(_compile(h)(x), h(x))


# -- embedding bags ----------------------------------------------------------------------------
INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 2, 2])
OFFSETS = torch.tensor([0, 4, 4, 7])  # an empty bag


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_bag_backward(dtype):
    w = torch.randn(10, 3, dtype=dtype, generator=torch.Generator().manual_seed(3))
    w[4, 1] = w[5, 1]  # a tie for a bag's maximum

    def f(w):
        outs = []
        for mode in ("sum", "mean", "max"):
            for pad in (None, 2):
                outs.append(F.embedding_bag(INDICES, w, OFFSETS, mode=mode, padding_idx=pad))
                outs.append(F.embedding_bag(INDICES.view(2, 5), w, mode=mode, padding_idx=pad))
        return torch.cat(outs)

    _check(f, w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_bag_per_sample_weights_backward(dtype):
    gen = torch.Generator().manual_seed(4)
    w, psw = torch.randn(10, 3, dtype=dtype, generator=gen), torch.randn(10, dtype=dtype)

    def f(w, psw):
        return F.embedding_bag(
            INDICES, w, OFFSETS, mode="sum", per_sample_weights=psw, padding_idx=4
        )

    _check(f, w, psw, argnums=(0, 1))


@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_bag_backward_left_to_eager(sparse):
    """scale_grad_by_freq (eager's quirky CPU gradient) and sparse gradients run in eager,
    the backward op as the forward: a plain compile gives eager's (strict mode names
    scale_grad_by_freq's ops; Dynamo keeps the sparse gradient out of the graph)."""
    w = torch.randn(10, 3, dtype=torch.float64)

    def g(w):
        def loss(w):
            out = F.embedding_bag(INDICES, w, OFFSETS, scale_grad_by_freq=not sparse, sparse=sparse)
            return out.sum()

        return torch.func.grad(loss)(w)

    if not sparse:
        with pytest.raises(torch2xla.UnsupportedOpsError, match="scale_grad_by_freq"):
            _compile(g)(w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _compile(g, strict=False)(w)
    exp = g(w)
    assert got.layout == exp.layout
    torch.testing.assert_close(got.to_dense(), exp.to_dense(), rtol=0, atol=0)


# -- anti-aliased resizing ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_backward(dtype, mode):
    x = torch.randn(2, 3, 9, 7, dtype=dtype, generator=torch.Generator().manual_seed(5))
    sizes = [{"size": (4, 3)}, {"size": (13, 17)}, {"size": (1, 1)}, {"scale_factor": 0.37}]

    def f(x):
        outs = [
            F.interpolate(x, mode=mode, align_corners=ac, antialias=True, **kw).flatten()
            for ac in (False, True)
            for kw in sizes
        ]
        return torch.cat(outs)

    g = _grad(f)
    got = [_compile(f)(x), _compile(g)(x), *_train(_compile(f), x)]
    exp = [f(x), g(x), *_train(f, x)]
    if dtype == torch.float64:
        _same(got, exp)
        return
    # float32: eager computes the filter's weights in float32 (ours are float64's, rounded
    # once); each result as close to the float64 reference as eager's (4x its error, or 1e-6)
    xd = x.double()
    ref = [f(xd), g(xd), *_train(f, xd)]
    for a, b, r in zip(got, exp, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        err = (b.double() - r).abs().max().item()
        torch.testing.assert_close(a.double(), r, rtol=0, atol=max(4 * err, 1e-6))


# -- attention and RNNs inside torch.func ------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_func_grad(dtype):
    """The CPU flash kernel's backward; sdpa inside grad keeps torch's decomposition (the
    custom op's autograd function is rejected by functorch)."""
    gen = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=dtype, generator=gen) for _ in range(3))
    bias = torch.randn(5, 5, dtype=dtype, generator=gen)

    def f(q, k, v):
        return torch.stack(
            [
                F.scaled_dot_product_attention(q, k, v),
                F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
                F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                F.scaled_dot_product_attention(q, k, v, attn_mask=bias > 0),
                F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True),
            ]
        )

    _check(f, q, k, v, argnums=(0, 1, 2))


def test_rnn_and_sdpa_in_func_transforms():
    torch.manual_seed(7)
    x = torch.randn(2, 5, 4, dtype=torch.float64)
    lstm = nn.LSTM(4, 3, batch_first=True).double()
    gru = nn.GRU(4, 3, batch_first=True).double()

    def f(x):
        return torch.stack(
            [
                torch.func.grad(lambda a: lstm(a)[0].sum())(x),
                torch.func.grad(lambda a: gru(a)[0].sum())(x),
                torch.func.vmap(
                    torch.func.grad(lambda a: F.scaled_dot_product_attention(a, a, a).sum())
                )(x),
            ]
        )

    _same(_compile(f)(x), f(x))


def test_weight_norm_functional_call_falls_back():
    """weight_norm's attribute set inside functional_call under grad escapes the transform as a
    graph output: the graph runs in eager (aot_eager cannot export it either) instead of the
    backend crashing."""
    torch.manual_seed(8)
    lin = nn.utils.weight_norm(nn.Linear(3, 4).double())
    x = torch.randn(2, 3, dtype=torch.float64)
    params = {k: v.detach() for k, v in lin.named_parameters()}

    def g(x):
        return torch.func.grad(lambda p: torch.func.functional_call(lin, p, (x,)).sum())(params)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _compile(g, strict=False)(x)
    _same(got, g(x))
