"""Probe torch2xla for stale programs when a compiled model's state, torch's process state or the
inputs' layout change between calls (session 22): module state changed after the first call
(``load_state_dict``, new parameters and their data, freezing, dtype casts, train/eval, hooks,
parametrizations, fusion, weight tying, attributes, ``deepcopy``, instances of one class,
``functional_call``), process state (seeds, grad and inference modes, autocast, oneDNN's
switches, deterministic mode, print options, threads) and inputs that differ only in layout,
aliasing, ``requires_grad``, dtype or in being 0-d tensors instead of Python numbers.

    PYTHONPATH=. python scripts/probe_modstate.py [substring ...]
    PYTHONPATH=. python scripts/probe_modstate.py --warm [substring ...]  # persistent cache warm
    PROBE_BACKEND=aot_eager python scripts/probe_modstate.py   # torch's own differences

The harness is ``probe_guards.py``'s: a scenario is ``fn(C, call)``, every call compared with
eager (dtype, shape, strides, requires_grad, grad_fn presence, values); gradients, buffers and
side effects are recorded with ``call.rec``. ``--warm`` runs each scenario compiled twice on
one fresh persistent cache (``probe_guards2.compare_warm``).
"""

from __future__ import annotations

import copy
import enum
import functools
import os
import sys
import types

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations, parametrize

sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
]
import probe_guards as pg
import probe_guards2 as pg2
from probe_guards import rand

SCENARIOS: dict = {}
# Differences that are torch's own (PROBE_BACKEND=aot_eager shows them too).
KNOWN = {
    name: "torch's own: Dynamo does not guard module hooks added after the compile "
    "(torch._dynamo.config.skip_nnmodule_hook_guards)"
    for name in ("hooks_full_backward", "hooks_forward_with_kwargs")
}
KNOWN["saved_tensor_hooks"] = (
    "torch's own (aot_eager too): a pack hook that changes the saved values is not applied as "
    "eager applies it"
)


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def stateful(fn):
    def wrapped(C, call):
        with pg2._state():
            saved = (
                torch.backends.mkldnn.enabled,
                torch.backends.mkldnn.matmul.fp32_precision,
                torch.backends.mkldnn.conv.fp32_precision,
            )
            try:
                return fn(C, call)
            finally:
                torch.backends.mkldnn.enabled = saved[0]
                torch.backends.mkldnn.matmul.fp32_precision = saved[1]
                torch.backends.mkldnn.conv.fp32_precision = saved[2]

    wrapped.__name__ = fn.__name__
    return scenario(wrapped)


def _grads(m: nn.Module) -> list:
    """Each parameter's gradient, or the string 'none' (None-ness compared too)."""
    return [p.grad if p.grad is not None else "none" for p in m.parameters()]


def _train_step(call, f, m, x, label):
    x = x.clone().requires_grad_()
    out = call(label, lambda: f(x))
    if isinstance(out, torch.Tensor) and out.requires_grad:
        # (weighted, not squared: a LayerNorm's output has a fixed sum of squares, whose
        # gradient is all round-off)
        w = torch.arange(out.numel(), dtype=torch.float64).cos().view(out.shape).to(out.dtype)
        (out * w).sum().backward()
    call.rec(label + " grads", [*_grads(m), x.grad if x.grad is not None else "none"])
    m.zero_grad(set_to_none=True)


# ============================================================================================
# module state changed after the first compiled call
@scenario
def load_state_dict_variants(C, call):
    torch.manual_seed(0)
    # (the BatchNorm first: a bias before it has an exact gradient 0, all round-off)
    m = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 4), nn.Linear(4, 2))
    f = C(m)
    x = rand(5, 4)
    _train_step(call, f, m, x, "first")
    sd = {
        k: torch.full_like(v, 0.25) if v.is_floating_point() else v
        for k, v in m.state_dict().items()
    }
    m.load_state_dict(sd)
    _train_step(call, f, m, x, "loaded")
    call.rec("stats", [m[0].running_mean.clone(), m[0].num_batches_tracked.clone()])
    # assign=True: the module's parameters become the loaded tensors (their dtype and layout)
    sd2 = {k: v.clone() for k, v in m.state_dict().items()}
    sd2["1.weight"] = torch.arange(16.0).view(4, 4).t() / 10  # (transposed layout)
    m.load_state_dict(sd2, assign=True)
    call.rec("assigned rg", [p.requires_grad for p in m.parameters()])
    _train_step(call, f, m, x, "assigned")
    sd3 = {k: v.double() if v.is_floating_point() else v for k, v in m.state_dict().items()}
    m.load_state_dict(sd3, assign=True)
    _train_step(call, f, m, x.double(), "assigned float64")
    m.eval()
    with torch.no_grad():
        call("eval float64", lambda: f(x.double()))


@scenario
def embedding_resized(C, call):
    torch.manual_seed(0)
    emb = nn.Embedding(6, 3)
    f = C(emb)
    idx = torch.tensor([[0, 5, 2]])
    call("first", lambda: f(idx))
    emb.weight = nn.Parameter(torch.randn(10, 3))
    emb.num_embeddings = 10
    call("resized", lambda: f(torch.tensor([[9, 0, 7]])))
    call("out of range", lambda: f(torch.tensor([[10]])))
    emb.padding_idx = 0
    out = call("padding_idx", lambda: f(torch.tensor([[0, 1, 0]])))
    out.sum().backward()
    call.rec("grad", emb.weight.grad)


@scenario
def param_data_layouts(C, call):
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    f = C(lin)
    x = rand(2, 4)
    _train_step(call, f, lin, x, "first")
    big = torch.arange(40.0).view(5, 8) / 10
    lin.weight.data = big[1:4, 2:6]  # (strided, with a storage offset)
    _train_step(call, f, lin, x, "slice")
    lin.weight.data = big[:3, ::2]
    _train_step(call, f, lin, x, "step 2")
    lin.bias.data = torch.tensor(0.5).expand(3)  # (stride 0)
    _train_step(call, f, lin, x, "expanded bias")
    lin.weight.data = lin.weight.data.clone()
    lin.bias.data = lin.weight.data[:, 0]  # (bias shares the weight's memory)
    _train_step(call, f, lin, x, "bias aliases weight")
    with torch.no_grad():
        lin.weight.mul_(2)
    _train_step(call, f, lin, x, "aliased mutated")


@scenario
def lora_freezing(C, call):
    class LoRA(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.base = nn.Linear(4, 4)
            self.a = nn.Parameter(torch.randn(2, 4) * 0.1)
            self.b = nn.Parameter(torch.zeros(4, 2))
            self.scale = 0.5

        def forward(self, x):
            return self.base(x) + (x @ self.a.t() @ self.b.t()) * self.scale

    m = LoRA()
    f = C(m)
    opt = torch.optim.SGD([p for p in m.parameters()], lr=0.1)
    x = rand(3, 4)
    for step, frozen in enumerate(("none", "base", "base", "all but b", "none")):
        for n, p in m.named_parameters():
            p.requires_grad_(
                frozen == "none"
                or (frozen == "base" and not n.startswith("base"))
                or (frozen == "all but b" and n == "b")
            )
        out = call(f"{step} {frozen}", lambda: f(x))
        out.square().sum().backward()
        call.rec(f"{step} grads", _grads(m))
        opt.step()
        opt.zero_grad(set_to_none=True)
        call.rec(f"{step} params", [p.detach().clone() for p in m.parameters()])
    for p in m.parameters():
        p.requires_grad_(False)
    out = call("all frozen", lambda: f(x))
    call.rec("all frozen rg", out.requires_grad)
    xr = x.clone().requires_grad_()
    out = call("all frozen input grad", lambda: f(xr))
    out.sum().backward()
    call.rec("input grad", xr.grad)


@scenario
def module_casts_training(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.GELU(), nn.Linear(4, 2))
    f = C(m)
    x = rand(3, 4)
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.float32):
        m.to(dt)
        _train_step(call, f, m, x.to(dt), str(dt))
    m.half()
    _train_step(call, f, m, x.half(), "half()")
    m.to(torch.float64)
    with torch.no_grad():
        call("float64 no_grad", lambda: f(x.double()))
    call("float64 module float32 input", lambda: f(x))


@scenario
def dropout_train_eval(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 8))
    f = C(m)
    x = rand(64, 8)
    for mode in ("eval", "train", "eval", "train", "eval"):
        getattr(m, mode)()
        with torch.no_grad():
            out = f(x)
        if mode == "eval":
            call.rec(mode, out)
        else:
            # the mask's values are not eager's: its effect must be (dropped hidden units are 0,
            # kept ones doubled): the output differs from eval's and is finite
            h = m[0](x)
            hid = (out - m[2].bias) @ torch.linalg.pinv(m[2].weight).t()
            kept = (hid - 2 * h).abs() < 1e-3
            dropped = hid.abs() < 1e-3
            call.rec(mode + " kept or dropped", bool((kept | dropped).all()))
            call.rec(mode + " some dropped", bool(dropped.float().mean() > 0.3))


@scenario
def hooks_full_backward(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    f = C(m)
    x = rand(3, 4)
    seen: list = []
    _train_step(call, f, m, x, "plain")
    h = m[0].register_full_backward_hook(lambda mod, gi, go: seen.append(go[0].clone()))
    _train_step(call, f, m, x, "backward hook")
    call.rec("seen", list(seen))
    h.remove()
    seen.clear()
    h = m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    _train_step(call, f, m, x, "backward pre hook")
    h.remove()
    _train_step(call, f, m, x, "removed")


@scenario
def hooks_forward_with_kwargs(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    f = C(m)
    x = rand(2, 4)
    _train_step(call, f, m, x, "plain")
    h = m.register_forward_hook(lambda mod, args, kw, out: out + 1, with_kwargs=True)
    _train_step(call, f, m, x, "forward hook kwargs")
    h.remove()
    h = m[0].register_forward_pre_hook(lambda mod, args: (args[0] * 3,), prepend=True)
    _train_step(call, f, m, x, "pre hook submodule")
    h.remove()
    _train_step(call, f, m, x, "removed")


@scenario
def parametrize_weight_norm(C, call):
    torch.manual_seed(0)
    lin = parametrizations.weight_norm(nn.Linear(4, 3))
    f = C(lin)
    x = rand(2, 4)
    _train_step(call, f, lin, x, "first")
    with torch.no_grad():
        lin.parametrizations.weight.original0.mul_(2)
    _train_step(call, f, lin, x, "g doubled")
    with parametrize.cached(), torch.no_grad():
        call("cached", lambda: f(x))
        call("cached 2", lambda: f(x))
    parametrize.remove_parametrizations(lin, "weight")
    _train_step(call, f, lin, x, "removed")


@scenario
def parametrize_orthogonal(C, call):
    torch.manual_seed(0)
    lin = parametrizations.orthogonal(nn.Linear(3, 3))
    f = C(lin)
    x = rand(2, 3)
    _train_step(call, f, lin, x, "first")
    with torch.no_grad():
        lin.parametrizations.weight.original.add_(0.3)
    _train_step(call, f, lin, x, "original changed")
    call.rec("weight", lin.weight.detach().clone())


@scenario
def parametrize_spectral_norm(C, call):
    torch.manual_seed(0)
    lin = parametrizations.spectral_norm(nn.Linear(4, 3))
    f = C(lin)
    x = rand(2, 4)
    for i in range(3):
        _train_step(call, f, lin, x, f"train {i}")
        call.rec(f"u {i}", lin.parametrizations.weight[0]._u.clone())
    lin.eval()
    for i in range(2):
        with torch.no_grad():
            call(f"eval {i}", lambda: f(x))
        call.rec(f"eval u {i}", lin.parametrizations.weight[0]._u.clone())


@scenario
def parametrize_registered_after_compile(C, call):
    class Sym(nn.Module):
        def forward(self, w):
            return (w + w.t()) / 2

    torch.manual_seed(0)
    lin = nn.Linear(3, 3)
    f = C(lin)
    x = rand(2, 3)
    _train_step(call, f, lin, x, "plain")
    parametrize.register_parametrization(lin, "weight", Sym())
    _train_step(call, f, lin, x, "parametrized")
    parametrize.remove_parametrizations(lin, "weight", leave_parametrized=False)
    _train_step(call, f, lin, x, "removed")


@scenario
def fusion_conv_bn(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU())
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(2, 2, 5, 5))
    m.eval()
    f = C(m)
    x = rand(1, 2, 5, 5)
    with torch.no_grad():
        call("unfused", lambda: f(x))
        fused = torch.nn.utils.fusion.fuse_conv_bn_eval(m[0], m[1])
        m[0] = fused
        m[1] = nn.Identity()
        call("fused", lambda: f(x))
        m2 = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).eval()
        g = C(m2)
        y = rand(2, 4)
        call("linear bn", lambda: g(y))
        m2[0] = torch.nn.utils.fusion.fuse_linear_bn_eval(m2[0], m2[1])
        m2[1] = nn.Identity()
        call("linear bn fused", lambda: g(y))


@scenario
def weight_tying(C, call):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.emb = nn.Embedding(5, 4)
            self.head = nn.Linear(4, 5, bias=False)

        def forward(self, idx):
            return self.head(torch.tanh(self.emb(idx)))

    m = LM()
    f = C(m)
    idx = torch.tensor([[1, 3, 4]])
    for state in ("untied", "tied", "untied again", "tied again"):
        if state.startswith("tied"):
            m.head.weight = m.emb.weight
        else:
            m.head.weight = nn.Parameter(m.emb.weight.detach().clone() * 0.5)
        out = call(state, lambda: f(idx))
        out.square().sum().backward()
        call.rec(state + " grads", [m.emb.weight.grad, m.head.weight.grad])
        m.zero_grad(set_to_none=True)


@scenario
def attributes_of_submodules(C, call):
    torch.manual_seed(0)
    # (a BatchNorm of a Linear's output makes the Linear's weight gradient ill-conditioned, its
    # float32 round-off ~1e-5 of 7e-3 in eager and compiled alike, and one before a LayerNorm
    # makes the LayerNorm bias's exact gradient 0: the BatchNorm comes first)
    m = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 4), nn.LeakyReLU(0.1), nn.LayerNorm(4))
    f = C(m)
    x = rand(6, 4)
    steps = [
        ("first", lambda: None),
        ("ln eps", lambda: setattr(m[3], "eps", 1.0)),
        ("ln no affine", lambda: (setattr(m[3], "weight", None), setattr(m[3], "bias", None))),
        ("bn momentum", lambda: setattr(m[0], "momentum", 0.5)),
        ("bn momentum None", lambda: setattr(m[0], "momentum", None)),
        ("bn eps", lambda: setattr(m[0], "eps", 0.5)),
        ("leaky slope", lambda: setattr(m[2], "negative_slope", 0.3)),
        ("leaky inplace", lambda: setattr(m[2], "inplace", True)),
        ("ln shape tuple", lambda: setattr(m[3], "normalized_shape", (4,))),
    ]
    for label, change in steps:
        change()
        _train_step(call, f, m, x, label)
        call.rec(label + " stats", [m[0].running_mean.clone(), m[0].running_var.clone()])


class Attrs(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2
        self.dims = [0]
        self.shape = (2, 3)
        self.cfg = {"act": "relu", "p": 2.0}
        self.use_bias = True
        self.bias = nn.Parameter(torch.ones(3))

    def forward(self, x):
        y = x.reshape(self.shape) * self.scale
        y = y.sum(self.dims, keepdim=True) + y
        y = y.relu() if self.cfg["act"] == "relu" else y.tanh()
        y = y.pow(self.cfg["p"])
        return y + self.bias if self.use_bias else y


@scenario
def attributes_of_python_kinds(C, call):
    m = Attrs()
    f = C(m)
    x = rand(6)
    steps = [
        ("first", lambda: None),
        ("int scale", lambda: setattr(m, "scale", 3)),
        ("float scale", lambda: setattr(m, "scale", 0.5)),
        ("bool scale", lambda: setattr(m, "scale", True)),
        ("tensor scale", lambda: setattr(m, "scale", torch.tensor(4.0))),
        ("list appended", lambda: m.dims.append(1)),
        ("list replaced", lambda: setattr(m, "dims", [1])),
        ("list item", lambda: m.dims.__setitem__(0, 0)),
        ("tuple", lambda: setattr(m, "shape", (3, 2))),
        ("dict item", lambda: m.cfg.__setitem__("act", "tanh")),
        ("dict float", lambda: m.cfg.__setitem__("p", 3.0)),
        ("dict float 2", lambda: m.cfg.__setitem__("p", 0.5)),
        ("bool flag", lambda: setattr(m, "use_bias", False)),
        ("bias None", lambda: (setattr(m, "use_bias", True), setattr(m, "bias", None))),
    ]
    for label, change in steps:
        change()
        if label == "tuple":
            m.bias = nn.Parameter(torch.ones(2))
        if label == "bias None":
            call(label, lambda: f(x))
            continue
        _train_step(call, f, m, x, label)


@scenario
def deepcopy_of_compiled(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    f = C(m)
    x = rand(3, 4)
    _train_step(call, f, m, x, "original")
    g = copy.deepcopy(f)
    inner = getattr(g, "_orig_mod", g)
    with torch.no_grad():
        for p in inner.parameters():
            p.mul_(-1)
    _train_step(call, g, inner, x, "copy")
    _train_step(call, f, m, x, "original again")
    inner[1] = nn.Tanh()
    _train_step(call, g, inner, x, "copy tanh")
    _train_step(call, f, m, x, "original relu")
    h = copy.deepcopy(m)
    fh = C(h)
    h.double()
    _train_step(call, fh, h, x.double(), "copy float64")


class Block(nn.Module):
    def __init__(self, n, seed, dtype=torch.float32):
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(n, n, dtype=dtype)
        self.ln = nn.LayerNorm(n, dtype=dtype)

    def forward(self, x):
        return self.ln(self.lin(x)).sin()


@scenario
def instances_share_cache(C, call):
    mods = [Block(4, 0), Block(4, 1), Block(6, 2), Block(4, 3, torch.float64), Block(4, 4)]
    fs = [C(m) for m in mods]
    for rnd in range(2):
        for i, (m, f) in enumerate(zip(mods, fs)):
            n = m.lin.in_features
            x = rand(2, n, seed=i, dtype=m.lin.weight.dtype)
            _train_step(call, f, m, x, f"{rnd} m{i}")
    mods[4].lin.weight.requires_grad_(False)
    _train_step(call, fs[4], mods[4], rand(2, 4), "m4 frozen")
    _train_step(call, fs[0], mods[0], rand(2, 4), "m0 after")


@scenario
def functional_call_swaps(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    f = C(lambda p, x: torch.func.functional_call(m, p, (x,)))
    x = rand(4, 3)
    full = {k: v.detach().clone() for k, v in m.state_dict().items()}
    partial = {"0.weight": torch.eye(3)}
    half = {k: torch.full_like(v, 0.5) if v.is_floating_point() else v for k, v in full.items()}
    tied = {"0.weight": full["0.weight"], "1.weight": full["0.weight"][0]}
    for label, p in (("full", full), ("partial", partial), ("half", half), ("tied", tied)):
        with torch.no_grad():
            call(label, lambda p=p: f(p, x))
        call.rec(label + " stats", [m[1].running_mean.clone(), m[1].num_batches_tracked.clone()])
    pr = {k: v.clone().requires_grad_() for k, v in half.items() if "running" not in k}
    pr = {k: v for k, v in pr.items() if v.is_floating_point()}
    out = call("grad", lambda: f(pr, x))
    out.sum().backward()
    call.rec("grads", [v.grad for v in pr.values()])
    m.eval()
    with torch.no_grad():
        call("eval full", lambda: f(full, x))
        call("eval half", lambda: f(half, x))


# ============================================================================================
# process state changed between calls
@stateful
def seeds_and_sequences(C, call):
    f = C(lambda x: (x + torch.rand_like(x), torch.randn(3), torch.randint(0, 100, (4,))))
    x = torch.zeros(4)
    runs = []
    for seed in (1, 1, 2):
        torch.manual_seed(seed)
        runs.append([f(x), f(x)])
    call.rec("same seed repeats", [torch.equal(a, b) for a, b in zip(runs[0][0], runs[1][0])])
    call.rec("second call repeats", [torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1])])
    call.rec(
        "calls draw fresh", [not torch.equal(a, b) for a, b in zip(runs[0][0][:2], runs[0][1][:2])]
    )
    call.rec(
        "other seed differs",
        [not torch.equal(a, b) for a, b in zip(runs[0][0][:2], runs[2][0][:2])],
    )
    gen = torch.Generator().manual_seed(5)
    g = C(lambda x, gen: torch.rand(x.shape, generator=gen) + x)
    a = g(x, gen)
    gen.manual_seed(5)
    b = g(x, gen)
    call.rec("generator repeats", torch.equal(a, b))
    with torch.random.fork_rng():
        torch.manual_seed(7)
        c = f(x)
    torch.manual_seed(7)
    d = f(x)
    call.rec("fork_rng", [torch.equal(p, q) for p, q in zip(c, d)])


@stateful
def grad_inference_autocast_matrix(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    f = C(m)
    x = rand(3, 4)
    for i, (grad, inf, ac) in enumerate(
        [
            (True, False, None),
            (False, False, torch.bfloat16),
            (True, False, torch.bfloat16),
            (False, True, None),
            (True, False, torch.float16),
            (False, True, torch.bfloat16),
            (True, False, None),
        ]
    ):
        ctx_grad = torch.enable_grad() if grad else torch.no_grad()
        ctx_inf = torch.inference_mode(inf)
        ctx_ac = torch.autocast("cpu", dtype=ac or torch.bfloat16, enabled=ac is not None)
        with ctx_grad, ctx_inf, ctx_ac:
            out = call(f"{i} grad={grad} inf={inf} ac={ac}", lambda: f(x))
        call.rec(f"{i} inference", out.is_inference())
        if out.requires_grad:
            out.float().sum().backward()
            # (under bf16/fp16 autocast the gradients went through bf16/fp16 matmuls: compared
            # in that precision, as the outputs are)
            grads = [g.to(ac) if ac is not None else g for g in _grads(m)]
            call.rec(f"{i} grads", grads)
            m.zero_grad(set_to_none=True)


@stateful
def onednn_switches(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 30 * 30, 16))
    f = C(m)
    x = rand(2, 3, 32, 32)
    # (64: float32 round-off of both stays within the probe's 1e-5; at 256 each is ~2e-5 off
    # a float64 reference)
    xw = rand(64, 64, seed=1)
    ww = rand(64, 64, seed=2)
    g = C(lambda a, b: (a @ b, F.linear(a, b)))
    steps = [
        ("plain", lambda: None),
        ("mkldnn off", lambda: setattr(torch.backends.mkldnn, "enabled", False)),
        ("mkldnn on", lambda: setattr(torch.backends.mkldnn, "enabled", True)),
        ("matmul bf16", lambda: setattr(torch.backends.mkldnn.matmul, "fp32_precision", "bf16")),
        ("conv bf16", lambda: setattr(torch.backends.mkldnn.conv, "fp32_precision", "bf16")),
        ("matmul ieee", lambda: setattr(torch.backends.mkldnn.matmul, "fp32_precision", "ieee")),
        ("conv ieee", lambda: setattr(torch.backends.mkldnn.conv, "fp32_precision", "ieee")),
        ("precision medium", lambda: torch.set_float32_matmul_precision("medium")),
        ("precision highest", lambda: torch.set_float32_matmul_precision("highest")),
    ]
    with torch.no_grad():
        for label, change in steps:
            change()
            call(label, lambda: f(x))
            call(label + " matmul", lambda: g(xw, ww))


@stateful
def onednn_switch_lstm_autocast(C, call):
    # eager's LSTM under CPU autocast returns the autocast dtype through oneDNN, float32
    # without it; Dynamo does not guard oneDNN's switch
    torch.manual_seed(0)
    m = nn.LSTM(4, 5, batch_first=True)
    f = C(m)
    x = rand(2, 3, 4)
    for on in (True, False, True, False):
        torch.backends.mkldnn.enabled = on
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            call(f"mkldnn={on}", lambda: f(x))


@stateful
def opt_einsum_switches(C, call):
    # the export decomposes einsum in the order opt_einsum chooses (eager's too): the result's
    # layout follows it; Dynamo does not guard it
    f = C(lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c))
    a, b, c = rand(3, 40), rand(40, 2, seed=1), rand(2, 50, seed=2)
    oe = torch.backends.opt_einsum
    before = oe.enabled, oe.strategy
    try:
        for en, strategy in ((True, "auto"), (False, "auto"), (True, "greedy"), (True, "auto")):
            oe.enabled = True
            oe.strategy = strategy
            oe.enabled = en
            call(f"{en} {strategy}", lambda: f(a, b, c))
    finally:
        oe.enabled = True
        oe.strategy = before[1]
        oe.enabled = before[0]


@stateful
def deterministic_fill_of_empty(C, call):
    # under deterministic algorithms eager fills empty tensors (NaN, the largest integer)
    def g(x):
        return torch.empty(3), torch.empty_like(x, dtype=torch.int64), x.new_empty(2) + x[:2]

    f = C(g)
    x = rand(3)
    for det, fill in ((False, True), (True, True), (True, False), (True, True)):
        torch.use_deterministic_algorithms(det)
        torch.utils.deterministic.fill_uninitialized_memory = fill
        out = f(x)
        call.rec(f"det={det} fill={fill} dtypes", [o.dtype for o in out])
        if det and fill:
            call.rec(f"det={det} fill={fill}", list(out))
    torch.utils.deterministic.fill_uninitialized_memory = True


@stateful
def print_options_and_threads(C, call):
    f = C(lambda x: (x.softmax(-1), x.cumsum(0), str(x.shape)))
    x = rand(50, 70)
    for label, change in (
        ("plain", lambda: None),
        ("print options", lambda: torch.set_printoptions(precision=2, sci_mode=True)),
        ("threads 1", lambda: torch.set_num_threads(1)),
        ("threads 2", lambda: torch.set_num_threads(2)),
        ("print default", lambda: torch.set_printoptions(profile="default")),
    ):
        change()
        call(label, lambda: f(x))


@stateful
def default_dtype_module_creation(C, call):
    def g(x):
        return x + torch.zeros(3), torch.tensor(1.5) * x, torch.arange(3.0), x.new_tensor(2.5)

    f = C(g)
    for dt in (torch.float32, torch.float64, torch.float16, torch.float32):
        torch.set_default_dtype(dt)
        x = torch.ones(3, dtype=torch.float32)
        call(str(dt), lambda x=x: f(x))
        call(str(dt) + " int input", lambda: f(torch.arange(3)))


# ============================================================================================
# inputs differing only in layout, aliasing, requires_grad, dtype, 0-d tensors vs numbers
def _layout_variants():
    base = rand(4, 6, seed=3)
    big = rand(10, 12, seed=4)
    return [
        ("contiguous", base.clone()),
        ("transposed", base.t().contiguous().t()),
        ("slice offset", big[2:6, 3:9]),
        ("step slice", big[::2, ::2][:4, :6]),
        ("expanded", rand(1, 6, seed=5).expand(4, 6)),
        ("flat offset", big.flatten()[7:31].view(4, 6)),
        ("contiguous again", base.clone()),
    ]


@scenario
def layouts_reductions_and_views(C, call):
    def g(x):
        return x.sum(0), x.view(-1) if x.is_contiguous() else x.reshape(-1), x.t() * 2, x[1:, ::2]

    f = C(g)
    for label, x in _layout_variants():
        call(label, lambda x=x: f(x))
        xr = x.detach().clone().requires_grad_() if label != "expanded" else x.detach()
        if xr.requires_grad:
            out = call(label + " grad", lambda xr=xr: f(xr))
            (out[0].sum() + out[3].square().sum()).backward()
            call.rec(label + " x.grad", xr.grad)


@scenario
def layouts_inplace(C, call):
    def g(x, y):
        x.mul_(2).add_(y)
        return x.sum()

    f = C(g)
    for label, x in _layout_variants():
        if label == "expanded":
            continue
        y = rand(4, 6, seed=8)
        x = x.clone() if label.startswith("contiguous") else x
        call(label, lambda x=x, y=y: f(x, y))
        call(label + " after", lambda x=x: x.clone())


@scenario
def layouts_channels_last_conv_training(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4), nn.ReLU())
    f = C(m)
    x = rand(2, 3, 6, 6)
    for label, xi in (
        ("nchw", x),
        ("nhwc", x.to(memory_format=torch.channels_last)),
        ("permuted", x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)[:, [2, 0, 1]]),
        ("sliced", rand(2, 3, 8, 8, seed=2)[:, :, 1:7, 2:8]),
        ("nchw again", x),
    ):
        _train_step(call, f, m, xi, label)
        call.rec(label + " out strides", list(f(xi).stride()))


@scenario
def aliasing_two_arguments_read(C, call):
    def g(a, b):
        return a * b + a.sum(), (a - b).abs().sum()

    f = C(g)
    x = rand(6, 4)
    for label, (a, b) in (
        ("distinct", (x.clone(), rand(6, 4, seed=1))),
        ("same", (x, x)),
        ("view", (x, x.view(6, 4))),
        ("transposed", (x[:4, :4], x[:4, :4].t())),
        ("overlap", (x[:3], x[1:4])),
        ("distinct again", (x.clone(), rand(6, 4, seed=1))),
    ):
        call(label, lambda a=a, b=b: f(a, b))


@scenario
def aliasing_two_arguments_write(C, call):
    def g(a, b):
        a.add_(b)
        b.mul_(2)
        return a.sum(), b.sum()

    f = C(g)

    def pair(label):
        x = rand(6, 3)
        return {
            "same": (x[:4], x[:4]),
            "transposed": (x[:3], x[:3].t()),
            "overlap": (x[:4], x[2:6]),
        }.get(label, (rand(4, 3), rand(4, 3, seed=1)))

    for label in ("distinct", "same", "transposed", "overlap", "distinct again"):
        a, b = pair(label)
        call(label, lambda a=a, b=b: f(a, b))
        call(label + " after", lambda a=a, b=b: [a.clone(), b.clone()])


@scenario
def requires_grad_and_dtype_per_argument(C, call):
    def g(x, w):
        return (x @ w).tanh().sum(0)

    f = C(g)
    for label, xd, wd, xg, wg in (
        ("f32 none", torch.float32, torch.float32, False, False),
        ("f32 w", torch.float32, torch.float32, False, True),
        ("f32 x", torch.float32, torch.float32, True, False),
        ("f32 both", torch.float32, torch.float32, True, True),
        ("f64 w", torch.float64, torch.float64, False, True),
        ("bf16 x", torch.bfloat16, torch.bfloat16, True, False),
        ("f32 none again", torch.float32, torch.float32, False, False),
    ):
        x = rand(3, 4, dtype=xd, rg=xg)
        w = rand(4, 2, seed=1, dtype=wd, rg=wg)
        out = call(label, lambda x=x, w=w: f(x, w))
        if out.requires_grad:
            out.sum().backward()
        call.rec(label + " grads", [t.grad if t.grad is not None else "none" for t in (x, w)])


@scenario
def zero_d_tensors_vs_numbers(C, call):
    def g(x, s):
        return x * s, x + s, torch.where(x > 0, x, s), x.clamp(max=s)

    f = C(g)
    x = rand(4)
    for label, s in (
        ("int", 2),
        ("float", 2.5),
        ("0-d float32", torch.tensor(2.5)),
        ("0-d float64", torch.tensor(2.5, dtype=torch.float64)),
        ("0-d int64", torch.tensor(2)),
        ("0-d bool", torch.tensor(True)),
        ("bool", True),
        ("float 2", -1.5),
        ("0-d float64 2", torch.tensor(-1.5, dtype=torch.float64)),
        ("1-elem float64", torch.tensor([-1.5], dtype=torch.float64)),
        ("int again", 3),
    ):
        call(label, lambda s=s: f(x, s))
        call(label + " int x", lambda s=s: f(torch.arange(4), s))
        call(label + " bf16 x", lambda s=s: f(x.bfloat16(), s))


@scenario
def zero_d_tensor_grads(C, call):
    def g(x, s):
        return (x * s).sum()

    f = C(g)
    x = rand(4, rg=True)
    for label, s in (
        ("float", 2.0),
        ("0-d", torch.tensor(2.0, requires_grad=True)),
        ("0-d no grad", torch.tensor(3.0)),
        ("0-d float64 grad", torch.tensor(3.0, dtype=torch.float64, requires_grad=True)),
        ("float again", 4.0),
    ):
        out = call(label, lambda s=s: f(x, s))
        out.backward()
        sg = s.grad if isinstance(s, torch.Tensor) and s.grad is not None else "none"
        call.rec(label + " grads", [x.grad.clone(), sg])
        x.grad = None


# ============================================================================================
# more state: inference tensors, non-leaf and patched attributes, forward AD, anomaly mode,
# functorch, checkpointing, attention fast path, attribute kinds, buffers of functional calls,
# growing module lists, gradient accumulation, aliased arguments


@scenario
def inference_tensor_inputs(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    with torch.inference_mode():
        xi = rand(4, 3, seed=1)
    call("plain", lambda: f(x))
    call("inference input", lambda: f(xi))
    with torch.no_grad():
        call("inference input no_grad", lambda: f(xi))
    call("plain again", lambda: f(x))


@scenario
def non_leaf_weight_attribute(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    src = torch.randn(2, 3, requires_grad=True)
    call("plain", lambda: f(x))
    del m.weight
    m.weight = src * 2
    out = call("non-leaf", lambda: f(x))
    out.sum().backward()
    call.rec("src grad", src.grad)
    src.grad = None
    m.weight = src.detach() * 3
    out = call("detached", lambda: f(x))
    call.rec("rg", out.requires_grad)


@scenario
def saved_tensor_hooks(C, call):
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    f = C(lambda x: (x * w).sin().sum())
    x = rand(3)
    for i, hooks in enumerate((None, (lambda t: t * 2, lambda t: t), None)):
        if hooks:
            with torch.autograd.graph.saved_tensors_hooks(*hooks):
                out = call(f"{i}", lambda: f(x))
        else:
            out = call(f"{i}", lambda: f(x))
        out.backward()
        call.rec(f"grad {i}", w.grad)
        w.grad = None


@scenario
def forward_ad_dual(C, call):
    import torch.autograd.forward_ad as fwAD

    f = C(lambda x: (x.sin() * 2, x.exp().sum()))
    x = rand(3)
    call("plain", lambda: f(x))
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.ones(3))
        out = call("dual", lambda: f(d))
        call.rec(
            "tangent",
            [
                fwAD.unpack_dual(o).tangent if fwAD.unpack_dual(o).tangent is not None else "none"
                for o in out
            ],
        )


@scenario
def anomaly_mode(C, call):
    w = torch.randn(3, requires_grad=True)
    f = C(lambda x: (x * w).sqrt().sum())
    x = torch.tensor([1.0, 0.0, 4.0])
    for i, anomaly in enumerate((False, True, False)):
        with torch.autograd.set_detect_anomaly(anomaly):
            out = call(f"{i}", lambda: f(x))
            call(f"bwd {i}", lambda out=out: out.backward())
        call.rec(f"g{i}", w.grad)
        w.grad = None


@scenario
def param_vs_tensor_input(C, call):
    f = C(lambda x: x * 2)
    p = nn.Parameter(rand(3))
    t = rand(3)
    call("tensor", lambda: f(t))
    call("param", lambda: f(p))
    call("tensor again", lambda: f(t))
    with torch.no_grad():
        call("param nograd", lambda: f(p))


@scenario
def vmap_grad_over_compiled(C, call):
    f = C(lambda x: (x.sin() * x).sum())
    x = rand(4, 3)
    call("plain", lambda: f(x[0]))
    call("vmap", lambda: torch.vmap(f)(x))
    call("grad", lambda: torch.func.grad(f)(x[0]))
    call("vmap grad", lambda: torch.vmap(torch.func.grad(f))(x))
    call("plain again", lambda: f(x[1]))


@stateful
def default_dtype_closure_module(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(lambda x: m(x) + torch.ones(2))
    x = rand(1, 3)
    call("plain", lambda: f(x))
    torch.set_default_dtype(torch.float64)
    try:
        call("f64 default", lambda: f(x))
    finally:
        torch.set_default_dtype(torch.float32)


@scenario
def mha_fastpath_toggle(C, call):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    m = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    f = C(m)
    x = rand(2, 5, 8)
    mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    try:
        for i, fp in enumerate((True, False, True)):
            torch.backends.mha.set_fastpath_enabled(fp)
            with torch.no_grad():
                call(f"{i} fastpath={fp}", lambda: f(x))
                call(f"{i} fastpath={fp} mask", lambda: f(x, src_key_padding_mask=mask))
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


@scenario
def mha_module_eval_mask(C, call):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    f = C(lambda q, mask: m(q, q, q, key_padding_mask=mask, need_weights=False)[0])
    x = rand(2, 5, 8)
    mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():
        call("nograd", lambda: f(x, mask))
    call("grad", lambda: f(x, mask))
    m.train()
    with torch.no_grad():
        call("train nograd", lambda: f(x, mask))


@scenario
def forward_monkeypatched(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    call("plain", lambda: f(x))
    orig = m.forward
    m.forward = types.MethodType(lambda self, x: orig(x) * 10, m)
    call("patched", lambda: f(x))
    del m.forward
    call("unpatched", lambda: f(x))


@scenario
def checkpoint_dropout_toggle(C, call):
    from torch.utils.checkpoint import checkpoint

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lin = nn.Linear(16, 16)
            self.gc = False

        def inner(self, x):
            return nn.functional.dropout(self.lin(x), 0.5, self.training)

        def forward(self, x):
            if self.gc:
                return checkpoint(self.inner, x, use_reentrant=False)
            return self.inner(x)

    m = M()
    f = C(m)
    x = rand(8, 16)
    for gc in (False, True, False, True):
        m.gc = gc
        xr = x.clone().requires_grad_()
        y = f(xr)
        w = torch.arange(y.numel(), dtype=torch.float32).cos().view(y.shape)
        (y * w).sum().backward()
        # y = mask * 2 * lin(x): the weight gradient follows the mask that y shows
        keep = (y != 0).float() * 2
        want = (w * keep).t() @ x
        call.rec(
            f"gc={gc} weight grad follows mask",
            bool(torch.allclose(m.lin.weight.grad, want, atol=1e-5)),
        )
        m.zero_grad(set_to_none=True)


class Mode(enum.Enum):
    A = 1
    B = 2


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = np.float32(0.5)
        self.mode = Mode.A
        self.act = functools.partial(torch.nn.functional.leaky_relu, negative_slope=0.1)
        self.size = torch.Size([2, 3])
        self.name = "x"

    def forward(self, x):
        y = x.view(self.size) * float(self.s)
        y = self.act(y) if self.mode is Mode.A else y.exp()
        return y if self.name == "x" else -y


@scenario
def attribute_kinds_more(C, call):
    m = M()
    f = C(m)
    x = rand(6)
    for label, ch in [
        ("first", lambda: None),
        ("np float", lambda: setattr(m, "s", np.float32(2.0))),
        ("np float64", lambda: setattr(m, "s", np.float64(3.0))),
        ("enum", lambda: setattr(m, "mode", Mode.B)),
        ("enum back", lambda: setattr(m, "mode", Mode.A)),
        (
            "partial kw",
            lambda: setattr(
                m, "act", functools.partial(torch.nn.functional.leaky_relu, negative_slope=0.3)
            ),
        ),
        ("size", lambda: setattr(m, "size", torch.Size([3, 2]))),
        ("string", lambda: setattr(m, "name", "y")),
    ]:
        ch()
        call(label, lambda: f(x))


@scenario
def functional_call_buffers_updated(C, call):
    torch.manual_seed(0)
    m = nn.BatchNorm1d(3)
    f = C(lambda p, x: torch.func.functional_call(m, p, (x,)))
    for i in range(3):
        p = {k: v.clone() for k, v in m.state_dict().items()}
        p["running_mean"] = torch.full((3,), float(i))
        call(f"{i}", lambda p=p, i=i: f(p, rand(4, 3, seed=i)))
        call.rec(
            f"{i} dict buffers", [p["running_mean"], p["running_var"], p["num_batches_tracked"]]
        )
        call.rec(f"{i} module buffers", [m.running_mean.clone(), m.num_batches_tracked.clone()])


@scenario
def submodule_train_flag_only(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 4), nn.BatchNorm1d(4))
    f = C(m)
    x = rand(5, 4)
    with torch.no_grad():
        for label, ch in [
            ("train", lambda: m.train()),
            ("bn0 eval", lambda: m[1].eval()),
            ("bn1 eval", lambda: m[3].eval()),
            ("bn0 train", lambda: m[1].train()),
            ("training attr", lambda: setattr(m[3], "training", True)),
        ]:
            ch()
            call(label, lambda: f(x))
            call.rec(label + " stats", [m[1].running_mean.clone(), m[3].running_mean.clone()])


@scenario
def module_list_grows(C, call):
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3)])

        def forward(self, x):
            for l in self.layers:
                x = l(x).tanh()
            return x

    m = Net()
    f = C(m)
    x = rand(2, 3)
    for i in range(4):
        out = call(f"{i} layers", lambda: f(x))
        out.sum().backward()
        call.rec(f"{i} grads", [p.grad for p in m.parameters()])
        m.zero_grad(set_to_none=True)
        if i == 1:
            del m.layers[0]
        else:
            m.layers.append(nn.Linear(3, 3))


@scenario
def param_grad_accumulation_across_calls(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    for i in range(3):
        f(x).sum().backward()
        call.rec(f"{i} accumulated", [m.weight.grad.clone(), m.bias.grad.clone()])
    m.weight.grad = torch.ones(2, 3).t().contiguous().t()  # (a non-contiguous .grad)
    f(x).sum().backward()
    call.rec("into transposed grad", [m.weight.grad.clone(), m.weight.grad.stride()])


@scenario
def output_is_parameter_view(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(lambda x: (m.weight.t(), m.weight[0] * x))
    x = rand(3)
    with torch.no_grad():
        out = call("0", lambda: f(x))
        m.weight.add_(1)
        call.rec("view sees update", out[0])
        call("1", lambda: f(x))


@scenario
def aliased_args_grads(C, call):
    f = C(lambda a, b: (a * b.sin()).sum() + (a - b).square().sum())
    for label in ("distinct", "same", "view", "transposed", "overlap", "distinct again"):
        x = rand(4, 4, rg=True)
        y = rand(4, 4, seed=1, rg=True)
        a, b = {
            "distinct": (x, y),
            "same": (x, x),
            "view": (x, x.view(4, 4)),
            "transposed": (x, x.t()),
            "overlap": (x, x.flip(0)),
            "distinct again": (x, y),
        }[label]
        out = call(label, lambda a=a, b=b: f(a, b))
        out.backward()
        call.rec(label + " grads", [x.grad, y.grad if y.grad is not None else "none"])


@scenario
def input_aliases_written_buffer(C, call):
    torch.manual_seed(0)
    m = nn.BatchNorm1d(3)
    f = C(lambda x: m(x.expand(4, 3)) + x)
    with torch.no_grad():
        for i in range(3):
            src = m.running_mean if i == 1 else rand(1, 3, seed=i)
            src = src.view(1, 3)
            call(f"{i}", lambda src=src: f(src))
            call.rec(f"{i} stats", [m.running_mean.clone(), m.running_var.clone()])


@scenario
def input_is_parameter_written(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 3, bias=False)

    def g(x, y):
        y.mul_(2)
        return m(x)

    f = C(g)
    with torch.no_grad():
        for i in range(3):
            y = m.weight if i == 1 else rand(3, 3, seed=i)
            call(f"{i}", lambda y=y: f(rand(2, 3), y))
            call.rec(f"{i} w", m.weight.clone())


# ============================================================================================
def main(argv: list[str]) -> int:
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
        if not line.startswith("ok") and name in KNOWN:
            line += f"\n      ({KNOWN[name]})"
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
