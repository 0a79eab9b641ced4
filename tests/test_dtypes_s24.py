"""Dtypes, promotion, integer and special-float semantics found by scripts/probe_dtypes24.py
(session 24): each test is a class of user code where the compiled call answered otherwise
than eager PyTorch on the CPU, compared strictly (values bit for bit where eager's are exact,
NaN and signed-zero positions, dtypes, errors by type and message).

- ``torch.gcd``/``torch.lcm`` on a signed integer's minimum: eager's Euclid loop takes
  ``std::abs``, which leaves the minimum as it is (gcd(127, -128) in int8 is -1); ``jnp.gcd``
  ordered the pair by value and never ended (the call hung). ``lcm`` takes the absolute value
  in C's int before the wrap to int8/int16.
- An integer division whose divisor wraps to 0 in the result's dtype (``uint8 // 256``,
  ``int8 % torch.tensor(2 ** 40)``): eager divides by the converted divisor and raises
  ZeroDivisionError; the check looked at the number before its conversion.
- ``torch.float_power`` of a complex tensor by a real number passes eager's pow a complex
  exponent without imaginary part, whose kernel takes the special exponents' forms
  (``z * z * z`` for 3, ``1 / z`` for -1) as for a real one; ``z ** (2 + 0j)`` likewise. The
  lowering took the general ``exp(w log z)`` (NaN and signs of zeros apart, e.g. -1.8e-16
  where eager gives -0.0).
- ``torch.prod`` of float16/bfloat16 on the CPU: eager's kernel rounds every product to the
  dtype (in its vectorized order, chunks per thread above 32768 elements), unlike its sums;
  the lowering accumulated in float32 (64 float16 numbers: 24 ulps off eager).
- ``torch.maximum``/``minimum`` of equal zeros: eager's scalar loop keeps the first operand,
  its vectorized blocks the second (``maximum(-0.0, 0.0)``: -0.0 in a row's tail, 0.0 in its
  blocks of 16 float32).
- ``torch.add``/``sub``/``rsub`` with a bool ``alpha`` and a result that is not bool: eager
  raises "Boolean alpha only supported for Boolean results."; the meta kernels check a float
  alpha only, and the program computed ``x + x``.
- The scalar tail of eager's elementwise loops (``cpu_kernel_vec``) is the last
  ``numel % (2 * W)`` elements, W the elements of one vector register (its vectorized loop
  takes two registers at a time); the lowerings that follow both rules (lerp's zeros, complex
  sums with a factor, half-precision ``add(alpha=)``) took ``numel % W``: lerp(0, -0, 1) of 8
  float32 was -0 (eager: +0 everywhere below 16 elements), ``add(a, b, alpha=0.3)`` of 16
  float16 rounded as the vector loop.
"""

from __future__ import annotations

import pytest
import torch

from tests._util import clone_args
from tests._util import same_bits_as_eager as _same_as_eager
from tests._util import strict_compiled as _compiled

NAN, INF = float("nan"), float("inf")
INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _raises_as_eager(fn, *args):
    torch._dynamo.reset()
    with pytest.raises(Exception) as eager:
        fn(*clone_args(args))
    with pytest.raises(type(eager.value)) as ours:
        _compiled(fn)(*clone_args(args))
    assert str(eager.value).split("\n")[0] in str(ours.value)


# --- gcd and lcm of integers' extremes ----------------------------------------------------------
def _pairs(dtype):
    ii = torch.iinfo(dtype)
    values = [0, 1, 2, 3, 6, -1, -4, 12, 9, -18, 1000, 30000, ii.max, ii.min, ii.min + 1]
    values = [v for v in values if ii.min <= v <= ii.max]
    # (eager's CPU lcm of int32/int64 dies of SIGFPE dividing the minimum by a gcd of -1)
    pairs = [
        (a, b)
        for a in values
        for b in values
        if dtype.itemsize < 4 or ii.min not in (a, b) or (a, b) == (ii.min, ii.min)
    ]
    return (
        torch.tensor([a for a, _ in pairs], dtype=dtype),
        torch.tensor([b for _, b in pairs], dtype=dtype),
    )


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_gcd_lcm_of_extremes(dtype):
    _same_as_eager(lambda a, b: (torch.gcd(a, b), torch.lcm(a, b)), *_pairs(dtype))


def test_gcd_of_int8_minimum_with_a_scalar_tensor():
    x = torch.tensor([3, -4, 0, 127, -128], dtype=torch.int8)
    _same_as_eager(lambda x: torch.gcd(x, torch.tensor(-128, dtype=torch.int8)), x)


# --- integer division by a divisor that wraps to zero --------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x // 256,
        lambda x: x // 2**40,
        lambda x: x % -256,
        lambda x: torch.fmod(x, 512),
        lambda x: torch.remainder(x, 2**40),
        lambda x: torch.div(x, 256, rounding_mode="trunc"),
        lambda x: torch.div(x, -(2**32), rounding_mode="floor"),
        lambda x: x // torch.tensor(2**40),
        lambda x: x % torch.tensor(256),
        lambda x: x.clone().floor_divide_(256),
    ],
)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_divisor_wrapping_to_zero_raises(fn, dtype):
    x = torch.tensor([100, 7, 5], dtype=dtype)
    try:
        fn(x.clone())
    except RuntimeError:
        _raises_as_eager(fn, x)
    else:  # (a divisor that does not wrap to 0 in this dtype: eager's values)
        _same_as_eager(fn, x)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16])
def test_divisor_wrapping_to_nonzero_divides_by_the_wrapped_value(dtype):
    x = torch.tensor([100, 7, 5, 0], dtype=dtype)
    _same_as_eager(lambda x: (x // 300, x % 300, torch.fmod(x, -253), x // 65539), x)


# --- complex powers with a real exponent given as complex ----------------------------------------
_Z = torch.tensor(
    [1 + 2j, -3 - 0.5j, 1e30 + 1j, INF + 0j, 0j, -0.0 - 0j, -1.5 + 0.25j, NAN + 1j, 2 - INF * 1j],
    dtype=torch.complex64,
)


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: torch.float_power(z, 3),
        lambda z: torch.float_power(z, 2),
        lambda z: torch.float_power(z, 0.5),
        lambda z: torch.float_power(z, 0),
        lambda z: z ** (2 + 0j),
        lambda z: z ** (3 + 0j),
        lambda z: z.real ** (2 + 0j),
        lambda z: torch.pow(z.to(torch.complex128), 1 + 0j),
    ],
)
def test_complex_power_by_a_complex_exponent_without_imaginary_part(fn):
    _same_as_eager(fn, _Z)


# --- half-precision products: rounded per product, in eager's order ------------------------------
def _near_one(dtype, *shape, seed=0, spread=0.01):
    g = torch.Generator().manual_seed(seed)
    return (1 + (torch.rand(*shape, generator=g, dtype=torch.float64) - 0.5) * spread).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [5, 64, 65, 1000, 4097])
def test_half_product_of_a_vector(dtype, n):
    # (eager's kernel rounds every product: 64 float16 numbers in [0.5, 1.5) were 24 ulps
    # from eager's product, computed in float32 and rounded once)
    _same_as_eager(lambda x: (x.prod(), x.prod(0, keepdim=True)), _near_one(dtype, n))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_product_along_dims(dtype):
    x = _near_one(dtype, 7, 300, 5, spread=0.05)
    _same_as_eager(
        lambda x: (
            x.prod(1),
            x.prod(-1, keepdim=True),
            x.prod(0),
            x.reshape(7, -1).prod(),
            x[:, :, :1].contiguous().prod(1),
            x.float().prod(1, dtype=x.dtype),
        ),
        x,
    )


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_half_product_split_among_threads(threads):
    # (a whole-tensor product of 32768 elements or more is cut into one chunk per thread)
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _same_as_eager(lambda x: x.prod(), _near_one(torch.float16, 70001))
    finally:
        torch.set_num_threads(saved)


# --- maximum/minimum of equal zeros: eager's vector blocks keep the second operand ---------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
@pytest.mark.parametrize("n", [1, 9, 24, 40])
def test_maximum_minimum_of_signed_zeros(dtype, n):
    x = torch.full((n,), -0.0, dtype=dtype)
    z = torch.zeros(n, dtype=dtype)
    _same_as_eager(
        lambda x, z: (
            torch.maximum(x, z),
            torch.maximum(z, x),
            torch.minimum(z, x),
            torch.minimum(x, z),
            torch.maximum(x, torch.tensor(0.0, dtype=x.dtype)),
            torch.max(x.expand(3, -1), z),
        ),
        x,
        z,
    )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
def test_maximum_minimum_of_integers(dtype):
    # (the probe of eager's kernel filled a tensor of the dtype with NaN: T5's relative
    # position buckets, torch.min of int64 tensors, raised in the lowering and ran in eager)
    x = torch.tensor([0, 1, 2, 3] * 5).to(dtype)
    y = torch.tensor([3, 2, 1, 0] * 5).to(dtype)
    _same_as_eager(lambda x, y: (torch.minimum(x, y), torch.maximum(x, y), torch.min(x, y)), x, y)


def test_maximum_of_signed_zeros_gradient():
    x = torch.tensor([-0.0, 1.0, 2.0] * 10, requires_grad=True)
    y = torch.tensor([0.0, 1.0, 3.0] * 10, requires_grad=True)
    _same_as_eager(lambda x, y: torch.autograd.grad(torch.maximum(x, y).sum(), (x, y)), x, y)


# --- a bool alpha -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.add(x, x, alpha=True),
        lambda x: torch.add(x, 2, alpha=False),
        lambda x: torch.sub(x.float(), x, alpha=True),
        lambda x: torch.rsub(x, x, alpha=True),
        lambda x: x.clone().add_(x, alpha=True),
        lambda x: torch.add(x.to(torch.complex64), x, alpha=True),
    ],
)
def test_bool_alpha_of_a_non_bool_result_raises(fn):
    _raises_as_eager(fn, torch.tensor([1, 2]))


def test_bool_alpha_of_a_bool_result():
    _same_as_eager(lambda x: torch.add(x, x, alpha=True), torch.tensor([True, False]))


# --- the scalar tail of eager's vectorized loops: two vector registers per step ----------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.complex64])
@pytest.mark.parametrize("n", [3, 8, 12, 16, 24, 40])
def test_lerp_tail_of_two_vector_registers(dtype, n):
    s, e = torch.zeros(n, dtype=dtype), torch.full((n,), -0.0, dtype=dtype)
    _same_as_eager(lambda s, e: (torch.lerp(s, e, 1.0), torch.lerp(e, s, 0.75)), s, e)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [16, 24, 40, 100])
def test_half_add_alpha_tail_of_two_vector_registers(dtype, n):
    g = torch.Generator().manual_seed(n)
    a, b = (torch.randn(n, generator=g).to(dtype) for _ in range(2))
    _same_as_eager(lambda a, b: (torch.add(a, b, alpha=0.3), a.clone().sub_(b, alpha=0.7)), a, b)
