"""The eager probes compiling runs keep torch's generator only where the probed op draws
(``capture/_probe_rng.py``): a save and restore around every probe rewound the numbers other
threads drew while a graph compiled."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

from torch2xla.capture import _probe_rng

aten = torch.ops.aten


def _name(target) -> str:  # (stable across processes: xdist compares the collected ids)
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


@pytest.mark.parametrize(
    "target",
    [aten.bernoulli.default, aten.uniform_.default, torch.rand, F.dropout, "uniform_", "normal_"],
    ids=_name,
)
def test_ops_that_draw(target):
    assert _probe_rng.draws(target)


@pytest.mark.parametrize(
    "target",
    [aten.add.Tensor, aten.index_put_.default, torch.add, "add_", operator.setitem, operator.gt],
    ids=_name,
)
def test_ops_that_do_not_draw(target):
    assert not _probe_rng.draws(target)


def test_a_callable_no_aten_op_names_is_taken_to_draw():
    assert _probe_rng.draws(lambda x: x)


def test_the_state_is_kept_only_around_a_drawing_probe():
    state = torch.get_rng_state()
    with _probe_rng.kept_rng(aten.bernoulli.default):
        torch.rand(3)
    assert torch.equal(torch.get_rng_state(), state)
    with _probe_rng.kept_rng(aten.add.Tensor):  # (nothing restored: another thread's draws stay)
        torch.rand(3)
    assert not torch.equal(torch.get_rng_state(), state)


def test_compiling_deterministic_ops_restores_no_generator_state(monkeypatch):
    """Writes, integer casts and comparisons, whose calls are probed in eager while compiling:
    none of the probes restores the generator."""
    restores = []
    original = torch.random.fork_rng

    def counting(*args, **kwargs):
        restores.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(torch.random, "fork_rng", counting)

    def f(x, i, out):
        y = x.clone()
        y[i] = 3
        z = torch.add(x, 1, out=out)
        return y * 2 + x.to(torch.int64).sum(), (x > 0).sum(), z

    x, i = torch.randn(6), torch.tensor([1, 2])
    got = torch.compile(f, backend="xla")(x, i, torch.empty(6))
    want = f(x, i, torch.empty(6))
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert restores == []
