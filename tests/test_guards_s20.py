"""Stale programs, session 20: state that changes between calls and that a program (or a
record of the persistent cache) was specialized to, each call compared strictly with eager
(``scripts/probe_guards2.py`` finds more).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from torch2xla.guards import _persistent
from torch2xla.runtime import _stored_key


@pytest.fixture
def fresh_cache(monkeypatch):
    """Restores the persistent cache's settings after a test that changes them."""
    yield
    monkeypatch.undo()
    _persistent._explicit = _persistent._UNSET
    _persistent._wanted_path = None
    _persistent._store = None


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def _hardtanh_grad(fn, x: torch.Tensor) -> torch.Tensor:
    x = x.clone().requires_grad_()
    fn(x).backward()
    return x.grad


def test_a_stored_record_is_not_served_to_another_thread_count(tmp_path, fresh_cache, threads):
    # hardtanh's gradient at NaN is 0 in eager's vectorized loop and 1 in its scalar loop;
    # above 32768 elements the walk is cut once per thread, so which elements are vectorized
    # depends on the thread count, which the lowering reads. The persistent cache's record of
    # the graph was keyed without it: a process with another thread count (here: the same
    # process after set_num_threads, its graph traced again) was served the first one's
    # program, another gradient at every NaN.
    torch2xla.set_persistent_cache(tmp_path / "cache")

    def fn(x):
        return F.hardtanh(x).sum()

    x = torch.full((40001,), float("nan"))
    grads = {}
    for n in (2, 1):
        torch.set_num_threads(n)
        torch._dynamo.reset()
        got = _hardtanh_grad(torch.compile(fn, backend="xla"), x)
        want = _hardtanh_grad(fn, x)
        assert torch.equal(got, want), (n, got.sum(), want.sum())
        grads[n] = want
    assert not torch.equal(grads[1], grads[2])  # (the thread count matters here)


def test_the_stored_key_holds_the_thread_count(threads):
    gm = torch.fx.symbolic_trace(lambda t: t * 2.0)
    x = torch.randn(3)
    options = torch2xla.Options.parse()
    torch.set_num_threads(2)
    two = _stored_key.graph_key(gm, [x], options)
    torch.set_num_threads(1)
    one = _stored_key.graph_key(gm, [x], options)
    assert None not in (one, two) and one != two
