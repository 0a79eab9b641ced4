"""Probe torch2xla's guards and caches for stale programs, part two: process state changed
between calls (default dtype, matmul precision, deterministic mode, thread count), training
state (layers frozen mid-training, dropout and batch statistics across train/eval), module
attributes of every Python kind, nested containers, specialized 0/1 sizes, one function
compiled twice with other options, Dynamo reset and its recompile limit; and every scenario of
both probes again with the persistent cache on, warm: a second Dynamo trace of each graph is
served by the record the first one stored (a record keyed too loosely serves another
signature's program).

    PYTHONPATH=. python scripts/probe_guards2.py [substring ...]
    PYTHONPATH=. python scripts/probe_guards2.py --warm [substring ...]   # both probes, cache warm
    PYTHONPATH=. python scripts/probe_guards2.py --persistent [substring ...]  # two processes

The harness is ``probe_guards.py``'s: a scenario is ``fn(C, call)``, every call compared with
eager (dtype, shape, strides, requires_grad, grad_fn presence, values). With ``--warm`` each
scenario runs compiled twice on one fresh cache directory (cold, then warm), each run compared
with eager.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch import nn

# (this worktree's torch2xla, not an installed one)
sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
]
import probe_guards as pg
from probe_guards import rand

import torch2xla
from torch2xla.guards import _persistent

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


class _state:
    """Restores torch's process state a scenario changes (so the eager run starts as the
    compiled one did)."""

    def __enter__(self):
        self.saved = (
            torch.get_default_dtype(),
            torch.get_float32_matmul_precision(),
            torch.backends.cuda.matmul.allow_tf32,
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.get_num_threads(),
            torch._dynamo.config.recompile_limit,
        )
        return self

    def __exit__(self, *exc):
        dt, prec, tf32, det, warn_only, threads, limit = self.saved
        torch.set_default_dtype(dt)
        torch.set_float32_matmul_precision(prec)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        torch.set_num_threads(threads)
        torch._dynamo.config.recompile_limit = limit
        return False


def stateful(fn):
    def wrapped(C, call):
        with _state():
            fn(C, call)

    wrapped.__name__ = fn.__name__
    return scenario(wrapped)


# ============================================================================================
# process state between calls
@stateful
def default_dtype_between_calls(C, call):
    f = C(lambda x, s: (x * s, torch.ones(2) + x.sum(), torch.tensor([1.5, 2.5]), x.float()))
    xi = rand(3, dtype=torch.int64)
    for dt in (torch.float32, torch.float64, torch.float32, torch.bfloat16, torch.float64):
        torch.set_default_dtype(dt if dt != torch.bfloat16 else torch.float16)
        call(f"{dt} float scalar", lambda: f(xi, 2.5))
        call(f"{dt} float scalar 2", lambda: f(xi, 3.5))
        call(f"{dt} int scalar", lambda: f(xi, 2))


@stateful
def default_dtype_dynamic(C, call):
    f = C(lambda x: (x / 2, torch.arange(x.shape[0]) * 0.5, x.mean(dtype=None)), dynamic=True)
    for dt, n in ((torch.float32, 3), (torch.float64, 4), (torch.float32, 5), (torch.float64, 3)):
        torch.set_default_dtype(dt)
        call(f"{dt} int {n}", lambda n=n: f(rand(n, dtype=torch.int64)[:2] * 1.0))
        call(f"{dt} true div {n}", lambda n=n: f(torch.arange(n)))


@stateful
def matmul_precision_between_calls(C, call):
    f = C(lambda x, w: (x @ w, F.linear(x, w.t()), torch.bmm(x[None], w[None])))
    x, w = rand(8, 16), rand(16, 4, seed=1)
    for prec in ("highest", "high", "medium", "highest"):
        torch.set_float32_matmul_precision(prec)
        call(prec, lambda: f(x, w))
    for tf32 in (True, False):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        call(f"allow_tf32={tf32}", lambda: f(x, w))


@stateful
def deterministic_between_calls(C, call):
    def g(x, i, v):
        y = x.clone()
        y.index_put_((i,), v, accumulate=True)
        return y, x.scatter_add(0, i, v), torch.zeros(4).index_add(0, i, v)

    f = C(g)
    x, i, v = rand(4), torch.tensor([0, 1, 1, 3, 0]), rand(5, seed=1)
    for det in (False, True, False, True):
        torch.use_deterministic_algorithms(det)
        call(f"deterministic={det}", lambda: f(x, i, v))


@stateful
def num_threads_between_calls(C, call):
    # hardtanh's gradient at NaN: which elements eager's CPU kernel computes in its vectorized
    # loop depends on its thread count (the lowering reads it)
    def g(x):
        return F.hardtanh(x).sum()

    f = C(g)
    base = torch.full((40001,), float("nan"))  # (above 32768: cut per thread)
    base[::3] = 0.5
    for threads in (1, 2, 1):
        torch.set_num_threads(threads)
        x = base.clone().requires_grad_()
        out = call(f"threads={threads}", lambda x=x: f(x))
        out.backward()
        call.rec(f"grad threads={threads}", x.grad)


# ============================================================================================
# training state
@scenario
def freeze_layers_mid_training(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for step, frozen in enumerate((None, 0, 0, None, 2, 2, None)):
        for i, layer in enumerate(m):
            for p in layer.parameters():
                p.requires_grad_(i != frozen)
        out = call(f"step {step} frozen={frozen}", lambda step=step: f(rand(5, 4, seed=step)))
        out.square().mean().backward()
        call.rec(
            f"grads {step}", [p.grad if p.grad is not None else "none" for p in m.parameters()]
        )
        opt.step()
        opt.zero_grad(set_to_none=True)
        call.rec(f"params {step}", [p.detach().clone() for p in m.parameters()])


@scenario
def freeze_everything_then_input_grad(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    f = C(m)
    for frozen in (False, True, True, False):
        m.requires_grad_(not frozen)
        x = rand(3, 4, rg=True)
        out = call(f"frozen={frozen}", lambda x=x: f(x))
        out.sum().backward()
        call.rec(
            "grads", [x.grad, *[p.grad if p.grad is not None else "none" for p in m.parameters()]]
        )
        m.zero_grad(set_to_none=True)


@scenario
def dropout_train_eval(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5))
    f = C(m)
    x = rand(40, 6)
    for mode in ("eval", "train", "eval", "train", "eval"):
        getattr(m, mode)()
        with torch.no_grad():
            out = f(x)
            ref = m[0](x)
        if mode == "eval":
            call.rec(mode, out)
        else:  # every element dropped (0) or kept and scaled by 2, some of both
            kept = torch.isclose(out, ref * 2, atol=1e-6)
            call.rec(f"{mode} pattern", bool(((out == 0) | kept).all()))
            call.rec(f"{mode} both", bool(kept.any() and (out == 0).any()))


@scenario
def batchnorm_cumulative_stats(C, call):
    # momentum=None: a cumulative average weighted by num_batches_tracked
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4, momentum=None))
    torch.manual_seed(0)
    m[0].reset_parameters()
    f = C(m)
    for i, mode in enumerate(("train", "train", "eval", "train", "eval", "train")):
        getattr(m, mode)()
        out = call(f"{mode} {i}", lambda i=i: f(rand(6, 3, seed=i)))
        if mode == "train":
            out.sum().backward()
        call.rec(
            f"stats {i}",
            [m[1].running_mean.clone(), m[1].running_var.clone(), m[1].num_batches_tracked.clone()],
        )
    call.rec("grad", m[0].weight.grad)


@scenario
def batchnorm_track_running_stats_toggled(C, call):
    m = nn.BatchNorm1d(3)
    f = C(m)
    for i, (mode, track) in enumerate(((True, True), (False, True), (False, False), (True, True))):
        m.train(mode)
        m.track_running_stats = track
        with torch.no_grad():
            call(f"train={mode} track={track}", lambda i=i: f(rand(4, 3, seed=i)))
        call.rec(f"stats {i}", [m.running_mean.clone(), m.num_batches_tracked.clone()])


@scenario
def parameter_replaced_during_training(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    f(x).sum().backward()
    call.rec("grad 0", m.weight.grad)
    m.weight = nn.Parameter(torch.full((2, 3), 0.5))
    out = call("new weight", lambda: f(x))
    out.square().sum().backward()
    call.rec("grad 1", [m.weight.grad, m.bias.grad])
    m.load_state_dict({"weight": torch.ones(2, 3), "bias": torch.zeros(2)})
    m.zero_grad(set_to_none=True)
    out = call("loaded", lambda: f(x))
    out.square().sum().backward()
    call.rec("grad 2", [m.weight.grad, m.bias.grad])
    m.double()
    out = call("double", lambda: f(x.double()))
    out.square().sum().backward()
    call.rec("grad 3", [m.weight.grad, m.bias.grad])


# ============================================================================================
# module attributes of every kind, plain tensor attributes
class AttrNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "sum"
        self.dims = [0]
        self.shape = (2, 3)
        self.opts = {"scale": 2.0, "shift": True}
        self.t = torch.tensor([1.0, 2.0, 3.0])
        self.none = None

    def forward(self, x):
        y = x.reshape(self.shape) * self.t * self.opts["scale"]
        if self.opts["shift"]:
            y = y - 1
        if self.none is not None:
            y = y + self.none
        return y.sum(self.dims) if self.mode == "sum" else y.amax(self.dims)


@scenario
def module_attributes_of_every_kind(C, call):
    m = AttrNet()
    f = C(m)
    x = rand(6)
    call("first", lambda: f(x))
    m.mode = "max"
    call("str", lambda: f(x))
    m.dims = [1]
    call("list replaced", lambda: f(x))
    m.dims.append(0)
    call("list appended", lambda: f(x))
    m.shape = (3, 2)
    m.t = torch.tensor([1.0, 2.0])
    call("tuple and tensor shape", lambda: f(x))
    m.opts["scale"] = 3.0
    call("dict value", lambda: f(x))
    m.opts["shift"] = False
    call("dict bool", lambda: f(x))
    m.t = torch.tensor([1, 2], dtype=torch.int64)
    call("tensor dtype", lambda: f(x))
    m.t = torch.tensor([1.0, 2.0], dtype=torch.float64)
    call("tensor float64", lambda: f(x))
    m.none = torch.tensor(5.0)
    call("None -> tensor", lambda: f(x))
    m.none = 2
    call("tensor -> int", lambda: f(x))
    m.mode = "sum"
    m.dims = [0]
    call("back", lambda: f(x))


def _helper_a(x):
    return x.sin()


def _helper_b(x):
    return x.cos()


HELPER = _helper_a
FLAGS = {"on": True}


def _uses_helper(x):
    y = HELPER(x)
    return y * 2 if FLAGS["on"] else y


@scenario
def global_function_and_dict(C, call):
    global HELPER
    f = C(_uses_helper)
    x = rand(4)
    call("a", lambda: f(x))
    HELPER = _helper_b
    call("b", lambda: f(x))
    FLAGS["on"] = False
    call("flag off", lambda: f(x))
    HELPER = _helper_a
    FLAGS["on"] = True
    call("a again", lambda: f(x))


@scenario
def closure_cells_of_every_kind(C, call):
    scale, t, fn = 2.0, torch.tensor([1.0, 2.0]), torch.sin

    def h(x):
        return fn(x) * scale + t

    f = C(h)
    x = rand(2)
    call("first", lambda: f(x))
    scale = 3
    call("int", lambda: f(x))
    t = torch.tensor([1, 2], dtype=torch.int32)
    call("tensor int", lambda: f(x))
    fn = torch.cos
    call("function", lambda: f(x))
    t = torch.tensor(4.0, dtype=torch.float64)
    call("0-d float64", lambda: f(x))
    scale = True
    call("bool", lambda: f(x))


# ============================================================================================
# nested containers, kwargs
Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    y: torch.Tensor | None = None
    k: float = 1.0


@scenario
def nested_containers_structure(C, call):
    def g(inp):
        if isinstance(inp, dict):
            out = sum(v * i for i, v in enumerate(inp.values(), 1))
            return out, list(inp)
        if isinstance(inp, Batch):
            return inp.x * inp.k + (0 if inp.y is None else inp.y)
        if isinstance(inp, Pair):
            return inp.a - inp.b
        return sum(t * (i + 1) for i, t in enumerate(inp))

    f = C(g)
    a, b, c = rand(3), rand(3, seed=1), rand(3, seed=2)
    call("dict ab", lambda: f({"a": a, "b": b}))
    call("dict ba", lambda: f({"b": b, "a": a}))
    call("dict abc", lambda: f({"a": a, "b": b, "c": c}))
    call("dict a", lambda: f({"a": a}))
    call("list 2", lambda: f([a, b]))
    call("list 3", lambda: f([a, b, c]))
    call("tuple 2", lambda: f((b, a)))
    call("tuple of 0-d", lambda: f((torch.tensor(1.0), torch.tensor(2.0))))
    call("namedtuple", lambda: f(Pair(a, b)))
    call("namedtuple swapped", lambda: f(Pair(b, a)))
    call("dataclass", lambda: f(Batch(a)))
    call("dataclass y", lambda: f(Batch(a, b)))
    call("dataclass k", lambda: f(Batch(a, b, 3.0)))
    call("dataclass k int", lambda: f(Batch(a, None, 2)))
    call("dict of lists", lambda: f({"a": a, "b": b * 2}))


@scenario
def nested_same_tensor_twice(C, call):
    def g(d):
        d["a"].add_(1)
        return d["a"] + d["b"]

    f = C(g)
    call("distinct", lambda: f({"a": rand(3), "b": rand(3, seed=1)}))
    x = rand(3, seed=2)
    call("same tensor", lambda: f({"a": x, "b": x}))
    call("x", lambda: x)


@scenario
def kwargs_order_and_presence(C, call):
    def g(x, **kw):
        out = x
        for k, v in kw.items():
            out = out * 2 + v if k.startswith("a") else out - v
        return out

    f = C(g)
    x = rand(3)
    call("a b", lambda: f(x, a=1.0, b=2.0))
    call("b a", lambda: f(x, b=2.0, a=1.0))
    call("a", lambda: f(x, a=1.0))
    call("b tensor", lambda: f(x, b=rand(3, seed=1)))
    call("none", lambda: f(x))


# ============================================================================================
# sizes: 0 and 1 (specialized), bucket boundaries with mark_dynamic
@scenario
def zero_and_one_sized_dims(C, call):
    fns = {
        "sum": lambda x: (x.sum(0), x.mean(1), x.amax(1) if x.shape[1] else x.sum(1)),
        "broadcast": lambda x: x + x[:1].expand_as(x) * 2,
        "matmul": lambda x: x.t() @ x,
        "softmax": lambda x: x.softmax(0),
        "cat": lambda x: torch.cat([x, x.flip(0)]).cumsum(0),
    }
    for name, fn in fns.items():
        for dyn in (None, True):
            torch._dynamo.reset()
            f = C(fn, dynamic=dyn)
            for n in (3, 1, 0, 4, 1, 2, 0):
                call(f"{name} dyn={dyn} n={n}", lambda n=n, f=f: f(rand(n, 2, seed=n)))


@scenario
def mark_dynamic_across_buckets(C, call):
    def g(x, y):
        return (x.softmax(-1) @ y).sum(0), x.shape[0] * y.mean()

    f = C(g, options={"buckets": [4, 8]})
    for n, k in ((3, 2), (5, 2), (4, 3), (9, 2), (1, 2), (8, 5), (2, 2)):
        x, y = rand(n, k), rand(k, 3, seed=1)
        torch._dynamo.mark_dynamic(x, 0)
        call(f"{n},{k}", lambda x=x, y=y: f(x, y))


@scenario
def maybe_mark_dynamic_and_static(C, call):
    f = C(lambda x: x.cumsum(0) / x.shape[0])
    for n in (3, 4, 5, 6):
        x = rand(n, 2, seed=n)
        if n % 2:
            torch._dynamo.maybe_mark_dynamic(x, 0)
        else:
            torch._dynamo.mark_static(x, 0)
        call(f"n={n}", lambda x=x: f(x))


# ============================================================================================
# compiled twice, reset, recompile limit
@scenario
def one_function_compiled_twice(C, call):
    def g(x, s):
        return (x.sin() * s).cumsum(0) * x.shape[0]

    fa = C(g)
    fb = C(g, dynamic=True, options={"buckets": [8]})
    fc = C(g, options={"eager_ops": [torch.ops.aten.sin], "buckets": None})
    fd = C(g, mode="reduce-overhead")
    for n, s in ((3, 2.0), (5, 3.0), (3, -0.0), (6, 2.0)):
        for name, f in (("a", fa), ("b", fb), ("c", fc), ("d", fd)):
            call(f"{name} n={n} s={s}", lambda n=n, s=s, f=f: 1 / f(rand(n, 2, seed=n), s))


@scenario
def dynamo_reset_between_calls(C, call):
    f = C(lambda x: x * 2 + x.shape[0])
    for n in (3, 4, 3):
        call(f"n={n}", lambda n=n: f(rand(n)))
        torch._dynamo.reset()
    torch2xla.clear_caches() if hasattr(f, "_torchdynamo_orig_callable") else None
    call("after clear", lambda: f(rand(5)))


@stateful
def recompile_limit_falls_back(C, call):
    torch._dynamo.config.recompile_limit = 2

    def g(x, k):
        return x * k + x.sum()

    f = C(g)
    x = rand(3)
    for k in (1, 2, 3, 4, 5, 2, 1, 3):  # ints specialize: one trace per value, then eager
        call(f"k={k}", lambda k=k: f(x, k))
    for dt in (torch.float64, torch.int32, torch.float16, torch.float32):
        call(f"{dt}", lambda dt=dt: f(x.to(dt), 2))


@stateful
def recompile_limit_module(C, call):
    torch._dynamo.config.recompile_limit = 1
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    f = C(m)
    for i, dt in enumerate((torch.float32, torch.float64, torch.float32, torch.float64)):
        m.to(dt)
        out = call(f"{dt} {i}", lambda dt=dt: f(rand(2, 3, dtype=dt)))
        out.sum().backward()
        call.rec(f"grad {i}", m.weight.grad)
        m.zero_grad(set_to_none=True)


# ============================================================================================
# autocast combined with grad mode and dtype changes
@scenario
def autocast_dtype_grad_matrix(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    f = C(m)
    x = rand(3, 4)
    for ac in (None, torch.bfloat16, torch.float16, None, torch.bfloat16):
        for grad in (True, False):
            auto = torch.autocast("cpu", dtype=ac or torch.bfloat16, enabled=ac is not None)
            with auto, torch.set_grad_enabled(grad):
                out = call(f"{ac} grad={grad}", lambda: f(x))
            if grad:
                out.float().sum().backward()
                # (under autocast, float32 gradients that went through half products: eager's
                # and ours are equally far from float64's, ~1e-2 for bf16; compared as halves)
                to = ac or torch.float32
                call.rec("grads", [p.grad.to(to) for p in m.parameters()])
                m.zero_grad(set_to_none=True)


# ============================================================================================
# lazy bits, layouts of parameters, functional parameters, tensor hooks, stances
def _real(out):
    """Complex outputs as real pairs (the probe's ``same`` compares real values) and their
    lazy conjugate and negative bits."""
    if isinstance(out, tuple):
        return tuple(_real(o) for o in out)
    if out.is_complex():
        return (torch.view_as_real(out.resolve_conj().resolve_neg()), out.is_conj(), out.is_neg())
    return out


@scenario
def conj_and_neg_bits(C, call):
    f = C(lambda x: (x * 2, x.real + x.imag, x.abs(), x.clone()))
    z = torch.complex(rand(3), rand(3, seed=1))
    call("plain", lambda: _real(f(z)))
    call("conj view", lambda: _real(f(z.conj())))
    call("plain again", lambda: _real(f(z)))
    call("neg view", lambda: _real(f(torch._neg_view(z))))
    call("conj resolved", lambda: _real(f(z.conj().resolve_conj())))
    g = C(lambda x: x.conj() * 1j)
    call("conj inside", lambda: _real(g(z)))
    call("conj inside of conj view", lambda: _real(g(z.conj())))


@scenario
def conv_model_to_channels_last_training(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    f = C(m)
    x = rand(2, 3, 5, 5)
    for i, fmt in enumerate(
        (torch.contiguous_format, torch.channels_last, torch.contiguous_format)
    ):
        m.to(memory_format=fmt)
        xi = x.to(memory_format=fmt).requires_grad_()
        out = call(f"{fmt}", lambda xi=xi: f(xi))
        out.square().sum().backward()
        call.rec(f"grads {i}", [xi.grad, m[0].weight.grad, m[1].weight.grad])
        call.rec(f"stats {i}", [m[1].running_mean.clone(), m[1].running_var.clone()])
        m.zero_grad(set_to_none=True)


@scenario
def functional_call_parameter_dicts(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(lambda params, x: torch.func.functional_call(m, params, (x,)))
    x = rand(4, 3)
    p1 = {k: v.detach().clone() for k, v in m.named_parameters()}
    p2 = {k: torch.full_like(v, 0.5) for k, v in m.named_parameters()}
    p3 = {
        "weight": torch.ones(2, 3, dtype=torch.float64),
        "bias": torch.zeros(2, dtype=torch.float64),
    }
    with torch.no_grad():
        call("p1", lambda: f(p1, x))
        call("p2", lambda: f(p2, x))
        call("p1 again", lambda: f(p1, x))
        call("p3 float64", lambda: f(p3, x.double()))
    p4 = {k: v.clone().requires_grad_() for k, v in p2.items()}
    out = call("p4 grad", lambda: f(p4, x))
    out.sum().backward()
    call.rec("grads", [p4["weight"].grad, p4["bias"].grad])


@scenario
def tensor_hooks_added_after_compile(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    for i in range(4):
        if i == 1:
            h = m.weight.register_hook(lambda g: g * 10)
        if i == 2:
            h.remove()
            m.bias.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(3))
        xi = x.clone().requires_grad_()
        xi.register_hook(lambda g: g + 1) if i == 3 else None
        out = call(f"{i}", lambda xi=xi: f(xi))
        out.square().sum().backward()
        call.rec(f"grads {i}", [m.weight.grad, m.bias.grad, xi.grad])
        m.zero_grad(set_to_none=True)


@scenario
def non_leaf_inputs(C, call):
    w = rand(3, seed=1, rg=True)
    f = C(lambda x: (x * w).exp().sum())
    for i in range(3):
        x = rand(3, rg=True)
        y = x * 2 if i == 1 else (x[None].expand(2, 3)[0] if i == 2 else x)
        out = call(f"{i}", lambda y=y: f(y))
        out.backward()
        call.rec(f"grads {i}", [x.grad, w.grad])
        w.grad = None


@scenario
def compiler_stance_between_calls(C, call):
    f = C(lambda x: x.sin() * x.shape[0])
    call("3", lambda: f(rand(3)))
    for stance in ("force_eager", "eager_on_recompile", "default"):
        with torch.compiler.set_stance(stance):
            for n in (3, 4, 5):
                call(f"{stance} {n}", lambda n=n: f(rand(n, seed=n)))


@scenario
def inference_mode_batchnorm_train(C, call):
    m = nn.BatchNorm1d(3)
    f = C(m)
    for i, ctx in enumerate(("grad", "inference", "no_grad", "inference", "grad")):
        cm = {"grad": torch.enable_grad, "no_grad": torch.no_grad}.get(ctx, torch.inference_mode)
        with cm():
            out = call(f"{ctx} {i}", lambda i=i: f(rand(4, 3, seed=i)))
        call.rec(f"out rg {i}", out.requires_grad)
        call.rec(f"stats {i}", [m.running_mean.clone(), m.num_batches_tracked.clone()])


@stateful
def unspec_int_attribute(C, call):
    torch._dynamo.config.allow_unspec_int_on_nn_module = True
    try:

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.k = 2

            def forward(self, x):
                return x.roll(self.k, 0) * self.k, x[: self.k].sum()

        m = M()
        f = C(m)
        x = rand(6)
        for k in (2, 3, 1, 0, 5, 2):
            m.k = k
            call(f"k={k}", lambda: f(x))
    finally:
        torch._dynamo.config.allow_unspec_int_on_nn_module = False


# ============================================================================================
# global tensors and lists, Python's random, numpy arrays
GLOBAL_T = torch.tensor([1.0, 2.0, 3.0])
GLOBAL_LIST: list = [torch.tensor(1.0)]


def _uses_global_tensors(x):
    out = x * GLOBAL_T
    for t in GLOBAL_LIST:
        out = out + t
    return out


@scenario
def global_tensors_mutated_and_replaced(C, call):
    global GLOBAL_T
    f = C(_uses_global_tensors)
    x = rand(3)
    saved = GLOBAL_T
    try:
        call("first", lambda: f(x))
        GLOBAL_T.mul_(2)
        call("mutated", lambda: f(x))
        GLOBAL_T = torch.tensor([5.0])
        call("other shape", lambda: f(x))
        GLOBAL_T = torch.tensor([1, 2, 3], dtype=torch.int32)
        call("int", lambda: f(x))
        GLOBAL_LIST.append(torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64))
        call("list appended", lambda: f(x))
        GLOBAL_LIST[0] = torch.tensor(-3.0)
        call("list item replaced", lambda: f(x))
    finally:
        GLOBAL_T = saved.clone().copy_(torch.tensor([1.0, 2.0, 3.0]))
        GLOBAL_LIST[:] = [torch.tensor(1.0)]


@scenario
def python_random_and_numpy(C, call):
    import random

    import numpy as np

    f = C(lambda x: x * random.random() + random.randint(0, 9))
    for seed in (0, 1, 0):
        random.seed(seed)
        call(f"random seed={seed}", lambda: f(rand(3)))
    g = C(lambda a: torch.from_numpy(a) * 2 if isinstance(a, np.ndarray) else a * 2)
    for a in (np.arange(3.0), np.arange(3), np.arange(4.0)[::2], np.ones((2, 2), np.float32)):
        call(f"numpy {a.dtype} {a.shape}", lambda a=a: g(a))


@scenario
def plain_tensor_attribute_requiring_grad(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.ones(3, requires_grad=True)

        def forward(self, x):
            return (x * self.w).sum()

    m = M()
    f = C(m)
    for i in range(3):
        if i == 1:
            m.w = torch.full((3,), 2.0, requires_grad=True)
        if i == 2:
            m.w = torch.full((3,), 3.0)
        out = call(f"{i}", lambda i=i: f(rand(3, seed=i)))
        if out.requires_grad:
            out.backward()
        call.rec(f"grad {i}", m.w.grad if m.w.grad is not None else "none")


# ============================================================================================
# a compiled optimizer step: learning rate, frozen parameters and state between steps
def _compiled_step(C, opt_cls, **kw):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = opt_cls(m.parameters(), **kw)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    step = C(opt.step)
    return m, opt, sched, step


def _optimizer_steps(C, call, opt_cls, **kw):
    m, opt, sched, step = _compiled_step(C, opt_cls, **kw)
    for i in range(6):
        frozen = i in (2, 3)
        m[0].requires_grad_(not frozen)
        loss = m(rand(5, 4, seed=i)).square().mean()
        loss.backward()
        call(f"step {i}", lambda: step())
        call.rec(f"params {i}", [p.detach().clone() for p in m.parameters()])
        opt.zero_grad(set_to_none=True)
        sched.step()
    call.rec(
        "state", [v.clone() for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    )


@scenario
def compiled_sgd_step_lr_and_frozen(C, call):
    _optimizer_steps(C, call, torch.optim.SGD, lr=0.1, momentum=0.9, weight_decay=0.01)


@scenario
def compiled_adamw_step_lr_and_frozen(C, call):
    _optimizer_steps(C, call, torch.optim.AdamW, lr=torch.tensor(0.01), foreach=True)


# ============================================================================================
# the persistent cache across processes (probe_guards.py's worker): state of the second process
PERSISTENT = [
    (
        "thread count (hardtanh's gradient at NaN, above 32768 elements)",
        "def make():\n    torch.set_num_threads(2)\n    return lambda x: F.hardtanh(x).sum()\n",
        "def make():\n    torch.set_num_threads(1)\n    return lambda x: F.hardtanh(x).sum()\n",
        "[(torch.full((40001,), float('nan')),)]",
        "{'rg': True}",
        False,
    ),
    (
        "matmul precision",
        "def make():\n    return lambda x, w: x @ w\n",
        "def make():\n    torch.set_float32_matmul_precision('medium')\n    return lambda x, w: x @ w\n",
        "[(rand(8, 64), rand(64, 8, seed=1))]",
        "{}",
        True,
    ),
    (
        "default argument",
        "def make():\n    def f(x, k=2.0):\n        return x * k\n    return f\n",
        "def make():\n    def f(x, k=3.0):\n        return x * k\n    return f\n",
        "[(rand(3, 4),)]",
        "{}",
        True,
    ),
    (
        "closure cell",
        "def make(k=2):\n    return lambda x: x.roll(k, 0)\n",
        "def make(k=1):\n    return lambda x: x.roll(k, 0)\n",
        "[(rand(3, 4),)]",
        "{}",
        True,
    ),
    (
        "string attribute of a module",
        (
            "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.red = 'sum'\n"
            "    def forward(s, x):\n        return x.sum(0) if s.red == 'sum' else x.mean(0)\n"
            "def make():\n    return M()\n"
        ),
        (
            "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.red = 'mean'\n"
            "    def forward(s, x):\n        return x.sum(0) if s.red == 'sum' else x.mean(0)\n"
            "def make():\n    return M()\n"
        ),
        "[(rand(3, 4),)]",
        "{}",
        True,
    ),
    (
        "deterministic mode",
        "def make():\n    return lambda x, i: x.index_put((i,), x[:3], accumulate=True)\n",
        (
            "def make():\n    torch.use_deterministic_algorithms(True)\n"
            "    return lambda x, i: x.index_put((i,), x[:3], accumulate=True)\n"
        ),
        "[(rand(4), torch.tensor([0, 0, 2]))]",
        "{}",
        True,
    ),
]
for _name, *_rest in PERSISTENT:
    pg.persistent(_name, *_rest[:2], calls=_rest[2], kw=_rest[3], no_grad=_rest[4])


# ============================================================================================
def compare_warm(name, fn) -> str:
    """``fn`` compiled twice on one fresh persistent cache (cold, then served by the records
    the first run stored), each run compared with eager."""
    exp = pg.observe(fn, False)
    lines: list = []
    loaded: list = []
    with tempfile.TemporaryDirectory() as tmp:
        torch2xla.set_persistent_cache(tmp)
        try:
            for run in ("cold", "warm"):
                torch2xla.clear_caches()
                before = _persistent.hits()
                got = pg.observe(fn, True)
                loaded.append(_persistent.hits() - before)
                for (lg, g), (le, e) in zip(got, exp):
                    if lg != le:
                        lines.append(f"{run}: observation {lg!r} vs {le!r}")
                        break
                    d = pg.same(g, e, lg)
                    if d:
                        lines.append(f"{run}: {d}")
                        break
                else:
                    if len(got) != len(exp):
                        lines.append(f"{run}: {[x for x, _ in got]} vs {[x for x, _ in exp]}")
        finally:
            torch2xla.set_persistent_cache(None)
    if lines:
        return f"DIFF  {name} (warm cache, loaded {loaded}): " + " | ".join(lines)
    return f"ok    {name} (warm cache, loaded {loaded})"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--persistent"]:
        for name, *_ in PERSISTENT:
            if len(argv) == 1 or any(w in name for w in argv[1:]):
                print(pg.run_persistent(name), flush=True)
        return 0
    warm = argv[:1] == ["--warm"]
    wanted = argv[1:] if warm else argv
    table = {**pg.SCENARIOS, **SCENARIOS} if warm else SCENARIOS
    bad = 0
    for name, fn in table.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            line = compare_warm(name, fn) if warm else pg.compare(name, fn)
        except Exception as e:  # noqa: BLE001
            line = f"CRASH {name}: {type(e).__name__}: {str(e)[:400]}"
        if not line.startswith("ok") and name in pg.KNOWN:
            line += f"\n      ({pg.KNOWN[name]})"
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
