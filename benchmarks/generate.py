"""LLM decoding speed: HF ``generate`` with a static KV cache, eager vs inductor vs xla.

    python benchmarks/generate.py [--models gpt2 llama1b] [--batches 1 8] [--new-tokens 128]
        [--prompt 512] [--modes eager inductor inductor-ro xla xla-ro hf-inductor hf-xla]
        [--rounds 3]
        [--device cuda] [--json benchmarks/results/generate_cuda.json]
    python benchmarks/generate.py --tiny          # CPU smoke test: tiny models, short runs
    python benchmarks/generate.py --models gpt2 --batches 1 --profile DIR   # where a token goes

Models are built from their configs with random weights (nothing is downloaded): ``gpt2`` is
GPT-2 124M (HF's default ``GPT2Config``), ``llama1b`` a ~1.2B Llama (hidden 2048, 16 layers,
MLP 8192, 32 heads with 8 KV heads, vocabulary 128256, tied embeddings: Llama-3.2-1B's shapes).
bf16 on CUDA, fp32 on the CPU. Modes: ``eager``; ``inductor`` and ``xla`` compiled with the
default mode, ``inductor-ro`` and ``xla-ro`` with ``mode="reduce-overhead"``: each compiles
``model.forward`` (``torch.compile(model.forward, backend=..., mode=...)``), so the prompt's
forward runs compiled too. ``hf-inductor`` and ``hf-xla``: transformers' own compile of the
decoding steps (``generate(..., compile_config=CompileConfig(backend=...))``, its default mode
"reduce-overhead"; the prompt's forward runs eagerly); ``hf-inductor`` is what a static cache on
a GPU gets unasked. Every other mode turns that compile off (``disable_compile=True``): without
it, "eager" on a GPU was inductor, and a compiled ``model.forward`` ran inside inductor's graph.

Per model, batch size and mode, after one warm-up of each call (timed as ``first_call_s``: the
compiles), every round times ``generate`` of 1 token (the prefill: the prompt's forward and one
greedy pick) and of ``N + 1`` tokens, both with one static cache size (prompt + N + 1):

- ``prefill_ms``: the 1-token generate;
- ``ms_per_token``: (the (N+1)-token generate - the 1-token generate) / N, the decoding steps.

Medians over rounds. ``tokens_match``: the mode's tokens equal eager's (fp32 should; bf16 may
part after a near tie). ``programs``: XLA programs compiled (xla modes). A mode that fails is
kept as a row with its error. One mode at a time, Dynamo reset between modes (their graphs
would share one code object's cache). Results: a table on stdout and JSON.

With ``--profile DIR``, each mode also profiles one (N+1)-token generate after its timing:
``DIR/<model>_b<batch>_<mode>.txt`` holds the host's functions by own time (cProfile) and the
device's kernels (torch's profiler, through CUPTI, so XLA's kernels too), and the row gains
``kernel_ms_per_token`` (summed kernel time per generated token: far below ``ms_per_token``,
the decode is bound by the host).
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import statistics
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import torch

MODE_ARGS = {
    "eager": None,
    "inductor": {"backend": "inductor"},
    "inductor-ro": {"backend": "inductor", "mode": "reduce-overhead"},
    "xla": {"backend": "xla"},
    "xla-ro": {"backend": "xla", "mode": "reduce-overhead"},
}
# transformers' own compile of the decoding steps (``generate`` compiles ``model.__call__`` with
# a ``CompileConfig``, the prompt's forward runs eagerly): its default (inductor,
# reduce-overhead), which a static cache on a GPU gets unasked, and the same naming "xla".
HF_MODES = {"hf-inductor": {}, "hf-xla": {"backend": "xla"}}


def build(name: str, tiny: bool, device: str, dtype: torch.dtype) -> torch.nn.Module:
    """The model ``name`` with random weights (seeded), in eval mode on ``device``."""
    import transformers

    torch.manual_seed(0)
    if name == "gpt2":
        config = (
            transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=256)
            if tiny
            else transformers.GPT2Config()
        )
        cls = transformers.GPT2LMHeadModel
    elif name == "llama1b":
        config = _common.llama1b_config(tiny)
        cls = transformers.LlamaForCausalLM
    else:
        raise ValueError(f"unknown model {name!r} (gpt2, llama1b)")
    with torch.device(device):
        model = cls(config)
    return model.to(dtype).eval()


def _generate(model, ids, new_tokens: int, cache_len: int, compile_config=None):
    import transformers

    # One cache size for both generates (a static cache sized per call would compile the
    # prompt's forward twice). Older transformers lack max_cache_len; there the cache keeps
    # the largest size seen, and the warm-up runs the long generate first.
    sized = {}
    if hasattr(transformers.GenerationConfig(), "max_cache_len"):
        sized["max_cache_len"] = cache_len
    # Without a CompileConfig, transformers' own compile stays off: "eager" is eager, and a
    # compiled model.forward is not compiled again inside transformers' (inductor's) compile.
    if compile_config is not None:
        sized["compile_config"] = compile_config
    else:
        sized["disable_compile"] = True
    return model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,  # a random model may pick its end token early
        do_sample=False,
        pad_token_id=0,
        cache_implementation="static",
        **sized,
    )


def _profile(gen, model, ids, new_tokens: int, cache_len: int, device: str, path) -> float:
    """Writes the host and kernel profiles of one (N+1)-token generate (``gen``, a
    ``_generate``) to ``path``; returns the summed kernel milliseconds per generated token."""
    import cProfile
    import io
    import pstats

    host = cProfile.Profile()
    host.enable()
    gen(model, ids, new_tokens + 1, cache_len)
    _common.sync(device)
    host.disable()
    text = io.StringIO()
    pstats.Stats(host, stream=text).sort_stats("tottime").print_stats(40)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        gen(model, ids, new_tokens + 1, cache_len)
        _common.sync(device)
    events = prof.key_averages()
    kernel_ms = _common.kernel_us(events) / 1e3
    table = events.table(sort_by="device_time_total", row_limit=30, max_name_column_width=80)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"host (cProfile, by own time):\n{text.getvalue()}\ndevice:\n{table}\n")
    return kernel_ms / (new_tokens + 1)


def measure(
    model, mode: str, ids, new_tokens: int, rounds: int, device: str, profile: str | None = None
) -> dict:
    """One row: warm-up (compiles), then ``rounds`` of the 1-token and (N+1)-token generates;
    with ``profile`` (a folder), one more profiled generate (``_profile``)."""
    import transformers

    import torch2xla

    torch._dynamo.reset()
    model.__dict__.pop("_compiled_call", None)  # transformers' compile of an earlier mode
    args = MODE_ARGS.get(mode)
    original = model.forward
    if args is not None:
        model.forward = torch.compile(original, **args)
    gen = _generate
    if mode in HF_MODES:
        config = transformers.CompileConfig(**HF_MODES[mode])
        if not device.startswith("cuda"):
            config._compile_all_devices = True  # (transformers compiles on GPUs only, unasked)
        gen = functools.partial(_generate, compile_config=config)
    cache_len = ids.shape[1] + new_tokens + 1
    row: dict = {"mode": mode}
    try:
        t0 = time.perf_counter()
        tokens = gen(model, ids, new_tokens + 1, cache_len)
        gen(model, ids, 1, cache_len)
        _common.sync(device)
        row["first_call_s"] = time.perf_counter() - t0
        prefill, full = [], []
        for _ in range(rounds):
            for n, out in ((1, prefill), (new_tokens + 1, full)):
                _common.sync(device)
                t = time.perf_counter()
                gen(model, ids, n, cache_len)
                _common.sync(device)
                out.append(time.perf_counter() - t)
        row["prefill_ms"] = 1e3 * statistics.median(prefill)
        decode = statistics.median(full) - statistics.median(prefill)
        row["ms_per_token"] = 1e3 * decode / new_tokens
        row["tokens"] = tokens
        if "xla" in mode:
            compiled = model._compiled_call if mode in HF_MODES else model.forward
            row["programs"] = torch2xla.cache_info(compiled).misses
        if profile is not None:
            name = f"{type(model).__name__}_b{ids.shape[0]}_{mode}.txt"
            path = pathlib.Path(profile) / name
            row["kernel_ms_per_token"] = _profile(
                gen, model, ids, new_tokens, cache_len, device, path
            )
    except Exception as e:  # noqa: BLE001 -- a failing mode is a result of the benchmark
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        row["traceback"] = traceback.format_exc(limit=8)
    finally:
        if args is not None:
            model.forward = original
        torch._dynamo.reset()
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["gpt2", "llama1b"])
    p.add_argument("--batches", nargs="+", type=int, default=None)
    p.add_argument("--new-tokens", type=int, default=None)
    p.add_argument("--prompt", type=int, default=None, help="prompt length (default 512)")
    modes = [*MODE_ARGS, *HF_MODES]
    p.add_argument("--modes", nargs="+", default=modes, choices=modes)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="tiny models and short runs (CPU smoke)")
    p.add_argument("--json", default=None)
    p.add_argument("--profile", default=None, help="folder for per-mode host and kernel profiles")
    a = p.parse_args()
    batches = a.batches or ([1, 2] if a.tiny else [1, 8])
    new_tokens = a.new_tokens or (8 if a.tiny else 128)
    prompt = a.prompt or (32 if a.tiny else 512)
    cuda = a.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:
        _common.one_thread()
    out_path = a.json or (
        f"benchmarks/results/generate_{'cuda' if cuda else 'cpu'}{'_tiny' if a.tiny else ''}.json"
    )

    rows = []
    for name in a.models:
        model = build(name, a.tiny, a.device, dtype)
        vocab = model.config.vocab_size
        for batch in batches:
            torch.manual_seed(1)
            ids = torch.randint(3, vocab, (batch, prompt), device=a.device)
            eager_tokens = None
            for mode in a.modes:
                row = {
                    "model": name,
                    "batch": batch,
                    "prompt": prompt,
                    "new_tokens": new_tokens,
                    "dtype": str(dtype).removeprefix("torch."),
                    **measure(model, mode, ids, new_tokens, a.rounds, a.device, a.profile),
                }
                tokens = row.pop("tokens", None)
                if mode == "eager":
                    eager_tokens = tokens
                elif tokens is not None and eager_tokens is not None:
                    row["tokens_match"] = bool(torch.equal(tokens, eager_tokens))
                rows.append(row)
                print(_line(row), flush=True)
        del model
        if cuda:
            torch.cuda.empty_cache()

    print()
    print(_table(rows))
    result = {"machine": _common.machine(), "device": a.device, "tiny": a.tiny, "rows": rows}
    path = pathlib.Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"\nwritten: {path}")


def _fmt(x, spec: str) -> str:
    width = spec.split(".")[0].rstrip("dfs")
    return format("-", f">{width}") if x is None else format(x, spec)


def _line(r: dict) -> str:
    if "error" in r:
        return f"{r['model']} b{r['batch']} {r['mode']}: ERROR {r['error']}"
    return (
        f"{r['model']} b{r['batch']} {r['mode']}: {r['ms_per_token']:.2f} ms/token, "
        f"prefill {r['prefill_ms']:.1f} ms, first call {r['first_call_s']:.1f} s"
        + (
            f", kernels {r['kernel_ms_per_token']:.2f} ms/token"
            if "kernel_ms_per_token" in r
            else ""
        )
    )


def _table(rows: list[dict]) -> str:
    head = (
        f"{'model':8} {'batch':>5} {'mode':12} {'ms/token':>9} {'prefill ms':>11} "
        f"{'first s':>8} {'programs':>8} {'= eager':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        match = r.get("tokens_match")
        lines.append(
            f"{r['model']:8} {r['batch']:>5} {r['mode']:12} "
            f"{_fmt(r.get('ms_per_token'), '9.2f')} {_fmt(r.get('prefill_ms'), '11.1f')} "
            f"{_fmt(r.get('first_call_s'), '8.1f')} {_fmt(r.get('programs'), '8d')} "
            f"{'-' if match is None else ('yes' if match else 'no'):>7}"
            + (f"  ERROR {r['error']}" if "error" in r else "")
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
