"""Session 33: optimizers and training utilities ``test_optim_s20.py`` leaves out
(``scripts/probe_optim33.py``), against eager step by step: a tensor learning rate for the
optimizers other than SGD and Adam, Adafactor and Muon, ``get_total_norm`` with
``clip_grads_with_norm_`` and a non-finite norm raising in a compiled step, parameters and
gradients that are views of one flat buffer, NaN, infinities and signed zeros in the gradients,
and ``swa_utils`` inside a compiled step.

Floats within 8 ulps of the tensor's largest eager value, as ``test_optim_s20.py`` compares a
compiled ``opt.step`` (its ``_close`` says why); NaN and infinities where eager has them.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch2xla
from tests.test_optim_s20 import _close, _Net, _snapshot

O = torch.optim


def _compile(fn):
    return torch.compile(fn, backend="xla")


def _x(i, *shape):
    return torch.randn(*shape or (6, 4), generator=torch.Generator().manual_seed(i))


class _Matrices(nn.Module):
    """Only matrices (Muon takes 2-D parameters), one of them out of the loss."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3, bias=False)
        self.b = nn.Linear(3, 2, bias=False)
        self.unused = nn.Parameter(torch.randn(2, 2))

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def _steps(make, compiled, net=_Net, n=3):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = net()
    opt = make(model.parameters())
    step, out = (_compile(opt.step) if compiled else opt.step), []
    for i in range(n):
        model(_x(i)).square().mean().backward()
        step()
        opt.zero_grad()
        out.append(_snapshot(model, opt))
    return out


_TENSOR_LR = {
    "adagrad": lambda ps: O.Adagrad(ps, lr=torch.tensor(0.1), lr_decay=0.1),
    "adadelta": lambda ps: O.Adadelta(ps, lr=torch.tensor(1.0), weight_decay=0.1),
    "rmsprop-centered": lambda ps: O.RMSprop(
        ps, lr=torch.tensor(0.01), centered=True, momentum=0.9
    ),
    "rprop-foreach": lambda ps: O.Rprop(ps, lr=torch.tensor(0.01), foreach=True),
    "asgd": lambda ps: O.ASGD(ps, lr=torch.tensor(0.05), t0=2),
    "radam": lambda ps: O.RAdam(ps, lr=torch.tensor(0.02)),
    "adafactor": lambda ps: O.Adafactor(ps, lr=torch.tensor(0.01)),
    "adafactor-foreach-max": lambda ps: O.Adafactor(
        ps, lr=0.01, foreach=True, maximize=True, weight_decay=0.1
    ),
}
if hasattr(O, "Muon"):  # (torch 2.9 and later)
    _TENSOR_LR["muon"] = lambda ps: O.Muon(ps, lr=torch.tensor(0.02), weight_decay=0.1)


@pytest.mark.parametrize("name", list(_TENSOR_LR))
def test_tensor_lr_optimizer_steps_as_eager(name):
    """Parameters, every state tensor (``step``'s dtype and device too), ``param_groups``
    (the lr a tensor) and grads after ``zero_grad``; a parameter no loss reaches keeps the
    state eager gives it (none, or Adagrad's made at construction)."""
    net = _Matrices if name == "muon" else _Net
    got = _steps(_TENSOR_LR[name], True, net)
    want = _steps(_TENSOR_LR[name], False, net)
    _close(got, want, name, ulps=8)


def _clip_run(compiled, clip, inf_at=None):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Net()
    opt = O.SGD(model.parameters(), lr=0.1)

    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        norm = clip(list(model.parameters()))
        opt.step()
        opt.zero_grad()
        return loss.detach(), norm

    fn, out = (_compile(train) if compiled else train), []
    for i in range(3):
        x = _x(i)
        if i == inf_at:
            x[0, 0] = float("inf")
        try:
            out.append((*fn(x), [p.detach().clone() for p in model.parameters()]))
        except RuntimeError as e:
            out.append((type(e), str(e).split("\n")[0]))
    return out


def _total_then_clip(ps):
    grads = [p.grad for p in ps if p.grad is not None]
    total = nn.utils.get_total_norm(grads, 3.0, foreach=True)
    nn.utils.clip_grads_with_norm_(ps, 0.05, total, foreach=True)
    return total


_CLIPS = {
    "get_total_norm-clip_grads_with_norm_": (_total_then_clip, None),
    "inf-norm-no-foreach": (
        lambda ps: nn.utils.clip_grad_norm_(ps, 0.05, "inf", foreach=False),
        None,
    ),
    "nonfinite-raises": (
        lambda ps: nn.utils.clip_grad_norm_(ps, 0.1, error_if_nonfinite=True, foreach=False),
        1,
    ),
}


@pytest.mark.parametrize("name", list(_CLIPS))
def test_gradient_clipping_in_a_compiled_step_as_eager(name):
    clip, inf_at = _CLIPS[name]
    got, want = _clip_run(True, clip, inf_at), _clip_run(False, clip, inf_at)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w[0], type):  # (eager raised: the same error, its first line)
            assert g[0] is w[0] and w[1] in g[1], (g, w)
        else:
            _close(list(g), list(w), name, ulps=64)


def _flat_run(compiled):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Net()
    ps = list(model.parameters())
    flat = torch.zeros(sum(p.numel() for p in ps) + 3)
    gflat = torch.zeros_like(flat)
    o = 1
    for p in ps:  # (as a bucketed data-parallel wrapper lays them out)
        n = p.numel()
        flat[o : o + n].copy_(p.data.flatten())
        p.data = flat[o : o + n].view_as(p)
        p.grad = gflat[o : o + n].view_as(p)
        o += n
    opt = O.SGD(ps, lr=0.1, momentum=0.9)

    @(_compile if compiled else (lambda f: f))
    def step():
        opt.step()
        opt.zero_grad(set_to_none=False)

    out = []
    for i in range(3):
        model(_x(i)).square().mean().backward()
        before = gflat.clone()
        step()
        views = [(p.data_ptr() - flat.data_ptr(), p.grad.data_ptr() - gflat.data_ptr()) for p in ps]
        out.append((before, flat.clone(), gflat.clone(), views, *_snapshot(model, opt)))
    return out


def test_parameters_and_gradients_viewing_flat_buffers_through_compiled_steps():
    """The update lands in the flat buffers, the gradients stay views of theirs."""
    _close(_flat_run(True), _flat_run(False), "flat", ulps=8)


_SPECIAL = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-3, -3.0, 2.0, 1e30, -1e-10]
_SPECIAL_OPTIMIZERS = {
    "rprop": lambda ps: O.Rprop(ps, lr=0.01, foreach=False),
    "rprop-foreach": lambda ps: O.Rprop(ps, lr=0.01, foreach=True),
    "adagrad": lambda ps: O.Adagrad(ps, lr=0.1),
    "adadelta": lambda ps: O.Adadelta(ps, lr=1.0),
    "rmsprop-centered": lambda ps: O.RMSprop(ps, lr=0.01, centered=True, momentum=0.5),
    "sgd-nesterov-max": lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, maximize=True),
    "adafactor": lambda ps: O.Adafactor(ps, lr=0.01),
}


def _special_run(make, compiled):
    torch._dynamo.reset()
    p = nn.Parameter(torch.arange(20.0).reshape(4, 5) / 7 - 1)
    opt = make([p])
    step, out = (_compile(opt.step) if compiled else opt.step), []
    for i in range(3):
        g = torch.tensor(_SPECIAL * 2).roll(i).reshape(4, 5)
        p.grad = g if i != 1 else torch.linspace(-1, 1, 20).reshape(4, 5)
        step()
        out.append([p.detach().clone(), *[v.clone() for _, v in sorted(opt.state[p].items())]])
    return out


@pytest.mark.parametrize("name", list(_SPECIAL_OPTIMIZERS))
def test_nan_infinities_and_signed_zeros_in_gradients_as_eager(name):
    """NaN and infinities where eager has them (max, sign, sqrt of each update), the sign of
    zeros, the finite values within 8 ulps of the largest. (No subnormals: XLA's CPU flushes
    them, the documented "subnormal" limitation.)"""
    got = _special_run(_SPECIAL_OPTIMIZERS[name], True)
    want = _special_run(_SPECIAL_OPTIMIZERS[name], False)
    for i, (gs, ws) in enumerate(zip(got, want)):
        for j, (g, w) in enumerate(zip(gs, ws)):
            where = f"{name} step {i} tensor {j}"
            assert g.dtype == w.dtype and g.shape == w.shape, where
            assert torch.equal(g.isnan(), w.isnan()), where
            fin = w.isfinite()
            assert torch.equal(g[~fin & ~w.isnan()], w[~fin & ~w.isnan()]), where
            zero = fin & (w == 0)
            assert torch.equal(g[zero].signbit(), w[zero].signbit()), where
            if fin.any():
                big = float(w[fin].abs().max().clamp_min(1e-30))
                tol = 8 * torch.finfo(w.dtype).eps * big
                torch.testing.assert_close(g[fin], w[fin], rtol=0, atol=tol, msg=where)


def _swa_run(compiled):
    from torch.optim.swa_utils import SWALR, AveragedModel, get_ema_avg_fn

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _Net()
    avg = AveragedModel(model, avg_fn=get_ema_avg_fn(0.7))
    opt = O.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sch = SWALR(opt, swa_lr=0.02, anneal_epochs=2)

    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        avg.update_parameters(model)
        return loss.detach()

    fn, out = (_compile(train) if compiled else train), []
    for i in range(3):
        out.append((fn(_x(i)), [p.detach().clone() for p in avg.parameters()], avg.n_averaged))
        out.append(_snapshot(model, opt))
        sch.step()
    return out


def test_averaged_model_updated_inside_a_compiled_step_with_swalr():
    _close(_swa_run(True), _swa_run(False), "swa", ulps=64)


# Dynamo guards no dtype of the tensors an optimizer step holds as graph attributes (its
# parameters and state, get_attr): after model.double() the float32 program was called again
# with float64 parameters and ran retraced, where eager's lerp_ refuses the mix. Such a call
# runs in eager now (``_entry.LiftedChanged``).
def test_step_after_parameters_changed_dtype_raises_as_eager():
    def run(compiled):
        torch._dynamo.reset()
        torch.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = O.Adam(m.parameters(), lr=0.01, foreach=False)
        step = _compile(opt.step) if compiled else opt.step
        for i in range(3):
            if i == 2:
                m.double()  # (the state stays float32: eager's lerp_ refuses the float64 grad)
            m(_x(i, 4, 3).to(m.weight.dtype)).sum().backward()
            step()
            opt.zero_grad()

    with pytest.raises(RuntimeError, match="expected dtype float"):
        run(False)
    with pytest.raises(RuntimeError, match="expected dtype float"):
        run(True)


def test_step_after_parameters_changed_dtype_gives_eagers_values():
    """Where eager takes the new mix (SGD's float32 momentum buffer, float64 parameters),
    the call gives eager's parameters, with a FallbackWarning that names the cause."""

    def run(compiled):
        torch._dynamo.reset()
        torch.manual_seed(0)
        m = nn.Linear(3, 2)
        opt = O.SGD(m.parameters(), lr=0.1, momentum=0.9, foreach=False)
        step = _compile(opt.step) if compiled else opt.step
        for i in range(4):
            if i == 2:
                m.double()
            m(_x(i, 4, 3).to(m.weight.dtype)).sum().backward()
            step()
            opt.zero_grad()
        return [p.detach().clone() for p in m.parameters()]

    ref = run(False)
    with pytest.warns(torch2xla.FallbackWarning, match="changed its dtype"):
        got = run(True)
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype
        torch.testing.assert_close(g, r, rtol=0, atol=0)
