"""Inputs that make a graph run in eager PyTorch: tensors XLA cannot take.

- Tensor subclasses with ``__torch_dispatch__`` (``TwoTensor``, ``DTensor``; the graph's own
  parameters included): their ops are the subclass's Python code, which the export to ATen
  does not take.
- Tensors on a device JAX has no client for (``meta``, ``mps``, ``xpu``; the graph's own
  parameters and buffers, and the tensors it makes, included): eager runs them (a meta
  model's shapes, ``model.to_empty(device="meta")``), where the program could not be placed.
  A CPU 0-d tensor beside CUDA ones is no such input: the program runs on the GPU and takes
  it as a number (``runtime/_interop.program_device``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from torch2xla._errors import Unsupported

# The devices XLA runs (``runtime/_interop.jax_device``).
XLA_DEVICES = frozenset({"cpu", "cuda"})


def eager_inputs(gm: torch.fx.GraphModule, names: Sequence[str], args: Sequence) -> list:
    """``Unsupported`` entries for the inputs of the Dynamo graph ``gm`` (named ``names``,
    passed ``args``) and its held tensors that XLA cannot take; such graphs run in eager."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    found = [
        Unsupported(node, why)
        for node, name, a in zip(placeholders, names, args)
        for why in [_why(name, a)]
        if why is not None
    ]
    first = next((n for n in gm.graph.nodes if n.op == "call_function"), None)
    if first is None:
        return found
    held = itertools.chain(gm.named_parameters(), gm.named_buffers())
    found += [Unsupported(first, why) for name, t in held for why in [_why(name, t)] if why]
    if found:
        return found
    # (the tensors it makes from others: ``torch.ones(3, device="meta")``; one per device)
    made: dict[str, Unsupported] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and value.device.type not in XLA_DEVICES:
            why = f"makes a tensor on {value.device.type}, {_DEVICES}"
            made.setdefault(value.device.type, Unsupported(node, why))
    return list(made.values())


def _why(name: str, value) -> str | None:
    if not isinstance(value, torch.Tensor):
        return None
    if is_traceable_wrapper_subclass(value):
        return (
            f"input {name!r} is a {type(value).__name__}, a tensor subclass with "
            "__torch_dispatch__ (XLA runs plain tensors)"
        )
    if value.device.type not in XLA_DEVICES:
        return f"input {name!r} is on {value.device.type}, {_DEVICES}"
    return None


_DEVICES = "a device XLA does not run (it runs cpu and cuda)"
