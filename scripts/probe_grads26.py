"""Gradients and their None-ness as users train (session 26): user-style training snippets run
eagerly and under ``torch.compile(..., backend="xla")``, every observation compared strictly.

    PYTHONPATH=. python scripts/probe_grads26.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_grads26.py   # torch's own

Each scenario ``fn(C, rec)`` runs three times: eager in float32, compiled in float32 and eager
with float64 as the default dtype (the reference). Observations: ``.grad`` None-ness (strict),
dtype, shape, ``requires_grad`` and ``grad_fn is None`` of tensors (compiled vs eager float32);
float values: the compiled error against float64 at most 8x eager float32's own error (or a
few float32 ulps of the reference's scale, where eager happens to be exact); integer values
and None-ness exactly; errors by type and eager's first line.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def leaf(*shape, seed=0, rg=True):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=torch.float64).to(torch.get_default_dtype())
    return t.requires_grad_(rg)


def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            v.requires_grad,
            v.grad_fn is None,
            v.detach().clone(),
        )
    if isinstance(v, dict):
        return ("D", [(k, describe(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def _close(x, e, r) -> str | None:
    """``x`` (compiled) against ``e`` (eager f32), both against ``r`` (eager f64)."""
    if x.shape != e.shape:
        return "shape"
    if not (x.is_floating_point() or x.is_complex()):
        return None if torch.equal(x, e) else f"values {x} vs {e}"
    x64, e64, r64 = (t.to(torch.complex128 if t.is_complex() else torch.float64) for t in (x, e, r))
    if not torch.equal(x64.isnan(), e64.isnan()):
        return f"NaN positions differ\n{x}\n{e}"
    fin = ~r64.isnan() & r64.isfinite()
    if not torch.equal(x64[~fin], e64[~fin]) and not torch.equal(x64.isinf(), e64.isinf()):
        return "non-finite values differ"
    if not fin.any():
        return None
    ex = (x64 - r64)[fin].abs().max().item()
    ee = (e64 - r64)[fin].abs().max().item()
    scale = r64[fin].abs().max().item()
    eps = torch.finfo(x.dtype if not x.is_complex() else torch.float32).eps
    tol = 8 * max(ee, 4 * eps * scale, 1e-30)
    if ex > tol:
        return f"values: err {ex:.3g} vs eager's {ee:.3g} (scale {scale:.3g})\n{x}\n{e}"
    return None


def same(a, b, c, path="") -> str | None:
    """``a`` compiled, ``b`` eager f32, ``c`` eager f64."""
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape", "requires_grad", "grad_fn is None"), a[1:5], b[1:5]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        d = _close(a[5], b[5], c[5] if c[0] == "T" else b[5])
        return f"{path}: {d}" if d else None
    if a[0] == "D":
        if [k for k, _ in a[1]] != [k for k, _ in b[1]]:
            return f"{path}: keys {[k for k, _ in a[1]]} vs {[k for k, _ in b[1]]}"
        for (k, x), (_, y), (_, z) in zip(a[1], b[1], c[1]):
            d = same(x, y, z, f"{path}.{k}")
            if d:
                return d
        return None
    if a[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y, z) in enumerate(zip(a[2], b[2], c[2])):
            d = same(x, y, z, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":
        # (ours may be a subclass of eager's: OpError is a RuntimeError)
        if not issubclass(a[1], b[1]) or b[2][:50] not in a[3]:
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        return None
    if a[1] != b[1] and not (a[1] != a[1] and b[1] != b[1]):
        floats = isinstance(a[1], float) and isinstance(b[1], float)
        if floats and abs(a[1] - c[1]) <= 8 * max(abs(b[1] - c[1]), 1e-6 * (1 + abs(c[1]))):
            return None
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


def observations(fn, C, dtype) -> list:
    obs = []

    def rec(label, value):
        obs.append((label, describe(value)))

    torch._dynamo.reset()
    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        fn(C, rec)
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        obs.append(("raised", describe(e)))
    finally:
        torch.set_default_dtype(old)
    return obs


def compare(name, fn) -> str:
    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw)

    got = observations(fn, C, torch.float32)
    exp = observations(fn, lambda f, **kw: f, torch.float32)
    ref = observations(fn, lambda f, **kw: f, torch.float64)
    if len(ref) != len(exp):
        ref = exp
    for (lg, g), (le, e), (_, r) in zip(got, exp, ref):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} {g[:3]} (xla) vs {le!r} {e[:3]} (eager)"
        d = same(g, e, r, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return f"ok    {name}"


def grads(model) -> dict:
    return {n: p.grad for n, p in model.named_parameters()}


def params(model) -> dict:
    return {n: p for n, p in model.named_parameters()}


# ============================================================================================
# the None-ness of parameters' gradients in modules


class Gated(nn.Module):
    """A module whose forward reaches some parameters through paths without gradient."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)
        self.gate = nn.Parameter(torch.randn(4))
        self.scale = nn.Parameter(torch.randn(4))
        self.never = nn.Parameter(torch.randn(4))
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)
        self.detached = nn.Parameter(torch.randn(4))
        self.nograd = nn.Parameter(torch.randn(4))
        self.zero = nn.Parameter(torch.randn(4))

    def forward(self, x):
        h = self.a(x)
        h = h * (self.gate > 0)  # comparison: no gradient to gate
        h = h + self.scale.argmax().float()  # argmax: none
        h = torch.where(h > 1e9, self.never, h)  # branch never taken: zeros
        h = self.frozen(h) + h * self.detached.detach()
        with torch.no_grad():
            s = self.nograd.sum()
        return (h * s + self.zero * 0).sum()


@scenario
def mod_gated_paths(C, rec):
    m = Gated()
    out = C(m)(leaf(3, 4))
    rec("out", out)
    out.backward()
    rec("grads", grads(m))


@scenario
def mod_gated_paths_two_steps_set_to_none_false(C, rec):
    m = Gated()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    cm = C(m)
    for i in range(3):
        opt.zero_grad(set_to_none=False)
        loss = cm(leaf(3, 4, seed=i))
        loss.backward()
        rec(f"grads{i}", grads(m))
        opt.step()
    rec("params", params(m))


@scenario
def mod_adam_skips_none_grads(C, rec):
    m = Gated()
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    cm = C(m)
    for i in range(3):
        opt.zero_grad()
        loss = cm(leaf(3, 4, seed=i))
        loss.backward()
        opt.step()
    rec("params", params(m))
    rec("state", sorted(n for n, p in m.named_parameters() if p in opt.state))


@scenario
def mod_adamw_compiled_step(C, rec):
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    m[0].bias.requires_grad_(False)
    opt = torch.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1)
    cm = C(m)

    def step():
        opt.step()

    cstep = C(step)
    for i in range(3):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(cm(leaf(5, 4, seed=i)), leaf(5, 2, seed=10 + i))
        loss.backward()
        cstep()
        rec(f"loss{i}", loss)
    rec("params", params(m))
    rec("grads", grads(m))


@scenario
def mod_train_step_fn_compiled(C, rec):
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    step = C(train_step)
    for i in range(3):
        rec(f"loss{i}", step(leaf(6, 4, seed=i, rg=False), torch.tensor([0, 1, 2, 0, 1, 2])))
    rec("params", params(m))
    rec("grads", grads(m))


@scenario
def mod_accumulate_three_calls(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
    cm = C(m)
    for i in range(3):
        (cm(leaf(2, 4, seed=i)).sum() / 3).backward()
    rec("grads", grads(m))


@scenario
def mod_conv_bn_frozen_affine_train(C, rec):
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
    m[1].weight.requires_grad_(False)
    cm = C(m)
    out = cm(leaf(2, 2, 5, 5))
    out.pow(2).mean().backward()
    rec("grads", grads(m))
    rec("running", [m[1].running_mean, m[1].running_var, m[1].num_batches_tracked])


@scenario
def mod_conv_bn_eval(C, rec):
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
    m.eval()
    m[0].bias.requires_grad_(False)
    cm = C(m)
    out = cm(leaf(2, 2, 5, 5))
    out.pow(2).mean().backward()
    rec("grads", grads(m))


@scenario
def mod_bn_no_affine_input_grad(C, rec):
    m = nn.BatchNorm1d(4, affine=False)
    x = leaf(6, 4)
    out = C(m)(x)
    (out * leaf(6, 4, seed=1, rg=False)).sum().backward()
    rec("x.grad", x.grad)


@scenario
def mod_layernorm_frozen_bias(C, rec):
    m = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.Linear(6, 2))
    m[1].bias.requires_grad_(False)
    x = leaf(3, 4)
    out = C(m)(x)
    out.sum().backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_embedding_padding_idx(C, rec):
    m = nn.Embedding(10, 4, padding_idx=0)
    lin = nn.Linear(4, 1)

    def f(idx):
        return lin(m(idx)).sum()

    out = C(f)(torch.tensor([[0, 1, 2], [0, 0, 3]]))
    out.backward()
    rec("grads", [m.weight.grad, lin.weight.grad, lin.bias.grad])


@scenario
def mod_embedding_padding_only(C, rec):
    m = nn.Embedding(10, 4, padding_idx=0)

    def f(idx):
        return m(idx).sum()

    out = C(f)(torch.tensor([[0, 0]]))
    rec("out", out)
    out.backward()
    rec("grads", [m.weight.grad])


@scenario
def mod_embedding_max_norm(C, rec):
    m = nn.Embedding(10, 4, max_norm=1.0)

    def f(idx):
        return (m(idx) * 3).sum()

    out = C(f)(torch.tensor([1, 2, 2, 5]))
    out.backward()
    rec("grads", [m.weight.grad])
    rec("weight", m.weight)


@scenario
def mod_mha_frozen_in_proj(C, rec):
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    m.in_proj_bias.requires_grad_(False)
    x = leaf(2, 3, 8)

    def f(x):
        out, w = m(x, x, x, need_weights=True)
        return out.sum() + w.sum()

    out = C(f)(x)
    out.backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_mha_key_padding_mask_weights_unused(C, rec):
    m = nn.MultiheadAttention(8, 2, batch_first=True, kdim=6, vdim=5)
    q, k, v = leaf(2, 3, 8), leaf(2, 4, 6, seed=1), leaf(2, 4, 5, seed=2)
    mask = torch.tensor([[False, False, True, True], [False, False, False, True]])

    def f(q, k, v):
        out, _ = m(q, k, v, key_padding_mask=mask, need_weights=False)
        return out

    out = C(f)(q, k, v)
    rec("out", out)
    out.sum().backward()
    rec("grads", grads(m))
    rec("inputs", [q.grad, k.grad, v.grad])


@scenario
def mod_transformer_encoder_layer(C, rec):
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    m.norm2.requires_grad_(False)
    x = leaf(2, 3, 8)
    out = C(m)(x, src_key_padding_mask=torch.tensor([[False, False, True], [False, False, False]]))
    (out * leaf(2, 3, 8, seed=5, rg=False)).sum().backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_lstm_frozen_ih(C, rec):
    m = nn.LSTM(4, 5, num_layers=2, batch_first=True)
    m.weight_ih_l0.requires_grad_(False)
    x = leaf(2, 3, 4)

    def f(x):
        out, (h, _) = m(x)
        return out[:, -1].sum() + h.sum()

    C(f)(x).backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_gru_only_hidden_used(C, rec):
    m = nn.GRU(4, 5, batch_first=True, bidirectional=True)
    x = leaf(2, 3, 4)

    def f(x):
        _, h = m(x)
        return h[0].sum()  # only the forward direction reaches the loss

    C(f)(x).backward()
    rec("grads", grads(m))


@scenario
def mod_weight_norm(C, rec):
    m = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3))
    x = leaf(2, 4)
    C(m)(x).sum().backward()
    rec("grads", grads(m))


@scenario
def mod_tied_weights_head(C, rec):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 6)
            self.ln = nn.LayerNorm(6)
            self.head = nn.Linear(6, 12, bias=False)
            self.head.weight = self.emb.weight
            self.pos = nn.Parameter(torch.randn(8, 6))

        def forward(self, idx, labels=None):
            h = self.ln(self.emb(idx) + self.pos[: idx.shape[1]])
            logits = self.head(h)
            if labels is None:
                return logits
            return F.cross_entropy(logits.view(-1, 12), labels.view(-1), ignore_index=-100)

    m = LM()
    cm = C(m)
    loss = cm(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[2, 3, -100]]))
    rec("loss", loss)
    loss.backward()
    rec("grads", grads(m))


@scenario
def mod_cross_entropy_all_ignored(C, rec):
    m = nn.Linear(4, 3)
    out = C(lambda x, y: F.cross_entropy(m(x), y))(leaf(2, 4), torch.tensor([-100, -100]))
    rec("loss", out)
    out.backward()
    rec("grads", grads(m))


@scenario
def mod_dict_outputs_some_used(C, rec):
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.cls = nn.Linear(4, 3)
            self.reg = nn.Linear(4, 1)

        def forward(self, x):
            h = self.body(x).relu()
            return {"cls": self.cls(h), "reg": self.reg(h), "pred": self.cls(h).argmax(-1)}

    m = Two()
    out = C(m)(leaf(3, 4))
    rec("out", out)
    out["cls"].sum().backward()
    rec("grads", grads(m))


@scenario
def mod_list_outputs_int_and_float(C, rec):
    m = nn.Linear(4, 3)

    def f(x):
        y = m(x)
        return [y, y.argmax(-1), (y > 0).sum(), y.shape[0]]

    out = C(f)(leaf(3, 4))
    rec("out", out)
    out[0].sum().backward()
    rec("grads", grads(m))


@scenario
def mod_requires_grad_false_outputs(C, rec):
    m = nn.Linear(4, 3)
    m.requires_grad_(False)
    x = leaf(3, 4, rg=False)
    out = C(m)(x)
    rec("out", out)
    out.sum().backward()


@scenario
def mod_input_requires_grad_output_not_dependent(C, rec):
    m = nn.Linear(4, 3)

    def f(x, y):
        return m(y), x.shape

    x = leaf(3, 4)
    out, _ = C(f)(x, leaf(3, 4, seed=1, rg=False))
    rec("out", out)
    out.sum().backward()
    rec("x.grad", x.grad)
    rec("grads", grads(m))


@scenario
def mod_autograd_grad_allow_unused(C, rec):
    m = Gated()
    x = leaf(3, 4)
    loss = C(m)(x)
    ps = list(m.parameters())
    trainable = [p for p in ps if p.requires_grad]
    gs = torch.autograd.grad(loss, [x, *trainable], allow_unused=True, retain_graph=True)
    rec("g", list(gs))
    gs = torch.autograd.grad(loss, [x, *trainable], allow_unused=True, materialize_grads=True)
    rec("gm", list(gs))


@scenario
def mod_autograd_grad_unused_raises(C, rec):
    m = Gated()
    loss = C(m)(leaf(3, 4))
    torch.autograd.grad(loss, [m.unused.weight])


@scenario
def mod_autograd_grad_gate_raises(C, rec):
    m = Gated()
    loss = C(m)(leaf(3, 4))
    torch.autograd.grad(loss, [m.gate])


@scenario
def mod_autograd_grad_never_branch_ok(C, rec):
    m = Gated()
    loss = C(m)(leaf(3, 4))
    rec("g", list(torch.autograd.grad(loss, [m.never, m.zero])))


@scenario
def mod_gradient_penalty(C, rec):
    m = nn.Sequential(nn.Linear(3, 5), nn.Softplus(), nn.Linear(5, 1))
    x = leaf(4, 3)

    def f(x):
        out = m(x)
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        return out.mean() + ((g.norm(dim=1) - 1) ** 2).mean()

    loss = C(f)(x)
    rec("loss", loss)
    loss.backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_double_backward_outside(C, rec):
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    x = leaf(4, 3)
    out = C(m)(x).sum()
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    rec("g", g)
    g.pow(2).sum().backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_double_backward_relu_bias_none(C, rec):
    # second derivative of a relu MLP in its last bias: eager gives None (no path)
    m = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 1))
    x = leaf(4, 3)
    out = C(m)(x).sum()
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    g.pow(2).sum().backward()
    rec("grads", grads(m))
    rec("x.grad", x.grad)


@scenario
def mod_backward_twice_retain(C, rec):
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    out = C(m)(leaf(4, 3)).sum()
    out.backward(retain_graph=True)
    out.backward()
    rec("grads", grads(m))


@scenario
def mod_hooks(C, rec):
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    calls = []
    m[0].weight.register_hook(lambda g: g * 2)
    m[2].bias.register_hook(lambda g: calls.append(g.clone()))

    def f(x):
        h = m[0](x)
        h.register_hook(lambda g: g * 0.5)
        return m[2](m[1](h)).sum()

    C(f)(leaf(4, 3)).backward()
    rec("grads", grads(m))
    rec("calls", calls)


@scenario
def mod_retain_grad_inside(C, rec):
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    keep = {}

    def f(x):
        h = m[0](x)
        h.retain_grad()
        keep["h"] = h
        return m[2](m[1](h)).sum()

    C(f)(leaf(4, 3)).backward()
    rec("h.grad", keep["h"].grad)
    rec("grads", grads(m))


@scenario
def mod_autograd_function_inside(C, rec):
    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x.clamp(-1, 1) * w

        @staticmethod
        def backward(ctx, g):
            _, w = ctx.saved_tensors
            return g * w, None  # no gradient for w, by choice

    lin = nn.Linear(4, 4)
    w = leaf(4, seed=3)

    def f(x):
        return Clip.apply(lin(x), w).sum()

    C(f)(leaf(2, 4)).backward()
    rec("grads", [lin.weight.grad, lin.bias.grad, w.grad])


@scenario
def mod_complex_params(C, rec):
    w = torch.randn(
        4,
        4,
        dtype=torch.complex64 if torch.get_default_dtype() == torch.float32 else torch.complex128,
        requires_grad=True,
    )
    b = torch.randn(4, dtype=w.dtype, requires_grad=True)
    unused = torch.randn(4, dtype=w.dtype, requires_grad=True)

    def f(x):
        y = x.to(w.dtype) @ w + b
        return (y.abs() ** 2).sum()

    C(f)(leaf(3, 4)).backward()
    rec("grads", [w.grad, b.grad, unused.grad])


@scenario
def mod_python_branch_on_value(C, rec):
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)

    def f(x):
        if x.sum() > 0:
            return a(x).sum()
        return b(x).sum()

    cf = C(f)
    cf(leaf(3, 4).abs()).backward()
    rec("g1", [a.weight.grad, b.weight.grad])
    cf(-leaf(3, 4, seed=1).abs()).backward()
    rec("g2", [a.weight.grad, b.weight.grad])


@scenario
def mod_torch_cond(C, rec):
    a, b = nn.Parameter(torch.randn(4)), nn.Parameter(torch.randn(4))

    def f(x):
        return torch.cond(x.sum() > 0, lambda x: (x * a).sum(), lambda x: (x * b).sum(), (x,))

    x = leaf(4)
    out = C(f)(x.abs().detach().requires_grad_())
    out.backward()
    rec("g", [a.grad, b.grad])


@scenario
def mod_item_break(C, rec):
    a, b = nn.Parameter(torch.randn(4)), nn.Parameter(torch.randn(4))

    def f(x):
        s = (x * a).sum().item()
        return (x * b).sum() * s

    C(f)(leaf(4)).backward()
    rec("g", [a.grad, b.grad])


@scenario
def mod_inplace_on_clone(C, rec):
    w = leaf(4, seed=1)
    u = leaf(4, seed=2)

    def f(x):
        h = w.clone()
        h[1:3] = u[1:3] * 2
        h.mul_(x)
        h.masked_fill_(x > 1, 0.0)
        return h.sum()

    x = leaf(4)
    C(f)(x).backward()
    rec("g", [w.grad, u.grad, x.grad])


@scenario
def mod_sort_topk_ties(C, rec):
    w = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0], requires_grad=True)

    def f(w):
        s = w.sort(descending=True).values[:2].sum()
        t = w.topk(2).values.sum() * 0  # which of equal elements topk picks is unspecified
        mx = w.max()
        mn = w.min()
        m1, _ = w.max(dim=0)
        return s * 1 + t * 10 + mx * 100 + mn * 1000 + m1 * 10000

    out = C(f)(w)
    out.backward()
    rec("g", w.grad)


@scenario
def mod_amax_ties(C, rec):
    w = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)

    def f(w):
        return w.amax(1).sum() + 10 * w.amin(0).sum() + 100 * w.norm(p=float("inf"))

    C(f)(w).backward()
    rec("g", w.grad)


@scenario
def mod_index_select_no_rows(C, rec):
    w = leaf(5, 3)
    x = leaf(3, seed=1)

    def f(x):
        return (w.index_select(0, torch.tensor([], dtype=torch.long)).sum(0) + x).sum()

    C(f)(x).backward()
    rec("g", [w.grad, x.grad])


@scenario
def mod_zero_grad_set_to_none_modes(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    cm = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cm(leaf(2, 3)).sum().backward()
    opt.zero_grad(set_to_none=False)
    rec("after_false", grads(m))
    m[0].requires_grad_(False)
    cm(leaf(2, 3, seed=1)).sum().backward()
    rec("frozen_step", grads(m))
    opt.zero_grad()
    rec("after_true", grads(m))
    cm(leaf(2, 3, seed=2)).sum().backward()
    rec("again", grads(m))


@scenario
def mod_unfreeze_midway(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    m[0].requires_grad_(False)
    cm = C(m)
    x = leaf(2, 3, rg=False)
    cm(x).sum().backward()
    rec("g1", grads(m))
    m[0].requires_grad_(True)
    cm(x).sum().backward()
    rec("g2", grads(m))


@scenario
def mod_module_compile_method(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.SiLU(), nn.Linear(3, 2))
    if C(lambda: 0) is not None and C.__name__ != "<lambda>":
        pass
    cm = C(m)
    cm(leaf(2, 3)).pow(2).sum().backward()
    rec("g", grads(m))


# ============================================================================================
# tiny Hugging Face models trained with labels: every parameter's gradient


def _hf(name):
    import transformers as tf

    torch.manual_seed(0)
    if name == "llama":
        cfg = tf.LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=32,
        )
        return tf.LlamaForCausalLM(cfg)
    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=64, n_embd=16, n_layer=2, n_head=2, n_positions=32)
        return tf.GPT2LMHeadModel(cfg)
    if name == "bert_mlm":
        cfg = tf.BertConfig(
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        return tf.BertForMaskedLM(cfg)
    if name == "bert_cls":
        cfg = tf.BertConfig(
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            num_labels=3,
        )
        return tf.BertForSequenceClassification(cfg)
    if name == "t5":
        cfg = tf.T5Config(
            vocab_size=64,
            d_model=16,
            d_kv=8,
            d_ff=32,
            num_layers=2,
            num_heads=2,
            dropout_rate=0.0,
            decoder_start_token_id=0,
        )
        return tf.T5ForConditionalGeneration(cfg)
    if name == "distilbert_qa":
        cfg = tf.DistilBertConfig(
            vocab_size=64,
            dim=16,
            n_layers=2,
            n_heads=2,
            hidden_dim=32,
            dropout=0.0,
            attention_dropout=0.0,
            max_position_embeddings=32,
        )
        return tf.DistilBertForQuestionAnswering(cfg)
    raise KeyError(name)


def _hf_scenario(name, kwargs_fn, freeze=None):
    def fn(C, rec):
        m = _hf(name)
        m.train()
        if freeze:
            for n, p in m.named_parameters():
                if freeze in n:
                    p.requires_grad_(False)
        cm = C(m)
        out = cm(**kwargs_fn())
        rec("loss", out.loss)
        out.loss.backward()
        rec("grads", grads(m))

    fn.__name__ = f"hf_{name}" + (f"_freeze_{freeze}" if freeze else "")
    SCENARIOS[fn.__name__] = fn


def _ids():
    return torch.tensor([[1, 5, 7, 9, 3], [2, 8, 4, 4, 6]])


_hf_scenario("llama", lambda: {"input_ids": _ids(), "labels": _ids()})
_hf_scenario("llama", lambda: {"input_ids": _ids(), "labels": _ids()}, freeze="embed")
_hf_scenario("gpt2", lambda: {"input_ids": _ids(), "labels": _ids()})
_hf_scenario(
    "bert_mlm",
    lambda: {
        "input_ids": _ids(),
        "labels": torch.tensor([[-100, 5, -100, -100, 3], [-100] * 5]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
    },
)
_hf_scenario("bert_cls", lambda: {"input_ids": _ids(), "labels": torch.tensor([0, 2])})
_hf_scenario(
    "bert_cls", lambda: {"input_ids": _ids(), "labels": torch.tensor([0, 2])}, freeze="bert."
)
_hf_scenario(
    "t5", lambda: {"input_ids": _ids(), "labels": torch.tensor([[3, 4, -100], [5, -100, -100]])}
)
_hf_scenario(
    "distilbert_qa",
    lambda: {
        "input_ids": _ids(),
        "start_positions": torch.tensor([1, 2]),
        "end_positions": torch.tensor([3, 9]),
    },
)


@scenario
def hf_llama_adamw_steps(C, rec):
    m = _hf("llama")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    cm = C(m)
    for i in range(3):
        opt.zero_grad()
        out = cm(input_ids=_ids(), labels=_ids())
        out.loss.backward()
        opt.step()
        rec(f"loss{i}", out.loss)
    rec("params", params(m))


# ============================================================================================
# outputs' requires_grad / grad_fn and gradients through ops users reach for

_OUT_OPS = {
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "frac": torch.frac,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "floor_divide": lambda x: torch.floor_divide(x, 0.7),
    "div_floor": lambda x: torch.div(x, 0.7, rounding_mode="floor"),
    "div_trunc": lambda x: torch.div(x, 0.7, rounding_mode="trunc"),
    "remainder": lambda x: torch.remainder(x, 0.7),
    "fmod": lambda x: torch.fmod(x, 0.7),
    "bernoulli": lambda x: torch.bernoulli(x.sigmoid()),
    "heaviside": lambda x: torch.heaviside(x, torch.tensor(0.5)),
    "zeros_like": torch.zeros_like,
    "ones_like": torch.ones_like,
    "empty_like_fill": lambda x: torch.empty_like(x).fill_(2.0),
    "full_like": lambda x: torch.full_like(x, 3.0),
    "new_zeros": lambda x: x.new_zeros(3),
    "clone_detach": lambda x: x.clone().detach(),
    "to_long_float": lambda x: x.long().float(),
    "bool_float": lambda x: (x > 0).float(),
    "where_scalar": lambda x: torch.where(x > 0, x, 0.0),
    "where_const_both": lambda x: torch.where(x > 0, 1.0, 0.0),
    "clamp_min": lambda x: x.clamp(min=0.1),
    "nan_to_num": lambda x: torch.nan_to_num(x / 0.0 * 0 + x),
    "searchsorted_f": lambda x: torch.searchsorted(torch.tensor([-1.0, 0.0, 1.0]), x).float(),
    "sort_values": lambda x: x.sort().values,
    "cummax_values": lambda x: x.cummax(0).values,
    "kthvalue": lambda x: x.kthvalue(2).values,
    "median": lambda x: x.median(),
    "nanmedian": lambda x: x.nanmedian(),
    "mode": lambda x: x.round().mode().values,
    "logcumsumexp": lambda x: x.logcumsumexp(0),
    "cumprod_zero": lambda x: (x * torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0])).cumprod(0),
    "prod_zero": lambda x: (x * torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0])).prod(),
    "prod_two_zero": lambda x: (x * torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])).prod(),
    "norm_zero": lambda x: (x * 0).norm(),
    "normalize_zero": lambda x: F.normalize((x * 0).view(1, -1)),
    "pdist_same": lambda x: F.pairwise_distance(x.view(1, -1), x.view(1, -1)),
    "cdist_same": lambda x: torch.cdist(x.view(1, 5, 1), x.view(1, 5, 1)),
    "sqrt_zero": lambda x: (x * 0).sqrt(),
    "pow_zero_half": lambda x: (x * 0).pow(0.5),
    "pow_zero_zero": lambda x: (x * 0).pow(0.0),
    "xlogy_zero": lambda x: torch.xlogy(x * 0, x.abs()),
    "atan2_zero": lambda x: torch.atan2(x * 0, x * 0),
    "hypot_zero": lambda x: torch.hypot(x * 0, x * 0),
    "abs_zero": lambda x: (x * 0).abs(),
    "relu_zero": lambda x: (x * 0).relu(),
    "leaky_zero": lambda x: F.leaky_relu(x * 0),
    "hardtanh_edge": lambda x: F.hardtanh(torch.tensor([-1.0, 1.0, 0.0, 2.0, -2.0]) + x * 0),
    "clamp_edge": lambda x: (torch.tensor([-1.0, 1.0, 0.0, 2.0, -2.0]) + x * 0).clamp(-1, 1),
    "max_pair_tie": lambda x: torch.maximum(x, x.detach()),
    "max_pair_tie2": lambda x: torch.maximum(x, x),
    "fmax_tie": lambda x: torch.fmax(x, x.detach()),
    "min_pair_tie": lambda x: torch.minimum(x * 0, x.detach() * 0),
    "logsumexp_inf": lambda x: torch.logsumexp(x - float("inf"), 0),
    "softmax_neg_inf": lambda x: torch.softmax(x.masked_fill(x > -100, float("-inf")), 0),
    "view_as_real": lambda x: torch.view_as_real(torch.polar(x.abs() + 1, x)),
    "rfft": lambda x: torch.fft.rfft(x).abs(),
    "unique_inv": lambda x: x[torch.unique(x.round(), return_inverse=True)[1]],
    "repeat_interleave_t": lambda x: x.repeat_interleave(torch.tensor([0, 1, 2, 0, 1])),
    "nanmean": lambda x: x.masked_fill(x > 0, float("nan")).nanmean(),
    "nansum": lambda x: x.masked_fill(x > 0, float("nan")).nansum(),
    "std_one": lambda x: x[:1].std(),
    "var_one": lambda x: x[:1].var(),
    "std_unbiased0": lambda x: x[:1].std(unbiased=False),
    "dist_zero": lambda x: torch.dist(x, x.detach()),
    "renorm": lambda x: x.view(5, 1).renorm(2, 0, 0.5),
    "polygamma": lambda x: torch.polygamma(1, x.abs() + 1),
    "lgamma": lambda x: torch.lgamma(x),
    "erfinv": lambda x: torch.erfinv(x.tanh() * 0.9),
    "i0": lambda x: torch.i0(x),
    "sinc_zero": lambda x: torch.sinc(x * 0),
    "cross_entropy_probs": lambda x: F.cross_entropy(
        x.view(1, 5), torch.softmax(x.view(1, 5) * 2, 1)
    ),
    "kl_div_zero_target": lambda x: F.kl_div(
        x.log_softmax(0), torch.tensor([0.0, 0.5, 0.5, 0.0, 0.0]), reduction="sum"
    ),
    "bce_edge": lambda x: F.binary_cross_entropy(
        torch.tensor([0.0, 1.0, 0.5, 0.5, 0.5]) * (1 + x * 0),
        torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5]),
    ),
    "smooth_l1_edge": lambda x: F.smooth_l1_loss(
        x, x.detach() + torch.tensor([0.0, 1.0, -1.0, 0.5, 0.0])
    ),
    "huber_edge": lambda x: F.huber_loss(x, x.detach() + torch.tensor([0.0, 1.0, -1.0, 0.5, 0.0])),
    "l1_zero": lambda x: F.l1_loss(x, x.detach()),
    "mse_int_target_raises": lambda x: F.mse_loss(x, torch.arange(5)),
    "margin_ranking": lambda x: F.margin_ranking_loss(x, x.detach(), torch.ones(5)),
    "hinge_emb": lambda x: F.hinge_embedding_loss(x, torch.tensor([1.0, -1, 1, -1, 1])),
    "cosine_sim_zero": lambda x: F.cosine_similarity(x.view(1, 5) * 0, x.view(1, 5)),
    "interp_nearest": lambda x: F.interpolate(x.view(1, 1, 5), scale_factor=2.0, mode="nearest"),
    "interp_linear_ac": lambda x: F.interpolate(
        x.view(1, 1, 5), size=7, mode="linear", align_corners=True
    ),
    "pad_reflect": lambda x: F.pad(x.view(1, 1, 5), (2, 2), mode="reflect"),
    "pad_replicate": lambda x: F.pad(x.view(1, 1, 5), (2, 3), mode="replicate"),
    "pad_circular": lambda x: F.pad(x.view(1, 1, 5), (2, 3), mode="circular"),
    "maxpool_ties": lambda x: F.max_pool1d((x * 0 + 1).view(1, 1, 5), 3, 1),
    "adaptive_maxpool_ties": lambda x: F.adaptive_max_pool1d((x * 0 + 1).view(1, 1, 5), 2),
    "avgpool_ceil": lambda x: F.avg_pool1d(
        x.view(1, 1, 5), 2, ceil_mode=True, count_include_pad=False
    ),
    "lppool": lambda x: F.lp_pool1d(x.view(1, 1, 5), 2, 2),
    "unfold": lambda x: F.unfold(x.view(1, 1, 1, 5), (1, 2)),
    "embedding_bag_psw": lambda x: F.embedding_bag(
        torch.tensor([0, 2, 1]),
        torch.eye(3),
        torch.tensor([0, 1]),
        per_sample_weights=x[:3],
        mode="sum",
    ),
    "ctc": lambda x: F.ctc_loss(
        x.view(5, 1, 1).expand(5, 1, 3).log_softmax(2) + torch.arange(3.0),
        torch.tensor([[1, 2]]),
        torch.tensor([5]),
        torch.tensor([2]),
    ),
}


def _out_op(name, op):
    def fn(C, rec):
        x = leaf(5, seed=3)
        torch.manual_seed(1)
        out = C(op)(x)
        rec("out", out)
        if out.requires_grad:
            g = leaf(*out.shape, seed=4, rg=False) if out.dim() else None
            if out.is_complex():
                out = out.abs()
            if not out.is_floating_point():
                return
            out.backward(g)
            rec("grad", x.grad)

    fn.__name__ = "op_" + name
    SCENARIOS[fn.__name__] = fn


for _n, _op in _OUT_OPS.items():
    _out_op(_n, _op)


@scenario
def sdpa_learned_mask(C, rec):
    q, k, v = leaf(1, 2, 3, 4), leaf(1, 2, 3, 4, seed=1), leaf(1, 2, 3, 4, seed=2)
    bias = leaf(1, 2, 3, 3, seed=3)

    def f(q, k, v, bias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    out = C(f)(q, k, v, bias)
    rec("out", out)
    (out * leaf(1, 2, 3, 4, seed=9, rg=False)).sum().backward()
    rec("g", [q.grad, k.grad, v.grad, bias.grad])


@scenario
def sdpa_bool_mask_causal(C, rec):
    q, k, v = leaf(1, 2, 3, 4), leaf(1, 2, 3, 4, seed=1), leaf(1, 2, 3, 4, seed=2)

    def f(q, k, v):
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        b = F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.ones(3, 3, dtype=torch.bool).tril()
        )
        return a + b

    out = C(f)(q, k, v)
    (out * leaf(1, 2, 3, 4, seed=9, rg=False)).sum().backward()
    rec("g", [q.grad, k.grad, v.grad])


@scenario
def nll_weight_param_raises(C, rec):
    w = leaf(3).abs().detach().requires_grad_()
    x = leaf(4, 3, seed=1)

    def f(x):
        return F.cross_entropy(x, torch.tensor([0, 1, 2, 1]), weight=w)

    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("g", [x.grad, w.grad])


@scenario
def functional_call_params(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    ps = {n: p.detach().clone().requires_grad_(n != "0.bias") for n, p in m.named_parameters()}

    def f(ps, x):
        return torch.func.functional_call(m, ps, (x,)).sum()

    C(f)(ps, leaf(2, 3)).backward()
    rec("g", {n: p.grad for n, p in ps.items()})
    rec("mg", grads(m))


@scenario
def lazy_linear(C, rec):
    m = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.Linear(4, 1))
    cm = C(m)
    cm(leaf(2, 3)).sum().backward()
    rec("g", grads(m))
    cm(leaf(2, 3, seed=1)).sum().backward()
    rec("g2", grads(m))


@scenario
def spectral_norm_train(C, rec):
    torch.manual_seed(0)
    m = nn.utils.parametrizations.spectral_norm(nn.Linear(4, 3))
    cm = C(m)
    for i in range(2):
        cm(leaf(2, 4, seed=i)).sum().backward()
    rec("g", grads(m))
    rec("u", m.parametrizations.weight[0]._u)


@scenario
def orthogonal_param(C, rec):
    m = nn.utils.parametrizations.orthogonal(nn.Linear(3, 3))
    C(m)(leaf(2, 3)).sum().backward()
    rec("g", grads(m))


@scenario
def buffer_requiring_grad(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3))
            self.register_buffer("b", torch.randn(3))

        def forward(self, x):
            return (x * self.w + self.b).sum()

    m = M()
    m.b.requires_grad_()
    C(m)(leaf(3)).backward()
    rec("g", [m.w.grad, m.b.grad])


@scenario
def param_views_used(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            return (x @ self.w[:2].T).sum() + self.w.diagonal().sum(), self.w.T

    m = M()
    loss, wt = C(m)(leaf(3, 4))
    rec("wt", wt)
    (loss + wt[0, 0]).backward()
    rec("g", m.w.grad)


@scenario
def group_instance_norm(C, rec):
    m = nn.Sequential(
        nn.Conv1d(2, 4, 3),
        nn.GroupNorm(2, 4),
        nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
    )
    m[1].bias.requires_grad_(False)
    x = leaf(2, 2, 6)
    (C(m)(x) * leaf(2, 4, 4, seed=7, rg=False)).sum().backward()
    rec("g", grads(m))
    rec("x", x.grad)
    rec("rm", m[2].running_mean)


@scenario
def grid_sample_grads(C, rec):
    img = leaf(1, 2, 4, 4)
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.0]]], requires_grad=True)

    def f(img, theta):
        grid = F.affine_grid(theta, (1, 2, 3, 3), align_corners=False)
        return F.grid_sample(img, grid, align_corners=False)

    out = C(f)(img, theta)
    (out * leaf(1, 2, 3, 3, seed=5, rg=False)).sum().backward()
    rec("g", [img.grad, theta.grad])


@scenario
def p_grad_none_manually_between(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    cm(leaf(2, 3)).sum().backward()
    m.weight.grad = None
    cm(leaf(2, 3, seed=1)).sum().backward()
    rec("g", grads(m))
    del m.bias.grad
    cm(leaf(2, 3, seed=2)).sum().backward()
    rec("g2", grads(m))


@scenario
def no_grad_decorated_submodule(C, rec):
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(3, 3)

        @torch.no_grad()
        def forward(self, x):
            return self.l(x)

    enc, head = Enc(), nn.Linear(3, 1)

    def f(x):
        return head(enc(x).relu()).sum()

    x = leaf(2, 3)
    out = C(f)(x)
    out.backward()
    rec("g", [enc.l.weight.grad, head.weight.grad, x.grad])


@scenario
def stop_grad_straight_through(C, rec):
    w = leaf(4)

    def f(x):
        q = x + (x.round() - x).detach()
        return (q * w).sum()

    x = leaf(4, seed=1)
    C(f)(x).backward()
    rec("g", [x.grad, w.grad])


@scenario
def backward_inputs_subset(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    out = C(m)(leaf(2, 3)).sum()
    out.backward(inputs=[m[0].weight])
    rec("g", grads(m))


@scenario
def autograd_backward_grad_tensors(C, rec):
    m = nn.Linear(3, 2)

    def f(x):
        y = m(x)
        return y, y.exp()

    a, b = C(f)(leaf(2, 3))
    torch.autograd.backward(
        [a, b], [torch.ones(2, 2), None if b.dim() == 0 else torch.full((2, 2), 0.5)]
    )
    rec("g", grads(m))


@scenario
def dyn_batches(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    emb = nn.Embedding(7, 3, padding_idx=0)

    def f(idx, y):
        h = m(emb(idx).mean(1))
        return F.cross_entropy(h, y, ignore_index=-1)

    cf = C(f)
    for b in (2, 3, 4, 1, 5):
        idx = torch.arange(b * 2).view(b, 2) % 7
        y = torch.arange(b) % 2
        if b == 4:
            y = torch.full((b,), -1)
        loss = cf(idx, y)
        rec(f"loss{b}", loss)
        loss.backward()
        rec(f"g{b}", [emb.weight.grad, *grads(m).values()])
        for p in [emb.weight, *m.parameters()]:
            p.grad = None


@scenario
def dyn_empty_batch(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    cm = C(m, dynamic=True)
    for b in (3, 0, 2):
        x = leaf(b, 3, seed=b)
        out = cm(x).sum()
        rec(f"out{b}", out)
        out.backward()
        rec(f"g{b}", [x.grad, *grads(m).values()])
        m.zero_grad()


@scenario
def dyn_masked_select_rows(C, rec):
    w = leaf(4, 3)

    def f(x, k):
        rows = x[x.sum(1) > k]
        return (rows @ w).sum()

    x = leaf(5, 4, seed=1)
    cf = C(f)
    for k in (0.0, 100.0, -100.0):
        cf(x, k).backward()
        rec(f"g{k}", [x.grad, w.grad])
        x.grad = w.grad = None


@scenario
def chained_compiled_modules(C, rec):
    enc = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    dec = nn.Linear(4, 2)
    extra = nn.Linear(4, 2)
    ce, cd, cx = C(enc), C(dec), C(extra)
    x = leaf(2, 3)
    h = ce(x)
    a = cd(h)
    b = cx(h)  # never used in the loss
    rec("b", b)
    a.pow(2).sum().backward()
    rec("g", [x.grad, *grads(enc).values(), *grads(dec).values(), *grads(extra).values()])


@scenario
def lora_style(C, rec):
    class Lora(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = nn.Linear(6, 6)
            self.base.requires_grad_(False)
            self.A = nn.Parameter(torch.randn(2, 6) * 0.1)
            self.B = nn.Parameter(torch.zeros(6, 2))
            self.drop = nn.Dropout(0.0)

        def forward(self, x):
            return self.base(x) + self.drop(x) @ self.A.T @ self.B.T * 2.0

    m = nn.Sequential(Lora(), nn.ReLU(), Lora())
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=0.05)
    cm = C(m)
    for i in range(3):
        opt.zero_grad()
        loss = cm(leaf(3, 6, seed=i, rg=False)).pow(2).mean()
        loss.backward()
        rec(f"g{i}", grads(m))
        opt.step()
    rec("p", params(m))


@scenario
def bf16_model_training(C, rec):
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 1)).to(torch.bfloat16)
    m[2].bias.requires_grad_(False)
    cm = C(m)
    x = leaf(3, 4, rg=False).to(torch.bfloat16)
    out = cm(x).float().sum()
    out.backward()
    rec("g", {n: None if g is None else (g.dtype, g.shape) for n, g in grads(m).items()})


@scenario
def hf_llama_grad_ckpt(C, rec):
    m = _hf("llama")
    m.gradient_checkpointing_enable()
    m.train()
    cm = C(m)
    out = cm(input_ids=_ids(), labels=_ids())
    rec("loss", out.loss)
    out.loss.backward()
    rec("grads", grads(m))


@scenario
def hf_llama_grad_ckpt_reentrant(C, rec):
    m = _hf("llama")
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    m.train()
    cm = C(m)
    out = cm(input_ids=_ids(), labels=_ids())
    rec("loss", out.loss)
    out.loss.backward()
    rec("grads", grads(m))


@scenario
def ckpt_reentrant_no_input_grad(C, rec):
    from torch.utils.checkpoint import checkpoint

    inner = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    head = nn.Linear(3, 1)

    def f(x):
        return head(checkpoint(inner, x, use_reentrant=True)).sum()

    C(f)(leaf(2, 3, rg=False)).backward()
    rec("g", [*grads(inner).values(), *grads(head).values()])


@scenario
def hf_gpt2_frozen_lm_head_tied(C, rec):
    m = _hf("gpt2")
    m.lm_head.weight.requires_grad_(False)  # tied: the embedding freezes too
    cm = C(m)
    out = cm(input_ids=_ids(), labels=_ids())
    out.loss.backward()
    rec("grads", grads(m))


@scenario
def hf_bert_output_hidden_states_unused_pooler(C, rec):
    m = _hf("bert_mlm")
    import transformers as tf

    cfg = m.config
    torch.manual_seed(0)
    model = tf.BertModel(cfg)
    cm = C(model)
    out = cm(input_ids=_ids(), output_hidden_states=True, output_attentions=True)
    (out.hidden_states[1].sum() + out.attentions[0].sum()).backward()
    rec("grads", grads(model))


# ============================================================================================
# gradient values on ill-conditioned inputs: float32 against float64, eager's error the yardstick
_NUM_OPS = {
    "layernorm_offset": lambda x: F.layer_norm(x * 0.01 + 1000.0, (x.shape[-1],)),
    "layernorm_tiny": lambda x: F.layer_norm(x * 1e-4, (x.shape[-1],)),
    "rmsnorm": lambda x: F.rms_norm(x * 1e-3, (x.shape[-1],)),
    "groupnorm_offset": lambda x: F.group_norm(x.view(2, 4, -1) + 300.0, 2),
    "batchnorm_offset": lambda x: F.batch_norm(
        x.view(-1, 8) * 0.1 + 500.0, None, None, training=True
    ),
    "std_offset": lambda x: (x + 1000.0).std(-1),
    "var_offset": lambda x: (x + 1000.0).var(-1),
    "var_mean_offset": lambda x: torch.var_mean(x + 100.0, -1)[0],
    "logsumexp_big": lambda x: torch.logsumexp(x * 50, -1),
    "log_softmax_big": lambda x: F.log_softmax(x * 80, -1),
    "softmax_big": lambda x: F.softmax(x * 30, -1),
    "ce_big": lambda x: F.cross_entropy(
        x * 60, torch.arange(x.shape[0]) % x.shape[1], reduction="none"
    ),
    "ce_smooth": lambda x: F.cross_entropy(
        x * 20, torch.arange(x.shape[0]) % x.shape[1], label_smoothing=0.1, reduction="none"
    ),
    "softplus_big": lambda x: F.softplus(x * 30),
    "log1p_small": lambda x: torch.log1p(x * 1e-6),
    "expm1_small": lambda x: torch.expm1(x * 1e-6),
    "sigmoid_big": lambda x: torch.sigmoid(x * 20),
    "logsigmoid_big": lambda x: F.logsigmoid(x * 40),
    "bce_logits_big": lambda x: F.binary_cross_entropy_with_logits(
        x * 40, (x > 0).float(), reduction="none"
    ),
    "norm_tiny": lambda x: (x * 1e-20).norm(dim=-1),
    "norm_huge": lambda x: (x * 1e20).norm(dim=-1),
    "normalize_small": lambda x: F.normalize(x * 1e-8, dim=-1),
    "cumsum_long": lambda x: x.reshape(-1).repeat(20).cumsum(0),
    "cumprod": lambda x: (x * 0.1 + 1).cumprod(-1),
    "tanh_big": lambda x: torch.tanh(x * 10),
    "gelu_tanh": lambda x: F.gelu(x * 5, approximate="tanh"),
    "silu_big": lambda x: F.silu(x * 30),
    "mish": lambda x: F.mish(x * 10),
    "elu": lambda x: F.elu(x * 10),
    "pow_frac": lambda x: (x.abs() + 1e-3).pow(1.7),
    "rsqrt_small": lambda x: (x.abs() * 1e-3 + 1e-6).rsqrt(),
    "atan2": lambda x: torch.atan2(x, x.flip(-1) * 1e-3),
    "acosh": lambda x: torch.acosh(x.abs() + 1.0001),
    "erf": lambda x: torch.erf(x * 3),
    "erfc": lambda x: torch.erfc(x * 3),
    "digamma": lambda x: torch.digamma(x.abs() + 0.01),
    "matmul_cancel": lambda x: (x + 100.0) @ (x.T - 100.0),
    "mse_offset": lambda x: F.mse_loss(x + 1e4, x.detach() * 1.01 + 1e4, reduction="none"),
    "cosine_sim": lambda x: F.cosine_similarity(x, x.flip(0) + 1e-3, dim=-1),
    "kl_div_log_target": lambda x: F.kl_div(
        F.log_softmax(x * 10, -1),
        F.log_softmax(x.flip(0) * 10, -1),
        log_target=True,
        reduction="none",
    ),
    "sdpa": lambda x: F.scaled_dot_product_attention(
        x.view(2, 1, 4, 4) * 10, x.view(2, 1, 4, 4), x.view(2, 1, 4, 4)
    ),
    "prod": lambda x: (x * 0.5 + 1.0).prod(-1),
    "amax_soft": lambda x: (x * 20).softmax(-1).amax(-1),
    "sinh_cosh": lambda x: torch.sinh(x * 8) + torch.cosh(x * 8),
    "log_ratio": lambda x: torch.log(x.exp() / (1 + x.exp())),
}


def _num_op(name, op):
    def fn(C, rec):
        x = leaf(4, 8, seed=11)
        out = C(op)(x)
        rec("out", out)
        out.backward(leaf(*out.shape, seed=12, rg=False))
        rec("grad", x.grad)

    fn.__name__ = "num_" + name
    SCENARIOS[fn.__name__] = fn


for _n, _op in _NUM_OPS.items():
    _num_op(_n, _op)


# ============================================================================================
# optimizers: compiled steps over parameters whose .grad is None on some steps

_OPTS = {
    "sgd_nesterov": lambda ps: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01
    ),
    "adam_amsgrad": lambda ps: torch.optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
    "adam_fused": lambda ps: torch.optim.Adam(ps, lr=0.01, fused=True),
    "adam_foreach_false": lambda ps: torch.optim.Adam(ps, lr=0.01, foreach=False),
    "adamw_tensor_lr": lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(0.01)),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1),
    "adamax": lambda ps: torch.optim.Adamax(ps, lr=0.01),
    "nadam": lambda ps: torch.optim.NAdam(ps, lr=0.01),
    "radam": lambda ps: torch.optim.RAdam(ps, lr=0.01),
    "adadelta": lambda ps: torch.optim.Adadelta(ps, lr=1.0),
}


def _opt_scenario(name, make):
    def fn(C, rec):
        torch.manual_seed(0)
        a, b = nn.Linear(3, 3), nn.Linear(3, 1)
        ps = [*a.parameters(), *b.parameters()]
        opt = make(ps)
        sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)

        @C
        def step():
            opt.step()

        for i in range(4):
            opt.zero_grad(set_to_none=True)
            x = leaf(2, 3, seed=i, rg=False)
            # a is skipped on odd steps: its .grad stays None there
            loss = b(a(x).tanh()).sum() if i % 2 == 0 else b(x).sum()
            loss.backward()
            step()
            sched.step()
            rec(f"p{i}", [p.detach().clone() for p in ps])
        rec("state", [sorted(k for k in opt.state[p]) for p in ps])

    fn.__name__ = "opt_" + name
    SCENARIOS[fn.__name__] = fn


for _n, _mk in _OPTS.items():
    _opt_scenario(_n, _mk)


@scenario
def opt_compiled_train_step_with_zero_grad_false(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = torch.optim.Adam(m.parameters(), lr=0.01)

    @C
    def train(x, y):
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    for i in range(3):
        rec(f"l{i}", train(leaf(4, 3, seed=i, rg=False), leaf(4, 2, seed=9, rg=False)))
    rec("p", params(m))
    rec("g", grads(m))


@scenario
def opt_clip_then_step(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.Linear(2, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cm = C(m[:3])
    for i in range(2):
        opt.zero_grad()
        cm(leaf(4, 3, seed=i, rg=False)).pow(2).sum().backward()
        n = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        rec(f"n{i}", n)
        opt.step()
    rec("p", params(m))
    rec("g", grads(m))


@scenario
def module_compile_method(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.Linear(2, 2))
    m[3].requires_grad_(False)
    if C(lambda: None) is not None and getattr(C, "__name__", "") != "<lambda>":
        pass
    compiled = C(lambda: 0) is not (lambda: 0)  # noqa: F841
    target = m
    if BACKEND and C.__code__.co_name == "C":
        target.compile(backend=BACKEND)
    x = leaf(2, 3)
    target(x).sum().backward()
    rec("g", grads(m))
    rec("x", x.grad)


# ============================================================================================
# tensors that leave the compiled code by side effects (attributes, lists, hooks)


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(4, 3)
        self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.aux_loss = None

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        top = probs.argmax(-1)
        self.aux_loss = (probs.mean(0) ** 2).sum() * 3
        out = torch.zeros_like(x)
        for i, e in enumerate(self.experts):
            sel = (top == i).unsqueeze(-1)
            out = out + torch.where(sel, e(x) * probs[:, i : i + 1], 0.0)
        return out


@scenario
def side_moe_aux_loss_attribute(C, rec):
    m = nn.Sequential(MoE(), nn.ReLU(), MoE())
    cm = C(m)
    out = cm(leaf(5, 4))
    aux = sum(mod.aux_loss for mod in m if isinstance(mod, MoE))
    rec("aux", aux)
    (out.pow(2).mean() + 0.1 * aux).backward()
    rec("g", grads(m))


@scenario
def side_forward_hook_features(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    feats = []
    for i in (1, 3):
        m[i].register_forward_hook(lambda mod, inp, out: feats.append(out))
    cm = C(m)
    out = cm(leaf(2, 3))
    rec("feats", feats)
    loss = feats[0].pow(2).sum() + feats[1].sum()  # the head output unused
    loss.backward()
    rec("g", grads(m))
    rec("out_rg", out.requires_grad)


@scenario
def side_global_list_intermediates(C, rec):
    store = []
    w1, w2 = leaf(3, 3, seed=1), leaf(3, 3, seed=2)

    def f(x):
        h = x @ w1
        store.append(h)
        store.append(h.detach())
        return (h.relu() @ w2).sum()

    out = C(f)(leaf(2, 3))
    rec("store", store)
    (store[0].sum() * 2).backward()
    rec("g", [w1.grad, w2.grad])
    out.backward()
    rec("g2", [w1.grad, w2.grad])


@scenario
def side_dict_inputs_outputs(C, rec):
    m = nn.Linear(3, 2)

    def f(batch):
        out = {"logits": m(batch["x"]), "aux": batch["y"] * 2}
        out["loss"] = out["logits"].sum() + batch["z"].sum() * 0
        return out

    batch = {"x": leaf(2, 3), "y": leaf(2, seed=1), "z": leaf(3, seed=2), "n": 3}
    out = C(f)(batch)
    rec("out", out)
    out["loss"].backward()
    rec("g", [batch["x"].grad, batch["y"].grad, batch["z"].grad, *grads(m).values()])


@scenario
def side_attribute_param_replaced(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    cm(leaf(2, 3)).sum().backward()
    old = m.weight
    m.weight = nn.Parameter(torch.ones(2, 3))
    cm(leaf(2, 3, seed=1)).sum().backward()
    rec("g", [old.grad, m.weight.grad, m.bias.grad])


# ============================================================================================
# multi-input ops: each input's gradient (None / zeros / values) as eager's formulas give it
_IDX = torch.tensor([0, 2, 2, 4])
_MULTI = {
    "clamp_tensor_bounds": lambda x, a, b: x.clamp(min=a - 0.3, max=b + 0.3),
    "clamp_min_only_tensor": lambda x, a, b: torch.clamp(x, min=a),
    "masked_fill_tensor_value": lambda x, a, b: x.masked_fill(x > 0, a[0]),
    "masked_fill_tensor_none": lambda x, a, b: x.masked_fill(x > 100, a[0]),
    "index_put_dups": lambda x, a, b: x.index_put((_IDX,), a[:4]),
    "index_put_dups_acc": lambda x, a, b: x.index_put((_IDX,), a[:4], accumulate=True),
    "setitem_dups": lambda x, a, b: _setitem(x, a),
    "scatter_src": lambda x, a, b: x.scatter(0, _IDX, a[:4]),
    "scatter_add": lambda x, a, b: x.scatter_add(0, _IDX, a[:4]),
    "scatter_reduce_sum": lambda x, a, b: x.scatter_reduce(0, _IDX, a[:4], "sum"),
    "scatter_reduce_mean": lambda x, a, b: x.scatter_reduce(
        0, _IDX, a[:4], "mean", include_self=False
    ),
    "scatter_reduce_amax": lambda x, a, b: x.scatter_reduce(0, _IDX, a[:4], "amax"),
    "scatter_reduce_amax_ties": lambda x, a, b: (x * 0 + 1).scatter_reduce(
        0, _IDX, a[:4] * 0 + 1, "amax"
    ),
    "scatter_reduce_amin_noself": lambda x, a, b: x.scatter_reduce(
        0, _IDX, a[:4], "amin", include_self=False
    ),
    "scatter_reduce_prod": lambda x, a, b: x.scatter_reduce(0, _IDX, a[:4], "prod"),
    "scatter_reduce_prod_zero": lambda x, a, b: (
        x * torch.tensor([1.0, 1, 0, 1, 1])
    ).scatter_reduce(0, _IDX, a[:4] * torch.tensor([1.0, 0, 1, 0]), "prod"),
    "index_reduce_prod": lambda x, a, b: x.index_reduce(0, _IDX, a[:4], "prod"),
    "index_reduce_amax_noself": lambda x, a, b: x.index_reduce(
        0, _IDX, a[:4], "amax", include_self=False
    ),
    "index_add_alpha0": lambda x, a, b: x.index_add(0, _IDX, a[:4], alpha=0),
    "index_copy": lambda x, a, b: x.index_copy(0, torch.tensor([0, 2, 3, 4]), a[:4]),
    "masked_scatter": lambda x, a, b: x.masked_scatter(x > 0, a),
    "put_": lambda x, a, b: x.clone().put_(_IDX, a),
    "put_acc": lambda x, a, b: x.clone().put_(_IDX, a, accumulate=True),
    "diagonal_scatter": lambda x, a, b: torch.diagonal_scatter(
        x.view(1, 5).expand(5, 5).clone(), b
    ),
    "select_scatter": lambda x, a, b: torch.select_scatter(x, b[0], 0, 1),
    "slice_scatter_empty": lambda x, a, b: torch.slice_scatter(x, a[:0], 0, 2, 2),
    "addcmul_value0": lambda x, a, b: torch.addcmul(x, a[:5] if a.numel() >= 5 else b, b, value=0),
    "addmm_beta0": lambda x, a, b: torch.addmm(
        x.view(5, 1), b.view(5, 1), a[:1].view(1, 1), beta=0
    ),
    "addmm_alpha0": lambda x, a, b: torch.addmm(
        x.view(5, 1), b.view(5, 1), a[:1].view(1, 1), alpha=0
    ),
    "lerp_tensor_w": lambda x, a, b: torch.lerp(x, b, a[0].sigmoid()),
    "where_scalar_tensor": lambda x, a, b: torch.where(x > 0, a[0], b),
    "copysign": lambda x, a, b: torch.copysign(x, b),
    "fmin_nan": lambda x, a, b: torch.fmin(x.masked_fill(x > 0, float("nan")), b),
    "maximum_ties": lambda x, a, b: torch.maximum(x * 0, b * 0),
    "prelu": lambda x, a, b: F.prelu(x.view(1, 5), a[:1]),
    "layer_norm_bias_only": lambda x, a, b: F.layer_norm(x, (5,), None, b),
    "pow_tensor_tensor_zero": lambda x, a, b: torch.pow(x * 0, b.abs()),
    "pow_neg_base": lambda x, a, b: torch.pow(x, b * 0 + 2),
    "xlogy_tensor": lambda x, a, b: torch.xlogy(x * (x > 0), b.abs()),
    "polar": lambda x, a, b: torch.view_as_real(torch.polar(x.abs(), b)),
    "complex": lambda x, a, b: torch.view_as_real(torch.complex(x, b) * (1 + 2j)),
    "cdist_p0": lambda x, a, b: torch.cdist(x.view(1, 5, 1), b.view(1, 5, 1), p=0),
    "cdist_p1_ties": lambda x, a, b: torch.cdist(
        x.view(1, 5, 1), x.view(1, 5, 1) + 0 * b.view(1, 5, 1), p=1
    ),
    "embedding_weight_and_max": lambda x, a, b: F.embedding(
        torch.tensor([1, 1, 3]), x.view(5, 1) * b.view(5, 1)
    ),
    "bilinear": lambda x, a, b: F.bilinear(
        x.view(1, 5), b.view(1, 5), a[:5].view(1, 1, 5).expand(1, 5, 5).contiguous()
    ),
    "take_along_dim": lambda x, a, b: torch.take_along_dim(x, _IDX) * a[:4],
    "gather_dups": lambda x, a, b: x.gather(0, _IDX) * b[:4],
    "cumulative_trapezoid": lambda x, a, b: torch.cumulative_trapezoid(x, b.sort().values),
    "trapz_x": lambda x, a, b: torch.trapezoid(x, b.sort().values),
    "dot_zero": lambda x, a, b: torch.dot(x * 0, b),
    "linalg_vecdot": lambda x, a, b: torch.linalg.vecdot(x, b),
    "nan_to_num_posinf": lambda x, a, b: torch.nan_to_num(x / (b * 0), posinf=a[0].item()),
    "huber_target_grad": lambda x, a, b: F.huber_loss(x, b, reduction="none", delta=0.5),
    "mse_target_grad": lambda x, a, b: F.mse_loss(x, b, reduction="none"),
    "bce_target_grad": lambda x, a, b: F.binary_cross_entropy(
        x.sigmoid(), b.sigmoid(), reduction="none"
    ),
    "bce_logits_weights": lambda x, a, b: F.binary_cross_entropy_with_logits(
        x, b.sigmoid(), weight=a[:5], pos_weight=a[:5].abs(), reduction="none"
    ),
    "kl_target_grad": lambda x, a, b: F.kl_div(x.log_softmax(0), b.softmax(0), reduction="none"),
    "smooth_l1_beta0": lambda x, a, b: F.smooth_l1_loss(x, b, beta=0.0, reduction="none"),
    "cross_entropy_prob_target": lambda x, a, b: F.cross_entropy(
        x.view(1, 5), b.softmax(0).view(1, 5)
    ),
    "cosine_embedding": lambda x, a, b: F.cosine_embedding_loss(
        x.view(1, 5), b.view(1, 5), torch.tensor([-1.0]), margin=-2.0
    ),
    "triplet": lambda x, a, b: F.triplet_margin_loss(
        x.view(1, 5), b.view(1, 5), a[:5].view(1, 5), margin=0.0
    ),
    "poisson_nll": lambda x, a, b: F.poisson_nll_loss(x, b.abs(), reduction="none"),
    "gaussian_nll_var": lambda x, a, b: F.gaussian_nll_loss(
        x, b, a[:5].abs() + 1e-7, reduction="none"
    ),
    "soft_margin": lambda x, a, b: F.soft_margin_loss(x, b.sign(), reduction="none"),
    "multilabel_soft": lambda x, a, b: F.multilabel_soft_margin_loss(
        x.view(1, 5), (b > 0).float().view(1, 5)
    ),
    "multi_margin_weight": lambda x, a, b: F.multi_margin_loss(
        x.view(1, 5), torch.tensor([2]), weight=a[:5].abs()
    ),
    "multi_margin_weight_const": lambda x, a, b: F.multi_margin_loss(
        x.view(1, 5) * b, torch.tensor([2]), p=2, weight=a.detach().abs()
    ),
    "multi_margin_batch": lambda x, a, b: F.multi_margin_loss(
        torch.stack([x, b]), torch.tensor([2, 0]), margin=0.7, reduction="none"
    ),
    "multilabel_margin": lambda x, a, b: F.multilabel_margin_loss(
        torch.stack([x, b]), torch.tensor([[1, 3, -1, 0, 0], [4, -1, 0, 0, 0]])
    ),
}


def _setitem(x, a):
    y = x.clone()
    y[_IDX] = a[:4]
    return y


def _multi(name, op):
    def fn(C, rec):
        x, a, b = leaf(5, seed=1), leaf(5, seed=2), leaf(5, seed=3)
        out = C(op)(x, a, b)
        rec("out", out)
        if out.requires_grad:
            out.backward(leaf(*out.shape, seed=4, rg=False))
        rec("grad", [x.grad, a.grad, b.grad])

    fn.__name__ = "multi_" + name
    SCENARIOS[fn.__name__] = fn


for _n, _op in _MULTI.items():
    _multi(_n, _op)


@scenario
def view_inputs_of_params(C, rec):
    w = leaf(3, 4)
    u = leaf(4, seed=1)

    def f(wt, head, tail, ux):
        return (wt * 2).sum() + (head * 0).sum() + ux.sum() * 0

    out = C(f)(w.T, w[0], w[1:], u.expand(2, 4))
    rec("out", out)
    out.backward()
    rec("g", [w.grad, u.grad])


@scenario
def view_input_unused_entirely(C, rec):
    w = leaf(3, 4)
    v = leaf(3, 4, seed=1)

    def f(a, b):
        return a.sum() * 3

    C(f)(v * 1, w[:, 1:]).backward()
    rec("g", [w.grad, v.grad])


@scenario
def int_and_float_outputs_mixed_backward(C, rec):
    w = leaf(5)

    def f(w):
        s, i = w.sort()
        return s, i, w.argmax(), w.sum().item() if False else w.max(dim=0)

    s, i, a, mx = C(f)(w)
    rec("outs", [s, i, a, mx.values, mx.indices])
    (s[0] + mx.values * 2).backward()
    rec("g", w.grad)


def main(argv) -> int:
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = compare(n, SCENARIOS[n])
        except Exception:  # noqa: BLE001  (a failure of the probe itself)
            line = f"CRASH {n}: {traceback.format_exc().strip().splitlines()[-1]}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
