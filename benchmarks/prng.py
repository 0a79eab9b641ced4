"""The cost of a dropout mask on the GPU: JAX's PRNG implementations against torch's dropout.

    python benchmarks/prng.py

Times ``jax.random.bernoulli`` over GPT-2's attention-probability shape (8x12x512x512) with a
key of each implementation (threefry2x32, rbg, unsafe_rbg), inside a jitted dropout, and
torch's ``F.dropout`` on the same shape, as milliseconds per call.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import torch

SHAPE = (8, 12, 512, 512)


def _time(fn, n: int = 50) -> float:
    fn()
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e3


def main() -> None:
    x = jnp.ones(SHAPE, jnp.float32)
    for impl in ("threefry2x32", "rbg", "unsafe_rbg"):
        key = jax.random.key(0, impl=impl)

        @jax.jit
        def drop(x, key):
            keep = jax.random.bernoulli(jax.random.fold_in(key, 1), 0.9, x.shape)
            return jnp.where(keep, x / 0.9, 0.0)

        ms = _time(lambda key=key: drop(x, key).block_until_ready())
        print(f"jax {impl}: {ms:.3f} ms")
    if torch.cuda.is_available():
        t = torch.ones(SHAPE, device="cuda")

        def tdrop():
            torch.nn.functional.dropout(t, 0.1, training=True)
            torch.cuda.synchronize()

        print(f"torch dropout: {_time(tdrop):.3f} ms")


if __name__ == "__main__":
    main()
