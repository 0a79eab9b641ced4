"""LSTM final states where eager's kernel does not take oneDNN (oneDNN off, projections):
torch 2.11's Python decomposition of ``aten::lstm``, which Dynamo's fake tensors and the
export run, gave ``h_n``/``c_n`` an extra dimension for a batch of more than one (silently
wrong shapes, shapes read from them baked wrong; ``capture/_lstm_states.py``). Strict against
eager: shapes, dtypes, values and gradients (float64, so the tolerance is round-off)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests._util import assert_same


def _onednn(on):
    # (the flags() context: a test of the same worker may have imported torch's
    # common_utils, whose disable_global_flags makes setting the flag itself raise)
    return torch.backends.mkldnn.flags(enabled=on)


class _Head(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, **kw).double()

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        # (shapes read from h: Dynamo bakes them into the graph)
        return out, h, c, h[-1] * 2, h.reshape(h.shape[1], -1), c.sum(-1)


@pytest.mark.parametrize(
    "kw",
    [
        {"batch_first": True},
        {"num_layers": 2},
        {"bidirectional": True},
        {"proj_size": 3},
        {"proj_size": 2, "num_layers": 2, "bidirectional": True, "batch_first": True},
    ],
    ids=["batch_first", "layers", "bidirectional", "proj", "proj_all"],
)
@pytest.mark.parametrize("onednn", [False, True])
def test_lstm_states_shapes_values_and_gradients(kw, onednn):
    with _onednn(onednn):
        _shapes_values_and_gradients(kw)


def _shapes_values_and_gradients(kw):
    torch.manual_seed(0)
    m = _Head(**kw)
    compiled = torch.compile(m, backend="xla")
    results = []
    for f in (compiled, m):
        m.zero_grad(set_to_none=True)
        x = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        x.requires_grad_(True)
        outs = f(x)
        sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
        results.append((outs, x.grad, [p.grad for p in m.parameters()]))
    assert [tuple(o.shape) for o in results[0][0]] == [tuple(o.shape) for o in results[1][0]]
    assert_same(results[0], results[1])


def test_lstm_states_under_autocast_without_onednn():
    # (the decomposition computes the autocast LSTM where oneDNN is off)
    with _onednn(False):
        _under_autocast()


def _under_autocast():
    torch.manual_seed(0)
    m = nn.LSTM(4, 5, num_layers=2)
    compiled = torch.compile(m, backend="xla")
    x = torch.randn(3, 2, 4)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = m(x), compiled(x)
    assert_same(got, want)
