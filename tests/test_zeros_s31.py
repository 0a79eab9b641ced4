"""Signed zeros and subnormals against eager, bit for bit (session 31): sums of one -0.0,
bfloat16 fmax/fmin ties, log-sigmoid's underflow, and what reads subnormals on XLA's CPU
(comparisons, truth values, masks, counts, signs, float32 <-> float64 conversions), which
its runtime's denormals-are-zero flag read as zero (``ops/_float_bits.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import same_bits_as_eager

NZ = -0.0
SUB = 1e-40  # float32 subnormal
SUB64 = 1e-310  # float64 subnormal


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_sums_of_one_negative_zero_are_positive(dtype):
    def fn(x, col):
        return (
            x.sum(),
            x.mean(),
            x.nansum(),
            x.sum(dtype=torch.float64),
            col.sum(1),
            col.sum(1, keepdim=True),
            col.mean(1),
            x.cumsum(0),  # (eager: -0.0 for a 0-dim tensor, the element itself)
            col.sum(0),  # (two elements: +0.0 already)
        )

    same_bits_as_eager(fn, torch.tensor(NZ, dtype=dtype), torch.full((2, 1), NZ, dtype=dtype))


def test_user_reciprocal_of_a_sum_of_one_negative_zero():
    def fn(x):
        return 1 / (x * -1).sum(0), torch.signbit(F.l1_loss(x, x) * -1)

    same_bits_as_eager(fn, torch.zeros(1, 4))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_fmax_fmin_zero_ties(dtype):
    def fn(a, b):
        return torch.fmax(a, b), torch.fmin(a, b), torch.fmax(b, a), torch.fmin(b, a)

    same_bits_as_eager(
        fn, torch.tensor([NZ, 0.0, 1.0], dtype=dtype), torch.tensor([0.0, NZ, 1.0], dtype=dtype)
    )


def test_fmax_bfloat16_gradient_at_ties_is_eagers():
    def fn(a, b):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        return torch.autograd.grad(torch.fmax(a, b).float().sum(), (a, b))

    bf = torch.bfloat16
    same_bits_as_eager(
        fn, torch.tensor([NZ, 1.0, 2.0], dtype=bf), torch.tensor([0.0, 1.0, 3.0], dtype=bf)
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_log_sigmoid_of_large_inputs_is_negative_zero(dtype):
    # (float32 at 100 is a negative subnormal in eager, -0.0 here: the arithmetic flushes)
    x = torch.tensor([-50.0, -1.0, NZ, 0.0, 1.0, 20.0, 100.0, 200.0, 1000.0], dtype=dtype)
    if dtype == torch.float64:
        x = torch.tensor([-1.0, 0.0, 30.0, 800.0], dtype=dtype)  # (exp(-800): 0 in eager)
    same_bits_as_eager(F.logsigmoid, x)


def test_log_sigmoid_gradient_and_zero_signs_float32():
    def fn(x):
        x = x.clone().requires_grad_()
        y = F.logsigmoid(x)
        (g,) = torch.autograd.grad(y.sum(), x)
        return y.signbit(), y[:7], g[:7]

    # (at 100 eager's value and gradient are subnormal, -0.0 and 0.0 here: the sign only)
    same_bits_as_eager(fn, torch.tensor([-30.0, -1.0, NZ, 0.0, 0.5, 3.0, 1000.0, 100.0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_comparisons_read_subnormals(dtype):
    tiny = {torch.float64: SUB64, torch.float32: SUB, torch.bfloat16: 1e-39}[dtype]

    def fn(x, y):
        return (
            x != 0,
            x == 0,
            x > 0,
            x < 0,
            x >= 0.0,
            x <= -0.0,
            x < y,
            x == y,
            x != y,
            x >= y,
            x > 0.5,
            torch.where(x == 0, torch.ones_like(x), torch.zeros_like(x)),
        )

    x = torch.tensor([tiny, -tiny, 0.0, NZ, 2 * tiny, float("nan"), 1.0], dtype=dtype)
    y = torch.tensor([0.0, 0.0, tiny, 0.0, tiny, 1.0, float("nan")], dtype=dtype)
    same_bits_as_eager(fn, x, y)


def test_truth_values_counts_and_masks_read_subnormals():
    def fn(x, m):
        return (
            torch.count_nonzero(x),
            torch.count_nonzero(m, 0),
            torch.logical_not(x),
            torch.logical_and(x, x),
            torch.logical_or(x, torch.zeros_like(x)),
            torch.logical_xor(x, x.abs()),
            x.bool(),
            x.any(),
            torch.sign(x),
            torch.sgn(x),
            (torch.complex(x, torch.zeros_like(x)) != 0),
        )

    x = torch.tensor([SUB, -SUB, 0.0, NZ, 1.0])
    m = torch.tensor([[SUB, 0.0], [0.0, 0.0]])
    same_bits_as_eager(fn, x, m)


def test_boolean_mask_of_subnormals():
    same_bits_as_eager(lambda x: x[x != 0], torch.tensor([SUB, 0.0, 1.0, -SUB]))


def test_conversions_keep_subnormals():
    def fn(x, d, b):
        return x.double(), x.double() * 1e30, d.float(), d.float().signbit(), b.double()

    x = torch.tensor([SUB, -SUB, NZ, 1.0, 1.5e-45, -1.17e-38, float("nan")])
    d = torch.tensor(
        [1e-40, -1e-40, 1e-45, 7e-46, 1e-50, -1e-50, NZ, SUB64, 1.0], dtype=torch.float64
    )
    b = torch.tensor([1e-39, -1e-39, NZ], dtype=torch.bfloat16)
    same_bits_as_eager(fn, x, d, b)


def test_conversion_gradients_pass_zeros():
    # (the bits carry no derivative: the conversion's is kept, at 0 too)
    def fn(x):
        x = x.clone().requires_grad_()
        y = x.double() * 3.0
        (g,) = torch.autograd.grad(y.float().sum(), x)
        return g

    same_bits_as_eager(fn, torch.tensor([0.0, 1.0, NZ, 2.0]))
