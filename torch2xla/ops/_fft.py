"""Discrete Fourier transforms: the three primitives every ``torch.fft`` function lowers to."""

from __future__ import annotations

import jax.numpy as jnp
from torch._ops import ops

from torch2xla.ops._common import as_dtype, out_dtype
from torch2xla.ops._registry import register

aten = ops.aten

# NOTE: ATen's `normalization` is the scaling applied by this call (0: none, 1: 1/sqrt(n),
# 2: 1/n) whatever the direction; jnp's `norm` names which direction carries the 1/n.
_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}


def _axes(dim, ndim: int) -> tuple[int, ...]:
    return tuple(d % ndim for d in dim)


@register(aten._fft_r2c.default)
def _fft_r2c(self, dim, normalization, onesided):
    axes = _axes(dim, self.ndim)
    norm = _FORWARD_NORM[normalization]
    if onesided:
        out = jnp.fft.rfftn(self, axes=axes, norm=norm)
    else:
        out = jnp.fft.fftn(self, axes=axes, norm=norm)
    return as_dtype(out, out_dtype())


@register(aten._fft_c2r.default)
def _fft_c2r(self, dim, normalization, last_dim_size):
    axes = _axes(dim, self.ndim)
    sizes = [self.shape[a] for a in axes[:-1]] + [int(last_dim_size)]
    out = jnp.fft.irfftn(self, s=sizes, axes=axes, norm=_INVERSE_NORM[normalization])
    return as_dtype(out, out_dtype())


@register(aten._fft_c2c.default)
def _fft_c2c(self, dim, normalization, forward):
    axes = _axes(dim, self.ndim)
    if not axes:
        return self
    if forward:
        out = jnp.fft.fftn(self, axes=axes, norm=_FORWARD_NORM[normalization])
    else:
        out = jnp.fft.ifftn(self, axes=axes, norm=_INVERSE_NORM[normalization])
    return as_dtype(out, out_dtype())
