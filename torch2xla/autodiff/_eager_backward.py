"""What eager's backward of a Dynamo graph does besides computing gradients: the errors it
raises, and the outputs whose in-place changes make it raise.

Our backward is ``jax.vjp``'s, which has no version counters, no "not implemented"
derivatives and no dtype checks of its own, so eager's backward-time errors are found from
eager's autograd graph of the Dynamo graph's example values (fake tensors Dynamo computed with
autograd on, user-level ops as the user called them):

- ``backward_errors``: the backward of those values is run once, on fake tensors, with every
  output's gradient defined. It raises what eager's would: a tensor saved for the backward and
  changed in place afterwards inside the graph (``y = x.exp(); y.add_(1)``), an op whose
  derivative eager does not implement (``floor_divide``, ``NotImplemented`` nodes), a formula
  that fails on an undefined gradient (``dist(a, b, p=0)`` with both requiring grad) or gives
  a gradient of the wrong shape (``scatter`` of a ``src`` larger than its index) or operands
  that do not broadcast (``scatter_reduce``'s amax/amin/prod of such a ``src``), and the
  dtype checks of backward kernels that fake kernels skip (``ops._arg_checks.CHECKS``:
  ``huber_loss_backward`` with a target of another dtype), and a custom Function's output it
  saved with ``ctx.save_for_backward`` that the graph changed in place after the call (the
  fake run saves nothing for a Function: ``_saved_outputs_written``). Only those errors are
  trusted; any other failure of the fake run (an op fake tensors cannot run) is logged and
  ignored. Where it raises, each output is run alone to find which outputs lead to it: the
  compiled graph's call attaches the error to those outputs (``RaiseAtBackward``), so it is
  raised when a gradient flows through them, as eager raises when its backward reaches the
  node.
- ``saved_per_output``: per output, the inputs and outputs whose memory some node of eager's
  graph on its backward's path saves (an ``exp`` or ``softmax`` output, ``sin``'s input). The
  training ``autograd.Function`` checks those tensors' versions (``_versions``), so that a
  user's in-place change of one between the call and a backward through that output raises
  eager's error, and a backward through the other outputs runs, as eager's. A custom
  Function's node saves nothing in Dynamo's fake run: the inputs and outputs its
  ``ctx.save_for_backward`` saves are read from its subgraphs (``_function_saves``).
- ``output_saves``: per output, the nodes of eager's graph that save tensors and that its
  backward runs. A backward without ``retain_graph`` frees the saved tensors of the nodes it
  runs; a later backward raises "backward through the graph a second time" only where it
  runs one of those (``a, c = f(x); a.sum().backward(); c.sum().backward()`` runs in eager
  where ``a`` and ``c`` share no such node). The training ``autograd.Function`` is one node
  for all outputs, so it keeps this record to free and raise as eager's nodes would.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from torch2xla.autodiff._connected import eagers_own, gradient_edge, graph_values
from torch2xla.autodiff._versions import eager_view_names, modified_message
from torch2xla.capture._custom_function import CtxSaves, saved_by_ctx
from torch2xla.capture._inference import inference_nodes
from torch2xla.capture._wrappers import unwrapped

log = logging.getLogger(__name__)


class _Rejected(RuntimeError):
    """A backward kernel's arguments that eager rejects (``CHECKS``), raised in a fake run."""


# Backward kernels of the mean-reduced losses whose fake kernels (torch's Python
# decompositions) compute ``1 / self.numel()``: of an empty ``self`` they raise
# ZeroDivisionError where eager's kernel returns an empty gradient (``self`` is their second
# argument).
_aten = torch.ops.aten
_MEAN_BY_NUMEL = {
    _aten.mse_loss_backward.default,
    _aten.smooth_l1_loss_backward.default,
    _aten.huber_loss_backward.default,
    _aten.soft_margin_loss_backward.default,
    _aten.binary_cross_entropy_backward.default,
}


class _Checked(TorchDispatchMode):
    """Applies ``CHECKS`` to the ATen calls of a fake backward (their fake kernels skip them);
    the losses' backwards of an empty input give eager's empty gradient (``_MEAN_BY_NUMEL``)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # (imported here: the op registry needs torch's prims, which the backend loads first)
        from torch2xla.ops._arg_checks import CHECKS

        kwargs = kwargs or {}
        checker = CHECKS.get(func)
        names = [a.name for a in func._schema.arguments]
        if checker is not None:
            rejected = checker({**dict(zip(names, args)), **kwargs}, None)
            if rejected is not None:
                raise _Rejected(rejected if isinstance(rejected, str) else rejected[0])
        if func in _MEAN_BY_NUMEL:
            self_ = {**dict(zip(names, args)), **kwargs}["self"]
            if self_.numel() == 0:
                return torch.empty_like(self_, memory_format=torch.contiguous_format)
        return func(*args, **kwargs)


def _fake_mode(values: Sequence[Any]):
    return next((t.fake_mode for t in values if hasattr(t, "fake_mode")), None)


def _devices(values: Sequence[Any]) -> int:
    """How many device types the tensors among ``values`` are on."""
    return len({t.device.type for t in values if isinstance(t, torch.Tensor)})


def _differentiated(values: Sequence[Any]) -> list[int]:
    return [i for i, t in enumerate(values) if isinstance(t, torch.Tensor) and t.requires_grad]


def backward_errors(gm: torch.fx.GraphModule) -> dict[int, RuntimeError]:
    """Per output of the Dynamo graph ``gm`` whose gradient eager's backward cannot compute,
    the error it raises (see the module's docstring); empty where none raises."""
    found = graph_values(gm)
    if found is None:
        return {}
    inputs, outputs = found
    roots = _differentiated(outputs)
    leaves = _frontier([outputs[i] for i in roots])
    mode = _fake_mode([*inputs, *outputs])
    if not leaves or not roots or mode is None or _devices([*inputs, *outputs]) > 1:
        # NOTE: with tensors on two devices (a CPU scalar beside CUDA tensors) the autograd
        # engine runs the fake backward on a device thread beside this one, both entering the
        # fake mode's kernels; where it raises, the device thread can still be in a kernel as
        # ``grad`` returns, and sets the mode's in-kernel flag after ``_run`` restored it: the
        # next fake op (``output_saves``') failed its assertion (test_gpu's CPU-scalar test on
        # the H200, again after 5a7f8a8's restore). No analysis there: eager's backward-time
        # errors of mixed-device graphs are left to the backward itself.
        return {}
    errors = {}
    if _run(mode, [outputs[i] for i in roots], leaves) is not None:
        for i in roots:
            error = _run(mode, [outputs[i]], leaves)
            if error is not None:
                errors[i] = error
    for i, error in _saved_outputs_written(gm, outputs, roots).items():
        errors.setdefault(i, error)
    return errors


def _saved_outputs_written(gm: torch.fx.GraphModule, outputs: list, roots) -> dict:
    """Per output of ``roots`` whose backward runs a custom Function's node, one of whose
    outputs it saved with ``ctx.save_for_backward`` the graph changed in place after the call
    (``y = F.apply(x); y.mul_(2)``): eager's error. Dynamo's fake run of the call saves
    nothing on the node, so the fake backward (``_run``) cannot raise it; the output's example
    value counts the writes after the call beyond those its forward made (``CtxSaves``)."""
    keep: list = []
    written: dict[int, RuntimeError] = {}
    for node_id, ctx in _function_saves(gm, keep).items():
        for t, at_call in ctx.outputs:
            if t._version != at_call:
                written.setdefault(
                    node_id,
                    RuntimeError(modified_message(t, t._version, at_call, t.output_nr, ctx.name)),
                )
    if not written:
        return {}
    errors = {}
    for i in roots:
        for node in _reachable([outputs[i].grad_fn]):
            if id(node) in written:
                errors[i] = written[id(node)]
                break
    return errors


def _reachable(roots: Sequence, stop: Callable[[Any], bool] | None = None) -> Iterator:
    """The autograd nodes reachable from ``roots`` (``grad_fn``s, None skipped), each once,
    depth first; below a node for which ``stop`` is true the walk does not go. (Nodes are
    keyed by ``id()``: the walk keeps each alive until it ends.)"""
    seen: set[int] = set()
    keep = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        yield node
        if stop is None or not stop(node):
            stack.extend(nxt for nxt, _ in node.next_functions)


# The node Dynamo's example inputs that require grad and are not leaves hang from
# (``meta_utils._backward_error``: a ``DelayedError``): their history before the graph.
_EXAMPLE_INPUT = "torch::autograd::Error"


def _frontier(outputs: Sequence[torch.Tensor]) -> list:
    """Where the graph's autograd history begins, below ``outputs``: the leaves, and the
    gradient edges of the example inputs as they were before the graph ran.

    NOTE: not the example inputs themselves: an input the graph writes in place (``v.mul_(
    x[1])``, ``v`` a view of the input ``x``) has the write's node as its history now, and a
    backward to it would stop above the nodes the write put below it, whose saved tensors
    (``x[1]``, changed by the write through ``v``) make eager's backward raise.
    """
    found: dict[tuple[int, int], Any] = {}

    def start(node) -> bool:  # (AccumulateGrad: a leaf)
        return isinstance(getattr(node, "variable", None), torch.Tensor) or (
            node.name() == _EXAMPLE_INPUT
        )

    for node in _reachable([o.grad_fn for o in outputs], stop=start):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            found[(id(node), 0)] = variable
        elif node.name() == _EXAMPLE_INPUT:
            found[(id(node), 0)] = torch.autograd.graph.GradientEdge(node, 0)
    return list(found.values())


def _run(mode, outputs: list, inputs: list) -> RuntimeError | None:
    """The error eager's backward raises from ``outputs`` (fake) to ``inputs``, or None."""
    in_kernel = mode.in_kernel_invocation
    try:
        with mode, _Checked():
            grads = [torch.ones_like(o) for o in outputs]
            torch.autograd.grad(outputs, inputs, grads, retain_graph=True, allow_unused=True)
    except _Rejected as e:
        return RuntimeError(str(e))
    except RuntimeError as e:
        # (and the engine's shape check of a formula's result on the user-level ops:
        # ``scatter``'s of a ``src`` larger than its index, ``src.gather``'s shape)
        if eagers_own(e) or (type(e) is RuntimeError and "returned an invalid gradient" in str(e)):
            return type(e)(eager_view_names(str(e)))
        broadcast = _eager_broadcast_error(e)
        if broadcast is not None and not _sparse_gradients(outputs):
            return broadcast
        log.debug("torch2xla: the fake backward of the example values failed: %r", e)
    except (AssertionError, ZeroDivisionError) as e:
        # NOTE: an analysis, not the user's computation: where torch's fake machinery itself
        # fails (a CPU scalar beside CUDA tensors: the autograd engine runs the CUDA part on
        # its device thread, where the fake mode's in-kernel state asserts; a Python
        # decomposition dividing by an empty tensor's ``numel()``, as the losses' in
        # ``_MEAN_BY_NUMEL`` did), the call goes on without eager's backward-time errors, as
        # eager's own backward would run.
        log.debug("torch2xla: the fake backward of the example values failed: %r", e)
    finally:
        # (the engine's device thread and this one enter the mode's kernels at once there,
        # and one of them may restore the other's in-kernel flag: left set, the next op on a
        # fake value, ``output_saves``' own, failed its assertion; the engine is done here)
        mode.in_kernel_invocation = in_kernel
    return None


def _sparse_gradients(outputs: list) -> bool:
    """Whether eager's backward from ``outputs`` makes a sparse gradient (``sparse=True``
    embeddings): their fake backward kernels size by values fake tensors lack (an
    ``EmbeddingBag``'s per-sample-weight gradient came out of 0 rows), so a broadcast their
    formulas fail there is no error of eager's."""
    roots = [o.grad_fn for o in outputs if isinstance(o, torch.Tensor)]
    return any(getattr(node, "_saved_sparse", False) is True for node in _reachable(roots))


# A broadcast a formula's operands fail, as torch's reference broadcasting (the fake kernels')
# words it: the mismatching operand's size at a dim counted from the end, the shape so far.
_FAKE_BROADCAST = re.compile(
    r"Attempting to broadcast a dimension of length (\d+) at (-\d+)! Mismatching argument at "
    r"index \d+ had torch\.Size\(\[[^]]*\]\); but expected shape should be broadcastable to "
    r"\[([^]]*)\]"
)


def _eager_broadcast_error(e: RuntimeError) -> RuntimeError | None:
    """Eager's error where a backward formula's operands do not broadcast (``scatter_reduce``'s
    amax/amin/prod formula for a ``src`` larger than its index compares ``src`` with the result
    gathered at the index), or None for other errors. Fake kernels check shapes as eager's
    TensorIterator does, in other words: eager's "The size of tensor a (A) must match the size
    of tensor b (B) at non-singleton dimension d", ``a`` the shape so far, ``d`` from the
    front."""
    found = _FAKE_BROADCAST.search(str(e)) if type(e) is RuntimeError else None
    if found is None:
        return None
    length, at, common = int(found[1]), int(found[2]), found[3]
    sizes = [int(s) for s in common.split(",") if s.strip()]
    dim = len(sizes) + at
    if not 0 <= dim < len(sizes):
        return None
    return RuntimeError(
        f"The size of tensor a ({sizes[dim]}) must match the size of tensor b ({length}) at "
        f"non-singleton dimension {dim}"
    )


def saved_per_output(gm: torch.fx.GraphModule) -> tuple[tuple, dict[int, tuple]] | None:
    """Per output of the Dynamo graph ``gm``, the inputs and the outputs whose memory a node
    that its backward runs saves (``(inputs, outputs)``; None for an output eager does not
    track): an in-place change of one between the call and a backward through that output
    makes eager's backward raise, a backward through the other outputs runs. Beside them, per
    output whose memory is saved, how eager's error names the saved tensor (``(shape,
    output_nr, op)``: the intermediate a view output shares, the node that made it). None
    where some example value is missing."""
    found = graph_values(gm)
    if found is None:
        return None
    storages: dict[StorageWeakRef, list[tuple[int, int]]] = {}
    for side, values in enumerate(found):
        for i, t in enumerate(values):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                storages.setdefault(StorageWeakRef(t.untyped_storage()), []).append((side, i))
    keep: list = []  # (nodes are keyed by id(): kept alive until the walks end)
    reached: dict[int, frozenset[tuple[int, int]]] = {}  # id(node) -> what it saves
    named: dict[int, tuple] = {}
    functions = _function_saves(gm, keep)
    result: list[tuple[frozenset[int], frozenset[int]] | None] = []
    for o in found[1]:
        if not (isinstance(o, torch.Tensor) and o.grad_fn is not None):
            result.append(None)
            continue
        saved: set[tuple[int, int]] = set()
        seen: set[int] = set()
        stack = [o.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if id(node) not in reached:
                keep.append(node)
                slots = set()
                ctx = functions.get(id(node), CtxSaves())
                by_ctx, function = ctx.tensors, ctx.name
                ctx_ids = {id(t) for t in by_ctx}
                for t in (*_saved_tensors(node), *by_ctx):
                    for side, i in storages.get(StorageWeakRef(t.untyped_storage()), ()):
                        slots.add((side, i))
                        if side == 1 and i not in named:
                            named[i] = _name(t, function if id(t) in ctx_ids else None)
                reached[id(node)] = frozenset(slots)
            saved.update(reached[id(node)])
            stack.extend(nxt for nxt, _ in node.next_functions)
        result.append(
            (
                frozenset(i for side, i in saved if side == 0),
                frozenset(i for side, i in saved if side == 1),
            )
        )
    return tuple(result), {i: d for i, d in named.items() if d is not None}


def _name(t: torch.Tensor, node: str | None = None) -> tuple | None:
    """How eager's error names the saved tensor ``t``: its shape, and the output of the node
    that made it (``node`` where given; None where its shape is symbolic or no node made it)."""
    shape = tuple(t.shape)
    if t.grad_fn is None or not all(isinstance(n, int) for n in shape):
        return None
    return shape, t.output_nr, node or t.grad_fn.name()


def _function_saves(gm: torch.fx.GraphModule, keep: list) -> dict[int, CtxSaves]:
    """Per autograd node (by id) of a custom Function's call in ``gm``, what its
    ``ctx.save_for_backward`` saves: Dynamo's fake run of the call saves nothing on the node
    (``_custom_function.saved_by_ctx`` reads its subgraphs)."""
    found: dict[int, CtxSaves] = {}
    for node in gm.graph.find_nodes(
        op="call_function", target=torch.ops.higher_order.autograd_function_apply
    ):
        value = node.meta.get("example_value")
        values = value if isinstance(value, tuple | list) else (value,)
        grad_fn = next(
            (n for n in map(_made_by, values) if n is not None and _APPLIED in type(n).__name__),
            None,
        )
        if grad_fn is None:
            continue
        keep.append(grad_fn)
        found[id(grad_fn)] = saved_by_ctx(node)
    return found


# (the class of the autograd node Dynamo's run of a Function call makes: ``ApplyTemplate``)
_APPLIED = "ApplyTemplate"


def _made_by(t) -> Any:
    """The autograd node that made the tensor ``t``, before the writes the graph made into it
    afterwards (each in-place op's node has the history it replaced as its first edge)."""
    if not isinstance(t, torch.Tensor) or t._base is not None:
        return None
    node = t.grad_fn
    for _ in range(t._version):
        if node is None or _APPLIED in type(node).__name__:
            break
        node = node.next_functions[0][0] if node.next_functions else None
    return node


def output_saves(gm: torch.fx.GraphModule) -> tuple[frozenset[int] | None, ...] | None:
    """Per output of the Dynamo graph ``gm``, the nodes of eager's autograd graph (numbered
    from 0) that save tensors and that a backward from that output runs, the walk stopping at
    the graph's inputs; None for an output eager does not track. None where some example
    value is missing.

    NOTE: a node's backward unpacks every tensor it saved, and unpacking one that a backward
    without ``retain_graph`` released raises; nodes that save only sizes or scalars
    (``sum``, ``view``, ``x * 2``) run again freely.
    """
    found = graph_values(gm)
    if found is None:
        return None
    inputs, outputs = found
    stop: set[int] = set()
    keep: list = []  # (nodes are keyed by id(): kept alive until the walk ends)
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            node = gradient_edge(t).node
            keep.append(node)
            stop.add(id(node))
    number: dict[int, int | None] = {}  # id(node) -> its number, None: it saves no tensor
    result: list[frozenset[int] | None] = []
    for o in outputs:
        if not (isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None):
            result.append(None)
            continue
        found_nodes: set[int] = set()
        seen: set[int] = set()
        stack = [o.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen or id(node) in stop:
                continue
            seen.add(id(node))
            if id(node) not in number:
                keep.append(node)
                number[id(node)] = len(number) if _saves_tensors(node) else None
            k = number[id(node)]
            if k is not None:
                found_nodes.add(k)
            stack.extend(nxt for nxt, _ in node.next_functions)
        result.append(frozenset(found_nodes))
    return tuple(result)


# the innermost saved-tensor hooks (None: none); a C function, so the hot path asks it
# inline and only calls ``saved_tensor_hooks_apply`` where there are some
top_saved_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None) or (
    lambda _ignore_disabled: None
)


def saved_tensor_hooks_apply() -> bool:
    """Whether ``torch.autograd.graph.saved_tensors_hooks(pack, unpack)`` are active around
    this call and could change what eager's backward reads: eager's autograd packs every
    tensor it saves and computes the gradients from what ``unpack`` returns (a pack that
    quantizes or zeroes changes them); our backward reads the program's residuals, which
    the hooks never see. torch's own hooks that give the same values back are not these:
    ``save_on_cpu``'s, and non-reentrant checkpoint's (``_checkpoint_hook`` around the
    forward, ``_recomputation_hook`` around its recomputation: a compiled call inside keeps
    its program, in both)."""
    hooks = top_saved_hooks(False)
    if hooks is None:
        return False
    return not getattr(hooks[0], "__qualname__", "").startswith(_SAME_VALUES)


# (the qualified names' starts of torch's saved-tensor hooks that give back what was saved)
_SAME_VALUES = ("save_on_cpu.", "_checkpoint_hook.", "_recomputation_hook.")


def saves_inference_tensor(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first node of the Dynamo graph ``gm`` whose op eager's autograd records saving a
    tensor made in an inference-mode block of the graph (``s`` of ``x * s``, ``s`` made
    under ``torch.inference_mode()``), where eager raises "Inference tensors cannot be saved
    for backward" at that op; None where there is none. (Dynamo's example values are not
    inference tensors: its autograd saved them; a program computed a value.)"""
    made, inside = inference_nodes(gm)
    if not made:
        return None
    storages = {_memory(t) for node in made for t in _tensors(node.meta.get("example_value"))}
    storages.discard(None)
    for node in gm.graph.nodes:
        if node in inside or node.op not in ("call_function", "call_method"):
            continue
        for t in _tensors(node.meta.get("example_value")):
            if t.grad_fn is None:
                continue
            for s in _saved_tensors(t.grad_fn):
                if _memory(s) in storages:
                    return node
    return None


def _memory(t: torch.Tensor) -> StorageWeakRef | None:
    """The memory of the example value ``t`` (inside its functorch wrappers: a ``vmap``'s
    batched value has no storage of its own); None where it has none (not strided)."""
    t = unwrapped(t)[1]
    return StorageWeakRef(t.untyped_storage()) if t.layout == torch.strided else None


def _tensors(value) -> list[torch.Tensor]:
    values = value if isinstance(value, tuple | list) else (value,)
    return [t for t in values if isinstance(t, torch.Tensor)]


def _saves_tensors(node) -> bool:
    """Whether ``node``'s backward unpacks a saved tensor (``_saved_*`` attributes that hold
    one; a custom Function's ``saved_tensors``). An optional tensor saved undefined (``x *
    c`` where only ``x`` requires grad saves no ``x``) unpacks as None and never raises."""
    for name in dir(node):
        if not name.startswith("_saved_"):
            continue
        try:
            value = getattr(node, name)
        except RuntimeError:  # changed in place since: still a saved tensor
            return True
        for v in value if isinstance(value, tuple | list) else (value,):
            if isinstance(v, torch.Tensor):
                return True
    try:
        return bool(getattr(node, "saved_tensors", None))
    except RuntimeError:
        return True


def _saved_tensors(node) -> list[torch.Tensor]:
    """The tensors ``node`` saved for the backward (``_saved_*`` attributes)."""
    tensors = []
    for name in dir(node):
        if not name.startswith("_saved_"):
            continue
        try:
            value = getattr(node, name)
        except RuntimeError:  # changed in place since: ``backward_errors`` reports it
            continue
        for t in value if isinstance(value, tuple | list) else (value,):
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                tensors.append(t)
    return tensors


class RaiseAtBackward(torch.autograd.Function):
    """``apply(error, t)``: a copy of ``t`` whose backward raises ``error`` (eager's error from
    the backward of the graph that computed ``t``). A copy: an output of a custom Function
    that returns its input as is may not be changed in place."""

    @staticmethod
    def forward(ctx, error: RuntimeError, t: torch.Tensor) -> torch.Tensor:
        ctx.error = error
        return t.clone()

    @staticmethod
    def backward(ctx, grad):
        error = ctx.error
        raise type(error)(str(error))


__all__ = [
    "RaiseAtBackward",
    "backward_errors",
    "output_saves",
    "saved_per_output",
]


# The first line eager's anomaly mode raises with where a node's gradient has NaN.
_NAN = "returned nan values in its"


def anomaly_replay(plan, inputs: Sequence | None, grads: Sequence, result: Sequence) -> None:
    """Under anomaly mode (``torch.autograd.set_detect_anomaly(True)``), where our backward's
    gradients ``result`` hold NaN, eager's backward of the program is replayed from the
    call's ``inputs`` with the cotangents ``grads``, so that eager's own check raises, naming
    the node whose gradient turned NaN ("Function 'SqrtBackward0' returned nan values in its
    0th output."), where autograd's check of our node names ``XlaFunctionBackward``. Where
    the replay finds none (random numbers drawn again), the engine raises its own error."""
    if inputs is None or not any(isinstance(g, torch.Tensor) and g.isnan().any() for g in result):
        return
    program, diff = plan.program, frozenset(plan.diff_in)
    try:
        with torch.enable_grad():
            leaves = [
                t.detach().requires_grad_(k in diff) if isinstance(t, torch.Tensor) else t
                for k, t in enumerate(inputs)
            ]
            outs = program.autograd_outputs(leaves)
            pairs = [
                (outs[program._graph_diff_out[j]], grads[i])
                for j, i in enumerate(plan.diff_out)
                if grads[i] is not None
            ]
            pairs = [(o, g) for o, g in pairs if isinstance(o, torch.Tensor) and o.requires_grad]
            if pairs:
                torch.autograd.grad(
                    [o for o, _ in pairs],
                    [leaves[k] for k in plan.diff_in],
                    [g for _, g in pairs],
                    allow_unused=True,
                )
    except RuntimeError as e:
        if _NAN in str(e):
            raise
        log.debug("torch2xla: the replay of the backward in eager failed: %r", e)
