"""Random ops. Keys come from the per-call seed (drawn from torch's generator), one per node."""

from __future__ import annotations

import jax
import jax.numpy as jnp
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


@register(aten.bernoulli.default)
def bernoulli(self, *, generator=None):
    return as_dtype(jax.random.bernoulli(_key(), self), self.dtype)


@register(aten.bernoulli.p)
def bernoulli_p(self, p=0.5, *, generator=None):
    return as_dtype(jax.random.bernoulli(_key(), p, self.shape), self.dtype)


@register(aten.uniform.default)
def uniform(self, from_=0.0, to=1.0, *, generator=None):
    return jax.random.uniform(_key(), self.shape, self.dtype, from_, to)


@register(aten.normal.Tensor_Tensor, aten.normal.Tensor_float, aten.normal.float_Tensor)
def normal(mean, std=1.0, *, generator=None):
    shape = ctx().out.shape
    return jax.random.normal(_key(), tuple(shape), out_dtype()) * std + mean


@register(aten.randint.low, aten.randint.default)
def randint(*args, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    low, high, size = (0, *args) if len(args) == 2 else args
    return jax.random.randint(_key(), tuple(size), low, high, jnp.int64).astype(out_dtype())


@register(aten.randperm.default)
def randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    return jax.random.permutation(_key(), n).astype(out_dtype())
