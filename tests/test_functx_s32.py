"""torch.func transforms compiled with ``backend="xla"`` (session 32), each strictly against
eager (values, dtypes, shapes, ``requires_grad``, gradients):

- ``jacrev`` inside an outer transform (``hessian``, ``jacfwd(jacrev)``, ``jacrev(jacrev)``)
  of a function reading a tensor that requires grad (a module's parameters): jacrev's basis
  (``new_zeros().diagonal().fill_(1)``) is an untracked value written through a view inside
  the outer transform; the write was lost (zeros, or wrong Hessians).
- ``y[i] = v`` inside a compiled ``vmap`` (or ``vmap(grad)``): the write check indexed
  functorch's wrapper after the trace and crashed ("tensor may have escaped").
- an ``inference_mode()`` block inside a compiled ``vmap``: crashed reading a wrapper's
  storage; the output is an inference tensor as eager's.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import grad, hessian, jacfwd, jacrev, vmap

from tests._util import assert_same_recorded

TOL = 2e-5


def _compare(scenario):
    """``scenario(C)`` run in eager and compiled (``C`` wraps a function), each on fresh
    inputs; its returned record compared item by item."""
    torch._dynamo.reset()
    want = scenario(lambda f: f)
    torch._dynamo.reset()
    got = scenario(lambda f: torch.compile(f, backend="xla", options={"strict": True}))
    assert_same_recorded(got, want, "record", TOL)


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, generator=g), torch.randn(3, generator=g).requires_grad_()


_NESTED = {
    "jacrev(jacrev)": lambda f: jacrev(jacrev(f)),
    "jacfwd(jacrev)": lambda f: jacfwd(jacrev(f)),
    "hessian": hessian,
    "grad(jacrev)": lambda f: grad(lambda x: jacrev(f)(x).sum()),
    "jacrev(jacrev, chunk_size=1)": lambda f: jacrev(jacrev(f), chunk_size=1),
}


@pytest.mark.parametrize("transform", list(_NESTED))
def test_nested_jacrev_reading_a_tensor_that_requires_grad(transform):
    def scenario(C):
        x, w = _inputs()
        h = C(_NESTED[transform](lambda x: (x.sin() * w).sum()))(x)
        h.sum().backward()
        return [h, w.grad]

    _compare(scenario)


def test_hessian_of_a_module_then_backward_to_its_parameters():
    def scenario(C):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        h = C(hessian(lambda x: m(x).pow(2).sum()))(torch.ones(3) / 3)
        h.sum().backward()
        return [h, *(p.grad for p in m.parameters())]

    _compare(scenario)


def _write(kind):
    def f(x):
        y = x.clone()
        if kind == "int":
            y[0] = 5.0
        elif kind == "slice":
            y[1:] = y[:-1] * 2
        elif kind == "iadd":
            y[1:] += 1.0
        elif kind == "ellipsis":
            y[..., -1] = 2.0
        return y * x

    return f


@pytest.mark.parametrize("kind", ["int", "slice", "iadd", "ellipsis"])
def test_setitem_inside_compiled_vmap_and_vmap_of_grad(kind):
    def scenario(C):
        x, w = torch.arange(12.0).reshape(4, 3) / 7, _inputs()[1]
        out = C(vmap(_write(kind)))(x)
        nested = C(vmap(vmap(_write(kind))))(x.reshape(2, 2, 3))
        g = C(vmap(grad(lambda x: (_write(kind)(x) * w).sum())))(x)
        g.sum().backward()
        return [out, nested, g, w.grad]

    _compare(scenario)


def test_setitem_overlapping_inside_compiled_vmap_raises_eagers_error():
    def f(x):
        x.expand(3, 3)[1:] = 1.0
        return x

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        vmap(f)(torch.zeros(4, 3))
    torch._dynamo.reset()
    compiled = torch.compile(vmap(f), backend="xla")
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        compiled(torch.zeros(4, 3))


def test_inference_mode_block_inside_compiled_vmap():
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y

    def scenario(C):
        out = C(vmap(f))(torch.arange(6.0).reshape(2, 3))
        return [out, out.is_inference()]

    _compare(scenario)


class _CubeOwnRules(torch.autograd.Function):
    """x ** 3 with a backward and a jvp of its own (not x ** 3's derivatives)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2 + 1.0

    @staticmethod
    def jvp(ctx, t):
        return t * 7.0


@pytest.mark.xfail(
    strict=True,
    reason="Dynamo's (backend='eager' too): inside a compiled torch.func.grad/jvp, or with "
    "dual tensors, a custom Function's own backward/jvp is replaced by its forward's derivatives",
)
@pytest.mark.parametrize("transform", ["grad", "jvp", "dual"])
def test_custom_function_own_rules_under_compiled_transforms(transform):
    import torch.autograd.forward_ad as fwAD
    from torch.func import jvp

    def call(C):
        x = torch.arange(3.0) / 2
        if transform == "grad":
            return C(grad(lambda x: _CubeOwnRules.apply(x).sum()))(x)
        if transform == "jvp":
            return C(lambda x, t: jvp(_CubeOwnRules.apply, (x,), (t,))[1])(x, torch.ones(3))
        with fwAD.dual_level():
            out = C(lambda x: _CubeOwnRules.apply(x) * 2)(fwAD.make_dual(x, torch.ones(3)))
            return fwAD.unpack_dual(out).tangent

    torch._dynamo.reset()
    want = call(lambda f: f)
    torch._dynamo.reset()
    got = call(lambda f: torch.compile(f, backend="xla"))
    assert_same_recorded(got, want, transform, TOL)
