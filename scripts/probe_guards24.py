"""Probe torch2xla's guards and caches for stale programs, part three: what ``probe_guards.py``
and ``probe_guards2.py`` did not vary. Inference mode against no_grad on one compiled
function, Python ints passed to programs as tensors beside half-precision and small integer
tensors, module attributes of torch's own modules, closures and partials of one code object
capturing other constants, dict orders, ``torch.Size`` arguments, storage offsets, expanded and
transposed inputs under ``dynamic=True``, gradients' None-ness as layers freeze, and
cross-process records of functions that read globals.

    PYTHONPATH=. python scripts/probe_guards24.py [substring ...]
    PYTHONPATH=. python scripts/probe_guards24.py --warm [substring ...]   # cache warm
    PYTHONPATH=. python scripts/probe_guards24.py --persistent [substring ...]  # two processes

The harness is ``probe_guards.py``'s (a scenario is ``fn(C, call)``, every call compared with
eager: dtype, shape, strides, requires_grad, grad_fn presence, values), observing besides
whether each tensor is an inference tensor.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
]
import probe_guards as pg
import probe_guards2 as pg2
from probe_guards import rand

SCENARIOS: dict = {}
_describe = pg.describe


def describe(v):
    """``probe_guards.describe``, the dtype field saying too whether a tensor is an inference
    tensor (eager's outputs under ``inference_mode`` are)."""
    d = _describe(v)
    if d[0] == "T":
        return ("T", (d[1], "inference" if v.is_inference() else "normal"), *d[2:])
    return d


pg.describe = describe


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# ============================================================================================
# grad mode, inference mode
@scenario
def inference_mode_after_no_grad(C, call):
    f = C(lambda x, w: (x @ w).relu() + 1)
    x, w = rand(3, 4), rand(4, 2, seed=1, rg=True)
    with torch.no_grad():
        call("no_grad", lambda: f(x, w))
    with torch.inference_mode():
        call("inference_mode", lambda: f(x, w))
    with torch.no_grad():
        call("no_grad again", lambda: f(x, w))
    out = call("grad", lambda: f(x, w))
    out.sum().backward()
    call.rec("w.grad", w.grad)


@scenario
def no_grad_after_inference_mode(C, call):
    f = C(lambda x: x * 2 + x.sum())
    x = rand(3)
    with torch.inference_mode():
        call("inference_mode", lambda: f(x))
    with torch.no_grad():
        out = call("no_grad", lambda: f(x))
    call("write the output", lambda: out.add_(1))
    call("version", lambda: out._version)


@scenario
def inference_mode_written_input(C, call):
    def g(x, y):
        y.mul_(2)
        return x + y

    f = C(g)
    for mode in ("no_grad", "inference", "no_grad", "inference"):
        x, y = rand(3), rand(3, seed=1)
        ctx = torch.inference_mode() if mode == "inference" else torch.no_grad()
        with ctx:
            call(mode, lambda x=x, y=y: f(x, y))
        call(f"{mode} y", lambda y=y: y)


@scenario
def inference_mode_module_dynamic(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    f = C(m, dynamic=True)
    for n, mode in (
        (3, "inference"),
        (5, "no_grad"),
        (3, "no_grad"),
        (5, "inference"),
        (7, "grad"),
    ):
        x = rand(n, 4, seed=n)
        ctx = {
            "inference": torch.inference_mode(),
            "no_grad": torch.no_grad(),
            "grad": torch.enable_grad(),
        }[mode]
        with ctx:
            call(f"{mode} n={n}", lambda x=x: f(x))


@scenario
def inference_mode_disabled_inside(C, call):
    f = C(lambda x: x.exp() - 1)
    x = rand(4)
    with torch.inference_mode():
        call("inference", lambda: f(x))
        with torch.inference_mode(False):
            call("inference_mode(False) inside", lambda: f(x))
    call("outside", lambda: f(x))


@scenario
def grad_toggles_on_requires_grad_input(C, call):
    f = C(lambda x, w: (x * w).sum(0))
    x, w = rand(3, 2), rand(2, seed=1, rg=True)
    for mode in ("grad", "no_grad", "inference", "enable_grad in no_grad", "grad"):
        if mode == "inference":
            ctx = torch.inference_mode()
        elif mode == "no_grad":
            ctx = torch.no_grad()
        else:
            ctx = torch.enable_grad()
        with ctx:
            out = call(mode, lambda: f(x, w))
        if out.requires_grad:
            w.grad = None
            out.sum().backward()
            call.rec(f"{mode} w.grad", w.grad)


# ============================================================================================
# ints passed to programs as 0-d tensors (``capture/_int_values.py``)
@scenario
def int_argument_beside_half_tensors(C, call):
    f = C(lambda x, n: (x * n, x + n, x - n, n * x, x / n))
    for dt in (torch.bfloat16, torch.float16):
        x = (rand(4) * 4).to(dt)
        for n in (3, 257, 70001, 513, -1027, 2):
            call(f"{dt} n={n}", lambda x=x, n=n: f(x, n))


@scenario
def int_argument_beside_small_int_tensors(C, call):
    f = C(lambda x, n: (x + n, x * n, x // 3 + n))
    for dt in (torch.int8, torch.uint8, torch.int32):
        x = torch.arange(6, dtype=dt)
        for n in (3, 5, 100, 7):
            call(f"{dt} n={n}", lambda x=x, n=n: f(x, n))


@scenario
def int_argument_large_values(C, call):
    f = C(lambda x, n: x * n + 1)
    x = rand(3, dtype=torch.float64)
    for n in (3, 5, 2**40, 2**62, -(2**62), 7):
        call(f"n={n}", lambda n=n: f(x, n))


@scenario
def int_argument_in_comparisons_and_where(C, call):
    f = C(lambda x, n: (torch.where(x > n, x, n), (x < n).sum(), x.clamp(max=n)))
    x = torch.arange(10, dtype=torch.int32)
    for n in (3, 5, 8, 0, -1):
        call(f"n={n}", lambda n=n: f(x, n))


@scenario
def float_argument_beside_half_tensors(C, call):
    f = C(lambda x, s: (x * s, x + s, s - x, x / s))
    for dt in (torch.bfloat16, torch.float16):
        x = (rand(4) * 4).to(dt)
        for s in (0.5, 257.3, 70001.5, 1e-8, 3.0):
            call(f"{dt} s={s}", lambda x=x, s=s: f(x, s))


@scenario
def int_then_float_then_tensor_scalar(C, call):
    f = C(lambda x, s: x * s + s)
    x = torch.arange(4, dtype=torch.int32)
    for s in (2, 3, 2.5, torch.tensor(2), torch.tensor(2.5), torch.tensor([2]), 4, 3.5, True):
        call(f"s={s!r}", lambda s=s: f(x, s))


@scenario
def int_argument_as_view_offset(C, call):
    def g(x, cache, pos, k):
        cache[:, pos : pos + 1] = k
        return x[pos] * 2 + cache.sum(0), x[:, pos]

    f = C(g)
    for pos in (2, 3, 0, 4, -1, -5, 5, 7, 1):
        x, cache, k = rand(5, 5), torch.zeros(3, 5), rand(3, 1, seed=pos % 7)
        call(f"pos={pos}", lambda x=x, cache=cache, pos=pos, k=k: f(x, cache, pos, k))
        call(f"cache after pos={pos}", lambda cache=cache: cache)


@scenario
def int_argument_ops_between_calls(C, call):
    def g(x, xi, n):
        return (
            x**n,
            torch.full((2,), n) + xi.sum(),
            xi.clamp(min=n),
            xi % max(n, 1),
            xi.masked_fill(xi > 2, n),
            x.new_full((2,), n),
            torch.where(xi > n, xi, n),
        )

    f = C(g)
    x, xi = rand(4) + 2, torch.arange(6, dtype=torch.int8)
    for n in (2, 3, 5, 0, 127, 300, -129, 2):
        call(f"n={n}", lambda n=n: f(x, xi, n))


# ============================================================================================
# attributes of torch's own modules, changed between calls
@scenario
def torch_module_attributes(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(
        nn.Linear(4, 6), nn.LayerNorm(6), nn.LeakyReLU(0.1), nn.GELU(), nn.Dropout(0.0)
    )
    f = C(m)
    x = rand(3, 4) * 3
    call("first", lambda: f(x))
    m[1].eps = 10.0
    call("eps", lambda: f(x))
    m[2].negative_slope = 0.5
    call("negative_slope", lambda: f(x))
    m[3].approximate = "tanh"
    call("approximate", lambda: f(x))
    m[4].p = 1.0
    call("dropout p=1 (train)", lambda: f(x))
    m.eval()
    call("eval", lambda: f(x))
    m[1].elementwise_affine = False
    call("affine off", lambda: f(x))
    m[1].normalized_shape = (3, 6)
    call("normalized over two dims", lambda: f(x))


@scenario
def softmax_dim_and_flatten_start(C, call):
    m = nn.Sequential(nn.Softmax(dim=1), nn.Flatten(0))
    f = C(m)
    x = rand(2, 3, 4)
    call("first", lambda: f(x))
    m[0].dim = 2
    call("dim 2", lambda: f(x))
    m[1].start_dim = 1
    call("flatten 1", lambda: f(x))
    m[0].dim = -3
    call("dim -3", lambda: f(x))


@scenario
def module_float_attribute_many_values(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 0.5
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x) * self.scale + 1 / (x * self.scale)

    torch.manual_seed(0)
    m = M()
    f = C(m)
    x = rand(2, 3)
    for s in (0.5, 2.0, 3.0, -0.0, 0.0, 4.5, 0.5, float("inf"), 2):
        m.scale = s
        call(f"scale={s}", lambda: f(x))


@scenario
def module_swapped_submodule(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    f = C(m)
    x = rand(2, 3)
    call("relu", lambda: f(x))
    m[1] = nn.Tanh()
    call("tanh", lambda: f(x))
    m[0] = nn.Linear(3, 3, bias=False)
    call("no bias", lambda: f(x))
    m[1] = nn.ReLU()
    call("relu again", lambda: f(x))


@scenario
def load_state_dict_assign(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    f = C(m)
    x = rand(2, 4)
    call("first", lambda: f(x))
    sd = {"weight": rand(4, 3, seed=5).t(), "bias": rand(3, seed=6)}
    m.load_state_dict(sd, assign=True)
    call("assigned transposed weight", lambda: f(x))
    m.load_state_dict({"weight": rand(3, 4, seed=7), "bias": rand(3, seed=8)})
    call("copied", lambda: f(x))
    sd = {"weight": rand(3, 4, seed=9, dtype=torch.float64), "bias": rand(3, seed=10)}
    m.load_state_dict(sd, assign=True)
    call("assigned float64 weight", lambda: f(x))


# ============================================================================================
# one code object, other captured constants
def _make_closure(c):
    return lambda x: x * c + c


@scenario
def closures_of_one_code_other_constants(C, call):
    fs = [C(_make_closure(c)) for c in (2.0, 3.0, torch.tensor(4.0), torch.tensor([1.0, 2.0]))]
    x = rand(2)
    for round_ in range(2):
        for i, f in enumerate(fs):
            call(f"closure {i} round {round_}", lambda f=f: f(x))


def _scaled(x, k, bias=0.0):
    return x * k + bias


@scenario
def partials_of_one_function(C, call):
    fa = C(functools.partial(_scaled, k=2.0))
    fb = C(functools.partial(_scaled, k=3.0, bias=1.0))
    fc = C(functools.partial(_scaled, k=torch.tensor(5.0)))
    x = rand(3)
    for round_ in range(2):
        for name, f in (("a", fa), ("b", fb), ("c", fc)):
            call(f"{name} {round_}", lambda f=f: f(x))


class _Scaled(nn.Module):
    def __init__(self, k, c):
        super().__init__()
        self.k = k
        self.c = c  # (a plain tensor attribute)
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x) * self.k + self.c


@scenario
def two_instances_other_constants(C, call):
    torch.manual_seed(0)
    m1 = _Scaled(2, torch.tensor([1.0, 2.0]))
    m2 = _Scaled(2, torch.tensor([10.0, 20.0]))
    m3 = _Scaled(3.5, torch.tensor([1.0, 2.0]))
    fs = [C(m) for m in (m1, m2, m3)]
    x = rand(3, 2)
    for round_ in range(2):
        for i, f in enumerate(fs):
            call(f"m{i} {round_}", lambda f=f: f(x))


@scenario
def one_compiled_forward_two_instances(C, call):
    torch.manual_seed(0)
    m1 = _Scaled(2, torch.tensor([1.0, 2.0]))
    m2 = _Scaled(2, torch.tensor([10.0, 20.0]))
    fwd = C(_Scaled.forward)
    x = rand(3, 2)
    for round_ in range(2):
        call(f"m1 {round_}", lambda: fwd(m1, x))
        call(f"m2 {round_}", lambda: fwd(m2, x))


# ============================================================================================
# argument kinds
@scenario
def torch_size_arguments(C, call):
    f = C(lambda x, size: (x.reshape(size), torch.zeros(size) + x.sum()))
    x = rand(12)
    for size in (torch.Size([3, 4]), torch.Size([4, 3]), torch.Size([2, 6]), torch.Size([12])):
        call(f"{tuple(size)}", lambda size=size: f(x, size))


@scenario
def dict_key_order(C, call):
    def g(d):
        keys = list(d)
        return [d[k] * (i + 1) for i, k in enumerate(keys)], keys

    f = C(g)
    a, b = rand(2), rand(2, seed=1)
    call("ab", lambda: f({"a": a, "b": b}))
    call("ba", lambda: f({"b": b, "a": a}))
    d = {"a": a, "b": b}
    call("ab object", lambda: f(d))
    del d["a"]
    d["a"] = a
    call("ab reinserted", lambda: f(d))


@dataclasses.dataclass
class _Cfg:
    scale: float = 1.0
    act: str = "relu"
    flags: tuple = (True,)


@scenario
def dataclass_config_argument(C, call):
    def g(x, cfg):
        y = x * cfg.scale
        y = y.relu() if cfg.act == "relu" else y.tanh()
        return y + 1 if cfg.flags[0] else y

    f = C(g)
    x = rand(4)
    cfg = _Cfg()
    call("default", lambda: f(x, cfg))
    cfg.scale = 2.5
    call("scale mutated", lambda: f(x, cfg))
    cfg.act = "tanh"
    call("act mutated", lambda: f(x, cfg))
    cfg.flags = (False,)
    call("flags replaced", lambda: f(x, cfg))
    call("new object", lambda: f(x, _Cfg(scale=-1.0)))


@scenario
def zero_dim_and_one_element(C, call):
    f = C(lambda x, s: (x * s, s.sum(), s.shape))
    x = rand(3)
    for s in (torch.tensor(2.0), torch.tensor([2.0]), torch.tensor(3.0), torch.tensor([[3.0]])):
        call(f"{tuple(s.shape)}", lambda s=s: f(x, s))


@scenario
def storage_offset_read(C, call):
    f = C(lambda x: (x * 2, x.storage_offset()))
    base = rand(10)
    for k in (0, 1, 3, 1):
        call(f"offset {k}", lambda k=k: f(base[k : k + 4]))


@scenario
def storage_offset_written_dynamic(C, call):
    def g(x):
        x.add_(1)
        return x.sum()

    f = C(g, dynamic=True)
    for k, n in ((0, 4), (1, 4), (3, 5), (0, 6)):
        base = rand(10)
        call(f"offset {k} n={n}", lambda base=base, k=k, n=n: f(base[k : k + n]))
        call(f"base {k}", lambda base=base: base)


@scenario
def layouts_under_dynamic(C, call):
    f = C(lambda x: (x * 2, x.sum(0), x.t() @ x, x.view(-1) if x.is_contiguous() else None))
    for name, x in (
        ("contiguous", rand(4, 3)),
        ("transposed", rand(3, 4).t()),
        ("expanded", rand(1, 3).expand(4, 3)),
        ("expanded rows", rand(4, 1).expand(4, 3)),
        ("sliced", rand(4, 6)[:, ::2]),
        ("contiguous 5", rand(5, 3)),
        ("transposed 5", rand(3, 5).t()),
    ):
        call(name, lambda x=x: f(x))


@scenario
def layouts_under_dynamic_mark(C, call):
    f = C(lambda x: (x + 1).reshape(x.shape[0], -1) * 2)
    for name, x in (
        ("contiguous", rand(4, 3, 2)),
        ("permuted", rand(2, 3, 4).permute(2, 1, 0)),
        ("channels_last", rand(4, 3, 2, 2).to(memory_format=torch.channels_last)[:, :, 0]),
        ("expanded", rand(4, 1, 2).expand(4, 3, 2)),
        ("contiguous 6", rand(6, 3, 2)),
    ):
        torch._dynamo.mark_dynamic(x, 0)
        call(name, lambda x=x: f(x))


@scenario
def channels_last_outputs(C, call):
    f = C(lambda x: (torch.empty_like(x).fill_(1) + x, x.relu(), F.avg_pool2d(x, 2)))
    for name, x in (
        ("contiguous", rand(2, 3, 4, 4)),
        ("channels_last", rand(2, 3, 4, 4).to(memory_format=torch.channels_last)),
        ("contiguous again", rand(2, 3, 4, 4, seed=1)),
    ):
        call(name, lambda x=x: f(x))


# ============================================================================================
# training: freeze and unfreeze, gradients' None-ness
@scenario
def freeze_unfreeze_grad_none(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    f = C(m)
    x = rand(5, 3)
    plan = [(), (0,), (0, 2), (2,), (), (0, 2)]  # the layers frozen at each step
    for step, frozen in enumerate(plan):
        for i, layer in enumerate(m):
            for p in layer.parameters():
                p.requires_grad_(i not in frozen)
        m.zero_grad(set_to_none=True)
        xi = x.clone().requires_grad_(step % 2 == 1)
        out = call(f"step {step} frozen {frozen}", lambda xi=xi: f(xi))
        if out.requires_grad:
            out.square().sum().backward()
        call.rec(f"grads {step}", [p.grad for p in m.parameters()] + [xi.grad])


@scenario
def bias_frozen_only(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    for step, (w, b) in enumerate(((True, True), (True, False), (False, True), (False, False))):
        m.weight.requires_grad_(w)
        m.bias.requires_grad_(b)
        m.zero_grad(set_to_none=True)
        out = call(f"w={w} b={b}", lambda: f(x))
        if out.requires_grad:
            out.sum().backward()
        call.rec(f"grads {step}", [m.weight.grad, m.bias.grad])


@scenario
def no_grad_inside_module_toggled(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 1)
            self.freeze_a = False

        def forward(self, x):
            with torch.set_grad_enabled(not self.freeze_a):
                h = self.a(x).relu()
            return self.b(h)

    torch.manual_seed(0)
    m = M()
    f = C(m)
    x = rand(4, 3)
    for step, freeze in enumerate((False, True, False, True)):
        m.freeze_a = freeze
        m.zero_grad(set_to_none=True)
        out = call(f"freeze_a={freeze}", lambda: f(x))
        out.sum().backward()
        call.rec(f"grads {step}", [p.grad for p in m.parameters()])


# ============================================================================================
# backward programs: which outputs get cotangents, which inputs are asked for
@scenario
def backward_through_output_subsets(C, call):
    def g(x, w):
        h = x @ w
        return h.tanh(), h.sigmoid() * x.sum(), (h * 2).detach()

    f = C(g)
    x, w = rand(3, 4, rg=True), rand(4, 2, seed=1, rg=True)
    for step, used in enumerate(((0,), (1,), (0, 1), (), (1,), (0,))):
        outs = call(f"step {step} uses {used}", lambda: f(x, w))
        x.grad = w.grad = None
        loss = sum((outs[i] * (i + 1)).sum() for i in used) if used else None
        if loss is not None:
            loss.backward()
        call.rec(f"grads {step}", [x.grad, w.grad])


@scenario
def autograd_grad_input_subsets(C, call):
    f = C(lambda x, w, b: ((x @ w + b).relu() ** 2).sum())
    x, w, b = rand(3, 4, rg=True), rand(4, 2, seed=1, rg=True), rand(2, seed=2, rg=True)
    for which in ("x", "w", "wb", "xwb", "b", "x"):
        ins = [{"x": x, "w": w, "b": b}[c] for c in which]
        out = f(x, w, b)
        call(f"grad wrt {which}", lambda out=out, ins=ins: torch.autograd.grad(out, ins))


@scenario
def create_graph_then_plain(C, call):
    f = C(lambda x: (x.sin() * x).sum())
    x = rand(4, rg=True)
    for step, create in enumerate((False, True, False, True)):
        out = f(x)
        (g,) = call(
            f"grad create_graph={create}",
            lambda out=out, create=create: torch.autograd.grad(out, x, create_graph=create),
        )
        if create:
            call(f"second order {step}", lambda g=g: torch.autograd.grad(g.sum(), x))


@scenario
def retain_graph_twice_then_once(C, call):
    f = C(lambda x, w: (x * w).exp().sum(0))
    x, w = rand(3, 2), rand(2, seed=1, rg=True)
    for step, retain in enumerate((True, False, True)):
        out = f(x, w)
        w.grad = None
        out.sum().backward(retain_graph=retain)
        call.rec(f"grad {step}", w.grad)
        if retain:
            out[0].backward()
            call.rec(f"grad again {step}", w.grad)


@scenario
def written_input_leaf_or_not(C, call):
    def g(y, w):
        y.mul_(w)
        return y.sum() * 2

    f = C(g)
    w = rand(3, seed=1, rg=True)
    for i, kind in enumerate(("non-leaf", "leaf", "view of non-leaf", "non-leaf", "view of leaf")):
        x = rand(3, seed=i, rg=True)
        y = {
            "non-leaf": lambda x=x: x * 2,
            "leaf": lambda x=x: x,
            "view of non-leaf": lambda x=x: (x * 2)[None][0],
            "view of leaf": lambda x=x: x[None][0],
        }[kind]()
        out = call(f"{kind} {i}", lambda y=y: f(y, w))
        w.grad = None
        if isinstance(out, torch.Tensor):
            out.backward()
            call.rec(f"grads {i}", [x.grad, w.grad])


@scenario
def written_input_no_grad_then_grad(C, call):
    def g(y):
        y.add_(1)
        return y * y

    f = C(g)
    for i, mode in enumerate(("no_grad", "grad", "no_grad", "grad")):
        x = rand(3, seed=i, rg=True)
        y = x * 1
        with torch.set_grad_enabled(mode == "grad"):
            out = call(f"{mode} {i}", lambda y=y: f(y))
        call.rec(f"y {i}", y)
        if out.requires_grad:
            out.sum().backward()
            call.rec(f"grad {i}", x.grad)


# ============================================================================================
# data-dependent values between calls (graphs cut around eager ops)
@scenario
def data_dependent_counts_and_values(C, call):
    def g(x, v):
        y = x.clone()
        y[y > 0] = v
        idx = (x > 0.5).nonzero()
        return y, idx, x[x < 0] * 2, x.masked_select(x > 1).sum()

    f = C(g)
    for i, v in enumerate((1.5, 2.5, -0.0, 1.5, 7.0)):
        x = rand(6, seed=i)
        call(f"{i} v={v}", lambda x=x, v=v: f(x, v))


@scenario
def captured_item_values(C, call):
    saved = torch._dynamo.config.capture_scalar_outputs
    torch._dynamo.config.capture_scalar_outputs = True
    try:

        def g(x, t):
            k = t.item()
            return x * k + 1 / (x - k), x[: max(int(k), 1)].sum()

        f = C(g)
        x = rand(5) * 3
        for k in (2.0, 3.0, -0.0, 0.0, 1.5, 2.0):
            call(f"k={k}", lambda k=k: f(x, torch.tensor(k)))
        for k in (2, 3, 1):
            call(f"int k={k}", lambda k=k: f(x, torch.tensor(k)))
    finally:
        torch._dynamo.config.capture_scalar_outputs = saved


@scenario
def step_counter_tensor(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    step = torch.tensor(0)

    def g(x):
        step.add_(1)
        scale = torch.where(step > 2, 1.0, 0.5)
        return m(x) * scale + step

    f = C(g)
    x = rand(2, 3)
    for i in range(5):
        call(f"step {i}", lambda: f(x))
        call.rec(f"counter {i}", step.clone())


# ============================================================================================
# bucketing (default "auto"): ops over the padded dimension, sizes in no order
def _padded_dim_fns():
    def attention(x):
        q = x[None, None]
        return F.scaled_dot_product_attention(q, q, q, is_causal=True)[0, 0]

    def masked_attention(x):
        n = x.shape[0]
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        q = x[None, None]
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)[0, 0]

    return {
        "layer_norm over rows": lambda x: F.layer_norm(x.t(), (x.shape[0],)),
        "var and std": lambda x: (x.var(0), x.std(0, correction=0)),
        "sort and topk": lambda x: (x.sort(0).values, x.topk(2, 0).indices),
        "flip and roll": lambda x: (x.flip(0), x.roll(1, 0)),
        "cumsum flattened": lambda x: x.reshape(-1).cumsum(0),
        "tril of square": lambda x: (x @ x.t()).tril(),
        "causal attention": attention,
        "masked attention": masked_attention,
        "median": lambda x: x.median(0).values,
        "logcumsumexp": lambda x: x.logcumsumexp(0),
        "min with index": lambda x: (x.min(0).indices, x.argsort(0)),
        "diff and pad": lambda x: (x.diff(dim=0), F.pad(x, (0, 0, 1, 1), value=-1.0)),
        "count via ones": lambda x: torch.ones_like(x).sum(0) + x.new_ones(x.shape[0]).sum(),
        "mean by hand": lambda x: x.sum(0) / x.shape[0],
        "first and last": lambda x: x[0] * x[-1] + x[x.shape[0] // 2],
    }


@scenario
def bucketing_ops_over_padded_dim(C, call):
    for name, fn in _padded_dim_fns().items():
        torch._dynamo.reset()
        f = C(fn, dynamic=True)
        with torch.no_grad():
            for n in (5, 3, 9, 6, 17, 2, 12, 31, 7):
                call(f"{name} n={n}", lambda n=n, f=f: f(rand(n, 4, seed=n)))


@scenario
def bucketing_generate_like_loop(C, call):
    torch.manual_seed(0)
    emb, proj = nn.Embedding(11, 8), nn.Linear(8, 11)

    def step(ids, cache):
        h = emb(ids[:, -1:])
        cache = torch.cat([cache, h], 1)
        att = (h @ cache.transpose(1, 2) / 8**0.5).softmax(-1) @ cache
        return proj(att)[:, -1].argmax(-1), cache

    f = C(step, dynamic=True)
    with torch.no_grad():
        ids, cache = torch.tensor([[1, 2, 3]]), emb(torch.tensor([[1, 2]]))
        for i in range(12):
            nxt, cache = call(f"token {i}", lambda ids=ids, cache=cache: f(ids, cache))
            ids = torch.cat([ids, nxt[:, None]], 1)


@scenario
def as_strided_offset_training_retained(C, call):
    f = C(lambda x, w: (x.as_strided((3,), (2,), 3) * w).sin().sum())
    for k in (2, 0, 2):
        base = rand(10, seed=k)
        x = base[k : k + 6].detach().requires_grad_()
        w = rand(3, seed=7, rg=True)
        out = call(f"offset {k}", lambda x=x, w=w: f(x, w))
        out.backward(retain_graph=True)
        call.rec(f"grads {k}", [x.grad, w.grad])
        out.backward()
        call.rec(f"grads twice {k}", [x.grad, w.grad])


@scenario
def retained_and_double_backward(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    f = C(m)
    for i in range(3):
        x = rand(5, 3, seed=i, rg=True)
        out = call(f"call {i}", lambda x=x: f(x))
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        g.square().sum().backward(retain_graph=True)
        call.rec(f"grads {i}", [p.grad for p in m.parameters()])
        out.sum().backward()
        call.rec(f"grads again {i}", [p.grad for p in m.parameters()] + [x.grad])
        m.zero_grad(set_to_none=True)


# ============================================================================================
# custom autograd.Functions (run inside the program since session 23)
class _ScaleFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, flag):
        ctx.k, ctx.flag = k, flag
        ctx.save_for_backward(x)
        return x * k if flag else x.sin() * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g * ctx.k if ctx.flag else g * x.cos() * ctx.k), None, None


_FN_SCALE = 2.0


class _GlobalFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * _FN_SCALE

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * _FN_SCALE * 2 + x * 0


@scenario
def autograd_function_arguments_between_calls(C, call):
    f = C(lambda x, k, flag: _ScaleFn.apply(x.exp(), k, flag).sum())
    for i, (k, flag, n) in enumerate(
        ((2.0, True, 3), (3.0, True, 3), (2.0, False, 3), (4.0, True, 5))
    ):
        x = rand(n, seed=i, rg=True)
        out = call(f"k={k} flag={flag} n={n}", lambda x=x, k=k, flag=flag: f(x, k, flag))
        out.backward()
        call.rec(f"grad {i}", x.grad)


@scenario
def autograd_function_global_between_calls(C, call):
    global _FN_SCALE
    f = C(lambda x: _GlobalFn.apply(x * 1.5).sum())
    try:
        for i, scale in enumerate((2.0, 3.0, 2.0)):
            _FN_SCALE = scale
            x = rand(3, seed=i, rg=True)
            out = call(f"scale {scale}", lambda x=x: f(x))
            out.backward()
            call.rec(f"grad {i}", x.grad)
    finally:
        _FN_SCALE = 2.0


# ============================================================================================
# autocast, default dtype
@scenario
def autocast_cache_and_nested(C, call):
    torch.manual_seed(0)
    m = nn.Linear(4, 4)
    f = C(lambda x: m(x) @ m.weight)
    x = rand(3, 4)
    for enabled, dt in ((True, torch.bfloat16), (False, torch.bfloat16), (True, torch.float16)):
        with torch.autocast("cpu", dtype=dt, enabled=enabled):
            call(f"{enabled} {dt}", lambda: f(x))
            with torch.autocast("cpu", enabled=False):
                call(f"{enabled} {dt} nested off", lambda: f(x))


@scenario
def default_dtype_with_int_inputs(C, call):
    saved = torch.get_default_dtype()
    try:
        f = C(lambda x, s: (x / 2, x * s, torch.arange(3) * 0.5))
        x = torch.arange(4)
        for dt, s in ((torch.float32, 1.5), (torch.float64, 1.5), (torch.float32, 2.5)):
            torch.set_default_dtype(dt)
            call(f"{dt} {s}", lambda s=s: f(x, s))
    finally:
        torch.set_default_dtype(saved)


# ============================================================================================
# globals read by a function Dynamo keeps whole in the graph (allow_in_graph), across processes
_GLOBAL_K_A = """
K = 2.0
@torch.compiler.allow_in_graph
def scaled(x):
    return x * K
def make():
    return lambda x: scaled(x) + 1
"""
pg.persistent("allow_in_graph global", _GLOBAL_K_A, _GLOBAL_K_A.replace("K = 2.0", "K = 3.0"))
pg.persistent("allow_in_graph same global (a hit)", _GLOBAL_K_A, _GLOBAL_K_A)
_GLOBAL_FN = """
import math
def helper(x):
    return x.sin()
@torch.compiler.allow_in_graph
def outer(x):
    return helper(x) * 2
def make():
    return lambda x: outer(x)
"""
pg.persistent(
    "allow_in_graph global function",
    _GLOBAL_FN,
    _GLOBAL_FN.replace("return x.sin()", "return x.cos()"),
)
pg.persistent(
    "closure constant tensor",
    "def make():\n    c = torch.tensor([1.0, 2.0, 3.0, 4.0])\n    return lambda x: x + c\n",
    "def make():\n    c = torch.tensor([1.0, 2.0, 3.0, 5.0])\n    return lambda x: x + c\n",
)
pg.persistent(
    "inference mode against no_grad",
    "def make():\n    return lambda x: x * 2\n",
    "def make():\n    torch.inference_mode().__enter__()\n    return lambda x: x * 2\n",
)
pg.persistent(
    "int argument beside bf16",
    "def make():\n    return lambda x, n: x * n\n",
    "def make():\n    return lambda x, n: x * n\n",
    calls="[(rand(4, dtype=torch.bfloat16) * 4, 3), (rand(4, dtype=torch.bfloat16) * 4, 257)]",
)
PERSISTENT = [
    "allow_in_graph global",
    "allow_in_graph same global (a hit)",
    "allow_in_graph global function",
    "closure constant tensor",
    "inference mode against no_grad",
    "int argument beside bf16",
]


# ============================================================================================
def main(argv: list[str]) -> int:
    if argv[:1] == ["--persistent"]:
        for name in PERSISTENT:
            if len(argv) == 1 or any(w in name for w in argv[1:]):
                print(pg.run_persistent(name), flush=True)
        return 0
    warm = argv[:1] == ["--warm"]
    wanted = argv[1:] if warm else argv
    bad = 0
    for name, fn in SCENARIOS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            line = pg2.compare_warm(name, fn) if warm else pg.compare(name, fn)
        except Exception as e:  # noqa: BLE001
            line = f"CRASH {name}: {type(e).__name__}: {str(e)[:400]}"
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
