"""Complex arithmetic at special values, round 3 (session 21, scripts/probe_complex_arith.py):
eager's complex sums scale their second operand by ``alpha + 0i`` with a complex product
(``add``, ``sub``, ``rsub``, ``addcmul``, ``addcdiv``, ``lerp``, a real operand or a Python
number first made complex), products of two different complex values that overflow (each
product rounded on its own, not contracted), and bfloat16 ``x ** 0.5`` / ``x ** -0.5``
(eager's sqrt and rsqrt). Compared with eager as tests/test_edges_s20.py does: dtypes exactly,
NaN/infinity/signed-zero positions exactly, finite parts within 4 ulps of the larger part."""

from __future__ import annotations

import pytest
import torch

from tests.test_edges_s20 import _compiled, _same, _same_as_eager

NAN, INF = float("nan"), float("inf")
_DTYPES = [torch.complex64, torch.complex128]


def _pairs(dtype, parts=None):
    """Every pair of a grid of complex values (20736 of them: whole vectors of eager's loops,
    whose scalar tails compute otherwise for complex128)."""
    big = 3e38 if dtype == torch.complex64 else 1e308
    if parts is None:
        parts = [0.0, -0.0, 1.0, -1.5, big, -big, big / 3, 1e19, INF, -INF, NAN, 1e-30]
    p = torch.tensor(parts, dtype=torch.float64)
    z = torch.complex(p.repeat_interleave(len(p)), p.repeat(len(p))).to(dtype)
    return z.repeat_interleave(len(z)), z.repeat(len(z))


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_sums_scale_by_alpha_as_a_complex_product(dtype):
    """``a + b`` is ``a + (1 + 0i) * b`` in eager: 0 + (0 + inf i) was 0 + inf i (eager
    NaN + inf i, while (0 + inf i) + 0 is 0 + inf i), (-0 - 0i) - (0 + 0i) -0 - 0i (eager
    -0 + 0i); addcmul's (value t1) t2 and addcdiv's (value t1) / t2 were XLA's complex products
    and quotients (0 + 0 / (inf + inf i) was 0, eager NaN + NaN i)."""
    a, b = _pairs(dtype)

    def sums(a, b):
        return (
            a + b,
            b + a,
            a - b,
            torch.add(a, b, alpha=2.5),
            torch.add(a, b, alpha=2j),
            torch.sub(a, b, alpha=2j),
            torch.sub(a, b, alpha=-0.5),
            torch.rsub(a, b),
            torch.rsub(a, b, alpha=1.5),
            torch.addcmul(a, a, b),
            torch.addcmul(b, a, b, value=0.5j),
        )

    _same_as_eager(sums, a, b, ulps=4)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_addcdiv_special_values(dtype):
    """(Parts whose quotients stay normal: XLA's CPU flushes subnormal intermediates.)"""
    a, b = _pairs(dtype, [0.0, -0.0, 1.0, -1.5, 1e19, INF, -INF, NAN, 0.25])
    _same_as_eager(
        lambda a, b: (torch.addcdiv(a, a, b), torch.addcdiv(b, b, a, value=-0.5)), a, b, ulps=4
    )


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_with_real_numbers_and_tensors(dtype):
    """A Python number or a real tensor meeting a complex tensor is made complex (x + 0i)
    before eager's complex op: z + NaN is NaN + NaN i (was NaN + yi), z + inf inf + NaN i,
    inf - z inf + (0 - y)i, a real tensor's infinity likewise; zeros' signs follow."""
    a, b = _pairs(dtype, [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e19])
    r = b.real.clone()

    def fn(z, r):
        return (
            z + NAN,
            z + INF,
            z - INF,
            z + 0.0,
            z - 0.0,
            z + -0.0,
            z - -0.0,
            2.5 - z,
            INF - z,
            -0.0 - z,
            z + complex(INF, 0),
            z + 1j * INF,
            z + r,
            r + z,
            z - r,
            r - z,
            torch.add(z, r, alpha=2),
            torch.addcmul(z, r, z),
            z * r,
            z * INF,
            z * -0.0,
            z / 2.5,
            torch.where(z.real > 0, z, NAN),
            torch.where(z.real > 0, -0.0, z),
        )

    _same_as_eager(fn, a, r, ulps=4)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("n", [3, 13, 37, 1024])
def test_complex_lerp_vector_loop_and_tail(dtype, n):
    """Eager's vectorized lerp is ``coeff * (e - s) + base`` (``(w, s)`` where |w| < 0.5, else
    ``(w - 1, e)``), its scalar loop (the last ``numel % (2 W)`` elements: ``vectorized_loop``
    steps by two vectors) ``s + w (e - s)`` or ``e - (e - s)(1 - w)``: zeros' signs and NaN
    parts differ between them (XLA's lerp lost both: lerp(0, -0 - 1.5i, 0.75) was
    -0 - 1.125i, eager 0 - 1.125i). The tail was taken as ``numel % W`` (W counted on the
    CPU's register): right on AVX-512 CPUs, which run lerp's AVX2 build (64-byte blocks),
    and for these sizes only by luck; on AVX2 CPUs W was half the block (complex64, 37
    elements: lerp(1 - 1.5i, -0 + i, 1) at position 33 was -0 + i, eager's tail +0 + i).
    n = 13 tells the two apart on both."""
    a, b = _pairs(dtype, [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e19])
    idx = (torch.arange(n) * 37 + 5) % len(a)
    a, b = a[idx], b[idx]
    # (blocks of 8 weights on one side of |w| = 0.5: eager's complex64 AVX-512 loop tests
    # |w|^2 < 0.25 for each element on a neighbouring element's weight)
    small = torch.tensor([0.0, 0.25, -0.0, 0.1, -0.25, 0.0, 0.3, -0.0])
    w = torch.cat([small, torch.tensor([0.5, 0.75, 1.0, -0.5, 2.0, 1.0, 0.5, -1.0])] * n)[:n]
    wc = torch.complex(w, torch.where(w.abs() < 0.5, 0.1, 0.5) * w.sign()).to(dtype)

    def fn(a, b, w, wc):
        return (
            torch.lerp(a, b, 0.25),
            torch.lerp(a, b, 0.5),
            torch.lerp(a, b, 0.75),
            torch.lerp(a, b, 1.0),
            torch.lerp(a, b, w),
            torch.lerp(a, b, wc),
        )

    _same_as_eager(fn, a, b, w.to(dtype), wc, ulps=4)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_in_place_and_foreach_sums(dtype):
    """The in-place and ``_foreach`` forms (optimizer steps on complex parameters) take the
    same lowerings."""
    a, b = _pairs(dtype, [0.0, -0.0, 1.0, -1.5, INF, NAN, 1e19])

    def fn(a, b):
        x, y, z, u, v = (a.clone() for _ in range(5))
        x.add_(b)
        y.sub_(b, alpha=2j)
        z.addcmul_(a, b, value=0.5)
        u.lerp_(b, 0.75)
        v.mul_(b)
        return (
            x,
            y,
            z,
            u,
            v,
            *torch._foreach_add([a, b], [b, a], alpha=2),
            *torch._foreach_addcmul([a], [a], [b], value=3),
            *torch._foreach_lerp([a], [b], 0.75),
            *torch._foreach_sub([a], 2.5),
        )

    _same_as_eager(fn, a, b, ulps=4)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_products_that_overflow(dtype):
    """Eager's vectorized complex product rounds its four real products each on its own; XLA's
    CPU compiler contracted ``x u - y v`` into a fused multiply-add: (1 - 1.5i)(3e38 + 3e38i)
    was inf - 1.5e38i (eager inf - inf i). (Eager's complex128 scalar loop, the last
    ``numel % W`` elements, is contracted itself: not followed; the grid fills whole vectors.)"""
    a, b = _pairs(dtype)
    _same_as_eager(lambda a, b: (a * b, b * a, torch.mul(a, b[0])), a, b, ulps=4)


def test_complex_sum_gradients_unchanged():
    """The derivatives of the sums (ATen's backward graphs) are eager's for finite inputs."""
    torch.manual_seed(0)
    a, b, w = (torch.randn(37, dtype=torch.complex64, requires_grad=True) for _ in range(3))

    def fn(a, b, w):
        out = (
            torch.add(a, b, alpha=2j) * torch.addcmul(a, a, b, value=0.5)
            + torch.lerp(a, b, 0.75)
            + torch.lerp(a, b, w * 0.1)
            - torch.addcdiv(a, b, w + 3)
        )
        return torch.view_as_real(out).sum()

    ref = torch.autograd.grad(fn(a, b, w), (a, b, w))
    torch._dynamo.reset()
    out = torch.autograd.grad(_compiled(fn)(a, b, w), (a, b, w))
    for o, r in zip(out, ref):
        _same(o, r, ulps=8)


@pytest.mark.parametrize("size", [1, 64])
def test_bfloat16_square_roots_are_sqrt_and_rsqrt(size):
    """Eager's pow kernel computes bfloat16 ``x ** 0.5`` as sqrt(x) and ``x ** -0.5`` as
    rsqrt(x) (as for float32 and float64): -inf gives NaN, -0.0 gives -0.0 and -inf; ours
    followed pow (inf, 0.0, inf). float16 stays pow's, and a tensor exponent pow's."""
    vals = [-0.0, -INF, INF, 0.0, NAN, 4.0, -4.0, 2.0, 3e38, 1e-30]

    def fn(x):
        return x**0.5, x**-0.5, torch.pow(x, torch.tensor(0.5)), x ** torch.tensor(-0.5)

    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        # every value through one compiled program per dtype (only the values differ)
        torch._dynamo.reset()
        compiled = _compiled(fn)
        for v in vals:
            x = torch.full((size,), v).to(dtype)
            for o, r in zip(compiled(x.clone()), fn(x.clone()), strict=True):
                _same(o, r, ulps=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [3, 13, 37, 1024])
def test_real_lerp_vector_loop_and_tail(dtype, n):
    """Eager's real lerp has the same two loops (the vectorized one a fused multiply-add):
    lerp(0, -0, 1) is -0 there (``0 + 0 * -0``) and +0 in the scalar tail (``-0 - -0 * 0``);
    ours was the scalar formula everywhere."""
    p = torch.tensor([0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e-3])
    a, b = p.repeat_interleave(len(p)).repeat(n), p.repeat(len(p)).repeat(n)
    idx = (torch.arange(n) * 37 + 5) % len(a)
    a, b = a[idx].to(dtype), b[idx].to(dtype)
    w = torch.tensor([0.0, 0.25, -0.0, 0.5, 0.75, 1.0, 2.0, -0.5] * n)[:n].to(dtype)
    _same_as_eager(
        lambda a, b, w: (
            torch.lerp(a, b, 1.0),
            torch.lerp(a, b, 0.75),
            torch.lerp(a, b, 0.25),
            torch.lerp(a, b, w),
        ),
        a,
        b,
        w,
        ulps=1,
    )
