"""Writes that read memory they write (``x.add_(x[0])``, ``x[1:] = x[:-1]``, ``torch.sum(x, 0,
out=x[0])``, ``a.add_(b)`` called with overlapping ``a`` and ``b``): eager refuses a partial
overlap with its own error, which is raised (``_partial_overlap_error``); where it accepts
the call but its kernel reads what it already wrote, eager's result is not the functional
graph's (which reads every argument first), and the call runs in eager
(``_functional_as_eager``). Both are answered by eager itself, on real tensors laid out as
the arguments; overlaps between inputs, which Dynamo does not guard, per signature
(``check_overlapping_inputs``)."""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.node import map_aggregate

from torch2xla._errors import OpError
from torch2xla._quiet import quiet
from torch2xla.capture import _numbers as numbers
from torch2xla.capture._input_aliasing import _extent, _overlapping
from torch2xla.capture._probe_rng import kept_rng
from torch2xla.capture._written import (
    _call_ints,
    _example,
    _layout,
    _leaves,
    _real,
    _root,
    _shares,
    _Symbolic,
    _written,
)

log = logging.getLogger(__name__)


PARTIAL = "unsupported operation: some elements of the input tensor and the written-to tensor"


def _reads_written(node: torch.fx.Node, written: Any, target: Any, args: Any, kwargs: Any) -> bool:
    """Whether the write ``node`` reads a tensor that shares memory with the one it writes
    (``written``, held by the argument ``target``: ``x.add_(x[0])``, ``x[1:] = x[:-1]``,
    ``torch.max(x, 0, out=(x[0], i))``), or the written tensor itself as another argument
    (``x.scatter_(0, i, x)``: eager's kernels that check overlap refuse it, TensorIterator's
    accept it; not ``t[i] = t``'s)."""
    if not isinstance(written, torch.Tensor) or written.layout != torch.strided:
        return False
    setitem = node.target is operator.setitem
    own = args[0] if setitem and args else written
    if "out" in node.kwargs:
        read = (node.args, {k: v for k, v in node.kwargs.items() if k != "out"})
    else:
        read = (node.args[1:], node.kwargs)
    for arg in _leaves(read):
        leaf = _example(arg)
        if leaf is written and not setitem:
            return True
        if leaf is written or leaf is own or not isinstance(leaf, torch.Tensor):
            continue
        if leaf.layout != torch.strided or not _shares(leaf, written):
            continue
        # (two inputs that share memory in this call may not in the next one: Dynamo does not
        # guard it; left to the export's synthetic base)
        a, b = _root(arg), _root(target)
        if a is not b and a.op == "placeholder" and b.op == "placeholder":
            continue
        return True
    return False


def _storages(args: Any, kwargs: Any) -> dict | None:
    """Per storage of the example tensors in ``args``/``kwargs``: (dtype, elements) that hold
    every tensor of it as laid out; None where one cannot be laid out for real (symbolic or
    non-strided layouts, one memory seen as two dtypes)."""
    bases: dict = {}
    for t in _leaves((args, kwargs)):
        if not isinstance(t, torch.Tensor):
            continue
        if t.layout != torch.strided or not all(
            isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset())
        ):
            return None
        extent = t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        key = t.untyped_storage()._cdata
        dtype, length = bases.get(key, (t.dtype, 0))
        if dtype != t.dtype:
            return None
        bases[key] = (dtype, max(length, extent if t.numel() else 0))
    return bases


def _laid_out(real: dict, t: Any) -> Any:
    """The example tensor ``t`` as a view of ``real`` (storage key -> real tensor)."""
    if not isinstance(t, torch.Tensor):
        return t
    base = real[t.untyped_storage()._cdata]
    return base.as_strided(t.shape, t.stride(), t.storage_offset() if t.numel() else 0)


def _partial_overlap_error(node: torch.fx.Node, args: Any, kwargs: Any) -> str | None:
    """Eager's error for a write that reads memory it writes (eager refuses a partial
    overlap; an identical one is accepted), from a run on real zeros laid out as the
    arguments, those sharing memory in one real storage."""
    bases = _storages(args, kwargs)
    if bases is None or sum(length for _, length in bases.values()) > 1 << 26:
        return None
    real = {k: torch.zeros(n, dtype=d, device="cpu") for k, (d, n) in bases.items()}
    real_args, real_kwargs = map_aggregate((args, kwargs), functools.partial(_laid_out, real))
    return numbers.eager_raises(node, real_args, real_kwargs, lambda m: m.startswith(PARTIAL))


_PROBE_LIMIT = 1 << 20  # (elements of the storages a write reading itself is run on)


def _functional_as_eager(node: torch.fx.Node, args: Any, kwargs: Any) -> bool:
    """Whether eager's result of a write that reads memory it writes, which eager accepts,
    is the functional graph's (every argument read before anything is written): run by eager
    on distinct values laid out as the arguments, those sharing memory in one storage, once
    so and once with the tensors it reads copied first. Elementwise ops writing each element
    after reading it agree (``x.add_(x)``, ``torch.exp(x, out=x)``); a reduction into a row
    of its input (``torch.sum(x, 0, out=x[0])``: eager fills the out tensor with the sum's
    identity before reading ``x``) or a sort into a shifted window of it does not, and runs in
    eager. Where it cannot be run (symbolic layouts, values the op refuses, an op that draws
    random numbers), the graph's answer is kept."""
    bases = _storages(args, kwargs)
    return True if bases is None else _eager_is_functional(node, args, kwargs, bases, _laid_out)


def _eager_is_functional(
    node: torch.fx.Node, args: Any, kwargs: Any, bases: dict, like: Callable[[dict, Any], Any]
) -> bool:
    """Whether eager's call ``node`` on ``args``/``kwargs`` (example values or nodes) gives
    the same memory when the arguments it reads are copied first: run on real storages of
    distinct values (``bases``: key -> (dtype, length)), each argument ``like(storages, a)``.
    True where it cannot tell (too large, an op that draws, values the op refuses)."""
    if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
        return True
    if sum(length for _, length in bases.values()) > _PROBE_LIMIT:
        return True
    gen = torch.Generator().manual_seed(0)
    start = {key: _distinct(length, dtype, gen) for key, (dtype, length) in bases.items()}
    # (the arguments read, by position: ``torch.mm(x, x, out=x)`` reads the tensor it writes)
    if "out" in kwargs:
        reads = (args, {k: v for k, v in kwargs.items() if k != "out"})
        writes: tuple = ((), {"out": kwargs["out"]})
    else:
        reads, writes = (args[1:], kwargs), (args[:1], {})

    def run(copy_reads: bool) -> dict | None:
        real = {key: base.clone() for key, base in start.items()}

        def made(a: Any, copy: bool = False) -> Any:
            t = like(real, a)
            return t.clone() if copy and isinstance(t, torch.Tensor) else t

        try:
            # (the copies are taken before anything is written)
            read = map_aggregate(reads, functools.partial(made, copy=copy_reads))
            written = map_aggregate(writes, made)
        except _Symbolic:
            return None
        real_args = (*written[0], *read[0])
        real_kwargs = {**read[1], **written[1]}
        with torch.no_grad(), kept_rng(node.target), quiet():
            try:
                numbers._call(node, real_args, real_kwargs)
            except (RuntimeError, IndexError, TypeError, ValueError) as e:
                log.debug("torch2xla: overlap check of %s could not run: %r", node, e)
                return None
        return real

    eager, functional = run(False), run(True)
    if eager is None or functional is None:
        return True
    return all(
        torch.equal(eager[k], functional[k]) or _same_nan(eager[k], functional[k]) for k in eager
    )


def _distinct(length: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """``length`` values of ``dtype`` that differ from each other where the dtype allows."""
    if dtype == torch.bool:
        return torch.rand(length, generator=gen) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(length, generator=gen, dtype=torch.float64).to(dtype)
    return torch.randperm(length, generator=gen).to(dtype)


def _same_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.is_floating_point() or a.is_complex()) and torch.allclose(
        a, b, rtol=0, atol=0, equal_nan=True
    )


def check_overlapping_inputs(gm: torch.fx.GraphModule, args) -> list[torch.fx.Node]:
    """Raise eager's partial-overlap error for a write of the Dynamo graph ``gm`` into an input
    that reads another input overlapping it in this call's ``args`` (``a.add_(b)`` called with
    ``x[0:4], x[2:6]``), or into a view of one reading a view of another (``a[:4].add_(b)``):
    Dynamo does not guard aliasing, so it is checked per signature. Returns the writes eager
    accepts but computes otherwise than the functional graph (``torch.sum(x, 0, out=y)``
    called with ``b, b[0]``: ``_functional_as_eager``), which must run in eager."""
    found = []
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    position = {n: i for i, n in enumerate(placeholders)}
    group = {i: k for k, g in enumerate(_overlapping(args)) for i in g}
    ints = _call_ints(gm, args)

    def group_of(a: Any) -> int | None:
        root = _root(a) if isinstance(a, torch.fx.Node) else None
        return group.get(position[root]) if root in position else None

    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function") or node.target is operator.setitem:
            continue
        example_args = map_aggregate(node.args, _example)
        example_kwargs = map_aggregate(node.kwargs, _example)
        if _written(node, example_args, example_kwargs) is None:
            continue
        target = node.kwargs.get("out") if "out" in node.kwargs else node.args[0]
        mine = group_of(target)
        if mine is None:
            continue
        read = [
            a for a in _leaves((node.args, node.kwargs)) if a is not target and group_of(a) == mine
        ]
        if not read:
            continue
        members = [i for i, k in group.items() if k == mine]
        tensors = [args[i] for i in members]
        if len({t.dtype for t in tensors}) > 1:
            continue
        first = min(t.storage_offset() for t in tensors)
        length = max(t.storage_offset() - first + _extent(t) for t in tensors)
        base = torch.zeros(length, dtype=tensors[0].dtype, device="cpu")
        real = {
            placeholders[i]: base.as_strided(
                args[i].shape, args[i].stride(), args[i].storage_offset() - first
            )
            for i in members
        }

        def like(a: Any, real: dict = real) -> Any:
            if not isinstance(a, torch.fx.Node):
                return ints(a)
            if a in real:
                return real[a]
            root = _root(a)
            if root in real:  # a view of an input: laid out in the input's real memory
                return _view_in(_example(a), _example(root), real[root], ints)
            return _real(_example(a), ints=ints)

        try:
            real_args, real_kwargs = map_aggregate((node.args, node.kwargs), like)
        except _Symbolic:
            continue
        message = numbers.eager_raises(
            node, real_args, real_kwargs, lambda m: m.startswith(PARTIAL)
        )
        if message is not None:
            raise OpError(message, node)

        def like_in(storages: dict, a: Any, real: dict = real) -> Any:
            if not isinstance(a, torch.fx.Node):
                return ints(a)
            views = {
                p: storages[0].as_strided(t.shape, t.stride(), t.storage_offset())
                for p, t in real.items()
            }
            if a in views:
                return views[a]
            root = _root(a)
            if root in views:
                return _view_in(_example(a), _example(root), views[root], ints)
            return _real(_example(a), ints=ints)

        bases = {0: (base.dtype, length)}
        if not _eager_is_functional(node, node.args, node.kwargs, bases, like_in):
            found.append(node)
    return found


def _view_in(view: Any, root: Any, real_root: torch.Tensor, ints: Callable) -> torch.Tensor:
    """The example ``view`` of the example ``root``, taken the same way of ``real_root``
    (the input laid out in this call's memory): its layout relative to the root's, which
    Dynamo's guards keep (the root's strides are the call's)."""
    size, stride, offset = _layout(view, ints)
    _, root_stride, root_offset = _layout(root, ints)
    if root_stride != tuple(real_root.stride()):
        raise _Symbolic  # (not laid out as the example: not checked)
    return real_root.as_strided(size, stride, real_root.storage_offset() + offset - root_offset)
