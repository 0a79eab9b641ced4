"""Probe the transformers architectures of scripts/_hf_archs3.py (none in tests/test_hf_zoo.py
or scripts/_hf_archs.py) compiled with backend="xla", against eager.

Per architecture (tiny random model, float32, CPU):

- ``forward``: eval, with the model's own loss (labels=): every output tensor;
- ``train``: train mode, dropout off: outputs, every parameter's gradient and its None-ness,
  and the buffers after the step (BatchNorm's running statistics);
- ``dropout``: train mode with every dropout at 0.1 (values cannot match eager's: the random
  numbers differ): the loss finite, every gradient finite and None where eager's is;
- ``ckpt``: ``gradient_checkpointing_enable()``, train mode, dropout off: as ``train``;
- ``greedy`` (decoders): greedy ``generate`` with the forward compiled gives eager's tokens; a
  second, longer ``generate`` builds few more programs (the count printed: ``programs a->b``).

Values are compared within fp32's tolerance, or, where they are not, the compiled error against
a float64 eager run must be no larger than eager's own (scripts/probe_hf.py's ``check_close``).

    PYTHONPATH=. python scripts/probe_hf3.py [arch ...] [+check ...]
"""

from __future__ import annotations

import copy
import math
import sys
import time
import traceback
from collections.abc import Callable

import torch

import torch2xla
from scripts._hf_archs3 import NEW3
from scripts.probe_hf import (
    Fallbacks,
    Mismatch,
    Skip,
    check_close,
    double_inputs,
    eager,
    tensors,
    watched,
)

ARCHS = NEW3


def build(name):
    torch.manual_seed(0)
    try:
        return ARCHS[name].build()
    except Exception as e:  # noqa: BLE001  (this transformers builds no such model)
        raise Skip(f"cannot build: {type(e).__name__}: {str(e)[:200]}") from None


def make_inputs(name):
    torch.manual_seed(1)
    return ARCHS[name].inputs()


def _kw(name, labels):
    kw = {**labels}
    if ARCHS[name].generates:
        kw["use_cache"] = False
    return kw


def loss_of(out):
    """The model's own loss, or (a model without one) the sum of its float outputs."""
    loss = getattr(out, "loss", None)
    if loss is not None:
        return loss
    return sum(t.sum() for t in tensors(out) if t.is_floating_point() and t.requires_grad)


def set_dropout(model, p):
    """Every dropout of ``model`` at ``p``: nn.Dropout modules and the float attributes functional
    dropout reads (``self.attention_dropout``, ``self.dropout``...); layer drop stays off."""
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = p
            n += 1
            continue
        for attr, val in list(vars(m).items()):
            low = attr.lower()
            functional = "drop" in low and "layerdrop" not in low and "path" not in low
            if functional and type(val) is float:
                setattr(m, attr, p)
                n += 1
    return n


# -- checks -------------------------------------------------------------------------------------
def check_forward(name):
    model = build(name).eval()
    inputs, labels = make_inputs(name)
    kw = _kw(name, labels)
    with torch.no_grad():
        expected = eager(model, **inputs, **kw)
        got = watched(torch.compile(model, backend="xla"), **inputs, **kw)

        def exact():
            return tensors(
                copy.deepcopy(model).double()(**double_inputs(inputs), **double_inputs(kw))
            )

        check_close("out", tensors(got), tensors(expected), exact)


def check_train(name, checkpointing=False):
    model = build(name).train()
    if checkpointing:
        if not model.supports_gradient_checkpointing:
            raise Skip("no gradient checkpointing")
        model.gradient_checkpointing_enable()
    ref = copy.deepcopy(model)
    inputs, labels = make_inputs(name)
    kw = _kw(name, labels)
    expected = eager(ref, **inputs, **kw)
    got = watched(torch.compile(model, backend="xla"), **inputs, **kw)

    def exact_out():
        return tensors(copy.deepcopy(ref).double()(**double_inputs(inputs), **double_inputs(kw)))

    check_close("train out", tensors(got), tensors(expected), exact_out)
    watched(loss_of(got).backward)
    loss_of(expected).backward()

    def exact_grads():
        m = copy.deepcopy(ref).double()
        m.zero_grad()
        loss_of(m(**double_inputs(inputs), **double_inputs(kw))).backward()
        return [p.grad for p in m.parameters()]

    names = [n for n, _ in model.named_parameters()]
    try:
        check_close(
            "grad",
            [p.grad for p in model.parameters()],
            [p.grad for p in ref.parameters()],
            exact_grads,
        )
    except Mismatch as e:
        i = int(str(e).split("[", 1)[1].split("]", 1)[0]) if "[" in str(e) else 0
        raise Mismatch(f"{names[i] if i < len(names) else '?'}: {e}") from None
    check_close("buffers", list(model.buffers()), list(ref.buffers()))


def check_dropout(name):
    model = build(name).train()
    if not set_dropout(model, 0.1):
        raise Skip("no dropout")
    ref = copy.deepcopy(model)
    inputs, labels = make_inputs(name)
    kw = _kw(name, labels)
    expected = eager(ref, **inputs, **kw)
    got = watched(torch.compile(model, backend="xla"), **inputs, **kw)
    g, e = tensors(got), tensors(expected)
    if [(t.dtype, t.shape) for t in g] != [(t.dtype, t.shape) for t in e]:
        raise Mismatch("outputs' dtypes or shapes differ")
    loss = loss_of(got)
    if not math.isfinite(loss.item()):
        raise Mismatch(f"loss {loss.item()} (eager {loss_of(expected).item()})")
    watched(loss.backward)
    loss_of(expected).backward()
    for (n, p), q in zip(model.named_parameters(), ref.parameters()):
        if (p.grad is None) != (q.grad is None):
            raise Mismatch(f"{n}: grad None {p.grad is None}, eager {q.grad is None}")
        if p.grad is not None and not torch.isfinite(p.grad).all():
            raise Mismatch(f"{n}: grad not finite")
        if p.grad is not None and (p.grad == 0).all() and not (q.grad == 0).all():
            raise Mismatch(f"{n}: grad all zeros, eager's not")


def _gen_inputs(name):
    inputs, _ = make_inputs(name)
    inputs = {k: v[:1].clone() for k, v in inputs.items()}
    if "attention_mask" in inputs:
        inputs["attention_mask"][:] = 1
    return inputs


def check_greedy(name):
    if not ARCHS[name].generates:
        raise Skip("does not generate")
    model = build(name).eval()
    model.config.output_router_logits = False
    inputs = _gen_inputs(name)

    def run(n):
        kw = {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "num_beams": 1}
        with torch.no_grad():
            return model.generate(**inputs, **kw, disable_compile=True)

    expected = [eager(run, n) for n in (6, 14)]
    forward = model.forward
    model.forward = compiled = torch.compile(forward, backend="xla")
    got = watched(run, 6)
    before = {g.name: g.misses for g in torch2xla.cache_info(compiled)}
    got2 = watched(run, 14)
    after = {g.name: g.misses for g in torch2xla.cache_info(compiled)}
    first, second = sum(before.values()), sum(after.values())
    for g, e in zip((got, got2), expected):
        if not torch.equal(g, e):
            raise Mismatch(f"tokens {g.tolist()} vs eager {e.tolist()}")
    # 8 more tokens: per graph (a model with graph breaks has several per step), at most the
    # buckets 8 -> 16 -> 32 and a prefill; a graph with two padded sizes a bucket apart
    # (ProphetNet's main and predicting streams' keys, L and L + 1) may take twice that
    grown = max(after[name] - before.get(name, 0) for name in after)
    if grown > 6 or (second - first > 3 and len(after) == 1):
        raise Mismatch(f"programs {first}->{second} (one graph +{grown})")
    return f"programs {first}->{second} (at most +{grown} a graph)"


CHECKS: dict[str, Callable[[], str | None]] = {}
for _name, _arch in ARCHS.items():
    CHECKS[f"{_name}/forward"] = lambda n=_name: check_forward(n)
    CHECKS[f"{_name}/train"] = lambda n=_name: check_train(n)
    CHECKS[f"{_name}/dropout"] = lambda n=_name: check_dropout(n)
    CHECKS[f"{_name}/ckpt"] = lambda n=_name: check_train(n, checkpointing=True)
    if _arch.generates:
        CHECKS[f"{_name}/greedy"] = lambda n=_name: check_greedy(n)


def main(argv):
    # BigBird's random blocks come from np.random.seed(fixed); Dynamo, whatever the backend,
    # maps np.random to torch's generator unless told to keep numpy's stream.
    torch._dynamo.config.use_numpy_random_stream = True
    wanted = [w for w in argv[1:] if not w.startswith("+")]
    kinds = [w[1:] for w in argv[1:] if w.startswith("+")]
    for label, check in CHECKS.items():
        name, kind = label.split("/")
        if (wanted and name not in wanted) or (kinds and kind not in kinds):
            continue
        torch._dynamo.reset()
        t0 = time.time()
        try:
            detail = check() or ""
            line = "ok      "
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
