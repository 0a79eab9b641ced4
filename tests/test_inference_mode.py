"""Compiled calls under ``torch.inference_mode()``, as users run evaluation and serving.

Inference tensors have no version counter; reading one (``t._version``) raises. The cache of
zero-copy input views read it for every new input, so any call with an inference tensor as
input raised "Inference tensors do not track version counter" where eager runs.
"""

import torch
from torch import nn

from tests._util import assert_same


def test_function_called_with_inference_tensors():
    f = torch.compile(lambda a, b: a * 3 + b.sin(), backend="xla")
    with torch.inference_mode():
        x, y = torch.randn(4), torch.randn(4)
        for _ in range(3):  # the same tensors again: the position's view is never cached
            got = f(x, y)
            assert got.is_inference()
            assert_same(got, x * 3 + y.sin())
        x.mul_(2)  # written in place between calls: the next call reads the new values
        assert_same(f(x, y), x * 3 + y.sin())
        z = torch.randn(4)
        assert_same(f(z, y), z * 3 + y.sin())


def test_model_in_inference_mode_and_out_of_it():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    model.eval()
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(5, 8)
    with torch.inference_mode():
        xi = x.clone()
        want = model(xi)
        for _ in range(2):
            assert_same(compiled(xi), want)
    with torch.no_grad():  # the same graph with ordinary tensors afterwards
        assert_same(compiled(x), model(x))


def test_parameters_made_in_inference_mode():
    with torch.inference_mode():
        torch.manual_seed(0)
        model = nn.Linear(4, 3)
        compiled = torch.compile(model, backend="xla")
        x = torch.randn(2, 4)
        for _ in range(2):
            assert_same(compiled(x), model(x))
