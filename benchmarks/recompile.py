"""Recompiles: a small GPT-2-style model fed 16 sequence lengths, compile counts and times.

    python benchmarks/recompile.py [--rounds 3] [--json benchmarks/results/recompile.json]

Each mode runs in a fresh process (cold Dynamo, cold in-memory caches, inductor's and JAX's
on-disk caches pointed at empty directories), on one thread, modes interleaved in a shuffled
order every round; medians over rounds. A process feeds the 16 lengths once (``first pass``:
every compile plus one run per length) and then again (``second pass``: everything cached).

Modes: ``eager``; ``inductor`` (``dynamic=True``); ``xla`` (``dynamic=True``, one program per
length, default settings: the persistent cache on, in an empty directory); ``xla+buckets``
(``options={"buckets": "pow2"}``: 16 lengths in 4 buckets); ``xla warm`` and ``xla+buckets
warm`` (a second process on the persistent cache the same mode filled just before); ``xla
no-pcache`` (``TORCH2XLA_PERSISTENT_CACHE=0``). Compile counts: Dynamo graphs, and programs
(inductor: graphs compiled; xla: torch2xla's compiles, from ``torch2xla.cache_info``) and XLA
compiles (backend compiles JAX reported: what the persistent cache did not serve).

The xla process also times the per-call cost of torch2xla's signature key and cache lookup on
the model's graph (``key_us``, ``lookup_us``).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
LENGTHS = (9, 13, 17, 21, 28, 33, 40, 47, 55, 64, 71, 80, 93, 101, 117, 128)
MODES = ("eager", "inductor", "xla", "xla+buckets", "xla no-pcache")
ALL = (*MODES, "xla warm", "xla+buckets warm")


def _model():
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, vocab=512, block=256, dim=64, heads=4, layers=2) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
            self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
            self.scale = 1 / math.sqrt(dim)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    return GPT().eval()


# -- one mode, in its own process ---------------------------------------------------------------
def worker(mode: str) -> dict:
    sys.path.insert(0, str(HERE))
    import _common  # one thread for torch and XLA; configured before torch is used
    import jax
    import torch

    _common.one_thread()
    compiles: list[str] = []  # XLA compiles (what the persistent cache did not serve)
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **kw: (
            compiles.append(event)
            if event == "/jax/core/compile/backend_compile_duration"
            else None
        )
    )
    model = _model()
    inputs = [torch.randint(0, 512, (2, t)) for t in LENGTHS]
    graphs = []
    if mode == "eager":
        fn = model
    elif mode == "inductor":
        from torch._inductor.compile_fx import compile_fx

        def counting(gm, example_inputs):
            graphs.append(gm)
            return compile_fx(gm, example_inputs)

        fn = torch.compile(model, backend=counting, dynamic=True)
    else:
        options = {"buckets": "pow2"} if mode.startswith("xla+buckets") else {}
        fn = torch.compile(model, backend="xla", dynamic=True, options=options)
    passes = []
    with torch.no_grad():
        for _ in range(2):
            t0 = time.perf_counter()
            for idx in inputs:
                out = fn(idx)
            passes.append(time.perf_counter() - t0)
        worst = max((fn(i) - model(i)).abs().max().item() for i in inputs)
    result = {"first_pass_s": passes[0], "second_pass_s": passes[1], "max_diff": worst}
    if mode == "eager":
        result.update(dynamo_graphs=0, programs=0)
    elif mode == "inductor":
        result.update(dynamo_graphs=len(graphs), programs=len(graphs))
    else:
        import torch2xla

        info = torch2xla.cache_info(fn)
        result.update(
            dynamo_graphs=len(info),
            programs=info.compiles,
            compile_s=info.compile_seconds,
            analysis_s=sum(g.analysis_seconds for g in info),
            persistent_hits=sum(s.persistent_hits for g in info for s in g.signatures),
            xla_compiles=len(compiles),
        )
        result.update(_key_cost(fn, inputs[-1]))
    del out
    return result


def _key_cost(fn, idx) -> dict:
    """Per-call microseconds of the signature key and of the cache lookup on this graph."""
    import timeit

    import torch

    from torch2xla.guards._info import _graphs_of

    guards = _graphs_of(fn)[0]
    seen = []
    run = guards.run
    guards.run = lambda args: seen.append(args) or run(args)
    with torch.no_grad():
        fn(idx)
        key = guards.key(seen[0])
        n = 20000
        key_s = min(timeit.repeat(lambda: guards.key(seen[0]), number=n, repeat=5)) / n
        get_s = min(timeit.repeat(lambda: guards.cache.get(key), number=n, repeat=5)) / n
    guards.run = run
    return {"key_us": key_s * 1e6, "lookup_us": get_s * 1e6, "graph_inputs": len(seen[0])}


def _spawn(mode: str, cache_dir: str, inductor_dir: str) -> dict:
    env = dict(os.environ)
    env.update(
        TORCH2XLA_CACHE_DIR=cache_dir,
        TORCHINDUCTOR_CACHE_DIR=inductor_dir,
        TORCHINDUCTOR_FX_GRAPH_CACHE="0",
        TORCHINDUCTOR_AUTOGRAD_CACHE="0",
        PYTHONPATH=str(HERE.parent),
    )
    if mode == "xla no-pcache":
        env["TORCH2XLA_PERSISTENT_CACHE"] = "0"
    base = mode.removesuffix(" warm").removesuffix(" fill").removesuffix(" no-pcache")
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", base],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=pathlib.Path, default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return
    runs: dict[str, list[dict]] = {}
    rng = random.Random(0)
    for r in range(args.rounds):
        order = list(ALL)
        rng.shuffle(order)
        # A warm mode runs right after a process of the same mode filled a fresh cache.
        for mode in order:
            with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as ind:
                if mode.endswith(" warm"):
                    _spawn(mode.replace(" warm", " fill"), cache, ind)
                res = _spawn(mode, cache, ind)
            runs.setdefault(mode, []).append(res)
            print(f"round {r + 1}/{args.rounds} {mode}: {res}", file=sys.stderr, flush=True)
    table = {}
    for mode, results in runs.items():
        row = {k: statistics.median(x[k] for x in results) for k in results[0]}
        table[mode] = row
    eager = table["eager"]["first_pass_s"]
    print(f"{len(LENGTHS)} lengths {LENGTHS[0]}..{LENGTHS[-1]}, batch 2, medians of {args.rounds}")
    print(
        f"{'mode':18} {'graphs':>6} {'programs':>8} {'1st pass s':>10} {'vs eager':>9} "
        f"{'2nd pass s':>10} {'max diff':>9}"
    )
    for mode in ALL:
        row = table[mode]
        print(
            f"{mode:18} {row['dynamo_graphs']:>6.0f} {row['programs']:>8.0f} "
            f"{row['first_pass_s']:>10.2f} {row['first_pass_s'] / eager:>8.1f}x "
            f"{row['second_pass_s']:>10.3f} {row['max_diff']:>9.1e}"
        )
    for mode in [m for m in ALL if m.startswith("xla")]:
        row = table[mode]
        print(
            f"{mode}: torch2xla compile time {row['compile_s']:.2f} s "
            f"(bucketing analysis {row['analysis_s']:.2f} s), XLA compiles "
            f"{row['xla_compiles']:.0f}, {row['persistent_hits']:.0f} executables from the "
            "persistent cache"
        )
    xla = table["xla"]
    print(
        f"signature key: {xla['key_us']:.2f} us, cache lookup: {xla['lookup_us']:.2f} us per call "
        f"({xla['graph_inputs']:.0f} graph inputs)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"lengths": LENGTHS, "runs": runs, "medians": table}, indent=1)
        )


if __name__ == "__main__":
    main()
