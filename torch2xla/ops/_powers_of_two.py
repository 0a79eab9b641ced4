"""Powers of two exactly: ``x * 2**n`` for integer ``n`` and ``2**e`` at whole ``e``.

XLA's ``exp2`` is not exact at integers (in float64 2**n came out a unit off for most n, in
float16 2**3 below 8), where eager's is: ``torch.exp2`` and ``torch.ldexp`` take these.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def _power_of_two(n, dtype):
    """2**n (an integer array ``n``) exactly in the float ``dtype``, from its bits, for n in
    the dtype's normal range."""
    info = jnp.finfo(dtype)
    ints = {4: np.int32, 8: np.int64}[np.dtype(dtype).itemsize]
    bits = (n.astype(ints) - int(info.minexp) + 1) << int(info.nmant)
    return lax.bitcast_convert_type(bits, dtype)


def times_power_of_two(x, n):
    """``x * 2**n`` (``x`` float32 or float64, ``n`` integers) exactly: the power split in
    three factors in the normal range, each product exact; 0 or inf beyond the range."""
    info = jnp.finfo(x.dtype)
    reach = 3 * (int(info.maxexp) - 24)  # (three factors of at most maxexp - 24)
    n = jnp.clip(n.astype(np.int64), -reach, reach)
    first = n // 3
    second = (n - first) // 2
    for part in (first, second, n - first - second):
        x = x * _power_of_two(part, x.dtype)
    return x


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def exact_exp2(e, other: Callable):
    """2**e (``e`` float32 or float64), exact where ``e`` is a whole number, ``other(e)``
    elsewhere."""
    whole = jnp.isfinite(e) & (e == jnp.round(e))
    exact = times_power_of_two(jnp.ones_like(e), jnp.where(whole, e, 0).astype(np.int64))
    return jnp.where(whole, exact, other(e))


@exact_exp2.defjvp
def _exact_exp2_jvp(other, primals, tangents):
    p = exact_exp2(primals[0], other)
    return p, p * np.log(2.0).astype(p.dtype) * tangents[0]
