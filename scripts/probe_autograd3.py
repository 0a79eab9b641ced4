"""More autograd scenarios against eager (session 19), run as ``scripts/probe_autograd.py``:

    PYTHONPATH=. python scripts/probe_autograd3.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_autograd3.py   # torch's own

Same observations and comparison as ``probe_autograd.py`` (imported from it): hooks,
``torch.autograd.grad``'s arguments, requires_grad changing between calls, grad-mode regions,
integer and view outputs, in-place writes, checkpoints, ``torch.func`` and
``torch.autograd.functional`` around compiled functions, forward-mode AD, custom
``autograd.Function`` (double backward included), AMP with ``GradScaler``, clipping and
gradient accumulation.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd as base
from _probe_common import run
from probe_autograd import leaf

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


# ============================================================================================
# hooks
@scenario
def hook_input_before_compile_scales(C, rec):
    def f(x, w):
        return (x * w).sin().sum()

    x, w = leaf(3), leaf(3, seed=1)
    x.register_hook(lambda g: g * 3)
    w.register_hook(lambda g: g + 1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def hook_param_before_compile(C, rec):
    m = _mlp()
    m[0].weight.register_hook(lambda g: g.clamp(-0.01, 0.01))
    C(m)(leaf(5, 3, rg=False)).square().sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def hook_two_on_one_input(C, rec):
    def f(x):
        return (x.exp() * 2).sum()

    x = leaf(3)
    x.register_hook(lambda g: g * 2)
    x.register_hook(lambda g: g - 1)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def hook_removed_before_second_call(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(3)
    h = x.register_hook(lambda g: g * 100)
    cf = C(f)
    cf(x).backward()
    rec("g1", x.grad.clone())
    h.remove()
    x.grad = None
    cf(x).backward()
    rec("g2", x.grad)


@scenario
def hook_output_two_outputs(C, rec):
    def f(x):
        return x.sin(), x.cos()

    x = leaf(3)
    a, b = C(f)(x)
    a.register_hook(lambda g: g * 10)
    b.register_hook(lambda g: g * 0)
    (a.sum() + b.sum()).backward()
    rec("grad", x.grad)


@scenario
def hook_inside_on_param(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        return lin(x).sum()

    lin.weight.register_hook(lambda g: g * 0.5)
    x = leaf(4, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def post_accumulate_hook_param_counts(C, rec):
    m = _mlp()
    seen = []
    for name, p in m.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, n=name: seen.append((n, p.grad.clone())))
    cm = C(m)
    for k in range(2):
        cm(leaf(5, 3, seed=k, rg=False)).sum().backward()
    rec("names", sorted(n for n, _ in seen))
    rec("grads", [g for _, g in sorted(seen, key=lambda t: t[0])])


@scenario
def post_accumulate_hook_zeroes(C, rec):
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    w.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(0.5))
    cf = C(f)
    cf(x, w).backward()
    cf(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def module_full_backward_hook_module_input(C, rec):
    m = nn.Linear(3, 2)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append([*gi, *go]))
    x = leaf(4, 3)
    C(m)(x).square().sum().backward()
    rec("grads", [x.grad, m.weight.grad, m.bias.grad])
    rec("seen", seen)


@scenario
def module_forward_pre_hook_modifies(C, rec):
    m = nn.Linear(3, 2)
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    x = leaf(4, 3)
    out = C(m)(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, m.weight.grad])


@scenario
def module_forward_hook_modifies_output(C, rec):
    m = nn.Linear(3, 2)
    m.register_forward_hook(lambda mod, args, out: out.tanh())
    x = leaf(4, 3)
    out = C(m)(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, m.weight.grad, m.bias.grad])


@scenario
def module_backward_hook_no_input_grad(C, rec):
    m = nn.Linear(3, 2)
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append([*gi, *go]))
    x = leaf(4, 3, rg=False)
    C(m)(x).sum().backward()
    rec("seen", seen)
    rec("grads", [m.weight.grad, m.bias.grad])


@scenario
def retain_grad_intermediate_inside_used(C, rec):
    kept = {}

    def f(x, w):
        h = x * w
        h.retain_grad()
        kept["h"] = h
        return h.tanh().sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])
    rec("h_grad", kept["h"].grad)


@scenario
def retain_grad_output_twice_accum(C, rec):
    def f(x):
        return x * 3

    x = leaf(3)
    out = C(f)(x)
    out.retain_grad()
    out.sum().backward(retain_graph=True)
    out.sum().backward()
    rec("grads", [out.grad, x.grad])


@scenario
def hook_on_output_view(C, rec):
    def f(x):
        return x.exp().view(3, 2)

    x = leaf(6)
    out = C(f)(x)
    v = out[1]
    v.register_hook(lambda g: g * 5)
    (v.sum() + out.sum()).backward()
    rec("grad", x.grad)


# ============================================================================================
# torch.autograd.grad arguments
@scenario
def agrad_subset_inputs(C, rec):
    def f(x, y, z):
        return (x * y * z).sum()

    x, y, z = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    out = C(f)(x, y, z)
    rec("g", list(torch.autograd.grad(out, [z, x])))
    rec("grads", [x.grad, y.grad, z.grad])


@scenario
def agrad_non_contiguous_grad_outputs(C, rec):
    def f(x):
        return x.sin() * 2

    x = leaf(3, 4)
    out = C(f)(x)
    go = torch.randn(4, 3).t()
    rec("g", list(torch.autograd.grad(out, x, go)))


@scenario
def agrad_expanded_grad_outputs(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3, 4)
    out = C(f)(x)
    go = torch.randn(4).expand(3, 4)
    rec("g", list(torch.autograd.grad(out, x, go)))


@scenario
def agrad_lower_dtype_grad_outputs(C, rec):
    def f(x):
        return x * x

    x = leaf(3, dtype=torch.float64)
    out = C(f)(x)
    rec("g", list(torch.autograd.grad(out, x, torch.ones(3, dtype=torch.float32))))


@scenario
def agrad_wrong_shape_grad_outputs_raises(C, rec):
    def f(x):
        return x * x

    x = leaf(3)
    out = C(f)(x)
    torch.autograd.grad(out, x, torch.ones(4))


@scenario
def agrad_is_grads_batched(C, rec):
    def f(x):
        return x.sin() * x

    x = leaf(3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, torch.eye(3), is_grads_batched=True)
    rec("g", g)


@scenario
def agrad_is_grads_batched_matmul(C, rec):
    def f(x, w):
        return x @ w

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    out = C(f)(x, w)
    go = torch.randn(5, 2, 4)
    rec("g", list(torch.autograd.grad(out, [x, w], go, is_grads_batched=True)))


@scenario
def agrad_allow_unused_materialize(C, rec):
    def f(x, y):
        return (x.exp()).sum()

    x, y = leaf(3), leaf(2, seed=1)
    out = C(f)(x, y)
    rec("g", list(torch.autograd.grad(out, [x, y], allow_unused=True, materialize_grads=True)))


@scenario
def agrad_intermediate_input(C, rec):
    def f(x):
        return x.exp(), (x.exp() * 2).sum()

    x = leaf(3)
    h, s = C(f)(x)
    rec("g", list(torch.autograd.grad(s, [h], allow_unused=True)))


@scenario
def agrad_wrt_output_of_compiled(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    h = C(f)(x)
    y = (h * h).sum()
    rec("g", list(torch.autograd.grad(y, [h, x])))


@scenario
def agrad_two_outputs_one_call(C, rec):
    def f(x, w):
        return (x * w).sum(), (x + w).pow(2).sum()

    x, w = leaf(3), leaf(3, seed=1)
    a, b = C(f)(x, w)
    rec("g", list(torch.autograd.grad([a, b], [x, w], [torch.tensor(2.0), None])))


@scenario
def backward_inputs_subset_module(C, rec):
    m = _mlp()
    out = C(m)(leaf(5, 3, rg=False)).sum()
    out.backward(inputs=[m[2].weight])
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def backward_inputs_intermediate(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    h = C(f)(x)
    h.retain_grad()
    (h * h).sum().backward(inputs=[h])
    rec("grads", [x.grad, h.grad])


@scenario
def backward_gradient_non_scalar(C, rec):
    def f(x, w):
        return x @ w

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    out = C(f)(x, w)
    out.backward(gradient=torch.arange(8.0).view(2, 4))
    rec("grads", [x.grad, w.grad])


@scenario
def backward_gradient_wrong_dtype(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    out = C(f)(x)
    out.backward(gradient=torch.ones(3, dtype=torch.float64))
    rec("grad", x.grad)


@scenario
def backward_gradient_int_raises(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    out = C(f)(x)
    out.backward(gradient=torch.ones(3, dtype=torch.int64))
    rec("grad", x.grad)


@scenario
def retain_graph_three_times_accumulates(C, rec):
    def f(x, w):
        return (x.tanh() * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    for k in range(3):
        out.backward(retain_graph=True)
        rec(f"g{k}", [x.grad.clone(), w.grad.clone()])


@scenario
def agrad_then_backward_same_graph(C, rec):
    def f(x):
        return (x.sin() * x).sum()

    x = leaf(3)
    out = C(f)(x)
    rec("g", list(torch.autograd.grad(out, x, retain_graph=True)))
    out.backward()
    rec("grad", x.grad)


# ============================================================================================
# requires_grad changes between calls
@scenario
def unfreeze_layer_later(C, rec):
    m = _mlp()
    m[0].requires_grad_(False)
    cm = C(m)
    x = leaf(5, 3, rg=False)
    cm(x).sum().backward()
    rec("g1", [p.grad for p in m.parameters()])
    m[0].requires_grad_(True)
    cm(x).sum().backward()
    rec("g2", [p.grad for p in m.parameters()])


@scenario
def freeze_param_after_compile(C, rec):
    m = _mlp()
    cm = C(m)
    x = leaf(5, 3, rg=False)
    cm(x).sum().backward()
    m.zero_grad(set_to_none=True)
    m[2].weight.requires_grad_(False)
    out = cm(x)
    rec("out", out)
    out.sum().backward()
    rec("g2", [p.grad for p in m.parameters()])


@scenario
def freeze_all_after_compile(C, rec):
    m = _mlp()
    cm = C(m)
    x = leaf(5, 3, rg=False)
    cm(x).sum().backward()
    m.requires_grad_(False)
    m.zero_grad()
    out = cm(x)
    rec("out", out)
    out.sum().backward()


@scenario
def input_grad_on_after_frozen(C, rec):
    m = _mlp().requires_grad_(False)
    cm = C(m)
    out = cm(leaf(5, 3, rg=False))
    rec("out", out)
    x = leaf(5, 3)
    cm(x).sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def grad_mode_toggles_between_calls(C, rec):
    def f(x, w):
        return (x * w).exp().sum()

    cf = C(f)
    x, w = leaf(3), leaf(3, seed=1)
    with torch.no_grad():
        rec("a", cf(x, w))
    out = cf(x, w)
    out.backward()
    rec("grads", [x.grad, w.grad])
    with torch.inference_mode():
        rec("b", cf(x, w))


# ============================================================================================
# grad-mode regions, detach, .data inside
@scenario
def set_grad_enabled_var_inside(C, rec):
    def f(x, w, flag: bool):
        with torch.set_grad_enabled(flag):
            h = x * w
        return h, (h * x).sum()

    x, w = leaf(3), leaf(3, seed=1)
    h, s = C(f)(x, w, False)
    rec("h", h)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def no_grad_decorated_helper(C, rec):
    @torch.no_grad()
    def stat(t):
        return t.mean()

    def f(x):
        return (x - stat(x)).pow(2).sum()

    x = leaf(4)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def enable_grad_inside_called_under_no_grad(C, rec):
    def f(x, w):
        with torch.enable_grad():
            y = (x * w).sum()
        return y

    x, w = leaf(3), leaf(3, seed=1)
    with torch.no_grad():
        y = C(f)(x, w)
    rec("y", y)
    y.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def detach_inplace_inside(C, rec):
    def f(x, w):
        h = x * w
        g = h.clone()
        g.detach_()
        return (h + g).sum(), g

    x, w = leaf(3), leaf(3, seed=1)
    s, g = C(f)(x, w)
    rec("g", g)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def data_read_inside(C, rec):
    def f(x, w):
        return (x * w.data).sum() + (w * x.data).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def data_write_inside(C, rec):
    def f(x, w):
        w.data.mul_(2)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    rec("grads", [x.grad, w.grad])


@scenario
def requires_grad_on_intermediate_detached(C, rec):
    def f(x):
        h = (x * 2).detach().requires_grad_()
        return (h * h).sum(), h

    x = leaf(3)
    s, h = C(f)(x)
    rec("h", h)
    s.backward()
    rec("grads", [x.grad, h.grad])


@scenario
def requires_grad_on_non_requires_input(C, rec):
    def f(x):
        x.requires_grad_()
        return (x * x).sum()

    x = leaf(3, rg=False)
    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("grad", x.grad)


@scenario
def stop_gradient_straight_through(C, rec):
    def f(x):
        return (x + (x.round() - x).detach()).pow(2).sum()

    x = leaf(4)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def inference_mode_region_output_returned(C, rec):
    def f(x):
        with torch.inference_mode():
            c = x * 2
        return x * 3, c

    x = leaf(3)
    a, c = C(f)(x)
    rec("a", a)
    rec("c", [c, c.is_inference()])


# ============================================================================================
# integer / bool outputs, views of inputs
@scenario
def int_bool_outputs_grad_raises(C, rec):
    def f(x):
        return (x > 0), x.argmax(), x.long()

    x = leaf(3)
    b, i, l = C(f)(x)
    rec("outs", [b, i, l])
    b.sum().backward()


@scenario
def int_output_autograd_grad_raises(C, rec):
    def f(x):
        return x * 2, x.argsort()

    x = leaf(3)
    _a, i = C(f)(x)
    torch.autograd.grad(i.sum(), x)


@scenario
def view_output_modified_then_backward(C, rec):
    def f(x):
        return x.exp()[1:]

    x = leaf(4)
    out = C(f)(x)
    out.mul_(2)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def view_of_nonleaf_input_output(C, rec):
    def f(h):
        return h[0], h.t()

    x = leaf(2, 3)
    h = x * 2
    a, b = C(f)(h)
    rec("bases", [a._base is h, b._base is h])
    (a.sum() + (b * b).sum()).backward()
    rec("grad", x.grad)


@scenario
def view_output_inplace_leaf_raises(C, rec):
    def f(x):
        return x[:2]

    x = leaf(4)
    v = C(f)(x)
    v.add_(1)


@scenario
def unsqueeze_output_of_input(C, rec):
    def f(x, w):
        return x.unsqueeze(0), (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    u, s = C(f)(x, w)
    rec("u", [u, u._base is x])
    (u.sum() * 2 + s).backward()
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# in-place inside the compiled function
@scenario
def inplace_nonleaf_input_grad_through(C, rec):
    def f(h, w):
        h.mul_(w)
        return h.sum()

    x, w = leaf(3), leaf(3, seed=1)
    h = x.exp()
    s = C(f)(h, w)
    rec("h", h)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_nonleaf_input_then_user_uses(C, rec):
    def f(h):
        h.sin_()
        return h * 2

    x = leaf(3)
    h = x * 1
    out = C(f)(h)
    (out.sum() + h.sum()).backward()
    rec("grad", x.grad)


@scenario
def inplace_leaf_under_no_grad_inside(C, rec):
    def f(x, w):
        with torch.no_grad():
            w.add_(1)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_intermediate_view_grad(C, rec):
    def f(x):
        h = x.exp()
        h[1:].mul_(3)
        return h.sum()

    x = leaf(4)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def inplace_input_no_grad_with_grad_value(C, rec):
    def f(buf, w):
        buf.copy_(w * 2)
        return buf.sum()

    buf, w = torch.zeros(3), leaf(3, seed=1)
    out = C(f)(buf, w)
    rec("buf", buf)
    out.backward()
    rec("grads", [w.grad])


@scenario
def inplace_mul_on_nonleaf_saved_by_user_raises(C, rec):
    def f(h):
        h.mul_(2)
        return h

    x = leaf(3)
    h = x.exp()
    y = h * h
    C(f)(h)
    y.sum().backward()


# ============================================================================================
# checkpoint
@scenario
def checkpoint_reentrant_inside(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        return torch.utils.checkpoint.checkpoint(lambda h: lin(h).relu(), x, use_reentrant=True)

    x = leaf(4, 3)
    C(f)(x).sum().backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def checkpoint_reentrant_no_input_grad(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        return torch.utils.checkpoint.checkpoint(lambda h: lin(h).relu(), x, use_reentrant=True)

    x = leaf(4, 3, rg=False)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [lin.weight.grad, lin.bias.grad])


@scenario
def checkpoint_nonreentrant_double_backward(C, rec):
    def block(h):
        return h.sin() * h

    def f(x):
        return torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def checkpoint_module_around_compiled(C, rec):
    m = _mlp()
    cm = C(m)
    x = leaf(5, 3)
    out = torch.utils.checkpoint.checkpoint(cm, x, use_reentrant=False)
    out.sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def checkpoint_reentrant_around_compiled(C, rec):
    m = _mlp()
    cm = C(m)
    x = leaf(5, 3)
    out = torch.utils.checkpoint.checkpoint(cm, x, use_reentrant=True)
    out.sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


# ============================================================================================
# torch.func / autograd.functional around a compiled function
@scenario
def func_grad_around(C, rec):
    def f(x):
        return (x.sin() * x).sum()

    x = leaf(3, rg=False)
    rec("g", torch.func.grad(C(f))(x))


@scenario
def func_vjp_around(C, rec):
    def f(x, w):
        return x @ w

    x, w = leaf(2, 3, rg=False), leaf(3, 4, seed=1, rg=False)
    out, vjp = torch.func.vjp(C(f), x, w)
    rec("out", out)
    rec("vjp", list(vjp(torch.ones(2, 4))))


@scenario
def func_jvp_around(C, rec):
    def f(x):
        return x.exp() * x

    x = leaf(3, rg=False)
    out, t = torch.func.jvp(C(f), (x,), (torch.ones(3),))
    rec("out", [out, t])


@scenario
def func_vmap_around(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(4, 3, rg=False)
    rec("out", torch.func.vmap(C(f))(x))


@scenario
def func_vmap_grad_around(C, rec):
    def f(x):
        return (x.tanh() * x).sum()

    x = leaf(4, 3, rg=False)
    rec("out", torch.func.vmap(torch.func.grad(C(f)))(x))


@scenario
def func_jacrev_around(C, rec):
    def f(x):
        return x.sin() * x.sum()

    x = leaf(3, rg=False)
    rec("jac", torch.func.jacrev(C(f))(x))


@scenario
def functional_jacobian(C, rec):
    def f(x, w):
        return (x @ w).tanh()

    x, w = leaf(2, 3, rg=False), leaf(3, 2, seed=1, rg=False)
    rec("jac", list(torch.autograd.functional.jacobian(C(f), (x, w))))


@scenario
def functional_hessian(C, rec):
    def f(x):
        return (x.sin() * x.pow(2)).sum()

    x = leaf(3, rg=False)
    rec("hess", torch.autograd.functional.hessian(C(f), x))


@scenario
def functional_vjp_jvp(C, rec):
    def f(x):
        return x.exp() * 2

    x = leaf(3, rg=False)
    rec("vjp", list(torch.autograd.functional.vjp(C(f), x, torch.ones(3))))
    rec("jvp", list(torch.autograd.functional.jvp(C(f), x, torch.ones(3))))


@scenario
def functional_hvp(C, rec):
    def f(x):
        return (x.pow(3)).sum()

    x = leaf(3, rg=False)
    rec("hvp", list(torch.autograd.functional.hvp(C(f), x, torch.ones(3))))


@scenario
def functional_jacobian_vectorize(C, rec):
    def f(x):
        return x.sin() * 3

    x = leaf(3, rg=False)
    rec("jac", torch.autograd.functional.jacobian(C(f), x, vectorize=True))


@scenario
def forward_ad_dual(C, rec):
    import torch.autograd.forward_ad as fwAD

    def f(x, w):
        return (x * w).sin()

    x, w = leaf(3, rg=False), leaf(3, seed=1, rg=False)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.ones(3))
        out = C(f)(d, w)
        p, t = fwAD.unpack_dual(out)
    rec("out", [p, t])


@scenario
def forward_ad_dual_module(C, rec):
    import torch.autograd.forward_ad as fwAD

    m = _mlp()
    x = leaf(2, 3, rg=False)
    with fwAD.dual_level():
        out = C(m)(fwAD.make_dual(x, torch.ones(2, 3)))
        p, t = fwAD.unpack_dual(out)
    rec("out", [p, t])


@scenario
def forward_ad_with_backward(C, rec):
    import torch.autograd.forward_ad as fwAD

    def f(x):
        return x.exp()

    x = leaf(3)
    with fwAD.dual_level():
        out = C(f)(fwAD.make_dual(x, torch.ones(3)))
        p, t = fwAD.unpack_dual(out)
        (p.sum() + t.sum()).backward()
    rec("out", [p, t])
    rec("grad", x.grad)


# ============================================================================================
# custom autograd.Function
class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class SaveInter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        e = x.exp()
        ctx.save_for_backward(e)
        return e * x

    @staticmethod
    def backward(ctx, g):
        (e,) = ctx.saved_tensors
        return g * e * 3


class SaveOutF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class Mul3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


class NoneFor2nd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        return x * w.sum()

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


class MatFalse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        out = torch.zeros(())
        if ga is not None:
            out = out + ga * 2
        if gb is not None:
            out = out + gb * 3
        return out


class NonDiff2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y, i = x.sort()
        ctx.mark_non_differentiable(i)
        ctx.save_for_backward(i)
        return y, i

    @staticmethod
    def backward(ctx, gy, gi):
        (i,) = ctx.saved_tensors
        return torch.zeros_like(gy).scatter(0, i, gy)


class OnceD(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.pow(3)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


@scenario
def fn_mark_dirty(C, rec):
    def f(x):
        h = x * 1
        return Dirty.apply(h).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def fn_save_intermediate(C, rec):
    def f(x):
        return SaveInter.apply(x).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def fn_save_output(C, rec):
    def f(x):
        return SaveOutF.apply(x * 2).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def fn_needs_input_grad_const(C, rec):
    def f(x, w):
        return Mul3.apply(x, w).sum()

    x, w = leaf(3), leaf(3, seed=1, rg=False)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def fn_returns_none_grad(C, rec):
    def f(x, w):
        return NoneFor2nd.apply(x, w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def fn_set_materialize_grads_false(C, rec):
    def f(x):
        a, _b = MatFalse.apply(x)
        return a

    x = leaf(3)
    C(f)(x).sum().backward()
    rec("grad", x.grad)


@scenario
def fn_mark_non_diff_sort(C, rec):
    def f(x):
        y, i = NonDiff2.apply(x)
        return (y * torch.arange(3.0)).sum(), i

    x = leaf(3)
    s, i = C(f)(x)
    rec("i", i)
    s.backward()
    rec("grad", x.grad)


@scenario
def fn_double_backward_save_input(C, rec):
    def f(x, w):
        return Mul3.apply(x.sin(), w).pow(2).sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    g = torch.autograd.grad(out, [x, w], create_graph=True)
    rec("g", list(g))
    (g[0].sum() + g[1].sum()).backward()
    rec("gg", [x.grad, w.grad])


@scenario
def fn_double_backward_saved_output(C, rec):
    def f(x):
        return SaveOutF.apply(x * 2).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn_double_backward_saved_intermediate(C, rec):
    def f(x):
        return SaveInter.apply(x).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn_double_backward_hvp(C, rec):
    def f(x, w):
        return Mul3.apply(x, w).sum() * Mul3.apply(x, x).sum()

    x, w = leaf(3), leaf(3, seed=1)
    (g,) = torch.autograd.grad(C(f)(x, w), x, create_graph=True)
    rec("g", g)
    rec("hv", list(torch.autograd.grad(g, [x, w], torch.ones(3))))


@scenario
def fn_once_diff_create_graph_saved_only(C, rec):
    def f(x):
        return OnceD.apply(x.sin()).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn_once_diff_incoming_raises(C, rec):
    def f(x):
        return OnceD.apply(x.sin()).pow(2).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()


@scenario
def fn_in_module_double_backward_penalty(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)

    def f(x):
        return SaveOutF.apply(lin(x)).sum()

    x = leaf(4, 3)
    out = C(f)(x)
    (gx,) = torch.autograd.grad(out, x, create_graph=True)
    gx.pow(2).sum().backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def fn_called_twice_same_graph(C, rec):
    def f(x):
        return SaveInter.apply(x).sum() + SaveInter.apply(x * 2).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def fn_under_no_grad_inside(C, rec):
    def f(x):
        with torch.no_grad():
            a = SaveInter.apply(x)
        return a, (x * 2).sum()

    x = leaf(3)
    a, s = C(f)(x)
    rec("a", a)
    s.backward()
    rec("grad", x.grad)


@scenario
def fn_apply_on_non_requires(C, rec):
    def f(x, y):
        return SaveInter.apply(y) + x

    x, y = leaf(3), leaf(3, seed=1, rg=False)
    out = C(f)(x, y)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, y.grad])


# ============================================================================================
# AMP, GradScaler, clipping, accumulation
@scenario
def gradscaler_cpu_step(C, rec):
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    cm = C(m)
    for k in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = cm(leaf(5, 3, seed=k, rg=False)).float().square().mean()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        rec(f"g{k}", [p.grad for p in m.parameters()])
        scaler.step(opt)
        scaler.update()
    rec("scale", scaler.get_scale())
    rec("params", list(m.parameters()))


@scenario
def gradscaler_inf_skips_step(C, rec):
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    cm = C(m)
    x = leaf(5, 3, rg=False)
    x[0, 0] = float("inf")
    loss = cm(x).square().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    rec("scale", scaler.get_scale())
    rec("params", list(m.parameters()))


@scenario
def gradscaler_compiled_unscale_check(C, rec):
    grads = [leaf(3, rg=False), leaf(2, 2, seed=1, rg=False)]
    grads[1][0, 1] = float("nan")
    found = torch.zeros(1)
    inv = torch.full((1,), 0.25)

    def f(gs, found, inv):
        torch._amp_foreach_non_finite_check_and_unscale_(gs, found, inv)

    C(f)(grads, found, inv)
    rec("grads", grads)
    rec("found", found)


@scenario
def clip_grad_norm_foreach(C, rec):
    m = _mlp()
    C(m)(leaf(5, 3, rg=False)).square().sum().backward()
    n = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5, foreach=True)
    rec("norm", n)
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def clip_grad_norm_compiled(C, rec):
    m = _mlp()
    m(leaf(5, 3, rg=False)).square().sum().backward()

    def clip(ps):
        return torch.nn.utils.clip_grad_norm_(ps, 0.5, foreach=True)

    n = C(clip)(list(m.parameters()))
    rec("norm", n)
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def clip_grad_value_compiled(C, rec):
    m = _mlp()
    m(leaf(5, 3, rg=False)).square().sum().backward()

    def clip(ps):
        torch.nn.utils.clip_grad_value_(ps, 0.05)

    C(clip)(list(m.parameters()))
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def grad_accumulation_steps(C, rec):
    m = _mlp()
    opt = torch.optim.AdamW(m.parameters(), lr=0.01)
    cm = C(m)
    for step in range(2):
        for micro in range(3):
            loss = cm(leaf(2, 3, seed=10 * step + micro, rg=False)).square().mean() / 3
            loss.backward()
        rec(f"g{step}", [p.grad for p in m.parameters()])
        opt.step()
        opt.zero_grad(set_to_none=False)
    rec("params", list(m.parameters()))


@scenario
def zero_grad_false_then_partial_use(C, rec):
    m = _mlp()
    cm = C(m)
    cm(leaf(5, 3, rg=False)).sum().backward()
    m.zero_grad(set_to_none=False)
    m[2].weight.requires_grad_(False)
    cm(leaf(5, 3, seed=1, rg=False)).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def autocast_fp16_cpu_grads_dtype(C, rec):
    m = _mlp()

    def f(x):
        with torch.autocast("cpu", dtype=torch.float16):
            return m(x)

    x = leaf(5, 3)
    out = C(f)(x)
    rec("out", out)
    out.float().sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def bf16_params_grads_dtype(C, rec):
    m = _mlp().to(torch.bfloat16)
    x = leaf(5, 3, dtype=torch.bfloat16)
    C(m)(x).float().sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def compiled_optimizer_step_after_backward(C, rec):
    m = _mlp()
    opt = torch.optim.Adam(m.parameters(), lr=0.01, foreach=True)
    cm = C(m)

    @C
    def step():
        opt.step()

    for k in range(2):
        cm(leaf(5, 3, seed=k, rg=False)).square().sum().backward()
        step()
        opt.zero_grad()
    rec("params", list(m.parameters()))


# ============================================================================================
# misc
@scenario
def grad_dtype_float64_input_fp32_compute(C, rec):
    def f(x):
        return x.float().sin().sum()

    x = leaf(3, dtype=torch.float64)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def grad_dtype_half_output_to_float(C, rec):
    def f(x):
        return (x.half() * 3).float().sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def grad_none_for_param_in_no_grad_branch(C, rec):
    lin1, lin2 = nn.Linear(3, 3), nn.Linear(3, 1)

    def f(x):
        with torch.no_grad():
            h = lin1(x)
        return lin2(h).sum()

    x = leaf(4, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, lin1.weight.grad, lin2.weight.grad])


@scenario
def grad_through_multiple_graph_breaks(C, rec):
    def f(x, w):
        h = x * w
        torch._dynamo.graph_break()
        h = h.sin()
        torch._dynamo.graph_break()
        return (h * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    (g,) = torch.autograd.grad(out, w, create_graph=True)
    g.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def grad_zero_size_param(C, rec):
    def f(x, e):
        return x.sum() + (e * 2).sum()

    x, e = leaf(3), leaf(0, seed=1)
    C(f)(x, e).backward()
    rec("grads", [x.grad, e.grad])


@scenario
def grad_scalar_leaf(C, rec):
    def f(x, s):
        return (x * s).sum()

    x, s = leaf(3), torch.tensor(2.0, requires_grad=True)
    C(f)(x, s).backward()
    rec("grads", [x.grad, s.grad])


@scenario
def grad_noncontiguous_leaf(C, rec):
    def f(x):
        return (x * x).sum()

    base0 = leaf(4, 3, rg=False)
    x = base0.t().contiguous().t().requires_grad_()
    C(f)(x).backward()
    rec("grad", x.grad)
    rec("strides", list(x.grad.stride()))


@scenario
def grad_strides_channels_last(C, rec):
    conv = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    x = leaf(2, 3, 6, 6).to(memory_format=torch.channels_last).detach().requires_grad_()
    C(conv)(x).sum().backward()
    rec("grads", [x.grad, conv.weight.grad])
    rec("strides", [list(x.grad.stride()), list(conv.weight.grad.stride())])


@scenario
def grad_expanded_leaf(C, rec):
    def f(x):
        return (x * torch.arange(12.0).view(3, 4)).sum()

    x = leaf(4, rg=False).expand(3, 4).requires_grad_()
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def grad_complex_param_real_loss(C, rec):
    def f(z, x):
        return (torch.view_as_real(z * x.to(torch.complex64))).pow(2).sum()

    z = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    x = leaf(3, seed=1)
    C(f)(z, x).backward()
    rec("grads", [z.grad, x.grad])


@scenario
def grad_set_to_wrong_shape_raises(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(3)
    x.grad = torch.ones(4)


@scenario
def grad_preexisting_noncontig_accumulates(C, rec):
    def f(x):
        return (x * 2).sum()

    x = leaf(2, 3)
    x.grad = torch.ones(3, 2).t()
    g0 = x.grad
    C(f)(x).backward()
    rec("grad", x.grad)
    rec("same", x.grad is g0)


@scenario
def backward_create_graph_accumulates_grad_fn(C, rec):
    def f(x):
        return x.pow(3).sum()

    x = leaf(3)
    cf = C(f)
    cf(x).backward(create_graph=True)
    rec("grad", [x.grad, x.grad.requires_grad])
    cf(x).backward(create_graph=True)
    rec("grad2", [x.grad, x.grad.requires_grad])


@scenario
def saved_tensors_hooks_outside(C, rec):
    packed = []

    def f(x):
        return (x.exp() * x).sum()

    x = leaf(3)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (packed.append(1), t)[1], lambda t: t):
        out = C(f)(x)
    out.backward()
    rec("grad", x.grad)


@scenario
def save_on_cpu_outside(C, rec):
    def f(x):
        return (x.exp() * x).sum()

    x = leaf(3)
    with torch.autograd.graph.save_on_cpu():
        out = C(f)(x)
    out.backward()
    rec("grad", x.grad)


@scenario
def grad_of_leaf_modified_by_optimizer_between(C, rec):
    def f(x, w):
        return (x * w).exp().sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    with torch.no_grad():
        w.add_(1)
    out.backward()


@scenario
def anomaly_nan_in_backward(C, rec):
    def f(x):
        return (x.sqrt()).sum()

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with torch.autograd.set_detect_anomaly(True):
        C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def grad_of_graph_input_used_as_output_only(C, rec):
    def f(x, y):
        return x, y * 2

    x, y = leaf(3), leaf(3, seed=1)
    a, _b = C(f)(x, y)
    (a * 3).sum().backward()
    rec("grads", [x.grad, y.grad])


@scenario
def nested_compiled_calls_backward(C, rec):
    inner = C(lambda t: t.sin() * 2)

    def f(x, w):
        return inner(x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def module_eval_grads(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Linear(4, 1))
    m.eval()
    x = leaf(5, 3)
    C(m)(x).sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def leaf_used_as_input_and_closure(C, rec):
    w = leaf(3, seed=1)

    def f(x):
        return (x * w).sum()

    C(f)(w).backward()
    rec("grad", w.grad)


# ============================================================================================
# more custom Functions: grad mode inside the backward, setup_context, helpers
class NoGradInBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            scale = x.abs() + 1
        return g * 2 * x * scale


class SetupCtx(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x.sin() * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * x.cos() * w, g * x.sin()


def _helper_grad(g, x):
    return g * x.exp()


class Helper(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _helper_grad(g, x)


class Ste(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


class KwScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k=2.0, flag=True):
        ctx.save_for_backward(x)
        ctx.k, ctx.flag = k, flag
        return x * k if flag else x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g * ctx.k if ctx.flag else g) * x.sign().abs(), None, None


class AmpFn(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w.t(), x.t() @ g


@scenario
def fn2_no_grad_in_backward_first_order(C, rec):
    def f(x):
        return NoGradInBwd.apply(x.sin()).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def fn2_no_grad_in_backward_double(C, rec):
    def f(x):
        return NoGradInBwd.apply(x.sin()).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn2_setup_context_double(C, rec):
    def f(x, w):
        return SetupCtx.apply(x, w).pow(2).sum()

    x, w = leaf(3), leaf(3, seed=1)
    gx, gw = torch.autograd.grad(C(f)(x, w), [x, w], create_graph=True)
    rec("g", [gx, gw])
    (gx.sum() + gw.pow(2).sum()).backward()
    rec("gg", [x.grad, w.grad])


@scenario
def fn2_helper_in_backward_double(C, rec):
    def f(x):
        return Helper.apply(x * 2).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn2_ste_double(C, rec):
    def f(x):
        return Ste.apply(x * 3).pow(2).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def fn2_kwargs(C, rec):
    def f(x):
        return KwScale.apply(x, 3.0, False).sum() + KwScale.apply(x, 4.0).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def fn2_custom_fwd_autocast(C, rec):
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return AmpFn.apply(x, w)

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def fn2_backward_hvp_retain(C, rec):
    def f(x):
        return SaveOutF.apply(x).sum()

    x = leaf(3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    (h1,) = torch.autograd.grad(g.sum(), x, retain_graph=True)
    (h2,) = torch.autograd.grad(g.sum(), x)
    rec("h", [h1, h2])


# ============================================================================================
# more higher-order / batched
@scenario
def agrad_batched_create_graph(C, rec):
    def f(x):
        return x.pow(3)

    x = leaf(3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, torch.eye(3), is_grads_batched=True, create_graph=True)
    rec("g", g)
    g.sum().backward()
    rec("gg", x.grad)


@scenario
def agrad_batched_two_outputs_one_none(C, rec):
    def f(x, w):
        return x * w, w.exp()

    x, w = leaf(3), leaf(3, seed=1)
    a, _b = C(f)(x, w)
    gs = torch.autograd.grad([a], [x, w], [torch.randn(4, 3)], is_grads_batched=True)
    rec("g", list(gs))


@scenario
def functional_hessian_vectorize(C, rec):
    def f(x):
        return (x.sin() * x.pow(2)).sum()

    x = leaf(3, rg=False)
    rec("hess", torch.autograd.functional.hessian(C(f), x, vectorize=True))


@scenario
def functional_jacobian_create_graph(C, rec):
    def f(x):
        return x.tanh() * 2

    x = leaf(3)
    jac = torch.autograd.functional.jacobian(C(f), x, create_graph=True)
    rec("jac", jac)
    jac.sum().backward()
    rec("grad", x.grad)


@scenario
def functional_jacobian_forward_mode(C, rec):
    def f(x):
        return x.sin() * 3

    x = leaf(3, rg=False)
    rec(
        "jac",
        torch.autograd.functional.jacobian(C(f), x, vectorize=True, strategy="forward-mode"),
    )


@scenario
def func_hessian_around(C, rec):
    def f(x):
        return (x.exp() * x).sum()

    x = leaf(3, rg=False)
    rec("hess", torch.func.hessian(C(f))(x))


@scenario
def func_jacfwd_around(C, rec):
    def f(x):
        return x.cos() * x

    x = leaf(3, rg=False)
    rec("jac", torch.func.jacfwd(C(f))(x))


@scenario
def func_grad_of_module_params(C, rec):
    m = _mlp()
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = leaf(4, 3, rg=False)

    def loss(p, x):
        return torch.func.functional_call(m, p, (x,)).square().sum()

    g = torch.func.grad(C(loss))(params, x)
    rec("g", [g[k] for k in sorted(g)])


@scenario
def vmap_over_compiled_module(C, rec):
    m = _mlp()
    x = leaf(5, 2, 3, rg=False)
    rec("out", torch.func.vmap(C(m))(x))


@scenario
def create_graph_two_steps_zero_grad(C, rec):
    m = _mlp()
    cm = C(m)
    for k in range(2):
        x = leaf(4, 3, seed=k)
        out = cm(x).sum()
        (gx,) = torch.autograd.grad(out, x, create_graph=True)
        (out + gx.pow(2).sum()).backward()
        rec(f"g{k}", [p.grad for p in m.parameters()])
        m.zero_grad()


# ============================================================================================
# more hooks, accumulation and errors
@scenario
def hook_changes_dtype_raises(C, rec):
    def f(x):
        return (x * 2).sum()

    x = leaf(3)
    x.register_hook(lambda g: g.double())
    C(f)(x).backward()


@scenario
def hook_changes_shape_raises(C, rec):
    def f(x):
        return (x * 2).sum()

    x = leaf(3)
    x.register_hook(lambda g: g[:2])
    C(f)(x).backward()


@scenario
def hook_on_output_changes_dtype_raises(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    out = C(f)(x)
    out.register_hook(lambda g: g.double())
    out.sum().backward()


@scenario
def module_hook_on_inner_layer_compiled(C, rec):
    m = _mlp()
    seen = []

    def hook(mod, gi, go):
        seen.append([*gi, *go])
        return (gi[0] * 0.5,)

    m[1].register_full_backward_hook(hook)
    x = leaf(4, 3)
    C(m)(x).sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])
    rec("seen", seen)


@scenario
def autograd_backward_inputs_kw(C, rec):
    def f(x, w):
        return (x * w).sum(), (x - w).pow(2).sum()

    x, w = leaf(3), leaf(3, seed=1)
    a, b = C(f)(x, w)
    torch.autograd.backward([a, b], [torch.tensor(1.0), torch.tensor(3.0)], inputs=[w])
    rec("grads", [x.grad, w.grad])


@scenario
def backward_inputs_not_in_graph_raises(C, rec):
    def f(x):
        return (x * 2).sum()

    x, y = leaf(3), leaf(3, seed=1)
    out = C(f)(x)
    out.backward(inputs=[y])
    rec("grads", [x.grad, y.grad])


@scenario
def clip_grad_norm_nonfinite_raises(C, rec):
    m = _mlp()
    C(m)(leaf(5, 3, rg=False)).sum().backward()
    m[0].weight.grad[0, 0] = float("inf")
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)


@scenario
def gradscaler_unscale_twice_raises(C, rec):
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(C(m)(leaf(5, 3, rg=False)).sum()).backward()
    scaler.unscale_(opt)
    rec("grads", [p.grad for p in m.parameters()])
    scaler.unscale_(opt)


@scenario
def gradscaler_fp16_autocast_cpu(C, rec):
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    cm = C(m)
    for k in range(2):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = cm(leaf(4, 3, seed=k, rg=False)).float().sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    rec("scale", scaler.get_scale())


@scenario
def mixed_dtype_params_grads(C, rec):
    torch.manual_seed(0)
    a = nn.Linear(3, 4).to(torch.float64)
    b = nn.Linear(4, 2)

    def f(x):
        return b(a(x).float()).sum()

    x = leaf(5, 3, dtype=torch.float64)
    C(f)(x).backward()
    rec("grads", [x.grad, a.weight.grad, b.weight.grad])


@scenario
def output_is_param_view(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        return lin(x), lin.weight.t()

    x = leaf(4, 3)
    out, wt = C(f)(x)
    rec("wt", wt)
    (out.sum() + (wt * 2).sum()).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def param_passed_as_argument_too(C, rec):
    lin = nn.Linear(3, 3)

    def f(x, w):
        return (lin(x) * w).sum()

    x = leaf(2, 3)
    C(f)(x, lin.bias).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def grad_accumulates_into_create_graph_grad(C, rec):
    def f(x):
        return x.pow(2).sum()

    x = leaf(3)
    cf = C(f)
    cf(x).backward(create_graph=True)
    g1 = x.grad
    cf(x).backward()
    rec("grad", [x.grad, x.grad is g1])


@scenario
def autograd_grad_after_freed_raises(C, rec):
    def f(x):
        return (x.exp() * x).sum()

    x = leaf(3)
    out = C(f)(x)
    torch.autograd.grad(out, x)
    torch.autograd.grad(out, x)


@scenario
def register_hook_no_grad_tensor_raises(C, rec):
    def f(x):
        return x * 2

    out = C(f)(leaf(3, rg=False))
    out.register_hook(lambda g: g)


@scenario
def grad_of_sum_of_two_compiled_calls_shared_input(C, rec):
    m = _mlp()
    cm = C(m)
    x = leaf(3, 3)
    (cm(x).sum() + cm(x * 2).pow(2).sum()).backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def requires_grad_false_param_inside_toggle(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        return lin(x).sum()

    cf = C(f)
    x = leaf(4, 3)
    cf(x).backward()
    rec("g1", [x.grad, lin.weight.grad, lin.bias.grad])
    lin.bias.requires_grad_(False)
    lin.bias.grad = None
    x.grad = None
    lin.weight.grad = None
    cf(x).backward()
    rec("g2", [x.grad, lin.weight.grad, lin.bias.grad])
    lin.bias.requires_grad_(True)
    cf(x).backward()
    rec("g3", [x.grad, lin.weight.grad, lin.bias.grad])


def main(argv) -> int:
    return run(argv, SCENARIOS, base.compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
