"""Dynamo graph -> functional, forward-only core-ATen graph."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import threading
from collections.abc import Sequence

import torch
import torch._decomp
import torch._decomp.decompositions
from torch._functorch.aot_autograd import aot_export_module
from torch._prims_common import suggest_memory_format

from torch2xla.capture import _foreach
from torch2xla.capture._autocast import autocast_fast_paths, autocast_kept, autocast_lstms
from torch2xla.capture._custom_function import preserve_custom_functions
from torch2xla.capture._dead import keep_dead, prune_kept
from torch2xla.capture._eager_calls import margin_losses
from torch2xla.capture._inference import inference_as_grad_mode
from torch2xla.capture._input_aliasing import InputAliasing
from torch2xla.capture._layouts import eager_layouts
from torch2xla.capture._rewrites import (
    flex_statistics_in_float64,
    pointwise_composites,
    preserve_rnns,
    preserve_sdpa,
    reduction_outs,
    strip_effect_tokens,
)
from torch2xla.capture._rnn_dropout import split_layers
from torch2xla.capture._stop_gradient import insert_stop_gradients, write_records
from torch2xla.capture._tensor_index import tensor_selects
from torch2xla.ops import _arg_checks, _dtype_probes


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
    aliasing: InputAliasing | None = None
    lifted_names: tuple[str, ...] = ()  # the Dynamo graph module's names of ``lifted``

    def inputs(self, args: Sequence) -> tuple:
        """The ATen graph's arguments for a call of the Dynamo graph with ``args``."""
        if self.aliasing is not None:
            args = self.aliasing.program_args(args)
        return (*self.lifted, *args) if self.lifted else tuple(args)


@functools.cache
def decomposition_table() -> dict:
    table = dict(torch._decomp.core_aten_decompositions())
    from torch2xla.ops import LOWERINGS

    # Keep ops we lower better than their decomposition does (fused attention, norms, ...).
    for op in list(table):
        if op in LOWERINGS:
            del table[op]
    for op in _LOSS_IN_INPUT_DTYPE:
        if op in table:
            table[op] = _in_input_dtype(op, table[op])
        else:  # lowered whole (binary_cross_entropy: ops/_derivatives.py) where dtypes agree
            decomposition = torch._decomp.decomposition_table[op]
            table[op] = _in_input_dtype(op, decomposition, lowered=True)
    table.update(_foreach.decompositions())  # (one op per tensor, as eager's slow path)
    for op in _IN_INPUT_MEMORY_FORMAT:
        if op in table:
            table[op] = _in_input_memory_format(table[op])
    # (decomposed ops whose eager kernels reject some dtypes: checked as they decompose)
    return _arg_checks.checked_decompositions(table)


# Losses whose eager kernels write the unreduced loss into a tensor of the input's dtype
# (``at::empty_like(input)``), then reduce it there: a float64 target or weight does not
# widen the result. torch's decompositions (and meta kernels) promote instead.
_aten = torch.ops.aten
_LOSS_IN_INPUT_DTYPE = (
    _aten.huber_loss.default,
    _aten.soft_margin_loss.default,
    _aten.binary_cross_entropy.default,
)


# Ops whose eager kernels return the input's suggested memory format (``native_channel_shuffle``:
# channels_last in, channels_last out) where torch's decomposition returns a contiguous result.
_IN_INPUT_MEMORY_FORMAT = (_aten.channel_shuffle.default, _aten.native_channel_shuffle.default)


def _in_input_memory_format(decomposition):
    """``decomposition`` (of a shape op taking ``input`` first) with its result in the input's
    suggested memory format, as eager's kernel allocates it; views of the input it returns
    are left."""

    def decompose(input, *args, **kwargs):
        out = decomposition(input, *args, **kwargs)
        if input.numel() == 0 or out._is_view() and out._base is input:
            return out
        return out.contiguous(memory_format=suggest_memory_format(input))

    decompose.__name__ = decompose.__qualname__ = getattr(decomposition, "__name__", "decompose")
    return decompose


def _in_input_dtype(op: torch._ops.OpOverload, decomposition, lowered: bool = False):
    """``decomposition`` of the loss ``op`` with eager's result dtype: the unreduced loss in
    the input's dtype, then reduced in it (``reduction``: 0 none, 1 mean, 2 sum). With
    ``lowered``, arguments of one dtype are left to the op's lowering (NotImplemented)."""
    names = [a.name for a in op._schema.arguments]
    defaults = {a.name: a.default_value for a in op._schema.arguments if a.has_default_value()}

    def decompose(*args, **kwargs):
        bound = {**dict(zip(names, args)), **kwargs}
        self = bound["self"]
        others = [v for k, v in bound.items() if k != "self" and isinstance(v, torch.Tensor)]
        if all(t.dtype == self.dtype for t in others):
            return NotImplemented if lowered else decomposition(*args, **kwargs)
        bound = {**defaults, **bound}
        reduction, bound["reduction"] = bound["reduction"], 0
        # (positionally: decompositions name their parameters otherwise than the schema)
        loss = decomposition(*(bound[n] for n in names)).to(self.dtype)
        if reduction == 1:
            return loss.mean()
        return loss.sum() if reduction == 2 else loss

    decompose.__name__ = decompose.__qualname__ = op.__name__
    return decompose


def scalar_placeholders(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Positions of inputs that are Python scalars wrapped by Dynamo as 0-d tensors.

    When a float argument changes between calls, Dynamo passes it as a 0-d tensor that the
    graph reads back with ``.item()``. Fake tensors cannot trace ``.item()``, so ``lower``
    specializes those values, and the cache key holds them.
    """
    return tuple(
        i
        for i, node in enumerate(gm.graph.find_nodes(op="placeholder"))
        if any(u.op == "call_method" and u.target == "item" for u in node.users)
    )


def _specialize_scalars(gm: torch.fx.GraphModule, args: list) -> torch.fx.GraphModule:
    positions = scalar_placeholders(gm)
    if not positions:
        return gm
    gm = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    placeholders = gm.graph.find_nodes(op="placeholder")
    for i in positions:
        value = args[i].item()
        for item in [u for u in placeholders[i].users if u.op == "call_method"]:

            def to_value(n, item=item, value=value):
                return value if n is item else n

            for user in list(item.users):
                user.args = torch.fx.node.map_arg(user.args, to_value)
                user.kwargs = torch.fx.node.map_arg(user.kwargs, to_value)
            gm.graph.erase_node(item)
    gm.recompile()
    return gm


def prepare(
    gm: torch.fx.GraphModule, args: list, aliasing: InputAliasing | None = None
) -> torch.fx.GraphModule:
    """The Dynamo graph as it is exported (``gm`` itself is left as it is); ``aliasing``: how
    ``args`` overlap in memory (then it takes ``aliasing.export_args(args)``)."""
    gm = _specialize_scalars(gm, args)
    if aliasing is not None:  # one base per group, the inputs views of it in the graph
        gm = aliasing.rewrite(gm)
    # 0-d integer tensors as indices gather and scatter at their values (eager reads them).
    gm = tensor_selects(gm)
    # stacked RNN calls with dropout in training: a call per layer, eager's dropout between
    gm = split_layers(gm)
    # LSTM calls under CPU autocast cast as eager's oneDNN layer casts (``_autocast.py``).
    gm = autocast_lstms(gm)
    # nn.TransformerEncoderLayer's fast path returns autocast's dtype under CPU autocast
    gm = autocast_fast_paths(gm)
    # nn.LSTM/GRU/RNN calls become custom ops export keeps whole (lowered as scans).
    gm = preserve_rnns(gm)
    # sdpa calls too (export's fake tensors would pick the math kernel on CUDA).
    gm = preserve_sdpa(gm)
    # margin losses as eager computes them (torch decomposes them before our table)
    gm = margin_losses(gm)
    # sums/products into an out= of another dtype reduce in it (torch's decomposition casts after)
    gm = reduction_outs(gm)
    # addcdiv/addcmul whole again (Dynamo splits them: each part rounded)
    gm = pointwise_composites(gm)
    # results laid out as eager's kernels lay them out (the fake kernels keep the input's)
    gm = eager_layouts(gm)
    # torch.autograd.Function calls with their own backward, kept whole (custom_vjp)
    gm = preserve_custom_functions(gm)
    # inference-mode blocks as the grad-mode switches they make (AOT cannot trace some ops
    # in one), before the stop points are read from the switches
    gm = inference_as_grad_mode(gm, torch.is_grad_enabled())
    # The export below runs without autograd: keep eager's .detach()/no_grad stop points.
    gm = insert_stop_gradients(gm, torch.is_grad_enabled())
    # Dead values stay computed until after the export, for the checks of their ops
    # (``prune_kept`` after the export keeps only those).
    return keep_dead(gm)


def relower(
    aten_gm: torch.fx.GraphModule,
    lifted: tuple,
    args: list,
    mutations: tuple[int, ...],
    num_user_outputs: int,
) -> LoweredGraph:
    """Export an ATen graph again on concrete ``args``: a graph rewritten after a symbolic
    export (bucketing's, ``guards/_rewrite.py``), whose inputs are ``lifted`` then ``args``,
    whose first outputs are the new values of the inputs ``mutations`` names."""
    with (
        exporting(),
        _mkldnn_disabled(),
        _functorch_depth_kept(),
        autocast_kept(),
        torch.no_grad(),
        torch.fx.traceback.preserve_node_meta(),
    ):
        gm, sig = aot_export_module(
            aten_gm, [*lifted, *args], trace_joint=False, decompositions=decomposition_table()
        )
    carry_marks(aten_gm, gm)
    forget_real_tensors(gm)
    strip_effect_tokens(gm, len(sig.input_tokens), len(sig.output_tokens))
    # Tensors the rewritten graph holds as attributes (not as inputs) come back lifted, first.
    named = {
        **dict(aten_gm.named_parameters(remove_duplicate=False)),
        **dict(aten_gm.named_buffers()),
    }
    held = tuple(named[n] for n in (*sig.parameters, *sig.buffers))
    placeholders = len(gm.graph.find_nodes(op="placeholder"))
    if placeholders != len(held) + len(lifted) + len(args) or (
        sig.parameters_to_mutate or sig.buffers_to_mutate or sig.user_inputs_to_mutate
    ):
        raise RuntimeError(
            f"torch2xla internal error: the rewritten graph exported with {placeholders} inputs "
            f"for {len(held)} held tensors, {len(lifted)} lifted and {len(args)} arguments, or "
            "with mutations; please report it"
        )
    return LoweredGraph(
        gm, (*held, *lifted), tuple(m + len(held) for m in mutations), num_user_outputs
    )


# node.meta keys of eager's errors for a node, which ``_arg_checks.check_graph`` raises
_MARKS = (_arg_checks.REJECTED, _dtype_probes.REFUSED_CALL)


def carry_marks(src: torch.fx.GraphModule, dst: torch.fx.GraphModule) -> None:
    """Give the nodes of ``dst``, exported again from the ATen graph ``src``, what ``src``'s
    nodes knew: the op each was decomposed from (``original_aten``: eager's messages name
    it, ``F.cross_entropy``'s "Target 9 is out of bounds."; the export again names the node
    itself), by op and user line in order; the errors eager raises for them
    (``mark_decomposed``, ``mark_calls``) on the node of the same op and user line, else of
    the same line, else the first op."""
    ops = [n for n in dst.graph.nodes if n.op == "call_function"]
    same_call: dict = {}
    for node in src.graph.nodes:
        if node.op == "call_function":
            key = (node.meta.get("stack_trace"), str(node.target))
            same_call.setdefault(key, []).append(node)
    for n in ops:
        found = same_call.get((n.meta.get("stack_trace"), str(n.target)))
        if found:
            original = found.pop(0).meta.get("original_aten")
            if original is not None:
                n.meta["original_aten"] = original
    for node in src.graph.nodes:
        for key in _MARKS:
            if key not in node.meta or not ops:
                continue
            line = [n for n in ops if n.meta.get("stack_trace") == node.meta.get("stack_trace")]
            same = [n for n in line if str(n.target) == str(node.target)]
            (same or line or ops)[0].meta.setdefault(key, node.meta[key])


def written_inputs(gm: torch.fx.GraphModule) -> frozenset[int]:
    """The positions of the inputs of the Dynamo graph ``gm`` that an in-place op or ``out=``
    writes into, or into a view of. (Not the example values' version counters: Dynamo's
    fakification of an input that is a view of another moves them.)"""
    return frozenset(write_records(gm)[1])


def reads_storage_offsets(gm: torch.fx.GraphModule) -> bool:
    """Whether the Dynamo graph ``gm`` may read its inputs' storage offsets (an ``as_strided``
    call: its explicit offset counts from the storage's start)."""
    for node in gm.graph.nodes:
        target = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        if node.op in ("call_method", "call_function") and "as_strided" in str(target):
            return True
    return False


def _turns_grad_on(gm: torch.fx.GraphModule) -> bool:
    """Whether ``gm`` or a graph it holds (a higher-order op's) switches grad mode on."""
    return any(
        n.args[:1] != (False,)
        for m in gm.modules()
        if isinstance(m, torch.fx.GraphModule)
        for n in m.graph.find_nodes(op="call_function", target=torch._C._set_grad_enabled)
    )


def lower(gm: torch.fx.GraphModule, args: list) -> LoweredGraph:
    """Export ``gm`` called on concrete ``args`` to a functional core-ATen graph."""
    # Inputs that overlap in memory and are written: exported as views of one base per group.
    aliasing = InputAliasing.of(args, written_inputs(gm), reads_storage_offsets(gm))
    # the user's calls of bool, integer and complex tensors eager's kernels do not implement
    refused = _dtype_probes.refused_calls(gm)
    gm = prepare(gm, args, aliasing)
    if aliasing is not None:
        args = aliasing.export_args(args)
    # (inputs detached in a graph with torch.func's differentiating transforms: the export
    # traces no autograd of its own, but the transforms turn grad on, so an output computed
    # from an input that requires grad (``jacrev`` of a module: its parameters) would require
    # grad, and AOT would trace a joint graph it cannot)
    # (likewise a graph called under no_grad that never turns grad on: nothing it makes is
    # tracked, and with its inputs' autograd a view taken under no_grad and written in place,
    # returned (``x[0].add_(1)``), made AOT's read of the output's grad_fn raise, as eager's)
    if gm.graph.find_nodes(
        op="call_function", target=torch._C._functorch._grad_increment_nesting
    ) or not (torch.is_grad_enabled() or _turns_grad_on(gm)):
        args = [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
    with export_scope() as rejected, _shape_env_for_loops(gm):
        aten_gm, sig = aot_export_module(
            gm, list(args), trace_joint=False, decompositions=decomposition_table()
        )
    forget_real_tensors(aten_gm)
    # decomposed calls eager rejects by their dtypes, for _arg_checks.check_graph
    _arg_checks.mark_decomposed(aten_gm, rejected)
    _dtype_probes.mark_calls(aten_gm, refused)
    # Side-effecting ops (linalg error checks) come wrapped with effect tokens: unwrap them.
    strip_effect_tokens(aten_gm, len(sig.input_tokens), len(sig.output_tokens))
    flex_statistics_in_float64(aten_gm)
    prune_kept(aten_gm)  # dead ops only where they check values
    named = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers())}
    lifted_names = [*sig.parameters, *sig.buffers]
    lifted = tuple(named[n] for n in lifted_names)
    placeholders = [n.name for n in aten_gm.graph.find_nodes(op="placeholder")]
    input_index = {name: i for i, name in enumerate(placeholders)}
    buffer_placeholder = {b: p for p, b in sig.inputs_to_buffers.items()}
    # Parameters held as graph attributes (an optimizer step's params) are mutated too.
    param_placeholder = {b: p for p, b in sig.inputs_to_parameters.items()}
    num_mutated = (
        len(sig.parameters_to_mutate) + len(sig.buffers_to_mutate) + len(sig.user_inputs_to_mutate)
    )
    outputs = aten_gm.graph.find_nodes(op="output")[0].args[0]
    mutations = []
    for out in outputs[:num_mutated]:
        if out.name in sig.user_inputs_to_mutate:
            target = sig.user_inputs_to_mutate[out.name]
        elif out.name in sig.parameters_to_mutate:
            target = param_placeholder[sig.parameters_to_mutate[out.name]]
        else:
            target = buffer_placeholder[sig.buffers_to_mutate[out.name]]
        mutations.append(input_index[target])
    return LoweredGraph(
        aten_gm, lifted, tuple(mutations), len(sig.user_outputs), aliasing, tuple(lifted_names)
    )


_compiling_lock = threading.Lock()
_compiling = 0  # exports in progress, in any thread
_was_compiling = False


@contextlib.contextmanager
def exporting():
    """Scope of an ATen export, marked as torch marks its own compiles.

    NOTE: FX's tracer sets a process-wide flag (``torch.fx._symbolic_trace._is_fx_tracing_flag``)
    while it traces, and a ``torch.compile``d function called while it is set raises "Detected
    that you are using FX to symbolically trace a dynamo-optimized function", in any thread,
    unless ``torch.compiler.is_compiling()``. Dynamo keeps that flag (also process-wide) set for
    the whole of its own compiles (``_compile_session_context``), so backends that export while
    Dynamo compiles never trip it; ours exports at a graph's first call with a new signature,
    after Dynamo's compile. Setting the flag for the length of the export lets other threads'
    compiled calls run as they would during any Dynamo compile: compiled, through their caches.
    (``torch._dynamo.config.error_on_nested_fx_trace`` is per-thread since torch 2.13, so
    turning it off here reached only the exporting thread.)
    """
    global _compiling, _was_compiling
    compiler = torch.compiler
    if not hasattr(compiler, "_is_compiling_flag"):  # a torch without the flag
        with _trace_records_released():
            yield
        return
    with _compiling_lock:
        if _compiling == 0:
            _was_compiling = compiler._is_compiling_flag
            compiler._is_compiling_flag = True
        _compiling += 1
    try:
        with _trace_records_released():
            yield
    finally:
        with _compiling_lock:
            _compiling -= 1
            if _compiling == 0:
                compiler._is_compiling_flag = _was_compiling


def forget_real_tensors(gm: torch.fx.GraphModule) -> None:
    """The fake modes of ``gm``'s values forget the real tensors they were made from.

    NOTE: a fake mode's describer keeps a weak reference to every real tensor it converted
    (the export's inputs: the user's parameters), for as long as the mode lives, and the
    graph's fake values keep it alive with the compiled signature; ``torch.utils.swap_tensors``
    refuses a tensor with weak references (``m.double()`` with swapped parameters,
    ``runtime/_swap.py``). Dynamo clears its own mode so after its compiles; this is its
    clearing, for the modes of our exports (a later conversion of the same tensor makes a new
    fake tensor where the memo would have returned the old one)."""
    modes = {
        id(v.fake_mode): v.fake_mode
        for n in gm.graph.nodes
        for v in [n.meta.get("val")]
        if hasattr(v, "fake_mode")
    }
    for mode in modes.values():
        describer = mode.fake_tensor_converter.meta_converter.describer
        describer.lookup_tensor.clear()
        describer.lookup_storage.clear()


# make_fx's record of its last trace (fake tensor id -> graph node), for torch.export's leak
# check; torch 2.11-2.13 name it so.
_LAST_TRACE = getattr(
    torch.fx.experimental.proxy_tensor, "_FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT", None
)


@contextlib.contextmanager
def _trace_records_released():
    """Forgets what torch's tracing keeps of the exports made inside, once they end.

    NOTE: two process-wide records of torch's tracing outlive an export, each holding its fake
    tensors, and through them its fake mode and shape environment, until the next export:
    - make_fx leaves the last trace's placeholders in a module-level map (emptied only by the
      next trace) for torch.export's own check within that export. Only the entries made
      inside are removed: a torch.export running in another thread keeps its own.
    - AOT autograd's philox RNG tracker resets its states as its trace ends, still inside the
      trace's fake mode, so its empty seed tensors are fake tensors of that mode. They are
      reset again, outside, where no state is recorded (a trace in another thread records
      into states it resets itself first).
    """
    before = dict(_LAST_TRACE) if _LAST_TRACE is not None else {}
    try:
        yield
    finally:
        if _LAST_TRACE is not None:
            for key, node in list(_LAST_TRACE.items()):
                if before.get(key) is not node:
                    _LAST_TRACE.pop(key, None)
        _reset_philox_tracker()


def _reset_philox_tracker() -> None:
    from torch._decomp.decompositions_for_rng import PhiloxStateTracker
    from torch._subclasses.fake_tensor import FakeTensor

    states = [
        getattr(PhiloxStateTracker, n, None) for n in ("running_state", "fwd_state", "bwd_state")
    ]
    seeds = [getattr(st, "seed", None) for st in states]
    if all(isinstance(t, FakeTensor) and t.numel() == 0 for t in seeds):
        with torch._subclasses.fake_tensor.unset_fake_temporarily():
            PhiloxStateTracker.reset()


@contextlib.contextmanager
def export_scope():
    """The contexts an AOT export of a Dynamo graph runs in; yields the calls whose arguments
    eager rejects (``_arg_checks.recording``). mkldnn off: otherwise LSTM lowers to the opaque
    ``mkldnn_rnn_layer``; ``preserve_node_meta`` keeps each node's user stack trace, for error
    messages."""
    with (
        exporting(),
        _mkldnn_disabled(),
        _functorch_depth_kept(),
        autocast_kept(),
        torch.no_grad(),
        torch.fx.traceback.preserve_node_meta(),
        _arg_checks.recording() as rejected,
    ):
        yield rejected


@contextlib.contextmanager
def _functorch_depth_kept():
    """The torch.func transforms' interpreter stack as it was before the export: the trace of
    a transformed graph (``vmap(grad(f))``) pushes its levels, and an export that fails
    between a graph's increment and decrement of the nesting left them pushed, so the eager
    run that follows it (the fallback) computed at the wrong level (per-sample gradients of
    zeros). Dynamo restores it so around its own frames."""
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    try:
        yield
    finally:
        torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)


@contextlib.contextmanager
def _shape_env_for_loops(gm: torch.fx.GraphModule):
    """A fake mode with a shape environment (static shapes: every size stays an int) for the
    export of a graph calling ``while_loop``, whose fake kernel needs one (AOT's own static
    fake mode has none: ``'NoneType' object has no attribute 'ignore_fresh_unbacked_symbols'``)."""
    if not _calls(gm, torch.ops.higher_order.while_loop):
        yield
        return
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True)
    with torch._guards.tracing(torch._guards.TracingContext(mode)):
        yield


def _calls(gm: torch.fx.GraphModule, op) -> bool:
    """Whether ``gm`` or a module it holds (a higher-order op's subgraph) calls ``op``."""
    return any(
        n.op == "call_function" and n.target is op
        for m in gm.modules()
        if isinstance(m, torch.fx.GraphModule)
        for n in m.graph.nodes
    )


# The export's LSTM decomposition takes oneDNN's opaque ``mkldnn_rnn_layer`` where oneDNN is
# enabled (``select_one_layer_lstm_function`` reads ``torch._C._get_mkldnn_enabled()``); ours
# lowers the plain one. The switch is process-wide: turned off around each export, it was off
# for every other thread too, whose eager ops took torch's kernels (gelu gave -0 where oneDNN's
# gives +0) and whose compiled calls keyed the off state (``capture/_untracked.py``), storing
# a program built with it on under "off": a later call with oneDNN off got oneDNN's result.
# So the decomposition's choice is made per thread instead, the switch left alone.
_no_onednn_lstm = threading.local()


def _select_lstm_layer(select):
    @functools.wraps(select)
    def select_layer(input, hx, params):
        if getattr(_no_onednn_lstm, "on", False):
            return torch._decomp.decompositions.one_layer_lstm
        return select(input, hx, params)

    select_layer.torch2xla_wrapped = True
    return select_layer


@contextlib.contextmanager
def _mkldnn_disabled():
    """The export's LSTM decomposition without oneDNN, in this thread only."""
    decomps = torch._decomp.decompositions
    if not getattr(decomps.select_one_layer_lstm_function, "torch2xla_wrapped", False):
        decomps.select_one_layer_lstm_function = _select_lstm_layer(
            decomps.select_one_layer_lstm_function
        )
    prev = getattr(_no_onednn_lstm, "on", False)
    _no_onednn_lstm.on = True
    try:
        yield
    finally:
        _no_onednn_lstm.on = prev
