"""Dynamic shapes and bucketing: one Dynamo graph, one XLA program per size (or per bucket),
eager's results for every size; padding only where the graph proves it cannot change them."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2xla
from tests._util import assert_same
from torch2xla.guards import Bucketing, BucketSpec, SignatureKey


class TinyGPT(nn.Module):
    """Embeddings + positions from ``arange(T)``, one attention block, views built from sizes.

    ``causal_sdpa=True`` uses ``scaled_dot_product_attention(is_causal=True)``; otherwise the
    mask is built from the sequence length and applied before a softmax over the keys.
    """

    def __init__(self, causal_sdpa: bool, vocab: int = 50, dim: int = 16, heads: int = 2):
        super().__init__()
        self.causal_sdpa, self.heads = causal_sdpa, heads
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(64, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.head = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, vocab)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        C = x.shape[-1]
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.causal_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return self.head(F.gelu(self.fc(self.ln2(x))))


def _tokens(b: int, t: int) -> torch.Tensor:
    return torch.randint(0, 50, (b, t))


def _run_lengths(model, lengths, batch=2, **compile_kw):
    compiled = torch.compile(model, backend="xla", **compile_kw)
    with torch.no_grad():
        for t in lengths:
            idx = _tokens(batch, t)
            assert_same(compiled(idx), model(idx), atol=2e-5)
    return torch2xla.cache_info(compiled)


def test_dynamic_true_traces_once_and_compiles_each_length():
    model = TinyGPT(causal_sdpa=False).eval()
    info = _run_lengths(model, [3, 4, 5, 6, 7, 8, 9, 10], dynamic=True)
    assert len(info) == 1  # one Dynamo graph: SymInt views, arange(T), masks from T
    assert info.misses == 8 and info.hits == 0


def test_mark_dynamic_compiles_each_length():
    model = TinyGPT(causal_sdpa=True).eval()
    compiled = torch.compile(model, backend="xla")
    with torch.no_grad():
        for t in (5, 9, 5, 12):
            idx = _tokens(2, t)
            torch._dynamo.mark_dynamic(idx, 1)
            assert_same(compiled(idx), model(idx), atol=2e-5)
    info = torch2xla.cache_info(compiled)
    assert len(info) == 1
    assert (info.misses, info.hits) == (3, 1)
    assert info[0].recompile_reasons == ["idx dim 1: 5 -> 9", "idx dim 1: 5 -> 12"]


def test_automatic_dynamic_second_graph_compiles_per_length():
    model = TinyGPT(causal_sdpa=True).eval()
    info = _run_lengths(model, [4, 6, 8, 6])
    # Dynamo specializes the first length, then traces a dynamic graph for the rest.
    assert [g.misses for g in info] == [1, 2]
    assert [g.hits for g in info] == [0, 1]
    assert "size mismatch" in info[1].dynamo_reason


def test_bucketing_pow2_pads_causal_attention_exactly():
    model = TinyGPT(causal_sdpa=True).eval()
    lengths = [3, 4, 5, 7, 8, 9, 12, 16]
    info = _run_lengths(model, lengths, dynamic=True, options={"buckets": "pow2"})
    g = info[0]
    assert g.bucketed == ("idx dim 0", "idx dim 1")
    assert g.misses == 3  # buckets 4, 8, 16
    assert g.recompile_reasons == ["idx dim 1 (bucket): 4 -> 8", "idx dim 1 (bucket): 8 -> 16"]


def test_bucket_list_leaves_larger_sizes_exact():
    model = TinyGPT(causal_sdpa=True).eval()
    info = _run_lengths(model, [5, 8, 11, 13], dynamic=True, options={"buckets": [8]})
    assert info.misses == 3  # 5 and 8 share bucket 8; 11 and 13 compile as they are


def test_bucketing_refused_for_softmax_over_padded_keys():
    model = TinyGPT(causal_sdpa=False).eval()
    compiled = torch.compile(model, backend="xla", dynamic=True, options={"buckets": "pow2"})
    with torch.no_grad():
        idx = _tokens(2, 5)
        assert_same(compiled(idx), model(idx), atol=2e-5)
        idx = _tokens(2, 6)
        with pytest.warns(torch2xla.BucketingWarning, match=r"idx dim 1.*softmax") as rec:
            out = compiled(idx)
        assert rec[0].filename == __file__  # the user's call
        assert_same(out, model(idx), atol=2e-5)
    g = torch2xla.cache_info(compiled)[0]
    assert g.bucketed == ("idx dim 0",)
    assert "softmax" in g.not_bucketed["idx dim 1"]
    assert g.misses == 2
    assert "not bucketed" in g.recompile_reasons[0]


def test_bucketing_refused_for_batch_norm_statistics():
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8)).train()
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"buckets": "pow2"})
    with torch.no_grad():
        for n in (3, 5):
            x = torch.randn(n, 6)
            torch._dynamo.mark_dynamic(x, 0)
            if n == 5:
                with pytest.warns(torch2xla.BucketingWarning, match="batch norm"):
                    out = compiled(x)
            else:
                out = compiled(x)
            assert_same(out, ref(x))
    assert_same(model[1].running_mean, ref[1].running_mean)
    assert_same(model[1].running_var, ref[1].running_var)


def test_bucketing_writes_back_in_place_updates():
    def f(x, y):
        x.mul_(2.0)
        return x + y

    compiled = torch.compile(f, backend="xla", options={"buckets": "pow2"})
    for n in (3, 5, 6):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        x_ref = x.clone()
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(y, 0)
        assert_same(compiled(x, y), f(x_ref, y))
        assert_same(x, x_ref)
    assert torch2xla.cache_info(compiled).misses == 2  # buckets 4 and 8


def test_bucketing_does_not_pad_training_calls():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"buckets": "pow2"})
    for n in (3, 5):
        x = torch.randn(n, 4)
        torch._dynamo.mark_dynamic(x, 0)
        compiled(x).pow(2).mean().backward()
        ref(x).pow(2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert_same(p.grad, q.grad)
    g = torch2xla.cache_info(compiled)[-1]
    assert all("(bucket)" not in s.signature for s in g.signatures)


def test_buckets_option_is_validated():
    for bad in ("pow3", [], [0, 8], 16):
        with pytest.raises(ValueError, match="buckets"):
            torch2xla.Options.parse(None, {"buckets": bad})
    assert BucketSpec.parse([16, 8, 8]).sizes == (8, 16)
    spec = BucketSpec.parse("pow2")
    assert [spec(n) for n in (2, 3, 4, 5, 17)] == [2, 4, 4, 8, 32]


# -- the padding analysis, case by case (no XLA compile) ------------------------------------
_lin, _ln = nn.Linear(8, 8), nn.LayerNorm(8)


def _sdpa(causal):
    return lambda x: F.scaled_dot_product_attention(
        x[:, None], x[:, None], x[:, None], is_causal=causal
    )


# (function of x: (batch, seq, hidden), symbols safe to pad, refused symbol -> words in reason)
ANALYSIS_CASES = {
    "pointwise": (lambda x: (x * 2).sin() + 1, "bsh", {}),
    # The weights' static sizes make Dynamo specialize the hidden size: no symbol to pad.
    "linear_on_3d": (lambda x: _lin(x), "bs", {}),
    "layer_norm": (lambda x: _ln(x), "bs", {}),
    "layer_norm_over_seq": (
        lambda x: F.layer_norm(x, x.shape[1:]),
        "b",
        {"s": "layer norm", "h": "layer norm"},
    ),
    "sum_over_seq": (lambda x: x.sum(1), "bh", {"s": "reduces over padded dimension 1"}),
    "mean_over_seq": (lambda x: x.mean(1), "bh", {"s": "reduces"}),
    "softmax_over_seq": (lambda x: x.softmax(1), "bh", {"s": "softmax"}),
    "causal_attention": (_sdpa(True), "bs", {"h": "head dimension"}),
    "attention": (_sdpa(False), "b", {"s": "without a causal mask", "h": "head dimension"}),
    "contract_seq": (lambda x: x.transpose(1, 2) @ x, "bh", {"s": "contracts"}),
    "flip_seq": (lambda x: x.flip(1), "bh", {"s": "flips"}),
    "last_position": (lambda x: x[:, -1], "bh", {"s": "selects one index"}),
    "cumsum_seq": (lambda x: x.cumsum(1), "bsh", {}),
    "size_as_value": (lambda x: x / x.shape[1], "bh", {"s": "as a value"}),
    "arange_positions": (lambda x: x + torch.arange(x.shape[1])[None, :, None], "bsh", {}),
    "concat_seq": (lambda x: torch.cat([x, x], 1), "bh", {"s": "concatenates"}),
    "flatten_rows": (lambda x: x.reshape(-1, 8) @ torch.ones(8, 3), "bs", {}),
    "split_heads": (
        lambda x: x.view(x.shape[0], x.shape[1], 2, -1).transpose(1, 2) * 3,
        "bs",
        {"h": "reshapes a padded dimension"},
    ),
    "batch_norm_training": (
        lambda x: F.batch_norm(x.transpose(1, 2), None, None, training=True),
        "",
        {"b": "statistics over padded dimension 0", "s": "statistics", "h": "channel"},
    ),
}


@pytest.mark.parametrize("name", list(ANALYSIS_CASES))
def test_padding_analysis(name):
    fn, safe, refused = ANALYSIS_CASES[name]
    got = {}

    def backend(gm, example_inputs):
        key = SignatureKey(gm)  # inside the backend, where Dynamo's metadata is complete

        def run(*args):
            got.setdefault("bucketing", Bucketing(gm, key, BucketSpec(None), args))
            return gm(*args)

        return run

    with torch.no_grad():
        torch.compile(fn, backend=backend, dynamic=True)(torch.randn(2, 6, 8))
    b = got["bucketing"]
    names = {"x dim 0": "b", "x dim 1": "s", "x dim 2": "h"}
    assert "".join(sorted(names[b.key.sources[j].label] for j in b.safe)) == "".join(sorted(safe))
    assert {names[k] for k in b.refused} == set(refused)
    for label, reason in b.refused.items():
        assert refused[names[label]] in reason
