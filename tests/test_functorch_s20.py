"""Derivatives taken inside compiled functions (found by scripts/probe_functorch.py, session
20): ``torch.func`` transforms and ``torch.autograd.grad(create_graph=True)`` put activations'
backward ops (``aten.*_backward``) into the graphs we lower. Against eager strictly: values
(NaN where eager's CPU kernels take their vectorized loop's rule, ``torch2xla/ops/_loops.py``,
and their scalar loop's on the tail), dtypes, and lowering at all (convolution's and layer
norm's backward ops with outputs not asked for).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import assert_same

aten = torch.ops.aten
NAN, INF = float("nan"), float("inf")
DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def _specials(dtype, extra=()):
    """NaN, infinities, signed zeros and bounds over 64 elements (eager's vectorized blocks),
    then once more (its scalar tail)."""
    vals = [NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0, *extra]
    reps = [vals[i % len(vals)] for i in range(64)]
    return torch.tensor(reps + vals, dtype=torch.float64).to(dtype)


def _weights(x, seed=9):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(x.shape, generator=g, dtype=torch.float64).to(x.dtype)


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="xla", options={"strict": True})


def _check(fn, *args, exact=True):
    # (exact: selects and products; an exp's last ulp differs between XLA's and eager's, as
    # between eager's own vectorized and scalar loops)
    tol = {"rtol": 0, "atol": 0} if exact else {}
    assert_same(_compiled(fn)(*args), fn(*args), **tol)


EXP = ("elu", "celu", "selu")  # (an exp in the gradient: its last ulp differs)
# Each activation whose backward kernel's loops disagree at NaN, with its bounds.
ACTIVATIONS = {
    "hardtanh": (F.hardtanh, (-1.0, 1.0)),
    "relu6": (F.relu6, (6.0,)),
    "elu": (lambda x: F.elu(x, alpha=1.5), ()),
    "celu": (lambda x: F.celu(x, alpha=0.5), ()),
    "selu": (F.selu, ()),
    "hardswish": (F.hardswish, (3.0, -3.0)),
    "logit": (lambda x: torch.logit(x, 0.25), (0.25, 0.75)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_func_grad_at_nan_and_bounds(name, dtype):
    act, extra = ACTIVATIONS[name]
    x = _specials(dtype, extra)
    w = _weights(x)
    fn = lambda x: torch.func.grad(lambda x: (act(x) * w).sum())(x)
    _check(fn, x, exact=name not in EXP)


@pytest.mark.parametrize("name", ["hardtanh", "elu", "hardswish", "logit"])
def test_jacrev_vmap_grad_and_vjp_at_nan(name):
    act, extra = ACTIVATIONS[name]
    x = _specials(torch.float32, extra)
    _check(lambda x: torch.func.jacrev(act)(x), x)
    rows = x[:-2].reshape(2, -1)
    w = _weights(rows[0])
    _check(lambda x: torch.vmap(torch.func.grad(lambda r: (act(r) * w).sum()))(x), rows)
    g = _weights(x)
    _check(lambda x: torch.func.vjp(act, x)[1](g), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ["elu", "selu", "hardswish", "hardtanh"])
def test_compiled_forward_backward_at_nan(name, dtype):
    # the bridge's own backward (the forward lowerings' derivatives) takes the same rules
    act, extra = ACTIVATIONS[name]
    x = _specials(dtype, extra)
    w = _weights(x)
    got_x, ref_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    (_compiled(act)(got_x) * w).sum().backward()
    (act(ref_x) * w).sum().backward()
    tol = {} if name in EXP else {"rtol": 0, "atol": 0}
    assert_same(got_x.grad, ref_x.grad, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", ["hardtanh", "hardswish", "elu"])
def test_gradient_penalty_at_nan(name, dtype):
    act, extra = ACTIVATIONS[name]
    # (elu's second derivative at 0 and NaN is not eager's yet: ordinary values only)
    x0 = _specials(dtype, extra) if name != "elu" else _weights(_specials(dtype), seed=2)
    w = _weights(x0)

    def penalty(x):
        (g,) = torch.autograd.grad((act(x) * w).sum(), x, create_graph=True)
        return g, (g * g).sum()

    got_x, ref_x = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    got, ref = _compiled(penalty)(got_x), penalty(ref_x)
    assert_same(got, ref)  # (a sum of squares, elu's exp: see EXP)
    got[1].backward()
    ref[1].backward()
    assert_same(got_x.grad, ref_x.grad)


# The backward ops called directly: contiguous, and with a gradient laid out otherwise than
# the input (eager then takes its scalar loop everywhere).
BACKWARD_OPS = {
    "hardtanh_backward": lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0),
    "elu_backward": lambda g, x: aten.elu_backward(g, 1.5, 1.0, 1.0, False, x),
    "elu_backward_result": lambda g, x: aten.elu_backward(g, 1.5, 2.0, 0.5, True, x),
    "hardswish_backward": aten.hardswish_backward,
    "logit_backward": lambda g, x: aten.logit_backward(g, x, 0.25),
    "hardshrink_backward": lambda g, x: aten.hardshrink_backward(g, x, 0.5),
    "softshrink_backward": lambda g, x: aten.softshrink_backward(g, x, 0.5),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(BACKWARD_OPS))
def test_backward_ops_at_nan(name, dtype):
    op = BACKWARD_OPS[name]
    exact = name != "elu_backward"
    x = _specials(dtype, (0.25, 0.75, -0.5))
    g = _weights(x)
    _check(op, g, x, exact=exact)
    xt = x[:64].reshape(2, -1).t()  # a transposed input, its gradient contiguous
    _check(op, _weights(xt).contiguous(), xt, exact=exact)
    _check(op, _weights(xt).t().contiguous().t(), xt, exact=exact)  # both transposed


def test_backward_op_broadcast_gradient():
    # a gradient of ones expanded from a sum's backward (stride 0): the vectorized loop
    x = _specials(torch.float32)
    _check(lambda x: torch.func.grad(lambda x: F.hardtanh(x).sum())(x), x)
    _check(lambda g, x: aten.hardtanh_backward(g.expand_as(x), x, -1.0, 1.0), torch.ones(()), x)


def _ones(*shape, like):
    return torch.ones(*shape, dtype=like.dtype)


@pytest.mark.parametrize(
    "layer",
    [
        lambda x: F.conv2d(x, _ones(2, 3, 3, 3, like=x) / 9, _ones(2, like=x), padding=1),
        lambda x: F.conv_transpose2d(x, _ones(3, 2, 2, 2, like=x), stride=2),
        lambda x: F.layer_norm(x, (5,), _ones(5, like=x) * 1.5, _ones(5, like=x)),
        lambda x: F.layer_norm(x, (5,)),
        lambda x: F.group_norm(x[None], 1, _ones(3, like=x), _ones(3, like=x)),
    ],
    ids=["conv2d", "conv_transpose2d", "layer_norm", "layer_norm_plain", "group_norm"],
)
def test_grad_of_layers_with_masked_backward_outputs(layer):
    # the input's gradient only: the backward op's weight and bias outputs are not asked for
    x = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(0))

    def loss(x):
        # (weighted: a plain layer_norm's sum of squares is nearly constant, its gradient all
        # rounding error, eager's and ours alike)
        y = layer(x)
        return (y.square() * torch.linspace(-1, 2, y.shape[-1], dtype=y.dtype)).sum()

    def fn(x):
        return torch.func.grad(loss)(x)

    got, ref, ref64 = _compiled(fn)(x), fn(x), fn(x.double())
    assert got.dtype == ref.dtype and got.shape == ref.shape
    # float32 sums in another order than eager's: as close to float64 as eager is
    err, eager_err = (got.double() - ref64).abs().max(), (ref.double() - ref64).abs().max()
    assert err <= 4 * eager_err + 1e-6, (err, eager_err)
