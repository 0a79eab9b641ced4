"""The architectures scripts/probe_hf.py adds to tests/test_hf_zoo.py's zoo: heads on the zoo's
bodies (classification, question answering, multiple choice, token type ids) and models the zoo
lacks. Tiny random configs, dropout off."""

from __future__ import annotations

import torch
import transformers

from tests.test_hf_zoo import (
    _CLASSIFIER,
    _ENCODER,
    _ENCODER_DECODER,
    _LLM,
    _SMALL,
    _TOKENS,
    VOCAB,
    Arch,
    _built,
    _ids,
    _mlm,
    _padded_ids,
    _pixels,
    _seq2seq,
    _text,
)


# -- the architectures --------------------------------------------------------------------------
def _typed_text():
    """Ids, a padded mask and token type ids (a second segment)."""
    inputs = _padded_ids()
    types = torch.zeros_like(inputs["input_ids"])
    types[:, 6:] = 1
    return {**inputs, "token_type_ids": types}


def _seq_cls():
    return _typed_text(), {"labels": torch.tensor([0, 2])}


def _seq_cls_untyped():
    inputs = _padded_ids()
    inputs["input_ids"][1, -3:] = 0  # the pad id: the classifier reads the last real token
    return inputs, {"labels": torch.tensor([0, 2])}


def _tok_cls():
    inputs = _typed_text()
    labels = torch.randint(0, 3, inputs["input_ids"].shape)
    labels[1, -3:] = -100
    return inputs, {"labels": labels}


def _qa():
    # positions past the sequence are clamped to it (and ignored)
    return _typed_text(), {
        "start_positions": torch.tensor([2, 40]),
        "end_positions": torch.tensor([5, 3]),
    }


def _multiple_choice():
    ids = torch.randint(3, VOCAB, (2, 3, 8))
    mask = torch.ones_like(ids)
    mask[1, :, -2:] = 0
    types = torch.zeros_like(ids)
    types[..., 4:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}, {
        "labels": torch.tensor([1, 2])
    }


def _pretraining():
    inputs = _typed_text()
    labels = inputs["input_ids"].clone()
    labels[:, ::2] = -100
    return inputs, {"labels": labels, "next_sentence_label": torch.tensor([0, 1])}


def _audio16():
    wave = torch.randn(2, 400)
    labels = torch.randint(1, 32, (2, 5))
    labels[1, -2:] = -100
    return {"input_values": wave}, {"labels": labels}


def _audio_cls():
    return {"input_values": torch.randn(2, 400)}, {"labels": torch.tensor([0, 2])}


def _segmentation():
    return {"pixel_values": torch.randn(2, 3, 32, 32)}, {"labels": torch.randint(0, 3, (2, 32, 32))}


_BERT = _built("BertForMaskedLM", "BertConfig", **_ENCODER)
_LLAMA_HEAD = {**_LLM, **_CLASSIFIER}
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
_SEQ2SEQ_TOKENS = {
    "max_position_embeddings": 64,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "decoder_start_token_id": 2,
    "forced_eos_token_id": None,
}

NEW = {
    # heads on the zoo's bodies
    "bert_seqcls": Arch(
        _built("BertForSequenceClassification", "BertConfig", **_ENCODER, **_CLASSIFIER), _seq_cls
    ),
    "bert_tokcls": Arch(
        _built("BertForTokenClassification", "BertConfig", **_ENCODER, num_labels=3), _tok_cls
    ),
    "bert_qa": Arch(_built("BertForQuestionAnswering", "BertConfig", **_ENCODER), _qa),
    "bert_mc": Arch(_built("BertForMultipleChoice", "BertConfig", **_ENCODER), _multiple_choice),
    "bert_pretraining": Arch(_built("BertForPreTraining", "BertConfig", **_ENCODER), _pretraining),
    "bert_regression": Arch(
        _built(
            "BertForSequenceClassification",
            "BertConfig",
            **_ENCODER,
            num_labels=1,
            problem_type="regression",
        ),
        lambda: (_typed_text(), {"labels": torch.tensor([0.5, -1.0])}),
    ),
    "bert_multilabel": Arch(
        _built(
            "BertForSequenceClassification",
            "BertConfig",
            **_ENCODER,
            num_labels=3,
            problem_type="multi_label_classification",
        ),
        lambda: (_typed_text(), {"labels": torch.tensor([[1.0, 0, 1], [0, 1, 0]])}),
    ),
    "llama_seqcls": Arch(
        _built("LlamaForSequenceClassification", "LlamaConfig", **_LLAMA_HEAD), _seq_cls_untyped
    ),
    "llama_tokcls": Arch(
        _built(
            "LlamaForTokenClassification",
            "LlamaConfig",
            **_LLM,
            num_labels=3,
            classifier_dropout=0.0,
        ),
        lambda: (_padded_ids(), {"labels": torch.randint(0, 3, (2, 12))}),
    ),
    "llama_qa": Arch(
        _built("LlamaForQuestionAnswering", "LlamaConfig", **_LLM),
        lambda: (
            _padded_ids(),
            {"start_positions": torch.tensor([2, 40]), "end_positions": torch.tensor([5, 3])},
        ),
    ),
    "gpt2_seqcls": Arch(
        _built(
            "GPT2ForSequenceClassification",
            "GPT2Config",
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            pad_token_id=0,
            **_CLASSIFIER,
        ),
        _seq_cls_untyped,
    ),
    "roberta_seqcls": Arch(
        _built(
            "RobertaForSequenceClassification",
            "RobertaConfig",
            **{**_ENCODER, "pad_token_id": 1},
            **_CLASSIFIER,
        ),
        lambda: (_padded_ids(), {"labels": torch.tensor([0, 2])}),
    ),
    "distilbert_qa": Arch(
        _built(
            "DistilBertForQuestionAnswering",
            "DistilBertConfig",
            vocab_size=VOCAB,
            dim=32,
            n_layers=2,
            n_heads=4,
            hidden_dim=64,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            qa_dropout=0.0,
        ),
        lambda: (
            _padded_ids(),
            {"start_positions": torch.tensor([2, 40]), "end_positions": torch.tensor([5, 3])},
        ),
    ),
    "electra_disc": Arch(
        _built("ElectraForPreTraining", "ElectraConfig", **_ENCODER, embedding_size=16),
        lambda: (_typed_text(), {"labels": torch.randint(0, 2, (2, 12))}),
    ),
    "vit_mim": Arch(
        _built(
            "ViTForMaskedImageModeling",
            "ViTConfig",
            image_size=32,
            patch_size=8,
            num_channels=3,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            encoder_stride=8,
        ),
        lambda: (
            {"pixel_values": torch.randn(2, 3, 32, 32), "bool_masked_pos": torch.rand(2, 16) < 0.5},
            {},
        ),
    ),
    # architectures the zoo lacks
    "gpt_neo": Arch(
        _built(
            "GPTNeoForCausalLM",
            "GPTNeoConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            attention_types=[[["global", "local"], 1]],
            window_size=4,
            max_position_embeddings=64,
            resid_dropout=0.0,
            embed_dropout=0.0,
            attention_dropout=0.0,
            **_TOKENS,
        ),
        _text,
        generates=True,
    ),
    "codegen": Arch(
        _built(
            "CodeGenForCausalLM",
            "CodeGenConfig",
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=64,
            rotary_dim=4,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **_TOKENS,
        ),
        _text,
        generates=True,
    ),
    "biogpt": Arch(
        _built(
            "BioGptForCausalLM",
            "BioGptConfig",
            **_SMALL,
            intermediate_size=64,
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            layerdrop=0.0,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "xglm": Arch(
        _built(
            "XGLMForCausalLM",
            "XGLMConfig",
            vocab_size=VOCAB,
            d_model=32,
            num_layers=2,
            attention_heads=4,
            ffn_dim=64,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            layerdrop=0.0,
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "mpt": Arch(
        _built(
            "MptForCausalLM",
            "MptConfig",
            vocab_size=VOCAB,
            d_model=32,
            n_layers=2,
            n_heads=4,
            expansion_ratio=2,
            max_seq_len=64,
            **_TOKENS,
        ),
        _text,
        generates=True,
    ),
    "stablelm": Arch(
        _built(
            "StableLmForCausalLM",
            "StableLmConfig",
            **_LLM,
            partial_rotary_factor=0.5,
            hidden_dropout=0.0,
        ),
        _text,
        generates=True,
    ),
    "olmo": Arch(
        _built("OlmoForCausalLM", "OlmoConfig", **_LLM, clip_qkv=2.0), _text, generates=True
    ),
    "cohere": Arch(
        _built("CohereForCausalLM", "CohereConfig", **_LLM, use_qk_norm=True), _text, generates=True
    ),
    "granite": Arch(
        _built(
            "GraniteForCausalLM",
            "GraniteConfig",
            **_LLM,
            embedding_multiplier=2.0,
            logits_scaling=4.0,
            residual_multiplier=0.5,
            attention_multiplier=0.3,
        ),
        _text,
        generates=True,
    ),
    "persimmon": Arch(
        _built(
            "PersimmonForCausalLM",
            "PersimmonConfig",
            **{k: v for k, v in _LLM.items() if k != "num_key_value_heads"},
            hidden_dropout=0.0,
        ),
        _text,
        generates=True,
    ),
    "nemotron": Arch(
        _built("NemotronForCausalLM", "NemotronConfig", **_LLM, head_dim=8), _text, generates=True
    ),
    "glm": Arch(_built("GlmForCausalLM", "GlmConfig", **_LLM, head_dim=8), _text, generates=True),
    "dbrx": Arch(
        _built(
            "DbrxForCausalLM",
            "DbrxConfig",
            d_model=32,
            n_heads=4,
            n_layers=2,
            max_seq_len=64,
            vocab_size=VOCAB,
            ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},
            attn_config={"kv_n_heads": 2},
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "recurrent_gemma": Arch(
        _built(
            "RecurrentGemmaForCausalLM",
            "RecurrentGemmaConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            lru_width=32,
            attention_window_size=8,
            block_types=["recurrent", "attention"],
            **_TOKENS,
            pad_token_id=0,
        ),
        _text,
        generates=True,
    ),
    "rwkv": Arch(
        _built(
            "RwkvForCausalLM",
            "RwkvConfig",
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            attention_hidden_size=32,
            intermediate_size=64,
            context_length=64,
            **_TOKENS,
        ),
        lambda: ({"input_ids": _ids()}, {"labels": _ids()}),
        generates=True,
    ),
    "mpnet": Arch(
        _built("MPNetForMaskedLM", "MPNetConfig", **{**_ENCODER, "pad_token_id": 1}),
        _mlm,
    ),
    "funnel": Arch(
        _built(
            "FunnelForMaskedLM",
            "FunnelConfig",
            vocab_size=VOCAB,
            block_sizes=[1, 1],
            num_decoder_layers=1,
            d_model=32,
            n_head=4,
            d_head=8,
            d_inner=64,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
        ),
        lambda: (_typed_text(), _mlm()[1]),
    ),
    "deberta": Arch(
        _built(
            "DebertaForMaskedLM",
            "DebertaConfig",
            **_ENCODER,
            relative_attention=True,
            max_relative_positions=16,
            pos_att_type=["p2c", "c2p"],
        ),
        _mlm,
    ),
    "roformer": Arch(
        _built("RoFormerForMaskedLM", "RoFormerConfig", **_ENCODER, embedding_size=32), _mlm
    ),
    "convbert": Arch(
        _built(
            "ConvBertForMaskedLM",
            "ConvBertConfig",
            **_ENCODER,
            embedding_size=32,
            head_ratio=2,
            conv_kernel_size=3,
        ),
        _mlm,
    ),
    "mobilebert": Arch(
        _built(
            "MobileBertForMaskedLM",
            "MobileBertConfig",
            **{**_ENCODER, "intermediate_size": 32},
            embedding_size=16,
            intra_bottleneck_size=16,
            num_feedforward_networks=2,
            true_hidden_size=16,
        ),
        _mlm,
    ),
    "big_bird": Arch(
        _built("BigBirdForMaskedLM", "BigBirdConfig", **_ENCODER, attention_type="original_full"),
        _mlm,
    ),
    "xlnet": Arch(
        _built(
            "XLNetLMHeadModel",
            "XLNetConfig",
            vocab_size=VOCAB,
            d_model=32,
            n_layer=2,
            n_head=4,
            d_inner=64,
            dropout=0.0,
            **_TOKENS,
            pad_token_id=5,
        ),
        _text,
    ),
    "ctrl": Arch(
        _built(
            "CTRLLMHeadModel",
            "CTRLConfig",
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            dff=64,
            n_positions=64,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
        ),
        _text,
        generates=True,
    ),
    "pegasus": Arch(
        _built(
            "PegasusForConditionalGeneration",
            "PegasusConfig",
            **_ENCODER_DECODER,
            **{**_SEQ2SEQ_TOKENS, "decoder_start_token_id": 1},
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "marian": Arch(
        _built(
            "MarianMTModel",
            "MarianConfig",
            **_ENCODER_DECODER,
            **{**_SEQ2SEQ_TOKENS, "decoder_start_token_id": 1},
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "blenderbot": Arch(
        _built(
            "BlenderbotForConditionalGeneration",
            "BlenderbotConfig",
            **_ENCODER_DECODER,
            **_SEQ2SEQ_TOKENS,
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "m2m100": Arch(
        _built(
            "M2M100ForConditionalGeneration",
            "M2M100Config",
            **_ENCODER_DECODER,
            **_SEQ2SEQ_TOKENS,
            encoder_layerdrop=0.0,
            decoder_layerdrop=0.0,
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "led": Arch(
        _built(
            "LEDForConditionalGeneration",
            "LEDConfig",
            **_ENCODER_DECODER,
            max_encoder_position_embeddings=64,
            max_decoder_position_embeddings=64,
            attention_window=[4, 4],
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
        ),
        _seq2seq,
        generates=True,
        encoder_decoder=True,
    ),
    "bart_seqcls": Arch(
        _built(
            "BartForSequenceClassification",
            "BartConfig",
            **_ENCODER_DECODER,
            **_SEQ2SEQ_TOKENS,
            **_CLASSIFIER,
            classifier_dropout=0.0,
        ),
        lambda: (
            {"input_ids": torch.cat([_ids(seq=11), torch.full((2, 1), 2)], 1)},
            {"labels": torch.tensor([0, 2])},
        ),
    ),
    "segformer": Arch(
        _built(
            "SegformerForSemanticSegmentation",
            "SegformerConfig",
            num_channels=3,
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[16, 32],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            decoder_hidden_size=32,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            classifier_dropout_prob=0.0,
            drop_path_rate=0.0,
            num_labels=3,
        ),
        _segmentation,
    ),
    "hubert": Arch(_built("HubertForCTC", "HubertConfig", **_AUDIO), _audio16),
    "wavlm": Arch(
        _built("WavLMForCTC", "WavLMConfig", **_AUDIO, num_buckets=16, max_bucket_distance=32),
        _audio16,
    ),
    "wav2vec2_cls": Arch(
        _built(
            "Wav2Vec2ForSequenceClassification",
            "Wav2Vec2Config",
            **_AUDIO,
            num_labels=3,
            use_weighted_layer_sum=True,
        ),
        _audio_cls,
    ),
    "data2vec_audio": Arch(
        _built("Data2VecAudioForCTC", "Data2VecAudioConfig", **_AUDIO), _audio16
    ),
    "dinov2": Arch(
        _built(
            "Dinov2ForImageClassification",
            "Dinov2Config",
            image_size=32,
            patch_size=8,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            mlp_ratio=2,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            drop_path_rate=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "regnet": Arch(
        _built(
            "RegNetForImageClassification",
            "RegNetConfig",
            num_channels=3,
            embedding_size=16,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            groups_width=8,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "mobilevit": Arch(
        _built(
            "MobileViTForImageClassification",
            "MobileViTConfig",
            image_size=32,
            patch_size=2,
            hidden_sizes=[16, 16, 16],
            neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32],
            num_attention_heads=2,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            classifier_dropout_prob=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "poolformer": Arch(
        _built(
            "PoolFormerForImageClassification",
            "PoolFormerConfig",
            num_channels=3,
            hidden_sizes=[16, 32, 32, 32],
            depths=[1, 1, 1, 1],
            num_encoder_blocks=4,
            drop_path_rate=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "levit": Arch(
        _built(
            "LevitForImageClassification",
            "LevitConfig",
            image_size=32,
            hidden_sizes=[32, 48, 64],
            num_attention_heads=[2, 2, 2],
            depths=[1, 1, 1],
            key_dim=[8, 8, 8],
            drop_path_rate=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "efficientnet": Arch(
        _built(
            "EfficientNetForImageClassification",
            "EfficientNetConfig",
            image_size=32,
            width_coefficient=0.1,
            depth_coefficient=0.1,
            hidden_dim=64,
            dropout_rate=0.0,
            drop_connect_rate=0.0,
            **_CLASSIFIER,
        ),
        _pixels,
    ),
    "siglip": Arch(
        lambda: transformers.SiglipModel(
            transformers.SiglipConfig(
                text_config={**_SMALL, "intermediate_size": 64, "max_position_embeddings": 16},
                vision_config={
                    "image_size": 32,
                    "patch_size": 8,
                    "hidden_size": 32,
                    "intermediate_size": 64,
                    "num_hidden_layers": 2,
                    "num_attention_heads": 4,
                },
            )
        ),
        lambda: (
            {"input_ids": _ids(seq=8), "pixel_values": torch.randn(2, 3, 32, 32)},
            {"return_loss": True},
        ),
    ),
}
