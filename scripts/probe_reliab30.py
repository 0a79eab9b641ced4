"""Probe the compiled call as an object in a user's program: exceptions and the state they
leave, threads, and the compiled module as a Python object, against eager PyTorch.

    PYTHONPATH=. python scripts/probe_reliab30.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_reliab30.py   # torch's own differences

Classes: a user's ``raise`` (plain, data-dependent, an ``assert`` on a tensor value, an op's
IndexError/RuntimeError) after in-place writes to inputs, buffers, parameters, ``.grad``,
Python lists/dicts/attributes and the random generator, then a good call; errors from
forward/pre-forward/backward/tensor hooks and from a custom Function's backward (at
``.backward()`` as eager); ``BaseException`` subclasses from hooks; a compiled call that raises
inside a generator. Threads: each thread's results and grads in order against eager. The
module as an object: ``state_dict``/``load_state_dict`` between calls, dtype changes, hooks
added and removed, submodules replaced, ``requires_grad_(False)`` between training calls,
bound methods, one function in two modules, nested compiled functions, the cache limit.

A scenario is ``fn(C, rec)`` as in ``probe_sideeff24.py``.

Differences left at session 30 (none ours; ``PROBE_BACKEND=aot_eager`` shows the same):
Python side effects Dynamo applies after a graph that raised at run time are lost
(``assert_on_tensor_value_after_writes``, ``runtime_index_error_python_list_state``,
``check_fails_in_module_eval_switch``); a raw ``torch.set_grad_enabled(False)`` before the
failing op is undone (its nodes are a ``with`` block's); global module hooks added after a
compile are not guarded; a custom Function's backward returning too many gradients or one
for an int passes, one returning too few fails at trace time (Dynamo traces the backward);
float rounding beyond the probe's 1e-6 (``channels_last_after_compile``,
``optimizer_state_load_between_steps``).
"""

from __future__ import annotations

import concurrent.futures
import copy
import io
import logging
import os
import sys
import threading
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
logging.getLogger("torch._dynamo").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}


def scenario(fn):
    CASES[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            tuple(v.stride()),
            v.requires_grad,
            v.grad_fn is None,
            v.detach().clone(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, dict):
        return ("L", "dict", [describe((k, v[k])) for k in sorted(v, key=str)])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        names = ("dtype", "shape", "stride", "requires_grad", "grad_fn is None")
        for n, x, y in zip(names, a[1:6], b[1:6]):
            if x != y and not (n == "stride" and 0 in a[2]):
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[6], b[6]
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def observe(fn, compiled):
    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    d = difference(observe(fn, True), exp, same)
    return f"DIFF  {name}: {d}" if d else f"ok    {name}"


def attempt(rec, label, thunk):
    """``rec(label, thunk())``, or its error (the scenario goes on)."""
    try:
        rec(label, thunk())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


def grads(*ts):
    return [t.grad for t in ts]


class Net(nn.Module):
    def __init__(self, n=4, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.a = nn.Linear(n, n)
        self.b = nn.Linear(n, 2)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("ema", torch.zeros(n))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        self.steps += 1
        self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return self.b(torch.tanh(self.a(x)))


def pgrads(m):
    return {k: p.grad for k, p in m.named_parameters()}


# ============================================================================================
# (1) exceptions and the state they leave
@scenario
def raise_after_input_writes(C, rec):
    def f(x, y, flag):
        x.add_(1)
        y[0] = 7.0
        if flag:
            raise ValueError("flag set")
        return x * y

    x, y = r(3), r(3, seed=1)
    g = C(f)
    attempt(rec, "bad", lambda: g(x, y, True))
    rec("state", [x, y, x._version > 0])
    attempt(rec, "good", lambda: g(x, y, False))
    rec("state2", [x, y])


@scenario
def data_dependent_raise_after_buffer_write(C, rec):
    m = Net()

    def f(x):
        out = m(x)
        if out.sum() > 0:
            raise RuntimeError("positive")
        return out

    g = C(f)
    x = r(2, 4)
    for i in range(3):
        attempt(rec, f"call{i}", lambda i=i: g(x * (1 if i % 2 else -1)))
        rec(f"buf{i}", [m.steps, m.ema, m.calls])


@scenario
def assert_on_tensor_value_after_writes(C, rec):
    log = []

    def f(x, buf):
        buf.mul_(2)
        log.append(len(log))
        assert (x > 0).all(), "x must be positive"
        return x.log() + buf

    g = C(f)
    buf = torch.ones(3)
    attempt(rec, "good", lambda: g(r(3).abs() + 0.1, buf))
    attempt(rec, "bad", lambda: g(r(3), buf))
    attempt(rec, "good2", lambda: g(r(3).abs() + 0.1, buf))
    rec("state", [buf, list(log)])


@scenario
def index_error_mid_function_after_writes(C, rec):
    def f(x, i):
        x.mul_(2)
        y = x[i]
        x.add_(1)
        return y

    x = r(3)
    g = C(f)
    attempt(rec, "good", lambda: g(x, 1))
    attempt(rec, "bad", lambda: g(x, 5))
    rec("x", x)
    attempt(rec, "good2", lambda: g(x, 2))
    rec("x2", x)


@scenario
def tensor_index_error_mid_function_after_writes(C, rec):
    def f(x, i):
        x.mul_(2)
        y = x[i]
        x.add_(1)
        return y * 3

    x = r(3)
    g = C(f)
    attempt(rec, "good", lambda: g(x, torch.tensor(1)))
    attempt(rec, "bad", lambda: g(x, torch.tensor(5)))
    rec("x", x)
    attempt(rec, "good2", lambda: g(x, torch.tensor(-1)))
    rec("x2", x)


@scenario
def shape_mismatch_mid_function_after_writes(C, rec):
    w = torch.ones(4, 2)

    def f(x, acc):
        acc.add_(x.sum())
        return x @ w

    acc = torch.zeros(())
    g = C(f)
    attempt(rec, "good", lambda: g(r(3, 4), acc))
    attempt(rec, "bad", lambda: g(r(3, 5), acc))
    rec("acc", acc)
    attempt(rec, "good2", lambda: g(r(2, 4), acc))
    rec("acc2", acc)


@scenario
def view_error_after_param_write(C, rec):
    p = nn.Parameter(torch.ones(6))

    def f(x):
        with torch.no_grad():
            p.mul_(1.5)
        return (x * p).view(4, -1)

    g = C(f)
    attempt(rec, "good", lambda: g(r(6) * 0 + r(6, seed=2)[:6].view(6)))
    attempt(rec, "bad", lambda: g(r(6)))
    rec("p", p)


@scenario
def raise_after_grad_write(C, rec):
    p = nn.Parameter(r(3))
    p.grad = torch.ones(3)

    def f(x):
        p.grad.mul_(0.5)
        if x.max() > 10:
            raise OverflowError("too big")
        return x * p

    g = C(f)
    attempt(rec, "good", lambda: g(r(3)))
    attempt(rec, "bad", lambda: g(r(3) + 100))
    rec("grad", p.grad)


@scenario
def raise_after_rng_draw(C, rec):
    def f(x, flag):
        noise = torch.randn(3)
        x.add_(noise)
        if flag:
            raise KeyError("boom")
        return x + torch.rand(3)

    g = C(f)
    x = torch.zeros(3)
    # (random values differ from eager's by design: docs/design.md, Randomness)
    attempt(rec, "good", lambda: g(x, False).shape)
    attempt(rec, "bad", lambda: g(x, True))
    rec("x", [x.shape, bool((x != 0).all())])
    attempt(rec, "good2", lambda: g(x, False).shape)


@scenario
def raise_after_dropout_training(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

    def f(x):
        y = m(x)
        if (y == 0).sum() > 100:
            raise RuntimeError("no")
        raise ValueError("always")

    g = C(f)
    attempt(rec, "bad", lambda: g(r(2, 4)))
    attempt(rec, "bad2", lambda: g(r(2, 4)))


@scenario
def raise_after_python_state_writes(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.hist = []
            self.stats = {}
            self.n = 0

        def forward(self, x, fail):
            self.n += 1
            self.hist.append(x.shape[0])
            self.stats["last"] = x.detach() * 2
            y = self.lin(x)
            if fail:
                raise RuntimeError("fail")
            return y

    m = M()
    g = C(m)
    attempt(rec, "good", lambda: g(r(2, 3), False))
    attempt(rec, "bad", lambda: g(r(4, 3), True))
    rec("state", [m.n, list(m.hist), m.stats["last"]])
    attempt(rec, "good2", lambda: g(r(4, 3), False))
    rec("state2", [m.n, list(m.hist), m.stats["last"]])


@scenario
def raise_in_training_forward_then_backward(C, rec):
    m = Net()

    def f(x, fail):
        y = m(x)
        if fail:
            raise RuntimeError("fail")
        return y.square().sum()

    g = C(f)
    x = r(2, 4)
    attempt(rec, "bad", lambda: g(x, True))
    rec("grads", pgrads(m))
    loss = g(x, False)
    loss.backward()
    rec("grads2", [loss, pgrads(m), m.steps, m.ema])


@scenario
def raise_after_optimizer_step(C, rec):
    m = nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = m(x).square().sum()
        loss.backward()
        opt.step()
        if loss > 0:
            raise RuntimeError("nan check")
        return loss

    g = C(step)
    for i in range(2):
        attempt(rec, f"step{i}", lambda i=i: g(r(4, 3, seed=i)))
        rec(f"params{i}", [m.weight, m.bias, opt.state[m.weight].get("momentum_buffer")])


@scenario
def raise_from_forward_hook_then_remove(C, rec):
    m = Net()
    calls = []

    def hook(mod, inp, out):
        calls.append(1)
        if out.abs().max() > 0:
            raise ValueError("hook refused")

    h = m.b.register_forward_hook(hook)
    g = C(m)
    x = r(2, 4)
    attempt(rec, "bad", lambda: g(x))
    rec("state", [m.steps, m.ema, len(calls)])
    h.remove()
    attempt(rec, "good", lambda: g(x))
    rec("state2", [m.steps, m.ema, len(calls)])


@scenario
def raise_from_forward_pre_hook(C, rec):
    m = Net()

    def pre(mod, args):
        if args[0].shape[0] > 2:
            raise ValueError("batch too big")
        return (args[0] * 2,)

    m.register_forward_pre_hook(pre)
    g = C(m)
    attempt(rec, "good", lambda: g(r(2, 4)))
    attempt(rec, "bad", lambda: g(r(3, 4)))
    rec("state", [m.steps, m.ema])
    attempt(rec, "good2", lambda: g(r(1, 4)))


@scenario
def raise_from_full_backward_hook(C, rec):
    m = Net()
    seen = []

    def bhook(mod, gin, gout):
        seen.append(gout[0].shape)
        raise RuntimeError("backward hook refused")

    m.b.register_full_backward_hook(bhook)
    g = C(m)
    x = r(2, 4, seed=3).requires_grad_()
    out = g(x)
    attempt(rec, "bwd", lambda: out.sum().backward())
    rec("grads", [pgrads(m), x.grad, len(seen)])


@scenario
def raise_from_tensor_hook_in_backward(C, rec):
    m = Net()

    def f(x):
        h = torch.tanh(m.a(x))
        h.register_hook(lambda g: (_ for _ in ()).throw(ValueError("hook on h")))
        return m.b(h).sum()

    g = C(f)
    x = r(2, 4)
    loss = g(x)
    attempt(rec, "bwd", lambda: loss.backward())
    rec("grads", pgrads(m))
    loss = g(x)
    attempt(rec, "bwd2", lambda: loss.backward())


@scenario
def raise_from_param_hook_in_backward_then_next_step(C, rec):
    m = Net()
    state = {"fail": True}

    def hook(grad):
        if state["fail"]:
            raise RuntimeError("param hook")
        return grad * 2

    m.a.weight.register_hook(hook)
    g = C(lambda x: m(x).square().sum())
    x = r(3, 4)
    attempt(rec, "bwd", lambda: g(x).backward())
    rec("grads", pgrads(m))
    state["fail"] = False
    for p in m.parameters():
        p.grad = None
    g(x).backward()
    rec("grads2", pgrads(m))


class _BadBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if (g > 0).any():
            raise ValueError("custom backward refused")
        return g * 2


@scenario
def custom_function_backward_raises(C, rec):
    w = nn.Parameter(r(3))

    def f(x):
        return (_BadBackward.apply(x * w) * 3).sum()

    g = C(f)
    x = r(3, seed=4)
    loss = g(x)
    rec("loss", loss)
    attempt(rec, "bwd", lambda: loss.backward())
    rec("grad", w.grad)
    loss = g(x)
    attempt(rec, "bwd_neg", lambda: (-loss).backward())
    rec("grad2", w.grad)


class _Interrupt(KeyboardInterrupt):
    pass


@scenario
def keyboard_interrupt_from_forward_hook(C, rec):
    m = Net()
    state = {"n": 0}

    def hook(mod, inp, out):
        state["n"] += 1
        if state["n"] == 2:
            raise _Interrupt("stop")

    m.a.register_forward_hook(hook)
    g = C(m)
    x = r(2, 4)
    outs = []
    for i in range(3):
        try:
            outs.append(g(x))
        except KeyboardInterrupt as e:
            outs.append(f"interrupt {type(e).__name__}")
    rec("outs", outs)
    rec("state", [m.steps, m.ema, state["n"]])


@scenario
def keyboard_interrupt_from_backward_hook(C, rec):
    m = Net()
    state = {"n": 0}

    def hook(grad):
        state["n"] += 1
        if state["n"] == 1:
            raise _Interrupt("stop")

    m.b.weight.register_hook(hook)
    g = C(lambda x: m(x).sum())
    x = r(2, 4)
    try:
        g(x).backward()
        rec("first", "ran")
    except KeyboardInterrupt:
        rec("first", "interrupted")
    rec("grads", pgrads(m))
    for p in m.parameters():
        p.grad = None
    g(x).backward()
    rec("grads2", pgrads(m))


@scenario
def compiled_call_raising_inside_generator(C, rec):
    def f(x):
        if x.sum() > 0:
            raise ValueError("positive batch")
        return x * 2

    g = C(f)

    def batches():
        for i in range(4):
            yield g(r(3, seed=i))

    got = []
    it = batches()
    for _ in range(4):
        try:
            got.append(next(it))
        except ValueError as e:
            got.append(e)
            break
        except StopIteration:
            break
    rec("got", got)
    attempt(rec, "after", lambda: g(-r(3).abs()))


@scenario
def exception_then_recompile_other_shape(C, rec):
    def f(x, buf):
        buf.add_(x.sum())
        if x.shape[0] == 3:
            raise ValueError("three")
        return buf * x

    g = C(f, dynamic=True)
    buf = torch.zeros(())
    for n in (2, 3, 4, 3, 5):
        attempt(rec, f"n{n}", lambda n=n: g(r(n), buf))
    rec("buf", buf)


@scenario
def exception_inside_no_grad_block_then_training(C, rec):
    m = Net()

    def f(x, fail):
        with torch.no_grad():
            y = m(x)
            if fail:
                raise ValueError("in no_grad")
        return (m(x) - y).sum()

    g = C(f)
    x = r(2, 4)
    attempt(rec, "bad", lambda: g(x, True))
    rec("grad_enabled", torch.is_grad_enabled())
    loss = g(x, False)
    loss.backward()
    rec("grads", [loss, pgrads(m)])


@scenario
def exception_inside_autocast_block(C, rec):
    def f(x, w, fail):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            if fail:
                raise ValueError("in autocast")
        return y

    g = C(f)
    attempt(rec, "bad", lambda: g(r(2, 3), r(3, 3), True))
    rec("autocast", torch.is_autocast_enabled("cpu"))
    attempt(rec, "good", lambda: g(r(2, 3), r(3, 3), False))


@scenario
def exception_from_torch_check(C, rec):
    def f(x, n):
        x.add_(1)
        torch._check(n < 4, lambda: f"n={n} must be below 4")
        return x * n

    g = C(f)
    x = torch.zeros(3)
    attempt(rec, "good", lambda: g(x, 2))
    attempt(rec, "bad", lambda: g(x, 7))
    rec("x", x)
    attempt(rec, "good2", lambda: g(x, 3))


@scenario
def exception_from_cross_entropy_target(C, rec):
    m = nn.Linear(4, 3)

    def f(x, t, acc):
        acc.add_(1)
        return F.cross_entropy(m(x), t)

    g = C(f)
    acc = torch.zeros(())
    attempt(rec, "good", lambda: g(r(2, 4), torch.tensor([0, 2]), acc))
    attempt(rec, "bad", lambda: g(r(2, 4), torch.tensor([0, 5]), acc))
    rec("acc", acc)
    attempt(rec, "good2", lambda: g(r(2, 4), torch.tensor([1, 1]), acc))


@scenario
def exception_from_embedding_index(C, rec):
    emb = nn.Embedding(5, 3)

    def f(ids, acc):
        acc.add_(ids.numel())
        return emb(ids).sum(1)

    g = C(f)
    acc = torch.zeros((), dtype=torch.int64)
    attempt(rec, "good", lambda: g(torch.tensor([[0, 4]]), acc))
    attempt(rec, "bad", lambda: g(torch.tensor([[0, 9]]), acc))
    rec("acc", acc)
    attempt(rec, "good2", lambda: g(torch.tensor([[1, 2]]), acc))


@scenario
def exception_training_embedding_index(C, rec):
    emb = nn.Embedding(5, 3)

    def f(ids):
        return emb(ids).square().sum()

    g = C(f)
    attempt(rec, "bad", lambda: g(torch.tensor([[0, 9]])))
    loss = g(torch.tensor([[1, 2]]))
    loss.backward()
    rec("grad", [loss, emb.weight.grad])


@scenario
def exception_from_scatter_index(C, rec):
    def f(x, idx, src):
        x.mul_(2)
        return x.scatter_add(0, idx, src)

    g = C(f)
    x = torch.ones(4)
    attempt(rec, "good", lambda: g(x, torch.tensor([0, 3]), torch.ones(2)))
    attempt(rec, "bad", lambda: g(x, torch.tensor([0, 4]), torch.ones(2)))
    rec("x", x)


@scenario
def exception_in_nested_function_call(C, rec):
    log = []

    def inner(x):
        log.append("inner")
        x.add_(1)
        raise NotImplementedError("inner not done")

    def outer(x):
        log.append("outer")
        y = x * 2
        try:
            inner(x)
        except NotImplementedError:
            log.append("caught")
            return y + x
        return y

    g = C(outer)
    x = torch.zeros(3)
    attempt(rec, "call", lambda: g(x))
    rec("state", [x, list(log)])


@scenario
def exception_in_finally_restores_module_state(C, rec):
    m = Net()

    def f(x):
        m.eval()
        try:
            y = m(x)
            if y.sum() > -1000:
                raise ValueError("checked")
            return y
        finally:
            m.train()

    g = C(f)
    attempt(rec, "call", lambda: g(r(2, 4)))
    rec("training", [m.training, m.a.training, m.steps])


# ============================================================================================
# (2) threads (each thread's results in order against eager's)
def _threads(work, n=4):
    results = [None] * n
    barrier = threading.Barrier(n)

    def run_one(i):
        barrier.wait()
        try:
            results[i] = work(i)
        except Exception as e:  # noqa: BLE001  (recorded)
            results[i] = e

    ts = [threading.Thread(target=run_one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results


@scenario
def threads_each_compiles_its_own_function(C, rec):
    def work(i):
        g = C(lambda x: torch.sin(x) * (i + 1))
        return [g(r(3, seed=i)), g(r(2, seed=i))]

    rec("results", _threads(work))


@scenario
def threads_one_raises_others_run(C, rec):
    def f(x, i):
        y = x * 2
        if i == 1:
            raise ValueError("thread 1")
        return y + i

    g = C(f)

    def work(i):
        out = []
        for k in range(2):
            try:
                out.append(g(r(3, seed=k), i))
            except ValueError as e:
                out.append(str(e))
        return out

    rec("results", _threads(work))


@scenario
def threads_no_grad_in_one_training_in_others(C, rec):
    torch.manual_seed(0)
    models = [nn.Linear(4, 2) for _ in range(4)]

    def f(m, x):
        return torch.tanh(m(x)).sum()

    g = C(f)

    def work(i):
        m = models[i]
        x = r(3, 4, seed=i)
        if i % 2:
            with torch.no_grad():
                out = g(m, x)
            return [out, out.requires_grad, torch.is_grad_enabled()]
        out = g(m, x)
        out.backward()
        return [out, out.requires_grad, m.weight.grad, m.bias.grad, torch.is_grad_enabled()]

    rec("results", _threads(work))


@scenario
def threads_different_dtypes(C, rec):
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

    def f(x):
        return F.softmax(x * 3, -1).cumsum(-1)

    g = C(f)
    rec("results", _threads(lambda i: [g(r(2, 5, seed=i, dtype=dtypes[i])) for _ in range(2)]))


@scenario
def threads_calls_while_another_compiles_big(C, rec):
    small = C(lambda x: x.exp() + 1)
    small(r(3))

    def big(x):
        for k in range(30):
            x = torch.tanh(x @ x.T[: x.shape[1]] * 0.1 + k)
        return x

    gb = C(big)

    def work(i):
        if i == 0:
            return [gb(r(4, 4))]
        return [small(r(3, seed=k)) for k in range(20)]

    rec("results", _threads(work))


@scenario
def threads_pool_training_deepcopies(C, rec):
    base = Net()
    models = [copy.deepcopy(base) for _ in range(3)]
    compiled = [C(m) for m in models]

    def work(i):
        out = []
        opt = torch.optim.Adam(models[i].parameters(), lr=0.01)
        for k in range(2):
            opt.zero_grad()
            loss = compiled[i](r(2, 4, seed=10 * i + k)).square().mean()
            loss.backward()
            opt.step()
            out.append(loss)
        return out + [models[i].a.weight, models[i].steps, models[i].ema]

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        rec("results", list(pool.map(work, range(3))))


@scenario
def threads_inference_mode_in_one(C, rec):
    m = Net()
    g = C(m)

    def work(i):
        x = r(2, 4, seed=i)
        if i == 0:
            with torch.inference_mode():
                y = g(x)
            return [y, y.is_inference()]
        y = g(x)
        return [y, y.is_inference(), y.requires_grad]

    results = _threads(work, n=3)
    rec("results", [r_[:2] if isinstance(r_, list) else r_ for r_ in results])


@scenario
def threads_reset_then_each_calls(C, rec):
    g = C(lambda x: x.cos() * 2)
    g(r(3))
    torch._dynamo.reset()
    rec("results", _threads(lambda i: [g(r(3, seed=i)), g(r(i + 1, seed=i))]))


@scenario
def threads_rng_per_thread_generators(C, rec):
    def f(x, gen):
        return x + torch.rand(x.shape, generator=gen)

    g = C(f)

    def work(i):
        gen = torch.Generator().manual_seed(i)
        return [g(torch.zeros(3), gen) for _ in range(2)]

    rec("results", _threads(work))


# ============================================================================================
# (3) the compiled module as an object
@scenario
def deepcopy_original_after_compile_trains_apart(C, rec):
    m = Net()
    g = C(m)
    g(r(2, 4)).sum().backward()
    m2 = copy.deepcopy(m)
    g2 = C(m2)
    for p in m2.parameters():
        p.grad = None
    with torch.no_grad():
        m2.a.weight.add_(1)
    y1, y2 = g(r(2, 4)), g2(r(2, 4))
    rec("outs", [y1, y2, m.steps, m2.steps, m.calls, m2.calls])
    y2.sum().backward()
    rec("grads", [pgrads(m), pgrads(m2)])


@scenario
def state_dict_of_compiled_roundtrip_torch_save(C, rec):
    m = Net()
    g = C(m)
    g(r(2, 4))
    sd = g.state_dict()
    rec("keys", sorted(k.removeprefix("_orig_mod.") for k in sd))
    sd = m.state_dict()
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    m2 = Net(seed=1)
    g2 = C(m2)
    g2(r(2, 4))
    attempt(rec, "load", lambda: str(m2.load_state_dict(loaded)))
    attempt(rec, "load_orig", lambda: str(m2.load_state_dict(m.state_dict())))
    rec("after", [g2(r(2, 4)), m2.steps])


@scenario
def load_state_dict_between_training_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    g(x).sum().backward()
    sd = {k: v.clone() + 0.5 for k, v in m.state_dict().items()}
    m.load_state_dict(sd)
    m.zero_grad()
    y = g(x)
    y.sum().backward()
    rec("after", [y, pgrads(m), m.steps, m.ema])


@scenario
def load_state_dict_assign_between_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    g(x)
    sd = {k: v.clone() * 2 for k, v in m.state_dict().items()}
    m.load_state_dict(sd, assign=True)
    y = g(x)
    y.sum().backward()
    rec("after", [y, pgrads(m), m.steps, m.ema])


@scenario
def module_half_after_compile(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.GELU())
    g = C(m)
    x = r(2, 4)
    rec("f32", g(x))
    m.half()
    attempt(rec, "f16", lambda: g(x.half()))
    attempt(rec, "f32_input", lambda: g(x))
    m.bfloat16()
    attempt(rec, "bf16", lambda: g(x.bfloat16()))
    m.double()
    attempt(rec, "f64", lambda: g(x.double()))


@scenario
def requires_grad_false_between_training_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    g(x).sum().backward()
    rec("g1", pgrads(m))
    m.zero_grad(set_to_none=True)
    m.a.requires_grad_(False)
    y = g(x)
    y.sum().backward()
    rec("g2", [y, pgrads(m)])
    m.zero_grad(set_to_none=True)
    m.requires_grad_(False)
    y = g(x)
    rec("g3", [y, y.requires_grad])
    m.b.weight.requires_grad_(True)
    y = g(x)
    y.sum().backward()
    rec("g4", [y, pgrads(m)])


@scenario
def hooks_added_and_removed_between_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    rec("plain", g(x))
    h1 = m.a.register_forward_hook(lambda mod, i, o: o * 2)
    rec("hooked", g(x))
    h2 = m.register_forward_pre_hook(lambda mod, a: (a[0] + 1,))
    rec("hooked2", g(x))
    h1.remove()
    rec("pre_only", g(x))
    h2.remove()
    rec("plain2", [g(x), m.steps])


@scenario
def backward_hook_added_between_training_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    g(x).sum().backward()
    m.zero_grad()
    seen = []
    h = m.b.register_full_backward_hook(lambda mod, gi, go: seen.append(go[0].clone()))
    g(x).sum().backward()
    rec("g", [pgrads(m), seen])
    h.remove()
    m.zero_grad()
    m.a.weight.register_hook(lambda gr: gr * 0)
    g(x).sum().backward()
    rec("g2", [pgrads(m), len(seen)])


@scenario
def submodule_replaced_between_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    rec("1", g(x))
    m.a = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    rec("2", g(x))
    m.b = nn.Identity()
    rec("3", g(x))
    del m.a
    m.a = nn.Linear(4, 4, bias=False)
    y = g(x)
    y.sum().backward()
    rec("4", [y, pgrads(m)])


@scenario
def parameter_data_replaced_other_shape(C, rec):
    m = nn.Linear(4, 3)
    g = C(m)
    rec("1", g(r(2, 4)))
    m.weight.data = r(5, 4)
    m.bias.data = r(5)
    attempt(rec, "2", lambda: g(r(2, 4)))


@scenario
def bound_method_compiled(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.scale = 2.0

        def score(self, x):
            return self.lin(x).sum(-1) * self.scale

    m1, m2 = M(), M()
    s1, s2 = C(m1.score), C(m2.score)
    x = r(2, 3)
    rec("1", [s1(x), s2(x)])
    m1.scale = 5.0
    rec("2", [s1(x), s2(x)])
    s1(x).sum().backward()
    rec("g", [m1.lin.weight.grad, m2.lin.weight.grad])


def _shared_block(lin, x):
    return torch.relu(lin(x)) + x


@scenario
def one_function_two_modules(C, rec):
    f = C(_shared_block)
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    x = r(2, 3)
    ya, yb = f(a, x), f(b, x)
    (ya.sum() + 2 * yb.sum()).backward()
    rec("1", [ya, yb, a.weight.grad, b.weight.grad])
    c = nn.Linear(3, 3).double()
    rec("2", f(c, x.double()))


@scenario
def nested_compiled_calls_training(C, rec):
    m = Net()
    inner = C(lambda x: torch.tanh(m.a(x)))

    def outer(x):
        return m.b(inner(x) * 2).sum()

    g = C(outer)
    x = r(2, 4)
    loss = g(x)
    loss.backward()
    rec("1", [loss, pgrads(m)])


@scenario
def compiler_disable_inside_with_state(C, rec):
    log = []

    @torch.compiler.disable
    def side(x):
        log.append(x.sum().item())
        x.add_(1)
        return x.clone()

    def f(x):
        y = x * 2
        z = side(x)
        return y + z

    g = C(f)
    x = torch.ones(3)
    rec("1", g(x))
    rec("2", g(x))
    rec("state", [x, list(log)])


@scenario
def cache_limit_reached_falls_back_correct(C, rec):
    torch._dynamo.config.cache_size_limit, old = 2, torch._dynamo.config.cache_size_limit
    try:
        buf = torch.zeros(3)

        def f(x, k):
            buf.add_(k)
            return x * k + buf

        g = C(f)
        outs = [g(r(3), k) for k in (1, 2, 3, 4, 5)]
        rec("outs", outs + [buf])
    finally:
        torch._dynamo.config.cache_size_limit = old


@scenario
def cache_limit_training_falls_back(C, rec):
    torch._dynamo.config.cache_size_limit, old = 1, torch._dynamo.config.cache_size_limit
    try:
        m = Net()
        g = C(m)
        outs = []
        for n in (2, 3, 4):
            y = g(r(n, 4))
            y.sum().backward()
            outs.append(y)
        rec("outs", outs + [pgrads(m), m.steps, m.ema])
    finally:
        torch._dynamo.config.cache_size_limit = old


@scenario
def train_eval_switch_with_dropout_and_bn(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.3))
    g = C(m)
    x = r(5, 4)
    outs = []
    for mode in ("train", "eval", "train", "eval"):
        getattr(m, mode)()
        y = g(x)
        outs.append(y if mode == "eval" else y.shape)  # (dropout's draws differ by design)
    rec("outs", outs + [m[1].running_mean, m[1].running_var, m[1].num_batches_tracked])


@scenario
def weight_tying_changed_after_compile(C, rec):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(6, 4)
            self.head = nn.Linear(4, 6, bias=False)

        def forward(self, ids):
            return self.head(self.emb(ids))

    m = LM()
    g = C(m)
    ids = torch.tensor([[1, 2, 3]])
    rec("untied", g(ids))
    m.head.weight = m.emb.weight
    y = g(ids)
    y.sum().backward()
    rec("tied", [y, m.emb.weight.grad])


@scenario
def parametrization_added_after_compile(C, rec):
    m = nn.Linear(3, 3)
    g = C(m)
    x = r(2, 3)
    rec("1", g(x))
    torch.nn.utils.parametrize.register_parametrization(
        m, "weight", type("Sym", (nn.Module,), {"forward": lambda self, w: w + w.T})()
    )
    y = g(x)
    y.sum().backward()
    rec("2", [y, m.parametrizations.weight.original.grad])


@scenario
def zero_grad_set_to_none_false_between_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    g(x).sum().backward()
    m.zero_grad(set_to_none=False)
    g(x * 2).sum().backward()
    rec("g", pgrads(m))


@scenario
def apply_reinit_between_calls(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    rec("1", g(x))
    torch.manual_seed(3)
    m.apply(lambda mod: mod.reset_parameters() if isinstance(mod, nn.Linear) else None)
    rec("2", g(x))


@scenario
def module_attribute_tensor_rebound(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.mask = torch.ones(3)

        def forward(self, x):
            return self.lin(x) * self.mask

    m = M()
    g = C(m)
    x = r(2, 3)
    rec("1", g(x))
    m.mask = torch.tensor([1.0, 0.0, 1.0])
    rec("2", g(x))
    m.mask = torch.tensor([1, 0, 2])
    rec("3", g(x))


@scenario
def compiled_module_pickled_state_and_eval(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    g = C(m)
    g(r(4, 3))
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    m2.load_state_dict(torch.load(buf))
    m2.eval()
    g2 = C(m2)
    rec("1", [g2(r(4, 3)), m2[1].num_batches_tracked])


# ============================================================================================
# round 2: runtime checks (the program's own) after writes, in the graph's other shapes
@scenario
def runtime_index_error_training_after_nonleaf_write(C, rec):
    w = nn.Parameter(r(4))

    def f(x, idx):
        y = x * w
        y.mul_(2)
        return y[idx].sum()

    g = C(f)
    x = r(4, seed=1)
    attempt(rec, "bad", lambda: g(x, torch.tensor([1, 7])))
    loss = g(x, torch.tensor([1, 3]))
    loss.backward()
    rec("good", [loss, w.grad])


@scenario
def runtime_index_error_after_batchnorm_update(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    emb = nn.Embedding(4, 4)

    def f(x, ids):
        return m(x) + emb(ids)

    g = C(f)
    x = r(2, 3)
    attempt(rec, "good", lambda: g(x, torch.tensor([0, 1])))
    attempt(rec, "bad", lambda: g(x, torch.tensor([0, 9])))
    rec("bn", [m[1].running_mean, m[1].running_var, m[1].num_batches_tracked])
    attempt(rec, "good2", lambda: g(x, torch.tensor([2, 3])))
    rec("bn2", [m[1].running_mean, m[1].num_batches_tracked])


@scenario
def runtime_index_error_after_writes_dynamic(C, rec):
    def f(x, idx, acc):
        acc.add_(x.sum())
        x.mul_(2)
        return x.index_select(0, idx)

    g = C(f, dynamic=True)
    acc = torch.zeros(())
    for n, i in ((3, 1), (5, 9), (4, 2), (6, 6)):
        x = r(n)
        attempt(rec, f"n{n}", lambda x=x, i=i: g(x, torch.tensor([i]), acc))
        rec(f"x{n}", [x, acc])


@scenario
def runtime_index_error_after_aliased_writes(C, rec):
    def f(base, view, idx):
        view.add_(1)
        base.mul_(2)
        return base[idx]

    base = torch.arange(6.0)
    g = C(f)
    attempt(rec, "bad", lambda: g(base, base[2:], torch.tensor([9])))
    rec("base", base)
    attempt(rec, "good", lambda: g(base, base[2:], torch.tensor([1])))
    rec("base2", base)


@scenario
def runtime_index_error_in_split_graph(C, rec):
    def f(x, idx):
        x.add_(1)
        nz = torch.nonzero(x > 1.5)
        return x[idx] + nz.sum()

    g = C(f)
    x = torch.arange(4.0)
    attempt(rec, "good", lambda: g(x, torch.tensor([0])))
    attempt(rec, "bad", lambda: g(x, torch.tensor([8])))
    rec("x", x)


@scenario
def runtime_index_error_python_list_state(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(4, 2)
            self.count = 0

        def forward(self, ids):
            self.count += 1
            return self.emb(ids)

    m = M()
    g = C(m)
    attempt(rec, "good", lambda: g(torch.tensor([1])))
    attempt(rec, "bad", lambda: g(torch.tensor([7])))
    rec("count", m.count)
    attempt(rec, "good2", lambda: g(torch.tensor([2])))
    rec("count2", m.count)


@scenario
def runtime_error_rng_then_index(C, rec):
    def f(x, idx):
        x.add_(torch.rand(3))
        return x[idx]

    g = C(f)
    x = torch.zeros(3)
    attempt(rec, "bad", lambda: g(x, torch.tensor([5])))
    rec("x_changed", bool((x != 0).all()))


# ============================================================================================
# round 2: hooks and module lifecycle
@scenario
def always_call_forward_hook_when_forward_raises(C, rec):
    calls = []

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            if x.shape[0] == 3:
                raise ValueError("three rows")
            return y

    m = M()
    m.register_forward_hook(lambda mod, a, o: calls.append(o is None), always_call=True)
    g = C(m)
    attempt(rec, "good", lambda: g(r(2, 3)))
    attempt(rec, "bad", lambda: g(r(3, 3)))
    rec("calls", list(calls))


@scenario
def forward_hook_with_kwargs_added_after_compile(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    rec("1", g(x))
    m.register_forward_pre_hook(lambda mod, a, kw: ((a[0] * 3,), kw), with_kwargs=True)
    m.register_forward_hook(lambda mod, a, kw, o: o + 1, with_kwargs=True)
    rec("2", g(x))


@scenario
def global_module_hook_added_after_compile(C, rec):
    m = Net()
    g = C(m)
    x = r(2, 4)
    rec("1", g(x))
    h = torch.nn.modules.module.register_module_forward_hook(lambda mod, i, o: o * 2)
    try:
        rec("2", g(x))
    finally:
        h.remove()
    rec("3", g(x))


@scenario
def spectral_norm_train_eval(C, rec):
    m = torch.nn.utils.parametrizations.spectral_norm(nn.Linear(4, 4))
    g = C(m)
    x = r(2, 4)
    outs = [g(x), g(x)]
    m.eval()
    outs.append(g(x))
    m.train()
    y = g(x)
    y.sum().backward()
    rec("outs", outs + [y, m.parametrizations.weight.original.grad])


@scenario
def buffer_reassigned_other_shape(C, rec):
    m = Net()
    g = C(m)
    rec("1", g(r(2, 4)))
    m.ema = torch.ones(4) * 3
    rec("2", [g(r(2, 4)), m.ema])
    m.register_buffer("ema", torch.zeros(4, dtype=torch.float64))
    attempt(rec, "3", lambda: [g(r(2, 4)), m.ema])


@scenario
def param_set_to_none_between_calls(C, rec):
    m = nn.Linear(3, 3)
    g = C(m)
    x = r(2, 3)
    rec("1", g(x))
    m.bias = None
    y = g(x)
    y.sum().backward()
    rec("2", [y, m.weight.grad])


@scenario
def module_call_override(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x)

        def __call__(self, x):
            return super().__call__(x * 2) + 1

    m = M()
    g = C(m)
    rec("1", [g(r(2, 3)), m(r(2, 3))])


@scenario
def channels_last_after_compile(C, rec):
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    g = C(m)
    x = r(2, 3, 6, 6)
    rec("1", g(x))
    m.to(memory_format=torch.channels_last)
    y = g(x.to(memory_format=torch.channels_last))
    y.sum().backward()
    rec("2", [y, m[0].weight.grad, m[1].running_mean])


@scenario
def optimizer_state_load_between_steps(C, rec):
    m = nn.Linear(3, 2)
    opt = torch.optim.Adam(m.parameters(), lr=0.1)

    @C
    def step(x):
        opt.zero_grad()
        loss = m(x).square().sum()
        loss.backward()
        opt.step()
        return loss

    step(r(4, 3))
    sd = copy.deepcopy(opt.state_dict())
    msd = copy.deepcopy(m.state_dict())
    step(r(4, 3, seed=1))
    m.load_state_dict(msd)
    opt.load_state_dict(sd)
    loss = step(r(4, 3, seed=1))
    rec("after", [loss, m.weight, opt.state[m.weight]["exp_avg"], opt.state[m.weight]["step"]])


@scenario
def compiled_fn_reused_after_module_deleted(C, rec):
    def f(m, x):
        return m(x).relu()

    g = C(f)
    outs = []
    for k in range(3):
        torch.manual_seed(k)
        m = nn.Linear(3, 3)
        outs.append(g(m, r(2, 3)))
        del m
    rec("outs", outs)


@scenario
def nested_compiled_inner_raises(C, rec):
    buf = torch.zeros(3)

    def inner(x):
        buf.add_(1)
        if x.sum() > 0:
            raise ValueError("inner")
        return x * 2

    ci = C(inner)

    def outer(x):
        y = x + 1
        try:
            return ci(y)
        except ValueError:
            return y * 0

    g = C(outer)
    attempt(rec, "pos", lambda: g(torch.ones(3)))
    attempt(rec, "neg", lambda: g(-torch.ones(3) * 5))
    rec("buf", buf)


@scenario
def generator_of_compiled_training_steps_closed_early(C, rec):
    m = Net()
    step = C(lambda x: m(x).square().sum())

    def steps():
        for k in range(5):
            loss = step(r(2, 4, seed=k))
            loss.backward()
            yield loss

    it = steps()
    out = [next(it), next(it)]
    it.close()
    rec("outs", out + [pgrads(m), m.steps])


# ============================================================================================
# round 3: a custom Function's backward that fails (the error at .backward(), as eager)
class _AlwaysRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("sin backward is not implemented here")


class _WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.sum(0)


class _WrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return (g,)


class _TooMany(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def backward(ctx, g):
        return g * 3, g


class _WrongDtype(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (g * 2).double()


class _GradForInt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * 2, torch.ones(())


class _Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp()


class _ForwardRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if x.shape[0] > 2:
            raise ValueError("forward refuses big inputs")
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _function_case(fn_cls, make_args, C, rec, double=False):
    def f(*args):
        return (fn_cls.apply(*args) * 1.5).sum()

    g = C(f)
    for k in range(2):
        args = make_args(k)
        attempt(rec, f"fwd{k}", lambda args=args: g(*args))
        try:
            loss = g(*args)
        except Exception:  # noqa: BLE001, S112  (recorded above)
            continue
        if double:
            attempt(
                rec,
                f"bwd{k}",
                lambda loss=loss, args=args: (
                    torch.autograd.grad(loss, args[0], create_graph=True)[0].sum().backward()
                ),
            )
        else:
            attempt(rec, f"bwd{k}", lambda loss=loss: loss.backward())
        rec(f"grads{k}", [a.grad for a in args if isinstance(a, torch.Tensor)])


@scenario
def function_backward_always_raises(C, rec):
    _function_case(_AlwaysRaises, lambda k: (r(3, seed=k).requires_grad_(),), C, rec)


@scenario
def function_backward_wrong_shape(C, rec):
    _function_case(_WrongShape, lambda k: (r(2, 3, seed=k).requires_grad_(),), C, rec)


@scenario
def function_backward_wrong_count(C, rec):
    _function_case(
        _WrongCount,
        lambda k: (r(3, seed=k).requires_grad_(), r(3, seed=9).requires_grad_()),
        C,
        rec,
    )


@scenario
def function_backward_too_many(C, rec):
    _function_case(_TooMany, lambda k: (r(3, seed=k).requires_grad_(),), C, rec)


@scenario
def function_backward_wrong_dtype(C, rec):
    _function_case(_WrongDtype, lambda k: (r(3, seed=k).requires_grad_(),), C, rec)


@scenario
def function_backward_grad_for_int(C, rec):
    _function_case(_GradForInt, lambda k: (r(3, seed=k).requires_grad_(), 3), C, rec)


@scenario
def function_once_differentiable_double_backward(C, rec):
    _function_case(_Once, lambda k: (r(3, seed=k).requires_grad_(),), C, rec, double=True)


@scenario
def function_forward_raises(C, rec):
    _function_case(_ForwardRaises, lambda k: (r(2 + k, seed=k).requires_grad_(),), C, rec)


@scenario
def function_backward_raises_in_module_training_loop(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.fail = True

        def forward(self, x):
            y = self.lin(x)
            return (_AlwaysRaises.apply(y) if self.fail else y.sin()).sum()

    m = M()
    g = C(m)
    x = r(2, 3)
    attempt(rec, "bwd", lambda: g(x).backward())
    rec("g", [m.lin.weight.grad])
    m.fail = False
    g(x).backward()
    rec("g2", [m.lin.weight.grad])


# ============================================================================================
# round 3: threads and runtime failures
@scenario
def threads_one_replays_a_failed_check_others_good(C, rec):
    def f(x, idx, acc):
        acc.add_(1)
        x.mul_(2)
        return x[idx].sum()

    g = C(f)

    def work(i):
        acc = torch.zeros(())
        out = []
        for k in range(3):
            x = r(4, seed=k)
            bad = i == 1 and k == 1
            try:
                out.append(g(x, torch.tensor([9 if bad else k]), acc))
            except IndexError:
                out.append("IndexError")  # (ours is OpIndexError, an IndexError)
            out.append(x)
        return out + [acc]

    rec("results", _threads(work))


@scenario
def threads_training_with_grad_mode_switch_inside(C, rec):
    torch.manual_seed(0)
    models = [Net(seed=i) for i in range(3)]
    g = C(lambda m, x, train: m(x).sum() if train else m(x).detach().sum())

    def work(i):
        m = models[i]
        out = []
        for k in range(2):
            train = (i + k) % 2 == 0
            with torch.set_grad_enabled(train):
                loss = g(m, r(2, 4, seed=k), train)
            out.append([loss, loss.requires_grad])
            if loss.requires_grad:
                loss.backward()
        return out + [pgrads(m), m.steps]

    rec("results", _threads(work, n=3))


# ============================================================================================
# round 4: a runtime check failing inside the user's ``with`` blocks: global state after it
def _with_block_case(ctx, C, rec, state):
    def f(x, idx):
        y = x * 2
        with ctx():
            z = y[idx] + 1
        return z * 3

    g = C(f)
    x = r(4).requires_grad_()
    attempt(rec, "bad", lambda: g(x, torch.tensor([9])))
    rec("state", state())
    attempt(rec, "good", lambda: g(x, torch.tensor([1])))
    rec("state2", state())


@scenario
def check_fails_in_no_grad(C, rec):
    _with_block_case(torch.no_grad, C, rec, torch.is_grad_enabled)


@scenario
def check_fails_in_enable_grad_under_no_grad(C, rec):
    with torch.no_grad():
        _with_block_case(torch.enable_grad, C, rec, torch.is_grad_enabled)


@scenario
def check_fails_in_inference_mode(C, rec):
    _with_block_case(
        torch.inference_mode,
        C,
        rec,
        lambda: [torch.is_inference_mode_enabled(), torch.is_grad_enabled()],
    )


@scenario
def check_fails_in_autocast(C, rec):
    _with_block_case(
        lambda: torch.autocast("cpu", dtype=torch.bfloat16),
        C,
        rec,
        lambda: [torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")],
    )


@scenario
def check_fails_in_fork_rng(C, rec):
    def f(x, idx):
        with torch.random.fork_rng():
            torch.manual_seed(123)
            y = x + torch.rand(4)
            z = y[idx]
        return z

    g = C(f)
    torch.manual_seed(5)
    attempt(rec, "bad", lambda: g(r(4), torch.tensor([9])))
    rec("after", torch.rand(3))


@scenario
def check_fails_in_saved_tensor_hooks(C, rec):
    packed = []

    def pack(t):
        packed.append(1)
        return t

    _with_block_case(
        lambda: torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        C,
        rec,
        lambda: (
            torch._C._autograd._top_saved_tensors_default_hooks(False) is None
            if hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks")
            else True
        ),
    )


@scenario
def check_fails_in_set_grad_enabled_false_functional(C, rec):
    def f(x, idx):
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        z = (x * 2)[idx]
        torch.set_grad_enabled(prev)
        return z

    g = C(f)
    attempt(rec, "bad", lambda: g(r(4).requires_grad_(), torch.tensor([9])))
    rec("grad", torch.is_grad_enabled())
    torch.set_grad_enabled(True)


@scenario
def check_fails_in_module_eval_switch(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    emb = nn.Embedding(3, 4)

    def f(x, ids):
        m.eval()
        y = m(x) + emb(ids)
        m.train()
        return y

    g = C(f)
    attempt(rec, "bad", lambda: g(r(2, 4), torch.tensor([0, 7])))
    rec("training", [m.training, m[1].training, m[1].running_mean])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, compare))
