"""What one compiled signature runs on each call, and the entries of graphs cut around ops
that run in eager PyTorch.

``Entry`` runs a signature's XLA program (or its split graph's partitions), writes the new
values of mutated inputs back with eager's version bumps, and returns the user's outputs;
``Cut`` runs a graph cut around data-dependent ops, whose ``Piece`` s are compiled graphs of
their own; ``Submodule`` stands for a fused partition of a split graph. ``CompiledGraph``
(``_backend.py``) decides which of them a call gets.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import torch

from torch2xla._errors import CompileError, OpError
from torch2xla._unwind import sdpa_state, unwind
from torch2xla.autodiff import _eager_backward
from torch2xla.autodiff._versions import nodes, restamp
from torch2xla.capture._aliases import OutputMarks, program_grads
from torch2xla.capture._inference import as_inference
from torch2xla.capture._input_aliasing import storage_classes
from torch2xla.capture._lower import LoweredGraph
from torch2xla.capture._partition import has_collectives
from torch2xla.capture._stop_gradient import _written
from torch2xla.capture._written import _root
from torch2xla.runtime._in_place import written_in_place
from torch2xla.runtime._program import XlaProgram

if TYPE_CHECKING:
    from torch2xla._backend import CompiledGraph


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


class LiftedChanged(Exception):
    """A tensor the Dynamo graph holds as an attribute (an optimizer's parameters and state,
    lifted into the program's inputs) has another dtype than when the program was traced:
    Dynamo does not guard it (``m.double()`` after compiling ``opt.step``), and the program
    would run retraced on it where eager's ops may refuse the mix. The call runs in eager."""


class EagerOpRaised(OpError):
    """An op of a split graph that runs in eager PyTorch raised ``error`` (eager's own: a
    user's op rejecting its input). Internal: ``_fallback.replay`` raises eager's error
    from it. The split graph's writes into its inputs happen after its last op and its XLA
    partitions draw their own random numbers, so the failed call changed no input, where
    eager had made the writes before the failing op: ``replay`` (the graph writes an input
    or draws random numbers) says the call runs again in eager PyTorch, which makes them
    and raises; else ``error`` is raised as it is."""

    def __init__(self, error: Exception, replay: bool) -> None:
        super().__init__(first_line(error))
        self.error = error
        self.replay = replay


_AUTOCAST_DEVICES = ("cpu", *(["cuda"] if torch.cuda.is_available() else []))


@contextlib.contextmanager
def restored_on_error(gm: torch.fx.GraphModule | None = None) -> Iterator[None]:
    """Where the code inside raises, the global state a Dynamo graph run in eager PyTorch sets
    as the user's ``with`` blocks did is restored to what it was on entry: grad mode, forward
    grad, autocast, saved-tensor hooks (``torch.func.grad`` disables them) and functorch's
    transforms. The graph resets them in the nodes after its failing op, which never run,
    where eager's ``with`` blocks reset them on the way out: an IndexError inside
    ``torch.no_grad()`` left grad mode off, and the caller's next training step computed no
    gradient. With the graph ``gm`` that runs inside, the contexts its nodes entered and did
    not leave are left first (``_unwind``: inference mode, autocast's nesting and cache,
    forward AD's dual level, sdpa's backends)."""
    grad, fwd_grad = torch.is_grad_enabled(), torch._C._is_fwd_grad_enabled()
    sdpa = None if gm is None else sdpa_state(gm)
    hooks = torch._C._autograd._saved_tensors_hooks_is_enabled()
    message = (
        None if hooks else torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
    )
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    autocast = [
        (d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES
    ]
    try:
        yield
    except BaseException as e:
        if gm is not None:
            unwind(gm, e, sdpa)
        _pop_functorch_layers(depth)
        for d, enabled, dtype in autocast:
            torch.set_autocast_enabled(d, enabled)
            torch.set_autocast_dtype(d, dtype)
        if hooks:
            torch._C._autograd._saved_tensors_hooks_enable()
        else:
            torch._C._autograd._saved_tensors_hooks_disable(message or "")
        torch._C._set_fwd_grad_enabled(fwd_grad)
        torch._C._set_grad_enabled(grad)
        raise


def _pop_functorch_layers(depth: int) -> None:
    """Pops functorch's transforms entered above ``depth``. torch 2.11's pop raises its
    internal assert ``!dynamicLayerStack.empty()`` once it popped the last one (the layers
    are gone, as asked): only an error that leaves layers above ``depth`` is raised."""
    functorch = torch._C._functorch
    if functorch.get_dynamic_layer_stack_depth() <= depth:
        return
    try:
        functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)
    except RuntimeError:
        if functorch.get_dynamic_layer_stack_depth() != depth:
            raise


def run_eager(gm: torch.fx.GraphModule, args: Sequence):
    """``gm``'s forward run by eager PyTorch (``restored_on_error``)."""
    if hasattr(gm, "real_recompile"):  # (a lazy graph module's forward calls the wrapper)
        gm.real_recompile()
    with restored_on_error(gm):
        return gm.forward(*args)


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


class EagerVersions:
    """Eager's version bumps per input of a Dynamo graph (``counts``), each input's own:
    the writes into it or a view of it. Inputs that are views of one tensor share eager's
    version counter, which every write into any of them bumps, and the write-back bumps
    inputs that share a counter one after the other (``_copy_back``), so own counts add up
    as eager's do for any call's sharing. Dynamo's fake inputs count their own writes where
    the example inputs shared no storage; where they did, the fakes' versions are not each
    input's own (views of one fake share its counter: ``f(y[:, :2], y[:, 2:])`` traced gave
    2 for each, and a later ``f(a, b)`` got 2 each where eager bumps each once; ``w`` and
    ``w.detach()`` both had 1 for one write into the second), so those inputs count the
    graph's writes into them."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        placeholders = list(gm.graph.find_nodes(op="placeholder"))
        self.examples = eager_versions(gm)  # (the examples' counts: a cut graph's)
        self.counts = self.examples
        if self.examples is not None:
            classes = storage_classes([n.meta.get("example_value") for n in placeholders])
            shared = {c for i, c in enumerate(classes) if c is not None and c != i}
            if shared:
                self.counts = _own_writes(gm, placeholders, self.examples, classes, shared)


def _own_writes(gm, placeholders, examples, classes, shared) -> tuple[int | None, ...]:
    """``examples``, with the in-place writes of ``gm`` into each input (or a view of it)
    for the inputs whose example storage is in ``shared``."""
    position = {n: i for i, n in enumerate(placeholders)}
    own = [0] * len(examples)
    for node in gm.graph.nodes:
        for written in _written(node):  # (each of a ``_foreach_*_``'s list too)
            i = position.get(_root(written))
            if i is not None:
                own[i] += 1
    return tuple(
        v if v is None or classes[i] not in shared else own[i] for i, v in enumerate(examples)
    )


def eager_held_versions(gm: torch.fx.GraphModule) -> dict[str, int]:
    """Per tensor the Dynamo graph ``gm`` holds as an attribute (``get_attr``: an optimizer
    step's parameters and state), by its name, eager's version bumps, as ``eager_versions``
    counts them for inputs (Dynamo's fake of a held tensor starts at version 0 too)."""
    held = {}
    for n in gm.graph.find_nodes(op="get_attr"):
        v = n.meta.get("example_value")
        if isinstance(v, torch.Tensor) and not v.is_inference() and v._version:
            held[n.target] = v._version
    return held


def set_versions(tensors: Sequence[torch.Tensor], versions: Sequence[int]) -> None:
    """Set the version counters of ``tensors``. NOTE: off the CPU a version never goes back
    below the current one: a write of ours that eager's kernel would not count (batch norm's
    running statistics) must still move it, since that is how the cached views of a program
    on another stream see torch's writes (``runtime/_interop.ViewCache``)."""
    if tensors:
        versions = [
            v if t.device.type == "cpu" else max(v, t._version) for t, v in zip(tensors, versions)
        ]
        torch._C._autograd._unsafe_set_version_counter(tuple(tensors), tuple(versions))


class Piece(torch.nn.Module):
    """A run of a Dynamo graph between data-dependent ops, compiled as a graph of its own."""

    def __init__(self, graph: CompiledGraph) -> None:
        super().__init__()
        self.compiled = graph

    def forward(self, *args):
        return tuple(self.compiled(*args))


class Cut:
    """The entry of a graph cut around its data-dependent ops: runs the cut graph, then gives
    its inputs eager's versions (``versions``: eager's bumps per input; None where the graph
    runs in eager PyTorch, which bumps them itself)."""

    runs_eager_ops = True  # (bucketing pads no such graph: its eager ops see real sizes only)

    def __init__(
        self,
        top: torch.fx.GraphModule,
        versions: Sequence | None = None,
        first_success: Callable[[], None] | None = None,
    ) -> None:
        # ``first_success``: called once, after the first run that did not raise (a graph
        # whose compile failed warns there: where eager raises too, the error was the user's)
        self.first_success = first_success
        if hasattr(top, "real_recompile"):  # (a lazy graph module's forward calls the wrapper)
            top.real_recompile()
        self.top = top
        self.tracked = (
            tuple((i, n) for i, n in enumerate(versions) if n is not None) if versions else ()
        )

    def __call__(self, args: Sequence) -> list:
        tracked = [(args[i], n) for i, n in self.tracked if not args[i].is_inference()]
        before = [t._version for t, _ in tracked]
        # (the training nodes its pieces make: what their backward checks is read again once
        # the versions are eager's, ``restamp``)
        outer, made = nodes.made, []
        nodes.made = made
        try:
            # (not through FX's wrapper, which prints the code of a node that raises: eager's
            # errors, an index out of range in an eager node, reach the user as eager's do)
            out = list(self.top.forward(*args))
        finally:
            nodes.made = outer
        # (its pieces write their inputs back once each; eager's count is the whole graph's)
        set_versions([t for t, _ in tracked], [v + n for v, (_, n) in zip(before, tracked)])
        restamp(made)
        if outer is not None:
            outer.extend(made)
        if self.first_success is not None:
            first_success, self.first_success = self.first_success, None
            first_success()
        return out


class Submodule(torch.nn.Module):
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


class Entry:
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
        draws: bool = False,
        shared: Sequence = (),
        lone: Sequence[int] = (),
        lone_untracked: Sequence[int] = (),
        held_versions: dict[str, int] | None = None,
        inference: Sequence[int] = (),
        marks: OutputMarks | None = None,
    ) -> None:
        self.lifted = lowered.lifted
        # (their dtypes when traced: ``LiftedChanged``)
        self._lifted_dtypes = list(map(_DTYPE, self.lifted))
        self.aliasing = lowered.aliasing
        self.inputs = lowered.inputs
        self.mutations = lowered.mutations
        # (the written-back inputs of a call's inputs, in one C call: 584 in an AdamW step)
        self._targets = operator.itemgetter(*self.mutations) if len(self.mutations) > 1 else None
        self.runner = runner
        self.program = runner if isinstance(runner, XlaProgram) else None
        self.detach = tuple(i for i, rg in enumerate(output_requires_grad) if not rg)
        self.aliases = aliases  # OutputAlias: outputs eager returns as views of inputs
        self.shared = shared  # SharedBase: outputs eager returns as views of one intermediate
        # outputs eager returns as the only view of an intermediate: views of the program's
        self.lone = tuple(i for i in lone if i not in lone_untracked)
        # (of those, the ones eager makes under no_grad: views without history, made so too)
        self.lone_untracked = tuple(i for i in lone if i in lone_untracked)
        # what some outputs need once made (``OutputMarks``: views of a multi-output op, and
        # outputs made from nothing the graph reads, which eager code may resize)
        self.marks = marks or None
        # outputs eager makes in an inference-mode block of the graph (``_inference``)
        self.inference = tuple(inference)
        # output -> the error eager's backward raises through it (``_eager_backward``)
        self.errors = errors or {}
        # Some output requires grad in eager although the graph is called under no_grad: the
        # function enables grad itself (torch.enable_grad() inside), so we must differentiate
        # (``program_grads``; not in inference mode, where eager records nothing: ``_grad_on``).
        self.enables_grad = any(program_grads(output_requires_grad, aliases))
        # eager's version bumps per written-back input where they are not the write's one
        self.bumps = _bumps(lowered, versions, held_versions)
        self.versions = versions  # (per input: for a bucket's padded copies, PaddedEntry)
        # written-back inputs whose new values carry autograd history (``_tracked_writes``)
        self.tracked = tuple(i for i, t in enumerate(tracked) if t)
        # The call writes inputs or makes outputs after its training nodes are made: those
        # read again what their backward checks for in-place changes (``restamp``).
        self.restamps = bool(self.mutations or shared)
        # Some writes may be made in place by the program (GPU, ``runtime/_in_place.py``).
        self.in_place = bool(getattr(runner, "in_place", ()))
        # Some writes may be scattered into the inputs by a CPU program (``_host_writes``).
        self.host_writes = getattr(runner, "_write_pos", None) is not None
        # The program takes the graph's arguments as they are, and its outputs are the user's.
        self.direct = self.program is not None and not (
            self.lifted
            or self.aliasing
            or self.mutations
            or aliases
            or shared
            or self.errors
            or self.inference
        )
        # (a split graph, ``draws`` where it draws random numbers: whether a call whose eager
        # op raised runs again in eager, to make eager's writes and draws before that op,
        # ``EagerOpRaised``; not with collectives, which would run again on this process only)
        self.replay = (
            self.program is None
            and (bool(self.mutations) or draws)
            and not has_collectives(lowered.gm)
        )

    def _untracked_views(self, outs: list) -> None:
        """Outputs eager returns as a view made under no_grad of a tensor the graph does not
        return (``with no_grad(): return y[0]``): they require grad through the program's
        output and have no history (eager's ``grad_fn`` is None, a loss of it sends nothing
        back), as a view made under no_grad has."""
        with torch.no_grad():
            for i in self.lone_untracked:
                outs[i] = outs[i].view_as(outs[i])

    def __call__(self, args: Sequence, views: bool = True):
        """The graph's outputs for ``args``. ``views=False``: outputs eager returns as views
        of inputs are left as the program's copies (a bucket's program runs on padded copies
        of the inputs, whose layouts are not the recorded views'; ``PaddedEntry`` makes the
        views of the caller's tensors itself)."""
        if self.direct:  # (the hot path)
            if self.enables_grad and self._grad_on():
                with torch.enable_grad():
                    outs = self.program(args)
            else:
                outs = self.program(args)
            for i in self.detach:
                if outs[i].requires_grad:
                    outs[i] = outs[i].detach()
            for i in self.lone:
                outs[i] = outs[i].view_as(outs[i])
            if self.lone_untracked:
                self._untracked_views(outs)
            if self.marks is not None:
                self.marks.apply(outs)
            return outs
        if self.lifted and list(map(_DTYPE, self.lifted)) != self._lifted_dtypes:
            raise LiftedChanged
        inputs = self.inputs(args) if self.lifted or self.aliasing else args
        run_inputs = inputs
        if self.tracked and torch.is_grad_enabled():
            # (the program reads copies of the inputs whose history the write-back rebases:
            # what it saves for its backward is not overwritten, as eager's in-place ops save
            # the original)
            run_inputs = list(inputs)
            for i in self.tracked:
                run_inputs[self.mutations[i]] = inputs[self.mutations[i]].clone()
        # (the training nodes the call makes: what their backward checks for in-place changes
        # is read again once the call's own writes are done, ``restamp``)
        made = outer = None
        if self.restamps:
            outer, made = nodes.made, []
            nodes.made = made
        try:
            if self.enables_grad and self._grad_on():
                with torch.enable_grad():
                    outs = self._run(run_inputs)
            else:
                outs = self._run(run_inputs)
        finally:
            if made is not None:
                nodes.made = outer
                if outer is not None:  # (a cut's piece: the cut reads them again too)
                    outer.extend(made)
        n = len(self.mutations)
        if n:
            if self._targets is None:
                targets = [inputs[idx] for idx in self.mutations]
            else:
                targets = list(self._targets(inputs))
            values, bumps = outs[:n], self.bumps
            if self.tracked and torch.is_grad_enabled():
                targets, values, bumps = self._copy_tracked(targets, values)
            if self.in_place:  # (values the program wrote in place: bumps only, no copy)
                done = list(map(written_in_place, values, targets))
                targets, values, bumps = _settle_done(targets, values, bumps, done)
            elif self.host_writes:  # (likewise, on the CPU: a value that *is* its target)
                done = list(map(operator.is_, values, targets))
                targets, values, bumps = _settle_done(targets, values, bumps, done, cpu=True)
            with torch.no_grad():  # one launch for all (159 BatchNorm buffers in ResNet-50)
                if not targets:
                    pass
                elif bumps is None:  # (each copy bumps its input's version once, as eager)
                    copy_into(targets, values)
                else:
                    _copy_back(targets, values, bumps)
            outs = outs[n:]
        for alias in self.aliases if views else ():
            outs[alias.output] = alias.regenerate(args, outs)
        replaced = {}
        for group in self.shared:
            old = {k: outs[k] for k in group.outputs if outs[k].numel()}
            group.regenerate(args, outs)
            if made:
                replaced.update((t.untyped_storage().data_ptr(), outs[k]) for k, t in old.items())
        if made:
            restamp(made, replaced)
        # (after the views: ``x.detach()`` of an input is a view of it that eager does not track)
        for i in self.detach:
            if outs[i].requires_grad:
                outs[i] = outs[i].detach()
        for i, error in self.errors.items():
            if outs[i].requires_grad:  # (under the grad mode the outputs were made in)
                with torch.enable_grad():
                    outs[i] = _eager_backward.RaiseAtBackward.apply(error, outs[i])
        for i in self.lone:
            outs[i] = outs[i].view_as(outs[i])
        if self.lone_untracked:
            self._untracked_views(outs)
        for i in self.inference:
            outs[i] = as_inference(outs[i])
        if self.marks is not None:
            self.marks.apply(outs)
        return outs

    @staticmethod
    def _grad_on() -> bool:
        """Whether a call of a graph that enables grad itself switches it on: not where it is
        on already, nor in inference mode (whose ops autograd never records)."""
        return not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()

    def _copy_tracked(self, targets: list, values: list) -> tuple[list, list, tuple | None]:
        """Write the new values eager's autograd records (``tracked``) with grad on, so the
        inputs' history goes through them (and eager's version bump per write); returns the
        other targets, values and bumps, written under no_grad."""
        bumps = self.bumps or (1,) * len(targets)
        rest = set(range(len(targets)))
        for i in self.tracked:
            target, value = targets[i], values[i]
            if not (value.requires_grad and (records_write(target) or not target.requires_grad)):
                continue
            before = target._version
            target.copy_(value)
            if bumps[i] is not None and bumps[i] != 1:
                set_versions([target], [before + bumps[i]])
            rest.discard(i)
        keep = sorted(rest)
        bumps_left = None if self.bumps is None else tuple(self.bumps[i] for i in keep)
        return [targets[i] for i in keep], [values[i] for i in keep], bumps_left

    def _run(self, inputs: Sequence) -> list:
        if self.program is not None:
            return self.program(inputs)
        try:
            with restored_on_error():
                if torch._C._is_any_autocast_enabled():
                    # (the ATen graph has autocast's casts already: its eager ops must not be
                    # cast again, as an mm under ``autocast(enabled=False)`` in the user's code)
                    with torch._C._DisableAutocast():
                        return list(self.runner(*inputs))
                return list(self.runner(*inputs))
        except (OpError, CompileError):  # (an XLA partition's: handled as the whole graph's)
            raise
        except Exception as e:  # noqa: BLE001 - re-raised: an op run in eager raised
            raise EagerOpRaised(e, self.replay) from None


def _bumps(
    lowered: LoweredGraph, versions: Sequence | None, held: dict[str, int] | None = None
) -> tuple | None:
    """Per input ``lowered`` writes back, eager's version bumps (``eager_versions`` for the
    arguments, ``eager_held_versions`` for the tensors the graph holds, by name; None where
    not known: inputs overlapping differently than their example values), or None where each
    is one, the write's own."""
    n_lifted = len(lowered.lifted)
    names = lowered.lifted_names
    if held and len(names) == n_lifted:
        lifted = [held.get(name) for name in names]
    else:
        lifted = [None] * n_lifted
    if versions is None and not any(lifted):
        return None
    if versions is None:
        positions = []
    elif lowered.aliasing is None:
        positions = [[i] for i in range(len(versions))]
    else:  # the inputs outside every group, then one base per group
        groups = lowered.aliasing.groups
        grouped = {i for g in groups for i in g.positions}
        positions = [[i] for i in range(len(versions)) if i not in grouped]
        positions += [list(g.positions) for g in groups]
    bumps = []
    for idx in lowered.mutations:
        if idx < n_lifted:
            counts = {lifted[idx]}
        elif versions is None:
            counts = {None}
        else:
            # (a group's base: one counter, every member's own writes)
            own = [versions[i] for i in positions[idx - n_lifted]]
            counts = {None if None in own else sum(own)}
        count = counts.pop() if len(counts) == 1 else None
        bumps.append(1 if count is None else count)  # (unknown: the copy's own one)
    return None if all(b == 1 for b in bumps) else tuple(bumps)


MIXED_WRITES = (
    "an input autograd follows is written both in grad mode and without autograd's record "
    "(no_grad, .data, .detach()): eager keeps the history of the recorded writes only"
)


def records_write(t) -> bool:
    """Whether an in-place write into ``t`` in grad mode is one autograd records (a float
    tensor that requires grad, not a leaf nor a view of one: eager refuses those)."""
    if not isinstance(t, torch.Tensor) or not t.requires_grad:
        return False
    if not (t.is_floating_point() or t.is_complex()):
        return False
    root = t if t._base is None else t._base
    return root.grad_fn is not None


def _settle_done(targets: list, values: list, bumps: tuple | None, done: list, cpu=False):
    """The targets, values and bumps left to copy once the targets the program already wrote
    (``done``: in place on the GPU, ``runtime/_in_place``; scattered on the CPU,
    ``runtime/_host_writes``) have their versions moved as the copy would: eager's count where
    known, else the copy's one. ``cpu``: every target is a CPU tensor (no device checks)."""
    if not any(done):
        return targets, values, bumps
    moved = list(itertools.compress(targets, done))
    steps = [1] * len(moved) if bumps is None else list(itertools.compress(bumps, done))
    try:
        versions = list(map(_VERSION, moved))
    except RuntimeError:  # (inference tensors have no version: left as they are)
        kept = [(t, b) for t, b in zip(moved, steps) if not t.is_inference()]
        moved, steps = [t for t, _ in kept], [b for _, b in kept]
        versions = list(map(_VERSION, moved))
    new = list(map(operator.add, versions, steps))
    if cpu:  # (set_versions' rule for other devices skipped: an optimizer writes hundreds)
        torch._C._autograd._unsafe_set_version_counter(tuple(moved), tuple(new))
    else:
        set_versions(moved, new)
    if all(done):
        return [], [], None
    keep = [i for i, d in enumerate(done) if not d]
    return (
        [targets[i] for i in keep],
        [values[i] for i in keep],
        None if bumps is None else tuple(bumps[i] for i in keep),
    )


_VERSION = operator.attrgetter("_version")
_DTYPE = operator.attrgetter("dtype")


def _copy_back(targets: list, values: Sequence, bumps: tuple) -> None:
    """Write ``values`` into ``targets`` with eager's ``bumps`` of their versions (no Python
    call per target: an optimizer step writes hundreds)."""
    try:
        before = list(map(_VERSION, targets))
    except RuntimeError:  # (an inference tensor, written in inference mode: has no version)
        pass
    else:
        copy_into(targets, values)
        # (each copy moves its own counter by one: more, where targets share a counter;
        # summed in C, no Python call per target on the write-back)
        if sum(map(_VERSION, targets)) - sum(before) != len(targets):
            # (targets sharing a version counter, views of one tensor: eager's counter moved
            # by each one's writes; the copies moved it once per target)
            # (off the CPU each still moves: ``set_versions``)
            torch._C._autograd._unsafe_set_version_counter(tuple(targets), tuple(before))
            for t, b in zip(targets, bumps):
                b = b if t.device.type == "cpu" else max(b, 1)
                torch._C._autograd._unsafe_set_version_counter((t,), (t._version + b,))
            return
        set_versions(targets, list(map(operator.add, before, bumps)))
        return
    tracked = [(t, b) for t, b in zip(targets, bumps) if b is not None and not t.is_inference()]
    before = [t._version for t, _ in tracked]
    copy_into(targets, values)
    set_versions([t for t, _ in tracked], [v + b for v, (_, b) in zip(before, tracked)])


def copy_into(targets: Sequence[torch.Tensor], values: Sequence[torch.Tensor]) -> None:
    """``targets[i].copy_(values[i])`` for each ``i``, in one launch where it can be: torch's
    ``_foreach_copy_`` refuses targets with a conjugate or negative bit (an input passed as
    ``z.conj()`` or ``z.conj().imag``), which ``copy_`` writes through as eager does.

    NOTE: the refusal is raised by the dispatcher's conjugate and negative fallbacks, before
    any copy: tried first, it costs nothing where no target has such a bit, where looking at
    every target's bits cost ~0.15 us a target (584 in an AdamW step of 146 parameters). Any
    other error (an inference tensor written outside inference mode) is raised again below,
    by the copy eager would make, as before."""
    try:
        torch._foreach_copy_(targets, values)
        return
    except RuntimeError:
        flagged = [i for i, t in enumerate(targets) if t.is_conj() or t.is_neg()]
        if not flagged:
            raise
    plain = [i for i in range(len(targets)) if i not in set(flagged)]
    if plain:
        torch._foreach_copy_([targets[i] for i in plain], [values[i] for i in plain])
    for i in flagged:
        targets[i].copy_(values[i])
