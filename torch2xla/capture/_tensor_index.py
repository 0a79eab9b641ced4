"""A 0-d integer tensor as an index (``buf[step] = v``, ``table[label]``, ``x[:, i]``) selects
as a Python int does: eager reads its value (``.item()``) and takes ``select``'s view there.

The export cannot read a fake tensor's value, so such an op cut the graph and ran in eager
PyTorch (strict mode refused it). ``tensor_selects`` rewrites it, on a copy of the Dynamo
graph made for the export, to advanced indexing with the index as a one-element vector and
the dim that indexing keeps squeezed (a write: the value unsqueezed there), which XLA gathers
and scatters at the index's value at run time. Eager's error for an index out of range names
the dim as ``select`` does, the index's position in the subscript (``SELECT_DIMS`` in the
nodes' ``custom`` meta, which the export copies to the ATen nodes it makes and
``ops/_bounds.check_indices`` reads), where advanced indexing numbers the indexed dims.

Dynamo guards such an input's value (it traces each value anew, and its trace raises for one
out of range), so this keeps the graph whole and in XLA, not one program for all values; the
run-time check covers the graphs it does not trace per value.

A read gives a copy where eager gives a view, so it is rewritten only where the two cannot be
told apart: nothing writes through it or a view made of it (but ``x[k] += v``, whose write
back the copy makes as well), nothing writes into the indexed tensor's memory while those
views are still read, and none of them is a graph output. Other tensors, lists or masks in the same subscript
keep the op in eager (eager selects first, then indexes with the rest).
"""

from __future__ import annotations

import contextlib
import copy
import operator

import torch
from torch._guards import detect_fake_mode
from torch.multiprocessing.reductions import StorageWeakRef

from torch2xla.capture._int_offsets import writes
from torch2xla.capture._written import traced_grad_mode

# (in a node's meta["custom"], which the export copies onto the ATen nodes a node makes)
SELECT_DIMS = "torch2xla_select_dims"


def _example(a):
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a


def _selects(a) -> bool:
    """Whether ``a`` (an index entry) is a 0-d integer tensor, which eager selects with."""
    ex = _example(a)
    return (
        isinstance(a, torch.fx.Node)
        and isinstance(ex, torch.Tensor)
        and ex.ndim == 0
        and not (ex.dtype.is_floating_point or ex.dtype.is_complex)
        and ex.dtype not in (torch.bool, torch.uint8)
    )


def _picked(node: torch.fx.Node) -> list[int] | None:
    """The subscript positions of ``node``'s 0-d integer tensor indices (a getitem or setitem
    whose other entries are ints, slices of ints, None and Ellipsis), or None."""
    if node.op != "call_function" or node.target not in (operator.getitem, operator.setitem):
        return None
    base = _example(node.args[0])
    if not isinstance(base, torch.Tensor) or base.layout != torch.strided or base.ndim == 0:
        return None
    index = node.args[1]
    entries = index if isinstance(index, tuple) else (index,)
    picked = []
    for k, e in enumerate(entries):
        if _selects(e):
            picked.append(k)
        elif not (
            e is None
            or e is Ellipsis
            or type(e) is int
            or (
                isinstance(e, slice)
                and all(type(v) in (int, type(None)) for v in (e.start, e.stop, e.step))
            )
        ):
            return None
    return picked or None


def _kept_dim(entries: tuple, picked: list[int], ndim: int) -> int:
    """Where advanced indexing puts the dim of the one-element indices (torch's rule: at the
    first one's dim in the sliced tensor where they are adjacent, else in front)."""
    specified = sum(e is not None and e is not Ellipsis for e in entries)
    dim, dims = 0, []
    for k, e in enumerate(entries):
        if e is Ellipsis:
            dim += ndim - specified
        elif k in picked:
            dims.append(dim)
            dim += 1
        elif type(e) is not int:  # (an int selects: its dim goes)
            dim += 1
    return dims[0] if dims == list(range(dims[0], dims[0] + len(dims))) else 0


def _shares(a, base) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.layout == torch.strided
        and StorageWeakRef(a.untyped_storage()) == StorageWeakRef(base.untyped_storage())
    )


def _augmented(node: torch.fx.Node) -> set[torch.fx.Node]:
    """``x[k] += v`` as Dynamo records it: the read ``node``, one in-place op on it (its only
    user) and, next, the write of its result back at the same subscript: the writes a copy
    in place of the view makes as well (empty where ``node`` is not such a read)."""
    if len(node.users) != 1:
        return set()
    (op,) = node.users
    after = op.next
    if not (
        writes(op)
        and op.args
        and op.args[0] is node
        and len(op.users) == 1
        and after in op.users
        and after.op == "call_function"
        and after.target is operator.setitem
        and after.args[0] is node.args[0]
        and after.args[1] == node.args[1]
        and after.args[2] is op
    ):
        return set()
    return {op, after}


def _unseen_copy(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Whether a copy in place of the view the read ``node`` takes cannot be told apart: no
    write through it or a view made of it (but ``x[k] += v``'s own), no write into the
    indexed tensor's memory before the last use of those views, none of them returned."""
    base = _example(node.args[0])
    nodes = list(gm.graph.nodes)
    augmented = _augmented(node)
    views, last, writes_at = {node}, 0, []
    for i, n in enumerate(nodes[nodes.index(node) + 1 :]):
        if n in augmented:
            continue
        if n.op == "output":
            leaves = torch.utils._pytree.tree_leaves(
                torch.fx.node.map_aggregate(n.args, lambda a: a)
            )
            if any(o in views for o in leaves):
                return False
            continue
        if any(a in views for a in n.all_input_nodes):
            last = i
            if n.args and n.args[0] in views and not writes(n) and _shares(_example(n), base):
                views.add(n)  # (a view of one of them)
        if writes(n):
            target = n.kwargs.get("out", n.args[0] if n.args else None)
            targets = torch.utils._pytree.tree_leaves(target)
            if any(t in views for t in targets):
                return False
            if any(_shares(_example(t), base) for t in targets):
                writes_at.append(i)
    return all(w >= last for w in writes_at)  # (an op reads its operands, then writes)


def tensor_selects(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose subscripts with 0-d integer tensors gather and scatter at them
    (see the module's docstring; ``gm`` itself is never changed)."""
    found = [(i, p) for i, n in enumerate(gm.graph.nodes) if (p := _picked(n)) is not None]
    found = [
        (i, p)
        for i, p in found
        if list(gm.graph.nodes)[i].target is operator.setitem
        or _unseen_copy(gm, list(gm.graph.nodes)[i])
    ]
    if not found:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    nodes = list(gm.graph.nodes)
    for i, picked in found:
        _rewrite(gm.graph, nodes[i], picked)
    gm.graph.lint()
    gm.recompile()
    return gm


def _rewrite(graph: torch.fx.Graph, node: torch.fx.Node, picked: list[int]) -> None:
    base = node.args[0]
    base_ex = _example(base)
    index = node.args[1]
    entries = index if isinstance(index, tuple) else (index,)
    fake = detect_fake_mode([base_ex]) or contextlib.nullcontext()
    grad = traced_grad_mode(node)  # (example values made as Dynamo made them)
    p = _kept_dim(entries, picked, base_ex.ndim)
    custom = {**node.meta.get("custom", {}), SELECT_DIMS: tuple(picked)}
    added = []

    def call(kind, target, args):
        n = graph.create_node(kind, target, args)
        n.meta.update({k: v for k, v in node.meta.items() if k != "example_value"})
        n.meta["custom"] = custom
        ex = torch.fx.node.map_aggregate(args, _example)
        if target is not operator.setitem:
            with fake, torch.set_grad_enabled(grad):
                n.meta["example_value"] = (
                    getattr(ex[0], target)(*ex[1:]) if kind == "call_method" else target(*ex)
                )
        added.append(n)
        return n

    with graph.inserting_before(node):
        new = list(entries)
        for k in picked:
            vector = call("call_method", "reshape", (entries[k], 1))
            if _example(entries[k]).dtype not in (torch.int32, torch.int64):
                vector = call("call_method", "long", (vector,))
            new[k] = vector
        subscript = tuple(new) if isinstance(index, tuple) else new[0]
        with fake, torch.set_grad_enabled(grad):
            region = base_ex[torch.fx.node.map_aggregate(subscript, _example)]
        if node.target is operator.getitem:
            got = call("call_function", operator.getitem, (base, subscript))
            out = call("call_method", "squeeze", (got, p))
            node.replace_all_uses_with(out)
        else:
            value = node.args[2]
            v = _example(value)
            if isinstance(v, torch.Tensor):
                r, k = region.ndim - 1, v.ndim
                for _ in range(k - r):  # (eager's copy drops the value's leading ones)
                    value = call("call_method", "squeeze", (value, 0))
                k = min(k, r)
                if k > r - p:  # (the value reaches the kept dim: give it one there)
                    value = call("call_method", "unsqueeze", (value, k - (r - p)))
            out = call("call_function", operator.setitem, (base, subscript, value))
            out.meta["example_value"] = node.meta.get("example_value")
            node.replace_all_uses_with(out)
    graph.erase_node(node)
