"""torch.distributions and sampling APIs inside compiled code, as RL policies, VAEs and Monte
Carlo estimators write them, against eager (session 33): REINFORCE losses and entropy bonuses
(gradients and their None-ness), ``Categorical`` with ``-inf`` logits, KL divergences,
cdf/icdf/mean/variance/mode, float64 parameters and integer values, batch broadcasting,
``sample(sample_shape)`` shapes and dtypes, ``validate_args`` errors, sampling ops with an
explicit ``torch.Generator`` (values and the generator's state equal eager's: Dynamo breaks
the graph there) and reparameterized gradients checked against the compiled sample
(``_standard_gamma_grad``, the Normal's ``eps``), where the default generator's values differ
from eager's by design (docs/design.md, "Randomness").

    PYTHONPATH=. python scripts/probe_dist33.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_dist33.py   # torch's own

Comparison: dtypes, shapes, ``requires_grad``, values (float64: rtol 1e-10; float32 and
half precision: ``assert_close``'s defaults), gradients with their None-ness, errors (type,
eager's first line in ours) and eager's warnings.

Found and fixed (session 33, ``tests/test_dist_s33.py``): ``_standard_gamma``'s derivative was
JAX's implicit one, not eager's ``_standard_gamma_grad`` (``rg_gamma_rsample_grads``);
``torch.normal``'s derivative in mean and std was the reparameterized one, eager's is zero
(``normal_fn_grads_are_zero``). Differences left: ``func_hessian_mvn_log_prob`` (a
``torch.jit.script`` deprecation warning Dynamo's tracing gives, aot_eager alike);
``half_normal_float16``, ``half_categorical_float16`` and ``autocast_policy_log_prob``
(half-precision intermediates an ulp apart, as close to float64's results as eager's).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.distributions as D
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import run

BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.requires_grad, v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path) -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape", "requires_grad"), a[1:4], b[1:4]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[4], b[4]
        if x.is_floating_point():
            tol = {"rtol": 1e-10, "atol": 1e-12} if x.dtype == torch.float64 else {}
            try:
                torch.testing.assert_close(x, y, equal_nan=True, **tol)
            except AssertionError as e:
                return f"{path}: values differ: {str(e).splitlines()[2:5]}\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values {x} (xla) vs {y} (eager)"
        return None
    if a[0] == "L":
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]}"
        if b[2][:50] not in a[3]:
            return f"{path}: MSG {a[2]!r} (xla) vs {b[2]!r} (eager)"
        return None
    if a[1] != b[1] and not (a[1] != a[1] and b[1] != b[1]):
        return f"{path}: {a[1]!r} (xla) vs {b[1]!r} (eager)"
    return None


def _ours(w) -> bool:
    mod = type(w.message).__module__ or ""
    name = w.filename or ""
    return mod.startswith("torch2xla") or "torch/_dynamo" in name or "torch2xla" in name


def observe(fn, compiled: bool) -> list:
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw) if compiled else f

    torch._dynamo.reset()
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(C, rec)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            obs.append(("raised", describe(e)))
    msgs = sorted({str(w.message).split("\n")[0][:100] for w in caught if not _ours(w)})
    obs.append(("warnings", ("V", msgs)))
    return obs


def compare(name, fn) -> str:
    got, exp = observe(fn, True), observe(fn, False)
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g[:3]} / {e[:3]}"
        d = same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return f"ok    {name}"


def _x(*shape, seed=0, dtype=torch.float32, rg=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_(rg)


def _pos(*shape, seed=0, dtype=torch.float32, rg=False):
    return (_x(*shape, seed=seed, dtype=dtype).abs() + 0.5).requires_grad_(rg)


def _grads_case(name, f, make, n_calls=1):
    """``f``'s outputs, then the gradients of every float input of a sum of them."""

    def sc(C, rec):
        g = C(f)
        for k in range(n_calls):
            args = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in make(k)]
            out = g(*args)
            rec(f"out{k}", out)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            tot = sum(o.sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
            if isinstance(tot, torch.Tensor):
                tot.backward()
            rec(f"grads{k}", [a.grad for a in args])

    sc.__name__ = name
    SCENARIOS[name] = sc


# ============================================================================================
# REINFORCE, entropy bonus, actor-critic, None-ness of unused parameters
class _Policy(nn.Module):
    def __init__(self, n_obs=4, n_act=3, continuous=False, dtype=torch.float32):
        super().__init__()
        torch.manual_seed(1)
        self.body = nn.Linear(n_obs, 8, dtype=dtype)
        self.pi = nn.Linear(8, n_act, dtype=dtype)
        self.v = nn.Linear(8, 1, dtype=dtype)
        self.log_std = nn.Parameter(torch.zeros(n_act, dtype=dtype))
        self.unused = nn.Parameter(torch.ones(2, dtype=dtype))
        self.continuous = continuous

    def forward(self, obs):
        h = torch.tanh(self.body(obs))
        if self.continuous:
            return D.Normal(self.pi(h), self.log_std.exp()), self.v(h).squeeze(-1)
        return D.Categorical(logits=self.pi(h)), self.v(h).squeeze(-1)


def _rl_step(policy, obs, act, adv, ret, ent_coef=0.01):
    dist, value = policy(obs)
    lp = dist.log_prob(act)
    if lp.dim() > 1:
        lp = lp.sum(-1)
    ent = dist.entropy()
    if ent.dim() > 1:
        ent = ent.sum(-1)
    loss = -(lp * adv).mean() - ent_coef * ent.mean() + 0.5 * (ret - value).pow(2).mean()
    loss.backward()
    return loss.detach(), lp.detach(), ent.detach()


def _rl_scenario(name, continuous, dtype=torch.float32, steps=2):
    def sc(C, rec):
        pol = _Policy(continuous=continuous, dtype=dtype)
        step = C(_rl_step)
        opt = torch.optim.SGD(pol.parameters(), lr=0.1)
        for k in range(steps):
            obs = _x(5, 4, seed=k, dtype=dtype)
            if continuous:
                act = _x(5, 3, seed=10 + k, dtype=dtype)
            else:
                act = torch.tensor([0, 2, 1, 1, 0])
            adv, ret = _x(5, seed=20 + k, dtype=dtype), _x(5, seed=30 + k, dtype=dtype)
            opt.zero_grad(set_to_none=True)
            rec(f"step{k}", step(pol, obs, act, adv, ret))
            rec(f"grads{k}", [p.grad for p in pol.parameters()])
            opt.step()
        rec("params", list(pol.parameters()))

    sc.__name__ = name
    SCENARIOS[name] = sc


_rl_scenario("rl_reinforce_categorical", False)
_rl_scenario("rl_reinforce_categorical_f64", False, torch.float64)
_rl_scenario("rl_gaussian_policy", True)
_rl_scenario("rl_gaussian_policy_f64", True, torch.float64)


@scenario
def rl_ppo_clipped_ratio(C, rec):
    def loss_fn(logits, old_lp, act, adv):
        d = D.Categorical(logits=logits)
        ratio = (d.log_prob(act) - old_lp).exp()
        s = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        return -s.mean() - 0.01 * d.entropy().mean()

    f = C(loss_fn)
    lg = _x(6, 4, rg=True)
    act = torch.tensor([0, 3, 2, 1, 1, 0])
    old = D.Categorical(logits=_x(6, 4, seed=3)).log_prob(act)
    loss = f(lg, old, act, _x(6, seed=4))
    loss.backward()
    rec("loss", loss)
    rec("grad", lg.grad)


@scenario
def rl_entropy_only_grad_none_for_value_head(C, rec):
    def f(lg, v, w):
        return D.Categorical(logits=lg @ w).entropy().sum()

    lg, v, w = _x(3, 4, rg=True), _x(3, rg=True), _x(4, 5, seed=2, rg=True)
    out = C(f)(lg, v, w)
    out.backward()
    rec("out", out)
    rec("grads", [lg.grad, v.grad, w.grad])


@scenario
def rl_autograd_grad_allow_unused(C, rec):
    def f(mu, ls, unused):
        d = D.Normal(mu, ls.exp())
        lp = d.log_prob(torch.tensor([0.5, -0.5, 1.0])).sum()
        return torch.autograd.grad(lp, (mu, ls, unused), allow_unused=True, create_graph=False)

    mu, ls, un = _x(3, rg=True), _x(3, seed=1, rg=True), _x(2, rg=True)
    rec("g", C(f)(mu, ls, un))


@scenario
def rl_sample_then_log_prob_consistent(C, rec):
    """A rollout step: action drawn in the compiled code; its log_prob must be the one eager
    gives for that action; the action has no grad, the log_prob has."""

    def act(lg):
        d = D.Categorical(logits=lg)
        a = d.sample()
        return a, d.log_prob(a), d.entropy()

    lg = _x(64, 5, rg=True)
    a, lp, ent = C(act)(lg)
    rec("meta", [a.dtype, tuple(a.shape), a.requires_grad, lp.requires_grad])
    want = D.Categorical(logits=lg).log_prob(a)
    rec("lp_consistent", bool(torch.allclose(lp, want, rtol=1.3e-6, atol=1e-5)))
    rec("ent", ent)
    lp.sum().backward()
    g1 = lg.grad.clone()
    lg.grad = None
    want.sum().backward()
    rec("grad_consistent", bool(torch.allclose(g1, lg.grad, rtol=1.3e-6, atol=1e-5)))


@scenario
def rl_gaussian_sample_no_grad_rsample_grad(C, rec):
    def f(mu, ls):
        d = D.Normal(mu, ls.exp())
        s, r = d.sample((4,)), d.rsample((4,))
        return s.requires_grad, r.requires_grad, s.shape, r.shape, s.dtype

    rec("flags", C(f)(_x(3, rg=True), _x(3, rg=True)))


# ============================================================================================
# Categorical / Bernoulli edges
_NEG = float("-inf")
_grads_case(
    "cat_neg_inf_logits_log_prob_entropy",
    lambda lg, a: (D.Categorical(logits=lg).log_prob(a), D.Categorical(logits=lg).entropy()),
    lambda k: (torch.tensor([[0.5, _NEG, 1.0], [_NEG, _NEG, 2.0]]), torch.tensor([0, 2])),
)
_grads_case(
    "cat_neg_inf_logits_probs_and_mode",
    lambda lg: (D.Categorical(logits=lg).probs, D.Categorical(logits=lg).mode.float()),
    lambda k: (torch.tensor([[0.5, _NEG, 1.0], [_NEG, _NEG, 2.0]]),),
)
_grads_case(
    "cat_neg_inf_masked_fill_policy",
    lambda lg, m, a: (
        D.Categorical(logits=lg.masked_fill(~m, _NEG)).log_prob(a).sum()
        - D.Categorical(logits=lg.masked_fill(~m, _NEG)).entropy().sum()
    ),
    lambda k: (
        _x(2, 4),
        torch.tensor([[True, False, True, True], [False, True, False, False]]),
        torch.tensor([3, 1]),
    ),
)
_grads_case(
    "cat_probs_with_zero_entropy",
    lambda p: D.Categorical(probs=p).entropy(),
    lambda k: (torch.tensor([[0.5, 0.0, 0.5], [0.0, 0.0, 1.0]]),),
)
_grads_case(
    "cat_log_prob_int32_value",
    lambda lg, a: D.Categorical(logits=lg).log_prob(a),
    lambda k: (_x(3, 4), torch.tensor([0, 3, 1], dtype=torch.int32)),
)
_grads_case(
    "cat_log_prob_broadcast_sample_batch",
    lambda lg, a: D.Categorical(logits=lg).log_prob(a),
    lambda k: (_x(3, 4), torch.tensor([[0, 3, 1], [2, 2, 2]])),
)
_grads_case(
    "cat_log_prob_value_broadcast_batch",
    lambda lg, a: D.Categorical(logits=lg).log_prob(a),
    lambda k: (_x(3, 4), torch.tensor([[0], [3]])),
)
_grads_case(
    "cat_enumerate_support_log_prob",
    lambda lg: D.Categorical(logits=lg).log_prob(D.Categorical(logits=lg).enumerate_support()),
    lambda k: (_x(2, 3),),
)
_grads_case(
    "cat_f64_logits",
    lambda lg, a: (D.Categorical(logits=lg).log_prob(a), D.Categorical(logits=lg).entropy()),
    lambda k: (_x(3, 5, dtype=torch.float64), torch.tensor([4, 0, 2])),
)
_grads_case(
    "bern_logits_extreme",
    lambda lg, v: (D.Bernoulli(logits=lg).log_prob(v), D.Bernoulli(logits=lg).entropy()),
    lambda k: (torch.tensor([-100.0, 0.0, 30.0, 100.0]), torch.tensor([1.0, 0.0, 1.0, 0.0])),
)
_grads_case(
    "bern_probs_log_prob_f64",
    lambda p, v: (D.Bernoulli(probs=p).log_prob(v), D.Bernoulli(probs=p).variance),
    lambda k: (torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), torch.tensor([1.0, 0.0, 1.0])),
)
_grads_case(
    "onehot_cat_log_prob",
    lambda lg, v: D.OneHotCategorical(logits=lg).log_prob(v),
    lambda k: (_x(2, 3), torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])),
)
_grads_case(
    "relaxed_onehot_log_prob",
    lambda t, lg, v: D.RelaxedOneHotCategorical(t, logits=lg).log_prob(v),
    lambda k: (torch.tensor(0.7), _x(2, 3), torch.tensor([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])),
)
_grads_case(
    "relaxed_bernoulli_log_prob",
    lambda t, p, v: D.RelaxedBernoulli(t, probs=p).log_prob(v),
    lambda k: (torch.tensor(0.5), torch.tensor([0.2, 0.7]), torch.tensor([0.3, 0.9])),
)

# ============================================================================================
# Continuous: log_prob/entropy/cdf/icdf/moments, float64, broadcasting, integer values
_grads_case(
    "normal_broadcast_batch",
    lambda m, s, v: D.Normal(m, s).log_prob(v),
    lambda k: (_x(3, 1), _pos(1, 4, seed=1), _x(2, 1, 1, seed=2)),
)
_grads_case(
    "normal_f64_params_f32_value",
    lambda m, s, v: D.Normal(m, s).log_prob(v),
    lambda k: (_x(3, dtype=torch.float64), _pos(3, seed=1, dtype=torch.float64), _x(3, seed=2)),
)
_grads_case(
    "normal_int_value",
    lambda m, s, v: D.Normal(m, s).log_prob(v),
    lambda k: (_x(3), _pos(3, seed=1), torch.tensor([0, 1, -2])),
)
_grads_case(
    "normal_python_float_value_cdf",
    lambda m, s: (D.Normal(m, s).cdf(torch.tensor(0.3)), D.Normal(m, s).stddev),
    lambda k: (_x(3), _pos(3, seed=1)),
)
_grads_case(
    "normal_icdf_edges",
    lambda m, s, q: D.Normal(m, s).icdf(q),
    lambda k: (_x(4), _pos(4, seed=1), torch.tensor([0.0, 1e-7, 0.5, 1.0])),
)
_grads_case(
    "normal_scalar_loc_tensor_scale",
    lambda s, v: (D.Normal(0.0, s).log_prob(v), D.Normal(0.0, s).entropy()),
    lambda k: (_pos(3), _x(3, seed=1)),
)
_grads_case(
    "lognormal_moments",
    lambda m, s: (D.LogNormal(m, s).mean, D.LogNormal(m, s).variance, D.LogNormal(m, s).mode),
    lambda k: (_x(3), _pos(3, seed=1)),
)
_grads_case(
    "laplace_cdf_icdf",
    lambda m, s, v, q: (D.Laplace(m, s).cdf(v), D.Laplace(m, s).icdf(q)),
    lambda k: (_x(3), _pos(3, seed=1), _x(3, seed=2), torch.tensor([0.1, 0.5, 0.9])),
)
_grads_case(
    "laplace_icdf_f64",
    lambda m, s, q: D.Laplace(m, s).icdf(q),
    lambda k: (
        _x(3, dtype=torch.float64),
        _pos(3, dtype=torch.float64),
        torch.tensor([0.01, 0.5, 0.99], dtype=torch.float64),
    ),
)
_grads_case(
    "studentt_log_prob_df_grad",
    lambda df, m, s, v: (D.StudentT(df, m, s).log_prob(v), D.StudentT(df, m, s).entropy()),
    lambda k: (_pos(3) * 3, _x(3, seed=1), _pos(3, seed=2), _x(3, seed=3)),
)
_grads_case(
    "studentt_moments_heavy_tails",
    lambda df: (D.StudentT(df).mean, D.StudentT(df).variance),
    lambda k: (torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0]),),
)
_grads_case(
    "studentt_cdf_not_implemented",
    lambda df, v: D.StudentT(df).cdf(v),
    lambda k: (torch.tensor([3.0]), torch.tensor([0.2])),
)
_grads_case(
    "gamma_log_prob_conc_grad_f64",
    lambda a, b, v: (D.Gamma(a, b).log_prob(v), D.Gamma(a, b).entropy()),
    lambda k: (
        _pos(3, dtype=torch.float64),
        _pos(3, seed=1, dtype=torch.float64),
        _pos(3, seed=2, dtype=torch.float64),
    ),
)
_grads_case(
    "gamma_cdf_rate_grad",
    lambda b, v: D.Gamma(torch.tensor([2.0, 0.5]), b).cdf(v),
    lambda k: (_pos(2), _pos(2, seed=2)),
)
_grads_case(
    "gamma_cdf_conc_grad_raises",
    lambda a, v: D.Gamma(a, 1.0).cdf(v),
    lambda k: (_pos(2), _pos(2, seed=2)),
)
_grads_case(
    "gamma_mode_variance",
    lambda a, b: (D.Gamma(a, b).mode, D.Gamma(a, b).variance),
    lambda k: (torch.tensor([0.5, 1.0, 3.0]), _pos(3)),
)
_grads_case(
    "beta_log_prob_entropy_f64",
    lambda a, b, v: (D.Beta(a, b).log_prob(v), D.Beta(a, b).entropy(), D.Beta(a, b).variance),
    lambda k: (
        _pos(3, dtype=torch.float64),
        _pos(3, seed=1, dtype=torch.float64),
        torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64),
    ),
)
_grads_case(
    "beta_log_prob_edges",
    lambda a, b, v: D.Beta(a, b, validate_args=False).log_prob(v),
    lambda k: (
        torch.tensor([1.0, 2.0, 0.5]),
        torch.tensor([1.0, 2.0, 0.5]),
        torch.tensor([0.0, 1.0, 0.5]),
    ),
)
_grads_case(
    "dirichlet_log_prob_entropy_batch",
    lambda a, v: (D.Dirichlet(a).log_prob(v), D.Dirichlet(a).entropy(), D.Dirichlet(a).mode),
    lambda k: (_pos(2, 3) * 2, torch.tensor([0.2, 0.3, 0.5])),
)
_grads_case(
    "poisson_int_value_log_prob",
    lambda r, v: D.Poisson(r).log_prob(v),
    lambda k: (_pos(3), torch.tensor([0, 2, 7])),
)
_grads_case(
    "poisson_zero_rate",
    lambda r, v: D.Poisson(r, validate_args=False).log_prob(v),
    lambda k: (torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.0, 1.0, 0.0])),
)
_grads_case(
    "exponential_int_value",
    lambda r, v: D.Exponential(r).log_prob(v),
    lambda k: (_pos(3), torch.tensor([0, 1, 3])),
)
_grads_case(
    "uniform_log_prob_outside_no_validate",
    lambda lo, hi, v: D.Uniform(lo, hi, validate_args=False).log_prob(v),
    lambda k: (torch.zeros(3), torch.ones(3) * 2, torch.tensor([-1.0, 1.0, 3.0])),
)
_grads_case(
    "mvn_scale_tril_batch_broadcast",
    lambda m, L, v: (
        D.MultivariateNormal(m, scale_tril=L).log_prob(v),
        D.MultivariateNormal(m, scale_tril=L).entropy(),
    ),
    lambda k: (_x(2, 3), torch.linalg.cholesky(_spd(3)), _x(4, 1, 3, seed=2)),
)
_grads_case(
    "mvn_covariance_matrix_grad",
    lambda m, c, v: (D.MultivariateNormal(m, covariance_matrix=c).log_prob(v),),
    lambda k: (_x(3), _spd(3, seed=1), _x(2, 3, seed=2)),
)
_grads_case(
    "mvn_covariance_f64_variance",
    lambda m, c: (
        D.MultivariateNormal(m, covariance_matrix=c).variance,
        D.MultivariateNormal(m, covariance_matrix=c).scale_tril,
        D.MultivariateNormal(m, covariance_matrix=c).precision_matrix,
    ),
    lambda k: (_x(3, dtype=torch.float64), _spd(3, seed=1, dtype=torch.float64)),
)
_grads_case(
    "mvn_diag_embed_policy",
    lambda m, ls, v: D.MultivariateNormal(m, scale_tril=torch.diag_embed(ls.exp())).log_prob(v),
    lambda k: (_x(4, 2), _x(4, 2, seed=1), _x(4, 2, seed=2)),
)
_grads_case(
    "independent_normal_sum",
    lambda m, s, v: (
        D.Independent(D.Normal(m, s), 2).log_prob(v),
        D.Independent(D.Normal(m, s), 2).entropy(),
    ),
    lambda k: (_x(2, 3, 4), _pos(2, 3, 4, seed=1), _x(2, 3, 4, seed=2)),
)
_grads_case(
    "independent_bernoulli_vae_recon",
    lambda lg, x: -D.Independent(D.Bernoulli(logits=lg), 1).log_prob(x).mean(),
    lambda k: (_x(4, 6), (_x(4, 6, seed=2) > 0).float()),
)
_grads_case(
    "tanh_normal_sac_log_prob",
    lambda m, ls, u: D.TransformedDistribution(
        D.Normal(m, ls.exp()), [D.transforms.TanhTransform()]
    ).log_prob(torch.tanh(u)),
    lambda k: (_x(3, 2), _x(3, 2, seed=1), _x(3, 2, seed=2)),
)
_grads_case(
    "transformed_affine_exp_cdf_icdf",
    lambda m, s, v, q: (
        D.TransformedDistribution(
            D.Normal(m, s), [D.transforms.AffineTransform(1.0, 2.0), D.transforms.ExpTransform()]
        ).cdf(v),
        D.TransformedDistribution(
            D.Normal(m, s), [D.transforms.AffineTransform(1.0, 2.0), D.transforms.ExpTransform()]
        ).icdf(q),
    ),
    lambda k: (_x(3), _pos(3, seed=1), _pos(3, seed=2), torch.tensor([0.1, 0.5, 0.9])),
)
_grads_case(
    "mixture_normal_log_prob_cdf",
    lambda w, m, s, v: (
        D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).log_prob(v),
        D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).cdf(v),
        D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).variance,
    ),
    lambda k: (_x(2, 3), _x(2, 3, seed=1), _pos(2, 3, seed=2), _x(5, 1, seed=3)),
)
_grads_case(
    "mixture_mvn_log_prob",
    lambda w, m, v: D.MixtureSameFamily(
        D.Categorical(logits=w), D.MultivariateNormal(m, scale_tril=torch.eye(2) * 0.5)
    ).log_prob(v),
    lambda k: (_x(3), _x(3, 2, seed=1), _x(4, 2, seed=2)),
)
_grads_case(
    "mixture_independent_log_prob",
    lambda w, m, s, v: D.MixtureSameFamily(
        D.Categorical(logits=w), D.Independent(D.Normal(m, s), 1)
    ).log_prob(v),
    lambda k: (_x(3), _x(3, 2, seed=1), _pos(3, 2, seed=2), _x(4, 2, seed=2)),
)
_grads_case(
    "vae_elbo_closed_form_kl",
    lambda mu, lv, x, eps: (
        D.Normal(mu + eps * (0.5 * lv).exp(), 1.0).log_prob(x).sum(-1)
        - D.kl_divergence(D.Normal(mu, (0.5 * lv).exp()), D.Normal(0.0, 1.0)).sum(-1)
    ).mean(),
    lambda k: (_x(4, 3), _x(4, 3, seed=1), _x(4, 3, seed=2), _x(4, 3, seed=3)),
)


def _spd(n, seed=0, dtype=torch.float32):
    a = _x(n, n, seed=seed, dtype=torch.float64)
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


# -- KL divergences -------------------------------------------------------------------------------
_KL = {
    "normal": (lambda a, b: D.Normal(a, b.exp()), lambda: (_x(3), _x(3, seed=1))),
    "categorical": (lambda a, b: D.Categorical(logits=a), lambda: (_x(2, 4), _x(2, 4, seed=1))),
    "bernoulli": (lambda a, b: D.Bernoulli(logits=a), lambda: (_x(3), _x(3, seed=1))),
    "beta": (lambda a, b: D.Beta(a.exp(), b.exp()), lambda: (_x(3), _x(3, seed=1))),
    "gamma": (lambda a, b: D.Gamma(a.exp(), b.exp()), lambda: (_x(3), _x(3, seed=1))),
    "dirichlet": (lambda a, b: D.Dirichlet(a.exp()), lambda: (_x(2, 3), _x(2, 3, seed=1))),
    "laplace": (lambda a, b: D.Laplace(a, b.exp()), lambda: (_x(3), _x(3, seed=1))),
    "poisson": (lambda a, b: D.Poisson(a.exp()), lambda: (_x(3), _x(3, seed=1))),
    "mvn": (
        lambda a, b: D.MultivariateNormal(a, scale_tril=torch.diag_embed(b.exp())),
        lambda: (_x(2, 3), _x(2, 3, seed=1)),
    ),
    "independent": (
        lambda a, b: D.Independent(D.Normal(a, b.exp()), 1),
        lambda: (_x(2, 3), _x(2, 3, seed=1)),
    ),
    "onehot": (lambda a, b: D.OneHotCategorical(logits=a), lambda: (_x(2, 4), _x(2, 4, seed=1))),
    "exponential": (lambda a, b: D.Exponential(a.exp()), lambda: (_x(3), _x(3, seed=1))),
}
for _n, (_mk, _args) in _KL.items():
    _grads_case(
        f"kl_{_n}",
        lambda a, b, c, d, _mk=_mk: D.kl_divergence(_mk(a, b), _mk(c, d)),
        lambda k, _args=_args: (*_args(), *(t * 0.5 + 0.1 for t in _args())),
    )
_grads_case(
    "kl_categorical_zero_probs",
    lambda p, q: D.kl_divergence(D.Categorical(probs=p), D.Categorical(probs=q)),
    lambda k: (
        torch.tensor([[0.5, 0.0, 0.5], [0.2, 0.3, 0.5]]),
        torch.tensor([[0.3, 0.3, 0.4], [0.0, 0.5, 0.5]]),
    ),
)
_grads_case(
    "kl_categorical_neg_inf_logits",
    lambda p, q: D.kl_divergence(D.Categorical(logits=p), D.Categorical(logits=q)),
    lambda k: (torch.tensor([[0.5, _NEG, 0.5]]), torch.tensor([[0.3, 0.3, 0.4]])),
)
_grads_case(
    "kl_normal_f64_vs_f32",
    lambda a, b: D.kl_divergence(D.Normal(a, 1.0), D.Normal(b, 2.0)),
    lambda k: (_x(3, dtype=torch.float64), _x(3, seed=1)),
)
_grads_case(
    "kl_not_implemented_pair",
    lambda a: D.kl_divergence(D.StudentT(a.exp()), D.Normal(0.0, 1.0)),
    lambda k: (_x(3),),
)


# ============================================================================================
# validate_args: errors eager raises (default validation is on)
def _err_case(name, f, make):
    def sc(C, rec):
        rec("out", C(f)(*make()))

    sc.__name__ = name
    SCENARIOS[name] = sc


_err_case(
    "va_normal_neg_scale_default",
    lambda m, s: D.Normal(m, s).log_prob(m),
    lambda: (_x(3), -_pos(3)),
)
_err_case(
    "va_normal_nan_loc",
    lambda m, s: D.Normal(m, s).mean,
    lambda: (torch.tensor([float("nan")]), _pos(1)),
)
_err_case(
    "va_cat_value_out_of_range",
    lambda lg, a: D.Categorical(logits=lg).log_prob(a),
    lambda: (_x(2, 3), torch.tensor([0, 3])),
)
_err_case(
    "va_cat_value_negative_no_validate",
    lambda lg, a: D.Categorical(logits=lg, validate_args=False).log_prob(a),
    lambda: (_x(2, 3), torch.tensor([0, -1])),
)
_err_case(
    "va_cat_value_float",
    lambda lg, a: D.Categorical(logits=lg).log_prob(a),
    lambda: (_x(2, 3), torch.tensor([0.5, 1.0])),
)
_err_case(
    "va_cat_value_shape",
    lambda lg, a: D.Categorical(logits=lg).log_prob(a),
    lambda: (_x(2, 3), torch.tensor([0, 1, 2])),
)
_err_case(
    "va_bern_value_half",
    lambda p, v: D.Bernoulli(probs=p).log_prob(v),
    lambda: (torch.tensor([0.3]), torch.tensor([0.5])),
)
_err_case(
    "va_beta_value_outside",
    lambda a, v: D.Beta(a, a).log_prob(v),
    lambda: (_pos(2), torch.tensor([0.5, 1.5])),
)
_err_case(
    "va_gamma_neg_value",
    lambda a, v: D.Gamma(a, a).log_prob(v),
    lambda: (_pos(2), torch.tensor([1.0, -1.0])),
)
_err_case(
    "va_poisson_frac_value",
    lambda r, v: D.Poisson(r).log_prob(v),
    lambda: (_pos(2), torch.tensor([1.0, 1.5])),
)
_err_case(
    "va_dirichlet_not_simplex",
    lambda a, v: D.Dirichlet(a).log_prob(v),
    lambda: (_pos(3), torch.tensor([0.2, 0.2, 0.2])),
)
_err_case(
    "va_mvn_not_pd",
    lambda m, c: D.MultivariateNormal(m, covariance_matrix=c).log_prob(m),
    lambda: (_x(2), torch.tensor([[1.0, 2.0], [2.0, 1.0]])),
)
_err_case(
    "va_mvn_bad_scale_tril",
    lambda m, L: D.MultivariateNormal(m, scale_tril=L).entropy(),
    lambda: (_x(2), torch.tensor([[1.0, 0.0], [2.0, -1.0]])),
)
_err_case(
    "va_cat_probs_negative",
    lambda p: D.Categorical(probs=p).entropy(),
    lambda: (torch.tensor([0.5, -0.1, 0.6]),),
)
_err_case(
    "va_uniform_low_ge_high",
    lambda lo, hi: D.Uniform(lo, hi).entropy(),
    lambda: (torch.ones(2), torch.ones(2)),
)
_err_case(
    "va_valid_values_pass",
    lambda a, v: D.Beta(a, a).log_prob(v),
    lambda: (_pos(2), torch.tensor([0.5, 0.25])),
)
_err_case(
    "va_studentt_neg_df", lambda df: D.StudentT(df).entropy(), lambda: (torch.tensor([-1.0]),)
)
_err_case(
    "va_mixture_bad_batch",
    lambda w, m, s: D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).mean,
    lambda: (_x(2, 3), _x(3, seed=1), _pos(3, seed=2)),
)
_err_case(
    "va_independent_too_many_dims",
    lambda m, s: D.Independent(D.Normal(m, s), 3).entropy(),
    lambda: (_x(2, 3), _pos(2, 3)),
)
_err_case(
    "va_both_probs_and_logits",
    lambda p: D.Categorical(probs=p, logits=p).entropy(),
    lambda: (_pos(3),),
)


# ============================================================================================
# Sampling ops with an explicit generator: eager's values and eager's generator state
def _gen_case(name, f, make, default_drawn=False):
    """``default_drawn``: ``f`` draws from the default generator too, whose state after the
    call is not eager's (the compiled program draws its seed from it instead)."""

    def sc(C, rec):
        g = torch.Generator().manual_seed(123)
        fn = C(f)
        for k in range(2):
            rec(f"out{k}", fn(*make(), g))
            rec(f"state{k}", g.get_state())
        if not default_drawn:
            rec("default_state", torch.get_rng_state())

    sc.__name__ = name
    SCENARIOS[name] = sc


_W = torch.tensor([[0.0, 1.0, 3.0, 0.0], [2.0, 0.0, 2.0, 4.0]])
_gen_case(
    "gen_multinomial_rep", lambda p, g: torch.multinomial(p, 6, True, generator=g), lambda: (_W,)
)
_gen_case("gen_multinomial_norep", lambda p, g: torch.multinomial(p, 2, generator=g), lambda: (_W,))
_gen_case(
    "gen_bernoulli_tensor",
    lambda p, g: torch.bernoulli(p, generator=g),
    lambda: (torch.full((3, 4), 0.4),),
)
_gen_case(
    "gen_bernoulli_f64",
    lambda p, g: torch.bernoulli(p, generator=g),
    lambda: (torch.full((5,), 0.5, dtype=torch.float64),),
)
_gen_case(
    "gen_bernoulli_p_float", lambda x, g: x.bernoulli(0.3, generator=g), lambda: (torch.zeros(6),)
)
_gen_case(
    "gen_bernoulli_", lambda x, g: x.clone().bernoulli_(0.7, generator=g), lambda: (torch.zeros(6),)
)
_gen_case(
    "gen_poisson",
    lambda r, g: torch.poisson(r, generator=g),
    lambda: (torch.tensor([0.5, 3.0, 20.0, 0.0]),),
)
_gen_case(
    "gen_normal_", lambda x, g: x.clone().normal_(2.0, 3.0, generator=g), lambda: (torch.zeros(5),)
)
_gen_case(
    "gen_normal_inplace_input",
    lambda x, g: x.normal_(2.0, 3.0, generator=g) * 1,
    lambda: (torch.zeros(5),),
)
_gen_case(
    "gen_exponential_",
    lambda x, g: x.clone().exponential_(1.5, generator=g),
    lambda: (torch.zeros(5),),
)
_gen_case(
    "gen_uniform_",
    lambda x, g: x.clone().uniform_(-1, 1, generator=g),
    lambda: (torch.zeros(5, dtype=torch.float64),),
)
_gen_case(
    "gen_normal_tensor_mean_std",
    lambda m, s, g: torch.normal(m, s, generator=g),
    lambda: (_x(4), _pos(4)),
)
_gen_case(
    "gen_normal_size", lambda m, g: m + torch.normal(0.0, 1.0, (3,), generator=g), lambda: (_x(3),)
)
_gen_case(
    "gen_randn_f64",
    lambda m, g: m + torch.randn(3, generator=g, dtype=torch.float64),
    lambda: (_x(3, dtype=torch.float64),),
)
_gen_case(
    "gen_randint",
    lambda m, g: m + torch.randint(0, 10, (4,), generator=g),
    lambda: (torch.zeros(4, dtype=torch.int64),),
)
_gen_case(
    "gen_randperm",
    lambda m, g: m + torch.randperm(5, generator=g),
    lambda: (torch.zeros(5, dtype=torch.int64),),
)
_gen_case(
    "gen_rand_like_via_rand", lambda m, g: m * torch.rand(m.shape, generator=g), lambda: (_x(2, 3),)
)
_gen_case(
    "gen_mixed_with_default",
    lambda m, g: (m + torch.randn(3, generator=g), (torch.rand(3) * 0).sum(), m * 2),
    lambda: (_x(3),),
    default_drawn=True,
)
_gen_case(
    "gen_gumbel_max_sampling",
    lambda lg, g: (lg - torch.empty_like(lg).exponential_(generator=g).log()).argmax(-1),
    lambda: (_x(3, 5),),
)
_gen_case(
    "gen_reparam_normal_eps",
    lambda m, g: m + 0.5 * torch.randn(m.shape, generator=g),
    lambda: (_x(2, 3),),
)


@scenario
def gen_reparam_grad(C, rec):
    def f(mu, ls, g):
        eps = torch.randn(mu.shape, generator=g)
        return (mu + ls.exp() * eps).pow(2).sum()

    fn = C(f)
    mu, ls = _x(3, rg=True), _x(3, seed=1, rg=True)
    g = torch.Generator().manual_seed(7)
    out = fn(mu, ls, g)
    out.backward()
    rec("out", out)
    rec("grads", [mu.grad, ls.grad])


@scenario
def gen_in_module_forward(C, rec):
    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.g = torch.Generator().manual_seed(3)

        def forward(self, x):
            return self.lin(x) + 0.1 * torch.randn(x.shape, generator=self.g)

    torch.manual_seed(0)
    m = Noisy()
    f = C(m)
    for k in range(2):
        rec(f"out{k}", f(_x(2, 3, seed=k)))
    rec("state", m.g.get_state())


# ============================================================================================
# Default generator: shapes, dtypes, support, and gradients checked against the compiled draw
def _shape_case(name, f, make):
    def sc(C, rec):
        out = C(f)(*make())
        outs = out if isinstance(out, tuple) else (out,)
        rec("meta", [(o.dtype, tuple(o.shape), o.requires_grad) for o in outs])

    sc.__name__ = name
    SCENARIOS[name] = sc


_shape_case(
    "ss_normal_sample_shape", lambda m: D.Normal(m, 1.0).sample((2, 5)), lambda: (_x(4, rg=True),)
)
_shape_case(
    "ss_normal_rsample_shape", lambda m: D.Normal(m, 1.0).rsample((2,)), lambda: (_x(4, rg=True),)
)
_shape_case(
    "ss_normal_f64", lambda m: D.Normal(m, 1.0).rsample(), lambda: (_x(4, dtype=torch.float64),)
)
_shape_case(
    "ss_cat_sample", lambda lg: D.Categorical(logits=lg).sample((7,)), lambda: (_x(3, 4, rg=True),)
)
_shape_case(
    "ss_cat_sample_torch_size",
    lambda lg: D.Categorical(logits=lg).sample(torch.Size([2, 2])),
    lambda: (_x(4),),
)
_shape_case(
    "ss_bern_sample",
    lambda lg: D.Bernoulli(logits=lg).sample((2,)),
    lambda: (_x(3, dtype=torch.float64),),
)
_shape_case(
    "ss_mvn_rsample",
    lambda m: D.MultivariateNormal(m, torch.eye(3)).rsample((5,)),
    lambda: (_x(2, 3, rg=True),),
)
_shape_case(
    "ss_dirichlet_rsample", lambda a: D.Dirichlet(a).rsample((4,)), lambda: (_pos(2, 3, rg=True),)
)
_shape_case("ss_beta_rsample", lambda a: D.Beta(a, a).rsample((4,)), lambda: (_pos(3, rg=True),))
_shape_case(
    "ss_gamma_rsample_f64",
    lambda a: D.Gamma(a, 1.0).rsample((4,)),
    lambda: (_pos(3, dtype=torch.float64, rg=True),),
)
_shape_case("ss_poisson_sample", lambda r: D.Poisson(r).sample((2,)), lambda: (_pos(3),))
_shape_case(
    "ss_onehot_sample", lambda lg: D.OneHotCategorical(logits=lg).sample((2,)), lambda: (_x(3, 4),)
)
_shape_case(
    "ss_relaxed_onehot_rsample",
    lambda lg: D.RelaxedOneHotCategorical(0.5, logits=lg).rsample((2,)),
    lambda: (_x(3, 4, rg=True),),
)
_shape_case(
    "ss_mixture_sample",
    lambda w, m: D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, 1.0)).sample((6,)),
    lambda: (_x(3), _x(3, seed=1)),
)
_shape_case(
    "ss_independent_rsample",
    lambda m: D.Independent(D.Normal(m, 1.0), 1).rsample((2,)),
    lambda: (_x(3, 2, rg=True),),
)
_shape_case(
    "ss_transformed_rsample",
    lambda m: D.TransformedDistribution(D.Normal(m, 1.0), [D.transforms.TanhTransform()]).rsample(
        (2,)
    ),
    lambda: (_x(3, rg=True),),
)
_shape_case(
    "ss_laplace_rsample", lambda m: D.Laplace(m, 1.0).rsample((2,)), lambda: (_x(3, rg=True),)
)
_shape_case(
    "ss_studentt_rsample",
    lambda m: D.StudentT(3.0, m, 1.0).rsample((2,)),
    lambda: (_x(3, rg=True),),
)
_shape_case("ss_multinomial_fn", lambda p: torch.multinomial(p, 3, True), lambda: (_pos(2, 4),))
_shape_case(
    "ss_bernoulli_fn_f64", torch.bernoulli, lambda: (torch.full((3,), 0.5, dtype=torch.float64),)
)
_shape_case("ss_poisson_fn", torch.poisson, lambda: (_pos(3, dtype=torch.float64),))
_shape_case(
    "ss_cat_sample_no_grad_param",
    lambda lg: D.Categorical(logits=lg).sample() + 0,
    lambda: (_x(3, 4, rg=True),),
)


def _check_case(name, f, make):
    """``f(C, *inputs)`` returns booleans and metadata that eager's draw satisfies too."""

    def sc(C, rec):
        rec("checks", f(C, *make()))

    sc.__name__ = name
    SCENARIOS[name] = sc


def _normal_rsample_grads(C, mu, ls):
    def f(mu, ls):
        return D.Normal(mu, ls.exp()).rsample((200,))

    s = C(f)(mu, ls)
    gm, gl = torch.autograd.grad(s.pow(2).sum(), (mu, ls))
    eps = (s.detach() - mu.detach()) / ls.detach().exp()
    wm = (2 * s.detach()).sum(0)
    wl = (2 * s.detach() * eps * ls.detach().exp()).sum(0)
    return [
        bool(torch.allclose(gm, wm, rtol=1e-4, atol=1e-4)),
        bool(torch.allclose(gl, wl, rtol=1e-4, atol=1e-3)),
    ]


_check_case(
    "rg_normal_rsample_grads",
    _normal_rsample_grads,
    lambda: (_x(3, rg=True), _x(3, seed=1, rg=True)),
)


def _gamma_rsample_grads(C, a, b):
    def f(a, b):
        return D.Gamma(a, b).rsample((500,))

    s = C(f)(a, b)
    ga, gb = torch.autograd.grad(s.sum(), (a, b))
    x = s.detach() * b.detach()  # (the standard gamma draw)
    want_a = (torch._standard_gamma_grad(a.detach().expand_as(x), x) / b.detach()).sum(0)
    want_b = (-s.detach() / b.detach()).sum(0)
    return [
        bool((s > 0).all()),
        bool(torch.allclose(ga, want_a, rtol=1e-5, atol=1e-6)),
        bool(torch.allclose(gb, want_b, rtol=1e-5, atol=1e-6)),
    ]


_check_case(
    "rg_gamma_rsample_grads",
    _gamma_rsample_grads,
    lambda: (_pos(3, rg=True), _pos(3, seed=1, rg=True)),
)
_check_case(
    "rg_gamma_rsample_grads_f64",
    _gamma_rsample_grads,
    lambda: (_pos(3, dtype=torch.float64, rg=True), _pos(3, seed=1, dtype=torch.float64, rg=True)),
)


def _dirichlet_rsample_grads(C, a):
    def f(a):
        return D.Dirichlet(a).rsample((300,))

    s = C(f)(a)
    w = torch.arange(1.0, 4.0, dtype=a.dtype)
    (ga,) = torch.autograd.grad((s * w).sum(), (a,))
    x = s.detach()
    al = a.detach().expand_as(x)
    # eager's backward of _sample_dirichlet: grad * _dirichlet_grad(x, alpha, total)
    gx = w.expand_as(x)
    total = al.sum(-1, keepdim=True).expand_as(al)
    dg = torch._dirichlet_grad(x, al, total)
    want = (gx * dg).sum(0)
    return [
        bool(torch.allclose(x.sum(-1), torch.ones(300, dtype=a.dtype))),
        bool(torch.allclose(ga, want, rtol=1e-4, atol=1e-4)),
    ]


_check_case("rg_dirichlet_rsample_grads", _dirichlet_rsample_grads, lambda: (_pos(3, rg=True) * 2,))


def _mvn_rsample_grads(C, m, c):
    def f(m, c):
        return D.MultivariateNormal(m, covariance_matrix=c).rsample((50,))

    s = C(f)(m, c)
    gm, gc = torch.autograd.grad(s.sum(), (m, c))
    return [
        bool(torch.allclose(gm, torch.full_like(gm, 50.0))),
        gc.shape,
        bool(torch.isfinite(gc).all()),
    ]


_check_case(
    "rg_mvn_rsample_grads", _mvn_rsample_grads, lambda: (_x(3, rg=True), _spd(3).requires_grad_())
)


def _score_function_estimator(C, lg):
    """REINFORCE's gradient estimate from compiled draws equals eager's formula on them."""

    def f(lg):
        d = D.Categorical(logits=lg)
        a = d.sample((100,))
        reward = (a == 2).float()
        return a, (d.log_prob(a) * reward).mean()

    a, est = C(f)(lg)
    (g,) = torch.autograd.grad(est, (lg,))
    lg2 = lg.detach().requires_grad_()
    est2 = (D.Categorical(logits=lg2).log_prob(a) * (a == 2).float()).mean()
    (g2,) = torch.autograd.grad(est2, (lg2,))
    return [
        bool(torch.allclose(est.detach(), est2.detach(), atol=1e-6)),
        bool(torch.allclose(g, g2, atol=1e-6)),
    ]


_check_case("rg_score_function_estimator", _score_function_estimator, lambda: (_x(4, rg=True),))


def _support(C, a):
    def f(a):
        return (
            D.Beta(a, a).sample((2000,)),
            D.Gamma(a * 0.01, 1.0).sample((2000,)),
            D.Poisson(a * 3).sample((2000,)),
            D.Bernoulli(logits=a).sample((2000,)),
        )

    b, g, p, be = C(f)(a)
    return [
        bool(((b >= 0) & (b <= 1)).all()),
        bool((g > 0).all()),
        bool((p == p.round()).all() and (p >= 0).all()),
        bool(((be == 0) | (be == 1)).all()),
    ]


_check_case("rg_support", _support, lambda: (_pos(3),))


# ============================================================================================
# Distribution objects crossing the compiled boundary, validation toggled, second calls
@scenario
def obj_policy_module_returns_distribution(C, rec):
    pol = _Policy()
    f = C(pol)
    for k in range(2):
        d, v = f(_x(5, 4, seed=k))
        a = torch.tensor([0, 1, 2, 1, 0])
        lp = d.log_prob(a)
        rec(f"dist{k}", [type(d).__name__, d.logits, d.probs, d.batch_shape, lp, v])
        (lp.sum() + v.sum()).backward()
    rec("grads", [p.grad for p in pol.parameters()])


@scenario
def obj_gaussian_module_returns_distribution(C, rec):
    pol = _Policy(continuous=True)
    f = C(pol)
    d, _v = f(_x(5, 4))
    a = _x(5, 3, seed=1)
    lp = d.log_prob(a).sum()
    rec("dist", [type(d).__name__, d.loc, d.scale, lp, d.entropy()])
    lp.backward()
    rec("grads", [p.grad for p in pol.parameters()])


@scenario
def obj_distribution_as_argument(C, rec):
    def f(d, a):
        return d.log_prob(a), d.entropy(), d.mean

    fn = C(f)
    m = _x(3, rg=True)
    for k in range(2):
        d = D.Normal(m * (k + 1), torch.ones(3))
        rec(f"out{k}", fn(d, _x(3, seed=k)))
    d = D.Categorical(logits=_x(2, 3))
    rec("cat", C(lambda d, a: d.log_prob(a))(d, torch.tensor([0, 2])))


@scenario
def obj_distribution_from_closure(C, rec):
    d = D.MultivariateNormal(_x(3), scale_tril=torch.linalg.cholesky(_spd(3)))

    def f(v):
        return d.log_prob(v), d.covariance_matrix

    rec("out", C(f)(_x(2, 3, seed=1)))


@scenario
def obj_distribution_expand(C, rec):
    def f(m, v):
        d = D.Normal(m, 1.0).expand((4, 3))
        return d.log_prob(v), d.batch_shape

    rec("out", C(f)(_x(3, rg=True), _x(4, 3, seed=1)))


@scenario
def va_bad_value_on_second_call(C, rec):
    def f(a, v):
        return D.Beta(a, a).log_prob(v)

    fn = C(f)
    rec("ok", fn(_pos(2), torch.tensor([0.3, 0.6])))
    rec("bad", fn(_pos(2), torch.tensor([0.3, 1.6])))


@scenario
def va_bad_param_on_second_call(C, rec):
    def f(m, s, v):
        return D.Normal(m, s).log_prob(v)

    fn = C(f)
    rec("ok", fn(_x(2), _pos(2), _x(2, seed=1)))
    rec("bad", fn(_x(2), torch.tensor([1.0, 0.0]), _x(2, seed=1)))


@scenario
def va_default_toggled_between_calls(C, rec):
    def f(m, s, v):
        return D.Normal(m, s).log_prob(v)

    fn = C(f)
    old = D.Distribution._validate_args
    try:
        D.Distribution.set_default_validate_args(False)
        rec("off", fn(_x(2), torch.tensor([1.0, -1.0]), _x(2, seed=1)))
        D.Distribution.set_default_validate_args(True)
        rec("on", fn(_x(2), torch.tensor([1.0, -1.0]), _x(2, seed=1)))
    finally:
        D.Distribution.set_default_validate_args(old)


@scenario
def va_nan_logits(C, rec):
    rec("out", C(lambda lg: D.Categorical(logits=lg).probs)(torch.tensor([0.0, float("nan")])))


# ============================================================================================
# More sampling APIs: gumbel_softmax, normal's derivative, gamma's elementwise derivative
@scenario
def gumbel_softmax_grads(C, rec):
    def f(lg, w):
        y = torch.nn.functional.gumbel_softmax(lg, tau=0.5, hard=False)
        return (y * w).sum(), y.sum(-1)

    lg = _x(4, 5, rg=True)
    out, rows = C(f)(lg, _x(4, 5, seed=1))
    out.backward()
    rec("meta", [out.shape, bool(torch.allclose(rows, torch.ones(4))), lg.grad.shape])
    rec("grad_rows_sum_zero", bool(torch.allclose(lg.grad.sum(-1), torch.zeros(4), atol=1e-5)))


@scenario
def gumbel_softmax_hard_straight_through(C, rec):
    def f(lg):
        return torch.nn.functional.gumbel_softmax(lg, tau=1.0, hard=True)

    lg = _x(6, 4, rg=True)
    y = C(f)(lg)
    rec("onehot", [bool(((y == 0) | (y == 1)).all()), y.sum(-1), y.requires_grad])


_grads_case(
    "normal_fn_grads_are_zero",
    lambda m, s: torch.normal(m, s) * 0 + torch.normal(m, 1.0) * 0 + torch.normal(0.0, s) * 0,
    lambda k: (_x(3), _pos(3, seed=1)),
)
_grads_case(
    "normal_fn_grads_are_zero_f64",
    lambda m, s: torch.normal(m, s).sum() * 0,
    lambda k: (_x(3, dtype=torch.float64), _pos(3, seed=1, dtype=torch.float64)),
)


def _gamma_grad_elementwise(C, a):
    def f(a):
        return torch._standard_gamma(a)

    x = C(f)(a)
    (g,) = torch.autograd.grad(x.sum(), (a,))
    want = torch._standard_gamma_grad(a.detach(), x.detach())
    if a.dtype == torch.float64:  # (jnp's pow and log are within an ulp of glibc's)
        return [bool(torch.allclose(g, want, rtol=1e-14, atol=0)), x.dtype]
    return [torch.equal(g, want), x.dtype]


_check_case(
    "rg_standard_gamma_grad_exact",
    _gamma_grad_elementwise,
    lambda: (torch.tensor([0.05, 0.5, 1.0, 3.0, 7.5, 9.0, 30.0, 200.0] * 8).requires_grad_(),),
)
_check_case(
    "rg_standard_gamma_grad_exact_f64",
    _gamma_grad_elementwise,
    lambda: (
        torch.tensor(
            [0.05, 0.5, 1.0, 3.0, 7.5, 9.0, 30.0, 200.0] * 8, dtype=torch.float64
        ).requires_grad_(),
    ),
)
_grads_case(
    "standard_gamma_grad_op",
    lambda a, x: torch._standard_gamma_grad(a, x),
    lambda k: (torch.tensor([0.5, 9.0, 2.0, 20.0]), torch.tensor([0.3, 9.1, 3.0, 1.0])),
)


def _support2(C, p):
    def f(p):
        return (
            D.Binomial(torch.tensor([3.0, 10.0, 0.0]), probs=p).sample((500,)),
            D.Geometric(probs=p).sample((500,)),
            D.NegativeBinomial(torch.tensor([2.0, 5.0, 1.0]), probs=p).sample((500,)),
            D.Categorical(probs=torch.tensor([0.0, 0.3, 0.0, 0.7])).sample((500,)),
            D.RelaxedOneHotCategorical(torch.tensor(0.3), logits=p).rsample((50,)),
            D.TransformedDistribution(
                D.Normal(p * 10, 5.0), [D.transforms.TanhTransform()]
            ).rsample((500,)),
        )

    b, g, nb, c, r, t = C(f)(p)
    return [
        bool(((b >= 0) & (b <= torch.tensor([3.0, 10.0, 0.0])) & (b == b.round())).all()),
        bool(((g >= 0) & (g == g.round())).all()),
        bool(((nb >= 0) & (nb == nb.round())).all()),
        bool(((c == 1) | (c == 3)).all()),
        bool(torch.allclose(r.sum(-1), torch.ones(50))),
        bool(((t >= -1) & (t <= 1)).all()),
        [x.dtype for x in (b, g, nb, c, r, t)],
    ]


_check_case("rg_support_discrete", _support2, lambda: (torch.tensor([0.2, 0.5, 0.9]),))


def _uniform_laplace_exponential_rsample_grads(C, lo, hi, rate):
    def f(lo, hi, rate):
        return D.Uniform(lo, hi).rsample((100,)), D.Exponential(rate).rsample((100,))

    u, e = C(f)(lo, hi, rate)
    glo, ghi, grate = torch.autograd.grad(u.sum() + e.sum(), (lo, hi, rate))
    t = (u.detach() - lo.detach()) / (hi.detach() - lo.detach())
    return [
        bool(torch.allclose(glo, (1 - t).sum(0), rtol=1e-4)),
        bool(torch.allclose(ghi, t.sum(0), rtol=1e-4)),
        bool(torch.allclose(grate, (-e.detach() / rate.detach()).sum(0), rtol=1e-4)),
    ]


_check_case(
    "rg_uniform_exponential_rsample_grads",
    _uniform_laplace_exponential_rsample_grads,
    lambda: (
        torch.zeros(3).requires_grad_(),
        torch.ones(3).mul(2).requires_grad_(),
        _pos(3, rg=True),
    ),
)


def _studentt_rsample_df_grad(C, df):
    def f(df):
        return D.Chi2(df).rsample()

    x = C(f)(df)
    (g,) = torch.autograd.grad(x.sum(), (df,))
    # Chi2(df) = Gamma(df / 2, 1 / 2): d x / d df = _standard_gamma_grad(df / 2, x / 2)
    want = torch._standard_gamma_grad(df.detach() / 2, x.detach() / 2)
    return [bool(torch.allclose(g, want, rtol=1e-6, atol=0))]


_check_case("rg_chi2_rsample_df_grad", _studentt_rsample_df_grad, lambda: (_pos(20, rg=True) * 3,))


@scenario
def fullgraph_log_prob_validation_on(C, rec):
    def f(m, s, v):
        return D.Normal(m, s).log_prob(v)

    rec("out", C(f, fullgraph=True)(_x(3), _pos(3), _x(3, seed=1)))


@scenario
def fullgraph_log_prob_validation_off(C, rec):
    def f(m, s, v):
        return D.Normal(m, s, validate_args=False).log_prob(v), D.Categorical(
            logits=m, validate_args=False
        ).entropy()

    rec("out", C(f, fullgraph=True)(_x(3), _pos(3), _x(3, seed=1)))


@scenario
def fullgraph_sample_validation_off(C, rec):
    def f(lg):
        d = D.Categorical(logits=lg, validate_args=False)
        a = d.sample()
        return a.shape, d.log_prob(a).shape

    rec("out", C(f, fullgraph=True)(_x(4, 3)))


@scenario
def seed_reproducible_compiled_sampling(C, rec):
    def f(lg, m):
        return D.Categorical(logits=lg).sample((5,)), D.Normal(m, 1.0).sample((3,))

    fn = C(f)
    torch.manual_seed(5)
    a = fn(_x(4), _x(2))
    torch.manual_seed(5)
    b = fn(_x(4), _x(2))
    c = fn(_x(4), _x(2))
    rec("same_seed_same", [torch.equal(a[0], b[0]), torch.equal(a[1], b[1])])
    rec("next_call_differs", not torch.equal(b[1], c[1]))


@scenario
def gen_created_inside(C, rec):
    def f(x):
        g = torch.Generator().manual_seed(11)
        return x + torch.randn(3, generator=g), torch.multinomial(x.abs() + 0.1, 2, generator=g)

    fn = C(f)
    rec("a", fn(_x(3)))
    rec("b", fn(_x(3)))


@scenario
def gen_manual_seed_inside(C, rec):
    g = torch.Generator()

    def f(x):
        g.manual_seed(4)
        a = torch.rand(3, generator=g)
        s = g.get_state()
        b = torch.rand(3, generator=g)
        g.set_state(s)
        c = torch.rand(3, generator=g)
        return x + a, b, c

    fn = C(f)
    rec("a", fn(_x(3)))
    rec("state", g.get_state())


@scenario
def gen_nn_init_with_generator(C, rec):
    def f(w, g):
        torch.nn.init.normal_(w, 0.0, 0.02, generator=g)
        torch.nn.init.uniform_(w[0], -0.1, 0.1, generator=g)
        return w * 2

    g = torch.Generator().manual_seed(2)
    w = torch.zeros(3, 4)
    rec("out", C(f)(w, g))
    rec("w", w)
    rec("state", g.get_state())


@scenario
def seed_inside_compiled_repeats(C, rec):
    def f(x):
        torch.manual_seed(3)
        return x + torch.rand(3), D.Categorical(logits=x).sample((4,))

    fn = C(f)
    a, b = fn(_x(3)), fn(_x(3))
    rec("repeat", [torch.equal(a[0], b[0]), torch.equal(a[1], b[1])])
    rec("state_after", torch.get_rng_state().shape)


@scenario
def gen_random_inplace(C, rec):
    def f(x, g):
        return (
            x.clone().random_(0, 10, generator=g),
            x.clone().geometric_(0.3, generator=g),
            x.clone().cauchy_(generator=g),
            x.clone().log_normal_(generator=g),
        )

    g = torch.Generator().manual_seed(9)
    rec("out", C(f)(torch.zeros(4), g))
    rec("state", g.get_state())


@scenario
def gen_dropout_like_mask(C, rec):
    def f(x, g):
        keep = torch.rand(x.shape, generator=g) > 0.3
        return x * keep / 0.7

    g = torch.Generator().manual_seed(1)
    x = _x(4, 5, rg=True)
    out = C(f)(x, g)
    out.sum().backward()
    rec("out", out)
    rec("grad", x.grad)


# ============================================================================================
# torch.func and higher derivatives over distributions
_grads_case(
    "func_vmap_log_prob",
    lambda m, s, v: torch.vmap(lambda mm, vv: D.Normal(mm, s).log_prob(vv).sum())(m, v),
    lambda k: (_x(4, 3), _pos(3, seed=1), _x(4, 3, seed=2)),
)
_grads_case(
    "func_grad_log_prob_score",
    lambda m, v: torch.func.grad(lambda mm: D.Normal(mm, 2.0).log_prob(v).sum())(m),
    lambda k: (_x(3), _x(3, seed=2)),
)
_grads_case(
    "func_jacrev_categorical_log_prob",
    lambda lg: torch.func.jacrev(lambda l: D.Categorical(logits=l).log_prob(torch.tensor([0, 2])))(
        lg
    ),
    lambda k: (_x(2, 3),),
)
_grads_case(
    "func_hessian_mvn_log_prob",
    lambda m, v: torch.func.hessian(
        lambda mm: D.MultivariateNormal(mm, covariance_matrix=_spd(3)).log_prob(v)
    )(m),
    lambda k: (_x(3), _x(3, seed=2)),
)


@scenario
def double_backward_log_prob(C, rec):
    def f(m, ls, v):
        lp = D.Normal(m, ls.exp()).log_prob(v).sum()
        (g,) = torch.autograd.grad(lp, m, create_graph=True)
        return g.pow(2).sum()

    m, ls = _x(3, rg=True), _x(3, seed=1, rg=True)
    out = C(f)(m, ls, _x(3, seed=2))
    out.backward()
    rec("out", out)
    rec("grads", [m.grad, ls.grad])


@scenario
def double_backward_gamma_rsample(C, rec):
    def f(a):
        return D.Gamma(a, 1.0).rsample()

    a = _pos(3, rg=True)
    x = C(f)(a)
    (g,) = torch.autograd.grad(x.sum(), a, create_graph=True)
    rec("g_requires_grad", g.requires_grad)
    (gg,) = torch.autograd.grad(g.sum(), a)
    rec("gg_shape", gg.shape)


@scenario
def func_grad_gamma_rsample(C, rec):
    def f(a):
        def draw(aa):
            x = torch._standard_gamma(aa)
            return x.sum(), x

        return torch.func.grad(draw, has_aux=True)(a)

    a = _pos(6) * 3
    g, x = C(f)(a)
    rec("eagers", [g.dtype, torch.equal(g, torch._standard_gamma_grad(a, x))])


# ============================================================================================
# Less common families: every method eager has, values and gradients
def _methods(d, v, names):
    out = []
    for n in names:
        if n == "log_prob":
            out.append(d.log_prob(v))
        elif n in ("cdf", "icdf"):
            out.append(getattr(d, n)(v))
        elif n == "entropy":
            out.append(d.entropy())
        else:
            out.append(getattr(d, n))
    return tuple(out)


_ALL = ("log_prob", "entropy", "mean", "variance", "stddev")
_FAMILIES = {
    "continuous_bernoulli": (
        lambda p, v: D.ContinuousBernoulli(probs=p),
        lambda: (
            torch.tensor([0.2, 0.499, 0.5, 0.501, 0.9]),
            torch.tensor([0.1, 0.3, 0.5, 0.7, 0.99]),
        ),
        (*_ALL, "cdf", "icdf"),
    ),
    "continuous_bernoulli_logits": (
        lambda lg, v: D.ContinuousBernoulli(logits=lg),
        lambda: (
            torch.tensor([-2.0, -1e-3, 0.0, 1e-3, 3.0]),
            torch.tensor([0.1, 0.3, 0.5, 0.7, 0.99]),
        ),
        (*_ALL, "cdf"),
    ),
    "pareto": (
        lambda a, v: D.Pareto(1.0 + a * 0, a + 2.0),
        lambda: (_pos(3), torch.tensor([1.5, 2.0, 5.0])),
        (*_ALL, "cdf", "icdf"),
    ),
    "half_cauchy": (
        lambda s, v: D.HalfCauchy(s),
        lambda: (_pos(3), torch.tensor([0.1, 1.0, 5.0])),
        ("log_prob", "entropy", "cdf", "icdf"),
    ),
    "inverse_gamma": (
        lambda a, v: D.InverseGamma(a + 2.0, a + 1.0),
        lambda: (_pos(3), torch.tensor([0.5, 1.0, 3.0])),
        _ALL,
    ),
    "fisher_snedecor": (
        lambda a, v: D.FisherSnedecor(a + 4.0, a + 5.0),
        lambda: (_pos(3), torch.tensor([0.5, 1.0, 3.0])),
        ("log_prob", "mean", "variance"),
    ),
    "kumaraswamy": (
        lambda a, v: D.Kumaraswamy(a, a + 1.0),
        lambda: (_pos(3), torch.tensor([0.2, 0.5, 0.7])),
        _ALL,
    ),
    "logistic_normal": (
        lambda m, v: D.LogisticNormal(m, torch.ones(2)),
        lambda: (_x(2), torch.tensor([0.2, 0.3, 0.5])),
        ("log_prob",),
    ),
    "binomial_entropy": (
        lambda p, v: D.Binomial(4, probs=p),
        lambda: (torch.tensor([0.2, 0.7]), torch.tensor([1.0, 4.0])),
        ("log_prob", "entropy", "mean", "variance", "mode"),
    ),
    "multinomial_entropy": (
        lambda p, v: D.Multinomial(3, probs=p),
        lambda: (_pos(3), torch.tensor([1.0, 2.0, 0.0])),
        ("log_prob", "entropy", "mean", "variance"),
    ),
    "negative_binomial": (
        lambda p, v: D.NegativeBinomial(torch.tensor([2.0, 3.0]), logits=p),
        lambda: (_x(2), torch.tensor([0.0, 4.0])),
        ("log_prob", "mean", "variance", "mode"),
    ),
    "geometric_logits": (
        lambda lg, v: D.Geometric(logits=lg),
        lambda: (_x(3), torch.tensor([0.0, 2.0, 5.0])),
        ("log_prob", "entropy", "mean", "variance"),
    ),
    "lkj_cholesky": (
        lambda c, v: D.LKJCholesky(3, c + 0.5),
        lambda: (
            _pos(1)[0],
            torch.linalg.cholesky(_spd(3) / 3**0.5).div(
                torch.linalg.cholesky(_spd(3) / 3**0.5).norm(dim=-1, keepdim=True)
            ),
        ),
        ("log_prob",),
    ),
    "wishart": (
        lambda df, v: D.Wishart(df + 3.0, covariance_matrix=_spd(3)),
        lambda: (_pos(1)[0], _spd(3, seed=2)),
        ("log_prob", "entropy", "mean", "variance", "mode"),
    ),
    "lowrank_mvn": (
        lambda m, v: D.LowRankMultivariateNormal(m, torch.ones(3, 1) * 0.3, torch.ones(3)),
        lambda: (_x(3), _x(3, seed=1)),
        ("log_prob", "entropy", "variance", "mean"),
    ),
    "von_mises": (
        lambda c, v: D.VonMises(torch.zeros(3), c),
        lambda: (_pos(3), torch.tensor([0.1, 1.0, 3.0])),
        ("log_prob", "mean", "variance"),
    ),
    "gumbel": (
        lambda m, v: D.Gumbel(m, 2.0),
        lambda: (_x(3), _x(3, seed=2)),
        (*_ALL, "cdf", "icdf"),
    ),
    "weibull": (
        lambda s, v: D.Weibull(s, s + 0.5),
        lambda: (_pos(3), _pos(3, seed=2)),
        (*_ALL, "cdf", "icdf"),
    ),
    "generalized_pareto": (
        lambda s, v: D.GeneralizedPareto(torch.zeros(3), s, torch.tensor([-0.2, 0.0, 0.3])),
        lambda: (_pos(3), torch.tensor([0.5, 1.0, 2.0])),
        (*_ALL, "cdf", "icdf"),
    ),
}
for _n, (_mk, _args, _names) in _FAMILIES.items():
    if _n == "generalized_pareto" and not hasattr(D, "GeneralizedPareto"):
        continue
    _grads_case(
        f"fam_{_n}",
        lambda p, v, _mk=_mk, _names=_names: _methods(_mk(p, v), v, _names),
        lambda k, _args=_args: _args(),
    )


# ============================================================================================
# Errors of sampling ops at run time, and the generators' states they leave
def _err_state_case(name, f, make):
    def sc(C, rec):
        g = torch.Generator().manual_seed(5)
        fn = C(f)
        out = fn(*make(False), g)
        rec("ok", [out.shape, out.dtype])
        rec("state_ok", g.get_state())
        before, g_before = torch.get_rng_state(), g.get_state()
        try:
            fn(*make(True), g)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            rec("raised", e)
        after, g_after = torch.get_rng_state(), g.get_state()
        # both generators as eager's failing call leaves them, from where this one began
        torch.set_rng_state(before)
        g.set_state(g_before)
        try:
            f(*make(True), g)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            rec("eager_raised", isinstance(e, RuntimeError))
        rec(
            "states_as_eagers",
            [torch.equal(after, torch.get_rng_state()), torch.equal(g_after, g.get_state())],
        )

    sc.__name__ = name
    SCENARIOS[name] = sc


_err_state_case(
    "err_multinomial_negative_prob",
    lambda p, g: torch.multinomial(p, 2, True, generator=g),
    lambda bad: (torch.tensor([0.3, -0.1 if bad else 0.1, 0.5]),),
)
_err_state_case(
    "err_categorical_nan_logits_no_validate",
    lambda lg, g: D.Categorical(logits=lg, validate_args=False).sample((2,)),
    lambda bad: (torch.tensor([0.3, float("nan") if bad else 0.1, 0.5]),),
)
_err_state_case(
    "err_bernoulli_prob_gt_1",
    lambda p, g: torch.bernoulli(p, generator=g) + torch.rand(3, generator=g),
    lambda bad: (torch.tensor([0.3, 1.5 if bad else 0.5, 0.5]),),
)
_err_state_case(
    "err_poisson_negative_rate_no_generator",
    lambda r, g: torch.poisson(r),
    lambda bad: (torch.tensor([0.3, -1.0 if bad else 1.0, 0.5]),),
)
_err_state_case(
    "err_normal_negative_std_tensor",
    lambda s, g: torch.normal(torch.zeros(3), s, generator=g),
    lambda bad: (torch.tensor([0.3, -1.0 if bad else 1.0, 0.5]),),
)
_err_state_case(
    "err_bernoulli_default_generator_after_draw",
    lambda p, g: (torch.rand(3) * 0).sum() + torch.bernoulli(p).sum(),
    lambda bad: (torch.tensor([0.3, 1.5 if bad else 0.5, 0.5]),),
)


# ============================================================================================
# Half precision and autocast
for _dt in (torch.bfloat16, torch.float16):
    _sfx = str(_dt).split(".")[1]
    _grads_case(
        f"half_normal_{_sfx}",
        lambda m, s, v: (
            D.Normal(m, s).log_prob(v),
            D.Normal(m, s).entropy(),
            D.Normal(m, s).cdf(v),
        ),
        lambda k, _dt=_dt: (_x(5, dtype=_dt), _pos(5, seed=1, dtype=_dt), _x(5, seed=2, dtype=_dt)),
    )
    _grads_case(
        f"half_categorical_{_sfx}",
        lambda lg, a: (D.Categorical(logits=lg).log_prob(a), D.Categorical(logits=lg).entropy()),
        lambda k, _dt=_dt: (_x(3, 6, dtype=_dt), torch.tensor([0, 5, 2])),
    )
    _grads_case(
        f"half_bernoulli_{_sfx}",
        lambda lg, v: D.Bernoulli(logits=lg).log_prob(v),
        lambda k, _dt=_dt: (_x(5, dtype=_dt), torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=_dt)),
    )


@scenario
def autocast_policy_log_prob(C, rec):
    pol = _Policy()

    def step(obs, act, adv):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            d, _v = pol(obs)
            lp = d.log_prob(act)
        loss = -(lp.float() * adv).mean() - 0.01 * d.entropy().float().mean()
        loss.backward()
        return loss.detach(), lp.dtype, d.logits.dtype

    rec("out", C(step)(_x(5, 4), torch.tensor([0, 1, 2, 1, 0]), _x(5, seed=3)))
    rec("grads", [p.grad for p in pol.parameters()])


_shape_case(
    "ss_normal_bf16_sample",
    lambda m: D.Normal(m, 1.0).rsample((3,)),
    lambda: (_x(4, dtype=torch.bfloat16, rg=True),),
)
_shape_case(
    "ss_cat_bf16_sample",
    lambda lg: D.Categorical(logits=lg).sample((3,)),
    lambda: (_x(4, dtype=torch.bfloat16),),
)


# ============================================================================================
# Whole small programs whose draws come from a user's generator: values equal eager's
class _Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.net = nn.Sequential(nn.Linear(5, 16), nn.SiLU(), nn.Linear(16, 4))

    def forward(self, x, t):
        return self.net(torch.cat([x, t[:, None].float() / 100], -1))


@scenario
def prog_diffusion_training_step_generator(C, rec):
    model = _Denoiser()
    betas = torch.linspace(1e-4, 0.02, 100)
    abar = torch.cumprod(1 - betas, 0)

    def step(x0, g):
        t = torch.randint(0, 100, (x0.shape[0],), generator=g)
        noise = torch.randn(x0.shape, generator=g)
        a = abar[t][:, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = torch.nn.functional.mse_loss(model(xt, t), noise)
        loss.backward()
        return loss.detach(), t

    f = C(step)
    g = torch.Generator().manual_seed(0)
    for k in range(2):
        model.zero_grad(set_to_none=True)
        rec(f"step{k}", f(_x(6, 4, seed=k), g))
        rec(f"grads{k}", [p.grad for p in model.parameters()])
    rec("state", g.get_state())


@scenario
def prog_vae_reparam_generator(C, rec):
    torch.manual_seed(3)
    enc, dec = nn.Linear(6, 4), nn.Linear(2, 6)

    def step(x, g):
        mu, lv = enc(x).chunk(2, -1)
        std = (0.5 * lv).exp()
        z = mu + std * torch.randn(mu.shape, generator=g)
        rec_lp = D.Independent(D.Bernoulli(logits=dec(z)), 1).log_prob(x)
        kl = D.kl_divergence(D.Normal(mu, std), D.Normal(0.0, 1.0)).sum(-1)
        loss = (kl - rec_lp).mean()
        loss.backward()
        return loss.detach()

    g = torch.Generator().manual_seed(1)
    rec("loss", C(step)((_x(5, 6) > 0).float(), g))
    rec("grads", [p.grad for p in [*enc.parameters(), *dec.parameters()]])


@scenario
def prog_iwae_bound_generator(C, rec):
    def bound(mu, ls, x, g):
        q = D.Normal(mu, ls.exp())
        eps = torch.randn((8, *mu.shape), generator=g)
        z = mu + ls.exp() * eps
        log_w = D.Normal(z, 1.0).log_prob(x).sum(-1) + D.Normal(0.0, 1.0).log_prob(z).sum(-1)
        log_w = log_w - q.log_prob(z).sum(-1)
        return (torch.logsumexp(log_w, 0) - torch.log(torch.tensor(8.0))).mean()

    mu, ls = _x(3, 2, rg=True), _x(3, 2, seed=1, rg=True)
    g = torch.Generator().manual_seed(4)
    out = C(bound)(mu, ls, _x(3, 2, seed=2), g)
    out.backward()
    rec("out", out)
    rec("grads", [mu.grad, ls.grad])


_grads_case(
    "inplace_random_on_tracked_nonleaf",
    lambda x: (
        (x * 1).normal_() * 0 + x,
        (x * 1).uniform_() * 0 + x,
        (x * 1).exponential_() * 0,
        (x * 1).bernoulli_(0.5) * 0,
    ),
    lambda k: (_x(4),),
)
_grads_case(
    "random_ops_of_tracked_inputs",
    lambda p: (
        torch.poisson(p.exp()) * 0 + p,
        torch.bernoulli(p.sigmoid()) * 0,
        torch.rand_like(p) * 0 * p,
        torch.randn_like(p).requires_grad,
    ),
    lambda k: (_x(4),),
)


def main(argv: list[str]) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
