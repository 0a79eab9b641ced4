"""Probe optimizers, LR schedulers and training-loop utilities that ``probe_optim.py`` and
``probe_trainloop29.py`` leave out, against eager PyTorch.

    PYTHONPATH=. python scripts/probe_optim33.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_optim33.py   # torch's own differences

A tensor learning rate for every optimizer (those probes have it for SGD and Adam only),
``Adafactor`` and ``Muon``, the schedulers they skip (``CosineAnnealingWarmRestarts``,
``SequentialLR``, ``ChainedScheduler``, ``CyclicLR`` cycling momentum, ``ReduceLROnPlateau`` on
a tensor metric), a scheduler stepped inside the compiled step, ``get_total_norm`` and
``clip_grads_with_norm_``, other norm types and non-finite norms, ``swa_utils`` (``SWALR``,
``update_bn``, an averaged model with buffers), optimizer hooks, a closure given to a compiled
step, complex, mixed-dtype and bfloat16 parameters, and ``state_dict`` round trips with a tensor
learning rate. Compared as ``probe_trainloop29.py`` compares (floats against a float64 run).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import sys
import warnings

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import r, run
from probe_optim import Net, record
from probe_trainloop29 import compare

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
CASES: dict = {}
N = 5
O = torch.optim
S = torch.optim.lr_scheduler


def tlr(v):
    return lambda: torch.tensor(v)


def opt(cls, **kw):
    def make(params):
        return cls(params, **{k: (v() if callable(v) else v) for k, v in kw.items()})

    return make


class Net2(nn.Module):
    """Only matrices (Muon takes 2-D parameters), one of them out of the loss."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3, bias=False)
        self.b = nn.Linear(3, 2, bias=False)
        self.unused = nn.Parameter(torch.randn(2, 2))

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def train_case(name, make, *, full=False, sched=None, net=Net, metric=False, sched_inside=False):
    """Five steps of ``make(params)``, the step compiled alone or with forward and backward;
    ``sched(opt)`` stepped after each (with the loss tensor as metric if ``metric``)."""

    def fn(C, rec):
        model = net() if getattr(net, "fixed_dtype", False) else net().to(C.dtype)
        o = make(model.parameters())
        sch = sched(o) if sched else None

        def sch_step(loss):
            if sch is not None:
                sch.step(loss) if metric else sch.step()

        def train(x):
            loss = model(x).square().mean()
            loss.backward()
            o.step()
            o.zero_grad()
            if sched_inside:
                sch_step(loss.detach())
            return loss.detach()

        step, ctrain = C(o.step), C(train)
        for i in range(N):
            x = r(6, 4, seed=i).to(C.dtype)
            if full:
                loss = ctrain(x)
            else:
                loss = model(x).square().mean()
                loss.backward()
                step()
                o.zero_grad()
            rec(f"loss {i}", loss.detach())
            record(rec, i, model, o)
            if not sched_inside:
                sch_step(loss.detach())
            C.tick(i)

    fn.full, fn.steady = full, 99
    assert name not in CASES, name
    CASES[name] = fn


# ============================================================================================
TENSOR_LR = {
    "sgd-nesterov": opt(O.SGD, lr=tlr(0.1), momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd-foreach": opt(O.SGD, lr=tlr(0.1), momentum=0.9, foreach=True),
    "adamw": opt(O.AdamW, lr=tlr(0.01), weight_decay=0.1),
    "adamw-amsgrad-foreach": opt(O.AdamW, lr=tlr(0.01), amsgrad=True, foreach=True),
    "adam-max-amsgrad": opt(O.Adam, lr=tlr(0.01), amsgrad=True, maximize=True, foreach=False),
    "adagrad": opt(O.Adagrad, lr=tlr(0.1), lr_decay=0.1),
    "adagrad-foreach": opt(O.Adagrad, lr=tlr(0.1), foreach=True),
    "adadelta": opt(O.Adadelta, lr=tlr(1.0), weight_decay=0.1),
    "adadelta-foreach": opt(O.Adadelta, lr=tlr(1.0), foreach=True),
    "adamax": opt(O.Adamax, lr=tlr(0.02)),
    "adamax-foreach": opt(O.Adamax, lr=tlr(0.02), foreach=True),
    "nadam": opt(O.NAdam, lr=tlr(0.02), momentum_decay=0.01),
    "nadam-decoupled-foreach": opt(
        O.NAdam, lr=tlr(0.02), weight_decay=0.1, decoupled_weight_decay=True, foreach=True
    ),
    "radam": opt(O.RAdam, lr=tlr(0.02)),
    "radam-foreach": opt(O.RAdam, lr=tlr(0.02), foreach=True),
    "rmsprop-centered": opt(O.RMSprop, lr=tlr(0.01), centered=True, momentum=0.9),
    "rmsprop-foreach": opt(O.RMSprop, lr=tlr(0.01), foreach=True),
    "rprop": opt(O.Rprop, lr=tlr(0.01)),
    "rprop-foreach": opt(O.Rprop, lr=tlr(0.01), foreach=True),
    "asgd": opt(O.ASGD, lr=tlr(0.05), t0=2),
    "asgd-foreach": opt(O.ASGD, lr=tlr(0.05), t0=2, foreach=True),
    "adafactor": opt(O.Adafactor, lr=tlr(0.01)),
}
for _n, _m in TENSOR_LR.items():
    train_case(f"step tlr {_n}", _m)
    train_case(f"train tlr {_n}", _m, full=True)

OTHERS = {
    "adafactor": opt(O.Adafactor, lr=0.01),
    "adafactor-wd-max": opt(O.Adafactor, lr=0.01, weight_decay=0.1, maximize=True),
    "adafactor-foreach": opt(O.Adafactor, lr=0.01, foreach=True, beta2_decay=-0.5, d=2.0),
    "adafactor-eps-none": opt(O.Adafactor, lr=0.01, eps=(None, 1e-3)),
    "sgd-differentiable": opt(O.SGD, lr=0.1, momentum=0.9, differentiable=True),
    "rmsprop-differentiable": opt(O.RMSprop, lr=0.01, centered=True, differentiable=True),
    "nadam-differentiable": opt(O.NAdam, lr=0.02, differentiable=True),
    "adagrad-differentiable": opt(O.Adagrad, lr=0.1, differentiable=True),
    "rprop-etas": opt(O.Rprop, lr=0.01, etas=(0.3, 1.5), step_sizes=(1e-4, 0.02)),
}
for _n, _m in OTHERS.items():
    train_case(f"step {_n}", _m)
    train_case(f"train {_n}", _m, full=True)

if hasattr(O, "Muon"):
    for _n, _kw in {
        "muon": {"lr": 0.02},
        "muon-nesterov-off-wd": {"lr": 0.02, "nesterov": False, "weight_decay": 0.1},
        "muon-tlr": {"lr": tlr(0.02)},
    }.items():
        train_case(f"step {_n}", opt(O.Muon, **_kw), net=Net2)
        train_case(f"train {_n}", opt(O.Muon, **_kw), full=True, net=Net2)

SCHEDS = {
    "warm-restarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=1e-4),
    "sequential": lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=2), S.ExponentialLR(o, 0.7)], [2]
    ),
    "chained": lambda o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 2), S.ExponentialLR(o, 0.9)]),
    "multistep": lambda o: S.MultiStepLR(o, [1, 3], gamma=0.3),
    "polynomial": lambda o: S.PolynomialLR(o, total_iters=4, power=2.0),
    "onecycle-cos-mom": lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=N + 1),
}
for _s, _mk in SCHEDS.items():
    for _n, _m in {
        "sgd-mom": opt(O.SGD, lr=0.1, momentum=0.9),
        "adamw-tlr": opt(O.AdamW, lr=tlr(0.01)),
        "nadam-tlr": opt(O.NAdam, lr=tlr(0.02)),
    }.items():
        train_case(f"step sched-{_s} {_n}", _m, sched=_mk)
        train_case(f"train sched-{_s} {_n}", _m, full=True, sched=_mk)

for _n, _m in {
    "sgd": opt(O.SGD, lr=0.1, momentum=0.9),
    "adam-tlr": opt(O.Adam, lr=tlr(0.01)),
}.items():
    _cyc = lambda o: S.CyclicLR(o, 0.001, 0.05, step_size_up=2, cycle_momentum=True)
    train_case(f"step sched-cyclic {_n}", _m, sched=_cyc)
    train_case(f"train sched-cyclic {_n}", _m, full=True, sched=_cyc)
    _pl = lambda o: S.ReduceLROnPlateau(o, "max", factor=0.5, patience=0, threshold=0.5)
    train_case(f"step sched-plateau-tensor {_n}", _m, sched=_pl, metric=True)
    train_case(f"train sched-plateau-tensor {_n}", _m, full=True, sched=_pl, metric=True)
    train_case(
        f"train sched-plateau-inside {_n}", _m, full=True, sched=_pl, metric=True, sched_inside=True
    )
    train_case(
        f"train sched-steplr-inside {_n}",
        _m,
        full=True,
        sched=lambda o: S.StepLR(o, 2, 0.5),
        sched_inside=True,
    )


# ============================================================================================
def case(full=True):
    def deco(fn):
        fn.full, fn.steady = full, 99
        name = fn.__name__.removeprefix("case_").replace("_", "-")
        assert name not in CASES, name
        CASES[name] = fn
        return fn

    return deco


def _clip_case(name, clip):
    def fn(C, rec):
        model = Net().to(C.dtype)
        o = O.SGD(model.parameters(), lr=0.1)

        @C
        def train(x):
            loss = model(x).square().mean()
            loss.backward()
            n = clip(list(model.parameters()))
            o.step()
            o.zero_grad()
            return loss.detach(), n

        for i in range(N):
            x = r(6, 4, seed=i).to(C.dtype)
            if i == 3:
                x[0, 0] = float("nan") if "nan" in name else float("inf")
            rec(f"out {i}", list(train(x)))
            record(rec, i, model, o)

    fn.full, fn.steady = True, 99
    CASES[name] = fn


def _total_then_clip(ps):
    grads = [p.grad for p in ps if p.grad is not None]
    total = nn.utils.get_total_norm(grads, 2.0, foreach=True)
    nn.utils.clip_grads_with_norm_(ps, 0.05, total, foreach=True)
    return total


_CLIPS = {
    "clip-total-then-clip": _total_then_clip,
    "clip-total-inf-noforeach": lambda ps: nn.utils.clip_grads_with_norm_(
        ps, 0.05, nn.utils.get_total_norm([p.grad for p in ps if p.grad is not None], "inf")
    ),
    "clip-norm3": lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, norm_type=3.0),
    "clip-norm0.5-foreach": lambda ps: nn.utils.clip_grad_norm_(ps, 0.5, 0.5, foreach=True),
    "clip-inf-noforeach": lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, "inf", foreach=False),
    "clip-nonfinite-nan-raise": lambda ps: nn.utils.clip_grad_norm_(
        ps, 0.1, error_if_nonfinite=True
    ),
    "clip-nonfinite-inf-raise-noforeach": lambda ps: nn.utils.clip_grad_norm_(
        ps, 0.1, error_if_nonfinite=True, foreach=False
    ),
    "clip-nonfinite-inf-norm-inf-raise": lambda ps: nn.utils.clip_grad_norm_(
        ps, 0.1, norm_type=float("inf"), error_if_nonfinite=True
    ),
    "clip-value-foreach": lambda ps: nn.utils.clip_grad_value_(ps, 0.01, foreach=True),
    "clip-value-noforeach": lambda ps: nn.utils.clip_grad_value_(ps, 0.01, foreach=False),
    "clip-norm-tensor-max": lambda ps: nn.utils.clip_grad_norm_(ps, torch.tensor(0.05)),
}
for _c, _f in _CLIPS.items():
    _clip_case(_c, _f)


@case()
def case_swalr_compiled_step(C, rec):
    from torch.optim.swa_utils import SWALR, AveragedModel

    model = Net().to(C.dtype)
    o = O.SGD(model.parameters(), lr=0.1, momentum=0.9)
    swa = AveragedModel(model)
    sch = SWALR(o, swa_lr=0.02, anneal_epochs=2, anneal_strategy="linear")

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        o.step()
        o.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        swa.update_parameters(model)
        sch.step()
        rec(f"swa {i}", list(swa.parameters()))
        rec(f"n_averaged {i}", swa.n_averaged)
        record(rec, i, model, o)


class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3, bias=False)  # (a bias before BatchNorm: a gradient of noise)
        self.bn = nn.BatchNorm1d(3)
        self.b = nn.Linear(3, 2)

    def forward(self, x):
        return self.b(self.bn(self.a(x)).relu())


@case()
def case_swa_update_bn_compiled_model(C, rec):
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn, update_bn

    model = BNNet().to(C.dtype)
    o = O.AdamW(model.parameters(), lr=0.01)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.8), use_buffers=True)
    cm, cema = C(model), C(ema)
    loader = [r(6, 4, seed=20 + k).to(C.dtype) for k in range(3)]
    for i in range(N):
        cm(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        o.step()
        o.zero_grad()
        ema.update_parameters(model)
        rec(f"ema {i}", list(ema.parameters()) + list(ema.buffers()))
        record(rec, i, model, o)
    update_bn(loader, cema)
    rec("bn after update_bn", list(ema.buffers()))
    rec("ema eval", cema.eval()(r(5, 4, seed=9).to(C.dtype)))


@case()
def case_optimizer_step_hooks(C, rec):
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01)
    seen = []

    def pre(opt, args, kwargs):
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(0.5)

    def post(opt, args, kwargs):
        seen.append(len(opt.state))

    o.register_step_pre_hook(pre)
    o.register_step_post_hook(post)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        o.step()
        o.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        rec(f"seen {i}", list(seen))
        record(rec, i, model, o)


@case()
def case_closure_to_compiled_step(C, rec):
    model = Net().to(C.dtype)
    o = O.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train(x):
        def closure():
            o.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            return loss

        return o.step(closure)

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, o)


@case()
def case_closure_adam_compiled_step_fn(C, rec):
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01, amsgrad=True)
    x = r(6, 4, seed=1).to(C.dtype)

    def closure():
        o.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss

    step = C(o.step)
    for i in range(N):
        rec(f"loss {i}", step(closure))
        record(rec, i, model, o)


class CNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3, dtype=torch.complex64))
        self.v = nn.Parameter(torch.randn(3, dtype=torch.complex64))

    def forward(self, x):
        return (x.to(self.w.dtype) @ self.w + self.v).abs()


for _n, _m in {
    "sgd": opt(O.SGD, lr=0.1, momentum=0.9, weight_decay=0.1),
    "adam": opt(O.Adam, lr=0.01),
    "adamw-amsgrad-foreach": opt(O.AdamW, lr=0.01, amsgrad=True, foreach=True),
    "rmsprop-centered": opt(O.RMSprop, lr=0.01, centered=True),
    "adagrad": opt(O.Adagrad, lr=0.1),
    "nadam": opt(O.NAdam, lr=0.01),
    "radam": opt(O.RAdam, lr=0.01),
    "adamax": opt(O.Adamax, lr=0.01),
    "asgd": opt(O.ASGD, lr=0.01),
    "adadelta": opt(O.Adadelta, lr=1.0),
    "rprop": opt(O.Rprop, lr=0.01),
}.items():

    def _complex(C, rec0, _m=_m, full=False):
        def rec(label, v):  # (as real pairs: floats compared in ulps of the largest)
            real = lambda t: torch.view_as_real(t) if torch.is_tensor(t) and t.is_complex() else t
            rec0(label, [real(t) for t in v] if isinstance(v, list) else real(v))

        model = CNet()
        if C.dtype == torch.float64:
            model = model.to(torch.complex128)
        o = _m(model.parameters())

        def train(x):
            loss = model(x).square().mean()
            loss.backward()
            o.step()
            o.zero_grad()
            return loss.detach()

        step, ctrain = C(o.step), C(train)
        for i in range(4):
            x = r(6, 4, seed=i).to(C.dtype)
            if full:
                loss = ctrain(x)
            else:
                loss = model(x).square().mean()
                loss.backward()
                step()
                o.zero_grad()
            rec(f"loss {i}", loss.detach())
            record(rec, i, model, o)

    for _full in (False, True):
        f = functools.partial(_complex, full=_full)
        f.full, f.steady = _full, 99
        CASES[f"{'train' if _full else 'step'} complex {_n}"] = f


class MixedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(3, 2).double()

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)).double()).float()


for _n, _m in {
    "adam-foreach": opt(O.Adam, lr=0.01, foreach=True),
    "sgd-foreach": opt(O.SGD, lr=0.1, momentum=0.9, foreach=True),
    "rmsprop-foreach": opt(O.RMSprop, lr=0.01, foreach=True, centered=True),
    "adam-tlr-foreach": opt(O.Adam, lr=tlr(0.01), foreach=True),
}.items():
    train_case(f"step mixed-dtype {_n}", _m, net=MixedNet)
    train_case(f"train mixed-dtype {_n}", _m, net=MixedNet, full=True)


class BF16In(nn.Module):
    fixed_dtype = True

    def __init__(self):
        super().__init__()
        self.m = Net().to(torch.bfloat16)

    def forward(self, x):
        return self.m(x.to(torch.bfloat16)).float()


class F16In(nn.Module):
    fixed_dtype = True

    def __init__(self):
        super().__init__()
        self.m = Net().to(torch.float16)

    def forward(self, x):
        return self.m(x.to(torch.float16)).float()


for _n, _m in {
    "adamw": opt(O.AdamW, lr=0.01),
    "adamw-foreach": opt(O.AdamW, lr=0.01, foreach=True),
    "sgd-mom": opt(O.SGD, lr=0.1, momentum=0.9),
    "adafactor": opt(O.Adafactor, lr=0.01),
}.items():
    train_case(f"step bf16 {_n}", _m, net=BF16In)
    train_case(f"train bf16 {_n}", _m, net=BF16In, full=True)
    train_case(f"step f16 {_n}", _m, net=F16In)
    train_case(f"train f16 {_n}", _m, net=F16In, full=True)


@case()
def case_state_dict_roundtrip_tensor_lr_new_optimizer(C, rec):
    model = Net().to(C.dtype)
    o = O.AdamW(model.parameters(), lr=torch.tensor(0.01), amsgrad=True)
    sch = S.ExponentialLR(o, 0.8)

    def make_step(o):
        @C
        def step():
            o.step()

        return step

    step = make_step(o)
    for i in range(N):
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        step()
        o.zero_grad()
        sch.step()
        record(rec, i, model, o)
        if i == 2:
            sd = copy.deepcopy(o.state_dict())
            ssd = sch.state_dict()
            o = O.AdamW(model.parameters(), lr=torch.tensor(0.5), amsgrad=True)
            o.load_state_dict(sd)
            sch = S.ExponentialLR(o, 0.8)
            sch.load_state_dict(ssd)
            step = make_step(o)
            rec("loaded lr", o.param_groups[0]["lr"])


@case()
def case_add_param_group_tensor_lr_grad_none(C, rec):
    model = Net().to(C.dtype)
    extra = nn.Linear(2, 2).to(C.dtype)
    o = O.Adam(model.parameters(), lr=torch.tensor(0.01))

    @C
    def train(x, use_extra):
        y = model(x)
        if use_extra:
            y = extra(y)
        loss = y.square().mean()
        loss.backward()
        o.step()
        o.zero_grad()
        return loss.detach()

    for i in range(N):
        if i == 1:
            o.add_param_group({"params": list(extra.parameters()), "lr": torch.tensor(0.02)})
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype), i >= 3))
        rec(f"extra {i}", list(extra.parameters()))
        rec(f"extra state {i}", [sorted(o.state.get(p, {})) for p in extra.parameters()])
        record(rec, i, model, o)


@case()
def case_accumulation_zero_grad_false_compiled_step(C, rec):
    model = Net().to(C.dtype)
    cm = C(model)
    o = O.RMSprop(model.parameters(), lr=0.01, momentum=0.5)

    @C
    def step():
        o.step()
        o.zero_grad(set_to_none=False)

    for i in range(N):
        for k in range(2):
            (cm(r(6, 4, seed=10 * i + k).to(C.dtype)).square().mean() / 2).backward()
        rec(f"acc {i}", [p.grad for p in model.parameters()])
        step()
        record(rec, i, model, o)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.emb(idx)))


for _n, _m in {
    "adamw-tlr": opt(O.AdamW, lr=tlr(0.01)),
    "sgd-nesterov-foreach": opt(O.SGD, lr=0.1, momentum=0.9, nesterov=True, foreach=True),
    "adafactor": opt(O.Adafactor, lr=0.01),
}.items():

    def _tied(C, rec, _m=_m):
        model = Tied().to(C.dtype)
        o = _m(model.parameters())
        idx = torch.tensor([[1, 2, 3], [4, 5, 6]])

        @C
        def train(idx):
            loss = model(idx).square().mean()
            loss.backward()
            o.step()
            o.zero_grad()
            return loss.detach()

        for i in range(4):
            rec(f"loss {i}", train((idx + i) % 7))
            rec(f"tied {i}", model.head.weight is model.emb.weight)
            record(rec, i, model, o)

    _tied.full, _tied.steady = True, 99
    CASES[f"train tied {_n}"] = _tied


@case()
def case_lbfgs_tensor_lr_strong_wolfe(C, rec):
    model = Net().to(C.dtype)
    o = O.LBFGS(model.parameters(), lr=1, max_iter=3, line_search_fn="strong_wolfe")
    x = r(6, 4, seed=1).to(C.dtype)

    @C
    def train():
        def closure():
            o.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            return loss

        return o.step(closure)

    for i in range(3):
        rec(f"loss {i}", train())
        record(rec, i, model, o)


# ============================================================================================
# What users hold on to: the state tensors' identity, storage and strides after compiled steps
def _layout(rec, label, t):
    rec(f"{label} stride", list(t.stride()))
    rec(f"{label} contiguous", t.is_contiguous())


class TNet(nn.Module):
    """A transposed (non-contiguous) weight and a channels-last convolution."""

    def __init__(self):
        super().__init__()
        self.wt = nn.Parameter(torch.randn(4, 3).t())
        self.conv = nn.Conv2d(2, 3, 3).to(memory_format=torch.channels_last)

    def forward(self, x):
        y = self.conv(x.reshape(2, 2, 4, 4))
        return (y.flatten(1)[:, :3] @ self.wt).square().mean()


for _n, _m in {
    "adam": opt(O.Adam, lr=0.01, foreach=False),
    "adamw-foreach": opt(O.AdamW, lr=0.01, foreach=True, amsgrad=True),
    "sgd-mom-foreach": opt(O.SGD, lr=0.1, momentum=0.9, foreach=True),
    "rmsprop": opt(O.RMSprop, lr=0.01, centered=True, momentum=0.5, foreach=False),
    "adafactor": opt(O.Adafactor, lr=0.01),
}.items():
    for _full in (False, True):

        def _identity(C, rec, _m=_m, full=_full):
            model = TNet().to(C.dtype)
            o = _m(model.parameters())

            def train(x):
                loss = model(x)
                loss.backward()
                o.step()
                o.zero_grad(set_to_none=False)
                return loss.detach()

            step, ctrain = C(o.step), C(train)
            held = None
            for i in range(4):
                x = r(8, 8, seed=i).to(C.dtype)
                if full:
                    loss = ctrain(x)
                else:
                    loss = model(x)
                    loss.backward()
                    step()
                    o.zero_grad(set_to_none=False)
                rec(f"loss {i}", loss)
                ps = list(model.parameters())
                rec(f"params {i}", ps)
                for j, p in enumerate(ps):
                    _layout(rec, f"p{j} {i}", p)
                    _layout(rec, f"grad{j} {i}", p.grad)
                    for k, v in sorted(o.state[p].items()):
                        rec(f"state {i} p{j} {k}", v)
                        if torch.is_tensor(v) and v.dim():
                            _layout(rec, f"state {i} p{j} {k}", v)
                now = [
                    (id(p.grad), *[(k, id(v)) for k, v in sorted(o.state[p].items())]) for p in ps
                ]
                if held is not None:
                    rec(f"same objects {i}", now == held)
                held = now
                ptrs = [p.grad.data_ptr() for p in ps] + [
                    v.data_ptr() for p in ps for v in o.state[p].values() if torch.is_tensor(v)
                ]
                rec(f"distinct storage {i}", len(set(ptrs)) == len(ptrs))

        _identity.full, _identity.steady = _full, 99
        CASES[f"{'train' if _full else 'step'} identity {_n}"] = _identity


@case()
def case_tensor_lr_filled_inside_compiled_step(C, rec):
    model = Net().to(C.dtype)
    o = O.AdamW(model.parameters(), lr=torch.tensor(0.01), weight_decay=0.1)

    @C
    def train(x, new_lr):
        o.param_groups[0]["lr"].fill_(new_lr)
        loss = model(x).square().mean()
        loss.backward()
        o.step()
        o.zero_grad()
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype), torch.tensor(0.01 / (i + 1))))
        record(rec, i, model, o)


@case()
def case_skip_step_on_nonfinite_norm(C, rec):
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if torch.isfinite(norm):
            o.step()
        o.zero_grad()
        return loss.detach(), norm

    for i in range(N):
        x = r(6, 4, seed=i).to(C.dtype)
        if i == 2:
            x[1, 1] = float("inf")
        rec(f"out {i}", list(train(x)))
        record(rec, i, model, o)


@case()
def case_swa_update_parameters_compiled(C, rec):
    from torch.optim.swa_utils import AveragedModel, get_ema_avg_fn

    model = Net().to(C.dtype)
    avg = AveragedModel(model, avg_fn=get_ema_avg_fn(0.7))
    o = O.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        o.step()
        o.zero_grad()
        avg.update_parameters(model)
        return loss.detach()

    for i in range(N):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        rec(f"avg {i}", list(avg.parameters()))
        rec(f"n_averaged {i}", avg.n_averaged)
        record(rec, i, model, o)


@case()
def case_expanded_grads_set_by_hand(C, rec):
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01, foreach=True)
    step = C(o.step)
    for i in range(N):
        for p in model.parameters():
            p.grad = torch.full((1,) * p.dim(), 0.1 * (i + 1), dtype=C.dtype).expand_as(p)
        step()
        record(rec, i, model, o)


@case()
def case_manual_accumulate_update_compiled(C, rec):
    model = Net().to(C.dtype)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)

    @C
    def micro(x):
        model(x).square().mean().backward()

    @C
    def update(lr):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
                p.grad.zero_()

    for i in range(N):
        for k in range(2):
            micro(r(6, 4, seed=10 * i + k).to(C.dtype))
        rec(f"acc {i}", [p.grad for p in model.parameters()])
        update(0.1)
        rec(f"params {i}", list(model.parameters()))
        rec(f"grads {i}", [p.grad for p in model.parameters()])


# ============================================================================================


# ============================================================================================
# Flat buffers (parameters and gradients as views of one tensor), empty and 0-dim parameters
def _flatten_into(model, dtype, grads):
    ps = list(model.parameters())
    flat = torch.zeros(sum(p.numel() for p in ps) + 3, dtype=dtype)
    gflat = torch.zeros_like(flat)
    o = 1
    for p in ps:
        n = p.numel()
        flat[o : o + n].copy_(p.data.flatten())
        p.data = flat[o : o + n].view_as(p)
        if grads:
            p.grad = gflat[o : o + n].view_as(p)
        o += n
    return flat, gflat


for _n, _m in {
    "sgd-mom": opt(O.SGD, lr=0.1, momentum=0.9, foreach=False),
    "adamw-foreach": opt(O.AdamW, lr=0.01, foreach=True),
    "adam-tlr": opt(O.Adam, lr=tlr(0.01)),
}.items():
    for _full in (False, True):
        for _grads in (False, True):

            def _flat(C, rec, _m=_m, full=_full, grads=_grads):
                model = Net().to(C.dtype)
                flat, gflat = _flatten_into(model, C.dtype, grads)
                o = _m(model.parameters())

                def train(x):
                    loss = model(x).square().mean()
                    loss.backward()
                    o.step()
                    o.zero_grad(set_to_none=not grads)
                    return loss.detach()

                step, ctrain = C(o.step), C(train)
                for i in range(4):
                    x = r(6, 4, seed=i).to(C.dtype)
                    if full:
                        loss = ctrain(x)
                    else:
                        loss = model(x).square().mean()
                        loss.backward()
                        rec(f"gflat before step {i}", gflat)
                        step()
                        o.zero_grad(set_to_none=not grads)
                    rec(f"loss {i}", loss)
                    rec(f"flat {i}", flat)
                    rec(f"gflat {i}", gflat)
                    rec(f"views {i}", [p.data_ptr() - flat.data_ptr() for p in model.parameters()])
                    record(rec, i, model, o)

            _flat.full, _flat.steady = _full, 99
            _g = " grads" if _grads else ""
            CASES[f"{'train' if _full else 'step'} flat{_g} {_n}"] = _flat


class OddNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.temp = nn.Parameter(torch.tensor(1.5))
        self.empty = nn.Parameter(torch.zeros(0, 3))

    def forward(self, x):
        h = self.a(x) / self.temp
        return h + (self.empty.sum(0) if self.empty.numel() == 0 else 0)


for _n, _m in {
    "adam": opt(O.Adam, lr=0.01, foreach=False),
    "adamw-foreach": opt(O.AdamW, lr=0.01, foreach=True, amsgrad=True),
    "adafactor": opt(O.Adafactor, lr=0.01),
    "nadam-foreach": opt(O.NAdam, lr=0.01, foreach=True),
    "rprop": opt(O.Rprop, lr=0.01),
    "rmsprop-foreach": opt(O.RMSprop, lr=0.01, centered=True, foreach=True),
}.items():
    train_case(f"step odd-shapes {_n}", _m, net=OddNet)
    train_case(f"train odd-shapes {_n}", _m, net=OddNet, full=True)


def _clip_any(name, make_model, clip, full=True):
    def fn(C, rec):
        model = make_model().to(C.dtype) if make_model is not MixedNet else MixedNet()
        params = list(model.parameters())

        def train(x):
            loss = model(x).square().mean()
            loss.backward()
            return clip(params)

        ctrain = C(train)
        for i in range(3):
            x = r(6, 4, seed=i).to(torch.float32 if make_model is MixedNet else C.dtype)
            rec(f"norm {i}", ctrain(x))
            rec(f"grads {i}", [p.grad for p in params])
            for p in params:
                p.grad = None

    fn.full, fn.steady = full, 99
    CASES[name] = fn


_clip_any("clip mixed-dtype foreach", MixedNet, lambda ps: nn.utils.clip_grad_norm_(ps, 0.05))
_clip_any(
    "clip mixed-dtype inf",
    MixedNet,
    lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, "inf", foreach=False),
)
_clip_any("clip odd-shapes", OddNet, lambda ps: nn.utils.clip_grad_norm_(ps, 0.05))
_clip_any("clip single-tensor", Net, lambda ps: nn.utils.clip_grad_norm_(ps[0], 0.05))
_clip_any("clip all-grads-none", Net, lambda ps: nn.utils.clip_grad_norm_(ps[2:], 0.05))
_clip_any("clip empty-list", Net, lambda ps: nn.utils.clip_grad_norm_([], 0.05))
_clip_any("clip max-norm-zero", Net, lambda ps: nn.utils.clip_grad_norm_(ps, 0.0))
_clip_any("clip value-negative", Net, lambda ps: nn.utils.clip_grad_value_(ps, -0.01))
_clip_any("clip total-empty", Net, lambda ps: nn.utils.get_total_norm([]))
_clip_any("clip half-model", lambda: Net().half(), lambda ps: nn.utils.clip_grad_norm_(ps, 0.05))
_clip_any(
    "clip bf16-model-inf",
    lambda: Net().bfloat16(),
    lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, float("inf")),
)
_clip_any(
    "clip norm-type-neg-inf-error",
    Net,
    lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, float("-inf")),
)


@case()
def case_first_step_without_grads(C, rec):
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01, foreach=True)
    step = C(o.step)
    step()
    record(rec, -1, model, o)
    model(r(6, 4, seed=0).to(C.dtype)).square().mean().backward()
    step()
    record(rec, 0, model, o)


@case()
def case_adam_sparse_grad_raises(C, rec):
    emb = nn.Embedding(5, 3, sparse=True).to(C.dtype)
    o = O.Adam(emb.parameters(), lr=0.01)

    @C
    def train(idx):
        emb(idx).sum().backward()
        o.step()

    train(torch.tensor([1, 2]))
    record(rec, 0, emb, o)


# ============================================================================================
# Tensor learning rates of other dtypes, float64 by default, two optimizers, a GAN step
for _n, _m in {
    "adam-lr64": opt(O.Adam, lr=lambda: torch.tensor(0.01, dtype=torch.float64)),
    "adamw-lr64-foreach": opt(
        O.AdamW, lr=lambda: torch.tensor(0.01, dtype=torch.float64), foreach=True
    ),
    "sgd-lr64": opt(O.SGD, lr=lambda: torch.tensor(0.1, dtype=torch.float64), momentum=0.9),
    "radam-lr64": opt(O.RAdam, lr=lambda: torch.tensor(0.02, dtype=torch.float64)),
    "adagrad-lr16": opt(O.Adagrad, lr=lambda: torch.tensor(0.1, dtype=torch.float16)),
}.items():
    train_case(f"step {_n}", _m)
    train_case(f"train {_n}", _m, full=True)


@case()
def case_default_dtype_float64(C, rec):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        model = Net()
        o = O.Adam(model.parameters(), lr=0.01, amsgrad=True)

        @C
        def train(x):
            loss = model(x).square().mean()
            loss.backward()
            o.step()
            o.zero_grad()
            return loss.detach()

        for i in range(3):
            rec(f"loss {i}", train(r(6, 4, seed=i, dtype=torch.float64)))
            record(rec, i, model, o)
    finally:
        torch.set_default_dtype(old)


@case()
def case_one_compiled_step_two_optimizers(C, rec):
    m1, m2 = Net().to(C.dtype), Net().to(C.dtype)
    o1 = O.Adam(m1.parameters(), lr=0.01)
    o2 = O.Adam(m2.parameters(), lr=0.02)

    @C
    def step(o):
        o.step()
        o.zero_grad()

    for i in range(4):
        for m, o in ((m1, o1), (m2, o2)):
            m(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
            step(o)
        record(rec, i, m1, o1)
        record(rec, i, m2, o2)


@case()
def case_gan_step(C, rec):
    G = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 4)).to(C.dtype)
    D = nn.Sequential(nn.Linear(4, 3), nn.LeakyReLU(0.2), nn.Linear(3, 1)).to(C.dtype)
    og = O.Adam(G.parameters(), lr=0.01, betas=(0.5, 0.999))
    od = O.Adam(D.parameters(), lr=0.02, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()

    @C
    def train(real, z):
        fake = G(z)
        od.zero_grad()
        d_loss = bce(D(real), torch.ones(real.shape[0], 1, dtype=real.dtype)) + bce(
            D(fake.detach()), torch.zeros(z.shape[0], 1, dtype=real.dtype)
        )
        d_loss.backward()
        od.step()
        og.zero_grad()
        g_loss = bce(D(fake), torch.ones(z.shape[0], 1, dtype=real.dtype))
        g_loss.backward()
        og.step()
        return d_loss.detach(), g_loss.detach()

    for i in range(4):
        rec(
            f"losses {i}",
            list(train(r(5, 4, seed=i).to(C.dtype), r(5, 2, seed=50 + i).to(C.dtype))),
        )
        rec(f"G {i}", list(G.parameters()))
        rec(f"D {i}", list(D.parameters()))
        rec(f"D grads {i}", [p.grad for p in D.parameters()])


@case()
def case_fullgraph_adam_step(C, rec):
    model = Net().to(C.dtype)
    o = O.AdamW(model.parameters(), lr=torch.tensor(0.01), foreach=False)
    step = C(o.step, fullgraph=True)
    for i in range(3):
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        step()
        o.zero_grad()
        record(rec, i, model, o)


@case()
def case_autocast_step_inside(C, rec):
    model = Net().to(C.dtype)
    o = O.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    @C
    def train(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
            loss.backward()
            o.step()
            o.zero_grad()
        return loss.detach()

    for i in range(3):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, o)


case_autocast_step_inside.full = torch.bfloat16


# ============================================================================================
# Special values in the gradients (NaN and infinities through max, sign, sqrt of each update)
SPECIAL = {
    "adam-amsgrad": opt(O.Adam, lr=0.01, amsgrad=True, foreach=False),
    "adam-amsgrad-foreach": opt(O.Adam, lr=0.01, amsgrad=True, foreach=True),
    "adamax": opt(O.Adamax, lr=0.01, foreach=False),
    "adamax-foreach": opt(O.Adamax, lr=0.01, foreach=True),
    "rprop": opt(O.Rprop, lr=0.01, foreach=False),
    "rprop-foreach": opt(O.Rprop, lr=0.01, foreach=True),
    "rmsprop-centered": opt(O.RMSprop, lr=0.01, centered=True, momentum=0.5),
    "adagrad": opt(O.Adagrad, lr=0.1),
    "adadelta": opt(O.Adadelta, lr=1.0),
    "asgd": opt(O.ASGD, lr=0.01, t0=1),
    "nadam": opt(O.NAdam, lr=0.01),
    "radam": opt(O.RAdam, lr=0.01),
    "sgd-nesterov-max": opt(O.SGD, lr=0.1, momentum=0.9, nesterov=True, maximize=True),
    "adafactor": opt(O.Adafactor, lr=0.01),
}
_VALS = [
    float("nan"),
    float("inf"),
    float("-inf"),
    0.0,
    -0.0,
    1e-3,
    -3.0,
    2.0,
    1e30,
    -1e-10,
]  # (no subnormals: XLA's CPU flushes them, a known limitation)

for _n, _m in SPECIAL.items():

    def _special(C, rec, _m=_m):
        p = nn.Parameter(torch.arange(20, dtype=C.dtype).reshape(4, 5) / 7 - 1)
        q = nn.Parameter(torch.zeros(3, dtype=C.dtype))
        o = _m([p, q])
        step = C(o.step)
        for i in range(4):
            g = torch.tensor(_VALS * 2, dtype=C.dtype).roll(i).reshape(4, 5)
            p.grad = g.clone() if i != 1 else torch.linspace(-1, 1, 20, dtype=C.dtype).reshape(4, 5)
            q.grad = torch.tensor([1.0, -2.0, 0.5], dtype=C.dtype) * (i + 1)
            step()
            rec(f"p {i}", p)
            rec(f"q {i}", q)
            for k, v in sorted(o.state[p].items()):
                rec(f"state {i} {k}", v)

    _special.full, _special.steady = False, 99
    CASES[f"step special {_n}"] = _special


# ============================================================================================
# Tensor hyperparameters that alias: one lr tensor for two groups, an lr that is a view of a
# schedule tensor written between steps, state tensors replaced by non-contiguous ones
@case()
def case_one_lr_tensor_two_groups_scheduled(C, rec):
    model = Net().to(C.dtype)
    lr = torch.tensor(0.01)
    o = O.Adam(
        [
            {"params": list(model.a.parameters()), "lr": lr},
            {"params": list(model.b.parameters()), "lr": lr},
        ]
    )
    sch = S.ExponentialLR(o, 0.5)

    @C
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        o.step()
        o.zero_grad()
        return loss.detach()

    for i in range(4):
        rec(f"loss {i}", train(r(6, 4, seed=i).to(C.dtype)))
        record(rec, i, model, o)
        rec(f"same lr {i}", o.param_groups[0]["lr"] is o.param_groups[1]["lr"])
        sch.step()


@case()
def case_lr_view_of_schedule_tensor(C, rec):
    model = Net().to(C.dtype)
    sched = torch.tensor([0.01, 0.02, 0.005, 0.001])
    cur = torch.zeros(2)
    o = O.SGD(model.parameters(), lr=cur[1], momentum=0.9)
    step = C(o.step)
    for i in range(4):
        cur[1] = sched[i]
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        step()
        o.zero_grad()
        record(rec, i, model, o)


@case()
def case_state_replaced_by_non_contiguous(C, rec):
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01)
    step = C(o.step)
    for i in range(4):
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        step()
        o.zero_grad()
        if i == 1:
            for p in model.parameters():
                for k in ("exp_avg", "exp_avg_sq"):
                    if p in o.state and o.state[p][k].dim() == 2:
                        o.state[p][k] = o.state[p][k].t().contiguous().t()
        record(rec, i, model, o)
        for p in model.parameters():
            if p in o.state:
                rec(f"stride {i}", [list(v.stride()) for v in o.state[p].values()])


@case()
def case_state_dict_loaded_then_compiled_step_sees_it(C, rec):
    model = Net().to(C.dtype)
    o = O.AdamW(model.parameters(), lr=0.01)
    step = C(o.step)
    saved = None
    for i in range(5):
        model(r(6, 4, seed=i).to(C.dtype)).square().mean().backward()
        step()
        o.zero_grad()
        if i == 1:
            saved = copy.deepcopy((model.state_dict(), o.state_dict()))
        if i == 3:  # (back to step 1: the same optimizer, same compiled step)
            model.load_state_dict(saved[0])
            o.load_state_dict(saved[1])
        record(rec, i, model, o)


@case(full=False)
def case_parameters_changed_dtype_after_compile(C, rec):
    # (eager's lerp_ refuses the float64 grad into the float32 state: Dynamo guards no dtype
    # of an optimizer's get_attr tensors; aot_eager raises as eager, torch2xla runs)
    model = Net().to(C.dtype)
    o = O.Adam(model.parameters(), lr=0.01, foreach=False)
    step = C(o.step)
    for i in range(3):
        if i == 2:
            model.double()
        model(r(6, 4, seed=i).to(model.a.weight.dtype)).square().mean().backward()
        step()
        o.zero_grad()
    record(rec, 2, model, o)  # (eager raised before: this records the run that should not)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(run(sys.argv[1:], CASES, compare))
