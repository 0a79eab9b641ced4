"""Session 25 (issue 24): a CPU program whose call runs inside JAX's config contexts (a 64-bit
input or output: ``XlaProgram.scoped``) runs its steady call outside them once its checked call
accepted the cached views (``_steady.settled``), without JAX's checks of each argument.

Every scenario runs against eager call after call: the same tensors (the steady call), torch's
writes into them between calls, new tensor objects, writes the graph makes into its inputs,
the same tensor at two positions, and inputs the view cache cannot hold as JAX arrays
(non-contiguous, zero-size: they stay on the checked path)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from tests._util import assert_same
from torch2xla.runtime import _program
from torch2xla.runtime._program import XlaProgram


@pytest.fixture
def spy(monkeypatch):
    """Counts of the checked calls and of the entries into ``x64()`` of CPU programs."""
    counts = {"checked": 0, "x64": 0}
    checked, x64 = XlaProgram._checked, _program.x64

    def counted_checked(self, *args):
        counts["checked"] += 1
        return checked(self, *args)

    @contextlib.contextmanager
    def counted_x64():
        counts["x64"] += 1
        with x64():
            yield

    monkeypatch.setattr(XlaProgram, "_checked", counted_checked)
    monkeypatch.setattr(_program, "x64", counted_x64)
    return counts


def _calls(f, eager, make, n=4):
    """``f`` against ``eager`` ``n`` times on inputs ``make()`` returns for each (fresh copies
    for eager): outputs and the inputs after the call."""
    for _ in range(n):
        args = make()
        ref = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        assert_same(f(*args), eager(*ref))
        for a, r in zip(args, ref, strict=True):
            assert_same(a, r)


def _scale(x, idx, mask):
    return torch.where(mask, x * 2, x[idx]), idx.sum(), mask.any()


@torch.no_grad()
def test_64_bit_program_with_the_same_tensors_runs_steady_outside_x64(spy):
    f = torch.compile(_scale, backend="xla", options={"strict": True})
    x = torch.randn(6, dtype=torch.float64)
    idx = torch.tensor([5, 4, 3, 2, 1, 0])
    mask = torch.tensor([True, False, True, False, False, True])
    for _ in range(3):
        assert_same(f(x, idx, mask), _scale(x, idx, mask))
    before = dict(spy)
    for _ in range(3):
        assert_same(f(x, idx, mask), _scale(x, idx, mask))
    assert spy == before, (spy, before)  # (steady: no checked call, no x64)
    # torch's writes into the cached tensors are seen (their views alias their memory)
    x.mul_(3)
    idx.copy_(torch.tensor([0, 0, 1, 1, 2, 2]))
    mask.logical_not_()
    assert_same(f(x, idx, mask), _scale(x, idx, mask))
    assert spy == before
    # a new object at one position: checked, inside x64, then steady again
    x = x.clone()
    for _ in range(3):
        assert_same(f(x, idx, mask), _scale(x, idx, mask))
    assert spy["checked"] > before["checked"] and spy["x64"] > before["x64"]
    again = dict(spy)
    assert_same(f(x, idx, mask), _scale(x, idx, mask))
    assert spy == again


def _count_step(step, x):
    step += 1
    return x * step.double()


@torch.no_grad()
def test_64_bit_input_the_graph_writes(spy):
    # a step counter (int64) written by the graph, call after call: its new value reaches
    # the counter on the steady path as on the checked one
    f = torch.compile(_count_step, backend="xla", options={"strict": True})
    step, ref_step = torch.tensor(0), torch.tensor(0)
    x = torch.randn(3, dtype=torch.float64)
    for k in range(6):
        assert_same(f(step, x), _count_step(ref_step, x))
        assert_same(step, ref_step)
        assert step._version == ref_step._version, k
        if k == 3:
            before = dict(spy)
    assert spy["checked"] == before["checked"]


def _mixed(a, b):
    return a + b.long(), (a * 2).double() - b


@torch.no_grad()
@pytest.mark.parametrize(
    "kind", ["same", "fresh", "non_contiguous", "zero_size", "aliased", "bool"]
)
def test_64_bit_program_inputs_of_every_kind(kind, spy):
    if kind == "same":
        a, b = torch.arange(6), torch.randn(6)
        make = lambda: (a, b)
    elif kind == "fresh":  # (new tensors every call: the checked call, inside x64)
        a = torch.arange(6)
        make = lambda: (torch.randint(0, 9, (6,)), torch.randn(6))
    elif kind == "non_contiguous":
        a, b = torch.arange(12).reshape(3, 4).t(), torch.randn(4, 3)
        make = lambda: (a, b)
    elif kind == "zero_size":
        a, b = torch.zeros(0, 3, dtype=torch.int64), torch.randn(0, 3)
        make = lambda: (a, b)
    elif kind == "aliased":
        a = torch.arange(6)
        make = lambda: (a, a)
    else:
        a, b = torch.tensor([True, False, True]), torch.randn(3, dtype=torch.float64)
        make = lambda: (a, b)
    f = torch.compile(_mixed, backend="xla", options={"strict": True})
    _calls(f, _mixed, make)
    a.add_(1) if a.dtype != torch.bool else a.logical_not_()
    _calls(f, _mixed, make, n=2)


def _write_back(a, b):
    a.add_(b.long())
    return a.double() * b


@torch.no_grad()
def test_64_bit_inputs_written_and_read_again():
    f = torch.compile(_write_back, backend="xla", options={"strict": True})
    a, b = torch.arange(4), torch.randn(4, dtype=torch.float64)
    ra = a.clone()
    for _ in range(5):
        assert_same(f(a, b), _write_back(ra, b))
        assert_same(a, ra)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_steady_calls_then_a_training_call(dtype):
    # grad mode switched on between steady calls: the training path, then steady again
    lin = torch.nn.Linear(3, 2).to(dtype)
    f = torch.compile(lin, backend="xla", options={"strict": True})
    x = torch.randn(4, 3, dtype=dtype)
    with torch.no_grad():
        for _ in range(3):
            assert_same(f(x), lin(x))
    out = f(x)
    out.sum().backward()
    got = [p.grad for p in lin.parameters()]
    lin.zero_grad(set_to_none=True)
    lin(x).sum().backward()
    for g, r in zip(got, [p.grad for p in lin.parameters()], strict=True):
        assert_same(g, r)
    with torch.no_grad():
        assert_same(f(x), lin(x))


@torch.no_grad()
def test_steady_call_raises_eager_index_error_after_a_write(spy):
    # the runtime check's status is read on the steady path too: an index written out of
    # range between steady calls raises eager's error
    f = torch.compile(_scale, backend="xla")
    x = torch.randn(6, dtype=torch.float64)
    idx = torch.tensor([5, 4, 3, 2, 1, 0])
    mask = torch.tensor([True, False, True, False, False, True])
    for _ in range(3):
        assert_same(f(x, idx, mask), _scale(x, idx, mask))
    before = spy["checked"]
    idx[2] = 9
    with pytest.raises(IndexError) as want:
        _scale(x, idx, mask)
    with pytest.raises(IndexError) as got:
        f(x, idx, mask)
    assert str(want.value).split("\n")[0] in str(got.value), (want.value, got.value)
    assert spy["checked"] == before  # (the steady call found it)
    idx[2] = 3
    assert_same(f(x, idx, mask), _scale(x, idx, mask))
