"""torch.func transforms and functional APIs around and inside ``torch.compile(backend="xla")``
(session 32): vmap of a compiled function (in_dims/out_dims, nested, randomness), compiled
vmap, grad/grad_and_value/vjp/jvp/jacrev/jacfwd/hessian/linearize (argnums tuples, has_aux,
pytree outputs, complex), functional_call of a compiled module with replaced parameters and
buffers, per-sample gradients, ensembling with stack_module_state, torch.autograd.functional
(create_graph, vectorize, forward-mode strategy), forward-mode AD dual tensors. Each case runs
in eager and compiled; values, dtypes, shapes, requires_grad, None-ness and errors compared.

    PYTHONPATH=. python scripts/probe_functx32.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_functx32.py   # torch's own

A compiled function called inside a torch.func transform is not compiled (Dynamo runs it
eagerly). At the end of session 32, 240/248 cases agree; the 8 others differ with
``backend="eager"`` too (torch's): ``linearize_around`` (make_fx refuses a compiled function),
``functional_call_bn_tie_and_strict`` (the message names ``OptimizedModule``),
``fwad_param_tangent`` (functional_call of a compiled module refuses dual parameters), and the
``af9_*`` custom Functions (their own backward/jvp/vmap rules lost by Dynamo's trace).
"""

from __future__ import annotations

import copy
import os
import sys
import warnings

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stack_module_state,
    vjp,
    vmap,
)

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.detach().clone(), v.requires_grad)
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, dict):
        return ("L", "dict", [("V", list(v))] + [describe(x) for x in v.values()])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path):
    if a[0] != b[0]:
        return f"{path}: {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        if a[1] != b[1] or a[2] != b[2]:
            return f"{path}: {a[1]}{a[2]} vs {b[1]}{b[2]}"
        if a[4] != b[4]:
            return f"{path}: requires_grad {a[4]} vs {b[4]}"
        x, y = a[3], b[3]
        if x.is_floating_point() or x.is_complex():
            tol = 1e-12 if x.dtype in (torch.float64, torch.complex128) else 2e-5
            if not torch.allclose(x, y, rtol=tol, atol=tol, equal_nan=True):
                err = (x - y).abs().nan_to_num(1e9).max().item()
                return f"{path}: VALUES max err {err:.3g}"
        elif not torch.equal(x, y):
            return f"{path}: VALUES {x} vs {y}"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def compare(name, fn):
    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw)

    exp = observations(fn, lambda f, **kw: f, describe)
    got = observations(fn, C, describe)
    d = difference(got, exp, same)
    return f"ok {name}" if d is None else f"DIFF {name}: {d}"


def mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


# == vmap of a compiled function ==============================================================
@case
def vmap_in_dims_none(C, rec):
    f = C(lambda x, w: (x * w).sin().sum(-1))
    rec("o", vmap(f, in_dims=(0, None))(r(5, 3), r(3, seed=1)))


@case
def vmap_in_dims_1_out_dims_1(C, rec):
    f = C(lambda x: (x.exp(), x.sum()))
    rec("o", vmap(f, in_dims=1, out_dims=(1, 0))(r(3, 4)))


@case
def vmap_nested(C, rec):
    f = C(lambda x, y: (x * y).sum())
    rec("o", vmap(vmap(f, in_dims=(0, None)), in_dims=(None, 0))(r(4, 3), r(5, 3, seed=1)))


@case
def vmap_pytree_in_out(C, rec):
    def f(d):
        return {"s": d["a"] + d["b"], "p": d["a"] * d["b"]}

    out = vmap(C(f))({"a": r(4, 3), "b": r(4, 3, seed=1)})
    rec("o", [out["s"], out["p"]])


@case
def vmap_chunk_size(C, rec):
    f = C(lambda x: x.cos() @ x)
    rec("o", vmap(f, chunk_size=2)(r(5, 3)))


@case
def vmap_randomness_error_dropout(C, rec):
    f = C(lambda x: F.dropout(x, 0.5, training=True))
    rec("o", vmap(f, randomness="error")(r(4, 3)))


@case
def vmap_randomness_same_rand(C, rec):
    f = C(lambda x: x + torch.rand(3))
    o = vmap(f, randomness="same")(torch.zeros(4, 3))
    rec("rows_equal", bool((o == o[0]).all()))
    rec("shape", tuple(o.shape))


@case
def vmap_randomness_different_rand(C, rec):
    f = C(lambda x: x + torch.rand(3))
    o = vmap(f, randomness="different")(torch.zeros(4, 3))
    rec("rows_differ", bool((o[0] != o[1]).any()))


@case
def vmap_module_functional_call(C, rec):
    m = mlp()
    cm = C(m)
    params = {k: v.detach() for k, v in m.named_parameters()}
    rec("o", vmap(lambda x: functional_call(cm, params, (x,)))(r(5, 3)))


@case
def vmap_int_output(C, rec):
    f = C(lambda x: x.argmax())
    rec("o", vmap(f)(r(4, 5)))


@case
def vmap_inplace_on_batched(C, rec):
    def f(x):
        y = x.clone()
        y.add_(1)
        return y * 2

    rec("o", vmap(C(f))(r(4, 3)))


@case
def vmap_inplace_unbatched_into_batched_error(C, rec):
    def f(x, y):
        return x.add_(y)

    rec("o", vmap(C(f), in_dims=(None, 0))(torch.zeros(3), r(4, 3)))


@case
def vmap_mutates_input(C, rec):
    def f(x):
        x.mul_(2)
        return x.sum()

    x = r(4, 3)
    o = vmap(C(f))(x)
    rec("o", o)
    rec("x", x)


# == compiled vmap ===========================================================================
@case
def compiled_vmap_in_out_dims(C, rec):
    f = C(vmap(lambda x, w: x @ w, in_dims=(1, None), out_dims=1))
    rec("o", f(r(3, 5), r(3, 2, seed=1)))


@case
def compiled_nested_vmap(C, rec):
    f = C(vmap(vmap(lambda x, y: (x - y).pow(2).sum(), (0, None)), (None, 0)))
    rec("o", f(r(4, 3), r(6, 3, seed=1)))


@case
def compiled_vmap_randomness_error(C, rec):
    f = C(vmap(lambda x: F.dropout(x, 0.5), randomness="error"))
    rec("o", f(r(4, 3)))


@case
def compiled_vmap_randomness_same(C, rec):
    f = C(vmap(lambda x: x + torch.randn(3), randomness="same"))
    o = f(torch.zeros(4, 3))
    rec("rows_equal", bool((o == o[0]).all()))


@case
def compiled_vmap_randomness_different(C, rec):
    f = C(vmap(lambda x: x + torch.randn(3), randomness="different"))
    o = f(torch.zeros(4, 3))
    rec("rows_differ", bool((o[0] != o[1]).any()))


@case
def compiled_vmap_dropout_different(C, rec):
    f = C(vmap(lambda x: F.dropout(x, 0.5), randomness="different"))
    o = f(torch.ones(64, 16))
    rec("vals", sorted(set(o.flatten().tolist())))
    rec("rows_differ", bool((o[0] != o[1]).any()))


@case
def compiled_vmap_backward(C, rec):
    w = r(3, 2, seed=1).requires_grad_()
    x = r(5, 3).requires_grad_()
    f = C(lambda x: vmap(lambda xi: (xi @ w).tanh())(x))
    f(x).sum().backward()
    rec("g", [x.grad, w.grad])


@case
def compiled_vmap_chunk(C, rec):
    f = C(vmap(lambda x: x.sin().sum(), chunk_size=2))
    rec("o", f(r(5, 3)))


# == grad family around a compiled function ==================================================
@case
def grad_argnums_tuple(C, rec):
    f = C(lambda x, y, z: (x.sin() * y).sum() + z.sum() * 0)
    rec("g", grad(f, argnums=(0, 2))(r(3), r(3, seed=1), r(3, seed=2)))


@case
def grad_has_aux(C, rec):
    def f(x):
        y = x.exp()
        return y.sum(), {"y": y, "n": x.norm()}

    g, aux = grad(C(f), has_aux=True)(r(3))
    rec("g", g)
    rec("aux", [aux["y"], aux["n"]])


@case
def grad_and_value_aux(C, rec):
    def f(x, w):
        y = x @ w
        return y.pow(2).sum(), y

    (g, (v, aux)) = grad_and_value(C(f), argnums=1, has_aux=True)(r(2, 3), r(3, 2, seed=1))
    rec("o", [g, v, aux])


@case
def grad_of_grad_compiled(C, rec):
    f = C(lambda x: (x.sin() * x).sum())
    rec("g2", grad(lambda x: grad(f)(x).sum())(r(3)))


@case
def grad_float64(C, rec):
    f = C(lambda x: (x.log1p() * x).sum())
    rec("g", grad(f)(r(3, dtype=torch.float64).abs()))


@case
def grad_nonscalar_error(C, rec):
    f = C(lambda x: x.sin())
    rec("g", grad(f)(r(3)))


@case
def grad_int_input_error(C, rec):
    f = C(lambda x: x.float().sum())
    rec("g", grad(f)(torch.arange(3)))


@case
def grad_unused_input(C, rec):
    f = C(lambda x, y: x.sum() * 2)
    rec("g", grad(f, argnums=(0, 1))(r(3), r(3, seed=1)))


@case
def grad_complex_real_loss(C, rec):
    f = C(lambda z: (z * z.conj()).real.sum())
    rec("g", grad(f)(torch.randn(3, dtype=torch.complex64)))


@case
def vjp_pytree_out(C, rec):
    def f(x):
        return {"a": x.sin(), "b": (x.cos(), x.sum())}

    out, fn = vjp(C(f), r(3))
    rec("out", [out["a"], out["b"][0], out["b"][1]])
    rec("g", fn({"a": torch.ones(3), "b": (torch.full((3,), 2.0), torch.tensor(3.0))}))


@case
def vjp_has_aux(C, rec):
    def f(x):
        return x.exp(), x.argmax()

    out, fn, aux = vjp(C(f), r(4), has_aux=True)
    rec("o", [out, aux, fn(torch.ones(4))[0]])


@case
def vjp_twice(C, rec):
    _out, fn = vjp(C(lambda x: x.tanh() * 3), r(3))
    rec("a", fn(torch.ones(3)))
    rec("b", fn(torch.full((3,), 2.0)))


@case
def jvp_around_compiled(C, rec):
    f = C(lambda x, y: (x * y).sin())
    rec("o", jvp(f, (r(3), r(3, seed=1)), (torch.ones(3), torch.zeros(3))))


@case
def jvp_has_aux(C, rec):
    f = C(lambda x: (x.exp(), x.sum()))
    rec("o", jvp(f, (r(3),), (torch.ones(3),), has_aux=True))


@case
def jvp_module_compiled(C, rec):
    m = mlp()
    cm = C(m)
    p = dict(m.named_parameters())
    t = {k: torch.ones_like(v) for k, v in p.items()}
    rec("o", jvp(lambda p: functional_call(cm, p, (r(2, 3),)), (p,), (t,)))


@case
def jacfwd_around(C, rec):
    rec("j", jacfwd(C(lambda x: x.sin() * x.sum()))(r(3)))


@case
def jacfwd_argnums(C, rec):
    rec("j", jacfwd(C(lambda x, w: (x @ w).tanh()), argnums=(0, 1))(r(2, 3), r(3, 2, seed=1)))


@case
def jacrev_argnums_has_aux(C, rec):
    def f(x, w):
        y = (x @ w).tanh()
        return y, y.sum()

    rec("j", jacrev(C(f), argnums=(0, 1), has_aux=True)(r(2, 3), r(3, 2, seed=1)))


@case
def jacrev_pytree_out(C, rec):
    f = C(lambda x: (x.sin(), {"c": x.cos().sum()}))
    j = jacrev(f)(r(3))
    rec("j", [j[0], j[1]["c"]])


@case
def hessian_around(C, rec):
    rec("h", hessian(C(lambda x: (x.sin() * x.pow(2)).sum()))(r(3)))


@case
def hessian_argnums(C, rec):
    f = C(lambda x, y: (x.exp() * y.sin()).sum())
    rec("h", hessian(f, argnums=(0, 1))(r(2), r(2, seed=1)))


@case
def jacrev_holomorphic_error(C, rec):
    rec("j", jacrev(C(lambda z: z * z))(torch.randn(3, dtype=torch.complex64)))


@case
def linearize_around(C, rec):
    out, fn = linearize(C(lambda x: x.sin() * x), r(3))
    rec("o", [out, fn(torch.ones(3)), fn(torch.full((3,), 2.0))])


@case
def jacfwd_randomness_error(C, rec):
    rec("j", jacfwd(C(lambda x: F.dropout(x, 0.5) * x))(r(3)))


# == compiled over transforms ================================================================
@case
def compiled_grad_argnums_aux(C, rec):
    def loss(x, w):
        y = x @ w
        return y.pow(2).mean(), y.detach()

    f = C(grad(loss, argnums=(0, 1), has_aux=True))
    rec("o", f(r(2, 3), r(3, 4, seed=1)))


@case
def compiled_grad_and_value(C, rec):
    f = C(grad_and_value(lambda x: (x.sin() * x).sum()))
    rec("o", f(r(3)))


@case
def compiled_jacfwd(C, rec):
    f = C(jacfwd(lambda x: x.sin() * x.sum()))
    rec("o", f(r(3)))


@case
def compiled_jvp(C, rec):
    f = C(lambda x, t: jvp(lambda x: x.exp() * x, (x,), (t,)))
    rec("o", f(r(3), torch.ones(3)))


@case
def compiled_hessian_of_module_loss(C, rec):
    m = mlp()
    x = r(2, 3)
    p = {k: v.detach() for k, v in m.named_parameters()}

    def f(b):
        return hessian(lambda b: functional_call(m, {**p, "2.bias": b}, (x,)).pow(2).sum())(b)

    rec("o", C(f)(p["2.bias"]))


@case
def compiled_linearize(C, rec):
    def f(x, t):
        out, fn = linearize(lambda x: x.sin() * x, x)
        return out, fn(t)

    rec("o", C(f)(r(3), torch.ones(3)))


@case
def compiled_vjp_complex(C, rec):
    def f(z, g):
        out, fn = vjp(lambda z: z * z.conj() + z.exp(), z)
        return out, fn(g)

    z = torch.randn(3, dtype=torch.complex64)
    rec("o", C(f)(z, torch.ones(3, dtype=torch.complex64)))


@case
def compiled_jacrev_complex_holomorphic(C, rec):
    z = torch.randn(3, dtype=torch.complex64)
    rec("o", C(jacrev(lambda z: z.exp() * z))(z))


@case
def compiled_grad_nonscalar_error(C, rec):
    rec("o", C(grad(lambda x: x * 2))(r(3)))


# == functional_call on a compiled module ====================================================
@case
def functional_call_replaced_params(C, rec):
    m = mlp()
    cm = C(m)
    x = r(2, 3)
    rec("orig", cm(x))
    new = {k: torch.ones_like(v) for k, v in m.named_parameters()}
    rec("new", functional_call(cm, new, (x,)))
    rec("orig_again", cm(x))


@case
def functional_call_partial_dict(C, rec):
    m = mlp()
    cm = C(m)
    x = r(2, 3)
    rec("a", functional_call(cm, {"0.weight": torch.zeros(4, 3)}, (x,)))
    rec("b", cm(x))


@case
def functional_call_bn_buffers_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    cm = C(m)
    bufs = {k: v.clone() for k, v in m.named_buffers()}
    x = r(5, 3)
    out = functional_call(cm, bufs, (x,))
    rec("out", out)
    rec("bufs", list(bufs.values()))
    rec("mod_bufs", list(m.buffers()))


@case
def functional_call_bn_tie_and_strict(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    cm = C(m)
    x = r(5, 3)
    bufs = {"1.running_mean": torch.ones(4), "1.running_var": torch.full((4,), 4.0)}
    rec("out", functional_call(cm, bufs, (x,)))
    rec("strict", functional_call(cm, bufs, (x,), strict=True))


@case
def functional_call_grads_to_given(C, rec):
    m = mlp()
    cm = C(m)
    new = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    functional_call(cm, new, (r(2, 3),)).pow(2).sum().backward()
    rec("g_new", [v.grad for v in new.values()])
    rec("g_mod", [p.grad for p in m.parameters()])


@case
def functional_call_tuple_of_dicts(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    cm = C(m)
    p = {k: v * 2 for k, v in m.named_parameters()}
    b = {k: v + 1 for k, v in m.named_buffers()}
    rec("o", functional_call(cm, (p, b), (r(5, 3),)))


@case
def functional_call_kwargs(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, *, scale=1.0):
            return self.lin(x) * scale

    torch.manual_seed(0)
    m = M()
    cm = C(m)
    new = {"lin.weight": torch.eye(3), "lin.bias": torch.zeros(3)}
    rec("o", functional_call(cm, new, (r(2, 3),), {"scale": 3.0}))


# == per-sample gradients, ensembling ========================================================
def _ps_setup():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    params = {k: v.detach() for k, v in m.named_parameters()}
    x, y = r(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    return m, params, x, y


@case
def per_sample_grads_compiled_loss(C, rec):
    m, params, x, y = _ps_setup()

    def loss(p, xi, yi):
        out = functional_call(m, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    cl = C(loss)
    g = vmap(grad(cl), in_dims=(None, 0, 0))(params, x, y)
    rec("g", list(g.values()))


@case
def per_sample_grads_compiled_whole(C, rec):
    m, params, x, y = _ps_setup()

    def loss(p, xi, yi):
        out = functional_call(m, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    f = C(vmap(grad(loss), in_dims=(None, 0, 0)))
    rec("g", list(f(params, x, y).values()))
    rec("g2", list(f(params, x * 2, y).values()))


@case
def per_sample_grads_compiled_module(C, rec):
    m, params, x, y = _ps_setup()
    cm = C(m)

    def loss(p, xi, yi):
        out = functional_call(cm, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    g = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    rec("g", list(g.values()))


@case
def ensemble_stack_module_state(C, rec):
    models = [mlp(seed=i) for i in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def f(p, b, x):
        return functional_call(base, (p, b), (x,))

    x = r(5, 3)
    rec("same_x", C(vmap(f, in_dims=(0, 0, None)))(params, buffers, x))
    xs = r(3, 5, 3, seed=1)
    rec("diff_x", C(vmap(f))(params, buffers, xs))


@case
def ensemble_compiled_inner(C, rec):
    models = [mlp(seed=i) for i in range(3)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    f = C(lambda p, b, x: functional_call(base, (p, b), (x,)))
    rec("o", vmap(f, in_dims=(0, 0, None))(params, buffers, r(5, 3)))


@case
def ensemble_grads(C, rec):
    models = [mlp(seed=i) for i in range(2)]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def f(p, b, x):
        return functional_call(base, (p, b), (x,)).pow(2).sum()

    C(lambda p, b, x: vmap(f, in_dims=(0, 0, None))(p, b, x).sum())(
        params, buffers, r(5, 3)
    ).backward()
    rec("g", [v.grad for v in params.values()])


# == torch.autograd.functional ===============================================================
@case
def af_jacobian_create_graph(C, rec):
    x = r(3).requires_grad_()
    j = torch.autograd.functional.jacobian(C(lambda x: x.sin() * x), x, create_graph=True)
    rec("j", j)
    j.sum().backward()
    rec("g", x.grad)


@case
def af_jacobian_forward_mode(C, rec):
    f = C(lambda x: x.sin() * x.sum())
    rec("j", torch.autograd.functional.jacobian(f, r(3), vectorize=True, strategy="forward-mode"))


@case
def af_hessian_vectorize_outer_jacobian(C, rec):
    f = C(lambda x: (x.exp() * x).sum())
    rec(
        "h",
        torch.autograd.functional.hessian(
            f, r(3), vectorize=True, outer_jacobian_strategy="forward-mode"
        ),
    )


@case
def af_jacobian_tuple_vectorize(C, rec):
    f = C(lambda x, w: ((x @ w).tanh(), x.sum()))
    rec("j", torch.autograd.functional.jacobian(f, (r(2, 3), r(3, 2, seed=1)), vectorize=True))


@case
def af_hessian_create_graph(C, rec):
    x = r(3).requires_grad_()
    h = torch.autograd.functional.hessian(C(lambda x: x.pow(3).sum()), x, create_graph=True)
    rec("h", h)
    h.sum().backward()
    rec("g", x.grad)


@case
def af_vjp_jvp_create_graph(C, rec):
    x = r(3).requires_grad_()
    f = C(lambda x: x.exp() * x)
    _o, v = torch.autograd.functional.vjp(f, x, torch.ones(3), create_graph=True)
    rec("v", v)
    _o2, t = torch.autograd.functional.jvp(f, x, torch.ones(3), create_graph=True)
    rec("t", t)
    (v.sum() + t.sum()).backward()
    rec("g", x.grad)


@case
def af_strict_independent(C, rec):
    f = C(lambda x, y: x * 2 + y.detach())
    rec("j", torch.autograd.functional.jacobian(f, (r(3), r(3, seed=1)), strict=True))


@case
def af_jacobian_unused_input(C, rec):
    f = C(lambda x, y: x.sin())
    rec("j", torch.autograd.functional.jacobian(f, (r(3), r(3, seed=1))))


@case
def af_vhp_hvp(C, rec):
    f = C(lambda x: (x.sin() * x.pow(2)).sum())
    rec("vhp", torch.autograd.functional.vhp(f, r(3), torch.ones(3)))
    rec("hvp", torch.autograd.functional.hvp(f, r(3), torch.ones(3)))


# == forward-mode AD =========================================================================
@case
def fwad_two_duals(C, rec):
    f = C(lambda x, y: (x * y).sin() + y)
    with fwAD.dual_level():
        o = f(
            fwAD.make_dual(r(3), torch.ones(3)), fwAD.make_dual(r(3, seed=1), torch.full((3,), 2.0))
        )
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_tuple_outputs(C, rec):
    f = C(lambda x: (x.exp(), x.sum(), x.argmax()))
    with fwAD.dual_level():
        a, b, c = f(fwAD.make_dual(r(3), torch.ones(3)))
        rec("a", list(fwAD.unpack_dual(a)))
        rec("b", list(fwAD.unpack_dual(b)))
        rec("c", list(fwAD.unpack_dual(c)))


@case
def fwad_param_tangent(C, rec):
    m = nn.Linear(3, 2)
    cm = C(m)
    with fwAD.dual_level():
        p = {k: fwAD.make_dual(v.detach(), torch.ones_like(v)) for k, v in m.named_parameters()}
        o = functional_call(cm, p, (r(4, 3),))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_no_tangent_then_tangent(C, rec):
    f = C(lambda x: x.tanh() * 2)
    with fwAD.dual_level():
        rec("plain", list(fwAD.unpack_dual(f(r(3)))))
        rec("dual", list(fwAD.unpack_dual(f(fwAD.make_dual(r(3), torch.ones(3))))))
    rec("after", f(r(3)))


@case
def fwad_inplace(C, rec):
    def f(x):
        y = x * 1
        y.mul_(x)
        return y

    with fwAD.dual_level():
        rec("o", list(fwAD.unpack_dual(C(f)(fwAD.make_dual(r(3), torch.ones(3))))))


@case
def fwad_mutates_dual_input(C, rec):
    def f(x):
        x.mul_(2)
        return x.sum()

    with fwAD.dual_level():
        d = fwAD.make_dual(r(3), torch.ones(3))
        o = C(f)(d)
        rec("o", list(fwAD.unpack_dual(o)))
        rec("d", list(fwAD.unpack_dual(d)))


@case
def fwad_bn_train(C, rec):
    torch.manual_seed(0)
    m = nn.BatchNorm1d(3)
    with fwAD.dual_level():
        o = C(m)(fwAD.make_dual(r(5, 3), torch.ones(5, 3)))
        rec("o", list(fwAD.unpack_dual(o)))
    rec("bufs", list(m.buffers()))


@case
def fwad_dropout(C, rec):
    with fwAD.dual_level():
        o = C(lambda x: F.dropout(x, 0.5))(fwAD.make_dual(torch.ones(4, 4), torch.ones(4, 4)))
        p, t = fwAD.unpack_dual(o)
        rec("same_mask", bool(((p == 0) == (t == 0)).all()))


@case
def fwad_no_forward_derivative_error(C, rec):
    # an op without a forward-mode formula
    f = C(lambda x: torch.ops.aten._fused_moving_avg_obs_fq_helper if False else x.cummax(0)[0])
    with fwAD.dual_level():
        o = f(fwAD.make_dual(r(4), torch.ones(4)))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_complex(C, rec):
    z = torch.randn(3, dtype=torch.complex64)
    with fwAD.dual_level():
        o = C(lambda z: z.exp() * z.conj())(fwAD.make_dual(z, torch.ones(3, dtype=torch.complex64)))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_output_is_input_view(C, rec):
    f = C(lambda x: (x[1:], x.sum()))
    with fwAD.dual_level():
        a, b = f(fwAD.make_dual(r(3), torch.arange(3.0)))
        rec("a", list(fwAD.unpack_dual(a)))
        rec("b", list(fwAD.unpack_dual(b)))


# == batch 2: compiled over transforms with modules, state, randomness, indexing ==============
@case
def c_grad_bn_train_functional_call(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
    p = {k: v.detach() for k, v in m.named_parameters()}
    b = dict(m.named_buffers())

    def f(p, x):
        return grad(lambda p: functional_call(m, (p, b), (x,)).pow(2).sum())(p)

    g = C(f)(p, r(5, 3))
    rec("g", list(g.values()))
    rec("bufs", list(m.buffers()))


@case
def c_grad_dropout_seeded(C, rec):
    def f(x):
        return grad(lambda x: (F.dropout(x, 0.5) * x).sum())(x)

    torch.manual_seed(3)
    g = C(f)(torch.ones(64))
    rec("vals", sorted(set(g.tolist())))


@case
def c_vmap_gather_batched_index(C, rec):
    f = C(vmap(lambda x, i: x[i] * 2 + x.gather(0, i)))
    rec("o", f(r(4, 6), torch.tensor([[0, 5], [1, 1], [2, 3], [5, 0]])))


@case
def c_vmap_index_select_unbatched_idx(C, rec):
    idx = torch.tensor([2, 0])
    f = C(vmap(lambda x: x.index_select(0, idx).sum() + x[idx].prod()))
    rec("o", f(r(4, 6)))


@case
def c_vmap_where_scalar(C, rec):
    f = C(vmap(lambda x: torch.where(x > 0, x, 0.0).cumsum(0)))
    rec("o", f(r(4, 6)))


@case
def c_vmap_item_error(C, rec):
    f = C(vmap(lambda x: x * x.sum().item()))
    rec("o", f(r(4, 6)))


@case
def c_vmap_nonzero_error(C, rec):
    f = C(vmap(lambda x: x.nonzero()))
    rec("o", f(r(4, 6)))


@case
def c_vmap_out_dims_none(C, rec):
    w = r(3)
    f = C(vmap(lambda x: (x * w, w * 2), out_dims=(0, None)))
    rec("o", f(r(4, 3)))


@case
def c_vmap_in_dims_dict(C, rec):
    def f(d, s):
        return d["a"] * s + d["b"]

    g = C(vmap(f, in_dims=({"a": 0, "b": None}, None)))
    rec("o", g({"a": r(4, 3), "b": r(3, seed=1)}, 2.0))


@case
def c_vmap_kwargs(C, rec):
    def f(x, *, scale):
        return x * scale

    rec("o", C(lambda x: vmap(f)(x, scale=3.0))(r(4, 3)))


@case
def c_vmap_inplace_batched(C, rec):
    def f(x):
        y = torch.zeros(3)
        y.add_(x)
        return y

    rec("o", C(vmap(f))(r(4, 3)))


@case
def c_vmap_inplace_on_captured(C, rec):
    acc = torch.zeros(3)

    def f(x):
        acc.add_(x)
        return x

    rec("o", C(vmap(f))(r(4, 3)))
    rec("acc", acc)


@case
def c_vmap_mutate_input(C, rec):
    def f(x):
        x.mul_(2)
        return x.sum()

    x = r(4, 3)
    rec("o", C(vmap(f))(x))
    rec("x", x)


@case
def c_vmap_view_output(C, rec):
    x = r(4, 6)
    o = C(vmap(lambda x: x[1:3]))(x)
    rec("o", o)
    o.mul_(0)
    rec("x", x)


@case
def c_vmap_layernorm_embedding(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4)
    ln = nn.LayerNorm(4)
    f = C(vmap(lambda i: ln(emb(i)).sum(0)))
    rec("o", f(torch.tensor([[1, 2, 3], [4, 5, 9]])))


@case
def c_vmap_conv(C, rec):
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    f = C(vmap(lambda x: conv(x.unsqueeze(0)).relu().mean()))
    rec("o", f(r(4, 2, 5, 5)))


@case
def c_vmap_matmul_param_backward(C, rec):
    torch.manual_seed(0)
    m = mlp()
    f = C(vmap(lambda x: m(x).sum()))
    f(r(4, 3)).sum().backward()
    rec("g", [p.grad for p in m.parameters()])


@case
def c_per_sample_conv(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 3 * 3, 3))
    p = {k: v.detach() for k, v in m.named_parameters()}
    x, y = r(4, 1, 5, 5), torch.tensor([0, 1, 2, 1])

    def loss(p, xi, yi):
        return F.cross_entropy(functional_call(m, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    g = C(vmap(grad(loss), in_dims=(None, 0, 0)))(p, x, y)
    rec("g", list(g.values()))


@case
def c_per_sample_bn_eval_buffers(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).eval()
    m[1].running_mean.fill_(0.5)
    p = {k: v.detach() for k, v in m.named_parameters()}
    b = {k: v.detach() for k, v in m.named_buffers()}

    def loss(p, b, xi):
        return functional_call(m, (p, b), (xi.unsqueeze(0),)).pow(2).sum()

    g = C(vmap(grad(loss), in_dims=(None, None, 0)))(p, b, r(5, 3))
    rec("g", list(g.values()))


@case
def c_per_sample_dropout_different(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    p = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p, xi):
        return functional_call(m, p, (xi,)).sum()

    g = C(vmap(grad(loss), in_dims=(None, 0), randomness="different"))(p, torch.ones(6, 8))
    rec("shape", tuple(g["0.weight"].shape))
    rec("rows_differ", bool((g["0.weight"][0] != g["0.weight"][1]).any()))


@case
def c_per_sample_dropout_error(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    p = {k: v.detach() for k, v in m.named_parameters()}

    def loss(p, xi):
        return functional_call(m, p, (xi,)).sum()

    rec("g", C(vmap(grad(loss), in_dims=(None, 0)))(p, torch.ones(6, 8)))


@case
def c_jacrev_model_params(C, rec):
    m = mlp()
    p = {k: v.detach() for k, v in m.named_parameters()}
    j = C(jacrev(lambda p, x: functional_call(m, p, (x,))))(p, r(2, 3))
    rec("j", list(j.values()))


@case
def c_jacfwd_jacrev_hessian_module(C, rec):
    m = mlp()
    f = C(jacfwd(jacrev(lambda x: m(x).sum())))
    rec("h", f(r(3)))


@case
def c_hessian_params_dict(C, rec):
    m = nn.Linear(3, 1)
    p = {k: v.detach() for k, v in m.named_parameters()}
    h = C(hessian(lambda p, x: functional_call(m, p, (x,)).tanh().sum()))(p, r(2, 3))
    rec("h", [h["weight"]["weight"], h["weight"]["bias"], h["bias"]["bias"]])


@case
def c_grad_then_backward_to_param(C, rec):
    w = r(3, seed=1).requires_grad_()

    def f(x):
        g = grad(lambda x: (x.sin() * w).sum())(x)
        return (g * w).sum()

    C(f)(r(3)).backward()
    rec("w", w.grad)


@case
def c_grad_returns_requires_grad(C, rec):
    w = r(3, seed=1).requires_grad_()
    rec("g", C(lambda x: grad(lambda x: (x * w).sum())(x))(r(3)))
    rec("g_nograd_w", C(lambda x: grad(lambda x: (x * x).sum())(x))(r(3).requires_grad_()))


@case
def c_grad_inplace_inside(C, rec):
    def loss(x):
        y = x.clone()
        y[0] = y[0] * 3
        y.mul_(x)
        return y.sum()

    rec("g", C(grad(loss))(r(3)))


@case
def c_vjp_outside_closure_returned(C, rec):
    def f(x):
        out, fn = vjp(lambda x: x.sin() * 2, x)
        return out, fn(torch.ones_like(out))[0], fn(out)[0]

    rec("o", C(f)(r(3)))


@case
def c_jvp_with_module(C, rec):
    m = mlp()
    p = {k: v.detach() for k, v in m.named_parameters()}
    t = {k: torch.ones_like(v) for k, v in p.items()}
    rec(
        "o",
        C(lambda p, t, x: jvp(lambda p: functional_call(m, p, (x,)), (p,), (t,)))(p, t, r(2, 3)),
    )


@case
def c_jvp_of_grad(C, rec):
    f = lambda x: (x.sin() * x.pow(2)).sum()
    rec("o", C(lambda x, v: jvp(grad(f), (x,), (v,)))(r(3), torch.ones(3)))


@case
def c_vmap_jvp_jacobian(C, rec):
    f = lambda x: x.sin() * x.sum()

    def jac(x):
        return vmap(lambda v: jvp(f, (x,), (v,))[1])(torch.eye(3))

    rec("o", C(jac)(r(3)))


@case
def c_grad_int_output_aux(C, rec):
    def f(x):
        return x.pow(2).sum(), x.argmax()

    rec("o", C(grad(f, has_aux=True))(r(4)))


@case
def c_grad_float64_half(C, rec):
    rec("o64", C(grad(lambda x: (x.sin() * x).sum()))(r(3, dtype=torch.float64)))
    rec("o16", C(grad(lambda x: (x.sin() * x).sum().float()))(r(3, dtype=torch.bfloat16)))


@case
def c_grad_argnums_int_error(C, rec):
    rec("o", C(grad(lambda x, i: (x * i).sum(), argnums=1))(r(3), torch.arange(3)))


@case
def c_grad_of_compiled_nested(C, rec):
    inner = C(lambda x: x.sin().sum())
    rec("o", C(lambda x: grad(lambda x: inner(x) * x.sum())(x))(r(3)))


# == batch 2: forward-mode AD and autograd.functional ========================================
@case
def fwad_also_requires_grad(C, rec):
    x = r(3).requires_grad_()
    f = C(lambda x: x.exp() * 2)
    with fwAD.dual_level():
        o = f(fwAD.make_dual(x, torch.ones(3)))
        p, t = fwAD.unpack_dual(o)
        rec("o", [p, t])
        (p.sum() + t.sum()).backward()
    rec("g", x.grad)


@case
def fwad_noncontig_tangent(C, rec):
    t = torch.arange(6.0).reshape(2, 3).t()
    f = C(lambda x: x.sin() @ x.t())
    with fwAD.dual_level():
        o = f(fwAD.make_dual(r(3, 2), t))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_no_grad(C, rec):
    f = C(lambda x: x.tanh().cumsum(0))
    with torch.no_grad(), fwAD.dual_level():
        rec("o", list(fwAD.unpack_dual(f(fwAD.make_dual(r(3), torch.ones(3))))))


@case
def fwad_module_buffers_dual_param(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    cm = C(m)
    with fwAD.dual_level():
        o = cm(fwAD.make_dual(r(5, 3), torch.ones(5, 3)))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_int_and_dual(C, rec):
    f = C(lambda x, i: x[i] * 2 + i.float())
    with fwAD.dual_level():
        o = f(fwAD.make_dual(r(5), torch.arange(5.0)), torch.tensor([4, 0]))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def fwad_returns_input(C, rec):
    f = C(lambda x, y: (x, y * 2))
    with fwAD.dual_level():
        d = fwAD.make_dual(r(3), torch.ones(3))
        a, b = f(d, r(3, seed=1))
        rec("is", a is d)
        rec("a", list(fwAD.unpack_dual(a)))
        rec("b", list(fwAD.unpack_dual(b)))


@case
def fwad_nested_levels(C, rec):
    f = C(lambda x: x.sin())
    with fwAD.dual_level():
        o = f(fwAD.make_dual(r(3), torch.ones(3)))
        rec("a", list(fwAD.unpack_dual(o)))
    with fwAD.dual_level():
        o = f(r(3))
        rec("b", list(fwAD.unpack_dual(o)))


@case
def fwad_graph_break(C, rec):
    def f(x):
        y = x.sin()
        print(end="")
        return y * x.cos()

    with fwAD.dual_level():
        rec("o", list(fwAD.unpack_dual(C(f)(fwAD.make_dual(r(3), torch.ones(3))))))


@case
def fwad_mixed_dtypes(C, rec):
    f = C(lambda x, y: x.double() * y)
    with fwAD.dual_level():
        o = f(fwAD.make_dual(r(3), torch.ones(3)), r(3, seed=1, dtype=torch.float64))
        rec("o", list(fwAD.unpack_dual(o)))


@case
def af_jacobian_vectorize_create_graph(C, rec):
    x = r(3).requires_grad_()
    j = torch.autograd.functional.jacobian(
        C(lambda x: x.sin() * x.sum()), x, create_graph=True, vectorize=True
    )
    rec("j", j)
    j.sum().backward()
    rec("g", x.grad)


@case
def af_hessian_vectorize_module(C, rec):
    m = mlp()
    rec("h", torch.autograd.functional.hessian(lambda x: C(m)(x).sum(), r(3), vectorize=True))


@case
def af_jacobian_vectorize_multi_out_unused(C, rec):
    f = C(lambda x, y: (x.sin(), x.sum() * 0 + 1, y.argmax().float()))
    rec("j", torch.autograd.functional.jacobian(f, (r(3), r(3, seed=1)), vectorize=True))


@case
def af_jacobian_vectorize_view_out(C, rec):
    f = C(lambda x: x[1:])
    rec("j", torch.autograd.functional.jacobian(f, r(3), vectorize=True))


@case
def autograd_grad_batched_views(C, rec):
    x = r(4).requires_grad_()
    o = C(lambda x: (x.exp(), x[:2]))(x)
    g = torch.autograd.grad(
        o,
        x,
        (
            torch.eye(4)
            .unsqueeze(0)
            .expand(2, 4, 4)
            .reshape(2, 4, 4)[:, :, :4]
            .reshape(2, 4, 4)[0:2, 0],
            torch.ones(2, 2),
        ),
        is_grads_batched=True,
    )
    rec("g", g)


@case
def autograd_grad_batched_module_params(C, rec):
    m = mlp()
    o = C(m)(r(2, 3))
    g = torch.autograd.grad(o, list(m.parameters()), torch.randn(5, 2, 2), is_grads_batched=True)
    rec("g", g)


@case
def af_jvp_forward_mode_strategy_hessian(C, rec):
    f = C(lambda x: (x.sin() * x).sum())
    rec(
        "h",
        torch.autograd.functional.hessian(
            f, r(3), vectorize=True, outer_jacobian_strategy="forward-mode"
        ),
    )
    rec(
        "j",
        torch.autograd.functional.jacobian(
            C(lambda x, y: x * y.exp()),
            (r(3), r(3, seed=1)),
            vectorize=True,
            strategy="forward-mode",
        ),
    )


# == batch 3: untracked values written through views inside transforms, params requiring grad ==
def _wp():
    return r(3, seed=5).requires_grad_()


@case
def c_jacrev_jacrev_closure_param(C, rec):
    w = _wp()
    h = C(jacrev(jacrev(lambda x: (x.sin() * w).sum())))(r(3))
    rec("h", h)
    h.sum().backward()
    rec("w", w.grad)


@case
def c_hessian_module_params_backward(C, rec):
    m = mlp()
    h = C(hessian(lambda x: m(x).pow(2).sum()))(r(3))
    rec("h", h)
    h.sum().backward()
    rec("g", [p.grad for p in m.parameters()])


@case
def c_grad_mask_written_inside(C, rec):
    w = _wp()

    def loss(x):
        mask = torch.zeros_like(x)
        mask[0] = 1.0
        mask.diagonal().add_(0) if mask.dim() > 1 else None
        return (x * mask * w).sum() + (x.detach().sin() * x).sum()

    g = C(grad(loss))(r(3))
    rec("g", g)
    g.sum().backward()
    rec("w", w.grad)


@case
def c_grad_of_detached_input_with_param(C, rec):
    w = _wp()

    def f(y):
        return grad(lambda x: (x.sin() * w).sum())(y.detach() * 2)

    y = r(3).requires_grad_()
    g = C(f)(y)
    rec("g", g)
    g.sum().backward()
    rec("grads", [w.grad, y.grad])


@case
def c_vmap_new_zeros_view_write(C, rec):
    w = _wp()

    def f(x):
        e = x.new_zeros(3, 3)
        e.diagonal().fill_(1.0)
        return (e @ x) * w

    o = C(vmap(f))(r(4, 3))
    rec("o", o)
    o.sum().backward()
    rec("w", w.grad)


@case
def c_jacrev_vmap_basis_inside_grad(C, rec):
    w = _wp()

    def f(x):
        return grad(lambda x: jacrev(lambda x: x.exp() * w)(x).sum())(x)

    g = C(f)(r(3))
    rec("g", g)
    g.sum().backward()
    rec("w", w.grad)


@case
def c_grad_recorded_write_into_zeros(C, rec):
    w = _wp()

    def loss(x):
        z = torch.zeros(3)
        z[0] = (x[0] * w[0]).sin()
        z[1:].add_(x[1:] * w[1:])
        return (z * x).sum()

    g = C(grad(loss))(r(3))
    rec("g", g)
    g.sum().backward()
    rec("w", w.grad)


@case
def c_grad_no_grad_inside(C, rec):
    w = _wp()

    def loss(x):
        with torch.no_grad():
            s = (x * w).sum()
        return (x.sin() * s * w).sum()

    g = C(grad(loss))(r(3))
    rec("g", g)
    g.sum().backward()
    rec("w", w.grad)


@case
def c_grad_detach_inside(C, rec):
    w = _wp()

    def loss(x):
        y = (x * w).detach()
        y2 = x.detach()
        y2.mul_(1)
        return (x * y * w + y2 * w).sum()

    g = C(grad(loss))(r(3))
    rec("g", g)
    g.sum().backward()
    rec("w", w.grad)


@case
def c_vmap_grad_zeros_like_write(C, rec):
    w = _wp()

    def loss(x):
        buf = torch.zeros_like(x)
        buf.copy_(x * w)
        buf[0] = 0
        return buf.pow(2).sum()

    g = C(vmap(grad(loss)))(r(4, 3))
    rec("g", g)
    g.sum().backward()
    rec("w", w.grad)


@case
def c_jacfwd_write_into_eye(C, rec):
    w = _wp()

    def f(x):
        e = torch.eye(3)
        e[1, 1] = 2.0
        e.diagonal().mul_(x)
        return e @ (x * w)

    j = C(jacfwd(f))(r(3))
    rec("j", j)
    j.sum().backward()
    rec("w", w.grad)


@case
def c_jacrev_module_inside_vmap(C, rec):
    m = mlp()
    j = C(vmap(jacrev(m)))(r(4, 3))
    rec("j", j)
    j.sum().backward()
    rec("g", [p.grad for p in m.parameters()])


@case
def c_hessian_vmap_params(C, rec):
    m = nn.Linear(3, 1)
    h = C(vmap(hessian(lambda x: m(x).tanh().sum())))(r(4, 3))
    rec("h", h)
    h.sum().backward()
    rec("g", [p.grad for p in m.parameters()])


@case
def c_jacrev_twice_argnums_param(C, rec):
    w = _wp()
    f = lambda x, y: (x.sin() * y * w).sum()
    h = C(jacrev(jacrev(f, argnums=(0, 1)), argnums=(0, 1)))(r(3), r(3, seed=1))
    rec("h", h)
    sum(t.sum() for row in h for t in row).backward()
    rec("w", w.grad)


@case
def c_jacrev_chunk_size_param(C, rec):
    w = _wp()
    j = C(jacrev(jacrev(lambda x: (x.exp() * w).sum()), chunk_size=1))(r(3))
    rec("j", j)
    j.sum().backward()
    rec("w", w.grad)


# == batch 4: writes inside compiled vmap / grad (Dynamo's example values are functorch wrappers)
def _writes_fn(kind):
    def f(x):
        y = x.clone()
        if kind == "setitem_int":
            y[0] = 5.0
        elif kind == "setitem_slice":
            y[1:] = y[:-1] * 2
        elif kind == "iadd_slice":
            y[1:] += 1.0
        elif kind == "mask":
            y[y > 0] = 0.0
        elif kind == "index_tensor":
            y[torch.tensor([0, 2])] = x[:2]
        elif kind == "masked_fill":
            y.masked_fill_(y < 0, 1.0)
        elif kind == "scatter":
            y.scatter_(0, torch.tensor([1, 0]), x[:2])
        elif kind == "index_add":
            y.index_add_(0, torch.tensor([0, 0]), x[1:])
        elif kind == "out":
            torch.sin(x, out=y)
        elif kind == "view_write":
            y.view(3, 1)[1].mul_(3)
        elif kind == "ellipsis":
            y[..., -1] = 2.0
        elif kind == "zero_":
            y[1:2].zero_()
        return y * x

    return f


for _k in (
    "setitem_int",
    "setitem_slice",
    "iadd_slice",
    "mask",
    "index_tensor",
    "masked_fill",
    "scatter",
    "index_add",
    "out",
    "view_write",
    "ellipsis",
    "zero_",
):

    def _vm(C, rec, _k=_k):
        rec("o", C(vmap(_writes_fn(_k)))(r(4, 3)))

    def _vmg(C, rec, _k=_k):
        w = _wp()
        g = C(vmap(grad(lambda x: (_writes_fn(_k)(x) * w).sum())))(r(4, 3))
        rec("g", g)
        g.sum().backward()
        rec("w", w.grad)

    def _vmin(C, rec, _k=_k):
        rec("o", vmap(C(_writes_fn(_k)))(r(4, 3)))

    CASES[f"w_vmap_{_k}"] = _vm
    CASES[f"w_vmap_grad_{_k}"] = _vmg
    CASES[f"w_vmap_of_compiled_{_k}"] = _vmin


# == batch 5: checks that read example values, inside compiled vmap ===========================
@case
def e_vmap_tensor_subscript(C, rec):
    k = torch.tensor(1)
    rec("o", C(vmap(lambda x: x[k] * 2))(r(4, 3)))


@case
def e_vmap_tensor_subscript_write(C, rec):
    def f(x, k):
        y = x.clone()
        y[k] = 7.0
        return y

    rec("o", C(vmap(f, in_dims=(0, None)))(r(4, 3), torch.tensor(2)))


@case
def e_vmap_mm_mismatch(C, rec):
    rec("o", C(vmap(lambda x: x @ torch.ones(4, 2)))(r(4, 3)))


@case
def e_vmap_view_noncontig(C, rec):
    rec("o", C(vmap(lambda x: x.t().view(-1)))(r(4, 3, 2)))


@case
def e_vmap_expand_write(C, rec):
    rec("o", C(vmap(lambda x: x.expand(2, 3).add_(1)))(r(4, 3)))


@case
def e_vmap_out_dtype(C, rec):
    def f(x):
        o = torch.empty(3, dtype=torch.int64)
        torch.sin(x, out=o)
        return o

    rec("o", C(vmap(f))(r(4, 3)))


@case
def e_vmap_index_oob(C, rec):
    rec("o", C(vmap(lambda x: x[torch.tensor([0, 5])]))(r(4, 3)))


@case
def e_vmap_scalar_overflow(C, rec):
    rec("o", C(vmap(lambda x: x.add_(1000)))(torch.zeros(4, 3, dtype=torch.int8)))


@case
def e_vmap_float_into_int_fill(C, rec):
    def f(x):
        y = x.clone()
        y.fill_(2.5)
        return y

    rec("o", C(vmap(f))(torch.zeros(4, 3, dtype=torch.int32)))


@case
def e_vmap_clamp_tensor_bounds(C, rec):
    rec("o", C(vmap(lambda x, lo: x.clamp(lo, lo + 1)))(r(4, 3), r(4, seed=1)))


@case
def e_vmap_inplace_unbatched_captured(C, rec):
    buf = torch.zeros(3)
    rec("o", C(vmap(lambda x: buf.add_(x)))(r(4, 3)))


@case
def e_vmap_return_input(C, rec):
    x = r(4, 3)
    o = C(vmap(lambda x: x))(x)
    rec("o", o)
    rec("same_storage", o.data_ptr() == x.data_ptr())


@case
def e_vmap_inference_mode_inside(C, rec):
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y

    o = C(vmap(f))(r(4, 3))
    rec("o", o)
    rec("inference", o.is_inference())


@case
def e_vmap_autocast(C, rec):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rec("o", C(vmap(lambda x, w: x @ w, in_dims=(0, None)))(r(4, 3), r(3, 2, seed=1)))


@case
def e_vmap_dynamic(C, rec):
    f = C(vmap(lambda x: (x.sin() * x).cumsum(0)), dynamic=True)
    rec("a", f(r(4, 3)))
    rec("b", f(r(5, 6)))


@case
def e_vmap_bool_and_int_outputs(C, rec):
    rec("o", C(vmap(lambda x: (x > 0, x.argsort(), x.long().sum())))(r(4, 3)))


@case
def e_vmap_complex(C, rec):
    z = torch.randn(4, 3, dtype=torch.complex64)
    rec("o", C(vmap(lambda z: (z * z.conj()).real + z.abs()))(z))


@case
def e_vmap_float64_half(C, rec):
    rec("o", C(vmap(lambda x: x.softmax(0)))(r(4, 3, dtype=torch.float16)))
    rec("o2", C(vmap(lambda x: x.logsumexp(0)))(r(4, 3, dtype=torch.float64)))


# == batch 6: views, detach and no_grad writes inside compiled vmap, with tracked closures =====
def _v6(kind):
    w = r(3, seed=7).requires_grad_()

    def f(x):
        if kind == "detach_write":
            d = (x * w).detach()
            d.mul_(2)
            return d + x * w
        if kind == "no_grad_write":
            y = x * w
            with torch.no_grad():
                y[0] = 0.0
            return y * w
        if kind == "data_write":
            y = x * w
            y.data.add_(1.0)
            return y
        if kind == "unfold":
            return (x * w).unfold(0, 2, 1).sum(-1)
        if kind == "as_strided":
            return (x * w).as_strided((2,), (1,)) * 2
        if kind == "diag_write":
            e = torch.zeros(3, 3)
            e.diagonal().copy_(x * w)
            return e.sum(0)
        if kind == "transpose_write":
            e = torch.zeros(2, 3)
            e.t()[1] = x[:2] * w[:2]
            return e
        if kind == "narrow_write":
            y = (x * w).clone()
            y.narrow(0, 1, 2).mul_(x[:2])
            return y
        if kind == "split_write":
            y = (x * w).clone()
            a, b = y.split([1, 2])
            b.add_(a)
            return y
        if kind == "expand_read":
            return (x * w)[:1].expand(3) * x
        raise AssertionError(kind)

    return f, w


for _k in (
    "detach_write",
    "no_grad_write",
    "data_write",
    "unfold",
    "as_strided",
    "diag_write",
    "transpose_write",
    "narrow_write",
    "split_write",
    "expand_read",
):

    def _c6(C, rec, _k=_k):
        f, w = _v6(_k)
        o = C(vmap(f))(r(4, 3))
        rec("o", o)
        o.pow(2).sum().backward()
        rec("w", w.grad)

    def _g6(C, rec, _k=_k):
        f, w = _v6(_k)
        g = C(vmap(grad(lambda x: f(x).pow(2).sum())))(r(4, 3))
        rec("g", g)
        g.sum().backward()
        rec("w", w.grad)

    CASES[f"v6_vmap_{_k}"] = _c6
    CASES[f"v6_vmap_grad_{_k}"] = _g6


# == batch 7: functional_call / ensembling / randomness compiled over ==========================
@case
def f7_compiled_functional_call_backward(C, rec):
    m = mlp()
    p = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    C(lambda p, x: functional_call(m, p, (x,)).pow(2).sum())(p, r(2, 3)).backward()
    rec("g_new", [v.grad for v in p.values()])
    rec("g_mod", [q.grad for q in m.parameters()])


@case
def f7_compiled_functional_call_bn_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    b = {k: v.clone() for k, v in m.named_buffers()}
    o = C(lambda b, x: functional_call(m, b, (x,)))(b, r(5, 3))
    rec("o", o)
    rec("b", list(b.values()))
    rec("mod", list(m.buffers()))


@case
def f7_ensemble_bn_eval_grads(C, rec):
    ms = []
    for i in range(3):
        torch.manual_seed(i)
        m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)).eval()
        m[1].running_mean.uniform_()
        ms.append(m)
    params, buffers = stack_module_state(ms)
    base = copy.deepcopy(ms[0]).to("meta")

    def f(p, b, x):
        return functional_call(base, (p, b), (x,)).sum()

    out = C(vmap(f, in_dims=(0, 0, None)))(params, buffers, r(5, 3))
    rec("o", out)
    out.sum().backward()
    rec("g", [v.grad for v in params.values()])


@case
def f7_ensemble_bn_train_error_or_value(C, rec):
    ms = [nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)) for _ in range(2)]
    params, buffers = stack_module_state(ms)
    base = copy.deepcopy(ms[0]).to("meta")

    def f(p, b, x):
        return functional_call(base, (p, b), (x,))

    rec("o", C(vmap(f, in_dims=(0, 0, None)))(params, buffers, r(5, 3)))
    rec("b", list(buffers.values()))


@case
def f7_vmap_same_dropout_masks(C, rec):
    f = C(vmap(lambda x: F.dropout(x, 0.5), randomness="same"))
    o = f(torch.ones(4, 64))
    rec("rows_equal", bool((o == o[0]).all()))
    rec("vals", sorted(set(o.flatten().tolist())))


@case
def f7_vmap_different_rand_like_backward(C, rec):
    w = r(3, seed=3).requires_grad_()
    f = C(vmap(lambda x: (x * w + torch.rand_like(x) * 0).sum(), randomness="different"))
    o = f(r(4, 3))
    rec("o", o)
    o.sum().backward()
    rec("w", w.grad)


@case
def f7_vmap_same_randn_seeded(C, rec):
    torch.manual_seed(5)
    f = C(vmap(lambda x: x + torch.randn(()), randomness="same"))
    o = f(torch.zeros(4))
    rec("equal", bool((o == o[0]).all()))


@case
def f7_jvp_dropout_inside(C, rec):
    def f(x, t):
        return jvp(lambda x: F.dropout(x, 0.5) * 2, (x,), (t,))

    torch.manual_seed(0)
    p, t = C(f)(torch.ones(64), torch.ones(64))
    rec("same_mask", bool(((p == 0) == (t == 0)).all()))


@case
def f7_grad_train_dropout_module(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    p = {k: v.detach() for k, v in m.named_parameters()}
    g = C(grad(lambda p, x: functional_call(m, p, (x,)).sum()))(p, torch.ones(4, 8))
    rec("shapes", [tuple(v.shape) for v in g.values()])
    rec("finite", all(bool(v.isfinite().all()) for v in g.values()))


# == batch 8: per-sample gradients of larger models =========================================
def _ps_model(kind):
    torch.manual_seed(0)
    if kind == "transformer":
        return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    if kind == "emb_ln_mha":

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(11, 8)
                self.ln = nn.LayerNorm(8)
                self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

            def forward(self, i):
                h = self.ln(self.emb(i))
                return self.mha(h, h, h, need_weights=False)[0]

        return M()
    if kind == "gn_conv":
        return nn.Sequential(nn.Conv1d(4, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.GELU())
    raise AssertionError(kind)


def _ps_input(kind):
    if kind == "emb_ln_mha":
        return torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 0, 1]])
    if kind == "gn_conv":
        return r(4, 4, 5)
    return r(4, 3, 8)


for _k in ("transformer", "emb_ln_mha", "gn_conv"):

    def _ps(C, rec, _k=_k):
        m = _ps_model(_k)
        p = {k: v.detach() for k, v in m.named_parameters()}

        def loss(p, xi):
            return functional_call(m, p, (xi.unsqueeze(0),)).pow(2).mean()

        g = C(vmap(grad(loss), in_dims=(None, 0)))(p, _ps_input(_k))
        rec("g", list(g.values()))

    def _jr(C, rec, _k=_k):
        m = _ps_model(_k)
        x = _ps_input(_k)[:1]
        if x.is_floating_point():
            j = C(jacrev(lambda x: m(x).sum(-1)))(x)
        else:
            j = C(
                lambda x: vmap(jacrev(lambda p: functional_call(m, p, (x,)).sum()))(
                    {k: v.detach().expand(2, *v.shape) for k, v in m.named_parameters()}
                )
            )(x)
            j = list(j.values())
        rec("j", j)

    CASES[f"ps8_{_k}"] = _ps
    CASES[f"jr8_{_k}"] = _jr


# == batch 9: custom autograd.Function (functorch style) under compiled transforms ==============
class _Cube(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2 + 1.0  # (not the true derivative: the Function's own is used)

    @staticmethod
    def jvp(ctx, t):
        return t * 7.0


class _ClampST(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x.clamp(-0.5, 0.5)

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def vmap(info, in_dims, x):
        return x.clamp(-0.5, 0.5), in_dims[0]


@case
def af9_grad_custom_fn(C, rec):
    rec("g", C(grad(lambda x: _Cube.apply(x).sum()))(r(3)))


@case
def af9_vmap_grad_custom_fn(C, rec):
    rec("g", C(vmap(grad(lambda x: _Cube.apply(x).sum())))(r(4, 3)))


@case
def af9_vmap_custom_vmap_rule(C, rec):
    rec("o", C(vmap(_ClampST.apply))(r(4, 3)))
    rec("g", C(vmap(grad(lambda x: _ClampST.apply(x * 2).sum())))(r(4, 3)))


@case
def af9_custom_fn_compiled_backward(C, rec):
    x = r(3).requires_grad_()
    C(lambda x: _Cube.apply(x).sum())(x).backward()
    rec("g", x.grad)


@case
def af9_jvp_custom_fn(C, rec):
    rec("o", C(lambda x, t: jvp(_Cube.apply, (x,), (t,)))(r(3), torch.ones(3)))


@case
def af9_fwad_custom_fn(C, rec):
    with fwAD.dual_level():
        o = C(lambda x: _Cube.apply(x) * 2)(fwAD.make_dual(r(3), torch.ones(3)))
        rec("o", list(fwAD.unpack_dual(o)))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, compare))
