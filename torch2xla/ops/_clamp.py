"""clamp, clamp_min, clamp_max (``torch.clip`` is clamp), fmax and fmin: the values of
``_elementwise``'s ``_max``/``_min``/``_fmax``/``_fmin`` with eager's derivative, which changed
in torch 2.14. One mechanism, ``_masked``, gives each operand the gradient where a rule's mask
says (half of it at a tie); the rule tables below say which mask each torch version uses.
hardtanh (relu6) keeps its own derivative, in ``_activations``: it reads the sign bit of zero
bounds and runs channels-last after a CPU convolution, as relu does.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import torch
from torch._ops import ops

from torch2xla.ops._common import Kind, as_dtype, is_array, promote
from torch2xla.ops._elementwise import _fmax, _fmin, _max, _min, _operands
from torch2xla.ops._float_bits import is_zero
from torch2xla.ops._registry import ctx, register

aten = ops.aten

_TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])

# A rule maps an op's operands to one share per operand: None (no gradient), or (whole, half):
# the masks where the operand gets the whole gradient and where half of it (half wins; None:
# nowhere).
Share = tuple[jax.Array, jax.Array | None] | None
Rule = Callable[..., tuple[Share, ...]]


# NOTE: eager's derivatives select (``where(mask, grad, 0)``), so an operand that loses gets 0
# even from an infinite or NaN gradient; ``_derivatives.with_partials`` multiplies by its
# partials, which would turn those into NaN.
def _masked(value: Callable, rule: Rule) -> Callable:
    """``value`` with the derivative ``rule`` gives (see ``Rule``); operands may be None."""

    @jax.custom_jvp
    def fn(*args):
        return value(*args)

    @fn.defjvp
    def fn_jvp(primals, tangents):
        out = value(*primals)
        zero = jnp.zeros((), out.dtype)
        total = None
        for share, t in zip(rule(*primals), tangents, strict=True):
            if share is None:
                continue
            whole, half = share
            t = jnp.broadcast_to(t, out.shape)
            d = jnp.where(whole, t, zero)
            d = d if half is None else jnp.where(half, t / 2, d)
            total = d if total is None else total + d
        return out, total

    fn.__name__ = getattr(value, "__name__", "masked")
    return fn


def _clamp_value(x, lo, hi):
    # NOTE: torch propagates NaN from the bounds and applies max last (min > max gives max).
    out = x if lo is None else _max(x, lo)
    return out if hi is None else _min(out, hi)


def _split_ties(a, b, larger: bool) -> tuple[Share, Share]:
    """fmax's (``larger``) or fmin's rule in torch 2.14, as maximum's (derivatives.yaml: half
    to each at a tie, nothing to the one that loses; a NaN on either side loses nowhere)."""
    a_loses, b_loses = (a < b, a > b) if larger else (a > b, a < b)
    tie = a == b
    return (~a_loses, tie), (~b_loses, tie)


# -- torch 2.11-2.13 (clamp_backward, clamp_backward_min_max): comparisons mask, so a NaN input
# passes no gradient (JAX's max/min would pass it on); a bound gets the gradient where it is the
# result (max also where min > max), self at a tie with a bound. fmax/fmin: JAX's derivative.
def _min_keeps_ties(x, lo, hi):
    return (x >= lo, None), (x < lo, None), None


def _max_keeps_ties(x, lo, hi):
    return (x <= hi, None), None, (x > hi, None)


def _both_keep_ties(x, lo, hi):
    keep = (x >= lo) & (x <= hi)
    return (keep, None), ((x < lo) & (lo < hi), None), ((x > hi) | (hi < lo), None)


# -- torch 2.14: a tensor bound splits a tie as fmax/fmin; a scalar bound passes no gradient at
# the bound (self > min). Both tensor bounds (checked against eager on every combination of 0,
# 1, 2, 3, +-inf and NaN): where min < max, a tie of self with a bound splits the gradient
# between them; min == max == self gives it to self; a NaN anywhere gives it to self, except
# that max still gets it where max < min.
def _min_strict(x, lo, hi):
    return (x > lo, None), None, None


def _max_strict(x, lo, hi):
    return (x < hi, None), None, None


def _min_splits_ties(x, lo, hi):
    return (*_split_ties(x, lo, True), None)


def _max_splits_ties(x, lo, hi):
    d_x, d_hi = _split_ties(x, hi, False)
    return d_x, None, d_hi


def _both_strict(x, lo, hi):
    return ((x > lo) & (x < hi), None), None, None


def _both_split_ties(x, lo, hi):
    tie_lo, tie_hi = (x == lo) & (lo < hi), (x == hi) & (lo < hi)
    d_x = (~((x < lo) | (x > hi)), tie_lo | tie_hi)
    d_lo = ((x < lo) & (lo <= hi), tie_lo)
    d_hi = (((x > hi) & (x >= lo)) | (hi < lo), tie_hi)
    return d_x, d_lo, d_hi


# Per torch version: (bounds given, a bound is a tensor) -> clamp's rule; fmax's and fmin's
# rule (None: JAX's derivative of the value).
_CLAMP_RULES: dict[tuple[int, int], dict[tuple[str, bool], Rule]] = {
    (2, 11): {
        ("min", False): _min_keeps_ties,
        ("min", True): _min_keeps_ties,
        ("max", False): _max_keeps_ties,
        ("max", True): _max_keeps_ties,
        ("both", False): _both_keep_ties,
        ("both", True): _both_keep_ties,
    },
    (2, 14): {
        ("min", False): _min_strict,
        ("min", True): _min_splits_ties,
        ("max", False): _max_strict,
        ("max", True): _max_splits_ties,
        ("both", False): _both_strict,
        ("both", True): _both_split_ties,
    },
}
_FMAX_FMIN_RULES: dict[tuple[int, int], tuple[Rule, Rule] | None] = {
    (2, 11): None,
    (2, 14): (lambda a, b: _split_ties(a, b, True), lambda a, b: _split_ties(a, b, False)),
}
_RULES_SINCE = max((v for v in _CLAMP_RULES if v <= _TORCH), default=(2, 11))
_CLAMP = {key: _masked(_clamp_value, rule) for key, rule in _CLAMP_RULES[_RULES_SINCE].items()}
_FMAX_FMIN = _FMAX_FMIN_RULES[_RULES_SINCE]


# torch 2.11's ``clamp`` with one Python-number bound skips it where it is NaN
# (``x.clamp(min=nan)`` is ``x``, promoted); with both bounds, in clamp_min/clamp_max and for
# tensor bounds NaN propagates, as it does in every form since 2.12
_SKIPS_NAN_NUMBER = _TORCH < (2, 12)


def _nan_number(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


@register(aten.clamp.default)
def clamp_numbers(self, min=None, max=None):
    if _SKIPS_NAN_NUMBER and (min is None) != (max is None) and _nan_number(min or max):
        _compute, result = promote(Kind.DEFAULT, self, min if max is None else max)
        return as_dtype(self, result)
    return clamp(self, min, max)


@register(aten.clamp.Tensor)
def clamp(self, min=None, max=None):
    _compute, result = promote(Kind.DEFAULT, self, *(v for v in (min, max) if v is not None))
    lo = None if min is None else as_dtype(min, result)
    hi = None if max is None else as_dtype(max, result)
    x = as_dtype(self, result)
    if not jnp.issubdtype(result, jnp.inexact):
        return _clamp_value(x, lo, hi)
    bounds = "both" if lo is not None and hi is not None else "min" if hi is None else "max"
    return _CLAMP[bounds, is_array(min) or is_array(max)](x, lo, hi)


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(self, min):
    return clamp(self, min=min)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(self, max):
    return clamp(self, max=max)


_fmax_value, _fmin_value = (
    (_fmax, _fmin)
    if _FMAX_FMIN is None
    else (_masked(_fmax, _FMAX_FMIN[0]), _masked(_fmin, _FMAX_FMIN[1]))
)


@jax.custom_jvp
def _zero_of(out, other):
    """``out``, its zeros taking ``other``'s sign where ``other`` is a zero too; the
    derivative is ``out``'s."""
    return jnp.where(is_zero(out) & is_zero(other), other, out)


@_zero_of.defjvp
def _zero_of_jvp(primals, tangents):
    return _zero_of(*primals), tangents[0]


def _fmax_fmin(value):
    # NOTE: eager's CPU fmax/fmin of bfloat16 tensors give the second operand at a tie
    # (fmax(-0.0, 0.0) is 0.0), of every other dtype the first; the derivative is the same.
    def lowering(self, other):
        (a, b), result = _operands((self, other), Kind.DEFAULT)
        out = value(a, b)
        if result == jnp.bfloat16 and not ctx().on_cuda:
            out = _zero_of(out, b)
        return as_dtype(out, result)

    lowering.__name__ = value.__name__
    return lowering


register(aten.fmax.default)(_fmax_fmin(_fmax_value))
register(aten.fmin.default)(_fmax_fmin(_fmin_value))
