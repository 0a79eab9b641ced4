"""A ~1B Llama's whole training step, eager against inductor and xla, with its MFU (issue 25).

    python benchmarks/llama_train.py [--modes eager,inductor,xla] [--batch 4] [--seq 2048]
        [--steps 10] [--json benchmarks/results/llama_train_cuda.json] [--tiny]

The workload as its users run it: transformers' ``LlamaForCausalLM`` at Llama-3.2-1B's shapes
(hidden 2048, 16 layers, MLP 8192, 32 heads with 8 KV heads, vocabulary 128256, tied
embeddings; 1.24B parameters, random weights), ``--batch`` x ``--seq`` tokens, the model's own
``labels=`` loss under bf16 autocast, ``AdamW`` (lr 1e-4, weight decay 0.01). In the compiled
modes the model and the optimizer's step are both compiled with the mode's backend
(``torch.compile(model)``, ``torch.compile(opt.step)``); eager runs the same step uncompiled
(AdamW's default foreach implementation). TF32 allowed everywhere.

Each mode runs in a process of its own, one after the other (three 1.24B models with their
AdamW states do not fit one GPU beside each other): the first step (compilation included),
``--warmup`` steps, then ``--steps`` steps timed one by one with the GPU synchronized; the
median is the step time. Peak memory is torch's allocator plus JAX's pool over the steady steps.

MFU: model FLOPs per step over the GPU's dense bf16 peak, with the model FLOPs counted as
PaLM's appendix does: 6 x parameters x tokens plus attention's 12 x layers x hidden x seq per
token (causal masking not discounted). ``--tiny`` runs a 2-layer config on the CPU, to try the
script.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import torch

MARK = "@@LLAMA-TRAIN@@"
PEAK_BF16_TFLOPS = {"H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H200": 989.0, "A100": 312.0}


def _peak_bytes(device: str) -> int:
    if not device.startswith("cuda"):
        return 0
    total = torch.cuda.max_memory_allocated()
    import jax

    for d in jax.local_devices():
        stats = d.memory_stats() or {}
        total += stats.get("peak_bytes_in_use", 0)
    return total


def _one_mode(args) -> dict:
    """One mode's steps in this process."""
    import transformers

    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if device == "cuda":
        _common.allow_tf32()
    else:
        _common.one_thread()
    transformers.logging.set_verbosity_error()
    config = _common.llama1b_config(args.tiny)
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(config)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    fwd = _common.compile_fn(model, args.mode)
    opt_step = _common.compile_fn(opt.step, args.mode)
    gen = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=gen).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, labels=ids).loss
        loss.backward()
        opt_step()
        return loss

    t0 = time.perf_counter()
    first_loss = step().item()
    first_s = time.perf_counter() - t0
    losses = [first_loss]
    for _ in range(args.warmup):
        losses.append(step().item())
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        _common.sync(device)
        t0 = time.perf_counter()
        loss = step()
        _common.sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    phases = _phases(fwd, opt, opt_step, ids, device)
    timeline = _timeline(fwd, opt, opt_step, ids) if device == "cuda" else None
    if args.profile:
        _profile(step, device, pathlib.Path(args.profile) / f"llama_{args.mode}.txt")
        _host_profile(opt_step, pathlib.Path(args.profile) / f"llama_{args.mode}_opt_host.txt")
    params = sum(p.numel() for p in model.parameters())
    tokens = args.batch * args.seq
    flops = (
        6 * params * tokens + 12 * config.num_hidden_layers * config.hidden_size * args.seq * tokens
    )
    median = statistics.median(times)
    out = {
        "mode": args.mode,
        "device": device,
        "params": params,
        "tokens_per_step": tokens,
        "flops_per_step": flops,
        "first_step_s": first_s,
        "step_ms": _common.summary([t * 1e3 for t in times]),
        "tflops": flops / median / 1e12,
        "peak_bytes": _peak_bytes(device),
        "losses": losses,
        "phase_ms": phases,
        "timeline_ms": timeline,
    }
    if device == "cuda":
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
        out["gpu"] = name
        if peak:
            out["mfu"] = out["tflops"] / peak
    return out


def _phases(fwd, opt, opt_step, ids, device: str, steps: int = 5) -> dict[str, float]:
    """Median milliseconds of the step's phases, each timed alone (the GPU synchronized
    around it): forward with the loss, backward, optimizer step."""
    times: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}

    def timed(name, fn):
        _common.sync(device)
        t0 = time.perf_counter()
        out = fn()
        _common.sync(device)
        times[name].append((time.perf_counter() - t0) * 1e3)
        return out

    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = timed("forward", lambda: fwd(input_ids=ids, labels=ids).loss)
        timed("backward", loss.backward)
        timed("optimizer", opt_step)
    return {k: statistics.median(v) for k, v in times.items()}


def _timeline(fwd, opt, opt_step, ids, steps: int = 5) -> dict:
    """When the host returns from each phase of a whole step and when the GPU finishes it
    (CUDA events), ms from the step's start, medians of ``steps`` steps: where the host's
    return comes at the GPU's, the host is on the critical path (it waited for the GPU)."""
    marks = ("zero_grad", "forward", "backward", "optimizer")
    host: dict[str, list[float]] = {m: [] for m in marks}
    gpu: dict[str, list[float]] = {m: [] for m in marks}
    for _ in range(steps):
        torch.cuda.synchronize()
        events = {m: torch.cuda.Event(enable_timing=True) for m in ("start", *marks)}
        times = {}

        def mark(name, times=times, events=events):
            times[name] = time.perf_counter()
            events[name].record()

        mark("start")
        opt.zero_grad(set_to_none=True)
        mark("zero_grad")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, labels=ids).loss
        mark("forward")
        loss.backward()
        mark("backward")
        opt_step()
        mark("optimizer")
        torch.cuda.synchronize()
        for m in marks:
            host[m].append((times[m] - times["start"]) * 1e3)
            gpu[m].append(events["start"].elapsed_time(events[m]))
    return {
        "host_returns": {m: statistics.median(v) for m, v in host.items()},
        "gpu_done": {m: statistics.median(v) for m, v in gpu.items()},
    }


def _host_profile(opt_step, path: pathlib.Path, steps: int = 5) -> None:
    """The optimizer step's host time by function (cProfile), without synchronizing."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        opt_step()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(30)
    path.write_text(buf.getvalue())


def _profile(step, device: str, path: pathlib.Path, steps: int = 2) -> None:
    """Kernels of ``steps`` steady steps by total device time (torch's profiler sees XLA's
    kernels too, through CUPTI), with the kernel time per step against the wall time."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    _common.sync(device)
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        _common.sync(device)
    wall = (time.perf_counter() - t0) / steps
    events = prof.key_averages()
    kernel_us = _common.kernel_us(events) / steps
    path.parent.mkdir(parents=True, exist_ok=True)
    head = f"wall {wall * 1e3:.1f} ms/step (profiled), kernels {kernel_us / 1e3:.1f} ms/step\n"
    table = events.table(sort_by="device_time_total", row_limit=45, max_name_column_width=90)
    path.write_text(head + table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="eager,inductor,xla")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mode")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--profile", help="folder for each mode's kernel table (2 steps)")
    args = parser.parse_args()
    if args.mode:  # a child: one mode
        print(MARK + json.dumps(_one_mode(args)), flush=True)
        return
    results = {"machine": _common.machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    runs = {}
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--mode", mode, "--batch", str(args.batch)]
        cmd += ["--seq", str(args.seq), "--warmup", str(args.warmup), "--steps", str(args.steps)]
        cmd += ["--tiny"] if args.tiny else []
        cmd += ["--profile", args.profile] if args.profile else []
        try:
            proc = subprocess.run(
                cmd, check=False, capture_output=True, text=True, timeout=args.timeout
            )
        except subprocess.TimeoutExpired:
            runs[mode] = {"error": f"timed out after {args.timeout} s"}
            continue
        line = next((x for x in proc.stdout.splitlines() if x.startswith(MARK)), None)
        if line is None:
            runs[mode] = {"error": (proc.stderr or proc.stdout)[-3000:]}
        else:
            runs[mode] = json.loads(line[len(MARK) :])
        _print_row(mode, runs[mode])
    results["modes"] = runs
    if "inductor" in runs and "step_ms" in runs.get("xla", {}) and "step_ms" in runs["inductor"]:
        xla, ind = runs["xla"]["step_ms"]["median"], runs["inductor"]["step_ms"]["median"]
        results["xla_speedup_vs_inductor"] = ind / xla
        print(f"xla / inductor: {ind / xla:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))


def _print_row(mode: str, run: dict) -> None:
    if "error" in run:
        print(f"{mode}: error: {run['error'][-600:]}")
        return
    mfu = f", MFU {100 * run['mfu']:.1f}%" if "mfu" in run else ""
    print(
        f"{mode}: step {run['step_ms']['median']:.1f} ms ({run['tflops']:.0f} TFLOP/s{mfu}), "
        f"first step {run['first_step_s']:.1f} s, peak {run['peak_bytes'] / 2**30:.1f} GiB, "
        f"losses {run['losses'][0]:.4f} -> {run['losses'][-1]:.4f}, phases (ms) "
        + ", ".join(f"{k} {v:.1f}" for k, v in run["phase_ms"].items()),
        flush=True,
    )
    timeline = run.get("timeline_ms")
    if timeline:
        host, gpu = timeline["host_returns"], timeline["gpu_done"]
        print(
            f"  {mode} timeline (ms from the step's start, host return / GPU done): "
            + ", ".join(f"{k} {host[k]:.1f}/{gpu[k]:.1f}" for k in host),
            flush=True,
        )


if __name__ == "__main__":
    main()
