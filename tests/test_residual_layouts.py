"""Training residuals in the layouts XLA chooses (``residual_layouts="auto"``, the default) give
eager's outputs and gradients, and the outputs torch reads stay row-major."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import torch2xla
from tests._util import ProgramCounter, assert_same


def _train_like_eager(model, x, layouts):
    ref_model, ref_x = copy.deepcopy(model), x.detach().clone().requires_grad_()
    xx = x.detach().clone().requires_grad_()
    out = torch.compile(
        model, backend="xla", options={"strict": True, "residual_layouts": layouts}
    )(xx)
    ref = ref_model(ref_x)
    assert_same(out, ref, atol=2e-5)
    loss = sum(o.square().sum() for o in torch.utils._pytree.tree_leaves(out))
    ref_loss = sum(o.square().sum() for o in torch.utils._pytree.tree_leaves(ref))
    loss.backward()
    ref_loss.backward()
    assert_same(xx.grad, ref_x.grad, atol=2e-5)
    for p, r in zip(model.parameters(), ref_model.parameters()):
        assert_same(p.grad, r.grad, rtol=1e-5, atol=5e-5)


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )


@pytest.mark.parametrize("layouts", ["auto", "default"])
def test_cnn_trains_like_eager(layouts, monkeypatch):
    """XLA's CPU compiler keeps convolution activations in NHWC: with "auto" some residuals
    leave the forward in that layout, and the backward takes them so."""
    counter = ProgramCounter(monkeypatch)
    _train_like_eager(_cnn(), torch.randn(4, 3, 12, 12), layouts)
    fwd = [fns.fwd.jitted for p in counter.programs for fns in p._train_cache.values()]
    assert fwd
    other = [f.kept_formats for f in fwd if f.kept_formats is not None]
    assert bool(other) == (layouts == "auto"), "expected non-row-major residuals only with auto"


class _Transposing(nn.Module):
    """Outputs XLA would rather produce transposed (the LSTM's output was such a case)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        return h.transpose(0, 1) * 2, torch.sin(h).permute(2, 0, 1).contiguous()


@pytest.mark.parametrize(
    "make, shape",
    [
        (_Transposing, (3, 5, 8)),
        (lambda: nn.LSTM(8, 12, num_layers=2, batch_first=True), (3, 5, 8)),
    ],
    ids=["transposing", "lstm"],
)
def test_outputs_stay_row_major(make, shape):
    torch.manual_seed(0)
    _train_like_eager(make(), torch.randn(*shape), "auto")


def test_bad_value_raises():
    with pytest.raises(ValueError, match="residual_layouts"):
        torch2xla.Options.parse(None, {"residual_layouts": "nhwc"})
