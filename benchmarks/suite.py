"""The benchmark suite: models x tasks x modes (eager, inductor, xla) interleaved in one run.

    python benchmarks/suite.py                  # CPU: every CPU case, inference and training
    python benchmarks/suite.py --device cuda    # GPU: every case, fp32 (TF32 on) and bf16 autocast

Each (case, task, dtype) runs in a fresh subprocess, so compile caches and JAX's memory
statistics belong to it alone; inside it the three modes alternate in a shuffled order, round
after round. Per mode it records the first call's time (compilation included), the median and
spread of steady per-step times, peak memory (CUDA: torch's allocator plus JAX's), the largest
difference from eager on the first call (inference outputs; training loss and gradients), and
the fallback warnings and graph breaks seen. Results go to ``benchmarks/results/<device>.json``,
and ``docs/benchmarks.md`` with a plot is rewritten from every results file present
(``benchmarks/report.py``).

Protocol: on CPU one thread for torch and XLA (``torch.set_num_threads(1)``,
``--xla_cpu_multi_thread_eigen=false``); a training step is ``zero_grad``, forward, loss,
backward and an eager ``SGD(momentum=0.9)`` step, identical in every mode.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import models
import torch

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
MARK = "@@SUITE-RESULT@@"

# Dense bf16 peak (TFLOP/s) by GPU name, for MFU.
PEAK_BF16_TFLOPS = {"H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H200": 989.0, "A100": 312.0}


# --- one case, in its own process -----------------------------------------------------------


def _setup(case: str, dtype: str, device: str):
    if device.startswith("cuda"):
        _common.allow_tf32()  # fp32 means TF32 allowed, for every mode
        # CNN users' usual setting (torchvision's and timm's training scripts): cuDNN picks its
        # convolution algorithms by timing them, as XLA's autotuner does for ours.
        torch.backends.cudnn.benchmark = os.environ.get("CUDNN_BENCHMARK", "0") == "1"
    base, inputs, loss_fn = models.build(case, device)
    autocast = (
        (lambda: torch.autocast(device.split(":")[0], dtype=torch.bfloat16))
        if dtype == "bf16"
        else contextlib.nullcontext
    )
    return base, inputs, loss_fn, autocast


def run_one(
    case: str,
    task: str,
    dtype: str,
    device: str,
    rounds: int,
    target_s: float,
    options: dict | None = None,
) -> dict:
    cuda = device.startswith("cuda")
    base, inputs, loss_fn, autocast = _setup(case, dtype, device)
    result: dict = {"case": case, "task": task, "dtype": dtype, "device": device, "modes": {}}
    if cuda:
        result["cudnn_benchmark"] = torch.backends.cudnn.benchmark
    result["params"] = sum(p.numel() for p in base.parameters())
    steps, firsts = {}, {}
    for mode in _common.MODES:  # eager first: the others are compared with its first call
        model = copy.deepcopy(base)
        try:
            kw = {"options": options} if options and mode == "xla" else None
            step, first = _make_step(model, mode, task, inputs, loss_fn, autocast, device, kw)
            entry = _first_call(first, device)
            steps[mode] = step
            firsts[mode] = entry.pop("value")
            result["modes"][mode] = entry
        except Exception as e:  # noqa: BLE001 - recorded in the results and the report
            result["modes"][mode] = {"error": _error(e)}
    if "eager" in firsts:
        for mode, value in firsts.items():
            result["modes"][mode].update(_diff(value, firsts["eager"]))
    for step in steps.values():  # warm up (a second call may still compile, e.g. backward)
        step(), step()
    _common.sync(device)
    per_sample = {}
    for mode, step in steps.items():
        one = _common.time_calls(step, 1, device)
        per_sample[mode] = max(1, min(1000, math.ceil(target_s / max(one, 1e-6))))
    samples = _interleave(steps, per_sample, rounds, device)
    for mode, times in samples.items():
        info = result["modes"][mode]
        info["steps_per_sample"] = per_sample[mode]
        info["steady_ms"] = {k: v * 1e3 for k, v in _common.summary(times).items()}
    if cuda:  # xla's memory is measured in a process of its own (memory_only)
        for mode, step in steps.items():
            if mode != "xla":
                result["modes"][mode].update(_memory(step, mode, base))
    _speedups(result)
    case_info = models.CASES[case]
    if cuda and dtype == "bf16" and task == "train" and case_info.tokens and "xla" in steps:
        result["mfu"] = _mfu(result, case_info.tokens, base)
    return result


def memory_only(case: str, task: str, dtype: str, device: str, options: dict | None = None) -> dict:
    """xla's step memory, in a process whose compilations all hit the persistent compilation
    cache the timing process filled: no autotuning scratch, so JAX's process-wide peak (which
    cannot be reset) is a step's. ``options`` go to the backend."""
    base, inputs, loss_fn, autocast = _setup(case, dtype, device)
    probe = _Probe()
    compile_kw = {"options": options} if options else None
    step, first = _make_step(
        copy.deepcopy(base), "xla", task, inputs, loss_fn, autocast, device, compile_kw, probe=probe
    )
    first()
    step()
    return _memory(step, "xla", base, probe)


class _Probe:
    """Splits a training step into phases at its probe points ("forward" before the model,
    "after_forward", "after_loss" once the eager loss is computed and the step's references to
    the output dropped, "backward" when the output's gradient is ready, "after_backward",
    "end") and records per phase torch's peak (its peak statistics reset at every point) and
    JAX's bytes in use at the phase's start, for ``_memory``'s bound on the combined peak.

    Phases that start at "forward" and "backward" run JAX programs, whose peak only JAX's
    process-wide statistic bounds; in the others only torch computes, and JAX's bytes in use
    can only fall (torch frees outputs JAX made), so JAX's count at their start bounds them.
    """

    JAX_PHASES = frozenset({"forward", "backward"})

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.phases: list[tuple[str, int, int]] = []  # (starting point, torch peak, JAX in use)
        self._open: tuple[str, int] | None = None

    def __call__(self, point: str) -> None:
        torch.cuda.synchronize()
        if self._open is not None:
            start, jax_at_start = self._open
            self.phases.append((start, torch.cuda.max_memory_allocated(), jax_at_start))
        torch.cuda.reset_peak_memory_stats()
        self._open = None if point == "end" else (point, _jax_in_use())

    def bound(self, jax_peak: int) -> int:
        """The largest over the phases of torch's peak plus what JAX held at most meanwhile."""
        return max(
            torch_peak + (jax_peak if start in self.JAX_PHASES else jax_at_start)
            for start, torch_peak, jax_at_start in self.phases
        )


def _make_step(model, mode, task, inputs, loss_fn, autocast, device, compile_kw=None, probe=None):
    """(steady step, first step returning what is compared with eager); ``compile_kw`` go to
    ``torch.compile`` (``mode=``, ``options=``); ``probe`` (training) is called with "forward"
    before the model, "after_forward" after it, "backward" when the output's gradient is ready
    and "end" after the step."""
    compile_kw = compile_kw or {}
    # a model's own loss takes its labels as keyword arguments of the training call
    train_kw = getattr(loss_fn, "kwargs", {})
    if task == "infer":
        model.eval()
        fn = _common.compile_fn(model, mode, **compile_kw)

        def infer():
            with torch.no_grad(), autocast():
                return fn(*inputs)

        def first():
            return {"output": models._logits(infer()).detach().float()}

        return infer, first
    model.train()
    fn = _common.compile_fn(model, mode, **compile_kw)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def forward_backward():
        opt.zero_grad(set_to_none=True)
        with autocast():
            if probe is None:
                loss = loss_fn(fn(*inputs, **train_kw))
            else:
                probe("forward")
                out = fn(*inputs, **train_kw)
                probe("after_forward")
                logits = models._logits(out)
                if logits.requires_grad:
                    logits.register_hook(lambda g: probe("backward"))
                loss = loss_fn(out)
                # as in the unprobed step, where nothing but autograd holds the output now
                del out, logits
                probe("after_loss")
        loss.backward()
        if probe is not None:
            probe("after_backward")
        return loss

    def train():
        forward_backward()
        opt.step()
        if probe is not None:
            probe("end")

    def first():
        loss = forward_backward()
        grads = [p.grad.detach().float().clone() for p in model.parameters() if p.grad is not None]
        opt.step()
        return {"loss": loss.detach().float().reshape(1), "grads": grads}

    return train, first


def _first_call(first, device) -> dict:
    torch._dynamo.utils.counters.clear()
    _common.sync(device)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = first()
        _common.sync(device)
    elapsed = time.perf_counter() - t0
    fallbacks = sorted(
        {str(w.message)[:3000] for w in caught if type(w.message).__name__ == "FallbackWarning"}
    )
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"first_call_s": elapsed, "value": value, "fallbacks": fallbacks, "graph_breaks": breaks}


def _diff(value: dict, ref: dict) -> dict:
    """The largest absolute difference, and the relative L2 difference of everything compared
    (outputs; or the loss and all gradients) taken as one vector."""
    pairs = []
    for key, b in ref.items():
        a = value[key]
        pairs += list(zip(a, b, strict=True)) if isinstance(b, list) else [(a, b)]
    pairs = [(x.double(), y.double()) for x, y in pairs if y.numel()]
    abs_diff = max((float((x - y).abs().max()) for x, y in pairs), default=0.0)
    num = math.sqrt(sum(float((x - y).square().sum()) for x, y in pairs))
    den = math.sqrt(sum(float(y.square().sum()) for _, y in pairs))
    return {"max_abs_diff": abs_diff, "rel_l2_diff": num / den if den else num}


def _interleave(steps, per_sample, rounds, device) -> dict[str, list[float]]:
    wrapped = {
        mode: (lambda step=step, n=per_sample[mode]: [step() for _ in range(n)])
        for mode, step in steps.items()
    }
    times = _common.interleaved(wrapped, rounds, 1, device)
    return {mode: [t / per_sample[mode] for t in ts] for mode, ts in times.items()}


def _memory(step, mode: str, model, probe: _Probe | None = None) -> dict:
    """Peak device memory of a step beyond what was allocated before it (torch's allocator,
    plus JAX's for xla), and with the model state (parameters, optimizer state) added.

    For xla the two allocators peak at different moments: JAX's inside its programs, torch's
    in the eager loss or optimizer step. With a ``probe`` (training) the peak is bounded phase
    by phase (``_Probe.bound``, ``step_peak_mb``); the sum of the two peaks, the bound used
    before session 6, is ``step_peak_sum_mb``."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    jax_before = _jax_in_use()
    torch_peak = 0
    if probe is not None:
        probe.reset()
    for _ in range(2):
        step()
        torch.cuda.synchronize()
        torch_peak = max(torch_peak, torch.cuda.max_memory_allocated())  # the probe resets it
    step_peak = torch_peak - before
    out = {}
    if mode == "xla":
        # JAX's peak cannot be reset; only xla allocates through JAX in this process, and its
        # steps all look alike, so the process-wide peak is a step's.
        jax_peak = _jax_peak()
        if probe is not None:
            torch_peak = max([torch_peak, *(peak for _, peak, _ in probe.phases)])
        summed = torch_peak - before + max(0, jax_peak - jax_before)
        out["step_peak_sum_mb"] = summed / 2**20
        step_peak = summed
        if probe is not None and probe.phases:
            step_peak = probe.bound(jax_peak) - before - jax_before
    state = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"step_peak_mb": step_peak / 2**20, "state_mb": state / 2**20, **out}


def _jax_stats() -> dict:
    import jax

    return jax.devices("gpu")[0].memory_stats() or {}


def _jax_in_use() -> int:
    return _jax_stats().get("bytes_in_use", 0)


def _jax_peak() -> int:
    return _jax_stats().get("peak_bytes_in_use", 0)


def _speedups(result: dict) -> None:
    med = {m: v["steady_ms"]["median"] for m, v in result["modes"].items() if "steady_ms" in v}
    for base in ("eager", "inductor"):
        if base in med:
            result[f"speedup_vs_{base}"] = {m: med[base] / t for m, t in med.items()}


def _mfu(result: dict, tokens: int, model) -> dict:
    """Model FLOPs utilization of the bf16 training step: 6 x parameters x tokens (attention's
    own FLOPs left out, the usual lower estimate) over the GPU's dense bf16 peak."""
    n = sum(p.numel() for p in model.parameters())
    flops = 6 * n * tokens
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    out = {"flops_per_step": flops, "gpu": name, "peak_tflops": peak}
    for mode, info in result["modes"].items():
        if "steady_ms" in info and peak:
            achieved = flops / (info["steady_ms"]["median"] / 1e3) / 1e12
            out[mode] = {"tflops": achieved, "mfu": achieved / peak}
    return out


def _error(e: BaseException) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(tb[-3:])[-1500:]


# --- the driver ---------------------------------------------------------------------------


def plan(device: str, cases: list[str] | None, tasks: list[str], dtypes: list[str] | None):
    cuda = device.startswith("cuda")
    names = cases or [n for n, c in models.CASES.items() if cuda or not c.gpu_only]
    dts = dtypes or (["fp32", "bf16"] if cuda else ["fp32"])
    return [(c, t, d) for c in names for t in tasks for d in dts]


def run_all(args, out: pathlib.Path) -> dict:
    """Runs every planned case, rewriting ``out`` after each (a cut-off run keeps what it did);
    with ``--merge``, runs already in ``out`` for other cases are kept."""
    results = {
        "machine": _common.machine(),
        "device": args.device,
        "rounds": args.rounds,
        "runs": [],
    }
    if args.options:
        results["xla_options"] = args.options
    if args.merge and out.exists():
        results["runs"] = json.loads(out.read_text())["runs"]
    out.parent.mkdir(parents=True, exist_ok=True)
    for case, task, dtype in plan(args.device, args.cases, args.tasks, args.dtypes):
        spec = f"{case}:{task}:{dtype}"
        t0 = time.perf_counter()
        cmd = [
            sys.executable,
            __file__,
            "--one",
            spec,
            "--device",
            args.device,
            "--rounds",
            str(args.rounds),
            "--target-s",
            str(args.target_s),
        ]
        if args.cpu is not None:
            cmd += ["--cpu", str(args.cpu)]
        if args.options:
            cmd += ["--options", json.dumps(args.options)]
        cache = tempfile.mkdtemp(prefix="jax-cache-")
        env = dict(os.environ)
        # First calls compile from scratch in every mode: no inductor caches left by earlier runs.
        env.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
        env.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
        if args.device.startswith("cuda"):  # lets the memory process skip compiling
            env["JAX_COMPILATION_CACHE_DIR"] = cache
            env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
            env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"
        try:
            proc = subprocess.run(
                cmd, check=False, capture_output=True, text=True, timeout=args.timeout, env=env
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
            if proc.returncode or not lines:
                run = {
                    "case": case,
                    "task": task,
                    "dtype": dtype,
                    "error": f"exit {proc.returncode}: {proc.stderr[-1500:]}",
                }
            else:
                run = json.loads(lines[-1][len(MARK) :])
        except subprocess.TimeoutExpired:
            run = {
                "case": case,
                "task": task,
                "dtype": dtype,
                "error": f"timed out after {args.timeout} s",
            }
        if args.device.startswith("cuda") and "xla" in run.get("modes", {}):
            run["modes"]["xla"].update(_memory_child(cmd, env, args.timeout))
        shutil.rmtree(cache, ignore_errors=True)
        key = (case, task, dtype)
        results["runs"] = [r for r in results["runs"] if (r["case"], r["task"], r["dtype"]) != key]
        results["runs"].append(run)
        out.write_text(json.dumps(results, indent=1))
        print(f"{spec:28s} {time.perf_counter() - t0:6.1f} s  {_line(run)}", flush=True)
    return results


def _memory_child(cmd: list[str], env: dict, timeout: int) -> dict:
    try:
        proc = subprocess.run(
            [*cmd, "--memory-only"],
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"memory_error": f"timed out after {timeout} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode or not lines:
        return {"memory_error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}
    return json.loads(lines[-1][len(MARK) :])


def _line(run: dict) -> str:
    if "error" in run:
        return "ERROR " + run["error"].strip().splitlines()[-1][:100]
    cells = []
    for mode in _common.MODES:
        info = run["modes"].get(mode, {})
        if "steady_ms" in info:
            cells.append(f"{mode} {info['steady_ms']['median']:.3f} ms")
        else:
            cells.append(f"{mode} ERROR")
    sp = run.get("speedup_vs_eager", {}).get("xla")
    si = run.get("speedup_vs_inductor", {}).get("xla")
    if sp and si:
        cells.append(f"xla {sp:.2f}x eager {si:.2f}x inductor")
    return ", ".join(cells)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--cases",
        type=lambda s: s.split(","),
        default=None,
        help=f"comma-separated, from {', '.join(models.CASES)}",
    )
    parser.add_argument("--tasks", type=lambda s: s.split(","), default=["infer", "train"])
    parser.add_argument(
        "--dtypes",
        type=lambda s: s.split(","),
        default=None,
        help="fp32 and/or bf16 (autocast); default fp32 on CPU, both on CUDA",
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--target-s", type=float, default=0.25, help="seconds each timing sample aims for"
    )
    parser.add_argument("--cpu", type=int, default=None, help="pin to this core (CPU runs)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per case")
    parser.add_argument("--out", type=pathlib.Path, default=None)
    parser.add_argument(
        "--options",
        type=json.loads,
        default=None,
        help="xla backend options (JSON), e.g. '{\"split_backward\": false}'",
    )
    parser.add_argument("--merge", action="store_true", help="keep other cases' runs in --out")
    parser.add_argument("--no-report", action="store_true", help="do not rewrite the docs")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.device.startswith("cuda"):
        _common.one_thread(args.cpu)
    if args.one:
        case, task, dtype = args.one.split(":")
        if args.memory_only:
            print(
                MARK + json.dumps(memory_only(case, task, dtype, args.device, args.options)),
                flush=True,
            )
            return
        run = run_one(case, task, dtype, args.device, args.rounds, args.target_s, args.options)
        print(MARK + json.dumps(run), flush=True)
        return
    out = args.out or RESULTS / f"{args.device.split(':')[0]}.json"
    run_all(args, out)
    print(f"wrote {out}")
    if not args.no_report:
        import report

        print(f"wrote {report.write()}")


if __name__ == "__main__":
    main()
