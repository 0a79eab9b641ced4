"""Random ops. Keys come from the per-call seed (drawn from torch's generator), one per node."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla.ops._common import as_dtype, is_array, out_dtype
from torch2xla.ops._gamma_grad import reparameterized
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _key():
    return ctx().next_key()


# -- the draws every random op is made of ------------------------------------------------------
def _wide(dtype) -> np.dtype:
    """The dtype a draw of ``dtype`` is made in: float64 for float64, else float32 (eager's
    CPU kernels draw half precision in float, then round)."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _uniform01(shape, dtype):
    """Uniform floats in [0, 1) of ``_wide(dtype)``, each ``k / 2**d`` with ``d`` random bits
    (24 for float32, 53 for float64), as eager's ``uniform_real_distribution``.

    NOTE: drawn in the target dtype, half precision gave only 1024 (float16) or 128 (bfloat16)
    distinct values, and JAX's normal of those lost its tails (|z| <= 3.2 in float16, 2.9 in
    bfloat16) and its Bernoulli a probability below 1 / 1024."""
    wide, shape = _wide(dtype), tuple(shape)
    if wide == np.float64:
        bits = jax.random.bits(_key(), shape, jnp.uint64) >> 11
        return bits.astype(wide) * wide.type(2.0**-53)
    bits = jax.random.bits(_key(), shape, jnp.uint32) >> 8
    return bits.astype(wide) * wide.type(2.0**-24)


def _below(v, dtype, lo, hi):
    """``v`` (a draw in ``[lo, hi)`` of a wider float) in ``dtype``, kept in ``[lo, hi)`` of
    ``dtype`` (``lo`` where that is empty, as eager's ``from``): rounded to nearest, a float32
    ``u`` within 2**-12 of 1 became a float16 1.0.

    NOTE: a clamp to the largest ``dtype`` value below ``hi``, not a test of the rounded value
    against ``v``: XLA's GPU compiler may keep the rounded value in float32 (its "excess
    precision"), which made that test false and let 1.0 through on CUDA."""
    if v.dtype == dtype:
        return v
    top = jnp.nextafter(as_dtype(hi, dtype), jnp.asarray(-jnp.inf, dtype))
    return jnp.maximum(jnp.minimum(v.astype(dtype), top), as_dtype(lo, dtype))


def _uniform(shape, dtype, low=0.0, high=1.0):
    """``uniform_(low, high)`` of a tensor of ``shape`` and ``dtype``: ``low + (high - low) * u``
    with ``low`` and ``high`` first cast to ``dtype`` (as eager); complex: its real and
    imaginary parts drawn alike."""
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        part = np.dtype(np.float64) if dtype == np.complex128 else np.dtype(np.float32)
        parts = _uniform((*shape, 2), part, low, high)
        return jax.lax.complex(parts[..., 0], parts[..., 1])
    wide = _wide(dtype)
    lo, hi = (as_dtype(as_dtype(b, dtype), wide) for b in (low, high))
    return _below(_uniform01(shape, dtype) * (hi - lo) + lo, dtype, lo, hi)


def _standard_normal(shape, dtype):
    """Standard normal draws of ``dtype``, made in ``_wide(dtype)``; complex: real and
    imaginary parts each of variance 1/2, as eager's ``randn``."""
    dtype, shape = np.dtype(dtype), tuple(shape)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        part = np.dtype(np.float64) if dtype == np.complex128 else np.dtype(np.float32)
        parts = _standard_normal((*shape, 2), part) * part.type(np.sqrt(0.5))
        return jax.lax.complex(parts[..., 0], parts[..., 1])
    return as_dtype(jax.random.normal(_key(), shape, _wide(dtype)), dtype)


@register(aten.rand.default)
def rand(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return _uniform(size, out_dtype())


@register(aten.randn.default)
def randn(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return _standard_normal(size, out_dtype())


@register(aten.rand_like.default)
def rand_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _uniform(self.shape, out_dtype())


@register(aten.randn_like.default)
def randn_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _standard_normal(self.shape, out_dtype())


# Eager's CPU kernels check their parameters' values; programs on a GPU do not (as the divisor
# checks: eager's CUDA kernels assert on the device or do not check).
_BERNOULLI_P = (
    "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
    "improved?  If so, please report an enhancement request to PyTorch.)"
)


def _check_parameter(valid, message: str) -> None:
    """A runtime check that every element of ``valid`` (a traced bool array) holds: eager
    raises ``message`` (a RuntimeError) for a parameter out of its range (NaN included)."""
    c = ctx()
    if c.checking and not c.on_cuda and valid.size:
        c.check(~jnp.all(valid), message)


def _bernoulli(shape, p, dtype):
    """Draws of ``dtype`` and ``shape``, 1 with probability ``p`` (broadcast to ``shape``):
    ``u < p`` with ``u`` of 24 random bits (53 for a float64 ``p``), as eager."""
    wide = _wide(p.dtype if is_array(p) else np.float32)
    u = _uniform01(shape, wide)
    return as_dtype(u < as_dtype(p, wide), dtype)


@register(aten.bernoulli.default)
def bernoulli(self, *, generator=None):
    _check_parameter((self >= 0) & (self <= 1), _BERNOULLI_P)
    return _bernoulli(self.shape, self, self.dtype)


@register(aten.bernoulli.p)
def bernoulli_p(self, p=0.5, *, generator=None):
    return _bernoulli(self.shape, p, self.dtype)


@register(aten.uniform.default)
def uniform(self, from_=0.0, to=1.0, *, generator=None):
    return _uniform(self.shape, self.dtype, from_, to)


@register(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor)
def normal(mean, std=1.0, *, generator=None):
    if hasattr(std, "shape"):  # (a float std is checked by the trace)
        _check_parameter(std >= 0, "normal expects all elements of std >= 0.0")
    out = out_dtype()
    wide = out if jnp.issubdtype(out, jnp.complexfloating) else _wide(out)
    z = _standard_normal(ctx().out.shape, wide)
    # NOTE: eager's derivative of normal in mean and std is zero (derivatives.yaml), not the
    # reparameterized one (1 and z) of this sum.
    mean, std = (jax.lax.stop_gradient(v) if is_array(v) else v for v in (mean, std))
    return as_dtype(z * as_dtype(std, wide) + as_dtype(mean, wide), out)


@register(aten.randint.low, aten.randint.default)
def randint(*args, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    low, high, size = (0, *args) if len(args) == 2 else args
    return jax.random.randint(_key(), tuple(size), low, high, jnp.int64).astype(out_dtype())


@register(aten.randperm.default)
def randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return jax.random.permutation(_key(), n).astype(out_dtype())


# -- in-place distributions (functionalized: they return a fresh tensor of self's shape) ---------
@register(aten.cauchy.default)
def cauchy(self, median=0.0, sigma=1.0, *, generator=None):
    u = _uniform01(self.shape, self.dtype)
    return as_dtype(median + sigma * jnp.tan(jnp.pi * (u - 0.5)), self.dtype)


@register(aten.exponential.default)
def exponential(self, lambd=1.0, *, generator=None):
    u = _uniform01(self.shape, self.dtype)
    # -log1p(-u) / lambd, as torch: u in [0, 1) gives finite, nonnegative draws.
    return as_dtype(-jnp.log1p(-u) / lambd, self.dtype)


@register(aten.geometric.default)
def geometric(self, p, *, generator=None):
    u = _uniform01(self.shape, self.dtype)
    # Number of Bernoulli(p) trials up to the first success (>= 1).
    draws = jnp.ceil(jnp.log1p(-u) / jnp.log1p(-p))
    return as_dtype(jnp.maximum(draws, 1), self.dtype)


@register(aten.log_normal.default)
def log_normal(self, mean=1.0, std=2.0, *, generator=None):
    z = _standard_normal(self.shape, _wide(self.dtype))
    return as_dtype(jnp.exp(mean + std * z), self.dtype)


@register(aten.normal_functional.default)
def normal_functional(self, mean=0.0, std=1.0, *, generator=None):
    z = _standard_normal(self.shape, _wide(self.dtype))
    return as_dtype(mean + std * z, self.dtype)


@register(aten.normal.float_float)
def normal_float_float(
    mean, std, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None
):
    out = out_dtype()
    return as_dtype(mean + std * _standard_normal(size, _wide(out)), out)


@register(aten.bernoulli.Tensor)
def bernoulli_tensor(self, p, *, generator=None):
    _check_parameter((p >= 0) & (p <= 1), _BERNOULLI_P)
    return _bernoulli(self.shape, jnp.broadcast_to(p, self.shape), self.dtype)


def _int_range(dtype):
    if jnp.issubdtype(dtype, jnp.floating):
        # torch's default range for floats: every integer the mantissa represents exactly.
        return 0, 2 ** (jnp.finfo(dtype).nmant + 1) + 1
    if dtype == jnp.bool_:
        return 0, 2
    return 0, int(jnp.iinfo(dtype).max)


@register(aten.random.default, aten.random.to, getattr(aten.random, "from"))
def random_(self, *args, generator=None):
    if len(args) == 0:
        low, high = _int_range(self.dtype)
    elif len(args) == 1:
        low, high = 0, args[0]
    else:
        low, high = args[0], args[1] if args[1] is not None else _int_range(self.dtype)[1]
    draws = jax.random.randint(_key(), self.shape, low, high, jnp.int64)
    return as_dtype(draws, self.dtype)


@register(aten.randint_like.default, aten.randint_like.low_dtype)
def randint_like(
    self, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    low, high = (0, args[0]) if len(args) == 1 else args
    return as_dtype(jax.random.randint(_key(), self.shape, low, high, jnp.int64), out_dtype())


# Eager's CPU errors for the probabilities, by the code ``_multinomial_code`` finds.
_MULTINOMIAL_ERRORS = (
    "",
    "probability tensor contains either `inf`, `nan` or element < 0",
    "invalid multinomial distribution (sum of probabilities <= 0)",
    "invalid multinomial distribution (encountering probability entry < 0)",
    "invalid multinomial distribution (encountering probability entry = infinity or NaN)",
)


def _multinomial_error(code: int) -> tuple[str, type]:
    from torch2xla._errors import OpError

    return _MULTINOMIAL_ERRORS[code], OpError


def _multinomial_code(probs, scan: bool):
    """(traced) The index in ``_MULTINOMIAL_ERRORS`` of eager's error for ``probs`` (rows of
    weights; 0: none). Without ``scan`` (no replacement, or one sample) eager checks the whole
    tensor first (``max < inf`` and ``min >= 0``, so NaN fails), then every row's sum; with it,
    the CPU kernel walks row by row, each element (``>= 0`` first, so NaN is "< 0"; then
    finite), then the row's sum."""
    # NOTE: a row of finite weights >= 0 sums to 0 iff every weight is +-0. Asked of the bits:
    # XLA's CPU flushes subnormals to zero, so a row of subnormal weights, which eager accepts,
    # would sum to (and compare equal to) 0.
    bits = jax.lax.bitcast_convert_type(probs, jnp.dtype(f"uint{probs.dtype.itemsize * 8}"))
    zero_row = jnp.all((bits << 1) == 0, -1)  # (the shift drops the sign bit)
    if not scan:
        bad = jnp.any(~(probs >= 0) | (probs == jnp.inf))
        return jnp.where(bad, 1, jnp.where(jnp.any(zero_row), 2, 0))
    element = jnp.where(~(probs >= 0), 3, jnp.where(jnp.isinf(probs), 4, 0))
    first = jnp.take_along_axis(element, jnp.argmax(element != 0, -1)[:, None], -1)[:, 0]
    row = jnp.where(first != 0, first, jnp.where(zero_row, 2, 0))
    return row[jnp.argmax(row != 0)]


@register(aten.multinomial.default)
def multinomial(self, num_samples, replacement=False, *, generator=None):
    probs = self if self.ndim == 2 else self[None]
    c = ctx()
    if c.checking and not c.on_cuda and probs.size:  # (CUDA's kernel asserts on the device)
        code = _multinomial_code(probs, replacement and num_samples > 1)
        c.check(code != 0, "", code, explain=_multinomial_error)
    # (in float64 for float64 weights: 1e-300 is no weight of zero)
    logits = jnp.log(as_dtype(probs, _wide(probs.dtype)))
    key = _key()
    if replacement:
        draws = jax.random.categorical(key, logits, axis=-1, shape=(num_samples, probs.shape[0]))
        draws = draws.T
    else:
        # Gumbel top-k: sampling without replacement in proportion to the weights.
        gumbel = jax.random.gumbel(key, logits.shape)
        draws = jnp.argsort(-(logits + gumbel), axis=-1)[:, :num_samples]
    draws = as_dtype(draws, np.dtype(np.int64))
    return draws if self.ndim == 2 else draws[0]


@register(aten.rrelu_with_noise_functional.default)
def rrelu_with_noise_functional(
    self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None
):
    if not training:
        slope = as_dtype((lower + upper) / 2, self.dtype)
        # (eager's backward is leaky_relu's: the slope at x = 0)
        return jnp.where(self > 0, self, self * slope), noise
    wide = jnp.promote_types(self.dtype, jnp.float32)
    r = as_dtype(jax.random.uniform(_key(), self.shape, wide, lower, upper), self.dtype)
    slopes = jnp.where(self <= 0, r, as_dtype(1, self.dtype))
    return self * slopes, as_dtype(slopes, noise.dtype)


@register(aten.poisson.default)
def poisson(self, generator=None):
    _check_parameter(self >= 0, "invalid Poisson rate, expected rate to be non-negative")
    return as_dtype(jax.random.poisson(_key(), self), self.dtype)


def _at_least_tiny(x):
    """``x`` with values below the smallest normal float of its dtype (NaN included) raised to
    it, as eager's ``std::max(min, sample)``: a gamma draw is never 0."""
    tiny = jnp.asarray(jnp.finfo(x.dtype).tiny, x.dtype)
    return jnp.where(x > tiny, x, tiny)


@register(aten._standard_gamma.default)
def _standard_gamma(self, generator=None):
    wide = _wide(self.dtype)
    alpha = as_dtype(jax.lax.stop_gradient(self), wide)
    draws = _at_least_tiny(as_dtype(jax.random.gamma(_key(), alpha), self.dtype))
    # (eager's derivative, not JAX's implicit one of jax.random.gamma: _gamma_grad.py)
    return reparameterized(self, draws)


@register(aten._sample_dirichlet.default)
def _sample_dirichlet(self, generator=None):
    # As eager's CPU kernel: gamma draws in float64 (at least its smallest normal), each row
    # divided by its sum, then kept in [smallest normal, largest float below 1] of the dtype.
    f64 = np.dtype(np.float64)
    gamma = _at_least_tiny(jax.random.gamma(_key(), as_dtype(self, f64)))
    draws = as_dtype(gamma / jnp.sum(gamma, -1, keepdims=True), self.dtype)
    below_one = jnp.nextafter(jnp.asarray(1, self.dtype), jnp.asarray(0, self.dtype))
    return jnp.clip(draws, jnp.finfo(self.dtype).tiny, below_one)


@register(aten.binomial.default)
def binomial(count, prob, generator=None):
    wide = jnp.promote_types(count.dtype, jnp.float32)
    n, p = as_dtype(count, wide), as_dtype(prob, wide)
    sample = jax.random.binomial(_key(), n, p)
    # eager's sampler: no draws (0) where count <= 0 or prob <= 0, all of them (count) where
    # prob >= 1 (JAX: NaN outside [0, 1] and for a negative count)
    sample = jnp.where(p >= 1, n, sample)
    return as_dtype(jnp.where((n <= 0) | (p <= 0), 0, sample), count.dtype)
