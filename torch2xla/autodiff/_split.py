"""The training backward as a chain of programs, so that residuals are freed as it goes.

An XLA program keeps its arguments alive until it ends. Run as one program, the backward holds
every residual of the forward while it computes its first gradients, and its temporaries come
on top: eager's autograd instead frees each saved tensor once its node has run. On GPU that put
xla's training peak 1.3x-1.7x above eager's (ResNet-50, ViT, GPT-2, BERT;
``benchmarks/analysis.md``).

Here the backward is traced once to a jaxpr, flattened (the ``jax.checkpoint`` and ``jit``
wrappers around it inlined), reordered so that memory is freed early (``_order``) and cut into
segments for the lowest estimated peak (``partition``, ``_Usage``). Each segment is compiled as
a program of its own (several at once, ``SplitBackward``); the last
reference to a residual (or to a value one segment hands to the next) is dropped when the
segment that uses it last is called, so its memory returns to JAX's pool as that segment ends.

The segments compute what the single program computes, op for op; XLA fuses within a segment
only, which costs little at the sizes where splitting pays (hundreds of MiB of residuals).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jcore

from torch2xla.guards import _persistent
from torch2xla.runtime import _pack
from torch2xla.runtime._interop import no_stack_capture

MiB = 1 << 20

# Segments compiled at once (XLA's GPU compiler also runs threads of its own per program,
# and times candidate kernels on the device). On an H100, four GEMM segments compiled at once
# took 9.7 s where one after another took 27.6 (GPT-2 bf16), but seven at once took longer
# than in sequence (ViT fp32 43 s against 22), and convolution segments compiled together
# each took ~50 s (ResNet-50 bf16, 5-8 s each alone): convolutions compile in one lane.
_COMPILE_THREADS = 3


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
        self.cap = self.alive_from[0] // 4

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
        slack = self.alive_from[0] // 100
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


class SplitBackward:
    """The backward ``fn(kept, inputs, cts)`` run as a chain of segment programs, compiled
    here (the first freed backward) in threads (``_COMPILE_THREADS``): the residuals come in
    the layouts the forward chose for them, every value handed from one segment to the next
    is row-major, so no segment's compilation waits for another's layouts.

    Handing values on in the layouts XLA chose (a convolution's gradient NHWC) chained the
    compilations, each taking the layouts of the one before: GPT-2's bf16 backward (four
    segments) compiled in 27.6 s one after another, 9.7 s in parallel, on an H100; the steps
    ran equally fast (GPT-2 bf16 1.003x, ResNet-50 fp32 0.999x; ``benchmarks/analysis.md``).

    Args:
        fn: the backward (traceable), its residuals first.
        kept, inputs, cts: example arguments (arrays or ``ShapeDtypeStruct``s).
        schedule: how much of the residuals each segment frees (``partition``).
        kept_formats: the residuals' formats as the forward returns them (None: row-major).
        compiler_options: XLA compiler options for every segment.
        device: the device they run on, for the persistent cache (None: not stored).
        pack_limit: each segment returns the outputs of ``fn`` it computes of at most that
            many bytes packed (``_pack``; None: none are), so that a segment's gradients
            reach torch when it ends, not with the last one.

    Attributes:
        ready: per output of ``fn`` (flattened), the number of segments that must have run
            before it is known (0: a constant or one of the arguments).
        out_metas: per output of ``fn``, its (shape, dtype).
    """

    def __init__(
        self,
        fn: Callable,
        kept: Sequence,
        inputs: Sequence,
        cts: Sequence,
        schedule: Schedule,
        kept_formats: Sequence | None = None,
        compiler_options: dict | None = None,
        device: jax.Device | None = None,
        pack_limit: int | None = None,
    ) -> None:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(kept, inputs, cts)
        self._out_tree = jax.tree_util.tree_structure(out_shape)
        self.out_metas = [(o.shape, o.dtype) for o in jax.tree_util.tree_leaves(out_shape)]
        n_kept = len(jax.tree_util.tree_leaves(kept))
        flat = flatten(closed)
        self._outs = flat.outs
        self.segments = partition(flat, n_kept, schedule.segment_bytes, schedule.max_segments)
        finals = {a for a in flat.outs if isinstance(a, int)}
        self.ready = _ready(self.segments, flat.outs)
        self._packs = _packings(self.segments, flat.avals, finals, pack_limit)
        used = {k for seg in self.segments for k in seg.ins} | finals
        # inputs no segment reads (residuals the backward does not need): freed at once
        self._unused = tuple(k for k in range(n_kept) if k not in used)
        self._n_in, self._n_kept, self._finals = flat.n_in, n_kept, finals
        self._nbytes = {k: _nbytes(a) for k, a in flat.avals.items()}
        formats = dict(enumerate(kept_formats)) if kept_formats is not None else {}
        with no_stack_capture():
            # traced here (JAX's configuration, x64 included, is the calling thread's), only
            # XLA's compilations run in the threads
            self._programs = [
                _Program(seg, flat, formats, compiler_options, device, packing)
                for seg, packing in zip(self.segments, self._packs)
            ]
            # segments with convolutions compile one after another, in one lane of their own
            lanes: list[list[_Program]] = [[]]
            for seg, program in zip(self.segments, self._programs):
                if any(s.eqn.primitive.name == "conv_general_dilated" for s in seg.steps):
                    lanes[0].append(program)
                else:
                    lanes.append([program])
            lanes = [lane for lane in lanes if lane]
            with concurrent.futures.ThreadPoolExecutor(min(len(lanes), _COMPILE_THREADS)) as pool:
                list(pool.map(_compile_all, lanes))

    def plan(self) -> dict | None:
        """What ``restored`` needs to run this chain again, without the jaxpr: the segments'
        value keys, the outputs and the executables' persistent-cache keys (None where one
        of them is not stored)."""
        keys = [p.exe_key for p in self._programs]
        if any(k is None for k in keys):
            return None
        return {
            "segments": [(seg.ins, seg.outs, seg.last) for seg in self.segments],
            "unused": self._unused,
            "outs": self._outs,
            "out_tree": self._out_tree,
            "out_metas": self.out_metas,
            "ready": self.ready,
            "packs": self._packs,
            "executables": [
                (k, p._exe.in_tree, p._exe.out_tree) for k, p in zip(keys, self._programs)
            ],
        }

    @classmethod
    def restored(cls, plan: dict, programs: Sequence[Callable]) -> SplitBackward:
        """The chain ``plan`` (from ``plan()``) calling ``programs`` (one per segment, each
        taking its list of arguments), as the persistent cache restores it."""
        self = cls.__new__(cls)
        self.segments = [
            Segment((), tuple(i), tuple(o), tuple(last)) for i, o, last in plan["segments"]
        ]
        self._unused, self._outs = tuple(plan["unused"]), list(plan["outs"])
        self._out_tree = plan["out_tree"]
        self.out_metas, self.ready, self._packs = plan["out_metas"], plan["ready"], plan["packs"]
        self._programs = list(programs)
        return self

    def __call__(self, kept: list, inputs: Sequence, cts: Sequence) -> Run:
        """A run of the chain on these arguments (``Run``: its segments run as their outputs
        are asked for). ``kept`` is emptied: each residual is freed by the segment that uses
        it last."""
        return Run(self, kept, inputs, cts)

    def profile(self) -> list[dict]:
        """Per segment, in MiB: XLA's analysis of its program (arguments, temporaries,
        outputs) and what is alive while it runs (``live``: residuals not yet freed, values
        earlier segments computed and later ones need, gradients computed so far; its
        temporaries and outputs), torch's inputs and cotangents left out."""
        last, made = {}, {}
        for j, seg in enumerate(self.segments):
            for k in seg.ins:
                last[k] = j
            for k in seg.outs:
                made[k] = j
        for k in self._finals:
            last[k] = len(self.segments)
        rows = []
        for j, (seg, program) in enumerate(zip(self.segments, self._programs)):
            m = program.memory_analysis()
            residuals = sum(self._nbytes[k] for k in range(self._n_kept) if last.get(k, -1) >= j)
            held = sum(self._nbytes[k] for k, s in made.items() if s < j and last[k] >= j)
            rows.append(
                {
                    "segment": j,
                    "steps": len(seg.steps),
                    "arguments": m.argument_size_in_bytes / MiB,
                    "temporaries": m.temp_size_in_bytes / MiB,
                    "outputs": m.output_size_in_bytes / MiB,
                    "residuals": residuals / MiB,
                    "handed": held / MiB,
                    "live": (residuals + held + m.temp_size_in_bytes + m.output_size_in_bytes)
                    / MiB,
                }
            )
        return rows


class Run:
    """One call of a ``SplitBackward``: its segments run in order as far as they are asked for
    (``advance``), and each output is handed out once the segments that compute it ran
    (``take``), so that a gradient reaches torch when its segment ends (``_autograd``'s chain
    of nodes). Each residual is freed by the segment that uses it last, as in a run of all
    the segments at once."""

    def __init__(self, split: SplitBackward, kept: list, inputs: Sequence, cts: Sequence) -> None:
        leaves = jax.tree_util.tree_leaves((kept, inputs, cts))
        kept.clear()
        env = dict(enumerate(leaves))
        del leaves
        for k in split._unused:
            del env[k]
        self._env = env
        self._segments, self._programs, self._packs = split.segments, split._programs, split._packs
        self._outs, self.ready = split._outs, split.ready
        self._out_tree = split._out_tree
        self._buffers: dict[int, list] = {}  # per segment run, its packed outputs
        self._views: dict[int, Any] = {}  # key -> torch view of a packed buffer
        self.done = 0  # segments run

    @property
    def n_segments(self) -> int:
        return len(self._segments)

    def advance(self, n: int) -> None:
        """Runs the segments up to the ``n``-th (those not run yet)."""
        env = self._env
        while self.done < min(n, len(self._segments)):
            j = self.done
            seg = self._segments[j]
            args = [env[k] for k in seg.ins]
            for p in seg.last:
                del env[seg.ins[p]]
            outs = self._programs[j](args)
            del args
            packing = self._packs[j]
            if packing is None:
                env.update(zip(seg.outs, outs))
            else:
                n_rest = len(packing.rest)
                env.update(zip((seg.outs[i] for i in packing.rest), outs[:n_rest]))
                self._buffers[j] = list(outs[n_rest:])
            self.done = j + 1

    def take(self, positions: Sequence[int], convert: Callable) -> list:
        """The outputs at ``positions`` (among the flattened outputs) as torch tensors
        (``convert``), running the segments they need first; a packed one is a view of its
        segment's buffer, converted once."""
        if positions:
            self.advance(max(self.ready[i] for i in positions))
        got = []
        for i in positions:
            a = self._outs[i]
            if isinstance(a, _Const):
                got.append(convert(jax.numpy.asarray(a.value)))
                continue
            got.append(self._value(a, convert))
        return got

    def _value(self, key: int, convert: Callable):
        view = self._views.get(key)
        if view is not None:
            return view
        if key in self._env:
            return convert(self._env[key])
        for j, buffers in list(self._buffers.items()):  # the packed outputs of segment j
            seg, packing = self._segments[j], self._packs[j]
            # (the others were taken from the environment: only the buffers convert here)
            rest = [None] * len(packing.rest)
            full = packing.unpack(rest + buffers, lambda a: a if a is None else convert(a))
            for g in packing.groups:
                for i in g.positions:
                    self._views[seg.outs[i]] = full[i]
            del self._buffers[j]
        return self._views[key]


def _ready(segments: Sequence[Segment], outs: Sequence) -> tuple[int, ...]:
    """Per output (key or ``_Const``), the number of segments that must run before it is known."""
    made = {k: j + 1 for j, seg in enumerate(segments) for k in seg.outs}
    return tuple(made.get(a, 0) if isinstance(a, int) else 0 for a in outs)


def _packings(
    segments: Sequence[Segment], avals: dict, finals: set, limit: int | None
) -> list[_pack.Packing | None]:
    """Per segment, how it packs the outputs of the backward it computes (over its
    ``outs``): those no later segment reads."""
    if limit is None:
        return [None] * len(segments)
    read_later: set[int] = set()
    packings: list[_pack.Packing | None] = []
    for seg in reversed(segments):
        metas = [(avals[k].shape, avals[k].dtype) for k in seg.outs]
        mine = [i for i, k in enumerate(seg.outs) if k in finals and k not in read_later]
        packings.append(_pack.plan(metas, mine, limit))
        read_later.update(seg.ins)
    return packings[::-1]


def _compile_all(programs: list[_Program]) -> None:
    for program in programs:
        program.compile()


class _Program:
    """One segment, compiled ahead of time (``compile``); ``formats`` (key -> Format or None)
    gives the residuals' layouts, every other value is row-major. Arguments the executable
    rejects (another layout) go through the jit. With ``packing`` (over ``seg.outs``) it
    returns the unpacked outputs, then the packed buffers."""

    def __init__(
        self,
        seg: Segment,
        flat: _Flat,
        formats: dict,
        compiler_options: dict | None,
        device: jax.Device | None = None,
        packing: _pack.Packing | None = None,
    ) -> None:
        def body(*args):
            env = dict(zip(seg.ins, args))
            _run(seg.steps, env)
            outs = [env[k] for k in seg.outs]
            return tuple(outs if packing is None else packing.pack(outs))

        structs = [jax.ShapeDtypeStruct(flat.avals[k].shape, flat.avals[k].dtype) for k in seg.ins]
        in_formats = tuple(formats.get(k) for k in seg.ins)
        # NOTE: nothing is donated: the caller drops its last reference to an input whose last
        # use this is, which frees it when the segment ends, as donation would (XLA reuses a
        # donated buffer only for an output of its shape).
        self._jitted = jax.jit(body, compiler_options=compiler_options, in_shardings=in_formats)
        self._lowered = self._jitted.lower(*structs)
        self._exe = None
        self._target = (compiler_options, device)
        self.exe_key: str | None = None  # its key in the persistent cache

    def compile(self) -> None:
        self._exe, self.exe_key = _persistent.compile_any(self._lowered, *self._target)
        self._lowered = None

    def memory_analysis(self):
        return self._exe.memory_analysis()

    def __call__(self, args: list):
        try:
            return self._exe(*args)
        except TypeError:
            return self._jitted(*args)


AUTO_MIN_BYTES = 1 << 30  # ``split_backward="auto"`` splits backwards keeping more (``policy``)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """How a backward is cut (``partition``): into segments freeing ``segment_bytes`` of
    residuals each, or (None) into at most ``max_segments`` for the lowest estimated peak."""

    segment_bytes: int | None = None
    max_segments: int = 6


def policy(option, cuda: bool) -> Callable[[int], Schedule | None] | None:
    """The ``split_backward`` option as a function from the residuals' total bytes to the
    ``Schedule`` of the segments (None: one program).

    ``"auto"``: on GPU where the residuals pass ``AUTO_MIN_BYTES`` (1 GiB), about six
    segments cut for the lowest estimated peak, the first halved. A split runs at least four
    segments (each frees at most a quarter of the residuals), each a dispatch, gates and
    gradient exports of its own; below 1 GiB that costs more than the memory it saves. Dynamo's
    DDP optimizer cuts GPT-2 124M (bf16, 8x512) into a graph per 25 MB bucket, each with
    256 MiB-1 GiB of residuals: split (the old 256 MiB bound), a step took 79.5 ms on one
    H200 and 64.8 on two, unsplit 49.2 and 49.9 (benchmarks/ddp_scaling.py, session 13). Every residual is alive in the first segment, so it must hold
    little else; where the residuals are freed late (a CNN's first layers are its largest),
    later segments must stay small too. Cut into quarters of the residuals, ResNet-50's first
    segment added 591 MiB to 5140 MiB of residuals on an H100; cut into a sixteenth first and
    twice the last after that, BERT's last segment held half the residuals and the gradients
    and temporaries of most of the model. Each segment costs a dispatch.
    ``True``: the same on CPU; a number: that many MiB of residuals per segment.
    """
    if option is False:
        return None
    if option == "auto":
        if not cuda:
            return None
        return lambda total: Schedule() if total >= AUTO_MIN_BYTES else None
    if option is True:
        return lambda total: Schedule()
    size = max(int(float(option) * MiB), 1)
    return lambda total: Schedule(segment_bytes=size)


__all__ = ["Run", "Schedule", "Segment", "SplitBackward", "flatten", "partition", "policy"]
