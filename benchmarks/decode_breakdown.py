"""Where a decoded token's host time goes in xla's ``generate``: the compiled call's pieces.

    python benchmarks/decode_breakdown.py [--models gpt2 llama1b] [--modes xla xla-ro]
        [--new-tokens 64] [--prompt 128]

Models and modes as ``generate.py`` (bf16 on CUDA, fp32 on the CPU, static cache). After a
warm-up, three ``generate`` runs are timed; in the last, perf_counter totals (no profiler) of
the compiled call (``CompiledGraph``), the XLA executable's call (``_Aot``), the arguments'
import (``ViewCache``) and the write-back of mutated inputs (``torch._foreach_copy_``), per
decoding step. Then the token's executable alone, called back to back with the same
arguments: its host time per call, with and without a wait for each result.
"""

from __future__ import annotations

import argparse
import collections
import functools
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import generate
import jax
import torch

import torch2xla._backend as backend
from torch2xla.runtime import _interop, _jax_scope, _program

_TOTALS: collections.defaultdict = collections.defaultdict(float)
_COUNTS: collections.Counter = collections.Counter()
_LAST: dict = {}


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _TOTALS[name] += time.perf_counter() - t
            _COUNTS[name] += 1

    return wrapper


def _instrument() -> None:
    timed_exe = _timed("executable", _program._Aot.__call__)

    def remember(self, *args):  # (the last call's executable and arguments)
        _LAST["exe"], _LAST["args"] = self, args
        return timed_exe(self, *args)

    _program._Aot.__call__ = remember
    _interop.ViewCache.__call__ = _timed("import", _interop.ViewCache.__call__)
    backend.CompiledGraph.__call__ = _timed("compiled call", backend.CompiledGraph.__call__)
    torch._foreach_copy_ = _timed("write-back", torch._foreach_copy_)


def _alone(device: str, calls: int = 50) -> tuple[float, float]:
    """Host microseconds per call of the last executable, back to back, and waiting for each."""
    exe, args = _LAST["exe"], _LAST["args"]
    with _jax_scope.x64():
        jax.block_until_ready(exe.call(*args))
        t = time.perf_counter()
        outs = [exe.call(*args) for _ in range(calls)]
        back_to_back = (time.perf_counter() - t) / calls
        jax.block_until_ready(outs)
        del outs
        t = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(exe.call(*args))
        waited = (time.perf_counter() - t) / calls
    return 1e6 * back_to_back, 1e6 * waited


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["gpt2", "llama1b"])
    p.add_argument("--modes", nargs="+", default=["xla", "xla-ro"], choices=["xla", "xla-ro"])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args()
    cuda = a.device.startswith("cuda")
    if not cuda:
        _common.one_thread()
    _instrument()
    for name in a.models:
        model = generate.build(name, a.tiny, a.device, torch.bfloat16 if cuda else torch.float32)
        ids = torch.randint(3, model.config.vocab_size, (1, a.prompt), device=a.device)
        n, length = a.new_tokens, a.prompt + a.new_tokens + 1
        for mode in a.modes:
            torch._dynamo.reset()
            original = model.forward
            model.forward = torch.compile(original, **generate.MODE_ARGS[mode])
            generate._generate(model, ids, n + 1, length)
            generate._generate(model, ids, 1, length)
            for _ in range(3):
                _TOTALS.clear()
                _COUNTS.clear()
                _common.sync(a.device)
                t = time.perf_counter()
                generate._generate(model, ids, n + 1, length)
                _common.sync(a.device)
                wall = time.perf_counter() - t
            pieces = ", ".join(
                f"{k} {1e6 * _TOTALS[k] / max(_COUNTS[k], 1):.0f}"
                for k in ("compiled call", "executable", "import", "write-back")
            )
            back_to_back, waited = _alone(a.device)
            print(
                f"{name} {mode}: {1e3 * wall / (n + 1):.2f} ms a token; per step (us): {pieces}; "
                f"the executable alone {back_to_back:.0f} us a call back to back, "
                f"{waited:.0f} waiting for each ({len(_LAST['args'])} arguments)"
            )
            model.forward = original


if __name__ == "__main__":
    main()
