"""Probe integer, ordering, random and autocast semantics for silent wrong answers: user-style
functions run once in eager PyTorch (CPU) and once through ``torch.compile(backend="xla")``.

    PYTHONPATH=. python scripts/probe_intsem.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_intsem.py   # torch's own differences

Where ``probe_dtypes.py`` sweeps elementwise ops over special values and ``probe_edges.py``
holds integer matrix products, shifts and ties, this probe writes the code the way users write
it and looks at what those leave out:

- ``int_*``: out-of-range float -> int casts (NaN, infinities, huge values: eager's CPU
  result), division and remainder by zero through every spelling (``//``, ``%``, ``torch.div``
  with a rounding mode, ``fmod``, in place, a zero hidden in a dead ``where`` branch: eager
  raises, so must we, naming the op), Python integers beyond the tensor's dtype, int64 values
  beyond 2**53 through ops a lowering might do in floating point (sort, max, cumsum, where,
  clamp, gather), counts and masks (``(x > 0).sum()``, ``mask.float().mean()``).
- ``ord_*``: sort/argsort/topk/kthvalue/median/mode/unique/searchsorted over ties, NaN,
  infinities and large int64 values, in 2-d along either dim, descending, with ``out=``
  indices used to gather.
- ``rng_*``: properties compared, not values (torch2xla's stream is not torch's): dtypes,
  shapes, ranges, ``manual_seed`` reproducibility, fresh draws per call, ``torch.Generator``
  arguments, dropout in train and eval modes of a module.
- ``amp_*``: ``torch.autocast("cpu")`` (bfloat16 and float16) around and inside the compiled
  function: output dtypes and values, nested ``enabled=False`` regions, gradients' dtypes.

Observed and compared as in ``probe_dtypes.py`` (its ``same``). Prints ``ok`` / ``DIFF`` /
``CRASH`` per case and a summary.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_leaves

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import describe, difference, observations, run, same_items
from probe_dtypes import same

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, U8, I16, I32, I64, B = (
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
)
INTS = (I8, U8, I16, I32, I64)
NAN, INF = float("nan"), float("inf")


def short(dtype) -> str:
    return str(dtype).replace("torch.", "")


def t(*vals, dtype=None):
    return torch.tensor(vals, dtype=dtype)


def case(name, f, make, red=False):
    """``f(*make())`` compiled against eager: outputs and inputs after the call (``red``: a
    float tolerance relative to the output's largest value, see ``same_scaled``)."""

    def run_case(C, rec):
        args = make()
        try:
            out = C(f)(*args)
        finally:
            rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        rec("out", out)

    scenario(name, run_case, red)


def scenario(name, fn, red=False):
    """``fn(C, rec)``: a scenario recording what it observes (``C`` compiles or not)."""
    assert name not in CASES, name
    fn.red = red
    CASES[name] = fn


def observe(fn, compiled):
    def C(f):
        return torch.compile(f, backend=BACKEND) if compiled else f

    return observations(fn, C, describe)


# Products and their gradients accumulate in an order of their own (XLA's dot and
# convolution, oneDNN's): an element's error is bounded by its dtype's epsilon times the sum of
# the magnitudes summed, which the output's largest value stands for. Autocast and matmul
# cases compare floats within ``SCALED`` epsilons of that largest value (NaN, infinities
# and dtype exactly). Under autocast a float32 output computed from half-precision products
# (a loss of bfloat16 logits, a weight's gradient) carries their rounding: ``lowp`` names
# that dtype, whose epsilon then bounds float32 outputs too.
SCALED = {F16: 2, BF16: 2, F32: 64, F64: 64}


def same_scaled(a, b, path, lowp=None):
    if a[0] == b[0] == "T" and a[1] == b[1] and a[2] == b[2] and a[1].is_floating_point:
        x, y = a[3].double(), b[3].double()
        if not torch.equal(x.isnan(), y.isnan()) or not torch.equal(
            x.isinf() & (x > 0), y.isinf() & (y > 0)
        ):
            return f"{path}: NaN/inf positions differ"
        fin = y.isfinite() & x.isfinite()
        scale = y[fin].abs().max().item() if fin.any() else 0.0
        eps = torch.finfo(a[1]).eps * SCALED[a[1]]
        if lowp is not None and a[1] in (F32, lowp):
            eps = max(eps, torch.finfo(lowp).eps * SCALED[lowp])
        limit = eps * max(scale, torch.finfo(a[1]).tiny)
        err = (x[fin] - y[fin]).abs()
        if err.numel() and err.max().item() > limit:
            return f"{path}: {a[1]} differ by {err.max().item():.3g} > {limit:.3g}"
        return None
    if a[0] == b[0] == "L":
        return same_items(a, b, path, lambda x, y, p: same_scaled(x, y, p, lowp))
    return same(a, b, path)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    if fn.red == "scaled":
        d = difference(got, exp, same_scaled)
    elif fn.red in (BF16, F16):  # autocast to that dtype
        d = difference(got, exp, lambda g, e, label: same_scaled(g, e, label, fn.red))
    else:
        d = difference(got, exp, lambda g, e, label: same(g, e, label, fn.red))
    if d:
        return f"DIFF  {name}: {d}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


# ============================================================================================
# 1. integers
BIG = [NAN, INF, -INF, 1e20, -1e20, 3e9, -3e9, 70000.0, -70000.0, 300.0, -300.0, -1.0, 2.5]
for _src in (F32, F64, F16, BF16):
    case(
        f"int_cast_nonfinite_{short(_src)}",
        lambda x: (x.long(), x.int(), x.short(), x.to(I8), x.to(U8), x.bool()),
        lambda _s=_src: (torch.tensor(BIG, dtype=F64).to(_s),),
    )
case(
    "int_cast_floor_long",
    lambda x: (torch.floor(x / 0.0).long(), (x * 1e30).int(), x.exp().to(I32)),
    lambda: (t(1.0, -1.0, 0.0, 100.0),),
)
for _dt in INTS:
    _z = t(3, 0, 2, 5).to(_dt)
    _x = t(7, 5, 100, 9).to(_dt) if _dt == U8 else t(-7, 5, -100, 9).to(_dt)
    for _op, _f in {
        "floordiv": lambda a, b: a // b,
        "mod": lambda a, b: a % b,
        "remainder": lambda a, b: torch.remainder(a, b),
        "fmod": lambda a, b: torch.fmod(a, b),
        "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
        "div_trunc": lambda a, b: a.div(b, rounding_mode="trunc"),
        "floor_divide": lambda a, b: torch.floor_divide(a, b),
        "ifloordiv": lambda a, b: a.clone().__ifloordiv__(b),
        "imod": lambda a, b: a.clone().__imod__(b),
        "where_guard": lambda a, b: torch.where(b != 0, a // b, torch.zeros_like(a)),
        "scalar_zero_floordiv": lambda a, b: a // 0,
        "scalar_zero_mod": lambda a, b: a % 0,
        "scalar_zero_fmod": lambda a, b: torch.fmod(a, 0),
        "scalar_zero_trunc": lambda a, b: torch.div(a, 0, rounding_mode="trunc"),
        "rscalar_floordiv": lambda a, b: 12 // b,
        "rscalar_mod": lambda a, b: 12 % b,
        "zero_then_add": lambda a, b: (a // b + 1).sum(),
    }.items():
        case(
            f"int_divzero_{_op}_{short(_dt)}",
            _f,
            lambda _x=_x, _z=_z: (_x.clone(), _z.clone()),
        )
    case(
        f"int_div_neg_operands_{short(_dt)}",
        lambda a, b: (a // b, a % b, torch.fmod(a, b), a.div(b, rounding_mode="trunc"), a / b),
        lambda _dt=_dt: (
            (t(7, 250, 3, 255, 0, 9) if _dt == U8 else t(-7, 7, -7, 7, 0, -1)).to(_dt),
            (t(2, 3, 255, 7, 5, 1) if _dt == U8 else t(2, -2, -2, 3, -3, 5)).to(_dt),
        ),
    )
    case(
        f"int_pyscalar_beyond_{short(_dt)}",
        lambda x: (x + 300, x * 1000, x - 2**33, x // 1000, x % 1000, x & 0x1FF),
        lambda _dt=_dt: ((t(1, 2, 100, 127) if _dt != U8 else t(1, 2, 200, 255)).to(_dt),),
    )
    case(
        f"int_overflow_user_{short(_dt)}",
        lambda x: (x + x, x * x, -x, x.abs(), x.sum(), x.cumsum(0), x.prod(), x**2, x.square()),
        lambda _dt=_dt: (
            torch.tensor([torch.iinfo(_dt).max, torch.iinfo(_dt).min, 3, 100], dtype=_dt),
        ),
    )
    case(
        f"int_counts_{short(_dt)}",
        lambda x: (
            (x > 0).sum(),
            (x > 0).float().mean(),
            (x == 3).sum(0),
            (x > 0).sum(dtype=torch.int32),
            (x > 0).cumsum(0),
            (x > 0).int().sum(),
            x.bool().any(),
            (x > 0).prod(),
            x.sum() / x.numel(),
            x.float().mean(),
        ),
        lambda _dt=_dt: (t(3, 1, 3, 0, 1, 3, 0, 2).to(_dt),),
    )
case(
    "int64_big_ops",
    lambda x: (
        x.sort(),
        x.argsort(descending=True),
        x.topk(2),
        x.max(),
        x.argmax(),
        x.cummax(0),
        torch.where(x > 0, x, x + 1),
        x.clamp(min=2**60),
        x.clamp(max=2**53 + 1),
        torch.maximum(x, x.flip(0)),
        x.cumsum(0),
        x.sum(),
        x.median(),
        x.kthvalue(2),
        torch.unique(x),
        x.gather(0, t(3, 2, 1, 0)),
        x.abs(),
        x.sign(),
        x.max(0),
        torch.searchsorted(x.sort()[0], x),
        x.eq(2**53),
        x.div(3, rounding_mode="floor"),
        x % 7,
    ),
    lambda: (t(2**53 + 1, 2**53, 2**53 + 3, -(2**62) - 1),),
)
case(
    "int64_big_reductions_2d",
    lambda x: (
        x.amax(1),
        x.amin(0),
        x.max(1),
        x.min(0),
        x.sort(1),
        x.prod(1),
        x.sum(0),
        torch.aminmax(x),
        x.mode(1),
        x.logcumsumexp if False else x.cummin(1),
    ),
    lambda: (t(2**60 + 1, 2**60, 2**60 + 3, 2**60 + 2, 5, 2**59 + 7).reshape(2, 3),),
)
case(
    "int_bitwise_user",
    lambda x, m: (
        x & m,
        x | m,
        x ^ m,
        ~m,
        m & (x > 0),
        (x > 0) | m,
        m ^ True,
        x & 0xFF,
        (x >> 2) & 1,
        x.bitwise_and(3).bool(),
    ),
    lambda: (t(-5, 3, 255, 1024, -1), t(True, False, True, True, False)),
)
case(
    "int_shift_python_ints",
    lambda x: (x << 3, x >> 1, 1 << x.clamp(0, 62), x << 62, x >> 63, (x << 60) >> 60),
    lambda: (t(-5, 3, 255, 1024, -1, 7),),
)
for _dt in (I8, U8, I16, I32):
    case(
        f"int_shift_width_{short(_dt)}",
        lambda x, s: (x << s, x >> s, x << torch.iinfo(x.dtype).bits, x >> 40),
        lambda _dt=_dt: (
            (t(5, 100, 1, 127, 3) if _dt == U8 else t(-5, 100, -1, 127, 3)).to(_dt),
            t(8, 16, 32, 33, 7).to(_dt) if _dt != I8 else t(8, 16, 32, 33, 7).to(I8),
        ),
    )
case(
    "int_div_rounding_scalars",
    lambda x: (
        torch.div(x, -3, rounding_mode="floor"),
        torch.div(x, -3, rounding_mode="trunc"),
        torch.div(x, 2.5, rounding_mode="floor"),
        torch.div(-7, x.clamp(min=1), rounding_mode="floor"),
        torch.div(x, x.clamp(min=1)),
        x // -1,
        x % -1,
    ),
    lambda: (t(-7, 7, -1, 0, 9, -(2**63)),),
)
case(
    "int_min_neg_abs",
    lambda a, b, c: (-a, a.abs(), a.neg(), torch.abs(b), -c, c.abs(), a // -1, b // -1, c % -1),
    lambda: (
        t(-(2**63), 5),
        t(-(2**31), 5, dtype=I32),
        t(-128, -127, 0, 127, dtype=I8),
    ),
)
case(
    "int_to_float_big",
    lambda x: (x.float(), x.double(), x.half(), x.bfloat16(), x.float().long(), x * 1.0, x / 1),
    lambda: (t(2**53 + 1, 2**63 - 1, -(2**63), 2**24 + 1, 65520, 70000),),
)
case(
    "int_neg_to_uint8",
    lambda x, f: (x.to(U8), (-x).to(U8), x.byte(), f.byte(), f.to(U8), (f - 300).to(U8)),
    lambda: (t(-1, -2, -255, -256, 256, 511), t(-1.0, -2.7, -255.0, 256.0, 511.9, -0.5)),
)
case(
    "int_mean_raises",
    lambda x: x.mean(),
    lambda: (t(1, 2, 3),),
)
case(
    "int_bool_arith_promotion",
    lambda m, x: (
        m + m,
        m.sum(),
        m.sum(0),
        m * x,
        m + 1.5,
        m.cumsum(0),
        m.prod(),
        m.mean(dtype=F32),
    ),
    lambda: (t(True, False, True), t(3, 4, 5, dtype=I8)),
)
case(
    "int_pow_neg_exp_raises",
    lambda x: x**-1,
    lambda: (t(1, 2, 3),),
)
case(
    "int_pow_wrap",
    lambda x: (x**3, 2**x, x.pow(x), torch.pow(x, 2)),
    lambda: (t(100, 7, 11, 3, dtype=I8),),
)
case(
    "int_true_div_zero",
    lambda a, b: (a / b, a / 0, torch.true_divide(a, b)),
    lambda: (t(1, 0, -1), t(0, 0, 0)),
)


# ============================================================================================
# 2. ordering
def _ties():
    return t(2.0, 1.0, NAN, 2.0, -0.0, 0.0, 1.0, NAN, INF, -INF, 2.0)


case(
    "ord_sort_nan_ties",
    lambda x: (
        x.sort(),
        x.sort(stable=True),
        x.sort(descending=True),
        x.sort(descending=True, stable=True),
        x.argsort(),
        x.argsort(descending=True, stable=True),
        torch.msort(x),
    ),
    lambda: (_ties(),),
)
case(
    "ord_sort_2d_dims",
    lambda x: (x.sort(0, stable=True), x.sort(1, descending=True, stable=True), x.argsort(0)),
    lambda: (t(1.0, 2.0, 1.0, NAN, 1.0, 1.0, 0.0, NAN, 2.0, 1.0, 1.0, 1.0).reshape(3, 4),),
)
case(
    "ord_topk_nan_ties",
    lambda x: (x.topk(4), x.topk(4, largest=False), x.topk(3, sorted=True), x.topk(11)),
    lambda: (_ties(),),
)
case(
    "ord_argmax_nan_ties",
    lambda x: (
        x.argmax(),
        x.argmin(),
        x.max(0),
        x.min(0),
        x.max(),
        torch.argmax(x[:2]),
        x[~x.isnan()].argmax(),
    ),
    lambda: (_ties(),),
)
case(
    "ord_argmax_2d_ties",
    lambda x: (
        x.argmax(1),
        x.argmin(0),
        x.max(1),
        x.min(1, keepdim=True),
        x.argmax(1, keepdim=True),
    ),
    lambda: (t(1.0, 3.0, 3.0, NAN, 1.0, NAN, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0).reshape(3, 4),),
)
case(
    "ord_kthvalue_median",
    lambda x, y: (
        x.kthvalue(3),
        y.kthvalue(2),
        y.median(),
        y.median(0),
        x.median(),
        x.nanmedian(),
        y.nanmedian(0),
        torch.quantile(y, 0.5),
    ),
    lambda: (_ties(), t(3.0, 1.0, 2.0, 1.0, 4.0, 2.0)),
)
case(
    "ord_median_2d_even",
    lambda x: (x.median(1), x.median(0), x.nanmedian(1)),
    lambda: (t(4.0, 1.0, 3.0, 2.0, 1.0, 1.0, 5.0, 5.0, NAN, 0.0, 2.0, 0.0).reshape(3, 4),),
)
case(
    "ord_mode_ties",
    lambda x, y: (x.mode(), y.mode(1), y.mode(0)),
    lambda: (t(3, 1, 3, 1, 2, 0), t(1.0, 2.0, 2.0, 1.0, 5.0, 5.0, 4.0, 4.0).reshape(2, 4)),
)
case(
    "ord_unique_variants",
    lambda x: (
        torch.unique(x),
        torch.unique(x, sorted=True, return_inverse=True, return_counts=True),
        torch.unique_consecutive(x, return_counts=True, return_inverse=True),
        x.unique(return_counts=True),
    ),
    lambda: (t(3.0, 1.0, 3.0, NAN, 1.0, NAN, -0.0, 0.0),),
)
case(
    "ord_unique_dim",
    lambda x: (
        torch.unique(x, dim=0, return_inverse=True, return_counts=True),
        torch.unique(x, dim=1),
        torch.unique_consecutive(x, dim=0, return_counts=True),
    ),
    lambda: (t(1, 2, 1, 2, 0, 1, 1, 2, 0, 0, 1, 2).reshape(4, 3),),
)
case(
    "ord_nonzero_order",
    lambda x: (x.nonzero(), torch.nonzero(x, as_tuple=True), torch.argwhere(x), x[x > 0]),
    lambda: (t(0.0, 1.0, 2.0, 0.0, NAN, -1.0, 0.0, 3.0).reshape(2, 4),),
)
case(
    "ord_searchsorted",
    lambda b, v: (
        torch.searchsorted(b, v),
        torch.searchsorted(b, v, right=True),
        torch.searchsorted(b, v, side="right"),
        torch.searchsorted(b, v, out_int32=True),
        torch.bucketize(v, b),
        torch.bucketize(v, b, right=True),
        torch.bucketize(v, b, out_int32=True),
    ),
    lambda: (
        t(-INF, 0.0, 1.0, 1.0, 1.0, 3.0, INF, NAN),
        t(NAN, -INF, 1.0, 0.5, INF, 3.0, -0.0, 7.0),
    ),
)
case(
    "ord_searchsorted_2d_int",
    lambda b, v: (
        torch.searchsorted(b, v),
        torch.searchsorted(b, v, side="right"),
        torch.searchsorted(b.float(), v),
        torch.bucketize(v.float(), b[0]),
    ),
    lambda: (t(1, 2, 2, 5, 0, 0, 3, 3).reshape(2, 4), t(2, 0, 5, 3, 3, -1).reshape(2, 3)),
)
case(
    "ord_searchsorted_sorter",
    lambda b, v: torch.searchsorted(b, v, sorter=b.argsort(stable=True), side="right"),
    lambda: (t(3.0, 1.0, 2.0, 1.0), t(1.0, 2.0, 0.0, 5.0)),
)
case(
    "ord_cummax_ties_nan",
    lambda x: (x.cummax(0), x.cummin(0), x[:7].cummax(0), x.flip(0).cummin(0)),
    lambda: (_ties(),),
)
case(
    "ord_cummax_2d",
    lambda x: (x.cummax(1), x.cummin(0)),
    lambda: (t(1, 3, 3, 2, 3, 1, 1, 1, 0).reshape(3, 3),),
)
for _dt in (F16, BF16, I8, U8, B):
    case(
        f"ord_sort_topk_{short(_dt)}",
        lambda x: (
            x.sort(stable=True),
            x.sort(descending=True, stable=True),
            x.topk(3),
            x.argmax(),
            x.argmin(),
            x.kthvalue(2),
            x.median(),
        ),
        lambda _dt=_dt: (t(1.0, 0.0, 3.0, 1.0, 0.0, 2.0, 3.0).to(_dt),),
    )
case(
    "ord_sort_gather_user",
    lambda x, y: (
        y.gather(0, x.argsort(stable=True)),
        y[x.argsort(descending=True, stable=True)],
        x.sort(stable=True).indices.argsort(),
        torch.take_along_dim(y, x.topk(2).indices),
    ),
    lambda: (t(2.0, 1.0, 2.0, 1.0, 0.0), t(10, 20, 30, 40, 50)),
)
case(
    "ord_max_pair_and_inf",
    lambda x: (
        torch.max(x, dim=0),
        torch.max(x, x.flip(0)),
        x.amax(),
        x.max(dim=0, keepdim=True),
        torch.aminmax(x, dim=0),
    ),
    lambda: (t(-INF, -INF, 1.0, INF, INF, NAN, 0.0),),
)
case(
    "ord_sort_inf_ints_int32",
    lambda x: (
        x.sort(),
        x.argsort(stable=True),
        x.topk(2),
        x.argmax(),
        x.unique(return_counts=True),
    ),
    lambda: (t(2**31 - 1, -(2**31), 0, 2**31 - 1, -1, dtype=I32),),
)

for _dt in (U8, I8, I16, I32, I64):
    case(
        f"ord_topk_smallest_{short(_dt)}",
        lambda x: (x.topk(3, largest=False), x.topk(1, largest=False), x.kthvalue(1), x.min(0)),
        lambda _dt=_dt: (
            torch.tensor([1, torch.iinfo(_dt).min, 3, torch.iinfo(_dt).max, 2, 5], dtype=_dt),
        ),
    )
case(
    "ord_topk_smallest_2d_dim0",
    lambda x: (x.topk(2, dim=0, largest=False), x.topk(1, dim=1, largest=False, sorted=True)),
    lambda: (t(0, 200, 7, 255, 1, 0, 9, 3, 128, dtype=U8).reshape(3, 3),),
)

# order statistics' argument errors and empty inputs (eager raises: so must we)
for _name, _f in {
    "topk_k_too_big": lambda x: x.topk(9),
    "topk_k_neg": lambda x: x.topk(-1),
    "topk_zero": lambda x: x.topk(0),
    "kthvalue_zero": lambda x: x.kthvalue(0),
    "kthvalue_too_big": lambda x: x.kthvalue(9),
    "argmax_empty": lambda x: x[:0].argmax(),
    "max_empty": lambda x: x[:0].max(),
    "max_dim_empty": lambda x: x[:0].reshape(0, 2).max(0),
    "max_dim_empty_ok": lambda x: x[:0].reshape(2, 0).max(0),
    "median_empty": lambda x: x[:0].median(),
    "sort_empty": lambda x: x[:0].sort(),
    "topk_empty": lambda x: x[:0].topk(0),
    "cummax_empty": lambda x: x[:0].cummax(0),
    "amax_empty": lambda x: x[:0].amax(),
    "searchsorted_dims": lambda x: torch.searchsorted(x.reshape(2, 4), x.reshape(4, 2)),
    "bucketize_2d": lambda x: torch.bucketize(x, x.reshape(2, 4)),
    "searchsorted_side_mismatch": lambda x: torch.searchsorted(x, x, right=False, side="right"),
    "sort_dim_oob": lambda x: x.sort(1),
    "msort_0d": lambda x: torch.msort(x[0]),
    "argsort_0d": lambda x: x[0].argsort(),
    "topk_0d": lambda x: x[0].topk(1),
    "kthvalue_0d": lambda x: x[0].kthvalue(1),
}.items():
    case(f"ord_err_{_name}", _f, lambda: (t(3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0),))


# ============================================================================================
# 3. random numbers: properties, not values (both sides record the same booleans)
def rng(name, draw, check, make=lambda: (torch.zeros(()),)):
    """``draw(x)`` compiled: under ``manual_seed(7)`` twice (the first call compiles), then
    once more; records dtype and shape of each output, whether the reseeded runs agree, whether
    the third draw differs, and ``check(out)`` (a tuple of facts: ranges, statistics)."""

    def run_case(C, rec):
        f = C(draw)
        args = make()
        torch.manual_seed(7)
        a = f(*args)
        torch.manual_seed(7)
        b = f(*args)
        c = f(*args)
        outs = a if isinstance(a, tuple) else (a,)
        rec("dtypes", [str(o.dtype) for o in outs])
        rec("shapes", [tuple(o.shape) for o in outs])
        same_runs = all(
            torch.equal(x, y) for x, y in zip(outs, b if isinstance(b, tuple) else (b,))
        )
        rec("reseeded_equal", same_runs)
        rec(
            "fresh",
            any(not torch.equal(x, y) for x, y in zip(outs, c if isinstance(c, tuple) else (c,))),
        )
        rec("check", [bool(v) for v in check(*outs)])

    scenario(name, run_case)


def _unif(v, lo=0.0, hi=1.0):
    n = v.numel()
    m = v.double().mean()
    return (v >= lo).all(), (v < hi).all(), abs(m - (lo + hi) / 2) < 5 * (hi - lo) / (12 * n) ** 0.5


rng("rng_rand", lambda x: torch.rand(200, 100) + x, _unif)
rng("rng_rand_f16", lambda x: torch.rand(20000, dtype=F16), _unif)
rng("rng_rand_bf16", lambda x: torch.rand(20000, dtype=BF16), _unif)
rng("rng_rand_f64", lambda x: torch.rand(20000, dtype=F64), _unif)
rng(
    "rng_randn",
    lambda x: torch.randn(20000) * 2 + 1 + x,
    lambda v: (abs(v.mean() - 1) < 0.05, abs(v.std() - 2) < 0.05, v.isfinite().all()),
)
rng(
    "rng_randn_like_bf16",
    lambda x: torch.randn_like(x.to(BF16).expand(20000)),
    lambda v: (abs(v.float().mean()) < 0.05, abs(v.float().std() - 1) < 0.05),
)
rng(
    "rng_randint",
    lambda x: (torch.randint(-3, 4, (20000,)), torch.randint(10, (5, 7), dtype=I32)),
    lambda a, b: (a.min() == -3, a.max() == 3, (b >= 0).all(), (b < 10).all(), b.max() == 9),
)
rng(
    "rng_randint_wide",
    lambda x: torch.randint(0, 2**40, (20000,)),
    lambda v: (
        (v >= 0).all(),
        (v < 2**40).all(),
        (v >= 2**39).any(),
        (v >= 2**33).float().mean() > 0.9,
    ),
)
rng(
    "rng_randint_neg_wide",
    lambda x: torch.randint(-(2**62), 2**62, (20000,)),
    lambda v: ((v < 0).any(), (v > 2**61).any(), (v.abs() < 2**40).float().mean() < 0.01),
)
rng(
    "rng_randint_int8_full",
    lambda x: torch.randint(-128, 128, (20000,), dtype=I8),
    lambda v: (v.min() == -128, v.max() == 127, (v == 0).any()),
)
rng(
    "rng_randint_like",
    lambda x: torch.randint_like(torch.zeros(3, 4, dtype=I16), 5, 9),
    lambda v: ((v >= 5).all(), (v < 9).all()),
)
rng(
    "rng_randperm",
    lambda x: (torch.randperm(1000), torch.randperm(50, dtype=I32), torch.randperm(1)),
    lambda a, b, c: (
        torch.equal(a.sort()[0], torch.arange(1000)),
        torch.equal(b.sort()[0], torch.arange(50, dtype=I32)),
        c.item() == 0,
        (a != torch.arange(1000)).any(),
    ),
)
rng(
    "rng_randperm_index_user",
    lambda x: x.expand(64, 3)[torch.randperm(64)][:8] + torch.arange(3),
    lambda v: ((v == torch.arange(3.0)).all(),),
    lambda: (torch.zeros(3),),
)
rng(
    "rng_bernoulli",
    lambda p: (
        torch.bernoulli(p),
        p.bernoulli(),
        torch.bernoulli(p, 0.25),
        p.clone().bernoulli_(0.5),
    ),
    lambda a, b, c, d: (
        ((a == 0) | (a == 1)).all(),
        a[:, 0].sum() == 0,
        a[:, 1].sum() == a.shape[0],
        abs(a[:, 2].mean() - 0.3) < 0.03,
        abs(c.mean() - 0.25) < 0.02,
        abs(d.mean() - 0.5) < 0.02,
    ),
    lambda: (t(0.0, 1.0, 0.3).expand(4000, 3).contiguous(),),
)
rng(
    "rng_multinomial",
    lambda p: (torch.multinomial(p, 3), torch.multinomial(p, 2000, replacement=True)),
    lambda a, b: (
        (a[0].sort()[0] == t(0, 2, 3)).all(),
        (b != 1).all(),
        abs((b == 3).double().mean() - 0.4) < 0.04,
    ),
    lambda: (t(0.2, 0.0, 0.4, 0.4),),
)
rng(
    "rng_multinomial_2d",
    lambda p: torch.multinomial(p, 2),
    lambda a: (((a == 0) | (a == 2)).all(), (a[:, 0] != a[:, 1]).all()),
    lambda: (t(1.0, 0.0, 3.0, 0.0).expand(100, 4).contiguous(),),
)
rng(
    "rng_inplace_inits",
    lambda w: (
        w.clone().normal_(3.0, 0.5),
        w.clone().uniform_(-2, -1),
        w.clone().exponential_(2.0),
        w.clone().random_(0, 5),
        torch.nn.init.trunc_normal_(w.clone(), std=1.0, a=-0.5, b=0.5),
        torch.nn.init.kaiming_uniform_(w.clone()),
    ),
    lambda a, b, c, d, e, f: (
        abs(a.mean() - 3) < 0.05,
        (b >= -2).all() & (b < -1).all(),
        (c > 0).all() & (abs(c.mean() - 0.5) < 0.05),
        ((d >= 0) & (d < 5) & (d == d.round())).all(),
        ((e >= -0.5) & (e <= 0.5)).all(),
        (f.abs() <= (6 / 100) ** 0.5).all(),
    ),
    lambda: (torch.zeros(100, 100),),
)
rng(
    "rng_normal_tensors",
    lambda m, s: (torch.normal(m, s), torch.normal(m, 1.0), torch.normal(0.0, s[:3])),
    lambda a, b, c: (
        (a[:, 0] == 5).all(),
        abs(a[:, 1].mean() - 2) < 0.1,
        abs(b.mean() - 3.5) < 0.1,
        (c[:, 0] == 0).all(),
    ),
    lambda: (t(5.0, 2.0).repeat(1000).reshape(1000, 2), t(0.0, 1.0).repeat(1000).reshape(1000, 2)),
)


def _drop_facts(x, p):
    def facts(v):
        kept = v != 0
        return (
            (v[kept] == x[kept] / (1 - p)).all(),
            abs((~kept).double().mean() - p) < 0.02,
        )

    return facts


_X = torch.full((100, 100), 2.0)
rng(
    "rng_dropout_functional",
    lambda x: (F.dropout(x, 0.3), F.dropout(x, 0.3, training=False), F.dropout(x, 0.0)),
    lambda a, b, c: (*_drop_facts(_X, 0.3)(a), torch.equal(b, _X), torch.equal(c, _X)),
    lambda: (_X.clone(),),
)
rng(
    "rng_dropout_p1_and_2d",
    lambda x: (F.dropout(x, 1.0), F.dropout2d(x[None], 0.5), F.alpha_dropout(x, 0.2, True)),
    lambda a, b, c: (
        (a == 0).all(),
        ((b[0] == 0).all(1) | (b[0] == 4).all(1)).all(),
        abs(c.mean() - 2) < 0.2,
    ),
    lambda: (_X.clone(),),
)


def _module_modes(C, rec):
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Dropout(0.5), torch.nn.ReLU())
    f = C(m)
    x = torch.randn(64, 16)
    m.train()
    a = f(x)
    m.eval()
    b = f(x)
    rec("eval_is_linear_relu", torch.allclose(b, m(x), rtol=1e-5, atol=1e-6))
    m.train()
    c = f(x)
    with torch.no_grad():
        ref = torch.relu(m[0](x)) * 2
    rec(
        "train_zeros",
        bool(((a == 0) | (a - ref).abs().le(1e-5)).all()),
    )
    rec("train_has_zeros", bool(((c == 0) & (ref > 0)).any()))
    rec("train_fresh", not torch.equal(a, c))


scenario("rng_dropout_module_modes", _module_modes)


def _generator_arg(C, rec):
    def f(x, g):
        return torch.randn(3, generator=g) + x, torch.randint(0, 100, (4,), generator=g)

    cf = C(f)
    a = cf(torch.zeros(3), torch.Generator().manual_seed(1))
    b = cf(torch.zeros(3), torch.Generator().manual_seed(1))
    rec("values", a)
    rec("repeat", torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]))


scenario("rng_generator_arg", _generator_arg)


def _generator_ops(C, rec):
    g = torch.Generator().manual_seed(4)

    def f(p):
        return (
            torch.bernoulli(p, generator=g),
            torch.multinomial(p, 1, generator=g),
            torch.randperm(6, generator=g),
            p.clone().normal_(generator=g),
            torch.rand(2, generator=g),
        )

    rec("values", C(f)(t(0.1, 0.9, 0.5)))


scenario("rng_generator_ops", _generator_ops)


def _seed_sequence(C, rec):
    f = C(lambda x: x + torch.rand(3))
    torch.manual_seed(11)
    a = [f(torch.zeros(3)) for _ in range(3)]
    torch.manual_seed(11)
    b = [f(torch.zeros(3)) for _ in range(3)]
    rec("sequence_repeats", all(torch.equal(x, y) for x, y in zip(a, b)))
    rec("all_differ", not torch.equal(a[0], a[1]) and not torch.equal(a[1], a[2]))
    with torch.random.fork_rng():
        torch.manual_seed(11)
        c = f(torch.zeros(3))
    rec("fork_rng_repeat", torch.equal(c, a[0]))
    s = torch.get_rng_state()
    d = f(torch.zeros(3))
    torch.set_rng_state(s)
    e = f(torch.zeros(3))
    rec("set_rng_state_repeat", torch.equal(d, e))


scenario("rng_seed_sequence", _seed_sequence)


def _graph_break_rng(C, rec):
    def f(x):
        a = torch.rand(3)
        torch._dynamo.graph_break()
        return a + torch.rand(3) + x

    cf = C(f)
    torch.manual_seed(2)
    a = cf(torch.zeros(3))
    torch.manual_seed(2)
    b = cf(torch.zeros(3))
    rec("repeat", torch.equal(a, b))
    rec("range", bool(((a >= 0) & (a < 2)).all()))


scenario("rng_graph_break", _graph_break_rng)


# ============================================================================================
# 4. autocast: output dtypes and values, around the compiled call and inside it
def _amp_inputs():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 8, generator=g)
    w = torch.randn(6, 8, generator=g, requires_grad=True)
    b = torch.randn(6, generator=g, requires_grad=True)
    img = torch.randn(2, 3, 6, 6, generator=g)
    cw = torch.randn(4, 3, 3, 3, generator=g, requires_grad=True)
    return x, w, b, img, cw


def _amp_ops(x, w, b, img, cw):
    y = F.linear(x, w, b)
    tgt = torch.tensor([1, 0, 5, 2])
    return (
        y,
        x @ w.t(),
        torch.addmm(b, x, w.t()),
        torch.bmm(y[None], y[None].transpose(1, 2)),
        torch.einsum("ij,kj->ik", x, w),
        F.conv2d(img, cw, padding=1),
        F.conv_transpose2d(img, cw.transpose(0, 1)),
        F.conv1d(img[:, :, 0], cw[:, :, 0]),
        y.softmax(-1),
        F.log_softmax(y, -1),
        F.layer_norm(y, (6,)),
        F.group_norm(F.conv2d(img, cw), 2),
        y.sum(),
        y.mean(0),
        y.prod(1),
        y.cumsum(0),
        y.norm(),
        F.cross_entropy(y, tgt),
        F.nll_loss(F.log_softmax(y, -1), tgt),
        F.mse_loss(y, torch.zeros_like(y)),
        F.l1_loss(y, x[:, :6]),
        F.binary_cross_entropy_with_logits(y, torch.ones_like(y)),
        F.kl_div(F.log_softmax(y, -1), F.softmax(x[:, :6], -1), reduction="batchmean"),
        torch.exp(y),
        y + x[:, :6],
        torch.cat([y, x[:, :6]]),
        torch.stack([y, x[:, :6]]),
        torch.where(x[:, :6] > 0, y, x[:, :6]),
        torch.addcmul(x[:, :6], y, y),
        F.gelu(y),
        F.scaled_dot_product_attention(y[None, None], y[None, None], y[None, None]),
        torch.cdist(y, x[:, :6]),
        F.interpolate(img, scale_factor=2, mode="bilinear"),
        F.embedding(tgt, w),
        torch.baddbmm(y[None], y[None], torch.eye(6)[None]),
        torch.matmul(y[None].expand(2, 4, 6), w),
        F.prelu(y, torch.tensor([0.25])),
        F.avg_pool2d(img, 2),
        F.max_pool2d(F.conv2d(img, cw), 2),
        torch.topk(y, 2),
        torch.linalg.vector_norm(y, dim=1),
        F.batch_norm(F.conv2d(img, cw), None, None, training=True),
        F.cosine_similarity(y, x[:, :6]),
        torch.pow(y, 2),
        y.var(0),
    )


for _dt in (BF16, F16):

    def _inside(*a, _dt=_dt):
        with torch.autocast("cpu", dtype=_dt):
            return _amp_ops(*a)

    case(f"amp_inside_ops_{short(_dt)}", _inside, _amp_inputs, _dt)


def _amp_outside(name, dtype, f, make):
    """``f`` compiled (or not) and called under ``torch.autocast("cpu", dtype)``."""

    def run_case(C, rec):
        args = make()
        cf = C(f)
        with torch.autocast("cpu", dtype=dtype):
            out = cf(*args)
        rec("out", out)

    scenario(name, run_case, dtype)


for _dt in (BF16, F16):
    _amp_outside(f"amp_outside_call_{short(_dt)}", _dt, _amp_ops, _amp_inputs)


def _amp_nested(x, w, b, img, cw):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w, b)
        with torch.autocast("cpu", enabled=False):
            z = y.float() @ w
            z2 = y @ w.to(y.dtype)
        u = F.linear(z, w)
        with torch.autocast("cpu", dtype=torch.float16):
            v = x @ w.t()
    return y, z, z2, u, v, y.float() + v.float(), z.sum()


case("amp_nested_regions", _amp_nested, _amp_inputs, BF16)


def _amp_grads(C, rec):
    x, w, b, img, cw = _amp_inputs()

    def f(x, w, b, img, cw):
        y = F.linear(x, w, b)
        c = F.conv2d(img, cw)
        return F.cross_entropy(y, torch.tensor([1, 0, 5, 2])) + c.float().pow(2).mean()

    cf = C(f)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = cf(x, w, b, img, cw)
    rec("loss", loss)
    loss.backward()
    rec("grads", [w.grad, b.grad, cw.grad])


scenario("amp_grads_dtypes", _amp_grads, BF16)


def _amp_module_train(C, rec):
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, bias=False),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 5),
        torch.nn.LayerNorm(5),
    )
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    f = C(m)
    x = torch.randn(3, 3, 6, 6)
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = f(x)
            loss = out.float().pow(2).mean()
        rec("out", out)
        opt.zero_grad()
        loss.backward()
        rec("grads", [p.grad for p in m.parameters()])
        opt.step()
    rec("bn_stats", [m[1].running_mean, m[1].running_var])


scenario("amp_module_train_step", _amp_module_train, BF16)


def _amp_rnn(kind, dtype, **kw):
    def run_case(C, rec):
        torch.manual_seed(0)
        m = getattr(torch.nn, kind)(8, 6, batch_first=True, **kw)
        x = torch.randn(3, 5, 8)
        f = C(lambda x: m(x))
        with torch.autocast("cpu", dtype=dtype):
            out = f(x)
        rec("dtypes", [o.dtype for o in torch.utils._pytree.tree_leaves(out)])
        rec("out", out)

    return run_case


for _kind in ("LSTM", "GRU", "RNN"):
    scenario(f"amp_rnn_{_kind}", _amp_rnn(_kind, BF16), BF16)
scenario(
    "amp_rnn_LSTM_2layer_bidir",
    _amp_rnn("LSTM", BF16, num_layers=2, bidirectional=True),
    BF16,
)


def _amp_rnn_inside(x):
    torch.manual_seed(0)
    m = _AMP_LSTM
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, (h, c) = m(x)
        with torch.autocast("cpu", enabled=False):
            z = m(x)[0]
    return y, h, c, z


def _amp_lstm_train(proj_size=0):
    def run_case(C, rec):
        torch.manual_seed(0)
        m = torch.nn.LSTM(8, 6, num_layers=2, proj_size=proj_size)
        x = torch.randn(5, 3, 8)
        h0 = torch.randn(2, 3, proj_size or 6, requires_grad=True)
        c0 = torch.randn(2, 3, 6)
        f = C(lambda x, h, c: m(x, (h, c)))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, (h, c) = f(x, h0, c0)
            loss = out.float().pow(2).sum() + c.float().sum()
        rec("out", [out, h, c])
        loss.backward()
        rec("grads", [h0.grad, *(p.grad for p in m.parameters())])

    return run_case


scenario("amp_rnn_LSTM_train_hx", _amp_lstm_train(), BF16)
scenario("amp_rnn_LSTM_proj", _amp_lstm_train(proj_size=4), BF16)

torch.manual_seed(0)
_AMP_LSTM = torch.nn.LSTM(8, 6, batch_first=True)
case("amp_rnn_LSTM_inside", _amp_rnn_inside, lambda: (torch.randn(3, 5, 8),), BF16)


def _amp_recompile(C, rec):
    x, w = _amp_inputs()[:2]
    f = C(lambda x, w: (x @ w.t()).relu())
    rec("plain", f(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rec("bf16", f(x, w))
    with torch.autocast("cpu", dtype=torch.float16):
        rec("f16", f(x, w))
    with torch.autocast("cpu", enabled=False):
        rec("disabled", f(x, w))
    rec("plain_again", f(x, w))


scenario("amp_state_changes", _amp_recompile, F16)
case(
    "amp_int_and_f64_inputs",
    lambda i, d, x: _amp_mixed(i, d, x),
    lambda: (torch.arange(6).reshape(2, 3), torch.randn(3, 3, dtype=F64), torch.randn(2, 3)),
    BF16,
)


def _amp_mixed(i, d, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return (
            i @ i.t(),
            d @ d,
            x @ d.float(),
            torch.mm(x, d.float()) + i,
            (x @ d.float()).to(F64) @ d,
        )


def _amp_model(name, make_model, make_input, train=False, dtype=BF16):
    def run_case(C, rec):
        torch.manual_seed(0)
        m = make_model().train(train)
        x = make_input()
        f = C(m)
        with torch.autocast("cpu", dtype=dtype):
            out = f(x)
        rec("dtypes", [o.dtype for o in tree_leaves(out)])
        rec("out", out)
        if train:
            g = torch.Generator().manual_seed(5)  # (a sum of a normalized output has no gradient)
            sum(
                (o.float() * torch.randn(o.shape, generator=g)).sum()
                for o in tree_leaves(out)
                if o.is_floating_point()
            ).backward()
            rec("grads", [p.grad for p in m.parameters()])

    scenario(name, run_case, dtype)


_amp_model(
    "amp_model_transformer_eval",
    lambda: torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
    lambda: torch.randn(2, 5, 16),
)
_amp_model(
    "amp_model_transformer_train",
    lambda: torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
    lambda: torch.randn(2, 5, 16),
    train=True,
)


class _SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x)


_amp_model("amp_model_mha", _SelfAttention, lambda: torch.randn(2, 5, 16))
_amp_model("amp_model_mha_train", _SelfAttention, lambda: torch.randn(2, 5, 16), True)


class _EmbLstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 8)
        self.lstm = torch.nn.LSTM(8, 12, batch_first=True)
        self.head = torch.nn.Linear(12, 3)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        return self.head(h[:, -1])


_amp_model("amp_model_emb_lstm_train", _EmbLstm, lambda: torch.randint(0, 20, (4, 7)), train=True)


class _ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = F.adaptive_avg_pool2d(F.relu(self.bn(self.c(x))), 1).flatten(1)
        return F.log_softmax(self.fc(y), -1)


_amp_model("amp_model_convnet_eval", _ConvNet, lambda: torch.randn(2, 3, 8, 8))
_amp_model("amp_model_convnet_train_f16", _ConvNet, lambda: torch.randn(2, 3, 8, 8), True, F16)
rng(
    "rng_misc_factories",
    lambda x: (
        torch.normal(2.0, 3.0, size=(4000,)),
        torch.randint_like(x, 10),
        torch.empty(3000).random_(),
        torch.empty(3000, dtype=I32).random_(-5, 5),
        torch.poisson(torch.full((3000,), 4.0)),
        torch.rand(3, 4, requires_grad=True) * 2,
        torch.randn(2, 3, dtype=F64),
    ),
    lambda a, b, c, d, e, f, g: (
        abs(a.mean() - 2) < 0.3,
        b.dtype == torch.float32 and ((b >= 0) & (b < 10) & (b == b.round())).all(),
        ((c >= 0) & (c <= 2**24) & (c == c.round())).all() & (c > 2**20).any(),
        ((d >= -5) & (d < 5)).all(),
        (e == e.round()).all() & (abs(e.mean() - 4) < 0.3),
        f.requires_grad,
        g.dtype == F64,
    ),
    lambda: (torch.zeros(1000),),
)
rng(
    "rng_dropout_inplace_train",
    lambda x: (F.dropout(x.clone(), 0.5, True, inplace=True), F.dropout1d(x[None], 0.5)),
    lambda a, b: (((a == 0) | (a == 4)).all(), ((b[0] == 0).all(1) | (b[0] == 4).all(1)).all()),
    lambda: (torch.full((40, 50), 2.0),),
)


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
