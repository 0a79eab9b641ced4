"""Session 19: what a run of the suite under torch 2.11 found.

torch 2.11 keeps ``torch.compile(dynamic=...)``'s settings in Dynamo's process-wide config for
each call (2.13: per thread), so threads calling a compiled function at once left
``assume_static_by_default=False`` behind them and every later graph of the process was
dynamic (tests/conftest.py restores the config after each test). Those dynamic graphs showed
where ours differed from eager under dynamic shapes, which any user gets with
``dynamic=True`` or once Dynamo recompiles a function for a new size: each test here compiles
with ``dynamic=True`` and compares with eager, on both torch versions.
"""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same, clone_args

T = torch.tensor


def _dynamic(fn, **options):
    return torch.compile(fn, backend="xla", dynamic=True, options={"strict": True, **options})


# -- an in-place op's result is its input, in a bucketed (padded) program ----------------------
IN_PLACE_RETURNED = {
    "masked_fill_": lambda x: x.masked_fill_(x > 4, -1.5),
    "add_then_mul_": lambda x: x.add_(1).mul_(2),
    "iadd": lambda x: x.__iadd__(1),
    "copy_": lambda x: x.copy_(x * 3),
}


@pytest.mark.parametrize("write", IN_PLACE_RETURNED.values(), ids=IN_PLACE_RETURNED.keys())
def test_in_place_result_is_the_input_in_a_padded_program(write):
    # (a size between buckets: the program runs on a padded copy; the output was the copy's
    # unpadded slice, detached, where eager returns the input itself)
    compiled = _dynamic(write)
    for n in (3, 5):
        x, ex = torch.arange(4.0 * n).reshape(n, 4), torch.arange(4.0 * n).reshape(n, 4)
        out, ref = compiled(x), write(ex)
        assert ref is ex and out is x
        assert_same(x, ex)
        assert x._version == ex._version


# -- half-precision add/sub with alpha in a padded program ---------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: torch.add(x, m, alpha=0.1),
        lambda x, m: x.clone().sub_(m, alpha=0.3),
    ],
    ids=["add", "sub_"],
)
def test_half_precision_add_with_alpha_in_a_dynamic_graph(fn, dtype):
    # eager's CPU kernel rounds the last numel % 16 (or 32) products apart: padding 37 to 64
    # moved that tail, so the bucket is refused and each size is compiled
    compiled = _dynamic(fn)
    for n in (37, 100):
        g = torch.Generator().manual_seed(n)
        x = (torch.randn(n, generator=g) * 10).to(dtype)
        m = (torch.randn(n, generator=g) * 10).to(dtype)
        if n == 100:
            with pytest.warns(torch2xla.BucketingWarning, match="alpha in half precision"):
                out = compiled(x, m)
        else:
            out = compiled(x, m)
        assert_same(out, fn(x, m), rtol=0, atol=0)


# -- eager's errors found by running eager on tensors laid out as the example values -------------
# (their sizes are SymInts in a dynamic graph: read at their hints, capture/_hinted.py)
def _raises_as_eager(fn, *args):
    with pytest.raises(Exception) as eager:
        fn(*clone_args(args))
    compiled_args = clone_args(args)
    with pytest.raises(type(eager.value)) as ours:
        _dynamic(fn)(*compiled_args)
    assert str(ours.value).startswith(str(eager.value).splitlines()[0])
    assert_same(compiled_args, args)  # (nothing written before eager's check)


def _shift(x):
    x[1:] = x[:-1]


PARTIAL_OVERLAPS = {
    "setitem_shifted": _shift,
    "add_row": lambda x: x.add_(x[0]),
    "index_add_slice": lambda x: x.index_add_(0, T([0]), x[1:2]),
    "addcmul_rows": lambda x: x.addcmul_(x[0], x[1]),
    "out_view": lambda x: torch.add(x[0], 1, out=x.view(-1)[2:6]),
}


@pytest.mark.parametrize("write", PARTIAL_OVERLAPS.values(), ids=PARTIAL_OVERLAPS.keys())
@pytest.mark.parametrize("of", ["input", "intermediate"])
def test_write_reading_memory_it_writes_raises_as_eager(write, of):
    def fn(x):
        y = x if of == "input" else x * 1
        write(y)
        return y

    _raises_as_eager(fn, torch.arange(12.0).reshape(3, 4))


def test_write_into_a_view_reading_an_overlapping_input_raises_as_eager():
    def fn(a, b):
        return a[:-1].add_(b)

    t = torch.arange(8.0)
    with pytest.raises(RuntimeError) as eager:
        fn(t, t[1:])
    t = torch.arange(8.0)
    with pytest.raises(RuntimeError) as ours:
        _dynamic(fn)(t, t[1:])
    assert str(ours.value).startswith(str(eager.value).splitlines()[0])
    assert_same(t, torch.arange(8.0))


CALLS_EAGER_REFUSES = {
    "fill_into_half": (lambda x: x.fill_(70000.0), (torch.zeros(3, dtype=torch.float16),)),
    "max_of_uint16": (lambda x: x.max(), (T([0, 7, 300], dtype=torch.uint16),)),
    "max_of_uint32_rows": (lambda x: x.amax(1), (torch.ones(3, 5, dtype=torch.uint32),)),
    "nll_loss_float64_weight": (
        lambda x, t, w: torch.nn.functional.nll_loss(x, t, weight=w),
        (torch.randn(4, 3), T([0, 1, 2, 0]), torch.rand(3, dtype=torch.float64)),
    ),
    "multinomial_into_float": (
        lambda p: torch.multinomial(p, 2, out=torch.empty(2)),
        (torch.ones(3),),
    ),
}


@pytest.mark.parametrize("fn, args", CALLS_EAGER_REFUSES.values(), ids=CALLS_EAGER_REFUSES.keys())
def test_calls_eager_refuses_raise_its_error(fn, args):
    _raises_as_eager(fn, *args)


OVERLAPPING_WINDOWS = {
    "unfold_mul_": lambda x: x.unfold(0, 3, 1).mul_(10),
    "unfold_row_setitem": lambda x: x.unfold(0, 3, 1).__setitem__(1, T([7.0, 8, 9])),
    "unfold_row_add_": lambda x: x.unfold(0, 4, 2)[2].add_(5),
}


@pytest.mark.parametrize("write", OVERLAPPING_WINDOWS.values(), ids=OVERLAPPING_WINDOWS.keys())
def test_writes_through_overlapping_windows_run_in_eager(write):
    # (the export refuses them: "internal overlap"; the graph runs in eager, as without
    # dynamic shapes, and says why)
    def fn(x):
        write(x)
        return x * 2

    x, ex = torch.arange(10.0), torch.arange(10.0)
    with pytest.warns(torch2xla.FallbackWarning, match="share memory"):
        out = torch.compile(fn, backend="xla", dynamic=True)(x)
    assert_same((out, x), (fn(ex), ex))
    assert x._version == ex._version


# -- eager's messages for a bad index, from a padded program --------------------------------------
# (a padded program is lowered from the bucketing's rewritten ATen graph, exported again: its
# nodes had lost the op they were decomposed from, which eager's message names)
BAD_INDICES = {
    "cross_entropy_target": (
        lambda x, t: torch.nn.functional.cross_entropy(x, t),
        (torch.randn(5, 3), T([0, 1, 9, 2, 0])),
    ),
    "nll_loss_target": (
        lambda x, t: torch.nn.functional.nll_loss(x, t),
        (torch.randn(5, 3), T([0, 1, 2, -4, 0])),
    ),
    "index_add": (lambda x, i: x.index_add(0, i, torch.ones(2, 3)), (torch.randn(5, 3), T([0, 7]))),
    "embedding": (lambda w, i: torch.nn.functional.embedding(i, w), (torch.randn(5, 3), T([1, 9]))),
    "getitem": (lambda x, i: x[i], (torch.randn(5, 3), T([1, 5]))),
}


@pytest.mark.parametrize("fn, args", BAD_INDICES.values(), ids=BAD_INDICES.keys())
def test_bad_index_in_a_padded_program_raises_eagers_message(fn, args):
    _raises_as_eager(fn, *args)
