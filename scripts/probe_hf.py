"""Probe transformers models the way users run them, compiled with backend="xla", against eager.

Unchanged library code: tiny random models (hidden 32, 2 layers, seeded, fp32, CPU, nothing
downloaded), dropout off. tests/test_hf_zoo.py covers forward, a training step with SGD and
greedy generate for its zoo; this probe covers the zoo's architectures on the paths it does not
(hidden states and attentions returned, gradient checkpointing, a compiled AdamW step, beam
search, sampling, scores of ``generate``, left-padded batches, pipelines) and architectures and
heads it lacks (sequence/token classification, question answering, multiple choice, token type
ids, GPT-Neo, MPNet, Funnel, Pegasus, Marian, StableLM, OLMo, Cohere, SegFormer, HuBERT, ...).

    PYTHONPATH=. python scripts/probe_hf.py [substring ...]   # checks whose name contains one

Checks are named ``arch/check``. Values are compared within fp32's tolerance, or, where they are
not, the compiled error against a float64 eager run of the same model must be no larger than
eager's own (plus fp32's tolerance): a value eager itself gets only that close. Prints one line
per check: ``ok``, ``DIFF`` (the first difference), ``FALLBACK`` (an op ran in eager: torch2xla's
FallbackWarning) or ``CRASH`` (the compiled run raised where eager did not).
"""

from __future__ import annotations

import copy
import sys
import time
import traceback
import warnings
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree
import transformers

import torch2xla
from scripts._hf_archs import NEW
from tests.test_hf_zoo import VOCAB, ZOO, _ids

RTOL, ATOL = 1.3e-6, 1e-5


class Mismatch(AssertionError):
    pass


# -- comparison ---------------------------------------------------------------------------------
def tensors(out) -> list[torch.Tensor]:
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    leaves = []
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            leaves.append(leaf)
        elif hasattr(leaf, "to_tuple"):
            leaves.extend(tensors(leaf))
        elif hasattr(leaf, "layers"):  # a Cache: every tensor its layers hold (keys and
            for layer in leaf.layers:  # values, a linear attention's conv and recurrent states)
                for value in vars(layer).values():
                    leaves.extend(
                        t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)
                    )
    return leaves


def check_close(label, got, exp, exact: Callable[[], list] | None = None):
    """``got`` against eager's ``exp``; where not within fp32 tolerance, against ``exact()``
    (float64 eager of the same model): no further off than eager."""
    got, exp = list(got), list(exp)
    if len(got) != len(exp):
        raise Mismatch(f"{label}: {len(got)} tensors vs eager's {len(exp)}")
    f64 = None
    for i, (g, e) in enumerate(zip(got, exp)):
        if (g is None) != (e is None):
            raise Mismatch(f"{label}[{i}]: None-ness {g is None} vs eager {e is None}")
        if g is None:
            continue
        if g.dtype != e.dtype or g.shape != e.shape:
            raise Mismatch(f"{label}[{i}]: {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}")
        if not g.is_floating_point():
            if not torch.equal(g, e):
                raise Mismatch(f"{label}[{i}]: {g} vs eager {e}")
            continue
        if torch.allclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True):
            continue
        if exact is None:
            raise Mismatch(f"{label}[{i}]: max diff {(g - e).abs().max().item():.3g}")
        if f64 is None:
            f64 = exact()
        x = f64[i].double()
        err_g = (g.double() - x).abs().max().item()
        err_e = (e.double() - x).abs().max().item()
        scale = x.abs().max().item()
        if not err_g <= err_e + ATOL + RTOL * scale:
            raise Mismatch(
                f"{label}[{i}] {tuple(g.shape)}: err vs f64 {err_g:.3g} (eager {err_e:.3g}, "
                f"scale {scale:.3g}), diff vs eager {(g - e).abs().max().item():.3g}"
            )


def double_inputs(inputs):
    return {
        k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in inputs.items()
    }


ARCHS = {**ZOO, **NEW}


def build(name):
    torch.manual_seed(0)
    try:
        return ARCHS[name].build()
    except Exception as e:  # noqa: BLE001  (this transformers builds no such model)
        raise Skip(f"cannot build: {type(e).__name__}: {str(e)[:150]}") from None


def make_inputs(name):
    torch.manual_seed(1)
    return ARCHS[name].inputs()


# -- running ------------------------------------------------------------------------------------
class Skip(Exception):
    pass


class Fallbacks(Exception):
    pass


def eager(fn, *args, **kwargs):
    """Eager's run: an error there skips the check (nothing to compare)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"eager raises {type(e).__name__}: {str(e)[:150]}") from None


def watched(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    fb = [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    if fb:
        raise Fallbacks(fb[0][:300])
    return out


def compiled_model(model):
    return torch.compile(model, backend="xla")


def _forward_kw(name, labels):
    kw = {"use_cache": False} if ARCHS[name].generates else {}
    if ARCHS[name].encoder_decoder and "labels" not in labels:
        torch.manual_seed(2)
        kw["decoder_input_ids"] = _ids(seq=5)
    return kw


def check_forward(name, **extra_kw):
    """Eval forward with the loss (labels=) and ``extra_kw`` (hidden states, attentions)."""
    model = build(name).eval()
    if extra_kw.get("output_attentions") and hasattr(model, "set_attn_implementation"):
        try:  # (sdpa and flex attention return no attention weights)
            model.set_attn_implementation("eager")
        except Exception as e:  # noqa: BLE001
            raise Skip(f"no eager attention: {str(e)[:100]}") from None
    inputs, labels = make_inputs(name)
    kw = {**_forward_kw(name, labels), **labels, **extra_kw}
    with torch.no_grad():
        expected = eager(model, **inputs, **kw)
        got = watched(compiled_model(model), **inputs, **kw)

        def exact():
            return tensors(
                copy.deepcopy(model).double()(**double_inputs(inputs), **double_inputs(kw))
            )

        check_close("out", tensors(got), tensors(expected), exact)


def _grads(model):
    return [p.grad for p in model.parameters()]


def check_train(name, checkpointing=False, adamw=True):
    """A training step with the model's loss: loss, every gradient (and None-ness); then AdamW
    compiled on eager's gradients, parameters and state against eager's AdamW."""
    model = build(name).train()
    if checkpointing:
        if not model.supports_gradient_checkpointing:
            raise Skip("no gradient checkpointing")
        model.gradient_checkpointing_enable()
    ref = copy.deepcopy(model)
    inputs, labels = make_inputs(name)
    kw = {**_forward_kw(name, labels), **labels}
    expected = eager(ref, **inputs, **kw)
    got = watched(compiled_model(model), **inputs, **kw)

    def exact_out():
        return tensors(copy.deepcopy(ref).double()(**double_inputs(inputs), **double_inputs(kw)))

    check_close("train out", tensors(got), tensors(expected), exact_out)
    watched(got.loss.backward)
    expected.loss.backward()

    def exact_grads():
        m = copy.deepcopy(ref).double()
        m.zero_grad()
        m(**double_inputs(inputs), **double_inputs(kw)).loss.backward()
        return _grads(m)

    names = [n for n, _ in model.named_parameters()]
    try:
        check_close("grad", _grads(model), _grads(ref), exact_grads)
    except Mismatch as e:
        i = int(str(e).split("[", 1)[1].split("]", 1)[0])
        raise Mismatch(f"{names[i]}: {e}") from None
    if not adamw:
        return
    # AdamW on the same gradients: the compiled step alone
    for p, q in zip(model.parameters(), ref.parameters()):
        p.grad = None if q.grad is None else q.grad.clone()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1)

    @torch.compile(backend="xla")
    def step():
        opt.step()

    for _ in range(2):
        watched(step)
        ref_opt.step()
    check_close(
        "adamw params",
        [p.detach() for p in model.parameters()],
        [p.detach() for p in ref.parameters()],
    )


def _gen_inputs(name, batch=1, left_pad=0):
    inputs, _ = make_inputs(name)
    inputs = {k: v[:batch].clone() for k, v in inputs.items()}
    if "attention_mask" in inputs:
        inputs["attention_mask"][:] = 1
        if left_pad:
            inputs["attention_mask"][0, :left_pad] = 0
            inputs["input_ids"][0, :left_pad] = 0
    return inputs


def _gen_kw(new_tokens=5, **kw):
    return {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "disable_compile": True,
        **kw,
    }


def check_generate(name, batch=1, left_pad=0, seed=None, scores=False, **kw):
    if not ARCHS[name].generates:
        raise Skip("does not generate")
    model = build(name).eval()
    model.config.output_router_logits = False
    if left_pad and ARCHS[name].encoder_decoder:
        raise Skip("encoder-decoder")
    inputs = _gen_inputs(name, batch, left_pad)
    if left_pad:
        model.generation_config.pad_token_id = model.config.pad_token_id or 0
    kw = _gen_kw(**kw)
    if scores:
        kw.update(return_dict_in_generate=True, output_scores=True, output_logits=True)

    def run(fn):
        if seed is not None:
            torch.manual_seed(seed)
        with torch.no_grad():
            return fn(**inputs, **kw)

    expected = eager(run, model.generate)
    if seed is not None:  # eager deterministic?
        again = run(model.generate)
        seqs = lambda o: o.sequences if scores else o
        if not torch.equal(seqs(again), seqs(expected)):
            raise Skip("eager sampling is not deterministic")
    model.forward = torch.compile(model.forward, backend="xla")
    got = watched(run, model.generate)
    if scores:
        if not torch.equal(got.sequences, expected.sequences):
            raise Mismatch(f"tokens {got.sequences} vs eager {expected.sequences}")
        check_close("scores", got.scores, expected.scores)
        check_close("logits", got.logits, expected.logits)
        if getattr(expected, "sequences_scores", None) is not None:
            check_close("sequences_scores", [got.sequences_scores], [expected.sequences_scores])
    elif not torch.equal(got, expected):
        raise Mismatch(f"tokens {got} vs eager {expected}")


def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {
        "[PAD]": 0,
        "[BOS]": 1,
        "[EOS]": 2,
        "[UNK]": 3,
        **{f"w{i}": i for i in range(4, VOCAB)},
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        unk_token="[UNK]",
    )


def check_pipeline(name, task):
    model = build(name).eval()
    model.config.output_router_logits = False
    tok = _word_tokenizer()
    texts = ["w5 w9 w17 w33", "w40 w41"]
    kw = (
        {"max_new_tokens": 4, "min_new_tokens": 4, "do_sample": False}
        if task == "text-generation"
        else {}
    )
    if task == "text-generation":
        model.generation_config.disable_compile = True
    pipe = transformers.pipeline(task, model=model, tokenizer=tok, device="cpu")
    with torch.no_grad():
        expected = eager(pipe, texts, batch_size=2, **kw)
        model.forward = torch.compile(model.forward, backend="xla")
        got = watched(pipe, texts, batch_size=2, **kw)

    def norm(x):
        return pytree.tree_map(lambda v: round(v, 4) if isinstance(v, float) else v, x)

    if norm(got) != norm(expected):
        raise Mismatch(f"{got} vs eager {expected}")


# -- the checks ---------------------------------------------------------------------------------
CHECKS: dict[str, Callable[[], None]] = {}
for _name, _arch in ARCHS.items():
    CHECKS[f"{_name}/forward"] = lambda n=_name: check_forward(n)
    CHECKS[f"{_name}/hidden_states"] = lambda n=_name: check_forward(n, output_hidden_states=True)
    CHECKS[f"{_name}/attentions"] = lambda n=_name: check_forward(n, output_attentions=True)
    CHECKS[f"{_name}/train"] = lambda n=_name: check_train(n)
    CHECKS[f"{_name}/checkpointing"] = lambda n=_name: check_train(
        n, checkpointing=True, adamw=False
    )
    if _arch.generates:
        CHECKS[f"{_name}/greedy"] = lambda n=_name: check_generate(n)
        CHECKS[f"{_name}/greedy_static"] = lambda n=_name: check_generate(
            n, cache_implementation="static"
        )
        CHECKS[f"{_name}/left_padded"] = lambda n=_name: check_generate(n, batch=2, left_pad=3)
        CHECKS[f"{_name}/left_padded_static"] = lambda n=_name: check_generate(
            n, batch=2, left_pad=3, cache_implementation="static"
        )
        CHECKS[f"{_name}/beam"] = lambda n=_name: check_generate(n, num_beams=2, scores=True)
        CHECKS[f"{_name}/sample"] = lambda n=_name: check_generate(
            n, seed=3, do_sample=True, top_k=20, top_p=0.9, temperature=0.8
        )
        CHECKS[f"{_name}/scores"] = lambda n=_name: check_generate(n, scores=True)
for _name, _task in [
    ("gpt2", "text-generation"),
    ("llama", "text-generation"),
    ("bert_seqcls", "text-classification"),
    ("bert", "fill-mask"),
    ("bert_tokcls", "token-classification"),
    ("bert", "feature-extraction"),
]:
    CHECKS[f"{_name}/pipeline_{_task}"] = lambda n=_name, t=_task: check_pipeline(n, t)


def main(argv):
    wanted = argv[1:]
    kinds = [w[1:] for w in wanted if w.startswith("+")]  # +train: that check of every arch
    wanted = [w for w in wanted if not w.startswith("+")]
    for label, check in CHECKS.items():
        kind = label.split("/")[1]
        if wanted and not any(w in label for w in wanted):
            continue
        if kinds and kind not in kinds:
            continue
        torch._dynamo.reset()
        t0 = time.time()
        try:
            check()
            line = "ok      "
            detail = ""
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
            line, detail = (
                "CRASH   ",
                f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''} {where}",
            )
        print(f"{line} {label}  ({time.time() - t0:.1f}s) {detail}", flush=True)


if __name__ == "__main__":
    main(sys.argv)
