"""Compiled graphs and their XLA programs are freed once Dynamo lets go of them.

A notebook recompiling a model cell after cell, or a test suite calling torch._dynamo.reset()
between tests, must not keep every earlier graph alive. Each test compiles several fresh
functions, resets Dynamo, and checks that no CompiledGraph it created survives a collection.
"""

import gc
import warnings
import weakref

import pytest
import torch

from tests._util import assert_same
from torch2xla import _backend


@pytest.fixture
def created(monkeypatch):
    """Weak references to every CompiledGraph built during the test."""
    refs: list[weakref.ref] = []
    init = _backend.CompiledGraph.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        refs.append(weakref.ref(self))

    monkeypatch.setattr(_backend.CompiledGraph, "__init__", spy)
    return refs


def _alive(refs) -> int:
    torch._dynamo.reset()
    gc.collect()
    return sum(r() is not None for r in refs)


def _scaled(i):
    return lambda x: torch.tanh(x * i) + 1


def test_inference_graphs_are_freed_after_reset(created):
    for i in range(4):
        f = torch.compile(_scaled(i), backend="xla")
        x = torch.randn(3, 5)
        assert_same(f(x), _scaled(i)(x))
        torch._dynamo.reset()
    assert len(created) == 4
    assert _alive(created) == 0


def test_training_graphs_are_freed_after_reset(created):
    for i in range(3):
        lin = torch.nn.Linear(5, 2)
        ref = torch.nn.Linear(5, 2)
        ref.load_state_dict(lin.state_dict())
        f = torch.compile(lambda x, m=lin, i=i: m(x * i).square().sum(), backend="xla")
        x = torch.randn(3, 5)
        f(x).backward()
        ref(x * i).square().sum().backward()
        assert_same(lin.weight.grad, ref.weight.grad)
        torch._dynamo.reset()
    assert len(created) == 3
    assert _alive(created) == 0


def test_graphs_with_eager_parts_are_freed_after_reset(created):
    # The XLA partitions of a split graph compile on the graph's first call.
    options = {"eager_ops": [torch.ops.aten.cos.default]}
    for i in range(3):
        fn = _scaled(i)
        f = torch.compile(lambda x, fn=fn: fn(x).cos().exp(), backend="xla", options=options)
        x = torch.randn(4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _backend.FallbackWarning)
            assert_same(f(x), fn(x).cos().exp())
        torch._dynamo.reset()
    assert len(created) == 3
    assert _alive(created) == 0


def test_stack_capture_stays_on_while_compiling():
    # Compiling records no user frame (a jaxlib TracebackScope, per thread) instead of turning
    # jaxlib's process-wide stack capture off, which broke arrays other threads made meanwhile.
    import jax

    seen = []

    def probe(gm):
        seen.append(jax.numpy.zeros(2).traceback is not None)
        return gm

    f = torch.compile(_scaled(2), backend="xla", options={"passes": [probe]})
    x = torch.randn(3)
    assert_same(f(x), _scaled(2)(x))
    assert seen == [True]
