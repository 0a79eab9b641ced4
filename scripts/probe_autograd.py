"""Probe training/autograd semantics for silent wrong answers: many small user-style scenarios,
each run once with plain eager functions and once with ``torch.compile(backend="xla")``, every
observation compared strictly (tensor values, dtype, shape, requires_grad, grad_fn presence,
is_leaf; .grad None-ness and values; errors raised, by type and first line).

    PYTHONPATH=. python scripts/probe_autograd.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_autograd.py   # torch's own differences

A scenario is ``fn(C, rec)``: ``C(f)`` is ``f`` itself in the eager run and the compiled ``f``
in the other; ``rec(label, value)`` records what is compared. An error stops the scenario and is
recorded as its last observation. Prints one line per scenario: ``ok`` or ``DIFF`` (with the
first difference) or ``CRASH`` (the probe itself failed).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import observations, run

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")  # aot_eager: is a difference torch's own?
SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def leaf(*shape, seed=0, dtype=torch.float32, rg=True):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    return t.requires_grad_(rg)


def cleaf(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.complex64).requires_grad_()


def describe(v):
    """A comparable summary of one observation."""
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            v.requires_grad,
            v.grad_fn is None,
            v.is_leaf,
            v.detach().clone(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v).__name__, str(v).strip().split("\n")[0][:120])
    return ("V", v)


def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} vs {b[0]}  ({a[1:3]} vs {b[1:3]})"
    if a[0] == "T":
        names = ("dtype", "shape", "requires_grad", "grad_fn is None", "is_leaf")
        for n, x, y in zip(names, a[1:6], b[1:6]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[6], b[6]
        if x.is_floating_point() or x.is_complex():
            tol = {"rtol": 1e-4, "atol": 1e-5}
            if x.dtype in (torch.bfloat16, torch.float16):
                tol = {"rtol": 2e-2, "atol": 2e-2}
            if not torch.allclose(x, y, equal_nan=True, **tol):
                return f"{path}: values differ, max {(x - y).abs().max().item():.3g}\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values {x} vs {y}"
        return None
    if a[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":
        if a[1] != b[1]:
            return f"{path}: error {a[1]}: {a[2]} (xla) vs {b[1]}: {b[2]} (eager)"
        return None
    if a[1] != b[1]:
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


def observe(fn, compiled: bool):
    def C(f):
        if not compiled:
            return f
        return torch.compile(f, backend=BACKEND)

    return observations(fn, C, describe)


def compare(name, fn) -> str:
    got = observe(fn, True)
    exp = observe(fn, False)
    labels_g = [label for label, _ in got]
    labels_e = [label for label, _ in exp]
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g} / {e}"
        d = same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {labels_g} (xla) vs {labels_e} (eager)"
    return f"ok    {name}"


# ============================================================================================
# outputs' autograd metadata
@scenario
def out_meta_mixed(C, rec):
    def f(x, w):
        h = x @ w
        return h, h.argmax(-1), h > 0, h.detach(), h.sum().item(), h.to(torch.int64), h.shape

    x, w = leaf(3, 4), leaf(4, 2, seed=1)
    outs = C(f)(x, w)
    rec("outs", [o for o in outs if not isinstance(o, (float, torch.Size))])
    rec("shape", list(outs[6]))


@scenario
def out_is_input(C, rec):
    def f(x, y):
        return x, y * 2, x.view(-1), x[1:], x.t()

    x, y = leaf(3, 2), leaf(3, seed=1)
    outs = C(f)(x, y)
    rec("outs", list(outs))
    rec("identity", outs[0] is x)
    sum(o.sum() for o in outs).backward()
    rec("grads", [x.grad, y.grad])


@scenario
def out_input_no_grad(C, rec):
    def f(x, y):
        return x, x.view(2, 3), y + 1

    x, y = leaf(6, rg=False), leaf(6, seed=1)
    outs = C(f)(x, y)
    rec("outs", list(outs))
    rec("base", outs[1]._base is x)


@scenario
def out_view_of_intermediate(C, rec):
    def f(x):
        h = x * 2
        return h, h[0], h.view(-1)

    x = leaf(2, 3)
    outs = C(f)(x)
    rec("outs", list(outs))
    rec("views", [outs[1]._base is outs[0], outs[2]._base is outs[0]])
    (outs[1].sum() * 3 + outs[2].sum()).backward()
    rec("grad", x.grad)


@scenario
def out_inputs_no_requires_grad(C, rec):
    def f(x, y):
        return x * y, (x * y).sum()

    outs = C(f)(leaf(3, rg=False), leaf(3, seed=1, rg=False))
    rec("outs", list(outs))


@scenario
def out_int_input_passthrough(C, rec):
    def f(i, x):
        return i + 1, x[i], i

    i = torch.tensor([0, 2])
    x = leaf(3, 2)
    outs = C(f)(i, x)
    rec("outs", list(outs))
    outs[1].sum().backward()
    rec("grad", x.grad)


@scenario
def unused_outputs_in_loss(C, rec):
    def f(x, w1, w2):
        return x * w1, x * w2, (x * w1).sum()

    x, w1, w2 = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    a, _, c = C(f)(x, w1, w2)
    a.sum().backward()
    rec("grads", [x.grad, w1.grad, w2.grad])
    c.backward()
    rec("grads2", [x.grad, w1.grad, w2.grad])


@scenario
def output_only_other_used(C, rec):
    def f(x, w):
        return (x * w).sum(), w * 3

    x, w = leaf(3), leaf(3, seed=1)
    _, b = C(f)(x, w)
    b.sum().backward()
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# .grad None / zeros
@scenario
def grad_none_unused_input(C, rec):
    def f(x, y, z):
        return x * 2 + 0 * y

    x, y, z = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    C(f)(x, y, z).sum().backward()
    rec("grads", [x.grad, y.grad, z.grad])


@scenario
def grad_zero_ops(C, rec):
    def f(x, y, z, w):
        return x.floor() + y.sign() + (z > 0).float() * 0 + w.round() + x.ceil() * y.trunc()

    xs = [leaf(4, seed=i) for i in range(4)]
    C(f)(*xs).sum().backward()
    rec("grads", [t.grad for t in xs])


@scenario
def grad_through_int_cast(C, rec):
    def f(x, w):
        return x.long().float() * w + x.argmax().float()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def grad_autograd_grad_allow_unused(C, rec):
    def f(x, y, z):
        return (x * y).sum(), z.detach().sum()

    x, y, z = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    a, b = C(f)(x, y, z)
    rec("b", b)
    rec("g", list(torch.autograd.grad(a, [x, y, z], allow_unused=True)))
    a2, _ = C(f)(x, y, z)
    g = torch.autograd.grad(a2, [x, y, z], allow_unused=True, materialize_grads=True)
    rec("g_mat", list(g))


@scenario
def grad_autograd_grad_unused_raises(C, rec):
    def f(x, y):
        return (x * 2).sum()

    x, y = leaf(3), leaf(3, seed=1)
    a = C(f)(x, y)
    torch.autograd.grad(a, [x, y])


@scenario
def grad_autograd_grad_of_non_requires(C, rec):
    def f(x, y):
        return (x * y.detach()).sum(), y.detach() * 2

    x, y = leaf(3), leaf(3, seed=1)
    _, b = C(f)(x, y)
    rec("b", b)
    torch.autograd.grad(b.sum(), [x])


@scenario
def backward_of_non_requires_raises(C, rec):
    def f(x):
        return x.detach() * 2

    out = C(f)(leaf(3))
    rec("out", out)
    out.sum().backward()


@scenario
def grad_of_empty(C, rec):
    def f(x, e):
        return x.sum() + e.sum()

    x, e = leaf(3), leaf(0, 4, seed=1)
    C(f)(x, e).backward()
    rec("grads", [x.grad, e.grad])


@scenario
def grad_one_input_twice(C, rec):
    def f(x, y):
        return x * y

    x = leaf(3)
    C(f)(x, x).sum().backward()
    rec("grad", x.grad)


@scenario
def grad_same_view_inputs(C, rec):
    def f(a, b):
        return (a * b).sum()

    x = leaf(4)
    y = x * 1
    C(f)(y[:2], y[2:]).backward()
    rec("grad", x.grad)


# ============================================================================================
# accumulation, retain_graph, zero_grad
@scenario
def accumulate_two_calls(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    for i in range(2):
        cm(leaf(4, 3, seed=i, rg=False)).square().sum().backward()
        rec(f"g{i}", [m.weight.grad, m.bias.grad])


@scenario
def retain_graph_twice(C, rec):
    def f(x, w):
        return (x * w).sin().sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    out.backward(retain_graph=True)
    rec("g1", [x.grad.clone(), w.grad.clone()])
    out.backward()
    rec("g2", [x.grad, w.grad])
    out.backward()


@scenario
def zero_grad_modes(C, rec):
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    cm = C(m)
    x = leaf(5, 3, rg=False)
    cm(x).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    rec("zeros", [p.grad for p in m.parameters()])
    cm(x).sum().backward()
    rec("after", [p.grad for p in m.parameters()])
    opt.step()
    opt.zero_grad(set_to_none=True)
    rec("none", [p.grad for p in m.parameters()])
    cm(x).sum().backward()
    rec("after2", [p.grad for p in m.parameters()])
    rec("params", list(m.parameters()))


@scenario
def grad_pre_existing(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(3)
    x.grad = torch.ones(3)
    g0 = x.grad
    C(f)(x).backward()
    rec("grad", x.grad)
    rec("same_obj", x.grad is g0)


@scenario
def backward_with_explicit_grad(C, rec):
    def f(x):
        return x * 2, x.exp()

    x = leaf(3)
    a, b = C(f)(x)
    torch.autograd.backward([a, b], [torch.ones(3), torch.full((3,), 2.0)])
    rec("grad", x.grad)


@scenario
def backward_non_scalar_raises(C, rec):
    def f(x):
        return x * 2

    C(f)(leaf(3)).backward()


@scenario
def backward_inputs_arg(C, rec):
    def f(x, y):
        return (x * y).sum()

    x, y = leaf(3), leaf(3, seed=1)
    C(f)(x, y).backward(inputs=[y])
    rec("grads", [x.grad, y.grad])


# ============================================================================================
# higher order
@scenario
def double_backward(C, rec):
    def f(x, w):
        return (x.sin() * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    (gx,) = torch.autograd.grad(out, [x], create_graph=True)
    rec("gx", gx)
    gx.square().sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def double_backward_no_create_graph(C, rec):
    def f(x):
        return x.pow(3).sum()

    x = leaf(3)
    (gx,) = torch.autograd.grad(C(f)(x), [x])
    rec("gx", gx)
    gx.sum().backward()


@scenario
def hessian_vector(C, rec):
    def f(x):
        return (x.tanh() * x).sum()

    x = leaf(4)
    cf = C(f)
    (g,) = torch.autograd.grad(cf(x), x, create_graph=True)
    (hv,) = torch.autograd.grad(g, x, grad_outputs=torch.ones(4))
    rec("hv", hv)


@scenario
def create_graph_backward(C, rec):
    def f(x):
        return (x**3).sum()

    x = leaf(3)
    C(f)(x).backward(create_graph=True)
    rec("grad", x.grad)
    g = x.grad
    x.grad = None
    g.sum().backward()
    rec("grad2", x.grad)


@scenario
def create_graph_relu_second(C, rec):
    def f(x, w):
        return F.relu(x @ w).sum()

    x, w = leaf(3, 4), leaf(4, 2, seed=1)
    (gw,) = torch.autograd.grad(C(f)(x, w), [w], create_graph=True)
    rec("gw", gw)
    gg = torch.autograd.grad(gw.sum(), [x, w], allow_unused=True)
    rec("gg", list(gg))


# ============================================================================================
# hooks
@scenario
def hook_on_input(C, rec):
    def f(x):
        return (x * 3).sum()

    x = leaf(3)
    seen = []
    x.register_hook(lambda g: seen.append(g.clone()) or g * 2)
    C(f)(x).backward()
    rec("grad", x.grad)
    rec("seen", seen)


@scenario
def hook_on_output(C, rec):
    def f(x):
        return x * 3

    x = leaf(3)
    out = C(f)(x)
    out.register_hook(lambda g: g + 1)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def hook_on_intermediate_inside(C, rec):
    seen = []

    def f(x, w):
        h = x * w
        h.register_hook(lambda g: seen.append(g.clone()))
        return h.exp().sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])
    rec("seen", seen)


@scenario
def hook_on_input_inside(C, rec):
    def f(x):
        x.register_hook(lambda g: g * 10)
        return (x * x).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def post_accumulate_hook(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(3)
    seen = []
    x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    C(f)(x).backward()
    C(f)(x).backward()
    rec("seen", seen)


@scenario
def module_full_backward_hook(C, rec):
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    seen = []

    def hook(mod, gin, gout):
        seen.append((list(gin), list(gout)))
        return (gin[0] * 2,)

    m[2].register_full_backward_hook(hook)
    x = leaf(5, 3)
    C(m)(x).sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])
    rec("nseen", len(seen))
    for i, (gi, go) in enumerate(seen):
        rec(f"seen{i}", gi + go)


@scenario
def module_full_backward_pre_hook(C, rec):
    m = nn.Linear(3, 2)
    m.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * 3,))
    x = leaf(4, 3)
    C(m)(x).sum().backward()
    rec("grads", [x.grad, m.weight.grad, m.bias.grad])


@scenario
def module_forward_hooks(C, rec):
    m = nn.Linear(3, 2)
    m.register_forward_hook(lambda mod, inp, out: out * 2)
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1,))
    x = leaf(4, 3)
    out = C(m)(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, m.weight.grad, m.bias.grad])


@scenario
def retain_grad_intermediate(C, rec):
    hs = []

    def f(x):
        h = x * 2
        h.retain_grad()
        hs.append(h)
        return h.sin().sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)
    rec("h.grad", hs[0].grad)


@scenario
def retain_grad_output(C, rec):
    def f(x):
        return x * 2, x.exp()

    x = leaf(3)
    a, b = C(f)(x)
    a.retain_grad()
    (a.sum() + b.sum()).backward()
    rec("a.grad", a.grad)
    rec("b.grad_is_none", b.grad is None)


@scenario
def returned_intermediate_grad_warning(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    out = C(f)(x)
    out.sum().backward()
    rec("is_leaf", out.is_leaf)
    rec("out.grad", out.grad)


# ============================================================================================
# stop points inside
@scenario
def detach_inside(C, rec):
    def f(x, w):
        h = x * w
        return h.detach() * w + h

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def no_grad_inside_return(C, rec):
    def f(x):
        with torch.no_grad():
            y = x * 2
        return y, x * 3

    x = leaf(3)
    outs = C(f)(x)
    rec("outs", list(outs))


@scenario
def inference_mode_inside(C, rec):
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y, x * 3

    x = leaf(3)
    outs = C(f)(x)
    rec("outs", list(outs))
    rec("inference", [o.is_inference() for o in outs])


@scenario
def enable_grad_in_no_grad(C, rec):
    def f(x):
        with torch.enable_grad():
            y = x * 2
        return y, x * 3

    x = leaf(3)
    with torch.no_grad():
        outs = C(f)(x)
    rec("outs", list(outs))
    outs[0].sum().backward()
    rec("grad", x.grad)


@scenario
def called_under_no_grad(C, rec):
    def f(x, w):
        return x @ w

    x, w = leaf(2, 3), leaf(3, 2, seed=1)
    cf = C(f)
    with torch.no_grad():
        a = cf(x, w)
    b = cf(x, w)
    rec("outs", [a, b])
    b.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def called_under_inference_mode(C, rec):
    def f(x, w):
        return x @ w

    x, w = leaf(2, 3), leaf(3, 2, seed=1)
    cf = C(f)
    with torch.inference_mode():
        a = cf(x, w)
    rec("a", a)
    rec("inf", a.is_inference())
    b = cf(x, w)
    rec("b", b)


@scenario
def requires_grad_toggle_inside(C, rec):
    def f(x, y):
        y.requires_grad_()
        return x * y

    x, y = leaf(3), leaf(3, seed=1, rg=False)
    out = C(f)(x, y)
    rec("out", out)
    rec("y.rg", y.requires_grad)
    out.sum().backward()
    rec("grads", [x.grad, y.grad])


@scenario
def requires_grad_new_tensor_inside(C, rec):
    def f(x):
        z = torch.zeros(3).requires_grad_()
        return x * z, z

    x = leaf(3)
    out, z = C(f)(x)
    rec("outs", [out, z])
    out.sum().backward()
    rec("grads", [x.grad, z.grad])


@scenario
def requires_grad_off_inside(C, rec):
    def f(x, y):
        y.requires_grad_(False)
        return x * y

    x, y = leaf(3), leaf(3, seed=1)
    out = C(f)(x, y)
    rec("out", out)
    rec("y.rg", y.requires_grad)


@scenario
def set_grad_enabled_false_fn(C, rec):
    @torch.no_grad()
    def f(x):
        return x * 2

    x = leaf(3)
    rec("out", C(f)(x))


# ============================================================================================
# in-place
@scenario
def inplace_on_leaf_raises(C, rec):
    def f(x):
        x.add_(1)
        return x

    C(f)(leaf(3))


@scenario
def inplace_on_leaf_view_raises(C, rec):
    def f(x):
        x[0] = 1.0
        return x * 2

    C(f)(leaf(3))


@scenario
def inplace_leaf_view_no_grad(C, rec):
    def f(x, w):
        with torch.no_grad():
            x[1:].mul_(2)
            x.t()[0].zero_()
        return (x * w).sum()

    x, w = leaf(3, 2), leaf(3, 2, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    rec("x", x)
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_saved_intermediate_raises(C, rec):
    def f(x):
        h = x.sin()
        y = h.exp()
        h.mul_(2)
        return y.sum() + h.sum()

    out = C(f)(leaf(3))
    rec("out", out)
    out.backward()


@scenario
def inplace_saved_output_raises(C, rec):
    def f(x):
        y = x.exp()
        y.add_(1)
        return y

    x = leaf(3)
    out = C(f)(x)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def inplace_saved_sigmoid(C, rec):
    def f(x):
        y = torch.sigmoid(x)
        y.mul_(2)
        return y.sum()

    C(f)(leaf(3)).backward()


@scenario
def inplace_saved_input_by_user_after(C, rec):
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1, rg=False)
    out = C(f)(x, w)
    w.add_(1)
    out.backward()


@scenario
def inplace_output_by_user_after(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    out = C(f)(x)
    out.mul_(2)
    out.sum().backward()


@scenario
def inplace_output_by_user_after_ok(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    out = C(f)(x)
    out.mul_(3)
    out.sum().backward()
    rec("grad", x.grad)
    rec("out", out)


@scenario
def inplace_intermediate_ok(C, rec):
    def f(x, w):
        h = x * w
        h.add_(1)
        h.mul_(w)
        h[0] = 0
        return h.relu_()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_view_of_intermediate(C, rec):
    def f(x, v):
        h = x.clone()
        h[1:].mul_(v)
        h.t()[0].add_(1)
        return h

    x, v = leaf(3, 3), leaf(3, seed=1)
    out = C(f)(x, v)
    rec("out", out)
    out.square().sum().backward()
    rec("grads", [x.grad, v.grad])


@scenario
def masked_assign(C, rec):
    def f(x, v):
        y = x * 1
        y[y > 0] = v
        return y

    x, v = leaf(6), leaf(1, seed=1)
    out = C(f)(x, v[0])
    rec("out", out)
    out.square().sum().backward()
    rec("grads", [x.grad, v.grad])


@scenario
def masked_assign_tensor(C, rec):
    def f(x, v, m):
        y = x.clone()
        y[m] = v
        return y

    x, v = leaf(6), leaf(3, seed=1)
    m = torch.tensor([True, False, True, False, True, False])
    out = C(f)(x, v, m)
    rec("out", out)
    (out * torch.arange(6.0)).sum().backward()
    rec("grads", [x.grad, v.grad])


@scenario
def index_put_accumulate(C, rec):
    def f(x, v, i):
        y = torch.zeros(5).index_put((i,), v, accumulate=True)
        return y * x

    x, v = leaf(5), leaf(4, seed=1)
    i = torch.tensor([0, 2, 2, 4])
    out = C(f)(x, v, i)
    rec("out", out)
    out.square().sum().backward()
    rec("grads", [x.grad, v.grad])


@scenario
def setitem_on_zeros(C, rec):
    def f(v):
        out = torch.zeros(3, 4)
        out[:, 1] = v
        out[0] = v.sum()
        return out

    v = leaf(3)
    out = C(f)(v)
    rec("out", out)
    (out * torch.arange(12.0).view(3, 4)).sum().backward()
    rec("grad", v.grad)


@scenario
def copy_into_non_requires(C, rec):
    def f(x, buf):
        buf.copy_(x * 2)
        return buf.sum()

    x, buf = leaf(3), torch.zeros(3)
    out = C(f)(x, buf)
    rec("out", out)
    rec("buf", buf)
    out.backward()
    rec("grad", x.grad)


@scenario
def write_input_buffer_then_use(C, rec):
    def f(x, buf):
        buf.add_(x)
        return buf * x

    x, buf = leaf(3), torch.ones(3)
    out = C(f)(x, buf)
    rec("out", out)
    rec("buf", buf)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def inplace_on_input_non_leaf(C, rec):
    def f(h):
        h.mul_(2)
        return h.sum()

    x = leaf(3)
    h = x * 1
    out = C(f)(h)
    rec("h", h)
    out.backward()
    rec("grad", x.grad)


@scenario
def inplace_on_input_view_non_leaf(C, rec):
    def f(v, w):
        v.mul_(w)
        return v

    x, w = leaf(4), leaf(2, seed=1)
    h = x * 1
    out = C(f)(h[1:3], w)
    rec("h", h)
    rec("out", out)
    h.square().sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_input_nonleaf_then_saved(C, rec):
    def f(h):
        y = h * h
        h.add_(1)
        return y

    x = leaf(3)
    h = x.exp()
    out = C(f)(h)
    out.sum().backward()


@scenario
def out_param_of_inputs(C, rec):
    def f(x, o):
        torch.sin(x, out=o)
        return o

    x, o = leaf(3), torch.empty(3)
    out = C(f)(x, o)
    rec("out", out)


# ============================================================================================
# custom Function, checkpoint
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x  # deliberately not 2x: must be used


class TwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k: float):
        ctx.k = k
        return x * k, (x > 0)

    @staticmethod
    def backward(ctx, g, _):
        return g * ctx.k + 1, None


class NonDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x * 2
        z = x.sum()
        ctx.mark_non_differentiable(z)
        return y, z

    @staticmethod
    def backward(ctx, gy, gz):
        return gy * 5


class OnceDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp()


class NoneGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, g):
        return g, None


class MatIn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x * 2

    @staticmethod
    def backward(ctx, ga, gb):
        return (ga if ga is not None else 0) + (gb * 2 if gb is not None else 100)


@scenario
def custom_function(C, rec):
    def f(x):
        return Square.apply(x.sin()).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def custom_function_two_outputs(C, rec):
    def f(x):
        a, b = TwoOut.apply(x, 3.0)
        return a, b

    x = leaf(3)
    a, b = C(f)(x)
    rec("outs", [a, b])
    a.sum().backward()
    rec("grad", x.grad)


@scenario
def custom_function_non_diff(C, rec):
    def f(x):
        return NonDiff.apply(x)

    x = leaf(3)
    y, z = C(f)(x)
    rec("outs", [y, z])
    y.sum().backward()
    rec("grad", x.grad)


@scenario
def custom_function_once_diff(C, rec):
    def f(x):
        return OnceDiff.apply(x).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()


@scenario
def custom_function_none_grad(C, rec):
    def f(x, y):
        return NoneGrad.apply(x, y).sum()

    x, y = leaf(3), leaf(3, seed=1)
    C(f)(x, y).backward()
    rec("grads", [x.grad, y.grad])


@scenario
def custom_function_unmaterialized(C, rec):
    def f(x):
        a, _ = MatIn.apply(x)
        return a

    x = leaf(3)
    C(f)(x).sum().backward()
    rec("grad", x.grad)


@scenario
def checkpoint_inside(C, rec):
    lin = nn.Linear(3, 3)

    def block(h):
        return lin(h).tanh()

    def f(x):
        h = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        return h.sum()

    x = leaf(4, 3)
    C(f)(x).backward()
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def checkpoint_with_dropout(C, rec):
    def block(h):
        return F.dropout(h, 0.5, training=True) * 2

    def f(x):
        return torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)

    x = leaf(64)
    out = C(f)(x)
    out.sum().backward()
    # same mask in forward and recompute: grad is 4 where out != 0, else 0
    rec("consistent", bool(((x.grad != 0) == (out != 0)).all()))


@scenario
def checkpoint_no_grad_inputs(C, rec):
    w = leaf(3, seed=2)

    def block(h):
        return h * w

    def f(x):
        return torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False).sum()

    x = leaf(3, rg=False)
    C(f)(x).backward()
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# parameters, modules
@scenario
def partially_frozen(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    m[0].bias.requires_grad_(False)
    m[1].weight.requires_grad_(False)
    x = leaf(5, 3, rg=False)
    out = C(m)(x)
    rec("out", out)
    out.square().sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def all_frozen(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2).requires_grad_(False)
    x = leaf(5, 3)
    out = C(m)(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def frozen_toggle_between_calls(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    cm = C(m)
    x = leaf(5, 3, rg=False)
    cm(x).sum().backward()
    rec("g1", [p.grad for p in m.parameters()])
    m.zero_grad()
    m.weight.requires_grad_(False)
    out = cm(x)
    rec("out", out)
    out.sum().backward()
    rec("g2", [p.grad for p in m.parameters()])
    m.bias.requires_grad_(False)
    out = cm(x)
    rec("out3", out)


@scenario
def input_requires_grad_toggles_between_calls(C, rec):
    def f(x, y):
        return (x * y).sum()

    cf = C(f)
    x, y = leaf(3), leaf(3, seed=1, rg=False)
    cf(x, y).backward()
    rec("g1", [x.grad, y.grad])
    x2, y2 = leaf(3, rg=False), leaf(3, seed=1)
    cf(x2, y2).backward()
    rec("g2", [x2.grad, y2.grad])


@scenario
def batchnorm_train_grads(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU())
    x = leaf(6, 3)
    out = C(m)(x)
    out.square().sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])
    rec("bufs", list(m.buffers()))


@scenario
def tied_weights(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(5, 3)
    head = nn.Linear(3, 5, bias=False)
    head.weight = emb.weight

    def f(i):
        return head(emb(i)).sum()

    C(f)(torch.tensor([1, 2, 2])).backward()
    rec("grad", emb.weight.grad)


@scenario
def embedding_padding_idx(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(5, 3, padding_idx=0)

    def f(i):
        return emb(i).square().sum()

    C(f)(torch.tensor([0, 2, 2, 0])).backward()
    rec("grad", emb.weight.grad)


@scenario
def sparse_embedding(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(5, 3, sparse=True)

    def f(i):
        return emb(i).sum()

    C(f)(torch.tensor([1, 2])).backward()
    rec("layout", str(emb.weight.grad.layout))
    rec("grad", emb.weight.grad.to_dense())


# ============================================================================================
# dtypes
@scenario
def autocast_bf16_cpu(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = m(x)
            return h, h.float().softmax(-1)

    x = leaf(2, 4)
    h, s = C(f)(x)
    rec("outs", [h, s])
    (h.float().sum() + s[:, 0].sum()).backward()
    rec("grads", [x.grad, m.weight.grad, m.bias.grad])


@scenario
def autocast_outside(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    x = leaf(2, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = C(m)(x)
    rec("out", out)
    out.float().sum().backward()
    rec("grads", [x.grad, m.weight.grad, m.bias.grad])


@scenario
def mixed_dtype_inputs(C, rec):
    def f(x, y):
        return x * y.to(x.dtype), (x.double() * y).sum()

    x, y = leaf(3, dtype=torch.bfloat16), leaf(3, seed=1, dtype=torch.float64)
    a, b = C(f)(x, y)
    rec("outs", [a, b])
    (a.float().sum() + b).backward()
    rec("grads", [x.grad, y.grad])


@scenario
def half_leaf(C, rec):
    def f(x, w):
        return (x @ w).float().sum()

    x, w = leaf(2, 3, dtype=torch.float16), leaf(3, 2, seed=1, dtype=torch.bfloat16)
    C(lambda a, b: f(a, b.half()))(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def complex_grad(C, rec):
    def f(z, w):
        return (z * w.conj()).abs().sum() + (z.real * w.imag).sum()

    z, w = cleaf(3), cleaf(3, seed=1)
    C(f)(z, w).backward()
    rec("grads", [z.grad, w.grad])


@scenario
def complex_from_real(C, rec):
    def f(x, y):
        z = torch.complex(x, y)
        return (z * z).abs().sum(), torch.view_as_real(z * 1j)

    x, y = leaf(3), leaf(3, seed=1)
    a, b = C(f)(x, y)
    rec("outs", [a, b])
    (a + b.sum()).backward()
    rec("grads", [x.grad, y.grad])


@scenario
def complex_output_backward(C, rec):
    def f(z):
        return z * 2j

    z = cleaf(3)
    out = C(f)(z)
    rec("out", out)
    out.backward(torch.ones(3, dtype=torch.complex64))
    rec("grad", z.grad)


@scenario
def complex_loss_raises(C, rec):
    def f(z):
        return (z * z).sum()

    C(f)(cleaf(3)).backward()


@scenario
def float64_params(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2).double()
    x = leaf(4, 3, dtype=torch.float64)
    C(m)(x).sum().backward()
    rec("grads", [x.grad, m.weight.grad])


@scenario
def int_leaf_requires_grad_raises(C, rec):
    def f(x):
        return x * 2

    x = torch.arange(3.0).requires_grad_()
    out = C(f)(x.long())
    rec("out", out)


# ============================================================================================
# graph breaks, mixing
@scenario
def graph_break_mid(C, rec):
    def f(x, w):
        h = (x * w).sin()
        torch._dynamo.graph_break()
        return (h * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def graph_break_with_item(C, rec):
    def f(x, w):
        s = (x * w).sum()
        if s.item() > 0:
            return s * w
        return s * x

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def backward_inside_compiled(C, rec):
    def f(x, w):
        loss = (x * w).square().sum()
        loss.backward()
        return loss.detach(), w.grad.clone()

    x, w = leaf(3), leaf(3, seed=1)
    outs = C(f)(x, w)
    rec("outs", list(outs))
    rec("grads", [x.grad, w.grad])


@scenario
def autograd_grad_inside_compiled(C, rec):
    def f(x):
        y = (x**3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        return g

    x = leaf(3)
    g = C(f)(x)
    rec("g", g)
    g.sum().backward()
    rec("grad", x.grad)


@scenario
def grad_attr_read_inside(C, rec):
    def f(x):
        return x * (x.grad if x.grad is not None else 0)

    x = leaf(3)
    x.grad = torch.full((3,), 2.0)
    out = C(f)(x)
    rec("out", out)


@scenario
def compiled_twice_same_graph(C, rec):
    def f(x):
        return x.sin() * 2

    cf = C(f)
    x = leaf(3)
    a = cf(x)
    b = cf(x)
    (a.sum() + b.sum()).backward()
    rec("grad", x.grad)


@scenario
def dropout_grad_matches_mask(C, rec):
    def f(x):
        return F.dropout(x, 0.5, training=True)

    x = leaf(200)
    out = C(f)(x)
    out.sum().backward()
    rec("consistent", bool(((x.grad != 0) == (out != 0)).all()))
    rec("scale", bool((x.grad[x.grad != 0] == 2).all()))


@scenario
def where_nan_grad(C, rec):
    def f(x):
        return torch.where(x > 0, x.sqrt(), torch.zeros_like(x))

    x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
    C(f)(x).sum().backward()
    rec("grad", x.grad)


@scenario
def norm_at_zero(C, rec):
    def f(x):
        return x.norm() + torch.linalg.vector_norm(x, 2)

    x = torch.zeros(3, requires_grad=True)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def max_ties_grad(C, rec):
    def f(x):
        return x.max() + x.amax() + x.max(0).values.sum()

    x = torch.tensor([1.0, 3.0, 3.0], requires_grad=True)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def abs_at_zero(C, rec):
    def f(x):
        return x.abs().sum() + x.clamp(0, 1).sum() + F.relu(x).sum() + F.hardtanh(x).sum()

    x = torch.tensor([0.0, 1.0, -1.0], requires_grad=True)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def grad_of_output_view_backward(C, rec):
    def f(x):
        return x.exp().view(2, 3)

    x = leaf(6)
    out = C(f)(x)
    out[0].sum().backward()
    rec("grad", x.grad)


@scenario
def saved_tensor_hooks(C, rec):
    packed = []

    def pack(t):
        packed.append(1)
        return t

    def f(x):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t * 2):
            return (x * x).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def anomaly_mode(C, rec):
    def f(x):
        return (x.sqrt() * 0).sum()

    x = torch.tensor([-1.0, 1.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def grad_outputs_through_unused_dtype_out(C, rec):
    def f(x):
        return x.sum().to(torch.float64), x.mean().half()

    x = leaf(4)
    a, b = C(f)(x)
    rec("outs", [a, b])
    (a + b).backward()
    rec("grad", x.grad)


@scenario
def param_as_output(C, rec):
    m = nn.Linear(2, 2)

    def f(x):
        return m(x), m.weight

    x = leaf(3, 2)
    out, w = C(f)(x)
    rec("outs", [out, w])
    rec("is_param", [w is m.weight, type(w).__name__])


@scenario
def output_aliases_two_returns(C, rec):
    def f(x):
        y = x * 2
        return y, y

    x = leaf(3)
    a, b = C(f)(x)
    rec("alias", a is b)
    a.mul_(2)
    rec("b", b)
    (b.sum()).backward()
    rec("grad", x.grad)


@scenario
def backward_twice_no_retain(C, rec):
    def f(x):
        return (x.exp() * x).sum()

    x = leaf(3)
    out = C(f)(x)
    out.backward()
    out.backward()


@scenario
def backward_twice_no_saved(C, rec):
    def f(x):
        return (x * 2).sum()

    x = leaf(3)
    out = C(f)(x)
    out.backward()
    out.backward()
    rec("grad", x.grad)


def main(argv) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
