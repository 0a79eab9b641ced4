"""The Dynamo backend ``xla``: options, per-signature compilation, fallback, wiring."""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable, Sequence

import torch

from torch2xla._errors import (
    CompileError,
    LoweringError,
    OpError,
    Unsupported,
    UnsupportedOpsError,
    op_name,
    source_line,
    user_lowering,
    warn,
)
from torch2xla._options import OptionError, Options
from torch2xla.autodiff import _eager_backward
from torch2xla.autodiff._connected import example_links
from torch2xla.capture import _data_dependent as data_dependent
from torch2xla.capture import _writes as writes
from torch2xla.capture._aliases import output_aliases
from torch2xla.capture._lower import LoweredGraph, lower
from torch2xla.capture._partition import find_unsupported, split
from torch2xla.capture._passes import run_passes
from torch2xla.capture._stop_gradient import write_records
from torch2xla.debug._dump import dumping
from torch2xla.debug._stages import (
    Build,
    OpPlacement,
    RecordLog,
    input_names,
    is_detailed,
    wrapped_module,
)
from torch2xla.guards import BUILD_LOCK, BucketSpec, GraphGuards, _persistent
from torch2xla.guards._graph import DynamoContext
from torch2xla.ops._arg_checks import check_graph
from torch2xla.ops._interpret import uses_rng
from torch2xla.runtime import _stored, _stored_key
from torch2xla.runtime._interop import no_stack_capture, x64
from torch2xla.runtime._program import XlaProgram

_graph_ids = itertools.count()
# (its ``_current_level`` is rebound as dual levels open and close: read from the module)
_forward_ad = torch.autograd.forward_ad

# Without this Dynamo runs any frame holding an nn.LSTM/GRU eagerly, silently.
torch._dynamo.config.allow_rnn = True


class FallbackWarning(UserWarning):
    """Some ops of a compiled graph run in eager PyTorch because XLA cannot run them."""


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
    return CompiledGraph(gm, parsed)


class CompiledGraph:
    """A Dynamo graph, compiled to XLA once per signature of its inputs."""

    def __init__(
        self, gm: torch.fx.GraphModule, options: Options, context: DynamoContext | None = None
    ) -> None:
        data_dependent.drop_noop_sets(gm)  # (``x.data = x``: module.to(its own dtype))
        self.gm = gm
        self.options = options
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
        )
        self.key, self.cache = self.guards.key, self.guards.cache
        self.recompile_reasons = self.guards.recompile_reasons
        out = gm.graph.find_nodes(op="output")[0].args[0]
        self.output_requires_grad = tuple(
            bool(getattr(o.meta.get("example_value"), "requires_grad", True))
            if isinstance(o, torch.fx.Node)
            else False
            for o in (out if isinstance(out, list | tuple) else (out,))
        )
        self.output_aliases = output_aliases(gm)
        # (graphs whose every in-place write autograd records: their mutated inputs that
        # require grad get the new values' history, ``_tracked_writes``)
        self.records_writes, self.input_writes = write_records(gm)
        # eager's version-counter bumps per input, read before anything else runs the graph
        self.versions = eager_versions(gm)
        self._example_links: tuple[int, ...] | None = None
        # eager's backward-time errors per output, and the outputs its graph saves (None: not
        # looked for yet; only graphs that differentiate look: _eager_backward)
        self._backward_errors: dict[int, RuntimeError] | None = None
        self._saved: tuple[frozenset[int], frozenset[int]] | None = None
        self._output_saves: tuple[frozenset[int] | None, ...] | None = None
        self._warned = False
        self._warned_dual = False  # (forward-mode AD's calls run in eager: _with_tangents)
        # writes into self-overlapping tensors that eager accepts (capture/_writes.py; None:
        # not looked for yet)
        self._overlapping: list[torch.fx.Node] | None = None
        self._cut: _Cut | None = None  # set where data-dependent ops cut the graph
        # ops whose lowering raised in this graph, run in eager since (why, per op: _build)
        self._failed_ops: dict = {}
        self.records = RecordLog(options.cache_size)  # CompileRecords, for explain
        # whether a call can raise eager's error after drawing random numbers (a signature
        # that draws and has runtime checks), so that its replay needs the generator's state
        self._keeps_state: bool | None = None

    def __call__(self, *args):
        if _forward_ad._current_level >= 0 and _dual(args):
            return self._with_tangents(args)
        # (the generator's state, for the replay of a call that raises after drawing random
        # numbers; taken until the first build says whether a call can)
        state = torch.default_generator.get_state() if self._keeps_state is not False else None
        try:
            return self.guards.run(args)
        except OpError as e:  # eager's error: eager's side effects too
            error = e
        return self._replay(error, args, state)  # (outside the handler: no chained context)

    @torch._disable_dynamo
    def _with_tangents(self, args: Sequence):
        """A call with forward-mode AD's dual tensors (``torch.autograd.forward_ad``) runs in
        eager PyTorch: our programs' autograd Function has no forward derivative, so the
        outputs' tangents were lost (None) where eager computes them."""
        node = next(n for n in self.gm.graph.nodes if n.op != "placeholder")
        if self.options.strict:
            raise UnsupportedOpsError(self.name, [Unsupported(node, _REASON_DUAL)])
        if not self._warned_dual:
            self._warned_dual = True
            warn(f"torch2xla: {self.name} {_REASON_DUAL}", FallbackWarning, node=node)
        gm = self.gm
        if hasattr(gm, "real_recompile"):  # (a lazy graph module's forward calls the wrapper)
            gm.real_recompile()
        return gm.forward(*args)

    @torch._disable_dynamo
    def _replay(self, error: OpError, args: Sequence, state: torch.Tensor | None):
        """Run the call that raised ``error`` again in eager PyTorch from the same inputs (the
        failed call changed none of them: mutations are written back after the program), so
        that what eager changes before the failing op is changed and nothing after it, with
        the random generator's state as eager leaves it. Eager's own error becomes the
        cause of ours; a call eager runs without error (a check of ours stricter than eager)
        returns eager's results. Not replayed: a value check's error beside CUDA tensors,
        where eager's kernel would assert on the device (such a call changes no input)."""
        if error.replayed or (error.after_run and _on_gpu(args)):
            raise error
        if state is not None:
            torch.default_generator.set_state(state)
        gm = self.gm
        if hasattr(gm, "real_recompile"):  # (a lazy graph module's forward calls the wrapper)
            gm.real_recompile()
        try:
            out = gm.forward(*args)  # (not through FX's wrapper: it prints the error's code)
        except Exception as eager:
            error.replayed = True
            if isinstance(error, type(eager)):
                raise error from eager
            raise
        warn(
            f"torch2xla: {self.name} raised where eager PyTorch, run again from the same "
            f"inputs, does not; the call returns eager's results. Please report this.\n{error}",
            UserWarning,
        )
        return out

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
        where they cannot tell (parameters the Dynamo graph holds as attributes, example
        values of inputs that required grad otherwise than the call's, ``grad``; new values
        of inputs written with autograd's record, ``tracked``, whose examples' history was
        rebased)."""
        if lowered.lifted or any(tracked):
            return None
        placeholders = self.gm.graph.find_nodes(op="placeholder")
        for node, rg in zip(placeholders, grad, strict=True):
            if rg != bool(getattr(node.meta.get("example_value"), "requires_grad", False)):
                return None
        if self._example_links is None:
            self._example_links = example_links(self.gm)
        links = self._example_links
        if links is None or len(links) != lowered.num_user_outputs:
            return None
        return (0,) * len(lowered.mutations) + links

    def _eager_backward(self, args: Sequence, lowered: LoweredGraph, program=None) -> dict:
        """Eager's backward-time errors per user output (``_eager_backward``) for a call with
        ``args``, none where nothing is differentiated; ``program`` (the signature's, where one
        program runs it) is told which of its inputs and outputs eager's graph saves."""
        if not any(self.output_requires_grad) or not any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in args
        ):
            return {}
        if self._backward_errors is None:
            self._backward_errors = _eager_backward.backward_errors(self.gm)
            self._saved = _eager_backward.saved_values(self.gm)
            self._output_saves = _eager_backward.output_saves(self.gm)
        if program is not None:
            saved_in, saved_out = self._saved
            n_mut, n_lifted = len(lowered.mutations), len(lowered.lifted)
            saved = [n_mut + i for i in sorted(saved_out)]
            packing = getattr(program, "packing", None)
            # (as the packed program returns them; packed members are never differentiable,
            # so no autograd node saves them)
            place = (lambda k: k) if packing is None else packing.index
            if packing is not None:
                saved = [k for k in saved if k in packing.rest]
            program.saved_outputs = tuple(map(place, saved))
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
        return self._backward_errors

    @torch._disable_dynamo
    def _build(self, args: Sequence, lowering: Callable | None = None) -> _Entry | _Cut:
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
                    f"{_first_line(original)} (a bug in torch2xla: please report it)"
                )
            except CompileError as e:
                if raising or e.stage not in _EAGER_AFTER or self._cut is not None:
                    raise
                return self._after_failure(e, args)

    def _after_failure(self, error: CompileError, args: Sequence) -> _Cut:
        """The whole graph in eager PyTorch from now on, ``error`` being why."""
        with Build(self, args) as b:
            first = next((n for n in self.gm.graph.nodes if n.op == "call_function"), None)
            warn(
                f"torch2xla: {self.name} runs in eager PyTorch: compiling it failed in stage "
                f"{error.stage} ({_first_line(error)}). This is a bug in torch2xla; please "
                "report it (options={'strict': True} raises the error instead).",
                FallbackWarning,
                node=first,
            )
            b.record.mode = "eager"
            self._cut = _Cut(self.gm)
            self._draws = False
            return b.done(self._cut)

    def _compile(self, args: Sequence, lowering: Callable | None = None) -> _Entry | _Cut:
        if self._cut is not None:  # cut around data-dependent ops: one entry for every call
            return self._cut
        # Build times each stage, reports long compiles, names this graph in errors, records
        # the signature for explain and writes dumps (torch2xla/debug/_stages.py). ``lowering``
        # replaces the export of the Dynamo graph (bucketing's rewritten graph, whose programs
        # take the real sizes too: not recorded in the persistent cache).
        if self._overlapping is None:  # (raises eager's error where eager rejects the write)
            self._overlapping = writes.check_writes(self.gm)
        key = self._stored_key(args) if lowering is None else None
        with Build(self, args) as b:
            if key is not None:  # a signature recorded by an earlier process (_stored.py)
                entry = self._restore(b, key, args)
                if entry is not None:
                    return b.done(self._drawing(entry))
            if self._overlapping:
                missing = [Unsupported(n, writes.REASON) for n in self._overlapping]
                return self._in_eager(missing, b)
            # (the same where this call's input overlaps itself and the example's layout was
            # symbolic, so ``check_writes`` could not tell: this signature runs in eager)
            placeholders = self.gm.graph.find_nodes(op="placeholder")
            shared = [
                Unsupported(placeholders[i], writes.REASON)
                for i in self.key.self_overlap_pos
                if writes.self_overlapping(args[i])
            ]
            if shared:
                return self._in_eager(shared, b, every=False)
            mixed = self._mixed_writes(args)
            if mixed:
                return self._in_eager(mixed, b)
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
                    return self._cut_around(found, b)
            if lowered.aliasing is not None:  # (eager's error for a write reading another input)
                writes.check_overlapping_inputs(self.gm, args)
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
            unsupported += _views_read_through(unsupported)
            requires_grad = tracked + self.output_requires_grad
            grad = tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
            if not unsupported:
                program = XlaProgram(
                    lowered.gm,
                    inputs,
                    requires_grad,
                    packable=[i for i, t in enumerate(tracked) if not t],
                    links=functools.partial(self._links, lowered, grad, tracked),
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
                entry = _Entry(
                    lowered,
                    program,
                    self.output_requires_grad,
                    self.output_aliases,
                    errors,
                    self.versions,
                    tracked,
                )
                return b.done(self._drawing(entry))
            self._report([u for u in unsupported if not u.by_design])
            split_gm, names = split(lowered.gm, unsupported)
            for name in names:
                sub = getattr(split_gm, name)
                example = [n.meta.get("val") for n in sub.graph.find_nodes(op="placeholder")]
                program = XlaProgram(sub, example, None, **self.program_options)
                setattr(split_gm, name, _Submodule(program))
            b.split(split_gm, names)
            errors = self._eager_backward(args, lowered)
            entry = _Entry(
                lowered,
                split_gm,
                self.output_requires_grad,
                self.output_aliases,
                errors,
                self.versions,
                self._tracked_writes(lowered, lowered.inputs(args)),
            )
            return b.done(self._drawing(entry, lowered.gm), unsupported)

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
            if len(kinds) == 2 and i < len(args) and _records_write(args[i])
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
                return _records_write(t)
            # (a tensor without grad written with one that has: eager's write makes it
            # require grad, as its example value after the trace says)
            if i < n_lifted or lowered.aliasing is not None:
                return False
            example = placeholders[i - n_lifted].meta.get("example_value")
            return bool(getattr(example, "requires_grad", False))

        return tuple(tracked(i) for i in lowered.mutations)

    def _drawing(self, entry: _Entry, gm: torch.fx.GraphModule | None = None) -> _Entry:
        """``entry`` (of the ATen graph ``gm`` where split), noting whether a call can raise
        eager's error after drawing random numbers (``_replay``). A build's dtype checks raise
        before anything is drawn; a whole-graph program raises after its run only from its
        runtime checks; a split graph's partitions compile at their first call, so a split
        graph that draws is counted as one that can raise."""
        program = entry.program
        keeps = program.rng and program.can_raise() if program is not None else uses_rng(gm)
        self._keeps_state = bool(self._keeps_state) or keeps
        return entry

    def _stored_key(self, args: Sequence) -> str | None:
        """The signature's key in the persistent cache (None: off, or not recordable; dumps and
        ``explain`` build as usual, to show every stage)."""
        if _persistent.activate() is None or dumping(self.options.dump_dir) or is_detailed():
            return None
        return _stored_key.graph_key(self.gm, args, self.options)

    def _restore(self, b: Build, key: str, args: Sequence) -> _Entry | None:
        """The signature rebuilt from its record without export or tracing, or None."""
        with b.comp.stage("xla"):
            fetched = _stored.fetch(key, _stored_key.device_of(args))
            spec, graph = _stored.arg_spec(args), weakref.ref(self)  # (no cycle through it)
            restored = _stored.restore(fetched, self.gm, lambda: graph()._materialize(spec))
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
        return _Entry(
            lowered, program, self.output_requires_grad, self.output_aliases, errors, self.versions
        )

    @torch._disable_dynamo
    def _materialize(self, spec: list) -> XlaProgram:
        """The whole-graph program of a restored signature, built the usual way (for what its
        record does not hold: ``_stored.StoredProgram.full``)."""
        args = _stored.example_args(spec)
        with BUILD_LOCK, no_stack_capture():  # (lower marks the export, _lower.exporting)
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
            program = XlaProgram(
                gm,
                inputs,
                requires_grad,
                packable=range(len(lowered.mutations)),
                **self.program_options,
            )
        program.label = f"torch2xla:{self.name}"
        return program

    def _report(self, missing: list) -> None:
        """Raise (strict mode) or warn once that the ops ``missing`` run in eager PyTorch."""
        if missing and self.options.strict:
            raise UnsupportedOpsError(self.name, missing)
        if missing and not self._warned:
            self._warned = True
            listing = "\n".join(str(u) for u in missing)
            warn(
                f"torch2xla: {len(missing)} op(s) of {self.name} run in eager PyTorch, "
                f"the rest in XLA:\n{listing}",
                FallbackWarning,
                node=missing[0].node,
            )

    def _in_eager(self, missing: list[Unsupported], b: Build, every: bool = True) -> _Cut:
        """The whole Dynamo graph run in eager PyTorch, for every signature (``every``; else
        for this one), because of the nodes ``missing`` (raised in strict mode, else one
        ``FallbackWarning``)."""
        self._report(missing)
        b.record.mode = "eager"
        b.record.ops = [
            OpPlacement(u.node.name, op_name(u.node), "eager", u.reason, source_line(u.node))
            for u in missing
        ]
        cut = _Cut(self.gm)
        if every:
            self._cut = cut
            self._draws = False  # (eager draws its own numbers: nothing to replay)
        return b.done(cut)

    def _cut_around(self, found: list[torch.fx.Node], b: Build) -> _Cut:
        """The Dynamo graph with its data-dependent nodes ``found`` run in eager PyTorch and the
        runs of nodes between them compiled as graphs of their own (``_data_dependent``)."""
        missing = data_dependent.unsupported(found)
        self._report(missing)
        eager = data_dependent.eager_nodes(self.gm, found)
        # (the pieces are made at this graph's first call, after Dynamo's compile: they take
        # this graph's frame for their names, which Dynamo no longer tells)
        top = data_dependent.split(
            self.gm,
            eager,
            lambda piece: _Piece(_piece_graph(piece, self.options, self.guards.context)),
        )
        b.record.mode = "split"
        b.record.ops = [
            OpPlacement(n.name, op_name(n), "eager", data_dependent.reason(n), source_line(n))
            for n in found
        ]
        b.record.pieces = [m.compiled.name for m in top.children() if isinstance(m, _Piece)]
        self._cut = _Cut(top, self.versions)
        self._keeps_state = False  # (its pieces replay themselves)
        return b.done(self._cut)


_REASON_DUAL = (
    "runs in eager PyTorch when called with forward-mode AD's dual tensors "
    "(torch.autograd.forward_ad): its XLA programs have no forward derivative"
)


def _dual(args: Sequence) -> bool:
    """Whether an argument carries a forward-mode tangent (a dual level is active)."""
    return any(
        isinstance(a, torch.Tensor) and torch.autograd.forward_ad.unpack_dual(a).tangent is not None
        for a in args
    )


def _piece_graph(piece: torch.fx.GraphModule, options: Options, context) -> CompiledGraph:
    """A piece of a cut graph, compiled: its inputs' example values are the whole graph's,
    whose versions count the whole graph's writes, so the cut graph sets the versions."""
    graph = CompiledGraph(piece, options, context)
    graph.versions = None
    return graph


def eager_versions(gm: torch.fx.GraphModule) -> tuple[int | None, ...] | None:
    """Per input of the Dynamo graph ``gm``, how many times eager bumps its version counter
    (``_version``): once per in-place op on it or a view of it, none for the running
    statistics a batch norm kernel updates. Dynamo's fake inputs start at version 0 and ran
    the user's code once, so their versions are eager's counts. None for non-tensors."""
    versions = tuple(
        v._version if isinstance(v, torch.Tensor) and not v.is_inference() else None
        for v in (n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder"))
    )
    return versions if any(v is not None for v in versions) else None


def _set_versions(tensors: Sequence[torch.Tensor], versions: Sequence[int]) -> None:
    """Set the version counters of ``tensors``. NOTE: off the CPU a version never goes back
    below the current one: a write of ours that eager's kernel would not count (batch norm's
    running statistics) must still move it, since that is how the cached views of a program
    on another stream see torch's writes (``runtime/_interop.ViewCache``)."""
    if tensors:
        versions = [
            v if t.device.type == "cpu" else max(v, t._version) for t, v in zip(tensors, versions)
        ]
        torch._C._autograd._unsafe_set_version_counter(tuple(tensors), tuple(versions))


def _on_gpu(args: Sequence) -> bool:
    return any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)


class _Piece(torch.nn.Module):
    """A run of a Dynamo graph between data-dependent ops, compiled as a graph of its own."""

    def __init__(self, graph: CompiledGraph) -> None:
        super().__init__()
        self.compiled = graph

    def forward(self, *args):
        return tuple(self.compiled(*args))


_READS_STORAGE = frozenset(
    {
        torch.ops.aten.as_strided.default,
        torch.ops.aten.as_strided_copy.default,
        torch.ops.aten.as_strided_scatter.default,
    }
)


def _views_read_through(unsupported: list[Unsupported]) -> list[Unsupported]:
    """The views an op reading its argument's storage (``as_strided``: its storage offset
    counts from the storage's start) takes its argument through, where that op runs in
    eager: they run in eager too, so that it gets a view of the input's own memory (an XLA
    partition's output is a fresh tensor: ``x[1:].as_strided(size, stride, 0)`` read
    ``x[1]``'s memory as its start)."""
    found: list[Unsupported] = []
    seen = {u.node for u in unsupported}
    for u in unsupported:
        if u.node.op != "call_function" or u.node.target not in _READS_STORAGE:
            continue
        arg = u.node.args[0] if u.node.args else None
        while (
            isinstance(arg, torch.fx.Node)
            and arg.op == "call_function"
            and getattr(arg.target, "is_view", False)
            and arg not in seen
        ):
            seen.add(arg)
            found.append(
                Unsupported(
                    arg, f"a view that {op_name(u.node)}, run in eager, reads the memory of"
                )
            )
            arg = arg.args[0] if arg.args else None
    return found


class _Cut:
    """The entry of a graph cut around its data-dependent ops: runs the cut graph, then gives
    its inputs eager's versions (``versions``: eager's bumps per input; None where the graph
    runs in eager PyTorch, which bumps them itself)."""

    runs_eager_ops = True  # (bucketing pads no such graph: its eager ops see real sizes only)

    def __init__(self, top: torch.fx.GraphModule, versions: Sequence | None = None) -> None:
        if hasattr(top, "real_recompile"):  # (a lazy graph module's forward calls the wrapper)
            top.real_recompile()
        self.top = top
        self.tracked = (
            tuple((i, n) for i, n in enumerate(versions) if n is not None) if versions else ()
        )

    def __call__(self, args: Sequence) -> list:
        tracked = [(args[i], n) for i, n in self.tracked if not args[i].is_inference()]
        before = [t._version for t, _ in tracked]
        # (not through FX's wrapper, which prints the code of a node that raises: eager's
        # errors, an index out of range in an eager node, reach the user as eager's do)
        out = list(self.top.forward(*args))
        # (its pieces write their inputs back once each; eager's count is the whole graph's)
        _set_versions([t for t, _ in tracked], [v + n for v, (_, n) in zip(before, tracked)])
        return out


class _Submodule(torch.nn.Module):
    """An XLA program standing in for a fused partition of a split graph."""

    def __init__(self, program: XlaProgram) -> None:
        super().__init__()
        self.program = program
        # Set by _stages.Build.split: compiles the program ahead of its first call, timed.
        self.first_call: Callable[[XlaProgram, tuple], None] | None = None

    def forward(self, *args):
        if self.first_call is not None:
            first_call, self.first_call = self.first_call, None
            first_call(self.program, args)
        outs = self.program(args)
        return outs[0] if self.program.single_output else tuple(outs)


class _Entry:
    """One compiled signature: runs the program, writes mutations back, returns user outputs."""

    def __init__(
        self,
        lowered: LoweredGraph,
        runner,
        output_requires_grad,
        aliases=(),
        errors=None,
        versions: Sequence | None = None,
        tracked: Sequence[bool] = (),
    ) -> None:
        self.lifted = lowered.lifted
        self.aliasing = lowered.aliasing
        self.inputs = lowered.inputs
        self.mutations = lowered.mutations
        self.runner = runner
        self.program = runner if isinstance(runner, XlaProgram) else None
        self.detach = tuple(i for i, rg in enumerate(output_requires_grad) if not rg)
        self.aliases = aliases  # OutputAlias: outputs eager returns as views of inputs
        # output -> the error eager's backward raises through it (``_eager_backward``)
        self.errors = errors or {}
        # Some output requires grad in eager although the graph is called under no_grad: the
        # function enables grad itself (torch.enable_grad() inside), so we must differentiate.
        self.enables_grad = any(output_requires_grad)
        # eager's version bumps per written-back input where they are not the write's one
        self.bumps = _bumps(lowered, versions)
        self.versions = versions  # (per input: for a bucket's padded copies, PaddedEntry)
        # written-back inputs whose new values carry autograd history (``_tracked_writes``)
        self.tracked = tuple(i for i, t in enumerate(tracked) if t)
        # The program takes the graph's arguments as they are, and its outputs are the user's.
        self.direct = self.program is not None and not (
            self.lifted or self.aliasing or self.mutations or aliases or self.errors
        )

    def __call__(self, args: Sequence):
        if self.direct:  # (the hot path)
            if self.enables_grad and not torch.is_grad_enabled():
                with torch.enable_grad():
                    outs = self.program(args)
            else:
                outs = self.program(args)
            for i in self.detach:
                if outs[i].requires_grad:
                    outs[i] = outs[i].detach()
            return outs
        inputs = self.inputs(args) if self.lifted or self.aliasing else args
        run_inputs = inputs
        if self.tracked and torch.is_grad_enabled():
            # (the program reads copies of the inputs whose history the write-back rebases:
            # what it saves for its backward is not overwritten, as eager's in-place ops save
            # the original)
            run_inputs = list(inputs)
            for i in self.tracked:
                run_inputs[self.mutations[i]] = inputs[self.mutations[i]].clone()
        if self.enables_grad and not torch.is_grad_enabled():
            with torch.enable_grad():
                outs = self._run(run_inputs)
        else:
            outs = self._run(run_inputs)
        n = len(self.mutations)
        if n:
            targets = [inputs[idx] for idx in self.mutations]
            values, bumps = outs[:n], self.bumps
            if self.tracked and torch.is_grad_enabled():
                targets, values, bumps = self._copy_tracked(targets, values)
            with torch.no_grad():  # one launch for all (159 BatchNorm buffers in ResNet-50)
                if not targets:
                    pass
                elif bumps is None:  # (each copy bumps its input's version once, as eager)
                    torch._foreach_copy_(targets, values)
                else:
                    _copy_back(targets, values, bumps)
            outs = outs[n:]
        for alias in self.aliases:
            outs[alias.output] = alias.regenerate(args, outs)
        # (after the views: ``x.detach()`` of an input is a view of it that eager does not track)
        for i in self.detach:
            if outs[i].requires_grad:
                outs[i] = outs[i].detach()
        for i, error in self.errors.items():
            if outs[i].requires_grad:  # (under the grad mode the outputs were made in)
                with torch.enable_grad():
                    outs[i] = _eager_backward.RaiseAtBackward.apply(error, outs[i])
        return outs

    def _copy_tracked(self, targets: list, values: list) -> tuple[list, list, tuple | None]:
        """Write the new values eager's autograd records (``tracked``) with grad on, so the
        inputs' history goes through them (and eager's version bump per write); returns the
        other targets, values and bumps, written under no_grad."""
        bumps = self.bumps or (1,) * len(targets)
        rest = set(range(len(targets)))
        for i in self.tracked:
            target, value = targets[i], values[i]
            if not (value.requires_grad and (_records_write(target) or not target.requires_grad)):
                continue
            before = target._version
            target.copy_(value)
            if bumps[i] is not None and bumps[i] != 1:
                _set_versions([target], [before + bumps[i]])
            rest.discard(i)
        keep = sorted(rest)
        bumps_left = None if self.bumps is None else tuple(self.bumps[i] for i in keep)
        return [targets[i] for i in keep], [values[i] for i in keep], bumps_left

    def _run(self, inputs: Sequence) -> list:
        if self.program is not None:
            return self.program(inputs)
        return list(self.runner(*inputs))


# Compile stages whose failure runs the graph in eager (outside strict mode): ``_build``.
_EAGER_AFTER = frozenset({"lowering", "tracing", "stablehlo", "xla"})


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _bumps(lowered: LoweredGraph, versions: Sequence | None) -> tuple | None:
    """Per input ``lowered`` writes back, eager's version bumps (``eager_versions``; None where
    not known: held tensors, inputs overlapping differently than their example values), or
    None where each is one, the write's own."""
    if versions is None:
        return None
    n_lifted = len(lowered.lifted)
    if lowered.aliasing is None:
        positions = [[i] for i in range(len(versions))]
    else:  # the inputs outside every group, then one base per group
        groups = lowered.aliasing.groups
        grouped = {i for g in groups for i in g.positions}
        positions = [[i] for i in range(len(versions)) if i not in grouped]
        positions += [list(g.positions) for g in groups]
    bumps = []
    for idx in lowered.mutations:
        counts = {versions[i] for i in positions[idx - n_lifted]} if idx >= n_lifted else {None}
        bumps.append(counts.pop() if len(counts) == 1 else None)
    return None if all(b in (1, None) for b in bumps) else tuple(bumps)


MIXED_WRITES = (
    "an input autograd follows is written both in grad mode and without autograd's record "
    "(no_grad, .data, .detach()): eager keeps the history of the recorded writes only"
)


def _records_write(t) -> bool:
    """Whether an in-place write into ``t`` in grad mode is one autograd records (a float
    tensor that requires grad, not a leaf nor a view of one: eager refuses those)."""
    if not isinstance(t, torch.Tensor) or not t.requires_grad:
        return False
    if not (t.is_floating_point() or t.is_complex()):
        return False
    root = t if t._base is None else t._base
    return root.grad_fn is not None


def _copy_back(targets: list, values: Sequence, bumps: tuple) -> None:
    """Write ``values`` into ``targets`` with eager's ``bumps`` of their versions."""
    tracked = [(t, b) for t, b in zip(targets, bumps) if b is not None and not t.is_inference()]
    before = [t._version for t, _ in tracked]
    torch._foreach_copy_(targets, values)
    _set_versions([t for t, _ in tracked], [v + b for v, (_, b) in zip(before, tracked)])
