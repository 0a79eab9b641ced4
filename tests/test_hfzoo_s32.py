"""transformers architectures and usages no other test builds, compiled with backend="xla",
against eager (session 32's probe, scripts/probe_hfzoo32.py, found no wrong answer in them;
these keep the representative ones): FNet's FFT token mixing, ESM's rotary embeddings with
token dropout, BEiT's relative position bias, Informer's ProbSparse attention (a top-k of
sampled scores), a Llama in bfloat16 and a Llama given a 4D boolean attention mask.

Tiny random models (hidden 32, 2 layers), dropout and drop path off. Training checks the loss
and every parameter's gradient with its None-ness; values within fp32's tolerance, or, where
they are not, no farther from a float64 run than eager is.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils._pytree as pytree

from tests._util import fresh_dynamo

transformers = pytest.importorskip("transformers")

VOCAB = 128
RTOL, ATOL = 1.3e-6, 1e-5
_SMALL = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
_TOKENS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
_ENC = {
    **_SMALL,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
_LLM = {
    **_SMALL,
    "intermediate_size": 64,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    **_TOKENS,
}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


def _built(cls, config, **kw):
    return lambda: getattr(transformers, cls)(getattr(transformers, config)(**kw))


def _padded_mlm():
    ids = torch.randint(3, VOCAB, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    labels = ids.clone()
    labels[:, ::2] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _forecast():
    past, future = 10, 4  # context 8 and the largest lag, 2
    return {
        "past_values": torch.randn(2, past),
        "past_time_features": torch.randn(2, past, 1),
        "past_observed_mask": torch.ones(2, past),
        "future_values": torch.randn(2, future),
        "future_time_features": torch.randn(2, future, 1),
    }


_INFORMER = {
    "prediction_length": 4,
    "context_length": 8,
    "lags_sequence": [1, 2],
    "num_time_features": 1,
    "d_model": 16,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 16,
    "decoder_ffn_dim": 16,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "encoder_layerdrop": 0.0,
    "decoder_layerdrop": 0.0,
    "attention_type": "prob",
    "sampling_factor": 2,
}

TRAIN = {
    "fnet": (
        _built("FNetForMaskedLM", "FNetConfig", **_ENC, use_tpu_fourier_optimizations=False),
        _padded_mlm,
    ),
    "esm_rotary": (
        _built(
            "EsmForMaskedLM",
            "EsmConfig",
            **{**_ENC, "pad_token_id": 1},
            mask_token_id=4,
            position_embedding_type="rotary",
            token_dropout=True,
        ),
        _padded_mlm,
    ),
    "beit_relative_bias": (
        _built(
            "BeitForImageClassification",
            "BeitConfig",
            image_size=32,
            patch_size=8,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            drop_path_rate=0.0,
            num_labels=3,
            use_relative_position_bias=True,
            layer_scale_init_value=0.1,
        ),
        lambda: {"pixel_values": torch.randn(2, 3, 32, 32), "labels": torch.tensor([0, 2])},
    ),
    "informer_probsparse": (
        _built("InformerForPrediction", "InformerConfig", **_INFORMER),
        _forecast,
    ),
}


def _tensors(out):
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _double(inputs):
    return {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}


def _assert_close_or_as_exact(got, expected, exact, what):
    """``got`` within fp32's tolerance of eager's ``expected``, or no farther from the float64
    ``exact()`` than eager is (to that tolerance)."""
    assert got.dtype == expected.dtype and got.shape == expected.shape, what
    if torch.allclose(got, expected, rtol=RTOL, atol=ATOL):
        return
    x = exact().double()
    err_got = (got.double() - x).abs().max().item()
    err_eager = (expected.double() - x).abs().max().item()
    assert err_got <= err_eager + ATOL + RTOL * x.abs().max().item(), (what, err_got, err_eager)


# (the slowest, Informer's, runs with ``-m slow``)
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n.startswith("informer") else n for n in TRAIN],
)
def test_train_step(name):
    build, make_inputs = TRAIN[name]
    torch.manual_seed(0)
    model = build().train()
    ref = copy.deepcopy(model)
    torch.manual_seed(1)
    inputs = make_inputs()
    expected = ref(**copy.deepcopy(inputs))
    got = torch.compile(model, backend="xla")(**copy.deepcopy(inputs))
    got_t, exp_t = _tensors(got), _tensors(expected)
    assert len(got_t) == len(exp_t)
    ref64 = None

    def run64():
        nonlocal ref64
        if ref64 is None:
            m = copy.deepcopy(ref).double()
            ref64 = (m, m(**_double(inputs)))
        return ref64

    for i, (g, e) in enumerate(zip(got_t, exp_t)):
        _assert_close_or_as_exact(g, e, lambda i=i: _tensors(run64()[1])[i], f"output {i}")
    expected.loss.backward()
    got.loss.backward()
    grads64 = None
    for (pname, p), q in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), pname
        if q.grad is None:
            continue

        def exact(pname=pname):
            nonlocal grads64
            if grads64 is None:
                m, out = run64()
                out.loss.backward()
                grads64 = {n: v.grad for n, v in m.named_parameters()}
            return grads64[pname]

        _assert_close_or_as_exact(p.grad, q.grad, exact, pname)


_LLAMA = _built("LlamaForCausalLM", "LlamaConfig", **_LLM)


@torch.no_grad()
def test_llama_in_bfloat16():
    # the whole model in bfloat16 (``model.to(torch.bfloat16)``): the logits' dtype, and an
    # error against a float64 run of the same bfloat16 weights no larger than eager's (each
    # side rounds in its own order)
    torch.manual_seed(0)
    model = _LLAMA().eval().to(torch.bfloat16)
    ids = torch.randint(3, VOCAB, (2, 10))
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    expected = model(input_ids=ids, attention_mask=mask).logits
    got = torch.compile(model, backend="xla")(input_ids=ids, attention_mask=mask).logits
    exact = copy.deepcopy(model).double()(input_ids=ids, attention_mask=mask).logits
    assert got.dtype == expected.dtype == torch.bfloat16 and got.shape == expected.shape
    err_got = (got.double() - exact).abs().max().item()
    err_eager = (expected.double() - exact).abs().max().item()
    assert err_got <= 2 * err_eager + 1e-2 * exact.abs().max().item(), (err_got, err_eager)


@torch.no_grad()
def test_llama_with_a_4d_boolean_mask():
    # a user's own (batch, 1, query, key) boolean mask, which transformers passes through
    torch.manual_seed(0)
    model = _LLAMA().eval()
    ids = torch.randint(3, VOCAB, (2, 8))
    mask = torch.tril(torch.ones(8, 8, dtype=torch.bool))[None, None].repeat(2, 1, 1, 1)
    mask[1, :, :, :2] = False
    mask[1, :, :2, 0] = True
    mask[1, :, 1, 1] = True
    expected = model(input_ids=ids, attention_mask=mask).logits
    got = torch.compile(model, backend="xla")(input_ids=ids, attention_mask=mask).logits
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)
