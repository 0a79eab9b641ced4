"""Autograd semantics as users drive it (session 24), run as ``scripts/probe_autograd4.py``
(its observations: values, dtype, shape, requires_grad, grad_fn None-ness, is_leaf; errors by
type and eager's first line):

    PYTHONPATH=. python scripts/probe_autograd24.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_autograd24.py   # torch's own

``.grad`` None or zeros for parameters an output reaches only through integer or boolean
values, argmax, ``.detach()``, ``no_grad``, ``.data``, a fully-true ``masked_fill``, a product
with zero, an empty index, a graph break between; several outputs and backward through some;
``torch.autograd.grad`` with ``allow_unused``/``materialize_grads`` and ``grad_outputs`` of
other dtypes; ``create_graph`` double backward through compiled MLPs (gradient penalty,
Hessian-vector products); ``torch.func`` transforms around and inside compiled functions;
checkpoints inside compiled modules; anomaly mode; complex inputs with real losses;
``requires_grad`` of outputs; ``.grad`` warnings of non-leaves; freezing between steps.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_autograd4 as base4
from _probe_common import run
from probe_autograd import cleaf, leaf

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _grads(rec, *ts, label="grads"):
    rec(label, [t.grad for t in ts])


def _connect(name, body, n=2, shape=(4,)):
    """A scenario: ``body(x, w)`` is the compiled function's loss; ``.grad`` of x and w."""

    def fn(C, rec):
        ts = [leaf(*shape, seed=i) for i in range(n)]
        out = C(body)(*ts)
        rec("out", out)
        out.backward()
        _grads(rec, *ts)

    fn.__name__ = name
    SCENARIOS[name] = fn


def _break():
    torch._dynamo.graph_break()


# ============================================================================================
# None vs zeros: how an output reaches (or does not reach) a parameter
_connect("nz_unused", lambda x, w: (x * 2).sum())
_connect("nz_long_path", lambda x, w: (x * (w * 3).long()).sum())
_connect("nz_bool_path", lambda x, w: (x * (w > 0)).sum())
_connect("nz_bool_float_path", lambda x, w: (x * (w > 0).float()).sum())
_connect("nz_argmax", lambda x, w: x[w.argmax()] * 2)
_connect("nz_argsort_gather", lambda x, w: x[w.argsort()].cumsum(0).sum())
_connect("nz_topk_indices", lambda x, w: x[w.topk(2).indices].sum())
_connect("nz_topk_values", lambda x, w: x.sum() * w.topk(2).values.sum())
_connect("nz_detach", lambda x, w: (x * w.detach()).sum())
_connect("nz_data", lambda x, w: (x * w.data).sum())
_connect("nz_masked_fill_all_true", lambda x, w: (x + w.masked_fill(w.isfinite(), 0.0)).sum())
_connect(
    "nz_masked_fill_all_true_ones",
    lambda x, w: (x * w.masked_fill(torch.ones(4, dtype=torch.bool), 1.0)).sum(),
)
_connect("nz_mul_zero", lambda x, w: (x + w * 0).sum())
_connect("nz_mul_zero_tensor", lambda x, w: (x + w * torch.zeros(4)).sum())
_connect("nz_sum_times_zero", lambda x, w: x.sum() + w.sum() * 0)
_connect("nz_empty_index", lambda x, w: x.sum() + w[torch.tensor([], dtype=torch.long)].sum())
_connect("nz_empty_slice", lambda x, w: x.sum() + w[:0].sum())
_connect("nz_empty_bool_mask", lambda x, w: x.sum() + w[torch.zeros(4, dtype=torch.bool)].sum())
_connect("nz_where_all_false", lambda x, w: torch.where(x > 100, w, x).sum())
_connect("nz_where_scalar_other", lambda x, w: (x + torch.where(x > 100, w, 0.0)).sum())
_connect("nz_clamp_above", lambda x, w: (x + w.clamp(min=100.0)).sum())
_connect("nz_zeros_like", lambda x, w: (x + torch.zeros_like(w)).sum())
_connect("nz_new_zeros", lambda x, w: (x + w.new_zeros(4)).sum())
_connect("nz_shape_only", lambda x, w: (x * w.shape[0]).sum())
_connect("nz_sign_round_floor", lambda x, w: (x * w.sign() + w.round() + w.floor()).sum())
_connect("nz_nonzero", lambda x, w: (x + w.nonzero().sum()).sum())
_connect("nz_one_hot_argmax", lambda x, w: (x * F.one_hot(w.argmax(), 4)).sum())
_connect("nz_max_dim_indices", lambda x, w: x[w.max(0).indices] * 1.0)
_connect("nz_max_dim_values", lambda x, w: x.sum() * w.max(0).values)
_connect("nz_sort_values", lambda x, w: (x * w.sort().values).sum())
_connect("nz_no_grad_block", lambda x, w: _no_grad_use(x, w))
_connect(
    "nz_bucketize", lambda x, w: (x * torch.bucketize(w, torch.tensor([-1.0, 0.0, 1.0]))).sum()
)
_connect("nz_eq_self", lambda x, w: (x * w.isfinite()).sum())
_connect("nz_int_pow", lambda x, w: (x * w.int().float().pow(2)).sum())
_connect("nz_histc", lambda x, w: x.sum() + torch.histc(w, bins=3).sum())
_connect("nz_relu_all_negative", lambda x, w: (x + (-(w.abs()) - 1).relu()).sum())
_connect("nz_dropout_p1", lambda x, w: (x + F.dropout(w, p=1.0, training=True)).sum())
_connect("nz_expand_zero", lambda x, w: x.sum() + w[:1].expand(0).sum())
_connect("nz_empty_matmul", lambda x, w: x.sum() + (w[:0] @ w[:0]))
_connect("nz_cat_empty", lambda x, w: torch.cat([x, w[:0]]).sum())
_connect("nz_stack_then_index", lambda x, w: torch.stack([x, w])[0].sum())
_connect("nz_split_other_half", lambda x, w: torch.cat([x, w]).split(4)[0].sum())
_connect("nz_unbind_other", lambda x, w: torch.stack([x, w]).unbind(0)[0].sum())
_connect("nz_chunk_other", lambda x, w: torch.cat([x, w]).chunk(2)[0].sum())
_connect("nz_narrow_of_cat", lambda x, w: torch.cat([x, w]).narrow(0, 0, 4).sum())
_connect("nz_requires_grad_branch", lambda x, w: (x * (2.0 if w.requires_grad else 3.0)).sum())
_connect("nz_norm_p0", lambda x, w: x.sum() + w.norm(p=0))
_connect("nz_int_div", lambda x, w: (x * torch.div(w, 1, rounding_mode="floor")).sum())
_connect("nz_copysign_sign", lambda x, w: (x * torch.copysign(torch.ones(4), w)).sum())
_connect("nz_fill_", lambda x, w: (x + w.clone().fill_(2.0)).sum())
_connect("nz_zero_", lambda x, w: (x + w.clone().zero_()).sum())
_connect("nz_index_put_overwrite", lambda x, w: (x + _overwrite(w)).sum())
_connect("nz_detach_then_graph_break", lambda x, w: _with_break(x, w.detach()))
_connect("nz_mul_zero_graph_break", lambda x, w: _with_break(x, w * 0))
_connect("nz_argmax_graph_break", lambda x, w: _with_break(x, x[w.argmax()].expand(4)))
_connect("nz_empty_index_graph_break", lambda x, w: _with_break(x, w[:0].sum().expand(4)))
_connect(
    "nz_masked_fill_graph_break", lambda x, w: _with_break(x, w.masked_fill(w.isfinite(), 1.0))
)
_connect("nz_long_graph_break", lambda x, w: _with_break(x, w.long().float()))
_connect("nz_item_break", lambda x, w: (x * w.sum().item()).sum())
_connect("nz_tolist", lambda x, w: (x * w.tolist()[0]).sum())
_connect("nz_nonzero_cut", lambda x, w: _nonzero_cut(x, w))
_connect("nz_nonzero_cut_zeros", lambda x, w: _nonzero_cut_zeros(x, w))


def _no_grad_use(x, w):
    with torch.no_grad():
        v = w * 2
    return (x * v).sum()


def _overwrite(w):
    t = w.clone()
    t[:] = 1.0
    return t


def _with_break(x, v):
    h = x * 2
    _break()
    return (h + v).sum()


def _nonzero_cut(x, w):
    idx = (x > 0).nonzero().squeeze(1)
    return (w[idx] * 0).sum() + x.sum()


def _nonzero_cut_zeros(x, w):
    idx = (x > 100).nonzero().squeeze(1)  # empty
    return w[idx].sum() + x.sum()


# modules: parameters an output reaches by integer paths
@scenario
def nz_module_gate_argmax(C, rec):
    torch.manual_seed(0)

    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(4, 3)
            self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

        def forward(self, x):
            choice = self.router(x).argmax(-1)
            return torch.stack([self.experts[int(c)](x[i]) for i, c in enumerate(choice.tolist())])

    m = Gate()
    out = C(m)(leaf(2, 4, rg=False))
    out.sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def nz_module_unused_head(C, rec):
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(3, 3), nn.Linear(3, 2), nn.Linear(3, 2)

        def forward(self, x):
            h = self.a(x).tanh()
            return self.b(h), self.c(h.detach())

    m = C(M())
    p, q = m(leaf(2, 3, rg=False))
    p.sum().backward()
    rec("grads1", [t.grad for t in m.parameters()])
    q.sum().backward()
    rec("grads2", [t.grad for t in m.parameters()])


@scenario
def nz_module_masked_loss_all_ignored(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 4)

    def f(x, y):
        return F.cross_entropy(lin(x), y, ignore_index=-100, reduction="sum")

    y = torch.full((2,), -100)
    out = C(f)(leaf(2, 3, rg=False), y)
    rec("out", out)
    out.backward()
    rec("grads", [lin.weight.grad, lin.bias.grad])


@scenario
def nz_embedding_padding_only(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(5, 3, padding_idx=0)

    def f(i):
        return emb(i).sum()

    C(f)(torch.zeros(3, dtype=torch.long)).backward()
    rec("grad", emb.weight.grad)


@scenario
def nz_two_calls_one_unused(C, rec):
    def f(x, w):
        return (x * 2).sum(), (w * 3).sum()

    x, w = leaf(3), leaf(3, seed=1)
    g = C(f)
    a, _ = g(x, w)
    a2, b2 = g(x, w)
    (a + a2).backward()
    _grads(rec, x, w)
    b2.backward()
    _grads(rec, x, w)


@scenario
def nz_grad_none_then_zero_grad_none(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.1)
    cm = C(m)
    for step in range(3):
        x = leaf(4, 3, seed=step, rg=False)
        if step == 1:
            loss = C(m[0])(x).sum() * 0  # only the first layer, times zero
        else:
            loss = cm(x).sum()
        opt.zero_grad()
        loss.backward()
        rec(f"grads{step}", [p.grad for p in m.parameters()])
        opt.step()
    rec("params", [p.detach().clone() for p in m.parameters()])


# ============================================================================================
# several outputs, backward through some of them
@scenario
def multi_backward_one_then_other(C, rec):
    def f(x, w):
        h = (x * w).tanh()
        return h.sum(), (h * h).sum(), (x * 2).sum()

    x, w = leaf(4), leaf(4, seed=1)
    a, b, c = C(f)(x, w)
    a.backward()
    _grads(rec, x, w)
    c.backward()
    _grads(rec, x, w)
    b.backward()
    _grads(rec, x, w)


@scenario
def multi_agrad_each_output(C, rec):
    def f(x, w):
        return x.sin() * w, x.exp(), w.cos()

    x, w = leaf(4), leaf(4, seed=1)
    a, b, c = C(f)(x, w)
    rec("ga", list(torch.autograd.grad(a.sum(), [x, w], allow_unused=True, retain_graph=True)))
    rec("gb", list(torch.autograd.grad(b.sum(), [x, w], allow_unused=True, retain_graph=True)))
    rec("gc", list(torch.autograd.grad(c.sum(), [x, w], allow_unused=True)))
    rec(
        "gbm", list(torch.autograd.grad(b.sum(), [x, w], allow_unused=True, materialize_grads=True))
    )


@scenario
def multi_backward_list_with_none_grad(C, rec):
    def f(x, w):
        return x * w, (x + w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    a, b = C(f)(x, w)
    torch.autograd.backward([a, b], [torch.ones(4), None])
    _grads(rec, x, w)


@scenario
def multi_backward_list_none_non_scalar_raises(C, rec):
    def f(x, w):
        return x * w, (x + w)

    x, w = leaf(4), leaf(4, seed=1)
    a, b = C(f)(x, w)
    torch.autograd.backward([a, b], [torch.ones(4), None])


@scenario
def multi_second_backward_without_retain_raises(C, rec):
    def f(x, w):
        return (x * w).exp().sum()

    x, w = leaf(4), leaf(4, seed=1)
    out = C(f)(x, w)
    out.backward()
    out.backward()


@scenario
def multi_retain_then_twice(C, rec):
    def f(x, w):
        return (x * w).exp().sum()

    x, w = leaf(4), leaf(4, seed=1)
    out = C(f)(x, w)
    out.backward(retain_graph=True)
    out.backward(retain_graph=True)
    out.backward()
    _grads(rec, x, w)
    out.backward()


@scenario
def multi_second_backward_linear_ok(C, rec):
    # eager's add/sum save nothing: a second backward runs
    def f(x, w):
        return (x + w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    out = C(f)(x, w)
    out.backward()
    out.backward()
    _grads(rec, x, w)


@scenario
def multi_second_backward_mul_scalar_ok(C, rec):
    def f(x):
        return (x * 3).sum()

    x = leaf(4)
    out = C(f)(x)
    out.backward()
    out.backward()
    _grads(rec, x)


@scenario
def multi_nonscalar_backward_raises(C, rec):
    def f(x):
        return x * 2

    C(f)(leaf(4)).backward()


@scenario
def multi_nonscalar_agrad_raises(C, rec):
    def f(x):
        return x.exp()

    x = leaf(4)
    torch.autograd.grad(C(f)(x), x)


@scenario
def multi_one_element_backward_ok(C, rec):
    def f(x):
        return x.exp().sum(0, keepdim=True)

    x = leaf(4)
    C(f)(x).backward()
    _grads(rec, x)


# ============================================================================================
# torch.autograd.grad arguments
@scenario
def agrad_materialize_int_path(C, rec):
    def f(x, w):
        return (x * w.long()).sum()

    x, w = leaf(4), leaf(4, seed=1)
    rec(
        "g",
        list(torch.autograd.grad(C(f)(x, w), [x, w], allow_unused=True, materialize_grads=True)),
    )


@scenario
def agrad_materialize_create_graph(C, rec):
    def f(x, w):
        return (x.tanh() * 2).sum(), w

    x, w = leaf(4), leaf(4, seed=1)
    a, _ = C(f)(x, w)
    g = torch.autograd.grad(a, [x, w], allow_unused=True, materialize_grads=True, create_graph=True)
    rec("g", list(g))
    rec("gg", list(torch.autograd.grad(g[0].sum(), [x, w], allow_unused=True)))


@scenario
def agrad_grad_outputs_f64_for_f32(C, rec):
    def f(x):
        return x.exp()

    x = leaf(4)
    rec("g", list(torch.autograd.grad(C(f)(x), x, torch.ones(4, dtype=torch.float64))))


@scenario
def agrad_grad_outputs_f16_for_f32(C, rec):
    def f(x):
        return x.exp() * 3

    x = leaf(4)
    rec("g", list(torch.autograd.grad(C(f)(x), x, torch.full((4,), 0.1, dtype=torch.float16))))


@scenario
def agrad_grad_outputs_f32_for_bf16(C, rec):
    def f(x):
        return x.exp()

    x = leaf(4, dtype=torch.bfloat16)
    rec("g", list(torch.autograd.grad(C(f)(x), x, torch.full((4,), 0.3))))


@scenario
def agrad_grad_outputs_none_list(C, rec):
    def f(x):
        return x.exp().sum(), x.sin().sum()

    x = leaf(4)
    a, b = C(f)(x)
    rec("g", list(torch.autograd.grad([a, b], x, [None, torch.tensor(2.0)])))


@scenario
def agrad_grad_outputs_zero_dim_for_one_elem(C, rec):
    def f(x):
        return x.exp().sum().reshape(1)

    x = leaf(4)
    rec("g", list(torch.autograd.grad(C(f)(x), x, torch.tensor(2.0))))


@scenario
def agrad_output_not_requiring_raises(C, rec):
    def f(x):
        return x.argmax()

    x = leaf(4)
    torch.autograd.grad(C(f)(x), x)


@scenario
def agrad_input_is_output(C, rec):
    def f(x):
        y = x * 2
        return y, y.sum()

    x = leaf(4)
    y, s = C(f)(x)
    rec("g", list(torch.autograd.grad(s, [y, x])))


@scenario
def agrad_int_input_raises(C, rec):
    def f(x, i):
        return (x * i).sum()

    x = leaf(4)
    i = torch.arange(4)
    torch.autograd.grad(C(f)(x, i), [x, i])


@scenario
def autograd_backward_inputs_only_one(C, rec):
    def f(x, w):
        return (x * w).sin().sum()

    x, w = leaf(4), leaf(4, seed=1)
    torch.autograd.backward(C(f)(x, w), inputs=[w])
    _grads(rec, x, w)


@scenario
def autograd_backward_inputs_unreached(C, rec):
    def f(x, w, u):
        return (x * w).sin().sum()

    x, w, u = leaf(4), leaf(4, seed=1), leaf(4, seed=2)
    C(f)(x, w, u).backward(inputs=[w, u])
    _grads(rec, x, w, u)


@scenario
def autograd_backward_inputs_intermediate(C, rec):
    def f(x, w):
        h = x * w
        return h, h.exp().sum()

    x, w = leaf(4), leaf(4, seed=1)
    h, s = C(f)(x, w)
    h.retain_grad()
    s.backward(inputs=[h])
    rec("hg", h.grad)
    _grads(rec, x, w)


# ============================================================================================
# create_graph: gradient penalties and Hessian-vector products through compiled MLPs
def _mlp(act, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 5), act, nn.Linear(5, 2)).double()


_ACTS = {
    "tanh": nn.Tanh,
    "gelu": nn.GELU,
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "softplus": nn.Softplus,
    "silu": nn.SiLU,
    "elu": nn.ELU,
    "sigmoid": nn.Sigmoid,
    "layernorm": lambda: nn.LayerNorm(5),
    "softmax": lambda: nn.Softmax(-1),
    "logsoftmax": lambda: nn.LogSoftmax(-1),
    "mish": nn.Mish,
    "relu": nn.ReLU,
    "leaky": nn.LeakyReLU,
    "hardswish": nn.Hardswish,
}


def _gp(name, make):
    def fn(C, rec):
        m = _mlp(make())
        cm = C(m)
        x = leaf(4, 3, dtype=torch.float64)
        out = cm(x)
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        rec("g", g)
        penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        rec("pgrads", [p.grad for p in m.parameters()])
        rec("xgrad", x.grad)

    fn.__name__ = f"double_gp_{name}"
    SCENARIOS[fn.__name__] = fn

    def hvp(C, rec):
        m = _mlp(make(), seed=1)
        params = list(m.parameters())
        x = leaf(4, 3, seed=2, dtype=torch.float64, rg=False)
        loss = C(m)(x).logsumexp(-1).sum()
        gs = torch.autograd.grad(loss, params, create_graph=True)
        v = [torch.ones_like(p) for p in params]
        hv = torch.autograd.grad(gs, params, v, allow_unused=True)
        rec("hv", list(hv))

    hvp.__name__ = f"double_hvp_{name}"
    SCENARIOS[hvp.__name__] = hvp


for _n, _m in _ACTS.items():
    _gp(_n, _m)


@scenario
def double_logsumexp_inside(C, rec):
    def f(x, w):
        return (x @ w).logsumexp(-1).sum()

    x, w = leaf(3, 4, dtype=torch.float64), leaf(4, 2, seed=1, dtype=torch.float64)
    (gx,) = torch.autograd.grad(C(f)(x, w), x, create_graph=True)
    (gx * gx).sum().backward()
    _grads(rec, x, w)


@scenario
def double_softmax_ce_inside(C, rec):
    def f(x, w, y):
        return F.cross_entropy(x @ w, y)

    x, w = leaf(3, 4, dtype=torch.float64), leaf(4, 5, seed=1, dtype=torch.float64)
    y = torch.tensor([0, 3, 4])
    (gw,) = torch.autograd.grad(C(f)(x, w, y), w, create_graph=True)
    gw.pow(2).sum().backward()
    _grads(rec, x, w)


@scenario
def double_hvp_unused_param_none(C, rec):
    def f(x, w, b):
        return (x * w).tanh().sum() + b.sum()

    x, w, b = (
        leaf(4, dtype=torch.float64),
        leaf(4, seed=1, dtype=torch.float64),
        leaf(4, seed=2, dtype=torch.float64),
    )
    gs = torch.autograd.grad(C(f)(x, w, b), [w, b], create_graph=True)
    rec("gs_rg", [g.requires_grad for g in gs])
    rec("hv", list(torch.autograd.grad(gs[0].sum() + gs[1].sum(), [x, w, b], allow_unused=True)))


@scenario
def double_linear_second_derivative_none(C, rec):
    # the gradient of a linear function does not depend on its input: None in eager
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    (gx,) = torch.autograd.grad(C(f)(x, w), x, create_graph=True)
    rec("gx", gx)
    rec("g2", list(torch.autograd.grad(gx.sum(), [x, w], allow_unused=True)))


@scenario
def double_relu_second_zero(C, rec):
    def f(x):
        return x.relu().pow(2).sum()

    x = leaf(4)
    (gx,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("gx", gx)
    rec("g2", list(torch.autograd.grad(gx.sum(), [x], allow_unused=True)))


@scenario
def double_relu_only(C, rec):
    def f(x, w):
        return (x * w).relu().sum()

    x, w = leaf(4), leaf(4, seed=1)
    (gx,) = torch.autograd.grad(C(f)(x, w), x, create_graph=True)
    rec("gx", gx)
    rec("g2", list(torch.autograd.grad(gx.sum(), [x, w], allow_unused=True)))


@scenario
def double_backward_create_graph_grad_attr(C, rec):
    def f(x):
        return x.pow(3).sum()

    x = leaf(4)
    C(f)(x).backward(create_graph=True)
    rec("xg", x.grad)
    g = x.grad
    x.grad = None
    g.sum().backward()
    rec("xg2", x.grad)


@scenario
def double_create_graph_detached_branch(C, rec):
    def f(x, w):
        return (x.exp() * w.detach()).sum()

    x, w = leaf(4), leaf(4, seed=1)
    (gx,) = torch.autograd.grad(C(f)(x, w), x, create_graph=True)
    rec("g2", list(torch.autograd.grad(gx.sum(), [x, w], allow_unused=True)))


@scenario
def double_create_graph_round(C, rec):
    def f(x, w):
        return (x.round() * w).sum() + (x * x).sum()

    x, w = leaf(4), leaf(4, seed=1)
    gx, gw = torch.autograd.grad(C(f)(x, w), [x, w], create_graph=True)
    rec("flags", [gx.requires_grad, gw.requires_grad])
    rec("g2", list(torch.autograd.grad(gx.sum() + gw.sum(), [x, w], allow_unused=True)))


# ============================================================================================
# torch.func around and inside compiled functions
@scenario
def func_grad_of_compiled_unused_arg(C, rec):
    def f(x, w):
        return (x.sin()).sum()

    x, w = leaf(4, rg=False), leaf(4, seed=1, rg=False)
    rec("g", list(torch.func.grad(C(f), argnums=(0, 1))(x, w)))


@scenario
def func_vjp_of_compiled(C, rec):
    def f(x):
        return x.exp() * 2, x.argmax()

    x = leaf(4, rg=False)
    (out, idx), vjp = torch.func.vjp(C(f), x)
    rec("out", [out, idx])
    rec("g", list(vjp((torch.ones(4), None))))


@scenario
def func_jacrev_of_compiled(C, rec):
    def f(x):
        return x.tanh() * x.sum()

    rec("jac", torch.func.jacrev(C(f))(leaf(3, rg=False)))


@scenario
def func_hessian_of_compiled_mlp(C, rec):
    m = _mlp(nn.Tanh())
    x = leaf(1, 3, dtype=torch.float64, rg=False)
    rec("h", torch.func.hessian(lambda x: C(m)(x).sum())(x))


@scenario
def func_grad_inside_compiled(C, rec):
    def f(x):
        return torch.func.grad(lambda t: (t.sin() * t).sum())(x)

    rec("g", C(f)(leaf(4, rg=False)))


@scenario
def func_jacrev_inside_compiled(C, rec):
    def f(x):
        return torch.func.jacrev(lambda t: t.tanh() * t.sum())(x)

    rec("j", C(f)(leaf(3, rg=False)))


@scenario
def func_vjp_inside_compiled(C, rec):
    def f(x, v):
        out, fn = torch.func.vjp(lambda t: t.exp() * t, x)
        return out, fn(v)[0]

    rec("o", list(C(f)(leaf(3, rg=False), leaf(3, seed=1, rg=False))))


@scenario
def func_hessian_inside_compiled(C, rec):
    def f(x):
        return torch.func.hessian(lambda t: (t.exp() * t).sum())(x)

    rec("h", C(f)(leaf(3, rg=False)))


@scenario
def func_grad_inside_compiled_then_backward(C, rec):
    def f(x):
        g = torch.func.grad(lambda t: (t.sin() * t).sum())(x)
        return (g * g).sum()

    x = leaf(4)
    out = C(f)(x)
    rec("out", out)
    out.backward()
    _grads(rec, x)


@scenario
def func_grad_wrt_params_inside_compiled(C, rec):
    m = _mlp(nn.Tanh())
    params = {k: v.detach() for k, v in m.named_parameters()}

    def f(params, x):
        return torch.func.grad(lambda p: torch.func.functional_call(m, p, (x,)).pow(2).sum())(
            params
        )

    x = leaf(4, 3, dtype=torch.float64, rg=False)
    g = C(f)(params, x)
    rec("g", [g[k] for k in sorted(g)])


# ============================================================================================
# checkpoints inside compiled modules
class _CkptMLP(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = nn.Linear(3, 4), nn.Linear(4, 4), nn.Linear(4, 2)
        self.reentrant = reentrant

    def block(self, h):
        return F.gelu(self.b(h)) + h

    def forward(self, x):
        h = self.a(x).tanh()
        h = checkpoint(self.block, h, use_reentrant=self.reentrant)
        return self.c(h)


@scenario
def ckpt_module_nonreentrant(C, rec):
    m = _CkptMLP(False)
    x = leaf(2, 3)
    C(m)(x).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])
    rec("xg", x.grad)


@scenario
def ckpt_module_reentrant(C, rec):
    m = _CkptMLP(True)
    x = leaf(2, 3)
    C(m)(x).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])
    rec("xg", x.grad)


@scenario
def ckpt_module_nonreentrant_input_no_grad(C, rec):
    m = _CkptMLP(False)
    C(m)(leaf(2, 3, rg=False)).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def ckpt_module_nonreentrant_gp(C, rec):
    m = _CkptMLP(False).double()
    x = leaf(2, 3, dtype=torch.float64)
    (g,) = torch.autograd.grad(C(m)(x).sum(), x, create_graph=True)
    g.pow(2).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def ckpt_module_two_steps_frozen(C, rec):
    m = _CkptMLP(False)
    cm = C(m)
    cm(leaf(2, 3, rg=False)).sum().backward()
    m.b.weight.requires_grad_(False)
    m.zero_grad(set_to_none=True)
    cm(leaf(2, 3, seed=1, rg=False)).sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


# ============================================================================================
# requires_grad / grad_fn / leaves of outputs
@scenario
def meta_int_requires_grad_inside_raises(C, rec):
    def f(x):
        t = torch.tensor([1, 2, 3], requires_grad=True)
        return x * t

    rec("out", C(f)(leaf(3)))


@scenario
def meta_int_requires_grad_input_raises(C, rec):
    def f(x):
        return x.long().requires_grad_()

    rec("out", C(f)(leaf(3)))


@scenario
def meta_outputs_under_no_grad(C, rec):
    def f(x, w):
        return x * w, x, w.view(2, 2), (x * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    with torch.no_grad():
        outs = C(f)(x, w)
    rec("outs", list(outs))
    rec("ident", outs[1] is x)


@scenario
def meta_outputs_under_inference_mode(C, rec):
    def f(x, w):
        return x * w, w.view(2, 2)

    x, w = leaf(4), leaf(4, seed=1)
    with torch.inference_mode():
        outs = C(f)(x, w)
    rec("outs", list(outs))
    rec("inf", [o.is_inference() for o in outs])


@scenario
def meta_buffers_only(C, rec):
    torch.manual_seed(0)
    m = nn.BatchNorm1d(3)
    m.requires_grad_(False)
    out = C(m)(leaf(4, 3, rg=False))
    rec("out", out)


@scenario
def meta_buffers_and_frozen_params_eval(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)).eval()
    m.requires_grad_(False)
    out = C(m)(leaf(4, 3, rg=False))
    rec("out", out)


@scenario
def meta_returned_input_keeps_grad(C, rec):
    def f(x, y):
        return x, y, x.detach(), y * 2

    x, y = leaf(3), leaf(3, seed=1, rg=False)
    outs = C(f)(x, y)
    rec("outs", list(outs))
    rec("ident", [outs[0] is x, outs[1] is y])


@scenario
def meta_returned_param(C, rec):
    lin = nn.Linear(2, 2)

    def f(x):
        return lin(x), lin.weight

    _, wt = C(f)(leaf(1, 2))
    rec("ident", wt is lin.weight)
    rec("wt", wt)


@scenario
def meta_nonleaf_grad_warning(C, rec):
    def f(x):
        return x * 2

    x = leaf(3)
    out = C(f)(x)
    out.sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec("og", out.grad)
    rec(
        "warned",
        [".grad attribute of a Tensor that is not a leaf" in str(w.message) for w in caught],
    )


@scenario
def meta_retain_grad_output(C, rec):
    def f(x):
        return x * 2, (x * 3).sum()

    x = leaf(3)
    a, s = C(f)(x)
    a.retain_grad()
    (a.sum() + s).backward()
    rec("ag", a.grad)
    _grads(rec, x)


@scenario
def meta_retain_grad_inside(C, rec):
    def f(x):
        h = x * 2
        h.retain_grad()
        return h.exp().sum(), h

    x = leaf(3)
    s, h = C(f)(x)
    s.backward()
    rec("hg", h.grad)


@scenario
def meta_grad_fn_names(C, rec):
    def f(x, i):
        return x * 2, i + 1, x.detach(), (x > 0), x.sum()

    x, i = leaf(3), torch.arange(3)
    outs = C(f)(x, i)
    rec("gfn_none", [o.grad_fn is None for o in outs])
    rec("rg", [o.requires_grad for o in outs])
    rec("leaf", [o.is_leaf for o in outs])


@scenario
def meta_enable_grad_inside_no_grad_call(C, rec):
    def f(x):
        with torch.enable_grad():
            y = x * 2
        return y, x * 3

    x = leaf(3)
    with torch.no_grad():
        y, z = C(f)(x)
    rec("outs", [y, z])


# ============================================================================================
# anomaly mode
@scenario
def anomaly_nan_backward_raises(C, rec):
    def f(x):
        return (x.sqrt() * 0).sum()

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    out = C(f)(x)
    with torch.autograd.detect_anomaly():
        out.backward()
    rec("grad", x.grad)


@scenario
def anomaly_nan_in_forward_output_ok(C, rec):
    def f(x):
        return (x.log() * x).sum()

    x = torch.tensor([-1.0, 1.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        out = C(f)(x)
        rec("out", out)
        out.backward()
    rec("grad", x.grad)


@scenario
def anomaly_no_nan_runs(C, rec):
    def f(x, w):
        return (x * w).tanh().sum()

    x, w = leaf(4), leaf(4, seed=1)
    with torch.autograd.set_detect_anomaly(True):
        C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def anomaly_check_nan_false(C, rec):
    def f(x):
        return (x.sqrt() * 0).sum()

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with torch.autograd.set_detect_anomaly(True, check_nan=False):
        C(f)(x).backward()
    rec("grad", x.grad)


@scenario
def anomaly_nan_grad_output_given(C, rec):
    def f(x):
        return x * 2

    x = leaf(2)
    out = C(f)(x)
    with torch.autograd.detect_anomaly():
        out.backward(torch.tensor([float("nan"), 1.0]))
    rec("grad", x.grad)


# ============================================================================================
# complex inputs, real outputs
def _cx(name, body):
    def fn(C, rec):
        z, w = cleaf(4), cleaf(4, seed=1)
        out = C(body)(z, w)
        rec("out", out)
        out.backward()
        _grads(rec, z, w)

    fn.__name__ = name
    SCENARIOS[name] = fn


_cx("cx_abs", lambda z, w: (z * w).abs().sum())
_cx("cx_real_imag", lambda z, w: (z * w).real.sum() + (z / w).imag.sum())
_cx("cx_abs_sq", lambda z, w: (z * z.conj()).real.sum() + (w.abs() ** 2).sum())
_cx("cx_angle", lambda z, w: (z * w).angle().sum())
_cx("cx_view_as_real", lambda z, w: torch.view_as_real(z * w).pow(2).sum())
_cx("cx_unused", lambda z, w: z.abs().sum())
_cx("cx_exp_log", lambda z, w: (z.exp() + w.log()).abs().sum())
_cx("cx_matmul", lambda z, w: (z.unsqueeze(0) @ w.unsqueeze(1)).abs().sum())
_cx("cx_fft", lambda z, w: torch.fft.fft(z * w).abs().sum())
_cx("cx_detach_real", lambda z, w: (z.abs() * w.detach().real).sum())


@scenario
def cx_from_real_params(C, rec):
    def f(a, b):
        return torch.complex(a, b).abs().sum() + torch.polar(a.abs(), b).real.sum()

    a, b = leaf(4), leaf(4, seed=1)
    C(f)(a, b).backward()
    _grads(rec, a, b)


@scenario
def cx_double_backward(C, rec):
    def f(z):
        return (z * z).abs().sum()

    z = cleaf(3)
    (g,) = torch.autograd.grad(C(f)(z), z, create_graph=True)
    rec("g", g)
    g.abs().sum().backward()
    rec("zg", z.grad)


# ============================================================================================
# accumulation into existing .grad, freezing between steps
@scenario
def accum_existing_grad_transposed(C, rec):
    def f(x, w):
        return (x @ w).sum()

    x, w = leaf(2, 3), leaf(3, 4, seed=1)
    w.grad = torch.ones(4, 3).t()
    C(f)(x, w).backward()
    rec("wg", w.grad)
    rec("stride", w.grad.stride())


@scenario
def accum_existing_grad_expanded(C, rec):
    def f(x, w):
        return (x * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    w.grad = torch.ones(1).expand(3)
    C(f)(x, w).backward()
    rec("wg", w.grad)
    rec("stride", w.grad.stride())


@scenario
def accum_existing_grad_zero_when_unreached(C, rec):
    def f(x, w):
        return (x * 2).sum()

    x, w = leaf(3), leaf(3, seed=1)
    w.grad = torch.full((3,), 5.0)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def accum_create_graph_into_existing(C, rec):
    def f(x):
        return x.pow(3).sum()

    x = leaf(3)
    x.grad = torch.ones(3)
    C(f)(x).backward(create_graph=True)
    rec("xg", x.grad)
    rec("gfn", x.grad.grad_fn is None)


@scenario
def freeze_between_steps_adam(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    cm = C(m)
    for step in range(4):
        if step == 1:
            m[0].weight.requires_grad_(False)
        if step == 2:
            m[0].weight.requires_grad_(True)
            m[2].requires_grad_(False)
        opt.zero_grad()
        cm(leaf(5, 3, seed=step, rg=False)).pow(2).sum().backward()
        rec(f"g{step}", [p.grad for p in m.parameters()])
        opt.step()
    rec("params", [p.detach().clone() for p in m.parameters()])


@scenario
def freeze_input_toggle(C, rec):
    def f(x, w):
        return (x * w).exp().sum()

    g = C(f)
    x, w = leaf(3), leaf(3, seed=1)
    g(x, w).backward()
    _grads(rec, x, w)
    w.requires_grad_(False)
    x.grad = None
    g(x, w).backward()
    _grads(rec, x, w)
    x.requires_grad_(False)
    rec("out", g(x, w))


# ============================================================================================
# outputs that are the same tensor / the input, hooks and detach interplay
@scenario
def same_output_twice(C, rec):
    def f(x):
        y = x.exp()
        return y, y

    x = leaf(3)
    a, b = C(f)(x)
    rec("same", a is b)
    (a.sum() + 2 * b.sum()).backward()
    _grads(rec, x)


@scenario
def output_used_in_next_call(C, rec):
    def f(x, w):
        return (x * w).tanh()

    g = C(f)
    x, w = leaf(3), leaf(3, seed=1)
    h = g(x, w)
    h2 = g(h, w)
    h2.sum().backward()
    _grads(rec, x, w)


@scenario
def output_detached_then_requires_grad(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    h = C(f)(x).detach().requires_grad_()
    C(f)(h).sum().backward()
    rec("hg", h.grad)
    _grads(rec, x)


# ============================================================================================
# double backward through norms and convolutions (WGAN-GP critics), graph cuts
class _Critic(nn.Module):
    def __init__(self, norm):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.norm = norm
        self.head = nn.Linear(4 * 4 * 4, 1)

    def forward(self, x):
        h = F.leaky_relu(self.norm(self.conv(x)), 0.2)
        return self.head(h.flatten(1))


_NORMS = {
    "layernorm": lambda: nn.LayerNorm([4, 4, 4]),
    "groupnorm": lambda: nn.GroupNorm(2, 4),
    "instancenorm": lambda: nn.InstanceNorm2d(4, affine=True),
    "batchnorm": lambda: nn.BatchNorm2d(4),
    "identity": nn.Identity,
}


def _wgan(name, make):
    def fn(C, rec):
        m = _Critic(make()).double()
        x = leaf(3, 2, 4, 4, dtype=torch.float64)
        out = C(m)(x)
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        gp = ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        gp.backward()
        rec("grads", [p.grad for p in m.parameters()])

    fn.__name__ = f"wgan_gp_{name}"
    SCENARIOS[fn.__name__] = fn


for _n, _m in _NORMS.items():
    _wgan(_n, _m)


@scenario
def double_gp_bias_grad_only(C, rec):
    # a penalty on one parameter's gradient only
    m = _mlp(nn.LayerNorm(5))
    x = leaf(4, 3, dtype=torch.float64, rg=False)
    gs = torch.autograd.grad(C(m)(x).pow(2).sum(), list(m.parameters()), create_graph=True)
    gs[3].pow(2).sum().backward()  # the layer norm's bias
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def double_conv_input_grad_wrt_input(C, rec):
    def f(x, w, b):
        return F.conv1d(x, w, b).pow(2).sum()

    x = leaf(1, 2, 5, dtype=torch.float64)
    w, b = leaf(3, 2, 2, seed=1, dtype=torch.float64), leaf(3, seed=2, dtype=torch.float64)
    gx, gw, gb = torch.autograd.grad(C(f)(x, w, b), [x, w, b], create_graph=True)
    rec("flags", [gx.requires_grad, gw.requires_grad, gb.requires_grad])
    rec("ggx", list(torch.autograd.grad(gx.sum(), [x, w, b], allow_unused=True, retain_graph=True)))
    rec("ggb", list(torch.autograd.grad(gb.sum(), [x, w, b], allow_unused=True, retain_graph=True)))


@scenario
def double_through_graph_break(C, rec):
    def f(x, w):
        h = (x * w).tanh()
        _break()
        return F.layer_norm(h, (4,)).pow(3).sum()

    x, w = leaf(4, dtype=torch.float64), leaf(4, seed=1, dtype=torch.float64)
    (gx,) = torch.autograd.grad(C(f)(x, w), x, create_graph=True)
    rec("gg", list(torch.autograd.grad(gx.sum(), [x, w], allow_unused=True)))


@scenario
def double_through_nonzero_cut(C, rec):
    def f(x, w):
        idx = (x > 0).nonzero().squeeze(1)
        return (w[idx].sin() * x[idx]).sum()

    x, w = leaf(5, dtype=torch.float64), leaf(5, seed=1, dtype=torch.float64)
    gx, gw = torch.autograd.grad(C(f)(x, w), [x, w], create_graph=True)
    rec("gg", list(torch.autograd.grad(gx.sum() + gw.sum(), [x, w], allow_unused=True)))


@scenario
def nz_unique_cut(C, rec):
    def f(x, w):
        u = torch.unique(x.round())
        return (w * u.sum()).sum() + x.sum()

    x, w = leaf(5), leaf(5, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nz_masked_select_cut(C, rec):
    def f(x, w):
        return w[x > 100].sum() + (x * 2).sum()

    x, w = leaf(5), leaf(5, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nz_where_detached_branch(C, rec):
    def f(x, w):
        return torch.where(x > 0, w, w.detach() * 3).sum()

    x, w = leaf(5), leaf(5, seed=1)
    C(f)(x, w).backward()
    _grads(rec, x, w)


@scenario
def nz_param_only_in_int_buffer_update(C, rec):
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.scale = nn.Parameter(torch.ones(3))
            self.register_buffer("count", torch.zeros(3, dtype=torch.long))

        def forward(self, x):
            self.count += (self.scale > 0).long()
            return self.lin(x).sum()

    m = M()
    C(m)(leaf(2, 3, rg=False)).backward()
    rec("grads", [p.grad for p in m.parameters()])
    rec("count", m.count)


@scenario
def nz_autograd_backward_mixed_untracked_raises(C, rec):
    def f(x):
        return x * 2, x.argmax()

    x = leaf(4)
    a, i = C(f)(x)
    torch.autograd.backward([a.sum(), i])


@scenario
def anomaly_nan_module_loss(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

    def f(x):
        return m(x).log().sum()

    with torch.autograd.detect_anomaly():
        out = C(f)(leaf(2, 3, rg=False))
        rec("out", out)
        out.backward()


@scenario
def anomaly_nan_double_backward(C, rec):
    def f(x):
        return x.sqrt().sum()

    x = torch.tensor([0.0, 4.0], requires_grad=True)
    with torch.autograd.detect_anomaly():
        (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
        rec("g", g)
        g.sum().backward()


@scenario
def nograd_view_writes_on_params(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)

    def f(x):
        with torch.no_grad():
            lin.weight.t()[0].zero_()
            lin.weight.diagonal().fill_(1.0)
            lin.bias.view(1, 3)[0, 1:].mul_(2)
        return lin(x).sum()

    C(f)(leaf(2, 3)).backward()
    rec("params", [lin.weight, lin.bias])
    rec("grads", [lin.weight.grad, lin.bias.grad])


@scenario
def nograd_view_write_then_saved_use(C, rec):
    def f(x, w):
        with torch.no_grad():
            w.T[1].mul_(3)
        return (x @ w).exp().sum()

    x, w = leaf(2, 3), leaf(3, 2, seed=1)
    C(f)(x, w).backward()
    rec("w", w)
    _grads(rec, x, w)


@scenario
def inference_mode_module_call(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    cm = C(m)
    with torch.inference_mode():
        out = cm(leaf(2, 3, rg=False))
    rec("out", out)
    rec("inf", out.is_inference())
    out2 = cm(leaf(2, 3, seed=1, rg=False))
    out2.sum().backward()
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def inference_mode_input_requires_grad_outputs(C, rec):
    def f(x, w):
        return (x * w).sum(), x[0], w.t()

    x, w = leaf(2, 2), leaf(2, 2, seed=1)
    with torch.inference_mode():
        outs = C(f)(x, w)
    rec("outs", list(outs))
    rec("inf", [o.is_inference() for o in outs])


@scenario
def double_gp_lstm(C, rec):
    torch.manual_seed(0)
    lstm, head = nn.LSTM(4, 6, batch_first=True).double(), nn.Linear(6, 1).double()

    def f(x):
        return head(lstm(x)[0][:, -1]).sum()

    x = leaf(2, 5, 4, dtype=torch.float64)
    (g,) = torch.autograd.grad(C(f)(x), x, create_graph=True)
    rec("g", g)
    g.pow(2).sum().backward()
    rec("grads", [p.grad for p in [*lstm.parameters(), *head.parameters()]])


@scenario
def double_hvp_gru(C, rec):
    torch.manual_seed(0)
    gru = nn.GRU(3, 4).double()
    params = list(gru.parameters())
    x = leaf(5, 2, 3, dtype=torch.float64, rg=False)
    loss = C(lambda x: gru(x)[0].pow(2).sum())(x)
    gs = torch.autograd.grad(loss, params, create_graph=True)
    rec("hv", list(torch.autograd.grad(gs, params, [torch.ones_like(p) for p in params])))


@scenario
def double_attention_raises_as_eager(C, rec):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v).pow(2).sum()

    q, k, v = (leaf(1, 2, 3, 4, seed=i, dtype=torch.float64) for i in range(3))
    (gq,) = torch.autograd.grad(C(f)(q, k, v), q, create_graph=True)
    rec("gq", gq)
    torch.autograd.grad(gq.pow(2).sum(), [q, k, v], allow_unused=True)


_LAYERS = {
    "conv_s2": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 6, 6)),
    "conv_groups": (lambda: nn.Conv2d(4, 4, 3, groups=2), (2, 4, 5, 5)),
    "conv_transpose": (lambda: nn.ConvTranspose2d(3, 2, 4, stride=2, padding=1), (2, 3, 3, 3)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 2), (1, 2, 3, 3, 3)),
    "maxpool": (
        lambda: nn.Sequential(nn.Conv2d(2, 3, 3), nn.Tanh(), nn.MaxPool2d(2)),
        (2, 2, 6, 6),
    ),
    "upsample": (
        lambda: nn.Sequential(nn.Conv2d(2, 2, 1), nn.Upsample(scale_factor=2, mode="bilinear")),
        (1, 2, 3, 3),
    ),
}


def _layer_gp(name, make, shape):
    def fn(C, rec):
        torch.manual_seed(0)
        m = make().double()
        x = leaf(*shape, dtype=torch.float64)
        (g,) = torch.autograd.grad(C(m)(x).sin().sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        rec("grads", [x.grad, *(p.grad for p in m.parameters())])

    fn.__name__ = f"double_layer_{name}"
    SCENARIOS[fn.__name__] = fn


for _n, (_m, _s) in _LAYERS.items():
    _layer_gp(_n, _m, _s)


def main(argv: list[str]) -> int:
    return run(argv, SCENARIOS, base4.compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
