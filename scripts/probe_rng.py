"""Probe random ops and torch.distributions: compiled draws differ from torch's generator
(docs/design.md, "Randomness"), so each case compares what must agree with eager instead of
values: dtype, shape, errors, support (min/max) and statistics (mean, variance, a tail
fraction) within 5 standard errors of eager's own draws, with fixed seeds.

    PYTHONPATH=. python scripts/probe_rng.py [substring ...]

``case(name, f, make, stats)``: ``make()`` builds fresh inputs; ``stats(out)`` gives a dict of
``name -> (value, standard error)`` (or ``None`` where only dtype, shape and errors count).
Prints ``ok`` / ``DIFF`` / ``CRASH`` per case.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import warnings

import torch
import torch.distributions as D
import torch.nn.functional as F

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import run

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
CASES: dict = {}
N = 100_000


def moments(out, tail: float | None = None) -> dict:
    """Mean and variance of ``out`` (as float64), and the fraction beyond ``tail`` std."""
    x = out.detach().double().flatten()
    if x.is_complex():
        x = torch.view_as_real(x).flatten()
    n = x.numel()
    sd = x.std().item()
    m4 = x.sub(x.mean()).pow(4).mean().item()  # (the variance's standard error, any shape)
    stats = {
        "mean": (x.mean().item(), sd / math.sqrt(n)),
        "var": (x.var().item(), max(math.sqrt(max(m4 - sd**4, 0.0) / n), sd**2 / n)),
        "min": (x.min().item(), None),
        "max": (x.max().item(), None),
    }
    if tail is not None:
        p = (x.sub(x.mean()).abs() > tail * sd).double().mean().item()
        stats["tail"] = (p, math.sqrt(max(p, 1 / n) / n))
    return stats


def case(name, f, make, stats=moments):
    CASES[name] = (f, make, stats)


def _observe(f, make, stats, compiled: bool):
    torch._dynamo.reset()
    torch.manual_seed(0)
    fn = torch.compile(f, backend="xla") if compiled else f
    try:
        out = fn(*make())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        return ("E", type(e), str(e).strip().split("\n")[0][:120], str(e))
    outs = out if isinstance(out, tuple | list) else (out,)
    return ("T", [(o.dtype, tuple(o.shape), stats(o) if stats else None) for o in outs])


def compare(name, entry) -> str:
    f, make, stats = entry
    exp = _observe(f, make, stats, False)
    got = _observe(f, make, stats, True)
    if exp[0] == "E" or got[0] == "E":
        if exp[0] != got[0]:
            what = [o[:3] if o[0] == "E" else "values" for o in (got, exp)]
            return f"DIFF {name}: {what[0]} (xla) vs {what[1]} (eager)"
        if not issubclass(got[1], exp[1]) or exp[2][:50] not in got[3]:
            return (
                f"DIFF {name}: {got[1].__name__}: {got[2]!r} (xla) vs {exp[1].__name__}: {exp[2]!r}"
            )
        return f"ok {name}"
    for i, ((dg, sg, stg), (de, se, ste)) in enumerate(zip(got[1], exp[1])):
        if dg != de or sg != se:
            return f"DIFF {name}[{i}]: {dg} {sg} (xla) vs {de} {se} (eager)"
        for key, (ve, err) in (ste or {}).items():
            vg = stg[key][0]
            if err is None:  # (support: nonnegative stays so, below 1 stays below 1)
                if key == "min" and ve >= 0 > vg:
                    return f"DIFF {name}[{i}]: min {vg} < 0 (eager {ve})"
                if key == "max" and 0.99 < ve < 1 <= vg:
                    return f"DIFF {name}[{i}]: max {vg} reaches 1 (eager {ve})"
                continue
            if abs(vg - ve) > 5 * math.sqrt(2) * max(err, 1e-12):
                return f"DIFF {name}[{i}]: {key} {vg:.6g} (xla) vs {ve:.6g} (eager, se {err:.2g})"
    return f"ok {name}"


def z(*shape, dtype=torch.float32):
    return lambda: (torch.zeros(*shape, dtype=dtype),)


def full(v, n=N, dtype=torch.float32):
    return lambda: (torch.full((n,), v, dtype=dtype),)


tails = lambda o: moments(o, tail=3.0)

# -- factories and *_like, every float dtype ----------------------------------------------------------
for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
    n = str(dt).split(".")[1]
    case(f"rand_{n}", lambda x, dt=dt: torch.rand(N, dtype=dt) + x, z(1, dtype=dt))
    case(f"randn_{n}", lambda x, dt=dt: torch.randn(N, dtype=dt) + x, z(1, dtype=dt), tails)
    case(f"rand_like_{n}", torch.rand_like, z(N, dtype=dt))
    case(f"randn_like_{n}", torch.randn_like, z(N, dtype=dt), tails)
    case(f"uniform__{n}", lambda x: x.uniform_(-3, 5), z(N, dtype=dt))
    case(f"normal__{n}", lambda x: x.normal_(2, 3), z(N, dtype=dt), tails)
    case(f"normal_tensor_{n}", lambda m: torch.normal(m, 2.0), z(N, dtype=dt), tails)
    case(f"exponential_{n}", lambda x: x.exponential_(2.0), z(N, dtype=dt))
    case(f"cauchy_{n}", lambda x: x.cauchy_().clamp(-10, 10), z(N, dtype=dt))
    case(f"log_normal_{n}", lambda x: x.log_normal_(0, 0.5), z(N, dtype=dt))
    case(f"geometric_{n}", lambda x: x.geometric_(0.3), z(N, dtype=dt))
    case(f"bernoulli_small_p_{n}", torch.bernoulli, full(1e-3, 10 * N, dt))
    case(f"poisson_{n}", torch.poisson, full(3.5, N, dt))
for dt in (torch.complex64, torch.complex128):
    n = str(dt).split(".")[1]
    case(f"rand_{n}", lambda x, dt=dt: torch.rand(N, dtype=dt) + x, z(1, dtype=dt))
    case(f"randn_{n}", lambda x, dt=dt: torch.randn(N, dtype=dt) + x, z(1, dtype=dt))
for dt in (torch.uint8, torch.int8, torch.int32, torch.int64, torch.bool):
    n = str(dt).split(".")[1]
    hi = 2 if dt == torch.bool else 100
    case(f"randint_{n}", lambda x, dt=dt, hi=hi: torch.randint(0, hi, (N,), dtype=dt), z(1))
    case(f"randint_like_{n}", lambda x, hi=hi: torch.randint_like(x, hi), z(N, dtype=dt))
    case(f"bernoulli__{n}", lambda x: (x * 1).bernoulli_(0.3), z(N, dtype=dt))
case("randint_default_dtype", lambda x: torch.randint(10, (N,)) + x, z(1, dtype=torch.int64))
case("randint_int64_extremes", lambda: torch.randint(-(2**63), 2**63 - 1, (N,)), lambda: ())
case("normal_broadcast", torch.normal, lambda: (torch.zeros(300, 1), torch.ones(300)))
case("normal_float_float", lambda: torch.normal(2.0, 3.0, size=(N,)), lambda: ())

# -- errors eager raises ------------------------------------------------------------------------------
case("randint_uint8_out_of_bounds", lambda: torch.randint(0, 257, (3,), dtype=torch.uint8), tuple)
case("randint_like_int8_low", lambda x: torch.randint_like(x, -200, 0), z(3, dtype=torch.int8))
case("uniform_to_inf", lambda x: x.uniform_(0, float("inf")), z(3))
case("uniform_half_to", lambda x: x.uniform_(0, 70000), z(3, dtype=torch.float16))
case("uniform_from_gt_to", lambda x: x.uniform_(2, 1), z(3))
case("bernoulli_p_tensor_out", torch.bernoulli, full(1.5, 3))
case("normal_std_tensor_neg", lambda m: torch.normal(m, -torch.ones(3)), z(3))
case("poisson_negative", torch.poisson, full(-1.0, 3))
case("multinomial_n_gt_k", lambda p: torch.multinomial(p, 3), lambda: (torch.ones(2),))
case("multinomial_int", lambda p: torch.multinomial(p, 1), lambda: (torch.ones(2).long(),))
case("randperm_half_n", lambda: torch.randperm(2050, dtype=torch.float16), tuple)
# (Dynamo raises its TorchRuntimeError while tracing, whatever the backend: not ours)
case("dropout_p_gt_1", lambda x: F.dropout(x, 1.5), z(3))

# -- permutations, multinomial ------------------------------------------------------------------------
for n in (0, 1, 1000):
    case(f"randperm_{n}", lambda n=n: torch.randperm(n).sort().values, tuple, None)
_W = torch.tensor([[0.0, 1.0, 3.0, 0.0], [2.0, 0.0, 2.0, 4.0]])
case("multinomial_2d_rep", lambda p: torch.multinomial(p, N, True).float(), lambda: (_W,))
case("multinomial_norep", lambda p: torch.multinomial(p, 2).sort(-1).values, lambda: (_W,), None)
case(
    "multinomial_f64_tiny",
    lambda p: torch.multinomial(p, N, True).double(),
    lambda: (torch.tensor([1e-300, 3e-300], dtype=torch.float64),),
)

# -- dropout ----------------------------------------------------------------------------------------
for name, fn in {
    "dropout": lambda x: F.dropout(x, 0.3),
    "dropout_eval": lambda x: F.dropout(x, 0.3, training=False),
    "dropout_p0": lambda x: F.dropout(x, 0.0),
    "dropout_p1": lambda x: F.dropout(x, 1.0),
    "dropout_inplace": lambda x: F.dropout(x * 1, 0.3, inplace=True),
    "dropout1d": lambda x: F.dropout1d(x.view(100, 1000, 1), 0.3),
    "dropout2d": lambda x: F.dropout2d(x.view(100, 1000, 1, 1), 0.3),
    "dropout3d": lambda x: F.dropout3d(x.view(100, 1000, 1, 1, 1), 0.3),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, True),
    "feature_alpha_dropout": lambda x: F.feature_alpha_dropout(x.view(100, 1000, 1), 0.3, True),
}.items():
    case(name, fn, lambda: (torch.randn(N, generator=torch.Generator().manual_seed(1)),))

# -- distributions ----------------------------------------------------------------------------------
_P = torch.tensor([0.3, -0.2, 0.5])
for name, make in {
    "Normal": lambda p: D.Normal(p, p.exp()),
    "Categorical": lambda p: D.Categorical(logits=p),
    "Bernoulli": lambda p: D.Bernoulli(logits=p),
    "Beta": lambda p: D.Beta(p.exp(), 2.0),
    "Gamma": lambda p: D.Gamma(p.exp(), 1.5),
    "Dirichlet": lambda p: D.Dirichlet(p.exp()),
    "MultivariateNormal": lambda p: D.MultivariateNormal(p, torch.eye(3) * 2),
}.items():
    case(f"dist_{name}_sample", lambda p, m=make: m(p).sample((N // 10,)).float(), lambda: (_P,))
    case(
        f"dist_{name}_log_prob",
        lambda p, m=make: m(p).log_prob(m(p).mean.detach().clamp(0.05, 0.95)),
        lambda: (_P.double(),),
        lambda o: {"values": (o.sum().item(), 1e-9)},
    )

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, compare))
