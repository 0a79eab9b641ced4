"""FFT, signal processing and complex tensors as users write them (session 33,
``scripts/probe_fft33.py`` has the whole survey), against eager:

- outputs eager returns as lazy conjugate or negative views of an intermediate
  (``torch.fft.ihfft``, ``ifft``/``ifftn`` of a real input, ``(-z).conj()``,
  ``y.conj().imag``) came back resolved: ``is_conj()``/``is_neg()`` False, and
  ``torch.view_as_real`` of them ran where eager raises;
- casts of complex tensors to real dtypes (``z.to(torch.int8)``, ``z.long()``, ``.float()``
  of complex128) were jnp's ``astype``: integers saturated (eager wraps, as from the real
  part's float), NaN gave 0 (eager the lowest integer), subnormal real parts were flushed, and
  JAX warned that the cast "will soon raise a ValueError"; complex64 <-> complex128 flushed
  subnormal parts.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla  # noqa: F401
from tests._util import clone_args, leaf, strict_compiled


def _cx(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.complex64)


def _same_output(out, ref):
    assert (out.dtype, out.shape, out.stride()) == (ref.dtype, ref.shape, ref.stride())
    assert (out.is_conj(), out.is_neg()) == (ref.is_conj(), ref.is_neg())
    assert out.requires_grad == ref.requires_grad
    assert (out._base is None) == (ref._base is None)
    torch.testing.assert_close(out.resolve_conj().resolve_neg(), ref.resolve_conj().resolve_neg())


_LAZY = {
    "ihfft": (lambda x: torch.fft.ihfft(x, n=7, norm="ortho"), lambda: leaf(2, 6, rg=False)),
    "ifft_real": (lambda x: torch.fft.ifft(x), lambda: leaf(5, rg=False)),
    "ihfftn": (lambda x: torch.fft.ihfftn(x, s=(5,), dim=(0,)), lambda: leaf(6, 2, rg=False)),
    "conj_of_neg": (lambda z: (-z).conj(), lambda: _cx(4)),
    "conj_transposed": (lambda z: (z * 2).t().conj(), lambda: _cx(3, 4)),
    "conj_expanded": (lambda z: (z.sum(0) * 2).expand(3, 4).conj(), lambda: _cx(3, 4)),
    "conj_0d": (lambda z: z.sum().conj(), lambda: _cx(4)),
    "neg_imag_0d": (lambda z: (z.sum() * 2).conj().imag, lambda: _cx(4)),
}


# torch 2.11's eager ihfftn along a leading dim returns its result column-major (strides
# (1, 3) for the (3, 2) result, H200 machine, session 33) where its fake kernel, which our
# output's layout follows, says row-major; torch 2.13's eager is row-major. Not fixed: the
# output layouts follow the fake kernels (``runtime/_output_layout.OutputLayout``).
_FAKE_STRIDES_DIFFER = pytest.mark.xfail(
    tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13),
    reason="torch < 2.13: eager ihfftn's strides are not its fake kernel's",
    strict=False,
)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=_FAKE_STRIDES_DIFFER) if n == "ihfftn" else n for n in _LAZY],
)
def test_lazy_conjugate_and_negative_outputs(name, requires_grad):
    fn, make = _LAZY[name]
    torch._dynamo.reset()
    x = make()
    a, b = x.clone().requires_grad_(requires_grad), x.clone().requires_grad_(requires_grad)
    ref, out = fn(a), strict_compiled(fn)(b)
    _same_output(out, ref)
    if requires_grad:
        loss = lambda t: (t.real if t.is_complex() else t).sum() * 3
        loss(ref).backward()
        loss(out).backward()
        assert (b.grad.dtype, b.grad.shape) == (a.grad.dtype, a.grad.shape)
        torch.testing.assert_close(b.grad.resolve_conj(), a.grad.resolve_conj())


def test_view_as_real_of_a_lazy_conjugate_output_raises_as_eager():
    x = leaf(8, rg=False)
    out = torch.compile(torch.fft.ihfft, backend="xla")(x)
    with pytest.raises(RuntimeError, match="view_as_real doesn't work on unresolved conj"):
        torch.view_as_real(out)
    torch.testing.assert_close(
        torch.view_as_real(out.resolve_conj()),
        torch.view_as_real(torch.fft.ihfft(x).resolve_conj()),
    )


_PARTS = [1 + 2j, 0 + 1j, -3.7, 0, 1e10 + 1j, complex("nan"), 2.5 - 1j, 300.5 + 1j, 1e-40]
_PARTS += [-200.25 - 3j, complex("inf"), -1e-41 + 1e-40j]
_REAL = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
_INT = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("source", [torch.complex64, torch.complex128])
def test_complex_casts_to_every_dtype(source):
    """One program casts to every real, integer and complex dtype; no warning of JAX's."""
    z = torch.tensor(_PARTS, dtype=torch.complex128).to(source)
    targets = [*_REAL, *_INT, torch.complex64, torch.complex128]

    def casts(z):
        return tuple(z.to(dt) for dt in targets)

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (eager's own: "Casting complex values to real ...")
        ref = casts(z)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = strict_compiled(casts)(z)
    assert not [w for w in caught if "jax" in w.filename], [str(w.message) for w in caught]
    for dt, o, r in zip(targets, out, ref):
        assert o.dtype == r.dtype == dt
        if dt.is_complex:
            o, r = torch.view_as_real(o), torch.view_as_real(r)
        if o.is_floating_point():  # (NaN where NaN, and infinities, subnormals, bit for bit)
            assert torch.equal(o.isnan(), r.isnan()), (dt, o, r)
            o, r = (
                o.nan_to_num(0.0, float("inf"), -float("inf")),
                r.nan_to_num(0.0, float("inf"), -float("inf")),
            )
        assert torch.equal(o, r), (dt, o, r)


def test_complex_cast_gradients():
    z = _cx(5)

    def fn(z):
        return z.to(torch.float64) * 2 + z.to(torch.complex128).imag

    torch._dynamo.reset()
    a, b = (t.requires_grad_() for t in clone_args((z, z)))
    fn(a).sum().backward()
    strict_compiled(fn)(b).sum().backward()
    assert b.grad.dtype == a.grad.dtype
    torch.testing.assert_close(b.grad, a.grad)
