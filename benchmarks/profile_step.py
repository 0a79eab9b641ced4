"""Where a benchmark step's time goes: the GPU kernels (JAX's and torch's alike, through
CUPTI) and how busy the GPU is over the step's wall time.

    python benchmarks/profile_step.py --case resnet50 --task train --mode xla [--dtype bf16] \
        [--options '{"compiler_options": {"xla_gpu_enable_triton_gemm": false}}']

Prints the step's wall time, the summed kernel time per step (if well below the wall time the
step is bound by the host: dispatch, conversions, launches) and the top kernels.
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
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
    parser.add_argument("--mode", default="xla")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=18)
    parser.add_argument(
        "--policy",
        default=None,
        help="experiment: differentiate through jax.checkpoint with this jax.checkpoint_policies "
        "policy (e.g. dots_saveable) and report the residual bytes",
    )
    parser.add_argument(
        "--options",
        type=json.loads,
        default=None,
        help="xla backend options (JSON), as the suite's --options",
    )
    args = parser.parse_args(argv)
    residuals = _patch_training(args.policy)
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
    first()
    for _ in range(3):
        step()
    wall = _common.time_calls(step, args.steps, args.device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if args.device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(args.steps):
            step()
        _common.sync(args.device)
    events = prof.key_averages()
    kernel_us = _common.kernel_us(events) / args.steps
    host_t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    host = (time.perf_counter() - host_t0) / args.steps  # no sync: the host's own time
    _common.sync(args.device)
    print(
        f"{args.case} {args.task} {args.dtype} {args.mode}: wall {wall * 1e3:.2f} ms/step, "
        f"kernels {kernel_us / 1e3:.2f} ms/step, host issue {host * 1e3:.2f} ms/step"
    )
    if residuals:
        print(f"residuals kept for the backward: {residuals[-1] / 2**20:.1f} MiB")
    print(events.table(sort_by="device_time_total", row_limit=args.rows, max_name_column_width=70))


def _patch_training(policy_name: str | None) -> list[int]:
    """Records the residual bytes of each training forward; with ``policy_name``, wraps the
    differentiated function in ``jax.checkpoint`` with that policy (an experiment)."""
    import jax

    from torch2xla.autodiff import _train_fns
    from torch2xla.runtime import _program

    sizes: list[int] = []
    original = _train_fns.build_train_fns

    def build(flat_fn, *args, **kwargs):
        if policy_name:
            policy = getattr(jax.checkpoint_policies, policy_name)
            flat_fn = jax.checkpoint(flat_fn, policy=policy)
        fns = original(flat_fn, *args, **kwargs)
        fns.fwd = _Recording(fns.fwd, sizes)
        return fns

    _program.build_train_fns = build
    return sizes


class _Recording:
    """A jitted forward that also records the bytes of the residuals it returns."""

    def __init__(self, jitted, sizes: list[int]) -> None:
        self.jitted, self.sizes = jitted, sizes

    def __getattr__(self, name: str):  # trace, lower, ... of the jitted function
        return getattr(self.jitted, name)

    def __call__(self, *args):
        import jax

        out = self.jitted(*args)
        res = out[2]  # computed residuals only: the inputs the backward reads are not copies
        leaves = res.kept if hasattr(res, "kept") else jax.tree_util.tree_leaves(res)
        self.sizes.append(sum(leaf.nbytes for leaf in leaves))
        return out


if __name__ == "__main__":
    main()
