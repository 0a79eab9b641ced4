"""Scientific user programs under compile (session 30), against eager
(``scripts/probe_science30.py`` has the whole survey):

- Bessel and Airy functions near 0: the quadratures of ``modified_bessel_k0``/``k1`` (and the
  scaled ones), ``bessel_y0``/``y1`` and ``airy_ai`` were cut off where the integrand still
  mattered (``K_0(1e-30)`` was 20 for 69.2, ``Y_0(1e-30)`` -17.8 for -44.0, ``Ai(1e-30)``
  1e-11 for 0.355); ``airy_ai(nan)`` was ``Ai(-1)``, ``spherical_bessel_j0(inf)`` NaN for 0;
- gradients eager refuses or JAX has no rule for, for some arguments only:
  ``linalg.qr(mode='r')`` and ``mode='complete'`` of a tall matrix (eager's backward raises;
  ours returned a gradient), ``linalg.svd(full_matrices=True)`` of a non-square matrix (JAX
  has no rule: the whole graph fell back to eager, warning of a torch2xla bug);
- ``nansum``'s gradient at NaN elements (torch's decomposition gave 0 where eager's ``grad *
  ~isnan`` is NaN: ``nanmean`` of an all-NaN slice), ``logcumsumexp``'s of complex inputs
  (NaN: the real formula's split by sign).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla
from tests._util import leaf, no_fallback

_SPECIAL = (
    torch.special.modified_bessel_k0,
    torch.special.modified_bessel_k1,
    torch.special.scaled_modified_bessel_k0,
    torch.special.scaled_modified_bessel_k1,
    torch.special.bessel_y0,
    torch.special.bessel_y1,
    torch.special.airy_ai,
    torch.special.spherical_bessel_j0,
)
_EDGES = [0.0, -0.0, 1e-30, -1e-30, 1e-12, 3e-4, 1e-3, 0.5, -0.7, 1.0, 2.0, 2.5, 50.0]
_EDGES += [float("inf"), -float("inf"), float("nan")]


def _specials(x):
    return tuple(fn(x) for fn in _SPECIAL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bessel_airy_near_zero_and_nonfinite(dtype):
    x = torch.tensor(_EDGES, dtype=dtype)
    # a range of magnitudes down to float32's smallest normal
    small = torch.logspace(-37, 0, 60, dtype=dtype)
    x = torch.cat([x, small, -small])
    got = no_fallback(torch.compile(_specials, backend="xla"), x)
    want = _specials(x)
    for fn, g, w in zip(_SPECIAL, got, want):
        torch.testing.assert_close(g, w, rtol=2e-6, atol=0, equal_nan=True, msg=fn.__name__)


def _qr_r(a):
    return torch.linalg.qr(a, mode="r").R.sum()


def _qr_complete(a):
    q, r = torch.linalg.qr(a, mode="complete")
    return q.sum() + r.sum()


@pytest.mark.parametrize(
    "fn, shape, message",
    [
        (_qr_r, (4, 3), "The derivative of linalg.qr depends on Q"),
        (_qr_r, (3, 3), "The derivative of linalg.qr depends on Q"),
        (_qr_complete, (4, 3), "The QR decomposition is not differentiable when mode='complete'"),
    ],
)
def test_qr_backward_eager_refuses(fn, shape, message):
    with pytest.raises(RuntimeError, match=message):
        fn(leaf(*shape)).backward()
    a = leaf(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = torch.compile(fn, backend="xla")(a)
    torch.testing.assert_close(out, fn(a.detach()))
    with pytest.raises(RuntimeError, match=message):
        out.backward()
    assert a.grad is None


def test_qr_without_gradient_or_differentiable_stays_in_xla():
    # mode='r' without a gradient, and the modes eager differentiates, need no eager op
    a = leaf(4, 3, rg=False)
    got = no_fallback(torch.compile(_qr_r, backend="xla"), a)
    torch.testing.assert_close(got, _qr_r(a))

    def qrs(a):
        q, r = torch.linalg.qr(a)
        q2, r2 = torch.linalg.qr(a.mT, mode="complete")  # wide: eager differentiates it
        return (q * r.sum(0)).sum() + (q2.sum(0) * r2.sum(-1)).sum()

    a, b = leaf(4, 3), leaf(4, 3)
    no_fallback(torch.compile(qrs, backend="xla"), a).backward()
    qrs(b).backward()
    torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 3)])
def test_svd_full_matrices_gradient(shape):
    def f(a):
        u, s, vh = torch.linalg.svd(a)  # full_matrices=True
        return (u.abs() * 2).sum() + s.sum() + vh.abs().sum() * 3

    a, b = leaf(*shape), leaf(*shape)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(f, backend="xla")(a)
        out.backward()
    f(b).backward()
    torch.testing.assert_close(out, f(b.detach()))
    torch.testing.assert_close(a.grad, b.grad)
    # the svd runs in eager by design, the rest in XLA (before: the whole graph, as a bug)
    messages = [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    assert messages and all("full_matrices=True of a non-square" in m for m in messages), messages


def test_svd_full_matrices_square_stays_in_xla():
    def f(a):
        u, s, vh = torch.linalg.svd(a)
        return (u @ torch.diag_embed(s) @ vh).sum()

    a, b = leaf(3, 3), leaf(3, 3)
    no_fallback(torch.compile(f, backend="xla"), a).backward()
    f(b).backward()
    torch.testing.assert_close(a.grad, b.grad)


def _grads_match(fn, *inputs, backward=lambda out: out.real.sum()):
    """``fn`` compiled gives eager's outputs and the gradients of every input (NaN too)."""
    xs = [x.clone().requires_grad_() for x in inputs]
    ys = [x.clone().requires_grad_() for x in inputs]
    got = no_fallback(torch.compile(fn, backend="xla"), *xs)
    want = fn(*ys)
    torch.testing.assert_close(got, want, equal_nan=True)
    backward(got).backward()
    backward(want).backward()
    for x, y in zip(xs, ys):
        torch.testing.assert_close(x.grad, y.grad, equal_nan=True)


_NAN = float("nan")


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.nanmean(x, 0),  # an all-NaN column: eager's gradient there is NaN
        lambda x: torch.nanmean(x),
        lambda x: torch.nansum(x, 1, keepdim=True) * 2,
        lambda x: torch.nansum(x, dtype=torch.float64) * float("inf"),
        lambda x: torch.nansum(x.bfloat16(), 0).float(),
    ],
)
def test_nansum_gradient_at_nan(fn):
    _grads_match(fn, torch.tensor([[_NAN, 1.0, 2.0], [_NAN, _NAN, 3.0]]))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_logcumsumexp_complex_gradient(dtype):
    # the real formula's split by the gradient's sign gave NaN for complex gradients
    z = torch.view_as_complex(leaf(5, 2, rg=False)).to(dtype)
    z[1] = complex(-float("inf"), 0.0)

    def f(z):
        return torch.logcumsumexp(z, 0)

    _grads_match(f, z, backward=lambda out: (out * torch.arange(5.0)).real.sum())
