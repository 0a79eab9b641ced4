"""Issue 2 part 6: unsupported ops run in eager (one warning) or raise in strict mode."""

import re
import warnings

import pytest
import torch

import torch2xla
from tests._util import ProgramCounter, assert_same


@torch.library.custom_op("t2x_test::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    """An op no lowering exists for."""
    return x.sin() * 2


@mystery.register_fake
def _(x):
    return torch.empty_like(x)


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 2 * x.cos()


mystery.register_autograd(
    _backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0])
)


def model(x, w):
    h = torch.relu(x @ w)  # XLA
    h = torch.ops.t2x_test.mystery(h)  # eager
    return (h * 3).sum(-1), h.exp()  # XLA


def test_fallback_runs_unsupported_op_in_eager_and_warns_once(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    f = torch.compile(model, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning) as record:
        out = f(x, w)
    assert_same(out, model(x, w))
    assert len(record) == 1
    message = str(record[0].message)
    assert "t2x_test.mystery" in message
    assert re.search(r"test_fallback\.py:\d+: h = torch\.ops\.t2x_test\.mystery\(h\)", message)
    # The warning points at that line, the user's, not at torch's frame that called us.
    assert record[0].filename == __file__
    assert record[0].lineno == model.__code__.co_firstlineno + 2
    assert counter.count == 2  # the parts before and after the eager op run in XLA
    # Second call: same results, no new warning, no new compile.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(f(x, w), model(x, w))
    assert counter.count == 2


def test_fallback_gradients_flow_through_eager_part():
    x = torch.randn(4, 5, requires_grad=True)
    w = torch.randn(5, 3, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    f = torch.compile(model, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning):
        a, b = f(x, w)
    (a.sum() + b.sum()).backward()
    ea, eb = model(x2, w2)
    (ea.sum() + eb.sum()).backward()
    assert_same(x.grad, x2.grad)
    assert_same(w.grad, w2.grad)


def test_strict_mode_lists_every_unsupported_op():
    def two_bad(x):
        a = torch.ops.t2x_test.mystery(x)
        b = torch.ops.t2x_test.mystery(a + 1)
        return b

    f = torch.compile(two_bad, backend="xla", options={"strict": True})
    with pytest.raises(torch2xla.UnsupportedOpsError) as info:
        f(torch.randn(3))
    message = str(info.value)
    assert message.count("t2x_test.mystery.default: no lowering") == 2
    assert "a = torch.ops.t2x_test.mystery(x)" in message
    assert "b = torch.ops.t2x_test.mystery(a + 1)" in message
    assert "strict" in message  # says what to do
    assert len(info.value.unsupported) == 2
    # one family of compile errors: ``except torch2xla.CompileError`` catches it too
    assert isinstance(info.value, torch2xla.CompileError)
    assert info.value.graph == torch2xla.cache_info(f)[0].name and info.value.stage is None


def test_fallback_with_mutation_and_buffers():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(3)

        def forward(self, x):
            return torch.ops.t2x_test.mystery(self.bn(x))

    m, ref = M(), M()
    f = torch.compile(m, backend="xla")
    x = torch.randn(6, 3)
    with pytest.warns(torch2xla.FallbackWarning):
        out = f(x)
    assert_same(out, ref(x))
    assert_same(m.bn.running_mean, ref.bn.running_mean)
    assert m.bn.num_batches_tracked.item() == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[x > 0].sum() + x.nonzero().shape[0],  # data-dependent shapes
        lambda x: x * x.max().item(),  # .item() inside the function
        lambda x: torch.masked_select(x, x < 0.5) * 2,
    ],
    ids=["bool-index-nonzero", "item", "masked_select"],
)
def test_data_dependent_ops_give_eager_results(fn):
    x = torch.randn(20)
    assert_same(torch.compile(fn, backend="xla", options={"strict": True})(x), fn(x))


def test_boolean_mask_assignment_is_lowered(monkeypatch):
    counter = ProgramCounter(monkeypatch)

    def f(x):
        x = x.clone()
        x[x > 0] = 0.0
        return x * 2

    x = torch.randn(10)
    assert_same(torch.compile(f, backend="xla", options={"strict": True})(x), f(x))
    assert counter.count == 1


_TAU = torch.tensor([0.5, 0.2], dtype=torch.float64)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: torch.linalg.eig(a)[0].real.sum() + torch.linalg.eig(a)[1].abs().sum(),
        lambda a: torch.linalg.eigvals(a @ a).abs().sum(),
        lambda a: torch.linalg.householder_product(a.tanh(), _TAU).sum(),
        lambda a: (torch.ormqr(a, _TAU, a.detach()) * 2).sum(),
    ],
    ids=["eig", "eigvals", "householder_product", "ormqr"],
)
def test_ops_jax_cannot_differentiate_run_in_eager_where_a_gradient_flows(fn):
    # These raised a CompileError (JAX has no reverse-mode rule for them) where eager gives a
    # gradient; they now run in eager in training, and in XLA where no gradient flows.
    a = torch.tensor([[1.0, 0.3], [0.6, 1.6]], dtype=torch.float64)
    leaves = [a.clone().requires_grad_() for _ in range(2)]
    with pytest.warns(torch2xla.FallbackWarning):
        got = torch.compile(fn, backend="xla")(leaves[0])
    want = fn(leaves[1])
    got.backward()
    want.backward()
    assert_same(got, want)
    assert_same(leaves[0].grad, leaves[1].grad)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.FallbackWarning)  # all of it in XLA
        torch.testing.assert_close(torch.compile(fn, backend="xla")(a), fn(a))


def test_eig_gradient_that_depends_on_the_eigenvectors_phase_raises_eagers_error():
    a = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)

    def fn(a):
        return torch.linalg.eig(a)[1].real.sum()  # not invariant under v -> v e^{i phi}

    def error(f):
        with pytest.raises(RuntimeError) as info:
            f(a.clone().requires_grad_()).backward()
        return str(info.value)

    assert error(torch.compile(fn, backend="xla")) == error(fn)
