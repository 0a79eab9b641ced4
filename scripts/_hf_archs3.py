"""The architectures scripts/probe_hf3.py adds to the zoo (tests/test_hf_zoo.py) and to
scripts/_hf_archs.py: long-sequence attention (Longformer, BigBird's block-sparse, Nystromformer,
Reformer's LSH with reversible layers), FFT mixing (FNet), hashed characters (CANINE), latents
(Perceiver), table cells (TAPAS), ModernBERT, ESM, SqueezeBERT, MoE decoders (PhiMoE, JetMoE,
GraniteMoE, Llama 4), hybrids (Zamba2, Bamba), Falcon-Mamba, Gemma 3n, DiffLlama, image-text
(LLaVA, GIT, BLIP), speech (SpeechT5, Speech2Text, Moonshine, SEW-D, UniSpeech-SAT, EnCodec),
ProphetNet, BigBird-Pegasus, vision (ViT-MAE, Swin v2, CvT, PVT v2, ConvNeXt v2, FocalNet,
MobileViT v2, Hiera) and time series (PatchTST, the probabilistic TimeSeriesTransformer).
Tiny random configs, dropout off (the probe turns it on for its dropout check)."""

from __future__ import annotations

import torch
import transformers

from tests.test_hf_zoo import (
    _CLASSIFIER,
    _ENCODER,
    _ENCODER_DECODER,
    _LLM,
    _TOKENS,
    VOCAB,
    Arch,
    _built,
    _ids,
    _mlm,
    _pixels,
    _seq2seq,
    _text,
)
from tests.test_hfzoo_s23 import ZOO3

_SEQ2SEQ_TOKENS = {
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "decoder_start_token_id": 2,
    "forced_eos_token_id": None,
}
_AUDIO = {
    "vocab_size": 32,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "conv_dim": (16, 16),
    "conv_stride": (4, 2),
    "conv_kernel": (8, 4),
    "num_conv_pos_embeddings": 8,
    "num_conv_pos_embedding_groups": 4,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "feat_proj_dropout": 0.0,
    "final_dropout": 0.0,
    "layerdrop": 0.0,
    "mask_time_prob": 0.0,
    "pad_token_id": 0,
    "ctc_loss_reduction": "mean",
}
_VISION_TOWER = {
    "image_size": 16,
    "patch_size": 8,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
}


# -- inputs -------------------------------------------------------------------------------------
def _long_mlm(seq=32):
    ids = _ids(seq=seq)
    mask = torch.ones_like(ids)
    mask[1, -5:] = 0
    labels = ids.clone()
    labels[:, ::2] = -100
    return {"input_ids": ids, "attention_mask": mask}, {"labels": labels}


def _unpadded_mlm():
    inputs, labels = _mlm()
    inputs["attention_mask"][:] = 1
    return inputs, labels


def _longformer():
    inputs, labels = _mlm()
    glob = torch.zeros_like(inputs["input_ids"])
    glob[:, 0] = 1
    return {**inputs, "global_attention_mask": glob}, labels


def _chars():
    ids = torch.randint(32, 2000, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, -4:] = 0
    return {"input_ids": ids, "attention_mask": mask}, {"labels": torch.tensor([0, 2])}


def _reformer():
    ids = _ids(seq=16)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    return {"input_ids": ids, "attention_mask": mask}, {"labels": ids}


def _image_text(image_token=None, n_image=0, size=16):
    def make():
        ids = _ids(vocab=VOCAB - 1, seq=10)
        if image_token is not None:
            ids[:, 1 : 1 + n_image] = image_token
        mask = torch.ones_like(ids)
        labels = ids.clone()
        if image_token is not None:
            labels[:, 1 : 1 + n_image] = -100
        return (
            {
                "input_ids": ids,
                "attention_mask": mask,
                "pixel_values": torch.randn(2, 3, size, size),
            },
            {"labels": labels},
        )

    return make


def _speech():
    labels = _ids(seq=7)
    labels[1, -2:] = -100
    return {"input_values": torch.randn(2, 400)}, {"labels": labels}


def _moonshine():
    labels = _ids(seq=7)
    labels[1, -2:] = -100
    return {"input_values": torch.randn(2, 2000)}, {"labels": labels}


def _features():
    feats = torch.randn(2, 40, 16)
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, -8:] = 0
    labels = _ids(seq=7)
    labels[1, -2:] = -100
    return {"input_features": feats, "attention_mask": mask}, {"labels": labels}


def _audio16():
    labels = torch.randint(1, 32, (2, 5))
    labels[1, -2:] = -100
    return {"input_values": torch.randn(2, 400)}, {"labels": labels}


def _mae():
    return {"pixel_values": torch.randn(2, 3, 32, 32), "noise": torch.rand(2, 16)}, {}


def _encodec():
    return {"input_values": torch.randn(2, 1, 256)}, {}


# -- models needing sub-configs -----------------------------------------------------------------
def _llava():
    config = transformers.LlavaConfig(
        vision_config=transformers.CLIPVisionConfig(**_VISION_TOWER),
        text_config=transformers.LlamaConfig(**_LLM),
        image_token_id=VOCAB - 1,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        image_seq_length=4,
    )
    return transformers.LlavaForConditionalGeneration(config)


def _git():
    config = transformers.GitConfig(
        vision_config=_VISION_TOWER,
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return transformers.GitForCausalLM(config)


def _blip():
    config = transformers.BlipConfig(
        text_config={
            "vocab_size": VOCAB,
            "hidden_size": 32,
            "encoder_hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 64,
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 0,
            "sep_token_id": 2,
        },
        vision_config={**_VISION_TOWER, "attention_dropout": 0.0},
        projection_dim=16,
    )
    return transformers.BlipForConditionalGeneration(config)


NEW3 = {
    **ZOO3,  # the architectures tests/test_hfzoo_s23.py checks
    # encoders
    "longformer": Arch(
        _built(
            "LongformerForMaskedLM",
            "LongformerConfig",
            **{**_ENCODER, "pad_token_id": 1},
            attention_window=4,
        ),
        _longformer,
    ),
    "big_bird_sparse": Arch(
        _built(
            "BigBirdForMaskedLM",
            "BigBirdConfig",
            **_ENCODER,
            attention_type="block_sparse",
            block_size=2,
            num_random_blocks=1,
        ),
        _long_mlm,
    ),
    "nystromformer": Arch(
        _built(
            "NystromformerForMaskedLM",
            "NystromformerConfig",
            **_ENCODER,
            num_landmarks=4,
            segment_means_seq_len=12,
            conv_kernel_size=3,
        ),
        _unpadded_mlm,  # (a padded mask fails in eager with landmarks: shapes 4 vs 12)
    ),
    "squeezebert": Arch(
        _built(
            "SqueezeBertForMaskedLM",
            "SqueezeBertConfig",
            **_ENCODER,
            embedding_size=32,
            q_groups=2,
            k_groups=2,
            v_groups=2,
            post_attention_groups=2,
            intermediate_groups=2,
            output_groups=2,
        ),
        _mlm,
    ),
    "canine": Arch(
        _built(
            "CanineForSequenceClassification",
            "CanineConfig",
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=128,
            downsampling_rate=4,
            num_hash_functions=2,
            num_hash_buckets=64,
            local_transformer_stride=4,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            **_CLASSIFIER,
        ),
        _chars,
    ),
    "perceiver": Arch(
        _built(
            "PerceiverForMaskedLM",
            "PerceiverConfig",
            num_latents=8,
            d_latents=32,
            d_model=32,
            num_blocks=1,
            num_self_attends_per_block=2,
            num_self_attention_heads=4,
            num_cross_attention_heads=4,
            qk_channels=32,
            v_channels=32,
            vocab_size=VOCAB,
            max_position_embeddings=12,
            attention_probs_dropout_prob=0.0,
        ),
        _mlm,
    ),
    "reformer": Arch(
        _built(
            "ReformerModelWithLMHead",
            "ReformerConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_attention_heads=2,
            attention_head_size=16,
            attn_layers=["local", "lsh"],
            axial_pos_embds=True,
            axial_pos_shape=[4, 4],
            axial_pos_embds_dim=[16, 16],
            max_position_embeddings=16,
            feed_forward_size=64,
            local_attn_chunk_length=4,
            lsh_attn_chunk_length=4,
            num_buckets=2,
            num_hashes=1,
            is_decoder=True,
            hidden_dropout_prob=0.0,
            local_attention_probs_dropout_prob=0.0,
            lsh_attention_probs_dropout_prob=0.0,
            pad_token_id=0,
            eos_token_id=2,
        ),
        _reformer,
        generates=True,
    ),
    # decoders
    "phimoe": Arch(
        _built(
            "PhimoeForCausalLM",
            "PhimoeConfig",
            **_LLM,
            num_local_experts=4,
            num_experts_per_tok=2,
            router_jitter_noise=0.0,
            input_jitter_noise=0.0,
        ),
        _text,
        generates=True,
    ),
    "jetmoe": Arch(
        _built(
            "JetMoeForCausalLM",
            "JetMoeConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_key_value_heads=4,
            kv_channels=8,
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=64,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "granitemoe": Arch(
        _built(
            "GraniteMoeForCausalLM",
            "GraniteMoeConfig",
            **_LLM,
            num_local_experts=4,
            num_experts_per_tok=2,
            embedding_multiplier=2.0,
            logits_scaling=4.0,
            output_router_logits=True,
        ),
        _text,
        generates=True,
    ),
    "diffllama": Arch(
        _built("DiffLlamaForCausalLM", "DiffLlamaConfig", **_LLM), _text, generates=True
    ),
    "gemma3n": Arch(
        _built(
            "Gemma3nForCausalLM",
            "Gemma3nTextConfig",
            vocab_size=VOCAB,
            vocab_size_per_layer_input=VOCAB,
            hidden_size=32,
            hidden_size_per_layer_input=8,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
            laurel_rank=4,
            altup_num_inputs=4,
            num_kv_shared_layers=0,
            activation_sparsity_pattern=[0.95, 0.0],
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "zamba2": Arch(
        _built(
            "Zamba2ForCausalLM",
            "Zamba2Config",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            intermediate_size=64,
            mamba_d_state=8,
            mamba_d_conv=4,
            mamba_expand=2,
            mamba_headdim=8,
            mamba_ngroups=1,
            chunk_size=4,
            layers_block_type=["mamba", "hybrid"],
            hybrid_layer_ids=[1],
            max_position_embeddings=64,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "bamba": Arch(
        _built(
            "BambaForCausalLM",
            "BambaConfig",
            **_LLM,
            attn_layer_indices=[1],
            mamba_n_heads=8,
            mamba_d_head=8,
            mamba_n_groups=1,
            mamba_d_state=8,
            mamba_d_conv=4,
            mamba_expand=2,
            mamba_chunk_size=4,
        ),
        _text,
        generates=True,
    ),
    "falcon_mamba": Arch(
        _built(
            "FalconMambaForCausalLM",
            "FalconMambaConfig",
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
    # image-text
    "llava": Arch(_llava, _image_text(VOCAB - 1, 4), generates=True),
    "git": Arch(_git, _image_text(), generates=True),
    "blip": Arch(_blip, _image_text(), generates=True),
    # encoder-decoders
    "speecht5_asr": Arch(
        _built(
            "SpeechT5ForSpeechToText",
            "SpeechT5Config",
            vocab_size=VOCAB,
            hidden_size=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            conv_dim=(16, 16),
            conv_stride=(4, 2),
            conv_kernel=(8, 4),
            num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=4,
            encoder_max_relative_position=16,
            max_text_positions=64,
            max_speech_positions=128,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            feat_proj_dropout=0.0,
            positional_dropout=0.0,
            encoder_layerdrop=0.0,
            decoder_layerdrop=0.0,
            mask_time_prob=0.0,
            **_SEQ2SEQ_TOKENS,
        ),
        _speech,
        generates=True,
        encoder_decoder=True,
    ),
    "speech2text": Arch(
        _built(
            "Speech2TextForConditionalGeneration",
            "Speech2TextConfig",
            **_ENCODER_DECODER,
            input_feat_per_channel=16,
            input_channels=1,
            num_conv_layers=2,
            conv_kernel_sizes=(5, 5),
            conv_channels=32,
            max_source_positions=64,
            max_target_positions=64,
            encoder_layerdrop=0.0,
            decoder_layerdrop=0.0,
            **_SEQ2SEQ_TOKENS,
        ),
        _features,
        generates=True,
        encoder_decoder=True,
    ),
    "moonshine": Arch(
        _built(
            "MoonshineForConditionalGeneration",
            "MoonshineConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            encoder_num_hidden_layers=2,
            decoder_num_hidden_layers=2,
            encoder_num_attention_heads=4,
            decoder_num_attention_heads=4,
            max_position_embeddings=64,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        ),
        _moonshine,
        generates=True,
        encoder_decoder=True,
    ),
    "prophetnet": Arch(
        _built(
            "ProphetNetForConditionalGeneration",
            "ProphetNetConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            num_encoder_layers=2,
            num_decoder_layers=2,
            num_encoder_attention_heads=4,
            num_decoder_attention_heads=4,
            ngram=2,
            num_buckets=8,
            relative_max_distance=16,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=0,
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "bigbird_pegasus": Arch(
        _built(
            "BigBirdPegasusForConditionalGeneration",
            "BigBirdPegasusConfig",
            **_ENCODER_DECODER,
            attention_type="block_sparse",
            block_size=2,
            num_random_blocks=1,
            max_position_embeddings=64,
            **_SEQ2SEQ_TOKENS,
        ),
        lambda: (_long_mlm()[0], {"labels": _seq2seq()[1]["labels"]}),
        generates=True,
        encoder_decoder=True,
    ),
    # vision
    "vit_mae": Arch(
        _built(
            "ViTMAEForPreTraining",
            "ViTMAEConfig",
            image_size=32,
            patch_size=8,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            decoder_hidden_size=32,
            decoder_num_hidden_layers=1,
            decoder_num_attention_heads=4,
            decoder_intermediate_size=64,
            mask_ratio=0.5,
            norm_pix_loss=True,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
        _mae,
    ),
    "swinv2": Arch(
        _built(
            "Swinv2ForImageClassification",
            "Swinv2Config",
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
    "cvt": Arch(
        _built(
            "CvtForImageClassification",
            "CvtConfig",
            num_channels=3,
            patch_sizes=[7, 3, 3],
            patch_stride=[4, 2, 2],
            patch_padding=[2, 1, 1],
            embed_dim=[16, 16, 32],
            num_heads=[1, 1, 2],
            depth=[1, 2, 3],  # (transformers indexes drop_path_rates by stage),
            mlp_ratio=[2.0, 2.0, 2.0],
            attention_drop_rate=[0.0, 0.0, 0.0],
            drop_rate=[0.0, 0.0, 0.0],
            drop_path_rate=[0.0, 0.0, 0.0],
            qkv_bias=[True, True, True],
            cls_token=[False, False, True],
            qkv_projection_method=["dw_bn", "avg", "dw_bn"],
            kernel_qkv=[3, 3, 3],
            padding_kv=[1, 1, 1],
            stride_kv=[2, 2, 2],
            padding_q=[1, 1, 1],
            stride_q=[1, 1, 1],
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "pvt_v2": Arch(
        _built(
            "PvtV2ForImageClassification",
            "PvtV2Config",
            image_size=32,
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[16, 32],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            drop_path_rate=0.0,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "focalnet": Arch(
        _built(
            "FocalNetForImageClassification",
            "FocalNetConfig",
            image_size=32,
            patch_size=4,
            embed_dim=16,
            depths=[1, 1],
            focal_levels=[2, 2],
            focal_windows=[3, 3],
            hidden_dropout_prob=0.0,
            drop_path_rate=0.0,
            use_layerscale=True,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "mobilevitv2": Arch(
        _built(
            "MobileViTV2ForImageClassification",
            "MobileViTV2Config",
            image_size=64,
            patch_size=2,
            width_multiplier=0.25,
            attn_dropout=0.0,
            classifier_dropout_prob=0.0,
            **_CLASSIFIER,
        ),
        lambda: _pixels(64),
    ),
    "hiera": Arch(
        _built(
            "HieraForImageClassification",
            "HieraConfig",
            image_size=[32, 32],
            patch_size=[7, 7],
            patch_stride=[4, 4],
            patch_padding=[3, 3],
            embed_dim=16,
            num_heads=[1, 2],
            depths=[1, 1],
            query_stride=[2, 2],
            masked_unit_size=[4, 4],
            masked_unit_attention=[True, False],
            num_query_pool=1,
            drop_path_rate=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    # audio
    "sew_d": Arch(
        _built(
            "SEWDForCTC",
            "SEWDConfig",
            **_AUDIO,
            squeeze_factor=2,
            position_buckets=8,
            max_position_embeddings=64,
            relative_attention=True,
            pos_att_type=("p2c", "c2p"),
        ),
        _audio16,
    ),
    "unispeech_sat": Arch(_built("UniSpeechSatForCTC", "UniSpeechSatConfig", **_AUDIO), _audio16),
    "encodec": Arch(
        _built(
            "EncodecModel",
            "EncodecConfig",
            target_bandwidths=[1.5],
            sampling_rate=2400,
            audio_channels=1,
            hidden_size=32,
            num_filters=8,
            num_residual_layers=1,
            upsampling_ratios=[4, 2],
            codebook_size=16,
            codebook_dim=32,
            num_lstm_layers=1,
        ),
        _encodec,
    ),
    # time series
}
