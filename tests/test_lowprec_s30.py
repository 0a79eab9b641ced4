"""Low-precision numerics found by scripts/probe_lowprec30.py (session 30): float16/bfloat16
programs, float8 casts, mixed precision, compared strictly against eager PyTorch on the CPU
(values bit for bit where eager's are exact, NaN and signed-zero positions, dtypes, errors).

- float16 subnormals (below 2**-14 = 6.1e-5) of a product's or convolution's gradient: the
  lowerings round their float32 results to float16 with XLA's ``reduce_precision``, which
  flushes results below the format's normal range to zero; eager keeps them. Gradients of a
  float16 model (a cross-entropy loss's are small) came out up to 5x further from float64
  than eager's (``_common.half_rounding``).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import clone_args

H, B = torch.float16, torch.bfloat16


def _compiled(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _bits_equal(out, ref):
    """Same dtype and shape, and the same values bit for bit (NaN where NaN, signed zeros)."""
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out, ref)
    if out.is_floating_point():
        assert torch.equal(out.isnan(), ref.isnan()), (out, ref)
        fin = ~ref.isnan()
        assert torch.equal(out[fin], ref[fin]), (out, ref)
        assert torch.equal(out[fin].signbit(), ref[fin].signbit()), (out, ref)
    else:
        assert torch.equal(out, ref), (out, ref)


def _same_as_eager(fn, *args):
    torch._dynamo.reset()
    ref = fn(*clone_args(args))
    out = _compiled(fn)(*clone_args(args))
    outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        _bits_equal(o, r)


def _within_an_ulp_of_eager(fn, *args):
    """Every value within one float16 unit in the last place of eager's (its float32 sums
    run in another order: a tie may round the other way), zeros where eager's are zeros."""
    torch._dynamo.reset()
    refs = fn(*clone_args(args))
    outs = _compiled(fn)(*clone_args(args))
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs):
        assert out.dtype == ref.dtype == H and out.shape == ref.shape
        exponent = torch.floor(torch.log2(ref.float().abs().clamp_min(2**-14)))
        assert bool(((out.float() - ref.float()).abs() <= 2 ** (exponent - 10)).all()), (out, ref)
        assert torch.equal(out == 0, ref == 0), (out, ref)


def _randn(*shape, seed=0, scale=1.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


# --- float16 subnormals of rounded float32 results ----------------------------------------------
def _grads(f):
    def grads(*args):
        args = [a.requires_grad_() for a in args]
        return torch.autograd.grad(f(*args).float().sum(), args)

    return grads


def test_linear_gradient_keeps_float16_subnormals():
    # (a gradient below 6.1e-5: where a float16 model's cross-entropy gradients fall)
    x, w = _randn(16, 128, dtype=H), _randn(32, 128, seed=1, scale=1e-3, dtype=H)
    gy = _randn(16, 32, seed=2, scale=1e-2, dtype=H)
    grads = _grads(lambda x, w: F.linear(x, w) * gy)
    _within_an_ulp_of_eager(grads, x, w)
    assert bool(((grads(x, w)[0].abs() < 2**-14) & (grads(x, w)[0] != 0)).any())


def test_float16_model_gradients_keep_subnormals():
    def step(x, w1, w2, y):
        x = F.linear(F.linear(x, w1), w2)
        return torch.autograd.grad(F.cross_entropy(x.float(), y), (w1,))

    x = _randn(16, 128, dtype=H)
    w1, w2 = _randn(32, 128, seed=1, scale=0.09, dtype=H), _randn(10, 32, seed=2, scale=0.17)
    y = torch.arange(16) % 10

    def run(x, w1, w2, y):
        return step(x.requires_grad_(), w1.requires_grad_(), w2.to(H).requires_grad_(), y)

    _within_an_ulp_of_eager(run, x, w1, w2, y)


def test_convolution_gradient_keeps_float16_subnormals():
    x, w = _randn(1, 4, 12, dtype=H), _randn(3, 4, 3, seed=1, scale=1e-3, dtype=H)
    gy = _randn(1, 3, 10, seed=2, scale=1e-2, dtype=H)
    _within_an_ulp_of_eager(_grads(lambda x, w: F.conv1d(x, w) * gy), x, w)


@pytest.mark.parametrize("dtype", [H, B], ids=str)
def test_products_of_subnormal_size(dtype):
    a, b = _randn(4, 32, scale=1e-3, dtype=dtype), _randn(32, 3, seed=1, scale=1e-2, dtype=dtype)
    _same_as_eager(lambda a, b: (a @ b, torch.histc(a * 1e-2, 4), a[0, :8].prod()), a, b)
