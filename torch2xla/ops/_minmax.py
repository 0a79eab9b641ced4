"""``maximum`` and ``minimum`` with eager's CPU kernels' choice between equal operands.

Eager's scalar loop takes ``std::max(a, b)`` (the first operand where they are equal), its
vectorized loop ``_mm256_max_ps(a, b)`` (the second): ``maximum(-0.0, 0.0)`` is -0.0 in the
scalar tail of a row and 0.0 in its whole vector blocks (``_loops``: which elements are
which). Only the signs of equal zeros tell them apart. On CUDA, and for kernels whose two
rules agree, every element takes the first operand. The derivative is ``_balanced``'s.
"""

from __future__ import annotations

import operator

import jax.numpy as jnp
import torch
from torch._ops import ops

from torch2xla.ops import _loops
from torch2xla.ops._common import Kind
from torch2xla.ops._elementwise import _balanced, _max, _min, _pointwise
from torch2xla.ops._registry import register

aten = ops.aten


def _maximum_kernel(x: torch.Tensor) -> torch.Tensor:
    return torch.maximum(x, torch.zeros_like(x))


def _minimum_kernel(x: torch.Tensor) -> torch.Tensor:
    return torch.minimum(x, torch.zeros_like(x))


def _lowering(pick, jnp_fn, greater, kernel):
    def lowering(self, other):
        walk = _loops.walk(kernel, operands=(0, 1))  # (in the lowering's context)

        def tied(a, b):
            vec = _loops.mask(walk, a, b)
            if vec is None:
                return pick(a, b)
            return jnp.where(vec & (a == b), jnp.broadcast_to(b, vec.shape), pick(a, b))

        return _pointwise(_balanced(tied, jnp_fn, greater), Kind.DEFAULT)(self, other)

    return lowering


maximum = register(aten.maximum.default)(_lowering(_max, jnp.maximum, operator.gt, _maximum_kernel))
minimum = register(aten.minimum.default)(_lowering(_min, jnp.minimum, operator.lt, _minimum_kernel))
