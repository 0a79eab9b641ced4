"""Complex elementary functions at their special values, round 2 (session 20): the trigonometric
and hyperbolic functions and their inverses, expm1, log1p and exp2 (glibc's csin & co., which
follow C99 Annex G, and c10::complex's formulas), products that overflow in a square, division
by a divisor past the inverse of the least normal float, and eager's derivatives there.
Compared with eager PyTorch on the CPU as tests/test_edges_s20.py does (dtypes exactly,
NaN/infinity/signed-zero positions exactly, finite parts within 4 ulps of the larger part);
gradients: equal where eager's are finite (8 ulps, or no further from complex128's than
eager's complex64 gradient), never NaN where eager's is not."""

from __future__ import annotations

import pytest
import torch

from tests._util import clone_args
from tests.test_edges_s20 import _compiled, _same, _same_as_eager

NAN, INF = float("nan"), float("inf")
_PARTS = [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e30, 0.25, 100.0, 0.5]
_DTYPES = [torch.complex64, torch.complex128]


def _grid(dtype):
    re = torch.tensor(_PARTS).repeat_interleave(len(_PARTS))
    im = torch.tensor(_PARTS).repeat(len(_PARTS))
    return torch.complex(re, im).to(dtype)


_OPS = {
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "expm1": torch.expm1,
    "log1p": torch.log1p,
    "exp2": torch.exp2,
    "exp": torch.exp,
    "sqrt": torch.sqrt,
    "tanh": torch.tanh,
    "square": lambda z: (z * z, z**2, z**3, torch.square(z)),
}


def _many(*zs):
    out = []
    for f, z in zip(_OPS.values(), zs):
        r = f(z)
        out.extend(r if isinstance(r, tuple) else (r,))
    return tuple(out)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_functions_special_values_are_eagers(dtype):
    """XLA's gave NaN for most non-finite parts (sinh(0 + inf i) is 0 + NaN i in eager, atan(NaN
    + 0i) NaN + 0i, acos(0 + NaN i) pi/2 + NaN i), lost zeros' signs (sin(-0 + 1i) was
    +0 + 1.18i, atan(-0 + inf i) +pi/2), and expm1(inf + 0i) was inf + 0i (eager: inf * 0)."""
    z = _grid(dtype)
    _same_as_eager(_many, *[z] * len(_OPS), ulps=4)


def _finite_grads(out, ref, ref_wide):
    o, r, w = (torch.view_as_real(t) for t in (out, ref, ref_wide))
    assert not (o.isnan() & ~r.isnan()).any(), (out, ref)
    fin = r.isfinite().all(-1, keepdim=True).expand_as(r)
    scale = r.double().abs().nan_to_num(0.0, 0.0, 0.0).amax(-1, keepdim=True).expand_as(r)
    err = (o.double() - r.double()).abs()
    # (where eager's complex64 gradient cancels, ours may be nearer complex128's)
    closer = (o.double() - w.double()).abs() <= (r.double() - w.double()).abs() + err / 4
    ok = (err <= 8 * torch.finfo(r.dtype).eps * scale) | closer
    assert ok[fin].all(), (out[~ok.all(-1)], ref[~ok.all(-1)])


@pytest.mark.parametrize("dtype", [torch.complex64])  # (complex128's: scripts/probe_complex.py)
def test_complex_functions_gradients_are_eagers(dtype):
    """Eager's derivative formulas (cos(z)^* for sin, (1 + z^2)^-1/2 for asinh, exp's result
    for exp...): where they are finite, ours are equal; exp's at -inf + inf i and a square's at
    1e30 + 1e30i were NaN and 0 through the special values' selects."""
    z0 = _grid(dtype)
    finite = z0[torch.view_as_real(z0).isfinite().all(-1)]

    def grads(fn, z, wide=False):
        zs = [z.to(torch.complex128 if wide else dtype).requires_grad_() for _ in _OPS]
        outs = fn(*zs)
        return torch.autograd.grad(outs, zs, [torch.ones_like(o) for o in outs])

    ref = grads(_many, finite)
    ref_wide = grads(_many, finite, wide=True)
    torch._dynamo.reset()
    out = grads(_compiled(_many), finite)
    for name, o, r, w in zip(_OPS, out, ref, ref_wide):
        assert o.dtype == r.dtype, name
        _finite_grads(o, r, w.to(dtype))


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_square_overflowing_in_both_parts(dtype):
    """XLA's CPU compiler contracts x*x - y*y into a fused multiply-add: (1e30 + 1e30i)**2 in
    complex64 was -inf + inf i (eager: inf - inf = NaN), (1.9e19 + 1.8e19i)**2 finite (eager:
    the square of 1.9e19 overflows, inf). (Eager's vectorized loop rounds each product; its
    scalar loop, which takes the last elements of a tensor that does not fill whole vectors,
    is compiled with contraction too: 64 elements fill them for either dtype.)"""
    big = 1e30 if dtype == torch.complex64 else 1e300
    edge = 1.9e19 if dtype == torch.complex64 else 1.2e154
    z = torch.tensor(
        [complex(big, big), complex(-big, big), complex(edge, edge * 0.95), complex(big, INF)],
        dtype=dtype,
    ).repeat(16)
    _same_as_eager(lambda z: (z * z, z**2, z**3, torch.square(z), z**-2), z, ulps=4)


def test_complex_functions_without_intermediate_overflow_or_underflow():
    """cosh(710.6) overflows float64 where cosh(710.6) cos(1) does not (eager: finite); XLA's
    atanh(1 + 1e-30i) underflowed to inf (eager: 34.9 + 0.79i), its complex64 acos(1 + 2e-38i)
    lost the imaginary part; (1e-30 + 3e38i) / 3e38i was 0 (1 / 3e38 is subnormal, which XLA's
    CPU flushes to zero)."""
    c128 = torch.tensor(
        [710.6 + 1j, -720 + 1e-30j, 1 + 1e-30j, -1 + 1e-300j], dtype=torch.complex128
    )
    _same_as_eager(
        lambda z: (z.sinh(), z.cosh(), (z * 1j).sin(), (z * 1j).cos(), z.atanh(), (z * 1j).atan()),
        c128,
        ulps=4,
    )
    c64 = torch.tensor(
        [1 + 2e-38j, 1 + 1e-30j, 1e-30 + 3e38j, -1e-7 + 3e38j], dtype=torch.complex64
    )
    _same_as_eager(
        lambda z: (z.acos(), z.acosh(), z.atanh(), z.log1p(), z / (z.imag * 1j), z.tan()),
        c64,
        ulps=4,
    )


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_log1p_near_zero_keeps_eagers_rounding(dtype):
    """Eager's log1p is log(u) z / (u - 1), u = z + 1 rounded: XLA folded (z + 1) - 1 to z."""
    z = torch.tensor(
        [1e-30 + 1e-30j, -1e-7 + 0j, -1e-7 - 0j, 1e-3 - 1e-3j, -0.5 + 1e-12j], dtype=dtype
    )
    torch._dynamo.reset()
    _same(_compiled(torch.log1p)(*clone_args((z,))), torch.log1p(z), ulps=4)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_complex_pow_general_exponents_special_values(dtype):
    """Eager's pow by an exponent it has no kernel of its own for is glibc's cpow, exp(w log z)
    with C's complex product (its infinities recovered from NaN + NaN i): XLA's gave NaN for
    0 ** (0.5 + i) (eager 0 - 0i) and for an infinite base; z ** 0 is 1 and z ** 1 z.
    (Finite values: exp(w log z) amplifies the rounding of w log z; both are compared with
    complex128's, scripts/probe_complex.py.)"""
    z = _grid(dtype)
    special = ~torch.view_as_real(z).isfinite().all(-1) | (z == 0)
    z = torch.cat([z[special], torch.tensor([1.5 - 2j, -0.25 + 0.5j], dtype=dtype)])

    def fn(z):
        return (z ** (0.5 + 1j), z**2.5, z**-3, z**4, 2.0**z, z**0, z**1, torch.pow(z, z.flip(0)))

    _same_as_eager(fn, z, ulps=4)
