"""Where eager's backward raises, ours raises (torch2xla/autodiff/_eager_backward.py): a tensor
saved for the backward and changed in place (inside the graph, or an output the user changes
after the call), an op whose derivative eager does not implement, a backward kernel's dtype
check. Where eager's backward runs, ours runs with eager's gradients (None-ness too).

Each case runs the same user code eagerly and compiled (``backend="xla"``), then the same
backward, and compares: the same error type and message, or the same outputs and gradients.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import assert_same


def _both(fn, args, backward):
    """``fn(*args)`` then ``backward(out)``, eager and compiled, from copies of ``args``: per
    run, ("raised", type, message) or ("ran", out, gradients of the inputs requiring grad)."""
    results = []
    for compiled in (False, True):
        torch._dynamo.reset()
        a = [t.detach().clone().requires_grad_(t.requires_grad) for t in args]
        f = torch.compile(fn, backend="xla") if compiled else fn
        try:
            out = f(*a)
            backward(out)
        except (RuntimeError, NotImplementedError) as e:
            results.append(("raised", type(e), str(e)))
            continue
        results.append(("ran", out, [t.grad for t in a if t.requires_grad]))
    return results


def assert_like_eager(fn, args, backward=lambda out: out.sum().backward()):
    """The compiled run raises eager's error, or matches eager's outputs and gradients."""
    __tracebackhide__ = True
    eager, ours = _both(fn, args, backward)
    assert ours[0] == eager[0], (eager, ours)
    if eager[0] == "raised":
        assert ours[1] is eager[1], (eager, ours)
        # (the node's name differs where our Function saved the tensor: "output 0 of Exp"
        # against "output 0 of XlaFunction"; the message up to it is eager's)
        assert ours[2].split(", which is")[0] == eager[2].split(", which is")[0]
        return
    assert_same(ours[1], eager[1])
    assert [g is None for g in ours[2]] == [g is None for g in eager[2]]
    assert_same([g for g in ours[2] if g is not None], [g for g in eager[2] if g is not None])


def _x(*shape):
    return torch.randn(*shape or (3, 4), requires_grad=True)


# -- tensors saved for the backward, changed in place ---------------------------------------------
def exp_then_add_(x):
    y = x.exp()
    y.add_(1)  # exp saved its output
    return y * 2


def sigmoid_then_mul_(x):
    y = torch.sigmoid(x)
    y.mul_(2)
    return y


def softmax_view_then_fill_(x):
    p = x.softmax(-1)
    p[0].fill_(0)  # a view of the saved output shares its version counter
    return p


def sin_of_changed_input(x):
    h = x * 1
    y = h.sin()  # sin saved h
    h.add_(1)
    return y


def mul_then_add_(x):  # mul saved x, not its output: eager runs
    y = x * 2
    y.add_(1)
    return y


def relu_then_add_(x):  # relu saved its output
    y = torch.relu(x)
    y += 1
    return y


@pytest.mark.parametrize(
    "fn",
    [
        exp_then_add_,
        sigmoid_then_mul_,
        softmax_view_then_fill_,
        sin_of_changed_input,
        mul_then_add_,
        relu_then_add_,
    ],
)
def test_saved_tensor_changed_in_graph(fn):
    assert_like_eager(fn, [_x()])


def _change_output(out):
    out.add_(1)
    out.sum().backward()


@pytest.mark.parametrize(
    "fn",
    [
        torch.exp,  # saves its output: eager raises
        torch.tanh,
        lambda x: x.softmax(-1),
        lambda x: x * 3,  # saves nothing of its output: eager runs
        lambda x: (x * 3).exp().sum(-1),  # exp's output is not the user's output
    ],
    ids=["exp", "tanh", "softmax", "mul", "exp_sum"],
)
def test_output_changed_by_the_user(fn):
    assert_like_eager(fn, [_x()], _change_output)


def test_output_view_changed_by_the_user():
    def backward(out):
        out.t()[0].mul_(2)  # a view of the output the backward reads
        out.sum().backward()

    assert_like_eager(torch.exp, [_x()], backward)


@pytest.mark.parametrize("change", [False, True], ids=["unchanged", "changed"])
def test_output_of_a_graph_that_updates_buffers(change):
    # BatchNorm's running statistics come back as packed outputs beside the user's: the outputs
    # eager's graph saves (relu's result) are found among the program's packed outputs
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(4, 8)

    def run(m):
        out = m(x)
        if change:
            out.add_(1)
        out.sum().backward()

    try:
        run(model)
    except RuntimeError as eager:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            run(compiled)
        assert "modified by an inplace operation" in str(eager)
        return
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    run(compiled)
    assert_same([p.grad for p in model.parameters()], want)


def test_input_changed_after_the_call():
    def fn(h):
        return h.sin()

    def run(compiled):
        torch._dynamo.reset()
        x = _x()
        h = x * 1
        y = (torch.compile(fn, backend="xla") if compiled else fn)(h)
        h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()

    run(False)
    run(True)


# -- derivatives eager does not implement ---------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        torch.floor_divide,
        lambda x, y: x // y,
        torch.heaviside,
        torch.igamma,
        torch.igammac,
        torch.special.zeta,
    ],
    ids=["floor_divide", "floordiv", "heaviside", "igamma", "igammac", "zeta"],
)
def test_not_implemented_derivative(fn):
    x = (torch.rand(3, 4) + 0.5).requires_grad_()
    assert_like_eager(lambda x, y: fn(x, y) * 2, [x, torch.rand(3, 4) + 1.5])


def test_not_implemented_only_where_the_gradient_flows():
    # the floor_divide output gets no gradient: eager's backward never reaches its node
    def fn(x):
        return x.sin(), torch.floor_divide(x, 2.0)

    assert_like_eager(fn, [_x()], lambda out: out[0].sum().backward())
    assert_like_eager(fn, [_x()], lambda out: out[1].sum().backward())


def test_not_implemented_without_a_gradient_is_fine():
    # the divisor does not require grad and the result is detached: nothing to raise
    def fn(x):
        return torch.floor_divide(x.detach(), 2.0) + x

    assert_like_eager(fn, [_x()])


# -- backward-time dtype errors ------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize(
    ("dx", "dt"),
    [
        (torch.float32, torch.float64),
        (torch.float64, torch.float32),
        (torch.float32, torch.float32),
    ],
)
def test_huber_loss_target_dtype(reduction, dx, dt):
    x = torch.randn(5, dtype=dx, requires_grad=True)
    assert_like_eager(
        lambda x, t: F.huber_loss(x, t, reduction=reduction), [x, torch.randn(5, dtype=dt)]
    )


@pytest.mark.parametrize("b_requires_grad", [False, True])
@pytest.mark.parametrize("dt", [torch.float32, torch.float64])
def test_dist_p0(b_requires_grad, dt):
    # p = 0 counts nonzeros: eager's gradient is None; with both requiring grad its formula
    # fails on the undefined gradient
    b = torch.randn(3, dtype=dt, requires_grad=b_requires_grad)
    assert_like_eager(lambda a, b: torch.dist(a, b, p=0) * 2, [_x(3), b])


@pytest.mark.parametrize(
    "loss",
    [F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.soft_margin_loss],
    ids=["mse", "l1", "smooth_l1", "soft_margin"],
)
def test_mixed_dtype_losses_that_eager_differentiates(loss):
    assert_like_eager(loss, [_x(5), torch.randn(5, dtype=torch.float64)])
