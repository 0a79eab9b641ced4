"""Property tests of the reduction lowerings against eager PyTorch, through torch2xla.testing.

Reductions over every dim spec (one dim, negative dims, several dims, all dims) with and
without keepdim, on 0-d tensors and 0-size dims, with NaN/inf propagation, ties (argmax picks
the first), integer accumulation dtypes and wrap-around. Each example compiles one function
applying a table of reductions for its (shape, dim, keepdim); hypothesis varies the values.
"""

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch2xla.testing import Limitation, assert_parity, parity_settings, tensors

# Every op must run in XLA: a graph break would compare eager with eager.
parity = functools.partial(assert_parity, fullgraph=True)

# Reductions over fewer elements than the correction warn in eager; those draws are on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
f32, bf16, f64 = torch.float32, torch.bfloat16, torch.float64
SHAPES = [(3, 4), (2, 0, 3), (5,), ()]
INF = float("inf")

LIMITATIONS = (
    Limitation(
        "var_mean",
        "eager var_mean computes the mean with Welford's update, so an infinite element makes "
        "the mean NaN (inf - inf) where torch.mean gives inf; XLA gives inf",
        (f32, bf16, f64),
        lambda x: torch.var_mean(x),
        (torch.full((3, 4), INF),),
    ),
)


@pytest.mark.parametrize("lim", LIMITATIONS, ids=str)
def test_limitations_still_hold(lim):
    lim.check()


def _dims(shape: tuple) -> list:
    """Dim specs valid for ``shape``: None (all), each dim, negative dims, a pair."""
    n = len(shape)
    specs: list = [None]
    if n:
        specs += [0, -1]
    if n >= 2:
        specs += [(0, -1), (1,)]
    return specs


def _reductions(dtype: torch.dtype, shape: tuple, dim, keepdim: bool):
    """A function returning a dict of reductions of x over ``dim``; ops eager refuses on an
    empty reduction (max/min/argmax) are left out when the reduced extent is 0."""
    n = len(shape)
    dims = range(n) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    empty = any(shape[d] == 0 for d in dims) if n else False
    is_float = dtype.is_floating_point
    all_dims = tuple(range(n))
    d_or_all = dim if dim is not None else all_dims

    def fn(x):
        out = {
            "sum": torch.sum(x, dim=dim, keepdim=keepdim),
            "any": torch.any(x, dim=d_or_all, keepdim=keepdim) if n else torch.any(x),
            "all": torch.all(x, dim=d_or_all, keepdim=keepdim) if n else torch.all(x),
        }
        if dtype is not torch.bool and not empty:
            out["amax"] = torch.amax(x, dim=d_or_all, keepdim=keepdim)
            out["amin"] = torch.amin(x, dim=d_or_all, keepdim=keepdim)
        if is_float:
            out["mean"] = torch.mean(x, dim=dim, keepdim=keepdim)
            out["nansum"] = torch.nansum(x, dim=dim, keepdim=keepdim)
            out["var"] = torch.var(x, dim=dim, keepdim=keepdim)
            finite = torch.clamp(x, -1e4, 1e4)  # see the var_mean limitation
            out["var_mean"] = torch.var_mean(finite, dim=dim, keepdim=keepdim, correction=2)
            out["logsumexp"] = torch.logsumexp(x, dim=d_or_all, keepdim=keepdim)
        if isinstance(dim, int):
            out["prod"] = torch.prod(x, dim, keepdim=keepdim)
            out["cumsum"] = torch.cumsum(x, dim)
            if dtype is not torch.bool:
                out["cumprod"] = torch.cumprod(x, dim)
            if not empty and dtype is not torch.bool:
                out["max"] = torch.max(x, dim, keepdim=keepdim)
                out["min"] = torch.min(x, dim, keepdim=keepdim)
                out["argmax"] = torch.argmax(x, dim, keepdim=keepdim)
                out["argmin"] = torch.argmin(x, dim, keepdim=keepdim)
        if dim is None and not empty and dtype is not torch.bool:
            out["argmax_flat"] = torch.argmax(x)
            out["max_all"] = torch.max(x)
            out["prod_all"] = torch.prod(x)
        return out

    return fn


@st.composite
def _case(draw):
    shape = draw(st.sampled_from(SHAPES))
    return shape, draw(st.sampled_from(_dims(shape))), draw(st.booleans())


@functools.cache
def _std0(dim, keepdim):
    """(the compiled function, eager's), once per case: a new function would compile anew.
    The lambdas of all cases share one code object, which Dynamo caches by: each case, shape
    and dtype is an entry of that one cache, so the test raises the recompile limit (with
    fullgraph=True, reaching it raises)."""
    fn = lambda x: torch.std(x, dim=dim, keepdim=keepdim, correction=0)
    return torch.compile(fn, backend="xla", fullgraph=True), fn


def _assert_as_close_to_float64(fns, x):
    """``fn``'s compiled result at least as close to float64's as eager's (twice its error, or
    the default tolerance): the standard deviation of nearly equal values is cancellation
    noise in float32, which eager and XLA draw differently (a hypothesis run found
    std([205.2167] * 12): eager 3.1e-5, xla 1.5e-5, float64 0)."""
    compiled, fn = fns
    ref = fn(x.double())
    eager, got = fn(x), compiled(x)
    assert got.dtype == eager.dtype and got.shape == eager.shape
    assert torch.equal(got.isnan(), eager.isnan())
    ok = ~eager.isnan()
    err_eager = (eager.double() - ref).abs()[ok]
    err_got = (got.double() - ref).abs()[ok]
    bound = torch.maximum(2 * err_eager, 1e-5 + 1.3e-6 * ref.abs()[ok])
    assert bool((err_got <= bound).all()), (got, eager, ref)


@pytest.mark.parametrize("dtype", [f32, bf16, f64, torch.int32, torch.int8, torch.bool], ids=str)
@torch._dynamo.config.patch(recompile_limit=512)
def test_reductions_over_dims_with_keepdim(dtype):
    if dtype.is_floating_point:
        # Bounded magnitudes keep sums finite whatever the summation order, NaN and inf
        # still appear (and must propagate alike).
        values = {"min_value": -1e4, "max_value": 1e4, "allow_nan": True, "allow_infinity": True}
    else:
        values = {}
    fns = {}

    @parity_settings(max_examples=10)
    @given(case=_case(), data=st.data())
    def check(case, data):
        if case not in fns:
            fns[case] = _reductions(dtype, *case)
        x = data.draw(tensors(dtype, case[0], **values), label="x")
        parity(fns[case], x)
        if dtype.is_floating_point and x.isfinite().all():
            _assert_as_close_to_float64(_std0(*case[1:]), x)

    check()


def test_sum_dtype_argument_and_integer_accumulation():
    def fn(x8, x32, h):
        return {
            "int8_sum_is_int64": x8.sum(),
            "int8_sum_dtype_int8_wraps": x8.sum(dtype=torch.int8),
            "int32_prod": x32.prod(0),
            "int32_cumsum": x32.cumsum(0),
            "half_sum_to_float": h.sum(0, dtype=torch.float32),
            "half_mean": h.mean(),
        }

    @parity_settings(max_examples=15)
    @given(
        x8=tensors(torch.int8, (6,)),
        x32=tensors(torch.int32, (4, 2)),
        h=tensors(torch.float16, (4, 3), min_value=-100, max_value=100),
    )
    def check(x8, x32, h):
        parity(fn, x8, x32, h)

    check()


def test_softmax_and_log_softmax_with_infinities():
    def fn(x):
        return {
            "softmax": torch.softmax(x, -1),
            "log_softmax": torch.log_softmax(x, -1),
            "softmax0": torch.softmax(x, 0),
            "half_to_float": torch.softmax(x.half(), -1, dtype=torch.float32),
        }

    # A row of -inf gives NaN in eager (0/0); +inf gives NaN; large finite values must not
    # overflow (the max is subtracted first).
    values = {"min_value": -1e4, "max_value": 1e4, "allow_nan": True, "allow_infinity": True}

    @parity_settings(max_examples=15)
    @given(x=tensors(f32, st.sampled_from([(3, 4), (1, 5)]), **values))
    def check(x):
        parity(fn, x)

    check()
