"""Dynamo's guards (and the symbolic trace's) at a bucket: whether a padded binding of the size
symbols keeps them, and bindings that do.

A guard proves something about the real sizes; the padded program runs with the bucket's sizes
in their place, so the bucket must satisfy the guards too (``guards_hold``). Where padding
every symbol to its own bucket would break a guard that ties two of them (``kv + 1 <= mask``:
HF's attention mask against a cache's keys, guarded one way only), one follows the other
(``one_way_ties``).
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


def one_way_ties(guards: Sequence[sympy.Expr], symbols: set) -> list[tuple]:
    """``(follower, leader)`` pairs of ``symbols`` that a guard orders one way with unit
    coefficients (``a + c <= b``, ``b - a >= c``): the larger side, ``b``, follows ``a`` (set to
    ``a``'s bucket plus its real distance from ``a``), so that ``a`` pads to a bucket size and
    the guard keeps its slack. Only the first tie of a symbol counts (one leader each, no
    leader following another)."""
    out, taken = [], set()
    for g in guards:
        if not isinstance(g, sympy.Le | sympy.Lt | sympy.Ge | sympy.Gt):
            continue
        free = g.free_symbols
        if len(free) != 2 or not free <= symbols or free & taken:
            continue
        # ``small - large`` up to a constant: <= 0 where the guard holds
        d = g.lhs - g.rhs if isinstance(g, sympy.Le | sympy.Lt) else g.rhs - g.lhs
        d = sympy.expand(d)
        coeffs = {s: d.coeff(s) for s in free}
        if not (sympy.expand(d - sum(c * s for s, c in coeffs.items()))).is_Integer:
            continue
        small = [s for s, c in coeffs.items() if c == 1]
        large = [s for s, c in coeffs.items() if c == -1]
        if len(small) == 1 and len(large) == 1:
            out.append((large[0], small[0]))
            taken |= free
    return out
