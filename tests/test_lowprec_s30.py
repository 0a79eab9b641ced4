"""Low-precision numerics found by scripts/probe_lowprec30.py (session 30): float16/bfloat16
programs, float8 casts, mixed precision, compared strictly against eager PyTorch on the CPU
(values bit for bit where eager's are exact, NaN and signed-zero positions, dtypes, errors).

- float16 subnormals (below 2**-14 = 6.1e-5) of a product's or convolution's gradient: the
  lowerings round their float32 results to float16 with XLA's ``reduce_precision``, which
  flushes results below the format's normal range to zero; eager keeps them. Gradients of a
  float16 model (a cross-entropy loss's are small) came out up to 5x further from float64
  than eager's (``_common.half_rounding``).
- float8: XLA's CPU conversion of float8_e4m3fn to an integer gave the lowest integer (eager
  goes through float32); torch 2.13's conversion to float8_e4m3fn saturates (480, 1e5, inf
  become 448), XLA's gave NaN (``_common._to_float8``, which asks eager once whether it
  saturates: earlier releases gave NaN); the ops eager's CPU kernels lack for float8 (``-x``,
  ``x + y``, ``x.sum()``, ``x > 0``) computed instead of raising eager's NotImplementedError
  (``_dtype_probes.kernel_refuses`` now probes float8 as it does half precision).
- ``x.bool()`` of a float32 subnormal: False (XLA's CPU reads subnormals as zero); eager
  True. Conversions to bool read the bits (``_float_bits.nonzero``). (``x != 0``,
  ``count_nonzero``, ``logical_not``, ``sign`` of subnormals and ``x.double()`` of one are
  still flushed: docs/numerics.md, Subnormals.)
- A 0-dim float32/float64 tensor among float16/bfloat16 operands of ``lerp`` (its weight),
  ``addcmul``/``addcdiv`` (and their in-place forms): eager's TensorIterator converts it to the
  half dtype before its kernel computes in float32; the lowerings kept its float32 value (a
  unit off in a third of the elements) (``_elementwise._kernel_operands``).
- ``torch.ldexp``: lowered as ``x * exp2(n)`` in the result's dtype; XLA's float16 exp2 is not
  exact at integers (every float16 product a unit low), float64's neither, and float32
  ``0.5 * 2**128`` overflowed where eager gives 2**127. Integer exponents now multiply by exact
  powers of two (``_special._times_power_of_two``), float ones as eager's
  ``x * pow(2.0, n)``.
- ``torch.xlogy``/``special.xlog1py`` of float16/bfloat16: eager's CPU kernel computes
  ``x * std::log(y)`` with c10's Half/BFloat16 math, which rounds the logarithm to the dtype
  before the product; the lowering rounded once (``_common.cpu_half_step``).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests._util import clone_args
from tests._util import same_bits_as_eager as _same_as_eager
from tests._util import strict_compiled as _compiled

H, B = torch.float16, torch.bfloat16


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


# --- float8 conversions and kernels -------------------------------------------------------------
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
_F8_SOURCES = torch.tensor(
    [0.1, 1.0, -3.3, 448.0, 464.0, 465.0, 480.0, 500.0, 57344.0, 61440.0, 1e5, -1e6]
    + [float("nan"), float("inf"), float("-inf"), -0.0, 1e-4, 0.0137, 240.0, 232.0, 0.5]
)


@pytest.mark.parametrize("f8", [E4M3, E5M2], ids=str)
@pytest.mark.parametrize("source", [torch.float32, torch.float64, H, B, E5M2], ids=str)
def test_conversions_to_float8(f8, source):
    # (eager's e4m3fn saturates where torch 2.13's c10 does: 448 for 480, 1e5 and inf, NaN
    # for NaN; XLA's conversion gave NaN)
    x = _F8_SOURCES.to(source)
    # (the bits of the finite values only: NaN's sign is not kept by XLA)
    _same_as_eager(lambda x: (x.to(f8).float(), x[~x.isnan()].to(f8).view(torch.uint8)), x)


@pytest.mark.parametrize("f8", [E4M3, E5M2], ids=str)
def test_conversions_to_float8_from_integers_and_numbers(f8):
    i = torch.tensor([1000, -1000, 3, 17, 300, 0, 2**40])
    _same_as_eager(
        lambda i, x: (
            i.to(f8).float(),
            torch.zeros(4, dtype=f8)
            .index_put_((torch.tensor([1]),), torch.tensor(600.0).to(f8))
            .float(),
            torch.zeros(21, dtype=f8).copy_(x).float(),
            x.masked_fill(x > 1, 1e6).to(f8).float(),
        ),
        i,
        _F8_SOURCES,
    )


@pytest.mark.parametrize("f8", [E4M3, E5M2], ids=str)
@pytest.mark.parametrize("target", [torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool])
def test_conversions_of_float8_to_integers(f8, target):
    # (XLA's CPU conversion of float8_e4m3fn to an integer gave the lowest integer)
    x = torch.tensor([-24.3, 3.5, 100.0, -0.5, 2.7, 448.0, 0.0])
    _same_as_eager(lambda x: x.to(f8).to(target), x)


def test_scaled_float8_round_trip():
    x = _randn(64, scale=3.0)

    def quantized(x):
        scale = x.abs().max() / 448
        q = (x / scale).to(E4M3)
        return q.to(B) * scale.to(B), q.float() * scale, q.view(torch.uint8)

    _same_as_eager(quantized, x)


@pytest.mark.parametrize("f8", [E4M3, E5M2], ids=str)
@pytest.mark.parametrize(
    "fn",
    [lambda x: -x, lambda x: x + x, lambda x: x.sum(), lambda x: x > 0, lambda x: x.flip(0)],
    ids=["neg", "add", "sum", "gt", "flip"],
)
def test_float8_ops_without_cpu_kernels_raise_as_eager(f8, fn):
    x = torch.tensor([1.0, -2.0, 3.0]).to(f8)
    torch._dynamo.reset()
    with pytest.raises(NotImplementedError) as eager:
        fn(x)
    with pytest.raises(NotImplementedError) as ours:
        _compiled(fn)(x)
    assert str(eager.value).split("\n")[0] in str(ours.value)


# --- conversions to bool -------------------------------------------------------------------------
def test_float_to_bool_of_subnormals_is_true():
    # (XLA's CPU compares with subnormals read as zero: 1e-40 converted to False)
    x = torch.tensor([0.0, -0.0, 1e-8, 1e-40, -1e-41, float("nan"), 1.0, float("inf")])
    _same_as_eager(lambda x: (x.bool(), x.to(torch.complex64).bool(), x.to(H).bool()), x)


# --- 0-dim float tensors among half-precision operands of lerp, addcmul, addcdiv ---------------
_ZERO_DIM = {
    "lerp": lambda a, b, c, s: torch.lerp(a, b, s),
    "lerp_": lambda a, b, c, s: a.clone().lerp_(b, s),
    "addcmul": lambda a, b, c, s: torch.addcmul(a, b, s),
    "addcmul_value": lambda a, b, c, s: torch.addcmul(a, s, c, value=0.1),
    "addcmul_": lambda a, b, c, s: a.clone().addcmul_(b, s, value=0.5),
    "addcdiv": lambda a, b, c, s: torch.addcdiv(a, b, s),
    "addcdiv_value": lambda a, b, c, s: torch.addcdiv(a, s, c.abs() + 1, value=-0.3),
    # (a tensor weight of the same dtype, and a Python number, which eager keeps in float32)
    "lerp_tensor": lambda a, b, c, s: torch.lerp(a, b, c.sigmoid()),
    "lerp_number": lambda a, b, c, s: torch.lerp(a, b, 0.3),
}


@pytest.mark.parametrize("dtype", [H, B], ids=str)
@pytest.mark.parametrize("scalar", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", list(_ZERO_DIM))
def test_zero_dim_operand_is_rounded_to_the_half_dtype(dtype, scalar, name):
    # (eager's TensorIterator converts it to the result's dtype; it was kept in float32)
    a, b, c = (_randn(37, seed=k, dtype=dtype) for k in range(3))
    s = torch.tensor(0.3, dtype=scalar)
    _same_as_eager(_ZERO_DIM[name], a, b, c, s)


# --- ldexp: products by exact powers of two ------------------------------------------------------
@pytest.mark.parametrize("dtype", [H, B, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize(
    "exponent",
    [
        torch.tensor(3),
        torch.tensor([16, -20, -10, 2, 128, -12, 0, 1]),
        torch.tensor([3, -2, 1, 0, 5, 6, 7, 8], dtype=torch.int8),
        torch.tensor([1.5, 0.5, -2.0, 3.0, 0.0, 1.0, 2.0, 3.0]),
        torch.tensor(-3.0, dtype=torch.float64),
    ],
    ids=["0d", "int64", "int8", "float32", "0d_float64"],
)
def test_ldexp_values_equal_eager(dtype, exponent):
    # (XLA's float16 exp2 of 3 was below 8: every float16 product a unit low; float64's exp2
    # a unit off at whole numbers; float32 0.5 * 2**128 is 2**127 in eager, not inf)
    x = _randn(8, scale=100.0, dtype=dtype)
    _same_as_eager(lambda x, e: torch.ldexp(x, e), x, exponent)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_exp2_exact_at_whole_numbers(dtype):
    # (the same exact powers as ldexp's: XLA's float64 exp2 was a unit off at most integers)
    e = torch.cat([torch.arange(-70, 71, dtype=dtype), torch.tensor([0.5, -1.5], dtype=dtype)])
    _same_as_eager(torch.exp2, e[:-2])
    x = e.clone().requires_grad_()
    (got,) = torch.autograd.grad(_compiled(torch.exp2)(x).sum(), x)
    (want,) = torch.autograd.grad(torch.exp2(x).sum(), x)
    # (eager's derivative is grad * result * ln 2, ours result * ln 2: the two products may
    # round a unit apart)
    torch.testing.assert_close(got, want, rtol=torch.finfo(dtype).eps, atol=0)


# --- xlogy/xlog1py: eager's CPU kernel rounds the logarithm to the half dtype --------------------
@pytest.mark.parametrize("dtype", [H, B], ids=str)
def test_half_xlogy_rounds_the_logarithm_first(dtype):
    a, b = (_randn(37, seed=k, dtype=dtype).abs() + 0.1 for k in range(2))
    s = torch.tensor(0.3)
    _same_as_eager(
        lambda a, b: (
            torch.xlogy(a, b),
            torch.special.xlog1py(a, b),
            torch.xlogy(a, s),
            torch.xlogy(s, a),
            torch.special.xlog1py(a, 0.5),
        ),
        a,
        b,
    )
