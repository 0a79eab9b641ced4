"""Order, ties and NaN in selection ops (session 31), written the way users write them:
kthvalue, mode, topk, sort/argsort/msort, max/min/argmax/argmin, median/nanmedian, cummax/
cummin, unique, searchsorted/bucketize, histc, bincount, aminmax, quantile, and gradients
through the selected elements. Each scenario runs eagerly and under
``torch.compile(..., backend="xla")``; every observation is compared exactly (values bit for
bit, NaN where eager has NaN, -0.0 apart from 0.0, dtypes, shapes, strides, ``.grad`` and its
None-ness, errors). A difference that ``backend="aot_eager"`` shows too is marked TORCH.

    OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/probe_order31.py [substring ...]
"""

from __future__ import annotations

import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _probe_common import observations, r, ri, run, same_error_or_value, same_items

import torch2xla  # noqa: F401

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
NAN = float("nan")


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.stride(), v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype.is_floating_point:
        if not torch.equal(a.isnan(), b.isnan()):
            return False
        keep = ~a.isnan()
        a, b = a[keep], b[keep]
        return torch.equal(a, b) and torch.equal(a.signbit(), b.signbit())
    return torch.equal(a, b)


def same(a, b, path) -> str | None:
    if a is None or b is None:
        return None if a is b else f"{path}: {a} vs {b}"
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "L":
        return same_items(a, b, path, same)
    if a[0] in ("E", "V"):
        return same_error_or_value(a, b, path)
    for i, field in enumerate(("dtype", "shape", "stride"), start=1):
        if a[i] != b[i]:
            return f"{path}: {field} {a[i]} (xla) vs {b[i]} (eager)"
    if not _bits_equal(a[4], b[4]):
        return f"{path}: values\n   xla   {a[4].flatten()[:24].tolist()}\n   eager {b[4].flatten()[:24].tolist()}"
    return None


def difference(got, exp):
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"observation {lg!r} {g[1:3]} (xla) vs {le!r} {e[1:3]} (eager)"
        d = same(g, e, lg)
        if d:
            return d
    if len(got) != len(exp):
        return f"observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return None


def compile_with(backend):
    def C(fn, **kw):
        return fn if backend is None else torch.compile(fn, backend=backend, **kw)

    return C


def compare(name, fn) -> str:
    exp = observations(fn, compile_with(None), describe)
    got = observations(fn, compile_with("xla"), describe)
    d = difference(got, exp)
    if d is None:
        return f"ok    {name}"
    ref = observations(fn, compile_with("aot_eager"), describe)
    tag = "TORCH" if difference(ref, exp) is not None else "DIFF "
    return f"{tag} {name}: {d}"[:1500]


def ties(*shape, lo=0, hi=4, seed=0, dtype=torch.float32):
    """Small integers as floats: many ties."""
    return ri(*shape, lo=lo, hi=hi, seed=seed).to(dtype)


def with_nans(x, p=0.2, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = x.clone()
    x[torch.rand(x.shape, generator=g) < p] = NAN
    return x


def leaf(x):
    return x.clone().requires_grad_()


# ============================================================================================
# kthvalue


@scenario
def kthvalue_ties_small(C, rec):
    x = torch.tensor([3.0, 1.0, 3.0, 1.0, 2.0, 3.0, 0.0, 1.0, 1.0, 3.0])
    f = C(lambda x: [x.kthvalue(k) for k in (1, 3, 5, 8, 10)])
    rec("out", f(x))


@scenario
def kthvalue_ties_rows(C, rec):
    x = ties(6, 50)
    f = C(lambda x: (x.kthvalue(7, dim=1), torch.kthvalue(x, 25, -1, keepdim=True)))
    rec("out", f(x))


@scenario
def kthvalue_ties_dim0_int(C, rec):
    x = ri(33, 5, lo=0, hi=3)
    rec("out", C(lambda x: x.kthvalue(17, 0))(x))


@scenario
def kthvalue_nan(C, rec):
    x = with_nans(ties(5, 40))
    rec("out", C(lambda x: [x.kthvalue(k, 1) for k in (1, 20, 35, 40)])(x))


@scenario
def kthvalue_grad_ties(C, rec):
    x = leaf(ties(4, 30))

    def f(x):
        v, i = x.kthvalue(10, dim=-1)
        return (v * torch.arange(4.0)).sum(), i

    loss, i = C(f)(x)
    loss.backward()
    rec("i", i)
    rec("grad", x.grad)


@scenario
def kthvalue_signed_zeros(C, rec):
    x = torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0, -0.0, 0.0] * 5)
    rec("out", C(lambda x: [x.kthvalue(k) for k in (1, 5, 17, 30)])(x))


# ============================================================================================
# mode


@scenario
def mode_ties_small(C, rec):
    x = torch.tensor([[1.0, 2.0, 2.0, 1.0, 3.0], [4.0, 4.0, 5.0, 5.0, 5.0]])
    rec("out", C(lambda x: torch.mode(x, dim=1))(x))


@scenario
def mode_many_ties_long(C, rec):
    x = ties(4, 40, hi=5)
    rec("out", C(lambda x: x.mode(-1))(x))


@scenario
def mode_int_labels_dim0(C, rec):
    votes = ri(7, 12, lo=0, hi=3)
    rec("out", C(lambda v: torch.mode(v, 0))(votes))


@scenario
def mode_nan_small(C, rec):
    x = torch.tensor([[1.0, NAN, 1.0, 2.0], [NAN, NAN, 3.0, 3.0], [2.0, 0.0, NAN, 0.0]])
    rec("out", C(lambda x: x.mode(1))(x))


@scenario
def mode_grad(C, rec):
    x = leaf(ties(3, 9, hi=3))

    def f(x):
        v, i = x.mode(1)
        return v.sum() * 2, i

    loss, i = C(f)(x)
    loss.backward()
    rec("i", i)
    rec("grad", x.grad)


# ============================================================================================
# topk


@scenario
def topk_ties_sorted(C, rec):
    x = ties(3, 20)
    rec("out", C(lambda x: torch.topk(x, 4))(x))


@scenario
def topk_beam_search_scores(C, rec):
    scores = ties(2, 200, hi=50)
    rec("out", C(lambda s: torch.topk(s, 3, dim=-1))(scores))


@scenario
def topk_largest_false(C, rec):
    x = ties(3, 20)
    rec("out", C(lambda x: x.topk(3, largest=False))(x))


@scenario
def topk_nan(C, rec):
    x = with_nans(r(3, 10))
    rec("out", C(lambda x: (x.topk(3), x.topk(3, largest=False)))(x))


@scenario
def topk_int_dtypes(C, rec):
    outs = []
    for dt in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        x = ri(2, 9, lo=0, hi=100).to(dt)
        outs.append(C(lambda x: x.topk(2, largest=False).values)(x))
        outs.append(C(lambda x: x.topk(2).values)(x))
    rec("out", outs)


@scenario
def topk_no_ties_unsorted_values(C, rec):
    x = r(3, 30)
    rec("out", C(lambda x: x.topk(5, sorted=False).values.sort(-1).values)(x))


@scenario
def topk_grad_no_ties(C, rec):
    x = leaf(r(3, 12))
    v = C(lambda x: x.topk(3).values.pow(2).sum())(x)
    v.backward()
    rec("grad", x.grad)


# ============================================================================================
# sort / argsort / msort


@scenario
def sort_stable_ties(C, rec):
    x = ties(3, 40)
    rec("out", C(lambda x: (x.sort(stable=True), x.sort(descending=True, stable=True)))(x))


@scenario
def sort_small_ties_default(C, rec):
    x = ties(3, 12)
    rec("out", C(lambda x: (x.sort(), x.argsort(descending=True)))(x))


@scenario
def sort_nan_stable(C, rec):
    x = with_nans(r(3, 10))
    rec("out", C(lambda x: (x.sort(stable=True), x.sort(-1, True, stable=True)))(x))


@scenario
def sort_signed_zeros_stable(C, rec):
    x = torch.tensor([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, -0.0])
    rec("out", C(lambda x: (x.sort(stable=True), x.sort(descending=True, stable=True)))(x))


@scenario
def sort_inf_nan_stable(C, rec):
    x = torch.tensor([NAN, float("inf"), -float("inf"), NAN, 0.0, float("inf"), -NAN])
    rec("out", C(lambda x: (torch.sort(x, stable=True), torch.argsort(x, stable=True)))(x))


@scenario
def sort_int_bool(C, rec):
    x = ri(2, 9, lo=-3, hi=3)
    b = ri(2, 9, lo=0, hi=2).bool()
    u = ri(2, 9, lo=0, hi=255).to(torch.uint8)
    rec(
        "out",
        C(lambda x, b, u: (x.sort(stable=True), b.sort(stable=True), u.sort(stable=True)))(x, b, u),
    )


@scenario
def msort_ties(C, rec):
    x = ties(9, 3)
    rec("out", C(torch.msort)(x))


@scenario
def sort_grad_ties_stable(C, rec):
    x = leaf(ties(2, 10))
    v = C(lambda x: (x.sort(stable=True).values * torch.arange(10.0)).sum())(x)
    v.backward()
    rec("grad", x.grad)


# ============================================================================================
# max / min / argmax / argmin


@scenario
def argmax_greedy_tied_logits(C, rec):
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [0.0, -1.0, 0.0, 0.0]])
    rec("out", C(lambda x: (x.argmax(-1), x.argmin(-1), x.argmax(), x.argmin()))(logits))


@scenario
def argmax_nan(C, rec):
    x = torch.tensor([[1.0, NAN, 3.0, NAN], [NAN, 2.0, 2.0, 1.0], [0.0, 1.0, 2.0, 3.0]])
    rec("out", C(lambda x: (x.argmax(1), x.argmin(1), x.argmax(), x.argmin(), x.argmax(0)))(x))


@scenario
def max_dim_ties_nan(C, rec):
    x = torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 2.0, 1.0, 2.0], [-0.0, 0.0, -0.0, 0.0]])
    rec("out", C(lambda x: (x.max(dim=1), x.min(dim=1), x.max(0), x.min(0)))(x))


@scenario
def max_signed_zero_values(C, rec):
    x = torch.tensor([[-0.0, 0.0], [0.0, -0.0]])
    rec("out", C(lambda x: (x.max(1).values, x.amax(1), x.max(), x.min(), x.amin(0)))(x))


@scenario
def max_bool_int(C, rec):
    b = torch.tensor([[False, True, True], [False, False, False]])
    i = torch.tensor([[3, 7, 7], [-1, -1, -2]], dtype=torch.int32)
    u = torch.tensor([[0, 255, 255], [1, 1, 0]], dtype=torch.uint8)

    def f(b, i, u):
        return (
            b.max(),
            b.max(1),
            b.argmax(1),
            i.max(1),
            i.argmin(1),
            u.max(0),
            u.argmax(),
            b.amax(1),
        )

    rec("out", C(f)(b, i, u))


@scenario
def aminmax_nan_ties(C, rec):
    x = torch.tensor([[1.0, NAN, 3.0], [2.0, 2.0, -0.0], [0.0, -0.0, 0.0]])
    rec(
        "out",
        C(lambda x: (torch.aminmax(x), torch.aminmax(x, dim=1), x.aminmax(dim=0, keepdim=True)))(x),
    )


@scenario
def max_dim_grad_ties(C, rec):
    x = leaf(torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]))
    loss = C(lambda x: x.max(dim=1).values.sum() + x.min(dim=1)[0].sum() * 3)(x)
    loss.backward()
    rec("grad", x.grad)


@scenario
def amax_grad_ties(C, rec):
    x = leaf(torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]))
    loss = C(lambda x: x.amax(1).sum() + 5 * x.amin(dim=(0, 1)) + x.max() * 7)(x)
    loss.backward()
    rec("grad", x.grad)


@scenario
def max_grad_nan(C, rec):
    x = leaf(torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 2.0, 1.0, 2.0]]))
    loss = C(
        lambda x: (
            (x.max(1).values * torch.tensor([1.0, 2.0])).sum()
            + x.amax(1).sum() * 10
            + x.max() * 100
        )
    )(x)
    loss.backward()
    rec("grad", x.grad)


@scenario
def maximum_clamp_grad_ties(C, rec):
    x = leaf(torch.tensor([1.0, 2.0, 2.0, 3.0]))
    y = leaf(torch.tensor([2.0, 2.0, 1.0, 3.0]))
    loss = C(lambda x, y: (torch.maximum(x, y) * 2 + torch.minimum(x, y) * 3).sum())(x, y)
    loss.backward()
    rec("grads", [x.grad, y.grad])


# ============================================================================================
# median / nanmedian


@scenario
def median_dim_ties(C, rec):
    x = ties(4, 21)
    rec("out", C(lambda x: (x.median(1), x.median(0), x.nanmedian(1)))(x))


@scenario
def median_even_nan(C, rec):
    x = torch.tensor([[1.0, NAN, 3.0, 2.0], [NAN, NAN, NAN, NAN], [4.0, 4.0, NAN, 1.0]])
    rec("out", C(lambda x: (x.median(1), x.nanmedian(1), x.median(), x.nanmedian()))(x))


@scenario
def nanmedian_all_nan_rows(C, rec):
    x = torch.full((3, 37), NAN)
    y = torch.full((2, 5), NAN)
    rec("out", C(lambda x, y: (x.nanmedian(1), y.nanmedian(-1), x.nanmedian()))(x, y))


@scenario
def median_signed_zeros(C, rec):
    x = torch.tensor([[0.0, -0.0, 0.0, -0.0, 1.0], [-0.0, 0.0, -1.0, 0.0, -0.0]])
    rec("out", C(lambda x: (x.median(1), x.nanmedian(1), x.median()))(x))


@scenario
def median_grad_ties(C, rec):
    x = leaf(torch.tensor([[1.0, 2.0, 2.0, 3.0, 2.0], [0.0, 0.0, 1.0, 1.0, 5.0]]))
    loss = C(lambda x: x.median() * 10 + x.median(dim=1).values.sum())(x)
    loss.backward()
    rec("grad", x.grad)


@scenario
def median_loss_backward(C, rec):
    x = leaf(torch.tensor([1.0, 2.0, 2.0, 2.0, 3.0, NAN]))
    loss = C(lambda x: x.nanmedian() + x.median())(x)
    loss.backward()
    rec("grad", x.grad)


@scenario
def median_int(C, rec):
    x = ri(3, 8, lo=0, hi=3)
    rec("out", C(lambda x: (x.median(1), x.median(), x.nanmedian(0)))(x))


# ============================================================================================
# cummax / cummin


@scenario
def cummax_ties_nan(C, rec):
    x = torch.tensor(
        [[1.0, 3.0, 3.0, 2.0, 3.0], [NAN, 1.0, NAN, 5.0, 5.0], [2.0, NAN, 1.0, 3.0, NAN]]
    )
    rec("out", C(lambda x: (x.cummax(1), x.cummin(1), torch.cummax(x, 0)))(x))


@scenario
def cummax_signed_zero(C, rec):
    x = torch.tensor([-0.0, 0.0, -0.0, 0.0])
    rec("out", C(lambda x: (x.cummax(0), x.cummin(0)))(x))


@scenario
def cummax_int_bool(C, rec):
    x = ri(3, 7, lo=0, hi=3)
    b = x > 1
    rec("out", C(lambda x, b: (x.cummax(1), x.cummin(0), b.cummax(1)))(x, b))


@scenario
def cummax_grad_ties(C, rec):
    x = leaf(torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0], [2.0, 2.0, 2.0, 1.0, 2.0]]))
    loss = C(lambda x: (x.cummax(1).values * torch.arange(1.0, 6.0)).sum() + x.cummin(1)[0].sum())(
        x
    )
    loss.backward()
    rec("grad", x.grad)


# ============================================================================================
# unique / unique_consecutive


@scenario
def unique_variants(C, rec):
    x = torch.tensor([3, 1, 2, 3, 1, 1, 0])
    f = C(lambda x: (torch.unique(x), torch.unique(x, return_inverse=True, return_counts=True)))
    rec("out", f(x))


@scenario
def unique_float_nan(C, rec):
    x = torch.tensor([1.0, NAN, -0.0, 0.0, NAN, 1.0])
    rec("out", C(lambda x: torch.unique(x, return_counts=True))(x))


@scenario
def unique_dim(C, rec):
    x = torch.tensor([[1, 2], [0, 1], [1, 2], [0, 0]])
    rec("out", C(lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True))(x))


@scenario
def unique_consecutive(C, rec):
    x = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2])
    f = C(lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True))
    rec("out", f(x))


@scenario
def unique_sorted_false(C, rec):
    x = torch.tensor([3, 1, 2, 3, 1])
    rec("out", C(lambda x: x.unique(sorted=False).sort().values)(x))


# ============================================================================================
# searchsorted / bucketize


@scenario
def searchsorted_sides_ties(C, rec):
    s = torch.tensor([1.0, 2.0, 2.0, 2.0, 3.0, 5.0])
    v = torch.tensor([[2.0, 0.0, 6.0], [3.0, 2.5, NAN]])
    f = C(
        lambda s, v: (
            torch.searchsorted(s, v),
            torch.searchsorted(s, v, side="right"),
            torch.searchsorted(s, v, right=True, out_int32=True),
        )
    )
    rec("out", f(s, v))


@scenario
def searchsorted_sorter(C, rec):
    s = torch.tensor([3.0, 1.0, 2.0, 2.0, 5.0])
    sorter = torch.argsort(s, stable=True)
    v = torch.tensor([2.0, 4.0, 0.5])
    rec("out", C(lambda s, v, so: torch.searchsorted(s, v, sorter=so, side="right"))(s, v, sorter))


@scenario
def searchsorted_nan_seq(C, rec):
    s = torch.tensor([[1.0, 2.0, NAN], [NAN, NAN, NAN]])
    v = torch.tensor([[1.5, NAN], [0.0, NAN]])
    rec(
        "out",
        C(lambda s, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True)))(s, v),
    )


@scenario
def searchsorted_int_float_mix(C, rec):
    s = torch.tensor([1, 3, 3, 7])
    v = torch.tensor([3.0, 2.5, 7.5])
    rec(
        "out",
        C(
            lambda s, v: (
                torch.searchsorted(s, v),
                torch.searchsorted(s, 3),
                torch.bucketize(v, s, right=True),
            )
        )(s, v),
    )


@scenario
def bucketize_ties_nan(C, rec):
    b = torch.tensor([0.0, 1.0, 1.0, 2.0])
    x = torch.tensor([[1.0, NAN, -1.0], [2.0, 0.5, 1.0]])
    rec(
        "out",
        C(lambda x, b: (torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True)))(
            x, b
        ),
    )


# ============================================================================================
# histc / bincount / histogram


@scenario
def histc_edges(C, rec):
    x = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.0, 2.5, 0.1])
    rec(
        "out",
        C(lambda x: (torch.histc(x, bins=4, min=0, max=4), torch.histc(x, 3), x.histc(5, 1, 3)))(x),
    )


@scenario
def histc_nan_ignored_explicit_range(C, rec):
    x = torch.tensor([0.5, NAN, 1.5, 3.0])
    rec("out", C(lambda x: torch.histc(x, bins=3, min=0, max=3))(x))


@scenario
def histc_int(C, rec):
    x = torch.tensor([0, 1, 1, 3, 9], dtype=torch.float64)
    rec("out", C(lambda x: torch.histc(x, bins=3))(x))


@scenario
def bincount_weights(C, rec):
    x = torch.tensor([0, 1, 1, 3, 2, 1])
    w = torch.tensor([0.5, 1.0, 1.5, 2.0, 0.25, -1.0])
    rec(
        "out",
        C(lambda x, w: (torch.bincount(x), torch.bincount(x, w), x.bincount(minlength=7)))(x, w),
    )


# ============================================================================================
# quantile / nanquantile


@scenario
def quantile_interpolations(C, rec):
    x = torch.tensor([[1.0, 3.0, 2.0, 2.0, 7.0], [0.0, -1.0, 4.0, 4.0, 4.0]])
    outs = []
    for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
        outs.append(C(lambda x, mode=mode: torch.quantile(x, 0.4, dim=1, interpolation=mode))(x))
        outs.append(
            C(
                lambda x, mode=mode: torch.quantile(
                    x, torch.tensor([0.1, 0.5, 0.875]), interpolation=mode
                )
            )(x)
        )
    rec("out", outs)


@scenario
def quantile_nearest_half(C, rec):
    x = torch.arange(6.0)
    rec(
        "out",
        C(
            lambda x: [
                torch.quantile(x, q, interpolation="nearest") for q in (0.1, 0.3, 0.5, 0.7, 0.9)
            ]
        )(x),
    )


@scenario
def quantile_nan(C, rec):
    x = torch.tensor([[1.0, NAN, 3.0, 2.0], [4.0, 5.0, 6.0, 7.0], [NAN, NAN, NAN, NAN]])
    f = C(
        lambda x: (
            torch.quantile(x, 0.5, dim=1),
            torch.nanquantile(x, 0.5, dim=1),
            torch.nanquantile(x, torch.tensor([0.25, 1.0]), dim=1, keepdim=True),
        )
    )
    rec("out", f(x))


@scenario
def quantile_grad_ties(C, rec):
    x = leaf(torch.tensor([1.0, 2.0, 2.0, 2.0, 5.0]))
    loss = C(
        lambda x: torch.quantile(x, 0.3) + torch.quantile(x, 0.5, interpolation="midpoint") * 2
    )(x)
    loss.backward()
    rec("grad", x.grad)


# ============================================================================================
# everyday uses


@scenario
def greedy_decode_tied_logits(C, rec):
    logits = ties(2, 5, 11, hi=3)
    rec("out", C(lambda l: l.argmax(-1))(logits))


@scenario
def top_p_sampling_sort(C, rec):
    logits = ties(2, 30, hi=6)

    def f(logits):
        sorted_logits, sorted_idx = torch.sort(logits, descending=True, stable=True)
        probs = sorted_logits.softmax(-1).cumsum(-1)
        keep = probs <= 0.9
        return sorted_idx.masked_fill(~keep, -1)

    rec("out", C(f)(logits))


@scenario
def accuracy_from_argmax(C, rec):
    out = ties(8, 4, hi=2)
    y = ri(8, lo=0, hi=4)
    rec("out", C(lambda o, y: (o.argmax(1) == y).float().mean())(out, y))


@scenario
def max_pool_like_indices(C, rec):
    x = ties(2, 3, 6, hi=2)
    rec("out", C(lambda x: x.max(-1, keepdim=True))(x))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], SCENARIOS, compare))
