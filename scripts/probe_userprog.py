"""Whole small user programs compiled with ``backend="xla"`` against eager (session 21): modules
that change their own state in forward (counters, running averages, EMA copies, attributes
assigned a tensor), training loops over several steps (gradient accumulation, ``zero_grad``
both ways, layers frozen and thawed, train/eval, parameters replaced, ``load_state_dict``),
grad-mode regions inside the compiled code, hooks of tensors and modules, outputs in every
container, tensors captured from globals and closures changed between calls, inputs that are
views of each other written in place, ``.data`` writes, ``retain_grad``,
``torch.autograd.grad`` with ``allow_unused``/``materialize_grads``, second-order gradients,
custom ``autograd.Function`` and ``torch.func`` over compiled modules; reentrant checkpoints
and the order of post-accumulate-grad hooks.

    PYTHONPATH=. python scripts/probe_userprog.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_userprog.py   # torch's own

What the other probes cover (single ops, one call, one kind of state) is left to them: a
scenario here runs a program over several calls and compares everything it can see after
each: values, dtypes, shapes, ``requires_grad``/``is_leaf``/``grad_fn`` presence of outputs,
``.grad`` of parameters and inputs (None-ness included), buffers and attributes, the order
hooks ran in, errors (type and eager's first line) and the warnings eager gives (by message;
torch2xla's and Dynamo's own are not compared).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import warnings

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd4 as a4
from _probe_common import run
from probe_autograd import leaf

BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, dict):
        return ("L", "dict", [describe((k, x)) for k, x in v.items()])
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        fields = [(f.name, getattr(v, f.name)) for f in dataclasses.fields(v)]
        return ("L", type(v).__name__, [describe(x) for x in fields])
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    return a4.describe(v)


def _ours(w: warnings.WarningMessage) -> bool:
    """torch2xla's and Dynamo's own warnings (not compared with eager's)."""
    mod = type(w.message).__module__ or ""
    name = w.filename or ""
    return mod.startswith("torch2xla") or "torch/_dynamo" in name or "torch2xla" in name


def observe(fn, compiled: bool) -> list:
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw) if compiled else f

    torch._dynamo.reset()
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(C, rec)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            obs.append(("raised", describe(e)))
    msgs = sorted({str(w.message).split("\n")[0][:100] for w in caught if not _ours(w)})
    obs.append(("warnings", ("V", msgs)))
    return obs


def compare(name, fn) -> str:
    got, exp = observe(fn, True), observe(fn, False)
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
        d = a4.same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return f"ok    {name}"


def _mlp(seed=0, n_in=3, hidden=4, n_out=2):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, n_out))


def _grads(m):
    return [p.grad for p in m.parameters()]


def _params(m):
    return [p.detach().clone() for p in m.parameters()]


def _x(*shape, seed=0):
    return leaf(*shape, seed=seed, rg=False)


# ============================================================================================
# modules that change their own state in forward
class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("step", torch.zeros((), dtype=torch.long))
        self.calls = 0

    def forward(self, x):
        self.step += 1
        self.calls += 1
        return self.lin(x) * self.step + self.calls


@scenario
def state_step_counters(C, rec):
    torch.manual_seed(0)
    m = Counter()
    f = C(m)
    for k in range(3):
        out = f(_x(2, 3, seed=k))
        rec(f"out {k}", out)
        out.sum().backward()
        rec(f"state {k}", [m.step, m.calls, *_grads(m)])


class RunningMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        h = self.lin(x)
        if self.training:
            with torch.no_grad():
                self.mean.mul_(0.9).add_(h.mean(0), alpha=0.1)
                self.seen.add_(x.shape[0])
        return h - self.mean


@scenario
def state_running_average_train_eval(C, rec):
    torch.manual_seed(0)
    m = RunningMean()
    f = C(m)
    for k, mode in enumerate(("train", "train", "eval", "train")):
        m.train(mode == "train")
        out = f(_x(4, 3, seed=k))
        rec(f"out {k}", out)
        if mode == "train":
            out.square().sum().backward()
        rec(f"state {k}", [m.mean, m.seen, *_grads(m)])


@scenario
def state_ema_inside_compiled(C, rec):
    m = _mlp()
    ema = _mlp(seed=1)
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def update():
        with torch.no_grad():
            for p, e in zip(m.parameters(), ema.parameters()):
                e.mul_(0.9).add_(p, alpha=0.1)

    f, u = C(m), C(update)
    for k in range(3):
        f(_x(4, 3, seed=k)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        u()
        rec(f"ema {k}", _params(ema))
        rec(f"ema out {k}", C(ema)(_x(2, 3, seed=9)))


@scenario
def state_ema_in_forward(C, rec):
    class WithEma(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("ema_w", self.lin.weight.detach().clone())

        def forward(self, x):
            with torch.no_grad():
                self.ema_w.lerp_(self.lin.weight, 0.5)
            return self.lin(x) + x @ self.ema_w.t()

    torch.manual_seed(0)
    m = WithEma()
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    for k in range(3):
        out = f(_x(2, 3, seed=k))
        rec(f"out {k}", out)
        out.sum().backward()
        rec(f"grads {k}", _grads(m))
        opt.step()
        opt.zero_grad()
        rec(f"ema {k}", m.ema_w)


@scenario
def state_attribute_assigned_tensor(C, rec):
    class Cache(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.cache = None

        def forward(self, x):
            h = self.lin(x)
            self.cache = h
            self.last_input = x
            return h.relu()

    torch.manual_seed(0)
    m = Cache()
    f = C(m)
    x = leaf(2, 3)
    out = f(x)
    rec("out", out)
    rec("cache", [m.cache, m.last_input])
    rec("cache is input", m.last_input is x)
    (out.sum() + m.cache.sum()).backward()
    rec("grads", [x.grad, *_grads(m)])
    out = f(leaf(2, 3, seed=1))
    rec("cache 2", m.cache)


@scenario
def state_python_list_attribute_appended(C, rec):
    class Log(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.history = []

        def forward(self, x):
            h = self.lin(x)
            self.history.append(h.detach().sum())
            return h

    torch.manual_seed(0)
    m = Log()
    f = C(m)
    for k in range(3):
        f(_x(2, 3, seed=k)).sum().backward()
    rec("history", list(m.history))
    rec("grads", _grads(m))


# ============================================================================================
# training loops
@scenario
def train_grad_accumulation(C, rec):
    m = _mlp()
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        for micro in range(2):
            loss = f(_x(4, 3, seed=10 * step + micro)).square().mean() / 2
            loss.backward()
            rec(f"loss {step}.{micro}", loss)
            rec(f"grads {step}.{micro}", _grads(m))
        opt.step()
        opt.zero_grad(set_to_none=step % 2 == 0)
        rec(f"after {step}", [*_params(m), *_grads(m)])


@scenario
def train_zero_grad_keep_tensors(C, rec):
    m = _mlp()
    f = C(m)
    grads_before = None
    for step in range(3):
        f(_x(4, 3, seed=step)).sum().backward()
        if grads_before is None:
            grads_before = [p.grad for p in m.parameters()]
        rec(
            f"same grad tensors {step}", [g is p.grad for g, p in zip(grads_before, m.parameters())]
        )
        rec(f"grads {step}", _grads(m))
        m.zero_grad(set_to_none=False)
        rec(f"zeroed {step}", _grads(m))


@scenario
def train_freeze_thaw_first_layer(C, rec):
    m = _mlp()
    f = C(m)
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    for step, frozen in enumerate((False, True, True, False)):
        m[0].requires_grad_(not frozen)
        out = f(_x(4, 3, seed=step))
        rec(f"out {step}", out)
        out.square().sum().backward()
        rec(f"grads {step}", _grads(m))
        opt.step()
        opt.zero_grad()
        rec(f"params {step}", _params(m))


@scenario
def train_freeze_everything_then_eval_output(C, rec):
    m = _mlp()
    f = C(m)
    f(_x(4, 3)).sum().backward()
    m.requires_grad_(False)
    out = f(_x(4, 3, seed=1))
    rec("frozen out", out)
    rec("raises", out.sum().requires_grad)
    m.requires_grad_(True)
    m.zero_grad()
    out = f(_x(4, 3, seed=2))
    rec("thawed out", out)
    out.sum().backward()
    rec("grads", _grads(m))


@scenario
def train_dropout_batchnorm_train_eval(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(0.0), nn.Linear(4, 2)
    )
    f = C(m)
    for k, mode in enumerate((True, False, True, False)):
        m.train(mode)
        out = f(_x(5, 3, seed=k))
        rec(f"out {k}", out)
        if mode:
            out.sum().backward()
        rec(f"bn {k}", [m[1].running_mean, m[1].running_var, m[1].num_batches_tracked])
    rec("grads", _grads(m))


@scenario
def train_parameter_replaced_and_loaded(C, rec):
    m = _mlp()
    f = C(m)
    opt_x = _x(4, 3)
    f(opt_x).sum().backward()
    m[2].weight = nn.Parameter(torch.full((2, 4), 0.25))
    out = f(opt_x)
    rec("out new", out)
    out.sum().backward()
    rec("grads new", _grads(m))
    sd = {k: v * 2 for k, v in _mlp(seed=3).state_dict().items()}
    m.load_state_dict(sd)
    m.zero_grad()
    out = f(opt_x)
    rec("out loaded", out)
    out.sum().backward()
    rec("grads loaded", _grads(m))
    m[0].bias = None
    out = f(opt_x)
    rec("out no bias", out)


@scenario
def train_optimizer_step_compiled_with_loop(C, rec):
    m = _mlp()
    opt = torch.optim.AdamW(m.parameters(), lr=0.05)

    def step(x):
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    s = C(step)
    for k in range(3):
        rec(f"loss {k}", s(_x(4, 3, seed=k)))
        rec(f"params {k}", _params(m))


# ============================================================================================
# grad-mode regions inside the compiled code
@scenario
def grad_mode_regions_inside(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        with torch.no_grad():
            a = lin(x)
        with torch.inference_mode():
            b = x * 2
        c = lin(x + b)
        return a, b, c

    x = leaf(2, 3)
    a, b, c = C(f)(x)
    rec("outs", [a, b, c])
    rec("inference", [a.is_inference(), b.is_inference(), c.is_inference()])
    c.sum().backward()
    rec("grads", [x.grad, lin.weight.grad])


@scenario
def grad_mode_enable_grad_inside_no_grad(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        with torch.enable_grad():
            y = lin(x)
        return y, lin(x)

    x = leaf(2, 3)
    with torch.no_grad():
        y, z = C(f)(x)
    rec("outs", [y, z])
    y.sum().backward()
    rec("grads", [x.grad, lin.weight.grad])


@scenario
def grad_mode_set_grad_enabled_flag(C, rec):
    lin = nn.Linear(3, 3)

    def f(x, train: bool):
        with torch.set_grad_enabled(train):
            return lin(x).tanh()

    g = C(f)
    for k, train in enumerate((True, False, True)):
        out = g(leaf(2, 3, seed=k), train)
        rec(f"out {k}", out)


@scenario
def grad_mode_inference_mode_outside(C, rec):
    m = _mlp()
    f = C(m)
    with torch.inference_mode():
        out = f(_x(2, 3))
    rec("out", out)
    rec("inference", out.is_inference())
    out2 = f(_x(2, 3))
    out2.sum().backward()
    rec("grads", _grads(m))


# ============================================================================================
# hooks
@scenario
def hooks_module_forward_and_pre(C, rec):
    m = _mlp()
    seen = []
    m[0].register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m[2].register_forward_hook(lambda mod, args, out: out + 1)
    m[1].register_forward_hook(lambda mod, args, out: seen.append(out.detach().sum()))
    f = C(m)
    x = leaf(4, 3)
    out = f(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, *_grads(m)])
    rec("seen", seen)
    h = m[2].register_forward_hook(lambda mod, args, out: out * 3)
    rec("out hook added", f(x))
    h.remove()
    rec("out hook removed", f(x))


@scenario
def hooks_tensor_intermediate_and_input(C, rec):
    lin = nn.Linear(3, 3)
    seen = []

    def f(x):
        x.register_hook(lambda g: g * 2)
        h = lin(x)
        h.register_hook(lambda g: seen.append(g.clone()) or g + 1)
        return h.tanh().sum()

    x = leaf(2, 3)
    g = C(f)
    g(x).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])
    rec("seen", seen)


@scenario
def hooks_post_accumulate_order(C, rec):
    m = _mlp()
    order = []
    for name, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, n=name: order.append(n))
    f = C(m)
    for k in range(2):
        f(_x(4, 3, seed=k)).sum().backward()
    rec("order", order)
    rec("grads", _grads(m))


@scenario
def hooks_optimizer_in_backward(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    opts = {p: torch.optim.SGD([p], lr=0.1) for p in m.parameters()}
    order = []

    def hook(p):
        order.append(tuple(p.shape))
        opts[p].step()
        opts[p].zero_grad()

    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)
    f = C(m)
    for k in range(3):
        f(_x(5, 3, seed=k)).square().sum().backward()
        rec(f"params {k}", _params(m))
    rec("order", order)


@scenario
def hooks_leaf_tensor_hook_order(C, rec):
    m = _mlp()
    order = []
    for name, p in m.named_parameters():
        p.register_hook(lambda g, n=name: order.append(n))
    f = C(m)
    f(_x(4, 3)).sum().backward()
    rec("order", order)


# ============================================================================================
# outputs in containers
Pair = collections.namedtuple("Pair", ["logits", "aux"])


@dataclasses.dataclass
class Result:
    loss: torch.Tensor
    parts: list
    name: str
    n: int


@scenario
def outputs_every_container(C, rec):
    m = _mlp()

    def f(x):
        h = m(x)
        return {
            "pair": Pair(h, h.argmax(-1)),
            "result": Result(h.square().mean(), [h[0], (h[1], 2.5)], "ok", 3),
            "nested": [[h.sum()], {"int": 7, "none": None, "t": x * 2}],
        }

    x = leaf(3, 3)
    out = C(f)(x)
    rec("types", [type(out["pair"]).__name__, type(out["result"]).__name__])
    rec("out", out)
    out["result"].loss.backward()
    rec("grads", [x.grad, *_grads(m)])


@scenario
def outputs_dataclass_input_and_output(C, rec):
    @dataclasses.dataclass
    class Batch:
        x: torch.Tensor
        mask: torch.Tensor
        scale: float

    m = _mlp()

    def f(b: Batch):
        return Result(m(b.x * b.mask[:, None]).sum() * b.scale, [b.mask.sum()], "b", 1)

    g = C(f)
    for k in range(2):
        b = Batch(leaf(4, 3, seed=k), torch.tensor([1.0, 0.0, 1.0, 1.0]), 0.5 + k)
        r = g(b)
        rec(f"out {k}", r)
        r.loss.backward()
        rec(f"grads {k}", [b.x.grad, *_grads(m)])


# ============================================================================================
# tensors captured from globals and closures, changed between calls
_SCALE = torch.ones(3)


def _uses_global(x):
    return x * _SCALE


@scenario
def captured_global_changed(C, rec):
    global _SCALE
    _SCALE = torch.ones(3)
    g = C(_uses_global)
    x = leaf(2, 3)
    rec("1", g(x))
    _SCALE.mul_(3)
    rec("2 in place", g(x))
    _SCALE = torch.full((3,), 0.5)
    rec("3 rebound", g(x))
    _SCALE = torch.full((3,), 0.5, requires_grad=True)
    out = g(x)
    rec("4 requires grad", out)
    out.sum().backward()
    rec("grads", [x.grad, _SCALE.grad])
    _SCALE = torch.ones(3)


@scenario
def captured_closure_changed(C, rec):
    state = {"w": torch.ones(3)}
    bias = torch.zeros(3)

    def f(x):
        return x * state["w"] + bias

    g = C(f)
    x = _x(2, 3)
    rec("1", g(x))
    bias.add_(1)
    rec("2", g(x))
    state["w"] = torch.arange(3.0)
    rec("3", g(x))
    state["w"] = torch.arange(3, dtype=torch.float64)
    rec("4 dtype", g(x))


# ============================================================================================
# inputs that are views of each other, written in place
@scenario
def inplace_views_of_each_other(C, rec):
    def f(a, b, c):
        b.add_(1)
        c.mul_(2)
        return a.sum(), b.clone(), c.clone()

    base = torch.arange(12.0).reshape(3, 4)
    out = C(f)(base, base[0], base[:, 1])
    rec("out", out)
    rec("base", base)


@scenario
def inplace_view_chain_with_grad(C, rec):
    def f(x, v):
        v.mul_(x[1])
        return x.sum()

    w = leaf(3, 4)
    x = w * 1
    out = C(f)(x, x[0])
    rec("out", out)
    rec("x", x)
    out.backward()
    rec("grad", w.grad)


@scenario
def inplace_same_tensor_twice(C, rec):
    def f(a, b):
        a.add_(b)
        return a * 1

    t = torch.arange(4.0)
    out = C(f)(t, t)
    rec("out", out)
    rec("t", t)


# ============================================================================================
# .data writes, retain_grad, autograd.grad, second order, custom Function, torch.func
@scenario
def data_writes_inside(C, rec):
    m = _mlp()

    def f(x):
        m[0].weight.data.mul_(0.5)
        out = m(x)
        m[2].bias.data = torch.zeros(2)
        return out

    x = leaf(2, 3)
    g = C(f)
    out = g(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, *_grads(m)])
    rec("params", _params(m))
    rec("out 2", g(x))


@scenario
def data_swap_between_calls(C, rec):
    m = _mlp()
    f = C(m)
    x = _x(2, 3)
    rec("1", f(x))
    m[0].weight.data = torch.ones(4, 3)
    rec("2", f(x))
    m[0].weight.data = torch.ones(4, 3, dtype=torch.float64).float()
    out = f(x)
    rec("3", out)
    out.sum().backward()
    rec("grads", _grads(m))


@scenario
def retain_grad_intermediates(C, rec):
    lin = nn.Linear(3, 3)
    kept = {}

    def f(x):
        h = lin(x)
        h.retain_grad()
        kept["h"] = h
        y = h.tanh()
        y.retain_grad()
        return y, y.sum() * 2

    x = leaf(2, 3)
    y, s = C(f)(x)
    s.backward()
    rec("grads", [y.grad, kept["h"].grad, x.grad])
    rec("flags", [y.is_leaf, y.retains_grad, kept["h"].retains_grad])


@scenario
def autograd_grad_allow_unused_materialize(C, rec):
    def f(x, y, z):
        return (x * 2).sum(), (y * 3).sum()

    x, y, z = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    a, b = C(f)(x, y, z)
    rec("unused", torch.autograd.grad(a, [x, y, z], allow_unused=True, retain_graph=True))
    rec(
        "materialized",
        torch.autograd.grad(
            a, [x, y, z], allow_unused=True, materialize_grads=True, retain_graph=True
        ),
    )
    rec("both", torch.autograd.grad([a, b], [x, y, z], allow_unused=True))


@scenario
def autograd_grad_inside_compiled(C, rec):
    def f(x, y):
        out = (x * y).sin().sum()
        gx, gy = torch.autograd.grad(out, [x, y], create_graph=True)
        return out, gx, gy

    x, y = leaf(3), leaf(3, seed=1)
    out, gx, gy = C(f)(x, y)
    rec("out", [out, gx, gy])
    (gx.sum() + gy.square().sum()).backward()
    rec("grads", [x.grad, y.grad])


@scenario
def second_order_gradient_penalty(C, rec):
    m = _mlp()
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for k in range(2):
        x = leaf(4, 3, seed=k)
        out = f(x)
        (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        loss = out.square().mean() + gx.square().sum()
        loss.backward()
        rec(f"loss {k}", loss)
        rec(f"grads {k}", [x.grad, *_grads(m)])
        opt.step()
        opt.zero_grad()


class _Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo):
        ctx.save_for_backward(x)
        ctx.lo = lo
        return x.clamp(min=lo)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > ctx.lo) * 0.5, None


@scenario
def custom_function_in_module(C, rec):
    m = _mlp()

    def f(x):
        return _Clip.apply(m(x), 0.1).sum()

    g = C(f)
    for k in range(2):
        x = leaf(4, 3, seed=k)
        out = g(x)
        rec(f"out {k}", out)
        out.backward()
        rec(f"grads {k}", [x.grad, *_grads(m)])


@scenario
def func_over_compiled_module(C, rec):
    m = _mlp()
    params = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p, x):
        return torch.func.functional_call(m, p, (x,)).square().sum()

    x = _x(4, 3)
    g = C(torch.func.grad(loss))
    rec("grad", g(params, x))
    per_sample = C(torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0)))
    rec("per sample", per_sample(params, x[:, None]))
    jac = C(torch.func.jacrev(lambda x: m(x)))
    rec("jacrev", jac(_x(3)))


@scenario
def func_grad_of_compiled_module_outside(C, rec):
    m = _mlp()
    cm = C(m)
    params = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p, x):
        return torch.func.functional_call(cm, p, (x,)).square().sum()

    rec("grad", torch.func.grad(loss)(params, _x(4, 3)))


# ============================================================================================
# reentrant checkpoints
@scenario
def ckpt_reentrant_frozen_input_in_loop(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(10, 3)
    blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])

    def f(i):
        h = emb(i)
        for b in blocks:
            h = checkpoint(b, h, use_reentrant=True)
        return h.sum()

    g = C(f)
    for frozen in (False, True):
        emb.requires_grad_(not frozen)
        out = g(torch.tensor([[1, 2, 3]]))
        rec(f"out frozen={frozen}", out)
        if out.requires_grad:
            out.backward()
        rec(f"grads frozen={frozen}", [emb.weight.grad, *(p.grad for p in blocks.parameters())])


def main(argv) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
