"""``nn.LSTM`` as ``ops/_rnn.py`` lowers it (one scan per layer and direction, its own
gradient), and the GRU/RNN layers that share its input projection, against eager: values,
gradients and their None-ness, and the gradients' distance from a float64 reference."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests._training import grad_parity


class _Layer(nn.Module):
    """An RNN layer whose output and final states come back as one tensor."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.rnn = layer

    def forward(self, x, *state):
        hx = None if not state else state[0] if len(state) == 1 else tuple(state)
        out, h = self.rnn(x, hx)
        return torch.cat([t.flatten() for t in (out, *(h if isinstance(h, tuple) else (h,)))])


def _loss(out):
    # every element weighted differently, so that a transposed gradient cannot pass
    return (out * torch.linspace(-1, 2, out.numel())).sum()


# 16 steps of 8 sequences: 128 rows in the input projection (a plain product on the CPU)
@pytest.mark.parametrize(
    ("batch_first", "num_layers", "bidirectional", "initial_state"),
    [
        (True, 2, False, False),
        (False, 1, True, True),
        (True, 2, True, True),
        (False, 2, False, True),
    ],
)
def test_lstm_values_and_grads(batch_first, num_layers, bidirectional, initial_state, lowered_ops):
    torch.manual_seed(0)
    layer = nn.LSTM(6, 10, num_layers, batch_first=batch_first, bidirectional=bidirectional)
    model = _Layer(layer).train()  # dropout 0: train mode takes the lowering too
    x = torch.randn((8, 16, 6) if batch_first else (16, 8, 6), requires_grad=True)
    states = ()
    if initial_state:
        d = num_layers * (2 if bidirectional else 1)
        states = (
            torch.randn(d, 8, 10, requires_grad=True),
            torch.randn(d, 8, 10, requires_grad=True),
        )
    grad_parity(model, x, *states, loss=_loss)
    assert torch.ops.torch2xla.lstm.default in lowered_ops


def test_lstm_grads_of_the_states_none_as_eager():
    torch.manual_seed(0)
    layer = nn.LSTM(5, 7, 2, batch_first=True)

    def f(x, h0, c0):
        out, (h, c) = layer(x, (h0, c0))
        return (
            (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum() + h.sum() - c.sum()
        )

    compiled = torch.compile(f, backend="xla")
    results = []
    for fn in (compiled, f):
        x = torch.randn(3, 6, 5, generator=torch.Generator().manual_seed(1), requires_grad=True)
        h0 = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(2))  # no grad wanted
        c0 = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(3), requires_grad=True)
        layer.zero_grad(set_to_none=True)
        fn(x, h0, c0).backward()
        results.append((x.grad, h0.grad, c0.grad, [p.grad.clone() for p in layer.parameters()]))
    (x1, h1, c1, p1), (x2, h2, c2, p2) = results
    assert h1 is None and h2 is None
    torch.testing.assert_close(x1, x2, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(c1, c2, rtol=1e-4, atol=1e-5)
    for a, b in zip(p1, p2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_lstm_grads_as_close_to_float64_as_eager():
    """32 steps: the gradients' float32 error (against float64 eager) no larger than eager's
    own float32 error, within a factor for rounding in another order."""
    torch.manual_seed(0)
    layer = nn.LSTM(16, 32, 2, batch_first=True)
    x = torch.randn(4, 32, 16)

    def grads(fn, module, inp):
        module.zero_grad(set_to_none=True)
        inp = inp.clone().requires_grad_(True)
        out, _ = fn(inp)
        (
            out * torch.linspace(-1, 2, out.numel(), dtype=out.dtype).reshape(out.shape)
        ).sum().backward()
        return torch.cat([inp.grad.flatten(), *(p.grad.flatten() for p in module.parameters())])

    ref = grads(layer.double(), layer, x.double())
    layer.float()
    eager = grads(layer, layer, x)
    xla = grads(torch.compile(layer, backend="xla"), layer, x)
    err_eager = ((eager.double() - ref).norm() / ref.norm()).item()
    err_xla = ((xla.double() - ref).norm() / ref.norm()).item()
    assert err_xla <= 2 * err_eager + 1e-7, (err_xla, err_eager)


def test_lstm_projection_matches_eager():
    """``proj_size`` stays with the decomposition (see ops/_rnn.py); it matches eager too."""
    torch.manual_seed(0)
    model = _Layer(nn.LSTM(5, 8, 2, proj_size=3, batch_first=True))
    grad_parity(model, torch.randn(4, 6, 5, requires_grad=True), loss=_loss)


@pytest.mark.parametrize("kind", ["gru", "rnn_tanh"])
def test_gru_and_rnn_projection_over_128_rows(kind, lowered_ops):
    """The GRU/RNN input projection of 128 rows and more is the CPU's plain product."""
    torch.manual_seed(0)
    if kind == "gru":
        layer = nn.GRU(6, 10, 2, bidirectional=True)
    else:
        layer = nn.RNN(6, 10, 1, batch_first=True)
    x = torch.randn(16, 8, 6, requires_grad=True)
    grad_parity(_Layer(layer), x, loss=_loss)
    assert getattr(torch.ops.torch2xla, kind).default in lowered_ops


def test_lstm_step_activations_over_the_whole_width(tmp_path):
    """The scan's step applies the sigmoid to the (batch, 4 hidden) pre-activations as a
    whole: XLA's CPU compiler runs it several times slower on column slices."""
    torch.manual_seed(0)
    layer = nn.LSTM(5, 8).eval()
    compiled = torch.compile(layer, backend="xla", options={"dump_dir": str(tmp_path)})
    with torch.no_grad():
        compiled(torch.randn(4, 3, 5))
    (jaxpr,) = tmp_path.glob("*/graph_*.inference.jaxpr.txt")
    lines = [line for line in jaxpr.read_text().splitlines() if "= logistic" in line]
    assert lines and all(":f32[3,32] = logistic" in line for line in lines), lines
