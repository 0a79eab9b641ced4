"""Model parity through the kit: each model runs eagerly and through backend="xla" on inputs
drawn by ``module_inputs`` (same rank and dtype as an example, varying batch and sequence
sizes); outputs, gradients of every parameter and buffer updates (BatchNorm running stats)
must match. A few sizes per model keep the number of compiles small."""

import torch

from tests.models import CNN, MLP, LSTMTagger, TinyGPT
from torch2xla.testing import module_inputs, parity_test

# Whole models accumulate rounding differences over many layers and their backward passes.
MODEL_TOL = {"rtol": 1e-4, "atol": 5e-5}

with torch.random.fork_rng(devices=[]):  # fixed weights without moving the global RNG
    torch.manual_seed(0)
    mlp, cnn_train, cnn_eval = MLP(), CNN().train(), CNN().eval()
    # (one GPT block: the sizes vary here; test_models.py and test_split_backward.py compare
    # the 2-block model with eager, its gradients too)
    gpt, lstm = TinyGPT(layers=1).eval(), LSTMTagger()
    x_mlp, x_cnn, x_seq = torch.randn(4, 32), torch.randn(2, 3, 16, 16), torch.randn(2, 7, 16)
    ids = torch.randint(0, 128, (2, 8))

test_mlp = parity_test(
    args=module_inputs(x_mlp, sizes=(1, 5)), grad=True, max_examples=5, **MODEL_TOL
)(mlp)

test_cnn_train_mode = parity_test(
    args=module_inputs(x_cnn, sizes=(2, 3)),
    grad=True,
    max_examples=4,
    **MODEL_TOL,
)(cnn_train)

test_cnn_eval_mode = parity_test(
    args=module_inputs(x_cnn, sizes=(1, 2)), max_examples=4, **MODEL_TOL
)(cnn_eval)

test_tiny_gpt = parity_test(
    args=module_inputs(ids, dims=(0, 1), sizes=(1, 6)),
    grad=True,
    max_examples=4,
    fullgraph=True,
    **MODEL_TOL,
)(gpt)

test_lstm = parity_test(
    args=module_inputs(x_seq, dims=(0, 1), sizes=(1, 4)),
    grad=True,
    max_examples=4,
    fullgraph=True,
    **MODEL_TOL,
)(lstm)
