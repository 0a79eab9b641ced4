"""Resampling and adaptive pooling with nothing to read or write: eager refuses them, their
fake run does not. ``F.interpolate`` from or to an empty size ("Input and output sizes should
be greater than 0"), ``nn.AdaptiveAvgPool2d`` of an input with an empty spatial dimension
("Expected input to have non-zero size for non-batch dimensions"): Dynamo's fake run traced
them, and the compiled call returned a value (or failed in a lowering of the decomposition,
with words of its own) where eager raised.

``refused(node, result)`` is eager's error for such a call traced in torch2xla's frames (where
an input or the fake result has a zero in its shape): the call made again in eager on empty
tensors of the same shapes and dtypes (no data to read where the input is empty; one call at
trace time otherwise). ``_fake_errors`` makes it the graph break at the call, so eager runs it
and raises its own error from the user's line.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable

import torch
import torch.nn.functional as F
from torch.fx.node import map_arg
from torch.utils._pytree import tree_leaves, tree_map


@functools.cache
def _callables() -> frozenset:
    """The calls Dynamo keeps whole in its graph whose eager kernels refuse empty sizes."""
    names = [
        "interpolate",
        "upsample",
        "upsample_nearest",
        "upsample_bilinear",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_avg_pool3d",
        "adaptive_max_pool1d",
        "adaptive_max_pool2d",
        "adaptive_max_pool3d",
        "adaptive_max_pool1d_with_indices",
        "adaptive_max_pool2d_with_indices",
        "adaptive_max_pool3d_with_indices",
    ]
    found = {getattr(F, n) for n in names if hasattr(F, n)}
    found |= {getattr(torch, n) for n in ("adaptive_avg_pool1d", "adaptive_max_pool1d")}
    found |= {
        getattr(torch._C._nn, n)
        for n in dir(torch._C._nn)
        if n.startswith(("upsample_", "_upsample_", "adaptive_"))
    }
    return frozenset(found)


def _static_empty(t) -> bool | None:
    """Whether ``t`` (a fake tensor) has a zero in its shape; None where a size is symbolic."""
    if not all(isinstance(s, int) for s in t.shape):
        return None
    return 0 in t.shape


def refused(node: torch.fx.Node, result) -> Exception | None:
    """Eager's error for the call ``node`` (its fake ``result``) where it refuses an empty
    input or output size; None where it takes it or nothing is empty."""
    if node.op != "call_function" or not isinstance(node.target, Hashable):
        return None  # (a user's callable object may define ``__eq__`` without ``__hash__``)
    if node.target not in _callables():
        return None
    args, kwargs = map_arg((node.args, node.kwargs), lambda n: n.meta.get("example_value"))
    tensors = [t for t in tree_leaves((args, kwargs, result)) if isinstance(t, torch.Tensor)]
    empties = [_static_empty(t) for t in tensors]
    if None in empties or not any(empties):
        return None

    def real(a):
        if not isinstance(a, torch.Tensor):
            return a
        return torch.empty(tuple(a.shape), dtype=a.dtype, device="cpu")

    # (outside the fake mode of the trace: a real call)
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        args, kwargs = tree_map(real, (args, kwargs))
        try:
            node.target(*args, **kwargs)
        except (RuntimeError, ValueError, IndexError, NotImplementedError) as e:
            return e
    return None
