"""Probe torch2xla's reliability: crashes where eager runs, and cache or guard mix-ups that
serve one signature's program to another (two modules of one class, closures, defaults,
globals, global switches, input layouts and Python arguments), nested and repeated compiles,
the recompile limit, threads, lifecycles (deletion, reset, copies, state loads, replaced
parameters), exceptions and warnings filters, and the persistent cache across processes
(concurrent writers, truncated and stale entries, changed bodies).

    PYTHONPATH=. python scripts/probe_reliability.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_reliability.py   # torch's own differences

The harness is ``scripts/probe_guards.py``'s: a scenario is ``fn(C, call)``, run once with
``C`` compiling and once with ``C`` the identity, every observation compared strictly
(dtype, shape, strides, requires_grad, grad_fn presence, values; errors by type). Scenarios
that need no eager twin (memory, threads' own crashes, two processes) check themselves and
return a line. Prints ``ok``, ``DIFF`` or ``CRASH`` per scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import io
import json
import os
import pathlib
import pickle
import subprocess
import sys
import tempfile
import threading
import traceback
import types
import warnings
import weakref

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")

import probe_guards as harness  # (the harness: describe, same, observe)

import torch2xla

warnings.simplefilter("ignore")
BACKEND = harness.BACKEND
rand = harness.rand
SCENARIOS: dict = {}  # compared with eager
SELF_CHECKED: dict = {}  # return None (ok) or what went wrong
ROOT = pathlib.Path(__file__).resolve().parents[1]


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def checked(fn):
    SELF_CHECKED[fn.__name__] = fn
    return fn


def compiled(f, **kw):
    kw.setdefault("backend", BACKEND)
    return torch.compile(f, **kw)


def differs(got, expected, label="") -> str | None:
    return harness.same(harness.describe(got), harness.describe(expected), label)


# ============================================================================================
# the cache keyed wrongly: modules of one class with different attributes
class Scaled(nn.Module):
    def __init__(self, eps=1e-5, scale=2.0, cfg=None, seed=0, dtype=torch.float32, n=4):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(n, n)
        self.eps = eps
        self.scale = scale
        self.cfg = cfg if cfg is not None else {"act": "relu", "dims": [0], "k": (1, 2)}
        self.register_buffer("shift", torch.arange(n, dtype=dtype))

    def forward(self, x):
        y = self.lin(x)
        y = y / (y.pow(2).mean(-1, keepdim=True) + self.eps).sqrt() * self.scale
        y = torch.relu(y) if self.cfg["act"] == "relu" else torch.tanh(y)
        for d in self.cfg["dims"]:
            y = y.cumsum(d)
        return y * self.cfg["k"][0] + self.shift * self.cfg["k"][1]


def _instances(C, call, modules, x, **kw):
    fs = [C(m, **kw) for m in modules]
    with torch.no_grad():
        for i in range(2):
            for j, f in enumerate(fs):
                call(f"m{j} call {i}", lambda f=f: f(x))


@scenario
def instances_eps(C, call):
    _instances(C, call, [Scaled(eps=1e-5), Scaled(eps=10.0), Scaled(eps=1e-5)], rand(3, 4))


@scenario
def instances_eps_dynamic(C, call):
    _instances(C, call, [Scaled(eps=1e-5), Scaled(eps=10.0)], rand(3, 4), dynamic=True)


@scenario
def instances_scale_int_float(C, call):
    _instances(C, call, [Scaled(scale=2), Scaled(scale=2.0), Scaled(scale=True)], rand(3, 4))


@scenario
def instances_list_config(C, call):
    a = Scaled(cfg={"act": "relu", "dims": [0], "k": (1, 2)})
    b = Scaled(cfg={"act": "tanh", "dims": [0, 1], "k": (1, 2)})
    c = Scaled(cfg={"act": "relu", "dims": [1], "k": (3, -1)})
    _instances(C, call, [a, b, c], rand(3, 4))


@scenario
def instances_buffer_dtype(C, call):
    _instances(
        C,
        call,
        [Scaled(dtype=torch.float32), Scaled(dtype=torch.float64), Scaled(dtype=torch.int64)],
        rand(3, 4),
    )


@scenario
def instances_param_shapes(C, call):
    ms = [Scaled(n=4), Scaled(n=5, seed=1), Scaled(n=4, seed=2)]
    fs = [C(m) for m in ms]
    with torch.no_grad():
        for i in range(2):
            for j, (m, f) in enumerate(zip(ms, fs)):
                call(f"m{j} {i}", lambda f=f, n=m.lin.in_features: f(rand(2, n)))


@scenario
def instances_one_function(C, call):
    f = C(lambda m, x: m(x))
    ms = [Scaled(eps=1e-5), Scaled(eps=3.0, scale=-1.0), Scaled(dtype=torch.float64, seed=3)]
    with torch.no_grad():
        for i in range(2):
            for j, m in enumerate(ms):
                call(f"m{j} {i}", lambda m=m: f(m, rand(3, 4)))


@scenario
def instances_config_mutated_between_calls(C, call):
    m = Scaled()
    f = C(m)
    x = rand(3, 4)
    with torch.no_grad():
        call("first", lambda: f(x))
        m.cfg["dims"].append(1)
        call("list appended", lambda: f(x))
        m.cfg["act"] = "tanh"
        call("dict entry", lambda: f(x))
        m.cfg["k"] = (2, 2)
        call("tuple replaced", lambda: f(x))
        m.eps = 5.0
        call("eps", lambda: f(x))
        m.scale = 0.5
        call("scale", lambda: f(x))


@scenario
def instances_training_flag(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(x) * (2 if self.training else 3)

    ms = [M(), M().eval(), M()]
    ms[2].bn.running_mean.fill_(1.0)
    ms[2].eval()
    _instances(C, call, ms, rand(5, 4))
    for j, m in enumerate(ms):
        call.rec(f"running mean {j}", m.bn.running_mean)


@scenario
def instances_activation_modules(C, call):
    class M(nn.Module):
        def __init__(self, act):
            super().__init__()
            self.act = act

        def forward(self, x):
            return self.act(x) + 1

    acts = [nn.GELU(), nn.GELU("tanh"), nn.LeakyReLU(0.2), nn.LeakyReLU(0.01), nn.ELU(2.0)]
    _instances(C, call, [M(a) for a in acts], rand(3, 4))


# ============================================================================================
# closures, defaults, globals, methods
def _closure(t):
    return lambda x: x * t + 1


@scenario
def closure_over_tensors(C, call):
    fs = [C(_closure(torch.full((4,), float(v)))) for v in (1, 2, 3)]
    x = rand(3, 4)
    for i in range(2):
        for j, f in enumerate(fs):
            call(f"f{j} {i}", lambda f=f: f(x))


@scenario
def closure_over_tensors_of_dtypes(C, call):
    ts = [torch.ones(4), torch.ones(4, dtype=torch.float64), torch.ones(4, dtype=torch.int64)]
    fs = [C(_closure(t)) for t in ts]
    x = rand(3, 4)
    for j, f in enumerate(fs):
        call(f"f{j}", lambda f=f: f(x))


@scenario
def closure_over_numbers(C, call):
    fs = [C(_closure(v)) for v in (2, 2.0, 3.5, -0.0, True, 10**12)]
    x = rand(3, 4)
    for i in range(2):
        for j, f in enumerate(fs):
            call(f"f{j} {i}", lambda f=f: f(x))


@scenario
def closure_cell_changed(C, call):
    k = 2.0
    t = torch.ones(4)

    def f(x):
        return x * k + t

    g = C(f)
    x = rand(3, 4)
    call("first", lambda: g(x))
    k = 5.0
    call("k changed", lambda: g(x))
    t = torch.full((4,), 7.0)
    call("t rebound", lambda: g(x))
    t.mul_(2)
    call("t mutated", lambda: g(x))


@scenario
def closure_over_a_module(C, call):
    def make(m):
        return lambda x: m(x) * 2

    ms = [nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)]
    fs = [C(make(m)) for m in ms]
    with torch.no_grad():
        for i in range(2):
            for j, f in enumerate(fs):
                call(f"f{j} {i}", lambda f=f: f(rand(3, 4)))


def _with_default(x, k=2.0, n=1):
    return x * k + x.roll(n, 0)


@scenario
def defaults_changed(C, call):
    f = types.FunctionType(_with_default.__code__, _with_default.__globals__, "f", (2.0, 1), None)
    g = C(f)
    x = rand(4, 3)
    call("first", lambda: g(x))
    f.__defaults__ = (3.0, 1)
    call("float default", lambda: g(x))
    f.__defaults__ = (3.0, 2)
    call("int default", lambda: g(x))
    f.__kwdefaults__ = None
    call("again", lambda: g(x))


@scenario
def same_code_other_defaults(C, call):
    f1 = types.FunctionType(_with_default.__code__, _with_default.__globals__, "f1", (2.0, 1))
    f2 = types.FunctionType(_with_default.__code__, _with_default.__globals__, "f2", (5.0, 2))
    g1, g2 = C(f1), C(f2)
    x = rand(4, 3)
    for i in range(2):
        call(f"f1 {i}", lambda: g1(x))
        call(f"f2 {i}", lambda: g2(x))


G_SCALE = 2.0
G_TENSOR = torch.ones(3)
G_FLAG = True
G_INT = 3
G_LIST = [1.0, 2.0]


def _uses_globals(x):
    y = x * G_SCALE + G_TENSOR
    if G_FLAG:
        y = y.relu()
    return y.roll(G_INT, 0) + sum(G_LIST)


@scenario
def same_code_other_globals(C, call):
    g1 = dict(_uses_globals.__globals__)
    g2 = dict(_uses_globals.__globals__, G_SCALE=-1.0, G_TENSOR=torch.zeros(3), G_FLAG=False)
    f1 = types.FunctionType(_uses_globals.__code__, g1, "f1")
    f2 = types.FunctionType(_uses_globals.__code__, g2, "f2")
    c1, c2 = C(f1), C(f2)
    x = rand(5, 3)
    for i in range(2):
        call(f"f1 {i}", lambda: c1(x))
        call(f"f2 {i}", lambda: c2(x))


@scenario
def globals_changed_between_calls(C, call):
    global G_SCALE, G_TENSOR, G_FLAG, G_INT, G_LIST
    saved = (G_SCALE, G_TENSOR, G_FLAG, G_INT, G_LIST)
    try:
        f = C(_uses_globals)
        x = rand(5, 3)
        call("first", lambda: f(x))
        G_SCALE = 4.0
        call("float", lambda: f(x))
        G_TENSOR = torch.full((3,), 2.0)
        call("tensor rebound", lambda: f(x))
        G_TENSOR.add_(1)
        call("tensor mutated", lambda: f(x))
        G_TENSOR = torch.ones(3, dtype=torch.float64)
        call("tensor dtype", lambda: f(x))
        G_FLAG = False
        call("flag", lambda: f(x))
        G_INT = 1
        call("int", lambda: f(x))
        G_LIST.append(3.0)
        call("list appended", lambda: f(x))
    finally:
        G_SCALE, G_TENSOR, G_FLAG, G_INT, G_LIST = saved
        G_LIST[:] = [1.0, 2.0]


@scenario
def method_of_two_instances(C, call):
    a, b = Scaled(eps=1e-5), Scaled(eps=2.0, scale=-3.0, seed=4)
    fa, fb = C(a.forward), C(b.forward)
    f_unbound = C(Scaled.forward)
    x = rand(3, 4)
    with torch.no_grad():
        for i in range(2):
            call(f"a {i}", lambda: fa(x))
            call(f"b {i}", lambda: fb(x))
            call(f"unbound a {i}", lambda: f_unbound(a, x))
            call(f"unbound b {i}", lambda: f_unbound(b, x))


@scenario
def functools_partial(C, call):
    import functools

    p1 = C(functools.partial(_with_default, k=1.5))
    p2 = C(functools.partial(_with_default, k=-2.0, n=2))
    x = rand(4, 3)
    for i in range(2):
        call(f"p1 {i}", lambda: p1(x))
        call(f"p2 {i}", lambda: p2(x))


# ============================================================================================
# global switches between calls
@scenario
def train_eval_flips(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.0), nn.ReLU())
    f = C(m)
    x = rand(6, 4)
    with torch.no_grad():
        for i, mode in enumerate(("train", "eval", "train", "eval", "eval", "train")):
            getattr(m, mode)()
            call(f"{mode} {i}", lambda: f(x))
            call.rec(f"stats {i}", [m[1].running_mean, m[1].running_var, m[1].num_batches_tracked])


@scenario
def train_flag_of_a_submodule_only(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    f = C(m)
    x = rand(6, 4)
    with torch.no_grad():
        call("train", lambda: f(x))
        m[1].eval()
        call("bn eval", lambda: f(x))
        m[1].train()
        call("bn train", lambda: f(x))
        call.rec("stats", [m[1].running_mean, m[1].num_batches_tracked])


@scenario
def grad_enabled_flips(C, call):
    w = rand(4, 4, rg=True)
    f = C(lambda x: (x @ w).tanh().sum(0))
    for i, on in enumerate((True, False, True, False, True)):
        with torch.set_grad_enabled(on):
            out = call(f"out {i}", lambda i=i: f(rand(3, 4, seed=i)))
        if on and isinstance(out, torch.Tensor):
            out.sum().backward()
            call.rec(f"grad {i}", w.grad)
            w.grad = None


@scenario
def autocast_switches(C, call):
    f = C(lambda x, w: (x @ w).softmax(-1))
    x, w = rand(3, 4), rand(4, 5)
    for i, (on, dt) in enumerate(
        ((False, None), (True, torch.bfloat16), (True, torch.float16), (False, None))
    ):
        with torch.autocast("cpu", enabled=on, dtype=dt or torch.bfloat16):
            call(f"{on} {dt} {i}", lambda: f(x, w))


@scenario
def autocast_cache_enabled_and_nested(C, call):
    f = C(lambda x, w: (x @ w) + (x.double() @ w.double()).float())
    x, w = rand(3, 4), rand(4, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        call("outer", lambda: f(x, w))
        with torch.autocast("cpu", enabled=False):
            call("inner off", lambda: f(x, w))
        with torch.autocast("cpu", dtype=torch.float16):
            call("inner fp16", lambda: f(x, w))
    call("none", lambda: f(x, w))


@scenario
def default_dtype_changes(C, call):
    f = C(lambda x: x + torch.ones(3) + torch.arange(3) * 0.5 + torch.tensor(1.5))
    x = rand(3)
    try:
        for i, dt in enumerate((torch.float32, torch.float64, torch.float32, torch.float16)):
            torch.set_default_dtype(dt)
            call(f"{dt} {i}", lambda: f(x))
            call(f"{dt} {i} f64 input", lambda: f(x.double()))
    finally:
        torch.set_default_dtype(torch.float32)


@scenario
def default_dtype_changes_dynamic(C, call):
    f = C(lambda x: x.sum() + torch.zeros(x.shape[0]), dynamic=True)
    try:
        for i, dt in enumerate((torch.float32, torch.float64, torch.float32)):
            torch.set_default_dtype(dt)
            call(f"{dt} {i}", lambda i=i: f(rand(3 + i, dtype=torch.float16)))
    finally:
        torch.set_default_dtype(torch.float32)


@scenario
def deterministic_flag_flips(C, call):
    def f(x, i, v):
        return x.index_put((i,), v, accumulate=True), x.scatter_add(0, i, v)

    g = C(f)
    x, i, v = rand(5), torch.tensor([0, 1, 1, 3, 0]), rand(5, seed=1)
    try:
        for k, on in enumerate((False, True, False)):
            torch.use_deterministic_algorithms(on)
            call(f"{on} {k}", lambda: g(x, i, v))
    finally:
        torch.use_deterministic_algorithms(False)


@scenario
def matmul_precision_flips(C, call):
    f = C(lambda x, w: x @ w)
    x, w = rand(8, 64), rand(64, 8)
    try:
        for k, p in enumerate(("highest", "high", "medium", "highest")):
            torch.set_float32_matmul_precision(p)
            call(f"{p} {k}", lambda: f(x, w))
    finally:
        torch.set_float32_matmul_precision("highest")


@scenario
def inference_mode_flips(C, call):
    f = C(lambda x: x * 2 + 1)
    x = rand(3)
    call("normal", lambda: f(x))
    with torch.inference_mode():
        call("inference", lambda: f(x))
        xi = rand(3)
    call("inference tensor outside", lambda: f(xi))
    call("normal again", lambda: f(x))


# ============================================================================================
# inputs that differ between calls
@scenario
def inputs_layouts(C, call):
    f = C(lambda x, y: (x * y + x.sum(0), (x + 1).view(-1) if x.is_contiguous() else x.t()))
    base = rand(8, 8)
    cases = {
        "contiguous": (rand(4, 4), rand(4, 4, seed=1)),
        "transposed": (rand(4, 4).t(), rand(4, 4, seed=1)),
        "offset": (base[2:6, 2:6], rand(4, 4, seed=1)),
        "strided": (base[::2, ::2], base[1::2, 1::2]),
        "expanded": (rand(1, 4).expand(4, 4), rand(4, 4, seed=1)),
        "contiguous again": (rand(4, 4, seed=3), rand(4, 4, seed=1)),
    }
    for name, args in cases.items():
        call(name, lambda args=args: f(*args))


@scenario
def inputs_channels_last(C, call):
    conv = nn.Conv2d(3, 4, 3, padding=1)
    f = C(lambda x: conv(x).relu() + x.mean(1, keepdim=True))
    x = rand(2, 3, 6, 6)
    with torch.no_grad():
        call("nchw", lambda: f(x))
        call("channels_last", lambda: f(x.to(memory_format=torch.channels_last)))
        call("nchw again", lambda: f(x + 1))
        call("channels_last again", lambda: f((x * 2).to(memory_format=torch.channels_last)))


@scenario
def inputs_requires_grad_toggles(C, call):
    f = C(lambda x, y: (x * y).sum() + x.sin().sum())
    for i, (rx, ry) in enumerate(((False, False), (True, False), (False, True), (True, True))):
        x, y = rand(3, rg=rx), rand(3, seed=1, rg=ry)
        out = call(f"out {i}", lambda x=x, y=y: f(x, y))
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.backward()
        call.rec(f"grads {i}", [x.grad, y.grad])


@scenario
def inputs_view_of_another(C, call):
    def f(x, y):
        y.add_(1)
        return x * 2, y.sum()

    g = C(f)
    for i in range(2):
        a, b = rand(6, seed=i), rand(6, seed=10 + i)
        call(f"distinct {i}", lambda a=a, b=b: (g(a, b), a, b))
        z = rand(8, seed=20 + i)
        call(f"y view of x {i}", lambda z=z: (g(z, z[2:]), z))
        z2 = rand(6, seed=30 + i)
        call(f"same tensor {i}", lambda z2=z2: (g(z2, z2), z2))


@scenario
def inputs_dtypes_and_devices(C, call):
    f = C(lambda x: (x * 3, x.sum(), x.to(torch.float64).mean()))
    for dt in (torch.float32, torch.int32, torch.float64, torch.uint8, torch.float16, torch.int8):
        call(str(dt), lambda dt=dt: f(rand(4, dtype=dt)))
    call("meta", lambda: f(torch.ones(4, device="meta")).__class__)


@scenario
def inputs_zero_size(C, call):
    f = C(lambda x: (x.sum(0), x.amax(0) if x.shape[0] else x.sum(0), x * 2, x.mean(0)))
    for shape in ((3, 4), (0, 4), (3, 0), (0, 0), (5, 4)):
        call(str(shape), lambda shape=shape: f(rand(*shape)))


@scenario
def inputs_zero_size_dynamic(C, call):
    f = C(lambda x: (x.sum(0), x.softmax(0), x * x.shape[0]), dynamic=True)
    for shape in ((3, 4), (0, 4), (1, 4), (2, 4), (0, 4)):
        call(str(shape), lambda shape=shape: f(rand(*shape)))


@scenario
def inputs_0d_vs_1_element(C, call):
    f = C(lambda x, y: (x + y, (x * y).sum(), x.reshape(-1)))
    cases = [
        (rand(3), torch.tensor(2.0)),
        (rand(3), torch.tensor([2.0])),
        (rand(3), torch.tensor(2.0, dtype=torch.float64)),
        (rand(3), torch.tensor([2.0], dtype=torch.float64)),
        (torch.tensor(1.0), torch.tensor([3.0])),
        (torch.tensor(1.0), torch.tensor(3.0)),
        (rand(3, dtype=torch.float16), torch.tensor(2, dtype=torch.int64)),
    ]
    for i, args in enumerate(cases):
        call(f"case {i}", lambda args=args: f(*args))


@scenario
def scalar_nan_and_inf_args(C, call):
    f = C(lambda x, s: (x * s, x.clamp(max=s), torch.where(x > 0, s, x), x + s))
    x = rand(4)
    for s in (1.0, float("nan"), float("inf"), -float("inf"), 2.0, float("nan"), -0.0):
        call(repr(s), lambda s=s: f(x, s))


@scenario
def scalar_bool_vs_int_vs_float(C, call):
    f = C(lambda x, s: (x * s, x.to(torch.int64) + s, torch.full((2,), s)))
    x = rand(3)
    for s in (True, 1, 1.0, False, 0, 0.0, 2, True):
        call(f"{type(s).__name__} {s}", lambda s=s: f(x, s))


@scenario
def scalar_int_specialization(C, call):
    f = C(lambda x, n: (x * n, x.roll(n, 0), x.new_full((2,), n), x.sum() // max(n, 1)))
    x = rand(5)
    for n in (0, 1, 2, 3, 1, 0, -1, 7, 2):
        call(f"n={n}", lambda n=n: f(x, n))


@scenario
def scalar_large_ints(C, call):
    f = C(lambda x, n: (x.to(torch.int64) + n, x * n, torch.full((2,), n), n * 2 + 1))
    x = rand(3) * 10
    for n in (3, 2**31, 2**40 + 1, 2**62, 2**63 - 1, -(2**63), -(2**31) - 1, 5):
        call(f"n={n}", lambda n=n: f(x, n))


@scenario
def scalar_large_ints_as_values(C, call):
    f = C(lambda x, n: x.to(torch.int64) * 0 + n)
    x = rand(3)
    for n in (1, 2, 2**53 + 1, 2**63 - 1, -(2**63), 4):
        call(f"n={n}", lambda n=n: f(x, n))


@scenario
def scalar_int_then_tensor(C, call):
    f = C(lambda x, n: x * n + 1)
    x = rand(3)
    for i, n in enumerate((2, torch.tensor(2), 2.5, torch.tensor(2.5), torch.tensor([2.5]), 3)):
        call(f"case {i}", lambda n=n: f(x, n))


@scenario
def scalar_kwargs_order(C, call):
    def f(x, *, a=1.0, b=2.0):
        return x * a - b

    g = C(f)
    x = rand(3)
    call("defaults", lambda: g(x))
    call("a", lambda: g(x, a=3.0))
    call("b", lambda: g(x, b=3.0))
    call("b a", lambda: g(x, b=-1.0, a=0.5))
    call("a b", lambda: g(x, a=-1.0, b=0.5))


@scenario
def python_containers_of_tensors(C, call):
    def f(d, xs):
        return d["a"] * 2 + sum(xs), len(xs)

    g = C(f)
    call("2", lambda: g({"a": rand(3)}, [rand(3, seed=1), rand(3, seed=2)]))
    call("3", lambda: g({"a": rand(3)}, [rand(3, seed=1), rand(3, seed=2), rand(3, seed=3)]))
    call("tuple", lambda: g({"a": rand(3)}, (rand(3, seed=1),)))
    call("dict extra", lambda: g({"a": rand(3), "b": 1}, [rand(3, seed=1)]))


@scenario
def dataclass_and_namedtuple_inputs(C, call):
    import collections
    import dataclasses

    P = collections.namedtuple("P", "x k")

    @dataclasses.dataclass
    class Q:
        x: torch.Tensor
        k: float

    f = C(lambda p, q: p.x * p.k + q.x * q.k)
    for i, (k1, k2) in enumerate(((1.0, 2.0), (3.0, 2.0), (1.0, -1.0))):
        call(f"{i}", lambda k1=k1, k2=k2: f(P(rand(3), k1), Q(rand(3, seed=1), k2)))


# ============================================================================================
# nested and repeated compiles; the recompile limit
@scenario
def nested_compile(C, call):
    inner = C(lambda x: x.sin() * 2)
    outer = C(lambda x: inner(x) + inner(x * 2).cos())
    x = rand(4)
    call("outer", lambda: outer(x))
    call("inner", lambda: inner(x))
    call("outer again", lambda: outer(x + 1))
    call(
        "outer grad",
        lambda: torch.autograd.grad(outer(rand(4, rg=True)).sum(), [], allow_unused=True),
    )


@scenario
def nested_compile_of_a_module(C, call):
    torch.manual_seed(0)
    inner = nn.Linear(4, 4)
    inner_c = C(inner)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner_c

        def forward(self, x):
            return self.inner(x).relu() + 1

    o = Outer()
    oc = C(o)
    x = rand(2, 4, rg=True)
    out = call("out", lambda: oc(x))
    out.sum().backward()
    call.rec("grads", [x.grad, inner.weight.grad])


@scenario
def compiled_twice_other_options(C, call):
    def f(x, i):
        return x[i] * 2, (x.sin() + 1).sum()

    kw1 = {"options": {"checks": False}} if BACKEND == "xla" else {}
    kw2 = {"options": {"checks": True}} if BACKEND == "xla" else {}
    g1, g2 = C(f, **kw1), C(f, **kw2)
    x = rand(5)
    call("g1", lambda: g1(x, torch.tensor([1, 2])))
    call("g2", lambda: g2(x, torch.tensor([1, 2])))
    call("g2 bad", lambda: g2(x, torch.tensor([1, 9])))
    call("g1 again", lambda: g1(x, torch.tensor([3, 4])))


@scenario
def compiled_twice_other_modes(C, call):
    def f(x):
        return (x @ x.t()).softmax(-1)

    g1 = C(f)
    g2 = C(f, dynamic=True)
    g3 = C(f, fullgraph=True)
    for i in range(2):
        for j, g in enumerate((g1, g2, g3)):
            call(f"g{j} {i}", lambda g=g, i=i: g(rand(3 + i, 4)))


@scenario
def compiled_module_and_its_forward(C, call):
    m = Scaled()
    a, b = C(m), C(m.forward)
    with torch.no_grad():
        call("a", lambda: a(rand(3, 4)))
        m.scale = 5.0
        call("b", lambda: b(rand(3, 4)))
        call("a", lambda: a(rand(3, 4)))


@scenario
def recompile_limit_eager_fallback(C, call):
    saved = torch._dynamo.config.cache_size_limit, torch._dynamo.config.recompile_limit
    torch._dynamo.config.cache_size_limit = 2
    torch._dynamo.config.recompile_limit = 2
    try:
        f = C(lambda x, k: x * k + x.sum())
        x = rand(4)
        for k in range(6):
            call(f"k={k}", lambda k=k: f(x, torch.full((), k) if k % 2 else k))
        for k in range(6):
            call(f"again k={k}", lambda k=k: f(x, torch.full((), k) if k % 2 else k))
    finally:
        torch._dynamo.config.cache_size_limit, torch._dynamo.config.recompile_limit = saved


@scenario
def recompile_limit_dtypes(C, call):
    saved = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 2
    try:
        f = C(lambda x: (x * 2, x.sum(0)))
        for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.float16):
            call(str(dt), lambda dt=dt: f(rand(3, 4, dtype=dt)))
        call("float32 again", lambda: f(rand(3, 4)))
    finally:
        torch._dynamo.config.recompile_limit = saved


@scenario
def dynamo_reset_between_calls(C, call):
    m = Scaled()
    f = C(m)
    with torch.no_grad():
        call("first", lambda: f(rand(3, 4)))
        torch._dynamo.reset()
        m.eps = 3.0
        call("after reset", lambda: f(rand(3, 4)))
        torch._dynamo.reset()
        call("other shape", lambda: f(rand(5, 4)))


@scenario
def clear_caches_between_calls(C, call):
    f = C(lambda x: x.cumsum(0) * 2, dynamic=True)
    for i in range(4):
        call(f"{i}", lambda i=i: f(rand(3 + i)))
        if BACKEND == "xla":
            torch2xla.clear_caches()


# ============================================================================================
# lifecycle
@scenario
def state_dict_load_after_compile(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    other = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(3)
        other[1].running_mean.fill_(2.0)
    f = C(m.eval())
    x = rand(3, 4)
    with torch.no_grad():
        call("before", lambda: f(x))
        m.load_state_dict(other.state_dict())
        call("loaded", lambda: f(x))
        m.load_state_dict(
            {k: v * 0 + 1 for k, v in other.state_dict().items()}, strict=True, assign=True
        )
        call("assigned", lambda: f(x))


@scenario
def parameter_replaced(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    f = C(m)
    x = rand(2, 4)
    call("before", lambda: f(x))
    m.weight = nn.Parameter(torch.ones(3, 4))
    call("new weight", lambda: f(x))
    m.bias = None
    call("no bias", lambda: f(x))
    m.weight = nn.Parameter(torch.ones(3, 4, dtype=torch.float64))
    call("f64 weight", lambda: f(x))
    m.weight = nn.Parameter(torch.ones(5, 4))
    call("other shape", lambda: f(x))


@scenario
def module_to_float64_after_compile(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    f = C(m)
    x = rand(2, 4)
    with torch.no_grad():
        call("f32", lambda: f(x))
        m.to(torch.float64)
        call("f64", lambda: f(x.double()))
        m.to(torch.bfloat16)
        call("bf16", lambda: f(x.bfloat16()))
        m.float()
        call("f32 again", lambda: f(x))


@scenario
def module_requires_grad_flip_and_training(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    f = C(m)
    for i, rg in enumerate((True, False, True)):
        m.requires_grad_(rg)
        x = rand(3, 4, seed=i)
        out = call(f"out {i}", lambda x=x: f(x))
        if out.requires_grad:
            out.sum().backward()
        call.rec(f"grads {i}", [m.weight.grad, m.bias.grad])
        m.zero_grad(set_to_none=True)


@scenario
def optimizer_param_groups_change(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = torch.optim.SGD([m.weight], lr=0.1, momentum=0.9)
    step = C(lambda: opt.step())
    x = rand(3, 4)
    for i in range(5):
        m(x).pow(2).sum().backward()
        call(f"step {i}", step)
        call.rec(f"params {i}", [m.weight.detach().clone(), m.bias.detach().clone()])
        m.zero_grad(set_to_none=True)
        if i == 1:
            opt.param_groups[0]["lr"] = 0.5
        if i == 2:
            opt.add_param_group({"params": [m.bias], "lr": 0.2})
        if i == 3:
            opt.param_groups[0]["momentum"] = 0.0


@scenario
def dropout_seed_reproducible(C, call):
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    f = C(m)
    x = rand(4, 8)
    torch.manual_seed(123)
    a = f(x)
    torch.manual_seed(123)
    b = f(x)
    c = f(x)
    call.rec("same seed, same mask", torch.equal(a, b))
    call.rec("next call, other mask", torch.equal(b, c))
    torch.manual_seed(123)
    with torch.no_grad():
        d = f(x)
    call.rec("no_grad same mask", torch.equal(a.detach(), d))


@scenario
def dropout_functional_seed_between_compiles(C, call):
    f1 = C(lambda x: F.dropout(x, 0.5) * 2)
    f2 = C(lambda x: F.dropout(x, 0.5) * 2)
    x = torch.ones(64)
    torch.manual_seed(5)
    a = f1(x)
    torch.manual_seed(5)
    b = f2(x)
    call.rec("two compiled functions, one seed", torch.equal(a, b))
    torch.manual_seed(5)
    torch.rand(3)
    c = f1(x)
    call.rec("generator consumed", torch.equal(a, c))


@scenario
def deepcopy_of_compiled_module(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    f = C(m)
    x = rand(3, 4)
    call("first", lambda: f(x))
    g = copy.deepcopy(f)
    with torch.no_grad():
        for p in (g._orig_mod if hasattr(g, "_orig_mod") else g).parameters():
            p.mul_(2)
    call("copy", lambda: g(x))
    call("original", lambda: f(x))
    call.rec("stats", [m[1].running_mean])


@scenario
def pickle_of_compiled_module_state(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    f = C(m)
    x = rand(3, 4)
    call("first", lambda: f(x))
    buf = io.BytesIO()
    torch.save(f.state_dict(), buf)
    buf.seek(0)
    m2 = nn.Linear(4, 2)
    sd = torch.load(buf)
    sd = {k.removeprefix("_orig_mod."): v for k, v in sd.items()}
    m2.load_state_dict(sd)
    f2 = C(m2)
    call("restored", lambda: f2(x))
    m3 = pickle.loads(pickle.dumps(m))
    f3 = C(m3)
    call("pickled module", lambda: f3(x))


@scenario
def register_buffer_after_compile(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.ones(3))

        def forward(self, x):
            y = x + self.b
            if hasattr(self, "extra"):
                y = y * self.extra
            return y

    m = M()
    f = C(m)
    x = rand(3)
    call("first", lambda: f(x))
    m.register_buffer("extra", torch.full((3,), 2.0))
    call("extra buffer", lambda: f(x))
    m.b = torch.zeros(3)
    call("b reassigned", lambda: f(x))
    del m.extra
    call("extra deleted", lambda: f(x))


@scenario
def apply_init_after_compile(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    f = C(m)
    x = rand(3, 4)
    with torch.no_grad():
        call("before", lambda: f(x))
        m.apply(
            lambda mod: nn.init.constant_(mod.weight, 0.5) if isinstance(mod, nn.Linear) else None
        )
        call("after apply", lambda: f(x))
        m[0].weight.data = torch.full((4, 4), -1.0)
        call("data reassigned", lambda: f(x))


@scenario
def compiled_training_steps_with_new_optimizer(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    f = C(m)
    x, y = rand(6, 4), rand(6, 1, seed=1)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    for i in range(3):
        loss = F.mse_loss(f(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        call.rec(f"loss {i}", loss.detach())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(2):
        loss = F.mse_loss(f(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        call.rec(f"sgd loss {i}", loss.detach())
    call.rec("params", [p.detach().clone() for p in m.parameters()])


# ============================================================================================
# exceptions
class _Boom(Exception):
    pass


@scenario
def exception_after_graph_break_then_retry(C, call):
    state = {"n": 0}

    def maybe_raise(x):
        state["n"] += 1
        if state["n"] == 1:
            raise _Boom("first call")
        return x

    def f(x):
        y = x.sin() * 2
        print(end="")  # graph break
        y = maybe_raise(y)
        return y.cos() + 1

    g = C(f)
    x = rand(4)
    call("first raises", lambda: g(x))
    call("retry", lambda: g(x))
    call("again", lambda: g(x * 2))


@scenario
def eager_error_first_then_good(C, call):
    f = C(lambda x, w: (x @ w).relu())
    call("bad shapes", lambda: f(rand(3, 4), rand(5, 2)))
    call("good", lambda: f(rand(3, 4), rand(4, 2)))
    call("bad dtype", lambda: f(rand(3, 4), rand(4, 2, dtype=torch.float64)))
    call("good again", lambda: f(rand(3, 4), rand(4, 2)))


@scenario
def eager_error_in_backward_then_good(C, call):
    f = C(lambda x: x.exp().sum())
    x = rand(3, rg=True)
    out = f(x)
    out.backward()
    call.rec("grad", x.grad)
    call("second backward raises", lambda: out.backward())
    x.grad = None
    out = f(x)
    out.backward()
    call.rec("grad again", x.grad)


@scenario
def exception_inside_forward_of_a_module(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            y = self.lin(x)
            if (y.sum() > 1e9).item():  # graph break on data
                raise ValueError("too big")
            return y * 2

    torch.manual_seed(0)
    m = M()
    f = C(m)
    with torch.no_grad():
        call("ok", lambda: f(rand(2, 4)))
        call("raises", lambda: f(rand(2, 4) * 1e12))
        call("ok again", lambda: f(rand(2, 4, seed=2)))
    call.rec("calls", m.calls)


@scenario
def warnings_as_errors(C, call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = C(lambda x, w: F.layer_norm(x @ w, (3,)).softmax(-1))
        call("first", lambda: f(rand(2, 4), rand(4, 3)))
        call("second shape", lambda: f(rand(5, 4), rand(4, 3)))
        m = C(nn.Sequential(nn.Conv2d(2, 2, 3), nn.BatchNorm2d(2), nn.ReLU()))
        x = rand(1, 2, 5, 5)
        call("module", lambda: m(x).sum().backward())
        g = C(lambda x: x.cumsum(0) * x.shape[0], dynamic=True)
        for n in (3, 4, 6):
            call(f"dynamic {n}", lambda n=n: g(rand(n)))


@scenario
def warnings_as_errors_training(C, call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.0), nn.Linear(8, 1))
        f = C(m)
        x = rand(3, 4)
        for i in range(2):
            loss = f(x).sum()
            loss.backward()
            call.rec(f"loss {i}", loss.detach())
            call.rec(f"grad {i}", m[0].weight.grad)
            m.zero_grad()


@scenario
def warnings_always_recorded(C, call):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        f = C(lambda x: x.sin() + x.cos())
        call("a", lambda: f(rand(3)))
        call("b", lambda: f(rand(4)))


# ============================================================================================
# generators, context managers, async
@scenario
def compiled_inside_generator(C, call):
    f = C(lambda x: x * 2 + 1)

    def gen(xs):
        for x in xs:
            yield f(x)

    call("gen", lambda: list(gen([rand(3, seed=i) for i in range(3)])))


@scenario
def compiled_consumes_generator(C, call):
    def f(x):
        return sum(x * k for k in range(3)) + torch.stack(tuple(t * 1 for t in (x, x * 2))).sum(0)

    g = C(f)
    call("a", lambda: g(rand(3)))
    call("b", lambda: g(rand(3, seed=1)))


@scenario
def asyncio_tasks(C, call):
    f = C(lambda x: x.tanh() * 3)

    async def one(i):
        await asyncio.sleep(0)
        return f(rand(4, seed=i))

    async def main():
        return await asyncio.gather(*(one(i) for i in range(4)))

    call("gather", lambda: list(asyncio.run(main())))

    async def in_executor():
        loop = asyncio.get_running_loop()
        return await asyncio.gather(
            *(loop.run_in_executor(None, f, rand(4, seed=i)) for i in range(4))
        )

    call("executor", lambda: list(asyncio.run(in_executor())))


@scenario
def compiled_context_manager_function(C, call):
    @contextlib.contextmanager
    def scaled():
        yield 3.0

    def f(x):
        with scaled() as s:
            return x * s

    g = C(f)
    call("a", lambda: g(rand(3)))


# ============================================================================================
# threads (compared with eager: each thread's results in order)
def _threaded(call, work, n=4):
    results: dict = {}
    barrier = threading.Barrier(n)

    def worker(tid):
        barrier.wait()
        out = []
        try:
            out = work(tid)
        except Exception as e:  # noqa: BLE001
            out = e
        results[tid] = out

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    for tid in range(n):
        call.rec(f"thread {tid}", results.get(tid, "hung"))


@scenario
def threads_first_call_together(C, call):
    f = C(lambda x: (x @ x.t()).softmax(-1).sum(0))
    _threaded(call, lambda tid: [f(rand(5, 5, seed=tid))], n=6)


@scenario
def threads_first_call_module(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8).eval(), nn.ReLU())
    f = C(m)

    def work(tid):
        with torch.no_grad():
            return [f(rand(3, 4, seed=tid)) for _ in range(3)]

    _threaded(call, work)


@scenario
def threads_different_functions(C, call):
    fns = [
        C(lambda x: x.sin()),
        C(lambda x: x.cumsum(0)),
        C(lambda x: x.softmax(0) * 2),
        C(lambda x: (x > 0).float().mean()),
    ]
    _threaded(call, lambda tid: [fns[tid](rand(6, seed=tid)) for _ in range(3)])


@scenario
def threads_training_concurrent(C, call):
    torch.manual_seed(0)
    ms = [nn.Linear(4, 2) for _ in range(3)]
    fs = [C(m) for m in ms]

    def work(tid):
        out = []
        for i in range(3):
            x = rand(3, 4, seed=10 * tid + i)
            loss = fs[tid](x).pow(2).sum()
            loss.backward()
            out.append([loss.detach(), ms[tid].weight.grad.clone()])
            ms[tid].zero_grad()
        return out

    _threaded(call, work, n=3)


@scenario
def threads_autocast_per_thread(C, call):
    f = C(lambda x, w: x @ w)
    w = rand(4, 4)

    def work(tid):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(tid % 2)):
            return [f(rand(3, 4, seed=tid), w) for _ in range(2)]

    _threaded(call, work)


@scenario
def threads_dynamic_sizes_training(C, call):
    w = rand(3, 3, rg=True)
    f = C(lambda x: (x @ w).relu().sum(), dynamic=True)

    def work(tid):
        out = []
        for i in range(3):
            x = rand(2 + tid + i, 3, seed=tid * 7 + i)
            with torch.no_grad() if tid % 2 else contextlib.nullcontext():
                out.append(f(x))
        return [o.detach() for o in out]

    _threaded(call, work)


@scenario
def thread_calls_during_backward(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1))
    f = C(m)
    g = C(lambda x: x.exp().sum(0))
    x = rand(32, 16)
    f(x).sum().backward()  # warm
    m.zero_grad()
    results: list = []
    started = threading.Event()

    def other():
        started.wait(30)
        for i in range(20):
            results.append(g(rand(3, seed=i)))

    t = threading.Thread(target=other)
    t.start()
    loss = f(x).sum()
    started.set()
    loss.backward()
    t.join(120)
    call.rec("grads", [p.grad for p in m.parameters()])
    call.rec("other", results)


# ============================================================================================
# outputs are the caller's tensors: written, resized, kept across calls
@scenario
def outputs_written_then_called_again(C, call):
    f = C(lambda x: (x + 1, torch.zeros(3), torch.arange(3), x.sin(), x.sin(), x))
    x = rand(3)
    outs = call("first", lambda: f(x))
    for o in outs[:5]:
        o.add_(7)
    call("written", lambda: outs)
    call("second", lambda: f(x))
    call("x", lambda: x)


@scenario
def outputs_identical_values(C, call):
    def f(x):
        y = x * 2
        return y, y, y.view(-1), x * 2

    g = C(f)
    a, b, c, d = call("out", lambda: g(rand(2, 2)))
    a.add_(1)
    d.sub_(1)
    call("after writes", lambda: [a, b, c, d])


@scenario
def outputs_resized(C, call):
    f = C(lambda x: (x * 2, x.sum(), torch.ones(2, 2)))
    outs = f(rand(4))
    call("grow", lambda: outs[0].resize_(10).shape)
    call("grow 0-d", lambda: outs[1].resize_(3).shape)
    call("shrink", lambda: outs[2].resize_(1))
    outs = f(rand(4))
    call("cat out=", lambda: torch.cat([outs[0], outs[0]], out=outs[0]))
    call("storage grows", lambda: outs[2].untyped_storage().resize_(64).size())


@scenario
def outputs_set_and_share_memory(C, call):
    f = C(lambda x: (x * 2, x + 1))
    a, b = f(rand(4))
    call("share_memory_", lambda: a.share_memory_())
    call("set_", lambda: b.set_(torch.arange(5.0)))
    call("pickled", lambda: pickle.loads(pickle.dumps((a, b))))


@scenario
def gradients_written_and_resized(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    f = C(m)
    x = rand(4, 3)
    f(x).sum().backward()
    grads = [p.grad for p in m.parameters()]
    grads[0].mul_(10)
    call("grads after one written", lambda: [p.grad for p in m.parameters()])
    f(x).sum().backward()
    call("accumulated", lambda: [p.grad for p in m.parameters()])
    call("grad resized", lambda: m[1].bias.grad.resize_(5).shape)
    call("grad set_", lambda: m[0].bias.grad.set_(torch.zeros(2)))
    m.zero_grad(set_to_none=False)
    call("zeroed", lambda: [p.grad for p in m.parameters()])
    f(x).sum().backward()
    call("after zero", lambda: [p.grad for p in m.parameters()])


@scenario
def output_as_next_input_written(C, call):
    f = C(lambda x: x * 2 + 1)
    g = C(lambda y: y.mul_(3))
    y = f(rand(4))
    call("g", lambda: g(y))
    call("y", lambda: y)
    call("f again", lambda: f(y))
    y.add_(1)
    call("f after write", lambda: f(y))


@scenario
def hook_calls_compiled_in_backward(C, call):
    g = C(lambda t: t * 2 + t.sin())
    x = rand(4, rg=True)
    x.register_hook(lambda grad: g(grad))
    f = C(lambda x: (x.exp() * 3).sum())
    out = f(x)
    out.backward()
    call.rec("grad", x.grad)


@scenario
def compiled_inside_custom_function_backward(C, call):
    g = C(lambda t: t.cos() * 2)

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * g(x) / 2

    x = rand(4, rg=True)
    Fn.apply(x).sum().backward()
    call.rec("grad", x.grad)


@scenario
def recursive_compiled_call(C, call):
    def f(x, n):
        if n == 0:
            return x
        return g(x.sin(), n - 1) + 1

    g = C(f)
    call("depth 3", lambda: g(rand(3), 3))
    call("depth 1", lambda: g(rand(3), 1))


# ============================================================================================
# self-checked: memory, threads' crashes, interrupts, two processes
def _live_graphs() -> int:
    from torch2xla.guards._graph import all_graphs

    return len(all_graphs())


@checked
def many_models_released():
    import jax

    def one(i):
        m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
        f = compiled(m)
        x = torch.randn(4, 32)
        f(x).sum().backward()
        with torch.no_grad():
            f(x)
        return weakref.ref(m)

    refs = [one(i) for i in range(3)]
    gc.collect()
    base_arrays = len(jax.live_arrays())
    base_graphs = _live_graphs()
    refs += [one(i) for i in range(12)]
    torch._dynamo.reset()
    gc.collect()
    alive = sum(r() is not None for r in refs)
    arrays, graphs = len(jax.live_arrays()), _live_graphs()
    if alive:
        return f"{alive} of {len(refs)} modules still alive after reset"
    if arrays > base_arrays + 4:
        return f"live JAX arrays grew {base_arrays} -> {arrays}"
    if graphs > base_graphs:
        return f"live graphs grew {base_graphs} -> {graphs}"
    return None


@checked
def many_models_released_without_reset():
    import jax

    def one(i):
        m = nn.Sequential(nn.Linear(16, 16), nn.ReLU())
        f = compiled(m)
        with torch.no_grad():
            f(torch.randn(2, 16))
        return weakref.ref(m), weakref.ref(f)

    gc.collect()
    refs = [one(i) for i in range(10)]
    gc.collect()
    base = len(jax.live_arrays())
    refs += [one(i) for i in range(10)]
    gc.collect()
    arrays = len(jax.live_arrays())
    alive = sum(r[0]() is not None for r in refs)
    if arrays > base + 40:
        return f"live JAX arrays grew {base} -> {arrays} over 10 more models"
    if alive > len(refs):
        return f"{alive} modules alive"
    return None


@checked
def dynamic_shapes_memory_bounded():
    import jax

    f = compiled(lambda x: x.cumsum(0) * 2, dynamic=True, options={"cache_size": 4})
    for n in range(2, 8):
        f(torch.randn(n))
    gc.collect()
    base = len(jax.live_arrays())
    for n in range(8, 40):
        f(torch.randn(n))
    gc.collect()
    arrays = len(jax.live_arrays())
    if arrays > base + 8:
        return f"live JAX arrays grew {base} -> {arrays} with cache_size 4"
    return None


@checked
def keyboard_interrupt_during_first_compile():
    from torch2xla.runtime import _program

    original = _program.XlaProgram.__init__
    state = {"n": 0}

    def interrupted(self, *a, **k):
        state["n"] += 1
        if state["n"] == 1:
            raise KeyboardInterrupt
        return original(self, *a, **k)

    _program.XlaProgram.__init__ = interrupted
    try:
        f = compiled(lambda x: x.sin() * 3)
        x = torch.randn(4)
        try:
            f(x)
            return "the interrupt was swallowed"
        except KeyboardInterrupt:
            pass
        out = f(x)
        if not torch.allclose(out, x.sin() * 3):
            return "wrong result after the interrupt"
        # the lock must be free: another thread compiles
        res = []
        t = threading.Thread(target=lambda: res.append(compiled(lambda x: x.cos())(x)))
        t.start()
        t.join(60)
        if t.is_alive() or not res:
            return "a build in another thread hangs after the interrupt"
    finally:
        _program.XlaProgram.__init__ = original
    return None


@checked
def keyboard_interrupt_during_first_run():
    from torch2xla import _entry

    original = _entry.Entry.__call__
    state = {"n": 0}

    def interrupted(self, args):
        state["n"] += 1
        if state["n"] == 1:
            raise KeyboardInterrupt
        return original(self, args)

    _entry.Entry.__call__ = interrupted
    try:
        f = compiled(lambda x: x.sin() * 3)
        x = torch.randn(4)
        try:
            f(x)
            return "the interrupt was swallowed"
        except KeyboardInterrupt:
            pass
        out = f(x)
        if not torch.allclose(out, x.sin() * 3):
            return "wrong result after the interrupt"
        info = [g for g in torch2xla.cache_info() if g.frame and "lambda" in g.frame]
        return None if info else "no record"
    finally:
        _entry.Entry.__call__ = original


@checked
def keyboard_interrupt_in_bucketing_analysis():
    from torch2xla.guards.bucketing import _bucket

    original = _bucket.Bucketing.__init__
    state = {"n": 0}

    def interrupted(self, *a, **k):
        state["n"] += 1
        if state["n"] == 1:
            raise KeyboardInterrupt
        return original(self, *a, **k)

    _bucket.Bucketing.__init__ = interrupted
    try:
        f = compiled(lambda x: x.sum(0) * 2, dynamic=True)
        try:
            with torch.no_grad():
                f(torch.randn(5, 3))
        except KeyboardInterrupt:
            pass
        with torch.no_grad():
            for n in (5, 6, 7, 9):
                x = torch.randn(n, 3)
                out = f(x)
                if not torch.allclose(out, x.sum(0) * 2, atol=1e-6):
                    return f"wrong result at {n}"
    finally:
        _bucket.Bucketing.__init__ = original
    return None


@checked
def reset_in_another_thread_while_calling():
    f = compiled(lambda x: x * 2 + 1)
    x = torch.randn(4)
    f(x)
    errors: list = []
    stop = threading.Event()

    def caller():
        while not stop.is_set():
            try:
                out = f(x)
                if not torch.equal(out, x * 2 + 1):
                    errors.append("wrong value")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                return

    t = threading.Thread(target=caller)
    t.start()
    for _ in range(5):
        torch._dynamo.reset()
        torch2xla.clear_caches()
    stop.set()
    t.join(120)
    return errors[0] if errors else None


@checked
def clear_caches_while_a_thread_compiles():
    errors: list = []
    stop = threading.Event()

    def caller(tid):
        f = compiled(lambda x: x.cumsum(0) + tid, dynamic=True)
        n = 2
        while not stop.is_set() and n < 30:
            x = torch.randn(n)
            try:
                out = f(x)
                if not torch.allclose(out, x.cumsum(0) + tid, atol=1e-6):
                    errors.append("wrong value")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e)[:500])
                return
            n += 1

    ts = [threading.Thread(target=caller, args=(t,)) for t in range(2)]
    for t in ts:
        t.start()
    for _ in range(20):
        torch2xla.clear_caches()
    stop.set()
    for t in ts:
        t.join(300)
    return errors[0] if errors else None


@checked
def many_threads_one_new_signature_each():
    f = compiled(lambda x, k: x * k, dynamic=True)
    errors: list = []
    barrier = threading.Barrier(8)

    def work(tid):
        barrier.wait()
        for i in range(3):
            x = torch.randn(2 + tid + 8 * i)
            try:
                out = f(x, tid + 0.5)
                if not torch.allclose(out, x * (tid + 0.5)):
                    errors.append(f"thread {tid}: wrong value")
            except Exception as e:  # noqa: BLE001
                errors.append(f"thread {tid}: {e!r}"[:500])

    ts = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    return errors[0] if errors else None


@checked
def thread_compiles_while_main_is_in_backward():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 1))
    f = compiled(m)
    x = torch.randn(128, 64)
    errors: list = []
    go = threading.Event()

    def other():
        go.wait(30)
        for i in range(4):
            g = compiled(lambda y, i=i: (y * i).softmax(0))
            y = torch.randn(5 + i)
            try:
                if not torch.allclose(g(y), (y * i).softmax(0), atol=1e-6):
                    errors.append("wrong value")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e)[:500])

    t = threading.Thread(target=other)
    t.start()
    loss = f(x).sum()
    go.set()
    loss.backward()
    t.join(300)
    ref = copy.deepcopy(m)
    ref.zero_grad()
    ref(x).sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        if not torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-5):
            return "gradients differ"
    return errors[0] if errors else None


def _in_forked_child(q):
    torch.set_num_threads(1)  # (as DataLoader's workers: torch's own OpenMP pool after a fork)
    try:
        x = torch.full((3, 4), 0.5)
        a = _FORK_F(x)
        b = _FORK_F(torch.full((5, 4), 0.5))
        g = compiled(lambda t: t.cos() * 3)
        c = g(x)
        q.put([(t.dtype, t.tolist()) for t in (a, b, c)])  # (no tensors through pipes)
    except BaseException as e:  # noqa: BLE001  (reported by the parent)
        q.put(repr(e))


_FORK_F = None


def _fork_reference(t):
    return (t @ t.t()).sin().sum(0) * 2


@checked
def forked_child_calls_compiled_functions():
    import multiprocessing

    global _FORK_F
    _FORK_F = compiled(_fork_reference)
    x = torch.full((3, 4), 0.5)
    _FORK_F(x)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_in_forked_child, args=(q,))
    p.start()
    p.join(120)
    if p.is_alive():
        p.kill()
        return "the forked child hangs"
    got = q.get(timeout=10)
    if isinstance(got, str):
        return f"the forked child raised {got}"
    expected = [
        _fork_reference(x),
        _fork_reference(torch.full((5, 4), 0.5)),
        x.cos() * 3,
    ]
    got = [torch.tensor(values, dtype=dtype) for dtype, values in got]
    return differs(got, expected, "child")


@checked
def view_cache_threads_alternating_tensors():
    # (one program's views of two replicas' tensors from three threads; the race needs the
    # short switch interval, and was seen within 20000 calls a thread)
    from torch2xla.runtime._interop import ViewCache
    from torch2xla.runtime._jax_scope import x64

    cache = ViewCache(2, writes=False)
    sets = [[torch.randn(16) for _ in range(2)] for _ in range(3)]
    bad: list = []

    def work(tid):
        with x64():
            for i in range(20000):
                tensors = sets[(tid + i // 3) % 3]
                try:
                    views, _ = cache(tensors)
                    ptrs = [
                        v.unsafe_buffer_pointer()
                        if hasattr(v, "unsafe_buffer_pointer")
                        else v.ctypes.data
                        for v in views
                    ]
                except Exception as e:  # noqa: BLE001
                    bad.append(f"thread {tid} call {i}: {e!r}")
                    return
                if ptrs != [t.data_ptr() for t in tensors]:
                    bad.append(f"thread {tid} call {i}: another call's view")
                    return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        sys.setswitchinterval(interval)
    return bad[0] if bad else None


# -- two processes on one persistent cache ---------------------------------------------------
_WORKER = r"""
import json, os, sys, time, torch
from torch import nn
sys.path.insert(0, os.environ["PROBE_ROOT"])
import torch2xla
from torch2xla.guards import _persistent
cfg = json.loads(sys.argv[1])
ns = {"torch": torch, "nn": nn}
exec(cfg["src"], ns)
if cfg.get("start"):
    while time.time() < cfg["start"]:
        time.sleep(0.005)
fn = ns["make"]()
kw = cfg.get("kw", {})
c = torch.compile(fn, backend="xla", **kw)
diffs = []
for args_src in cfg["calls"]:
    args = eval(args_src, ns)
    with torch.no_grad():
        try:
            got = c(*args)
        except Exception as e:
            got = e
        try:
            exp = fn(*args)
        except Exception as e:
            exp = e
    if isinstance(exp, Exception) or isinstance(got, Exception):
        if type(exp) is not type(got) and not isinstance(got, type(exp)):
            diffs.append(f"{args_src}: {got!r} vs {exp!r}")
        continue
    if got.dtype != exp.dtype or got.shape != exp.shape or not torch.allclose(got, exp, atol=1e-5, equal_nan=True):
        diffs.append(f"{args_src}: {got.dtype}{tuple(got.shape)} {got.flatten()[:4].tolist()} vs {exp.dtype}{tuple(exp.shape)} {exp.flatten()[:4].tolist()}")
print(json.dumps({"diffs": diffs, "hits": _persistent.hits()}))
"""


def _process(tmp, src, calls, kw=None, start=None, wait=True):
    env = dict(os.environ, TORCH2XLA_CACHE_DIR=str(pathlib.Path(tmp) / "cache"))
    env["PROBE_ROOT"] = str(ROOT)
    env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
    cfg = {"src": src, "calls": calls, "kw": kw or {}, "start": start}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WORKER, json.dumps(cfg)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc.communicate(timeout=600) + (proc.returncode,) if wait else proc


def _result(out) -> dict | str:
    stdout, stderr, rc = out
    if rc != 0:
        return f"process failed: {stderr[-1200:]}"
    return json.loads(stdout.strip().splitlines()[-1])


def _processes(*runs) -> str | None:
    """Run ``(src, calls, kw)`` one after the other on one cache; the first difference."""
    with tempfile.TemporaryDirectory() as tmp:
        for i, (src, calls, kw) in enumerate(runs):
            r = _result(_process(tmp, src, calls, kw))
            if isinstance(r, str):
                return f"process {i}: {r}"
            if r["diffs"]:
                return f"process {i} (hits {r['hits']}): {r['diffs'][0]}"
    return None


_MLP = (
    "def make():\n    torch.manual_seed(0)\n"
    "    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
)


@checked
def persistent_two_writers_at_once():
    import time

    with tempfile.TemporaryDirectory() as tmp:
        start = time.time() + 8
        calls = ["(torch.randn(3, 4),)", "(torch.randn(5, 4),)"]
        procs = [_process(tmp, _MLP, calls, start=start, wait=False) for _ in range(3)]
        for i, p in enumerate(procs):
            r = _result(p.communicate(timeout=600) + (p.returncode,))
            if isinstance(r, str) or r["diffs"]:
                return f"writer {i}: {r if isinstance(r, str) else r['diffs'][0]}"
        r = _result(_process(tmp, _MLP, calls))
        if isinstance(r, str) or r["diffs"]:
            return f"reader: {r if isinstance(r, str) else r['diffs'][0]}"
        if not r["hits"]:
            return "the reader loaded nothing"
    return None


def _damaged(how) -> str | None:
    calls = ["(torch.randn(3, 4),)"]
    with tempfile.TemporaryDirectory() as tmp:
        r = _result(_process(tmp, _MLP, calls))
        if isinstance(r, str):
            return r
        files = [p for p in (pathlib.Path(tmp) / "cache").rglob("*") if p.is_file()]
        if not files:
            return "nothing stored"
        for p in files:
            how(p, files)
        r = _result(_process(tmp, _MLP, calls))
        if isinstance(r, str) or r["diffs"]:
            return f"after damage: {r if isinstance(r, str) else r['diffs'][0]}"
        r = _result(_process(tmp, _MLP, calls))
        if isinstance(r, str) or r["diffs"]:
            return f"after repair: {r if isinstance(r, str) else r['diffs'][0]}"
    return None


def _truncate(p, files):
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _empty(p, files):
    p.write_bytes(b"")


def _garbage(p, files):
    p.write_bytes(os.urandom(64))


def _shuffled(p, files):
    others = [q for q in files if q != p and q.parent == p.parent]
    if others:
        p.write_bytes(others[0].read_bytes())


def _directory(p, files):
    p.unlink()
    p.mkdir()


@checked
def persistent_truncated_entries():
    return _damaged(_truncate)


@checked
def persistent_empty_entries():
    return _damaged(_empty)


@checked
def persistent_garbage_entries():
    return _damaged(_garbage)


@checked
def persistent_shuffled_entries():
    return _damaged(_shuffled)


@checked
def persistent_directory_in_place_of_an_entry():
    return _damaged(_directory)


@checked
def persistent_other_shape_and_dtype():
    src = "def make():\n    return lambda x: (x.cumsum(0) * 2).sum(-1)\n"
    return _processes(
        (src, ["(torch.randn(3, 4),)"], {}),
        (
            src,
            [
                "(torch.randn(4, 3),)",
                "(torch.randn(3, 4, dtype=torch.float64),)",
                "(torch.randint(0, 5, (3, 4)),)",
                "(torch.randn(3, 4),)",
            ],
            {},
        ),
    )


@checked
def persistent_changed_body_same_name():
    a = "def make():\n    def f(x):\n        return x.sin() + 1\n    return f\n"
    b = "def make():\n    def f(x):\n        return x.sin() + 2\n    return f\n"
    c = "def make():\n    def f(x):\n        return x.sin()   + 1\n    return f\n"
    calls = ["(torch.randn(4),)"]
    return _processes((a, calls, {}), (b, calls, {}), (c, calls, {}), (a, calls, {}))


@checked
def persistent_changed_default_argument():
    a = "def make():\n    def f(x, k=2.0):\n        return x * k\n    return f\n"
    b = "def make():\n    def f(x, k=3.0):\n        return x * k\n    return f\n"
    calls = ["(torch.randn(4),)"]
    return _processes((a, calls, {}), (b, calls, {}))


@checked
def persistent_changed_closure():
    a = "def make():\n    t = torch.ones(4)\n    return lambda x: x + t\n"
    b = "def make():\n    t = torch.full((4,), 3.0)\n    return lambda x: x + t\n"
    c = "def make():\n    t = torch.ones(4, dtype=torch.float64)\n    return lambda x: x + t\n"
    calls = ["(torch.randn(4),)"]
    return _processes((a, calls, {}), (b, calls, {}), (c, calls, {}))


@checked
def persistent_changed_buffer_values():
    a = "def make():\n    m = nn.BatchNorm1d(4).eval()\n    return m\n"
    b = (
        "def make():\n    m = nn.BatchNorm1d(4).eval()\n    m.running_mean.fill_(5.0)\n"
        "    m.running_var.fill_(2.0)\n    return m\n"
    )
    calls = ["(torch.randn(3, 4),)"]
    return _processes((a, calls, {}), (b, calls, {}))


@checked
def persistent_changed_global_list():
    a = "CFG = [1, 2]\ndef make():\n    return lambda x: x * CFG[0] + CFG[1]\n"
    b = "CFG = [1, 5]\ndef make():\n    return lambda x: x * CFG[0] + CFG[1]\n"
    calls = ["(torch.randn(4),)"]
    return _processes((a, calls, {}), (b, calls, {}))


@checked
def persistent_changed_int_argument_values():
    src = "def make():\n    return lambda x, n: x.roll(n, 0) * n\n"
    return _processes(
        (src, ["(torch.randn(5), 1)", "(torch.randn(5), 2)"], {}),
        (src, ["(torch.randn(5), 3)", "(torch.randn(5), 2)", "(torch.randn(5), 0)"], {}),
    )


@checked
def persistent_changed_module_attribute():
    a = (
        "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.cfg = {'p': 1}\n"
        "    def forward(s, x):\n        return x.pow(s.cfg['p'])\ndef make():\n    return M()\n"
    )
    b = a.replace("{'p': 1}", "{'p': 3}")
    calls = ["(torch.randn(4),)"]
    return _processes((a, calls, {}), (b, calls, {}))


@checked
def persistent_changed_deterministic_and_default_dtype():
    a = "def make():\n    return lambda x: x + torch.arange(4) * 0.1\n"
    b = "torch.set_default_dtype(torch.float64)\n" + a
    calls = ["(torch.randn(4),)", "(torch.randn(4, dtype=torch.float64),)"]
    return _processes((a, calls, {}), (b, calls, {}), (a, calls, {}))


@checked
def persistent_changed_matmul_precision():
    a = "def make():\n    return lambda x, w: x @ w\n"
    b = "torch.set_float32_matmul_precision('medium')\n" + a
    calls = ["(torch.randn(4, 64), torch.randn(64, 4))"]
    return _processes((a, calls, {}), (b, calls, {}))


@checked
def persistent_read_only_after_write():
    calls = ["(torch.randn(3, 4),)"]
    with tempfile.TemporaryDirectory() as tmp:
        r = _result(_process(tmp, _MLP, calls))
        if isinstance(r, str):
            return r
        cache = pathlib.Path(tmp) / "cache"
        for p in cache.rglob("*"):
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            other = _MLP.replace("nn.ReLU()", "nn.Tanh()")
            r = _result(_process(tmp, other, calls))
            if isinstance(r, str) or r["diffs"]:
                return f"read-only: {r if isinstance(r, str) else r['diffs'][0]}"
            r = _result(_process(tmp, _MLP, calls))
            if isinstance(r, str) or r["diffs"]:
                return f"read-only reader: {r if isinstance(r, str) else r['diffs'][0]}"
        finally:
            for p in cache.rglob("*"):
                p.chmod(0o755 if p.is_dir() else 0o644)
            cache.chmod(0o755)
    return None


# ============================================================================================
# Differences that are torch's own (PROBE_BACKEND=aot_eager shows them too), by design, or
# known and not fixed, printed beside the scenario's line.
KNOWN = {
    "same_code_other_globals": "torch's own: Dynamo runs one globals dict's compiled code "
    "with another's (NameError on __compiled_fn_*); aot_eager too",
    "inputs_dtypes_and_devices": "by design: meta tensors raise torch2xla's ValueError",
    "outputs_resized": "known gap: outputs are zero-copy views of XLA's buffers, whose "
    "storage torch cannot grow (README, Threads)",
    "gradients_written_and_resized": "known gap: as outputs_resized, for gradients; torch sets "
    "the new sizes before its error, so a caught failed resize leaves a tensor that writes "
    "past its memory",
}


def run_checked(name, fn) -> str:
    torch._dynamo.reset()
    try:
        why = fn()
    except Exception:  # noqa: BLE001
        return f"CRASH {name}: {traceback.format_exc()[-1500:]}"
    return f"ok    {name}" if why is None else f"DIFF  {name}: {why}"


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
        if BACKEND != "xla" and name.startswith("persistent"):
            continue
        line = run_checked(name, fn)
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
