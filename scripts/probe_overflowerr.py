"""Probe eager's Scalar conversion errors: where an eager op converts a Python number argument
with an overflow check ("value cannot be converted to type X without overflow") or writes a
result of a higher kind into its tensor ("result type Float can't be cast to the desired output
type Long"), the compiled function raises eager's error, and computes eager's values where eager
does; for constant numbers and for floats that change between calls (which the graph takes as
0-d runtime inputs: the call where one is out of range must raise, the next valid one compute).

    PYTHONPATH=. python scripts/probe_overflowerr.py [substring ...]

Cases ``<op>/<dtype>/const``: a fresh function per number, the number a constant of its
graph. ``<op>/<dtype>/changing``: one function called with valid, valid (the number is now an
input), then each number of the row, each followed by a valid one.
Prints ``ok`` / ``DIFF`` / ``NOLINE`` (raised, without the user's line) / ``CRASH`` per case.
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
from _probe_common import describe, difference, observations, run, same_error_or_value, same_items

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
CASES: dict = {}

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
DTYPES = (*FLOATS, *INTS, torch.bool)
BIG = (1e5, 16777216.5, 1e39, -1e39, float("inf"), float("nan"), 300.0, -300.0)
BIG_INTS = (300, -300, 100000, 2**40, 2**63)


def _x(dtype):
    if dtype == torch.bool:
        return torch.tensor([True, False, True, False])
    return torch.tensor([-2, 0, 1, 3]).to(dtype)


# op name -> f(x, s); the user's calls, each with a Python number ``s``
OPS = {
    "clamp_min": lambda x, s: x.clamp(min=s),
    "clamp_max": lambda x, s: x.clamp(max=s),
    "clamp_both": lambda x, s: x.clamp(-abs(s), abs(s)),
    "clamp_min_fn": lambda x, s: torch.clamp_min(x, s),
    "where_other": lambda x, s: torch.where(x > 0, x, s),
    "where_self": lambda x, s: torch.where(x > 0, s, x),
    "fill_": lambda x, s: x.clone().fill_(s),
    "masked_fill": lambda x, s: x.masked_fill(x > 0, s),
    "masked_fill_": lambda x, s: x.clone().masked_fill_(x > 0, s),
    "index_fill": lambda x, s: x.index_fill(0, torch.tensor([0, 2]), s),
    "full_like": lambda x, s: torch.full_like(x, s),
    "new_full": lambda x, s: x.new_full((3,), s),
    "full": lambda x, s: torch.full((3,), s, dtype=x.dtype),
    "add": lambda x, s: x + s,
    "add_alpha": lambda x, s: torch.add(x, x, alpha=s),
    "sub_alpha": lambda x, s: torch.sub(x, x, alpha=s),
    "add_alpha_scalar": lambda x, s: torch.add(x, 1, alpha=s),
    "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s,
    "pow": lambda x, s: x**s,
    "rpow": lambda x, s: s**x,
    "hardtanh": lambda x, s: F.hardtanh(x, -abs(s), abs(s)),
    "relu6_like": lambda x, s: F.hardtanh(x, 0.0, s),
    "threshold": lambda x, s: F.threshold(x, s, 0.0),
    "threshold_value": lambda x, s: F.threshold(x, 0.0, s),
    "leaky_relu": lambda x, s: F.leaky_relu(x, s),
    "elu": lambda x, s: F.elu(x, s),
    "celu": lambda x, s: F.celu(x, s),
    "softplus_beta": lambda x, s: F.softplus(x, s),
    "softplus_threshold": lambda x, s: F.softplus(x, 1.0, s),
    "hardshrink": lambda x, s: F.hardshrink(x, s),
    "softshrink": lambda x, s: F.softshrink(x, s),
    "lerp": lambda x, s: torch.lerp(x, x * 2, s),
    "addcmul": lambda x, s: torch.addcmul(x, x, x, value=s),
    "addcdiv": lambda x, s: torch.addcdiv(x, x, x + 10, value=s),
    "nan_to_num": lambda x, s: torch.nan_to_num(x, s),
    "nan_to_num_posinf": lambda x, s: torch.nan_to_num(x, 0.0, s),
    "pad_value": lambda x, s: F.pad(x, (1, 1), value=s),
    "fmod": lambda x, s: torch.fmod(x, s),
    "remainder": lambda x, s: torch.remainder(x, s),
    "eq": lambda x, s: x == s,
    "lt": lambda x, s: x < s,
    "mul_": lambda x, s: x.clone().mul_(s),
    "add_": lambda x, s: x.clone().add_(s),
    "sub_": lambda x, s: x.clone().sub_(s),
    "div_": lambda x, s: x.clone().div_(s),
    "imul": lambda x, s: _imul(x.clone(), s),
    "addmm_beta": lambda x, s: torch.addmm(_m(x), _m(x), _m(x), beta=s),
    "addmm_alpha": lambda x, s: torch.addmm(_m(x), _m(x), _m(x), alpha=s),
    "logit_eps": lambda x, s: torch.logit(x, s),
    "scatter_value": lambda x, s: x.scatter(0, torch.tensor([1, 2]), s),
    "index_put_scalar": lambda x, s: x.index_put((torch.tensor([1]),), torch.tensor(s)),
    "setitem": lambda x, s: _setitem(x.clone(), s),
}


def _m(x):
    return x[:4].reshape(2, 2)


def _imul(x, s):
    x *= s
    return x


def _setitem(x, s):
    x[1:3] = s
    return x


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape"), a[1:3], b[1:3]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[3], b[3]
        if x.is_floating_point():
            tol = {"rtol": 1e-2, "atol": 1e-2} if x.dtype in (torch.float16, torch.bfloat16) else {}
            if not torch.allclose(x, y, equal_nan=True, **tol):
                return f"{path}: values\n{x} (xla)\n{y} (eager)"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def _call(rec, g, label, x, s):
    try:
        rec(label, g(x, s))
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


def _numbers(dtype, changing):
    numbers = BIG + BIG_INTS
    if changing:  # (the number's Python type stays that of the valid calls: no recompile)
        numbers = BIG
    return numbers


def const_case(op, f, dtype):
    def fn(C, rec):
        for s in _numbers(dtype, False):
            torch._dynamo.reset()
            g = C(lambda x, f=f, s=s: f(x, s))
            try:
                rec(f"{s}", g(_x(dtype)))
            except Exception as e:  # noqa: BLE001
                rec(f"{s}", e)

    CASES[f"{op}/{str(dtype)[6:]}/const"] = fn


def changing_case(op, f, dtype):
    def fn(C, rec):
        g = C(f)
        _call(rec, g, "valid 0.5", _x(dtype), 0.5)
        _call(rec, g, "valid 1.5", _x(dtype), 1.5)
        for s in _numbers(dtype, True):
            _call(rec, g, f"{s}", _x(dtype), s)
            _call(rec, g, f"after {s}", _x(dtype), 2.5)

    CASES[f"{op}/{str(dtype)[6:]}/changing"] = fn


for _op, _f in OPS.items():
    for _dtype in DTYPES:
        const_case(_op, _f, _dtype)
        changing_case(_op, _f, _dtype)


def compare(name, fn):
    def C(f, **kw):
        return f

    exp = observations(fn, C, describe)
    got = observations(fn, lambda f, **kw: torch.compile(f, backend=BACKEND, **kw), describe)
    d = difference(got, exp, same)
    if d:
        return f"DIFF  {name}: {d}"
    for _, g in got:
        if g[0] == "E" and THIS not in g[3]:
            return f"NOLINE {name}: {g[1].__name__}: {g[3][:200]!r}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
