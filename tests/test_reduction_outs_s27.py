"""``torch.sum``/``torch.prod`` into an ``out=`` tensor of another dtype: eager reduces in
``out``'s dtype (the input cast first), where torch's out= decomposition reduced in the input's
dtype and cast the result (``torch.sum(floats, 0, out=int64)`` summed 0.6 + 0.6 to 1, eager
to 0)."""

from __future__ import annotations

import pytest
import torch

from tests._util import assert_same

_DTYPES = [torch.int64, torch.int32, torch.uint8, torch.bool, torch.float64, torch.float16]


def _inputs():
    g = torch.Generator().manual_seed(0)
    floats = torch.randn(40, 5, generator=g) * 2
    floats[0] = 0.6  # (0.6 * k truncates to 0 in eager, to k // 2 after a float sum)
    floats[1] = 0.6
    return {
        "float32": floats,
        "int64": torch.randint(-3, 4, (40, 5), generator=g),
        "bool": floats > 0,
    }


@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("out_dtype", _DTYPES, ids=str)
@pytest.mark.parametrize("src", ["float32", "int64", "bool"])
def test_reduction_into_an_out_of_another_dtype(op, out_dtype, src):
    x = _inputs()[src]
    if op == "prod":
        x = x[:6]  # (a product of 6 stays in range)
    reduce = getattr(torch, op)

    def fn(x):
        out = torch.zeros(5, dtype=out_dtype)
        reduce(x, 0, out=out)
        return out

    def keepdim(x):
        out = torch.empty(1, 5, dtype=out_dtype)
        r = reduce(x, 0, keepdim=True, out=out)
        return out, r * 1

    for f in (fn, keepdim):
        torch._dynamo.reset()
        assert_same(torch.compile(f, backend="xla")(x), f(x))


def test_float64_out_sums_in_float64():
    # a float32 sum rounds at every step: eager's float64 out does not
    x = torch.tensor([1e8, 1.0, -1e8, 1.0] * 8, dtype=torch.float32).reshape(-1, 1)

    def fn(x):
        out = torch.empty(1, dtype=torch.float64)
        torch.sum(x, 0, out=out)
        return out

    want = fn(x)
    assert want.item() == 16.0
    assert_same(torch.compile(fn, backend="xla")(x), want)


def test_sum_with_its_own_dtype_and_out_unchanged():
    def fn(x):
        out = torch.empty(5, dtype=torch.float64)
        torch.sum(x, 0, dtype=torch.float64, out=out)
        return out

    x = _inputs()["float32"]
    assert_same(torch.compile(fn, backend="xla")(x), fn(x))


@pytest.mark.parametrize("op", ["std", "var"])
@pytest.mark.parametrize("out_dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("src", [torch.float32, torch.float64], ids=str)
def test_std_var_into_an_out_of_another_dtype(op, out_dtype, src):
    # eager's std/var into out= are those of the input cast to out's dtype (a float32 input's
    # float64 out was the float32 result cast: 103279552 against eager's 103279555.9)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(64, 3, generator=g) * 100 + 1e4).to(src)
    x[:, 2] = torch.tensor([1e8, 1.0, -1e8, 1.0] * 16)
    reduce = getattr(torch, op)
    if out_dtype.itemsize == 2:
        x = x / 1e4  # (in half precision's range)

    def fn(x):
        out = torch.empty(3, dtype=out_dtype)
        reduce(x, 0, correction=0, out=out)
        return out, reduce(x, 0, keepdim=True, out=torch.empty(1, 3, dtype=out_dtype))

    assert_same(torch.compile(fn, backend="xla")(x), fn(x))
