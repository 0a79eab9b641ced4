"""Probe transformers as users run it, compiled with backend="xla", against eager (fp32, CPU):
the ``generate`` options and training heads the earlier probes (scripts/probe_hf*.py,
scripts/probe_generate2.py) do not take.

Tiny random models (scripts/probe_hf.py's zoo: 2 layers, hidden 32, seeded; nothing is
downloaded). Checks, named ``arch/check``:

- ``gen`` / ``gen_static`` (decoders: GPT-2, Llama, Mistral, Qwen2, Gemma, Phi, GPT-NeoX, Falcon,
  OPT, Bloom; encoder-decoders: T5, BART, Whisper): one ``model.forward`` compiled, then a
  series of ``generate`` calls, each against eager's (tokens equal, every returned tensor within
  fp32 tolerance: scores, logits, beam scores and indices): an eos list that stops the rows at
  different steps with ``min_new_tokens``; repetition penalty, no-repeat n-grams, bad words,
  sequence bias, suppressed tokens; beam search with length penalties and early stopping
  (``True`` and ``"never"``) and ``num_return_sequences``; seeded sampling (top-k/top-p/
  temperature, min-p/typical-p/epsilon, beam sampling); exponential length decay, forced eos,
  renormalized logits; encoder repetition penalties; classifier-free guidance; chunked prefill.
  The programs each call adds are printed (``+n``); a graph that adds more than a few per call
  (recompiling per token) is a finding.
- ``count`` / ``count_static``: a left-padded batch generating 24 tokens; programs at most the
  prompt, the first step and one per power of two of the cache's length (static: 2).
- ``hf_compile``: transformers' own compile of the decoding step (``CompileConfig(backend=
  "xla")``, static cache), greedy and seeded sampling.
- ``train`` (decoders, encoder-decoders, and BERT/RoBERTa/DistilBERT/ELECTRA/DeBERTa-v2/ALBERT
  with sequence classification (single label, multi-label, regression), token classification and
  masked LM heads): a padded batch with the model's own loss (labels -100 on padding), dropout
  at 0: the loss, every output, every parameter's gradient and its None-ness; a second step on
  the same shapes builds no program. ``train_eval``: the model's default dropout, in eval
  mode. ``dropout``: dropout 0.1 in train mode with a seed: loss and gradients finite,
  None-ness as eager's (values differ: the random streams are not torch's).

    PYTHONPATH=. python scripts/probe_hfgen24.py [arch ...] [+check ...]
"""

from __future__ import annotations

import copy
import math
import sys
import time
import traceback
import warnings
from collections.abc import Callable

import torch
import transformers

import torch2xla
from scripts.probe_generate2 import _inputs as gen_inputs
from scripts.probe_generate2 import _model as gen_model
from scripts.probe_generate2 import check_hf_compile
from scripts.probe_hf import (
    ARCHS,
    Fallbacks,
    Mismatch,
    Skip,
    check_close,
    double_inputs,
    tensors,
)
from scripts.probe_hf3 import set_dropout
from tests.test_hf_zoo import _ENCODER, VOCAB

DECODERS = [
    "gpt2",
    "llama",
    "mistral",
    "qwen2",
    "gemma",
    "phi",
    "gpt_neox",
    "falcon",
    "opt",
    "bloom",
]
SEQ2SEQ = ["t5", "bart", "whisper"]


# -- running and watching -------------------------------------------------------------------------
def watched(fn, *args, notes: list | None = None, **kwargs):
    """``fn``'s result; a FallbackWarning raises, other torch2xla warnings go to ``notes``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, torch2xla.FallbackWarning):
            raise Fallbacks(str(w.message)[:400])
        if notes is not None and str(w.message).startswith("torch2xla"):
            notes.append(f"{w.category.__name__}: {str(w.message).splitlines()[0][:200]}")
    return out


def _misses(fn) -> dict[str, int]:
    return {g.name: g.misses for g in torch2xla.cache_info(fn)}


def _generate(model, inputs, kw, seed=None):
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(**inputs, **kw)


def _compare(label, got, expected):
    if hasattr(expected, "sequences"):
        if not torch.equal(got.sequences, expected.sequences):
            raise Mismatch(
                f"{label}: tokens {got.sequences.tolist()} vs eager {expected.sequences.tolist()}"
            )
        check_close(label, tensors(got), tensors(expected))
    elif not torch.equal(got, expected):
        raise Mismatch(f"{label}: tokens {got.tolist()} vs eager {expected.tolist()}")


def _eos_pair(model, inputs, cache) -> tuple[list[int], dict]:
    """Two tokens that stop row 0 and row 1 of eager's greedy run at different steps, and the
    keywords that make that run (a random GPT-2 repeats one token: penalize repeats)."""
    for base in ({}, {"repetition_penalty": 3.0}, {"no_repeat_ngram_size": 1}):
        kw = {"max_new_tokens": 8, "disable_compile": True, **cache, **base}
        kw["eos_token_id"] = model.config.vocab_size + 7  # (never drawn)
        new = _generate(model, inputs, kw)[:, -8:].tolist()
        for a in range(1, 4):
            for b in range(a + 2, 7):
                e0, e1 = new[0][a], new[1][b]
                if e0 == e1 or e0 in new[0][:a] + new[1][: b + 1] or e1 in new[1][:b] + new[0][:a]:
                    continue
                return [e0, e1], base
    raise Skip(f"no pair of eos tokens in {new}")


SCORES = {"return_dict_in_generate": True, "output_scores": True, "output_logits": True}
SAMPLE = {"do_sample": True, "top_k": 20, "top_p": 0.9, "temperature": 0.7}


def _variants(eos: list[int], encoder_decoder: bool) -> dict[str, tuple[int | None, dict]]:
    """name -> (seed, generate's keyword arguments)."""
    v = {
        "eos_list": (None, {"max_new_tokens": 8, "eos_token_id": eos, **SCORES}),
        "min_new": (None, {"max_new_tokens": 8, "min_new_tokens": 5, "eos_token_id": eos}),
        "penalties": (
            None,
            {
                "max_new_tokens": 6,
                "repetition_penalty": 1.5,
                "no_repeat_ngram_size": 2,
                "bad_words_ids": [[5], [7, 9]],
                "sequence_bias": {(11,): -2.0, (12, 13): 3.0},
                "suppress_tokens": [4, 6],
                "begin_suppress_tokens": [8],
                **SCORES,
            },
        ),
        "beam": (
            None,
            {
                "num_beams": 3,
                "length_penalty": 0.5,
                "early_stopping": True,
                "num_return_sequences": 2,
                "max_new_tokens": 7,
                "eos_token_id": eos,
                **SCORES,
            },
        ),
        "beam_never": (
            None,
            {
                "num_beams": 3,
                "length_penalty": 2.0,
                "early_stopping": "never",
                "max_new_tokens": 7,
                "eos_token_id": eos,
                **SCORES,
            },
        ),
        "beam_pen": (
            None,
            {
                "num_beams": 3,
                "no_repeat_ngram_size": 2,
                "repetition_penalty": 1.3,
                "min_new_tokens": 3,
                "max_new_tokens": 6,
                "eos_token_id": eos,
            },
        ),
        "sample": (7, {"max_new_tokens": 6, **SAMPLE, **SCORES}),
        "sample_more": (
            7,
            {
                "max_new_tokens": 6,
                "do_sample": True,
                "min_p": 0.02,
                "typical_p": 0.95,
                "epsilon_cutoff": 3e-4,
                "num_return_sequences": 2,
                **SCORES,
            },
        ),
        "beam_sample": (7, {"max_new_tokens": 6, "num_beams": 2, **SAMPLE}),
        "decay": (
            None,
            {
                "max_new_tokens": 7,
                "exponential_decay_length_penalty": (3, 1.5),
                "forced_eos_token_id": eos[0],
                "renormalize_logits": True,
                "eos_token_id": eos,
                **SCORES,
            },
        ),
        "encoder_pen": (
            None,
            {
                "max_new_tokens": 6,
                "encoder_repetition_penalty": 1.5,
                "encoder_no_repeat_ngram_size": 2,
            },
        ),
    }
    if encoder_decoder:
        v["forced_bos"] = (None, {"max_new_tokens": 5, "forced_bos_token_id": 5, **SCORES})
    else:
        v["guidance"] = (None, {"max_new_tokens": 5, "guidance_scale": 1.5, **SCORES})
        v["chunked_prefill"] = (None, {"max_new_tokens": 5, "prefill_chunk_size": 4})
    return v


def check_gen(name, cache=None):
    model = gen_model(name)
    model.config.output_router_logits = False
    inputs = gen_inputs(name)
    extra = {"cache_implementation": cache} if cache else {}
    eos, base = _eos_pair(model, inputs, extra)
    extra.update(base)
    variants = _variants(eos, ARCHS[name].encoder_decoder)
    expected = {}
    for v, (seed, kw) in variants.items():
        kw = {"disable_compile": True, **extra, **kw}
        try:
            expected[v] = _generate(model, inputs, kw, seed)
        except Exception as e:  # noqa: BLE001  (eager refuses: nothing to compare)
            expected[v] = Skip(f"{type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        again = _generate(model, inputs, kw, seed)
        seqs = lambda o: getattr(o, "sequences", o)
        if not torch.equal(seqs(again), seqs(expected[v])):
            expected[v] = Skip("eager not deterministic")
    model.forward = compiled = torch.compile(model.forward, backend="xla")
    done, bad = [], []
    for v, (seed, kw) in variants.items():
        if isinstance(expected[v], Skip):
            done.append(f"{v}:skip({expected[v]})")
            continue
        kw = {"disable_compile": True, **extra, **kw}
        before = _misses(compiled)
        notes: list[str] = []
        try:
            got = watched(_generate, model, inputs, kw, seed, notes=notes)
            _compare(v, got, expected[v])
        except (Mismatch, Fallbacks) as e:
            bad.append(f"{type(e).__name__} {str(e)[:300]}")
            continue
        except Exception as e:  # noqa: BLE001
            bad.append(f"CRASH {v}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            continue
        after = _misses(compiled)
        grown = {g: n - before.get(g, 0) for g, n in after.items() if n - before.get(g, 0)}
        done.append(f"{v}+{sum(grown.values())}")
        if sum(grown.values()) > 6:
            bad.append(f"RECOMPILES {v}: {grown} {notes[:2]}")
        elif notes:
            done.append(f"({notes[0][:120]})")
    if bad:
        raise Mismatch(" | ".join(bad) + "  [ok: " + " ".join(done) + "]")
    return " ".join(done)


def check_count(name, cache=None, new=24):
    model = gen_model(name)
    inputs = gen_inputs(name)
    enc = ARCHS[name].encoder_decoder
    kw = {"max_new_tokens": new, "min_new_tokens": new, "disable_compile": True}
    if cache:
        kw["cache_implementation"] = cache
    expected = _generate(model, inputs, kw)
    model.forward = compiled = torch.compile(model.forward, backend="xla")
    notes: list[str] = []
    got = watched(_generate, model, inputs, kw, notes=notes)
    _compare("tokens", got, expected)
    length = 1 if enc else inputs["input_ids"].shape[1]
    bound = 2 + math.ceil(math.log2(length + new)) - math.ceil(math.log2(length + 1)) + 1
    if cache == "static":
        bound = 2
    bound += int(enc)  # (the encoder)
    misses = _misses(compiled)
    if sum(misses.values()) > bound:
        raise Mismatch(
            f"{sum(misses.values())} programs > {bound}: {misses} {notes[:2]}\n"
            f"{torch2xla.cache_info(compiled)}"
        )
    return f"{sum(misses.values())} programs (bound {bound}) {notes[:1]}"


# -- training ---------------------------------------------------------------------------------------
def _padded_batch(vocab=VOCAB, left=True, batch=2, length=10, pad=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (batch, length), generator=g)
    mask = torch.ones_like(ids)
    cols = slice(0, pad) if left else slice(-pad, None)
    mask[0 if left else 1, cols] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _lm_inputs(name):
    arch = ARCHS[name]
    if name == "whisper":
        inputs, _ = arch.inputs()
        labels = torch.randint(3, VOCAB, (2, 6), generator=torch.Generator().manual_seed(2))
        labels[1, -2:] = -100
        return inputs, {"labels": labels}
    if arch.encoder_decoder:
        inputs = _padded_batch(left=False)
        labels = torch.randint(3, VOCAB, (2, 7), generator=torch.Generator().manual_seed(2))
        labels[1, -2:] = -100
        return inputs, {"labels": labels}
    inputs = _padded_batch()
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    return inputs, {"labels": labels, "use_cache": False}


_HEAD_BODIES = {  # family -> (class prefix, config keywords, dropout keywords)
    "bert": ("Bert", _ENCODER, ("hidden_dropout_prob", "attention_probs_dropout_prob")),
    "roberta": (
        "Roberta",
        {**_ENCODER, "pad_token_id": 1},
        ("hidden_dropout_prob", "attention_probs_dropout_prob"),
    ),
    "distilbert": (
        "DistilBert",
        {
            "vocab_size": VOCAB,
            "dim": 32,
            "n_layers": 2,
            "n_heads": 4,
            "hidden_dim": 64,
            "max_position_embeddings": 64,
        },
        ("dropout", "attention_dropout", "seq_classif_dropout", "qa_dropout"),
    ),
    "electra": (
        "Electra",
        {**_ENCODER, "embedding_size": 16},
        ("hidden_dropout_prob", "attention_probs_dropout_prob"),
    ),
    "deberta_v2": (
        "DebertaV2",
        {
            **_ENCODER,
            "relative_attention": True,
            "position_buckets": 8,
            "max_relative_positions": 16,
            "pos_att_type": ["p2c", "c2p"],
        },
        ("hidden_dropout_prob", "attention_probs_dropout_prob", "pooler_dropout"),
    ),
    "albert": (
        "Albert",
        {**_ENCODER, "embedding_size": 16},
        ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"),
    ),
}
_HEADS = {  # head -> (class suffix, config keywords, labels of a (2, 10) batch)
    "seqcls": (
        "ForSequenceClassification",
        {"num_labels": 3, "problem_type": "single_label_classification"},
        lambda: torch.tensor([0, 2]),
    ),
    "multilabel": (
        "ForSequenceClassification",
        {"num_labels": 3, "problem_type": "multi_label_classification"},
        lambda: torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
    ),
    "regression": (
        "ForSequenceClassification",
        {"num_labels": 1, "problem_type": "regression"},
        lambda: torch.tensor([0.5, -1.5]),
    ),
    "tokcls": (
        "ForTokenClassification",
        {"num_labels": 5},
        lambda: torch.tensor([[-100, 1, 2, 3, 4, 0, 1, 2, 3, 4]] * 2),
    ),
    "mlm": ("ForMaskedLM", {}, None),
}


def _head_model(family, head, dropout: float | None):
    prefix, config_kw, drop_keys = _HEAD_BODIES[family]
    suffix, head_kw, _ = _HEADS[head]
    kw = {**config_kw, **head_kw}
    if dropout is None:  # the config's defaults
        kw = {k: v for k, v in kw.items() if k not in drop_keys}
    else:
        kw.update({k: dropout for k in drop_keys})
    config = getattr(transformers, f"{prefix}Config")(**kw)
    torch.manual_seed(0)
    return getattr(transformers, f"{prefix}{suffix}")(config)


def _head_inputs(family, head):
    inputs = _padded_batch(left=False)
    if family == "roberta":  # (the pad id 1: positions count from it)
        inputs["input_ids"][1, -3:] = 1
    labels = _HEADS[head][2]
    if labels is None:  # masked LM: every other token, padding ignored
        labels = inputs["input_ids"].clone()
        labels[:, ::2] = -100
        labels[1, -3:] = -100
    else:
        labels = labels()
        if head == "tokcls":
            labels[1, -3:] = -100
    return inputs, {"labels": labels}


def _loss(out):
    return out.loss if getattr(out, "loss", None) is not None else out[0]


def train_check(model, inputs, kw, dropout=False):
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla")
    if dropout:
        torch.manual_seed(5)
    expected = ref(**inputs, **kw)
    if dropout:
        torch.manual_seed(5)
    got = watched(compiled, **inputs, **kw)
    g, e = tensors(got), tensors(expected)
    if [(t.dtype, t.shape, t.requires_grad) for t in g] != [
        (t.dtype, t.shape, t.requires_grad) for t in e
    ]:
        raise Mismatch(
            f"outputs {[(t.dtype, tuple(t.shape)) for t in g]} vs "
            f"{[(t.dtype, tuple(t.shape)) for t in e]}"
        )
    if not dropout:

        def exact_out():
            m = copy.deepcopy(ref).double()
            return tensors(m(**double_inputs(inputs), **double_inputs(kw)))

        check_close("out", g, e, exact_out)
    elif not math.isfinite(_loss(got).item()):
        raise Mismatch(f"loss {_loss(got).item()} (eager {_loss(expected).item()})")
    watched(_loss(got).backward)
    _loss(expected).backward()
    names = [n for n, _ in model.named_parameters()]
    grads = [p.grad for p in model.parameters()]
    ref_grads = [p.grad for p in ref.parameters()]
    for n, a, b in zip(names, grads, ref_grads):
        if (a is None) != (b is None):
            raise Mismatch(f"{n}: grad None {a is None}, eager {b is None}")
        if dropout and a is not None and not torch.isfinite(a).all():
            raise Mismatch(f"{n}: grad not finite")
    if not dropout:

        def exact_grads():
            m = copy.deepcopy(ref).double()
            m.zero_grad()
            _loss(m(**double_inputs(inputs), **double_inputs(kw))).backward()
            return [p.grad for p in m.parameters()]

        try:
            check_close("grad", grads, ref_grads, exact_grads)
        except Mismatch as e:
            i = int(str(e).split("[", 1)[1].split("]", 1)[0])
            raise Mismatch(f"{names[i]}: {e}") from None
    before = _misses(compiled)
    model.zero_grad()
    _loss(watched(compiled, **inputs, **kw)).backward()
    if _misses(compiled) != before:
        raise Mismatch(f"second step recompiled: {before} -> {_misses(compiled)}")
    return f"{sum(before.values())} programs"


def check_train_lm(name, mode):
    torch.manual_seed(0)
    model = ARCHS[name].build()
    model.config.output_router_logits = False
    inputs, kw = _lm_inputs(name)
    if mode == "dropout":
        if not set_dropout(model, 0.1):
            raise Skip("no dropout")
        return train_check(model.train(), inputs, kw, dropout=True)
    if mode == "eval":
        set_dropout(model, 0.1)
        return train_check(model.eval(), inputs, kw)
    return train_check(model.train(), inputs, kw)


def check_train_head(family, head, mode):
    model = _head_model(family, head, {"train": 0.0, "eval": None, "dropout": 0.1}[mode])
    inputs, kw = _head_inputs(family, head)
    model.train(mode != "eval")
    return train_check(model, inputs, kw, dropout=mode == "dropout")


# -- the checks -----------------------------------------------------------------------------------
CHECKS: dict[str, Callable[[], str | None]] = {}
for _n in DECODERS + SEQ2SEQ:
    CHECKS[f"{_n}/gen"] = lambda n=_n: check_gen(n)
    CHECKS[f"{_n}/gen_static"] = lambda n=_n: check_gen(n, "static")
    CHECKS[f"{_n}/count"] = lambda n=_n: check_count(n)
    CHECKS[f"{_n}/count_static"] = lambda n=_n: check_count(n, "static")
    CHECKS[f"{_n}/hf_compile"] = lambda n=_n: check_hf_compile(n)
    CHECKS[f"{_n}/hf_compile_sample"] = lambda n=_n: check_hf_compile(n, seed=7, **SAMPLE)
    for _m in ("train", "eval", "dropout"):
        CHECKS[f"{_n}/{_m if _m == 'train' else 'train_' + _m}"] = lambda n=_n, m=_m: (
            check_train_lm(n, m)
        )
for _f in _HEAD_BODIES:
    for _h in _HEADS:
        for _m in ("train", "eval", "dropout"):
            CHECKS[f"{_f}_{_h}/{_m if _m == 'train' else 'train_' + _m}"] = (
                lambda f=_f, h=_h, m=_m: check_train_head(f, h, m)
            )


def main(argv):
    # Every variant of ``gen`` calls the one compiled forward with other arguments: more than
    # Dynamo's 8 traces of a frame (its own guards, any backend), after which the frame runs
    # in eager.
    torch._dynamo.config.recompile_limit = 64
    wanted = [w for w in argv[1:] if not w.startswith("+")]
    kinds = [w[1:] for w in argv[1:] if w.startswith("+")]
    for label, fn in CHECKS.items():
        name, kind = label.split("/")
        if (wanted and name not in wanted) or (kinds and kind not in kinds):
            continue
        torch._dynamo.reset()
        t0 = time.time()
        try:
            detail = fn() or ""
            line = "ok      "
        except Skip as e:
            line, detail = "skip    ", str(e)
        except Mismatch as e:
            line, detail = "DIFF    ", str(e)[:1500]
        except Fallbacks as e:
            line, detail = "FALLBACK", str(e)
        except Exception as e:  # noqa: BLE001  (a crash is a finding)
            tb = traceback.extract_tb(e.__traceback__)
            where = next(
                (f"{f.filename}:{f.lineno}" for f in reversed(tb) if "torch2xla" in f.filename), ""
            )
            msg = str(e).splitlines()[0][:300] if str(e) else ""
            line, detail = "CRASH   ", f"{type(e).__name__}: {msg} {where}"
        print(f"{line} {label}  ({time.time() - t0:.1f}s) {detail}", flush=True)


if __name__ == "__main__":
    main(sys.argv)
