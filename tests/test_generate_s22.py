"""HF generation paths found in session 22 (scripts/probe_generate2.py), compiled with
backend="xla", against eager: exact values and a bounded number of programs.

The class: ``F.pad`` of a padded (bucketed) dimension. transformers pads a 2-d attention mask
out to the static cache's length (``masking_utils.prepare_padding_mask``: ``pad(mask, (0,
max_len - n))``); a decoding step that takes the mask as it grows (the docs' static-cache loop)
compiled one program per token, the pad's size being refused as "a padded size used as a
value". Padding after the real rows is exact once the padded positions hold the pad value."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import TINY_LLM, assert_same, fresh_dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


def _compiled(fn):
    return torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})


def _check(fn, make, sizes, programs, bucketed="x dim 1"):
    compiled = _compiled(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        for n in sizes:
            x = make(n)
            assert_same(compiled(x), fn(x))
    info = torch2xla.cache_info(compiled)
    assert any(bucketed in label for g in info for label in g.bucketed), info
    assert info.misses == programs, info


def _mask(n, dtype=torch.long):
    torch.manual_seed(n)
    return (torch.rand(2, n) > 0.3).to(dtype)


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(torch.long, 0), (torch.bool, False), (torch.float32, float("-inf")), (torch.float32, 1.0)],
)
def test_pad_to_a_fixed_length(dtype, value):
    # HF's padding mask against a static cache: a total of 20 whatever the real length; the
    # bucket (16, 32) may be past it (a negative pad in the padded program: it crops).
    def fn(x):
        return F.pad(x, (0, 20 - x.shape[1]), value=value).to(torch.float32).cumsum(1)

    _check(fn, lambda n: _mask(n, dtype), (5, 7, 9, 12, 15, 17, 19), programs=3)


def test_bucket_capped_at_the_largest_size_the_guards_allow():
    # HF pads only when shorter (``if 20 - n > 0``): Dynamo guards n <= 19, so bucket 32
    # cannot run; sizes 17 to 19 share a last bucket of 19 instead of one program each.
    def fn(x):
        if (pad := 20 - x.shape[1]) > 0:
            x = F.pad(x, (0, pad))
        return x.cumsum(1)

    _check(fn, lambda n: _mask(n), (5, 7, 9, 12, 15, 17, 18, 19), programs=3)


def test_pad_after_then_reduce():
    # a constant pad after the real rows, then ops across the dimension (the pad's values
    # must sit right after the real rows, not past the bucket)
    def fn(x):
        y = F.pad(x * 2 + 1, (1, 3), value=1.0)
        return y.cumprod(1), y.sum(1), y[:, -2:]

    _check(fn, lambda n: torch.randn(3, n), (5, 6, 7, 9, 11), programs=2)


def test_pad_grows_with_the_padded_size():
    # after = n: twice the real length, the pad's values after the real rows
    def fn(x):
        return F.pad(x, (0, x.shape[1] + 1), value=0.0).cumsum(1)

    _check(fn, lambda n: torch.randn(2, n), (5, 6, 7, 9, 11), programs=2)


def test_pad_a_clean_dim_by_a_padded_size():
    def fn(x):
        y = torch.arange(6.0).reshape(2, 3)
        return F.pad(y, (0, x.shape[1]), value=0.0).sum(1) + x.sum(1)

    _check(fn, lambda n: torch.randn(2, n), (5, 6, 7, 9, 11), programs=2)


@pytest.mark.parametrize("case", ["before_grows", "other_value", "clean_before"])
def test_pads_that_cannot_be_bucketed_stay_exact(case):
    # Padding that moves the real rows or writes a value fill_tail cannot: refused (a
    # warning, one program per size), still eager's values.
    def fn(x):
        if case == "before_grows":
            return F.pad(x, (20 - x.shape[1], 0)).cumsum(1)
        if case == "other_value":
            return F.pad(x, (0, 20 - x.shape[1]), value=2.5).cumsum(1)
        return F.pad(torch.ones(2, 3), (x.shape[1], 0)).cumsum(1) + x.sum()

    compiled = _compiled(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.BucketingWarning)
        for n in (5, 6, 7, 9):
            x = torch.randn(2, n)
            assert_same(compiled(x), fn(x))


# -- the HF loop --------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _loop(model, step, ids, mask, new):
    """transformers' docs' static-cache loop: the prompt eager, then ``step`` per token with
    the attention mask growing by one (greedy)."""
    batch, length = ids.shape
    cache = transformers.StaticCache(config=model.config, max_cache_len=length + new)
    with torch.no_grad():
        logits = model(
            ids, attention_mask=mask, cache_position=torch.arange(length), past_key_values=cache
        ).logits
        token = logits[:, -1:].argmax(-1)
        tokens, logit_rows = [token], []
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)[:, -1:]
        for i in range(new - 1):
            mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype)], 1)
            position_ids = position_ids + 1
            logits = step(token, mask, position_ids, torch.tensor([length + i]), cache)
            logit_rows.append(logits)
            token = logits[:, -1:].argmax(-1)
            tokens.append(token)
    return torch.cat(tokens, 1), logit_rows


def test_static_cache_decoding_step_with_a_growing_mask():
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY_LLM)).eval()

    def step(token, mask, position_ids, cache_position, cache):
        return model(
            token,
            attention_mask=mask,
            position_ids=position_ids,
            cache_position=cache_position,
            past_key_values=cache,
            return_dict=False,
            use_cache=True,
        )[0]

    torch.manual_seed(1)
    ids = torch.randint(3, 128, (2, 6))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    # mask lengths 7 to 15 (buckets 8 and 16) against a cache of 16
    want, want_logits = _loop(model, step, ids, mask, 10)
    compiled = torch.compile(step, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.BucketingWarning)
        got, got_logits = _loop(model, compiled, ids, mask, 10)
    assert torch.equal(got, want)
    assert_same(got_logits, want_logits)
    info = torch2xla.cache_info(compiled)
    # the first step, Dynamo's dynamic graph for buckets 8 and 16 (not one per token)
    assert info.misses == 3, info
