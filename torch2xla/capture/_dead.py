"""Checks of dead ops: eager raises for bad values even where nothing reads the result.

Eager runs every op of the user's code: ``y = x.clone(); y[bad] = 0`` raises its IndexError
even when ``y`` is never used again, and so do a dead ``gather``, ``embedding`` or integer
``// 0``. The ATen export removes dead ops, and with them our runtime checks
(``ops/_bounds.py``). So before the export each value of the Dynamo graph that nothing reads
(and each tensor a ``setitem`` writes) is read by ``torch2xla::keep``, which fx's dead-code
elimination keeps; after the export, ``prune_kept`` removes every ``keep`` whose dead values
hold no op that checks values (``_bounds.checks_values``) and the dead ops with it. A graph
without such dead ops thus ends as the export alone makes it; one with them keeps the checking
ops, whose values XLA then drops, keeping their checks.
"""

from __future__ import annotations

import operator

import torch

from torch2xla.ops import _bounds

_KEEP = torch.ops.torch2xla.keep.default


def _kept(node: torch.fx.Node) -> torch.fx.Node | None:
    """The tensor of the Dynamo graph's ``node`` to keep computed, if nothing reads it."""
    if node.op not in ("call_function", "call_method"):
        return None
    if node.op == "call_function" and node.target is operator.setitem:
        target = node.args[0]
        value = target.meta.get("example_value") if isinstance(target, torch.fx.Node) else None
        return target if isinstance(value, torch.Tensor) and not _differentiated(value) else None
    value = node.meta.get("example_value")
    if node.users or not _tensors(value) or any(_differentiated(v) for v in _tensors(value)):
        return None
    return node


def _tensors(value) -> list:
    """``value`` as the list of tensors ``keep`` reads: a tensor, or the tensors of a tuple a
    call returns (``torch.linalg.inv_ex(a, check_errors=True)``, ``torch.sort``)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if (
        isinstance(value, tuple | list)
        and value
        and all(isinstance(v, torch.Tensor) for v in value)
    ):
        return list(value)
    return []


def _differentiated(value: torch.Tensor) -> bool:
    """A value inside a ``torch.func.grad``-like transform: not kept, ``keep`` returns
    nothing, so it can have no autograd formula, which such a transform requires of every op
    on its values (so a dead check there is not raised)."""
    while torch._C._functorch.is_functorch_wrapped_tensor(value):
        if torch._C._functorch.is_gradtrackingtensor(value):
            return True
        value = torch._C._functorch.get_unwrapped(value)
    return False


def keep_dead(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy in which the values nothing reads are kept by ``torch2xla::keep``
    (``gm`` itself is never changed)."""
    if not any(_kept(n) is not None for n in gm.graph.nodes):
        return gm
    graph = torch.fx.Graph()
    env: dict = {}
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
        kept = _kept(node)
        if kept is None:
            continue
        meta = {k: v for k, v in node.meta.items() if k != "example_value"}
        value = kept.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            values = [env[kept]]
        else:  # (the tuple's tensors, each read by a getitem)
            values = [
                graph.call_function(operator.getitem, (env[kept], k)) for k in range(len(value))
            ]
            for k, item in enumerate(values):
                item.meta = {**meta, "example_value": value[k]}
        keep = graph.call_function(_KEEP, (values,))
        keep.meta = meta
    new = torch.fx.GraphModule(gm, graph)
    new.meta.update(gm.meta)
    return new


def prune_kept(gm: torch.fx.GraphModule) -> None:
    """Remove from the exported ``gm`` each ``torch2xla::keep`` whose dead values no op that
    checks values computes, and the ops only it kept."""
    keeps = gm.graph.find_nodes(op="call_function", target=_KEEP)
    if not keeps:
        return
    graph = gm.graph
    roots = [
        n
        for n in graph.nodes
        if n.op == "output" or (n.op == "call_function" and n.target is not _KEEP and n.is_impure())
    ]
    live = _reached(roots, set())
    pruned = False
    for keep in keeps:
        dead = _reached(keep.all_input_nodes, live)
        if any(_bounds.checks_values(n) for n in dead):
            live |= dead
        else:
            graph.erase_node(keep)
            pruned = True
    if pruned:
        graph.eliminate_dead_code()
        gm.recompile()


def _reached(starts, stop: set) -> set:
    """The nodes ``starts`` read, directly or not (themselves included), short of ``stop``."""
    seen: set = set()
    todo = [n for n in starts if n not in stop]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(n for n in node.all_input_nodes if n not in stop and n not in seen)
    return seen
