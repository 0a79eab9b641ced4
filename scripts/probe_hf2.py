"""Probe transformers paths scripts/probe_hf.py does not take, compiled with backend="xla",
against eager: the way users call models besides ``model(**batch)``.

Same harness and tiny random models as scripts/probe_hf.py (its comparison, its skips, its
FallbackWarning watch). The checks: encoder-decoder ``generate`` on a padded batch (greedy, beam,
sampling), decoder-only ``generate`` on a left-padded batch with beams or several sampled
sequences, from ``inputs_embeds``, without the cache, with attentions and hidden states
returned; forwards with ``return_dict=False``, ``use_cache=True`` (the cache compared),
``inputs_embeds`` (and the gradient reaching them), explicit position and token type ids;
training steps whose labels pad with -100 where the mask is 0, and gradient checkpointing with
either ``use_reentrant``.

    PYTHONPATH=. python scripts/probe_hf2.py [substring ...] [+check ...]
"""

from __future__ import annotations

import copy
import sys
import time
import traceback
from collections.abc import Callable

import torch
import transformers

import torch2xla
from scripts.probe_hf import (
    ARCHS,
    Fallbacks,
    Mismatch,
    Skip,
    _gen_kw,
    build,
    check_close,
    double_inputs,
    eager,
    make_inputs,
    tensors,
    watched,
)


def _compiled(model):
    return torch.compile(model, backend="xla")


def _forward_kw(name):
    arch = ARCHS[name]
    kw = {}
    if arch.encoder_decoder:
        torch.manual_seed(2)
        kw["decoder_input_ids"] = torch.randint(3, 256, (2, 5))
    return kw


def _eval_compare(name, model, inputs, kw):
    with torch.no_grad():
        expected = eager(model, **inputs, **kw)
        got = watched(_compiled(model), **inputs, **kw)

        def exact():
            return tensors(
                copy.deepcopy(model).double()(**double_inputs(inputs), **double_inputs(kw))
            )

        check_close("out", tensors(got), tensors(expected), exact)
    return got, expected


# -- forwards -----------------------------------------------------------------------------------
def check_tuple(name):
    """return_dict=False: the tuple (loss first) and a backward through it."""
    model = build(name).train()
    ref = copy.deepcopy(model)
    inputs, labels = make_inputs(name)
    kw = {**_forward_kw(name), **labels, "return_dict": False}
    if ARCHS[name].generates:
        kw["use_cache"] = False
    if ARCHS[name].encoder_decoder and "labels" in labels:
        kw.pop("decoder_input_ids")
    expected = eager(ref, **inputs, **kw)
    got = watched(_compiled(model), **inputs, **kw)
    if type(got) is not type(expected) or len(got) != len(expected):
        raise Mismatch(f"{type(got).__name__}[{len(got)}] vs {type(expected).__name__}")
    check_close("tuple", tensors(got), tensors(expected))
    watched(got[0].backward)
    expected[0].backward()
    check_close("grad", [p.grad for p in model.parameters()], [p.grad for p in ref.parameters()])


def check_use_cache(name):
    """An eval forward that returns the key/value cache."""
    if not ARCHS[name].generates:
        raise Skip("no cache")
    model = build(name).eval()
    inputs, _ = make_inputs(name)
    _eval_compare(name, model, inputs, {**_forward_kw(name), "use_cache": True})


def check_embeds(name):
    """inputs_embeds (and decoder_inputs_embeds) instead of ids; the gradient reaching them."""
    model = build(name).train()
    inputs, labels = make_inputs(name)
    if "input_ids" not in inputs:
        raise Skip("no input ids")
    emb = model.get_input_embeddings()
    kw = {**_forward_kw(name), **labels}
    if ARCHS[name].generates:
        kw["use_cache"] = False
    with torch.no_grad():
        embeds = emb(inputs.pop("input_ids")).clone()
        if "decoder_input_ids" in kw and "labels" not in labels:
            kw["decoder_inputs_embeds"] = emb(kw.pop("decoder_input_ids")).clone()
        elif "decoder_input_ids" in kw:
            kw.pop("decoder_input_ids")
    ref = copy.deepcopy(model)
    e1 = embeds.clone().requires_grad_()
    e2 = embeds.clone().requires_grad_()
    expected = eager(ref, inputs_embeds=e2, **inputs, **kw)
    got = watched(_compiled(model), inputs_embeds=e1, **inputs, **kw)
    check_close("out", tensors(got), tensors(expected))
    loss_g = got.loss if getattr(got, "loss", None) is not None else tensors(got)[0].sum()
    loss_e = (
        expected.loss if getattr(expected, "loss", None) is not None else tensors(expected)[0].sum()
    )
    watched(loss_g.backward)
    loss_e.backward()
    check_close("embeds grad", [e1.grad], [e2.grad])
    check_close("grad", [p.grad for p in model.parameters()], [p.grad for p in ref.parameters()])


def check_positions(name):
    """Explicit position ids (and token type ids of zeros where the model takes them)."""
    model = build(name).eval()
    inputs, _ = make_inputs(name)
    if "input_ids" not in inputs:
        raise Skip("no input ids")
    ids = inputs["input_ids"]
    kw = {**_forward_kw(name)}
    if ARCHS[name].generates:
        kw["use_cache"] = False
    kw["position_ids"] = torch.arange(ids.shape[1]).expand_as(ids).clone() + 1
    import inspect

    params = inspect.signature(model.forward).parameters
    if "position_ids" not in params:
        raise Skip("no position ids")
    if "token_type_ids" in params and "token_type_ids" not in inputs:
        kw["token_type_ids"] = torch.zeros_like(ids)
    _eval_compare(name, model, inputs, kw)


def _train_step(name, model, inputs, kw):
    ref = copy.deepcopy(model)
    expected = eager(ref, **inputs, **kw)
    got = watched(_compiled(model), **inputs, **kw)
    check_close("train out", tensors(got), tensors(expected))
    watched(got.loss.backward)
    expected.loss.backward()
    names = [n for n, _ in model.named_parameters()]
    try:
        check_close(
            "grad", [p.grad for p in model.parameters()], [p.grad for p in ref.parameters()]
        )
    except Mismatch as e:
        i = int(str(e).split("[", 1)[1].split("]", 1)[0])
        raise Mismatch(f"{names[i]}: {e}") from None


def check_padded_labels(name):
    """A causal LM's training step on a left-padded batch, the padding's labels -100."""
    if not ARCHS[name].generates or ARCHS[name].encoder_decoder:
        raise Skip("not a causal LM")
    model = build(name).train()
    inputs, _ = make_inputs(name)
    if "attention_mask" not in inputs:
        raise Skip("no mask")
    mask = torch.ones_like(inputs["attention_mask"])
    mask[0, :4] = 0
    ids = inputs["input_ids"].masked_fill(mask == 0, 0)
    labels = ids.masked_fill(mask == 0, -100)
    _train_step(
        name,
        model,
        {"input_ids": ids, "attention_mask": mask},
        {"labels": labels, "use_cache": False},
    )


def check_checkpointing(name, reentrant):
    model = build(name).train()
    if not model.supports_gradient_checkpointing:
        raise Skip("no gradient checkpointing")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    inputs, labels = make_inputs(name)
    kw = {**_forward_kw(name), **labels}
    if ARCHS[name].generates:
        kw["use_cache"] = False
    if ARCHS[name].encoder_decoder and "labels" in labels:
        kw.pop("decoder_input_ids")
    if reentrant:  # (the reentrant checkpoint gives no gradient unless an input needs one)
        model.enable_input_require_grads()
    _train_step(name, model, inputs, kw)


# -- generate -----------------------------------------------------------------------------------
def _gen_inputs(name, pad):
    inputs, _ = make_inputs(name)
    inputs = {k: v.clone() for k, v in inputs.items()}
    if "attention_mask" in inputs:
        mask = torch.ones_like(inputs["attention_mask"])
        if pad == "left":
            mask[0, :3] = 0
            inputs["input_ids"][0, :3] = 0
        elif pad == "right":
            mask[1, -3:] = 0
            inputs["input_ids"][1, -3:] = 0
        inputs["attention_mask"] = mask
    return inputs


def check_gen(name, pad=None, seed=None, embeds=False, outputs=False, hf_compile=None, **kw):
    arch = ARCHS[name]
    if not arch.generates:
        raise Skip("does not generate")
    if pad == "left" and arch.encoder_decoder:
        pad = "right"  # (an encoder's padding: on the right, as tokenizers pad)
    model = build(name).eval()
    model.config.output_router_logits = False
    if outputs and hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
        except Exception as e:  # noqa: BLE001
            raise Skip(f"no eager attention: {str(e)[:100]}") from None
    inputs = _gen_inputs(name, pad)
    if pad:
        model.generation_config.pad_token_id = getattr(model.config, "pad_token_id", None) or 0
    if embeds:
        if arch.encoder_decoder:
            raise Skip("encoder-decoder")
        with torch.no_grad():
            inputs["inputs_embeds"] = model.get_input_embeddings()(inputs.pop("input_ids"))
    kw = _gen_kw(**kw)
    if outputs:
        kw.update(
            return_dict_in_generate=True,
            output_scores=True,
            output_attentions=True,
            output_hidden_states=True,
        )

    def run(fn):
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            return fn(**inputs, **kw)

    expected = eager(run, model.generate)
    if hf_compile is None:
        model.forward = torch.compile(model.forward, backend="xla")
    else:  # transformers compiles the forward itself (a static cache): CompileConfig's backend
        config = transformers.CompileConfig(**hf_compile)
        config._compile_all_devices = True  # (on the CPU too)
        kw.update(disable_compile=False, compile_config=config)
    got = watched(run, model.generate)
    if hf_compile is not None:
        compiled = getattr(model, "_compiled_call", None)
        if compiled is None or not torch2xla.cache_info(compiled):
            raise Mismatch("transformers did not compile the forward with torch2xla")
    if outputs:
        if not torch.equal(got.sequences, expected.sequences):
            raise Mismatch(f"tokens {got.sequences} vs eager {expected.sequences}")
        check_close("generate outputs", tensors(got), tensors(expected))
    elif not torch.equal(got, expected):
        raise Mismatch(f"tokens {got} vs eager {expected}")


# -- the checks ---------------------------------------------------------------------------------
CHECKS: dict[str, Callable[[], None]] = {}
for _name, _arch in ARCHS.items():
    CHECKS[f"{_name}/tuple"] = lambda n=_name: check_tuple(n)
    CHECKS[f"{_name}/embeds"] = lambda n=_name: check_embeds(n)
    CHECKS[f"{_name}/positions"] = lambda n=_name: check_positions(n)
    CHECKS[f"{_name}/ckpt_reentrant"] = lambda n=_name: check_checkpointing(n, True)
    CHECKS[f"{_name}/ckpt_nonreentrant"] = lambda n=_name: check_checkpointing(n, False)
    if _arch.generates:
        CHECKS[f"{_name}/use_cache"] = lambda n=_name: check_use_cache(n)
        CHECKS[f"{_name}/padded_labels"] = lambda n=_name: check_padded_labels(n)
        CHECKS[f"{_name}/gen_padded"] = lambda n=_name: check_gen(n, pad="left")
        CHECKS[f"{_name}/gen_padded_beam"] = lambda n=_name: check_gen(
            n, pad="left", num_beams=3, num_return_sequences=2
        )
        CHECKS[f"{_name}/gen_padded_sample"] = lambda n=_name: check_gen(
            n, pad="left", seed=5, do_sample=True, num_return_sequences=2
        )
        CHECKS[f"{_name}/gen_nocache"] = lambda n=_name: check_gen(n, pad="left", use_cache=False)
        CHECKS[f"{_name}/gen_embeds"] = lambda n=_name: check_gen(n, pad="left", embeds=True)
        CHECKS[f"{_name}/gen_hf_compile"] = lambda n=_name: check_gen(
            n, pad="left", cache_implementation="static", hf_compile={"backend": "xla"}
        )
        CHECKS[f"{_name}/gen_hf_compile_fullgraph"] = lambda n=_name: check_gen(
            n,
            pad="left",
            cache_implementation="static",
            hf_compile={"backend": "xla", "fullgraph": True, "mode": None},
        )
        CHECKS[f"{_name}/gen_outputs"] = lambda n=_name: check_gen(n, pad="left", outputs=True)


def main(argv):
    wanted = argv[1:]
    kinds = [w[1:] for w in wanted if w.startswith("+")]
    wanted = [w for w in wanted if not w.startswith("+")]
    for label, check in CHECKS.items():
        name, kind = label.split("/")
        if wanted and not any(w == name for w in wanted):
            continue
        if kinds and kind not in kinds:
            continue
        torch._dynamo.reset()
        t0 = time.time()
        try:
            check()
            line, detail = "ok      ", ""
        except Skip as e:
            line, detail = "skip    ", str(e)
        except Mismatch as e:
            line, detail = "DIFF    ", str(e)
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
