"""Max pooling as strided slices (``ops/_pooling._max_pool``): values, indices and gradients against
eager where windows tie, hold NaN, -inf or -0.0, overlap, are padded or overhang (ceil mode);
and the training programs of a conv-relu-pool stack without XLA's window reductions (the
gradient of a max ``reduce_window`` is a ``select_and_scatter`` XLA's CPU compiler runs ~20x
slower than the slices; issue 25's BatchNorm CNN).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.test_conv_cpu import _programs

# (kernel, stride, padding, dilation, ceil_mode), each size the same along every spatial dim.
CONFIGS = {
    "2x2": (2, 2, 0, 1, False),
    "3x3/2 padded": (3, 2, 1, 1, False),
    "3x3/1 overlapping": (3, 1, 1, 1, False),
    "2x2 ceil": (2, 2, 0, 1, True),
    "3x3/2 dilated ceil": (3, 2, 1, 2, True),
    "3x3/3 padded ceil": (3, 3, 1, 1, True),
    "5x5/2 padded ceil": (5, 2, 2, 1, True),  # 3-d: 125 elements, a window reduction
}


def _awkward(shape: tuple[int, ...]) -> torch.Tensor:
    """Random values with windows of ties (relu's zeros), NaN pairs, -inf runs and -0.0."""
    torch.manual_seed(0)
    x = F.relu(torch.randn(shape))
    rows = x.view(-1, shape[-1])
    rows[1, 2] = rows[1, 3] = rows[2, 3] = float("nan")
    rows[-2:, :4] = float("-inf")
    rows[3, :3] = -0.0
    return x


CASES = [(2, c) for c in CONFIGS] + [
    (1, "3x3/2 padded"),
    (1, "2x2 ceil"),
    (3, "2x2"),
    (3, "5x5/2 padded ceil"),
]


@pytest.mark.parametrize(("nd", "config"), CASES, ids=[f"{nd}d {c}" for nd, c in CASES])
def test_max_pool_matches_eager(nd, config):
    kernel, stride, padding, dilation, ceil_mode = CONFIGS[config]
    pool = getattr(F, f"max_pool{nd}d")
    shape = {1: (2, 3, 11), 2: (2, 3, 9, 10), 3: (1, 2, 5, 6, 7)}[nd]
    x = _awkward(shape)

    def f(x):
        return pool(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)

    ours, eager = x.clone().requires_grad_(), x.clone().requires_grad_()
    (out, idx), (ref, ref_idx) = torch.compile(f, backend="xla")(ours), f(eager)
    torch.testing.assert_close(out, ref, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(out.signbit(), ref.signbit())
    assert torch.equal(idx, ref_idx)
    # Small integers: sums where windows overlap are exact in any order.
    cot = torch.randint(-8, 8, ref.shape).float()
    out.backward(cot)
    ref.backward(cot)
    assert torch.equal(ours.grad, eager.grad)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.bfloat16])
def test_max_pool_other_dtypes(dtype):
    torch.manual_seed(0)
    x = torch.randint(0, 4, (2, 3, 7, 6)).to(dtype)  # many ties

    def f(x):
        return F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)

    out, idx = torch.compile(f, backend="xla")(x)
    ref, ref_idx = f(x)
    assert torch.equal(out, ref) and torch.equal(idx, ref_idx)


def test_conv_pool_training_has_no_window_reductions():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)
    )
    programs = _programs(model, torch.randn(2, 4, 8, 8), train=True)
    assert set(programs) == {"forward", "backward"}
    for name, hlo in programs.items():
        assert "reduce-window" not in hlo, name
        assert "select-and-scatter" not in hlo and "scatter(" not in hlo, name
