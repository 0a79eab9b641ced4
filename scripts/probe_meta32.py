"""Probe metadata-mutating ops and ``out=`` semantics on inputs and views, as users write them
inside ``torch.compile(fn, backend="xla")``, against eager PyTorch (session 32): in-place view
ops on inputs (``unsqueeze_``, ``squeeze_``, ``t_``, ``transpose_``, ``as_strided_``,
``resize_``, ``resize_as_``, ``set_``, ``x.data = y``, ``requires_grad_``, ``detach_``);
``out=`` of the right size, a wrong size (eager resizes), a wrong dtype, a non-contiguous view,
an alias of an input; writes through views of inputs; inputs sharing storage; ``.grad``
assigned or zeroed inside the function; outputs aliasing inputs (strides, storage offsets,
writes into the result afterwards reaching the input exactly when eager's do).

    PYTHONPATH=. python scripts/probe_meta32.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_meta32.py   # torch's own differences

A case is ``f(*make(seed))`` called twice (seeds 0 and 1, fresh arguments). Observed: each
output (dtype, shape, strides, storage offset, requires_grad, values, which arguments' storage
it shares), the arguments after the call (the same, and ``.grad``), warnings (category and
first words), errors (type, message); then each float output is written (``add_(100)`` under
``no_grad``) and the arguments observed again. ``PROBE_DYNAMIC=1``: ``dynamic=True``.

Session 32: 390 cases. Fixed (tests/test_meta_s32.py): an ``out=`` tuple tensor overlapping
what the op reads (``torch.max(x, 0, out=(x[0], i))``) ran where eager raises; writes eager
accepts that read memory they write and whose eager result is not the functional graph's
(``torch.sum(x, 0, out=x[0])``, ``torch.mm(x, y, out=y)``, ``x.addmm_(x, x)``,
``x.masked_scatter_(m, x)``, ``x[:2, :2] = x[:2, :2].t()``; also through two inputs sharing
memory) were compiled to the functional answer; 1-D expanded outputs came back dense; outputs
of padded (bucketed) programs were views (``detach_()`` raised). Left: the warnings of
``arange``/``ones``/``eye`` ``out=`` resizes and ``aminmax(out=(a, a))``, and
``sort_out_self_t`` (Dynamo's fake ``sort`` restrides its out view, so the overlap check sees
another layout) are Dynamo's (the same with aot_eager); ``as_strided_nonleaf_grad`` (an
intermediate ``as_strided_`` with gaps that requires grad comes back row-major; without grad
fixed) and ``nonleaf_as_strided_mul``
(an output that requires grad, laid out permuted, is a ``permute`` view of the program's
output: ``_base`` set) are ours, not fixed.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
import warnings

os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")

import torch
from jax import monitoring

import torch2xla  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import run

BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}
DYNAMIC = True if os.environ.get("PROBE_DYNAMIC") else None
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
_COMPILES = [0]


def _listener(name, *args, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_listener)


def r(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def tens(t, args):
    ident = tuple(i for i, a in enumerate(args) if a is t)
    st = t.untyped_storage().data_ptr() if t.device.type != "meta" else None
    shares = [
        i
        for i, a in enumerate(args)
        if isinstance(a, torch.Tensor)
        and st is not None
        and a.untyped_storage().data_ptr() == st
        and st != 0
    ]
    return (
        "T",
        t.dtype,
        tuple(t.shape),
        tuple(t.stride()),
        t.storage_offset(),
        t.requires_grad,
        t.detach().clone(),
        tuple(shares),
        ("nonleaf" if not t.is_leaf else None if t.grad is None else t.grad.detach().clone()),
        ident,
        t._base is None,
    )


def desc(v, args):
    if isinstance(v, torch.Tensor):
        return tens(v, args)
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [desc(x, args) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    if isinstance(v, torch.nn.Module):
        return ("L", "module", [desc(v.w, args), desc(v.buf, args)])
    return ("V", v)


FIELDS = (
    "kind",
    "dtype",
    "shape",
    "stride",
    "offset",
    "requires_grad",
    "values",
    "shares",
    "grad",
    "is",
    "no_base",
)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[:3]} (xla) vs {b[:3]} (eager)"
    if a[0] == "T":
        for i in (1, 2, 3, 4, 5, 7, 9, 10):
            if a[i] != b[i]:
                return f"{path}: {FIELDS[i]} {a[i]} (xla) vs {b[i]} (eager)"
        for i in (6, 8):
            x, y = a[i], b[i]
            if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
                if x.shape != y.shape or not torch.allclose(
                    x.double(), y.double(), rtol=1e-5, atol=1e-6, equal_nan=True
                ):
                    return f"{path}: {FIELDS[i]} differ\n{x} (xla)\n{y} (eager)"
            elif (x is None) != (y is None) or type(x) is not type(y):
                return f"{path}: {FIELDS[i]} {x} (xla) vs {y} (eager)"
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
        if b[2][:50] not in a[3]:
            return f"{path}: MSG {a[1].__name__}: {a[2]!r} (xla) vs {b[2]!r} (eager)"
        return None
    if a[0] == "W":
        if a[1] != b[1]:
            return f"{path}: warnings {a[1]} (xla) vs {b[1]} (eager)"
        return None
    if a[1] != b[1]:
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


def _flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    return []


def observe(fn, make, compiled):
    torch._dynamo.reset()
    f = torch.compile(fn, backend=BACKEND, dynamic=DYNAMIC) if compiled else fn
    obs = []
    keep = None
    for seed in (0, 1, 2):
        if seed == 2 and not getattr(make, "keep", False) and not getattr(make, "vary", False):
            break
        args = make(seed) if keep is None else keep
        if getattr(make, "keep", False):
            keep = args
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            try:
                out = f(*args)
            except Exception as e:  # noqa: BLE001  (the error is an observation)
                obs.append(("raised", desc(e, args)))
                obs.append(("args", desc(list(args), args)))
                continue
        wl = sorted(
            {
                (w.category.__name__, str(w.message)[:40])
                for w in ws
                if (
                    "resize" in str(w.message)
                    or "out=" in str(w.message)
                    or "deprecated" in str(w.message)
                )
                and w.category.__name__ != "FallbackWarning"
            }
        )
        obs.append(("warn", ("W", wl)))
        obs.append(("out", desc(out, args)))
        obs.append(("args", desc(list(args), args)))
        # writes into the results after the call reach the inputs exactly as eager's
        try:
            with torch.no_grad():
                for t in _flat(out):
                    if t.is_floating_point() and t.numel():
                        t.add_(100)
            obs.append(("args_after_write", desc(list(args), args)))
        except Exception as e:  # noqa: BLE001
            obs.append(("write_raised", desc(e, args)))
    return obs


def compare(name, case):
    fn, make = case
    try:
        exp = observe(fn, make, False)
        n0 = _COMPILES[0]
        got = observe(fn, make, True)
        n = _COMPILES[0] - n0
    except Exception:  # noqa: BLE001
        return f"CRASH {name}: {traceback.format_exc().strip().splitlines()[-1]}"
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF {name}: observation {lg!r} {str(g)[:300]} (xla) vs {le!r} {str(e)[:300]} (eager)"
        d = same(g, e, lg)
        if d:
            return f"DIFF {name} [{n} programs]: {d}"
    return f"ok {name} [{n} programs]"


def case(make):
    def deco(fn):
        CASES[fn.__name__] = (fn, make)
        return fn

    return deco


x34 = lambda s: [r(3, 4, seed=s)]
x4 = lambda s: [r(4, seed=s)]
x134 = lambda s: [r(1, 3, 1, 4, seed=s)]


# ---- in-place view ops on inputs -------------------------------------------------------------
@case(x34)
def unsqueeze_(x):
    x.unsqueeze_(0)
    return x * 2


@case(x34)
def unsqueeze_ret(x):
    return x.unsqueeze_(1)


@case(x134)
def squeeze_(x):
    x.squeeze_()
    return x + 1


@case(x134)
def squeeze_dim(x):
    x.squeeze_(2)
    return x.sum(0)


@case(x34)
def t_(x):
    x.t_()
    return x @ torch.ones(3, 2)


@case(x34)
def t_ret(x):
    return x.t_()


@case(x34)
def transpose_(x):
    x.transpose_(0, 1)
    return x.contiguous()


@case(x34)
def transpose_then_write(x):
    x.transpose_(0, 1)
    x[0] = 7
    return x.sum()


@case(x34)
def t_then_add_(x):
    x.t_().add_(1)
    return x


@case(x34)
def swapdims_(x):
    x.swapdims_(0, 1)
    return x * 1


@case(x34)
def as_strided_(x):
    x.as_strided_((2, 2), (1, 2))
    return x + 0


@case(x34)
def as_strided_offset(x):
    x.as_strided_((2, 3), (4, 1), 1)
    return x * 3


@case(x34)
def as_strided_ret(x):
    return x.as_strided_((6,), (2,))


@case(x34)
def resize_shrink(x):
    x.resize_(2, 3)
    return x + 1


@case(x34)
def resize_same_numel(x):
    x.resize_(6, 2)
    return x.sum(1)


@case(x34)
def resize_ret(x):
    return x.resize_(12)


@case(lambda s: [r(3, 4, seed=s), r(2, 2, seed=s + 5)])
def resize_as_(x, y):
    x.resize_as_(y)
    return x + y


@case(lambda s: [r(3, 4, seed=s).t()])
def resize_noncontig_same(x):
    x.resize_(4, 3)
    return x * 2


@case(lambda s: [r(3, 4, seed=s).t()])
def resize_noncontig_shrink(x):
    x.resize_(2, 2)
    return x * 2


@case(lambda s: [torch.empty(0)])
def resize_grow_empty(x):
    x.resize_(3)
    x.fill_(2)
    return x + 1


@case(lambda s: [r(3, 4, seed=s), r(5, seed=s + 3)])
def set_(x, y):
    x.set_(y)
    return x * 2


@case(lambda s: [r(3, 4, seed=s), r(5, seed=s + 3)])
def set_then_write(x, y):
    x.set_(y)
    x.add_(1)
    return y.sum()


@case(lambda s: [r(3, 4, seed=s), r(2, 6, seed=s + 3)])
def data_assign(x, y):
    x.data = y
    return x + 1


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 3)])
def data_assign_same_shape(x, y):
    x.data = y * 2
    return x + 1


@case(lambda s: [r(3, 4, seed=s)])
def requires_grad_(x):
    x.requires_grad_()
    return x * 2


@case(lambda s: [r(3, 4, seed=s)])
def requires_grad_ret(x):
    return x.requires_grad_()


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def detach_view(x):
    y = x * 2
    y.detach_()
    return y


@case(lambda s: [r(3, 4, seed=s)])
def detach_input(x):
    x.detach_()
    return x + 1


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def requires_grad_false_nonleaf_raises(x):
    y = x * 2
    y.requires_grad_(False)
    return y


# ---- out= ----------------------------------------------------------------------------------
def _abc(s, cshape=(3, 4), cdtype=torch.float32):
    return [r(3, 4, seed=s), r(3, 4, seed=s + 2), torch.zeros(cshape, dtype=cdtype)]


@case(_abc)
def add_out(a, b, c):
    torch.add(a, b, out=c)
    return c


@case(_abc)
def add_out_ret(a, b, c):
    return torch.add(a, b, out=c)


@case(lambda s: _abc(s, (2, 2)))
def add_out_wrong_size(a, b, c):
    torch.add(a, b, out=c)
    return c * 1


@case(lambda s: _abc(s, (0,)))
def add_out_empty(a, b, c):
    torch.add(a, b, out=c)
    return c * 1


@case(lambda s: _abc(s, (5, 5)))
def add_out_bigger(a, b, c):
    torch.add(a, b, out=c)
    return c * 1


@case(lambda s: _abc(s, (3, 4), torch.float64))
def add_out_f64(a, b, c):
    torch.add(a, b, out=c)
    return c * 1


@case(lambda s: _abc(s, (3, 4), torch.int64))
def add_out_int_raises(a, b, c):
    torch.add(a, b, out=c)
    return c * 1


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 2), torch.zeros(4, 3)])
def add_out_noncontig(a, b, c):
    torch.add(a, b, out=c.t())
    return c * 1


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 2), torch.zeros(4, 6)])
def add_out_strided_view(a, b, c):
    torch.add(a, b, out=c[:, ::2].t())
    return c * 1


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 2)])
def add_out_aliases_input(a, b):
    torch.add(a, b, out=a)
    return a * 1


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 2)])
def mul_out_aliases_second(a, b):
    torch.mul(a, b, out=b)
    return b


@case(lambda s: [r(3, 4, seed=s), r(4, 5, seed=s + 2), torch.zeros(3, 5)])
def matmul_out(a, b, c):
    torch.matmul(a, b, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), r(4, 5, seed=s + 2), torch.zeros(1)])
def matmul_out_resize(a, b, c):
    torch.matmul(a, b, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), r(4, 5, seed=s + 2), torch.zeros(5, 3)])
def mm_out_noncontig(a, b, c):
    torch.mm(a, b, out=c.t())
    return c


@case(lambda s: [r(2, 3, 4, seed=s), r(2, 4, 5, seed=s + 2), torch.zeros(0)])
def bmm_out_empty(a, b, c):
    torch.bmm(a, b, out=c)
    return c


@case(lambda s: [r(2, 3, seed=s), r(2, 3, seed=s + 1), torch.zeros(4, 3)])
def cat_out(a, b, c):
    torch.cat([a, b], out=c)
    return c


@case(lambda s: [r(2, 3, seed=s), r(2, 3, seed=s + 1), torch.zeros(2)])
def cat_out_resize(a, b, c):
    torch.cat([a, b], 1, out=c)
    return c


@case(lambda s: [r(2, 3, seed=s), r(2, 3, seed=s + 1), torch.zeros(0)])
def stack_out_empty(a, b, c):
    torch.stack([a, b], out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3)])
def sum_out(x, c):
    torch.sum(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def sum_out_wrong_size(x, c):
    torch.sum(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(())])
def sum_all_out(x, c):
    torch.sum(x, (0, 1), out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.long)])
def sort_out(x, v, i):
    torch.sort(x, 1, out=(v, i))
    return v, i


@case(lambda s: [r(3, 4, seed=s), torch.zeros(0), torch.zeros(0, dtype=torch.long)])
def sort_out_empty(x, v, i):
    r_ = torch.sort(x, 0, out=(v, i))
    return r_.values, r_.indices


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4), torch.zeros(4, dtype=torch.long)])
def max_dim_out(x, v, i):
    torch.max(x, 0, out=(v, i))
    return v * 1, i * 1


@case(lambda s: [r(3, 4, seed=s), torch.zeros(2), torch.zeros(2, dtype=torch.long)])
def max_dim_out_resize(x, v, i):
    torch.max(x, 0, out=(v, i))
    return v * 1, i * 1


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 2), torch.zeros(3, 2, dtype=torch.long)])
def topk_out(x, v, i):
    torch.topk(x, 2, out=(v, i))
    return v, i


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4), torch.zeros(4, dtype=torch.int32)])
def max_dim_out_int32_idx_raises(x, v, i):
    torch.max(x, 0, out=(v, i))
    return v * 1


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4, 3)])
def exp_out_noncontig(x, c):
    torch.exp(x, out=c.t())
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.float64)])
def exp_out_f64(x, c):
    torch.exp(x, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.float16)])
def exp_out_f16_raises(x, c):
    torch.exp(x, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s)])
def exp_out_self(x):
    torch.exp(x, out=x)
    return x


@case(lambda s: [r(3, 4, seed=s)])
def exp_out_view_of_self(x):
    torch.exp(x[0], out=x[1])
    return x


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def clamp_out(x, c):
    torch.clamp(x, -0.5, 0.5, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.bool)])
def gt_out_bool(x, c):
    torch.gt(x, 0, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def gt_out_float(x, c):
    torch.gt(x, 0, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(5)])
def gt_out_resize(x, c):
    torch.gt(x, 0, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def where_out_wrong(x, c):
    torch.where(x > 0, x, 0.0, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3)])
def mean_out(x, c):
    torch.mean(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4)])
def cumsum_out_resize(x, c):
    torch.cumsum(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def softmax_out(x, c):
    torch.softmax(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(12)])
def add_out_other_shape_same_numel(x, c):
    torch.add(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def add_out_view_of_bigger(x, c):
    torch.add(x[:2], 1, out=c[1:])
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def add_out_view_resize_raises(x, c):
    torch.add(x, 1, out=c[:2])
    return c


# ---- writes through views of inputs ------------------------------------------------------
@case(x34)
def step_view_add_(x):
    x[::2].add_(1)
    return x.sum()


@case(x34)
def view_flat_setitem(x):
    x.view(-1)[5] = 9
    return x


@case(lambda s: [r(4, 4, seed=s)])
def diagonal_zero_(x):
    x.diagonal().zero_()
    return x * 1


@case(x34)
def T_mul_(x):
    x.T.mul_(2)
    return x.T


@case(lambda s: [r(8, seed=s)])
def unfold_write(x):
    x.unfold(0, 2, 2).mul_(3)
    return x


@case(lambda s: [r(8, seed=s)])
def unfold_ret(x):
    return x.unfold(0, 3, 2)


@case(x34)
def ret_view_slice(x):
    return x[1:, 1:]


@case(x34)
def ret_view_t(x):
    return x.t()


@case(x34)
def ret_view_diag(x):
    return x.diagonal()


@case(x34)
def ret_view_reshape(x):
    return x.reshape(2, 6)


@case(lambda s: [r(3, 4, seed=s).t()])
def ret_reshape_copy(x):
    return x.reshape(12)


@case(x34)
def ret_view_and_base(x):
    return x, x[0]


@case(x34)
def ret_expand(x):
    return x[0].expand(3, 4)


@case(x34)
def ret_view_after_add_(x):
    x.add_(1)
    return x[1]


@case(x34)
def ret_split(x):
    return x.split(2, 1)


@case(x34)
def ret_unbind(x):
    return x.unbind(0)


@case(x34)
def ret_chunk_then_write(x):
    a, b = x.chunk(2, 1)
    a.mul_(2)
    return b


@case(x34)
def ret_narrow(x):
    return x.narrow(1, 1, 2)


@case(x34)
def ret_view_dtype(x):
    return x.view(torch.int32)


@case(x34)
def ret_select_of_t_(x):
    x.t_()
    return x[0]


@case(x34)
def ret_detach(x):
    return x.detach()


@case(x34)
def ret_alias_after_unsqueeze_(x):
    x.unsqueeze_(0)
    return x[0, 1]


@case(x34)
def ret_contiguous(x):
    return x.contiguous()


@case(lambda s: [r(3, 4, seed=s).t()])
def ret_contiguous_nc(x):
    return x.contiguous()


@case(x34)
def ret_flatten(x):
    return x.flatten()


@case(x34)
def ret_movedim(x):
    return x.movedim(0, 1)


# ---- inputs sharing storage --------------------------------------------------------------
def _base_views(s):
    b = r(12, seed=s)
    return [b[:8], b[4:]]


@case(_base_views)
def overlap_add_(a, b):
    a.add_(1)
    return b * 1


@case(_base_views)
def overlap_out(a, b):
    torch.mul(b, 2, out=a)
    return a, b


def _view_and_base(s):
    b = r(3, 4, seed=s)
    return [b, b[1]]


@case(_view_and_base)
def base_and_view_write_view(b, v):
    v.fill_(5)
    return b.sum()


@case(_view_and_base)
def base_and_view_unsqueeze_(b, v):
    v.unsqueeze_(0)
    b.add_(1)
    return v * 1


@case(_view_and_base)
def base_and_view_ret_view(b, v):
    b.mul_(2)
    return v


def _same_twice(s):
    x = r(3, 4, seed=s)
    return [x, x]


@case(_same_twice)
def same_twice_t_(a, b):
    a.t_()
    return b * 1


@case(_same_twice)
def same_twice_out(a, b):
    torch.add(a, 1, out=b)
    return a


@case(_same_twice)
def same_twice_resize(a, b):
    a.resize_(2, 2)
    return b + 1


# ---- .grad ----------------------------------------------------------------------------------
def _pg(s):
    p = r(3, 4, seed=s).requires_grad_()
    p.grad = r(3, 4, seed=s + 7)
    return [p]


@case(_pg)
def grad_none(p):
    p.grad = None
    return p * 2


@case(_pg)
def grad_zero_(p):
    p.grad.zero_()
    return p * 2


@case(_pg)
def grad_iadd(p):
    p.grad += 1
    return p.grad * 2


@case(_pg)
def grad_mul_(p):
    p.grad.mul_(0.5)
    return p.grad


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def grad_assign(p):
    p.grad = torch.ones_like(p) * 3
    return p.detach() * 2


@case(_pg)
def grad_ret(p):
    return p.grad


@case(_pg)
def grad_assign_other_shape_raises(p):
    p.grad = torch.ones(2)
    return p * 1


@case(_pg)
def grad_read_then_none(p):
    g = p.grad * 2
    p.grad = None
    return g


# ---- storage offsets of aliased outputs -------------------------------------------------------
@case(lambda s: [r(12, seed=s)[2:]])
def offset_input_ret_view(x):
    return x[3:]


@case(lambda s: [r(12, seed=s)[2:]])
def offset_input_add_(x):
    x.add_(1)
    return x


@case(lambda s: [r(12, seed=s)[2:].view(2, 5)])
def offset_input_t_(x):
    x.t_()
    return x


@case(lambda s: [r(12, seed=s)[2:]])
def offset_input_resize_(x):
    x.resize_(3)
    return x * 1


@case(lambda s: [r(12, seed=s)[2:]])
def offset_input_as_strided_(x):
    x.as_strided_((3,), (2,), 0)
    return x * 1


# ---- out= across op families -------------------------------------------------------------
def _xo(shape=(3, 4), oshape=(3, 4), odt=torch.float32):
    return lambda s: [r(*shape, seed=s), torch.zeros(oshape, dtype=odt)]


def _xvi(oshape, idt=torch.long):
    return lambda s: [r(3, 4, seed=s), torch.zeros(oshape), torch.zeros(oshape, dtype=idt)]


@case(_xo(oshape=(4,), odt=torch.long))
def argmax_out(x, c):
    torch.argmax(x, 0, out=c)
    return c


@case(_xo(oshape=(3,), odt=torch.long))
def argmax_out_resize(x, c):
    torch.argmax(x, 0, out=c)
    return c


@case(_xvi((3, 4)))
def cummax_out(x, v, i):
    torch.cummax(x, 1, out=(v, i))
    return v, i


@case(_xvi((0,)))
def cummax_out_empty(x, v, i):
    torch.cummax(x, 1, out=(v, i))
    return v, i


@case(_xvi((3,)))
def kthvalue_out(x, v, i):
    torch.kthvalue(x, 2, 1, out=(v, i))
    return v, i


@case(_xvi((4,)))
def median_dim_out(x, v, i):
    torch.median(x, 0, out=(v, i))
    return v, i


@case(_xvi((3,)))
def min_dim_out_keepdim_resize(x, v, i):
    torch.min(x, 1, keepdim=True, out=(v, i))
    return v, i


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4), torch.zeros(4)])
def aminmax_out(x, a, b):
    torch.aminmax(x, dim=0, out=(a, b))
    return a, b


@case(_xo(oshape=(4,)))
def amax_out(x, c):
    torch.amax(x, 0, out=c)
    return c


@case(_xo(oshape=()))
def max_all_out(x, c):
    torch.max(x, out=c)
    return c


@case(_xo(oshape=(3, 4)))
def max_all_out_resize(x, c):
    torch.max(x, out=c)
    return c


@case(lambda s: [torch.zeros(5)])
def arange_out(c):
    torch.arange(5, out=c)
    return c


@case(lambda s: [torch.zeros(3)])
def arange_out_resize(c):
    torch.arange(5, out=c)
    return c


@case(lambda s: [torch.zeros(3, dtype=torch.long)])
def arange_out_long(c):
    torch.arange(1, 8, 2, out=c)
    return c


@case(lambda s: [torch.zeros(4)])
def linspace_out(c):
    torch.linspace(0, 1, 4, out=c)
    return c


@case(lambda s: [torch.zeros(2, 2)])
def zeros_out(c):
    c.fill_(3)
    torch.zeros(2, 2, out=c)
    return c


@case(lambda s: [torch.zeros(2)])
def ones_out_resize(c):
    torch.ones(2, 3, out=c)
    return c


@case(lambda s: [torch.zeros(6)])
def full_out(c):
    torch.full((6,), 2.5, out=c)
    return c


@case(lambda s: [torch.zeros(3, 3)])
def eye_out(c):
    torch.eye(3, out=c)
    return c


@case(lambda s: [torch.zeros(2, 2)])
def eye_out_resize(c):
    torch.eye(3, 4, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.tensor([2, 0]), torch.zeros(2, 4)])
def index_select_out(x, i, c):
    torch.index_select(x, 0, i, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.tensor([[0, 1], [2, 3], [1, 1]]), torch.zeros(3, 2)])
def gather_out(x, i, c):
    torch.gather(x, 1, i, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), r(4, 5, seed=s + 1), r(3, 5, seed=s + 2)])
def addmm_out_self(x, y, c):
    torch.addmm(c, x, y, out=c)
    return c


@case(lambda s: [r(3, seed=s), r(4, seed=s + 1), torch.zeros(3, 4)])
def outer_out(a, b, c):
    torch.outer(a, b, out=c)
    return c


@case(lambda s: [r(4, 4, seed=s), torch.zeros(4, 4)])
def tril_out(x, c):
    torch.tril(x, out=c)
    return c


@case(lambda s: [r(4, 4, seed=s)])
def tril_out_self(x):
    torch.tril(x, out=x)
    return x


@case(lambda s: [r(4, seed=s), torch.zeros(4, 4)])
def diag_out(x, c):
    torch.diag(x, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.long)])
def div_floor_out_long_raises(x, c):
    torch.div(x, 2, rounding_mode="floor", out=c)
    return c


@case(lambda s: [torch.arange(12).view(3, 4), torch.zeros(3, 4, dtype=torch.long)])
def div_floor_int_out(x, c):
    torch.div(x, 5, rounding_mode="floor", out=c)
    return c


@case(lambda s: [torch.arange(12).view(3, 4), torch.zeros(3, 4, dtype=torch.long)])
def div_true_int_out_raises(x, c):
    torch.div(x, 5, out=c)
    return c


@case(lambda s: [torch.arange(12).view(3, 4), torch.zeros(3, 4)])
def div_true_int_out_float(x, c):
    torch.div(x, 5, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.bool)])
def add_out_bool_raises(x, c):
    torch.add(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.complex64)])
def add_out_complex(x, c):
    torch.add(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.int32)])
def frexp_out(x, m, e):
    torch.frexp(x, out=(m, e))
    return m, e


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 1), torch.zeros(3, 4)])
def lerp_out(a, b, c):
    torch.lerp(a, b, 0.3, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def pow_out(x, c):
    torch.pow(x, 2, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(12)])
def flatten_into_out_via_copy(x, c):
    c.copy_(x.flatten())
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def round_out(x, c):
    torch.round(x, decimals=1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.long)])
def round_out_long_raises(x, c):
    torch.round(x, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4, 3, dtype=torch.float64)])
def sum_out_dtype_arg(x, c):
    torch.sum(x, 0, dtype=torch.float64, out=c[0])
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def norm_out(x, c):
    torch.linalg.vector_norm(x, dim=1, out=c[:, 0])
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4, 3)])
def softmax_out_noncontig(x, c):
    torch.softmax(x, 1, out=c.t())
    return c


# ---- out= with autograd -------------------------------------------------------------------
@case(lambda s: [r(3, 4, seed=s).requires_grad_(), torch.zeros(3, 4)])
def out_requires_grad_input_raises(x, c):
    torch.add(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s).requires_grad_(), torch.zeros(3, 4)])
def out_requires_grad_input_no_grad(x, c):
    with torch.no_grad():
        torch.mul(x, 2, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4).requires_grad_()])
def out_requires_grad_out_raises(x, c):
    torch.add(x, 1, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def unsqueeze_leaf_requires_grad(x):
    x.unsqueeze_(0)
    return x * 2


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def t_leaf_requires_grad_backward(x):
    y = x * 1
    y.t_()
    y = y * torch.arange(3.0)
    y.sum().backward()
    return y.detach()


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def resize_requires_grad_raises(x):
    x.resize_(2, 2)
    return x


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def resize_nonleaf_requires_grad_raises(x):
    y = x * 2
    y.resize_(2, 2)
    return y


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def as_strided_nonleaf_grad(x):
    y = x * 2
    y.as_strided_((2, 2), (1, 3))
    return y


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def squeeze_nonleaf_ret(x):
    y = x.unsqueeze(0) * 2
    y.squeeze_(0)
    return y


@case(lambda s: [r(3, 4, seed=s).requires_grad_(), r(3, 4, seed=s + 1)])
def set_requires_grad_raises(x, y):
    x.set_(y)
    return x


@case(lambda s: [r(3, 4, seed=s).requires_grad_(), r(3, 4, seed=s + 1)])
def data_assign_leaf_grad(x, y):
    x.data = y
    return x * 2


@case(lambda s: [r(3, 4, seed=s).requires_grad_(), r(2, 2, seed=s + 1)])
def data_assign_leaf_grad_other_shape(x, y):
    x.data = y
    return x * 2


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def data_inplace(x):
    x.data.mul_(2)
    return x * 1


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def data_t_(x):
    x.data.t_()
    return x * 1


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def detach_then_t_(x):
    d = x.detach()
    d.t_()
    d.mul_(2)
    return x * 1, d


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def detach_then_unsqueeze_returned(x):
    d = x.detach()
    d.unsqueeze_(0)
    return d


# ---- metadata of inputs changing between calls ------------------------------------------------
def _alt(s):
    x = r(3, 4, seed=s)
    return [x if s == 0 else x.t().contiguous().t()]


@case(lambda s: [r(3, 4, seed=s) if s == 0 else r(4, 3, seed=s).t()])
def changing_strides_t_(x):
    x.t_()
    return x.view(-1) if x.is_contiguous() else x.reshape(-1)


@case(lambda s: [r(3, 4, seed=s) if s == 0 else r(4, 3, seed=s).t()])
def changing_strides_ret_view(x):
    return x[1:]


@case(lambda s: [r(12, seed=s).view(3, 4) if s == 0 else r(20, seed=s)[5:17].view(3, 4)])
def changing_offset_add_(x):
    x.add_(1)
    return x[1]


@case(lambda s: [r(3, 4, seed=s) if s == 0 else r(4, 3, seed=s).t()])
def changing_strides_add_out_self(x):
    torch.mul(x, 2, out=x)
    return x


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4) if s == 0 else torch.zeros(4, 3).t()])
def changing_out_strides(x, c):
    torch.exp(x, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4) if s == 0 else torch.zeros(0)])
def changing_out_size(x, c):
    torch.exp(x, out=c)
    return c


@case(
    lambda s: [
        r(3, 4, seed=s),
        torch.zeros(3, 4) if s == 0 else torch.zeros(3, 4, dtype=torch.float64),
    ]
)
def changing_out_dtype(x, c):
    torch.exp(x, out=c)
    return c


# ---- partial overlap in out= -------------------------------------------------------------
@case(x4)
def out_partial_overlap_raises(x):
    torch.add(x[:-1], 1, out=x[1:])
    return x


@case(x34)
def out_partial_overlap_matmul(x):
    torch.mm(x[:, :3], x[:3, :3], out=x[:, 1:])
    return x


@case(x34)
def out_full_overlap_ok(x):
    torch.neg(x[:, :2], out=x[:, :2])
    return x


@case(x4)
def copy_partial_overlap(x):
    x[1:].copy_(x[:-1])
    return x


@case(lambda s: [r(2, 4, seed=s), torch.zeros(3, 4)])
def cat_out_aliases_input(x, c):
    torch.cat([x, c[:1]], out=c)
    return c


def keep(make):
    make.keep = True
    return make


# ---- one input object over several calls ------------------------------------------------------
@case(keep(x34))
def kept_t_(x):
    x.t_()
    return x.sum(0)


@case(keep(x34))
def kept_unsqueeze_(x):
    x.unsqueeze_(0)
    return x.shape[0] * x


@case(keep(lambda s: [r(1, 1, 3, seed=s)]))
def kept_squeeze0_(x):
    x.squeeze_(0)
    return x + 1


@case(keep(x34))
def kept_resize_shrink(x):
    x.resize_(x.shape[0] - 1, 4)
    return x * 2


@case(keep(lambda s: [r(12, seed=s)]))
def kept_as_strided_(x):
    x.as_strided_((x.numel() // 2,), (2,))
    return x + 0


@case(keep(_pg))
def kept_grad_accumulate(p):
    p.grad += p.detach()
    return p.grad.sum()


@case(keep(lambda s: [r(3, 4, seed=s).requires_grad_()]))
def kept_grad_none_then_assign(p):
    if p.grad is None:
        p.grad = torch.zeros_like(p)
    p.grad.add_(1)
    return p.grad


# ---- growing and resetting inputs ---------------------------------------------------------
@case(x34)
def resize_grow_write(x):
    x.resize_(5, 4)
    x[3:] = 1
    return x.sum()


@case(x34)
def resize_grow_ret(x):
    x.resize_(5, 4)
    x[3:].fill_(2)
    return x


@case(x34)
def resize_zero(x):
    x.resize_(0)
    return x


@case(x34)
def resize_flat_then_view(x):
    x.resize_(12)
    return x[::3]


@case(lambda s: [r(3, 4, seed=s), r(5, seed=s + 1)])
def set_storage_args(x, y):
    x.set_(y.untyped_storage(), 1, (2, 2), (1, 2))
    return x * 1


@case(lambda s: [r(3, 4, seed=s), r(5, seed=s + 1)])
def set_then_ret(x, y):
    x.set_(y)
    return x


@case(lambda s: [r(3, 4, seed=s)])
def set_empty(x):
    x.set_()
    return x.numel()


@case(lambda s: [r(3, 4, seed=s), r(2, 2, dtype=torch.float64, seed=s)])
def set_dtype_raises(x, y):
    x.set_(y)
    return x


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 1)])
def data_assign_then_write(x, y):
    x.data = y
    x.add_(1)
    return y


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 1)])
def data_assign_view(x, y):
    x.data = y[1:]
    return x


# ---- out= aliasing and overlap ------------------------------------------------------------------
@case(lambda s: [r(3, 4, seed=s)])
def add_out_expanded_raises(x):
    c = torch.zeros(4)
    torch.add(x, 1, out=c.expand(3, 4))
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4)])
def add_out_expanded_input_raises(x, c):
    torch.add(x, 1, out=c.expand(3, 4))
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4, dtype=torch.long)])
def sort_out_into_self(x, i):
    torch.sort(x, 1, out=(x, i))
    return x, i


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4, dtype=torch.long)])
def max_out_into_row_of_self(x, i):
    torch.max(x, 0, out=(x[0], i))
    return x, i


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4, 3), torch.zeros(4, 3, dtype=torch.long)])
def sort_out_noncontig(x, v, i):
    torch.sort(x, 1, out=(v.t(), i.t()))
    return v, i


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def out_returned_then_written(x, c):
    return torch.add(x, 1, out=c[1:])


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def out_ret_is_out(x, c):
    y = torch.add(x, 1, out=c)
    return y, y is c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.long)])
def sort_out_ret_is_out(x, v, i):
    a, b = torch.sort(x, out=(v, i))
    return a is v, b is i


# ---- detach_/requires_grad_ --------------------------------------------------------------------
@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def detach_view_raises(x):
    y = (x * 2)[0]
    y.detach_()
    return y


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def detach_ret_nonleaf_used(x):
    y = x * 2
    z = y * 3
    y.detach_()
    return y, z


@case(lambda s: [r(3, 4, seed=s)])
def requires_grad_then_backward(x):
    x.requires_grad_()
    (x * x).sum().backward()
    return x.grad


@case(lambda s: [r(3, 4, seed=s)])
def requires_grad_intermediate(x):
    y = (x * 2).requires_grad_()
    return y * 3


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def retain_grad(x):
    y = x * 2
    y.retain_grad()
    z = (y * y).sum()
    return z


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def requires_grad_false_input(x):
    x.requires_grad_(False)
    return x * 2


# ---- optimizer-style zero_grad inside ------------------------------------------------------
@case(_pg)
def zero_grad_not_none(p):
    p.grad.detach_()
    p.grad.requires_grad_(False)
    p.grad.zero_()
    return p * 1


@case(_pg)
def grad_data_zero(p):
    p.grad.data.zero_()
    return p * 1


@case(_pg)
def grad_assign_input_view(p):
    p.grad = p.detach()[:, :]
    return p.grad


@case(lambda s: [r(3, 4, seed=s).requires_grad_(), r(3, 4, seed=s + 1)])
def grad_assign_is_input(p, g):
    p.grad = g
    return p.grad * 1


@case(lambda s: [r(3, 4, seed=s).requires_grad_(), r(3, 4, seed=s + 1)])
def grad_assign_then_write_input(p, g):
    p.grad = g
    g.mul_(2)
    return p * 1


@case(_pg)
def clip_grad_norm(p):
    n = torch.nn.utils.clip_grad_norm_([p], 0.5)
    return n


# ---- tuple out= overlapping the input ------------------------------------------------------------
def _li(*shape):
    return torch.zeros(shape, dtype=torch.long)


@case(x34)
def min_out_into_row_of_self(x):
    torch.min(x, 0, out=(x[0], _li(4)))
    return x


@case(x34)
def max_out_expanded_raises(x):
    torch.max(x, 0, out=(torch.zeros(1).expand(4), _li(4)))
    return x


@case(x34)
def sort_out_shifted(x):
    torch.sort(x[:, :3], 1, out=(x[:, 1:], _li(3, 3)))
    return x


@case(x34)
def topk_out_into(x):
    torch.topk(x, 2, out=(x[:, :2], _li(3, 2)))
    return x


@case(x34)
def cummax_out_into_self(x):
    torch.cummax(x, 1, out=(x, _li(3, 4)))
    return x


@case(x34)
def cummax_out_shifted(x):
    torch.cummax(x[:, :3], 1, out=(x[:, 1:], _li(3, 3)))
    return x


@case(x34)
def kthvalue_out_into(x):
    torch.kthvalue(x, 2, 1, out=(x[:, 0], _li(3)))
    return x


@case(x34)
def frexp_out_shifted(x):
    torch.frexp(x[:, :3], out=(x[:, 1:], torch.zeros(3, 3, dtype=torch.int32)))
    return x


@case(x34)
def median_out_into(x):
    torch.median(x, 1, out=(x[:, 0], _li(3)))
    return x


@case(x34)
def sum_out_into_row(x):
    torch.sum(x, 0, out=x[0])
    return x


@case(x34)
def mean_out_into_col(x):
    torch.mean(x, 1, out=x[:, 0])
    return x


@case(x34)
def cumsum_out_shifted(x):
    torch.cumsum(x[:, :3], 1, out=x[:, 1:])
    return x


@case(x34)
def aminmax_out_same(x):
    a = torch.zeros(4)
    torch.aminmax(x, dim=0, out=(a, a))
    return a


@case(x34)
def matmul_out_into_self(x):
    torch.matmul(x[:, :3], x[:3, :3].t(), out=x[:, :3])
    return x


@case(x34)
def softmax_out_into_self(x):
    torch.softmax(x, 1, out=x)
    return x


@case(x34)
def cat_out_into_self_part(x):
    torch.cat([x[:1, :2], x[1:2, :2]], out=x[1:3, :2])
    return x


def vary(make):
    make.vary = True
    return make


# ---- sizes changing between calls (a dynamic graph, padded to buckets) ---------------------------
@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s), torch.zeros(3 + 2 * s, 4)]))
def vary_add_out(x, c):
    torch.add(x, 1, out=c)
    return c


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s), torch.zeros(0)]))
def vary_add_out_empty(x, c):
    torch.add(x, 1, out=c)
    return c


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_t_(x):
    x.t_()
    return x * 2


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_ret_view(x):
    return x[1:], x * 2


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_ret_detach_(x):
    y = x * 2
    return y, y.sum(0)


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_add_(x):
    x.add_(1)
    return x


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s), torch.zeros(4), torch.zeros(4, dtype=torch.long)]))
def vary_max_out(x, v, i):
    torch.max(x, 0, out=(v, i))
    return v, i


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_unsqueeze_(x):
    x.unsqueeze_(0)
    return x.sum(1)


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_resize_(x):
    x.resize_(2, 4)
    return x + 1


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_expand_out(x):
    return x.sum(1, keepdim=True).expand(-1, 5)


@case(vary(lambda s: [r(3 + 2 * s, seed=s)]))
def vary_expand_1d(x):
    return x.sum().expand(x.shape[0])


@case(vary(lambda s: [r(3 + 2 * s, 4, seed=s)]))
def vary_t_out(x):
    return (x * 2).t()


# ---- module state ------------------------------------------------------------------------------
class _M(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.w = torch.nn.Parameter(r(3, 4, seed=9))
        self.register_buffer("buf", r(3, 4, seed=8))
        self.body = body

    def forward(self, x):
        return self.body(self, x)


def _module_case(body):
    def fn(m, x):
        return m(x)

    def make(s):
        return [_M(body), r(3, 4, seed=s)]

    CASES["mod_" + body.__name__] = (fn, make)
    return body


@_module_case
def buf_t_(m, x):
    m.buf.t_()
    return x.t() + m.buf


@_module_case
def buf_unsqueeze_(m, x):
    m.buf.unsqueeze_(0)
    return x + m.buf


@_module_case
def buf_resize_(m, x):
    m.buf.resize_(2, 4)
    return m.buf * 2


@_module_case
def buf_rebind(m, x):
    m.buf = x * 2
    return m.buf + 1


@_module_case
def buf_data_assign(m, x):
    m.buf.data = x.t().contiguous()
    return m.buf


@_module_case
def w_data_assign(m, x):
    m.w.data = x * 3
    return m.w * 1


@_module_case
def w_data_mul_(m, x):
    m.w.data.mul_(2)
    return (m.w * x).sum()


@_module_case
def w_grad_none(m, x):
    m.w.grad = x.clone()
    return m.w * 1


@_module_case
def w_requires_grad_false(m, x):
    m.w.requires_grad_(False)
    return m.w * x


@_module_case
def w_no_grad_t_(m, x):
    with torch.no_grad():
        m.w.t_()
    return m.w.sum(0)


@_module_case
def buf_out(m, x):
    torch.add(x, 1, out=m.buf)
    return m.buf


@_module_case
def buf_out_resize(m, x):
    torch.sum(x, 0, out=m.buf)
    return m.buf


@_module_case
def buf_copy_then_view_ret(m, x):
    m.buf.copy_(x)
    return m.buf[1:]


# ---- more aliasing and metadata ------------------------------------------------------------------
@case(lambda s: [r(3, 4, seed=s), torch.nn.Parameter(r(3, 4, seed=s + 1))])
def out_into_param_no_grad(x, p):
    with torch.no_grad():
        torch.add(p, x, alpha=-0.1, out=p)
    return p * 1


@case(lambda s: [r(3, 4, seed=s), torch.nn.Parameter(r(3, 4, seed=s + 1))])
def out_into_param_raises(x, p):
    torch.add(p, x, out=p)
    return p * 1


@case(x34)
def t_ret_twice(x):
    x.t_()
    return x, x


@case(lambda s: [r(3, 4, seed=s), r(3, 4, seed=s + 1)])
def data_assign_ret_input(x, y):
    x.data = y * 2
    return x


@case(lambda s: [r(3, 4, seed=s), r(6, seed=s + 1)])
def set_then_view(x, y):
    x.set_(y)
    return x[1:]


@case(lambda s: [r(3, 4, seed=s)])
def graph_break_after_t_(x):
    x.t_()
    torch._dynamo.graph_break()
    return x * 2


@case(lambda s: [r(3, 4, seed=s)])
def graph_break_after_resize_(x):
    x.resize_(2, 2)
    torch._dynamo.graph_break()
    return x * 2


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def grad_is_param_memory(p):
    p.grad = p.detach()
    p.grad.mul_(0.5)
    return p * 1


@case(lambda s: [r(3, 4, seed=s)])
def requires_grad_of_view_leaf(x):
    v = x[0]
    v.requires_grad_()
    return v * 2


@case(lambda s: [torch.complex(r(3, 4, seed=s), r(3, 4, seed=s + 1))])
def complex_real_mul_(x):
    x.real.mul_(2)
    return x


@case(lambda s: [torch.complex(r(3, 4, seed=s), r(3, 4, seed=s + 1))])
def complex_view_as_real_ret(x):
    return torch.view_as_real(x)[..., 1]


@case(lambda s: [torch.complex(r(3, 4, seed=s), r(3, 4, seed=s + 1)), torch.zeros(3, 4)])
def complex_abs_out(x, c):
    torch.abs(x, out=c)
    return c


@case(lambda s: [torch.complex(r(3, 4, seed=s), r(3, 4, seed=s + 1))])
def complex_abs_out_real_view(x):
    torch.abs(x, out=x.real)
    return x


@case(_base_views)
def overlap_t_(a, b):
    a.unsqueeze_(0)
    a.mul_(2)
    return b * 1


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def out_ret_after_t_(x, c):
    c.t_()
    torch.mul(x.t(), 2, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s), torch.zeros(4, 3)])
def out_t_ret_view(x, c):
    torch.mul(x, 2, out=c.t())
    return c.t()


@case(lambda s: [r(3, 4, seed=s).requires_grad_()])
def ret_input_view_then_unsqueeze_(x):
    y = x[1:]
    y.unsqueeze_(0)
    return y


@case(lambda s: [r(3, 4, seed=s)])
def view_unsqueeze_then_write(x):
    y = x[1:]
    y.unsqueeze_(0)
    y[0, 0] = 5
    return x


@case(lambda s: [r(3, 4, seed=s)])
def view_as_strided_then_write(x):
    y = x.view(-1)
    y.as_strided_((3,), (5,))
    y.fill_(7)
    return x


@case(lambda s: [r(3, 4, seed=s)])
def unsqueeze_then_squeeze(x):
    x.unsqueeze_(0).squeeze_(0).t_()
    return x.sum(0)


@case(lambda s: [r(3, 4, seed=s), torch.zeros(2, 3, 4)])
def stack_out_view(x, c):
    torch.stack([x, x * 2], out=c)
    return c[1]


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def where_out_self_cond(x, c):
    torch.where(x > 0, x, c, out=c)
    return c


@case(lambda s: [r(3, 4, seed=s)])
def clamp_out_self_view(x):
    torch.clamp(x.t(), 0, 1, out=x.t())
    return x


@case(lambda s: [r(3, 4, seed=s), torch.zeros(3, 4)])
def addcmul_out(x, c):
    torch.addcmul(c, x, x, value=0.5, out=c)
    return c


@case(lambda s: [r(4, 4, seed=s)])
def matmul_out_t_of_self_raises(x):
    torch.mm(x, x, out=x.t())
    return x


@case(lambda s: [r(4, 4, seed=s)])
def index_select_out_self(x):
    torch.index_select(x, 0, torch.tensor([3, 2, 1, 0]), out=x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def gather_out_self(x):
    torch.gather(x, 1, torch.tensor([[1, 0, 3, 2]] * 4), out=x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def flip_copy_into_self(x):
    x.copy_(x.flip(0))
    return x


@case(lambda s: [r(4, 4, seed=s)])
def t_copy_into_self(x):
    x.copy_(x.t())
    return x


@case(lambda s: [r(4, 4, seed=s)])
def cumsum_inplace_out(x):
    torch.cumsum(x, 0, out=x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def cumsum_(x):
    x.cumsum_(1)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def tril_inplace_t(x):
    x.t().tril_()
    return x


@case(lambda s: [r(4, 4, seed=s)])
def bmm_out_self(x):
    torch.matmul(x, x, out=x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def softmax_out_t(x):
    torch.softmax(x, 0, out=x.t())
    return x


@case(lambda s: [r(4, 4, seed=s)])
def sort_out_self_t(x):
    torch.sort(x, 0, out=(x.t(), _li(4, 4)))
    return x


@case(lambda s: [r(4, 4, seed=s)])
def cat_into_self(x):
    torch.cat([x[2:], x[:2]], out=x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def roll_copy_into_self(x):
    x.copy_(x.roll(1, 0))
    return x


@case(lambda s: [r(4, 4, seed=s)])
def addmm_out_self_t(x):
    torch.addmm(x, x, x.t(), out=x)
    return x


# ---- in-place ops reading themselves ---------------------------------------------------------------
@case(lambda s: [r(4, 4, seed=s)])
def addmm_self_(x):
    x.addmm_(x, x)
    return x


@case(lambda s: [r(2, 4, 4, seed=s)])
def baddbmm_self_(x):
    x.baddbmm_(x, x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def index_add_self_(x):
    x.index_add_(0, torch.tensor([1, 0, 3, 2]), x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def scatter_add_self_(x):
    x.scatter_add_(0, torch.tensor([[1, 0, 3, 2]] * 4), x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def index_copy_self_(x):
    x.index_copy_(0, torch.tensor([1, 0, 3, 2]), x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def masked_scatter_self_(x):
    x.masked_scatter_(x > 0, x)
    return x


@case(lambda s: [r(4, 4, seed=s)])
def mul_t_self_(x):
    x.mul_(x.t())
    return x


@case(lambda s: [r(4, 4, seed=s)])
def lerp_t_self_(x):
    x.lerp_(x.t(), 0.5)
    return x


@case(lambda s: [r(4, 4, seed=s), r(4, 4, seed=s + 1)])
def mm_out_second(x, y):
    torch.mm(x, y, out=y)
    return y


@case(lambda s: [r(4, 4, seed=s)])
def addmv_self_row(x):
    x[0].addmv_(x, x[1])
    return x


@case(lambda s: [r(4, seed=s)])
def cumsum_out_flip(x):
    torch.cumsum(x, 0, out=x.flip(0))
    return x


@case(lambda s: [r(4, 4, seed=s)])
def put_self_(x):
    x.put_(torch.tensor([0, 5, 10]), x[0, :3])
    return x


@case(lambda s: [r(4, 4, seed=s)])
def index_put_self_(x):
    x.index_put_((torch.tensor([0, 2]),), x[1:3])
    return x


@case(lambda s: [r(4, 4, seed=s)])
def setitem_rows_from_self(x):
    x[[0, 2]] = x[[1, 3]]
    return x


@case(lambda s: [r(4, 4, seed=s)])
def setitem_view_from_self_t(x):
    x[:2, :2] = x[:2, :2].t()
    return x


@case(lambda s: [r(4, 4, seed=s)])
def triu_out_self_t(x):
    torch.triu(x, out=x.t())
    return x


@case(lambda s: [r(4, 4, seed=s)])
def diag_embed_into(x):
    torch.linalg.matmul(x, x.t(), out=x)
    return x


@case(lambda s: [r(3, 4, seed=s)])
def std_out_row(x):
    torch.std(x, 0, out=x[0])
    return x


@case(lambda s: [r(3, 4, seed=s)])
def prod_out_row(x):
    torch.prod(x, 0, out=x[0])
    return x


@case(lambda s: [r(3, 4, seed=s)])
def amax_out_row(x):
    torch.amax(x, 0, out=x[0])
    return x


@case(lambda s: [r(3, 4, seed=s)])
def logsumexp_out_row(x):
    torch.logsumexp(x, 0, out=x[0])
    return x


@case(lambda s: [r(3, 4, seed=s)])
def norm_out_row(x):
    torch.linalg.vector_norm(x, dim=0, out=x[0])
    return x


@case(lambda s: [r(3, 4, seed=s)])
def sum_out_row_dynamic_like(x):
    torch.sum(x[1:], 0, out=x[0])
    return x


# ---- inference tensors, views as inputs of resize/set -----------------------------------------------
def _inf(s):
    with torch.inference_mode():
        return [r(3, 4, seed=s), torch.zeros(3, 4)]


@case(_inf)
def inference_out_raises(x, c):
    torch.add(x, 1, out=c)
    return c


@case(_inf)
def inference_t_(x, c):
    x.t_()
    return x * 2


@case(_inf)
def inference_resize_(x, c):
    x.resize_(2, 2)
    return x * 2


@case(_inf)
def inference_add_raises(x, c):
    x.add_(1)
    return x


@case(lambda s: [r(4, 4, seed=s)[1:]])
def view_input_resize_shrink(x):
    x.resize_(2, 2)
    return x + 1


@case(lambda s: [r(4, 4, seed=s)[1:]])
def view_input_resize_grow(x):
    x.resize_(5, 4)
    x.fill_(1)
    return x + 1


@case(lambda s: [r(4, 4, seed=s)[1:], r(6, seed=s)])
def view_input_set_(x, y):
    x.set_(y)
    return x + 1


@case(lambda s: [r(4, 4, seed=s).requires_grad_()[1:]])
def nonleaf_view_t_(x):
    x.t_()
    return x * 2


@case(lambda s: [r(4, 4, seed=s).requires_grad_()[1:]])
def nonleaf_view_unsqueeze_ret(x):
    x.unsqueeze_(0)
    return x


@case(lambda s: [r(4, 4, seed=s).requires_grad_() * 1])
def nonleaf_t_ret(x):
    x.t_()
    return x


@case(lambda s: [r(4, 4, seed=s).requires_grad_() * 1])
def nonleaf_as_strided_ret(x):
    x.as_strided_((2, 2), (1, 4), 1)
    return x


@case(lambda s: [r(4, 4, seed=s).requires_grad_() * 1])
def nonleaf_as_strided_mul(x):
    x.as_strided_((2, 2), (1, 4), 1)
    return x * 2


# ---- writes reading another input that shares their memory -------------------------------------
def _row_of(s):
    b = r(3, 4, seed=s)
    return [b, b[0]]


@case(_row_of)
def sum_into_row_input(x, y):
    torch.sum(x, 0, out=y)
    return x


@case(_same_twice)
def mm_out_same_input(a, b):
    torch.mm(a[:, :3], a[:3, :3], out=b[:, :3])
    return a


def _sq_twice(s):
    x = r(4, 4, seed=s)
    return [x, x]


@case(_sq_twice)
def addmm_same_input(a, b):
    a.addmm_(b, b)
    return a


@case(_sq_twice)
def mm_out_same_input_sq(a, b):
    torch.mm(a, a, out=b)
    return b


@case(_sq_twice)
def block_t_two_inputs(a, b):
    a[:2, :2] = b[:2, :2].t()
    return a


@case(_sq_twice)
def masked_scatter_two_inputs(a, b):
    a.masked_scatter_(b > 0, b)
    return a


# ---- out= of another dtype, per op family ---------------------------------------------------------
def _dt(op, xdt=torch.float32, odt=torch.float64, oshape=(3, 4), ins=1):
    def fn(*a):
        *xs, c = a
        op(*xs, c)
        return c

    def make(s):
        xs = [
            r(3, 4, seed=s + k).to(xdt)
            if xdt != torch.int64
            else torch.randint(-5, 6, (3, 4), generator=torch.Generator().manual_seed(s + k))
            for k in range(ins)
        ]
        return [*xs, torch.zeros(oshape, dtype=odt)]

    return fn, make


for _name, _spec in {
    "sum_int_into_float": (lambda x, c: torch.sum(x, 0, out=c), torch.int64, torch.float32, (4,)),
    "sum_float_into_int": (lambda x, c: torch.sum(x, 0, out=c), torch.float32, torch.int64, (4,)),
    "mean_into_f16": (lambda x, c: torch.mean(x, 0, out=c), torch.float32, torch.float16, (4,)),
    "mean_into_f64": (lambda x, c: torch.mean(x, 0, out=c), torch.float32, torch.float64, (4,)),
    "cumsum_int_into_float": (lambda x, c: torch.cumsum(x, 1, out=c), torch.int64, torch.float32),
    "cumsum_float_into_int": (lambda x, c: torch.cumsum(x, 1, out=c), torch.float32, torch.int64),
    "cat_into_f64": (lambda x, c: torch.cat([x, x], out=c), torch.float32, torch.float64, (6, 4)),
    "cat_into_int": (lambda x, c: torch.cat([x, x], out=c), torch.float32, torch.int64, (6, 4)),
    "cat_int_into_float": (
        lambda x, c: torch.cat([x, x], out=c),
        torch.int64,
        torch.float32,
        (6, 4),
    ),
    "stack_into_bool": (
        lambda x, c: torch.stack([x, x], out=c),
        torch.float32,
        torch.bool,
        (2, 3, 4),
    ),
    "mm_into_f64": (lambda x, c: torch.mm(x, x.t(), out=c), torch.float32, torch.float64, (3, 3)),
    "argmax_into_int32": (lambda x, c: torch.argmax(x, 0, out=c), torch.float32, torch.int32, (4,)),
    "where_into_int": (lambda x, c: torch.where(x > 0, x, -x, out=c), torch.float32, torch.int64),
    "where_int_into_float": (
        lambda x, c: torch.where(x > 0, x, -x, out=c),
        torch.int64,
        torch.float32,
    ),
    "neg_into_f64": (lambda x, c: torch.neg(x, out=c), torch.float32, torch.float64),
    "abs_int_into_float": (lambda x, c: torch.abs(x, out=c), torch.int64, torch.float32),
    "sqrt_int_into_float": (lambda x, c: torch.sqrt(x.abs(), out=c), torch.int64, torch.float32),
    "sqrt_int_into_int": (lambda x, c: torch.sqrt(x.abs(), out=c), torch.int64, torch.int64),
    "floor_into_int": (lambda x, c: torch.floor(x, out=c), torch.float32, torch.int64),
    "eq_into_float": (lambda x, c: torch.eq(x, 0.5, out=c), torch.float32, torch.float32),
    "eq_into_int": (lambda x, c: torch.eq(x, 0.5, out=c), torch.float32, torch.int64),
    "clamp_int_into_float": (lambda x, c: torch.clamp(x, -1, 1, out=c), torch.int64, torch.float32),
    "clamp_float_into_int": (lambda x, c: torch.clamp(x, -1, 1, out=c), torch.float32, torch.int64),
    "amax_into_f64": (lambda x, c: torch.amax(x, 0, out=c), torch.float32, torch.float64, (4,)),
    "prod_int_into_float": (lambda x, c: torch.prod(x, 0, out=c), torch.int64, torch.float32, (4,)),
    "softmax_into_f64": (lambda x, c: torch.softmax(x, 1, out=c), torch.float32, torch.float64),
    "logsumexp_into_f64": (
        lambda x, c: torch.logsumexp(x, 1, out=c),
        torch.float32,
        torch.float64,
        (3,),
    ),
    "logsumexp_int_into_float": (
        lambda x, c: torch.logsumexp(x, 1, out=c),
        torch.int64,
        torch.float32,
        (3,),
    ),
    "norm_into_f64": (
        lambda x, c: torch.linalg.vector_norm(x, dim=1, out=c),
        torch.float32,
        torch.float64,
        (3,),
    ),
    "var_into_f64": (lambda x, c: torch.var(x, 1, out=c), torch.float32, torch.float64, (3,)),
    "index_select_into_f64": (
        lambda x, c: torch.index_select(x, 0, torch.tensor([1, 0]), out=c),
        torch.float32,
        torch.float64,
        (2, 4),
    ),
    "gather_into_f64": (
        lambda x, c: torch.gather(x, 1, torch.zeros(3, 2, dtype=torch.long), out=c),
        torch.float32,
        torch.float64,
        (3, 2),
    ),
    "matmul_into_bf16": (
        lambda x, c: torch.matmul(x, x.t(), out=c),
        torch.float32,
        torch.bfloat16,
        (3, 3),
    ),
    "add_int_float_into_int": (lambda x, c: torch.add(x, 0.5, out=c), torch.int64, torch.int64),
    "mul_int_into_f16": (lambda x, c: torch.mul(x, 3, out=c), torch.int64, torch.float16),
    "pow_int_into_float": (lambda x, c: torch.pow(x, 2, out=c), torch.int64, torch.float32),
    "remainder_into_int": (lambda x, c: torch.remainder(x, 2, out=c), torch.float32, torch.int64),
    "sign_into_int": (lambda x, c: torch.sign(x, out=c), torch.float32, torch.int64),
    "round_into_f64": (lambda x, c: torch.round(x, out=c), torch.float32, torch.float64),
    "tril_into_f64": (lambda x, c: torch.tril(x, out=c), torch.float32, torch.float64),
    "cummax_vals_f64": (
        lambda x, c: torch.cummax(x, 1, out=(c, torch.zeros(3, 4, dtype=torch.long))),
        torch.float32,
        torch.float64,
    ),
    "sort_vals_f64": (
        lambda x, c: torch.sort(x, 1, out=(c, torch.zeros(3, 4, dtype=torch.long))),
        torch.float32,
        torch.float64,
    ),
    "max_vals_f64": (
        lambda x, c: torch.max(x, 1, out=(c, torch.zeros(3, dtype=torch.long))),
        torch.float32,
        torch.float64,
        (3,),
    ),
    "topk_vals_f64": (
        lambda x, c: torch.topk(x, 2, out=(c, torch.zeros(3, 2, dtype=torch.long))),
        torch.float32,
        torch.float64,
        (3, 2),
    ),
}.items():
    _fn, _make = _dt(*_spec)
    CASES["dt_" + _name] = (_fn, _make)


@case(_row_of)
def max_into_row_input_raises(x, y):
    torch.max(x, 0, out=(y, _li(4)))
    return x


@case(_row_of)
def sort_into_row_input(x, y):
    torch.sort(x[1], 0, out=(y, _li(4)))
    return x


@case(_sq_twice)
def cummax_into_other_input_t(a, b):
    torch.cummax(a, 0, out=(b.t(), _li(4, 4)))
    return a


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
