"""HF generation paths found in session 22 (scripts/probe_generate2.py, second pass), compiled
with backend="xla", against eager: exact values and a bounded number of programs.

The class: two padded sizes that Dynamo's guards order one way only. HF pads the attention
mask out to the keys' length where it is shorter (``masking_utils.prepare_padding_mask``:
``if (pad := kv_length - mask_length) > 0``), so its graph guards ``kv + 1 <= mask``, not
equality. Padded each to its own bucket (16 and 16), the guard failed at the bucket and every
call compiled a program of its own: Gemma2 (a sliding-window layer beside a full one) with a
left-padded batch compiled one program per token. The larger side now follows the other's
bucket at its real distance from it (``guards/bucketing/_guards.py``: ``one_way_ties``)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import TINY_LLM, fresh_dynamo, greedy_generate


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():  # program counts are those of a fresh process
        yield


def _pad_to_keys(mask, keys):
    # HF's padding mask read at every key position (masking_utils.py)
    kv = keys.shape[1] + 1
    if (pad := kv - mask.shape[1]) > 0:
        mask = F.pad(mask, (0, pad))
    return mask[:, torch.arange(kv)].cumsum(1), keys.sum(1)


def _slice_to_keys(mask, keys):
    # the same bound guarded the other way round (``mask >= kv``)
    kv = keys.shape[1] + 1
    if mask.shape[1] < kv:
        raise ValueError("mask too short")
    return mask[:, torch.arange(kv)].cumsum(1), keys.sum(1)


@pytest.mark.parametrize("fn", [_pad_to_keys, _slice_to_keys])
@pytest.mark.parametrize("extra", [1, 4])
def test_sizes_ordered_one_way_share_a_program_per_bucket(fn, extra):
    # mask = keys + extra (extra 1: the guard is tight, as in generate)
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        for n in range(5, 15):
            torch.manual_seed(n)
            mask, keys = torch.randint(0, 9, (2, n + extra)), torch.randint(0, 9, (2, n))
            got, want = compiled(mask, keys), fn(mask, keys)
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and torch.equal(g, w)
    info = torch2xla.cache_info(compiled)
    assert info.misses == 2, info  # (keys' buckets 8 and 16)


def test_a_follower_past_its_real_size_only():
    # The follower's size is the leader's bucket plus its real distance: never less than real.
    def fn(mask, keys):
        out = _pad_to_keys(mask, keys)
        return out[0].sum(1, keepdim=True) * keys.shape[1] + mask.shape[1], out[1]

    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    for n, extra in ((5, 1), (6, 9), (7, 2), (9, 30), (8, 1)):
        torch.manual_seed(n)
        mask, keys = torch.randint(0, 9, (2, n + extra)), torch.randint(0, 9, (2, n))
        got, want = compiled(mask, keys), fn(mask, keys)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and torch.equal(g, w)


# -- HF generate --------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _left_padded(batch: int, length: int, pad: int) -> dict:
    torch.manual_seed(1)
    ids = torch.randint(3, 128, (batch, length))
    mask = torch.ones_like(ids)
    mask[0, :pad], ids[0, :pad] = 0, 0
    return {"input_ids": ids, "attention_mask": mask}


def _sliding(kind: str):
    torch.manual_seed(0)
    llm = {**TINY_LLM, "sliding_window": 4}
    if kind == "gemma2":
        return transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**llm, head_dim=16))
    if kind == "gemma3":
        config = transformers.Gemma3TextConfig(**llm, head_dim=16)
        return transformers.Gemma3ForCausalLM(config)
    config = transformers.Qwen2Config(
        **llm, use_sliding_window=True, layer_types=["sliding_attention", "full_attention"]
    )
    return transformers.Qwen2ForCausalLM(config)


@pytest.mark.slow  # (20 to 40 s each on 2 cores)
@pytest.mark.parametrize("kind", ["gemma2", "gemma3", "qwen2"])
@torch.no_grad()
def test_sliding_window_left_padded_generate_programs_per_bucket(kind):
    # Sliding-window layers beside full ones, a left-padded batch, the default dynamic cache
    # (and one the user makes): one program per power of two of the full layers' keys.
    model = _sliding(kind).eval()
    prompt, new = _left_padded(2, 9, 3), 12
    expected = greedy_generate(model, prompt, new)
    mine = greedy_generate(model, prompt, new, past_key_values=transformers.DynamicCache())
    assert torch.equal(mine, expected)
    model.forward = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        assert torch.equal(greedy_generate(model, prompt, new), expected)
        cache = transformers.DynamicCache(config=model.config)
        assert torch.equal(greedy_generate(model, prompt, new, past_key_values=cache), expected)
    info = torch2xla.cache_info(model.forward)
    # the prompt, then the steps: keys 9 to 19, buckets 16 and 32
    shortest, longest = 9 + 1, 9 + new - 1
    buckets = math.ceil(math.log2(longest)) - math.ceil(math.log2(shortest)) + 1
    assert info.misses <= 2 + buckets, info


@pytest.mark.slow  # (25 to 75 s on 2 cores)
@torch.no_grad()
def test_prompt_shorter_than_the_window_keeps_its_padded_programs():
    # Mistral, a prompt (5) shorter than its window (8): the step's graph pins the cache's
    # length in its symbolic trace (a constant of the rewritten graph that pads the mask).
    # That rewritten graph was reused for the next length: its padded program failed to
    # export ("expand: attempting to expand a dimension of length 8 -> 7!"), and bucketing
    # gave up for the graph ("please report it"). Now each pinned length has its own.
    torch.manual_seed(0)
    model = transformers.MistralForCausalLM(
        transformers.MistralConfig(**TINY_LLM, sliding_window=8)
    ).eval()
    prompt = _left_padded(2, 5, 2)
    expected = greedy_generate(model, prompt, 7)
    model.forward = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal(greedy_generate(model, prompt, 7), expected)
    failed = [w for w in caught if "program failed" in str(w.message)]
    assert not failed, failed[0].message
