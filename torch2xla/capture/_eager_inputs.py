"""Inputs that make a graph run in eager PyTorch: tensors XLA cannot take.

- Tensor subclasses with ``__torch_dispatch__`` (``TwoTensor``, ``DTensor``, jagged nested
  tensors; the graph's own parameters included, and the ones the graph makes from plain
  tensors: ``torch.nested.as_nested_tensor(..., layout=torch.jagged)``): their ops are the
  subclass's Python code, which the export to ATen does not take.
- Tensors of a layout other than strided (sparse COO/CSR, strided nested) and quantized
  tensors, inputs or made: XLA holds dense arrays. (Dynamo itself stops its graph at most of
  them today; this check keeps a graph that holds one from reaching the export.)
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
    passed ``args``), its held tensors and the tensors it makes that XLA cannot take; such
    graphs run in eager. Checked before anything else reads the graph's example values (a
    jagged tensor's sizes are nested ints, which have no value)."""
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
    # (the tensors it makes from others: ``torch.ones(3, device="meta")``,
    # ``x.to_sparse()``; one per device or kind, the first node that makes it)
    made: dict[str, Unsupported] = {}
    returned = set(gm.graph.output_node().all_input_nodes)
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        for value in _tensors(node.meta.get("example_value")):
            kind = _kind(value)
            # (a subclass the graph makes and unwraps, ``TwoTensor(x, y).sin().a``, exports
            # as the plain ops of its __torch_dispatch__; returned, or jagged, it does not)
            inner = is_traceable_wrapper_subclass(value) and not value.is_nested
            if kind is not None and not (inner and node not in returned):
                made.setdefault(kind, Unsupported(node, f"makes {kind} ({_HOLDS})"))
            elif value.device.type not in XLA_DEVICES:
                why = f"makes a tensor on {value.device.type}, {_DEVICES}"
                made.setdefault(value.device.type, Unsupported(node, why))
    return list(made.values())


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _kind(t: torch.Tensor) -> str | None:
    """What ``t`` is where it is no plain dense tensor (in words), else None."""
    if is_traceable_wrapper_subclass(t):
        what = "a jagged nested tensor" if t.is_nested else f"a {type(t).__name__}"
        return f"{what}, a tensor subclass with __torch_dispatch__"
    if t.layout != torch.strided:
        return f"a tensor of layout {str(t.layout).removeprefix('torch.')}"
    if t.is_quantized:
        return f"a quantized tensor ({str(t.dtype).removeprefix('torch.')})"
    return None


def _why(name: str, value) -> str | None:
    if not isinstance(value, torch.Tensor):
        return None
    kind = _kind(value)
    if kind is not None:
        return f"input {name!r} is {kind} ({_HOLDS})"
    if value.device.type not in XLA_DEVICES:
        return f"input {name!r} is on {value.device.type}, {_DEVICES}"
    return None


_HOLDS = "XLA runs plain dense tensors"
_DEVICES = "a device XLA does not run (it runs cpu and cuda)"
