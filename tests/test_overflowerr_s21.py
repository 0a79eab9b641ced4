"""Eager's Scalar conversion errors, for numbers that change between calls (session 21,
``scripts/probe_overflowerr.py``): a float or int that changes reaches the graph as an input,
and the call where it does not fit the type eager converts it to raised nothing (clamp, fill,
where, masked_fill, full_like, alpha, hardtanh, pow, ...), nor did an in-place op whose
float operand makes its result a float (``long_t.mul_(0.7)``). Every case must raise eager's
exception type and message, naming the op and the user's line, on every call where eager does;
the valid calls around it compute eager's values.
"""

from __future__ import annotations

import traceback

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import ProgramCounter, assert_same

THIS = __file__
BIG, NAN = 1e39, float("nan")


def _x(dtype):
    if dtype == torch.bool:
        return torch.tensor([True, False, True, False])
    return torch.tensor([-2, 0, 1, 3]).to(dtype)


def _calls(fn, x, numbers):
    """Eager and compiled ``fn(x, s)`` for each ``s`` (after two valid calls, so that a float
    is an input of the graph): the same values, or eager's error type and message."""
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    for s in numbers:
        try:
            ref = fn(x.clone(), s)
        except Exception as e:
            with pytest.raises(type(e)) as info:
                compiled(x.clone(), s)
            err = info.value
            assert isinstance(err, torch2xla.OpError), (s, type(err), err)
            assert str(err).startswith(str(e)), (s, str(err), str(e))
            assert "op: " in str(err) and f"user code: {THIS}:" in str(err), str(err)
            continue
        assert_same(compiled(x.clone(), s), ref)


# (op, dtype, valid numbers, numbers eager rejects for that dtype)
FLOAT_CASES = [
    ("clamp_min", lambda x, s: x.clamp(min=s), torch.float16, 1e5),
    ("clamp_max", lambda x, s: x.clamp(max=s), torch.float32, BIG),
    ("clamp_int", lambda x, s: x.clamp(min=s), torch.int64, BIG),
    ("fill", lambda x, s: x.fill_(s), torch.int8, 300.0),
    ("fill_nan", lambda x, s: x.fill_(s), torch.int32, NAN),
    ("fill_half", lambda x, s: x.fill_(s), torch.float16, 16777216.5),
    ("masked_fill", lambda x, s: x.masked_fill_(x > 0, s), torch.uint8, 1e5),
    ("full_like", lambda x, s: torch.full_like(x, s), torch.bfloat16, BIG),
    ("alpha", lambda x, s: torch.add(x, x, alpha=s), torch.float16, 1e5),
    ("pow", lambda x, s: x**s, torch.float16, 1e5),
    ("hardtanh", lambda x, s: F.hardtanh(x, -s, s), torch.float16, 1e5),
    ("hardtanh_int", lambda x, s: F.hardtanh(x, -s, s), torch.int16, 1e5),
    ("threshold", lambda x, s: F.threshold(x, s, 0.0), torch.float32, BIG),
    ("lerp", lambda x, s: torch.lerp(x, x * 2, s), torch.bfloat16, BIG),
    ("addcmul_int", lambda x, s: torch.addcmul(x, x, x, value=s), torch.int8, 1e5),
    ("index_fill", lambda x, s: x.index_fill(0, torch.tensor([0, 2]), s), torch.int8, 300.0),
    ("pad", lambda x, s: F.pad(x, (1, 1), value=s), torch.float16, 1e5),
    ("where_float32", lambda x, s: torch.where(x > 0, x, s), torch.float32, BIG),
    ("where_int", lambda x, s: torch.where(x > 0, s, x), torch.int64, BIG),
    ("where_bool", lambda x, s: torch.where(x, x, s), torch.bool, -BIG),
    ("where_scaled", lambda x, s: torch.where(x > 0, x, s * 1e30), torch.float32, 1e10),
]


@pytest.mark.parametrize(
    "fn, dtype, bad", [c[1:] for c in FLOAT_CASES], ids=[c[0] for c in FLOAT_CASES]
)
def test_changing_float_out_of_range_raises(fn, dtype, bad):
    _calls(fn, _x(dtype), [0.5, 1.5, bad, 2.5, bad, 3.5])


def test_where_half_and_double_convert_without_check():
    # (eager's where converts a number to a float32 result only with its check)
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        _calls(lambda x, s: torch.where(x > 0, x, s), _x(dtype), [0.5, 1.5, BIG, 1e5, 2.5])


INT_CASES = [
    ("fill", lambda x, n: x.fill_(n), torch.int8, 300),
    ("clamp", lambda x, n: x.clamp(min=n), torch.int8, 300),
    ("alpha", lambda x, n: torch.add(x, x, alpha=n), torch.uint8, -300),
    ("masked_fill", lambda x, n: x.masked_fill(x > 1, n), torch.int16, 100000),
    ("where", lambda x, n: torch.where(x > 1, x, n), torch.int8, 300),
    ("full_like", lambda x, n: torch.full_like(x, n), torch.int32, 2**40),
    ("half", lambda x, n: x.clamp(max=n), torch.float16, 100000),
    ("arithmetic", lambda x, n: x.fill_(n * 100), torch.int8, 3),
]


@pytest.mark.parametrize(
    "fn, dtype, bad", [c[1:] for c in INT_CASES], ids=[c[0] for c in INT_CASES]
)
def test_changing_int_out_of_range_raises(fn, dtype, bad):
    _calls(fn, _x(dtype), [1, 2, bad, 0, bad, 1])


def test_add_of_out_of_range_number_computes_as_eager():
    # (arithmetic converts no number with a check: eager wraps around, or gives inf)
    _calls(lambda x, n: x + n, _x(torch.int8), [1, 2, 300, 3])
    _calls(lambda x, s: x * s, _x(torch.float16), [0.5, 1.5, 1e5, BIG, 2.5])


IN_PLACE = [
    ("mul_", lambda x, s: x.mul_(s)),
    ("imul", lambda x, s: x.__imul__(s)),
    ("mul_scaled", lambda x, s: x.mul_(s * 2)),
]
# (Dynamo's fake kernels raise for these on every call, with their own message: below)
DYNAMO_RAISES = [
    ("add_", lambda x, s: x.add_(s)),
    ("sub_", lambda x, s: x.sub_(s)),
    ("div_", lambda x, s: x.div_(s)),
]


@pytest.mark.parametrize("fn", [c[1] for c in IN_PLACE], ids=[c[0] for c in IN_PLACE])
@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8])
def test_in_place_float_into_integer_raises_every_call(fn, dtype):
    _calls(fn, _x(dtype), [0.5, 0.7, 0.9, 2.0])


@pytest.mark.parametrize("fn", [c[1] for c in DYNAMO_RAISES], ids=[c[0] for c in DYNAMO_RAISES])
def test_in_place_add_float_into_integer_raises_every_call(fn):
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    for s in (0.5, 0.7, 0.9):
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            fn(_x(torch.int64), s)
        with pytest.raises(RuntimeError):
            compiled(_x(torch.int64), s)


def test_in_place_add_float_into_integer_message():
    # Dynamo's fake kernel refuses it first (its TorchRuntimeError: 'Promotion of
    # int.add/sub_(float) in in-place ops are not possible'): a graph break there, where eager
    # raises its own error from the user's line (capture/_fake_errors.py)
    fn = lambda x, s: x.add_(s)
    with pytest.raises(RuntimeError) as want:
        fn(_x(torch.int64), 0.5)
    with pytest.raises(RuntimeError) as got:
        torch.compile(fn, backend="xla", options={"strict": True})(_x(torch.int64), 0.5)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
    assert any(f.filename.endswith(THIS) for f in traceback.extract_tb(got.value.__traceback__))


def test_in_place_tensor_float_into_integer_raises_every_call():
    fn = lambda x, t: x.mul_(t)
    _calls(fn, _x(torch.int64), [torch.tensor(0.5), torch.tensor(0.7), torch.tensor(0.9)])


def test_bool_alpha_float_raises_every_call():
    _calls(lambda x, s: torch.add(x, x, alpha=s), _x(torch.bool), [0.5, 1.5, 2.5])


def test_in_place_float_into_float_computes():
    _calls(lambda x, s: x.mul_(s), _x(torch.float32), [0.5, 0.7, 0.9, BIG])


def test_where_checks_in_one_program(monkeypatch):
    # (where takes a changing float as a 0-d input of one program, checked in the program)
    counter = ProgramCounter(monkeypatch)
    fn = lambda x, s: torch.where(x > 0, x, s)
    _calls(fn, _x(torch.float32), [0.5, 1.5, 2.5, BIG, 3.5, -BIG, 4.5])
    assert counter.count <= 2, counter.count
