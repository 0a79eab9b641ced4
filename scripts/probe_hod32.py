"""Higher-order derivatives at kinks and special points, compiled against eager.

Each case runs an op at its non-smooth points and special values (bounds, 0, -0.0, ties,
zeros in products, -inf in softmax) three ways, compiled with ``backend="xla"`` and eager:

- ``dbl``: double backward from outside: ``g = grad(f(x), x, w, create_graph=True)``, then
  ``grad((g * v).sum() + (g * g).sum(), [x, w])`` (``w`` requires grad: mixed derivatives);
- ``gp``: a gradient penalty computed inside the compiled function, then ``backward``;
- ``hess``: ``torch.func.hessian`` of ``f(x).sum()`` ... inside the compiled function.

Values compare to eager's float64 (every case runs in float64, so a kink is exact), None-ness
strictly. ``python scripts/probe_hod32.py [substr ...]``.

Left (session 32): eager's mixed derivative in the first gradient's cotangent (``gw``) is NaN
where its formula masks after multiplying by the gradient (sinc at 0, std of equal values,
p=3 norms and dists at zero vectors), and logit(eps)'s second derivative is NaN at 0 and 1:
a rule transposed by JAX masks the cotangent first, where a ``custom_vjp`` with eager's
formula would not; second derivatives of cumprod/prod through infinities and NaN follow
JAX's product rule, not eager's products; cosine_similarity/pairwise_distance at eps differ
in rounding only (ill-conditioned).
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _probe_common import difference, observations, run

D = torch.float64


def t(*v):
    return torch.tensor(v, dtype=D)


GEN = t(-2.5, -0.7, 0.3, 1.9)
Z = t(0.0, -0.0)


def pts(*v):
    return torch.cat([t(*v), Z, GEN])


# name -> (fn of one tensor, input points)
UNARY = {
    "relu": (F.relu, pts()),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), pts()),
    "elu": (F.elu, pts()),
    "elu_a": (lambda x: F.elu(x, alpha=0.5), pts()),
    "selu": (F.selu, pts()),
    "celu": (lambda x: F.celu(x, alpha=2.0), pts()),
    "gelu": (F.gelu, pts()),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), pts()),
    "silu": (F.silu, pts()),
    "mish": (F.mish, pts()),
    "softplus": (F.softplus, pts(20.0, 25.0)),
    "softplus_b": (lambda x: F.softplus(x, beta=2, threshold=4), pts(2.0, 2.5, 1.5)),
    "hardtanh": (F.hardtanh, pts(-1.0, 1.0)),
    "hardtanh_b": (lambda x: F.hardtanh(x, -0.5, 2.0), pts(-0.5, 2.0)),
    "relu6": (F.relu6, pts(6.0, 7.0)),
    "hardswish": (F.hardswish, pts(-3.0, 3.0)),
    "hardsigmoid": (F.hardsigmoid, pts(-3.0, 3.0)),
    "threshold": (lambda x: F.threshold(x, 0.3, -1.0), pts(0.3)),
    "softshrink": (F.softshrink, pts(-0.5, 0.5)),
    "hardshrink": (F.hardshrink, pts(-0.5, 0.5)),
    "tanhshrink": (F.tanhshrink, pts()),
    "logsigmoid": (F.logsigmoid, pts()),
    "abs": (torch.abs, pts()),
    "sign": (torch.sign, pts()),
    "sgn": (torch.sgn, pts()),
    "clamp": (lambda x: x.clamp(-1.0, 1.0), pts(-1.0, 1.0)),
    "clamp_min": (lambda x: x.clamp_min(0.3), pts(0.3)),
    "clamp_max": (lambda x: x.clamp_max(0.3), pts(0.3)),
    "clamp_t": (lambda x: x.clamp(t(-1.0), t(1.0)), pts(-1.0, 1.0)),
    "sqrt": (torch.sqrt, t(0.0, 0.5, 2.0)),
    "sqrt_abs": (lambda x: x.abs().sqrt(), pts()),
    "pow0": (lambda x: x**0, pts()),
    "pow1": (lambda x: x**1, pts()),
    "pow2": (lambda x: x**2, pts()),
    "pow05": (lambda x: x**0.5, t(0.0, 0.5, 2.0)),
    "pow3": (lambda x: x**3, pts()),
    "pow15": (lambda x: x**1.5, t(0.0, 0.5, 2.0)),
    "rsqrt_1p": (lambda x: (x * x + 1).rsqrt(), pts()),
    "norm2": (lambda x: torch.linalg.vector_norm(x), t(0.0, 0.0, -0.0)),
    "norm2_nz": (lambda x: torch.linalg.vector_norm(x), pts()),
    "norm1": (lambda x: torch.linalg.vector_norm(x, 1), t(0.0, 0.0, 1.0)),
    "norminf": (lambda x: torch.linalg.vector_norm(x, float("inf")), t(0.0, 1.0, -1.0)),
    "norminf0": (lambda x: torch.linalg.vector_norm(x, float("inf")), t(0.0, 0.0)),
    "norm3": (lambda x: torch.linalg.vector_norm(x, 3), t(0.0, 0.0)),
    "norm3_nz": (lambda x: torch.linalg.vector_norm(x, 3), t(0.0, 1.0, -2.0)),
    "norm05": (lambda x: torch.linalg.vector_norm(x, 0.5), t(0.5, 1.0, -2.0)),
    "norm15": (lambda x: torch.linalg.vector_norm(x, 1.5), t(0.0, 1.0, -2.0)),
    "norm_dim": (lambda x: x.view(2, 3).norm(dim=1), t(0.0, 0.0, 0.0, 1.0, 2.0, -2.0)),
    "tnorm": (lambda x: x.norm(), t(0.0, 0.0)),
    "cumprod": (lambda x: x.cumprod(0), t(2.0, 0.0, 3.0, 0.5)),
    "cumprod2z": (lambda x: x.cumprod(0), t(2.0, 0.0, 3.0, 0.0, 0.5)),
    "cumprod0": (lambda x: x.cumprod(0), t(0.0, 2.0, 3.0)),
    "cumprod_2d": (lambda x: x.view(2, 3).cumprod(1), t(1.5, 0.0, 2.0, 0.0, -1.0, 3.0)),
    "cumprod_inf": (lambda x: x.cumprod(0), t(2.0, 0.0, float("inf"), 3.0, 0.0, 2.0)),
    "cumprod_nan": (lambda x: x.cumprod(0), t(float("nan"), 1.0, 0.0, 2.0, -0.0, 4.0)),
    "cumprod_rows": (lambda x: x.view(2, 3).cumprod(1), t(2.0, 0.0, 4.0, float("inf"), 2.0, 0.5)),
    "cumprod_nz": (lambda x: x.cumprod(0), t(2.0, -1.5, 3.0, 0.5)),
    "prod1z": (lambda x: x.prod(), t(2.0, 0.0, 3.0)),
    "prod2z": (lambda x: x.prod(), t(2.0, 0.0, 3.0, 0.0)),
    "prod2z_inf": (lambda x: x.prod(), t(2.0, 0.0, float("inf"), 0.0)),
    "prod1z_inf": (lambda x: x.prod(), t(2.0, 0.0, float("inf"), 1.0)),
    "prod_dim_inf": (lambda x: x.view(2, 2).prod(0), t(0.0, float("inf"), 0.0, 1.0)),
    "prod_nz": (lambda x: x.prod(), t(2.0, -1.5, 3.0)),
    "prod_dim": (lambda x: x.view(2, 3).prod(1), t(2.0, 0.0, 3.0, 0.0, 0.0, 1.0)),
    "lse_inf": (lambda x: torch.logsumexp(torch.where(x > 1, float("-inf"), x), 0), pts()),
    "softmax_inf": (lambda x: torch.where(x > 1, float("-inf"), x).softmax(0), pts()),
    "lsm_inf": (lambda x: torch.where(x > 1, float("-inf"), x).log_softmax(0), pts()),
    "max_tie": (lambda x: x.max(), t(1.0, 2.0, 2.0, -1.0)),
    "min_tie": (lambda x: x.min(), t(1.0, -2.0, -2.0, 3.0)),
    "amax_tie": (lambda x: x.amax(), t(1.0, 2.0, 2.0, -1.0)),
    "max_dim_tie": (lambda x: x.view(2, 2).max(1).values, t(1.0, 1.0, 2.0, -1.0)),
    "maximum_tie": (lambda x: torch.maximum(x, x.flip(0)), t(1.0, 2.0, 2.0, 1.0, 0.0)),
    "minimum_tie": (lambda x: torch.minimum(x, x.flip(0)), t(1.0, 2.0, 2.0, 1.0, 0.0)),
    "fmax_tie": (lambda x: torch.fmax(x, x.flip(0)), t(1.0, 2.0, 2.0, 1.0, 0.0)),
    "fmin_tie": (lambda x: torch.fmin(x, x.flip(0)), t(1.0, 2.0, 2.0, 1.0, 0.0)),
    "max2_tie": (lambda x: torch.max(x, x.flip(0) * 1.0), t(1.0, 2.0, 2.0, 1.0, 0.0)),
    "where": (lambda x: torch.where(x > 0, x * x, x * 3), pts()),
    "maxpool_tie": (
        lambda x: F.max_pool1d(x.view(1, 1, -1), 2, 1),
        t(1.0, 1.0, 2.0, 2.0, 0.0, 0.0),
    ),
    "maxpool2d_tie": (
        lambda x: F.max_pool2d(x.view(1, 1, 2, 3), 2, 1),
        t(1.0, 1.0, 1.0, 1.0, 2.0, 2.0),
    ),
    "smooth_l1": (lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), beta=1.0), pts(1.0, -1.0)),
    "smooth_l1_b0": (lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), beta=0.0), pts()),
    "huber": (lambda x: F.huber_loss(x, torch.zeros_like(x), delta=1.0), pts(1.0, -1.0)),
    "l1_loss": (lambda x: F.l1_loss(x, torch.zeros_like(x)), pts()),
    "mse": (lambda x: F.mse_loss(x, torch.zeros_like(x)), pts()),
    "pnll": (lambda x: F.poisson_nll_loss(x, x.abs(), log_input=True), pts()),
    "pnll_nolog": (
        lambda x: F.poisson_nll_loss(x, t(0.0, 1.0, 0.0, 2.0), log_input=False),
        t(0.0, 0.5, 2.0, 0.0),
    ),
    "kl_div": (
        lambda x: F.kl_div(x, t(0.0, 0.5, 0.0, 0.5), reduction="sum"),
        t(-1.0, -0.5, 0.0, -2.0),
    ),
    "kl_div_t": (
        lambda x: F.kl_div(t(-1.0, -0.5, 0.0, -2.0), x, reduction="sum"),
        t(0.0, 0.5, 0.0, 0.5),
    ),
    "kl_div_log": (
        lambda x: F.kl_div(t(-1.0, -0.5, 0.0, -2.0), x, reduction="sum", log_target=True),
        t(0.0, -0.5, float("-inf"), 0.5),
    ),
    "xlogy": (lambda x: torch.xlogy(x, x.abs() + 1), pts()),
    "xlogy0": (lambda x: torch.special.xlogy(x, x), t(0.0, 0.5, 2.0)),
    "atan2_00": (lambda x: torch.atan2(x[:2], x[2:]), t(0.0, 1.0, 0.0, 0.0)),
    "dist_eq": (lambda x: torch.dist(x[:3], x[3:]), t(1.0, 2.0, 3.0, 1.0, 2.0, 3.0)),
    "dist1_eq": (lambda x: torch.dist(x[:3], x[3:], p=1), t(1.0, 2.0, 3.0, 1.0, 2.0, 4.0)),
    "dist_inf": (
        lambda x: torch.dist(x[:3], x[3:], p=float("inf")),
        t(1.0, 2.0, 3.0, 1.0, 0.0, 5.0),
    ),
    "dist3_eq": (lambda x: torch.dist(x[:3], x[3:], p=3), t(1.0, 2.0, 3.0, 1.0, 2.0, 3.0)),
    "cdist_eq": (
        lambda x: torch.cdist(x.view(3, 2), x.view(3, 2)[:2]),
        t(1.0, 2.0, 1.0, 2.0, 0.5, -1.0),
    ),
    "cdist1_eq": (
        lambda x: torch.cdist(x.view(3, 2), x.view(3, 2)[:2], p=1),
        t(1.0, 2.0, 1.0, 2.0, 0.5, -1.0),
    ),
    "cdistinf_eq": (
        lambda x: torch.cdist(x.view(3, 2), x.view(3, 2)[:2], p=float("inf")),
        t(1.0, 2.0, 1.0, 3.0, 0.5, -1.0),
    ),
    "pdist_eq": (lambda x: F.pdist(x.view(3, 2)), t(1.0, 2.0, 1.0, 2.0, 0.5, -1.0)),
    "cos_sim0": (lambda x: F.cosine_similarity(x[:3], x[3:], 0), t(0.0, 0.0, 0.0, 1.0, 2.0, 3.0)),
    "normalize0": (lambda x: F.normalize(x.view(2, 2), dim=1), t(0.0, 0.0, 1.0, 2.0)),
    "pairwise": (lambda x: F.pairwise_distance(x[:3], x[3:]), t(1.0, 2.0, 3.0, 1.0, 2.0, 3.0)),
    "std0": (lambda x: x.std(), t(1.0, 1.0, 1.0)),
    "var0": (lambda x: x.var(), t(1.0, 1.0, 1.0)),
    "renorm": (lambda x: x.view(2, 2).renorm(2, 0, 1.0), t(0.0, 0.0, 1.0, 2.0)),
    "sinc0": (torch.sinc, pts()),
    "logit_eps": (lambda x: torch.logit(x, eps=0.1), t(0.0, 0.1, 0.5, 0.9, 1.0)),
    "frac": (torch.frac, pts(1.0)),
    "round": (torch.round, pts(0.5)),
    "heaviside": (lambda x: torch.heaviside(x, t(0.5)), pts()),
    "copysign": (lambda x: torch.copysign(x, -x), pts()),
    "hypot0": (lambda x: torch.hypot(x, x * 0), pts()),
    "erfinv": (torch.erfinv, t(0.0, 0.5, -0.5)),
    "log1p_0": (torch.log1p, t(0.0, -0.5, 1.0)),
    "expm1": (torch.expm1, pts()),
    "clamp_tt": (lambda x: x.clamp(min=x.flip(0)), t(1.0, 2.0, 2.0, 1.0)),
    "clamp_both_t": (lambda x: x.clamp(x.flip(0), x.flip(0) + 1), t(1.0, 2.0, 2.0, 1.0)),
}


def leaf(x):
    return x.detach().clone().requires_grad_(True)


def dbl_case(fn, x0):
    def case(C, rec):
        x = leaf(x0)
        y = C(fn)(x)
        w = leaf(torch.linspace(0.5, 1.5, y.numel(), dtype=D).view(y.shape))
        (g,) = torch.autograd.grad(y, x, w, create_graph=True, allow_unused=True)
        rec("g", g)
        if g is None or not g.requires_grad:
            rec("g_rg", None if g is None else g.requires_grad)
            return
        v = torch.linspace(-1.0, 1.0, g.numel(), dtype=D)
        loss = (g * v).sum() + (g * g).sum()
        gx, gw = torch.autograd.grad(loss, [x, w], allow_unused=True)
        rec("gx", gx)
        rec("gw", gw)

    return case


def gp_case(fn, x0):
    def penalty(x):
        y = fn(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        return (g * g).sum() + (g * torch.linspace(-1.0, 1.0, g.numel(), dtype=D)).sum()

    def case(C, rec):
        x = leaf(x0)
        p = C(penalty)(x)
        rec("p", p)
        p.backward()
        rec("gx", x.grad)

    return case


def hess_case(fn, x0):
    def h(x):
        return torch.func.hessian(
            lambda z: (
                fn(z) * torch.linspace(0.5, 1.5, fn(z).numel(), dtype=D).view(fn(z).shape)
            ).sum()
        )(x)

    def case(C, rec):
        rec("h", C(h)(x0.clone()))

    return case


def hvp_case(fn, x0):
    def h(x, v):
        return torch.autograd.functional.hvp(lambda z: fn(z).sum(), x, v)[1]

    def case(C, rec):
        v = torch.linspace(-1.0, 1.0, x0.numel(), dtype=D)
        rec("hvp", C(h)(x0.clone(), v))

    return case


TABLE = {}
for _n, (_fn, _x) in UNARY.items():
    TABLE[f"dbl_{_n}"] = dbl_case(_fn, _x)
    TABLE[f"gp_{_n}"] = gp_case(_fn, _x)
    TABLE[f"hess_{_n}"] = hess_case(_fn, _x)
    TABLE[f"hvp_{_n}"] = hvp_case(_fn, _x)


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:200], str(v))
    return ("V", v)


def same(a, b, path):
    if a[0] != b[0]:
        return f"{path}: {a[0]} {a[1:3] if a[0] != 'V' else a[1]} (xla) vs {b[0]} {b[1:3] if b[0] != 'V' else b[1]} (eager)"
    if a[0] == "T":
        if a[1:3] != b[1:3]:
            return f"{path}: {a[1:3]} vs {b[1:3]}"
        x, y = a[3], b[3]
        if not torch.allclose(x, y, rtol=1e-9, atol=1e-12, equal_nan=True):
            return (
                f"{path}: values\n   xla   {x.flatten().tolist()}\n   eager {y.flatten().tolist()}"
            )
        return None
    if a[0] == "L":
        if len(a[2]) != len(b[2]):
            return f"{path}: len"
        for i, (p, q) in enumerate(zip(a[2], b[2])):
            d = same(p, q, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        return None
    if a[1] != b[1]:
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


def compare(name, fn):
    exp = observations(fn, lambda f: f, describe)
    got = observations(fn, lambda f: torch.compile(f, backend="xla", fullgraph=False), describe)
    d = difference(got, exp, same)
    return f"ok {name}" if d is None else f"BAD {name}: {d}"


if __name__ == "__main__":
    torch._dynamo.config.recompile_limit = 64
    run(sys.argv[1:], TABLE, compare)
