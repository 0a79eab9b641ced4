"""Probe what users do with the tensors a compiled call returns (and the inputs it wrote),
against eager PyTorch: resize/set/storage resizes of outputs, in-place ops on outputs (those
that change layout too), ``out=`` calls into outputs, ``.data`` assignment, ``.numpy()`` and
writes through it, ``torch.save``/pickle/deepcopy, ``share_memory_``, ``requires_grad_``,
outputs fed back as the next call's inputs (step counters, a KV cache grown with ``cat``, a
buffer updated in place), outputs that alias inputs or each other, and writes into one of two
aliased outputs.

    PYTHONPATH=. python scripts/probe_outputs25.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_outputs25.py   # torch's own differences

A scenario is ``fn(C, rec)``; ``rec`` records a tensor's dtype, shape, strides,
``is_contiguous``, ``_is_view``, ``_base is None``, requires_grad, grad_fn None-ness,
``_version`` and values; errors by type and message (``_probe_common``).
"""

from __future__ import annotations

import copy
import io
import logging
import os
import pickle
import sys
import warnings

import torch

import torch2xla  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}
NAMES = (
    "dtype",
    "shape",
    "stride",
    "contiguous",
    "is_view",
    "base None",
    "requires_grad",
    "grad_fn None",
    "version",
)


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
            v.is_contiguous(),
            v._is_view(),
            v._base is None,
            v.requires_grad,
            v.grad_fn is None,
            v._version,
            v.detach().clone(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(NAMES, a[1:10], b[1:10]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[10], b[10]
        if x.is_floating_point():
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


def attempt(rec, label, thunk):
    try:
        rec(label, thunk())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


def rg(*shape, seed=0):
    return r(*shape, seed=seed).requires_grad_()


def _after(name, f, then, make=lambda: (r(3, 4),)):
    """``then(out, args, rec)`` after ``out = f(*args)``, compiled twice (miss, then hit)."""

    def sc(C, rec):
        cf = C(f)
        for call in range(2):
            args = make()
            out = cf(*args)
            rec(f"out {call}", out)
            attempt(rec, f"then {call}", lambda o=out, a=args: then(o, a, rec))
            rec(f"after {call}", [out, list(args)])

    CASES[name] = sc


def _mul(x):
    return x * 2


def _sum0(x):
    return (x * 2).sum(0)


# -- resizes, set_ and storages of outputs --------------------------------------------------
_after("resize_grow", _mul, lambda o, a, rec: o.resize_(20))
_after("resize_shrink", _mul, lambda o, a, rec: o.resize_(2, 2))
_after("resize_same_numel", _mul, lambda o, a, rec: o.resize_(4, 3))
_after("resize_as_larger", _mul, lambda o, a, rec: o.resize_as_(torch.zeros(5, 5)))


def _storage_resize_0(o, a, rec):
    # (FSDP frees a parameter's memory so; the tensor is not read while it has none)
    s = o.untyped_storage()
    n = s.nbytes()
    s.resize_(0)
    rec("freed", s.nbytes())
    s.resize_(n)
    return o.fill_(1)


_after("storage_resize_0", _mul, _storage_resize_0)
_after("set_to_other", _mul, lambda o, a, rec: o.set_(torch.ones(5)))
_after("set_empty", _mul, lambda o, a, rec: o.set_())
_after(
    "set_own_storage_view", _mul, lambda o, a, rec: o.set_(o.untyped_storage(), 2, (2, 2), (1, 2))
)
_after("out_eq_other_size", _mul, lambda o, a, rec: torch.add(a[0][0], 1, out=o))
_after("out_eq_same_size", _mul, lambda o, a, rec: torch.mul(a[0], 3, out=o))
_after("out_eq_matmul", _mul, lambda o, a, rec: torch.mm(a[0], a[0].t(), out=o))
_after("out_eq_int_into_float", _mul, lambda o, a, rec: torch.add(a[0].long(), 1, out=o))
_after("cat_out", _mul, lambda o, a, rec: torch.cat([a[0], a[0]], out=o))
# -- in-place ops on outputs, ones that change layout too ----------------------------------
_after("t_", _mul, lambda o, a, rec: o.t_())
_after("transpose_", _mul, lambda o, a, rec: o.transpose_(0, 1).add_(1))
_after("unsqueeze_squeeze_", _mul, lambda o, a, rec: o.unsqueeze_(0).squeeze_())
_after("as_strided_", _mul, lambda o, a, rec: o.as_strided_((2, 2), (1, 4)))
_after("add_then_view", _mul, lambda o, a, rec: o.add_(1).view(-1)[3].fill_(7))
_after("sum_out_add_", _sum0, lambda o, a, rec: o.add_(1))
_after("detach_", lambda x: x * 2, lambda o, a, rec: o.detach_(), make=lambda: (rg(3, 4),))
_after("requires_grad_", _mul, lambda o, a, rec: o.requires_grad_())
_after(
    "requires_grad_then_backward",
    _mul,
    lambda o, a, rec: (o.requires_grad_(), (o * o).sum().backward(), o.grad)[2],
)
_after("data_assign", _mul, lambda o, a, rec: setattr(o, "data", torch.ones(5)))
_after(
    "data_assign_grad",
    lambda x: x * 2,
    lambda o, a, rec: setattr(o, "data", torch.ones(3, 4)),
    make=lambda: (rg(3, 4),),
)
_after(
    "inplace_on_grad_output", lambda x: x * 2, lambda o, a, rec: o.add_(1), make=lambda: (rg(3, 4),)
)
_after(
    "inplace_leaf_out_of_grad",
    lambda x: x.sin(),
    lambda o, a, rec: (o.mul_(2), o.sum().backward(), a[0].grad)[2],
    make=lambda: (rg(3, 4),),
)
_after("copy_into_output", _mul, lambda o, a, rec: o.copy_(torch.arange(12.0).view(3, 4)))
_after("fill_strided_view", _mul, lambda o, a, rec: o[:, ::2].fill_(0))
_after("zero_", _mul, lambda o, a, rec: o.zero_())
_after(
    "channels_last_out_reformat",
    lambda x: x * 2,
    lambda o, a, rec: o.contiguous(memory_format=torch.channels_last),
    make=lambda: (r(2, 3, 4, 5).to(memory_format=torch.channels_last),),
)


# -- numpy, pickling, copies, shared memory --------------------------------------------------
def _numpy_write(o, a, rec):
    n = o.numpy()
    n[0, 0] = 42.0
    return o


def _numpy_torch_write(o, a, rec):
    n = o.numpy()
    o.add_(1)
    return torch.from_numpy(n.copy())


def _save_load(o, a, rec):
    buf = io.BytesIO()
    torch.save({"o": o, "v": o[1]}, buf)
    buf.seek(0)
    d = torch.load(buf)
    d["v"].fill_(5)
    return [d["o"], d["v"]]


def _pickle(o, a, rec):
    return pickle.loads(pickle.dumps(o))


def _deepcopy_pair(o, a, rec):
    pair = copy.deepcopy([o, o[0]])
    pair[1].fill_(3)
    return pair


def _share_memory(o, a, rec):
    o.share_memory_()
    rec("shared", o.is_shared())
    o.add_(1)
    return o


def _storage_of(o, a, rec):
    s = o.untyped_storage()
    rec("nbytes", s.nbytes())
    rec("resizable", s.resizable())
    rec("offset", o.storage_offset())
    return torch.tensor([], dtype=o.dtype).set_(s, 0, (4,), (1,))


_after("numpy_write_visible", _mul, _numpy_write)
_after("numpy_then_torch_write", _mul, _numpy_torch_write)
_after(
    "numpy_of_grad_output", lambda x: x * 2, lambda o, a, rec: o.numpy(), make=lambda: (rg(3, 4),)
)
_after(
    "numpy_bf16",
    lambda x: x * 2,
    lambda o, a, rec: o.numpy(),
    make=lambda: (r(3, dtype=torch.bfloat16),),
)
_after("tolist_item", _mul, lambda o, a, rec: [o.tolist(), o[0, 0].item()])
_after("torch_save_load", _mul, _save_load)
_after("pickle", _mul, _pickle)
_after("deepcopy_pair", _mul, _deepcopy_pair)
_after(
    "deepcopy_grad",
    lambda x: x * 2,
    lambda o, a, rec: copy.deepcopy(o.detach()),
    make=lambda: (rg(3, 4),),
)
_after("share_memory", _mul, _share_memory)
_after("storage_metadata", _mul, _storage_of)
_after("clone_preserve", lambda x: x.t() * 2, lambda o, a, rec: o.clone())
_after("pin_memory", _mul, lambda o, a, rec: o.pin_memory() if torch.cuda.is_available() else o)
_after("storage_offset_view_out", lambda x: (x * 2)[1:], lambda o, a, rec: o.storage_offset())


# -- outputs fed back ----------------------------------------------------------------------
@scenario
def step_counter_fed_back(C, rec):
    f = C(lambda step, x: (step + 1, x * step))
    step = torch.zeros((), dtype=torch.int64)
    x = r(3)
    outs = []
    for _ in range(4):
        step, y = f(step, x)
        outs.append(y)
    rec("step", step)
    rec("outs", outs)


@scenario
def step_counter_inplace(C, rec):
    def f(step, x):
        step.add_(1)
        return x * step

    cf = C(f)
    step = torch.zeros((), dtype=torch.int64)
    x = r(3)
    outs = [cf(step, x) for _ in range(4)]
    rec("step", step)
    rec("outs", outs)


@scenario
def kv_cache_cat(C, rec):
    f = C(lambda cache, k: (torch.cat([cache, k], 1), (cache.sum() + k.sum())), dynamic=True)
    cache = r(2, 1, 4)
    sums = []
    for i in range(5):
        cache, s = f(cache, r(2, 1, 4, seed=i + 1))
        sums.append(s)
    rec("cache", cache)
    rec("sums", sums)


@scenario
def kv_cache_cat_static(C, rec):
    f = C(lambda cache, k: torch.cat([cache, k], 1))
    cache = r(2, 1, 4)
    for i in range(4):
        cache = f(cache, r(2, 1, 4, seed=i + 1))
        rec(f"cache {i}", cache)


@scenario
def buffer_updated_each_step(C, rec):
    def f(buf, x):
        buf.mul_(0.9).add_(x)
        return buf * 2

    cf = C(f)
    buf = torch.zeros(3)
    outs = []
    for i in range(4):
        outs.append(cf(buf, r(3, seed=i)))
    rec("buf", buf)
    rec("outs", outs)


@scenario
def output_becomes_buffer(C, rec):
    def f(buf, x):
        buf.add_(x)
        return buf.clone(), buf.sum()

    cf = C(f)
    buf = torch.zeros(3)
    for i in range(3):
        new, s = cf(buf, r(3, seed=i))
        buf = new
        rec(f"buf {i}", [buf, s])


@scenario
def output_fed_back_written_between(C, rec):
    cf = C(lambda x: x.sin() + 1)
    y = r(4)
    for i in range(3):
        y = cf(y)
        y.mul_(0.5)
        rec(f"y {i}", y)


@scenario
def output_of_one_written_by_next(C, rec):
    f = C(lambda x: x * 2)
    g = C(lambda x, y: x.add_(y))
    a = f(r(3))
    b = g(a, r(3, seed=1))
    rec("a", a)
    rec("b", b)
    rec("same", b is a)


# -- outputs aliasing inputs ---------------------------------------------------------------
def _alias(name, f, write, make=lambda: (r(3, 4),)):
    def sc(C, rec):
        cf = C(f)
        for call in range(2):
            args = make()
            outs = cf(*args)
            outs = outs if isinstance(outs, tuple) else (outs,)
            rec(f"outs {call}", list(outs))
            rec(f"is {call}", [o is a for o in outs for a in args])
            attempt(rec, f"write {call}", lambda o=outs, a=args: write(o, a))
            rec(f"after {call}", [list(outs), list(args)])

    CASES[name] = sc


def _w0(outs, args):
    outs[0].add_(10)


def _wa(outs, args):
    args[0].mul_(-1)


_alias("return_x", lambda x: x, _w0)
_alias("return_x_and_y", lambda x: (x, x * 2), _w0)
_alias("return_x_view", lambda x: x.view(12), _w0)
_alias("return_x_step", lambda x: x[::2], _w0)
_alias("return_x_t", lambda x: x.t(), _wa)
_alias("return_x_twice", lambda x: (x, x), _w0)
_alias("return_x_t_and_view", lambda x: (x.t(), x[0]), _w0)
_alias("return_x_written_view", lambda x: x.add_(1)[1], _wa)
_alias(
    "return_x_unsqueeze_grad",
    lambda x: x.unsqueeze(0),
    lambda o, a: o[0].mul(2).sum(),
    make=lambda: (rg(3, 4),),
)
_alias("return_x_view_grad_write", lambda x: x.view(12), _w0, make=lambda: (rg(3, 4).clone(),))
_alias("return_x_detach", lambda x: x.detach(), _w0, make=lambda: (rg(3, 4),))
_alias("return_x_diag", lambda x: x.diagonal(), _w0)
_alias("return_x_expand", lambda x: x[:1].expand(3, 4), lambda o, a: o[0].clone().add_(1))
# -- outputs aliasing each other ------------------------------------------------------------
_alias("y_and_view", lambda x: let(x * 2, lambda y: (y, y.view(12))), _w0)
_alias(
    "y_and_view_write_view", lambda x: let(x * 2, lambda y: (y, y[1])), lambda o, a: o[1].fill_(0)
)
_alias("y_and_t", lambda x: let(x * 2, lambda y: (y, y.t())), lambda o, a: o[1][0].fill_(0))
_alias("two_views_of_intermediate", lambda x: let(x * 2, lambda y: (y[:2], y[1:])), _w0)
_alias("single_view_of_intermediate", lambda x: (x * 2)[:, 1:], _w0)
_alias("single_t_of_intermediate", lambda x: (x * 2).t(), _w0)
_alias("single_step_view_of_intermediate", lambda x: (x * 2)[::2], _w0)
_alias("split_outputs", lambda x: (x * 2).split(2), _w0)
_alias(
    "unbind_outputs_grad",
    lambda x: (x * 2).unbind(0),
    lambda o, a: o[0].sum(),
    make=lambda: (rg(3, 4),),
)
_alias(
    "y_and_view_grad_write",
    lambda x: let(x * 2, lambda y: (y, y[0])),
    lambda o, a: (o[1].mul_(2), o[0].sum().backward(), a[0].grad)[2],
    make=lambda: (rg(3, 4),),
)
_alias(
    "input_and_output_view",
    lambda x: let(x.add_(1), lambda y: (y, y.t())),
    lambda o, a: o[1].fill_(3),
)


def let(value, body):
    return body(value)


@scenario
def inference_mode_outputs(C, rec):
    cf = C(lambda x: ((x * 2).t() * 1, (x * 3)[:, ::2], (x + 1)[1:].sum(0)))
    with torch.inference_mode():
        outs = cf(r(3, 4))
    rec("outs", [o.clone() for o in outs])
    rec("inference", [o.is_inference() for o in outs])


@scenario
def strided_view_dynamic(C, rec):
    cf = C(lambda x: ((x * 2)[:, 1:], (x - 1)[::2]), dynamic=True)
    for n in (3, 5, 6, 9):
        rec(f"outs {n}", list(cf(r(n, n + 1, seed=n))))


@scenario
def strided_view_with_grad(C, rec):  # (known: row-major, a lone view of the program's)
    x = rg(3, 4)
    y = C(lambda x: (x * 2)[:, ::2])(x)
    rec("y", y)


@scenario
def versions_of_outputs(C, rec):
    def f(x):
        y = x * 2
        y.add_(1)
        z = y.view(12)
        z.mul_(2)
        return y, x + 1

    cf = C(f)
    y, w = cf(r(3, 4))
    rec("versions", [y._version, w._version])
    y.add_(1)
    rec("after", [y._version])


@scenario
def versions_of_written_inputs(C, rec):
    def f(x, n):
        x.add_(1)
        x.mul_(2)
        n[0] = 3
        return x.sum()

    cf = C(f)
    x, n = r(3), torch.zeros(2)
    cf(x, n)
    rec("versions", [x._version, n._version, x, n])


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
