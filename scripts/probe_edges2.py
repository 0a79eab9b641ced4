"""Forward values at special inputs, round 2 (session 21): the ops of ``probe_infvals.py``
(activations, normalization, losses, softmax, scans) and reductions, in every float dtype
(float16 and bfloat16 beside float32 and float64), on tensors holding inf, -inf, NaN, -0.0,
values near the dtype's largest (whose squares, sums or doubling overflow) and subnormals;
Python-scalar powers of half-precision tensors; complex products and sums of two different
tensors that overflow; float32/float64 arithmetic whose results are subnormal.

    PYTHONPATH=. python scripts/probe_edges2.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_edges2.py   # torch's own

Compared as ``probe_dtypes.py`` compares (its ``same``: dtype and shape exactly,
NaN/inf/signed-zero positions exactly, finite floats within a few ulps of their dtype;
reductions ``red``). Lines that differ only at subnormal values print ``SUBN`` (XLA's CPU
runtime flushes subnormal inputs and results to zero, see ``docs/numerics.md``). Case names are
``<op>/<input>/<dtype>``.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F

os.environ.setdefault("TORCH2XLA_PERSISTENT_CACHE", "0")  # (lower every graph anew)
import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import describe, difference, observations, r, run
from probe_dtypes import same

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
NAN, INF = float("nan"), float("inf")
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
C64, C128 = torch.complex64, torch.complex128
DTYPES = (F16, BF16, F32, F64)
CASES: dict = {}


def _fill(shape, dtype, kind):
    """A seeded tensor with special values placed at a few positions (by flat index)."""
    x = r(*shape, seed=len(shape), dtype=torch.float64)
    flat = x.view(-1)
    n = flat.numel()
    fi = torch.finfo(dtype)
    vals = {
        "inf": [INF, INF, INF],
        "ninf": [-INF, -INF, -INF],
        "mixinf": [INF, -INF, INF],
        "nan": [NAN, NAN, NAN],
        "nzero": [-0.0, -0.0, -0.0],
        "max": [fi.max, -fi.max * 0.75, fi.max * 0.6],
        "sqrtmax": [fi.max**0.5 * 2, -(fi.max**0.5) * 3, fi.max**0.5],
        "subn": [fi.tiny / 4, -fi.tiny / 8, fi.tiny * fi.eps * 3],
    }[kind]
    for i, v in zip([1, n // 2, n - 2], vals):
        flat[i] = v
    if kind == "nzero":
        flat[0] = 0.0
    if kind == "subn":  # a whole row of subnormals too
        x.view(-1, shape[-1])[-1] = fi.tiny * torch.linspace(-0.5, 0.5, shape[-1])
    return x.to(dtype)


KINDS = ("inf", "ninf", "mixinf", "nan", "nzero", "max", "sqrtmax", "subn")


def op(name, f, shape=(2, 3, 5, 5), kinds=KINDS, extra=None, dtypes=DTYPES, red=False):
    for dt in dtypes:
        for k in kinds:

            def run_case(C, rec, f=f, dt=dt, k=k):
                x = _fill(shape, dt, k)
                args = (x,) if extra is None else (x, extra(x))
                rec("out", C(f)(*args))

            run_case.red = red
            CASES[f"{name}/{k}/{str(dt)[6:]}"] = run_case


# -- normalization ----------------------------------------------------------------------------
op("layer_norm", lambda x: F.layer_norm(x, (5,)))
op("layer_norm_2d", lambda x: F.layer_norm(x, (5, 5)))
op(
    "layer_norm_wb",
    lambda x: F.layer_norm(
        x, (5,), torch.linspace(-1, 2, 5, dtype=x.dtype), torch.zeros(5, dtype=x.dtype)
    ),
)
op("group_norm", lambda x: F.group_norm(x, 3))
op("batch_norm_train", lambda x: F.batch_norm(x, None, None, training=True))
op(
    "batch_norm_eval",
    lambda x: F.batch_norm(x, torch.zeros(3, dtype=x.dtype), torch.ones(3, dtype=x.dtype)),
)
op("instance_norm", lambda x: F.instance_norm(x))
op("rms_norm", lambda x: F.rms_norm(x, (5,)))
op("normalize", lambda x: F.normalize(x, dim=1))
op("local_response_norm", lambda x: F.local_response_norm(x, 2))

# -- activations (one row of 13: eager's vectorized and scalar loops both run) ----------------
ACT = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "elu": F.elu,
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.5),
    "logsigmoid": F.logsigmoid,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "tanhshrink": F.tanhshrink,
    "softsign": F.softsign,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "glu": lambda x: F.glu(x[..., :12]),
    "prelu": lambda x: F.prelu(x, torch.full((3,), 0.25, dtype=x.dtype)),
    "rrelu_eval": F.rrelu,
}
for _n, _f in ACT.items():
    op(f"act_{_n}", _f, (2, 3, 13))
    op(f"act1_{_n}", _f, (1,), kinds=("inf", "max"))  # eager's scalar path


# -- losses -------------------------------------------------------------------------------------
def _t01(x):
    return torch.rand(x.shape, generator=torch.Generator().manual_seed(1)).to(x.dtype)


def _tsign(x):
    return _t01(x).round() * 2 - 1


def _cls(x):
    return torch.randint(0, x.shape[1], (x.shape[0],), generator=torch.Generator().manual_seed(2))


LOSSES = {
    "poisson_nll": (lambda x, t, red: F.poisson_nll_loss(x, t, reduction=red), _t01),
    "poisson_nll_full": (
        lambda x, t, red: F.poisson_nll_loss(
            x.abs(), t * 5, log_input=False, full=True, reduction=red
        ),
        _t01,
    ),
    "multi_margin": (lambda x, t, red: F.multi_margin_loss(x, t, reduction=red), _cls),
    "multi_margin_p2w": (
        lambda x, t, red: F.multi_margin_loss(
            x,
            t,
            p=2,
            margin=0.5,
            weight=torch.linspace(0.5, 2, 6, dtype=x.dtype),
            reduction=red,
        ),
        _cls,
    ),
    "multilabel_margin": (
        lambda x, t, red: F.multilabel_margin_loss(
            x, torch.stack([t, (t + 1) % 6, -t.abs() - 1], 1).repeat(1, 2), reduction=red
        ),
        _cls,
    ),
    "bce": (lambda x, t, red: F.binary_cross_entropy(x.sigmoid(), t, reduction=red), _t01),
    "bce_logits": (
        lambda x, t, red: F.binary_cross_entropy_with_logits(x, t, reduction=red),
        _t01,
    ),
    "kl_div": (lambda x, t, red: F.kl_div(x, t, reduction=red), _t01),
    "huber": (lambda x, t, red: F.huber_loss(x, t, reduction=red, delta=0.5), _t01),
    "smooth_l1": (lambda x, t, red: F.smooth_l1_loss(x, t, reduction=red, beta=0.5), _t01),
    "mse": (lambda x, t, red: F.mse_loss(x, t, reduction=red), _t01),
    "l1": (lambda x, t, red: F.l1_loss(x, t, reduction=red), _t01),
    "soft_margin": (lambda x, t, red: F.soft_margin_loss(x, t, reduction=red), _tsign),
    "hinge": (lambda x, t, red: F.hinge_embedding_loss(x, t, reduction=red), _tsign),
    "ce": (lambda x, t, red: F.cross_entropy(x, t, reduction=red), _cls),
    "ce_ls": (lambda x, t, red: F.cross_entropy(x, t, reduction=red, label_smoothing=0.1), _cls),
    "nll": (lambda x, t, red: F.nll_loss(x, t, reduction=red), _cls),
    "multilabel_soft_margin": (
        lambda x, t, red: F.multilabel_soft_margin_loss(x, t.round(), reduction=red),
        _t01,
    ),
    "gaussian_nll": (lambda x, t, red: F.gaussian_nll_loss(x, t, t + 0.5, reduction=red), _t01),
    "cosine_emb": (
        lambda x, t, red: F.cosine_embedding_loss(x, x.flip(0), t[:, 0], reduction=red),
        _tsign,
    ),
    "margin_ranking": (
        lambda x, t, red: F.margin_ranking_loss(x, x.flip(1), t, margin=0.2, reduction=red),
        _tsign,
    ),
    "triplet": (
        lambda x, t, red: F.triplet_margin_loss(x, t, x.flip(0), reduction=red),
        _t01,
    ),
}
for _n, (_f, _e) in LOSSES.items():
    for _red in ("none", "mean", "sum"):
        op(
            f"{_n}/{_red}",
            lambda x, t, f=_f, red=_red: f(x, t, red),
            (4, 6),
            extra=_e,
            red=_red != "none",
        )

# -- softmax, reductions, scans -----------------------------------------------------------------
RED = {
    "sum": lambda x: x.sum(-1),
    "mean": lambda x: x.mean(-1),
    "nansum": lambda x: x.nansum(-1),
    "nanmean": lambda x: x.nanmean(-1),
    "prod": lambda x: x.prod(-1),
    "var": lambda x: x.var(-1),
    "std": lambda x: x.std(0),
    "var_mean": lambda x: torch.var_mean(x, -1, correction=0),
    "norm2": lambda x: torch.linalg.vector_norm(x, dim=-1),
    "norm3": lambda x: torch.linalg.vector_norm(x, 3, dim=-1),
    "norm_inf": lambda x: torch.linalg.vector_norm(x, INF, dim=-1),
    "norm0": lambda x: torch.linalg.vector_norm(x, 0, dim=-1),
    "amax": lambda x: x.amax(-1),
    "max_dim": lambda x: x.max(-1),
    "argmin": lambda x: x.argmin(-1),
    "logsumexp": lambda x: x.logsumexp(-1),
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(-1),
    "cumsum": lambda x: x.cumsum(-1),
    "cumprod": lambda x: x.cumprod(-1),
    "logcumsumexp": lambda x: x.logcumsumexp(-1),
    "dot": lambda x: x @ x.flip(0).transpose(-1, -2),
    "cosine_similarity": lambda x: F.cosine_similarity(x, x.flip(0), dim=-1),
    "pairwise_distance": lambda x: F.pairwise_distance(x, x.flip(0)),
    "dist": lambda x: torch.dist(x, x.flip(0)),
    "sum_all": lambda x: x.sum(),
    "mean_all": lambda x: x.mean(),
}
for _n, _f in RED.items():
    op(f"red_{_n}", _f, (4, 19), red=True)

# -- Python-scalar powers (eager's pow kernel takes its own path per exponent) -----------------
for _e in (0.5, -0.5, 2, 3, -1, -2, 1.5, 1 / 3, 0.25, -3):
    op(f"pow_{_e:.3g}", lambda x, e=_e: x**e, (3, 13))
    op(f"pow1_{_e:.3g}", lambda x, e=_e: x**e, (1,), kinds=("max", "subn"))


# -- complex: products and sums of two different tensors ---------------------------------------
def _cgrid(dtype):
    big = 3e38 if dtype == C64 else 1e308
    parts = [0.0, -0.0, 1.0, -1.5, big, -big, big / 3, 1e19 if dtype == C64 else 1e154]
    parts += [INF, NAN, 1e-30 if dtype == C64 else 1e-300]
    p = torch.tensor(parts, dtype=torch.float64)
    re, im = p.repeat_interleave(len(p)), p.repeat(len(p))
    z = torch.complex(re, im)
    return z.repeat_interleave(len(z)).to(dtype), z.repeat(len(z)).to(dtype)


for _dt in (C64, C128):
    for _n, _f in {
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "add": lambda a, b: a + b,
        "mul_real": lambda a, b: a * b.real,
        "addcmul": lambda a, b: torch.addcmul(a, a, b),
        "sub_alpha": lambda a, b: (a - b, torch.sub(a, b, alpha=2j), torch.rsub(a, b, alpha=1.5)),
        "add_alpha": lambda a, b: (b + a, torch.add(a, b, alpha=2.5), torch.add(a, b, alpha=2j)),
        "add_real": lambda a, b: (a + b.real, b.real - a, a + float("nan"), float("inf") - a),
        "addcdiv": lambda a, b: torch.addcdiv(a, a, b, value=0.5),
        "lerp": lambda a, b: (
            torch.lerp(a, b, 0.25),
            torch.lerp(a, b, 0.75),
            torch.lerp(a, b, 1.0),
        ),
        "sum": lambda a, b: (a * b).reshape(-1, 11).sum(-1),
    }.items():

        def _run(C, rec, f=_f, dt=_dt):
            rec("out", C(f)(*_cgrid(dt)))

        _run.red = _n == "sum"
        CASES[f"complex_{_n}/grid/{str(_dt)[6:]}"] = _run


# -- subnormal results of normal inputs ---------------------------------------------------------
SUBN = {
    "mul": lambda x: x * 1e-30,
    "div": lambda x: x / 1e30,
    "exp": lambda x: torch.exp(x * 0 - 95.0 - x.abs()),
    "sum": lambda x: (x * 1e-20).sum(-1) * 1e-19,
    "ldexp": lambda x: torch.ldexp(x, torch.tensor(-140)),
    "sigmoid": lambda x: torch.sigmoid(x * 0 - 95.0),
    "softmax": lambda x: torch.softmax(x * 100, -1),
}
for _n, _f in SUBN.items():
    for _dt in (F32,):
        _s = 1.0 if _dt == F32 else 1e-280

        def _run(C, rec, f=_f, dt=_dt, s=_s):
            rec("out", C(f)((r(3, 8, seed=3, dtype=torch.float64) * s).to(dt)))

        _run.red = _n in ("sum", "softmax")
        CASES[f"subn_{_n}/normal/{str(_dt)[6:]}"] = _run


def observe(fn, compiled):
    def C(f):
        return torch.compile(f, backend=BACKEND) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    red = getattr(fn, "red", False)
    d = difference(got, exp, lambda g, e, label: same(g, e, label, red))
    if d:
        return f"SUBN  {name}: {d[5:]}" if d.startswith("SUBN") else f"DIFF  {name}: {d}"
    return f"ok    {name}"


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
