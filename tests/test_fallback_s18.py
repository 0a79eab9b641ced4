"""Session 18 probe of eager fallback (scripts/probe_fallback.py): each class of difference
from eager found there, checked strictly against eager."""

from __future__ import annotations

import pytest
import torch

from tests._util import assert_same

_UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", _UNSIGNED, ids=str)
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 1,
        lambda x: x >> 1,
        lambda x: x.max(),
        lambda x: torch.where(x > 0, x, x),
        lambda x: -x,
        lambda x: torch.minimum(x, x),
    ],
    ids=["add", "rshift", "max", "gt", "neg", "minimum"],
)
def test_unsigned_ops_eager_does_not_implement_raise_eagers_error(dtype, fn):
    # uint16/32/64 have XLA types, so XLA computed what eager's CPU kernels refuse
    # ("add_stub" not implemented for 'UInt16')
    x = torch.tensor([0, 7, 300], dtype=dtype)
    with pytest.raises(NotImplementedError) as want:
        fn(x)
    with pytest.raises(NotImplementedError) as got:
        torch.compile(fn, backend="xla", options={"strict": True})(x)
    assert str(got.value).splitlines()[0] == str(want.value)
    assert "user code:" in str(got.value)


@pytest.mark.parametrize("dtype", _UNSIGNED, ids=str)
def test_unsigned_ops_eager_implements_still_run_in_xla(dtype):
    def fn(x):
        return x * 3, x.sum(), x.cumsum(0), x & x, x == 7, x.sort().values, x.to(torch.float64)

    x = torch.tensor([0, 7, 300, 2], dtype=dtype)
    got = torch.compile(fn, backend="xla", options={"strict": True})(x)
    assert_same(got, fn(x))
