"""Probe training loops as users write them, around compiled pieces, against eager PyTorch.

    PYTHONPATH=. python scripts/probe_trainloop29.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_trainloop29.py   # torch's own differences

``probe_optim.py`` sweeps the optimizers' flags and the schedulers; this probe looks at what
users do around them, a few steps each: gradient accumulation over micro-batches, an EMA of the
weights (``torch._foreach_lerp_``, ``swa_utils.AveragedModel``), tied weights, weights changed
between compiled calls (``load_state_dict``, ``p.copy_``, ``p.data = ...``, ``model.to(dtype)``,
``requires_grad_``), a param group added mid-training, hyperparameters written between steps
(``weight_decay``, ``momentum``), ``clip_grad_value_`` and ``clip_grad_norm_`` (``max_norm``
inf), activation checkpointing, ``detect_anomaly``, ``retain_graph`` and a second backward,
``backward(gradient=)``, ``torch.autograd.grad`` and hand-written SGD inside a compiled step,
a gradient penalty, parametrizations (weight norm, spectral norm), and autocast with an eager
optimizer.

Each case records after every step the losses, parameters, ``.grad`` (None or a tensor),
optimizer state and param groups, compared as ``probe_optim.py`` compares (floats against a
float64 run). Compiled runs also count Dynamo graphs and torch2xla compiles per step: a line
says ``RECOMPILE`` where a step after the second compiled anything the case did not declare.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import probe_optim
from _probe_common import difference, r, run
from probe_optim import Net, record, same_opt

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = probe_optim.BACKEND
CASES: dict = {}
N = 4
O = torch.optim


def case(full=True, steady=2):
    """Register ``fn(C, rec)``; compiles after step ``steady`` are reported."""

    def deco(fn):
        fn.full, fn.steady = full, steady
        name = fn.__name__.removeprefix("case_").replace("_", "-")
        assert name not in CASES, name
        CASES[name] = fn
        return fn

    return deco


def _compiles() -> int:
    """Dynamo's graphs and torch2xla's compiles so far."""
    return (
        torch._dynamo.utils.counters["stats"]["unique_graphs"],
        torch2xla.cache_info().compiles,
    )


# ============================================================================================
@case()
def case_grad_accumulation_compiled_model(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.AdamW(model.parameters(), lr=0.01)
    for i in range(N):
        for k in range(3):
            x = r(6, 4, seed=10 * i + k).to(C.dtype)
            loss = cm(x).square().mean() / 3
            loss.backward()
            rec(f"loss {i}.{k}", loss.detach())
        rec(f"acc grads {i}", [p.grad for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_grad_accumulation_compiled_micro_step(C, rec):
    model = Net().to(C.dtype)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def micro(x, acc):
        loss = model(x).square().mean() / acc
        loss.backward()
        return loss.detach()

    @C
    def step():
        opt.step()
        opt.zero_grad()

    for i in range(N):
        for k in range(3):
            rec(f"loss {i}.{k}", micro(r(6, 4, seed=10 * i + k).to(C.dtype), 3))
        rec(f"acc grads {i}", [p.grad for p in model.parameters()])
        step()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_grad_accumulation_in_one_compiled_fn(C, rec):
    model = Net().to(C.dtype)
    opt = O.Adam(model.parameters(), lr=0.01)

    @C
    def train(xs):
        total = 0.0
        for x in xs:
            loss = model(x).square().mean() / len(xs)
            loss.backward()
            total = total + loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total

    for i in range(N):
        rec(f"loss {i}", train([r(6, 4, seed=10 * i + k).to(C.dtype) for k in range(3)]))
        record(rec, i, model, opt)
        C.tick(i)


@case(steady=3)  # (Dynamo traces again when the decay first changes: its float specialized)
def case_ema_foreach_lerp(C, rec):
    model = Net().to(C.dtype)
    ema = [p.detach().clone() for p in model.parameters()]
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)

    @C
    @torch.no_grad()
    def update_ema(decay):
        torch._foreach_lerp_(ema, list(model.parameters()), 1 - decay)

    for i in range(N):
        cm(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        update_ema(0.9 if i < 2 else 0.99)
        rec(f"ema {i}", ema)
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_ema_inplace_mul_add(C, rec):
    model = Net().to(C.dtype)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = O.Adam(model.parameters(), lr=0.01)

    @C
    def train(x, decay):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), model.parameters()):
                pe.mul_(decay).add_(p, alpha=1 - decay)
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype), 0.9 + 0.02 * i))
        rec(f"ema {i}", list(ema.parameters()))
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_swa_averaged_model(C, rec):
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    model = Net().to(C.dtype)
    avg = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    cm, cavg = C(model), C(avg)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        cm(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        avg.update_parameters(model)
        rec(f"avg {i}", list(avg.parameters()))
        rec(f"n_averaged {i}", avg.n_averaged)
        with torch.no_grad():
            rec(f"avg out {i}", cavg(r(2, 4, seed=99).to(C.dtype)))
        C.tick(i)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.mid = nn.Linear(4, 4)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.mid(self.emb(idx))))


@case()
def case_tied_weights_adam(C, rec):
    model = Tied().to(C.dtype)
    cm = C(model)
    opt = O.Adam(model.parameters(), lr=0.01)
    idx = torch.tensor([[1, 2, 3], [6, 0, 2]])
    for i in range(N):
        logits = cm(idx)
        loss = F.cross_entropy(logits.flatten(0, 1), (idx + i).flatten() % 7)
        loss.backward()
        rec(f"loss {i}", loss.detach())
        rec(f"tied {i}", model.head.weight is model.emb.weight)
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_tied_weights_full_step(C, rec):
    model = Tied().to(C.dtype)
    opt = O.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    idx = torch.tensor([[1, 2, 3], [6, 0, 2]])

    @C
    def train(idx, tgt):
        loss = F.cross_entropy(model(idx).flatten(0, 1), tgt.flatten())
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(idx, (idx + i) % 7))
        record(rec, i, model, opt)
        C.tick(i)


@case(steady=3)
def case_load_state_dict_after_compile(C, rec):
    model = Net().to(C.dtype)
    other = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for i in range(N):
        if i == 2:
            model.load_state_dict(other.state_dict())
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_copy_weights_between_calls(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.Adam(model.parameters(), lr=0.01)
    for i in range(N):
        if i == 2:
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p * 0.5 + 0.1)
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case(steady=3)
def case_param_data_assignment_between_calls(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.5)
    for i in range(N):
        if i == 2:
            model.a.weight.data = torch.ones_like(model.a.weight) * 0.3
            model.b.bias.data = model.b.bias.data.clone() + 1
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case(steady=3)
def case_param_data_assignment_full_step(C, rec):
    model = Net().to(C.dtype)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.5)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        if i == 2:
            model.a.weight.data = torch.full_like(model.a.weight, 0.3)
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        C.tick(i)


@case(steady=99)
def case_model_to_dtype_between_calls(C, rec):
    # (after the float64 step, values are compared as float32: the float32 steps before it
    # differ by ulps of float32, which are many of float64)
    model = Net().to(C.dtype)
    cm = C(model)
    for i in range(N):
        dt = C.dtype if i < 2 else torch.float64
        if i == 2:
            model.to(torch.float64)
        loss = cm(r(6, 4, seed=i).to(dt)).square().mean()
        loss.backward()
        rec(f"dtypes {i}", [str(loss.dtype), *(str(p.grad.dtype) for p in model.a.parameters())])
        rec(f"loss {i}", loss.detach().float())
        rec(
            f"grads {i}",
            [p.grad.float() if p.grad is not None else None for p in model.parameters()],
        )
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= 0.1 * p.grad
        model.zero_grad()
        C.tick(i)


@case(steady=3)
def case_requires_grad_toggled_between_calls(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.Adam(model.parameters(), lr=0.01)
    for i in range(N):
        model.b.requires_grad_(i % 2 == 0)
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case(steady=3)
def case_add_param_group_mid_training(C, rec):
    model = Net().to(C.dtype)
    for p in model.b.parameters():
        p.requires_grad_(False)
    opt = O.Adam(model.a.parameters(), lr=0.01)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        if i == 2:
            for p in model.b.parameters():
                p.requires_grad_(True)
            opt.add_param_group({"params": list(model.b.parameters()), "lr": 0.005})
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_hyperparams_written_between_steps(C, rec):
    model = Net().to(C.dtype)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.0)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        for g in opt.param_groups:
            g["weight_decay"] = 0.1 * i
            g["momentum"] = 0.9 - 0.2 * i
            g["lr"] = 0.1 / (i + 1)
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        C.tick(i)


@case()  # (beta2 is addcmul_'s value, which Dynamo splits: a program per value, _float_values)
def case_adam_betas_written_between_steps(C, rec):
    model = Net().to(C.dtype)
    opt = O.Adam(model.parameters(), lr=0.01)
    step = C(opt.step)
    for i in range(N):
        for g in opt.param_groups:
            g["betas"] = (0.9 - 0.05 * i, 0.999 - 0.01 * i)
            g["eps"] = 1e-8 * (i + 1)
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_manual_sgd_python_lr(C, rec):
    model = Net().to(C.dtype)

    @C
    def train(x, lr):
        loss = model(x).square().mean()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
                    p.grad = None
        return loss.detach()

    lr = 0.1
    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype), lr))
        rec(f"params {i}", list(model.parameters()))
        rec(f"grads {i}", [p.grad for p in model.parameters()])
        lr *= 0.5
        C.tick(i)


@case()
def case_manual_sgd_global_lr(C, rec):
    model = Net().to(C.dtype)
    cfg = {"lr": 0.1}

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p.add_(p.grad, alpha=-cfg["lr"])
        model.zero_grad(set_to_none=False)
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        rec(f"params {i}", list(model.parameters()))
        rec(f"grads {i}", [p.grad for p in model.parameters()])
        cfg["lr"] = cfg["lr"] * 0.7
        C.tick(i)


@case()
def case_autograd_grad_in_compiled_step(C, rec):
    model = Net().to(C.dtype)
    params = [p for p in model.parameters() if p is not model.unused]

    @C
    def train(x, lr):
        loss = model(x).square().mean()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(lr * g)
        return loss.detach(), grads

    for i in range(N):
        loss, grads = train(r(6, 4, seed=i).to(C.dtype), 0.1 / (i + 1))
        rec(f"loss {i}", loss)
        rec(f"g {i}", list(grads))
        rec(f"params {i}", list(model.parameters()))
        rec(f"grads {i}", [p.grad for p in model.parameters()])
        C.tick(i)


@case()
def case_autograd_grad_allow_unused(C, rec):
    model = Net().to(C.dtype)

    @C
    def grads(x):
        loss = model(x).square().mean()
        return torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)

    for i in range(N):
        g = grads(r(6, 4, seed=i).to(C.dtype))
        rec(f"g {i}", [t if t is not None else "None" for t in g])
        C.tick(i)


@case()
def case_gradient_penalty(C, rec):
    model = Net().to(C.dtype)
    opt = O.Adam(model.parameters(), lr=0.01)
    cm = C(model)
    for i in range(N):
        x = r(6, 4, seed=i).to(C.dtype).requires_grad_()
        out = cm(x)
        (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        loss = out.square().mean() + 0.1 * (gx.norm(2, dim=1) - 1).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        rec(f"x.grad {i}", x.grad)
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_retain_graph_second_backward(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        out = cm(r(6, 4, seed=i).to(C.dtype))
        l1, l2 = out.square().mean(), out.sum()
        l1.backward(retain_graph=True)
        rec(f"g1 {i}", [p.grad.clone() if p.grad is not None else None for p in model.parameters()])
        l2.backward()
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_second_backward_without_retain_raises(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    out = cm(r(6, 4, seed=0).to(C.dtype))
    loss = out.square().mean()
    loss.backward()
    rec("grads", [p.grad for p in model.parameters()])
    loss.backward()
    rec("grads again", [p.grad for p in model.parameters()])


@case()
def case_backward_with_gradient(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        out = cm(r(6, 4, seed=i).to(C.dtype))
        out.backward(gradient=r(6, 2, seed=50 + i).to(C.dtype))
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_backward_with_expanded_gradient(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    for i in range(N):
        out = cm(r(6, 4, seed=i).to(C.dtype))
        torch.autograd.backward([out], [torch.ones(1, 2, dtype=C.dtype).expand(6, 2) * (i + 1)])
        rec(f"grads {i}", [p.grad for p in model.parameters()])
        model.zero_grad()
        C.tick(i)


@case()
def case_clip_grad_value(C, rec):
    model = Net().to(C.dtype)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train(x):
        loss = model(x).square().mean() * 10
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_clip_grad_value_foreach_eager_step(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    clip = C(lambda ps: nn.utils.clip_grad_value_(ps, 0.05, foreach=True))
    for i in range(N):
        (cm(r(6, 4, seed=i).to(C.dtype)).square().mean() * 10).backward()
        clip(list(model.parameters()))
        rec(f"clipped {i}", [p.grad for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        C.tick(i)


@case()
def case_clip_grad_norm_inf_max(C, rec):
    model = Net().to(C.dtype)
    opt = O.SGD(model.parameters(), lr=0.1)
    clip = C(lambda ps, m: nn.utils.clip_grad_norm_(ps, m))
    for i in range(N):
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        rec(f"norm {i}", clip(list(model.parameters()), float("inf") if i % 2 else 0.1))
        rec(f"clipped {i}", [p.grad for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        C.tick(i)


@case()
def case_clip_grad_norm_returned_and_used(C, rec):
    model = Net().to(C.dtype)
    opt = O.Adam(model.parameters(), lr=0.01)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=2.0, foreach=False)
        if torch.isfinite(norm):
            opt.step()
        opt.zero_grad()
        return loss.detach(), norm

    for i in range(N):
        x = r(6, 4, seed=i).to(C.dtype)
        if i == 2:
            x[0, 0] = float("nan")
        loss, norm = train(x)
        rec(f"loss {i}", loss)
        rec(f"norm {i}", norm)
        record(rec, i, model, opt)
        C.tick(i)


class CkptNet(nn.Module):
    def __init__(self, reentrant):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.b = nn.Linear(8, 8)
        self.c = nn.Linear(8, 2)
        self.reentrant = reentrant

    def block(self, h):
        return torch.tanh(self.b(F.gelu(h)))

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        h = self.a(x)
        h = checkpoint(self.block, h, use_reentrant=self.reentrant)
        return self.c(h)


def _ckpt(reentrant, full):
    def fn(C, rec):
        model = CkptNet(reentrant).to(C.dtype)
        opt = O.Adam(model.parameters(), lr=0.01)
        cm = C(model)

        @C
        def train(x):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()

        for i in range(N):
            x = r(6, 4, seed=i).to(C.dtype)
            if full:
                rec(f"loss {i}", train(x))
            else:
                loss = cm(x).square().mean()
                loss.backward()
                rec(f"loss {i}", loss.detach())
                opt.step()
                opt.zero_grad()
            record(rec, i, model, opt)
            C.tick(i)

    fn.full, fn.steady = True, 2
    return fn


for _re in (False, True):
    for _full in (False, True):
        CASES[f"checkpoint reentrant={_re} {'full' if _full else 'model'}"] = _ckpt(_re, _full)


@case()
def case_detect_anomaly(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        with torch.autograd.detect_anomaly():
            loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
            loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_detect_anomaly_nan_raises(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    x = r(6, 4, seed=0).to(C.dtype)
    with torch.autograd.detect_anomaly():
        out = cm(x)
        loss = (out.abs().sqrt() * 0).sum() + torch.sqrt(out - out).sum()
        loss.backward()
    rec("grads", [p.grad for p in model.parameters()])


@case()
def case_weight_norm_parametrization(C, rec):
    model = nn.Sequential(
        nn.utils.parametrizations.weight_norm(nn.Linear(4, 5)), nn.Tanh(), nn.Linear(5, 2)
    ).to(C.dtype)
    opt = O.Adam(model.parameters(), lr=0.01)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        rec(f"weight {i}", model[0].weight)
        C.tick(i)


@case()
def case_spectral_norm_training(C, rec):
    model = nn.Sequential(
        nn.utils.parametrizations.spectral_norm(nn.Linear(4, 5)), nn.Tanh(), nn.Linear(5, 2)
    ).to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        rec(f"buffers {i}", list(model.buffers()))
        C.tick(i)


@case()
def case_autocast_bf16_model_eager_opt(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.AdamW(model.parameters(), lr=0.01)
    for i in range(N):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = cm(r(6, 4, seed=i).to(C.dtype))
            rec(f"out dtype {i}", str(out.dtype))
            loss = out.float().square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


case_autocast_bf16_model_eager_opt.full = torch.bfloat16


@case()
def case_zero_grad_set_to_none_false_accumulates(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        cm(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        rec(f"grads {i}", [p.grad for p in model.parameters()])
        opt.step()
        opt.zero_grad(set_to_none=i % 2 == 0)
        C.tick(i)


@case(steady=3)  # (a parameter's first grad at step 2: its state is new)
def case_grads_set_by_hand(C, rec):
    model = Net().to(C.dtype)
    opt = O.Adam(model.parameters(), lr=0.01)
    step = C(opt.step)
    for i in range(N):
        for j, p in enumerate(model.parameters()):
            if j != 1 or i > 1:
                p.grad = r(*p.shape, seed=7 * i + j).to(C.dtype)
        step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_optimizer_load_state_dict_mid_training(C, rec):
    model = Net().to(C.dtype)
    opt = O.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    saved = None
    for i in range(N + 1):
        if i == 1:
            saved = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
        if i == 3:  # rewind to the checkpoint
            model.load_state_dict(saved[0])
            opt.load_state_dict(saved[1])
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        C.tick(i)


case_optimizer_load_state_dict_mid_training.steady = 4  # (new state tensors at step 3)


@case()
def case_two_forwards_one_backward(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1, nesterov=True, momentum=0.9)
    for i in range(N):
        a = cm(r(6, 4, seed=i).to(C.dtype))
        b = cm(r(6, 4, seed=i + 100).to(C.dtype))
        loss = (a - b).square().mean() + a.mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_train_eval_switch(C, rec):
    # (no dropout: XLA draws other masks than eager, by design)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    model = model.to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        model.train()
        torch.manual_seed(i)
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        opt.step()
        opt.zero_grad()
        model.eval()
        with torch.no_grad():
            rec(f"eval {i}", cm(r(3, 4, seed=77).to(C.dtype)))
        record(rec, i, model, opt)
        rec(f"buffers {i}", list(model.buffers()))
        C.tick(i)


@case()
def case_functional_call_with_params_dict(C, rec):
    from torch.func import functional_call

    model = Net().to(C.dtype)
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    opt = O.Adam(params.values(), lr=0.01)

    @C
    def train(x):
        loss = functional_call(model, params, (x,)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        rec(f"params {i}", list(params.values()))
        C.tick(i)


@case()
def case_grad_hooks_scaling(C, rec):
    model = Net().to(C.dtype)
    for p in model.parameters():
        p.register_hook(lambda g: g * 0.5)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1)
    for i in range(N):
        cm(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        opt.step()
        opt.zero_grad()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_post_accumulate_hook_optimizer_in_backward(C, rec):
    model = Net().to(C.dtype)
    opts = {p: O.SGD([p], lr=0.1, momentum=0.9) for p in model.parameters()}

    def hook(p):
        opts[p].step()
        opts[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(hook)
    cm = C(model)
    for i in range(N):
        loss = cm(r(6, 4, seed=i).to(C.dtype)).square().mean()
        loss.backward()
        rec(f"loss {i}", loss.detach())
        rec(f"params {i}", list(model.parameters()))
        rec(f"grads {i}", [p.grad for p in model.parameters()])
        C.tick(i)


@case()
def case_params_to_vector_roundtrip(C, rec):
    model = Net().to(C.dtype)

    @C
    def train(x, lr):
        loss = model(x).square().mean()
        loss.backward()
        with torch.no_grad():
            vec = nn.utils.parameters_to_vector(model.parameters())
            g = torch.cat(
                [
                    (p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                    for p in model.parameters()
                ]
            )
            nn.utils.vector_to_parameters(vec - lr * g, model.parameters())
        model.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype), 0.1))
        rec(f"params {i}", list(model.parameters()))
        C.tick(i)


@case()
def case_scaler_eager_with_compiled_model(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=1)
    for i in range(N):
        x = r(6, 4, seed=i).to(C.dtype)
        if i == 1:
            x[0, 0] = float("inf")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = cm(x).float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        rec(f"scale {i}", scaler.get_scale())
        record(rec, i, model, opt)
        C.tick(i)


case_scaler_eager_with_compiled_model.full = torch.bfloat16


@case()
def case_adamw_warmup_lambda_full_step(C, rec):
    # (transformers' schedule: linear warmup then decay, AdamW, clipping, all compiled)
    model = Net().to(C.dtype)
    opt = O.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
    sch = O.lr_scheduler.LambdaLR(opt, lambda k: min(1.0, (k + 1) / 2) * (1 - k / 10))

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        return loss.detach()

    for i in range(N + 1):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, opt)
        sch.step()
        C.tick(i)


@case()
def case_accumulation_with_scheduler_sgd(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sch = O.lr_scheduler.ExponentialLR(opt, gamma=0.7)
    step = C(opt.step)
    for i in range(N + 1):
        for k in range(2):
            (cm(r(6, 4, seed=10 * i + k).to(C.dtype)).square().mean() / 2).backward()
        step()
        opt.zero_grad()
        sch.step()
        record(rec, i, model, opt)
        C.tick(i)


@case()
def case_clip_norm_some_grads_none(C, rec):
    model = Net().to(C.dtype)
    opt = O.SGD(model.parameters(), lr=0.1)
    clip = C(lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, foreach=True))
    for i in range(N):
        model.b.requires_grad_(i % 2 == 0)
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        rec(f"norm {i}", clip(list(model.parameters())))
        rec(f"clipped {i}", [p.grad for p in model.parameters()])
        opt.step()
        opt.zero_grad()
        C.tick(i)


case_clip_norm_some_grads_none.steady = 99  # (requires_grad toggles: Dynamo guards it)


# ============================================================================================
class Mode(probe_optim.Mode):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.counts: list[int] = []

    def tick(self, i):
        if self.compiled:
            self.counts.append(_compiles())


def observe(fn, compiled, dtype=torch.float32, backend=BACKEND):
    from _probe_common import describe, observations

    C = Mode(compiled, dtype, backend)
    torch._dynamo.reset()
    gc.collect()
    torch._dynamo.utils.counters.clear()
    base = torch2xla.cache_info().compiles
    obs = observations(fn, C, describe)
    return obs, [(d, c - base) for d, c in C.counts]


def compare(name, fn):
    exp, _ = observe(fn, False)
    got, counts = observe(fn, True)
    refs, _ = observe(fn, False, torch.float64)
    if [x for x, _ in refs] != [x for x, _ in exp]:
        refs = exp
    red = getattr(fn, "full", False)

    def diff(a):
        q = iter([x for _, x in refs])
        return difference(a, exp, lambda g, e, label: same_opt(g, e, label, red, next(q, None)))

    d = diff(got)
    if d and BACKEND == "xla":
        dyn, _ = observe(fn, True, backend="aot_eager")
        if diff(dyn):
            q = iter([x for _, x in refs])
            if not difference(
                got, dyn, lambda g, e, label: same_opt(g, e, label, red, next(q, None))
            ):
                return f"TORCH {name}: (aot_eager's as well) {d}"
    if d:
        return f"DIFF  {name}: {d}"
    steady = getattr(fn, "steady", 2)
    late = [i for i in range(steady, len(counts)) if counts[i] != counts[i - 1]]
    raised = [g for label, g in got if label == "raised"]
    more = f" (raises {raised[0][1].__name__}: {raised[0][2][:80]})" if raised else ""
    if late:
        return f"RECOMPILE {name}: compiles per step {counts}{more}"
    return f"ok    {name} {counts}{more}"


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(run(sys.argv[1:], CASES, compare))
