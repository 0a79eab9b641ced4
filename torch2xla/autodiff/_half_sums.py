"""Half-precision sums of the backward accumulate in float32, as torch's kernels do.

JAX's transposes add up cotangents with ``reduce_sum`` in the cotangent's dtype: the gradient
of a broadcast operand (``x * w[None]``, ``torch.where(c, w, x)``, a bias), of ``expand`` and of
JAX-level broadcasts inside lowerings. XLA keeps a bfloat16 or float16 reduction's semantics by
rounding the running sum to that dtype after every addition, where torch's ``sum`` kernels
accumulate in float32 and round once (``at::opmath_type``). Our own ``sum`` lowerings already
accumulate in float32 (``ops/_common.opmath_dtype``); these sums are made by JAX's autodiff,
which no lowering sees.

``float32_sums(fn)`` is ``fn`` with every half-precision ``reduce_sum`` its trace makes
computed in float32 and rounded once: the class of sums that undo a broadcast in a backward,
whichever op broadcast. A trace without one runs ``fn`` itself, so float32 programs are
unchanged. Sums inside control flow (``scan``, ``while``, ``cond`` bodies) are left as they
are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np

# Call-like primitives whose bodies are evaluated in place (their sums rewritten): nested jits
# and the checkpoints of remat segments.
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call", "checkpoint", "remat2"})
_HALF = frozenset({np.dtype(jax.numpy.bfloat16), np.dtype(jax.numpy.float16)})


def float32_sums(fn: Callable) -> Callable:
    """``fn`` (traceable, pytrees in and out) with its half-precision sums accumulated in
    float32."""

    def wrapped(*args: Any) -> Any:
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        if not _has_half_sum(closed.jaxpr):
            return fn(*args)
        outs = _eval(closed.jaxpr, closed.consts, jax.tree_util.tree_leaves(args))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), outs)

    return wrapped


def _is_half_sum(eqn) -> bool:
    return eqn.primitive.name == "reduce_sum" and np.dtype(eqn.invars[0].aval.dtype) in _HALF


def _has_half_sum(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if _is_half_sum(eqn):
            return True
        body = _body(eqn)
        if body is not None and _has_half_sum(body[0]):
            return True
    return False


def _body(eqn):
    """(jaxpr, consts) of a call evaluated in place, else None."""
    if eqn.primitive.name not in _CALLS:
        return None
    sub = eqn.params.get("jaxpr")
    if isinstance(sub, jcore.ClosedJaxpr):
        return sub.jaxpr, sub.consts
    return (sub, ()) if isinstance(sub, jcore.Jaxpr) else None


def _eval(jaxpr, consts, args) -> list:
    env: dict = {}

    def read(a):
        return a.val if isinstance(a, jcore.Literal) else env[a]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        vals = [read(a) for a in eqn.invars]
        body = _body(eqn)
        if body is not None and _has_half_sum(body[0]):
            outs = _eval(body[0], body[1], vals)
        elif _is_half_sum(eqn):
            outs = [_float32_sum(eqn, vals[0])]
        else:
            outs = _bind(eqn, vals)
        for v, o in zip(eqn.outvars, outs):
            if not isinstance(v, jcore.DropVar):
                env[v] = o
    return [read(a) for a in jaxpr.outvars]


def _float32_sum(eqn, x):
    """The half-precision sum ``eqn`` of ``x`` accumulated in float32, rounded once to ``x``'s
    dtype."""
    params = eqn.params
    wide = jax.lax.convert_element_type(x, np.float32)
    ctx = getattr(getattr(eqn, "ctx", None), "manager", None)
    with ctx if ctx is not None else contextlib.nullcontext():
        total = eqn.primitive.bind(wide, **params)
    return jax.lax.convert_element_type(total, x.dtype)


def _bind(eqn, vals) -> list:
    prim = eqn.primitive
    params = prim.get_bind_params(eqn.params)
    subfuns: Any = ()
    if isinstance(params, tuple):  # jax versions that return (subfuns, params)
        subfuns, params = params
    ctx = getattr(getattr(eqn, "ctx", None), "manager", None)
    with ctx if ctx is not None else contextlib.nullcontext():
        ans = prim.bind(*subfuns, *vals, **params)
    return list(ans) if prim.multiple_results else [ans]
