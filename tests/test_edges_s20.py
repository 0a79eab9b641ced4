"""Values at the edges of each dtype found by scripts/probe_edges.py (session 20): complex special
values (infinities, NaN, signed zeros, branch cuts), histogram bins at their edges, nan_to_num's
replacements past a half-precision range, nextafter at the ends of a float range. Compared with
eager PyTorch on the CPU: dtypes exactly, NaN/infinity/signed-zero positions exactly, integers
and counts exactly, finite floats bit for bit where eager's are exact and else within 4 ulps of
their dtype (of a complex number's larger part) (XLA's and glibc's elementary functions are each within about an ulp of the float64
value; eager's own complex64 and complex128 results differ from it by that much)."""

from __future__ import annotations

import decimal

import pytest
import torch

from tests._util import clone_args

NAN, INF = float("nan"), float("inf")


def _compiled(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _same(out, ref, ulps=0, scale=None):
    """``scale``: the magnitude the ulps are of, element by element (float64), where the error
    bound of the computation is not relative to the result (a normalization's x - mean)."""
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out.dtype, ref.dtype)
    scale = ref.abs().double() if scale is None else scale
    if out.is_complex():  # (complex functions are accurate in norm: ulps of the larger part)
        out, ref = torch.view_as_real(out), torch.view_as_real(ref)
        parts = ref.double().abs().nan_to_num(0.0, 0.0, 0.0)
        scale = parts.amax(-1, keepdim=True).expand_as(parts)
    if not out.is_floating_point():
        assert torch.equal(out, ref), (out, ref)
        return
    assert torch.equal(out.isnan(), ref.isnan()), (out, ref)
    fin = ref.isfinite()
    assert torch.equal(out[~fin & ~ref.isnan()], ref[~fin & ~ref.isnan()]), (out, ref)
    zero = (ref == 0) & (out == 0)  # (a zero against a nonzero is the values' check below)
    assert torch.equal(out[zero].signbit(), ref[zero].signbit()), (out, ref)
    a, b = out[fin].double(), ref[fin].double()
    tol = ulps * torch.finfo(ref.dtype).eps * scale[fin]
    assert ((a - b).abs() <= tol).all(), (out, ref)


def _same_as_eager(fn, *args, ulps=0, scales=None):
    torch._dynamo.reset()
    ref = fn(*clone_args(args))
    out = _compiled(fn)(*clone_args(args))
    outs, refs = (
        (out if isinstance(out, tuple) else (out,)),
        (ref if isinstance(ref, tuple) else (ref,)),
    )
    for o, r, scale in zip(outs, refs, scales or (None,) * len(refs)):
        _same(o, r, ulps, scale)


# --- complex special values --------------------------------------------------------------------
# XLA's complex ops gave NaN for most non-finite parts (abs(inf + NaN i) is inf in eager, exp of
# inf + inf i is inf + NaN i, 1 / (-0 + 0i) is inf + NaN i, (1 + 2i) / 0 is inf + inf i), lost
# zeros' signs, and put sqrt's branch cut on the wrong side of a negative zero: every special
# value is now eager's (std::complex functions, c10::complex's division), _complex.py.
_PARTS = [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e30, 0.25]


def _grid(dtype):
    re = torch.tensor(_PARTS).repeat_interleave(len(_PARTS))
    im = torch.tensor(_PARTS).repeat(len(_PARTS))
    return torch.complex(re, im).to(dtype)


_COMPLEX_OPS = {
    "abs": torch.abs,
    "sgn": torch.sgn,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "exp": torch.exp,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "reciprocal": torch.reciprocal,
    "div": lambda z: z / z.flip(0),
    "div_real_zero": lambda z: (z / 0, z / torch.tensor(-0.0)),
    "pow": lambda z: (z**-1, z**0.5, z**-0.5, z**-2),
}


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("name", sorted(_COMPLEX_OPS))
def test_complex_special_values_are_eagers(name, dtype):
    _same_as_eager(_COMPLEX_OPS[name], _grid(dtype), ulps=4)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_sqrt_of_a_conjugate_takes_the_lower_root(dtype):
    """sqrt(-1.5 - 0i) is -1.22i in eager (sqrt(conj z) = conj sqrt z): a conjugated real
    number, an FFT's negative zero, lands on the other side of the branch cut."""
    x = torch.tensor([-1.5, -4.0, 2.0, -0.0], dtype=torch.float64).to(dtype)
    _same_as_eager(lambda z: (z.conj().sqrt(), torch.sqrt(z * -1), z.conj() ** 0.5), x, ulps=4)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_division_gradients_by_a_pure_imaginary_are_finite(dtype):
    """Eager's division scales by the divisor's larger part: the branch not taken (a zero real
    part) must not leak NaN into the gradient."""
    a = torch.tensor([1 + 2j, -3 + 0.5j, 2 - 1j], dtype=dtype, requires_grad=True)
    b = torch.tensor([2j, 3 + 0j, -0.5 + 4j], dtype=dtype, requires_grad=True)

    def f(a, b):
        return ((a / b) * (a / b).conj()).real.sum() + torch.sgn(a / b).real.sum()

    ref = torch.autograd.grad(f(a, b), (a, b))
    torch._dynamo.reset()
    out = torch.autograd.grad(_compiled(f)(a, b), (a, b))
    for o, r in zip(out, ref):
        assert torch.allclose(o, r, rtol=1e-5, atol=1e-6), (o, r)


# --- histograms at bin edges ------------------------------------------------------------------
_HX = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0000001, -0.0, 0.30000001]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize(
    "fn",
    [
        # min == max (not only 0 == 0): eager bins the data's range
        lambda x: torch.histc(x, bins=4, min=1, max=1),
        lambda x: torch.histc(x[:1], bins=4, min=3, max=3),
        # values on a bin's edge: eager's truncated interpolation, each step rounded in the
        # input's dtype, divided (XLA multiplied by the reciprocal, a bin off)
        lambda x: torch.histc(x, bins=3, min=0.3, max=0.6),
        lambda x: torch.histc(x, bins=5, min=-1, max=0.5),
        lambda x: torch.histc(x, bins=10, min=0, max=1),
        lambda x: torch.histogram(x.float(), bins=7, range=(0.0, 0.7)),
    ],
)
def test_histc_bins_at_their_edges_are_eagers(fn, dtype):
    _same_as_eager(fn, torch.tensor(_HX, dtype=torch.float64).to(dtype))


# --- nan_to_num's replacements are cast -------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.complex64])
def test_nan_to_num_replacements_past_the_range_are_infinite(dtype):
    x = torch.tensor([NAN, INF, -INF, 1.0, -0.0]).to(dtype)
    if dtype.is_complex:
        x = torch.complex(x.real, x.real.flip(0))
    _same_as_eager(
        lambda t: (
            torch.nan_to_num(t, nan=1e10),
            torch.nan_to_num(t, posinf=1e39, neginf=-1e39),
            torch.nan_to_num(t, nan=-0.0),
            torch.nan_to_num(t),
        ),
        x,
    )


# --- nextafter at the ends of the range -------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_nextafter_from_infinity_and_past_the_largest_float(dtype):
    big = torch.finfo(dtype).max
    a = torch.tensor([INF, -INF, big, -big, 1.0, NAN, 2.0, -0.0, 1.0], dtype=dtype)
    b = torch.tensor([0.0, 0.0, INF, -INF, 2.0, 1.0, 2.0, 0.0, -INF], dtype=dtype)
    _same_as_eager(torch.nextafter, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
@pytest.mark.parametrize("exponent", [0.5, -0.5])
def test_pow_by_a_half_is_eager_root(dtype, exponent):
    # eager's kernel takes sqrt and 1 / sqrt for these exponents: -0.0 ** 0.5 is -0.0,
    # -0.0 ** -0.5 is -inf, and the reciprocal root is rounded twice. (NOTE: half-precision
    # bases go another way in eager, not matched bit for bit yet: -0.0 ** 0.5 is +0.0 there.)
    values = [0.0, 1.0, 2.0, 3.0, 7.0, 10.0, 1e4, float("inf"), float("nan")]
    if dtype.is_floating_point:
        values += [-0.0, -1.0, 0.3, 1e-3]
    x = torch.tensor(values).to(dtype)
    got = torch.compile(lambda t: t**exponent, backend="xla")(x)
    want = x**exponent
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan())
    real = ~want.isnan()
    assert torch.equal(got[real].signbit(), want[real].signbit())
    assert torch.equal(got.isinf(), want.isinf())
    # eager's vectorized sqrt is not always correctly rounded (AVX-512 lanes: 1 ulp off in
    # ~15% of float32 roots; its tail loop is): each finite value within one ulp of eager's
    # and of the root computed exactly (decimal, 40 digits)
    finite = want.isfinite()
    g, w = got[finite].double(), want[finite].double()
    ulp = (
        torch.nextafter(want[finite].abs(), torch.tensor(INF, dtype=want.dtype))
        - want[finite].abs()
    ).double()
    assert ((g - w).abs() <= ulp).all(), (g, w)
    ctx = decimal.Context(prec=40)
    exact = [
        float(ctx.power(decimal.Decimal(float(v)), decimal.Decimal(exponent)))
        for v in x[finite].double()
    ]
    assert ((g - torch.tensor(exact, dtype=torch.float64)).abs() <= ulp).all(), (g, exact)
