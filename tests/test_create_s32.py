"""Tensor creation as users write it inside compiled code, against eager (session 32):
``torch.logspace`` in every dtype (eager's CPU kernel, not torch's decomposition), factories of
a dtype eager's CPU kernel lacks (``arange`` of bool, ``eye`` of uint16) and comparisons of a
real tensor with a complex number, which eager refuses."""

from __future__ import annotations

import pytest
import torch

from tests._util import bits_equal, strict_compiled

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
LOGSPACE_DTYPES = [F32, F64, F16, BF16, torch.int64, torch.int32, torch.int16, torch.uint8]
LOGSPACE_DTYPES += [torch.int8, torch.complex64]


def _logspaces(dtype):
    def fn(x):
        return (
            torch.logspace(-1, 2, 5, dtype=dtype),  # (uint8: -1 wraps to 255 first)
            torch.logspace(2, -1, 7, base=2, dtype=dtype),
            torch.logspace(0.5, 3.7, 9, base=3, dtype=dtype),
            torch.logspace(2, 2.5, 11, dtype=dtype),  # (integers: 2.5 truncated to 2)
            torch.logspace(-3, 3, 100, base=0.5, dtype=dtype),
            torch.logspace(1.5, 2, 1, dtype=dtype),  # (one step: base ** start, uncast)
            torch.logspace(0, 3, 0, dtype=dtype),
        )

    return fn


def _assert_logspaces_are_eagers(dtype):
    fn = _logspaces(dtype)
    torch._dynamo.reset()
    outs, refs = strict_compiled(fn)(torch.zeros(1)), fn(torch.zeros(1))
    for out, ref in zip(outs, refs, strict=True):
        bits_equal(out, ref)


@pytest.mark.parametrize("dtype", LOGSPACE_DTYPES, ids=str)
def test_logspace_is_eagers_bit_for_bit(dtype):
    _assert_logspaces_are_eagers(dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, torch.uint8, torch.int8, torch.int64], ids=str)
def test_logspace_computed_in_the_program_is_eagers(dtype, monkeypatch):
    # where eager cannot compute it for the program (CUDA, a length padded to its bucket);
    # complex: XLA's complex power is not std::pow's to the last bit
    import torch2xla.ops._shape as shape_ops

    monkeypatch.setattr(shape_ops, "_constant", lambda *args: False)
    _assert_logspaces_are_eagers(dtype)


@pytest.mark.parametrize("op", ["ge", "lt", "le_", "gt"])
@pytest.mark.parametrize("dtype", [torch.int64, F32, F64, torch.bool])
def test_ordering_a_real_tensor_with_a_complex_number_raises_eagers_error(op, dtype):
    def fn(x):
        return getattr(x, op)(1j)

    x = torch.tensor([1, 0, 3]).to(dtype)
    with pytest.raises(NotImplementedError) as eager:
        fn(x.clone())
    torch._dynamo.reset()
    with pytest.raises(NotImplementedError, match=str(eager.value).splitlines()[0]):
        strict_compiled(fn)(x.clone())


def test_equality_with_a_complex_number_still_runs():
    def fn(x):
        return x == 1j, x != 2 + 0j, torch.where(x > 0, x, 1j)

    x = torch.tensor([1.0, -2.0])
    torch._dynamo.reset()
    for out, ref in zip(strict_compiled(fn)(x), fn(x), strict=True):
        bits_equal(out, ref)


REFUSED_FACTORIES = {
    "arange_bool": lambda: torch.arange(0, 2, dtype=torch.bool),
    "arange_complex": lambda: torch.arange(3, dtype=torch.complex64),
    "arange_uint16": lambda: torch.arange(3, dtype=torch.uint16),
    "arange_float8": lambda: torch.arange(3, dtype=torch.float8_e4m3fn),
    "linspace_bool": lambda: torch.linspace(0, 1, 3, dtype=torch.bool),
    "logspace_uint16": lambda: torch.logspace(0, 1, 3, dtype=torch.uint16),
    "eye_uint16": lambda: torch.eye(2, dtype=torch.uint16),
    "randperm_bool": lambda: torch.randperm(3, dtype=torch.bool),
}


@pytest.mark.parametrize("name", REFUSED_FACTORIES)
def test_factory_of_a_dtype_eager_lacks_raises_eagers_error(name):
    factory = REFUSED_FACTORIES[name]
    with pytest.raises(NotImplementedError) as eager:
        factory()
    torch._dynamo.reset()
    with pytest.raises(NotImplementedError, match=str(eager.value).splitlines()[0]):
        strict_compiled(lambda x: factory())(torch.zeros(1))


def test_factories_of_dtypes_eager_has_still_run_and_keep_the_generator():
    def fn(x):
        return (
            torch.full((2,), 1, dtype=torch.uint16),
            torch.zeros(2, dtype=torch.float8_e4m3fn),
            torch.linspace(0, 1, 3, dtype=torch.complex64),
            torch.eye(2, dtype=torch.int8),
            torch.randperm(4, dtype=torch.int16).sort().values,
        )

    torch._dynamo.reset()
    compiled = strict_compiled(fn)
    drawn = []
    for _ in range(2):  # (the first call probes eager's randperm: the generator must not move)
        torch.manual_seed(0)
        outs = compiled(torch.zeros(1))
        drawn.append(torch.rand(3))
    assert torch.equal(drawn[0], drawn[1])
    for out, ref in zip(outs, fn(torch.zeros(1)), strict=True):
        assert out.dtype == ref.dtype
        if ref.dtype != torch.float8_e4m3fn:
            bits_equal(out, ref)
