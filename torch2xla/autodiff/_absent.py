"""The cotangent of an output a backward does not go through: a symbolic zero.

Eager's backward through some outputs of a graph never walks the others' nodes. A real zero
cotangent for those outputs is not the same: JAX's pullback multiplies it by the output's
derivative, and where that is infinite (``sqrt``, ``log``, ``pow`` at 0) ``0 * inf`` is NaN,
which then reaches the inputs' gradients (``grad(loss)`` of a model returning ``(loss,
x.norm())`` at ``x = 0``). JAX's own symbolic zero (``ad.Zero``) makes the pullback skip those
products, as eager does.

The cotangent of such an output is an ``Absent`` marker: a pytree node with no array, whose
shape and dtype are its static data. Which outputs are absent is then part of the
cotangents' pytree structure, so a jit traces once per set of absent outputs, and an
ahead-of-time executable built for one set rejects (``TypeError``, before it runs) a call with
another. Inside the traced backward, ``pullback`` turns the markers into ``ad.Zero``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import jax
import numpy as np

try:  # NOTE: a private module of JAX; where it moves, absent outputs get real zeros
    from jax._src import core as _core
    from jax._src.interpreters import ad as _ad

    _Zero, _ShapedArray = _ad.Zero, _core.ShapedArray
except (ImportError, AttributeError):  # pragma: no cover (jax 0.10, 0.11 have both)
    _Zero = _ShapedArray = None

log = logging.getLogger("torch2xla")


class Absent:
    """The cotangent of an output the backward does not go through (no array)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape, self.dtype = shape, dtype

    def __repr__(self) -> str:
        return f"Absent({self.shape}, {self.dtype})"


jax.tree_util.register_pytree_node(
    Absent, lambda a: ((), (a.shape, a.dtype)), lambda meta, _: Absent(*meta)
)


def absent(cts: Sequence) -> tuple[int, ...]:
    """The positions of the absent cotangents among ``cts``."""
    return tuple(j for j, c in enumerate(cts) if type(c) is Absent)


def pullback(vjp_fn: Callable, cts: Sequence):
    """(traced) ``vjp_fn(cts)``, a ``jax.vjp`` pullback, each ``Absent`` cotangent a symbolic
    zero (real zeros where this JAX has none).

    NOTE: jax 0.10's transpose of a ``scan`` inside a custom_vjp's backward, differentiated
    again (a double backward through an LSTM), rejects some symbolic zero cotangents
    ("Expected cotangent type float64[2,4] but got float64[4,2,4]"): where the pullback
    raises so, its trace runs again with real zeros (the products with infinite derivatives
    are then NaN, as before symbolic zeros; the first trace's ops are dead code).
    """
    if not any(type(c) is Absent for c in cts):
        return vjp_fn(cts)
    if _Zero is not None:
        try:
            return vjp_fn([_zero(c) if type(c) is Absent else c for c in cts])
        except (TypeError, ValueError) as e:
            log.debug("torch2xla: a backward takes real zero cotangents: %s", e)
    return vjp_fn([jax.numpy.zeros(c.shape, c.dtype) if type(c) is Absent else c for c in cts])


def _zero(c: Absent):
    aval = _ShapedArray(c.shape, c.dtype)
    to_tangent = getattr(aval, "to_tangent_aval", None)
    return _Zero(to_tangent() if to_tangent is not None else aval)


__all__ = ["Absent", "absent", "pullback"]
