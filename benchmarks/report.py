"""Writes ``docs/benchmarks.md`` and ``docs/benchmarks.png`` from ``benchmarks/results/*.json``.

    python benchmarks/report.py

The tables are generated; the hand-written analysis (where the time goes, gaps to the targets)
lives in ``benchmarks/analysis.md`` and is appended as it is.
"""

from __future__ import annotations

import json
import math
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOCS = HERE.parent / "docs"
MODES = ("eager", "inductor", "xla")
TASKS = {"infer": "inference (eval, no_grad)", "train": "training step (fwd, bwd, SGD)"}


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _machine(m: dict) -> str:
    parts = [f"{k}: {v}" for k, v in m.items()]
    return "; ".join(parts)


def overhead_section(result: dict) -> list[str]:
    inf, tr = result["inference_us"], result["training_us"]
    lines = [
        f"### Per-call overhead ({result['device']})",
        "",
        (
            f"`python benchmarks/overhead.py --breakdown`: a function of 8 floats (`x * y + 1`), "
            f"{result['rounds']} interleaved rounds of {result['calls']} calls, 1 thread; "
            "microseconds per call, median [q1, q3]. `dynamo` is a backend that runs Dynamo's graph "
            "as it is (the floor every backend pays); `jax.jit` the same arithmetic as a jitted JAX "
            "function called back to back as the others (`each awaited`: each result awaited). The training step is Linear(8, 8) forward and backward."
        ),
        "",
        f"Machine: {_machine(result['machine'])}",
        "",
        "| mode | inference | training step |",
        "|---|---|---|",
    ]
    # (results written before session 28 awaited every jax.jit call: their row says so)
    awaited_only = "jax.jit, each awaited" not in inf
    for mode in ("eager", "inductor", "xla", "dynamo", "jax.jit", "jax.jit, each awaited"):
        cells = []
        for table in (inf, tr):
            s = table.get(mode) or (table.get("identity") if mode == "dynamo" else None)
            cells.append(f"{s['median']:.1f} [{s['q1']:.1f}, {s['q3']:.1f}]" if s else "-")
        if awaited_only and mode.startswith("jax.jit"):
            if mode == "jax.jit":
                lines.append(f"| jax.jit, each awaited | {cells[0]} | {cells[1]} |")
            continue
        lines.append(f"| {mode} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        (
            f"xla / inductor: inference {inf['xla']['median'] / inf['inductor']['median']:.2f}x, "
            f"training {tr['xla']['median'] / tr['inductor']['median']:.2f}x. "
            f"xla / eager, training step: {tr['xla']['median'] / tr['eager']['median']:.2f}x."
        ),
        "",
    ]
    if "breakdown_us" in result:
        lines += ["xla's call, piece by piece (median µs):", "", "| piece | µs |", "|---|---|"]
        lines += [f"| {k} | {v:.2f} |" for k, v in result["breakdown_us"].items()]
        lines.append("")
    return lines


def suite_section(result: dict, title: str) -> list[str]:
    lines = [f"### {title}", "", f"Machine: {_machine(result['machine'])}", ""]
    runs = result["runs"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for run in runs:
        groups.setdefault((run["task"], run["dtype"]), []).append(run)
    for (task, dtype), group in groups.items():
        lines += [
            f"#### {TASKS.get(task, task)}, {dtype}",
            "",
            (
                "Steady time per step in ms, median (q1-q3); speedup = other mode's median / xla's; "
                "first call in s (compilation included); rel diff = ||mode - eager|| / ||eager|| "
                "over the first call's outputs (training: the loss and every gradient, as one "
                "vector), for inductor and xla."
            ),
            "",
        ]
        cuda = result["device"].startswith("cuda")
        head = (
            "| case | eager | inductor | xla | xla vs eager | xla vs inductor | first call e/i/x |"
        )
        head += " rel diff i/x |" + (" step peak MiB e/i/x |" if cuda else "") + " notes |"
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        ve, vi = [], []
        for run in group:
            if "error" in run:
                lines.append(f"| {run['case']} | error: {_one_line(run['error'])} |")
                continue
            modes = run["modes"]
            cells = [run["case"]]
            for mode in MODES:
                s = modes.get(mode, {}).get("steady_ms")
                cells.append(f"{s['median']:.3g} ({s['q1']:.3g}-{s['q3']:.3g})" if s else "error")
            se = run.get("speedup_vs_eager", {}).get("xla")
            si = run.get("speedup_vs_inductor", {}).get("xla")
            ve.append(se)
            vi.append(si)
            cells += [_fmt(se) + "x" if se else "-", _fmt(si) + "x" if si else "-"]
            cells.append("/".join(_fmt(modes.get(m, {}).get("first_call_s"), ".1f") for m in MODES))
            cells.append(
                "/".join(_fmt(modes.get(m, {}).get("rel_l2_diff"), ".0e") for m in MODES[1:])
            )
            if cuda:
                cells.append(
                    "/".join(_fmt(modes.get(m, {}).get("step_peak_mb"), ".0f") for m in MODES)
                )
            cells.append(_notes(run))
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            (
                f"Geomean of xla's speedup: {_fmt(_geomean(ve))}x over eager, "
                f"{_fmt(_geomean(vi))}x over inductor."
            ),
            "",
        ]
    mfu = [run for run in runs if "mfu" in run]
    for run in mfu:
        m = run["mfu"]
        cells = [
            f"{mode} {m[mode]['tflops']:.0f} TFLOP/s = {100 * m[mode]['mfu']:.1f}% MFU"
            for mode in MODES
            if mode in m
        ]
        lines += [
            f"MFU, {run['case']} bf16 training ({m['gpu']}, {m['peak_tflops']} TFLOP/s "
            f"dense bf16 peak, 6 x params x tokens): " + "; ".join(cells),
            "",
        ]
    return lines


def _notes(run: dict) -> str:
    notes = [run["note"]] if run.get("note") else []
    if run.get("cudnn_benchmark"):
        notes.append("cudnn.benchmark on")
    for mode in MODES:
        info = run["modes"].get(mode, {})
        if "error" in info:
            notes.append(f"{mode} failed: {_one_line(info['error'])}")
        if info.get("graph_breaks"):
            notes.append(f"{mode}: {info['graph_breaks']} graph breaks")
        if info.get("fallbacks"):
            notes.append(f"{mode}: eager fallback ({len(info['fallbacks'])} graphs)")
    return "; ".join(notes)


def _one_line(text: str) -> str:
    last = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (last[-1] if last else text)[:160].replace("|", "/")


def plot(results: dict[str, dict], path: pathlib.Path) -> bool:
    """Bar chart of speedups over eager; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(results), 1, figsize=(12, 4 * len(results)), squeeze=False)
    for ax, (title, result) in zip(axes[:, 0], results.items()):
        runs = [r for r in result["runs"] if "error" not in r]
        labels = [f"{r['case']}\n{r['task']} {r['dtype']}" for r in runs]
        width = 0.38
        for k, mode in enumerate(("inductor", "xla")):
            ys = [r.get("speedup_vs_eager", {}).get(mode, 0.0) for r in runs]
            xs = [i + (k - 0.5) * width for i in range(len(runs))]
            ax.bar(xs, ys, width, label=mode)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(runs)), labels, fontsize=7)
        ax.set_ylabel("speedup over eager")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def ddp_section(res: dict, name: str = "") -> list[str]:
    """DDP step time and 2-vs-1 scaling efficiency (benchmarks/ddp_scaling.py); ``name``: the
    results file, named under the heading with the run's options."""
    extra = res.get("extra") or {}
    options = [
        *([extra["dtype"]] if extra.get("dtype") else []),
        *(["one graph (optimize_ddp=False)"] if extra.get("no_ddp_optimizer") else []),
        *(
            [f"split_backward={extra['split_backward']}"]
            if extra.get("split_backward") is not None
            else []
        ),
    ]
    lines = [
        (
            f"### DDP scaling: {res['case']} on {res['device']}, buckets of "
            f"{res.get('bucket_cap_mb', 25):g} MB"
        ),
        "",
        *([f"`{name}`{': ' + ', '.join(options) if options else ''}", ""] if name else []),
        "Weak scaling (same per-rank batch): efficiency = step time with 1 rank / with 2 ranks.",
        "",
        "| mode | 1 rank ms/step | 2 ranks ms/step | efficiency | first step s (1 / 2) |",
        "|---|---|---|---|---|",
    ]
    runs = res["runs"]
    for mode in ("eager", "inductor", "xla"):
        one, two = runs.get(f"{mode}/1"), runs.get(f"{mode}/2")
        if one and two:
            lines.append(
                f"| {mode} | {one['median_ms']:.2f} | {two['median_ms']:.2f} | "
                f"{one['efficiency_2v1']:.2f} | {one['first_s']:.1f} / {two['first_s']:.1f} |"
            )
        elif mode in res.get("failed", {}):
            lines.append(f"| {mode} | failed: {res['failed'][mode]} | | | |")
    if res.get("command"):
        lines += ["", f"Command: `{res['command']}`"]
    return [*lines, ""]


def write() -> pathlib.Path:
    DOCS.mkdir(exist_ok=True)
    lines = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/report.py` from `benchmarks/results/*.json`. Reproduce:",
        "",
        "```bash",
        "python benchmarks/overhead.py --breakdown --json benchmarks/results/overhead.json",
        "python benchmarks/suite.py                 # CPU, writes benchmarks/results/cpu.json",
        "python benchmarks/suite.py --device cuda   # GPU, writes benchmarks/results/cuda.json",
        "python benchmarks/report.py                # this page and docs/benchmarks.png",
        "```",
        "",
        (
            "Protocol: eager, inductor and xla alternate in a shuffled order every round, in one "
            "process per (model, task, dtype); times are medians over rounds. On CPU torch and XLA "
            "both run on one thread. On GPU fp32 allows TF32 for every mode, and bf16 means "
            "`torch.autocast(dtype=torch.bfloat16)` around forward and loss."
        ),
        "",
    ]
    plots = {}
    for name, title in (("overhead.json", None), ("overhead_cuda.json", None)):
        res = _load(name)
        if res:
            lines += overhead_section(res)
    for name, title in (("cpu.json", "CPU"), ("cuda.json", "GPU")):
        res = _load(name)
        if res:
            lines += suite_section(res, title)
            plots[title] = res
    # ddp_scaling_{cpu,gpu}.json, then variants (ddp_scaling_cpu_<tag>.json, e.g. other buckets)
    ddp = sorted(p.name for p in RESULTS.glob("ddp_scaling_*.json"))
    for name in sorted(ddp, key=lambda n: (n.count("_") > 2, n)):
        res = _load(name)
        if res:
            lines += ddp_section(res, name)
    png = DOCS / "benchmarks.png"
    if plots and plot(plots, png):
        lines += ["![speedups over eager](benchmarks.png)", ""]
    analysis = HERE / "analysis.md"
    if analysis.exists():
        lines += [analysis.read_text().rstrip(), ""]
    out = DOCS / "benchmarks.md"
    out.write_text("\n".join(lines))
    return out


if __name__ == "__main__":
    print(write())
