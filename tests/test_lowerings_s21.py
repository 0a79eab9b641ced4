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
    # (with all equal inputs: every window's maximum is a tie)
    ones = torch.ones(shape, dtype=dtype)
    _check_func_grad(
        lambda x, y: torch.stack([pool(x, size), pool(y, size)]), x, ones, argnums=(0, 1)
    )


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
def _grid_modes(nd):
    modes = ("bilinear", "nearest", "bicubic") if nd == 2 else ("bilinear", "nearest")
    return list(itertools.product(modes, ("zeros", "border", "reflection"), (False, True)))


def _grid_inputs(nd, dtype):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(2, 3, *(5,) * nd, dtype=dtype, generator=gen)
    grid = torch.rand(2, *(4,) * nd, nd, dtype=dtype, generator=gen) * 2.4 - 1.2
    # ties: points exactly on the border (align_corners) and on the centre of the input
    grid.view(-1)[::5] = 1.0
    grid.view(-1)[1::7] = -1.0
    grid.view(-1)[2::9] = 0.0
    return x, grid


# (float32 in the slow cases: the same lowerings as float64's, which the default run holds to
# 1e-12 in 2-d (every mode) and 3-d; XLA's compile of the bicubic graph alone is ~50 s per dtype
# on 2 cores in CI)
@pytest.mark.parametrize(
    "dtype, nd",
    [
        pytest.param(torch.float32, 2, marks=pytest.mark.slow),
        (torch.float64, 2),
        pytest.param(torch.float32, 3, marks=pytest.mark.slow),
        (torch.float64, 3),
    ],
)
def test_grid_sampler_backward(dtype, nd):
    """Every interpolation and padding mode, align_corners or not (one graph of all)."""
    x, grid = _grid_inputs(nd, dtype)
    modes = _grid_modes(nd)

    def f(x, grid):
        return torch.stack(
            [F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a) for m, p, a in modes]
        )

    def train(run, x, grid):
        xs, gs = x.clone().requires_grad_(), grid.clone().requires_grad_()
        y = run(xs, gs)
        (y * _weights(y)).sum().backward()
        return [y.detach(), xs.grad, gs.grad]

    g = _func_grad(f, (0, 1))
    # the backward op in the graph; the bridge's backward (jax.vjp of the forward)
    got = [*_compile(g)(x, grid), *train(_compile(f), x, grid)]
    exp = [*g(x, grid), *train(f, x, grid)]
    if dtype == torch.float64:
        for a, b in zip(got, exp):
            _same(a, b)
        return
    # float32: the grid's gradient sums the modes' products in another order than eager's;
    # each result as close to the float64 reference as eager's (4x its error, or 1e-6)
    ref = [*g(x.double(), grid.double()), *train(f, x.double(), grid.double())]
    for a, b, r in zip(got, exp, ref):
        assert a.dtype == b.dtype and a.shape == b.shape
        err = (b.double() - r).abs().max().item()
        torch.testing.assert_close(a.double(), r, rtol=0, atol=max(4 * err, 1e-6))


def test_grid_sampler_backward_input_only():
    """The grid's gradient not asked for (``output_mask``), and a grid without grad."""
    x, grid = _grid_inputs(2, torch.float64)

    def f(x, grid):
        return F.grid_sample(x, grid, padding_mode="border", align_corners=True)

    _check_func_grad(f, x, grid, argnums=0)
    xs = x.clone().requires_grad_()
    outs = []
    for run in (_compile(f), f):
        xs.grad = None
        y = run(xs, grid)
        y.sum().backward()
        outs.append((y.detach(), xs.grad.clone(), grid.grad))
    for a, b in zip(*outs):
        _same(a, b)


# -- elu's double backward ---------------------------------------------------------------------
# (celu in float32 only: in float64 its first derivative already differs from eager's by
# ~1e-8 relative, on main too, a separate issue)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 40])  # (40: a whole vectorized block at NaN)
def test_elu_double_backward(dtype, n):
    fns = [lambda x: F.elu(x, 1.5), F.selu]
    if dtype == torch.float32:
        fns.append(lambda x: F.celu(x, 0.7))
    base = torch.randn(n, dtype=dtype, generator=torch.Generator().manual_seed(3))
    base[::3] = NAN
    base[1::7] = 0.0
    base[2::11] = -INF
    base[4::13] = INF

    def fn(x):
        return torch.stack([f(x) for f in fns])

    def run(f):
        x = base.clone().requires_grad_()
        y = f(x)
        (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (ggx,) = torch.autograd.grad((gx * _weights(gx)).sum(), x)
        return gx.detach(), ggx

    for a, b in zip(run(_compile(fn)), run(fn)):
        _same(a, b)
