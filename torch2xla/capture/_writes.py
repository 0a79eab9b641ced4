"""Writes eager checks and tracing does not: into a tensor whose elements share memory, and
into an ``out=`` tensor eager's kernel rejects (writes that read memory they write:
``_self_reads``; what a call writes, from its example values: ``_written``).

**Overlapping memory** (``x.expand(4, 3).add_(1)``): eager raises "unsupported operation: more
than one element of the written-to tensor refers to a single memory location". Fake and meta
kernels skip that check, and the functional ATen graph no longer holds the
write, so it is found on the Dynamo graph: a call that writes (an in-place method or function,
``x[i] = v``, ``+=``, ``out=``, ``inplace=True``) into a tensor whose example value overlaps
itself (a stride 0 over a dimension of size > 1, or windows that overlap as ``unfold(0, 3, 1)``'s;
``x.expand(4, 3)[1] = v`` writes a row that does not) is run once more by eager PyTorch
on real tensors of the same sizes and strides (zeros, on the CPU; small, since the overlapping
tensor's memory is), and only eager's overlap error is taken from it: eager decides per op
(``fill_``, ``masked_fill_``, ``index_put_`` only warn), so no op list is kept here.

The writes eager accepts cannot be compiled as eager runs them: functionalization writes a
view's new value back into its base through the view's inverse, which for ``expand`` adds the
expanded copies up (``y.expand(4, 3).fill_(2)`` made ``y`` 8 + ... where eager's is 2). Such
a graph runs in eager PyTorch (a ``FallbackWarning``; strict mode raises). So does a write
through ``unfold`` windows that leave elements of their dim out (``x.unfold(1, 2, 3)``, or
``unfold(1, 2, 2)`` of 5 columns): the windows go back with ``unfold_backward``, which knows no
base and zeroed the elements no window holds.

**out= tensors** (``torch.multinomial(p, 2, out=float_tensor)``, ``torch.aminmax(x, dim=0,
out=(f32, f64))``): eager's kernels check the out tensor's dtype; the meta kernels of some do
not, and functionalization converts the result into it. A call with ``out=`` is run by eager
on real tensors like its arguments (zeros, else ones, where zeros are not valid values), once
without ``out=`` (its result) and once with it: where only the latter raises, and the call
into out tensors made like the result runs, the out tensor is what eager rejects, and its
error is raised.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import Any

import torch
from torch.fx.node import map_aggregate

from torch2xla._errors import OpError
from torch2xla._quiet import quiet
from torch2xla.capture import _numbers as numbers
from torch2xla.capture._hinted import examples_at_hints
from torch2xla.capture._input_aliasing import _extent
from torch2xla.capture._probe_rng import kept_rng
from torch2xla.capture._self_reads import (
    _functional_as_eager,
    _partial_overlap_error,
    _reads_written,
)
from torch2xla.capture._written import (
    _concrete,
    _example,
    _overlaps,
    _real,
    _shares,
    _Symbolic,
    _tensor,
    _windows_overlap,
    _written,
)

log = logging.getLogger(__name__)

OVERLAP = "unsupported operation: more than one element of the written-to tensor refers to a "


def check_writes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Raise eager's error (``OpError``, naming the user's line) for the first call of the
    Dynamo graph ``gm`` that writes into a tensor whose elements share memory, or into an
    ``out=`` tensor, where eager's kernel rejects it; returns the calls that write into
    overlapping memory where eager accepts it. Symbolic layouts (dynamic shapes) are read at
    their hints (``_hinted``)."""
    symbolic = {n for n in gm.graph.nodes if _symbolic_unfold(n)}
    with examples_at_hints(gm):
        return _check_writes(gm, symbolic)


def _check_writes(gm: torch.fx.GraphModule, symbolic: set) -> list[torch.fx.Node]:
    accepted = []
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function"):
            continue
        args = map_aggregate(node.args, _example)
        kwargs = map_aggregate(node.kwargs, _example)
        if node.op == "call_function" and "out" in kwargs:
            message = _out_error(node.target, args, kwargs)
            if message is not None:
                raise OpError(message, node)
        written = _written(node, args, kwargs)
        numbers.check_numbers(node, args, kwargs, written)
        # (each tensor of ``out=(values, indices)`` too)
        targets = _written_targets(node, written)
        if any(_reads_written(node, w, target, args, kwargs) for w, target in targets):
            message = _partial_overlap_error(node, args, kwargs)
            if message is not None:
                raise OpError(message, node)
            if not _functional_as_eager(node, args, kwargs):
                accepted.append(node)
                continue
        if not any(_overlaps(w) for w, _ in targets):
            # (only a write: reading an expanded input, ``x * 2`` of ``y.expand(3, 4)``, is fine)
            if targets and _through_overlap(node, symbolic):
                accepted.append(node)
            continue
        message = _eager_error(node, args, kwargs)
        if message is not None:
            raise OpError(message, node)
        accepted.append(node)
    return accepted


def _written_targets(node: torch.fx.Node, written: Any) -> list[tuple[torch.Tensor, Any]]:
    """The tensors ``node`` writes (example values), each with the argument that holds it
    (its node where it is one): one, or each of an ``out=`` tuple (``torch.max(x, 0,
    out=(v, i))``)."""
    if "out" in node.kwargs:
        holder = node.kwargs["out"]
        if isinstance(written, tuple | list) and isinstance(holder, tuple | list):
            return [(w, h) for w, h in zip(written, holder) if isinstance(w, torch.Tensor)]
        return [(written, holder)] if isinstance(written, torch.Tensor) else []
    if not isinstance(written, torch.Tensor):
        return []
    return [(written, node.args[0] if node.args else None)]


def _through_overlap(node: torch.fx.Node, symbolic: frozenset | set = frozenset()) -> bool:
    """Whether ``node`` writes into a view taken from a view whose windows overlap
    (``x.unfold(0, 3, 1)[0] += 1``): eager writes the one it names, functionalization refuses
    to write back through the overlapping one (it writes back through ``expand``), or into an
    input whose elements share memory, an expanded one too (``x[0] = v`` of ``x =
    y.expand(2, 3)``: the input's new value cannot be copied into it); or through ``unfold``
    windows that leave elements of their dim out (``x.unfold(1, 2, 3)``, a gap between
    windows; ``unfold(1, 2, 2)`` of 5 elements, the last left out): functionalization writes
    the windows back with ``unfold_backward``, which zeros the elements no window holds where
    eager leaves them as they were (``symbolic``: the unfolds of a dim of symbolic size, whose
    windows may leave some out at other sizes)."""
    if node.op == "call_function" and "out" in node.kwargs:
        return False
    arg = node.args[0] if node.args else node.kwargs.get("input")
    for _ in range(64):
        ex = _example(arg)
        if not isinstance(arg, torch.fx.Node) or not isinstance(ex, torch.Tensor):
            return False
        if arg.op == "placeholder":
            return _overlaps(ex)
        if arg.op not in ("call_method", "call_function") or _windows_overlap(ex):
            return _windows_overlap(ex)
        if arg in symbolic or _leaves_gaps(arg):
            return True
        parent = arg.args[0] if arg.args else None
        up = _example(parent)
        if not isinstance(up, torch.Tensor) or not _shares(up, ex):
            return False
        arg = parent
    return False


def _unfold_args(node: torch.fx.Node) -> tuple[bool, int, Any, Any] | None:
    """For a Dynamo graph's ``t.unfold(dimension, size, step)`` call: whether ``t``'s size along
    the dimension is symbolic, then that size, ``size`` and ``step`` (ints, or SymInts); None for
    any other node."""
    if node.op == "call_method":
        if node.target != "unfold":
            return None
    elif node.op != "call_function" or node.target is not torch.Tensor.unfold:
        return None
    names = ("self", "dimension", "size", "step")
    values = dict(zip(names, node.args)) | {k: v for k, v in node.kwargs.items() if k in names}
    base = _example(values.get("self"))
    if not isinstance(base, torch.Tensor) or len(values) != 4:
        return None
    dim, size, step = (_example(values[k]) for k in names[1:])
    if not isinstance(dim, int):
        return None
    length = base.shape[dim] if base.dim() else 1
    return isinstance(length, torch.SymInt), length, size, step


def _symbolic_unfold(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an ``unfold`` of a dim of symbolic size with a step other than 1."""
    found = _unfold_args(node)
    return found is not None and found[0] and found[3] != 1


def _leaves_gaps(node: torch.fx.Node) -> bool:
    """Whether ``node`` is an ``unfold`` whose windows leave an element of the dim out (its
    sizes ints, at their hints)."""
    found = _unfold_args(node)
    if found is None:
        return False
    _, length, size, step = found
    if not all(isinstance(n, int) for n in (length, size, step)) or step <= 0 or length < size:
        return False
    return (length - size) % step != 0 or (step > size and length - size >= step)


# -- writes through as_strided with a storage offset ------------------------------------------
# ``x.as_strided(size, stride, offset)``'s offset counts from the start of ``x``'s storage, so a
# write through it may reach memory of the storage outside ``x`` (``x = y[2:6]``, offset 0
# writes ``y[0]``), which the graph, holding ``x``'s elements only, cannot write: the lowering
# raised, and where the memory was ``x``'s own in the example call but not in a later one, the
# export wrote the wrong elements. Within ``x``, the export still reads the offset as one into
# a storage that starts where ``x`` does (functionalization's ``as_strided_scatter`` on ``y[2:6]``
# refused the offset 2). Such calls run in eager. Dynamo does not guard storage offsets (the
# cache key holds them in graphs with as_strided), so each signature is checked: ``outside``.
@dataclasses.dataclass(frozen=True)
class StridedWrite:
    """``node`` writes, through an ``as_strided`` view with a storage offset of the graph's
    input ``input``, the storage's elements ``start`` to ``end`` (whatever the input's own
    offset: the view's offset is absolute)."""

    node: torch.fx.Node
    input: int
    start: int
    end: int


def _explicit_offset(node: torch.fx.Node) -> bool:
    """Whether the Dynamo graph's ``node`` is an ``as_strided`` call given a storage offset."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if name != "as_strided":
        return False
    first = 1 if node.op == "call_method" or node.args else 0
    return len(node.args) > first + 2 or node.kwargs.get("storage_offset") is not None


def strided_writes(gm: torch.fx.GraphModule) -> tuple[StridedWrite, ...]:
    """The writes of the Dynamo graph ``gm`` into inputs through ``as_strided`` views with a
    storage offset (concrete layouts only)."""
    position = {n: i for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    found = []
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function") or "out" in node.kwargs:
            continue
        args = map_aggregate(node.args, _example)
        written = _written(node, args, map_aggregate(node.kwargs, _example))
        arg = node.args[0] if node.args else node.kwargs.get("input")
        if not _concrete(written) or not isinstance(arg, torch.fx.Node):
            continue
        strided = False
        for _ in range(64):
            if arg.op not in ("call_method", "call_function"):
                break
            strided = strided or _explicit_offset(arg)
            parent = arg.args[0] if arg.args else None
            up, ex = _example(parent), _example(arg)
            if not (_tensor(up) and _tensor(ex) and _shares(up, ex)):
                break
            arg = parent
        if strided and arg in position and written.numel():
            start = written.storage_offset()
            found.append(StridedWrite(node, position[arg], start, start + _extent(written)))
    return tuple(found)


def outside(found: tuple[StridedWrite, ...], args) -> list[torch.fx.Node]:
    """The writes of ``found`` that reach memory outside their input in this call's ``args``,
    or into an input that does not start its storage."""
    out = []
    for w in found:
        t = args[w.input]
        start = t.storage_offset()
        if start or w.end > _extent(t) or min(t.stride(), default=0) < 0:
            out.append(w.node)
    return out


def _eager_error(node: torch.fx.Node, args: Any, kwargs: Any) -> str | None:
    """Eager's overlap error for ``node`` called with real tensors like ``args``/``kwargs``,
    or None where eager accepts the call (or it cannot be run for real)."""
    try:
        real_args, real_kwargs = map_aggregate((args, kwargs), _real)
    except _Symbolic:
        return None
    return numbers.eager_raises(node, real_args, real_kwargs, lambda m: m.startswith(OVERLAP))


def _out_error(target: Any, args: Any, kwargs: dict) -> str | None:
    """Eager's error for the call ``target(*args, **kwargs)`` (example values) that comes from
    its ``out=`` tensors, or None (see the module's docstring)."""
    for fill in (0, 1):
        try:
            real_args, real_kwargs = map_aggregate(
                (args, kwargs), functools.partial(_real, fill=fill)
            )
        except _Symbolic:
            return None
        real_functional = {k: v for k, v in real_kwargs.items() if k != "out"}
        with torch.no_grad(), kept_rng(target), quiet():
            try:
                result = target(*real_args, **real_functional)
            except Exception as e:  # noqa: BLE001 - values not valid for the op: try others
                log.debug("torch2xla: out= check of %s with %s: %r", target, fill, e)
                continue
            try:
                target(*real_args, **real_kwargs)
                return None
            except RuntimeError as e:
                error = e
            like = map_aggregate(result, lambda r: torch.empty_like(r) if _tensor(r) else r)
            try:
                target(*real_args, **real_functional, out=like)
            except Exception:  # noqa: BLE001 - not the out tensor's dtype alone: no answer
                return None
        return str(error)
    return None


REASON = (
    "writes into a tensor whose elements share memory (an expanded tensor, overlapping windows), "
    "through unfold windows that leave elements out, or into its input's storage outside the "
    "input (as_strided), or reads memory it writes where eager's kernel reads what it already "
    "wrote (a reduction or a matrix product into its own operand): eager writes each location "
    "once and leaves the rest, the functional graph's write-back would add the copies up, zero "
    "the elements left out or cannot reach them, and reads every argument before writing"
)

__all__ = [
    "REASON",
    "StridedWrite",
    "check_writes",
    "outside",
    "strided_writes",
]
