"""Host cost of a compiled call with many tensor arguments: a compiled AdamW step (issues 24/25).

    python benchmarks/optimizer_step.py [--params 146] [--size 16] [--rounds 15] [--calls 30]
                                        [--profile] [--json benchmarks/results/optimizer_step.json]

``torch.compile(opt.step)`` of AdamW over ``--params`` parameters of ``--size`` floats (146:
a 1.24B Llama's count; its program has 5 arguments per parameter and writes 4 of them back). The
tensors are tiny, so the time is the host's per-argument and per-output cost. Modes: eager,
inductor, xla, and ``dynamo`` (a backend that runs nothing and returns the compile's outputs:
Dynamo's guards and frame, which every backend pays). One thread, modes interleaved in a shuffled
order every round, medians over rounds. Beside the times, the Python calls of one steady step
(``sys.setprofile``), all and torch2xla's. ``--profile`` prints cProfile's top functions of
xla's step.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pathlib
import pstats
import sys
import time

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]  # (this checkout's torch2xla, not an installed one)
import _common
import overhead
import torch

MODES = (*_common.MODES, "dynamo")


def _dynamo_only(gm, example_inputs):
    """A backend that runs nothing: the graph's outputs of the compile, returned by every call
    (the step changes no parameter). What is left is Dynamo's guards and frame, the floor every
    backend pays."""
    outs = gm.forward(*example_inputs)
    return lambda *args: outs


def optimizer_steps(n_params: int, size: int, device: str = "cpu") -> dict:
    """One AdamW step per mode, each on its own parameters (the same values)."""
    steps = {}
    for mode in MODES:
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(size, device=device)) for _ in range(n_params)]
        for p in params:
            p.grad = torch.randn(size, device=device)
        opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
        if mode == "dynamo":
            steps[mode] = torch.compile(opt.step, backend=_dynamo_only)
        else:
            steps[mode] = _common.compile_fn(opt.step, mode)
    return steps


def measure(
    n_params: int, size: int, rounds: int, calls: int, device: str = "cpu", clock=time.perf_counter
) -> dict:
    result = {"machine": _common.machine(), "device": device, "params": n_params, "size": size}
    result.update(rounds=rounds, calls=calls, clock=clock.__name__)
    steps = optimizer_steps(n_params, size, device)
    for step in steps.values():  # compile and warm up
        for _ in range(3):
            step()
    times = _common.interleaved(steps, rounds, calls, device, clock=clock)
    result["step_us"] = {k: overhead._us(v) for k, v in times.items()}
    result["step_calls"] = {k: overhead.python_calls(v) for k, v in steps.items()}
    return result


def report(result: dict) -> str:
    us, counts = result["step_us"], result["step_calls"]
    lines = [
        (
            f"AdamW step of {result['params']} parameters of {result['size']} floats on "
            f"{result['device']} ({result['rounds']} interleaved rounds of {result['calls']} "
            f"steps, 1 thread, {result['clock']}): microseconds, median [q1, q3]; Python calls (all / torch2xla's)"
        )
    ]
    for mode in MODES:
        s, c = us[mode], counts[mode]
        lines.append(
            f"{mode:10s} {s['median']:9.1f} [{s['q1']:.1f}, {s['q3']:.1f}] {c[0]:7d} / {c[1]}"
        )
    lines.append(
        f"xla / inductor {us['xla']['median'] / us['inductor']['median']:.2f}x; "
        f"xla - dynamo {us['xla']['median'] - us['dynamo']['median']:.1f} us"
    )
    return "\n".join(lines)


def profile(n_params: int, size: int, calls: int, device: str = "cpu") -> str:
    step = optimizer_steps(n_params, size, device)["xla"]
    for _ in range(3):
        step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        step()
    profiler.disable()
    out = []
    stats = pstats.Stats(profiler, stream=_Lines(out)).sort_stats("tottime")
    stats.print_stats(30)
    return "".join(out)


class _Lines:
    def __init__(self, out: list) -> None:
        self.write = out.append


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=int, default=146)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the process's CPU time (time.process_time, all its threads), not the wall "
        "clock: on a loaded machine it is less changed by other processes",
    )
    parser.add_argument("--profile", action="store_true", help="cProfile xla's step")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write results here")
    args = parser.parse_args(argv)
    _common.one_thread()
    if args.profile:
        print(profile(args.params, args.size, args.calls * 10, args.device))
        return {}
    clock = time.process_time if args.cpu_time else time.perf_counter
    result = measure(args.params, args.size, args.rounds, args.calls, args.device, clock)
    print(report(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
