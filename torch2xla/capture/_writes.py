"""Writes eager checks and tracing does not: into a tensor whose elements share memory, and
into an ``out=`` tensor eager's kernel rejects.

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

import contextlib
import dataclasses
import functools
import logging
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch.fx.node import map_aggregate

from torch2xla._errors import OpError
from torch2xla._quiet import quiet
from torch2xla.capture import _numbers as numbers
from torch2xla.capture._hinted import examples_at_hints, hint
from torch2xla.capture._input_aliasing import _extent, _overlapping
from torch2xla.capture._probe_rng import kept_rng
from torch2xla.capture._wrappers import logical_layout

log = logging.getLogger(__name__)

OVERLAP = "unsupported operation: more than one element of the written-to tensor refers to a "

# (``x += 1`` reaches the Dynamo graph as operator.iadd)
IN_PLACE_OPERATORS = frozenset(
    (
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.iand,
        operator.ior,
        operator.ixor,
        operator.ilshift,
        operator.irshift,
        operator.imatmul,
    )
)


def _written(node: torch.fx.Node, args: tuple, kwargs: dict) -> Any:
    """The tensor (example value) that ``node`` writes into, or None where it writes none:
    ``self`` of in-place methods and functions, ``out=``, ``t[i]`` of ``t[i] = v`` (``t``
    itself where ``i`` holds tensors: ``index_put_`` writes ``t``)."""
    if node.op == "call_method":
        name = node.target
        if name.startswith("__"):  # (``x.__iadd__(1)``)
            writes = getattr(operator, name.strip("_"), None) in IN_PLACE_OPERATORS
        else:
            writes = name.endswith("_") and not name.startswith("_")
        return args[0] if writes and args else None
    if node.op != "call_function":
        return None
    target = node.target
    if "out" in kwargs:
        return kwargs["out"]
    if target is operator.setitem:
        t, index = args[0], args[1]
        if not isinstance(t, torch.Tensor) or _holds_tensors(index):
            return t
        if torch._C._functorch.is_functorch_wrapped_tensor(t):
            # (a value inside a torch.func transform: its wrapper's levels are gone once the
            # trace ends, and indexing it raised functorch's "tensor may have escaped" error;
            # its layout, as the transform's function sees it, is indexed instead)
            t = logical_layout(t)
            if t is None:  # (an unbacked size: no layout to index; the write is not checked)
                return None
        # (only the layout is read: without grad, as a view made under ``no_grad`` whose base
        # was since written refuses a view of itself made with grad)
        with _fake_mode(t), torch.no_grad():
            return t[index]
    name = getattr(target, "__name__", "")
    in_place = name.endswith("_") and not name.startswith("_")
    if target in IN_PLACE_OPERATORS or in_place or kwargs.get("inplace") is True:
        return args[0] if args else kwargs.get("input")
    return None


def _holds_tensors(index: Any) -> bool:
    return any(isinstance(i, torch.Tensor | list) for i in _leaves(index)) or isinstance(
        index, list
    )


def _fake_mode(t: torch.Tensor):
    mode = getattr(t, "fake_mode", None)
    return mode if mode is not None else contextlib.nullcontext()


def traced_grad_mode(node: torch.fx.Node) -> bool:
    """Whether grad was enabled where Dynamo traced ``node``: the last grad-mode switch before
    it (``torch._C._set_grad_enabled``, Dynamo's record of a ``no_grad`` block), else the mode
    the graph is compiled in (a backend runs in the frame's). Example values computed again
    for ``node`` take it: a view made with grad of a view made under ``no_grad`` whose base was
    written raises (eager made it under ``no_grad``)."""
    n = node.prev
    while n.op != "root":
        if n.op == "call_function" and n.target is torch._C._set_grad_enabled:
            return bool(n.args[0])
        n = n.prev
    return torch.is_grad_enabled()


def _leaves(tree: Any) -> list:
    found: list = []
    map_aggregate(tree, found.append)
    return found


def _example(a: Any) -> Any:
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a


def _overlaps(t: Any) -> bool:
    """Whether ``t`` (an example value) is a tensor whose elements share memory, with concrete
    sizes and strides."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return False
    if not all(isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset())):
        return False
    return t.numel() > 1 and _self_overlapping(tuple(t.shape), tuple(t.stride()))


def _self_overlapping(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether two elements of a layout share memory: a stride 0 (``expand``), or windows that
    overlap (``unfold(0, 3, 1)``, ``as_strided``)."""
    dims = sorted((s, n) for n, s in zip(sizes, strides) if n > 1)
    reach = 0  # the largest offset the smaller strides reach
    for stride, size in dims:
        if stride <= reach:
            break
        reach += (size - 1) * stride
    else:
        return False
    # interleaved layouts may still be one-to-one (sizes (2, 3), strides (3, 2)): counted
    if math.prod(sizes) > 1 << 20:
        return True
    offsets = torch.zeros((), dtype=torch.int64, device="cpu")
    for size, stride in zip(sizes, strides):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, device="cpu") * stride
    return offsets.unique().numel() < offsets.numel()


def self_overlapping(t: Any) -> bool:
    """Whether the tensor ``t`` of a call has elements that share memory (per call, in the
    cache key: torch's own check first, ~0.2 us; the layout's offsets where it cannot tell)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.numel() < 2:
        return False
    found = torch._debug_has_internal_overlap(t)
    if found != 2:  # (0: no, 1: yes, 2: too hard to tell)
        return bool(found)
    return _self_overlapping(tuple(t.shape), tuple(t.stride()))


def symbolic_layout(t: Any) -> bool:
    """Whether the example value ``t`` has a symbolic size, stride or offset (so that
    ``check_writes`` cannot tell whether its elements share memory)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return False
    return not all(isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset()))


def _real(t: Any, fill: int = 0, ints: Callable[[Any], Any] = lambda n: n) -> Any:
    """A real CPU tensor filled with ``fill``, with ``t``'s sizes, strides and dtype (``t`` if
    no tensor); ``ints`` makes its SymInts ints where it can."""
    if not isinstance(t, torch.Tensor):
        return t
    size, stride, offset = _layout(t, ints)
    numel = math.prod(size)
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    base = torch.full((max(extent, 0) if numel else 0,), fill, dtype=t.dtype, device="cpu")
    return base.as_strided(size, stride, offset if numel else 0)


def _layout(t: torch.Tensor, ints: Callable[[Any], Any]) -> tuple:
    """``t``'s sizes, strides and offset as ints (``ints`` of each), else ``_Symbolic``."""
    size, stride = tuple(ints(n) for n in t.shape), tuple(ints(n) for n in t.stride())
    offset = ints(t.storage_offset())
    if not all(isinstance(n, int) for n in (*size, *stride, offset)):
        raise _Symbolic
    return size, stride, offset


def _call_ints(gm: torch.fx.GraphModule, args: Sequence) -> Callable[[Any], Any]:
    """SymInts of ``gm``'s example values as ints at the call ``args``: the values its size
    symbols have in the call (read from the inputs' sizes), else their hints."""
    values: dict = {}
    for node, a in zip(gm.graph.find_nodes(op="placeholder"), args):
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.SymInt) and isinstance(a, int):
            values.setdefault(ex.node.expr, sympy.Integer(a))
        elif isinstance(ex, torch.Tensor) and isinstance(a, torch.Tensor) and ex.dim() == a.dim():
            for n, m in zip(ex.shape, a.shape):
                if isinstance(n, torch.SymInt) and isinstance(n.node.expr, sympy.Symbol):
                    values.setdefault(n.node.expr, sympy.Integer(int(m)))

    def ints(n: Any) -> Any:
        if not isinstance(n, torch.SymInt):
            return n
        value = sympy.sympify(sympy.sympify(n.node.expr).xreplace(values))
        return int(value) if value.is_Integer else hint(n)

    return ints


class _Symbolic(Exception):
    """An argument with symbolic sizes: the call cannot be run for real."""


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


def _root(node: Any) -> Any:
    """The node whose memory ``node`` is a view of (itself if none)."""
    for _ in range(256):
        if not isinstance(node, torch.fx.Node) or node.op not in ("call_method", "call_function"):
            break
        parent = node.args[0] if node.args else None
        up, ex = _example(parent), _example(node)
        if not (isinstance(up, torch.Tensor) and isinstance(ex, torch.Tensor)) or not _shares(
            up, ex
        ):
            break
        node = parent
    return node


def _partial_overlap_error(node: torch.fx.Node, args: Any, kwargs: Any) -> str | None:
    """Eager's error for a write that reads memory it writes (eager refuses a partial
    overlap; an identical one is accepted), from a run on real zeros laid out as the
    arguments, those sharing memory in one real storage."""
    bases: dict = {}
    leaves = [t for t in _leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    for t in leaves:
        if t.layout != torch.strided or not all(
            isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset())
        ):
            return None
        extent = t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        key = t.untyped_storage()._cdata
        dtype, length = bases.get(key, (t.dtype, 0))
        if dtype != t.dtype:
            return None  # (one memory as two dtypes: not laid out here)
        bases[key] = (dtype, max(length, extent if t.numel() else 0))
    if sum(length for _, length in bases.values()) > 1 << 26:
        return None
    real = {k: torch.zeros(n, dtype=d, device="cpu") for k, (d, n) in bases.items()}

    def like(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        base = real[t.untyped_storage()._cdata]
        return base.as_strided(t.shape, t.stride(), t.storage_offset() if t.numel() else 0)

    real_args, real_kwargs = map_aggregate((args, kwargs), like)
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
    bases: dict = {}
    for t in _leaves((args, kwargs)):
        if not isinstance(t, torch.Tensor):
            continue
        if t.layout != torch.strided or not all(
            isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset())
        ):
            return True
        extent = t.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
        key = t.untyped_storage()._cdata
        dtype, length = bases.get(key, (t.dtype, 0))
        if dtype != t.dtype:
            return True
        bases[key] = (dtype, max(length, extent if t.numel() else 0))

    def like(real: dict, t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        base = real[t.untyped_storage()._cdata]
        return base.as_strided(t.shape, t.stride(), t.storage_offset() if t.numel() else 0)

    return _eager_is_functional(node, args, kwargs, bases, like)


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


def _concrete(t: Any) -> bool:
    """Whether ``t`` is a strided tensor with concrete sizes, strides and offset."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return False
    return all(isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset()))


def _windows_overlap(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements share memory other than along stride-0 dims."""
    if not _overlaps(t):
        return False
    kept = [(n, s) for n, s in zip(t.shape, t.stride()) if s != 0]
    return _self_overlapping(tuple(n for n, _ in kept), tuple(s for _, s in kept))


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage()._cdata == b.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return False


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


def _tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


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
    "check_overlapping_inputs",
    "check_writes",
    "outside",
    "strided_writes",
]
