"""Session 21: backward ops that reached the registry without a lowering (graphs that take a
derivative inside: ``torch.func.grad``), and derivatives that differed from eager's at special
values (``scripts/probe_lowerings.py`` finds the former). Every case is compiled in strict mode
(an op without a lowering raises) and compared with eager: values, dtypes, None-ness."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

NAN, INF = float("nan"), float("inf")


def _compile(f):
    torch._dynamo.reset()
    return torch.compile(f, backend="xla", options={"strict": True}, dynamic=False)


def _same(got, exp, rtol=1e-5, atol=1e-6):
    """Tolerance: float32 sums of a few products (eager's and XLA's orders differ); the
    float64 runs hold the same cases to 1e-12."""
    if exp is None or got is None:
        assert got is None and exp is None, (got, exp)
        return
    assert got.dtype == exp.dtype and got.shape == exp.shape
    if exp.dtype == torch.float64:
        rtol, atol = 1e-12, 1e-12
    torch.testing.assert_close(got, exp, rtol=rtol, atol=atol, equal_nan=True)


def _weights(y):
    return torch.arange(1, y.numel() + 1, dtype=y.dtype).view(y.shape) / y.numel()


def _func_grad(f, argnums=0):
    """The gradient of a weighted sum of ``f``'s output, taken inside the compiled function:
    AOT puts the forward's backward op into the graph."""

    def g(*args):
        return torch.func.grad(lambda *a: (f(*a) * _weights(f(*a))).sum(), argnums)(*args)

    return g


def _check_func_grad(f, *args, argnums=0):
    g = _func_grad(f, argnums)
    got, exp = _compile(g)(*args), g(*args)
    for a, b in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, exp))):
        _same(a, b)


DTYPES = (torch.float32, torch.float64)


# -- adaptive max pooling ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,size",
    [
        ((2, 3, 7, 6), (3, 4)),
        ((3, 7, 6), (5, 4)),
        ((2, 2, 5, 6, 7), (2, 3, 4)),
        ((2, 5, 6, 7), (3, 3, 2)),
    ],
)
def test_adaptive_max_pool_backward(dtype, shape, size):
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
    flat = x.view(-1)
    flat[::7] = NAN
    flat[1::5] = 2.0  # ties: the first maximum of a window takes the gradient
    flat[2::11] = INF
    pool = F.adaptive_max_pool2d if len(size) == 2 else F.adaptive_max_pool3d
    _check_func_grad(lambda x: pool(x, size), x)
    # all equal: every window's maximum is a tie
    _check_func_grad(lambda x: pool(x, size), torch.ones(shape, dtype=dtype))


# -- replication padding -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape,pad",
    [
        ((3, 5), (2, 3)),
        ((2, 3, 5), (0, 4)),
        ((2, 3, 5, 4), (2, 3, 1, 0)),
        ((2, 3, 5, 4), (-1, 3, 1, -2)),
        ((1, 2, 3, 4, 5), (2, 3, 1, 0, 1, 1)),
    ],
)
def test_replication_pad_backward(dtype, shape, pad):
    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    x.view(-1)[::4] = NAN
    _check_func_grad(lambda x: F.pad(x, pad, mode="replicate"), x)


# -- rrelu -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower,upper,training", [(0.1, 0.3, False), (0.2, 0.2, True)])
def test_rrelu_with_noise_backward(dtype, lower, upper, training):
    # (training with lower == upper draws no randomness: the noise is the slope, 1 at NaN,
    # which eager's backward multiplies by; torch's decomposition took leaky_relu's rule)
    x = torch.tensor([-1.0, 2.0, 0.0, NAN, -3.0, INF, -INF, -0.0] * 5, dtype=dtype)
    _check_func_grad(lambda x: F.rrelu(x, lower, upper, training=training), x)


# -- grid sampling -----------------------------------------------------------------------------
def _grid_cases():
    for nd in (2, 3):
        modes = ("bilinear", "nearest", "bicubic") if nd == 2 else ("bilinear", "nearest")
        for mode, pad, ac in itertools.product(modes, ("zeros", "border", "reflection"), (0, 1)):
            yield nd, mode, pad, bool(ac)


def _grid_inputs(nd, dtype):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, *(5,) * nd, dtype=dtype, generator=gen)
    grid = torch.rand(2, *(4,) * nd, nd, dtype=dtype, generator=gen) * 2.4 - 1.2
    # ties: points exactly on the border (align_corners) and on the centre of the input
    grid.view(-1)[::5] = 1.0
    grid.view(-1)[1::7] = -1.0
    grid.view(-1)[2::9] = 0.0
    return x, grid


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nd,mode,pad,ac", list(_grid_cases()))
def test_grid_sampler_backward(dtype, nd, mode, pad, ac):
    x, grid = _grid_inputs(nd, dtype)

    def f(x, grid):
        return F.grid_sample(x, grid, mode=mode, padding_mode=pad, align_corners=ac)

    # the backward op in the graph (both gradients, then the input's alone: output_mask)
    _check_func_grad(f, x, grid, argnums=(0, 1))
    _check_func_grad(f, x, grid, argnums=0)
    # the bridge's backward (jax.vjp of the forward), border ties included
    got, exp = [], []
    for run, out in ((_compile(f), got), (f, exp)):
        xs, gs = x.clone().requires_grad_(), grid.clone().requires_grad_()
        y = run(xs, gs)
        (y * _weights(y)).sum().backward()
        out += [y.detach(), xs.grad, gs.grad]
    for a, b in zip(got, exp):
        _same(a, b)


def test_grid_sampler_backward_grid_without_grad():
    x, grid = _grid_inputs(2, torch.float32)
    xs = x.clone().requires_grad_()
    outs = []
    for run in (_compile(F.grid_sample), F.grid_sample):
        xs.grad = None
        y = run(xs, grid, align_corners=True, padding_mode="border")
        y.sum().backward()
        outs.append((y.detach(), xs.grad.clone(), grid.grad))
    for a, b in zip(*outs):
        _same(a, b)


# -- elu's double backward ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 40, 100])  # (40, 100: whole vectorized blocks at NaN)
@pytest.mark.parametrize("act", ["elu", "selu", "celu"])
def test_elu_double_backward(dtype, n, act):
    fn = {
        "elu": lambda x: F.elu(x, 1.5),
        "selu": F.selu,
        "celu": lambda x: F.celu(x, 0.7),
    }[act]
    base = torch.randn(n, dtype=dtype, generator=torch.Generator().manual_seed(3))
    base[::3] = NAN
    base[1::7] = 0.0
    base[2::11] = -INF
    base[4::13] = INF

    def run(f):
        x = base.clone().requires_grad_()
        (gx,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
        (ggx,) = torch.autograd.grad((gx * _weights(gx)).sum(), x)
        return gx.detach(), ggx

    for a, b in zip(run(_compile(fn)), run(fn)):
        _same(a, b)
