"""A long session (issue 23.9): what each compiled-and-dropped pair of graphs leaves behind in
the process, for the ``eager`` backend (Dynamo's own share) and for xla, each in a fresh process.

    python benchmarks/long_session.py [--pairs 1000] [--json FILE]

A pair is one inference graph and one training graph (forward and backward), compiled, called,
then dropped with ``torch._dynamo.reset()`` and ``torch2xla.clear_caches()``
(``tests/test_release._compile_and_drop``). After a warm-up of 5 pairs, the resident set size
is read at each quarter of the run after ``gc.collect()`` and glibc's ``malloc_trim(0)``:
without the trim, RSS also counts the free memory malloc keeps in its arenas, which varies with
the order of allocations and not with what is alive. ``tests/test_release.py`` bounds the
Python heap (tracemalloc) per pair against the eager backend's; this measures native memory
too, which the test cannot afford (about 2 minutes per backend for 1000 pairs).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _rss() -> int:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _child(backend: str, pairs: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from tests.test_release import _compile_and_drop

    lin = torch.nn.Linear(4, 4)
    for i in range(5):  # caches that fill once (Dynamo's, JAX's, ours)
        _compile_and_drop(backend, lin, i % 2)
    start, t0, quarters = _rss(), time.perf_counter(), []
    for i in range(pairs):
        _compile_and_drop(backend, lin, i % 2)  # constants the warm-up saw (see the test)
        if (i + 1) % max(1, pairs // 4) == 0:
            quarters.append(round((_rss() - start) / (i + 1) / 1024, 1))
    return {
        "kib_per_pair_at_quarters": quarters,
        "kib_per_pair": quarters[-1],
        "s_per_pair": round((time.perf_counter() - t0) / pairs, 3),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--child", choices=["eager", "xla"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.child, args.pairs)))
        return {}
    result = {"pairs": args.pairs}
    for backend in ("eager", "xla"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", backend, "--pairs", str(args.pairs)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"},
            check=True,
        )
        result[backend] = json.loads(out.stdout.strip().splitlines()[-1])
    result["xla_over_eager"] = round(
        result["xla"]["kib_per_pair"] / result["eager"]["kib_per_pair"], 3
    )
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
