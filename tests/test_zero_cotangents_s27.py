"""A backward through some outputs of a compiled graph never walks the others, as eager's
(``torch2xla/autodiff/_absent.py``): an output without a cotangent gets JAX's symbolic zero, not
a real one, whose product with an infinite derivative (``sqrt``, ``log``, ``pow`` at 0) was NaN
in the gradients (session 27). Every value is compared with eager's, NaN positions and
None-ness of gradients included.

Which outputs are absent is part of the cotangents' pytree structure: an executable (or a split
backward) built for one set must never run a call with another, which would silently give
another output's gradient; the alternating cases below have the same shapes and dtypes in both
orders, so only the structure tells them apart."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch
from torch import nn

from tests._eager_ops import EagerOps
from tests._util import ProgramCounter
from torch2xla.autodiff import _split

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPLIT = 0.004  # MiB of residuals per segment: a split backward for these small models


def C(fn, **options):
    return torch.compile(fn, backend="xla", options={"strict": True, **options})


def _same(got, want) -> None:
    """Eager's gradients: the same None-ness, dtypes, shapes, values and NaN positions."""
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), (i, a, b)
        if b is None:
            continue
        assert (a.dtype, a.shape) == (b.dtype, b.shape), i
        assert torch.equal(a.isnan(), b.isnan()), (i, a, b)
        torch.testing.assert_close(a, b, equal_nan=True, msg=f"gradient {i}")


# -- two outputs, one gradient at a time -----------------------------------------------------
def two(x):
    # (the same shapes and dtypes: only which output is absent tells the calls apart)
    return (x * 2).sum(), x.sqrt().sum() * 3


X = torch.tensor([0.0, 1.0, 4.0])


@pytest.mark.parametrize("first", [0, 1])
def test_grad_of_each_output_in_turn_with_retain_graph(first):
    g = C(two)
    x = X.clone().requires_grad_()
    for step in range(3):  # (later steps: the executables each structure compiled)
        got_outs, want_outs = g(x), two(x)
        for k in range(4):
            j = (first + k) % 2  # alternating: (active, absent), (absent, active), ...
            got = torch.autograd.grad(got_outs[j], x, retain_graph=True)
            want = torch.autograd.grad(want_outs[j], x, retain_graph=True)
            _same(got, want)
        both = torch.autograd.grad(list(got_outs), x)
        _same(both, torch.autograd.grad(list(want_outs), x))


@pytest.mark.parametrize("order", [(0, 1, 0, 1, 1, 0), (1, 0, 1, 1, 0, 0)])
def test_grad_of_one_output_frees_the_graph(order):
    """No retain_graph: each step's backward is the freed one (donating, its C++ call once
    steady), each through another output."""
    g = C(two)
    x = X.clone().requires_grad_()
    for j in order:
        got = torch.autograd.grad(g(x)[j], x)
        _same(got, torch.autograd.grad(two(x)[j], x))
    _same(torch.autograd.grad(list(g(x)), x), torch.autograd.grad(list(two(x)), x))


def test_first_gradient_then_the_other_in_one_compiled_function():
    def grads(x):
        x = x.clone().requires_grad_()
        first, second = (x * 2).sum(), x.sqrt().sum()
        return torch.autograd.grad(first, x)[0], torch.autograd.grad(second, x)[0]

    g = C(grads)
    for _ in range(3):
        _same(g(X.clone()), grads(X.clone()))


def test_outputs_whose_derivatives_differ_are_never_swapped():
    """Two scalar outputs: a call with the other one absent must not run the executable built
    for the first (its gradient would be the other output's)."""

    def f(x):
        return (x * 2).sum(), (x * 5).sum(), (x * x).sum()

    g = C(f)
    x = torch.randn(4, requires_grad=True)
    for j in (0, 1, 2, 1, 0, 2, 0):
        for retain in (True, False):
            got = torch.autograd.grad(g(x)[j], x, retain_graph=retain)
            _same(got, torch.autograd.grad(f(x)[j], x, retain_graph=retain))


# -- models returning (loss, metric) ------------------------------------------------------------
class WithMetric(nn.Module):
    def __init__(self, metric: str) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.scale = nn.Parameter(torch.zeros(3))  # (a metric's derivative is infinite at 0)
        self.metric = metric

    def forward(self, x):
        h = self.lin(x)
        loss = (h * h).mean() + self.scale.sum()
        if self.metric == "norm":
            aux = (self.scale * self.scale).sum().sqrt()
        elif self.metric == "log":
            aux = torch.log(self.scale * self.scale).mean()  # (-inf, as eager's)
        else:
            aux = (self.scale.abs() ** 0.5).sum()
        return loss, aux


def _steps(model, n=3, options=None, backward=lambda out: out[0].backward(), shape=(5, 4)):
    torch.manual_seed(0)
    ref = copy.deepcopy(model)
    compiled = C(model, **(options or {}))
    for _ in range(n):
        x = torch.randn(shape)
        out, want = compiled(x), ref(x)
        for a, b in zip(out, want):
            torch.testing.assert_close(a, b, equal_nan=True)
        backward(out)
        backward(want)
        _same([p.grad for p in model.parameters()], [p.grad for p in ref.parameters()])
        for p in (*model.parameters(), *ref.parameters()):
            p.grad = None


@pytest.mark.parametrize("metric", ["norm", "log", "pow"])
def test_loss_backward_of_a_model_returning_a_metric(metric):
    _steps(WithMetric(metric))


def test_module_returning_a_dict():
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.tensor([0.0, 1.0, 2.0]))

        def forward(self, x):
            return {"loss": (x * self.w).sum(), "norm": self.w.norm(), "root": self.w.sqrt()}

    model = Model()
    ref = copy.deepcopy(model)
    compiled = C(model)
    for step in range(3):
        x = torch.randn(3)
        out, want = compiled(x), ref(x)
        out["loss"].backward()
        want["loss"].backward()
        _same([model.w.grad], [ref.w.grad])
        if step == 2:  # the metric itself (its eager gradient is NaN at 0, ours too)
            out["norm"].backward()
            want["norm"].backward()
            _same([model.w.grad], [ref.w.grad])
        model.w.grad = ref.w.grad = None


def test_create_graph_then_a_second_backward():
    def run(fn):
        x = X.clone().requires_grad_()
        first, second = fn(x)
        (g1,) = torch.autograd.grad(first, x, create_graph=True)
        (g2,) = torch.autograd.grad(second * second, x, create_graph=True)
        ((g1 * g1).sum() + (g2[1:] * x[1:]).sum()).backward()
        return g1.detach(), g2.detach(), x.grad

    g = C(two)
    for _ in range(2):
        _same(run(g), run(two))


def test_outputs_of_other_dtypes_and_an_absent_complex_one():
    def f(x):
        z = torch.view_as_complex(x.reshape(-1, 2))
        return (x * 3).sum(), x.bfloat16().sqrt().sum(), (z * z).sqrt(), x.double().log().sum()

    g = C(f)
    x = torch.tensor([0.0, 1.0, 4.0, 0.0, 2.0, 9.0], requires_grad=True)
    for through in [(0,), (1,), (0, 1), (3,), (1,), (2,), (0,)]:
        got, want = g(x), f(x)
        torch.autograd.backward([got[i].abs().sum() for i in through])
        got_grad, x.grad = x.grad, None
        torch.autograd.backward([want[i].abs().sum() for i in through])
        _same([got_grad], [x.grad])
        x.grad = None


# -- a split backward --------------------------------------------------------------------------
def test_split_backward_with_an_absent_output(monkeypatch):
    """The split is cut for the absent outputs of the first freed backward; a backward with
    others runs one program."""
    calls = []
    original = _split.SplitBackward.__call__

    def counted(split, kept, inputs, cts):
        calls.append(split.absent)
        return original(split, kept, inputs, cts)

    monkeypatch.setattr(_split.SplitBackward, "__call__", counted)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32))

        def forward(self, x):
            h = self.body(x)
            # (the metric shares the body's nodes: the loss's backward frees the graph)
            return (h * h).mean(), torch.relu(h).sqrt().mean()

    torch.manual_seed(0)
    model = Model()
    ref = copy.deepcopy(model)
    compiled = C(model, split_backward=SPLIT)
    through = [(0,), (0,), (0,), (1,), (0, 1), (0,), (1,)]
    for j in through:
        x = torch.randn(64, 8)
        out, want = compiled(x), ref(x)
        torch.autograd.backward([out[i] for i in j])
        torch.autograd.backward([want[i] for i in j])
        _same([p.grad for p in model.parameters()], [p.grad for p in ref.parameters()])
        for p in (*model.parameters(), *ref.parameters()):
            p.grad = None
    assert calls == [(1,)] * through.count((0,))  # (only the backwards it was cut for)


# -- steady calls ------------------------------------------------------------------------------
def test_steady_backward_through_one_output_runs_no_eager_jax(monkeypatch):
    model = WithMetric("norm")
    ref = copy.deepcopy(model)
    compiled = C(model)
    x = torch.randn(5, 4)

    def step():
        for m in (compiled, ref):
            m(x)[0].backward()
        _same([p.grad for p in model.parameters()], [p.grad for p in ref.parameters()])
        for p in (*model.parameters(), *ref.parameters()):
            p.grad = None

    step()
    step()
    programs = ProgramCounter(monkeypatch)
    ops = EagerOps()
    with ops.watch(stacks=True):
        step()
        step()
    assert ops.total() == 0, dict(ops.where)
    assert programs.count == 0 and not ops.compiles


# -- the persistent cache ----------------------------------------------------------------------
_WORKER = """
import json, sys
import torch
import torch2xla  # noqa: F401
import torch2xla._backend

exports = []
_lower = torch2xla._backend.lower
torch2xla._backend.lower = lambda gm, args: (exports.append(1), _lower(gm, args))[1]


def f(w, x):
    h = x * w  # (every output goes through its node: each backward frees the graph)
    return (h * h).sum(), h.sqrt().sum(), (h * 5).sum()


g = torch.compile(f, backend="xla")
x = torch.tensor([1.0, 2.0, 3.0])
result = []
for j in json.loads(sys.argv[1]):
    grads = []
    for fn in (g, f):
        w = torch.zeros(3, requires_grad=True)
        out = fn(w, x)
        torch.autograd.backward([out[i] for i in j])
        grads.append(w.grad)
    assert torch.equal(grads[0].isnan(), grads[1].isnan()), (j, grads)
    torch.testing.assert_close(grads[0], grads[1], equal_nan=True)
    result.append(len(exports))
print(json.dumps(result))
"""


def _worker(tmp_path, order) -> list:
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    env = dict(os.environ, TORCH2XLA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(order)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_stored_backward_runs_only_the_absent_outputs_it_was_built_for(tmp_path):
    # stored: the freed backward through the loss alone (the others absent)
    assert _worker(tmp_path, [[0], [0]])[-1] >= 1
    # restored (no export), then another set of absent outputs: the program's own backward
    restored = _worker(tmp_path, [[0], [2], [1], [0], [0, 1, 2]])
    assert restored[0] == 0, restored
    # restored, another set first
    assert _worker(tmp_path, [[2], [0], [1, 2]])
