"""Quantization workflows and bit manipulation compiled against eager PyTorch (CPU), strictly:
integer results and fake-quantized values bit for bit, dtypes, straight-through gradients with
their signed zeros, eager's errors (``scripts/probe_quant31.py`` holds the wider probe).

- ``1 << t`` and ``3 >> t`` (``bitwise_*_shift.Scalar_Tensor``) are lowered, with eager's
  results for shifts past the width and negative shifts, and its error for float results.
- ``torch._int_mm``: int8 @ int8 accumulated in int32.
- fake quantization (``_fake_quant``): per tensor (numbers and tensor qparams, enabled or
  not) and per channel (integer and floating zero points), over ties, NaN, infinities and
  values past int64 as eager's x86 kernels compute them.
- ops of quantized tensors run in eager, with the reason said.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla  # noqa: F401
from torch2xla._errors import OpError, OpNotImplementedError, UnsupportedOpsError

A = torch.ops.aten
STRICT = {"strict": True}
INTS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def _compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="xla", options=STRICT)


def _same(got, exp):
    """Bit-exact: dtype, shape, values (NaN where eager's is NaN, zeros' signs)."""
    got = got if isinstance(got, tuple | list) else (got,)
    exp = exp if isinstance(exp, tuple | list) else (exp,)
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        if e.is_floating_point():
            assert torch.equal(g.isnan(), e.isnan())
            keep = ~e.isnan()
            assert torch.equal(g[keep], e[keep]), (g[keep], e[keep])
            assert torch.equal(g[keep].signbit(), e[keep].signbit())
        else:
            assert torch.equal(g, e), (g, e)


# -- shifts of a Python number by a tensor ----------------------------------------------------


def _scalar_shifts(t):
    return 1 << t, 3 >> t, -17 >> t, torch.bitwise_left_shift(5, t), 300 << t


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_number_shifted_by_tensor(dtype):
    # widths and beyond (eager: 0 for left shifts, the sign for right shifts), negatives
    # (eager: as shifts past the width), and the number converted to t's dtype (300 in int8)
    amounts = [0, 1, 6, 7, 8, 9, 15, 16, 31, 32, 63, 64, 65, 100, -1, -8, -64]
    info = torch.iinfo(dtype)
    t = torch.tensor([a for a in amounts if info.min <= a <= info.max], dtype=dtype)
    _same(_compile(_scalar_shifts)(t), _scalar_shifts(t))


def test_number_shifted_by_bool_and_bit_masks():
    def fn(b, x):
        masks = 1 << torch.arange(8)  # the idiom of unpacking bits
        return 1 << b, (x.unsqueeze(-1) & masks).bool()

    b = torch.tensor([True, False])
    x = torch.tensor([0, 1, 5, 128, 255, 200])
    _same(_compile(fn)(b, x), fn(b, x))


@pytest.mark.parametrize("op", [lambda t: 1.5 << t, lambda t: 2.0 >> t], ids=["lshift", "rshift"])
def test_float_number_shifted_raises_eagers_error(op):
    t = torch.tensor([1, 2])
    with pytest.raises(NotImplementedError) as eager:
        op(t)
    with pytest.raises(OpNotImplementedError) as ours:
        _compile(op)(t)
    assert str(eager.value) in str(ours.value)


# -- torch._int_mm -----------------------------------------------------------------------------


def test_int_mm_values_and_extremes():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (17, 64), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (64, 8), generator=g, dtype=torch.int8)
    low = torch.full((3, 64), -128, dtype=torch.int8)
    f = _compile(torch._int_mm)
    _same(f(a, b), torch._int_mm(a, b))
    _same(f(low, b), torch._int_mm(low, b))


def test_int_mm_shape_error_as_eager():
    a, b = torch.zeros(4, 3, dtype=torch.int8), torch.zeros(5, 2, dtype=torch.int8)
    with pytest.raises(RuntimeError) as eager:
        torch._int_mm(a, b)
    with pytest.raises(RuntimeError) as ours:
        _compile(torch._int_mm)(a, b)
    assert str(eager.value).splitlines()[0][:40] in str(ours.value)


# -- fake quantization -------------------------------------------------------------------------
SPECIAL = [float("inf"), -float("inf"), float("nan"), 1e30, -1e30, 3e9, -3e9, 1e-30, -0.0, 6e4]


def _values(dtype, n=120):
    g = torch.Generator().manual_seed(0)
    ties = torch.randint(-400, 400, (n,), generator=g) * 0.125  # x / scale lands on .5 often
    x = torch.cat([ties, torch.randn(n, generator=g) * 30, torch.tensor(SPECIAL)])
    return x.to(dtype)


FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_fake_quantize_per_tensor_bit_exact(dtype):
    def fn(x, s, z, on):
        return (
            A.fake_quantize_per_tensor_affine_cachemask(x, 0.037, -5, -8, 7),
            A.fake_quantize_per_tensor_affine_cachemask(x, 0.1, 0, 0, 255),
            A._fake_quantize_per_tensor_affine_cachemask_tensor_qparams(x, s, z, on, -128, 127),
        )

    x = _values(dtype)
    s, z = torch.tensor([0.25]), torch.tensor([3], dtype=torch.int32)
    f = _compile(fn)
    for on in (torch.ones(1, dtype=torch.long), torch.zeros(1, dtype=torch.long)):
        _same([t for pair in f(x, s, z, on) for t in pair], [t for p in fn(x, s, z, on) for t in p])


@pytest.mark.parametrize("dtype", FLOATS[:3], ids=str)
@pytest.mark.parametrize("zp_dtype", [torch.int32, torch.float32], ids=str)
def test_fake_quantize_per_channel_bit_exact(dtype, zp_dtype):
    def fn(x, s, z):
        return (
            *A.fake_quantize_per_channel_affine_cachemask(x, s, z, 0, -128, 127),
            *A.fake_quantize_per_channel_affine_cachemask(x.t(), s, z, 1, -128, 127),
        )

    x = _values(dtype).reshape(5, -1)
    s = torch.tensor([0.25, 0.1, 0.037, 1e-3, 3.3])
    z = torch.tensor([0.0, 3.5, -7.25, 100.5, 0.0]).to(zp_dtype)
    _same(_compile(fn)(x, s, z), fn(x, s, z))


def _fq_user(x, s, z, sc, zc):
    a = torch.fake_quantize_per_tensor_affine(x, 0.25, 3, 0, 15)
    b = torch.fake_quantize_per_tensor_affine(x, s, z, 0, 255)
    c = torch.fake_quantize_per_channel_affine(x, sc, zc, 0, -128, 127)
    return a, b, c


def test_fake_quantize_straight_through_gradients():
    # the gradient passes where the value was inside [quant_min, quant_max], else it is zero
    # with the sign of grad * 0 (eager's grad * mask); scale and zero point get none
    g = torch.Generator().manual_seed(1)
    base = torch.randint(-60, 60, (4, 33), generator=g) * 0.5
    s, z = torch.tensor(0.25), torch.tensor(3, dtype=torch.int32)
    sc, zc = torch.tensor([0.1, 0.25, 0.03, 1.0]), torch.tensor([0, 5, -3, 1], dtype=torch.int32)
    grads = []
    for fn in (_fq_user, _compile(_fq_user)):
        x = base.clone().requires_grad_(True)
        outs = fn(x, s, z, sc, zc)
        w = torch.linspace(-1, 2, x.numel()).reshape(x.shape)
        sum((o * w).sum() for o in outs).backward()
        grads.append((outs, x.grad))
    (got, got_grad), (exp, exp_grad) = grads[1], grads[0]
    _same([o.detach() for o in got], [o.detach() for o in exp])
    _same(got_grad, exp_grad)
    assert s.grad is None and sc.grad is None


def test_fake_quantize_per_channel_zero_point_range_checked():
    fn = lambda x, s, z: torch.fake_quantize_per_channel_affine(x, s, z, 0, 0, 255)
    args = (torch.randn(2, 3), torch.tensor([0.1, 0.2]), torch.tensor([0, -1], dtype=torch.int32))
    with pytest.raises(RuntimeError) as eager:
        fn(*args)
    with pytest.raises(OpError) as ours:
        _compile(fn)(*args)
    assert str(eager.value) in str(ours.value)


def test_fake_quantize_module_training_matches_eager():
    # QAT: prepare_qat's FakeQuantize modules, observers updated over a few SGD steps
    from torch import nn

    def run(compiled):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).train()
        m.qconfig = torch.ao.quantization.get_default_qat_qconfig("fbgemm")
        torch.ao.quantization.prepare_qat(m, inplace=True)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        f = _compile(m) if compiled else m
        losses = []
        for i in range(3):
            x = torch.randn(5, 8, generator=torch.Generator().manual_seed(i))
            loss = f(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return losses, [t.detach() for t in (*m.parameters(), *m.buffers())]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, exp = run(True), run(False)
    # (the linear layers' products accumulate in XLA's order, not oneDNN's: a few ulps)
    for g, e in zip(got[0], exp[0]):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    for g, e in zip(got[1], exp[1]):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


# -- quantized tensors -------------------------------------------------------------------------


def _quantize(x):
    return torch.quantize_per_tensor(x * 2, 0.1, 10, torch.quint8).dequantize() + 1


def test_quantized_tensors_run_in_eager_with_the_reason():
    x = torch.randn(10)
    with pytest.raises(UnsupportedOpsError, match="quantized tensors .* have no XLA type"):
        _compile(_quantize)(x)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.compile(_quantize, backend="xla")(x)
    _same(got, _quantize(x))


# -- rounding to decimals ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_round_decimals_bit_exact(dtype):
    # eager: nearbyint(x * 10**d) / 10**d, or nearbyint(x / 10**-d) * 10**-d for d < 0, in
    # float (double for float64); jnp.round multiplied by 10**d in x's dtype: round(-112583.98,
    # -3) was -112999.99, and a power past float's range gave x, not NaN
    def fn(x):
        return tuple(torch.round(x, decimals=d) for d in (-40, -3, -2, -1, 0, 1, 2, 3, 7, 40, 400))

    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(300, generator=g) * 1e5, torch.arange(-2500.0, 2500.0, 250.0)])
    x = torch.cat([x, torch.randn(100, generator=g), torch.tensor(SPECIAL)]).to(dtype)
    _same(_compile(fn)(x), fn(x))
