"""Grouped matrix products (the experts of a mixture of experts) against eager: ``torch._grouped_mm``
/ ``F.grouped_mm`` in its four layouts, and transformers' own grouped product, which every
transformers MoE model (Mixtral, Qwen-MoE, ...) runs under ``torch.compile`` in float32."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import assert_same

STRICT = {"strict": True}
bf16 = torch.bfloat16


def _grad_of(fn, *args):
    """``fn``'s output and the gradients of ``args`` for a random cotangent (torch's CPU
    kernel refuses the expanded cotangent of ``.sum()``)."""
    args = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
    out = fn(*args)
    torch.manual_seed(5)
    (out.float() * torch.randn(out.shape)).sum().backward()
    return out, [a.grad for a in args if a.is_floating_point()]


def _close_as_eager(got, expected, exact):
    """bfloat16 results: as close to the float64 product (``exact``) as eager's, to one
    rounding (both accumulate in float32 and round once; the order of the sums may differ)."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    ulp = exact.abs() * 2.0**-8 + 1e-30
    err_got = ((got.double() - exact).abs() / ulp).max().item()
    err_eager = ((expected.double() - exact).abs() / ulp).max().item()
    assert err_got <= max(err_eager, 1.0), (err_got, err_eager)


LAYOUTS = {
    # (a shape, b shape, offs): rows of a per expert; columns of the output per group; groups
    # of the contracted dimension; a plain batch. An empty group in each ragged layout.
    "2d-3d": ((24, 16), (3, 16, 8), [8, 8, 24]),
    "3d-2d": ((3, 8, 16), (16, 24), [8, 8, 24]),
    "2d-2d": ((8, 32), (32, 16), [8, 8, 32]),
    "3d-3d": ((3, 8, 16), (3, 16, 8), None),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_grouped_mm_layouts_match_eager(layout):
    a_shape, b_shape, ends = LAYOUTS[layout]
    torch.manual_seed(0)
    a, b = torch.randn(a_shape, dtype=bf16), torch.randn(b_shape, dtype=bf16)
    offs = None if ends is None else torch.tensor(ends, dtype=torch.int32)

    def fn(a, b):
        return torch._grouped_mm(a, b, offs=offs)

    expected, expected_grads = _grad_of(fn, a, b)
    got, grads = _grad_of(torch.compile(fn, backend="xla", options=STRICT), a, b)
    a64, b64 = a.double().requires_grad_(), b.double().requires_grad_()
    out64 = _reference(a64, b64, ends)
    torch.manual_seed(5)
    (out64 * torch.randn(out64.shape).double()).sum().backward()
    _close_as_eager(got, expected, out64.detach())
    for g, e, x in zip(grads, expected_grads, (a64.grad, b64.grad)):
        _close_as_eager(g, e, x)


def _reference(a, b, ends):
    """The grouped product by its definition, with slices (float64)."""
    if ends is None:
        return a @ b
    starts = [0, *ends[:-1]]
    if a.ndim == 2 and b.ndim == 3:
        return torch.cat([a[s:e] @ b[g] for g, (s, e) in enumerate(zip(starts, ends))])
    if a.ndim == 3:
        return torch.cat([a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends))], 1)
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)])


def test_mixture_of_experts_as_users_write_it():
    # Route each token to its top expert, sort the tokens by expert, count them, and run every
    # expert's rows through F.grouped_mm: the offsets come from the routing (values).
    torch.manual_seed(0)
    experts, dim = 4, 16
    x = torch.randn(32, dim, dtype=bf16)
    router = torch.randn(dim, experts, dtype=bf16)
    w = torch.randn(experts, dim, dim, dtype=bf16) / 4
    grouped_mm = getattr(F, "grouped_mm", torch._grouped_mm)

    def moe(x, router, w):
        expert = (x @ router).argmax(-1)
        expert[:5] = 2  # (and one expert gets no token)
        expert[expert == 3] = 1
        order = expert.argsort(stable=True)
        counts = torch.histc(expert.float(), bins=experts, min=0, max=experts - 1)
        offs = counts.cumsum(0).to(torch.int32)
        y = grouped_mm(x[order], w, offs=offs)
        out = torch.empty_like(y)
        out[order] = y
        return out

    expected, expected_grads = _grad_of(moe, x, router, w)
    got, grads = _grad_of(torch.compile(moe, backend="xla", options=STRICT), x, router, w)
    assert torch.equal(got, expected)
    for g, e in zip(grads, expected_grads):
        assert_same(g, e)


def test_transformers_grouped_mm_fallback():
    # transformers' opaque op (a loop over the experts' row ranges in eager): an expert
    # without rows, and rows past the last offset (zeros in its kernel).
    pytest.importorskip("transformers")
    from transformers.integrations import moe  # noqa: F401  (registers the op)

    op = torch.ops.transformers.grouped_mm_fallback
    torch.manual_seed(0)
    x, w = torch.randn(20, 16), torch.randn(4, 16, 8)
    offs = torch.tensor([5, 5, 12, 17], dtype=torch.int32)

    def fn(x, w):
        return op(x, w, offs).tanh()

    expected, expected_grads = _grad_of(fn, x, w)
    got, grads = _grad_of(torch.compile(fn, backend="xla", options=STRICT), x, w)
    assert_same(got, expected)
    assert_same(grads, expected_grads)

    if not hasattr(torch.ops.transformers, "grouped_mm_fallback_backward"):
        return  # older transformers (the GPU machine's) register no backward op of their own
    ct = torch.randn(20, 8)
    backward = torch.ops.transformers.grouped_mm_fallback_backward
    compiled = torch.compile(backward, backend="xla", options=STRICT)
    assert_same(compiled(x, w, offs, ct), backward(x, w, offs, ct))


@pytest.mark.parametrize("name", ["mixtral", "qwen3_moe"])
@torch.no_grad()
def test_moe_model_in_bfloat16(name):
    # transformers runs bfloat16 experts through F.grouped_mm under torch.compile. Every op
    # runs in XLA; the logits are as close to the float32 model's as eager's bfloat16 logits,
    # to one rounding of the largest (eager's double can't be had: grouped_mm refuses float64).
    from tests.test_hf_zoo import _inputs, _model

    inputs, _ = _inputs(name)
    exact = _model(name).eval()(**inputs, use_cache=False).logits.double()
    model = _model(name).eval().to(bf16)
    expected = model(**inputs, use_cache=False).logits
    got = torch.compile(model, backend="xla", options=STRICT)(**inputs, use_cache=False).logits
    assert got.dtype == expected.dtype == bf16
    err_got = (got.double() - exact).abs().max().item()
    err_eager = (expected.double() - exact).abs().max().item()
    assert err_got <= err_eager + 2.0**-8 * exact.abs().max().item(), (err_got, err_eager)
