"""In-place ``addcdiv_``/``addcmul_``/``add_(alpha=)`` of integer and bool tensors, which Dynamo
splits (``capture/_inplace_composites.py``, ``_rewrites.pointwise_composites``): eager's value
or eager's error on torch 2.11 and 2.13 alike. torch 2.11's split form failed to trace
(Dynamo's "Promotion of int.add/sub_(float)" where eager raised its own error or returned a
value); torch 2.13's joined back as the functional op then ``copy_``, which cast a float
result into the integer tensor where eager raises."""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same

_CASES = {
    "addcdiv_": (lambda x: x.addcdiv_(x, x + 10, value=2), torch.int64),
    "addcdiv_bool": (lambda x: x.addcdiv_(x, x, value=2), torch.bool),
    "addcmul_float_value": (lambda x: x.addcmul_(x, x, value=0.5), torch.int64),
    "addcmul_int8_value": (lambda x: x.addcmul_(x, x + 1, value=3), torch.int8),
    "addcmul_float_tensor": (lambda x: x.addcmul_(x, x * 0.5, value=2), torch.int64),
    "addcmul_bool": (lambda x: x.addcmul_(x, x, value=True), torch.bool),
    "add_float_alpha": (lambda x: x.add_(x, alpha=2.5), torch.int64),
    "add_int_alpha": (lambda x: x.add_(x * 3, alpha=-2), torch.int32),
    "addcmul_then_read": (lambda x: (x.addcmul_(x, x, value=2) * 2, x + 1), torch.int64),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_integer_in_place_composites_as_eager(case):
    fn, dtype = _CASES[case]
    x = torch.tensor([1, 0, 1, 1], dtype=dtype) if dtype == torch.bool else torch.arange(-2, 3)
    x = x.to(dtype)
    compiled = torch.compile(fn, backend="xla")
    try:
        want = fn(want_x := x.clone())
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            compiled(x.clone())
        assert str(e) in str(got.value)
        assert isinstance(got.value, torch2xla.OpError) or type(got.value) is RuntimeError
        return
    got = compiled(got_x := x.clone())
    assert_same(got, want, rtol=0, atol=0)
    assert_same(got_x, want_x, rtol=0, atol=0)  # (the tensor written in place)


def test_float_in_place_composites_keep_eager_values():
    # (joined as the in-place method: a float16 tensor updated from float32 operands)
    def f(x, a, b):
        x.addcdiv_(a, b + 3, value=0.3)
        x.addcmul_(a, b, value=-1.7)
        return x * 2

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, generator=g).half()
    a, b = torch.rand(64, generator=g) * 3, torch.rand(64, generator=g)
    compiled = torch.compile(f, backend="xla", options={"strict": True})
    want_x, got_x = x.clone(), x.clone()
    want, got = f(want_x, a, b), compiled(got_x, a, b)
    assert_same((got, got_x), (want, want_x), rtol=0, atol=0)
