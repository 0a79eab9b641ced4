"""Gradients and their None-ness as users train (session 26, ``scripts/probe_grads26.py``):
an argument eager's autograd has no derivative for (``multi_margin_loss``'s ``weight``) raises
eager's error instead of getting a gradient; parameters reached through comparisons, argmax,
``.detach()``, ``no_grad``, a branch never taken or a product with zero keep eager's None or
zeros over optimizer steps (``zero_grad(set_to_none=False)``, momentum, weight decay); compiled
optimizer steps skip the parameters whose ``.grad`` is None on that step; tensors leaving the
compiled code by side effects (an MoE's auxiliary loss kept on the module) carry their
gradients. Float64 throughout, so values compare to a tight tolerance."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._util import leaf


def _compiled(fn, **kw):
    return torch.compile(fn, backend="xla", **kw)


def _both(scenario):
    """``scenario(C)``'s result with ``C`` the identity (eager) and ``torch.compile``."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    expected = scenario(lambda f, **kw: f)
    torch._dynamo.reset()
    torch.manual_seed(0)
    return scenario(_compiled), expected


def _assert_same(got, expected, tol=1e-9, path="out"):
    """Nested lists/dicts of tensors and None: the same None-ness, dtypes and values."""
    if isinstance(expected, dict):
        assert list(got) == list(expected), path
        for k in expected:
            _assert_same(got[k], expected[k], tol, f"{path}.{k}")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), path
        for i, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, tol, f"{path}[{i}]")
    elif expected is None or got is None:
        assert got is None and expected is None, f"{path}: {got} (xla) vs {expected} (eager)"
    elif isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype, path
        assert got.requires_grad == expected.requires_grad, path
        assert (got.grad_fn is None) == (expected.grad_fn is None), path
        torch.testing.assert_close(got.detach(), expected.detach(), rtol=tol, atol=tol, msg=path)
    else:
        assert got == expected, path


def _grads(m: nn.Module) -> dict:
    return {n: None if p.grad is None else p.grad.clone() for n, p in m.named_parameters()}


# ============================================================================================
# arguments eager's autograd has no derivative for


def _multi_margin(x, w):
    return F.multi_margin_loss(x, torch.tensor([1, 2, 0]), p=2, margin=0.7, weight=w)


def test_multi_margin_weight_requiring_grad_raises_eagers_error():
    # torch's Python decomposition (registered for the Autograd key, which Dynamo's fake run
    # takes) skips eager's check: the compiled call returned a loss and gave weight a gradient
    x = leaf(3, 5, dtype=torch.float64)
    w = leaf(5, seed=1, dtype=torch.float64).detach().abs().requires_grad_()
    with pytest.raises(RuntimeError) as eager:
        _multi_margin(x, w)
    with pytest.raises(RuntimeError) as ours:
        _compiled(_multi_margin)(x, w)
    assert str(eager.value) in str(ours.value)
    assert x.grad is None and w.grad is None


def test_multi_margin_weight_requiring_grad_under_no_grad_or_detached_as_eager():
    def scenario(C):
        x = leaf(3, 5, dtype=torch.float64)
        w = leaf(5, seed=1, dtype=torch.float64).detach().abs().requires_grad_()
        with torch.no_grad():
            quiet = C(_multi_margin)(x, w)

        def inner_no_grad(x, w):
            with torch.no_grad():
                a = _multi_margin(x, w)
            return a + _multi_margin(x * 2, w.detach())

        mixed = C(inner_no_grad)(x, w)
        mixed.backward()
        return [quiet, mixed, x.grad, w.grad]

    _assert_same(*_both(scenario))


# ============================================================================================
# None or zeros through a module's paths, over optimizer steps


class Gated(nn.Module):
    """Parameters reached through paths without gradient (None) or with a zero one."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)
        self.gate = nn.Parameter(torch.randn(4))  # comparison: None
        self.scale = nn.Parameter(torch.randn(4))  # argmax: None
        self.never = nn.Parameter(torch.randn(4))  # where's branch never taken: zeros
        self.frozen = nn.Linear(4, 4).requires_grad_(False)
        self.detached = nn.Parameter(torch.randn(4))  # detach: None
        self.nograd = nn.Parameter(torch.randn(4))  # no_grad region: None
        self.zero = nn.Parameter(torch.randn(4))  # times zero: zeros

    def forward(self, x):
        h = self.a(x) * (self.gate > 0)
        h = h + self.scale.argmax().to(h.dtype)
        h = torch.where(h > 1e9, self.never, h)
        h = self.frozen(h) + h * self.detached.detach()
        with torch.no_grad():
            s = self.nograd.sum()
        return (h * s + self.zero * 0).sum()


@pytest.mark.parametrize("set_to_none", [False, True])
def test_gated_module_grads_over_sgd_steps_as_eager(set_to_none):
    def scenario(C):
        m = Gated().double()
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
        cm = C(m)
        seen = []
        for i in range(3):
            opt.zero_grad(set_to_none=set_to_none)
            cm(leaf(3, 4, seed=i, dtype=torch.float64)).backward()
            seen.append(_grads(m))
            opt.step()
        return seen, dict(m.named_parameters())

    _assert_same(*_both(scenario))


def test_gated_module_autograd_grad_allow_unused_as_eager():
    def scenario(C):
        m = Gated().double()
        x = leaf(3, 4, dtype=torch.float64)
        loss = C(m)(x)
        wrt = [x, *(p for p in m.parameters() if p.requires_grad)]
        plain = torch.autograd.grad(loss, wrt, allow_unused=True, retain_graph=True)
        materialized = torch.autograd.grad(loss, wrt, allow_unused=True, materialize_grads=True)
        return list(plain), list(materialized)

    _assert_same(*_both(scenario))
    for name in ("unused.weight", "gate"):
        errors = []
        for C in (lambda f: f, _compiled):
            torch._dynamo.reset()
            m = Gated().double()
            loss = C(m)(leaf(3, 4, dtype=torch.float64))
            with pytest.raises(RuntimeError) as e:
                torch.autograd.grad(loss, [m.get_parameter(name)])
            errors.append(str(e.value))
        assert errors[0] in errors[1], errors


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
        lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(0.01, dtype=torch.float64)),
        lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    ],
    ids=["adam_amsgrad", "adamw_tensor_lr", "rmsprop"],
)
def test_compiled_optimizer_step_skips_params_without_grad_as_eager(make):
    # (float64 as the default dtype: the optimizers' step counters are tensors of it, which a
    # compiled step computes the bias corrections in, torch's own compiled steps too
    # (aot_eager), where eager reads them as Python floats)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        _assert_same(*_both(_optimizer_scenario(make)))
    finally:
        torch.set_default_dtype(old)


def _optimizer_scenario(make):
    def scenario(C):
        a, b = nn.Linear(3, 3).double(), nn.Linear(3, 1).double()
        ps = [*a.parameters(), *b.parameters()]
        opt = make(ps)
        step = C(opt.step)
        seen = []
        for i in range(4):
            opt.zero_grad(set_to_none=True)
            x = leaf(2, 3, seed=i, dtype=torch.float64, rg=False)
            # ``a`` is left out on odd steps: its .grad stays None there, its state untouched
            loss = b(a(x).tanh()).sum() if i % 2 == 0 else b(x).sum()
            loss.backward()
            step()
            seen.append([p.detach().clone() for p in ps])
        return seen, [sorted(opt.state[p]) for p in ps]

    return scenario


# ============================================================================================
# tensors that leave the compiled code by side effects


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(4, 3)
        self.experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.aux_loss = None

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        top = probs.argmax(-1)
        self.aux_loss = (probs.mean(0) ** 2).sum() * 3
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            chosen = (top == i).unsqueeze(-1)
            out = out + torch.where(chosen, expert(x) * probs[:, i : i + 1], 0.0)
        return out


def test_moe_aux_loss_on_module_and_hook_features_grads_as_eager():
    def scenario(C):
        m = nn.Sequential(MoE(), nn.ReLU(), MoE(), nn.Linear(4, 1)).double()
        feats = []
        m[1].register_forward_hook(lambda mod, inp, out: feats.append(out))
        out = C(m)(leaf(5, 4, dtype=torch.float64))
        aux = m[0].aux_loss + m[2].aux_loss
        (feats[0].pow(2).mean() + 0.1 * aux).backward()  # the head's output unused
        return aux, out, _grads(m)

    _assert_same(*_both(scenario))


# ============================================================================================
# backward formulas whose operands do not broadcast


@pytest.mark.parametrize("reduce", ["amax", "amin", "prod"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_reduce_src_larger_than_index_backward_raises_as_eager(reduce, dim):
    # eager's formula compares src with the result gathered at the index: its backward
    # raises a broadcast error, which the fake run words otherwise (it was ignored, and the
    # compiled backward gave src a gradient)
    index = torch.tensor([[0, 2], [1, 1]])

    def f(x, src):
        return x.scatter_reduce(dim, index, src, reduce).pow(2).sum()

    errors = []
    for C in (lambda f: f, _compiled):
        torch._dynamo.reset()
        x = leaf(3, 3, dtype=torch.float64)
        src = leaf(3, 3, seed=1, dtype=torch.float64)
        loss = C(f)(x, src)
        assert loss.requires_grad
        with pytest.raises(RuntimeError) as e:
            loss.backward()
        errors.append(str(e.value))
        assert x.grad is None and src.grad is None
    assert errors[0] in errors[1], errors
