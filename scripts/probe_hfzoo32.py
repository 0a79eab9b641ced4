"""Probe transformers architectures and usages the earlier HF probes and tests do not cover,
compiled with backend="xla", against eager.

Earlier coverage (tests/test_hf_zoo.py, scripts/_hf_archs*.py, probe_hf*.py, probe_hfgen24.py,
tests/test_hf*_s*.py, tests/test_generate*.py): ~150 architectures' forward, training step and
greedy/beam/sampled generate, hidden states/attentions, checkpointing, left padding, penalties.
This probe adds: architectures none of them build (FNet's FFT mixing, Autoformer's FFT
autocorrelation, Informer's ProbSparse attention, YOLOS's Hungarian-matched detection loss,
ConvNeXt V2, BEiT, DPT, ESM, LayoutLM, LUKE, Wav2Vec2-Conformer, CLAP, Qwen2-VL's 3D rotary,
Switch Transformers, I-BERT, Helium, GLM-4, ...), and usages none of them run (a model in
bfloat16, autocast, ``interpolate_pos_encoding``, packed sequences through ``position_ids``,
``num_items_in_batch``, Trainer's label smoother, a 4D boolean mask, FlexAttention, assisted
and prompt-lookup decoding, min-p/typical/epsilon/eta sampling, watermarking, sequence bias).

Session 32's run found no wrong answer of ours. What differed was not: I-BERT's quant mode gives
NaN on the CPU (its softmax's scaling factor is a float32 subnormal, 1.6e-39, which XLA's CPU
flushes: the "subnormal" limitation, torch2xla/testing/README.md); Doge at its init (A = 0)
ties every score of its dynamic mask's ``topk``, and which tied indices torch's CPU kernel picks
is its own (``_doge`` draws A); a ``drop_path_rate`` left on draws other random numbers.

    PYTHONPATH=. python scripts/probe_hfzoo32.py [substring ...]
"""

from __future__ import annotations

import copy
import sys
import time
import traceback
import warnings

import torch
import torch.utils._pytree as pytree
import transformers

import torch2xla

VOCAB = 128
RTOL, ATOL = 1.3e-6, 1e-5
_TOKENS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
_SMALL = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
_LLM = {
    **_SMALL,
    "intermediate_size": 64,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    **_TOKENS,
}
_ENC = {
    **_SMALL,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


class Mismatch(AssertionError):
    pass


def tensors(out):
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    leaves = []
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            leaves.append(leaf)
        elif hasattr(leaf, "to_tuple"):
            leaves.extend(tensors(leaf))
    return leaves


def close(label, got, exp, exact=None, rtol=RTOL, atol=ATOL):
    """Values within fp32's tolerance, or no farther from ``exact`` (float64) than eager."""
    got, exp = tensors(got), tensors(exp)
    if len(got) != len(exp):
        raise Mismatch(f"{label}: {len(got)} tensors vs {len(exp)}")
    ex = None
    for i, (g, e) in enumerate(zip(got, exp)):
        if g.dtype != e.dtype or g.shape != e.shape:
            raise Mismatch(f"{label}[{i}]: {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}")
        if not (g.is_floating_point() or g.is_complex()):
            if not torch.equal(g, e):
                raise Mismatch(
                    f"{label}[{i}]: integers differ {g.flatten()[:8]} vs {e.flatten()[:8]}"
                )
            continue
        if torch.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            continue
        if exact is None:
            d = (g - e).abs().max().item()
            raise Mismatch(f"{label}[{i}]: max diff {d:.3g} {tuple(g.shape)} {g.dtype}")
        if ex is None:
            ex = tensors(exact())
        x = ex[i].double()
        eg, ee = (g.double() - x).abs().max().item(), (e.double() - x).abs().max().item()
        bound = ee + atol + rtol * x.abs().max().item()
        if not eg <= bound:
            raise Mismatch(f"{label}[{i}]: err {eg:.3g} vs eager's {ee:.3g} (f64) {tuple(g.shape)}")


PHASE = ["eager"]


def watched(fn, *args, **kwargs):
    PHASE[0] = "xla"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    fb = [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    if fb:
        raise Mismatch("FALLBACK " + fb[0][:300])
    return out


def f64(inputs):
    return pytree.tree_map(
        lambda v: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v,
        inputs,
    )


def built(cls, cfg, **kw):
    def build():
        return getattr(transformers, cls)(getattr(transformers, cfg)(**kw))

    return build


# -- generic checks -------------------------------------------------------------------------
def check_forward(build, inputs, kw=None):
    kw = kw or {}
    torch.manual_seed(0)
    model = build().eval()
    torch.manual_seed(1)
    inp = inputs()
    with torch.no_grad():
        exp = model(**copy.deepcopy(inp), **kw)
        got = watched(torch.compile(model, backend="xla"), **copy.deepcopy(inp), **kw)
        PHASE[0] = "eager"

        def exact():
            m = copy.deepcopy(model).double()
            return m(**f64(inp), **kw)

        close("forward", got, exp, exact)


def _loss(out):
    if getattr(out, "loss", None) is not None:
        return out.loss
    return sum(t.sum() for t in tensors(out) if t.is_floating_point())


def check_train(build, inputs, kw=None, checkpointing=False):
    kw = kw or {}
    torch.manual_seed(0)
    model = build().train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    ref = copy.deepcopy(model)
    torch.manual_seed(1)
    inp = inputs()
    exp = ref(**copy.deepcopy(inp), **kw)
    got = watched(torch.compile(model, backend="xla"), **copy.deepcopy(inp), **kw)
    PHASE[0] = "eager"

    def exact_out():
        m = copy.deepcopy(ref).double()
        return m(**f64(inp), **kw)

    close("train-out", got, exp, exact_out)
    _loss(exp).backward()
    watched(_loss(got).backward)
    PHASE[0] = "eager"
    grads64 = None
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        if (p.grad is None) != (q.grad is None):
            raise Mismatch(f"grad None-ness of {n}: {p.grad is None} (xla) vs {q.grad is None}")
        if q.grad is None or torch.allclose(p.grad, q.grad, rtol=RTOL, atol=ATOL):
            continue
        if grads64 is None:
            m = copy.deepcopy(ref).double()
            m.zero_grad()
            _loss(m(**f64(inp), **kw)).backward()
            grads64 = {k: v.grad for k, v in m.named_parameters()}
        x = grads64[n]
        eg = (p.grad.double() - x).abs().max().item()
        ee = (q.grad.double() - x).abs().max().item()
        if not eg <= ee + ATOL + RTOL * x.abs().max().item():
            raise Mismatch(f"grad {n}: err {eg:.3g} vs eager's {ee:.3g} (f64)")


def check_generate(build, inputs, new=5, **gen_kw):
    torch.manual_seed(0)
    model = build().eval()
    torch.manual_seed(1)
    inp = inputs()
    kw = {"max_new_tokens": new, "min_new_tokens": new, "do_sample": False, "disable_compile": True}
    kw.update(gen_kw)
    seed = kw.pop("seed", None)
    if seed is not None:
        torch.manual_seed(seed)
    exp = model.generate(**inp, **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    if seed is not None:
        torch.manual_seed(seed)
    got = watched(model.generate, **inp, **kw)
    exp_t, got_t = tensors(exp), tensors(got)
    if not torch.equal(got_t[0], exp_t[0]):
        raise Mismatch(f"tokens {got_t[0].tolist()} vs {exp_t[0].tolist()}")
    close("generate-rest", got_t[1:], exp_t[1:])


# -- inputs ---------------------------------------------------------------------------------
def ids(batch=2, seq=10, vocab=VOCAB):
    return torch.randint(3, vocab, (batch, seq))


def padded(batch=2, seq=10, left=False):
    i = ids(batch, seq)
    m = torch.ones_like(i)
    if left:
        m[1, :3] = 0
        i[1, :3] = 0
    else:
        m[1, -3:] = 0
    return {"input_ids": i, "attention_mask": m}


def text_lm():
    p = padded()
    return {**p, "labels": p["input_ids"]}


def mlm():
    p = padded()
    labels = p["input_ids"].clone()
    labels[:, ::2] = -100
    return {**p, "labels": labels}


def gen_in():
    return {"input_ids": ids(1, 6)}


def pixels(size=32, labels=True, n=3):
    d = {"pixel_values": torch.randn(2, 3, size, size)}
    if labels:
        d["labels"] = torch.tensor([0, n - 1])
    return d


# -- architectures --------------------------------------------------------------------------
def _vision(**kw):
    return {
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
        "drop_path_rate": 0.0,
        **kw,
    }


def _ts_inputs(ctx, pred, lags, feat=0):
    def make():
        past = ctx + max(lags)
        d = {
            "past_values": torch.randn(2, past),
            "past_time_features": torch.randn(2, past, 1),
            "past_observed_mask": torch.ones(2, past),
            "future_values": torch.randn(2, pred),
            "future_time_features": torch.randn(2, pred, 1),
        }
        return d

    return make


_TS = {
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
}


def _yolos_inputs():
    labels = [
        {
            "class_labels": torch.tensor([0, 1]),
            "boxes": torch.tensor([[0.5, 0.5, 0.2, 0.3], [0.3, 0.6, 0.1, 0.2]]),
        },
        {"class_labels": torch.tensor([2]), "boxes": torch.tensor([[0.4, 0.4, 0.3, 0.3]])},
    ]
    return {"pixel_values": torch.randn(2, 3, 32, 32), "labels": labels}


def _layoutlm_inputs():
    p = mlm()
    x0 = torch.randint(0, 500, p["input_ids"].shape + (1,))
    y0 = torch.randint(0, 500, p["input_ids"].shape + (1,))
    bbox = torch.cat([x0, y0, x0 + 100, y0 + 50], -1)
    return {**p, "bbox": bbox}


def _qwen2vl():
    cfg = transformers.Qwen2VLConfig(
        text_config={
            **_LLM,
            "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]},
            "rope_parameters": {
                "rope_type": "default",
                "mrope_section": [1, 1, 2],
                "rope_theta": 10000.0,
            },
        },
        vision_config={
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 32,
            "num_heads": 4,
            "mlp_ratio": 2,
            "patch_size": 4,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "in_channels": 3,
        },
        image_token_id=VOCAB - 1,
        video_token_id=VOCAB - 2,
        vision_start_token_id=VOCAB - 3,
        vision_end_token_id=VOCAB - 4,
        **_TOKENS,
    )
    return transformers.Qwen2VLForConditionalGeneration(cfg)


def _qwen2vl_inputs(labels=True):
    def make():
        # one image of 8x8 pixels: a 2x2 grid of 4x4 patches, merged 2x2 -> 1 token
        grid = torch.tensor([[1, 4, 4]])  # t, h, w in patches (merge 2 -> 4 tokens)
        n_patches = 16
        pv = torch.randn(n_patches, 3 * 2 * 4 * 4)
        text = ids(1, 10, VOCAB - 8)
        text[0, 2] = VOCAB - 3
        tok = torch.full((1, 4), VOCAB - 1)
        i = torch.cat([text[:, :3], tok, text[:, 3:]], 1)
        d = {
            "input_ids": i,
            "attention_mask": torch.ones_like(i),
            "pixel_values": pv,
            "image_grid_thw": grid,
            "mm_token_type_ids": (i == VOCAB - 1).int(),
        }
        if labels:
            d["labels"] = i
        return d

    return make


def _clap():
    text = {**_ENC, "projection_dim": 16, "vocab_size": VOCAB, "max_position_embeddings": 32}
    audio = {
        "window_size": 2,
        "num_mel_bins": 16,
        "spec_size": 32,
        "patch_size": 4,
        "patch_stride": (4, 4),
        "patch_embeds_hidden_size": 16,
        "hidden_size": 32,
        "depths": [1, 1],
        "num_attention_heads": [2, 4],
        "projection_dim": 16,
        "enable_fusion": False,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "drop_path_rate": 0.0,
    }
    return transformers.ClapModel(
        transformers.ClapConfig(text_config=text, audio_config=audio, projection_dim=16)
    )


def _clap_inputs():
    return {
        "input_ids": ids(2, 8),
        "input_features": torch.randn(2, 1, 32, 16),
        "return_loss": True,
    }


def _switch():
    return transformers.SwitchTransformersForConditionalGeneration(
        transformers.SwitchTransformersConfig(
            vocab_size=VOCAB,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            num_experts=4,
            expert_capacity=8,
            encoder_sparse_step=1,
            decoder_sparse_step=1,
            dropout_rate=0.0,
            router_jitter_noise=0.0,
            decoder_start_token_id=0,
            **_TOKENS,
        )
    )


def _doge():
    # (A random: with A = 0, its init, every score ties and topk's pick among ties is
    # torch's CPU kernel's own)
    model = built("DogeForCausalLM", "DogeConfig", **_LLM, keep_window_size=4, is_moe=False)()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.A.normal_()
    return model


def _s2s():
    p = padded()
    labels = ids(2, 6)
    labels[1, -2:] = -100
    return {**p, "labels": labels}


ARCHS = {
    # name: (build, inputs, forward kw, generates)
    "fnet": (
        built("FNetForMaskedLM", "FNetConfig", **{**_ENC, "use_tpu_fourier_optimizations": False}),
        mlm,
    ),
    "fnet_seqcls": (
        built("FNetForSequenceClassification", "FNetConfig", **_ENC, num_labels=3),
        lambda: {"input_ids": ids(), "labels": torch.tensor([0, 2])},
    ),
    "autoformer": (
        built(
            "AutoformerForPrediction",
            "AutoformerConfig",
            **_TS,
            moving_average=3,
            autocorrelation_factor=1,
            label_length=4,
        ),
        _ts_inputs(8, 4, [1, 2]),
    ),
    "informer": (
        built(
            "InformerForPrediction",
            "InformerConfig",
            **_TS,
            attention_type="prob",
            sampling_factor=2,
        ),
        _ts_inputs(8, 4, [1, 2]),
    ),
    "yolos": (
        built(
            "YolosForObjectDetection",
            "YolosConfig",
            **_vision(num_detection_tokens=4, image_size=[32, 32]),
        ),
        _yolos_inputs,
    ),
    "convnextv2": (
        built(
            "ConvNextV2ForImageClassification",
            "ConvNextV2Config",
            num_channels=3,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            num_stages=2,
            num_labels=3,
            image_size=32,
        ),
        pixels,
    ),
    "convnext": (
        built(
            "ConvNextForImageClassification",
            "ConvNextConfig",
            num_channels=3,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            num_stages=2,
            num_labels=3,
            image_size=32,
        ),
        pixels,
    ),
    "beit": (
        built(
            "BeitForImageClassification",
            "BeitConfig",
            **_vision(use_relative_position_bias=True, use_mean_pooling=True),
        ),
        pixels,
    ),
    "beit_shared": (
        built(
            "BeitForImageClassification",
            "BeitConfig",
            **_vision(use_shared_relative_position_bias=True, layer_scale_init_value=0.1),
        ),
        pixels,
    ),
    "data2vec_vision": (
        built(
            "Data2VecVisionForImageClassification",
            "Data2VecVisionConfig",
            **_vision(use_relative_position_bias=True),
        ),
        pixels,
    ),
    "dpt": (
        built(
            "DPTForDepthEstimation",
            "DPTConfig",
            **_vision(
                num_hidden_layers=4,
                backbone_out_indices=[0, 1, 2, 3],
                neck_hidden_sizes=[8, 8, 16, 16],
                fusion_hidden_size=16,
                head_hidden_size=8,
                reassemble_factors=[4, 2, 1, 0.5],
            ),
        ),
        lambda: pixels(labels=False),
    ),
    "esm": (
        built(
            "EsmForMaskedLM",
            "EsmConfig",
            **{
                **_ENC,
                "pad_token_id": 1,
                "mask_token_id": 4,
                "position_embedding_type": "rotary",
                "token_dropout": True,
            },
        ),
        mlm,
    ),
    "esm_tokcls": (
        built(
            "EsmForTokenClassification",
            "EsmConfig",
            **{**_ENC, "pad_token_id": 1, "mask_token_id": 4, "num_labels": 3},
        ),
        lambda: {**padded(), "labels": torch.randint(0, 3, (2, 10))},
    ),
    "layoutlm": (built("LayoutLMForMaskedLM", "LayoutLMConfig", **_ENC), _layoutlm_inputs),
    "luke": (
        built("LukeForMaskedLM", "LukeConfig", **_ENC, entity_vocab_size=16, entity_emb_size=16),
        mlm,
    ),
    "w2v2_conformer_rel": (
        built(
            "Wav2Vec2ConformerForCTC",
            "Wav2Vec2ConformerConfig",
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
            conv_depthwise_kernel_size=3,
            position_embeddings_type="relative",
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
        lambda: {"input_values": torch.randn(2, 400), "labels": torch.randint(1, 32, (2, 5))},
    ),
    "w2v2_conformer_rot": (
        built(
            "Wav2Vec2ConformerForCTC",
            "Wav2Vec2ConformerConfig",
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
            conv_depthwise_kernel_size=3,
            position_embeddings_type="rotary",
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
        lambda: {"input_values": torch.randn(2, 400), "labels": torch.randint(1, 32, (2, 5))},
    ),
    "clap": (_clap, _clap_inputs),
    "qwen2vl": (_qwen2vl, _qwen2vl_inputs()),
    "switch": (_switch, _s2s),
    "ibert": (
        built(
            "IBertForMaskedLM", "IBertConfig", **{**_ENC, "pad_token_id": 1, "quant_mode": False}
        ),
        mlm,
    ),
    "ibert_quant": (
        built("IBertForMaskedLM", "IBertConfig", **{**_ENC, "pad_token_id": 1, "quant_mode": True}),
        mlm,
    ),
    "helium": (built("HeliumForCausalLM", "HeliumConfig", **_LLM, head_dim=8), text_lm),
    "glm4": (built("Glm4ForCausalLM", "Glm4Config", **_LLM, head_dim=8), text_lm),
    "smollm3": (
        built("SmolLM3ForCausalLM", "SmolLM3Config", **_LLM, no_rope_layer_interval=2),
        text_lm,
    ),
    "exaone4": (
        built(
            "Exaone4ForCausalLM",
            "Exaone4Config",
            **_LLM,
            sliding_window=4,
            sliding_window_pattern=2,
        ),
        text_lm,
    ),
    "arcee": (built("ArceeForCausalLM", "ArceeConfig", **_LLM), text_lm),
    "bitnet": (built("BitNetForCausalLM", "BitNetConfig", **_LLM), text_lm),
    "falcon_h1": (
        built(
            "FalconH1ForCausalLM",
            "FalconH1Config",
            **_LLM,
            mamba_d_ssm=32,
            mamba_n_heads=4,
            mamba_d_head=8,
            mamba_d_state=8,
            mamba_n_groups=1,
            mamba_chunk_size=4,
            head_dim=8,
        ),
        text_lm,
    ),
    "doge": (_doge, text_lm),
    "hunyuan_dense": (
        built("HunYuanDenseV1ForCausalLM", "HunYuanDenseV1Config", **_LLM, head_dim=8),
        text_lm,
    ),
    "minimax": (
        built(
            "MiniMaxForCausalLM",
            "MiniMaxConfig",
            **_LLM,
            head_dim=8,
            num_local_experts=4,
            num_experts_per_tok=2,
            layer_types=["linear_attention", "full_attention"],
            block_size=4,
        ),
        text_lm,
    ),
    "mra": (
        built(
            "MraForMaskedLM",
            "MraConfig",
            **{**_ENC, "max_position_embeddings": 66, "block_per_row": 2, "approx_mode": "full"},
        ),
        mlm,
    ),
    "xmod": (
        built(
            "XmodForMaskedLM",
            "XmodConfig",
            **{
                **_ENC,
                "pad_token_id": 1,
                "languages": ["en_XX", "de_DE"],
                "default_language": "en_XX",
            },
        ),
        mlm,
    ),
    "rembert": (
        built(
            "RemBertForMaskedLM",
            "RemBertConfig",
            **_ENC,
            input_embedding_size=16,
            output_embedding_size=16,
        ),
        mlm,
    ),
    "ernie": (
        built("ErnieForMaskedLM", "ErnieConfig", **_ENC, use_task_id=True, task_type_vocab_size=3),
        mlm,
    ),
    "splinter": (
        built("SplinterForQuestionAnswering", "SplinterConfig", **_ENC, question_token_id=5),
        lambda: {
            **padded(),
            "start_positions": torch.tensor([2, 4]),
            "end_positions": torch.tensor([3, 6]),
        },
    ),
    "markuplm": (
        built("MarkupLMForQuestionAnswering", "MarkupLMConfig", **{**_ENC, "pad_token_id": 1}),
        lambda: {
            **padded(),
            "start_positions": torch.tensor([2, 4]),
            "end_positions": torch.tensor([3, 6]),
        },
    ),
    "deit_distill": (
        built("DeiTForImageClassificationWithTeacher", "DeiTConfig", **_vision()),
        lambda: pixels(labels=False),
    ),
    "swiftformer": (
        built(
            "SwiftFormerForImageClassification",
            "SwiftFormerConfig",
            num_channels=3,
            depths=[1, 1, 1, 1],
            embed_dims=[8, 8, 16, 16],
            num_labels=3,
        ),
        pixels,
    ),
    "bit": (
        built(
            "BitForImageClassification",
            "BitConfig",
            num_channels=3,
            embedding_size=8,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            num_labels=3,
            layer_type="bottleneck",
            global_padding="SAME",
            num_groups=2,
        ),
        pixels,
    ),
    "mobilenet_v2": (
        built(
            "MobileNetV2ForImageClassification",
            "MobileNetV2Config",
            num_channels=3,
            image_size=32,
            depth_multiplier=0.25,
            num_labels=3,
            tf_padding=True,
            classifier_dropout_prob=0.0,
        ),
        pixels,
    ),
    "mobilenet_v1": (
        built(
            "MobileNetV1ForImageClassification",
            "MobileNetV1Config",
            num_channels=3,
            image_size=32,
            depth_multiplier=0.25,
            num_labels=3,
            tf_padding=True,
            classifier_dropout_prob=0.0,
        ),
        pixels,
    ),
    "vitdet": (
        built(
            "VitDetModel",
            "VitDetConfig",
            **{
                **_vision(),
                "pretrain_image_size": 32,
                "window_size": 2,
                "window_block_indices": [0],
                "use_relative_position_embeddings": True,
                "residual_block_indices": [1],
            },
        ),
        lambda: pixels(labels=False),
    ),
    "glpn": (
        built(
            "GLPNForDepthEstimation",
            "GLPNConfig",
            num_channels=3,
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[8, 16],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            decoder_hidden_size=8,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            drop_path_rate=0.0,
        ),
        lambda: {"pixel_values": torch.randn(2, 3, 32, 32), "labels": torch.rand(2, 32, 32) + 0.1},
    ),
}

GENERATES = {
    "helium": (built("HeliumForCausalLM", "HeliumConfig", **_LLM, head_dim=8), gen_in),
    "glm4": (built("Glm4ForCausalLM", "Glm4Config", **_LLM, head_dim=8), gen_in),
    "smollm3": (
        built("SmolLM3ForCausalLM", "SmolLM3Config", **_LLM, no_rope_layer_interval=2),
        gen_in,
    ),
    "exaone4": (
        built(
            "Exaone4ForCausalLM",
            "Exaone4Config",
            **_LLM,
            sliding_window=4,
            sliding_window_pattern=2,
        ),
        gen_in,
    ),
    "falcon_h1": (ARCHS["falcon_h1"][0], gen_in),
    "minimax": (ARCHS["minimax"][0], gen_in),
    "qwen2vl": (_qwen2vl, _qwen2vl_inputs(labels=False)),
    "doge": (ARCHS["doge"][0], gen_in),
}

_LLAMA = built("LlamaForCausalLM", "LlamaConfig", **_LLM)
_GPT2 = built(
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
    **_TOKENS,
)
_T5 = built(
    "T5ForConditionalGeneration",
    "T5Config",
    vocab_size=VOCAB,
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_heads=4,
    dropout_rate=0.0,
    decoder_start_token_id=0,
    **_TOKENS,
)


# -- usages ---------------------------------------------------------------------------------
def usage_generate(build, inputs, **kw):
    return lambda: check_generate(build, inputs, **kw)


def usage_interpolate(cls, cfg, **ckw):
    build = built(cls, cfg, **_vision(**ckw))
    return lambda: (
        check_forward(
            build,
            lambda: {"pixel_values": torch.randn(2, 3, 48, 40)},
            {"interpolate_pos_encoding": True},
        ),
        check_train(
            build,
            lambda: {"pixel_values": torch.randn(2, 3, 48, 40), "labels": torch.tensor([0, 2])},
            {"interpolate_pos_encoding": True},
        ),
    )


def usage_bf16_forward(build, inputs):
    def run():
        torch.manual_seed(0)
        model = build().eval().to(torch.bfloat16)
        torch.manual_seed(1)
        inp = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in inputs().items()}
        with torch.no_grad():
            exp = model(**inp)
            got = watched(torch.compile(model, backend="xla"), **inp)
            m64 = copy.deepcopy(model).double()
            ex = tensors(m64(**f64(inp)))
        for i, (g, e, x) in enumerate(zip(tensors(got), tensors(exp), ex)):
            if g.dtype != e.dtype or g.shape != e.shape:
                raise Mismatch(f"bf16[{i}] {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}")
            if not g.is_floating_point():
                continue
            eg = (g.double() - x).abs().max().item()
            ee = (e.double() - x).abs().max().item()
            if not eg <= 2 * ee + 1e-2 * x.abs().max().item():
                raise Mismatch(f"bf16[{i}] err {eg:.3g} vs eager's {ee:.3g} (f64)")

    return run


def usage_autocast_train(build, inputs):
    def run():
        torch.manual_seed(0)
        model = build().train()
        ref = copy.deepcopy(model)
        torch.manual_seed(1)
        inp = inputs()
        compiled = torch.compile(model, backend="xla")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            exp = ref(**inp)
            got = watched(compiled, **inp)
        for g, e in zip(tensors(got), tensors(exp)):
            if g.dtype != e.dtype or g.shape != e.shape:
                raise Mismatch(f"autocast {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}")
        le, lg = exp.loss.item(), got.loss.item()
        if abs(le - lg) > 0.05 * abs(le):
            raise Mismatch(f"autocast loss {lg} vs {le}")
        exp.loss.backward()
        watched(got.loss.backward)
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            if (p.grad is None) != (q.grad is None):
                raise Mismatch(f"autocast grad None-ness {n}")
            if p.grad is not None and p.grad.dtype != q.grad.dtype:
                raise Mismatch(f"autocast grad dtype {n} {p.grad.dtype} vs {q.grad.dtype}")
            if p.grad is not None:
                s = q.grad.abs().max().item()
                d = (p.grad - q.grad).abs().max().item()
                if d > 0.1 * s + 1e-3:
                    raise Mismatch(f"autocast grad {n}: {d:.3g} (scale {s:.3g})")

    return run


def usage_packed():
    # two sequences packed in one row, position_ids restart: transformers builds a
    # block-diagonal mask from them (DataCollatorWithFlattening)
    def inputs():
        i = ids(1, 10)
        pos = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3, 4, 5]])
        labels = i.clone()
        labels[0, 4] = -100
        return {"input_ids": i, "position_ids": pos, "labels": labels}

    return lambda: (check_forward(_LLAMA, inputs), check_train(_LLAMA, inputs))


def usage_num_items():
    def inputs():
        d = text_lm()
        d["num_items_in_batch"] = torch.tensor(40)
        return d

    def inputs_int():
        d = text_lm()
        d["num_items_in_batch"] = 40
        return d

    return lambda: (check_train(_LLAMA, inputs), check_train(_LLAMA, inputs_int))


def usage_label_smoothing():
    # Trainer's LabelSmoother on the logits
    def run():
        torch.manual_seed(0)
        model = _LLAMA().train()
        ref = copy.deepcopy(model)
        inp = text_lm()
        smoother = transformers.trainer_pt_utils.LabelSmoother(epsilon=0.1)

        def step(m, d):
            labels = d["labels"]
            out = m(input_ids=d["input_ids"], attention_mask=d["attention_mask"])
            return smoother(out, labels, shift_labels=True)

        exp = step(ref, inp)
        got = watched(torch.compile(step, backend="xla"), model, inp)
        close("smooth", [got], [exp])
        exp.backward()
        got.backward()
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            if (p.grad is None) != (q.grad is None):
                raise Mismatch(f"None-ness {n}")
            if p.grad is not None and not torch.allclose(p.grad, q.grad, rtol=RTOL, atol=ATOL):
                raise Mismatch(f"grad {n} {(p.grad - q.grad).abs().max():.3g}")

    return run


def usage_flex():
    build = built("LlamaForCausalLM", "LlamaConfig", **_LLM, attn_implementation="flex_attention")
    # (eager's FlexAttention has no backward on the CPU)
    return lambda: check_forward(build, lambda: {"input_ids": ids()})


def usage_sdpa_mask_bool_4d():
    # a custom 4D float mask passed by the user
    def inputs():
        i = ids(2, 8)
        m = torch.tril(torch.ones(8, 8, dtype=torch.bool))[None, None].expand(2, 1, 8, 8).clone()
        m[1, :, :, :2] = False
        m[1, :, :2, 0] = True
        m[1, :, 1, 1] = True
        return {"input_ids": i, "attention_mask": m}

    return lambda: check_forward(_LLAMA, inputs)


USAGES = {
    "gen/prompt_lookup_gpt2": usage_generate(
        _GPT2,
        lambda: {"input_ids": torch.tensor([[5, 6, 7, 8, 5, 6, 7, 9, 5, 6]])},
        prompt_lookup_num_tokens=3,
        new=8,
    ),
    "gen/assisted_llama": lambda: _assisted(),
    "gen/sample_minp_typical": usage_generate(
        _LLAMA, gen_in, do_sample=True, min_p=0.05, typical_p=0.9, temperature=0.7, seed=3
    ),
    "gen/sample_epsilon_eta": usage_generate(
        _GPT2, gen_in, do_sample=True, epsilon_cutoff=3e-3, eta_cutoff=3e-3, seed=3
    ),
    "gen/beam_t5_lenpen": usage_generate(
        _T5,
        lambda: padded(2, 8),
        num_beams=3,
        length_penalty=0.5,
        early_stopping=True,
        num_return_sequences=2,
    ),
    "gen/suppress_seq_bias": usage_generate(
        _LLAMA,
        gen_in,
        suppress_tokens=[5, 6, 7],
        sequence_bias={(9,): 5.0},
        begin_suppress_tokens=[8],
    ),
    "gen/watermark": usage_generate(
        _LLAMA, gen_in, watermarking_config={"bias": 2.0, "context_width": 2}
    ),
    "gen/renorm_expdecay": usage_generate(
        _LLAMA,
        gen_in,
        renormalize_logits=True,
        exponential_decay_length_penalty=(2, 1.5),
        output_scores=True,
        return_dict_in_generate=True,
    ),
    "gen/left_pad_beam_sample": usage_generate(
        _LLAMA, lambda: padded(2, 6, left=True), num_beams=2, do_sample=True, seed=4
    ),
    "interp/vit": usage_interpolate("ViTForImageClassification", "ViTConfig"),
    "interp/dinov2": usage_interpolate("Dinov2ForImageClassification", "Dinov2Config", mlp_ratio=2),
    "interp/deit": usage_interpolate("DeiTForImageClassification", "DeiTConfig"),
    "interp/beit": usage_interpolate(
        "BeitForImageClassification", "BeitConfig", use_relative_position_bias=True
    ),
    "bf16/llama": usage_bf16_forward(_LLAMA, lambda: padded()),
    "bf16/gpt2": usage_bf16_forward(_GPT2, lambda: padded()),
    "bf16/bert": usage_bf16_forward(
        built("BertForMaskedLM", "BertConfig", **_ENC), lambda: padded()
    ),
    "bf16/vit": usage_bf16_forward(
        built("ViTForImageClassification", "ViTConfig", **_vision()), lambda: pixels(labels=False)
    ),
    "bf16/gen_llama": lambda: _bf16_gen(),
    "autocast/llama": usage_autocast_train(_LLAMA, text_lm),
    "autocast/bert": usage_autocast_train(built("BertForMaskedLM", "BertConfig", **_ENC), mlm),
    "packed/llama": usage_packed(),
    "num_items/llama": usage_num_items(),
    "label_smoother/llama": usage_label_smoothing(),
    "flex/llama": usage_flex(),
    "mask4d/llama": usage_sdpa_mask_bool_4d(),
    "ckpt/t5_train": lambda: check_train(_T5, _s2s, checkpointing=True),
    "ckpt/switch_train": lambda: check_train(_switch, _s2s, checkpointing=True),
}


def _assisted():
    torch.manual_seed(5)
    assistant = _LLAMA().eval()
    return check_generate(_LLAMA, gen_in, assistant_model=assistant, new=6)


def _bf16_gen():
    def build():
        return _LLAMA().to(torch.bfloat16)

    return check_generate(build, gen_in, new=6)


def cases():
    out = {}
    for name, (build, inputs) in ARCHS.items():
        out[f"{name}/forward"] = lambda b=build, i=inputs: check_forward(b, i)
        out[f"{name}/train"] = lambda b=build, i=inputs: check_train(b, i)
    for name, (build, inputs) in GENERATES.items():
        out[f"{name}/generate"] = lambda b=build, i=inputs: check_generate(b, i)
    out.update(USAGES)
    return out


def main(argv):
    torch.set_num_threads(1)
    table = cases()
    selected = [n for n in table if not argv or any(a in n for a in argv)]
    bad = 0
    for name in selected:
        torch._dynamo.reset()
        PHASE[0] = "eager"
        t = time.time()
        try:
            table[name]()
            status = "ok"
        except Mismatch as e:
            status = f"DIFF {e}"
            bad += 1
        except Exception as e:  # noqa: BLE001  (a probe reports, it does not stop)
            tb = traceback.extract_tb(e.__traceback__)
            where = next(
                (
                    f"{f.filename.split('/')[-1]}:{f.lineno}"
                    for f in reversed(tb)
                    if "torch2xla" in f.filename
                ),
                "",
            )
            status = f"{'CRASH' if PHASE[0] == 'xla' else 'EAGER-ERR'} {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''} {where}"
            bad += 1
        print(f"{name:32s} {time.time() - t:5.1f}s {status}", flush=True)
    print(f"{len(selected) - bad}/{len(selected)} ok")


if __name__ == "__main__":
    main(sys.argv[1:])
