"""HF ``generate`` paths with the forward compiled by backend="xla", against eager: greedy
tokens equal to eager's (fp32), scores within fp32 tolerance, and a bounded number of programs
per generation. Each test is a class of bug once found on one of these paths; the models are
tiny random ones built here (nothing is downloaded)."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla
from tests._util import (
    TINY_LLM,
    assert_same,
    dynamo_graphs_in_eager,
    fresh_dynamo,
    greedy_generate,
)

transformers = pytest.importorskip("transformers")

_LLM = TINY_LLM


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():  # program counts are those of a fresh process
        yield


def _prompt(batch: int, length: int, left_padding: int = 0) -> dict:
    torch.manual_seed(1)
    ids = torch.randint(3, 128, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[0, :left_padding] = 0
    ids[0, :left_padding] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _compiled_generate(model, inputs: dict, new_tokens: int, **kw):
    """(eager's tokens, the compiled forward's tokens, torch2xla's warnings)."""
    expected = greedy_generate(model, inputs, new_tokens, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = greedy_generate(model, inputs, new_tokens, **kw)
    ours = [w for w in caught if str(w.message).startswith("torch2xla")]
    return expected, got, ours


# -- indexing a padded dimension with any index ---------------------------------------------
def _take_window(mask, offset):
    # HF's padding mask read at a sliding window's key positions (masking_utils.py):
    # ``padding_mask[batch_idx, arange(kv_length) + kv_offset]``, the offset a tensor
    return mask[:, torch.arange(3) + offset]


def _select_window(mask, offset):
    return mask.index_select(1, torch.arange(3) + offset)


@pytest.mark.parametrize("fn", [_take_window, _select_window], ids=["index", "index_select"])
@torch.no_grad()
def test_indexing_a_padded_dim_with_any_index_matches_eager(fn):
    # Refused before (each size compiled its own program): an index tensor of any value into
    # a padded dim. Now taken against the real length: a negative index counts from the real
    # end (not the padded one), and an index eager refuses still raises eager's error.
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    negative = fn is _take_window  # (index_select refuses negative indices)
    for n in (5, 6, 7, 9, 11):
        mask = torch.randn(2, n)
        for offset in (0, n - 3, *((-n, -3) if negative else ())):
            offset = torch.tensor(offset)
            assert_same(compiled(mask, offset), fn(mask, offset))
    info = torch2xla.cache_info(compiled)
    assert "mask dim 1" in info[0].bucketed
    assert info.misses == 2  # buckets 8 and 16
    for offset in (9, -12):  # past the real end (inside the bucket), before the real start
        if offset < 0 and not negative:
            continue
        with pytest.raises((IndexError, RuntimeError)) as eager:
            fn(torch.randn(2, 11), torch.tensor(offset))
        with pytest.raises(type(eager.value)) as ours:
            compiled(torch.randn(2, 11), torch.tensor(offset))
        assert str(ours.value).startswith(str(eager.value).splitlines()[0])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i: x[:, i],  # eager names dimension 0: the first indexed one
        lambda x, i: x[:, :, i],
        lambda x, i: x[i, :, i],  # dimension 1
        lambda x, i: x.index_select(1, i),  # CPU: a RuntimeError of its own along dim 1
        lambda x, i: x.index_select(2, i),
    ],
    ids=["index-1", "index-2", "index-0-2", "index_select-1", "index_select-2"],
)
@torch.no_grad()
def test_index_errors_name_eagers_dimension(fn):
    x, i = torch.randn(4, 4, 4), torch.tensor([1, 7])
    with pytest.raises((IndexError, RuntimeError)) as eager:
        fn(x, i)
    with pytest.raises(type(eager.value)) as ours:
        torch.compile(fn, backend="xla")(x, i)
    assert str(ours.value).startswith(str(eager.value).splitlines()[0])


@torch.no_grad()
def test_sliding_window_left_padded_batch_dynamic_cache():
    # Mistral with a sliding window, a left-padded batch: the sliding-window mask indexes the
    # padding mask (one longer every token) at ``arange(window) + offset``; that graph
    # compiled one program per token for it (BucketingWarning).
    torch.manual_seed(0)
    config = transformers.MistralConfig(**_LLM, sliding_window=4)
    model = transformers.MistralForCausalLM(config).eval()
    graphs = dynamo_graphs_in_eager(model, _prompt(2, 9, left_padding=3), 10)
    expected, got, warned = _compiled_generate(model, _prompt(2, 9, left_padding=3), 10)
    assert torch.equal(got, expected)
    assert not warned, warned[0].message
    info = torch2xla.cache_info(model.forward)
    assert any("attention_mask'] dim 1" in label for g in info for label in g.bucketed), info
    # One program per Dynamo graph (the prompt's, the steps': 3 in eager too, the first step
    # seeing the cache's keys with the prompt's strides), and one more for the second bucket
    # of the mask's length (16, 32 for 10 to 18): the sliding-window cache's length,
    # ``cumulative_length``, an int argument of the step's graph, reaches it as a tensor
    # (capture/_int_values.py), and Dynamo's guard tying it to the mask's length
    # (``Max(0, n - 3) + 4 <= mask length``) holds at the bucket's length too.
    assert len(info) == graphs, info
    assert info.misses == graphs + 1, info


# -- Python numbers out of a graph ----------------------------------------------------------
class _Layer:
    def __init__(self) -> None:
        self.length = 0


def _grow(x, layer):
    layer.length += x.shape[0]  # (HF's sliding-window cache: cumulative_length_int)
    return x * 2, x.shape[0] + 1, x.shape[0] > 3, x.shape[0] / 2


@torch.no_grad()
def test_sizes_a_graph_returns_are_python_numbers():
    # A size Dynamo's graph returns (or writes back into an attribute) came back as a 0-d
    # tensor: the next trace saw a tensor where eager has an int, and its ``if`` broke the
    # graph on a data-dependent branch (T5Gemma's static cache then failed in Dynamo).
    ours, theirs = _Layer(), _Layer()
    compiled = torch.compile(_grow, backend="xla", dynamic=True, options={"buckets": None})
    for n in (3, 4, 5):
        x = torch.randn(n)
        got, want = compiled(x, ours), _grow(x, theirs)
        assert_same(got[0], want[0])
        assert [type(v) for v in got[1:]] == [type(v) for v in want[1:]] == [int, bool, float]
        assert got[1:] == want[1:]
        assert type(ours.length) is int and ours.length == theirs.length


def _t5gemma():
    torch.manual_seed(0)
    llm = {**_LLM, "head_dim": 16, "sliding_window": 4}
    config = transformers.T5GemmaConfig(
        encoder=llm,
        decoder=llm,
        vocab_size=128,
        dropout_rate=0.0,
        attention_dropout=0.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    return transformers.T5GemmaForConditionalGeneration(config).eval()


@pytest.mark.slow  # (about 24 s on 2 cores)
@torch.no_grad()
def test_t5gemma_generates_with_the_static_cache():
    # Its sliding-window cache keeps its length in a Python int that the compiled step
    # updates: it came back a tensor, and the next step failed in Dynamo ("The size of tensor
    # a (s27) must match the size of tensor b (4)").
    model = _t5gemma()
    expected, got, warned = _compiled_generate(
        model, _prompt(1, 7), 8, cache_implementation="static"
    )
    assert torch.equal(got, expected)
    assert not warned, warned[0].message


@pytest.mark.slow
@torch.no_grad()
def test_t5gemma_generates_with_the_dynamic_cache_all_in_xla():
    # The same int, a tensor, made ``arange(n) + past_seen_tokens`` data-dependent: an op ran
    # in eager inside the graph, which then compiled per size (21 programs for 8 tokens).
    # (Not checked: its decoder's graph pads the cache's length, an int, and the padded
    # program fails to export, "expand 4 -> 3": a BucketingWarning, then one program per
    # size for that graph.)
    model = _t5gemma()
    expected, got, warned = _compiled_generate(model, _prompt(1, 7), 8)
    assert torch.equal(got, expected)
    fallbacks = [w for w in warned if issubclass(w.category, torch2xla.FallbackWarning)]
    assert not fallbacks, fallbacks[0].message
    assert torch2xla.cache_info(model.forward).misses <= 8
