"""Probe dtypes, type promotion, integer and special-float semantics (session 24): generated
user-style scenarios run in eager PyTorch (CPU) and through ``torch.compile(backend="xla")``.

    PYTHONPATH=. python scripts/probe_dtypes24.py [substring ...]

The comparison is ``probe_dtypes``'s (dtype and shape exactly, integers and bools bit for bit,
floats with NaN/inf/signed-zero positions exactly and finite values within a few ulps; errors
by type and eager's message). What this adds to ``probe_dtypes`` (its sweeps are the special
values of one dtype, Python scalars of a few dtypes, a few mixed pairs):

1. every Python scalar kind (int, negative, zero, large, bool, float, -0.0, NaN, inf, complex)
   against every dtype, through the operators users write (``//``, ``%``, ``&``, ``<<``,
   comparisons, ``fmod``, ``copysign``, ``masked_fill``, ``clamp``...), as a constant of the
   code and as an argument of the call;
2. every pair of dtypes as 0-d/n-d tensors (wrapped-number and category promotion);
3. in-place ops whose result type cannot be cast to the target (eager's errors) and the ones
   that can (values), on inputs and on views;
4. integer overflow, division by zero, negative powers, shifts, float -> int casts;
5. NaN, ties and signed zeros in orderings, clamps, rounding, ``nan_to_num``;
6. half-precision reductions, integer means, ``where``/``masked_fill`` with scalars of other
   types, factories' dtype inference, large int64 against floats.

A case whose ops run in eager compiles them as one function (their outputs recorded one by
one); the ops eager rejects are compiled one by one and their errors compared. Prints the cases
that differ and a summary.
"""

from __future__ import annotations

import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_dtypes as base  # the comparison, special values, dtype names

B, U8, I8, I16, I32, I64 = base.B, base.U8, base.I8, base.I16, base.I32, base.I64
F16, BF16, F32, F64, C64 = base.F16, base.BF16, base.F32, base.F64, base.C64
NAN, INF = base.NAN, base.INF
ALL = (B, U8, I8, I16, I32, I64, F16, BF16, F32, F64, C64)
INTS = (U8, I8, I16, I32, I64)
short = base.short
specials = base.specials
base.CASES.clear()  # this probe's cases only
CASES = base.CASES


def _clone(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def multi(name, ops: dict, make, red=False):
    """A case of many ops on the same inputs: the ones eager runs compiled as one function
    (one by one if that raises), the ones eager rejects compiled one by one."""

    def run(C, rec):
        args = make()
        good = []
        for n, f in ops.items():
            try:
                f(*_clone(args))
                good.append(n)
            except Exception:  # noqa: BLE001, S110  (eager's errors are compared below)
                pass
        if good:

            def together(*a):
                return tuple(
                    ops[n](*[x.clone() if isinstance(x, torch.Tensor) else x for x in a])
                    for n in good
                )

            try:
                outs = C(together)(*_clone(args))
            except Exception:  # noqa: BLE001  (find which op, one by one)
                outs = None
            for i, n in enumerate(good):
                if outs is not None:
                    rec(n, outs[i])
                    continue
                try:
                    rec(n, C(ops[n])(*_clone(args)))
                except Exception as e:  # noqa: BLE001
                    rec(n, e)
        for n, f in ops.items():
            if n in good:
                continue
            try:
                rec(n, C(f)(*_clone(args)))
            except Exception as e:  # noqa: BLE001
                rec(n, e)

    run.red, run.ref = red, False
    CASES[name] = run


def inplace(name, f, make):
    """One scenario that writes into its inputs: its output (or error) and the inputs after."""

    def run(C, rec):
        args = make()
        try:
            out = C(f)(*args)
        except Exception as e:  # noqa: BLE001
            out = e
        rec("out", out)
        rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])

    run.red, run.ref = False, False
    CASES[name] = run


def values(dtype, n=None):
    s = specials(dtype)
    return s if n is None else s.repeat(n // len(s) + 1)[:n]


# ============================================================================================
# 1. Python scalars of every kind against every dtype, through the operators users write
SCALARS = {
    "int": 3,
    "negint": -2,
    "zero": 0,
    "bigint": 2**40,
    "true": True,
    "false": False,
    "float": 2.5,
    "negfloat": -1.5,
    "negzero": -0.0,
    "nan": NAN,
    "inf": INF,
    "complex": 1 + 2j,
}


def _scalar_ops(s):
    return {
        "add": lambda x: x + s,
        "radd": lambda x: s + x,
        "sub": lambda x: x - s,
        "rsub": lambda x: s - x,
        "mul": lambda x: x * s,
        "truediv": lambda x: x / s,
        "rtruediv": lambda x: s / x,
        "floordiv": lambda x: x // s,
        "rfloordiv": lambda x: s // x,
        "mod": lambda x: x % s,
        "rmod": lambda x: s % x,
        "pow": lambda x: x**s,
        "rpow": lambda x: s**x,
        "and": lambda x: x & s,
        "or": lambda x: s | x,
        "xor": lambda x: x ^ s,
        "lshift": lambda x: x << s,
        "rshift": lambda x: x >> s,
        "eq": lambda x: x == s,
        "lt": lambda x: x < s,
        "ge": lambda x: s >= x,
        "fmod": lambda x: torch.fmod(x, s),
        "remainder": lambda x: torch.remainder(x, s),
        "div_trunc": lambda x: torch.div(x, s, rounding_mode="trunc"),
        "div_floor": lambda x: torch.div(x, s, rounding_mode="floor"),
        "copysign": lambda x: torch.copysign(x, s),
        "float_power": lambda x: torch.float_power(x, s),
        "clamp_min": lambda x: x.clamp(min=s),
        "clamp_max": lambda x: torch.clamp_max(x, s),
        "masked_fill": lambda x: x.masked_fill(x.real != 0 if x.is_complex() else x != 0, s),
        "where_scalar": lambda x: torch.where(x.real == 0 if x.is_complex() else x == 0, s, x),
        "full_like": lambda x: torch.full_like(x, s),
        "add_alpha": lambda x: torch.add(x, x, alpha=s),
        "mul_": lambda x: x.mul_(s),
        "add_": lambda x: x.add_(s),
        "floordiv_": lambda x: x.floor_divide_(s),
        "fill_": lambda x: x.fill_(s),
        "lerp": lambda x: torch.lerp(x, x.flip(0), s),
        "xlogy": lambda x: torch.xlogy(x, s),
        "isclose": lambda x: torch.isclose(x, torch.full_like(x, 1), atol=abs(s) * 0.5),
        "heaviside": lambda x: torch.heaviside(x, torch.tensor(s, dtype=x.dtype)),
        "maximum_0d": lambda x: torch.maximum(x, torch.tensor(s)),
        "bitwise_and_0d": lambda x: x & torch.tensor(s),
    }


for _sname, _s in SCALARS.items():
    for _dt in ALL:
        multi(f"scalar_{_sname}_{short(_dt)}", _scalar_ops(_s), lambda _dt=_dt: (values(_dt),))

# the scalar as an argument of the call (Dynamo specializes ints and bools, takes floats as
# inputs where they only compute: ``capture/_float_values.py``, ``capture/_int_values.py``)
_ARG_OPS = {
    "add": lambda x, s: x + s,
    "rsub": lambda x, s: s - x,
    "mul": lambda x, s: x * s,
    "truediv": lambda x, s: x / s,
    "rtruediv": lambda x, s: s / x,
    "floordiv": lambda x, s: x // s,
    "mod": lambda x, s: x % s,
    "pow": lambda x, s: x**s,
    "rpow": lambda x, s: s**x,
    "eq": lambda x, s: x == s,
    "lt": lambda x, s: x < s,
    "clamp": lambda x, s: x.clamp(max=s),
    "where": lambda x, s: torch.where(x == 0, s, x),
    "masked_fill": lambda x, s: x.masked_fill(x == 0, s),
    "fmod": lambda x, s: torch.fmod(x, s),
    "mul_": lambda x, s: x.mul_(s),
    "lerp": lambda x, s: torch.lerp(x, x.flip(0), s),
}
for _sname, _s in {"float": 2.5, "negfloat": -0.75, "int": 7, "negint": -3, "big": 1e10}.items():
    for _dt in (B, U8, I8, I32, I64, F16, BF16, F32, F64):
        multi(
            f"argscalar_{_sname}_{short(_dt)}", _ARG_OPS, lambda _dt=_dt, _s=_s: (values(_dt), _s)
        )

# the same function called with a second value of the float: the program built for the first
# must give eager's answer for the second (an unspecialized float taken as an input)
for _dt in (I8, I32, I64, F16, BF16, F32):

    def _two(C, rec, _dt=_dt):
        f = C(lambda x, s: (x * s, x / s, x + s, x // s, torch.where(x > 0, s, x), x.clamp(max=s)))
        for s in (2.5, -0.125, 1e10, 3.0):
            rec(f"s={s}", f(values(_dt), s))

    _two.red, _two.ref = False, False
    CASES[f"argscalar_calls_{short(_dt)}"] = _two


# ============================================================================================
# 2. every pair of dtypes, as 0-d and n-d tensors
_PAIR_OPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "floordiv": lambda a, b: a // b,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "maximum": torch.maximum,
    "fmin": torch.fmin,
    "eq": torch.eq,
    "gt": torch.gt,
    "where": lambda a, b: torch.where(a.real != 0 if a.is_complex() else a != 0, a, b),
    "and": torch.bitwise_and,
    "or": torch.bitwise_or,
    "lshift": lambda a, b: a << b,
    "atan2": torch.atan2,
    "copysign": torch.copysign,
    "hypot": torch.hypot,
    "logical_and": torch.logical_and,
    "isclose": torch.isclose,
    "lerp_w": lambda a, b: torch.lerp(a, a.flip(0) if a.dim() else a, b),
    "addcmul": lambda a, b: torch.addcmul(a, a, b),
    "clamp_t": lambda a, b: torch.clamp(a, min=b),
    "result_type": lambda a, b: torch.zeros(1, dtype=torch.result_type(a, b)),
    "cat": lambda a, b: torch.cat([a.reshape(-1), b.reshape(-1)]),
    "stack": lambda a, b: torch.stack([a, b.expand_as(a) if b.dim() == 0 else b]),
}


def _pair_values(a, b, form):
    x, y = values(a), values(b)
    n = min(len(x), len(y))
    x, y = x[:n], y[:n].flip(0)
    if not b.is_floating_point and not b.is_complex:
        # (no zero divisors; no -1 either: eager dies of SIGFPE on the minimum // -1)
        y = torch.where((y == 0) | (y == -1), torch.full_like(y, 2), y)
    if form[0] == "0":
        x = x[2].clone()
    if form[1] == "0":
        y = y[3].clone()
    return x, y


for _a in ALL:
    for _b in ALL:
        for _form in ("nn", "n0", "0n", "00"):
            if _form != "nn" and _a == _b:
                continue
            multi(
                f"pair_{_form}_{short(_a)}_{short(_b)}",
                _PAIR_OPS,
                lambda _a=_a, _b=_b, _f=_form: _pair_values(_a, _b, _f),
            )


# ============================================================================================
# 3. in-place ops: result types that cannot be cast to the target (eager raises), and writes
# that can (values), into inputs and views of them
_OPERANDS = {
    "int": lambda: 3,
    "float": lambda: 2.5,
    "true": lambda: True,
    "complex": lambda: 1j,
    "t0_f64": lambda: torch.tensor(1.5, dtype=F64),
    "t0_i64": lambda: torch.tensor(-3),
    "t0_b": lambda: torch.tensor(True),
    "t0_c64": lambda: torch.tensor(1 + 1j, dtype=C64),
    "tn_f32": lambda: torch.full((4,), 0.75),
    "tn_i8": lambda: torch.tensor([1, -2, 3, 100], dtype=I8),
    "tn_f16": lambda: torch.tensor([1.5, -2.0, 3.25, 1e4], dtype=F16),
    "tn_b": lambda: torch.tensor([True, False, True, True]),
}
_INPLACE = {
    "iadd": lambda x, v: x.__iadd__(v),
    "isub": lambda x, v: x.__isub__(v),
    "imul": lambda x, v: x.__imul__(v),
    "itruediv": lambda x, v: x.__itruediv__(v),
    "ifloordiv": lambda x, v: x.__ifloordiv__(v),
    "imod": lambda x, v: x.__imod__(v),
    "ipow": lambda x, v: x.__ipow__(v),
    "iand": lambda x, v: x.__iand__(v),
    "ilshift": lambda x, v: x.__ilshift__(v),
    "clamp_": lambda x, v: x.clamp_(min=v),
    "masked_fill_": lambda x, v: x.masked_fill_(torch.tensor([True, False, True, False]), v),
    "setitem_mask": lambda x, v: x.__setitem__(torch.tensor([True, False, True, False]), v),
    "setitem_slice": lambda x, v: x.__setitem__(slice(1, 3), v),
    "copy_": lambda x, v: x.copy_(torch.as_tensor(v).expand(4)),
    "lerp_": lambda x, v: x.lerp_(torch.zeros_like(x), v),
    "addcmul_": lambda x, v: x.addcmul_(x, torch.as_tensor(v)),
    "view_add_": lambda x, v: x[1:].add_(v),
    "atan2_": lambda x, v: x.atan2_(torch.as_tensor(v)),
    "out_add": lambda x, v: torch.add(x, v, out=x),
}


def _target(dtype):
    if dtype == B:
        return torch.tensor([True, False, True, True])
    if dtype.is_complex:
        return torch.tensor([1 + 2j, -3j, 0.5, -1], dtype=dtype)
    return (
        torch.tensor([5, -7, 9, 1], dtype=F64).to(dtype)
        if dtype != U8
        else torch.tensor([5, 7, 9, 1], dtype=U8)
    )


def _written(f, v):
    def op(x):
        f(x, v() if callable(v) else v)
        return x

    return op


for _dt in (B, U8, I8, I32, I64, F16, BF16, F32, C64):
    for _on, _o in _OPERANDS.items():
        multi(
            f"inplace_{short(_dt)}_{_on}",
            {_op: _written(_f, _o) for _op, _f in _INPLACE.items()},
            lambda _dt=_dt: (_target(_dt),),
        )
# writes into the inputs themselves (and a view of one): the write-back
for _dt in (U8, I32, F16, F32):
    for _on in ("float", "t0_f64", "tn_f32", "int", "t0_b"):
        for _op in ("iadd", "imul", "itruediv", "setitem_mask", "view_add_", "clamp_"):
            inplace(
                f"input_{_op}_{short(_dt)}_{_on}",
                lambda x, _f=_INPLACE[_op], _o=_OPERANDS[_on]: _f(x, _o()),
                lambda _dt=_dt: (_target(_dt),),
            )


# ============================================================================================
# 4. integers: overflow, division by zero, negative powers, shifts, float -> int casts
for _dt in INTS:
    ii = torch.iinfo(_dt)
    multi(
        f"int_overflow_{short(_dt)}",
        {
            "add_max": lambda x: x + x.max(),
            "mul_big": lambda x: x * x,
            "neg_min": lambda x: -x,
            "abs_min": lambda x: x.abs(),
            "sub_wrap": lambda x: x - x.max(),
            "sum": lambda x: (x.sum(), x.sum(0), x.sum().dtype),
            "sum_keep": lambda x: x.sum(0, keepdim=True),
            "cumsum": lambda x: x.cumsum(0),
            "prod": lambda x: (x.prod(), x.prod(0)),
            "cumprod": lambda x: x.cumprod(0),
            "mean_dtype": lambda x: x.mean(dtype=torch.float64),
            "sum_same_dtype": lambda x: x.sum(dtype=x.dtype),
            "mul_scalar": lambda x: x * 100,
            "add_scalar": lambda x: x + 127,
            "square": lambda x: torch.square(x),
            "pow3": lambda x: x**3,
            "sgn": lambda x: (torch.sign(x), torch.sgn(x)),
            "mul_neg1": lambda x: x * -1,
            "dot": lambda x: torch.dot(x, x),
            "matmul": lambda x: x[None] @ x[:, None],
            "addcmul": lambda x: torch.addcmul(x, x, x, value=2),
            "lerp_int": lambda x: torch.lerp(x.float(), x.float().flip(0), 0.5),
            "cumsum_f": lambda x: x.cumsum(0, dtype=torch.float32),
            "bincount": lambda x: torch.bincount(x.abs().remainder(7).long()),
            "add_alpha": lambda x: torch.add(x, x, alpha=3),
            "sub_alpha": lambda x: torch.sub(x, x.flip(0), alpha=-2),
            "logsumexp": lambda x: torch.logsumexp(x, 0),
            "sort": lambda x: x.sort(),
            "histc": lambda x: torch.histc(x.float(), 4),
        },
        lambda _dt=_dt, ii=ii: (
            torch.tensor(
                [ii.max, ii.min, ii.max - 1, ii.min + 1, 1, 0, 2, (ii.max + 1) // 2], dtype=_dt
            ),
        ),
    )
    if _dt in (I32, I64):
        continue  # (eager's CPU kernels die of SIGFPE dividing the minimum by -1)
    multi(
        f"int_overflow_div_{short(_dt)}",
        {
            "floordiv_neg1": lambda x: x // -1,
            "div_trunc_neg1": lambda x: torch.div(x, -1, rounding_mode="trunc"),
            "remainder_neg1": lambda x: x % -1,
            "fmod_neg1": lambda x: torch.fmod(x, -1),
        },
        lambda _dt=_dt, ii=ii: (torch.tensor([ii.max, ii.min, ii.min + 1, 1, 0, 2], dtype=_dt),),
    )

_ZERO_DIV = {
    "floordiv0": lambda x, z: x // 0,
    "rfloordiv": lambda x, z: 7 // x,
    "floordiv_t": lambda x, z: x // z,
    "mod0": lambda x, z: x % 0,
    "mod_t": lambda x, z: x % z,
    "rmod": lambda x, z: 5 % x,
    "fmod0": lambda x, z: torch.fmod(x, 0),
    "fmod_t": lambda x, z: torch.fmod(x, z),
    "trunc0": lambda x, z: torch.div(x, 0, rounding_mode="trunc"),
    "trunc_t": lambda x, z: torch.div(x, z, rounding_mode="trunc"),
    "floor_t": lambda x, z: torch.div(x, z, rounding_mode="floor"),
    "true_t": lambda x, z: x / z,
    "true0": lambda x, z: x / 0,
    "floordiv_0d": lambda x, z: x // z[1],
    "ifloordiv": lambda x, z: x.clone().floor_divide_(z),
    "imod": lambda x, z: x.clone().remainder_(z),
    "float_z": lambda x, z: x // z.float(),
    "div_sum": lambda x, z: x // (z.sum() - z.sum()),
}
for _dt in INTS + (B,):
    for _op, _f in _ZERO_DIV.items():
        multi(
            f"zerodiv_{_op}_{short(_dt)}",
            {_op: _f},
            lambda _dt=_dt: (
                torch.tensor([3, 0, 1, 1], dtype=I64).to(_dt),
                torch.tensor([1, 0, 1, 1], dtype=I64).to(_dt),
            ),
        )

for _dt in INTS:
    multi(
        f"intpow_{short(_dt)}",
        {
            "neg_scalar": lambda x: x**-1,
            "neg_scalar2": lambda x: torch.pow(x, -2),
            "pow_": lambda x: x.clone().pow_(-1),
            "neg_tensor": lambda x: torch.pow(x, torch.tensor([-1, -2, -3, 0, 1], dtype=x.dtype)),
            "neg_tensor_0d": lambda x: torch.pow(x, torch.tensor(-1, dtype=x.dtype)),
            "rpow_tensor": lambda x: 2 ** (x - 3),
            "rpow_neg_base": lambda x: (-2) ** x.abs(),
            "rpow_one": lambda x: 1 ** (x - 3),
            "float_exp": lambda x: x**-1.0,
            "pow_0": lambda x: x**0,
            "zero_pow_neg": lambda x: torch.pow(x - x, torch.tensor(-1, dtype=x.dtype)),
            "int_pow_int64": lambda x: torch.pow(x, torch.tensor([-1, 2, 3, 0, 1])),
            "pow_large": lambda x: x**40,
            "float_power_neg": lambda x: torch.float_power(x, -2),
        },
        lambda _dt=_dt: (torch.tensor([2, 1, 0, 3, 5], dtype=_dt) * (1 if _dt == U8 else -1) + 1,),
    )

for _dt in INTS:
    bits = torch.iinfo(_dt).bits
    multi(
        f"shift_{short(_dt)}",
        {
            "lshift_t": lambda x, s: x << s,
            "rshift_t": lambda x, s: x >> s,
            "lshift_big": lambda x, s, bits=bits: x << bits,
            "rshift_big": lambda x, s, bits=bits: x >> (bits + 3),
            "lshift_70": lambda x, s: x << 70,
            "rshift_neg": lambda x, s: x >> -1,
            "lshift_neg": lambda x, s: x << -2,
            "rlshift": lambda x, s: 1 << s,
            "rrshift": lambda x, s: -1024 >> s,
            "lshift_i64": lambda x, s: x << s.long(),
            "ilshift": lambda x, s: x.clone().__ilshift__(s),
            "shift_bool": lambda x, s: x << torch.tensor(True),
            "lshift_0d": lambda x, s: x << s[3],
        },
        lambda _dt=_dt, bits=bits: (
            torch.tensor([1, -1, 5, 3, -128, 127, 100, 2], dtype=I64).to(_dt),
            torch.tensor([0, 1, bits - 1, bits, bits + 1, 64, 100, -1], dtype=I64).to(_dt),
        ),
    )

multi(
    "bitwise_mixed",
    {
        "bool_and_int": lambda b, x: b & x,
        "int_or_bool": lambda b, x: x | b,
        "bool_xor_true": lambda b, x: b ^ True,
        "bool_and_int_scalar": lambda b, x: b & 3,
        "bool_or_0": lambda b, x: b | 0,
        "invert_bool": lambda b, x: ~b,
        "invert_int": lambda b, x: ~x,
        "bool_and_u8": lambda b, x: b & x.to(U8),
        "i8_xor_u8": lambda b, x: x.to(I8) ^ x.to(U8),
        "bool_lshift": lambda b, x: b << 1,
        "bool_add_bool": lambda b, x: b + b,
        "bool_mul_bool": lambda b, x: b * b,
        "bool_sub": lambda b, x: b - b,
        "neg_bool": lambda b, x: -b,
        "bool_floordiv": lambda b, x: b // b,
        "bool_sum": lambda b, x: (b.sum(), b.cumsum(0), b.prod()),
        "bool_max": lambda b, x: (b.max(), torch.maximum(b, ~b), b.argmax()),
        "logical_int": lambda b, x: (torch.logical_and(x, b), torch.logical_xor(x, 0.5)),
        "bitwise_not_i8": lambda b, x: torch.bitwise_not(x.to(I8)),
        "bitwise_left_u8": lambda b, x: x.to(U8) << 7,
        "bool_eq_int": lambda b, x: b == x,
        "bool_lt_float": lambda b, x: b < 0.5,
        "gcd": lambda b, x: torch.gcd(x, x.flip(0)),
        "lcm": lambda b, x: torch.lcm(x, x.flip(0)),
        "gcd_i8": lambda b, x: torch.gcd(x.to(I8), torch.tensor(-128, dtype=I8)),
    },
    lambda: (
        torch.tensor([True, False, True, False, True]),
        torch.tensor([3, -4, 0, 255, -128]),
    ),
)

_FLOATS_FOR_CAST = [0.5, -0.5, 1.9999, -1.9999, 2.5, -2.5, 127.9, -128.9, 255.9, 256.0, -1.0]
_FLOATS_FOR_CAST += [1e10, -1e10, 3e38, NAN, INF, -INF, 65504.0, -0.0, 32767.5, 2.0**31, 2.0**63]
for _src in (F16, BF16, F32, F64):
    for _dst in INTS + (B,):
        multi(
            f"cast_{short(_src)}_to_{short(_dst)}",
            {
                "to": lambda x, _d=_dst: x.to(_d),
                "long_then": lambda x, _d=_dst: x.long().to(_d) if _d != B else x.bool(),
                "type_as": lambda x, _d=_dst: x.type_as(torch.zeros(1, dtype=_d)),
                "new_tensor": lambda x, _d=_dst: torch.zeros(x.shape, dtype=_d) + x.to(_d),
                "copy_": lambda x, _d=_dst: torch.zeros(x.shape, dtype=_d).copy_(x),
                "trunc_eq": lambda x, _d=_dst: x.trunc() == x.to(_d),
            },
            lambda _src=_src: (torch.tensor(_FLOATS_FOR_CAST, dtype=F64).to(_src),),
        )


# ============================================================================================
# 5. NaN, ties, signed zeros: ordering, clamps, rounding, nan_to_num
def _nan_ties(dtype):
    v = [1.0, NAN, 3.0, 3.0, -0.0, 0.0, NAN, -INF, 3.0, 0.0, -0.0, 2.0]
    return torch.tensor(v, dtype=F64).to(dtype).reshape(3, 4)


_ORDER_OPS = {
    "max": lambda x: (x.max(), x.max(1), x.max(0)),
    "min": lambda x: (x.min(), x.min(1), x.min(0)),
    "argmax": lambda x: (x.argmax(), x.argmax(1), x.argmin(0), x.argmin(1, keepdim=True)),
    "amax": lambda x: (x.amax(1), x.amin((0, 1))),
    "aminmax": lambda x: torch.aminmax(x, dim=1),
    "sort": lambda x: (x.sort(1), x.sort(0, descending=True), x.sort(1, stable=True)),
    "argsort": lambda x: (x.argsort(1, stable=True), x.argsort(0, descending=True, stable=True)),
    "msort": lambda x: torch.msort(x),
    "topk": lambda x: (x.topk(2, 1), x.topk(3, 0, largest=False)),
    "kthvalue": lambda x: x.kthvalue(2, 1),
    "median": lambda x: (x.median(), x.median(1), x.nanmedian(1)),
    "mode": lambda x: x.mode(1),
    "maximum": lambda x: (torch.maximum(x, x.flip(1)), torch.minimum(x, x.flip(0))),
    "fmax": lambda x: (torch.fmax(x, x.flip(1)), torch.fmin(x, x.flip(0))),
    "cummax": lambda x: (x.cummax(1), x.cummin(0)),
    "clamp_nan": lambda x: (x.clamp(min=NAN), x.clamp(max=NAN), x.clamp(NAN, NAN)),
    "clamp_inverted": lambda x: (x.clamp(2.0, 1.0), x.clamp(min=5.0, max=-5.0)),
    "clamp_t_nan": lambda x: x.clamp(min=torch.full_like(x, NAN), max=x.flip(1)),
    "clamp_t_inverted": lambda x: x.clamp(min=x.flip(0), max=x.flip(1)),
    "sign": lambda x: (torch.sign(x), torch.sgn(x), torch.signbit(x)),
    "copysign": lambda x: (torch.copysign(x, -0.0), torch.copysign(x, x.flip(1)), x.copysign(-1)),
    "nan_to_num": lambda x: (torch.nan_to_num(x), torch.nan_to_num(x, nan=-1.0, posinf=1e30)),
    "nan_to_num_neginf": lambda x: torch.nan_to_num(x, neginf=0.0),
    "round": lambda x: (x.round(), (x * 2.5).round(), (x + 0.5).round()),
    "round_dec": lambda x: ((x * 1.2345).round(decimals=2), (x * 123).round(decimals=-1)),
    "eq_nan": lambda x: (x == x.clone(), x != x.clone(), x < x.flip(1), x >= x.flip(0)),
    "unique": lambda x: torch.unique(x, sorted=True),
    "searchsorted": lambda x: torch.searchsorted(x.sort(1).values, x),
    "isin": lambda x: torch.isin(x, x[0]),
    "max_where": lambda x: torch.where(x > 1, x, 0.0).max(1),
    "argmax_eq": lambda x: x.argmax(1) == x.argmin(1),
    "cumsum_nan": lambda x: x.cumsum(1),
}
for _dt in (F16, BF16, F32, F64):
    multi(f"order_{short(_dt)}", _ORDER_OPS, lambda _dt=_dt: (_nan_ties(_dt),))
for _dt in (U8, I8, I32, I64, B):
    multi(
        f"order_{short(_dt)}",
        {k: v for k, v in _ORDER_OPS.items() if "nan" not in k and k != "round_dec"},
        lambda _dt=_dt: (torch.tensor([3, 1, 3, 0, 2, 2, 0, 3, 1, 1, 0, 3]).to(_dt).reshape(3, 4),),
    )

# rounding: half-to-even, decimals, per dtype
_ROUND_VALUES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1.005, 2.675, -0.0, 1e16 + 1]
_ROUND_VALUES += [123.456, -123.455, 0.125, 0.375, 1e-8, 65504.0, 4503599627370497.0, NAN, INF]
for _dt in (F16, BF16, F32, F64):
    multi(
        f"round_{short(_dt)}",
        {
            f"dec{d}": (lambda x, d=d: torch.round(x, decimals=d))
            for d in (-3, -2, -1, 0, 1, 2, 3, 8, 20)
        }
        | {"round": torch.round, "rint_": lambda x: x.round_(), "floor": torch.floor},
        lambda _dt=_dt: (torch.tensor(_ROUND_VALUES, dtype=F64).to(_dt),),
    )
for _dt in INTS:
    multi(
        f"round_{short(_dt)}",
        {
            "round": torch.round,
            "dec1": lambda x: torch.round(x, decimals=1),
            "dec_neg": lambda x: torch.round(x, decimals=-1),
            "floor": torch.floor,
            "ceil": torch.ceil,
            "trunc": torch.trunc,
            "frac": torch.frac,
        },
        lambda _dt=_dt: (values(_dt),),
    )

# nan_to_num per dtype (its defaults: the dtype's extremes)
for _dt in (F16, BF16, F32, F64, C64, I32, U8, B):
    multi(
        f"nan_to_num_{short(_dt)}",
        {
            "default": torch.nan_to_num,
            "nan": lambda x: torch.nan_to_num(x, nan=7.0),
            "posinf_big": lambda x: torch.nan_to_num(x, posinf=1e300, neginf=-1e300),
            "posinf_int": lambda x: torch.nan_to_num(x, posinf=3, neginf=-3),
            "inplace": lambda x: x.nan_to_num_(nan=0.0),
            "then_sum": lambda x: torch.nan_to_num(x).sum(),
        },
        lambda _dt=_dt: (values(_dt),),
    )


# ============================================================================================
# 6. half-precision reductions; integer means; where/masked_fill scalars; factories; int64
def _half_big(dtype, n, seed=0, scale=1.0, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=g, dtype=F64) * scale + offset).to(dtype)


for _dt in (F16, BF16):
    for _n, _off in ((4097, 1.0), (70000, 0.5), (300, 100.0)):
        multi(
            f"halfred_{short(_dt)}_{_n}",
            {
                "sum": lambda x: (x.sum(), x.reshape(-1, 1).sum(0)),
                "mean": lambda x: x.mean(),
                "var": lambda x: (x.var(), x.std(correction=0)),
                "cumsum": lambda x: x.cumsum(0),
                "softmax": lambda x: x.softmax(0),
                "log_softmax": lambda x: x.log_softmax(0),
                "prod": lambda x: x[:64].prod(),
                "norm": lambda x: (x.norm(), torch.linalg.vector_norm(x, 3)),
                "logsumexp": lambda x: x.logsumexp(0),
                "nansum": lambda x: x.nansum(),
                "sum_dtype_f32": lambda x: x.sum(dtype=torch.float32),
                "mean_2d": lambda x: x[: (len(x) // 4) * 4].reshape(4, -1).mean(1),
                "dot": lambda x: torch.dot(x, x),
                "matvec": lambda x: x[None] @ x[:, None],
                "cumprod": lambda x: x[:32].cumprod(0),
                "sum_sq_then_sqrt": lambda x: (x * x).sum().sqrt(),
                "trapz": lambda x: torch.trapezoid(x),
                "add_reduce": lambda x: x.sum() + x.sum(),
                "avg_pool": lambda x: F.avg_pool1d(x[None, None, :4096], 64),
                "sum_of_f32": lambda x: x.float().sum().to(x.dtype),
                "mean_of_ints": lambda x: (x * 0).long().sum().to(x.dtype),
            },
            lambda _dt=_dt, _n=_n, _off=_off: (_half_big(_dt, _n, offset=_off),),
            red=True,
        )

for _dt in INTS + (B,):
    multi(
        f"intred_{short(_dt)}",
        {
            "mean": lambda x: x.mean(),
            "var": lambda x: x.var(),
            "std": lambda x: x.std(0),
            "nanmean": lambda x: x.nanmean(),
            "var_mean": lambda x: torch.var_mean(x),
            "std_mean": lambda x: torch.std_mean(x),
            "median": lambda x: x.median(),
            "quantile": lambda x: x.quantile(0.5),
            "logsumexp": lambda x: x.logsumexp(0),
            "softmax": lambda x: x.softmax(0),
            "norm": lambda x: x.norm(),
            "mean_dtype": lambda x: x.mean(dtype=torch.float32),
            "sum_float": lambda x: x.sum() / x.numel(),
            "true_div_mean": lambda x: x.sum() / len(x),
            "cumsum": lambda x: (x.cumsum(0), x.cumsum(0).dtype),
            "prod_dtype": lambda x: x.prod(dtype=torch.int8),
            "dist": lambda x: torch.dist(x, x),
            "normalize": lambda x: F.normalize(x, dim=0),
            "count": lambda x: (x.count_nonzero(), (x > 1).sum(), (x > 1).float().mean()),
            "cumsum_sum": lambda x: x.cumsum(0).sum(dtype=torch.int8),
            "sum_bool_dtype": lambda x: x.sum(dtype=torch.bool),
            "amax_dtype": lambda x: (x.amax(), x.max().dtype),
        },
        lambda _dt=_dt: (torch.tensor([100, 120, 3, 1, 0, 127, 126, 5], dtype=I64).to(_dt),),
    )

for _dt in ALL:
    multi(
        f"where_fill_{short(_dt)}",
        {
            "where_float": lambda x, m: torch.where(m, x, 2.5),
            "where_float_l": lambda x, m: torch.where(m, 2.5, x),
            "where_int": lambda x, m: torch.where(m, x, 300),
            "where_true": lambda x, m: torch.where(m, x, True),
            "where_big": lambda x, m: torch.where(m, x, 1e5),
            "where_nan": lambda x, m: torch.where(m, x, NAN),
            "where_negint": lambda x, m: torch.where(m, x, -1),
            "where_scalars_i": lambda x, m: torch.where(m, 1, 0),
            "where_scalars_f": lambda x, m: torch.where(m, 1.0, 0),
            "where_scalars_b": lambda x, m: torch.where(m, True, False),
            "where_scalars_c": lambda x, m: torch.where(m, 1j, 0),
            "where_0d_f64": lambda x, m: torch.where(m, x, torch.tensor(0.1, dtype=F64)),
            "where_0d_i64": lambda x, m: torch.where(m, torch.tensor(7), x),
            "where_self_method": lambda x, m: x.where(m, 0.5),
            "masked_fill_float": lambda x, m: x.masked_fill(m, 2.7),
            "masked_fill_negfloat": lambda x, m: x.masked_fill(m, -2.7),
            "masked_fill_int": lambda x, m: x.masked_fill(m, 300),
            "masked_fill_neg": lambda x, m: x.masked_fill(m, -1),
            "masked_fill_nan": lambda x, m: x.masked_fill(m, NAN),
            "masked_fill_inf": lambda x, m: x.masked_fill(m, -INF),
            "masked_fill_big": lambda x, m: x.masked_fill(m, 1e5),
            "masked_fill_0d": lambda x, m: x.masked_fill(m, torch.tensor(2.7, dtype=F64)),
            "masked_fill_0d_i": lambda x, m: x.masked_fill(m, torch.tensor(-5)),
            "masked_fill_complex": lambda x, m: x.masked_fill(m, 1j),
            "setitem_float": lambda x, m: x.__setitem__(m, 2.7) or x,
            "setitem_nan": lambda x, m: x.__setitem__(m, NAN) or x,
            "setitem_neg": lambda x, m: x.__setitem__(m, -3) or x,
            "setitem_t": lambda x, m: x.__setitem__(m, torch.tensor(-2.7, dtype=F64)) or x,
            "index_fill": lambda x, m: x.index_fill(0, torch.tensor([0, 2]), 2.7),
            "index_put_acc": lambda x, m: x.index_put((torch.tensor([0, 0]),), x[:2], True),
            "scatter_value": lambda x, m: x.scatter(0, torch.tensor([1, 3]), 2.7),
        },
        lambda _dt=_dt: (values(_dt, 8), torch.tensor([True, False, False, True] * 2)),
    )

_FACTORIES = {
    "arange_int": lambda x: torch.arange(5) + x[0],
    "arange_float": lambda x: torch.arange(5.0) + x[0],
    "arange_step": lambda x: torch.arange(0, 1, 0.1) + x[0],
    "arange_neg_step": lambda x: torch.arange(1, -1, -0.3) + x[0],
    "arange_int_dtype_float_step": lambda x: torch.arange(0, 5, 1.5, dtype=torch.int64) + x[0],
    "arange_f16": lambda x: torch.arange(0, 3000, 7, dtype=F16) + x[0],
    "arange_bf16": lambda x: torch.arange(250, 300, dtype=BF16) + x[0],
    "arange_f16_step": lambda x: torch.arange(0, 1, 0.1, dtype=F16) + x[0],
    "arange_u8": lambda x: torch.arange(250, 256, dtype=U8) + x[0],
    "arange_i8": lambda x: torch.arange(-128, 127, 50, dtype=I8) + x[0],
    "arange_f64_big": lambda x: torch.arange(2**53 - 2, 2**53 + 2, dtype=F64) - 2**53 + x[0],
    "arange_len_float": lambda x: torch.arange(0.5, 3.7, 0.4) + x[0],
    "linspace": lambda x: torch.linspace(0, 1, 7) + x[0],
    "linspace_int": lambda x: torch.linspace(-3, 10, 5, dtype=torch.int64) + x[0],
    "linspace_i8": lambda x: torch.linspace(-128, 127, 9, dtype=I8) + x[0],
    "linspace_f16": lambda x: torch.linspace(0, 1000, 9, dtype=F16) + x[0],
    "linspace_bf16": lambda x: torch.linspace(-1, 1, 11, dtype=BF16) + x[0],
    "linspace_1": lambda x: torch.linspace(3, 5, 1) + x[0],
    "logspace": lambda x: torch.logspace(0, 3, 4) + x[0],
    "logspace_int": lambda x: torch.logspace(0, 3, 4, dtype=torch.int64) + x[0],
    "logspace_base2": lambda x: torch.logspace(0, 10, 6, base=2, dtype=I32) + x[0],
    "full_int": lambda x: torch.full((2,), 3) + x[0],
    "full_bool": lambda x: torch.full((2,), True) + x[0],
    "full_float": lambda x: torch.full((2,), 0.1) + x[0],
    "full_complex": lambda x: torch.full((2,), 1j) + x[0],
    "full_int_dtype_float": lambda x: torch.full((2,), 2.9, dtype=torch.int32) + x[0],
    "full_u8_neg": lambda x: torch.full((2,), -1, dtype=U8) + x[0],
    "full_like_float": lambda x: torch.full_like(x, 2.9),
    "tensor_literal": lambda x: torch.tensor([1, 2.5]) + x[0],
    "tensor_int": lambda x: torch.tensor(3) * x[0],
    "tensor_bool": lambda x: torch.tensor(True) + x[0],
    "scalar_tensor": lambda x: torch.scalar_tensor(3) + x[0],
    "zeros_like_dtype": lambda x: torch.zeros_like(x, dtype=F16) + x[0],
    "ones_int": lambda x: torch.ones(2, dtype=torch.int) / x[0],
    "new_full": lambda x: x.new_full((2,), 2.5),
    "new_tensor": lambda x: x.new_tensor([1.7, -2.2]),
    "new_ones": lambda x: x.new_ones(2) * 0.5,
    "eye_dtype": lambda x: torch.eye(2, dtype=torch.int8) * x[0],
    "randint_dtype": lambda x: (torch.randint(0, 5, (3,)).dtype, torch.randint(0, 5, (3,)) * 0),
    "rand_like_int": lambda x: torch.rand_like(x.float()) * 0,
    "empty_dtype": lambda x: torch.empty(2).dtype,
    "tril_indices": lambda x: torch.tril_indices(3, 3) + x[0],
    "arange_tensor_end": lambda x: torch.arange(x.abs().max().long().item() if False else 4) * x[0],
}
for _dt in (I64, I32, F32, B, F16):
    multi(
        f"factory_{short(_dt)}",
        _FACTORIES,
        lambda _dt=_dt: (torch.tensor([1, 0], dtype=_dt),),
    )

_BIG = [2**53 + 1, 2**53, -(2**53) - 1, 2**62 + 1, 2**63 - 1, -(2**63), 2**31, 2**24 + 1]
multi(
    "int64_big",
    {
        "eq_float": lambda x: (x == 2.0**53, x == float(2**53 + 1), x == 2**53 + 1),
        "lt_float": lambda x: (x < 2.0**53, x > 9.2e18, x <= 2**62),
        "eq_f64_tensor": lambda x: x == x.double(),
        "eq_f32_tensor": lambda x: x == x.float(),
        "eq_f64_0d": lambda x: x == torch.tensor(2.0**53, dtype=F64),
        "lt_f16_0d": lambda x: x < torch.tensor(65504, dtype=F16),
        "div_float": lambda x: (x / 3.0, x / 3, x / torch.tensor(3.0, dtype=F64)),
        "mul_float": lambda x: (x * 1.0, x * 0.5, x * torch.tensor(1.0, dtype=F64)),
        "add_half": lambda x: (x + 0.5, x - 0.5),
        "to_float": lambda x: (x.float(), x.double(), x.half(), x.bfloat16()),
        "round_trip": lambda x: x.double().long() - x,
        "floordiv_float": lambda x: x // 2.5,
        "floordiv_int": lambda x: (x // 3, x // -7, x % 1000, x % -1000),
        "isclose": lambda x: torch.isclose(x, x + 1),
        "max": lambda x: (x.max(), x.argmax(), x.sort().values),
        "sum_wrap": lambda x: (x.sum(), x.cumsum(0)),
        "mean_f64": lambda x: x.double().mean(),
        "where_float": lambda x: torch.where(x > 0, x, 0.5),
        "clamp_float": lambda x: x.clamp(max=1e18),
        "clamp_float_min": lambda x: x.clamp(min=-1.5),
        "maximum_f64": lambda x: torch.maximum(x, torch.tensor(2.0**53, dtype=F64)),
        "pow": lambda x: (x % 1000) ** 5,
        "abs_min": lambda x: x.abs(),
        "bitwise": lambda x: (x >> 62, x << 1, x & 0xFFFF, x ^ -1),
        "floordiv_0d": lambda x: x // torch.tensor(2**40),
        "remainder_f": lambda x: torch.remainder(x, 2.0**40),
        "fmod_f": lambda x: torch.fmod(x, 1e10),
        "sum_f32": lambda x: x.float().sum(),
        "mul_int": lambda x: x * 3,
        "neg": lambda x: -x,
        "true_div_int": lambda x: x / x.flip(0),
    },
    lambda: (torch.tensor(_BIG),),
)
multi(
    "int32_big_vs_float",
    {
        "eq_float": lambda x: (x == 2.0**24, x == 16777217.0, x < 1e9),
        "div_float": lambda x: (x / 3.0, x * 1.0000001),
        "add_float": lambda x: x + 0.5,
        "to_f32": lambda x: (x.float(), x.half()),
        "eq_f32": lambda x: x == x.float(),
    },
    lambda: (torch.tensor([2**24 + 1, 2**24, 2**31 - 1, -(2**31), 65505, 2049], dtype=I32),),
)

# user-style: Python numbers out of tensors (graph breaks), bool() of tensors
multi(
    "python_numbers",
    {
        "float_of_sum": lambda x: float(x.sum()) * x,
        "int_of_float": lambda x: int(x[0] * 3) + x,
        "int_of_neg": lambda x: int(-x[1] * 3.9) * x,
        "bool_nan": lambda x: x * bool(x[3]),
        "item_f16": lambda x: x.half()[0].item() * x,
        "tolist": lambda x: torch.tensor(x.tolist()) + 1,
        "round_item": lambda x: round(x[2].item()) * x,
        "if_gt": lambda x: x * 2 if x.sum() > 0 else x - 1,
        "math_floor": lambda x: math.floor(x[1]) * x,
        "int_div_item": lambda x: x // int(x[0].item() + 1),
    },
    lambda: (torch.tensor([1.7, -2.2, 2.5, NAN]),),
)


def _dynamo(d: str) -> bool:
    return "TorchRuntimeError" in d and "fake tensor" in d


def compare(name, fn) -> str:
    """``probe_dtypes.compare``, every observation compared: the first difference that is not
    Dynamo's (its fake kernels' errors, ``TorchRuntimeError``: the same with
    ``backend="eager"``), tagged ``DIFF``; else the first of Dynamo's, tagged ``DYNAMO``."""
    exp, got = base.observe(fn, False), base.observe(fn, True)
    red = getattr(fn, "red", False)
    found = []
    for (lg, g), (le, e) in zip(got, exp):
        d = (
            f"observation {lg!r} (xla) vs {le!r} (eager)"
            if lg != le
            else base.same(g, e, lg, red, None)
        )
        if d:
            found.append(d)
    if len(got) != len(exp):
        found.append(f"observations {[x for x, _ in got]} vs {[x for x, _ in exp]}")
    real = [d for d in found if not _dynamo(d) and not d.startswith("SUBN")]
    if real:
        more = f" (+{len(real) - 1} more)" if len(real) > 1 else ""
        return f"DIFF  {name}: {real[0]}{more}"
    if any(d.startswith("SUBN") for d in found):
        return f"SUBN  {name}: {next(d for d in found if d.startswith('SUBN'))[5:]}"
    if found:
        return f"DYNAMO {name}: {found[0]}"
    return f"ok    {name}"


def main(argv):
    names = [n for n in CASES if not argv or any(s in n for s in argv)]
    results = {"ok": 0, "DIFF": 0, "SUBN": 0, "DYNAMO": 0, "CRASH": 0}
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
