"""Errors eager raises for adaptive pooling and resampling ops in the ATen graph with nothing
to read or write, which their meta kernels skip (``nn.AdaptiveAvgPool2d`` of an input with an
empty spatial dimension: "Expected input to have non-zero size for non-batch dimensions";
``upsample_*`` from or to an empty size: "Input and output sizes should be greater than 0").
In torch2xla's frames the user's call is a graph break already (``capture/_empty_calls``);
these checks hold where it is not (``fullgraph=True``), for the ops that reach the graph.

``EMPTY_CHECKS`` (merged into ``_arg_checks.CHECKS``) asks eager itself: where the input, the
output or a size argument has a zero, the op is called on an empty CPU tensor of the input's
shape and dtype (no data to read where the input is empty; one compile-time call otherwise).
"""

from __future__ import annotations

import math

import torch
from torch._ops import ops

aten = ops.aten


def _shape(t) -> tuple[int, ...] | None:
    shape = tuple(t.shape)
    return shape if all(isinstance(s, int) for s in shape) else None


def _eager_rejects(op: torch._ops.OpOverload, kwargs: dict, name: str, shape: tuple, dtype):
    args = {}
    for k, v in kwargs.items():
        if isinstance(v, torch.fx.Node | torch.Tensor) and k != name:
            return None  # (another tensor argument: not a call this check knows)
        args[k] = v
    # (outside the modes of an export in progress: a real call, not a traced one)
    with torch.utils._python_dispatch._disable_current_modes():
        args[name] = torch.empty(shape, dtype=dtype, device="cpu")
        try:
            op(**args)
        except (RuntimeError, ValueError) as e:
            return str(e)
    return None


def _empty_sizes(op: torch._ops.OpOverload, name: str):
    """A checker of ``op`` (input argument ``name``) by eager, where something is empty: the
    input, the output (``node``'s value), an ``output_size`` or the sizes ``scale_factors``
    give."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        x = kwargs.get(name)
        if isinstance(x, torch.fx.Node):
            x = x.meta.get("val")
        if not isinstance(x, torch.Tensor) or (shape := _shape(x)) is None:
            return None
        empty = 0 in shape
        out = node.meta.get("val") if node is not None else None
        if isinstance(out, tuple | list):
            out = out[0] if out else None
        if isinstance(out, torch.Tensor) and 0 in out.shape:
            empty = True
        sizes = kwargs.get("output_size")
        if isinstance(sizes, list | tuple) and any(isinstance(s, int) and s <= 0 for s in sizes):
            empty = True
        scales = kwargs.get("scale_factors") or ()
        spatial = shape[len(shape) - len(scales) :] if scales else ()
        if any(math.floor(n * s) <= 0 for n, s in zip(spatial, scales)):
            empty = True
        if not empty:
            return None
        return _eager_rejects(op, kwargs, name, shape, x.dtype)

    return checker


_OPS = [
    aten._adaptive_avg_pool2d.default,
    aten._adaptive_avg_pool3d.default,
    aten.adaptive_max_pool2d.default,
    aten.adaptive_max_pool3d.default,
]
for _name in (
    "upsample_nearest1d",
    "upsample_nearest2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "upsample_bicubic2d",
    "upsample_trilinear3d",
    "_upsample_bilinear2d_aa",
    "_upsample_bicubic2d_aa",
):
    _packet = getattr(aten, _name)
    for _overload in ("default", "vec"):
        if _overload in _packet.overloads():
            _OPS.append(getattr(_packet, _overload))

# (the input is the schema's first argument: ``self``, ``input`` in the ``vec`` overloads)
EMPTY_CHECKS = {op: _empty_sizes(op, op._schema.arguments[0].name) for op in _OPS}

__all__ = ["EMPTY_CHECKS"]
