"""Shared helpers for tests: compile with backend="xla", compare against eager."""

from __future__ import annotations

import contextlib
import copy
import functools
import warnings
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


@functools.cache
def onednn_bf16_lstm_error() -> str | None:
    """Eager's error where its oneDNN LSTM cannot run in bfloat16 autocast on this CPU (it
    needs AVX-512: on an AVX2-only AMD EPYC eager itself raises 'could not create a primitive
    descriptor for the LSTM forward propagation primitive'), or None where it runs."""
    if not torch.backends.mkldnn.is_available():
        return "oneDNN is not built"
    lstm = torch.nn.LSTM(4, 4, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.randn(1, 2, 4))
    except RuntimeError as e:
        if "primitive descriptor" in str(e):
            return str(e).split(". ")[0]
        raise
    return None


def skip_unless_onednn_bf16_lstm():
    """A pytest mark: skip where eager's oneDNN bfloat16 LSTM raises on this CPU, quoting it."""
    import pytest

    error = onednn_bf16_lstm_error()
    return pytest.mark.skipif(
        error is not None, reason=f"eager's oneDNN bfloat16 LSTM raises on this CPU: {error}"
    )


def rounded_once(fn, dtype):
    """``fn`` computed in float64 on its floating tensor operands rounded to ``dtype``, each
    floating result rounded once to ``dtype``: the reference for eager's CPU half-precision
    convolutions, which round partial sums (up to an ulp off the product rounded once):
    float16 always, bfloat16 on CPUs without AVX-512 (oneDNN's AVX2 path, seen on an AMD
    EPYC)."""

    def floating(a):
        return isinstance(a, torch.Tensor) and a.is_floating_point()

    def reference(*args):
        out = fn(*(a.to(dtype).double() if floating(a) else a for a in args))
        return pytree.tree_map(lambda t: t.to(dtype) if floating(t) else t, out)

    return reference


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


def dynamo_graphs_in_eager(model, inputs: dict, new_tokens: int, **kw) -> int:
    """How many graphs Dynamo traces for this generation when they run as eager's own ops
    (a counting backend), from a fresh Dynamo, which is left fresh again.

    A program count's floor: our outputs have eager's layouts, so Dynamo's guards on them
    fail where they fail in eager (a sliding-window cache kept as eager's view of its last
    tokens has the prompt's strides at the first step and the step's after: one graph more,
    under every backend)."""
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    forward = model.forward
    with fresh_dynamo():
        model.forward = torch.compile(forward, backend=count)
        try:
            greedy_generate(model, inputs, new_tokens, **kw)
        finally:
            model.forward = forward
    with fresh_dynamo():
        pass
    return len(graphs)


def assert_generate_matches_eager(
    model, inputs: dict, new_tokens: int, run: Callable | None = None, **kw
) -> None:
    """Greedy ``generate`` with ``model.forward`` compiled by backend="xla" gives eager's tokens
    (``model.forward`` stays compiled, for the caller's counts)."""
    expected = greedy_generate(model, inputs, new_tokens, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    assert torch.equal(greedy_generate(model, inputs, new_tokens, run, **kw), expected)


def leaf(*shape, seed=0, dtype=torch.float32, rg=True):
    """A seeded ``randn`` (drawn in float64, then cast) that requires grad unless ``rg`` is off."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    return t.requires_grad_(rg)


def observe_scenario(scenario, compiled: bool, options: dict | None = None) -> list:
    """What ``scenario(C, rec)`` records, ``C`` compiling with torch2xla (``options``) or not,
    after a fresh Dynamo and seed; an error ends it, recorded by type and first line."""
    seen: list = []

    def C(f):
        return torch.compile(f, backend="xla", options=options) if compiled else f

    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        scenario(C, lambda label, value: seen.append((label, value)))
    except Exception as e:
        seen.append(("raised", (type(e), str(e).split("\n")[0])))
    return seen


def assert_same_recorded(got, want, where: str, tol: float) -> None:
    """A recorded value against eager's: tensors by dtype, shape, requires_grad and values
    (``tol``, relative and absolute), containers item by item, anything else by ``==``."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), where
        assert (got.dtype, got.shape, got.requires_grad) == (
            want.dtype,
            want.shape,
            want.requires_grad,
        ), where
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=where)
    elif isinstance(want, list | tuple):
        assert isinstance(got, list | tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_recorded(g, w, f"{where}[{i}]", tol)
    else:
        assert got == want, where


def check_scenario(scenario, options: dict | None, tol: float) -> list:
    """``scenario`` compiled records what it records in eager (labels, then values); eager's."""
    want = observe_scenario(scenario, False)
    got = observe_scenario(scenario, True, options)
    assert [label for label, _ in got] == [label for label, _ in want], (got, want)
    for (label, g), (_, w) in zip(got, want):
        assert_same_recorded(g, w, label, tol)
    return want


def no_fallback(fn, *args, **kwargs):
    """``fn``'s result; no op of it ran in eager PyTorch (no ``FallbackWarning``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    fallbacks = [
        str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)
    ]
    assert not fallbacks, fallbacks[0]
    return out


# torch 2.13 or later: the version the whole suite runs on here. Below it (the GPU host's torch
# 2.11), Dynamo turns some Python floats into constants (a float that is a division's numerator or
# a power's base: a program per value, before any backend) and traces custom autograd Functions
# differently; tests gate those assertions on this.
TORCH_2_13 = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)


def strict_compiled(fn):
    """``fn`` compiled with ``backend="xla"`` in strict mode (an op left to eager raises)."""
    return torch.compile(fn, backend="xla", options={"strict": True})


def bits_equal(out, ref):
    """Same dtype and shape, and the same values bit for bit (NaN where NaN, signed zeros;
    complex numbers part by part)."""
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out, ref)
    if out.is_complex():
        out, ref = torch.view_as_real(out), torch.view_as_real(ref)
    if out.is_floating_point():
        assert torch.equal(out.isnan(), ref.isnan()), (out, ref)
        fin = ~ref.isnan()
        assert torch.equal(out[fin], ref[fin]), (out, ref)
        assert torch.equal(out[fin].signbit(), ref[fin].signbit()), (out, ref)
    else:
        assert torch.equal(out, ref), (out, ref)


def same_bits_as_eager(fn, *args):
    """``fn`` compiled in strict mode gives eager's outputs bit for bit (``bits_equal``)."""
    torch._dynamo.reset()
    ref = fn(*clone_args(args))
    out = strict_compiled(fn)(*clone_args(args))
    outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        bits_equal(o, r)
