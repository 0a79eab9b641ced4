"""Transformers architectures tests/test_hf_zoo.py and scripts/probe_hf*.py lacked, compiled
with backend="xla", against eager (session 23's probe: scripts/probe_hf3.py, which checks ~40).

Tiny random models (hidden 32, 2 layers, float32): FNet's Fourier mixing (``fft``), ModernBERT's
alternating local/global attention, ESM's token dropout and rotary embeddings, TAPAS's cell
selection (segment means through ``scatter_reduce``), Llama 4's chunked attention and experts,
ConvNeXt v2's global response norm, PatchTST's BatchNorm (its running statistics compared) and
the probabilistic TimeSeriesTransformer (a Student-t's negative log-likelihood, ``lgamma``). Per
architecture: the eval forward with the model's own loss; a training step (outputs, every
gradient and its None-ness, buffers after); gradient checkpointing; a training step with
dropout on (values cannot match eager's random numbers: finite loss and gradients, None where
eager's are); greedy ``generate`` for the decoder, with a bounded number of programs.
Gradients that are not within fp32's tolerance of eager's must be at least as close to a float64
eager run as eager's (tests/test_hf_zoo.py's ``_assert_grads``).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

import torch2xla
from tests._util import assert_same, fresh_dynamo
from tests.test_hf_zoo import (
    _CLASSIFIER,
    _ENCODER,
    _LLM,
    VOCAB,
    Arch,
    _assert_grads,
    _built,
    _mlm,
    _padded_ids,
    _pixels,
    _tensors,
    _text,
    _Watch,
)

transformers = pytest.importorskip("transformers")


# -- inputs -------------------------------------------------------------------------------------
def _typed_mlm():
    inputs, labels = _mlm()
    types = torch.zeros_like(inputs["input_ids"])
    types[:, 6:] = 1
    del inputs["attention_mask"]  # (FNet takes none)
    return {**inputs, "token_type_ids": types}, labels


def _esm():
    ids = torch.randint(4, 32, (2, 12))
    ids[0, 3] = 32  # <mask>: ESM's token dropout rescales the embeddings by their share
    ids[1, 7] = 32
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    labels = ids.clone()
    labels[:, ::2] = -100
    return {"input_ids": ids, "attention_mask": mask}, {"labels": labels}


def _tapas():
    inputs = _padded_ids()
    ids = inputs["input_ids"]
    types = torch.zeros(*ids.shape, 7, dtype=torch.long)
    types[:, 4:, 0] = 1  # segment: the table after a 4-token question
    types[:, 4:, 1] = torch.tensor([1, 2, 1, 2, 1, 2, 1, 2])  # column
    types[:, 4:, 2] = torch.tensor([1, 1, 2, 2, 3, 3, 4, 4])  # row
    labels = torch.zeros_like(ids)
    labels[0, 6:8] = 1
    labels[1, 4:6] = 1
    return {**inputs, "token_type_ids": types}, {"labels": labels}


def _patchtst():
    return {"past_values": torch.randn(2, 32, 2)}, {"future_values": torch.randn(2, 8, 2)}


def _tst():
    past = 10  # context 8 + the largest lag 2
    return {
        "past_values": torch.randn(2, past),
        "past_time_features": torch.arange(past, dtype=torch.float32).expand(2, past)[..., None]
        / 10,
        "past_observed_mask": torch.ones(2, past),
        "future_time_features": torch.arange(past, past + 4, dtype=torch.float32).expand(2, 4)[
            ..., None
        ]
        / 10,
    }, {"future_values": torch.randn(2, 4)}


ZOO3 = {
    "fnet": Arch(
        _built(
            "FNetForMaskedLM",
            "FNetConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            intermediate_size=64,
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            use_tpu_fourier_optimizations=False,
        ),
        _typed_mlm,
    ),
    "modernbert": Arch(
        _built(
            "ModernBertForMaskedLM",
            "ModernBertConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
            local_attention=4,
            global_attn_every_n_layers=2,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            cls_token_id=1,
            sep_token_id=2,
        ),
        _mlm,
    ),
    "esm": Arch(
        _built(
            "EsmForMaskedLM",
            "EsmConfig",
            vocab_size=33,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            position_embedding_type="rotary",
            pad_token_id=1,
            mask_token_id=32,
            token_dropout=True,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
        _esm,
    ),
    "tapas": Arch(
        _built(
            "TapasForQuestionAnswering",
            "TapasConfig",
            **_ENCODER,
            num_aggregation_labels=0,
            select_one_column=True,
        ),
        _tapas,
    ),
    "llama4": Arch(
        _built(
            "Llama4ForCausalLM",
            "Llama4TextConfig",
            **_LLM,
            head_dim=8,
            intermediate_size_mlp=64,
            num_local_experts=4,
            num_experts_per_tok=1,
            interleave_moe_layer_step=2,
            attention_chunk_size=8,
            no_rope_layers=[1, 0],
        ),
        _text,
        generates=True,
    ),
    "convnextv2": Arch(
        _built(
            "ConvNextV2ForImageClassification",
            "ConvNextV2Config",
            num_channels=3,
            patch_size=4,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            num_stages=2,
            drop_path_rate=0.0,
            image_size=32,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "patchtst": Arch(
        _built(
            "PatchTSTForPrediction",
            "PatchTSTConfig",
            num_input_channels=2,
            context_length=32,
            patch_length=8,
            patch_stride=8,
            prediction_length=8,
            d_model=32,
            num_attention_heads=4,
            num_hidden_layers=2,
            ffn_dim=64,
            attention_dropout=0.0,
            positional_dropout=0.0,
            path_dropout=0.0,
            ff_dropout=0.0,
            head_dropout=0.0,
            dropout=0.0,
            loss="mse",
        ),
        _patchtst,
    ),
    "time_series_transformer": Arch(
        _built(
            "TimeSeriesTransformerForPrediction",
            "TimeSeriesTransformerConfig",
            prediction_length=4,
            context_length=8,
            lags_sequence=[1, 2],
            num_time_features=1,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            encoder_layerdrop=0.0,
            decoder_layerdrop=0.0,
            distribution_output="student_t",
        ),
        _tst,
    ),
}

# The default run: the quick ones; `-m slow` runs the rest.
FAST = {
    "forward": {"fnet"},
    "train": {"patchtst"},
    "ckpt": {"modernbert"},
    "dropout": {"fnet"},
    "generate": set(),
}


def _cases(kind, names):
    return [pytest.param(n, marks=() if n in FAST[kind] else pytest.mark.slow) for n in names]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


def _model(name):
    torch.manual_seed(0)
    return ZOO3[name].build()


def _inputs(name):
    torch.manual_seed(1)
    inputs, extra = ZOO3[name].inputs()
    if ZOO3[name].generates:
        extra = {**extra, "use_cache": False}
    return inputs, extra


def _loss(out):
    return out.loss


@pytest.mark.parametrize("name", _cases("forward", ZOO3))
@torch.no_grad()
def test_forward_eval_with_loss(name):
    model = _model(name).eval()
    inputs, extra = _inputs(name)
    expected = model(**inputs, **extra)
    watch = _Watch()
    got = watch(torch.compile(model, backend="xla"), **inputs, **extra)
    assert_same(_tensors(got), _tensors(expected))
    watch.check()


def _train_step(name, checkpointing=False):
    model = _model(name).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    ref = copy.deepcopy(model)
    inputs, extra = _inputs(name)
    watch = _Watch()
    got = watch(torch.compile(model, backend="xla"), **inputs, **extra)
    expected = ref(**inputs, **extra)
    assert_same(_tensors(got), _tensors(expected))
    watch(got.loss.backward)
    expected.loss.backward()
    _assert_grads(model, ref, inputs, extra)
    assert_same(list(model.buffers()), list(ref.buffers()))  # BatchNorm's running statistics
    watch.check()


@pytest.mark.parametrize("name", _cases("train", ZOO3))
def test_train_step(name):
    _train_step(name)


@pytest.mark.parametrize("name", _cases("ckpt", ["modernbert", "esm", "llama4", "tapas"]))
def test_gradient_checkpointing_train_step(name):
    _train_step(name, checkpointing=True)


def _set_dropout(model, p):
    """Every dropout at ``p``: nn.Dropout modules and the float attributes functional dropout
    reads (``self.attention_dropout``)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = p
        for attr, value in list(vars(m).items()):
            if "drop" in attr.lower() and type(value) is float and "layerdrop" not in attr:
                setattr(m, attr, p)


@pytest.mark.parametrize(
    "name", _cases("dropout", ["fnet", "modernbert", "time_series_transformer"])
)
def test_train_step_with_dropout(name):
    model = _model(name).train()
    _set_dropout(model, 0.1)
    ref = copy.deepcopy(model)
    inputs, extra = _inputs(name)
    watch = _Watch()
    got = watch(torch.compile(model, backend="xla"), **inputs, **extra)
    expected = ref(**inputs, **extra)
    assert [(t.dtype, t.shape) for t in _tensors(got)] == [
        (t.dtype, t.shape) for t in _tensors(expected)
    ]
    assert math.isfinite(got.loss.item())
    watch(got.loss.backward)
    expected.loss.backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), n
        if p.grad is not None:
            assert torch.isfinite(p.grad).all(), n
    watch.check()


@pytest.mark.parametrize("name", _cases("generate", ["llama4"]))
@torch.no_grad()
def test_greedy_generate_programs_bounded(name):
    model = _model(name).eval()
    inputs, _ = _inputs(name)
    inputs = {k: v[:1] for k, v in inputs.items()}
    inputs["attention_mask"][:] = 1

    def generate(n):
        kw = {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False}
        return model.generate(**inputs, **kw, disable_compile=True)

    expected = [generate(6), generate(14)]
    model.forward = compiled = torch.compile(model.forward, backend="xla")
    watch = _Watch()
    assert torch.equal(watch(generate, 6), expected[0])
    first = torch2xla.cache_info(compiled).misses
    assert torch.equal(watch(generate, 14), expected[1])
    # 8 more tokens: the cache's length bucket grows once or twice, not a program per token
    assert torch2xla.cache_info(compiled).misses - first <= 2
    watch.check()
