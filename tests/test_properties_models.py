"""Model parity through the kit: each model runs eagerly and through backend="xla" on inputs
drawn by ``module_inputs`` (same rank and dtype as an example, varying batch and sequence
sizes); outputs, gradients of every parameter and buffer updates (BatchNorm running stats)
must match. A few sizes per model keep the number of compiles small."""

import torch

from tests.models import CNN, MLP, LSTMTagger, TinyGPT
from torch2xla.testing import module_inputs, parity_test

torch.manual_seed(0)
# Whole models accumulate rounding differences over many layers and their backward passes.
MODEL_TOL = {"rtol": 1e-4, "atol": 5e-5}

test_mlp = parity_test(
    args=module_inputs(torch.randn(4, 32), sizes=(1, 5)), grad=True, max_examples=5, **MODEL_TOL
)(MLP())

test_cnn_train_mode = parity_test(
    args=module_inputs(torch.randn(2, 3, 16, 16), sizes=(2, 3)), grad=True, max_examples=4,
    **MODEL_TOL,
)(CNN().train())

test_cnn_eval_mode = parity_test(
    args=module_inputs(torch.randn(2, 3, 16, 16), sizes=(1, 2)), max_examples=4, **MODEL_TOL
)(CNN().eval())

test_tiny_gpt = parity_test(
    args=module_inputs(torch.randint(0, 128, (2, 8)), dims=(0, 1), sizes=(1, 6)),
    grad=True, max_examples=4, fullgraph=True, **MODEL_TOL,
)(TinyGPT().eval())

test_lstm = parity_test(
    args=module_inputs(torch.randn(2, 7, 16), dims=(0, 1), sizes=(1, 4)), grad=True,
    max_examples=4, fullgraph=True, **MODEL_TOL,
)(LSTMTagger())
