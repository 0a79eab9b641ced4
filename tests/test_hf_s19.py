"""transformers paths tests/test_hf_zoo.py does not take, compiled with backend="xla", against
eager (found by scripts/probe_hf.py): ``generate``'s beam search, sampling and scores,
left-padded batches with the static cache, gradient checkpointing, a compiled AdamW step,
heads that read token type ids and clamp positions, returned attentions, and pipelines.
Tiny random models (hidden 32, 2 layers, seeded, fp32, dropout off): nothing is downloaded."""

from __future__ import annotations

import copy

import pytest
import torch

import torch2xla  # noqa: F401
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
_BERT = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


def _llama():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**_LLM)).eval()


def _prompt(batch=1, length=6, left_padding=0):
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB, (batch, length))
    mask = torch.ones_like(ids)
    mask[0, :left_padding] = 0
    ids[0, :left_padding] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _generate(model, prompt, seed=None, **kw):
    kw = {"max_new_tokens": 4, "min_new_tokens": 4, "disable_compile": True, **kw}
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(**prompt, **kw)


def _compiled_forward(model):
    model.forward = torch.compile(model.forward, backend="xla")
    return model


@pytest.mark.parametrize(
    "kw",
    [
        {"num_beams": 2},
        pytest.param(
            {"num_beams": 2, "num_return_sequences": 2, "length_penalty": 0.5},
            marks=pytest.mark.slow,
        ),
        pytest.param({"do_sample": False}, marks=pytest.mark.slow),
    ],
    ids=["beam", "beam-2-sequences", "greedy"],
)
def test_generate_scores_match_eager(kw):
    # return_dict_in_generate: the tokens, every step's processed scores and raw logits, and
    # beam search's sequence scores and beam indices
    model = _llama()
    prompt = _prompt()
    kw = {**kw, "return_dict_in_generate": True, "output_scores": True, "output_logits": True}
    expected = _generate(model, prompt, **kw)
    got = no_fallback(_generate, _compiled_forward(model), prompt, **kw)
    assert torch.equal(got.sequences, expected.sequences)
    assert_same(got.scores, expected.scores)
    assert_same(got.logits, expected.logits)
    if "num_beams" in kw:
        assert_same(got.sequences_scores, expected.sequences_scores)
        assert torch.equal(got.beam_indices, expected.beam_indices)


def test_generate_sampling_with_a_seed_matches_eager():
    # sampling draws in eager PyTorch from the compiled forward's logits: the same tokens
    model = _llama()
    prompt = _prompt(batch=2, left_padding=2)
    kw = {"do_sample": True, "top_k": 20, "top_p": 0.9, "temperature": 0.8, "seed": 3}
    expected = _generate(model, prompt, **kw)
    assert torch.equal(_generate(model, prompt, **kw), expected)  # eager is deterministic
    assert torch.equal(no_fallback(_generate, _compiled_forward(model), prompt, **kw), expected)


@pytest.mark.slow
def test_generate_left_padded_batch_static_cache():
    model = _llama()
    prompt = _prompt(batch=2, left_padding=3)
    kw = {"cache_implementation": "static"}
    expected = _generate(model, prompt, **kw)
    assert torch.equal(no_fallback(_generate, _compiled_forward(model), prompt, **kw), expected)


def _assert_train_step(model, inputs, labels):
    """The loss and every parameter's gradient (and None-ness) of a compiled training step."""
    ref = copy.deepcopy(model)
    expected = ref(**inputs, **labels)
    got = no_fallback(torch.compile(model, backend="xla"), **inputs, **labels)
    assert_same(got.to_tuple(), expected.to_tuple())  # the loss and every output
    no_fallback(got.loss.backward)
    expected.loss.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            assert_same(p.grad, q.grad)
    return ref


def test_gradient_checkpointing_train_step():
    # model.gradient_checkpointing_enable(): each layer in torch.utils.checkpoint
    model = _llama().train()
    model.gradient_checkpointing_enable()
    inputs = _prompt(batch=2, left_padding=2)
    _assert_train_step(model, inputs, {"labels": inputs["input_ids"], "use_cache": False})


def test_compiled_adamw_step_matches_eager():
    # a compiled ``opt.step()`` on eager's gradients (so that it alone is compared)
    model = _llama().train()
    inputs = _prompt(batch=2)
    # (no cache object among the outputs: transformers 5.17 returns one in train mode too)
    ref = _assert_train_step(model, inputs, {"labels": inputs["input_ids"], "use_cache": False})
    for p, q in zip(model.parameters(), ref.parameters()):
        p.grad = q.grad.clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1)
    step = torch.compile(opt.step, backend="xla")
    for _ in range(2):
        no_fallback(step)
        ref_opt.step()
    assert_same(list(model.parameters()), list(ref.parameters()))


def _typed(batch=2, length=10):
    inputs = _prompt(batch, length)
    inputs["attention_mask"][1, -3:] = 0
    types = torch.zeros_like(inputs["input_ids"])
    types[:, 5:] = 1
    return {**inputs, "token_type_ids": types}


@pytest.mark.parametrize(
    ("head", "labels"),
    [
        ("BertForSequenceClassification", {"labels": torch.tensor([0, 2])}),
        (
            "BertForQuestionAnswering",
            {"start_positions": torch.tensor([2, 40]), "end_positions": torch.tensor([5, 3])},
        ),
    ],
    ids=["sequence-classification", "question-answering"],
)
def test_bert_heads_with_token_type_ids_train_step(head, labels):
    # token type ids, a padded mask; QA clamps positions past the sequence (ignored by its loss)
    torch.manual_seed(0)
    num_labels = 2 if "Question" in head else 3  # (start and end)
    config = transformers.BertConfig(**_BERT, num_labels=num_labels)
    model = getattr(transformers, head)(config).train()
    _assert_train_step(model, _typed(), labels)


@torch.no_grad()
def test_attentions_and_hidden_states_returned():
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(**_BERT)).eval()
    model.set_attn_implementation("eager")  # (sdpa returns no attentions)
    inputs = _typed()
    kw = {"output_attentions": True, "output_hidden_states": True}
    expected = model(**inputs, **kw)
    got = no_fallback(torch.compile(model, backend="xla"), **inputs, **kw)
    assert len(got.attentions) == len(expected.attentions) == 2
    assert_same(got.to_tuple(), expected.to_tuple())


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {
        "[PAD]": 0,
        "[BOS]": 1,
        "[EOS]": 2,
        "[UNK]": 3,
        **{f"w{i}": i for i in range(4, VOCAB)},
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        unk_token="[UNK]",
    )


@torch.no_grad()
def test_text_generation_pipeline_batched():
    # a batch of two prompts of different lengths: the pipeline pads them on the left
    model = _llama()
    model.generation_config.disable_compile = True
    pipe = transformers.pipeline(
        "text-generation", model=model, tokenizer=_tokenizer(), device="cpu"
    )
    texts = ["w5 w9 w17 w33", "w40 w41"]
    kw = {"max_new_tokens": 4, "min_new_tokens": 4, "do_sample": False, "batch_size": 2}
    expected = pipe(texts, **kw)
    _compiled_forward(model)
    assert no_fallback(pipe, texts, **kw) == expected


# -- attention over broadcast heads, rows whose every key is masked ----------------------------
@pytest.mark.parametrize("mask_kind", ["bool", "-inf"])
@pytest.mark.parametrize(
    "kv_shape", [(2, 1, 5, 8), (1, 4, 5, 8), (4, 5, 8)], ids=["one-head", "one-batch", "3d"]
)
def test_sdpa_broadcast_heads_with_fully_masked_rows(kv_shape, mask_kind):
    # Falcon's multi-query attention (one key/value head broadcast to every query head) with a
    # left-padded batch: the padded positions' rows mask every key. Eager gives them 0; the
    # broadcasting path gave NaN, which the next layer spread over the whole sequence.
    torch.manual_seed(0)
    q = torch.randn(2, 4, 5, 8, requires_grad=True)
    k = torch.randn(kv_shape, requires_grad=True)
    v = torch.randn(kv_shape, requires_grad=True)
    keep = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    keep[0, :, :, :2] = False  # left padding of 2 in the first sequence
    mask = keep if mask_kind == "bool" else torch.zeros(keep.shape).masked_fill(~keep, -torch.inf)

    def f(q, k, v):
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, (out * torch.arange(8.0)).sum()

    expected = f(q, k, v)
    expected[1].backward()
    grads = [t.grad for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    got = no_fallback(torch.compile(f, backend="xla"), q, k, v)
    assert_same(got, expected)
    got[1].backward()
    assert_same([t.grad for t in (q, k, v)], grads)


@torch.no_grad()
def test_falcon_left_padded_batch_generates_eagers_tokens():
    torch.manual_seed(0)
    config = transformers.FalconConfig(
        **{k: v for k, v in _LLM.items() if k not in ("intermediate_size", "num_key_value_heads")},
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    model = transformers.FalconForCausalLM(config).eval()
    prompt = _prompt(batch=2, left_padding=3)
    expected = _generate(model, prompt)
    assert torch.equal(no_fallback(_generate, _compiled_forward(model), prompt), expected)
