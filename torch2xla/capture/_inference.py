"""Outputs eager makes as inference tensors: those a ``with torch.inference_mode():`` block
inside the compiled code creates.

Dynamo records the block as ``_enter_inference_mode(True)``/``_exit_inference_mode`` calls
and makes its example values outside inference mode (none is an inference tensor), and the
program's outputs are ordinary tensors. Eager's tensors made in inference mode are inference
tensors (``is_inference()``, no version counter, no autograd; an in-place change of one
outside inference mode raises), except views of ordinary tensors; a view of an inference
tensor is one wherever it is made. ``inference_outputs`` tells the graph's outputs that are,
and the entry gives the user those outputs as inference tensors (``as_inference``: the same
memory, no copy).

Eager never tracks a tensor made in inference mode, even under ``torch.enable_grad()`` inside
the block, where Dynamo's example value requires grad: ``untrack_inference_values`` detaches
those example values before the backend reads outputs' ``requires_grad`` (the output
required grad and had no gradient). The export sees no inference-mode block
(``inference_as_grad_mode``): AOT cannot functionalize some ops in one (``x.detach()``:
"Cannot set version_counter for inference tensor"), and its failed trace left the thread in
inference mode, so the eager run it fell back to raised "Inference tensors cannot be saved
for backward" from the user's next op outside the block.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch.fx.node import map_aggregate

from torch2xla.capture._wrappers import shares_memory

_ENTER = ENTER_INFERENCE = torch.autograd.grad_mode._enter_inference_mode
_EXIT = EXIT_INFERENCE = torch.autograd.grad_mode._exit_inference_mode


def inference_outputs(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """The positions of the Dynamo graph ``gm``'s outputs that eager makes as inference
    tensors (inside an inference-mode block of the graph, or views of such tensors)."""
    made = _made(gm)
    (out,) = gm.graph.find_nodes(op="output")
    values = out.args[0] if isinstance(out.args[0], list | tuple) else (out.args[0],)
    return tuple(i for i, v in enumerate(values) if isinstance(v, torch.fx.Node) and v in made)


def leaves_inference_mode(gm: torch.fx.GraphModule) -> bool:
    """Whether the Dynamo graph ``gm`` has an ``inference_mode(False)`` block (in which eager
    tracks tensors even where the call is in inference mode)."""
    return any(
        n.args[:1] == (False,) for n in gm.graph.find_nodes(op="call_function", target=_ENTER)
    )


def untrack_inference_values(gm: torch.fx.GraphModule) -> None:
    """Example values of the Dynamo graph ``gm`` that eager makes as inference tensors (which
    never require grad) but that require grad (made under ``enable_grad()`` inside the
    block): replaced by their detached aliases (the same memory), before anything reads
    them."""

    def untracked(v):
        return v.detach() if isinstance(v, torch.Tensor) and v.requires_grad else v

    for node in _made(gm):
        example = node.meta.get("example_value")
        if any(isinstance(t, torch.Tensor) and t.requires_grad for t in _leaves(example)):
            node.meta["example_value"] = map_aggregate(example, untracked)


def _leaves(tree) -> list:
    found: list = []
    map_aggregate(tree, found.append)
    return found


def inference_as_grad_mode(gm: torch.fx.GraphModule, grad_enabled: bool) -> torch.fx.GraphModule:
    """``gm``, or a copy of it whose inference-mode blocks are the grad-mode switches eager
    makes at their ends (``inference_mode()`` turns grad off, ``inference_mode(False)`` on;
    leaving one sets back the mode before it), for the export (traced with ``gm`` called in
    ``grad_enabled``). What eager tracks in them is in the example values, which the stop
    points of ``_stop_gradient`` read (``untrack_inference_values``)."""
    if not gm.graph.find_nodes(op="call_function", target=_ENTER):
        return gm
    graph = copy.deepcopy(gm.graph)
    mode, before = grad_enabled, []
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch._C._set_grad_enabled:
            mode = bool(node.args[0])
        elif node.target is _ENTER:
            before.append(mode)
            mode = not (bool(node.args[0]) if node.args else True)
            switch = mode
        elif node.target is _EXIT:
            mode = switch = before.pop() if before else grad_enabled
        else:
            continue
        with graph.inserting_before(node):
            graph.call_function(torch._C._set_grad_enabled, (switch,))
    for target in (_EXIT, _ENTER):  # (each exit reads its enter: erased first)
        for node in graph.find_nodes(op="call_function", target=target):
            graph.erase_node(node)
    new = torch.fx.GraphModule(gm, graph)
    new.meta.update(gm.meta)
    return new


def _made(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes of ``gm`` whose values eager makes as inference tensors."""
    return inference_nodes(gm)[0]


def inference_nodes(gm: torch.fx.GraphModule) -> tuple[set[torch.fx.Node], set[torch.fx.Node]]:
    """The nodes of the Dynamo graph ``gm`` whose values eager makes as inference tensors,
    and the nodes that run in inference mode (whose ops autograd never records)."""
    if not gm.graph.find_nodes(op="call_function", target=_ENTER):
        return set(), set()
    modes: list[bool] = []  # (the blocks entered, innermost last: their mode)
    made: set[torch.fx.Node] = set()
    inside: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if modes and modes[-1]:
            inside.add(node)
        if node.op == "call_function" and node.target is _ENTER:
            modes.append(bool(node.args[0]) if node.args else True)
            continue
        if node.op == "call_function" and node.target is _EXIT:
            if modes:
                modes.pop()
            continue
        if node.op not in ("call_function", "call_method"):
            continue
        example = node.meta.get("example_value")
        if not isinstance(example, torch.Tensor | list | tuple):
            continue
        base = _viewed(node, example)
        if base is not None:  # (a view: inference where its base is, in any mode)
            if base in made:
                made.add(node)
        elif node.target is operator.getitem:
            if node.args and node.args[0] in made:
                made.add(node)
        elif modes and modes[-1] and not _in_place(node):
            made.add(node)
    return made, inside


def _viewed(node: torch.fx.Node, example) -> torch.fx.Node | None:
    """The input ``node`` is a view of (its example value shares an input's storage), or
    None."""
    if not isinstance(example, torch.Tensor) or example.layout != torch.strided:
        return None
    for a in node.all_input_nodes:
        ex = a.meta.get("example_value")
        # (inside torch.vmap the values are functorch wrappers, without storage of their own;
        # the value vmap returns, ``_remove_batch_dim``, is the memory inside one)
        if isinstance(ex, torch.Tensor) and shares_memory(example, ex, across_levels=True):
            return a
    return None


def _in_place(node: torch.fx.Node) -> bool:
    """Whether ``node`` writes its first argument and returns it (``x.add_(1)``: the same
    tensor, inference or not as it was)."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("_") or "out" in node.kwargs


def as_inference(t: torch.Tensor) -> torch.Tensor:
    """``t``'s memory as an inference tensor (made in inference mode: no copy)."""
    if t.is_inference():
        return t
    with torch.inference_mode():
        out = torch.empty(0, dtype=t.dtype, device=t.device)
        return out.set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
