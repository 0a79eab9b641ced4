"""Random ops and torch.distributions against eager (session 23, ``scripts/probe_rng.py``).

Compiled draws differ from torch's generator (docs/design.md, "Randomness"); everything else
is eager's: dtypes, shapes, support, statistics, errors, reproducibility. Each class below was
wrong before:

- half-precision draws were made in float16/bfloat16: ``randn`` lost its tails (no |z| beyond
  3.2 in float16, 2.9 in bfloat16), ``rand`` had 1024/128 distinct values, and a Bernoulli of a
  half-precision ``p`` drew 1 with probability at least 1/1024 (1/128) whatever ``p``;
- ``multinomial`` of float64 weights took their log in float32 (1e-300 became a zero weight);
- complex ``rand``/``rand_like`` fell back to eager ("a bug in torch2xla");
- ``_sample_dirichlet`` (Beta, Dirichlet, LKJCholesky) had no lowering, and gamma draws could be
  0 where eager's are at least the smallest normal float;
- constant arguments eager refuses ran: ``randint``/``randint_like`` bounds outside the dtype,
  ``uniform_``'s bounds and range, ``multinomial`` of more samples than categories without
  replacement (duplicates, silently), ``randperm`` beyond what float16/float32 hold.

Statistics are tested with fixed seeds against their exact values, within 5 standard errors
(a wrong distribution above is off by 10 or more).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributions as D
import torch.nn.functional as F

import torch2xla

HALF = [torch.float16, torch.bfloat16]
N = 200_000
M = 50_000  # (gamma draws: slower)


def _xla(fn):
    """``fn`` compiled whole into XLA (strict: no op may fall back to eager)."""
    torch._dynamo.reset()
    return torch.compile(fn, backend="xla", options={"strict": True}, fullgraph=True)


def _near(got: float, want: float, se: float, k: float = 5.0) -> None:
    assert abs(got - want) <= k * se, (got, want, se)


def _rate_near(hits: int, n: int, p: float) -> None:
    """``hits`` of ``n`` Bernoulli(p) trials within 5 standard errors of ``n p``."""
    _near(hits, n * p, math.sqrt(n * p * (1 - p)))


def _assert_raises_as_eager(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*[a.clone() for a in args])
    eager = info.value
    with pytest.raises(type(eager)) as info:
        _xla(fn)(*[a.clone() for a in args])
    assert isinstance(info.value, torch2xla.OpError), (type(info.value), info.value)
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))


# -- half precision draws ---------------------------------------------------------------------------
_TAIL = math.erfc(3.5 / math.sqrt(2))  # P(|Z| > 3.5)

_NORMALS = {
    "randn": lambda x: torch.randn(N, dtype=x.dtype) + x,
    "randn_like": lambda x: torch.randn_like(x.expand(N)),
    "normal_": lambda x: torch.empty(N, dtype=x.dtype).normal_() + x,
    "normal_tensor": lambda x: torch.normal(x.expand(N), 1.0),
    "normal_float_float": lambda x: torch.normal(0.0, 1.0, size=(N,), dtype=x.dtype) + x,
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_precision_normal_keeps_its_tails(dtype):
    torch.manual_seed(0)
    draws = _xla(lambda x: [f(x) for f in _NORMALS.values()])(torch.zeros(1, dtype=dtype))
    for name, z in zip(_NORMALS, draws):
        assert z.dtype == dtype and z.shape == (N,), name
        z = z.double()
        _near(z.mean().item(), 0.0, 1 / math.sqrt(N))
        _near(z.var().item(), 1.0, math.sqrt(2 / N))
        _rate_near(int((z.abs() > 3.5).sum()), N, _TAIL)


_UNIFORMS = {
    "rand": lambda x: torch.rand(N, dtype=x.dtype) + x,
    "rand_like": lambda x: torch.rand_like(x.expand(N)),
    "uniform_": lambda x: torch.empty(N, dtype=x.dtype).uniform_() + x,
}


@pytest.mark.parametrize("dtype", [*HALF, torch.float32, torch.float64], ids=str)
def test_rand_is_in_zero_one_with_eagers_resolution(dtype):
    torch.manual_seed(1)
    draws = _xla(lambda x: [f(x) for f in _UNIFORMS.values()])(torch.zeros(1, dtype=dtype))
    for name, u in zip(_UNIFORMS, draws):
        assert u.dtype == dtype and u.shape == (N,), name
        assert u.min() >= 0 and u.max() < 1  # (never 1.0: a float32 draw rounded up in float16)
        u = u.double()
        _near(u.mean().item(), 0.5, math.sqrt(1 / 12 / N))
        _near(u.var().item(), 1 / 12, math.sqrt(1 / 180 / N))  # (var of (u - 1/2)^2: 1/180)
        # small values as often as their width: drawn in float16, [0, 2**-11) held only 0,
        # drawn with probability 2**-10
        t = 2.0**-11 if dtype != torch.bfloat16 else 2.0**-8
        _rate_near(int((u < t).sum()), N, t)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_precision_uniform_range_stays_below_to(dtype):
    torch.manual_seed(2)
    u = _xla(lambda x: (x * 0).uniform_(-3.0, 3.0))(torch.zeros(N, dtype=dtype))
    assert u.dtype == dtype and u.min() >= -3 and u.max() < 3
    _near(u.double().mean().item(), 0.0, math.sqrt(3 / N))


@pytest.mark.parametrize(
    "dtype, p", [(torch.float16, 1e-4), (torch.bfloat16, 1e-3), (torch.float64, 1e-6)], ids=str
)
def test_bernoulli_of_small_probabilities(dtype, p):
    n = 1_000_000
    probs = torch.full((n,), p, dtype=dtype)
    torch.manual_seed(3)
    draws = _xla(torch.bernoulli)(probs)
    assert draws.dtype == dtype
    # (p as the dtype holds it)
    _rate_near(int(draws.sum()), n, float(probs[0]))
    inplace = _xla(lambda x, q: x.bernoulli_(q))(torch.zeros(n), probs)
    _rate_near(int(inplace.sum()), n, float(probs[0]))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_draws_lower_with_eagers_parts(dtype):
    def draw(x):
        return (
            torch.rand(N, dtype=dtype),
            torch.rand_like(x),
            torch.randn(N, dtype=dtype),
            (torch.randn_like(x)),
        )

    torch.manual_seed(4)
    draws = _xla(draw)(torch.zeros(N, dtype=dtype))
    for i, z in enumerate(draws):
        assert z.dtype == dtype and z.shape == (N,)
        for part in (z.real.double(), z.imag.double()):
            if i < 2:  # (rand: each part uniform in [0, 1))
                assert part.min() >= 0 and part.max() < 1
                _near(part.mean().item(), 0.5, math.sqrt(1 / 12 / N))
            else:  # (randn: each part of variance 1/2, as eager)
                _near(part.mean().item(), 0.0, math.sqrt(0.5 / N))
                _near(part.var().item(), 0.5, 0.5 * math.sqrt(2 / N))


# -- multinomial --------------------------------------------------------------------------------------
def test_multinomial_float64_weights_below_float32s_range():
    torch.manual_seed(5)
    w = torch.tensor([1e-300, 3e-300], dtype=torch.float64)
    draws = _xla(lambda p: torch.multinomial(p, N, replacement=True))(w)
    _rate_near(int((draws == 1).sum()), N, 0.75)


def test_multinomial_2d_frequencies_and_zero_categories():
    w = torch.tensor([[0.0, 1.0, 3.0, 0.0], [2.0, 0.0, 2.0, 4.0]])
    torch.manual_seed(6)
    draws = _xla(lambda p: torch.multinomial(p, N, replacement=True))(w)
    assert draws.shape == (2, N) and draws.dtype == torch.int64
    for row, weights in zip(draws, w):
        probs = weights / weights.sum()
        for k, p in enumerate(probs.tolist()):
            if p == 0:
                assert not (row == k).any()
            else:
                _rate_near(int((row == k).sum()), N, p)


def test_multinomial_without_replacement_draws_distinct_nonzero_categories():
    w = torch.tensor([0.0, 1.0, 3.0, 0.0, 2.0]).expand(20_000, 5)
    torch.manual_seed(7)
    draws = _xla(lambda p: torch.multinomial(p, 3))(w)
    assert draws.shape == (20_000, 3)
    assert torch.equal(draws.sort(-1).values, torch.tensor([1, 2, 4]).expand(20_000, 3))
    # the first draw in proportion to the weights
    _rate_near(int((draws[:, 0] == 2).sum()), 20_000, 0.5)


@pytest.mark.parametrize("shape", [(2,), (3, 2)], ids=["1d", "2d"])
def test_multinomial_more_samples_than_categories_raises(shape):
    _assert_raises_as_eager(lambda p: torch.multinomial(p, 3), torch.ones(shape))


# -- constant arguments eager refuses ---------------------------------------------------------------
_BOUNDS = [
    ("randint_uint8_high", lambda x: torch.randint(0, 257, (3,), dtype=torch.uint8) + x),
    ("randint_uint8_only_high", lambda x: torch.randint(300, (3,), dtype=torch.uint8) + x),
    ("randint_int8_low", lambda x: torch.randint(-200, 0, (3,), dtype=torch.int8) + x),
    ("randint_bool", lambda x: torch.randint(0, 3, (3,), dtype=torch.bool) | (x > 0)),
    ("randint_int32", lambda x: torch.randint(0, 2**31 + 1, (3,), dtype=torch.int32) + x),
    ("randint_half", lambda x: torch.randint(0, 70_000, (3,), dtype=torch.float16) + x),
    ("randint_like_uint8", lambda x: torch.randint_like(x.to(torch.uint8), 257)),
    ("randint_like_int16", lambda x: torch.randint_like(x.to(torch.int16), -40_000, 0)),
    ("uniform_half_to", lambda x: x.half().uniform_(0, 70_000)),
    ("uniform_inf", lambda x: (x * 1).uniform_(0, float("inf"))),
    ("uniform_nan", lambda x: (x * 1).uniform_(float("nan"), 1)),
    ("uniform_range_overflow", lambda x: (x * 1).uniform_(-3e38, 3e38)),
    ("uniform_bfloat16_range", lambda x: x.bfloat16().uniform_(-3e38, 3e38)),
    ("uniform_complex_bound", lambda x: x.cfloat().uniform_(0, float("inf"))),
    ("randperm_half", lambda x: torch.randperm(2050, dtype=torch.float16) + x[:1].half()),
]


@pytest.mark.parametrize("fn", [c[1] for c in _BOUNDS], ids=[c[0] for c in _BOUNDS])
def test_random_bounds_eager_refuses_raise_its_error(fn):
    _assert_raises_as_eager(fn, torch.zeros(3))


@pytest.mark.parametrize(
    "fn, dtype",
    [
        (lambda x: torch.randint(0, 256, (N,), dtype=torch.uint8) + x, torch.uint8),
        (lambda x: torch.randint(-128, 128, (N,), dtype=torch.int8) + x, torch.int8),
        (lambda x: torch.randint_like(x.expand(N), 256), torch.uint8),
    ],
    ids=["uint8", "int8", "like_uint8"],
)
def test_random_bounds_at_the_dtypes_limits_draw_every_value(fn, dtype):
    torch.manual_seed(8)
    draws = _xla(fn)(torch.zeros(1, dtype=dtype))
    assert draws.dtype == dtype and draws.unique().numel() == 256


def test_randint_int64_extremes_and_default_dtype():
    torch.manual_seed(9)
    draws = _xla(lambda x: torch.randint(-(2**63), 2**63 - 1, (N,)) + x)(torch.zeros(1).long())
    assert draws.dtype == torch.int64
    # both halves of the range, as often
    _rate_near(int((draws < 0).sum()), N, 0.5)
    assert draws.min() < -(2**62) and draws.max() > 2**62


def test_randperm_is_a_permutation_at_every_size():
    sizes = (0, 1, 2, 100_000)
    perms = _xla(lambda: [torch.randperm(n) for n in sizes])()
    for n, perm in zip(sizes, perms):
        assert perm.dtype == torch.int64 and torch.equal(perm.sort().values, torch.arange(n))
    half = _xla(lambda x: torch.randperm(2049, dtype=torch.float16) + x)(torch.zeros(1).half())
    assert torch.equal(half.sort().values, torch.arange(2049, dtype=torch.float16))


# -- gamma, Beta, Dirichlet ---------------------------------------------------------------------------
def test_dirichlet_sample_lowers_with_eagers_moments():
    alpha = torch.tensor([0.5, 1.5, 3.0])
    torch.manual_seed(10)
    x = _xla(lambda a: D.Dirichlet(a).sample((M,)))(alpha)
    assert x.shape == (M, 3) and x.dtype == torch.float32
    assert (x > 0).all() and (x < 1).all()
    assert torch.allclose(x.sum(-1), torch.ones(M), atol=1e-6)
    a0 = alpha.sum().item()
    for i, a in enumerate(alpha.tolist()):
        mean, var = a / a0, a * (a0 - a) / (a0**2 * (a0 + 1))
        _near(x[:, i].double().mean().item(), mean, math.sqrt(var / M))


def test_beta_sample_lowers_with_its_mean():
    torch.manual_seed(11)
    x = _xla(lambda a, b: D.Beta(a, b).sample((M,)))(torch.tensor(2.0), torch.tensor(5.0))
    assert x.shape == (M,) and (x > 0).all() and (x < 1).all()
    mean, var = 2 / 7, 2 * 5 / (49 * 8)
    _near(x.double().mean().item(), mean, math.sqrt(var / M))
    _near(x.double().var().item(), var, 3 * var * math.sqrt(2 / M))


def test_tiny_concentrations_draw_no_zeros():
    """Eager's gamma draws are at least the smallest normal float: log_prob stays finite."""
    torch.manual_seed(12)
    alpha = torch.tensor([1e-3, 1e-3, 2.0])
    x, g = _xla(lambda a: (D.Dirichlet(a).sample((1000,)), D.Gamma(a[:1], 1.0).sample((1000,))))(
        alpha
    )
    assert (x >= torch.finfo(torch.float32).tiny).all() and (x < 1).all()
    assert (g >= torch.finfo(torch.float32).tiny).all()
    assert torch.isfinite(D.Gamma(alpha[:1], 1.0).log_prob(g)).all()


def test_lkj_cholesky_sample_lowers():
    torch.manual_seed(13)
    L = _xla(lambda c: D.LKJCholesky(3, c).sample((100,)))(torch.tensor(2.0))
    assert L.shape == (100, 3, 3)
    assert torch.allclose((L @ L.mT).diagonal(dim1=-2, dim2=-1), torch.ones(100, 3), atol=1e-5)
    assert (L.triu(1) == 0).all()


# -- distributions: values equal eager's, rsample gradients ------------------------------------------
_DISTS = {
    "Normal": (lambda p: D.Normal(p, p.exp()), lambda p: torch.tensor([0.1, -2.0, 3.0])),
    "Categorical": (lambda p: D.Categorical(logits=p), lambda p: torch.tensor([0, 2, 1])),
    "Bernoulli": (lambda p: D.Bernoulli(logits=p), lambda p: torch.tensor([0.0, 1.0, 1.0])),
    "Beta": (lambda p: D.Beta(p.exp(), 2.0), lambda p: torch.tensor([0.1, 0.5, 0.9])),
    "Gamma": (lambda p: D.Gamma(p.exp(), 1.5), lambda p: torch.tensor([0.1, 1.0, 4.0])),
    "Dirichlet": (lambda p: D.Dirichlet(p.exp()), lambda p: torch.tensor([0.2, 0.3, 0.5])),
    "MultivariateNormal": (
        lambda p: D.MultivariateNormal(
            p, scale_tril=torch.tensor([[2.0, 0, 0], [0.3, 1, 0], [0.1, 0.2, 3]])
        ),
        lambda p: torch.tensor([0.5, -1.0, 2.0]),
    ),
}


@pytest.mark.parametrize("name", list(_DISTS))
def test_distribution_log_prob_and_entropy_are_eagers(name):
    make, value = _DISTS[name]
    p = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)

    def fn(p):
        d = make(p)
        return d.log_prob(value(p).to(p.dtype)), d.entropy()

    got, want = _xla(fn)(p), fn(p)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_normal_cdf_and_icdf_are_eagers():
    def fn(loc):
        d = D.Normal(loc, 2.0)
        return d.cdf(torch.tensor([0.5, 1.0, 3.0], dtype=loc.dtype)), d.icdf(
            torch.tensor([0.1, 0.5, 0.9], dtype=loc.dtype)
        )

    loc = torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)
    for g, w in zip(_xla(fn)(loc), fn(loc)):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["Normal", "MultivariateNormal"])
def test_rsample_gradients_follow_the_sample(name):
    """d sum(loc + scale * eps) / d loc = 1 each; / d log-scale: the sample minus loc."""
    p = torch.tensor([0.3, -0.2, 0.5], requires_grad=True)

    def fn(p):
        if name == "Normal":
            d = D.Normal(p, p.exp())
        else:
            d = D.MultivariateNormal(p, scale_tril=torch.eye(3) * 2.0)
        return d.rsample((1000,))

    torch.manual_seed(14)
    s = _xla(fn)(p)
    (grad,) = torch.autograd.grad(s.sum(), p)
    if name == "Normal":  # (loc and log-scale are both p)
        want = 1000 + (s.detach() - p.detach()).sum(0)
        torch.testing.assert_close(grad, want, rtol=1e-4, atol=1e-3)
    else:
        torch.testing.assert_close(grad, torch.full((3,), 1000.0))


def test_validate_args_errors_are_eagers():
    for fn, args in [
        (
            lambda l, s: D.Normal(l, s, validate_args=True).sample(),
            (torch.zeros(3), -torch.ones(3)),
        ),
        (lambda p: D.Bernoulli(probs=p, validate_args=True).sample(), (torch.tensor([1.5]),)),
        (
            lambda p: D.Categorical(probs=p, validate_args=True).sample(),
            (torch.tensor([0.5, -0.1]),),
        ),
    ]:
        with pytest.raises(ValueError) as eager:
            fn(*args)
        torch._dynamo.reset()
        with pytest.raises(ValueError) as compiled:
            torch.compile(fn, backend="xla")(*args)
        assert str(compiled.value) == str(eager.value)


# -- generators, RNG state, checkpoint ----------------------------------------------------------------
def test_explicit_generator_is_honoured():
    def fn(x, g):
        return x + torch.rand(3, generator=g), torch.randn(2, generator=g)

    compiled = torch.compile(fn, backend="xla")
    g_eager, g_xla = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    want = fn(torch.zeros(3), g_eager)
    got = compiled(torch.zeros(3), g_xla)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert torch.equal(g_xla.get_state(), g_eager.get_state())
    other = compiled(torch.zeros(3), torch.Generator().manual_seed(6))
    assert not torch.equal(other[0], got[0])


def test_rng_state_around_and_inside_compiled_code():
    f = torch.compile(lambda x: x + torch.rand(4), backend="xla")
    torch.manual_seed(0)
    state = torch.get_rng_state()
    a, b = f(torch.zeros(4)), f(torch.zeros(4))
    assert not torch.equal(a, b)  # (fresh values on every call)
    torch.set_rng_state(state)
    assert torch.equal(f(torch.zeros(4)), a)
    torch.manual_seed(0)
    with torch.random.fork_rng():
        c = f(torch.zeros(4))
    assert torch.equal(c, a) and torch.equal(f(torch.zeros(4)), a)

    def inside(x):
        s = torch.get_rng_state()
        first = x + torch.rand(4)
        torch.set_rng_state(s)
        return first, x + torch.rand(4)

    first, again = torch.compile(inside, backend="xla")(torch.zeros(4))
    assert torch.equal(first, again)


def test_checkpointed_dropout_recomputes_the_forwards_mask():
    w = torch.tensor(3.0, requires_grad=True)

    def fn(x):
        return torch.utils.checkpoint.checkpoint(
            lambda x: F.dropout(x * w, 0.5, training=True), x, use_reentrant=False
        )

    x = torch.ones(10_000, requires_grad=True)
    torch.manual_seed(15)
    y = torch.compile(fn, backend="xla")(x)
    y.sum().backward()
    kept = y != 0
    _rate_near(int(kept.sum()), 10_000, 0.5)
    assert torch.equal(x.grad, kept.float() * 6)
    assert w.grad.item() == 2 * kept.sum().item()
