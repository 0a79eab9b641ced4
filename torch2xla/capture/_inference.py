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
"""

from __future__ import annotations

import operator

import torch

from torch2xla.capture._wrappers import shares_memory

_ENTER = torch.autograd.grad_mode._enter_inference_mode
_EXIT = torch.autograd.grad_mode._exit_inference_mode


def inference_outputs(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """The positions of the Dynamo graph ``gm``'s outputs that eager makes as inference
    tensors (inside an inference-mode block of the graph, or views of such tensors)."""
    if not gm.graph.find_nodes(op="call_function", target=_ENTER):
        return ()
    modes: list[bool] = []  # (the blocks entered, innermost last: their mode)
    made: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
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
    (out,) = gm.graph.find_nodes(op="output")
    values = out.args[0] if isinstance(out.args[0], list | tuple) else (out.args[0],)
    return tuple(i for i, v in enumerate(values) if isinstance(v, torch.fx.Node) and v in made)


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
