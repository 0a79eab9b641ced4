"""In-place writes, aliases and ``no_grad`` regions inside compiled steps against eager
(session 23), run as ``scripts/probe_autograd4.py`` (its observations and comparison):

    PYTHONPATH=. python scripts/probe_autograd5.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_autograd5.py   # torch's own

User-style code: a tensor written under ``torch.no_grad()`` and then by a tracked value,
EMA updates, masking writes (``h[mask] = 0``) on leaf-derived tensors, ``.data`` and
``.detach()`` writes (``.data`` has a version counter of its own, ``.detach()`` shares it),
a saved tensor written through a separately passed detached alias, inference tensors saved
for the backward; outputs, gradients, their None-ness and the errors eager raises (by type
and first line).
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd4 as base4
from _probe_common import run
from probe_autograd import leaf

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _grads(rec, *ts):
    rec("grads", [t.grad for t in ts])


# ============================================================================================
# a tensor written under no_grad, then by a tracked value
@scenario
def nograd_write_then_tracked_add(C, rec):
    def f(x, w):
        t = x * 1.0
        with torch.no_grad():
            t.mul_(0.9)
        t.add_(x * w)
        return (t * t).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nograd_zero_then_tracked_add(C, rec):
    def f(x):
        t = x.clone()
        with torch.no_grad():
            t.zero_()
        t.add_(x * 3)
        return t

    x = leaf(4)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    _grads(rec, x)


@scenario
def nograd_copy_then_tracked_mul(C, rec):
    def f(x, y):
        t = x.exp()
        with torch.no_grad():
            t.copy_(y)
        t.mul_(y)
        return t.sum()

    x, y = leaf(4), leaf(4, seed=1)
    C(f)(x, y).backward()
    _grads(rec, x, y)


@scenario
def nograd_view_write_then_tracked_write(C, rec):
    def f(x, w):
        t = x * 2
        with torch.no_grad():
            t[:2].fill_(1.0)
        t[1:3] += w[1:3]
        return (t * x).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def tracked_write_then_nograd_write(C, rec):
    def f(x, w):
        t = x * 2
        t.add_(w)
        with torch.no_grad():
            t.mul_(0.5)
        return (t * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nograd_write_to_untracked_then_tracked(C, rec):
    def f(x):
        with torch.no_grad():
            t = x * 2
            t.add_(1)
        t.add_(x)
        return t

    x = leaf(4)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    _grads(rec, x)


@scenario
def nograd_made_tracked_write_then_nograd_write(C, rec):
    def f(x, w):
        with torch.no_grad():
            t = x * 2
        t.mul_(w)
        with torch.no_grad():
            t.mul_(0.5)
        return (t * x).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nograd_made_view_tracked_write(C, rec):
    def f(x, w):
        with torch.no_grad():
            t = x * 2
        t[1:3].add_(w[1:3])
        return (t * t).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nograd_made_returned_after_tracked_write(C, rec):
    def f(x, w):
        with torch.no_grad():
            t = x.exp()
        t.addcmul_(w, x)
        return t, t.sum()

    x, w = leaf(4), leaf(4, seed=1)
    t, s = C(f)(x, w)
    rec("t", t)
    s.backward()
    _grads(rec, x, w)


@scenario
def detach_then_tracked_write(C, rec):
    def f(x, w):
        t = x.detach().clone()
        t.add_(w)
        return (t * x).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nograd_write_twice_tracked_between(C, rec):
    def f(x, w):
        t = x + 0
        with torch.no_grad():
            t.mul_(2)
        t.mul_(w)
        with torch.no_grad():
            t.add_(1)
        return t.pow(2).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


# ============================================================================================
# no_grad writes to leaves (parameters, EMA buffers)
@scenario
def nograd_param_scaled_before_use(C, rec):
    def f(x, w):
        with torch.no_grad():
            w.mul_(0.9)
        return (x * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    _grads(rec, x, w)


@scenario
def nograd_param_scaled_after_saved_use_raises(C, rec):
    def f(x, w):
        y = (x * w).sum()
        with torch.no_grad():
            w.mul_(0.9)
        return y

    x, w = leaf(4), leaf(4, seed=1)
    y = C(f)(x, w)
    rec("w", w)
    y.backward()


@scenario
def nograd_param_scaled_after_unsaved_use(C, rec):
    def f(x, w):
        y = (x + w).sum()
        with torch.no_grad():
            w.mul_(0.9)
        return y

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    _grads(rec, x, w)


@scenario
def ema_buffer_update_in_step(C, rec):
    def step(x, p, ema):
        loss = (x @ p).tanh().sum()
        with torch.no_grad():
            ema.mul_(0.9).add_(p, alpha=0.1)
        return loss

    x, p, ema = leaf(3, 4, rg=False), leaf(4, 2, seed=1), torch.zeros(4, 2)
    for _ in range(2):
        C(step)(x, p, ema).backward()
    rec("ema", ema)
    _grads(rec, p)


@scenario
def ema_lerp_update_after_loss(C, rec):
    def step(x, p, ema):
        loss = (x @ p).sum()
        with torch.no_grad():
            ema.lerp_(p, 0.25)
            p.mul_(0.5)  # p saved by the matmul? (x @ p saves x for p's gradient only)
        return loss

    x, p, ema = leaf(3, 4, rg=False), leaf(4, 2, seed=1), torch.ones(4, 2)
    C(step)(x, p, ema).backward()
    rec("ema", ema)
    rec("p", p)
    _grads(rec, p)


@scenario
def ema_teacher_student(C, rec):
    torch.manual_seed(0)
    student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)

    def step(x):
        with torch.no_grad():
            for pt, ps in zip(teacher.parameters(), student.parameters()):
                pt.mul_(0.9).add_(ps.detach(), alpha=0.1)
            target = teacher(x)
        return ((student(x) - target) ** 2).mean()

    x = leaf(5, 3, rg=False)
    C(step)(x).backward()
    rec("teacher", [p.detach() for p in teacher.parameters()])
    rec("grads", [p.grad for p in student.parameters()] + [p.grad for p in teacher.parameters()])


@scenario
def manual_sgd_then_forward(C, rec):
    def step(x, w):
        with torch.no_grad():
            w -= 0.1 * w.grad
            w.grad.zero_()
        return (x * w).pow(2).sum()

    x, w = leaf(4, rg=False), leaf(4, seed=1)
    (x * w).pow(2).sum().backward()
    C(step)(x, w).backward()
    rec("w", w)
    _grads(rec, w)


@scenario
def nograd_clamp_param_after_saved_use_raises(C, rec):
    def f(x, w):
        y = (x * w).sum()
        with torch.no_grad():
            w.clamp_(-0.5, 0.5)
        return y

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()


@scenario
def nograd_clamp_param_before_use(C, rec):
    def f(x, w):
        with torch.no_grad():
            w.clamp_(-0.5, 0.5)
        return (x * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nograd_leaf_view_write_then_use(C, rec):
    def f(x, w):
        with torch.no_grad():
            w[0] = 0.0
        return (w * x).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    _grads(rec, x, w)


@scenario
def nograd_buffer_write_after_saved_use_raises(C, rec):
    def f(x, b):
        y = (x * b).sum()
        with torch.no_grad():
            b.add_(1)
        return y

    x, b = leaf(4), leaf(4, seed=1, rg=False)
    y = C(f)(x, b)
    rec("b", b)
    y.backward()


@scenario
def foreach_nograd_update_then_use(C, rec):
    def f(x, ws):
        with torch.no_grad():
            torch._foreach_mul_(ws, 0.5)
        return sum((x * w).sum() for w in ws)

    x, ws = leaf(4), [leaf(4, seed=1), leaf(4, seed=2)]
    C(f)(x, ws).backward()
    _grads(rec, x, *ws)


# ============================================================================================
# masking writes on leaf-derived tensors
@scenario
def mask_write_on_product(C, rec):
    def f(x):
        h = x * 2
        h[x > 0] = 0
        return h

    x = leaf(6)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    _grads(rec, x)


@scenario
def mask_write_on_exp_raises(C, rec):
    def f(x):
        h = x.exp()
        h[h > 1] = 0
        return h.sum()

    x = leaf(6)
    C(f)(x).backward()


@scenario
def mask_write_tensor_values(C, rec):
    def f(x, v):
        h = x.clone()
        m = h < 0
        h[m] = v[m] * 3
        return (h * h).sum()

    x, v = leaf(6), leaf(6, seed=1)
    C(f)(x, v).backward()
    _grads(rec, x, v)


@scenario
def masked_fill_inplace_on_clone(C, rec):
    def f(x):
        h = x.clone()
        h.masked_fill_(h < 0, 0.0)
        return (h * x).sum()

    x = leaf(6)
    C(f)(x).backward()
    _grads(rec, x)


@scenario
def mask_write_on_relu_output_raises(C, rec):
    def f(x):
        h = x.relu()
        h[0] = 5.0
        return h.sum()

    x = leaf(4)
    C(f)(x).backward()


@scenario
def mask_write_under_no_grad_on_tracked(C, rec):
    def f(x):
        h = x * 3
        with torch.no_grad():
            h[h < 0] = 0
        return (h * 2).sum()

    x = leaf(6)
    C(f)(x).backward()
    _grads(rec, x)


@scenario
def mask_write_under_no_grad_on_saved_raises(C, rec):
    def f(x):
        h = x * 3
        y = (h * h).sum()
        with torch.no_grad():
            h[h < 0] = 0
        return y

    x = leaf(6)
    C(f)(x).backward()


@scenario
def where_style_write_index_put(C, rec):
    def f(x, idx):
        h = x.clone()
        h[idx] = h[idx] * 10
        return h.pow(2).sum()

    x = leaf(6)
    C(f)(x, torch.tensor([0, 3])).backward()
    _grads(rec, x)


# ============================================================================================
# .data and .detach() writes
@scenario
def data_write_after_saved_use_uses_new_values(C, rec):
    def f(x):
        y = (x * x).sum()
        x.data.mul_(2)  # .data: a counter of its own, eager's backward reads the new values
        return y

    x = leaf(4)
    C(f)(x).backward()
    rec("x", x)
    _grads(rec, x)


@scenario
def detach_write_after_saved_use_raises(C, rec):
    def f(x):
        y = (x * x).sum()
        x.detach().mul_(2)
        return y

    x = leaf(4)
    C(f)(x).backward()


@scenario
def detach_write_after_exp_use(C, rec):
    def f(x):
        y = x.exp().sum()  # exp saves its result, not x
        x.detach().add_(1)
        return y

    x = leaf(4)
    C(f)(x).backward()
    rec("x", x)
    _grads(rec, x)


@scenario
def data_write_before_use(C, rec):
    def f(x, w):
        w.data.add_(1)
        return (x * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def data_write_on_intermediate(C, rec):
    def f(x):
        h = x * 2
        h.data.mul_(3)
        return (h * x).sum()

    x = leaf(4)
    C(f)(x).backward()
    _grads(rec, x)


@scenario
def data_write_on_saved_intermediate(C, rec):
    def f(x):
        h = x * 2
        y = (h * h).sum()
        h.data.zero_()
        return y

    x = leaf(4)
    C(f)(x).backward()
    _grads(rec, x)


# ============================================================================================
# a detached alias passed separately
@scenario
def alias_detached_write_after_saved_use_raises(C, rec):
    def f(x, xd):
        y = x.sin().sum()
        xd.mul_(2)
        return y

    x = leaf(4)
    y = C(f)(x, x.detach())
    rec("x", x)
    y.backward()


@scenario
def alias_detached_write_before_use(C, rec):
    def f(x, xd):
        xd.mul_(2)
        return x.sin().sum()

    x = leaf(4)
    C(f)(x, x.detach()).backward()
    rec("x", x)
    _grads(rec, x)


@scenario
def alias_detached_write_after_unsaved_use(C, rec):
    def f(x, xd):
        y = (x * 3).sum()
        xd.add_(1)
        return y

    x = leaf(4)
    C(f)(x, x.detach()).backward()
    rec("x", x)
    _grads(rec, x)


@scenario
def alias_detached_view_write_after_saved_use_raises(C, rec):
    def f(x, xd):
        y = (x * x).sum()
        xd[0].fill_(0.0)
        return y

    x = leaf(4)
    C(f)(x, x.detach()).backward()


@scenario
def alias_data_write_after_saved_use(C, rec):
    def f(x, xd):
        y = (x * x).sum()
        xd.mul_(2)
        return y

    x = leaf(4)
    C(f)(x, x.data).backward()  # .data: no shared counter, no error; new values read
    rec("x", x)
    _grads(rec, x)


@scenario
def alias_detached_nonleaf_write_raises(C, rec):
    def f(h, hd):
        y = h.tanh().sum()  # tanh saves its result: not h
        z = (h * h).sum()
        hd.mul_(2)
        return y + z

    x = leaf(4)
    h = x * 1.5
    C(f)(h, h.detach()).backward()


@scenario
def alias_two_views_write_one(C, rec):
    def f(a, b):
        y = (a * a).sum()
        b.mul_(2)
        return y

    base = leaf(4, rg=False)
    w = leaf(4, seed=1)
    a = base[:2] * w[:2]
    C(f)(a, a.detach()[:1]).backward()


# ============================================================================================
# inference tensors
@scenario
def inference_tensor_saved_raises(C, rec):
    with torch.inference_mode():
        w = torch.randn(4)
    x = leaf(4)
    C(lambda x, w: (x * w).sum())(x, w)


@scenario
def inference_tensor_unsaved(C, rec):
    with torch.inference_mode():
        w = torch.randn(4)
    x = leaf(4)
    C(lambda x, w: (x + w.sin() * x).sum())(x, w).backward()
    _grads(rec, x)


@scenario
def inference_module_params_raises(C, rec):
    with torch.inference_mode():
        m = nn.Linear(3, 2)
    x = leaf(5, 3)
    C(m)(x)


@scenario
def inference_input_no_grad_needed(C, rec):
    with torch.inference_mode():
        w = torch.randn(4)
    x = leaf(4, rg=False)
    rec("out", C(lambda x, w: (x * w).sum())(x, w))


def main(argv) -> int:
    return run(argv, SCENARIOS, base4.compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
