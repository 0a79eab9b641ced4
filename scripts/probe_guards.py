"""Probe torch2xla's guards and caches for stale programs: the same compiled function or module
called in sequence with inputs or state that differ in ways that must select another program
(or give other results), each call compared strictly with eager PyTorch.

    PYTHONPATH=. python scripts/probe_guards.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_guards.py   # torch's own differences

A scenario is ``fn(C, call)``: ``C(f, **compile_kw)`` is ``f`` itself in the eager run and
``torch.compile(f, backend=..., **compile_kw)`` in the other; ``call(label, thunk)`` runs
``thunk()`` and records what it returns (or the error it raises: the scenario goes on), and
``rec(label, value)`` (``call.rec``) records a value. Observed per tensor: dtype, shape,
strides, requires_grad, grad_fn presence and values (float64 references are not needed here:
each call's compiled result is compared with the same ops in eager, float32 round-off
tolerated). Scenarios of the persistent cache run two fresh processes on one cache directory
(``--worker``), each process comparing with eager itself. Prints one line per scenario:
``ok``, ``DIFF`` (the first difference) or ``CRASH`` (the probe itself failed).
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings

import torch
import torch.nn.functional as F
from torch import nn

# (in-process scenarios: no earlier run's programs serve a call; a persistent-cache scenario's
# worker keeps the cache its parent set: switched off, no scenario of it loaded anything)
if sys.argv[1:2] != ["--worker"]:
    os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")
import torch2xla

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def rand(*shape, seed=0, dtype=torch.float32, rg=False):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen, dtype=torch.float64)
    if dtype.is_floating_point:
        t = t.to(dtype)
    else:
        t = (t * 4).to(dtype)
    return t.requires_grad_(rg)


# -- comparing --------------------------------------------------------------------------------
def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            tuple(v.stride()) if v.layout == torch.strided else None,
            v.requires_grad,
            v.grad_fn is None,
            v.detach().clone(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160])
    return ("V", v)


def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        names = ("dtype", "shape", "strides", "requires_grad", "grad_fn is None")
        for n, x, y in zip(names, a[1:6], b[1:6]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[6], b[6]
        if x.is_floating_point() or x.is_complex():
            tol = {"rtol": 1e-5, "atol": 1e-5}
            if x.dtype in (torch.bfloat16, torch.float16):
                tol = {"rtol": 1e-2, "atol": 1e-2}
            ok = torch.allclose(x, y, equal_nan=True, **tol)
            exact = (y == 0) | y.isinf()  # signed zeros and infinities: as eager's
            ok = ok and torch.equal(torch.signbit(x)[exact], torch.signbit(y)[exact])
            if not ok:
                return (
                    f"{path}: values differ\n  xla   {x.flatten()[:8]}\n  eager {y.flatten()[:8]}"
                )
        elif not torch.equal(x, y):
            return f"{path}: values\n  xla   {x.flatten()[:8]}\n  eager {y.flatten()[:8]}"
        return None
    if a[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":  # (torch2xla raises subclasses of eager's errors: OpError, OpIndexError)
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        return None
    if a[1] != b[1]:
        return f"{path}: {a[1]!r} (xla) vs {b[1]!r} (eager)"
    return None


def observe(fn, compiled: bool):
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def call(label, thunk):
        try:
            value = thunk()
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            value = e
        rec(label, value)
        return value

    call.rec = rec

    def C(f, **kw):
        if not compiled:
            return f
        kw.setdefault("backend", BACKEND)
        return torch.compile(f, **kw)

    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        fn(C, call)
    except Exception as e:  # noqa: BLE001
        obs.append(("raised", describe(e)))
    return obs


# Differences that are torch's own (PROBE_BACKEND=aot_eager shows them too) or known and not
# fixed, printed beside the scenario's line.
KNOWN = {
    "hooks_between_calls": "torch's own: Dynamo does not guard hooks added after the compile "
    "(torch._dynamo.config.skip_nnmodule_hook_guards)",
    "meta_tensors_between_cpu_calls": "by design: meta tensors raise torch2xla's ValueError",
}


def compare(name, fn) -> str:
    got = observe(fn, True)
    exp = observe(fn, False)
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
        d = same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: {[x for x, _ in got]} (xla) vs {[x for x, _ in exp]} (eager)"
    return f"ok    {name}"


# ============================================================================================
# dtype
@scenario
def dtype_sequence(C, call):
    f = C(lambda x: x * 2 + x.sum(0))
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64, torch.bool):
        x = rand(3, 4, dtype=dt) if dt != torch.bool else rand(3, 4) > 0
        call(str(dt), lambda x=x: f(x))
    call("float32 again", lambda: f(rand(3, 4, seed=1)))


@scenario
def dtype_sequence_dynamic(C, call):
    f = C(lambda x: (x / 2, x // 3, x.mean(dtype=torch.float64)), dynamic=True)
    for i, dt in enumerate((torch.float32, torch.int64, torch.float16, torch.int32)):
        call(str(dt), lambda dt=dt, i=i: f(rand(3 + i, dtype=dt)))


@scenario
def dtype_of_second_input_only(C, call):
    f = C(lambda x, y: torch.add(x, y, alpha=2))
    x = rand(4)
    for dt in (torch.float32, torch.float64, torch.int64, torch.float32):
        call(str(dt), lambda dt=dt: f(x, rand(4, seed=2, dtype=dt)))


# ============================================================================================
# shapes
@scenario
def shape_static_then_automatic_dynamic(C, call):
    f = C(lambda x: x.cumsum(0) * x.shape[0] + x.shape[-1])
    for n in (2, 3, 4, 2, 5, 1, 0, 3):
        call(f"n={n}", lambda n=n: f(rand(n, 3, seed=n)))


@scenario
def shape_dynamic_true(C, call):
    f = C(
        lambda x: (x.reshape(-1, 2).sum(1), x[: x.shape[0] // 2], x.new_zeros(x.shape[0] + 1)),
        dynamic=True,
    )
    for n in (4, 6, 2, 8, 0, 4):
        call(f"n={n}", lambda n=n: f(rand(n, seed=n)))


@scenario
def shape_mark_dynamic_branch(C, call):
    def g(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    f = C(g)
    for n in (3, 6, 4, 5, 2):
        x = rand(n, seed=n)
        torch._dynamo.mark_dynamic(x, 0)
        call(f"n={n}", lambda x=x: f(x))


@scenario
def shape_rank_changes(C, call):
    f = C(lambda x: x.sum(-1) + x.numel())
    for shape in ((3,), (3, 4), (2, 3, 4), (3, 4), (5,), (3, 5)):
        call(str(shape), lambda s=shape: f(rand(*s)))


@scenario
def shape_size_as_value(C, call):
    f = C(lambda x, n: x + n + x.shape[0] * 0.5)
    for n in (3, 4, 5, 6, 3):
        call(f"n={n}", lambda n=n: f(rand(n), n))


@scenario
def shape_second_dim_dynamic(C, call):
    f = C(lambda x, w: x @ w)
    for k in (3, 4, 5, 6, 4):
        call(f"k={k}", lambda k=k: f(rand(2, k), rand(k, 3, seed=1)))


@scenario
def shape_broadcast_to_one(C, call):
    f = C(lambda x, y: x * y)
    for a, b in (
        ((3, 4), (3, 4)),
        ((3, 4), (1, 4)),
        ((3, 4), (3, 1)),
        ((5, 4), (5, 4)),
        ((5, 4), (1, 4)),
        ((1, 4), (6, 4)),
    ):
        call(f"{a}*{b}", lambda a=a, b=b: f(rand(*a), rand(*b, seed=1)))


# ============================================================================================
# strides and memory formats
def _layouts():
    base = rand(6, 8, seed=3)
    return {
        "contiguous": rand(6, 8, seed=4),
        "transposed": rand(8, 6, seed=5).t(),
        "expanded": rand(1, 8, seed=6).expand(6, 8),
        "expanded col": rand(6, 1, seed=6).expand(6, 8),
        "offset": base.view(-1)[2:50].view(6, 8),
        "slice": rand(6, 16, seed=7)[:, ::2],
        "rows": rand(12, 8, seed=8)[1::2],
        "contiguous 2": rand(6, 8, seed=9),
    }


@scenario
def strides_elementwise_and_flatten(C, call):
    f = C(lambda x: (x + 1, x.reshape(-1), x.flatten()[3:7], x.t() * 2, x.sum(0)))
    for name, x in _layouts().items():
        call(name, lambda x=x: f(x))


@scenario
def strides_elementwise_dynamic(C, call):
    f = C(
        lambda x: (x * 2, x.reshape(-1), x.contiguous(), x.transpose(0, 1).contiguous()),
        dynamic=True,
    )
    for name, x in _layouts().items():
        call(name, lambda x=x: f(x))


@scenario
def strides_view_raises_on_noncontiguous(C, call):
    f = C(lambda x: x.view(-1) * 2)
    for name, x in _layouts().items():
        call(name, lambda x=x: f(x))


@scenario
def strides_as_strided(C, call):
    f = C(lambda x: x.as_strided((3, 3), (2, 1)) + 0)
    for name, x in _layouts().items():
        call(name, lambda x=x: f(x))


@scenario
def strides_as_strided_offset(C, call):
    f = C(lambda x: (x.as_strided((2, 2), (1, 2), 1) * 1, x.as_strided((2, 2), (1, 2), 6) * 1))
    base = torch.arange(40.0)
    for off in (0, 3, 5, 0, 6):
        call(f"offset {off}", lambda off=off: f(base[off : off + 20].view(4, 5)))


@scenario
def strides_as_strided_of_a_view_in_the_graph(C, call):
    f = C(lambda x: x[1:].as_strided((2, 2), (1, 2), 7) * 1)
    base = torch.arange(40.0)
    for off in (0, 3):
        call(f"offset {off}", lambda off=off: f(base[off : off + 20].view(4, 5)))


@scenario
def strides_inplace_into_views(C, call):
    def g(x):
        x.mul_(2).add_(1)
        return x.sum()

    f = C(g)
    for name in ("contiguous", "transposed", "offset", "slice", "rows", "contiguous 2"):
        ls = _layouts()
        x = ls[name]
        call(name, lambda x=x: f(x))
        call(name + " after", lambda x=x: x)


@scenario
def strides_inplace_into_views_dynamic(C, call):
    def g(x):
        x.mul_(2).add_(1)
        return x[0]

    f = C(g, dynamic=True)
    for name in ("contiguous", "transposed", "offset", "slice", "rows", "contiguous 2"):
        x = _layouts()[name]
        call(name, lambda x=x: f(x))
        call(name + " after", lambda x=x: x)


@scenario
def strides_inplace_expanded_raises(C, call):
    def g(x):
        x.add_(1)
        return x

    f = C(g)
    for name in ("contiguous", "expanded", "contiguous 2", "expanded col"):
        x = _layouts()[name].clone() if name.startswith("contiguous") else _layouts()[name]
        call(name, lambda x=x: f(x))


@scenario
def strides_channels_last_conv(C, call):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    f = C(lambda x: (conv(x), F.relu(x) + 1, x.mean((2, 3))))
    x = rand(2, 3, 5, 5)
    with torch.no_grad():
        call("nchw", lambda: f(x))
        call("channels_last", lambda: f(x.contiguous(memory_format=torch.channels_last)))
        call("nchw again", lambda: f(rand(2, 3, 5, 5, seed=2)))
        call("permuted", lambda: f(rand(2, 5, 5, 3, seed=3).permute(0, 3, 1, 2)))
        call(
            "cl size 6",
            lambda: f(rand(2, 3, 6, 6, seed=4).contiguous(memory_format=torch.channels_last)),
        )


@scenario
def strides_channels_last_elementwise_dynamic(C, call):
    f = C(
        lambda x: (
            x * 2,
            x.view(x.shape[0], -1) if x.is_contiguous() else x.reshape(x.shape[0], -1),
        ),
        dynamic=True,
    )
    for i, fmt in enumerate(
        (torch.contiguous_format, torch.channels_last, torch.contiguous_format, torch.channels_last)
    ):
        x = rand(2, 3, 4 + i, 4, seed=i).contiguous(memory_format=fmt)
        call(f"{fmt} {i}", lambda x=x: f(x))


@scenario
def strides_output_is_input_view(C, call):
    f = C(lambda x: (x[1:], x.t(), x.unsqueeze(0)))
    for name, x in _layouts().items():
        call(name, lambda x=x: f(x))


# ============================================================================================
# requires_grad, grad mode, inference mode
@scenario
def requires_grad_toggle(C, call):
    def g(x, w):
        return (x * w).sum() * 2, x * 3

    f = C(g)
    for xrg, wrg in ((False, True), (True, False), (False, False), (True, True), (False, True)):
        x, w = rand(4, rg=xrg), rand(4, seed=1, rg=wrg)
        out = call(f"{xrg},{wrg}", lambda x=x, w=w: f(x, w))
        if isinstance(out, tuple) and out[0].requires_grad:
            out[0].backward()
        call.rec(
            "grads",
            [x.grad if x.grad is not None else "none", w.grad if w.grad is not None else "none"],
        )


@scenario
def grad_modes(C, call):
    f = C(lambda x, w: (x @ w).relu())
    x, w = rand(3, 4), rand(4, 2, seed=1, rg=True)
    call("enabled", lambda: f(x, w))
    with torch.no_grad():
        call("no_grad", lambda: f(x, w))
    with torch.inference_mode():
        call("inference_mode", lambda: f(x, w))
        call("inference tensors", lambda: f(x.clone(), w.detach().clone()))
    call("enabled again", lambda: f(x, w))
    with torch.inference_mode():
        xi = x.clone()
    call("inference tensor outside", lambda: f(xi, w))
    with torch.no_grad():
        call("inference tensor no_grad", lambda: f(xi, w))


@scenario
def inference_tensor_inplace(C, call):
    def g(x):
        x.add_(1)
        return x * 2

    f = C(g)
    call("normal", lambda: f(rand(3)))
    with torch.inference_mode():
        xi = rand(3, seed=1)
    call("inference tensor outside", lambda: f(xi))
    with torch.inference_mode():
        call("inside", lambda: f(xi))
    call("after", lambda: xi)


@scenario
def set_grad_enabled_inside(C, call):
    def g(x, w):
        with torch.set_grad_enabled(False):
            y = x * w
        return y + x * w

    f = C(g)
    w = rand(3, seed=1, rg=True)
    call("grad", lambda: f(rand(3), w))
    with torch.no_grad():
        call("no_grad", lambda: f(rand(3), w))
    call("grad again", lambda: f(rand(3), w))


# ============================================================================================
# autocast
@scenario
def autocast_on_off(C, call):
    f = C(lambda x, w: (x @ w, (x @ w).softmax(-1), x + 1))
    x, w = rand(4, 8), rand(8, 3, seed=1)
    call("off", lambda: f(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        call("bf16", lambda: f(x, w))
    with torch.autocast("cpu", dtype=torch.float16):
        call("fp16", lambda: f(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        call("disabled", lambda: f(x, w))
    call("off again", lambda: f(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        call("bf16 again", lambda: f(x, w))


@scenario
def autocast_module_grad(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(8, 3)
    f = C(lin)
    x = rand(4, 8)
    for ac in (False, True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ac):
            out = call(f"autocast {ac}", lambda: f(x))
        out.float().sum().backward()
        call.rec("grad", [lin.weight.grad, lin.bias.grad])
        lin.zero_grad(set_to_none=True)


@scenario
def autocast_inside_function(C, call):
    def g(x, w, on):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
            return x @ w

    f = C(g)
    x, w = rand(4, 8), rand(8, 3, seed=1)
    for on in (True, False, True):
        call(f"on={on}", lambda on=on: f(x, w, on))


# ============================================================================================
# modules: mode, parameters, buffers, attributes, globals
class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        y = self.bn(x)
        return self.drop(y) * (2 if self.training else 3)


@scenario
def module_train_eval(C, call):
    m = BNNet()
    f = C(m)
    for mode in ("train", "eval", "train", "eval"):
        getattr(m, mode)()
        with torch.no_grad():
            call(mode, lambda mode=mode: f(rand(5, 4, seed=len(mode))))
        call(
            mode + " stats",
            lambda: [
                m.bn.running_mean.clone(),
                m.bn.running_var.clone(),
                m.bn.num_batches_tracked.clone(),
            ],
        )


@scenario
def module_param_data_replaced(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    f = C(lin)
    x = rand(2, 4)
    call("first", lambda: f(x))
    lin.weight.data = torch.ones(3, 4)
    call("data replaced", lambda: f(x))
    with torch.no_grad():
        lin.weight.mul_(3)
    call("mutated", lambda: f(x))
    lin.weight.data = torch.ones(3, 4, dtype=torch.float64)
    call("data float64", lambda: f(x.double()))
    lin.weight.data = torch.ones(4, 3).t()
    call("data transposed", lambda: f(x.float()))


@scenario
def module_new_parameter(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    f = C(lin)
    x = rand(2, 4)
    call("first", lambda: f(x))
    lin.weight = nn.Parameter(torch.full((3, 4), 0.5))
    call("new parameter", lambda: f(x))
    lin.bias = None
    call("bias None", lambda: f(x))
    lin.bias = nn.Parameter(torch.ones(3))
    call("bias back", lambda: f(x))
    lin.weight = nn.Parameter(torch.full((3, 4), 0.25), requires_grad=False)
    out = call("frozen", lambda: f(x))
    call("frozen rg", lambda: out.requires_grad)


class BufNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))
        self.register_buffer("offset", None)
        self.k = 2
        self.alpha = 0.5
        self.flag = True
        self.act = nn.ReLU()

    def forward(self, x):
        y = x * self.scale
        if self.offset is not None:
            y = y + self.offset
        for _ in range(self.k):
            y = y * self.alpha + 1
        return self.act(y) if self.flag else y


@scenario
def module_attributes_and_buffers(C, call):
    m = BufNet()
    f = C(m)
    x = rand(2, 3)
    call("first", lambda: f(x))
    m.scale.mul_(2)
    call("buffer mutated", lambda: f(x))
    m.scale = torch.tensor([5.0, 6.0, 7.0])
    call("buffer replaced", lambda: f(x))
    m.register_buffer("offset", torch.tensor(-4.0))
    call("buffer added", lambda: f(x))
    m.offset = torch.tensor(-8.0, dtype=torch.float64)
    call("buffer dtype", lambda: f(x))
    m.k = 3
    call("int attr", lambda: f(x))
    m.alpha = 0.25
    call("float attr", lambda: f(x))
    m.alpha = 0.75
    call("float attr 2", lambda: f(x))
    m.alpha = 2
    call("float attr -> int", lambda: f(x))
    m.flag = False
    call("bool attr", lambda: f(x))
    m.flag = True
    m.act = nn.Tanh()
    call("submodule swapped", lambda: f(x))
    m.alpha = -0.0
    call("alpha -0.0", lambda: 1 / f(x))
    m.alpha = 0.0
    call("alpha 0.0", lambda: 1 / f(x))


SCALE = 2.0


def _uses_global(x):
    return x * SCALE


@scenario
def global_and_closure(C, call):
    global SCALE
    f = C(_uses_global)
    x = rand(3)
    SCALE = 2.0
    call("2.0", lambda: f(x))
    SCALE = 3.0
    call("3.0", lambda: f(x))
    SCALE = 4.0
    call("4.0", lambda: f(x))
    SCALE = torch.tensor(5.0)
    call("tensor", lambda: f(x))
    SCALE = 2.0
    c = [1.5]

    def h(x):
        return x * c[0]

    g = C(h)
    call("closure 1.5", lambda: g(x))
    c[0] = 2.5
    call("closure 2.5", lambda: g(x))
    c[0] = 3.5
    call("closure 3.5", lambda: g(x))


@scenario
def module_double_half(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    f = C(m)
    x = rand(2, 4)
    with torch.no_grad():
        call("float", lambda: f(x))
        m.double()
        call("double", lambda: f(x.double()))
        m.bfloat16()
        call("bf16", lambda: f(x.bfloat16()))
        m.float()
        call("float again", lambda: f(x))


@scenario
def module_requires_grad_freeze(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    f = C(m)
    x = rand(3, 4)
    for frozen in (False, True, False):
        m.weight.requires_grad_(not frozen)
        out = call(f"frozen={frozen}", lambda: f(x))
        out.sum().backward()
        call.rec("grads", [m.weight.grad if m.weight.grad is not None else "none", m.bias.grad])
        m.zero_grad(set_to_none=True)


# ============================================================================================
# Python scalars
@scenario
def scalars_int_float_bool(C, call):
    f = C(lambda x, s: (x * s, x + s))
    xi, xf = rand(3, dtype=torch.int64), rand(3)
    for s in (2, 3, 2.0, 2.5, True, False, 0, -1, 1.0, 4, 0.5):
        call(f"int x {s!r}", lambda s=s: f(xi, s))
        call(f"float x {s!r}", lambda s=s: f(xf, s))


@scenario
def scalars_int_float_bool_dynamic(C, call):
    f = C(lambda x, s: (x * s, x + s, x.new_full((2,), s)), dynamic=True)
    xi, xf = rand(3, dtype=torch.int64), rand(3)
    for s in (2, 3, 2.0, 2.5, True, False, 0, -1, 1.0, 4, 0.5):
        call(f"int x {s!r}", lambda s=s: f(xi, s))
        call(f"float x {s!r}", lambda s=s: f(xf, s))


@scenario
def scalars_signed_zero_and_nonfinite(C, call):
    f = C(lambda x, s: 1 / (x * s))
    x = torch.ones(3)
    for s in (1.0, 0.0, -0.0, 0.0, float("inf"), float("-inf"), float("nan"), 2.0, -0.0):
        call(f"s={s!r}", lambda s=s: f(x, s))


@scenario
def scalars_signed_zero_dynamic(C, call):
    f = C(lambda x, s: torch.atan2(x.new_full(x.shape, s), x), dynamic=True)
    x = -torch.ones(3)
    for s in (1.0, 0.0, -0.0, 0.0, -0.0):
        call(f"s={s!r}", lambda s=s: f(x, s))


@scenario
def scalars_kw_and_defaults(C, call):
    def g(x, p=2.0, dim=-1):
        return F.normalize(x, p=p, dim=dim)

    f = C(g)
    x = rand(3, 4)
    call("default", lambda: f(x))
    call("p=1", lambda: f(x, p=1.0))
    call("dim=0", lambda: f(x, dim=0))
    call("p=3 dim=0", lambda: f(x, 3.0, 0))
    call("default again", lambda: f(x))


@scenario
def scalars_tensor_item(C, call):
    f = C(lambda x, t: x * t.item())
    x = rand(3)
    for v in (2.0, 3.0, -0.0, 0.0):
        call(f"t={v}", lambda v=v: 1 / f(x, torch.tensor(v)))


@scenario
def scalars_zero_d_tensor(C, call):
    f = C(lambda x, t: (x * t, x + t))
    for t in (
        torch.tensor(2.0),
        torch.tensor(3),
        torch.tensor(True),
        torch.tensor(2.5, dtype=torch.float64),
        torch.tensor(-0.0),
    ):
        call(f"{t.dtype} {t.item()}", lambda t=t: f(rand(3, dtype=torch.float16), t))


# ============================================================================================
# aliasing between calls
@scenario
def aliasing_write(C, call):
    def g(a, b):
        a.add_(b)
        return a * b

    f = C(g)
    a = rand(4, 4)
    call("distinct", lambda: f(a, rand(4, 4, seed=1)))
    call("same", lambda: f(a, a))
    call("a", lambda: a)
    base = rand(20, seed=2)
    call("overlap", lambda: f(base[:16].view(4, 4), base[4:].view(4, 4)))
    call("base", lambda: base)
    base2 = rand(20, seed=3)
    call("overlap other offset", lambda: f(base2[4:].view(4, 4), base2[:16].view(4, 4)))
    call("base2", lambda: base2)
    call("distinct again", lambda: f(rand(4, 4, seed=4), rand(4, 4, seed=5)))
    m = rand(4, 4, seed=6)
    call("transpose of itself", lambda: f(m, m.t()))


@scenario
def aliasing_write_first_call_aliased(C, call):
    def g(a, b):
        b.mul_(2)
        return a + b

    f = C(g)
    x = rand(4)
    call("same", lambda: f(x, x))
    call("x", lambda: x)
    call("distinct", lambda: f(rand(4, seed=1), rand(4, seed=2)))
    y = rand(8, seed=3)
    call("halves", lambda: f(y[:4], y[4:]))
    z = rand(8, seed=4)
    call("overlap", lambda: f(z[:4], z[2:6]))
    call("z", lambda: z)
    call("same again", lambda: f(y, y))


@scenario
def aliasing_write_bucketed(C, call):
    def g(a, b):
        a.add_(1)
        b.mul_(2)
        return (a + b).sum(0)

    f = C(g, dynamic=True, options={"buckets": [4, 8]})
    for n in (3, 5, 3, 6):
        call(f"distinct {n}", lambda n=n: f(rand(n, 2, seed=n), rand(n, 2, seed=n + 1)))
        base = rand(2 * n + 2, seed=n + 2)
        call(
            f"overlap {n}", lambda n=n, base=base: f(base[: 2 * n].view(n, 2), base[2:].view(n, 2))
        )
        call(f"base {n}", lambda base=base: base)
        base = rand(2 * n, seed=n + 3)
        call(f"halves {n}", lambda n=n, base=base: f(base[:n], base[n:]))
        call(f"halves base {n}", lambda base=base: base)


@scenario
def aliasing_read_only(C, call):
    f = C(lambda a, b: (a + b, a * 2))
    a = rand(4)
    call("distinct", lambda: f(a, rand(4, seed=1)))
    call("same", lambda: f(a, a))
    base = rand(5, seed=2)
    call("shifted", lambda: f(base[:4], base[1:]))


@scenario
def aliasing_output_returns_input(C, call):
    def g(a, b):
        return a, b, a.view(-1)

    f = C(g)
    a = rand(2, 2)
    outs = call("distinct", lambda: f(a, rand(2, 2, seed=1)))
    call.rec("identity", [outs[0] is a])
    outs = call("same", lambda: f(a, a))
    call.rec("identity", [outs[0] is a, outs[1] is a])


# ============================================================================================
# two modules of one class
class Cfg(nn.Module):
    def __init__(self, scale, eps, act, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(4, 4)
        self.ln = nn.LayerNorm(4, eps=eps)
        self.scale = scale
        self.act = act

    def forward(self, x):
        return self.act(self.ln(self.lin(x))) * self.scale


@scenario
def two_modules_compiled_each(C, call):
    m1 = Cfg(2.0, 1e-5, nn.GELU(), 0)
    m2 = Cfg(3.0, 1e-1, nn.GELU(approximate="tanh"), 1)
    f1, f2 = C(m1), C(m2)
    x = rand(2, 4)
    with torch.no_grad():
        for i in range(2):
            call(f"m1 {i}", lambda: f1(x))
            call(f"m2 {i}", lambda: f2(x))


@scenario
def two_modules_shared_function(C, call):
    m1 = Cfg(2.0, 1e-5, nn.GELU(), 0)
    m2 = Cfg(3.0, 1e-1, nn.GELU(approximate="tanh"), 1)
    m3 = Cfg(2.0, 1e-5, nn.GELU(), 2)
    f = C(lambda m, x: m(x))
    x = rand(2, 4)
    with torch.no_grad():
        for i in range(2):
            for name, m in (("m1", m1), ("m2", m2), ("m3", m3)):
                call(f"{name} {i}", lambda m=m: f(m, x))


@scenario
def two_modules_compiled_method(C, call):
    class M(nn.Module):
        def __init__(self, k, seed):
            super().__init__()
            torch.manual_seed(seed)
            self.w = nn.Parameter(torch.randn(3))
            self.k = k

        def forward(self, x):
            return x * self.w + self.k

    a, b = M(1.0, 0), M(2.0, 1)
    fa = C(a.forward)
    fb = C(b.forward)
    x = rand(3)
    with torch.no_grad():
        for i in range(2):
            call(f"a {i}", lambda: fa(x))
            call(f"b {i}", lambda: fb(x))
    a.compile(backend=BACKEND) if BACKEND and fa is not a.forward else None
    b.compile(backend=BACKEND) if BACKEND and fb is not b.forward else None
    with torch.no_grad():
        call("a compiled()", lambda: a(x))
        call("b compiled()", lambda: b(x))


# ============================================================================================
# bucketing
def _bucket_fns():
    return {
        "sum": lambda x: x.sum(0),
        "softmax": lambda x: x.softmax(0),
        "mean": lambda x: x.mean(0),
        "last": lambda x: x[-1] + x[-2:].sum(0),
        "cat": lambda x: torch.cat([x, x[:1] * 2]).cumsum(0),
        "contract": lambda x: x.t() @ x,
        "size value": lambda x: x * x.shape[0] + torch.arange(x.shape[0])[:, None],
        "max": lambda x: (x.max(0).values, x.argmax(0), x.amin(0)),
        "norm": lambda x: (x.norm(dim=0), x.logsumexp(0), x.prod(0)),
        "index": lambda x: x[torch.arange(x.shape[0] - 1)],
    }


@scenario
def bucketing_edges(C, call):
    for name, fn in _bucket_fns().items():
        torch._dynamo.reset()
        f = C(fn, dynamic=True, options={"buckets": [4, 8, 16]})
        for n in (3, 4, 5, 8, 9, 16, 17, 2, 1, 7):
            call(f"{name} n={n}", lambda n=n, f=f: f(rand(n, 3, seed=n)))


@scenario
def bucketing_pow2_nonfinite(C, call):
    f = C(
        lambda x: (x.exp().sum(0), (1 / x).amax(0), x.log().softmax(0)),
        dynamic=True,
        options={"buckets": "pow2"},
    )
    for n in (3, 5, 6, 9):
        x = rand(n, 2, seed=n).abs() + 0.5
        call(f"n={n}", lambda x=x: f(x))
        x = x.clone()
        x[0, 0] = 0.0
        call(f"n={n} zero", lambda x=x: f(x))


@scenario
def bucketing_two_symbols(C, call):
    f = C(lambda x, y: (x @ y, x.sum(), y.softmax(-1)), dynamic=True, options={"buckets": [4, 8]})
    for n, k in ((3, 2), (3, 5), (5, 3), (8, 8), (2, 7), (9, 3)):
        call(f"{n},{k}", lambda n=n, k=k: f(rand(n, k), rand(k, n, seed=1)))


@scenario
def bucketing_inplace(C, call):
    def g(x, y):
        x.add_(1)
        y[: x.shape[0]].mul_(2)
        return x.sum(0)

    f = C(g, dynamic=True, options={"buckets": [4, 8]})
    for n in (3, 5, 4, 2):
        x, y = rand(n, 2, seed=n), rand(9, 2, seed=10 + n)
        call(f"n={n}", lambda x=x, y=y: f(x, y))
        call(f"n={n} after", lambda x=x, y=y: (x, y))


@scenario
def bucketing_grad_then_no_grad(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    f = C(lambda x: lin(x).softmax(0).sum(0), dynamic=True, options={"buckets": [4, 8]})
    for n, grad in ((3, False), (3, True), (5, False), (5, True), (6, False)):
        with torch.set_grad_enabled(grad):
            out = call(f"n={n} grad={grad}", lambda n=n: f(rand(n, 3, seed=n)))
        if grad:
            out.sum().backward()
            call.rec("grad", [lin.weight.grad, lin.bias.grad])
            lin.zero_grad(set_to_none=True)


# ============================================================================================
# threads
@scenario
def threads_shapes(C, call):
    f = C(lambda x: (x.sin() * x.shape[0]).cumsum(0))
    results: dict = {}
    barrier = threading.Barrier(2)

    def worker(tid):
        barrier.wait()
        out = []
        for i in range(6):
            n = 2 + tid + 2 * i
            x = rand(n, 3, seed=100 * tid + i)
            try:
                out.append(f(x))
            except Exception as e:  # noqa: BLE001
                out.append(e)
        results[tid] = out

    ts = [threading.Thread(target=worker, args=(t,)) for t in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for tid in (0, 1):
        call.rec(f"thread {tid}", results[tid])


@scenario
def threads_grad_mode_and_dtype(C, call):
    f = C(lambda x, w: x @ w)
    w = rand(3, 3, rg=True)
    results: dict = {}
    barrier = threading.Barrier(2)

    def worker(tid):
        barrier.wait()
        out = []
        for i in range(5):
            dt = torch.float32 if tid == 0 else torch.float64
            with torch.set_grad_enabled(bool(i % 2)):
                try:
                    out.append(f(rand(2 + i, 3, seed=i, dtype=dt), w.to(dt)))
                except Exception as e:  # noqa: BLE001
                    out.append(e)
        results[tid] = out

    ts = [threading.Thread(target=worker, args=(t,)) for t in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for tid in (0, 1):
        call.rec(f"thread {tid}", results[tid])


# ============================================================================================
# more state between calls: in-place metadata changes, hooks, optimizer steps, eviction
@scenario
def inplace_metadata_changes(C, call):
    for dyn in (False, True):
        torch._dynamo.reset()
        f = C(lambda x: x * 2 + x[0], dynamic=dyn)
        x = torch.arange(16.0).view(4, 4)
        for i in range(3):
            call(f"dyn={dyn} {i}", lambda f=f, x=x: f(x))
        x.t_()
        call(f"dyn={dyn} t_", lambda f=f, x=x: f(x))
        x.t_()
        call(f"dyn={dyn} t_ back", lambda f=f, x=x: f(x))
        with torch.no_grad():
            x.set_(x.untyped_storage(), 0, (4, 4), (1, 4))
        call(f"dyn={dyn} set_", lambda f=f, x=x: f(x))
        with torch.no_grad():
            x.set_(x.untyped_storage(), 2, (3, 4), (4, 1))
        call(f"dyn={dyn} set_ offset", lambda f=f, x=x: f(x))


@scenario
def inplace_metadata_parameter(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(4, 4, bias=False)
    f = C(lin)
    y = rand(3, 4)
    with torch.no_grad():
        for i in range(3):
            call(f"{i}", lambda: f(y))
        lin.weight.t_()
        call("t_", lambda: f(y))
        lin.weight.data = lin.weight.data.t()
        call("data t", lambda: f(y))
        lin.weight.copy_(torch.eye(4))
        call("copy_", lambda: f(y))
        lin.load_state_dict({"weight": torch.full((4, 4), 0.5)})
        call("load_state_dict", lambda: f(y))


@scenario
def inplace_expanded_dynamic(C, call):
    def g(x):
        x.add_(1)
        return x.sum()

    f = C(g, dynamic=True)
    for name, x in (
        ("contig 3", rand(3, 4)),
        ("contig 5", rand(5, 4, seed=1)),
        ("expanded 5", rand(1, 4, seed=2).expand(5, 4)),
        ("expanded 6", rand(1, 4, seed=3).expand(6, 4)),
        ("contig 6", rand(6, 4, seed=4)),
        ("unfold", rand(12, seed=5).unfold(0, 4, 2)),
    ):
        call(name, lambda x=x: f(x))
        call(name + " after", lambda x=x: x)


@scenario
def hooks_between_calls(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    f = C(m)
    x = rand(2, 4)
    with torch.no_grad():
        call("plain", lambda: f(x))
        h = m[0].register_forward_hook(lambda mod, i, o: o * 10)
        call("forward hook", lambda: f(x))
        h.remove()
        call("removed", lambda: f(x))
        h = m.register_forward_pre_hook(lambda mod, i: (i[0] - 1,))
        call("pre hook", lambda: f(x))
        h.remove()
        call("removed again", lambda: f(x))


@scenario
def optimizer_steps_between_calls(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    f = C(m)
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    for i in range(4):
        loss = call(f"loss {i}", lambda i=i: f(rand(5, 4, seed=i)).square().mean())
        loss.backward()
        call.rec(f"grads {i}", [p.grad for p in m.parameters()])
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        call("eval", lambda: f(rand(5, 4, seed=9)))


@scenario
def eviction_and_clear(C, call):
    f = C(
        lambda x: x.cumsum(0) * x.shape[0], dynamic=True, options={"cache_size": 2, "buckets": None}
    )
    for i, n in enumerate((3, 4, 5, 3, 4, 5, 3)):
        call(f"{i} n={n}", lambda n=n: f(rand(n, 2, seed=n)))
        if (
            i == 4
            and f is not None
            and BACKEND == "xla"
            and hasattr(f, "_torchdynamo_orig_callable")
        ):
            torch2xla.clear_caches()


@scenario
def duck_sized_dims(C, call):
    f = C(lambda x: x @ x.t() + x.sum(), dynamic=True)
    for shape in ((3, 3), (4, 4), (3, 4), (4, 3), (5, 5), (2, 6)):
        call(str(shape), lambda s=shape: f(rand(*s)))


@scenario
def duck_sized_dims_bucketed(C, call):
    f = C(lambda x, y: (x.sum(0), y.softmax(0)), dynamic=True, options={"buckets": [4, 8]})
    for a, b in ((3, 3), (5, 5), (3, 5), (5, 3), (6, 2), (2, 6)):
        call(f"{a},{b}", lambda a=a, b=b: f(rand(a, 2), rand(b, 2, seed=1)))


@scenario
def int_argument_not_a_size(C, call):
    f = C(lambda x, n: (x.roll(n, 0), x[:n], x * n), dynamic=True)
    x = rand(6, 2)
    for n in (1, 2, 3, 0, -1, 6, 2):
        call(f"n={n}", lambda n=n: f(x, n))


@scenario
def kwargs_between_calls(C, call):
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, scale=1.0, mask=None, flag=False):
            y = self.lin(x) * scale
            if mask is not None:
                y = y.masked_fill(mask, -1.0)
            return y.relu() if flag else y

    m = M()
    f = C(m)
    x = rand(2, 4)
    mask = rand(2, 4, seed=3) > 0
    with torch.no_grad():
        call("plain", lambda: f(x))
        call("scale", lambda: f(x, scale=2.0))
        call("mask", lambda: f(x, mask=mask))
        call("flag", lambda: f(x, flag=True))
        call("all", lambda: f(x, 0.5, mask, True))
        call("other mask", lambda: f(x, mask=~mask))
        call("plain again", lambda: f(x))


@scenario
def dtype_and_device_arguments(C, call):
    f = C(lambda x, dt, dev: (x.to(dt) * 2, torch.ones(2, dtype=dt, device=dev)))
    x = rand(3)
    for dt in (torch.float32, torch.float64, torch.int32, torch.bfloat16, torch.float32):
        call(str(dt), lambda dt=dt: f(x, dt, "cpu"))
        call(str(dt) + " device obj", lambda dt=dt: f(x, dt, torch.device("cpu")))


@scenario
def meta_tensors_between_cpu_calls(C, call):
    f = C(lambda x: (x * 2).sum(0))
    call("cpu", lambda: f(rand(3, 2)))
    out = call("meta", lambda: f(torch.empty(3, 2, device="meta")))
    call.rec("meta device", str(getattr(out, "device", None)))
    call("cpu again", lambda: f(rand(3, 2, seed=1)))


@scenario
def rng_state_between_calls(C, call):
    # the same seed before each call: the compiled function draws the same numbers each time
    f = C(lambda x: x + torch.rand_like(x))
    x = torch.zeros(4)
    torch.manual_seed(1)
    a = f(x)
    torch.manual_seed(1)
    b = f(x)
    torch.manual_seed(2)
    c = f(x)
    call.rec("same seed same draw", bool(torch.equal(a, b)))
    call.rec("other seed other draw", bool(not torch.equal(a, c)))


# ============================================================================================
# the persistent cache: two processes on one cache directory
PERSISTENT: dict = {}


def persistent(name, *sources, calls="[(rand(3, 4),)]", kw="{}", no_grad=True):
    PERSISTENT[name] = (sources, calls, kw, no_grad)


_PREAMBLE = """
import torch
from torch import nn
import torch.nn.functional as F
def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
"""

persistent(
    "constant in the body",
    "def make():\n    return lambda x: x * 2.0 + 1\n",
    "def make():\n    return lambda x: x * 3.0 + 1\n",
)
persistent(
    "int constant in the body",
    "def make():\n    return lambda x: x.roll(1, 0)\n",
    "def make():\n    return lambda x: x.roll(2, 0)\n",
)
persistent(
    "module float attribute",
    "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.k = 2.0\n    def forward(s, x):\n        return x * s.k\ndef make():\n    return M()\n",
    "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.k = 2.5\n    def forward(s, x):\n        return x * s.k\ndef make():\n    return M()\n",
)
persistent(
    "layernorm eps",
    "def make():\n    torch.manual_seed(0); return nn.LayerNorm(4, eps=1e-5)\n",
    "def make():\n    torch.manual_seed(0); return nn.LayerNorm(4, eps=0.5)\n",
)
persistent(
    "gelu approximate",
    "def make():\n    return nn.GELU()\n",
    "def make():\n    return nn.GELU(approximate='tanh')\n",
)
persistent(
    "global constant",
    "K = 3\ndef make():\n    return lambda x: x.sum(0) * K\n",
    "K = 4\ndef make():\n    return lambda x: x.sum(0) * K\n",
)
persistent(
    "tensor constant made in forward",
    "def make():\n    return lambda x: x * torch.tensor([1.0, 2.0, 3.0, 4.0])\n",
    "def make():\n    return lambda x: x * torch.tensor([1.0, 2.0, 3.0, 5.0])\n",
)
persistent(
    "plain tensor attribute",
    "class M(nn.Module):\n    def __init__(s, v):\n        super().__init__(); s.t = torch.full((4,), v)\n    def forward(s, x):\n        return x + s.t\ndef make():\n    return M(1.0)\n",
    "class M(nn.Module):\n    def __init__(s, v):\n        super().__init__(); s.t = torch.full((4,), v)\n    def forward(s, x):\n        return x + s.t\ndef make():\n    return M(2.0)\n",
)
persistent(
    "dropout p in eval and train (p=0 vs 1)",
    "def make():\n    return nn.Dropout(0.0)\n",
    "def make():\n    return nn.Dropout(1.0)\n",
)
persistent(
    "float scalar argument",
    "def make():\n    return lambda x, s: x * s\n",
    "def make():\n    return lambda x, s: x * s\n",
    calls="[(rand(3, 4), 2.0), (rand(3, 4), 3.0), (rand(3, 4), -0.0)]",
)
persistent(
    "float scalar argument, other values",
    "def make():\n    return lambda x, s: 1 / (x * s)\n",
    "def make():\n    return lambda x, s: 1 / (x * s)\n",
    calls="[(rand(3, 4), 0.0)]",
)
persistent(
    "signed zero across processes",
    "def make():\n    return lambda x, s: 1 / (x * s)\n",
    "def make():\n    return lambda x, s: 1 / (x * s)\n",
    calls="[(torch.ones(3), 0.0)]",
    kw="{'calls2': '[(torch.ones(3), -0.0)]'}",
)
persistent(
    "layouts across processes",
    "def make():\n    return lambda x: (x + 1, x.reshape(-1))\n",
    "def make():\n    return lambda x: (x + 1, x.reshape(-1))\n",
    calls="[(rand(3, 4),)]",
    kw="{'calls2': '[(rand(4, 3).t(),), (rand(1, 4).expand(3, 4),), (rand(20)[2:14].view(3, 4),)]'}",
)
persistent(
    "dynamic sizes across processes",
    "def make():\n    return lambda x: x.cumsum(0) * x.shape[0]\n",
    "def make():\n    return lambda x: x.cumsum(0) * x.shape[0]\n",
    calls="[(rand(3, 4),), (rand(5, 4),), (rand(6, 4),)]",
    kw="{'dynamic': True, 'calls2': '[(rand(7, 4),), (rand(5, 4),), (rand(3, 4),)]'}",
)
persistent(
    "dtype and autocast across processes",
    "def make():\n    return lambda x, w: x @ w\n",
    "def make():\n    return lambda x, w: x @ w\n",
    calls="[(rand(3, 4), rand(4, 2))]",
    kw="{'autocast2': True}",
)
persistent(
    "train/eval across processes",
    "def make():\n    m = nn.BatchNorm1d(4); m.train(); return m\n",
    "def make():\n    m = nn.BatchNorm1d(4); m.running_mean.fill_(3.0); m.eval(); return m\n",
)
persistent(
    "function called from the graph changed",
    "def helper(x):\n    return x.sin()\ndef make():\n    return lambda x: helper(x) + 1\n",
    "def helper(x):\n    return x.cos()\ndef make():\n    return lambda x: helper(x) + 1\n",
)
persistent(
    "default dtype",
    "def make():\n    return lambda x: x + torch.ones(4)\n",
    "def make():\n    torch.set_default_dtype(torch.float64)\n    return lambda x: x + torch.ones(4)\n",
)
persistent(
    "buckets across processes",
    "def make():\n    return lambda x: x.softmax(0)\n",
    "def make():\n    return lambda x: x.softmax(0)\n",
    calls="[(rand(3, 4),), (rand(5, 4),)]",
    kw="{'dynamic': True, 'options': {'buckets': [4, 8]}, 'calls2': '[(rand(6, 4),), (rand(3, 4),), (rand(4, 4),)]'}",
)
persistent(
    "requires_grad across processes",
    "def make():\n    return lambda x, w: (x * w).sum()\n",
    "def make():\n    return lambda x, w: (x * w).sum()\n",
    calls="[(rand(3), rand(3))]",
    kw="{'rg2': True}",
    no_grad=False,
)

persistent(
    "options: runtime checks off, then on",
    "def make():\n    return lambda x, i: x[i] * 2\n",
    "def make():\n    return lambda x, i: x[i] * 2\n",
    calls="[(torch.arange(5.0), torch.tensor([1, 3]))]",
    kw="{'options': {'checks': False}, 'options2': {}, 'calls2': "
    "'[(torch.arange(5.0), torch.tensor([1, 3])), (torch.arange(5.0), torch.tensor([1, 7]))]'}",
)
persistent(
    "user lowering changed",
    "import torch2xla, jax.numpy as jnp\n"
    "@torch.library.custom_op('probe::twice', mutates_args=())\n"
    "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
    "@twice.register_fake\ndef _(x):\n    return torch.empty_like(x)\n"
    "torch2xla.register_lowering(torch.ops.probe.twice.default)(lambda x: x * 2)\n"
    "def make():\n    return lambda x: torch.ops.probe.twice(x) + 1\n",
    "import torch2xla, jax.numpy as jnp\n"
    "@torch.library.custom_op('probe::twice', mutates_args=())\n"
    "def twice(x: torch.Tensor) -> torch.Tensor:\n    return x * 3\n"
    "@twice.register_fake\ndef _(x):\n    return torch.empty_like(x)\n"
    "torch2xla.register_lowering(torch.ops.probe.twice.default)(lambda x: x * 3)\n"
    "def make():\n    return lambda x: torch.ops.probe.twice(x) + 1\n",
)
persistent(
    "overlapping inputs across processes",
    "def make():\n    def f(a, b):\n        b.mul_(2)\n        return a + b\n    return f\n",
    "def make():\n    def f(a, b):\n        b.mul_(2)\n        return a + b\n    return f\n",
    calls="[(rand(4), rand(4, seed=1))]",
    kw="{'calls2': '[(rand(4), rand(4, seed=1)), (lambda z: (z[:4], z[2:6]))(rand(8, seed=2))]'}",
)


def worker(config: dict) -> None:
    """One process of a persistent-cache scenario: import the user's module, compile, compare."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_mod", config["path"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kw = config["kw"]
    calls_src = kw.get("calls2", config["calls"]) if config["second"] else config["calls"]
    calls = eval(calls_src, vars(mod))  # (the probe's own table)
    fn = mod.make()
    eager_fn = fn
    if isinstance(fn, nn.Module):
        eager_fn = copy.deepcopy(fn)
    compile_kw = {"backend": "xla"}
    if "dynamic" in kw:
        compile_kw["dynamic"] = kw["dynamic"]
    if "options" in kw:
        compile_kw["options"] = kw["options"]
    if config["second"] and "options2" in kw:
        compile_kw["options"] = kw["options2"]
    compiled = torch.compile(fn, **compile_kw)
    obs = []
    rg = (config["second"] and kw.get("rg2", False)) or kw.get("rg", False)
    for args in calls:
        for run, f in (("xla", compiled), ("eager", eager_fn)):
            a = copy.deepcopy(args)  # (views of one tensor stay views of one copy)
            a = [x.requires_grad_(rg) if isinstance(x, torch.Tensor) and rg else x for x in a]
            ctx = torch.no_grad() if config["no_grad"] else torch.enable_grad()
            auto = torch.autocast(
                "cpu", dtype=torch.bfloat16, enabled=bool(config["second"] and kw.get("autocast2"))
            )
            with ctx, auto:
                try:
                    out = f(*a)
                except Exception as e:  # noqa: BLE001
                    out = e
            if rg and isinstance(out, torch.Tensor):
                out.backward()
                out = [out, *[x.grad for x in a if isinstance(x, torch.Tensor)]]
            obs.append((run, out))
    diffs = []
    for i in range(0, len(obs), 2):
        d = same(describe(obs[i][1]), describe(obs[i + 1][1]), f"call {i // 2}")
        if d:
            diffs.append(d)
    from torch2xla.guards import _persistent

    print(json.dumps({"diffs": diffs, "loaded": _persistent.hits()}))


def run_persistent(name: str) -> str:
    sources, calls, kw, no_grad = PERSISTENT[name]
    kw = eval(kw)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "user_mod.py"
        results = []
        for i, src in enumerate(sources):
            path.write_text(_PREAMBLE + src)
            config = {"path": str(path), "calls": calls, "kw": kw, "second": i, "no_grad": no_grad}
            env = dict(
                os.environ,
                TORCH2XLA_CACHE_DIR=str(pathlib.Path(tmp) / "cache"),
                PYTHONPATH=str(ROOT),
            )
            env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", json.dumps(config)],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if proc.returncode != 0:
                return f"CRASH persistent: {name}: {proc.stderr[-1500:]}"
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for i, r in enumerate(results):
        if r["diffs"]:
            return f"DIFF  persistent: {name}: process {i} (loaded {r['loaded']}): {r['diffs'][0]}"
    return f"ok    persistent: {name} (loaded {[r['loaded'] for r in results]})"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        worker(json.loads(argv[1]))
        return 0
    wanted = argv
    bad = 0
    for name, fn in SCENARIOS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            line = compare(name, fn)
        except Exception:  # noqa: BLE001
            line = f"CRASH {name}: {traceback.format_exc()[-1500:]}"
        if not line.startswith("ok") and name in KNOWN:
            line += f"\n      ({KNOWN[name]})"
        bad += not line.startswith("ok")
        print(line, flush=True)
    for name in PERSISTENT:
        if wanted and not any(w in "persistent: " + name for w in wanted):
            continue
        line = run_persistent(name)
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
