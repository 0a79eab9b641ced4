"""Probe everyday arithmetic (session 26): user-style functions run eagerly and under
``torch.compile(backend="xla")`` (some with ``dynamic=True``), values compared strictly
(integers and bools bit for bit, floats with NaN positions and zero signs, dtypes, shapes,
errors by type and message start).

    PYTHONPATH=. python scripts/probe_values26.py [substring ...]
"""

from __future__ import annotations

import functools
import math
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F

import torch2xla  # noqa: F401

warnings.filterwarnings("ignore")
CASES = {}


def case(*args, dynamic=False, name=None, ulps=4):
    def deco(fn):
        CASES[name or fn.__name__] = (fn, args, dynamic, ulps)
        return fn

    return deco


def flat(v):
    if isinstance(v, (list, tuple)):
        out = []
        for x in v:
            out += flat(x)
        return out
    return [v]


def cmp1(g, e, ulps):
    if isinstance(e, torch.Tensor):
        if not isinstance(g, torch.Tensor):
            return f"type {type(g)} vs tensor"
        if g.dtype != e.dtype:
            return f"dtype {g.dtype} vs {e.dtype}"
        if g.shape != e.shape:
            return f"shape {tuple(g.shape)} vs {tuple(e.shape)}"
        if e.is_floating_point():
            gd, ed = g.double(), e.double()
            if not torch.equal(gd.isnan(), ed.isnan()):
                return f"nan pos {g.tolist()} vs {e.tolist()}"
            m = ~ed.isnan()
            if not torch.equal(torch.signbit(gd[m]), torch.signbit(ed[m])):
                return f"sign {g.tolist()} vs {e.tolist()}"
            if not torch.equal(gd[m].isinf(), ed[m].isinf()):
                return f"inf {g.tolist()} vs {e.tolist()}"
            eps = torch.finfo(e.dtype).eps
            tol = ulps * eps * ed[m].abs().clamp_min(torch.finfo(e.dtype).tiny)
            fin = ~ed[m].isinf()
            if not bool(((gd[m] - ed[m]).abs()[fin] <= tol[fin]).all()):
                return f"values {g.tolist()} vs {e.tolist()}"
            return None
        if not torch.equal(g, e):
            return f"values {g.tolist()} vs {e.tolist()}"
        return None
    if isinstance(e, float) and math.isnan(e):
        return None if isinstance(g, float) and math.isnan(g) else f"{g!r} vs {e!r}"
    if type(g) is not type(e) or g != e:
        return f"{g!r} vs {e!r}"
    return None


def run1(fn, args, compiled, dynamic):
    torch._dynamo.reset()
    f = torch.compile(fn, backend="xla", dynamic=dynamic) if compiled else fn
    a = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            return ("ok", f(*a))
    except Exception as e:  # noqa: BLE001
        return ("err", e)


def compare(name):
    fn, args, dynamic, ulps = CASES[name]
    ek, ev = run1(fn, args, False, False)
    gk, gv = run1(fn, args, True, dynamic)
    if ek == "err":
        if gk != "err":
            return f"DIFF {name}: eager raised {type(ev).__name__}: {str(ev)[:100]} ; xla returned {gv}"
        if not isinstance(gv, type(ev)):
            return f"DIFF {name}: error {type(gv).__name__}: {str(gv)[:150]} vs {type(ev).__name__}: {str(ev)[:100]}"
        if str(ev).strip()[:40] not in str(gv):
            return f"MSG {name}: {str(gv)[:150]!r} vs {str(ev)[:100]!r}"
        return f"ok {name} (raises)"
    if gk == "err":
        return f"DIFF {name}: xla raised {type(gv).__name__}: {str(gv)[:300]}"
    ef, gf = flat(ev), flat(gv)
    if len(ef) != len(gf):
        return f"DIFF {name}: {len(gf)} outputs vs {len(ef)}"
    for i, (g, e) in enumerate(zip(gf, ef)):
        d = cmp1(g, e, ulps)
        if d:
            return f"DIFF {name}[{i}]: {d}"
    return f"ok {name}"


def main(argv):
    names = [n for n in CASES if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = compare(n)
        except Exception:  # noqa: BLE001
            line = f"CRASH {n}: {traceback.format_exc().strip().splitlines()[-1]}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")


I32 = torch.tensor([2147483647, -2147483648, 5, -7], dtype=torch.int32)
U8 = torch.tensor([0, 3, 200, 255], dtype=torch.uint8)
I8 = torch.tensor([-128, -3, 2, 127], dtype=torch.int8)
I64 = torch.tensor([-7, -1, 0, 3, 8, 7], dtype=torch.int64)
FN = torch.tensor([-7.5, -1.0, -0.0, 0.0, 3.5, 7.25, -2.5, 2.5])
BOOL = torch.tensor([True, False, True, True])
H = (torch.arange(4096, dtype=torch.float32) / 7).to(torch.float16)
BH = (torch.arange(4096, dtype=torch.float32) / 7).to(torch.bfloat16)
TIE = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 1.0, 1.0, 0.0]])
NANT = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, 5.0, -1.0]])


# ---- type promotion
@case(I64)
def promo_int_pyfloat(x):
    return x * 1.5, x + 0.5, x / 2, x // 2, x % 3, 2.5 ** x.abs().clamp(max=3), x + True


@case(I64, FN[:6])
def promo_int_float_tensor(x, y):
    return (
        x * y,
        x + torch.tensor(0.5),
        x + torch.tensor(2.5, dtype=torch.float64),
        y * torch.tensor(3),
    )


@case(I64)
def promo_int_bool(x):
    b = x > 0
    return x + b, b + b, b * 3, b * 2.5, b & (x < 5), b.sum(), b.float().mean(), ~b, -x.abs()


@case(U8, I8)
def wraparound(u, i):
    return u + 250, u * 3, u - 10, i * 100, i + 127, -i, u.neg(), i.abs(), u // 3, i // 3


@case(I32)
def int32_overflow(x):
    return x + 1, x * 2, x - 1, x.abs(), -x, x.sum(), x.cumsum(0), x.prod()


@case()
def arange_dtypes():
    return (
        torch.arange(0, 1, 0.25),
        torch.arange(5),
        torch.arange(1, 2.5, 0.5),
        torch.arange(0.0, 3),
        torch.arange(10, dtype=torch.uint8),
        torch.arange(-1, 1, 0.3, dtype=torch.float64),
        torch.arange(0, 10, 3),
        torch.linspace(0, 1, 5),
        torch.arange(5, 0, -1.5),
    )


@case(I32, BOOL, U8)
def int_reductions(i, b, u):
    return (
        i.sum(),
        b.sum(),
        u.sum(),
        i.cumsum(0),
        b.cumsum(0),
        u.cumsum(0),
        u.prod(),
        b.prod(),
        i.sum(dtype=torch.int32),
        u.sum(0, keepdim=True),
        b.any(),
        u.all(),
        i.cumprod(0),
        u.sum(dtype=torch.uint8),
        b.sum(0),
    )


@case(I64)
def mean_int_raises(x):
    return x.mean()


@case(I64)
def div_floor_neg(x):
    return (
        x // 3,
        x // -3,
        x % 3,
        x % -3,
        torch.fmod(x, 3),
        torch.fmod(x, -3),
        torch.remainder(x, -3),
        x.div(3, rounding_mode="trunc"),
        x.div(-3, rounding_mode="floor"),
        torch.div(x, 2),
    )


@case(FN)
def div_floor_float(x):
    return (
        x // 2,
        x // -2,
        x % 2,
        x % -2,
        torch.fmod(x, 2),
        torch.fmod(x, -2),
        torch.remainder(x, -2.5),
        x.div(2, rounding_mode="trunc"),
        x.div(-2, rounding_mode="floor"),
        torch.remainder(-x, 1.5),
        7.0 % x,
        7 // x,
    )


@case(I64)
def pow_int_neg(x):
    return x.abs() ** -1


@case(I64)
def pow_int_ok(x):
    return (
        x**2,
        2 ** x.clamp(0, 10),
        x.pow(3),
        torch.pow(2, x.abs()),
        x.abs() ** 0.5,
        x**0,
        (x.float() ** -1),
    )


@case(H, BH)
def half_accum(h, b):
    return (
        h.sum(),
        h.mean(),
        b.sum(),
        b.mean(),
        torch.softmax(h[:64], 0),
        h.cumsum(0)[-5:],
        b.cumsum(0)[-5:],
        h.var(),
        b.std(),
        h.norm(),
        torch.logsumexp(h[:100], 0),
        h.prod(),
        (h * h).sum(),
        h.float().sum().half(),
    )


@case(H[:16], BH[:16])
def half_elementwise(h, b):
    return (
        h * 3.3,
        h + b,
        h / 7,
        b * 1.1 + 0.3,
        h.exp(),
        b.sqrt(),
        h.sigmoid(),
        torch.addcmul(h, h, h, value=0.1),
        h.lerp(h * 2, 0.3),
        F.gelu(b),
        F.silu(h),
    )


@case(FN)
def rounding(x):
    y = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 1.25, 1.35, 2.675, -0.125, 1234.5678])
    return (
        x.round(),
        y.round(),
        y.round(decimals=1),
        y.round(decimals=2),
        y.round(decimals=-1),
        x.trunc(),
        y.trunc(),
        x.ceil(),
        x.floor(),
        torch.round(y * 10) / 10,
        y.frac(),
    )


@case(I64)
def clamp_int_float_bounds(x):
    return (
        x.clamp(-2.5, 3.5),
        x.clamp(min=0.5),
        x.clamp(max=2),
        torch.clamp(x, torch.tensor(-1), torch.tensor(2)),
        x.clamp_min(1.5),
        x.float().clamp(torch.tensor(0.0), 2),
    )


@case(FN, I64[:4])
def where_scalar(x, i):
    m = x > 0
    return (
        torch.where(m, x, 0),
        torch.where(m, 1, 0),
        torch.where(m, 1.0, 0),
        torch.where(m, x, torch.tensor(0.0, dtype=torch.float64)),
        torch.where(i > 0, i, 0.5),
        torch.where(i > 0, 2, i),
        torch.where(m, True, False),
        torch.where(i > 0, i, torch.tensor(1.5)),
    )


@case()
def full_dtype():
    return (
        torch.full((2,), 3),
        torch.full((2,), 3.0),
        torch.full((2,), True),
        torch.ones(2) * torch.tensor(3),
        torch.zeros(2, dtype=torch.int32) + 2.5,
        torch.full((2,), 7, dtype=torch.float16) / 3,
        torch.tensor(3) * torch.ones(2),
        torch.zeros_like(torch.ones(2, dtype=torch.int8), dtype=torch.float32),
    )


@case(I64)
def true_div_ints(x):
    return (
        x / 2,
        x / x.clamp(min=1),
        torch.true_divide(x, 4),
        x / torch.tensor(3, dtype=torch.int32),
        (x > 0) / 2,
        x / 0,
        -x / 0,
        x * 0 / 0,
    )


# ---- ties & NaN
@case(TIE)
def ties_max(x):
    return (
        x.max(1),
        x.min(1),
        x.argmax(1),
        x.argmin(1),
        x.argmax(),
        x.argmin(),
        x.max(0),
        torch.max(x),
        x.amax(1),
        x.amin(0),
        x.max(dim=1, keepdim=True),
    )


@case(NANT)
def nan_max(x):
    return (
        x.max(1),
        x.min(1),
        x.argmax(1),
        x.argmin(1),
        x.argmax(),
        x.max(),
        x.amax(1),
        torch.maximum(x, x.flip(1)),
        torch.fmax(x, x.flip(1)),
        x.max(0),
        x.nanmean(1),
        x.nansum(),
    )


@case(torch.tensor([3.0, 1.0, float("nan"), 1.0, 3.0, -0.0, 0.0, float("-inf"), float("nan"), 2.0]))
def sort_stable(x):
    return (
        x.sort(stable=True),
        x.sort(descending=True, stable=True),
        x.argsort(stable=True),
        x.argsort(descending=True, stable=True),
        torch.msort(x),
    )


@case(torch.tensor([3.0, 1.0, 3.0, 1.0, 2.0, 3.0, 0.0]))
def topk_ties(x):
    return (
        x.topk(2),
        x.topk(3, largest=False),
        x.topk(2, sorted=True),
        x.kthvalue(2),
        x.kthvalue(5),
        x.median(),
        x.mode(),
    )


@case(torch.tensor([[3.0, 1.0, 4.0, 2.0], [1.0, float("nan"), 2.0, 0.0]]))
def median_nan(x):
    return (
        x.median(1),
        x.nanmedian(1),
        x.median(),
        x.nanmedian(),
        x[0].median(),
        x.quantile(0.5, dim=1),
        x.nanquantile(0.25, dim=1),
    )


@case(torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]))
def median_even(x):
    return (
        x.median(),
        x.median(0),
        torch.median(x.view(2, 4), 1),
        x.view(2, 4).mode(1),
        x.kthvalue(4),
        torch.quantile(x, torch.tensor([0.1, 0.5, 0.9])),
    )


@case(torch.tensor([3, 1, 2, 3, 1, 1, 7]))
def unique_ops(x):
    return (
        torch.unique(x),
        torch.unique(x, return_inverse=True),
        torch.unique(x, return_counts=True),
        torch.unique(x, sorted=True, return_inverse=True, return_counts=True),
        torch.unique_consecutive(x, return_counts=True),
    )


@case(torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, float("nan"), 1.0]))
def cum_extremes(x):
    return x.cummax(0), x.cummin(0), x[:5].cummax(0), x[:5].cummin(0)


@case(torch.tensor([[1, 3, 3, 2], [5, 5, 1, 1]]))
def cum_extremes_int(x):
    return (
        x.cummax(1),
        x.cummin(1),
        x.cumsum(1),
        x.cumprod(1),
        x.logcumsumexp(1) if x.is_floating_point() else x.float().logcumsumexp(1),
    )


@case(torch.tensor([1.0, 3.0, 3.0, 2.0]))
def amax_grad_ties(x):
    x = x.clone().requires_grad_()
    y = x.amax() * 2 + x.max() + x.amin(0) * 3
    (g,) = torch.autograd.grad(y, x)
    return g


@case(torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]))
def max_grad_ties(x):
    x = x.clone().requires_grad_()
    y = x.max(1).values.sum() + x.amax(1).sum() * 10 + x.max() * 100 + x.median() * 1000
    (g,) = torch.autograd.grad(y, x)
    return g


@case(FN)
def clamp_nan_bounds(x):
    return (
        x.clamp(min=float("nan")),
        x.clamp(max=float("nan")),
        x.clamp(torch.full_like(x, float("nan")), None),
        torch.clamp(torch.tensor([float("nan"), 1.0]), 0, 0.5),
    )


# ---- empty / degenerate reductions
@case(torch.zeros(0), torch.zeros(0, 3), torch.zeros(0, dtype=torch.int64))
def empty_reductions(e, e2, ei):
    return (
        e.sum(),
        e.mean(),
        e.prod(),
        ei.sum(),
        ei.prod(),
        e2.sum(0),
        e2.mean(0),
        e2.sum(1),
        e2.prod(0),
        e.std(),
        e.var(),
        e2.amax(1),
        e.logsumexp(0),
        e.norm(),
        e.nansum(),
        e.cumsum(0),
        e.any(),
        e.all(),
        e2.sum(dim=()),
    )


@case(torch.zeros(0))
def empty_max_raises(e):
    return e.max()


@case(torch.zeros(0, 3))
def empty_argmax_raises(e):
    return e.argmax(0)


@case(torch.zeros(0, 3))
def empty_amax_raises(e):
    return e.amax(0)


@case(torch.ones(2, 3))
def dims_semantics(x):
    return (
        x.sum(dim=()),
        x.sum(dim=(-1,)),
        x.sum((0, 1), keepdim=True),
        x.mean(-2, keepdim=True),
        x.std(dim=None),
        x.amax(dim=()),
        x.logsumexp(dim=(-1, 0)),
        x.norm(dim=()),
        x.var(dim=(), keepdim=True),
        torch.sum(x, dim=[]),
        x.count_nonzero(dim=()),
        x.mean(dim=()),
    )


@case(torch.tensor([3.0]), torch.tensor([[1.0, 2.0, 4.0]]))
def std_single(x, y):
    return (
        x.std(),
        x.var(),
        x.std(correction=0),
        y.std(0),
        y.var(0, correction=0),
        y.var(1, correction=2),
        y.var(1, correction=3),
        y.var(1, correction=5),
        torch.std_mean(y, 1),
        torch.var_mean(x, correction=0),
    )


@case(torch.tensor([[float("-inf")] * 3, [0.0, float("-inf"), 1.0]]))
def neg_inf_rows(x):
    return (
        x.logsumexp(1),
        torch.softmax(x, 1),
        torch.log_softmax(x, 1),
        F.softmax(x, -1, dtype=torch.float64),
        x.logsumexp(0),
        torch.logcumsumexp(x, 1),
        x.exp().sum(1).log(),
    )


@case(torch.tensor([[float("inf"), 1.0, float("inf")], [float("nan"), 0.0, 1.0]]))
def inf_rows(x):
    return x.logsumexp(1), torch.softmax(x, 1), torch.log_softmax(x, 1), x.logsumexp(0)


# ---- integer results
@case(torch.tensor([[0, 1, 2], [3, 0, 0]]))
def nonzero_etc(x):
    return (
        x.nonzero(),
        torch.nonzero(x, as_tuple=True),
        x.argwhere(),
        torch.where(x > 0),
        x.count_nonzero(),
        x.count_nonzero(0),
        (x > 0).sum(1),
    )


@case(torch.tensor([0, 1, 1, 3, 2, 1, 7]), torch.tensor([0.5, 1.0, 1.0, 2.0, 0.25, 1.0, 3.0]))
def bincount_ops(x, w):
    return (
        torch.bincount(x),
        torch.bincount(x, minlength=10),
        torch.bincount(x, weights=w),
        torch.bincount(x, weights=w.double()),
        torch.bincount(x.to(torch.uint8)),
    )


@case(torch.tensor([0.0, 1.0, 1.0, 3.0, 2.5, -1.0, 7.0, 10.0]))
def histc_ops(x):
    return (
        torch.histc(x, bins=4, min=0, max=8),
        torch.histc(x, bins=5),
        torch.histc(x, bins=3, min=1, max=1),
        torch.histogram(x, bins=4) if False else torch.histc(x.double(), 4, 0, 10),
    )


@case(torch.tensor([1.0, 2.0, 2.0, 3.0, 5.0]), torch.tensor([[2.0, 0.0], [5.0, 6.0]]))
def searchsorted_ops(s, v):
    return (
        torch.searchsorted(s, v),
        torch.searchsorted(s, v, right=True),
        torch.searchsorted(s, v, out_int32=True),
        torch.bucketize(v, s),
        torch.bucketize(v, s, right=True),
        torch.bucketize(v, s, out_int32=True),
        torch.searchsorted(s, 2.0),
        torch.searchsorted(s, v, side="right"),
        torch.searchsorted(s.int(), v.int()),
        torch.bucketize(3, s),
    )


@case(torch.tensor([0, 2, 1, 2]))
def one_hot_ops(x):
    return F.one_hot(x), F.one_hot(x, 5), F.one_hot(x, 3).float().argmax(-1), F.one_hot(x).sum(0)


@case(torch.tensor([1, 2, 3]), torch.tensor([1.0, 2.5, 3.0]))
def eq_mixed(i, f):
    return (
        torch.eq(i, f),
        i == f,
        i == 2.0,
        i.int() == i,
        (i > 1.5),
        torch.isclose(i.float(), f),
        torch.eq(i.to(torch.uint8), torch.tensor([1, 2, 259])),
        i.to(torch.uint8) == -255,
        torch.ne(i, True),
        i == True,
    )


@case(
    torch.tensor([1, -8, 255, -1], dtype=torch.int64),
    torch.tensor([1, 2, 200], dtype=torch.uint8),
    torch.tensor([1, -2, 100], dtype=torch.int8),
    torch.tensor([1, -2, 7], dtype=torch.int32),
)
def shifts(x, u, i8, i32):
    return (
        x << 2,
        x >> 1,
        x << 63,
        x << 64,
        x >> 64,
        x >> 70,
        u << 1,
        u << 8,
        u >> 9,
        i8 << 7,
        i8 >> 8,
        i32 << 31,
        i32 << 32,
        i32 >> 40,
        x << -1,
        x >> -1,
        x & 0xFF,
        x | 3,
        x ^ -1,
        ~x,
        ~u,
        u & 7,
        i8 ^ u,
        torch.bitwise_left_shift(u, 3),
        1 << x.clamp(0, 10),
        -1 >> x.clamp(0),
    )


@case(
    torch.tensor([-9223372036854775808, -5, 3], dtype=torch.int64),
    torch.tensor([-2147483648, 3], dtype=torch.int32),
    torch.tensor([-128, 5], dtype=torch.int8),
)
def abs_int_min(x, y, z):
    return (
        x.abs(),
        y.abs(),
        z.abs(),
        -x,
        -z,
        x.sign(),
        z.neg().sign(),
        x // -1 if False else x.sgn(),
    )


@case(torch.tensor([[1, 2], [3, 4]]))
def indexing_dtypes(x):
    i = torch.tensor([1, 0])
    return (
        x[i],
        x[x > 1],
        x[:, i.int()],
        x[torch.tensor([True, False])],
        x.gather(1, i.view(2, 1)),
        x.take(torch.tensor([3, 0])),
        x.argmax(),
        x.sort(1).indices.dtype == torch.int64,
        x.index_select(0, i.int()),
    )


# ---- combos users write
@case(torch.tensor([[1.0, 2.0, float("nan")], [4.0, 5.0, 6.0]]), dynamic=True)
def normalize_dyn(x):
    m = x.nan_to_num().mean(1, keepdim=True)
    return (
        (x - m) / x.nan_to_num().std(1, keepdim=True),
        x.nanmean(),
        torch.nan_to_num(x, nan=0.0).sum(-1),
    )


@case(torch.tensor([0, 5, 9, 3]), dynamic=True)
def int_math_dyn(x):
    n = x.numel()
    return (
        x * n // 2,
        x / n,
        x % n,
        (x + 0.5).floor().long(),
        x.float().mean(),
        torch.arange(n) * 1.5,
        x.sum() / n,
        x.bincount(minlength=n),
    )


@case(torch.randint(0, 256, (4, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)))
def image_uint8(img):
    f = img.float() / 255
    back = (f * 255).round().to(torch.uint8)
    return (
        f.mean(),
        back,
        img.double().mean(),
        (img // 2 + img // 2),
        img.sum(1),
        img.max(),
        img.to(torch.int16) - 128,
        (img > 128).sum(),
        img.float().std(),
        img.argmax(1),
        img.sort(1).values,
    )


@case(torch.tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]]), torch.tensor([0, 1]))
def accuracy_style(logits, target):
    pred = logits.argmax(-1)
    acc = (pred == target).float().mean()
    correct = (pred == target).sum().item() if False else (pred == target).sum()
    return (
        acc,
        correct,
        correct / target.numel(),
        F.cross_entropy(logits, target),
        logits.softmax(-1).max(-1),
        (pred == target).long().sum() * 100 // target.numel(),
    )


@case(torch.tensor([1.5, -2.5, 3.7, -0.4, 1e10, -1e10, float("nan"), float("inf")]))
def float_to_int(x):
    return (
        x[:6].long(),
        x[:4].int(),
        x[:4].to(torch.uint8) if False else x[:4].abs().to(torch.uint8),
        x[:6].round().long(),
        x[:4].to(torch.int8),
        x.bool(),
        x[:6].to(torch.int16) if False else x[:4].to(torch.int16),
    )


@case(torch.tensor([3, 4]), torch.tensor([2.0, 3.0]))
def zero_dim_mix(i, f):
    s = torch.tensor(2.5)
    s64 = torch.tensor(2.5, dtype=torch.float64)
    si = torch.tensor(3)
    return (
        i * s,
        f * s64,
        i * s64,
        f.half() * s64,
        f.half() * si,
        i.int() * si,
        i.to(torch.uint8) + torch.tensor(-3),
        i.int() + torch.tensor(2**40),
        f.half() + torch.tensor(1e5),
        torch.tensor(True) + i.to(torch.int8),
    )


@case(torch.tensor([1.0, -2.0, 3.0]))
def scalar_item_math(x):
    s = x.sum()
    return (
        s * 2,
        s / 3,
        s // 2,
        s % 2,
        (s > 0).float(),
        torch.sign(s),
        s.abs() ** 0.5,
        x / s,
        x.max() - x.min(),
        x.abs().argmax(),
    )


@case(torch.tensor([[1, 2], [3, 4]], dtype=torch.int32), torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
def matmul_ints(a, b):
    return (
        a @ a,
        a.long() @ a.long(),
        torch.mm(a, a),
        b @ b,
        torch.einsum("ij,jk->ik", a, a),
        (a * a).sum(1),
        torch.dot(a[0], a[1]),
        torch.matmul(a[0], a),
    )


@case(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0.25, 0.25, 0.25, 0.25]))
def losses_norms(x, w):
    return (
        (x * w).sum(),
        torch.dot(x, w),
        F.normalize(x, dim=0),
        x.norm(p=1),
        x.norm(p=float("inf")),
        torch.linalg.vector_norm(x, ord=0),
        x.renorm(2, 0, 1) if False else x.norm(p=3),
        torch.dist(x, w),
        x.var(unbiased=False),
    )


@case(torch.tensor([5, -3, 0, 7]))
def int_minmax_combos(x):
    return (
        torch.maximum(x, torch.tensor(0)),
        x.clamp(min=0),
        torch.max(x, torch.zeros_like(x)),
        x.max(dim=0),
        x.aminmax(),
        torch.minimum(x, torch.tensor(2.5)),
        torch.maximum(x.to(torch.uint8), torch.tensor(3, dtype=torch.uint8)),
        torch.max(x.float(), torch.tensor([float("nan")] * 4)),
    )


@case(torch.tensor([1.0, 2.0, 3.0]))
def logs_exps(x):
    return (
        torch.log(x - 2),
        torch.log1p(-x),
        x.log2(),
        torch.xlogy(x - 1, x - 1),
        torch.special.xlog1py(torch.zeros(3), -x),
        torch.sqrt(-x),
        torch.rsqrt(x - 1),
        torch.expm1(x * 100),
        torch.exp2(x * 50),
    )


@case(
    torch.tensor(
        [
            [1.0, float("nan"), 3.0, -0.0, 0.0, float("-inf")],
            [float("nan"), 2.0, float("nan"), 1.0, 1.0, float("inf")],
        ]
    )
)
def topk_nan(x):
    return (
        x.topk(2, 1).values,
        x.topk(3, 1, largest=False).values,
        x.topk(6, 1).values,
        x.topk(1, 1, largest=False),
        x.kthvalue(2, 1),
        x.kthvalue(6, 1),
        x.sort(1, descending=True),
    )


@case(
    torch.tensor([[5, 0, 255, 7]], dtype=torch.uint8),
    torch.tensor([[-128, 127, 0, -1]], dtype=torch.int8),
)
def topk_ints(u, i):
    return (
        u.topk(2).values,
        u.topk(2, largest=False).values,
        i.topk(2).values,
        i.topk(2, largest=False).values,
        u.kthvalue(1),
        i.sort(),
        u.max(1),
        i.argmin(1),
    )


@case(torch.tensor([[1.0, 2.0, 4.0]]))
def var_corrections(y):
    return (
        y.var(1, correction=3),
        y.var(1, correction=5),
        y.std(1, correction=3),
        torch.var_mean(y, 1, correction=4),
        torch.std_mean(y, 1, correction=3),
        y.var(1, correction=2.5) if False else y.var(1, correction=0),
        torch.tensor([[2.0, 2.0]]).var(1, correction=2),
        torch.tensor([[2.0, 2.0]]).std(1, correction=5),
    )


@case(torch.tensor([[1.0, 2.0, 4.0]]))
def var_correction_grad(y):
    y = y.clone().requires_grad_()
    (g,) = torch.autograd.grad(y.var(1, correction=2).sum() + y.std(1, correction=0).sum(), y)
    return g


def _var_grads(y, c, d, fn):
    y = y.clone().requires_grad_()
    v = fn(y, d, correction=c)
    (g,) = torch.autograd.grad(v.sum(), y)
    return v, g


for _c in (3, 5, 0.5, 2.5, 4):
    for _d in (1, None, (0, 1)):
        for _fn in ("var", "std"):
            CASES[f"var_grad_{_fn}_{_c}_{_d}"] = (
                functools.partial(_var_grads, c=_c, d=_d, fn=getattr(torch, _fn)),
                (torch.tensor([[1.0, 2.0, 4.0]]),),
                False,
                4,
            )
CASES["var_grad_const"] = (
    lambda y: _var_grads(y, 3, 1, torch.var),
    (torch.tensor([[2.0, 2.0, 2.0]]),),
    False,
    4,
)
CASES["std_mean_dof0"] = (
    lambda y: (torch.std_mean(y, 1, correction=3), torch.var_mean(y, correction=6)),
    (torch.tensor([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]]),),
    False,
    4,
)


# ---- batch 2
@case(
    torch.tensor([0, 3, 200, 255], dtype=torch.uint8),
    torch.tensor([-128, -3, 2, 127], dtype=torch.int8),
)
def small_int_mix(u, i):
    return (
        torch.maximum(u, i),
        u + i,
        u * i,
        torch.where(u > 2, u, -1),
        u.clamp(min=-1),
        u.clamp(max=300) if False else u.clamp(max=100),
        i.clamp(-200, 200),
        u - i,
        torch.diff(u),
        torch.diff(u > 100),
        (u > 100) ^ (i > 0),
        u.to(torch.int8),
        i.to(torch.uint8),
        u.bitwise_and(i) if False else u & 0x0F,
    )


@case(
    torch.tensor([5.0, -5.0, 0.0, -0.0, 3.0]),
    torch.tensor([float("inf"), float("inf"), -2.0, 2.0, float("-inf")]),
)
def remainder_edges(a, b):
    return (
        a % b,
        torch.remainder(a, b),
        torch.fmod(a, b),
        a // b,
        torch.floor_divide(a, b),
        a.div(b, rounding_mode="floor"),
        a.div(b, rounding_mode="trunc"),
        torch.remainder(a, 0.0),
        a // 0.0,
        torch.fmod(a, 0.0),
    )


@case(torch.tensor([7, -7, 0, -9223372036854775808]))
def int_div_zero(x):
    return x // 0


@case(torch.tensor([7, -7, 0]))
def int_mod_zero(x):
    return x % 0


@case(torch.tensor([-9223372036854775808, 7]))
def int_min_mul(x):
    return x * -1, -x, x.abs(), x - 1


@case(
    torch.tensor([1.5, -2.5, 3.25], dtype=torch.float16),
    torch.tensor([1.5, -2.5, 3.25], dtype=torch.bfloat16),
)
def half_div_mod(h, b):
    return (
        h // 0.7,
        h % 0.7,
        b // 0.7,
        b % -0.7,
        torch.fmod(h, 0.3),
        h / 3,
        b.div(3, rounding_mode="floor"),
        h.remainder(torch.tensor(0.7)),
    )


@case()
def factories():
    return (
        torch.arange(0, 1, 0.1),
        torch.arange(-1.0, 1.0, 0.1),
        torch.arange(0, 2.0, 0.3, dtype=torch.float16),
        torch.linspace(0, 1, 7),
        torch.linspace(-3, 7, 1000)[::97],
        torch.logspace(0, 2, 5),
        torch.linspace(0, 10, 6, dtype=torch.int64),
        torch.arange(1, 4).float() / 3,
        torch.linspace(1, 0, 5),
        torch.arange(3, dtype=torch.float16) * 0.1,
        torch.linspace(0, 1, 1),
        torch.arange(0.5, 3),
        torch.arange(10, 0, -3),
        torch.full((3,), 1 / 3, dtype=torch.float16),
        torch.tensor([0.1, 0.2]) + 0.1,
        torch.eye(3, dtype=torch.int32),
        torch.tril(torch.ones(3, 3, dtype=torch.bool)),
    )


@case(torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.int32), torch.tensor([True, False, True]))
def int_reduce_dtypes(x, b):
    return (
        x.sum(dtype=torch.float64),
        x.mean(dtype=torch.float32),
        x.float().mean(),
        x.cumsum(1, dtype=torch.int32),
        x.prod(1, dtype=torch.int16),
        b.sum(dtype=torch.int32),
        b.cumsum(0),
        b.cumprod(0),
        x.nansum(),
        x.max(),
        x.median(),
        x.to(torch.uint8).median(1),
        x.logsumexp(1),
        x.amax(1),
        x.count_nonzero(),
        torch.sum(x > 2, 1),
        x.sum(0, keepdim=True),
        x.norm() if False else x.float().norm(),
        torch.trace(x),
    )


@case(torch.tensor([2147483000, 1000], dtype=torch.int32))
def int32_cumsum_wrap(x):
    return (
        x.cumsum(0, dtype=torch.int32),
        x.sum(dtype=torch.int32),
        x + x,
        x.sum(),
        x * x,
        x.prod(dtype=torch.int32),
        x.to(torch.int16),
    )


@case(torch.tensor([1, 2, 3]))
def int_inplace(x):
    y = x.clone()
    y += 2
    y *= 3
    y //= 2
    y %= 5
    y += True
    z = x.float()
    z /= 2
    z **= 2
    w = torch.zeros(3, dtype=torch.uint8)
    w -= 1
    w += 300 if False else 44
    return y, z, w


@case(torch.tensor([1, 2, 3]))
def int_inplace_float_raises(x):
    y = x.clone()
    y += 1.5
    return y


@case(torch.tensor([1, 2, 3]))
def int_inplace_div_raises(x):
    y = x.clone()
    y /= 2
    return y


@case(torch.tensor([2.0, -3.0, 0.0]), torch.tensor([1, -2, 3]))
def copysign_misc(f, i):
    return (
        torch.copysign(i, -0.0),
        torch.copysign(f, i),
        torch.hypot(f, f),
        torch.ldexp(f, i),
        torch.frexp(f),
        torch.nextafter(f, torch.tensor(0.0)),
        torch.logaddexp(f, f),
        torch.sign(i),
        torch.sgn(f),
        torch.signbit(torch.tensor([-0.0, 0.0])),
        torch.heaviside(f, torch.tensor(0.5)),
        torch.float_power(i, 2),
        torch.float_power(f, -1),
        torch.true_divide(i, i.abs()),
        torch.lerp(f, f * 2, 0.5),
        torch.xlogy(i, 2),
    )


@case(torch.tensor([1, 2, 3]), torch.tensor([1.0, 2.0, 3.0]))
def isin_eq(i, f):
    return (
        torch.isin(i, torch.tensor([2, 5])),
        torch.isin(f, torch.tensor([2])),
        torch.isin(i, torch.tensor([2.0, 3.5])),
        torch.equal(i, f.long()),
        (i == f).all(),
        torch.allclose(i.float(), f),
        torch.isin(i, 3),
    )


@case(torch.tensor([3.0, float("nan"), 1.0, 2.0]))
def nan_stats(x):
    return (
        x.mean(),
        x.nanmean(),
        x.sum(),
        x.nansum(),
        x.std(),
        x.max(),
        x.min(),
        x.argmin(),
        x.sort(),
        x.median(),
        x.nanmedian(),
        x.logsumexp(0),
        torch.softmax(x, 0),
        x.count_nonzero(),
        x.clamp(0, 2),
        x.round(),
        x.topk(1),
        x.cummax(0),
        torch.nan_to_num(x),
        torch.isnan(x).any(),
        x.unique(),
        x.quantile(0.5),
        x.nanquantile(0.5),
    )


@case(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), dynamic=True)
def dyn_reductions(x):
    n = x.shape[0]
    return (
        x.sum() / n,
        x.mean(0),
        x.std(0),
        x.var(1, correction=0),
        x.cumsum(1),
        x.max(1),
        x.argmax(),
        x.prod(),
        x.logsumexp(1),
        torch.arange(n) / n,
        x // n,
        x % n,
    )


@case(torch.tensor([[1, 2], [3, 4]]), dynamic=True)
def dyn_int(x):
    n = x.shape[1]
    return (
        x.sum(1) // n,
        x.sum() / x.numel(),
        x * n,
        x.float().mean(),
        x.cumsum(0),
        (x > n).sum(),
        torch.div(x, n, rounding_mode="floor"),
        x.max() - n,
    )


@case(torch.tensor([0.1, 0.7, 0.2]), torch.tensor([1.0, 2.0, 3.0]))
def mixed_precision(p, w):
    h = p.half()
    return (
        h * w,
        h + w.double(),
        (h @ h),
        torch.dot(h.float(), w),
        h.sum(dtype=torch.float32),
        w.to(torch.bfloat16) * h.to(torch.bfloat16),
        h.mean(),
        (h * 1000).sum(),
        h.cumsum(0),
        h.cumprod(0),
        torch.softmax(h, 0, dtype=torch.float32),
        torch.log_softmax(h, 0),
    )


@case(torch.tensor([[0.5, 1.5], [2.5, -0.5]]))
def rounding2(x):
    return (
        x.round(decimals=0),
        (x * 3).round(decimals=1),
        x.half().round(),
        x.bfloat16().round(decimals=1),
        torch.round(x, decimals=3) * 1000,
        x.long().round() if False else x.long().float().round(),
        torch.fix(x),
        x.to(torch.int32).float(),
    )


@case(torch.tensor([1, 2, 3]))
def int_round_ops(x):
    return (
        x.round(),
        x.trunc(),
        x.floor(),
        x.ceil(),
        x.frac() if False else x.abs(),
        x.round(decimals=1) if False else x.sign(),
        torch.clamp(x, min=torch.tensor(1.5)),
    )


@case()
def arange_float_steps():
    return (
        torch.arange(-1.0, 1.0, 0.1),
        torch.arange(-1.0, 1.0, 0.1, dtype=torch.float64),
        torch.arange(-2.0, 2.0, 0.13, dtype=torch.bfloat16),
        torch.arange(-2.0, 2.0, 0.13, dtype=torch.float16),
        torch.arange(0.5, 100.0, 0.37),
        torch.arange(-3.0, 3.0, 7e-5),
        torch.arange(3, 9, 0.5),
        torch.arange(0, 64, 2, dtype=torch.float32),
        torch.arange(10.0, -10.0, -0.3),
        torch.arange(0, 20000, 1.0, dtype=torch.float16)[-3:],
        torch.arange(0, 2**25, 1.0)[-3:],
    )


@case(torch.ones(5))
def arange_dyn(x):
    n = x.shape[0]
    return torch.arange(n) * 0.1, torch.arange(0, n, 0.3), torch.arange(-1.0, 1.0, 2 / n)


CASES["arange_dyn"] = (arange_dyn, (torch.ones(7),), True, 4)


@case()
def linspace_values():
    return (
        torch.linspace(-3, 7, 1000),
        torch.linspace(0, 1, 7),
        torch.linspace(-1.3, 2.9, 77, dtype=torch.float64),
        torch.linspace(0, 1, 50, dtype=torch.float16),
        torch.linspace(0, 1, 50, dtype=torch.bfloat16),
        torch.linspace(0, 10, 7, dtype=torch.int64),
        torch.linspace(-5, 5, 11, dtype=torch.int32),
        torch.linspace(3, 3, 1),
        torch.linspace(0, 1, 0),
        torch.linspace(1, 0, 40000)[::997],
        torch.logspace(-2, 2, 33),
        torch.logspace(0, 3, 4, base=2),
    )


@case(torch.ones(9))
def linspace_dyn(x):
    n = x.shape[0]
    return torch.linspace(0, 1, n), torch.linspace(-2.5, n, 5), torch.arange(0.5, n, 0.25)


CASES["linspace_dyn"] = (linspace_dyn, (torch.ones(9),), True, 4)


# ---- batch 3
@case(
    torch.tensor([[0.1, 0.2, 0.3, 0.4], [1.0, 1.0, 1.0, 1.0]]),
    torch.tensor([[1, 0, 0, 1], [0, 0, 0, 0]]),
)
def masked_means(x, m):
    mf = m.float()
    return (
        ((x * mf).sum(1) / mf.sum(1)),
        (x * m).sum(1) / m.sum(1).clamp(min=1),
        x.masked_fill(m.bool(), float("-inf")).softmax(1),
        x.masked_fill(~m.bool(), 0).amax(1),
        torch.where(m.bool(), x, float("nan")).nanmean(1),
    )


@case(torch.tensor([[3, 1, 2], [1, 1, 0]]))
def int_sorting(x):
    return (
        x.sort(1),
        x.sort(dim=1, descending=True, stable=True),
        x.argsort(1),
        x.topk(2, 1).values,
        x.max(1),
        x.argmax(1),
        x.median(1),
        x.mode(1),
        x.kthvalue(2, 1),
        x.unique(dim=0),
        x.unique(dim=1),
        x.cummax(1),
        x.flatten().unique_consecutive(return_inverse=True),
    )


@case(torch.tensor([True, False, True]))
def bool_ops(b):
    return (
        b.sum(),
        b.cumsum(0),
        b + b,
        b * b,
        b.max(),
        b.sort(),
        b.float().mean(),
        b.to(torch.uint8) * 200,
        b | False,
        b ^ True,
        ~b,
        b.logical_not(),
        -b.int(),
        b.long().prod(),
        torch.where(b, 1.5, 2),
        b.any(),
        b.all(),
        b.unique(return_counts=True),
        b.eq(1),
        b == 2,
        b.clamp(max=0) if False else b.to(torch.int8).clamp(max=0),
        b.count_nonzero(),
    )


@case(torch.tensor([[1.0, -1.0], [0.5, 2.0]]), torch.tensor([2, 3]))
def broadcast_mixed(a, i):
    return (
        a * i,
        a + i[:, None],
        a / i,
        a // i,
        a % i,
        torch.pow(a, i),
        a ** i.float(),
        i.pow(2.0),
        torch.atan2(a, i),
        torch.maximum(a, i),
        torch.fmod(a, i),
        i / a,
    )


@case(torch.tensor([1e-8, 1.0, 1e8, 3e38]), dynamic=False)
def float_precision(x):
    return (
        x * 2 / 2,
        x.sum(),
        x.mean(),
        x.exp(),
        x.log(),
        x.sqrt() ** 2,
        (x + 1) - 1,
        x.double().sum(),
        x.cumsum(0),
        x.prod(),
        x.norm(),
        x.std(),
        x.half(),
        x.bfloat16(),
        x.square().sum(),
        torch.nn.functional.softmax(x, 0),
        x.logsumexp(0),
    )


@case(torch.tensor([-3.5, -0.5, 0.5, 2.5, 3.5]))
def half_round_trip(x):
    return (
        x.round().int(),
        x.half().round(),
        torch.round(x / 0.5) * 0.5,
        x.to(torch.bfloat16).round(),
        x.floor().long(),
        x.ceil().to(torch.int32),
        x.trunc().to(torch.uint8) if False else x.abs().trunc().to(torch.uint8),
    )


@case(torch.tensor([1, 2, 3, 4, 5, 6]))
def index_arith(x):
    idx = torch.arange(6)
    return (
        x[idx % 2 == 0],
        x[idx // 2],
        x[-1],
        x[torch.tensor(-1)],
        x.view(2, 3)[:, -1],
        x[idx.flip(0)],
        (x * idx).sum(),
        x.gather(0, idx % 3),
        x[x.argsort(descending=True)],
        torch.take_along_dim(x, idx.flip(0)),
    )


@case(torch.tensor([[0.2, 0.8], [0.6, 0.4]]), torch.tensor([1, 0]))
def losses_int(p, t):
    return (
        F.nll_loss(p.log(), t),
        F.cross_entropy(p, t, reduction="sum"),
        F.cross_entropy(p, t, label_smoothing=0.1),
        F.one_hot(t, 2) * p,
        F.binary_cross_entropy(p, F.one_hot(t, 2).float()),
        F.mse_loss(p, F.one_hot(t, 2).float()),
        (p.argmax(1) == t).float().mean(),
        F.cross_entropy(p, torch.tensor([1, -100]), ignore_index=-100),
        F.cross_entropy(p, torch.tensor([-100, -100])),
    )


@case(torch.tensor([0.0, 1.0, 2.0, 3.0]))
def clamp_combos(x):
    return (
        x.clamp(1, 2),
        x.clamp(2, 1),
        torch.clamp(x, min=torch.tensor([0.0, 2.0, 0.0, 5.0]), max=torch.tensor(1.5)),
        x.clamp(max=-0.0),
        (-x).clamp(min=0.0),
        x.clip(0.5),
        torch.clamp(x.int(), 1.5, 2.5),
        x.int().clamp(torch.tensor(1.5)) if False else x.int().clamp(1, 2),
        x.half().clamp(0.1, 0.3),
    )


@case(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
def cum_reductions(x):
    return (
        x.cumsum(0),
        x.cumprod(1),
        x.logcumsumexp(0),
        x.cummax(1),
        torch.cumsum(x, dim=-1, dtype=torch.float64),
        x.int().cumsum(0),
        x.half().cumsum(1),
        x.bfloat16().cumprod(0),
        x.flip(0).cummin(0),
        torch.cumulative_trapezoid(x, dim=1),
        torch.trapezoid(x),
    )


# ---- batch 4
@case(torch.tensor([0.0, -0.0, 1.0, -0.0, 0.0]))
def signed_zero_order(x):
    return (
        x.sort(stable=True),
        x.sort(descending=True, stable=True),
        x.max(),
        x.min(),
        x.argmax(),
        x.argmin(),
        x.amax(),
        x.cummax(0),
        x.cummin(0),
        x.unique(),
        x.topk(2, largest=False, sorted=True).values,
        torch.maximum(x, x.flip(0)),
        torch.minimum(x, -x),
        x.clamp(min=-0.0),
        x.clamp(max=0.0),
        x.median(),
        x.kthvalue(2),
        x.mode(),
        torch.searchsorted(torch.tensor([-0.0, 0.0]), x),
        torch.fmax(x, -x),
    )


@case(torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([0.0, 1.0, 2.0, float("nan")]))
def searchsorted_nan(v, s):
    return (
        torch.searchsorted(s, v),
        torch.searchsorted(s, v, right=True),
        torch.bucketize(v, s[:3]),
        torch.bucketize(torch.tensor([float("nan"), -1.0]), s[:3], right=True),
    )


@case(torch.tensor([0.0, -8.0, 2.0, -0.0]), torch.tensor([-1, 2, 3, -3]))
def pow_specials(x, i):
    return (
        x**-1,
        x ** (1 / 3),
        x**0.5,
        x**i,
        torch.pow(-2.0, x),
        0 ** i.abs(),
        x**0,
        x ** float("inf"),
        torch.pow(x, -0.5),
        x.float_power(i),
        (-x) ** 2,
        i**2.0,
        torch.pow(2, i.float()),
        x.square(),
        i.square(),
        (i > 0) ** 2 if False else i.abs() ** torch.tensor(2),
        torch.pow(i.abs(), torch.tensor(0.5)),
    )


@case(
    torch.tensor([60000.0, 60000.0, 1.0], dtype=torch.float16),
    torch.tensor([3e38, 3e38], dtype=torch.float32),
)
def overflow_reductions(h, f):
    return (
        h.sum(),
        h.mean(),
        h.cumsum(0),
        h.sum(dtype=torch.float32),
        f.sum(),
        f.mean(),
        f.double().sum(),
        h.var(),
        h.std(),
        h.norm(),
        f.norm(),
        torch.softmax(h, 0),
        h.prod(),
        f.logsumexp(0),
        h.logsumexp(0),
    )


@case(torch.tensor([1.0, float("nan"), 3.0]))
def histc_nan(x):
    return torch.histc(x, bins=3, min=0, max=3)


@case(torch.tensor([1, -1, 3]))
def bincount_neg(x):
    return torch.bincount(x)


@case(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[1, 2, 3]]))
def dim_args(x, i):
    return (
        x.sum(-1),
        x.sum(-2),
        x.mean((-1, -2)),
        x.max(-1),
        i.sum((0, 1)),
        x.std(-1, keepdim=True),
        x.amax((-2, -1), keepdim=True),
        x.norm(dim=-1),
        x.logsumexp(-2),
        x.argmax(-1, keepdim=True),
        x.cumsum(-1),
        x.prod(-1, keepdim=True),
        x.var_mean(-1),
        x.squeeze().sum(0),
        x.softmax(-2),
        i.max(-2),
        x.min(dim=-1).indices,
        torch.median(x, -1),
        i.float().mean(-1, keepdim=True),
    )


@case(torch.tensor(3.0), torch.tensor(4))
def zero_dim_reductions(s, i):
    return (
        s.sum(),
        s.sum(0),
        s.max(0),
        s.argmax(),
        s.argmax(0),
        s.std(),
        s.var(correction=0),
        s.mean(0, keepdim=True),
        s.softmax(0),
        s.logsumexp(0),
        s.cumsum(0),
        s.sort(),
        s.topk(1),
        i.sum(),
        i.prod(),
        s.median(),
        s.kthvalue(1),
        s.norm(),
        s.unsqueeze(0).amax(),
        i.float().std(0),
        s.max(dim=0, keepdim=True),
        i.cumprod(0),
        s.cummax(0),
        s.unique(),
    )


@case(torch.tensor([[0.3, 2.0, -1.0, 5.0, 4.0, 0.1, 7.0, 3.0]]))
def topk_unsorted(x):
    return (
        x.topk(3, sorted=False),
        x.topk(5, 1, largest=False, sorted=False),
        x.topk(8, sorted=False),
    )


_BIG = torch.randn(3, 5000, generator=torch.Generator().manual_seed(1))


@case(_BIG)
def big_float_reductions(x):
    return (
        x.sum(1),
        x.mean(1),
        x.sum(),
        x.std(1),
        x.var(),
        x.norm(dim=1),
        x.logsumexp(1),
        x.softmax(1)[:, :4],
        x.cumsum(1)[:, -3:],
        x.abs().prod(1),
        (x * x).sum(1),
        x.half().sum(1),
        x.bfloat16().mean(1),
        x.half().cumsum(1)[:, -3:],
    )


@case(
    torch.randint(
        -1000, 1000, (4, 3000), generator=torch.Generator().manual_seed(2), dtype=torch.int32
    )
)
def big_int_reductions(x):
    return (
        x.sum(1),
        x.cumsum(1)[:, -3:],
        x.float().mean(1),
        x.double().std(1),
        x.max(1),
        x.argmin(1),
        x.sort(1).values[:, :3],
        (x % 7).bincount() if False else (x.abs() % 7).flatten().bincount(),
        x.median(1),
        x.float().quantile(0.3, dim=1),
    )


@case()
def int_ranges():
    return (
        torch.linspace(0, 10, 20, dtype=torch.int64),
        torch.linspace(-7, 30, 33, dtype=torch.int32),
        torch.linspace(0, 255, 77, dtype=torch.uint8),
        torch.linspace(100, -100, 50, dtype=torch.int16),
        torch.arange(0.5, 5, 1, dtype=torch.int64),
        torch.arange(-2.5, 3, 1.5, dtype=torch.int32),
        torch.arange(0, 10, 2.5, dtype=torch.int64),
        torch.arange(1.7, 9.2, 1.9, dtype=torch.int64),
    )


@case(torch.tensor([[1.0, 5.0, 2.0, 8.0, 3.0], [4.0, 4.0, float("nan"), 1.0, 0.0]]))
def quantile_modes(x):
    q = torch.tensor([0.0, 0.25, 0.5, 0.6, 1.0])
    return (
        tuple(
            x[:1].quantile(q, dim=1, interpolation=m)
            for m in ("linear", "lower", "higher", "nearest", "midpoint")
        )
        + tuple(
            x.nanquantile(0.375, dim=1, interpolation=m, keepdim=True)
            for m in ("linear", "lower", "higher", "nearest", "midpoint")
        )
        + (x.quantile(0.5, dim=1), x[0].quantile(0.125))
    )


@case(torch.tensor([3, 120, 100, 7], dtype=torch.int8), torch.tensor([200, 100], dtype=torch.uint8))
def small_int_sums(i, u):
    return (
        i.sum(dtype=torch.int8),
        i.cumsum(0, dtype=torch.int8),
        u.sum(dtype=torch.uint8),
        u.prod(dtype=torch.uint8),
        i.sum(),
        u.mean(dtype=torch.float32),
        i.prod(dtype=torch.int16),
        (u * 2).sum(),
        u.cumprod(0),
    )


@case(torch.tensor([0.0, 0.999, 1.0, 2.0, 3.0, 3.0001, -0.0]), torch.tensor([3, 1, 2, 0]))
def hist_edges(x, perm):
    s = torch.tensor([5.0, 1.0, 3.0, 2.0])
    return (
        torch.histc(x, bins=3, min=0, max=3),
        torch.histc(x, bins=4, min=0, max=3),
        torch.searchsorted(s, torch.tensor([2.5, 0.0, 6.0]), sorter=s.argsort()),
        torch.histogram(x, bins=3, range=(0.0, 3.0)).hist,
        torch.bucketize(x, torch.tensor([0.0, 1.0, 3.0])),
        torch.histc(x.double(), bins=5),
    )


for _name in (
    "promo_int_pyfloat",
    "wraparound",
    "int_reductions",
    "div_floor_neg",
    "div_floor_float",
    "half_accum",
    "rounding",
    "where_scalar",
    "ties_max",
    "nan_max",
    "sort_stable",
    "median_nan",
    "cum_extremes",
    "std_single",
    "neg_inf_rows",
    "bincount_ops",
    "searchsorted_ops",
    "shifts",
    "image_uint8",
    "accuracy_style",
    "zero_dim_mix",
    "signed_zero_order",
    "quantile_modes",
    "masked_means",
    "var_corrections",
    "nonzero_etc",
    "unique_ops",
):
    _fn, _args, _, _ulps = CASES[_name]
    CASES[_name + "_dyn"] = (_fn, _args, True, _ulps)


@case(torch.tensor([1, 2, 3, 4]), torch.tensor([True, False, True, False]))
def int_writes(x, m):
    a = x.clone()
    a[m] = 7.9
    b = x.clone().masked_fill_(m, -2.7)
    c = x.clone()
    c.copy_(torch.tensor([1.9, -1.9, 2.5, -2.5]))
    d = torch.zeros(4, dtype=torch.int32).fill_(2.7)
    e = x.clone()
    e[1:3] = torch.tensor([9.99, -9.99])
    f = x.to(torch.uint8).clone()
    f.index_put_((torch.tensor([0, 1]),), torch.tensor([300, -1]).to(torch.uint8))
    g = x.clone().index_fill_(0, torch.tensor([2]), 5.5)
    h = x.clone().scatter_(0, torch.tensor([0]), 3.7) if False else x.clone().masked_fill(m, True)
    return (
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        h,
        x.float().masked_fill(m, 1e30),
        x.half().masked_fill(m, 1e5) if False else x.half().masked_fill(m, 65504.0),
    )


@case(torch.tensor([-1.5, -0.5, 255.7, 256.0, 3e9, -3e9, 1e20]))
def float_to_int_edges(x):
    return (
        x[:3].to(torch.uint8),
        x[:4].to(torch.int8) if False else x[:3].to(torch.int16),
        x[4:6].long(),
        x[:4].int(),
        x.bool(),
    )


_HX = torch.randn(4, 64, generator=torch.Generator().manual_seed(3))


@case(_HX.half(), _HX.bfloat16())
def half_combos(h, b):
    return (
        h.mean(0),
        h.mean(1),
        b.mean(-1),
        h.softmax(-1)[:, :4],
        b.log_softmax(-1)[:, :4],
        F.layer_norm(h, (64,))[:, :4],
        F.layer_norm(b, (64,))[:, :4],
        h.var(1),
        b.std(0)[:4],
        (h - h.mean(-1, keepdim=True)) / h.std(-1, keepdim=True),
        h.norm(dim=1),
        b.sum(0)[:4],
        h.cumsum(1)[:, -2:],
        h.logsumexp(1),
        F.normalize(b, dim=-1)[:, :3],
        h.amax(1),
        h.argmax(1),
    )


@case(torch.tensor([2.0, float("nan"), 1.0, float("nan"), 2.0, -0.0, 0.0]))
def unique_nan(x):
    return (
        torch.unique(x),
        torch.unique(x, return_counts=True),
        torch.unique(x, return_inverse=True),
        torch.isin(x, torch.tensor([float("nan"), 2.0])),
        torch.unique_consecutive(x),
        x.nan_to_num(),
        x.half().nan_to_num(),
        x.bfloat16().nan_to_num(posinf=1.0),
    )


@case(
    torch.tensor([1, 5, 2], dtype=torch.uint8),
    torch.tensor([-1, 3, 2], dtype=torch.int8),
    torch.tensor([1.5, 2.5, 0.5]),
)
def mixed_clamp_where(u, i, f):
    return (
        torch.where(u > 1, u, i),
        torch.clamp(u, i, torch.tensor(3)),
        torch.clamp(i, min=u),
        torch.clamp(u.long(), f, f + 1),
        torch.where(i > 0, f, i),
        torch.maximum(u, f),
        torch.lerp(f, f * 2, torch.tensor([0.0, 0.5, 1.0])),
        torch.lerp(f.half(), f.half() * 3, 0.7),
        torch.diff(u.long(), prepend=torch.tensor([10])),
        torch.diff(f, n=2),
        u.clamp(2, 4).dtype == torch.uint8,
    )


@case(torch.tensor([[1 + 2j, 2 - 1j, 0j]]))
def complex_var_dof(z):
    return (
        z.var(1, correction=3),
        z.var(correction=4),
        z.std(1, correction=5),
        torch.var_mean(z, 1, correction=3)[0],
        z.var(1),
    )


if __name__ == "__main__":
    main(sys.argv[1:])
