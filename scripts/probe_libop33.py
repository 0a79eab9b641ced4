"""User-defined ops and module utilities that rewrite parameters, around and inside
``torch.compile(backend="xla")`` (session 33): ``torch.library.custom_op`` with
``register_fake``/``register_autograd`` (saved tensors and non-tensor values, ``None``
gradients, ``mutates_args``, several outputs, views refused), ``torch.library.Library`` ops
with CPU / CompositeImplicitAutograd / CompositeExplicitAutograd kernels, ops without a fake
kernel; parametrizations (``right_inverse`` assignment, buffers, ``unsafe``), spectral norm
over optimizer steps, pruning and ``prune.remove``, ``functional_call`` with tied weights and
``strict``, ``swap_tensors``, ``vector_to_parameters``. Each case runs in eager and compiled;
values, dtypes, shapes, ``requires_grad``, gradients and their None-ness, buffers and errors
compared.

    PYTHONPATH=. python scripts/probe_libop33.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_libop33.py   # torch's own
    PROBE_STRIDES=1 PYTHONPATH=. python scripts/probe_libop33.py   # strides compared too

At the end of session 33 every case agrees (strides included). Two differed before it: a user's
op run in eager saw a view argument (``x[:, ::2]``, ``x.unbind(0)[1]``) as a fresh contiguous
tensor (``co_sees_strides``, ``co_layouts_list_kw``), and a ``Library`` op with a lowering but
no autograd kernel raised on the backward where eager's autograd fallback differentiates it
(``lw_library_cea``), and an op with a lowering and a ``register_autograd`` formula that is not
its derivative (a straight-through estimator) was differentiated by ``jax.vjp`` of the lowering
(``lw_ste_formula``: zero gradients).
"""

from __future__ import annotations

import os
import sys
import warnings

import jax.numpy as jnp
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize, prune

import torch2xla

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
STRIDES = os.environ.get("PROBE_STRIDES") == "1"  # strides compared too (sizes above 1)
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def describe(v):
    if v is None:
        return ("V", "None")
    if isinstance(v, torch.Tensor):
        layout = v.stride() if STRIDES else None
        return ("T", v.dtype, tuple(v.shape), v.detach().clone(), v.requires_grad, layout)
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
        if a[5] != b[5] and a[2] and min(a[2]) > 1:
            return f"{path}: strides {a[5]} vs {b[5]}"
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


def grads(*ts):
    return [t.grad for t in ts]


def pgrads(m):
    return [p.grad for p in m.parameters()]


def leaf(*shape, seed=0, dtype=torch.float32):
    return r(*shape, seed=seed, dtype=dtype).requires_grad_()


def train(rec, label, f, m, x, opt=None, steps=1):
    for i in range(steps):
        out = f(x)
        rec(f"{label} out {i}", out)
        w = torch.arange(out.numel(), dtype=torch.float64).cos().view(out.shape).to(out.dtype)
        (out * w).sum().backward()
        rec(f"{label} grads {i}", pgrads(m))
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
            rec(f"{label} params {i}", [p.detach().clone() for p in m.parameters()])
        rec(f"{label} buffers {i}", [b.clone() for b in m.buffers()])


# == the user's ops ============================================================================
NS = "t2x_lo33"


@torch.library.custom_op(f"{NS}::scale_shift", mutates_args=())
def scale_shift(x: torch.Tensor, w: torch.Tensor, s: float, k: int) -> torch.Tensor:
    return x * w * s + k


@scale_shift.register_fake
def _(x, w, s, k):
    return torch.empty_like(x)


def _ss_setup(ctx, inputs, output):
    x, w, s, k = inputs
    ctx.save_for_backward(x, w)
    ctx.s = s
    ctx.k = k


def _ss_backward(ctx, g):
    x, w = ctx.saved_tensors
    gx = g * w * ctx.s if ctx.needs_input_grad[0] else None
    gw = g * x * ctx.s if ctx.needs_input_grad[1] else None
    return gx, gw, None, None


scale_shift.register_autograd(_ss_backward, setup_context=_ss_setup)


# only x gets a gradient, w's is None even though w requires grad
@torch.library.custom_op(f"{NS}::x_only", mutates_args=())
def x_only(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.sin() * w


@x_only.register_fake
def _(x, w):
    return torch.empty_like(x)


def _xo_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _xo_backward(ctx, g):
    x, w = ctx.saved_tensors
    return g * x.cos() * w, None


x_only.register_autograd(_xo_backward, setup_context=_xo_setup)


# a "wrong" backward (not the true derivative): compiled must use the registered formula
@torch.library.custom_op(f"{NS}::ste_round", mutates_args=())
def ste_round(x: torch.Tensor) -> torch.Tensor:
    return torch.round(x * 4) / 4


@ste_round.register_fake
def _(x):
    return torch.empty_like(x)


ste_round.register_autograd(lambda ctx, g: g * 3, setup_context=lambda ctx, inputs, output: None)


@torch.library.custom_op(f"{NS}::two_out", mutates_args=())
def two_out(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.exp(), x.argmax(-1)


@two_out.register_fake
def _(x):
    return torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.long)


def _to_setup(ctx, inputs, output):
    ctx.save_for_backward(output[0])


def _to_backward(ctx, g0, g1):
    (e,) = ctx.saved_tensors
    return g0 * e


two_out.register_autograd(_to_backward, setup_context=_to_setup)


@torch.library.custom_op(f"{NS}::acc_", mutates_args=("buf",))
def acc_(buf: torch.Tensor, x: torch.Tensor) -> None:
    buf.add_(x)


@acc_.register_fake
def _(buf, x):
    return None


@torch.library.custom_op(f"{NS}::count_and_scale", mutates_args=("count",))
def count_and_scale(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    count.add_(1)
    return x * count.to(x.dtype)


@count_and_scale.register_fake
def _(x, count):
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::bad_view", mutates_args=())
def bad_view(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)


@bad_view.register_fake
def _(x):
    return x.new_empty(x.numel())


@torch.library.custom_op(f"{NS}::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x.cos() + 1


@torch.library.custom_op(f"{NS}::opt_args", mutates_args=())
def opt_args(
    x: torch.Tensor,
    y: torch.Tensor | None,
    xs: list[torch.Tensor],
    mode: str,
    flag: bool = False,
    eps: float = 1e-3,
) -> torch.Tensor:
    out = x.clone()
    if y is not None:
        out = out + y
    for t in xs:
        out = out * t
    if mode == "neg":
        out = -out
    if flag:
        out = out + eps
    return out


@opt_args.register_fake
def _(x, y, xs, mode, flag=False, eps=1e-3):
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::strided", mutates_args=())
def strided(x: torch.Tensor) -> torch.Tensor:
    # reads the layout: eager sees the input's strides
    return x.new_tensor(list(x.stride()), dtype=x.dtype).sum() + x.sum()


@strided.register_fake
def _(x):
    return x.new_empty(())


@torch.library.custom_op(f"{NS}::to_int", mutates_args=())
def to_int(x: torch.Tensor) -> torch.Tensor:
    return (x * 10).to(torch.int32)


@to_int.register_fake
def _(x):
    return torch.empty_like(x, dtype=torch.int32)


@torch.library.custom_op(f"{NS}::raising", mutates_args=())
def raising(x: torch.Tensor) -> torch.Tensor:
    if (x < 0).any():
        raise ValueError("raising: negative input")
    return x.sqrt()


@raising.register_fake
def _(x):
    return torch.empty_like(x)


LIB = torch.library.Library(NS, "FRAGMENT")
LIB.define("cpu_twice(Tensor x) -> Tensor")
LIB.impl("cpu_twice", lambda x: x * 2, "CPU")
LIB.define("cpu_twice_fake(Tensor x) -> Tensor")
LIB.impl("cpu_twice_fake", lambda x: x * 2, "CPU")
torch.library.register_fake(f"{NS}::cpu_twice_fake", lambda x: torch.empty_like(x), lib=LIB)
LIB.define("cia_softplus(Tensor x, float beta) -> Tensor")
LIB.impl(
    "cia_softplus",
    lambda x, beta: torch.log1p(torch.exp(x * beta)) / beta,
    "CompositeImplicitAutograd",
)
LIB.define("cea_square(Tensor x) -> Tensor")
LIB.impl("cea_square", lambda x: x * x, "CompositeExplicitAutograd")
LIB.define("cea_square_ag(Tensor x) -> Tensor")
LIB.impl("cea_square_ag", lambda x: x * x, "CompositeExplicitAutograd")
torch.library.register_autograd(
    f"{NS}::cea_square_ag",
    lambda ctx, g: g * 2 * ctx.saved_tensors[0],
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
    lib=LIB,
)
LIB.define("cea_inplace_(Tensor(a!) x, float v) -> Tensor(a!)")


def _cea_inplace(x, v):
    return x.add_(v)


LIB.impl("cea_inplace_", _cea_inplace, "CompositeExplicitAutograd")
LIB.define("cpu_out_mut(Tensor x, Tensor(a!) out) -> ()")


def _cpu_out_mut(x, out):
    out.copy_(x.exp())


LIB.impl("cpu_out_mut", _cpu_out_mut, "CPU")
torch.library.register_fake(f"{NS}::cpu_out_mut", lambda x, out: None, lib=LIB)


# == custom_op cases ==========================================================================
@case
def co_saved_nontensor_grads(C, rec):
    f = C(lambda x, w, s, k: scale_shift(x, w, s, k).tanh())
    x, w = leaf(3, 4), leaf(3, 4, seed=1)
    for s, k in ((0.5, 1), (2.0, 3), (-1.5, 0)):
        out = f(x, w, s, k)
        rec(f"o {s}", out)
        out.sum().backward()
        rec(f"g {s}", grads(x, w))
        x.grad = w.grad = None


@case
def co_needs_input_grad(C, rec):
    f = C(lambda x, w: scale_shift(x, w, 2.0, 1).sum())
    x, w = leaf(3), r(3, seed=1)
    f(x, w).backward()
    rec("g", grads(x, w))
    w.requires_grad_()
    x.grad = None
    f(x.detach(), w).backward()
    rec("g2", grads(x, w))


@case
def co_none_grad_for_input(C, rec):
    f = C(lambda x, w: (x_only(x, w) * 2).sum())
    x, w = leaf(4), leaf(4, seed=1)
    out = f(x, w)
    rec("o", out)
    out.backward()
    rec("g", grads(x, w))
    rec("w grad is None", w.grad is None)


@case
def co_none_grad_autograd_grad(C, rec):
    f = C(lambda x, w: x_only(x, w).sum())
    x, w = leaf(4), leaf(4, seed=1)
    rec("gr", torch.autograd.grad(f(x, w), (x, w), allow_unused=True))
    try:
        torch.autograd.grad(f(x, w), (w,))
    except RuntimeError as e:
        rec("err", e)


@case
def co_registered_formula_not_true_derivative(C, rec):
    f = C(lambda x: (ste_round(x) * x).sum())
    x = leaf(5)
    out = f(x)
    rec("o", out)
    out.backward()
    rec("g", x.grad)


@case
def co_two_outputs(C, rec):
    def fn(x):
        e, i = two_out(x)
        return e.sum(-1) * 2, i + 1

    f = C(fn)
    x = leaf(3, 4)
    a, b = f(x)
    rec("o", [a, b])
    a.sum().backward()
    rec("g", x.grad)


@case
def co_two_outputs_only_index_used(C, rec):
    f = C(lambda x: two_out(x * 2)[1])
    x = leaf(3, 4)
    rec("o", f(x))


@case
def co_mutates_input(C, rec):
    def fn(buf, x):
        acc_(buf, x * 2)
        return buf * 3

    f = C(fn)
    buf, x = torch.zeros(4), r(4)
    for i in range(3):
        rec(f"o{i}", f(buf, x))
        rec(f"buf{i}", buf)


@case
def co_mutates_input_view(C, rec):
    def fn(buf, x):
        acc_(buf[1:3], x)
        return buf.sum()

    f = C(fn)
    buf, x = torch.zeros(4), r(2)
    rec("o", f(buf, x))
    rec("buf", buf)


@case
def co_mutates_intermediate(C, rec):
    def fn(x):
        y = x * 2
        acc_(y, x)
        return y

    f = C(fn)
    x = leaf(4)
    out = f(x)
    rec("o", out)
    try:
        out.sum().backward()
        rec("g", x.grad)
    except RuntimeError as e:
        rec("err", e)


@case
def co_mutates_grad_input_errors(C, rec):
    f = C(lambda buf, x: acc_(buf, x))
    buf = leaf(4)
    try:
        f(buf, r(4))
        rec("buf", buf)
    except RuntimeError as e:
        rec("err", e)


@case
def co_mutating_buffer_in_module(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("count", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            return count_and_scale(self.lin(x), self.count)

    torch.manual_seed(0)
    m = M()
    f = C(m)
    x = r(2, 3)
    for i in range(3):
        out = f(x)
        rec(f"o{i}", out)
        rec(f"count{i}", m.count)


@case
def co_mutating_in_train_loop_grad(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.register_buffer("seen", torch.zeros(3))

        def forward(self, x):
            acc_(self.seen, x.detach().sum(0))
            return x_only(self.lin(x), self.lin.bias.expand(x.shape[0], 2))

    torch.manual_seed(0)
    m = M()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", C(m), m, r(4, 3), opt, steps=3)


@case
def co_returns_view_refused(C, rec):
    f = C(lambda x: bad_view(x) + 1)
    try:
        rec("o", f(r(2, 3)))
    except RuntimeError as e:
        rec("err", e)


@case
def co_no_fake_kernel(C, rec):
    f = C(lambda x: no_fake(x * 2) * 3)
    try:
        rec("o", f(r(4)))
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec("err", e)


@case
def co_optional_list_str_defaults(C, rec):
    def fn(x, y, a, b):
        return (
            opt_args(x, y, [a, b], "neg"),
            opt_args(x, None, [], "pos", True),
            opt_args(x, None, [a], "neg", flag=True, eps=0.25),
        )

    f = C(fn)
    rec("o", f(r(3), r(3, seed=1), r(3, seed=2), r(3, seed=3)))


@case
def co_sees_strides(C, rec):
    f = C(lambda x: strided(x.t()) + strided(x[:, ::2]))
    rec("o", f(r(4, 6)))


@torch.library.custom_op(f"{NS}::layouts", mutates_args=())
def layouts(xs: list[torch.Tensor], y: torch.Tensor | None = None) -> torch.Tensor:
    ts = [*xs, *([] if y is None else [y])]
    return torch.tensor(
        [v for t in ts for v in (*t.stride(), t.storage_offset())], dtype=xs[0].dtype
    )


@layouts.register_fake
def _(xs, y=None):
    ts = [*xs, *([] if y is None else [y])]
    return xs[0].new_empty(sum(t.dim() + 1 for t in ts))


@torch.library.custom_op(f"{NS}::flat_fill", mutates_args=("out",))
def flat_fill(out: torch.Tensor) -> None:
    out.view(-1).copy_(torch.arange(out.numel(), dtype=out.dtype))


@flat_fill.register_fake
def _(out):
    return None


@case
def co_layouts_list_kw(C, rec):
    f = C(
        lambda x: layouts(
            [x[:, ::2], x.t(), x[1:], (x * 2)[:, 1:4], *x.split(2, 1), x.unbind(0)[1]],
            y=x.diagonal(),
        )
    )
    rec("o", f(r(4, 6)))


@case
def co_strided_view_grads(C, rec):
    f = C(lambda x, w: scale_shift(x[:, ::2], w.t()[1:], 0.5, 1).sum())
    x, w = leaf(4, 6), leaf(3, 5, seed=1)
    out = f(x, w)
    rec("o", out)
    out.backward()
    rec("g", grads(x, w))


@case
def co_mutating_view_layout(C, rec):
    f = C(lambda b: flat_fill(b[1:3]))
    b = torch.zeros(4, 6)
    f(b)
    rec("b", b)
    g = C(lambda b: flat_fill(b.t()))
    try:
        g(b)
    except RuntimeError as e:
        rec("err", e)
    rec("b2", b)


@case
def co_int_output_and_grad(C, rec):
    def fn(x):
        i = to_int(x)
        return x * i.float(), i

    f = C(fn)
    x = leaf(5)
    a, b = f(x)
    rec("o", [a, b])
    a.sum().backward()
    rec("g", x.grad)


@case
def co_raising(C, rec):
    f = C(lambda x: raising(x + 0) * 2)
    rec("ok", f(r(3).abs()))
    try:
        rec("o", f(-r(3).abs()))
    except ValueError as e:
        rec("err", e)


@case
def co_no_autograd_but_grad_input(C, rec):
    @torch.library.custom_op(f"{NS}::noag_local", mutates_args=())
    def noag(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    noag.register_fake(lambda x: torch.empty_like(x))
    f = C(lambda x: noag(x).sum())
    x = leaf(3)
    out = f(x)
    rec("o", out)
    try:
        out.backward()
        rec("g", x.grad)
    except RuntimeError as e:
        rec("err", e)


@case
def co_inside_module_train_steps(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 2)

        def forward(self, x):
            h = scale_shift(self.a(x), self.a(x).sigmoid(), 0.7, 2)
            e, _ = two_out(h.tanh())
            return self.b(ste_round(e))

    torch.manual_seed(0)
    m = M()
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    train(rec, "t", C(m), m, r(3, 4), opt, steps=3)


@case
def co_float64(C, rec):
    f = C(lambda x, w: scale_shift(x, w, 1.25, -2).exp())
    x, w = leaf(3, dtype=torch.float64), leaf(3, seed=1, dtype=torch.float64)
    out = f(x, w)
    rec("o", out)
    out.sum().backward()
    rec("g", grads(x, w))


@case
def co_register_kernel_override(C, rec):
    @torch.library.custom_op(f"{NS}::kern_local", mutates_args=(), device_types="cpu")
    def kern(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    kern.register_fake(lambda x: torch.empty_like(x))
    f = C(lambda x: kern(x) * 2)
    rec("o1", f(r(3)))
    kern.register_kernel("cpu")(lambda x: x + 10)
    rec("o2", f(r(3)))


@case
def co_set_autograd_later(C, rec):
    @torch.library.custom_op(f"{NS}::late_ag", mutates_args=())
    def late(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    late.register_fake(lambda x: torch.empty_like(x))
    f = C(lambda x: late(x).sum())
    x = leaf(3)
    with torch.no_grad():
        rec("o0", f(x))
    late.register_autograd(lambda ctx, g: g * 5, setup_context=lambda ctx, inputs, output: None)
    out = f(x)
    out.backward()
    rec("g", x.grad)


# == Library DEF / impl cases ===================================================================
@case
def lib_cpu_only_no_fake(C, rec):
    f = C(lambda x: torch.ops.t2x_lo33.cpu_twice(x + 1) * 3)
    try:
        rec("o", f(r(4)))
    except Exception as e:  # noqa: BLE001
        rec("err", e)


@case
def lib_cpu_with_fake_grad(C, rec):
    f = C(lambda x: (torch.ops.t2x_lo33.cpu_twice_fake(x) * x).sum())
    x = leaf(4)
    out = f(x)
    rec("o", out)
    try:
        out.backward()
        rec("g", x.grad)
    except RuntimeError as e:
        rec("err", e)


@case
def lib_cia(C, rec):
    f = C(lambda x, b: torch.ops.t2x_lo33.cia_softplus(x, b))
    x = leaf(5)
    for b in (1.0, 2.5):
        out = f(x, b)
        rec(f"o{b}", out)
        out.sum().backward()
        rec(f"g{b}", x.grad)
        x.grad = None


@case
def lib_cea_no_autograd(C, rec):
    f = C(lambda x: torch.ops.t2x_lo33.cea_square(x).sum())
    x = leaf(4)
    out = f(x)
    rec("o", out)
    try:
        out.backward()
        rec("g", x.grad)
    except RuntimeError as e:
        rec("err", e)


@case
def lib_cea_with_autograd(C, rec):
    f = C(lambda x: (torch.ops.t2x_lo33.cea_square_ag(x) * 3).sum())
    x = leaf(4)
    out = f(x)
    rec("o", out)
    out.backward()
    rec("g", x.grad)


@case
def lib_cea_inplace(C, rec):
    def fn(x):
        y = torch.ops.t2x_lo33.cea_inplace_(x, 1.5)
        return y * 2

    f = C(fn)
    x = r(4)
    rec("o", f(x))
    rec("x", x)


@case
def lib_cpu_out_mut(C, rec):
    def fn(x, out):
        torch.ops.t2x_lo33.cpu_out_mut(x, out)
        return out + 1

    f = C(fn)
    x, out = r(4), torch.zeros(4)
    rec("o", f(x, out))
    rec("out", out)


# == opcheck on the op used compiled ============================================================
@case
def co_opcheck(C, rec):
    x, w = leaf(3), leaf(3, seed=1)
    res = torch.library.opcheck(scale_shift, (x, w, 0.5, 2))
    rec("opcheck", sorted(res.items()))
    f = C(lambda x, w: scale_shift(x, w, 0.5, 2))
    rec("o", f(x, w))


# == parametrizations ===========================================================================
class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class PlusOne(nn.Module):
    def forward(self, X):
        return X + 1


class SplitRI(nn.Module):
    """right_inverse returning two tensors: original0/original1."""

    def forward(self, a, b):
        return a * b

    def right_inverse(self, W):
        return W.sign(), W.abs()


@case
def param_right_inverse_assign_between_calls(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    f = C(m)
    x = r(2, 3)
    rec("o0", f(x))
    with torch.no_grad():
        m.weight = torch.arange(9.0).view(3, 3)
    rec("orig", m.parametrizations.weight.original)
    rec("o1", f(x))


@case
def param_two_originals(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", SplitRI())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", C(m), m, r(4, 3), opt, steps=2)


@case
def param_on_buffer(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.ones(3))

        def forward(self, x):
            return x * self.scale

    m = M()
    parametrize.register_parametrization(m, "scale", PlusOne())
    f = C(m)
    x = r(2, 3)
    rec("o0", f(x))
    m.parametrizations.scale.original.mul_(3)
    rec("o1", f(x))


@case
def param_unsafe_shape_change(C, rec):
    class Pad(nn.Module):
        def forward(self, X):
            return torch.cat([X, X[:1]], 0)

    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", Pad(), unsafe=True)
    with torch.no_grad():
        m.bias = nn.Parameter(torch.zeros(3))
    f = C(m)
    x = leaf(2, 3)
    out = f(x)
    rec("o", out)
    out.sum().backward()
    rec("g", [*pgrads(m), x.grad])


@case
def param_cached_block_grads(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    f = C(lambda x: m(m(x)))
    x = r(2, 3)
    with parametrize.cached():
        out = f(x)
        rec("o", out)
        out.sum().backward()
    rec("g", pgrads(m))


@case
def spectral_norm_optimizer_steps(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(
        parametrizations.spectral_norm(nn.Linear(4, 5), n_power_iterations=3), nn.Tanh()
    )
    opt = torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.9)
    f = C(m)
    train(rec, "t", f, m, r(3, 4), opt, steps=3)
    m.eval()
    with torch.no_grad():
        rec("eval", f(r(3, 4, seed=2)))
    rec("uv", [m[0].parametrizations.weight[0]._u, m[0].parametrizations.weight[0]._v])


@case
def spectral_norm_two_calls_one_step(C, rec):
    torch.manual_seed(0)
    lin = parametrizations.spectral_norm(nn.Linear(4, 4))
    f = C(lambda x: lin(lin(x)))
    x = r(2, 4)
    out = f(x)
    rec("o", out)
    out.sum().backward()
    rec("g", pgrads(lin))
    rec("u", lin.parametrizations.weight[0]._u)


@case
def weight_norm_conv_steps(C, rec):
    torch.manual_seed(0)
    m = parametrizations.weight_norm(nn.Conv1d(2, 3, 3), dim=1)
    opt = torch.optim.SGD(m.parameters(), lr=0.3)
    train(rec, "t", C(m), m, r(2, 2, 6), opt, steps=3)


@case
def orthogonal_steps(C, rec):
    torch.manual_seed(0)
    m = parametrizations.orthogonal(nn.Linear(4, 4), orthogonal_map="cayley")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", C(m), m, r(3, 4), opt, steps=3)
    rec("w", m.weight)


# == pruning ====================================================================================
@case
def prune_train_then_remove(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    prune.l1_unstructured(m[0], "weight", amount=0.5)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    f = C(m)
    x = r(3, 4)
    train(rec, "pruned", f, m, x, opt, steps=2)
    prune.remove(m[0], "weight")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "removed", f, m, x, opt, steps=2)


@case
def prune_twice_container(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(5, 3)
    f = C(m)
    x = r(2, 5)
    rec("o0", f(x))
    prune.l1_unstructured(m, "weight", amount=0.3)
    rec("o1", f(x))
    prune.l1_unstructured(m, "weight", amount=0.3)
    rec("o2", f(x))
    rec("mask", m.weight_mask)
    prune.custom_from_mask(m, "bias", torch.tensor([1.0, 0.0, 1.0]))
    out = f(x)
    rec("o3", out)
    out.sum().backward()
    rec("g", pgrads(m))


# == functional_call / stateless ================================================================
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 3)
        self.out = nn.Linear(3, 5, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, i):
        return self.out(self.emb(i))


@case
def functional_call_tied(C, rec):
    torch.manual_seed(0)
    m = Tied()
    i = torch.tensor([0, 3, 4])
    w = leaf(5, 3, seed=3)
    for tie in (True, False):
        f = C(lambda p, i, tie=tie: torch.func.functional_call(m, p, (i,), tie_weights=tie))
        out = f({"emb.weight": w}, i)
        rec(f"o {tie}", out)
        out.sum().backward()
        rec(f"g {tie}", [w.grad, m.emb.weight.grad])
        w.grad = None
        m.zero_grad(set_to_none=True)
        torch._dynamo.reset()


@case
def functional_call_strict(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(lambda p, x: torch.func.functional_call(m, p, (x,), strict=True))
    try:
        rec("o", f({"weight": r(2, 3)}, r(1, 3)))
    except Exception as e:  # noqa: BLE001
        rec("err", e)
    rec("o2", f({"weight": r(2, 3), "bias": r(2)}, r(1, 3)))


@case
def functional_call_dict_tuple(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    params = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    bufs = {k: v.clone() for k, v in m.named_buffers()}
    f = C(lambda p, b, x: torch.func.functional_call(m, (p, b), (x,)))
    x = r(4, 3)
    for i in range(2):
        out = f(params, bufs, x)
        rec(f"o{i}", out)
        out.sum().backward()
        rec(f"g{i}", [v.grad for v in params.values()])
        rec(f"b{i}", list(bufs.values()))
        rec(f"mb{i}", [b.clone() for b in m.buffers()])


@case
def stateless_functional_call(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(lambda p, x: torch.nn.utils.stateless.functional_call(m, p, (x,)))
    w = leaf(2, 3, seed=5)
    out = f({"weight": w}, r(2, 3))
    rec("o", out)
    out.sum().backward()
    rec("g", [w.grad, m.weight.grad, m.bias.grad])


# == parameters rewritten in place of their tensors =============================================
@case
def swap_tensors_between_calls(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = r(2, 3)
    rec("o0", f(x))
    torch.utils.swap_tensors(m.weight, nn.Parameter(torch.full((2, 3), 0.5)))
    rec("o1", f(x))
    torch.utils.swap_tensors(m.weight, nn.Parameter(torch.ones(2, 3, dtype=torch.float64)))
    m.bias.data = m.bias.data.double()
    rec("o2", f(x.double()))


@case
def swap_module_params_to(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = r(2, 3)
    rec("o0", f(x))
    old = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        m.double()
        rec("o1", f(x.double()))
        m.float()
        out = f(x)
        rec("o2", out)
        out.sum().backward()
        rec("g", pgrads(m))
    finally:
        torch.__future__.set_swap_module_params_on_conversion(old)


@case
def load_state_dict_assign_then_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    f = C(m)
    x = r(4, 3)
    rec("o0", f(x))
    sd = {
        k: v.clone() * 2 if v.is_floating_point() else v.clone() for k, v in m.state_dict().items()
    }
    m.load_state_dict(sd, assign=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", f, m, x, opt, steps=2)


@case
def vector_to_parameters_between_calls(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    f = C(m)
    x = r(2, 3)
    rec("o0", f(x))
    vec = torch.nn.utils.parameters_to_vector(m.parameters())
    torch.nn.utils.vector_to_parameters(vec * 0.5, m.parameters())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", f, m, x, opt, steps=2)


@case
def parameters_to_vector_inside(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))

    def fn(x):
        out = m(x)
        v = torch.nn.utils.parameters_to_vector(m.parameters())
        return out.sum() + 0.01 * v.square().sum()

    f = C(fn)
    out = f(r(2, 3))
    rec("o", out)
    out.backward()
    rec("g", pgrads(m))


@case
def vector_to_parameters_inside(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def fn(vec, x):
        torch.nn.utils.vector_to_parameters(vec, m.parameters())
        return m(x)

    f = C(fn)
    try:
        rec("o", f(r(8), r(2, 3)))
    except Exception as e:  # noqa: BLE001
        rec("err", e)
    rec("w", [m.weight, m.bias])


@case
def fuse_conv_bn_then_train_mode(C, rec):
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)
    m = nn.Sequential(conv, bn)
    m.train()
    f = C(m)
    x = r(2, 2, 5, 5)
    rec("o0", f(x))
    m.eval()
    fused = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    m[0], m[1] = fused, nn.Identity()
    rec("o1", f(x))
    rec("w", fused.weight)


@case
def param_data_assign_shape_change(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    rec("o0", f(r(2, 3)))
    m.weight.data = r(2, 5, seed=4)
    try:
        rec("o1", f(r(2, 5)))
    except RuntimeError as e:
        rec("err", e)


# == batch 2 ===================================================================================
@torch.library.custom_op(f"{NS}::kwonly", mutates_args=())
def kwonly(x: torch.Tensor, *, alpha: float = 2.0, n: int = 1) -> list[torch.Tensor]:
    return [x * alpha + i for i in range(n)]


@kwonly.register_fake
def _(x, *, alpha=2.0, n=1):
    return [torch.empty_like(x) for _ in range(n)]


def _kw_setup(ctx, inputs, keyword_only_inputs, output):
    ctx.alpha = keyword_only_inputs["alpha"]


def _kw_backward(ctx, gs):
    return sum(g for g in gs if g is not None) * ctx.alpha


kwonly.register_autograd(_kw_backward, setup_context=_kw_setup)


@case
def co_kwonly_list_out(C, rec):
    f = C(lambda x, a: [t.sin() for t in kwonly(x, alpha=a, n=3)])
    x = leaf(4)
    for a in (0.5, 3.0):
        out = f(x, a)
        rec(f"o{a}", out)
        sum(t.sum() for t in out).backward()
        rec(f"g{a}", x.grad)
        x.grad = None


@case
def co_saved_output_modified_inplace(C, rec):
    def fn(x):
        e, _ = two_out(x)
        e.mul_(2)
        return e.sum()

    f = C(fn)
    x = leaf(3, 4)
    try:
        out = f(x)
        rec("o", out)
        out.backward()
        rec("g", x.grad)
    except RuntimeError as e:
        rec("err", e)


@case
def co_double_backward(C, rec):
    f = C(lambda x, w: scale_shift(x, w, 1.5, 0).square().sum())
    x, w = leaf(3), leaf(3, seed=1)
    (gx,) = torch.autograd.grad(f(x, w), (x,), create_graph=True)
    rec("gx", gx)
    gx.sum().backward()
    rec("g2", grads(x, w))


@case
def co_under_autocast(C, rec):
    f = C(lambda x, w: scale_shift(x @ w, x @ w, 0.5, 1))
    x, w = leaf(3, 3), leaf(3, 3, seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = f(x, w)
    rec("o", out)
    out.float().sum().backward()
    rec("g", grads(x, w))


@case
def co_dynamic_shapes(C, rec):
    f = C(lambda x: two_out(x * 2)[0].sum(-1), dynamic=True)
    for n in (3, 5, 7):
        x = leaf(n, 4, seed=n)
        out = f(x)
        rec(f"o{n}", out)
        out.sum().backward()
        rec(f"g{n}", x.grad)


@case
def co_explicit_schema(C, rec):
    @torch.library.custom_op(
        f"{NS}::schema_local", mutates_args=(), schema="(Tensor x, int k) -> Tensor"
    )
    def sch(x, k):
        return x.roll(k, 0)

    sch.register_fake(lambda x, k: torch.empty_like(x))
    f = C(lambda x, k: sch(x, k) * 2)
    rec("o1", f(r(5), 1))
    rec("o2", f(r(5), 3))


@case
def lib_meta_kernel(C, rec):
    lib = torch.library.Library(NS, "FRAGMENT")
    lib.define("meta_cpu(Tensor x) -> Tensor")
    lib.impl("meta_cpu", lambda x: x.flip(0) + 1, "CPU")
    lib.impl("meta_cpu", lambda x: torch.empty_like(x), "Meta")
    f = C(lambda x: torch.ops.t2x_lo33.meta_cpu(x) * 2)
    try:
        rec("o", f(r(4)))
    except Exception as e:  # noqa: BLE001
        rec("err", e)
    lib._destroy()


@case
def param_functional_call_parametrized(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    w = leaf(3, 3, seed=2)
    f = C(lambda p, x: torch.func.functional_call(m, p, (x,)))
    out = f({"parametrizations.weight.original": w}, r(2, 3))
    rec("o", out)
    out.sum().backward()
    rec("g", [w.grad, *pgrads(m)])


@case
def functional_call_strict_unexpected(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(lambda p, x: torch.func.functional_call(m, p, (x,), strict=True))
    try:
        rec("o", f({"weight": r(2, 3), "bias": r(2), "extra": r(1)}, r(1, 3)))
    except Exception as e:  # noqa: BLE001
        rec("err", e)


@case
def orthogonal_no_trivialization(C, rec):
    torch.manual_seed(0)
    m = parametrizations.orthogonal(nn.Linear(4, 4), use_trivialization=False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", C(m), m, r(3, 4), opt, steps=2)


@case
def spectral_norm_eval_toggle_steps(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(parametrizations.spectral_norm(nn.Linear(3, 3)), nn.ReLU(), nn.Linear(3, 2))
    opt = torch.optim.Adam(m.parameters(), lr=0.05)
    f = C(m)
    for i in range(3):
        m.train(i != 1)
        train(rec, f"s{i}", f, m, r(4, 3, seed=i), opt)


@case
def prune_remove_then_reprune(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    f = C(m)
    x = r(2, 4)
    prune.random_unstructured(m, "weight", amount=0.5)
    rec("o0", f(x))
    prune.remove(m, "weight")
    rec("o1", f(x))
    prune.l1_unstructured(m, "weight", amount=0.25)
    rec("o2", f(x))
    with torch.no_grad():
        m.weight_mask.fill_(1)
    rec("o3", f(x))


# == batch 3: mutation with autograd, lists, user view ops ====================================
@torch.library.custom_op(f"{NS}::norm_track", mutates_args=("running",))
def norm_track(x: torch.Tensor, running: torch.Tensor, momentum: float) -> torch.Tensor:
    mean = x.mean(0)
    running.mul_(1 - momentum).add_(mean.detach() * momentum)
    return x - mean


@norm_track.register_fake
def _(x, running, momentum):
    return torch.empty_like(x)


@torch.library.custom_op(f"{NS}::scale_all_", mutates_args=("xs",))
def scale_all_(xs: list[torch.Tensor], s: float) -> None:
    for t in xs:
        t.mul_(s)


@scale_all_.register_fake
def _(xs, s):
    return None


@torch.library.custom_op(f"{NS}::clip_", mutates_args=("p",))
def clip_(p: torch.Tensor, bound: float) -> None:
    p.clamp_(-bound, bound)


@clip_.register_fake
def _(p, bound):
    return None


@case
def co_mutating_with_autograd(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("running", torch.zeros(3))

        def forward(self, x):
            return self.lin(norm_track(x, self.running, 0.1)).tanh()

    torch.manual_seed(0)
    m = M()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", C(m), m, r(5, 3), opt, steps=3)


@case
def co_mutating_list(C, rec):
    def fn(a, b, x):
        scale_all_([a, b[1:]], 3.0)
        return a.sum() + b.sum() + x

    f = C(fn)
    a, b = r(3), r(4, seed=1)
    for i in range(2):
        rec(f"o{i}", f(a, b, r(1, seed=i)))
        rec(f"ab{i}", [a, b])


@case
def co_mutating_param_nograd_in_loop(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)

    def step(x):
        loss = m(x).square().sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for p in m.parameters():
                clip_(p, 0.3)
        return loss

    f = C(step)
    for i in range(3):
        rec(f"l{i}", f(r(4, 3, seed=i)))
        rec(f"p{i}", [p.detach().clone() for p in m.parameters()])


@case
def lib_user_view_op(C, rec):
    lib = torch.library.Library(NS, "FRAGMENT")
    lib.define("first_row(Tensor(a) x) -> Tensor(a)")
    lib.impl("first_row", lambda x: x[0], "CompositeExplicitAutograd")
    f = C(lambda x: torch.ops.t2x_lo33.first_row(x) * 2)
    try:
        rec("o", f(r(3, 4)))
    except Exception as e:  # noqa: BLE001
        rec("err", e)
    lib._destroy()


# == batch 4: ops with a JAX lowering (torch2xla.register_lowering) ============================
@torch.library.custom_op(f"{NS}::lw_opt", mutates_args=())
def lw_opt(
    x: torch.Tensor, y: torch.Tensor | None, xs: list[torch.Tensor], mode: str, s: float, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    out = x * s
    if y is not None:
        out = out + y
    for t in xs:
        out = out * t
    if mode == "neg":
        out = -out
    return out, (out > 0).sum(-1) + k


@lw_opt.register_fake
def _(x, y, xs, mode, s, k):
    return torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.long)


@torch2xla.register_lowering(lw_opt)
def _(x, y, xs, mode, s, k):
    out = x * s
    if y is not None:
        out = out + y
    for t in xs:
        out = out * t
    if mode == "neg":
        out = -out
    return out, (out > 0).sum(-1).astype(jnp.int64) + k


@torch.library.custom_op(f"{NS}::lw_scalar", mutates_args=())
def lw_scalar(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sum()


@lw_scalar.register_fake
def _(x):
    return x.new_empty(())


torch2xla.register_lowering(lw_scalar, lambda x: (x * x).sum())

LIB.define("lw_cea(Tensor x, float s) -> Tensor")
LIB.impl("lw_cea", lambda x, s: x.exp() * s, "CompositeExplicitAutograd")
torch2xla.register_lowering(torch.ops.t2x_lo33.lw_cea, lambda x, s: jnp.exp(x) * s)


@case
def lw_optional_list_str(C, rec):
    def fn(x, y, a, s, k):
        o1 = lw_opt(x, y, [a, a], "neg", s, k)
        o2 = lw_opt(x, None, [], "pos", s, k)
        return o1, o2

    f = C(fn)
    x = leaf(3, 4)
    for s, k in ((0.5, 1), (-2.0, 7)):
        out = f(x, r(3, 4, seed=1), r(3, 4, seed=2), s, k)
        rec(f"o{s}", out)
        (out[0][0].sum() + out[1][0].sum()).backward()
        rec(f"g{s}", x.grad)
        x.grad = None


@case
def lw_scalar_out_dynamic(C, rec):
    f = C(lambda x: lw_scalar(x.tanh()) * 2, dynamic=True)
    for n in (2, 3, 5):
        x = leaf(n, seed=n)
        out = f(x)
        rec(f"o{n}", out)


@case
def lw_library_cea(C, rec):
    f = C(lambda x, s: torch.ops.t2x_lo33.lw_cea(x, s) + 1)
    rec("o1", f(r(4), 0.5))
    rec("o2", f(r(4), 1.5))
    x = leaf(3)
    try:
        out = f(x, 2.0)
        rec("o3", out)
        out.sum().backward()
        rec("g", x.grad)
    except RuntimeError as e:
        rec("err", e)


@case
def lw_strided_inputs(C, rec):
    f = C(lambda x: lw_opt(x.t(), None, [x.t()[:, ::1]], "pos", 1.0, 0)[0])
    rec("o", f(r(4, 3)))


LIB.define("lw_opaque(Tensor x) -> Tensor")


def _lw_opaque(x):
    with torch.no_grad():  # a kernel autograd does not see (as a C++ kernel)
        return x * 2


LIB.impl("lw_opaque", _lw_opaque, "CPU")
torch.library.register_fake(f"{NS}::lw_opaque", lambda x: torch.empty_like(x), lib=LIB)
torch2xla.register_lowering(torch.ops.t2x_lo33.lw_opaque, lambda x: x * 2)
LIB.define("lw_lib_ag(Tensor x) -> Tensor")
LIB.impl("lw_lib_ag", lambda x: x.sin(), "CompositeExplicitAutograd")
torch.library.register_fake(f"{NS}::lw_lib_ag", lambda x: torch.empty_like(x), lib=LIB)
torch.library.register_autograd(
    f"{NS}::lw_lib_ag",
    lambda ctx, g: g * ctx.saved_tensors[0].cos(),
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
    lib=LIB,
)
torch2xla.register_lowering(torch.ops.t2x_lo33.lw_lib_ag, lambda x: jnp.sin(x))


@case
def lw_library_opaque_kernel_grad(C, rec):
    f = C(lambda x: (torch.ops.t2x_lo33.lw_opaque(x) * x).sum())
    x = leaf(4)
    with torch.no_grad():
        rec("nograd", f(x))
    out = f(x)
    rec("o", out)
    out.backward()
    rec("g", x.grad)


@case
def lw_library_with_autograd(C, rec):
    f = C(lambda x: (torch.ops.t2x_lo33.lw_lib_ag(x) * x).sum())
    x = leaf(4)
    out = f(x)
    rec("o", out)
    out.backward()
    rec("g", x.grad)


# == batch 5: parametrizations returning views, hypernetworks, layouts =======================
class Transposed(nn.Module):
    def forward(self, X):
        return X.t()

    def right_inverse(self, W):
        return W.t()


class Identity(nn.Module):
    def forward(self, X):
        return X


@case
def param_returns_view_or_same(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4))
    parametrize.register_parametrization(m[0], "weight", Transposed())
    parametrize.register_parametrization(m[1], "weight", Identity())
    parametrize.register_parametrization(m[1], "bias", Identity())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", C(m), m, r(2, 3), opt, steps=2)
    f = C(lambda: (m[0].weight, m[1].weight * 1))
    rec("weights", f())


@case
def param_weight_as_output(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)
    parametrize.register_parametrization(lin, "weight", Symmetric())
    f = C(lambda x: (lin(x), lin.weight))
    out, w = f(r(2, 3))
    rec("o", [out, w])
    (out.sum() + w.square().sum()).backward()
    rec("g", pgrads(lin))


@case
def hypernetwork_functional_call(C, rec):
    torch.manual_seed(0)
    target = nn.Linear(3, 2)
    hyper = nn.Linear(4, 8)

    def fn(z, x):
        flat = hyper(z)
        p = {"weight": flat[:6].view(2, 3), "bias": flat[6:]}
        return torch.func.functional_call(target, p, (x,))

    opt = torch.optim.Adam(hyper.parameters(), lr=0.1)
    f = C(fn)
    for i in range(3):
        out = f(r(4, seed=i), r(5, 3, seed=i))
        rec(f"o{i}", out)
        out.square().sum().backward()
        rec(f"g{i}", [*pgrads(hyper), *pgrads(target)])
        opt.step()
        opt.zero_grad()


@case
def weight_norm_old_remove_between(C, rec):
    torch.manual_seed(0)
    m = nn.utils.weight_norm(nn.Linear(3, 2), dim=None)
    opt = torch.optim.SGD(m.parameters(), lr=0.2)
    f = C(m)
    train(rec, "wn", f, m, r(4, 3), opt, steps=2)
    nn.utils.remove_weight_norm(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.2)
    train(rec, "removed", f, m, r(4, 3), opt, steps=1)


@case
def weight_norm_double_dims(C, rec):
    for dim in (0, 1, -1, None):
        torch.manual_seed(0)
        m = parametrizations.weight_norm(nn.Linear(3, 2).double(), dim=dim)
        x = r(2, 3, dtype=torch.float64)
        out = C(m)(x)
        rec(f"o{dim}", out)
        out.sum().backward()
        rec(f"g{dim}", pgrads(m))
        torch._dynamo.reset()


@case
def prune_importance_scores_and_identity(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    prune.l1_unstructured(m, "weight", amount=0.5, importance_scores=torch.arange(12.0).view(3, 4))
    prune.identity(m, "bias")
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", f, m, r(2, 4), opt, steps=2)
    rec("mask", [m.weight_mask, m.bias_mask])


@case
def functional_call_parametrized_weight_key(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    w = leaf(3, 3, seed=4)
    f = C(lambda p, x: torch.func.functional_call(m, p, (x,)))
    try:
        out = f({"weight": w}, r(2, 3))
        rec("o", out)
        out.sum().backward()
        rec("g", [w.grad, *pgrads(m)])
    except Exception as e:  # noqa: BLE001
        rec("err", e)


# == batch 6: argument kinds ===================================================================
@torch.library.custom_op(f"{NS}::kinds", mutates_args=())
def kinds(
    x: torch.Tensor,
    dt: torch.dtype,
    ns: list[int],
    fs: list[float],
    n: int | float | bool,  # noqa: PYI041  (torch.library's spelling of Scalar)
    dev: torch.device,
) -> torch.Tensor:
    return (x.to(dt) * sum(ns) + sum(fs) * n).to(dev)


@kinds.register_fake
def _(x, dt, ns, fs, n, dev):
    return torch.empty_like(x, dtype=dt, device=dev)


@torch.library.custom_op(f"{NS}::kinds_lw", mutates_args=())
def kinds_lw(
    x: torch.Tensor,
    dt: torch.dtype,
    ns: list[int],
    n: int | float | bool,  # noqa: PYI041
) -> torch.Tensor:
    return x.to(dt) * sum(ns) + n


@kinds_lw.register_fake
def _(x, dt, ns, n):
    return torch.empty_like(x, dtype=dt)


@torch2xla.register_lowering(kinds_lw)
def _(x, dt, ns, n):
    from torch2xla.runtime._interop import jax_dtype

    return x.astype(jax_dtype(dt)) * sum(ns) + n


@case
def co_arg_kinds(C, rec):
    f = C(lambda x, dt, ns, n: kinds(x, dt, ns, [0.5, 1.5], n, torch.device("cpu")) + 1)
    rec("a", f(r(3), torch.float64, [1, 2], 3))
    rec("b", f(r(3), torch.float32, [4], 2.5))
    rec("c", f(r(3), torch.int32, [1, 1, 1], 2))


@case
def lw_arg_kinds(C, rec):
    f = C(lambda x, dt, ns, n: kinds_lw(x, dt, ns, n) * 2)
    rec("a", f(r(3), torch.float64, [1, 2], 3))
    rec("b", f(r(3), torch.float32, [4], 2.5))
    rec("c", f(r(3), torch.float64, [1, 1, 1], 2))


# == batch 7: caching, in-place compile ======================================================
@case
def param_cached_stale_within_block(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    f = C(m)
    x = r(2, 3)
    with parametrize.cached():
        rec("o1", f(x))
        with torch.no_grad():
            m.parametrizations.weight.original.mul_(2)
        rec("o2 cached", f(x))
    rec("o3 after", f(x))
    with parametrize.cached():
        rec("o4 new block", f(x))


@case
def spectral_norm_module_compile_inplace(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(parametrizations.spectral_norm(nn.Linear(3, 4)), nn.ReLU())
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    train(rec, "t", f, m, r(2, 3), opt, steps=2)
    m.eval()
    with torch.no_grad():
        rec("eval", f(r(2, 3, seed=3)))
    m.train()
    train(rec, "t2", f, m, r(2, 3, seed=4), opt, steps=1)


@torch.library.custom_op(f"{NS}::maybe_mut", mutates_args="unknown")
def maybe_mut(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    y.add_(1)
    return x * y


@maybe_mut.register_fake
def _(x, y):
    return torch.empty_like(x)


@case
def co_mutates_unknown(C, rec):
    def fn(x, y):
        out = maybe_mut(x * 2, y)
        return out + y

    f = C(fn)
    x, y = r(3), torch.zeros(3)
    for i in range(2):
        rec(f"o{i}", f(x, y))
        rec(f"y{i}", y)


# == batch 8: ordering of writes around users' ops ============================================
@case
def co_write_order_around_ops(C, rec):
    def fn(x, buf, y):
        x.add_(1)
        acc_(buf, x)
        x.mul_(2)
        acc_(x[1:], buf[:2])
        out = layouts([x, buf[::2]])
        buf.sub_(y)
        return out, count_and_scale(x.detach(), buf[0].long().clamp(0, 3))

    f = C(fn)
    x, buf, y = r(3), torch.zeros(3), r(3, seed=2)
    for i in range(2):
        rec(f"o{i}", f(x, buf, y))
        rec(f"s{i}", [x, buf])


@case
def co_reads_bn_updated_stats(C, rec):
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3)

    def fn(x):
        y = bn(x)
        seen = torch.zeros(3)
        acc_(seen, bn.running_mean)
        return y, seen, layouts([bn.running_var])

    f = C(fn)
    for i in range(2):
        rec(f"o{i}", f(r(4, 3, seed=i)))
        rec(f"stats{i}", [bn.running_mean, bn.running_var, bn.num_batches_tracked])


@torch.library.custom_op(f"{NS}::cuda_only", mutates_args=(), device_types="cuda")
def cuda_only(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@cuda_only.register_fake
def _(x):
    return torch.empty_like(x)


@case
def co_no_kernel_for_device(C, rec):
    f = C(lambda x: cuda_only(x * 2) + 1)
    try:
        rec("o", f(r(3)))
    except NotImplementedError as e:
        rec("err", e)


# == batch 9: one tensor as two arguments =====================================================
@case
def co_same_tensor_twice_grads(C, rec):
    f = C(lambda x: scale_shift(x, x, 0.5, 1).sum())
    x = leaf(4)
    out = f(x)
    rec("o", out)
    out.backward()
    rec("g", x.grad)


@case
def co_mutated_and_read_same(C, rec):
    def fn(buf):
        acc_(buf, buf)
        acc_(buf[1:], buf[:-1].clone())
        return buf * 1

    f = C(fn)
    buf = r(4)
    rec("o", f(buf))
    rec("buf", buf)


@case
def co_overlapping_views_of_input(C, rec):
    f = C(lambda x: layouts([x[:3], x[1:], x[::2]]) + scale_shift(x[:3], x[1:], 2.0, 0).sum())
    rec("o", f(r(4)))
    g = C(lambda x, y: layouts([x, y]))
    base = r(6)
    rec("o2", g(base[:4], base[2:]))


@case
def co_param_views_train(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 6))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            h = scale_shift(self.w[:, ::2], self.lin.weight.t().repeat(2, 1)[:4], 0.5, 0)
            e, _ = two_out(self.w.t()[1:4])
            return self.lin(x @ h) + e.sum() + x_only(x, self.w[:2, 1:5]).sum(-1, keepdim=True)

    torch.manual_seed(0)
    m = M()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    train(rec, "t", C(m), m, r(2, 4), opt, steps=2)


@torch.library.custom_op(f"{NS}::col_major", mutates_args=())
def col_major(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).t().contiguous().t()


@col_major.register_fake
def _(x):
    return torch.empty_strided(x.shape, (1, x.shape[0]), dtype=x.dtype)


@case
def co_output_layout(C, rec):
    f = C(lambda x: (col_major(x), col_major(x) + 1, col_major(x).sin()))
    x = leaf(3, 4)
    out = f(x)
    rec("o", out)
    rec("strides", [t.stride() for t in out])


# == batch 10: parametrizations on rectangular weights, dtype-changing, structured pruning ====
@case
def orthogonal_rectangular_maps(C, rec):
    for orth in ("matrix_exp", "cayley", "householder"):
        torch.manual_seed(0)
        m = parametrizations.orthogonal(nn.Linear(5, 3), orthogonal_map=orth)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        train(rec, orth, C(m), m, r(2, 5), opt, steps=2)
        torch._dynamo.reset()


class ToDouble(nn.Module):
    def forward(self, X):
        return X.double()


@case
def param_unsafe_dtype_change(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", ToDouble(), unsafe=True)
    parametrize.register_parametrization(m, "bias", ToDouble(), unsafe=True)
    f = C(m)
    x = leaf(2, 3, dtype=torch.float64)
    out = f(x)
    rec("o", out)
    out.sum().backward()
    rec("g", [*pgrads(m), x.grad])


@case
def prune_conv_ln_structured_train(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Conv2d(4, 2, 1))
    prune.ln_structured(m[0], "weight", amount=0.5, n=2, dim=0)
    prune.ln_structured(m[2], "weight", amount=0.25, n=1, dim=1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    train(rec, "t", C(m), m, r(2, 2, 5, 5), opt, steps=2)


@case
def prune_state_dict_roundtrip(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    prune.l1_unstructured(m, "weight", amount=0.5)
    f = C(m)
    x = r(2, 4)
    rec("o0", f(x))
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    sd["weight_mask"] = torch.ones_like(sd["weight_mask"])
    sd["weight_orig"] = sd["weight_orig"] * 3
    m.load_state_dict(sd)
    rec("o1", f(x))


# == batch 11: autocast rules of users' ops, dynamic mutation ==================================
@torch.library.custom_op(f"{NS}::ac_mm", mutates_args=())
def ac_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


@ac_mm.register_fake
def _(a, b):
    return a.new_empty(a.shape[0], b.shape[1])


torch.library.register_autocast(f"{NS}::ac_mm", "cpu", torch.bfloat16)

ac_mm.register_autograd(
    lambda ctx, g: (g @ ctx.saved_tensors[1].t(), ctx.saved_tensors[0].t() @ g),
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs),
)


@case
def co_register_autocast(C, rec):
    f = C(lambda a, b: ac_mm(a, b).sum(-1))
    a, b = leaf(3, 4), leaf(4, 2, seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = f(a, b)
    rec("o", out)
    out.float().sum().backward()
    rec("g", grads(a, b))
    with torch.no_grad():
        rec("no autocast", f(a, b))


@case
def co_mutating_dynamic(C, rec):
    def fn(buf, x):
        acc_(buf[: x.shape[0]], x * 2)
        return buf.sum()

    f = C(fn, dynamic=True)
    buf = torch.zeros(8)
    for n in (2, 3, 5):
        rec(f"o{n}", f(buf, r(n, seed=n)))
        rec(f"buf{n}", buf)


@torch.library.custom_op(f"{NS}::lw_ste", mutates_args=())
def lw_ste(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.round(x * scale) / scale


lw_ste.register_fake(lambda x, scale: torch.empty_like(x))
lw_ste.register_autograd(
    lambda ctx, g: (g.clamp(-1, 1), None), setup_context=lambda ctx, inputs, output: None
)
torch2xla.register_lowering(lw_ste, lambda x, scale: jnp.round(x * scale) / scale)


@case
def lw_ste_formula(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(4, 3)
    f = C(lambda x: m(lw_ste(x, 4.0)).square().sum() + lw_ste(m.weight, 2.0).sum())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = leaf(2, 4)
    for i in range(2):
        out = f(x)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", [x.grad, *pgrads(m)])
        opt.step()
        opt.zero_grad()
        x.grad = None


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, compare))
