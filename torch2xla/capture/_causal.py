"""Attention masks that are the causal mask, handed to sdpa as ``is_causal=True`` instead.

Under ``torch.compile`` transformers builds the causal mask as a tensor (with torch before
2.14 it never skips it while tracing): every layer's attention then reads a (B, 1, T, T) mask
or additive bias, and cuDNN's fused attention computes the whole score matrix with the bias
and a gradient for it, where ``is_causal`` lets it skip the blocks above the diagonal.

``causal_masks`` evaluates, once per signature, each mask of a ``torch2xla::sdpa`` or
``sdpa_dropout`` node that is computed from constants only (no graph input, no random op, no
symbolic size), and where it is exactly the causal pattern over the square score matrix (True,
or 0, on and below the diagonal; False, -inf or the dtype's lowest value above it; the same for
every batch and head), the node gets ``attn_mask=None, is_causal=True``. Both give the same
softmax: a masked score adds 0 to the sum of exponentials either way, and every causal row
keeps its diagonal. Any other mask is left as it is.
"""

from __future__ import annotations

import operator

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import unset_fake_temporarily

# Elements above which a mask (or a value computed on the way to it) is not evaluated.
MAX_NUMEL = 1 << 26

_ARGS = {  # target name -> (position of attn_mask, position of is_causal)
    "sdpa": (3, 4),
    "sdpa_dropout": (3, 5),
}


def causal_masks(gm: torch.fx.GraphModule) -> None:
    """Rewrite the sdpa nodes of ``gm`` whose constant mask is causal (see the module)."""
    changed = False
    values: dict[torch.fx.Node, torch.Tensor | None] = {}  # every layer reads the same mask
    for node in gm.graph.nodes:
        positions = _positions(node)
        if positions is None:
            continue
        mask_pos, causal_pos = positions
        mask = node.args[mask_pos]
        if not isinstance(mask, torch.fx.Node) or node.args[causal_pos] is not False:
            continue
        if mask not in values:
            values[mask] = _evaluate(gm, mask)
        value = values[mask]
        if value is None or not _is_causal(value, node):
            continue
        args = list(node.args)
        args[mask_pos], args[causal_pos] = None, True
        node.args = tuple(args)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        gm.recompile()


def _positions(node: torch.fx.Node) -> tuple[int, int] | None:
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    if node.target.namespace != "torch2xla":
        return None
    return _ARGS.get(node.target._opname)


def _evaluate(gm: torch.fx.GraphModule, mask: torch.fx.Node) -> torch.Tensor | None:
    """The value of ``mask`` where it depends on constants only; else None."""
    order: list[torch.fx.Node] = []
    seen: set[torch.fx.Node] = set()
    stack = [(mask, False)]
    while stack:  # post-order walk of the mask's inputs
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        if not _constant_op(gm, node):
            return None
        stack.append((node, True))
        stack.extend((n, False) for n in node.all_input_nodes)
    values: dict[torch.fx.Node, object] = {}
    with unset_fake_temporarily():
        for node in order:
            if node.op == "get_attr":
                values[node] = operator.attrgetter(node.target)(gm)
                continue
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
            values[node] = node.target(*args, **kwargs)
    out = values[mask]
    return out if isinstance(out, torch.Tensor) else None


def _constant_op(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    """Whether ``node`` computes a value from its inputs alone, at a small enough size."""
    if node.op == "get_attr":
        return isinstance(operator.attrgetter(node.target)(gm), torch.Tensor)
    if node.op != "call_function":
        return False
    if node.target is not operator.getitem:
        if not isinstance(node.target, torch._ops.OpOverload):
            return False
        if torch.Tag.nondeterministic_seeded in node.target.tags or node.target._schema.is_mutable:
            return False
    leaves = pytree.tree_leaves((node.args, node.kwargs))
    if any(isinstance(a, torch.SymInt | torch.SymFloat | torch.SymBool) for a in leaves):
        return False
    val = node.meta.get("val")
    vals = val if isinstance(val, list | tuple) else [val]
    for v in vals:
        if isinstance(v, torch.Tensor) and (
            any(not isinstance(s, int) for s in v.shape) or v.numel() > MAX_NUMEL
        ):
            return False
    return True


def _is_causal(mask: torch.Tensor, node: torch.fx.Node) -> bool:
    """Whether ``mask`` is the causal mask of ``node``'s square score matrix."""
    query, key = (node.args[i].meta.get("val") for i in (0, 1))
    if not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor):
        return False
    T, S = query.shape[-2], key.shape[-2]
    if T != S or mask.ndim < 2 or mask.shape[-2:] != (T, S) or mask.ndim > query.ndim:
        return False
    keep = torch.ones(T, S, dtype=torch.bool, device=mask.device).tril()
    if mask.dtype == torch.bool:
        return bool((mask == keep).all())
    if not mask.dtype.is_floating_point:
        return False
    lowest = torch.finfo(mask.dtype).min
    dropped = (mask == float("-inf")) | (mask == lowest)
    return bool(((mask == 0) == keep).all()) and bool((dropped == ~keep).all())
