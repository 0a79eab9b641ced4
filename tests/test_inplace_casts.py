"""In-place calls whose result eager cannot cast into the tensor they write, and reductions
eager refuses for integer tensors: eager's error (first line, op and user line), where the
trace's fake kernels let them through; the casts eager accepts still run."""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same


def _x():
    return torch.tensor([0.5, -1.0, 2.0, -0.25, 3.0, 0.0])


def mask_times_two(x):
    mask = x > 0
    mask.mul_(2)
    return mask


def counts_scaled(x):
    counts = (x > 0).long()
    counts.mul_(0.5)
    return counts


def counts_addcmul(x):
    counts = (x > 0).long()
    counts.addcmul_(x, x)
    return counts


def complex_shift(x):
    y = x.clone()
    y.add_(1j)
    return y


def counts_times_double(x):
    counts = (x > 0).long()
    counts.mul_(torch.tensor(2.0, dtype=torch.float64))
    return counts


def integer_std(x):
    return (x > 0).long().std()


def integer_var(x):
    return (x > 0).int().var(0)


# (the cases eager accepts: a write that casts, or promotes within the tensor's kind)
def counts_fill(x):
    counts = (x > 0).long()
    counts.masked_fill_(x > 1, 1.5)
    counts[0] = 2.5
    return counts


def counts_doubled(x):
    counts = (x > 0).long()
    counts *= 2
    return counts


def half_scaled(x):
    h = x.half()
    h.mul_(2.5)
    return h


def float_times_double(x):
    y = x.clone()
    y.mul_(torch.tensor(2.0, dtype=torch.float64))
    return y


REJECTED = [
    mask_times_two,
    counts_scaled,
    counts_addcmul,
    complex_shift,
    counts_times_double,
    integer_std,
    integer_var,
]
ACCEPTED = [counts_fill, counts_doubled, half_scaled, float_times_double]


@pytest.mark.parametrize("fn", REJECTED)
def test_eagers_dtype_error_is_raised(fn):
    with pytest.raises(RuntimeError) as eager:
        fn(_x())
    compiled = torch.compile(fn, backend="xla")
    with pytest.raises(RuntimeError) as info:
        compiled(_x())
    assert isinstance(info.value, torch2xla.OpError)
    assert str(info.value).startswith(str(eager.value).splitlines()[0])
    assert "user code: " + __file__ in str(info.value)  # the user's line


@pytest.mark.parametrize("fn", ACCEPTED)
def test_writes_eager_casts_still_run(fn):
    out = torch.compile(fn, backend="xla", options={"strict": True})(_x())
    assert_same(out, fn(_x()))


# -- CPU kernels without half precision: eager refuses, XLA would compute ----------------------
def _log_ndtr(x):
    return torch.special.log_ndtr(x) * 2


def _erfcx(x):
    return torch.special.erfcx(x).sum()


def _zeta(x):
    return torch.special.zeta(x + 2, x.abs() + 1)


def _multi_margin(x):
    return torch.nn.functional.multi_margin_loss(x.reshape(2, 3), torch.tensor([0, 2]))


def _multilabel_margin(x):  # (rewritten on the Dynamo graph: capture/_eager_calls.py)
    return torch.nn.functional.multilabel_margin_loss(
        x.reshape(2, 3), torch.tensor([[0, -1, 1]] * 2)
    )


def _i0e(x):  # (has half-precision CPU kernels)
    return torch.special.i0e(x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fn", [_log_ndtr, _erfcx, _zeta, _multi_margin, _multilabel_margin, _i0e])
def test_cpu_kernels_without_half_precision_raise_as_eager(fn, dtype):
    x = _x().to(dtype)
    try:
        want = fn(x)
    except RuntimeError as eager:
        with pytest.raises(type(eager)) as info:  # (NotImplementedError)
            torch.compile(fn, backend="xla")(x)
        assert isinstance(info.value, torch2xla.OpError)
        assert str(info.value).startswith(str(eager).splitlines()[0])
        assert "not implemented for" in str(eager)
        return
    assert fn is _i0e
    # (torch's default tolerances for the dtype: one rounding of a half-precision result)
    torch.testing.assert_close(torch.compile(fn, backend="xla")(x), want)


@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.bfloat16, torch.bfloat16),
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.float64),
        (torch.float32, torch.float32),
    ],
)
def test_complex_of_parts_as_eager(dtypes):
    # eager checks the parts' kinds (float16, float32 or float64) before their agreement
    real, imag = (torch.arange(3).to(d) for d in dtypes)
    try:
        want = torch.complex(real, imag)
    except RuntimeError as eager:
        with pytest.raises(RuntimeError) as info:
            torch.compile(torch.complex, backend="xla")(real, imag)
        # (integer parts are refused by the meta kernel, in Dynamo's trace, with torch's own
        # message: not a case of the backend's)
        assert isinstance(info.value, torch2xla.OpError)
        assert str(info.value).startswith(str(eager))
        return
    assert_same(torch.compile(torch.complex, backend="xla")(real, imag), want)
