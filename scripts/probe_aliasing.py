"""Probe inputs that share memory and cache entries reused where they should not be: one
compiled function or module called in sequence with inputs that alias each other in changing
ways (the same tensor twice, overlapping views, a view and its base, expanded and reinterpreted
views), module state that is tied, swapped, reloaded or recast between calls, global switches
toggled between calls, and code objects shared by several compiled functions. Every call is
compared strictly with eager PyTorch.

    PYTHONPATH=. python scripts/probe_aliasing.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_aliasing.py   # torch's own differences
    PYTHONPATH=. python scripts/probe_pcache.py probe_aliasing.py   # cold, then warm from records

A scenario is ``fn(C, call)`` as in ``probe_guards.py``: ``C(f, **kw)`` compiles (or not),
``call(label, thunk)`` records what ``thunk()`` returns or raises (the scenario goes on) and
``call.rec(label, value)`` records a value. Observed per tensor: dtype, shape, strides,
requires_grad, grad_fn presence, values; ``call.state(label, *tensors)`` records each tensor's
values, ``_version`` and ``.grad`` (None or its values). The compiled run also prints how many
XLA programs it compiled (``[n programs]``), to be read against what the scenario needs.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import traceback
import warnings

if sys.argv[1:2] != ["--pworker"]:
    os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")

import torch
import torch.nn.functional as F
from jax import monitoring
from torch import nn

import torch2xla  # noqa: F401  (registers the backend)

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}
_COMPILES = [0]


def _listener(name, *args, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_listener)


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def rand(*shape, seed=0, dtype=torch.float32, rg=False):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen, dtype=torch.float64)
    t = t.to(dtype) if dtype.is_floating_point or dtype.is_complex else (t * 4).to(dtype)
    return t.requires_grad_(rg)


# -- comparing --------------------------------------------------------------------------------
def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            tuple(v.stride()) if v.layout == torch.strided else None,
            v.requires_grad,
            v.grad_fn is None,
            v.detach().clone().resolve_conj().resolve_neg(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160])
    return ("V", v)


def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        names = ("dtype", "shape", "strides", "requires_grad", "grad_fn is None")
        for n, x, y in zip(names, a[1:6], b[1:6]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[6], b[6]
        if x.is_floating_point() or x.is_complex():
            tol = {"rtol": 1e-5, "atol": 1e-5}
            if x.dtype in (torch.bfloat16, torch.float16):
                tol = {"rtol": 1e-2, "atol": 1e-2}
            if not torch.allclose(x, y, equal_nan=True, **tol):
                return f"{path}: values\n  xla   {x.flatten()[:8]}\n  eager {y.flatten()[:8]}"
        elif not torch.equal(x, y):
            return f"{path}: values\n  xla   {x.flatten()[:8]}\n  eager {y.flatten()[:8]}"
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
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        return None
    if a[1] != b[1]:
        return f"{path}: {a[1]!r} (xla) vs {b[1]!r} (eager)"
    return None


def observe(fn, compiled: bool):
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def call(label, thunk):
        try:
            value = thunk()
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            value = e
        rec(label, value)
        return value

    def state(label, *tensors):
        for i, t in enumerate(tensors):
            rec(f"{label}[{i}] value", t.detach())
            rec(f"{label}[{i}] version", t._version)
            rec(f"{label}[{i}] grad", "None" if t.grad is None else t.grad)

    call.rec = rec
    call.state = state

    def C(f, **kw):
        if not compiled:
            return f
        kw.setdefault("backend", BACKEND)
        return torch.compile(f, **kw)

    torch._dynamo.reset()
    torch.manual_seed(0)
    before = _COMPILES[0]
    dtype = torch.get_default_dtype()
    try:
        fn(C, call)
    except Exception as e:  # noqa: BLE001
        obs.append(("raised", describe(e)))
    finally:
        torch.set_default_dtype(dtype)
    return obs, _COMPILES[0] - before


KNOWN: dict = {
    "detach_and_data_of_one_parameter_written": "not fixed: p.detach() and p.data (one memory, "
    "two version counters) written in one call are one overlapping group, written back through "
    "one base: p.data's counter does not move and p's moves by both writes",
}


def compare(name, fn) -> str:
    got, n = observe(fn, True)
    exp, _ = observe(fn, False)
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
        d = same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: {[x for x, _ in got]} (xla) vs {[x for x, _ in exp]} (eager)"
    return f"ok    {name} [{n} programs]"


# ============================================================================================
# the same tensor twice, then distinct ones, and back
@scenario
def same_twice_write_first(C, call):
    def g(a, b):
        a.add_(1)
        return a * b

    f = C(g)
    x, y = rand(4), rand(4, seed=1)
    for label, args in (("same", (x, x)), ("distinct", (x, y)), ("same again", (y, y))):
        call(label, lambda args=args: f(*args))
        call.state(label, x, y)


@scenario
def distinct_then_same_write_second_read_first(C, call):
    def g(a, b):
        b.mul_(2)
        return a + 1, b.sum()

    f = C(g)
    x, y = rand(3, 2), rand(3, 2, seed=1)
    for label, args in (("distinct", (x, y)), ("same", (x, x)), ("distinct again", (y, x))):
        call(label, lambda args=args: f(*args))
        call.state(label, x, y)


@scenario
def same_twice_returned(C, call):
    def g(a, b):
        a.add_(b)
        return a, b, a.view(-1)

    f = C(g)
    x, y = rand(2, 2), rand(2, 2, seed=1)
    out = call("distinct", lambda: f(x, y))
    call.rec("identity", [out[0] is x, out[1] is y, out[2]._base is x])
    out = call("same", lambda: f(y, y))
    call.rec("identity same", [out[0] is y, out[1] is y, out[2]._base is y])
    call.state("after", x, y)


@scenario
def same_twice_copy_(C, call):
    def g(a, b):
        a.copy_(b * 2 + 1)
        return b.clone()

    f = C(g)
    x, y = rand(4), rand(4, seed=1)
    for label, args in (("distinct", (x, y)), ("same", (y, y)), ("distinct", (x, y))):
        call(label, lambda args=args: f(*args))
        call.state(label, x, y)


@scenario
def same_three_args_first_and_last(C, call):
    def g(a, b, c):
        c.sub_(b)
        return a * 2, c

    f = C(g)
    x, y, z = rand(4), rand(4, seed=1), rand(4, seed=2)
    for label, args in (("distinct", (x, y, z)), ("a is c", (x, y, x)), ("b is c", (x, z, z))):
        call(label, lambda args=args: f(*args))
        call.state(label, x, y, z)


@scenario
def same_twice_grad(C, call):
    f = C(lambda a, b: (a * b).sum())
    x, y = rand(3, rg=True), rand(3, seed=1, rg=True)
    for label, args in (("same", (x, x)), ("distinct", (x, y)), ("same again", (y, y))):
        out = call(label, lambda args=args: f(*args))
        call(label + " backward", lambda out=out: out.backward())
        call.state(label, x, y)


@scenario
def same_twice_grad_write_under_no_grad(C, call):
    def g(a, b):
        with torch.no_grad():
            a.mul_(0.5)
        return (a * b).sum()

    f = C(g)
    x, y = rand(3, rg=True), rand(3, seed=1, rg=True)
    for label, args in (("distinct", (x, y)), ("same", (x, x)), ("distinct again", (y, x))):
        out = call(label, lambda args=args: f(*args))
        call(label + " backward", lambda out=out: out.backward())
        call.state(label, x, y)


@scenario
def tensor_and_its_detach(C, call):
    def g(a, b):
        b.add_(1)
        return a * 2

    f = C(g)
    x = rand(4, rg=True)
    with torch.no_grad():
        w = x * 1
    call("w, w.detach()", lambda: f(w, w.detach()))
    call.state("w", w)
    y = rand(4, seed=1)
    call("distinct", lambda: f(y, rand(4, seed=2)))
    call("y, y.detach()", lambda: f(y, y.detach()))
    call.state("y", y)


@scenario
def integer_index_add_same_tensor(C, call):
    def g(a, b, idx):
        a.index_add_(0, idx, b)
        return a.sum()

    f = C(g)
    idx = torch.tensor([0, 2])
    x, y = torch.arange(6).reshape(3, 2), torch.arange(6, 10).reshape(2, 2)
    call("distinct", lambda: f(x, y, idx))
    call.state("distinct", x, y)
    z = torch.arange(12).reshape(6, 2)
    call("overlapping rows", lambda: f(z[:3], z[3:5], idx))
    call("overlapping rows 2", lambda: f(z[:3], z[1:3], idx))
    call.state("z", z)


# ============================================================================================
# overlapping views of one base
@scenario
def row_and_rest(C, call):
    def g(a, b):
        a.mul_(10)
        return b.sum(0), a + 1

    f = C(g)
    x = rand(4, 3)
    call("x[0], x[1:]", lambda: f(x[0], x[1:]))
    call("x[1], x[1:]", lambda: f(x[1], x[1:]))
    call("x[1], x[:2].flatten()[1:4]", lambda: f(x[1], x[:2].flatten()[1:4]))
    call.state("x", x)
    call("fresh", lambda: f(rand(3, seed=1), rand(3, 3, seed=2)))


@scenario
def matrix_and_its_transpose(C, call):
    def g(a, b):
        a.mul_(2)
        return a + b, b.sum(1)

    f = C(g)
    x = rand(3, 3)
    call("distinct", lambda: f(rand(3, 3, seed=1), rand(3, 3, seed=2)))
    call("x, x.T", lambda: f(x, x.T))
    call.state("x", x)
    call("x.T, x", lambda: f(x.T, x))
    call.state("x", x)


@scenario
def overlapping_columns(C, call):
    def g(a, b):
        a.add_(1)
        b.mul_(3)
        return a.sum(), b.sum(0)

    f = C(g)
    x = rand(3, 4)
    call("cols", lambda: f(x[:, :2], x[:, 1:3]))
    call.state("x", x)
    call("distinct", lambda: f(rand(3, 2, seed=1), rand(3, 2, seed=2)))
    y = rand(3, 4, seed=3)
    call("cols disjoint", lambda: f(y[:, :2], y[:, 2:]))
    call.state("y", y)
    call("cols again", lambda: f(y[:, 1:3], y[:, :2]))
    call.state("y", y)


@scenario
def overlap_pattern_changes_same_shapes(C, call):
    def g(a, b):
        a.add_(b)
        return a.clone()

    f = C(g)
    base = rand(10)
    call("b after a", lambda: f(base[0:4], base[5:9]))
    call("partial", lambda: f(base[0:4], base[2:6]))
    call.state("base", base)
    base = rand(10, seed=1)
    call("nested", lambda: f(base[0:4], base[0:4].flip(0)))
    call.state("base", base)


@scenario
def view_and_base_write_view(C, call):
    def g(a, b):
        b.fill_(0.5)
        return a.sum(), a * 1

    f = C(g)
    x = rand(3, 4)
    call("x, x[1]", lambda: f(x, x[1]))
    call.state("x", x)
    call("distinct", lambda: f(rand(3, 4, seed=1), rand(4, seed=2)))
    y = rand(3, 4, seed=3)
    call("y, y[:, 2]", lambda: f(y, y[:, 2].contiguous()))
    call("y, y[2]", lambda: f(y, y[2]))
    call.state("y", y)


@scenario
def view_and_base_write_base(C, call):
    def g(a, b):
        a.mul_(3)
        return b * 1

    f = C(g)
    x = rand(3, 4)
    call("x, x[1]", lambda: f(x, x[1]))
    call("x, x[:, 1]", lambda: f(x, x[:, 1]))
    call.state("x", x)


@scenario
def view_and_base_grad(C, call):
    def g(a, b):
        return (a * 2).sum() + (b * 3).sum()

    f = C(g)
    x = rand(3, 4, rg=True)
    out = call("x, x[1]", lambda: f(x, x[1]))
    call("backward", lambda: out.backward())
    call.state("x", x)
    y = rand(3, 4, seed=1, rg=True)
    z = rand(4, seed=2, rg=True)
    out = call("distinct", lambda: f(y, z))
    call("backward 2", lambda: out.backward())
    call.state("y z", y, z)


@scenario
def expanded_input_written(C, call):
    f = C(lambda a: a.add_(1))
    x = rand(4)
    call("expanded", lambda: f(x.expand(3, 4)))
    call.state("x", x)
    call("contiguous", lambda: f(rand(3, 4, seed=1)))
    call("expanded again", lambda: f(x.expand(3, 4)))
    call.state("x", x)


@scenario
def expanded_after_contiguous_written(C, call):
    def g(a, b):
        a.mul_(b)
        return a.sum()

    f = C(g)
    call("contiguous", lambda: f(rand(3, 4), rand(3, 4, seed=1)))
    x = rand(1, 4, seed=2)
    call("expanded", lambda: f(x.expand(3, 4), rand(3, 4, seed=3)))
    call.state("x", x)
    call("expanded fill", lambda: C(lambda a: a.fill_(2.0))(x.expand(3, 4)))
    call.state("x", x)


@scenario
def expanded_view_of_written_input(C, call):
    def g(a, b):
        b.add_(1)
        return a * 2

    f = C(g)
    x = rand(4)
    call("a = b.expand", lambda: f(x.expand(3, 4), x))
    call.state("x", x)
    call("distinct", lambda: f(rand(3, 4, seed=1), rand(4, seed=2)))
    call("a = b.expand again", lambda: f(x.expand(3, 4), x))
    call.state("x", x)


@scenario
def diagonal_and_matrix(C, call):
    def g(d, m):
        d.zero_()
        return m.sum(0)

    f = C(g)
    x = rand(3, 3)
    call("diag", lambda: f(x.diagonal(), x))
    call.state("x", x)
    call("distinct", lambda: f(rand(3, seed=1), rand(3, 3, seed=2)))
    call("row", lambda: f(x[0], x))
    call.state("x", x)


@scenario
def reinterpreted_dtype_view(C, call):
    def g(a, b):
        a.add_(1)
        return b * 1

    f = C(g)
    x = torch.arange(4, dtype=torch.float32)
    call("x.view(int32), x", lambda: f(x.view(torch.int32), x))
    call.state("x", x)
    call("distinct", lambda: f(torch.arange(4, dtype=torch.int32), torch.ones(4)))
    y = torch.arange(4, dtype=torch.float32)
    call("again", lambda: f(y.view(torch.int32), y))
    call.state("y", y)


@scenario
def view_as_real_and_complex(C, call):
    def g(z, r):
        r.mul_(2)
        return z * 1

    f = C(g)
    z = rand(3, dtype=torch.complex64)
    call("z, view_as_real(z)", lambda: f(z, torch.view_as_real(z)))
    call.state("z", z)
    call("distinct", lambda: f(rand(3, dtype=torch.complex64, seed=1), rand(3, 2, seed=2)))


@scenario
def one_program_many_layouts(C, call):
    def g(a, b):
        a.add_(b)
        return a * 2, a.sum()

    f = C(g)
    x = rand(5, 6)
    layouts = {
        "contiguous": lambda: (rand(4, 4, seed=1), rand(4, 4, seed=2)),
        "offset": lambda: (x[1:5, 1:5], rand(4, 4, seed=3)),
        "transposed": lambda: (x[:4, :4].t(), rand(4, 4, seed=4)),
        "step": lambda: (x[:, ::2][:4].repeat(1, 2)[:, :4], x[1:5, 2:6]),
        "zero stride b": lambda: (rand(4, 4, seed=5), rand(4, seed=6).expand(4, 4)),
        "0-size": lambda: (x[:0, :4], x[:0, :4]),
        "same slice": lambda: (x[1:5, :4], x[1:5, :4]),
    }
    for label, make in layouts.items():
        args = make()
        call(label, lambda args=args: f(*args))
        call.state(label, *args)
    call.state("x", x)


@scenario
def channels_last_and_overlap(C, call):
    def g(a, b):
        a.mul_(2)
        return a + b

    f = C(g)
    x = rand(2, 3, 4, 4)
    cl = x.contiguous(memory_format=torch.channels_last)
    call("channels_last distinct", lambda: f(cl, rand(2, 3, 4, 4, seed=1)))
    call("channels_last same", lambda: f(cl, cl))
    call.state("cl", cl)
    call("contiguous same", lambda: f(x, x))
    call.state("x", x)


@scenario
def storage_offset_as_strided(C, call):
    def g(a, b):
        b.add_(1)
        return a.as_strided((2, 2), (1, 2), 1) * 1

    f = C(g)
    base = rand(12)
    call("distinct", lambda: f(rand(8, seed=1), rand(4, seed=2)))
    call("b in a", lambda: f(base[2:10], base[3:7]))
    call.state("base", base)
    call("offset only", lambda: f(base[4:12], rand(4, seed=3)))


@scenario
def unfold_windows_input(C, call):
    def g(w, x):
        x.add_(1)
        return w.sum(1)

    f = C(g)
    x = rand(8)
    call("windows", lambda: f(x.unfold(0, 3, 2), x))
    call.state("x", x)
    call("distinct", lambda: f(rand(3, 3, seed=1), rand(8, seed=2)))


@scenario
def dynamic_overlap_then_disjoint(C, call):
    def g(a, b):
        a.add_(1)
        return (a * b).sum(0)

    f = C(g, dynamic=True)
    for n in (4, 6, 5):
        base = rand(n + 2, 3, seed=n)
        call(f"overlap {n}", lambda n=n, base=base: f(base[:n], base[2:]))
        call.state(f"base {n}", base)
        call(f"disjoint {n}", lambda n=n: f(rand(n, 3, seed=1), rand(n, 3, seed=2)))


@scenario
def overlap_across_graph_break(C, call):
    def g(a, b):
        a.add_(1)
        torch._dynamo.graph_break()
        b.mul_(2)
        return a + b

    f = C(g)
    x = rand(6)
    call("overlap", lambda: f(x[:4], x[2:]))
    call.state("x", x)
    call("distinct", lambda: f(rand(4, seed=1), rand(4, seed=2)))
    call("same", lambda: f(x[:4], x[:4]))
    call.state("x", x)


@scenario
def list_input_same_tensor(C, call):
    def g(xs):
        xs[0].add_(1)
        return sum(x.sum() for x in xs)

    f = C(g)
    a, b = rand(3), rand(3, seed=1)
    call("distinct", lambda: f([a, b]))
    call("same", lambda: f([a, a]))
    call.state("ab", a, b)


@scenario
def output_view_of_overlapping_written_input(C, call):
    def g(a, b):
        a.add_(1)
        return b[1:], b.t() if b.dim() == 2 else b.unsqueeze(0)

    f = C(g)
    x = rand(10)
    out = call("overlap", lambda: f(x[:6], x[2:8]))
    call.rec("views", [out[0]._base is x, out[1]._base is x])
    out[0].mul_(0)  # (a write through the returned view lands in x)
    call.state("x", x)
    y = rand(3, 3, seed=1)
    out = call("same 2-d", lambda: f(y, y))
    out[1].add_(5)
    call.state("y", y)


@scenario
def overlapping_non_leaf_training(C, call):
    def g(a, b):
        a.mul_(2)
        return (a * b).sum()

    f = C(g)
    for label, make in (
        ("overlap", lambda h: (h[:4], h[2:6])),
        ("distinct", lambda h: (h[:3], h[3:6])),
        ("same", lambda h: (h[:4], h[:4])),
    ):
        w = rand(6, rg=True)
        h = w * 1
        out = call(label, lambda make=make, h=h: f(*make(h)))
        call(label + " backward", lambda out=out: out.backward())
        call.state(label, w)


@scenario
def same_tensor_positional_and_keyword(C, call):
    def g(a, *, b):
        b.sub_(1)
        return a + b

    f = C(g)
    x, y = rand(3), rand(3, seed=1)
    call("distinct", lambda: f(x, b=y))
    call("same", lambda: f(x, b=x))
    call.state("xy", x, y)


@scenario
def buffers_that_are_views_of_one_tensor(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            store = torch.zeros(2, 4)
            self.register_buffer("k", store[0])
            self.register_buffer("v", store[1])
            self.store = store

        def forward(self, x):
            self.k.add_(x)
            self.v.sub_(x * 2)
            return self.k * self.v

    m = M()
    f = C(m)
    x = rand(4)
    for step in range(3):
        call(f"step {step}", lambda: f(x))
        call.state(f"step {step}", m.store, m.k, m.v)


@scenario
def parameter_and_input_alias(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(rand(4))

        def forward(self, x):
            x.mul_(2)
            return self.w * 3

    m = M()
    f = C(m)
    with torch.no_grad():
        call("distinct", lambda: f(rand(4, seed=1)))
        call("input is w's data", lambda: f(m.w.detach()))
        call.state("w", m.w)
        call("input is a view of w", lambda: f(m.w.detach()[1:].repeat(2)[:4]))
        call("input is w[:]", lambda: f(m.w.detach()[:]))
        call.state("w", m.w)


@scenario
def detach_and_data_of_one_parameter_written(C, call):
    def g(a, b):
        a.add_(1)
        b.mul_(3)
        return a.sum()

    f = C(g)
    p = nn.Parameter(rand(4))
    call("distinct", lambda: f(rand(4, seed=1), rand(4, seed=2)))
    call("detach, data", lambda: f(p.detach(), p.data))
    call.state("p", p)


@scenario
def two_bound_methods_of_one_instance(C, call):
    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(rand(3))
            self.register_buffer("n", torch.zeros(()))

        def up(self, x):
            self.n.add_(1)
            return x * self.w

        def down(self, x):
            self.n.sub_(1)
            return x / self.w

    a = A()
    fu, fd = C(a.up), C(a.down)
    x = rand(3, seed=1)
    with torch.no_grad():
        for k in range(2):
            call(f"up {k}", lambda: fu(x))
            call(f"down {k}", lambda: fd(x))
            call.state(f"n {k}", a.n)


@scenario
def compiled_with_two_modes_alternating(C, call):
    f1 = C(_shared_write)
    f2 = C(_shared_write, mode="max-autotune-no-cudagraphs")
    x = rand(6)
    for k in range(2):
        call(f"default overlap {k}", lambda: f1(x[:4], x[2:]))
        call(f"mode distinct {k}", lambda k=k: f2(x[:4], rand(4, seed=k)))
        call(f"mode overlap {k}", lambda: f2(x[1:5], x[2:]))
        call.state(f"x {k}", x)


# ============================================================================================
# module state
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, i):
        return self.head(torch.tanh(self.emb(i)))


@scenario
def weight_tying_training(C, call):
    m = Tied()
    f = C(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    i = torch.tensor([[1, 2, 3], [3, 4, 9]])
    for step in range(3):
        out = call(f"out {step}", lambda: f(i))
        call(
            f"backward {step}",
            lambda out=out: F.cross_entropy(out.flatten(0, 1), i.flatten()).backward(),
        )
        call.state(f"w {step}", m.emb.weight)
        opt.step()
        opt.zero_grad()
    m.head.weight = nn.Parameter(m.emb.weight.detach().clone() * 2)  # untied
    out = call("untied", lambda: f(i))
    call("backward untied", lambda: out.sum().backward())
    call.state("untied", m.emb.weight, m.head.weight)


@scenario
def shared_submodule(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = nn.Linear(4, 4)
            self.b = self.a

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    m = M()
    f = C(m)
    x = rand(2, 4)
    out = call("out", lambda: f(x))
    call("backward", lambda: out.sum().backward())
    call.state("grads", m.a.weight, m.a.bias)
    m.b = nn.Linear(4, 4)
    with torch.no_grad():
        m.b.weight.copy_(m.a.weight * 2)
        m.b.bias.copy_(m.a.bias)
    out = call("unshared", lambda: f(x))
    call("backward 2", lambda: out.sum().backward())
    call.state("grads 2", m.a.weight, m.b.weight)


@scenario
def buffer_aliasing_parameter(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(rand(4))
            self.register_buffer("wd", self.w.detach())

        def forward(self, x):
            out = x * self.w
            with torch.no_grad():
                self.wd.mul_(0.5)
            return out + self.w

    m = M()
    f = C(m)
    x = rand(4, seed=1)
    for k in range(2):
        out = call(f"out {k}", lambda: f(x))
        call(f"backward {k}", lambda out=out: out.sum().backward())
        call.state(f"w {k}", m.w)


@scenario
def parameters_swapped_between_calls(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)

        def forward(self, x):
            return self.b(torch.sin(self.a(x)))

    m = M()
    f = C(m)
    x = rand(2, 3)
    with torch.no_grad():
        call("first", lambda: f(x))
        m.a.weight, m.b.weight = m.b.weight, m.a.weight
        call("swapped", lambda: f(x))
        m.a.weight = m.b.weight
        call("tied", lambda: f(x))
        m.a.weight = nn.Parameter(rand(3, 3, seed=4))
        call("new", lambda: f(x))
    out = call("grad", lambda: f(x))
    call("backward", lambda: out.sum().backward())
    call.state("grads", m.a.weight, m.b.weight)


@scenario
def parameter_tied_after_first_call_training(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(rand(3))
            self.q = nn.Parameter(rand(3, seed=1))

        def forward(self, x):
            self.q.data  # noqa: B018
            return (x * self.p * self.q).sum()

    m = M()
    f = C(m)
    x = rand(3, seed=2)
    out = call("distinct", lambda: f(x))
    call("backward", lambda: out.backward())
    call.state("pq", m.p, m.q)
    m.q = m.p
    out = call("tied", lambda: f(x))
    call("backward tied", lambda: out.backward())
    call.state("p", m.p)


@scenario
def load_state_dict_between_calls(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    other = copy.deepcopy(m)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(-2)
        other[1].running_mean.fill_(0.5)
    f = C(m)
    x = rand(5, 3)
    call("train", lambda: f(x))
    m.load_state_dict(other.state_dict())
    call("loaded", lambda: f(x))
    m.eval()
    call("eval", lambda: f(x))
    m.load_state_dict(other.state_dict(), assign=True)
    call("assigned", lambda: f(x))
    call.state("bn", m[1].running_mean, m[1].running_var, m[1].num_batches_tracked)


@scenario
def module_to_dtype_between_calls(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    f = C(m)
    x = rand(2, 3)
    with torch.no_grad():
        call("float32", lambda: f(x))
        m.double()
        call("float64", lambda: f(x.double()))
        call("float64 fed float32", lambda: f(x))
        m.to(torch.bfloat16)
        call("bfloat16", lambda: f(x.bfloat16()))
        m.float()
        call("float32 again", lambda: f(x))


@scenario
def requires_grad_toggled_between_calls(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    f = C(m)
    x = rand(2, 3)
    for k, frozen in enumerate((False, True, False)):
        m[0].requires_grad_(not frozen)
        for p in m.parameters():
            p.grad = None
        out = call(f"out {k}", lambda: f(x))
        call(f"backward {k}", lambda out=out: out.sum().backward())
        call.state(f"params {k}", *m.parameters())
    x.requires_grad_(True)
    m.requires_grad_(False)
    out = call("input only", lambda: f(x))
    call("backward input", lambda: out.sum().backward())
    call.state("x", x)


@scenario
def train_eval_toggled(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.0), nn.Linear(4, 2))
    f = C(m)
    x = rand(4, 3)
    for k, mode in enumerate((True, False, True, False)):
        m.train(mode)
        call(f"out {k}", lambda: f(x))
        call.state(f"bn {k}", m[1].running_mean, m[1].num_batches_tracked)


@scenario
def grad_modes_toggled(C, call):
    def g(x, w):
        y = x * w
        w2 = w.detach()
        return y.sum(), y * w2

    f = C(g)
    x, w = rand(3), rand(3, seed=1, rg=True)
    for label, ctx in (
        ("grad", torch.enable_grad),
        ("no_grad", torch.no_grad),
        ("inference", torch.inference_mode),
        ("grad again", torch.enable_grad),
    ):
        with ctx():
            out = call(label, lambda: f(x, w))
        if out[0].requires_grad:
            call(label + " backward", lambda out=out: out[0].backward())
        call.state(label, w)
    with torch.inference_mode():
        xi = rand(3, seed=2)
    call("inference tensor outside", lambda: f(xi, w))


@scenario
def autocast_toggled(C, call):
    f = C(lambda a, b: (a @ b, (a @ b).float().sum()))
    a, b = rand(4, 4), rand(4, 4, seed=1)
    for k, on in enumerate((False, True, False, True)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
            call(f"autocast {on} {k}", lambda: f(a, b))
    with torch.autocast("cpu", dtype=torch.float16):
        call("float16", lambda: f(a, b))


@scenario
def default_dtype_changed(C, call):
    f = C(lambda x: x + torch.arange(3) * 0.1 + torch.tensor(1.5))
    x = rand(3, dtype=torch.float64)
    call("float32 default", lambda: f(x))
    torch.set_default_dtype(torch.float64)
    call("float64 default", lambda: f(x))
    torch.set_default_dtype(torch.float32)
    call("float32 again", lambda: f(x))


_G = {"t": rand(3)}
G_T = rand(3, seed=5)


def _uses_globals(x):
    return x * G_T + _G["t"]


@scenario
def global_tensor_mutated_and_rebound(C, call):
    global G_T
    G_T, _G["t"] = rand(3, seed=5), rand(3)
    f = C(_uses_globals)
    x = rand(3, seed=1)
    call("first", lambda: f(x))
    G_T.mul_(2)
    call("mutated", lambda: f(x))
    G_T = rand(3, seed=9)
    call("rebound", lambda: f(x))
    _G["t"] = rand(3, seed=10)
    call("dict entry", lambda: f(x))
    G_T = x  # the global is the argument
    call("global is the argument", lambda: f(x))
    G_T = rand(3, seed=5)


@scenario
def closure_variable_changed(C, call):
    k = 2.0
    t = rand(3)

    def g(x):
        return x * k + t

    f = C(g)
    x = rand(3, seed=1)
    call("first", lambda: f(x))
    k = 3.0
    call("k changed", lambda: f(x))
    t.add_(1)
    call("t mutated", lambda: f(x))
    t = x
    call("t is x", lambda: f(x))


@scenario
def python_attributes_changed(C, call):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(rand(4))
            self.k = 2
            self.s = 0.5
            self.flag = True

        def forward(self, x):
            y = x.roll(self.k, 0) * self.w * self.s
            return y.relu() if self.flag else y

    m = M()
    f = C(m)
    x = rand(4, seed=1)
    with torch.no_grad():
        call("first", lambda: f(x))
        m.k = 1
        call("k", lambda: f(x))
        m.s = -0.0
        call("s -0.0", lambda: f(x))
        m.s = 0.0
        call("s 0.0", lambda: f(x))
        m.flag = False
        m.s = 3
        call("flag and int s", lambda: f(x))


# ============================================================================================
# code objects shared by several compiled functions
def _shared_code(x, i):
    return x[i] * 2


@scenario
def same_function_two_options(C, call):
    f1 = C(_shared_code, options={"checks": False})
    f2 = C(_shared_code)
    x, i = torch.arange(5.0), torch.tensor([1, 7])
    call("checks off", lambda: f1(x, torch.tensor([1, 3])))
    call("checks on", lambda: f2(x, i))
    call("checks on ok", lambda: f2(x, torch.tensor([1, 3])))


def _shared_write(a, b):
    a.add_(b)
    return a * 2


@scenario
def same_function_two_compiles_aliasing(C, call):
    f1 = C(_shared_write)
    f2 = C(_shared_write, dynamic=True)
    x, y = rand(4), rand(4, seed=1)
    call("f1 distinct", lambda: f1(x, y))
    call("f2 same", lambda: f2(y, y))
    call("f1 same", lambda: f1(x, x))
    call("f2 distinct", lambda: f2(x, y))
    call.state("xy", x, y)


@scenario
def methods_of_two_instances(C, call):
    class A:
        def __init__(self, k, t):
            self.k = k
            self.t = t

        def run(self, x):
            return x * self.k + self.t

    a, b = A(2.0, rand(3)), A(-1.0, rand(3, seed=1))
    fa, fb = C(a.run), C(b.run)
    x = rand(3, seed=2)
    for k in range(2):
        call(f"a {k}", lambda: fa(x))
        call(f"b {k}", lambda: fb(x))
    b.t = a.t
    call("b shares a's tensor", lambda: fb(x))
    a.t.add_(1)
    call("a after write", lambda: fa(x))
    call("b after write", lambda: fb(x))


@scenario
def lambdas_in_a_loop(C, call):
    late = [C(lambda x: x * k) for k in (1.0, 2.0, 3.0)]  # noqa: B023  (late binding, as eager)
    bound = [C(lambda x, k=k: x * k) for k in (1.0, 2.0, 3.0)]
    tens = [C(lambda x, t=t: x + t) for t in (rand(3), rand(3, seed=1))]
    x = rand(3, seed=2)
    for i, f in enumerate(late):
        call(f"late {i}", lambda f=f: f(x))
    for i, f in enumerate(bound):
        call(f"bound {i}", lambda f=f: f(x))
    for i, f in enumerate(tens):
        call(f"tensor default {i}", lambda f=f: f(x))


@scenario
def partials_of_one_function(C, call):
    def g(x, k, flip):
        return (x.flip(0) if flip else x) * k

    fs = [
        C(functools.partial(g, k=k, flip=fl)) for k, fl in ((2.0, False), (2.0, True), (3, False))
    ]
    x = rand(4)
    for i, f in enumerate(fs):
        call(f"partial {i}", lambda f=f: f(x))
    for i, f in enumerate(fs):
        call(f"partial again {i}", lambda f=f: f(x))


@scenario
def factory_closures_of_tensors(C, call):
    def make(w, write):
        def g(x):
            if write:
                w.add_(1)
            return x @ w

        return g

    ws = [rand(3, 3, seed=i) for i in range(3)]
    fs = [C(make(w, i == 1)) for i, w in enumerate(ws)]
    x = rand(2, 3, seed=7)
    for r in range(2):
        for i, f in enumerate(fs):
            call(f"closure {i} round {r}", lambda f=f: f(x))
    call.state("ws", *ws)
    shared = rand(3, 3, seed=9)
    g1, g2 = C(make(shared, True)), C(make(shared, False))
    call("writer", lambda: g1(x))
    call("reader", lambda: g2(x))
    call("reader with the argument aliasing w", lambda: g2(shared[:2]))
    call.state("shared", shared)


@scenario
def module_instances_shared_forward_code(C, call):
    class Scale(nn.Module):
        def __init__(self, k, buf):
            super().__init__()
            self.k = k
            self.register_buffer("buf", buf)

        def forward(self, x):
            self.buf.add_(x)
            return self.buf * self.k

    shared = torch.zeros(3)
    m1, m2, m3 = Scale(1.0, shared), Scale(2.0, shared), Scale(2.0, torch.ones(3))
    fs = [C(m) for m in (m1, m2, m3)]
    x = rand(3)
    for r in range(2):
        for i, f in enumerate(fs):
            call(f"m{i} round {r}", lambda f=f: f(x))
    call.state("bufs", shared, m3.buf)


# ============================================================================================
# the persistent cache: two processes on one cache directory, each compiling its own source
# (programs that differ only in a constant, a dtype, a stride, an aliasing pattern) and calling
# it on its own arguments; each process compares with eager itself
PERSISTENT: dict = {}

_PREAMBLE = """
import torch
from torch import nn
import torch.nn.functional as F
def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
"""


def persistent(name, *processes):
    """``processes``: per process, ``(source, calls)``: the source defines ``make()`` (the
    function or module to compile) and ``calls`` is an expression of a list of argument
    tuples (tensors that share memory share it in both runs: one deep copy per call)."""
    PERSISTENT[name] = processes


_TWICE = "def make():\n    def f(a, b):\n        a.add_(b)\n        return a * 2\n    return f\n"
_READ = "def make():\n    return lambda a, b: (a * b, a - b)\n"
persistent(
    "a constant fill value",
    ("def make():\n    return lambda x: x + torch.full((3,), 2.0)\n", "[(rand(3),)]"),
    ("def make():\n    return lambda x: x + torch.full((3,), 2.5)\n", "[(rand(3),)]"),
)
persistent(
    "a pad value",
    ("def make():\n    return lambda x: F.pad(x, (1, 1), value=0.5)\n", "[(rand(2, 3),)]"),
    ("def make():\n    return lambda x: F.pad(x, (1, 1), value=-1.5)\n", "[(rand(2, 3),)]"),
)
persistent(
    "a cast's dtype",
    ("def make():\n    return lambda x: x.to(torch.float16) * 3\n", "[(rand(3),)]"),
    ("def make():\n    return lambda x: x.to(torch.bfloat16) * 3\n", "[(rand(3),)]"),
)
persistent(
    "a factory's dtype",
    ("def make():\n    return lambda x: x + torch.arange(3, dtype=torch.int32)\n", "[(rand(3),)]"),
    (
        "def make():\n    return lambda x: x + torch.arange(3, dtype=torch.float64)\n",
        "[(rand(3),)]",
    ),
)
persistent(
    "the input's dtype",
    ("def make():\n    return lambda x: x / 3\n", "[(torch.arange(4),)]"),
    ("def make():\n    return lambda x: x / 3\n", "[(torch.arange(4, dtype=torch.int32),)]"),
)
persistent(
    "the input's strides",
    ("def make():\n    return lambda x: (x + 1, x.reshape(-1))\n", "[(rand(3, 3),)]"),
    ("def make():\n    return lambda x: (x + 1, x.reshape(-1))\n", "[(rand(3, 3).t(),)]"),
)
persistent(
    "the input's strides, written",
    ("def make():\n    return lambda x: (x.mul_(2).reshape(-1), x.t())\n", "[(rand(3, 3),)]"),
    ("def make():\n    return lambda x: (x.mul_(2).reshape(-1), x.t())\n", "[(rand(3, 3).t(),)]"),
)
persistent(
    "the same tensor twice, then distinct",
    (_TWICE, "(lambda x: [(x, x)])(rand(4))"),
    (_TWICE, "[(rand(4), rand(4, seed=1))]"),
)
persistent(
    "distinct, then the same tensor twice",
    (_TWICE, "[(rand(4), rand(4, seed=1))]"),
    (_TWICE, "(lambda x: [(x, x), (x[:2], x[2:])])(rand(4))"),
)
persistent(
    "read only: the same tensor twice, then distinct",
    (_READ, "(lambda x: [(x, x)])(rand(4))"),
    (_READ, "[(rand(4), rand(4, seed=1))]"),
)
persistent(
    "a storage offset read by as_strided",
    (
        "def make():\n    return lambda x: x.as_strided((2, 2), (1, 2), 3) + 1\n",
        "(lambda b: [(b[2:10],)])(rand(12))",
    ),
    (
        "def make():\n    return lambda x: x.as_strided((2, 2), (1, 2), 3) + 1\n",
        "(lambda b: [(b[3:11],), (b[1:9],)])(rand(12))",
    ),
)
persistent(
    "overlapping written inputs read by as_strided",
    (
        "def make():\n    def f(a, b):\n        b.add_(1)\n        return a.as_strided((2,), (1,), 1) * 1\n    return f\n",
        "(lambda b: [(b[2:10], b[3:7])])(rand(12))",
    ),
    (
        "def make():\n    def f(a, b):\n        b.add_(1)\n        return a.as_strided((2,), (1,), 1) * 1\n    return f\n",
        "(lambda b: [(b[4:12], b[5:9])])(rand(12))",
    ),
)
persistent(
    "a Python int attribute",
    (
        "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.k = 1\n    def forward(s, x):\n        return x.softmax(s.k)\ndef make():\n    return M()\n",
        "[(rand(3, 3),)]",
    ),
    (
        "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); s.k = 0\n    def forward(s, x):\n        return x.softmax(s.k)\ndef make():\n    return M()\n",
        "[(rand(3, 3),)]",
    ),
)
persistent(
    "tied and untied weights",
    (
        "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); torch.manual_seed(0)\n        s.a = nn.Linear(3, 3); s.b = nn.Linear(3, 3); s.b.weight = s.a.weight\n    def forward(s, x):\n        return s.b(s.a(x))\ndef make():\n    return M()\n",
        "[(rand(2, 3),)]",
    ),
    (
        "class M(nn.Module):\n    def __init__(s):\n        super().__init__(); torch.manual_seed(0)\n        s.a = nn.Linear(3, 3); s.b = nn.Linear(3, 3)\n    def forward(s, x):\n        return s.b(s.a(x))\ndef make():\n    return M()\n",
        "[(rand(2, 3),)]",
    ),
)


def pworker(config: dict) -> None:
    """One process of a persistent-cache scenario: compile its source, call, compare."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_mod", config["path"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = eval(config["calls"], vars(mod))  # (the probe's own table)
    fn = mod.make()
    eager_fn = copy.deepcopy(fn) if isinstance(fn, nn.Module) else fn
    compiled = torch.compile(fn, backend="xla")
    diffs = []
    for k, args in enumerate(calls):
        obs = []
        for f in (compiled, eager_fn):
            a = copy.deepcopy(args)
            try:
                with torch.no_grad():
                    out = f(*a)
            except Exception as e:  # noqa: BLE001
                out = e
            obs.append(describe([out, *a]))
        d = same(obs[0], obs[1], f"call {k}")
        if d:
            diffs.append(d)
    from torch2xla.guards import _persistent

    print(json.dumps({"diffs": diffs, "loaded": _persistent.hits()}))


def run_persistent(name: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "user_mod.py"
        results = []
        for src, calls in PERSISTENT[name]:
            path.write_text(_PREAMBLE + src)
            env = dict(
                os.environ,
                TORCH2XLA_CACHE_DIR=str(pathlib.Path(tmp) / "cache"),
                TORCH2XLA_PERSISTENT_CACHE="1",
                PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[1]),
            )
            config = {"path": str(path), "calls": calls}
            proc = subprocess.run(
                [sys.executable, __file__, "--pworker", json.dumps(config)],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if proc.returncode != 0:
                return f"CRASH persistent: {name}: {proc.stderr[-1500:]}"
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for i, r in enumerate(results):
        if r["diffs"]:
            return f"DIFF  persistent: {name}: process {i} (loaded {r['loaded']}): {r['diffs'][0]}"
    return f"ok    persistent: {name} (loaded {[r['loaded'] for r in results]})"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pworker"]:
        pworker(json.loads(argv[1]))
        return 0
    bad = 0
    for name, fn in SCENARIOS.items():
        if argv and not any(w in name for w in argv):
            continue
        try:
            line = compare(name, fn)
        except Exception:  # noqa: BLE001
            line = f"CRASH {name}: {traceback.format_exc()[-1500:]}"
        if not line.startswith("ok") and name in KNOWN:
            line += f"\n      ({KNOWN[name]})"
        bad += not line.startswith("ok")
        print(line, flush=True)
    for name in PERSISTENT:
        if argv and not any(w in "persistent: " + name for w in argv):
            continue
        line = run_persistent(name)
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{bad} scenario(s) differ")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
