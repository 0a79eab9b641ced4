"""Example values Dynamo marks as requiring grad where eager's cannot: a tensor an op makes
under ``no_grad`` (new memory, not a view or an in-place write of its argument) never requires
grad in eager, but Dynamo's example value of ``F.pad``/``torch.constant_pad_nd`` (torch
2.11-2.13) made under ``no_grad`` is a leaf that requires grad. The backend reads outputs'
``requires_grad`` from the example values: the compiled ``nn.ZeroPad2d`` under ``no_grad``
returned an output that required grad and recorded a training node.

``untrack_no_grad_values(gm)`` sets such example values' ``requires_grad`` to False, before
anything reads them.
"""

from __future__ import annotations

import operator

import torch
from torch.fx.node import map_aggregate

from torch2xla.capture._written import traced_grad_mode

# (not modules and higher-order ops: a body of their own may enable grad inside)
_CALLS = ("call_function", "call_method")


def _tensors(tree) -> list[torch.Tensor]:
    found: list = []
    map_aggregate(tree, lambda a: found.append(a) if isinstance(a, torch.Tensor) else None)
    return found


def _storage(t: torch.Tensor):
    # (functorch's wrappers, inside ``torch.func`` transforms, have no storage to compare)
    if t.layout != torch.strided or torch._C._functorch.is_functorch_wrapped_tensor(t):
        return None
    return t.untyped_storage()._cdata


def _argument_storages(node: torch.fx.Node) -> set | None:
    """The storages of ``node``'s tensor arguments' example values; None where one has none
    (a non-strided tensor: nothing can be said)."""
    storages = set()
    for arg in node.all_input_nodes:
        for t in _tensors(arg.meta.get("example_value")):
            s = _storage(t)
            if s is None:
                return None
            storages.add(s)
    return storages


def untrack_no_grad_values(gm: torch.fx.GraphModule) -> None:
    """Clear ``requires_grad`` on example values that eager's autograd cannot make require
    grad: leaves an op makes where grad is off, in memory none of its arguments hold (not a
    view, not an in-place write), not asked to (a factory's ``requires_grad=True``)."""
    for node in gm.graph.nodes:
        if node.op not in _CALLS or node.target is operator.getitem:
            continue
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            continue
        if node.kwargs.get("requires_grad"):
            continue
        made = [
            t
            for t in _tensors(node.meta.get("example_value"))
            # (views first: they share their argument's memory, and a view made under
            # no_grad whose base was written with grad refuses ``is_leaf``)
            if t.requires_grad and not t._is_view() and t.is_leaf and _storage(t) is not None
        ]
        if not made or traced_grad_mode(node):
            continue
        storages = _argument_storages(node)
        if storages is None:
            continue
        for t in made:
            if _storage(t) not in storages:
                t.requires_grad_(False)
