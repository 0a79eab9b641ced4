"""Stacked recurrent layers with dropout between them, in training: one call per layer.

``nn.LSTM``/``nn.GRU``/``nn.RNN(num_layers > 1, dropout=p)`` in training mode drop out each
layer's output before the next layer reads it (ATen's ``apply_layer_stack``). Dynamo's graph
has one ``torch.lstm``/``torch.gru``/``torch.rnn_tanh``/``torch.rnn_relu`` call for the whole
stack, which the export decomposes through torch's Python ``_rnn_helper``; that helper
compares ``num_layers < i - 1`` where it means the opposite and never drops anything out
(torch 2.11 to 2.13): the compiled model trained without the dropout the user asked for,
silently. ``split_layers`` writes such a call as one single-layer call per layer of the
same op, with ``torch.dropout(output, p, train=True)`` between consecutive layers, and the
stack's final states as the concatenation of the layers' (layer-major, direction-minor,
as eager's). The single-layer calls are then what ``_rewrites.preserve_rnns`` keeps whole
where it can; the dropout draws from the program's generator (values are not eager's, the
distribution is). Packed sequences (the ``.data`` overloads) never reach a graph: their
kernels read the batch sizes' values, a graph break that leaves them to eager.
"""

from __future__ import annotations

import contextlib
import copy
import operator

import torch

from torch2xla.capture._int_values import graph_fake_mode

_STATES = {torch.lstm: 2, torch.gru: 1, torch.rnn_tanh: 1, torch.rnn_relu: 1}


def _parts(node: torch.fx.Node):
    """``node``'s arguments (``.input``'s schema), or None where it is not a stacked RNN call
    with dropout in training that ``split_layers`` can write per layer."""
    if node.op != "call_function" or node.target not in _STATES:
        return None
    if len(node.args) != 9 or node.kwargs:
        return None
    _, hx, params, has_biases, layers, p, train, bidir, batch_first = node.args
    if not all(isinstance(v, bool) for v in (has_biases, train, bidir, batch_first)):
        return None
    if not (isinstance(layers, int) and isinstance(p, int | float)):
        return None
    if not (train and p > 0 and layers > 1) or not isinstance(params, list | tuple):
        return None
    states = list(hx) if isinstance(hx, list | tuple) else [hx]
    if len(states) != _STATES[node.target] or not all(isinstance(s, torch.fx.Node) for s in states):
        return None
    directions = 2 if bidir else 1
    if len(params) % (layers * directions):
        return None
    if not all(
        u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
        for u in node.users
    ):
        return None
    return node.args


def split_layers(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose stacked RNN calls with dropout in training run one layer per
    call with eager's dropout between them (``gm`` itself is never changed: Dynamo may still
    run it eagerly)."""
    positions = [i for i, n in enumerate(gm.graph.nodes) if _parts(n) is not None]
    if not positions:
        return gm
    fake_mode = graph_fake_mode(gm) or contextlib.nullcontext()
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    nodes = list(gm.graph.nodes)
    for i in positions:
        _split(gm.graph, nodes[i], fake_mode)
    gm.recompile()
    return gm


def _split(graph: torch.fx.Graph, node: torch.fx.Node, fake_mode) -> None:
    input, hx, params, has_biases, layers, p, train, bidir, batch_first = _parts(node)
    directions = 2 if bidir else 1
    per = len(params) // (layers * directions)
    states = list(hx) if isinstance(hx, list | tuple) else [hx]
    grad = any(
        isinstance(v, torch.Tensor) and v.requires_grad
        for v in (node.meta.get("example_value") or ())
    )

    def add(target, args):
        new = graph.call_function(target, args)
        values = torch.fx.node.map_arg(args, lambda a: a.meta["example_value"])
        with fake_mode, torch.set_grad_enabled(grad):
            new.meta = {**node.meta, "example_value": target(*values)}
        return new

    finals: list[list[torch.fx.Node]] = [[] for _ in states]
    x = input
    with graph.inserting_before(node):
        for layer in range(layers):
            own = params[layer * directions * per : (layer + 1) * directions * per]
            hs = [add(torch.narrow, (s, 0, layer * directions, directions)) for s in states]
            h = type(hx)(hs) if isinstance(hx, list | tuple) else hs[0]
            call = add(
                node.target, (x, h, list(own), has_biases, 1, 0.0, train, bidir, batch_first)
            )
            out = add(operator.getitem, (call, 0))
            for k, f in enumerate(finals):
                f.append(add(operator.getitem, (call, k + 1)))
            if layer < layers - 1:
                x = add(torch.dropout, (out, float(p), True))
        results = [out] + [add(torch.cat, (f, 0)) for f in finals]
    for user in list(node.users):
        result = results[user.args[1]]
        result.meta = dict(user.meta)  # (Dynamo's example value: eager's layout)
        user.replace_all_uses_with(result)
        graph.erase_node(user)
    graph.erase_node(node)
