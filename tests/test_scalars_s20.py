"""A Python float that changes between calls (Dynamo passes it as a 0-d tensor) is an input of
one program, with eager's wrapped-number semantics (capture/_float_values.py)."""

import pytest
import torch

from tests._util import ProgramCounter

VALUES = [0.1 * (i + 1) for i in range(18)] + [-0.0, 16777216.5]
EDGE = [0.5, -0.0, 0.0, float("nan"), float("inf"), -float("inf"), 1e-3, 0.1, 16777216.5]


def _equal(out, ref):
    assert out.dtype == ref.dtype and out.shape == ref.shape
    a, b = out.double(), ref.double()
    assert torch.equal(a.isnan(), b.isnan())
    assert torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
    real = ~a.isnan()  # (the sign of a NaN is not defined by eager's kernels either)
    assert torch.equal(a.signbit()[real], b.signbit()[real])


def test_twenty_values_compile_at_most_two_programs(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    f = lambda x, scale: x * scale  # noqa: E731
    c = torch.compile(f, backend="xla")
    x = torch.randn(8)
    for s in VALUES:
        _equal(c(x, s), f(x, s))
    assert counter.count <= 2, counter.count


def test_item_after_graph_break_compiles_a_bounded_number(monkeypatch):
    counter = ProgramCounter(monkeypatch)

    def f(x):
        return x * x.sum().item()

    c = torch.compile(f, backend="xla")
    for i in range(10):
        x = torch.randn(8, generator=torch.Generator().manual_seed(i))
        _equal(c(x), f(x))
    assert counter.count <= 3, counter.count


OPS = {
    "mul": lambda x, s: x * s,
    "rmul": lambda x, s: s * x,
    "add": lambda x, s: torch.add(x, s, alpha=2),
    "sub": lambda x, s: x.sub(s),
    "rsub": lambda x, s: s - x,
    "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x,  # (kept a constant: eager's x.reciprocal() * s)
    "pow": lambda x, s: x**s,  # (kept a constant)
    "clamp": lambda x, s: x.clamp(min=s),  # (kept a constant)
    "where": lambda x, s: torch.where(x > 0, x, s),
    "where_first": lambda x, s: torch.where(x > 0, s, x),
    "lt": lambda x, s: x < s,
    "ge": lambda x, s: s >= x,
    "eq": lambda x, s: torch.eq(x, s),
    "two_uses": lambda x, s: (x * s + s) / s,
    "arith": lambda x, s: x * (2 * s),  # (kept a constant)
}
TENSORS = {
    torch.float32: [0.1, -0.0, 0.0, float("nan"), float("inf"), 1e-3, 2.5, -3, 16777217],
    torch.float64: [0.1, -0.0, 0.0, float("nan"), -float("inf"), 1e-3, 2.5, -3, 16777217],
    torch.bfloat16: [0.1, -0.0, 0.0, float("nan"), float("inf"), 1e-3, 2.5, -3, 0.1000001],
    torch.float16: [0.1, -0.0, 0.0, float("nan"), float("inf"), 1e-3, 2.5, -3, 65504],
    torch.int64: [0, 1, -3, 16777217, 2**40, 5, 7, -9, 2],
    torch.int32: [0, 1, -3, 16777217, 5, 7, -9, 2, 3],
}


@pytest.mark.parametrize("dtype", list(TENSORS), ids=str)
@pytest.mark.parametrize("op", list(OPS))
def test_results_equal_eager(op, dtype):
    f = OPS[op]
    x = torch.tensor(TENSORS[dtype], dtype=dtype)
    c = torch.compile(f, backend="xla")
    for s in EDGE:
        try:
            ref = f(x, s)
        except RuntimeError as e:
            with pytest.raises(type(e)):
                c(x, s)
            continue
        _equal(c(x, s), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_zero_dim_tensor_with_changing_float(dtype):
    # (a 0-d tensor and a wrapped number: the tensor's dtype; an int one becomes a float)
    f = lambda x, s: (x * s, x + s, x < s)  # noqa: E731
    c = torch.compile(f, backend="xla")
    x = torch.tensor(3, dtype=dtype)
    for s in (0.1, 0.7, -2.5, float("nan")):
        for o, r in zip(c(x, s), f(x, s)):
            _equal(o, r)


def test_int_scalar_still_one_program(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    f = lambda x, n: x * n + n  # noqa: E731
    c = torch.compile(f, backend="xla")
    x = torch.randn(4)
    for n in range(2, 12):
        _equal(c(x, n), f(x, n))
    assert counter.count <= 2, counter.count


def test_training_gradients_with_changing_scalar(monkeypatch):
    counter = ProgramCounter(monkeypatch)

    def step(model, x, w, temp):
        loss = (model(x) / temp).softmax(-1).mul(w).sum() + w * model.weight.square().sum()
        loss.backward()
        return loss

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    twin = torch.nn.Linear(4, 3)
    twin.load_state_dict(model.state_dict())
    c = torch.compile(step, backend="xla")
    x = torch.randn(5, 4)
    for i in range(8):
        w, temp = 0.1 * (i + 1), 1.0 + 0.25 * i
        got, want = c(model, x, w, temp), step(twin, x, w, temp)
        _equal(got.detach(), want.detach())
        for p, q in zip(model.parameters(), twin.parameters()):
            assert torch.allclose(p.grad, q.grad, rtol=1e-6, atol=1e-7)
            p.grad, q.grad = None, None
    assert counter.count <= 4, counter.count
