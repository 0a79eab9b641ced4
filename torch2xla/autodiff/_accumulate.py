"""The order in which eager's backward accumulates the gradients of a graph's leaves, and the
chain that makes autograd accumulate ours in that order where hooks could tell.

Eager's autograd engine runs the ready nodes of a backward from a priority queue (a
``std::priority_queue``) ordered by the nodes' sequence numbers, the latest made first; a
leaf's ``AccumulateGrad`` node has the largest number there is, so it runs as soon as its
gradient is complete. The leaves' ``.grad`` are thus written, and their post-accumulate-grad
hooks and tensor hooks fire, in the order their gradients complete in eager's backward: the last
layer's bias before its weight, the last layer before the first.

Our program's node returns every gradient at once: autograd then runs all the accumulators
together, in an order of its heap that follows no layer. Where a leaf of the program has a
hook (``register_post_accumulate_grad_hook``, ``register_hook``), the call is chained as a
split backward's is (``_release.Gate``): one gate per leaf after the first, in eager's order, so
that each accumulator runs alone, right after its gate (hooks that read other parameters'
``.grad``, or step an optimizer per parameter, see what they see in eager). A split backward
chains these gates instead of its own per segment (whose order is the segments'), each gate
running the segments its leaf needs; so does a first call whose split is not decided yet.
Without hooks no gate is made: the order is invisible then, and gates cost a node each per
call.

The order comes from the Dynamo graph's example values, which carry eager's autograd graph with
its sequence numbers (as ``_connected`` uses them): the engine's queue is replayed on it for a
backward from every output at once, ties broken as libstdc++'s heap breaks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from torch2xla.autodiff._connected import gradient_edge, graph_values

# ``AccumulateGrad``'s sequence number (UINT64_MAX): it runs before any other ready node.
_LAST = (1 << 64) - 1


def _seq(node) -> int:
    return node._sequence_nr()


def _push(heap: list, node) -> None:
    """libstdc++'s ``push_heap`` with autograd's comparison (a larger sequence number first)."""
    heap.append(node)
    hole = len(heap) - 1
    key = _seq(node)
    while hole > 0:
        parent = (hole - 1) // 2
        if _seq(heap[parent]) < key:
            heap[hole] = heap[parent]
            hole = parent
        else:
            break
    heap[hole] = node


def _pop(heap: list):
    """libstdc++'s ``pop_heap`` (``__adjust_heap`` then ``__push_heap``): which node of equal
    sequence numbers comes first is the heap's, not the order they were pushed in."""
    top = heap[0]
    value = heap.pop()
    n = len(heap)
    if not n:
        return top
    hole = second = 0
    while second < (n - 1) // 2:
        second = 2 * (second + 1)
        if _seq(heap[second]) < _seq(heap[second - 1]):
            second -= 1
        heap[hole] = heap[second]
        hole = second
    if n % 2 == 0 and second == (n - 2) // 2:
        second = 2 * (second + 1)
        heap[hole] = heap[second - 1]
        hole = second - 1
    key = _seq(value)
    parent = (hole - 1) // 2
    while hole > 0 and _seq(heap[parent]) < key:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value
    return top


def eager_order(outputs: Sequence[Any], inputs: Sequence[Any]) -> tuple[int, ...] | None:
    """The positions of the leaves among ``inputs`` (tensors that require grad and have no
    ``grad_fn``) in the order eager's backward from every output that requires grad (at once)
    accumulates their gradients; leaves it does not reach are left out. None where some
    output or leaf has no autograd node to follow."""
    keep: list = []  # (nodes are keyed by id(): kept alive while the walk runs)
    accumulators: dict[int, int] = {}
    for k, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is None:
            node = gradient_edge(t).node
            keep.append(node)
            accumulators[id(node)] = k
    roots = []
    for o in outputs:
        if isinstance(o, torch.Tensor) and o.requires_grad:
            if o.grad_fn is None and o._base is not None:
                return None
            roots.append(gradient_edge(o).node)
    keep.extend(roots)
    # every edge a node receives a gradient along, counted as the engine counts them
    deps: dict[int, int] = {}
    stack = list(roots)
    for node in roots:
        deps[id(node)] = deps.get(id(node), 0) + 1
    seen = {id(n) for n in roots}
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            deps[id(nxt)] = deps.get(id(nxt), 0) + 1
            if id(nxt) not in seen:
                seen.add(id(nxt))
                keep.append(nxt)
                stack.append(nxt)
    heap: list = []
    order: list[int] = []
    for node in roots:  # (the engine's root node hands each output its gradient)
        deps[id(node)] -= 1
        if not deps[id(node)]:
            _push(heap, node)
    while heap:
        node = _pop(heap)
        k = accumulators.get(id(node))
        if k is not None:
            order.append(k)
        for nxt, _ in node.next_functions:
            if nxt is None:
                continue
            deps[id(nxt)] -= 1
            if not deps[id(nxt)]:
                _push(heap, nxt)
    del keep
    return tuple(order)


def example_order(gm: torch.fx.GraphModule) -> tuple[int, ...] | None:
    """``eager_order`` of the Dynamo graph ``gm``'s placeholders, from its example values
    (None where some value is missing)."""
    found = graph_values(gm)
    return None if found is None else eager_order(found[1], found[0])


def ordered_groups(diff_in: Sequence[int], order: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """The chain's groups of positions in ``diff_in`` (``_release.Chain``) that hand the
    gradients of the program inputs ``order`` to autograd one by one in that order: the first
    group holds the first of them and every other input (not leaves, or leaves no output
    reaches); () where fewer than two are differentiated."""
    where = {k: p for p, k in enumerate(diff_in)}
    ordered = [where[k] for k in order if k in where]
    if len(ordered) < 2:
        return ()
    rest = tuple(p for p in range(len(diff_in)) if p not in set(ordered))
    return ((*rest, ordered[0]), *((p,) for p in ordered[1:]))
