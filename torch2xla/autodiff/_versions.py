"""What a training node's backward checks for in-place changes since the call, as eager's
saved tensors are checked (their version counters).

Eager's backward raises "one of the variables needed for gradient computation has been
modified by an inplace operation" where a tensor one of its nodes saved changed in place
between the forward and the backward, and checks only the nodes that backward runs: ``a, b =
x.tanh(), x.sigmoid(); b.add_(1); a.sum().backward()`` runs. Our one node stands for all of
eager's, so it keeps the tensors eager's graph saves (inputs, and outputs detached: they share
the version counter without a reference to the node) with their versions after the call, and
checks, per backward, those that eager's nodes on the differentiated outputs' paths saved
(``_eager_backward.saved_per_output``), and the inputs our own backward reads where eager
saves another tensor (``x.relu()``: eager saves the output; our mask is the input's).

An ``Entry`` that writes inputs back, or makes outputs views of a shared base, after the
program ran reads the versions again at the end of the call (``nodes``, ``restamp``):
the call's own writes are not the user's.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence

import torch


class Watch:
    """The tensors whose in-place change before a backward makes it raise eager's error, as
    positions: ``inputs`` (the program's: those our backward reads, those eager's graph
    saves) then ``outputs`` (those eager's graph saves); per differentiated output, the
    indices among them that a backward through it checks (``need``: those eager's nodes on its
    path saved, ``XlaProgram.output_saved``, and those our backward reads where eager's graph
    saves another tensor; all where not known), and all of them (``every``)."""

    __slots__ = ("every", "inputs", "names", "need", "outputs")

    def __init__(self, plan, ours: Sequence[int]) -> None:
        program = plan.program
        written = getattr(program, "saved_written", ())
        eager_in = (*getattr(program, "saved_inputs", ()), *written)
        self.inputs = tuple(sorted({*ours, *eager_in}))
        self.outputs = plan.saved_out
        # per output, how eager's error names the tensor it saved (``saved_per_output``)
        names = getattr(program, "saved_names", {})
        self.names = tuple(names.get(i) for i in self.outputs)
        at_in = {k: n for n, k in enumerate(self.inputs)}
        at_out = {i: len(self.inputs) + n for n, i in enumerate(self.outputs)}
        self.every = frozenset(range(len(self.inputs) + len(self.outputs)))
        # (ours that eager's graph saves too are checked where eager's nodes on the path save
        # them: a backward through other outputs reads them only times a zero cotangent)
        base = frozenset(at_in[k] for k in ours if k not in eager_in)
        per_output = getattr(program, "output_saved", None) or {}
        need = []
        for i in plan.diff_out:
            known = per_output.get(i)
            if known is None:
                need.append(self.every)
                continue
            ins, outs = known
            need.append(
                base.union(
                    (at_in[k] for k in ins if k in at_in),
                    (at_out[o] for o in outs if o in at_out),
                )
            )
        self.need = tuple(need)

    @classmethod
    def of(cls, plan, ours: Sequence[int] | None) -> Watch:
        """The plan's watch (kept once our backward's inputs are known, ``ours``)."""
        if ours is None:
            return cls(plan, ())
        plan.watch = cls(plan, ours)
        return plan.watch

    def check(self, ctx, active: Sequence[int] | None) -> None:
        """Raise eager's error where a tensor that the backward through the differentiated
        outputs ``active`` (None: all) reads changed since the call."""
        watched, versions = ctx.watched, ctx.versions
        if active is None:
            indices = self.every
        else:
            indices = frozenset().union(*(self.need[j] for j in active))
        for n in indices:
            t = watched[n]
            if t._version != versions[n]:
                n_in = len(self.inputs)
                if n < n_in:
                    message = modified_message(t, t._version, versions[n], t.output_nr, t.grad_fn)
                else:  # (counted from the call's end, as eager's from its new tensor's)
                    changes = t._version - versions[n]
                    named = self.names[n - n_in]
                    if named is None:
                        message = modified_message(t, changes, 0, self.outputs[n - n_in], ctx)
                    else:
                        shape, output_nr, op = named
                        output_nr, op = regenerated(output_nr, op)
                        message = modified_message(t, changes, 0, output_nr, op, shape)
                raise RuntimeError(message)


INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead of "
    "`torch.inference_mode()`."
)


def versions_with_inference(program, watch: Watch, watched: list) -> list[int]:
    """The versions of ``watched`` (changed in place: ``Watch.inputs`` then outputs), some of
    them inference tensors, which have no version counter: eager's error (at the call, as
    eager's at its forward) where eager's graph saves one (``program.saved_inputs``); those
    only our backward reads (``x * w.sin()``: eager saves the sine) are watched as a tensor
    nothing changes (an inference tensor changes only under ``inference_mode``, unseen by
    eager's nodes too)."""
    eager = {*getattr(program, "saved_inputs", ()), *getattr(program, "saved_written", ())}
    versions = []
    for n, t in enumerate(watched):
        if t.is_inference():
            if n < len(watch.inputs) and watch.inputs[n] in eager:
                raise RuntimeError(INFERENCE_SAVED)
            watched[n] = t = torch.empty(0)
        versions.append(t._version)
    return versions


def modified_message(
    t: torch.Tensor, version: int, expected: int, output_nr: int, node, shape=None
) -> str:
    """Eager's error for a tensor saved for the backward at version ``expected`` and changed
    in place since (to ``version``), made as output ``output_nr`` of ``node`` (None: a
    leaf; or the node's name), of ``shape`` (None: ``t``'s)."""
    # (eager names the node by its op: ``Exp`` for ``ExpBackward0``)
    name = node if isinstance(node, str) or node is None else node.name()
    which = "" if name is None else f", which is output {output_nr} of {_op_name(name)},"
    shape = list(t.shape) if shape is None else list(shape)
    if torch.is_anomaly_enabled():
        hint = (
            "the backtrace further above shows the operation that failed to compute its "
            "gradient. The variable in question was changed in there or anywhere later. Good "
            "luck!"
        )
    else:
        hint = (
            "enable anomaly detection to find the operation that failed to compute its "
            "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
        )
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{t.type()} {shape}]{which} is at version "
        f"{version}; expected version {expected} instead. Hint: {hint}"
    )


def regenerated(output_nr: int, name: str) -> tuple[int, str]:
    """The node eager's error names for a saved tensor made as output ``output_nr`` of the
    node ``name`` and changed in place since: a view (``x[1]``, ``x.t()``), changed through
    itself, its base or another view, has its node made again (``grad_fn``) as output 0 of
    ``AsStridedBackward0`` (torch's view replay off, as by default); fake tensors, whose
    views replay their op, keep the view's own node (``SelectBackward0``)."""
    if torch._C._is_view_replay_enabled() or not _is_view_node(name):
        return output_nr, name
    return 0, "AsStridedBackward0"


_NAMED = re.compile(r"which is output (\d+) of (\w+),")


def eager_view_names(message: str) -> str:
    """``message`` (eager's error for a changed saved tensor, raised by a backward of fake
    tensors) naming the node eager names (``regenerated``)."""

    def sub(m: re.Match) -> str:
        backward = m.group(2).rstrip("0123456789").endswith("Backward")
        output_nr, name = regenerated(
            int(m.group(1)), m.group(2) if backward else m.group(2) + "Backward0"
        )
        return f"which is output {output_nr} of {name if backward else _strip(name)},"

    return _NAMED.sub(sub, message)


def _strip(name: str) -> str:
    stem = name.rstrip("0123456789")
    return stem[: -len("Backward")] if stem.endswith("Backward") else name


@functools.cache
def _is_view_node(name: str) -> bool:
    """Whether the autograd node ``name`` (``SelectBackward0``) is a view op's: one of the
    ATen op's overloads returns an alias of its input, not written."""
    stem = _strip(name)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower()
    packet = getattr(torch.ops.aten, snake, None)
    if packet is None:
        return False
    for overload in packet.overloads():
        returns = getattr(packet, overload)._schema.returns
        if any(r.alias_info is not None and not r.alias_info.is_write for r in returns):
            return True
    return False


def _op_name(name: str) -> str:
    if not _eager_names_ops():
        return name
    stem = name.rstrip("0123456789")
    return stem[: -len("Backward")] if stem.endswith("Backward") else name


@functools.cache
def _eager_names_ops() -> bool:
    """Whether this torch's message names the node by its op (``Exp``, torch 2.13) or by the
    node's own name (``ExpBackward0``, torch 2.11): asked of eager once."""
    with torch.inference_mode(False), torch.enable_grad():  # (a backward runs in no_grad)
        a = torch.ones(1, device="cpu", requires_grad=True)
        b = a.exp()
        with torch.no_grad():
            b.add_(1)
        try:
            b.backward()
        except RuntimeError as e:
            return "of ExpBackward0," not in str(e)
    raise AssertionError("eager's backward ran through a changed saved tensor")


class _Nodes(threading.local):
    """``made``: the training nodes made in this thread while an ``Entry`` that writes after
    the call runs (it sets a list, and restores None after), or None."""

    made: list | None = None


nodes = _Nodes()


def restamp(nodes: Sequence, replaced: dict | None = None) -> None:
    """The versions the backward of ``nodes`` expects, as their checked tensors have them
    now, at the end of the call (its writes after the program ran are not the user's); an
    output eager returns as a view of a shared base (``replaced``: its storage's pointer ->
    the tensor the user gets) is checked through that base, as eager's through the saved
    tensor its views share."""
    for ctx in nodes:
        watched = ctx.watched
        if replaced:
            for n, t in enumerate(watched):
                got = replaced.get(t.untyped_storage().data_ptr()) if t.numel() else None
                if got is not None:
                    watched[n] = (got if got._base is None else got._base).detach()
        ctx.versions = [t._version for t in watched]
