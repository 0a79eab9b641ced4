"""Gradients and compiled-program caching as users write them (session 28): each scenario
runs eagerly and under ``torch.compile(..., backend="xla")``; every observation compared
strictly (``.grad`` None-ness, dtypes, shapes, values against a float64 reference, errors).

    PYTHONPATH=. python scripts/probe_grads28.py [substring ...]

The harness is ``probe_grads26``'s (three runs: compiled and eager in float32, eager with
float64 as the default dtype as the reference).
"""

from __future__ import annotations

import os
import sys
import threading
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


# ============================================================================================
# custom autograd.Functions


class NonDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(-1)
        y = x * 2
        ctx.mark_non_differentiable(idx)
        return y, idx

    @staticmethod
    def backward(ctx, gy, gidx):
        return gy * 2


class NoMaterialize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, ga, gb):
        (_x,) = ctx.saved_tensors if ctx.saved_tensors else (None,)
        out = None
        if ga is not None:
            out = ga * 3
        if gb is not None:
            out = gb * 5 if out is None else out + gb * 5
        return out


class PartialGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, k: float):
        ctx.save_for_backward(x, w)
        ctx.k = k
        return x * w * k

    @staticmethod
    def backward(ctx, g):
        _x, w = ctx.saved_tensors
        gx = g * w * ctx.k if ctx.needs_input_grad[0] else None
        return gx, None, None


class SaveOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


@scenario
def fn_mark_non_differentiable(C, rec):
    x = leaf(3, 4)

    def f(x):
        y, idx = NonDiff.apply(x)
        return y.sum() + idx.sum(), idx

    out, idx = C(f)(x)
    rec("out", out)
    rec("idx", idx)
    out.backward()
    rec("g", x.grad)


@scenario
def fn_no_materialize_one_output(C, rec):
    x = leaf(3)

    def f(x):
        a, _b = NoMaterialize.apply(x)
        return a.sum()

    out = C(f)(x)
    out.backward()
    rec("g", x.grad)


@scenario
def fn_no_materialize_both_outputs_returned(C, rec):
    x = leaf(3)

    def f(x):
        a, b = NoMaterialize.apply(x)
        return a, b

    _a, b = C(f)(x)
    b.sum().backward()
    rec("g", x.grad)


@scenario
def fn_partial_grad_none_for_w(C, rec):
    x, w = leaf(3), leaf(3, seed=1)
    out = C(lambda x, w: PartialGrad.apply(x, w, 1.5).sum())(x, w)
    out.backward()
    rec("gx", x.grad)
    rec("gw", w.grad)


@scenario
def fn_partial_grad_x_frozen(C, rec):
    x, w = leaf(3, rg=False), leaf(3, seed=1)
    out = C(lambda x, w: PartialGrad.apply(x, w, 1.5).sum())(x, w)
    rec("out", out)
    attempt(rec, "bwd", lambda: out.backward())
    rec("gw", w.grad)


@scenario
def fn_save_output_two_calls(C, rec):
    x = leaf(4)
    cf = C(lambda x: SaveOut.apply(x * 0.5).sum())
    for i in range(2):
        cf(x).backward()
    rec("g", x.grad)


# ============================================================================================
# hooks


@scenario
def hook_on_input_inside(C, rec):
    x = leaf(3)

    def f(x):
        x.register_hook(lambda g: g * 10)
        return (x * x).sum()

    C(f)(x).backward()
    rec("g", x.grad)


@scenario
def hook_on_intermediate_inside(C, rec):
    x = leaf(3)

    def f(x):
        y = x.sin()
        y.register_hook(lambda g: g * 10)
        return (y * y).sum()

    C(f)(x).backward()
    rec("g", x.grad)


@scenario
def hook_on_output_outside(C, rec):
    x = leaf(3)
    seen = []
    y = C(lambda x: x.exp() * 2)(x)
    y.register_hook(lambda g: seen.append(g.clone()) or g * 3)
    y.sum().backward()
    rec("g", x.grad)
    rec("seen", seen)


@scenario
def hook_on_param_outside_twice(C, rec):
    m = nn.Linear(3, 2)
    seen = []
    m.weight.register_hook(lambda g: seen.append(g.clone()) or g * 0.5)
    cm = C(m)
    for i in range(2):
        cm(leaf(4, 3, seed=i, rg=False)).pow(2).sum().backward()
    rec("seen", seen)
    rec("grads", grads(m))


@scenario
def hook_post_accumulate(C, rec):
    m = nn.Linear(3, 2)
    seen = []
    m.bias.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    cm = C(m)
    for i in range(2):
        cm(leaf(4, 3, seed=i, rg=False)).sum().backward()
    rec("seen", seen)


@scenario
def retain_grad_intermediate_returned(C, rec):
    x = leaf(3)

    def f(x):
        y = x * 2
        y.retain_grad()
        return (y.sin()).sum(), y

    out, y = C(f)(x)
    out.backward()
    rec("yg", y.grad)
    rec("xg", x.grad)


@scenario
def retain_grad_output_outside(C, rec):
    x = leaf(3)
    y = C(lambda x: x * 2)(x)
    y.retain_grad()
    y.sin().sum().backward()
    rec("yg", y.grad)
    rec("xg", x.grad)


# ============================================================================================
# outputs that alias inputs


@scenario
def alias_return_input_and_view(C, rec):
    x = leaf(3, 4)

    def f(x):
        return x, x.t(), x[1], x.view(-1)[2:5]

    a, b, c, d = C(f)(x)
    rec("rg", [a.requires_grad, b.requires_grad, c.requires_grad, d.requires_grad])
    rec("leaf", [a is x, b._base is x, c._base is x])
    (a.sum() + (b * 2).sum() + (c * 3).sum() + (d * 4).sum()).backward()
    rec("g", x.grad)


@scenario
def alias_view_output_written_then_backward(C, rec):
    x = leaf(3, 4)

    def f(x):
        y = x * 1
        return y, y[0]

    y, v = C(f)(x)
    v.mul_(5)
    rec("y", y)
    y.sum().backward()
    rec("g", x.grad)


@scenario
def alias_view_of_input_inplace_raises(C, rec):
    x = leaf(3, 4)

    def f(x):
        v = x[0]
        return v

    v = C(f)(x)
    attempt(rec, "write", lambda: v.mul_(2))
    rec("g", x.grad)


@scenario
def outputs_some_used(C, rec):
    x, w = leaf(3, 4), leaf(4, 2, seed=1)

    def f(x, w):
        h = x @ w
        return h.relu(), h.sigmoid(), (x * 2).sum(), w.t()

    a, _b, _c, d = C(f)(x, w)
    (a.sum() + d.sum()).backward()
    rec("gx", x.grad)
    rec("gw", w.grad)


# ============================================================================================
# autograd.grad


@scenario
def agrad_materialize(C, rec):
    x, w, u = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    out = C(lambda x, w, u: (x * w).sum() + (u > 0).sum())(x, w, u)
    rec("g", torch.autograd.grad(out, [x, u], allow_unused=True, materialize_grads=True))


@scenario
def agrad_is_grads_batched(C, rec):
    x = leaf(3)
    y = C(lambda x: x.sin() * 2)(x)
    rec("g", torch.autograd.grad(y, x, torch.eye(3), is_grads_batched=True))


@scenario
def agrad_create_graph_unused_then_backward(C, rec):
    x, w, b = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    out = C(lambda x, w, b: (x.tanh() * w).sum() + b.sum())(x, w, b)
    gx, gb = torch.autograd.grad(out, [x, b], create_graph=True)
    rec("gx", gx)
    rec("gb", gb)
    rec("gb_rg", [gb.requires_grad, gx.requires_grad])
    (gx.pow(2).sum()).backward()
    rec("grads", [x.grad, w.grad, b.grad])


@scenario
def double_backward_twice_accumulates(C, rec):
    x = leaf(3)
    cf = C(lambda x: (x.sin() ** 2).sum())
    for _ in range(2):
        (g,) = torch.autograd.grad(cf(x), x, create_graph=True)
        g.sum().backward()
    rec("g", x.grad)


# ============================================================================================
# grad mode between and inside calls


@scenario
def enable_grad_inside_no_grad_caller(C, rec):
    x = leaf(3)

    def f(x):
        with torch.enable_grad():
            y = x.exp()
        return y * 2

    cf = C(f)
    with torch.no_grad():
        y = cf(x)
    rec("y", y)
    rec("rg", y.requires_grad)
    y2 = cf(x)
    rec("rg2", y2.requires_grad)
    y2.sum().backward()
    rec("g", x.grad)


@scenario
def no_grad_decorated_compiled(C, rec):
    x = leaf(3)

    @torch.no_grad()
    def f(x):
        return x * 2

    y = C(f)(x)
    rec("y", y)
    z = C(lambda x: x * 3)(x)
    z.sum().backward()
    rec("g", x.grad)


@scenario
def set_grad_enabled_false_inside(C, rec):
    x = leaf(3)

    def f(x):
        a = x * 2
        torch.set_grad_enabled(False)
        b = x * 3
        torch.set_grad_enabled(True)
        return a + b

    y = C(f)(x)
    rec("rg", y.requires_grad)
    y.sum().backward()
    rec("g", x.grad)


@scenario
def requires_grad_toggle_between_calls(C, rec):
    x, w = leaf(3), leaf(3, seed=1)
    cf = C(lambda x, w: (x.sin() * w).sum())
    cf(x, w).backward()
    rec("1", [x.grad, w.grad])
    w.requires_grad_(False)
    cf(x, w).backward()
    rec("2", [x.grad, w.grad])
    w.requires_grad_(True)
    x.requires_grad_(False)
    cf(x, w).backward()
    rec("3", [x.grad, w.grad])


@scenario
def requires_grad_inside_fresh_tensor(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        w = torch.ones(3).requires_grad_()
        return (w * x).sum(), w

    out, w = C(f)(x)
    rec("out", out)
    rec("rg", [out.requires_grad, w.requires_grad, w.is_leaf])
    out.backward()
    rec("g", w.grad)


@scenario
def detach_inplace_inside(C, rec):
    x = leaf(3)

    def f(x):
        y = x * 2
        z = y.detach()
        z.mul_(3)
        return y.sum() + z.sum()

    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("g", x.grad)


# ============================================================================================
# in-place and version counters


@scenario
def saved_input_modified_after_call_raises(C, rec):
    x = leaf(3)
    a = x * 1
    y = C(lambda a: a.sin())(a)
    a.add_(1)
    attempt(rec, "bwd", lambda: y.sum().backward())
    rec("g", x.grad)


@scenario
def output_modified_then_backward_exp(C, rec):
    x = leaf(3)
    y = C(lambda x: x.exp())(x)
    y.add_(1)
    attempt(rec, "bwd", lambda: y.sum().backward())
    rec("g", x.grad)


@scenario
def leaf_inplace_inside_raises(C, rec):
    x = leaf(3)
    attempt(rec, "call", lambda: C(lambda x: x.add_(1))(x))
    rec("x", x)


@scenario
def leaf_view_inplace_inside_raises(C, rec):
    x = leaf(3, 4)

    def f(x):
        x[0].zero_()
        return x.sum()

    attempt(rec, "call", lambda: C(f)(x))
    rec("x", x)


@scenario
def param_data_inplace_between_calls(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    x = leaf(4, 3, rg=False)
    out = cm(x)
    with torch.no_grad():
        m.weight.mul_(2)
    attempt(rec, "bwd", lambda: out.sum().backward())
    rec("grads", grads(m))


# ============================================================================================
# caching


@scenario
def cache_dtype_then_back_grads(C, rec):
    cf = C(lambda x, w: (x.tanh() * w).sum())
    for dt in (torch.float32, torch.float64, torch.float32, torch.bfloat16):
        x = leaf(4).to(dt).requires_grad_()
        w = leaf(4, seed=1).to(dt).requires_grad_()
        out = cf(x, w)
        out.backward()
        rec(f"{dt}", [out, x.grad, w.grad])


@scenario
def cache_strides_grads(C, rec):
    cf = C(lambda x, w: (x @ w).relu().sum(-1))
    base = leaf(4, 6).detach()
    for name, x in [
        ("contig", base.clone()),
        ("t", base.t().clone().t()),
        ("slice", base[:, ::2].clone()[:, :]),
        ("slice2", leaf(4, 6, seed=3).detach()[:, ::2]),
    ]:
        x = x.detach()
        if x.shape[1] != 3:
            x = x[:, :3]
        x.requires_grad_()
        w = leaf(3, 5, seed=1)
        out = cf(x, w)
        (out * torch.arange(4.0)).sum().backward()
        rec(name, [out, x.grad, w.grad])


@scenario
def cache_channels_last_conv_grads(C, rec):
    conv = nn.Conv2d(3, 4, 3)
    cm = C(conv)
    for i, fmt in enumerate(
        [torch.contiguous_format, torch.channels_last, torch.contiguous_format]
    ):
        x = leaf(2, 3, 6, 6, seed=i).detach().contiguous(memory_format=fmt).requires_grad_()
        out = cm(x)
        rec(f"cl{i}", out.is_contiguous(memory_format=torch.channels_last))
        out.pow(2).sum().backward()
        rec(f"x{i}", x.grad)
    rec("grads", grads(conv))


@scenario
def cache_autocast_on_off_grads(C, rec):
    m = nn.Linear(4, 3)
    cm = C(m)
    for ac in (False, True, False, True):
        x = leaf(2, 4, rg=False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ac):
            out = cm(x)
        rec(f"out{ac}", out.dtype)
        out.float().sum().backward()
        rec(f"g{ac}", [m.weight.grad.dtype, m.bias.grad.clone()])


@scenario
def cache_default_dtype_switch(C, rec):
    def f(x):
        return x * torch.tensor(1.5) + torch.ones(3) + torch.arange(3) * 0.5

    cf = C(f)
    old = torch.get_default_dtype()
    try:
        for dt in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(dt)
            x = torch.ones(3, dtype=torch.float32, requires_grad=True)
            y = cf(x)
            rec(f"{dt}", y)
            y.sum().backward()
            rec(f"g{dt}", x.grad)
    finally:
        torch.set_default_dtype(old)


@scenario
def cache_deterministic_index_put(C, rec):
    def f(x, i, v):
        return x.index_put((i,), v, accumulate=True)

    cf = C(f)
    old = torch.are_deterministic_algorithms_enabled()
    try:
        for det in (False, True, False):
            torch.use_deterministic_algorithms(det)
            x = leaf(5)
            v = leaf(4, seed=1)
            y = cf(x, torch.tensor([0, 1, 1, 3]), v)
            rec(f"{det}", y)
            (y * torch.arange(5.0)).sum().backward()
            rec(f"g{det}", [x.grad, v.grad])
    finally:
        torch.use_deterministic_algorithms(old)


@scenario
def cache_train_eval_dropout_bn(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Linear(4, 1))
    cm = C(m)
    for i, mode in enumerate(["train", "eval", "train", "eval"]):
        getattr(m, mode)()
        torch.manual_seed(i)
        out = cm(leaf(6, 4, seed=i, rg=False))
        out.sum().backward()
        rec(f"out{i}", out)
        rec(f"stats{i}", [m[1].running_mean, m[1].running_var, m[1].num_batches_tracked])
    rec("grads", grads(m))


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 1.0
        self.use_bias = True
        self.p = 0

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.use_bias:
            y = y + 1
        return y.pow(2 + self.p)


@scenario
def cache_module_scalar_attrs(C, rec):
    m = Scaled()
    cm = C(m)
    for i, (s, b, p) in enumerate(
        [(1.0, True, 0), (2.5, True, 0), (2.5, False, 1), (0.0, True, 0)]
    ):
        m.scale, m.use_bias, m.p = s, b, p
        out = cm(leaf(2, 3, seed=i, rg=False))
        out.sum().backward()
        rec(f"out{i}", out)
        rec(f"g{i}", grads(m))


@scenario
def cache_replaced_parameter_and_buffer(C, rec):
    m = nn.BatchNorm1d(3)
    cm = C(m)
    for i in range(3):
        if i == 1:
            m.weight = nn.Parameter(torch.full((3,), 2.0))
            m.running_mean = torch.ones(3)
        if i == 2:
            m.bias = nn.Parameter(torch.full((3,), -1.0), requires_grad=False)
        out = cm(leaf(4, 3, seed=i, rg=False))
        (out * torch.arange(3.0)).sum().backward()
        rec(f"out{i}", out)
        rec(f"g{i}", grads(m))
        rec(f"rm{i}", m.running_mean)


@scenario
def cache_closures_other_tensors_grads(C, rec):
    def make(w):
        def f(x):
            return (x * w).sum()

        return f

    ws = [leaf(3, seed=1), leaf(3, seed=2), leaf(4, seed=3)]
    for i, w in enumerate(ws):
        x = leaf(w.shape[0], seed=10 + i)
        C(make(w))(x).backward()
        rec(f"{i}", [x.grad, w.grad])


@scenario
def cache_closure_tensor_rg_toggled(C, rec):
    w = leaf(3, seed=1)

    def f(x):
        return (x * w).sum()

    cf = C(f)
    x = leaf(3)
    cf(x).backward()
    rec("1", [x.grad, w.grad])
    w.requires_grad_(False)
    cf(x).backward()
    rec("2", [x.grad, w.grad])
    w.requires_grad_(True)
    cf(x).backward()
    rec("3", [x.grad, w.grad])


@scenario
def cache_grad_mode_global(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    x = leaf(2, 3)
    for i, mode in enumerate([True, False, True, False]):
        with torch.set_grad_enabled(mode):
            y = cm(x)
        rec(f"rg{i}", [y.requires_grad, y.grad_fn is None])
        if y.requires_grad:
            y.sum().backward()
    rec("grads", grads(m))
    rec("x", x.grad)


@scenario
def cache_inference_mode_then_grad(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    with torch.inference_mode():
        y = cm(leaf(2, 3, rg=False))
    rec("y", y)
    y2 = cm(leaf(2, 3, rg=False))
    y2.sum().backward()
    rec("grads", grads(m))


@scenario
def cache_frozen_unfrozen_param(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    cm = C(m)
    for i, fr in enumerate([False, True, False]):
        m[0].weight.requires_grad_(not fr)
        out = cm(leaf(4, 3, seed=i, rg=False))
        out.sum().backward()
        rec(f"g{i}", grads(m))


@scenario
def threads_backward_compare(C, rec):
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    cm = C(m)
    results = {}

    def work(k):
        x = leaf(3 + k, 4, seed=k)
        out = cm(x)
        out.sum().backward()
        results[k] = (out.detach().clone(), x.grad.clone())

    ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(3):
        rec(f"t{k}", list(results[k]))
    rec("grads_sum", {n: p.grad for n, p in m.named_parameters()})


@scenario
def threads_grad_and_no_grad(C, rec):
    cf = C(lambda x, w: (x * w).tanh())
    results = {}

    def work(k):
        x = leaf(4, seed=k)
        w = leaf(4, seed=10 + k)
        with torch.set_grad_enabled(k % 2 == 0):
            y = cf(x, w)
        rg = y.requires_grad
        if rg:
            y.sum().backward()
        results[k] = (y.detach().clone(), rg, x.grad, w.grad)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(4):
        rec(f"t{k}", list(results[k]))


# ============================================================================================
# batch 2: odder Function features, hooks on parameters inside, identities, arguments


class BadShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.sum(0)


class OtherDtypeGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (g * 2).to(torch.float16)


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 7


class SetupCtx(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


@scenario
def fn_bad_shape_backward_raises(C, rec):
    x = leaf(2, 3)
    out = C(lambda x: BadShape.apply(x).sum())(x)
    attempt(rec, "bwd", lambda: out.backward())
    rec("g", x.grad)


@scenario
def fn_other_dtype_grad_cast(C, rec):
    x = leaf(3)
    out = C(lambda x: OtherDtypeGrad.apply(x.sin()).sum())(x)
    out.backward()
    rec("g", x.grad)


@scenario
def fn_mark_dirty(C, rec):
    x = leaf(3)

    def f(x):
        y = x * 1
        z = Dirty.apply(y)
        return z.sum(), y

    out, y = C(f)(x)
    rec("y", y)
    out.backward()
    rec("g", x.grad)


@scenario
def fn_once_differentiable_double_raises(C, rec):
    x = leaf(3)
    out = C(lambda x: Once.apply(x).sum())(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    rec("g", g)
    rec("rg", g.requires_grad)
    attempt(rec, "bwd2", lambda: g.sum().backward())
    rec("xg", x.grad)


@scenario
def fn_identity_returns_input(C, rec):
    x = leaf(3)

    def f(x):
        return Identity.apply(x) * 2

    C(f)(x).sum().backward()
    rec("g", x.grad)


@scenario
def fn_identity_returned_directly(C, rec):
    x = leaf(3)
    y = C(lambda x: Identity.apply(x))(x)
    rec("is", [y is x, y.is_leaf])
    y.sum().backward()
    rec("g", x.grad)


@scenario
def fn_setup_context(C, rec):
    x = leaf(3)
    cf = C(lambda x, k: SetupCtx.apply(x, k).sum())
    for k in (2.0, 3.0):
        cf(x, k).backward()
        rec(f"g{k}", x.grad.clone())


class HookInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        h = self.lin(x)
        h.register_hook(lambda g: g * 2)
        return h


@scenario
def hook_registered_in_forward_on_activation(C, rec):
    m = HookInForward()
    cm = C(m)
    for i in range(2):
        cm(leaf(4, 3, seed=i)).pow(2).sum().backward()
    rec("grads", grads(m))


@scenario
def hook_on_param_registered_inside(C, rec):
    w = leaf(3, seed=1)

    def f(x):
        w.register_hook(lambda g: g * 3)
        return (x * w).sum()

    cf = C(f)
    for i in range(2):
        cf(leaf(3, seed=i, rg=False)).backward()
        rec(f"g{i}", w.grad.clone())


@scenario
def hook_modifies_grad_inplace(C, rec):
    x = leaf(3)
    y = C(lambda x: x.sin() * 2)(x)
    y.register_hook(lambda g: g.mul_(3))
    (y * y).sum().backward()
    rec("g", x.grad)


@scenario
def grad_identity_accumulated_inplace(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    cm(leaf(2, 3, rg=False)).sum().backward()
    g = m.weight.grad
    cm(leaf(2, 3, seed=1, rg=False)).sum().backward()
    rec("same", m.weight.grad is g)
    rec("g", g)


@scenario
def grad_preset_other_dtype(C, rec):
    w = leaf(3)
    w.grad = torch.ones(3, dtype=torch.float64)
    attempt(rec, "bwd", lambda: C(lambda w: (w * 2).sum())(w).backward())
    rec("g", w.grad)


@scenario
def float_arg_changes_with_backward(C, rec):
    x = leaf(3).detach().abs().requires_grad_()
    cf = C(lambda x, p: (x**p).sum() * p)
    for p in (2.0, 3.0, 0.5, 1.0, 0.0):
        cf(x, p).backward()
        rec(f"g{p}", x.grad.clone())


@scenario
def int_arg_changes_with_backward(C, rec):
    x = leaf(6)
    cf = C(lambda x, n: (x[:n].pow(n) * n).sum() + x.roll(n).mul(torch.arange(6.0)).sum())
    for n in (2, 3, 4, 1, 0, 5):
        cf(x, n).backward()
        rec(f"g{n}", x.grad.clone())


@scenario
def dynamic_true_backward_sizes(C, rec):
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    cm = C(m, dynamic=True)
    for b in (2, 3, 5, 1):
        x = leaf(b, 4, seed=b)
        out = cm(x)
        (out.mean(0) * torch.arange(4.0)).sum().backward()
        rec(f"x{b}", x.grad)
    rec("grads", grads(m))


@scenario
def automatic_dynamic_backward_view(C, rec):
    def f(x):
        n = x.shape[0]
        return x.view(n // 2, 2, -1).softmax(-1).sum(1)

    cf = C(f)
    for b in (4, 6, 8, 2):
        x = leaf(b, 3, seed=b)
        out = cf(x)
        (out * out).sum().backward()
        rec(f"x{b}", x.grad)


@scenario
def where_nan_branch_grad(C, rec):
    x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
    out = C(lambda x: torch.where(x > 0, x.sqrt(), torch.zeros_like(x)).sum())(x)
    out.backward()
    rec("g", x.grad)


@scenario
def where_nan_branch_log_masked(C, rec):
    x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)

    def f(x):
        y = x.log()
        return y.masked_fill(x <= 0, 0.0).sum() + y[x > 0].sum()

    C(f)(x).backward()
    rec("g", x.grad)


@scenario
def mixed_dtype_inputs_grads(C, rec):
    x = leaf(3)
    w = leaf(3, seed=1).detach().double().requires_grad_()
    h_ = leaf(3, seed=2).detach().bfloat16().requires_grad_()
    out = C(lambda x, w, h_: (x * w + h_).sum())(x, w, h_)
    rec("out", out)
    out.backward()
    rec("g", [x.grad, w.grad, h_.grad])


@scenario
def module_to_double_between_calls(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    cm(leaf(2, 3, rg=False)).sum().backward()
    rec("g1", grads(m))
    m.zero_grad()
    m.double()
    x = leaf(2, 3, rg=False).double()
    out = cm(x)
    rec("out", out)
    out.sum().backward()
    rec("g2", grads(m))


@scenario
def non_leaf_view_input_grads(C, rec):
    w = leaf(4, 5)
    cf = C(lambda a, b: (a.tanh() * b).sum())
    for i, (a, b) in enumerate(
        [(w[:, :3], w[:, 2:]), (w.t()[:3, :3], w[1:, 1:4]), (w[0:2], w[2:])]
    ):
        cf(a, b).backward()
        rec(f"g{i}", w.grad.clone())


@scenario
def zero_grad_false_then_frozen_stays(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cm = C(m)
    for i in range(3):
        opt.zero_grad(set_to_none=False)
        m[0].requires_grad_(i != 1)
        cm(leaf(2, 3, seed=i, rg=False)).sum().backward()
        rec(f"g{i}", grads(m))
        opt.step()


@scenario
def grad_mode_branch_inside(C, rec):
    def f(x):
        if torch.is_grad_enabled():
            return x * 2
        return x * 3

    cf = C(f)
    x = leaf(3)
    with torch.no_grad():
        rec("a", cf(x))
    y = cf(x)
    rec("b", y)
    y.sum().backward()
    rec("g", x.grad)


@scenario
def requires_grad_branch_inside(C, rec):
    def f(x, w):
        if w.requires_grad:
            return (x * w).sum()
        return (x + w).sum()

    cf = C(f)
    x, w = leaf(3), leaf(3, seed=1)
    cf(x, w).backward()
    w.requires_grad_(False)
    cf(x, w).backward()
    rec("g", [x.grad, w.grad])


@scenario
def inference_mode_inside_compiled(C, rec):
    def f(x):
        with torch.inference_mode():
            s = x.sum()
        return x * 2, s

    y, s = C(f)(leaf(3))
    rec("y", [y, s, s.requires_grad, s.is_inference()])


@scenario
def backward_gradient_noncontig(C, rec):
    x = leaf(4, 3)
    cf = C(lambda x: x.exp() * 2)
    g1 = leaf(3, 4, seed=5, rg=False).t()
    cf(x).backward(g1)
    g2 = leaf(1, 3, seed=6, rg=False).expand(4, 3)
    cf(x).backward(g2)
    rec("g", x.grad)


@scenario
def two_outputs_backward_list_one_int(C, rec):
    x = leaf(3)

    def f(x):
        return x.exp(), (x > 0).long(), x.sin()

    a, b, c = C(f)(x)
    torch.autograd.backward([a.sum(), c], [None, torch.ones(3)])
    rec("g", x.grad)
    rec("b", b)


@scenario
def zero_size_input_grads(C, rec):
    cf = C(lambda x, w: (x @ w).sum() + w.sum())
    for n in (0, 2):
        x, w = leaf(n, 3), leaf(3, 2, seed=1)
        cf(x, w).backward()
        rec(f"g{n}", [x.grad, w.grad])


@scenario
def scalar_zero_d_vs_one_elem_grads(C, rec):
    cf = C(lambda x, s: (x * s).sum())
    for s in (leaf(seed=1), leaf(1, seed=2), leaf(seed=3)):
        x = leaf(3)
        cf(x, s).backward()
        rec(f"g{s.dim()}", [x.grad, s.grad])


# ============================================================================================
# batch 3: autograd metadata changed inside, optimizer in backward, hook order


@scenario
def requires_grad_on_input_inside(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        x.requires_grad_()
        return (x * x).sum()

    out = C(f)(x)
    rec("rg", [out.requires_grad, x.requires_grad])
    attempt(rec, "bwd", lambda: out.backward())
    rec("g", x.grad)


@scenario
def hook_on_no_grad_input_raises(C, rec):
    x = leaf(3, rg=False)

    def f(x):
        x.register_hook(lambda g: g)
        return x * 2

    attempt(rec, "call", lambda: C(f)(x))


@scenario
def param_frozen_inside_forward(C, rec):
    m = nn.Linear(3, 2)

    def f(x):
        m.bias.requires_grad = False
        return m(x).sum()

    out = C(f)(leaf(2, 3, rg=False))
    out.backward()
    rec("grads", grads(m))
    rec("rg", m.bias.requires_grad)


@scenario
def optimizer_in_backward(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.9) for p in m.parameters()}
    order = []

    def hook(p):
        order.append(tuple(p.shape))
        opts[p].step()
        opts[p].zero_grad()

    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)
    cm = C(m)
    for i in range(3):
        cm(leaf(5, 3, seed=i, rg=False)).pow(2).mean().backward()
    rec("order", order)
    rec("params", h.params(m))
    rec("grads", grads(m))


@scenario
def hooks_read_other_grads(C, rec):
    a, b = leaf(3), leaf(3, seed=1)
    seen = []
    a.register_post_accumulate_grad_hook(lambda p: seen.append(("a", b.grad is None)))
    b.register_post_accumulate_grad_hook(lambda p: seen.append(("b", a.grad is None)))
    cf = C(lambda a, b: (a.sin() * 2 + b).sum() + (b.exp() * a).sum())
    cf(a, b).backward()
    rec("seen", seen)


@scenario
def tensor_hook_on_leaf_outside_and_inside_graph_twice(C, rec):
    w = leaf(3)
    calls = []
    w.register_hook(lambda g: calls.append(g.clone()))
    cf = C(lambda x, w: (x * w).sum() + (w * w).sum())
    for i in range(2):
        cf(leaf(3, seed=i, rg=False), w).backward()
    rec("calls", calls)
    rec("g", w.grad)


@scenario
def grad_accumulate_three_calls_one_backward(C, rec):
    w = leaf(3)
    cf = C(lambda x, w: (x * w).tanh().sum())
    loss = sum(cf(leaf(3, seed=i, rg=False), w) for i in range(3))
    loss.backward()
    rec("g", w.grad)


@scenario
def backward_under_no_grad_context(C, rec):
    w = leaf(3)
    out = C(lambda w: (w.exp()).sum())(w)
    with torch.no_grad():
        out.backward()
    rec("g", w.grad)
    rec("rg", w.grad.requires_grad)


@scenario
def create_graph_backward_grad_has_graph(C, rec):
    w = leaf(3)
    out = C(lambda w: (w**3).sum())(w)
    out.backward(create_graph=True)
    rec("rg", [w.grad.requires_grad, w.grad.grad_fn is None])
    g = w.grad
    w.grad = None
    g.sum().backward()
    rec("g2", w.grad)


@scenario
def detect_anomaly_not_set_backward(C, rec):
    w = leaf(3)
    x = torch.tensor([0.0, 1.0, 2.0])
    out = C(lambda w, x: (w * x.sqrt()).sum() + (w * 0 + x).pow(0.5).sum())(w, x)
    out.backward()
    rec("g", w.grad)


@scenario
def compiled_called_from_eager_backward_hook(C, rec):
    w = leaf(3)
    cf = C(lambda g: g * 2 + 1)
    w.register_hook(lambda g: cf(g))
    (w * w).sum().backward()
    rec("g", w.grad)


@scenario
def compiled_inside_custom_function_backward(C, rec):
    cf = C(lambda g, x: g * x.cos())

    class F2(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return cf(g, x)

    x = leaf(3)
    F2.apply(x).sum().backward()
    rec("g", x.grad)
    x2 = leaf(3, seed=1)
    (g,) = torch.autograd.grad(F2.apply(x2).sum(), x2, create_graph=True)
    rec("g2", [g, g.requires_grad])


# ============================================================================================
# batch 4: graphs cut into XLA and eager parts (ops XLA does not run) with gradients across


class Sandwich(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 2)
        self.c = nn.Parameter(torch.randn(4))
        self.unused = nn.Parameter(torch.randn(2))
        self.fn = fn

    def forward(self, x):
        h = self.a(x).tanh()
        h = self.fn(h, self.c)
        y = self.b(h)
        return y.pow(2).sum(), y.detach(), h


def _sw_partial(h, c):
    return PartialGrad.apply(h, c, 2.0) + h


def _sw_nomat(h, c):
    a, _b = NoMaterialize.apply(h * c)
    return a


def _sw_hook(h, c):
    z = h * c
    z.register_hook(lambda g: g * 0.5)
    return z.relu()


def _sw_identity(h, c):
    return Identity.apply(h) * c.detach()


def _sw_dirty(h, c):
    z = h * c
    Dirty.apply(z)
    return z.exp()


for _name, _fn in [
    ("partial", _sw_partial),
    ("nomat", _sw_nomat),
    ("hook", _sw_hook),
    ("identity", _sw_identity),
    ("dirty", _sw_dirty),
]:

    def _make(fn):
        def run(C, rec):
            m = Sandwich(fn)
            cm = C(m)
            for i in range(2):
                x = leaf(5, 3, seed=i)
                loss, yd, hh = cm(x)
                rec(f"loss{i}", loss)
                rec(f"meta{i}", [yd.requires_grad, hh.requires_grad])
                (loss + hh.sum() * 0.1).backward()
                rec(f"x{i}", x.grad)
            rec("grads", grads(m))

        return run

    SCENARIOS[f"sandwich_{_name}"] = _make(_fn)


@scenario
def sandwich_two_functions_and_retain(C, rec):
    x, w = leaf(4), leaf(4, seed=1)

    def f(x, w):
        a = (x * w).sin()
        b = PartialGrad.apply(a, w, 3.0)
        b.retain_grad()
        c, d = NoMaterialize.apply(b)
        return c.sum() + (d * w).sum(), b

    out, b = C(f)(x, w)
    out.backward()
    rec("g", [x.grad, w.grad, b.grad])


@scenario
def sandwich_double_backward(C, rec):
    x, w = leaf(4), leaf(4, seed=1)

    def f(x, w):
        a = (x * w).sin()
        b = Identity.apply(a)
        return (b * b * w).sum()

    out = C(f)(x, w)
    (gx,) = torch.autograd.grad(out, x, create_graph=True)
    rec("gx", gx)
    gx.sum().backward()
    rec("g", [x.grad, w.grad])


def main(argv) -> int:
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
    sys.exit(main(sys.argv[1:]))
