"""Warm starts: a new process's first step with the persistent cache filled, against a cold one.

    python benchmarks/warm_start.py [--case gpt] [--device cpu] [--rounds 3] [--json FILE]
    python benchmarks/warm_start.py --device cuda --case gpt2 --dtype bf16 --rounds 2

For a case of ``benchmarks/models.py``, each round runs, each in a fresh process on one thread:

- ``cold``: the persistent cache in an empty directory; the first training step (forward,
  loss, backward, optimizer step), then a few more steps (``step`` is their median: the
  steady state), then the first step of the model compiled again in the same process after
  ``torch._dynamo.reset()`` and ``torch2xla.clear_caches()`` (``in-process again``);
- ``warm``: a second process on the directory ``cold`` filled;
- ``moved``: a third process after the directory was renamed (a copied or moved cache must hit);
- ``dynamo``: the first step with a backend that returns Dynamo's graph as it is (Dynamo's own
  trace and guards: what no cache of torch2xla can save);
- the same four for inference (``--mode infer``: the first forward under ``torch.no_grad()``).

``warm/cold`` is the ratio of first-step times; ``dynamo share`` is the dynamo process's first
step less its steady step, as a share of the cold first step. Every process also reports its
XLA compiles (backend compiles JAX reported).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent


def worker(case: str, device: str, dtype: str, mode: str, backend: str, steps: int) -> dict:
    t_import = time.perf_counter()
    sys.path.insert(0, str(HERE))
    import _common  # noqa: I001  (configures torch and XLA for one thread before they load)
    import contextlib

    import jax
    import torch

    import models
    import torch2xla

    _common.one_thread()
    if device.startswith("cuda"):
        _common.allow_tf32()
    compiles: list[str] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **kw: (
            compiles.append(event)
            if event == "/jax/core/compile/backend_compile_duration"
            else None
        )
    )
    import_s = time.perf_counter() - t_import
    model, inputs, loss_fn = models.build(case, device)
    autocast = (
        (lambda: torch.autocast(device.split(":")[0], dtype=torch.bfloat16))
        if dtype == "bf16"
        else contextlib.nullcontext
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    model.train(mode == "train")

    def compiled():
        if backend == "xla":
            return torch.compile(model, backend="xla")
        return torch.compile(model, backend=lambda gm, example: gm.forward)  # Dynamo alone

    def step(fn):
        if mode == "train":
            with autocast():
                loss = loss_fn(fn(*inputs))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
        with torch.no_grad(), autocast():
            return fn(*inputs)

    def timed(fn) -> float:
        _common.sync(device)
        t0 = time.perf_counter()
        step(fn)
        _common.sync(device)
        return time.perf_counter() - t0

    fn = compiled()
    first = timed(fn)
    steady = [timed(fn) for _ in range(steps)]
    n_compiles = len(compiles)
    # In-process: the same model compiled again after Dynamo forgot it (a notebook cell run
    # again): Dynamo traces again, torch2xla's programs come from the persistent cache.
    torch._dynamo.reset()
    if backend == "xla":
        torch2xla.clear_caches()
    again = timed(compiled())
    return {
        "import_s": import_s,
        "first_s": first,
        "step_s": statistics.median(steady) if steps else 0.0,
        "again_s": again,
        "xla_compiles": n_compiles,
        "xla_compiles_again": len(compiles) - n_compiles,
    }


def _spawn(args, mode: str, backend: str, cache: pathlib.Path) -> dict:
    env = dict(os.environ, TORCH2XLA_CACHE_DIR=str(cache), PYTHONPATH=str(HERE.parent))
    env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        mode,
        "--backend",
        backend,
        "--case",
        args.case,
        "--device",
        args.device,
        "--dtype",
        args.dtype,
        "--steps",
        str(args.steps),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {backend} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", default="gpt")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--mode", default="both", choices=("train", "infer", "both"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", type=pathlib.Path, default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="xla", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(
            json.dumps(
                worker(args.case, args.device, args.dtype, args.worker, args.backend, args.steps)
            )
        )
        return
    modes = ("train", "infer") if args.mode == "both" else (args.mode,)
    table: dict[str, dict[str, list[dict]]] = {}
    for r in range(args.rounds):
        for mode in modes:
            runs = table.setdefault(mode, {})
            with tempfile.TemporaryDirectory() as tmp:
                cache = pathlib.Path(tmp) / "a"
                got = {
                    "cold": _spawn(args, mode, "xla", cache),
                    "warm": _spawn(args, mode, "xla", cache),
                }
                moved = pathlib.Path(tmp) / "b"
                shutil.move(cache, moved)
                got["moved"] = _spawn(args, mode, "xla", moved)
                got["dynamo"] = _spawn(args, mode, "dynamo", pathlib.Path(tmp) / "c")
            for k, v in got.items():
                runs.setdefault(k, []).append(v)
            print(
                f"round {r + 1}/{args.rounds} {mode}: {json.dumps(got)}",
                file=sys.stderr,
                flush=True,
            )
    summary = {}
    print(f"{args.case} on {args.device} ({args.dtype}), medians of {args.rounds} rounds")
    for mode, runs in table.items():
        med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in runs.items()}
        cold, warm, moved, dyn = med["cold"], med["warm"], med["moved"], med["dynamo"]
        dynamo_s = dyn["first_s"] - dyn["step_s"]
        row = {
            "cold_first_s": cold["first_s"],
            "warm_first_s": warm["first_s"],
            "moved_first_s": moved["first_s"],
            "step_s": cold["step_s"],
            "in_process_first_s": cold["again_s"],
            "warm_over_cold": warm["first_s"] / cold["first_s"],
            "in_process_over_cold": cold["again_s"] / cold["first_s"],
            "moved_over_cold": moved["first_s"] / cold["first_s"],
            "dynamo_s": dynamo_s,
            "dynamo_share_of_cold": dynamo_s / cold["first_s"],
            "cold_xla_compiles": cold["xla_compiles"],
            "warm_xla_compiles": warm["xla_compiles"],
            "moved_xla_compiles": moved["xla_compiles"],
            "import_s": cold["import_s"],
        }
        summary[mode] = row
        print(
            f"{mode:5}: first step cold {row['cold_first_s']:.3f} s, warm "
            f"{row['warm_first_s']:.3f} s ({row['warm_over_cold']:.0%}), moved "
            f"{row['moved_first_s']:.3f} s ({row['moved_over_cold']:.0%}), in-process again "
            f"{row['in_process_first_s']:.3f} s ({row['in_process_over_cold']:.0%}); steady "
            f"step {row['step_s'] * 1e3:.1f} ms; Dynamo's trace {dynamo_s:.3f} s "
            f"({row['dynamo_share_of_cold']:.0%} of cold); XLA compiles cold/warm/moved "
            f"{row['cold_xla_compiles']:.0f}/{row['warm_xla_compiles']:.0f}/"
            f"{row['moved_xla_compiles']:.0f}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "summary": summary, "runs": table},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
