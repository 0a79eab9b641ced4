"""Session 18 probe of eager fallback (scripts/probe_fallback.py): each class of difference
from eager found there, checked strictly against eager."""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same

_UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", _UNSIGNED, ids=str)
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 1,
        lambda x: x >> 1,
        lambda x: x.max(),
        lambda x: torch.where(x > 0, x, x),
        lambda x: -x,
        lambda x: torch.minimum(x, x),
    ],
    ids=["add", "rshift", "max", "gt", "neg", "minimum"],
)
def test_unsigned_ops_eager_does_not_implement_raise_eagers_error(dtype, fn):
    # uint16/32/64 have XLA types, so XLA computed what eager's CPU kernels refuse
    # ("add_stub" not implemented for 'UInt16')
    x = torch.tensor([0, 7, 300], dtype=dtype)
    with pytest.raises(NotImplementedError) as want:
        fn(x)
    with pytest.raises(NotImplementedError) as got:
        torch.compile(fn, backend="xla", options={"strict": True})(x)
    assert str(got.value).splitlines()[0] == str(want.value)
    assert "user code:" in str(got.value)


@pytest.mark.parametrize("dtype", _UNSIGNED, ids=str)
def test_unsigned_ops_eager_implements_still_run_in_xla(dtype):
    def fn(x):
        return x * 3, x.sum(), x.cumsum(0), x & x, x == 7, x.sort().values, x.to(torch.float64)

    x = torch.tensor([0, 7, 300, 2], dtype=dtype)
    got = torch.compile(fn, backend="xla", options={"strict": True})(x)
    assert_same(got, fn(x))


# -- an op run in eager that raises: eager's error, with eager's writes and draws before it ----
_CALLS = []


@torch.library.custom_op("t2x_s18::check_pos", mutates_args=())
def check_pos(x: torch.Tensor) -> torch.Tensor:
    _CALLS.append(1)
    if (x < 0).any():
        raise ValueError("check_pos: negative input")
    return x.sqrt()


@check_pos.register_fake
def _(x):
    return torch.empty_like(x)


def _error(fn, *args) -> str:
    with pytest.raises(ValueError) as info:
        fn(*args)
    return str(info.value)


def test_eager_op_that_raises_keeps_the_writes_eager_made_before_it():
    # The split graph writes its inputs back after its last op: an eager op raising in
    # between lost x.add_(1) and y.mul_(2), which eager had made.
    def f(x, y):
        x.add_(1)
        y.mul_(2)
        h = torch.ops.t2x_s18.check_pos(x)
        x.mul_(10)
        return h

    g = torch.compile(f, backend="xla")
    x, y = torch.tensor([4.0, 1.0]), torch.ones(2)
    with pytest.warns(torch2xla.FallbackWarning):
        assert_same(g(x, y), torch.tensor([5.0, 2.0]).sqrt())
    for _ in range(2):  # (the signature's first failing call, then again)
        x_eager, y_eager = torch.tensor([-5.0, 1.0]), y.clone()
        x.copy_(x_eager)
        before = x._version
        message = _error(f, x_eager, y_eager)
        assert _error(g, x, y) == message
        assert_same(x, x_eager)
        assert_same(y, y_eager)
        assert x._version - before == x_eager._version  # (eager's one write before the op)


def test_eager_op_that_raises_leaves_the_generator_and_buffers_as_eager():
    def f(x):
        a = torch.rand(5)
        h = torch.ops.t2x_s18.check_pos(x + a)
        return h + torch.rand(5)

    def next_draws(fn):
        torch.manual_seed(1)
        _error(fn, -3 * torch.ones(5))
        return torch.rand(3)

    g = torch.compile(f, backend="xla")
    want = next_draws(f)
    assert_same(next_draws(g), want)
    assert_same(next_draws(g), want)  # (the cached signature: the state is kept for it too)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(3)

        def forward(self, x):
            return torch.ops.t2x_s18.check_pos(self.bn(x))

    m, ref = M(), M()
    x = torch.randn(4, 3)
    _error(torch.compile(m, backend="xla"), x)
    _error(ref, x)
    assert_same(list(m.buffers()), list(ref.buffers()))


def test_eager_op_that_raises_in_a_graph_without_writes_or_draws_runs_once():
    def f(x):
        return torch.ops.t2x_s18.check_pos(x * 2) + 1

    g = torch.compile(f, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning):
        g(torch.ones(3))
    _CALLS.clear()
    assert _error(g, -torch.ones(3)) == "check_pos: negative input"
    assert len(_CALLS) == 1  # nothing to make again: not replayed


# -- the eager ops of a split graph run without the caller's autocast ------------------------
def test_eager_op_of_a_split_graph_is_not_autocast_again():
    # The ATen graph holds autocast's casts already; its eager ops ran under the caller's
    # autocast, so an mm the user computes in float32 (autocast disabled) came out bfloat16.
    def f(x, w):
        h = (x @ w).relu()  # bfloat16, by autocast
        with torch.autocast("cpu", enabled=False):
            return h, x.float() @ w.float()

    options = {"eager_ops": [torch.ops.aten.mm.default]}
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 2, requires_grad=True)
    x2, w2 = (t.detach().clone().requires_grad_() for t in (x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = torch.compile(f, backend="xla", options=options)(x, w)
        want = f(x2, w2)
        assert_same(got, want, rtol=1e-2, atol=1e-2)  # (bfloat16 products, same kernels)
        (got[0].float().sum() + got[1].sum()).backward()
        (want[0].float().sum() + want[1].sum()).backward()
    assert_same([x.grad, w.grad], [x2.grad, w2.grad], rtol=1e-2, atol=1e-2)


# -- tensor subclasses with __torch_dispatch__: the graph runs in eager, saying why ----------
def test_tensor_subclass_input_runs_in_eager_with_a_clear_warning():
    # The export to ATen refuses them: the graph ran in eager with a warning that called it
    # "a bug in torch2xla" (stage lowering, AOTAutograd failed).
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        return (x * 2).sin() + 1

    t = TwoTensor(torch.randn(3), torch.randn(3))
    with pytest.warns(torch2xla.FallbackWarning) as record:
        got = torch.compile(f, backend="xla")(t)
    want = f(t)
    assert type(got) is TwoTensor
    assert_same([got.a, got.b], [want.a, want.b])
    (message,) = [str(r.message) for r in record]
    assert "graph_" in message and "runs in eager PyTorch because of" in message
    assert "input 'x' is a TwoTensor, a tensor subclass with __torch_dispatch__" in message
    assert "return (x * 2).sin() + 1" in message and "bug" not in message
    with pytest.raises(torch2xla.UnsupportedOpsError, match="input 'x' is a TwoTensor"):
        torch.compile(f, backend="xla", options={"strict": True})(t)


def test_tensor_subclass_parameter_trains_as_in_eager():
    from torch.testing._internal.two_tensor import TwoTensor

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(TwoTensor(torch.ones(3), torch.ones(3) * 2))

        def forward(self, x):
            return (x * self.w).sum()

    m, ref = M(), M()
    x = torch.randn(3)
    with pytest.warns(torch2xla.FallbackWarning, match="input 'self.w' is a TwoTensor"):
        got = torch.compile(m, backend="xla")(x)
    want = ref(x)
    got.backward()
    want.backward()
    assert_same(
        [got.a, got.b, m.w.grad.a, m.w.grad.b], [want.a, want.b, ref.w.grad.a, ref.w.grad.b]
    )
