"""Int inputs that only position a view or a write: ``x[pos]``, ``x[:, pos:pos + 1]``,
``x.narrow(0, start, 3)``, ``cache[:, pos:pos + 1] = k``.

Such an int sizes nothing (the view's shape is the same for every value), yet it is in the
view's storage offset, and a graph lowered per concrete signature made every value a constant:
a decoding loop that writes its Python-int position into a preallocated cache compiled one
program per token. ``capture/_int_values.py`` takes such an int as a 0-d int64 tensor where each
of its views is one of the forms below, rewritten here to gather or scatter at tensor indices
(``index_select``, ``index_copy_``, ``index_fill_``: XLA's dynamic indexing), so that its values
share one program:

- a read ``base[..., start:stop:step, ...]``, ``base[..., i, ...]`` (the other entries ``:`` or
  ``...``), ``select``, ``narrow`` with an int length, becomes ``index_select`` (then ``squeeze``
  for an int index): a copy where eager has a view. Taken only where the copy cannot be told
  apart: the view (and every view made of it) is no output and nothing is written in place
  after it, and its strides are row-major (the copy's order, so ops on it lay out their results
  as eager's did);
- a write ``base[...] = value`` with the same index becomes ``index_fill_`` (a number) or
  ``index_copy_`` of the value cast to the base's dtype and broadcast to the view (a tensor that
  shares no memory with the base).

Each form is checked on Dynamo's fake values first: the view's sizes, strides and storage offset
must be the base's with ``start + step * k`` along one dim, so the index Dynamo guarded (in range,
not wrapped from the end) is exactly the position the tensor index gathers; anything else keeps
the int (one program per value, as before).
"""

from __future__ import annotations

import dataclasses
import itertools
import operator

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from torch2xla.capture._written import IN_PLACE_OPERATORS, traced_grad_mode

# (in a node's meta["custom"], which the export copies onto the ATen nodes a node makes: the
# gather or scatter stands for ``x[pos]``'s select, whose bounds error is eager's, not
# ``index_select``'s, ``ops/_bounds.py``)
SELECTED = "torch2xla_selects_an_int"
_FULL = slice(None, None, None)
# (``x[i] = v`` reaches the Dynamo graph as operator.setitem)
_IN_PLACE_OPERATORS = IN_PLACE_OPERATORS | {operator.setitem}


def writes(node: torch.fx.Node) -> bool:
    """Whether ``node`` may write a tensor in place (conservative: any ``name_`` call)."""
    if node.op not in ("call_function", "call_method"):
        return False
    if "out" in node.kwargs or node.kwargs.get("inplace") is True:
        return True
    if node.op == "call_method":
        name = node.target
    else:
        if node.target in _IN_PLACE_OPERATORS:
            return True
        name = getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("__")


@dataclasses.dataclass
class Position:
    """A view or write of ``base`` at a position derived from int inputs along ``dim``."""

    node: torch.fx.Node
    base: torch.fx.Node
    dim: int
    start: torch.fx.Node | int
    step: int
    select: bool  # an int index: ``dim`` is dropped from the view
    index: object  # the getitem/setitem index, or None (select, narrow)
    length: int | None = None  # narrow's
    value: object = None  # setitem's
    write: bool = False

    def view(self, base, start):
        """The view this position takes of ``base`` (fake), with ``start`` for the position."""
        if self.select:
            return base.select(self.dim, start)
        if self.index is None:
            return base.narrow(self.dim, start, self.length)
        return base[self.index]


def _is_derived(a, derived) -> bool:
    return isinstance(a, torch.fx.Node) and a in derived


def _uses(a, derived) -> bool:
    if isinstance(a, slice):
        return any(_uses(x, derived) for x in (a.start, a.stop, a.step))
    if isinstance(a, list | tuple):
        return any(_uses(x, derived) for x in a)
    return _is_derived(a, derived)


def _from_index(node, base, index, derived, ndim) -> Position | None:
    entries = index if isinstance(index, tuple) else (index,)
    at = [k for k, e in enumerate(entries) if _uses(e, derived)]
    if len(at) != 1:
        return None
    k = at[0]
    for j, e in enumerate(entries):
        if j != k and e is not Ellipsis and e != _FULL:
            return None
    if sum(e is Ellipsis for e in entries) > 1:
        return None
    dim = ndim - (len(entries) - k) if Ellipsis in entries[:k] else k
    e = entries[k]
    if _is_derived(e, derived):
        return Position(node, base, dim, e, 1, True, index)
    if not isinstance(e, slice) or not _is_derived(e.start, derived):
        return None
    step = 1 if e.step is None else e.step
    if not isinstance(step, int) or step < 1:
        return None
    return Position(node, base, dim, e.start, step, False, index)


def position(node: torch.fx.Node, derived) -> Position | None:
    """``node`` as a view or write of a tensor at a position from ``derived`` nodes (int
    inputs and int arithmetic on them), or None."""
    if node.kwargs or node.op not in ("call_function", "call_method"):
        return None
    args = node.args
    if not args or not isinstance(args[0], torch.fx.Node) or args[0] in derived:
        return None
    base = args[0]
    ex = base.meta.get("example_value")
    if not isinstance(ex, torch.Tensor) or ex.layout != torch.strided or ex.ndim == 0:
        return None
    name = node.target
    if name in (torch.select, "select") and len(args) == 3:
        dim, i = args[1:]
        if isinstance(dim, int) and _is_derived(i, derived):
            return Position(node, base, dim % ex.ndim, i, 1, True, None)
        return None
    if name in (torch.narrow, "narrow") and len(args) == 4:
        dim, start, length = args[1:]
        if isinstance(dim, int) and isinstance(length, int) and _is_derived(start, derived):
            return Position(node, base, dim % ex.ndim, start, 1, False, None, length)
        return None
    if node.op != "call_function":
        return None
    if node.target is operator.getitem and len(args) == 2:
        return _from_index(node, base, args[1], derived, ex.ndim)
    if node.target is operator.setitem and len(args) == 3:
        if _uses(args[2], derived):
            return None
        pos = _from_index(node, base, args[1], derived, ex.ndim)
        if pos is not None:
            pos.value, pos.write = args[2], True
        return pos
    return None


def _expr(n):
    return n.node.expr if isinstance(n, torch.SymInt) else n


def _equal(a, b) -> bool:
    import sympy

    return sympy.simplify(sympy.sympify(_expr(a)) - sympy.sympify(_expr(b))) == 0


def _row_major(t: torch.Tensor) -> bool:
    strides = [st for n, st in zip(t.shape, t.stride()) if n != 1]
    return all(_equal(a, b) or bool(_expr(a) >= _expr(b)) for a, b in itertools.pairwise(strides))


def check(pos: Position, load, fake) -> tuple[str | None, object]:
    """(None, the rewritten form's fake value) where ``pos`` can take its position as a 0-d
    tensor (``load`` gives the fake value of a node: the new one of int arithmetic), else
    (why not, None)."""
    base = pos.base.meta["example_value"]
    start_ex = pos.start.meta.get("example_value")
    index = pos.index
    if index is not None:  # (with the int inputs' own fake values: the view Dynamo traced)
        index = torch.fx.node.map_aggregate(
            index, lambda a: a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a
        )
    grad = traced_grad_mode(pos.node)
    with fake, torch.set_grad_enabled(grad):
        view = dataclasses.replace(pos, index=index).view(base, start_ex)
    shape = list(base.shape)
    strides = list(base.stride())
    if pos.select:
        del shape[pos.dim], strides[pos.dim]
        length = 1
    else:
        length = view.shape[pos.dim]
        shape[pos.dim] = length
        strides[pos.dim] = strides[pos.dim] * pos.step
        if isinstance(length, torch.SymInt):
            return "its view's length depends on it", None
    pos.length = length
    offset = base.storage_offset() + base.stride(pos.dim) * start_ex
    if not (
        len(view.shape) == len(shape)
        and all(_equal(a, b) for a, b in zip(view.shape, shape))
        and all(_equal(a, b) for a, b in zip(view.stride(), strides))
        and _equal(view.storage_offset(), offset)
    ):
        return "it indexes from the end or clamps", None
    start = load(pos.start)
    try:
        with fake, torch.set_grad_enabled(grad):
            idx = start + torch.arange(length, device=base.device) * pos.step
            if pos.write:
                value = load(pos.value) if isinstance(pos.value, torch.fx.Node) else pos.value
                if isinstance(value, torch.Tensor):
                    if StorageWeakRef(value.untyped_storage()) == StorageWeakRef(
                        base.untyped_storage()
                    ):
                        return "the value it writes shares memory with the base", None
                    src = _source(value.to(base.dtype), pos, base, length)
                    out = base.clone().index_copy_(pos.dim, idx, src)
                elif isinstance(value, int | float | bool):
                    out = base.clone().index_fill_(pos.dim, idx, value)
                else:
                    return "it writes a value of another kind", None
                return None, out
            out = base.index_select(pos.dim, idx)
            if pos.select:
                out = out.squeeze(pos.dim)
    except Exception as e:  # noqa: BLE001 -- any failure keeps the int
        return f"its view does not gather at a tensor index ({type(e).__name__})", None
    if not _row_major(view):
        return "its view is not row-major", None
    return None, out


def _source(value, pos: Position, base, length: int):
    """The value broadcast to the view's shape, with the selected dim put back."""
    if pos.select:
        return value.expand_as(base.select(pos.dim, 0)).unsqueeze(pos.dim)
    return value.expand_as(base.narrow(pos.dim, 0, length))


def rewrite(gm: torch.fx.GraphModule, pos: Position, fake) -> None:
    """Replace ``pos.node`` by its gather or scatter at the tensor index (after the int
    inputs' example values became 0-d tensors: the new nodes' are run in ``fake``)."""
    graph = gm.graph
    node = pos.node
    base = pos.base.meta["example_value"]
    length = pos.length
    before = set(graph.nodes)
    with graph.inserting_before(node):
        ar = graph.call_function(torch.arange, (length,), {"device": base.device})
        stepped = graph.call_function(operator.mul, (ar, pos.step))
        idx = graph.call_function(operator.add, (pos.start, stepped))
        if pos.write:
            if isinstance(pos.value, torch.fx.Node):
                src = graph.call_method("to", (pos.value, base.dtype))
                if pos.select:
                    like = graph.call_method("select", (pos.base, pos.dim, 0))
                    src = graph.call_method("expand_as", (src, like))
                    src = graph.call_method("unsqueeze", (src, pos.dim))
                else:
                    like = graph.call_method("narrow", (pos.base, pos.dim, 0, length))
                    src = graph.call_method("expand_as", (src, like))
                new = graph.call_method("index_copy_", (pos.base, pos.dim, idx, src))
            else:
                new = graph.call_method("index_fill_", (pos.base, pos.dim, idx, pos.value))
        else:
            new = graph.call_method("index_select", (pos.base, pos.dim, idx))
            if pos.select:
                new = graph.call_method("squeeze", (new, pos.dim))
    added = [n for n in graph.nodes if n not in before]
    grad = traced_grad_mode(node)
    for n in added:
        n.meta.update({k: v for k, v in node.meta.items() if k != "example_value"})
        if pos.select:
            n.meta["custom"] = {**n.meta.get("custom", {}), SELECTED: True}
        if n.op == "call_method" and n.target.endswith("_"):
            # (in place: the base itself, as Dynamo records it; running it on the fake base
            # would move the version counts the write-back reads)
            n.meta["example_value"] = base
            continue
        args = torch.fx.node.map_aggregate(
            n.args, lambda a: a.meta["example_value"] if isinstance(a, torch.fx.Node) else a
        )
        with fake, torch.set_grad_enabled(grad):
            if n.op == "call_method":
                n.meta["example_value"] = getattr(args[0], n.target)(*args[1:], **n.kwargs)
            else:
                n.meta["example_value"] = n.target(*args, **n.kwargs)
    node.replace_all_uses_with(new)
    graph.erase_node(node)
