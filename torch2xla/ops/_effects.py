"""Ops with side effects: error checks on tensor values (``torch.linalg`` raising on singular
inputs) and the effect tokens AOTAutograd threads through them.

AOTAutograd wraps side-effecting ops in ``with_effects(token, op, *args)`` and adds a token
input and output to the graph. ``capture/_rewrites.strip_effect_tokens`` turns those back into
plain calls (an XLA program runs its ops in dataflow order, and the checks below have no data
consumers to reorder against), so the rest of the bridge sees an ordinary functional graph.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import torch
from torch._ops import ops

from torch2xla.ops._registry import register

aten = ops.aten

# fx's dead-code elimination must keep value checks even though nothing reads their result.
torch.fx.node.has_side_effect(aten._linalg_check_errors.default)


def _check_on_host(info: np.ndarray, api_name: str, is_matrix: bool) -> None:
    torch.ops.aten._linalg_check_errors(
        torch.from_numpy(np.array(info)), api_name, is_matrix=is_matrix
    )


@register(aten._linalg_check_errors.default)
def _linalg_check_errors(info, api_name, *, is_matrix):
    # NOTE: XLA cannot raise from inside a program; the check runs on the host through a
    # callback with torch's own kernel, so a singular input raises torch's message (wrapped
    # in a JaxRuntimeError) at the call, as eager raises.
    jax.debug.callback(
        functools.partial(_check_on_host, api_name=api_name, is_matrix=is_matrix), info
    )
