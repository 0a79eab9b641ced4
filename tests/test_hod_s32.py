"""Higher-order derivatives at kinks and special points against eager (float64, so that a kink
is exact): double backward from outside the compiled function and gradient penalties inside
it (``scripts/probe_hod32.py``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

D = torch.float64
inf, nan = float("inf"), float("nan")


def t(*v):
    return torch.tensor(v, dtype=D)


def _close(got, exp, what):
    assert (got is None) == (exp is None), f"{what}: {got} (xla) vs {exp} (eager)"
    if exp is not None:
        assert got.dtype == exp.dtype and got.shape == exp.shape, what
        torch.testing.assert_close(got, exp, rtol=1e-12, atol=1e-12, equal_nan=True, msg=what)


def _double(fn, x0, compiled):
    """The gradient with ``create_graph`` (cotangent ``w`` requiring grad), then the gradients
    of a penalty of it in the input and in ``w``."""
    torch._dynamo.reset()
    f = torch.compile(fn, backend="xla") if compiled else fn
    x = x0.clone().requires_grad_()
    y = f(x)
    w = torch.linspace(0.5, 1.5, y.numel(), dtype=D).view(y.shape).requires_grad_()
    (g,) = torch.autograd.grad(y, x, w, create_graph=True)
    v = torch.linspace(-1.0, 1.0, g.numel(), dtype=D).view(g.shape)
    gx, gw = torch.autograd.grad((g * v).sum() + (g * g).sum(), [x, w], allow_unused=True)
    return g.detach(), gx, gw


def _penalty(fn, x0, compiled):
    """A gradient penalty computed inside the (compiled) function, then its backward."""

    def penalty(x):
        (g,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
        return (g * g).sum() + (g * torch.linspace(-1.0, 1.0, g.numel(), dtype=D)).sum()

    torch._dynamo.reset()
    f = torch.compile(penalty, backend="xla") if compiled else penalty
    x = x0.clone().requires_grad_()
    p = f(x)
    p.backward()
    return p.detach(), x.grad


CASES = {
    # softplus: eager's double backward masks with x * beta < threshold (0 at the threshold)
    "softplus_at_threshold": (F.softplus, t(20.0, 25.0, 19.0, 0.0, -3.0)),
    "softplus_beta_at_threshold": (
        lambda x: F.softplus(x, beta=2, threshold=4),
        t(2.0, 2.5, 1.5, 0.0, -0.0, -1.0, nan),
    ),
    # x ** 1: the derivative of x ** 0 at 0 is 0 (not 0 * inf)
    "pow1_at_zero": (lambda x: x**1, t(0.0, -0.0, -2.5, 1.9)),
    "pow2_at_zero": (lambda x: x**2, t(0.0, -0.0, -2.5, 1.9)),
    # threshold's gradient (threshold_backward) requires grad, its derivative 0
    "threshold": (lambda x: F.threshold(x, 0.3, -1.0), t(0.3, 0.0, -0.0, -2.5, 0.31, 1.9)),
    # cumprod and prod with zeros: the second derivative through the zeros
    "cumprod_one_zero": (lambda x: x.cumprod(0), t(2.0, 0.0, 3.0, 0.5)),
    "cumprod_two_zeros": (lambda x: x.cumprod(0), t(2.0, 0.0, 3.0, 0.0, 0.5)),
    "cumprod_zero_first": (lambda x: x.cumprod(0), t(0.0, 2.0, 3.0)),
    "cumprod_rows": (lambda x: x.view(2, 3).cumprod(1), t(1.5, 0.0, 2.0, 0.0, -1.0, 3.0)),
    "cumprod_cols": (lambda x: x.view(3, 2).cumprod(0), t(1.5, 2.0, 0.0, -1.0, 0.0, 3.0)),
    "cumprod_no_zero": (lambda x: x.cumprod(0), t(2.0, -1.5, 3.0, 0.5)),
    "prod_two_zeros": (lambda x: x.prod(), t(2.0, 0.0, 3.0, 0.0)),
    "prod_one_zero": (lambda x: x.prod(), t(2.0, 0.0, 3.0)),
    "prod_dim_zeros": (lambda x: x.view(2, 3).prod(1), t(2.0, 0.0, 3.0, 0.0, 0.0, 1.0)),
    # eager's masked quotients: NaN in the double backward at the masked point
    "atan2_origin": (lambda x: torch.atan2(x[:2], x[2:]), t(0.0, 1.0, 0.0, 0.0)),
    "copysign_zero": (lambda x: torch.copysign(x, -x), t(0.0, -0.0, -2.5, 1.9)),
}

# eager's mixed derivative (in the first gradient's cotangent) is NaN where its formula masks
# after multiplying by the gradient: a derivative rule transposed by JAX masks the cotangent
# first (see the report of probe_hod32)
_GW_NAN = {"sinc_zero": (torch.sinc, t(0.0, -0.0, 0.3, 1.9))}


@pytest.mark.parametrize("name", sorted(CASES))
def test_double_backward(name):
    fn, x0 = CASES[name]
    exp = _double(fn, x0, compiled=False)
    got = _double(fn, x0, compiled=True)
    for what, a, b in zip(("g", "gx", "gw"), got, exp, strict=True):
        _close(a, b, f"{name} {what}")


@pytest.mark.parametrize("name", ["sinc_zero"])
def test_double_backward_input_only(name):
    fn, x0 = _GW_NAN[name]
    exp = _double(fn, x0, compiled=False)
    got = _double(fn, x0, compiled=True)
    _close(got[0], exp[0], f"{name} g")
    _close(got[1], exp[1], f"{name} gx")


@pytest.mark.parametrize(
    "name", ["softplus_beta_at_threshold", "threshold", "cumprod_two_zeros", "prod_two_zeros"]
)
def test_gradient_penalty(name):
    fn, x0 = CASES[name]
    exp = _penalty(fn, x0, compiled=False)
    got = _penalty(fn, x0, compiled=True)
    for what, a, b in zip(("p", "gx"), got, exp, strict=True):
        _close(a, b, f"{name} {what}")


def test_cumprod_plain_backward_keeps_eagers_masks():
    """Without create_graph eager's cumprod backward masks past the first zero: a NaN or an
    infinity there, in the input or in the gradient, does not reach the others."""
    x0 = t(2.0, 0.0, 3.0, inf, 0.0, 2.0, 1.0, 0.0, nan, 4.0, 0.0, 1.0).view(3, 4)
    w = t(1.0, 2.0, nan, 1.0, 0.5, inf, 1.0, 2.0, 1.0, 1.0, 3.0, 1.0).view(3, 4)
    grads = []
    for compiled in (False, True):
        torch._dynamo.reset()
        fn = lambda x: x.cumprod(1)
        f = torch.compile(fn, backend="xla") if compiled else fn
        x = x0.clone().requires_grad_()
        f(x).backward(w)
        grads.append(x.grad)
    _close(grads[1], grads[0], "cumprod grad")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_threshold_values_and_gradient(dtype):
    x0 = torch.tensor([-1.0, -0.0, 0.0, 1e-40, 0.3, 0.5, nan, inf, 2.0])
    if dtype == torch.int64:
        x0 = torch.tensor([-2, -1, 0, 1, 2])
    x0 = x0.to(dtype)
    fn = lambda x: F.threshold(x, -0.5, 7.0) + F.threshold(x, 0.3, -1.0)
    outs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        f = torch.compile(fn, backend="xla") if compiled else fn
        x = x0.clone().requires_grad_(dtype.is_floating_point)
        y = f(x)
        grad = None
        if dtype.is_floating_point:
            y.backward(torch.arange(y.numel(), dtype=dtype))
            grad = x.grad
        outs.append((y.detach(), grad))
    (ye, ge), (yc, gc) = outs
    assert yc.dtype == ye.dtype
    assert torch.equal(yc.nan_to_num(5), ye.nan_to_num(5))
    assert torch.equal(yc.signbit(), ye.signbit())
    if ge is not None:
        assert torch.equal(gc.nan_to_num(5), ge.nan_to_num(5))
