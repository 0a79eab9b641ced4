"""Issue 2 part 4: semantics against eager PyTorch."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._util import assert_same, run_both


def test_multiple_outputs():
    def f(x, y):
        return x + y, x * y, (x - y).sum()

    out, ref, *_ = run_both(f, torch.randn(3, 4), torch.randn(3, 4))
    assert isinstance(out, tuple) and len(out) == 3
    assert_same(out, ref)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x * 3).to(torch.int64) + 2**40,  # int64 beyond 32 bits
        lambda x: x > 0.1,  # bool
        lambda x: x.double() * 1e-300,  # float64 beyond float32 range
        lambda x: x.bfloat16() * 3,  # bfloat16
        lambda x: x.argmax(dim=1),  # int64 indices
        lambda x: x.sum(dtype=torch.float64),
    ],
    ids=["int64", "bool", "float64", "bfloat16", "argmax", "sum-f64"],
)
def test_output_dtypes(fn):
    out, ref, *_ = run_both(fn, torch.randn(4, 5))
    assert_same(out, ref)


def test_int64_input_not_truncated():
    x = torch.tensor([2**40 + 1, -(2**50) + 3], dtype=torch.int64)
    out, ref, *_ = run_both(lambda x: x * 3 + 1, x)
    assert_same(out, ref)
    assert out[0].item() == 3 * (2**40 + 1) + 1


def test_inplace_on_input_lands():
    def f(x, y):
        x.add_(1)
        y.mul_(2)
        return x * y

    out, ref, a_xla, a_eager = run_both(f, torch.randn(3), torch.randn(3))
    assert_same(out, ref)
    assert_same(a_xla, a_eager)


def test_inplace_on_input_without_output():
    def f(x):
        x.clamp_(min=0)

    out, ref, a_xla, a_eager = run_both(f, torch.randn(6))
    assert_same(a_xla, a_eager)


def test_batchnorm_train_updates_buffers_like_eager():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    ref.load_state_dict(m.state_dict())
    c = torch.compile(m, backend="xla", options={"strict": True})
    for _ in range(3):
        x = torch.randn(4, 3, 8, 8)
        assert_same(c(x), ref(x), atol=1e-5)
    bn, bn_ref = m[1], ref[1]
    assert_same(bn.running_mean, bn_ref.running_mean)
    assert_same(bn.running_var, bn_ref.running_var)
    assert bn.num_batches_tracked.item() == bn_ref.num_batches_tracked.item() == 3
    assert bn.num_batches_tracked.dtype == torch.int64


def test_batchnorm_eval_uses_running_stats():
    torch.manual_seed(0)
    m = nn.BatchNorm1d(5)
    m.running_mean.uniform_()
    m.running_var.uniform_(0.5, 2)
    m.eval()
    out, ref, *_ = run_both(m, torch.randn(4, 5))
    assert_same(out, ref)


def test_weight_update_seen_without_recompile(monkeypatch):
    from tests._util import ProgramCounter

    counter = ProgramCounter(monkeypatch)
    lin = nn.Linear(4, 3)
    c = torch.compile(lin, backend="xla")
    x = torch.randn(2, 4)
    assert_same(c(x), lin(x))
    with torch.no_grad():
        lin.weight.mul_(2)
        lin.bias.add_(1)
    assert_same(c(x), lin(x))
    assert counter.count == 1


def test_dropout_fresh_masks_and_statistics():
    f = torch.compile(lambda x: F.dropout(x, p=0.3, training=True), backend="xla")
    x = torch.ones(200, 200)
    a, b = f(x), f(x)
    assert not torch.equal(a, b)  # fresh randomness every call
    for out in (a, b):
        kept = out != 0
        assert abs(kept.float().mean().item() - 0.7) < 0.01
        torch.testing.assert_close(out[kept], torch.full_like(out[kept], 1 / 0.7))
        # The mask's two halves come from the same threefry blocks: still independent.
        first, second = kept.flatten().chunk(2)
        assert abs((first & second).float().mean().item() - 0.49) < 0.01


def test_dropout_reproducible_under_manual_seed():
    f = torch.compile(lambda x: F.dropout(x, p=0.5, training=True), backend="xla")
    x = torch.ones(64, 64)
    torch.manual_seed(123)
    a = f(x)
    torch.manual_seed(123)
    b = f(x)
    assert torch.equal(a, b)


def test_dropout_eval_is_identity():
    m = nn.Dropout(0.5).eval()
    out, ref, *_ = run_both(m, torch.randn(10, 10))
    assert_same(out, ref)


def test_python_scalars_in_graph():
    def f(x, alpha: float, n: int):
        return x * alpha + n, x.pow(n)

    x = torch.randn(5)
    out, ref, *_ = run_both(f, x, 2.5, 3)
    assert_same(out, ref)
    out, ref, *_ = run_both(f, x, -1.5, 2)
    assert_same(out, ref)


def test_symint_inputs_dynamic():
    def f(x):
        n = x.shape[0]
        return x.view(n, -1).sum(1) + torch.arange(n), x.new_ones(n * 2)

    c = torch.compile(f, backend="xla", dynamic=True, options={"strict": True})
    for n in (2, 5, 9):
        x = torch.randn(n, 3, 2)
        assert_same(c(x), f(x))


def test_int_arguments_become_symints():
    def f(x, k: int):
        return x[:k] * k

    c = torch.compile(f, backend="xla", dynamic=True)
    x = torch.randn(10)
    for k in (1, 4, 7):
        assert_same(c(x, k), f(x, k))


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_empty_tensors(shape):
    def f(x):
        return x * 2 + 1, x.sum(-1), x.reshape(-1)

    out, ref, *_ = run_both(f, torch.randn(shape))
    assert_same(out, ref)


def test_zero_dim_tensors():
    def f(x, y):
        return x * y, (x + 1).exp(), y.reshape(1)

    out, ref, *_ = run_both(f, torch.tensor(2.5), torch.tensor(-1.0))
    assert_same(out, ref)


def test_zero_dim_type_promotion():
    # A 0-d float64 tensor does not promote a float32 tensor (torch rule; jnp would).
    def f(x, s):
        return x * s, x + 1.5, (x > 0).int() + 1

    out, ref, *_ = run_both(
        f, torch.randn(3, dtype=torch.float32), torch.tensor(2.0, dtype=torch.float64)
    )
    assert_same(out, ref)


def test_non_contiguous_inputs():
    base = torch.randn(6, 8)

    def f(a, b, c):
        return a * 2, b + 1, c.sum(0)

    args = (base.t(), base[:, ::2], base[1:, 3:].expand(2, 5, 5))
    out, ref, *_ = run_both(f, *args)
    assert_same(out, ref)


def test_misaligned_input():
    storage = torch.randn(101)
    x = storage[1:]  # data pointer off 64-byte alignment
    assert x.data_ptr() % 64 != 0
    out, ref, *_ = run_both(lambda x: x.exp() + 1, x)
    assert_same(out, ref)


def test_stride_zero_input():
    x = torch.randn(1, 5).expand(4, 5)
    out, ref, *_ = run_both(lambda x: x * torch.arange(4.0)[:, None], x)
    assert_same(out, ref)


def test_outputs_do_not_alias_inputs():
    x = torch.randn(5)
    c = torch.compile(lambda x: x.clone(), backend="xla")
    y = c(x)
    y.add_(1)
    assert not torch.equal(x, y)


def test_output_is_writable_and_on_input_device():
    c = torch.compile(lambda x: x * 2, backend="xla")
    y = c(torch.ones(3))
    assert y.device == torch.device("cpu")
    y[0] = 7
    assert y[0].item() == 7


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.view(-1), lambda x: x.t(), lambda x: x[1:, ::2], lambda x: (x.t(), x * 2)],
    ids=["view", "t", "slice", "view-and-compute"],
)
def test_outputs_that_are_views_of_inputs_stay_views(fn):
    x = torch.randn(4, 6)
    out = torch.compile(fn, backend="xla", options={"strict": True})(x)
    ref = fn(x)
    assert_same(out, ref)
    view = out[0] if isinstance(out, tuple) else out
    view.mul_(0)  # as in eager, writing through the returned view changes the input
    assert (x == 0).any() and torch.equal(view, (ref[0] if isinstance(ref, tuple) else ref))


def test_mutated_input_returned_is_the_input():
    def f(x, y):
        y.copy_(x * 2)
        return y

    x, y = torch.randn(3), torch.zeros(3)
    out = torch.compile(f, backend="xla", options={"strict": True})(x, y)
    assert out is y and torch.equal(y, x * 2)


def test_view_output_gradient():
    x = torch.randn(3, 4, requires_grad=True)
    out = torch.compile(lambda x: (x.t(), (x * x).sum()), backend="xla")(x)
    (out[0] * torch.arange(12.0).view(4, 3)).sum().backward()
    torch.testing.assert_close(x.grad, torch.arange(12.0).view(4, 3).t())


def test_enable_grad_inside_function_called_under_no_grad():
    lin = nn.Linear(3, 2)

    def f(x):
        with torch.enable_grad():
            y = lin(x)
        return y, y.detach() * 2

    x = torch.randn(4, 3)
    with torch.no_grad():
        out = torch.compile(f, backend="xla")(x)
        ref = f(x)
    assert [o.requires_grad for o in out] == [r.requires_grad for r in ref] == [True, False]
    assert_same(out, ref)
    out[0].sum().backward()
    grad = lin.weight.grad.clone()
    lin.weight.grad = None
    ref[0].sum().backward()
    assert_same(grad, lin.weight.grad)


# -- version counters (issue 22) ----------------------------------------------------------------
# Eager bumps a tensor's ``_version`` once per in-place op on it or on a view of it (autograd's
# saved-tensor checks and users read it); a compiled call must leave the same counts.
def chain(x):
    x.add_(1)
    x.mul_(2)
    return x.sum()


def writes_through_views(x):
    for i in range(3):
        x[i].add_(1)
    x[1] += 1  # (two writes: the view's add and the setitem)
    x.clamp_(0, 1)
    return x * 2


def inplace_forms(x, mask):
    F.relu(x, inplace=True)
    torch.add(x, 1, out=x)
    x[mask] = 0.0
    return x.sum()


def detached_writes(x):
    x.data.add_(1)  # (.data has a counter of its own: x's is not bumped)
    x.detach().mul_(2)
    return x * 1


def around_a_graph_break(x):
    x.add_(1)
    torch._dynamo.graph_break()
    x.mul_(2)
    x.sub_(1)
    return x


def around_a_data_dependent_op(x):
    x.add_(1)
    nz = x.nonzero()
    x.mul_(2)
    x.mul_(2)
    return nz


def two_views_of_one_base(a, b):
    a.add_(1)
    b.mul_(2)
    b.add_(1)
    return a + 1


def _overlapping():
    base = torch.zeros(6)
    return base[0:4], base[2:6]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    "fn, make",
    [
        (chain, lambda: (torch.zeros(3),)),
        (writes_through_views, lambda: (torch.zeros(3, 2),)),
        (inplace_forms, lambda: (torch.randn(3), torch.tensor([True, False, True]))),
        (detached_writes, lambda: (torch.zeros(3),)),
        (around_a_graph_break, lambda: (torch.zeros(3),)),
        (around_a_data_dependent_op, lambda: (torch.tensor([0.0, 1.0, -1.0]),)),
        (two_views_of_one_base, _overlapping),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_inplace_ops_bump_versions_as_in_eager(fn, make):
    def bumps(f):
        args = make()
        before = [a._version for a in args]
        f(*args)
        f(*args)
        return [a._version - b for a, b in zip(args, before)]

    torch._dynamo.reset()
    assert bumps(torch.compile(fn, backend="xla")) == bumps(fn)


def test_batchnorm_buffers_keep_eagers_versions():
    # eager's kernel updates the running statistics without bumping their versions
    torch.manual_seed(0)
    m = nn.BatchNorm1d(3).train()
    ref = nn.BatchNorm1d(3).train()

    def bumps(module):
        buffers = list(module.buffers())
        before = [b._version for b in buffers]
        module(torch.randn(4, 3))
        return [b._version - v for b, v in zip(buffers, before)]

    assert bumps(torch.compile(m, backend="xla")) == bumps(ref) == [0, 0, 1]


def test_versions_in_a_padded_program():
    def f(x, n):
        x.add_(1)
        x.mul_(2)
        n.add_(1)
        return x.sum(0)

    compiled = torch.compile(f, backend="xla")
    for size in (5, 6, 7):  # (dynamic sizes: run in a program padded to 8 rows)
        x, n = torch.zeros(size, 3), torch.zeros(())
        torch._dynamo.mark_dynamic(x, 0)
        compiled(x, n)
        assert (x._version, n._version) == (2, 1)
        assert_same(x, torch.full((size, 3), 2.0))


def test_autograd_sees_eagers_version_of_an_input_changed_by_a_compiled_call():
    def rescale(x):
        x.add_(1)
        x.mul_(2)
        return x

    def message(f):
        w = torch.ones(3, requires_grad=True)
        x = torch.ones(3) * 1
        loss = (x * w).sum()  # saves x at version 0
        f(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            loss.backward()
        return str(info.value)

    assert message(torch.compile(rescale, backend="xla")) == message(rescale)
    assert "is at version 2; expected version 0" in message(rescale)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_versions_on_cuda():
    # eager's counts, except that a write eager's kernel does not count (batch norm's running
    # statistics) still moves the version: cached views of the buffer read it as torch's write
    x = torch.zeros(3, device="cuda")
    torch.compile(chain, backend="xla")(x)
    assert x._version == 2
    m = nn.BatchNorm1d(3).cuda().train()
    torch.compile(m, backend="xla")(torch.randn(4, 3, device="cuda"))
    assert [b._version for b in m.buffers()] == [1, 1, 1]
