"""Higher-order ops (``torch.ops.higher_order``) whose subgraphs translate to JAX control flow:
``cond`` as ``lax.cond``, ``while_loop`` as ``lax.while_loop``, ``map_impl`` and ``scan`` as
``lax.scan``, ``invoke_subgraph`` (``torch.compiler.nested_compile_region``) inlined, and
``flex_attention`` as dense attention with its ``score_mod`` and ``mask_mod`` applied to the
score matrix (``jax.vmap`` over batch, head, query and key index, as eager's math kernel).

Each subgraph (a ``get_attr`` node naming a ``GraphModule``, already functional core ATen)
is translated by the interpreter itself (``_interpret.to_jax_function``), so every op inside
has the registry's lowering. Runtime checks of a subgraph's ops (``ctx().check``) come back as
its status output and are registered on the outer trace, each under its own node (the user's
line inside the branch or body): a failed check of an untaken branch never fires, a loop's
first failure stops the loop and is reported. A subgraph that draws random numbers gets a key
of the op's own, folded with the iteration index in loops (every step draws anew, as eager).

What cannot be translated runs in eager with its subgraphs (``capture/_partition``: an op
inside without a lowering makes the whole higher-order op unsupported, named in the warning;
a ``while_loop`` a gradient reaches, which ``jax.vjp`` cannot differentiate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import torch
from jax import lax

from torch2xla.ops._registry import ctx, register
from torch2xla.runtime import _interop

hop = torch.ops.higher_order


class _Subgraph:
    """A subgraph translated for the lowering of the node being lowered: ``self(key, *xs)``
    returns ``(outputs, status)``, ``status`` its runtime checks' ``[code, value]`` (zeros
    when it has none; their ``Check``s in ``self.checks`` once traced)."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        from torch2xla.ops._interpret import to_jax_function, uses_rng

        self.fn = to_jax_function(gm, checks=ctx().checking)
        self.rng = uses_rng(gm)
        self.checks: tuple = ()
        self.n_out = len(_outputs(gm))

    def __call__(self, key: Any, *inputs: Any) -> tuple[tuple, jax.Array]:
        outs = self.fn(key if self.rng else None, *inputs)
        if len(outs) > self.n_out:
            self.checks = self.fn.checks
            return tuple(outs[: self.n_out]), outs[self.n_out]
        return tuple(outs), jnp.zeros(2, jnp.int64)


def _outputs(gm: torch.fx.GraphModule) -> tuple:
    out = gm.graph.find_nodes(op="output")[0].args[0]
    return tuple(out) if isinstance(out, list | tuple) else (out,)


def _key(*subs: _Subgraph) -> Any:
    """A key for subgraphs that draw random numbers (None where none does)."""
    return ctx().next_key() if any(s.rng for s in subs) else None


def _register_checks(sub: _Subgraph, status: Any, taken: Any = True) -> None:
    """Register ``sub``'s checks on the outer trace: the k-th failed where ``status`` names it
    (and ``taken``, the branch ran)."""
    c = ctx()
    if c.checks is None:
        return
    from torch2xla.runtime._checks import Registered

    for k, check in enumerate(sub.checks):
        failed = jnp.logical_and(taken, status[0] == k + 1)
        c.checks.append(Registered(check, failed, status[1]))


def _as_out(values: Sequence, metas: Sequence) -> tuple:
    """Values cast to the dtypes of the node's fake outputs (branches and loop carries must
    agree in dtype for JAX; torch already checked they agree)."""
    return tuple(
        jnp.asarray(v, _interop.jax_dtype(m.dtype)) if isinstance(m, torch.Tensor) else v
        for v, m in zip(values, metas, strict=True)
    )


def _metas() -> tuple:
    out = ctx().out
    return tuple(out) if isinstance(out, list | tuple) else (out,)


@register(hop.cond)
def cond(pred: Any, true_gm: Any, false_gm: Any, operands: Sequence) -> tuple:
    true, false = _Subgraph(true_gm), _Subgraph(false_gm)
    metas = _metas()
    key = _key(true, false)
    operands = tuple(operands)
    if isinstance(pred, bool | int):  # (a predicate the trace already decided)
        sub = true if pred else false
        outs, status = sub(key, *operands)
        _register_checks(sub, status)
        return _as_out(outs, metas)

    def branch(sub):
        def run(ops):
            outs, status = sub(key, *ops)
            return _as_out(outs, metas), status

        return run

    pred = jnp.asarray(pred).reshape(()).astype(bool)
    outs, status = lax.cond(pred, branch(true), branch(false), operands)
    _register_checks(true, status, pred)
    _register_checks(false, status, jnp.logical_not(pred))
    return outs


@register(hop.invoke_subgraph)
def invoke_subgraph(gm: Any, identifier: Any, *operands: Any) -> tuple:
    sub = _Subgraph(gm)
    outs, status = sub(_key(sub), *operands)
    _register_checks(sub, status)
    return _as_out(outs, _metas())


def _first_failure(status: jax.Array, new: jax.Array) -> jax.Array:
    return jnp.where(status[0] > 0, status, new)


@register(hop.while_loop)
def while_loop(cond_gm: Any, body_gm: Any, carried: Sequence, additional: Sequence) -> tuple:
    test, body = _Subgraph(cond_gm), _Subgraph(body_gm)
    metas = _metas()
    key = _key(test, body)
    additional = tuple(additional)
    carried = _as_out(tuple(carried), metas)

    def check(i, xs):
        step = None if key is None else jax.random.fold_in(key, 2 * i)
        (go,), status = test(step, *xs, *additional)
        return jnp.asarray(go).reshape(()).astype(bool), status

    # The predicate is computed at the end of each step (and once before), so a failed check
    # of either subgraph stops the loop at once, with its status carried out.
    go, test_status = check(0, carried)
    zero = jnp.zeros(2, jnp.int64)

    def keep_going(state):
        _, go, test_status, body_status, _ = state
        return go & (test_status[0] == 0) & (body_status[0] == 0)

    def step(state):
        xs, _, _, body_status, i = state
        sub_key = None if key is None else jax.random.fold_in(key, 2 * i + 1)
        new, status = body(sub_key, *xs, *additional)
        new = _as_out(new, metas)
        go, t_status = check(i + 1, new)
        return new, go, t_status, _first_failure(body_status, status), i + 1

    state = (carried, go, test_status, zero, jnp.int64(0))
    out, _, test_status, body_status, _ = lax.while_loop(keep_going, step, state)
    _register_checks(test, test_status)
    _register_checks(body, body_status)
    return out


def _scan_steps(sub: _Subgraph, key: Any, carry: tuple, xs: tuple, rest: tuple, n: int):
    """``lax.scan`` of ``sub(*carry, *x, *rest) -> (*new_carry, *y)`` over the leading dim of
    ``xs``: (carry, ys, status of the first failed step)."""
    metas = _metas()
    n_carry = len(carry)

    def step(state, x):
        c, status, i = state
        sub_key = None if key is None else jax.random.fold_in(key, i)
        outs, new = sub(sub_key, *c, *x, *rest)
        c = _as_out(outs[:n_carry], metas[:n_carry])
        return (c, _first_failure(status, new), i + 1), tuple(outs[n_carry:])

    state = (carry, jnp.zeros(2, jnp.int64), jnp.int64(0))
    (carry, status, _), ys = lax.scan(step, state, xs, length=n)
    return carry, ys, status


@register(hop.map_impl)
def map_impl(f: Any, xs: Sequence, pos_args: Sequence) -> tuple:
    sub = _Subgraph(f)
    xs = tuple(xs)
    _, ys, status = _scan_steps(sub, _key(sub), (), xs, tuple(pos_args), xs[0].shape[0])
    _register_checks(sub, status)
    return _as_out(ys, _metas())


@register(hop.scan)
def scan(combine: Any, init: Sequence, xs: Sequence, additional: Sequence) -> tuple:
    sub = _Subgraph(combine)
    metas = _metas()
    init = _as_out(tuple(init), metas[: len(init)])
    xs = tuple(xs)
    n = xs[0].shape[0] if xs else 0
    carry, ys, status = _scan_steps(sub, _key(sub), init, xs, tuple(additional), n)
    _register_checks(sub, status)
    return _as_out((*carry, *ys), metas)


def _apply_bhmn(sub: _Subgraph, lead: tuple, sizes: Sequence[int], rest: tuple) -> tuple:
    """``sub`` applied at every (b, h, m, n) of ``sizes``, with ``lead`` (arrays of that shape)
    indexed there; returns its outputs and status (any element's failure)."""
    n_lead = len(lead)

    def one(*args):
        outs, status = sub(None, *args)
        return (*outs, status)

    fn = one
    for dim in reversed(range(4)):
        index_axes = tuple(0 if d == dim else None for d in range(4))
        fn = jax.vmap(fn, in_axes=(*(0,) * n_lead, *index_axes, *(None,) * len(rest)))
    idx = [jnp.arange(s, dtype=jnp.int32) for s in sizes]
    *outs, status = fn(*lead, *idx, *rest)
    flat = status.reshape(-1, 2)
    first = jnp.argmax(flat[:, 0] > 0)
    return tuple(outs), flat[first]


@register(hop.flex_attention)
def flex_attention(
    query: Any,
    key: Any,
    value: Any,
    score_mod: Any,
    block_mask: tuple,
    scale: float,
    kernel_options: dict,
    score_mod_other_buffers: tuple = (),
    mask_mod_other_buffers: tuple = (),
) -> tuple:
    """Eager's math kernel: scores in float32 (float64 for float64 queries), ``score_mod`` and
    ``mask_mod`` at every element, a softmax that gives fully masked rows zeros, the product in
    the query's dtype; the log-sum-exp and row maxima in base 2 (the caller scales them)."""
    if ctx().rng is not None and (_uses(score_mod) or _uses(block_mask[-1])):
        raise NotImplementedError("random numbers in a score_mod or mask_mod")
    work = jnp.float64 if query.dtype == jnp.float64 else jnp.float32
    group = query.shape[1] // key.shape[1]
    key, value = jnp.repeat(key, group, axis=1), jnp.repeat(value, group, axis=1)
    shape = (query.shape[0], *key.shape[1:])
    key, value = jnp.broadcast_to(key, shape), jnp.broadcast_to(value, shape)
    scores = jnp.einsum(
        "bhmd,bhnd->bhmn",
        query.astype(work),
        key.astype(work),
        precision=lax.Precision.HIGHEST,
    )
    scores = (scores * scale).astype(work)
    sizes = scores.shape
    score_sub, mask_sub = _Subgraph(score_mod), _Subgraph(block_mask[-1])
    meta = score_mod.graph.find_nodes(op="placeholder")[0].meta.get("val")
    score_dtype = _interop.jax_dtype(meta.dtype) if meta is not None else work
    (modded,), s_status = _apply_bhmn(
        score_sub, (scores.astype(score_dtype),), sizes, tuple(score_mod_other_buffers)
    )
    (keep,), m_status = _apply_bhmn(mask_sub, (), sizes, tuple(mask_mod_other_buffers))
    _register_checks(score_sub, s_status)
    _register_checks(mask_sub, m_status)
    scores = jnp.where(keep.astype(bool), modded.astype(work), -jnp.inf)
    masked = jnp.all(scores == -jnp.inf, axis=-1, keepdims=True)
    top = jnp.max(scores, axis=-1, keepdims=True)
    safe_top = jnp.where(masked, 0, lax.stop_gradient(top))
    exp = jnp.exp(scores - safe_top)
    total = jnp.sum(exp, axis=-1, keepdims=True)
    probs = jnp.where(masked, 0, exp / jnp.where(masked, 1, total))
    out_dtype = query.dtype
    out = jnp.einsum(
        "bhmn,bhnd->bhmd",
        probs.astype(out_dtype),
        value.astype(out_dtype),
        precision=lax.Precision.HIGHEST,
    )
    lse = jnp.where(masked, -jnp.inf, jnp.log(jnp.where(masked, 1, total)) + safe_top)[..., 0]
    ln2 = math.log(2)
    out = _as_out((out,), _metas()[:1])[0]
    if work == jnp.float64:  # (eager's dtype; ``capture/_rewrites.flex_statistics_in_float64``)
        return out, lse / ln2, top[..., 0] / ln2
    return out, *_as_out((lse / ln2, top[..., 0] / ln2), _metas()[1:])


def _uses(gm: Any) -> bool:
    from torch2xla.ops._interpret import uses_rng

    return isinstance(gm, torch.fx.GraphModule) and uses_rng(gm)
