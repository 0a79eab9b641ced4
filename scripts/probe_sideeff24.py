"""Probe side effects and the identity and aliasing of outputs as users write code: a compiled
function's observable effects against eager PyTorch's, call after call.

    PYTHONPATH=. python scripts/probe_sideeff24.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_sideeff24.py   # torch's own differences

Classes: outputs that are views of inputs, written (or their input written) after the call and
the other read; an input returned as is (``out is x``), twice, beside its view; outputs that
are views of each other; in-place ops on views of inputs (``x[:, 0].mul_``, ``diagonal``,
``.T``, ``narrow``, ``unfold``, ``as_strided``, ``expand().clone()``); metadata changes of
inputs (``t_``, ``unsqueeze_``, ``resize_``, ``set_``, ``requires_grad_``, ``detach_``);
``out=`` arguments; module buffers (batch norm statistics, step counters); Python state
(attribute counters, lists, dicts, globals) over recompiles and graph breaks; attributes set
on tensors; ``retain_grad``, tensor and module hooks; ``.grad`` accumulation,
``zero_grad(set_to_none=...)`` and optimizers inside or outside the compiled region.

A scenario is ``fn(C, rec)``: ``C(f, **kw)`` compiles (or not), ``rec(label, value)`` records a
value (tensors: dtype, shape, strides, requires_grad, grad_fn presence, values; containers item
by item; anything else by ``==``). Prints ``ok`` / ``DIFF`` / ``CRASH`` per scenario.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, ri, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}


def scenario(fn):
    CASES[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            tuple(v.stride()),
            v.requires_grad,
            v.grad_fn is None,
            v.detach().clone().resolve_conj().resolve_neg(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, dict):
        return ("L", "dict", [describe((k, v[k])) for k in sorted(v, key=str)])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        names = ("dtype", "shape", "stride", "requires_grad", "grad_fn is None")
        for n, x, y in zip(names, a[1:6], b[1:6]):
            if x != y and not (n == "stride" and 0 in a[2]):
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[6], b[6]
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def observe(fn, compiled):
    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    d = difference(observe(fn, True), exp, same)
    return f"DIFF  {name}: {d}" if d else f"ok    {name}"


def shares(a, b) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def rg(*shape, seed=0):
    return r(*shape, seed=seed).requires_grad_()


def let(value, body):
    """``body(value)``: a name for an intermediate inside a one-line case."""
    return body(value)


def attempt(rec, label, thunk):
    """``rec(label, thunk())``, or its error (the scenario goes on)."""
    try:
        rec(label, thunk())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


# ============================================================================================
# outputs that are views of inputs, written after the call
def _view_then_write(name, view, write_out=True, make=lambda: r(3, 4), grad=False, dyn=False):
    def sc(C, rec):
        f = C(view, dynamic=True) if dyn else C(view)
        for call in range(3 if dyn else 2):  # (the second call hits the cache)
            x = make() if not dyn else r(3 + call, 4 + call, seed=call)
            if grad:
                x.requires_grad_()
                x = x * 1  # (a non-leaf: writes are allowed)
            out = f(x)
            outs = out if isinstance(out, tuple) else (out,)
            rec(f"shares {call}", [shares(o, x) for o in outs])
            rec(f"is {call}", [o is x for o in outs])
            if write_out:
                with torch.no_grad() if grad else _null():
                    outs[0].mul_(-1) if outs[0].is_floating_point() else outs[0].neg_()
            else:
                with torch.no_grad() if grad else _null():
                    x.add_(10)
            rec(f"x {call}", x)
            rec(f"outs {call}", list(outs))
            rec(f"versions {call}", [x._version] + [o._version for o in outs])

    CASES[f"view_then_write_{name}{'_grad' if grad else ''}{'_dyn' if dyn else ''}"] = sc


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


VIEWS = {
    "row": lambda x: x[0],
    "col": lambda x: x[:, 1],
    "view": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(2, 6),
    "t": lambda x: x.t(),
    "T": lambda x: x.T,
    "unsqueeze": lambda x: x.unsqueeze(1),
    "permute": lambda x: x.permute(1, 0),
    "diagonal": lambda x: x.diagonal(),
    "narrow": lambda x: x.narrow(1, 1, 2),
    "step": lambda x: x[:, ::2],
    "split": lambda x: x.split(2, dim=1),
    "unbind": lambda x: x.unbind(0),
    "chunk": lambda x: x.chunk(2, 1),
    "identity": lambda x: x,
    "twice": lambda x: (x, x),
    "beside_view": lambda x: (x, x[1]),
    "view_beside": lambda x: (x[1], x),
    "view_and_compute": lambda x: (x.view(4, 3), x * 2),
    "compute_then_view": lambda x: (x.sin(), x.t()),
    "detach": lambda x: x.detach(),
    "alias_of_written": lambda x: x.add_(1)[1:],
    "written_returned": lambda x: x.mul_(2),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 4), 1),
    "squeeze_view": lambda x: x.unsqueeze(0).squeeze(0),
    "expand_row": lambda x: x[:1].expand(3, 4),
    "view_dtype": lambda x: x.view(torch.int32),
    "flatten": lambda x: x.flatten(),
    "movedim": lambda x: x.movedim(0, 1),
    "view_as": lambda x: x.view_as(x),
}
for _n, _v in VIEWS.items():
    _view_then_write(_n, _v)
    _view_then_write(_n + "_in", _v, write_out=False)
for _n in (
    "row",
    "t",
    "identity",
    "twice",
    "beside_view",
    "detach",
    "split",
    "view_as",
    "diagonal",
    "alias_of_written",
    "written_returned",
    "as_strided",
    "expand_row",
    "step",
    "unbind",
    "view_beside",
    "compute_then_view",
    "squeeze_view",
):
    _view_then_write(_n, VIEWS[_n], grad=True)
for _n in (
    "row",
    "col",
    "t",
    "identity",
    "beside_view",
    "diagonal",
    "narrow",
    "step",
    "split",
    "alias_of_written",
    "written_returned",
    "view",
    "unsqueeze",
    "view_dtype",
    "detach",
):
    _view_then_write(_n, VIEWS[_n], dyn=True)
    _view_then_write(_n + "_in", VIEWS[_n], write_out=False, dyn=True)
_view_then_write("row", VIEWS["row"], grad=True, dyn=True)
_view_then_write("alias_of_written", VIEWS["alias_of_written"], grad=True, dyn=True)
_view_then_write("int_row", lambda x: x[0], make=lambda: ri(3, 4))
_view_then_write("int_identity", lambda x: (x, x + 1), make=lambda: ri(3, 4))
_view_then_write("complex_real", lambda x: x.real, make=lambda: r(3, 4, dtype=torch.complex64))
_view_then_write("view_as_real", torch.view_as_real, make=lambda: r(3, 4, dtype=torch.complex64))


# ============================================================================================
# outputs that are views of each other / of an intermediate, written after the call
def _intermediate(name, f, grad=False):
    def sc(C, rec):
        cf = C(f)
        for call in range(2):
            x = rg(3, 4) if grad else r(3, 4)
            outs = cf(x)
            rec(f"aliases {call}", [[shares(a, b) for b in outs] for a in outs])
            rec(f"is {call}", [[a is b for b in outs] for a in outs])
            attempt(rec, f"write {call}", lambda o=outs: o[0].mul_(-1))
            rec(f"outs {call}", list(outs))
            rec(f"bases {call}", [o._base is None for o in outs])
            if grad:
                attempt(rec, f"backward {call}", lambda o=outs: sum(v.sum() for v in o).backward())
                rec(f"grad {call}", x.grad)

    CASES[f"intermediate_{name}{'_grad' if grad else ''}"] = sc


_intermediate("twice", lambda x: let(x * 2, lambda y: (y, y)))
_intermediate("and_view", lambda x: let(x * 2, lambda y: (y, y[0])))
_intermediate("view_and", lambda x: let(x * 2, lambda y: (y.t(), y)))
_intermediate("two_views", lambda x: let(x * 2, lambda y: (y[0], y[:, 1])))
_intermediate("view_chain", lambda x: let(x + 1, lambda y: (y.view(12), y.view(12)[3:])))
_intermediate("view_twice", lambda x: let(x * 2, lambda y: (y[1], y[1])))
_intermediate("split", lambda x: (x * 2).split(1))
_intermediate("in_dict_list", lambda x: let(x.exp(), lambda y: [y, *y.unbind(1)]))
for _grad_flag in (False, True):
    _intermediate("lone_split", lambda x: (x * 2).split(2)[0], _grad_flag)
    _intermediate("split_and_other", lambda x: (*(x * 2).chunk(2), x * 3), _grad_flag)
    _intermediate("unbind_exp", lambda x: x.exp().unbind(0), _grad_flag)
_intermediate("twice", lambda x: let(x * 2, lambda y: (y, y)), True)
_intermediate("and_view", lambda x: let(x * 2, lambda y: (y, y[0])), True)
_intermediate("two_views", lambda x: let(x * 2, lambda y: (y[0], y[:, 1])), True)
_intermediate("split", lambda x: (x * 2).split(1), True)


# ============================================================================================
# in-place ops on views of inputs inside the function
def _inside(name, f, make=lambda: (r(4, 4),)):
    def sc(C, rec):
        cf = C(f)
        for call in range(2):
            args = make()
            try:
                out = cf(*args)
            finally:
                rec(f"args {call}", list(args))
                rec(f"versions {call}", [a._version for a in args])
            rec(f"out {call}", out)
            outs = out if isinstance(out, tuple) else (out,)
            rec(f"shares {call}", [[shares(o, a) for a in args] for o in outs])

    CASES[f"inside_{name}"] = sc


_inside("col_mul", lambda x: x[:, 0].mul_(2))
_inside("diag_zero", lambda x: x.diagonal().zero_())
_inside("T_add", lambda x: x.T.add_(torch.arange(4.0)))
_inside("narrow_fill", lambda x: x.narrow(1, 1, 2).fill_(3))
_inside("unfold_mul", lambda x: x.view(-1).unfold(0, 4, 4).mul_(2))
_inside("as_strided_add", lambda x: x.as_strided((2, 2), (1, 4)).add_(1))
_inside("expand_clone_write", lambda x: x[:1].expand(3, 4).clone().add_(1))
_inside("step_zero", lambda x: x.view(-1)[::3].zero_() and x.sum())
_inside("chained_views", lambda x: x.t()[1:].diagonal().mul_(5))
_inside("view_then_read_base", lambda x: (x[0].add_(1), x.sum())[1])
_inside("write_view_return_other", lambda x: (x[:, 2].zero_(), x[1])[1])
_inside("two_views_written", lambda x: (x[0].add_(1), x[:, 0].mul_(3))[1])
_inside("setitem_tensor_idx", lambda x: x.__setitem__((slice(None), [0, 2]), -1.0) or x.sum())
_inside("copy_into_view", lambda x, y: x[1:3].copy_(y), lambda: (r(4, 4), r(2, 4, seed=1)))
_inside("swap_rows", lambda x: x[[0, 1]].copy_(x[[1, 0]]) and x, lambda: (r(4, 4),))
_inside("swap_rows_setitem", lambda x: x.__setitem__([0, 1], x[[1, 0]]) or x)
_inside("int_add_float", lambda x: x.add_(1.5), lambda: (ri(3),))
_inside("int_iadd_float_tensor", lambda x, y: x.__iadd__(y), lambda: (ri(3), r(3)))
_inside(
    "float_add_double_tensor", lambda x, y: x.add_(y), lambda: (r(3), r(3, dtype=torch.float64))
)
_inside("bool_mul_", lambda x: x.mul_(2), lambda: (r(3) > 0,))
_inside("t_", lambda x: x.t_() and x.sum(0))
_inside("unsqueeze_", lambda x: x.unsqueeze_(0) and x * 2)
_inside("squeeze_", lambda x: x.squeeze_() and x + 1, lambda: (r(1, 4),))
_inside("transpose_", lambda x: x.transpose_(0, 1), lambda: (r(2, 3),))
_inside("as_strided_", lambda x: x.as_strided_((2, 2), (2, 1)) and x + 1, lambda: (r(6),))
_inside("resize_grow", lambda x: x.resize_(8).fill_(1), lambda: (r(2, 2),))
_inside("resize_shrink", lambda x: x.resize_(2) + 1, lambda: (r(2, 2),))
_inside("set_", lambda x, y: x.set_(y) and x + 1, lambda: (r(3), r(4, seed=1)))
_inside("zero_dim_write", lambda x, s: s.add_(x.sum()) and s, lambda: (r(3), torch.tensor(0.0)))
_inside("out_sum", lambda x, c: torch.sum(x, 0, out=c), lambda: (r(3, 4), torch.empty(4)))
_inside("out_add", lambda a, b, c: torch.add(a, b, out=c), lambda: (r(3), r(3, seed=1), r(3)))
_inside(
    "out_add_resize", lambda a, b, c: torch.add(a, b, out=c), lambda: (r(3), r(3, seed=1), r(5))
)
_inside("out_add_empty", lambda a, b, c: torch.add(a, b, out=c), lambda: (r(3), r(3, seed=1), r(0)))
_inside(
    "out_into_view",
    lambda a, b, c: torch.mul(a, b, out=c[1]) and c,
    lambda: (r(3), r(3, seed=1), r(2, 3)),
)
_inside(
    "out_dtype_mismatch",
    lambda a, b, c: torch.add(a, b, out=c),
    lambda: (r(3), r(3, seed=1), ri(3)),
)
_inside("out_matmul", lambda a, b, c: torch.mm(a, b, out=c), lambda: (r(2, 3), r(3, 2), r(4)))
_inside("out_cat", lambda a, b, c: torch.cat([a, b], out=c), lambda: (r(2), r(3, seed=1), r(1)))
_inside("out_is_input", lambda a, b: torch.add(a, b, out=a), lambda: (r(3), r(3, seed=1)))
_inside(
    "out_overlaps_input",
    lambda a: torch.add(a[:2], 1, out=a[1:]),
    lambda: (r(3),),
)


# leaves requiring grad written inside
def _leaf_write(name, f, under_no_grad, make=lambda: (rg(3),)):
    def sc(C, rec):
        cf = C(f)
        args = make()
        try:
            if under_no_grad:
                with torch.no_grad():
                    out = cf(*args)
            else:
                out = cf(*args)
            rec("out", out)
        finally:
            rec("args", list(args))
            rec("versions", [a._version for a in args])
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.sum().backward()
            rec("grads", [a.grad for a in args])

    CASES[f"leaf_{name}{'_nograd' if under_no_grad else ''}"] = sc


for _ng in (False, True):
    _leaf_write("add_", lambda x: x.add_(1), _ng)
    _leaf_write("view_add_", lambda x: x[0].add_(1) and x * 2, _ng)
    _leaf_write("data_add_", lambda x: x.data.add_(1) and x * 2, _ng)
    _leaf_write("detach_add_", lambda x: x.detach().mul_(3) and x * 2, _ng)
    _leaf_write("requires_grad_false", lambda x: x.requires_grad_(False) and x * 2, _ng)
    _leaf_write("setitem", lambda x: x.__setitem__(0, 5.0) or x * 2, _ng)
_leaf_write(
    "no_grad_inside",
    lambda x: _no_grad_then(x),
    False,
)


def _no_grad_then(x):
    with torch.no_grad():
        x.mul_(2)
    return x * 3


# requires_grad_ / detach_ / retain_grad inside
def _autograd_meta(name, f, make=lambda: (r(3),), backward=True):
    def sc(C, rec):
        cf = C(f)
        args = make()
        out = cf(*args)
        rec("out", out)
        outs = out if isinstance(out, tuple) else (out,)
        rec("args", list(args))
        rec("leafness", [(o.is_leaf, o.requires_grad) for o in outs])
        if backward:
            loss = sum(o.sum() for o in outs if o.requires_grad and o.is_floating_point())
            if isinstance(loss, torch.Tensor):
                loss.backward()
            rec("grads", [a.grad for a in args if a.is_leaf])
            rec("out grads", [o.grad if o.is_leaf or o._retains_grad else "nr" for o in outs])

    CASES[f"meta_{name}"] = sc


_autograd_meta("requires_grad_input", lambda x: x.requires_grad_() and x * 2)
_autograd_meta("requires_grad_intermediate", lambda x: (x * 2).requires_grad_())
_autograd_meta(
    "requires_grad_ret_both", lambda x: let(x + 1, lambda y: (y, y.requires_grad_() * 3))
)
_autograd_meta("detach_", lambda x: let(x * 2, lambda y: (y.detach_(), x * 3)), lambda: (rg(3),))
_autograd_meta("detach_input", lambda x: x.detach_() * 2, lambda: (r(3) * 1,))
_autograd_meta(
    "retain_grad_returned",
    lambda x: let(x * 2, lambda y: (y.retain_grad(), y)[1]),
    lambda: (rg(3),),
)
_autograd_meta(
    "retain_grad_two",
    lambda x: let(x * 2, lambda y: (y.retain_grad(), y, y * y)[1:]),
    lambda: (rg(3),),
)
_autograd_meta(
    "retain_grad_view",
    lambda x: let((x * 2)[1:], lambda y: (y.retain_grad(), y)[1]),
    lambda: (rg(3),),
)


@scenario
def retain_grad_kept_in_list(C, rec):
    store = []

    def f(x):
        y = x.sin()
        y.retain_grad()
        store.append(y)
        return (y * y).sum()

    x = rg(3)
    C(f)(x).backward()
    rec("store", [len(store), store[0].grad, x.grad])


@scenario
def retain_grad_attribute(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            h = self.lin(x)
            h.retain_grad()
            self.h = h
            return h.relu().sum()

    torch.manual_seed(0)
    m = M()
    x = r(2, 3)
    C(m)(x).backward()
    rec("h", [m.h, m.h.grad, m.lin.weight.grad])


# ============================================================================================
# tensor attributes and Python state
@scenario
def tensor_attribute_on_input(C, rec):
    def f(x):
        x.foo = 1
        x.bar = x.sum()
        return x * 2

    x = r(3)
    C(f)(x)
    rec("attrs", [getattr(x, "foo", None), getattr(x, "bar", None)])


@scenario
def tensor_attribute_on_output(C, rec):
    def f(x):
        y = x * 2
        y.tag = "made"
        return y

    y = C(f)(r(3))
    rec("attr", getattr(y, "tag", None))


@scenario
def python_counter_attribute(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            self.calls += 1
            return self.lin(x)

    torch.manual_seed(0)
    m = M()
    cm = C(m)
    for n in (2, 2, 5, 2, 7):
        cm(r(n, 3))
    rec("calls", m.calls)


@scenario
def python_counter_in_output(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    m = M()
    cm = C(m)
    rec("outs", [cm(torch.ones(2)) for _ in range(3)])
    rec("calls", m.calls)


COUNTER = {"n": 0}
LOG: list = []
GLOBAL_N = 0


@scenario
def global_counters_and_lists(C, rec):
    global GLOBAL_N
    COUNTER["n"] = 0
    LOG.clear()
    GLOBAL_N = 0

    def f(x):
        global GLOBAL_N
        COUNTER["n"] += 1
        GLOBAL_N += 1
        LOG.append(x * 2)
        LOG.append(COUNTER["n"])
        return x + GLOBAL_N

    cf = C(f)
    outs = [cf(r(n)) for n in (2, 2, 3, 4, 2)]
    rec("outs", outs)
    rec("state", [COUNTER["n"], GLOBAL_N, LOG])


@scenario
def side_effects_with_graph_break(C, rec):
    log = []
    state = {"n": 0}

    def f(x):
        state["n"] += 1
        log.append(x.sum())
        y = x * 2
        print_free = y.sum().item()  # (a graph break)
        log.append(print_free)
        state["n"] += 10
        return y + state["n"]

    cf = C(f)
    rec("outs", [cf(r(3)), cf(r(3, seed=1)), cf(r(4))])
    rec("state", [state["n"], log])


@scenario
def side_effects_with_data_dependent_fallback(C, rec):
    log = []

    def f(x):
        log.append(len(log))
        y = x[x > 0]  # (a cut around nonzero)
        log.append(y.shape[0])
        return y * 2

    cf = C(f)
    rec("outs", [cf(r(5)), cf(r(5, seed=3))])
    rec("log", log)


@scenario
def dict_write_of_tensors(C, rec):
    cache = {}

    def f(x, key):
        cache[key] = x.relu()
        cache.setdefault("all", []).append(key)
        return cache[key] * 2

    cf = C(f)
    rec("outs", [cf(r(3), "a"), cf(r(3, seed=1), "b"), cf(r(3, seed=2), "a")])
    rec("cache", cache)


@scenario
def list_of_inputs_written(C, rec):
    def f(xs):
        for t in xs:
            t.mul_(2)
        xs.append(xs[0] + 1)
        return len(xs)

    xs = [r(2), r(2, seed=1)]
    n = C(f)(xs)
    rec("xs", [n, xs])


@scenario
def state_dict_tensor_updated_in_place(C, rec):
    state = {"ema": torch.zeros(3)}

    def f(x):
        state["ema"].mul_(0.9).add_(x, alpha=0.1)
        return state["ema"].clone()

    cf = C(f)
    outs = [cf(r(3, seed=i)) for i in range(3)]
    rec("outs", [outs, state["ema"], state["ema"]._version])


@scenario
def state_rebinding_tensor(C, rec):
    state = {"t": torch.zeros(3)}

    def f(x):
        state["t"] = state["t"] + x
        return state["t"]

    cf = C(f)
    outs = [cf(r(3, seed=i)) for i in range(3)]
    rec("outs", [outs, state["t"], outs[-1] is state["t"]])


# ============================================================================================
# module buffers
@scenario
def batchnorm_running_stats_calls(C, rec):
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    cbn = C(bn)
    for i in range(3):
        rec(f"out {i}", cbn(r(4, 3, seed=i)))
        rec(f"stats {i}", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
        rec(f"versions {i}", [bn.running_mean._version, bn.num_batches_tracked._version])
    bn.eval()
    rec("eval", cbn(r(4, 3, seed=9)))


@scenario
def batchnorm_cumulative_average(C, rec):
    bn = nn.BatchNorm1d(3, momentum=None)
    cbn = C(bn)
    for i in range(3):
        cbn(r(4, 3, seed=i))
    rec("stats", [bn.running_mean, bn.running_var, bn.num_batches_tracked])


@scenario
def batchnorm_training_with_grad(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.ReLU())
    cm = C(m)
    for i in range(2):
        cm(r(4, 3, seed=i)).sum().backward()
    bn = m[1]
    rec("stats", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    rec("grads", [p.grad for p in m.parameters()])


@scenario
def batchnorm_returned_stats(C, rec):
    bn = nn.BatchNorm1d(3)

    def f(x):
        return bn(x), bn.running_mean, bn.num_batches_tracked

    out = C(f)(r(4, 3))
    rec("out", out)
    rec("is", [out[1] is bn.running_mean, out[2] is bn.num_batches_tracked])


class StepCounter(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.register_buffer("step", torch.zeros((), dtype=torch.long))
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x):
        if self.how == "iadd":
            self.step += 1
        elif self.how == "add_":
            self.step.add_(1)
        elif self.how == "rebind":
            self.step = self.step + 1
        elif self.how == "copy_":
            self.step.copy_(self.step + 1)
        self.acc.add_(x.sum(0))
        return x * self.step


for _how in ("iadd", "add_", "rebind", "copy_"):

    def _sc(C, rec, how=_how):
        m = StepCounter(how)
        cm = C(m)
        outs = [cm(r(2, 3, seed=i)) for i in range(3)]
        rec("outs", outs)
        rec("buffers", [m.step, m.acc, dict(m.named_buffers())["step"] is m.step])
        rec("versions", [m.step._version, m.acc._version])

    CASES[f"step_counter_{_how}"] = _sc


@scenario
def step_counter_returned(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("step", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.step += 1
            return x + 1, self.step

    m = M()
    cm = C(m)
    a = cm(r(2))
    b = cm(r(2))
    rec("outs", [a, b, a[1] is m.step, b[1] is m.step])


@scenario
def buffer_view_returned_then_written(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(4, 3))

        def forward(self, x, i: int):
            self.cache[i] = x
            return self.cache[: i + 1]

    m = M()
    cm = C(m)
    v = cm(r(3), 1)
    v.add_(100)
    rec("cache", [m.cache, v, shares(v, m.cache)])


# ============================================================================================
# hooks
@scenario
def tensor_hook_on_intermediate(C, rec):
    seen = []

    def f(x):
        y = x * 2
        y.register_hook(lambda g: seen.append(g.clone()) or g * 3)
        return (y * y).sum()

    x = rg(3)
    cf = C(f)
    cf(x).backward()
    cf(x).backward()
    rec("grad", [x.grad, len(seen), seen])


@scenario
def tensor_hook_on_input(C, rec):
    seen = []

    def f(x):
        x.register_hook(lambda g: seen.append(1) or g + 1)
        return (x * x).sum()

    x = rg(3)
    C(f)(x).backward()
    rec("grad", [x.grad, len(seen)])


@scenario
def module_hooks(C, rec):
    log = []
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    lin.register_forward_pre_hook(lambda m, a: log.append("pre") or (a[0] * 2,))
    lin.register_forward_hook(lambda m, a, o: log.append("fwd") or o + 1)
    lin.register_full_backward_hook(lambda m, gi, go: log.append("bwd"))
    cm = C(lin)
    x = rg(4, 3)
    for _ in range(2):
        cm(x).sum().backward()
    rec("log", log)
    rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])


@scenario
def module_hook_counts_calls(C, rec):
    counts = {"n": 0}
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)

    def hook(m, a, o):
        counts["n"] += 1
        m.last = o.detach()

    lin.register_forward_hook(hook)
    cm = C(lin)
    for n in (2, 2, 3):
        cm(r(n, 3))
    rec("n", [counts["n"], lin.last])


@scenario
def post_accumulate_grad_hook(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 2)
    seen = []
    lin.weight.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    cm = C(lin)
    for i in range(2):
        cm(r(2, 3, seed=i)).sum().backward()
    rec("seen", seen)


# ============================================================================================
# gradients over several calls and optimizers
@scenario
def grad_accumulation_and_zero_grad(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    cm = C(m)
    for i in range(2):
        cm(r(2, 3, seed=i)).sum().backward()
    rec("acc", [p.grad for p in m.parameters()])
    m.zero_grad(set_to_none=True)
    rec("none", [p.grad for p in m.parameters()])
    cm(r(2, 3, seed=5)).sum().backward()
    rec("fresh", [p.grad for p in m.parameters()])
    m.zero_grad(set_to_none=False)
    rec("zeros", [p.grad for p in m.parameters()])
    cm(r(2, 3, seed=6)).sum().backward()
    rec("after zeros", [p.grad for p in m.parameters()])


@scenario
def grad_of_param_unused_in_second_graph(C, rec):
    torch.manual_seed(0)
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)

    def f(x, use_b: bool):
        h = a(x)
        return (b(h) if use_b else h).sum()

    cf = C(f)
    cf(r(2, 3), True).backward()
    cf(r(2, 3, seed=1), False).backward()
    rec("grads", [a.weight.grad, b.weight.grad])


def _train(name, make_opt, inside, steps=3, zero="none"):
    def sc(C, rec):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
        opt = make_opt(m.parameters())

        def step(x, y):
            loss = F.mse_loss(m(x), y)
            loss.backward()
            if inside:
                opt.step()
                opt.zero_grad(set_to_none=zero == "none")
            return loss

        cstep = C(step)
        for i in range(steps):
            loss = cstep(r(3, 4, seed=i), r(3, 2, seed=10 + i))
            if not inside:
                opt.step()
                opt.zero_grad(set_to_none=zero == "none")
            rec(f"loss {i}", loss)
            rec(f"params {i}", list(m.parameters()))
            rec(f"grads {i}", [p.grad for p in m.parameters()])
        rec("state", [sorted(s) for s in opt.state.values()])

    CASES[f"train_{name}_{'inside' if inside else 'outside'}_{zero}"] = sc


O = torch.optim
for _inside_flag in (False, True):
    _train(
        "sgd_momentum_wd", lambda p: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01), _inside_flag
    )
    _train("adam", lambda p: O.Adam(p, lr=0.01), _inside_flag)
    _train("adamw_wd", lambda p: O.AdamW(p, lr=0.01, weight_decay=0.1), _inside_flag)
    _train(
        "sgd_nesterov",
        lambda p: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
        _inside_flag,
        zero="zeros",
    )


@scenario
def compiled_opt_step_only(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = O.Adam(m.parameters(), lr=0.01, weight_decay=0.01)
    cstep = C(opt.step)
    for i in range(3):
        m(r(2, 3, seed=i)).sum().backward()
        cstep()
        opt.zero_grad()
        rec(f"params {i}", list(m.parameters()))
    rec("step", [opt.state[p]["step"] for p in m.parameters()])


@scenario
def manual_sgd_in_compiled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def step(x):
        loss = m(x).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        return loss

    cs = C(step)
    for i in range(3):
        rec(f"loss {i}", cs(r(2, 3, seed=i)))
        rec(f"params {i}", [list(m.parameters()), [p.grad for p in m.parameters()]])


@scenario
def grad_written_by_user(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f(x):
        out = m(x).sum()
        m.weight.grad = torch.ones_like(m.weight)
        return out

    out = C(f)(r(2, 3))
    out.backward()
    rec("grad", [m.weight.grad, m.bias.grad])


@scenario
def grad_mutated_in_compiled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    m(r(2, 3)).sum().backward()

    def clip():
        for p in m.parameters():
            p.grad.mul_(0.5)
            p.grad.clamp_(-0.3, 0.3)

    C(clip)()
    rec("grads", [p.grad for p in m.parameters()])
    rec("versions", [p.grad._version for p in m.parameters()])


# ============================================================================================
# outputs written by the caller, then a backward through them
@scenario
def output_view_written_then_backward(C, rec):
    def f(x):
        y = x * 2
        return y, y[0]

    x = rg(3, 2)
    a, b = C(f)(x)
    b.mul_(3)
    (a * a).sum().backward()
    rec("grads", [a, b, x.grad])


@scenario
def input_view_returned_written_then_backward(C, rec):
    def f(x):
        return x[0], x.sum()

    base = rg(3, 2)
    x = base * 1
    a, s = C(f)(x)
    a.mul_(3)
    (x * x).sum().backward()
    rec("grads", [x, a, base.grad, s])


@scenario
def returned_input_identity_with_grad(C, rec):
    def f(x, y):
        return x, y * 2

    x = rg(3)
    a, _ = C(f)(x, rg(3, seed=1))
    rec("is", [a is x, a.is_leaf, a.requires_grad])


@scenario
def mutate_then_return_input_in_training(C, rec):
    def f(x):
        x.mul_(2)
        return x, x.sum()

    base = rg(3)
    x = base.clone()
    a, s = C(f)(x)
    rec("is", [a is x, x.grad_fn is None, type(x.grad_fn).__name__ if x.grad_fn else None])
    s.backward()
    rec("grad", base.grad)


@scenario
def unsqueeze_input_metadata_persists(C, rec):
    def f(x):
        x.unsqueeze_(0)
        return x.shape[0]

    x = r(3)
    n = C(f)(x)
    rec("shape", [n, tuple(x.shape), x.stride()])


@scenario
def recompile_side_effects_once_per_call(C, rec):
    seen = []

    def f(x, k):
        seen.append(k)
        x.add_(k)
        return x * k

    cf = C(f)
    x = r(3)
    for k in (1, 2, 2, 3.5):
        rec(f"out {k}", cf(x, k))
    rec("state", [seen, x, x._version])


# ============================================================================================
# outputs the caller keeps: fresh tensors every call, resizable, not sharing what the program
# keeps for its backward
@scenario
def fresh_constant_outputs_per_call(C, rec):
    def f(x):
        return x + 1, torch.zeros(3), torch.arange(4)

    cf = C(f)
    a = cf(r(3))
    a[1].add_(5)
    a[2].mul_(3)
    b = cf(r(3))
    rec("outs", [a, b, [shares(u, v) for u, v in zip(a, b)]])


@scenario
def fresh_outputs_without_inputs(C, rec):
    def f():
        return torch.ones(2, 3) * 2

    cf = C(f)
    a = cf()
    a.add_(1)
    b = cf()
    rec("outs", [a, b, shares(a, b)])


@scenario
def output_resized_after_call(C, rec):
    def f(x):
        return x * 2, x.sum()

    a, s = C(f)(r(3))
    attempt(rec, "grow", lambda: a.resize_(10).fill_(1))
    attempt(rec, "out=", lambda: torch.add(r(5), 1, out=s))
    attempt(rec, "shrink", lambda: a.resize_(1))
    rec("after", [a.shape, s.shape])


@scenario
def output_storage_resized(C, rec):
    def f(x):
        return x * 2

    a = C(f)(r(4))
    attempt(rec, "free", lambda: a.untyped_storage().resize_(0) and a.untyped_storage().size())
    attempt(rec, "back", lambda: a.untyped_storage().resize_(16) and a.fill_(3))


@scenario
def output_set_to_other(C, rec):
    def f(x):
        return x * 2

    a = C(f)(r(4))
    b = r(6, seed=1)
    a.set_(b)
    a.add_(1)
    rec("outs", [a, b])


@scenario
def output_kept_for_backward_written(C, rec):
    # eager's relu keeps its result, not its input: writing ``y`` before the backward is fine
    def f(x, w):
        y = x @ w
        return y, y.relu().sum(), y.sigmoid()

    x, w = rg(3, 4), rg(4, 2, seed=1)
    y, s, z = C(f)(x, w)
    with torch.no_grad():
        y.fill_(-1.0)
    s.backward(retain_graph=True)
    rec("grads", [x.grad, w.grad])
    attempt(rec, "z", lambda: z.sum().backward())
    rec("grads 2", [x.grad, w.grad])


@scenario
def output_written_then_backward_through_it(C, rec):
    def f(x):
        y = x * 3
        return y, y.exp()

    x = rg(3)
    y, e = C(f)(x)
    y.add_(1)
    attempt(rec, "backward y", lambda: (y * y).sum().backward())
    rec("grad", x.grad)
    attempt(rec, "backward e", lambda: e.sum().backward())
    rec("grad 2", x.grad)


@scenario
def exp_output_written_then_backward(C, rec):
    def f(x):
        return x.exp()

    x = rg(3)
    e = C(f)(x)
    e.mul_(2)
    attempt(rec, "backward", lambda: e.sum().backward())
    rec("grad", x.grad)


@scenario
def big_input_written_right_after_call(C, rec):
    def f(x):
        return (x @ x).tanh(), x.t()

    x = r(256, 256)
    o, v = C(f)(x)
    x.zero_()
    rec("outs", [o.sum(), v.abs().sum(), x.abs().sum()])


@scenario
def output_fed_back_and_written(C, rec):
    def f(h, x):
        return (h * 0.5 + x).tanh()

    cf = C(f)
    h = torch.zeros(3)
    hs = []
    for i in range(4):
        h = cf(h, r(3, seed=i))
        h.add_(0.1)
        hs.append(h)
    rec("hs", hs)


# ============================================================================================
# identities the caller sees: module state, globals, containers
G = torch.arange(6.0)


@scenario
def global_returned(C, rec):
    G.copy_(torch.arange(6.0))

    def f(x):
        return G, G[1:3], x + G

    a, b, c = C(f)(r(6))
    b.mul_(10)
    rec("outs", [a is G, shares(b, G), G, c])


@scenario
def parameter_and_grad_returned(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    m(r(2, 3)).sum().backward()

    def f():
        return m.weight, m.weight.grad, m.bias.t(), m.weight.grad.sum()

    w, g, bt, s = C(f)()
    rec("is", [w is m.weight, g is m.weight.grad, shares(bt, m.bias), s])
    with torch.no_grad():
        g.zero_()
    rec("grad", m.weight.grad)


@scenario
def container_input_returned(C, rec):
    def f(d):
        return d["a"], d["b"][0], d["a"] + 1

    d = {"a": r(3), "b": [r(2, seed=1)]}
    a, b, c = C(f)(d)
    rec("is", [a is d["a"], b is d["b"][0], c])


@scenario
def stored_view_of_input(C, rec):
    store = []

    def f(x):
        store.append(x[0])
        store.append(x)
        return x.sum()

    x = r(3, 2)
    C(f)(x)
    x.add_(1)
    rec("store", [store, store[1] is x, shares(store[0], x)])


@scenario
def module_attribute_is_output(C, rec):
    class M(nn.Module):
        def forward(self, x):
            y = x * 2
            self.last = y
            self.inp = x
            self.view = x[1:]
            return y

    m = M()
    x = r(3)
    y = C(m)(x)
    rec("is", [m.last is y, m.inp is x, shares(m.view, x), m.view._base is x])


@scenario
def output_base_identity(C, rec):
    def f(x):
        return x[0], x.t(), x.view(-1)[2:]

    x = r(3, 2)
    outs = C(f)(x)
    rec("bases", [o._base is x for o in outs])
    rec("versions", [o._version for o in outs])


@scenario
def same_input_twice_mutate_one_return_other(C, rec):
    def f(a, b):
        a.mul_(2)
        return b, b[0]

    x = r(3)
    b, b0 = C(f)(x, x)
    rec("outs", [b is x, b0, x, x._version])


@scenario
def out_arg_requires_grad(C, rec):
    def f(a, b, c):
        return torch.add(a, b, out=c)

    attempt(rec, "out", lambda: C(f)(rg(3), r(3), r(3)))


@scenario
def out_arg_of_previous_output(C, rec):
    def f(a):
        return a * 2

    def g(a, o):
        return torch.mul(a, 3, out=o)

    o = C(f)(r(3))
    attempt(rec, "out", lambda: C(g)(r(5), o))
    rec("o", o)


@scenario
def clip_grad_in_compiled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    m(r(4, 3) * 10).sum().backward()

    def f():
        return nn.utils.clip_grad_norm_(m.parameters(), 0.5)

    n = C(f)()
    rec("out", [n, [p.grad for p in m.parameters()]])


@scenario
def grad_hook_modifies_in_place(C, rec):
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g.mul_(2))
        return (y * y).sum()

    x = rg(3)
    C(f)(x).backward()
    rec("grad", x.grad)


# ============================================================================================
# graphs with ops run in eager PyTorch (an op without a lowering; data-dependent cuts) and
# side effects around them
@torch.library.custom_op("sideeff24::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 2


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


mystery.register_autograd(
    lambda ctx, g: g * 2 * ctx.saved_tensors[0].cos(),
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
)


@torch.library.custom_op("sideeff24::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, k: float) -> None:
    x.mul_(k)


@scale_.register_fake
def _(x, k):
    return None


def _fallback(name, f, make, backward=False):
    def sc(C, rec):
        cf = C(f)
        for call in range(2):
            args = make()
            if backward:
                leaves = [a for a in args if a.requires_grad]
                args = [a * 1 if a.requires_grad else a for a in args]
            out = cf(*args)
            outs = out if isinstance(out, tuple) else (out,)
            rec(f"out {call}", list(outs))
            rec(f"args {call}", list(args))
            rec(f"versions {call}", [a._version for a in args])
            rec(f"shares {call}", [[shares(o, a) for a in args] for o in outs])
            rec(f"is {call}", [[o is a for a in args] for o in outs])
            if backward:
                sum(o.sum() for o in outs if o.requires_grad).backward()
                rec(f"grads {call}", [a.grad for a in leaves])
            else:
                outs[0].add_(100)
                rec(f"after write {call}", list(args))

    CASES[f"fallback_{name}{'_grad' if backward else ''}"] = sc


def _fb_views(x):
    x.add_(1)
    h = torch.ops.sideeff24.mystery(x)
    x.mul_(2)
    return x[0], h, x


def _fb_view_before(x):
    v = x[1]
    v.mul_(3)
    h = torch.ops.sideeff24.mystery(x)
    return v, h.sum()


def _fb_mutating_op(x, y):
    torch.ops.sideeff24.scale_(x, 3.0)
    return x.t(), y + x.sum()


def _fb_mutating_op_on_view(x):
    torch.ops.sideeff24.scale_(x[0], 3.0)
    return x.sum(), x[0]


def _fb_data_dependent(x):
    x.mul_(2)
    y = x[x > 0]
    x[0] = y.sum()
    return x[1:], y


def _fb_item(x, c):
    c.add_(1)
    n = int(x.sum().item() > 0)
    x.add_(n)
    return x.view(-1), c


for _n, _f, _mk in (
    ("views", _fb_views, lambda: [r(3, 2)]),
    ("view_before", _fb_view_before, lambda: [r(3, 2)]),
    ("mutating_op", _fb_mutating_op, lambda: [r(3, 2), r(1)]),
    ("mutating_op_on_view", _fb_mutating_op_on_view, lambda: [r(3, 2)]),
    ("data_dependent", _fb_data_dependent, lambda: [r(5)]),
    ("item", _fb_item, lambda: [r(2, 2), torch.zeros((), dtype=torch.long)]),
):
    _fallback(_n, _f, _mk)
_fallback(
    "views", lambda x: (torch.ops.sideeff24.mystery(x)[0], x[1], x.t()), lambda: [rg(3, 2)], True
)
_fallback(
    "written", lambda x: (x.mul_(2), torch.ops.sideeff24.mystery(x))[1], lambda: [rg(3)], True
)


@scenario
def fallback_python_side_effects(C, rec):
    log, state = [], {"n": 0}

    def f(x):
        state["n"] += 1
        log.append(x.sum())
        h = torch.ops.sideeff24.mystery(x)
        log.append(h.sum())
        return h + state["n"]

    cf = C(f)
    rec("outs", [cf(r(3)), cf(r(3, seed=1)), cf(r(4))])
    rec("state", [state["n"], log])


@scenario
def fallback_module_buffers(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.register_buffer("step", torch.zeros((), dtype=torch.long))

        def forward(self, x):
            self.step += 1
            return torch.ops.sideeff24.mystery(self.bn(x)) * self.step

    m = M()
    cm = C(m)
    outs = [cm(r(4, 3, seed=i)) for i in range(3)]
    rec("outs", outs)
    rec("state", [m.step, m.bn.running_mean, m.bn.running_var, m.bn.num_batches_tracked])
    rec(
        "versions", [m.step._version, m.bn.running_mean._version, m.bn.num_batches_tracked._version]
    )


@scenario
def error_after_side_effects(C, rec):
    log = []

    def f(x, i):
        log.append(1)
        x.add_(1)
        return torch.index_select(x, 0, i)

    x = r(3)
    attempt(rec, "call", lambda: C(f)(x, torch.tensor([5])))
    rec("state", [x, x._version, len(log)])


@scenario
def nested_dict_identity(C, rec):
    def f(x):
        y = x * 2
        return {"a": y, "b": y, "c": [y, x], "d": x[0]}

    x = r(3)
    d = C(f)(x)
    rec("is", [d["a"] is d["b"], d["c"][0] is d["a"], d["c"][1] is x, shares(d["d"], x)])


@scenario
def expanded_input_view_returned(C, rec):
    def f(x):
        return x[0], x.sum(0)

    base = r(1, 3)
    x = base.expand(4, 3)
    a, s = C(f)(x)
    rec("outs", [a, s, a.stride(), shares(a, base)])
    base.add_(1)
    rec("after", a)


@scenario
def param_requires_grad_toggled_in_forward(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))

    def f(x, freeze: bool):
        m[0].weight.requires_grad_(not freeze)
        return m(x).sum()

    cf = C(f)
    cf(r(2, 3), True).backward()
    rec("grads", [p.grad for p in m.parameters()])
    cf(r(2, 3, seed=1), False).backward()
    rec("grads 2", [p.grad for p in m.parameters()])


@scenario
def zero_grad_inside_compiled(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = O.SGD(m.parameters(), lr=0.1)

    def f(x):
        opt.zero_grad()
        loss = m(x).sum()
        return loss

    cf = C(f)
    for i in range(3):
        cf(r(2, 3, seed=i)).backward()
        rec(f"grads {i}", [p.grad for p in m.parameters()])
        opt.step()
    rec("params", list(m.parameters()))


@scenario
def leaf_view_returned_written(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f():
        return m.weight.t(), m.bias[0]

    wt, b0 = C(f)()
    attempt(rec, "write", lambda: wt.mul_(2))
    attempt(rec, "write 0", lambda: b0.add_(1))
    with torch.no_grad():
        wt.mul_(2)
    rec("params", [m.weight, m.bias, wt.requires_grad, wt.grad_fn is None])


# ============================================================================================
# calls under no_grad / inference_mode returning views, written afterwards
def _mode_views(name, mode, leaf):
    def sc(C, rec):
        def f(x):
            return x[0], x * 2, x.t(), x

        cf = C(f)
        for call in range(2):
            x = rg(3, 2, seed=call) if leaf else rg(3, 2, seed=call) * 1
            with mode():
                outs = cf(x)
            rec(f"outs {call}", list(outs))
            rec(f"meta {call}", [(o.is_inference(), o._is_view(), o._base is x) for o in outs])
            attempt(rec, f"write view {call}", lambda o=outs: o[0].mul_(2))
            attempt(rec, f"write t {call}", lambda o=outs: o[2].add_(1))
            attempt(rec, f"grad_fn {call}", lambda o=outs: o[0].grad_fn is None)
            attempt(rec, f"write fresh {call}", lambda o=outs: o[1].add_(1))
            rec(f"x {call}", x)

    CASES[f"mode_{name}_{'leaf' if leaf else 'nonleaf'}"] = sc


for _leaf in (True, False):
    _mode_views("no_grad", torch.no_grad, _leaf)
    _mode_views("inference", torch.inference_mode, _leaf)


@scenario
def inference_mode_inputs_written(C, rec):
    def f(x, y):
        y.add_(1)
        return x[0], y[1:], x + y

    cf = C(f)
    with torch.inference_mode():
        x, y = r(3, 2), r(3, 2, seed=1)
    outs = cf(x, y)
    rec("outs", list(outs))
    rec("meta", [(o.is_inference(), o._is_view()) for o in outs])
    attempt(rec, "write", lambda: outs[0].add_(1))
    with torch.inference_mode():
        outs = cf(x, y)
        outs[0].add_(1)
    rec("x", [x, y])


# out= arguments aliasing operands
_inside("out_cumsum_self", lambda x: torch.cumsum(x, 0, out=x), lambda: (r(4),))
_inside("out_mm_self", lambda a, b: torch.mm(a, b, out=a), lambda: (r(2, 2), r(2, 2, seed=1)))
_inside(
    "out_sort_self",
    lambda x: torch.sort(x, out=(x, torch.empty(4, dtype=torch.long))),
    lambda: (r(4),),
)
_inside(
    "out_view_of_operand", lambda a, b: torch.add(a, b, out=a[0]), lambda: (r(2, 3), r(3, seed=1))
)
_inside("add_transpose_self", lambda x: x.add_(x.t()), lambda: (r(3, 3),))
_inside("copy_transpose_self", lambda x: x.copy_(x.t()), lambda: (r(3, 3),))
_inside(
    "out_exp_into_other_input", lambda a, b: torch.exp(a, out=b) and a, lambda: (r(3), r(3, seed=1))
)
_inside(
    "out_noncontiguous",
    lambda a, c: torch.mul(a, 2, out=c.t()) and c,
    lambda: (r(3, 2), r(2, 3, seed=1)),
)
_inside(
    "index_add_self", lambda x: x.index_add_(0, torch.tensor([0, 1]), x[1:3]), lambda: (r(4, 2),)
)
_inside(
    "scatter_into_view",
    lambda x: x[:, 1:].scatter_(1, torch.tensor([[0], [1]]), 9.0) and x,
    lambda: (r(2, 3),),
)


# ============================================================================================
# more module state and hooks over calls
@scenario
def batchnorm_training_in_inference_mode(C, rec):
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    cbn = C(bn)
    with torch.inference_mode():
        outs = [cbn(r(4, 3, seed=i)) for i in range(2)]
    rec("outs", outs)
    rec("stats", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    rec("inference", [bn.running_mean.is_inference(), outs[0].is_inference()])


@scenario
def batchnorm_momentum_zero_and_untracked(C, rec):
    a = nn.BatchNorm1d(3, momentum=0.0)
    b = nn.BatchNorm1d(3, track_running_stats=False)
    ca, cb = C(a), C(b)
    outs = [ca(r(4, 3)), cb(r(4, 3, seed=1))]
    b.eval()
    outs.append(cb(r(4, 3, seed=2)))
    rec("outs", outs)
    rec("stats", [a.running_mean, a.running_var, a.num_batches_tracked, b.running_mean])


@scenario
def dynamic_batch_step_counter(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros((), dtype=torch.long))
            self.register_buffer("total", torch.zeros(3))

        def forward(self, x):
            self.seen += x.shape[0]
            self.total.add_(x.sum(0))
            return self.total / self.seen

    m = M()
    cm = C(m)
    outs = [cm(r(n, 3, seed=n)) for n in (2, 3, 4, 5, 3)]
    rec("outs", outs)
    rec("state", [m.seen, m.total, m.seen._version, m.total._version])


@scenario
def hook_registered_every_call(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 1)
    calls = []

    def f(x):
        lin.weight.register_hook(lambda g: calls.append(1))
        return lin(x).sum()

    cf = C(f)
    for i in range(3):
        cf(r(2, 3, seed=i)).backward()
    rec("calls", [len(calls), lin.weight.grad])


@scenario
def grad_assigned_inside(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 1)

    def f(x):
        lin.weight.grad = torch.full_like(lin.weight, 0.5)
        lin.bias.grad = None
        return lin(x).sum()

    cf = C(f)
    cf(r(2, 3)).backward()
    rec("grads", [lin.weight.grad, lin.bias.grad])


@scenario
def ema_mixed_dtype_buffer(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("ema", torch.zeros(3))

        def forward(self, x):
            self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
            return x.float() - self.ema

    m = M()
    cm = C(m)
    outs = [cm(r(4, 3, seed=i, dtype=torch.float16)) for i in range(3)]
    rec("outs", outs)
    rec("ema", [m.ema, m.ema._version])


@scenario
def forward_hook_returns_view(C, rec):
    torch.manual_seed(0)
    lin = nn.Linear(3, 4)
    lin.register_forward_hook(lambda m, a, o: o[:, :2])
    lin.register_forward_pre_hook(lambda m, a: (a[0].t().t(),))
    cm = C(lin)
    x = rg(2, 3)
    out = cm(x)
    out.sum().backward()
    rec("out", [out, out._base is None, x.grad, lin.weight.grad])


@scenario
def state_dict_values_identity_after_calls(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    before = {k: v for k, v in m.state_dict().items()}
    cm = C(m)
    cm(r(4, 3)).sum().backward()
    after = m.state_dict()
    rec("same objects", [after[k].data_ptr() == before[k].data_ptr() for k in sorted(before)])
    rec("bn", [m[1].running_mean, m[1].num_batches_tracked])


@scenario
def optimizer_state_tensors_identity(C, rec):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = O.Adam(m.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    cs = C(step)
    cs(r(2, 3))
    st = opt.state[m.weight]
    keep = {k: v for k, v in st.items()}
    cs(r(2, 3, seed=1))
    rec("same", [opt.state[m.weight][k] is keep[k] for k in sorted(keep)])
    rec("state", [opt.state[m.weight][k] for k in sorted(keep)])
    rec("params", list(m.parameters()))


# writes into inputs that overlap themselves (expanded, unfolded windows)
def _expanded():
    return (r(1, 3).expand(4, 3),)


def _windows():
    return (r(6).unfold(0, 3, 1),)


for _n, _mk in (("expanded", _expanded), ("windows", _windows)):
    _inside(f"{_n}_input_add_", lambda x: x.add_(1), _mk)
    _inside(f"{_n}_input_fill_", lambda x: x.fill_(2.0) and x.sum(), _mk)
    _inside(f"{_n}_input_zero_", lambda x: x.zero_() and x.sum(), _mk)
    _inside(f"{_n}_input_copy_", lambda x: x.copy_(torch.ones(3)) and x.sum(), _mk)
    _inside(f"{_n}_input_row_write", lambda x: x[1].mul_(2) and x.sum(), _mk)
    _inside(f"{_n}_input_setitem", lambda x: x.__setitem__(0, 5.0) or x.sum(), _mk)
    _inside(f"{_n}_input_masked_fill_", lambda x: x.masked_fill_(x > 0, 0.0) and x.sum(), _mk)
    _inside(f"{_n}_input_read_only", lambda x: x * 2, _mk)


def _user_warnings(thunk) -> list:
    """``thunk()``'s result and the messages of the warnings it raised (torch2xla's own and
    Dynamo's aside), first line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = thunk()
    own = (torch2xla.FallbackWarning,)
    msgs = [
        str(w.message).split("\n")[0][:120]
        for w in caught
        if not issubclass(w.category, own) and "dynamo" not in str(w.filename)
    ]
    return out, msgs


def _warns(name, f, make, calls=2):
    def sc(C, rec):
        cf = C(f)
        for call in range(calls):
            args = make()
            try:
                out, msgs = _user_warnings(lambda a=args: cf(*a))
                rec(f"out {call}", out)
                rec(f"warnings {call}", msgs)
            finally:
                rec(f"args {call}", list(args))

    CASES[f"warns_{name}"] = sc


_warns("out_resize", lambda a, b, c: torch.add(a, b, out=c), lambda: (r(3), r(3, seed=1), r(5)))
_warns("out_resize_empty", lambda a, b, c: torch.add(a, b, out=c), lambda: (r(3), r(3), r(0)))
_warns("out_resize_sum", lambda x, c: torch.sum(x, 0, out=c), lambda: (r(3, 4), r(2)))
_warns("out_resize_in_graph", lambda a: torch.add(a, 1, out=torch.zeros(2)), lambda: (r(3),))
_warns("data_ptr_of_view", lambda x: x.unsqueeze(0).squeeze(0) * 2, lambda: (r(3),))
_warns(
    "nondeterministic_index_put",
    lambda x, i, v: x.index_put_((i,), v, accumulate=True),
    lambda: (r(4), torch.tensor([0, 0, 1]), r(3, seed=1)),
)
_warns("int_div_floor", lambda x: x // 2, lambda: (ri(4),))
_warns("resize_input_warning", lambda x: x.resize_(2, 2) and x.sum(), lambda: (r(4),))
_warns("tensor_bool_python", lambda x: torch.tensor(x.tolist()) * 2, lambda: (r(3),))


# ============================================================================================
# dynamic shapes (bucketed programs: padded copies of the inputs) with side effects
def _dyn(name, f, make, sizes=(3, 5, 7, 5)):
    def sc(C, rec):
        cf = C(f, dynamic=True)
        for call, n in enumerate(sizes):
            args = make(n, call)
            out = cf(*args)
            outs = out if isinstance(out, tuple) else (out,)
            rec(f"out {call}", list(outs))
            rec(f"args {call}", list(args))
            rec(f"versions {call}", [a._version for a in args if isinstance(a, torch.Tensor)])
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            rec(f"shares {call}", [[shares(o, a) for a in tensors] for o in outs])
            outs[0].mul_(-1)
            rec(f"after write {call}", list(args))

    CASES[f"dyn_{name}"] = sc


_dyn("input_add_", lambda x: (x.add_(1), x.sum())[::-1], lambda n, c: [r(n, 3, seed=c)])
_dyn("col_write_view_out", lambda x: (x[:, 0].mul_(2), x[1:])[1], lambda n, c: [r(n, 3, seed=c)])
_dyn(
    "fresh_zeros",
    lambda x: (torch.zeros(x.shape[0]), x.sum(1)),
    lambda n, c: [r(n, 3, seed=c)],
)
_dyn(
    "cache_write_slice",
    lambda cache, k, pos: (cache.__setitem__(slice(pos, pos + k.shape[0]), k), cache[: pos + 1])[1],
    lambda n, c: [torch.zeros(16, 2), r(n, 2, seed=c), 2],
)
_dyn("shared_views", lambda x: (x * 2).split(2), lambda n, c: [r(n, 3, seed=c)])
_dyn("t_and_input", lambda x: (x.t(), x, x.sum(0)), lambda n, c: [r(n, 3, seed=c)])


@scenario
def dyn_batchnorm_stats(C, rec):
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    cbn = C(bn, dynamic=True)
    for i, n in enumerate((3, 5, 7, 6)):
        rec(f"out {i}", cbn(r(n, 3, seed=i)))
    rec("stats", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    rec("versions", [bn.running_mean._version, bn.num_batches_tracked._version])


@scenario
def dyn_step_counter_and_python_state(C, rec):
    m = StepCounter("iadd")
    state = {"n": 0}

    def f(x):
        state["n"] += 1
        return m(x)

    cf = C(f, dynamic=True)
    outs = [cf(r(n, 3, seed=n)) for n in (3, 5, 7, 6, 3)]
    rec("outs", outs)
    rec("state", [state["n"], m.step, m.acc, m.step._version, m.acc._version])


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
