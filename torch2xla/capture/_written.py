"""What a call of the Dynamo graph writes, read from its example values: the tensor it writes
into (``_written``: an in-place method or function, ``x[i] = v``, ``+=``, ``out=``,
``inplace=True``), the node whose memory a view is (``_root``), whether a tensor's elements
share memory (``self_overlapping``), and real tensors laid out as example values
(``_real``), on which eager's kernels are asked what they do (``_writes``, ``_self_reads``)."""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch.fx.node import map_aggregate

from torch2xla.capture._hinted import hint
from torch2xla.capture._wrappers import logical_layout

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


def _tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)
