"""Autocast on the CPU as users write it (session 33, ``scripts/probe_amp33.py``).

``nn.TransformerEncoderLayer``'s eval fast path (``torch._transformer_encoder_layer_fwd``)
falls through autocast, but its CPU kernel calls its products through the dispatcher, which
autocast casts: eager returns autocast's dtype. The compiled layer returned float32, and a
bfloat16 input beside float32 weights, which eager's kernel rejects outside autocast, was
promoted to a float32 result."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

B, H, F32, F64 = torch.bfloat16, torch.float16, torch.float32, torch.float64


def _t(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _encoder(layers: int, **kw) -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (enable_nested_tensor's note)
        m = (
            layer
            if not layers
            else nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        )
    return m.eval()


def _run(m, x, dtype, mask):
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
        return m(x) if mask is None else m(x, src_key_padding_mask=mask)


def _assert_as_close_to_float64_as_eager(got, exp, ref):
    """Eager's dtype and NaNs; every element no further from the float64 result than twice
    eager's error plus one unit in the last place (eager rounds after every product)."""
    assert got.dtype == exp.dtype and got.shape == exp.shape
    assert torch.equal(got.isnan(), exp.isnan())
    err_got = (got.double() - ref).abs().nan_to_num()
    err_exp = (exp.double() - ref).abs().nan_to_num()
    ulp = torch.finfo(got.dtype).eps * ref.abs().nan_to_num().clamp_min(1.0)
    worst = (err_got - 2 * err_exp - ulp).max()
    assert worst <= 0, f"{float(worst)} past the bound"


MASK = torch.tensor([[False, False, False, True, True], [False] * 5])
CASES = {
    # (layers, layer options, autocast dtype, input dtype, padding mask)
    "layer_bf16": (0, {}, B, F32, None),
    "layer_f16_mask": (0, {}, H, F32, MASK),
    "layer_norm_first_bf16_input": (0, {"norm_first": True}, B, B, None),
    "layer_gelu_f16_bf16_input": (0, {"activation": "gelu"}, H, B, MASK),
    "encoder_bf16": (2, {}, B, F32, None),
    "encoder_norm_first_f16_mask": (2, {"norm_first": True}, H, F32, MASK),
}


@pytest.mark.parametrize("name", list(CASES))
def test_encoder_fast_path_under_autocast_returns_eagers_dtype(name):
    layers, kw, dtype, x_dtype, mask = CASES[name]
    m = _encoder(layers, **kw)
    x = _t(2, 5, 8).to(x_dtype)
    exp = _run(m, x, dtype, mask)
    torch._dynamo.reset()
    got = _run(torch.compile(m, backend="xla"), x, dtype, mask)
    ref = _run(_encoder(layers, **kw).double(), x.double(), None, mask)
    assert exp.dtype == dtype  # (eager's fast path, not the float32 slow path)
    _assert_as_close_to_float64_as_eager(got, exp, ref)


def test_encoder_fast_path_float64_under_autocast_stays_float64():
    m = _encoder(0).double()
    x = _t(2, 5, 8).double()
    exp = _run(m, x, B, None)
    torch._dynamo.reset()
    got = _run(torch.compile(m, backend="xla"), x, B, None)
    assert got.dtype == exp.dtype == F64
    torch.testing.assert_close(got, exp, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "weights, x_dtype, dtype",
    [
        (F32, B, None),  # (the kernel's products reject two dtypes)
        (H, F32, B),  # (under autocast: the layer norm of bfloat16 with float16 weights)
        (F64, F32, B),  # (autocast leaves float64 weights)
    ],
)
def test_encoder_fast_path_of_mixed_dtypes_raises_as_eager(weights, x_dtype, dtype):
    m = _encoder(0).to(weights)
    x = _t(2, 5, 8).to(x_dtype)
    with pytest.raises(RuntimeError) as exp:
        _run(m, x, dtype, None)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError) as got:
        _run(torch.compile(m, backend="xla"), x, dtype, None)
    assert str(exp.value) in str(got.value)


def test_bfloat16_encoder_fast_path_under_autocast_of_float32_input():
    m = _encoder(0).to(B)
    x = _t(2, 5, 8)
    exp = _run(m, x, B, None)
    torch._dynamo.reset()
    got = _run(torch.compile(m, backend="xla"), x, B, None)
    ref = _run(_encoder(0).to(B).double(), x.double(), None, None)
    assert exp.dtype == B
    _assert_as_close_to_float64_as_eager(got, exp, ref)


def _nesting() -> int:
    n = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return n


class _CastIn(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.bfloat16)
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w.t(), x.t() @ g


def _regions(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ w
        with torch.autocast("cpu", enabled=False):
            b = _CastIn.apply(x, w)
    return a, b


# (the split around the Function cuts the regions: its parts fail to export, run in eager)
@pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")
def test_failed_export_leaves_autocast_as_it_was():
    """A graph whose export fails inside an autocast region (a ``custom_fwd`` Function there,
    then run in eager) left autocast's nesting count up: its cache of casts outlived the
    region, and a later region (in eager too) read a parameter as cast before an update."""
    x, w = _t(4, 6).requires_grad_(), _t(6, 3, seed=1).requires_grad_()
    exp = _regions(x, w)
    torch._dynamo.reset()
    got = torch.compile(_regions, backend="xla")(x, w)
    assert _nesting() == 0 and not torch.is_autocast_enabled("cpu")
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    # (eager afterwards: a parameter updated between two regions is read at its new value)
    lin = nn.Linear(6, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = lin(x)
    with torch.no_grad():
        lin.weight.add_(1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        after = lin(x)
    assert not torch.equal(before, after)
