"""sdpa kept whole (``torch2xla::sdpa``) in graphs that enter autocast regions themselves.

transformers' rotary embeddings turn autocast off around their float32 math, so every
Llama-like graph enters and leaves ``torch.autocast`` inside: such graphs used to leave sdpa
to the decomposition (on CUDA a cuDNN call with the causal mask as a bias and its gradient,
about three times the fused kernel's time). Each call now gets the autocast dtype of the
region it is in, and values, dtypes and gradients stay eager's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._training import ran_in_xla

SDPA = torch.ops.torch2xla.sdpa.default


def _t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _rotary_like(q, k, v):
    """A rotary embedding's float32 math with autocast off, then sdpa under the caller's."""
    with torch.autocast("cpu", enabled=False):
        pos = torch.arange(q.shape[-2], dtype=torch.float32)
        angle = pos[:, None] * torch.linspace(0.1, 1.0, q.shape[-1])[None, :]
        cos = angle.cos()
    q, k = q * cos, k * cos
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _inside_off(q, k, v):
    """sdpa itself inside a region with autocast off: float32 as eager."""
    x = q @ k.transpose(-1, -2)
    with torch.autocast("cpu", enabled=False):
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    return out + x.float().mean()


def _inside_other_dtype(q, k, v):
    """A nested region naming another dtype, then the caller's again."""
    with torch.autocast("cpu", dtype=torch.float16):
        a = F.scaled_dot_product_attention(q, k, v)
    b = F.scaled_dot_product_attention(q, k, v)
    return a.float() + b.float()


def _inside_on_without_dtype(q, k, v):
    """``autocast(enabled=True)`` without a dtype keeps the device's autocast dtype."""
    with torch.autocast("cpu", enabled=False):
        q = q * 2
        with torch.autocast("cpu"):
            out = F.scaled_dot_product_attention(q, k, v)
    return out


CASES = {
    "rotary_like": _rotary_like,
    "inside_off": _inside_off,
    "inside_other_dtype": _inside_other_dtype,
    "inside_on_without_dtype": _inside_on_without_dtype,
}


@pytest.mark.parametrize("outer", [torch.bfloat16, None], ids=["bf16", "off"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sdpa_in_autocast_regions_is_kept_whole_and_matches_eager(name, outer, lowered_ops):
    fn = CASES[name]
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    inputs = [_t(2, 4, 16, 8, seed=s) for s in (1, 2, 3)]
    xs = [x.clone().requires_grad_() for x in inputs]
    rs = [x.clone().requires_grad_() for x in inputs]
    ctx = torch.autocast("cpu", dtype=outer) if outer else torch.autocast("cpu", enabled=False)
    with ctx:
        out, ref = compiled(*xs), fn(*rs)
    assert ran_in_xla(out)
    assert SDPA in lowered_ops
    assert out.dtype == ref.dtype
    # (where a region computes in bf16 or fp16, eager's CPU kernels and XLA's differ by an ulp
    # or two of that dtype: 2e-2 is bf16's; float32 everywhere else is compared at its own)
    half = outer is not None or name in ("inside_other_dtype", "inside_on_without_dtype")
    tol = {"rtol": 2e-2, "atol": 2e-2} if half else {}
    torch.testing.assert_close(out, ref, **tol)
    ct = _t(*ref.shape, seed=9).to(ref.dtype)
    got = torch.autograd.grad(out, xs, ct)
    expected = torch.autograd.grad(ref, rs, ct)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, **tol)


def test_regions_that_do_not_nest_leave_sdpa_to_the_decomposition():
    """A region left in another order than entered (or with arguments that are not constants)
    is not followed: the graph is left as it is."""
    import torch2xla.capture._rewrites as rw

    graph = torch.fx.Graph()
    q = graph.placeholder("q")
    q.meta["example_value"] = _t(1, 2, 4, 8)
    a = graph.call_function(rw._ENTER_AUTOCAST, ("cpu", None, False, None))
    b = graph.call_function(rw._ENTER_AUTOCAST, ("cpu", torch.bfloat16, True, None))
    graph.call_function(rw._EXIT_AUTOCAST, (a,))
    graph.call_function(rw._EXIT_AUTOCAST, (b,))
    out = graph.call_function(F.scaled_dot_product_attention, (q, q, q))
    graph.output(out)
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert rw._autocast_dtypes(gm) is None
    assert rw.preserve_sdpa(gm) is gm
