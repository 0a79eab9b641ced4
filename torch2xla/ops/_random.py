"""Random ops. Keys come from the per-call seed (drawn from torch's generator), one per node."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla.ops._common import as_dtype, out_dtype
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _key():
    return ctx().next_key()


def _float_dtype():
    return out_dtype()


@register(aten.rand.default)
def rand(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return jax.random.uniform(_key(), tuple(size), _float_dtype())


@register(aten.randn.default)
def randn(size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return jax.random.normal(_key(), tuple(size), _float_dtype())


@register(aten.rand_like.default)
def rand_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jax.random.uniform(_key(), self.shape, _float_dtype())


@register(aten.randn_like.default)
def randn_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return jax.random.normal(_key(), self.shape, _float_dtype())


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


@register(aten.bernoulli.default)
def bernoulli(self, *, generator=None):
    _check_parameter((self >= 0) & (self <= 1), _BERNOULLI_P)
    return as_dtype(jax.random.bernoulli(_key(), self), self.dtype)


@register(aten.bernoulli.p)
def bernoulli_p(self, p=0.5, *, generator=None):
    return as_dtype(jax.random.bernoulli(_key(), p, self.shape), self.dtype)


@register(aten.uniform.default)
def uniform(self, from_=0.0, to=1.0, *, generator=None):
    return jax.random.uniform(_key(), self.shape, self.dtype, from_, to)


@register(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor)
def normal(mean, std=1.0, *, generator=None):
    if hasattr(std, "shape"):  # (a float std is checked by the trace)
        _check_parameter(std >= 0, "normal expects all elements of std >= 0.0")
    shape = ctx().out.shape
    return jax.random.normal(_key(), tuple(shape), out_dtype()) * std + mean


@register(aten.randint.low, aten.randint.default)
def randint(*args, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    low, high, size = (0, *args) if len(args) == 2 else args
    return jax.random.randint(_key(), tuple(size), low, high, jnp.int64).astype(out_dtype())


@register(aten.randperm.default)
def randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return jax.random.permutation(_key(), n).astype(out_dtype())


# -- in-place distributions (functionalized: they return a fresh tensor of self's shape) ---------
def _uniform01(shape, dtype):
    # Drawn in float32 at least: bfloat16's 8-bit mantissa would make u == 0 or 1 common.
    wide = jnp.promote_types(dtype, jnp.float32)
    return jax.random.uniform(_key(), tuple(shape), wide)


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
    wide = jnp.promote_types(self.dtype, jnp.float32)
    z = jax.random.normal(_key(), self.shape, wide)
    return as_dtype(jnp.exp(mean + std * z), self.dtype)


@register(aten.normal_functional.default)
def normal_functional(self, mean=0.0, std=1.0, *, generator=None):
    wide = jnp.promote_types(self.dtype, jnp.float32)
    return as_dtype(mean + std * jax.random.normal(_key(), self.shape, wide), self.dtype)


@register(aten.normal.float_float)
def normal_float_float(
    mean, std, size, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None
):
    return mean + std * jax.random.normal(_key(), tuple(size), out_dtype())


@register(aten.bernoulli.Tensor)
def bernoulli_tensor(self, p, *, generator=None):
    _check_parameter((p >= 0) & (p <= 1), _BERNOULLI_P)
    probs = jnp.broadcast_to(as_dtype(p, jnp.float32), self.shape)
    return as_dtype(jax.random.bernoulli(_key(), probs), self.dtype)


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
    logits = jnp.log(as_dtype(probs, jnp.float32))
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


@register(aten._standard_gamma.default)
def _standard_gamma(self, generator=None):
    wide = jnp.promote_types(self.dtype, jnp.float32)
    sample = jax.random.gamma(_key(), as_dtype(self, wide))
    # eager's CPU kernel returns max(smallest normal, sample): never 0, and that smallest
    # number where its sampler gives NaN (a concentration <= 0; JAX: NaN)
    tiny = jnp.finfo(self.dtype).tiny
    return as_dtype(jnp.where(sample > tiny, sample, tiny), self.dtype)


@register(aten.binomial.default)
def binomial(count, prob, generator=None):
    wide = jnp.promote_types(count.dtype, jnp.float32)
    n, p = as_dtype(count, wide), as_dtype(prob, wide)
    sample = jax.random.binomial(_key(), n, p)
    # eager's sampler: no draws (0) where count <= 0 or prob <= 0, all of them (count) where
    # prob >= 1 (JAX: NaN outside [0, 1] and for a negative count)
    sample = jnp.where(p >= 1, n, sample)
    return as_dtype(jnp.where((n <= 0) | (p <= 0), 0, sample), count.dtype)
