"""Probe HF ``generate`` the ways users run it, with the forward compiled by backend="xla", against
eager: the paths scripts/probe_hf.py, scripts/probe_hf2.py and tests/test_generate*.py do not take.

Same harness and tiny random models as scripts/probe_hf.py (its comparison, skips and
FallbackWarning watch). Per architecture (decoder-only GPT-2, Llama, Mistral, Qwen2, Gemma, Phi;
encoder-decoder T5, BART, Whisper): beam search and seeded sampling (top-k, top-p, temperature,
repetition penalty) with the static cache and the default dynamic one, scores and logits
returned, a long generation across the dynamic cache's buckets (programs counted), a row that
stops on its eos while the other goes on, generating twice with prompts of other lengths (the
compiled forward and the static cache reused), ``model.compile(backend="xla")`` and
``torch.compile(model, backend="xla")`` before ``generate``, and transformers' own compile path
(``generation_config.compile_config``) with beams and sampling.

    PYTHONPATH=. python scripts/probe_generate2.py [arch ...] [+check ...]
"""

from __future__ import annotations

import math
import sys
import time
import traceback
from collections.abc import Callable

import torch
import transformers

import torch2xla
from scripts.probe_hf import ARCHS, Fallbacks, Mismatch, Skip, build, check_close, tensors, watched

DECODERS = [
    "gpt2",
    "llama",
    "mistral",
    "qwen2",
    "gemma",
    "phi",
    "gemma2",
    "gemma3",
    "qwen3",
    "phi3",
]
SEQ2SEQ = ["t5", "bart", "whisper"]
_SAMPLE = {"do_sample": True, "top_k": 20, "top_p": 0.9, "temperature": 0.7}


def _inputs(name, batch=2, length=9, pad=3, seed=1):
    """A left-padded batch for a decoder (row 0 padded), a right-padded one for an encoder
    (row 1); Whisper's features as its zoo entry makes them."""
    arch = ARCHS[name]
    torch.manual_seed(seed)
    if name == "whisper":
        inputs, _ = arch.inputs()
        return {k: v[:batch] for k, v in inputs.items()}
    vocab = build(name).config.vocab_size
    torch.manual_seed(seed)
    ids = torch.randint(3, min(vocab, 256), (batch, length))
    mask = torch.ones_like(ids)
    if pad:
        row, cols = (1, slice(-pad, None)) if arch.encoder_decoder else (0, slice(0, pad))
        mask[row, cols] = 0
        ids[row, cols] = 0 if not arch.encoder_decoder else 1
    return {"input_ids": ids, "attention_mask": mask}


def _model(name):
    model = build(name).eval()
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = getattr(model.config, "pad_token_id", None) or 0
    return model


def _run(model, inputs, seed, kw):
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        return model.generate(**inputs, **kw)


def _compare(got, expected, scores):
    if scores:
        if not torch.equal(got.sequences, expected.sequences):
            raise Mismatch(
                f"tokens {got.sequences.tolist()} vs eager {expected.sequences.tolist()}"
            )
        check_close("outputs", tensors(got), tensors(expected))
    elif not torch.equal(got, expected):
        raise Mismatch(f"tokens {got.tolist()} vs eager {expected.tolist()}")


def _programs(model) -> int:
    return torch2xla.cache_info(model.forward).misses


def check(name, new=6, seed=None, scores=False, how="forward", bound=None, **kw):
    """``generate`` eager, then with the forward compiled ``how``; tokens (and scores) equal,
    programs at most ``bound``."""
    if name not in ARCHS:
        raise Skip("no such arch")
    model = _model(name)
    inputs = _inputs(name)
    kw = {"max_new_tokens": new, "min_new_tokens": new, "disable_compile": True, **kw}
    if scores:
        kw.update(return_dict_in_generate=True, output_scores=True, output_logits=True)
    try:
        expected = _run(model, inputs, seed, kw)
    except Exception as e:  # noqa: BLE001  (eager refuses: nothing to compare)
        raise Skip(f"eager raises {type(e).__name__}: {str(e)[:150]}") from None
    if seed is not None:
        again = _run(model, inputs, seed, kw)
        seq = (lambda o: o.sequences) if scores else (lambda o: o)
        if not torch.equal(seq(again), seq(expected)):
            raise Skip("eager sampling is not deterministic")
    if how == "forward":
        model.forward = torch.compile(model.forward, backend="xla")
        gen = model
    elif how == "module.compile":
        model.compile(backend="xla")
        gen = model
    elif how == "torch.compile(model)":
        gen = torch.compile(model, backend="xla")
    got = watched(_run, gen, inputs, seed, kw)
    _compare(got, expected, scores)
    if how != "forward":
        return ""
    if bound is not None and _programs(model) > bound:
        raise Mismatch(
            f"{_programs(model)} programs > {bound}\n{torch2xla.cache_info(model.forward)}"
        )
    return f"{_programs(model)} programs"


def check_long(name, cache=None):
    """A generation long enough to cross several of the dynamic cache's buckets."""
    new = 40
    length = 1 if ARCHS[name].encoder_decoder else 9  # (the decoder's prompt: its start token)
    kw = {"cache_implementation": cache} if cache else {}
    # the prompt, the first step, one program per power of two of the cache's length
    bound = 2 + math.ceil(math.log2(length + new)) - math.ceil(math.log2(length + 1)) + 1
    if cache == "static":
        bound = 2
    if ARCHS[name].encoder_decoder:
        bound += 1  # (the encoder)
    return check(name, new=new, bound=bound, **kw)


def check_eos_row(name, cache=None):
    """Row 0 draws its eos in the middle; the other row goes on, row 0 padded."""
    model = _model(name)
    inputs = _inputs(name)
    kw = {"max_new_tokens": 8, "disable_compile": True}
    if cache:
        kw["cache_implementation"] = cache
    # (a random GPT-2 repeats one token: penalize repeats; BART and Whisper repeat it through
    # a penalty too: forbid repeats)
    for extra in ({}, {"repetition_penalty": 3.0}, {"no_repeat_ngram_size": 1}):
        kw.pop("repetition_penalty", None)
        kw.update(extra)
        with torch.no_grad():
            first = model.generate(**inputs, **kw)
        start = first.shape[1] - 8
        row0, row1 = first[0, start:].tolist(), first[1, start:].tolist()
        eos = next((t for i, t in enumerate(row0[1:6], 1) if t not in row1 + row0[:i]), None)
        if eos is not None:
            break
    else:
        raise Skip("no token of row 0 fits as an eos")
    kw["eos_token_id"] = eos
    with torch.no_grad():
        expected = model.generate(**inputs, **kw)
    if expected.shape[1] != first.shape[1]:
        raise Skip("both rows stopped")
    model.forward = torch.compile(model.forward, backend="xla")
    got = watched(_run, model, inputs, None, kw)
    _compare(got, expected, False)
    return f"eos {eos}, {_programs(model)} programs"


def check_twice(name, cache=None):
    """Two generations with prompts of other lengths (and batch sizes), the compiled forward
    (and a static cache) reused; programs bounded."""
    model = _model(name)
    kw = {"max_new_tokens": 7, "min_new_tokens": 7, "disable_compile": True}
    if cache:
        kw["cache_implementation"] = cache
    prompts = [_inputs(name, 2, 9), _inputs(name, 2, 5, pad=2, seed=3), _inputs(name, 1, 13, 0)]
    expected = [_run(model, p, None, kw) for p in prompts]
    model.forward = torch.compile(model.forward, backend="xla")
    for p, e in zip(prompts, expected):
        _compare(watched(_run, model, p, None, kw), e, False)
    n = _programs(model)
    if n > 12:
        raise Mismatch(f"{n} programs\n{torch2xla.cache_info(model.forward)}")
    return f"{n} programs"


def check_hf_compile(name, seed=None, **kw):
    """transformers compiles the decoding step itself (static cache), naming our backend."""
    if not hasattr(transformers, "CompileConfig"):
        raise Skip("no CompileConfig")
    model = _model(name)
    inputs = _inputs(name)
    kw = {"max_new_tokens": 6, "min_new_tokens": 6, "cache_implementation": "static", **kw}
    expected = _run(model, inputs, seed, {**kw, "disable_compile": True})
    config = transformers.CompileConfig(backend="xla")
    config._compile_all_devices = True
    model.generation_config.compile_config = config
    got = watched(_run, model, inputs, seed, kw)
    compiled = getattr(model, "_compiled_call", None)
    if compiled is None or not torch2xla.cache_info(compiled):
        raise Mismatch("transformers did not compile the forward with torch2xla")
    _compare(got, expected, False)


def check_continue(name, cache=None):
    """A second ``generate`` that goes on from the first's cache (``past_key_values``) and
    sequences, as a chat continues."""
    model = _model(name)
    inputs = _inputs(name)
    kw = {"max_new_tokens": 5, "min_new_tokens": 5, "disable_compile": True}
    kw.update(return_dict_in_generate=True, **({"cache_implementation": cache} if cache else {}))

    def both():
        with torch.no_grad():
            first = model.generate(**inputs, **kw)
            ids = torch.cat([first.sequences, inputs["input_ids"][:, :3] + 1], 1)
            mask = torch.cat(
                [
                    inputs["attention_mask"],
                    torch.ones_like(ids[:, inputs["attention_mask"].shape[1] :]),
                ],
                1,
            )
            more = {k: v for k, v in kw.items() if k != "cache_implementation"}
            second = model.generate(
                input_ids=ids, attention_mask=mask, past_key_values=first.past_key_values, **more
            )
        return first.sequences, second.sequences

    if ARCHS[name].encoder_decoder:
        raise Skip("encoder-decoder")
    try:
        expected = both()
    except Exception as e:  # noqa: BLE001
        raise Skip(f"eager raises {type(e).__name__}: {str(e)[:150]}") from None
    model.forward = torch.compile(model.forward, backend="xla")
    got = watched(both)
    for g, e in zip(got, expected):
        _compare(g, e, False)
    return f"{_programs(model)} programs"


def check_compile_kw(name, cache=None, new=12, **compile_kw):
    """The forward compiled with other ``torch.compile`` arguments (dynamic, mode)."""
    model = _model(name)
    inputs = _inputs(name)
    kw = {"max_new_tokens": new, "min_new_tokens": new, "disable_compile": True}
    if cache:
        kw["cache_implementation"] = cache
    expected = _run(model, inputs, None, kw)
    model.forward = torch.compile(model.forward, backend="xla", **compile_kw)
    _compare(watched(_run, model, inputs, None, kw), expected, False)
    return f"{_programs(model)} programs"


def check_compile_generate(name):
    """``torch.compile(model.generate)``: Dynamo traces the loop itself (graph breaks)."""
    model = _model(name)
    inputs = _inputs(name)
    kw = {"max_new_tokens": 4, "min_new_tokens": 4, "disable_compile": True}
    expected = _run(model, inputs, None, kw)
    gen = torch.compile(model.generate, backend="xla")
    with torch.no_grad():
        got = watched(gen, **inputs, **kw)
    _compare(got, expected, False)


def check_assisted(name):
    """Prompt lookup decoding (batch 1): candidates of varying length verified per step."""
    model = _model(name)
    inputs = {k: v[1:] for k, v in _inputs(name).items()}
    inputs["input_ids"] = torch.cat([inputs["input_ids"]] * 2, 1)
    inputs["attention_mask"] = torch.cat([inputs["attention_mask"]] * 2, 1)
    return check_inputs(name, model, inputs, prompt_lookup_num_tokens=3, new=10)


def check_inputs(name, model, inputs, new=6, **kw):
    kw = {"max_new_tokens": new, "min_new_tokens": new, "disable_compile": True, **kw}
    try:
        expected = _run(model, inputs, None, kw)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"eager raises {type(e).__name__}: {str(e)[:150]}") from None
    model.forward = torch.compile(model.forward, backend="xla")
    _compare(watched(_run, model, inputs, None, kw), expected, False)
    return f"{_programs(model)} programs"


def check_outputs_static(name):
    """Attentions, hidden states, scores with the static cache (eager attention)."""
    model = _model(name)
    try:
        model.set_attn_implementation("eager")
    except Exception as e:  # noqa: BLE001
        raise Skip(f"no eager attention: {str(e)[:100]}") from None
    kw = {
        "return_dict_in_generate": True,
        "output_scores": True,
        "output_attentions": True,
        "output_hidden_states": True,
        "cache_implementation": "static",
        "max_new_tokens": 4,
        "min_new_tokens": 4,
        "disable_compile": True,
    }
    inputs = _inputs(name)
    expected = _run(model, inputs, None, kw)
    model.forward = torch.compile(model.forward, backend="xla")
    _compare(watched(_run, model, inputs, None, kw), expected, True)
    return f"{_programs(model)} programs"


def _manual_loop(model, inputs, step, new):
    """transformers' docs' loop: a user's StaticCache, the prompt by ``model``, each token by
    ``step`` (compiled or not) at its cache position; greedy."""
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    batch, length = ids.shape
    cache = transformers.StaticCache(config=model.config, max_cache_len=length + new)
    pos = torch.arange(length)
    with torch.no_grad():
        logits = model(ids, attention_mask=mask, cache_position=pos, past_key_values=cache).logits
        token = logits[:, -1:].argmax(-1)
        out = [token]
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)[:, -1:]
        for i in range(new - 1):
            mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype)], 1)
            position_ids = position_ids + 1
            logits = step(token, mask, position_ids, torch.tensor([length + i]), cache)
            token = logits[:, -1:].argmax(-1)
            out.append(token)
    return torch.cat(out, 1)


def check_manual_static(name, **compile_kw):
    """A compiled decoding step over a user's StaticCache (the docs' recipe)."""
    if ARCHS[name].encoder_decoder:
        raise Skip("encoder-decoder")
    model = _model(name)
    inputs = _inputs(name)

    def step(token, mask, position_ids, cache_position, cache):
        return model(
            token,
            attention_mask=mask,
            position_ids=position_ids,
            cache_position=cache_position,
            past_key_values=cache,
            return_dict=False,
            use_cache=True,
        )[0]

    try:
        expected = _manual_loop(model, inputs, step, 12)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"eager raises {type(e).__name__}: {str(e)[:150]}") from None
    compiled = torch.compile(step, backend="xla", **compile_kw)
    got = watched(_manual_loop, model, inputs, compiled, 12)
    _compare(got, expected, False)
    return f"{torch2xla.cache_info(compiled).misses} programs"


def check_explicit_cache(name, kind):
    """A cache object the user makes and passes as ``past_key_values``."""
    if ARCHS[name].encoder_decoder:
        raise Skip("encoder-decoder")
    model = _model(name)
    inputs = _inputs(name)

    def make():
        if kind == "static":
            return transformers.StaticCache(config=model.config, max_cache_len=32)
        return transformers.DynamicCache(config=model.config)

    kw = {"max_new_tokens": 6, "min_new_tokens": 6, "disable_compile": True}
    with torch.no_grad():
        expected = model.generate(**inputs, past_key_values=make(), **kw)
    model.forward = torch.compile(model.forward, backend="xla")
    with torch.no_grad():
        got = watched(model.generate, **inputs, past_key_values=make(), **kw)
    _compare(got, expected, False)
    return f"{_programs(model)} programs"


EXTRA: dict[str, Callable[[str], str | None]] = {
    "continue": check_continue,
    "continue_static": lambda n: check_continue(n, "static"),
    "dynamic_true": lambda n: check_compile_kw(n, dynamic=True),
    "dynamic_false": lambda n: check_compile_kw(n, dynamic=False),
    "reduce_overhead": lambda n: check_compile_kw(n, mode="reduce-overhead"),
    "reduce_overhead_static": lambda n: check_compile_kw(n, "static", mode="reduce-overhead"),
    "fullgraph_static": lambda n: check_compile_kw(n, "static", fullgraph=True),
    "compile_generate": check_compile_generate,
    "assisted": check_assisted,
    "outputs_static": check_outputs_static,
    "manual_static": check_manual_static,
    "manual_static_ro": lambda n: check_manual_static(n, mode="reduce-overhead", fullgraph=True),
    "explicit_static": lambda n: check_explicit_cache(n, "static"),
    "explicit_dynamic": lambda n: check_explicit_cache(n, "dynamic"),
}

CHECKS: dict[str, Callable[[], None]] = {}
for _n in DECODERS + SEQ2SEQ:
    for _cache in (None, "static"):
        _c = {"cache_implementation": _cache} if _cache else {}
        _s = "_static" if _cache else ""
        CHECKS[f"{_n}/beam{_s}"] = lambda n=_n, c=_c: check(n, num_beams=3, **c)
        CHECKS[f"{_n}/beam_ret{_s}"] = lambda n=_n, c=_c: check(
            n, num_beams=3, num_return_sequences=2, scores=True, **c
        )
        CHECKS[f"{_n}/sample{_s}"] = lambda n=_n, c=_c: check(n, seed=7, **_SAMPLE, **c)
        CHECKS[f"{_n}/sample_pen{_s}"] = lambda n=_n, c=_c: check(
            n, seed=7, repetition_penalty=1.3, no_repeat_ngram_size=2, **_SAMPLE, **c
        )
        CHECKS[f"{_n}/beam_sample{_s}"] = lambda n=_n, c=_c: check(
            n, seed=7, num_beams=2, **_SAMPLE, **c
        )
        CHECKS[f"{_n}/scores{_s}"] = lambda n=_n, c=_c: check(
            n, scores=True, repetition_penalty=1.2, **c
        )
        CHECKS[f"{_n}/long{_s}"] = lambda n=_n, c=_cache: check_long(n, c)
        CHECKS[f"{_n}/eos_row{_s}"] = lambda n=_n, c=_cache: check_eos_row(n, c)
        CHECKS[f"{_n}/twice{_s}"] = lambda n=_n, c=_cache: check_twice(n, c)
    CHECKS[f"{_n}/module_compile"] = lambda n=_n: check(n, how="module.compile")
    CHECKS[f"{_n}/torch_compile_model"] = lambda n=_n: check(n, how="torch.compile(model)")
    for _k, _f in EXTRA.items():
        CHECKS[f"{_n}/{_k}"] = lambda n=_n, f=_f: f(n)
    # (transformers compiles greedy and sampling steps, not beam search's)
    CHECKS[f"{_n}/hf_compile_sample"] = lambda n=_n: check_hf_compile(n, seed=7, **_SAMPLE)


def main(argv):
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
            line, detail = "DIFF    ", str(e)[:600]
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
