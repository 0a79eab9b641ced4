"""PyTorch's OpInfo database through ``torch.compile(backend="xla")``, against eager PyTorch.

For each op_db entry that runs on CPU: forward values, dtypes and inputs-after-the-call in
float32, float64, bfloat16, int64 and bool (where the op supports them), the in-place variant
in float32, gradients in float32, float64 and bfloat16 against eager autograd with None-ness
exact, on samples from ``sample_inputs`` and ``reference_inputs``; and the op's
``error_inputs``, which must raise as in eager (``opinfo/harness.py``).
Expected failures are typed records in ``opinfo/expectations.py``; an expected failure that
passes fails the test, so the records stay true.

By default a fast subset runs (``DEFAULT_SUBSET``); ``TORCH2XLA_OPINFO=full`` runs every op,
and ``TORCH2XLA_OPINFO_SHARD=i/n`` keeps every n-th op from the i-th (0-based), so n processes
can split the full run. ``TORCH2XLA_OPS_REPORT=path.jsonl`` appends every outcome to that file,
which ``scripts/gen_ops_doc.py`` renders into ``docs/ops.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import pytest
import torch
from opinfo import harness
from opinfo.expectations import DEFAULT_SUBSET, all_records, expect_for, xfail_for

import torch2xla

FULL = os.environ.get("TORCH2XLA_OPINFO", "") == "full"
REPORT = os.environ.get("TORCH2XLA_OPS_REPORT")
OPS = harness.cpu_ops()
NAMES = sorted(OPS) if FULL else list(DEFAULT_SUBSET)
if os.environ.get("TORCH2XLA_OPINFO_SHARD"):
    _index, _count = (int(v) for v in os.environ["TORCH2XLA_OPINFO_SHARD"].split("/"))
    NAMES = NAMES[_index::_count]


@pytest.fixture(scope="module", autouse=True)
def _no_persistent_cache():
    """The suite compiles thousands of single-use programs: keep them out of the persistent
    compilation cache (disk and time for nothing), then restore the cache's setting exactly."""
    from torch2xla.guards import _persistent

    saved = _persistent._explicit
    torch2xla.set_persistent_cache(None)
    yield
    _persistent._explicit = saved
    _persistent.activate()


def _record(outcomes: list[harness.Outcome]) -> None:
    if not REPORT:
        return
    with open(REPORT, "a") as f:
        for o in outcomes:
            xf = xfail_for(o.op, o.check, o.dtype)
            row = dataclasses.asdict(o)
            row["expected"] = None if xf is None else {"cause": xf.cause.name, "reason": xf.reason}
            f.write(json.dumps(row) + "\n")


@pytest.mark.parametrize("name", NAMES)
def test_op(name):
    outcomes = harness.run_op(OPS[name], expect_for(name))
    _record(outcomes)
    problems = []
    for o in outcomes:
        xf = xfail_for(name, o.check, o.dtype)
        if o.status == harness.FAIL and xf is None:
            problems.append(f"{o.check} {o.dtype}: {o.reason}")
        elif o.status == harness.PASS and xf is not None:
            problems.append(
                f"{o.check} {o.dtype}: passes, but is listed as an expected failure "
                f"({xf.reason}); remove the XFail record"
            )
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_records_name_real_ops():
    names = [r.op for r in all_records()]
    unknown = sorted(set(names) - set(OPS))
    assert not unknown, f"expectation records for ops not in op_db (on CPU): {unknown}"
    missing = sorted(set(DEFAULT_SUBSET) - set(OPS))
    assert not missing, f"DEFAULT_SUBSET names ops not in op_db: {missing}"
    assert len(set(DEFAULT_SUBSET)) == len(DEFAULT_SUBSET)


def test_harness_compares_the_none_ness_of_gradients(monkeypatch):
    """Eager's zeros for round's input (a path of zero derivative) are not None: a gradient
    missing where eager gives zeros fails, as does one given where eager gives None."""
    from torch2xla.runtime import _program

    monkeypatch.setattr(
        _program.XlaProgram,
        "connected",
        lambda self, diff_in: tuple(frozenset() for _ in self._graph_diff_out),
    )
    outcomes = harness.run_op(OPS["round"], expect_for("round"))
    grads = [o for o in outcomes if o.check == harness.GRAD]
    assert grads and all(
        o.status == harness.FAIL and "is None where eager's is a tensor" in o.reason for o in grads
    )
    monkeypatch.setattr(
        _program.XlaProgram,
        "connected",
        lambda self, diff_in: tuple(frozenset(range(len(diff_in))) for _ in self._graph_diff_out),
    )
    # Its float target reaches the loss only through comparisons: eager gives it None.
    name = "nn.functional.hinge_embedding_loss"
    outcomes = harness.run_op(OPS[name], expect_for(name))
    failed = [o for o in outcomes if o.check == harness.GRAD and o.status == harness.FAIL]
    assert failed and "is a tensor where eager's is None" in failed[0].reason


def test_harness_requires_an_error_where_eager_raises(monkeypatch):
    monkeypatch.setattr(harness, "_compile", lambda fn: lambda *args: None)
    (outcome,) = harness.run_errors(OPS["cat"])
    assert outcome.status == harness.FAIL and "no error, where eager raises" in outcome.reason


def test_a_wrong_lowering_fails_the_harness(monkeypatch):
    """The harness is not vacuous: a lowering that returns wrong values is caught."""
    from torch2xla.ops import LOWERINGS

    op = torch.ops.aten.exp.default
    monkeypatch.setitem(LOWERINGS, op, lambda x: x + 1)
    outcomes = harness.run_op(OPS["exp"], expect_for("exp"))
    failed = {(o.check, o.dtype) for o in outcomes if o.status == harness.FAIL}
    assert ("forward", "float32") in failed and ("grad", "float64") in failed


# -- random ops: distributions against eager's ------------------------------------------------
N = 200_000


@dataclasses.dataclass(frozen=True)
class Distribution:
    """Draws from ``fn(*make())`` summarized by ``stats``; XLA's and eager's summaries must agree
    within ``tol`` (a few standard errors at N draws)."""

    name: str
    fn: Callable
    make: Callable[[], tuple]
    stats: Callable[[torch.Tensor], dict[str, float]]
    tol: float


def _moments(x: torch.Tensor) -> dict[str, float]:
    x = x.double()
    return {"mean": x.mean().item(), "std": x.std().item()}


def _quartiles(x: torch.Tensor) -> dict[str, float]:
    q = torch.quantile(x.double()[:100_000], torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    return {"q1": q[0].item(), "median": q[1].item(), "q3": q[2].item()}


def _frequencies(k: int) -> Callable[[torch.Tensor], dict[str, float]]:
    def stats(x: torch.Tensor) -> dict[str, float]:
        counts = torch.bincount(x.reshape(-1).long(), minlength=k).double() / x.numel()
        return {f"p{i}": counts[i].item() for i in range(k)}

    return stats


def _dropout_stats(x: torch.Tensor) -> dict[str, float]:
    kept = x[x != 0]
    return {
        "zero_fraction": (x == 0).double().mean().item(),
        "kept_value": kept.double().mean().item(),
    }


def _channel_dropout_stats(x: torch.Tensor) -> dict[str, float]:
    per_channel = x.reshape(x.shape[0] * x.shape[1], -1)
    whole = ((per_channel == 0).all(1) | (per_channel != 0).all(1)).double().mean().item()
    return {"whole_channels": whole, "zero_fraction": (x == 0).double().mean().item()}


def _rrelu_slopes(x: torch.Tensor) -> dict[str, float]:
    slopes = x.double() / -2.0
    return {"mean": slopes.mean().item(), "min": slopes.min().item(), "max": slopes.max().item()}


_PROBS = torch.tensor([0.1, 0.2, 0.3, 0.4])

DISTRIBUTIONS = [
    Distribution("rand", lambda: torch.rand(N), tuple, _moments, 0.01),
    Distribution("randn", lambda: torch.randn(N, dtype=torch.float64), tuple, _moments, 0.02),
    Distribution(
        "rand_like_bf16",
        lambda x: torch.rand_like(x),
        lambda: (torch.empty(N, dtype=torch.bfloat16),),
        _moments,
        0.01,
    ),
    Distribution(
        "randint", lambda: torch.randint(3, 7, (N,)), tuple, lambda x: _frequencies(7)(x), 0.01
    ),
    Distribution("bernoulli", torch.bernoulli, lambda: (torch.full((N,), 0.3),), _moments, 0.01),
    Distribution(
        "normal",
        lambda m, s: (torch.normal(m, s) - m) / s,
        lambda: (torch.linspace(-5, 5, N), torch.linspace(0.5, 2, N)),
        _moments,
        0.02,
    ),
    Distribution(
        "uniform_", lambda x: x.uniform_(-2, 3), lambda: (torch.empty(N),), _moments, 0.03
    ),
    Distribution(
        "exponential_", lambda x: x.exponential_(2.0), lambda: (torch.empty(N),), _moments, 0.01
    ),
    Distribution(
        "cauchy_", lambda x: x.cauchy_(1.0, 2.0), lambda: (torch.empty(N),), _quartiles, 0.08
    ),
    Distribution(
        "log_normal_",
        lambda x: x.log_normal_(1.0, 0.5).log(),
        lambda: (torch.empty(N),),
        _moments,
        0.01,
    ),
    Distribution(
        "geometric_", lambda x: x.geometric_(0.3), lambda: (torch.empty(N),), _moments, 0.05
    ),
    Distribution(
        "multinomial",
        lambda p: torch.multinomial(p, N, replacement=True),
        lambda: (_PROBS,),
        _frequencies(4),
        0.01,
    ),
    Distribution(
        "multinomial_no_replacement",
        lambda p: torch.multinomial(p.expand(N // 4, 4), 2)[:, 0],
        lambda: (_PROBS,),
        _frequencies(4),
        0.02,
    ),
    Distribution(
        "dropout",
        lambda x: torch.nn.functional.dropout(x, 0.3, training=True),
        lambda: (torch.ones(N),),
        _dropout_stats,
        0.01,
    ),
    Distribution(
        "dropout2d",
        lambda x: torch.nn.functional.dropout2d(x, 0.5, training=True),
        lambda: (torch.ones(64, 256, 4, 4),),
        _channel_dropout_stats,
        0.05,
    ),
    Distribution(
        "rrelu",
        lambda x: torch.nn.functional.rrelu(x, 0.1, 0.3, training=True),
        lambda: (torch.full((N,), -2.0),),
        _rrelu_slopes,
        0.01,
    ),
]


@pytest.mark.parametrize("case", DISTRIBUTIONS, ids=lambda c: c.name)
def test_random_distribution(case):
    torch.manual_seed(0)
    eager = case.fn(*[t.clone() for t in case.make()])
    torch.manual_seed(0)
    with harness._count_xla_calls() as calls:
        xla = torch.compile(case.fn, backend="xla", options={"strict": True}, fullgraph=True)(
            *[t.clone() for t in case.make()]
        )
        assert calls() > 0, "the draws did not come from an XLA program"
    assert xla.shape == eager.shape and xla.dtype == eager.dtype
    got, want = case.stats(xla), case.stats(eager)
    for key, value in want.items():
        assert abs(got[key] - value) <= case.tol * max(1.0, abs(value)), (key, got, want)


def test_randperm_is_a_permutation():
    fn = torch.compile(lambda: torch.randperm(1000), backend="xla", options={"strict": True})
    torch.manual_seed(0)
    perm = fn()
    assert perm.dtype == torch.int64
    assert torch.equal(perm.sort().values, torch.arange(1000))
    assert not torch.equal(perm, torch.arange(1000))


def test_random_draws_repeat_under_manual_seed():
    fn = torch.compile(
        lambda x: torch.nn.functional.dropout(x, 0.5) + torch.randn_like(x),
        backend="xla",
        options={"strict": True},
    )
    x = torch.ones(1000)
    torch.manual_seed(1)
    a, b = fn(x), fn(x)
    torch.manual_seed(1)
    c = fn(x)
    assert torch.equal(a, c)
    assert not torch.equal(a, b)
