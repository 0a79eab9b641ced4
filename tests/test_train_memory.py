"""What training keeps from forward to backward (torch2xla/autodiff/_residuals.py, ops/_saved.py):
gradients that keep what eager keeps match eager's, the residuals are no larger than eager's
saved tensors, inputs are not copied, and freed graphs donate their residuals."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests._training import assert_grads, ran_in_xla, twins
from tests.models import GPT2Block


def _parity(fn, *inputs, rtol=1e-5, atol=1e-5, create_graph=False):
    """Output and input gradients of ``fn`` compiled against eager (a random cotangent)."""
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    rs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out, ref = compiled(*xs), fn(*rs)
    assert ran_in_xla(out)
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    ct = torch.randn(ref.shape, generator=torch.Generator().manual_seed(1)).to(ref.dtype)
    diff = [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(out, diff, ct, create_graph=create_graph)
    expected = torch.autograd.grad(
        ref, [r for r in rs if r.requires_grad], ct, create_graph=create_graph
    )
    for g, e in zip(grads, expected):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=rtol, atol=atol)
    return grads, expected


def _x(*shape, dtype=torch.float32, scale=3.0):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(0)) * scale).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "act",
    [lambda x: F.gelu(x), lambda x: F.gelu(x, approximate="tanh"), F.silu],
    ids=["gelu", "gelu-tanh", "silu"],
)
def test_activation_gradients_match_eager(act, dtype):
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
    _parity(lambda x: act(x) * 1.5, _x(4, 257, dtype=dtype), **tol)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_derivative_matches_eager(approximate):
    def fn(x):
        return F.gelu(x, approximate=approximate)

    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    x = _x(64).requires_grad_()
    r = x.detach().clone().requires_grad_()
    (g,) = torch.autograd.grad(compiled(x).sum(), x, create_graph=True)
    (e,) = torch.autograd.grad(fn(r).sum(), r, create_graph=True)
    torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    (gg,) = torch.autograd.grad(g.square().sum(), x)
    (ee,) = torch.autograd.grad(e.square().sum(), r)
    torch.testing.assert_close(gg, ee, rtol=1e-4, atol=5e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_gradients_match_eager(fn, dtype):
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {}
    _parity(lambda x: fn(x, dim=1) * 2, _x(3, 50, 7, dtype=dtype), **tol)
    _parity(lambda x: fn(x, dim=-1, dtype=torch.float32), _x(5, 9, dtype=dtype), **tol)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_gradients_match_eager(affine):
    torch.manual_seed(0)
    norm = nn.LayerNorm((6, 8), elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            norm.weight.normal_()
            norm.bias.normal_()
    compiled, model, ref = twins(norm)
    x = _x(3, 4, 6, 8).requires_grad_()
    r = x.detach().clone().requires_grad_()
    out, expected = compiled(x), ref(r)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    ct = _x(3, 4, 6, 8, scale=1.0)
    out.backward(ct)
    expected.backward(ct)
    torch.testing.assert_close(x.grad, r.grad, rtol=1e-4, atol=1e-4)
    assert_grads(model, ref)


def test_layer_norm_mean_and_rstd_outputs_are_differentiated():
    def fn(x):
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, [8], None, None, 1e-5)
        return out + mean * 2 + rstd.square()

    _parity(fn, _x(5, 8), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
def test_attention_gradients_match_eager(mask):
    q, k, v = _x(2, 3, 16, 8), _x(2, 3, 12, 8, scale=1.0), _x(2, 3, 12, 8)
    if mask == "causal":
        _parity(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            q,
            k,
            v,
            rtol=1e-4,
            atol=1e-4,
        )
        return
    if mask == "none":
        _parity(F.scaled_dot_product_attention, q, k, v, rtol=1e-4, atol=1e-4)
        return
    m = torch.rand(2, 1, 16, 12, generator=torch.Generator().manual_seed(2)) > 0.3
    m[..., 0] = True  # every row attends somewhere
    if mask == "bool":
        _parity(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
            q,
            k,
            v,
            rtol=1e-4,
            atol=1e-4,
        )
    else:  # an additive mask that requires grad gets its gradient summed over the broadcast
        bias = _x(1, 3, 16, 12, scale=0.5)
        _parity(
            lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b),
            q,
            k,
            v,
            bias,
            rtol=1e-4,
            atol=1e-4,
        )


def _eager_saved_bytes(model, x) -> int:
    exclude = {p.untyped_storage().data_ptr() for p in model.parameters()}
    exclude.add(x.untyped_storage().data_ptr())
    seen: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in exclude:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())


def test_residuals_no_larger_than_eager_and_weights_not_copied():
    torch.manual_seed(0)
    model = nn.Sequential(GPT2Block(64), GPT2Block(64))
    x = _x(4, 32, 64, scale=1.0)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    out = compiled(x)
    res = out.grad_fn.vjp_fn
    kept = sum(leaf.nbytes for leaf in res.kept)
    assert kept <= 1.1 * _eager_saved_bytes(model, x)
    # every weight matrix the backward reads is the input itself, not a (transposed) copy
    weights = {tuple(p.shape) for p in model.parameters() if p.ndim == 2}
    assert weights <= {tuple(a.shape) for a in res.inputs}
    assert not any(tuple(leaf.shape) in weights | {w[::-1] for w in weights} for leaf in res.kept)


@pytest.mark.parametrize("in_channels", [4, 3], ids=["even", "odd_padded"])
def test_relu_keeps_no_mask_beside_its_output(in_channels):
    """relu's gradient mask (read from its output's bits, as eager's threshold_backward) is
    recomputed in the backward from the output, which the next convolution keeps anyway; an
    odd input channel count padded for the CPU convolution (``_even_channels``) is padded
    again in the backward, not kept."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(in_channels, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 1)
    )
    x = _x(2, in_channels, 12, 12, scale=1.0)
    compiled, model, ref = twins(model)
    out = compiled(x)
    kept = out.grad_fn.vjp_fn.kept
    assert not [k.shape for k in kept if k.dtype == bool], "a relu mask was kept"
    assert sum(k.nbytes for k in kept) <= 1.01 * _eager_saved_bytes(ref, x)  # (+ a scalar)
    out.square().mean().backward()
    ref(x).square().mean().backward()
    assert_grads(model, ref)


def test_bf16_autocast_residuals_no_larger_than_eager():
    """Under bf16 autocast a convolution block keeps bf16 values, as eager does: batch norm
    keeps its bf16 input (not the float32 copy it computes in), relu computes in bf16, and
    widening casts and the bit reads of relu's mask are recomputed in the backward (bfloat16
    is not of numpy kind "f")."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(4, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 4, 1),
    )
    x = _x(4, 4, 16, 16, scale=1.0)
    compiled, model, ref = twins(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = compiled(x)
        expected = ref(x)
        eager_bytes = _eager_saved_bytes(copy.deepcopy(ref), x)
    kept = out.grad_fn.vjp_fn.kept
    assert not [k.shape for k in kept if k.dtype == "float32" and k.size >= 4 * 16 * 16 * 16]
    assert sum(k.nbytes for k in kept) <= 1.05 * eager_bytes
    out.float().square().mean().backward()
    expected.float().square().mean().backward()
    assert_grads(model, ref, rtol=2e-2, atol=2e-2)


class _ResidualRelu(nn.Module):
    """relu whose output feeds a matrix product and an identity shortcut's add."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)

    def forward(self, x):
        y = torch.relu(self.a(x))
        return self.c(self.b(y) + y)


def test_relu_keeps_no_mask_where_a_shortcut_also_reads_its_output():
    """The matrix product keeps relu's output anyway, so its mask is recomputed from it,
    whatever else (an identity shortcut) reads the output."""
    torch.manual_seed(0)
    compiled, model, ref = twins(_ResidualRelu())
    x = _x(8, 16, scale=1.0)
    out = compiled(x)
    kept = out.grad_fn.vjp_fn.kept
    assert not [k.shape for k in kept if k.dtype == bool], "a relu mask was kept"
    assert sum(k.nbytes for k in kept) <= 1.01 * _eager_saved_bytes(ref, x)
    out.square().mean().backward()
    ref(x).square().mean().backward()
    assert_grads(model, ref)


class _Float32Relu(nn.Module):
    """conv -> float32 relu -> conv: under bf16 autocast the second convolution keeps a bf16
    copy of the relu's output, not the output itself."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(4, 8, 3), nn.Conv2d(8, 4, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x).float() * 2.0))


def test_relu_keeps_its_mask_where_the_next_layer_keeps_a_copy():
    torch.manual_seed(0)
    compiled, model, ref = twins(_Float32Relu())
    x = _x(2, 4, 12, 12, scale=1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = compiled(x)
        expected = ref(x)
    kept = out.grad_fn.vjp_fn.kept
    relu_shape = (2, 8, 10, 10)
    assert any(k.dtype == bool and k.size == 2 * 8 * 10 * 10 for k in kept), "no relu mask kept"
    assert not [k.shape for k in kept if k.dtype == "float32" and k.size == 2 * 8 * 10 * 10], (
        f"the float32 relu output {relu_shape} was kept beside the bf16 copy"
    )
    out.float().square().mean().backward()
    expected.float().square().mean().backward()
    assert_grads(model, ref, rtol=2e-2, atol=2e-2)


class _TrimmedRelu(nn.Module):
    """relu's output, its last step trimmed, into a matrix product: the shape of attention run
    at an even length and sliced back (``ops/_nn.py``'s cuDNN path for ViT's 197 tokens)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x):
        y = torch.relu(self.a(x))
        return self.b(y[:, :-1])


def test_slice_of_a_kept_value_is_not_kept_beside_it():
    """Eager saves relu's output once (the product saves a view of it); a slice that keeps
    most of its operand is taken again in the backward from the operand, not kept as a copy
    (ViT bf16 on an H100 kept each attention output twice, padded and trimmed: 222 MiB)."""
    torch.manual_seed(0)
    compiled, model, ref = twins(_TrimmedRelu())
    x = _x(8, 33, 16, scale=1.0)
    out = compiled(x)
    kept = out.grad_fn.vjp_fn.kept
    assert not [k.shape for k in kept if tuple(k.shape) == (8, 32, 32)], "the slice was kept"
    assert sum(k.nbytes for k in kept) <= 1.01 * _eager_saved_bytes(ref, x)
    out.square().mean().backward()
    ref(x).square().mean().backward()
    assert_grads(model, ref)


def test_safe_softmax_gradients_match_eager_on_fully_masked_rows():
    x = _x(3, 5, 7)
    x[0, 1] = -torch.inf  # a row entirely masked: output 0, gradient 0
    x[2, 3, :4] = -torch.inf
    _parity(lambda t: torch.ops.aten._safe_softmax(t, -1) * 1.5, x)


def test_math_attention_keeps_one_score_matrix():
    """sdpa's math formulation (``_safe_softmax`` then a product with v) keeps one (L, S)
    matrix per attention, as eager: the product's input, which is the softmax's output."""

    def attend(q, k, v, mask):
        scores = q @ k.transpose(-1, -2) * 0.25 + mask
        return torch.ops.aten._safe_softmax.default(scores, -1) @ v * 1.5

    q, k, v = (_x(2, 3, 16, 8, scale=1.0) for _ in range(3))
    mask = torch.zeros(2, 1, 16, 16)
    mask[:, :, :, 12:] = -torch.inf
    _parity(attend, q, k, v, mask)
    out = torch.compile(attend, backend="xla")(*(t.requires_grad_() for t in (q, k, v)), mask)
    kept = out.grad_fn.vjp_fn.kept
    assert sum(tuple(r.shape[-2:]) == (16, 16) and r.size >= 2 * 3 * 16 * 16 for r in kept) == 1


def test_freed_graph_donates_residuals_retained_graph_keeps_them():
    torch.manual_seed(0)
    compiled, model, ref = twins(GPT2Block(64))
    x = _x(2, 8, 64, scale=1.0)
    out = compiled(x)
    node, res = out.grad_fn, out.grad_fn.vjp_fn
    out.sum().backward(retain_graph=True)
    assert not any(leaf.is_deleted() for leaf in res.kept)
    assert set(node.plan.fns.bwd._compiled) == {False}
    out.sum().backward()  # the second backward frees the graph: its residuals are donated
    assert node.vjp_fn is None and set(node.plan.fns.bwd._compiled) == {False, True}
    # (XLA may reuse a donated buffer for an output of its shape; JAX deletes those)
    ref(x).sum().backward()
    ref(x).sum().backward()
    assert_grads(model, ref)  # two backwards accumulate as in eager


def test_inplace_change_of_a_saved_input_raises_as_eager():
    lin = nn.Linear(8, 8)
    compiled = torch.compile(lin, backend="xla", options={"strict": True})
    x = torch.randn(4, 8, requires_grad=True)
    out = compiled(x)
    assert ran_in_xla(out)
    with torch.no_grad():
        lin.weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    y = lin(x)  # eager raises the same error
    with torch.no_grad():
        lin.weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("train", [False, True])
def test_transformer_encoder_layer_matches_eager(train):
    # eval + no_grad runs the fused fast path (_transformer_encoder_layer_fwd), which calls the
    # layer norm and attention rules outside their own nodes
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).train(train)
    compiled, model, ref = twins(layer)
    x = _x(2, 10, 32, scale=1.0)
    with torch.set_grad_enabled(train):
        out, expected = compiled(x), ref(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    if train:
        out.square().mean().backward()
        expected.square().mean().backward()
        assert_grads(model, ref)


def test_output_freed_once_torch_drops_it_as_in_eager():
    # Eager frees an LM's logits once log_softmax has run (it keeps its output, not its input);
    # the compiled program's output must not outlive the torch tensor either (the 823 MiB
    # logits of GPT-2 on GPU).
    import jax

    torch.manual_seed(0)
    compiled, model, ref = twins(nn.Linear(32, 997))
    x, target = _x(64, 32, scale=1.0), torch.randint(0, 997, (64,))

    def logits_alive() -> int:
        return sum(a.shape == (64, 997) and not a.is_deleted() for a in jax.live_arrays("cpu"))

    out = compiled(x)
    assert ran_in_xla(out) and logits_alive() == 1
    loss = F.cross_entropy(out, target)
    del out
    assert logits_alive() == 0
    loss.backward()
    F.cross_entropy(ref(x), target).backward()
    assert_grads(model, ref)
