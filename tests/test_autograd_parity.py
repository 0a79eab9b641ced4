"""Autograd parity classes found by scripts/probe_autograd.py, against eager strictly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import rounded_once


def _leaf(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).requires_grad_()


_HALF_PRODUCTS = {  # name: (fn, x's shape, w's shape)
    "mm": (lambda x, w: x @ w, (5, 4), (4, 3)),
    "bmm": (torch.bmm, (2, 5, 4), (2, 4, 3)),
    "matmul_broadcast": (lambda x, w: x @ w, (2, 5, 4), (4, 3)),
    "linear": (F.linear, (2, 5, 4), (3, 4)),
    "vector": (lambda x, w: x @ w, (4,), (4, 3)),
    "conv1d": (F.conv1d, (2, 4, 7), (3, 4, 2)),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), (1, 2, 4, 4), (3, 2, 3, 3)),
    "conv_transpose1d": (F.conv_transpose1d, (2, 4, 5), (4, 3, 2)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", list(_HALF_PRODUCTS))
def test_half_product_gradients_of_float32_leaves_are_rounded_as_in_eager(name, dtype):
    """A float32 leaf cast to half precision for a product (autocast's pattern): eager's
    gradient is the half-precision backward product (float32 accumulation, rounded once),
    widened. XLA's CPU compiler ran the half-precision backward products in float32 and, the
    result widened again, dropped the rounding (excess precision): x.grad held float32 values
    up to a bf16 ulp away from eager's."""
    fn, xs, ws = _HALF_PRODUCTS[name]

    def f(x, w):
        return fn(x.to(dtype), w.to(dtype)).float()

    def grads(g):
        x, w = _leaf(*xs), _leaf(*ws, seed=1)
        out = g(x, w)
        weights = torch.linspace(0.3, 1.7, out.numel()).view(out.shape)
        (out * weights).sum().backward()
        return out, x.grad, w.grad

    got, want = grads(torch.compile(f, backend="xla", options={"strict": True})), grads(f)
    if name.startswith("conv"):
        # eager's CPU float16 convolutions round partial sums (up to an ulp off the product
        # rounded once), and so do its bfloat16 ones on CPUs without AVX-512 (oneDNN's AVX2
        # path, seen on an AMD EPYC): the reference is the float64 product rounded once
        want = grads(lambda x, w: rounded_once(fn, dtype)(x, w).float())
        want = (want[0], *(g.to(dtype).float() for g in want[1:]))
    for g, e in zip(got, want):
        assert g.dtype == e.dtype == torch.float32
        assert torch.equal(g, g.to(dtype).float())  # a half-precision value, widened
        torch.testing.assert_close(g, e, rtol=0, atol=0)
