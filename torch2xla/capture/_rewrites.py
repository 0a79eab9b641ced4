"""Rewrites of the Dynamo graph before its export and of the exported ATen graph.

- ``preserve_rnns``: ``torch.lstm``/``torch.gru``/``torch.rnn_tanh``/``torch.rnn_relu`` calls
  retargeted to torch2xla's custom ops of the same schema, which export keeps whole (lowered as
  scans: ``ops/_rnn.py`` tells which calls stay decomposed).
- ``preserve_sdpa``: sdpa calls retargeted to ``torch2xla::sdpa``/``sdpa_dropout``, which
  export keeps whole (``ops/_sdpa.py`` tells why).
- ``strip_effect_tokens``: AOTAutograd's effect tokens removed from the ATen graph
  (``ops/_effects.py``).

The custom ops and their lowerings stay in ``ops/``; only the graph rewriting is here.
"""

from __future__ import annotations

import copy
import operator

import torch

# (imported for the custom ops ``torch.ops.torch2xla.*`` they define)
from torch2xla.ops import _rnn, _sdpa  # noqa: F401

# -- nn.LSTM/GRU/RNN kept whole (ops/_rnn.py) ----------------------------------------------------
_REPLACEMENTS = {
    torch.lstm: ("lstm", torch.ops.torch2xla.lstm.default),
    torch.gru: ("gru", torch.ops.torch2xla.gru.default),
    torch.rnn_tanh: ("rnn_tanh", torch.ops.torch2xla.rnn_tanh.default),
    torch.rnn_relu: ("rnn_relu", torch.ops.torch2xla.rnn_relu.default),
}


def preserve_rnns(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose supported RNN calls target torch2xla's RNN ops (``gm`` itself
    is never changed: Dynamo may still run it eagerly)."""
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        return gm  # autocast casts aten's RNN ops; the custom ops would escape it
    if any(n.op == "call_function" and "autocast" in str(n.target) for n in gm.graph.nodes):
        return gm
    positions = [i for i, n in enumerate(gm.graph.nodes) if _supported(n)]
    if not positions:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    nodes = list(gm.graph.nodes)
    for i in positions:
        nodes[i].target = _REPLACEMENTS[nodes[i].target][1]
    gm.recompile()
    return gm


def _supported(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target not in _REPLACEMENTS:
        return False
    kind = _REPLACEMENTS[node.target][0]
    if len(node.args) != 9 or node.kwargs:
        return False
    input, hx, params, has_biases, num_layers, dropout, train, bidirectional, _ = node.args
    # The .data overloads (packed sequences) have the batch sizes where .input has hx/params.
    if not isinstance(params, list | tuple):
        return False
    if kind == "lstm" and not (isinstance(hx, list | tuple) and len(hx) == 2):
        return False
    if kind != "lstm" and not isinstance(hx, torch.fx.Node):
        return False
    if not all(
        isinstance(v, bool | int | float)
        for v in (has_biases, num_layers, dropout, train, bidirectional)
    ):
        return False
    if train and dropout > 0 and num_layers > 1:
        return False  # inter-layer dropout: torch's random stream, left to the decomposition
    value = input.meta.get("example_value") if isinstance(input, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or value.dim() != 3:
        return False
    if value.dtype not in (torch.float32, torch.float64):
        return False
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    # proj_size > 0 adds a projection weight per layer and direction.
    return len(params) == num_layers * directions * per


# -- sdpa kept whole (ops/_sdpa.py) -------------------------------------------------------------
_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DEFAULTS = {
    "attn_mask": None,
    "dropout_p": 0.0,
    "is_causal": False,
    "scale": None,
    "enable_gqa": False,
}
_TARGETS = frozenset(
    {torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention}
)


def preserve_sdpa(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose sdpa calls target ``torch2xla::sdpa`` (``gm`` itself is never
    changed: Dynamo may still run it eagerly)."""
    if any(n.op == "call_function" and "autocast" in str(n.target) for n in gm.graph.nodes):
        return gm  # autocast entered inside the graph: which calls it covers is not tracked here
    positions = [i for i, node in enumerate(gm.graph.nodes) if _bound(node) is not None]
    if not positions:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    nodes = list(gm.graph.nodes)
    for i in positions:
        node = nodes[i]
        bound = _bound(node)
        device = bound["query"].meta["example_value"].device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        args = (bound["query"], bound["key"], bound["value"], bound["attn_mask"])
        rest = (bound["is_causal"], bound["scale"], bound["enable_gqa"], dtype)
        if bound["dropout_p"]:
            with gm.graph.inserting_before(node):
                seed = gm.graph.call_function(
                    torch.randint, (2**31 - 1, ()), {"dtype": torch.int32, "device": "cpu"}
                )
            node.target = torch.ops.torch2xla.sdpa_dropout.default
            node.args = (*args, float(bound["dropout_p"]), *rest, seed)
        else:
            node.target = torch.ops.torch2xla.sdpa.default
            node.args = (*args, *rest)
        node.kwargs = {}
    gm.recompile()
    return gm


def _bound(node: torch.fx.Node) -> dict | None:
    """The arguments of an sdpa call this op covers, by name; None for any other node."""
    if node.op != "call_function" or node.target not in _TARGETS:
        return None
    if len(node.args) > len(_ARGS) or any(k not in _ARGS for k in node.kwargs):
        return None
    bound = {**_DEFAULTS, **dict(zip(_ARGS, node.args)), **node.kwargs}
    if any(name not in bound for name in _ARGS[:3]):
        return None
    if not isinstance(bound["dropout_p"], int | float) or not 0 <= bound["dropout_p"] < 1:
        return None
    if not (isinstance(bound["is_causal"], bool) and isinstance(bound["enable_gqa"], bool)):
        return None
    if not (bound["scale"] is None or isinstance(bound["scale"], int | float)):
        return None
    tensors = [bound[n] for n in ("query", "key", "value")]
    if bound["attn_mask"] is not None:
        tensors.append(bound["attn_mask"])
    values = [
        t.meta.get("example_value") if isinstance(t, torch.fx.Node) else None for t in tensors
    ]
    if not all(isinstance(v, torch.Tensor) and not v.is_nested for v in values):
        return None
    if not all(v.is_floating_point() for v in values[:3]):
        return None
    if bound["scale"] is not None:
        bound["scale"] = float(bound["scale"])
    return bound


# -- effect tokens (ops/_effects.py) -----------------------------------------------------------
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
