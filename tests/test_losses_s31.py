"""Loss functions as training code calls them, against eager (session 31): the unreduced
``multi_margin_loss`` of an unbatched input with a one-element target, ``smooth_l1_loss``'s
check of ``beta``, and mean-reduced losses of an empty batch (a detection loss over positive
anchors when a batch has none), whose fake backward the compile analyses divided by zero."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._util import leaf


def _observe(fn, args, compiled: bool) -> list:
    """``fn(*args)``'s outputs, then the gradients (None kept) of the floating ``args``, after
    a backward of the sum of the outputs that require grad; or the error, by type and line."""
    torch._dynamo.reset()
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    run = torch.compile(fn, backend="xla") if compiled else fn
    try:
        out = run(*args)
    except Exception as e:
        return [("raised", type(e), str(e).split("\n")[0])]
    outs = out if isinstance(out, tuple) else (out,)
    seen = [("out", o.detach(), o.dtype, o.shape, o.requires_grad) for o in outs]
    loss = sum(o.sum() for o in outs if o.requires_grad)
    if isinstance(loss, torch.Tensor):
        try:
            loss.backward()
        except RuntimeError as e:
            return [*seen, ("raised", type(e), str(e).split("\n")[0])]
    seen += [("grad", a.grad) for a in args if a.is_floating_point()]
    return seen


def _same_as_eager(fn, *args):
    want = _observe(fn, args, compiled=False)
    got = _observe(fn, args, compiled=True)
    assert [w[0] for w in want] == [g[0] for g in got], (got, want)
    for g, w in zip(got, want):
        if w[0] == "raised":
            assert issubclass(g[1], w[1]) and w[2] in g[2], (g, w)
            continue
        if w[0] == "out":
            assert g[2:] == w[2:], (g, w)
        if w[1] is None or g[1] is None:
            assert g[1] is None and w[1] is None, (g, w)
            continue
        assert (g[1].dtype, g[1].shape) == (w[1].dtype, w[1].shape), (g, w)
        torch.testing.assert_close(g[1], w[1], rtol=1e-6, atol=1e-6, equal_nan=True)


# -- multi_margin_loss: eager's unreduced loss is 0-d for a 0-d target only


@pytest.mark.parametrize("shapes", [((5,), (1,)), ((5,), ()), ((1, 5), ()), ((1, 5), (1,))])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_unreduced_shape_follows_target(shapes, p):
    xs, ts = shapes
    target = torch.full(ts, 2)
    weight = torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0])

    def fn(x):
        return F.multi_margin_loss(x, target, p=p, weight=weight, reduction="none")

    _same_as_eager(fn, leaf(*xs))


# -- smooth_l1_loss's beta: eager's kernel refuses a negative one (the meta kernel does not)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, t: F.smooth_l1_loss(x, t, beta=-1.0),
        lambda x, t: nn.SmoothL1Loss(beta=-0.1, reduction="none")(x, t),
        lambda x, t: torch._C._nn.smooth_l1_loss(x, t, 2, -0.5),
        lambda x, t: F.smooth_l1_loss(x, t.double(), beta=-1.0),
    ],
    ids=["functional", "module", "aten", "float64_target"],
)
def test_smooth_l1_negative_beta_raises(call):
    _same_as_eager(call, leaf(4), torch.rand(4))


def test_smooth_l1_zero_and_positive_beta_run():
    def fn(x, t):
        return F.smooth_l1_loss(x, t, beta=0.0), F.smooth_l1_loss(x, t, beta=0.5, reduction="sum")

    _same_as_eager(fn, leaf(4, 3), leaf(4, 3, seed=1))


# -- mean-reduced losses of an empty batch: NaN, an empty gradient (torch's Python
# decompositions of their backwards divide by ``numel()``, 0, in the fake backward that finds
# eager's backward-time errors)

_EMPTY = {
    "mse": lambda x, t: F.mse_loss(x, t),
    "smooth_l1": lambda x, t: F.smooth_l1_loss(x, t, beta=0.5),
    "huber": lambda x, t: F.huber_loss(x, t),
    "l1": lambda x, t: F.l1_loss(x, t),
    "soft_margin": lambda x, t: F.soft_margin_loss(x, t),
    "mse_float64_target": lambda x, t: F.mse_loss(x, t.double()),
    "huber_float64_target": lambda x, t: F.huber_loss(x, t.double()),
    "modules": lambda x, t: (nn.MSELoss()(x, t), nn.SmoothL1Loss()(x, t), nn.HuberLoss()(x, t)),
}


@pytest.mark.parametrize("name", list(_EMPTY))
def test_mean_losses_of_an_empty_batch(name):
    _same_as_eager(_EMPTY[name], leaf(0, 4), leaf(0, 4, seed=1))


@pytest.mark.parametrize("outputs", ["two", "one"])
def test_empty_loss_beside_a_backward_error_of_eager(outputs):
    """The fake backward goes past the empty batch's loss to the error eager's backward raises
    (``huber_loss_backward`` of a float64 target)."""

    def fn(e, te, x, t):
        a, b = F.huber_loss(x, t.double()), F.mse_loss(e, te) + F.smooth_l1_loss(e, te)
        return (a, b) if outputs == "two" else a + b

    _same_as_eager(fn, leaf(0, 4), leaf(0, 4, seed=1), leaf(3), leaf(3, seed=2))


def test_detection_loss_over_positives_of_a_batch_without_any():
    torch.manual_seed(0)
    head = nn.Linear(4, 4)

    def f(feats, boxes, labels):
        pred = head(feats)
        pos = labels > 0
        reg = F.smooth_l1_loss(pred[pos], boxes[pos], beta=1 / 9, reduction="sum")
        reg_mean = F.huber_loss(pred[pos], boxes[pos]) + F.mse_loss(pred[pos], boxes[pos])
        cls = F.binary_cross_entropy_with_logits(pred[:, 0], pos.to(pred.dtype))
        return reg / pos.sum().clamp(min=1), reg_mean, cls

    compiled = torch.compile(f, backend="xla")
    for i, npos in enumerate((3, 0, 2)):
        labels = torch.zeros(6, dtype=torch.long)
        labels[:npos] = 1
        feats, boxes = leaf(6, 4, seed=i, rg=False), leaf(6, 4, seed=10 + i, rg=False)
        want = f(feats, boxes, labels)
        (want[0] + want[2]).backward()
        want_grad, head.weight.grad = head.weight.grad, None
        got = compiled(feats, boxes, labels)
        (got[0] + got[2]).backward()
        got_grad, head.weight.grad = head.weight.grad, None
        for g, w in zip((*got, got_grad), (*want, want_grad)):
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6, equal_nan=True)


# -- nll_loss of a channels_last (or NHWC-permuted) input: eager's CPU backward kernel
# refuses its non-contiguous gradient buffer ("grad_input must be contiguous"), the forward
# and a log_softmax in between (contiguous then) run


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize(
    "layout",
    [
        lambda x: x.to(memory_format=torch.channels_last),
        lambda x: x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
        lambda x: F.log_softmax(x.to(memory_format=torch.channels_last), 1),
        lambda x: x.transpose(2, 3),
    ],
    ids=["channels_last", "nhwc_permuted", "log_softmax_between", "transposed_hw"],
)
def test_nll_loss_2d_of_a_non_contiguous_input(layout, reduction):
    target = torch.randint(0, 4, (2, 3, 3), generator=torch.Generator().manual_seed(1))

    def fn(x):
        return F.nll_loss(layout(x), target, reduction=reduction)

    _same_as_eager(fn, leaf(2, 4, 3, 3))


def test_nll_loss_2d_channels_last_forward_without_grad_runs():
    target = torch.randint(0, 4, (2, 3, 3), generator=torch.Generator().manual_seed(1))
    x = leaf(2, 4, 3, 3, rg=False).to(memory_format=torch.channels_last)
    _same_as_eager(lambda x: F.nll_loss(x, target, reduction="none"), x)


# -- double backward through the margin losses: eager's ``multi_margin_loss_backward`` and
# ``multilabel_margin_loss_backward`` have no derivative ("not implemented"); the compiled
# graph holds the margin losses as composites (``capture/_eager_calls.py`` ``margin_losses``),
# their input marked ``torch2xla::once_differentiable``: the first-order gradient requires grad
# as eager's, and a backward through it raises eager's error


@pytest.mark.parametrize(
    "loss",
    [
        lambda x: F.multi_margin_loss(x, torch.tensor([0, 2, 1]), p=2),
        lambda x: F.multi_margin_loss(x, torch.tensor([0, 2, 1]), reduction="sum"),
        lambda x: F.multilabel_margin_loss(x, torch.tensor([[1, 0, -1, 0]] * 3)),
        lambda x: F.multilabel_margin_loss(x[0], torch.tensor([3, -1, 0, 0]), reduction="none"),
    ],
    ids=["multi_margin_p2", "multi_margin_p1", "multilabel_margin", "multilabel_unbatched"],
)
def test_margin_losses_double_backward_is_not_implemented(loss):
    def fn(x):
        out = loss(x)
        (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        return out, g

    def observe(run):
        x = leaf(3, 4)
        out, g = run(x)
        assert g.requires_grad
        with pytest.raises(RuntimeError, match="derivative for aten::multi.* is not implemented"):
            g.sum().backward()
        return out.detach(), g.detach()

    want = observe(fn)
    torch._dynamo.reset()
    got = observe(torch.compile(fn, backend="xla"))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


def test_margin_loss_in_a_model_trains_once_differentiable():
    """A first-order training step through the marked input: gradients as eager's."""
    torch.manual_seed(0)
    lin = nn.Linear(4, 5)

    def step(x, t):
        loss = F.multi_margin_loss(lin(x), t) + F.multilabel_margin_loss(lin(x), t.new_zeros(3, 5))
        loss.backward()
        return loss.detach()

    x, t = leaf(3, 4, rg=False), torch.tensor([0, 4, 2])
    want = step(x, t)
    want_grads = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    torch._dynamo.reset()
    got = torch.compile(step, backend="xla")(x, t)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for p, w in zip(lin.parameters(), want_grads):
        torch.testing.assert_close(p.grad, w, rtol=1e-6, atol=1e-6)


def test_multi_margin_per_sample_grads_under_vmap():
    """Inside torch.func transforms the margin losses stay torch's calls (the composites'
    target check has no batching rule: the export failed, and the eager fallback's per-sample
    gradients were zeros)."""
    torch.manual_seed(0)
    w, x, t = torch.randn(4, 5), torch.randn(6, 4), torch.randint(0, 5, (6,))

    def loss(w, x, t):
        return F.multi_margin_loss((x @ w).unsqueeze(0), t.unsqueeze(0), p=2, margin=0.5)

    f = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    want = torch.stack([torch.func.grad(loss)(w, x[i], t[i]) for i in range(6)])
    torch._dynamo.reset()
    got = torch.compile(f, backend="xla", options={"strict": True})(w, x, t)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_eager_fallback_after_a_failed_export_under_vmap(monkeypatch):
    """An export of a torch.func-transformed graph that fails midway (here the margin
    composite's ``_assert_async``, forced inside vmap) leaves the transforms' levels as they
    were: the eager fallback's first run gave zero per-sample gradients."""
    import torch2xla
    from torch2xla.capture import _eager_calls

    monkeypatch.setattr(_eager_calls, "_transformed", lambda node: False)
    torch.manual_seed(0)
    w, x, t = torch.randn(4, 5), torch.randn(6, 4), torch.randint(0, 5, (6,))

    def loss(w, x, t):
        return F.multi_margin_loss((x @ w).unsqueeze(0), t.unsqueeze(0), p=2)

    f = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))
    want = f(w, x, t)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning):
        got = compiled(w, x, t)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(compiled(w, x, t), want, rtol=1e-6, atol=1e-6)
