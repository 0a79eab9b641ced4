"""Warnings eager's kernels issue from an op's shapes and constant arguments (``TORCH_WARN`` in
C++), which tracing never runs: ``var``, ``std``, ``var_mean`` and ``std_mean`` past their
degrees of freedom ("var(): degrees of freedom is <= 0. ...", where the reduced count minus
``correction`` is not positive; twice for a complex input, whose real and imaginary parts eager
reduces apart); a write through uint8 masks ("indexing with dtype torch.uint8 is now
deprecated ...").

``warn_node`` issues them for a node of the ATen graph before translation
(``_arg_checks.check_graph`` calls it in graph order, after the node's own checks), attributed
to the user's source line, as eager's are.

NOTE: eager warns at every call; these are issued once per compiled program (the shapes that
decide them are fixed per program). Under Python's default filters, which show a warning once
per source line, the user sees the same; under ``simplefilter("always")`` eager repeats it.
Programs of symbolic shapes (``dynamic=True``) are not checked.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import ops

from torch2xla._errors import warn

aten = ops.aten

# (the node's arguments by schema name, the node) -> how many times eager warns, and the message
Warner = Callable[[dict, torch.fx.Node], "tuple[int, str] | None"]


def _numel(value) -> int | None:
    if isinstance(value, tuple | list):
        value = value[0] if value else None
    if not isinstance(value, torch.Tensor):
        return None
    n = value.numel()
    return n if isinstance(n, int) else None


def _degrees_of_freedom(name: str) -> Warner:
    """Eager's ``warn_invalid_degrees_of_freedom`` for the op ``name`` (the reduced count is
    the input's numel divided by the output's, 0 for an empty output)."""
    message = (
        f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
        "reduction factor (input numel divided by output numel)."
    )

    def warner(kwargs: dict, node: torch.fx.Node) -> tuple[int, str] | None:
        x = kwargs.get("self")
        x = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        n, out = _numel(x), _numel(node.meta.get("val"))
        if n is None or out is None:
            return None
        correction = kwargs.get("correction")
        if correction is None:
            correction = 1
        reduced = 0 if out == 0 else n // out
        if reduced - correction > 0:
            return None
        return (2 if x.is_complex() else 1), message

    return warner


_UINT8_INDEX = (
    "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."
)


def _uint8_masks(kwargs: dict, node: torch.fx.Node) -> tuple[int, str] | None:
    """Eager's deprecation of uint8 masks, once per uint8 index tensor of a write (``x[m] = v``,
    ``index_put``): Dynamo's fake run of a read (``x[m]``) issues it, not of a write."""
    indices = kwargs.get("indices") or ()
    values = [i.meta.get("val") if isinstance(i, torch.fx.Node) else i for i in indices]
    n = sum(isinstance(v, torch.Tensor) and v.dtype == torch.uint8 for v in values)
    return (n, _UINT8_INDEX) if n else None


WARNINGS: dict[torch._ops.OpOverload, Warner] = {
    aten.index_put.default: _uint8_masks,
    aten.index_put_.default: _uint8_masks,
    aten.var.correction: _degrees_of_freedom("var"),
    aten.std.correction: _degrees_of_freedom("std"),
    aten.var_mean.correction: _degrees_of_freedom("var_mean"),
    aten.std_mean.correction: _degrees_of_freedom("std_mean"),
}


def warn_node(node: torch.fx.Node, kwargs: dict) -> None:
    """Issue eager's warnings (``WARNINGS``) for ``node``, whose arguments by their schema names
    are ``kwargs``."""
    warner = WARNINGS.get(node.target)
    found = warner(kwargs, node) if warner is not None else None
    if found is not None:
        times, message = found
        for _ in range(times):
            warn(message, UserWarning, node=node)


__all__ = ["WARNINGS", "warn_node"]
