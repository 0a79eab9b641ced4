"""Rewrites of the Dynamo graph before its export and of the exported ATen graph.

- ``preserve_rnns``: ``torch.lstm``/``torch.gru``/``torch.rnn_tanh``/``torch.rnn_relu`` calls
  retargeted to torch2xla's custom ops of the same schema, which export keeps whole (lowered as
  scans: ``ops/_rnn.py`` tells which calls stay decomposed).
- ``preserve_sdpa``: sdpa calls retargeted to ``torch2xla::sdpa``/``sdpa_dropout``, which
  export keeps whole (``ops/_sdpa.py`` tells why).
- ``pointwise_composites``: ``addcdiv``/``addcmul`` calls that Dynamo split into
  ``div``/``mul`` then ``mul``+``add`` or ``fma`` put back whole: each part rounded to the
  tensors' dtype where eager's kernel rounds once (bfloat16 Adam steps), and in another order
  (``t1 / t2 * value`` where eager computes ``value * t1 / t2``).
- ``reduction_outs``: ``torch.sum``/``prod``/``std``/``var`` into an ``out=`` of another dtype
  reduce in that dtype, as eager (torch's out= decompositions reduce first, then cast).
- ``strip_effect_tokens``: AOTAutograd's effect tokens removed from the ATen graph
  (``ops/_effects.py``).

Calls retargeted to eager's semantics (margin losses, ``one_hot``, ``quantile``, ``istft``) are
in ``_eager_calls.py``, the layouts eager's kernels choose for their outputs in ``_layouts.py``.
The custom ops and their lowerings stay in ``ops/``; only the graph rewriting is here.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable

import torch

# (imported for the custom ops ``torch.ops.torch2xla.*`` they define, and for the tracing
# kernels of quantile's composites, which keep Dynamo from breaking the graph at them)
from torch2xla.capture import _host_checks  # noqa: F401
from torch2xla.ops import _autodiff, _dtype_probes, _rnn, _sdpa  # noqa: F401


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
