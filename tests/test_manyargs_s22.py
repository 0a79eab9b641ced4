"""The steady call of a CPU program's executable (issues 24/25, session 22): ``runtime/_steady``.

Once JAX's checked call (``pjit``'s C++ path, which checks each argument's type, dtype, shape,
sharding and layout: ~0.3 us an argument) accepted the tuple of cached views a ``ViewCache``
hands out, the same tuple runs the executable through ``execute_sharded`` without the checks.
Pinned here: which calls take it (the same cached views; not new tensors, a seed, JAX's NaN
checks, a jax whose internals differ), that it serves every change torch makes between calls
as the checked path does, and that restored programs take it too. Every result is checked
against eager.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
import torch

import torch2xla
from tests._util import assert_same
from torch2xla.guards import _persistent
from torch2xla.runtime import _steady
from torch2xla.runtime._program import XlaProgram
from torch2xla.runtime._stored import StoredProgram

_CPU_DEFAULT = pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="JAX's default device is not the CPU here"
)


def _programs(monkeypatch) -> list:
    """The programs called from now on, in order."""
    seen: list = []
    call = XlaProgram.__call__

    def spy(self, *args):
        seen.append(self)
        return call(self, *args)

    monkeypatch.setattr(XlaProgram, "__call__", spy)
    return seen


def _counted(program) -> list:
    """Counts the runs of ``program``'s steady call (its trusted views' ``SteadyCall``) from
    now on: ``[count]``."""
    steady = program._views._fast.trusted
    assert isinstance(steady, _steady.SteadyCall), steady
    count, run = [0], steady.run

    def counting(args):
        count[0] += 1
        return run(args)

    steady.run = counting
    return count


def _tiny(x, y):
    return x * y + 1


@_CPU_DEFAULT
@torch.no_grad()
def test_changes_between_calls_are_served_as_eager(monkeypatch):
    programs = _programs(monkeypatch)
    compiled = torch.compile(_tiny, backend="xla", options={"strict": True})
    x, y = torch.randn(8), torch.randn(8)
    for _ in range(3):
        assert_same(compiled(x, y), _tiny(x, y))
    program = programs[-1]
    count = _counted(program)
    assert_same(compiled(x, y), _tiny(x, y))
    assert count == [1]
    x.mul_(2).add_(1)  # written in place: the views alias the memory, still steady
    assert_same(compiled(x, y), _tiny(x, y))
    assert count == [2]
    x.data = torch.randn(8)  # new memory: imported afresh, cached, checked, then steady
    for _ in range(4):
        assert_same(compiled(x, y), _tiny(x, y))
    assert count == [3]
    for _ in range(3):  # a new tensor every call: never steady
        t = torch.randn(8)
        assert_same(compiled(t, y), _tiny(t, y))
    assert count == [3]
    for _ in range(4):  # back: seen afresh, cached, checked, then steady
        assert_same(compiled(x, y), _tiny(x, y))
    assert count == [4]


@_CPU_DEFAULT
def test_many_argument_optimizer_step_runs_steady(monkeypatch):
    torch.manual_seed(0)
    shapes = [(16,), (3, 4), (), (5,)]
    params = [torch.nn.Parameter(torch.randn(shapes[i % 4])) for i in range(12)]
    ref_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for p, q in zip(params, ref_params):
        p.grad = torch.randn_like(p)
        q.grad = p.grad.clone()
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)
    ref = torch.optim.AdamW(ref_params, lr=1e-2, weight_decay=0.01)
    programs = _programs(monkeypatch)
    step = torch.compile(opt.step, backend="xla", options={"strict": True})

    def check():
        for p, q in zip(params, ref_params, strict=True):
            assert_same(p.detach(), q.detach())
            for k, v in ref.state[q].items():
                assert_same(opt.state[p][k], v)

    for _ in range(3):
        step()
        ref.step()
        check()
    count = _counted(programs[-1])
    assert type(_writes_of(programs[-1])).__name__ == "HostWrites"  # (written in one op)
    for _ in range(3):
        step()
        ref.step()
        check()
    assert count == [3]


@_CPU_DEFAULT
@torch.no_grad()
def test_jax_nan_checks_are_not_ours(monkeypatch):
    # the user's JAX ``debug_nans`` is turned off around our calls (eager returns NaNs: no
    # error, ``_jax_scope.unchecked``), so the steady call still runs (session 33)
    programs = _programs(monkeypatch)
    compiled = torch.compile(_tiny, backend="xla", options={"strict": True})
    x, y = torch.randn(8), torch.randn(8)
    for _ in range(3):
        compiled(x, y)
    count = _counted(programs[-1])
    with jax.debug_nans(True):
        assert_same(compiled(x, y), _tiny(x, y))
    assert count == [1]
    assert_same(compiled(x, y), _tiny(x, y))
    assert count == [2]
    nan = torch.full((8,), float("nan"))
    with jax.debug_nans(True):
        assert_same(compiled(nan, y), _tiny(nan, y))


@_CPU_DEFAULT
@torch.no_grad()
def test_program_that_draws_is_never_steady(monkeypatch):
    programs = _programs(monkeypatch)
    compiled = torch.compile(
        lambda x: torch.nn.functional.dropout(x, 0.5, training=True) + 1,
        backend="xla",
        options={"strict": True},
    )
    x = torch.ones(64)
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        outs += [compiled(x), compiled(x), compiled(x)]
    assert programs[-1]._views._fast.trusted is False  # (a seed every call)
    for a, b in zip(outs[:3], outs[3:]):  # torch's seed repeats the draws
        assert torch.equal(a, b)
    assert not torch.equal(outs[0], outs[1])


@_CPU_DEFAULT
@torch.no_grad()
def test_restored_program_runs_steady(tmp_path, monkeypatch):
    monkeypatch.setattr(_persistent, "_explicit", _persistent._UNSET)
    monkeypatch.setattr(_persistent, "_wanted_path", None)
    monkeypatch.setattr(_persistent, "_store", None)
    x, y = torch.randn(8), torch.randn(8)
    try:
        torch2xla.set_persistent_cache(tmp_path)
        compiled = torch.compile(_tiny, backend="xla", options={"strict": True})
        compiled(x, y), compiled(x, y)  # (built and stored)
        torch._dynamo.reset()
        programs = _programs(monkeypatch)
        compiled = torch.compile(_tiny, backend="xla", options={"strict": True})
        for _ in range(3):
            assert_same(compiled(x, y), _tiny(x, y))
        program = programs[-1]
        assert isinstance(program, StoredProgram), type(program)
        count = _counted(program)
        assert_same(compiled(x, y), _tiny(x, y))
    finally:
        torch2xla.set_persistent_cache(None)
    assert count == [1]


def test_steady_call_only_for_a_flat_call():
    cpu = jax.devices("cpu")[0]
    a = jax.device_put(jnp.arange(4.0), cpu)
    flat = jax.jit(lambda seed, x, y: (x * y + 1,)).trace(None, a, a).lower().compile()
    steady = _steady.SteadyCall.of(flat, 2)
    assert steady is not None
    (got,) = steady((a, a))
    assert got.tolist() == [1.0, 2.0, 5.0, 10.0]
    assert _steady.steady_call(flat) is not None
    # (seed, diff, rest) as a training forward takes them; a dict result; an uncompiled one
    nested = jax.jit(lambda seed, d, r: d[0] + r[0]).trace(None, [a], [a]).lower().compile()
    assert _steady.steady_call(nested) is None
    by_name = jax.jit(lambda seed, x: {"y": x}).trace(None, a).lower().compile()
    assert _steady.steady_call(by_name) is None
    assert _steady.SteadyCall.of(jax.jit(lambda seed, x: x), 1) is None
    # views a numpy array is among (a cached view JAX could not alias): not trusted
    assert _steady.trusted(steady, (a, a.__array__()), None) is False
    assert _steady.trusted(steady, (a, a), 7) is False
    assert _steady.trusted(steady, (a, a), None) is steady


# -- packed writes scattered into their inputs (``_host_writes``) -------------------------------


def _writes_of(program):
    return program._views._fast.writes


def _pair(make):
    """Two copies of the inputs ``make()`` returns (the same values)."""
    torch.manual_seed(0)
    a = make()
    torch.manual_seed(0)
    return a, make()


@_CPU_DEFAULT
@torch.no_grad()
def test_scattered_writes_move_versions_as_eager(monkeypatch):
    def fn(xs, k):
        for x in xs:
            x.add_(k)
        xs[0].mul_(2)  # (written twice: eager's version moves twice)
        return xs[1] * 3

    programs = _programs(monkeypatch)
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    shapes = [(4,), (4,), (2, 3), (), (4,)]
    xs, ref = _pair(lambda: [torch.randn(s) for s in shapes])
    k = torch.tensor(0.5)
    for _ in range(4):
        assert_same(compiled(xs, k), fn(ref, k))
        for x, r in zip(xs, ref, strict=True):
            assert_same(x, r)
            assert x._version == r._version, (x._version, r._version)
    assert type(_writes_of(programs[-1])).__name__ == "HostWrites"


@_CPU_DEFAULT
def test_scattered_write_into_a_saved_tensor_raises_at_backward_as_eager(monkeypatch):
    def fn(ws):
        for w in ws:
            w.mul_(0.5)

    programs = _programs(monkeypatch)
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    ws = [torch.randn(4, requires_grad=True) for _ in range(3)]
    with torch.no_grad():
        for _ in range(3):
            compiled(ws)
    assert type(_writes_of(programs[-1])).__name__ == "HostWrites"
    for run in (compiled, fn):
        loss = (ws[1] * ws[1]).sum()  # saves ws[1]
        with torch.no_grad():
            run(ws)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


@_CPU_DEFAULT
@torch.no_grad()
def test_targets_the_scatter_cannot_take_are_copied(monkeypatch):
    # a transposed view among plain tensors, a bfloat16 pair, two rows of one matrix: each
    # written as eager writes it (a group with a member the scatter cannot take is copied)
    def fn(xs, k):
        for x in xs:
            x.mul_(k).add_(1)

    def inputs():
        base, rows = torch.randn(3, 2), torch.randn(2, 4)
        plain = [torch.randn(4) for _ in range(2)]
        halves = [torch.randn(4, dtype=torch.bfloat16) for _ in range(2)]
        return base, rows, [plain[0], base.t(), plain[1], *halves, rows[0], rows[1]]

    (base, rows, xs), (ebase, erows, exs) = _pair(inputs)
    programs = _programs(monkeypatch)
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    k = torch.tensor(0.5)
    for _ in range(4):
        compiled(xs, k)
        fn(exs, k)
        assert_same(base, ebase)
        assert_same(rows, erows)
        for x, ex in zip(xs, exs, strict=True):
            assert_same(x, ex)
            assert x._version == ex._version
    assert programs


@_CPU_DEFAULT
@torch.no_grad()
def test_new_tensors_each_call_are_copied(monkeypatch):
    def fn(xs):
        for x in xs:
            x.add_(1)

    programs = _programs(monkeypatch)
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    for _ in range(3):
        xs, ref = _pair(lambda: [torch.randn(4) for _ in range(3)])
        compiled(xs)
        fn(ref)
        for x, r in zip(xs, ref, strict=True):
            assert_same(x, r)
            assert x._version == r._version
    fast = programs[-1]._views._fast
    assert fast is None or fast.writes is None  # (never found whole: never planned)
