"""Dynamo's guards (and the symbolic trace's) at a bucket: whether a padded binding of the size
symbols keeps them, and bindings that do.

A guard proves something about the real sizes; the padded program runs with the bucket's sizes
in their place, so the bucket must satisfy the guards too (``guards_hold``). Where padding
every symbol to its own bucket breaks a guard that ties two of them (``kv + 1 <= mask``: HF's
attention mask against a cache's keys, guarded one way only), ``tie`` moves one of the two
with the other, keeping the guard's slack at the real sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy


def guards_hold(
    guards: Sequence[sympy.Expr], ranges: dict, binding: dict, real: dict | None = None
) -> bool:
    """Whether ``guards`` hold with the symbols at their ``binding`` values (a bucket's).

    A guard that also reads symbols the binding leaves free (an int argument passed to the
    program as a tensor, ``capture/_int_values.py``: Dynamo guards ``Max(0, n - 3) + 4 <= s0``)
    holds where it held at the call's ``real`` values (Dynamo checked it) and moving the bound
    symbols from there to the binding moves its sides only towards holding it."""
    changed = set(binding)
    for sym, value in binding.items():
        vr = ranges.get(sym)
        if vr is not None and not (vr.lower <= value <= vr.upper):
            return False
    subs = {s: sympy.Integer(v) for s, v in binding.items()}
    at_real = {s: sympy.Integer(v) for s, v in (real or {}).items()}
    for g in guards:
        if not g.free_symbols & changed:
            continue
        held = g.xreplace(subs)
        if held is sympy.true:
            continue
        if held is sympy.false or not real or not _moves_towards(g, subs, at_real):
            return False
    return True


def _moves_towards(guard: sympy.Expr, padded: dict, real: dict) -> bool:
    """Whether the relation ``guard``, true at ``real``, stays true at ``padded``: the change of
    ``lhs - rhs`` between them is a number of the sign that keeps it (0 for ``==``, ``!=``)."""
    if not isinstance(guard, sympy.Rel):
        return False
    diff = guard.lhs - guard.rhs
    step = sympy.expand(diff.xreplace(padded) - diff.xreplace(real))
    if not step.is_Number:
        return False
    if isinstance(guard, sympy.Le | sympy.Lt):
        return bool(step <= 0)
    if isinstance(guard, sympy.Ge | sympy.Gt):
        return bool(step >= 0)
    return bool(step == 0)  # (Eq, Ne)


def equalities(guards: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """Expressions the guards force to 0: ``Eq`` guards, and ``a <= b`` with ``b <= a``."""
    out, nonneg = [], set()
    for g in guards:
        if isinstance(g, sympy.Eq):
            out.append(sympy.expand(g.lhs - g.rhs))
            continue
        if isinstance(g, sympy.Le | sympy.Lt | sympy.Ge | sympy.Gt):
            d = g.rhs - g.lhs if isinstance(g, sympy.Le | sympy.Lt) else g.lhs - g.rhs
            d = sympy.expand(d)
            if isinstance(g, sympy.Le | sympy.Ge):
                if sympy.expand(-d) in nonneg:
                    out.append(d)
                nonneg.add(d)
    return out


def tie(guards: Sequence[sympy.Expr], movable: set, real: dict, padded: dict) -> dict | None:
    """``padded`` (symbol -> bucket) with, for each guard between two ``movable`` symbols that
    the buckets break, one of them set so that the guard's ``lhs - rhs`` is what it is at the
    ``real`` values (so it holds as it does there); None where no such binding pads every
    symbol to at least its real value.

    Of the guard's two symbols, the one that then needs no more than its own bucket follows
    the other (less padding). A symbol follows at most one other; the caller checks every
    guard again at the result."""
    out = dict(padded)
    followers: set = set()
    for g in guards:
        if not isinstance(g, sympy.Le | sympy.Lt | sympy.Ge | sympy.Gt):
            continue
        free = g.free_symbols
        if len(free) != 2 or not free <= movable:
            continue
        if g.xreplace({s: sympy.Integer(v) for s, v in out.items() if s in free}) is sympy.true:
            continue
        diff = sympy.expand(g.lhs - g.rhs)
        target = diff.xreplace({s: sympy.Integer(real[s]) for s in free})
        options = []
        for dep in sorted(free, key=str):
            (base,) = free - {dep}
            if dep in followers or base in followers:
                continue
            coeff = diff.coeff(dep)
            rest = sympy.expand(diff - coeff * dep).xreplace({base: sympy.Integer(out[base])})
            if not (coeff.is_Integer and coeff != 0 and rest.is_Integer):
                continue  # (not linear in dep)
            value = (target - rest) / coeff
            if value.is_Integer and real[dep] <= int(value):
                options.append((int(value) > padded[dep], str(dep), dep, int(value)))
        if not options:
            return None
        _, _, dep, value = min(options)
        out[dep] = value
        followers.add(dep)
    return out
