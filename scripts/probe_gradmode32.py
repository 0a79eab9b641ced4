"""Grad modes, nested compiles and autograd calls inside compiled code, as users write them
(session 32): each scenario runs eagerly and under ``torch.compile(..., backend="xla")``;
observations compared strictly (values against a float64 reference, dtype, shape,
``requires_grad``, ``grad_fn`` presence, ``.grad`` None-ness, hooks fired and their order and
arguments, errors by type and message).

    PYTHONPATH=. python scripts/probe_gradmode32.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_gradmode32.py   # torch's own

The harness is ``probe_grads26``'s.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import probe_grads26 as h

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
leaf = h.leaf
grads = h.grads


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def attempt(rec, label, thunk):
    try:
        rec(label, thunk())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


def meta(t):
    """What autograd says of a tensor besides its value."""
    return [t.requires_grad, t.grad_fn is None, t.is_leaf, t.is_inference()]


# ============================================================================================
# one compiled object under every grad mode


def _modes_fn(x, w):
    return (x * w).sin().sum(0)


@scenario
def modes_same_object_cycle(C, rec):
    x, w = leaf(3, 4), leaf(4, seed=1)
    cf = C(_modes_fn)
    for i, mode in enumerate(("grad", "no_grad", "inference", "enable_in_no", "grad", "no_grad")):
        if mode == "grad":
            y = cf(x, w)
        elif mode == "no_grad":
            with torch.no_grad():
                y = cf(x, w)
        elif mode == "inference":
            with torch.inference_mode():
                y = cf(x, w)
        else:
            with torch.no_grad(), torch.enable_grad():
                y = cf(x, w)
        rec(f"y{i}", y)
        rec(f"m{i}", meta(y))
        if y.requires_grad:
            y.sum().backward()
            rec(f"g{i}", [x.grad.clone(), w.grad.clone()])


@scenario
def modes_module_cycle(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    cm = C(m)
    x = leaf(3, 4, rg=False)
    with torch.inference_mode():
        a = cm(x)
    rec("a", a)
    rec("ma", meta(a))
    with torch.no_grad():
        b = cm(x)
    rec("mb", meta(b))
    c = cm(x)
    rec("mc", meta(c))
    c.sum().backward()
    rec("g", grads(m))
    with torch.inference_mode():
        d = cm(x)
    rec("md", meta(d))


@scenario
def modes_inference_mode_false_inside_inference(C, rec):
    x = leaf(3)
    cf = C(lambda x: x.exp() * 2)
    with torch.inference_mode(), torch.inference_mode(False):
        y = cf(x)
    rec("y", y)
    rec("m", meta(y))
    y.sum().backward()
    rec("g", x.grad)


@scenario
def modes_inference_tensor_into_training_fn(C, rec):
    w = leaf(3)
    with torch.inference_mode():
        xi = torch.ones(3) * 2
    cf = C(lambda x, w: (x * w).sum())
    attempt(rec, "out", lambda: cf(xi, w))
    out = cf(torch.ones(3), w)
    out.backward()
    rec("g", w.grad)


@scenario
def modes_inference_tensor_saved_raises(C, rec):
    w = leaf(3)
    with torch.inference_mode():
        xi = torch.ones(3) * 2

    def f(x, w):
        return (w * w * x).sum()

    cf = C(f)
    attempt(rec, "out", lambda: cf(xi, w))
    attempt(rec, "bwd", lambda: cf(xi, w).backward())
    rec("g", w.grad)


@scenario
def modes_inference_tensor_inplace_outside_raises(C, rec):
    with torch.inference_mode():
        xi = torch.ones(3)

    def f(x):
        x.add_(1)
        return x * 2

    attempt(rec, "out", lambda: C(f)(xi))
    rec("xi", xi)


@scenario
def modes_inference_tensor_inplace_inside_inference(C, rec):
    with torch.inference_mode():
        xi = torch.ones(3)

    def f(x):
        x.add_(1)
        return x * 2

    with torch.inference_mode():
        y = C(f)(xi)
    rec("y", y)
    rec("m", meta(y))
    rec("xi", xi)


@scenario
def modes_no_grad_output_then_grad_use(C, rec):
    x = leaf(3)
    cf = C(lambda x: x.tanh())
    with torch.no_grad():
        a = cf(x)
    b = cf(x)
    rec("m", [meta(a), meta(b)])
    (a * b).sum().backward()
    rec("g", x.grad)


@scenario
def modes_set_grad_enabled_flag_arg(C, rec):
    x = leaf(3)

    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 3
        return y + x

    cf = C(f)
    for flag in (True, False, True):
        y = cf(x, flag)
        rec(f"m{flag}", meta(y))
        y.sum().backward()
        rec(f"g{flag}", x.grad.clone())


@scenario
def modes_set_grad_enabled_call_inside_leaks(C, rec):
    x = leaf(3)

    def f(x):
        torch.set_grad_enabled(False)
        return x * 2

    y = C(f)(x)
    rec("m", meta(y))
    rec("enabled_after", torch.is_grad_enabled())
    torch.set_grad_enabled(True)


@scenario
def modes_is_grad_enabled_branch_cycle(C, rec):
    x = leaf(3)

    def f(x):
        if torch.is_grad_enabled():
            return x * 2
        return x * 3

    cf = C(f)
    rec("a", cf(x))
    with torch.no_grad():
        rec("b", cf(x))
    with torch.inference_mode():
        rec("c", cf(x))
    rec("d", cf(x))


@scenario
def modes_is_inference_mode_enabled_branch(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        if torch.is_inference_mode_enabled():
            return x + 1
        return x - 1

    cf = C(f)
    rec("a", cf(x))
    with torch.inference_mode():
        rec("b", cf(x))
    rec("c", cf(x))


@scenario
def modes_no_grad_mixed_regions(C, rec):
    x, w = leaf(3), leaf(3, seed=1)

    def f(x, w):
        a = x * w
        with torch.no_grad():
            s = a.norm()
            b = w * 2
        c = a / s + b * x
        with torch.no_grad(), torch.enable_grad():
            d = c.exp()
        return d.sum(), s, b

    out, s, b = C(f)(x, w)
    rec("out", [out, s, b])
    rec("m", [meta(out), meta(s), meta(b)])
    out.backward()
    rec("g", [x.grad, w.grad])


@scenario
def modes_no_grad_decorated_method_in_train_step(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("ema", torch.zeros(3, 3))

        @torch.no_grad()
        def update(self):
            self.ema.mul_(0.5).add_(self.lin.weight, alpha=0.5)

        def forward(self, x):
            y = self.lin(x)
            self.update()
            return y

    torch.manual_seed(0)
    m = M()
    cm = C(m)
    for i in range(2):
        y = cm(leaf(2, 3, seed=i, rg=False))
        y.pow(2).sum().backward()
    rec("g", grads(m))
    rec("ema", m.ema)


@scenario
def modes_inference_mode_inside_then_used(C, rec):
    x = leaf(3)

    def f(x):
        with torch.inference_mode():
            k = x.detach() * 2
        return k, x * 3

    k, y = C(f)(x)
    rec("k", k)
    rec("m", [meta(k), meta(y)])


# ============================================================================================
# nested compiles


@scenario
def nested_compiled_in_compiled(C, rec):
    x = leaf(3)
    inner = C(lambda x: x.sin() * 2)

    def outer(x):
        return inner(x).exp().sum()

    out = C(outer)(x)
    rec("out", out)
    out.backward()
    rec("g", x.grad)


@scenario
def nested_compiled_module_in_train_step(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    cm = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = cm(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    cs = C(step)
    for i in range(2):
        rec(f"loss{i}", cs(leaf(2, 4, seed=i, rg=False)))
    rec("p", dict(m.named_parameters()))
    # the compiled module still works on its own
    y = cm(leaf(2, 4, seed=5, rg=False))
    rec("y", y)


@scenario
def nested_compiled_under_no_grad_inside_compiled(C, rec):
    x = leaf(3)
    inner = C(lambda x: x.cos())

    def outer(x):
        with torch.no_grad():
            t = inner(x)
        return x * t

    y = C(outer)(x)
    rec("m", meta(y))
    y.sum().backward()
    rec("g", x.grad)
    # inner called on its own afterwards, with grad
    z = inner(x)
    rec("mz", meta(z))


@scenario
def nested_compiled_inner_first_with_grad(C, rec):
    x = leaf(3)
    inner = C(lambda x: x.cos() * 3)
    a = inner(x)
    rec("ma", meta(a))

    def outer(x):
        with torch.no_grad():
            return inner(x) + 1

    b = C(outer)(x)
    rec("mb", meta(b))
    rec("b", b)


@scenario
def nested_disable_inside_compiled(C, rec):
    x = leaf(3)

    @torch.compiler.disable
    def helper(t):
        return t * 2

    def f(x):
        return helper(x.sin()).sum()

    out = C(f)(x)
    out.backward()
    rec("g", x.grad)


# ============================================================================================
# backward and autograd.grad inside compiled code


@scenario
def inside_backward_returns_loss(C, rec):
    x, w = leaf(3), leaf(3, seed=1)

    def f(x, w):
        loss = (x * w).sin().sum()
        loss.backward()
        return loss

    out = C(f)(x, w)
    rec("out", out)
    rec("m", meta(out))
    rec("g", [x.grad, w.grad])


@scenario
def inside_backward_retain_graph_twice(C, rec):
    x = leaf(3)

    def f(x):
        loss = x.exp().sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return loss

    out = C(f)(x)
    rec("out", out)
    rec("g", x.grad)


@scenario
def inside_backward_twice_no_retain_raises(C, rec):
    x = leaf(3)

    def f(x):
        loss = x.exp().sum()
        loss.backward()
        loss.backward()
        return loss

    attempt(rec, "out", lambda: C(f)(x))
    rec("g", x.grad)


@scenario
def inside_backward_create_graph(C, rec):
    x = leaf(3)

    def f(x):
        loss = (x**3).sum()
        loss.backward(create_graph=True)
        return x.grad

    g = C(f)(x)
    rec("g", g)
    rec("m", meta(g))
    g.sum().backward()
    rec("xg", x.grad)


@scenario
def inside_autograd_grad_materialize(C, rec):
    x, w = leaf(3), leaf(3, seed=1)

    def f(x, w):
        y = (x * 2).sum()
        gx, gw = torch.autograd.grad(y, (x, w), allow_unused=True, materialize_grads=True)
        return gx, gw

    gx, gw = C(f)(x, w)
    rec("g", [gx, gw])
    rec("m", [meta(gx), meta(gw)])


@scenario
def inside_autograd_grad_allow_unused_none(C, rec):
    x, w = leaf(3), leaf(3, seed=1)

    def f(x, w):
        y = (x * 2).sum()
        gx, gw = torch.autograd.grad(y, (x, w), allow_unused=True)
        return gx * 2, gw is None

    attempt(rec, "out", lambda: C(f)(x, w))


@scenario
def inside_autograd_grad_create_graph_penalty(C, rec):
    x, w = leaf(4), leaf(4, seed=1)

    def f(x, w):
        y = (x * w).tanh().sum()
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        return y + gx.pow(2).sum()

    out = C(f)(x, w)
    rec("out", out)
    out.backward()
    rec("g", [x.grad, w.grad])


@scenario
def inside_autograd_grad_under_no_grad_caller(C, rec):
    x = leaf(3)

    def f(x):
        with torch.enable_grad():
            y = x.pow(2).sum()
            (g,) = torch.autograd.grad(y, x)
        return g

    with torch.no_grad():
        g = C(f)(x)
    rec("g", g)
    rec("m", meta(g))


@scenario
def inside_autograd_grad_of_nonrequires_raises(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        y = x.pow(2).sum()
        return torch.autograd.grad(y, x)

    attempt(rec, "out", lambda: C(f)(x))


@scenario
def inside_backward_then_use_grad(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f(x):
        loss = m(x).pow(2).sum()
        loss.backward()
        return m.weight.grad.norm() + loss.detach()

    out = C(f)(leaf(4, 3, rg=False))
    rec("out", out)
    rec("g", grads(m))


# ============================================================================================
# retain_grad and hooks on intermediates


@scenario
def hook_intermediate_args_and_order(C, rec):
    x = leaf(3)
    calls = []

    def f(x):
        a = x * 2
        a.register_hook(lambda g: calls.append(("a", g.clone())))
        b = a.sin()
        b.register_hook(lambda g: calls.append(("b", g.clone())))
        b.register_hook(lambda g: calls.append(("b2", g.clone())))
        return b.sum()

    out = C(f)(x)
    out.backward()
    rec("calls", [c[0] for c in calls])
    rec("args", [c[1] for c in calls])
    rec("g", x.grad)


@scenario
def hook_intermediate_modifies_grad(C, rec):
    x = leaf(3)

    def f(x):
        a = x.exp()
        a.register_hook(lambda g: g * 10)
        return (a * a).sum()

    out = C(f)(x)
    out.backward()
    rec("g", x.grad)


@scenario
def retain_grad_intermediate_returned_inside(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 3
        a.retain_grad()
        b = a.pow(2)
        return b.sum(), a

    out, a = C(f)(x)
    out.backward()
    rec("ag", a.grad)
    rec("g", x.grad)
    rec("m", meta(a))


@scenario
def retain_grad_plus_hook_order(C, rec):
    x = leaf(3)
    seen = []

    def f(x):
        a = x * 3
        a.register_hook(lambda g: seen.append(g.clone()) or g * 2)
        a.retain_grad()
        return a.sum(), a

    out, a = C(f)(x)
    out.backward()
    rec("ag", a.grad)
    rec("seen", seen)
    rec("g", x.grad)


@scenario
def hook_on_leaf_inside_fires_once_per_backward(C, rec):
    x = leaf(3)
    n = []

    def f(x):
        x.register_hook(lambda g: n.append(1))
        return x.sin().sum()

    cf = C(f)
    cf(x).backward()
    rec("n1", len(n))
    cf(x).backward()
    rec("n2", len(n))
    rec("g", x.grad)


# ============================================================================================
# detach / detach_ / data in the middle of a chain


@scenario
def detach_mid_chain(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 2
        b = a.detach() * a
        return b.sum(), b

    out, b = C(f)(x)
    rec("m", meta(b))
    out.backward()
    rec("g", x.grad)


@scenario
def detach_inplace_mid_chain(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 2
        b = a.exp()
        b.detach_()
        return (a * b).sum(), b

    out, b = C(f)(x)
    rec("m", meta(b))
    rec("b", b)
    out.backward()
    rec("g", x.grad)


@scenario
def data_mid_chain(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 2
        b = a.data.exp() + a
        return b.sum()

    out = C(f)(x)
    out.backward()
    rec("g", x.grad)


@scenario
def data_assignment_inside(C, rec):
    x = leaf(3)

    def f(x, k):
        y = x * 2
        y.data = k
        return y * x

    out = C(f)(x, torch.ones(3) * 5)
    rec("out", out)
    out.sum().backward()
    rec("g", x.grad)


@scenario
def detach_requires_grad_new_leaf_inside(C, rec):
    x = leaf(3)

    def f(x):
        a = (x * 2).detach().requires_grad_()
        b = (a * x).sum()
        b.backward()
        return a.grad, b

    attempt(rec, "out", lambda: C(f)(x))
    rec("g", x.grad)


# ============================================================================================
# custom autograd.Functions


class NonDiffIdx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        v, i = x.max(-1)
        ctx.mark_non_differentiable(i)
        ctx.save_for_backward(x, i)
        return v, i

    @staticmethod
    def backward(ctx, gv, gi):
        x, i = ctx.saved_tensors
        out = torch.zeros_like(x)
        out.scatter_(-1, i.unsqueeze(-1), gv.unsqueeze(-1))
        return out


class NoMat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        r = None
        if ga is not None:
            r = ga * 2
        if gb is not None:
            r = gb * 3 if r is None else r + gb * 3
        return r


class DirtyMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class SaveOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        y = (x * w).exp()
        ctx.save_for_backward(x, w, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, y = ctx.saved_tensors
        gx = g * y * w if ctx.needs_input_grad[0] else None
        gw = g * y * x if ctx.needs_input_grad[1] else None
        return gx, gw


class NeedsGradFlags(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        # a user error eager only reaches when that grad is needed
        gx = g * w if ctx.needs_input_grad[0] else None
        gw = (g * x).sum() * torch.ones_like(w) if ctx.needs_input_grad[1] else None
        return gx, gw


@scenario
def fn_non_diff_idx_and_grad(C, rec):
    x = leaf(2, 4)

    def f(x):
        v, i = NonDiffIdx.apply(x)
        return (v * 2).sum(), i

    out, i = C(f)(x)
    rec("i", i)
    rec("mi", meta(i))
    out.backward()
    rec("g", x.grad)


@scenario
def fn_no_materialize_one_used(C, rec):
    x = leaf(3)

    def f(x):
        a, _b = NoMat.apply(x)
        return a.sum()

    C(f)(x).backward()
    rec("g", x.grad)


@scenario
def fn_mark_dirty_on_nonleaf_input(C, rec):
    x = leaf(3)

    def f(x):
        y = x + 1
        z = DirtyMul.apply(y)
        return (z * x).sum(), z, y

    out, z, y = C(f)(x)
    rec("zy", [z, y])
    rec("m", [meta(z), meta(y)])
    out.backward()
    rec("g", x.grad)


@scenario
def fn_mark_dirty_on_leaf_raises(C, rec):
    x = leaf(3)
    attempt(rec, "out", lambda: C(lambda x: DirtyMul.apply(x).sum())(x))


@scenario
def fn_save_output_needs_input_grad_cycle(C, rec):
    x, w = leaf(3), leaf(3, seed=1)
    cf = C(lambda x, w: SaveOut.apply(x, w).sum())
    cf(x, w).backward()
    rec("1", [x.grad, w.grad])
    w.requires_grad_(False)
    cf(x, w).backward()
    rec("2", [x.grad, w.grad])
    with torch.no_grad():
        out = cf(x, w)
    rec("3", meta(out))


@scenario
def fn_needs_input_grad_module_frozen(C, rec):
    x, w = leaf(3), leaf(3, seed=1, rg=False)
    out = C(lambda x, w: NeedsGradFlags.apply(x, w).sum())(x, w)
    out.backward()
    rec("g", [x.grad, w.grad])


@scenario
def fn_apply_under_no_grad_inside(C, rec):
    x = leaf(3)

    def f(x):
        with torch.no_grad():
            a = SaveOut.apply(x, x * 1)
        return a, x * a

    a, b = C(f)(x)
    rec("m", [meta(a), meta(b)])
    b.sum().backward()
    rec("g", x.grad)


# ============================================================================================
# forward-mode AD, saved-tensor hooks, anomaly mode


@scenario
def fwd_ad_dual_through_compiled(C, rec):
    import torch.autograd.forward_ad as fwAD

    x = leaf(3, rg=False)
    t = torch.ones(3)
    cf = C(lambda x: x.sin() * x)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        y = cf(d)
        p, tg = fwAD.unpack_dual(y)
        rec("p", p)
        rec("t", tg)


@scenario
def fwd_ad_dual_inside_compiled(C, rec):
    import torch.autograd.forward_ad as fwAD

    x = leaf(3, rg=False)

    def f(x):
        with fwAD.dual_level():
            d = fwAD.make_dual(x, torch.ones_like(x))
            y = d.exp() * 2
            return fwAD.unpack_dual(y).tangent

    attempt(rec, "t", lambda: C(f)(x))


@scenario
def saved_hooks_around_counts(C, rec):
    x = leaf(3)
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    cf = C(lambda x: (x.exp() * x).sum())
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = cf(x)
    out.backward()
    rec("g", x.grad)
    rec("packed", packed)
    rec("unpacked", unpacked)


@scenario
def save_on_cpu_around_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 1))
    cm = C(m)
    with torch.autograd.graph.save_on_cpu():
        out = cm(leaf(2, 3, rg=False)).sum()
    out.backward()
    rec("g", grads(m))


@scenario
def saved_hooks_unpack_scales_inside(C, rec):
    x = leaf(3)

    def f(x):
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t * 2):
            y = x.pow(2)
        return y.sum()

    out = C(f)(x)
    out.backward()
    rec("g", x.grad)


@scenario
def anomaly_around_compiled_nan(C, rec):
    x = leaf(3)
    cf = C(lambda x: (x * 0).sqrt().sum())
    with torch.autograd.detect_anomaly(check_nan=True):
        out = cf(x)
        attempt(rec, "bwd", lambda: out.backward())
    rec("g", x.grad)


@scenario
def anomaly_inside_compiled(C, rec):
    x = leaf(3)

    def f(x):
        with torch.autograd.detect_anomaly():
            return x.exp().sum()

    out = C(f)(x)
    out.backward()
    rec("g", x.grad)


@scenario
def anomaly_set_detect_between_calls(C, rec):
    x = leaf(3)
    cf = C(lambda x: (x - x).sqrt().sum())
    cf(x).backward()
    rec("g1", x.grad.clone())
    torch.autograd.set_detect_anomaly(True)
    try:
        attempt(rec, "bwd", lambda: cf(x).backward())
    finally:
        torch.autograd.set_detect_anomaly(False)
    rec("g", x.grad)


# ============================================================================================
# requires_grad flipping, leaves


@scenario
def rg_flip_on_input_cycle_outputs(C, rec):
    x = leaf(3, rg=False)
    cf = C(lambda x: (x.exp(), x * 2))
    for i in range(4):
        x.requires_grad_(i % 2 == 1)
        a, b = cf(x)
        rec(f"m{i}", [meta(a), meta(b)])
        if a.requires_grad:
            (a + b).sum().backward()
            rec(f"g{i}", x.grad.clone())


@scenario
def rg_requires_grad_set_inside_on_input(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        x.requires_grad_()
        return (x * x).sum()

    out = C(f)(x)
    rec("m", meta(out))
    rec("xrg", x.requires_grad)
    out.backward()
    rec("g", x.grad)


@scenario
def rg_output_is_leaf_of_new_param(C, rec):
    def f(x):
        w = nn.Parameter(torch.ones(3))
        return w * x, w

    y, w = C(f)(leaf(3, rg=False))
    rec("m", [meta(y), meta(w), type(w).__name__])


@scenario
def rg_grad_of_leaf_read_inside_after_backward(C, rec):
    x = leaf(3)
    (x * 2).sum().backward()

    def f(x):
        return x.grad * 3 + x

    y = C(f)(x)
    rec("y", y)
    rec("m", meta(y))


@scenario
def rg_zero_grad_inside(C, rec):
    x = leaf(3)
    (x * 2).sum().backward()

    def f(x):
        x.grad = None
        return x.sin().sum()

    out = C(f)(x)
    rec("gnone", x.grad is None)
    out.backward()
    rec("g", x.grad)


@scenario
def rg_grad_zero_inplace_inside(C, rec):
    x = leaf(3)
    (x * 2).sum().backward()

    def f(x):
        x.grad.zero_()
        return x.sin().sum()

    out = C(f)(x)
    rec("g0", x.grad)
    out.backward()
    rec("g", x.grad)


# ============================================================================================
# more grad-mode cases (second round)


@scenario
def modes2_set_grad_false_then_graph_break(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 2
        torch.set_grad_enabled(False)
        b = a * 3
        torch._dynamo.graph_break()
        c = b + x
        torch.set_grad_enabled(True)
        return a, b, c

    out = C(f)(x)
    rec("m", [meta(t) for t in out])
    rec("enabled", torch.is_grad_enabled())
    torch.set_grad_enabled(True)


@scenario
def modes2_set_grad_true_inside_no_grad_caller(C, rec):
    x = leaf(3)

    def f(x):
        torch.set_grad_enabled(True)
        return x * 2

    with torch.no_grad():
        y = C(f)(x)
        rec("enabled_in", torch.is_grad_enabled())
    rec("m", meta(y))
    y.sum().backward()
    rec("g", x.grad)


@scenario
def modes2_set_grad_false_twice_calls(C, rec):
    x = leaf(3)

    def f(x):
        y = x * 2
        torch.set_grad_enabled(False)
        return y, x * 3

    cf = C(f)
    for i in range(2):
        a, b = cf(x)
        rec(f"m{i}", [meta(a), meta(b), torch.is_grad_enabled()])
        torch.set_grad_enabled(True)


@scenario
def modes2_inference_decorator_compiled(C, rec):
    x = leaf(3)

    @torch.inference_mode()
    def f(x):
        return x * 2, x[0]

    a, b = C(f)(x)
    rec("m", [meta(a), meta(b)])


@scenario
def modes2_inference_block_view_of_input(C, rec):
    x = leaf(3)

    def f(x):
        with torch.inference_mode():
            v = x[1:]
            w = x.view(3)
        return v, w, x * 2

    out = C(f)(x)
    rec("m", [meta(t) for t in out])
    rec("v", list(out))


@scenario
def modes2_inference_block_inplace_nonleaf(C, rec):
    x = leaf(3)

    def f(x):
        y = x * 2
        with torch.inference_mode():
            y.add_(1)
        return y

    attempt(rec, "y", lambda: C(f)(x))


@scenario
def modes2_inference_block_then_clone_grad(C, rec):
    x = leaf(3)

    def f(x):
        with torch.inference_mode():
            s = x.detach().pow(2).sum()
        return x * s.clone()

    y = C(f)(x)
    rec("m", meta(y))
    y.sum().backward()
    rec("g", x.grad)


@scenario
def modes2_inference_block_output_used_outside_raises(C, rec):
    x = leaf(3)

    def f(x):
        with torch.inference_mode():
            s = x.detach() * 2
        return (x * s).sum()

    attempt(rec, "y", lambda: C(f)(x))
    rec("inf", torch.is_inference_mode_enabled())


@scenario
def modes2_inference_enable_grad_nested(C, rec):
    x = leaf(3)

    def f(x):
        with torch.inference_mode():
            with torch.enable_grad():
                a = x * 2
            with torch.inference_mode(False):
                b = x * 3
        return a, b

    a, b = C(f)(x)
    rec("m", [meta(a), meta(b), torch.is_grad_enabled()])
    b.sum().backward()
    rec("g", x.grad)


@scenario
def modes2_no_grad_inside_called_in_inference(C, rec):
    x = leaf(3)

    def f(x):
        with torch.no_grad():
            a = x * 2
        return a + x

    cf = C(f)
    with torch.inference_mode():
        y = cf(x)
    rec("m", meta(y))
    z = cf(x)
    rec("mz", meta(z))


@scenario
def modes2_enable_grad_decorator_under_no_grad(C, rec):
    x = leaf(3)

    @torch.enable_grad()
    def f(x):
        return x.exp()

    cf = C(f)
    with torch.no_grad():
        y = cf(x)
    rec("m", meta(y))
    y.sum().backward()
    rec("g", x.grad)


@scenario
def modes2_requires_grad_inside_no_grad_region(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        with torch.no_grad():
            w = torch.ones(3) * 2
        w.requires_grad_()
        return (w * x).sum(), w

    out, w = C(f)(x)
    rec("m", [meta(out), meta(w)])
    out.backward()
    rec("g", w.grad)


@scenario
def inside2_autograd_backward_grad_tensors(C, rec):
    x, w = leaf(3), leaf(3, seed=1)

    def f(x, w):
        a = x * w
        b = x.exp()
        torch.autograd.backward([a, b], [torch.ones(3), torch.full((3,), 2.0)])
        return a + b

    out = C(f)(x, w)
    rec("m", meta(out))
    rec("g", [x.grad, w.grad])


@scenario
def inside2_backward_inputs_arg(C, rec):
    x, w = leaf(3), leaf(3, seed=1)

    def f(x, w):
        loss = (x * w).sum()
        loss.backward(inputs=[w])
        return loss

    C(f)(x, w)
    rec("g", [x.grad, w.grad])


@scenario
def inside2_agrad_retain_then_backward_outside(C, rec):
    x = leaf(3)

    def f(x):
        y = x.sin().sum()
        (g,) = torch.autograd.grad(y, x, retain_graph=True)
        return y, g

    y, g = C(f)(x)
    rec("m", [meta(y), meta(g)])
    y.backward()
    rec("g", x.grad)


@scenario
def inside2_agrad_no_retain_then_backward_outside_raises(C, rec):
    x = leaf(3)

    def f(x):
        y = x.sin().sum()
        (g,) = torch.autograd.grad(y, x)
        return y, g

    y, _g = C(f)(x)
    attempt(rec, "bwd", lambda: y.backward())
    rec("g", x.grad)


@scenario
def inside2_hook_registered_inside_on_returned(C, rec):
    x = leaf(3)
    seen = []

    def f(x):
        y = x * 2
        y.register_hook(lambda g: seen.append(g.clone()))
        return y

    y = C(f)(x)
    (y * torch.arange(3.0)).sum().backward()
    rec("seen", seen)
    rec("g", x.grad)


@scenario
def inside2_hook_on_output_of_param_module(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    seen = []

    def f(x):
        h = m(x)
        h.register_hook(lambda g: seen.append(tuple(g.shape)))
        m.weight.register_hook(lambda g: seen.append(("w", g.sum().item() != 0)))
        return h.relu().sum()

    C(f)(leaf(2, 3, rg=False)).backward()
    rec("seen", seen)
    rec("g", grads(m))


@scenario
def inside2_grad_of_grad_create_graph_twice_calls(C, rec):
    x = leaf(3)

    def f(x):
        y = (x**4).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x, create_graph=True)
        return h

    cf = C(f)
    for i in range(2):
        h = cf(x)
        rec(f"h{i}", h)
        rec(f"m{i}", meta(h))
    h.sum().backward()
    rec("g", x.grad)


@scenario
def fn2_once_differentiable_in_compiled(C, rec):
    from torch.autograd.function import once_differentiable

    class Sq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = leaf(3)
    out = C(lambda x: Sq.apply(x).sum())(x)
    out.backward()
    rec("g", x.grad)


@scenario
def fn2_dirty_and_save_output(C, rec):
    class ExpInplace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.exp_()
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = leaf(3)

    def f(x):
        y = x * 1
        return ExpInplace.apply(y).sum()

    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("g", x.grad)


@scenario
def fn2_needs_input_grad_none_returned_for_needed(C, rec):
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            return None, g

    x, w = leaf(3), leaf(3, seed=1)
    out = C(lambda x, w: Bad.apply(x, w).sum())(x, w)
    out.backward()
    rec("g", [x.grad, w.grad])


@scenario
def fn2_non_differentiable_output_requires_grad_flag(C, rec):
    class TwoOut(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a = x * 2
            b = x * 3
            ctx.mark_non_differentiable(b)
            return a, b

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2

    x = leaf(3)
    a, b = C(lambda x: TwoOut.apply(x))(x)
    rec("m", [meta(a), meta(b)])
    (a.sum() + b.sum()).backward()
    rec("g", x.grad)


@scenario
def fn2_materialize_false_none_grad_both(C, rec):
    class Pick(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            ctx_seen.append((ga is None, gb is None))
            if ga is None and gb is None:
                return None
            return (ga if ga is not None else 0) * 2 + (gb if gb is not None else 0) * 3

    ctx_seen = []
    x = leaf(3)

    def f(x):
        _a, b = Pick.apply(x)
        return b.sum()

    C(f)(x).backward()
    rec("seen", ctx_seen)
    rec("g", x.grad)


@scenario
def fwd2_jvp_inside_compiled(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        return torch.func.jvp(lambda t: t.sin() * t, (x,), (torch.ones(3),))

    out = C(f)(x)
    rec("out", list(out))


@scenario
def fwd2_dual_module_compiled(C, rec):
    import torch.autograd.forward_ad as fwAD

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    cm = C(m)
    x = leaf(2, 3, rg=False)
    with fwAD.dual_level():
        y = cm(fwAD.make_dual(x, torch.ones(2, 3)))
        rec("t", fwAD.unpack_dual(y).tangent)


@scenario
def saved2_hooks_inside_count_and_grad(C, rec):
    x = leaf(3)
    n = []

    def f(x):
        def pack(t):
            n.append(1)
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = x.exp() * x
        return y.sum()

    C(f)(x).backward()
    rec("any", len(n) > 0)
    rec("g", x.grad)


@scenario
def saved2_disable_saved_tensors_hooks_raises(C, rec):
    x = leaf(3)
    cf = C(lambda x: (x.exp() * x).sum())

    def go():
        with (
            torch.autograd.graph.disable_saved_tensors_hooks("no hooks here"),
            torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t),
        ):
            return cf(x)

    attempt(rec, "out", go)
    out = cf(x)
    out.backward()
    rec("g", x.grad)


@scenario
def anomaly2_forward_nan_no_error(C, rec):
    x = leaf(3)
    cf = C(lambda x: (x * float("nan")).sum())
    with torch.autograd.detect_anomaly():
        out = cf(x)
        attempt(rec, "bwd", lambda: out.backward())
    rec("g", x.grad)


@scenario
def anomaly2_check_nan_false(C, rec):
    x = leaf(3)
    cf = C(lambda x: (x * 0).sqrt().sum())
    with torch.autograd.detect_anomaly(check_nan=False):
        cf(x).backward()
    rec("g", x.grad)


@scenario
def nested2_compiled_helper_called_twice_in_step(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    enc = C(m)

    def step(a, b):
        return (enc(a) - enc(b)).pow(2).sum()

    out = C(step)(leaf(2, 3, rg=False), leaf(2, 3, seed=1, rg=False))
    out.backward()
    rec("out", out)
    rec("g", grads(m))


@scenario
def saved3_pack_changes_values_around(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    cm = C(m)
    x = leaf(2, 3, rg=False)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t.half(), lambda t: t.float()):
        out = cm(x).sum()
    out.backward()
    rec("g", grads(m))
    m.zero_grad()
    cm(x).sum().backward()  # (no hooks: compiled again)
    rec("g2", grads(m))


# NOTE: Dynamo's (aot_eager and inductor too, standalone): "UnspecializedNNModuleVariable(
# Sequential) is already tracked for mutation" where the compiled module's ``_orig_mod`` and
# the module itself are both read in one frame.
@scenario
def nested2_compiled_inside_no_grad_eval_then_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.0), nn.Linear(4, 1))
    cm = C(m)

    def evaluate(x):
        m.eval()
        with torch.no_grad():
            r = cm(x)
        m.train()
        return r

    r = C(evaluate)(leaf(2, 3, rg=False))
    rec("m", meta(r))
    loss = cm(leaf(2, 3, seed=1, rg=False)).sum()
    loss.backward()
    rec("g", grads(m))


@scenario
def mut4_allow_mutation_on_saved_around(C, rec):
    x = leaf(3)
    cf = C(lambda a: (a * a).sum())
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        a = x * 1
        out = cf(a)
        with torch.no_grad():
            a.add_(1)
        attempt(rec, "bwd", lambda: out.backward())
    rec("g", x.grad)


@scenario
def mut4_saved_input_mutated_no_ctx_raises(C, rec):
    x = leaf(3)
    cf = C(lambda a: (a * a).sum())
    a = x * 1
    out = cf(a)
    with torch.no_grad():
        a.add_(1)
    attempt(rec, "bwd", lambda: out.backward())
    rec("g", x.grad)


@scenario
def hook4_multi_grad_hook_on_outputs(C, rec):
    x = leaf(3)
    seen = []
    a, b = C(lambda x: (x.sin(), x.cos()))(x)
    torch.autograd.graph.register_multi_grad_hook(
        (a, b), lambda gs: seen.append([g is None for g in gs])
    )
    a.sum().backward()
    rec("seen", seen)
    rec("g", x.grad)


@scenario
def hook4_multi_grad_hook_any_mode(C, rec):
    x = leaf(3)
    seen = []
    a, b = C(lambda x: (x.sin(), x.cos()))(x)
    torch.autograd.graph.register_multi_grad_hook(
        (a, b), lambda g: seen.append(g.shape), mode="any"
    )
    (a.sum() + b.sum()).backward()
    rec("seen", seen)


@scenario
def modes4_is_grad_enabled_returned(C, rec):
    x = leaf(3)

    def f(x):
        with torch.no_grad():
            inner = torch.is_grad_enabled()
        return x * 2, inner, torch.is_grad_enabled()

    out = C(f)(x)
    rec("out", list(out[1:]))
    with torch.no_grad():
        out = C(f)(x)
    rec("out2", list(out[1:]))


@scenario
def modes4_module_set_grad_false_in_forward_in_step(C, rec):
    class Frozen(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            with torch.set_grad_enabled(False):
                h = self.lin(x)
            return h

    torch.manual_seed(0)
    enc = Frozen()
    head = nn.Linear(3, 1)

    def step(x):
        return head(enc(x).relu()).sum()

    out = C(step)(leaf(2, 3, rg=False))
    out.backward()
    rec("g", [grads(enc), grads(head)])


@scenario
def modes4_no_grad_region_param_write_then_backward(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)

    def f(x):
        y = lin(x).sum()
        with torch.no_grad():
            lin.bias.mul_(0.5)
        return y

    out = C(f)(leaf(2, 3, rg=False))
    attempt(rec, "bwd", lambda: out.backward())
    rec("g", grads(lin))
    rec("b", lin.bias)


@scenario
def modes4_grad_fn_prehook_outside(C, rec):
    x = leaf(3)
    seen = []
    y = C(lambda x: x.exp() * 2)(x)
    y.grad_fn.register_prehook(lambda gout: seen.append(len(gout)))
    y.sum().backward()
    rec("n", len(seen))
    rec("g", x.grad)


@scenario
def modes4_increment_version_inside(C, rec):
    x = leaf(3)

    def f(a):
        y = a.exp()
        torch.autograd.graph.increment_version(a)
        return y

    a = x * 1
    y = C(f)(a)
    rec("v", a._version)
    attempt(rec, "bwd", lambda: y.sum().backward())


@scenario
def modes5_bn_train_under_inference_then_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    cm = C(m)
    x = leaf(5, 3, rg=False)
    with torch.inference_mode():
        a = cm(x)
    rec("a", a)
    rec("ma", meta(a))
    rec("stats", [m[1].running_mean.clone(), m[1].running_var.clone(), m[1].num_batches_tracked])
    rec("stats_inf", [m[1].running_mean.is_inference()])
    b = cm(x)
    b.pow(2).sum().backward()
    rec("g", grads(m))
    rec("stats2", [m[1].running_mean, m[1].num_batches_tracked])


@scenario
def modes5_module_made_in_inference_trained_raises(C, rec):
    with torch.inference_mode():
        torch.manual_seed(0)
        m = nn.Linear(3, 2)
    cm = C(m)
    x = leaf(2, 3)
    attempt(rec, "out", lambda: cm(x))
    with torch.inference_mode():
        rec("inf_out", cm(x))


@scenario
def modes5_inference_input_written_inside_inference_compiled(C, rec):
    with torch.inference_mode():
        buf = torch.zeros(3)
    w = leaf(3)

    def f(buf, w):
        buf.add_(1)
        return buf * 2

    with torch.inference_mode():
        y = C(f)(buf, w)
    rec("y", y)
    rec("m", meta(y))
    rec("buf", buf)


@scenario
def modes5_inference_tensor_as_index_into_training(C, rec):
    with torch.inference_mode():
        idx = torch.tensor([2, 0])
    w = leaf(3, 4)
    out = C(lambda w, i: w[i].sum())(w, idx)
    out.backward()
    rec("g", w.grad)


@scenario
def modes5_inference_tensor_mixed_with_normal_add_outside(C, rec):
    with torch.inference_mode():
        b = torch.ones(3)
    w = leaf(3)
    out = C(lambda w, b: (w + b).pow(2).sum())(w, b)
    out.backward()
    rec("g", w.grad)
    attempt(rec, "out2", lambda: C(lambda w, b: (w * b).sum())(w, b).backward())


@scenario
def modes6_inference_false_block_called_in_inference(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 2
        with torch.inference_mode(False):
            b = x.exp()
        return a, b

    with torch.inference_mode():
        a, b = C(f)(x)
    rec("m", [meta(a), meta(b), torch.is_inference_mode_enabled()])
    b.sum().backward()
    rec("g", x.grad)


@scenario
def modes6_no_grad_block_called_in_inference_returns_view(C, rec):
    x = leaf(4)

    def f(x):
        with torch.enable_grad():
            v = x[1:]
        return v, x * 2

    with torch.inference_mode():
        v, y = C(f)(x)
    rec("m", [meta(v), meta(y)])


@scenario
def hook7_retain_grad_output_twice_retained(C, rec):
    x = leaf(3)

    def f(x):
        y = x.exp()
        y.retain_grad()
        return y

    y = C(f)(x)
    loss = (y * y).sum()
    loss.backward(retain_graph=True)
    rec("g1", y.grad.clone())
    loss.backward()
    rec("g2", y.grad)
    rec("xg", x.grad)


@scenario
def hook7_leaf_hook_inside_with_agrad_outside(C, rec):
    x = leaf(3)
    seen = []

    def f(x):
        x.register_hook(lambda g: seen.append(g.clone()) or g * 2)
        return x.sin().sum()

    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x)
    rec("g", g)
    rec("seen", seen)
    rec("xg", x.grad)


@scenario
def hook7_intermediate_hook_create_graph(C, rec):
    x = leaf(3)

    def f(x):
        y = x**3
        y.register_hook(lambda g: g * 2)
        return y.sum()

    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    rec("g", g)
    rec("m", meta(g))
    g.sum().backward()
    rec("xg", x.grad)


@scenario
def fn7_mark_non_diff_input_view(C, rec):
    class ViewOut(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            v = x.view(-1)
            ctx.mark_non_differentiable(v)
            return v, x * 2

        @staticmethod
        def backward(ctx, gv, gy):
            return gy * 2

    x = leaf(2, 2)
    a = x * 1
    v, y = C(lambda a: ViewOut.apply(a))(a)
    rec("m", [meta(v), meta(y)])
    y.sum().backward()
    rec("g", x.grad)


@scenario
def fn7_needs_input_grad_read_in_forward(C, rec):
    class Branch(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            out = []
            out.append(g * w if ctx.needs_input_grad[0] else None)
            out.append(g * x if ctx.needs_input_grad[1] else None)
            seen.append(tuple(ctx.needs_input_grad))
            return tuple(out)

    seen = []
    x, w = leaf(3), leaf(3, seed=1)
    cf = C(lambda x, w: Branch.apply(x, w).sum())
    cf(x, w).backward()
    x.requires_grad_(False)
    cf(x, w).backward()
    rec("seen", seen)
    rec("g", [x.grad, w.grad])


def main(argv):
    return h.run(argv, SCENARIOS) if hasattr(h, "run") else _run(argv)


def _run(argv):
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = h.compare(n, SCENARIOS[n])
        except Exception as e:  # noqa: BLE001  (a failure of the probe itself)
            line = f"CRASH {n}: {type(e).__name__}: {e}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(_run(sys.argv[1:]))
