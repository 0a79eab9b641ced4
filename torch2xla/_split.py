"""The training backward as a chain of programs, so that residuals are freed as it goes.

An XLA program keeps its arguments alive until it ends. Run as one program, the backward holds
every residual of the forward while it computes its first gradients, and its temporaries come
on top: eager's autograd instead frees each saved tensor once its node has run. On GPU that put
xla's training peak 1.3x-1.7x above eager's (ResNet-50, ViT, GPT-2, BERT;
``benchmarks/analysis.md``).

Here the backward is traced once to a jaxpr, flattened (the ``jax.checkpoint`` and ``jit``
wrappers around it inlined), reordered so that memory is freed early (``_order``) and cut into
segments, each ending where the residuals whose last use it holds add up to about
``segment_bytes`` (``partition``). Each segment is compiled as a program of its own; the last
reference to a residual (or to a value one segment hands to the next) is dropped when the
segment that uses it last is called, so its memory returns to JAX's pool as that segment ends.

The segments compute what the single program computes, op for op; XLA fuses within a segment
only, which costs little at the sizes where splitting pays (hundreds of MiB of residuals).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np
from jax.experimental.layout import Format, Layout

from torch2xla._interop import no_stack_capture, pin_row_major

MiB = 1 << 20

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
_MOVABLE = frozenset({
    "transpose", "reshape", "broadcast_in_dim", "squeeze", "expand_dims",
    "convert_element_type", "reduce_precision", "copy", "copy_p",
})

# A step is reducing when its results are at most this fraction of the computed values and
# residuals it reads (an elementwise op of up to three operands is not).
_REDUCING = 4


def _order(flat: _Flat, n_kept: int) -> list[_Step]:
    """The steps in an order that frees memory early: JAX's order, except that

    - a *reducing* step (its results a fraction of what it reads: a weight's gradient from an
      activation's, a bias gradient's sum over tokens) runs as soon as the steps it depends on
      have run. JAX's transpose leaves many of them at the very end of the backward (those of
      parameters broadcast or transposed in the forward), which would keep every layer's
      activation gradient alive until then;
    - a *movable* step (a layout op or conversion that reads only inputs, constants and other
      movable steps' results, and whose results are not outputs: a recomputed transpose of a
      kept weight) runs just before its first user.
    """
    producer = {k: s for s in flat.steps for k in s.outs}
    final = {a for a in flat.outs if isinstance(a, int)}
    movable: dict[int, bool] = {}
    for s in flat.steps:
        movable[id(s)] = (
            s.eqn.primitive.name in _MOVABLE
            and not any(k in final for k in s.outs)
            and all(
                not isinstance(a, int) or a < flat.n_in or movable[id(producer[a])]
                for a in s.ins
            )
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
        if _REDUCING * made <= read:
            at = max((where[d] + 1 for d in deps), default=0)
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


def partition(flat: _Flat, n_kept: int, segment_bytes: int) -> list[Segment]:
    """``flat``'s steps cut into segments. A segment ends once the kept inputs (keys
    ``0..n_kept-1``, the residuals) whose last use it holds pass ``segment_bytes``: at the step,
    from there until they pass twice that, after which the fewest bytes cross to the next
    segment (between layers rather than inside one)."""
    order = _order(flat, n_kept)
    n = len(order)
    finals = {a for a in flat.outs if isinstance(a, int)}
    last_use: dict[int, int] = {}
    for i, s in enumerate(order):
        for a in s.ins:
            if isinstance(a, int):
                last_use[a] = i
    freed_at = [0] * n
    for k in range(n_kept):
        if k in last_use and k not in finals:
            freed_at[last_use[k]] += _nbytes(flat.avals[k])
    # bytes handed from steps up to i to later ones (outputs left out: they are kept anyway)
    crossing, live = [0] * n, 0
    ends: dict[int, int] = {}
    for i, s in enumerate(order):
        for k in s.outs:
            if k not in finals and last_use.get(k, i) > i:
                live += _nbytes(flat.avals[k])
                ends[last_use[k]] = ends.get(last_use[k], 0) + _nbytes(flat.avals[k])
        live -= ends.pop(i, 0)
        crossing[i] = live
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
            p for p, k in enumerate(ins)
            if last_seg[k] == j and (k < n_kept or k >= flat.n_in)  # residuals and handed values
        )
        segments.append(Segment(tuple(steps), tuple(ins), outs, last))
    return segments


def _nbytes(aval) -> int:
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


class SplitBackward:
    """The backward ``fn(kept, inputs, cts)`` run as a chain of segment programs, compiled
    here (the first freed backward) in order: a value one segment hands to the next stays in
    the layout XLA chose for it (a convolution's gradient NHWC), the outputs torch reads are
    row-major.

    Args:
        fn: the backward (traceable), its residuals first.
        kept, inputs, cts: example arguments (arrays or ``ShapeDtypeStruct``s).
        segment_bytes: residual bytes freed per segment (``partition``).
        kept_formats: the residuals' formats as the forward returns them (None: row-major).
        compiler_options: XLA compiler options for every segment.
    """

    def __init__(self, fn: Callable, kept: Sequence, inputs: Sequence, cts: Sequence,
                 segment_bytes: int, kept_formats: Sequence | None = None,
                 compiler_options: dict | None = None) -> None:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(kept, inputs, cts)
        self._out_tree = jax.tree_util.tree_structure(out_shape)
        n_kept = len(jax.tree_util.tree_leaves(kept))
        flat = flatten(closed)
        self._outs = flat.outs
        self.segments = partition(flat, n_kept, segment_bytes)
        finals = {a for a in flat.outs if isinstance(a, int)}
        used = {k for seg in self.segments for k in seg.ins} | finals
        # inputs no segment reads (residuals the backward does not need): freed at once
        self._unused = tuple(k for k in range(n_kept) if k not in used)
        self._n_in, self._n_kept, self._finals = flat.n_in, n_kept, finals
        self._nbytes = {k: _nbytes(a) for k, a in flat.avals.items()}
        formats: dict[int, Any] = {}
        if kept_formats is not None:
            formats.update((k, f) for k, f in enumerate(kept_formats) if f is not None)
        self._programs = []
        with no_stack_capture():
            for seg in self.segments:
                self._programs.append(_Program(seg, flat, formats, finals, compiler_options))

    def __call__(self, kept: list, inputs: Sequence, cts: Sequence):
        """The backward's outputs. ``kept`` is emptied: each residual is freed by the segment
        that uses it last."""
        leaves = jax.tree_util.tree_leaves((kept, inputs, cts))
        kept.clear()
        env = dict(enumerate(leaves))
        del leaves
        for k in self._unused:
            del env[k]
        for seg, program in zip(self.segments, self._programs):
            args = [env[k] for k in seg.ins]
            for p in seg.last:
                del env[seg.ins[p]]
            outs = program(args)
            del args
            env.update(zip(seg.outs, outs))
        flat_out = [jax.numpy.asarray(a.value) if isinstance(a, _Const) else env[a]
                    for a in self._outs]
        return jax.tree_util.tree_unflatten(self._out_tree, flat_out)

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
            rows.append({
                "segment": j,
                "steps": len(seg.steps),
                "arguments": m.argument_size_in_bytes / MiB,
                "temporaries": m.temp_size_in_bytes / MiB,
                "outputs": m.output_size_in_bytes / MiB,
                "residuals": residuals / MiB,
                "handed": held / MiB,
                "live": (residuals + held + m.temp_size_in_bytes + m.output_size_in_bytes) / MiB,
            })
        return rows


class _Program:
    """One segment, compiled ahead of time; ``formats`` (key -> Format) gives the layouts of
    its inputs and receives those XLA chose for the values it hands on. Arguments the
    executable rejects (another layout) go through the jit."""

    def __init__(self, seg: Segment, flat: _Flat, formats: dict, finals: set,
                 compiler_options: dict | None) -> None:
        def body(*args):
            env = dict(zip(seg.ins, args))
            _run(seg.steps, env)
            return tuple(pin_row_major(env[k]) if k in finals else env[k] for k in seg.outs)

        structs = [jax.ShapeDtypeStruct(flat.avals[k].shape, flat.avals[k].dtype) for k in seg.ins]
        in_formats = tuple(formats.get(k) for k in seg.ins)
        out_formats = tuple(None if k in finals else Format(Layout.AUTO) for k in seg.outs)
        # NOTE: nothing is donated: JAX refuses donation next to AUTO output layouts, and the
        # caller drops its last reference to an input whose last use this is, which frees it
        # when the segment ends, as donation would (XLA reuses a donated buffer only for an
        # output of its shape).
        self._jitted = jax.jit(body, compiler_options=compiler_options,
                               in_shardings=in_formats, out_shardings=out_formats)
        self._exe = self._jitted.lower(*structs).compile()
        for k, f in zip(seg.outs, self._exe.output_formats):
            if k not in finals:
                formats[k] = f

    def memory_analysis(self):
        return self._exe.memory_analysis()

    def __call__(self, args: list):
        try:
            return self._exe(*args)
        except TypeError:
            return self._jitted(*args)


def policy(option, cuda: bool) -> Callable[[int], int | None] | None:
    """The ``split_backward`` option as a function from the residuals' total bytes to the
    bytes per segment (None: one program).

    ``"auto"``: on GPU, a quarter of the residuals per segment where they pass 256 MiB. The
    peak is the first segment's (every residual is still alive there, see ``profile``), so
    more segments save little: on an H100, ResNet-50's first segment of eight held 5.9 GB of
    6.3 GB at most, and each segment costs a dispatch (ResNet-50's step is bound by its host).
    """
    if option is False:
        return None
    if option == "auto":
        if not cuda:
            return None
        return lambda total: max(total // 4, 32 * MiB) if total >= 256 * MiB else None
    if option is True:
        return lambda total: max(total // 4, 1)
    size = max(int(float(option) * MiB), 1)
    return lambda total: size


__all__ = ["Segment", "SplitBackward", "flatten", "partition", "policy"]
