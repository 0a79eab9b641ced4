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

import pytest
import torch
import torch.utils._pytree as pytree

import torch2xla
from tests._util import assert_same

transformers = pytest.importorskip("transformers")

VOCAB, SEQ, BATCH = 256, 12, 2


def _causal(cls_name, config_name, **kw):
    def build():
        config = getattr(transformers, config_name)(**kw)
        return getattr(transformers, cls_name)(config)

    return build


def _ids(vocab=VOCAB, seq=SEQ, batch=BATCH):
    return torch.randint(3, vocab, (batch, seq))


def _text(**extra):
    """Inputs of a text model: ids, a padded attention mask, and labels = the ids."""

    def make():
        ids = _ids()
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
        return {"input_ids": ids, "attention_mask": mask, **extra}, {"labels": ids}

    return make


def _decoder_llm(cls_name, config_name, **kw):
    base = {
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
    base.update(kw)
    return _causal(cls_name, config_name, **base)


_ENCODER = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


def _mlm():
    def make():
        ids = _ids()
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
        labels = ids.clone()
        labels[:, ::2] = -100
        return {"input_ids": ids, "attention_mask": mask}, {"labels": labels}

    return make


def _seq2seq():
    def make():
        ids = _ids()
        mask = torch.ones_like(ids)
        mask[1, -3:] = 0
        labels = _ids(seq=7)
        labels[1, -2:] = -100
        return {"input_ids": ids, "attention_mask": mask}, {"labels": labels}

    make.decoder = True
    return make


def _pixels(size=32, channels=3, num_labels=3):
    def make():
        pixels = torch.randn(BATCH, channels, size, size)
        return {"pixel_values": pixels}, {"labels": torch.tensor([0, num_labels - 1])}

    return make


def _whisper_inputs():
    def make():
        features = torch.randn(BATCH, 16, 32)  # num_mel_bins 16, 2 * max_source_positions
        labels = _ids(seq=6)
        return {"input_features": features}, {"labels": labels}

    make.decoder = True
    return make


def _audio():
    def make():
        wave = torch.randn(BATCH, 400)
        labels = torch.randint(1, 32, (BATCH, 5))
        labels[1, -2:] = -100
        return {"input_values": wave}, {"labels": labels}

    return make


def _clip_inputs():
    def make():
        ids = _ids(seq=8)
        return (
            {"input_ids": ids, "pixel_values": torch.randn(BATCH, 3, 32, 32)},
            {"return_loss": True},
        )

    return make


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
    "num_labels": 3,
    # set by the first call with labels otherwise: a second call would recompile, in Dynamo
    "problem_type": "single_label_classification",
}

# name -> (build, inputs, generates)
ZOO = {
    "llama": (_decoder_llm("LlamaForCausalLM", "LlamaConfig"), _text(), True),
    "mistral": (
        _decoder_llm("MistralForCausalLM", "MistralConfig", sliding_window=8),
        _text(),
        True,
    ),
    "qwen2": (_decoder_llm("Qwen2ForCausalLM", "Qwen2Config"), _text(), True),
    "gemma": (_decoder_llm("GemmaForCausalLM", "GemmaConfig", head_dim=8), _text(), True),
    "gemma2": (
        _decoder_llm(
            "Gemma2ForCausalLM",
            "Gemma2Config",
            head_dim=8,
            sliding_window=8,
            attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0,
        ),
        _text(),
        True,
    ),
    "phi": (
        _decoder_llm(
            "PhiForCausalLM",
            "PhiConfig",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attention_dropout=0.0,
            partial_rotary_factor=0.5,
        ),
        _text(),
        True,
    ),
    "phi3": (_decoder_llm("Phi3ForCausalLM", "Phi3Config", pad_token_id=0), _text(), True),
    "mixtral": (
        _decoder_llm(
            "MixtralForCausalLM",
            "MixtralConfig",
            num_local_experts=4,
            num_experts_per_tok=2,
            output_router_logits=True,
        ),
        _text(),
        True,
    ),
    "qwen3": (_decoder_llm("Qwen3ForCausalLM", "Qwen3Config", head_dim=8), _text(), True),
    "qwen2_moe": (
        _decoder_llm(
            "Qwen2MoeForCausalLM",
            "Qwen2MoeConfig",
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=32,
            output_router_logits=True,
        ),
        _text(),
        True,
    ),
    "qwen3_moe": (
        _decoder_llm(
            "Qwen3MoeForCausalLM",
            "Qwen3MoeConfig",
            head_dim=8,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            norm_topk_prob=True,
        ),
        _text(),
        True,
    ),
    "gemma3": (
        _decoder_llm("Gemma3ForCausalLM", "Gemma3TextConfig", head_dim=8, sliding_window=8),
        _text(),
        True,
    ),
    "olmo2": (_decoder_llm("Olmo2ForCausalLM", "Olmo2Config"), _text(), True),
    "starcoder2": (
        _decoder_llm(
            "Starcoder2ForCausalLM",
            "Starcoder2Config",
            sliding_window=8,
            residual_dropout=0.0,
            embedding_dropout=0.0,
        ),
        _text(),
        True,
    ),
    "gpt_bigcode": (
        _causal(
            "GPTBigCodeForCausalLM",
            "GPTBigCodeConfig",
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            multi_query=True,
            bos_token_id=1,
            eos_token_id=2,
        ),
        _text(),
        True,
    ),
    "gpt2": (
        _causal(
            "GPT2LMHeadModel",
            "GPT2Config",
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=1,
            eos_token_id=2,
        ),
        _text(),
        True,
    ),
    "gpt_neox": (
        _causal(
            "GPTNeoXForCausalLM",
            "GPTNeoXConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            rotary_pct=0.5,
            bos_token_id=1,
            eos_token_id=2,
        ),
        _text(),
        True,
    ),
    "gptj": (
        _causal(
            "GPTJForCausalLM",
            "GPTJConfig",
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            rotary_dim=4,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=1,
            eos_token_id=2,
        ),
        _text(),
        True,
    ),
    "opt": (
        _causal(
            "OPTForCausalLM",
            "OPTConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            word_embed_proj_dim=32,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        ),
        _text(),
        True,
    ),
    "falcon": (
        _causal(
            "FalconForCausalLM",
            "FalconConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            bos_token_id=1,
            eos_token_id=2,
        ),
        _text(),
        True,
    ),
    "bloom": (
        _causal(
            "BloomForCausalLM",
            "BloomConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            n_layer=2,
            n_head=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        ),
        _text(),
        True,
    ),
    "mamba": (
        _causal(
            "MambaForCausalLM",
            "MambaConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            state_size=8,
            num_hidden_layers=2,
            expand=2,
            conv_kernel=4,
            time_step_rank=4,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        ),
        _text(),
        True,
    ),
    "bert": (_causal("BertForMaskedLM", "BertConfig", **_ENCODER), _mlm(), False),
    "roberta": (
        _causal("RobertaForMaskedLM", "RobertaConfig", **{**_ENCODER, "pad_token_id": 1}),
        _mlm(),
        False,
    ),
    "xlm_roberta": (
        _causal("XLMRobertaForMaskedLM", "XLMRobertaConfig", **{**_ENCODER, "pad_token_id": 1}),
        _mlm(),
        False,
    ),
    "distilbert": (
        _causal(
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
        _mlm(),
        False,
    ),
    "albert": (
        _causal("AlbertForMaskedLM", "AlbertConfig", **{**_ENCODER, "embedding_size": 16}),
        _mlm(),
        False,
    ),
    "electra": (
        _causal("ElectraForMaskedLM", "ElectraConfig", **{**_ENCODER, "embedding_size": 16}),
        _mlm(),
        False,
    ),
    "deberta_v2": (
        _causal(
            "DebertaV2ForMaskedLM",
            "DebertaV2Config",
            **{
                **_ENCODER,
                "relative_attention": True,
                "position_buckets": 8,
                "max_relative_positions": 16,
                "pos_att_type": ["p2c", "c2p"],
            },
        ),
        _mlm(),
        False,
    ),
    "t5": (
        _causal(
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
        _seq2seq(),
        True,
    ),
    "bart": (
        _causal(
            "BartForConditionalGeneration",
            "BartConfig",
            vocab_size=VOCAB,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
            forced_eos_token_id=None,
        ),
        _seq2seq(),
        True,
    ),
    "whisper": (
        _causal(
            "WhisperForConditionalGeneration",
            "WhisperConfig",
            vocab_size=VOCAB,
            num_mel_bins=16,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_source_positions=16,
            max_target_positions=32,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
            suppress_tokens=None,
            begin_suppress_tokens=None,
        ),
        _whisper_inputs(),
        True,
    ),
    "vit": (_causal("ViTForImageClassification", "ViTConfig", **_VISION), _pixels(), False),
    "deit": (_causal("DeiTForImageClassification", "DeiTConfig", **_VISION), _pixels(), False),
    "swin": (
        _causal(
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
            num_labels=3,
            problem_type="single_label_classification",
        ),
        _pixels(),
        False,
    ),
    "convnext": (
        _causal(
            "ConvNextForImageClassification",
            "ConvNextConfig",
            num_channels=3,
            patch_size=4,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            num_stages=2,
            drop_path_rate=0.0,
            image_size=32,
            num_labels=3,
            problem_type="single_label_classification",
        ),
        _pixels(),
        False,
    ),
    "beit": (
        _causal(
            "BeitForImageClassification",
            "BeitConfig",
            **_VISION,
            use_relative_position_bias=True,
            use_mean_pooling=True,
            drop_path_rate=0.0,
        ),
        _pixels(),
        False,
    ),
    "resnet": (
        _causal(
            "ResNetForImageClassification",
            "ResNetConfig",
            num_channels=3,
            embedding_size=16,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            layer_type="bottleneck",
            num_labels=3,
            problem_type="single_label_classification",
        ),
        _pixels(),
        False,
    ),
    "wav2vec2": (
        _causal(
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
        _audio(),
        False,
    ),
    "clip": (
        lambda: transformers.CLIPModel(
            transformers.CLIPConfig(
                text_config={
                    "vocab_size": VOCAB,
                    "hidden_size": 32,
                    "intermediate_size": 64,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 4,
                    "max_position_embeddings": 16,
                    "projection_dim": 16,
                },
                vision_config={
                    "image_size": 32,
                    "patch_size": 8,
                    "hidden_size": 32,
                    "intermediate_size": 64,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 4,
                    "projection_dim": 16,
                },
                projection_dim=16,
            )
        ),
        _clip_inputs(),
        False,
    ),
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
    return ZOO[name][0]()


def _inputs(name):
    torch.manual_seed(1)
    return ZOO[name][1]()


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
    pgo = getattr(torch._dynamo, "pgo", None)
    with torch._dynamo.config.patch(automatic_dynamic_local_pgo=False):
        torch._dynamo.reset()
        if pgo is not None and hasattr(pgo, "reset_code_state"):
            pgo.reset_code_state()
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
    kw = {"use_cache": False} if ZOO[name][2] else {}
    if getattr(ZOO[name][1], "decoder", False):  # an encoder-decoder: its decoder's ids too
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


GENERATES = [name for name in ZOO if ZOO[name][2]]


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
    kw = {"max_new_tokens": 5, "min_new_tokens": 5, "do_sample": False}
    if cache == "static":
        kw["cache_implementation"] = "static"
    expected = model.generate(**inputs, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    watch = _Watch()
    got = watch(model.generate, **inputs, **kw)
    assert torch.equal(got, expected)
    watch.check()
