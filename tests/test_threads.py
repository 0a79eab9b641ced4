"""Compiled functions called from several threads while other graphs compile.

The promise (README, docs/design.md): a call of a graph whose signature is compiled runs its
XLA program, whatever other threads compile meanwhile; a call that needs a compile waits for
the build in progress (one build at a time) and then compiles its own. The first tests stop a
build inside its ATen export (where FX's process-wide tracing flag is set) and make calls
from another thread there; the last one mixes threads, graphs, new shapes, inference and
training.
"""

from __future__ import annotations

import copy
import random
import threading
import traceback

import jax
import numpy as np
import torch

import torch2xla
from tests._util import assert_same
from torch2xla.capture import _lower

_WAIT = 60.0  # seconds; a rendezvous that takes longer is a deadlock


def _fx_tracing() -> bool:
    """FX's tracing flag: process-wide up to torch 2.13, per-thread since torch 2.14."""
    fx = torch.fx._symbolic_trace
    if hasattr(fx, "_is_fx_tracing_flag"):
        return fx._is_fx_tracing_flag
    return fx._get_is_fx_tracing()


class _Rendezvous:
    """Stops a build inside its ATen export until another thread has done its part.

    ``marker`` is in the Dynamo graph of the function compiled (``allow_in_graph``: Dynamo puts
    the call in its graph without tracing it); the export runs it on fake tensors with FX's
    tracing flag set, and there it hands over to ``during`` in another thread and waits.
    """

    def __init__(self, during) -> None:
        self.during = during
        self.armed = False
        self.errors: list[BaseException] = []
        self.ran = 0

    def marker(self, x):
        # Only inside torch2xla's export: torch 2.14's Dynamo also calls allow_in_graph
        # functions on fake tensors (with FX's flag set) during its own trace.
        if self.armed and _lower._compiling > 0 and _fx_tracing():
            self.armed = False
            thread = threading.Thread(target=self._run)
            thread.start()
            thread.join(_WAIT)
            assert not thread.is_alive(), "the other thread did not finish"
        return x * 2

    def _run(self):
        try:
            self.during()
            self.ran += 1
        except BaseException as e:  # reported by the test
            self.errors.append(e)


def _compile_with(rendezvous: _Rendezvous):
    marker = torch._dynamo.allow_in_graph(rendezvous.marker)

    def fresh(x):
        return marker(x.cos()) + 1

    rendezvous.armed = True
    f = torch.compile(fresh, backend="xla")
    x = torch.randn(5)
    assert_same(f(x), x.cos() * 2 + 1)
    assert not rendezvous.armed, "the build never reached the marker"
    if rendezvous.errors:
        raise rendezvous.errors[0]
    assert rendezvous.ran == 1


def _hits(fn_name: str) -> int:
    return sum(g.hits for g in torch2xla.cache_info() if g.frame and fn_name in g.frame)


def test_a_compiled_call_runs_compiled_while_another_thread_exports():
    # FX's tracing flag is process-wide; on torch 2.13 a compiled call in another thread raised
    # "Detected that you are using FX to symbolically trace a dynamo-optimized function".
    def warm(x):
        return x.sin() + 1

    f = torch.compile(warm, backend="xla")
    x = torch.randn(4)
    f(x)
    hits = _hits("warm")
    results = []
    _compile_with(_Rendezvous(lambda: results.append(f(x))))
    assert_same(results[0], x.sin() + 1)
    assert _hits("warm") == hits + 1  # through the cached program, not eagerly


def test_training_and_jax_in_another_thread_while_a_graph_compiles():
    # The build ran with jaxlib's stack capture switched off for the whole process: arrays
    # other threads created meanwhile had no "user context", and jaxlib raised when one was
    # wrapped again after the build (a DLPack export here; the end of a backward in a loop).
    lin = torch.nn.Linear(6, 3)
    ref = copy.deepcopy(lin)

    def step(x):
        return lin(x).tanh().square().sum()

    f = torch.compile(step, backend="xla")
    x = torch.randn(4, 6)
    f(x).backward()
    lin.zero_grad()
    state = {}

    def during():
        loss = f(x)
        loss.backward()
        state["loss"] = loss.detach()
        state["array"] = jax.numpy.asarray(np.arange(3.0)) * 2

    _compile_with(_Rendezvous(during))
    assert_same(torch.from_dlpack(state["array"]).cpu(), torch.arange(3.0, dtype=torch.float32) * 2)
    expected = ref(x).tanh().square().sum()
    expected.backward()
    assert_same(state["loss"], expected.detach())
    assert_same(lin.weight.grad, ref.weight.grad)
    assert_same(lin.bias.grad, ref.bias.grad)


# --- many threads, many graphs, new shapes ----------------------------------------------------
class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x)))


def _wave(x, scale: float):
    return torch.sin(x) * scale + x.cos().cumsum(0)


def _loss(model, x):
    return model(x).tanh().square().mean()


def test_eight_threads_compile_and_run_concurrently():
    torch.manual_seed(0)
    mlp = _Mlp().eval()
    infer = torch.compile(mlp, backend="xla", dynamic=True)
    wave = torch.compile(_wave, backend="xla", dynamic=True)
    loss = torch.compile(_loss, backend="xla")
    errors: list[str] = []
    checked = [0]
    lock = threading.Lock()
    start = threading.Barrier(8)

    def task(rng: random.Random, model: torch.nn.Module):
        kind = rng.choice(["infer", "wave", "train", "fresh"])
        n = rng.choice([2, 3, 5, 8])
        if kind == "infer":
            x = torch.randn(n, 8)
            with torch.no_grad():
                assert_same(infer(x), mlp(x))
        elif kind == "wave":
            x = torch.randn(n, 3)
            assert_same(wave(x, 0.5), _wave(x, 0.5))
        elif kind == "train":
            x = torch.randn(n, 8)
            params = list(model.parameters())
            got = torch.autograd.grad(loss(model, x), params)
            want = torch.autograd.grad(_loss(model, x), params)
            assert_same(got, want)
        else:  # a graph of its own, compiled while the others run
            k = rng.randrange(5)  # Dynamo specializes k: up to five graphs of this lambda
            fresh = torch.compile(lambda x: (x * k).exp().sum(0), backend="xla")
            x = torch.randn(n, 2)
            assert_same(fresh(x), (x * k).exp().sum(0))

    def worker(seed: int):
        rng = random.Random(seed)
        model = _Mlp()
        torch.manual_seed(seed)
        start.wait(_WAIT)
        for _ in range(6):
            try:
                task(rng, model)
                with lock:
                    checked[0] += 1
            except BaseException:  # collected, reported below
                with lock:
                    errors.append(traceback.format_exc())

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert not any(t.is_alive() for t in threads), "threads still running: a deadlock?"
    assert not errors, f"{len(errors)} of 48 calls failed; the first:\n{errors[0]}"
    assert checked[0] == 48
