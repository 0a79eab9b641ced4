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
import jax.numpy as jnp
import numpy as np
import torch
from torch._ops import ops

from torch2xla._errors import OpError, OpLinAlgError
from torch2xla.ops._registry import ctx, register

aten = ops.aten

# fx's dead-code elimination must keep value checks even though nothing reads their result.
torch.fx.node.has_side_effect(aten._linalg_check_errors.default)


def _check_on_host(info: np.ndarray, api_name: str, is_matrix: bool) -> None:
    torch.ops.aten._linalg_check_errors(
        torch.from_numpy(np.array(info)), api_name, is_matrix=is_matrix
    )


@register(aten._linalg_check_errors.default)
def _linalg_check_errors(info, api_name, *, is_matrix):
    check_linalg(info, api_name, is_matrix)


def check_linalg(info, api_name: str, is_matrix: bool) -> None:
    """(traced) Raise what eager's ``_linalg_check_errors(info, api_name, is_matrix)`` raises
    for the LAPACK ``info`` codes (one per matrix of the batch): a runtime check
    (``ctx().check``) whose message torch's own kernel writes from the first failed matrix
    (``linalg_error``)."""
    if info.size == 0:
        return
    c = ctx()
    if not c.checking:
        # NOTE: with checks off (a GPU's default) the check runs on the host through a callback
        # with torch's own kernel: torch's message, wrapped in a JaxRuntimeError.
        jax.debug.callback(
            functools.partial(_check_on_host, api_name=api_name, is_matrix=is_matrix), info
        )
        return
    flat = info.reshape(-1)
    bad = flat != 0
    k = jnp.argmax(bad)
    # the failed matrix's position and its code, in one integer
    value = k.astype(jnp.int64) * _CODES + (flat[k].astype(jnp.int64) + _CODES // 2)
    explain = functools.partial(
        linalg_error, api_name=api_name, is_matrix=is_matrix, batch=tuple(info.shape)
    )
    c.check(jnp.any(bad), "", value, explain=explain)


_CODES = 2**32


def linalg_error(value: int, api_name: str, is_matrix: bool, batch: tuple) -> tuple[str, type]:
    """Eager's message and our error class for the failed matrix that ``value`` names (see
    ``check_linalg``): written by torch's kernel for an ``info`` with that one code."""
    index, code = divmod(value, _CODES)
    info = torch.zeros(batch, dtype=torch.int32, device="cpu")
    info.view(-1)[index] = code - _CODES // 2
    try:
        torch.ops.aten._linalg_check_errors(info, api_name, is_matrix=is_matrix)
    except torch.linalg.LinAlgError as e:
        return str(e), OpLinAlgError
    except RuntimeError as e:  # (lu_factor's zero pivot is a RuntimeError)
        return str(e), OpError
    raise AssertionError(f"torch2xla: {api_name}: info {code} raised nothing in eager")
