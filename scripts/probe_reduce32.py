"""Reductions and normalizations at their edges as users write them (session 32): empty
tensors and dims, ``correction`` past the degrees of freedom, ``dim=()`` against ``dim=None``,
integer/bool inputs and ``dtype=``, half-precision accumulation, softmax of infinite rows,
norms at zero vectors and their gradients, normalization layers with one value per channel and
their buffers. Each scenario runs eagerly and under ``torch.compile(..., backend="xla")``;
values, dtypes, shapes, gradients (None-ness included), buffers, warnings and errors compared
strictly.

    PYTHONPATH=. python scripts/probe_reduce32.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_reduce32.py   # torch's own

The harness is ``probe_grads26``'s (compiled and eager in float32, eager with float64 as the
default dtype as the reference).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import probe_grads26 as h

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
leaf = h.leaf


def fdt():
    return torch.get_default_dtype()


def run_fn(C, rec, f, inputs, *, cot_seed=7, warn=False):
    """``f(*inputs)`` compiled by ``C``: its outputs, then the gradients of every leaf that
    requires grad (a seeded cotangent for each floating output that requires grad)."""
    if warn:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = C(f)(*inputs)
        rec("warnings", sorted({str(x.message)[:60] for x in w if "degrees" in str(x.message)}))
    else:
        out = C(f)(*inputs)
    rec("out", out)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.requires_grad:
            cot = leaf(*o.shape, seed=cot_seed + i, rg=False).to(o.dtype)
            term = (o * cot).sum()
            total = term if total is None else total + term
    if total is not None:
        total.backward()
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor) and t.is_leaf and t.is_floating_point():
                rec(f"grad{i}", t.grad)


def case(name, make, warn=False):
    """``make()`` -> ``(f, inputs)``, built inside the scenario (under the default dtype)."""

    def sc(C, rec):
        f, inputs = make()
        run_fn(C, rec, f, inputs, warn=warn)

    SCENARIOS[name] = sc


def one(name, f, *shape_or_inputs, warn=False):
    """A case of ``f`` on one leaf of ``shape`` (or the given inputs, callables evaluated
    inside the scenario)."""

    def make():
        if all(isinstance(s, int) for s in shape_or_inputs):
            return f, (leaf(*shape_or_inputs),)
        return f, tuple(x() if callable(x) else x for x in shape_or_inputs)

    case(name, make, warn=warn)


# ============================================================================================
# empty tensors and dims

one("sum0_empty", lambda x: x.sum(0), 0, 3)
one("sum1_empty", lambda x: x.sum(1), 0, 3)
one("sum_all_empty", lambda x: x.sum(), 0, 3)
one("mean_empty", lambda x: x.mean(), 0, 3)
one("mean0_empty", lambda x: x.mean(0), 0, 3)
one("mean1_empty", lambda x: x.mean(1, keepdim=True), 0, 3)
one("var_empty", lambda x: x.var(), 0, 3, warn=True)
one("var0_empty", lambda x: x.var(0), 0, 3, warn=True)
one("std0_empty", lambda x: x.std(0), 0, 3, warn=True)
one("var_mean_empty", lambda x: torch.var_mean(x, 0), 0, 3, warn=True)
one("std_mean_empty", lambda x: torch.std_mean(x, 0, correction=0), 0, 3, warn=True)
one("max_empty_dim_raises", lambda x: x.max(0), 0, 3)
one("max_empty_other_dim", lambda x: x.max(1), 0, 3)
one("max_all_empty_raises", lambda x: x.max(), 0, 3)
one("amax_empty_raises", lambda x: x.amax(0), 0, 3)
one("amax_empty_other", lambda x: x.amax(1), 0, 3)
one("amin_all_empty_raises", lambda x: x.amin(), 0, 3)
one("prod_empty", lambda x: x.prod(0), 0, 3)
one("prod_all_empty", lambda x: x.prod(), 0, 3)
one("logsumexp_empty", lambda x: torch.logsumexp(x, 0), 0, 3)
one("argmax_empty_raises", lambda x: x.argmax(0), 0, 3)
one("argmax_all_empty_raises", lambda x: x.argmax(), 0, 3)
one("argmin_other_dim", lambda x: x.argmin(1), 0, 3)
one("norm_empty", lambda x: x.norm(), 0, 3)
one("norm_empty_dim", lambda x: torch.linalg.vector_norm(x, dim=0), 0, 3)
one("norm_inf_empty_raises", lambda x: torch.linalg.vector_norm(x, ord=float("inf")), 0, 3)
one("norm_inf_empty_dim", lambda x: torch.linalg.vector_norm(x, ord=float("inf"), dim=1), 0, 3)
one("norm_ninf_empty_raises", lambda x: torch.linalg.vector_norm(x, ord=-float("inf")), 0, 3)
one("norm0_empty", lambda x: torch.linalg.vector_norm(x, ord=0, dim=0), 0, 3)
one("aminmax_empty_raises", lambda x: torch.aminmax(x), 0, 3)
one("aminmax_empty_dim_raises", lambda x: torch.aminmax(x, dim=0), 0, 3)
one("cumsum_empty", lambda x: x.cumsum(0), 0, 3)
one("cumprod_empty", lambda x: x.cumprod(1), 0, 3)
one("softmax_empty", lambda x: x.softmax(0), 0, 3)
one("log_softmax_empty", lambda x: x.log_softmax(1), 0, 3)
one("nansum_empty", lambda x: x.nansum(0), 0, 3)
one("nanmean_empty", lambda x: x.nanmean(0), 0, 3)
one("median_empty_raises", lambda x: x.median(), 0, 3)
one("any_empty", lambda x: (x > 0).any(0), 0, 3)
one("all_empty", lambda x: (x > 0).all(), 0, 3)
one("count_nonzero_empty", lambda x: torch.count_nonzero(x, 0), 0, 3)
one("std_all_empty", lambda x: x.std(), 0, warn=True)
one("logsumexp_all_empty", lambda x: torch.logsumexp(x, (0, 1)), 0, 3)

# ============================================================================================
# correction past the degrees of freedom


one("var_corr_eq_n", lambda x: x.var(0, correction=4), 4, 3, warn=True)
one("var_corr_gt_n", lambda x: x.var(0, correction=6), 4, 3, warn=True)
one("var_all_corr_gt_n", lambda x: x.var(correction=20), 4, 3, warn=True)
one("std_corr_eq_n", lambda x: x.std(1, correction=3), 4, 3, warn=True)
one("var_single_unbiased", lambda x: x.var(), 1, warn=True)
one("std_single_unbiased", lambda x: torch.std(x, 0), 1, 3, warn=True)
one("var_unbiased_false", lambda x: torch.var(x, 1, unbiased=False, keepdim=True), 4, 3)
one("var_unbiased_pos", lambda x: torch.var(x, False), 4, 3)
one("std_unbiased_pos", lambda x: torch.std(x, True), 4, 3)
one("var_mean_corr_gt", lambda x: torch.var_mean(x, 1, correction=5), 4, 3, warn=True)
one("std_mean_unb", lambda x: torch.std_mean(x, [0, 1], unbiased=False), 4, 3)
one("var_frac_corr", lambda x: x.var(0, correction=0.5), 4, 3)
one("std_frac_corr_over", lambda x: x.std(0, correction=4.5), 4, 3, warn=True)
one("var_neg_dims_keep", lambda x: x.var((-1, -3), keepdim=True), 2, 3, 4)
one("var_const_row_over", lambda x: (x * 0 + 1).var(0, correction=3), 3, 2, warn=True)

# ============================================================================================
# dims: keepdim, negative, (), None, duplicates


one("sum_dim_tuple_empty", lambda x: x.sum(dim=()), 2, 3)
one("sum_dim_list_empty_keep", lambda x: x.sum(dim=[], keepdim=True), 2, 3)
one("sum_dim_none", lambda x: x.sum(dim=None), 2, 3)
one("sum_dim_none_keep", lambda x: x.sum(dim=None, keepdim=True), 2, 3)
one("mean_dim_tuple_empty", lambda x: x.mean(dim=()), 2, 3)
one("mean_dim_none_keep", lambda x: torch.mean(x, None, True), 2, 3)
one("amax_dim_empty", lambda x: x.amax(dim=()), 2, 3)
one("amax_dim_empty_keep", lambda x: x.amax(dim=(), keepdim=True), 2, 3)
one("amin_neg_multi_keep", lambda x: x.amin((-1, 0), keepdim=True), 2, 3, 4)
one("var_dim_empty", lambda x: x.var(dim=()), 2, 3)
one("std_dim_none_keep", lambda x: x.std(dim=None, keepdim=True), 2, 3)
one("logsumexp_dim_empty", lambda x: torch.logsumexp(x, ()), 2, 3)
one("logsumexp_neg_keep", lambda x: torch.logsumexp(x, (-1, -2), keepdim=True), 2, 3, 4)
one("norm_dim_empty", lambda x: torch.linalg.vector_norm(x, dim=()), 2, 3)
one("norm_neg_multi_keep", lambda x: x.norm(dim=(-1, 0), keepdim=True), 2, 3, 4)
one("sum_dup_dims_raises", lambda x: x.sum((0, 0)), 2, 3)
one("sum_dup_neg_dims_raises", lambda x: x.sum((1, -1)), 2, 3)
one("mean_dup_raises", lambda x: x.mean([0, -2]), 2, 3)
one("amax_dup_raises", lambda x: x.amax((0, 0)), 2, 3)
one("var_dup_raises", lambda x: x.var((1, 1)), 2, 3)
one("norm_dup_raises", lambda x: torch.linalg.vector_norm(x, dim=(0, 0)), 2, 3)
one("logsumexp_dup_raises", lambda x: torch.logsumexp(x, (0, 0)), 2, 3)
one("count_nonzero_dup_raises", lambda x: torch.count_nonzero(x, (0, 0)), 2, 3)
one("sum_dim_oob_raises", lambda x: x.sum(2), 2, 3)
one("sum_scalar_dim0", lambda x: x.sum(0), ())
SCENARIOS.pop("sum_scalar_dim0")
one("sum_0d_dim0", lambda x: x.sum(0), lambda: leaf(5)[0].detach().requires_grad_())
one(
    "sum_0d_dim_neg1_keep",
    lambda x: x.sum(-1, keepdim=True),
    lambda: leaf(5)[0].detach().requires_grad_(),
)
one("amax_0d_dim", lambda x: x.amax(0), lambda: leaf(5)[0].detach().requires_grad_())
one("var_0d", lambda x: x.var(), lambda: leaf(5)[0].detach().requires_grad_(), warn=True)
one("var_0d_dim", lambda x: x.var(0, correction=0), lambda: leaf(5)[0].detach().requires_grad_())
one("logsumexp_0d", lambda x: torch.logsumexp(x, 0), lambda: leaf(5)[0].detach().requires_grad_())
one("max_0d_dim", lambda x: x.max(0), lambda: leaf(5)[0].detach().requires_grad_())
one(
    "argmax_0d_keep",
    lambda x: x.argmax(0, keepdim=True),
    lambda: leaf(5)[0].detach().requires_grad_(),
)
one("argmax_none_keep", lambda x: x.argmax(keepdim=True), 2, 3)
one("cumsum_0d", lambda x: x.cumsum(0), lambda: leaf(5)[0].detach().requires_grad_())
one("softmax_0d", lambda x: x.softmax(0), lambda: leaf(5)[0].detach().requires_grad_())
one("norm_0d", lambda x: x.norm(p=3, dim=0), lambda: leaf(5)[0].detach().requires_grad_())
one("count_nonzero_multi", lambda x: torch.count_nonzero(x.relu(), (0, -1)), 2, 3, 4)
one("count_nonzero_none", lambda x: torch.count_nonzero(x.relu()), 2, 3)

# ============================================================================================
# integer and bool inputs, dtype=


def ints(dtype, *shape, lo=-3, hi=4):
    def make():
        g = torch.Generator().manual_seed(0)
        return torch.randint(lo, hi, shape, generator=g).to(dtype)

    return make


one("sum_bool", lambda x: x.sum(), ints(torch.bool, 5, 3, lo=0, hi=2))
one("sum_bool_dim", lambda x: x.sum(1, keepdim=True), ints(torch.bool, 5, 3, lo=0, hi=2))
one("sum_int8", lambda x: x.sum(0), ints(torch.int8, 50, 3, lo=100, hi=127))
one("sum_uint8", lambda x: x.sum(), ints(torch.uint8, 50, lo=200, hi=255))
one("sum_int32_dtype", lambda x: x.sum(0, dtype=torch.int32), ints(torch.int32, 5, 3))
one("sum_int_dtype_float", lambda x: x.sum(0, dtype=torch.float32), ints(torch.int64, 5, 3))
one("sum_float_dtype_int", lambda x: (x * 3).sum(0, dtype=torch.int64), 5, 3)
one("sum_dtype_f64", lambda x: x.sum(dtype=torch.float64), 5, 3)
one("sum_dtype_f16", lambda x: (x * 1000).sum(0, dtype=torch.float16), 50, 3)
one("sum_dtype_bool_raises", lambda x: x.sum(dtype=torch.bool), ints(torch.int64, 5))
one("mean_int_raises", lambda x: x.mean(), ints(torch.int64, 5, 3))
one("mean_int_dtype", lambda x: x.mean(0, dtype=torch.float64), ints(torch.int64, 5, 3))
one("mean_bool_raises", lambda x: x.mean(), ints(torch.bool, 5, lo=0, hi=2))
one("mean_float_dtype_int_raises", lambda x: x.mean(dtype=torch.int64), 5)
one("mean_dtype_f16", lambda x: x.mean(0, dtype=torch.float16), 50, 3)
one("prod_int8", lambda x: x.prod(0), ints(torch.int8, 4, 3))
one("prod_int8_all", lambda x: x.prod(), ints(torch.int8, 6, 3))
one("prod_bool", lambda x: x.prod(0), ints(torch.bool, 4, 3, lo=0, hi=2))
one("prod_uint8_dtype", lambda x: x.prod(0, dtype=torch.uint8), ints(torch.uint8, 4, 3, lo=1, hi=9))
one("prod_int_dtype_float", lambda x: x.prod(0, dtype=torch.float32), ints(torch.int64, 4, 3))
one("cumsum_int32", lambda x: x.cumsum(0), ints(torch.int32, 5, 3))
one("cumsum_int8", lambda x: x.cumsum(0), ints(torch.int8, 50, lo=100, hi=127))
one(
    "cumsum_int32_dtype",
    lambda x: x.cumsum(0, dtype=torch.int32),
    ints(torch.int8, 50, lo=100, hi=127),
)
one("cumsum_bool", lambda x: x.cumsum(1), ints(torch.bool, 3, 5, lo=0, hi=2))
one("cumsum_dtype_f64", lambda x: x.cumsum(1, dtype=torch.float64), 3, 5)
one("cumprod_int_dtype_f", lambda x: x.cumprod(1, dtype=torch.float32), ints(torch.int64, 3, 5))
one("cumsum_f16_long", lambda x: x.half().cumsum(0), lambda: leaf(3000, rg=False).abs())
one("softmax_dtype", lambda x: x.softmax(-1, dtype=torch.float64), 3, 5)
one("log_softmax_dtype", lambda x: F.log_softmax(x, 0, dtype=torch.float64), 3, 5)
one("softmax_half_dtype_f32", lambda x: x.half().softmax(-1, dtype=torch.float32), 3, 5)
one("softmax_int_raises", lambda x: x.softmax(0), ints(torch.int64, 3))
one("softmax_int_dtype", lambda x: x.softmax(0, dtype=torch.float32), ints(torch.int64, 3, 2))
one("log_softmax_f64_dtype_f32", lambda x: x.double().log_softmax(-1, dtype=torch.float32), 3, 4)
one("logsumexp_int", lambda x: torch.logsumexp(x, 0), ints(torch.int64, 4, 3))
one("logsumexp_bool", lambda x: torch.logsumexp(x, 1), ints(torch.bool, 4, 3, lo=0, hi=2))
one("amax_bool", lambda x: x.amax(0), ints(torch.bool, 4, 3, lo=0, hi=2))
one("max_bool_dim", lambda x: x.max(1), ints(torch.bool, 4, 3, lo=0, hi=2))
one("argmax_bool_raises", lambda x: x.argmax(), ints(torch.bool, 4, 3, lo=0, hi=2))
one("argmax_int8", lambda x: x.argmax(0), ints(torch.int8, 4, 3))
one("aminmax_int", lambda x: torch.aminmax(x, dim=1, keepdim=True), ints(torch.int16, 4, 3))
one("aminmax_bool", lambda x: torch.aminmax(x), ints(torch.bool, 4, 3, lo=0, hi=2))
one("aminmax_grad", lambda x: torch.aminmax(x, dim=0), 4, 3)
one("all_uint8", lambda x: x.all(0), ints(torch.uint8, 4, 3, lo=0, hi=3))
one("any_uint8", lambda x: x.any(), ints(torch.uint8, 4, 3, lo=0, hi=3))
one("all_uint8_dims", lambda x: torch.all(x, dim=(0, 1)), ints(torch.uint8, 4, 3, lo=0, hi=3))
one("any_int64", lambda x: x.any(1), ints(torch.int64, 4, 3, lo=0, hi=3))
one("all_float", lambda x: x.detach().relu().all(1), 4, 3)
one("any_float_nan", lambda x: (x.detach() * float("nan")).any(), 4, 3)
one("all_int8_keep", lambda x: x.all(-1, keepdim=True), ints(torch.int8, 4, 3, lo=0, hi=3))
one("var_int_raises", lambda x: x.var(), ints(torch.int64, 4, 3))
one("std_int_raises", lambda x: x.std(0), ints(torch.int32, 4, 3))
one("norm_int_raises", lambda x: torch.linalg.vector_norm(x), ints(torch.int64, 4, 3))
one(
    "norm_int_dtype",
    lambda x: torch.linalg.vector_norm(x, dtype=torch.float64),
    ints(torch.int64, 4, 3),
)
one("norm_f32_dtype_f64", lambda x: torch.linalg.vector_norm(x, 3, dtype=torch.float64), 4, 3)
one("nansum_int", lambda x: x.nansum(0), ints(torch.int32, 4, 3))
one("nanmean_int_raises", lambda x: x.nanmean(), ints(torch.int64, 4, 3))
one("count_nonzero_bool", lambda x: torch.count_nonzero(x, 1), ints(torch.bool, 4, 3, lo=0, hi=2))
one("median_int", lambda x: x.median(0), ints(torch.int64, 5, 3))

# ============================================================================================
# half-precision accumulation


one("half_sum_10000", lambda x: x.half().sum(), lambda: leaf(10000, rg=False).abs())
one("half_sum_grad", lambda x: x.half().sum().float(), 10000)
one("bf16_sum_10000", lambda x: x.bfloat16().sum(), lambda: leaf(10000, rg=False).abs())
one("half_mean_dim", lambda x: x.half().mean(0), lambda: leaf(3000, 2, rg=False).abs() + 3)
one("bf16_mean_all", lambda x: x.bfloat16().mean(), lambda: leaf(5000, rg=False).abs() + 3)
one("half_var", lambda x: (x.half() + 100).var(0), lambda: leaf(3000, 2, rg=False))
one("half_std_mean", lambda x: torch.std_mean(x.half() * 50, 0), lambda: leaf(3000, 2, rg=False))
one("half_norm", lambda x: x.half().norm(), lambda: leaf(5000, rg=False))
one("bf16_norm_3", lambda x: x.bfloat16().norm(p=3, dim=0), lambda: leaf(3000, 2, rg=False))
one("half_logsumexp", lambda x: torch.logsumexp(x.half(), 0), lambda: leaf(3000, 2, rg=False))
one("half_prod", lambda x: (x.half() * 0.01 + 1).prod(0), lambda: leaf(300, 2, rg=False))
one("half_cumsum", lambda x: x.half().cumsum(0), lambda: leaf(2000, rg=False).abs())
one("bf16_softmax", lambda x: x.bfloat16().softmax(-1), lambda: leaf(3, 1000, rg=False) * 3)
one("half_log_softmax", lambda x: x.half().log_softmax(-1), lambda: leaf(3, 1000, rg=False) * 3)
one("half_nansum", lambda x: x.half().nansum(), lambda: leaf(5000, rg=False).abs())
one(
    "half_sum_dtype_half",
    lambda x: x.half().sum(0, dtype=torch.float16),
    lambda: leaf(5000, 2, rg=False).abs(),
)
one(
    "half_mean_f32_dtype",
    lambda x: x.half().mean(dtype=torch.float32),
    lambda: leaf(5000, rg=False).abs(),
)
one("half_sum_grad_dtype", lambda x: x.half().sum(dtype=torch.float32), 50)

# ============================================================================================
# softmax / logsumexp / nan reductions with non-finite rows


def rows():
    x = leaf(5, 4, rg=False)
    inf = float("inf")
    x[0] = -inf
    x[1, 2] = inf
    x[2, [0, 3]] = inf
    x[3, 1] = -inf
    x[4, 0] = float("nan")
    return x.requires_grad_()


one("softmax_inf_rows", lambda x: x.softmax(-1), rows)
one("log_softmax_inf_rows", lambda x: x.log_softmax(-1), rows)
one("softmax_inf_cols", lambda x: F.softmax(x, 0), rows)
one("logsumexp_inf_rows", lambda x: torch.logsumexp(x, -1), rows)
one("logsumexp_inf_mix", lambda x: torch.logsumexp(x, 0, keepdim=True), rows)
one("logsumexp_inf_all", lambda x: torch.logsumexp(x, (0, 1)), rows)
one(
    "logsumexp_pos_neg_inf",
    lambda x: torch.logsumexp(x, 0),
    lambda: torch.tensor(
        [[float("inf"), -float("inf")], [-float("inf"), -float("inf")]], requires_grad=True
    ),
)
one(
    "nansum_all_nan_rows",
    lambda x: x.nansum(1),
    lambda: torch.tensor([[float("nan")] * 3, [1.0, float("nan"), 2.0]], requires_grad=True),
)
one(
    "nanmean_all_nan_rows",
    lambda x: x.nanmean(1),
    lambda: torch.tensor([[float("nan")] * 3, [1.0, float("nan"), 2.0]], requires_grad=True),
)
one(
    "nanmean_keep_all",
    lambda x: torch.nanmean(x, dim=None, keepdim=True),
    lambda: torch.tensor([[float("nan")] * 3, [1.0, float("nan"), 2.0]], requires_grad=True),
)
one(
    "nanmedian_all_nan",
    lambda x: x.nanmedian(1),
    lambda: torch.tensor([[float("nan")] * 3, [1.0, float("nan"), 2.0]], requires_grad=True),
)
one(
    "softmax_masked_fill_all",
    lambda x: x.masked_fill(torch.ones_like(x, dtype=torch.bool), float("-inf")).softmax(-1),
    2,
    3,
)
one("amax_nan", lambda x: x.amax(1), rows)
one("max_inf_nan_dim", lambda x: x.max(1), rows)
one("sum_inf", lambda x: x.sum(1), rows)
one("mean_inf", lambda x: x.mean(1), rows)
one("var_inf", lambda x: x.var(1), rows)
one("prod_inf", lambda x: x.prod(1), rows)
one("cumsum_inf", lambda x: x.cumsum(1), rows)

# ============================================================================================
# cumulative ops' gradients


def zrow():
    x = leaf(3, 5, rg=False)
    x[0, 2] = 0
    x[1, 1] = 0
    x[1, 3] = 0
    x[2, 0] = 0
    return x.requires_grad_()


one("cumprod_zeros_grad", lambda x: x.cumprod(1), zrow)
one("cumprod_zeros_grad_dim0", lambda x: x.cumprod(0), zrow)
one("cumprod_dtype_f64_grad", lambda x: x.cumprod(1, dtype=torch.float64), zrow)
one("cumsum_grad", lambda x: x.cumsum(-1), 3, 5)
one("cumsum_dtype_grad", lambda x: x.cumsum(0, dtype=torch.float64), 3, 5)
one("prod_zeros_grad", lambda x: x.prod(1), zrow)
one("prod_two_zeros_all", lambda x: x.prod(), zrow)
one("prod_keep_grad", lambda x: x.prod(0, keepdim=True), zrow)
one("logcumsumexp_inf", lambda x: x.logcumsumexp(1), rows)
one("cummax_grad", lambda x: x.cummax(1), zrow)

# ============================================================================================
# norms at their edges


def zvec():
    x = leaf(3, 4, rg=False)
    x[0] = 0
    x[1, 1] = 0
    return x.requires_grad_()


for _ord in (0, 1, 2, 3, 0.5, -1, -0.5, float("inf"), -float("inf"), 1.5):
    one(f"vnorm_{_ord}_dim", lambda x, o=_ord: torch.linalg.vector_norm(x, o, dim=1), zvec)
    one(f"vnorm_{_ord}_all", lambda x, o=_ord: torch.linalg.vector_norm(x * 0, o), zvec)
one("norm_fro", lambda x: torch.norm(x, p="fro", dim=1), zvec)
one("norm_nuc", lambda x: torch.norm(x, p="nuc"), 3, 4)
one("norm_p_keep", lambda x: x.norm(p=2.5, dim=-1, keepdim=True), zvec)
one("norm_dtype", lambda x: torch.norm(x, dim=1, dtype=torch.float64), zvec)
one("linalg_norm_ord_none", lambda x: torch.linalg.norm(x, dim=1), zvec)
one("linalg_norm_inf_matrix", lambda x: torch.linalg.norm(x, float("inf")), zvec)
one("matrix_norm_fro", lambda x: torch.linalg.matrix_norm(x * 0), 3, 4)
one("normalize_zero_rows", lambda x: F.normalize(x, dim=1), zvec)
one("normalize_p1", lambda x: F.normalize(x, p=1, dim=0), zvec)
one("normalize_inf", lambda x: F.normalize(x, p=float("inf"), dim=1), zvec)
one("normalize_eps0", lambda x: F.normalize(x, dim=1, eps=0), zvec)
one("cosine_sim_zero", lambda x: F.cosine_similarity(x, x.flip(0), dim=1), zvec)
one("dist_zero", lambda x: torch.dist(x, x.detach()), 3, 4)
one("dist_p0", lambda x: torch.dist(x, x.detach() * 2, p=0), zvec)
one("dist_pinf", lambda x: torch.dist(x, torch.zeros(4), p=float("inf")), zvec)
one("renorm_zero", lambda x: x.renorm(2, 0, 1.0), zvec)
one("vnorm_neg_p_zero_elem", lambda x: torch.linalg.vector_norm(x, -2, dim=1), zvec)
one("norm_complex", lambda x: torch.linalg.vector_norm(torch.complex(x, x.flip(1)), 2, dim=1), zvec)
one("vnorm_half_inf", lambda x: torch.linalg.vector_norm(x.half(), float("inf"), dim=1), zvec)

# ============================================================================================
# normalization layers


def module_case(name, build, x_fn, *, train=True, calls=1, grad=True):
    def sc(C, rec):
        torch.manual_seed(0)
        m = build().to(fdt())
        m.train(train)
        f = C(m)
        x = x_fn()
        if grad:
            x.requires_grad_()
        for i in range(calls):
            out = f(x)
            rec(f"out{i}", out)
        if out.requires_grad:
            (out * leaf(*out.shape, seed=7, rg=False)).sum().backward()
            rec("xgrad", x.grad)
            rec("pgrads", h.grads(m))
        rec("buffers", dict(m.named_buffers()))

    SCENARIOS[name] = sc


def X(*shape, seed=0):
    return lambda: leaf(*shape, seed=seed, rg=False)


module_case("bn1d_one_per_channel", lambda: nn.BatchNorm1d(3), X(1, 3))
module_case("bn1d_one_per_channel_eval", lambda: nn.BatchNorm1d(3), X(1, 3), train=False)
module_case("bn2d_one_value", lambda: nn.BatchNorm2d(3), X(1, 3, 1, 1))
module_case("bn2d_1x1_batch2", lambda: nn.BatchNorm2d(3), X(2, 3, 1, 1))
module_case("bn1d_3d_one_len", lambda: nn.BatchNorm1d(3), X(1, 3, 1))
module_case("bn1d_momentum_none", lambda: nn.BatchNorm1d(3, momentum=None), X(4, 3), calls=3)
module_case("bn2d_momentum_none", lambda: nn.BatchNorm2d(2, momentum=None), X(2, 2, 3, 3), calls=2)
module_case(
    "bn_no_track", lambda: nn.BatchNorm1d(3, track_running_stats=False), X(4, 3), train=False
)
module_case("bn_no_affine", lambda: nn.BatchNorm1d(3, affine=False), X(4, 3), calls=2)
module_case("bn_empty_batch", lambda: nn.BatchNorm1d(3), X(0, 3))
module_case("bn_empty_batch_eval", lambda: nn.BatchNorm1d(3), X(0, 3), train=False)
module_case("ln_one_elem", lambda: nn.LayerNorm(1), X(4, 1))
module_case("ln_no_affine", lambda: nn.LayerNorm([3, 4], elementwise_affine=False), X(2, 3, 4))
module_case("ln_no_bias", lambda: nn.LayerNorm(4, bias=False), X(2, 4))
module_case("ln_empty_batch", lambda: nn.LayerNorm(4), X(0, 4))
module_case("gn_one_per_group", lambda: nn.GroupNorm(3, 3), X(2, 3))
module_case("gn_one_value", lambda: nn.GroupNorm(3, 3), X(2, 3, 1))
module_case("gn_not_dividing", lambda: nn.GroupNorm(2, 3), X(2, 3, 4))
module_case("gn_empty_batch", lambda: nn.GroupNorm(2, 4), X(0, 4, 3))
module_case("gn_no_affine", lambda: nn.GroupNorm(2, 4, affine=False), X(2, 4, 3))
module_case("in_track", lambda: nn.InstanceNorm1d(3, track_running_stats=True), X(2, 3, 5), calls=2)
module_case(
    "in_track_eval", lambda: nn.InstanceNorm1d(3, track_running_stats=True), X(2, 3, 5), train=False
)
module_case(
    "in_track_affine",
    lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
    X(2, 3, 2, 2),
)
module_case("in_one_value_raises", lambda: nn.InstanceNorm1d(3), X(2, 3, 1))
module_case("in_unbatched", lambda: nn.InstanceNorm1d(3), X(3, 5))
module_case(
    "in_momentum_none",
    lambda: nn.InstanceNorm1d(3, track_running_stats=True, momentum=None),
    X(2, 3, 5),
    calls=2,
)
module_case("rms_eps_none", lambda: nn.RMSNorm(4), X(2, 4))
module_case(
    "rms_eps_none_half",
    lambda: nn.RMSNorm(4).half(),
    lambda: leaf(2, 4, rg=False).half() * 1e-4,
    grad=False,
)
module_case("rms_zero_input", lambda: nn.RMSNorm(4, eps=None), lambda: torch.zeros(2, 4))
module_case("rms_no_affine_multi", lambda: nn.RMSNorm([3, 4], elementwise_affine=False), X(2, 3, 4))
module_case("ln_zero_input", lambda: nn.LayerNorm(4), lambda: torch.zeros(2, 4))
module_case("bn_const_channel", lambda: nn.BatchNorm1d(3), lambda: torch.ones(4, 3))
module_case("ln_eps0_const", lambda: nn.LayerNorm(4, eps=0.0), lambda: torch.ones(2, 4))


one("f_layer_norm_no_weight", lambda x: F.layer_norm(x, (4,)), 2, 4)
one(
    "f_layer_norm_weight_only",
    lambda x, w: F.layer_norm(x, (4,), w),
    lambda: leaf(2, 4),
    lambda: leaf(4, seed=3),
)
one(
    "f_layer_norm_bias_only",
    lambda x, b: F.layer_norm(x, (4,), None, b),
    lambda: leaf(2, 4),
    lambda: leaf(4, seed=3),
)
one("f_rms_norm_no_weight", lambda x: F.rms_norm(x, (4,)), 2, 4)
one("f_rms_norm_eps_none_zero", lambda x: F.rms_norm(x * 0, (4,), eps=None), 2, 4)
one("f_group_norm_no_weight", lambda x: F.group_norm(x, 2), 2, 4, 3)
one("f_batch_norm_training_no_stats", lambda x: F.batch_norm(x, None, None, training=True), 4, 3)
one(
    "f_batch_norm_eval_no_stats_raises", lambda x: F.batch_norm(x, None, None, training=False), 4, 3
)
one("f_batch_norm_one_value_raises", lambda x: F.batch_norm(x, None, None, training=True), 1, 3)
one("f_instance_norm_one", lambda x: F.instance_norm(x), 2, 3, 1)
one("f_layer_norm_bad_shape", lambda x: F.layer_norm(x, (5,)), 2, 4)
one("f_layer_norm_half_no_weight", lambda x: F.layer_norm(x.half(), (4,)), 2, 4)
one("f_layer_norm_empty_norm", lambda x: F.layer_norm(x, (0,)), 2, 0)
one("f_local_response", lambda x: F.local_response_norm(x, 2), 2, 3, 4)


def bn_stats_case(name, momentum, calls, shape=(4, 3)):
    def sc(C, rec):
        rm, rv = torch.zeros(3), torch.ones(3)

        def f(x):
            return F.batch_norm(x, rm, rv, training=True, momentum=momentum)

        g = C(f)
        for i in range(calls):
            rec(f"out{i}", g(leaf(*shape, seed=i, rg=False)))
        rec("rm", rm)
        rec("rv", rv)

    SCENARIOS[name] = sc


bn_stats_case("f_bn_momentum_0", 0.0, 2)
bn_stats_case("f_bn_momentum_1", 1.0, 2)
bn_stats_case("f_bn_momentum_none_fn", None, 2)


# ============================================================================================
# round 2: ties, NaN indices, order statistics, strides, mixed dtypes in normalizations


def ties():
    x = torch.tensor(
        [[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [float("nan"), 1.0, float("nan"), 0.0]]
    )
    return x.requires_grad_()


one("amax_ties_grad", lambda x: x.amax(1), ties)
one("amin_ties_keep_grad", lambda x: x.amin(0, keepdim=True), ties)
one("max_dim_ties_grad", lambda x: x.max(1), ties)
one("min_dim_ties_grad", lambda x: torch.min(x, 0, keepdim=True), ties)
one("max_all_ties_grad", lambda x: x[:2].max(), ties)
one("argmax_nan", lambda x: x.argmax(1), ties)
one("argmin_nan_keep", lambda x: x.argmin(1, keepdim=True), ties)
one("median_ties", lambda x: x.median(1), ties)
one("median_all_nan", lambda x: x.median(), ties)
one("nanmedian_dim", lambda x: x.nanmedian(1), ties)
one("mode_dim", lambda x: x.mode(1), ties)
one("quantile_nan", lambda x: torch.quantile(x, 0.5, dim=1), ties)
one(
    "nanquantile_all_nan",
    lambda x: torch.nanquantile(x, torch.tensor([0.25, 0.5]), dim=1),
    lambda: torch.tensor([[float("nan")] * 3, [1.0, float("nan"), 2.0]], requires_grad=True),
)
one("quantile_empty_raises", lambda x: torch.quantile(x, 0.5), 0)
one(
    "logsumexp_ties_inf_grad",
    lambda x: torch.logsumexp(x, 1),
    lambda: torch.tensor([[float("inf"), float("inf"), 1.0]], requires_grad=True),
)
one("cummax_nan", lambda x: x.cummax(1), ties)
one("cummin_empty", lambda x: x.cummin(0), 0, 3)
one("logcumsumexp_empty", lambda x: x.logcumsumexp(0), 0, 3)
one("cumsum_dim_oob", lambda x: x.cumsum(1), 4)
one("var_dim_oob", lambda x: x.var(5), 4, 3)
one("sum_0d_dup", lambda x: x.sum((0, -1)), lambda: leaf(5)[0].detach().requires_grad_())
one("count_nonzero_nan", lambda x: torch.count_nonzero(x.detach(), 1), ties)
one("all_nan", lambda x: x.detach().all(1), ties)
one("sum_complex", lambda x: torch.complex(x, x * 2).sum(0), 3, 4)
one("mean_complex_grad", lambda x: torch.complex(x, x.flip(0)).mean(1).abs(), 3, 4)
one("var_complex", lambda x: torch.complex(x, x * 2).var(0), 3, 4)
one("var_complex_over", lambda x: torch.complex(x, x * 2).var(0, correction=3), 3, 4, warn=True)
one("std_complex_grad", lambda x: torch.complex(x, x.flip(0)).std(1), 3, 4)
one("prod_complex_grad", lambda x: torch.complex(x, x.flip(0)).prod(1).abs(), zrow)
one("std_mean_dim_empty", lambda x: torch.std_mean(x, ()), 2, 3)
one("var_mean_neg_keep", lambda x: torch.var_mean(x, (-1, -3), keepdim=True, correction=0), 2, 3, 4)
one("std_inf_grad", lambda x: x.std(1), rows)
one("std_mean_inf_grad", lambda x: torch.std_mean(x, 1), rows)
one("var_mean_inf_grad", lambda x: torch.var_mean(x, 1), rows)
one("var_all_inf_grad", lambda x: x.var(), rows)
one("var_big_values", lambda x: (x * 1e19).var(0), 5, 3)
one("softmax_implicit_dim", lambda x: F.softmax(x), 3, 4)
one("log_softmax_implicit_dim_3d", lambda x: F.log_softmax(x), 2, 3, 4)
one("softmin", lambda x: F.softmin(x, 1), rows)
one("special_logsumexp", lambda x: torch.special.logsumexp(x, 1), 3, 4)
one("special_softmax", lambda x: torch.special.softmax(x, 0), 3, 4)
one("norm_p_fro_3d", lambda x: x.norm(p="fro", dim=(0, 2)), 2, 3, 4)
one("norm_fro_all", lambda x: torch.norm(x * 0), 3, 4)
one("matrix_norm_1", lambda x: torch.linalg.matrix_norm(x, 1), zvec)
one("matrix_norm_inf_neg", lambda x: torch.linalg.matrix_norm(x, -float("inf")), zvec)
one("dist_p3_zero", lambda x: torch.dist(x, x.detach()) + torch.dist(x, x.detach(), 3), 3, 4)
one("pairwise_distance_zero", lambda x: F.pairwise_distance(x, x.detach()), 3, 4)
one("cdist_zero", lambda x: torch.cdist(x, x), 3, 4)
one("normalize_half", lambda x: F.normalize(x.half(), dim=1), zvec)
one(
    "normalize_0d_dim",
    lambda x: F.normalize(x, dim=0),
    lambda: leaf(5)[0].detach().requires_grad_(),
)


def half_params(name, build, shape, *, train=True):
    module_case(
        name, lambda: build(), lambda: leaf(*shape, rg=False).half(), train=train, grad=False
    )


module_case(
    "bn2d_channels_last",
    lambda: nn.BatchNorm2d(3),
    lambda: leaf(2, 3, 4, 4, rg=False).to(memory_format=torch.channels_last),
)
module_case(
    "ln_noncontig", lambda: nn.LayerNorm(3), lambda: leaf(4, 3, rg=False).t().contiguous().t()
)
module_case(
    "bn_half_input_f32_params_raises",
    lambda: nn.BatchNorm1d(3),
    lambda: leaf(4, 3, rg=False).half(),
    grad=False,
)
module_case(
    "bn_half_input_f32_params_eval",
    lambda: nn.BatchNorm1d(3),
    lambda: leaf(4, 3, rg=False).half(),
    grad=False,
    train=False,
)
module_case(
    "ln_half_input_f32_params",
    lambda: nn.LayerNorm(3),
    lambda: leaf(4, 3, rg=False).half(),
    grad=False,
)
module_case(
    "gn_half_input_f32_params",
    lambda: nn.GroupNorm(1, 3),
    lambda: leaf(4, 3, 2, rg=False).half(),
    grad=False,
)
module_case(
    "rms_half_input_f32_params",
    lambda: nn.RMSNorm(3),
    lambda: leaf(4, 3, rg=False).half(),
    grad=False,
)
module_case(
    "bn_bf16_all",
    lambda: nn.BatchNorm1d(3).bfloat16(),
    lambda: leaf(8, 3, rg=False).bfloat16(),
    calls=2,
)
module_case("ln_1d_input", lambda: nn.LayerNorm(5), X(5))
module_case("bn3d_one_per_channel", lambda: nn.BatchNorm3d(2), X(1, 2, 1, 1, 1))
module_case("bn1d_unbatched_raises", lambda: nn.BatchNorm1d(3), X(3))
module_case("gn_wrong_channels", lambda: nn.GroupNorm(2, 4), X(2, 6, 3))
module_case("in_wrong_channels_warns", lambda: nn.InstanceNorm1d(4, affine=True), X(2, 3, 5))
module_case(
    "in_track_one_value_eval",
    lambda: nn.InstanceNorm1d(3, track_running_stats=True),
    X(2, 3, 1),
    train=False,
)
module_case("lazy_bn", lambda: nn.LazyBatchNorm1d(), X(4, 3))
module_case("sync_bn_cpu", lambda: nn.SyncBatchNorm(3), X(4, 3, 2))
one(
    "f_bn_weight_no_bias",
    lambda x, w: F.batch_norm(x, None, None, w, None, True),
    lambda: leaf(4, 3),
    lambda: leaf(3, seed=4),
)
one(
    "f_gn_weight_only",
    lambda x, w: F.group_norm(x, 1, w),
    lambda: leaf(2, 3, 4),
    lambda: leaf(3, seed=4),
)
one(
    "f_in_running_given",
    lambda x: F.instance_norm(x, torch.zeros(3), torch.ones(3), use_input_stats=False),
    2,
    3,
    4,
)
one("f_ln_eps_neg", lambda x: F.layer_norm(x, (4,), eps=-1e-5), 2, 4)
one(
    "f_rms_multi_dims",
    lambda x, w: F.rms_norm(x, (3, 4), w, eps=1e-3),
    lambda: leaf(2, 3, 4),
    lambda: leaf(3, 4, seed=2),
)
one("f_rms_bad_shape", lambda x: F.rms_norm(x, (3,)), 2, 4)
one("f_rms_half_eps_none", lambda x: F.rms_norm(x.half() * 1e-4, (4,)), 2, 4)
one("f_rms_bf16_eps_none", lambda x: F.rms_norm(x.bfloat16() * 1e-20, (4,)), 2, 4)
one("f_layer_norm_zero_rows", lambda x: F.layer_norm(x * 0, (4,)), 2, 4)
one("f_gn_zero_group", lambda x: F.group_norm(x * 0, 2), 2, 4, 3)


# ============================================================================================
# round 3: low-precision ranges, dtype= casts, frozen affine parameters, clip_grad_norm_


one("half_sum_overflow", lambda x: x.half().sum(), lambda: torch.ones(70000))
one("half_mean_no_overflow", lambda x: x.half().mean(), lambda: torch.full((10000,), 60000.0))
one("half_norm_no_overflow", lambda x: x.half().norm(), lambda: torch.full((1000,), 300.0))
one("half_var_large", lambda x: x.half().var(), lambda: torch.linspace(-60000, 60000, 1001))
one(
    "f32_norm_huge",
    lambda x: torch.linalg.vector_norm(x),
    lambda: torch.full((4,), 1e20, requires_grad=True),
)
one(
    "f32_norm_tiny",
    lambda x: torch.linalg.vector_norm(x),
    lambda: torch.full((4,), 1e-30, requires_grad=True),
)
one(
    "f32_norm3_huge",
    lambda x: torch.linalg.vector_norm(x, 3),
    lambda: torch.full((4,), 1e15, requires_grad=True),
)
one(
    "f32_std_huge", lambda x: x.std(), lambda: torch.tensor([1e20, -1e20, 3e19], requires_grad=True)
)
one("softmax_dtype_half", lambda x: F.softmax(x, -1, dtype=torch.float16), 3, 5)
one("log_softmax_dtype_bf16", lambda x: F.log_softmax(x, 0, dtype=torch.bfloat16), 3, 5)
one("prod_dtype_half", lambda x: (x + 2).prod(0, dtype=torch.float16), 30, 2)
one("cumprod_half", lambda x: (x.half() * 0.1 + 1).cumprod(0), lambda: leaf(200, rg=False))
one(
    "cumsum_half_dtype_half",
    lambda x: x.cumsum(0, dtype=torch.float16),
    lambda: leaf(3000, rg=False).abs(),
)
one("cumsum_f32_dtype_half_grad", lambda x: x.cumsum(0, dtype=torch.float16), 50)
one("sum_f32_dtype_half_grad", lambda x: (x * 100).sum(0, dtype=torch.float16), 500, 2)
one("mean_f32_dtype_bf16_grad", lambda x: x.mean(0, dtype=torch.bfloat16), 500, 2)
one("half_logsumexp_inf", lambda x: torch.logsumexp(x.half(), 1), rows)
one("half_softmax_inf", lambda x: x.half().softmax(1), rows)
one("bf16_log_softmax_inf", lambda x: x.bfloat16().log_softmax(1), rows)
one("softmax_dim_size1", lambda x: x.softmax(1), 3, 1)
one("log_softmax_dim_size1", lambda x: x.log_softmax(-1), 3, 1)
one("logsumexp_complex", lambda x: torch.logsumexp(torch.complex(x, x.flip(0)), 1), 3, 4)
one("cumsum_complex", lambda x: torch.complex(x, x * 2).cumsum(1).abs(), 3, 4)
one(
    "sum_uint8_dtype_wrap",
    lambda x: x.sum(0, dtype=torch.uint8),
    ints(torch.int64, 50, 2, lo=0, hi=20),
)
one("cumprod_int_wrap", lambda x: x.cumprod(0), ints(torch.int64, 70, lo=2, hi=4))
one("prod_int32_wrap", lambda x: x.prod(dtype=torch.int32), ints(torch.int64, 40, lo=2, hi=4))
one("aminmax_nan", lambda x: torch.aminmax(x.detach(), dim=1), ties)
one("aminmax_0d", lambda x: torch.aminmax(x.detach()), lambda: torch.tensor(2.0))
one("argmax_signed_zero", lambda x: torch.argmax(x), lambda: torch.tensor([-0.0, 0.0, -0.0]))
one(
    "amax_signed_zero",
    lambda x: torch.amax(x, 0),
    lambda: torch.tensor([[-0.0], [0.0]], requires_grad=True),
)
one(
    "max_signed_zero_grad",
    lambda x: x.max(),
    lambda: torch.tensor([-0.0, 0.0, -0.0], requires_grad=True),
)
one("any_dim_empty_tuple", lambda x: x.any(dim=()), ints(torch.uint8, 2, 3, lo=0, hi=3))
one(
    "all_dims_list",
    lambda x: torch.all(x, dim=[0, -1], keepdim=True),
    ints(torch.int32, 2, 3, 2, lo=0, hi=3),
)
one("renorm_maxnorm0", lambda x: x.renorm(2, 0, 0.0), 3, 4)
one("renorm_inf_p", lambda x: x.renorm(float("inf"), 1, 0.5), zvec)


def frozen_case(name, build, shape, freeze):
    def make():
        torch.manual_seed(0)
        m = build().to(fdt())
        for n in freeze:
            getattr(m, n).requires_grad_(False)
        return m

    module_case(name, make, X(*shape))


frozen_case("ln_frozen_weight", lambda: nn.LayerNorm(4), (2, 4), ["weight"])
frozen_case("bn_frozen_bias", lambda: nn.BatchNorm1d(3), (4, 3), ["bias"])
frozen_case("gn_frozen_both", lambda: nn.GroupNorm(2, 4), (2, 4, 3), ["weight", "bias"])
frozen_case("rms_frozen", lambda: nn.RMSNorm(4), (2, 4), ["weight"])
frozen_case("in_affine_frozen_w", lambda: nn.InstanceNorm1d(3, affine=True), (2, 3, 4), ["weight"])
module_case("ln_empty_shape", lambda: nn.LayerNorm([]), X(2, 3))
one(
    "f_ln_weight_bad_shape",
    lambda x, w: F.layer_norm(x, (4,), w),
    lambda: leaf(2, 4),
    lambda: leaf(3, seed=2),
)
one(
    "f_bn_f64_stats",
    lambda x: F.batch_norm(
        x, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), training=True
    ),
    4,
    3,
)
one(
    "f_bn_eval_f64_stats",
    lambda x: F.batch_norm(
        x, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ),
    4,
    3,
)


def clip_case(name, grads_fn, **kw):
    def sc(C, rec):
        ps = [torch.nn.Parameter(leaf(3, seed=i, rg=False)) for i in range(2)]
        for p, g in zip(ps, grads_fn()):
            p.grad = g

        def f():
            return torch.nn.utils.clip_grad_norm_(ps, 1.0, **kw)

        rec("norm", C(f)())
        rec("grads", [p.grad for p in ps])

    SCENARIOS[name] = sc


clip_case("clip_zero_grads", lambda: [torch.zeros(3), torch.zeros(3)])
clip_case("clip_inf_grads", lambda: [torch.tensor([float("inf"), 1.0, 0.0]), torch.ones(3)])
clip_case(
    "clip_nan_grads_error",
    lambda: [torch.tensor([float("nan"), 1.0, 0.0]), torch.ones(3)],
    error_if_nonfinite=True,
)
clip_case(
    "clip_inf_norm_type",
    lambda: [torch.tensor([3.0, -4.0, 0.0]), torch.ones(3)],
    norm_type=float("inf"),
)
clip_case("clip_p1_small", lambda: [torch.tensor([0.1, -0.2, 0.0]), torch.zeros(3)], norm_type=1.0)
clip_case("clip_none_grad", lambda: [torch.tensor([3.0, -4.0, 0.0]), None])


# ============================================================================================
# round 4: odd arguments


one("var_neg_correction", lambda x: x.var(0, correction=-1), 4, 3)
one("std_neg_correction_all", lambda x: x.std(correction=-2.5), 4, 3)
one(
    "std_0d_keep",
    lambda x: torch.std(x, dim=None, correction=0, keepdim=True),
    lambda: leaf(5)[0].detach().requires_grad_(),
)
one("sum_0d_bool", lambda x: x.sum(0), lambda: torch.tensor(True))
one("cumsum_dtype_bool", lambda x: x.cumsum(0, dtype=torch.bool), ints(torch.int64, 5, lo=0, hi=2))
one("softmax_dtype_int_raises", lambda x: F.softmax(x, 0, dtype=torch.int64), 3)
one("log_softmax_bool_raises", lambda x: F.log_softmax(x, 0), ints(torch.bool, 3, lo=0, hi=2))
one("mean_dtype_complex", lambda x: x.mean(0, dtype=torch.complex64).abs(), 3, 2)
one("sum_dtype_complex_grad", lambda x: x.sum(0, dtype=torch.complex128).real, 3, 2)
one("norm_dtype_complex_raises", lambda x: torch.linalg.vector_norm(x, dtype=torch.complex64), 3, 2)
one("norm_half_dtype_f32", lambda x: torch.linalg.vector_norm(x.half(), dtype=torch.float32), 3, 2)
one(
    "norm_dtype_half_of_f32_raises",
    lambda x: torch.linalg.vector_norm(x, dtype=torch.float16),
    3,
    2,
)
one("nansum_dtype_f64_half", lambda x: x.half().nansum(0, dtype=torch.float64), 30, 2)
one("nanmean_dtype", lambda x: torch.nanmean(x, 0, dtype=torch.float64), 3, 2)
one("logsumexp_out_of_range_dim", lambda x: torch.logsumexp(x, 2), 3, 2)
one("amax_out_of_range_dim", lambda x: x.amax(-3), 3, 2)
one("argmax_out_of_range", lambda x: x.argmax(2), 3, 2)
one("all_out_of_range", lambda x: x.all(2), ints(torch.bool, 3, 2, lo=0, hi=2))
one(
    "var_mean_0d_dim",
    lambda x: torch.var_mean(x, 0, correction=0),
    lambda: leaf(5)[0].detach().requires_grad_(),
)
one("aminmax_dim_none_keep", lambda x: torch.aminmax(x, keepdim=True), ints(torch.int32, 3, 2))


def autocast_case(name, build, shape, *, train=True):
    def sc(C, rec):
        torch.manual_seed(0)
        m = build().to(fdt())
        m.train(train)
        f = C(m)
        x = leaf(*shape)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = f(x)
        rec("out", out)
        sum(o.float().sum() for o in out).backward()
        rec("xgrad", x.grad)
        rec("pgrads", h.grads(m))
        rec("buffers", dict(m.named_buffers()))

    SCENARIOS[name] = sc


class LinNorm(nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = norm

    def forward(self, x):
        y = self.norm(self.lin(x))
        return y.softmax(-1), y.var(-1), torch.logsumexp(y, -1), y.norm(dim=-1), y.cumsum(-1)


autocast_case("autocast_ln", lambda: LinNorm(nn.LayerNorm(4)), (3, 4))
autocast_case("autocast_bn", lambda: LinNorm(nn.BatchNorm1d(4)), (3, 4))
autocast_case("autocast_gn", lambda: LinNorm(nn.GroupNorm(2, 4)), (3, 4))
autocast_case("autocast_rms", lambda: LinNorm(nn.RMSNorm(4)), (3, 4))


def bn_mode_case(name, build, shape, ctx_fn, calls=2):
    def sc(C, rec):
        torch.manual_seed(0)
        m = build().to(fdt())
        m.train()
        f = C(m)
        for i in range(calls):
            with ctx_fn():
                out = f(leaf(*shape, seed=i, rg=False))
            rec(f"out{i}", out.clone())
        rec("buffers", {k: v.clone() for k, v in m.named_buffers()})

    SCENARIOS[name] = sc


bn_mode_case("bn_train_no_grad", lambda: nn.BatchNorm1d(3), (4, 3), torch.no_grad)
bn_mode_case("bn_train_inference_mode", lambda: nn.BatchNorm1d(3), (4, 3), torch.inference_mode)
bn_mode_case(
    "bn_mom_none_no_grad",
    lambda: nn.BatchNorm2d(2, momentum=None),
    (2, 2, 2, 2),
    torch.no_grad,
    calls=3,
)
bn_mode_case(
    "in_track_no_grad",
    lambda: nn.InstanceNorm1d(3, track_running_stats=True),
    (2, 3, 4),
    torch.no_grad,
)
bn_mode_case("bn_half_buffers", lambda: nn.BatchNorm1d(3).half(), (4, 3), torch.no_grad)
bn_mode_case(
    "bn_bf16_input_f32",
    lambda: nn.BatchNorm1d(3),
    (4, 3),
    lambda: torch.autocast("cpu", dtype=torch.bfloat16),
)


def main(argv) -> int:
    h.SCENARIOS.clear()
    h.SCENARIOS.update(SCENARIOS)
    return h.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
