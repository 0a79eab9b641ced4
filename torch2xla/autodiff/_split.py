"""The training backward as a chain of programs, so that residuals are freed as it goes.

An XLA program keeps its arguments alive until it ends. Run as one program, the backward holds
every residual of the forward while it computes its first gradients, and its temporaries come
on top: eager's autograd instead frees each saved tensor once its node has run. On GPU that put
xla's training peak 1.3x-1.7x above eager's (ResNet-50, ViT, GPT-2, BERT;
``benchmarks/analysis.md``).

Here the backward is traced once to a jaxpr, flattened (the ``jax.checkpoint`` and ``jit``
wrappers around it inlined), reordered so that memory is freed early (``_order``) and cut into
segments for the lowest estimated peak (``partition``, ``_Usage``): that planning lives in
``_segments``. Each segment is compiled as a program of its own (several at once,
``SplitBackward``); the last reference to a residual (or to a value one segment hands to the
next) is dropped when the segment that uses it last is called, so its memory returns to JAX's
pool as that segment ends.

The segments compute what the single program computes, op for op; XLA fuses within a segment
only, which costs little at the sizes where splitting pays (hundreds of MiB of residuals).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from torch2xla.autodiff._absent import absent
from torch2xla.autodiff._segments import (
    Segment,
    _Const,
    _Flat,
    _nbytes,
    _run,
    flatten,
    partition,
)
from torch2xla.guards import _persistent
from torch2xla.runtime import _pack
from torch2xla.runtime._interop import no_stack_capture
from torch2xla.runtime._jax_scope import x64

MiB = 1 << 20

# Segments compiled at once (XLA's GPU compiler also runs threads of its own per program,
# and times candidate kernels on the device). On an H100, four GEMM segments compiled at once
# took 9.7 s where one after another took 27.6 (GPT-2 bf16), but seven at once took longer
# than in sequence (ViT fp32 43 s against 22), and convolution segments compiled together
# each took ~50 s (ResNet-50 bf16, 5-8 s each alone): convolutions compile in one lane.
_COMPILE_THREADS = 3


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
        absent: the positions of the ``Absent`` cotangents it was traced for (a call with
            other absent outputs must run another program).
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
        self.absent = absent(cts)
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(kept, inputs, cts)
        self._out_tree = jax.tree_util.tree_structure(out_shape)
        self.out_metas = [(o.shape, o.dtype) for o in jax.tree_util.tree_leaves(out_shape)]
        n_kept = len(jax.tree_util.tree_leaves(kept))
        flat = flatten(closed)
        self._outs = flat.outs
        self.has_constants = any(isinstance(a, _Const) for a in flat.outs)
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
            "absent": self.absent,
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
        self.has_constants = any(isinstance(a, _Const) for a in self._outs)
        self._out_tree = plan["out_tree"]
        self.out_metas, self.ready, self._packs = plan["out_metas"], plan["ready"], plan["packs"]
        self.absent = tuple(plan.get("absent", ()))  # (older records: traced for every output)
        self._programs = list(programs)
        return self

    def constants(self) -> Callable:
        """The cached program making the backward's constant outputs (``_constants``)."""
        make = getattr(self, "_make_constants", None)
        if make is None:
            make = self._make_constants = _constants(self._outs, self.out_metas)
        return make

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
        # (where the backward returns constants, ``_constant`` makes them on the arguments' device)
        self._device = _device_of(leaves) if split.has_constants else None
        self._consts: dict[int, Any] | None = None
        self._split = split
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
                got.append(convert(self._constant(i)))
                continue
            got.append(self._value(a, convert))
        return got

    def _constant(self, i: int):
        """Output ``i``, a constant of the backward (a zero gradient of a 0-d input, say):
        made with the others by one cached program, on the device the run's arguments are on.
        Each call makes new arrays (torch may accumulate gradients into them in place); made
        in eager JAX, each cost a host-to-device copy and a dispatch."""
        if self._consts is None:
            with x64(), jax.default_device(self._device):
                self._consts = self._split.constants()()
        return self._consts[i]

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


def _device_of(leaves: Sequence) -> jax.Device | None:
    """The device of the first array among ``leaves`` (None: JAX's default device)."""
    for a in leaves:
        if isinstance(a, jax.Array):
            return next(iter(a.devices()))
    return None


def _constants(outs: Sequence, metas: Sequence) -> Callable:
    """The program ``() -> {position: array}`` making the constants among ``outs`` (the
    flattened outputs of a split backward; ``metas``: their (shape, dtype)), as the single
    program returns them. Call it inside ``x64()``."""
    values = {
        i: np.asarray(a.value, dtype=metas[i][1]).reshape(metas[i][0])
        for i, a in enumerate(outs)
        if isinstance(a, _Const)
    }
    return jax.jit(lambda: {i: jax.numpy.asarray(v) for i, v in values.items()})


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
        self._jitted = jax.jit(
            body, keep_unused=True, compiler_options=compiler_options, in_shardings=in_formats
        )  # (keep_unused: as the forward's, ``_residuals.Forward``)
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
