"""HF ``generate`` with the forward compiled by backend="xla": eager's greedy tokens, and a
bounded number of XLA programs for a whole generation, with the static cache and with the
default dynamic cache (whose length grows by one every token: one program per power of two).

Tiny random models built here (2 layers, hidden 64, vocab 128): nothing is downloaded.
"""

from __future__ import annotations

import math

import pytest
import torch

import torch2xla
from tests._util import assert_generate_matches_eager, fresh_dynamo, greedy_generate

transformers = pytest.importorskip("transformers")

PROMPT, NEW_TOKENS = 7, 16


DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():  # program counts are those of a fresh process
        yield


def _model(kind: str, device: str = "cpu") -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "gpt2":
        config = transformers.GPT2Config(
            n_layer=2,
            n_embd=64,
            n_head=4,
            vocab_size=128,
            n_positions=128,
            bos_token_id=1,
            eos_token_id=2,
        )
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(
            num_hidden_layers=2,
            hidden_size=64,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            max_position_embeddings=128,
            bos_token_id=1,
            eos_token_id=2,
        )
        model = transformers.LlamaForCausalLM(config)
    return model.to(device).eval()


def _prompt(batch: int, left_padding: int = 0, device: str = "cpu") -> dict:
    torch.manual_seed(1)
    ids = torch.randint(3, 128, (batch, PROMPT))
    mask = torch.ones(batch, PROMPT, dtype=torch.long)
    mask[0, :left_padding] = 0
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


def _generate(model, prompt: dict, **kw) -> torch.Tensor:
    return greedy_generate(model, prompt, NEW_TOKENS, pad_token_id=0, **kw)


# (GPT-2's cases in the slow run: Llama's check the same counts with the same caches;
# test_generate_batch_with_left_padding_dynamic_cache generates with GPT-2's dynamic cache, on a
# padded batch, and counts the same 5 programs)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("cache", "kind"),
    [
        pytest.param("static", "gpt2", marks=pytest.mark.slow),
        ("static", "llama"),
        pytest.param("dynamic", "gpt2", marks=pytest.mark.slow),
        ("dynamic", "llama"),
    ],
)
@torch.no_grad()
def test_generate_matches_eager_with_few_programs(kind, cache, device):
    model = _model(kind, device)
    prompt = _prompt(1, device=device)
    kw = {"cache_implementation": "static"} if cache == "static" else {}
    assert_generate_matches_eager(model, prompt, NEW_TOKENS, pad_token_id=0, **kw)
    info = torch2xla.cache_info(model.forward)
    if cache == "static":
        assert info.misses == 2  # the prompt, then every token on the same shapes
    else:
        # The prompt, the first token (Dynamo's static graph), then one program per power of
        # two of the cache's length (8, 16, 32 for lengths 8 to 22), not one per token.
        longest, shortest = PROMPT + NEW_TOKENS - 1, PROMPT + 1
        buckets = math.ceil(math.log2(longest)) - math.ceil(math.log2(shortest)) + 1
        assert info.misses == 2 + buckets == 5
        assert [len(g.padding_fixes) > 0 for g in info] == [False, False, True]


@pytest.mark.parametrize("device", DEVICES)
@torch.no_grad()
def test_generate_batch_with_left_padding_dynamic_cache(device):
    # The attention mask (one longer than the cache) is padded with it; the mask built from
    # it indexes the padded mask with arange and compares positions with the real length.
    model = _model("gpt2", device)
    prompt = _prompt(2, left_padding=2, device=device)
    assert_generate_matches_eager(model, prompt, NEW_TOKENS, pad_token_id=0)
    info = torch2xla.cache_info(model.forward)
    assert info.misses == 5
    assert "kwargs['attention_mask'] dim 1" in info[2].bucketed


@torch.no_grad()
def test_generate_through_transformers_compile_config():
    # transformers compiles the decoding steps itself (static cache) with the backend named in
    # CompileConfig; off the GPU only when asked (_compile_all_devices, meant for tests).
    model = _model("llama")
    prompt = _prompt(1)
    expected = _generate(model, prompt, cache_implementation="static")
    config = transformers.CompileConfig(backend="xla", mode="reduce-overhead")
    if not hasattr(config, "_compile_all_devices"):
        pytest.skip("this transformers compiles generate only on accelerators")
    config._compile_all_devices = True
    got = _generate(model, prompt, cache_implementation="static", compile_config=config)
    assert torch.equal(got, expected)
    # the decoding step (the prompt runs eagerly)
    assert torch2xla.cache_info(model._compiled_call).misses == 1
