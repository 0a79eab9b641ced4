"""Reliability: calls that crashed or hung where eager PyTorch runs (``scripts/probe_reliability.py``
runs ~125 scenarios of caches, guards, threads, lifecycles, exceptions and the persistent cache
to find more).

A process forked after torch2xla started JAX (``multiprocessing``'s default start method on
Linux, DataLoader workers) cannot run XLA: its thread pools are gone, and a compile or even a
compiled program's call waited forever. Compiled graphs run in eager PyTorch there, with one
``FallbackWarning`` (``runtime/_fork.py``).
"""

from __future__ import annotations

import multiprocessing
import threading
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import torch2xla
from tests._util import assert_same

_WAIT = 120  # seconds; a child that takes longer hangs


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))


def _f(t):
    return (t @ t.t()).sin().sum(0) * 2


def _fork_run(target, *args):
    """Run ``target(queue, *args)`` in a forked child; what it put on the queue."""
    if torch.cuda.is_initialized():
        # torch's own limit, whatever the backend: Dynamo saves the CUDA RNG state and autograd
        # its device threads, which a child forked after CUDA started cannot (on the GPU
        # machine other tests in the same worker started it)
        pytest.skip("CUDA was initialized in this process before the fork")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=target, args=(queue, *args))
    child.start()
    child.join(_WAIT)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hangs")
    assert child.exitcode == 0
    return queue.get(timeout=10)


def _plain(t: torch.Tensor):
    # (tensors through a pipe would go through torch's shared-memory handles)
    return str(t.dtype), t.tolist(), t.requires_grad


def _child_calls(queue, f, model, compiled_model):
    torch.set_num_threads(1)  # (as DataLoader's workers: torch's OpenMP pool after a fork)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = torch.full((3, 4), 0.5)
            same = f(x)  # a signature compiled in the parent
            other = f(torch.full((5, 4), 0.25))  # a new signature
            new = torch.compile(lambda t: t.cos() * 3, backend="xla")(x)  # a new graph
            out = compiled_model(x)
            out.sum().backward()
            grads = [p.grad for p in model.parameters()]
        queue.put(
            {
                "outs": [_plain(t) for t in (same, other, new, out.detach())],
                "requires_grad": out.requires_grad,
                "grads": [_plain(g) for g in grads],
                "warnings": [str(w.message) for w in caught if issubclass(w.category, UserWarning)],
            }
        )
    except BaseException as e:  # reported by the parent
        queue.put(repr(e))


def test_a_forked_child_runs_compiled_functions_in_eager():
    f = torch.compile(_f, backend="xla")
    model = _model()
    compiled_model = torch.compile(model, backend="xla")
    x = torch.full((3, 4), 0.5)
    assert_same(f(x), _f(x))
    compiled_model(x).sum().backward()  # the parent trains: its backward program too
    model.zero_grad(set_to_none=True)

    got = _fork_run(_child_calls, f, model, compiled_model)
    assert not isinstance(got, str), got

    ref = _model()
    ref_out = ref(x)
    ref_out.sum().backward()
    expected = [_f(x), _f(torch.full((5, 4), 0.25)), x.cos() * 3, ref_out.detach()]
    for (dtype, values, _), e in zip(got["outs"], expected):
        assert dtype == str(e.dtype)
        assert_same(torch.tensor(values, dtype=e.dtype), e)
    assert got["requires_grad"]
    for (dtype, values, _), p in zip(got["grads"], ref.parameters()):
        assert_same(torch.tensor(values, dtype=p.grad.dtype), p.grad)
    forked = [w for w in got["warnings"] if "forked" in w]
    assert len(forked) == 1, got["warnings"]
    assert "spawn" in forked[0]


def _child_strict(queue, f):
    torch.set_num_threads(1)
    try:
        f(torch.ones(3))
        queue.put("ran")
    except torch2xla.CompileError as e:
        queue.put(f"CompileError: {e}")
    except BaseException as e:
        queue.put(repr(e))


def test_strict_mode_raises_in_a_forked_child():
    f = torch.compile(lambda t: t.sin() + 1, backend="xla", options={"strict": True})
    f(torch.ones(3))
    got = _fork_run(_child_strict, f)
    assert got.startswith("CompileError:") and "forked" in got, got


def test_dataloader_workers_call_a_compiled_function():
    # DataLoader's workers are forked (Linux's default): each calls the function in eager.
    def g(t):
        return t.exp().cumsum(-1) / 2

    if torch.cuda.is_initialized():  # (torch's own limit: see ``_fork_run``)
        pytest.skip("CUDA was initialized in this process before the fork")
    f = torch.compile(g, backend="xla")
    x = torch.full((2, 3), 1.0)
    assert_same(f(x), g(x))
    ctx = multiprocessing.get_context("fork")
    loader = torch.utils.data.DataLoader(
        _Data(f), num_workers=2, batch_size=2, multiprocessing_context=ctx, timeout=_WAIT
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the workers' FallbackWarning)
        batches = list(loader)
    expected = torch.stack([g(torch.full((2, 3), float(i))) for i in range(4)])
    assert_same(torch.cat(batches), expected)


class _Data(torch.utils.data.Dataset):
    def __init__(self, f) -> None:
        self.f = f

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.f(torch.full((2, 3), float(i)))


def _child_backward(queue, loss):
    torch.set_num_threads(1)
    try:
        loss.backward()
        queue.put("ran")
    except RuntimeError as e:
        queue.put(f"RuntimeError: {e}")
    except BaseException as e:
        queue.put(repr(e))


def test_backward_of_a_parents_forward_raises_in_a_forked_child():
    # (its program is the parent's: the child cannot run it, and raises instead of hanging)
    model = _model()
    f = torch.compile(model, backend="xla")
    f(torch.ones(3, 4)).sum().backward()
    loss = f(torch.ones(3, 4)).sum()
    got = _fork_run(_child_backward, loss)
    assert got.startswith("RuntimeError:") and "forked" in got, got


def test_concurrent_calls_of_one_program_do_not_interleave_their_views():
    # ViewCache's records of each position (reference, pointer, view) are read and written in
    # several steps; two threads calling one program with other tensors (two replicas of a
    # model) read each other's half-made records: the program got a None argument (a crash
    # in ~1 of 20000 calls under a short switch interval) or another call's tensor. Here the
    # other thread's call is started inside this one's import of its first tensor.
    from torch2xla.runtime import _interop, _jax_scope

    cache = _interop.ViewCache(2, writes=False)
    mine = [torch.randn(8), torch.randn(8)]
    theirs = [torch.randn(8), torch.randn(8)]
    original = _interop.to_jax
    inside: dict = {}

    def other():
        with _jax_scope.x64():
            for _ in range(2):  # (the second call caches its views)
                cache(theirs)

    def to_jax(t, *ordered):
        if t is mine[0] and "thread" not in inside:
            inside["thread"] = thread = threading.Thread(target=other)
            thread.start()
            thread.join(1.0)
            inside["finished inside"] = not thread.is_alive()
        return original(t, *ordered)

    _interop.to_jax = to_jax
    try:
        with _jax_scope.x64():
            views, _ = cache(mine)
        inside["thread"].join(_WAIT)
    finally:
        _interop.to_jax = original
    assert not inside["finished inside"], "another thread's call ran inside this one's"
    with _jax_scope.x64():
        for tensors in (mine, theirs, mine, mine, theirs, theirs):
            views, _ = cache(tensors)
            for view, t in zip(views, tensors):
                assert view is not None
                torch.testing.assert_close(torch.from_numpy(np.asarray(view)), t)
