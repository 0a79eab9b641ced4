"""Autograd semantics against eager (session 23): gradients at edges with zero incoming
gradients (``scripts/probe_autograd5.py``'s sweep notes), inference tensors saved for the
backward, writes under ``no_grad`` to values then written with tracked ones, ``foreach``
updates under ``no_grad``, double backward of ``prod`` with zeros."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

nan, inf = math.nan, math.inf
X = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 2.5, 1.0, 1e-30, -3.0, 0.5]
Y = [0.0, 1.0, inf, -0.0, 0.0, 1.0, nan, -2.5, 1.0, 0.0, 2.0, 0.5]
# incoming gradients: zeros, and zeros between others
COTANGENTS = {"zeros": [0.0], "mixed": [0.0, 1.0, 0.0, -2.0]}

# name -> (fn, inputs): eager's formula is exact there (its values, NaN where eager's is)
EDGES = {
    "xlogy": (torch.xlogy, (X, Y)),
    "xlogy_zero_x": (torch.xlogy, ([0.0] * 4, [0.0, -1.0, inf, nan])),
    "xlogy_scalar_y": (lambda y: torch.xlogy(2.0, y), (X,)),
    "xlog1py": (torch.special.xlog1py, (X, Y)),
    "xlog1py_zero_x": (torch.special.xlog1py, ([0.0] * 4, [-1.0, -2.0, inf, nan])),
    "kl_div_target": (lambda x, y: F.kl_div(x, y, reduction="none"), (X, Y)),
    "nextafter": (torch.nextafter, (X, Y)),
    "div_floor": (lambda x, y: torch.div(x, y, rounding_mode="floor"), (X, Y)),
    "div_trunc": (lambda x, y: torch.div(x, y, rounding_mode="trunc"), (X, Y)),
    "ndtri": (torch.special.ndtri, ([0.0, 1.0, 0.5, -0.0, nan, 2.0, -1.0, 0.25],)),
    "entr": (torch.special.entr, (X,)),
    "lerp_weight_tensor": (lambda x, y: torch.lerp(x, y, y), (X, Y)),
    "lerp_scalar": (lambda x, y: torch.lerp(x, y, 0.25), (X, Y)),
}


def _grads(f, inputs, dtype, cotangent):
    xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in inputs]
    out = f(*xs)
    g = torch.tensor([cotangent[i % len(cotangent)] for i in range(out.numel())], dtype=dtype)
    return (out.detach(), *torch.autograd.grad(out, xs, g.view(out.shape)))


@pytest.mark.parametrize("name", list(EDGES))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gradients_at_edges_with_zero_cotangents_are_eagers(name, dtype):
    """eager's ``xlogy(grad, y)`` is 0 for a zero gradient at y = inf or y < 0 (JAX's
    product gave NaN); nextafter's gradient is 0 where the operands are equal; a rounded
    quotient's is 0 (JAX's NaN at b = 0); ndtri's and entr's are eager's formulas (JAX's 0
    at ndtri(0), NaN at entr(inf)); lerp's are its plain partials (NaN through the unchosen
    branch)."""
    fn, inputs = EDGES[name]
    torch._dynamo.reset()
    # each set of cotangents through one compiled function (only the incoming gradient's
    # values differ: the same programs)
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    for cotangent in COTANGENTS.values():
        try:
            expected = _grads(fn, inputs, dtype, cotangent)
        except NotImplementedError as e:  # (torch 2.11: nextafter has no derivative; so ours)
            with pytest.raises(NotImplementedError, match=re.escape(str(e).split("\n")[0][:40])):
                _grads(compiled, inputs, dtype, cotangent)
            continue
        got = _grads(compiled, inputs, dtype, cotangent)
        # (the values to the dtype's default tolerance: xlog1py's log1p may round 1 ulp apart;
        # the gradients exactly)
        torch.testing.assert_close(got[0], expected[0], equal_nan=True)
        for g, e in zip(got[1:], expected[1:], strict=True):
            torch.testing.assert_close(g, e, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("op", [torch.special.i1, torch.special.i1e], ids=["i1", "i1e"])
def test_bessel_i1_gradient_at_nan_and_tiny_is_one_half(op):
    """eager's i1_backward: 1/2 where |x| <= eps, NaN included (the comparison is false)."""

    def grads(fn):
        x = torch.tensor([nan, 1e-30, 0.0, -0.0, 2e-16], dtype=torch.float64, requires_grad=True)
        return torch.autograd.grad(fn(x), x, torch.tensor([0.0, 1.0, 2.0, 1.0, 1.0]).double())

    torch._dynamo.reset()
    got = grads(torch.compile(op, backend="xla", options={"strict": True}))
    torch.testing.assert_close(got, grads(op), equal_nan=True, rtol=0, atol=0)


# -- inference tensors ---------------------------------------------------------------------
def _raises_as_eager(fn, *args):
    with pytest.raises(RuntimeError) as eager:
        fn(*args)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError) as ours:
        torch.compile(fn, backend="xla")(*args)
    assert str(eager.value).split("\n")[0] in str(ours.value)


def test_inference_tensor_saved_for_backward_raises_eagers_error_at_the_call():
    with torch.inference_mode():
        w = torch.randn(4)
        m = nn.Linear(4, 2)
    x = torch.randn(4, requires_grad=True)
    _raises_as_eager(lambda x, w: (x * w).sum(), x, w)
    _raises_as_eager(lambda x: m(x), x)


def test_inference_tensor_read_only_by_our_backward_runs():
    """eager saves ``w.sin()`` (not an inference tensor), not ``w``."""
    with torch.inference_mode():
        w = torch.randn(4)

    def f(x, w):
        return (x + w.sin() * x).sum()

    def grad(fn):
        x = torch.ones(4, requires_grad=True)
        fn(x, w).backward()
        return x.grad

    torch._dynamo.reset()
    torch.testing.assert_close(grad(torch.compile(f, backend="xla")), grad(f))


# -- writes under no_grad ------------------------------------------------------------------
def _made_under_no_grad(x, w):
    with torch.no_grad():
        t = x * 2
        t.add_(1)
    t.add_(x * w)  # eager tracks t from here: the gradient of x is w's factor only
    return (t * w).sum()


def _made_under_no_grad_view(x, w):
    with torch.no_grad():
        t = x.exp()
    t[1:3].mul_(w[1:3])
    return (t * t).sum()


def _made_under_no_grad_then_unrecorded(x, w):
    with torch.no_grad():
        t = x * 2
    t.mul_(w)
    with torch.no_grad():
        t.mul_(0.5)
    return (t * x).sum()


def _foreach_under_no_grad(x, w):
    ws = [w, w * 1]
    with torch.no_grad():
        torch._foreach_mul_(ws, 0.5)
    return sum((x * v).sum() for v in ws)


@pytest.mark.parametrize(
    "fn",
    [
        _made_under_no_grad,
        _made_under_no_grad_view,
        _made_under_no_grad_then_unrecorded,
        _foreach_under_no_grad,
    ],
    ids=lambda f: f.__name__,
)
def test_no_grad_writes_then_tracked_ones_give_eagers_gradients(fn):
    """A value made under ``no_grad`` has no history, even where a later tracked write makes
    it tracked (Dynamo's example value is the tensor after that write); a foreach update under
    ``no_grad`` is not differentiated."""

    def grads(f):
        x = torch.tensor([0.5, -1.0, 2.0, 1.5], requires_grad=True)
        w = torch.tensor([1.5, 2.0, -0.5, 3.0], requires_grad=True)
        f(x, w).backward()
        return x.grad, w.grad

    torch._dynamo.reset()
    got = grads(torch.compile(fn, backend="xla"))
    for g, e in zip(got, grads(fn), strict=True):
        assert (g is None) == (e is None)
        if e is not None:
            torch.testing.assert_close(g, e)


# -- double backward -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn, values",
    [
        (torch.prod, [2.0, 0.0, 3.0, 4.0]),
        (torch.prod, [2.0, 0.0, 3.0, 0.0]),
        (lambda x: x.view(2, 3).prod(1), [0.0, 2.0, 3.0, 1.0, 0.0, 0.0]),
        (lambda x: x.view(2, 3).prod(0), [0.0, 2.0, 3.0, 1.0, 4.0, 0.5]),
    ],
    ids=["one_zero", "two_zeros", "rows", "columns"],
)
def test_prod_double_backward_with_zeros_is_eagers(fn, values):
    """The gradient's gradient was NaN: the product of the others divided by a zero
    element, unused there but differentiated."""

    def second(f):
        x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        y = f(x)
        w = torch.arange(1, y.numel() + 1, dtype=torch.float64).view(y.shape)
        (g,) = torch.autograd.grad((y * w).sum(), x, create_graph=True)
        return g.detach(), torch.autograd.grad((g * g).sum(), x)[0]

    torch._dynamo.reset()
    got = second(torch.compile(fn, backend="xla", options={"strict": True}))
    torch.testing.assert_close(got, second(fn), rtol=1e-12, atol=0)
