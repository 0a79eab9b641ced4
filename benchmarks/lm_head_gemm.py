"""GPT-2's LM-head product alone, XLA against torch, at the vocabulary's length and padded.

    python benchmarks/lm_head_gemm.py [--device cuda] [--n 50257,50304] [--dtype fp32]

(4096, 768) x (768, N) as the suite's GPT-2 step runs it (batch 8 x 512 tokens, the tied
embedding's transpose as the right operand), TF32 allowed on both sides in fp32. Prints the
median milliseconds of each, and XLA's with its Triton GEMMs turned off (cuBLAS only), to show
how the output's row length (50257 floats is not a multiple of 16 bytes) moves each backend.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import jax
import jax.numpy as jnp
import torch


def _median_ms(fn, sync, reps: int = 30) -> float:
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--n", type=lambda s: [int(v) for v in s.split(",")], default=[50257, 50304]
    )
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--width", type=int, default=768)
    args = parser.parse_args()
    _common.allow_tf32()
    for n in args.n:
        row = _row(n, args.tokens, args.width, args.dtype, args.device)
        print(
            " ".join(
                f"{k} {v:.3f} ms" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
            ),
            flush=True,
        )


def _row(n: int, tokens: int, width: int, dtype: str, device: str) -> dict:
    tdtype = torch.float32 if dtype == "fp32" else torch.bfloat16
    x = torch.randn(tokens, width, device=device, dtype=tdtype)
    w = torch.randn(n, width, device=device, dtype=tdtype)
    sync = functools.partial(_common.sync, device)
    row = {"n": n, "torch": _median_ms(lambda: x @ w.T, sync)}
    cuda = device.startswith("cuda")
    dev = jax.devices("gpu" if cuda else "cpu")[0]
    jdtype = jnp.float32 if dtype == "fp32" else jnp.bfloat16
    jx, jw = (jax.device_put(jnp.asarray(t.float().cpu().numpy(), jdtype), dev) for t in (x, w))
    variants = {"xla": None, "xla cublas": {"xla_gpu_enable_triton_gemm": False}}
    for name, options in variants.items():
        if options and not cuda:
            continue
        # DEFAULT precision: TF32 on the GPU for float32, as torch2xla lowers under "high"
        fn = jax.jit(lambda a, b: a @ b.T, compiler_options=options)
        row[name] = _median_ms(lambda f=fn: f(jx, jw).block_until_ready(), sync)
    return row


if __name__ == "__main__":
    main()
