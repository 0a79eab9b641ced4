"""User code whose compiled function is split by graph breaks or runs Python side effects
(session 22): ``.item()``/``.tolist()``/``print``/data-dependent ``if``, ``graph_break()``,
numpy and ``torch.compiler.disable``d helpers in the middle of a training forward; gradients
across the break; in-place writes of inputs, buffers, lists, dicts and globals around the
break; exceptions raised inside compiled code (caught there or not), ``assert`` on values;
generators, ``zip``/``enumerate`` over ``ModuleList``, closures, ``functools.partial``,
nested compiled functions, recursion; random ops across breaks under ``torch.manual_seed``.

    PYTHONPATH=. python scripts/probe_breaks.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_breaks.py   # torch's own

Harness of ``probe_userprog`` (values, dtypes, ``requires_grad``/``grad_fn``/``is_leaf``,
``.grad`` None-ness, errors by type and eager's first line, eager's warnings). Version counters
are recorded as "did it change" (eager bumps once per write, Dynamo's copy-back once per
mutated input: the count is not promised, the change is).

Left (torch's own: ``aot_eager`` differs the same way): ``uncaught_bad_index_after_writes``
(Dynamo specializes a 0-d index tensor and raises while tracing, before the graph's writes),
``leaf_inplace_raises_after_break`` (Dynamo's ``TorchRuntimeError``, a ``RuntimeError``,
with its own first line), ``inference_mode_across_break`` (outputs are not inference
tensors). ``saved_then_written_through_alias`` (ours): a tensor saved for the backward and
then changed in the same graph through a detached alias passed as another input; eager's
backward raises, ours runs (the fake run's inputs have separate version counters).
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import run
from probe_autograd import leaf
from probe_userprog import compare as _compare


def compare(name, fn) -> str:
    """``probe_userprog``'s comparison, errors by eager's type: ours may be a subclass
    (``OpAssertionError`` is an ``AssertionError``)."""
    import probe_autograd4 as a4

    describe = a4.describe

    def describe_mro(v):
        if isinstance(v, BaseException):
            names = {c.__name__ for c in type(v).__mro__}
            d = describe(v)
            return (
                "E",
                type(v).__name__ if type(v).__module__ != "torch2xla._errors" else names,
                d[2],
            )
        return describe(v)

    a4.describe = describe_mro
    same = a4.same

    def same_mro(a, b, path=""):
        if a[0] == "E" and b[0] == "E" and isinstance(a[1], set):
            if b[1] not in a[1]:
                return f"{path}: error {a[1]}: {a[2]} (xla) vs {b[1]}: {b[2]} (eager)"
            return None if b[2][:50] in a[2] else f"{path}: MSG {a[2]!r} vs {b[2]!r}"
        if a[0] == "E" and b[0] == "E" and isinstance(b[1], set):
            return None
        return same(a, b, path)

    a4.same = same_mro
    try:
        return _compare(name, fn)
    finally:
        a4.describe, a4.same = describe, same


SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def _x(*shape, seed=0):
    return leaf(*shape, seed=seed, rg=False)


def _grads(m):
    return [p.grad for p in m.parameters()]


# ============================================================================================
# gradients across a break
@scenario
def item_mid_forward_grads(C, rec):
    def f(x, w):
        h = (x * w).tanh()
        s = h.sum().item()
        return h * s + w

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def tolist_mid_forward_grads(C, rec):
    def f(x, w):
        h = x * w
        vals = h.tolist()
        return h.exp() * (vals[0] + vals[-1]), vals

    x, w = leaf(4), leaf(4, seed=1)
    out, vals = C(f)(x, w)
    rec("out", out)
    rec("vals", vals)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@scenario
def print_mid_forward(C, rec):
    import io
    from contextlib import redirect_stdout

    def f(x, w):
        h = x @ w
        print("h", h.shape)
        return h.relu().sum()

    x, w = leaf(2, 3), leaf(3, 2, seed=1)
    buf = io.StringIO()
    with redirect_stdout(buf):
        out = C(f)(x, w)
    rec("printed", buf.getvalue())
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def data_branch_both_ways(C, rec):
    def f(x, w):
        h = x * w
        if h.sum() > 0:
            return h.sin(), True
        return h.cos() * 2, False

    g = C(f)
    for k in range(4):
        x, w = leaf(3, seed=k), leaf(3, seed=10 + k)
        out, side = g(x, w)
        rec(f"out {k}", [out, side])
        out.sum().backward()
        rec(f"grads {k}", [x.grad, w.grad])


@scenario
def numpy_helper_mid_forward(C, rec):
    def f(x, w):
        h = (x * w).sigmoid()
        scale = float(np.linalg.norm(h.detach().numpy()))
        return h / scale

    x, w = leaf(3, 2), leaf(3, 2, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])


@torch.compiler.disable
def _eager_helper(h, w):
    return h * w.exp() + 1


@scenario
def disabled_helper_mid_forward(C, rec):
    def f(x, w):
        h = x.sin() * w
        h = _eager_helper(h, w)
        return (h * x).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def tensor_before_break_used_after(C, rec):
    def f(x, w, b):
        a = x * 2
        h = a.tanh() * w
        torch._dynamo.graph_break()
        return (a * b + h).sum(), a

    x, w, b = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    s, a = C(f)(x, w, b)
    rec("a", a)
    s.backward()
    rec("grads", [x.grad, w.grad, b.grad])


@scenario
def inplace_before_break_saved_after(C, rec):
    def f(x, w):
        h = x * w
        h.mul_(2)
        torch._dynamo.graph_break()
        return (h.exp() * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_after_break_on_saved_before_raises(C, rec):
    def f(x, w):
        h = x * w
        e = h.exp()
        torch._dynamo.graph_break()
        e.add_(1)  # exp saved its output: backward must raise as eager
        return e.sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_after_break_on_saved_input_raises(C, rec):
    def f(x, w):
        h = x * w  # saves x and w
        torch._dynamo.graph_break()
        with torch.no_grad():
            w.mul_(2)
        return h.sum()

    x, w = leaf(3), leaf(3, seed=1)
    out = C(f)(x, w)
    rec("w", w)
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def view_of_input_returned_across_break(C, rec):
    def f(x):
        v = x[1:]
        torch._dynamo.graph_break()
        return v, v * 2

    base = torch.arange(6.0).reshape(3, 2)
    v, d = C(f)(base)
    rec("v", [v, d, v._base is base])
    v.add_(100)
    rec("base after", base)


@scenario
def view_of_grad_input_returned_across_break(C, rec):
    def f(x):
        h = x * 1
        v = h.t()
        torch._dynamo.graph_break()
        return v, v[0]

    x = leaf(2, 3)
    v, r = C(f)(x)
    rec("outs", [v, r])
    (v.sum() + r.square().sum()).backward()
    rec("grad", x.grad)


@scenario
def requires_grad_inside(C, rec):
    def f(x, w):
        w.requires_grad_()
        h = x * w
        torch._dynamo.graph_break()
        return h.sum()

    x, w = leaf(3), _x(3, seed=1)
    out = C(f)(x, w)
    rec("out", out)
    out.backward()
    rec("grads", [x.grad, w.grad, w.requires_grad])


@scenario
def requires_grad_inside_intermediate(C, rec):
    def f(x):
        h = (x * 2).detach()
        h.requires_grad_()
        torch._dynamo.graph_break()
        return (h.exp() * 3).sum(), h

    x = leaf(3)
    s, h = C(f)(x)
    rec("outs", [s, h])
    s.backward()
    rec("grads", [x.grad, h.grad])


@scenario
def detach_before_break(C, rec):
    def f(x, w):
        h = (x * w).detach()
        torch._dynamo.graph_break()
        return (h * w).sum(), h

    x, w = leaf(3), leaf(3, seed=1)
    s, h = C(f)(x, w)
    rec("h", h)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def only_second_graph_requires_grad(C, rec):
    def f(x, w):
        h = x.cos() * 2
        torch._dynamo.graph_break()
        return (h * w).sum()

    x, w = _x(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def only_first_graph_requires_grad(C, rec):
    def f(x, c):
        h = x.cos() * 2
        torch._dynamo.graph_break()
        return h.sum() + c.sum(), c * 3

    x, c = leaf(3), _x(3, seed=1)
    s, k = C(f)(x, c)
    rec("k", k)
    s.backward()
    rec("grads", [x.grad, c.grad])


@scenario
def break_in_module_forward_training(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4)
            self.b = nn.Linear(4, 2)
            self.stats = []

        def forward(self, x):
            h = self.a(x).relu()
            self.stats.append(h.mean().item())
            return self.b(h)

    torch.manual_seed(0)
    m = M()
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for k in range(3):
        out = f(_x(4, 3, seed=k))
        out.square().mean().backward()
        rec(f"grads {k}", _grads(m))
        opt.step()
        opt.zero_grad()
    rec("stats", torch.tensor(m.stats))


@scenario
def break_inside_no_grad(C, rec):
    def f(x, w):
        with torch.no_grad():
            h = x * w
            torch._dynamo.graph_break()
            h2 = h * w
        return (h2 + x * w).sum(), h2

    x, w = leaf(3), leaf(3, seed=1)
    s, h2 = C(f)(x, w)
    rec("h2", h2)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def break_inside_enable_grad_under_no_grad(C, rec):
    def f(x, w):
        with torch.enable_grad():
            h = x * w
            torch._dynamo.graph_break()
            return (h * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    with torch.no_grad():
        s = C(f)(x, w)
    rec("s", s)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def several_breaks_shared_weight(C, rec):
    def f(x, w):
        h = x
        for _ in range(3):
            h = (h @ w).tanh()
            torch._dynamo.graph_break()
        return h.sum()

    x, w = leaf(2, 3), leaf(3, 3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def retain_grad_across_break(C, rec):
    def f(x):
        h = x * 3
        h.retain_grad()
        torch._dynamo.graph_break()
        return h.sin().sum(), h

    x = leaf(3)
    s, h = C(f)(x)
    s.backward()
    rec("grads", [x.grad, h.grad])


@scenario
def grad_hook_across_break(C, rec):
    seen = []

    def f(x):
        h = x * 3
        h.register_hook(lambda g: seen.append(g.clone()) or g * 2)
        torch._dynamo.graph_break()
        return h.sin().sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("grads", [x.grad, *seen])


@scenario
def autograd_grad_inside_across_break(C, rec):
    def f(x):
        y = x.pow(3)
        torch._dynamo.graph_break()
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        return g

    x = leaf(3)
    g = C(f)(x)
    rec("g", g)
    g.sum().backward()
    rec("grad", x.grad)


# ============================================================================================
# mutation around breaks
@scenario
def input_mutated_both_sides(C, rec):
    def f(x, y):
        x.add_(1)
        s = x.sum()
        torch._dynamo.graph_break()
        x.mul_(y)
        return s, x * 1

    x, y = _x(3), _x(3, seed=1)
    v0 = x._version
    outs = C(f)(x, y)
    rec("outs", outs)
    rec("x", [x, x._version > v0])


@scenario
def mutation_in_second_graph_of_tensor_read_in_first(C, rec):
    def f(x):
        r = x * 2  # read
        torch._dynamo.graph_break()
        x.zero_()
        return r

    x = _x(3)
    r = C(f)(x)
    rec("outs", [r, x])


@scenario
def first_graph_output_view_mutated_in_second(C, rec):
    def f(x):
        v = x.view(-1)[:2]
        torch._dynamo.graph_break()
        v.fill_(7)
        return x.sum(), v

    x = _x(2, 2)
    s, v = C(f)(x)
    rec("outs", [s, v, x])


@scenario
def alias_outputs_two_graphs(C, rec):
    def f(x):
        a = x * 2
        torch._dynamo.graph_break()
        b = a[0]
        b.add_(1)
        return a, b, a

    x = _x(2, 3)
    a, b, a2 = C(f)(x)
    rec("same obj", [a is a2, b._base is a])
    b.add_(10)
    rec("a", a)


@scenario
def same_tensor_returned_twice(C, rec):
    def f(x):
        h = x + 1
        torch._dynamo.graph_break()
        return h, h, x

    x = _x(3)
    a, b, c = C(f)(x)
    rec("is", [a is b, c is x])
    a.mul_(2)
    rec("b", b)


@scenario
def same_grad_tensor_returned_twice(C, rec):
    def f(x):
        h = x.exp()
        return h, h

    x = leaf(3)
    a, b = C(f)(x)
    rec("is", a is b)
    (a.sum() + b.sum()).backward()
    rec("grad", x.grad)


@scenario
def buffer_mutated_around_break(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros((), dtype=torch.long))
            self.register_buffer("acc", torch.zeros(3))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.count += 1
            h = self.lin(x)
            if h.sum() > 0:
                self.acc.add_(h.detach().mean(0))
            else:
                self.acc.sub_(1)
            self.count += 1
            return h * self.count

    torch.manual_seed(0)
    m = M()
    f = C(m)
    for k in range(3):
        out = f(_x(2, 3, seed=k))
        out.sum().backward()
        rec(f"state {k}", [out, m.count, m.acc, *_grads(m)])


@scenario
def python_list_dict_global_mutated(C, rec):
    log: list = []
    d: dict = {}

    def f(x):
        log.append(x.sum())
        d["a"] = x * 2
        torch._dynamo.graph_break()
        d["b"] = d["a"] + 1
        log.append(len(d))
        return x.cos()

    g = C(f)
    for k in range(2):
        g(_x(3, seed=k))
    rec("log", [log[0], log[1], log[2], log[3]])
    rec("d", [d["a"], d["b"]])


_G_TENSOR = torch.zeros(3)
_G_COUNT = 0


def _global_writer(x):
    global _G_COUNT, _G_TENSOR
    _G_COUNT += 1
    _G_TENSOR = _G_TENSOR + x
    torch._dynamo.graph_break()
    return _G_TENSOR * _G_COUNT


@scenario
def global_rebound_across_break(C, rec):
    global _G_COUNT, _G_TENSOR
    _G_COUNT, _G_TENSOR = 0, torch.zeros(3)
    g = C(_global_writer)
    outs = [g(_x(3, seed=k)) for k in range(3)]
    rec("outs", outs)
    rec("globals", [_G_TENSOR, _G_COUNT])


@scenario
def inplace_input_then_item_branch(C, rec):
    def f(x):
        x.mul_(-1)
        if x.sum().item() > 0:
            x.add_(1)
        else:
            x.sub_(1)
        return x.clone()

    for k in range(3):
        x = _x(3, seed=k)
        out = C(f)(x)
        rec(f"{k}", [out, x])


@scenario
def mutated_input_requires_grad_leaf_view_after_break(C, rec):
    def f(x, buf):
        h = x * 2
        torch._dynamo.graph_break()
        buf[0].copy_(h[0])
        return (buf * x).sum()

    x = leaf(2, 3)
    buf = torch.zeros(2, 3)
    out = C(f)(x, buf)
    rec("buf", buf)
    out.backward()
    rec("grad", x.grad)


@scenario
def mutate_output_of_first_graph_used_for_grad(C, rec):
    def f(x, w):
        h = x * w
        torch._dynamo.graph_break()
        h.add_(1)  # mul saved x and w, not h: fine
        return h.sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


# ============================================================================================
# exceptions
@scenario
def try_except_bad_index(C, rec):
    def f(x, i):
        try:
            return x[i] * 2
        except IndexError:
            return x.sum() * 0 - 1

    g = C(f)
    rec("ok", g(_x(3), torch.tensor(1)))
    rec("bad", g(_x(3), torch.tensor(7)))


@scenario
def try_except_bad_index_int(C, rec):
    def f(x, i: int):
        try:
            return x[i] * 2
        except IndexError as e:
            return x.sum() * 0 - 1, type(e).__name__

    g = C(f)
    rec("ok", g(_x(3), 1))
    rec("bad", g(_x(3), 7))


@scenario
def try_except_shape_mismatch(C, rec):
    def f(x, y):
        try:
            return x @ y
        except RuntimeError:
            return x.sum() * 0

    g = C(f)
    rec("ok", g(_x(2, 3), _x(3, 2)))
    rec("bad", g(_x(2, 3), _x(2, 2)))


@scenario
def try_except_broadcast(C, rec):
    def f(x, y):
        try:
            z = x + y
        except RuntimeError as e:
            return x * 0, str(e)[:20]
        return z, ""

    g = C(f)
    rec("ok", g(_x(3), _x(3)))
    rec("bad", g(_x(3), _x(4)))


@scenario
def try_except_gather_index_tensor(C, rec):
    def f(x, idx):
        try:
            return torch.gather(x, 0, idx)
        except RuntimeError:
            return torch.zeros_like(idx, dtype=x.dtype) - 1

    g = C(f)
    rec("ok", g(_x(4), torch.tensor([0, 3])))
    rec("bad", g(_x(4), torch.tensor([0, 9])))


@scenario
def try_except_embedding(C, rec):
    emb = nn.Embedding(5, 2)

    def f(i):
        try:
            return emb(i)
        except IndexError:
            return None

    g = C(f)
    rec("ok", g(torch.tensor([1, 4])))
    rec("bad", [g(torch.tensor([1, 5])) is None])


@scenario
def uncaught_bad_index_after_writes(C, rec):
    def f(x, buf, i):
        buf.add_(1)
        x.mul_(2)
        return x[i]

    x, buf = _x(3), torch.zeros(2)
    try:
        C(f)(x, buf, torch.tensor(5))
    except IndexError as e:
        rec("err", e)
    rec("state", [x, buf])


@scenario
def raise_after_partial_writes(C, rec):
    def f(x, buf):
        buf.add_(x)
        x.mul_(3)
        if x.sum() > 100:
            raise ValueError("too big")
        buf.add_(1)
        return buf * 1

    for k, scale in enumerate((1.0, 100.0)):
        x, buf = torch.full((3,), scale), torch.zeros(3)
        try:
            rec(f"out {k}", C(f)(x, buf))
        except ValueError as e:
            rec(f"err {k}", e)
        rec(f"state {k}", [x, buf])


@scenario
def raise_python_after_writes_no_branch(C, rec):
    def f(x, buf):
        buf.copy_(x * 2)
        x.zero_()
        raise KeyError("stop")

    x, buf = _x(3), torch.zeros(3)
    try:
        C(f)(x, buf)
    except KeyError as e:
        rec("err", e)
    rec("state", [x, buf])


@scenario
def assert_on_tensor_values(C, rec):
    def f(x):
        x.add_(1)
        assert (x > 0).all(), "negative"
        return x * 2

    g = C(f)
    x = torch.ones(3)
    rec("ok", [g(x), x])
    x = torch.tensor([1.0, -5.0, 2.0])
    try:
        g(x)
    except AssertionError as e:
        rec("err", e)
    rec("x", x)


@scenario
def torch_check_in_compiled(C, rec):
    def f(x):
        torch._check(x.shape[0] > 1, lambda: "too short")
        return x * 2

    g = C(f)
    rec("ok", g(_x(3)))
    try:
        g(_x(1))
    except RuntimeError as e:
        rec("err", e)


@scenario
def except_then_continue_training(C, rec):
    lin = nn.Linear(3, 2)

    def f(x, i):
        h = lin(x)
        try:
            sel = h[:, i]
        except IndexError:
            sel = h.mean(1)
        return sel.sum()

    g = C(f)
    for i in (0, 5):
        lin.zero_grad()
        g(_x(4, 3), i).backward()
        rec(f"grads {i}", _grads(lin))


@scenario
def exception_in_disabled_helper(C, rec):
    @torch.compiler.disable
    def helper(x):
        if x.sum() > 0:
            raise RuntimeError("positive")
        return x

    def f(x, buf):
        buf.add_(1)
        try:
            h = helper(x)
        except RuntimeError:
            h = -x
        buf.add_(h)
        return h * 2

    for k in range(2):
        x, buf = _x(3, seed=k), torch.zeros(3)
        rec(f"{k}", [C(f)(x, buf), buf])


@scenario
def value_error_int_conversion(C, rec):
    def f(x):
        try:
            n = int(x)
        except (ValueError, RuntimeError) as e:
            return x * 0, type(e).__name__
        return x * n, ""

    g = C(f)
    rec("ok", g(torch.tensor(3.0)))
    rec("bad", g(torch.ones(2)))


@scenario
def reshape_error_caught(C, rec):
    def f(x):
        try:
            return x.view(4, 2)
        except RuntimeError:
            return x.reshape(-1)

    g = C(f)
    rec("ok", g(_x(8)))
    rec("bad", g(_x(6)))


@scenario
def cat_dim_error_caught(C, rec):
    def f(x, y):
        try:
            return torch.cat([x, y], 0)
        except RuntimeError:
            return torch.cat([x.flatten(), y.flatten()])

    g = C(f)
    rec("ok", g(_x(2, 3), _x(1, 3)))
    rec("bad", g(_x(2, 3), _x(1, 2)))


@scenario
def dtype_error_caught(C, rec):
    def f(x, y):
        try:
            x.add_(y)
        except RuntimeError:
            return x * 0
        return x

    g = C(f)
    rec("ok", g(torch.ones(3), torch.ones(3)))
    rec("bad", g(torch.ones(3, dtype=torch.long), torch.ones(3)))


@scenario
def index_put_bad_caught(C, rec):
    def f(x, i):
        try:
            x[i] = 1.0
        except IndexError:
            x.fill_(-1)
        return x

    g = C(f)
    rec("ok", g(torch.zeros(3), torch.tensor(2)))
    x = torch.zeros(3)
    rec("bad", [g(x, torch.tensor(3)), x])


@scenario
def uncaught_runtime_index_after_writes(C, rec):
    def f(x, buf, i):
        buf.add_(1)
        x.mul_(2)
        y = x[i]
        x.add_(100)
        return y

    x, buf = _x(3), torch.zeros(2)
    try:
        C(f)(x, buf, torch.tensor([5]))
    except IndexError as e:
        rec("err", e)
    rec("state", [x, buf])


@scenario
def uncaught_gather_after_writes_grad(C, rec):
    def f(x, w, buf, idx):
        buf.copy_(x.detach() * 3)
        h = x * w
        return torch.gather(h, 0, idx).sum()

    x, w, buf = leaf(4), leaf(4, seed=1), torch.zeros(4)
    g = C(f)
    g(x, w, buf, torch.tensor([0, 3])).backward()
    rec("grads", [x.grad, w.grad, buf])
    buf.zero_()
    try:
        g(x, w, buf, torch.tensor([0, 4]))
    except RuntimeError as e:
        rec("err", e)
    rec("buf", buf)


@scenario
def try_except_runtime_index_list(C, rec):
    def f(x, i):
        try:
            return x[i] * 2
        except IndexError:
            return x.sum(0, keepdim=True) * 0 - 1

    g = C(f)
    rec("ok", g(_x(3), torch.tensor([1])))
    rec("bad", g(_x(3), torch.tensor([7])))


@scenario
def try_except_in_caller_of_inlined(C, rec):
    def pick(x, i):
        return x[i].exp()

    def f(x, i, buf):
        buf.add_(1)
        try:
            y = pick(x, i)
        except IndexError:
            y = x * 0
        buf.add_(1)
        return y

    g = C(f)
    buf = torch.zeros(2)
    rec("ok", [g(_x(3), torch.tensor([1]), buf), buf])
    rec("bad", [g(_x(3), torch.tensor([9]), buf), buf])


@scenario
def try_finally_write(C, rec):
    def f(x, i, buf):
        try:
            return x[i] * 2
        finally:
            buf.add_(1)

    g = C(f)
    buf = torch.zeros(2)
    rec("ok", [g(_x(3), torch.tensor([1]), buf), buf])
    try:
        g(_x(3), torch.tensor([9]), buf)
    except IndexError as e:
        rec("err", e)
    rec("buf", buf)


@scenario
def try_except_int_div_zero(C, rec):
    def f(a, b):
        try:
            return a // b
        except RuntimeError:
            return a * 0 - 1

    g = C(f)
    rec("ok", g(torch.tensor([7, 8]), torch.tensor([2, 3])))
    rec("bad", g(torch.tensor([7, 8]), torch.tensor([2, 0])))


@scenario
def try_except_linalg(C, rec):
    def f(a):
        try:
            return torch.linalg.cholesky(a)
        except torch.linalg.LinAlgError:
            return torch.zeros_like(a)

    g = C(f)
    rec("ok", g(torch.eye(2) * 2))
    rec("bad", g(-torch.eye(2)))


@scenario
def try_except_import_error_ok(C, rec):
    def f(x):
        try:
            import numpy  # noqa: F401
        except ImportError:
            pass
        return x * 2

    rec("out", C(f)(_x(3)))


@scenario
def try_except_around_harmless_training(C, rec):
    lin = nn.Linear(3, 2)

    def f(x, idx):
        h = lin(x)
        try:
            h = h[:, idx]
        except IndexError:
            h = h * 0
        return h.sum()

    g = C(f)
    for idx in (torch.tensor([1, 0]), torch.tensor([2])):
        lin.zero_grad()
        g(_x(4, 3), idx).backward()
        rec(f"grads {idx.tolist()}", _grads(lin))


@scenario
def assert_state_after(C, rec):
    def f(x, buf):
        buf.add_(1)
        x.add_(1)
        assert (x > 0).all(), "negative"
        buf.add_(1)
        return x * 2

    x, buf = torch.tensor([1.0, -5.0, 2.0]), torch.zeros(2)
    try:
        C(f)(x, buf)
    except AssertionError as e:
        rec("err", e)
    rec("x", [x, buf])


@scenario
def assert_in_try(C, rec):
    def f(x):
        try:
            assert (x > 0).all(), "negative"
            return x.log()
        except AssertionError:
            return x.abs().log()

    g = C(f)
    rec("ok", g(torch.tensor([1.0, 5.0])))
    rec("bad", g(torch.tensor([1.0, -5.0])))


@scenario
def try_except_first_call_bad(C, rec):
    def f(x, i):
        try:
            return x[i] * 2
        except IndexError:
            return x.sum(0, keepdim=True) * 0 - 1

    g = C(f)
    rec("bad", g(_x(3), torch.tensor([7])))
    rec("ok", g(_x(3), torch.tensor([1])))


@scenario
def suppress_context_manager(C, rec):
    import contextlib

    def f(x, i, buf):
        buf.add_(1)
        with contextlib.suppress(IndexError):
            buf.add_(x[i])
        return buf * 2

    g = C(f)
    buf = torch.zeros(1)
    rec("ok", [g(_x(3), torch.tensor([1]), buf), buf])
    rec("bad", [g(_x(3), torch.tensor([9]), buf), buf])


class _Swallow:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


@scenario
def swallowing_context_manager(C, rec):
    def f(x, i, buf):
        buf.add_(1)
        with _Swallow():
            buf.add_(x[i])
        return buf * 2

    g = C(f)
    buf = torch.zeros(1)
    rec("ok", [g(_x(3), torch.tensor([1]), buf), buf])
    rec("bad", [g(_x(3), torch.tensor([9]), buf), buf])


@scenario
def try_except_in_module_forward_compile_count(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(4, 3)
            self.lin = nn.Linear(3, 2)

        def forward(self, i):
            h = self.lin(self.emb(i).relu())
            try:
                h = h[:, :, 1]
            except IndexError:
                pass
            return h.sum()

    torch.manual_seed(0)
    m = M()
    f = C(m)
    for k in range(3):
        f(torch.tensor([[1, 3]])).backward()
    rec("grads", _grads(m))


# ============================================================================================
# Python structure
@scenario
def generator_over_tensor(C, rec):
    def f(x):
        return sum(r * i for i, r in enumerate(x)), [r.sum() for r in x]

    x = leaf(3, 2)
    s, rows = C(f)(x)
    rec("outs", [s, rows])
    s.sum().backward()
    rec("grad", x.grad)


@scenario
def iterator_with_break_inside(C, rec):
    def f(x):
        acc = torch.zeros(x.shape[1])
        for r in x:
            if r.sum() > 0:
                acc = acc + r
            else:
                acc = acc - r.exp()
        return acc

    x = leaf(4, 2)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def zip_enumerate_module_list(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(3))
            self.gates = nn.ParameterList(nn.Parameter(torch.ones(3) * (i + 1)) for i in range(3))

        def forward(self, x):
            for i, (layer, g) in enumerate(zip(self.layers, self.gates)):
                x = layer(x) * g
                if i == 1:
                    torch._dynamo.graph_break()
            return x

    torch.manual_seed(0)
    m = M()
    out = C(m)(_x(2, 3))
    rec("out", out)
    out.sum().backward()
    rec("grads", _grads(m))


@scenario
def closure_tensor_changes(C, rec):
    state = {"t": torch.ones(3)}

    def make():
        t = state["t"]

        def f(x):
            return x * t

        return f

    t0 = torch.ones(3)

    def g(x):
        return x * t0

    cg = C(g)
    rec("0", cg(_x(3)))
    t0.mul_(5)
    rec("1", cg(_x(3)))
    f = C(make())
    rec("2", f(_x(3)))


@scenario
def closure_cell_rebound(C, rec):
    def outer():
        t = torch.ones(3)

        def f(x):
            return x * t

        def set_(v):
            nonlocal t
            t = v

        return f, set_

    f, set_ = outer()
    g = C(f)
    rec("0", g(_x(3)))
    set_(torch.full((3,), 4.0))
    rec("1", g(_x(3)))
    set_(torch.full((2,), 2.0))
    rec("2", g(_x(2)))


@scenario
def partial_with_tensor(C, rec):
    def f(x, w, scale):
        return (x @ w) * scale

    w = leaf(3, 2, seed=1)
    p = functools.partial(f, w=w, scale=2.0)
    g = C(p)
    x = leaf(2, 3)
    out = g(x)
    rec("out", out)
    out.sum().backward()
    rec("grads", [x.grad, w.grad])
    with torch.no_grad():
        w.mul_(2)
    rec("after", g(x))


@scenario
def nested_compiled(C, rec):
    def inner(x):
        return x.sin() * 2

    ci = C(inner)

    def outer(x, w):
        h = ci(x * w)
        return (h * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(outer)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def nested_compiled_with_break(C, rec):
    def inner(x):
        h = x.sin()
        torch._dynamo.graph_break()
        return h * 2

    ci = C(inner)

    def outer(x, w, buf):
        buf.add_(1)
        h = ci(x * w)
        buf.add_(h.detach())
        return (h * w).sum()

    x, w, buf = leaf(3), leaf(3, seed=1), torch.zeros(3)
    C(outer)(x, w, buf).backward()
    rec("grads", [x.grad, w.grad, buf])


def _rec_fn(x, n):
    if n == 0:
        return x
    return _rec_fn(x.sin() * 2, n - 1) + x


@scenario
def recursion(C, rec):
    x = leaf(3)
    out = C(_rec_fn)(x, 3)
    rec("out", out)
    out.sum().backward()
    rec("grad", x.grad)


def _rec_data(x):
    if x.abs().sum() < 1:
        return x
    return _rec_data(x * 0.5) + 1


@scenario
def recursion_data_dependent(C, rec):
    x = leaf(3) * 3
    x.retain_grad()
    out = C(_rec_data)(x)
    rec("out", out)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def dataclass_and_namedtuple_out_across_break(C, rec):
    import collections

    P = collections.namedtuple("P", "a b")

    def f(x):
        a = x * 2
        torch._dynamo.graph_break()
        return P(a, a.sum())

    x = leaf(3)
    p = C(f)(x)
    rec("p", [type(p).__name__, p.a, p.b])
    p.b.backward()
    rec("g", x.grad)


# ============================================================================================
# randomness across breaks
@scenario
def dropout_across_break_reproducible(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))

    def f(x):
        h = m(x)
        torch._dynamo.graph_break()
        return F.dropout(h, 0.5) + m(h)

    g = C(f)
    x = _x(4, 8)
    torch.manual_seed(1)
    a = g(x)
    torch.manual_seed(1)
    b = g(x)
    rec("repeat", torch.equal(a, b))
    c = g(x)
    rec("fresh", torch.equal(a, c))
    rec("fraction", [((a == 0).float().mean() > 0.2).item()])


@scenario
def dropout_grad_uses_forward_mask_across_break(C, rec):
    def f(x):
        h = F.dropout(x, 0.5)
        torch._dynamo.graph_break()
        return F.dropout(h * 3, 0.3)

    x = leaf(200)
    out = C(f)(x)
    out.sum().backward()
    # grad is 1/(0.5*0.7)*3 where kept, else 0: same pattern as the output
    rec("mask match", torch.equal(x.grad != 0, out != 0))


@scenario
def rand_item_branch(C, rec):
    def f(x):
        r = torch.rand(())
        if r.item() > 2:  # never
            return x * 0
        return x + 1

    rec("out", C(f)(_x(3)))


@scenario
def manual_seed_inside_compiled(C, rec):
    def f(x):
        torch.manual_seed(3)
        a = torch.rand(3)
        torch._dynamo.graph_break()
        torch.manual_seed(3)
        b = torch.rand(3)
        return x + a, torch.equal(a, b)

    _, same = C(f)(_x(3))
    rec("same", same)


@scenario
def explicit_generator_reseeded(C, rec):
    def f(x, g):
        a = torch.rand(3, generator=g)
        torch._dynamo.graph_break()
        b = torch.randn(3, generator=g)
        return x + a, b

    fn = C(f)
    g = torch.Generator().manual_seed(5)
    a1, b1 = fn(_x(3), g)
    torch.manual_seed(123)
    g.manual_seed(5)
    a2, b2 = fn(_x(3), g)
    rec("repeat", [torch.equal(a1, a2), torch.equal(b1, b2)])
    a3, _ = fn(_x(3), g)
    rec("fresh", torch.equal(a1, a3))


@scenario
def explicit_generator_values(C, rec):
    def f(x, g):
        return x + torch.rand(3, generator=g)

    g = torch.Generator().manual_seed(5)
    out = C(f)(_x(3), g)
    rec("state moved", not torch.equal(g.get_state(), torch.Generator().manual_seed(5).get_state()))
    rec("in range", bool(((out - _x(3)) >= 0).all() and ((out - _x(3)) < 1).all()))


@scenario
def default_generator_advances(C, rec):
    def f(x):
        return F.dropout(x, 0.5)

    torch.manual_seed(0)
    before = torch.default_generator.get_state()
    C(f)(_x(8))
    rec("moved", not torch.equal(before, torch.default_generator.get_state()))


@scenario
def numpy_write_shares_memory(C, rec):
    def f(x):
        a = x.numpy()
        a[0] = 5.0
        return x * 2

    x = _x(3)
    out = C(f)(x)
    rec("out", [out, x])


@scenario
def numpy_roundtrip_mid_forward(C, rec):
    def f(x):
        a = x.detach().numpy() * 2
        y = torch.from_numpy(a)
        return x + y, y.dtype

    x = leaf(3)
    out, dt = C(f)(x)
    rec("out", [out, str(dt)])
    out.sum().backward()
    rec("g", x.grad)


@scenario
def while_data_dependent_loop(C, rec):
    def f(x):
        n = 0
        while x.norm() > 1:
            x = x / 2
            n += 1
        return x, n

    x = leaf(4) * 5
    x.retain_grad()
    out, n = C(f)(x)
    rec("out", [out, n])
    out.sum().backward()
    rec("g", x.grad)


@scenario
def list_input_mutated(C, rec):
    def f(xs):
        xs.append(xs[0] * 2)
        xs[1].add_(1)
        torch._dynamo.graph_break()
        xs[0] = xs[0] + xs[-1]
        return len(xs)

    xs = [_x(3), _x(3, seed=1)]
    n = C(f)(xs)
    rec("xs", [n, *xs])


@scenario
def dict_in_dict_out(C, rec):
    def f(d):
        out = {k: v * 2 for k, v in d.items()}
        torch._dynamo.graph_break()
        out["sum"] = sum(out.values())
        d["a"].mul_(3)
        return out

    d = {"a": _x(3), "b": _x(3, seed=1)}
    out = C(f)(d)
    rec("out", [out["a"], out["b"], out["sum"], d["a"]])


@scenario
def module_attr_tensor_assigned_across_break(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.cache = None

        def forward(self, x):
            h = self.lin(x)
            if self.cache is not None:
                h = h + self.cache
            self.cache = h.detach()
            torch._dynamo.graph_break()
            return h.relu()

    torch.manual_seed(0)
    m = M()
    f = C(m)
    for k in range(3):
        out = f(_x(2, 3, seed=k))
        out.sum().backward()
        rec(f"out {k}", [out, m.cache, *_grads(m)])


@scenario
def global_tensor_mutated_in_second_graph_read_in_first(C, rec):
    state = torch.zeros(3)

    def f(x):
        r = x + state
        torch._dynamo.graph_break()
        state.add_(x)
        return r

    g = C(f)
    outs = [g(_x(3, seed=k)) for k in range(3)]
    rec("outs", [*outs, state])


@scenario
def nonlocal_counter_across_break(C, rec):
    n = 0

    def f(x):
        nonlocal n
        n += 1
        h = x * n
        torch._dynamo.graph_break()
        n += 1
        return h * n

    g = C(f)
    outs = [g(_x(3)) for _ in range(3)]
    rec("outs", [*outs, n])


@scenario
def no_grad_decorated_helper(C, rec):
    @torch.no_grad()
    def stats(h):
        return h.mean(), h.std()

    def f(x, w):
        h = x * w
        m, s = stats(h)
        return ((h - m) / s).sum(), m

    x, w = leaf(5), leaf(5, seed=1)
    out, m = C(f)(x, w)
    rec("m", m)
    out.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inplace_on_view_of_input_view_across_break(C, rec):
    def f(x):
        v = x[:, 0]
        v.mul_(2)
        torch._dynamo.graph_break()
        x[1, 2:].add_(v)  # (no overlap with v: eager leaves partial overlap undefined)
        return v

    base = torch.arange(12.0).reshape(3, 4)
    x = base[1:]
    v = C(f)(x)
    rec("out", [v, base])
    rec("base", v._base is base)


@scenario
def tolist_as_indices(C, rec):
    def f(x, idx):
        rows = idx.tolist()
        return torch.stack([x[r] for r in rows]) * 2

    x = leaf(4, 2)
    out = C(f)(x, torch.tensor([3, 0, 3]))
    rec("out", out)
    out.sum().backward()
    rec("g", x.grad)


@scenario
def item_int_as_shape(C, rec):
    def f(x, n):
        k = int(n.item())
        return x[:k].sum() + torch.ones(k).sum()

    g = C(f)
    rec("a", g(_x(5), torch.tensor(3)))
    rec("b", g(_x(5), torch.tensor(4)))


@scenario
def bool_of_tensor_int_result(C, rec):
    def f(x):
        flag = bool((x > 0).any())
        n = int((x > 0).sum())
        return x * n if flag else x, n, flag

    rec("a", list(C(f)(_x(4))))
    rec("b", list(C(f)(-_x(4).abs())))


@scenario
def dropout_in_train_eval_break(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.3), nn.ReLU())

    def f(x):
        h = m(x)
        if h.sum() > 0:
            h = h * 2
        return m(h)

    g = C(f)
    m.eval()
    rec("eval", g(_x(3, 6)))
    m.train()
    torch.manual_seed(4)
    a = g(_x(3, 6))
    torch.manual_seed(4)
    b = g(_x(3, 6))
    rec("train repeat", torch.equal(a, b))


@scenario
def randn_like_across_item(C, rec):
    def f(x):
        noise = torch.randn_like(x)
        s = noise.abs().sum().item()
        return x + noise / s, s > 0

    g = C(f)
    torch.manual_seed(7)
    a, _ = g(_x(5))
    torch.manual_seed(7)
    b, ok = g(_x(5))
    rec("repeat", [torch.equal(a, b), ok])


@torch.compiler.disable
def _eager_mutator(h):
    h.mul_(3)
    return h


@scenario
def disabled_helper_mutates_between_graphs(C, rec):
    def f(x, w):
        h = x * w
        _eager_mutator(h)
        return (h.exp() * w).sum(), h

    x, w = leaf(3), leaf(3, seed=1)
    s, h = C(f)(x, w)
    rec("h", h)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def disabled_helper_mutates_input(C, rec):
    def f(x, buf):
        buf.add_(1)
        _eager_mutator(buf)
        return buf * x

    x, buf = _x(3), torch.ones(3)
    v0 = buf._version
    out = C(f)(x, buf)
    rec("out", [out, buf, buf._version > v0])


@scenario
def manual_sgd_with_print(C, rec):
    import io
    from contextlib import redirect_stdout

    lin = nn.Linear(3, 2)

    def step(lr):
        with torch.no_grad():
            for p in lin.parameters():
                p -= lr * p.grad
                print(p.grad.norm())
                p.grad.zero_()

    s = C(step)
    for k in range(2):
        lin(_x(4, 3, seed=k)).square().sum().backward()
        with redirect_stdout(io.StringIO()):
            s(0.1)
        rec(f"params {k}", [p.detach().clone() for p in lin.parameters()])
        rec(f"grads {k}", [p.grad for p in lin.parameters()])


@scenario
def grad_set_none_inside(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        out = lin(x).sum()
        for p in lin.parameters():
            p.grad = None
        torch._dynamo.graph_break()
        return out

    for k in range(2):
        out = C(f)(_x(2, 3, seed=k))
        out.backward()
        rec(f"grads {k}", [p.grad for p in lin.parameters()])


@scenario
def backward_inside_with_break(C, rec):
    lin = nn.Linear(3, 2)

    def f(x):
        loss = lin(x).square().sum()
        print_val = loss.item()
        loss.backward()
        return print_val, lin.weight.grad.clone()

    v, g = C(f)(_x(4, 3))
    rec("v", [torch.tensor(v), g, lin.bias.grad])


@scenario
def checkpoint_with_break_inside(C, rec):
    from torch.utils.checkpoint import checkpoint

    def block(h, w):
        h = (h @ w).tanh()
        torch._dynamo.graph_break()
        return h * 2

    def f(x, w):
        return checkpoint(block, x, w, use_reentrant=False).sum()

    x, w = leaf(2, 3), leaf(3, 3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def custom_function_with_item(C, rec):
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            s = x.abs().max().item()
            ctx.s = s
            return x / s

        @staticmethod
        def backward(ctx, g):
            return g / ctx.s

    def f(x):
        return Scale.apply(x * 2).sum()

    x = leaf(3)
    C(f)(x).backward()
    rec("g", x.grad)


@scenario
def forward_hook_with_print(C, rec):
    import io
    from contextlib import redirect_stdout

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    seen = []
    m[0].register_forward_hook(lambda mod, i, o: seen.append(o.detach().sum().item()) or None)
    m[1].register_forward_hook(lambda mod, i, o: o * 2)
    f = C(m)
    with redirect_stdout(io.StringIO()):
        out = f(_x(2, 3))
    out.sum().backward()
    rec("out", [out, torch.tensor(seen), *(p.grad for p in m.parameters())])


@scenario
def item_from_requires_grad_used_as_scale(C, rec):
    def f(x, w):
        scale = w.sum().item()  # (no gradient through a Python float)
        return (x * scale * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    C(f)(x, w).backward()
    rec("grads", [x.grad, w.grad])


@scenario
def outputs_of_two_graphs_share_storage(C, rec):
    def f(x):
        y = x * 2
        a = y[:2]
        torch._dynamo.graph_break()
        b = y[1:]
        return a, b

    x = leaf(3)
    a, b = C(f)(x)
    rec("outs", [a, b])
    (a.sum() * 2 + b.square().sum()).backward()
    rec("g", x.grad)
    with torch.no_grad():
        a[1] = 100
    rec("b after", b)


@scenario
def break_between_inplace_on_intermediate_requires_grad(C, rec):
    def f(x):
        h = x.clone()
        h.mul_(2)
        torch._dynamo.graph_break()
        h.add_(x)
        torch._dynamo.graph_break()
        h.sin_()
        return h

    x = leaf(3)
    h = C(f)(x)
    rec("h", h)
    h.sum().backward()
    rec("g", x.grad)


@scenario
def leaf_inplace_raises_after_break(C, rec):
    def f(x):
        y = x * 2
        torch._dynamo.graph_break()
        x.add_(1)
        return y

    x = leaf(3)
    C(f)(x)
    rec("x", x)


@scenario
def leaf_inplace_under_no_grad_after_break(C, rec):
    def f(x):
        y = x * 2
        torch._dynamo.graph_break()
        with torch.no_grad():
            x.add_(1)
        return y

    x = leaf(3)
    y = C(f)(x)
    rec("x", [x, y, x._version])
    y.sum().backward()
    rec("g", x.grad)


@scenario
def replayed_error_leaves_eagers_generator(C, rec):
    def f(x, i):
        h = F.dropout(x, 0.5)
        return h[i]

    g = C(f)
    torch.manual_seed(3)
    try:
        g(_x(6), torch.tensor([9]))
    except IndexError as e:
        rec("err", e)
    rec("next draw", torch.rand(4))


@scenario
def iterator_argument_consumed(C, rec):
    def f(it, x):
        a = next(it)
        torch._dynamo.graph_break()
        b = next(it)
        return x * a + b

    it = iter([_x(3, seed=1), _x(3, seed=2), _x(3, seed=3)])
    out = C(f)(it, _x(3))
    rec("out", [out, next(it)])


@scenario
def autocast_across_break(C, rec):
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 2)

    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = a(x)
            torch._dynamo.graph_break()
            out = b(h.relu())
        return out, h.dtype, out.float().sum()

    x = _x(3, 4)
    out, dt, s = C(f)(x)
    rec("out", [out, str(dt), s])
    s.backward()
    rec("grads", [a.weight.grad, b.weight.grad])


@scenario
def set_grad_enabled_call_across_break(C, rec):
    def f(x, w):
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        h = x * w
        torch._dynamo.graph_break()
        torch.set_grad_enabled(prev)
        return (h + x * w).sum(), h.requires_grad

    x, w = leaf(3), leaf(3, seed=1)
    s, rg = C(f)(x, w)
    rec("rg", [rg, torch.is_grad_enabled()])
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def inference_mode_across_break(C, rec):
    def f(x, w):
        with torch.inference_mode():
            h = x * w
            torch._dynamo.graph_break()
            h2 = h + 1
        return h2, h2.is_inference()

    x, w = leaf(3), leaf(3, seed=1)
    h2, inf = C(f)(x, w)
    rec("out", [h2, inf])


@scenario
def requires_grad_branch(C, rec):
    def f(x):
        if x.requires_grad:
            return x * 2
        return x - 1

    g = C(f)
    rec("a", g(leaf(3)))
    rec("b", g(_x(3)))


@scenario
def return_input_and_mutated_input(C, rec):
    def f(x, y):
        y.add_(x)
        torch._dynamo.graph_break()
        return x, y, y.view(-1)

    x, y = _x(3), torch.zeros(3)
    a, b, c = C(f)(x, y)
    rec("is", [a is x, b is y, c._base is y])
    rec("y", y)


@scenario
def int_item_loop_bound(C, rec):
    def f(x, n):
        acc = x
        for _ in range(int(n.item())):
            acc = acc.sin() + x
        return acc

    g = C(f)
    x = leaf(3)
    out = g(x, torch.tensor(3))
    out.sum().backward()
    rec("a", [out, x.grad])
    rec("b", g(x.detach(), torch.tensor(1)))


def _versions_scenario(f, make):
    def s(C, rec):
        args = make()
        v0 = [a._version for a in args]
        g = C(f)
        for k in range(2):
            g(*args)
            rec(f"versions {k}", [a._version - v for a, v in zip(args, v0)])
        rec("values", list(args))

    return s


def _v_many(x, y):
    x.add_(1)
    x.mul_(2)
    y[0].fill_(3)
    torch._dynamo.graph_break()
    x.sub_(1)
    y.t_() if False else y.add_(x.sum())
    return x * 1


def _v_views(x, y):
    x[0].add_(1)
    x[1:].mul_(2)
    x.view(-1)[2:4].zero_()
    if y.sum() > -100:
        y.clamp_(min=0)
    return x.sum()


def _v_setitem(x, y):
    x[1] = 5.0
    x[x > 100] = 0.0
    y.index_add_(0, torch.tensor([0, 0]), torch.ones(2, 3))
    return x


def _v_out(x, y):
    torch.add(x, 1, out=y)
    torch._dynamo.graph_break()
    torch.mul(y, 2, out=x)
    return x


for _name, _f in [("many", _v_many), ("views", _v_views), ("setitem", _v_setitem), ("out", _v_out)]:
    SCENARIOS[f"versions_{_name}"] = _versions_scenario(
        _f, lambda: [_x(3, 3).contiguous(), _x(3, 3, seed=1)]
    )


@scenario
def versions_buffer_bn_and_counter(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))

    def f(x):
        h = m(x)
        torch._dynamo.graph_break()
        return m[1](h)

    bufs = list(m[1].buffers())
    v0 = [b._version for b in bufs]
    g = C(f)
    for k in range(2):
        g(_x(5, 3, seed=k))
        rec(f"versions {k}", [b._version - v for b, v in zip(bufs, v0)])
    rec("bufs", bufs)


def _numbers_scenario(make_x, make_src):
    def s(C, rec):
        def f(x, src):
            v = src.sum().item()
            return x * v, x + v, x / v, x - v, v

        g = C(f)
        for k in range(2):
            rec(f"call {k}", list(g(make_x(), make_src(k))))

    return s


for _name, _mx, _ms in [
    (
        "f64_x_f32_item",
        lambda: _x(3).double(),
        lambda k: torch.tensor([0.1, 0.7 + k], dtype=torch.float32),
    ),
    (
        "f32_x_f64_item",
        lambda: _x(3),
        lambda k: torch.tensor([1 / 3, 1e-9 * (k + 1)], dtype=torch.float64),
    ),
    (
        "i64_x_int_item",
        lambda: torch.tensor([2**40, -3, 7]),
        lambda k: torch.tensor([3 + k, 2**33]),
    ),
    (
        "i32_x_int_item",
        lambda: torch.tensor([5, -3, 7], dtype=torch.int32),
        lambda k: torch.tensor([3 + k, 2]),
    ),
    (
        "i64_x_float_item",
        lambda: torch.tensor([2**40, -3, 7]),
        lambda k: torch.tensor([0.5, 0.25 * k]),
    ),
    ("bf16_x_f32_item", lambda: _x(3).bfloat16(), lambda k: torch.tensor([0.1, 1.3 + k])),
    (
        "u8_x_int_item",
        lambda: torch.tensor([200, 3, 7], dtype=torch.uint8),
        lambda k: torch.tensor([100 + k, 0]),
    ),
    ("bool_x_bool_item", lambda: torch.tensor([True, False]), lambda k: torch.tensor([k == 0])),
]:
    SCENARIOS[f"numbers_{_name}"] = _numbers_scenario(_mx, _ms)


@scenario
def detached_alias_written_after_break_raises_in_backward(C, rec):
    def f(x):
        h = x.exp()
        d = h.detach()
        torch._dynamo.graph_break()
        d.add_(1)
        return h.sum(), d

    x = leaf(3)
    s, d = C(f)(x)
    rec("d", d)
    s.backward()
    rec("g", x.grad)


@scenario
def data_write_after_break(C, rec):
    def f(x, w):
        h = x * w
        torch._dynamo.graph_break()
        w.data.mul_(2)
        return (h * w).sum()

    x, w = leaf(3), leaf(3, seed=1)
    s = C(f)(x, w)
    rec("w", w)
    s.backward()
    rec("grads", [x.grad, w.grad])


@scenario
def view_output_of_first_graph_written_in_second(C, rec):
    def f(x):
        h = x.sigmoid()  # saves its output
        v = h[1:]
        torch._dynamo.graph_break()
        v.mul_(2)
        return h

    x = leaf(3)
    h = C(f)(x)
    rec("h", h)
    h.sum().backward()
    rec("g", x.grad)


@scenario
def view_written_in_second_graph_not_saved(C, rec):
    def f(x):
        h = x * 3
        v = h[1:]
        torch._dynamo.graph_break()
        v.mul_(x[1:])
        return h, v

    x = leaf(3)
    h, v = C(f)(x)
    rec("outs", [h, v])
    (h.sum() + v.square().sum()).backward()
    rec("g", x.grad)


@scenario
def grad_accumulated_inside(C, rec):
    def f(x, w, acc):
        loss = (x * w).sum()
        (g,) = torch.autograd.grad(loss, w)
        torch._dynamo.graph_break()
        acc.add_(g)
        return loss.detach()

    x, w, acc = leaf(3), leaf(3, seed=1), torch.zeros(3)
    g = C(f)
    for _ in range(2):
        g(x, w, acc)
    rec("acc", [acc, x.grad, w.grad])


@scenario
def try_after_a_break(C, rec):
    def f(x, i, buf):
        y = x.sin()
        buf.add_(1)
        torch._dynamo.graph_break()
        try:
            z = y[i]
        except IndexError:
            z = y * 0
        return z + buf.sum()

    g, buf = C(f), torch.zeros(2)
    for k, i in enumerate((1, 9, 0)):
        rec(f"call {k}", [g(_x(3), torch.tensor([i]), buf), buf.clone()])


@scenario
def break_inside_try(C, rec):
    def f(x, i):
        try:
            n = int(x.sum().item() > 0)
            z = x[i] * n
        except IndexError:
            z = x * 0
        return z

    g = C(f)
    for k, i in enumerate((1, 9)):
        rec(f"call {k}", g(_x(3), torch.tensor([i])))


@scenario
def try_in_module_called_by_compiled_training(C, rec):
    class Safe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, idx):
            h = self.lin(x)
            try:
                return h[:, idx]
            except IndexError:
                return h

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.safe = Safe()
            self.head = nn.Linear(3, 1)

        def forward(self, x, idx):
            h = self.safe(x.relu(), idx)
            return self.head(h[:, :3].sum(1, keepdim=True).expand(-1, 3)).sum()

    torch.manual_seed(0)
    m = Outer()
    f = C(m)
    for k, idx in enumerate((torch.tensor([0, 1, 2]), torch.tensor([5]), torch.tensor([2, 2, 0]))):
        m.zero_grad()
        f(_x(4, 3, seed=k), idx).backward()
        rec(f"grads {k}", [p.grad for p in m.parameters()])


@scenario
def saved_then_written_through_alias(C, rec):
    def f(h, d, w):
        y = h * w  # saves h
        d.mul_(2)
        return y.sum()

    x, w = leaf(3), leaf(3, seed=1)
    h = x * 2
    s = C(f)(h, h.detach(), w)
    s.backward()
    rec("grads", [x.grad, w.grad])


def main(argv) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
