"""One compiled XLA program: a functional ATen graph traced to JAX, jitted, and called on torch
tensors. Training calls go through ``_autograd.XlaFunction``."""

from __future__ import annotations

import contextlib
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import torch
from torch.autograd import _profiler_enabled

from torch2xla.autodiff import _split
from torch2xla.autodiff._autograd import apply_differentiable
from torch2xla.autodiff._connected import run_fake, traced_links, traced_live
from torch2xla.autodiff._remat import checkpointed_function
from torch2xla.autodiff._train_fns import TrainFns, build_train_fns
from torch2xla.capture._annotate import annotate
from torch2xla.debug import _profile
from torch2xla.guards import _persistent
from torch2xla.ops._interpret import to_jax_function, uses_rng
from torch2xla.runtime import _checks, _host_memory, _in_place, _pack
from torch2xla.runtime._host_writes import HostWrites, write_positions
from torch2xla.runtime._interop import (
    ViewCache,
    cuda_to_torch,
    cut_cpu,
    cut_cpu_views,
    direct_call,
    host_copy,
    jax_device,
    no_stack_capture,
    program_device,
    same_device,
    to_jax,
    to_torch_cpu,
)
from torch2xla.runtime._jax_scope import D2D, D2H, H2D, INFS, NANS, NO_JIT, PINNING, unchecked, x64
from torch2xla.runtime._output_layout import OutputLayout
from torch2xla.runtime._steady import SteadyCall, settled, special_checks, steady_call, trusted


def _is_float(meta) -> bool:
    return isinstance(meta, torch.Tensor) and (
        meta.dtype.is_floating_point or meta.dtype.is_complex
    )


_NO_PLACEMENT = contextlib.nullcontext()
_requires_grad = operator.attrgetter("requires_grad")

# Dtypes that JAX truncates to 32 bits outside ``x64()``.
_WIDE = frozenset({torch.int64, torch.uint64, torch.float64, torch.complex128})


def _output_metas(gm: torch.fx.GraphModule) -> tuple[bool, list]:
    """Whether the graph returns one bare value (a fused partition with one output), and the
    fake value of each output."""
    out = gm.graph.find_nodes(op="output")[0].args[0]
    single = not isinstance(out, list | tuple)
    outs = (out,) if single else out
    return single, [o.meta.get("val") if isinstance(o, torch.fx.Node) else o for o in outs]


class _Aot:
    """A jitted function called through its ahead-of-time compiled executable.

    The first call compiles what ``precompile`` traced (the executable it compiled, from JAX's
    caches), or else its own arguments; later calls go to the executable directly. NOTE:
    ``jax.jit`` keys its executables on the kind of each argument, and a cached parameter
    arrives as a numpy view on the first calls and as a ``jax.Array`` later (``ViewCache``):
    called through the jit, the program would compile twice. A ``Compiled`` accepts both
    kinds. It rejects arguments of other types or layouts than it was compiled for
    (``TypeError``, ``ValueError``, raised before it runs anything), which the jit then handles.
    """

    __slots__ = (
        "call",
        "compiled",
        "device",
        "direct",
        "exe_key",
        "jitted",
        "options",
        "steady",
        "traced",
    )

    def __init__(
        self, jitted, device: jax.Device | None = None, options: dict | None = None
    ) -> None:
        self.jitted = jitted
        self.compiled = None
        self.call = None  # the executable, then its call without Compiled.__call__ (direct_call)
        # ``call`` once the executable ran: what a steady caller calls itself, passing what
        # it rejects to ``fallback`` (``XlaProgram._run``: one frame less a call)
        self.direct = None
        # ``direct`` without JAX's checks of each argument, for arguments it accepted before
        # (``_steady``; None where the executable's call does more)
        self.steady = None
        self.traced = None
        # Where the executable runs and the jit's compiler options: part of its key in the
        # persistent cache (``exe_key``, None where it is not stored).
        self.device, self.options = device, options
        self.exe_key: str | None = None

    def adopt(self, compiled, key: str | None) -> None:
        """Use ``compiled`` (what ``precompile`` compiled from ``trace``) from the first call."""
        self.compiled, self.exe_key, self.traced = compiled, key, None
        self.call, self.direct, self.steady = compiled, None, None

    def trace(self, *args):
        """``jax.jit(...).trace``, remembered for the first call (which may pass arguments of
        another kind than the ones traced ahead)."""
        traced = self.traced = self.jitted.trace(*args)
        return traced

    def __getattr__(self, name: str):
        # What the wrapped function says about itself (``_residuals.Forward.layout``).
        if name in _Aot.__slots__:
            raise AttributeError(name)
        return getattr(self.jitted, name)

    def __call__(self, *args):
        compiled = self.compiled
        if compiled is None:
            with x64(), no_stack_capture():  # traced as precompile traces (callers may skip x64)
                traced = self.traced or self.jitted.trace(*args)
                compiled, self.exe_key = _persistent.compile_any(
                    traced.lower(), self.options, self.device
                )
                self.compiled = self.call = compiled
            self.traced = None
        call = self.call
        try:
            out = call(*args)
        except (TypeError, ValueError):  # arguments unlike the first call's: the jit takes them
            return self.fallback(*args)
        if self.direct is None:  # it ran: from now on called directly
            self.steady = steady_call(compiled)
            self.call = self.direct = direct_call(compiled)
        return out

    def fallback(self, *args):
        """The call of arguments the executable rejected (``TypeError``, ``ValueError``:
        raised before it runs anything): through the jit.

        NOTE: not through a Compiled made for them: jax 0.10 drops the hoisted constants of
        some programs (linalg.pinv) when a Compiled is called, which raises the TypeError
        that brought us here."""
        with x64(), no_stack_capture():  # traced and compiled here, into JAX's caches
            return self.jitted(*args)


def map_list(convert: Callable, outs: Sequence) -> list:
    return list(map(convert, outs))


def _draw_seed() -> np.uint32:
    # Drawn from torch's default CPU generator, so torch.manual_seed makes XLA's randomness
    # repeat (on the CPU whatever the default device: one on CUDA synced, one on meta raised).
    return np.uint32(torch.randint(0, 2**31 - 1, (), device="cpu").item())


class XlaProgram:
    """Runs an ATen graph through XLA.

    Args:
        gm: functional ATen graph; its placeholders are the program's inputs.
        example_args: one call's arguments; non-tensor arguments are baked in as constants.
        output_requires_grad: per output, whether eager would track it (None: every float output).
        remat: checkpoint activations per module call when differentiating (``_remat``).
        compiler_options: XLA compiler options for every program it compiles (``Options``).
        auto_layouts: XLA chooses the layouts of training residuals (``_residuals``).
        packable: outputs that only torch2xla reads (the new values of mutated inputs), which
            may reach torch packed with others (``_pack``).
        split_backward: the backend option of that name (``_split.policy``).
        checks: the backend option of that name (``_checks.enabled``): whether lowerings
            check what eager raises for (indices, integer divisors) and the call raises it.
        links: returns, per output, the bitmask of the ``example_args`` positions connected to
            it in eager's autograd graph (``_connected``), or None where it cannot tell; None:
            found by running ``gm`` on fake tensors.
        writes: per output that is the new value of an input (the first ones), the position of
            that input among ``example_args``: on a GPU those inputs are donated to the
            program where they can be, which writes them in place (``_in_place``).
        order: returns the ``example_args`` positions of the leaves in the order eager's
            backward accumulates their gradients (``_accumulate``), or None where it cannot
            tell; None: not known (hooks then fire in autograd's order of one node).
    """

    # a CUDA program's unchecked call, once its checked call ran (``_steady_of``; a class
    # default for programs restored without ``__init__``: ``_stored.StoredProgram``)
    _gpu_steady: SteadyCall | None = None

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_args: Sequence,
        output_requires_grad: Sequence[bool] | None = None,
        remat: bool = False,
        compiler_options: dict | None = None,
        auto_layouts: bool = True,
        packable: Sequence[int] = (),
        split_backward: Any = "auto",
        checks: Any = "auto",
        links: Callable[[], Sequence[int] | None] | None = None,
        writes: Sequence[int] = (),
        order: Callable[[], Sequence[int] | None] | None = None,
    ) -> None:
        self.gm = gm
        self._links_source = links
        self._order_source = order  # (``accumulate_order``)
        # Tensor inputs and outputs whose memory eager's autograd graph saves: the training
        # Function saves them, so that an in-place change before the backward raises eager's
        # error (set by the backend: autodiff/_eager_backward.py).
        self.saved_inputs: tuple[int, ...] = ()
        self.saved_outputs: tuple[int, ...] = ()
        # None: not asked yet; a tuple: from ``links``; a dict: traced, per ``diff_in``
        self._links: tuple[int, ...] | dict | None = None
        self.split_backward = split_backward
        self.compiler_options = compiler_options
        self.auto_layouts = auto_layouts
        # A fused partition with one output returns it bare; the program always returns a list.
        self.single_output, metas = _output_metas(gm)
        tensors = [a for a in example_args if isinstance(a, torch.Tensor)]
        self.torch_device = program_device(
            [t.device for t in tensors], [m.device for m in metas if isinstance(m, torch.Tensor)]
        )
        self.device = jax_device(self.torch_device)
        # Inputs and outputs on another device than the program's (CPU 0-d tensors beside CUDA
        # ones, a graph's .cpu() result): moved on the way in and out (see __call__).
        self.foreign_in = tuple(
            k for k, t in enumerate(tensors) if not same_device(t.device, self.torch_device)
        )
        self.foreign_out = tuple(
            (i, m.device)
            for i, m in enumerate(metas)
            if isinstance(m, torch.Tensor) and not same_device(m.device, self.torch_device)
        )
        self.checks = _checks.enabled(checks, self.device.platform != "cpu")
        # What lowerings need to know of their node's neighbours, found on this graph as it is
        # translated (a partition's or bucket's own graph too): capture/_annotate.py.
        annotate(gm)
        with x64(), jax.default_device(self.device):  # graph constants land where the program runs
            fn = to_jax_function(gm, self.checks)
        self.rng = uses_rng(gm)
        self.tensor_pos = tuple(
            i for i, a in enumerate(example_args) if isinstance(a, torch.Tensor)
        )
        statics = {i: a for i, a in enumerate(example_args) if not isinstance(a, torch.Tensor)}
        n_args = len(example_args)
        n_out = len(metas)

        self._graph_metas = metas  # the ATen graph's outputs (fake)
        # Outputs eager lays out as a permutation of row-major (channels_last, a transpose's
        # result), or expands, are returned so and viewed back (see OutputLayout).
        layouts = [None if i in packable else OutputLayout.of(m) for i, m in enumerate(metas)]
        self._layouts = tuple((i, lay) for i, lay in enumerate(layouts) if lay is not None)
        transposes = tuple((i, lay.compute) for i, lay in self._layouts)
        if transposes:
            metas = [m if lay is None else lay.physical(m) for m, lay in zip(metas, layouts)]

        def bind(fn):  # fn(seed, *all args) -> flat_fn(seed, *tensor args)
            def flat_fn(seed, *tensors):
                it = iter(tensors)
                full = [statics[i] if i in statics else next(it) for i in range(n_args)]
                outs = fn(seed, *full)
                # the status of the runtime checks comes last, never packed (``_checks``)
                outs, status = list(outs[:n_out]), outs[n_out:]
                flat_fn.checks = fn.checks
                for i, compute in transposes:
                    outs[i] = compute(outs[i])
                packed = outs if self.packing is None else self.packing.pack(outs)
                return (*packed, *status)

            flat_fn.checks = ()  # set by each trace: the checks whose status comes last
            return flat_fn

        self._flat_fn = flat_fn = bind(fn)
        self._bind = bind
        # Outputs not connected to a differentiated input are marked non-differentiable, as
        # eager would not track them, unless the caller says which outputs eager tracks.
        self.mark_untracked = output_requires_grad is None
        if output_requires_grad is None:
            output_requires_grad = [True] * len(metas)
        diff_out = [
            i for i, (m, rg) in enumerate(zip(metas, output_requires_grad)) if rg and _is_float(m)
        ]
        self._graph_diff_out = tuple(diff_out)  # (as the ATen graph returns them, unpacked)
        self._statics = statics
        self._cuda = self.device.platform != "cpu"
        if not self._cuda:
            _host_memory.tune()  # (once per process: XLA's CPU temporaries reused)
        packable = [i for i in packable if i not in diff_out and i not in dict(self.foreign_out)]
        donated = {}
        if self._cuda and not self.checks and writes:
            untracked = frozenset(packable)
            skip = frozenset(i for i in range(len(writes)) if i not in untracked)
            donated = _in_place.donations(writes, self.tensor_pos, example_args, metas, skip)
        # diff_out and num_outputs describe the outputs as the (packed) function returns them.
        self.packing = _pack.plan(
            [(m.shape, m.dtype) if isinstance(m, torch.Tensor) else ((), None) for m in metas],
            [i for i in packable if i not in donated],
            _pack.limit_for(self._cuda),
        )
        if self.packing is None:
            self.diff_out, self.num_outputs = tuple(diff_out), len(metas)
        else:
            self.diff_out = tuple(self.packing.index(i) for i in diff_out)
            self.num_outputs = len(self.packing.rest) + len(self.packing.groups)
        self.remat = remat
        # (output among the function's, tensor position) of the writes made in place
        self.in_place = self._in_place_pairs(donated, example_args, metas)
        # {output: tensor position} of the packed writes a CPU call scatters into its inputs
        # (``_host_writes``; None: none)
        self._write_pos = (
            None
            if self._cuda or self.foreign_in
            else write_positions(self.packing, writes, self.tensor_pos)
        )
        # keep_unused: a program waits for every argument, so a fence argument (see ViewCache)
        # orders it even where the graph does not read that tensor.
        self._infer = _Aot(
            jax.jit(
                flat_fn,
                keep_unused=True,
                compiler_options=compiler_options,
                donate_argnums=tuple(1 + k for _, k in self.in_place),  # (after the seed)
            ),
            self.device,
            compiler_options,
        )
        self._all_tensors = self.tensor_pos == tuple(range(n_args))
        self._views = ViewCache(
            len(self.tensor_pos),
            fresh=self.foreign_in,
            writes=self._cuda,
            donated=[k for _, k in self.in_place],
        )
        self._host_views = not (self._cuda or self.foreign_in)  # (``jax_inputs`` adds nothing)
        self.to_torch = cuda_to_torch(self.device) if self._cuda else to_torch_cpu
        self.cut = None if self._cuda else cut_cpu  # packed outputs' pieces (_pack)
        # (an inference call's packed outputs are the new values of mutated inputs, which the
        # entry copies into them: views of one tensor, ``cut_cpu_views``)
        self.cut_writes = None if self._cuda else cut_cpu_views
        # Arguments JAX has not placed (numpy views, first calls) go to JAX's default device:
        # name ours only where that default is another device (a GPU machine, CPU tensors).
        default = jax.config.jax_default_device or jax.devices()[0]
        self._place = default != self.device
        # Calls run inside JAX's config contexts (x64, placement) only where they change
        # something: a 64-bit input or output (cotangents are outputs' dtypes), or a device
        # other than JAX's default. Tracing and compiling always run inside x64.
        dtypes = [a.dtype for a in (*example_args, *metas) if isinstance(a, torch.Tensor)]
        self.wide = any(d in _WIDE for d in dtypes)
        self.scoped = self._place or self.wide
        # a CUDA program's unchecked call, once its checked call ran (``_steady_of``)
        self._gpu_steady: SteadyCall | None = None
        self._train_cache: dict[tuple[int, ...], TrainFns] = {}
        self.plans: dict = {}  # ``_autograd._Plan`` per diff_in (``apply_differentiable``)
        self._remat_fn = None

    # -- inference -------------------------------------------------------------------------
    # The hot path: everything that can be decided once is decided in __init__, and a steady
    # call of a CPU program runs in this one frame (its inputs' views, the executable's C++
    # call, the outputs' export mapped in C: ``tests/test_overhead_s19.py`` counts the calls).
    def __call__(self, args: Sequence, _ranged: bool = False) -> list[torch.Tensor]:
        # a torch.profiler range named after the graph while a profiler runs (entered by
        # ``_profile.ranged``, which calls back with ``_ranged``): one check, no frame, else
        if not _ranged and (_profile._jax_tracing or _profiler_enabled()):
            return _profile.ranged(self, args)
        if (
            NANS.value or INFS.value or NO_JIT.value or H2D.value or D2H.value or D2D.value
        ) and not PINNING.on:  # (``_jax_scope.switched``, inline: no frame)
            with unchecked():
                return self(args, _ranged)
        tensors = args if self._all_tensors else [args[i] for i in self.tensor_pos]
        if self.foreign_in:
            tensors = self.move_foreign(tensors)
        if self.diff_out and torch.is_grad_enabled():
            # (float or complex, by torch's rule; in C: a list comprehension is a frame)
            diff_in = tuple(itertools.compress(itertools.count(), map(_requires_grad, tensors)))
            if diff_in:
                seed = _draw_seed() if self.rng else None
                outs = list(apply_differentiable(self, diff_in, seed, tensors))
                if self.packing is not None:
                    outs = self.packing.unpack(outs, None)
                if self._layouts or self.foreign_out:
                    return self._finished(outs)
                return outs
        seed = _draw_seed() if self.rng else None
        fast = None  # (the view cache's check that found every tensor as cached, if it did)
        gpu_steady = self._gpu_steady
        if self.scoped:
            # A CPU program's cached views that its checked call accepted run its steady call
            # outside JAX's config contexts, which only imports and JAX's checked call read
            # (``_steady.settled``: nothing to import; the executable and its outputs' types
            # were fixed when it was compiled, inside them)
            fast = self._views._fast
            steady = fast.trusted if fast is not None and self._host_views else None
            views = settled(self._views, tensors) if steady else None  # (no frame else)
            if views is not None and fast.views is views and not special_checks():
                outs = steady.run(views).consume_with_handlers(steady.handlers)
            elif self._host_views:
                with x64(), self.placement():
                    views = self._views(tensors, True)[0]
                    fast = self._views._fast
                    outs = self._checked(seed, views, fast)
            else:
                fast = None
                # (a context object of JAX's config holds its previous value: one per call)
                with x64(), self.placement():
                    views = self.jax_inputs(tensors)
                    if gpu_steady is not None and not special_checks():
                        outs = gpu_steady.run(views).consume_with_handlers(gpu_steady.handlers)
                    else:
                        outs = self._infer(seed, *views)
                        if self._cuda:
                            self._gpu_steady = self._steady_of(seed)
        elif gpu_steady is not None and not special_checks():
            views = self.jax_inputs(tensors)
            outs = gpu_steady.run(views).consume_with_handlers(gpu_steady.handlers)
        else:
            # (on the CPU, the cached views need no fence: ``jax_inputs`` without its frame)
            views = self._views(tensors, True)[0] if self._host_views else self.jax_inputs(tensors)
            if self._cuda and self._infer.direct is not None:
                self._gpu_steady = self._steady_of(seed)
            # the cached views the checked call accepted before: run without its checks
            # (``_steady``; ``fast.views`` is what ``whole`` returned when nothing changed)
            fast = self._views._fast
            steady = fast.trusted if fast is not None and fast.views is views else None
            if steady and not special_checks():  # (``SteadyCall.__call__``, inlined)
                outs = steady.run(views).consume_with_handlers(steady.handlers)
            else:
                outs = self._checked(seed, views, fast)
        if self.in_place:  # (the donated views are gone: the outputs in their memory stay)
            self._views.adopt(self.in_place, views, outs)
        checks = self._flat_fn.checks
        if checks:
            _checks.raise_failed(outs[-1], checks)
            outs = outs[:-1]
        if self.packing is None:
            if self.in_place:
                outs = _in_place.exported(self.in_place, outs, tensors, self.to_torch)
            else:
                outs = list(map(self.to_torch, outs))
        else:
            # (writes scattered into their inputs where the view cache found them all)
            writes = None
            if fast is not None and self._write_pos is not None and fast.views is views:
                writes = fast.writes
                if writes is None:
                    plan = HostWrites.plan(self.packing, self._write_pos, tensors)
                    writes = fast.writes = plan or False
            if writes:
                outs = writes.unpack(self.packing, outs, tensors, self.to_torch, self.cut_writes)
            else:
                outs = self.packing.unpack(outs, self.to_torch, self.cut_writes)
        if self._layouts or self.foreign_out:
            return self._finished(outs)
        return outs

    def _checked(self, seed, views: Sequence, fast) -> list:
        """The executable's call through JAX's checks of its arguments (the first calls,
        views not cached or not accepted before), or through the jit where it rejects them
        (``_Aot``). Where it accepts the view cache's tuple (``fast.views``), that tuple runs
        the steady call from then on (``_Fast.trusted``)."""
        infer = self._infer
        direct = infer.direct
        if direct is None:
            return infer(seed, *views)
        try:
            outs = direct(seed, *views)
        except (TypeError, ValueError):  # (rejected before it ran: ``_Aot``)
            return infer.fallback(seed, *views)
        if fast is not None and fast.trusted is None and fast.views is views:
            fast.trusted = trusted(infer.steady, views, seed)
        return outs

    def _steady_of(self, seed) -> SteadyCall | None:
        """The unchecked call of a CUDA program's executable (``_steady``) once its checked call
        ran: every view of a CUDA call is a ``jax.Array`` that JAX would accept, whether cached
        or imported afresh (``to_jax``: on the program's device, row-major, its dtype and
        shape the key's), so JAX's checks of each argument (~0.8 us an argument: ~150 us of a
        decoding step's 187) find nothing after the first call. Not for programs that draw
        random numbers (a seed argument) or take tensors of another device."""
        if seed is not None or self.foreign_in:
            return None
        return self._infer.steady

    def _finished(self, outs: list) -> list:
        """The outputs viewed with eager's strides (``OutputLayout``), and those eager returns
        on another device than the program's moved there."""
        if self._layouts:
            outs = self._laid_out(outs)
        for i, device in self.foreign_out:  # (autograd moves their gradients back)
            outs[i] = outs[i].to(device)
        return outs

    def _in_place_pairs(self, donated: dict, example_args: Sequence, metas: Sequence) -> tuple:
        """(output among the jitted function's, tensor position) per write JAX makes in the
        donated input's memory (``_in_place.paired``)."""
        if not donated:
            return ()
        tensors = [example_args[p] for p in self.tensor_pos]
        in_avals = [(tuple(t.shape), t.dtype) for t in tensors]
        avals = [(tuple(m.shape), m.dtype) if isinstance(m, torch.Tensor) else None for m in metas]
        if self.packing is None:
            out_avals, flat = avals, {i: i for i in donated}
        else:
            out_avals = [avals[i] for i in self.packing.rest]
            out_avals += [("packed", g.dtype) for g in self.packing.groups]
            flat = {i: self.packing.index(i) for i in donated}
        pairs = _in_place.paired({flat[i]: k for i, k in donated.items()}, in_avals, out_avals)
        return tuple(sorted(pairs.items()))

    def _laid_out(self, outs: list) -> list:
        for i, layout in self._layouts:
            outs[i] = layout.view(outs[i])
        return outs

    def move_foreign(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """``tensors`` with those on another device than the program's moved by torch where
        JAX cannot take them as host values (tensors of another GPU) or autograd must see the
        move (so that it moves their gradients back). CPU tensors that need no gradient stay:
        ``jax_inputs`` hands them to JAX as host values."""
        tensors = list(tensors)
        for k in self.foreign_in:
            t = tensors[k]
            if t.requires_grad or t.device.type != "cpu":
                tensors[k] = t.to(self.torch_device)
        return tensors

    def placement(self):
        """The context every call of this program's executables runs in (and the ahead-of-time
        compile too: JAX keys executables on the default-device context, so using it on one
        path and not the other compiles the program twice)."""
        # (a context object of JAX's config holds its previous value: one per call, not shared)
        return jax.default_device(self.device) if self._place else _NO_PLACEMENT

    def jax_inputs(self, tensors: Sequence[torch.Tensor]) -> list:
        """Zero-copy JAX views of the program's tensor inputs, parameters imported once
        (``ViewCache``) and ordered against torch's current CUDA stream. Call inside ``x64()``
        where ``self.scoped``."""
        views, fence = self._views(tensors)
        if fence and self._cuda:
            views[0] = to_jax(tensors[0])
        for k in self.foreign_in:  # (fresh on every call: never a fence)
            t = tensors[k]
            if t.device.type == "cpu":
                views[k] = host_copy(t)
        return views

    # -- training --------------------------------------------------------------------------
    def train_fns(self, diff_in: tuple[int, ...]) -> TrainFns:
        """Jitted forward-with-vjp and backward for the inputs ``diff_in`` being differentiated."""
        fns = self._train_cache.get(diff_in)
        if fns is None:
            fns = self._train_cache[diff_in] = build_train_fns(
                self.train_flat_fn(),
                len(self.tensor_pos),
                diff_in,
                self.diff_out,
                self.num_outputs,
                recompute_layout=not self.remat,
                compiler_options=self.compiler_options,
                auto_layouts=self.auto_layouts,
                pack_limit=_pack.limit_for(self._cuda),
                split=_split.policy(self.split_backward, self._cuda),
                device=self.device,
            )
            # parameters change kind after the first calls (see _Aot)
            fns.fwd = _Aot(fns.fwd, self.device, self.compiler_options)
        return fns

    def connected(self, diff_in: tuple[int, ...]) -> tuple[frozenset[int], ...]:
        """Per differentiated output, the positions in ``diff_in`` connected to it in eager's
        autograd graph: those get a gradient (zeros where the derivative is zero), the others
        None (``_connected``)."""
        links = self.input_links(diff_in)
        return tuple(
            frozenset(p for p, k in enumerate(diff_in) if links[i] >> k & 1)
            for i in self._graph_diff_out
        )

    def input_links(self, diff_in: tuple[int, ...]) -> tuple[int, ...]:
        """Per output of the ATen graph, the bitmask of the tensor inputs connected to it in
        eager's autograd graph when the inputs ``diff_in`` require grad (found once)."""
        if self._links is None:
            by_arg = self._links_source() if self._links_source is not None else None
            if by_arg is None:
                self._links = {}
            else:
                pos = self.tensor_pos
                self._links = tuple(
                    sum(1 << k for k, i in enumerate(pos) if mask >> i & 1) for mask in by_arg
                )
        if isinstance(self._links, tuple):
            return self._links
        if diff_in not in self._links:
            grad = [k in diff_in for k in range(len(self.tensor_pos))]
            self._links[diff_in] = traced_links(
                self.autograd_outputs,
                self.input_metas(),
                grad,
                len(self._graph_metas),
                getattr(self, "label", "torch2xla"),
            )
        return self._links[diff_in]

    def live_inputs(
        self, diff_in: tuple[int, ...], active: tuple[int, ...]
    ) -> frozenset[int] | None:
        """The positions in ``diff_in`` that eager's backward through the differentiated
        outputs ``active`` gives a gradient, where connectivity may not tell (a graph traced
        on fake tensors: ``_connected.traced_live``); None where it does (Dynamo's example
        values)."""
        if not isinstance(self._links, dict):
            return None
        grad = [k in diff_in for k in range(len(self.tensor_pos))]
        found = traced_live(
            self.autograd_outputs,
            self.input_metas(),
            grad,
            [self._graph_diff_out[j] for j in active],
            getattr(self, "label", "torch2xla"),
        )
        return (
            None if found is None else frozenset(p for p, k in enumerate(diff_in) if found >> k & 1)
        )

    def accumulate_order(self) -> tuple[int, ...]:
        """The tensor inputs that are leaves, in the order eager's backward accumulates their
        gradients (``_accumulate``); () where it cannot tell."""
        source = self._order_source
        found = source() if source is not None else None
        if not found:
            return ()
        pos = self.tensor_pos
        return tuple(k for i in found for k, j in enumerate(pos) if j == i)

    def input_metas(self) -> list:
        """The tensor inputs' fake values (shape, stride, dtype, device) from the ATen graph."""
        placeholders = self.gm.graph.find_nodes(op="placeholder")
        return [placeholders[i].meta["val"] for i in self.tensor_pos]

    def output_metas(self) -> list:
        """The ATen graph's outputs' fake values."""
        return self._graph_metas

    def autograd_outputs(self, tensors: Sequence[torch.Tensor]) -> list:
        """The ATen graph's outputs for ``tensors`` (fake), computed by torch with autograd
        (``_connected.run_fake``)."""
        it = iter(tensors)
        n = len(self.tensor_pos) + len(self._statics)
        full = [self._statics[i] if i in self._statics else next(it) for i in range(n)]
        return run_fake(self.gm, full)

    def can_raise(self) -> bool:
        """Whether a call can raise a runtime check's error (``_checks``): the traced function
        registered checks (the training function too, where remat makes it another)."""
        return any(getattr(fn, "checks", ()) for fn in (self._flat_fn, self._remat_fn))

    def checked_fn(self):
        """The function training differentiates, whose ``checks`` (set when it is traced) are
        the runtime checks whose status the forward returns (``_checks``)."""
        return self.train_flat_fn()

    def train_flat_fn(self):
        """``flat_fn(seed, *tensors)`` as training differentiates it (remat: checkpointed)."""
        if not self.remat:
            return self._flat_fn
        if self._remat_fn is None:  # activation checkpointing per module call
            with x64(), jax.default_device(self.device):
                self._remat_fn = self._bind(checkpointed_function(self.gm, self.checks))
        return self._remat_fn
