"""Reliability, session 24: calls that failed where eager PyTorch runs, and the lifecycle of
compiled objects (``scripts/probe_reliab24.py`` runs ~70 scenarios of threads, processes,
faults injected into the compile and call paths, lifetimes, copies, nested backends, user
exceptions, options and devices).

Found and fixed:
- ``torch.utils.swap_tensors`` refused the parameters of a module called compiled ("Cannot
  swap t1 because it has weakref associated with it"), so ``m.double()``/``m.to(...)`` with
  ``torch.__future__.set_swap_module_params_on_conversion(True)`` raised after a compiled call:
  our export's fake mode kept weak references to the real parameters (now cleared as Dynamo
  clears its own, ``capture/_lower.forget_real_tensors``), and the programs' view caches forget
  a tensor before a swap (``runtime/_swap.py``).
- A graph whose inputs are on a device XLA does not run (meta) raised ValueError where eager
  runs: it runs in eager with a ``FallbackWarning`` (``capture/_eager_inputs.py``).
- ``TORCH2XLA_STRICT=true`` was silently not strict (only "1" was read), and a misspelt value of
  any torch2xla switch was read silently: one parser, which warns (``_options.env_flag``).
- The persistent cache's key named the device of the first tensor argument, not the
  program's (a CPU 0-d tensor first beside CUDA tensors: ``_stored_key.device_of``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import gc
import multiprocessing
import pathlib
import threading
import traceback
import warnings
import weakref

import pytest
import torch
from torch import nn

import torch2xla
from tests._util import assert_same
from torch2xla._backend import FallbackWarning

_WAIT = 120  # seconds; a thread or child that takes longer hangs
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _fresh(src: str, name: str):
    """A function of its own code object (Dynamo caches per code object)."""
    ns = {"torch": torch}
    exec(compile(src, f"<test {name}>", "exec"), ns)
    return ns[name]


# --- swap_tensors ---------------------------------------------------------------------------
@contextlib.contextmanager
def _swapping():
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        yield
    finally:
        torch.__future__.set_swap_module_params_on_conversion(before)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))


def _swap_run(kind: str, compiled: bool) -> list:
    """What ``m.double()`` and ``m.float()`` with swapped parameters give after calls of ``m``
    (compiled or not): each step's outputs or its error's type."""
    m = _model()
    f = torch.compile(m, backend="xla", dynamic=kind == "dynamic") if compiled else m
    seen: list = []
    with _swapping():
        for n in (3, 5):
            x = torch.full((n, 4), 0.5) + torch.arange(4.0)
            out = f(x)
            seen.append(out.detach())
            if kind == "training":
                seen.append(torch.autograd.grad(out.square().sum(), list(m.parameters())))
            del out  # (its autograd graph holds the parameters: the swap would refuse them)
        for dtype in (torch.float64, torch.float32):
            try:
                m.to(dtype)
                seen.append(f(torch.ones(3, 4, dtype=dtype)).detach())
            except RuntimeError as e:
                seen.append(type(e))
    return seen


@pytest.mark.parametrize("kind", ["inference", "training", "dynamic"])
def test_module_dtype_change_with_swapped_parameters_after_compiled_calls(kind):
    # torch swaps parameters (``torch.utils.swap_tensors``) in ``m.double()`` with this switch,
    # and refuses tensors that have weak references; eager ran, compiled calls raised
    got, want = _swap_run(kind, True), _swap_run(kind, False)
    assert all(isinstance(w, torch.Tensor | tuple) for w in want)  # (eager swaps)
    assert_same(got, want)


def test_swap_tensors_of_a_parameter_after_compiled_calls():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 3), nn.Linear(4, 3)
    f = torch.compile(a, backend="xla")
    x = torch.randn(2, 4)
    f(x), f(x)  # (the second call caches the parameters' imported views)
    want_a, want_b = b(x), torch.nn.functional.linear(x, a.weight, a.bias)
    torch.utils.swap_tensors(a.weight, b.weight)
    assert_same(f(x), want_a - b.bias + a.bias)
    assert_same(b(x), want_b - a.bias + b.bias)


# --- devices XLA does not run -----------------------------------------------------------------
def test_meta_inputs_run_in_eager_with_a_warning():
    f = torch.compile(lambda x, s: x * s + 1, backend="xla")
    with pytest.warns(FallbackWarning, match="is on meta, a device XLA does not run"):
        out = f(torch.ones(3, device="meta"), torch.tensor(2.0))
    assert out.device.type == "meta" and out.shape == (3,)
    x = torch.ones(3)
    assert_same(f(x, torch.tensor(2.0)), x * 2 + 1)  # (CPU calls still compile)


def test_meta_module_runs_in_eager_and_strict_mode_names_the_input():
    with torch.device("meta"):
        m = nn.Linear(4, 2)
    with pytest.warns(FallbackWarning):
        out = torch.compile(m, backend="xla")(torch.ones(3, 4, device="meta"))
    assert out.device.type == "meta" and out.shape == (3, 2)
    torch._dynamo.reset()
    f = torch.compile(lambda x: x.sin(), backend="xla", options={"strict": True})
    with pytest.raises(torch2xla.CompileError, match="input 'x' is on meta"):
        f(torch.ones(3, device="meta"))


# --- environment switches -----------------------------------------------------------------------
def test_environment_switches_take_every_spelling_and_warn_on_others(monkeypatch):
    from torch2xla._options import STRICT_ENV, Options

    monkeypatch.setenv(STRICT_ENV, "true")
    assert Options.parse(None, None).strict  # (was read only as "1")
    monkeypatch.setenv(STRICT_ENV, "Off")
    assert not Options.parse(None, None).strict
    monkeypatch.setenv(STRICT_ENV, "strict")
    with pytest.warns(UserWarning, match="TORCH2XLA_STRICT='strict' is not one of"):
        assert not Options.parse(None, {"cache_size": 7}).strict


# --- threads ------------------------------------------------------------------------------------
def _threads(work, n: int) -> dict:
    results: dict = {}
    barrier = threading.Barrier(n)

    def worker(tid):
        barrier.wait(_WAIT)
        try:
            results[tid] = work(tid)
        except BaseException:  # (reported by the test)
            results[tid] = traceback.format_exc()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(_WAIT)
    assert not any(t.is_alive() for t in threads), "threads still running: a deadlock?"
    return results


def test_threads_with_their_own_grad_modes_share_a_first_call():
    # grad mode and inference mode are thread-local in torch: each thread's first call gets
    # the program of its own mode
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    f = torch.compile(lambda x: (x @ w).tanh(), backend="xla")
    modes = [torch.no_grad, torch.enable_grad, torch.inference_mode, contextlib.nullcontext]

    def work(tid):
        x = torch.full((3, 4), 0.1 * tid)
        with modes[tid % 4]():
            out = f(x)
            want = (x @ w).tanh()
        assert out.requires_grad == want.requires_grad
        assert out.is_inference() == want.is_inference()
        assert_same(out.detach(), want.detach())
        if out.requires_grad:
            assert_same(torch.autograd.grad(out.sum(), w), torch.autograd.grad(want.sum(), w))
        return "ok"

    results = _threads(work, 8)
    assert all(r == "ok" for r in results.values()), results


def test_a_thread_whose_compile_fails_leaves_the_signature_to_the_others(monkeypatch):
    from torch2xla.debug import _stages

    original, victim = _stages._stages, {}

    def failing(*a, **k):
        if victim.get("thread") is threading.current_thread():
            del victim["thread"]
            raise KeyboardInterrupt  # (in that thread only, in the middle of its build)
        return original(*a, **k)

    monkeypatch.setattr(_stages, "_stages", failing)
    f = torch.compile(_fresh("def g(x):\n    return x.cos() * 2 + 1\n", "g"), backend="xla")
    x = torch.randn(4, 3)

    def work(tid):
        if tid == 0:
            victim["thread"] = threading.current_thread()
        try:
            out = f(x)
        except KeyboardInterrupt:
            return "interrupted"
        assert_same(out, x.cos() * 2 + 1)
        return "ok"

    results = _threads(work, 4)
    assert sorted(results.values()) in (["interrupted", "ok", "ok", "ok"], ["ok"] * 4), results
    assert_same(f(x), x.cos() * 2 + 1)
    (graph,) = [g for g in torch2xla.cache_info() if g.frame and "<test g>" in g.frame][-1:]
    assert graph.entries == 1 and graph.misses == 1  # (the interrupted build cached nothing)


@pytest.mark.slow
def test_thread_pool_of_training_steps():
    torch.manual_seed(0)
    models = [nn.Linear(3, 3) for _ in range(4)]
    refs = copy.deepcopy(models)

    def train(ms, i, compiled):
        m = ms[i]
        step = (lambda x: m(x).square().mean()) if not compiled else None
        if compiled:
            step = torch.compile(lambda x: m(x).square().mean(), backend="xla")
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for k in range(3):
            opt.zero_grad()
            step(torch.full((4, 3), 0.1 * (i + k))).backward()
            opt.step()
        return [p.detach().clone() for p in m.parameters()]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: train(models, i, True), range(4)))
    want = [train(refs, i, False) for i in range(4)]
    assert_same(got, want)


# --- processes ----------------------------------------------------------------------------------
_POOL_F = None


def _pool_child(x):
    return _POOL_F(x).sum().item()


def test_process_pool_forked_after_a_compile_runs_in_eager():
    global _POOL_F
    if torch.cuda.is_initialized():
        pytest.skip("CUDA was initialized in this process before the fork")
    _POOL_F = torch.compile(lambda x: (x * 2).sin(), backend="xla")
    xs = [torch.full((3,), float(i)) for i in range(4)]
    _POOL_F(xs[0])
    with concurrent.futures.ProcessPoolExecutor(
        2, mp_context=multiprocessing.get_context("fork")
    ) as pool:
        got = list(pool.map(_pool_child, xs, timeout=_WAIT))
    want = [(x * 2).sin().sum().item() for x in xs]
    assert got == pytest.approx(want, abs=1e-6)


# --- faults inside the compile and call paths ---------------------------------------------------
def _fault_targets():
    from torch2xla import _backend, _entry
    from torch2xla.autodiff import _autograd
    from torch2xla.debug import _stages
    from torch2xla.guards import _cache
    from torch2xla.runtime import _program

    return {
        "export": (_backend, "lower"),
        "xla compile": (_stages, "_stages"),
        "program init": (_program.XlaProgram, "__init__"),
        "first run": (_entry.Entry, "__call__"),
        "cache insert": (_cache.ProgramCache, "insert"),
        "first backward": (_autograd, "_first_or_profiled_backward"),
    }


@pytest.mark.parametrize("where", list(_fault_targets()))
def test_an_interrupt_anywhere_in_a_first_call_leaves_the_next_call_working(where, monkeypatch):
    owner, name = _fault_targets()[where]
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    hits = []

    def interrupted(*a, **k):
        if not hits:
            hits.append(1)
            raise KeyboardInterrupt
        return original(*a, **k)

    monkeypatch.setattr(owner, name, interrupted)
    f = torch.compile(
        _fresh("def g(x, w):\n    return (x @ w).tanh().sum(-1)\n", "g"), backend="xla"
    )
    x, w = torch.randn(3, 4), torch.randn(4, 2, requires_grad=True)
    want = (x @ w).tanh().sum(-1)
    (want_gw,) = torch.autograd.grad(want.sum(), w)
    with pytest.raises(KeyboardInterrupt):
        torch.autograd.grad(f(x, w).sum(), w)
    assert hits
    for _ in range(2):
        out = f(x, w)
        assert_same(out, want)
        assert_same(torch.autograd.grad(out.sum(), w), (want_gw,))
    # a build in another thread: the compile lock was released
    done = []
    t = threading.Thread(target=lambda: done.append(torch.compile(torch.cos, backend="xla")(x)))
    t.start()
    t.join(_WAIT)
    assert done and not t.is_alive()


# --- lifetimes ----------------------------------------------------------------------------------
_KEPT = {
    "inference": (lambda x: x.sin() * 2, False, {}),
    "training": (lambda x: x.sin() * 2, True, {}),
    "mutated": (lambda x: x.add_(1).sum(), False, {}),
    "dynamic": (lambda x: x.sin().sum(0), False, {"dynamic": True}),
    "split graph": (lambda x: x[x > 0].sum() + x.nonzero().sum(), False, {}),
    "returned": (lambda x: (x, x[1:]), False, {}),
}


@pytest.mark.parametrize("kind", list(_KEPT))
def test_inputs_are_not_kept_alive_by_our_caches(kind):
    fn, train, kw = _KEPT[kind]
    f = torch.compile(fn, backend="xla", **kw)
    for i in range(3):
        x = torch.randn(4 + i, 3, requires_grad=train)
        ref = weakref.ref(x)
        out = f(x)
        if train:
            out.sum().backward()
        del out, x
        gc.collect()
        assert ref() is None, f"call {i}: the input is still alive"


def test_backward_after_reset_clear_caches_and_deleting_the_module():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    ref = copy.deepcopy(m)
    x = torch.randn(3, 4, requires_grad=True)
    out = torch.compile(m, backend="xla")(x)
    params = list(m.parameters())
    del m
    torch._dynamo.reset()
    torch2xla.clear_caches()
    gc.collect()
    got = torch.autograd.grad(out.sum(), [x, *params])
    assert_same(got, torch.autograd.grad(ref(x).sum(), [x, *ref.parameters()]))


# --- user exceptions ----------------------------------------------------------------------------
def _over(x, limit):
    y = x.sum()
    if y > limit:
        raise ValueError(f"sum {y.item():.1f} over {limit}")  # THE USER'S LINE
    return y * 2


def test_a_user_exception_keeps_its_type_message_and_line_and_the_next_call_runs():
    f = torch.compile(_over, backend="xla")
    lines = pathlib.Path(__file__).read_text().splitlines()
    line = next(i + 1 for i, s in enumerate(lines) if s.endswith("# THE USER'S LINE"))
    for _ in range(2):
        with pytest.raises(ValueError, match=r"^sum 3\.0 over 1\.0$") as info:
            f(torch.ones(3), 1.0)
        frames = [fr for fr in info.traceback if str(fr.path) == __file__]
        assert frames[-1].lineno + 1 == line
        assert f(-torch.ones(3), 1.0).item() == -6.0


def test_a_fallback_warning_is_said_once_per_graph():
    f = torch.compile(lambda x: x.nonzero().float().sum() + x.sum(), backend="xla")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(4):
            f(torch.randn(3, 2 + i % 2))
    assert len([w for w in caught if "torch2xla" in str(w.message)]) <= 1


# --- CPU 0-d tensors beside CUDA tensors ---------------------------------------------------------
@cuda
@pytest.mark.parametrize("first", [True, False])
def test_a_cpu_scalar_beside_cuda_tensors_runs_on_the_gpu(first):
    def f(c, x):
        return x.sin() * c + 1, c * 3

    c, x = torch.tensor(2.0), torch.randn(3, 4, device="cuda")
    g = torch.compile(f if first else (lambda x, c: f(c, x)), backend="xla")
    out = g(c, x) if first else g(x, c)
    assert_same(out, f(c, x))


@cuda
def test_a_cpu_step_counter_beside_cuda_tensors_counts_and_trains():
    def step(n, x, w):
        n.add_(1)
        return (x @ w * n).sum()

    x, w = torch.randn(3, 4, device="cuda"), torch.randn(4, 2, device="cuda", requires_grad=True)
    n, n_ref = torch.tensor(0.0), torch.tensor(0.0)
    f = torch.compile(step, backend="xla")
    for _ in range(3):
        got = f(n, x, w)
        want = step(n_ref, x, w)
        assert_same(got, want)
        assert_same(torch.autograd.grad(got, w), torch.autograd.grad(want, w))
    assert_same(n, n_ref)


@cuda
def test_a_cpu_one_element_tensor_beside_cuda_tensors_raises_as_eager():
    f = torch.compile(lambda c, x: x * c, backend="xla")
    c, x = torch.ones(1), torch.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x * c
    with pytest.raises(RuntimeError):  # (Dynamo's fake tensors raise it: its own message)
        f(c, x)
