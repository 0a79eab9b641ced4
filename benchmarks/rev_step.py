"""One suite row's steady step time for the torch2xla found first on ``sys.path``: set
``PYTHONPATH`` to an older tree (``git archive REV torch2xla | tar -x -C DIR``) to compare
revisions of the bridge with today's harness and models (a bisect of a regression).

    PYTHONPATH=DIR python benchmarks/rev_step.py --case vit --task train --dtype bf16

Prints one line: the tree, first call, median wall ms/step of ``--rounds`` rounds, the summed
GPU kernel time per step (CUPTI) and the host's issue time per step (no sync).
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import suite
import torch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--task", default="train")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", default="xla")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--label", default="")
    parser.add_argument("--options", type=json.loads, default=None, help="xla options (JSON)")
    parser.add_argument("--cprofile", type=int, default=0, help="cProfile these many steps")
    parser.add_argument("--rows", type=int, default=0, help="also print the top kernels")
    args = parser.parse_args(argv)
    import torch2xla

    base, inputs, loss_fn, autocast = suite._setup(args.case, args.dtype, args.device)
    step, first = suite._make_step(
        copy.deepcopy(base),
        args.mode,
        args.task,
        inputs,
        loss_fn,
        autocast,
        args.device,
        compile_kw={"options": args.options} if args.options else None,
    )
    t0 = time.perf_counter()
    first()
    _common.sync(args.device)
    first_s = time.perf_counter() - t0
    for _ in range(3):
        step()
    walls = [_common.time_calls(step, args.steps, args.device) for _ in range(args.rounds)]
    kernels = float("nan")
    if args.device.startswith("cuda"):
        activity = torch.profiler.ProfilerActivity
        with torch.profiler.profile(activities=[activity.CPU, activity.CUDA]) as prof:
            for _ in range(args.steps):
                step()
            _common.sync(args.device)
        events = prof.key_averages()
        kernels = _common.kernel_us(events) / args.steps
        if args.rows:
            table = events.table(sort_by="self_device_time_total", row_limit=args.rows)
            print(table, flush=True)
    _common.sync(args.device)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    host = (time.perf_counter() - t0) / args.steps
    _common.sync(args.device)
    if args.cprofile:
        import cProfile
        import pstats

        with cProfile.Profile() as prof_host:
            for _ in range(args.cprofile):
                step()
            _common.sync(args.device)
        pstats.Stats(prof_host).sort_stats("tottime").print_stats(25)
    peaks = ""
    if args.device.startswith("cuda"):
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        peaks = (
            f", peaks torch {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB, "
            f"jax {stats.get('peak_bytes_in_use', 0) / 2**20:.0f} MiB"
        )
    tree = pathlib.Path(torch2xla.__file__).resolve().parent.parent.name
    print(
        f"{args.label or tree} {args.case} {args.task} {args.dtype} {args.mode}: "
        f"first {first_s:.1f} s, wall {statistics.median(walls) * 1e3:.2f} ms/step "
        f"[{min(walls) * 1e3:.2f}, {max(walls) * 1e3:.2f}], kernels {kernels / 1e3:.2f} ms/step, "
        f"host issue {host * 1e3:.2f} ms/step{peaks}",
        flush=True,
    )


if __name__ == "__main__":
    main()
