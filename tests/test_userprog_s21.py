"""User-program classes found by scripts/probe_userprog.py (session 21), against eager strictly:
values, dtypes, requires_grad, None-ness of gradients, the order hooks run in, warnings.

- A reentrant checkpoint none of whose tensor arguments requires grad runs its function under
  ``no_grad`` with eager's warning (``capture/_reentrant.py``): outputs that require no grad,
  no gradient for the parameters inside, whatever requires grad inside.
- Leaves' post-accumulate-grad hooks and tensor hooks fire in eager's order: the order eager's
  engine accumulates them in, replayed on the Dynamo graph's autograd graph
  (``autodiff/_accumulate.py``).
- An in-place write eager does not record (``no_grad``, ``.data``) reads its tracked sources
  through ``stop_gradient`` (``capture/_stop_gradient.py``): a buffer written from a parameter
  under ``no_grad`` and read after gives that parameter no gradient through the read.
- A graph cut around eager ops (``x.data = y``) reads the versions its training nodes check
  again once its inputs have eager's versions (``_entry.Cut``): no false in-place error.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from tests._util import check_scenario, leaf
from torch2xla.autodiff._accumulate import eager_order

pytestmark = pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")

_WARNING = "None of the inputs have requires_grad=True. Gradients will be None"


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _warnings(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if str(w.message) == _WARNING]


# -- reentrant checkpoints ------------------------------------------------------------------
_CALLS = {
    "module": lambda lin: lambda x, y: checkpoint(lin, x, use_reentrant=True),
    "two args": lambda lin: (
        lambda x, y: checkpoint(lambda a, b: lin(a) + b, x, y * 0, use_reentrant=True)
    ),
    "tensors in a list": lambda lin: (
        lambda x, y: checkpoint(lambda l: lin(l[0]) * l[1], [x, y], use_reentrant=True)
    ),
    "tuple output": lambda lin: (
        lambda x, y: checkpoint(lambda a: (lin(a), a.sum(), 3), x, use_reentrant=True)[0]
    ),
    "default (reentrant)": lambda lin: lambda x, y: checkpoint(lin, x),
}


@pytest.mark.parametrize("name", list(_CALLS))
@pytest.mark.parametrize("x_grad", [False, True])
def test_reentrant_checkpoint_without_input_grad(name, x_grad):
    def scenario(C, rec):
        lin = nn.Linear(3, 3)
        x = leaf(2, 3, rg=x_grad)
        y = leaf(2, 3, seed=1)  # (requires grad: only ever nested in a list or detached)
        f = C(_CALLS[name](lin))
        got = []
        rec(
            "warned",
            _warnings(lambda: got.append(f(x, y.detach() if name != "tensors in a list" else y))),
        )
        out = got[0]
        rec("out", out)
        rec("flags", [out.requires_grad, out.grad_fn is None])
        if out.requires_grad:
            out.sum().backward()
        rec("grads", [x.grad, lin.weight.grad, lin.bias.grad])

    want = check_scenario(scenario, None, 1e-6)
    warned = dict(want)["warned"]
    if name == "tensors in a list" or not x_grad:
        assert warned  # (eager's warning, once per call)
        assert dict(want)["flags"] == [False, True]
    else:
        assert not warned and dict(want)["flags"] == [True, False]


def test_reentrant_checkpoint_frozen_embedding_then_thawed():
    def scenario(C, rec):
        torch.manual_seed(0)
        emb = nn.Embedding(10, 3)
        blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])

        def f(i):
            h = emb(i)
            for b in blocks:
                h = checkpoint(b, h, use_reentrant=True)
            return h.sum()

        g = C(f)
        for frozen in (True, False, True):
            emb.requires_grad_(not frozen)
            out = g(torch.tensor([[1, 2, 3]]))
            rec(f"out frozen={frozen}", out)
            if out.requires_grad:
                out.backward()
            rec(f"grads frozen={frozen}", [emb.weight.grad, *(p.grad for p in blocks.parameters())])

    check_scenario(scenario, None, 1e-6)


# -- the order of accumulation hooks --------------------------------------------------------
class _Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4)
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.ln = nn.LayerNorm(4)
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, i):
        h = self.emb(i)
        return self.ln(self.a(h) * self.w + self.b(h)) * self.w


_MODELS = {
    "mlp": (_mlp, lambda k: leaf(5, 3, seed=k, rg=False)),
    "conv bn ln": (
        lambda: (
            torch.manual_seed(0),
            nn.Sequential(
                nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.LayerNorm(12)
            ),
        )[1],
        lambda k: leaf(2, 2, 4, 4, seed=k, rg=False),
    ),
    "shared weight": (_Mixed, lambda k: torch.tensor([[1, 2, 3], [4, 5, 6]]) + k),
}


@pytest.mark.parametrize("name", list(_MODELS))
@pytest.mark.parametrize("kind", ["post_accumulate", "tensor_hook"])
def test_accumulation_hooks_fire_in_eager_order(name, kind):
    make, inputs = _MODELS[name]

    def scenario(C, rec):
        m = make()
        order = []
        for n, p in m.named_parameters():
            if kind == "post_accumulate":
                p.register_post_accumulate_grad_hook(lambda p, n=n: order.append(n))
            else:
                p.register_hook(lambda g, n=n: order.append(n))
        f = C(m)
        for k in range(2):
            # (not a square's sum: after a LayerNorm it is about constant, its gradients
            # cancel to float32's rounding)
            f(inputs(k)).sin().sum().backward()
            rec(f"order {k}", list(order))
            rec(f"grads {k}", [p.grad for p in m.parameters()])
            order.clear()

    want = check_scenario(scenario, None, 1e-5)
    assert len(dict(want)["order 0"]) == len(list(make().parameters()))


def test_optimizer_in_backward_sees_eager_order():
    """A hook that steps a per-parameter optimizer and reads how many parameters stepped
    before it: eager's order decides what it records."""

    def scenario(C, rec):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
        opts = {p: torch.optim.SGD([p], lr=0.1) for p in m.parameters()}
        stepped = []

        def hook(p):
            p.grad.mul_(1 + len(stepped))  # (scaled by its place in the order)
            stepped.append(tuple(p.shape))
            opts[p].step()
            opts[p].zero_grad()

        for p in m.parameters():
            p.register_post_accumulate_grad_hook(hook)
        f = C(m)
        for k in range(2):
            f(leaf(5, 3, seed=k, rg=False)).square().sum().backward()
            rec(f"params {k}", [p.detach().clone() for p in m.parameters()])
        rec("order", stepped)

    check_scenario(scenario, None, 1e-5)


def test_eager_order_replays_the_engine():
    """``eager_order`` against eager's own accumulation on real tensors."""
    torch.manual_seed(0)
    for m, x in (
        (_mlp(), torch.randn(5, 3)),
        (nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), torch.randn(3, 2, 8)),
        (_Mixed(), torch.tensor([[1, 2, 3]])),
    ):
        names = [n for n, _ in m.named_parameters()]
        seen: list = []
        for n, p in m.named_parameters():
            p.register_post_accumulate_grad_hook(lambda p, n=n, seen=seen: seen.append(n))
        out = m(x)
        predicted = [names[k] for k in eager_order([out], list(m.parameters()))]
        out.sum().backward()
        assert predicted == seen


# -- unrecorded writes read later ------------------------------------------------------------
_WRITES = {
    "lerp_": lambda buf, w: buf.lerp_(w, 0.5),
    "copy_": lambda buf, w: buf.copy_(w * 2),
    "add_": lambda buf, w: buf.add_(w),
    "setitem": lambda buf, w: buf.__setitem__(0, w[0]),
    "mul_ by a view": lambda buf, w: buf.mul_(w[1]),
}


@pytest.mark.parametrize("name", list(_WRITES))
@pytest.mark.parametrize("how", ["no_grad", "data"])
def test_unrecorded_write_from_a_parameter_gives_later_reads_no_gradient(name, how):
    def scenario(C, rec):
        w = nn.Parameter(leaf(3, 3, rg=False))
        buf = torch.ones(3, 3)

        def f(x):
            if how == "no_grad":
                with torch.no_grad():
                    _WRITES[name](buf, w)
            else:
                _WRITES[name](buf, w.data)
            return (x @ w + x @ buf).sum()

        g = C(f)
        for k in range(2):
            x = leaf(2, 3, seed=k + 1)
            out = g(x)
            rec(f"out {k}", out)
            out.backward()
            rec(f"grads {k}", [x.grad, w.grad])
            rec(f"buf {k}", buf.clone())

    check_scenario(scenario, None, 1e-5)


def test_ema_buffer_updated_in_forward():
    class WithEma(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("ema_w", self.lin.weight.detach().clone())

        def forward(self, x):
            with torch.no_grad():
                self.ema_w.lerp_(self.lin.weight, 0.5)
            return self.lin(x) + x @ self.ema_w.t()

    def scenario(C, rec):
        torch.manual_seed(0)
        m = WithEma()
        f = C(m)
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for k in range(3):
            out = f(leaf(2, 3, seed=k, rg=False))
            rec(f"out {k}", out)
            out.sum().backward()
            rec(f"grads {k}", [p.grad for p in m.parameters()])
            opt.step()
            opt.zero_grad()
            rec(f"ema {k}", m.ema_w.clone())

    check_scenario(scenario, None, 1e-5)


# -- a cut graph's versions ------------------------------------------------------------------
def test_data_write_and_data_swap_in_one_graph():
    def scenario(C, rec):
        torch.manual_seed(0)
        lin = nn.Linear(3, 4)

        def f(x):
            lin.weight.data.mul_(0.5)
            out = lin(x)
            lin.bias.data = torch.zeros(4)
            return out

        g = C(f)
        for k in range(2):
            x = leaf(2, 3, seed=k)
            out = g(x)
            rec(f"out {k}", out)
            rec(f"versions {k}", [lin.weight._version, x._version])
            out.sum().backward()
            rec(f"grads {k}", [x.grad, lin.weight.grad, lin.bias.grad])
            rec(f"params {k}", [lin.weight.detach().clone(), lin.bias.detach().clone()])

    check_scenario(scenario, None, 1e-6)
