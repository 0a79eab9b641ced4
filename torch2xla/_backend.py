"""The Dynamo backend ``xla``: options, per-signature compilation, fallback, wiring."""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable, Sequence

import torch

from torch2xla import _fallback as fallback
from torch2xla._entry import (
    MIXED_WRITES,
    Cut,
    EagerVersions,
    Entry,
    LiftedChanged,
    Submodule,
    eager_held_versions,
    first_line,
    records_write,
)
from torch2xla._errors import (
    CompileError,
    LoweringError,
    OpError,
    Unsupported,
    user_lowering,
)
from torch2xla._fallback import FallbackWarning
from torch2xla._options import OptionError, Options
from torch2xla._registration import install as _register_once
from torch2xla.autodiff import _eager_backward
from torch2xla.autodiff._accumulate import example_order
from torch2xla.autodiff._connected import example_links, examples_hold
from torch2xla.autodiff._eager_backward import top_saved_hooks as _top_saved_hooks
from torch2xla.capture import _data_dependent as data_dependent
from torch2xla.capture import _numbers as numbers
from torch2xla.capture import _self_reads as self_reads
from torch2xla.capture import _writes as writes
from torch2xla.capture._aliases import (
    lone_views,
    output_aliases,
    output_marks,
    shared_bases,
    untracked_views,
)
from torch2xla.capture._eager_inputs import eager_inputs
from torch2xla.capture._fake_errors import install as _fake_errors_as_graph_breaks
from torch2xla.capture._float_values import float_values
from torch2xla.capture._function_inputs import install as _break_at_duplicate_function_inputs
from torch2xla.capture._host_numbers import with_host_numbers
from torch2xla.capture._inference import (
    inference_outputs,
    leaves_inference_mode,
    untrack_inference_values,
)
from torch2xla.capture._inplace_composites import install as _split_integer_composites_as_2_13
from torch2xla.capture._int_values import int_values
from torch2xla.capture._lower import LoweredGraph, lower
from torch2xla.capture._lstm_states import install as _lstm_states_as_eager
from torch2xla.capture._no_grad_values import untrack_no_grad_values
from torch2xla.capture._partition import find_unsupported, split
from torch2xla.capture._passes import run_passes
from torch2xla.capture._read_through import views_read_through
from torch2xla.capture._reentrant import install as _trace_reentrant_checkpoints_as_eager
from torch2xla.capture._stop_gradient import grad_mode_after, write_records
from torch2xla.capture._try_blocks import skip_frame_in_try
from torch2xla.capture._written import self_overlapping
from torch2xla.debug._dump import dumping
from torch2xla.debug._stages import (
    Build,
    RecordLog,
    input_names,
    is_detailed,
    wrapped_module,
)
from torch2xla.guards import BUILD_LOCK, BucketSpec, GraphGuards, _persistent
from torch2xla.guards._graph import DynamoContext
from torch2xla.ops._arg_checks import check_graph
from torch2xla.ops._interpret import uses_rng
from torch2xla.runtime import _fork, _stored, _stored_key, _swap
from torch2xla.runtime._build_state import BuildState
from torch2xla.runtime._interop import no_stack_capture
from torch2xla.runtime._jax_scope import x64
from torch2xla.runtime._program import XlaProgram
from torch2xla.runtime._scalar_outputs import as_scalars, scalar_kind

_graph_ids = itertools.count()
# (its ``_current_level`` is rebound as dual levels open and close: read from the module)
_forward_ad = torch.autograd.forward_ad

# Without this Dynamo runs any frame holding an nn.LSTM/GRU eagerly, silently.
torch._dynamo.config.allow_rnn = True
# Dynamo as eager: a graph break at a Function given one tensor twice (torch 2.11 drops
# gradients there); a reentrant checkpoint whose arguments require no grad runs fn in no_grad.
_break_at_duplicate_function_inputs(), _trace_reentrant_checkpoints_as_eager()
# torch 2.11: LSTM h_n/c_n of eager's shape; integer addcdiv_/addcmul_ split as 2.13 does.
_lstm_states_as_eager(), _split_integer_composites_as_2_13()
# Shapes and dtypes eager rejects, seen by Dynamo's fake run: eager raises its own error there.
_fake_errors_as_graph_breaks()
# torch.utils.swap_tensors (m.double() with swapped parameters) forgets our weak references
_swap.install()


def xla_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence,
    *,
    mode: str | None = None,
    options: dict | None = None,
):
    """Dynamo backend: ``torch.compile(model, backend="xla", mode=..., options={...})``.

    Returns a callable that runs ``gm`` through JAX/XLA, compiling one XLA program per input
    signature on first use. Where ``mode`` or ``options`` are not ones torch2xla takes, the
    callable raises ``OptionError`` instead: raised here, Dynamo would hand the user its
    ``BackendCompilerFailed`` wrapping it, which ``except torch2xla.OptionError`` misses.
    """
    try:
        parsed = Options.parse(mode, options)
    except OptionError as e:
        message = str(e)

        def refuse(*args):
            raise OptionError(message)

        return refuse
    skip_frame_in_try(gm, FallbackWarning)  # (its handler could not run: eager runs it)
    return CompiledGraph(gm, parsed)


# Threads whose first torch.compile(backend="xla") overlap: one registration, no AssertionError.
_register_once("xla", xla_backend)


class CompiledGraph:
    """A Dynamo graph, compiled to XLA once per signature of its inputs."""

    def __init__(
        self, gm: torch.fx.GraphModule, options: Options, context: DynamoContext | None = None
    ) -> None:
        data_dependent.drop_noop_sets(gm)  # (``x.data = x``: module.to(its own dtype))
        untrack_no_grad_values(gm)  # (Dynamo's ``F.pad`` under no_grad requires grad)
        untrack_inference_values(gm)  # (``enable_grad()`` inside ``inference_mode()``)
        self._grad_after = grad_mode_after(gm)  # (``torch.set_grad_enabled(False)`` inside)
        # Outputs that are Python numbers in eager (a size, ``layer.n += x.shape[0]`` written
        # back by Dynamo): the program returns them as 0-d tensors
        out = gm.graph.find_nodes(op="output")[0].args[0]
        self.scalar_outputs = tuple(
            (i, kind)
            for i, o in enumerate(out if isinstance(out, list | tuple) else (out,))
            for kind in [scalar_kind(o)]
            if kind is not None
        )
        # Int inputs used only as values: taken as 0-d int64 tensors, every value one program
        # (``gm`` rewritten for them; read after this only)
        self.int_values = int_values(gm)
        # Float inputs used only as elementwise operands: taken as the 0-d tensors Dynamo
        # passes (no ``.item()``), every value one program (``capture/_float_values.py``);
        # Python arithmetic on them done on the host, passed as new inputs (``_host_numbers``)
        gm, self.kept_floats, self.host_numbers = float_values(gm)
        self._int_tensors = self.int_values is not None and bool(self.int_values.positions)
        self.gm, self.options = gm, options
        self.program_options = {  # what every XlaProgram of this graph is built with
            "remat": options.remat,
            "compiler_options": options.xla_compiler_options(),
            "auto_layouts": options.residual_layouts == "auto",
            "split_backward": options.split_backward,
            "checks": options.checks,
        }
        self.name = f"graph_{next(_graph_ids)}"
        # for explain and dumps: x, self.fc1.weight
        self.input_names = input_names(gm, wrapped_module())
        # Key, cache, bucketing, compile records and logs: torch2xla/guards.
        self.guards = GraphGuards(
            gm,
            self.name,
            self._build,
            options.cache_size,
            BucketSpec.parse(options.buckets),
            context,  # (None: read from Dynamo's compile in progress)
            self.int_values.kept if self.int_values is not None else None,
        )
        self.key, self.cache = self.guards.key, self.guards.cache
        self.recompile_reasons = self.guards.recompile_reasons
        self.output_requires_grad = tuple(
            bool(getattr(o.meta.get("example_value"), "requires_grad", True))
            if isinstance(o, torch.fx.Node)
            else False
            for o in (out if isinstance(out, list | tuple) else (out,))
        )
        self.output_aliases = output_aliases(gm)
        self.shared_bases = shared_bases(gm)
        self.lone_views = lone_views(gm)
        self.lone_untracked = untracked_views(gm, self.lone_views)
        self.output_marks = output_marks(gm, self.output_aliases, self.output_requires_grad)
        self.inference_outputs = inference_outputs(gm)  # (made in an inference-mode block)
        # (graphs whose every in-place write autograd records: their mutated inputs that
        # require grad get the new values' history, ``_tracked_writes``)
        self.records_writes, self.input_writes = write_records(gm)
        # eager's version-counter bumps per input, read before anything else runs the graph
        versions = EagerVersions(gm)  # (each input's own, ``counts``; a cut: the examples')
        self.versions, self._cut_versions = versions.counts, versions.examples
        self.held_versions = eager_held_versions(gm)
        self._example_links: tuple[int, ...] | None = None
        # eager's backward-time errors per output, and the outputs its graph saves (None: not
        # looked for yet; only graphs that differentiate look: _eager_backward)
        self._backward_errors: dict[int, RuntimeError] | None = None
        self._saved: tuple | None = None  # (``saved_per_output``)
        self._output_saves: tuple[frozenset[int] | None, ...] | None = None
        self._warned = False
        self._warned_eager: set[str] = set()  # (the reasons of ``_fallback.in_eager_for`` warned)
        # (whether a call can save tensors for a backward: saved-tensor hooks then apply)
        self._trains = any(self.output_requires_grad)
        # (an ``inference_mode(False)`` block whose outputs eager tracks even where the call
        # is in inference mode: such calls run in eager)
        self._leaves_inference = self._trains and leaves_inference_mode(gm)
        # writes into self-overlapping tensors that eager accepts (capture/_writes.py; None:
        # not looked for yet)
        self._overlapping: list[torch.fx.Node] | None = None
        self._strided: tuple[writes.StridedWrite, ...] = ()  # (through as_strided: outside)
        self._cut: Cut | None = None  # set where data-dependent ops cut the graph
        # ops whose lowering raised in this graph, run in eager since (why, per op: _build)
        self._failed_ops: dict = {}
        self.records = RecordLog(options.cache_size)  # CompileRecords, for explain
        # whether a call can raise eager's error after drawing random numbers (a signature
        # that draws and has runtime checks), so that its replay needs the generator's state
        self._keeps_state: bool | None = None

    def __call__(self, *args):
        if self._int_tensors:
            args = self.int_values.tensors(args)
        if self.host_numbers:
            args = with_host_numbers(self.host_numbers, args)
        if _forward_ad._current_level >= 0 and fallback.dual(args):
            return fallback.in_eager_for(self, fallback.REASON_DUAL, args)
        if (
            self._trains
            and _top_saved_hooks(False) is not None
            and _eager_backward.saved_tensor_hooks_apply()
        ):
            return fallback.in_eager_for(self, fallback.REASON_HOOKS, args)
        if self._leaves_inference and torch.is_inference_mode_enabled():
            return fallback.in_eager_for(self, fallback.REASON_LEAVES_INFERENCE, args)
        if _fork.IN_CHILD:
            return fallback.in_forked_child(self, args)
        # (the generator's state, for the replay of a call that raises after drawing random
        # numbers; taken until the first build says whether a call can)
        state = torch.default_generator.get_state() if self._keeps_state is not False else None
        try:
            outs = self.guards.run(args)
        except OpError as e:  # eager's error: eager's side effects too
            error = e
        except LiftedChanged:  # (before anything ran)
            return fallback.in_eager_for(self, fallback.REASON_LIFTED, args)
        else:  # (``_fallback._numbers`` inlined: the hot path)
            if self._grad_after is not None:  # (the mode the graph's run leaves, as eager's)
                torch._C._set_grad_enabled(self._grad_after)
            return as_scalars(outs, self.scalar_outputs) if self.scalar_outputs else outs
        return fallback.replay(
            self, error, args, state
        )  # (outside the handler: no chained context)

    def __deepcopy__(self, memo: dict) -> CompiledGraph:
        # Like the function other backends return, a compiled graph is used as immutable: its
        # copy is itself (Dynamo's minifier deep-copies what the backend returns).
        return self

    # Dynamo's accuracy minifier reads parameters and buffers from what the backend returns,
    # as from a module: they are the Dynamo graph's own (usually none: Dynamo lifts them).
    def named_parameters(self, *args, **kwargs):
        return self.gm.named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        return self.gm.named_buffers(*args, **kwargs)

    def _links(
        self, lowered: LoweredGraph, grad: Sequence[bool], tracked: Sequence[bool] = ()
    ) -> tuple[int, ...] | None:
        """Per output of ``lowered``'s ATen graph, the bitmask of its inputs connected to it in
        eager's autograd graph, from the Dynamo graph's example values (``_connected``); None
        where they cannot tell (``_connected.examples_hold``)."""
        if not examples_hold(self.gm, lowered, grad, tracked):
            return None
        if self._example_links is None:
            self._example_links = example_links(self.gm)
        links = self._example_links
        if links is None or len(links) != lowered.num_user_outputs:
            return None
        return (0,) * len(lowered.mutations) + links

    def _order(self, lowered: LoweredGraph, grad: Sequence[bool], tracked: Sequence[bool] = ()):
        """The leaves in eager's order of accumulation (``_accumulate``), from the example
        values; None where they cannot tell (``_connected.examples_hold``)."""
        return example_order(self.gm) if examples_hold(self.gm, lowered, grad, tracked) else None

    def _eager_backward(self, args: Sequence, lowered: LoweredGraph, program=None) -> dict:
        """Eager's backward-time errors per user output (``_eager_backward``) for a call with
        ``args``, none where nothing is differentiated; ``program`` (the signature's, where one
        program runs it) is told which of its inputs and outputs eager's graph saves."""
        grads = any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        on = (torch.is_grad_enabled() or self.output_marks.enables_grad) and grads  # (as Entry)
        if not on or torch.is_inference_mode_enabled() or not any(self.output_requires_grad):
            return {}
        if self._backward_errors is None:
            self._backward_errors = _eager_backward.backward_errors(self.gm)
            self._saved = _eager_backward.saved_per_output(self.gm)
            self._output_saves = _eager_backward.output_saves(self.gm)
        if program is not None:
            per_output, named = self._saved or ((), {})
            known = [s for s in per_output if s is not None]
            saved_in = frozenset().union(*(s[0] for s in known))
            saved_out = frozenset().union(*(s[1] for s in known))
            n_mut, n_lifted = len(lowered.mutations), len(lowered.lifted)
            saved = [n_mut + i for i in sorted(saved_out)]
            packing = getattr(program, "packing", None)
            # (as the packed program returns them; packed members are never differentiable,
            # so no autograd node saves them)
            place = (lambda k: k) if packing is None else packing.index
            if packing is not None:
                saved = [k for k in saved if k in packing.rest]
            program.saved_outputs = tuple(map(place, saved))
            kept = frozenset(saved)
            # per user output, the nodes of eager's graph its backward frees (none known for
            # the new values of inputs written with autograd's record)
            output_saves = self._output_saves
            if output_saves is not None and len(output_saves) == lowered.num_user_outputs:
                program.output_saves = {
                    place(n_mut + i): s
                    for i, s in enumerate(output_saves)
                    if s is not None and (packing is None or n_mut + i in packing.rest)
                }
            # (not with synthetic bases for inputs; not the inputs the graph changes: their new
            # values are written back after the call, where eager's kernel saved them after
            # its change, and a change inside the graph is found by ``backward_errors``)
            if lowered.aliasing is None:
                mutated = frozenset(lowered.mutations)
                program.saved_inputs = tuple(
                    k
                    for k, i in enumerate(program.tensor_pos)
                    if i - n_lifted in saved_in and i not in mutated
                )
                # (their versions are checked from the end of the call, after the write)
                program.saved_written = tuple(
                    k
                    for k, i in enumerate(program.tensor_pos)
                    if i - n_lifted in saved_in and i in mutated
                )
                # per user output, the inputs and outputs its backward checks: a backward
                # through the others runs after an in-place change of them, as eager's
                # (how eager's error names each saved output: ``_versions``)
                program.saved_names = {
                    place(n_mut + i): d for i, d in named.items() if n_mut + i in kept
                }
                if len(per_output) == lowered.num_user_outputs:
                    pos = {i - n_lifted: k for k, i in enumerate(program.tensor_pos)}
                    program.output_saved = {
                        place(n_mut + i): (
                            frozenset(pos[j] for j in s[0] if j in pos),
                            frozenset(place(n_mut + j) for j in s[1] if n_mut + j in kept),
                        )
                        for i, s in enumerate(per_output)
                        if s is not None and (packing is None or n_mut + i in packing.rest)
                    }
        return self._backward_errors

    @torch._disable_dynamo
    def _build(self, args: Sequence, lowering: Callable | None = None) -> Entry | Cut:
        """``_compile``, with what fails in it run in eager PyTorch unless in strict mode: an
        op whose lowering raised (each node of that op in this graph, from then on), or the
        whole graph where the export or XLA failed. Such a failure is our bug; eager's result
        is the right one, so the run goes on, with a ``FallbackWarning`` that says so."""
        # (Dynamo's minifier, when armed, looks for the failure itself; a padded program's
        # failure is bucketing's to handle: it compiles the exact sizes instead)
        raising = (
            self.options.strict
            or torch._dynamo.config.repro_after is not None
            or lowering is not None
        )
        while True:
            try:
                return self._compile(args, lowering)
            except LoweringError as e:
                op = getattr(e.node, "target", None)
                if raising or op is None or op in self._failed_ops:
                    raise
                if user_lowering(e.node) is not None:
                    raise  # (the user's own lowering: the error is what they need)
                original = getattr(e, "original", e)
                self._failed_ops[op] = (
                    f"its lowering raised {type(original).__name__}: "
                    f"{first_line(original)} (a bug in torch2xla: please report it)"
                )
            except CompileError as e:
                if raising or e.stage not in fallback.EAGER_AFTER or self._cut is not None:
                    raise
                return fallback.after_failure(self, e, args)

    def _compile(self, args: Sequence, lowering: Callable | None = None) -> Entry | Cut:
        if self._cut is not None:  # cut around data-dependent ops: one entry for every call
            return self._cut
        # (subclasses, sparse, quantized, meta: first, as the checks below read the graph's
        # example values, whose sizes a jagged tensor makes nested ints without a value)
        foreign = eager_inputs(self.gm, self.input_names, args)
        if foreign:
            with Build(self, args) as b:
                return fallback.in_eager(self, foreign, b, every=False)
        # Build times each stage, reports long compiles, names this graph in errors, records
        # the signature for explain and writes dumps (torch2xla/debug/_stages.py). ``lowering``
        # replaces the export of the Dynamo graph (bucketing's rewritten graph, whose programs
        # take the real sizes too: not recorded in the persistent cache).
        if self._overlapping is None:  # (raises eager's error where eager rejects the write)
            self._numbers_gm = numbers.joined(self.gm)  # (Dynamo's split addcdiv, addcmul)
            numbers.check_composites(self._numbers_gm)
            self._overlapping = writes.check_writes(self.gm)
            self._strided = writes.strided_writes(self.gm)
        # (a float kept a number compiles a program per value: eager's checks of this value)
        numbers.check_call_values(self._numbers_gm, args)
        key = self._stored_key(args) if lowering is None else None
        with Build(self, args) as b:
            if self.key.leaf_writes(args):  # (eager raises at the write: eager runs it)
                return fallback.in_eager(self, [], b, every=False)
            # (eager raises at an op that saves an inference tensor made inside: eager runs it)
            if _eager_backward.saves_inference_tensor(self.gm) is not None:
                return fallback.in_eager(self, [], b)
            if key is not None:  # a signature recorded by an earlier process (_stored.py)
                entry = self._restore(b, key, args)
                if entry is not None:
                    return b.done(self._drawing(entry))
            if self._overlapping:
                missing = [Unsupported(n, writes.REASON) for n in self._overlapping]
                return fallback.in_eager(self, missing, b)
            # (the same where this call's input overlaps itself and the example's layout was
            # symbolic, so ``check_writes`` could not tell: this signature runs in eager)
            placeholders = self.gm.graph.find_nodes(op="placeholder")
            shared = [
                Unsupported(placeholders[i], writes.REASON)
                for i in self.key.self_overlap_pos
                if self_overlapping(args[i])
            ]
            shared += [Unsupported(n, writes.REASON) for n in writes.outside(self._strided, args)]
            if shared:
                return fallback.in_eager(self, shared, b, every=False)
            mixed = self._mixed_writes(args)
            if mixed:
                return fallback.in_eager(self, mixed, b)
            if lowering is not None:
                lowered = b.run("lowering", lowering, args)
            else:
                found = data_dependent.data_dependent_nodes(self.gm)
                if not found:
                    try:
                        lowered = b.run("lowering", lower, self.gm, args)
                    except data_dependent.EXPORT_ERRORS as e:
                        node = data_dependent.failing_node(e, self.gm)
                        if node is None:
                            raise
                        b.comp.failed = None  # handled: not an export failure to report
                        found = [node]
                if found:
                    return fallback.cut_around(self, found, b)
            if lowered.aliasing is not None:  # (eager's error for a write reading another input)
                reads = self_reads.check_overlapping_inputs(self.gm, args)
                if reads:  # (eager's kernel reads what it wrote: this signature runs in eager)
                    return fallback.in_eager(
                        self, [Unsupported(n, writes.REASON) for n in reads], b, every=False
                    )
            lowered = b.passes(lowered)
            check_graph(lowered.gm)  # eager's errors from dtypes that tracing skips
            inputs = lowered.inputs(args)
            tracked = self._tracked_writes(lowered, inputs)
            grads_flow = any(self.output_requires_grad) or any(tracked)
            unsupported = find_unsupported(
                lowered.gm,
                [isinstance(x, torch.Tensor) and x.requires_grad for x in inputs]
                if grads_flow
                else None,
            )
            unsupported += b.eager_ops(lowered.gm, unsupported)
            unsupported += [
                Unsupported(n, self._failed_ops[n.target])
                for n in lowered.gm.graph.nodes
                if n.op == "call_function" and n.target in self._failed_ops
            ]
            unsupported += views_read_through(unsupported)
            requires_grad = tracked + self.output_requires_grad
            grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
            if not unsupported:
                program = XlaProgram(
                    lowered.gm,
                    inputs,
                    requires_grad,
                    packable=[i for i, t in enumerate(tracked) if not t],
                    links=functools.partial(self._links, lowered, grad, tracked),
                    order=functools.partial(self._order, lowered, grad, tracked),
                    writes=lowered.mutations,
                    **self.program_options,
                )
                errors = self._eager_backward(args, lowered, program)
                program = b.program(program, inputs)
                if not any(tracked):  # (a record's program does not differentiate writes)
                    _stored.remember(
                        key,
                        lowered,
                        program,
                        inputs,
                        self.program_options,
                        list(self.gm.graph.nodes),
                    )
                entry = self._entry(lowered, program, errors, tracked)
                return b.done(self._drawing(entry))
            fallback.report(self, [u for u in unsupported if not u.by_design])
            draws = uses_rng(lowered.gm)  # (before the split, which fuses lowered.gm's nodes)
            split_gm, names = split(lowered.gm, unsupported)
            for name in names:
                sub = getattr(split_gm, name)
                example = [n.meta.get("val") for n in sub.graph.find_nodes(op="placeholder")]
                program = XlaProgram(sub, example, None, **self.program_options)
                setattr(split_gm, name, Submodule(program))
            b.split(split_gm, names)
            errors = self._eager_backward(args, lowered)
            tracked = self._tracked_writes(lowered, lowered.inputs(args))
            entry = self._entry(lowered, split_gm, errors, tracked, draws)
            return b.done(self._drawing(entry, draws), unsupported)

    def _mixed_writes(self, args: Sequence) -> list[Unsupported]:
        """The inputs eager's autograd follows (not leaves) that the graph writes both with
        and without autograd's record (``y.mul_(2)`` then ``y.add_(1)`` under no_grad): the
        unrecorded write leaves eager's history as it was, which the functional graph cannot
        say; such graphs run in eager."""
        if not torch.is_grad_enabled():
            return []
        placeholders = self.gm.graph.find_nodes(op="placeholder")
        return [
            Unsupported(placeholders[i], MIXED_WRITES)
            for i, kinds in self.input_writes.items()
            if len(kinds) == 2 and i < len(args) and records_write(args[i])
        ]

    def _tracked_writes(self, lowered: LoweredGraph, inputs: Sequence) -> tuple[bool, ...]:
        """Per input the graph writes back, whether eager's write is one autograd records
        (``y = w * 2`` passed in, ``y.mul_(3)`` in grad mode: ``y``'s history goes through
        the write). Their new values are differentiated, and written back with grad on."""
        if not torch.is_grad_enabled():
            return (False,) * len(lowered.mutations)
        placeholders = self.gm.graph.find_nodes(op="placeholder")
        n_lifted = len(lowered.lifted)

        def tracked(i: int) -> bool:
            t = inputs[i]
            if not isinstance(t, torch.Tensor) or not (t.is_floating_point() or t.is_complex()):
                return False
            # (a user input: its own writes all recorded; else every write of the graph)
            own = i >= n_lifted and lowered.aliasing is None
            if not (self.input_writes.get(i - n_lifted) == {True} if own else self.records_writes):
                return False
            if t.requires_grad:
                return records_write(t)
            # (a tensor without grad written with one that has: eager's write makes it
            # require grad, as its example value after the trace says)
            if i < n_lifted or lowered.aliasing is not None:
                return False
            example = placeholders[i - n_lifted].meta.get("example_value")
            return bool(getattr(example, "requires_grad", False))

        return tuple(tracked(i) for i in lowered.mutations)

    def _drawing(self, entry: Entry, draws: bool = False) -> Entry:
        """``entry`` (``draws``: whether its graph, where split, draws random numbers), noting
        whether a call can raise eager's error after drawing random numbers (``_fallback.replay``). A
        build's dtype checks raise before anything is drawn; a whole-graph program raises
        after its run only from its runtime checks; a split graph's partitions compile at
        their first call, so a split graph that draws is counted as one that can raise."""
        program = entry.program
        keeps = program.rng and program.can_raise() if program is not None else draws
        self._keeps_state = bool(self._keeps_state) or keeps
        return entry

    def _stored_key(self, args: Sequence) -> str | None:
        """The signature's key in the persistent cache (None: off, or not recordable; dumps and
        ``explain`` build as usual, to show every stage)."""
        if _persistent.activate() is None or dumping(self.options.dump_dir) or is_detailed():
            return None
        return _stored_key.graph_key(self.gm, args, self.options)

    def _restore(self, b: Build, key: str, args: Sequence) -> Entry | None:
        """The signature rebuilt from its record without export or tracing, or None."""
        with b.comp.stage("xla"):
            fetched = _stored.fetch(key, _stored_key.device_of(self.gm, args))
            spec, graph = _stored.arg_spec(args), weakref.ref(self)  # (no cycle through it)
            # (what the record does not hold is built later, under this build's state)
            state = BuildState()
            restored = _stored.restore(
                fetched, self.gm, lambda: graph()._materialize(spec, state), state
            )
        if restored is None:
            return None
        lowered, program = restored
        if any(self._tracked_writes(lowered, lowered.inputs(args))):
            return None  # (stored without differentiable writes: built again)
        program.label = f"torch2xla:{self.name}"
        with x64():  # as precompile does: a first sighting of the inputs (ViewCache)
            program.jax_inputs([(*lowered.lifted, *args)[i] for i in program.tensor_pos])
        b.record.mode = "training" if program.stored_training else "inference"
        errors = self._eager_backward(args, lowered, program)
        return self._entry(lowered, program, errors)

    def _entry(self, lowered, runner, errors, tracked=(), draws=False) -> Entry:
        """The entry of one signature, with this graph's outputs' autograd and aliasing."""
        return Entry(
            lowered,
            runner,
            self.output_requires_grad,
            self.output_aliases,
            errors,
            self.versions,
            tracked,
            draws=draws,
            shared=self.shared_bases,
            lone=self.lone_views,
            lone_untracked=self.lone_untracked,
            marks=self.output_marks,
            held_versions=self.held_versions,
            inference=self.inference_outputs,
        )

    @torch._disable_dynamo
    def _materialize(self, spec: list, state: BuildState) -> XlaProgram:
        """The whole-graph program of a restored signature, built the usual way (for what its
        record does not hold: ``_stored.StoredProgram.full``) under the ``state`` of the call
        that restored it (the first need may come in a backward, with grad mode off), as
        ``_compile`` builds it."""
        args = _stored.example_args(spec)
        # (lower marks the export, _lower.exporting)
        with BUILD_LOCK, state, no_stack_capture():
            lowered = lower(self.gm, args)
            gm = run_passes(lowered.gm, self.options.passes, self.name)
            if find_unsupported(gm):
                raise RuntimeError(
                    f"torch2xla internal error: {self.name} restored from the persistent cache "
                    "has ops that XLA cannot run; please report this (workaround: "
                    "TORCH2XLA_PERSISTENT_CACHE=0)"
                )
            inputs = (*lowered.lifted, *args)
            requires_grad = (False,) * len(lowered.mutations) + self.output_requires_grad
            grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
            # (a record's signature differentiates no write: ``_restore``)
            program = XlaProgram(
                gm,
                inputs,
                requires_grad,
                packable=range(len(lowered.mutations)),
                links=functools.partial(self._links, lowered, grad),
                order=functools.partial(self._order, lowered, grad),
                **self.program_options,
            )
        program.label = f"torch2xla:{self.name}"
        return program
