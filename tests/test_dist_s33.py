"""torch.distributions and sampling ops' derivatives against eager (session 33,
``scripts/probe_dist33.py``): compiled draws differ from eager's (docs/design.md,
"Randomness"), so each derivative is compared with eager's formula at the compiled draw.

- ``_standard_gamma`` (``Gamma``/``Chi2``/``StudentT``'s ``rsample``): eager's derivative is
  ``_standard_gamma_grad(alpha, draw)``, an approximation JAX's implicit gamma derivative
  differed from by 5e-5 relative.
- ``torch.normal(mean, std)``: eager's derivative in ``mean`` and ``std`` is zero, not the
  reparameterized ``1`` and ``z``.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributions as D

import torch2xla  # noqa: F401

# every branch of eager's approximation: small draws (Taylor), concentrations above 8 near
# and away from their mode (Rice), the rational function between
_ALPHAS = [0.01, 0.05, 0.5, 1.0, 3.0, 7.5, 8.5, 9.0, 30.0, 200.0]


def _xla(fn, **kw):
    torch._dynamo.reset()
    return torch.compile(fn, backend="xla", **kw)


def _assert_eagers(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == torch.float64:  # (jnp's log and pow are within an ulp of glibc's, which
        # the saddle-point terms' cancellation raises to a few)
        torch.testing.assert_close(got, want, rtol=1e-13, atol=0)
    else:
        assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_derivative_is_eagers_formula_at_the_draw(dtype):
    alpha = torch.tensor(_ALPHAS * 20, dtype=dtype, requires_grad=True)
    draw = _xla(torch._standard_gamma)(alpha)
    (grad,) = torch.autograd.grad(draw.sum(), alpha)
    assert (draw > 0).all()
    _assert_eagers(grad, torch._standard_gamma_grad(alpha.detach(), draw.detach()))


def test_standard_gamma_grad_op_is_eagers():
    alpha = torch.tensor(_ALPHAS).repeat_interleave(7)
    x = torch.tensor([1e-6, 0.3, 0.8, 1.5, 8.0, 9.2, 40.0]).repeat(len(_ALPHAS))
    for dtype in (torch.float32, torch.float64):
        a, v = alpha.to(dtype), x.to(dtype)
        got = _xla(torch._standard_gamma_grad, options={"strict": True})(a, v)
        _assert_eagers(got, torch._standard_gamma_grad(a, v))


def test_gamma_and_chi2_rsample_gradients_are_eagers():
    conc = torch.tensor(_ALPHAS, requires_grad=True)
    rate = torch.linspace(0.5, 3.0, len(_ALPHAS)).requires_grad_()
    df = torch.tensor(_ALPHAS, requires_grad=True)

    def fn(conc, rate, df):
        return D.Gamma(conc, rate).rsample(), D.Chi2(df).rsample()

    g, c = _xla(fn)(conc, rate, df)
    g_conc, g_rate, g_df = torch.autograd.grad(g.sum() + c.sum(), (conc, rate, df))
    std = g.detach() * rate.detach()  # (the standard gamma draw)
    want_conc = torch._standard_gamma_grad(conc.detach(), std) / rate.detach()
    torch.testing.assert_close(g_conc, want_conc, rtol=1.3e-6, atol=0)
    torch.testing.assert_close(g_rate, -g.detach() / rate.detach(), rtol=1.3e-6, atol=0)
    # Chi2(df) = Gamma(df / 2, 1 / 2)
    want_df = torch._standard_gamma_grad(df.detach() / 2, c.detach() / 2)
    torch.testing.assert_close(g_df, want_df, rtol=1.3e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_normal_derivative_in_mean_and_std_is_zero(dtype):
    def fn(mean, std):
        return torch.normal(mean, std), torch.normal(mean, 2.0), torch.normal(0.5, std)

    def grads(f):
        mean = torch.tensor([0.3, -1.0, 2.0], dtype=dtype, requires_grad=True)
        std = torch.tensor([0.5, 1.0, 3.0], dtype=dtype, requires_grad=True)
        outs = f(mean, std)
        sum(o.pow(2).sum() for o in outs).backward()
        return [o.requires_grad for o in outs], mean.grad, std.grad

    torch.manual_seed(0)
    flags, g_mean, g_std = grads(_xla(fn))
    want_flags, want_mean, want_std = grads(fn)
    assert flags == want_flags
    for got, want in ((g_mean, want_mean), (g_std, want_std)):
        assert want is not None and got is not None
        assert got.dtype == want.dtype and torch.equal(got, want)  # (zeros, not None)
