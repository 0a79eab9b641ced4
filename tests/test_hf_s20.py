"""transformers workflows as users write them beyond ``model(**batch)``, compiled with
backend="xla", against eager (scripts/probe_hf2.py runs them over the zoo): an encoder-decoder
generating for a padded batch, ``generate`` from ``inputs_embeds``, transformers' own compile
of the forward (``CompileConfig(backend="xla")`` with a static cache), and a training step
through ``return_dict=False`` with reentrant gradient checkpointing. Tiny random models
(nothing is downloaded), fp32: greedy and beam tokens equal eager's."""

from __future__ import annotations

import copy

import pytest
import torch

import torch2xla
from tests._util import assert_same, fresh_dynamo, no_fallback

transformers = pytest.importorskip("transformers")

VOCAB = 256
_LLM = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


def _llama():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**_LLM)).eval()


def _t5():
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    return transformers.T5ForConditionalGeneration(config).eval()


def _batch(pad_side, batch=2, length=8, pad=3):
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB, (batch, length))
    mask = torch.ones_like(ids)
    if pad_side == "left":
        mask[0, :pad] = 0
        ids[0, :pad] = 0
    else:  # (a tokenizer pads an encoder's batch on the right)
        mask[1, -pad:] = 0
        ids[1, -pad:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _generate(model, inputs, **kw):
    kw = {"max_new_tokens": 4, "min_new_tokens": 4, "disable_compile": True, **kw}
    with torch.no_grad():
        return model.generate(**inputs, **kw)


def _compiled_forward(model):
    model.forward = torch.compile(model.forward, backend="xla")
    return model


@pytest.mark.parametrize(
    "kw",
    [{"num_beams": 3, "num_return_sequences": 2}, pytest.param({}, marks=pytest.mark.slow)],
    ids=["beam", "greedy"],
)
def test_encoder_decoder_generate_on_a_padded_batch(kw):
    # the encoder's mask pads the second source; the decoder's cross-attention reads it
    model = _t5()
    inputs = _batch("right")
    expected = _generate(model, inputs, **kw)
    got = no_fallback(_generate, _compiled_forward(model), inputs, **kw)
    assert torch.equal(got, expected)


def test_generate_from_inputs_embeds_left_padded():
    # a decoder-only model's prompt given as embeddings (the new tokens come back as ids)
    model = _llama()
    inputs = _batch("left")
    with torch.no_grad():
        embeds = model.get_input_embeddings()(inputs.pop("input_ids"))
    inputs["inputs_embeds"] = embeds
    expected = _generate(model, inputs)
    got = no_fallback(_generate, _compiled_forward(model), inputs)
    assert torch.equal(got, expected)


@pytest.mark.parametrize(
    "fullgraph", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["default", "fullgraph"]
)
def test_transformers_compile_config_with_a_static_cache(fullgraph):
    # transformers compiles the forward itself for a static cache, with the CompileConfig's
    # backend (mode="reduce-overhead" by default: passed to the backend, which ignores it)
    model = _llama()
    inputs = _batch("left")
    kw = {"cache_implementation": "static"}
    expected = _generate(model, inputs, **kw)
    config = transformers.CompileConfig(backend="xla", fullgraph=fullgraph)
    config._compile_all_devices = True  # (transformers compiles only on accelerators otherwise)
    got = no_fallback(_generate, model, inputs, **kw, disable_compile=False, compile_config=config)
    assert torch.equal(got, expected)
    info = torch2xla.cache_info(model._compiled_call)  # it ran through torch2xla
    assert info and sum(g.hits for g in info) > 0


def test_reentrant_checkpointing_train_step_returning_a_tuple():
    # return_dict=False (the loss first), the reentrant torch.utils.checkpoint around each
    # layer, labels -100 on the left padding
    model = _llama().train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.enable_input_require_grads()  # (reentrant checkpoints need an input needing grad)
    ref = copy.deepcopy(model)
    inputs = _batch("left")
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    kw = {"labels": labels, "use_cache": False, "return_dict": False}
    expected = ref(**inputs, **kw)
    got = no_fallback(torch.compile(model, backend="xla"), **inputs, **kw)
    assert type(got) is tuple and len(got) == len(expected)
    assert_same(got, expected)
    no_fallback(got[0].backward)
    expected[0].backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            assert_same(p.grad, q.grad)
