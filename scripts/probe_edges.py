"""Probe values at the edges of each dtype for silent wrong answers and missing errors: small
user-style functions run once in eager PyTorch (CPU) and once through
``torch.compile(backend="xla")``.

    PYTHONPATH=. python scripts/probe_edges.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_edges.py   # torch's own differences

Where ``probe_dtypes.py`` sweeps unary and binary ops over each dtype's special values and
``probe_semantics.py``/``probe_errors.py`` hold single examples, this probe looks at the classes
those leave out: integer matrix products and their accumulation, shifts by negative amounts,
comparisons of integers with out-of-range scalars, float -> uint8 casts (defined in eager: through
int64), complex128 and ``sgn`` over special values, complex half promotion, conjugate views as
inputs, complex ``log1p``/``expm1`` near zero, round half-to-even where ``floor(x + 0.5)`` fails,
``round(decimals=)`` rounding, signed zeros through reductions and clamps, half-precision
overflow in accumulating ops, ties and NaN in order statistics, histogram bin edges.

Observed and compared as in ``probe_dtypes.py`` (its ``same``: dtype and shape exactly, integers
and bools bit for bit, NaN/inf/signed-zero positions exactly, finite floats within a few ulps,
no further from a float64 reference than eager), errors by type and eager's first line, and a
compiled error must name this file (the user's line). Prints ``ok`` / ``DIFF`` / ``NOLINE`` /
``CRASH`` per case and a summary.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import describe, difference, observations, run
from probe_dtypes import _wide, same, specials

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
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
C64, C128 = torch.complex64, torch.complex128
INTS = (I8, U8, I16, I32, I64)
NAN, INF = float("nan"), float("inf")


def case(name, f, make, red=False, ref=False):
    def run_case(C, rec):
        args = make()
        try:
            out = C(f)(*args)
        finally:
            rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        rec("out", out)

    assert name not in CASES, name
    run_case.red, run_case.ref = red, ref
    CASES[name] = run_case


def observe(fn, compiled, reference=False):
    def C(f):
        if reference:
            return lambda *args: f(*(_wide(a) for a in args))
        return torch.compile(f, backend=BACKEND) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    refs = observe(fn, False, True) if fn.ref else exp
    if len(refs) != len(exp):
        refs = exp
    q = iter([x for _, x in refs])
    d = difference(got, exp, lambda g, e, label: same(g, e, label, fn.red, next(q)))
    if d:
        return f"DIFF  {name}: {d}"
    for _, g in got:
        if g[0] == "E" and THIS not in g[3]:
            return f"NOLINE {name}: {g[1].__name__}: {g[3][:200]!r}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


def short(dtype) -> str:
    return str(dtype).replace("torch.", "")


def t(*vals, dtype=None):
    return torch.tensor(vals, dtype=dtype)


# ============================================================================================
# (a) integers
def _imat(dtype, seed=0):
    ii = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(seed)
    lo, hi = max(ii.min, -(2**40)), min(ii.max, 2**40)
    return torch.randint(lo, hi, (3, 4), generator=g).to(dtype)


for _dt in INTS:
    # integer matrix products: eager accumulates in the integer type and wraps
    case(
        f"int_matmul_wrap_{short(_dt)}",
        lambda a, b: (a @ b.t(), torch.mm(a, b.t()), a[0].dot(b[0]), torch.mv(a, b[0])),
        lambda _dt=_dt: (_imat(_dt, 1), _imat(_dt, 2)),
    )
    case(
        f"int_bmm_einsum_{short(_dt)}",
        lambda a, b: (
            torch.bmm(a[None], b.t()[None]),
            torch.einsum("ij,kj->ik", a, b),
            torch.addmm(a[:, :3], a, b.t(), beta=2, alpha=3),
            torch.outer(a[0], b[0]),
        ),
        lambda _dt=_dt: (_imat(_dt, 3), _imat(_dt, 4)),
    )
    # in-place wrap and same-dtype reductions
    case(
        f"int_inplace_wrap_{short(_dt)}",
        lambda x: (x.clone().add_(1), x.clone().mul_(3), x.clone().sub_(x.flip(0)), x.diff()),
        lambda _dt=_dt: (specials(_dt),),
    )
    case(
        f"int_reduce_same_dtype_{short(_dt)}",
        lambda x: (
            x.sum(dtype=x.dtype),
            x.cumsum(0, dtype=x.dtype),
            x.prod(dtype=x.dtype),
            x.sum(0, keepdim=True, dtype=x.dtype),
            torch.trace(x[:4].reshape(2, 2)),
        ),
        lambda _dt=_dt: (specials(_dt),),
    )
    case(
        f"int_mean_dtype_{short(_dt)}",
        lambda x: (x.mean(dtype=F64), x.mean(0, dtype=F32), x.nanmean(dtype=F64)),
        lambda _dt=_dt: (specials(_dt),),
    )
    for _op, _f in {
        "mean": lambda x: x.mean(0),
        "nanmean": lambda x: x.nanmean(),
        "var": lambda x: x.var(0),
        "std_mean": lambda x: torch.std_mean(x),
        "addcdiv": lambda x: torch.addcdiv(x, x, x),
        "lerp": lambda x: torch.lerp(x, x, 0.5),
        "avg_pool": lambda x: F.avg_pool1d(x[None, None], 2),
        "erfinv_": lambda x: x.erfinv_(),
    }.items():
        case(f"int_raises_{_op}_{short(_dt)}", _f, lambda _dt=_dt: (specials(_dt),))
    # shifts by negative amounts and by amounts >= the width, tensor and scalar
    case(
        f"int_shift_neg_{short(_dt)}",
        lambda x, s: (x << s, x >> s, x << -1, x >> -2),
        lambda _dt=_dt: (
            specials(_dt)[:8],
            t(-1, -8, -9, 0, 1, -100, 7, 9).to(_dt)
            if _dt != U8
            else t(255, 8, 9, 0, 1, 128, 7, 9).to(U8),
        ),
    )
    # comparisons with Python scalars outside the dtype's range, and with floats
    case(
        f"int_cmp_scalar_range_{short(_dt)}",
        lambda x: (
            x < -1,
            x > 300,
            x == 256,
            x >= -129,
            x < 2.5,
            x == 2**40,
            x != -(2**63),
            x > 1e30,
        ),
        lambda _dt=_dt: (specials(_dt),),
    )
    case(
        f"int_cmp_float_tensor_{short(_dt)}",
        lambda x: (
            x == x.float(),
            x < x.to(F16),
            x.eq(torch.tensor(2.5)),
            torch.maximum(x, torch.tensor(2.5)),
            torch.minimum(x, torch.tensor(-1)),
        ),
        lambda _dt=_dt: (specials(_dt),),
    )
    # bitwise ops with Python scalars and bools
    case(
        f"int_bitwise_scalar_{short(_dt)}",
        lambda x: (x & -1, x | 256, x ^ True, x & 3, ~x, x | x.bool()),
        lambda _dt=_dt: (specials(_dt),),
    )
    # pow with negative exponents in tensors: 0, 1, -1 bases
    if _dt != U8:
        case(
            f"int_pow_neg_tensor_{short(_dt)}",
            lambda a, e: (a**e, torch.pow(a, e.abs())),
            lambda _dt=_dt: (
                t(0, 1, -1, 2, -1, 0, 1, -2).to(_dt),
                t(-1, -3, -3, -1, -2, 0, -100, -2).to(_dt),
            ),
        )
    case(
        f"int_clamp_crossed_{short(_dt)}",
        lambda x: (
            x.clamp(5, 2),
            x.clamp(min=x.flip(0), max=x),
            torch.clamp(x, 2.5, 1.5),
            x.clamp(min=-1000),
            x.clamp(max=1e10),
        ),
        lambda _dt=_dt: (specials(_dt),),
    )
    case(
        f"int_floor_divide_neg_float_{short(_dt)}",
        lambda x: (
            x // -2.5,
            x % -2.5,
            torch.fmod(x, -2.5),
            torch.div(x, -4, rounding_mode="trunc"),
        ),
        lambda _dt=_dt: (specials(_dt),),
    )
    case(
        f"int_div_zero_mixed_{short(_dt)}",
        lambda a, b: (a * 2) // (b - b.min()),
        lambda _dt=_dt: (t(1, 2, 3).to(_dt), t(4, 5, 6).to(_dt)),
    )
    case(
        f"int_remainder_zero_0d_{short(_dt)}",
        lambda a, b: (a + 1) % b.sum(),
        lambda _dt=_dt: (t(1, 2, 3).to(_dt), t(0, 0).to(_dt)),
    )
    case(
        f"int_sort_ties_{short(_dt)}",
        lambda x: (
            x.sort(stable=True),
            x.sort(descending=True, stable=True),
            x.argsort(stable=True),
            x.topk(3),
            x.topk(3, largest=False),
            x.argmax(),
            x.argmin(),
            x.max(0),
            x.min(0),
            x.kthvalue(3),
            x.cummax(0),
            x.cummin(0),
            x.mode(),
        ),
        lambda _dt=_dt: (t(3, 1, 3, 0, 1, 3, 0, 2).to(_dt),),
    )
    case(
        f"int_unique_{short(_dt)}",
        lambda x: (
            torch.unique(x, return_inverse=True, return_counts=True),
            torch.unique_consecutive(x, return_inverse=True),
        ),
        lambda _dt=_dt: (specials(_dt),),
    )

case(
    "int_min_floordiv_neg1_int8",
    lambda a, b: (a // b, a % b, torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc")),
    lambda: (t(-128, 127, -7, 0, dtype=I8), t(-1, -1, -1, -1, dtype=I8)),
)
case(
    "int_min_floordiv_neg1_int16",
    lambda a, b: (a // b, a % b, torch.fmod(a, b)),
    lambda: (t(-(2**15), 5, dtype=I16), t(-1, -1, dtype=I16)),
)
case(
    "bool_ops",
    lambda a, b: (
        a + b,
        a * b,
        a & b,
        a | b,
        a ^ b,
        a.sum(),
        a.cumsum(0),
        a.prod(),
        a.int().sum(dtype=torch.bool),
        torch.maximum(a, b),
        a > b,
        a == 1,
        a < 0.5,
        a + 2.5,
        a + torch.tensor(2.5),
        a.to(U8) - 1,
        a - torch.tensor(1, dtype=U8),
    ),
    lambda: (t(True, False, True, False), t(True, True, False, False)),
)
case(
    "uint8_int8_promote",
    lambda a, b: (a + b, a * b, a - b, a // b.clamp(min=1), a == b, a < b, torch.maximum(a, b)),
    lambda: (t(0, 1, 200, 255, 128, dtype=U8), t(-1, 1, -128, 127, 5, dtype=I8)),
)
case(
    "int_scalar_0d_promote",
    lambda x: (
        x + 2.5,
        x + torch.tensor(2.5),
        x + torch.tensor(2.5, dtype=F64),
        x + torch.tensor([2.5]),
        x * torch.tensor(3, dtype=I8),
        x.to(I8) * torch.tensor(300),
        x.to(U8) + torch.tensor(-1),
        x.to(I16) + torch.tensor(1, dtype=I64),
        x.to(I32) ** 2.0,
        x.to(I8) ** torch.tensor(2.0),
        2.0**x,
        torch.tensor(2) ** x.clamp(0, 10),
    ),
    lambda: (t(-3, 0, 7, 100),),
)
case(
    "int_sum_bool_int32_dtypes",
    lambda a, b: (a.sum(), a.cumsum(0), b.sum(), b.cumsum(0), b.prod(), a.sum(0, keepdim=True)),
    lambda: (t(True, True, False), t(2**31 - 1, 2**31 - 1, 5, dtype=I32)),
)
case(
    "int64_sum_wrap",
    lambda a: (a.sum(), a.cumsum(0), a.prod(), a * 2, a + a),
    lambda: (t(2**62, 2**62, 2**62, -5),),
)

# ============================================================================================
# (b) complex


def _cspecials(dtype):
    return specials(dtype)


_CUNARY = {
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "abs": torch.abs,
    "angle": torch.angle,
    "reciprocal": torch.reciprocal,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sgn": torch.sgn,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cosh": torch.cosh,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "square": torch.square,
    "pow2": lambda z: z**2,
    "pow_half": lambda z: z**0.5,
    "pow_int3": lambda z: z**3,
    "pow_neg1": lambda z: z**-1,
    "mul_self": lambda z: z * z,
    "div_self": lambda z: z / z.flip(0),
    "conj_mul": lambda z: z.conj() * z,
    "real_imag": lambda z: (z.real, z.imag, torch.view_as_real(z)),
    "asin": torch.asin,
    "atanh": torch.atanh,
    "log10": torch.log10,
    "nan_to_num": torch.nan_to_num,
}
for _name, _fn in _CUNARY.items():
    for _dt in (C64, C128):
        _also64 = {"sgn", "pow_int3", "pow_neg1", "mul_self", "div_self", "conj_mul", "real_imag"}
        if _dt == C64 and _name not in _also64:
            continue  # probe_dtypes sweeps these on complex64
        case(f"complex_{_name}_{short(_dt)}", _fn, lambda _dt=_dt: (_cspecials(_dt),), ref=True)

for _dt in (C64, C128):
    case(
        f"complex_small_{short(_dt)}",
        lambda z: (z.log1p(), z.expm1(), z.exp() - 1, z.sqrt(), z.abs(), z.sgn(), z.reciprocal()),
        lambda _dt=_dt: (
            torch.tensor(
                [1e-10 + 1e-10j, -1e-8 + 3e-9j, 1e-20j, 1e-3 - 1e-3j, -0.5 + 1e-12j, 2e-7 + 0j],
                dtype=_dt,
            ),
        ),
        ref=True,
    )
    case(
        f"complex_reductions_{short(_dt)}",
        lambda z: (z.sum(), z.mean(), z.prod(), z.sum(0), z.prod(1), z.cumsum(1), z.cumprod(0)),
        lambda _dt=_dt: (_cspecials(_dt)[:36].reshape(6, 6),),
        red=True,
        ref=True,
    )
    case(
        f"complex_matmul_special_{short(_dt)}",
        lambda z: (z[:9].reshape(3, 3) @ z[9:18].reshape(3, 3), z[:3] @ z[3:6]),
        lambda _dt=_dt: (_cspecials(_dt)[::4],),
        red=True,
        ref=True,
    )
    case(
        f"complex_polar_special_{short(_dt)}",
        lambda a, b: (
            torch.polar(a, b),
            torch.complex(a, b),
            torch.view_as_complex(torch.stack([a, b], -1)),
        ),
        lambda _dt=_dt: (
            specials(F32 if _dt == C64 else F64).abs(),
            specials(F32 if _dt == C64 else F64).flip(0),
        ),
        ref=True,
    )
    case(
        f"complex_conj_input_{short(_dt)}",
        lambda z, w: (z * 2, z.imag, z.real, z + w, z.sum(), z.conj(), z.abs(), w.imag),
        lambda _dt=_dt: (
            torch.tensor([1 + 2j, -3 - 0j, 0j], dtype=_dt).conj(),
            torch.tensor([1 + 2j, -3 - 0j, 0j], dtype=_dt).conj().imag,
        ),
    )
    case(
        f"complex_conj_view_as_real_{short(_dt)}",
        lambda z: torch.view_as_real(z.conj()),
        lambda _dt=_dt: (torch.tensor([1 + 2j, -3j], dtype=_dt),),
    )
    case(
        f"complex_conj_resolve_{short(_dt)}",
        lambda z: (
            torch.view_as_real(z.conj().resolve_conj()),
            z.conj().imag,
            z.conj().conj(),
            torch.conj_physical(z),
            z.conj() @ z.conj(),
            z.conj().is_conj(),
        ),
        lambda _dt=_dt: (torch.tensor([1 + 2j, -3j, -0.0 + 0j, 1 - 0j], dtype=_dt),),
    )
case(
    "complex_promotion",
    lambda z, f: (
        z + f,
        z * f[0],
        z + torch.tensor(1.5, dtype=F64),
        z * 2.5,
        z * (1 + 1j),
        f.to(F16) * 1j,
        f.to(BF16) + 1j,
        f * 1j,
        f.to(F32) + torch.tensor(1j, dtype=C128),
        z.to(C128) + f.to(F32),
        torch.tensor([1, 2]) * 1j,
        torch.tensor([True, False]) * (2 + 1j),
    ),
    lambda: (torch.tensor([1 + 2j, -3j], dtype=C64), torch.tensor([0.5, -2.0], dtype=F64)),
)
case(
    "complex_half",
    lambda x: ((x * 1j).abs(), (x * 1j).real, x + 1j, (x * 1j).to(C64)),
    lambda: (torch.tensor([0.5, -2.0], dtype=F16),),
)
case(
    "complex_div_zero",
    lambda z: (z / 0, z / torch.tensor(0j), z / torch.tensor(-0.0), torch.reciprocal(z * 0)),
    lambda: (torch.tensor([1 + 2j, -3j, 0j, complex(INF, 0)], dtype=C64),),
)
case(
    "complex_eq_special",
    lambda z: (
        z == z.clone(),
        z != z.clone(),
        torch.isnan(z),
        torch.isinf(z),
        torch.isfinite(z),
        z == 0,
        z.bool(),
        z.any(),
    ),
    lambda: (_cspecials(C64),),
)
case(
    "complex_to_real_dtypes",
    lambda z: (z.real.to(U8), z.to(B), z.abs().to(F16), z.to(C128)),
    lambda: (torch.tensor([1.5 + 2j, -3.5 - 1j, 300 + 0j, 0j, 1e30 + 1j], dtype=C64),),
)

# ============================================================================================
# (c) floats
_FL = (F16, BF16, F32, F64)


def _zeros(dtype):
    return torch.tensor([-0.0, 0.0, -0.0, 0.0], dtype=dtype)


for _dt in _FL:
    case(
        f"signed_zero_reduce_{short(_dt)}",
        lambda x: (
            x.max(),
            x.min(),
            x.amax(),
            x.amin(),
            x.max(0),
            x.min(0),
            x.argmax(),
            x.argmin(),
            x.sort(stable=True),
            x.sort(descending=True, stable=True),
            x.topk(2),
            torch.aminmax(x),
            x.cummax(0),
            x.cummin(0),
            x.sum(),
            x[::2].sum(),
            x.prod(),
            x[::2].prod(),
            x.mean(),
            x[::2].mean(),
            x.median(),
            torch.unique(x),
        ),
        lambda _dt=_dt: (_zeros(_dt),),
    )
    case(
        f"signed_zero_clamp_{short(_dt)}",
        lambda x: (
            x.clamp(min=0.0),
            x.clamp(max=-0.0),
            x.clamp(-0.0, 0.0),
            x.clamp(min=torch.tensor(0.0, dtype=x.dtype)),
            F.relu(x),
            F.hardtanh(x, -0.0, 1.0),
            F.relu6(x),
            F.leaky_relu(x),
            torch.where(x > 0, x, -0.0),
            torch.where(x == 0, 0.0, x),
            x.abs(),
            x * 0,
            x + 0,
            x - 0,
            0 - x,
            x.neg(),
            x.sign(),
            torch.copysign(torch.ones_like(x), x),
            x.round(),
            x.floor(),
            x.ceil(),
            x.trunc(),
            torch.fmod(x, 1.0),
            torch.remainder(x, 1.0),
            torch.remainder(x, -1.0),
            x.sqrt(),
            x.frac(),
            torch.maximum(x, x.flip(0)),
            torch.minimum(x, x.flip(0)),
            torch.fmax(x, x.flip(0)),
            torch.nan_to_num(x),
            torch.lerp(x, x, 0.5),
        ),
        lambda _dt=_dt: (_zeros(_dt),),
    )
    case(
        f"nan_order_{short(_dt)}",
        lambda x: (
            x.max(),
            x.argmax(),
            x.argmin(),
            x.max(0),
            x.min(0),
            x.sort(stable=True),
            x.sort(descending=True, stable=True),
            x.topk(3),
            x.topk(3, largest=False),
            x.kthvalue(2),
            x.cummax(0),
            x.cummin(0),
            x.median(0),
            x.nanmedian(0),
            x.argsort(stable=True),
            torch.unique(x, return_counts=True),
            x.msort(),
            torch.maximum(x, x.flip(0)),
            torch.fmin(x, x.flip(0)),
            torch.clamp(x, -1.0, 1.0),
            torch.clamp(x, min=torch.full_like(x, NAN)),
        ),
        lambda _dt=_dt: (torch.tensor([1.0, NAN, 3.0, NAN, 3.0, -INF, 1.0, INF], dtype=_dt),),
    )
    case(
        f"ties_order_{short(_dt)}",
        lambda x: (
            x.max(1),
            x.min(1),
            x.argmax(1),
            x.argmin(0),
            x.topk(2, 1),
            x.kthvalue(2, 1),
            x.cummax(1),
            x.cummin(1),
            x.mode(1),
            x.median(1),
            x.sort(dim=1, stable=True),
        ),
        lambda _dt=_dt: (
            torch.tensor([[2.0, 5.0, 5.0, 1.0, 5.0], [1.0, 1.0, 0.0, 0.0, 1.0]], dtype=_dt),
        ),
    )
    case(
        f"round_edges_{short(_dt)}",
        lambda x: (
            x.round(),
            x.round(decimals=0),
            x.round(decimals=1),
            x.round(decimals=2),
            x.round(decimals=-1),
            x.round(decimals=-2),
        ),
        lambda _dt=_dt: (
            torch.tensor(
                [
                    0.49999999999999994,
                    0.49999997,
                    2.5,
                    3.5,
                    -2.5,
                    -0.5,
                    0.5,
                    1.005,
                    2.675,
                    0.125,
                    0.375,
                    25.0,
                    35.0,
                    -25.0,
                    250.0,
                    1050.0,
                    4503599627370497.0,
                    8388609.0,
                    1e30,
                    -1e-30,
                    1000.0,
                    65504.0,
                ],
                dtype=F64,
            ).to(_dt),
        ),
    )
    case(
        f"nan_to_num_args_{short(_dt)}",
        lambda x: (
            torch.nan_to_num(x, nan=1e10),
            torch.nan_to_num(x, posinf=1e10, neginf=-1e10),
            torch.nan_to_num(x, nan=-0.0),
            torch.nan_to_num(x, posinf=NAN),
            torch.nan_to_num(x, 2.5, 3.5, -4.5),
        ),
        lambda _dt=_dt: (torch.tensor([NAN, INF, -INF, 1.0, -0.0], dtype=_dt),),
    )
    case(
        f"inf_arith_{short(_dt)}",
        lambda x: (
            x - x,
            x * 0,
            x / x,
            x + x.flip(0),
            torch.fmod(x, x.flip(0)),
            x % 2.0,
            2.0 % x,
            x // x.flip(0),
            x.sum(),
            x.cumsum(0),
            x.prod(),
            x.mean(),
            x.var(),
        ),
        lambda _dt=_dt: (torch.tensor([INF, -INF, INF, 1.0], dtype=_dt),),
    )
    case(
        f"histc_edges_{short(_dt)}",
        lambda x: (
            torch.histc(x, bins=10, min=0, max=1),
            torch.histc(x, bins=3, min=0.3, max=0.6),
            torch.histc(x, bins=7),
            torch.histc(x, bins=4, min=1, max=1),
            torch.histc(x[:1], bins=4),
            torch.histc(x, bins=5, min=-1, max=0.5),
        ),
        lambda _dt=_dt: (
            torch.tensor(
                [
                    0.0,
                    0.1,
                    0.2,
                    0.3,
                    0.4,
                    0.5,
                    0.6,
                    0.7,
                    0.8,
                    0.9,
                    1.0,
                    1.0000001,
                    -0.0,
                    0.30000001,
                ],
                dtype=F64,
            ).to(_dt),
        ),
    )
    case(
        f"float_to_uint8_{short(_dt)}",
        lambda x: (x.to(U8), x.to(I8), x.to(I16), x.to(I32), x.to(I64), x.long().to(U8)),
        lambda _dt=_dt: (
            torch.tensor([-1.0, -1.5, -0.5, -100.0, 127.5, -128.5, 3.9, -3.9, -0.0], dtype=_dt),
        ),
    )
    case(
        f"nextafter_{short(_dt)}",
        lambda a, b: torch.nextafter(a, b),
        lambda _dt=_dt: (
            torch.tensor([1.0, 1.0, -1.0, INF, -INF, NAN, 1.0, 2.0, 65504.0, -0.0], dtype=_dt),
            torch.tensor([2.0, 0.0, -INF, 0.0, 0.0, 1.0, NAN, 2.0, INF, 0.0], dtype=_dt),
        ),
    )

for _dt in (F16, BF16):
    case(
        f"half_overflow_{short(_dt)}",
        lambda x: (
            x * 1000,
            x.sum(),
            x.mean(),
            x.sum(0),
            x.cumsum(0),
            x.prod(),
            x.var(),
            x.norm(),
            x @ x,
            x[:, None] @ x[None, :],
            (x * x).sum(),
            torch.dot(x, x),
            F.linear(x[None], x[None]),
            x.float().to(x.dtype),
            torch.tensor(1e6, dtype=F64).to(x.dtype) + x,
            x.logsumexp(0),
            x.softmax(0),
            x.exp(),
            torch.addcmul(x, x, x),
        ),
        lambda _dt=_dt: (torch.tensor([60000.0, 30000.0, -1000.0, 3e4], dtype=F32).to(_dt),),
        red=True,
    )
    case(
        f"half_mean_large_{short(_dt)}",
        lambda x: (x.mean(), x.mean(0), x.var(), x.std(0), torch.var_mean(x), x.sum(0)),
        lambda _dt=_dt: (torch.full((4, 3), 60000.0 if _dt == F16 else 3e38, dtype=F32).to(_dt),),
        red=True,
    )

case(
    "bincount_edges",
    lambda x, w: (
        torch.bincount(x),
        torch.bincount(x, minlength=10),
        torch.bincount(x, w),
        torch.bincount(x, w.to(F16)),
        torch.bincount(x, w.to(I32)),
        torch.bincount(x.to(U8)),
        torch.bincount(x[:0]),
        torch.bincount(x[:0], minlength=3),
        torch.bincount(x[:0], w[:0]),
    ),
    lambda: (t(0, 3, 3, 1, 7), t(0.5, -1.0, 2.0, NAN, 1.0)),
)
case("bincount_float_raises", lambda x: torch.bincount(x), lambda: (t(0.0, 1.0),))
case("bincount_2d_raises", lambda x: torch.bincount(x), lambda: (t(0, 1).view(1, 2),))
case("histc_int_raises", lambda x: torch.histc(x, bins=3), lambda: (t(0, 1, 2),))
case(
    "histc_min_gt_max_raises",
    lambda x: torch.histc(x, bins=3, min=2, max=1),
    lambda: (t(0.0, 1.0),),
)
case(
    "histc_nan_with_range",
    lambda x: torch.histc(x, bins=3, min=0, max=3),
    lambda: (t(0.0, NAN, 1.0, 3.0, INF),),
)
case(
    "subnormal_f32",
    lambda x: (
        x * 1,
        x + 0,
        x.abs(),
        x * 2**20,
        x.sign(),
        x > 0,
        torch.nextafter(torch.zeros_like(x), x),
    ),
    lambda: (torch.tensor([1e-40, -1e-42, 1e-45], dtype=F32),),
)


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
