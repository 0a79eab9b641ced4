"""Gradients at NaN, infinities, signed zeros and ties: eager's derivative formulas against
backend="xla" (values and gradients, NaN where eager has NaN), op by op.

    PYTHONPATH=. python scripts/probe_nangrads.py [name ...]
"""

from __future__ import annotations

import math
import sys

import torch
import torch.nn.functional as F

import torch2xla  # noqa: F401

nan, inf = math.nan, math.inf
X = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 2.5, 1.0, 1e-30, -3.0, 0.5]
Y = [0.0, 1.0, inf, -0.0, 0.0, 1.0, nan, -2.5, 1.0, 0.0, 2.0, 0.5]

UNARY = {
    "relu": F.relu,
    "abs": torch.abs,
    "sign_mul": lambda x: x.sign() * x,
    "clamp": lambda x: x.clamp(-1.0, 1.0),
    "clamp_min": lambda x: x.clamp(min=0.0),
    "hardtanh": F.hardtanh,
    "leaky_relu": F.leaky_relu,
    "elu": F.elu,
    "selu": F.selu,
    "celu": F.celu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "log": torch.log,
    "log1p": torch.log1p,
    "exp": torch.exp,
    "expm1": torch.expm1,
    "square": torch.square,
    "pow_half": lambda x: x**0.5,
    "pow_3": lambda x: x**3,
    "pow_0": lambda x: x**0,
    "reciprocal": torch.reciprocal,
    "sin": torch.sin,
    "atan": torch.atan,
    "asinh": torch.asinh,
    "erf": torch.erf,
    "sinc": torch.sinc,
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "logit": torch.logit,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "relu6": F.relu6,
    "softsign": F.softsign,
    "logsigmoid": F.logsigmoid,
    "floor": torch.floor,
    "round": torch.round,
    "frac": torch.frac,
    "trunc": torch.trunc,
    "amax": lambda x: x.amax(),
    "amin": lambda x: x.amin(),
    "max": lambda x: x.max(),
    "max_dim": lambda x: x.view(3, 4).max(1).values,
    "min_dim": lambda x: x.view(3, 4).min(0).values,
    "median": lambda x: x.median(),
    "nanmedian": lambda x: x.nanmedian(),
    "sort": lambda x: x.sort().values,
    "topk": lambda x: x.topk(3).values,
    "cummax": lambda x: x.cummax(0).values,
    "cummin": lambda x: x.cummin(0).values,
    "norm": lambda x: x.norm(),
    "norm1": lambda x: x.norm(1),
    "norm_inf": lambda x: x.norm(inf),
    "logsumexp": lambda x: x.logsumexp(0),
    "softmax": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(0),
    "cumsum": lambda x: x.cumsum(0),
    "cumprod": lambda x: x.cumprod(0),
    "prod": lambda x: x.prod(),
    "mean": torch.mean,
    "var": torch.var,
    "std": torch.std,
    "nansum": torch.nansum,
    "nanmean": torch.nanmean,
    "normalize": lambda x: F.normalize(x, dim=0),
    "layer_norm": lambda x: F.layer_norm(x, (12,)),
    "nan_to_num": torch.nan_to_num,
    "where_nan": lambda x: torch.where(x.isnan(), 0.0, x),
    "masked_fill": lambda x: x.masked_fill(x > 1, 0.0),
    "kthvalue": lambda x: x.kthvalue(4).values,
}
BINARY = {
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "pow": torch.pow,
    "div": torch.div,
    "mul": torch.mul,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "xlogy": torch.xlogy,
    "logaddexp": torch.logaddexp,
    "copysign": torch.copysign,
    "dist": torch.dist,
    "mse": F.mse_loss,
    "l1": F.l1_loss,
    "smooth_l1": F.smooth_l1_loss,
    "huber": F.huber_loss,
    "clamp_t": lambda x, y: x.clamp(min=y),
    "lerp": lambda x, y: torch.lerp(x, y, 0.3),
    "where": lambda x, y: torch.where(x > y, x, y),
    "max_bin": torch.max,
    "min_bin": torch.min,
    "cosine_similarity": lambda x, y: F.cosine_similarity(x, y, dim=0),
    "pairwise": lambda x, y: F.pairwise_distance(x[None], y[None]),
}

Z = [0.0, -0.0, 0.0, 0.0]  # a zero vector
C = [2.0, 2.0, 2.0, 2.0]  # a constant one
T = [1.0, 3.0, 1.0, 3.0, 2.0, 3.0]  # ties
NI = [-inf, -inf, 1.0, -inf]  # a row of -inf's and one finite
# name -> (fn, its inputs): the op families of the tables above at their own edges
CASES = {
    "amax_dim": (lambda x: x.view(3, 4).amax(1), (X,)),
    "amin_dim": (lambda x: x.view(3, 4).amin(0), (X,)),
    "amax_ties": (lambda x: x.view(2, 3).amax(1), (T,)),
    "max_ties": (lambda x: x.max(), (T,)),
    "min_ties": (lambda x: x.min(), (T,)),
    "max_dim_ties": (lambda x: x.view(2, 3).max(1).values, (T,)),
    "median_ties": (lambda x: x.median(), (T,)),
    "nanmedian_ties": (lambda x: x.nanmedian(), ([nan, 1.0, 1.0, 2.0, nan],)),
    "median_all_nan": (lambda x: x.median(), ([nan, 1.0, nan],)),
    "nanmedian_all_nan": (lambda x: x.nanmedian(), ([nan, nan],)),
    "median_dim": (lambda x: x.view(3, 4).median(1).values, (X,)),
    "nanmedian_dim": (lambda x: x.view(3, 4).nanmedian(1).values, (X,)),
    "median_dim_ties": (lambda x: x.view(2, 3).median(1).values, (T,)),
    "std_const": (torch.std, (C,)),
    "var_const": (torch.var, (C,)),
    "std_dim_const": (lambda x: x.view(2, 2).std(1), (C,)),
    "norm0_zero": (lambda x: torch.linalg.vector_norm(x, 0), (Z,)),
    "norm2_zero": (lambda x: torch.linalg.vector_norm(x, 2), (Z,)),
    "norm3_zero": (lambda x: torch.linalg.vector_norm(x, 3), (Z,)),
    "norm_half_zero": (lambda x: torch.linalg.vector_norm(x, 0.5), (Z,)),
    "norm_1_5_zero": (lambda x: torch.linalg.vector_norm(x, 1.5), (Z,)),
    "norm_inf_zero": (lambda x: torch.linalg.vector_norm(x, inf), (Z,)),
    "norm_ninf_zero": (lambda x: torch.linalg.vector_norm(x, -inf), (Z,)),
    "norm_ninf": (lambda x: torch.linalg.vector_norm(x, -inf), (X,)),
    "norm_ninf_ties": (lambda x: torch.linalg.vector_norm(x, -inf), ([-1.0, 1.0, 2.0],)),
    "norm_inf_ties": (lambda x: torch.linalg.vector_norm(x, inf), ([-2.0, 1.0, 2.0, -0.0],)),
    "norm_inf_dim": (lambda x: torch.linalg.vector_norm(x.view(3, 4), inf, dim=1), (X,)),
    "norm3": (lambda x: torch.linalg.vector_norm(x, 3), (X,)),
    "norm_half": (lambda x: torch.linalg.vector_norm(x, 0.5), (X,)),
    "norm_neg1": (lambda x: torch.linalg.vector_norm(x, -1), ([0.0, 1.0, 2.0],)),
    "norm_neg1_nz": (lambda x: torch.linalg.vector_norm(x, -1), ([4.0, 1.0, -2.0],)),
    "norm3_dim": (lambda x: torch.linalg.vector_norm(x.view(3, 4), 3, dim=1), (X,)),
    "norm_1_5": (lambda x: torch.linalg.vector_norm(x, 1.5), ([0.0, 1.0, -2.0],)),
    "norm2_dim": (lambda x: torch.linalg.vector_norm(x.view(3, 4), dim=1), (X,)),
    "cdist_zero": (lambda x, y: torch.cdist(x.view(2, 2), y.view(2, 2)), (Z, [0.0, 0.0, 1.0, 1.0])),
    "cdist1_zero": (lambda x, y: torch.cdist(x.view(2, 2), y.view(2, 2), 1.0), (Z, Z)),
    "cdist_inf_zero": (lambda x, y: torch.cdist(x.view(2, 2), y.view(2, 2), inf), (Z, C)),
    "logsumexp_ninf": (lambda x: x.view(2, 2).logsumexp(1), ([-inf, -inf, 0.0, -inf],)),
    "logsumexp_inf": (lambda x: x.logsumexp(0), ([inf, 1.0, inf],)),
    "softmax_ninf": (lambda x: x.view(2, 2).softmax(1), ([-inf, -inf, 0.0, -inf],)),
    "log_softmax_ninf": (lambda x: x.view(2, 2).log_softmax(1), (NI,)),
    "atan2_zero": (torch.atan2, (Z, [0.0, -0.0, -0.0, 1.0])),
    "pow_zero_base": (torch.pow, (Z, [0.0, -1.0, -0.5, 2.0])),
    "pow_scalar_zero": (lambda y: torch.pow(0.0, y), ([0.0, -1.0, 0.5, 2.0],)),
    "pow_neg_half": (lambda x: x**-0.5, (X,)),
    "pow_neg_2": (lambda x: x**-2, (X,)),
    "sqrt_zero": (torch.sqrt, (Z,)),
    "xlogy_zero": (torch.xlogy, (Z, [0.0, -0.0, nan, inf])),
    "xlog1py_zero": (torch.special.xlog1py, (Z, [-1.0, -0.0, nan, inf])),
    "sinc_zero": (torch.sinc, (Z,)),
    "where_nan_div": (lambda x: torch.where(x == 0, 0.0, 1 / x), (X,)),
    "where_sqrt": (lambda x: torch.where(x > 0, x.sqrt(), 0.0), (X,)),
    "nan_to_num_inf": (lambda x: torch.nan_to_num(x * 2), (X,)),
    "prod_dim": (lambda x: x.view(3, 4).prod(1), (X,)),
    "prod_one_zero": (lambda x: x.prod(), ([2.0, 0.0, inf, 3.0],)),
    "prod_inf": (lambda x: x.prod(), ([2.0, 1.0, inf, 3.0],)),
    "cumprod_2d": (lambda x: x.view(3, 4).cumprod(1), (X,)),
    "cumprod_zero_inf": (lambda x: x.cumprod(0), ([2.0, 0.0, inf, 3.0, 0.0, 2.0],)),
    "hypot_inf": (torch.hypot, ([inf, 0.0, -0.0], [1.0, inf, 0.0])),
    "remainder_inf": (torch.remainder, ([inf, 1.0, -1.0, 5.0], [1.0, inf, inf, -inf])),
    "fmod_inf": (torch.fmod, ([inf, 1.0, -1.0, 5.0], [1.0, inf, inf, -inf])),
    "smooth_l1_beta0": (lambda x, y: F.smooth_l1_loss(x, y, beta=0.0), (X, Y)),
    "huber_delta2": (lambda x, y: F.huber_loss(x, y, delta=2.0), (X, Y)),
    "logit_eps": (lambda x: torch.logit(x, 1e-6), (X,)),
    "renorm": (lambda x: x.view(3, 4).renorm(2, 0, 1.0), (X,)),
    "renorm_inf": (lambda x: x.view(3, 4).renorm(inf, 1, 1.0), (X,)),
    "renorm_1": (lambda x: x.view(3, 4).renorm(1, 0, 2.0), (T + T,)),
    "trace_nan": (lambda x: x.view(3, 4)[:, :3].trace(), (X,)),
}


def _grads(fn, inputs, compile_):
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in inputs]
    f = torch.compile(fn, backend="xla", options={"strict": True}) if compile_ else fn
    out = f(*xs)
    gs = torch.autograd.grad(out.sum() if out.ndim else out, xs, allow_unused=True)
    return out.detach(), gs


def main() -> None:
    bad = []
    cases = [(n, f, (X,)) for n, f in UNARY.items()] + [(n, f, (X, Y)) for n, f in BINARY.items()]
    cases += [(n, f, inputs) for n, (f, inputs) in CASES.items()]
    for name, fn, inputs in cases:
        if sys.argv[1:] and name not in sys.argv[1:]:
            continue
        torch._dynamo.reset()
        try:
            ref = _grads(fn, inputs, False)
        except RuntimeError as e:
            print(f"{name}: eager raises {type(e).__name__}")
            continue
        try:
            got = _grads(fn, inputs, True)
            torch.testing.assert_close(got[0], ref[0], equal_nan=True, rtol=1e-9, atol=1e-12)
            for g, r in zip(got[1], ref[1], strict=True):
                assert (g is None) == (r is None), "None-ness"
                if r is not None:
                    torch.testing.assert_close(g, r, equal_nan=True, rtol=1e-9, atol=1e-12)
            print(f"{name}: ok")
        except Exception as e:  # noqa: BLE001 - reported, the probe goes on
            bad.append(name)
            print(f"{name}: DIFFERS {type(e).__name__}: {str(e)[:300]}")
            print("   eager", [None if g is None else g.tolist() for g in ref[1]])
            try:
                print("   xla  ", [None if g is None else g.tolist() for g in got[1]])
            except NameError:
                pass
    print("differ:", bad)


if __name__ == "__main__":
    main()
