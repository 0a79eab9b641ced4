"""Probe writes and in-place semantics as users write them, against eager PyTorch: masked
writes (``x[m] = v`` with scalars, 0-d, 1-d and broadcast values, masks of lower rank, all
False/True, ``+=``), masked_fill_/masked_scatter_/where(out=), integer and tensor index writes
(duplicates, negative indices, index_put_ accumulate, mixed bool/int indices, index_add_,
index_copy_, scatter_/scatter_add_/scatter_reduce_ with include_self both ways, put_,
index_fill_), writes through views, aliased arguments, module buffers and parameters under
no_grad, in-place dtype rules and broadcasting errors, ``out=`` of the wrong dtype/shape, the
identity of returned inputs, writes in loops, copy_/zero_/fill_ of a 0-d tensor.

    PYTHONPATH=. python scripts/probe_writes26.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_writes26.py   # torch's own differences

A case is ``f(*args)`` called twice (a miss, then a hit) on fresh arguments; recorded: its
output (dtype, shape, strides, version, values) or its error (type, message start), the
arguments after the call (values and versions), and which outputs are the arguments
themselves or share their memory.

Session 26: 277 cases, 266 ok; fixed: writes through ``unfold`` windows with gaps zeroed the gaps (now
run in eager). Left: the 11 ``TorchRuntimeError`` DIFFs (``int += float``, ``x.add_(y)`` that
would enlarge ``x``, ``out=`` of a wrong dtype, ``copy_``/setitem of unbroadcastable shapes,
``masked_fill_`` of a larger mask) are Dynamo's fake run raising its own words while tracing,
before any backend (the same with ``PROBE_BACKEND=aot_eager``); the type is a RuntimeError as
eager's.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
from torch import nn

import torch2xla  # noqa: F401  (registers the backend)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, r, ri, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}


def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            tuple(v.stride()),
            v._version,
            v.requires_grad,
            v.detach().clone(),
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
        names = ("dtype", "shape", "stride", "version", "requires_grad")
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


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def identity(out, args):
    """For each output tensor: the index of the argument it is, else -1; and the arguments
    whose memory it shares."""
    targs = [a for a in args if isinstance(a, torch.Tensor)]
    res = []
    for o in _tensors(out):
        is_ = next((i for i, a in enumerate(targs) if o is a), -1)
        sh = [
            i
            for i, a in enumerate(targs)
            if o.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
        ]
        res.append((is_, tuple(sh)))
    return res


def case(make, calls=2, dynamic=None):
    """Register ``f`` as a case, called ``calls`` times on ``make()``'s arguments."""

    def deco(f):
        def sc(C, rec):
            cf = C(f, dynamic=dynamic) if dynamic is not None else C(f)
            for call in range(calls):
                args = make() if call == 0 or not dynamic else make(call)
                try:
                    out = cf(*args)
                except Exception as e:  # noqa: BLE001  (the error is an observation)
                    rec(f"err {call}", e)
                    rec(f"args {call}", list(args))
                    continue
                rec(f"out {call}", out)
                rec(f"args {call}", list(args))
                rec(f"identity {call}", identity(out, args))

        CASES[f.__name__] = sc
        return f

    return deco


def _pair(t, views):
    return views(t)


X = lambda: (r(4, 5),)
X3 = lambda: (r(2, 3, 4),)
I = lambda: (ri(4, 5),)


# ============================================================================================
# masked writes
@case(X)
def mask_scalar(x):
    x[x > 0] = 1.5
    return x


@case(X)
def mask_scalar_ret_none(x):
    x[x > 0] = 0


@case(X)
def mask_int_scalar_into_float(x):
    x[x < 0] = 0
    return x.sum()


@case(I)
def mask_float_scalar_into_int(x):
    x[x > 0] = 2.7
    return x


@case(lambda: (r(4, 5), torch.tensor(3.0)))
def mask_0d_tensor(x, v):
    x[x > 0] = v
    return x


@case(lambda: (r(4, 5), torch.tensor(3.0, dtype=torch.float64)))
def mask_0d_f64_into_f32(x, v):
    x[x > 0] = v
    return x


@case(lambda: (ri(4, 5), torch.tensor(3.7)))
def mask_0d_float_into_int(x, v):
    x[x > 0] = v
    return x


@case(X)
def mask_1d_count(x):
    m = x > 0
    x[m] = torch.arange(int(m.sum()), dtype=x.dtype)
    return x


@case(lambda: (r(4, 5), torch.arange(10.0)))
def mask_1d_count_static(x, v):
    m = torch.zeros(4, 5, dtype=torch.bool)
    m[0] = True
    m[2] = True
    x[m] = v
    return x


@case(lambda: (r(4, 5), torch.arange(10.0)))
def mask_1d_count_static_input_mask(x, v):
    m = torch.arange(20).view(4, 5) % 2 == 0
    x[m] = v
    return x


@case(lambda: (r(4, 5), r(1)))
def mask_broadcast_1(x, v):
    x[x > 0] = v
    return x


@case(lambda: (r(4, 5), r(5), torch.tensor([True, False, True, False])))
def mask_row_lower_rank(x, row, m):
    x[m] = row
    return x


@case(lambda: (r(4, 5), torch.tensor([True, False, True, False])))
def mask_row_lower_rank_scalar(x, m):
    x[m] = -1.0
    return x


@case(lambda: (r(4, 5), r(2, 5), torch.tensor([True, False, True, False])))
def mask_row_lower_rank_full(x, v, m):
    x[m] = v
    return x


@case(lambda: (r(4, 5), r(3, 5), torch.tensor([True, False, True, False])))
def mask_row_wrong_count(x, v, m):
    x[m] = v
    return x


@case(lambda: (r(4, 5), r(4), torch.tensor([True, False, True, False, True])))
def mask_col(x, v, m):
    x[:, m] = v.unsqueeze(1)
    return x


@case(X)
def mask_all_false(x):
    x[x > 100] = 7.0
    return x


@case(X)
def mask_all_true(x):
    x[x > -100] = 7.0
    return x


@case(lambda: (r(4, 5), r(0)))
def mask_all_false_empty_value(x, v):
    x[x > 100] = v
    return x


@case(X)
def mask_iadd(x):
    x[x > 0] += 1
    return x


@case(X)
def mask_mul_self(x):
    m = x > 0
    x[m] = x[m] * 2
    return x


@case(X)
def mask_on_clone(x):
    y = x.clone()
    y[y < 0] = 0
    return y


@case(X)
def mask_on_new_tensor(x):
    y = torch.zeros_like(x)
    y[x > 0] = x[x > 0]
    return y


@case(lambda: (r(4, 5), r(4, 5)))
def mask_other_tensor_values(x, y):
    m = y > 0
    x[m] = y[m]
    return x


@case(X3)
def mask_3d_2d(x):
    m = x[..., 0] > 0
    x[m] = 0.0
    return x


@case(X3)
def mask_3d_2d_row(x):
    m = x[..., 0] > 0
    x[m] = torch.arange(4.0)
    return x


@case(X)
def masked_fill_(x):
    return x.masked_fill_(x > 0, 2.0)


@case(lambda: (r(4, 5), torch.tensor(9.0)))
def masked_fill_0d(x, v):
    return x.masked_fill_(x > 0, v)


@case(lambda: (r(4, 5), torch.tensor([True, False, True, False, False])))
def masked_fill_broadcast_mask(x, m):
    x.masked_fill_(m, -3.0)
    return x


@case(lambda: (r(4, 5), torch.tensor([[True], [False], [True], [False]])))
def masked_fill_col_mask(x, m):
    x.masked_fill_(m, -3.0)
    return x


@case(lambda: (r(5), torch.zeros(4, 5, dtype=torch.bool)))
def masked_fill_mask_bigger(x, m):
    x.masked_fill_(m, 1.0)
    return x


@case(lambda: (r(4, 5), torch.ones(4, 5, dtype=torch.uint8)))
def masked_fill_uint8_mask(x, m):
    x.masked_fill_(m, 1.0)
    return x


@case(lambda: (ri(4, 5), torch.tensor(2.5)))
def masked_fill_int_float_0d(x, v):
    x.masked_fill_(x > 0, v)
    return x


@case(lambda: (ri(4, 5),))
def masked_fill_int_float_scalar(x):
    x.masked_fill_(x > 0, 2.5)
    return x


@case(lambda: (r(4, 5), torch.arange(20.0)))
def masked_scatter_(x, src):
    return x.masked_scatter_(x > 0, src)


@case(lambda: (r(4, 5), torch.arange(2.0)))
def masked_scatter_short_src(x, src):
    return x.masked_scatter_(x > -100, src)


@case(lambda: (r(4, 5), r(4, 5)))
def where_out(x, y):
    out = torch.empty(4, 5)
    torch.where(x > 0, x, y, out=out)
    return out


@case(lambda: (r(4, 5), r(4, 5)))
def where_out_into_input(x, y):
    torch.where(x > 0, x, y, out=y)
    return y


@case(X)
def where_assign(x):
    x.copy_(torch.where(x > 0, x, torch.zeros_like(x)))
    return x


@case(lambda: (r(4, 5), r(4, 5)))
def where_out_wrong_dtype(x, y):
    out = torch.empty(4, 5, dtype=torch.int64)
    return torch.where(x > 0, x, y, out=out)


# ============================================================================================
# integer / tensor index writes
@case(lambda: (r(6), torch.tensor([1, 1, 3]), torch.tensor([10.0, 20.0, 30.0])))
def index_dup_put(x, idx, v):
    x[idx] = v
    return x


@case(lambda: (r(6), torch.tensor([1, 1, 3])))
def index_dup_scalar(x, idx):
    x[idx] = 5.0
    return x


@case(lambda: (r(6), torch.tensor([-1, 0, -3])))
def index_negative(x, idx):
    x[idx] = 5.0
    return x


@case(lambda: (r(6), torch.tensor([-1, 0, -3]), torch.tensor([1.0, 2.0, 3.0])))
def index_negative_values(x, idx, v):
    x[idx] = v
    return x


@case(lambda: (r(6), torch.tensor([1, 1, 3, 1]), torch.tensor([1.0, 2.0, 3.0, 4.0])))
def index_put_accumulate_dup(x, idx, v):
    return x.index_put_((idx,), v, accumulate=True)


@case(lambda: (ri(6), torch.tensor([1, 1, 3, -1]), torch.tensor([1, 2, 3, 4])))
def index_put_accumulate_int(x, idx, v):
    return x.index_put_((idx,), v, accumulate=True)


@case(lambda: (r(6), torch.tensor([1, 7])))
def index_out_of_range(x, idx):
    x[idx] = 1.0
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2])))
def index_cols(x, idx):
    x[:, idx] = 0.0
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2]), r(4, 2)))
def index_cols_values(x, idx, v):
    x[:, idx] = v
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2, 3]), torch.tensor([1, 1, 4])))
def index_pairs(x, i, j):
    x[i, j] = torch.tensor([7.0, 8.0, 9.0])
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2, 3]), torch.tensor([1, 1, 4])))
def index_pairs_iadd(x, i, j):
    x[i, j] += 1
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 0]), torch.tensor([1, 1])))
def index_pairs_dup_iadd(x, i, j):
    x[i, j] += 1  # eager: one add (gather, add, scatter)
    return x


@case(X3)
def index_ellipsis(x):
    x[..., 0] = 3.0
    return x


@case(X3)
def index_none(x):
    x[None, 0] = 1.0
    return x


@case(X3)
def index_none_mid(x):
    x[:, None, 1] = 2.0
    return x


@case(lambda: (r(4, 5), torch.tensor([True, False, True, True]), torch.tensor([0, 4, 1])))
def index_bool_and_int(x, m, i):
    x[m, i] = -5.0
    return x


@case(lambda: (r(4, 5), torch.tensor([True, False, True, False, True])))
def index_int_and_bool(x, m):
    x[1, m] = -5.0
    return x


@case(lambda: (r(4, 5), torch.tensor([1, 3]), r(2, 5)))
def index_add_(x, i, v):
    return x.index_add_(0, i, v, alpha=2)


@case(lambda: (r(4, 5), torch.tensor([1, 1]), r(2, 5)))
def index_add_dup(x, i, v):
    return x.index_add_(0, i, v)


@case(lambda: (ri(4, 5), torch.tensor([1, 1]), ri(2, 5)))
def index_add_int(x, i, v):
    return x.index_add_(0, i, v)


@case(lambda: (r(4, 5), torch.tensor([3, 0]), r(4, 2)))
def index_copy_(x, i, v):
    return x.index_copy_(1, i, v)


@case(lambda: (r(4, 5), torch.tensor([3, 3]), r(4, 2)))
def index_copy_dup(x, i, v):
    return x.index_copy_(1, i, v)


@case(lambda: (r(4, 5), torch.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]]), r(2, 5)))
def scatter_(x, i, s):
    return x.scatter_(0, i, s)


@case(lambda: (r(4, 5), torch.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]])))
def scatter_value(x, i):
    return x.scatter_(0, i, 9.0)


@case(lambda: (r(4, 5), torch.tensor([[0, 1, 2, 0, 0], [0, 1, 2, 3, 3]]), r(2, 5)))
def scatter_add_(x, i, s):
    return x.scatter_add_(0, i, s)


def _sr(reduce, include_self):
    def f(x, i, s):
        return x.scatter_reduce_(0, i, s, reduce=reduce, include_self=include_self)

    f.__name__ = f"scatter_reduce_{reduce}_{include_self}"
    return case(lambda: (r(4, 5), torch.tensor([[0, 1, 2, 0, 0], [0, 1, 2, 3, 3]]), r(2, 5)))(f)


for _red in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        _sr(_red, _inc)


def _sri(reduce, include_self):
    def f(x, i, s):
        return x.scatter_reduce_(0, i, s, reduce=reduce, include_self=include_self)

    f.__name__ = f"scatter_reduce_int_{reduce}_{include_self}"
    return case(lambda: (ri(4, 5), torch.tensor([[0, 1, 2, 0, 0], [0, 1, 2, 3, 3]]), ri(2, 5)))(f)


for _red in ("sum", "mean", "amax"):
    for _inc in (True, False):
        _sri(_red, _inc)


@case(lambda: (r(4, 5), torch.tensor([0, 7, -1]), torch.tensor([1.0, 2.0, 3.0])))
def put_(x, i, v):
    return x.put_(i, v)


@case(lambda: (r(4, 5), torch.tensor([0, 7, 7]), torch.tensor([1.0, 2.0, 3.0])))
def put_accumulate(x, i, v):
    return x.put_(i, v, accumulate=True)


@case(lambda: (r(4, 5), torch.tensor([0, 3, -1])))
def index_fill_(x, i):
    return x.index_fill_(1, i, -2.0)


@case(lambda: (r(4, 5), torch.tensor([0, 3]), torch.tensor(4.0)))
def index_fill_0d(x, i, v):
    return x.index_fill_(0, i, v)


# ============================================================================================
# writes through views
@case(X)
def view_flat_write(x):
    x.view(-1)[3] = 100.0
    return x


@case(X)
def t_row_write(x):
    x.t()[0] = 1.0
    return x


@case(X)
def step_slice_iadd(x):
    x[::2] += 1
    return x


@case(X)
def diagonal_fill(x):
    x.diagonal().fill_(0)
    return x


@case(X)
def unsqueeze_add_(x):
    x.unsqueeze(0).add_(1)
    return x


@case(X)
def slice_write_then_read(x):
    x[1:3, 2:] = 0.0
    return x.sum(1)


@case(X)
def slice_write_return_view(x):
    v = x[1:3]
    v.mul_(2)
    return v


@case(X)
def view_returned_then_written(x):
    v = x[1]
    x.add_(1)
    return v


@case(lambda: (r(4, 5),))
def aliased_args_same(x):
    return _two(x, x)


def _two(a, b):
    a.add_(1)
    return b * 2


@case(lambda: _pair(r(4, 5), lambda t: (t, t)))
def aliased_two_args(a, b):
    a.add_(1)
    return b * 2


@case(lambda: _pair(r(4, 5), lambda t: (t, t[0])))
def aliased_arg_and_row(a, b):
    b.mul_(0)
    return a.sum(1)


@case(lambda: _pair(r(4, 5), lambda t: (t, t[0])))
def aliased_arg_and_row_write_both(a, b):
    a.add_(1)
    b.mul_(2)
    return a + 0


@case(lambda: _pair(r(4, 5), lambda t: (t[:, :2], t[:, 1:3])))
def overlapping_views(a, b):
    a.add_(1)
    return b.clone()


@case(X)
def narrow_copy_(x):
    x.narrow(1, 1, 2).copy_(torch.ones(4, 2))
    return x


@case(X)
def view_view_write(x):
    x.view(20).view(4, 5)[:, 0].zero_()
    return x


@case(X)
def transpose_contig_write(x):
    y = x.transpose(0, 1)
    y[1] = y[0]
    return x


@case(X)
def select_copy_from_self(x):
    x[0] = x[1]
    return x


@case(X)
def overlapping_self_copy(x):
    x[1:] = x[:-1].clone()
    return x


@case(X)
def overlapping_self_copy_noclone(x):
    x[1:] = x[:-1]
    return x


@case(X)
def unfold_write(x):
    x.unfold(1, 2, 2).mul_(3)
    return x


@case(X)
def as_strided_write(x):
    x.as_strided((2, 2), (5, 1), 1).fill_(4.0)
    return x


@case(X)
def expand_write_raises(x):
    x[:1].expand(3, 5).add_(1)
    return x


@case(X)
def view_of_returned_written_after(x):
    y = x.add_(1)
    y[0] = 0
    return y


# ============================================================================================
# module buffers, parameters
class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("step", torch.tensor(0))
        self.register_buffer("avg", torch.zeros(5))
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        self.step += 1
        self.avg.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return self.lin(x) * self.step


@case(lambda: (), calls=1)
def module_buffers():
    torch.manual_seed(0)
    m = Counter()
    out = []
    cm = torch.compile(m, backend=BACKEND)
    for i in range(3):
        out.append(cm(r(3, 5, seed=i)).detach())
    return out + [m.step, m.avg]


class NoGradParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x):
        with torch.no_grad():
            self.lin.weight.mul_(0.9)
            self.lin.bias.data.copy_(torch.ones(3))
        return self.lin(x)


@case(lambda: (), calls=1)
def param_no_grad():
    torch.manual_seed(0)
    m = NoGradParam()
    cm = torch.compile(m, backend=BACKEND)
    outs = [cm(r(2, 5, seed=i)) for i in range(2)]
    return outs + [m.lin.weight.detach(), m.lin.bias.detach()]


@case(lambda: (), calls=1)
def param_data_copy():
    torch.manual_seed(0)
    lin = nn.Linear(4, 4)
    ema = nn.Linear(4, 4)

    def update():
        for p, q in zip(ema.parameters(), lin.parameters()):
            p.data.copy_(p.data * 0.5 + q.data * 0.5)

    cu = torch.compile(update, backend=BACKEND)
    cu()
    cu()
    return [p.detach() for p in ema.parameters()]


@case(lambda: (), calls=1)
def bn_running_stats():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(5)
    cb = torch.compile(bn, backend=BACKEND)
    outs = [cb(r(4, 5, seed=i)).detach() for i in range(2)]
    return outs + [bn.running_mean, bn.running_var, bn.num_batches_tracked]


# ============================================================================================
# dtype rules, broadcasting and out=
@case(lambda: (ri(4, 5), r(4, 5)))
def int_iadd_float_raises(x, y):
    x += y
    return x


@case(lambda: (ri(4, 5),))
def int_iadd_float_scalar_raises(x):
    x += 1.5
    return x


@case(lambda: (ri(4, 5),))
def int_imul_float_scalar(x):
    x *= 2.0
    return x


@case(lambda: (ri(4, 5),))
def int_idiv_raises(x):
    x /= 2
    return x


@case(lambda: (ri(4, 5),))
def int_ifloordiv(x):
    x //= 2
    return x


@case(lambda: (r(4, 5).half(), r(4, 5)))
def half_iadd_float(x, y):
    x += y
    return x


@case(lambda: (r(4, 5), r(4, 5).double()))
def float_iadd_double(x, y):
    x.add_(y)
    return x


@case(lambda: (torch.ones(4, 5, dtype=torch.bool), torch.ones(4, 5, dtype=torch.bool)))
def bool_iadd(x, y):
    x += y
    return x


@case(lambda: (torch.ones(4, 5, dtype=torch.bool),))
def bool_iadd_int_raises(x):
    x += 2
    return x


@case(lambda: (r(5), r(4, 5)))
def broadcast_enlarge_raises(x, y):
    return x.add_(y)


@case(lambda: (r(4, 1), r(4, 5)))
def broadcast_enlarge_raises2(x, y):
    x.mul_(y)
    return x


@case(lambda: (r(4, 5), r(5)))
def broadcast_ok(x, y):
    return x.add_(y)


@case(lambda: (r(4, 5), r(4, 5)))
def out_wrong_shape_resize(x, y):
    out = torch.empty(3)
    torch.add(x, y, out=out)
    return out


@case(lambda: (r(4, 5), r(4, 5), torch.empty(3)))
def out_input_wrong_shape_resize(x, y, out):
    torch.add(x, y, out=out)
    return out


@case(lambda: (r(4, 5), r(4, 5), torch.empty(4, 5, dtype=torch.int64)))
def out_wrong_dtype_raises(x, y, out):
    return torch.add(x, y, out=out)


@case(lambda: (ri(4, 5), ri(4, 5), torch.empty(4, 5)))
def out_int_into_float(x, y, out):
    return torch.add(x, y, out=out)


@case(lambda: (r(4, 5), torch.empty(4, 5)))
def out_is_returned(x, out):
    return torch.mul(x, 2, out=out)


@case(lambda: (r(4, 5), torch.empty(5)))
def out_sum_dim(x, out):
    return torch.sum(x, 0, out=out)


@case(lambda: (r(4, 5), torch.empty(0)))
def out_empty_resize(x, out):
    torch.exp(x, out=out)
    return out


# ============================================================================================
# identity of returned inputs, views
@case(X)
def ret_add_(x):
    return x.add_(1)


@case(X)
def ret_chain(x):
    return x.mul_(2).add_(1).clamp_(-1, 1)


@case(X)
def ret_iadd(x):
    x += 1
    return x


@case(X)
def ret_setitem_view(x):
    x[0] = 1.0
    return x[0]


@case(X)
def ret_two_same(x):
    y = x.add_(1)
    return y, x


@case(X)
def ret_t_(x):
    return x.t_()


@case(X)
def ret_unsqueeze_(x):
    return x.unsqueeze_(0)


# ============================================================================================
# loops, new tensors, copy_, zero_, fill_
@case(X)
def loop_rows(x):
    for i in range(x.shape[0]):
        x[i] = x[i] * (i + 1)
    return x


@case(X)
def loop_accumulate(x):
    acc = torch.zeros(5)
    for i in range(4):
        acc += x[i]
        x[i] = acc
    return acc


@case(X)
def loop_cumsum_inplace(x):
    for i in range(1, x.shape[1]):
        x[:, i] += x[:, i - 1]
    return x


@case(X)
def new_tensor_written_returned(x):
    out = torch.empty(4, 5)
    out[:2] = x[:2]
    out[2:] = 0
    return out


@case(X)
def new_tensor_rows_loop(x):
    out = x.new_zeros(3, 5)
    for i in range(3):
        out[i] = x[i] + x[i + 1]
    return out


@case(lambda: (r(4, 5), r(5)))
def copy_broadcast(x, row):
    return x.copy_(row)


@case(lambda: (r(4, 5), r(3, 5)))
def copy_broadcast_raises(x, row):
    return x.copy_(row)


@case(lambda: (r(4, 5), ri(4, 5)))
def copy_int_into_float(x, y):
    return x.copy_(y)


@case(lambda: (ri(4, 5), r(4, 5)))
def copy_float_into_int(x, y):
    return x.copy_(y)


@case(lambda: (r(4, 5), torch.tensor(2.0)))
def copy_0d(x, y):
    return x.copy_(y)


@case(X)
def zero_(x):
    return x.zero_()


@case(X)
def zero_slice(x):
    x[:, 1:3].zero_()
    return x


@case(lambda: (r(4, 5), torch.tensor(7.5)))
def fill_0d(x, v):
    return x.fill_(v)


@case(lambda: (ri(4, 5), torch.tensor(7.5)))
def fill_0d_float_into_int(x, v):
    return x.fill_(v)


@case(lambda: (r(4, 5), torch.tensor([7.5])))
def fill_1d_raises(x, v):
    return x.fill_(v)


@case(lambda: (r(4, 5), torch.tensor(7)))
def fill_int0d_into_float(x, v):
    return x.fill_(v)


@case(lambda: (r(4, 5), torch.tensor(7.0, dtype=torch.float64)))
def setitem_0d_f64(x, v):
    x[0, 0] = v
    return x


@case(lambda: (r(4, 5), r(5)))
def setitem_row(x, v):
    x[2] = v
    return x


@case(lambda: (r(4, 5), r(3)))
def setitem_wrong_shape_raises(x, v):
    x[2] = v
    return x


@case(lambda: (r(4, 5), torch.tensor(1)))
def setitem_0d_index(x, i):
    x[i] = 0.0
    return x


@case(lambda: (r(4, 5), torch.tensor(1)))
def setitem_0d_index_iadd(x, i):
    x[i] += 1.0
    return x


@case(lambda: (r(4, 5), torch.tensor([2])))
def setitem_1elem_index(x, i):
    x[i] = 9.0
    return x


@case(X)
def clamp_inplace_slice(x):
    x[:, :2].clamp_(min=0)
    return x


@case(X)
def relu_inplace(x):
    return torch.relu_(x)


@case(X)
def functional_relu_inplace(x):
    return torch.nn.functional.relu(x, inplace=True)


@case(X)
def dropout_eval_inplace(x):
    return torch.nn.functional.dropout(x, 0.5, training=False, inplace=True)


@case(lambda: (r(4, 5), r(4, 5)))
def addcmul_(x, y):
    return x.addcmul_(y, y, value=0.5)


@case(lambda: (r(4, 5), r(4, 5)))
def lerp_(x, y):
    return x.lerp_(y, 0.3)


@case(lambda: (r(4, 5),))
def swap_rows(x):
    x[[0, 1]] = x[[1, 0]]
    return x


@case(lambda: (r(4, 5),))
def sort_inplace_rows(x):
    x[:] = x.sort(1).values
    return x


@case(lambda: (r(4, 5),))
def setitem_full_slice_scalar(x):
    x[:] = 3
    return x


@case(lambda: (r(4, 5),))
def setitem_ellipsis_tensor(x):
    x[...] = torch.arange(5.0)
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2])))
def index_tensor_iadd_tensor(x, i):
    x[i] += torch.ones(2, 5)
    return x


@case(lambda: (r(4, 5), torch.tensor([[0, 1], [2, 3]])))
def index_2d_idx(x, i):
    x[i] = 0.5
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2])))
def index_then_slice(x, i):
    x[i, 1:3] = -1.0
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2])))
def slice_then_index(x, i):
    x[1:, i] = -1.0
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2], dtype=torch.int32)))
def index_int32(x, i):
    x[i] = 1.0
    return x


@case(lambda: (r(4, 5), torch.tensor([0, 2], dtype=torch.uint8)))
def index_uint8_is_mask(x, i):
    x[i] = 1.0
    return x


@case(lambda: (r(4, 5), torch.tensor([1.0])))
def index_float_raises(x, i):
    x[i] = 1.0
    return x


@case(lambda: (r(4, 5),))
def index_list(x):
    x[[0, 3], [1, 2]] = torch.tensor([5.0, 6.0])
    return x


@case(lambda: (r(4, 5), torch.tensor([True, False, True, True])))
def mask_then_iadd_tensor(x, m):
    x[m] += torch.arange(5.0)
    return x


@case(lambda: (r(4, 5),))
def mask_setitem_then_return_mask_count(x):
    m = x > 0
    x[m] = 0
    return m.sum(), x


@case(lambda: (r(4, 5).bfloat16(),))
def bf16_mask_scalar(x):
    x[x > 0] = 1.1
    return x


@case(lambda: (r(4, 5), r(4, 5)))
def index_put_bool_tensor_value(x, y):
    return x.index_put_((x > 0,), y[x > 0])


@case(lambda: (r(4, 5),))
def index_put_bool_accumulate(x):
    return x.index_put_((x > 0,), torch.tensor(1.0), accumulate=True)


@case(lambda: (r(4, 5),))
def masked_fill_then_view(x):
    x.view(-1)[x.view(-1) > 0] = 0
    return x


@case(lambda: (r(4, 5),))
def mask_write_into_t(x):
    xt = x.t()
    xt[xt > 0] = 0
    return x


@case(lambda: (r(4, 5),))
def mask_write_into_slice(x):
    s = x[1:3]
    s[s > 0] = -9
    return x


@case(lambda: (r(6),))
def setitem_negative_step_raises(x):
    x[torch.tensor([0])] = 1
    return x.flip(0)


# ============================================================================================
# more: value conversions, overflow, grads through writes, containers, globals
@case(lambda: (ri(4, 5, dtype=torch.int32),))
def int32_mask_overflow(x):
    x[x > 0] = 1e10
    return x


@case(lambda: (torch.zeros(4, dtype=torch.uint8),))
def uint8_fill_overflow(x):
    return x.fill_(300)


@case(lambda: (ri(4, 5),))
def int_mask_inf(x):
    x[x > 0] = float("inf")
    return x


@case(lambda: (ri(4, 5),))
def int_masked_fill_nan(x):
    return x.masked_fill_(x > 0, float("nan"))


@case(lambda: (r(4, 5),))
def float_masked_fill_nan(x):
    return x.masked_fill_(x > 0, float("nan"))


@case(lambda: (r(4, 5), ri(2, 5)))
def setitem_int_values_into_float(x, v):
    x[1:3] = v
    return x


@case(lambda: (ri(4, 5), r(2, 5)))
def setitem_float_values_into_int(x, v):
    x[1:3] = v
    return x


@case(lambda: (r(4, 5), torch.tensor([[0], [2]]), torch.tensor([1, 3, 4])))
def index_broadcast_indices(x, i, j):
    x[i, j] = torch.arange(6.0).view(2, 3)
    return x


@case(lambda: (r(4, 5), torch.tensor([[0], [2]]), torch.tensor([1, 3, 4])))
def index_put_functional(x, i, j):
    return torch.index_put(x, (i, j), torch.tensor(1.0)), x


@case(lambda: (r(4, 5), torch.tensor([0, 0, 2]), r(3, 5)))
def index_reduce_prod(x, i, s):
    return x.index_reduce_(0, i, s, "prod", include_self=False)


@case(lambda: (r(4, 5), torch.tensor([0, 0, 2]), r(3, 5)))
def index_reduce_mean(x, i, s):
    return x.index_reduce_(0, i, s, "mean")


@case(lambda: (r(4, 5), torch.tensor([0, 0, 2]), r(3, 5)))
def index_reduce_amax_noself(x, i, s):
    return x.index_reduce_(0, i, s, "amax", include_self=False)


@case(lambda: (r(4, 5),))
def ret_view_add_(x):
    return x[0].add_(1)


@case(lambda: (r(4, 5),))
def data_add_(x):
    x.data.add_(1)
    return x * 2


@case(lambda: (r(4, 4),))
def copy_from_own_transpose(x):
    return x.copy_(x.t())


@case(lambda: (r(4, 5),))
def out_into_row(x):
    torch.add(x[1], 1, out=x[0])
    return x


@case(lambda: (r(4, 5),))
def cumsum_out_self(x):
    return torch.cumsum(x, 0, out=x)


@case(lambda: (r(4, 5),))
def sub_own_mean(x):
    return x.sub_(x.mean(0))


@case(lambda: (r(4, 5),))
def eq_inplace(x):
    return x.eq_(x[0])


@case(lambda: (r(4, 5), r(5)))
def clamp_tensor_min(x, lo):
    return x.clamp_(min=lo)


@case(lambda: ([r(4, 5), r(4, 5)],))
def list_arg_writes(xs):
    for t in xs:
        t.mul_(2)
    return xs[0] + xs[1]


@case(lambda: ({"a": r(4, 5), "b": ri(3)},))
def dict_arg_writes(d):
    d["a"][d["a"] > 0] = 0
    d["b"] += 1
    return d["a"].sum()


GLOBAL = torch.zeros(3)


@case(lambda: (GLOBAL.zero_(), r(3))[1:])
def global_tensor_write(x):
    GLOBAL.add_(x)
    return GLOBAL * 1


class _Holder:
    def __init__(self):
        self.t = torch.zeros(3)


HOLDER = _Holder()


@case(lambda: (HOLDER.t.zero_(), r(3))[1:])
def attr_tensor_write(x):
    HOLDER.t[x > 0] = 1.0
    HOLDER.t += x
    return HOLDER.t.clone()


def _grad_case(f, make):
    def sc(C, rec):
        cf = C(f)
        for call in range(2):
            leaves = make()
            try:
                out = cf(*leaves)
                out.sum().backward()
            except Exception as e:  # noqa: BLE001  (the error is an observation)
                rec(f"err {call}", e)
                continue
            # (versions of outputs with grad and of .grad differ: known, docs/design.md)
            rec(f"out {call}", out.detach().clone())
            rec(f"grads {call}", [a.grad.clone() for a in leaves])

    CASES["grad_" + f.__name__] = sc


def _leaf(*shape, seed=0):
    return r(*shape, seed=seed).requires_grad_()


def g_mask_write(w):
    x = w * 2
    x[x > 0] = 0
    return x


def g_mask_value_grad(w, v):
    x = w * 1
    x[w > 0] = v
    return x


def g_index_write_value(w, v):
    x = w.clone()
    x[torch.tensor([0, 2])] = v
    return x


def g_index_put_acc(w, v):
    x = w * 1
    return x.index_put_((torch.tensor([0, 0, 3]),), v, accumulate=True)


def g_scatter_reduce(w, v):
    x = w * 1
    i = torch.tensor([[0, 1, 2, 0, 0], [0, 1, 2, 3, 3]])
    return x.scatter_reduce(0, i, v, "amax", include_self=False)


def g_masked_fill(w):
    x = w * 1
    return x.masked_fill_(w > 0, 1.0) * w


def g_copy_slice(w, v):
    x = torch.zeros(4, 5)
    x[1:3] = v
    return x * w


def g_diag_write(w):
    x = w * 1
    x.diagonal().mul_(3)
    return x


def g_loop_rows(w):
    x = w * 1
    for i in range(1, 4):
        x[i] = x[i] + x[i - 1]
    return x


def g_index_copy(w, v):
    x = w * 1
    return x.index_copy(0, torch.tensor([3, 1]), v)


def g_masked_scatter(w, v):
    x = w * 1
    return x.masked_scatter(w > 0, v.view(-1))


_grad_case(g_mask_write, lambda: (_leaf(4, 5),))
_grad_case(g_mask_value_grad, lambda: (_leaf(4, 5), torch.tensor(2.0, requires_grad=True)))
_grad_case(g_index_write_value, lambda: (_leaf(4, 5), _leaf(2, 5, seed=1)))
_grad_case(g_index_put_acc, lambda: (_leaf(4, 5), _leaf(3, 5, seed=1)))
_grad_case(g_scatter_reduce, lambda: (_leaf(4, 5), _leaf(2, 5, seed=1)))
_grad_case(g_masked_fill, lambda: (_leaf(4, 5),))
_grad_case(g_copy_slice, lambda: (_leaf(4, 5), _leaf(2, 5, seed=1)))
_grad_case(g_diag_write, lambda: (_leaf(4, 5),))
_grad_case(g_loop_rows, lambda: (_leaf(4, 5),))
_grad_case(g_index_copy, lambda: (_leaf(4, 5), _leaf(2, 5, seed=1)))
_grad_case(g_masked_scatter, lambda: (_leaf(4, 5), _leaf(4, 5, seed=1)))


def _dyn(make_shape):
    def make(call=0):
        return (r(*make_shape(call), seed=call),)

    return make


@case(_dyn(lambda c: (3 + c, 5)), calls=3, dynamic=True)
def dyn_mask_scalar(x):
    x[x > 0] = 1.0
    return x


@case(_dyn(lambda c: (3 + c, 5)), calls=3, dynamic=True)
def dyn_mask_row(x):
    x[x[:, 0] > 0] = torch.arange(5.0)
    return x


@case(_dyn(lambda c: (3 + c, 5)), calls=3, dynamic=True)
def dyn_last_row_write(x):
    x[-1] = 0.0
    x[:, -2:] += 1
    return x


@case(_dyn(lambda c: (3 + c, 5)), calls=3, dynamic=True)
def dyn_index_put_acc(x):
    i = torch.tensor([0, 0, -1])
    return x.index_put_((i,), torch.ones(3, 5), accumulate=True)


@case(_dyn(lambda c: (6 + c, 5)), calls=3, dynamic=True)
def dyn_step_slice(x):
    x[::2] = 0
    return x


@case(_dyn(lambda c: (4, 5 + c)), calls=3, dynamic=True)
def dyn_unfold_write(x):
    x.unfold(1, 2, 2).mul_(3)
    return x


@case(_dyn(lambda c: (3 + c, 5)), calls=3, dynamic=True)
def dyn_scatter_add(x):
    i = torch.zeros(2, 5, dtype=torch.long)
    return x.scatter_add_(0, i, torch.ones(2, 5))


# ============================================================================================
# inputs of other layouts, dtypes and sizes
@case(lambda: (r(5, 4).t(),))
def transposed_input_mask(x):
    x[x > 0] = 0
    return x


@case(lambda: (r(4, 10)[:, ::2],))
def strided_input_index(x):
    x[:, torch.tensor([0, 3])] += 1
    return x


@case(lambda: (r(6, 5)[2:],))
def offset_input_masked_fill(x):
    x.masked_fill_(x < 0, 1.0)
    return x.sum()


@case(lambda: (r(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),))
def channels_last_mask(x):
    x[x > 0] *= 2
    return x


@case(lambda: (r(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),))
def channels_last_slice_write(x):
    x[:, 1] = 0
    return x


@case(lambda: (torch.complex(r(4, 5), r(4, 5, seed=1)),))
def complex_mask(x):
    x[x.real > 0] = 1j
    return x


@case(lambda: (torch.zeros(5, dtype=torch.bool), torch.tensor([1, 3])))
def bool_index_true(m, i):
    m[i] = True
    return m


@case(lambda: (r(()),))
def zero_dim_mask(x):
    x[x > 0] = 1.0
    x[x <= 0] = -1.0
    return x


@case(lambda: (r(0, 5),))
def empty_mask(x):
    x[x > 0] = 1.0
    return x


@case(lambda: (r(4, 5),))
def list_value(x):
    x[0] = torch.tensor([1.0, 2, 3, 4, 5])
    x[1, ...] = 7
    x[:, None, 2] = -1
    return x


@case(lambda: (r(4, 5),))
def int0d_into_float(x):
    x[0] = torch.tensor(5)
    return x


@case(lambda: (r(4, 5),))
def returned_as_two_views(x):
    x.mul_(2)
    return x[0], x[:, 1], x


@case(lambda: (r(4, 5), r(4, 5)))
def write_second_then_read_first(a, b):
    b.copy_(a)
    a.zero_()
    return b


@case(lambda: (r(4, 5),))
def chained_view_index_write(x):
    x[1][x[1] > 0] = 0
    return x


@case(lambda: (r(4, 5),))
def getitem_list_write(x):
    y = x[[0, 1]]  # a copy: writes do not reach x
    y.zero_()
    return x, y


@case(lambda: (r(4, 5),))
def mask_read_copy_write(x):
    y = x[x > 0]  # a copy
    y.zero_()
    return x


@case(lambda: (r(4, 5), torch.tensor([3, 1, 0])))
def sort_by_index_write(x, i):
    x[i] = x[i].sort(1).values
    return x


@case(lambda: (r(4, 5),))
def swap_columns_tuple(x):
    x[:, 0], x[:, 1] = x[:, 1].clone(), x[:, 0].clone()
    return x


@case(lambda: (r(4, 5),))
def swap_columns_aliased(x):
    x[:, 0], x[:, 1] = x[:, 1], x[:, 0]  # (eager: the second sees the first's write)
    return x


@case(lambda: (r(4, 5),))
def mask_write_twice_same_mask(x):
    m = x > 0
    x[m] = 1
    x[~m] = -1
    return x, m


@case(lambda: (r(8),))
def topk_write(x):
    v, i = x.topk(3)
    x[i] = 0
    return x, v


@case(lambda: (r(8),))
def nonzero_write(x):
    x[(x > 0).nonzero(as_tuple=True)] = 5
    return x


@case(lambda: (r(3, 4),))
def argmax_onehot(x):
    out = torch.zeros_like(x)
    out.scatter_(1, x.argmax(1, keepdim=True), 1.0)
    return out


@case(lambda: (r(3, 4),))
def argmax_index_write(x):
    out = torch.zeros_like(x)
    out[torch.arange(3), x.argmax(1)] = 1.0
    return out


@case(lambda: (ri(10, lo=0, hi=4),))
def bincount_like(idx):
    out = torch.zeros(4, dtype=torch.long)
    out.index_add_(0, idx, torch.ones_like(idx))
    return out


@case(lambda: (ri(10, lo=0, hi=4),))
def histogram_by_index_put(idx):
    out = torch.zeros(4)
    out[idx] += 1  # eager: duplicates count once
    return out


# ============================================================================================
# writes autograd sees: leaves, non-leaf inputs, unfold windows with gaps
@case(lambda: (_leaf(4, 5),))
def leaf_write_raises(w):
    w[w > 0] = 0
    return w


@case(lambda: (_leaf(4, 5),))
def leaf_write_no_grad(w):
    with torch.no_grad():
        w[w > 0] = 0
    return w * 2


def _nonleaf_write(C, rec):
    def f(x, m):
        x[m] = 0
        return x.sum(1)

    cf = C(f)
    for call in range(2):
        w = _leaf(4, 5, seed=call)
        x = w * 3
        out = cf(x, w > 0)
        (out.sum() + x.sum()).backward()
        rec(f"x {call}", x.detach().clone())
        rec(f"grad {call}", w.grad.clone())


CASES["nonleaf_input_mask_write_grad"] = _nonleaf_write


@case(X)
def unfold_gap_fill(x):
    x.unfold(1, 2, 3)[:, 0].fill_(-1)
    return x


@case(X)
def unfold_tail_mul(x):
    x.unfold(1, 2, 2).mul_(3)
    return x


@case(X)
def unfold_rows_covered(x):
    u = x.unfold(0, 2, 2)
    u.add_(1)
    return u.sum(), x


@case(X)
def unfold_new_tensor_gap(x):
    y = torch.ones(4, 6)
    y.unfold(1, 2, 3).zero_()
    return y * x.sum()


# ============================================================================================
# writes through other views
@case(lambda: (r(6, 5).t(),))
def as_strided_gap_noncontig(x):
    x.as_strided((2, 2), (2, 6)).fill_(9.0)
    return x


@case(X)
def view_dtype_write(x):
    x.view(torch.int32)[0] = 0
    return x


@case(lambda: (torch.complex(r(4, 5), r(4, 5, seed=1)),))
def view_as_real_write(x):
    torch.view_as_real(x)[..., 1].zero_()
    return x


@case(lambda: (torch.complex(r(4, 5), r(4, 5, seed=1)),))
def real_imag_write(x):
    x.real.mul_(2)
    x.imag[x.imag > 0] = 0
    return x


@case(X)
def unflatten_write(x):
    x.view(20).unflatten(0, (2, 10))[1].fill_(0)
    return x


@case(X)
def split_sizes_write(x):
    a, b = x.split([2, 3], dim=1)
    b.mul_(10)
    a[0] = -1
    return x


@case(X)
def unbind_write(x):
    for i, row in enumerate(x.unbind(0)):
        if i % 2:
            row.zero_()
    return x


@case(X3)
def mT_swapaxes_write(x):
    x.mT[0].fill_(5)
    x.swapaxes(0, 2)[1].add_(1)
    return x


@case(X)
def narrow_negative_write(x):
    x.narrow(1, -2, 2).zero_()
    return x


@case(X)
def diagonal_offset_write(x):
    x.diagonal(offset=1).add_(100)
    x.diagonal(offset=-2).zero_()
    return x


@case(X3)
def diagonal_dims_write(x):
    x.diagonal(dim1=0, dim2=2).fill_(3)
    return x


@case(X)
def select_neg_write(x):
    x.select(1, -1).zero_()
    return x


@case(X)
def flatten_noncontig_write(x):
    y = x.t().flatten()  # a copy
    y.zero_()
    return x, y


@case(X)
def reshape_view_write(x):
    x.reshape(5, 4)[0] = 0
    return x


@case(lambda: (r(5, 4).t(),))
def reshape_copy_write(x):
    x.reshape(20)[0] = 100  # a copy: x keeps its values
    return x


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, compare))
