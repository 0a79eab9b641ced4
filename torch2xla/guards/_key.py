"""The per-call cache key: only what Dynamo does not already guard."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch2xla._lower import scalar_placeholders


def _is_symbolic(value) -> bool:
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in value.shape)
    return False


class SignatureKey:
    """Computes the cache key of one call of a Dynamo graph.

    Dynamo guards every static property of the graph's inputs (dtype, device, requires_grad,
    static sizes and strides) and the grad mode, so one Dynamo graph sees a single value of
    each. What varies between calls of the same graph is the dynamic part only: the sizes of
    tensors with symbolic dims and the values of SymInt inputs. The key holds just those, which
    makes it nearly free for static graphs. Inputs without Dynamo metadata are keyed in full.
    """

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        shapes, values = [], []
        for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
            ex = node.meta.get("example_value", node.meta.get("val"))
            if ex is None:
                values.append(i)
            elif isinstance(ex, torch.Tensor):
                if _is_symbolic(ex):
                    shapes.append(i)
            else:
                values.append(i)
        self.shape_pos = tuple(shapes)
        self.value_pos = tuple(values)
        # 0-d tensors holding Python scalars are specialized by value when lowering.
        self.scalar_pos = scalar_placeholders(gm)

    def __call__(self, args: Sequence) -> tuple:
        key: list = [torch.is_grad_enabled()]
        for i in self.shape_pos:
            a = args[i]
            key.append(tuple(a.shape) if isinstance(a, torch.Tensor) else None)
        for i in self.value_pos:
            a = args[i]
            key.append(
                (tuple(a.shape), a.dtype, a.device, a.requires_grad)
                if isinstance(a, torch.Tensor)
                else (type(a), a)
            )
        for i in self.scalar_pos:
            key.append(args[i].item())
        return tuple(key)
