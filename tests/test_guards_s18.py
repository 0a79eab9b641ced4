"""Stale programs: one compiled function called in sequence with inputs that must select another
program, each call compared strictly with eager (``scripts/probe_guards.py`` finds more).

Each test is one class of wrong answer the probe found: the program of an earlier call served
a later one whose signature only looked the same.
"""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same


def _compile(fn, **kw):
    kw.setdefault("options", {})
    kw["options"].setdefault("strict", True)
    return torch.compile(fn, backend="xla", **kw)


def _misses(compiled) -> int:
    return sum(g.misses for g in torch2xla.cache_info(compiled).graphs)


def _same_signs(out: torch.Tensor, ref: torch.Tensor) -> None:
    """Values as eager's, and the signs of zeros and infinities too (``assert_same`` calls
    ``-0.0`` equal to ``0.0``)."""
    assert_same(out, ref)
    assert torch.equal(torch.signbit(out), torch.signbit(ref)), (out, ref)


# -- Python floats: keyed so that -0.0 is not 0.0 and a NaN finds its program ---------------------
def test_signed_zero_float_argument_selects_its_own_program():
    # Dynamo passes a float that changed as a 0-d tensor; the program specializes its value, and
    # the key compared values with ``==``: -0.0 ran the program of 0.0 (1 / (x * s): inf for
    # -inf).
    def fn(x, s):
        return 1 / (x * s)

    f = _compile(fn)
    x = torch.tensor([1.0, -2.0, 3.0])
    for s in (1.0, 0.0, -0.0, 0.0, -0.0, float("inf"), float("-inf")):
        _same_signs(f(x, s), fn(x, s))


def test_signed_zero_float_argument_dynamic():
    def fn(x, s):
        return torch.atan2(x.new_full(x.shape, s), x)

    f = _compile(fn, dynamic=True)
    x = -torch.ones(3)
    for s in (1.0, 0.0, -0.0, 0.0, -0.0):
        _same_signs(f(x, s), fn(x, s))


def test_signed_zero_from_item_after_a_graph_break():
    def fn(x, t):
        return 1 / (x * t.item())

    f = _compile(fn, options={"strict": False})
    x = torch.tensor([1.0, -2.0, 3.0])
    for v in (2.0, -0.0, 0.0, -0.0):
        t = torch.tensor(v)
        _same_signs(f(x, t), fn(x, t))


def test_nan_float_argument_compiles_once():
    # nan != nan: every call with a NaN missed the cache and compiled (evicting other entries).
    def fn(x, s):
        return x * s

    f = _compile(fn)
    x = torch.ones(3)
    f(x, 1.0), f(x, 2.0)  # (Dynamo passes s as a tensor from its second value on)
    before = _misses(f)
    for _ in range(3):
        assert_same(f(x, float("nan")), fn(x, float("nan")))
    assert _misses(f) == before + 1
    for _ in range(2):  # -0.0 and 0.0: the float is the program's input (_float_values)
        _same_signs(f(x, -0.0), fn(x, -0.0))
        _same_signs(f(x, 0.0), fn(x, 0.0))
    assert _misses(f) == before + 1


def test_signed_zero_float_argument_with_buckets():
    # A padded graph's rewritten ATen graph is kept per tuple of its Python floats' values.
    def fn(x, s):
        return (x * s).softmax(0), 1 / (x.sum(0) * s)

    f = _compile(fn, dynamic=True, options={"buckets": [4, 8]})
    for n, s in ((3, 1.0), (3, 0.0), (5, -0.0), (3, -0.0), (6, 0.0), (2, -0.0)):
        x = torch.arange(1.0, 1.0 + 2 * n).reshape(n, 2)
        out, ref = f(x, s), fn(x, s)
        assert_same(out[0], ref[0])
        _same_signs(out[1], ref[1])
    # (the padded graph's fixes, and so its per-scalar rewritten graphs, were used)
    assert any(g.padding_fixes and g.bucketed for g in torch2xla.cache_info(f).graphs)


# -- inputs overlapping in memory: Dynamo guards distinct tensors, not distinct memory ------------
def _write_then_read(a, b):
    b.mul_(2)
    return a + b


def test_written_inputs_overlapping_after_distinct_ones():
    # The program built for distinct inputs ran on overlapping views of one tensor as if they
    # were distinct: the write into b was not seen through a.
    f = _compile(_write_then_read)
    a, b = torch.randn(4), torch.randn(4)
    assert_same(f(a.clone(), b.clone()), _write_then_read(a, b))
    for start in (2, 1, 3):
        base = torch.arange(8.0)
        ref_base = base.clone()
        out = f(base[:4], base[start : start + 4])
        ref = _write_then_read(ref_base[:4], ref_base[start : start + 4])
        assert_same(out, ref)
        assert_same(base, ref_base)
    # (distinct again: the first program)
    a, b = torch.randn(4), torch.randn(4)
    ref_a, ref_b = a.clone(), b.clone()
    assert_same(f(a, b), _write_then_read(ref_a, ref_b))
    assert_same(b, ref_b)


def test_written_inputs_overlapping_dynamic():
    f = _compile(_write_then_read, dynamic=True)
    for n in (3, 5, 4):
        a, b = torch.randn(n), torch.randn(n)
        ref_a, ref_b = a.clone(), b.clone()
        assert_same(f(a, b), _write_then_read(ref_a, ref_b))
        base = torch.arange(2.0 * n)
        ref_base = base.clone()
        out = f(base[:n], base[1 : n + 1])
        assert_same(out, _write_then_read(ref_base[:n], ref_base[1 : n + 1]))
        assert_same(base, ref_base)


def test_partially_overlapping_write_raises_eagers_error():
    def fn(a, b):
        a.add_(b)
        return a * b

    f = _compile(fn)
    f(torch.randn(4, 4), torch.randn(4, 4))
    base = torch.randn(20)
    with pytest.raises(RuntimeError, match="refer to a single memory location") as ours:
        f(base[:16].view(4, 4), base[4:].view(4, 4))
    with pytest.raises(RuntimeError, match="refer to a single memory location") as eager:
        fn(base[:16].view(4, 4), base[4:].view(4, 4))
    assert isinstance(ours.value, type(eager.value))


def test_overlapping_writes_with_buckets():
    def fn(a, b):
        a.add_(1)
        b.mul_(2)
        return (a + b).sum(0)

    f = _compile(fn, dynamic=True, options={"buckets": [4, 8]})
    for n in (3, 5, 3):
        a, b = torch.randn(n, 2), torch.randn(n, 2)
        ref_a, ref_b = a.clone(), b.clone()
        assert_same(f(a, b), fn(ref_a, ref_b))
        assert_same((a, b), (ref_a, ref_b))
        base = torch.randn(2 * n + 2)
        ref_base = base.clone()
        out = f(base[: 2 * n].view(n, 2), base[2:].view(n, 2))
        assert_same(out, fn(ref_base[: 2 * n].view(n, 2), ref_base[2:].view(n, 2)))
        assert_same(base, ref_base)
    # distinct inputs are padded to buckets; overlapping ones compile their exact sizes
    (graph,) = torch2xla.cache_info(f).graphs
    assert graph.bucketed and not graph.not_bucketed, graph


# -- empty outputs: eager's strides -------------------------------------------------------------
def test_empty_outputs_have_eagers_strides():
    # torch takes numpy's zero strides of an empty array: (0, 0) where eager's (0, 3) has (3, 1)
    # (a size that becomes 0 under automatic dynamic shapes, or a bucketed index of nothing).
    def fn(x):
        return x.cumsum(0) * x.shape[0] + 1, x * 2, x[torch.arange(x.shape[0] // 2)]

    for kw in ({}, {"dynamic": True, "options": {"buckets": [4]}}):
        torch._dynamo.reset()
        f = _compile(fn, **kw)
        for shape in ((3, 3), (0, 3), (1, 3), (3, 0)):
            x = torch.randn(shape)
            for out, ref in zip(f(x), fn(x), strict=True):
                assert_same(out, ref)
                assert out.stride() == ref.stride(), (kw, shape, out.stride(), ref.stride())


# -- dropout's dropped elements are x * 0, as eager's (found by the probe's Dropout(1.0)) ----------
def test_dropped_elements_are_input_times_zero():
    inf = float("inf")
    x = torch.tensor([-1.0, 2.0, inf, -inf, -3.0, 0.5] * 8)
    for p in (1.0, 0.5):
        out = _compile(lambda x, p=p: torch.nn.functional.dropout(x, p, True))(x)
        kept, dropped = x * (1 / (1 - p)) if p < 1 else x * 0, x * 0
        as_kept = (out == kept) & (out.signbit() == kept.signbit())
        as_dropped = ((out == dropped) & (out.signbit() == dropped.signbit())) | (
            out.isnan() & dropped.isnan()
        )
        assert bool((as_kept | as_dropped).all()), (p, out)
        assert bool(as_dropped.any()) and (p == 1.0 or bool((as_kept & ~as_dropped).any()))
    eager = torch.nn.functional.dropout(x, 1.0, True)
    out = _compile(lambda x: torch.nn.functional.dropout(x, 1.0, True))(x)
    real = ~eager.isnan()  # (a NaN's sign is the hardware's)
    assert torch.equal(out.isnan(), eager.isnan())
    assert torch.equal(out.signbit()[real], eager.signbit()[real])


# -- a written input whose elements share memory, under dynamic shapes ----------------------------
def _add_one(x):
    x.add_(1)
    return x.sum()


def test_self_overlapping_written_input_dynamic():
    # Whether a written input's elements share memory (overlapping windows) was read from the
    # example value once per graph; a symbolic layout hid it, and the functional program's
    # write-back added the copies up where eager writes each location once.
    f = _compile(_add_one, dynamic=True, options={"strict": False})
    makers = [
        lambda: torch.zeros(3, 4),
        lambda: torch.zeros(5, 4),
        lambda: torch.arange(12.0).unfold(0, 4, 2),
        lambda: torch.zeros(5, 4),
        lambda: torch.arange(16.0).unfold(0, 4, 3),  # (no overlap: the compiled program)
        lambda: torch.arange(14.0).unfold(0, 4, 2),
        lambda: torch.arange(12.0).unfold(0, 4, 2),
    ]
    for make in makers:
        x, y = make(), make()
        assert_same(f(x), _add_one(y))
        assert_same(x, y)
        assert_same(x._base if x._base is not None else x, y._base if y._base is not None else y)


def test_self_overlapping_written_input_raises_eagers_error_dynamic():
    def fn(x):
        x.mul_(2)
        return x

    f = _compile(fn, dynamic=True, options={"strict": False})
    f(torch.ones(3, 4)), f(torch.ones(5, 4))
    x = torch.ones(4).as_strided((3, 4), (0, 1))
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    with pytest.raises(type(eager.value), match="single memory location"):
        f(torch.ones(4).as_strided((3, 4), (0, 1)))


def test_input_overlapping_a_written_buffer():
    # (a module's parameters and buffers are looked at only where the graph writes them)
    class Acc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.arange(8.0))

        def forward(self, x):
            self.buf[:4].add_(x)
            return self.buf * 1

    ours, eager = Acc(), Acc()
    f = _compile(ours)
    assert_same(f(torch.ones(4)), eager(torch.ones(4)))
    for start in (0, 4, 2, 0, 1):  # (2, 1: partly the written rows: eager's error)
        try:
            ref = eager(eager.buf[start : start + 4])
        except RuntimeError as e:
            with pytest.raises(type(e), match="single memory location"):
                f(ours.buf[start : start + 4])
        else:
            assert_same(f(ours.buf[start : start + 4]), ref)
        assert_same(ours.buf, eager.buf)


def test_partial_overlap_error_through_views_of_inputs():
    # eager refuses a write that reads memory it partly writes; the check looked only at
    # writes into an input itself reading another input itself, not at views of them
    def fn(a, b):
        a[:3].add_(b[1:4])
        return a * 1

    f = _compile(fn)
    a, b = torch.randn(5), torch.randn(5)
    assert_same(f(a.clone(), b.clone()), fn(a, b))
    for sa, sb in ((0, 1), (1, 0), (0, 2), (0, 5), (3, 0)):
        x, y = torch.arange(10.0), torch.arange(10.0)
        try:
            ref = fn(y[sa : sa + 5], y[sb : sb + 5])
        except RuntimeError as e:
            with pytest.raises(type(e), match="single memory location"):
                f(x[sa : sa + 5], x[sb : sb + 5])
        else:
            assert_same(f(x[sa : sa + 5], x[sb : sb + 5]), ref)
        assert_same(x, y)


# -- as_strided's explicit storage offset counts from the storage's start ------------------------
def test_as_strided_storage_offset_of_views():
    # The lowering counted it from the input's first element, and Dynamo does not guard
    # storage offsets: x = base[3:23] read base[8:] for offset 5 (eager: base[5:]), and the
    # program of one offset served the others.
    def fn(x):
        return x.as_strided((2, 2), (1, 2), 5) * 1

    def reads_before(x):  # (memory before the input's first element: that op runs in eager)
        return x.as_strided((2, 2), (1, 2), 1) * 1

    def of_a_view(x):  # (a view made in the graph: it runs in eager with the op, on x's memory)
        return x[1:].as_strided((2, 2), (1, 2), 7) * 1

    base = torch.arange(40.0)
    f, g = _compile(fn), _compile(reads_before, options={"strict": False})
    h = _compile(of_a_view, options={"strict": False})
    for off in (3, 0, 5, 3, 1):
        x = base[off : off + 20].view(4, 5)
        assert_same(f(x), fn(x))
        assert_same(g(x), reads_before(x))
        assert_same(h(x), of_a_view(x))
