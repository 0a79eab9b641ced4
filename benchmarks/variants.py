"""A/B of backend variants on the suite's cases: eager, inductor and xla variants interleaved.

    python benchmarks/variants.py --device cuda --cases resnet50:train:bf16,gpt2:train:fp32 \\
        --variants 'eager;inductor;xla;xla:{"residual_layouts": "default"};xla:mode=reduce-overhead'

Variants are separated by ``;``. A variant is a backend, optionally followed by ``:`` and either
``mode=<torch.compile mode>``, ``env=NAME=VALUE`` (set while the variant compiles) or the
backend's options as a JSON object. Steps are the suite's (``suite._make_step``);
every variant's first call is compared with eager's; times are medians over interleaved rounds.
Prints one JSON object per case, with each variant's ratio to the first xla variant.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import suite
import torch


def parse_variant(spec: str) -> tuple[str, dict, dict]:
    """``backend[:mode=M | :env=NAME=VALUE | :{options}]`` -> (backend, torch.compile kwargs,
    environment variables set while the variant compiles)."""
    backend, _, rest = spec.partition(":")
    if not rest:
        return backend, {}, {}
    if rest.startswith("mode="):
        return backend, {"mode": rest[len("mode=") :]}, {}
    if rest.startswith("env="):
        name, _, value = rest[len("env=") :].partition("=")
        return backend, {}, {name: value}
    return backend, {"options": json.loads(rest)}, {}


@contextlib.contextmanager
def _environ(values: dict):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_case(
    case: str, task: str, dtype: str, device: str, variants: list[str], rounds: int, target_s: float
) -> dict:
    base, inputs, loss_fn, autocast = suite._setup(case, dtype, device)
    steps, result = {}, {"case": case, "task": task, "dtype": dtype, "variants": {}}
    ref = None
    for spec in variants:
        backend, compile_kw, env = parse_variant(spec)
        if env:
            # The same backend with the same arguments would be Dynamo's cached one, and the
            # graph would not be traced again under the variables: a new callable is a new one.
            backend = functools.partial(torch._dynamo.lookup_backend(backend))
        step, first = suite._make_step(
            copy.deepcopy(base), backend, task, inputs, loss_fn, autocast, device, compile_kw
        )
        with _environ(env):  # read while tracing: the first calls compile every program
            _common.sync(device)
            t0 = time.perf_counter()
            value = first()
            _common.sync(device)
            info = {"first_call_s": round(time.perf_counter() - t0, 2)}
            step()  # the programs the steady steps run are compiled now
        if ref is None:
            ref = value
        else:
            info.update(suite._diff(value, ref))
        result["variants"][spec] = info
        steps[spec] = step
    per = {
        k: max(1, int(target_s / max(_common.time_calls(s, 1, device), 1e-6)))
        for k, s in steps.items()
    }
    times = suite._interleave(steps, per, rounds, device)
    base_xla = next((v for v in variants if v.startswith("xla")), None)
    for spec, ts in times.items():
        med = _common.summary(ts)["median"] * 1e3
        result["variants"][spec]["median_ms"] = round(med, 3)
    if base_xla:
        ref_ms = result["variants"][base_xla]["median_ms"]
        for info in result["variants"].values():
            info["ratio_to_" + base_xla] = round(info["median_ms"] / ref_ms, 3)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cases", required=True, help="case:task:dtype,...")
    parser.add_argument("--variants", default="eager;inductor;xla")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target-s", type=float, default=0.3, help="seconds per sample")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        _common.one_thread()
    for spec in args.cases.split(","):
        case, task, dtype = spec.split(":")
        torch._dynamo.reset()
        out = run_case(
            case, task, dtype, args.device, args.variants.split(";"), args.rounds, args.target_s
        )
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
