"""Dynamo graph -> functional, forward-only core-ATen graph."""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import torch
from torch._functorch.aot_autograd import aot_export_module


@dataclasses.dataclass(frozen=True)
class LoweredGraph:
    """A functional ATen graph and how its inputs and outputs map onto the Dynamo graph's.

    The ATen graph takes ``lifted`` (parameters and buffers still owned by the Dynamo graph
    module, rare since Dynamo lifts them itself) followed by the Dynamo graph's inputs. It
    returns the new values of mutated inputs (``mutations[i]`` is the index of the input the
    i-th output is written back to) followed by the user outputs.
    """

    gm: torch.fx.GraphModule
    lifted: tuple[torch.Tensor, ...]
    mutations: tuple[int, ...]
    num_user_outputs: int


@functools.cache
def decomposition_table() -> dict:
    table = dict(torch._decomp.core_aten_decompositions())
    from torch2xla.ops import LOWERINGS

    # Keep ops we lower better than their decomposition does (fused attention, norms, ...).
    for op in list(table):
        if op in LOWERINGS and op not in _ALWAYS_DECOMPOSE:
            del table[op]
    return table


# Decompositions we prefer even when a lowering exists (none yet).
_ALWAYS_DECOMPOSE: frozenset = frozenset()


def lower(gm: torch.fx.GraphModule, args: list) -> LoweredGraph:
    """Export ``gm`` called on concrete ``args`` to a functional core-ATen graph."""
    # mkldnn off: otherwise LSTM lowers to the opaque mkldnn_rnn_layer.
    # preserve_node_meta keeps each node's user stack trace, for error messages.
    with _mkldnn_disabled(), torch.no_grad(), torch.fx.traceback.preserve_node_meta():
        aten_gm, sig = aot_export_module(
            gm, list(args), trace_joint=False, decompositions=decomposition_table()
        )
    named = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers())}
    lifted_names = [*sig.parameters, *sig.buffers]
    lifted = tuple(named[n] for n in lifted_names)
    placeholders = [n.name for n in aten_gm.graph.find_nodes(op="placeholder")]
    input_index = {name: i for i, name in enumerate(placeholders)}
    buffer_placeholder = {b: p for p, b in sig.inputs_to_buffers.items()}
    num_mutated = len(sig.buffers_to_mutate) + len(sig.user_inputs_to_mutate)
    outputs = aten_gm.graph.find_nodes(op="output")[0].args[0]
    mutations = []
    for out in outputs[:num_mutated]:
        if out.name in sig.user_inputs_to_mutate:
            target = sig.user_inputs_to_mutate[out.name]
        else:
            target = buffer_placeholder[sig.buffers_to_mutate[out.name]]
        mutations.append(input_index[target])
    return LoweredGraph(aten_gm, lifted, tuple(mutations), len(sig.user_outputs))


@contextlib.contextmanager
def _mkldnn_disabled():
    # torch.backends.mkldnn.flags() would also reset oneDNN's TF32 flag (and warn about it).
    prev = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(prev)
