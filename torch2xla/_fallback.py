"""What runs in eager PyTorch instead of XLA, and how it is said: a call with what no program
can take (forward-mode duals, saved-tensor hooks, a forked child), a graph or op XLA cannot
run (``FallbackWarning``, an ``UnsupportedOpsError`` in strict mode), a graph cut around its
data-dependent ops, and the replay in eager of a call whose program raised eager's error."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch2xla._entry import Cut, EagerOpRaised, Piece, first_line, run_eager
from torch2xla._errors import (
    CompileError,
    OpError,
    Unsupported,
    UnsupportedOpsError,
    op_name,
    source_line,
    warn,
)
from torch2xla._options import Options
from torch2xla.capture import _data_dependent as data_dependent
from torch2xla.capture._int_offsets import SELECTED
from torch2xla.debug._stages import Build, OpPlacement
from torch2xla.runtime import _fork
from torch2xla.runtime._scalar_outputs import as_scalars


class FallbackWarning(UserWarning):
    """Some ops of a compiled graph run in eager PyTorch because XLA cannot run them."""


# Compile stages whose failure runs the graph in eager (outside strict mode): ``_build``.
EAGER_AFTER = frozenset({"lowering", "tracing", "stablehlo", "xla"})


REASON_DUAL = (
    "runs in eager PyTorch when called with forward-mode AD's dual tensors "
    "(torch.autograd.forward_ad): its XLA programs have no forward derivative"
)


REASON_HOOKS = (
    "runs in eager PyTorch when trained under torch.autograd.graph.saved_tensors_hooks: "
    "eager's backward reads what the hooks' unpack returns, an XLA program's backward its "
    "own residuals, which the hooks never see (save_on_cpu's and checkpoint's hooks change "
    "no value: their calls stay compiled)"
)


REASON_LIFTED = (
    "runs in eager PyTorch: a tensor it holds as an attribute (an optimizer's parameter or "
    "state, m.double() after compiling opt.step) changed its dtype since it was "
    "compiled, which Dynamo does not guard; eager decides whether its ops take the new mix"
)


REASON_LEAVES_INFERENCE = (
    "runs in eager PyTorch when called in inference mode: its torch.inference_mode(False) "
    "block makes tensors eager's autograd tracks, an XLA program's outputs made in "
    "inference mode are inference tensors"
)


@torch._disable_dynamo
def in_eager_for(graph, reason: str, args: Sequence):
    """A call that runs in eager PyTorch for ``reason`` (raised in strict mode, else one
    ``FallbackWarning`` per reason): with forward-mode AD's dual tensors (``REASON_DUAL``:
    our programs' autograd Function has no forward derivative, the outputs' tangents were
    lost), trained under saved-tensor hooks (``REASON_HOOKS``), called in inference mode
    where the graph leaves it (``REASON_LEAVES_INFERENCE``)."""
    node = next(n for n in graph.gm.graph.nodes if n.op != "placeholder")
    if graph.options.strict:
        raise UnsupportedOpsError(graph.name, [Unsupported(node, reason)])
    if reason not in graph._warned_eager:
        graph._warned_eager.add(reason)
        warn(f"torch2xla: {graph.name} {reason}", FallbackWarning, node=node)
    return _numbers(graph, run_eager(graph.gm, args))


@torch._disable_dynamo
def in_forked_child(graph, args: Sequence):
    """A call in a process forked after torch2xla started JAX runs in eager PyTorch: JAX
    cannot run there (``runtime/_fork.py``); raised in strict mode."""
    if graph.options.strict:
        raise CompileError(f"torch2xla: {graph.name} cannot run: {_fork.REASON}")
    if not _fork.warned:
        _fork.warned = True  # (one warning per process)
        warn(f"torch2xla: {_fork.REASON}", FallbackWarning)
    return _numbers(graph, run_eager(graph.gm, args))


def _numbers(graph, outs):
    """``outs`` with eager's Python numbers where the graph returns 0-d tensors."""
    return as_scalars(outs, graph.scalar_outputs) if graph.scalar_outputs else outs


@torch._disable_dynamo
def replay(graph, error: OpError, args: Sequence, state: torch.Tensor | None):
    """Run the call that raised ``error`` again in eager PyTorch from the same inputs (the
    failed call changed none of them: mutations are written back after the program), so
    that what eager changes before the failing op is changed and nothing after it, with
    the random generator's state as eager leaves it. Eager's own error becomes the
    cause of ours; a call eager runs without error (a check of ours stricter than eager)
    returns eager's results. Not replayed: a value check's error beside CUDA tensors,
    where eager's kernel would assert on the device (such a call changes no input); an
    op of a split graph run in eager that raised (``EagerOpRaised``) where the graph
    writes no input and draws no random number (nothing eager did before it is lost):
    its own error is raised as it is."""
    if isinstance(error, EagerOpRaised) and not error.replay:
        raise error.error
    if error.replayed or (error.after_run and on_gpu(args)):
        raise error
    if state is not None:
        torch.default_generator.set_state(state)
    gm = getattr(graph, "_numbers_gm", None) or graph.gm  # (addcdiv whole: ``_numbers``)
    try:
        # (not through FX's wrapper: it prints the error's code)
        out = _numbers(graph, run_eager(gm, args))
    except Exception as eager:
        error.replayed = True
        if isinstance(error, type(eager)) and not isinstance(error, EagerOpRaised):
            if stands_for_select(error):  # (the replay ran the gather, not the select)
                raise error from eager
            raise error.with_eager_message(eager) from eager
        raise  # (eager's own: an op of a split graph run in eager raised it)
    warn(
        f"torch2xla: {graph.name} raised where eager PyTorch, run again from the same "
        f"inputs, does not; the call returns eager's results. Please report this.\n{error}",
        UserWarning,
    )
    return out


def stands_for_select(error: OpError) -> bool:
    """Whether ``error`` is the bounds check of a gather or scatter that stands for ``x[pos]``
    with an int ``pos`` (``capture/_int_offsets.py``): eager's replay of the rewritten graph
    raises ``index_select``'s error, where the user's ``x[pos]`` raises select's, ours."""
    node = getattr(error, "node", None)
    return bool(isinstance(node, torch.fx.Node) and (node.meta.get("custom") or {}).get(SELECTED))


def on_gpu(args: Sequence) -> bool:
    return any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)


def dual(args: Sequence) -> bool:
    """Whether an argument carries a forward-mode tangent (a dual level is active)."""
    return any(
        isinstance(a, torch.Tensor) and torch.autograd.forward_ad.unpack_dual(a).tangent is not None
        for a in args
    )


def after_failure(graph, error: CompileError, args: Sequence) -> Cut:
    """The whole graph in eager PyTorch from now on, ``error`` being why."""
    with Build(graph, args) as b:
        first = next((n for n in graph.gm.graph.nodes if n.op == "call_function"), None)
        said = (
            f"torch2xla: {graph.name} runs in eager PyTorch: compiling it failed in stage "
            f"{error.stage} ({first_line(error)}). This is a bug in torch2xla; please "
            "report it (options={'strict': True} raises the error instead)."
        )  # (said once eager ran it: where eager raises, the failure was the input's)
        b.record.mode = "eager"
        graph._cut = Cut(graph.gm, first_success=lambda: warn(said, FallbackWarning, node=first))
        graph._draws = False
        return b.done(graph._cut)


def report(graph, missing: list, whole: bool = False) -> None:
    """Raise (strict mode) or warn once that the ops ``missing`` run in eager PyTorch
    (``whole``: the whole graph does, because of them)."""
    if missing and graph.options.strict:
        raise UnsupportedOpsError(graph.name, missing)
    if missing and not graph._warned:
        graph._warned = True
        listing = "\n".join(str(u) for u in missing)
        what = (
            f"{graph.name} runs in eager PyTorch because of"
            if whole
            else f"{len(missing)} op(s) of {graph.name} run in eager PyTorch, the rest in XLA"
        )
        warn(f"torch2xla: {what}:\n{listing}", FallbackWarning, node=missing[0].node)


def in_eager(graph, missing: list[Unsupported], b: Build, every: bool = True) -> Cut:
    """The whole Dynamo graph run in eager PyTorch, for every signature (``every``; else
    for this one), because of the nodes ``missing`` (raised in strict mode, else one
    ``FallbackWarning``; none: eager raises, which it then does itself)."""
    report(graph, missing, whole=True)
    b.record.mode = "eager"
    b.record.ops = [
        OpPlacement(u.node.name, op_name(u.node), "eager", u.reason, source_line(u.node))
        for u in missing
    ]
    cut = Cut(graph.gm)
    if every:
        graph._cut = cut
        graph._draws = False  # (eager draws its own numbers: nothing to replay)
    return b.done(cut)


def cut_around(graph, found: list[torch.fx.Node], b: Build) -> Cut:
    """The Dynamo graph with its data-dependent nodes ``found`` run in eager PyTorch and the
    runs of nodes between them compiled as graphs of their own (``_data_dependent``)."""
    missing = data_dependent.unsupported(found)
    report(graph, missing)
    eager = data_dependent.eager_nodes(graph.gm, found)
    # (the pieces are made at this graph's first call, after Dynamo's compile: they take
    # this graph's frame for their names, which Dynamo no longer tells)
    top = data_dependent.split(
        graph.gm,
        eager,
        lambda piece: Piece(_piece_graph(type(graph), piece, graph.options, graph.guards.context)),
    )
    b.record.mode = "split"
    b.record.ops = [
        OpPlacement(n.name, op_name(n), "eager", data_dependent.reason(n), source_line(n))
        for n in found
    ]
    b.record.pieces = [m.compiled.name for m in top.children() if isinstance(m, Piece)]
    graph._cut = Cut(top, graph._cut_versions)
    graph._keeps_state = False  # (its pieces replay themselves)
    return b.done(graph._cut)


def _piece_graph(cls: type, piece: torch.fx.GraphModule, options: Options, context):
    """A piece of a cut graph, compiled: its inputs' example values are the whole graph's,
    whose versions count the whole graph's writes, so the cut graph sets the versions."""
    graph = cls(piece, options, context)
    graph.versions = None
    graph.held_versions = {}
    return graph
