"""Process state the capture reads that Dynamo does not guard.

Dynamo guards the state its own tracing reads (grad mode, autocast, default dtype,
deterministic mode, the thread count, cuBLAS's TF32 switch...). A few switches are read only
later, when torch2xla exports the Dynamo graph to ATen or lowers it, so a program built under
one value would serve calls made under another, where eager computes otherwise:

- ``torch.backends.mkldnn.enabled``, for graphs calling an LSTM: under CPU autocast eager's
  LSTM runs through oneDNN and returns the autocast dtype, float32 without it
  (``_autocast.autocast_lstms`` follows it); and for graphs calling gelu: eager's runs
  through oneDNN, whose AVX2 kernel gives +0 where torch's gives -0
  (``ops/_activations._onednn_gelu``);
- ``torch.backends.opt_einsum.enabled`` and ``.strategy``, for graphs calling ``einsum``: the
  export decomposes it into products in the order they choose (eager's too): the result's
  layout and round-off follow them;
- ``torch.utils.deterministic.fill_uninitialized_memory``, for graphs traced under
  deterministic algorithms (which Dynamo guards): eager fills ``empty`` tensors with NaN or
  the largest integer where it holds (``ops/_shape.uninitialized``).

``untracked_state(gm)`` lists the ``(label, read)`` pairs of ``gm``; the cache key reads them at
every call (``guards/_key.py``), and a change builds another program. The persistent cache's
key holds them for every graph (``runtime/_build_state.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _opt_einsum() -> tuple[bool, Any]:
    return torch.backends.opt_einsum.enabled, torch.backends.opt_einsum.strategy


# (target the graph calls, label, read)
_READS: tuple[tuple[Any, str, Callable[[], Any]], ...] = (
    (torch.lstm, "torch.backends.mkldnn.enabled", torch._C._get_mkldnn_enabled),
    (torch._C._nn.gelu, "torch.backends.mkldnn.enabled", torch._C._get_mkldnn_enabled),
    (torch.functional.einsum, "torch.backends.opt_einsum (enabled, strategy)", _opt_einsum),
)


def untracked_state(gm: torch.fx.GraphModule) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """The ``(label, read)`` pairs of the untracked state ``gm``'s capture reads (called when
    Dynamo hands the graph over, under the state Dynamo guarded for it)."""
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    reads = list(
        dict.fromkeys((label, read) for target, label, read in _READS if target in targets)
    )
    if torch.are_deterministic_algorithms_enabled():
        # (any graph: its decompositions may create empty tensors the Dynamo graph does not show)
        reads.append(
            (
                "torch.utils.deterministic.fill_uninitialized_memory",
                torch._C._get_deterministic_fill_uninitialized_memory,
            )
        )
    return tuple(reads)
