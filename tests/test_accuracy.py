"""Accuracy against a float64 reference, layer by layer, where the problem is well conditioned.

A whole network's gradient error can jump by 100x when one float32 rounding moves a value across
a ReLU's zero or a pooling near-tie downstream (``benchmarks/grad_conditioning.py`` shows it for
shufflenet_v2: eager itself jumps from 2e-4 to 2e-2 with its input rounded differently). So
accuracy is checked here per layer, with the same upstream gradient for eager and torch2xla:
torch2xla's error against float64 must be within 2x eager float32's.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.double() - ref).norm() / ref.norm()).item()


def _stem() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 24, 3, 2, 1, bias=False),
        nn.BatchNorm2d(24),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ).train()


def _run(model: nn.Module, x: torch.Tensor, ct: torch.Tensor) -> list[torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    out = model(x)
    out.backward(ct.to(out.dtype))
    return [out.detach(), x.grad, *(p.grad for p in model.parameters())]


@pytest.mark.parametrize("image_like", [True, False], ids=["image_like", "randn"])
def test_cnn_stem_forward_and_gradients_as_close_to_float64_as_eager(image_like):
    # The shufflenet_v2 / ResNet stem: strided conv, train-mode BatchNorm, ReLU, max-pool.
    # Image-like inputs (positive, mean ~128) give the conv output a large mean that the batch
    # norm removes: the case where a careless formula loses digits.
    torch.manual_seed(1)
    x = torch.rand(2, 3, 64, 64) * 255 if image_like else torch.randn(2, 3, 64, 64)
    ct = torch.randn(2, 24, 16, 16)
    base = _stem()
    ref = _run(copy.deepcopy(base).double(), x.double(), ct.double())
    eager = _run(copy.deepcopy(base), x, ct)
    ours = _run(torch.compile(copy.deepcopy(base), backend="xla"), x, ct)
    names = ["output", "input grad", "conv weight grad", "bn weight grad", "bn bias grad"]
    for name, r, e, o in zip(names, ref, eager, ours):
        e_err, o_err = _rel(e, r), _rel(o, r)
        # floor: one float32 rounding of the result
        assert o_err <= 2 * max(e_err, 2.0**-24), f"{name}: ours {o_err:.2e}, eager {e_err:.2e}"


def _grads(fn, xs, ct):
    xs = [x.detach().clone().requires_grad_() for x in xs]
    out = fn(*xs)
    out.backward(ct.to(out.dtype))
    return [x.grad for x in xs]


# The gradient of an operand broadcast in half precision is a sum over the broadcast dims;
# torch's kernels accumulate it in float32 and round once, XLA's bfloat16 reduction rounds
# after every addition (issue 22: the sums JAX's autodiff makes, ``autodiff/_half_sums.py``).
HALF_BROADCASTS = {
    "where": lambda x, w: torch.where(x > 0, w, x),
    "expand": lambda x, w: (w.expand(64, 16, 16) * x).sum(),
    "cat_of_expand": lambda x, w: torch.cat([x, w.expand(64, 16, 16)]),
    "clamp_tensor_min": lambda x, w: torch.clamp(x, min=w),
    "linear_bias": lambda x, w: nn.functional.linear(x, x[0, :, :16].T, w[:, 0]),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", list(HALF_BROADCASTS))
def test_half_gradient_of_a_broadcast_as_close_to_float64_as_eager(name, dtype):
    fn = HALF_BROADCASTS[name]
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(64, 16, 16, generator=gen), torch.randn(16, 1, generator=gen)]
    ct = torch.randn(fn(*xs).shape, generator=gen)
    ref = _grads(fn, [x.double() for x in xs], ct.double())
    eager = _grads(fn, [x.to(dtype) for x in xs], ct)
    ours = _grads(torch.compile(fn, backend="xla"), [x.to(dtype) for x in xs], ct)
    for i, (r, e, o) in enumerate(zip(ref, eager, ours)):
        e_err, o_err = _rel(e, r), _rel(o, r)
        assert o.dtype == dtype
        assert o_err <= 2 * e_err, f"grad[{i}]: ours {o_err:.2e}, eager {e_err:.2e}"


def test_bias_gradients_under_autocast_as_close_to_float64_as_eager():
    """nn.Linear and nn.Conv2d trained under CPU autocast (bfloat16 compute, float32
    parameters): their bias gradients are sums over the batch (and pixels)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
    x = torch.randn(16, 3, 16, 16)
    ct = torch.randn(16, 10)
    ref = _run(copy.deepcopy(model).double(), x.double(), ct.double())

    def autocast_run(m):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return _run(m, x, ct)

    eager = autocast_run(copy.deepcopy(model))
    ours = autocast_run(torch.compile(copy.deepcopy(model), backend="xla"))
    names = ["output", "input grad", "conv weight", "conv bias", "linear weight", "linear bias"]
    for name, r, e, o in zip(names, ref, eager, ours):
        e_err, o_err = _rel(e, r), _rel(o, r)
        assert o_err <= 2 * e_err, f"{name}: ours {o_err:.2e}, eager {e_err:.2e}"
