"""Probe dtypes, type promotion and numerics for silent wrong answers: small user-style
functions run once in eager PyTorch (CPU) and once through ``torch.compile(backend="xla")``.

    PYTHONPATH=. python scripts/probe_dtypes.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_dtypes.py   # torch's own differences

Observed: every output (dtype and shape exactly; integers and bools bit for bit; floats with
NaN, infinity and signed-zero positions exactly and finite values within a few ulps of their
own dtype, see ``ULPS``) and every input after the call. Errors compare by type and first line.

The scenarios are sweeps where the OpInfo parity run (float32, float64, bfloat16, int64, bool on
random samples) does not look: float16, int8/uint8/int16/int32, complex64, special values
(NaN, infinities, -0.0, dtype extremes), Python-scalar and 0-d promotion across categories,
reductions' result dtypes and ``dtype=`` arguments, conversions between every pair of dtypes,
half-precision nn ops, and code run under ``torch.set_default_dtype(torch.float64)``.
Prints ``ok`` / ``DIFF`` / ``CRASH`` per case and a summary.
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
from _probe_common import describe, difference, observations, same_error_or_value

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}

# Tolerance of finite float values, in units in the last place of the output's dtype at the
# eager value: elementwise ops are (nearly) correctly rounded in both, so a few ulps of float32
# and float64; half precision computes in float32 and rounds once, so one ulp of the half type
# (a float32 ulp that moves a rounding). Reductions over many elements get ``red=True``.
ULPS = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 4, torch.float64: 4}
ULPS_REDUCTION = {torch.float16: 2, torch.bfloat16: 2, torch.float32: 64, torch.float64: 64}

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
FLOATS = (F16, BF16, F32, F64)
INTS = (I8, U8, I16, I32, I64)
NAN, INF = float("nan"), float("inf")


def case(name, f, make, red=False, ref=False):
    def run(C, rec):
        args = make()
        try:
            out = C(f)(*args)
        finally:
            rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        rec("out", out)

    run.red, run.ref = red, ref
    CASES[name] = run


def _ulp(e: torch.Tensor) -> torch.Tensor:
    """One ulp of ``e``'s dtype at each value of ``e`` (float64)."""
    fi = torch.finfo(e.dtype)
    mag = e.double().abs().clamp_min(fi.tiny)
    return torch.exp2(torch.floor(torch.log2(mag))) * fi.eps


def _subnormal(t: torch.Tensor) -> torch.Tensor:
    return (t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)


def _show(bad, a, b) -> str:
    idx = bad.nonzero().flatten()[:6].tolist() if bad.dim() <= 1 else bad.nonzero()[:6].tolist()
    pairs = [
        f"[{i}] {a[tuple(i) if isinstance(i, list) else i].item()!r} vs "
        f"{b[tuple(i) if isinstance(i, list) else i].item()!r}"
        for i in idx
    ]
    return f" ({int(bad.sum())} of {bad.numel()}: " + "; ".join(pairs) + ")"


def same_floats(x, y, path, red, r=None):
    """None where equal; else why. Differences only at subnormal values (which XLA's CPU
    flushes to zero, a documented limitation) start with ``SUBN``."""
    if r is None or r.shape != x.shape or r.is_complex() != x.is_complex():
        r = None
    parts = (
        {"": (x, y, r)}
        if not x.is_complex()
        else {
            ".real": (x.real, y.real, None if r is None else r.real),
            ".imag": (x.imag, y.imag, None if r is None else r.imag),
        }
    )
    found = []
    for part, (a, b, c) in parts.items():
        a64, b64 = a.double(), b.double()
        bad = a.isnan() != b.isnan()
        bad |= (a.isinf() | b.isinf()) & (a64 != b64) & ~(a.isnan() | b.isnan())
        zs = lambda t: torch.signbit(t) & (t == 0)
        bad |= zs(a) != zs(b)
        fin = a.isfinite() & b.isfinite()
        limit = (ULPS_REDUCTION if red else ULPS)[a.dtype]
        err = torch.where(fin, (a64 - b64).abs() / _ulp(b), torch.zeros_like(a64))
        if c is not None:  # xla no further from the float64 reference than eager (+ limit)
            c64 = c.double()
            worse = ((a64 - c64).abs() - (b64 - c64).abs()) / _ulp(b)
            err = torch.where(c64.isfinite(), torch.minimum(err, worse), err)
        bad |= err > limit
        if bad.any():
            subn = bad & (_subnormal(a) | _subnormal(b))
            kind = "SUBN " if torch.equal(subn, bad) else ""
            found.append(f"{kind}{path}{part}: {a.dtype} differ{_show(bad, a, b)}")
    found.sort(key=lambda m: m.startswith("SUBN"))
    return found[0] if found else None


def same(a, b, path="", red=False, r=None):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape"), a[1:3], b[1:3]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[3], b[3]
        if x.is_floating_point() or x.is_complex():
            if x.dtype == torch.complex32:
                x, y = x.to(C64), y.to(C64)
            rt = r[3] if r is not None and r[0] == "T" else None
            return same_floats(x, y, path, red, rt)
        if not torch.equal(x, y):
            return f"{path}: {x.dtype} values{_show(x != y, x, y)}"
        return None
    if a[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        rs = (
            r[2] if r is not None and r[0] == "L" and len(r[2]) == len(a[2]) else [None] * len(a[2])
        )
        found = [
            same(x, y, f"{path}[{i}]", red, q) for i, (x, y, q) in enumerate(zip(a[2], b[2], rs))
        ]
        found = sorted((d for d in found if d), key=lambda d: d.startswith("SUBN"))
        return found[0] if found else None
    return same_error_or_value(a, b, path)


def _wide(a):
    if isinstance(a, torch.Tensor) and a.is_complex():
        return a.to(C128)
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.to(F64)
    return a


def observe(fn, compiled, reference=False):
    def C(f):
        if reference:  # eager on float64 (complex128) inputs
            return lambda *args: f(*(_wide(a) for a in args))
        return torch.compile(f, backend=BACKEND) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    refs = observe(fn, False, True) if getattr(fn, "ref", False) else exp
    if len(refs) != len(exp):
        refs = exp
    red, q = getattr(fn, "red", False), iter([r for _, r in refs])
    d = difference(got, exp, lambda g, e, label: same(g, e, label, red, next(q)))
    if d:
        return f"SUBN  {name}: {d[5:]}" if d.startswith("SUBN") else f"DIFF  {name}: {d}"
    return f"ok    {name}"


def short(dtype) -> str:
    return str(dtype).replace("torch.", "")


# ============================================================================================
# Inputs: special values of each dtype (no subnormals: XLA's CPU flushes them, a documented
# limitation, ``testing/_limits.py``)
def specials(dtype):
    if dtype == B:
        return torch.tensor([True, False, True, False])
    if dtype.is_complex:
        parts = [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e30, 0.25]
        re = torch.tensor(parts).repeat_interleave(len(parts))
        im = torch.tensor(parts).repeat(len(parts))
        return torch.complex(re, im).to(dtype)
    if dtype.is_floating_point:
        fi = torch.finfo(dtype)
        vals = [NAN, INF, -INF, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1.5, 3.0, -7.0]
        vals += [1e-3, 0.999, -0.999, 30.0, -30.0, 100.0, -100.0, fi.max, fi.min, 1e4]
        return torch.tensor(vals, dtype=F64).to(dtype)
    ii = torch.iinfo(dtype)
    vals = [ii.min, ii.max, 0, 1, 2, 3, 7, 100, ii.max - 1, ii.min + 1]
    if ii.min < 0:
        vals += [-1, -2, -7, -100]
    return torch.tensor(vals, dtype=dtype)


def grid(dtype):
    """(a, b): every pair of the special values of ``dtype``."""
    s = specials(dtype)
    return s.repeat_interleave(len(s)), s.repeat(len(s))


# ============================================================================================
# 1. unary ops over special values, per dtype (float16, int8... are outside OpInfo's dtypes)
UNARY = {
    "abs": torch.abs,
    "neg": torch.neg,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "sigmoid": torch.sigmoid,
    "logit": torch.logit,
    "logit_eps": lambda x: torch.logit(x, eps=1e-3),
    "erf": torch.erf,
    "erfc": torch.erfc,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "round_dec": lambda x: torch.round(x, decimals=1),
    "trunc": torch.trunc,
    "frac": torch.frac,
    "reciprocal": torch.reciprocal,
    "square": torch.square,
    "bitwise_not": torch.bitwise_not,
    "logical_not": torch.logical_not,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "isposinf": torch.isposinf,
    "signbit": torch.signbit,
    "nan_to_num": torch.nan_to_num,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "mish": F.mish,
    "elu": F.elu,
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=0.5),
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "logsigmoid": F.logsigmoid,
    "softsign": F.softsign,
    "tanhshrink": F.tanhshrink,
    "hardshrink": F.hardshrink,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "angle": torch.angle,
    "sinc": torch.sinc,
    "deg2rad": torch.deg2rad,
    "i0": torch.i0,
    "ndtr": torch.special.ndtr,
    "log_ndtr": torch.special.log_ndtr,
    "ndtri": torch.special.ndtri,
    "entr": torch.special.entr,
    "erfcx": torch.special.erfcx,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "xlog1py_self": lambda x: torch.special.xlog1py(x, x),
    "exp_float": lambda x: x.exp().float(),
}
UNARY_DTYPES = (F16, BF16, F32, F64, I8, U8, I16, I32, I64, B, C64)
# ops defined on the dtypes where they make sense (eager's errors are compared elsewhere)
_FLOAT_ONLY = {"logit_eps", "gelu", "gelu_tanh", "silu", "softplus", "softplus_beta", "mish"}
_FLOAT_ONLY |= {"elu", "selu", "celu", "hardswish", "hardsigmoid", "logsigmoid", "softsign"}
_FLOAT_ONLY |= {"tanhshrink", "hardshrink", "leaky_relu", "round_dec", "frac", "exp_float"}
_FLOAT_ONLY |= {"erfcx", "ndtri", "log_ndtr", "entr", "i0e", "i1", "xlog1py_self"}
_COMPLEX_OK = {"abs", "neg", "sgn", "sqrt", "rsqrt", "exp", "expm1", "log", "log2", "log10"}
_COMPLEX_OK |= {"log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh"}
_COMPLEX_OK |= {"asinh", "acosh", "atanh", "sigmoid", "reciprocal", "square", "isnan"}
_COMPLEX_OK |= {"isinf", "isfinite", "angle", "nan_to_num", "logical_not", "exp2", "sinc"}
_INT_ONLY = {"bitwise_not"}


def _unary_ok(name, dtype):
    if dtype.is_complex:
        return name in _COMPLEX_OK
    if name in _INT_ONLY:
        return not dtype.is_floating_point
    if name in _FLOAT_ONLY:
        return dtype.is_floating_point
    return True


for _name, _fn in UNARY.items():
    for _dt in UNARY_DTYPES:
        if _unary_ok(_name, _dt):
            case(f"unary_{_name}_{short(_dt)}", _fn, lambda _dt=_dt: (specials(_dt),), ref=True)


# ============================================================================================
# 2. binary ops over every pair of special values, per dtype
BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "float_power": torch.float_power,
    "atan2": torch.atan2,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
    "xlogy": torch.xlogy,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "heaviside": torch.heaviside,
    "bitwise_and": torch.bitwise_and,
    "bitwise_xor": torch.bitwise_xor,
    "lshift": torch.bitwise_left_shift,
    "rshift": torch.bitwise_right_shift,
    "eq": torch.eq,
    "lt": torch.lt,
    "logical_xor": torch.logical_xor,
    "isclose": torch.isclose,
    "isclose_nan": lambda a, b: torch.isclose(a, b, rtol=0.1, atol=0.5, equal_nan=True),
    "lerp_half": lambda a, b: torch.lerp(a, b, 0.5),
    "lerp_t": lambda a, b: torch.lerp(a, b, torch.full_like(a, 0.75)),
    "addcmul": lambda a, b: torch.addcmul(a, a, b, value=0.5),
    "addcdiv": lambda a, b: torch.addcdiv(b, a, b, value=2),
    "mse": lambda a, b: F.mse_loss(a, b, reduction="none"),
    "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5),
    "huber": lambda a, b: F.huber_loss(a, b, reduction="none", delta=2.0),
    "soft_margin": lambda a, b: F.soft_margin_loss(a, b, reduction="none"),
    "bce_logits": lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"),
}
BINARY_DTYPES = (F16, BF16, F32, I8, U8, I16, I32, I64, B, C64)
_B_FLOAT_ONLY = {"atan2", "hypot", "copysign", "nextafter", "xlogy", "logaddexp", "logaddexp2"}
_B_FLOAT_ONLY |= {"lerp_half", "lerp_t", "mse", "smooth_l1", "huber", "soft_margin"}
_B_FLOAT_ONLY |= {"bce_logits", "fmax", "fmin", "fmod", "remainder", "div_floor", "div_trunc"}
_B_FLOAT_ONLY |= {"float_power", "isclose", "isclose_nan"}
_B_INT_ONLY = {"bitwise_and", "bitwise_xor", "lshift", "rshift", "heaviside"}
_B_COMPLEX_OK = {"add", "add_alpha", "sub", "mul", "div", "pow", "eq", "isclose", "addcmul"}
_B_COMPLEX_OK |= {"addcdiv", "logical_xor", "lerp_half", "mse"}
# integer ops whose eager kernels raise on some pair (division by zero): ints without zeros
_INT_DIV = {"div_floor", "div_trunc", "remainder", "fmod"}


def _binary_ok(name, dtype):
    if dtype.is_complex:
        return name in _B_COMPLEX_OK
    if dtype.is_floating_point:
        return name not in _B_INT_ONLY
    if dtype == B and name in {"add", "add_alpha", "mul", "eq", "lt", "logical_xor", "bitwise_and"}:
        return True
    if dtype == B:
        return name in {"bitwise_xor", "maximum", "minimum", "heaviside", "div"}
    return name not in _B_FLOAT_ONLY - {"fmod", "remainder", "div_floor", "div_trunc"} | {
        "fmax",
        "fmin",
    } or name in {"fmax", "fmin", "copysign", "atan2", "hypot", "xlogy", "logaddexp"}


def _pairs(dtype, name):
    a, b = grid(dtype)
    if name in _INT_DIV and not dtype.is_floating_point and not dtype.is_complex:
        keep = b != 0
        a, b = a[keep], b[keep]
    if name in {"lshift", "rshift"}:
        b = b.remainder(torch.iinfo(dtype).bits + 3) if dtype != B else b
    if name == "pow" and not dtype.is_floating_point and not dtype.is_complex and dtype != B:
        b = b.abs().remainder(40) if dtype != U8 else b.remainder(40)  # negative powers raise
    return a, b


for _name, _fn in BINARY.items():
    for _dt in BINARY_DTYPES:
        if _binary_ok(_name, _dt):
            case(
                f"binary_{_name}_{short(_dt)}",
                _fn,
                lambda _dt=_dt, _n=_name: _pairs(_dt, _n),
                ref=True,
            )

# ============================================================================================
# 3. promotion: mixed dtypes, Python scalars, 0-d tensors across categories
MIXED = [(I8, U8), (F16, BF16), (B, I8), (I32, F16), (U8, F32), (I64, BF16), (I16, I32)]
MIXED += [(B, F16), (U8, I64), (F16, F64), (BF16, F32), (I8, C64), (F16, C64), (U8, B)]
for _a, _b in MIXED:
    for _op in ("add", "mul", "div", "maximum", "remainder_", "eq", "where", "atan2_"):
        if _op.endswith("_") and (_a.is_complex or _b.is_complex):
            continue

        def _mk(_a=_a, _b=_b):
            x, y = specials(_a), specials(_b)
            n = min(len(x), len(y))
            return x[:n], y[:n].flip(0)

        _f = {
            "add": torch.add,
            "mul": torch.mul,
            "div": torch.div,
            "maximum": torch.maximum,
            "remainder_": lambda a, b: torch.remainder(a, torch.where(b == 0, 1, b)),
            "eq": torch.eq,
            "where": lambda a, b: torch.where(a.real > 0 if a.is_complex() else a > 0, a, b),
            "atan2_": lambda a, b: torch.atan2(a, b),
        }[_op]
        if _op == "maximum" and (_a.is_complex or _b.is_complex):
            continue
        case(f"mixed_{_op}_{short(_a)}_{short(_b)}", _f, _mk)

SCALARS = {"int": 3, "negint": -1, "bigint": 300, "huge": 2**62, "float": 2.5, "bigfloat": 1e5}
SCALARS |= {"tinyfloat": 1e-8, "true": True, "complex": 1 + 2j, "nan": NAN, "inf": INF}
for _sname, _s in SCALARS.items():
    for _dt in (F16, BF16, I8, U8, I32, B, F32):
        for _op, _f in {
            "add": lambda x, s: x + s,
            "rsub": lambda x, s: s - x,
            "mul": lambda x, s: x * s,
            "div": lambda x, s: x / s,
            "rdiv": lambda x, s: s / x,
            "pow": lambda x, s: x**s,
            "rpow": lambda x, s: s**x,
            "clamp": lambda x, s: x.clamp(max=s),
            "where": lambda x, s: torch.where(x != 0, x, s),
            "fill": lambda x, s: torch.full_like(x, s) + x,
        }.items():
            if _dt == B and _op in {"rsub"}:
                continue
            if _op in {"pow", "rpow", "clamp"} and isinstance(_s, complex):
                continue
            if _op == "pow" and not _dt.is_floating_point and isinstance(_s, int) and _s < 0:
                continue
            if _op == "pow" and _sname == "huge":
                continue
            if _op == "rpow" and _sname in {"huge", "bigint"} and not _dt.is_floating_point:
                continue
            case(
                f"scalar_{_op}_{short(_dt)}_{_sname}",
                lambda x, _s=_s, _f=_f: _f(x, _s),
                lambda _dt=_dt: (specials(_dt),),
            )

ZERO_DIM = [(I32, F64), (I8, I64), (B, I64), (F16, F64), (U8, I8), (I64, C128), (BF16, C64)]
ZERO_DIM += [(I32, F16), (B, F32), (F16, F32)]
for _a, _b in ZERO_DIM:
    for _op, _f in {
        "add": torch.add,
        "mul": torch.mul,
        "sub_r": lambda x, z: z - x,
        "div": torch.div,
        "where": lambda x, z: torch.where(x.real > 0 if x.is_complex() else x != 0, x, z),
        "clamp": lambda x, z: torch.clamp(x, max=z) if not z.is_complex() else x,
        "zz": lambda x, z: z * z + x[0],  # both 0-d: the 0-d's dtype wins
    }.items():
        if _op == "sub_r" and B in (_a, _b):
            continue
        case(
            f"zerodim_{_op}_{short(_a)}_{short(_b)}",
            _f,
            lambda _a=_a, _b=_b: (specials(_a), torch.tensor(-1.75).to(_b)),
        )


# default dtype float64 around the compiled call: Python floats and float factories
def default_f64(name, fn, make):
    def run(C, rec):
        saved = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            args = make()
            out = C(fn)(*args)
        finally:
            torch.set_default_dtype(saved)
        rec("out", out)

    CASES[f"default_f64_{name}"] = run


default_f64("int_mul_float", lambda x: x * 2.5, lambda: (torch.tensor([1, 2, 3]),))
default_f64("int_div", lambda x: x / 3, lambda: (torch.tensor([1, 2, 3]),))
default_f64("bool_add_float", lambda x: x + 0.1, lambda: (torch.tensor([True, False]),))
default_f64("arange_float", lambda x: x + torch.arange(0, 1, 0.1).sum(), lambda: (torch.ones(1),))
default_f64("ones_like_int", lambda x: torch.ones(3) * x, lambda: (torch.tensor([1, 2, 3]),))
default_f64("int_sqrt", lambda x: torch.sqrt(x), lambda: (torch.tensor([2, 3]),))
default_f64("int_mean_f", lambda x: x.float().mean() + x.sum() / 7, lambda: (torch.tensor([2, 3]),))
default_f64("complex_scalar", lambda x: x * 1j, lambda: (torch.tensor([1, 2]),))
default_f64("f32_tensor_float", lambda x: x * 0.1, lambda: (torch.tensor([1.0], dtype=F32),))
default_f64("linspace", lambda x: torch.linspace(0, 1, 7) + x, lambda: (torch.tensor([3]),))
default_f64("full_float", lambda x: torch.full((2,), 0.1) * x, lambda: (torch.tensor([3]),))
default_f64("int_pow_float", lambda x: x**0.5, lambda: (torch.tensor([2, 3]),))
default_f64("atan2_int", lambda x: torch.atan2(x, x + 1), lambda: (torch.tensor([2, 3]),))
default_f64("tensor_literal", lambda x: x + torch.tensor(0.1), lambda: (torch.tensor([3]),))
default_f64("randn_dtype", lambda x: torch.randn(3).dtype == x.dtype, lambda: (torch.ones(1),))

# ============================================================================================
# 4. reductions: result dtypes, dtype= arguments, accumulation, NaN and ties
REDUCTIONS = {
    "sum": lambda x: (x.sum(), x.sum(0)),
    "sum_dtype_i8": lambda x: x.sum(dtype=torch.int8),
    "sum_dtype_f16": lambda x: x.sum(0, dtype=torch.float16),
    "sum_dtype_f64": lambda x: x.sum(dtype=torch.float64),
    "prod": lambda x: (x.prod(), x.prod(0)),
    "prod_dtype": lambda x: x.prod(0, dtype=torch.float32),
    "cumsum": lambda x: (x.cumsum(0), x.cumsum(1)),
    "cumsum_dtype": lambda x: x.cumsum(0, dtype=torch.int16),
    "cumprod": lambda x: x.cumprod(0),
    "mean": lambda x: (x.mean(), x.mean(0)),
    "mean_dtype": lambda x: x.mean(dtype=torch.float64),
    "nansum": lambda x: (x.nansum(), x.nansum(0)),
    "nanmean": lambda x: x.nanmean(0),
    "var": lambda x: (x.var(), x.var(0, correction=0)),
    "std": lambda x: (x.std(0), torch.std_mean(x, 0)),
    "var_mean": lambda x: torch.var_mean(x, 1, correction=2),
    "logsumexp": lambda x: x.logsumexp(0),
    "amax": lambda x: (x.amax(0), x.amin(1)),
    "max_dim": lambda x: (x.max(0), x.min(1)),
    "argmax": lambda x: (x.argmax(), x.argmax(0), x.argmin(1)),
    "aminmax": lambda x: torch.aminmax(x, dim=0),
    "all_any": lambda x: (x.all(), x.any(0), x.all(1)),
    "count_nonzero": lambda x: (x.count_nonzero(), x.count_nonzero(0)),
    "norm": lambda x: (x.norm(), torch.linalg.vector_norm(x, 1, dim=0)),
    "median": lambda x: (x.median(), x.median(0)),
    "nanmedian": lambda x: x.nanmedian(0),
    "mode": lambda x: x.mode(0),
    "kthvalue": lambda x: x.kthvalue(2, 0),
    "cummax": lambda x: x.cummax(0),
    "logcumsumexp": lambda x: x.logcumsumexp(0),
    "sort": lambda x: x.sort(0),
    "topk": lambda x: x.topk(2, 0),
    "softmax_dtype": lambda x: x.softmax(0, dtype=torch.float64),
    "log_softmax_dtype": lambda x: F.log_softmax(x, 0, dtype=torch.float32),
}
RED_DTYPES = (F16, BF16, I8, U8, I16, I32, B, C64, F64)
_R_FLOAT_ONLY = {"mean", "nanmean", "var", "std", "var_mean", "logsumexp", "norm"}
_R_FLOAT_ONLY |= {"logcumsumexp", "nansum", "softmax_dtype", "log_softmax_dtype"}
_R_NO_COMPLEX = {"amax", "max_dim", "argmax", "aminmax", "median", "nanmedian", "mode"}
_R_NO_COMPLEX |= {"kthvalue", "cummax", "sort", "topk", "sum_dtype_i8", "cumsum_dtype"}
_R_NO_COMPLEX |= {"nansum", "nanmean", "softmax_dtype", "log_softmax_dtype", "prod_dtype"}
_R_NO_COMPLEX |= {"sum_dtype_f16", "logsumexp"}


def _red_input(dtype):
    s = specials(dtype)
    n = len(s) - len(s) % 4 if len(s) >= 8 else len(s)
    s = s[:n]
    return s.reshape(4, -1) if n % 4 == 0 else s.reshape(1, -1)


def _red_finite(dtype):
    g = torch.Generator().manual_seed(1)
    if dtype == B:
        return torch.rand(6, 5, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(6, 5, generator=g, dtype=F64) * 3).to(dtype)
    lo = 0 if dtype == U8 else -100
    return torch.randint(lo, 100, (6, 5), generator=g).to(dtype)


for _name, _fn in REDUCTIONS.items():
    for _dt in RED_DTYPES:
        if _name in _R_FLOAT_ONLY and not (_dt.is_floating_point or _dt.is_complex):
            continue
        if _dt.is_complex and _name in _R_NO_COMPLEX:
            continue
        case(f"red_{_name}_{short(_dt)}_special", _fn, lambda _dt=_dt: (_red_input(_dt),), True)
        case(f"red_{_name}_{short(_dt)}_finite", _fn, lambda _dt=_dt: (_red_finite(_dt),), True)

# integer reductions that raise in eager (errors compared)
case("red_norm_int_raises", lambda x: x.norm(), lambda: (torch.tensor([1, 2]),))
case("red_mean_bool_raises", lambda x: x.mean(), lambda: (torch.tensor([True]),))
case("red_quantile_f16_raises", lambda x: x.quantile(0.5), lambda: (specials(F16),))
for _interp in ("linear", "lower", "higher", "midpoint", "nearest"):
    case(
        f"red_quantile_{_interp}",
        lambda x, _i=_interp: (
            torch.quantile(
                x, torch.tensor([0.0, 0.1, 0.25, 0.5, 0.9, 1.0], dtype=F64), 0, interpolation=_i
            ),
            torch.nanquantile(x, 0.35, dim=1, interpolation=_i),
        ),
        lambda: (
            torch.tensor(
                [[4.0, NAN, 3.0, 1.0, -0.0, 2.5], [1.0, 1.0, 2.0, 8.0, 9.0, 0.0]], dtype=F64
            ).t(),
        ),
    )
case(
    "red_large_f16_sum",
    lambda x: (x.sum(), x.mean(), x.sum(0), x.cumsum(0)[-1], x.var(), x.norm()),
    lambda: (torch.full((70000,), 1.0, dtype=F16),),
    True,
)
case(
    "red_large_bf16_mean",
    lambda x: (x.sum(), x.mean(), x.std(), x.nansum(), x.logsumexp(0)),
    lambda: (torch.linspace(-3, 3, 50001, dtype=F64).to(BF16),),
    True,
)
case(
    "red_int8_sum_wrap_dtype",
    lambda x: (x.sum(dtype=I8), x.cumsum(0, dtype=I8), x.prod(dtype=I8), x.sum(dtype=U8)),
    lambda: (torch.tensor([100, 100, 100, -3], dtype=I8),),
)

# ============================================================================================
# 5. conversions between every pair of dtypes (float -> int only of in-range values: C leaves
# the rest undefined)
CONV_TO = (F16, BF16, F32, F64, I8, U8, I16, I32, I64, B, C64)


def _conv_input(src, dst):
    if src == F64 and dst in (F16, BF16, F32):
        # double rounding: eager converts float64 -> float32 -> half (c10::Half(float))
        vals = [1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 65519.99, 65520.0, 1e-8, 3.4e38, 3.5e38]
        vals += [1 + 2**-24 + 2**-50, -(1 + 2**-11 + 2**-30), 2049.0000001, NAN, -0.0, INF]
        return torch.tensor(vals, dtype=F64)
    if src == I64 and dst in (F16, BF16, F32, F64):
        return torch.tensor(
            [2**24 + 2**16 + 1, 2**24 + 1, 65520, 65519, -(2**63), 2**63 - 1, 2**53 + 1, 3]
        )
    if src == I32 and dst in (F16, BF16, F32):
        return torch.tensor([2**24 + 2**16 + 1, 2**24 + 1, 65520, -(2**31), 2**31 - 1], dtype=I32)
    s = specials(src)
    if (src.is_floating_point or src.is_complex) and dst not in FLOATS + (B, C64):
        s = s[torch.isfinite(s)]
        ii = torch.iinfo(dst)
        re = s.real if src.is_complex else s
        s = s[(re.double() > ii.min - 1) & (re.double() < ii.max + 1)]
    return s


for _src in CONV_TO:
    for _dst in CONV_TO:
        if _src != _dst and not (_src.is_complex and _dst not in (C64, B)):
            case(
                f"conv_{short(_src)}_to_{short(_dst)}",
                lambda x, _d=_dst: (x.to(_d), x.to(_d).to(F64) if not _d.is_complex else x.to(_d)),
                lambda _s=_src, _d=_dst: (_conv_input(_s, _d),),
            )

# ============================================================================================
# 6. half precision: chains (each op rounds), nn ops (computed in float32, rounded once)


def _h(dtype, *shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=F64) * scale).to(dtype)


HALF_NN = {
    "chain_mul_add": lambda a, b, c: a * b + c,
    "chain_exp_mul": lambda a, b, c: torch.exp(a) * b - c,
    "chain_to_float": lambda a, b, c: (a * b).float() + c.float(),
    "chain_scalar": lambda a, b, c: (a * 3.3 + 1.1) * b,
    "softmax": lambda a, b, c: a.softmax(-1),
    "log_softmax": lambda a, b, c: a.log_softmax(-1),
    "layer_norm": lambda a, b, c: F.layer_norm(a, a.shape[-1:], b[0], c[0]),
    "rms_norm": lambda a, b, c: F.rms_norm(a, a.shape[-1:], b[0]),
    "group_norm": lambda a, b, c: F.group_norm(a.reshape(2, 4, -1), 2, b[0, :4], c[0, :4]),
    "batch_norm_eval": lambda a, b, c: F.batch_norm(a, b[0].abs(), c[0].abs() + 1, b[1], c[1]),
    "gelu": lambda a, b, c: F.gelu(a * 4),
    "silu_mul": lambda a, b, c: F.silu(a) * b,
    "linear": lambda a, b, c: F.linear(a, b, c[0, :8]),
    "matmul": lambda a, b, c: a @ b.t(),
    "bmm": lambda a, b, c: torch.bmm(a.reshape(2, 4, -1), b.reshape(2, -1, 4)),
    "addmm": lambda a, b, c: torch.addmm(c[:, :8], a, b.t(), beta=0.5, alpha=2),
    "baddbmm": lambda a, b, c: torch.baddbmm(
        c[:4, :4].expand(2, 4, 4), a.reshape(2, 4, -1), b.reshape(2, -1, 4)
    ),
    "einsum": lambda a, b, c: torch.einsum("ij,kj->ik", a, b),
    "cross_entropy": lambda a, b, c: F.cross_entropy(a, torch.arange(a.shape[0]) % a.shape[1]),
    "mse_loss": lambda a, b, c: F.mse_loss(a, b),
    "normalize": lambda a, b, c: F.normalize(a, dim=-1),
    "cosine_similarity": lambda a, b, c: F.cosine_similarity(a, b),
    "sdpa": lambda a, b, c: F.scaled_dot_product_attention(a[None], b[None], c[None]),
    "conv1d": lambda a, b, c: F.conv1d(a[None], b[:, :, None].expand(-1, -1, 3)[:4].contiguous()),
    "sum_sq": lambda a, b, c: (a * a).sum(-1),
    "mean_dim": lambda a, b, c: a.mean(-1, keepdim=True),
    "var_dim": lambda a, b, c: a.var(-1),
    "cumsum": lambda a, b, c: a.cumsum(-1),
    "addcmul": lambda a, b, c: torch.addcmul(a, b, c, value=0.3),
    "lerp": lambda a, b, c: torch.lerp(a, b, 0.3),
    "dist": lambda a, b, c: torch.dist(a, b),
    "outer": lambda a, b, c: torch.outer(a[0], b[0]),
    "glu": lambda a, b, c: F.glu(a, -1),
    "pairwise": lambda a, b, c: F.pairwise_distance(a, b),
    "hardtanh_mul": lambda a, b, c: F.hardtanh(a * 10) * b,
    "interp": lambda a, b, c: F.interpolate(a[None], scale_factor=2.5, mode="linear"),
    "avg_pool": lambda a, b, c: F.avg_pool1d(a[None], 3, 2),
    "std_mean": lambda a, b, c: torch.std_mean(a, -1),
    "logsumexp": lambda a, b, c: a.logsumexp(-1),
    "embedding_bag": lambda a, b, c: F.embedding_bag(
        torch.tensor([1, 2, 4, 5]), a, torch.tensor([0, 2]), mode="mean"
    ),
}
for _name, _fn in HALF_NN.items():
    for _dt in (F16, BF16):
        case(
            f"half_{_name}_{short(_dt)}",
            _fn,
            lambda _dt=_dt: (
                _h(_dt, 8, 16, seed=1),
                _h(_dt, 8, 16, seed=2),
                _h(_dt, 8, 16, seed=3),
            ),
            red=True,
            ref=True,
        )

# ============================================================================================
# 7. complex numerics
COMPLEX = {
    "abs_big": lambda z: z.abs(),
    "div": lambda z: z / z.flip(0),
    "reciprocal": lambda z: z.reciprocal(),
    "mul_big": lambda z: z * z.flip(0),
    "pow_2": lambda z: z**2,
    "pow_half": lambda z: z**0.5,
    "pow_z": lambda z: z ** (0.5 + 1j),
    "log_big": lambda z: z.log(),
    "sqrt_big": lambda z: z.sqrt(),
    "sigmoid": lambda z: z.sigmoid(),
    "matmul": lambda z: z[:4].reshape(2, 2) @ z[4:8].reshape(2, 2),
    "sum_mean": lambda z: (z.sum(), z.mean(), z.prod()),
    "real_imag": lambda z: (z.real * 2, z.imag + 1, torch.view_as_real(z * 1)),
    "polar": lambda z: torch.polar(z.abs(), z.angle()),
    "conj_mul": lambda z: z.conj() * z,
    "eq_ne": lambda z: (z == z.flip(0), z != z.conj()),
    "mul_real": lambda z: z * torch.tensor(-0.0),
    "add_real_neg0": lambda z: torch.tensor([-0.0]) + z,
    "complex_fn": lambda z: torch.complex(z.real, -z.imag),
    "isreal": lambda z: (torch.isreal(z), z.isfinite()),
    "cumsum": lambda z: z.cumsum(0),
    "linalg_norm": lambda z: torch.linalg.vector_norm(z),
}


def _cbig(dtype):
    vals = [1e30 + 1e30j, 3e38 + 1j, 1e-30 + 1e-30j, -1e30 - 0j, 1 - 1j, -0.0 - 0j, 0.5 + 2j]
    vals += [1e20 + 1e20j, -2 + 0j, -2 - 0j, 1e19 + 0j, 3 - 4j]
    return torch.tensor(vals, dtype=dtype)


for _name, _fn in COMPLEX.items():
    for _dt in (C64, C128):
        case(f"complex_{_name}_{short(_dt)}", _fn, lambda _dt=_dt: (_cbig(_dt),), ref=True)

# ============================================================================================
# 8. assorted integer arithmetic and int/float mixes


def _ints(dtype):
    return specials(dtype)


for _dt in (I8, U8, I16, I32):
    case(
        f"int_addcmul_{short(_dt)}",
        lambda x: torch.addcmul(x, x, x, value=3),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_cumprod_{short(_dt)}",
        lambda x: (x.cumprod(0), x.cumprod(0, dtype=x.dtype)),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_mean_float_{short(_dt)}",
        lambda x: (x.float().mean(), x.double().var()),
        lambda _dt=_dt: (_ints(_dt),),
        True,
    )
    case(
        f"int_true_div_{short(_dt)}",
        lambda x: (x / 3, x / x.clamp(min=1), 7 / x.clamp(min=1)),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_clamp_float_{short(_dt)}",
        lambda x: (x.clamp(-2.5, 99.5), x.clamp(min=torch.tensor(1.5))),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_lerp_float_{short(_dt)}",
        lambda x: torch.lerp(x.float(), x.float().flip(0), 0.5),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_sum_dtypes_{short(_dt)}",
        lambda x: (x.sum().dtype, x.sum(dtype=torch.int32), x.cumsum(0).dtype),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_bincount_w_{short(_dt)}",
        lambda x: torch.bincount(x.abs().remainder(5).long(), weights=x.float()),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_mul_float_tensor_{short(_dt)}",
        lambda x: x * torch.full((len(x),), 0.5, dtype=F16),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_floor_divide_{short(_dt)}",
        lambda x: (x // 3, x // -3, x % -3, x // 2.5),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_index_add_{short(_dt)}",
        lambda x: torch.zeros(2, dtype=x.dtype).index_add(0, torch.arange(len(x)) % 2, x),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_scatter_reduce_{short(_dt)}",
        lambda x: torch.zeros(2, dtype=x.dtype).scatter_reduce(
            0, torch.arange(len(x)) % 2, x, "prod"
        ),
        lambda _dt=_dt: (_ints(_dt),),
    )
    case(
        f"int_float_ops_{short(_dt)}",
        lambda x: (torch.sqrt(x), torch.exp(x.clamp(max=50)), torch.sigmoid(x), x.reciprocal()),
        lambda _dt=_dt: (_ints(_dt),),
    )

case(
    "bool_arith",
    lambda a: (a + True, a * 2.5, a - 0.5, a / 2, ~a, -a.int(), a.sum(), a.prod(), a.cumsum(0)),
    lambda: (specials(B),),
)
case("bool_pow", lambda a: (a**2, a**0.5, 2**a, torch.pow(a, a)), lambda: (specials(B),))
case(
    "bool_minmax",
    lambda a: (a.max(), a.min(0), a.argmax(), torch.maximum(a, ~a), a.amax()),
    lambda: (specials(B),),
)


def main(argv):
    names = [n for n in CASES if not argv or any(s in n for s in argv)]
    results = {"ok": 0, "DIFF": 0, "SUBN": 0, "CRASH": 0}
    for name in names:
        try:
            line = compare(name, CASES[name])
        except Exception as e:  # noqa: BLE001  (the probe reports and moves on)
            line = f"CRASH {name}: {type(e).__name__}: {str(e)[:300]}"
        results[line.split()[0]] += 1
        if not line.startswith("ok"):
            print(line, flush=True)
    print(f"{len(names)} cases: {results}")


if __name__ == "__main__":
    main(sys.argv[1:])
