"""More autograd scenarios against eager (session 20), run as ``scripts/probe_autograd.py``:

    PYTHONPATH=. python scripts/probe_autograd4.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_autograd4.py   # torch's own

Observations as ``probe_autograd.py``'s, plus the strides of gradients and the message of an
error (eager's first line must start ours): which saved tensors each output's backward
checks for in-place changes, version counters of written inputs, backward twice and
``retain_graph``, ``torch.autograd.grad``'s arguments and errors, ``inputs=``, accumulation
into an existing ``.grad``, hooks, ``retain_grad``, ``requires_grad_``, ``detach``/``detach_``,
untracked outputs in a backward, grad-mode regions, checkpoints, in-place ops on leaf views,
double backward of common losses.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd as base
from _probe_common import observations, run
from probe_autograd import leaf

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, BaseException):
        return ("E", type(v).__name__, str(v).strip().split("\n")[0][:200])
    if isinstance(v, torch.Size):
        return ("V", tuple(v))
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    return base.describe(v)


def same(a, b, path="") -> str | None:
    if a[0] == "E" and b[0] == "E":
        if a[1] != b[1]:
            return f"{path}: error {a[1]}: {a[2]} (xla) vs {b[1]}: {b[2]} (eager)"
        if b[2][:50] not in a[2]:
            return f"{path}: MSG {a[2]!r} (xla) vs {b[2]!r} (eager)"
        return None
    if a[0] == "L" and b[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return base.same(a, b, path)


def compare(name, fn) -> str:
    def C(f):
        return torch.compile(f, backend=base.BACKEND)

    got = observations(fn, C, describe)
    exp = observations(fn, lambda f: f, describe)
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
        d = same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return f"ok    {name}"


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


# ============================================================================================
# saved tensors changed in place after the call: checked per output, as eager's nodes do
@scenario
def saved_other_output_changed_backward_first(C, rec):
    def f(x):
        return x.tanh(), x.sigmoid()

    x = leaf(4)
    a, b = C(f)(x)
    b.add_(1)
    a.sum().backward()
    rec("grad", x.grad)
    b.sum().backward()


@scenario
def saved_input_of_other_output_changed(C, rec):
    def f(x, w):
        return x.exp(), (x * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    a, s = C(f)(x, w)
    with torch.no_grad():
        w.add_(1)
    a.sum().backward()
    rec("grad", [x.grad, w.grad])
    s.backward()


@scenario
def saved_input_changed_autograd_grad_other_output(C, rec):
    def f(x, w, v):
        return (x * w).sum(), (x * 3 + v).sum()

    x, w, v = leaf(4), leaf(4, seed=1), leaf(4, seed=2)
    a, b = C(f)(x, w, v)
    with torch.no_grad():
        w.mul_(2)
    rec("g", list(torch.autograd.grad(b, [x, v])))
    torch.autograd.grad(a, [x])


@scenario
def saved_views_of_one_hidden_intermediate(C, rec):
    def f(x):
        h = x.exp()
        return h[:2], h[2:]

    x = leaf(4)
    a, b = C(f)(x)
    a.mul_(2)
    b.sum().backward()


@scenario
def saved_view_output_of_unsaved_changed(C, rec):
    def f(x, w):
        h = x * 2
        return h[:2], (h.exp() * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    a, s = C(f)(x, w)
    a.mul_(2)
    s.backward()
    rec("grad", [x.grad, w.grad])


@scenario
def saved_output_changed_between_retained_backwards(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    y = C(f)(x)
    y.sum().backward(retain_graph=True)
    rec("g1", x.grad.clone())
    y.add_(1)
    y.sum().backward()


@scenario
def saved_input_written_inside_then_by_user(C, rec):
    def f(x, w):
        x.mul_(2)
        return (x * w).sum()

    x, w = leaf(3, rg=False), leaf(3, seed=1)
    s = C(f)(x, w)
    rec("x", x)
    x.add_(1)
    s.backward()
    rec("grad", w.grad)


@scenario
def saved_input_written_inside_no_user_change(C, rec):
    def f(x, w):
        x.mul_(2)
        return (x * w).sum()

    x, w = leaf(3, rg=False), leaf(3, seed=1)
    s = C(f)(x, w)
    s.backward()
    rec("grad", w.grad)
    rec("x", x)


@scenario
def saved_param_changed_by_optimizer_step(C, rec):
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    out = C(m)(leaf(5, 3, rg=False)).sum()
    opt.zero_grad()
    out.backward(retain_graph=True)
    opt.step()
    out.backward()


@scenario
def saved_input_changed_detach_shares_version(C, rec):
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    s = C(f)(x, w)
    w.detach().add_(1)
    s.backward()


@scenario
def saved_output_detach_write(C, rec):
    def f(x):
        return x.sigmoid()

    x = leaf(3)
    y = C(f)(x)
    y.detach().zero_()
    y.sum().backward()


@scenario
def saved_output_changed_but_unused_by_backward(C, rec):
    def f(x):
        return x.sigmoid(), x * 2

    x = leaf(3)
    a, b = C(f)(x)
    a.zero_()
    b.sum().backward()
    rec("grad", x.grad)


@scenario
def saved_output_changed_then_autograd_grad_of_it(C, rec):
    def f(x):
        return x.sigmoid(), x * 2

    x = leaf(3)
    a, b = C(f)(x)
    a.add_(1)
    torch.autograd.grad(b.sum(), x, retain_graph=True)
    torch.autograd.grad(a.sum(), x)


@scenario
def saved_int_index_changed(C, rec):
    def f(x, i):
        return x[i].sum()

    x, i = leaf(5), torch.tensor([0, 2, 2])
    s = C(f)(x, i)
    i.add_(1)
    s.backward()
    rec("grad", x.grad)


@scenario
def saved_module_input_changed(C, rec):
    lin = nn.Linear(3, 2)
    x = leaf(4, 3, rg=False)
    out = C(lin)(x).sum()
    x.mul_(2)
    out.backward()


# ============================================================================================
# version counters of the inputs
@scenario
def version_written_and_read_inputs(C, rec):
    def f(x, y, z):
        x.add_(1)
        y[0] = 5.0
        return x + y + z

    x, y, z = torch.zeros(3), torch.zeros(3), torch.zeros(3)
    v0 = [t._version for t in (x, y, z)]
    C(f)(x, y, z)
    rec("changed", [t._version > v for t, v in zip((x, y, z), v0)])


@scenario
def version_write_through_view_of_input(C, rec):
    def f(x):
        x[1:].mul_(2)
        return x.sum()

    base_t = torch.ones(5)
    x = base_t[1:]
    v0 = (base_t._version, x._version)
    C(f)(x)
    rec("changed", [base_t._version > v0[0], x._version > v0[1]])
    rec("base", base_t)


@scenario
def version_data_write_inside(C, rec):
    def f(x):
        x.data.add_(1)
        return x * 2

    x = leaf(3)
    v0 = x._version
    out = C(f)(x)
    rec("changed", x._version > v0)
    rec("out", out)


@scenario
def version_out_arg(C, rec):
    def f(x, o):
        torch.sin(x, out=o)
        return o * 2

    x, o = leaf(3, rg=False), torch.empty(3)
    v0 = o._version
    C(f)(x, o)
    rec("changed", o._version > v0)


@scenario
def version_copy_into_input(C, rec):
    def f(x, y):
        y.copy_(x)
        return y.sum()

    x, y = leaf(3, rg=False), torch.zeros(3)
    vx, vy = x._version, y._version
    C(f)(x, y)
    rec("changed", [x._version > vx, y._version > vy])


@scenario
def version_buffer_module(C, rec):
    m = nn.BatchNorm1d(3)
    vs = [b._version for b in m.buffers()]
    C(m)(leaf(4, 3, rg=False))
    rec("changed", [b._version > v for b, v in zip(m.buffers(), vs)])


@scenario
def version_nonleaf_input_written_then_backward(C, rec):
    def f(h):
        h.mul_(3)
        return h.sum()

    x = leaf(3)
    h = x * 2
    v0 = h._version
    s = C(f)(h)
    rec("changed", h._version > v0)
    s.backward()
    rec("grad", x.grad)


# ============================================================================================
# backward twice, retain_graph
@scenario
def twice_autograd_grad_then_backward_raises(C, rec):
    def f(x):
        return (x.exp() * x).sum()

    x = leaf(3)
    s = C(f)(x)
    rec("g", list(torch.autograd.grad(s, x)))
    s.backward()


@scenario
def twice_retain_then_free_then_raise(C, rec):
    def f(x, w):
        return (x * w).tanh().sum()

    x, w = leaf(3), leaf(3, seed=1)
    s = C(f)(x, w)
    s.backward(retain_graph=True)
    s.backward()
    rec("g", [x.grad, w.grad])
    s.backward()


@scenario
def twice_linear_no_saved_runs(C, rec):
    def f(x):
        return (x * 3 + 1).sum()

    x = leaf(3)
    s = C(f)(x)
    s.backward()
    s.backward()
    rec("grad", x.grad)


@scenario
def twice_module_loss_no_retain(C, rec):
    m = _mlp()
    loss = C(m)(leaf(5, 3, rg=False)).pow(2).mean()
    loss.backward()
    rec("g", [p.grad for p in m.parameters()])
    loss.backward()


@scenario
def twice_second_via_outside_op(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    y = C(f)(x)
    (y * 2).sum().backward()
    rec("grad", x.grad.clone())
    (y * 3).sum().backward()


@scenario
def twice_retain_create_graph_accum(C, rec):
    def f(x):
        return x.pow(3).sum()

    x = leaf(3)
    s = C(f)(x)
    s.backward(create_graph=True, retain_graph=True)
    g1 = x.grad.clone()
    s.backward(retain_graph=True)
    rec("g", [g1, x.grad])


# ============================================================================================
# torch.autograd.grad arguments and errors
@scenario
def agrad_materialize_without_allow_unused(C, rec):
    def f(x, y):
        return (x * 2).sum()

    x, y = leaf(3), leaf(3, seed=1)
    s = C(f)(x, y)
    rec("g", list(torch.autograd.grad(s, [x, y], materialize_grads=True)))


@scenario
def agrad_materialize_allow_unused_false_raises(C, rec):
    def f(x, y):
        return (x * 2).sum()

    x, y = leaf(3), leaf(3, seed=1)
    s = C(f)(x, y)
    torch.autograd.grad(s, [x, y], allow_unused=False, materialize_grads=True)


@scenario
def agrad_create_graph_flags(C, rec):
    def f(x, w):
        return (x * w).sum() + x.sum()

    x, w = leaf(3), leaf(3, seed=1)
    s = C(f)(x, w)
    gx, gw = torch.autograd.grad(s, [x, w], create_graph=True)
    rec("g", [gx, gw])
    (gx * gw).sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def agrad_create_graph_linear_grad_no_grad_fn(C, rec):
    def f(x):
        return (x * 3).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.sum().backward()


@scenario
def agrad_grad_outputs_float64(C, rec):
    def f(x):
        return x.sin()

    x = leaf(3)
    out = C(f)(x)
    rec("g", list(torch.autograd.grad(out, x, torch.ones(3, dtype=torch.float64))))


@scenario
def agrad_grad_outputs_complex_raises(C, rec):
    def f(x):
        return x.sin()

    x = leaf(3)
    out = C(f)(x)
    torch.autograd.grad(out, x, torch.ones(3, dtype=torch.complex64))


@scenario
def agrad_grad_outputs_int_raises(C, rec):
    def f(x):
        return x.sin()

    x = leaf(3)
    torch.autograd.grad(C(f)(x), x, torch.ones(3, dtype=torch.int32))


@scenario
def agrad_grad_outputs_broadcastable_raises(C, rec):
    def f(x):
        return x.sin()

    x = leaf(2, 3)
    torch.autograd.grad(C(f)(x), x, torch.ones(3))


@scenario
def agrad_grad_outputs_scalar_for_1elem(C, rec):
    def f(x):
        return x.sin().sum(0, keepdim=True)

    x = leaf(3)
    torch.autograd.grad(C(f)(x), x, torch.tensor(2.0))


@scenario
def agrad_implicit_non_scalar_raises(C, rec):
    def f(x):
        return x.sin()

    x = leaf(3)
    torch.autograd.grad(C(f)(x), x)


@scenario
def agrad_wrt_non_requires_raises(C, rec):
    def f(x, y):
        return (x * y).sum()

    x, y = leaf(3), leaf(3, seed=1, rg=False)
    torch.autograd.grad(C(f)(x, y), [x, y])


@scenario
def agrad_grad_outputs_requires_grad(C, rec):
    def f(x):
        return x.tanh()

    x = leaf(3)
    v = leaf(3, seed=3)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, v, create_graph=True)
    rec("g", g)
    g.pow(2).sum().backward()
    rec("grads", [x.grad, v.grad])


@scenario
def agrad_grad_outputs_none_for_non_scalar_in_list(C, rec):
    def f(x):
        return x.sin(), x.cos().sum()

    x = leaf(3)
    a, b = C(f)(x)
    torch.autograd.grad([a, b], x, [None, None])


@scenario
def agrad_outputs_tuple_mixed_untracked_raises(C, rec):
    def f(x):
        return x.sin().sum(), x.argmax()

    x = leaf(3)
    a, i = C(f)(x)
    torch.autograd.grad([a, i], x)


@scenario
def agrad_only_inputs_grad_mode(C, rec):
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    s = C(f)(x, w)
    (g,) = torch.autograd.grad(s, w)
    rec("g", [g, g.requires_grad, x.grad, w.grad])


# ============================================================================================
# inputs= of backward
@scenario
def inputs_single_tensor(C, rec):
    def f(x, w):
        return (x * w).exp().sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward(inputs=x)
    rec("grads", [x.grad, w.grad])


@scenario
def inputs_empty_raises(C, rec):
    def f(x):
        return (x * 2).sum()

    x = leaf(3)
    C(f)(x).backward(inputs=[])


@scenario
def inputs_module_one_layer_then_other(C, rec):
    m = _mlp()
    out = C(m)(leaf(5, 3, rg=False)).pow(2).sum()
    out.backward(inputs=list(m[0].parameters()), retain_graph=True)
    rec("g1", [p.grad for p in m.parameters()])
    out.backward(inputs=list(m[2].parameters()))
    rec("g2", [p.grad for p in m.parameters()])


@scenario
def inputs_output_of_compiled(C, rec):
    def f(x):
        return x.sin() * 2

    x = leaf(3)
    h = C(f)(x)
    (h.exp()).sum().backward(inputs=[h, x])
    rec("grads", [h.grad, x.grad])


@scenario
def inputs_non_requires_raises(C, rec):
    def f(x):
        return (x * 2).sum()

    x = leaf(3)
    y = leaf(3, rg=False)
    C(f)(x).backward(inputs=[y])


# ============================================================================================
# accumulation into an existing .grad
@scenario
def accum_channels_last_grad(C, rec):
    conv = nn.Conv2d(3, 4, 3)
    conv.weight.grad = torch.ones_like(conv.weight).to(memory_format=torch.channels_last)
    g0 = conv.weight.grad
    C(conv)(leaf(2, 3, 6, 6, rg=False)).sum().backward()
    w = conv.weight.grad
    rec("g", [w, w is g0])
    rec("stride", list(w.stride()))


@scenario
def accum_transposed_grad_param(C, rec):
    lin = nn.Linear(3, 4)
    lin.weight.grad = torch.ones(3, 4).t()
    C(lin)(leaf(5, 3, rg=False)).sum().backward()
    rec("g", lin.weight.grad)
    rec("stride", list(lin.weight.grad.stride()))


@scenario
def accum_first_grad_strides_of_transposed_leaf(C, rec):
    def f(x):
        return (x * x).sum()

    x = torch.randn(4, 3).t().detach().requires_grad_()
    C(f)(x).backward()
    rec("g", x.grad)
    rec("stride", list(x.grad.stride()))


@scenario
def accum_first_grad_strides_of_channels_last_leaf(C, rec):
    def f(x):
        return x.sin().sum()

    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last).requires_grad_()
    C(f)(x).backward()
    rec("stride", list(x.grad.stride()))
    rec("g", x.grad)


@scenario
def accum_first_grad_strides_of_sliced_leaf(C, rec):
    def f(x):
        return (x * 2).sum()

    x = torch.randn(4, 6)[:, ::2].detach().requires_grad_()
    C(f)(x).backward()
    rec("stride", list(x.grad.stride()))


@scenario
def accum_grad_of_other_dtype_raises(C, rec):
    x = leaf(3)
    x.grad = torch.ones(3, dtype=torch.float64)


@scenario
def accum_grad_requires_grad_existing(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(3)
    x.grad = torch.ones(3).requires_grad_()
    C(f)(x).backward()
    rec("g", x.grad)


@scenario
def accum_twice_broadcast_leaf_strides(C, rec):
    def f(x, y):
        return (x * y).sum()

    x = leaf(3, 1)
    y = leaf(3, 4, seed=1)
    cf = C(f)
    cf(x, y).backward()
    cf(x, y).backward()
    rec("g", x.grad)
    rec("stride", list(x.grad.stride()))


@scenario
def accum_grad_in_bf16_leaf(C, rec):
    def f(x, w):
        return (x * w).float().sum()

    x = leaf(3, dtype=torch.bfloat16)
    w = leaf(3, seed=1, dtype=torch.bfloat16)
    x.grad = torch.full((3,), 0.5, dtype=torch.bfloat16)
    C(f)(x, w).backward()
    rec("g", [x.grad, w.grad])


# ============================================================================================
# hooks
@scenario
def hook_on_intermediate_inside_used_twice(C, rec):
    def f(x):
        h = x.sin()
        h.register_hook(lambda g: g * 2)
        return (h * h).sum() + h.sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def hook_on_leaf_registered_inside(C, rec):
    def f(x, w):
        w.register_hook(lambda g: g + 1)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def hook_on_output_and_retain_grad(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    y = C(f)(x)
    y.retain_grad()
    y.register_hook(lambda g: g * 3)
    y.sum().backward()
    rec("grads", [x.grad, y.grad])


@scenario
def hook_on_output_counts_calls(C, rec):
    calls = []

    def f(x):
        return x * 2, x.exp()

    x = leaf(3)
    a, b = C(f)(x)
    a.register_hook(lambda g: calls.append(g.clone()))
    (a.sum() + (a * b).sum()).backward()
    rec("calls", calls)
    rec("grad", x.grad)


@scenario
def hook_on_leaf_and_post_accumulate(C, rec):
    seen = []

    def f(x):
        return (x * x).sum()

    x = leaf(3)
    x.register_hook(lambda g: g * 10)
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
    cf = C(f)
    cf(x).backward()
    cf(x).backward()
    rec("seen", seen)


@scenario
def post_accumulate_on_input_leaf(C, rec):
    def f(x, w):
        return (x @ w).sum()

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    x.register_post_accumulate_grad_hook(lambda t: t.grad.clamp_(-0.5, 0.5))
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def post_accumulate_sets_grad_none(C, rec):
    m = _mlp()
    seen = []

    def hook(p):
        seen.append(p.grad.clone())
        p.grad = None

    for p in m.parameters():
        p.register_post_accumulate_grad_hook(hook)
    C(m)(leaf(5, 3, rg=False)).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])
    rec("seen", seen)


@scenario
def module_full_backward_pre_hook_scales(C, rec):
    m = _mlp()
    m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    x = leaf(4, 3)
    C(m)(x).sum().backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def module_full_backward_hook_compiled_outer(C, rec):
    m = _mlp()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append([*gi, *go]))
    x = leaf(4, 3)
    C(m)(x).pow(2).sum().backward()
    rec("seen", seen)
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


@scenario
def module_full_backward_hook_called_twice_inside(C, rec):
    lin = nn.Linear(3, 3)
    seen = []
    lin.register_full_backward_hook(lambda mod, gi, go: seen.append([*gi, *go]))

    def f(x):
        return lin(lin(x)).sum()

    x = leaf(2, 3)
    C(f)(x).backward()
    rec("seen", seen)
    rec("grads", [x.grad, lin.weight.grad])


# ============================================================================================
# retain_grad, requires_grad_, detach
@scenario
def retain_grad_on_view_output(C, rec):
    def f(x):
        return x.exp().view(2, 2)

    x = leaf(4)
    y = C(f)(x)
    y.retain_grad()
    (y * y).sum().backward()
    rec("grads", [x.grad, y.grad])


@scenario
def retain_grad_intermediate_not_returned_inside(C, rec):
    kept = []

    def f(x):
        h = x * 3
        h.retain_grad()
        kept.append(h)
        return h.exp().sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", [x.grad, kept[-1].grad])


@scenario
def requires_grad_on_output_of_untracked(C, rec):
    def f(x):
        return x * 2

    y = C(f)(leaf(3, rg=False))
    y.requires_grad_()
    (y * y).sum().backward()
    rec("grad", [y.grad, y.is_leaf])


@scenario
def requires_grad_false_on_tracked_output_raises(C, rec):
    def f(x):
        return x * 2

    y = C(f)(leaf(3))
    y.requires_grad_(False)


@scenario
def requires_grad_on_int_output_raises(C, rec):
    def f(x):
        return x.argmax()

    C(f)(leaf(3)).requires_grad_()


@scenario
def detach_inplace_on_output(C, rec):
    def f(x):
        return x.exp() * 2

    x = leaf(3)
    y = C(f)(x)
    y.detach_()
    rec("y", y)
    y.sum().backward()


@scenario
def detach_inplace_on_view_output_raises(C, rec):
    def f(x):
        return x.exp()[1:]

    x = leaf(4)
    y = C(f)(x)
    y.detach_()
    rec("y", y)


@scenario
def detach_inplace_on_view_of_input_raises(C, rec):
    def f(x):
        return x[1:]

    x = leaf(4)
    y = C(f)(x)
    y.detach_()


@scenario
def detach_write_output_shares_storage(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    y = C(f)(x)
    d = y.detach()
    d[0] = 100.0
    rec("y", y)
    y.sum().backward()
    rec("grad", x.grad)


@scenario
def detach_input_write_inside(C, rec):
    def f(x, w):
        x.detach().mul_(2)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()


# ============================================================================================
# untracked outputs (integer, argmax, comparisons) in a backward
@scenario
def untracked_comparison_backward_raises(C, rec):
    def f(x):
        return x > 0

    C(f)(leaf(3)).float().sum().backward()


@scenario
def untracked_argmax_autograd_grad_raises(C, rec):
    def f(x):
        return x.argmax(), x.sum()

    x = leaf(3)
    i, _s = C(f)(x)
    torch.autograd.grad(i.float(), x)


@scenario
def untracked_mask_times_output_backward(C, rec):
    def f(x):
        return x.exp(), x > 0

    x = leaf(4)
    y, m = C(f)(x)
    (y * m).sum().backward()
    rec("grad", x.grad)


@scenario
def untracked_int_index_into_output(C, rec):
    def f(x):
        return x.sin(), x.argsort()

    x = leaf(4)
    y, idx = C(f)(x)
    y[idx[:2]].sum().backward()
    rec("grad", x.grad)


@scenario
def untracked_detached_output_is_leaf(C, rec):
    def f(x):
        return x.detach() * 2, (x * 2).detach()

    x = leaf(3)
    a, b = C(f)(x)
    rec("outs", [a, b, a.is_leaf, b.is_leaf])
    (a + b).sum().backward()


# ============================================================================================
# grad-mode regions inside
@scenario
def gradmode_nested_regions(C, rec):
    def f(x, w):
        with torch.no_grad():
            a = x * w
            with torch.enable_grad():
                b = x * w
                with torch.set_grad_enabled(False):
                    c = b * 2
        return a, b, c, (a + b + c).sum()

    x, w = leaf(3), leaf(3, seed=1)
    a, b, c, s = C(f)(x, w)
    rec("outs", [a, b, c, s])
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def gradmode_is_grad_enabled_branch(C, rec):
    def f(x):
        if torch.is_grad_enabled():
            return x.sin()
        return x.cos()

    x = leaf(3)
    cf = C(f)
    with torch.no_grad():
        rec("a", cf(x))
    y = cf(x)
    rec("b", y)
    y.sum().backward()
    rec("grad", x.grad)


@scenario
def gradmode_no_grad_method_of_module(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        @torch.no_grad()
        def stats(self, x):
            return self.lin(x).mean(0)

        def forward(self, x):
            return (self.lin(x) - self.stats(x)).pow(2).sum()

    torch.manual_seed(0)
    m = M()
    x = leaf(4, 3)
    C(m)(x).backward()
    rec("grads", [x.grad, m.lin.weight.grad, m.lin.bias.grad])


@scenario
def gradmode_set_enabled_function_call_inside(C, rec):
    def f(x):
        torch.set_grad_enabled(False)
        a = x * 2
        torch.set_grad_enabled(True)
        return a, x * 3

    x = leaf(3)
    a, b = C(f)(x)
    rec("outs", [a, b])
    (a + b).sum().backward()
    rec("grad", x.grad)


@scenario
def gradmode_no_grad_inplace_on_leaf_inside(C, rec):
    def f(x, w):
        with torch.no_grad():
            w.mul_(0.5)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# checkpoints inside
def _block(x, w):
    return (x @ w).tanh() @ w.t()


@scenario
def ckpt_nonreentrant_grads(C, rec):
    def f(x, w):
        return checkpoint(_block, x, w, use_reentrant=False).sum()

    x, w = leaf(2, 3), leaf(3, 3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def ckpt_reentrant_grads(C, rec):
    def f(x, w):
        return checkpoint(_block, x, w, use_reentrant=True).sum()

    x, w = leaf(2, 3), leaf(3, 3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def ckpt_reentrant_param_only(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        return checkpoint(lin, x, use_reentrant=True).sum()

    out = C(f)(leaf(2, 3, rg=False))
    rec("out", out)
    out.backward()


@scenario
def ckpt_nonreentrant_param_only(C, rec):
    lin = nn.Linear(3, 3)

    def f(x):
        return checkpoint(lin, x, use_reentrant=False).sum()

    out = C(f)(leaf(2, 3, rg=False))
    rec("out", out)
    out.backward()
    rec("grads", [lin.weight.grad, lin.bias.grad])


@scenario
def ckpt_nonreentrant_twice_backward_raises(C, rec):
    def f(x, w):
        return checkpoint(_block, x, w, use_reentrant=False).sum()

    x, w = leaf(2, 3), leaf(3, 3, seed=1)
    s = C(f)(x, w)
    s.backward()
    s.backward()


@scenario
def ckpt_nonreentrant_autograd_grad(C, rec):
    def f(x, w):
        return checkpoint(_block, x, w, use_reentrant=False).pow(2).sum()

    x, w = leaf(2, 3), leaf(3, 3, seed=1)
    rec("g", list(torch.autograd.grad(C(f)(x, w), [w])))
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# in-place ops on leaves and their views
@scenario
def leaf_view_inplace_inside_raises(C, rec):
    def f(x):
        x[0].mul_(2)
        return x.sum()

    C(f)(leaf(3))


@scenario
def leaf_inplace_inside_raises(C, rec):
    def f(x):
        x.add_(1)
        return x.sum()

    C(f)(leaf(3))


@scenario
def leaf_param_inplace_inside_raises(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        lin.weight.mul_(2)
        return lin(x).sum()

    C(f)(leaf(2, 3, rg=False))


@scenario
def leaf_setitem_inside_raises(C, rec):
    def f(x):
        x[1] = 0.0
        return x.sum()

    C(f)(leaf(3))


@scenario
def leaf_view_inplace_outside_raises(C, rec):
    def f(x):
        return x.view(3, 1)

    v = C(f)(leaf(3))
    v.add_(1)


@scenario
def leaf_view_inplace_no_grad_inside_ok(C, rec):
    def f(x, w):
        with torch.no_grad():
            x[0].fill_(1.0)
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("x", x)
    rec("grads", [x.grad, w.grad])


@scenario
def nonleaf_view_inplace_inside_grad(C, rec):
    def f(x):
        h = x * 1
        h[0].mul_(3)
        h[1:].exp_()
        return h.sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grad", x.grad)


# ============================================================================================
# double backward of common losses
def _penalty(loss_fn, *shapes, seed=0):
    def s(C, rec):
        x = leaf(*shapes[0], seed=seed)
        others = [leaf(*sh, seed=seed + 1 + i) for i, sh in enumerate(shapes[1:])]
        out = C(loss_fn)(x, *others)
        gs = torch.autograd.grad(out, [x, *others], create_graph=True)
        rec("g", list(gs))
        sum(g.pow(2).sum() for g in gs).backward()
        rec("gg", [x.grad] + [o.grad for o in others])

    return s


def _ce(x, w):
    return F.cross_entropy(x @ w, torch.tensor([0, 2, 1, 2]))


def _ce_smooth(x, w):
    return F.cross_entropy(x @ w, torch.tensor([0, 2, 1, 2]), label_smoothing=0.1)


def _ce_soft(x, w):
    return F.cross_entropy(x @ w, (x @ w).detach().softmax(-1))


def _mse(x, w):
    return F.mse_loss(x @ w, torch.ones(4, 3))


def _layer_norm(x, w):
    return F.layer_norm(x @ w, (3,), weight=w[0], bias=w[1]).pow(2).sum()


def _group_norm(x, w):
    return F.group_norm((x @ w).view(2, 2, 3), 2).pow(3).sum()


def _bce_logits(x, w):
    return F.binary_cross_entropy_with_logits(x @ w, torch.ones(4, 3) * 0.3)


def _smooth_l1(x, w):
    return F.smooth_l1_loss(x @ w, torch.zeros(4, 3), beta=0.5)


def _nll_log_softmax(x, w):
    return F.nll_loss((x @ w).log_softmax(-1), torch.tensor([0, 2, 1, 2]))


def _softplus_gelu(x, w):
    return (F.gelu(x @ w) + F.softplus(x @ w) + F.silu(x @ w)).sum()


def _logsumexp(x, w):
    return (x @ w).logsumexp(-1).sum()


def _kl(x, w):
    return F.kl_div((x @ w).log_softmax(-1), (x @ w).softmax(-1).detach(), reduction="batchmean")


def _batch_norm(x, w):
    return F.batch_norm(x @ w, None, None, w[0], w[1], training=True).pow(2).sum()


for _name, _fn in [
    ("cross_entropy", _ce),
    ("cross_entropy_smoothing", _ce_smooth),
    ("cross_entropy_soft_targets", _ce_soft),
    ("mse", _mse),
    ("layer_norm", _layer_norm),
    ("group_norm", _group_norm),
    ("bce_logits", _bce_logits),
    ("smooth_l1", _smooth_l1),
    ("nll_log_softmax", _nll_log_softmax),
    ("gelu_softplus_silu", _softplus_gelu),
    ("logsumexp", _logsumexp),
    ("kl_div", _kl),
    ("batch_norm", _batch_norm),
]:
    SCENARIOS[f"double_{_name}"] = _penalty(_fn, (4, 3), (3, 3))


@scenario
def double_wgan_gp_module(C, rec):
    torch.manual_seed(0)
    d = nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.LayerNorm(8), nn.Linear(8, 1))
    cd = C(d)
    real, fake = leaf(4, 3, rg=False), leaf(4, 3, seed=1, rg=False)
    alpha = torch.rand(4, 1)
    inter = (alpha * real + (1 - alpha) * fake).requires_grad_()
    out = cd(inter)
    (g,) = torch.autograd.grad(out.sum(), inter, create_graph=True)
    gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
    loss = cd(fake).mean() - cd(real).mean() + 10 * gp
    loss.backward()
    rec("grads", [p.grad for p in d.parameters()])


@scenario
def double_r1_penalty_ce(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 5), nn.Softplus(), nn.Linear(5, 3))
    x = leaf(4, 3)
    loss = F.cross_entropy(C(m)(x), torch.tensor([0, 1, 2, 1]))
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    (loss + g.pow(2).sum()).backward()
    rec("grads", [x.grad] + [p.grad for p in m.parameters()])


# ============================================================================================
# more: interleaved graphs of one compiled function, graph breaks, double backward inputs
@scenario
def interleaved_graphs_input_changed_between(C, rec):
    def f(x, w):
        return (x * w).sum()

    cf = C(f)
    x1, x2, w = leaf(3, rg=False), leaf(3, seed=2, rg=False), leaf(3, seed=1)
    a = cf(x1, w)
    b = cf(x2, w)
    x1.add_(1)
    b.backward()
    rec("g", w.grad.clone())
    a.backward()


@scenario
def graph_break_saved_changed(C, rec):
    def f(x, w):
        h = (x * w).exp()
        torch._dynamo.graph_break()
        return h.sigmoid(), (h * 2).sum()

    x, w = leaf(3), leaf(3, seed=1)
    a, s = C(f)(x, w)
    a.add_(1)
    s.backward(retain_graph=True)
    rec("g", [x.grad, w.grad])
    a.sum().backward()


@scenario
def double_backward_input_changed_between(C, rec):
    def f(x):
        return x.pow(3).sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    with torch.no_grad():
        x.mul_(2)
    g.sum().backward()
    rec("grad", x.grad)


@scenario
def double_backward_grad_changed_then_backward(C, rec):
    def f(x):
        return x.sin().sum()

    x = leaf(3)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    g.add_(1)
    g.sum().backward()
    rec("grad", x.grad)


@scenario
def accum_into_expanded_grad(C, rec):
    def f(x):
        return (x * x).sum()

    x = leaf(2, 3)
    x.grad = torch.ones(3).expand(2, 3)
    C(f)(x).backward()
    rec("g", [x.grad, list(x.grad.stride())])


@scenario
def returned_input_written_nonleaf(C, rec):
    def f(h):
        h.mul_(2)
        return h

    x = leaf(3)
    h = x * 1
    out = C(f)(h)
    rec("same", [out is h, h._version])
    (out * out).sum().backward()
    rec("grad", x.grad)


@scenario
def output_requires_grad_from_no_grad_region(C, rec):
    def f(x):
        with torch.no_grad():
            h = x * 2
        return h, x * 3

    x = leaf(3)
    h, y = C(f)(x)
    rec("h", [h, h.is_leaf])
    h.requires_grad_()
    (h * y).sum().backward()
    rec("grads", [x.grad, h.grad])


@scenario
def hook_on_input_returned_as_is(C, rec):
    def f(x, w):
        return x, (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    a, s = C(f)(x, w)
    rec("same", a is x)
    (a.sum() * 2 + s).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def retain_graph_then_zero_grad_then_again(C, rec):
    m = _mlp()
    out = C(m)(leaf(5, 3, rg=False)).pow(2).sum()
    out.backward(retain_graph=True)
    g1 = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    out.backward()
    rec("g", g1 + [p.grad for p in m.parameters()])


@scenario
def sum_of_outputs_of_two_calls_one_modified(C, rec):
    def f(x):
        return x.exp()

    cf = C(f)
    x = leaf(3)
    a = cf(x)
    b = cf(x * 2)
    b.add_(1)
    (a.sum()).backward()
    rec("grad", x.grad)
    b.sum().backward()


@scenario
def version_module_param_written_inside(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        with torch.no_grad():
            lin.weight.mul_(0.5)
        return lin(x).sum()

    v0 = lin.weight._version
    s = C(f)(leaf(4, 3, rg=False))
    rec("changed", lin.weight._version > v0)
    s.backward()
    rec("g", [lin.weight.grad, lin.bias.grad])
    with torch.no_grad():
        lin.weight.add_(1)
    s2 = C(f)(leaf(4, 3, rg=False))
    with torch.no_grad():
        lin.weight.add_(1)
    s2.backward()


# ============================================================================================
# an output eager returns as the only view of an intermediate
@scenario
def lone_view_is_view(C, rec):
    def f(x):
        return x.exp()[1:], x.sin().t()

    x = leaf(3, 4)
    a, b = C(f)(x)
    rec("views", [a._is_view(), b._is_view(), a._base is not None, b.is_contiguous()])
    (a.sum() + b.sum()).backward()
    rec("grad", x.grad)


@scenario
def lone_view_write_unsaved_then_backward(C, rec):
    def f(x):
        return (x * 2).view(2, 2)

    x = leaf(4)
    y = C(f)(x)
    y[0].mul_(3)
    (y * y).sum().backward()
    rec("grad", x.grad)
    rec("y", y)


@scenario
def lone_view_last_hidden_detach_inplace_raises(C, rec):
    cell = nn.RNNCell(3, 4)

    def f(xs, h):
        hs = []
        for t in range(xs.shape[0]):
            h = cell(xs[t], h)
            hs.append(h)
        return torch.stack(hs)[-1]

    h = C(f)(leaf(2, 5, 3, rg=False), torch.zeros(5, 4))
    rec("h", h)
    h.detach_()


@scenario
def lone_view_under_no_grad(C, rec):
    def f(x):
        return x.exp()[1:]

    x = leaf(4)
    with torch.no_grad():
        y = C(f)(x)
    rec("y", [y, y._is_view(), y.requires_grad])
    y.detach_()


@scenario
def lone_view_of_no_grad_region(C, rec):
    def f(x):
        with torch.no_grad():
            h = x.exp()
        return h[1:], x * 2

    x = leaf(4)
    a, b = C(f)(x)
    rec("a", [a, a._is_view(), a.requires_grad, a.is_leaf])
    a.mul_(2)
    b.sum().backward()
    rec("grad", x.grad)


def main(argv) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
