"""Assertion nodes that tracing leaves in graphs: the trace already checked them (shapes and dtypes
are static per compiled signature), so they lower to nothing."""

from __future__ import annotations

from torch._ops import ops

from torch2xla.ops._registry import register

aten = ops.aten


@register(
    aten._assert_tensor_metadata.default,
    aten._assert_scalar.default,
    aten.sym_constrain_range_for_size.default,
    aten.sym_constrain_range.default,
)
def checked_at_trace_time(*args, **kwargs):
    return None
