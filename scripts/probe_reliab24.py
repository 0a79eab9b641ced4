"""Probe torch2xla's reliability, session 24: crashes where eager runs, and the lifecycle of
compiled objects in one process and across processes.

    PYTHONPATH=. python scripts/probe_reliab24.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_reliab24.py   # torch's own differences

Classes (``scripts/probe_reliability.py`` of session 19 holds the earlier ~125 scenarios):
threads (a first call racing a compile, steady calls, per-thread shapes, grad modes, autocast
and inference mode, which are thread-local in torch, a thread whose compile raises, thread
pools), processes (a process pool forked after a compile), faults injected into every step of
the compile and call paths (``KeyboardInterrupt`` and an internal error: the next call must
work and nothing half-made stays cached), lifetimes (inputs, outputs and modules freed;
``torch._dynamo.reset()``/``clear_caches()``/deletion between forward and backward; many calls
with changing shapes), copies (``copy.copy``, ``deepcopy``, pickle, ``nn.Module.compile``),
state dicts, dtype changes after compile, nested compiled functions of other backends,
recursion, generators and context managers inside compiled code, user exceptions (type,
message, the user's line in the traceback, the next call), warnings said once, option errors,
and devices (meta tensors beside CPU ones).

The harness is ``scripts/probe_guards.py``'s: a ``@scenario`` is ``fn(C, call)``, run once with
``C`` compiling and once with ``C`` the identity, every observation compared strictly; a
``@checked`` scenario checks itself and returns None (ok) or what went wrong.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import gc
import io
import multiprocessing
import os
import pathlib
import pickle
import sys
import threading
import traceback
import warnings
import weakref

import torch
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")

import probe_guards as harness  # (the harness: describe, same, observe, compare)

import torch2xla

warnings.simplefilter("ignore")
BACKEND = harness.BACKEND
rand = harness.rand
SCENARIOS: dict = {}
SELF_CHECKED: dict = {}
_WAIT = 120  # seconds; a thread or child that takes longer hangs


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def checked(fn):
    SELF_CHECKED[fn.__name__] = fn
    return fn


def compiled(f, **kw):
    kw.setdefault("backend", BACKEND)
    return torch.compile(f, **kw)


def fresh(src: str, name: str, **glb):
    """A function of its own code object (Dynamo caches per code object: a lambda made in a
    loop shares one, and hits the recompile limit)."""
    ns = {"torch": torch, "nn": nn, **glb}
    exec(compile(src, f"<probe {name}>", "exec"), ns)  # noqa: S102  (the probe's own source)
    return ns[name]


def close(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)


# ============================================================================================
# threads
def _threads(work, n=4) -> dict:
    """``work(tid)`` in ``n`` threads started together: tid -> result, error or 'hung'."""
    results: dict = {}
    barrier = threading.Barrier(n)

    def worker(tid):
        barrier.wait(_WAIT)
        try:
            results[tid] = work(tid)
        except BaseException as e:  # noqa: BLE001  (the error is an observation)
            results[tid] = e

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(_WAIT)
    return {tid: results.get(tid, "hung") for tid in range(n)}


def _record_threads(call, work, n=4):
    for tid, r in sorted(_threads(work, n).items()):
        call.rec(f"thread {tid}", r)


@scenario
def threads_first_call_training_module(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    f = C(m)

    def work(tid):
        x = rand(3, 4, seed=tid, rg=True)
        out = f(x)
        (gx,) = torch.autograd.grad(out.square().sum(), x)
        return [out.detach(), gx]

    _record_threads(call, work, n=6)


@scenario
def threads_steady_calls(C, call):
    f = C(lambda x, y: (x @ y).relu().sum(-1))
    y = rand(4, 4, seed=9)
    f(rand(3, 4), y)

    def work(tid):
        return [f(rand(3, 4, seed=tid * 100 + i), y) for i in range(40)][::13]

    _record_threads(call, work)


@scenario
def threads_each_its_own_shape(C, call):
    f = C(lambda x: x.softmax(-1).cumsum(0) * 2)

    def work(tid):
        return [f(rand(2 + tid, 3 + i, seed=tid)) for i in range(3)]

    _record_threads(call, work)


@scenario
def threads_each_its_own_shape_dynamic(C, call):
    f = C(lambda x: x.softmax(-1).cumsum(0) * 2, dynamic=True)

    def work(tid):
        return [f(rand(2 + tid, 3 + i, seed=tid)) for i in range(3)]

    _record_threads(call, work)


@scenario
def threads_grad_modes_first_call(C, call):
    # grad mode is thread-local: each thread's first call compiles (or finds) its own program
    w = rand(4, 4, rg=True)
    f = C(lambda x: (x @ w).tanh())

    def work(tid):
        x = rand(3, 4, seed=tid)
        modes = [torch.no_grad, torch.enable_grad, torch.inference_mode, contextlib.nullcontext]
        with modes[tid % 4]():
            out = f(x)
        got = [out.requires_grad, out.grad_fn is None, out.is_inference(), out.detach().clone()]
        if out.requires_grad:
            got.append(torch.autograd.grad(out.sum(), w)[0])
        return got

    _record_threads(call, work, n=8)


@scenario
def threads_autocast_and_no_autocast_first_call(C, call):
    w = rand(4, 4)
    f = C(lambda x: (x @ w).softmax(-1))

    def work(tid):
        dtype = [torch.bfloat16, torch.float16, None][tid % 3]
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            return f(rand(3, 4, seed=tid))

    _record_threads(call, work, n=6)


@scenario
def threads_module_train_and_eval_flags(C, call):
    # a module's training flag is shared by all threads (not thread-local): set before
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).eval()
    f = C(m)

    def work(tid):
        with torch.no_grad() if tid % 2 else contextlib.nullcontext():
            out = f(rand(5, 4, seed=tid))
        return [out.detach(), out.requires_grad]

    _record_threads(call, work)


@scenario
def threads_thread_pool_map(C, call):
    f = C(lambda x: (x * 3).sin().sum(0))
    xs = [rand(3, 2 + i % 3, seed=i) for i in range(24)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        call("map", lambda: list(pool.map(f, xs)))


@scenario
def threads_thread_pool_training_steps(C, call):
    torch.manual_seed(0)
    models = [nn.Linear(3, 3) for _ in range(4)]
    steps = [C(lambda x, m=m: m(x).square().mean()) for m in models]

    def train(i):
        opt = torch.optim.SGD(models[i].parameters(), lr=0.1)
        for k in range(3):
            opt.zero_grad()
            steps[i](rand(4, 3, seed=i * 10 + k)).backward()
            opt.step()
        return [p.detach().clone() for p in models[i].parameters()]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        call("trained", lambda: list(pool.map(train, range(4))))


@scenario
def threads_forward_ad_in_one_thread(C, call):
    # (forward AD's levels are process-wide in torch: one thread opens one at a time)
    import torch.autograd.forward_ad as fwad

    f = C(lambda x: x.sin() * 2)
    f(rand(3))

    def work(tid):
        x = rand(3, seed=tid)
        if tid == 1:
            with fwad.dual_level():
                d = fwad.make_dual(x, torch.ones(3))
                p, t = fwad.unpack_dual(f(d))
                return [p.clone(), t.clone()]
        return [f(x) for _ in range(5)]

    _record_threads(call, work)


@checked
def thread_whose_compile_raises_does_not_poison_the_others():
    """One thread's build raises (injected into its XLA compile, in that thread only): every
    thread gets eager's results (the failing one through eager, with a FallbackWarning), and
    the next call works."""
    from torch2xla.guards import _persistent as _stages  # (its compile_any: the xla stage)

    original = _stages.compile_any
    victim: dict = {"thread": None}

    def failing(*a, **k):
        if threading.current_thread() is victim["thread"]:
            victim["thread"] = None
            raise RuntimeError("injected failure in one thread")
        return original(*a, **k)

    _stages.compile_any = failing
    try:
        f = compiled(fresh("def g(x):\n    return x.cos() * 2 + 1\n", "g"))
        x = rand(4, 3)

        def work(tid):
            if tid == 0:
                victim["thread"] = threading.current_thread()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = f(x)
            return out, [str(w.message)[:80] for w in caught]

        results = _threads(work)
        for tid, r in results.items():
            if isinstance(r, BaseException) or r == "hung":
                return f"thread {tid}: {r!r}"
            if not close(r[0], x.cos() * 2 + 1):
                return f"thread {tid}: wrong result"
        again = f(x)
        if not close(again, x.cos() * 2 + 1):
            return "wrong result after"
    finally:
        _stages.compile_any = original
    return None


# ============================================================================================
# processes
def _pool_child_sum(x):
    return _POOL_F(x).sum().item()


_POOL_F = None


@checked
def process_pool_forked_after_compile():
    global _POOL_F
    if torch.cuda.is_initialized():
        return None
    _POOL_F = compiled(lambda x: (x * 2).sin())
    xs = [torch.full((3,), float(i)) for i in range(4)]
    want = [(x * 2).sin().sum().item() for x in xs]
    _POOL_F(xs[0])
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        fut = pool.map(_pool_child_sum, xs, timeout=_WAIT)
        got = list(fut)
    if any(abs(a - b) > 1e-5 for a, b in zip(got, want)):
        return f"children computed {got}, eager {want}"
    return None


# ============================================================================================
# faults inside our compile and call paths: the next call works, nothing half-made is cached
def _targets():
    from torch2xla import _backend, _entry
    from torch2xla.autodiff import _autograd, _eager_backward
    from torch2xla.debug import _stages
    from torch2xla.guards import _cache, _graph, _persistent
    from torch2xla.runtime import _interop, _program, _stored

    return [
        ("GraphGuards.__init__", _graph.GraphGuards, "__init__"),
        ("lower", _backend, "lower"),
        ("run_passes", _stages, "run_passes"),
        ("find_unsupported", _backend, "find_unsupported"),
        ("XlaProgram.__init__", _program.XlaProgram, "__init__"),
        ("backward_errors", _eager_backward, "backward_errors"),
        ("_stages (trace/lower/compile)", _stages, "_stages"),
        ("compile_any", _persistent, "compile_any"),
        ("stored.remember", _stored, "remember"),
        ("Entry.__call__", _entry.Entry, "__call__"),
        ("XlaProgram.__call__", _program.XlaProgram, "__call__"),
        ("to_torch_cpu", _interop, "to_torch_cpu"),
        ("ProgramCache.insert", _cache.ProgramCache, "insert"),
        ("first backward", _autograd, "_first_or_profiled_backward"),
        ("backward", _autograd, "_backward"),
    ]


class _Injected(RuntimeError):
    pass


@contextlib.contextmanager
def _inject(owner, name, exc):
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    state = {"armed": True, "hit": 0}

    def failing(*a, **k):
        if state["armed"]:
            state["armed"] = False
            state["hit"] += 1
            raise exc
        return original(*a, **k)

    setattr(owner, name, failing)
    try:
        yield state
    finally:
        setattr(owner, name, original)


def _fault_case(label, owner, name, exc, train: bool, dynamic: bool) -> str | None:
    torch._dynamo.reset()
    src = "def g(x, w):\n    return (x @ w).tanh().sum(-1)\n"
    f = compiled(fresh(src, "g"), dynamic=dynamic)
    x, w = rand(3, 4), rand(4, 2, seed=1, rg=train)
    want = (x @ w).tanh().sum(-1)
    (want_gw,) = torch.autograd.grad(want.sum(), w) if train else (None,)
    with _inject(owner, name, exc) as state, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        first = None
        try:
            out = f(x, w)
            if train:
                (gw,) = torch.autograd.grad(out.sum(), w)
            first = out
        except BaseException as e:  # noqa: BLE001
            # (our error, ours translated, or Dynamo's wrapping of a backend's error)
            expected = (type(exc), torch2xla.CompileError, torch._dynamo.exc.BackendCompilerFailed)
            if not isinstance(e, expected):
                return f"{label}: raised {type(e).__name__}: {str(e)[:200]}"
        if not state["hit"]:
            return None  # (not on this path)
    if first is not None and not close(first.detach(), want.detach()):
        return f"{label}: the call that saw the fault returned a wrong result"
    for i in range(2):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = f(x, w)
                if train:
                    (gw,) = torch.autograd.grad(out.sum(), w)
        except BaseException as e:  # noqa: BLE001
            return f"{label}: call {i} after the fault raised {type(e).__name__}: {str(e)[:300]}"
        if not close(out.detach(), want.detach()):
            return f"{label}: call {i} after the fault: wrong result"
        if train and not close(gw, want_gw):
            return f"{label}: call {i} after the fault: wrong gradient"
    # a new signature still compiles, and another graph in another thread
    x2 = rand(5, 4, seed=3)
    try:
        out = f(x2, w)
    except BaseException as e:  # noqa: BLE001
        return f"{label}: a new signature after the fault raised {type(e).__name__}: {e}"
    if not close(out.detach(), (x2 @ w).tanh().sum(-1).detach()):
        return f"{label}: a new signature after the fault: wrong result"
    res: list = []
    t = threading.Thread(target=lambda: res.append(compiled(lambda t: t.cos())(x)))
    t.start()
    t.join(_WAIT)
    if t.is_alive() or not res:
        return f"{label}: a build in another thread hangs after the fault"
    return None


def _faults(exc) -> str | None:
    bad = []
    for train in (False, True):
        for dynamic in (False, True):
            for label, owner, name in _targets():
                why = _fault_case(label, owner, name, exc, train, dynamic)
                if why:
                    bad.append(f"[train={train} dynamic={dynamic}] {why}")
    return "\n      ".join(bad) or None


@checked
def faults_keyboard_interrupt_everywhere():
    return _faults(KeyboardInterrupt())


@checked
def faults_internal_error_everywhere():
    return _faults(_Injected("injected internal error"))


# ============================================================================================
# lifetimes
def _alive_inputs(fn, make, train=False, **kw) -> list[int]:
    f = compiled(fn, **kw)
    counts = []
    for i in range(3):
        args = make(i)
        refs = [weakref.ref(a) for a in args if isinstance(a, torch.Tensor)]
        out = f(*args)
        if train:
            (out if isinstance(out, torch.Tensor) else out[0]).sum().backward()
        del out, args
        gc.collect()
        counts.append(sum(r() is not None for r in refs))
    return counts


@checked
def inputs_are_not_kept_alive_by_caches():
    cases = {
        "inference": (lambda x: x.sin() * 2, lambda i: (torch.randn(4, 3),), {}),
        "training": (
            lambda x: x.sin() * 2,
            lambda i: (torch.randn(4, 3, requires_grad=True),),
            {"train": True},
        ),
        "training without backward": (
            lambda x: x.sin() * 2,
            lambda i: (torch.randn(4, 3, requires_grad=True),),
            {},
        ),
        "mutated": (lambda x: x.add_(1).sum(), lambda i: (torch.randn(4, 3),), {}),
        "dynamic": (
            lambda x: x.sin().sum(0),
            lambda i: (torch.randn(4 + i, 3),),
            {"dynamic": True},
        ),
        "split": (lambda x: x[x > 0].sum() + x.nonzero().sum(), lambda i: (torch.randn(4, 3),), {}),
        "dropout": (
            lambda x: nn.functional.dropout(x, 0.5),
            lambda i: (torch.randn(4, 3, requires_grad=True),),
            {"train": True},
        ),
        "returned": (lambda x: (x, x[1:]), lambda i: (torch.randn(4, 3),), {}),
        "int and float": (
            lambda x, n, s: x * n * s,
            lambda i: (torch.randn(4, 3), i + 2, i + 0.5),
            {},
        ),
    }
    bad = []
    for name, (fn, make, kw) in cases.items():
        torch._dynamo.reset()
        counts = _alive_inputs(fn, make, **kw)
        if any(counts):
            bad.append(f"{name}: {counts} inputs alive after their calls")
    return "; ".join(bad) or None


@checked
def replaced_parameters_are_freed():
    m = nn.Linear(4, 4)
    f = compiled(m)
    x = torch.randn(2, 4)
    f(x).sum().backward()
    old = weakref.ref(m.weight)
    m.weight = nn.Parameter(torch.randn(4, 4))
    out = f(x)
    gc.collect()
    if old() is not None:
        return "the replaced parameter is still alive"
    if not close(out, x @ m.weight.t() + m.bias):
        return "the new parameter was not used"
    return None


def _graphs_alive() -> int:
    from torch2xla._backend import CompiledGraph

    gc.collect()
    return sum(isinstance(o, CompiledGraph) for o in gc.get_objects())


@checked
def many_calls_with_changing_shapes_bounded():
    import jax

    f = compiled(lambda x: (x.softmax(-1) * x.shape[0]).sum(0), dynamic=True)
    for n in range(1, 40):
        f(torch.randn(n, 3))
    gc.collect()
    base_objs, base_arrays = len(gc.get_objects()), len(jax.live_arrays())
    for k in range(1000):
        f(torch.randn(1 + k % 39, 3))
    gc.collect()
    objs, arrays = len(gc.get_objects()), len(jax.live_arrays())
    if objs > base_objs + 500:
        return f"Python objects grew {base_objs} -> {objs} over 1000 calls"
    if arrays > base_arrays + 8:
        return f"live JAX arrays grew {base_arrays} -> {arrays} over 1000 calls"
    return None


@checked
def many_calls_past_the_recompile_limit_bounded():
    f = compiled(lambda x: (x.softmax(-1) * 2).sum(0))
    for n in range(1, 20):
        f(torch.randn(n, 3))
    gc.collect()
    base = len(gc.get_objects())
    for k in range(300):
        out = f(torch.randn(1 + k % 19, 3))
    gc.collect()
    grown = len(gc.get_objects()) - base
    if grown > 500:
        return f"Python objects grew by {grown} over 300 calls"
    return None if out.shape == (3,) else "wrong shape"


@scenario
def reset_between_forward_and_backward(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    f = C(m)
    x = rand(3, 4, rg=True)
    out = f(x)
    torch._dynamo.reset()
    torch2xla.clear_caches()
    gc.collect()
    call("backward", lambda: torch.autograd.grad(out.sum(), [x, *m.parameters()]))
    call("again", lambda: f(x))


@scenario
def module_deleted_between_forward_and_backward(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    f = C(m)
    x = rand(3, 4, rg=True)
    out = f(x)
    params = list(m.parameters())
    del f, m
    gc.collect()
    call("backward", lambda: torch.autograd.grad(out.sum(), [x, *params]))


@scenario
def backward_twice_after_reset_with_retain_graph(C, call):
    w = rand(4, 4, rg=True)
    f = C(lambda x: (x @ w).sin().sum())
    out = f(rand(3, 4))
    call("first", lambda: torch.autograd.grad(out, w, retain_graph=True))
    torch._dynamo.reset()
    torch2xla.clear_caches()
    call("second", lambda: torch.autograd.grad(out, w))


@scenario
def reset_then_call_again_many_times(C, call):
    m = nn.Linear(3, 3)
    f = C(m)
    x = rand(2, 3)
    for i in range(4):
        call(f"call {i}", lambda: f(x))
        torch._dynamo.reset()


# ============================================================================================
# copies, pickles, state dicts, dtype changes
@scenario
def copy_copy_of_compiled_module(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    f = C(m)
    x = rand(3, 4)
    call("first", lambda: f(x))
    g = copy.copy(f)
    call("copy", lambda: g(x))
    with torch.no_grad():
        m.weight.mul_(2)
    call("copy sees the shared weight", lambda: g(x))
    call("original", lambda: f(x))


@scenario
def deepcopy_of_compiled_module_trains_apart(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    f = C(m)
    x = rand(5, 4)
    f(x).sum().backward()
    g = copy.deepcopy(f)
    inner = g._orig_mod if hasattr(g, "_orig_mod") else g
    opt = torch.optim.SGD(inner.parameters(), lr=0.5)
    for _ in range(2):
        opt.zero_grad()
        g(x).sum().backward()
        opt.step()
    call("copy", lambda: g(x))
    call("original", lambda: f(x))
    call("original grads", lambda: [p.grad for p in m.parameters()])


@scenario
def module_compile_method_then_deepcopy_and_pickle(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    x = rand(3, 4)
    if C(m) is not m:  # (the compiled run: the module compiles its own forward in place)
        m.compile(backend=BACKEND)
    call("first", lambda: m(x))
    g = copy.deepcopy(m)
    call("deepcopy", lambda: g(x))
    h = pickle.loads(pickle.dumps(m))
    call("pickled", lambda: h(x))
    call("state dict keys", lambda: sorted(m.state_dict()))


@checked
def pickle_of_compiled_module_as_eager_backend():
    """Pickling a compiled module (``OptimizedModule``) and ``torch.save`` of it: whatever
    torch's eager backend does (works or raises), ours does the same."""
    outcomes = []
    for backend in ("eager", BACKEND):
        torch._dynamo.reset()
        torch.manual_seed(0)
        f = torch.compile(nn.Linear(4, 2), backend=backend)
        x = torch.ones(3, 4)
        f(x)
        got = []
        for how in ("pickle", "torch.save"):
            try:
                if how == "pickle":
                    g = pickle.loads(pickle.dumps(f))
                else:
                    buf = io.BytesIO()
                    torch.save(f, buf)
                    buf.seek(0)
                    g = torch.load(buf, weights_only=False)
                got.append((how, "ok", g(x).detach().tolist()))
            except Exception as e:  # noqa: BLE001  (the error is the outcome)
                got.append((how, type(e).__name__))
        outcomes.append(got)
    return None if outcomes[0] == outcomes[1] else f"{outcomes[1]} vs eager backend {outcomes[0]}"


@checked
def state_dict_keys_as_eagers_compiled_module():
    """``_orig_mod.`` prefixes as torch.compile gives with the eager backend, and a state dict
    loaded back (either way round) gives the same results."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    x = torch.randn(3, 4)
    ours = compiled(m)
    ours(x)
    theirs = torch.compile(m, backend="eager")
    if list(ours.state_dict()) != list(theirs.state_dict()):
        return f"keys {list(ours.state_dict())} vs eager backend {list(theirs.state_dict())}"
    m2 = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    c2 = compiled(m2)
    c2.load_state_dict(ours.state_dict())
    m.eval(), m2.eval()
    if not close(c2(x), m(x)):
        return "loading a compiled module's state dict into a compiled module"
    m3 = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).eval()
    m3.load_state_dict(m.state_dict())
    c3 = compiled(m3)
    if not close(c3(x), m(x)):
        return "loading a plain state dict then compiling"
    return None


@scenario
def module_double_half_and_back_after_compile(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    f = C(m)
    x = rand(3, 4)
    call("float", lambda: f(x))
    m.double()
    call("double", lambda: f(x.double()))
    m.to(torch.bfloat16)
    call("bfloat16", lambda: f(x.bfloat16()))
    m.float()
    call("float again", lambda: f(x))
    out = f(x)
    # (not ``out.sum()``: a layer norm's sum does not depend on the weight before it, whose
    # gradient is zero up to round-off, of either sign)
    w = torch.arange(12.0).reshape(3, 4)
    call("backward", lambda: torch.autograd.grad((out * w).sum(), list(m.parameters())))


@scenario
def module_to_device_meta_and_back_raises_as_eager(C, call):
    m = nn.Linear(4, 2)
    f = C(m)
    x = rand(3, 4)
    call("cpu", lambda: f(x))
    m.to_empty(device="meta")
    call("meta", lambda: tuple(f(x.to("meta")).shape))


@contextlib.contextmanager
def _swapping():
    """``torch.__future__.set_swap_module_params_on_conversion(True)``: ``nn.Module._apply``
    and ``load_state_dict`` swap parameters with ``torch.utils.swap_tensors``, which refuses a
    tensor that has weak references."""
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        yield
    finally:
        torch.__future__.set_swap_module_params_on_conversion(before)


_SWAP_GRAPHS = {
    "plain": lambda m, x: m(x).relu(),
    "split": lambda m, x: m(x)[m(x) > 0].sum() + m(x).nonzero().sum(),
    "cut": lambda m, x: m(x).sum() * m(x).nonzero().shape[0],
}


def _swap_case(C, call, name, dynamic=False, train=False):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    body = _SWAP_GRAPHS[name]
    f = C(lambda x: body(m, x), dynamic=dynamic)
    with _swapping():
        for i, n in enumerate((3, 5)):
            x = rand(n, 4, seed=i)
            out = call(f"call {i}", lambda x=x: f(x))
            if train and isinstance(out, torch.Tensor) and out.requires_grad:
                call(
                    f"grad {i}",
                    lambda out=out: torch.autograd.grad(out.sum(), list(m.parameters())),
                )
        call("double", lambda: m.double() and None)
        call("after double", lambda: f(rand(3, 4).double()))
        call("to_empty and back", lambda: m.to_empty(device="cpu").float() and None)
        call("after float", lambda: f(rand(3, 4)).shape)


@scenario
def swap_tensors_after_calls(C, call):
    _swap_case(C, call, "plain")


@scenario
def swap_tensors_after_training_calls(C, call):
    _swap_case(C, call, "plain", train=True)


@scenario
def swap_tensors_after_dynamic_calls(C, call):
    _swap_case(C, call, "plain", dynamic=True)


@scenario
def swap_tensors_after_split_graph_calls(C, call):
    _swap_case(C, call, "split", train=True)


@scenario
def swap_tensors_after_cut_graph_calls(C, call):
    _swap_case(C, call, "cut")


@scenario
def swap_tensors_directly_after_calls(C, call):
    torch.manual_seed(0)
    a, b = nn.Linear(4, 3), nn.Linear(4, 3)
    f = C(a)
    x = rand(2, 4)
    call("a", lambda: f(x))
    call("a again", lambda: f(x))
    call("swap", lambda: torch.utils.swap_tensors(a.weight, b.weight))
    call("a swapped", lambda: f(x))
    call("b", lambda: b(x))


@scenario
def swap_tensors_of_an_optimizer_step(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 4)
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    step = C(opt.step)
    with _swapping():
        for i in range(2):
            m(rand(3, 4, seed=i)).sum().backward()
            call(f"step {i}", lambda: step())
            opt.zero_grad()
        call("double", lambda: m.double() and None)
        call("params", lambda: list(m.parameters()))


# ============================================================================================
# nested compiled functions, recursion, generators, context managers
@scenario
def nested_other_backends_inside(C, call):
    inner_eager = torch.compile(lambda t: t.sin() * 2, backend="eager")
    inner_aot = torch.compile(lambda t: t.cos() + 1, backend="aot_eager")
    f = C(lambda x: inner_eager(x) + inner_aot(x).exp())
    x = rand(3, 4, rg=True)
    out = call("fwd", lambda: f(x))
    call("grad", lambda: torch.autograd.grad(out.sum(), x))


@scenario
def nested_ours_inside_other_backends(C, call):
    inner = C(lambda t: t.sin() * 2)
    outer_eager = torch.compile(lambda x: inner(x).exp().sum(0), backend="eager")
    outer_aot = torch.compile(lambda x: inner(x * 2).tanh(), backend="aot_eager")
    x = rand(3, 4, rg=True)
    call("eager outside", lambda: outer_eager(x))
    out = call("aot outside", lambda: outer_aot(x))
    call("grad", lambda: torch.autograd.grad(out.sum(), x))


@scenario
def nested_inductor_both_ways(C, call):
    inner_ind = torch.compile(lambda t: t.sin() * 2, backend="inductor")
    f = C(lambda x: inner_ind(x).exp() + 1)
    inner = C(lambda t: t.cos() * 3)
    outer_ind = torch.compile(lambda x: inner(x).tanh().sum(0), backend="inductor")
    x = rand(3, 4, rg=True)
    out = call("inductor inside", lambda: f(x))
    call("grad inside", lambda: torch.autograd.grad(out.sum(), x))
    out = call("inductor outside", lambda: outer_ind(x))
    call("grad outside", lambda: torch.autograd.grad(out.sum(), x))


@scenario
def nested_disabled_function_inside(C, call):
    @torch.compiler.disable
    def helper(t):
        return t.numpy().sum() * t

    f = C(lambda x: helper(x.detach() * 2) + x)
    x = rand(3)
    call("call", lambda: f(x))
    call("again", lambda: f(x + 1))


def _depth_sum(x, n):
    return x if n == 0 else _depth_sum(x.sin(), n - 1) + n


@scenario
def recursion_inside_compiled(C, call):
    f = C(lambda x, n: _depth_sum(x, n))
    x = rand(4)
    for n in (0, 3, 5, 3):
        call(f"depth {n}", lambda n=n: f(x, n))


_REC = {}


@scenario
def compiled_function_recursing_through_itself(C, call):
    def fact(x, n):
        return x if n <= 1 else x * _REC["f"](x, n - 1)

    _REC["f"] = C(fact)
    x = rand(3)
    call("n=4", lambda: _REC["f"](x, 4))
    call("n=2", lambda: _REC["f"](x, 2))


@scenario
def generators_inside_compiled(C, call):
    def gen(x):
        for i in range(3):
            yield x * i

    def f(x):
        total = sum(gen(x))
        pairs = list(zip(gen(x), gen(x.cos())))
        return total + sum(a * b for a, b in pairs)

    g = C(f)
    call("call", lambda: g(rand(4)))


@scenario
def compiled_generator_function(C, call):
    def gen(x):
        y = x * 2
        yield y
        yield y.sin()

    g = C(gen)
    call("list", lambda: list(g(rand(3))))


@scenario
def context_managers_inside_compiled(C, call):
    w = rand(3, 3, rg=True)

    @contextlib.contextmanager
    def scaled(box):
        box.append(2.0)
        yield
        box.pop()

    def f(x):
        with torch.no_grad():
            a = x @ w
        with torch.enable_grad():
            b = (x @ w).sum()
        box = []
        with scaled(box):
            c = x * box[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            d = x @ w
        return a, b, c, d, len(box)

    g = C(f)
    out = call("call", lambda: g(rand(2, 3)))
    if isinstance(out, tuple):
        call("grad", lambda: torch.autograd.grad(out[1], w))


@scenario
def fork_rng_inside_compiled(C, call):
    def f(x):
        with torch.random.fork_rng():
            torch.manual_seed(3)
            a = torch.rand(3)
        return x + a + torch.rand(3)

    g = C(f)
    torch.manual_seed(0)
    call("first", lambda: g(rand(3)))
    call("second", lambda: g(rand(3)))


@scenario
def compiled_inside_checkpoint(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
    f = C(m)
    x = rand(3, 4, rg=True)
    for reentrant in (False, True):
        out = torch.utils.checkpoint.checkpoint(f, x, use_reentrant=reentrant)
        call(
            f"grads reentrant={reentrant}",
            lambda out=out: torch.autograd.grad(out.sum(), [x, *m.parameters()]),
        )


@scenario
def caches_cleared_in_a_backward_hook(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
    f = C(m)
    x = rand(3, 4, rg=True)
    for i in range(2):
        out = f(x)

        def hook(g):
            torch._dynamo.reset()
            torch2xla.clear_caches()
            gc.collect()
            return g

        out.register_hook(hook)
        call(f"grads {i}", lambda out=out: torch.autograd.grad(out.sum(), [x, *m.parameters()]))


@scenario
def compiled_called_in_a_backward_hook(C, call):
    g = C(lambda t: t * 2 + t.sin())
    w = rand(3, rg=True)
    out = (w * 3).sum()
    w.register_hook(lambda grad: g(grad))
    call("grad", lambda: torch.autograd.grad(out, w))


# ============================================================================================
# user exceptions
def _raising(x, limit):
    y = x.sum()
    if y > limit:
        raise ValueError(f"sum {y.item():.1f} over {limit}")  # USER LINE
    return y * 2


@checked
def user_exception_type_message_line_and_next_call():
    f = compiled(_raising)
    src_line = next(
        i + 1
        for i, l in enumerate(pathlib.Path(__file__).read_text().splitlines())
        if "# USER LINE" in l and "raise" in l
    )
    for i in range(3):
        try:
            f(torch.ones(3), 1.0)
            return "did not raise"
        except ValueError as e:
            if str(e) != "sum 3.0 over 1.0":
                return f"message {str(e)!r}"
            frames = [fr for fr in traceback.extract_tb(e.__traceback__) if fr.filename == __file__]
            if not frames or frames[-1].lineno != src_line:
                return f"traceback ends at {frames[-1] if frames else None}, not line {src_line}"
        out = f(-torch.ones(3), 1.0)
        if out.item() != -6.0:
            return "next call wrong"
    return None


@scenario
def user_exception_caught_inside_compiled(C, call):
    def f(x):
        try:
            if x.sum() > 0:
                raise KeyError("k")
            y = x * 2
        except KeyError:
            y = x * 3
        return y

    g = C(f)
    call("raises inside", lambda: g(torch.ones(3)))
    call("does not", lambda: g(-torch.ones(3)))


@scenario
def op_error_inside_try_of_compiled(C, call):
    def f(x, i):
        try:
            return x[i] * 2
        except IndexError:
            return x.sum()

    g = C(f)
    x = rand(4)
    call("in range", lambda: g(x, torch.tensor([1])))
    call("out of range", lambda: g(x, torch.tensor([9])))
    call("in range again", lambda: g(x, torch.tensor([2])))


@scenario
def exception_in_custom_backward_then_next_step(C, call):
    class Bad(torch.autograd.Function):
        fail = True

        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            if Bad.fail:
                Bad.fail = False
                raise RuntimeError("bad backward")
            return g * 2

    w = rand(3, rg=True)
    f = C(lambda x: Bad.apply(x * w).sum())
    call("first backward", lambda: torch.autograd.grad(f(rand(3)), w))
    call("second backward", lambda: torch.autograd.grad(f(rand(3)), w))


@scenario
def runtime_check_error_then_good_calls_training(C, call):
    emb = nn.Embedding(4, 3)
    f = C(lambda i: emb(i).square().sum())
    call("good", lambda: torch.autograd.grad(f(torch.tensor([1, 2])), emb.weight))
    call("bad", lambda: f(torch.tensor([1, 7])))
    call("good again", lambda: torch.autograd.grad(f(torch.tensor([3, 0])), emb.weight))


# ============================================================================================
# warnings, options, environment
@checked
def fallback_warning_said_once_per_graph():
    f = compiled(lambda x: x.nonzero().float().sum() + x.sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(4):
            f(torch.randn(3, 2 + i % 2))
    ours = [w for w in caught if "torch2xla" in str(w.message)]
    if len(ours) > 1:
        return f"{len(ours)} warnings: {[str(w.message)[:80] for w in ours]}"
    return None


@checked
def user_warning_inside_compiled_each_call_as_eager():
    def f(x):
        warnings.warn("careful")
        return x * 2

    counts = []
    for g in (f, compiled(f)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                g(torch.ones(2))
        counts.append(sum("careful" in str(w.message) for w in caught))
    return None if counts[0] == counts[1] else f"user warning {counts[1]}x, eager {counts[0]}x"


@checked
def bad_option_names_and_values_are_clear():
    bad = []
    for options, words in [
        ({"stirct": True}, ["stirct", "strict"]),
        ({"strict": "yes"}, ["strict"]),
        ({"cache_size": -1}, ["cache_size"]),
        ({"buckets": "many"}, ["buckets"]),
    ]:
        f = torch.compile(lambda x: x + 1, backend="xla", options=options)
        try:
            f(torch.ones(2))
            bad.append(f"{options}: accepted")
        except torch2xla.OptionError as e:
            if not all(w in str(e) for w in words):
                bad.append(f"{options}: {str(e)[:160]!r} does not name {words}")
        except Exception as e:  # noqa: BLE001
            bad.append(f"{options}: {type(e).__name__} {str(e)[:100]}")
        torch._dynamo.reset()
    try:
        torch.compile(lambda x: x + 1, backend="xla", mode="fastest")(torch.ones(2))
        bad.append("mode='fastest' accepted")
    except torch2xla.OptionError as e:
        if "fastest" not in str(e):
            bad.append(f"mode: {e}")
    except Exception as e:  # noqa: BLE001
        bad.append(f"mode: {type(e).__name__} {str(e)[:100]}")
    return "; ".join(bad) or None


# ============================================================================================
# devices
@scenario
def meta_tensors_beside_cpu_zero_dim(C, call):
    f = C(lambda x, s: x * s + 1)
    call("meta x cpu 0-d", lambda: tuple(f(torch.ones(3, device="meta"), torch.tensor(2.0)).shape))
    call("cpu x meta 0-d", lambda: f(torch.ones(3), torch.tensor(2.0, device="meta")))


@scenario
def meta_module_forward(C, call):
    with torch.device("meta"):
        m = nn.Linear(4, 2)
    f = C(m)
    call(
        "meta",
        lambda: (
            f(torch.ones(3, 4, device="meta")).shape,
            f(torch.ones(3, 4, device="meta")).device,
        ),
    )


@scenario
def cpu_device_spellings(C, call):
    f = C(lambda x, y: x + y)
    a = torch.ones(3, device="cpu")
    b = torch.ones(3, device=torch.device("cpu", 0))
    call("cpu + cpu:0", lambda: f(a, b))
    call("cpu:0 + cpu", lambda: f(b, a))


# ============================================================================================
def run_checked(name, fn) -> str:
    torch._dynamo.reset()
    try:
        why = fn()
    except Exception:  # noqa: BLE001
        return f"CRASH {name}: {traceback.format_exc()[-1500:]}"
    return f"ok    {name}" if why is None else f"DIFF  {name}: {why}"


KNOWN: dict[str, str] = {
    "swap_tensors_after_split_graph_calls": "torch's own: backend='eager' raises the same "
    "(the swap's use-count check)",
    "swap_tensors_of_an_optimizer_step": "torch's own: Dynamo's compiled optimizer step puts a "
    "weakref.finalize on each parameter (backend='eager' raises the same)",
}


def main(argv: list[str]) -> int:
    wanted = argv
    bad = 0
    for name, fn in SCENARIOS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            line = harness.compare(name, fn)
        except Exception:  # noqa: BLE001
            line = f"CRASH {name}: {traceback.format_exc()[-1500:]}"
        if not line.startswith("ok") and name in KNOWN:
            line += f"\n      ({KNOWN[name]})"
        bad += not line.startswith("ok")
        print(line, flush=True)
    for name, fn in SELF_CHECKED.items():
        if wanted and not any(w in name for w in wanted):
            continue
        line = run_checked(name, fn)
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
