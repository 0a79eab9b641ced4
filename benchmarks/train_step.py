"""Training-step time of eager, inductor and xla in one run, and the memory ``remat`` saves.

    python benchmarks/train_step.py [--rounds 15] [--steps 10] [--json benchmarks/results/train_step.json]
    python benchmarks/train_step.py --remat-only

Step time: a training step is ``zero_grad``, forward, loss, backward and an eager ``AdamW`` step,
identical in every mode, so the differences are the compiled forward and backward. One thread
for torch and XLA; the modes alternate in a shuffled order every round; each round times
``--steps`` back-to-back steps per mode; medians over rounds, and ratios of medians.

Cases: ``mlp`` (512-1024-1024-10, batch 64, cross-entropy) and ``transformer``
(``nn.TransformerEncoderLayer(256, 4, 1024)``, batch 16 x 64 tokens, dropout 0.1).

remat: a stack of 6 GPT-2 blocks (d=256, batch 8 x 256 tokens), trained with backend="xla" with
and without ``options={"remat": True}``. Reported per setting: the bytes kept from forward to
backward (the residuals), XLA's own memory analysis of the forward and backward programs
(arguments + temporaries + outputs; the estimated peak of a step is the larger of the two), the
process's peak resident memory (each setting in a fresh process), and the step time.
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import resource
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: I001  (configures torch and XLA for one thread before they load)
import torch
import torch.nn.functional as F
from torch import nn

import models

from torch2xla.runtime._jax_scope import x64

MARK = "@@TRAIN-STEP@@"


# --- step time: eager / inductor / xla --------------------------------------------------------


def _case(name: str):
    """(model, inputs, loss_fn) of a benchmark case."""
    gen = torch.Generator().manual_seed(0)
    if name == "mlp":
        model = models.MLP()
        x = torch.randn(64, 512, generator=gen)
        y = torch.randint(0, 10, (64,), generator=gen)
        return model, (x,), lambda out: F.cross_entropy(out, y)
    if name == "transformer":
        model = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
        x = torch.randn(16, 64, 256, generator=gen)
        return model, (x,), lambda out: out.square().mean()
    raise ValueError(f"unknown case {name!r}")


def _steps(case: str) -> dict:
    torch.manual_seed(0)
    base, inputs, loss_fn = _case(case)
    steps = {}
    for mode in _common.MODES:
        model = copy.deepcopy(base).train()
        fn = _common.compile_fn(model, mode)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(fn=fn, opt=opt):
            opt.zero_grad(set_to_none=True)
            loss_fn(fn(*inputs)).backward()
            opt.step()

        step()  # compile (and check it runs) before timing
        steps[mode] = step
    return steps


def step_times(cases: list[str], rounds: int, n: int) -> dict:
    results = {}
    for case in cases:
        times = _common.interleaved(_steps(case), rounds, n)
        stats = {mode: _common.summary(t) for mode, t in times.items()}
        med = {mode: s["median"] for mode, s in stats.items()}
        results[case] = {
            "ms": {mode: {k: v * 1e3 for k, v in s.items()} for mode, s in stats.items()},
            "xla/eager": med["xla"] / med["eager"],
            "xla/inductor": med["xla"] / med["inductor"],
            "inductor/eager": med["inductor"] / med["eager"],
        }
    return results


# --- remat memory ---------------------------------------------------------------------------


class _Stack(nn.Module):
    def __init__(self, layers: int = 6, d: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(models.GPTBlock(d, heads) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def remat_one(remat: bool, rounds: int, n: int) -> dict:
    """Memory and step time of the block stack with or without remat (run in its own process)."""
    import jax

    torch.manual_seed(0)
    model = _Stack()
    x = torch.randn(8, 256, 256)
    compiled = torch.compile(model, backend="xla", options={"strict": True, "remat": remat})
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        compiled(x).square().mean().backward()
        opt.step()

    step()
    out = compiled(x)
    ctx = out.grad_fn
    fns, vjp_fn = ctx.fns, ctx.vjp_fn
    # The arrays the forward computed; the inputs the backward reads again are not copies.
    residual = sum(leaf.nbytes for leaf in vjp_fn.kept)
    recorded = []
    original_fwd = fns.fwd

    def recording_fwd(*a):  # the forward program's arguments, for XLA's memory analysis
        recorded.append(a)
        return original_fwd(*a)

    fns.fwd = recording_fwd
    compiled(x)
    fns.fwd = original_fwd
    cts = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in ctx.diff_meta]
    with x64():  # as torch2xla traces them
        fwd_mem = original_fwd.lower(*recorded[0]).compile().memory_analysis()
        bwd_mem = fns.bwd.lower(vjp_fn, cts).compile().memory_analysis()
    del out, ctx, vjp_fn

    def total(m) -> int:
        return m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes

    times = _common.interleaved({"step": step}, rounds, n)["step"]
    return {
        "residual_MiB": residual / 2**20,
        "forward_program_MiB": total(fwd_mem) / 2**20,
        "backward_program_MiB": total(bwd_mem) / 2**20,
        "estimated_peak_MiB": max(total(fwd_mem), total(bwd_mem)) / 2**20,
        "process_peak_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10,
        "step_ms": _common.summary(times)["median"] * 1e3,
    }


def remat_memory(rounds: int, n: int) -> dict:
    results = {}
    for remat in (False, True):
        cmd = [
            sys.executable,
            __file__,
            "--remat-child",
            str(int(remat)),
            "--rounds",
            str(rounds),
            "--steps",
            str(n),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
        if proc.returncode or not lines:
            raise RuntimeError(f"remat={remat} failed:\n{proc.stderr[-3000:]}")
        results["remat" if remat else "no remat"] = json.loads(lines[-1][len(MARK) :])
    return results


# --- report ---------------------------------------------------------------------------------


def _print(report: dict) -> None:
    print(f"machine: {report['machine']}")
    for case, r in report.get("step_time", {}).items():
        ms = r["ms"]
        print(
            f"{case:12s} ms/step median: eager {ms['eager']['median']:.3f}  "
            f"inductor {ms['inductor']['median']:.3f}  xla {ms['xla']['median']:.3f}  | "
            f"xla/eager {r['xla/eager']:.2f}  xla/inductor {r['xla/inductor']:.2f}"
        )
    for name, r in report.get("remat", {}).items():
        print(
            f"{name:9s} residuals {r['residual_MiB']:.1f} MiB, forward program "
            f"{r['forward_program_MiB']:.1f} MiB, backward program {r['backward_program_MiB']:.1f}"
            f" MiB, estimated peak {r['estimated_peak_MiB']:.1f} MiB, process peak RSS "
            f"{r['process_peak_rss_MiB']:.0f} MiB, {r['step_ms']:.1f} ms/step"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10, help="steps per mode per round")
    parser.add_argument("--cases", nargs="*", default=["mlp", "transformer"])
    parser.add_argument("--remat-only", action="store_true")
    parser.add_argument("--remat-child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=pathlib.Path, default=None)
    args = parser.parse_args()
    _common.one_thread()
    if args.remat_child is not None:
        result = remat_one(
            bool(args.remat_child), max(args.rounds // 3, 3), max(args.steps // 5, 1)
        )
        print(MARK + json.dumps(result))
        return
    report: dict = {"machine": _common.machine()}
    if not args.remat_only:
        report["step_time"] = step_times(args.cases, args.rounds, args.steps)
    report["remat"] = remat_memory(args.rounds, args.steps)
    _print(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
