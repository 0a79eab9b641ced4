"""Forward values of ``torch.nn.functional`` ops at non-finite and extreme inputs (session 20):
interpolation, pooling, normalization, activations, losses, softmax, scans and logsumexp on
tensors holding inf, -inf, NaN, -0.0 and large finite values, in float32 and float64, run once
in eager PyTorch (CPU) and once through ``torch.compile(backend="xla")``.

    PYTHONPATH=. python scripts/probe_infvals.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_infvals.py   # torch's own

Where ``probe_dtypes.py`` sweeps elementwise ops over each dtype's special values, this probe
looks at ops that mix several elements (interpolation taps, windows, normalization statistics,
loss reductions): an inf times a weight of 0, an inf minus an inf, a -inf row of a softmax.
Compared as in ``probe_dtypes.py`` (its ``same``: dtype and shape exactly, NaN/inf/signed-zero
positions exactly, finite floats within a few ulps). Case names are ``<op>/<input>/<dtype>``.
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
CASES: dict = {}


def _fill(shape, dtype, kind):
    """A seeded tensor with special values placed at a few positions (by flat index)."""
    x = r(*shape, seed=len(shape), dtype=dtype)
    flat = x.view(-1)
    n = flat.numel()
    spots = [1, n // 2, n - 2]
    vals = {
        "inf": [INF, INF, INF],
        "ninf": [-INF, -INF, -INF],
        "mixinf": [INF, -INF, INF],
        "nan": [NAN, NAN, NAN],
        "nzero": [-0.0, -0.0, -0.0],
        "large": [3e38 if dtype == torch.float32 else 1e300, -1e30, 1e30],
    }[kind]
    for i, v in zip(spots, vals):
        flat[i] = v
    if kind == "nzero":
        flat[0] = 0.0
    return x


KINDS = ("inf", "ninf", "mixinf", "nan", "nzero", "large")


def op(name, f, shape=(2, 3, 5, 5), kinds=KINDS, extra=None):
    for dt in (torch.float32, torch.float64):
        for k in kinds:

            def run_case(C, rec, f=f, dt=dt, k=k):
                x = _fill(shape, dt, k)
                args = (x,) if extra is None else (x, extra(x))
                rec("out", C(f)(*args))

            CASES[f"{name}/{k}/{str(dt)[6:]}"] = run_case


# interpolation
for _m, _kw in {
    "nearest": {},
    "nearest-exact": {},
    "bilinear": {"align_corners": False},
    "bilinear_ac": {"align_corners": True},
    "bicubic": {"align_corners": False},
    "bicubic_ac": {"align_corners": True},
    "area": {},
}.items():
    mode = _m.removesuffix("_ac")
    op(
        f"interp_{_m}_up",
        lambda x, mode=mode, kw=_kw: F.interpolate(x, size=(7, 9), mode=mode, **kw),
    )
    op(
        f"interp_{_m}_down",
        lambda x, mode=mode, kw=_kw: F.interpolate(x, size=(3, 2), mode=mode, **kw),
    )
    op(
        f"interp_{_m}_scale",
        lambda x, mode=mode, kw=_kw: F.interpolate(x, scale_factor=1.7, mode=mode, **kw),
    )
for _ac in (False, True):
    op(
        f"interp_linear_ac{int(_ac)}",
        lambda x, ac=_ac: F.interpolate(x, size=8, mode="linear", align_corners=ac),
        (2, 3, 5),
    )
    op(
        f"interp_trilinear_ac{int(_ac)}",
        lambda x, ac=_ac: F.interpolate(x, size=(3, 4, 7), mode="trilinear", align_corners=ac),
        (1, 2, 3, 3, 4),
    )
op("interp_linear_down", lambda x: F.interpolate(x, size=3, mode="linear"), (2, 3, 7))

# pooling
op("avg_pool2d", lambda x: F.avg_pool2d(x, 2))
op("avg_pool2d_pad", lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))
op("avg_pool2d_ceil", lambda x: F.avg_pool2d(x, 2, ceil_mode=True))
op("avg_pool1d", lambda x: F.avg_pool1d(x, 3, 1, 1), (2, 3, 7))
op("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 3))
op("adaptive_avg_pool2d_up", lambda x: F.adaptive_avg_pool2d(x, 7))
op("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 3), (2, 3, 7))
op("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, 3))
op("max_pool2d", lambda x: F.max_pool2d(x, 2))
op("max_pool2d_pad", lambda x: F.max_pool2d(x, 3, 2, 1))
op("max_pool2d_idx", lambda x: F.max_pool2d(x, 2, return_indices=True))
op("lp_pool2d", lambda x: F.lp_pool2d(x, 2, 2))
op("lp_pool1d_p3", lambda x: F.lp_pool1d(x, 3, 2), (2, 3, 6))

# normalization
op("layer_norm", lambda x: F.layer_norm(x, (5,)))
op("layer_norm_2d", lambda x: F.layer_norm(x, (5, 5)))
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

# activations
ACT = {
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "softplus_b": lambda x: F.softplus(x, beta=2.0, threshold=5.0),
    "softplus_bneg": lambda x: F.softplus(x, beta=-1.5, threshold=3.0),
    "elu": F.elu,
    "elu_a": lambda x: F.elu(x, alpha=0.3),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.5),
    "logsigmoid": F.logsigmoid,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "hardtanh": F.hardtanh,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "rrelu_eval": F.rrelu,
    "tanhshrink": F.tanhshrink,
    "softshrink": F.softshrink,
    "hardshrink": F.hardshrink,
    "softsign": F.softsign,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "glu": lambda x: F.glu(x[..., :4]),
    "prelu": lambda x: F.prelu(x, torch.full((3,), 0.25, dtype=x.dtype)),
    "threshold": lambda x: F.threshold(x, 0.1, 20.0),
}
for _n, _f in ACT.items():
    op(f"act_{_n}", _f, (2, 3, 13))


# losses
def _t01(x):
    return torch.rand(x.shape, generator=torch.Generator().manual_seed(1), dtype=x.dtype)


def _tsign(x):
    return _t01(x).round() * 2 - 1


def _cls(x):
    return torch.randint(0, x.shape[1], (x.shape[0],), generator=torch.Generator().manual_seed(2))


for _red in ("none", "mean", "sum"):
    op(
        f"bce/{_red}",
        lambda x, t, red=_red: F.binary_cross_entropy(x.sigmoid(), t, reduction=red),
        (4, 6),
        extra=_t01,
    )
    op(
        f"bce_logits/{_red}",
        lambda x, t, red=_red: F.binary_cross_entropy_with_logits(x, t, reduction=red),
        (4, 6),
        extra=_t01,
    )
    op(
        f"bce_logits_pw/{_red}",
        lambda x, t, red=_red: F.binary_cross_entropy_with_logits(
            x, t, pos_weight=torch.full((6,), 2.0, dtype=x.dtype), reduction=red
        ),
        (4, 6),
        extra=_t01,
    )
    op(f"kl_div/{_red}", lambda x, t, red=_red: F.kl_div(x, t, reduction=red), (4, 6), extra=_t01)
    op(
        f"kl_div_log/{_red}",
        lambda x, t, red=_red: F.kl_div(x, t.log(), reduction=red, log_target=True),
        (4, 6),
        extra=_t01,
    )
    op(
        f"poisson_nll/{_red}",
        lambda x, t, red=_red: F.poisson_nll_loss(x, t, reduction=red),
        (4, 6),
        extra=_t01,
    )
    op(
        f"poisson_nll_full/{_red}",
        lambda x, t, red=_red: F.poisson_nll_loss(
            x.abs(), t * 5, log_input=False, full=True, reduction=red
        ),
        (4, 6),
        extra=_t01,
    )
    op(
        f"huber/{_red}",
        lambda x, t, red=_red: F.huber_loss(x, t, reduction=red, delta=0.5),
        (4, 6),
        extra=_t01,
    )
    op(
        f"smooth_l1/{_red}",
        lambda x, t, red=_red: F.smooth_l1_loss(x, t, reduction=red, beta=0.5),
        (4, 6),
        extra=_t01,
    )
    op(
        f"smooth_l1_b0/{_red}",
        lambda x, t, red=_red: F.smooth_l1_loss(x, t, reduction=red, beta=0.0),
        (4, 6),
        extra=_t01,
    )
    op(f"mse/{_red}", lambda x, t, red=_red: F.mse_loss(x, t, reduction=red), (4, 6), extra=_t01)
    op(f"l1/{_red}", lambda x, t, red=_red: F.l1_loss(x, t, reduction=red), (4, 6), extra=_t01)
    op(
        f"soft_margin/{_red}",
        lambda x, t, red=_red: F.soft_margin_loss(x, t, reduction=red),
        (4, 6),
        extra=_tsign,
    )
    op(
        f"hinge_emb/{_red}",
        lambda x, t, red=_red: F.hinge_embedding_loss(x, t, reduction=red),
        (4, 6),
        extra=_tsign,
    )
    op(
        f"ce/{_red}",
        lambda x, t, red=_red: F.cross_entropy(x, t, reduction=red),
        (4, 6),
        extra=_cls,
    )
    op(
        f"ce_ls/{_red}",
        lambda x, t, red=_red: F.cross_entropy(x, t, reduction=red, label_smoothing=0.1),
        (4, 6),
        extra=_cls,
    )
    op(
        f"ce_ls_w/{_red}",
        lambda x, t, red=_red: F.cross_entropy(
            x,
            t,
            weight=torch.linspace(0.5, 2, 6, dtype=x.dtype),
            reduction=red,
            label_smoothing=0.2,
        ),
        (4, 6),
        extra=_cls,
    )
    op(
        f"ce_prob_ls/{_red}",
        lambda x, t, red=_red: F.cross_entropy(x, t, reduction=red, label_smoothing=0.1),
        (4, 6),
        extra=lambda x: _t01(x).softmax(-1),
    )
    op(f"nll/{_red}", lambda x, t, red=_red: F.nll_loss(x, t, reduction=red), (4, 6), extra=_cls)
    op(
        f"multi_margin/{_red}",
        lambda x, t, red=_red: F.multi_margin_loss(x, t, reduction=red),
        (4, 6),
        extra=_cls,
    )
    op(
        f"multilabel_soft_margin/{_red}",
        lambda x, t, red=_red: F.multilabel_soft_margin_loss(x, t.round(), reduction=red),
        (4, 6),
        extra=_t01,
    )
    op(
        f"gaussian_nll/{_red}",
        lambda x, t, red=_red: F.gaussian_nll_loss(x, t, t + 0.5, reduction=red),
        (4, 6),
        extra=_t01,
    )

# softmax, scans, logsumexp
for _d in (0, -1):
    op(f"softmax_d{_d}", lambda x, d=_d: F.softmax(x, d), (4, 6))
    op(f"log_softmax_d{_d}", lambda x, d=_d: F.log_softmax(x, d), (4, 6))
    op(f"softmin_d{_d}", lambda x, d=_d: F.softmin(x, d), (4, 6))
    op(f"cumsum_d{_d}", lambda x, d=_d: torch.cumsum(x, d), (4, 6))
    op(f"cumprod_d{_d}", lambda x, d=_d: torch.cumprod(x, d), (4, 6))
    op(f"logcumsumexp_d{_d}", lambda x, d=_d: torch.logcumsumexp(x, d), (4, 6))
    op(f"logsumexp_d{_d}", lambda x, d=_d: torch.logsumexp(x, d), (4, 6))
    op(f"cummax_d{_d}", lambda x, d=_d: torch.cummax(x, d), (4, 6))
op("softmax_rows_ninf", lambda x: F.softmax(torch.where(x > 0, -INF, x), -1), (4, 6))
op("softmax_all_ninf", lambda x: F.softmax(x * 0 - INF, -1), (4, 6), kinds=("nzero",))
op("log_softmax_all_ninf", lambda x: F.log_softmax(x * 0 - INF, -1), (4, 6), kinds=("nzero",))
op("logsumexp_all_ninf", lambda x: torch.logsumexp(x * 0 - INF, -1), (4, 6), kinds=("nzero",))
op("logcumsumexp_ninf", lambda x: torch.logcumsumexp(x * 0 - INF, -1), (4, 6), kinds=("nzero",))


def observe(fn, compiled):
    def C(f):
        return torch.compile(f, backend=BACKEND) if compiled else f

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    d = difference(got, exp, lambda g, e, label: same(g, e, label, True))
    if d:
        return f"DIFF  {name}: {d}"
    return f"ok    {name}"


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
