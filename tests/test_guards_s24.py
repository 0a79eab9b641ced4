"""Stale programs, part three (``scripts/probe_guards24.py`` finds more): a program or a
persistent-cache record built for one call served another whose signature only looked the
same, each call compared strictly with eager.

- a written input's leafness, which Dynamo does not guard (it guards ``requires_grad``);
- the globals a user function in the graph (``allow_in_graph``) reads, which the persistent
  cache's key did not hold (its code only);
- the storage offset of a restored signature's inputs, for what it builds later (a backward
  that keeps the graph).
"""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same, leaf
from torch2xla.guards import _persistent
from torch2xla.guards._info import _graphs_of
from torch2xla.runtime import _stored, _stored_key


@pytest.fixture
def fresh_cache(monkeypatch):
    """Restores the persistent cache's settings after a test that changes them."""
    yield
    monkeypatch.undo()
    _persistent._explicit = _persistent._UNSET
    _persistent._wanted_path = None
    _persistent._store = None


def _raises_as_eager(fn, compiled, *args):
    with pytest.raises(RuntimeError) as want:
        fn(*args)
    with pytest.raises(RuntimeError) as got:
        compiled(*args)
    assert str(got.value) == str(want.value)


# -- a written input's leafness ------------------------------------------------------------------
def _scale_in_place(y, w):
    y.mul_(w)
    return y.sum() * 2


@pytest.mark.parametrize("kind", ["leaf", "view of a leaf"])
def test_written_leaf_after_a_non_leaf_raises_eagers_error(kind):
    # Dynamo guards that the input requires grad, not that it is a leaf: the program traced for
    # ``f(x * 2)`` served ``f(x)``, wrote the leaf and returned, where eager raises at the write.
    f = torch.compile(_scale_in_place, backend="xla")
    w = leaf(3, seed=1)
    x = leaf(3)
    y = x * 2
    out = f(y, w)
    assert_same(out, _scale_in_place(x * 2, w))
    x = leaf(3, seed=2)
    before = x.detach().clone()
    _raises_as_eager(_scale_in_place, f, x if kind == "leaf" else x[None][0], w)
    assert torch.equal(x.detach(), before)  # (eager raised before writing)
    # and the non-leaf calls still run their program, with eager's gradients
    x = leaf(3, seed=3)
    out = f(x * 2, w)
    out.backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    _scale_in_place(x2 * 2, w2).backward()
    assert_same(x.grad, x2.grad)


def test_written_leaf_under_no_grad_is_written():
    # (eager refuses the write with grad mode on only)
    f = torch.compile(_scale_in_place, backend="xla")
    w = leaf(3, seed=1)
    f(leaf(3) * 2, w)
    x, ref = leaf(3), leaf(3)
    with torch.no_grad():
        assert_same(f(x, w), _scale_in_place(ref, w))
    assert_same(x, ref)


def test_leaf_write_under_enable_grad_inside_no_grad_call():
    # the graph's own ``enable_grad`` makes the write one eager refuses for a leaf, though the
    # call is made under no_grad
    def fn(y, w):
        with torch.enable_grad():
            y.mul_(w)
        return y * 3

    f = torch.compile(fn, backend="xla")
    w, y, ref = leaf(3, seed=1), leaf(3) * 2, leaf(3) * 2
    with torch.no_grad():
        assert_same(f(y, w), fn(ref, w))
        _raises_as_eager(fn, f, leaf(3), w)


def test_the_key_says_which_written_input_is_a_leaf():
    f = torch.compile(_scale_in_place, backend="xla")
    w = leaf(3, seed=1)
    f(leaf(3) * 2, w)
    with pytest.raises(RuntimeError):
        f(leaf(3), w)
    (graph,) = _graphs_of(f)
    assert len(graph.cache) == 1  # (the leaf's call raised: nothing cached for it)
    old, new = graph.key((leaf(3) * 2, w)), graph.key((leaf(3), w))
    assert graph.key.describe(old, new) == ["y is a leaf: False -> True"]


@pytest.mark.parametrize("through", ["data", "detach"])
def test_untracked_write_into_a_leaf_stays_compiled(through):
    # (eager lets ``.data`` and ``.detach()`` write a leaf: such a write is not keyed, and the
    # graph runs in XLA)
    def fn(p, x):
        (p.data if through == "data" else p.detach()).mul_(2)
        return (p * x).sum()

    f = torch.compile(fn, backend="xla")
    x = torch.arange(3.0)
    for _ in range(2):
        p, ref = leaf(3), leaf(3)
        out, want = f(p, x), fn(ref, x)
        out.backward()
        want.backward()
        assert_same(out, want)
        assert_same(p.grad, ref.grad)
        assert_same(p, ref)
    (graph,) = _graphs_of(f)
    assert graph.key.leaf_pos == ()
    assert [r.mode for r in graph.cache.records] == ["training"]


# -- the persistent cache: globals a user function in the graph reads ----------------------------
K = 2.0


@torch.compiler.allow_in_graph
def _scaled(x):
    return x * K


def _uses_scaled(x):
    return _scaled(x) + 1


def test_stored_record_is_keyed_by_the_globals_of_a_function_in_the_graph(tmp_path, fresh_cache):
    # The export runs ``_scaled``, so K is a constant of the program; the record's key held the
    # function's code only, and a later process (here: the same one, its graph traced again)
    # with K = 3.0 was served the program of K = 2.0.
    global K
    torch2xla.set_persistent_cache(tmp_path / "cache")
    x = torch.randn(4)
    try:
        for k in (2.0, 3.0, 2.0):
            K = k
            torch._dynamo.reset()
            torch2xla.clear_caches()
            assert_same(torch.compile(_uses_scaled, backend="xla")(x), x * k + 1)
    finally:
        K = 2.0


def test_function_digest_follows_globals_and_refuses_what_it_cannot_describe():
    global K
    try:
        K = 2.0
        two = _stored_key._function_digest(_scaled)
        K = 3.0
        three = _stored_key._function_digest(_scaled)
        K = 2.0
        assert None not in (two, three) and two != three
        assert _stored_key._function_digest(_scaled) == two
        K = object()  # (no key holds what an object does)
        assert _stored_key._function_digest(_scaled) is None
    finally:
        K = 2.0


def _helper(x):
    return x.sin()


def _calls_helper(x):
    return _helper(x) * 2


def test_function_digest_follows_the_functions_it_calls(monkeypatch):
    before = _stored_key._function_digest(_calls_helper)
    monkeypatch.setitem(globals(), "_helper", lambda x: x.cos())
    after = _stored_key._function_digest(_calls_helper)
    assert None not in (before, after) and before != after


# -- the persistent cache: storage offsets of what a restored signature builds later -------------
def _strided(x, w):
    return (x.as_strided((3,), (2,), 3) * w).sin().sum()


def test_restored_as_strided_graph_builds_its_backward_for_the_storage_offset(
    tmp_path, fresh_cache
):
    # The stored key holds each input's storage offset; the program a restored signature builds
    # later (here for a backward that keeps the graph) was lowered from arguments at offset 0:
    # as_strided's explicit offset, counted from the storage's start, then read outside the
    # input, and the backward raised.
    torch2xla.set_persistent_cache(tmp_path / "cache")
    base = torch.arange(10.0) / 10
    for run in ("cold", "warm"):
        torch._dynamo.reset()
        torch2xla.clear_caches()
        f = torch.compile(_strided, backend="xla")
        grads = []
        for fn in (f, _strided):
            x, w = base[2:8].detach().requires_grad_(), leaf(3, seed=1)
            out = fn(x, w)
            out.backward(retain_graph=True)
            out.backward()
            grads.append((out, x.grad, w.grad))
        for got, want in zip(*grads):
            assert_same(got, want)


def test_example_args_keep_the_storage_offset():
    a = torch.arange(10.0)[2:8:2]
    (b,) = _stored.example_args(_stored.arg_spec([a]))
    assert (b.shape, b.stride(), b.storage_offset()) == (a.shape, a.stride(), 2)
    assert b.is_leaf and b._base is None
