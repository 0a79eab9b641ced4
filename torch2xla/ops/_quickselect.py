"""Eager's CPU ``kthvalue`` index among ties: its quickselect, one partition per step for every
row at once.

Eager's CPU kernel (``quick_select_template``, ``aten/src/ATen/native/Sorting.cpp``) selects
the k-th smallest with Sedgewick's quickselect: a median-of-three pivot, then a Hoare
partition swapping in place a value/index pair array. Which of equal elements ends at position
k depends on those swaps, so no sort order gives it. Each partition is computed here without
its sequential scan: the scan from the left stops at the elements not below the pivot (``a``,
ascending positions), the scan from the right at those not above it (``b``, descending); the
m-th stops of both swap while ``a_m <= b_m``. The positions between the scans hold the
input's values until the scans cross, so both lists come from the array before the
partition, ranked by cumulative sums; where they cross, each scan stops at the first
swapped element past the other's last stop. The steps run in one ``lax.while_loop`` (about
``2 log2 n`` of them), each a few passes over the rows; only where an element equals the
k-th (a stable sort finds the others').
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def _gt(a, b):
    """Eager's ``gt_or_nan``: ``a > b``, NaN above every number."""
    g = a > b
    if jnp.issubdtype(a.dtype, jnp.inexact):
        g = g | (jnp.isnan(a) & ~jnp.isnan(b))
    return g


def _at(v, p):
    return jnp.take_along_axis(v, p[:, None], axis=1)[:, 0]


def _swap(v, ix, p, q, cond):
    """``v`` and ``ix`` with positions ``p`` and ``q`` exchanged in the rows where ``cond``."""
    pos = lax.broadcasted_iota(p.dtype, v.shape, 1)
    mp = (pos == p[:, None]) & cond[:, None]
    mq = (pos == q[:, None]) & cond[:, None]

    def one(a):
        ap, aq = _at(a, p)[:, None], _at(a, q)[:, None]
        return jnp.where(mp, aq, jnp.where(mq, ap, a))

    return one(v), one(ix)


def _partition(v, ix, L, R, rows):
    """Eager's partition of ``v[L..R]`` (``R >= L + 2``) after its median of three: the
    array, and the ends ``i`` and ``j`` of the scans (the pivot swapped to ``j``)."""
    n = v.shape[1]
    pos = lax.broadcasted_iota(L.dtype, v.shape, 1)
    Lc, Rc = L[:, None], R[:, None]
    piv = _at(v, L)[:, None]
    left = (pos >= Lc + 2) & (pos <= Rc) & ~_gt(piv, v)
    right = (pos >= Lc + 1) & (pos <= Rc - 1) & ~_gt(v, piv)
    rank_a = jnp.cumsum(left, axis=1, dtype=L.dtype)
    rank_b = jnp.flip(jnp.cumsum(jnp.flip(right, 1), axis=1, dtype=L.dtype), 1)
    dump = n + 1  # (the slot the other positions write to)
    r = rows[:, None]
    a = jnp.full((v.shape[0], n + 2), n + 1, L.dtype)
    a = a.at[r, jnp.where(left, rank_a, dump)].set(pos).at[:, 0].set(L + 1)
    b = jnp.full((v.shape[0], n + 2), -1, L.dtype)
    b = b.at[r, jnp.where(right, rank_b, dump)].set(pos).at[:, 0].set(R)
    slot = lax.broadcasted_iota(L.dtype, a.shape, 1)
    m = 1 + jnp.sum((a <= b) & (slot >= 1) & (slot <= n), axis=1, dtype=L.dtype)
    swap_l = left & (rank_a < m[:, None])
    swap_r = right & (rank_b < m[:, None])
    src_l = jnp.take_along_axis(b, jnp.where(swap_l, rank_a, 0), axis=1)
    src_r = jnp.take_along_axis(a, jnp.where(swap_r, rank_b, 0), axis=1)
    src = jnp.where(swap_l, src_l, jnp.where(swap_r, src_r, pos))
    v = jnp.take_along_axis(v, src, axis=1)
    ix = jnp.take_along_axis(ix, src, axis=1)
    # The scans stop at the first swapped element past the other's last stop, which is the
    # last swap's, or the one before where the last swapped an element with itself.
    self_swap = _at(a, m - 1) == _at(b, m - 1)
    back = jnp.where(self_swap, jnp.maximum(m - 2, 0), m - 1)
    i = jnp.minimum(_at(a, m), _at(b, back))
    j = jnp.maximum(_at(b, m), _at(a, back))
    return v, ix, i, j


def kth_index(x, k: int):
    """The index eager's CPU ``kthvalue`` returns for the ``k``-th smallest (0-based) of each
    row of the 2-d ``x``: a stable sort's where no other element equals it (the usual case
    with floats, and the faster), else the quickselect's."""
    kth = jnp.argsort(x, axis=1, stable=True)[:, k]
    value = _at(x, kth)[:, None]
    equal = ~_gt(x, value) & ~_gt(value, x)
    tied = jnp.any(jnp.sum(equal, axis=1) > 1)
    return lax.cond(tied, lambda: _select(x, k).astype(kth.dtype), lambda: kth)


def _select(x, k: int):
    rows_n, n = x.shape
    dt = jnp.int32 if n < 2**30 else jnp.int64
    rows = jnp.arange(rows_n, dtype=dt)
    ix = jnp.broadcast_to(jnp.arange(n, dtype=dt), x.shape)
    lo = jnp.zeros((rows_n,), dt)
    hi = jnp.full((rows_n,), n - 1, dt)

    def step(state):
        v, ix, L, R = state
        live = R > L
        two = live & (R == L + 1)
        v, ix = _swap(v, ix, L, R, two & _gt(_at(v, L), _at(v, R)))
        three = live & (R > L + 1)
        v, ix = _swap(v, ix, (L + R) >> 1, L + 1, three)
        v, ix = _swap(v, ix, L + 1, R, three & _gt(_at(v, L + 1), _at(v, R)))
        v, ix = _swap(v, ix, L, R, three & _gt(_at(v, L), _at(v, R)))
        v, ix = _swap(v, ix, L + 1, L, three & _gt(_at(v, L + 1), _at(v, L)))
        pv, pix, i, j = _partition(v, ix, L, jnp.where(three, R, L + 2), rows)
        v = jnp.where(three[:, None], pv, v)
        ix = jnp.where(three[:, None], pix, ix)
        v, ix = _swap(v, ix, L, j, three)
        L = jnp.where(three & (j <= k), i, L)
        R = jnp.where(three & (j >= k), j - 1, jnp.where(two, L, R))
        return v, ix, L, R

    _, ix, _, _ = lax.while_loop(lambda s: jnp.any(s[3] > s[2]), step, (x, ix, lo, hi))
    return ix[:, k]
