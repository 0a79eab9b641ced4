"""Sequence models as users train them (session 33), strict against eager.

Stacked ``nn.LSTM``/``nn.GRU``/``nn.RNN`` with ``dropout`` between layers in training
(``capture/_rnn_dropout.py``): torch's Python decomposition of the RNN ops never drops
anything out, so the compiled model trained without the dropout. ``dropout=1`` is
deterministic (the next layer reads zeros), so values and gradients compare with eager's in
float64; ``dropout=0.5`` through identity layers shows the mask itself: each element dropped
or scaled by 2, about half dropped, a new mask per call, the backward through the same mask.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests._util import assert_same


def _seeded(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _parity(make, inputs, run):
    """``run(module, *inputs)`` compiled and eager: outputs, the inputs' and the parameters'
    gradients (None-ness included)."""
    results = []
    for compile_it in (True, False):
        torch.manual_seed(0)
        m = make().double().train()
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        f = torch.compile(run, backend="xla") if compile_it else run
        torch._dynamo.reset()
        outs = f(m, *leaves)
        total = sum((o * _seeded(*o.shape, seed=i)).sum() for i, o in enumerate(outs))
        total.backward()
        grads = [t.grad for t in leaves] + [p.grad for p in m.parameters()]
        results.append((outs, grads))
    (out, grads), (ref, ref_grads) = results
    assert_same(out, ref, rtol=1e-10, atol=1e-12)
    assert [g is None for g in grads] == [g is None for g in ref_grads]
    assert_same([g for g in grads if g is not None], [g for g in ref_grads if g is not None])


def _with_states(m, x, h0, c0):
    out, (h, c) = m(x, (h0, c0))
    return out, h, c


@pytest.mark.parametrize(
    "kw",
    [
        {"num_layers": 3, "bidirectional": True, "batch_first": True},
        {"num_layers": 2, "proj_size": 3},
    ],
    ids=["bidir_3layers", "proj"],
)
def test_lstm_dropout_one_between_layers(kw, lowered_ops):
    d = kw["num_layers"] * (2 if kw.get("bidirectional") else 1)
    x = _seeded(2, 4, 3, seed=1)
    h0 = _seeded(d, 2 if kw.get("batch_first") else 4, kw.get("proj_size", 5), seed=2)
    c0 = _seeded(d, h0.shape[1], 5, seed=3)
    _parity(lambda: nn.LSTM(3, 5, dropout=1.0, **kw), [x, h0, c0], _with_states)
    if "proj_size" not in kw:  # (each layer the scan lowering: projections decompose)
        assert torch.ops.torch2xla.lstm.default in lowered_ops


def test_rnn_relu_dropout_one_without_states():
    _parity(
        lambda: nn.RNN(3, 4, 2, nonlinearity="relu", dropout=1.0),
        [_seeded(5, 2, 3, seed=1)],
        lambda m, x: m(x),
    )


def test_dropout_half_between_identity_layers():
    """relu(dropout(relu(x))) with identity weights: every element 0 or 2x, about half of
    them dropped, a new mask per call; the gradient goes through the same mask."""
    n = 64
    m = nn.RNN(n, n, 2, nonlinearity="relu", bias=False, dropout=0.5)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.eye(n) if name.startswith("weight_ih") else torch.zeros(n, n))
    f = torch.compile(lambda x: m(x)[0], backend="xla")
    x = (_seeded(40, 8, n, seed=1).abs() + 0.5).float().requires_grad_()
    outs = []
    for _ in range(2):
        out = f(x)
        kept = out != 0
        torch.testing.assert_close(out[kept], 2 * x.detach()[kept], rtol=0, atol=0)
        assert 0.45 < 1 - kept.double().mean().item() < 0.55
        (grad,) = torch.autograd.grad(out.sum(), x)
        torch.testing.assert_close(grad, 2.0 * kept, rtol=0, atol=0)
        outs.append(out)
    assert not torch.equal(outs[0], outs[1])
    m.eval()
    torch.testing.assert_close(f(x), x, rtol=0, atol=0)
