"""Low-precision numerics as users write them (session 30): float16/bfloat16 tensors and
models, CPU bfloat16 autocast, float8 casts, unsigned and narrow integers, mixed precision.
Each case runs eagerly and under ``torch.compile(..., backend="xla")``; dtypes and shapes must
match exactly, and values either equal eager's or be no further from a float64 reference
(the same function on the inputs converted to float64) than ``2 * eager's error + 1 ulp``.
Gradients (``.grad`` None-ness, dtype, values) are compared the same way.

    PYTHONPATH=. python scripts/probe_lowprec30.py [substring ...]
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _probe_common import r

warnings.simplefilter("ignore")
H, B, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
CASES: dict = {}


def case(name, fn, *make, grad=False, ref=True):
    """``fn(*inputs)``; ``make`` builds the inputs; ``grad``: also backward of the sum of
    the float outputs to the inputs that require grad; ``ref``: compare to float64."""
    CASES[name] = (fn, make, grad, ref)


def _flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    if hasattr(v, "values") and hasattr(v, "indices"):
        return [v.values, v.indices]
    return [v]


def _to64(a):
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        t = a.detach().to(F64)
        return t.requires_grad_(a.requires_grad)
    return a


def _ulp(dtype):
    return {H: 2**-10, B: 2**-7, F32: 2**-23, F64: 2**-52}.get(dtype, 0)


def _err(t, ref):
    t, ref = t.detach().to(F64), ref.detach().to(F64)
    both_nan = t.isnan() & ref.isnan()
    same_inf = (t == ref) & t.isinf()
    d = (t - ref).abs()
    d = torch.where(both_nan | same_inf, torch.zeros_like(d), d)
    d = torch.where(t.isnan() ^ ref.isnan(), torch.full_like(d, float("inf")), d)
    return d


def compare(got, exp, ref, label):
    g, e = _flat(got), _flat(exp)
    rr = _flat(ref) if ref is not None else [None] * len(e)
    if len(g) != len(e):
        return f"{label}: {len(g)} outputs vs {len(e)}"
    for i, (a, b, c) in enumerate(zip(g, e, rr)):
        if isinstance(b, torch.Tensor) != isinstance(a, torch.Tensor):
            return f"{label}[{i}]: {type(a)} vs {type(b)}"
        if not isinstance(b, torch.Tensor):
            if a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b)):
                return f"{label}[{i}]: {a!r} vs {b!r}"
            continue
        if a.dtype != b.dtype:
            return f"{label}[{i}]: DTYPE {a.dtype} vs {b.dtype}"
        if a.shape != b.shape:
            return f"{label}[{i}]: SHAPE {tuple(a.shape)} vs {tuple(b.shape)}"
        if not (a.is_floating_point() or a.is_complex()):
            if not torch.equal(a, b):
                k = (a != b).nonzero()[0].tolist()
                return f"{label}[{i}]: INT {a[tuple(k)]} vs {b[tuple(k)]} at {k}"
            continue
        eq = (a == b) | (a.isnan() & b.isnan())
        if bool(eq.all()):
            continue
        if c is None or not isinstance(c, torch.Tensor):
            k = (~eq).nonzero()[0].tolist()
            return (
                f"{label}[{i}]: VALUE {a[tuple(k)].item()} vs {b[tuple(k)].item()} at {k} (no ref)"
            )
        ea, eb = _err(a, c), _err(b, c)
        scale = c.detach().to(F64).abs().clamp_min(1.0 if a.dtype in (H, B) else 1e-30)
        tol = 2 * eb + _ulp(a.dtype) * scale
        bad = ea > tol
        # (accumulations in another order: a few elements may land further off by chance;
        # worse means worse over the tensor: its largest error over twice eager's + 1 ulp)
        fin = lambda e: torch.where(e.isinf(), torch.full_like(e, 1e300), e)
        worse = fin(ea).max() > 2 * fin(eb).max() + _ulp(a.dtype) * scale.max()
        if bool(bad.any()) and not worse:
            return f"~{label}[{i}]: {int(bad.sum())} elements off by more than eager's bound"
        if bool(bad.any()):
            k = (ea - tol).argmax().item()
            k = list(torch.unravel_index(torch.tensor(k), a.shape))
            k = tuple(int(x) for x in k)
            return (
                f"{label}[{i}]: WORSE {a[k].item()!r} vs eager {b[k].item()!r} ref "
                f"{c.detach()[k].item()!r} (n={int(bad.sum())}/{a.numel()})"
            )
        # (differs from eager, within the bound: noted)
        return f"~{label}[{i}]: {int((~eq).sum())} elements differ within bound"
    return None


def _run(fn, make, grad, mode):
    torch.manual_seed(0)
    args = [m() for m in make]
    if mode == "ref":
        args = [_to64(a) for a in args]
    out = fn(*args)
    grads = []
    if grad:
        floats = [t for t in _flat(out) if isinstance(t, torch.Tensor) and t.requires_grad]
        loss = sum(t.float().sum() if mode != "ref" else t.sum() for t in floats)
        loss.backward()
        grads = [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return out, grads


def check(name):
    fn, make, grad, ref = CASES[name]
    torch._dynamo.reset()
    notes = []
    try:
        exp, eg = _run(fn, make, grad, "eager")
    except Exception as e:  # noqa: BLE001
        exp = e
    c = torch.compile(fn, backend="xla")
    try:
        got, gg = _run(c, make, grad, "compiled")
    except Exception as e:  # noqa: BLE001
        got = e
    if isinstance(exp, Exception) or isinstance(got, Exception):
        if isinstance(exp, Exception) and isinstance(got, Exception):
            if not isinstance(got, type(exp)):
                return f"ERRTYPE {name}: {type(got).__name__} vs {type(exp).__name__}: {exp}"
            return f"ok {name} (both raise {type(exp).__name__})"
        if isinstance(got, Exception):
            msg = str(got).strip().splitlines()
            return f"CRASH {name}: {type(got).__name__}: {msg[0][:300] if msg else ''}"
        return f"NORAISE {name}: eager raised {type(exp).__name__}: {str(exp)[:200]}"
    rv, rg = (None, None)
    if ref:
        try:
            rv, rg = _run(fn, make, grad, "ref")
        except Exception:  # noqa: BLE001
            rv, rg = None, None
    d = compare(got, exp, rv, "out")
    if d and not d.startswith("~"):
        return f"BAD {name}: {d}"
    if d:
        notes.append(d)
    if grad:
        if [x is None for x in gg] != [x is None for x in eg]:
            return (
                f"BAD {name}: grad None-ness {[x is None for x in gg]} vs {[x is None for x in eg]}"
            )
        d = compare(
            [x for x in gg if x is not None],
            [x for x in eg if x is not None],
            None if rg is None else [x for x in rg if x is not None],
            "grad",
        )
        if d and not d.startswith("~"):
            return f"BAD {name}: {d}"
        if d:
            notes.append(d)
    return f"ok {name}" + (f"  {notes}" if notes else "")


# ============================================================================================
# inputs


def t(*shape, dtype=H, seed=0, scale=1.0, grad=False):
    def make():
        x = (r(*shape, seed=seed) * scale).to(dtype)
        return x.requires_grad_(grad)

    return make


def big(*shape, dtype=H, seed=0, offset=100.0):
    def make():
        return (r(*shape, seed=seed) + offset).to(dtype)

    return make


def const(v):
    return lambda: v


# ============================================================================================
# reductions and normalizations (eager accumulates in float32)
for dt in (H, B):
    n = str(dt).split(".")[1]
    case(
        f"sum_{n}",
        lambda x, dt=dt: (x.sum(), x.sum(1), x.sum(0, keepdim=True)),
        big(64, 300, dtype=dt),
    )
    case(f"mean_{n}", lambda x, dt=dt: (x.mean(), x.mean(-1), x.nanmean(0)), big(64, 300, dtype=dt))
    case(
        f"sum_dtype_{n}",
        lambda x, dt=dt: (x.sum(dtype=F32), x.sum(1, dtype=F64)),
        big(8, 300, dtype=dt),
    )
    case(
        f"cumsum_{n}",
        lambda x, dt=dt: (x.cumsum(1), x.cumsum(0), torch.cumsum(x, 1, dtype=F32)),
        big(4, 500, dtype=dt, offset=1.0),
    )
    case(f"cumprod_{n}", lambda x, dt=dt: x.cumprod(1), t(4, 40, dtype=dt, scale=0.3))
    case(f"logcumsumexp_{n}", lambda x, dt=dt: x.logcumsumexp(1), t(4, 100, dtype=dt))
    case(
        f"var_std_{n}",
        lambda x, dt=dt: (x.var(), x.std(1), x.var(0, correction=0), torch.var_mean(x, 1)),
        big(16, 300, dtype=dt),
    )
    case(
        f"norm_{n}",
        lambda x, dt=dt: (x.norm(), x.norm(dim=1), torch.linalg.vector_norm(x, 3, 1), x.norm(p=1)),
        big(16, 300, dtype=dt, offset=3.0),
    )
    case(
        f"logsumexp_{n}",
        lambda x, dt=dt: (x.logsumexp(1), torch.logsumexp(x, 0)),
        t(16, 300, dtype=dt, scale=4),
    )
    case(f"prod_{n}", lambda x, dt=dt: (x.prod(1), x.prod()), t(4, 20, dtype=dt, scale=0.5))
    case(
        f"softmax_{n}",
        lambda x, dt=dt: (x.softmax(-1), F.log_softmax(x, 1), F.softmax(x, 0, dtype=F32)),
        t(8, 300, dtype=dt, scale=5),
    )
    case(
        f"layer_norm_{n}",
        lambda x, dt=dt: F.layer_norm(x, (300,)),
        big(8, 300, dtype=dt, offset=10.0),
    )
    case(
        f"layer_norm_w_{n}",
        lambda x, w, b, dt=dt: F.layer_norm(x, (300,), w, b),
        big(8, 300, dtype=dt),
        t(300, dtype=dt, seed=1),
        t(300, dtype=dt, seed=2),
    )
    case(
        f"group_norm_{n}",
        lambda x, dt=dt: F.group_norm(x, 4, None, None),
        big(2, 8, 6, 6, dtype=dt, offset=5.0),
    )
    case(
        f"rms_norm_{n}",
        lambda x, w, dt=dt: F.rms_norm(x, (300,), w),
        big(8, 300, dtype=dt, offset=3.0),
        t(300, dtype=dt, seed=1),
    )
    case(
        f"batch_norm_eval_{n}",
        lambda x, m, v, dt=dt: F.batch_norm(x, m, v, training=False),
        big(4, 3, 5, 5, dtype=dt),
        t(3, dtype=dt, seed=3),
        lambda dt=dt: torch.ones(3, dtype=dt) * 2,
    )
    case(
        f"batch_norm_train_{n}",
        lambda x, dt=dt: F.batch_norm(x, None, None, training=True),
        big(16, 3, 10, 10, dtype=dt, offset=20.0),
    )
    case(
        f"matmul_{n}",
        lambda a, b, dt=dt: (a @ b, torch.bmm(a[None], b[None])),
        t(16, 512, dtype=dt),
        t(512, 8, dtype=dt, seed=1),
    )
    case(
        f"addmm_{n}",
        lambda c, a, b, dt=dt: (torch.addmm(c, a, b), torch.addmm(c, a, b, beta=0.5, alpha=2.0)),
        t(8, dtype=dt, seed=2),
        t(4, 256, dtype=dt),
        t(256, 8, dtype=dt, seed=1),
    )
    case(
        f"linear_{n}",
        lambda x, w, b, dt=dt: F.linear(x, w, b),
        t(3, 4, 256, dtype=dt),
        t(8, 256, dtype=dt, seed=1),
        t(8, dtype=dt, seed=2),
    )
    case(
        f"baddbmm_{n}",
        lambda c, a, b, dt=dt: torch.baddbmm(c, a, b, beta=0.25, alpha=3),
        t(2, 4, 8, dtype=dt, seed=2),
        t(2, 4, 256, dtype=dt),
        t(2, 256, 8, dtype=dt, seed=1),
    )
    case(
        f"dot_{n}",
        lambda a, b, dt=dt: (
            torch.dot(a, b),
            torch.mv(a[None].expand(3, -1), b),
            torch.inner(a, b),
        ),
        t(2048, dtype=dt),
        t(2048, dtype=dt, seed=1),
    )
    case(
        f"einsum_{n}",
        lambda a, b, dt=dt: torch.einsum("ij,jk->ik", a, b),
        t(4, 512, dtype=dt),
        t(512, 4, dtype=dt, seed=1),
    )
    case(
        f"conv2d_{n}",
        lambda x, w, dt=dt: F.conv2d(x, w, padding=1),
        t(1, 16, 8, 8, dtype=dt),
        t(4, 16, 3, 3, dtype=dt, seed=1),
    )
    case(
        f"conv1d_{n}",
        lambda x, w, b, dt=dt: F.conv1d(x, w, b),
        t(2, 32, 20, dtype=dt),
        t(4, 32, 5, dtype=dt, seed=1),
        t(4, dtype=dt, seed=2),
    )
    case(
        f"interp_{n}",
        lambda x, dt=dt: (
            F.interpolate(x, scale_factor=2, mode="bilinear"),
            F.interpolate(x, size=(7, 5), mode="bicubic", align_corners=True),
            F.interpolate(x, scale_factor=3, mode="nearest"),
        ),
        big(1, 2, 5, 6, dtype=dt),
    )
    case(
        f"avg_pool_{n}",
        lambda x, dt=dt: (F.avg_pool2d(x, 3), F.adaptive_avg_pool2d(x, 1), F.avg_pool1d(x[0], 5)),
        big(1, 2, 30, 30, dtype=dt),
    )
    case(
        f"cross_entropy_{n}",
        lambda x, y, dt=dt: (
            F.cross_entropy(x, y),
            F.nll_loss(x.log_softmax(1), y, reduction="sum"),
        ),
        t(64, 100, dtype=dt, scale=3),
        lambda: torch.randint(0, 100, (64,)),
    )
    case(
        f"mse_{n}",
        lambda a, b, dt=dt: (
            F.mse_loss(a, b),
            F.l1_loss(a, b),
            F.smooth_l1_loss(a, b),
            F.huber_loss(a, b, delta=0.5),
        ),
        big(64, 100, dtype=dt),
        big(64, 100, dtype=dt, seed=1),
    )
    case(
        f"bce_{n}",
        lambda a, b, dt=dt: (
            F.binary_cross_entropy_with_logits(a, b),
            F.binary_cross_entropy(a.sigmoid(), b),
        ),
        t(64, 100, dtype=dt),
        lambda dt=dt: torch.rand(64, 100).to(dt),
    )
    case(
        f"kl_{n}",
        lambda a, b, dt=dt: F.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"),
        t(16, 100, dtype=dt),
        t(16, 100, dtype=dt, seed=1),
    )
    case(
        f"cosine_{n}",
        lambda a, b, dt=dt: (
            F.cosine_similarity(a, b),
            F.pairwise_distance(a, b),
            torch.cdist(a, b),
        ),
        big(16, 200, dtype=dt),
        big(16, 200, dtype=dt, seed=1),
    )
    case(f"normalize_{n}", lambda a, dt=dt: F.normalize(a, dim=1), big(16, 200, dtype=dt))
    case(
        f"sdpa_{n}",
        lambda q, k, v, dt=dt: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        t(1, 2, 16, 32, dtype=dt),
        t(1, 2, 16, 32, dtype=dt, seed=1),
        t(1, 2, 16, 32, dtype=dt, seed=2),
    )
    case(f"std_mean_{n}", lambda x, dt=dt: torch.std_mean(x, dim=(0, 1)), big(8, 50, 3, dtype=dt))
    case(
        f"trace_{n}", lambda x, dt=dt: (torch.trace(x), x.diagonal().sum()), big(200, 200, dtype=dt)
    )
    case(f"histc_{n}", lambda x, dt=dt: torch.histc(x.float(), 10), t(100, dtype=dt))
    case(
        f"addmv_{n}",
        lambda c, a, b, dt=dt: torch.addmv(c, a, b, alpha=0.5),
        t(8, dtype=dt, seed=2),
        t(8, 256, dtype=dt),
        t(256, dtype=dt, seed=1),
    )
    case(
        f"renorm_{n}",
        lambda x, dt=dt: torch.renorm(x, 2, 0, 5.0),
        big(4, 100, dtype=dt, offset=1.0),
    )
    case(f"nansum_{n}", lambda x, dt=dt: (x.nansum(1), x.nanmean(1)), big(8, 300, dtype=dt))
    case(
        f"count_mean_{n}",
        lambda x, dt=dt: ((x > 100).sum(), (x > 100).to(dt).mean()),
        big(8, 3000, dtype=dt),
    )
    case(
        f"cov_{n}",
        lambda x, dt=dt: (torch.cov(x), torch.corrcoef(x)),
        big(4, 300, dtype=dt, offset=2.0),
    )
    case(
        f"embbag_{n}",
        lambda w, i, dt=dt: F.embedding_bag(i, w, mode="mean"),
        t(100, 16, dtype=dt),
        lambda: torch.randint(0, 100, (8, 30)),
    )

# elementwise mixed precision / opmath
for dt in (H, B):
    n = str(dt).split(".")[1]
    case(
        f"add_alpha_{n}",
        lambda a, b, dt=dt: (
            a.add(b, alpha=0.1),
            a.sub(b, alpha=3.3),
            torch.add(a, b, alpha=-1e-3),
        ),
        t(8, 13, dtype=dt),
        t(8, 13, dtype=dt, seed=1),
    )
    case(
        f"add_alpha_bcast_{n}",
        lambda a, b, dt=dt: (a.add(b, alpha=0.1), a.sub(b, alpha=3.3)),
        t(8, 37, dtype=dt),
        t(37, dtype=dt, seed=1),
    )
    case(
        f"add_alpha_t_{n}",
        lambda a, b, dt=dt: (a.add(b.t(), alpha=0.1), a.t().sub(b, alpha=3.3)),
        t(37, 8, dtype=dt),
        t(8, 37, dtype=dt, seed=1),
    )
    case(
        f"add_alpha_f32_{n}",
        lambda a, b, dt=dt: (a.add(b, alpha=0.1), b.add(a, alpha=0.3)),
        t(37, dtype=dt),
        t(37, dtype=F32, seed=1),
    )
    case(
        f"add_alpha_scalar0d_{n}",
        lambda a, b, dt=dt: (a.add(b, alpha=0.1), a.sub(torch.tensor(1.7), alpha=0.3)),
        t(37, dtype=dt),
        lambda: torch.tensor(2.3),
    )
    case(
        f"lerp_{n}",
        lambda a, b, w, dt=dt: (torch.lerp(a, b, 0.3), torch.lerp(a, b, w), a.lerp(b, 0.7)),
        t(37, dtype=dt),
        t(37, dtype=dt, seed=1),
        lambda dt=dt: torch.rand(37).to(dt),
    )
    case(
        f"lerp_bcast_{n}",
        lambda a, b, dt=dt: (torch.lerp(a, b, 0.3), torch.lerp(a[None], b[:, None], 0.6)),
        t(37, dtype=dt),
        t(37, dtype=dt, seed=1),
    )
    case(
        f"lerp_f32w_{n}",
        lambda a, b, w, dt=dt: torch.lerp(a, b, w),
        t(37, dtype=dt),
        t(37, dtype=dt, seed=1),
        lambda: torch.tensor(0.3),
    )
    case(
        f"addcmul_{n}",
        lambda a, b, c, dt=dt: (
            torch.addcmul(a, b, c, value=0.1),
            torch.addcdiv(a, b, c.abs() + 1, value=-0.3),
        ),
        t(37, dtype=dt),
        t(37, dtype=dt, seed=1),
        t(37, dtype=dt, seed=2),
    )
    case(
        f"addcmul_bcast_{n}",
        lambda a, b, c, dt=dt: (
            torch.addcmul(a, b, c, value=0.1),
            torch.addcdiv(a, b, c.abs() + 1, value=-0.3),
        ),
        t(5, 37, dtype=dt),
        t(37, dtype=dt, seed=1),
        t(5, 1, dtype=dt, seed=2),
    )
    case(
        f"where_scalar_{n}",
        lambda a, dt=dt: (
            torch.where(a > 0, a, 0.1),
            torch.where(a > 0, 1.3, a),
            torch.where(a > 0, 0.1, 0.3),
        ),
        t(37, dtype=dt),
    )
    case(
        f"clamp_float_{n}",
        lambda a, dt=dt: (
            a.clamp(-0.1, 0.3),
            a.clamp(min=0.33333),
            torch.clamp(a, max=1e-4),
            a.clamp(-70000.0, 70000.0),
        ),
        t(37, dtype=dt),
    )
    case(
        f"clamp_tensor_{n}",
        lambda a, lo, dt=dt: (a.clamp(lo, None), a.clamp(min=lo.float())),
        t(37, dtype=dt),
        t(37, dtype=dt, seed=1),
    )
    case(
        f"pow_{n}",
        lambda a, dt=dt: (
            a.abs() ** 0.3,
            a.abs().pow(2.5),
            torch.pow(a.abs(), 1 / 3),
            a**2,
            a**3,
            a**-1,
            a.abs() ** 0.5,
            2.0**a,
            torch.pow(1.1, a),
        ),
        t(37, dtype=dt),
    )
    case(
        f"div_{n}",
        lambda a, b, dt=dt: (
            a / b,
            a / 3.0,
            1.0 / a,
            a / 0.1,
            torch.div(a, b, rounding_mode="floor"),
            a // 0.3,
            a % 0.3,
            torch.fmod(a, 0.3),
            torch.remainder(a, b),
        ),
        t(37, dtype=dt),
        t(37, dtype=dt, seed=1),
    )
    case(
        f"mul_scalar_{n}",
        lambda a, dt=dt: (a * 0.1, a * 1e-5, 0.3 * a, a * 1e5, a * (1 / 3)),
        t(37, dtype=dt),
    )
    case(
        f"add_scalar_{n}",
        lambda a, dt=dt: (a + 0.1, a - 1e-3, 0.3 + a, a + 1e4, 1 - a),
        t(37, dtype=dt),
    )
    case(
        f"mixed_0d_{n}",
        lambda a, s, dt=dt: (a * s, a + s, a / s, a - s, s - a, torch.maximum(a, s.to(dt))),
        t(37, dtype=dt),
        lambda: torch.tensor(0.1),
    )
    case(
        f"mixed_f32_{n}",
        lambda a, b, dt=dt: (a * b, a + b, a / b, (a * b).dtype),
        t(37, dtype=dt),
        t(37, dtype=F32, seed=1),
    )
    case(
        f"mixed_int_{n}",
        lambda a, i, dt=dt: (a * i, a + i, a / i, i / a, i - a, (a + i).dtype),
        t(37, dtype=dt),
        lambda: torch.arange(1, 38),
    )
    case(
        f"mixed_int_scalar_{n}",
        lambda i, dt=dt: (i * 0.1, i + 0.5, i / 3, (i * 1.5).dtype),
        lambda: torch.arange(37, dtype=torch.int32),
    )
    case(
        f"mixed_bool_{n}",
        lambda a, m, dt=dt: (a * m, a + m, m * 0.3, torch.where(m, a, 0)),
        t(37, dtype=dt),
        lambda: torch.rand(37) > 0.5,
    )
    case(
        f"roundtrip_{n}",
        lambda a, dt=dt: (
            (a.float() * 0.1).to(dt),
            (a.float() + 1e-4).to(dt) - a,
            a.double().to(dt),
            a.to(F32).exp().to(dt),
        ),
        t(37, dtype=dt),
    )
    case(
        f"to_mul_{n}",
        lambda x, y, dt=dt: (x.to(dt) * y, x.to(dt) + y, (y * x.to(dt)).sum()),
        t(37, dtype=F32),
        t(37, dtype=F32, seed=1),
    )
    case(
        f"unary_{n}",
        lambda a, dt=dt: (
            a.exp(),
            a.log1p().nan_to_num(),
            a.sigmoid(),
            a.tanh(),
            a.erf(),
            a.rsqrt(),
            a.reciprocal(),
            a.expm1(),
            a.sin(),
            F.gelu(a),
            F.gelu(a, approximate="tanh"),
            F.silu(a),
            F.softplus(a),
            F.mish(a),
            F.elu(a),
            F.hardswish(a),
            F.logsigmoid(a),
        ),
        t(37, dtype=dt, scale=3),
    )
    case(
        f"hypot_atan2_{n}",
        lambda a, b, dt=dt: (
            torch.hypot(a, b),
            torch.atan2(a, b),
            torch.logaddexp(a, b),
            torch.xlogy(a.abs(), b.abs()),
        ),
        t(37, dtype=dt, scale=3),
        t(37, dtype=dt, seed=1),
    )
    case(
        f"round_{n}",
        lambda a, dt=dt: (a.round(), a.round(decimals=2), a.trunc(), a.frac(), a.floor(), a.ceil()),
        t(37, dtype=dt, scale=30),
    )
    case(
        f"cast_big_{n}",
        lambda a, dt=dt: (a.to(dt), (a * 1000).to(dt), a.to(dt).to(torch.int32), a.to(dt).bool()),
        lambda: torch.tensor(
            [
                1e5,
                7e4,
                -7e4,
                65504.0,
                65520.0,
                65519.99,
                3.4e38,
                float("nan"),
                float("inf"),
                -0.0,
                1e-8,
                6e-8,
                1e-40,
                2.5,
                -2.5,
                0.5,
            ]
        ),
    )
    case(
        f"cast_int_{n}",
        lambda a, dt=dt: (
            a.to(torch.int32),
            a.to(torch.int64),
            a.to(torch.int8),
            a.to(torch.uint8),
            a.to(torch.bool),
            a.to(torch.int16),
        ),
        lambda dt=dt: torch.tensor(
            [1.9, -1.9, 100.5, -100.5, 0.0, -0.0, 0.3, 255.0, 127.0, -128.0, 3.0, 1000.0], dtype=dt
        ),
    )
    case(
        f"from_int_{n}",
        lambda i, dt=dt: (i.to(dt), i.to(dt).to(torch.int64), (i.to(dt) + 1)),
        lambda: torch.tensor([2049, 2051, 65505, 65536, 100000, -65520, 257, 16777217, 2**40]),
    )
    case(
        f"mean_int_to_{n}",
        lambda i, dt=dt: (i.to(dt).mean(), i.to(dt).sum()),
        lambda: torch.arange(3000),
    )
    case(
        f"arange_{n}",
        lambda dt=dt: (
            torch.arange(0, 10, 0.1, dtype=dt),
            torch.linspace(0, 1, 37, dtype=dt),
            torch.arange(300, dtype=dt),
            torch.full((3,), 0.1, dtype=dt),
        ),
        ref=False,
    )
    case(
        f"maxpool_{n}",
        lambda a, dt=dt: (F.max_pool2d(a, 2), a.amax(1), a.max(0), a.argmax()),
        t(1, 2, 8, 8, dtype=dt),
    )
    case(
        f"sort_{n}",
        lambda a, dt=dt: (
            a.sort(),
            a.topk(3),
            a.kthvalue(4),
            a.median(),
            a.quantile(0.3) if dt == F32 else a.float().quantile(0.3),
        ),
        t(37, dtype=dt),
    )
    case(
        f"isclose_{n}",
        lambda a, b, dt=dt: (torch.isclose(a, b), torch.allclose(a, b), a == b),
        t(37, dtype=dt),
        t(37, dtype=dt),
    )
    case(
        f"dropout_eval_{n}",
        lambda a, dt=dt: F.dropout(a, 0.5, training=False) * 1.5,
        t(37, dtype=dt),
    )
    case(
        f"scatter_add_{n}",
        lambda a, i, dt=dt: (
            torch.zeros(5, dtype=dt).scatter_add(0, i, a),
            torch.zeros(5, dtype=dt).index_add(0, i, a),
            torch.zeros(5, dtype=dt).scatter_reduce(0, i, a, "mean"),
        ),
        big(3000, dtype=dt, offset=1.0),
        lambda: torch.randint(0, 5, (3000,)),
    )
    case(
        f"index_put_acc_{n}",
        lambda a, i, dt=dt: torch.zeros(5, dtype=dt).index_put((i,), a, accumulate=True),
        big(3000, dtype=dt, offset=1.0),
        lambda: torch.randint(0, 5, (3000,)),
    )
    case(
        f"bincount_w_{n}",
        lambda a, i, dt=dt: torch.bincount(i, a.float()),
        big(3000, dtype=dt, offset=1.0),
        lambda: torch.randint(0, 5, (3000,)),
    )

# gradients
for dt in (H, B):
    n = str(dt).split(".")[1]
    case(
        f"g_softmax_{n}",
        lambda x, dt=dt: x.softmax(-1) * torch.arange(300, dtype=x.dtype),
        t(8, 300, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_log_softmax_{n}",
        lambda x, dt=dt: F.log_softmax(x, 1)[:, :5],
        t(8, 300, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_layer_norm_{n}",
        lambda x, w, b, dt=dt: (
            F.layer_norm(x, (300,), w, b) * torch.linspace(-1, 1, 300, dtype=x.dtype)
        ),
        big(8, 300, dtype=dt, offset=3.0),
        t(300, dtype=dt, seed=1, grad=True),
        t(300, dtype=dt, seed=2, grad=True),
        grad=True,
    )
    case(
        f"g_layer_norm_x_{n}",
        lambda x, w, dt=dt: F.layer_norm(x, (300,), w) * torch.linspace(-1, 1, 300, dtype=x.dtype),
        t(8, 300, dtype=dt, grad=True),
        t(300, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_linear_{n}",
        lambda x, w, b, dt=dt: F.linear(x, w, b).square(),
        t(16, 256, dtype=dt, grad=True),
        t(8, 256, dtype=dt, seed=1, grad=True),
        t(8, dtype=dt, seed=2, grad=True),
        grad=True,
    )
    case(
        f"g_sum_{n}",
        lambda x, dt=dt: (x * x).sum() + x.mean() * 100,
        big(64, 300, dtype=dt, offset=3.0),
        grad=False,
    )
    case(
        f"g_sum_bcast_{n}",
        lambda x, b, dt=dt: x + b,
        t(64, 300, dtype=dt, grad=True),
        t(300, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_bcast_mul_{n}",
        lambda x, b, dt=dt: x * b,
        t(512, 30, dtype=dt, grad=True),
        t(30, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_group_norm_{n}",
        lambda x, w, b, dt=dt: (
            F.group_norm(x, 2, w, b) * torch.arange(36, dtype=x.dtype).view(6, 6)
        ),
        t(2, 4, 6, 6, dtype=dt, grad=True),
        t(4, dtype=dt, seed=1, grad=True),
        t(4, dtype=dt, seed=2, grad=True),
        grad=True,
    )
    case(
        f"g_batch_norm_{n}",
        lambda x, w, b, dt=dt: (
            F.batch_norm(x, None, None, w, b, training=True)
            * torch.arange(25, dtype=x.dtype).view(5, 5)
        ),
        t(8, 3, 5, 5, dtype=dt, grad=True),
        t(3, dtype=dt, seed=1, grad=True),
        t(3, dtype=dt, seed=2, grad=True),
        grad=True,
    )
    case(
        f"g_sdpa_{n}",
        lambda q, k, v, dt=dt: (
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
            * torch.arange(32, dtype=q.dtype)
        ),
        t(1, 2, 16, 32, dtype=dt, grad=True),
        t(1, 2, 16, 32, dtype=dt, seed=1, grad=True),
        t(1, 2, 16, 32, dtype=dt, seed=2, grad=True),
        grad=True,
    )
    case(
        f"g_conv_{n}",
        lambda x, w, dt=dt: F.conv2d(x, w, padding=1).square(),
        t(2, 8, 8, 8, dtype=dt, grad=True),
        t(4, 8, 3, 3, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_mse_{n}",
        lambda a, b, dt=dt: F.mse_loss(a, b) + F.smooth_l1_loss(a, b),
        t(64, 100, dtype=dt, grad=True),
        t(64, 100, dtype=dt, seed=1),
        grad=True,
    )
    case(
        f"g_ce_{n}",
        lambda x, y, dt=dt: F.cross_entropy(x, y, label_smoothing=0.1),
        t(64, 100, dtype=dt, scale=3, grad=True),
        lambda: torch.randint(0, 100, (64,)),
        grad=True,
    )
    case(
        f"g_norm_{n}",
        lambda x, dt=dt: x.norm(dim=1) + x.var(1) + x.std(1),
        big(8, 300, dtype=dt, offset=2.0),
        grad=False,
    )
    case(
        f"g_norm2_{n}",
        lambda x, dt=dt: x.norm(dim=1) * 3 + x.var(1) + x.logsumexp(1),
        t(8, 300, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_pow_{n}",
        lambda x, dt=dt: (x.abs() + 0.1) ** 1.7 + x**2,
        t(37, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_lerp_{n}",
        lambda a, b, dt=dt: torch.lerp(a, b, 0.3) * 3 + torch.addcmul(a, a, b, value=0.1),
        t(37, dtype=dt, grad=True),
        t(37, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_cast_{n}",
        lambda a, dt=dt: (a.float() * 0.1).to(dt) * a,
        t(37, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_to_mixed_{n}",
        lambda a, b, dt=dt: a.to(dt) * b,
        t(37, dtype=F32, grad=True),
        t(37, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_mixed_f32_{n}",
        lambda a, b, dt=dt: a * b,
        t(37, dtype=F32, grad=True),
        t(37, dtype=dt, seed=1, grad=True),
        grad=True,
    )
    case(
        f"g_cumsum_{n}",
        lambda a, dt=dt: a.cumsum(0) * torch.arange(500, dtype=a.dtype),
        t(500, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_interp_{n}",
        lambda a, dt=dt: (
            F.interpolate(a, scale_factor=2, mode="bilinear") * torch.arange(12, dtype=a.dtype)
        ),
        t(1, 2, 5, 6, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_embedding_{n}",
        lambda w, i, dt=dt: F.embedding(i, w) * 1.5,
        t(10, 16, dtype=dt, grad=True),
        lambda: torch.randint(0, 10, (3000,)),
        grad=True,
    )
    case(
        f"g_index_{n}",
        lambda w, i, dt=dt: w[i] * 1.5,
        t(10, 16, dtype=dt, grad=True),
        lambda: torch.randint(0, 10, (3000,)),
        grad=True,
    )
    case(
        f"g_expand_sum_{n}",
        lambda w, dt=dt: w.expand(3000, 16) * 1.1,
        t(16, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_mean_{n}",
        lambda w, dt=dt: w.mean(0) * 3000,
        t(3000, 16, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"g_avgpool_{n}",
        lambda x, dt=dt: F.adaptive_avg_pool2d(x, 1) * 7,
        t(1, 2, 30, 30, dtype=dt, grad=True),
        grad=True,
    )


# autocast (CPU bfloat16)
def _autocast(fn):
    def wrapped(*a):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn(*a)

    return wrapped


case(
    "ac_linear",
    _autocast(lambda x, w, b: (F.linear(x, w, b), F.linear(x, w, b).float().sum(), x @ w.t())),
    t(4, 64, dtype=F32),
    t(8, 64, dtype=F32, seed=1),
    t(8, dtype=F32, seed=2),
)
case(
    "ac_ops",
    _autocast(
        lambda x, w: (
            (x @ w).softmax(-1),
            (x @ w).sum(),
            F.layer_norm(x @ w, (8,)),
            (x @ w).exp(),
            (x @ w) + x.sum(),
            torch.cumsum(x @ w, 1),
        )
    ),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
)
case(
    "ac_conv",
    _autocast(
        lambda x, w: (F.conv2d(x, w), F.conv2d(x, w).mean(), F.max_pool2d(F.conv2d(x, w), 2))
    ),
    t(1, 3, 8, 8, dtype=F32),
    t(4, 3, 3, 3, dtype=F32, seed=1),
)
case(
    "ac_bmm_baddbmm",
    _autocast(
        lambda a, b, c: (torch.bmm(a, b), torch.baddbmm(c, a, b), torch.addmm(c[0], a[0], b[0]))
    ),
    t(2, 4, 64, dtype=F32),
    t(2, 64, 8, dtype=F32, seed=1),
    t(2, 4, 8, dtype=F32, seed=2),
)
case(
    "ac_loss",
    _autocast(
        lambda x, w, y: (
            F.cross_entropy(x @ w, y),
            F.mse_loss(x @ w, torch.zeros(4, 8)),
            F.binary_cross_entropy_with_logits(x @ w, torch.ones(4, 8)),
        )
    ),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
    lambda: torch.tensor([1, 2, 3, 0]),
)
case(
    "ac_sdpa",
    _autocast(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
    t(1, 2, 8, 16, dtype=F32),
    t(1, 2, 8, 16, dtype=F32, seed=1),
    t(1, 2, 8, 16, dtype=F32, seed=2),
)
case(
    "ac_mixed",
    _autocast(
        lambda x, w, h: (
            x @ w + h,
            (x @ w) * h.half(),
            torch.cat([x @ w, h]),
            torch.stack([x @ w, h]),
            torch.addcmul(h, x @ w, h),
        )
    ),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
    t(4, 8, dtype=F32, seed=2),
)
case(
    "ac_nested_disable",
    lambda x, w: _autocast(lambda x, w: (x @ w, _noac(x, w)))(x, w),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
)


def _noac(x, w):
    with torch.autocast("cpu", enabled=False):
        return x @ w


def _ac_grad(fn):
    return _autocast(fn)


case(
    "ac_g_linear",
    _ac_grad(lambda x, w, b: F.linear(x, w, b).square()),
    t(4, 64, dtype=F32, grad=True),
    t(8, 64, dtype=F32, seed=1, grad=True),
    t(8, dtype=F32, seed=2, grad=True),
    grad=True,
)
case(
    "ac_g_conv",
    _ac_grad(lambda x, w: F.conv2d(x, w).relu()),
    t(1, 3, 8, 8, dtype=F32, grad=True),
    t(4, 3, 3, 3, dtype=F32, seed=1, grad=True),
    grad=True,
)
case(
    "ac_g_ln_sdpa",
    _ac_grad(
        lambda q, k, w: F.scaled_dot_product_attention(
            F.layer_norm(q, (16,), w), k, k, is_causal=True
        )
    ),
    t(1, 2, 8, 16, dtype=F32, grad=True),
    t(1, 2, 8, 16, dtype=F32, seed=1, grad=True),
    t(16, dtype=F32, seed=2, grad=True),
    grad=True,
)
case(
    "ac_g_ce",
    _ac_grad(lambda x, w: F.cross_entropy(x @ w, torch.tensor([1, 2, 3, 0]))),
    t(4, 64, dtype=F32, grad=True),
    t(64, 8, dtype=F32, seed=1, grad=True),
    grad=True,
)


# models
class Block(nn.Module):
    def __init__(self, d=32, h=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.h = h

    def forward(self, x):
        b, t_, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (z.view(b, t_, self.h, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t_, d))
        return x + self.ff(self.ln2(x))


def _model_step(dtype, autocast):
    def run(x, y):
        torch.manual_seed(0)
        m = nn.Sequential(Block(), nn.Linear(32, 10))
        if dtype is not None:
            m = m.to(dtype)
            x = x.to(dtype)
        step = _step_fn(m, autocast)
        fn = torch.compile(step, backend="xla") if _COMPILING[0] else step
        loss = fn(x, y)
        return (loss, *[p.grad for p in m.parameters()])

    return run


_COMPILING = [False]


def _step_fn(m, autocast):
    def step(x, y):
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = m(x)
        else:
            out = m(x)
        loss = F.cross_entropy(out.float().view(-1, 10), y.view(-1))
        loss.backward()
        return loss

    return step


def _model_case(name, dtype, autocast):
    def check_model():
        x = r(2, 8, 32)
        y = torch.randint(0, 10, (2, 8), generator=torch.Generator().manual_seed(1))
        _COMPILING[0] = False
        exp = _model_step(dtype, autocast)(x, y)
        torch._dynamo.reset()
        _COMPILING[0] = True
        try:
            got = _model_step(dtype, autocast)(x, y)
        except Exception as e:  # noqa: BLE001
            return f"CRASH {name}: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        _COMPILING[0] = False
        # reference: float64 model, no autocast
        ref = _model_step(F64, False)(x.double(), y)
        # (a model's loss and gradients: worse means a larger normwise error over a tensor,
        # more than twice eager's plus an ulp; single elements move either way)
        for i, (g, e, c) in enumerate(zip(got, exp, ref)):
            if g.dtype != e.dtype or g.shape != e.shape:
                return f"BAD {name}: [{i}] {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}"
            c = c.detach().double()
            norm = c.norm().clamp_min(1e-30)
            eg = ((g.detach().double() - c).norm() / norm).item()
            ee = ((e.detach().double() - c).norm() / norm).item()
            # (the loss is float32 of half-precision logits: their ulp)
            ulp = _ulp(g.dtype) if i else _ulp(dtype or B)
            if eg > 2 * ee + ulp:
                return f"BAD {name}: [{i}] normwise error {eg:.2e} vs eager's {ee:.2e}"
        return f"ok {name}"

    MODELS[name] = check_model


MODELS: dict = {}
_model_case("model_f16", H, False)
_model_case("model_bf16", B, False)
_model_case("model_ac_bf16", None, True)


# narrow ints, unsigned, float8
case(
    "uint8_wrap",
    lambda a, b: (
        a + b,
        a - b,
        a * b,
        a * 3,
        a + 250,
        a // b.clamp_min(1),
        -a,
        a.sum(),
        a.cumsum(0),
        a.to(torch.int8),
        (a + b).dtype,
    ),
    lambda: torch.tensor([200, 100, 0, 255, 1, 128], dtype=torch.uint8),
    lambda: torch.tensor([100, 200, 1, 1, 255, 128], dtype=torch.uint8),
)
case(
    "int8_wrap",
    lambda a, b: (
        a + b,
        a - b,
        a * b,
        a * 3,
        a.abs(),
        -a,
        a // 3,
        a.sum(),
        a.prod(),
        a.to(torch.uint8),
        a.float() / 3,
    ),
    lambda: torch.tensor([100, -100, 127, -128, 1, 64], dtype=torch.int8),
    lambda: torch.tensor([100, -100, 1, -1, 127, 2], dtype=torch.int8),
)
case(
    "int16_wrap",
    lambda a: (a * 300, a + 32000, a.sum(), (a * a).dtype),
    lambda: torch.tensor([100, -100, 32767, -32768, 1, 300], dtype=torch.int16),
)
for ut in (torch.uint16, torch.uint32, torch.uint64):
    un = str(ut).split(".")[1]
    case(
        f"{un}_ops",
        lambda a, b, ut=ut: (
            a + b,
            a - b,
            a * b,
            a // b,
            a % b,
            a.to(torch.int64),
            a > b,
            a.max(),
            a.min(),
            a == b,
            torch.maximum(a, b),
            a.to(F32),
        ),
        lambda ut=ut: torch.tensor(
            [1, 5, 100, 7, 65535 if ut == torch.uint16 else 2**31 + 5], dtype=ut
        ),
        lambda ut=ut: torch.tensor([3, 2, 100, 9, 2], dtype=ut),
        ref=False,
    )
    case(
        f"{un}_misc",
        lambda a, ut=ut: (
            a.sum(),
            a.to(torch.float64),
            a << 1,
            a >> 1,
            a & 3,
            a.clone(),
            a.reshape(5, 1).expand(5, 2),
            torch.cat([a, a]),
            a.flip(0),
            a.sort().values if ut == torch.uint64 else a,
        ),
        lambda ut=ut: torch.tensor([1, 5, 100, 7, 60000], dtype=ut),
        ref=False,
    )
    case(
        f"{un}_cast_from_float",
        lambda x, ut=ut: (x.to(ut), x.to(ut).to(torch.int64)),
        lambda: torch.tensor([1.5, 2.9, 100.0, 0.0, 60000.7]),
        ref=False,
    )
    case(
        f"{un}_cast_from_int",
        lambda x, ut=ut: (x.to(ut),),
        lambda: torch.tensor([1, 2, 100, 0, 60000]),
        ref=False,
    )
for f8 in (torch.float8_e4m3fn, torch.float8_e5m2):
    fn8 = str(f8).split(".")[1]
    case(
        f"{fn8}_cast",
        lambda x, f8=f8: (
            x.to(f8).float(),
            x.to(f8).to(B),
            x.to(f8).to(H),
            x.to(B).to(f8).float(),
            x.to(H).to(f8).to(F32),
            (x * 1000).to(f8).float(),
        ),
        lambda: torch.tensor(
            [
                0.1,
                1.0,
                -3.3,
                448.0,
                500.0,
                57344.0,
                1e5,
                float("nan"),
                float("inf"),
                -0.0,
                1e-4,
                0.0137,
                240.0,
                232.0,
                0.5,
                -1e6,
            ]
        ),
        ref=False,
    )
    case(
        f"{fn8}_misc",
        lambda x, f8=f8: (
            x.to(f8).view(torch.uint8),
            x.to(f8).clone().float(),
            x.to(f8)[1:3].float(),
            x.to(f8).reshape(4, 4).t().float(),
            torch.cat([x.to(f8), x.to(f8)]).float(),
            x.to(f8).to(torch.int32),
        ),
        lambda: r(16) * 10,
        ref=False,
    )
    case(
        f"{fn8}_scaled",
        lambda x, f8=f8: ((x / x.abs().max() * 448).to(f8).float() * x.abs().max() / 448,),
        lambda: r(64) * 3,
        ref=False,
    )
    case(
        f"{fn8}_eq",
        lambda x, f8=f8: (
            x.to(f8) == x.to(f8),
            x.to(f8).abs().float(),
            (-x.to(f8)).float() if f8 is not None else x,
        ),
        lambda: r(16),
        ref=False,
    )
_UOPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "rem": lambda a, b: a % b,
    "lt": lambda a, b: a < b,
    "eq": lambda a, b: a == b,
    "maximum": torch.maximum,
    "max": lambda a, b: a.max(),
    "sum": lambda a, b: a.sum(),
    "to_f32": lambda a, b: a.to(F32),
    "to_i64": lambda a, b: a.to(torch.int64),
    "to_h": lambda a, b: a.to(H),
    "lshift": lambda a, b: a << 1,
    "rshift": lambda a, b: a >> 1,
    "and": lambda a, b: a & b,
    "xor": lambda a, b: a ^ b,
    "not": lambda a, b: ~a,
    "clone": lambda a, b: a.clone(),
    "cat": lambda a, b: torch.cat([a, b]),
    "flip": lambda a, b: a.flip(0),
    "sort": lambda a, b: a.sort().values,
    "argmax": lambda a, b: a.argmax(),
    "cumsum": lambda a, b: a.cumsum(0),
    "where": lambda a, b: torch.where(a > b, a, b),
    "index": lambda a, b: a[torch.tensor([0, 2])],
    "mul_scalar": lambda a, b: a * 3,
    "add_scalar": lambda a, b: a + 3,
    "div": lambda a, b: a / b,
    "neg": lambda a, b: -a,
    "abs": lambda a, b: a.abs(),
    "setitem": lambda a, b: a.clone().index_put_((torch.tensor([1]),), b[:1]),
    "view_i": lambda a, b: a.view(
        {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    ),
    "zeros_like": lambda a, b: torch.zeros_like(a) + a,
    "fill": lambda a, b: torch.full((3,), 7, dtype=a.dtype),
    "bitwise_or_scalar": lambda a, b: a | 1,
}
for ut in (torch.uint16, torch.uint32, torch.uint64):
    un = str(ut).split(".")[1]
    big_v = {torch.uint16: 65535, torch.uint32: 2**32 - 1, torch.uint64: 2**64 - 1}[ut]
    for op, fn in _UOPS.items():
        case(
            f"u_{un}_{op}",
            fn,
            lambda ut=ut, big_v=big_v: torch.tensor([1, 5, 100, 7, big_v], dtype=ut),
            lambda ut=ut: torch.tensor([3, 2, 100, 9, 2], dtype=ut),
            ref=False,
        )


def _autocast16(fn):
    def wrapped(*a):
        with torch.autocast("cpu", dtype=torch.float16):
            return fn(*a)

    return wrapped


case(
    "half_sum_overflow",
    lambda x: (
        x.sum(),
        x.mean(),
        x.sum(dtype=F32),
        x.var(),
        x.norm(),
        x.cumsum(0)[-1],
        x.softmax(0)[:3],
    ),
    lambda: torch.full((10000,), 100.0, dtype=H),
)
case(
    "half_mask_softmax",
    lambda x, m: (
        x.masked_fill(m, float("-inf")).softmax(-1),
        (x + torch.where(m, torch.finfo(H).min, 0.0).to(H)).softmax(-1),
        x.masked_fill(m, torch.finfo(H).min).softmax(-1),
    ),
    t(4, 37, dtype=H),
    lambda: torch.rand(4, 37, generator=torch.Generator().manual_seed(3)) > 0.5,
)
case(
    "half_mask_all",
    lambda x: x.masked_fill(torch.ones_like(x, dtype=torch.bool), float("-inf")).softmax(-1),
    t(4, 37, dtype=H),
)
case(
    "half_sdpa_mask",
    lambda q, k, v, m: (
        F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        F.scaled_dot_product_attention(
            q, k, v, attn_mask=torch.where(m, 0.0, float("-inf")).to(q.dtype)
        ),
    ),
    t(1, 2, 8, 16, dtype=H),
    t(1, 2, 8, 16, dtype=H, seed=1),
    t(1, 2, 8, 16, dtype=H, seed=2),
    lambda: torch.rand(8, 8, generator=torch.Generator().manual_seed(3)) > 0.3,
)
case(
    "half_where_promo",
    lambda a, b: (
        torch.where(a > 0, a, b),
        torch.where(a > 0, a, b.double()),
        torch.clamp(a, min=b),
        torch.pow(a, torch.arange(5).repeat(8)[:37]),
        a // 0.7,
        a.round(),
        torch.maximum(a, b),
    ),
    t(37, dtype=H),
    t(37, dtype=F32, seed=1),
)
case(
    "half_large",
    lambda a: (
        a * 1000,
        a.exp(),
        a.pow(4),
        a * a * a * a,
        torch.expm1(a),
        a.sinh(),
        a.cosh(),
        F.softplus(a),
        (a * 100).sigmoid(),
        F.gelu(a * 100),
    ),
    t(37, dtype=H, scale=6),
)
case(
    "bf16_large",
    lambda a: (a * 1e30, a.exp(), a.pow(40), torch.expm1(a), (a * 1e38) * 10, (a * 1e38).sum()),
    t(37, dtype=B, scale=60),
)
case(
    "half_normalize_eps",
    lambda a: (
        F.normalize(a, dim=0),
        F.normalize(a * 1e-5, dim=0),
        F.layer_norm(a * 1e-3, (37,), eps=1e-5),
        F.rms_norm(a * 1e-3, (37,), eps=1e-6),
    ),
    t(37, dtype=H),
)
case("half_linear_f32_input", lambda x, w: F.linear(x, w), t(4, 8, dtype=F32), t(3, 8, dtype=H))
case("half_matmul_mixed", lambda x, w: x @ w, t(4, 8, dtype=B), t(8, 3, dtype=H))
case(
    "ac_f16",
    _autocast16(lambda x, w: (x @ w, F.linear(x, w.t()), (x @ w).softmax(-1))),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
)
case(
    "ac_outputs_dtype",
    _autocast(
        lambda x, w: (
            (x @ w).dtype,
            (x + 1).dtype,
            F.relu(x @ w),
            torch.cat([x @ w, x[:, :8]]),
            (x @ w).float() + x[:, :8],
            torch.addmm(x[:, :8], x, w),
        )
    ),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
)
case(
    "ac_bf16_input",
    _autocast(lambda x, w: (x @ w, x.to(B) @ w.to(B), (x.to(B) @ w).dtype)),
    t(4, 64, dtype=F32),
    t(64, 8, dtype=F32, seed=1),
)
case(
    "ac_g_mlp",
    _autocast(lambda x, w1, w2: F.cross_entropy(F.gelu(x @ w1) @ w2, torch.tensor([1, 2, 3, 0]))),
    t(4, 64, dtype=F32, grad=True),
    t(64, 32, dtype=F32, seed=1, grad=True),
    t(32, 8, dtype=F32, seed=2, grad=True),
    grad=True,
)


for dt in (H, B):
    n = str(dt).split(".")[1]
    case(
        f"x_grid_sample_{n}",
        lambda x, g: (
            F.grid_sample(x, g, align_corners=False),
            F.grid_sample(x, g, mode="nearest", align_corners=True),
        ),
        t(1, 2, 6, 7, dtype=dt),
        lambda dt=dt: (
            torch.rand(1, 5, 4, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1
        ).to(dt),
    )
    case(
        f"x_interp_modes_{n}",
        lambda x: (
            F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
            F.interpolate(x, size=(3, 4), mode="area"),
            F.interpolate(x, scale_factor=2.5, mode="bilinear", antialias=False),
            F.interpolate(x, size=(3, 3), mode="bilinear", antialias=True),
        ),
        big(1, 2, 9, 11, dtype=dt),
    )
    case(
        f"x_interp_1d3d_{n}",
        lambda x: (
            F.interpolate(x[0], scale_factor=2, mode="linear"),
            F.interpolate(x[None], scale_factor=2, mode="trilinear"),
        ),
        big(1, 2, 5, 6, dtype=dt),
    )
    case(
        f"x_fold_{n}",
        lambda x: (
            F.unfold(x, 3),
            F.fold(F.unfold(x, 3), (9, 11), 3),
            F.pixel_shuffle(x[:, :1].expand(1, 4, 9, 11), 2),
        ),
        big(1, 2, 9, 11, dtype=dt),
    )
    case(
        f"x_pools_{n}",
        lambda x: (
            F.avg_pool2d(x, 3, ceil_mode=True, count_include_pad=False),
            F.lp_pool2d(x, 2, 3),
            F.local_response_norm(x, 2),
            F.adaptive_avg_pool2d(x, (4, 3)),
            F.avg_pool2d(x, 3, divisor_override=2),
        ),
        big(1, 2, 9, 11, dtype=dt, offset=2.0),
    )
    case(
        f"x_instance_norm_{n}",
        lambda x: (
            F.instance_norm(x),
            F.instance_norm(x, use_input_stats=True, weight=torch.ones(2, dtype=x.dtype) * 1.1),
        ),
        big(2, 2, 9, 11, dtype=dt, offset=30.0),
    )
    case(
        f"x_losses_{n}",
        lambda a, b: (
            F.poisson_nll_loss(a, b.abs()),
            F.gaussian_nll_loss(a, b, torch.ones_like(a) * 0.5),
            F.multilabel_soft_margin_loss(a, (b > 0).to(a.dtype)),
            F.margin_ranking_loss(a, b, torch.ones_like(a)),
            F.kl_div(a.log_softmax(1), b.log_softmax(1), log_target=True, reduction="batchmean"),
            F.cosine_embedding_loss(a, b, torch.ones(a.shape[0])),
            F.triplet_margin_loss(a, b, b.flip(0)),
            F.soft_margin_loss(a, b.sign()),
        ),
        t(16, 50, dtype=dt),
        t(16, 50, dtype=dt, seed=1),
    )
    case(
        f"x_special_{n}",
        lambda a: (
            torch.lgamma(a.abs() + 0.5),
            torch.digamma(a.abs() + 0.5),
            torch.erfinv(a.clamp(-0.99, 0.99)),
            torch.i0(a),
            torch.special.i1(a),
            torch.special.ndtri(a.sigmoid()),
            torch.special.log_ndtr(a),
            torch.special.erfcx(a),
            torch.special.xlog1py(a, a.abs()),
            torch.special.entr(a.abs()),
        ),
        t(37, dtype=dt, scale=2),
    )
    case(
        f"x_g_interp_{n}",
        lambda a: (
            F.interpolate(a, scale_factor=2, mode="bicubic") * torch.arange(12, dtype=a.dtype)
        ),
        t(1, 2, 5, 6, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"x_g_grid_{n}",
        lambda x, g: F.grid_sample(x, g, align_corners=False) * 1.5,
        t(1, 2, 6, 7, dtype=dt, grad=True),
        lambda dt=dt: (
            (torch.rand(1, 5, 4, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1)
            .to(dt)
            .requires_grad_()
        ),
        grad=True,
    )
    case(
        f"x_g_pool_{n}",
        lambda x: (F.avg_pool2d(x, 3) * 2, F.max_pool2d(x, 2) * 3, F.adaptive_max_pool2d(x, 3)[0]),
        t(1, 2, 9, 9, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"x_g_losses_{n}",
        lambda a, b: (
            F.smooth_l1_loss(a, b, beta=0.5)
            + F.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean")
            + F.binary_cross_entropy_with_logits(
                a, b.sigmoid(), pos_weight=torch.ones(50, dtype=a.dtype) * 2
            )
        ),
        t(16, 50, dtype=dt, grad=True),
        t(16, 50, dtype=dt, seed=1),
        grad=True,
    )
    case(
        f"x_g_embbag_{n}",
        lambda w, i: F.embedding_bag(i, w, mode="sum") * 1.5,
        t(10, 16, dtype=dt, grad=True),
        lambda: torch.randint(0, 10, (300, 10), generator=torch.Generator().manual_seed(4)),
        grad=True,
    )
    case(
        f"x_g_unfold_{n}",
        lambda x: F.unfold(x, 3) * 1.5,
        t(1, 2, 9, 11, dtype=dt, grad=True),
        grad=True,
    )
    case(
        f"x_g_cumprod_{n}",
        lambda x: x.cumprod(0) * 3 + x.logcumsumexp(0),
        t(40, dtype=dt, scale=0.3, grad=True),
        grad=True,
    )
    case(
        f"x_g_norms_{n}",
        lambda x: (
            F.instance_norm(x) * torch.arange(99, dtype=x.dtype).view(9, 11)
            + F.local_response_norm(x, 2)
        ),
        t(2, 2, 9, 11, dtype=dt, grad=True),
        grad=True,
    )


case(
    "bool_casts",
    lambda x: (x.bool(), x.to(H).bool(), x.to(B).bool(), (x.to(H) != 0), x.bool().to(H) * 0.5),
    lambda: torch.tensor([0.0, -0.0, 1e-8, 1e-40, float("nan"), 1.0, -1e-5]),
)
case(
    "nan_casts",
    lambda x: (
        x.to(H).to(torch.int32),
        x.to(B).to(torch.int64),
        x.to(torch.int32),
        x.to(torch.uint8),
    ),
    lambda: torch.tensor([1.5, -1.5, 3.9, -3.9, 255.9, 256.0, -1.0, 0.0]),
)
case(
    "int_overflow_cast",
    lambda x: (x.to(torch.int8), x.to(torch.uint8), x.to(torch.int16), x.to(H), x.to(B)),
    lambda: torch.tensor([300, -300, 70000, -129, 128, 255, 256, 65535]),
)
case(
    "f64_to_half",
    lambda x: (x.to(H), x.to(B), x.to(F32).to(H), x.to(H).double() - x),
    lambda: torch.tensor(
        [
            1 + 2**-11,
            1 + 2**-11 + 2**-30,
            1 + 2**-8,
            1 + 2**-8 + 2**-30,
            65519.999,
            65520.0,
            3.4e38,
            3.5e38,
            6e-8,
            5.96e-8,
            2.98e-8,
            2.99e-8,
        ],
        dtype=F64,
    ),
)
case(
    "half_scalar_promo",
    lambda a: (
        a + 1,
        a * 2.5,
        a + True,
        (a + 1).dtype,
        (a * torch.tensor(2.5)).dtype,
        (a * torch.tensor([2.5])).dtype,
        (a + torch.tensor(3)).dtype,
        (a.to(B) + a).dtype,
        (a.to(B) + a),
        a.to(B) * torch.tensor(1.1, dtype=F64),
    ),
    t(5, dtype=H),
)
case(
    "half_0d_tensor_math",
    lambda a, s: (a + s, a * s, s * a, a / s, s / a, torch.maximum(a, s.to(H))),
    t(37, dtype=H),
    lambda: torch.tensor(0.1, dtype=F64),
)
case(
    "half_inplace_f32",
    lambda a, b: (
        a.add_(b),
        a.mul_(0.1),
        a.sub_(b, alpha=0.3),
        a.addcmul_(b, b, value=0.1),
        a.lerp_(b.to(H), 0.3),
        a.clamp_(-0.5, 0.5),
    ),
    t(37, dtype=H),
    t(37, dtype=F32, seed=1),
)
case(
    "f32_inplace_half",
    lambda a, b: (a.add_(b), a.mul_(b), a.sub_(b, alpha=0.3), a.copy_(b)),
    t(37, dtype=F32),
    t(37, dtype=H, seed=1),
)
case(
    "half_inplace_int",
    lambda a, i: (a.add_(i), a.mul_(i), a.div_(i), a.add_(i, alpha=2)),
    t(37, dtype=B),
    lambda: torch.arange(1, 38),
)


def main(argv):
    names = [n for n in [*CASES, *MODELS] if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = check(n) if n in CASES else MODELS[n]()
        except Exception as e:  # noqa: BLE001  (a failure of the probe itself)
            line = f"PROBE-CRASH {n}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")


if __name__ == "__main__":
    main(sys.argv[1:])
