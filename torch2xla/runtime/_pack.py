"""Small outputs of a program reach torch packed: one flat buffer per dtype, cut into views.

Every array a program hands to torch costs a fixed amount of host time: on CUDA a DLPack export
and import (~12 us on the H100 machine's host), on CPU an array-interface view (~1.5 us), and
each written-back buffer one ``copy_`` launch. A training step of ResNet-50 hands over 161
gradients and 159 BatchNorm statistics, ~4 ms of host time a step at batch 64, where the step
is bound by its host. Packed, the small ones cost one export per dtype plus a ``split``: the
program concatenates them (a copy on the device, negligible next to the export it saves for
arrays this small), and torch cuts the buffer into views.

Only outputs that torch reads or accumulates are packed (gradients, the new values of mutated
inputs); a user's outputs are not, so that in-place changes to them behave as in eager.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch2xla.runtime._interop import TORCH_TO_JAX_DTYPE, _row_major

# Largest output packed, in bytes. On CUDA the concatenation copies at ~2 TB/s on the device,
# while the export it saves costs ~12 us on the host, the time the device copies ~20 MB. On CPU
# an export costs ~1.5 us, the time one core copies ~10 KB.
LIMIT_CUDA = 4 << 20
LIMIT_CPU = 8 << 10

_DTYPES = frozenset(
    np.dtype(d) for d in ("float32", "float64", "float16", "int64", "int32", "bool")
) | {jnp.dtype(jnp.bfloat16)}


@dataclasses.dataclass(frozen=True)
class _Group:
    dtype: np.dtype
    positions: tuple[int, ...]  # output positions of the members, in the buffer's order
    shapes: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]

    @functools.cached_property
    def runs(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...], int, int], ...]:
        """The members as runs of consecutive pieces of one shape: per run, ``(shape, strides,
        offset, count)`` of the buffer's ``as_strided`` view that holds it (elements), with
        the run's count as its first dim where it has more than one piece (its ``unbind``
        gives the pieces; ``plan`` puts members of one shape next to each other)."""
        runs: list = []
        offset = 0
        for shape, size in zip(self.shapes, self.sizes):
            if runs and runs[-1][0] == shape:
                runs[-1][2] += 1
            else:
                runs.append([shape, offset, 1, size])
            offset += size
        out = []
        for shape, start, count, size in runs:
            strides = _row_major(shape)
            if count > 1:
                shape, strides = (count, *shape), (size, *strides)
            out.append((shape, strides, start, count))
        return tuple(out)


@dataclasses.dataclass(frozen=True)
class Packing:
    """Which of ``n`` outputs are packed, and how: the packed function returns the unpacked
    outputs in their order (``rest``), then one flat buffer per group."""

    n: int
    groups: tuple[_Group, ...]
    rest: tuple[int, ...]

    @functools.cached_property
    def _gather(self) -> Callable[[Sequence], tuple]:
        """The ``n`` outputs in order from the unpacked ones followed by each group's pieces
        (one C call: no Python loop over the outputs)."""
        order = [*self.rest, *(i for g in self.groups for i in g.positions)]
        where = [0] * self.n
        for k, i in enumerate(order):
            where[i] = k
        return operator.itemgetter(*where)  # (n >= 2: a group has two members)

    def pack(self, outs: Sequence) -> list:
        """The outputs as the packed function returns them (traced)."""
        flat = [outs[i] for i in self.rest]
        for g in self.groups:
            parts = [jnp.ravel(outs[i]) for i in g.positions]
            for i, shape in zip(g.positions, g.shapes):
                if tuple(outs[i].shape) != shape or outs[i].dtype != g.dtype:
                    raise RuntimeError(
                        f"torch2xla internal error: output {i} is {outs[i].dtype}{outs[i].shape}, "
                        f"packed as {g.dtype}{shape}; please report this with the model"
                    )
            # NOTE: behind a barrier XLA cannot fuse the parts' producers into the
            # concatenation: fused, the gradients' reductions (biases, norms) ran inside one
            # concatenate kernel at a fraction of their own kernels' speed, 1.6 ms a segment of
            # ViT-B/16's bf16 backward on an H200 (3.3 ms of a 23.4 ms step, session 30).
            flat.append(jnp.concatenate(jax.lax.optimization_barrier(parts)))
        return flat

    def index(self, i: int) -> int:
        """Where the unpacked output ``i`` is among the packed function's outputs."""
        return self.rest.index(i)

    def unpack(self, outs: Sequence, convert: Callable | None, cut: Callable | None = None) -> list:
        """The ``n`` outputs, as torch tensors, from the packed function's ``outs`` (JAX arrays
        converted by ``convert``; None where they are torch tensors already): packed members
        cut from their buffer by ``cut(buffer, group)`` where given (JAX arrays on the CPU:
        ``_interop.cut_cpu``, ``cut_cpu_views``), else as torch views of the converted
        buffer."""
        rest = len(self.rest)
        parts = list(outs[:rest] if convert is None else map(convert, outs[:rest]))
        for g, buf in zip(self.groups, outs[rest:]):
            if convert is not None and cut is not None:
                parts += cut(buf, g)
            else:
                split = torch.split_with_sizes(buf if convert is None else convert(buf), g.sizes)
                parts += [p.view(shape) for p, shape in zip(split, g.shapes)]
        return list(self._gather(parts))


def plan(metas: Sequence, candidates: Sequence[int], limit: int) -> Packing | None:
    """A ``Packing`` of the outputs ``candidates`` among ``metas`` (one ``(shape, dtype)`` per
    output, numpy or torch dtypes) whose size is at most ``limit`` bytes, or None where no two
    of them share a dtype."""
    by_dtype: dict[np.dtype, list[int]] = {}
    shapes: dict[int, tuple[int, ...]] = {}
    for i in candidates:
        shape, dtype = metas[i]
        dtype = _np_dtype(dtype)
        if dtype is None or not all(isinstance(s, int) for s in shape):
            continue
        nbytes = math.prod(shape) * dtype.itemsize
        if dtype in _DTYPES and 0 < nbytes <= limit:
            shapes[i] = tuple(shape)
            by_dtype.setdefault(dtype, []).append(i)
    groups = tuple(
        _Group(d, ps, tuple(shapes[i] for i in ps), tuple(math.prod(shapes[i]) for i in ps))
        for d, ps in ((d, _by_shape(ps, shapes)) for d, ps in by_dtype.items())
        if len(ps) > 1
    )
    if not groups:
        return None
    packed = frozenset(i for g in groups for i in g.positions)
    return Packing(len(metas), groups, tuple(i for i in range(len(metas)) if i not in packed))


def _by_shape(positions: Sequence[int], shapes: dict) -> tuple[int, ...]:
    """``positions`` with those of one shape next to each other, shapes in the order they first
    appear (a CPU program's pieces of one shape are cut from the buffer at once: ``runs``)."""
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for i in positions:
        by_shape.setdefault(shapes[i], []).append(i)
    return tuple(i for ps in by_shape.values() for i in ps)


def _np_dtype(dtype) -> np.dtype | None:
    if isinstance(dtype, torch.dtype):
        dtype = TORCH_TO_JAX_DTYPE.get(dtype)
    return None if dtype is None else jnp.dtype(dtype)


def limit_for(cuda: bool) -> int:
    """The largest output packed on CUDA or on CPU, in bytes."""
    return LIMIT_CUDA if cuda else LIMIT_CPU


__all__ = ["LIMIT_CPU", "LIMIT_CUDA", "Packing", "limit_for", "plan"]
