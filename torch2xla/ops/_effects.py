"""Ops with side effects: error checks on tensor values (``torch.linalg`` raising on singular
inputs) and the effect tokens AOTAutograd threads through them.

AOTAutograd wraps side-effecting ops in ``with_effects(token, op, *args)`` and adds a token
input and output to the graph. ``strip_effect_tokens`` turns those back into plain calls (an
XLA program runs its ops in dataflow order, and the checks below have no data consumers to
reorder against), so the rest of the bridge sees an ordinary functional graph.
"""

from __future__ import annotations

import functools
import operator

import jax
import numpy as np
import torch
from torch._ops import ops

from torch2xla.ops._registry import register

aten = ops.aten

# fx's dead-code elimination must keep value checks even though nothing reads their result.
torch.fx.node.has_side_effect(aten._linalg_check_errors.default)


def strip_effect_tokens(gm: torch.fx.GraphModule, n_inputs: int, n_outputs: int) -> None:
    """Replace ``with_effects(token, op, *args)`` nodes of ``gm`` by ``op(*args)`` and drop the
    ``n_inputs`` leading token placeholders and ``n_outputs`` leading token outputs."""
    if not n_inputs and not n_outputs:
        return
    graph = gm.graph
    with_effects = torch.ops.higher_order.with_effects
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not with_effects:
            continue
        _token, op, *args = node.args
        with graph.inserting_before(node):
            call = graph.call_function(op, tuple(args), dict(node.kwargs))
        val = node.meta.get("val")
        results = tuple(val[1:]) if isinstance(val, tuple | list) else ()
        single = len(op._schema.returns) == 1
        call.meta = {**node.meta, "val": results[0] if single and results else results}
        for user in list(node.users):
            if user.op == "call_function" and user.target is operator.getitem and user.args[1] > 0:
                if single:
                    user.replace_all_uses_with(call)
                else:
                    user.args = (call, user.args[1] - 1)
    output = graph.find_nodes(op="output")[0]
    output.args = (tuple(output.args[0][n_outputs:]),)
    for node in reversed(list(graph.nodes)):  # a token feeds the next with_effects
        if node.op == "call_function" and node.target is with_effects:
            for user in list(node.users):
                graph.erase_node(user)
            graph.erase_node(node)
    for node in graph.find_nodes(op="placeholder")[:n_inputs]:
        graph.erase_node(node)
    graph.lint()
    gm.recompile()


def _check_on_host(info: np.ndarray, api_name: str, is_matrix: bool) -> None:
    torch.ops.aten._linalg_check_errors(torch.from_numpy(np.array(info)), api_name,
                                        is_matrix=is_matrix)


@register(aten._linalg_check_errors.default)
def _linalg_check_errors(info, api_name, *, is_matrix):
    # NOTE: XLA cannot raise from inside a program; the check runs on the host through a
    # callback with torch's own kernel, so a singular input raises torch's message (wrapped
    # in a JaxRuntimeError) at the call, as eager raises.
    jax.debug.callback(functools.partial(_check_on_host, api_name=api_name, is_matrix=is_matrix),
                       info)
