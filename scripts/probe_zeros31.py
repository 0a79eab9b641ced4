"""Signed zeros and subnormals as users meet them (session 31): reductions of -0.0, ops whose
result is a zero of some sign, float32/float64 subnormals read as zero, and what users do with
them (``1 / out``, ``torch.signbit(loss)``, masks). Each case runs eagerly and under
``torch.compile(..., backend="xla")``; dtypes and shapes must match; NaN where NaN; every
element that is zero or subnormal in either result must be bit for bit eager's (the zero's
sign counts); other finite values within 1e-5 relative (exact for integers and bools).

    OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/probe_zeros31.py [substring ...]
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _probe_common import run

warnings.simplefilter("ignore")
H, B, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
CASES: dict = {}
NZ = -0.0
SUB = 1e-40  # float32 subnormal
SUB64 = 1e-310  # float64 subnormal


def case(name, fn, *make):
    CASES[name] = (fn, make)


def t(*vals, dtype=F32):
    return lambda: torch.tensor(vals, dtype=dtype)


def s(val, dtype=F32):
    return lambda: torch.tensor(val, dtype=dtype)


def _tiny(x):
    if not x.is_floating_point():
        return torch.zeros_like(x, dtype=torch.bool)
    return x.abs() < torch.finfo(x.dtype).tiny


def compare_tensors(o, e, path):
    if not isinstance(o, torch.Tensor):
        return f"{path}: {type(o).__name__} vs tensor"
    if o.dtype != e.dtype or o.shape != e.shape:
        return f"{path}: {o.dtype}{tuple(o.shape)} vs {e.dtype}{tuple(e.shape)}"
    o, e = o.detach(), e.detach()
    if o.is_complex():
        o, e = torch.view_as_real(o), torch.view_as_real(e)
    if not o.is_floating_point():
        return None if torch.equal(o, e) else f"{path}: {o} vs {e}"
    if not torch.equal(o.isnan(), e.isnan()):
        return f"{path}: NaN {o} vs {e}"
    fin = ~e.isnan()
    of, ef = o[fin], e[fin]
    tiny = _tiny(of) | _tiny(ef)
    bad = tiny & ((of != ef) | (of.signbit() != ef.signbit()))
    ob = of.double()
    eb = ef.double()
    bad |= tiny & ((ob != eb) | (ob.signbit() != eb.signbit()))
    big = ~tiny
    vbad = big & ~torch.isclose(of.double(), ef.double(), rtol=1e-5, atol=0, equal_nan=True)
    if bad.any():
        i = bad.nonzero()[0].tolist()
        return f"{path}: ZERO/SUBNORMAL at {i}: xla={o[fin][bad][:4].tolist()} eager={ef[bad][:4].tolist()}"
    if vbad.any():
        return f"{path}: VALUE xla={of[vbad][:4].tolist()} eager={ef[vbad][:4].tolist()}"
    return None


def compare_values(o, e, path="out"):
    if isinstance(e, torch.Tensor):
        return compare_tensors(o, e, path)
    if isinstance(e, (list, tuple)):
        if not isinstance(o, (list, tuple)) or len(o) != len(e):
            return f"{path}: structure {type(o)} vs {type(e)}"
        for i, (a, b) in enumerate(zip(o, e)):
            d = compare_values(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(e, float):
        import math

        if not isinstance(o, float):
            return f"{path}: {o!r} vs {e!r}"
        if math.isnan(e) and math.isnan(o):
            return None
        if o != e or math.copysign(1, o) != math.copysign(1, e):
            return f"{path}: {o!r} vs {e!r}"
        return None
    return None if o == e else f"{path}: {o!r} vs {e!r}"


def compare(name, entry):
    fn, make = entry
    torch.manual_seed(0)
    args_e = [m() for m in make]
    torch.manual_seed(0)
    args_x = [m() for m in make]
    try:
        exp = fn(*args_e)
    except Exception as err:  # noqa: BLE001
        exp = err
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    try:
        got = compiled(*args_x)
    except Exception as err:  # noqa: BLE001
        got = err
    if isinstance(exp, Exception) or isinstance(got, Exception):
        if isinstance(exp, Exception) and isinstance(got, type(exp)):
            return f"ok   {name} (both raise {type(exp).__name__})"
        return f"BAD  {name}: xla {got!r:.200} vs eager {exp!r:.200}"
    d = compare_values(got, exp)
    if d is None:
        for i, (a, b) in enumerate(zip(args_x, args_e)):
            if isinstance(b, torch.Tensor):
                d = compare_tensors(a, b, f"arg{i} after")
                if d:
                    break
                if b.grad is not None or a.grad is not None:
                    if (a.grad is None) != (b.grad is None):
                        d = f"arg{i}.grad None-ness"
                        break
                    d = compare_tensors(a.grad, b.grad, f"arg{i}.grad")
                    if d:
                        break
    return f"ok   {name}" if d is None else f"BAD  {name}: {d}"


# ---------------------------------------------------------------- reductions of -0.0
for dt in (F32, F64, H, B):
    n = str(dt).split(".")[1]
    case(f"sum_neg0_0d_{n}", lambda x: x.sum(), s(NZ, dt))
    case(f"sum_neg0_vec_{n}", lambda x: x.sum(), t(NZ, NZ, NZ, dtype=dt))
    case(f"sum_neg0_dim_{n}", lambda x: x.sum(1), lambda dt=dt: torch.full((2, 3), NZ, dtype=dt))
    case(f"mean_neg0_{n}", lambda x: x.mean(), t(NZ, NZ, dtype=dt))
    case(f"nansum_neg0_{n}", lambda x: x.nansum(), t(NZ, float("nan"), dtype=dt))
    case(f"cumsum_neg0_{n}", lambda x: x.cumsum(0), t(NZ, NZ, 1.0, dtype=dt))
case("sum_neg0_keepdim", lambda x: x.sum(0, keepdim=True), t(NZ))
case("sum_dtype_f64", lambda x: x.sum(dtype=torch.float64), t(NZ, NZ))
case("sum_empty", lambda x: x.sum(0), lambda: torch.empty(0, 3))
case("sum_empty_neg", lambda x: -(x.sum(0)), lambda: torch.empty(0, 3))
case("prod_neg0", lambda x: x.prod(), t(NZ, 2.0))
case("prod_neg0_dim", lambda x: x.prod(0), t(NZ))
case("prod_neg0_neg", lambda x: x.prod(), t(NZ, -2.0))
case("cumprod_neg0", lambda x: x.cumprod(0), t(2.0, NZ, -1.0))
case("logsumexp_neginf", lambda x: x.logsumexp(0), t(float("-inf"), 0.0))
case("amax_zeros", lambda x: x.amax(), t(NZ, 0.0))
case("amax_zeros_rev", lambda x: x.amax(), t(0.0, NZ))
case("amin_zeros", lambda x: x.amin(), t(0.0, NZ))
case("max_zeros", lambda x: x.max(), t(NZ, 0.0))
case("min_zeros", lambda x: x.min(), t(0.0, NZ))
case("max_dim_zeros", lambda x: x.max(0), t(NZ, 0.0))
case("norm_neg0", lambda x: x.norm(), t(NZ, NZ))
case("norm1_neg0", lambda x: x.norm(p=1), t(NZ, NZ))
case("norminf_neg0", lambda x: torch.linalg.vector_norm(x, float("inf")), t(NZ, NZ))
case("var_const", lambda x: x.var(), t(NZ, NZ, NZ))
case("std_const", lambda x: x.std(), t(-1.0, -1.0))
case("var_mean_neg0", lambda x: torch.var_mean(x), t(NZ, NZ))
case("dot_neg0", lambda a, b: a @ b, t(NZ, NZ), t(1.0, 1.0))
case("dot_mixed", lambda a, b: torch.dot(a, b), t(-1.0, 0.0), t(0.0, 1.0))
case("mv_neg0", lambda a, b: a @ b, lambda: torch.full((2, 3), NZ), t(1.0, 2.0, 3.0))
case("mm_neg0", lambda a, b: a @ b, lambda: torch.full((2, 3), NZ), lambda: torch.ones(3, 2))
case("mm_neg_times_zero", lambda a, b: a @ b, lambda: -torch.ones(2, 3), lambda: torch.zeros(3, 2))
case(
    "bmm_k0",
    lambda a, b: torch.bmm(a, b),
    lambda: torch.empty(2, 3, 0),
    lambda: torch.empty(2, 0, 4),
)
case("mm_k0", lambda a, b: a @ b, lambda: torch.empty(3, 0), lambda: torch.empty(0, 4))
case(
    "einsum_neg0",
    lambda a, b: torch.einsum("ij,jk->ik", a, b),
    lambda: torch.full((2, 3), NZ),
    lambda: torch.ones(3, 2),
)
case("einsum_sum", lambda a: torch.einsum("ij->", a), lambda: torch.full((2, 3), NZ))
case(
    "addmm_beta0",
    lambda c, a, b: torch.addmm(c, a, b, beta=0),
    lambda: torch.full((2, 2), float("nan")),
    lambda: torch.full((2, 3), NZ),
    lambda: torch.ones(3, 2),
)
case(
    "addmm_neg0",
    lambda c, a, b: torch.addmm(c, a, b),
    lambda: torch.full((2, 2), NZ),
    lambda: torch.full((2, 3), NZ),
    lambda: torch.ones(3, 2),
)
case(
    "linear_neg0",
    lambda x, w: F.linear(x, w),
    lambda: torch.full((2, 3), NZ),
    lambda: torch.ones(2, 3),
)
case(
    "linear_bias_neg0",
    lambda x, w, b: F.linear(x, w, b),
    lambda: torch.full((2, 3), NZ),
    lambda: torch.ones(2, 3),
    lambda: torch.full((2,), NZ),
)
case(
    "matmul_bf16_neg0",
    lambda a, b: a @ b,
    lambda: torch.full((2, 3), NZ, dtype=B),
    lambda: torch.ones(3, 2, dtype=B),
)
case("avgpool_neg0", lambda x: F.avg_pool1d(x, 2), lambda: torch.full((1, 1, 4), NZ))
case(
    "adaptive_avg_neg0", lambda x: F.adaptive_avg_pool2d(x, 1), lambda: torch.full((1, 2, 3, 3), NZ)
)
case("sum_int_to_float", lambda x: x.float().sum() * -1, lambda: torch.zeros(3, dtype=torch.int64))
case("trace_neg0", lambda x: torch.trace(x), lambda: torch.full((2, 2), NZ))
case("diag_sum", lambda x: x.diagonal().sum(), lambda: torch.full((2, 2), NZ))
case("softmax_mean", lambda x: (x - x.max()).sum(), t(1.0, 1.0))
case("mse_zero", lambda a, b: F.mse_loss(a, b), t(1.0, 2.0), t(1.0, 2.0))
case("l1_zero", lambda a, b: F.l1_loss(a, b), t(1.0, 2.0), t(1.0, 2.0))
case("loss_signbit", lambda a, b: torch.signbit(F.l1_loss(a, b) * -1), t(1.0, 2.0), t(1.0, 2.0))
case("sum_of_neg_product", lambda x: (x * -1.0).sum(), lambda: torch.zeros(4))
case(
    "scatter_add_neg0",
    lambda x, i, v: x.scatter_add(0, i, v),
    lambda: torch.full((3,), NZ),
    lambda: torch.tensor([0]),
    t(NZ),
)
case(
    "index_add_neg0",
    lambda x, i, v: x.index_add(0, i, v),
    lambda: torch.full((3,), NZ),
    lambda: torch.tensor([0]),
    t(NZ),
)
case(
    "scatter_reduce_sum_neg0",
    lambda x, i, v: x.scatter_reduce(0, i, v, "sum", include_self=False),
    lambda: torch.full((3,), 1.0),
    lambda: torch.tensor([0, 0]),
    t(NZ, NZ),
)
case(
    "scatter_reduce_amax_neg0",
    lambda x, i, v: x.scatter_reduce(0, i, v, "amax", include_self=True),
    lambda: torch.full((3,), 0.0),
    lambda: torch.tensor([0, 1]),
    t(NZ, NZ),
)
case(
    "scatter_reduce_amax_noself",
    lambda x, i, v: x.scatter_reduce(0, i, v, "amax", include_self=False),
    lambda: torch.full((3,), 0.0),
    lambda: torch.tensor([0, 1]),
    t(NZ, NZ),
)
case(
    "scatter_reduce_amin_neg0",
    lambda x, i, v: x.scatter_reduce(0, i, v, "amin", include_self=True),
    lambda: torch.full((3,), NZ),
    lambda: torch.tensor([0, 1]),
    t(0.0, 0.0),
)
case(
    "scatter_reduce_mean_neg0",
    lambda x, i, v: x.scatter_reduce(0, i, v, "mean", include_self=False),
    lambda: torch.full((3,), 1.0),
    lambda: torch.tensor([0, 0]),
    t(NZ, NZ),
)
case(
    "scatter_reduce_prod_neg0",
    lambda x, i, v: x.scatter_reduce(0, i, v, "prod", include_self=False),
    lambda: torch.full((3,), 1.0),
    lambda: torch.tensor([0]),
    t(NZ),
)
case(
    "index_reduce_amax",
    lambda x, i, v: x.index_reduce(0, i, v, "amax"),
    lambda: torch.full((3,), 0.0),
    lambda: torch.tensor([0]),
    t(NZ),
)
case(
    "segment_sum_bincount",
    lambda w: torch.bincount(torch.tensor([0, 0]), weights=w, minlength=3),
    t(NZ, NZ),
)
case(
    "embedding_bag_sum",
    lambda w: F.embedding_bag(torch.tensor([0, 0]), w, torch.tensor([0]), mode="sum"),
    lambda: torch.full((2, 2), NZ),
)

# ---------------------------------------------------------------- elementwise zeros
Z4 = t(NZ, 0.0, -0.3, 0.3)
case("fmax_bf16", lambda a, b: torch.fmax(a, b), t(NZ, 0.0, dtype=B), t(0.0, NZ, dtype=B))
case("fmin_bf16", lambda a, b: torch.fmin(a, b), t(NZ, 0.0, dtype=B), t(0.0, NZ, dtype=B))
case("fmax_f32", lambda a, b: torch.fmax(a, b), t(NZ, 0.0), t(0.0, NZ))
case("fmin_f32", lambda a, b: torch.fmin(a, b), t(NZ, 0.0), t(0.0, NZ))
case("fmax_f16", lambda a, b: torch.fmax(a, b), t(NZ, 0.0, dtype=H), t(0.0, NZ, dtype=H))
case("maximum_f32", lambda a, b: torch.maximum(a, b), t(NZ, 0.0), t(0.0, NZ))
case("minimum_f32", lambda a, b: torch.minimum(a, b), t(NZ, 0.0), t(0.0, NZ))
case("maximum_bf16", lambda a, b: torch.maximum(a, b), t(NZ, 0.0, dtype=B), t(0.0, NZ, dtype=B))
case("max_binary", lambda a, b: torch.max(a, b), t(NZ, 0.0), t(0.0, NZ))
case("clamp_min0", lambda x: x.clamp(min=0), Z4)
case("clamp_max0", lambda x: x.clamp(max=0), Z4)
case("clamp_min_neg0", lambda x: x.clamp(min=-0.0), Z4)
case("clamp_tensor", lambda x, lo: x.clamp(min=lo), Z4, t(0.0, NZ, 0.0, NZ))
case("clamp_bf16", lambda x: x.clamp(0, 1), t(NZ, 0.0, -0.3, dtype=B))
case("clip_f16", lambda x: x.clip(min=0.0), t(NZ, 0.0, -0.3, dtype=H))
case("relu", lambda x: torch.relu(x), Z4)
case("relu6", lambda x: F.relu6(x), Z4)
case("hardtanh", lambda x: F.hardtanh(x, 0.0, 1.0), Z4)
case("hardtanh_default", lambda x: F.hardtanh(x), Z4)
case("leaky_relu", lambda x: F.leaky_relu(x, 0.1), t(NZ, 0.0, -1e-39))
case("elu", lambda x: F.elu(x), t(NZ, 0.0))
case("selu", lambda x: F.selu(x), t(NZ, 0.0))
case("celu", lambda x: F.celu(x), t(NZ, 0.0))
case("gelu", lambda x: F.gelu(x), t(NZ, 0.0, -20.0))
case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), t(NZ, 0.0, -20.0))
case("silu", lambda x: F.silu(x), t(NZ, 0.0, -200.0))
case("mish", lambda x: F.mish(x), t(NZ, 0.0, -200.0))
case("softplus_neg", lambda x: F.softplus(x), t(-200.0, NZ))
case("hardswish", lambda x: F.hardswish(x), t(NZ, 0.0, -3.0, -4.0))
case("hardsigmoid", lambda x: F.hardsigmoid(x), t(NZ, -3.0, -4.0))
case("hardshrink", lambda x: F.hardshrink(x), t(NZ, 0.0, -0.3))
case("softshrink", lambda x: F.softshrink(x), t(NZ, 0.0, -0.3, -0.5))
case("tanhshrink", lambda x: F.tanhshrink(x), t(NZ, 0.0))
case("threshold", lambda x: F.threshold(x, 0.0, NZ), t(NZ, 0.0, -1.0))
case("logsigmoid_half", lambda x: F.logsigmoid(x), t(20.0, 30.0, 100.0, 1000.0, dtype=H))
case("logsigmoid_bf16", lambda x: F.logsigmoid(x), t(20.0, 100.0, 1000.0, dtype=B))
case("logsigmoid_f32", lambda x: F.logsigmoid(x), t(20.0, 100.0, 200.0))
case("logsigmoid_f64", lambda x: F.logsigmoid(x), t(40.0, 800.0, dtype=F64))
case("sigmoid_neg", lambda x: torch.sigmoid(x), t(-200.0, NZ, -1000.0))
case("tanh_neg0", lambda x: torch.tanh(x), t(NZ))
case(
    "where_neg0",
    lambda c, x: torch.where(c, x, 0.0),
    lambda: torch.tensor([True, False]),
    t(NZ, NZ),
)
case("where_scalar_neg0", lambda c: torch.where(c, -0.0, 1.0), lambda: torch.tensor([True, False]))
case("masked_fill_neg0", lambda x: x.masked_fill(x > 0, -0.0), t(1.0, NZ))
case("copysign", lambda a, b: torch.copysign(a, b), t(0.0, NZ, 0.0, 1.0), t(NZ, 0.0, -1.0, NZ))
case("copysign_scalar", lambda a: torch.copysign(a, -0.0), t(0.0, 1.0))
case("abs", lambda x: x.abs(), t(NZ, 0.0))
case("abs_f16", lambda x: x.abs(), t(NZ, 0.0, dtype=H))
case("neg", lambda x: -x, t(NZ, 0.0))
case("neg_bf16", lambda x: x.neg(), t(NZ, 0.0, dtype=B))
case("sign", lambda x: torch.sign(x), t(NZ, 0.0, SUB, -SUB))
case("sgn", lambda x: torch.sgn(x), t(NZ, 0.0, SUB, -SUB))
case("signbit", lambda x: torch.signbit(x), t(NZ, 0.0, -SUB))
for op in ("round", "trunc", "floor", "ceil", "frac", "fix"):
    case(
        f"{op}_small_neg",
        lambda x, op=op: getattr(torch, op)(x),
        t(-0.3, -0.5, NZ, 0.3, -1.5, -0.7),
    )
    case(
        f"{op}_small_neg_bf16",
        lambda x, op=op: getattr(torch, op)(x),
        t(-0.3, -0.5, NZ, 0.3, dtype=B),
    )
    case(
        f"{op}_small_neg_f16",
        lambda x, op=op: getattr(torch, op)(x),
        t(-0.3, -0.5, NZ, 0.3, dtype=H),
    )
case("round_decimals", lambda x: torch.round(x, decimals=1), t(-0.03, -0.001, NZ, 0.04))
case("round_decimals_neg", lambda x: torch.round(x, decimals=-1), t(-3.0, -0.001, NZ, 4.0))
case(
    "div_neg", lambda a, b: a / b, t(0.0, NZ, 1.0, -1.0), t(-1.0, 1.0, float("-inf"), float("inf"))
)
case("div_scalar", lambda a: a / -2.0, t(0.0, NZ))
case(
    "div_floor",
    lambda a, b: torch.div(a, b, rounding_mode="floor"),
    t(0.0, NZ, 0.5, -0.5),
    t(-1.0, 1.0, -3.0, 3.0),
)
case(
    "div_trunc",
    lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    t(0.0, NZ, 0.5, -0.5),
    t(-1.0, 1.0, -3.0, 3.0),
)
case("floor_divide", lambda a, b: a // b, t(0.0, NZ, 0.5, -0.5), t(-1.0, 1.0, -3.0, 3.0))
case(
    "remainder",
    lambda a, b: torch.remainder(a, b),
    t(0.0, NZ, 3.0, -3.0, 2.0),
    t(-1.0, 1.0, 3.0, 3.0, -1.0),
)
case(
    "fmod", lambda a, b: torch.fmod(a, b), t(0.0, NZ, 3.0, -3.0, 2.0), t(-1.0, 1.0, 3.0, 3.0, -1.0)
)
case("remainder_scalar", lambda a: a % -1.0, t(0.0, NZ, 3.0, -3.0))
case("mul_zero", lambda x: x * 0, t(-1.0, 1.0, NZ))
case("mul_zero_f", lambda x: x * 0.0, t(-1.0, 1.0, NZ))
case("mul_tensor_zero", lambda x, z: x * z, t(-1.0, 1.0, NZ), t(0.0, 0.0, 0.0))
case("mul_zero_bf16", lambda x: x * 0, t(-1.0, 1.0, dtype=B))
case("mul_neg0_scalar", lambda x: x * -0.0, t(1.0, -1.0))
case("add_neg0", lambda x: x + -0.0, t(NZ, 0.0))
case("add_zero", lambda x: x + 0.0, t(NZ, 0.0))
case("add_zero_int", lambda x: x + 0, t(NZ, 0.0))
case("add_zero_bf16", lambda x: x + 0, t(NZ, 0.0, dtype=B))
case("sub_zero", lambda x: x - 0.0, t(NZ, 0.0))
case("sub_neg0", lambda x: x - -0.0, t(NZ, 0.0))
case("rsub_zero", lambda x: 0.0 - x, t(NZ, 0.0))
case("add_alpha", lambda a, b: torch.add(a, b, alpha=-1), t(0.0, NZ), t(0.0, 0.0))
case("sub_self", lambda a: a - a, t(-1.0, 1.0, NZ))
case("sub_tensors", lambda a, b: a - b, t(-1.0, NZ), t(-1.0, 0.0))
case("mul_one", lambda x: x * 1, t(NZ, SUB))
case("div_one", lambda x: x / 1, t(NZ, SUB))
case("pow_neg0", lambda x: x**3, t(NZ, -SUB))
case("pow_neg0_2", lambda x: x**2, t(NZ))
case("pow_neg0_half", lambda x: x**0.5, t(NZ))
case("pow_tensor_exp", lambda x, e: torch.pow(x, e), t(NZ, NZ, NZ), t(1.0, 2.0, 3.0))
case("square", lambda x: torch.square(x), t(NZ))
case("atan2", lambda a, b: torch.atan2(a, b), t(0.0, NZ, 0.0, NZ), t(0.0, 0.0, NZ, NZ))
case("atan2_neg_x", lambda a, b: torch.atan2(a, b), t(0.0, NZ), t(-1.0, -1.0))
case("sqrt_neg0", lambda x: torch.sqrt(x), t(NZ, 0.0))
case("rsqrt_neg0", lambda x: torch.rsqrt(x), t(NZ, 0.0))
case("reciprocal_neg0", lambda x: torch.reciprocal(x), t(NZ, 0.0))
case("cbrt_like", lambda x: torch.sign(x) * x.abs().pow(1 / 3), t(NZ, 0.0))
case("sin_neg0", lambda x: torch.sin(x), t(NZ))
case(
    "tan_asin_atan",
    lambda x: torch.stack(
        [
            torch.tan(x),
            torch.asin(x),
            torch.atan(x),
            torch.sinh(x),
            torch.asinh(x),
            torch.atanh(x),
            torch.expm1(x),
            torch.log1p(x),
            torch.erf(x),
            torch.erfinv(x),
        ]
    ),
    t(NZ),
)
case(
    "special_fns_neg0",
    lambda x: torch.stack(
        [
            torch.special.ndtri(x * 0 + 0.5) * 0,
            torch.special.sinc(x),
            torch.special.i1(x),
            torch.special.i1e(x),
            torch.special.spherical_bessel_j0(x),
            torch.special.entr(x),
            torch.special.xlogy(x, x + 1),
            torch.special.xlog1py(x, x),
        ]
    ),
    t(NZ),
)
case("log_sub", lambda x: torch.log(x), t(1.0))
case("exp_neg", lambda x: torch.exp(x), t(-200.0))
case(
    "lerp",
    lambda a, b, w: torch.lerp(a, b, w),
    t(NZ, NZ, 0.0, 1.0),
    t(NZ, 0.0, NZ, -1.0),
    t(0.5, 0.5, 0.5, 0.5),
)
case("lerp_w0", lambda a, b: torch.lerp(a, b, 0.0), t(NZ, NZ), t(1.0, 0.0))
case("lerp_w1", lambda a, b: torch.lerp(a, b, 1.0), t(1.0, 0.0), t(NZ, NZ))
case("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=1), t(NZ, NZ), t(NZ, 1.0), t(1.0, NZ))
case(
    "addcmul_val0",
    lambda a, b, c: torch.addcmul(a, b, c, value=0),
    t(NZ, NZ),
    t(1.0, 1.0),
    t(1.0, 1.0),
)
case("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c), t(NZ, NZ), t(NZ, 0.0), t(1.0, -1.0))
case("nan_to_num", lambda x: torch.nan_to_num(x, nan=-0.0), t(float("nan"), NZ))
case("heaviside", lambda x: torch.heaviside(x, torch.tensor(-0.0)), t(NZ, 0.0))
case("xlogy_zero", lambda x, y: torch.xlogy(x, y), t(0.0, NZ), t(2.0, 2.0))
case("hypot", lambda a, b: torch.hypot(a, b), t(NZ), t(NZ))
case(
    "logaddexp",
    lambda a, b: torch.logaddexp(a, b),
    t(NZ, float("-inf")),
    t(float("-inf"), float("-inf")),
)
case("ldexp", lambda a, b: torch.ldexp(a, b), t(NZ, -1.0), lambda: torch.tensor([3, -200]))
case("frexp", lambda a: torch.frexp(a), t(NZ, SUB))
case("cast_f16", lambda x: x.half(), t(NZ, -1e-10, 1e-10))
case("cast_bf16", lambda x: x.bfloat16(), t(NZ, -1e-40))
case("cast_int", lambda x: x.int().float() * x.sign(), t(NZ, -0.5))
case("cast_from_f64", lambda x: x.float(), t(NZ, -1e-50, 1e-40, dtype=F64))
case("cast_f16_to_f32", lambda x: x.float(), t(NZ, dtype=H))
case("std_mean_norm_layer", lambda x: F.layer_norm(x, (3,)), lambda: torch.full((2, 3), 1.0))
case("softmax_neg0", lambda x: torch.softmax(x, 0) * 0 - torch.softmax(x, 0) * 0, t(NZ, 0.0))
case("dropout_eval", lambda x: F.dropout(x, 0.5, training=False), t(NZ))
case("cumsum_all_neg0_long", lambda x: x.cumsum(0), lambda: torch.full((20,), NZ))
case("cummax_zeros", lambda x: torch.cummax(x, 0), t(NZ, 0.0, NZ))
case("cummin_zeros", lambda x: torch.cummin(x, 0), t(0.0, NZ, 0.0))
case("logcumsumexp_ninf", lambda x: torch.logcumsumexp(x, 0), t(float("-inf"), 0.0))
case("sort_zeros", lambda x: torch.sort(x), t(0.0, NZ, 0.0, NZ))
case("sort_stable", lambda x: torch.sort(x, stable=True), t(0.0, NZ, 0.0, NZ))
case("argsort_zeros", lambda x: torch.argsort(x, stable=True), t(0.0, NZ, 0.0, NZ))
case("topk_zeros", lambda x: torch.topk(x, 2), t(0.0, NZ, -1.0))
case("argmax_zeros", lambda x: torch.argmax(x), t(NZ, 0.0))
case("argmin_zeros", lambda x: torch.argmin(x), t(0.0, NZ))
case("unique_zeros", lambda x: torch.unique(x), t(0.0, NZ, 1.0))
case("eq_zeros", lambda a: a == 0.0, t(NZ, 0.0))
case("isin_zero", lambda a: torch.isin(a, torch.tensor([0.0])), t(NZ, 0.0))
case("msort", lambda x: torch.msort(x), t(0.0, NZ))
case("median_zeros", lambda x: torch.median(x), t(NZ, NZ, 1.0))
case("quantile_zeros", lambda x: torch.quantile(x, 0.5), t(NZ, NZ))
case("kthvalue_zeros", lambda x: torch.kthvalue(x, 1), t(0.0, NZ))
case("mode_zeros", lambda x: torch.mode(x), t(0.0, NZ, NZ))

# ---------------------------------------------------------------- subnormals
case("ne_zero_sub", lambda x: x != 0, t(SUB, -SUB, 0.0))
case("eq_zero_sub", lambda x: x == 0, t(SUB, -SUB, 0.0))
case("gt_zero_sub", lambda x: x > 0, t(SUB, -SUB, 0.0))
case("lt_zero_sub", lambda x: x < 0, t(SUB, -SUB, 0.0))
case("ge_sub", lambda x, y: x >= y, t(SUB, 0.0), t(2e-40, SUB))
case("eq_sub_sub", lambda x, y: x == y, t(SUB, 2e-40), t(2e-40, 2e-40))
case("count_nonzero_sub", lambda x: torch.count_nonzero(x), t(SUB, -SUB, 0.0))
case(
    "count_nonzero_dim",
    lambda x: torch.count_nonzero(x, 0),
    lambda: torch.tensor([[SUB, 0.0], [0.0, 0.0]]),
)
case("nonzero_sub", lambda x: torch.nonzero(x), t(SUB, 0.0))
case("bool_sub", lambda x: x.bool(), t(SUB, -SUB, 0.0))
case("any_sub", lambda x: x.any(), t(SUB, 0.0))
case("all_sub", lambda x: x.all(), t(SUB, 1.0))
case("logical_not_sub", lambda x: torch.logical_not(x), t(SUB, 0.0))
case("logical_and_sub", lambda x: torch.logical_and(x, x), t(SUB, 0.0))
case("sign_sub", lambda x: torch.sign(x), t(SUB, -SUB))
case("signbit_sub", lambda x: torch.signbit(x), t(-SUB))
case("double_sub", lambda x: x.double(), t(SUB, -SUB))
case("to_f64_sub", lambda x: x.to(torch.float64) * 1e30, t(SUB, -SUB))
case("half_from_sub", lambda x: x.half(), t(SUB))
case("bf16_sub", lambda x: x.bfloat16(), t(SUB, 1e-39))
case("bf16_sub_to_f32", lambda x: x.float(), t(1e-39, dtype=B))
case("bf16_sub_ne", lambda x: x != 0, t(1e-39, dtype=B))
case("f16_sub_ne", lambda x: x != 0, t(1e-7, dtype=H))
case("f16_sub_mul", lambda x: x * 2, t(1e-7, dtype=H))
case("f16_sub_to_f32", lambda x: x.float(), t(1e-7, dtype=H))
case("mask_sub", lambda x: x[x != 0], t(SUB, 0.0, 1.0))
case("masked_select_sub", lambda x: torch.masked_select(x, x != 0), t(SUB, 0.0, 1.0))
case(
    "where_eq0_sub",
    lambda x: torch.where(x == 0, torch.ones_like(x), torch.zeros_like(x)),
    t(SUB, 0.0),
)
case("where_cond_sub", lambda x: torch.where(x.bool(), 1.0, 2.0), t(SUB, 0.0))
case("mul_sub", lambda x: x * 2.0, t(SUB, -SUB))
case("mul_sub_tensor", lambda x, y: x * y, t(SUB), t(2.0))
case("add_sub", lambda x, y: x + y, t(SUB), t(SUB))
case("sub_to_normal", lambda x: x * 1e30, t(SUB))
case("sum_sub", lambda x: x.sum(), t(SUB, SUB))
case("sum_sub_big", lambda x: x.sum(), lambda: torch.full((64,), SUB))
case("mean_sub", lambda x: x.mean(), t(SUB, SUB))
case("prod_sub", lambda x: x.prod(), t(SUB, 2.0))
case("max_sub", lambda x: x.max(), t(SUB, 0.0))
case("amax_sub", lambda x: x.amax(), t(SUB, 0.0))
case("argmax_sub", lambda x: x.argmax(), t(0.0, SUB))
case("argmin_sub", lambda x: x.argmin(), t(0.0, -SUB))
case("sort_sub", lambda x: x.sort(), t(SUB, 0.0, -SUB))
case("topk_sub", lambda x: x.topk(1), t(0.0, SUB))
case("maximum_sub", lambda a, b: torch.maximum(a, b), t(SUB, -SUB), t(0.0, 0.0))
case("clamp_sub", lambda x: x.clamp(min=0.0), t(SUB, -SUB))
case("clamp_sub_max", lambda x: x.clamp(max=0.0), t(SUB, -SUB))
case("relu_sub", lambda x: torch.relu(x), t(SUB, -SUB))
case("leaky_relu_sub", lambda x: F.leaky_relu(x, 0.5), t(SUB, -SUB))
case("abs_sub", lambda x: x.abs(), t(-SUB))
case("neg_sub", lambda x: -x, t(SUB))
case("sqrt_sub", lambda x: x.sqrt(), t(SUB))
case("log_sub", lambda x: x.log(), t(SUB))
case("reciprocal_sub", lambda x: 1 / x, t(SUB))
case("div_by_sub", lambda x, y: x / y, t(1e-38), t(SUB))
case("ceil_sub", lambda x: x.ceil(), t(SUB, -SUB))
case("floor_sub", lambda x: x.floor(), t(SUB, -SUB))
case("round_sub", lambda x: x.round(), t(SUB, -SUB))
case("trunc_sub", lambda x: x.trunc(), t(SUB, -SUB))
case("frac_sub", lambda x: x.frac(), t(SUB, -SUB))
case("exp_to_sub", lambda x: x.exp(), t(-88.0, -100.0))
case("matmul_sub", lambda a, b: a @ b, lambda: torch.full((2, 2), SUB), lambda: torch.ones(2, 2))
case("cumsum_sub", lambda x: x.cumsum(0), t(SUB, SUB))
case("isfinite_sub", lambda x: torch.isfinite(x) & (x != 0), t(SUB))
case("nextafter_zero", lambda x: torch.nextafter(x, torch.ones_like(x)), t(0.0, NZ))
case("nextafter_neg", lambda x: torch.nextafter(x, -torch.ones_like(x)), t(0.0, SUB))
case("where_from_sub", lambda x: torch.where(x > 0, x, -x), t(SUB, -SUB))
case("copysign_sub", lambda a, b: torch.copysign(a, b), t(1.0, 1.0), t(-SUB, SUB))
case("heaviside_sub", lambda x: torch.heaviside(x, torch.tensor(0.5)), t(SUB, -SUB))
case("isclose_sub", lambda a, b: torch.isclose(a, b, rtol=0, atol=0), t(SUB), t(0.0))
case("equal_sub", lambda a, b: torch.eq(a, b).all(), t(SUB), t(0.0))
case("f64_sub_ne", lambda x: x != 0, t(SUB64, -SUB64, dtype=F64))
case("f64_sub_sign", lambda x: x.sign(), t(SUB64, -SUB64, dtype=F64))
case("f64_sub_mul", lambda x: x * 2, t(SUB64, dtype=F64))
case("f64_sub_float", lambda x: x.float(), t(SUB64, 1e-40, dtype=F64))
case("f64_sub_count", lambda x: torch.count_nonzero(x), t(SUB64, dtype=F64))
case("f64_sub_sum", lambda x: x.sum(), t(SUB64, SUB64, dtype=F64))
case("lt_sub_pair", lambda a, b: a < b, t(SUB), t(2e-40))
case("nan_to_num_sub", lambda x: torch.nan_to_num(x), t(SUB))
case("int_from_sub", lambda x: (x * 1e40).int(), t(SUB))
case("sub_sign_grad", lambda x: x, t(SUB))
case("complex_sub_ne", lambda x: torch.complex(x, torch.zeros_like(x)) != 0, t(SUB, 0.0))
case("complex_abs_sub", lambda x: torch.complex(x, torch.zeros_like(x)).abs(), t(SUB, 0.0))


# ---------------------------------------------------------------- users
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        with torch.no_grad():
            self.lin.weight.fill_(-1.0)
            self.lin.bias.zero_()

    def forward(self, x):
        return torch.relu(self.lin(x))


def user_recip(x):
    m = Tiny()
    out = m(x)
    return 1 / out


case("user_recip_relu", user_recip, lambda: torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))


def user_signbit_loss(pred, target):
    loss = F.mse_loss(pred, target) * -1
    return torch.signbit(loss), 1 / loss


case("user_signbit_loss", user_signbit_loss, t(1.0, 2.0), t(1.0, 2.0))


def user_sum_neg_recip(x):
    return 1 / (x * -1).sum(0)


case("user_sum_neg_recip", user_sum_neg_recip, lambda: torch.zeros(3, 4))


def user_mean_pool(x):
    return 1 / x.mean(dim=(2, 3))


case("user_mean_pool", user_mean_pool, lambda: torch.full((1, 2, 2, 2), NZ))


def user_cosine(a, b):
    return F.cosine_similarity(a, b, dim=0)


case("user_cosine_zero", user_cosine, t(0.0, 1.0), t(1.0, 0.0))
case("user_cosine_neg0", user_cosine, t(-1.0, 0.0), t(0.0, 1.0))


def user_normalize(x):
    return F.normalize(x, dim=0)


case("user_normalize_neg0", user_normalize, t(NZ, NZ))


def user_tiny_grads(w):
    w = w.clone().requires_grad_(True)
    loss = (w * 1e-30).pow(2).sum()
    (g,) = torch.autograd.grad(loss, w)
    return g, g != 0


case("user_tiny_grads", user_tiny_grads, t(1.0, -1.0))


def user_grad_neg0(w):
    w = w.clone().requires_grad_(True)
    y = (w * -1.0).sum()
    (g,) = torch.autograd.grad(y * 0.0, w)
    return g


case("user_grad_neg0", user_grad_neg0, t(1.0, 2.0))


def user_relu_grad_neg0(w):
    w = w.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(torch.relu(w).sum() * -1, w)
    return g


case("user_relu_grad", user_relu_grad_neg0, t(-1.0, 1.0, NZ))


def user_grad_tensor(w):
    w = w.clone().requires_grad_(True)
    (g,) = torch.autograd.grad((w.abs()).sum(), w)
    return g


case("user_abs_grad_zero", user_grad_tensor, t(NZ, 0.0))


def user_running_min(x):
    best = torch.zeros(())
    for i in range(x.shape[0]):
        best = torch.minimum(best, x[i])
    return best


case("user_running_min", user_running_min, t(NZ, 1.0))


def user_atan2_angle(v):
    return torch.atan2(v[:, 1], v[:, 0])


case(
    "user_atan2_angle",
    user_atan2_angle,
    lambda: torch.tensor([[-1.0, 0.0], [-1.0, NZ], [-1.0, -1e-40]]),
)

if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(run(sys.argv[1:], CASES, compare))
