"""A zoo of transformers architectures compiled with backend="xla", against eager.

Every model is a TINY random one built from its config (2 layers, hidden 32, a vocabulary of
a few hundred, 8 to 12 tokens): nothing is downloaded. Dropout is off (torch2xla's random
numbers are not torch's). Per architecture:

- forward in eval: every tensor of the output (logits, hidden states) against eager's;
- a training step with the model's own loss (``labels=``): the loss, every parameter's
  gradient and its None-ness; then an SGD step and a second step on the same shapes, which
  must reuse the first step's programs (no recompile per step);
- generation, where the model generates: greedy tokens of ``generate`` with the forward
  compiled, with the dynamic cache and with the static cache.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import NamedTuple

import pytest
import torch
import torch.utils._pytree as pytree

import torch2xla
from tests._util import assert_generate_matches_eager, assert_same, fresh_dynamo

transformers = pytest.importorskip("transformers")

VOCAB, SEQ, BATCH = 256, 12, 2


class Arch(NamedTuple):
    """An architecture of the zoo: its model, its inputs, what is checked."""

    build: Callable[[], torch.nn.Module]  # the tiny random model
    inputs: Callable[[], tuple[dict, dict]]  # (the model's inputs, the loss's: labels=...)
    generates: bool = False  # checked by ``generate`` (its forward runs without the cache)
    encoder_decoder: bool = False  # its forward also takes the decoder's ids


def _built(cls_name: str, config_name: str, **kw) -> Callable[[], torch.nn.Module]:
    def build():
        config = getattr(transformers, config_name)(**kw)
        return getattr(transformers, cls_name)(config)

    return build


# -- configs: the tiny sizes, and the settings families of configs share ------------------------
_TOKENS = {"bos_token_id": 1, "eos_token_id": 2}
_SMALL = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
_LLM = {
    **_SMALL,
    "intermediate_size": 64,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    **_TOKENS,
    "pad_token_id": 0,
}
_GPT2 = {  # GPT-2's names
    "vocab_size": VOCAB,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
    **_TOKENS,
}
_ENCODER = {
    **_SMALL,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
_ENCODER_DECODER = {
    "vocab_size": VOCAB,
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
}
# num_labels and problem_type (set by the first call with labels otherwise: a second call would
# recompile, in Dynamo)
_CLASSIFIER = {"num_labels": 3, "problem_type": "single_label_classification"}
_VISION = {
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    **_CLASSIFIER,
}


def _llm(name: str, config_name: str | None = None, **kw) -> Callable[[], torch.nn.Module]:
    """A Llama-like decoder, ``{name}ForCausalLM`` of ``{name}Config``."""
    return _built(f"{name}ForCausalLM", config_name or f"{name}Config", **{**_LLM, **kw})


# -- inputs -------------------------------------------------------------------------------------
def _ids(vocab=VOCAB, seq=SEQ, batch=BATCH):
    return torch.randint(3, vocab, (batch, seq))


def _padded_ids() -> dict:
    """Ids and an attention mask that pads the second sequence's last 3 tokens."""
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _text():
    """A text model's inputs; its labels are the ids."""
    inputs = _padded_ids()
    return inputs, {"labels": inputs["input_ids"]}


def _mlm():
    inputs = _padded_ids()
    labels = inputs["input_ids"].clone()
    labels[:, ::2] = -100
    return inputs, {"labels": labels}


def _seq2seq():
    inputs = _padded_ids()
    labels = _ids(seq=7)
    labels[1, -2:] = -100
    return inputs, {"labels": labels}


def _pixels(size=32, channels=3, num_labels=3):
    pixels = torch.randn(BATCH, channels, size, size)
    return {"pixel_values": pixels}, {"labels": torch.tensor([0, num_labels - 1])}


def _whisper_inputs():
    features = torch.randn(BATCH, 16, 32)  # num_mel_bins 16, 2 * max_source_positions
    return {"input_features": features}, {"labels": _ids(seq=6)}


def _audio():
    wave = torch.randn(BATCH, 400)
    labels = torch.randint(1, 32, (BATCH, 5))
    labels[1, -2:] = -100
    return {"input_values": wave}, {"labels": labels}


def _clip_inputs():
    ids = _ids(seq=8)
    return {"input_ids": ids, "pixel_values": torch.randn(BATCH, 3, 32, 32)}, {"return_loss": True}


def _clip():
    text = {**_SMALL, "intermediate_size": 64, "max_position_embeddings": 16, "projection_dim": 16}
    vision = {
        "image_size": 32,
        "patch_size": 8,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "projection_dim": 16,
    }
    config = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    return transformers.CLIPModel(config)


ZOO = {
    "llama": Arch(_llm("Llama"), _text, generates=True),
    "mistral": Arch(_llm("Mistral", sliding_window=8), _text, generates=True),
    "qwen2": Arch(_llm("Qwen2"), _text, generates=True),
    "gemma": Arch(_llm("Gemma", head_dim=8), _text, generates=True),
    "gemma2": Arch(
        _llm(
            "Gemma2",
            head_dim=8,
            sliding_window=8,
            attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0,
        ),
        _text,
        generates=True,
    ),
    "phi": Arch(
        _llm(
            "Phi", resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, partial_rotary_factor=0.5
        ),
        _text,
        generates=True,
    ),
    "phi3": Arch(_llm("Phi3"), _text, generates=True),
    "mixtral": Arch(
        _llm("Mixtral", num_local_experts=4, num_experts_per_tok=2, output_router_logits=True),
        _text,
        generates=True,
    ),
    "qwen3": Arch(_llm("Qwen3", head_dim=8), _text, generates=True),
    "qwen2_moe": Arch(
        _llm(
            "Qwen2Moe",
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=32,
            output_router_logits=True,
        ),
        _text,
        generates=True,
    ),
    "qwen3_moe": Arch(
        _llm(
            "Qwen3Moe",
            head_dim=8,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            norm_topk_prob=True,
        ),
        _text,
        generates=True,
    ),
    "gemma3": Arch(
        _llm("Gemma3", "Gemma3TextConfig", head_dim=8, sliding_window=8), _text, generates=True
    ),
    "olmo2": Arch(_llm("Olmo2"), _text, generates=True),
    "starcoder2": Arch(
        _llm("Starcoder2", sliding_window=8, residual_dropout=0.0, embedding_dropout=0.0),
        _text,
        generates=True,
    ),
    "cohere2": Arch(_llm("Cohere2", sliding_window=8), _text, generates=True),
    "olmoe": Arch(
        _llm("Olmoe", num_experts=4, num_experts_per_tok=2, output_router_logits=True),
        _text,
        generates=True,
    ),
    "deepseek_v3": Arch(  # multi-head latent attention, grouped top-k routing
        _llm(
            "DeepseekV3",
            moe_intermediate_size=16,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            first_k_dense_replace=1,
            n_group=2,
            topk_group=1,
            kv_lora_rank=16,
            q_lora_rank=16,
            qk_rope_head_dim=4,
            qk_nope_head_dim=4,
            v_head_dim=8,
            head_dim=4,
            num_key_value_heads=4,
        ),
        _text,
        generates=True,
    ),
    "gpt_oss": Arch(  # attention sinks, clamped SwiGLU experts
        _llm(
            "GptOss",
            head_dim=8,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
            output_router_logits=True,
        ),
        _text,
        generates=True,
    ),
    "jamba": Arch(  # Mamba and attention layers, experts
        _llm(
            "Jamba",
            num_experts=4,
            num_experts_per_tok=2,
            expert_layer_period=2,
            expert_layer_offset=1,
            attn_layer_period=2,
            attn_layer_offset=1,
            mamba_d_state=8,
            mamba_d_conv=4,
            mamba_expand=2,
            mamba_dt_rank=4,
            output_router_logits=True,
        ),
        _text,
        generates=True,
    ),
    "qwen3_next": Arch(  # gated delta-rule linear attention
        _llm(
            "Qwen3Next",
            head_dim=8,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=16,
            linear_num_value_heads=4,
            linear_num_key_heads=2,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            linear_conv_kernel_dim=4,
            layer_types=["linear_attention", "full_attention"],
        ),
        _text,
        generates=True,
    ),
    "lfm2": Arch(  # short convolutions with a conv cache
        _llm("Lfm2", layer_types=["conv", "full_attention"], conv_L_cache=3), _text, generates=True
    ),
    "gpt_bigcode": Arch(
        _built("GPTBigCodeForCausalLM", "GPTBigCodeConfig", **_GPT2, multi_query=True),
        _text,
        generates=True,
    ),
    "gpt2": Arch(_built("GPT2LMHeadModel", "GPT2Config", **_GPT2), _text, generates=True),
    "gpt_neox": Arch(
        _built(
            "GPTNeoXForCausalLM",
            "GPTNeoXConfig",
            **_SMALL,
            intermediate_size=64,
            max_position_embeddings=64,
            rotary_pct=0.5,
            **_TOKENS,
        ),
        _text,
        generates=True,
    ),
    "gptj": Arch(
        _built("GPTJForCausalLM", "GPTJConfig", **_GPT2, rotary_dim=4), _text, generates=True
    ),
    "opt": Arch(
        _built(
            "OPTForCausalLM",
            "OPTConfig",
            **_SMALL,
            ffn_dim=64,
            word_embed_proj_dim=32,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "falcon": Arch(
        _built(
            "FalconForCausalLM",
            "FalconConfig",
            **_SMALL,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            **_TOKENS,
        ),
        _text,
        generates=True,
    ),
    "bloom": Arch(
        _built(
            "BloomForCausalLM",
            "BloomConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            n_layer=2,
            n_head=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "mamba2": Arch(
        _built(
            "Mamba2ForCausalLM",
            "Mamba2Config",
            vocab_size=VOCAB,
            hidden_size=32,
            state_size=8,
            num_hidden_layers=2,
            expand=2,
            conv_kernel=4,
            num_heads=8,
            head_dim=8,
            n_groups=1,
            chunk_size=4,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "mamba": Arch(
        _built(
            "MambaForCausalLM",
            "MambaConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            state_size=8,
            num_hidden_layers=2,
            expand=2,
            conv_kernel=4,
            time_step_rank=4,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "bert": Arch(_built("BertForMaskedLM", "BertConfig", **_ENCODER), _mlm),
    "roberta": Arch(
        _built("RobertaForMaskedLM", "RobertaConfig", **{**_ENCODER, "pad_token_id": 1}), _mlm
    ),
    "xlm_roberta": Arch(
        _built("XLMRobertaForMaskedLM", "XLMRobertaConfig", **{**_ENCODER, "pad_token_id": 1}),
        _mlm,
    ),
    "distilbert": Arch(
        _built(
            "DistilBertForMaskedLM",
            "DistilBertConfig",
            vocab_size=VOCAB,
            dim=32,
            n_layers=2,
            n_heads=4,
            hidden_dim=64,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
        ),
        _mlm,
    ),
    "albert": Arch(
        _built("AlbertForMaskedLM", "AlbertConfig", **_ENCODER, embedding_size=16), _mlm
    ),
    "electra": Arch(
        _built("ElectraForMaskedLM", "ElectraConfig", **_ENCODER, embedding_size=16), _mlm
    ),
    "deberta_v2": Arch(
        _built(
            "DebertaV2ForMaskedLM",
            "DebertaV2Config",
            **_ENCODER,
            relative_attention=True,
            position_buckets=8,
            max_relative_positions=16,
            pos_att_type=["p2c", "c2p"],
        ),
        _mlm,
    ),
    "t5": Arch(
        _built(
            "T5ForConditionalGeneration",
            "T5Config",
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
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "mbart": Arch(
        _built(
            "MBartForConditionalGeneration",
            "MBartConfig",
            **_ENCODER_DECODER,
            max_position_embeddings=64,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
            forced_eos_token_id=None,
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "bart": Arch(
        _built(
            "BartForConditionalGeneration",
            "BartConfig",
            **_ENCODER_DECODER,
            max_position_embeddings=64,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
            forced_eos_token_id=None,
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "whisper": Arch(
        _built(
            "WhisperForConditionalGeneration",
            "WhisperConfig",
            **_ENCODER_DECODER,
            num_mel_bins=16,
            max_source_positions=16,
            max_target_positions=32,
            pad_token_id=0,
            **_TOKENS,
            decoder_start_token_id=1,
            suppress_tokens=None,
            begin_suppress_tokens=None,
        ),
        _whisper_inputs,
        generates=True,
        encoder_decoder=True,
    ),
    "vit": Arch(_built("ViTForImageClassification", "ViTConfig", **_VISION), _pixels),
    "deit": Arch(_built("DeiTForImageClassification", "DeiTConfig", **_VISION), _pixels),
    "swin": Arch(
        _built(
            "SwinForImageClassification",
            "SwinConfig",
            image_size=32,
            patch_size=4,
            embed_dim=16,
            depths=[1, 1],
            num_heads=[2, 4],
            window_size=4,
            mlp_ratio=2.0,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            drop_path_rate=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "convnext": Arch(
        _built(
            "ConvNextForImageClassification",
            "ConvNextConfig",
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
    "beit": Arch(
        _built(
            "BeitForImageClassification",
            "BeitConfig",
            **_VISION,
            use_relative_position_bias=True,
            use_mean_pooling=True,
            drop_path_rate=0.0,
        ),
        _pixels,
    ),
    "resnet": Arch(
        _built(
            "ResNetForImageClassification",
            "ResNetConfig",
            num_channels=3,
            embedding_size=16,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            layer_type="bottleneck",
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "wav2vec2": Arch(
        _built(
            "Wav2Vec2ForCTC",
            "Wav2Vec2Config",
            vocab_size=32,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            conv_dim=(16, 16),
            conv_stride=(4, 2),
            conv_kernel=(8, 4),
            num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            feat_proj_dropout=0.0,
            final_dropout=0.0,
            layerdrop=0.0,
            mask_time_prob=0.0,
            pad_token_id=0,
            ctc_loss_reduction="mean",
        ),
        _audio,
    ),
    "clip": Arch(_clip, _clip_inputs),
}


# The default run: one of each kind of check (about a minute on 2 cores); `-m slow` runs the rest.
FAST = {
    "forward": {"llama", "t5", "vit"},
    "train": {"mixtral", "bert"},
    "generate": {("mixtral", "static")},
}


def _cases(kind, cases):
    marks = lambda case: () if case in FAST[kind] else pytest.mark.slow
    return [pytest.param(*(c if isinstance(c, tuple) else (c,)), marks=marks(c)) for c in cases]


def _model(name):
    torch.manual_seed(0)
    return ZOO[name].build()


def _inputs(name):
    torch.manual_seed(1)
    return ZOO[name].inputs()


def _tensors(out):
    """The tensors of a model output, in order (a cache object counts as its tensors)."""
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    leaves = []
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            leaves.append(leaf)
        elif hasattr(leaf, "to_tuple"):
            leaves.extend(_tensors(leaf))
    return leaves


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


class _Watch:
    """Runs compiled calls, keeping torch2xla's warnings (an op that fell back to eager)."""

    def __init__(self):
        self.fallbacks: list[str] = []

    def __call__(self, fn, *args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(*args, **kwargs)
        for w in caught:
            if issubclass(w.category, torch2xla.FallbackWarning):
                self.fallbacks.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return out

    def check(self):
        # (Dynamo's graph breaks are not checked: they are the same with any backend, e.g.
        # transformers' output capturing takes a lock on a model's first call.)
        assert not self.fallbacks, self.fallbacks[0]


@pytest.mark.parametrize("name", _cases("forward", ZOO))
@torch.no_grad()
def test_forward_eval(name):
    model = _model(name).eval()
    inputs, _ = _inputs(name)
    kw = {"use_cache": False} if ZOO[name].generates else {}
    if ZOO[name].encoder_decoder:  # its decoder's ids too
        kw["decoder_input_ids"] = _ids(seq=5)
    expected = model(**inputs, **kw)
    watch = _Watch()
    got = watch(torch.compile(model, backend="xla"), **inputs, **kw)
    got, expected = _tensors(got), _tensors(expected)
    assert len(got) == len(expected)
    assert_same(got, expected)
    watch.check()


def _float64_grads(model, inputs, extra):
    """Every parameter's gradient (or None) of ``model``'s loss computed in float64."""
    model = copy.deepcopy(model).double()
    model.zero_grad()
    inputs = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    model(**inputs, **extra).loss.backward()
    return [p.grad for p in model.parameters()]


# Eager's own largest error (relative to each gradient's largest entry) against float64, where
# fp32 gradients are that far off whichever side computes them: wav2vec2's CTC loss (~40, its
# gradient a difference of exponentials of log-space sums of that size): eager 1.2e-5 at the
# first step and compiled 1e-6; compiled 8e-6 and eager 3e-6 at the second.
FP32_GRAD_ERROR = {"wav2vec2": 1.2e-5}


def _assert_grads(model, ref, inputs, extra, known_error=0.0):
    """``model``'s gradients against eager's (``ref``'s): their None-ness, and their values
    within fp32's default tolerance, or, where they are not, at least as close to the float64
    gradient as eager's (largest error, to that tolerance): an ill-conditioned gradient (DeiT's class token,
    zeros under a LayerNorm: gradients of 7e3) is as far from eager as eager is from exact."""
    exact = None
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is None or torch.allclose(p.grad, q.grad, rtol=1.3e-6, atol=1e-5):
            continue
        if exact is None:
            exact = dict(
                zip([n for n, _ in ref.named_parameters()], _float64_grads(ref, inputs, extra))
            )
        err_got = (p.grad.double() - exact[name]).abs().max().item()
        err_eager = (q.grad.double() - exact[name]).abs().max().item()
        scale = exact[name].abs().max().item()
        bound = max(err_eager, known_error * scale) + 1e-5 + 1.3e-6 * scale
        assert err_got <= bound, (name, err_got, err_eager)


@pytest.mark.parametrize("name", _cases("train", ZOO))
def test_train_step(name):
    model = _model(name).train()
    ref = copy.deepcopy(model)
    inputs, extra = _inputs(name)
    compiled = torch.compile(model, backend="xla")
    watch = _Watch()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2):
        got = watch(compiled, **inputs, **extra)
        expected = ref(**inputs, **extra)
        assert_same(_tensors(got), _tensors(expected))
        watch(got.loss.backward)
        expected.loss.backward()
        _assert_grads(model, ref, inputs, extra, FP32_GRAD_ERROR.get(name, 0.0))
        if step == 0:
            programs = torch2xla.cache_info(compiled).misses
        # The second step starts from the same weights on both sides: it shows that the
        # updated weights are used, without the first step's rounding fed through the update.
        opt.step()
        opt.zero_grad()
        ref.load_state_dict(model.state_dict())
        ref.zero_grad()
    assert torch2xla.cache_info(compiled).misses == programs  # no recompile per step
    watch.check()


GENERATES = [name for name in ZOO if ZOO[name].generates]


@pytest.mark.parametrize(
    ("name", "cache"),
    _cases("generate", [(n, c) for n in GENERATES for c in ("dynamic", "static")]),
)
@torch.no_grad()
def test_generate(name, cache):
    model = _model(name).eval()
    # (transformers' Qwen2-MoE fails in eager when generating with the static cache while it
    # returns the router's logits: its load-balancing loss gets the cache's mask dict)
    model.config.output_router_logits = False
    inputs, _ = _inputs(name)
    inputs = {k: v[:1] for k, v in inputs.items()}
    kw = {"cache_implementation": "static"} if cache == "static" else {}
    watch = _Watch()
    assert_generate_matches_eager(model, inputs, 5, run=watch, **kw)
    watch.check()


# (its sliding-window mask reads sizes in eager PyTorch inside the graph: a cut graph,
# which bucketing once padded, and the eager ops met the padded sizes)
_T5GEMMA = Arch(
    _built(
        "T5GemmaForConditionalGeneration",
        "T5GemmaConfig",
        encoder={**_LLM, "head_dim": 8, "sliding_window": 8},
        decoder={**_LLM, "head_dim": 8, "sliding_window": 8},
        vocab_size=VOCAB,
        dropout_rate=0.0,
        attention_dropout=0.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    ),
    _seq2seq,
    generates=True,
    encoder_decoder=True,
)


@pytest.mark.slow
@torch.no_grad()
def test_t5gemma_generates_with_the_dynamic_cache():
    # T5Gemma's sliding-window mask runs size arithmetic in eager PyTorch inside the graph (a
    # cut graph); bucketing padded it, and the eager ops met the padded sizes ("The expanded
    # size of the tensor (3) must match the existing size (4)"). Such graphs compile per size.
    # (Not in ZOO: its forward runs one op in eager, and its static cache fails in Dynamo.)
    torch.manual_seed(0)
    model = _T5GEMMA.build().eval()
    inputs, _ = _T5GEMMA.inputs()
    assert_generate_matches_eager(model, {k: v[:1] for k, v in inputs.items()}, 5)
