"""Dynamic shapes and bucketing: one Dynamo graph, one XLA program per bucket of sizes (or per
size), eager's results for every size; padding only where the graph proves it cannot change
them, with the real sizes read at run time where exactness needs them."""

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
    # (4 lengths: each its own program, as 8 did)
    info = _run_lengths(model, [3, 4, 5, 6], dynamic=True, options={"buckets": None})
    assert len(info) == 1  # one Dynamo graph: SymInt views, arange(T), masks from T
    assert info.misses == 4 and info.hits == 0


def test_dynamic_true_compiles_each_bucket_by_default():
    # The mask built from T and the softmax over the keys: the padded keys are masked.
    model = TinyGPT(causal_sdpa=False).eval()
    info = _run_lengths(model, [3, 4, 5, 6, 7, 8, 9, 10], dynamic=True)
    g = info[0]
    assert g.buckets == "auto (pow2)"
    assert g.bucketed == ("idx dim 0", "idx dim 1")
    assert g.misses == 3 and g.hits == 5  # buckets 4, 8, 16
    assert any("softmax" in f for f in g.padding_fixes)


def test_mark_dynamic_compiles_each_length():
    model = TinyGPT(causal_sdpa=True).eval()
    compiled = torch.compile(model, backend="xla", options={"buckets": None})
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
    info = _run_lengths(model, [4, 6, 8, 6], options={"buckets": None})
    # Dynamo specializes the first length, then traces a dynamic graph for the rest.
    assert [g.misses for g in info] == [1, 2]
    assert [g.hits for g in info] == [0, 1]
    assert "size mismatch" in info[1].dynamo_reason


def test_automatic_dynamic_second_graph_compiles_per_bucket():
    model = TinyGPT(causal_sdpa=True).eval()
    info = _run_lengths(model, [4, 6, 8, 6, 7, 5])
    assert [g.misses for g in info] == [1, 1]  # 4; then bucket 8 for 5 to 8
    assert [g.hits for g in info] == [0, 4]


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


def _centered(x):
    return (x - x.mean(1, keepdim=True)).sin()  # a mean counts the padded positions


def test_bucketing_refused_for_mean_over_padded_dim():
    compiled = torch.compile(_centered, backend="xla", dynamic=True, options={"buckets": "pow2"})
    with torch.no_grad():
        x = torch.randn(2, 5, 4)
        assert_same(compiled(x), _centered(x))
        x = torch.randn(2, 6, 4)
        with pytest.warns(torch2xla.BucketingWarning, match=r"x dim 1.*reduces") as rec:
            out = compiled(x)
        assert rec[0].filename == __file__  # the user's call
        assert_same(out, _centered(x))
    g = torch2xla.cache_info(compiled)[0]
    assert g.bucketed == ("x dim 0", "x dim 2")
    assert "reduces over padded dimension 1" in g.not_bucketed["x dim 1"]
    assert g.misses == 2
    assert "not bucketed" in g.recompile_reasons[0]


def test_default_buckets_warn_once_and_suggest_a_static_cache():
    compiled = torch.compile(_centered, backend="xla", dynamic=True)
    with torch.no_grad(), pytest.warns(torch2xla.BucketingWarning) as record:
        for n in (5, 6, 7):
            x = torch.randn(2, n, 4)
            assert_same(compiled(x), _centered(x))
    messages = [str(w.message) for w in record if w.category is torch2xla.BucketingWarning]
    assert len(messages) == 1
    assert "x dim 1" in messages[0] and "reduces" in messages[0]
    assert "cache_implementation='static'" in messages[0]


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
    "sum_over_seq": (lambda x: x.sum(1), "bsh", {}),  # padded positions zeroed first
    "mean_over_seq": (lambda x: x.mean(1), "bh", {"s": "reduces"}),
    "var_over_seq": (lambda x: x.var(1), "bh", {"s": "reduces"}),
    "softmax_over_seq": (lambda x: x.softmax(1), "bsh", {}),  # -inf past the real end
    "causal_attention": (_sdpa(True), "bs", {"h": "head dimension"}),
    "attention": (_sdpa(False), "bs", {"h": "head dimension"}),  # padded keys masked
    "contract_seq": (lambda x: x.transpose(1, 2) @ x, "bsh", {}),  # both operands zeroed
    "flip_seq": (lambda x: x.flip(1), "bh", {"s": "flips"}),
    "last_position": (lambda x: x[:, -1], "bsh", {}),  # from the real end
    "cumsum_seq": (lambda x: x.cumsum(1), "bsh", {}),
    "size_as_value": (lambda x: x / x.shape[1], "bsh", {}),  # the real size, at run time
    "arange_positions": (lambda x: x + torch.arange(x.shape[1])[None, :, None], "bsh", {}),
    "concat_seq": (lambda x: torch.cat([x, x], 1), "bsh", {}),  # written at the real end
    "flatten_rows": (lambda x: x.reshape(-1, 8) @ torch.ones(8, 3), "bs", {}),
    "flatten_rows_and_sum": (
        lambda x: x.reshape(-1, 8).sum(0),
        "",
        {"b": "flattened", "s": "flattened"},
    ),
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


# -- exactness of the padded programs that read the real sizes (one compile per bucket) --------
def _attend(x):
    q = x[:, None]
    return F.scaled_dot_product_attention(q, q, q)  # no mask: the padded keys get masked


def _attend_masked(x):
    q = x[:, None]
    keep = (x.sum(-1) > 0) | (torch.arange(x.shape[1]) == 0)  # a boolean mask over the keys
    return F.scaled_dot_product_attention(q, q, q, attn_mask=keep[:, None, None, :])


def _attend_cache(x):
    # A KV cache as HF's DynamicCache grows it: the new row concatenated after the cache.
    new = x[:, :1] * 0.5
    keys = torch.cat([x, new], 1)[:, None]
    return F.scaled_dot_product_attention(new[:, None], keys, keys), keys


FIX_CASES = {
    "sum": lambda x: x.sum(1),
    "amax": lambda x: x.amax(1),
    "argmax": lambda x: x.argmax(1),
    "max_and_indices": lambda x: tuple(x.min(1)),
    "logsumexp": lambda x: x.logsumexp(1),
    "softmax": lambda x: x.softmax(1),
    "softmax_with_inf": lambda x: x.masked_fill(x > 1, float("inf")).softmax(1),
    "log_softmax": lambda x: x.log_softmax(1),
    "vector_norm": lambda x: torch.linalg.vector_norm(x, dim=1),
    "gram": lambda x: x.transpose(1, 2) @ x,
    "attention": _attend,
    "attention_bool_mask": _attend_masked,
    "kv_cache": _attend_cache,
    "concat_two_padded": lambda x: torch.cat([x, 2 * x], 1),
    "last": lambda x: x[:, -1],
    "last_two": lambda x: x[:, -2:],
    "before_last": lambda x: x[:, -3:-1],
    "drop_first": lambda x: x[:, 1:],
    "drop_last": lambda x: x[:, :-1].cumsum(1),
    "first_two": lambda x: x[:, :2],
    "first": lambda x: x[:, 0],
    "size_as_value": lambda x: x / x.shape[1],
    "positions_from_the_end": lambda x: torch.arange(x.shape[1]) - x.shape[1],
    "index_with_arange": lambda x: x[:, torch.arange(x.shape[1] - 1)],
}


@pytest.mark.parametrize("name", list(FIX_CASES))
@torch.no_grad()
def test_padded_programs_read_the_real_sizes(name):
    fn = FIX_CASES[name]
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    for n in (3, 6, 9, 5):
        x = torch.randn(2, n, 4)
        assert_same(compiled(x), fn(x))
    g = torch2xla.cache_info(compiled)[0]
    assert "x dim 1" in g.bucketed, g.not_bucketed
    assert (g.misses, g.hits) == (3, 1)  # buckets 4, 8, 16


@torch.no_grad()
def test_padded_programs_write_back_in_place_updates():
    def f(x, cache):
        cache.copy_(cache.softmax(1))  # in place, normalized over the padded dim
        return torch.cat([cache, x[:, :1]], 1).sum(1)

    compiled = torch.compile(f, backend="xla", dynamic=True, options={"buckets": "pow2"})
    for n in (3, 6, 7):
        x, cache = torch.randn(2, n, 4), torch.randn(2, n, 4)
        cache_ref = cache.clone()
        assert_same(compiled(x, cache), f(x, cache_ref))
        assert_same(cache, cache_ref)
    assert torch2xla.cache_info(compiled).misses == 2  # buckets 4 and 8


@torch.no_grad()
def test_a_failing_padded_program_compiles_exactly_and_warns(monkeypatch):
    import torch2xla.capture._lower

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(torch2xla.capture._lower, "relower", broken)
    fn = FIX_CASES["softmax"]
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    x = torch.randn(2, 3, 4)
    with pytest.warns(torch2xla.BucketingWarning, match="padded program failed.*injected"):
        assert_same(compiled(x), fn(x))
    for n in (5, 6):
        x = torch.randn(2, n, 4)
        assert_same(compiled(x), fn(x))
    g = torch2xla.cache_info(compiled)[0]
    assert g.misses == 3 and g.bucketed == ()  # one program per size from then on
