"""Where the first training step's time goes, for one case of ``benchmarks/models.py``.

    python benchmarks/first_call.py --device cuda --case gpt2 --dtype bf16 [--options JSON]

Times the first step's phases as the user sees them (the compiled forward's first call: Dynamo,
lowering, tracing and the forward's XLA compile; the loss; the first backward: the backward's
compile, split into segments on GPU; the optimizer step), then a second step for reference,
and lists every XLA compilation JAX logged with its duration (``jax_log_compiles``), so that
the forward, each backward segment and stray small programs can be told apart. On CUDA, fp32
allows TF32 as the suite does (``--full-fp32``: torch's default, full float32 matmuls).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: I001  (configures torch and XLA for one thread before they load)
import jax
import torch

import models


class _Compiles(logging.Handler):
    """JAX's "Finished XLA compilation of NAME in S sec" records and torch2xla's "GRAPH
    compiled in S s (stages)" ones, in order."""

    PATTERN = re.compile(r"Finished XLA compilation of (.+?) in ([0-9.e-]+) s")
    STAGES = re.compile(r"^(\S+) compiled in ([0-9.]+)s \((.*)\)")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.rows: list[tuple[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = self.PATTERN.search(record.getMessage())
        if m:
            self.rows.append((m.group(1)[:80], float(m.group(2))))
        m = self.STAGES.search(record.getMessage())
        if m:
            self.rows.append((f"torch2xla {m.group(1)}: {m.group(3)}", float(m.group(2))))


class _Clock:
    """Seconds between laps, the device synchronized at each."""

    def __init__(self, device: str) -> None:
        self.device, self.times = device, {}
        _common.sync(device)
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        _common.sync(self.device)
        now = time.perf_counter()
        self.times[name], self._t = now - self._t, now


def first_step(case: str, device: str, dtype: str, options: dict | None) -> dict:
    model, inputs, loss_fn = models.build(case, device)
    model.train()
    fn = torch.compile(model, backend="xla", options=options)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    autocast = (
        (lambda: torch.autocast(device.split(":")[0], dtype=torch.bfloat16))
        if dtype == "bf16"
        else contextlib.nullcontext
    )
    handler = _Compiles()
    jax_log, ours = logging.getLogger("jax"), logging.getLogger("torch2xla")
    jax_log.addHandler(handler)
    ours.addHandler(handler)
    level, ours.level = ours.level, logging.DEBUG
    jax.config.update("jax_log_compiles", True)
    phases: list[dict] = []
    try:
        for step in range(2):
            mark = len(handler.rows)
            clock = _Clock(device)
            opt.zero_grad(set_to_none=True)
            with autocast():
                out = fn(*inputs)
                clock.lap("forward")
                loss = loss_fn(out)
                del out
                clock.lap("loss")
            loss.backward()
            clock.lap("backward")
            opt.step()
            clock.lap("optimizer")
            phases.append({"step": step, "seconds": clock.times, "compiles": handler.rows[mark:]})
    finally:
        jax.config.update("jax_log_compiles", False)
        jax_log.removeHandler(handler)
        ours.removeHandler(handler)
        ours.setLevel(level)
    return {"case": case, "device": device, "dtype": dtype, "options": options, "steps": phases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="gpt")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--options", type=json.loads, default=None)
    parser.add_argument("--json", type=pathlib.Path, default=None)
    parser.add_argument(
        "--full-fp32",
        action="store_true",
        help="CUDA: torch's default full float32 matmuls, not the suite's TF32",
    )
    args = parser.parse_args()
    if args.device.startswith("cuda") and not args.full_fp32:
        _common.allow_tf32()
    result = first_step(args.case, args.device, args.dtype, args.options)
    for row in result["steps"]:
        total = sum(row["seconds"].values())
        print(
            f"step {row['step']}: {total:.2f} s  "
            + "  ".join(f"{k} {v:.2f}" for k, v in row["seconds"].items())
        )
        for name, seconds in row["compiles"]:
            print(f"    compile {seconds:7.2f} s  {name}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
