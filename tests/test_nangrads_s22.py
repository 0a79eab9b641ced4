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


nan, inf = math.nan, math.inf


def _assert_same(got, expected):
    """Values equal (NaN where eager's is NaN), zeros of eager's sign."""
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
    zeros = expected == 0
    assert torch.equal(got[zeros].signbit(), expected[zeros].signbit()), (got, expected)


def _outputs_and_grads(fn, inputs, dtype, compile_):
    xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in inputs]
    f = torch.compile(fn, backend="xla", options={"strict": True}) if compile_ else fn
    out = f(*xs)
    weights = torch.arange(1, out.numel() + 1, dtype=dtype).view(out.shape)
    return (out.detach(), *torch.autograd.grad((out * weights).sum(), xs))


# name -> (fn, inputs): every value and gradient exact in both dtypes (eager's formula
# evaluated on small integers, powers of two and the edges)
EXACT = {
    "rsqrt": (torch.rsqrt, ([-0.0, 0.0, inf, nan, 4.0, 0.25, -1.0],)),
    "lgamma_poles": (torch.lgamma, ([0.0, -0.0, inf, nan, -inf],)),
    "logit": (torch.logit, ([-0.0, 0.0, 1.0, 0.5, nan, -1.0, 2.0],)),
    "logit_eps0": (lambda x: torch.logit(x, 0.0), ([-0.0, 0.0, 1.0, 0.5, nan, -1.0],)),
    "logit_vectorized": (torch.logit, ([-0.0, 0.0] * 20,)),
    "hardsigmoid": (torch.nn.functional.hardsigmoid, ([-3.0, 3.0, 0.0, 1.0, nan, inf, -inf],)),
    "max_nans": (torch.max, ([nan, 1.0, nan, 2.0],)),
    "min_nans": (torch.min, ([1.0, nan, -inf, nan],)),
    "max_ties": (torch.max, ([1.0, 3.0, 3.0, 2.0],)),
    "min_signed_zero_ties": (torch.min, ([0.0, 1.0, -0.0, 2.0],)),
    "median_ties": (torch.median, ([1.0, 1.0, 2.0],)),
    "median_nans": (torch.median, ([nan, 1.0, nan],)),
    "nanmedian_ties": (torch.nanmedian, ([nan, 1.0, 1.0, 2.0, nan],)),
    "norm_inf_nan": (lambda x: torch.linalg.vector_norm(x, inf), ([nan, 1.0, -2.0, inf],)),
    "norm_inf_ties": (lambda x: torch.linalg.vector_norm(x, inf), ([-2.0, 2.0, 1.0, -0.0],)),
    "norm_ninf_ties": (lambda x: torch.linalg.vector_norm(x, -inf), ([-1.0, 1.0, 2.0],)),
    "norm_inf_dim": (
        lambda x: torch.linalg.vector_norm(x.view(2, 3), inf, dim=1),
        ([nan, 1.0, -1.0, -4.0, 4.0, 0.0],),
    ),
    "cumprod_zeros_inf": (lambda x: x.cumprod(0), ([2.0, 0.0, inf, 3.0, 0.0, 2.0],)),
    "cumprod_nan_then_zero": (lambda x: x.cumprod(0), ([nan, 1.0, 0.0, 2.0, -0.0, 4.0],)),
    "cumprod_rows": (lambda x: x.view(2, 3).cumprod(1), ([2.0, 0.0, 4.0, inf, 2.0, 0.5],)),
    "prod_one_zero": (torch.prod, ([2.0, 0.0, inf, 4.0],)),
    "prod_no_zero_inf": (torch.prod, ([2.0, 1.0, inf, 4.0],)),
    "prod_two_zeros": (torch.prod, ([0.0, -0.0, nan, 2.0],)),
    "prod_dim": (lambda x: x.view(2, 3).prod(1), ([2.0, inf, 4.0, 0.0, 2.0, 0.5],)),
    "hypot": (torch.hypot, ([0.0, inf, 3.0, -0.0, nan], [0.0, 1.0, 4.0, 0.0, inf])),
    "remainder": (torch.remainder, ([inf, 1.0, -1.0, 5.0, 7.0], [1.0, inf, inf, -inf, -2.0])),
    "smooth_l1": (
        lambda x, y: torch.nn.functional.smooth_l1_loss(x, y, reduction="sum"),
        ([inf, -inf, 0.0, -0.0, 0.5, nan, 3.0], [1.0, 2.0, -0.0, 0.0, 0.0, 1.0, 1.0]),
    ),
    "smooth_l1_beta0": (
        lambda x, y: torch.nn.functional.smooth_l1_loss(x, y, beta=0.0),
        ([inf, 0.0, -0.0, 2.0], [1.0, -0.0, 0.0, 2.0]),
    ),
    "huber": (
        lambda x, y: torch.nn.functional.huber_loss(x, y, delta=2.0),
        ([inf, -inf, 0.0, -0.0], [1.0, 2.0, -0.0, 0.0]),
    ),
    "pow_neg_half": (lambda x: x**-0.5, ([-0.0, 0.0, -inf, inf, nan, 4.0, 0.25],)),
    "xlogy_zero": (torch.xlogy, ([0.0, 0.0, 0.0, 0.0, 1.0], [0.0, -1.0, inf, nan, 1.0])),
    "norm3_nan": (lambda x: torch.linalg.vector_norm(x, 3), ([nan, 0.0, -0.0, 1.0],)),
    "norm_half_nan": (lambda x: torch.linalg.vector_norm(x, 0.5), ([nan, 0.0, 1.0],)),
    "norm_neg1_zero": (lambda x: torch.linalg.vector_norm(x, -1), ([0.0, 1.0, 2.0],)),
    "renorm_kept_rows": (
        lambda x: x.view(2, 3).renorm(2, 0, 1.0),
        ([nan, inf, 1.0, 0.5, 0.0, -0.0],),
    ),
}


@pytest.mark.parametrize("name", list(EXACT))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_values_and_gradients_at_edges_are_eagers(name, dtype):
    """eager's derivative formulas (derivatives.yaml) at NaN, infinities, signed zeros and
    ties: JAX's derivatives of the same forwards differ there (NaN for 0 * inf, another
    sign of zero or infinity, the gradient at one of tied elements)."""
    fn, inputs = EXACT[name]
    torch._dynamo.reset()
    expected = _outputs_and_grads(fn, inputs, dtype, False)
    got = _outputs_and_grads(fn, inputs, dtype, True)
    for g, e in zip(got, expected, strict=True):
        _assert_same(g, e)


@pytest.mark.parametrize("eps", [None, 0.0])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_logit_backward_op_at_negative_zero_is_eagers(eps, dtype):
    """eager's logit_backward kernel: +inf * grad at -0 in its scalar loop, grad / -0 in its
    vectorized one (the first whole blocks: element by element as eager's, per dtype)."""
    x = torch.tensor([-0.0, 0.0, 0.5] * 20, dtype=dtype)
    g = torch.ones_like(x)

    def fn(g, x):
        return torch.ops.aten.logit_backward(g, x, eps)

    got = torch.compile(fn, backend="xla", options={"strict": True})(g, x)
    _assert_same(got, fn(g, x))
