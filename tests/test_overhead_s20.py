"""The CPU training step's overhead (issue 24, session 20): what a steady step runs of
torch2xla's own code, for a program built here and for one restored from the persistent cache,
and that the steady paths behave as the general ones.

A steady training step calls the forward's and the freed backward's executables through their
C++ calls from ``XlaFunction`` (``_Plan.steady``, ``_Plan.steady_bwd``), with no wrapper frames
(``_forward``, ``_Wrapped``/``_StoredForward``/``_Loaded.__call__``, ``Backward.__call__``,
``_stored_runner``, ``_cotangents``, ``dense_slots``, the plan's lookups, the profiler wrapper,
JAX's Python ``shape``/``dtype`` properties). Python calls are counted as in
``tests/test_overhead_s19.py`` (load does not change them; bounds: the counts measured when the
path was trimmed, with a little headroom: a training step of Linear(8, 8) 70 -> 54, the 8-float
inference call 19 -> 17). Every step is checked against eager.
"""

from __future__ import annotations

import copy
import pathlib
import sys

import jax
import numpy as np
import pytest
import torch
from torch import nn

import torch2xla
from tests._util import assert_same
from torch2xla.guards import _persistent
from torch2xla.runtime._interop import host_view
from torch2xla.runtime._program import XlaProgram
from torch2xla.runtime._stored import StoredProgram

_ROOT = str(pathlib.Path(torch2xla.__file__).parent)

# Frames the steady paths no longer run (ours, and JAX's Python properties of an array).
_GONE = {
    "_forward",
    "of",
    "train_fns",
    "steady",
    "_cotangents",
    "dense_slots",
    "_stored_runner",
    "wrapper",
    "map_list",
    "residuals",
    "<listcomp>",
    "<genexpr>",
    "shape",
    "dtype",
}

_CPU_DEFAULT = pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="JAX's default device is not the CPU here"
)


def _calls(fn) -> tuple[int, list[str]]:
    """torch2xla's Python calls (frames and builtins) in ``fn()``, and the names of every
    frame it runs (JAX's and torch's too)."""
    count, names = [0], []

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            ours = frame.f_code.co_filename.startswith(_ROOT)
            count[0] += ours
            if event == "call" and (ours or "jax" in frame.f_code.co_filename):
                names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0], names


def _model(depth: int) -> nn.Module:
    torch.manual_seed(0)
    if depth == 1:
        return nn.Sequential(nn.Linear(8, 8))
    return nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))


def _programs(monkeypatch) -> list:
    """The programs called from now on (``XlaProgram.__call__``), in order."""
    seen: list = []
    call = XlaProgram.__call__

    def spy(self, *args):
        seen.append(self)
        return call(self, *args)

    monkeypatch.setattr(XlaProgram, "__call__", spy)
    return seen


def _steady_step(model: nn.Module, steps: int = 3):
    """Trains ``model`` compiled beside an eager copy, checked step by step; returns the
    calls of one steady step of the compiled one."""
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = torch.randn(4, 8)

    def step(net, optimizer):
        optimizer.zero_grad(set_to_none=True)
        loss = net(x).square().sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    for _ in range(steps):
        assert_same(step(compiled, opt), step(ref, ref_opt))
    losses = []
    result = _calls(lambda: losses.append(step(compiled, opt)))
    losses.append(step(ref, ref_opt))
    assert_same(*losses)
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        assert_same(p, q)
    return result


def _plan(program):
    (plan,) = program.plans.values()
    return plan


@_CPU_DEFAULT
@pytest.mark.parametrize("depth", [1, 2])
def test_training_step_of_a_built_program(depth, monkeypatch):
    programs = _programs(monkeypatch)
    n, names = _steady_step(_model(depth))
    monkeypatch.undo()
    plan = _plan(programs[-1])
    assert plan.steady and plan.steady_bwd is not None  # (the steady paths ran)
    assert not _GONE & set(names), sorted(_GONE & set(names))
    # (54 and 58; before: 70 and 74, and 104 and 111 before session 19; session 32 added one C
    # call, the look for saved-tensor hooks around a training call, which eager's gradients follow)
    assert n <= (57 if depth == 1 else 61), (n, names)


@_CPU_DEFAULT
def test_training_step_of_a_restored_program(tmp_path, monkeypatch):
    # A program restored from the persistent cache (``StoredProgram``: its forward and
    # backward executables loaded, not built) runs the same steady paths.
    monkeypatch.setattr(_persistent, "_explicit", _persistent._UNSET)
    monkeypatch.setattr(_persistent, "_wanted_path", None)
    monkeypatch.setattr(_persistent, "_store", None)
    try:
        torch2xla.set_persistent_cache(tmp_path)
        _steady_step(_model(1), steps=2)  # (built and stored)
        torch._dynamo.reset()
        programs = _programs(monkeypatch)
        n, names = _steady_step(_model(1))
    finally:
        torch2xla.set_persistent_cache(None)
    program = programs[-1]
    assert isinstance(program, StoredProgram), type(program)
    plan = _plan(program)
    assert plan.steady and plan.steady_bwd is not None
    assert not _GONE & set(names), sorted(_GONE & set(names))
    assert n <= 57, (n, names)  # (54; before: 70; session 32: the saved-tensor hooks' C call)


@_CPU_DEFAULT
@torch.no_grad()
def test_inference_call_runs_no_wrapper_frames():
    compiled = torch.compile(lambda x, y: x * y + 1, backend="xla", options={"strict": True})
    x, y = torch.randn(8), torch.randn(8)
    for _ in range(3):
        assert_same(compiled(x, y), x * y + 1)
    n, names = _calls(lambda: compiled(x, y))
    assert not _GONE & set(names), sorted(_GONE & set(names))
    assert n <= 17, (n, names)  # (17; before: 19)


def _rejecting(call):
    """``call`` that rejects its arguments the first time, as an executable rejects arguments
    of another kind (before running anything)."""
    state = {"rejected": 0}

    def once(*args):
        if not state["rejected"]:
            state["rejected"] += 1
            raise TypeError("rejected")
        return call(*args)

    return once, state


@_CPU_DEFAULT
@pytest.mark.parametrize("which", ["forward", "backward"])
def test_rejected_arguments_take_the_general_path(which, monkeypatch):
    # The steady calls pass what an executable rejects to the general path, which runs it
    # (through the jit); the step's results are eager's.
    model = _model(2)
    ref = copy.deepcopy(model)
    programs = _programs(monkeypatch)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    x = torch.randn(4, 8, requires_grad=True)
    for _ in range(2):
        compiled(x).sum().backward()
    plan = _plan(programs[-1])
    if which == "forward":
        exe, held, residuals = plan.steady
        once, state = _rejecting(exe)
        plan.steady = (once, held, residuals)
    else:
        once, state = _rejecting(plan.steady_bwd)
        plan.steady_bwd = once
    model.zero_grad(set_to_none=True)
    x.grad = None
    got = compiled(x)
    got.square().sum().backward()
    gx = x.grad
    x.grad = None
    want = ref(x)
    want.square().sum().backward()
    assert state["rejected"] == 1
    assert_same(got, want)
    assert_same(gx, x.grad)
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        assert_same(p.grad, q.grad)


@_CPU_DEFAULT
@pytest.mark.parametrize("saves", [True, False])
def test_second_backward_through_a_freed_graph_raises_like_eager(saves):
    # The freed-graph marker is saved only where the node saves no other tensor: either way,
    # a second backward without retain_graph raises eager's error, and one with it runs.
    fn = (lambda w, x: (x @ w).tanh()) if saves else (lambda w, x: w * 2.0 + x)
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    w = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(3, 3)
    for _ in range(3):  # (steady)
        compiled(w, x).sum().backward()
    for f in (compiled, fn):
        loss = f(w, x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()


@_CPU_DEFAULT
def test_dropout_mask_of_the_steady_forward_is_the_backward_s():
    # A program that draws random numbers: its residuals may hold the seed (then no steady
    # forward); either way the backward's mask is the forward's.
    torch.manual_seed(0)
    lin = nn.Linear(8, 8)
    model = nn.Sequential(lin, nn.Dropout(0.5))
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    x = torch.randn(16, 8)
    for _ in range(4):
        lin.zero_grad(set_to_none=True)
        out = compiled(x)
        out.sum().backward()
        kept = (out != 0).to(out.dtype)
        assert 0 < kept.mean() < 1
        assert_same(lin.bias.grad, kept.sum(0) * 2.0)
        assert_same(lin.weight.grad, (kept * 2.0).T @ x)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.ones(()).expand(4, 8),  # (the cotangent of ``.sum()``)
        lambda: torch.ones(3, 1, 2).expand(3, 5, 2),
        lambda: torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
        lambda: torch.arange(24.0).reshape(4, 6)[:, ::2],
        lambda: torch.arange(10.0)[2:7],
        lambda: torch.arange(12, dtype=torch.int64).reshape(3, 4).T,
        lambda: torch.zeros(0, 3).T,
    ],
)
def test_host_views_of_strided_tensors(make):
    t = make()
    v = host_view(t)
    assert v.shape == tuple(t.shape)
    assert np.array_equal(v, t.numpy())
    if t.numel():
        assert v.strides == tuple(s * t.element_size() for s in t.stride())
