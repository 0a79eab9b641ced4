"""More autograd scenarios against eager (session 18), run as ``scripts/probe_autograd.py``:

    PYTHONPATH=. python scripts/probe_autograd2.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_autograd2.py   # torch's own

Same observations and comparison as ``probe_autograd.py`` (imported from it): separate
backwards of several outputs of one call, hooks, grad-mode regions, in-place writes,
checkpoints, double backward, dtypes, custom ``autograd.Function``.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd as base
from _probe_common import run
from probe_autograd import leaf

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# ============================================================================================
# several outputs of one call, backpropagated separately
@scenario
def sep_disjoint(C, rec):
    def f(x, w):
        return (x * w).sin(), (x + 1).exp()

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    a.sum().backward()
    rec("g1", [x.grad, w.grad])
    c.sum().backward()
    rec("g2", [x.grad, w.grad])


@scenario
def sep_shared_saved_raises(C, rec):
    def f(x):
        h = x.exp()
        return h.sin(), h.cos()

    x = leaf(3)
    a, c = C(f)(x)
    a.sum().backward()
    rec("g1", x.grad)
    c.sum().backward()


@scenario
def sep_shared_unsaved(C, rec):
    def f(x, w):
        h = x + w
        return h.sin(), h.cos()

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    a.sum().backward()
    c.sum().backward()
    rec("g", [x.grad, w.grad])


@scenario
def sep_same_output_twice_raises(C, rec):
    def f(x, w):
        return (x * w).sin(), (x + 1).exp()

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    a.sum().backward()
    c.sum().backward()
    rec("g", [x.grad, w.grad])
    a.sum().backward()


@scenario
def sep_autograd_grad(C, rec):
    def f(x, w):
        return (x * w).tanh(), (w * 3).sigmoid()

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    rec("ga", torch.autograd.grad(a.sum(), [x, w]))
    rec("gc", torch.autograd.grad(c.sum(), [w]))
    rec("grads", [x.grad, w.grad])


@scenario
def sep_autograd_grad_shared_raises(C, rec):
    def f(x, w):
        h = (x * w).tanh()
        return h * 2, h * 3

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    rec("ga", torch.autograd.grad(a.sum(), [x, w]))
    rec("gc", torch.autograd.grad(c.sum(), [x]))


@scenario
def sep_only_one_used(C, rec):
    def f(x, w):
        return (x * w).sin(), (x * w).cos()

    x, w = leaf(3), leaf(3, seed=1)
    a, _ = C(f)(x, w)
    a.sum().backward()
    rec("g", [x.grad, w.grad])


@scenario
def sep_retain_then_free_then_raise(C, rec):
    def f(x, w):
        return (x * w).sin(), (x - w).exp()

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    a.sum().backward(retain_graph=True)
    a.sum().backward()
    rec("g1", [x.grad, w.grad])
    c.sum().backward()
    rec("g2", [x.grad, w.grad])
    c.sum().backward()


@scenario
def sep_loss_and_logits_raises(C, rec):
    lin = nn.Linear(4, 3)

    def f(x, y):
        logits = lin(x)
        return F.cross_entropy(logits, y), logits

    x, y = leaf(5, 4, rg=False), torch.tensor([0, 1, 2, 0, 1])
    loss, logits = C(f)(x, y)
    loss.backward()
    rec("g", [p.grad for p in lin.parameters()])
    logits.sum().backward()


@scenario
def sep_three_outputs_partial_overlap(C, rec):
    def f(x, w, v):
        h = x.exp()
        return h * w, h.sum() * 0 + (v * v), (w * v).sin()

    x, w, v = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    a, b, c = C(f)(x, w, v)
    c.sum().backward()
    rec("g1", [x.grad, w.grad, v.grad])
    a.sum().backward()
    rec("g2", [x.grad, w.grad, v.grad])
    b.sum().backward()


@scenario
def sep_module_two_heads(C, rec):
    torch.manual_seed(0)
    trunk, h1, h2 = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

    def f(x):
        t = trunk(x)
        return h1(t.detach()), h2(x)

    x = leaf(3, 4)
    a, b = C(f)(x)
    a.sum().backward()
    b.sum().backward()
    rec("g", [x.grad, *[p.grad for m in (trunk, h1, h2) for p in m.parameters()]])


@scenario
def sep_no_saved_twice(C, rec):
    def f(x):
        return x.view(-1) + 1, x.sum(0)

    x = leaf(2, 3)
    a, b = C(f)(x)
    a.sum().backward()
    a.sum().backward()
    b.sum().backward()
    rec("g", x.grad)


# ============================================================================================
# hooks, retain_grad
@scenario
def hook_modifies_intermediate_inside(C, rec):
    def f(x, w):
        h = x * w
        h.register_hook(lambda g: g * 10)
        return h.tanh().sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def hook_on_param_outside(C, rec):
    lin = nn.Linear(3, 2)
    lin.weight.register_hook(lambda g: g.clamp(-0.1, 0.1))
    x = leaf(4, 3)
    C(lin)(x).pow(2).sum().backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def hook_returns_none_records(C, rec):
    seen = []

    def f(x):
        y = x.sin()
        y.register_hook(lambda g: seen.append(g.clone()))
        return (y * y).sum(), y

    x = leaf(3)
    loss, _y = C(f)(x)
    loss.backward()
    rec("grad", x.grad)
    rec("seen", seen)


@scenario
def hook_on_output_returned_modifies(C, rec):
    def f(x, w):
        return x @ w, (x @ w).relu()

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    a, b = C(f)(x, w)
    a.register_hook(lambda g: g * 0)
    (a.sum() + b.sum()).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def retain_grad_inside_returned(C, rec):
    def f(x):
        h = x.exp()
        h.retain_grad()
        return h, (h * 3).sum()

    x = leaf(3)
    h, loss = C(f)(x)
    loss.backward()
    rec("grad", x.grad)
    rec("h.grad", h.grad)


@scenario
def retain_grad_outside_on_output(C, rec):
    def f(x):
        return x.exp() * 2

    x = leaf(3)
    h = C(f)(x)
    h.retain_grad()
    (h * h).sum().backward()
    rec("grads", [x.grad, h.grad])


@scenario
def module_full_backward_hook_multi_input(C, rec):
    class M(nn.Module):
        def forward(self, a, b):
            return a * b, a + b

    m = M()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append([*gi, *go]))
    a, b = leaf(3), leaf(3, seed=1)
    u, v = C(m)(a, b)
    (u.sum() + 2 * v.sum()).backward()
    rec("grads", [a.grad, b.grad])
    rec("seen", seen)


@scenario
def module_backward_hook_on_submodule(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    seen = []
    m[1].register_full_backward_hook(lambda mod, gi, go: seen.append([gi[0], go[0]]))
    x = leaf(2, 3)
    C(m)(x).sum().backward()
    rec("grads", [x.grad, *[p.grad for p in m.parameters()]])
    rec("seen", seen)


@scenario
def post_accumulate_grad_hook_sgd(C, rec):
    lin = nn.Linear(3, 2)
    for p in lin.parameters():
        p.register_post_accumulate_grad_hook(
            lambda p: (p.data.add_(p.grad, alpha=-0.1), setattr(p, "grad", None))
        )
    x = leaf(4, 3, rg=False)
    step = C(lambda x: lin(x).square().mean())
    for _ in range(3):
        step(x).backward()
    rec("params", [lin.weight, lin.bias])
    rec("grads", [lin.weight.grad, lin.bias.grad])


# ============================================================================================
# accumulation, .grad None vs zeros
@scenario
def accumulate_steps(C, rec):
    lin = nn.Linear(3, 2)
    step = C(lambda x: lin(x).sin().sum())
    for k in range(3):
        step(leaf(4, 3, seed=k, rg=False)).backward()
    rec("grads", [lin.weight.grad, lin.bias.grad])


@scenario
def zero_grad_not_none_then_unused(C, rec):
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)

    def f(x, use_b: bool):
        return (a(x) + (b(x) if use_b else 0)).sum()

    g = C(f)
    x = leaf(4, 3, rg=False)
    g(x, True).backward()
    for m in (a, b):
        m.zero_grad(set_to_none=False)
    g(x, False).backward()
    rec("grads", [a.weight.grad, b.weight.grad, b.bias.grad])
    for m in (a, b):
        m.zero_grad()
    g(x, False).backward()
    rec("grads2", [a.weight.grad, b.weight.grad, b.bias.grad])


@scenario
def grad_set_to_tensor_before(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(3)
    x.grad = torch.ones(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def optimizer_steps_sgd_momentum(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    step = C(lambda x: m(x).square().mean())
    for k in range(3):
        opt.zero_grad()
        step(leaf(4, 3, seed=k, rg=False)).backward()
        opt.step()
    rec("params", list(m.parameters()))


# ============================================================================================
# grad-mode regions and requires_grad inside the compiled function
@scenario
def requires_grad_on_input_inside(C, rec):
    def f(x, w):
        w.requires_grad_()
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1, rg=False)
    out = C(f)(x, w)
    rec("out", out)
    rec("w.requires_grad", w.requires_grad)
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def requires_grad_new_leaf_returned(C, rec):
    def f(x):
        z = torch.zeros(3).requires_grad_()
        return (x * z).sum(), z

    x = leaf(3)
    out, z = C(f)(x)
    out.backward()
    rec("grads", [x.grad, z.grad, z.is_leaf])


@scenario
def no_grad_mix(C, rec):
    def f(x, w):
        with torch.no_grad():
            s = (x * w).sum()
        return x * s + w

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def enable_grad_inside_no_grad_inside(C, rec):
    def f(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
        return a + b

    x = leaf(3)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def set_grad_enabled_false_region(C, rec):
    def f(x):
        torch.set_grad_enabled(False)
        a = x * 2
        torch.set_grad_enabled(True)
        return a + x.sin()

    x = leaf(3)
    out = C(f)(x)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def detach_then_requires_grad(C, rec):
    def f(x):
        d = x.detach().requires_grad_()
        return (d * x).sum(), d

    x = leaf(3)
    out, d = C(f)(x)
    out.backward()
    rec("grads", [x.grad, d.grad])


@scenario
def inference_mode_region_used_later(C, rec):
    def f(x):
        with torch.inference_mode():
            m = x.mean()
        return x * 2, m

    x = leaf(3)
    a, m = C(f)(x)
    rec("outs", [a, m])
    a.sum().backward()
    rec("grad", x.grad)


# ============================================================================================
# in-place ops on tensors that require grad
@scenario
def inplace_leaf_in_no_grad_inside(C, rec):
    def f(x, w):
        with torch.no_grad():
            w.mul_(0.5)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad, w])


@scenario
def inplace_intermediate_relu_(C, rec):
    def f(x, w):
        h = x @ w
        h.relu_()
        return h.sum()

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_on_nonleaf_input(C, rec):
    def f(h):
        h.mul_(2)
        return h.sin().sum()

    x = leaf(3)
    h = x * 1
    C(f)(h).backward()
    rec("grad", x.grad)
    rec("h", h)


@scenario
def inplace_saved_by_sigmoid_then_modified_raises(C, rec):
    def f(x):
        y = x.sigmoid()
        y.mul_(2)
        return y.sum()

    x = leaf(3)
    C(f)(x).backward()


@scenario
def inplace_output_modified_by_user_raises(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    y = C(f)(x)
    y.add_(1)
    y.sum().backward()


@scenario
def inplace_param_modified_before_backward_raises(C, rec):
    lin = nn.Linear(3, 2)
    x = leaf(4, 3)
    out = C(lin)(x)
    with torch.no_grad():
        lin.weight.add_(1)
    out.sum().backward()


# ============================================================================================
# checkpoint
@scenario
def checkpoint_nonreentrant_kwargs(C, rec):
    from torch.utils.checkpoint import checkpoint

    lin = nn.Linear(3, 3)

    def block(h, scale):
        return lin(h).tanh() * scale

    def f(x):
        return checkpoint(block, x, 2.0, use_reentrant=False).sum()

    x = leaf(2, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def checkpoint_sequential_inside(C, rec):
    from torch.utils.checkpoint import checkpoint_sequential

    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3), nn.Tanh())

    def f(x):
        return checkpoint_sequential(m, 2, x, use_reentrant=False).sum()

    x = leaf(2, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, *[p.grad for p in m.parameters()]])


@scenario
def checkpoint_two_outputs(C, rec):
    from torch.utils.checkpoint import checkpoint

    def block(a, b):
        return (a * b).sin(), (a - b).exp()

    def f(x, y):
        u, v = checkpoint(block, x, y, use_reentrant=False)
        return (u * v).sum()

    x, y = leaf(3), leaf(3, seed=1)
    C(f)(x, y).backward()
    rec("grads", [x.grad, y.grad])


# ============================================================================================
# create_graph double backward
def _double(fn, *shapes):
    def run(C, rec):
        xs = [leaf(*s, seed=k) for k, s in enumerate(shapes)]
        out = C(fn)(*xs)
        gs = torch.autograd.grad(out.sum(), xs, create_graph=True)
        rec("g1", list(gs))
        pen = sum((g * g).sum() for g in gs)
        pen.backward()
        rec("g2", [x.grad for x in xs])

    return run


for _name, _fn, _shapes in [
    ("softmax", lambda x, w: (x @ w).softmax(-1) * w.sum(), [(2, 3), (3, 4)]),
    ("log_softmax", lambda x, w: (x @ w).log_softmax(-1).pow(2), [(2, 3), (3, 4)]),
    ("layer_norm", lambda x, w: F.layer_norm(x, (3,), w) ** 2, [(2, 3), (3,)]),
    ("gelu", lambda x, w: F.gelu(x * w) ** 2, [(4,), (4,)]),
    ("tanh_mm", lambda x, w: (x @ w).tanh() ** 2, [(2, 3), (3, 4)]),
    ("sigmoid", lambda x, w: (x * w).sigmoid() * x, [(4,), (4,)]),
    ("mse", lambda x, w: F.mse_loss(x * w, torch.ones(4)) * w.sum(), [(4,), (4,)]),
    ("conv", lambda x, w: F.conv1d(x, w).pow(2), [(1, 2, 5), (3, 2, 2)]),
    ("relu_sq", lambda x, w: F.relu(x * w) ** 2, [(4,), (4,)]),
    ("silu", lambda x, w: F.silu(x * w) ** 2, [(4,), (4,)]),
    ("exp_log", lambda x, w: (x.exp() + w.abs()).log() * x, [(4,), (4,)]),
    ("norm", lambda x, w: torch.linalg.vector_norm(x * w) * x, [(4,), (4,)]),
]:
    SCENARIOS[f"double_{_name}"] = _double(_fn, *_shapes)


@scenario
def double_gradient_penalty_module(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))

    def f(x):
        return m(x)

    x = leaf(5, 3)
    out = C(f)(x)
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    pen = ((gx.norm(dim=1) - 1) ** 2).mean()
    (out.mean() + pen).backward()
    rec("grads", [x.grad, *[p.grad for p in m.parameters()]])


@scenario
def double_hvp(C, rec):
    def f(x):
        return (x.sin() * x.cos() * x).sum()

    x = leaf(4)
    v = torch.linspace(0.1, 0.4, 4)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    (hv,) = torch.autograd.grad(g, x, v)
    rec("hv", hv)


@scenario
def double_third_order(C, rec):
    def f(x):
        return (x**3).sum()

    x = leaf(3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    (g2,) = torch.autograd.grad(g.sum(), x, create_graph=True)
    (g3,) = torch.autograd.grad(g2.sum(), x)
    rec("g", [g, g2, g3])


# ============================================================================================
# integer/bool inputs, outputs aliasing inputs
@scenario
def int_bool_inputs(C, rec):
    def f(x, i, m):
        return (x[i] * m.float()).sum() + x.sum()

    x = leaf(4)
    i, m = torch.tensor([0, 2]), torch.tensor([True, False])
    C(f)(x, i, m).backward()
    rec("grads", [x.grad, i.grad, m.grad, i.requires_grad])


@scenario
def int_input_autograd_grad_raises(C, rec):
    def f(x, i):
        return (x * i).sum()

    x, i = leaf(3), torch.tensor([1, 2, 3])
    out = C(f)(x, i)
    torch.autograd.grad(out, [x, i])


@scenario
def out_returns_input_itself(C, rec):
    def f(x, w):
        return x, (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    a, s = C(f)(x, w)
    rec("a", [a, a is x])
    (s + a.sum()).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def out_views_of_input(C, rec):
    def f(x):
        return x[0], x.t(), x.view(-1), x.unsqueeze(0)

    x = leaf(2, 3)
    outs = C(f)(x)
    rec("outs", list(outs))
    sum((o * (k + 1)).sum() for k, o in enumerate(outs)).backward()
    rec("grad", x.grad)


@scenario
def out_view_of_input_modified_raises(C, rec):
    def f(x):
        return x[0]

    x = leaf(2, 3)
    v = C(f)(x)
    v.mul_(2)


@scenario
def out_view_of_nonleaf_modified(C, rec):
    def f(h):
        return h[0], h.sum()

    x = leaf(2, 3)
    h = x * 2
    v, s = C(f)(h)
    v.mul_(3)
    (h.sum() + s).backward()
    rec("grad", x.grad)


@scenario
def out_expanded_input(C, rec):
    def f(x):
        return x.expand(3, 4), x * 2

    x = leaf(1, 4)
    a, _b = C(f)(x)
    (a * torch.arange(12.0).view(3, 4)).sum().backward()
    rec("grad", x.grad)


# ============================================================================================
# dtypes
@scenario
def bf16_params_fp32_input_autocast(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2).to(torch.bfloat16)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return lin(x).float().sum()

    x = leaf(4, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def fp32_params_autocast_bf16(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x)
        return out, out.float().pow(2).mean()

    x = leaf(4, 3)
    out, loss = C(f)(x)
    rec("out", out)
    loss.backward()
    rec("grads", [x.grad, *[p.grad for p in m.parameters()]])


@scenario
def mixed_bf16_fp32_inputs(C, rec):
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(3, dtype=torch.bfloat16), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def fp64_and_fp16(C, rec):
    def f(x, w):
        return (x.double() * w).sum()

    x, w = leaf(3, dtype=torch.float16), leaf(3, seed=1, dtype=torch.float64)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# custom autograd.Function
class SaveOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        y = (x * w).exp()
        ctx.save_for_backward(y, w)
        return y

    @staticmethod
    def backward(ctx, g):
        y, w = ctx.saved_tensors
        gx = g * y * w if ctx.needs_input_grad[0] else None
        gw = g * y * 7 if ctx.needs_input_grad[1] else None
        return gx, gw


class NeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return (g * w if ctx.needs_input_grad[0] else None), (
            g * x * 2 if ctx.needs_input_grad[1] else None
        )


class Clip(torch.autograd.Function):
    """Straight-through estimator."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class Scale(torch.autograd.Function):
    """Differentiable backward (double backward works through it)."""

    @staticmethod
    def forward(ctx, x, k: float):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 * x * ctx.k, None


class NonDiffIdx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        v, i = x.max(-1)
        ctx.save_for_backward(i)
        ctx.n = x.shape[-1]
        ctx.mark_non_differentiable(i)
        return v, i

    @staticmethod
    def backward(ctx, gv, gi):
        (i,) = ctx.saved_tensors
        return F.one_hot(i, ctx.n).to(gv.dtype) * gv.unsqueeze(-1) * 3


class OnceDiffMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


@scenario
def fn_save_output_needs_input_grad(C, rec):
    def f(x, w):
        return SaveOut.apply(x, w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def fn_needs_input_grad_partial(C, rec):
    def f(x, w):
        return NeedsGrad.apply(x, w).sin().sum()

    x, w = leaf(3), leaf(3, seed=1, rg=False)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def fn_straight_through_in_model(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        return (Clip.apply(lin(x) * 4) / 4).pow(2).sum()

    x = leaf(2, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def fn_double_backward(C, rec):
    def f(x):
        return Scale.apply(x.sin(), 1.5).sum()

    x = leaf(3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn_mark_non_differentiable_index(C, rec):
    def f(x):
        v, i = NonDiffIdx.apply(x * 2)
        return v.sum(), i

    x = leaf(2, 3)
    s, i = C(f)(x)
    rec("i", i)
    s.backward()
    rec("grad", x.grad)


@scenario
def fn_once_differentiable_double_raises(C, rec):
    def f(x, w):
        return OnceDiffMul.apply(x, w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    (g, _) = torch.autograd.grad(out, [x, w], create_graph=True)
    rec("g", g)
    g.sum().backward()


@scenario
def fn_two_calls_separate_outputs(C, rec):
    def f(x, w):
        return SaveOut.apply(x, w), NeedsGrad.apply(x, w)

    x, w = leaf(3), leaf(3, seed=1)
    a, b = C(f)(x, w)
    a.sum().backward()
    rec("g1", [x.grad, w.grad])
    b.sum().backward()
    rec("g2", [x.grad, w.grad])


@scenario
def fn_in_module_train_steps(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def f(x):
        h = m[0](x)
        return m[1](SaveOut.apply(h, torch.ones(4) * 0.5)).square().mean()

    step = C(f)
    for k in range(2):
        opt.zero_grad()
        step(leaf(4, 3, seed=k, rg=False)).backward()
        opt.step()
    rec("params", list(m.parameters()))


@scenario
def sep_cut_graph_partition_outputs(C, rec):
    def f(x, w):
        h = SaveOut.apply(x, w)
        return (x * w).sin(), (h + x).exp()

    x, w = leaf(3), leaf(3, seed=1)
    a, c = C(f)(x, w)
    a.sum().backward()
    rec("g1", [x.grad, w.grad])
    c.sum().backward()
    rec("g2", [x.grad, w.grad])


@scenario
def fn_double_backward_incoming_grad(C, rec):
    def f(x):
        return Scale.apply(x.sin(), 1.5).pow(2).sum()

    x = leaf(3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


def main(argv) -> int:
    return run(argv, SCENARIOS, base.compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
