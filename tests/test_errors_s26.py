"""Shapes, dtypes and arguments eager rejects, which Dynamo's fake run sees before any backend
(``capture/_fake_errors.py``): the compiled function raises eager's own error (type and
message) from the user's line, where Dynamo raised its ``TorchRuntimeError`` with the meta
kernel's words ("RuntimeError when making fake tensor call ... a and b must have same
reduction dim"), or an ``IndexError`` naming a size symbol ("index s24 is out of bounds")."""

from __future__ import annotations

import traceback

import pytest
import torch
import torch.nn.functional as F
from torch import nn

THIS = __file__.rsplit("/", 1)[-1]


def _error(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return e
    raise AssertionError(f"{fn} did not raise")


def _assert_same_error(got: BaseException, want: BaseException):
    """Eager's error (or torch2xla's ``OpError`` of its type, eager's message first, then the
    op and the user's line), raised from the user's line (in the traceback or message)."""
    assert isinstance(got, type(want)), (type(got), got, type(want), want)
    assert not isinstance(got, torch._dynamo.exc.TorchDynamoException), got
    assert str(got).startswith(str(want)), (str(got), str(want))
    frames = traceback.extract_tb(got.__traceback__)
    line = any(f.filename.endswith(THIS) and f.name != "_error" for f in frames)
    assert line or f"{THIS}:" in str(got), (frames, str(got))


def _mlp(x, w1, w2):
    h = torch.relu(x @ w1)
    return h @ w2  # inner sizes differ


def _write_then_broadcast(x, y):
    x.mul_(2)  # eager writes x before the failing op: so must we
    return x + y


R = lambda *s, dtype=torch.float32: torch.randn(*s, dtype=dtype)
CASES = [
    ("mm", _mlp, lambda: (R(2, 3), R(3, 4), R(5, 2))),
    ("broadcast", lambda a, b: (a * b).sum(), lambda: (R(2, 3), R(4, 2))),
    ("view_non_contiguous", lambda a: a.t().view(-1) * 2, lambda: (R(3, 4),)),
    ("reshape", lambda a: a.reshape(5, 3), lambda: (R(3, 4),)),
    ("expand_smaller", lambda a: a.expand(2, 2), lambda: (R(2, 3),)),
    ("cat", lambda a, b: torch.cat([a, b]), lambda: (R(2, 3), R(2, 4))),
    ("stack", lambda a, b: torch.stack([a, b]) + 1, lambda: (R(3), R(4))),
    ("linear_dtype", lambda x, w: F.linear(x, w), lambda: (R(2, 3), R(4, 3, dtype=torch.float64))),
    ("matmul_dtype", lambda a, b: a @ b, lambda: (R(2, 3), R(3, 2, dtype=torch.float64))),
    ("int_add_float_", lambda a, b: a.add_(b), lambda: (torch.arange(3), R(3))),
    ("float_index", lambda x, j: x[j], lambda: (R(4), torch.tensor([0.0, 1.0]))),
    (
        "index_put_dtype",
        lambda x, j, v: x.index_put_((j,), v),
        lambda: (R(4), torch.tensor([1]), R(1).double()),
    ),
    ("masked_fill_value_1d", lambda a, m, v: a.masked_fill(m, v), lambda: (R(3), R(3) > 0, R(1))),
    ("conv_channels", lambda x, w: F.conv2d(x, w), lambda: (R(1, 4, 5, 5), R(2, 3, 3, 3))),
    (
        "cross_entropy_batch",
        lambda x, t: F.cross_entropy(x, t),
        lambda: (R(3, 4), torch.tensor([0, 1])),
    ),
    ("dropout_p", lambda x: F.dropout(x, 1.5), lambda: (R(3),)),
    ("narrow_too_long", lambda a: a.narrow(0, 2, 5), lambda: (R(3, 2),)),
    ("write_then_broadcast", _write_then_broadcast, lambda: (R(3), R(2, 2))),
]


def test_fake_run_errors_are_eagers_errors_from_the_users_line():
    for name, fn, make in CASES:
        torch._dynamo.reset()
        args = make()
        eager_args = [a.clone() for a in args]
        want = _error(fn, *eager_args)
        got = _error(torch.compile(fn, backend="xla"), *args)
        _assert_same_error(got, want)
        for a, b in zip(args, eager_args):  # writes before the failing op, as eager's
            assert torch.equal(a, b), name


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_module_given_the_wrong_features_raises_then_runs():
    torch.manual_seed(0)
    net = _Net()
    compiled = torch.compile(net, backend="xla")
    torch.testing.assert_close(compiled(torch.ones(2, 4)), net(torch.ones(2, 4)))
    _assert_same_error(_error(compiled, torch.ones(2, 5)), _error(net, torch.ones(2, 5)))
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), net(x))


def test_error_caught_by_the_users_handler():
    def f(a, b):
        try:
            return a @ b
        except RuntimeError:
            return a.sum() + b.sum()

    a, b = torch.randn(2, 3), torch.randn(4, 2)
    torch.testing.assert_close(torch.compile(f, backend="xla")(a, b), f(a, b))


def test_changing_int_position_names_the_value():
    # Dynamo traces a changing int as a size symbol: the meta kernel's message named it (s24)
    cache = torch.zeros(4, 2)
    eager_cache = cache.clone()

    def step(buf, pos, v):
        buf[pos] = v
        return buf.sum()

    compiled = torch.compile(step, backend="xla")
    for pos in range(6):
        v = torch.full((2,), float(pos))
        if pos < 4:
            assert torch.equal(compiled(cache, pos, v), step(eager_cache, pos, v))
        else:
            got, want = _error(compiled, cache, pos, v), _error(step, eager_cache, pos, v)
            _assert_same_error(got, want)
    assert torch.equal(cache, eager_cache)

    read = torch.compile(lambda x, pos: x[pos] * 2, backend="xla")
    x = torch.randn(3, 2)
    for pos in (0, 1, 2, -3):
        assert torch.equal(read(x, pos), x[pos] * 2)
    _assert_same_error(_error(read, x, 3), _error(lambda x, p: x[p] * 2, x, 3))


def test_fullgraph_and_other_backends_keep_dynamos_error():
    def f(a, b):
        return a @ b

    a, b = torch.randn(2, 3), torch.randn(4, 2)
    for compiled in (
        torch.compile(f, backend="xla", fullgraph=True),
        torch.compile(f, backend="eager"),
    ):
        torch._dynamo.reset()
        with pytest.raises(torch._dynamo.exc.TorchRuntimeError, match="fake tensor call"):
            compiled(a, b)


# Left: errors Dynamo's own Python emulation raises while tracing (not a fake run), with its
# words or type, before any backend runs.
PYTHON_LEVEL = [
    # Dynamo: IndexError 'list index out of range' (eager: 'tuple index out of range')
    ("shape_index", lambda a: a * a.shape[5], (torch.randn(2, 3),)),
    # Dynamo: IndexError 'tuple index out of range' (eager: 'Dimension out of range ...')
    ("size_dim", lambda a: a * a.size(3), (torch.randn(2, 3),)),
    # Dynamo: IndexError (eager: TypeError 'len() of a 0-d tensor')
    ("len_0d", lambda a: a * len(a), (torch.tensor(1.0),)),
    # Dynamo: AssertionError "Can't unpack scalar tensors." (eager: TypeError)
    ("iter_0d", lambda a: [v for v in a], (torch.tensor(1.0),)),
]


@pytest.mark.xfail(strict=True, reason="Dynamo's Python emulation raises its own error first")
@pytest.mark.parametrize("name, fn, args", PYTHON_LEVEL, ids=[c[0] for c in PYTHON_LEVEL])
def test_python_level_errors_while_tracing(name, fn, args):
    torch._dynamo.reset()
    _assert_same_error(_error(torch.compile(fn, backend="xla"), *args), _error(fn, *args))


@pytest.mark.xfail(strict=True, reason="Dynamo traces Tensor.numpy() without eager's check")
def test_numpy_of_a_tensor_that_requires_grad_raises():
    fn = lambda a: a.numpy()
    a = torch.randn(2, requires_grad=True)
    _assert_same_error(_error(torch.compile(fn, backend="xla"), a), _error(fn, a))
