"""Runtime checks of lowerings (``ctx().check``, ``torch2xla/runtime/_checks.py``): indices within their
dimension and integer divisors that are not zero, as eager checks them, and the asserts that
decompositions leave in graphs (``F.one_hot`` asserts its classes are in range).

Which indices eager accepts, the error it raises and its message depend on the op the user
called, which for a decomposed op is the node's ``original_aten`` (``index_add`` arrives as
``index_put``, ``nll_loss`` as a ``gather`` of the targets, ``take`` as ``index``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from torch._ops import ops

from torch2xla._errors import (
    OpAssertionError,
    OpIndexError,
    OpZeroDivisionError,
    from_assert_statement,
)
from torch2xla.capture._int_offsets import SELECTED
from torch2xla.capture._tensor_index import SELECT_DIMS
from torch2xla.ops import _fits  # noqa: F401  (defines torch.ops.torch2xla.fits, in CHECKED)
from torch2xla.ops._common import as_dtype, is_array
from torch2xla.ops._registry import ctx, register
from torch2xla.runtime._interop import jax_dtype

aten = ops.aten

_BOUNDS = "index {value} is out of bounds for dimension {dim} with size {size}"
_FLAT = "out of range: tried to access index {value} on a tensor of {size} elements."
_IN_SELF = "index out of range in self (index {value}, dimension {dim} of size {size})"
# (eager's CPU ``index_select`` along dimension 1 of a tensor of 2 or more dims)
INDEX_SELECT_DIM1 = "INDICES element is out of DATA bounds, id={value} axis_dim={size}"


@dataclasses.dataclass(frozen=True)
class _Rule:
    negative: bool  # negative indices count from the end (Python's rule), else they are errors
    message: str  # with {value}, {dim} and {size}


# By the op the user called (an OpOverloadPacket).
_RULES: dict[Any, _Rule] = {
    aten.index: _Rule(True, _BOUNDS),
    aten.index_put: _Rule(True, _BOUNDS),
    aten.index_put_: _Rule(True, _BOUNDS),
    aten.index_fill: _Rule(True, _BOUNDS),
    aten.index_fill_: _Rule(True, _BOUNDS),
    aten.take: _Rule(True, _FLAT),
    aten.put: _Rule(True, _FLAT),
    aten.put_: _Rule(True, _FLAT),
    aten.index_select: _Rule(False, _IN_SELF),
    aten.embedding: _Rule(False, _IN_SELF),
    aten.embedding_renorm: _Rule(True, _IN_SELF),  # (the message is select()'s, given)
    aten.embedding_renorm_: _Rule(True, _IN_SELF),
    aten.index_reduce: _Rule(False, _IN_SELF),
    aten.index_reduce_: _Rule(False, _IN_SELF),
    aten.index_add: _Rule(False, _BOUNDS),
    aten.index_add_: _Rule(False, _BOUNDS),
    aten.index_copy: _Rule(False, "index_copy_(): " + _BOUNDS),
    aten.index_copy_: _Rule(False, "index_copy_(): " + _BOUNDS),
    aten.gather: _Rule(False, _BOUNDS),
    aten.scatter: _Rule(False, _BOUNDS),
    aten.scatter_: _Rule(False, _BOUNDS),
    aten.scatter_add: _Rule(False, _BOUNDS),
    aten.scatter_add_: _Rule(False, _BOUNDS),
    aten.scatter_reduce: _Rule(False, _BOUNDS),
    aten.scatter_reduce_: _Rule(False, _BOUNDS),
    aten.embedding_bag: _Rule(False, _IN_SELF),
    aten._embedding_bag: _Rule(False, _IN_SELF),
    aten._embedding_bag_forward_only: _Rule(False, _IN_SELF),
    aten.nll_loss_forward: _Rule(False, "Target {value} is out of bounds."),
    aten.nll_loss2d_forward: _Rule(False, "Target {value} is out of bounds."),
    aten.nll_loss: _Rule(False, "Target {value} is out of bounds."),
    aten.nll_loss2d: _Rule(False, "Target {value} is out of bounds."),
}


# ``x[pos]`` (and ``x[pos] = v``) with an int ``pos`` rewritten to a gather or scatter at a
# tensor index (``capture/_int_offsets.py``): select's rule and message
_SELECT = _Rule(True, _BOUNDS)


def _rule_of(node: torch.fx.Node) -> _Rule | None:
    if (node.meta.get("custom") or {}).get(SELECTED):
        return _SELECT
    for op in (node.meta.get("original_aten"), node.target):
        rule = _RULES.get(getattr(op, "overloadpacket", None))
        if rule is not None:
            return rule
    return None


def _rule() -> _Rule:
    """The rule of the op the user called for the node being lowered."""
    node = ctx().node
    rule = _rule_of(node)
    if rule is None:
        raise KeyError(f"torch2xla: no index rule for {node.target}")
    return rule


def negative_indices(node: torch.fx.Node) -> bool | None:
    """Whether the op the user called for ``node`` takes negative indices from the end (None:
    no index rule for it)."""
    rule = _rule_of(node)
    return None if rule is None else rule.negative


def check_index(index: Any, size: int, dim: int, message: str | None = None) -> None:
    """Check that every element of ``index`` (an integer array) indexes a dimension ``dim`` of
    ``size`` elements, by the rules of the op the user called (``message``, with {value},
    {dim} and {size}: what a failure says, where not the rule's)."""
    c = ctx()
    if not c.checking or index.size == 0 or jnp.issubdtype(index.dtype, jnp.bool_):
        return
    rule = _rule()
    # One reduction: shifted so that the valid indices are [0, limit), a negative value seen
    # as unsigned is larger than any valid one, and the largest tells whether all are valid.
    shift = size if rule.negative else 0
    limit = 2 * size if rule.negative else size
    shifted = lax.bitcast_convert_type(index.astype(jnp.int64) + shift, jnp.uint64)
    widest = jnp.max(shifted)
    value = lax.bitcast_convert_type(widest, jnp.int64) - shift
    message = (message or rule.message).format(value="{value}", dim=dim, size=size)
    c.check(widest >= limit, message, value, OpIndexError)


def check_indices(self: Any, indices: Any) -> None:
    """``check_index`` for each index tensor of ``aten.index``/``index_put``: the k-th entry
    indexes the k-th dimension, except after a mask (bool or uint8), which takes as many
    dimensions as it has and cannot be out of range; None takes a whole dimension."""
    # (a 0-d tensor subscript rewritten to a one-element index: eager's select names the dim
    # by its position in the subscript, ``capture/_tensor_index.py``)
    selects = (ctx().node.meta.get("custom") or {}).get(SELECT_DIMS)
    dim = named = 0
    for index in indices:
        if index is not None and (index.dtype == jnp.bool_ or index.dtype == jnp.uint8):
            dim += index.ndim
            named += index.ndim
            continue
        if index is not None and dim < self.ndim:
            # NOTE: eager's message numbers the dimension among the indexed ones (its kernel
            # moves them first): ``x[:, i]`` names dimension 0.
            at = selects[named] if selects and named < len(selects) else named
            check_index(index, self.shape[dim], at)
        named += index is not None
        dim += 1


def check_flat_index(self: Any, index: Any) -> None:
    """``check_index`` for an index into the flattened ``self`` (``put``)."""
    check_index(index, self.size, 0)


def check_divisor(other: Any) -> None:
    """Check that an integer division's or remainder's divisor has no zero (eager's CPU kernels
    raise; its CUDA kernels do not, so neither do programs on a GPU)."""
    c = ctx()
    out = c.out
    if not c.checking or c.on_cuda or out.numel() == 0:
        return
    if out.dtype.is_floating_point or out.dtype.is_complex or out.dtype == torch.bool:
        return
    # (eager divides in the result's dtype: a divisor that wraps to 0 there, uint8 // 256 or
    # int8 // torch.tensor(2 ** 40), is a zero)
    dtype = jax_dtype(out.dtype)
    if not is_array(other):
        with np.errstate(all="ignore"):
            if np.asarray(other).astype(dtype) != 0:
                return
        failed = jnp.bool_(True)
    else:
        failed = jnp.any(as_dtype(other, dtype) == 0)
    c.check(failed, "ZeroDivisionError", error=OpZeroDivisionError)


# (fx's dead-code elimination keeps ``_assert_async.msg`` but dropped the overload without a
# message: ``torch._assert_async(x)`` never raised)
torch.fx.node.has_side_effect(aten._assert_async.default)


@register(aten._assert_async.msg, aten._assert_async.default)
def assert_async(self, assert_msg="Expected Tensor with single nonzero value, but got zero"):
    # NOTE: eager's CPU kernel raises RuntimeError(assert_msg) where ``self`` is zero; on CUDA
    # it is a device-side assert, not checked here (as the divisor checks).
    c = ctx()
    if not c.checking or c.on_cuda:  # (ON_CUDA: the argument's device, capture/_annotate.py)
        return
    # (a Python ``assert`` on a tensor, as Dynamo traces it: eager raises AssertionError)
    error = OpAssertionError if from_assert_statement(c.node) else None
    message = assert_msg.replace("{", "{{").replace("}", "}}")
    c.check(jnp.logical_not(self.astype(bool)), message, error=error)
    return


# -- checks of dead values -------------------------------------------------------------------
# Eager runs every op of the user's code, so an op whose result is never used still raises on
# bad values (``y = x.clone(); y[bad] = 0`` with ``y`` unused). The ATen export drops dead ops;
# ``capture/_dead.py`` keeps those whose lowerings check values through ``torch2xla::keep``,
# which has side effects for fx's dead-code elimination and lowers to nothing: XLA drops the
# dead values and keeps their checks (the program's status output reads them).

# Ops whose lowerings register runtime checks (``ctx().check``), by OpOverloadPacket (the
# graph's target or the node's ``original_aten``); integer divisions only where the result is
# an integer (``check_divisor``). Ops with side effects of their own (``_assert_async``,
# ``_linalg_check_errors``, random ops such as ``multinomial``) are never dropped.
CHECKED: frozenset = frozenset(
    {
        *_RULES,
        aten.binary_cross_entropy,
        aten.masked_fill,
        torch.ops.torch2xla.fits,
        aten.masked_scatter,
        aten.segment_reduce,
        aten.searchsorted,
        aten.max_unpool2d,
        aten.max_unpool3d,
        aten.linalg_cholesky_ex,
        aten.linalg_inv_ex,
        aten.linalg_lu_factor_ex,
        aten._linalg_solve_ex,
    }
)
DIVISIONS: frozenset = frozenset(
    {
        aten.div.Tensor_mode,
        aten.div.Scalar_mode,
        aten.floor_divide.default,
        aten.floor_divide.Scalar,
        aten.fmod.Tensor,
        aten.fmod.Scalar,
        aten.remainder.Tensor,
        aten.remainder.Scalar,
        aten.remainder.Scalar_Tensor,
    }
)


def checks_values(node: torch.fx.Node) -> bool:
    """Whether the lowering of ``node`` (an ATen graph's node) may check values."""
    if node.op != "call_function":
        return False
    if node.target in DIVISIONS:
        out = node.meta.get("val")
        return not isinstance(out, torch.Tensor) or not (
            out.dtype.is_floating_point or out.dtype.is_complex or out.dtype == torch.bool
        )
    return any(
        getattr(op, "overloadpacket", None) in CHECKED
        for op in (node.target, node.meta.get("original_aten"))
    )


@torch.library.custom_op("torch2xla::keep", mutates_args=())
def keep(values: list[torch.Tensor]) -> None:
    """Keeps ``values`` computed (for the checks of the ops computing them) although nothing
    reads them; does nothing in eager PyTorch."""


@keep.register_fake
def _(values: list[torch.Tensor]) -> None:
    return None


@keep.register_vmap
def _(info, in_dims, values: list[torch.Tensor]):
    return keep(values), None


# fx's dead-code elimination (the export's) keeps the op and what it reads.
torch.fx.node.has_side_effect(torch.ops.torch2xla.keep.default)


@register(torch.ops.torch2xla.keep.default)
def keep_lowering(values):
    return None


__all__ = [
    "DIVISIONS",
    "INDEX_SELECT_DIM1",
    "check_divisor",
    "check_flat_index",
    "check_index",
    "check_indices",
    "checks_values",
    "negative_indices",
]
