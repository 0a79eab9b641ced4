"""Dtypes, promotion and numerics found by scripts/probe_dtypes.py (session 19): each test is a
class of user code where the compiled call answered otherwise than eager PyTorch on the CPU,
compared strictly (values bit for bit where eager's are exact, NaN and signed-zero positions,
dtypes, errors)."""

from __future__ import annotations

import pytest
import torch

from tests._util import assert_same
from tests._util import bits_equal as _bits_equal
from tests._util import same_bits_as_eager as _same_as_eager
from tests._util import strict_compiled as _compiled

NAN, INF = float("nan"), float("inf")


# --- a product with a bool converted to a float ------------------------------------------------
# XLA's simplifier rewrote x * convert(mask) as select(mask, x, 0), in any lowering that
# multiplies (mul, addcmul, lerp, prod): NaN and inf times False gave 0 (eager: NaN), a negative
# times False +0.0 (eager: -0.0).
_VALUES = torch.tensor([NAN, -2.0, INF, 3.0, -INF, -0.0, 5.0, NAN])
_MASK = torch.tensor([True, False, False, True, False, False, True, False])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: x * m,
        lambda x, m: m * x,
        lambda x, m: m.float() * x,
        lambda x, m: x * m.to(torch.float64),
        lambda x, m: x.mul(m.unsqueeze(0).expand(2, -1)),
        lambda x, m: m / -1,
        lambda x, m: m * -1.5,
        lambda x, m: m * NAN,
        lambda x, m: m.float() / x,
        lambda x, m: x.clone().mul_(m),
        lambda x, m: (x * m.float()).sum(0, keepdim=True),
        lambda x, m: torch.addcmul(x, x, m.float()),
        lambda x, m: torch.addcdiv(x, m.float(), x.abs() + 1, value=-3),
        lambda x, m: torch.lerp(x, torch.zeros(8), m.float()),
        lambda x, m: torch.stack([x, m.float()]).prod(0),
        lambda x, m: torch.where(m, 1.0, 0.0) * x,
        lambda x, m: x.double() * m,
        lambda x, m: x * m.to(torch.complex64),
    ],
)
def test_product_with_a_converted_bool_keeps_nan_and_signed_zeros(fn):
    _same_as_eager(fn, _VALUES, _MASK)


# --- pow of a bool tensor by a bool ------------------------------------------------------------
@pytest.mark.parametrize("exponent", [True, False, 2, 0, 1.5])
def test_pow_of_bool_by_a_scalar_keeps_eagers_dtype(exponent):
    _same_as_eager(lambda x: x**exponent, torch.tensor([True, False, True]))


# --- subtraction with a bool operand raises as in eager ----------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x - True,
        lambda x: True - x,
        lambda x: torch.sub(x, False, alpha=2),
        lambda x: torch.rsub(x, True),
        lambda x: x.int() - True,
    ],
)
def test_subtraction_with_a_python_bool_raises(fn):
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError) as got:
        _compiled(fn)(x)
    assert str(got.value).startswith(str(eager.value).splitlines()[0])


# --- trunc division of half-precision tensors rounds the quotient first -----------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),  # rounded quotient
        lambda a, b: torch.div(a, b[:1], rounding_mode="trunc"),  # one element: float32
        lambda a, b: torch.div(a, b[0], rounding_mode="trunc"),
        lambda a, b: torch.div(a, 0.10009765625, rounding_mode="trunc"),
        lambda a, b: torch.div(3.0, b, rounding_mode="trunc"),
        lambda a, b: torch.div(a, b.float(), rounding_mode="trunc"),
    ],
)
def test_trunc_division_of_half_precision(dtype, fn):
    g = torch.Generator().manual_seed(0)
    a = torch.cat([torch.full((4,), 3.0), torch.randn(500, generator=g) * 50]).to(dtype)
    b = torch.cat([torch.full((4,), 0.1), torch.randn(500, generator=g)]).to(dtype)
    _same_as_eager(fn, a, b)


# --- float32 special functions computed as accurately as eager's ------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64])
def test_lgamma_is_zero_at_one_and_two(dtype):
    x = torch.tensor([1, 2, 1, 2, 3], dtype=dtype)
    out = _compiled(torch.lgamma)(x)
    ref = torch.lgamma(x)
    _bits_equal(out, ref)


@pytest.mark.parametrize(
    "fn, values",
    [
        (torch.lgamma, [0.999, 1.001, 2.001, 1.999, 0.5, 3.3, -2.5, 10.0, 1e-3, 30.0]),
        (torch.digamma, [1.0, 2.0, 0.999, 3.3, -2.5, 10.0, 1e-3, 1.4616321]),
        (torch.erfinv, [0.999, -0.999, 0.5, 0.1, 0.9999]),
        (torch.erfc, [0.999, 1.5, 3.0, -1.0, 9.0]),
    ],
)
def test_float32_special_functions_within_eagers_error(fn, values):
    """No further from the float64 value than eager's (its libm, within an ulp or two) plus one
    float32 ulp."""
    x = torch.tensor(values)
    torch._dynamo.reset()
    out, ref, exact = _compiled(fn)(x), fn(x), fn(x.double())
    assert out.dtype == ref.dtype
    ulp = torch.finfo(torch.float32).eps * exact.abs().clamp_min(torch.finfo(torch.float32).tiny)
    err, eager_err = (out.double() - exact).abs(), (ref.double() - exact).abs()
    assert (err <= eager_err + ulp).all(), (out, ref, exact)


def test_float32_special_functions_keep_gradients():
    x = torch.tensor([0.5, 1.5, 2.5], requires_grad=True)
    fn = lambda x: (torch.lgamma(x) + torch.digamma(x) + torch.erfc(x)).sum()
    torch._dynamo.reset()
    (g,) = torch.autograd.grad(_compiled(fn)(x), x)
    (r,) = torch.autograd.grad(fn(x), x)
    assert_same(g, r, rtol=1e-5, atol=1e-6)


# --- half-precision attention on the CPU: float32 probabilities, one rounding ----------------
def _attention(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _qkv(shape, dtype, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    return [
        torch.randn(*shape, generator=g, dtype=torch.float64)
        .to(dtype)
        .requires_grad_(requires_grad)
        for _ in range(3)
    ]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_attention_3d_is_eagers_math_path(dtype):
    """3-D operands take eager's math path, which computes in float32 and rounds once: within
    an ulp of it everywhere (float32 sums in another order), where rounding the probabilities
    first had a bfloat16 output 8 ulps off."""
    q, k, v = _qkv((2, 8, 16), dtype)
    torch._dynamo.reset()
    out, ref = _compiled(_attention)(q, k, v), _attention(q, k, v)
    assert out.dtype == ref.dtype
    ulp = torch.finfo(dtype).eps * ref.double().abs().clamp_min(torch.finfo(dtype).tiny)
    assert ((out.double() - ref.double()).abs() <= ulp).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(2, 3, 8, 16), (1, 2, 40, 64)])
def test_half_attention_within_eagers_error(dtype, shape):
    q, k, v = _qkv(shape, dtype)
    torch._dynamo.reset()
    out, ref = _compiled(_attention)(q, k, v), _attention(q, k, v)
    exact = _attention(q.double(), k.double(), v.double())
    assert out.dtype == ref.dtype
    err, eager_err = (out.double() - exact).abs(), (ref.double() - exact).abs()
    assert err.max() <= eager_err.max() and err.mean() <= eager_err.mean(), (err, eager_err)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_attention_gradients_within_eagers_error(dtype):
    q, k, v = _qkv((2, 8, 16), dtype, requires_grad=True)
    w = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))

    def loss(fn, *t):
        return (fn(*t).float() * w).sum()

    torch._dynamo.reset()
    got = torch.autograd.grad(loss(_compiled(_attention), q, k, v), (q, k, v))
    ref = torch.autograd.grad(loss(_attention, q, k, v), (q, k, v))
    wide = [t.detach().double().requires_grad_() for t in (q, k, v)]
    exact = torch.autograd.grad((_attention(*wide) * w.double()).sum(), wide)
    for g, r, e in zip(got, ref, exact):
        assert g.dtype == r.dtype
        ulp = torch.finfo(dtype).eps * e.abs().max()
        assert (g.double() - e).abs().max() <= (r.double() - e).abs().max() + ulp


# --- var and std on the CPU accumulate in float64 ----------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.std(),
        lambda x: x.std(0),
        lambda x: x.var(0, correction=0) / 1e20,
        lambda x: torch.std_mean(x),
        lambda x: torch.std_mean(x.reshape(1, -1), 1, keepdim=True),
        lambda x: torch.var_mean(x * 1e-10, 0),
        lambda x: x.to(torch.complex64).std(),
        lambda x: (x * 1e-19).to(torch.bfloat16).std(0),
    ],
)
def test_variance_of_large_float32_values_does_not_overflow(fn):
    """The std of [1e20, -1e20, 3e19] is 1.01e20 in eager (float64 accumulation), not inf."""
    x = torch.tensor([1e20, -1e20, 3e19, 2.5e19])
    torch._dynamo.reset()
    out, ref = _compiled(fn)(x), fn(x)
    assert_same(out, ref, rtol=2e-7, atol=0)


@pytest.mark.parametrize(
    "fn", [torch.special.i1, torch.special.i1e, torch.special.modified_bessel_i1]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bessel_i1_of_negative_zero_is_positive_zero(fn, dtype):
    _same_as_eager(fn, torch.tensor([-0.0, 0.0, -0.0], dtype=dtype))
