"""Issue 22 item 11: inputs that overlap in memory, mutated in place (``f(x[0:4], x[2:6])``),
give eager's results and leave the shared memory as eager does."""

import warnings

import pytest
import torch

import torch2xla
from tests._util import ProgramCounter, assert_same
from torch2xla.capture._input_aliasing import InputAliasing, alias_signature


def shift_and_scale(a, b):
    a.mul_(2)  # b sees this where the two overlap
    b.add_(1)
    return a.sum() + b.sum(), b * 3


def _run_both(fn, make_args):
    """Compiled and eager results on fresh inputs; returns (out, ref, bases, ref bases)."""
    bases, ref_bases = [], []
    args = make_args(bases)
    ref_args = make_args(ref_bases)
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    ref = fn(*ref_args)
    return out, ref, bases, ref_bases


@pytest.mark.parametrize(
    "views",
    [
        lambda x: (x[0:4], x[2:6]),  # partial overlap
        lambda x: (x[2:6], x[0:4]),  # the later one first
        lambda x: (x[0:6], x[2:4]),  # one inside the other
        lambda x: (x[0:8:2], x[1:5]),  # strided
        lambda x: (x.view(2, 4)[:, 1:3].reshape(-1), x[1:5]),  # a copy (no overlap) next to a view
    ],
    ids=["overlap", "reversed", "nested", "strided", "copy"],
)
def test_mutated_overlapping_views_match_eager(views):
    def make(bases):
        x = torch.arange(8.0)
        bases.append(x)
        return views(x)

    out, ref, bases, ref_bases = _run_both(shift_and_scale, make)
    assert_same(out, ref)
    assert_same(bases, ref_bases)  # the base's final contents


def test_mutated_overlapping_2d_views():
    def f(rows, cols):
        rows.add_(1)
        cols.mul_(10)  # a column of the same matrix: overlaps every row
        return rows.sum(-1)

    def make(bases):
        m = torch.arange(12.0).reshape(3, 4)
        bases.append(m)
        return m[0:2], m[:, 1]

    out, ref, bases, ref_bases = _run_both(f, make)
    assert_same(out, ref)
    assert_same(bases, ref_bases)


def test_aliasing_changes_between_calls(monkeypatch):
    # Dynamo does not guard aliasing once its example inputs shared memory: the same graph
    # gets overlapping, disjoint, shifted and unrelated inputs, each as eager handles them.
    counter = ProgramCounter(monkeypatch)
    compiled = torch.compile(shift_and_scale, backend="xla", options={"strict": True})
    cases = [
        lambda x, y: (x[0:4], x[2:6]),
        lambda x, y: (x[0:4], x[4:8]),
        lambda x, y: (x[1:5], x[2:6]),
        lambda x, y: (x[0:4], y[0:4]),
        lambda x, y: (x[3:7], x[4:8]),  # the layout of the third case, moved along
    ]
    for make in cases:
        x, y = torch.arange(8.0), torch.arange(8.0) * 3
        ex, ey = x.clone(), y.clone()
        assert_same(compiled(*make(x, y)), shift_and_scale(*make(ex, ey)))
        assert_same((x, y), (ex, ey))
    # one program per layout: overlapping, none overlapping (disjoint slices of one tensor or
    # two tensors), shifted by one; the last case reuses the third's
    assert counter.count == 3


def test_overlapping_inputs_are_differentiated_through_their_base():
    w = torch.randn(8, requires_grad=True)

    def f(a, b):
        return (a * b.flip(0)).sum() + a.sin().sum()

    compiled = torch.compile(f, backend="xla", options={"strict": True})
    x, ex = w * 2, w * 2
    (g,) = torch.autograd.grad(compiled(x[0:5], x[3:8]), w)
    (g_ref,) = torch.autograd.grad(f(ex[0:5], ex[3:8]), w)
    assert_same(g, g_ref)


def test_alias_signature_and_groups():
    x = torch.arange(10.0)
    other = torch.zeros(3)
    args = [x[0:4], other, x[6:9], x[2:5], 7]
    # x[0:4] and x[2:5] overlap; x[6:9] shares the storage but not the memory
    assert alias_signature(args) == (((0, (1,), 0), (3, (1,), 2)),)
    aliasing = InputAliasing.of(args)
    assert [g.positions for g in aliasing.groups] == [(0, 3)]
    program_args = aliasing.program_args(args)
    assert program_args[:3] == [other, args[2], 7]
    base = program_args[3]
    assert base.data_ptr() == x.data_ptr() and base.shape == (5,)
    assert alias_signature([x[0:4], x[4:8]]) == ()
    assert InputAliasing.of([x, other]) is None


def test_write_reading_an_overlapping_input_raises_as_eager():
    # eager refuses ``a.add_(b)`` where ``b`` partially overlaps ``a``; disjoint or identical
    # inputs run (Dynamo does not guard aliasing: checked per call signature)
    def add_into(a, b):
        a.add_(b)
        return a

    compiled = torch.compile(add_into, backend="xla")
    for views, raises in [
        (lambda x: (x[0:4], x[4:8]), False),
        (lambda x: (x[0:4], x[2:6]), True),
        (lambda x: (x[0:4], x[0:4]), False),
    ]:
        x, ex = torch.arange(8.0), torch.arange(8.0)
        if raises:
            with pytest.raises(RuntimeError, match="some elements of the input tensor"):
                add_into(*views(ex))
            with pytest.raises(RuntimeError, match="some elements of the input tensor"):
                compiled(*views(x))
        else:
            assert_same(compiled(*views(x)), add_into(*views(ex)))
        assert_same(x, ex)


@pytest.mark.parametrize("buckets", ["auto", None])
def test_overlapping_views_of_a_dynamic_shape_graph(buckets):
    # A graph traced with symbolic sizes (dynamic=True, or Dynamo's automatic dynamic shapes,
    # which torch 2.11 turned on after a test compiling in threads) was padded to a bucket:
    # the padded copies of the two inputs no longer shared memory, so b.add_ missed a.mul_'s
    # write (30 against eager's 37) and the writes reached x apart.
    f = torch.compile(shift_and_scale, backend="xla", dynamic=True, options={"buckets": buckets})
    for n in (4, 5, 7):
        x, y = torch.arange(10.0), torch.arange(10.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.BucketingWarning)
            out = f(x[0:n], x[2 : n + 2])
        assert_same(out, shift_and_scale(y[0:n], y[2 : n + 2]))
        assert_same(x, y)
