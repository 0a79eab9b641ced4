"""Rewrites of the Dynamo graph before its export and of the exported ATen graph.

- ``preserve_rnns``: ``torch.lstm``/``torch.gru``/``torch.rnn_tanh``/``torch.rnn_relu`` calls
  retargeted to torch2xla's custom ops of the same schema, which export keeps whole (lowered as
  scans: ``ops/_rnn.py`` tells which calls stay decomposed).
- ``preserve_sdpa``: sdpa calls retargeted to ``torch2xla::sdpa``/``sdpa_dropout``, which
  export keeps whole (``ops/_sdpa.py`` tells why).
- ``margin_losses``: ``F.multi_margin_loss``/``F.multilabel_margin_loss`` calls retargeted to
  eager's semantics (torch decomposes both at the Autograd key, before any table of ours:
  the multilabel decomposition counts the positions after a target list's ``-1`` as targets,
  and neither checks dtypes nor keeps a 1-D input's 0-d result). ``F.one_hot`` calls too:
  torch 2.11 decomposes it at the Autograd key without eager's checks of its classes
  (out-of-range classes gave rows of zeros); ``_one_hot`` asserts them (``_assert_async``).
  The margin losses' targets and ``torch.quantile``/``nanquantile``'s ``q`` (call or method)
  are asserted as eager checks them, and ``torch.istft``'s window envelope
  (``_composite_checks``).
- ``eager_layouts``: the results of calls whose eager kernels choose their output's memory
  format (batch norm, CPU ``max_pool1d`` without grad) made contiguous in it, so that outputs
  computed from them have eager's strides (the fake kernels keep the input's).
- ``pointwise_composites``: ``addcdiv``/``addcmul`` calls that Dynamo split into
  ``div``/``mul`` then ``mul``+``add`` or ``fma`` put back whole: each part rounded to the
  tensors' dtype where eager's kernel rounds once (bfloat16 Adam steps), and in another order
  (``t1 / t2 * value`` where eager computes ``value * t1 / t2``).
- ``reduction_outs``: ``torch.sum``/``prod``/``std``/``var`` into an ``out=`` of another dtype
  reduce in that dtype, as eager (torch's out= decompositions reduce first, then cast).
- ``strip_effect_tokens``: AOTAutograd's effect tokens removed from the ATen graph
  (``ops/_effects.py``).

The custom ops and their lowerings stay in ``ops/``; only the graph rewriting is here.
"""

from __future__ import annotations

import copy
import inspect
import operator
from collections.abc import Callable

import torch
import torch.nn.functional as F

from torch2xla._errors import OpError

# (imported for the custom ops ``torch.ops.torch2xla.*`` they define, and for the tracing
# kernels of quantile's composites, which keep Dynamo from breaking the graph at them)
from torch2xla.capture import _host_checks  # noqa: F401
from torch2xla.capture._composite_checks import checked_istft
from torch2xla.ops import _autodiff, _dtype_probes, _rnn, _sdpa  # noqa: F401
from torch2xla.runtime._interop import dtype_name


def _rewritten(
    gm: torch.fx.GraphModule,
    select: Callable[[torch.fx.Node], bool],
    rewrite: Callable[[torch.fx.Graph, torch.fx.Node], None],
) -> torch.fx.GraphModule:
    """``gm``, or, where ``select`` picks any of its nodes, a copy whose picked nodes
    ``rewrite`` has changed in place (``gm`` itself is never changed: Dynamo may still run it
    eagerly)."""
    positions = [i for i, n in enumerate(gm.graph.nodes) if select(n)]
    if not positions:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    nodes = list(gm.graph.nodes)
    for i in positions:
        rewrite(gm.graph, nodes[i])
    gm.recompile()
    return gm


# -- addcdiv/addcmul put back whole -----------------------------------------------------------------
# Dynamo writes ``torch.addcdiv(s, t1, t2, value=v)`` as ``s + torch.div(t1, t2) * v`` and
# ``s.addcdiv_(t1, t2, value=v)`` (``addcmul_``) as ``s.copy_(fma(t1 / t2, v, s))`` (torch
# 2.11: ``s.add_(t1 / t2 * v)``, the product with ``operator.mul``), to keep ``v`` out of the
# graph's inputs. Told apart from the same ops written by the user by the user's line, which
# names the composite.
_FMA = torch.ops.prims.fma.default
_PARTS = {torch.div: "addcdiv", torch.mul: "addcmul", operator.mul: "addcmul"}
_MULS = (torch.mul, operator.mul)
_COMPOSITES = {"addcdiv": torch.addcdiv, "addcmul": torch.addcmul}


def pointwise_composites(gm: torch.fx.GraphModule, numbers: bool = False) -> torch.fx.GraphModule:
    """``gm``, or a copy whose ``addcdiv``/``addcmul`` calls Dynamo split are whole again
    (``gm`` itself is never changed). With ``numbers``, also those whose ``value`` is a
    number the graph computes (a changing float's ``.item()``): the graph eager's checks of
    the numbers a call converts look at (``_numbers``), not one to export (there the value
    is a constant, or a 0-d tensor operand of the ``mul``: ``_float_values``)."""
    return _rewritten(gm, lambda n: _split_composite(n, numbers) is not None, _joiner(numbers))


_SCALARS = (bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool)


def _number(value, numbers: bool) -> bool:
    if isinstance(value, bool | int | float):
        return True
    if not (numbers and isinstance(value, torch.fx.Node)):
        return False
    return isinstance(value.meta.get("example_value"), _SCALARS)


def _split_composite(node: torch.fx.Node, numbers: bool = False):
    """(name, self, t1, t2, value, nodes to drop) where ``node`` ends a split
    ``addcdiv``/``addcmul`` (the ``copy_`` of an in-place one's ``fma``, the ``fma``, or the
    ``add``/``add_`` of torch 2.11's form)."""
    from torch2xla._errors import _user_frame

    if node.op not in ("call_function", "call_method") or node.kwargs:
        return None
    in_place = node.op == "call_method"
    if in_place and node.target == "copy_" and len(node.args) == 2 and _fused_into(*node.args):
        # (``s.copy_(fma(part, v, s))``: joined as the in-place method, whose eager checks
        # include the result's dtype, ``int.addcmul_(t, float)``, which ``copy_`` casts)
        self, fused = node.args
        part, value, _ = fused.args
        dropped = [fused, part]
    elif node.target is _FMA and len(node.args) == 3:
        part, value, self = node.args
        if any(u.target == "copy_" and _fused_into(*u.args) for u in node.users):
            return None  # (its copy_ is joined)
        dropped = [part]
    elif node.target in ((torch.add,), ("add_",))[in_place] and len(node.args) == 2:
        self, scaled = node.args
        if not (
            isinstance(scaled, torch.fx.Node)
            and scaled.op == "call_function"
            and scaled.target in _MULS
            and not scaled.kwargs
            and len(scaled.args) == 2
            and len(scaled.users) == 1
        ):
            return None
        part, value = scaled.args
        dropped = [scaled, part]
    else:
        return None
    if not (
        isinstance(part, torch.fx.Node)
        and part.op == "call_function"
        and part.target in _PARTS
        and not part.kwargs
        and len(part.args) == 2
        and len(part.users) == 1
        and _number(value, numbers)
    ):
        return None
    name = _PARTS[part.target] + ("_" if in_place else "")
    frames = [_user_frame(n) for n in (node, *dropped)]
    if frames[0] is None or any(f != frames[0] for f in frames) or name not in frames[0][2]:
        return None
    return name, self, *part.args, value, dropped


def _fused_into(self, fused, *rest) -> bool:
    """Whether ``fused`` is an ``fma(part, v, self)`` read only by the ``copy_`` into ``self``."""
    return (
        not rest
        and isinstance(fused, torch.fx.Node)
        and fused.op == "call_function"
        and fused.target is _FMA
        and not fused.kwargs
        and len(fused.args) == 3
        and fused.args[2] is self
        and len(fused.users) == 1
    )


def _joiner(numbers: bool) -> Callable[[torch.fx.Graph, torch.fx.Node], None]:
    def join(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
        name, self, t1, t2, value, dropped = _split_composite(node, numbers)
        node.target = name if node.op == "call_method" else _COMPOSITES[name]
        node.args = (self, t1, t2)
        node.kwargs = {"value": value}
        node.meta[COMPOSITE] = True
        for n in dropped:  # (the fma's or add's operand first: its only user is gone)
            graph.erase_node(n)

    return join


# (the meta key of a call joined again: its eager checks are the composite's, ``_numbers``)
COMPOSITE = "torch2xla_composite"


# -- nn.LSTM/GRU/RNN kept whole (ops/_rnn.py) ----------------------------------------------------
_REPLACEMENTS = {
    torch.lstm: ("lstm", torch.ops.torch2xla.lstm.default),
    torch.gru: ("gru", torch.ops.torch2xla.gru.default),
    torch.rnn_tanh: ("rnn_tanh", torch.ops.torch2xla.rnn_tanh.default),
    torch.rnn_relu: ("rnn_relu", torch.ops.torch2xla.rnn_relu.default),
}


# torch.func's derivative transforms as Dynamo writes them: calls between an increment and a
# decrement of the functorch level (vmap's levels are batching only: the custom ops have
# batching rules)
_NESTING = {
    torch._C._functorch._grad_increment_nesting: 1,
    torch._C._functorch._jvp_increment_nesting: 1,
    torch._C._functorch._grad_decrement_nesting: -1,
    torch._C._functorch._jvp_decrement_nesting: -1,
}


def _outside_derivatives(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes of ``gm`` outside every ``torch.func.grad``/``vjp``/``jacrev``/``jvp``/
    ``jacfwd`` of the graph. The RNN and sdpa custom ops' derivatives are autograd functions,
    which functorch's transforms reject (AOT's export failed: a strict graph raised, another
    ran in eager), so calls inside one keep torch's decomposition, whose backward ops the
    registry lowers."""
    depth, out = 0, set()
    for node in gm.graph.nodes:
        if node.op == "call_function":
            depth += _NESTING.get(node.target, 0)
        if depth == 0:
            out.add(node)
    return out


def preserve_rnns(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose supported RNN calls target torch2xla's RNN ops (``gm`` itself
    is never changed: Dynamo may still run it eagerly)."""
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda"):
        return gm  # autocast casts aten's RNN ops; the custom ops would escape it
    if any(n.op == "call_function" and "autocast" in str(n.target) for n in gm.graph.nodes):
        return gm
    outside = _outside_derivatives(gm)
    return _rewritten(gm, lambda node: node in outside and _supported(node), _retarget_rnn)


def _retarget_rnn(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    node.target = _REPLACEMENTS[node.target][1]


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
    dtypes = _autocast_dtypes(gm)
    if dtypes is None:
        return gm  # autocast regions whose state is not known here: left to the decomposition
    outside = _outside_derivatives(gm)
    return _rewritten(
        gm,
        lambda node: node in outside and _bound(node) is not None,
        lambda graph, node: _retarget_sdpa(graph, node, dtypes[node.name]),  # (a copy's node)
    )


_ENTER_AUTOCAST = torch.amp.autocast_mode._enter_autocast
_EXIT_AUTOCAST = torch.amp.autocast_mode._exit_autocast


def _autocast_dtypes(gm: torch.fx.GraphModule) -> dict | None:
    """Per sdpa call of ``gm`` (by node name), the dtype autocast casts it to on its device (None where
    autocast is off there), following the ``torch.autocast`` regions the graph enters and
    leaves (transformers' rotary embeddings turn autocast off around their float32 math, so
    every Llama-like graph has them) from the state the graph is called in. None where a
    region's arguments are not constants or regions do not nest."""
    state = {d: _ambient(d) for d in ("cpu", "cuda")}
    stack: list[tuple[torch.fx.Node, dict]] = []
    dtypes = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is _ENTER_AUTOCAST:
            device, dtype, enabled = (list(node.args) + [None, True])[:3]
            if node.kwargs or not isinstance(device, str) or not isinstance(enabled, bool):
                return None
            if dtype is not None and not isinstance(dtype, torch.dtype):
                return None
            stack.append((node, dict(state)))
            if device in state:
                state[device] = (dtype or torch.get_autocast_dtype(device)) if enabled else None
        elif node.target is _EXIT_AUTOCAST:
            if not stack or node.args != (stack[-1][0],):
                return None
            state = stack.pop()[1]
        elif node.target in _TARGETS:
            value = _bound(node)
            query = value and value["query"].meta.get("example_value")
            device = query.device.type if isinstance(query, torch.Tensor) else None
            dtypes[node.name] = state.get(device, _ambient(device) if device else None)
    return None if stack else dtypes


def _ambient(device: str):
    """The dtype autocast casts to on ``device`` at the moment (None where it is off)."""
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


def _retarget_sdpa(graph: torch.fx.Graph, node: torch.fx.Node, dtype) -> None:
    bound = _bound(node)
    args = (bound["query"], bound["key"], bound["value"], bound["attn_mask"])
    rest = (bound["is_causal"], bound["scale"], bound["enable_gqa"], dtype)
    if bound["dropout_p"]:
        with graph.inserting_before(node):
            seed = graph.call_function(
                torch.randint, (2**31 - 1, ()), {"dtype": torch.int32, "device": "cpu"}
            )
        node.target = torch.ops.torch2xla.sdpa_dropout.default
        node.args = (*args, float(bound["dropout_p"]), *rest, seed)
    else:
        node.target = torch.ops.torch2xla.sdpa.default
        node.args = (*args, *rest)
    node.kwargs = {}


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


# -- output layouts eager's kernels choose (runtime/_program.OutputLayout) ----------------------
# An output's strides are its fake value's, and fake kernels mostly follow eager's. These
# kernels choose their output's memory format themselves where the fake kernels keep the
# input's strides: a call's result is made contiguous in that format (a no-op in XLA), so that
# it and what is computed from it have eager's layout.
def _batch_norm_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format:
    # (eager's kernels write into ``empty_like(input, input.suggest_memory_format())``: a
    # transposed (N, C, L) input gives a contiguous result, a channels_last one stays)
    if x.ndim in (4, 5) and _strides_like_channels_last(x.shape, x.stride()):
        return torch.channels_last if x.ndim == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _strides_like_channels_last(sizes, strides) -> bool:
    """c10's ``is_channels_last_strides_2d``/``_3d`` (``suggest_memory_format``'s test): the
    strides grow from the channels through the spatial dims (innermost last) to the batch;
    ambiguous cases (a trivial channel dim, size-1 dims with equal strides) are row-major."""
    if strides[1] == 0:
        return False
    smallest = 0
    for d in (1, *range(len(sizes) - 1, 1, -1), 0):
        if sizes[d] == 0 or strides[d] < smallest:
            return False
        if d == 0 and smallest == strides[1]:
            return False
        smallest = strides[d] * max(1, sizes[d])
    return True


def _max_pool1d_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    # (eager's CPU max_pool1d without grad runs ``max_pool1d_impl``, which writes a new
    # contiguous tensor; with grad, ``max_pool1d_with_indices``, whose strides the fake
    # kernel has)
    value = node.meta.get("example_value")
    if x.device.type != "cpu" or not isinstance(value, torch.Tensor) or value.requires_grad:
        return None
    return torch.contiguous_format


def _suggested(x: torch.Tensor) -> torch.memory_format:
    """``x.suggest_memory_format()`` (a 4-d tensor of channels-last strides: channels_last,
    also where a 3-d op reads it as an unbatched volume)."""
    if x.ndim in (4, 5) and _strides_like_channels_last(x.shape, x.stride()):
        return torch.channels_last if x.ndim == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _roll_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    # (eager rolls along dims by ``cat``s of slices, in the input's suggested format; a roll
    # of the flattened tensor is contiguous, as its fake value)
    dims = node.args[2] if len(node.args) > 2 else node.kwargs.get("dims")
    return None if dims in (None, (), []) else _suggested(x)


def _pad_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    # (eager's reflection and replication pads of three dims write into the input's suggested
    # format; their fake kernels give a contiguous result. Two dims: the fake kernels agree)
    mode = node.args[2] if len(node.args) > 2 else node.kwargs.get("mode", "constant")
    return _suggested(x) if mode in ("reflect", "replicate") else None


def _unpool_format(node: torch.fx.Node, x: torch.Tensor) -> torch.memory_format | None:
    return _suggested(x)  # (eager's max_unpool2d: the input's suggested format)


_LAYOUTS: dict[Callable, Callable] = {
    F.batch_norm: _batch_norm_format,
    torch.batch_norm: _batch_norm_format,
    F.max_pool1d: _max_pool1d_format,
    torch.max_pool1d: _max_pool1d_format,
    torch.roll: _roll_format,
    F.pad: _pad_format,
    torch._C._nn.pad: _pad_format,
    F.max_unpool2d: _unpool_format,
    torch._C._nn.max_unpool2d: _unpool_format,
}
# Tensor methods, by name
_METHOD_LAYOUTS: dict[str, Callable] = {"roll": _roll_format}


def eager_layouts(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy in which the results of the calls ``_LAYOUTS`` lists are made
    contiguous in the memory format eager's kernels give them (``gm`` itself is never
    changed)."""
    return _rewritten(gm, lambda node: _eager_format(node) is not None, _relayout)


def _eager_format(node: torch.fx.Node) -> torch.memory_format | None:
    """The memory format eager gives ``node``'s result where its fake value has another."""
    if node.op == "call_function":
        rule = _LAYOUTS.get(node.target)
    else:
        rule = _METHOD_LAYOUTS.get(node.target) if node.op == "call_method" else None
    value = node.meta.get("example_value")
    x = node.args[0] if node.args else node.kwargs.get("input")
    x = x.meta.get("example_value") if isinstance(x, torch.fx.Node) else None
    if rule is None or not isinstance(value, torch.Tensor) or not isinstance(x, torch.Tensor):
        return None
    fmt = rule(node, x)
    return None if fmt is None or value.is_contiguous(memory_format=fmt) else fmt


def _relayout(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    fmt = _eager_format(node)
    with graph.inserting_after(node):
        made = graph.call_method("contiguous", (node,), {"memory_format": fmt})
    node.replace_all_uses_with(made, delete_user_cb=lambda user: user is not made)
    made.meta = dict(node.meta)
    made.meta["example_value"] = node.meta["example_value"].contiguous(memory_format=fmt)


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


# -- reductions into an out= of another dtype -------------------------------------------------
# Eager reduces in the dtype of ``out=`` (the input cast first: ``torch.sum(floats, 0,
# out=int64)`` sums truncated values, ``torch.std(float32, 0, out=float64)`` is the float64
# input's); torch's out= decompositions reduce in the input's dtype and cast the result
# (aot_eager and inductor alike). sum/prod with ``dtype=out.dtype`` are eager's values for
# every pair of dtypes but prod of integers into a half-precision out; std/var of the input
# cast to out's dtype for every real floating pair.
_DTYPE_ARG = (torch.sum, torch.prod)
_CAST_INPUT = (torch.std, torch.var)


def reduction_outs(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose ``torch.sum``/``prod``/``std``/``var`` calls with an ``out=``
    of another dtype than their result's reduce in ``out``'s dtype, as eager does (``gm``
    itself is never changed)."""
    return _rewritten(gm, lambda node: _out_dtype(node) is not None, _reduce_in_out_dtype)


def _out_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """The dtype ``node`` (a reduction into ``out=``) must reduce in, where it is not the one
    its decomposition reduces in."""
    if node.op != "call_function" or node.target not in _DTYPE_ARG + _CAST_INPUT:
        return None
    out, x = node.kwargs.get("out"), node.args[0] if node.args else node.kwargs.get("input")
    if "dtype" in node.kwargs or not isinstance(out, torch.fx.Node):
        return None
    out, x = (
        v.meta.get("example_value") if isinstance(v, torch.fx.Node) else None for v in (out, x)
    )
    if not isinstance(out, torch.Tensor) or not isinstance(x, torch.Tensor):
        return None
    if out.dtype == x.dtype:
        return None
    if node.target in _CAST_INPUT:
        real = (x.is_floating_point(), out.dtype.is_floating_point)
        return out.dtype if all(real) else None
    if not x.is_floating_point() and not x.is_complex():
        if out.dtype == torch.int64:
            return None  # (integers and bools sum into int64 already)
        if node.target is torch.prod and out.dtype.itemsize == 2:
            return None
    return out.dtype


def _reduce_in_out_dtype(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    dtype = _out_dtype(node)
    if node.target in _DTYPE_ARG:
        node.kwargs = {**node.kwargs, "dtype": dtype}
        return
    x = node.args[0] if node.args else node.kwargs["input"]
    with graph.inserting_before(node):
        cast = graph.call_method("to", (x, dtype))
    cast.meta = dict(x.meta)
    cast.meta["example_value"] = x.meta["example_value"].to(dtype)
    if node.args:
        node.args = (cast, *node.args[1:])
    else:
        node.kwargs = {**node.kwargs, "input": cast}


# -- margin losses as eager computes them -------------------------------------------------------
def margin_losses(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose margin-loss calls compute eager's values and shapes (``gm``
    itself is never changed). Arguments eager rejects by their dtypes raise eager's error,
    naming the user's line; targets out of range and quantiles' ``q`` out of [0, 1] (which
    torch's decompositions do not check) raise eager's error after the program ran."""
    return _rewritten(gm, _replaced, _retarget_margin)


def _replaced(node: torch.fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in _REPLACED_METHODS
    if node.op != "call_function" or node.target not in _REPLACED:
        return False
    # (inside torch.func transforms (vmap, grad) torch's own call, its batching rules: the
    # composites' ``_assert_async`` has none, and the export failed)
    return not any(_transformed(a) for a in node.all_input_nodes)


def _transformed(node: torch.fx.Node) -> bool:
    value = node.meta.get("example_value")
    return isinstance(value, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(
        value
    )


def _retarget_margin(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    if node.op == "call_method":  # (self is the first argument of the function too)
        node.op, node.target = "call_function", _REPLACED_METHODS[node.target]
        return
    if node.target in _MARGIN_LOSSES:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs).arguments
        meta = {k: getattr(v, "meta", {}).get("example_value") for k, v in bound.items()}
        _check_margin_dtypes(meta, node)
        _check_margin_differentiable(meta, node)
    node.target = _REPLACED[node.target]


def _check_margin_dtypes(meta: dict, node: torch.fx.Node) -> None:
    """Eager's kernels' dtype errors: a Long target, a weight of the input's dtype, and (on
    the CPU) a half-precision input, which their kernels do not implement."""
    x, target, weight = meta.get("input"), meta.get("target"), meta.get("weight")
    for t, want in ((target, torch.long), (weight, getattr(x, "dtype", None))):
        if isinstance(t, torch.Tensor) and want is not None and t.dtype != want:
            raise OpError(
                f"expected scalar type {dtype_name(want, 'eager')} but found "
                f"{dtype_name(t.dtype, 'eager')}",
                node,
            )
    if isinstance(x, torch.Tensor) and isinstance(target, torch.Tensor):
        rejected = _dtype_probes.kernel_refuses(_MARGIN_KERNELS[node.target], (x, target), {})
        if rejected is not None:
            message, error = rejected
            raise error(message, node)


def _check_margin_differentiable(meta: dict, node: torch.fx.Node) -> None:
    """Eager's autograd error for an argument its kernel has no derivative for that requires
    grad where grad mode is on (the call's result requires grad): Dynamo's fake run goes through
    torch's Python decomposition registered for the Autograd key, which skips the check, so a
    compiled call computed a gradient for ``multi_margin_loss``'s ``weight``."""
    out = node.meta.get("example_value")
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        return
    name, arguments = _MARGIN_NOT_DIFFERENTIABLE.get(node.target, ("", ()))
    for argument in arguments:
        t = meta.get(argument)
        if isinstance(t, torch.Tensor) and t.requires_grad:
            raise OpError(
                f"The function '{name}' is not differentiable with respect to argument "
                f"'{argument}'. This input cannot have requires_grad True.",
                node,
            )


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        return torch.nn._reduction.legacy_get_string(size_average, reduce)
    return reduction


def _multi_margin_loss(
    input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """``F.multi_margin_loss`` whose unreduced loss is 0-d for a 0-d target, as eager's
    (``target.dim() > 0`` gives one loss per sample, of an unbatched input too), with eager's
    check of the targets."""
    reduction = _reduction(size_average, reduce, reduction)
    classes = input.shape[-1] if input.dim() else 1
    torch._assert_async(torch.all((target >= 0) & (target < classes)), "target out of range")
    x = torch.atleast_2d(input)
    checked = p in (1, 2) and x.dim() == 2 and x.shape[1] != 0 and target.dim() <= 1
    checked = checked and target.numel() == x.shape[0]
    checked = checked and (weight is None or (weight.dim() <= 1 and weight.numel() == x.shape[1]))
    if not checked:  # (the decomposition raises eager's error)
        return F.multi_margin_loss(input, target, p, margin, weight, reduction=reduction)
    x = _once_differentiable(x, "aten::multi_margin_loss_backward")
    # eager's kernel adds z = margin - x[target] + x[i] for i != target only where z > 0 (a
    # NaN score is left out); the decomposition's clamp_min(z, 0) kept it
    t = target.reshape(-1, 1)
    z = margin - torch.gather(x, 1, t) + x
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * weight.reshape(-1)[t]
    idx = torch.arange(x.shape[-1], device=x.device)
    h = torch.where((z > 0) & (idx != t), h, 0)
    loss = h.sum(-1) / x.shape[-1]
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape(()) if target.dim() == 0 else loss


def _multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``F.multilabel_margin_loss`` as eager's kernel computes it: per sample, the targets are
    the entries of ``target`` before the first -1 (a repeated one counts again), and the loss
    is ``sum over targets j and non-targets i of max(0, 1 - (x[j] - x[i])) / dim``."""
    reduction = _reduction(size_average, reduce, reduction)
    x, t = torch.atleast_2d(input), torch.atleast_2d(target)
    x = _once_differentiable(x, "aten::multilabel_margin_loss_backward")
    dim = x.shape[-1]
    # (eager checks every entry, those after the first -1 too)
    torch._assert_async(torch.all((t >= -1) & (t < dim)), "argument #2 'target' is out of range")
    idx = torch.arange(dim, device=x.device)
    end = torch.amin(torch.where(t == -1, idx, dim), dim=-1, keepdim=True)
    listed = idx < end  # (N, dim): target positions before the first -1
    tidx = torch.where(listed, t, 0)
    u = torch.gather(x, -1, tidx)  # (N, dim): the score of each listed target
    is_target = ((idx == tidx.unsqueeze(-1)) & listed.unsqueeze(-1)).any(dim=1)  # (N, dim)
    z = 1 - u.unsqueeze(-1) + x.unsqueeze(1)  # (N, target pos, class)
    # (eager adds z where z > 0: a NaN is left out)
    z = torch.where(listed.unsqueeze(-1) & ~is_target.unsqueeze(1) & (z > 0), z, 0)
    loss = z.sum(dim=(1, 2)) / dim
    if input.dim() < 2:
        loss = loss.reshape(())
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _once_differentiable(x, backward: str):
    """``x`` whose gradient eager's backward kernel ``backward`` gives: a double backward
    through it raises eager's error (its derivative is not implemented) where the composite
    would be differentiated again."""
    return _autodiff.once_differentiable(x, backward)


_MARGIN_LOSSES = {
    F.multi_margin_loss: _multi_margin_loss,
    F.multilabel_margin_loss: _multilabel_margin_loss,
}


def _one_hot(input, num_classes=-1):
    """``F.one_hot`` with eager's checks of its classes, raised by the asserts' lowering with
    eager's messages. Without ``num_classes`` (inferred from the values) or of a dtype other
    than int64, ``F.one_hot`` itself (its own errors)."""
    if num_classes == -1 or input.dtype != torch.int64:
        return F.one_hot(input, num_classes)
    torch._assert_async(torch.all(input >= 0), "Class values must be non-negative.")
    torch._assert_async(
        torch.all(input < num_classes), "Class values must be smaller than num_classes."
    )
    classes = torch.arange(num_classes, dtype=input.dtype, device=input.device)
    return (input.unsqueeze(-1) == classes).to(torch.int64)


def _checked_quantile(quantile: Callable) -> Callable:
    """``quantile`` (``torch.quantile``, ``torch.nanquantile``) with eager's check that a
    tensor ``q`` is in [0, 1] (its composite checks it on the host; the trace does not)."""

    def checked(input, q, *args, **kwargs):
        if isinstance(q, torch.Tensor):
            torch._assert_async(
                torch.all((q >= 0) & (q <= 1)), "quantile() q values must be in the range [0, 1]"
            )
        return quantile(input, q, *args, **kwargs)

    checked.__name__ = checked.__qualname__ = quantile.__name__
    return checked


_QUANTILES = {torch.quantile: _checked_quantile(torch.quantile)}
_QUANTILES[torch.nanquantile] = _checked_quantile(torch.nanquantile)
_REPLACED = {**_MARGIN_LOSSES, F.one_hot: _one_hot, **_QUANTILES, torch.istft: checked_istft}
_REPLACED_METHODS = {"quantile": _QUANTILES[torch.quantile]}
_REPLACED_METHODS["nanquantile"] = _QUANTILES[torch.nanquantile]
_REPLACED_METHODS["istft"] = checked_istft
# (the ATen kernels behind them, for their dtype support: ``_dtype_probes.kernel_refuses``)
_MARGIN_KERNELS = {
    F.multi_margin_loss: torch.ops.aten.multi_margin_loss.default,
    F.multilabel_margin_loss: torch.ops.aten.multilabel_margin_loss.default,
}
# (their ATen name and the floating arguments eager's autograd has no derivative for: the
# target of ``multilabel_margin_loss`` is an integer tensor, which cannot require grad)
_MARGIN_NOT_DIFFERENTIABLE = {F.multi_margin_loss: ("multi_margin_loss", ("weight",))}


def flex_statistics_in_float64(gm: torch.fx.GraphModule) -> None:
    """``flex_attention``'s fake kernel makes its log-sum-exp and row maxima float32 whatever
    the query's dtype, where eager's math kernel returns them in float64 for a float64 query
    (``return_lse`` gave float32): they are cast to float64 where they are read, and the graph's
    fake values propagated again. (``ops/_hops.flex_attention`` returns them in float64 for such
    a query, so the cast is exact.)"""
    flex = torch.ops.higher_order.flex_attention
    cast_op = torch.ops.prims.convert_element_type.default
    changed = False
    for node in gm.graph.find_nodes(op="call_function", target=flex):
        query = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if getattr(query, "dtype", None) != torch.float64:
            continue
        for user in list(node.users):
            if user.target is operator.getitem and user.args[1] in (1, 2):
                with gm.graph.inserting_after(user):
                    cast = gm.graph.call_function(cast_op, (user, torch.float64))
                cast.meta = {k: v for k, v in user.meta.items() if k != "val"}
                user.replace_all_uses_with(cast, delete_user_cb=lambda n, c=cast: n is not c)
                changed = True
    if not changed:
        return
    gm.recompile()
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    inputs = [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]
    mode = torch._guards.detect_fake_mode(inputs) or torch._subclasses.FakeTensorMode()
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*inputs)
