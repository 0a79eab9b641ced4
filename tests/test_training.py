"""Issue 3: gradients of the models users train, compiled with backend="xla", against eager, and
a training loop whose loss curve and parameters match eager's."""

from __future__ import annotations

import copy

import hypothesis.strategies as st
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from torch import nn

from tests._training import assert_grads, grad_parity, ran_in_xla
from tests.models import CNN, MLP, GPT2Block, LSTMTagger, TinyGPT


def test_mlp_grads():
    grad_parity(MLP(), torch.randn(8, 32, requires_grad=True))


def test_cnn_batchnorm_grads_and_running_stats():
    model = CNN().train()
    grad_parity(model, torch.randn(4, 3, 8, 8))
    assert int(model.stem[1].num_batches_tracked) == 1


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_transformer_encoder_layer_grads(norm_first):
    layer = nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    grad_parity(layer, torch.randn(2, 7, 32, requires_grad=True), rtol=1e-4, atol=2e-5)


def test_lstm_grads():
    grad_parity(LSTMTagger(), torch.randn(3, 4, 16, requires_grad=True))


def test_gpt2_block_grads():
    grad_parity(GPT2Block(), torch.randn(2, 8, 32, requires_grad=True), atol=2e-5)


def test_tiny_gpt_grads_with_integer_input_and_tied_weights():
    idx = torch.randint(0, 128, (2, 12))
    grad_parity(
        TinyGPT(layers=1),
        idx,
        loss=lambda logits: F.cross_entropy(logits.flatten(0, 1), idx.roll(-1, 1).flatten()),
        atol=2e-5,
    )


def _classification_data(steps: int, batch: int = 16, d: int = 32, classes: int = 10):
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(d, classes, generator=gen)
    xs = [torch.randn(batch, d, generator=gen) for _ in range(steps)]
    return [(x, (x @ w).argmax(-1)) for x in xs]


def test_training_loop_loss_curve_matches_eager():
    """The loop from the issue, unchanged, 20 steps of AdamW: same losses and parameters."""
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    curves = []
    for net, params in ((compiled, model.parameters()), (ref, ref.parameters())):
        opt = torch.optim.AdamW(params, lr=1e-2)
        losses = []
        data = _classification_data(4)
        for step in range(20):
            x, y = data[step % len(data)]
            out = net(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        curves.append(losses)
    assert ran_in_xla(compiled(torch.randn(2, 32)))
    xla_curve, eager_curve = curves
    assert xla_curve[-1] < 0.5 * xla_curve[0], "the loss must fall"
    torch.testing.assert_close(
        torch.tensor(xla_curve), torch.tensor(eager_curve), rtol=1e-4, atol=1e-5
    )
    for p, r in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)


@settings(max_examples=5, deadline=None)
@given(
    batch=st.integers(1, 9),
    d_in=st.integers(1, 17),
    hidden=st.integers(1, 33),
    d_out=st.integers(1, 5),
)
def test_mlp_grads_over_shapes(batch, d_in, hidden, d_out):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP(d_in, hidden, d_out)
    grad_parity(model, torch.randn(batch, d_in, requires_grad=True))


def test_grads_reach_every_parameter_after_recompile_for_new_shape():
    """A second input shape compiles a second program; its gradients are right too."""
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    for batch in (4, 7):
        x = torch.randn(batch, 32)
        compiled(x).sum().backward()
        ref(x).sum().backward()
    assert_grads(model, ref)
