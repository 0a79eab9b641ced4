"""Session 20: optimizers and schedulers as users compile them (``scripts/probe_optim.py``).

- Division by a broadcast divisor (a number, a 0-dim tensor, a row, a ``keepdim`` sum, an
  ``expand``) is rounded once, as eager divides: XLA rewrote it as a multiply by the
  reciprocal, 1 ulp off in a third of the elements (a compiled Adam's ``exp_avg /
  bias_correction1``), a whole unit off after ``trunc``/``floor`` at an exact integer.
- Optimizers in a fully compiled training step (forward, backward, ``opt.step()``,
  ``zero_grad``) and a compiled ``opt.step`` against eager, step by step: parameters, every
  state tensor with its dtype and device, ``param_groups`` values, gradients after
  ``zero_grad`` (None or zeros), a tensor learning rate with a scheduler and a
  ``state_dict`` round trip between compiled steps.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

F32, F64 = torch.float32, torch.float64


def _compile(fn):
    return torch.compile(fn, backend="xla")


def _g(seed):
    return torch.Generator().manual_seed(seed)


# -- division rounded once ---------------------------------------------------------------------
_X = torch.randn(64, 100, generator=_g(0))
_XI = torch.arange(-3000, 3000).reshape(60, 100)
_ROW = torch.rand(100, generator=_g(1)) + 0.5
_DIVISIONS = {
    "number": lambda: _X / 0.271,
    "0-dim": lambda: _X / torch.tensor(0.271),
    "0-dim made in the graph": lambda: _X / (1 - 0.9 ** (torch.tensor(3.0))),
    "in place": lambda: _X.clone().div_(torch.tensor(0.271)),
    "row": lambda: _X / _ROW,
    "column": lambda: _X / (_ROW[:64, None] + 1),
    "expand": lambda: _X / torch.tensor(0.271).expand(64, 100),
    "float64 number": lambda: _X.double() / 0.271,
    "float64 row": lambda: _X.double() / _ROW.double(),
    "int by 0-dim int": lambda: _XI / torch.tensor(7),
    "int by number": lambda: _XI / 0.7,
    "trunc at exact integers": lambda: torch.div(_XI * 0.1, 0.1, rounding_mode="trunc"),
    "floor at exact integers": lambda: torch.div(_XI * 0.3, 0.3, rounding_mode="floor"),
    "floor_divide": lambda: (_XI * 0.7) // torch.tensor(0.7),
    "special values": lambda: (
        torch.tensor([1.0, -0.0, float("inf"), float("nan"), 0.0, -3.0]) / torch.tensor(0.0),
        torch.tensor([1.0, -2.0, float("inf"), 0.0]) / torch.tensor(float("-inf")),
        torch.tensor([3e38, -3e38, 2.0]) / torch.tensor(0.3),
    ),
}


@pytest.mark.parametrize("name", list(_DIVISIONS))
def test_division_by_a_broadcast_divisor_is_rounded_once(name):
    """Bit for bit as eager (the quotient is correctly rounded either way)."""
    fn = _DIVISIONS[name]
    got, want = _compile(fn)(), fn()
    for g, w in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        assert g.dtype == w.dtype
        assert torch.equal(g.isnan(), w.isnan())
        assert torch.equal(g[~g.isnan()], w[~w.isnan()]), (g - w).abs().max()
        assert torch.equal(g.signbit(), w.signbit())


def test_division_gradient_through_the_wide_quotient():
    """The float64 quotient's derivative comes back in the inputs' dtype, as eager's."""
    a = torch.randn(5, 7, generator=_g(3), requires_grad=True)
    b = torch.tensor(0.37, requires_grad=True)
    ra, rb = (t.detach().clone().requires_grad_() for t in (a, b))
    (_compile(lambda a, b: (a / b).square().sum())(a, b)).backward()
    (ra / rb).square().sum().backward()
    assert a.grad.dtype == b.grad.dtype == F32
    torch.testing.assert_close(a.grad, ra.grad, rtol=2e-7, atol=0)
    torch.testing.assert_close(b.grad, rb.grad, rtol=1e-6, atol=0)


# -- optimizers, step by step -------------------------------------------------------------------
class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(3, 2)
        self.unused = nn.Parameter(torch.randn(2))  # (its grad stays None)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def _snapshot(model, opt):
    ps = list(model.parameters())
    state = [
        {
            k: (v.detach().clone(), v.dtype, v.device) if torch.is_tensor(v) else v
            for k, v in s.items()
        }
        for s in (opt.state.get(p, {}) for p in ps)
    ]
    groups = [
        {
            k: (v.detach().clone() if torch.is_tensor(v) else v)
            for k, v in g.items()
            if k != "params"
        }
        for g in opt.param_groups
    ]
    grads = [None if p.grad is None else p.grad.detach().clone() for p in ps]
    return [p.detach().clone() for p in ps], state, groups, grads


def _close(got, want, path, ulps):
    """Same structure, dtypes, None-ness; floats within ``ulps`` ulps of the tensor's largest
    eager value (an update ``p - lr * u`` cancels: one rounding of an operand is many ulps of
    a small result; XLA fuses a product into the next add, rounding it once where eager's two
    kernels round twice: a few ulps over five steps, where eager itself is as far from a
    float64 run of the same steps)."""
    if isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for k in want:
            _close(got[k], want[k], f"{path}.{k}", ulps)
    elif isinstance(want, list | tuple):
        assert type(got) is type(want) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]", ulps)
    elif torch.is_tensor(want):
        assert torch.is_tensor(got) and got.dtype == want.dtype, path
        assert got.shape == want.shape and got.device == want.device, path
        if not want.is_floating_point() or want.numel() == 0:
            assert torch.equal(got, want), path
            return
        tol = ulps * torch.finfo(want.dtype).eps * float(want.abs().max().clamp_min(1e-30))
        torch.testing.assert_close(got, want, rtol=0, atol=tol, msg=path)
    else:
        assert got == want, (path, got, want)


def _steps(make, compiled, *, full, set_to_none=True, sched=None, roundtrip=False, n=3):
    torch.manual_seed(0)
    model = _Net()
    opt = make(model.parameters())
    sch = sched(opt) if sched else None
    C = _compile if compiled else (lambda f: f)

    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        return loss.detach()

    step, ctrain, out = C(opt.step), C(train), []
    for i in range(n):
        model.a.requires_grad_(i != 2)  # (a layer frozen for one step: grads None)
        x = torch.randn(6, 4, generator=_g(i))
        if full:
            loss = ctrain(x)
        else:
            loss = model(x).square().mean()
            loss.backward()
            step()
            opt.zero_grad(set_to_none=set_to_none)
        out.append((loss.detach(), *_snapshot(model, opt)))
        if sch is not None:
            sch.step()
        if roundtrip and i == 1:
            sd = copy.deepcopy(opt.state_dict())
            opt = make(model.parameters())
            opt.load_state_dict(sd)
            step, ctrain = C(opt.step), C(train)
    return out


_OPTIMIZERS = {
    "sgd-nesterov": lambda ps: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01
    ),
    "sgd-dampening-max": lambda ps: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, dampening=0.3, maximize=True
    ),
    "rmsprop-centered": lambda ps: torch.optim.RMSprop(
        ps, lr=0.01, centered=True, momentum=0.9, foreach=True
    ),
    "adagrad-decay": lambda ps: torch.optim.Adagrad(
        ps, lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5
    ),
    "adadelta-wd": lambda ps: torch.optim.Adadelta(ps, lr=1.0, weight_decay=0.1, foreach=True),
    "asgd": lambda ps: torch.optim.ASGD(ps, lr=0.05, t0=2),
    "rprop-max": lambda ps: torch.optim.Rprop(ps, lr=0.01, maximize=True, foreach=False),
    "radam": lambda ps: torch.optim.RAdam(ps, lr=0.02, foreach=True),
    "adamax-max": lambda ps: torch.optim.Adamax(ps, lr=0.02, maximize=True, foreach=False),
    "adam-fused-amsgrad": lambda ps: torch.optim.Adam(ps, lr=0.01, fused=True, amsgrad=True),
}


_FULL = ("sgd-nesterov", "rmsprop-centered", "radam", "adam-fused-amsgrad")


@pytest.mark.parametrize(
    ("name", "full"), [(n, False) for n in _OPTIMIZERS] + [(n, True) for n in _FULL]
)
def test_optimizer_steps_as_eager(name, full):
    got = _steps(_OPTIMIZERS[name], True, full=full, set_to_none=name != "asgd")
    want = _steps(_OPTIMIZERS[name], False, full=full, set_to_none=name != "asgd")
    _close(got, want, name, ulps=64 if full else 8)


def test_tensor_lr_scheduler_and_state_dict_round_trip_between_compiled_steps():
    """A tensor learning rate a scheduler writes, zero_grad to zeros, a new optimizer loaded
    from the state_dict between compiled training steps."""

    def make(ps):
        return torch.optim.SGD(ps, lr=torch.tensor(0.1), momentum=0.9, weight_decay=0.01)

    def sched(opt):
        return torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    kw = {"full": True, "set_to_none": False, "sched": sched, "roundtrip": True}
    _close(_steps(make, True, **kw), _steps(make, False, **kw), "sgd", ulps=64)
