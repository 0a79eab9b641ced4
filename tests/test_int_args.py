"""Int arguments of a compiled graph (``capture/_int_values.py``): an int the graph only computes
with (arithmetic, then an operand of elementwise ops, or a number it returns) reaches one program
as a 0-d int64 tensor, so its values share that program; an int that sizes a tensor stays a
constant of its program (one per value), with one ``IntArgumentWarning`` saying why.

HF's sliding-window caches (Mistral, Gemma2...) pass their length, ``cumulative_length_int``, as
such an int, one more every token: ``generate`` compiled one program per token."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import torch2xla
from tests._util import (
    TINY_LLM,
    ProgramCounter,
    dynamo_graphs_in_eager,
    fresh_dynamo,
    greedy_generate,
)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():  # program counts are those of a fresh process
        yield


def _assert_equal(got, want) -> None:
    """Same values (exactly), dtypes and Python types."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w), (type(g), type(w))
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        else:
            assert g == w


def _values(x, n: int):
    # n only as a value: beside tensors, in int arithmetic, returned (max: torch.sym_max)
    return (
        x + n,
        x * (torch.arange(x.shape[0]) < n),
        (x.to(torch.int64) * 3) // (n - 7),
        n * 2 + 1,
        max(n - 5, 0),
    )


_VALUES = (2, 3, 4, 5, 6, 8, 9, 10, 11, 12)  # (not 7: a division by zero)


def _run(fn, x, values, **kw):
    compiled = torch.compile(fn, backend="xla", **kw)
    for n in values:
        _assert_equal(compiled(x, n), fn(x, n))
    return compiled


@torch.no_grad()
def test_int_used_as_a_value_compiles_once(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    x = torch.randn(8) * 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no IntArgumentWarning)
        compiled = _run(_values, x, _VALUES, dynamic=True)
    assert counter.count == 1
    assert torch2xla.cache_info(compiled).misses == 1


@torch.no_grad()
def test_int_used_as_a_value_after_dynamos_first_static_trace(monkeypatch):
    # Dynamo traces the first value as a constant, the next ones with a SymInt: two programs.
    counter = ProgramCounter(monkeypatch)
    _run(_values, torch.randn(8), _VALUES)
    assert counter.count == 2


@torch.no_grad()
def test_int_value_errors_as_eager():
    # The divisor is zero at run time (n == 7): eager's integer division by zero raises.
    compiled = torch.compile(_values, backend="xla", dynamic=True)
    x = torch.randn(8)
    _assert_equal(compiled(x, 3), _values(x, 3))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _values(x, 7)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(x, 7)
    _assert_equal(compiled(x, 9), _values(x, 9))


def _with_0d(x, y, n: int):
    # A 0-d int32 tensor plus an int stays int32 (plus a 0-d int64 tensor it would be int64).
    return x * n, y + n


@torch.no_grad()
def test_int_meeting_a_0d_int_tensor_keeps_its_dtype():
    compiled = torch.compile(_with_0d, backend="xla", dynamic=True)
    x, y = torch.randn(4), torch.tensor(5, dtype=torch.int32)
    with pytest.warns(torch2xla.IntArgumentWarning, match="0-d torch.int32 tensor"):
        for n in (3, 4, 2**31 + 5):
            _assert_equal(compiled(x, y, n), _with_0d(x, y, n))


def _sized(x, n: int):
    # (``arange(n)`` alone is padded to buckets since session 23, tests/test_generate_s23.py;
    # repeated, it cannot be: one program per value)
    return x[:n] * 2, torch.arange(n).repeat(2) + n


@torch.no_grad()
def test_int_used_as_a_size_compiles_per_value_and_warns_once(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    compiled = torch.compile(_sized, backend="xla", dynamic=True)
    x = torch.randn(16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(2, 8):
            _assert_equal(compiled(x, n), _sized(x, n))
    assert counter.count == 6
    ours = [w for w in caught if issubclass(w.category, torch2xla.IntArgumentWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    message = str(ours[0].message)
    assert "int argument n (now 3, was 2): it sizes a tensor" in message
    assert "test_int_args.py" in message  # (the line that uses it)


def _window(mask, n: int):
    # HF's sliding-window mask: a padding mask read at the window's key positions
    offset = max(n - 3, 0)
    return mask[torch.arange(4) + offset] * 2, n + 1


@torch.no_grad()
def test_int_value_beside_a_bucketed_size():
    # Dynamo guards ``Max(0, n - 3) + 4 <= mask length``: with n a tensor of the program, the
    # guard still holds at the bucket's length (larger), so the mask pads to powers of two.
    compiled = torch.compile(_window, backend="xla", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(5, 30):
            mask = torch.randn(n + 1)
            _assert_equal(compiled(mask, n), _window(mask, n))
    assert torch2xla.cache_info(compiled).misses == 3  # (buckets 8, 16, 32)
    mask = torch.randn(12)
    with pytest.raises(IndexError):
        _window(mask, 12)
    with pytest.raises(IndexError):
        compiled(mask, 12)


# -- HF generate with sliding-window caches ----------------------------------------------------
_LLM = {**TINY_LLM, "sliding_window": 4}
PROMPT, NEW_TOKENS = 9, 10


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:2])


def _sliding_window_model(kind: str):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "gemma2":
        return transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**_LLM, head_dim=16))
    return transformers.MistralForCausalLM(transformers.MistralConfig(**_LLM))


# (Mistral in the slow cases: with the static cache its layers are all the static
# sliding-window layers that Gemma2's static case has beside its full-attention ones; with the
# dynamic one, test_generate_s18's test_sliding_window_left_padded_batch_dynamic_cache
# generates with the same Mistral and cache, on a left-padded batch, and counts its programs)
@pytest.mark.parametrize(
    "kind, cache",
    [
        ("gemma2", "static"),
        ("gemma2", "dynamic"),
        pytest.param("mistral", "static", marks=pytest.mark.slow),
        pytest.param("mistral", "dynamic", marks=pytest.mark.slow),
    ],
)
@torch.no_grad()
def test_sliding_window_generate_compiles_no_program_per_token(kind, cache):
    model = _sliding_window_model(kind).eval()
    torch.manual_seed(1)
    prompt = {
        "input_ids": torch.randint(3, 128, (1, PROMPT)),
        "attention_mask": torch.ones(1, PROMPT, dtype=torch.long),
    }
    kw = {"cache_implementation": "static"} if cache == "static" else {}
    graphs = dynamo_graphs_in_eager(model, prompt, NEW_TOKENS, **kw)
    expected = greedy_generate(model, prompt, NEW_TOKENS, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no IntArgumentWarning, no BucketingWarning)
        got = greedy_generate(model, prompt, NEW_TOKENS, **kw)
    assert torch.equal(got, expected)
    info = torch2xla.cache_info(model.forward)
    # The prompt, then the decoding steps: one program for all of them with the static cache;
    # with the dynamic one, one per power of two of the full-attention layers' cache length
    # (Gemma2 alternates sliding-window and full layers; Mistral's are all sliding-window, but
    # transformers 5.17 (the GPU machine's) builds their mask from the whole attention mask,
    # whose length grows: one program per power of two of it there too).
    longest, shortest = PROMPT + NEW_TOKENS - 1, PROMPT + 1
    buckets = math.ceil(math.log2(longest)) - math.ceil(math.log2(shortest)) + 1
    version = _version(pytest.importorskip("transformers").__version__)
    window_only = kind == "mistral" and version >= (5, 24)
    # (and one program more for each graph Dynamo traces again under any backend, as it does
    # for Mistral's sliding-window cache, eager's view of its last tokens, whose strides are
    # the prompt's at the first step and the step's after)
    assert len(info) == graphs, info
    extra = graphs - 2
    assert info.misses <= extra + (2 if cache == "static" or window_only else 2 + buckets), info
    assert not any("cumulative_length" in s.reason for g in info for s in g.signatures), info


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_int_with_a_half_precision_tensor_computes_as_eager(dtype):
    """A Python int meets a half-precision tensor in float32 in eager (x * 2**40 is 0 for
    x = 0, 2049 * x is not rounded to 2048 * x first): such an int stays a constant."""

    def f(x, n: int):
        return x * n, n * x + 1, x / n

    x = torch.tensor([0.0, 1.0, -3.0, 0.5], dtype=dtype)
    compiled = torch.compile(f, backend="xla", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.IntArgumentWarning)
        for n in (2049, 1099511627783, 7):
            for got, want in zip(compiled(x, n), f(x, n), strict=True):
                torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
