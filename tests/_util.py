"""Shared helpers for tests: compile with backend="xla", compare against eager."""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator

import torch
import torch.utils._pytree as pytree

import torch2xla.runtime._program

# A tiny decoder-only LLM config (keyword arguments of transformers' Llama/Mistral/Gemma2
# configs): random weights, fast on the CPU.
TINY_LLM = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


def clone_args(args):
    return pytree.tree_map(lambda a: a.clone() if isinstance(a, torch.Tensor) else a, args)


def assert_same(out, ref, rtol=1.3e-6, atol=1e-5):
    """Values within tolerance, same dtypes, shapes and NaN positions."""
    outs, refs = pytree.tree_leaves(out), pytree.tree_leaves(ref)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        if isinstance(r, torch.Tensor):
            assert isinstance(o, torch.Tensor)
            assert o.dtype == r.dtype, (o.dtype, r.dtype)
            assert o.device == r.device, (o.device, r.device)
            torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert o == r


def run_both(fn, *args, options=None, module=False, **compile_kw):
    """(compiled output, eager output, compiled args after, eager args after)."""
    eager_fn = copy.deepcopy(fn) if module else fn
    a_xla, a_eager = clone_args(args), clone_args(args)
    compiled = torch.compile(fn, backend="xla", options=options or {"strict": True}, **compile_kw)
    out = compiled(*a_xla)
    ref = eager_fn(*a_eager)
    return out, ref, a_xla, a_eager


class ProgramCounter:
    """Counts XLA programs built (to prove a graph really ran through XLA) and keeps them."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        self.programs: list = []
        original = torch2xla.runtime._program.XlaProgram.__init__

        def counting_init(prog, *a, **kw):
            self.count += 1
            original(prog, *a, **kw)
            self.programs.append(prog)

        monkeypatch.setattr(torch2xla.runtime._program.XlaProgram, "__init__", counting_init)


@contextlib.contextmanager
def fresh_dynamo() -> Iterator[None]:
    """Dynamo as in a fresh process on a fresh machine, for tests that count programs.

    Dynamo remembers, per code object, which sizes changed (automatic dynamic shapes), in the
    process and in a profile on disk (PGO, torch 2.11's cache dir): an earlier test or run that
    compiled the same HF forward would make this one's first graph dynamic (one program fewer;
    seen on the GPU host)."""
    pgo = getattr(torch._dynamo, "pgo", None)
    with torch._dynamo.config.patch(automatic_dynamic_local_pgo=False):
        torch._dynamo.reset()
        if pgo is not None and hasattr(pgo, "reset_code_state"):
            pgo.reset_code_state()
        yield


@functools.cache
def _has_disable_compile() -> bool:
    import transformers

    return hasattr(transformers.GenerationConfig(), "disable_compile")


def greedy_generate(model, inputs: dict, new_tokens: int, run: Callable | None = None, **kw):
    """``model.generate``'s greedy tokens, exactly ``new_tokens`` of them (min_new_tokens: a
    random model may draw its eos; every run generates the same length). ``run(fn, **kw)``
    calls ``generate`` where given (a wrapper that keeps warnings). transformers' own compile
    of the decoding steps (inductor, on a GPU with a static cache) stays off unless a
    ``compile_config`` asks for it: eager means eager, and a compiled ``model.forward`` is not
    compiled again around."""
    kw = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False, **kw}
    if "compile_config" not in kw and _has_disable_compile():
        kw.setdefault("disable_compile", True)
    return model.generate(**inputs, **kw) if run is None else run(model.generate, **inputs, **kw)


def assert_generate_matches_eager(
    model, inputs: dict, new_tokens: int, run: Callable | None = None, **kw
) -> None:
    """Greedy ``generate`` with ``model.forward`` compiled by backend="xla" gives eager's tokens
    (``model.forward`` stays compiled, for the caller's counts)."""
    expected = greedy_generate(model, inputs, new_tokens, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    assert torch.equal(greedy_generate(model, inputs, new_tokens, run, **kw), expected)
