"""The training backward's jaxpr as a flat list of steps (``flatten``: the ``jax.checkpoint``
and ``jit`` wrappers inlined), reordered so that memory is freed early (``_order``) and cut into
segments for the lowest estimated peak (``partition``, ``_Usage``). Pure planning on the jaxpr:
``_split`` compiles and runs the segments.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

import jax.extend.core as jcore

# Call-like primitives whose body is inlined into the flat list of steps: the jax.checkpoint
# around the differentiated function (its backward is one such call) and nested jits.
_INLINED = frozenset({"remat2", "checkpoint", "jit", "pjit", "closed_call", "core_call"})


@dataclasses.dataclass(frozen=True)
class _Const:
    value: Any


@dataclasses.dataclass(frozen=True)
class _Step:
    eqn: Any  # jax.extend.core.JaxprEqn: primitive and params
    ins: tuple  # int keys of values, or _Const
    outs: tuple[int, ...]


@dataclasses.dataclass
class _Flat:
    """A jaxpr as a flat list of steps over integer-keyed values: keys ``0..n_in-1`` are the
    inputs; ``outs`` are keys or ``_Const``; ``avals`` the shape and dtype of every key."""

    n_in: int
    steps: list[_Step]
    outs: list
    avals: dict[int, Any]


def flatten(closed) -> _Flat:
    """``closed`` (a ClosedJaxpr) with the bodies of ``_INLINED`` calls spliced in."""
    keys = itertools.count()
    avals: dict[int, Any] = {}
    steps: list[_Step] = []

    def walk(jaxpr, consts, subst: dict) -> None:
        for v, c in zip(jaxpr.constvars, consts):
            subst[v] = _Const(c)
        for eqn in jaxpr.eqns:
            ins = tuple(_atom(a, subst) for a in eqn.invars)
            body = _body(eqn)
            if body is not None:
                inner, inner_consts = body
                inner_subst = dict(zip(inner.invars, ins))
                walk(inner, inner_consts, inner_subst)
                for o, io in zip(eqn.outvars, inner.outvars):
                    subst[o] = _atom(io, inner_subst)
                continue
            outs = []
            for o in eqn.outvars:
                k = next(keys)
                avals[k] = o.aval
                subst[o] = k
                outs.append(k)
            steps.append(_Step(eqn, ins, tuple(outs)))

    top = closed.jaxpr
    subst: dict = {}
    for v in top.invars:
        k = next(keys)
        avals[k] = v.aval
        subst[v] = k
    n_in = len(top.invars)
    walk(top, closed.consts, subst)
    return _Flat(n_in, steps, [_atom(a, subst) for a in top.outvars], avals)


def _atom(a, subst: dict):
    return _Const(a.val) if isinstance(a, jcore.Literal) else subst[a]


def _body(eqn):
    """(jaxpr, consts) of an inlined call, else None."""
    if eqn.primitive.name not in _INLINED or "jaxpr" not in eqn.params:
        return None
    sub = eqn.params["jaxpr"]
    if isinstance(sub, jcore.ClosedJaxpr):
        return sub.jaxpr, sub.consts
    return (sub, ()) if isinstance(sub, jcore.Jaxpr) else None


def _run(steps: Sequence[_Step], env: dict) -> None:
    """Evaluates ``steps`` (traced, inside a segment's jit), writing their results to ``env``."""
    for step in steps:
        vals = [a.value if isinstance(a, _Const) else env[a] for a in step.ins]
        prim = step.eqn.primitive
        params = prim.get_bind_params(step.eqn.params)
        subfuns = ()
        if isinstance(params, tuple):  # jax versions that return (subfuns, params)
            subfuns, params = params
        ctx = getattr(getattr(step.eqn, "ctx", None), "manager", None)
        with ctx if ctx is not None else contextlib.nullcontext():
            ans = prim.bind(*subfuns, *vals, **params)
        for k, v in zip(step.outs, ans if prim.multiple_results else (ans,)):
            env[k] = v


# Primitives that only move, repeat or convert data: recomputed from the backward's inputs,
# they run next to their first user.
_MOVABLE = frozenset(
    {
        "transpose",
        "reshape",
        "broadcast_in_dim",
        "squeeze",
        "expand_dims",
        "convert_element_type",
        "reduce_precision",
        "copy",
        "copy_p",
    }
)

# A step is reducing when its results are at most this fraction of the computed values and
# residuals it reads (an elementwise op of up to three operands is not).
_REDUCING = 4


def _order(flat: _Flat, n_kept: int) -> list[_Step]:
    """The steps in an order that frees memory early: JAX's order, except that

    - a *reducing* step (its results a fraction of what it reads: a weight's gradient from an
      activation's, a bias gradient's sum over tokens) runs as soon as the steps it depends on
      have run. JAX's transpose leaves many of them at the very end of the backward (those of
      parameters broadcast or transposed in the forward), which would keep every layer's
      activation gradient alive until then. A step that reads no computed value is not
      hoisted: run early it frees nothing (residuals live until their last use) and its
      result would be handed on to later segments;
    - a *movable* step (one that reads only inputs, constants and other movable steps'
      results, whose results are not outputs, and that is a layout op or conversion or makes
      more bytes than the residuals it alone reads: a recomputed transpose of a kept weight,
      relu's mask recomputed from its kept output) runs just before its first user. JAX's
      checkpoint puts every recomputation at the start of the backward: on an H100,
      ResNet-50's first segment handed 579 MiB of relu masks on to later ones.
    """
    producer = {k: s for s in flat.steps for k in s.outs}
    final = {a for a in flat.outs if isinstance(a, int)}
    readers = collections.Counter(
        a for s in flat.steps for a in {a for a in s.ins if isinstance(a, int)}
    )
    movable: dict[int, bool] = {}
    for s in flat.steps:
        movable[id(s)] = (
            not any(k in final for k in s.outs)
            and all(
                not isinstance(a, int) or a < flat.n_in or movable[id(producer[a])] for a in s.ins
            )
            and (s.eqn.primitive.name in _MOVABLE or _frees_less_than_it_makes(s, readers, n_kept))
        )
    fixed = [s for s in flat.steps if not movable[id(s)]]
    memo: dict[int, frozenset] = {}
    order: list[_Step] = []
    where: dict[int, int] = {}  # id of a fixed step -> its index in order
    for s in fixed:
        reads = _deep_ins(s, flat.n_in, producer, movable, memo)
        deps = {id(producer[a]) for a in reads if a >= flat.n_in}
        read = sum(_nbytes(flat.avals[a]) for a in reads if a < n_kept or a >= flat.n_in)
        made = sum(_nbytes(flat.avals[k]) for k in s.outs)
        at = len(order)
        if deps and _REDUCING * made <= read:
            at = max(where[d] + 1 for d in deps)
        order.insert(at, s)
        if at == len(order) - 1:
            where[id(s)] = at
        else:
            where = {id(t): i for i, t in enumerate(order)}
    emitted: set[int] = set()
    result: list[_Step] = []

    def emit(s: _Step) -> None:
        for a in s.ins:
            if isinstance(a, int) and a >= flat.n_in:
                p = producer[a]
                if id(p) not in emitted and movable[id(p)]:
                    emit(p)
        emitted.add(id(s))
        result.append(s)

    for s in order:
        emit(s)
    result += [s for s in flat.steps if id(s) not in emitted]  # unused movable steps
    return result


def _frees_less_than_it_makes(s: _Step, readers: collections.Counter, n_kept: int) -> bool:
    """Whether a step that recomputes from residuals, for one reader, makes more bytes than
    the residuals it alone reads: run at the start of the backward, where JAX's checkpoint
    puts every recomputed value, it would hold more than it lets go. (A value several steps
    read stays where JAX put it: moved to its first reader, it was handed on to the others,
    and BERT's layer-norm differences raised its peak on CPU by a fifth.)"""
    if any(readers[k] > 1 for k in s.outs):
        return False
    made = sum(_nbytes(v.aval) for v in s.eqn.outvars)
    sole = sum(
        _nbytes(s.eqn.invars[i].aval)
        for i, a in enumerate(s.ins)
        if isinstance(a, int) and a < n_kept and readers.get(a) == 1
    )
    return made > sole


def _deep_ins(s: _Step, n_in: int, producer: dict, movable: dict, memo: dict) -> frozenset:
    """The keys ``s`` reads, looking through movable producers to what they read."""
    got = memo.get(id(s))
    if got is None:
        out: set[int] = set()
        for a in s.ins:
            if not isinstance(a, int):
                continue
            if a >= n_in and movable[id(producer[a])]:
                out |= _deep_ins(producer[a], n_in, producer, movable, memo)
            else:
                out.add(a)
        got = memo[id(s)] = frozenset(out)
    return got


@dataclasses.dataclass(frozen=True)
class Segment:
    """One program of the chain: ``ins`` keys in, ``outs`` keys out; ``last`` the positions
    among ``ins`` of the residuals and handed values whose last use this is."""

    steps: tuple[_Step, ...]
    ins: tuple[int, ...]
    outs: tuple[int, ...]
    last: tuple[int, ...]


def partition(
    flat: _Flat, n_kept: int, segment_bytes: int | None = None, max_segments: int = 6
) -> list[Segment]:
    """``flat``'s steps (in ``_order``'s order) cut into segments.

    With ``segment_bytes``, a segment ends once the kept inputs (keys ``0..n_kept-1``, the
    residuals) whose last use it holds pass that: at the step, from there until they pass
    twice that, after which the fewest bytes cross to the next segment (between layers rather
    than inside one). Without, the cuts are those of at most ``max_segments`` segments that
    keep the estimated peak lowest, the first halved where it holds that peak
    (``_Usage.cuts_for_peak``)."""
    order = _order(flat, n_kept)
    usage = _Usage(order, flat, n_kept)
    if segment_bytes is not None:
        cuts = usage.cuts_by_bytes(segment_bytes)
    else:
        cuts = usage.cuts_for_peak(max_segments)
    n = len(order)
    finals = usage.finals
    bounds = [0, *cuts, n]
    segs_steps = [order[a:b] for a, b in itertools.pairwise(bounds)]
    last_seg: dict[int, int] = {}  # the last segment using each key (outputs: past them all)
    for j, steps in enumerate(segs_steps):
        for s in steps:
            for a in s.ins:
                if isinstance(a, int):
                    last_seg[a] = j
    for a in finals:
        last_seg[a] = len(segs_steps)
    segments = []
    for j, steps in enumerate(segs_steps):
        defined = {k for s in steps for k in s.outs}
        ins: list[int] = []
        for s in steps:
            for a in s.ins:
                if isinstance(a, int) and a not in defined and a not in ins:
                    ins.append(a)
        outs = tuple(k for k in sorted(defined) if last_seg.get(k, -1) > j)
        last = tuple(
            p
            for p, k in enumerate(ins)
            if last_seg[k] == j and (k < n_kept or k >= flat.n_in)  # residuals and handed values
        )
        segments.append(Segment(tuple(steps), tuple(ins), outs, last))
    return segments


class _Usage:
    """What is alive at each step of the ordered backward, in bytes.

    ``freed_at[i]``: residuals whose last use is step ``i``; ``crossing[i]``: computed values
    (gradients left out) made up to step ``i`` and read after it; ``inner[i]``: what a segment
    holds at step ``i`` besides its residuals: the computed values alive into the step, the
    step's results, and the gradients made before it (they live to the end)."""

    CAP = 1 / 4  # of the residuals, the most one segment frees (``cap``)
    SLACK = 1 / 100  # of the residuals: fewer segments win within this of the lowest peak

    def __init__(self, order: list[_Step], flat: _Flat, n_kept: int) -> None:
        n = len(order)
        self.finals = finals = {a for a in flat.outs if isinstance(a, int)}
        last_use: dict[int, int] = {}
        for i, s in enumerate(order):
            for a in s.ins:
                if isinstance(a, int):
                    last_use[a] = i
        self.freed_at = [0] * n
        for k in range(n_kept):
            if k in last_use and k not in finals:
                self.freed_at[last_use[k]] += _nbytes(flat.avals[k])
        self.crossing, self.inner = [0] * n, [0] * n
        live, grads, ends = 0, 0, {}
        for i, s in enumerate(order):
            made = 0
            for k in s.outs:
                size = _nbytes(flat.avals[k])
                made += size
                if k in finals:
                    grads += size
                elif last_use.get(k, i) > i:
                    live += size
                    ends[last_use[k]] = ends.get(last_use[k], 0) + size
            self.inner[i] = (self.crossing[i - 1] if i else 0) + made + grads
            live -= ends.pop(i, 0)
            self.crossing[i] = live
        # residual bytes still alive when a segment starts at step a: their last use is at a
        # or later (XLA keeps a program's arguments until it ends)
        self.alive_from = list(itertools.accumulate(reversed(self.freed_at)))[::-1] + [0]
        # Residuals one segment may free at most (``_greedy``): XLA's temporaries, which the
        # estimate does not see, grow with a segment's length. Cut for the estimate alone,
        # BERT's and ViT's last segment (on an H100) held most of the model with 676 and 2438
        # MiB of temporaries next to a quarter of the residuals still alive.
        self.cap = int(self.alive_from[0] * self.CAP)

    def cuts_by_bytes(self, segment_bytes: int) -> list[int]:
        n, freed_at, crossing = len(self.freed_at), self.freed_at, self.crossing
        cuts, acc, i = [], 0, 0
        while i < n - 1:
            acc += freed_at[i]
            if acc >= segment_bytes:
                best, more, j = i, acc, i
                while j < n - 1 and more < 2 * segment_bytes:
                    if crossing[j] < crossing[best]:
                        best = j
                    j += 1
                    more += freed_at[j]
                cuts.append(best + 1)
                acc, i = 0, best
            i += 1
        return cuts

    def peak(self, cuts: Sequence[int]) -> int:
        """The estimated peak of the backward cut at ``cuts``: per segment, the residuals
        alive at its start plus its largest ``inner``."""
        bounds = [0, *cuts, len(self.inner)]
        return max(self.alive_from[a] + max(self.inner[a:b]) for a, b in itertools.pairwise(bounds))

    def _greedy(self, limit: int) -> list[int]:
        """The fewest cuts keeping every segment's estimate within ``limit`` and the
        residuals it frees within ``cap``: each segment runs on while it fits; where it would
        not, it ends at the step among the last half of it after which the fewest bytes cross
        (between layers rather than inside one)."""
        n, inner, alive_from, crossing = len(self.inner), self.inner, self.alive_from, self.crossing
        cuts, a, top, i = [], 0, 0, 0
        while i < n:
            top_i = max(top, inner[i])
            over = alive_from[a] + top_i > limit or alive_from[a] - alive_from[i + 1] > self.cap
            if i > a and over:
                c = min(range(max(a + 1, i - (i - a) // 2), i + 1), key=lambda c: crossing[c - 1])
                cuts.append(c)
                a, top, i = c, 0, c
                continue
            top, i = top_i, i + 1
        return cuts

    def cuts_for_peak(self, max_segments: int) -> list[int]:
        """Cuts into at most ``max_segments`` segments (more where the bound of a quarter of
        the residuals per segment needs more) for the lowest estimated peak (binary search over
        the limit ``_greedy`` keeps), then as few segments as come within 1% of the residuals
        of that peak: each segment costs a dispatch. The first is then halved where it holds
        the estimated peak (``_halve_first``)."""
        if len(self.inner) < 2:  # nothing to cut (a backward of zero or one step)
            return []

        def fewest(segments: int) -> int:
            lo = max(a + b for a, b in zip(self.alive_from, self.inner))  # a cut at every step
            hi = self.alive_from[0] + max(self.inner)  # one program
            while lo < hi:
                mid = (lo + hi) // 2
                if len(self._greedy(mid)) < segments:
                    hi = mid
                else:
                    lo = mid + 1
            return lo

        best = fewest(max_segments)
        slack = int(self.alive_from[0] * self.SLACK)
        for k in range(1, max_segments):
            limit = fewest(k)
            if limit <= best + slack:
                return self._halve_first(self._greedy(limit))
        return self._halve_first(self._greedy(best))

    def _halve_first(self, cuts: list[int]) -> list[int]:
        """``cuts`` with the first segment cut in two, near its middle where the fewest bytes
        cross, where that segment holds the estimated peak. Every residual is alive while it
        runs, so all it holds beside them adds to the peak, XLA's temporaries included, which
        grow with its length and which the estimate does not see: BERT fp32 on an H100 ran
        six segments of two layers, the first holding 135 MiB of temporaries and 67 of outputs
        beside 2321 MiB of residuals (1.11x eager's peak)."""
        if not cuts or cuts[0] < 4:
            return cuts
        bounds = [0, *cuts, len(self.inner)]
        peaks = [self.alive_from[a] + max(self.inner[a:b]) for a, b in itertools.pairwise(bounds)]
        if peaks[0] < max(peaks):
            return cuts
        first = cuts[0]
        c = min(
            range(first // 4, 3 * first // 4 + 1),
            key=lambda c: (self.crossing[c - 1], abs(2 * c - first)),
        )
        return [c, *cuts]


def _nbytes(aval) -> int:
    return math.prod(aval.shape) * aval.dtype.itemsize  # PRNG key dtypes have one too


__all__ = ["Segment", "flatten", "partition"]
