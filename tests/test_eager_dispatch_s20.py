"""Steady calls run no eager JAX op (``tests/_eager_ops.py``): each dispatches an executable of
its own and copies its Python scalars to the device (~0.3-0.5 ms of host time on a GPU machine,
the GPU idle meanwhile). Every workload runs two warm-up steps, then steps that must run no
eager op and compile nothing; the values are eager's.

Fixed in session 20: empty cotangents (an empty output that the backward goes through), empty
inputs of a double backward, and the constant gradients of a split backward (a 0-d parameter
through ``floor``) were each made in eager JAX on every backward."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._eager_ops import EagerOps
from tests._training import assert_grads
from tests._util import ProgramCounter, assert_same
from tests.models import CNN, MLP, LSTMTagger

SPLIT = 0.004  # MiB of residuals per segment: a split backward for these small models


def C(fn, **options):
    return torch.compile(fn, backend="xla", options={"strict": True, **options})


def _steady(step, monkeypatch, steps: int = 2):
    """``step()`` twice, then ``steps`` times watched: no eager JAX op, no new program."""
    step()
    step()
    programs = ProgramCounter(monkeypatch)
    ops = EagerOps()
    with ops.watch(stacks=True):
        for _ in range(steps):
            step()
    assert ops.total() == 0, dict(ops.where)
    assert programs.count == 0, "a steady step compiled a graph"
    assert not ops.compiles, dict(ops.compiles)  # (nor traced or compiled any JAX function)


# -- the counter ----------------------------------------------------------------------------------
def test_counter_sees_eager_ops_and_not_compiled_calls():
    x = jnp.ones(3)
    f = jax.jit(lambda a: a * 2)
    compiled = f.lower(x).compile()
    f(x), compiled(x), jnp.ravel(x)
    cases = {
        "zeros": (lambda: jnp.zeros(3), 1),
        "astype": (lambda: x.astype(jnp.int32), 1),
        "slice": (lambda: x[1:], 1),
        "jitted jnp helper": (lambda: jnp.ravel(x.reshape(3, 1)), 1),
        "jit": (lambda: f(x), 0),
        "compiled": (lambda: compiled(x), 0),
    }
    for name, (op, eager) in cases.items():
        op()  # (an eager op's first run compiles its executable)
        ops = EagerOps()
        with ops.watch():
            op()
        assert (ops.total() > 0) == bool(eager), (name, ops.ops)
        assert not ops.compiles, (name, ops.compiles)
    ops = EagerOps()
    with ops.watch():
        jax.jit(lambda a: a + 1)(x)  # (a jit made anew: traced and compiled, no eager op)
    assert ops.total() == 0 and ops.compiles, ops.compiles


# -- workloads as users run them ------------------------------------------------------------------
def _training(model, make, opt=torch.optim.SGD, **options):
    """A compiled training step of ``model`` and the same step of an eager copy."""
    ref = copy.deepcopy(model)
    compiled = C(model, **options)
    opts = [opt(m.parameters(), lr=0.01) for m in (model, ref)]

    def step():
        x = make()
        for fn, o in zip((compiled, ref), opts):
            o.zero_grad()
            fn(x).float().square().mean().backward()
            o.step()
        assert_same(model.state_dict(), ref.state_dict(), rtol=1e-4, atol=1e-5)

    return step


def _inference(model, make, **options):
    compiled = C(model, **options)

    def step():
        x = make()
        with torch.no_grad():
            assert_same(compiled(x), model(x), rtol=1e-4, atol=1e-5)

    return step


WORKLOADS = {
    "mlp_train": lambda: _training(MLP(), lambda: torch.randn(16, 32)),
    "mlp_infer": lambda: _inference(MLP(), lambda: torch.randn(16, 32)),
    "cnn_train": lambda: _training(CNN(), lambda: torch.randn(2, 3, 16, 16)),
    "cnn_infer": lambda: _inference(CNN().eval(), lambda: torch.randn(2, 3, 16, 16)),
    "lstm_train": lambda: _training(LSTMTagger(), lambda: torch.randn(3, 7, 16)),
    "adamw": lambda: _training(MLP(), lambda: torch.randn(8, 32), opt=torch.optim.AdamW),
    "checks": lambda: _training(MLP(), lambda: torch.randn(8, 32), checks=True),
    "split_mlp": lambda: _training(MLP(), lambda: torch.randn(16, 32), split_backward=SPLIT),
    "split_lstm": lambda: _training(
        LSTMTagger(), lambda: torch.randn(3, 7, 16), split_backward=SPLIT
    ),
    "bf16": lambda: _training(MLP().to(torch.bfloat16), lambda: torch.randn(8, 32).bfloat16()),
}


@pytest.mark.parametrize("name", WORKLOADS)
def test_steady_steps_run_no_eager_jax(name, monkeypatch):
    torch.manual_seed(0)
    _steady(WORKLOADS[name](), monkeypatch)


def test_attention_training(monkeypatch):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    f = lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True) + mha(x, x, x)[0]
    g = C(f)
    x = torch.randn(2, 5, 16, requires_grad=True)

    def step():
        x.grad = None
        g(x).sum().backward()
        got = x.grad
        x.grad = None
        f(x).sum().backward()
        torch.testing.assert_close(got, x.grad, rtol=1e-4, atol=1e-5)

    _steady(step, monkeypatch)


def _outputs(x, w):
    h = x @ w
    return (
        h.sum(),  # through
        h.argmax(1),  # integer: no gradient
        h.detach() * 2,  # no gradient
        (x.double() * 3).sum(1),  # float64, not through
        torch.view_as_complex(h[:, :2].contiguous()),  # complex
        h[:0] * 2,  # empty
    )


@pytest.mark.parametrize("through", [(0,), (0, 3), (4,), (0, 5), (3, 4, 5)])
def test_backward_through_some_outputs(through, monkeypatch):
    """Outputs without gradients, float64, complex and empty outputs, the backward through
    some of them (zero cotangents for the others: ``_zeros``; an empty one's too)."""
    torch.manual_seed(0)
    x = torch.randn(5, 4, requires_grad=True)
    w = torch.randn(4, 2, requires_grad=True)
    g = C(_outputs)

    def step():
        for fn in (g, _outputs):
            outs = fn(x, w)
            torch.autograd.backward([outs[i].abs().sum() for i in through])
            if fn is g:
                got = (x.grad, w.grad)
                x.grad = w.grad = None
        for a, b in zip(got, (x.grad, w.grad), strict=True):
            assert (a is None) == (b is None)
            if b is not None:
                assert a.dtype == b.dtype
                torch.testing.assert_close(a, b)
        x.grad = w.grad = None

    _steady(step, monkeypatch)


def test_empty_complex_output_through_the_backward(monkeypatch):
    def f(x):
        z = torch.view_as_complex(x.reshape(-1, 2))
        return (z * z)[:0], z.abs().sum(), x[:, :0].double() * 3

    x = torch.randn(4, 6, requires_grad=True)
    g = C(f)

    def step():
        grads = []
        for fn in (g, f):
            e, s, e64 = fn(x)
            (e.abs().sum() + s + e64.sum()).backward()
            grads.append(x.grad)
            x.grad = None
        assert grads[0].dtype == grads[1].dtype
        torch.testing.assert_close(grads[0], grads[1])

    _steady(step, monkeypatch)


def test_dropout_and_random_ops(monkeypatch):
    """Seeds drawn from torch's generator every call (``_draw_seed``), no eager JAX."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.ReLU(), nn.Linear(32, 4))
    m = C(model)
    r = C(lambda x: x + torch.rand_like(x))

    def step():
        m(torch.randn(8, 16)).sum().backward()
        with torch.no_grad():
            r(torch.ones(3))

    _steady(step, monkeypatch)


def test_remat_with_dropout_and_checks(monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.2), nn.ReLU(), nn.Linear(32, 4))
    m = C(model, remat=True, checks=True)
    _steady(lambda: m(torch.randn(8, 16)).sum().backward(), monkeypatch)


def test_dynamic_shapes(monkeypatch):
    """``dynamic=True``: inference pads sizes to their bucket (5, 6, 7: one program for 8) and
    slices the outputs; training compiles one program per size."""
    torch.manual_seed(0)
    model = MLP()
    m = torch.compile(model, backend="xla", dynamic=True)
    sizes = iter([5, 7, 6, 7, 5, 6])

    def step():
        x = torch.randn(next(sizes), 32)
        with torch.no_grad():
            assert_same(m(x), model(x), rtol=1e-4, atol=1e-5)
        for n in (5, 7):
            m(torch.randn(n, 32)).sum().backward()

    _steady(step, monkeypatch, steps=4)


def test_runtime_checks_on(monkeypatch):
    emb = nn.Embedding(10, 4)
    g = C(lambda i, a, b: (emb(i).sum() * 2, a // b, a % b), checks=True)

    def step():
        s, q, r = g(torch.tensor([1, 2, 3]), torch.tensor([7, 8]), torch.tensor([2, 3]))
        s.backward()
        assert q.tolist() == [3, 2] and r.tolist() == [1, 2]

    _steady(step, monkeypatch)


def test_retain_graph_and_double_backward(monkeypatch):
    x = torch.randn(5, requires_grad=True)
    f = lambda x: (x.sin() * x).sum()
    g = C(f)

    def step():
        got = []
        for fn in (g, f):
            y = fn(x)
            y.backward(retain_graph=True)
            y.backward()
            (gx,) = torch.autograd.grad(fn(x), x, create_graph=True)
            gx.sum().backward()
            got.append(x.grad)
            x.grad = None
        torch.testing.assert_close(got[0], got[1])

    _steady(step, monkeypatch)


def test_double_backward_with_empty_inputs(monkeypatch):
    """The double backward's empty inputs are zeros of one cached program (``jax_values``)."""
    x = torch.randn(4, requires_grad=True)
    e = torch.randn(0, 3, requires_grad=True)
    f = lambda x, e: ((x.sin() * x).sum() + (e * e).sum(), e * 2)
    g = C(f)

    def step():
        got = []
        for fn in (g, f):
            y, _ = fn(x, e)
            gx, ge = torch.autograd.grad(y, (x, e), create_graph=True)
            (gx.sum() + ge.sum()).backward()
            got.append((x.grad, e.grad))
            x.grad = e.grad = None
        for a, b in zip(*got, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            torch.testing.assert_close(a, b)

    _steady(step, monkeypatch)


class _ConstantGradients(nn.Module):
    """0-d parameters through ``floor`` and ``sign``: their gradients are constants of the
    backward (a split backward hands them out without a segment: ``_split.Run._constant``)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(*[nn.Linear(32, 32) for _ in range(6)])
        self.s = nn.Parameter(torch.tensor(1.5, dtype=torch.float64))
        self.c = nn.Parameter(torch.tensor(-0.5))
        self.v = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return self.body(x).tanh().sum() + self.s.floor() + self.c.sign() + self.v.round().sum()


@pytest.mark.parametrize("split", [SPLIT, False])
def test_constant_gradients_accumulated_over_steps(split, monkeypatch):
    """Gradient accumulation: torch adds into the gradients in place, so a constant gradient
    must be new memory at every backward."""
    torch.manual_seed(0)
    model = _ConstantGradients()
    ref = copy.deepcopy(model)
    compiled = C(model, split_backward=split)

    def step():
        x = torch.randn(8, 32)
        for fn in (compiled, ref):
            fn(x).backward()
        assert_grads(model, ref)
        for m in (model, ref):
            m.s.grad.add_(1.0)  # (in place, as the next backward's accumulation is)
        assert_grads(model, ref)

    _steady(step, monkeypatch)


def test_gradient_accumulation_with_adamw(monkeypatch):
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    compiled = C(model)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, ref)]
    k = [0]

    def step():
        x = torch.randn(4, 32)
        for fn, o in zip((compiled, ref), opts):
            fn(x).sum().backward()
            if k[0] % 2:
                o.step()
                o.zero_grad()
        k[0] += 1
        assert_same(model.state_dict(), ref.state_dict(), rtol=1e-4, atol=1e-5)

    _steady(step, monkeypatch, steps=4)


def test_in_place_writes_to_inputs_and_buffers(monkeypatch):
    buf = torch.zeros(4)

    def f(x, y):
        x.mul_(2)
        y[1:3] = 5
        buf.add_(x)
        return x + 1, buf * 2

    g = C(f)
    expected = torch.zeros(4)

    def step():
        x, y = torch.ones(4), torch.ones(5)
        out = g(x, y)
        expected.add_(2)
        assert_same(out, (torch.full((4,), 3.0), expected * 2))
        assert_same((x, y), (torch.full((4,), 2.0), torch.tensor([1.0, 5, 5, 1, 1])))

    _steady(step, monkeypatch)


def test_compiled_adamw_step(monkeypatch):
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    compiled = C(model)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, ref)]
    steps = [torch.compile(opts[0].step, backend="xla"), opts[1].step]

    def step():
        x = torch.randn(4, 32)
        for fn, o, opt_step in zip((compiled, ref), opts, steps):
            fn(x).sum().backward()
            opt_step()
            o.zero_grad()
        assert_same(model.state_dict(), ref.state_dict(), rtol=1e-4, atol=1e-5)

    _steady(step, monkeypatch)


def test_hf_gpt2_training_with_labels(monkeypatch):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=4, vocab_size=128, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg)
    m = C(model)
    o = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 128, (2, 12))

    def step():
        m(input_ids=ids, labels=ids).loss.backward()  # (its key/value caches get no gradient)
        o.step()
        o.zero_grad()

    _steady(step, monkeypatch)
