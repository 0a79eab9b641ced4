"""Autocast in the Dynamo graph: the CPU autocast state at each node, and the casts eager's
oneDNN LSTM gets from it.

Under CPU autocast an ``nn.LSTM`` returns the autocast dtype: ``aten::lstm`` (composite) runs
on the CPU through oneDNN where ``use_mkldnn`` holds (oneDNN enabled, a float32 input, or a
half-precision one the CPU supports), and autocast casts the float32 operands of that
``mkldnn_rnn_layer`` (input, states, weights) to its dtype (eager's result equals the LSTM run
in that dtype). The export decomposes ``aten::lstm`` into linear layers and pointwise gates
instead: autocast casts the products, the float32 states make the output float32 again.
``autocast_lstms`` casts those operands before the call, so the decomposition computes in the
autocast dtype as eager's layer does. GRU and plain RNN calls are not oneDNN's: eager and the
decomposition cast alike.

``nn.TransformerEncoderLayer``'s eval fast path (``torch._transformer_encoder_layer_fwd``)
falls through autocast, but its CPU kernel calls the attention and the feed-forward products
through the dispatcher, which autocast casts: eager's result has autocast's dtype for a
float32 or half-precision input (its additions are in place into the attention's output).
The export and the lowering compute the layer in the input's dtype; ``autocast_fast_paths``
rounds that result to autocast's dtype (no further from the float64 result than eager's,
which rounds after every product). Weights of the other half-precision dtype make eager's
mixed-dtype layer norm raise: asked of eager on small tensors, raised as eager's error.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import operator
from collections.abc import Iterator

import torch

from torch2xla._errors import OpError

_ENTER = torch.amp.autocast_mode._enter_autocast
_EXIT = torch.amp.autocast_mode._exit_autocast
_DEVICES = ("cpu", "cuda")


@contextlib.contextmanager
def autocast_kept() -> Iterator[None]:
    """Autocast's state as it was before an export: the export runs the graph's
    ``_enter_autocast`` nodes for real (so that the trace records autocast's casts), and one
    that fails between an enter and its exit left the nesting count up (autocast's cache of
    casts then outlived the user's region: a later region, in eager too, read weights cast
    before an optimizer step, or of another dtype) and the region's dtype on."""
    n = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    states = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _DEVICES]
    cache = torch.is_autocast_cache_enabled()
    try:
        yield
    finally:
        left = torch.autocast_increment_nesting() - 1
        torch.autocast_decrement_nesting()
        for _ in range(left - n):  # (as ``_exit_autocast`` leaves the outermost region)
            if torch.autocast_decrement_nesting() == 0:
                torch.clear_autocast_cache()
        for d, enabled, dtype in states:
            torch.set_autocast_enabled(d, enabled)
            torch.set_autocast_dtype(d, dtype)
        torch.set_autocast_cache_enabled(cache)


def cpu_autocast_states(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.dtype | None]:
    """Each node of ``gm`` mapped to the CPU autocast dtype it runs under (None: autocast off):
    the ambient state at compile time, changed by the graph's own ``torch.autocast`` regions
    (``_enter_autocast(device, dtype, enabled, cache)``/``_exit_autocast``)."""
    ambient = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
    # (enabled, dtype): dtype is kept across a disabled region, as autocast keeps it
    stack = [(ambient is not None, torch.get_autocast_dtype("cpu"))]
    states: dict[torch.fx.Node, torch.dtype | None] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is _ENTER:
            device, dtype, enabled = (list(node.args) + [None, None, True])[:3]
            enabled = node.kwargs.get("enabled", enabled)
            dtype = node.kwargs.get("dtype", dtype)
            device = node.kwargs.get("device_type", device)
            top = stack[-1]
            if device == "cpu":
                stack.append((bool(enabled), dtype if dtype is not None else top[1]))
            else:
                stack.append(top)
        elif node.op == "call_function" and node.target is _EXIT and len(stack) > 1:
            stack.pop()
        enabled, dtype = stack[-1]
        states[node] = dtype if enabled else None
    return states


def _mkldnn_lstm(value: torch.Tensor, grad: bool) -> bool:
    """Whether eager's ``aten::lstm`` takes oneDNN's path for this input (``use_mkldnn``)."""
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return False
    if value.device.type != "cpu" or value.numel() == 0:
        return False
    if value.dtype == torch.float32:
        return True
    if value.dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if value.dtype == torch.float16:
        return not grad and bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return False


def _lstm_cast(node: torch.fx.Node, dtype: torch.dtype | None) -> bool:
    if dtype is None or node.op != "call_function" or node.target is not torch.lstm:
        return False
    if len(node.args) != 9 or node.kwargs:
        return False
    input, hx, params, has_biases, num_layers, _, _, bidirectional, _ = node.args
    if not isinstance(input, torch.fx.Node) or not isinstance(hx, list | tuple):
        return False
    if not isinstance(params, list | tuple) or not isinstance(num_layers, int):
        return False
    per = (4 if has_biases else 2) * (2 if bidirectional else 1)
    if len(params) != num_layers * per:  # projections: eager's default implementation
        return False
    value = input.meta.get("example_value")
    return isinstance(value, torch.Tensor) and _mkldnn_lstm(value, torch.is_grad_enabled())


def _encoder_layer_cast(node: torch.fx.Node, dtype: torch.dtype | None) -> bool:
    if dtype is None or node.op != "call_function":
        return False
    if node.target is not torch._transformer_encoder_layer_fwd:
        return False
    if len(node.args) < 4:  # (Dynamo's call passes every argument by position)
        return False
    values = [
        a.meta.get("example_value") if isinstance(a, torch.fx.Node) else None
        for a in (node.args[0], node.args[3])
    ]
    # (autocast casts float32 and half-precision operands, never float64; an input of
    # autocast's dtype too, beside float32 weights)
    lower = (torch.float32, torch.float16, torch.bfloat16)
    return all(isinstance(v, torch.Tensor) and v.dtype in lower for v in values)


def autocast_fast_paths(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose ``nn.TransformerEncoderLayer`` fast-path calls under CPU
    autocast return autocast's dtype, as eager's kernel does (see the module docstring);
    ``gm`` itself is never changed."""

    def cast(graph: torch.fx.Graph, node: torch.fx.Node, dtype) -> None:
        rejected = _encoder_layer_refused(node, dtype)
        if rejected is not None:
            raise OpError(rejected, node)
        _cast_encoder_layer(graph, node, dtype)

    return _rewritten_under(gm, _encoder_layer_cast, cast)


def _rewritten_under(gm: torch.fx.GraphModule, picks, rewrite) -> torch.fx.GraphModule:
    """``gm``, or a copy where ``rewrite(graph, node, dtype)`` changed each node that
    ``picks(node, dtype)`` (``dtype``: the CPU autocast dtype the node runs under, or None)."""
    states = cpu_autocast_states(gm)
    positions = [i for i, n in enumerate(gm.graph.nodes) if picks(n, states[n])]
    if not positions:
        return gm
    dtypes = [states[n] for n in gm.graph.nodes]
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    nodes = list(gm.graph.nodes)
    for i in positions:
        rewrite(gm.graph, nodes[i], dtypes[i])
    gm.recompile()
    return gm


def _encoder_layer_refused(node: torch.fx.Node, dtype: torch.dtype) -> str | None:
    """Eager's message where the fast path under autocast ``dtype`` rejects the dtypes of
    ``node``'s tensors (weights of the other half-precision dtype), else None."""
    args = node.args
    dtypes = tuple(
        a.meta["example_value"].dtype if isinstance(a, torch.fx.Node) else None for a in args[:18]
    )
    return _eager_encoder_layer(dtypes, bool(args[7]), bool(args[8]), dtype)


@functools.cache
def _eager_encoder_layer(
    dtypes: tuple, use_gelu: bool, norm_first: bool, dtype: torch.dtype
) -> str | None:
    e = 2  # (embed_dim 2, one head, a feed-forward of width 2)
    # (the schema's tensors by position: src, then the weights and biases)
    shapes = {0: (1, 1, e), 3: (3 * e, e), 4: (3 * e,), 5: (e, e), 14: (e, e), 16: (e, e)}
    args: list = [None, e, 1, *[None] * 4, use_gelu, norm_first, 1e-5, *[None] * 8]
    for i, d in enumerate(dtypes):
        if d is not None:
            args[i] = torch.ones(shapes.get(i, (e,)), dtype=d)
    # (outside the modes of a trace in progress: a real call)
    with (
        torch.utils._python_dispatch._disable_current_modes(),
        torch.no_grad(),
        torch.autocast("cpu", dtype=dtype),
    ):
        try:
            torch._transformer_encoder_layer_fwd(*args, None, None)
        except RuntimeError as e:
            return str(e)
    return None


def _cast_encoder_layer(graph: torch.fx.Graph, node: torch.fx.Node, dtype: torch.dtype) -> None:
    # (a half-precision input of float32 weights: autocast casts both to its dtype, where the
    # kernel itself rejects operands of two dtypes; the layer computes in the weights' dtype)
    src, weights = node.args[0], node.args[3].meta["example_value"]
    if weights.dtype != src.meta["example_value"].dtype:
        with graph.inserting_before(node):
            node.args = (_cast_node(graph, src, weights.dtype), *node.args[1:])
    with graph.inserting_after(node):
        out = _cast_node(graph, node, dtype)
    node.replace_all_uses_with(out, delete_user_cb=lambda n, out=out: n is not out)


def autocast_lstms(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose LSTM calls under CPU autocast that eager runs through oneDNN
    compute as that layer does (``gm`` itself is never changed: Dynamo may still run it
    eagerly): the float32 operands rounded to the autocast dtype, the layer in float32 (oneDNN
    accumulates and keeps its gates in float32; the decomposition would round every product
    and gate, twice eager's error), its outputs rounded to the autocast dtype. Where
    ``torch2xla::lstm`` does not cover the call (``_rewrites._supported``), or a result is used
    other than by index, the operands are cast to the autocast dtype and the decomposition
    computes in it."""
    return _rewritten_under(gm, _lstm_cast, _cast_lstm)


def _cast_node(graph: torch.fx.Graph, arg: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
    new = graph.call_method("to", (arg, dtype))
    new.meta = {**arg.meta, "example_value": arg.meta["example_value"].to(dtype)}
    return new


def _cast_lstm(graph: torch.fx.Graph, node: torch.fx.Node, dtype: torch.dtype) -> None:
    from torch2xla.capture._rewrites import _supported

    indexed = all(
        u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
        for u in node.users
    )
    whole = indexed and _supported(node)  # (the input is float32, as ``_supported`` asks)

    def cast(arg):
        value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
            return arg
        with graph.inserting_before(node):
            rounded = _cast_node(graph, arg, dtype)
            return _cast_node(graph, rounded, torch.float32) if whole else rounded

    input, hx, params, *rest = node.args
    node.args = (cast(input), [cast(h) for h in hx], [cast(p) for p in params], *rest)
    if not whole:
        return
    # (a custom op: autocast falls through it, so the layer stays float32)
    node.target = torch.ops.torch2xla.lstm.default
    for user in list(node.users):
        with graph.inserting_after(user):
            out = _cast_node(graph, user, dtype)
        user.replace_all_uses_with(out, delete_user_cb=lambda n, out=out: n is not out)
