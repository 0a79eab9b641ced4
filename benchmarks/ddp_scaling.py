"""DDP step time and scaling efficiency (2 processes vs 1), eager vs inductor vs xla.

    python benchmarks/ddp_scaling.py                  # CPU: gloo, SmallGPT, 1 thread per rank
    python benchmarks/ddp_scaling.py --case gpt2      # GPU: NCCL, GPT-2 124M (needs 2 GPUs)
    python benchmarks/ddp_scaling.py --case gpt2-lm --dtype bf16 --profile DIR
        # GPT-2 as users train it (own labels= loss, dropout), bf16 autocast; DIR gets a
        # torch.profiler trace of 3 steps of xla on 2 ranks and how much of NCCL's time ran
        # beside compute kernels
    python benchmarks/ddp_scaling.py --modes xla --bucket-cap-mb 2 --no-ddp-optimizer \
        --split-backward true     # one graph whose backward's segments feed DDP's buckets

Weak scaling: every rank keeps the same per-rank batch, so ideal 2-rank step time equals the
1-rank step time; efficiency = t(1 rank) / t(2 ranks). Each (mode, world size) runs in fresh
processes; the median of the steady steps is reported. Writes JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks import _common  # noqa: F401  (one-thread XLA flags, allow_rnn)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _overlap(prof) -> dict:
    """NCCL kernels' time on the GPU of rank 0, and the part of it during which another
    (compute) kernel ran too: all-reduce overlapping the backward."""
    kernels = [
        (e.name, e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.end > e.time_range.start
    ]
    comm = sorted((a, b) for n, a, b in kernels if "nccl" in n.lower())
    compute = sorted((a, b) for n, a, b in kernels if "nccl" not in n.lower())
    total = sum(b - a for a, b in comm)
    overlapped = 0
    for a, b in comm:
        covered, cursor = 0, a
        for c, d in compute:
            if d <= cursor or c >= b:
                continue
            lo, hi = max(c, cursor), min(d, b)
            if hi > lo:
                covered += hi - lo
                cursor = hi
        overlapped += covered
    return {
        "nccl_kernels": len(comm),
        "nccl_us": total,
        "nccl_overlapped_us": overlapped,
        "overlap_fraction": overlapped / total if total else None,
    }


def _worker(rank, world, port, case, mode, steps, bucket_cap_mb, queue, extra=None):
    import contextlib

    from torch.nn.parallel import DistributedDataParallel as DDP

    from benchmarks.models import OwnLoss, build

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(rank)
    else:
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
    device = f"cuda:{rank}" if cuda else "cpu"
    model, inputs, loss_fn = build(case, device)
    extra = extra or {}
    if extra.get("no_ddp_optimizer"):
        torch._dynamo.config.optimize_ddp = False
    ddp = DDP(model, device_ids=[rank] if cuda else None, bucket_cap_mb=bucket_cap_mb)
    options = (
        {"split_backward": extra["split_backward"]}
        if mode == "xla" and extra.get("split_backward") is not None
        else None
    )
    run = ddp if mode == "eager" else torch.compile(ddp, backend=mode, options=options)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    kwargs = loss_fn.kwargs if isinstance(loss_fn, OwnLoss) else {}
    autocast = (
        torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16)
        if extra.get("dtype") == "bf16"
        else contextlib.nullcontext()
    )
    profile_dir = extra.get("profile") if mode == "xla" and world == 2 and rank == 0 else None
    host_profile = extra.get("host_profile") if mode == "xla" and rank == 0 else None
    host = None
    prof = None
    times = []
    for step in range(steps):
        if profile_dir and step == steps - 3:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if cuda:
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=activities)
            prof.__enter__()
        if host_profile and step == steps - 2:
            import cProfile

            host = cProfile.Profile()
            host.enable()
        t0 = time.perf_counter()
        with autocast:
            loss = loss_fn(run(*inputs, **kwargs))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    if host is not None:
        import io
        import pstats

        host.disable()
        text = io.StringIO()
        stats = pstats.Stats(host, stream=text)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
        Path(host_profile).mkdir(parents=True, exist_ok=True)
        (Path(host_profile) / f"host_{case}_xla_{world}ranks.txt").write_text(text.getvalue())
    overlap = None
    if prof is not None:
        prof.__exit__(None, None, None)
        Path(profile_dir).mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(Path(profile_dir) / f"ddp_{case}_xla_2ranks.json"))
        overlap = _overlap(prof)
    if rank == 0:
        profiled = 3 if prof is not None else 2 if host is not None else 0
        steady = times[max(3, steps // 3) : len(times) - profiled]
        result = {
            "first_s": times[0],
            "median_ms": statistics.median(steady) * 1e3,
            "spread_ms": (max(steady) - min(steady)) * 1e3,
            "loss": loss.item(),
        }
        if overlap is not None:
            result["overlap"] = overlap
        queue.put(result)
    dist.destroy_process_group()


def run(
    case: str, mode: str, world: int, steps: int, bucket_cap_mb: float = 25.0, extra=None
) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _port()
    procs = [
        ctx.Process(
            target=_worker,
            args=(r, world, port, case, mode, steps, bucket_cap_mb, queue, extra),
        )
        for r in range(world)
    ]
    for p in procs:
        p.start()
    result = queue.get(timeout=1800)
    for p in procs:
        p.join(120)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--case", default=None, help="benchmarks.models case (default: gpt on CPU, gpt2 on GPU)"
    )
    parser.add_argument("--modes", default="eager,inductor,xla")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--bucket-cap-mb",
        type=float,
        default=25.0,
        help="DDP's bucket size (25 is DDP's default); Dynamo splits graphs at buckets",
    )
    parser.add_argument(
        "--no-ddp-optimizer",
        action="store_true",
        help="torch._dynamo.config.optimize_ddp = False: one graph, not one per bucket",
    )
    parser.add_argument(
        "--split-backward",
        default=None,
        help="xla's split_backward option (true, false, auto or MiB per segment)",
    )
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast")
    parser.add_argument(
        "--profile", default=None, help="folder for a profile of 3 steps of xla on 2 ranks"
    )
    parser.add_argument(
        "--host-profile", default=None, help="folder for cProfile of xla's last 2 steps (rank 0)"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    split = args.split_backward
    if split is not None:
        split = {"true": True, "false": False, "auto": "auto"}.get(split.lower(), split)
        split = float(split) if isinstance(split, str) else split
    extra = {
        "no_ddp_optimizer": args.no_ddp_optimizer,
        "split_backward": split,
        "dtype": args.dtype,
        "profile": args.profile,
        "host_profile": args.host_profile,
    }
    cuda = torch.cuda.is_available()
    case = args.case or ("gpt2" if cuda else "gpt")
    worlds = [1, 2]
    results = {
        "case": case,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "gpus": torch.cuda.device_count() if cuda else 0,
        "bucket_cap_mb": args.bucket_cap_mb,
        "extra": extra,
        "runs": {},
    }
    for mode in args.modes.split(","):
        for world in worlds:
            r = run(case, mode, world, args.steps, args.bucket_cap_mb, extra)
            results["runs"][f"{mode}/{world}"] = r
            print(
                f"{mode:9s} world={world}: {r['median_ms']:8.2f} ms/step "
                f"(first {r['first_s']:.1f} s, spread {r['spread_ms']:.2f} ms)",
                flush=True,
            )
        one, two = results["runs"][f"{mode}/1"], results["runs"][f"{mode}/2"]
        one["efficiency_2v1"] = two["efficiency_2v1"] = one["median_ms"] / two["median_ms"]
        print(f"{mode:9s} scaling efficiency 2 vs 1: {one['efficiency_2v1']:.2f}", flush=True)
        if "overlap" in two:
            print(f"{mode:9s} NCCL beside compute on 2 ranks: {two['overlap']}", flush=True)
    out = Path(
        args.out
        or Path(__file__).parent
        / "results"
        / f"ddp_scaling_{'gpu' if cuda else 'cpu'}_{case}_{args.dtype}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
