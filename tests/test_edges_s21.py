"""Values at special inputs, round 2 (session 21, ``scripts/probe_edges2.py``): float32 exp
whose overflow XLA's CPU fused into a following add (``poisson_nll_loss`` at inf), margin losses
at NaN scores (eager adds a term only where it is > 0), and the sign of a zero output of the
normalizations whose eager kernels always add a shift (layer norm, batch norm). Compared with
eager as tests/test_edges_s20.py does: dtypes exactly, NaN/infinity/signed-zero positions
exactly, finite values within 4 ulps of their dtype."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from tests.test_edges_s20 import _same_as_eager

NAN, INF = float("nan"), float("inf")
_FLOATS = [torch.float32, torch.float64]


def test_exp_overflow_inside_a_sum_is_inf():
    """XLA's CPU float32 exp is 2^n * p with n clamped; fused with ``- t * x`` the product was
    contracted into a fused multiply-add: exp(inf) - 0.5 * inf was -inf (eager NaN),
    exp(3e38) - 3e38 6.8e37 (eager inf)."""
    x = torch.tensor([INF, 3e38, 88.72283172607422, 88.7228393, 100.0, -INF, 1.0, NAN] * 2)
    t = torch.linspace(0.05, 1.0, 16)
    _same_as_eager(
        lambda x, t: (
            torch.exp(x) - t * x,
            torch.exp(x) - x,
            torch.exp(x) * 0.5 + x,
            F.poisson_nll_loss(x, t, reduction="none"),
            F.poisson_nll_loss(x, t, reduction="sum"),
        ),
        x,
        t,
        ulps=4,
    )


@pytest.mark.parametrize("dtype", _FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_margin_losses_leave_nan_scores_out(dtype, reduction):
    """Eager's kernels add ``z = margin - x[target] + x[i]`` only where ``z > 0``: a NaN score
    is left out (a NaN target score leaves the sample's loss 0); the decomposition's
    ``clamp_min(z, 0)`` propagated it."""
    torch.manual_seed(0)
    x = torch.randn(5, 6, dtype=dtype)
    x[0, 1] = NAN
    x[2, :] = NAN
    x[3, 4] = INF
    x[4, 0] = -INF
    t = torch.tensor([0, 1, 2, 4, 3])
    w = torch.linspace(0.5, 2.0, 6, dtype=dtype)
    lt = torch.tensor([[0, 2, -1, 0, 0, 0], [1, -1, 0, 0, 0, 0], [3, 4, 5, -1, 0, 0]] * 2)[:5]
    _same_as_eager(
        lambda x: (
            F.multi_margin_loss(x, t, reduction=reduction),
            F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w, reduction=reduction),
            F.multi_margin_loss(x[0], t[0], reduction=reduction),
            F.multilabel_margin_loss(x, lt, reduction=reduction),
        ),
        x,
        ulps=4,
    )


def test_margin_loss_errors_unchanged():
    """Calls eager rejects raise eager's own error: its type and its message."""
    x, t = torch.randn(3, 4), torch.tensor([0, 1, 2])
    for bad in (
        lambda: F.multi_margin_loss(x, t, p=3),
        lambda: F.multi_margin_loss(x, t, weight=torch.ones(3)),
    ):
        with pytest.raises((RuntimeError, ValueError)) as want:
            bad()
        torch._dynamo.reset()
        with pytest.raises(type(want.value), match=re.escape(str(want.value))):
            torch.compile(bad, backend="xla")()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_normalization_zero_outputs_are_positive(dtype):
    """Eager's layer norm adds its bias (0 where none is given) and its batch norm a shift
    (bias - mean * scale): -0.0 + 0.0 is +0.0. A row whose variance overflows (rstd 0) or a
    -0.0 input at a zero mean gave -0.0; a bias of ``torch.zeros`` was folded away by XLA."""
    big = torch.finfo(dtype).max ** 0.5 * 2
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = x.to(dtype)
    x[0, 0, 0] = torch.tensor([big, -1.0, 2.0, -3.0, 0.5], dtype=dtype)
    x[1, 1] = torch.tensor([-0.0, 0.0, -0.0, 0.0, -0.0], dtype=dtype)
    x[1, 2, :, 0] = big
    ones, zeros = torch.ones(3, dtype=dtype), torch.zeros(3, dtype=dtype)
    _same_as_eager(
        lambda x: (
            F.layer_norm(x, (5,)),
            F.layer_norm(x, (5,), torch.ones(5, dtype=dtype), torch.zeros(5, dtype=dtype)),
            F.batch_norm(x, zeros, ones),
            F.batch_norm(x, None, None, training=True),
            F.batch_norm(x, None, None, ones, zeros, training=True),
            F.instance_norm(x),
        ),
        x,
        # (zero signs and NaN positions exactly; finite values: Welford vs two-pass, in ulps of
        # the normalization's operands, (|x| + |mean|) * rstd, not of a result near 0 where x
        # and the mean cancel)
        ulps=64,
        scales=[_norm_scale(x, d) for d in ((-1,), (-1,), None, (0, 2, 3), (0, 2, 3), (2, 3))],
    )


def _norm_scale(x, dims):
    """(|x| + |mean|) * rstd in float64 over ``dims`` (``None``: running mean 0, variance 1):
    the magnitude of a normalization's rounding errors, element by element."""
    x = x.double()
    if dims is None:
        return x.abs() / (1 + 1e-5) ** 0.5
    mean = x.mean(dims, keepdim=True)
    rstd = (x.var(dims, unbiased=False, keepdim=True) + 1e-5).rsqrt()
    return (x.abs() + mean.abs()) * rstd


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "bounds",
    [{"min": NAN}, {"max": NAN}, {"min": NAN, "max": 0.0}, {"min": -0.5, "max": NAN}],
    ids=["min", "max", "min_and_max", "max_and_min"],
)
def test_clamp_by_a_nan_number_is_this_torchs_eager(dtype, bounds):
    # (torch 2.11 skips a lone NaN number bound of clamp; 2.12 on gives NaN: whichever eager does)
    x = torch.tensor([1.0, -2.0, 3.0, 0.25]).to(dtype)
    fn = lambda x: x.clamp(**bounds)
    got, want = torch.compile(fn, backend="xla")(x), fn(x)
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(), want.nan_to_num())
