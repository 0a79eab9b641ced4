"""capture/_causal.py: a causal mask computed from constants reaches sdpa as is_causal=True,
with eager's values and gradients; every other mask is kept."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _compiled(fn):
    """``fn`` compiled, and the (attn_mask, is_causal) of its sdpa nodes after the passes."""
    seen: list[tuple[bool, bool]] = []

    def inspect(gm):
        for node in gm.graph.nodes:
            if node.op == "call_function" and "torch2xla.sdpa" in str(node.target):
                causal_pos = 5 if "dropout" in str(node.target) else 4
                seen.append((node.args[3] is not None, node.args[causal_pos]))

    return torch.compile(fn, backend="xla", options={"passes": [inspect]}), seen


def _check(fn, *shapes, folded: bool):
    torch.manual_seed(0)
    q, k, v = (torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes)
    compiled, seen = _compiled(fn)
    out = compiled(q, k, v)
    ref = fn(q, k, v)
    torch.testing.assert_close(out, ref)
    ct = torch.randn_like(ref)
    got = torch.autograd.grad(out, (q, k, v), ct)
    want = torch.autograd.grad(ref, (q, k, v), ct)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    assert seen == [(False, True)] if folded else seen and all(m for m, _ in seen), seen


def _positions(q):
    return torch.arange(q.shape[-2], device=q.device)


def test_bool_mask_from_positions_is_causal():
    def f(q, k, v):
        i = _positions(q)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=i[None, :] <= i[:, None])

    _check(f, (2, 3, 8, 4), (2, 3, 8, 4), (2, 3, 8, 4), folded=True)


@pytest.mark.parametrize("fill", ["min", "-inf"])
def test_additive_mask_of_lowest_values_is_causal(fill):
    def f(q, k, v):
        T = q.shape[-2]
        low = torch.finfo(q.dtype).min if fill == "min" else float("-inf")
        m = torch.full((T, T), low, dtype=q.dtype).triu(1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m.expand(q.shape[0], 1, T, T))

    _check(f, (2, 3, 8, 4), (2, 3, 8, 4), (2, 3, 8, 4), folded=True)


@pytest.mark.parametrize(
    "mask",
    [
        lambda i: i[None, :] <= i[:, None] + 1,  # a band one step wider
        lambda i: i[None, :] < i[:, None],  # the diagonal excluded
        lambda i: torch.stack([i[None, :] <= i[:, None], (i[None, :] >= 0).expand(8, 8)])[
            :, None
        ],  # per batch
    ],
)
def test_other_masks_are_kept(mask):
    def f(q, k, v):
        m = mask(_positions(q))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        return torch.nan_to_num(out)  # (the diagonal-free mask leaves row 0 empty: NaN in eager)

    _check(f, (2, 3, 8, 4), (2, 3, 8, 4), (2, 3, 8, 4), folded=False)


def test_additive_mask_of_finite_values_is_kept():
    def f(q, k, v):
        T = q.shape[-2]
        m = torch.full((T, T), -1e4, dtype=q.dtype).triu(1)  # not the lowest value: kept
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    _check(f, (2, 3, 8, 4), (2, 3, 8, 4), (2, 3, 8, 4), folded=False)


def test_mask_read_from_an_input_is_kept():
    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    q, k, v = (torch.randn(2, 3, 8, 4) for _ in range(3))
    m = torch.ones(8, 8, dtype=torch.bool).tril()
    compiled, seen = _compiled(f)
    torch.testing.assert_close(compiled(q, k, v, m), f(q, k, v, m))
    assert seen == [(True, False)]


def test_causal_pattern_over_fewer_queries_than_keys_is_kept():
    """Decoding's rectangle: is_causal aligns top-left, the mask bottom-right."""

    def f(q, k, v):
        S, T = k.shape[-2], q.shape[-2]
        i = torch.arange(T) + (S - T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.arange(S) <= i[:, None])

    _check(f, (2, 3, 3, 4), (2, 3, 8, 4), (2, 3, 8, 4), folded=False)


def test_transformers_materialized_mask_becomes_causal(monkeypatch):
    """transformers with torch < 2.14 builds the causal mask as a tensor under compile."""
    transformers = pytest.importorskip("transformers")
    from transformers import masking_utils

    if hasattr(masking_utils, "is_torchdynamo_exporting"):  # (older transformers: always)
        monkeypatch.setattr(masking_utils, "is_torchdynamo_exporting", lambda: True)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=64, attn_pdrop=0, resid_pdrop=0, embd_pdrop=0
    )
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 64, (2, 12))
    compiled, seen = _compiled(model)
    loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(input_ids=ids, labels=ids).loss
    ref.backward()
    assert seen == [(False, True)] * 2
    torch.testing.assert_close(loss, ref)
    for g, p in zip(got, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad)
