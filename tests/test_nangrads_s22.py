"""Gradients at NaN, infinities, signed zeros and ties are eager's (its derivative formulas),
not JAX's: ``scripts/probe_nangrads.py`` compares them op by op."""

from __future__ import annotations

import math

import pytest
import torch

X = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.5, 1.0, 1e-30]
Y = [0.0, 1.0, math.inf, -0.0, 0.0, 1.0, math.nan, -2.5, 1.0, 0.0]


@pytest.mark.parametrize("op", [torch.maximum, torch.minimum], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_maximum_minimum_gradients_at_nan_and_ties_are_eagers(op, dtype):
    """eager gives both operands the whole gradient where a NaN makes neither win, half of
    it at ties, none to the loser."""

    def grads(fn):
        a = torch.tensor(X, dtype=dtype, requires_grad=True)
        b = torch.tensor(Y, dtype=dtype, requires_grad=True)
        return torch.autograd.grad(fn(a, b).sum(), (a, b))

    got = grads(torch.compile(op, backend="xla", options={"strict": True}))
    for g, e in zip(got, grads(op), strict=True):
        torch.testing.assert_close(g, e, equal_nan=True, rtol=0, atol=0)
