"""Training utilities against eager: optimizers (and their closures), gradient clipping, grad
modes switched inside compiled functions, and what autograd sees of their outputs (views of
inputs, outputs whose eager backward raises)."""

from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.autograd.function import once_differentiable

import torch2xla
from tests._util import assert_same


def _compile(fn):
    return torch.compile(fn, backend="xla")


# -- outputs that are views of inputs, made under another grad mode than the call's -----------
def _view_in_enable_grad(w):
    with torch.enable_grad():
        v = w[0:2]
    return v * 1, v


def _view_in_no_grad(w):
    with torch.no_grad():
        v = w[0:2]
    return w.sum() * 2, v


def _view_of_detached(w):
    return w.sum() * 2, w.detach()[1:3]


@pytest.mark.parametrize(
    ("fn", "outer_no_grad"),
    [(_view_in_enable_grad, True), (_view_in_no_grad, False), (_view_of_detached, False)],
    ids=["enable_grad-inside-no_grad-call", "no_grad-view", "detach-view"],
)
def test_output_views_of_inputs_as_autograd_sees_them_in_eager(fn, outer_no_grad):
    """A view of an input returned by the function is recorded (or not) by autograd as eager
    recorded it, whatever the grad mode of the call: backward through a view made under
    enable_grad reaches the input, one made under no_grad or of ``detach()`` does not, and a
    view of ``w.detach()`` may be changed in place (changing ``w``)."""
    results = []
    for compiled in (False, True):
        torch._dynamo.reset()
        w = torch.ones(4, requires_grad=True)
        f = _compile(fn) if compiled else fn
        with torch.set_grad_enabled(not outer_no_grad):
            out, v = f(w)
        seen = (v.requires_grad, v.grad_fn is None, v._is_view())
        if v.grad_fn is not None:
            (v * 3).sum().backward()
        if not v.requires_grad:
            v.add_(1)  # eager: allowed, writes w's memory
        results.append((seen, out.detach(), w.detach().clone(), w.grad))
    (seen, out, value, grad), (e_seen, e_out, e_value, e_grad) = results[1], results[0]
    assert seen == e_seen
    assert_same(out, e_out)
    assert_same(value, e_value)
    assert (grad is None) == (e_grad is None)
    if e_grad is not None:
        assert_same(grad, e_grad)


# -- eager's backward-time errors when the call's grad mode is off ------------------------------
def test_backward_error_of_an_output_made_under_enable_grad_in_a_no_grad_call():
    def fn(w):
        with torch.enable_grad():
            return torch.floor_divide(w, 2.0) + w

    w = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        out = _compile(fn)(w)
    assert out.requires_grad and out.grad_fn is not None
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        out.sum().backward()


def test_optimizer_closure_loss_is_tracked_as_in_eager():
    """``opt.step(closure)`` returns the closure's loss, computed under enable_grad inside the
    step's no_grad; eager's loss has a grad_fn, whose backward raises as the step changed the
    parameters it saved."""

    def run(compiled):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(6, 4)
        model(x).square().sum().backward()
        step = lambda: opt.step(lambda: model(x).square().sum())
        loss = (_compile(step) if compiled else step)()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
        return loss.detach(), [p.detach().clone() for p in model.parameters()]

    assert_same(run(True), run(False))


# -- torch.autograd.Function: the user's backward, not the forward's derivative ----------------
class _RoundSTE(torch.autograd.Function):
    """Straight-through rounding (quantization-aware training): the gradient passes as is."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(scale)
        return (x * scale).round() / scale

    @staticmethod
    def backward(ctx, grad):
        (scale,) = ctx.saved_tensors
        return grad * scale.sign(), None


class _SortTwice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(-1)
        ctx.mark_non_differentiable(idx)
        return x.sort(-1).values, idx

    @staticmethod
    def backward(ctx, grad, _):
        return grad * 2  # (not sort's derivative: eager takes it as given)


class _QuantLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 5)
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        h = _RoundSTE.apply(self.inner(x), torch.tensor(4.0))
        values, idx = _SortTwice.apply(h.tanh())
        return self.head(values), idx


def test_custom_function_backward_is_the_users():
    torch.manual_seed(0)
    model = _QuantLinear()
    ref = copy.deepcopy(model)
    x = torch.randn(6, 4, requires_grad=True)
    rx = x.detach().clone().requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, idx = _compile(model)(x)
    want, want_idx = ref(rx)
    assert_same((out, idx), (want, want_idx))
    assert not idx.requires_grad
    out.square().sum().backward()
    want.square().sum().backward()
    assert_same(x.grad, rx.grad)
    for p, r in zip(model.parameters(), ref.parameters()):
        assert_same(p.grad, r.grad)
    # (session 23: the Functions are lowered inside the XLA program as jax.custom_vjp,
    # ``capture/_custom_function.py``; before, they ran in eager PyTorch between programs)
    # (kept in XLA from torch 2.13; before, Dynamo's subgraphs of it run in eager, with a warning)
    kept = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 13)
    assert not kept or not any(issubclass(w.category, torch2xla.FallbackWarning) for w in caught)


def test_custom_function_without_autograd_stays_in_xla():
    x = torch.randn(6, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.FallbackWarning)
        out = _compile(lambda x: _RoundSTE.apply(x.sin(), torch.tensor(4.0)))(x)
    assert_same(out, _RoundSTE.apply(x.sin(), torch.tensor(4.0)))


def test_once_differentiable_backward_is_not_differentiable():
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    x = torch.randn(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = _compile(lambda x: Exp.apply(x).sum() * 2)(x)
    (grad,) = torch.autograd.grad(out, x, create_graph=True)
    assert_same(grad, 2 * x.detach().exp())
    assert not grad.requires_grad  # eager: the backward's result is not tracked


# -- torch.func transforms inside a compiled function ------------------------------------------
def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


_MODEL = _mlp()


def _per_sample_grads(x):
    model = _MODEL
    x = x.repeat(8).reshape(6, 4)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi):
        return torch.func.functional_call(model, p, (xi.unsqueeze(0),)).square().sum()

    return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(params, x)


def _no_grad_inside(x):
    def f(x):
        with torch.no_grad():
            c = x.sum()
        return (x.sin() * c * x.detach().cos()).sum()

    return torch.func.grad(f)(x)


def _grad_of_grad(x):
    return torch.func.grad(lambda x: torch.func.grad(lambda x: (x.sin() ** 2).sum())(x).sum())(x)


def _vjp(x):
    out, fn = torch.func.vjp(lambda x: x.exp() * x.sum(), x)
    return out, fn(torch.arange(3.0))[0]


def _with_setitem(x):
    def f(x):
        y = x * 2
        y[0] = 5.0
        return y.sin().sum()

    return torch.func.grad_and_value(f)(x)


@pytest.mark.parametrize(
    "fn",
    [
        _per_sample_grads,
        lambda x: torch.func.jacrev(lambda x: x.sin() * x.sum())(x),
        lambda x: torch.func.hessian(lambda x: (x.sin() * x.sum()).sum())(x),
        _no_grad_inside,
        _grad_of_grad,
        _vjp,
        _with_setitem,
    ],
    ids=[
        "per-sample-grads",
        "jacrev",
        "hessian",
        "no_grad-inside",
        "grad-of-grad",
        "vjp",
        "setitem",
    ],
)
@pytest.mark.parametrize("outer", ["grad", "no_grad"])
def test_torch_func_transforms_inside_a_compiled_function(fn, outer):
    """The export (run without autograd) computes torch.func's gradients itself: grad mode on
    inside the transforms as torch.func turns it on (the Dynamo graph records no switch
    where it was on already), the user's switches inside them kept. They were all zeros."""
    torch._dynamo.reset()
    x = torch.randn(3)
    with torch.set_grad_enabled(outer == "grad"):
        want = fn(x)
        got = _compile(fn)(x)
    assert_same(got, want)


def test_torch_func_grad_inside_then_backward_to_a_parameter():
    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3)

    def fn(x):
        return torch.func.grad(lambda x: (x.sin() * w).sum())(x)

    got = _compile(fn)(x)
    want = fn(x)
    assert_same(got, want)
    assert got.requires_grad == want.requires_grad
    (got * torch.arange(3.0)).sum().backward()
    grad, w.grad = w.grad, None
    (want * torch.arange(3.0)).sum().backward()
    assert_same(grad, w.grad)


# -- foreach ops (optimizers' default on CUDA, gradient clipping's everywhere) -------------------
def _strict(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _state(opt):
    return [dict(s) for s in opt.state_dict()["state"].values()]


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, foreach=True),
        lambda ps: torch.optim.Adam(ps, lr=0.01, amsgrad=True, foreach=True),
        lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1, foreach=True),
        lambda ps: torch.optim.RMSprop(ps, lr=0.01, momentum=0.9, foreach=True),
        lambda ps: torch.optim.Adagrad(ps, lr=0.1, foreach=True),
    ],
    ids=["sgd", "adam-amsgrad", "adamw", "rmsprop", "adagrad"],
)
def test_foreach_optimizer_step_compiles_whole(make):
    """A compiled ``opt.step`` with foreach kernels: every ``_foreach_*`` op in XLA (strict
    mode raised: each had no lowering), parameters and state as eager's."""
    _assert_steps_as_eager(make, "cpu")


def _assert_steps_as_eager(make, device: str) -> None:
    """Three steps of ``make``'s optimizer, its ``step`` compiled in strict mode and eager:
    the same parameters and state. (On CUDA, Dynamo itself makes a compiled step of a fresh
    optimizer ``capturable``, whatever the backend: its step counters live on the GPU where
    eager's stay on the CPU. Their devices are compared with Dynamo's own backend's, their
    values with eager's.)"""
    runs = []
    for mode in ("eager", "xla", "dynamo"):
        torch._dynamo.reset()
        model = _mlp().to(device)
        opt = make(model.parameters())
        step = {
            "eager": opt.step,
            "xla": _strict(opt.step),
            "dynamo": torch.compile(opt.step, backend="eager"),
        }[mode]
        x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1)).to(device)
        for _ in range(3):
            model(x).square().sum().backward()
            step()
            opt.zero_grad()
        runs.append(([p.detach() for p in model.parameters()], _state(opt)))
    eager, xla, dynamo = runs
    assert [t.device for t in pytree.tree_leaves(xla)] == [
        t.device for t in pytree.tree_leaves(dynamo)
    ]
    on_cpu = functools.partial(pytree.tree_map_only, torch.Tensor, lambda t: t.cpu())
    assert_same(on_cpu(xla), on_cpu(eager), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_and_value_in_xla(norm_type):
    runs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        model = _mlp()
        x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))

        def step(x, model=model):
            model(x).square().sum().backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5, norm_type, foreach=True)
            nn.utils.clip_grad_value_(model.parameters(), 0.05, foreach=True)
            return norm

        norm = (_strict(step) if compiled else step)(x)
        runs.append((norm, [p.grad for p in model.parameters()]))
    assert_same(runs[1], runs[0])


def _lists():
    gen = torch.Generator().manual_seed(2)
    a = [
        torch.randn(3, 4, generator=gen),
        torch.randn(5, generator=gen),
        torch.randn((), generator=gen),
    ]
    return a, [t.abs() + 0.5 for t in reversed(a)][::-1]


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch._foreach_add(a, b, alpha=-0.3),
        lambda a, b: torch._foreach_add(a, torch.tensor(2.0), alpha=0.5),
        lambda a, b: torch._foreach_sub(a, [1.0, 2.0, 3.0]),
        lambda a, b: torch._foreach_div(a, torch.tensor(3.0)),
        lambda a, b: torch._foreach_addcdiv(a, a, b, [0.1, 0.2, 0.3]),
        lambda a, b: torch._foreach_addcmul(a, a, b, value=0.5),
        lambda a, b: torch._foreach_lerp(a, b, [t.sigmoid() for t in a]),
        lambda a, b: torch._foreach_norm(a, 1, dtype=torch.float64),
        lambda a, b: torch._foreach_maximum(a, 0.1),
        lambda a, b: torch._foreach_minimum(a, b),
        lambda a, b: torch._foreach_clamp_min(a, b),
        lambda a, b: torch._foreach_pow(2.0, a),
        lambda a, b: torch._foreach_reciprocal(torch._foreach_sqrt(b)),
        lambda a, b: torch._foreach_add([t.long() for t in a], 1.5),
        lambda a, b: torch._foreach_norm([t.bfloat16() for t in a]),
        lambda a, b: (torch._foreach_mul_(a, torch.tensor(0.5)), torch._foreach_zero_(b), a, b)[2:],
        lambda a, b: (torch._foreach_copy_(a, b), a)[1],
    ],
)
def test_foreach_ops_as_eager(fn):
    (a, b), (ra, rb) = _lists(), _lists()
    got = _strict(fn)(a, b)
    want = fn(ra, rb)
    assert_same(got, want)
    assert_same((a, b), (ra, rb))  # (in-place ones write the lists' tensors)


# -- forward-mode AD ---------------------------------------------------------------------------
def test_forward_ad_tangents_through_a_compiled_function():
    """Dual tensors (``torch.autograd.forward_ad``): the outputs' tangents as eager's (they
    were None: our programs have no forward derivative, so such calls run in eager)."""
    import torch.autograd.forward_ad as fwAD

    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    x, tangent = torch.randn(2, 4), torch.randn(2, 4)
    compiled = _compile(lambda x: model(x).sin() * 2)
    plain = compiled(x)  # (a graph compiled before any dual level)
    with fwAD.dual_level():
        with pytest.warns(torch2xla.FallbackWarning, match="forward-mode AD"):
            got = fwAD.unpack_dual(compiled(fwAD.make_dual(x, tangent)))
        want = fwAD.unpack_dual(model(fwAD.make_dual(x, tangent)).sin() * 2)
    assert got.tangent is not None
    assert_same((got.primal, got.tangent), (want.primal, want.tangent))
    assert_same(compiled(x), plain)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: torch.optim.Adam(ps, lr=0.01),
        lambda ps: torch.optim.AdamW(ps, lr=0.01, amsgrad=True, capturable=True),
    ],
    ids=["sgd", "adam", "adamw-capturable"],
)
def test_default_cuda_optimizer_step_compiles_whole(make):
    """On CUDA the optimizers default to foreach kernels: the compiled step runs in XLA."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        _assert_steps_as_eager(make, "cuda")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


# -- integer writes under no_grad beside tracked tensors ----------------------------------------
def test_no_grad_evaluation_of_a_model_in_training_mode():
    """``@torch.no_grad()`` inside the compiled function, a BatchNorm in training mode: its
    ``num_batches_tracked += 1`` (an integer write autograd does not record) raised an
    AttributeError at the export."""
    runs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))

        @torch.no_grad()
        def evaluate(x, model=model):
            return model(x)

        x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
        out = (_compile(evaluate) if compiled else evaluate)(x)
        runs.append((out, out.requires_grad, dict(model.named_buffers())))
    assert_same(runs[1], runs[0])


# -- embedding gradients: scaled by frequency, sparse -------------------------------------------
@pytest.mark.parametrize("padding_idx", [None, 0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_scale_grad_by_freq(padding_idx, dtype):
    """It raised a LoweringError; eager divides each row's gradient by its index's count."""
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4, padding_idx=padding_idx, scale_grad_by_freq=True).to(dtype)
    ref = copy.deepcopy(emb)
    idx = torch.tensor([[1, 1, 2, 0], [3, 3, 3, 0]])
    weights = torch.arange(8.0, dtype=dtype).reshape(2, 4, 1)
    out = _strict(lambda i: (emb(i) * weights).sum())(idx)
    want = (ref(idx) * weights).sum()
    out.backward()
    want.backward()
    assert_same(out, want)
    assert_same(emb.weight.grad, ref.weight.grad)


def test_sparse_embedding_trains_with_sparse_adam():
    runs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        torch.manual_seed(0)
        emb = nn.Embedding(10, 4, sparse=True)
        opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
        idx = torch.tensor([[1, 1, 2], [3, 3, 5]])
        fn = _compile(emb_loss(emb)) if compiled else emb_loss(emb)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.FallbackWarning)
            for _ in range(2):
                opt.zero_grad()
                fn(idx).backward()
                assert emb.weight.grad.is_sparse
                opt.step()
        runs.append(emb.weight.detach())
    assert_same(runs[1], runs[0])


def emb_loss(emb):
    return lambda i: emb(i).square().sum()


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    """It raised a LoweringError; it runs in eager PyTorch (whose CPU kernel divides each
    row's gradient by another index's count: kept as eager's)."""
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(10, 4, mode=mode, scale_grad_by_freq=True)
    ref = copy.deepcopy(bag)
    idx, offsets = torch.tensor([1, 1, 2, 3, 3, 3, 5]), torch.tensor([0, 3, 5])
    with pytest.warns(torch2xla.FallbackWarning, match="scale_grad_by_freq"):
        out = _compile(lambda i, o: bag(i, o).sin().sum())(idx, offsets)
    want = ref(idx, offsets).sin().sum()
    out.backward()
    want.backward()
    assert_same(out, want)
    assert_same(bag.weight.grad, ref.weight.grad)
