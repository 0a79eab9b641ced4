"""Generate docs/ops.md from the OpInfo suite's outcomes.

    python scripts/gen_ops_doc.py --run          # run the full suite, then render
    python scripts/gen_ops_doc.py --report F     # render from an existing report (JSON lines)

``--run`` runs ``tests/test_opinfo.py`` with ``TORCH2XLA_OPINFO=full`` and
``TORCH2XLA_OPS_REPORT`` set, which writes one JSON line per (op, check, dtype) outcome, as
``--shards`` processes in parallel (``TORCH2XLA_OPINFO_SHARD``; 2 take about 10 minutes on
2 cores).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

COLUMNS = [
    ("forward", "float32"),
    ("forward", "float64"),
    ("forward", "bfloat16"),
    ("forward", "int64"),
    ("forward", "bool"),
    ("inplace", "float32"),
    ("grad", "float32"),
    ("grad", "float64"),
    ("grad", "bfloat16"),
    ("error", "any"),
]
HEADERS = [
    "f32",
    "f64",
    "bf16",
    "i64",
    "bool",
    "in-place f32",
    "grad f32",
    "grad f64",
    "grad bf16",
    "errors",
]
BY_REFERENCE = "as accurate as eager against a higher-precision eager result"


def run_suite(report: Path, shards: int) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests" / "test_opinfo.py"),
        "-k",
        "test_op",
    ]
    parts = [report.with_suffix(f".{i}.jsonl") for i in range(shards)]
    procs = []
    for i, part in enumerate(parts):
        part.unlink(missing_ok=True)
        env = dict(
            os.environ,
            TORCH2XLA_OPINFO="full",
            TORCH2XLA_OPS_REPORT=str(part),
            TORCH2XLA_OPINFO_SHARD=f"{i}/{shards}",
        )
        procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT))
    # Failures are data for the doc, so a failing test run is not an error here.
    for p in procs:
        p.wait()
    with report.open("w") as out:
        for part in parts:
            out.write(part.read_text() if part.exists() else "")


def load(report: Path) -> dict[str, dict[tuple[str, str], dict]]:
    """Outcomes by op and (check, dtype); expected failures are matched against the current
    ``XFAILS`` records (the report's own copy may be older)."""
    from opinfo.expectations import xfail_for

    ops: dict[str, dict[tuple[str, str], dict]] = collections.OrderedDict()
    for line in report.read_text().splitlines():
        row = json.loads(line)
        xf = xfail_for(row["op"], row["check"], row["dtype"])
        row["expected"] = None if xf is None else {"cause": xf.cause.name, "reason": xf.reason}
        ops.setdefault(row["op"], {})[(row["check"], row["dtype"])] = row
    return dict(sorted(ops.items()))


def _cell(row: dict | None) -> str:
    if row is None:
        return ""
    if row["status"] == "pass":
        return "≈" if row["reason"] == BY_REFERENCE else "✓"
    if row["status"] == "n/a":
        return "–"
    return "xfail" if row.get("expected") else "**FAIL**"


def _rate(ops, check: str, dtype: str) -> tuple[int, int]:
    rows = [o[(check, dtype)] for o in ops.values() if (check, dtype) in o]
    rows = [r for r in rows if r["status"] != "n/a"]
    return sum(r["status"] == "pass" for r in rows), len(rows)


def _by_reference(ops, check: str, dtype: str) -> int:
    return sum(
        1
        for o in ops.values()
        if (r := o.get((check, dtype))) is not None
        and r["status"] == "pass"
        and r["reason"] == BY_REFERENCE
    )


def _core_coverage() -> str:
    import torch  # noqa: F401
    from test_ops_coverage import classify, core_overloads, view_copy_overloads

    from torch2xla.ops import NOT_LOWERED

    ops = core_overloads()
    kinds = collections.Counter(classify(op) for op in ops)
    lines = [
        (
            f"- {len(ops)} core ATen overloads (`torch.Tag.core`): {kinds['lowered']} lowered "
            f"({kinds['lowered'] / len(ops):.1%}), {kinds['decomposed']} decomposed before they "
            f"reach the backend, {kinds['listed']} not lowered on purpose, {kinds['missing']} "
            "missing."
        ),
    ]
    for record in NOT_LOWERED:
        if any(record.op is op for op in ops):
            lines.append(f"  - `{record.op}`: {record.why.value} ({record.detail})")
    copies = view_copy_overloads()
    kinds = collections.Counter(classify(op) for op in copies)
    lines.append(
        f"- {len(copies)} copying variants of views (`select_copy`, ...): {kinds['lowered']} "
        f"lowered, {kinds['decomposed']} decomposed, {kinds['listed']} not lowered on purpose, "
        f"{kinds['missing']} missing."
    )
    for record in NOT_LOWERED:
        if any(record.op is op for op in copies):
            lines.append(f"  - `{record.op}`: {record.why.value} ({record.detail})")
    return "\n".join(lines)


def render(ops: dict) -> str:
    import jax
    import torch
    from opinfo.expectations import Cause

    out = [
        "# Op coverage",
        "",
        (
            "Generated by `scripts/gen_ops_doc.py` from the OpInfo suite (`tests/test_opinfo.py`, "
            f"full mode) on CPU with torch {torch.__version__} and jax {jax.__version__}. "
            "Do not edit by hand."
        ),
        "",
        (
            'Each op_db entry that runs on CPU is compiled with `torch.compile(fn, backend="xla", '
            'options={"strict": True}, fullgraph=True)` and compared with eager PyTorch: outputs, '
            "dtypes and the inputs after the call, per dtype; the in-place variant in float32; "
            "gradients in float32, float64 and bfloat16 against eager autograd, with their "
            "None-ness exact (eager's None must be None, eager's zeros zeros); and the op's "
            "`error_inputs`: where eager raises, the compiled call must raise eager's error. "
            "Samples are the first few of `sample_inputs` and a few of the wider "
            "`reference_inputs` (see `tests/opinfo/harness.py` for how they are chosen). "
            "Values match within "
            "`torch.testing.assert_close`'s tolerances (float32: rtol 1.3e-6, atol 1e-5), or, where "
            "they do not, when every element is about as close to eager's result in a higher "
            "precision (float64 for float32, float32 for bfloat16, gradients too) as eager's own "
            "(within twice "
            "eager's error or two units in the last place): those cells read ≈. Random ops are "
            "compared by shape and dtype here and by distribution in "
            "`test_opinfo.py::test_random_distribution`."
        ),
        "",
        "## Summary",
        "",
    ]
    fwd, fwd_n = _rate(ops, "forward", "float32")
    grad, grad_n = _rate(ops, "grad", "float32")
    by_ref = sum(
        1
        for o in ops.values()
        for r in o.values()
        if r["status"] == "pass" and r["reason"] == BY_REFERENCE
    )
    out += [
        f"- {len(ops)} op_db entries run on CPU.",
        (
            f"- Forward, float32: **{fwd}/{fwd_n} pass ({fwd / max(fwd_n, 1):.1%})**, "
            f"{_by_reference(ops, 'forward', 'float32')} of them by the higher-precision comparison."
        ),
        (
            f"- Gradients, float32: **{grad}/{grad_n} pass ({grad / max(grad_n, 1):.1%})**, "
            f"{_by_reference(ops, 'grad', 'float32')} of them by the higher-precision comparison."
        ),
    ]
    for (check, dtype), header in zip(COLUMNS, HEADERS):
        if (check, dtype) in (("forward", "float32"), ("grad", "float32")):
            continue
        p, n = _rate(ops, check, dtype)
        what = "ops raise eager's error on every error input" if check == "error" else "pass"
        out.append(f"- {header}: {p}/{n} {what} ({p / max(n, 1):.1%}).")
    out.append(f"- {by_ref} passing cells needed the higher-precision comparison (≈).")
    unexpected = [
        (name, r)
        for name, o in ops.items()
        for r in o.values()
        if r["status"] == "fail" and not r.get("expected")
    ]
    out.append(f"- {len(unexpected)} unexpected failures.")
    out += ["", "Core ATen:", "", _core_coverage(), ""]

    causes = collections.Counter(
        r["expected"]["cause"]
        for o in ops.values()
        for r in o.values()
        if r["status"] == "fail" and r.get("expected")
    )
    if causes:
        out += ["Expected failures by cause (op x check x dtype cells):", ""]
        for cause, count in causes.most_common():
            out.append(f"- {Cause[cause].value}: {count}")
        out.append("")

    out += [
        "## Per op",
        "",
        (
            "✓ pass, ≈ pass against the higher-precision result, xfail expected failure (reason "
            "below), **FAIL** unexpected failure, – no eager sample to compare, blank: dtype or "
            "variant not supported by the op."
        ),
        "",
        "| op | " + " | ".join(HEADERS) + " |",
        "|---|" + "---|" * len(HEADERS),
    ]
    for name, o in ops.items():
        cells = [_cell(o.get(key)) for key in COLUMNS]
        out.append(f"| `{name}` | " + " | ".join(cells) + " |")

    out += ["", "## Failures", ""]
    for name, o in ops.items():
        fails = [r for r in o.values() if r["status"] == "fail"]
        if not fails:
            continue
        out.append(f"- `{name}`")
        by_reason = collections.defaultdict(list)
        for r in fails:
            if r.get("expected"):
                reason = f"{Cause[r['expected']['cause']].value}: {r['expected']['reason']}"
            else:
                reason = "UNEXPECTED: " + r["reason"].replace("|", "/")
            by_reason[reason].append(f"{r['check']} {r['dtype']}")
        for reason, where in by_reason.items():
            out.append(f"  - {', '.join(where)}: {reason}")
    out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, help="outcomes (JSON lines) to render")
    parser.add_argument("--run", action="store_true", help="run the full suite first")
    parser.add_argument("--shards", type=int, default=2, help="parallel processes for --run")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ops.md")
    args = parser.parse_args()
    if args.run:
        report = args.report or Path(tempfile.mkdtemp()) / "opinfo.jsonl"
        if report.exists():
            report.unlink()
        run_suite(report, args.shards)
    elif args.report is None:
        parser.error("give --report PATH or --run")
    else:
        report = args.report
    args.out.write_text(render(load(report)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
