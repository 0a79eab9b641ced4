"""Host time of one XLA call by its number of arguments: JAX's checked call of an
ahead-of-time executable against the executable's own ``execute_sharded`` (what the steady call
of ``runtime/_steady.py`` runs), and with some arguments donated.

    python benchmarks/call_args.py [--counts 8 64 187] [--donated 24]

Arguments are 768-element bf16 arrays on JAX's default device; the program reads the first and
the last (every argument kept). Medians of 5 rounds of 300 calls, microseconds a call.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp


def _median_us(fn, calls: int = 300, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t) / calls * 1e6)
    return round(statistics.median(times), 1)


def _first_plus_last(*a):
    return (a[0] + a[-1],)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--counts", nargs="+", type=int, default=[8, 64, 187])
    p.add_argument("--donated", type=int, default=24)
    a = p.parse_args()
    print(f"device: {jax.devices()[0].device_kind}")
    for n in a.counts:
        xs = [jnp.full((768,), i, jnp.bfloat16) for i in range(n)]
        compiled = jax.jit(_first_plus_last, keep_unused=True).lower(*xs).compile()
        unsafe = compiled._executable.unsafe_call
        run, handlers = unsafe.xla_executable.execute_sharded, unsafe.out_handler.handlers
        checked = _median_us(lambda c=compiled, xs=xs: c(*xs))
        direct = _median_us(lambda r=run, h=handlers, xs=xs: r(xs).consume_with_handlers(h))
        print(f"{n} arguments: checked call {checked} us, execute_sharded {direct} us")
    n, k = max(a.counts), a.donated
    xs = [jnp.full((768,), i, jnp.bfloat16) for i in range(n)]

    def bump(*args):
        return (*(x + 1 for x in args[:k]), args[0] + args[-1])

    compiled = jax.jit(bump, keep_unused=True, donate_argnums=tuple(range(k))).lower(*xs).compile()

    def donated_call():
        outs = compiled(*xs)
        xs[:k] = outs[:k]
        return outs

    print(f"{n} arguments, {k} donated: checked call {_median_us(donated_call)} us")


if __name__ == "__main__":
    main()
