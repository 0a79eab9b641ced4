"""transformers as users run it, compiled with backend="xla", against eager (session 24:
scripts/probe_hfgen24.py ran ``generate``'s options and training heads over the zoo).

Two classes compiled one program per generated token:

- an input whose stride alone changes: a decoding loop that passes ``ids[:, -1:]`` of a
  sequence one longer every token (stride ``(n, 1)``; classifier-free guidance in ``generate``
  does). Dynamo makes that stride a symbol of its own, which the key held by value. A stride the
  graph never reads is now keyed by the input's layout class (``guards/_key.layout_class``).
- a sliding-window cache shorter than its window (any prompt shorter than Mistral's 4096, or
  Gemma's 512): HF's mask offset ``max(n - w + 1, 0)``, the cache's ``keys[:, :, -w + 1:]``, its
  int length returned by the graph, and that length and the keys' being two symbols to Dynamo
  each refused padding. Each is now exact at a bucket (guards/bucketing).

Tiny random models (nothing is downloaded), fp32, values and tokens against eager's.
"""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch

import torch2xla
from tests._util import TINY_LLM, assert_same, fresh_dynamo, greedy_generate, no_fallback


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():  # program counts are those of a fresh process
        yield


# -- an input whose stride alone changes --------------------------------------------------------
_W = torch.randn(8, 8, generator=torch.Generator().manual_seed(0))


def _embed_step(ids, mask):
    return (_W[ids] * mask.sum(-1, keepdim=True)[..., None]).sum(1)


def test_last_token_sliced_from_a_growing_sequence():
    # model(seq[:, -1:], mask): one program per bucket of the mask, not one per token
    compiled = torch.compile(_embed_step, backend="xla")
    seq = torch.randint(0, 8, (2, 5), generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        for n in range(12):
            ids, mask = seq[:, -1:], torch.ones(2, 5 + n)
            assert_same(compiled(ids, mask), _embed_step(ids, mask))
            seq = torch.cat([seq, seq[:, :1]], 1)
    info = torch2xla.cache_info(compiled)
    assert not any("stride" in s.signature for g in info for s in g.signatures), info
    assert info.misses <= 4, info  # (the first call, then buckets 8 and 16 of the mask)


def _slice(n):  # (2, 3): a gap in each row but at n == 3
    return torch.randn(2, n)[:, -3:]


def _transposed(n):  # (2, 3) with strides (1, 2): a gap in dim 1 order
    return torch.randn(n, 2).t()[:, -3:]


def _size_one(n):  # a size-1 dim whose stride changes (dense for any n)
    return torch.empty_strided((2, 1, 3), (3, n, 1)).normal_()


@pytest.mark.parametrize("make", [_slice, _transposed, _size_one])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.clone(),  # a dense input's strides, row-major for a gapped one
        lambda x: torch.empty_like(x).fill_(3) + x,
        lambda x: x.sum(-1),
        lambda x: x[0],  # a view of the input
        lambda x: x.contiguous().view(-1),
    ],
    ids=["clone", "empty_like", "sum", "view", "contiguous"],
)
def test_output_layouts_follow_the_stride_that_changes(make, fn):
    # The stride's value is no longer keyed: the outputs still have eager's layouts (the
    # values, strides and view-ness eager gives them) for every stride, the dense one too.
    compiled = torch.compile(fn, backend="xla")
    for n in (3, 4, 5, 7, 3, 9):
        x = make(n)
        got, want = compiled(x), fn(x)
        assert_same(got, want)
        assert got.stride() == want.stride(), (n, got.stride(), want.stride())
        assert got._is_view() == want._is_view()


# -- a sliding-window cache shorter than its window ---------------------------------------------
_WINDOW = 64


class _SlidingLayer:
    """HF's ``DynamicSlidingWindowLayer``: its keys (the last ``window - 1``) and its length."""

    def __init__(self, keys: torch.Tensor) -> None:
        self.keys, self.cumulative_length = keys, keys.shape[1]


def _sliding_step(x, mask, layer):
    # masking_utils' sliding-window mask: the keys' offset and length from the cache's length
    c = layer.cumulative_length
    kv_offset = max(c - _WINDOW + 1, 0)
    kv_length = _WINDOW if c >= _WINDOW else c + 1
    keep = mask[:, torch.arange(kv_length) + kv_offset]
    # the cache's update: its length (an int the graph returns), the last window - 1 keys
    layer.cumulative_length += x.shape[1]
    full = torch.cat([layer.keys, x], 1)
    layer.keys = full[:, -_WINDOW + 1 :]
    scores = (full * x).sum(-1).masked_fill(keep == 0, float("-inf")).softmax(-1)
    return (scores[..., None] * full).sum(1)


def test_sliding_window_cache_shorter_than_its_window():
    gen = torch.Generator().manual_seed(0)
    keys = torch.randn(2, 5, 4, generator=gen)
    ours, theirs = _SlidingLayer(keys.clone()), _SlidingLayer(keys.clone())
    compiled = torch.compile(_sliding_step, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        for t in range(20):
            x = torch.randn(2, 1, 4, generator=gen)
            mask = torch.ones(2, 6 + t, dtype=torch.long)
            mask[0, :2] = 0
            assert_same(compiled(x, mask, ours), _sliding_step(x, mask, theirs))
            # the length a Python int at its real value, the keys eager's (a view, as eager's)
            assert type(ours.cumulative_length) is int
            assert ours.cumulative_length == theirs.cumulative_length
            assert_same(ours.keys, theirs.keys)
            assert ours.keys.stride() == theirs.keys.stride()
            assert ours.keys._base is not None and theirs.keys._base is not None
    info = torch2xla.cache_info(compiled)
    assert info.misses <= 6, info  # (first call; then lengths 6 to 25: buckets 8, 16, 32)


@pytest.mark.parametrize(
    "offset",
    [
        lambda n: max(n - 12, 0),
        lambda n: min(n, 9) - 2,
        lambda n: 2 * max(n - 10, 1) + min(n - 4, 3),
    ],
    ids=["max", "min", "sum"],
)
def test_offsets_piecewise_in_a_padded_size(offset):
    # ``arange(n) + f(n)``: the real value of f at the real n, across its kinks
    def fn(x):
        n = x.shape[1]
        return x * (torch.arange(n) + offset(n)), n + 1, n > 10

    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        for n in (5, 7, 9, 11, 13, 16, 17, 6):
            x = torch.randn(2, n)
            got, want = compiled(x), fn(x)
            assert_same(got[0], want[0])
            # sizes the graph returns: Python numbers at the real size, not the bucket's
            assert [type(v) for v in got[1:]] == [int, bool] and got[1:] == want[1:]
    assert torch2xla.cache_info(compiled).misses == 3  # (buckets 8, 16, 32)


def _positions_past_the_cache(mask, keys):
    # OPT's positions without position_ids: ``cumsum(mask)[:, past_seen_tokens:]``
    past = keys.shape[1]
    return (mask.cumsum(1) - 1)[:, past:] * 2, keys.sum(1)


def test_rows_past_a_padded_size():
    # x[:, n:] of a dim n + 1 long (both padded): its last row, taken from the real end
    compiled = torch.compile(_positions_past_the_cache, backend="xla", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        for n in range(3, 14):
            mask = torch.ones(2, n + 1, dtype=torch.long)
            mask[0, :2] = 0
            keys = torch.randn(2, n)
            assert_same(compiled(mask, keys), _positions_past_the_cache(mask, keys))
    assert torch2xla.cache_info(compiled).misses <= 3  # (buckets 4, 8, 16)


# -- transformers ---------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _left_padded(batch=2, length=9, pad=3):
    torch.manual_seed(1)
    ids = torch.randint(3, 128, (batch, length))
    mask = torch.ones_like(ids)
    mask[0, :pad], ids[0, :pad] = 0, 0
    return {"input_ids": ids, "attention_mask": mask}


def _mistral(layers=1, window=_WINDOW):
    torch.manual_seed(0)
    config = transformers.MistralConfig(
        **{**TINY_LLM, "num_hidden_layers": layers}, sliding_window=window
    )
    return transformers.MistralForCausalLM(config).eval()


@torch.no_grad()
def test_mistral_prompt_shorter_than_its_window_generates_per_bucket():
    # The common case (a prompt shorter than 4096 tokens): 18 programs for 20 tokens before.
    model = _mistral()
    prompt, new = _left_padded(), 12
    expected = greedy_generate(model, prompt, new)
    model.forward = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        assert torch.equal(no_fallback(greedy_generate, model, prompt, new), expected)
    # the prompt, the first step, then one program per bucket of the keys (10 to 20: 16, 32)
    shortest, longest = 9 + 1, 9 + new - 1
    buckets = math.ceil(math.log2(longest)) - math.ceil(math.log2(shortest)) + 1
    assert torch2xla.cache_info(model.forward).misses <= 2 + buckets + 1


@pytest.mark.slow  # (about 60 s on 2 cores)
@torch.no_grad()
def test_classifier_free_guidance_with_a_sliding_window():
    # guidance_scale: generate runs the model on ``ids[:, -1:]`` with its own cache, which grows
    # from one token: both classes at once (13 programs for 10 tokens before)
    model = _mistral(window=32)
    prompt = _left_padded()
    kw = {"guidance_scale": 1.5}
    expected = greedy_generate(model, prompt, 10, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        assert torch.equal(no_fallback(greedy_generate, model, prompt, 10, **kw), expected)
    assert torch2xla.cache_info(model.forward).misses <= 9


def _decoder(name):
    torch.manual_seed(0)
    if name == "opt":  # (positions from the mask: no position_ids given)
        config = transformers.OPTConfig(
            vocab_size=128,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=4,
            ffn_dim=64,
            word_embed_proj_dim=32,
            max_position_embeddings=64,
            dropout=0.0,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        )
        return transformers.OPTForCausalLM(config).eval()
    config = transformers.LlamaConfig(**{**TINY_LLM, "num_hidden_layers": 1})
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("name", ["llama", pytest.param("opt", marks=pytest.mark.slow)])
@torch.no_grad()
def test_users_decoding_loop_slicing_the_last_token(name):
    # model(ids[:, -1:], past_key_values=cache, attention_mask=mask), greedy, as tutorials write it
    model = _decoder(name)
    prompt = _left_padded()

    def decode(forward, steps=10):
        ids, mask = prompt["input_ids"], prompt["attention_mask"]
        cache = transformers.DynamicCache(config=model.config)
        logits = forward(input_ids=ids, attention_mask=mask, past_key_values=cache).logits
        rows = []
        for _ in range(steps):
            ids = torch.cat([ids, logits[:, -1:].argmax(-1)], 1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            logits = forward(input_ids=ids[:, -1:], attention_mask=mask, past_key_values=cache)
            logits = logits.logits
            rows.append(logits)
        return ids, rows

    want_ids, want_rows = decode(model)
    compiled = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        got_ids, got_rows = no_fallback(decode, compiled)
    assert torch.equal(got_ids, want_ids)
    assert_same(got_rows, want_rows)
    # the prompt, the first step, then the buckets 16 of the keys (10 to 19) and of the mask
    assert torch2xla.cache_info(compiled).misses <= 4


@pytest.mark.slow  # (about 40 s on 2 cores)
@torch.no_grad()
def test_generate_options_and_scores_match_eager():
    # an eos list and min_new_tokens (the rows stop at different steps), penalties, bad words,
    # sequence bias, suppressed tokens, then beam search with a length penalty and early
    # stopping: tokens, scores, logits, beam scores and indices
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(
        vocab_size=128,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        rotary_pct=0.5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    model = transformers.GPTNeoXForCausalLM(config).eval()
    prompt = _left_padded()
    base = {"disable_compile": True, "return_dict_in_generate": True, "output_scores": True}
    base["output_logits"] = True
    plain = model.generate(**prompt, max_new_tokens=8, eos_token_id=200, disable_compile=True)
    eos = [int(plain[0, -6]), int(plain[1, -3])]  # (tokens of eager's steps 3 and 6)
    runs = [
        {"max_new_tokens": 8, "min_new_tokens": 2, "eos_token_id": eos},
        {
            "max_new_tokens": 6,
            "repetition_penalty": 1.5,
            "no_repeat_ngram_size": 2,
            "bad_words_ids": [[5], [7, 9]],
            "sequence_bias": {(11,): -2.0, (12, 13): 3.0},
            "suppress_tokens": [4, 6],
        },
        {
            "num_beams": 3,
            "length_penalty": 0.5,
            "early_stopping": True,
            "num_return_sequences": 2,
            "max_new_tokens": 7,
            "eos_token_id": eos,
        },
    ]
    expected = [model.generate(**prompt, **base, **kw) for kw in runs]
    model.forward = torch.compile(model.forward, backend="xla")
    for kw, want in zip(runs, expected, strict=True):
        got = no_fallback(model.generate, **prompt, **base, **kw)
        assert torch.equal(got.sequences, want.sequences), kw
        assert_same(got.scores, want.scores)
        assert_same(got.logits, want.logits)
        if "num_beams" in kw:
            assert_same(got.sequences_scores, want.sequences_scores)
            assert torch.equal(got.beam_indices, want.beam_indices)


# -- training heads with their own loss ---------------------------------------------------------
_ENCODER = {
    "vocab_size": 128,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
}


def _head(name: str, dropout: float | None, **kw):
    prefix, head, extra = {
        "deberta_v2_tokcls": (
            "DebertaV2",
            "ForTokenClassification",
            {"relative_attention": True, "position_buckets": 8, "max_relative_positions": 16},
        ),
        "albert_multilabel": (
            "Albert",
            "ForSequenceClassification",
            {"embedding_size": 16, "problem_type": "multi_label_classification"},
        ),
        "electra_regression": (
            "Electra",
            "ForSequenceClassification",
            {"embedding_size": 16, "num_labels": 1, "problem_type": "regression"},
        ),
    }[name]
    drops = (
        {}
        if dropout is None
        else dict.fromkeys(("hidden_dropout_prob", "attention_probs_dropout_prob"), dropout)
    )
    config = getattr(transformers, f"{prefix}Config")(**_ENCODER, **extra, **drops, **kw)
    torch.manual_seed(0)
    return getattr(transformers, f"{prefix}{head}")(config)


def _head_batch(name: str):
    torch.manual_seed(1)
    ids = torch.randint(3, 128, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0  # (right padding: the second sequence is 7 long)
    if name == "deberta_v2_tokcls":
        labels = torch.randint(0, 2, (2, 10)).masked_fill(mask == 0, -100)
    elif name == "albert_multilabel":
        labels = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    else:
        labels = torch.tensor([0.5, -1.5])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


@pytest.mark.parametrize("name", ["deberta_v2_tokcls", "albert_multilabel", "electra_regression"])
def test_head_train_step_in_eval_mode_matches_eager(name):
    # the config's dropout (0.1) off in eval mode: the loss and every gradient, None where eager's
    model = _head(name, None).eval()
    ref = copy.deepcopy(model)
    batch = _head_batch(name)
    want = ref(**batch)
    got = no_fallback(torch.compile(model, backend="xla"), **batch)
    assert_same(got.to_tuple(), want.to_tuple())
    no_fallback(got.loss.backward)
    want.loss.backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), n
        if q.grad is not None:
            assert_same(p.grad, q.grad)


def test_head_train_step_with_dropout_runs():
    # dropout on (train mode, seeded): torch2xla's random numbers are not torch's, so the
    # values differ; the loss and the gradients are finite, None where eager's are
    model = _head("deberta_v2_tokcls", 0.1).train()
    ref = copy.deepcopy(model)
    batch = _head_batch("deberta_v2_tokcls")
    torch.manual_seed(3)
    want = ref(**batch)
    got = no_fallback(torch.compile(model, backend="xla"), **batch)
    assert math.isfinite(got.loss.item())
    got.loss.backward()
    want.loss.backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), n
        assert p.grad is None or torch.isfinite(p.grad).all(), n
