"""Which inputs of a graph each output is connected to in eager's autograd graph.

Eager gives an input a gradient (a tensor, zeros where the derivative is zero) when some output
that received a gradient reaches it through autograd's graph, and None otherwise: connectivity,
not whether the derivative is symbolically zero. ``x.round()``, ``x.sign()``, ``x.fill_(1)`` or
an empty ``x`` keep ``x`` connected (its gradient is zeros); ``.detach()``, ``no_grad`` regions,
integer and boolean values, factories (``zeros_like``) and ops eager does not differentiate
(``histc``, ``argmax``) cut it.

The answer comes from torch's own autograd, never from the JAX program (whose symbolic zeros
vanish): a bitmask per output over the inputs, found by walking the ``grad_fn`` graph of fake
tensors from each output back to the inputs.

- ``example_links``: a Dynamo graph's example values already carry eager's autograd graph
  (Dynamo computes them with autograd on, user-level ops as the user called them), so nothing
  runs: exact for the whole graph.
- ``traced_links``: a graph without them (an ATen partition of a graph split for eager
  fallback, the vjp of a double backward) runs on fake tensors with autograd on
  (``run_fake``), the inputs that require grad in the call requiring grad. This is eager's
  autograd of the ATen ops the graph holds: where an op reached it decomposed, its
  decomposition's connectivity, which may differ from the op's own formula.
- ``traced_live``: connectivity is what makes a gradient require grad, not always what gets
  one: a node of several outputs given gradients on some may pass none to an input it is
  connected to (a double backward through a convolution or a norm). For the traced graphs,
  the inputs a backward through a set of outputs reaches are found by running eager's
  backward on fake tensors once per set (``XlaFunction`` asks per set of outputs that got
  gradients). Dynamo's example values are not run so (their walk is taken as it is): the one
  first-order node found to differ is ``slogdet``'s sign alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.node import map_aggregate

from torch2xla._errors import warn

# Eager's backward errors that a fake run raises as eager does (by message): anything else a
# fake run raises is a limitation of fake tensors, not eager's error.
_TRUSTED = (
    "modified by an inplace operation",  # a saved tensor's version counter
    "is not implemented",  # ``NotImplemented`` nodes, ``not_implemented(...)`` formulas
    "Expected a proper Tensor but got None",  # a formula given an undefined gradient
)


def eagers_own(e: BaseException) -> bool:
    """Whether ``e``, raised by eager's backward run on fake tensors, is an error eager's
    backward raises on real ones (``_TRUSTED``)."""
    return type(e) in (RuntimeError, NotImplementedError) and any(m in str(e) for m in _TRUSTED)


_DEFAULT_VIEW = torch._C._autograd.CreationMeta.DEFAULT


def _untraceable(t: Any) -> bool:
    """Whether autograd refuses to read the tensor ``t``'s ``grad_fn``: a view made under
    no_grad (or of a function of several views) written in place since, itself or its base
    (``with torch.no_grad(): w.t()[0] += 1``). Eager raises so on the user's read of it, which
    eager's program need not make; to autograd it is then no node at all."""
    if not isinstance(t, torch.Tensor) or not t.requires_grad or not t._is_view():
        return False
    if torch._C._autograd._get_creation_meta(t) == _DEFAULT_VIEW:
        return False
    try:
        t.grad_fn  # noqa: B018  (the read is the test)
    except RuntimeError:
        return True
    return False


def graph_values(gm: torch.fx.GraphModule) -> tuple[list, list] | None:
    """The Dynamo graph ``gm``'s inputs and outputs as example values, for walks of eager's
    autograd graph: None for an output that is no node, and for a tensor whose ``grad_fn``
    autograd refuses to read (``_untraceable``); None where some output's value is missing."""
    inputs = [n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder")]
    out = gm.graph.find_nodes(op="output")[0].args[0]
    outputs = []
    for o in out if isinstance(out, list | tuple) else (out,):
        if isinstance(o, torch.fx.Node) and "example_value" not in o.meta:
            return None
        outputs.append(o.meta["example_value"] if isinstance(o, torch.fx.Node) else None)
    return [None if _untraceable(t) else t for t in inputs], [
        None if _untraceable(t) else t for t in outputs
    ]


def gradient_edge(t: torch.Tensor) -> torch.autograd.graph.GradientEdge:
    """``torch.autograd.graph.get_gradient_edge(t)``, also inside ``torch.inference_mode()``
    (a build of a call made under it): torch finds a leaf's accumulator through a view of
    it, which inference mode does not track."""
    if torch.is_inference_mode_enabled():
        with torch.inference_mode(False):
            return torch.autograd.graph.get_gradient_edge(t)
    return torch.autograd.graph.get_gradient_edge(t)


def links(outputs: Sequence[Any], inputs: Sequence[Any]) -> tuple[int, ...]:
    """Per output, the bitmask of the ``inputs`` (bit ``k`` for ``inputs[k]``) that its autograd
    graph reaches. Entries that are not tensors requiring grad have none (0).

    The walk stops at an input (an input that is a view of another reaches it only outside
    the graph), so inputs may be leaves or not.
    """
    # NOTE: nodes are keyed by id(): torch hands out one Python object per live node, so every
    # node seen is kept alive (``keep``) until the walk ends, and no id is reused meanwhile.
    keep: list = []
    bits: dict[tuple[int, int], int] = {}
    # Leaves by their tensor too: a value traced before Dynamo's ``x.data = y`` (``set_``)
    # reaches the leaf's accumulator of before the swap, which eager keeps and fake tensors
    # replace.
    leaves: dict[int, int] = {}
    for k, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            edge = gradient_edge(t)
            keep.append(edge.node)
            key = (id(edge.node), edge.output_nr)
            bits[key] = bits.get(key, 0) | (1 << k)
            if t.grad_fn is None:
                leaves[id(t)] = leaves.get(id(t), 0) | (1 << k)
    keep.extend(inputs)
    memo: dict[int, int] = {}
    result = []
    for o in outputs:
        # (a view taken under no_grad, ``with torch.no_grad(): v = x[1:]``, has no edge)
        if not (isinstance(o, torch.Tensor) and o.requires_grad) or (
            o.grad_fn is None and o._base is not None
        ):
            result.append(0)
            continue
        edge = gradient_edge(o)
        keep.append(edge.node)
        result.append(_reach(edge.node, edge.output_nr, bits, memo, keep, leaves))
    return tuple(result)


def _hit(node, output_nr: int, bits: dict, leaves: dict) -> int | None:
    """The inputs the edge ``(node, output_nr)`` is (None: none)."""
    hit = bits.get((id(node), output_nr))
    if hit is None and leaves:
        variable = getattr(node, "variable", None)  # (an AccumulateGrad's leaf)
        if variable is not None:
            hit = leaves.get(id(variable))
    return hit


def _reach(node, output_nr: int, bits: dict, memo: dict, keep: list, leaves: dict) -> int:
    """The inputs reached from the edge ``(node, output_nr)`` (iterative: graphs are deep)."""
    hit = _hit(node, output_nr, bits, leaves)
    if hit is not None:
        return hit
    if id(node) in memo:
        return memo[id(node)]
    stack = [(node, _edges(node), 0)]
    keep.append(node)
    while stack:
        current, edges, mask = stack[-1]
        pushed = False
        for nxt, nr in edges:
            if nxt is None:
                continue
            hit = _hit(nxt, nr, bits, leaves)
            if hit is not None:
                mask |= hit
            elif id(nxt) in memo:
                mask |= memo[id(nxt)]
            else:
                stack[-1] = (current, edges, mask)
                stack.append((nxt, _edges(nxt), 0))
                keep.append(nxt)
                pushed = True
                break
        if pushed:
            continue
        stack.pop()
        memo[id(current)] = mask
        if stack:
            parent, parent_edges, parent_mask = stack[-1]
            stack[-1] = (parent, parent_edges, parent_mask | mask)
    return memo[id(node)]


# Backward nodes whose formula returns an undefined gradient (None, not zeros) whatever the
# incoming gradient, by the value of one saved argument: the p = 0 "norm" is a count, and
# ``norm_backward`` returns ``Tensor()`` for it. An undefined gradient stays undefined down the
# graph (a node that receives only undefined gradients passes on none), so cutting the node's
# edges gives eager's None-ness.
_UNDEFINED_WHEN = {
    "DistBackward0": ("_saved_p", 0),
    "LinalgVectorNormBackward0": ("_saved_ord", 0),
    "NormBackward0": ("_saved_p", 0),
    "NormBackward1": ("_saved_p", 0),
    "NormBackward2": ("_saved_p", 0),
    "NormBackward3": ("_saved_p", 0),
}


def _edges(node):
    """The edges of ``node`` along which eager passes a defined gradient."""
    rule = _UNDEFINED_WHEN.get(node.name())
    if rule is not None and getattr(node, rule[0], None) == rule[1]:
        return iter(())
    return iter(node.next_functions)


def examples_hold(gm: torch.fx.GraphModule, lowered, grad: Sequence[bool], tracked) -> bool:
    """Whether the Dynamo graph ``gm``'s example values stand for eager's autograd graph of a
    signature ``lowered`` (its ATen graph): not with parameters the graph holds as attributes
    (lifted), inputs that overlap in memory and are written (``lowered.aliasing``: the program
    takes one base per group after the other inputs, so the example's positions are not the
    program's), example values of inputs that required grad otherwise than the call's
    (``grad``), new values of inputs written with autograd's record (``tracked``), whose
    examples' history was rebased, or a graph calling ``invoke_subgraph``
    (``nested_compile_region``): Dynamo hands each later call of a region the first call's
    output values, whose history is the first call's."""
    if lowered.lifted or lowered.aliasing is not None or any(tracked):
        return False
    if gm.graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
        return False
    placeholders = gm.graph.find_nodes(op="placeholder")
    return all(
        rg == bool(getattr(node.meta.get("example_value"), "requires_grad", False))
        for node, rg in zip(placeholders, grad, strict=True)
    )


def example_links(gm: torch.fx.GraphModule) -> tuple[int, ...] | None:
    """Per output of the Dynamo graph ``gm``, the bitmask of its placeholders connected to it,
    from Dynamo's example values (None where some value is missing)."""
    found = graph_values(gm)
    return None if found is None else links(found[1], found[0])


def traced_links(
    run: Callable[[Sequence], Sequence],
    metas: Sequence[Any],
    requires_grad: Sequence[bool],
    n_outputs: int,
    label: str,
) -> tuple[int, ...]:
    """Per output of ``run`` (a function of fake tensors, torch autograd semantics; it has
    ``n_outputs``), the bitmask of its inputs connected to it.

    ``metas`` are the inputs: tensors (real or fake, their shape, stride and dtype are used)
    and other values, passed as they are; ``requires_grad`` says which of them require grad
    (as in the call: eager refuses some ops on tensors that require grad, such as batch norm's
    running statistics, so not every float input can).

    Where torch cannot run the graph on fake tensors, a ``GradientConnectivityWarning`` names
    the program (``label``) and every output counts as connected to every input requiring
    grad: gradients are then zeros where eager's would be None, never missing.
    """
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode, torch.enable_grad():
            fakes = [_fake_like(m, rg) for m, rg in zip(metas, requires_grad, strict=True)]
            outs = run(fakes)
            return links(list(outs), fakes)
    except Exception as e:  # noqa: BLE001 - reported, and the fallback is stated
        warn(
            f"torch2xla: {label}: could not run the graph on fake tensors to find which inputs "
            f"get gradients ({type(e).__name__}: {e}); every input that requires grad gets one "
            "(zeros where eager may give None). Please report this.",
            GradientConnectivityWarning,
        )
        every = sum(1 << k for k, rg in enumerate(requires_grad) if rg)
        return (every,) * n_outputs


def traced_live(
    run: Callable[[Sequence], Sequence],
    metas: Sequence[Any],
    requires_grad: Sequence[bool],
    outputs: Sequence[int],
    label: str,
) -> int | None:
    """The bitmask of the inputs of ``run`` (as ``traced_links``) to which eager's backward
    through its outputs at ``outputs`` gives a gradient (not None): eager's backward run on
    fake tensors.

    Connectivity is an upper bound: a node of several outputs that receives gradients on some
    of them may pass none to some of its inputs (a double backward's ``ConvolutionBackward``
    node, whose input gradient does not depend on the input: None; native_layer_norm's
    backward, whose bias gradient is ``Tensor()``; ``slogdet``'s sign alone), which no walk
    of edges shows. Running the backward's formulas does. Where it raises an error of
    eager's backward (``eagers_own``: a derivative not implemented), it is raised, as eager's
    backward raises it; where it fails otherwise, None (with a
    ``GradientConnectivityWarning``): connectivity stands then."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode, torch.enable_grad():
            fakes = [_fake_like(m, rg) for m, rg in zip(metas, requires_grad, strict=True)]
            outs = run(fakes)
            roots = [
                outs[j]
                for j in outputs
                if isinstance(outs[j], torch.Tensor) and outs[j].requires_grad
            ]
            leaves = [
                k for k, t in enumerate(fakes) if isinstance(t, torch.Tensor) and t.requires_grad
            ]
            if not roots or not leaves:
                return 0
            grads = torch.autograd.grad(
                roots,
                [fakes[k] for k in leaves],
                [torch.ones_like(r) for r in roots],
                allow_unused=True,
            )
    except Exception as e:
        if eagers_own(e):  # (eager's backward raises it here: a double backward through
            raise  # CPU flash attention, whose backward has no derivative)
        warn(
            f"torch2xla: {label}: could not run eager's backward on fake tensors to find which "
            f"inputs get gradients ({type(e).__name__}: {e}); every input connected to an "
            "output gets one (zeros where eager may give None). Please report this.",
            GradientConnectivityWarning,
        )
        return None
    return sum(1 << k for k, g in zip(leaves, grads) if g is not None)


class GradientConnectivityWarning(UserWarning):
    """torch2xla could not tell which inputs of a program eager would give gradients; they all
    get one (zeros where eager may give None)."""


def _fake_like(m: Any, requires_grad: bool) -> Any:
    if not isinstance(m, torch.Tensor):
        return m
    t = torch.empty_strided(m.shape, m.stride(), dtype=m.dtype, device=m.device)
    return t.requires_grad_(True) if requires_grad else t


def run_fake(gm: torch.fx.GraphModule, args: Sequence) -> list:
    """``gm``'s outputs (a list) for ``args``, run op by op with autograd as eager runs them;
    ``torch2xla::stop_gradient`` detaches (eager's ``.detach()``, which it stands for),
    ``aten.copy`` copies in place into a clone (eager's ``copy_``) and ``embedding_renorm``
    is a clone (eager's renorm in place under no_grad)."""
    stop = torch.ops.torch2xla.stop_gradient.default  # (defined by the time graphs run)
    env: dict[torch.fx.Node, Any] = {}
    it = iter(args)
    load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(it)
        elif node.op == "get_attr":
            obj: Any = gm
            for part in node.target.split("."):
                obj = getattr(obj, part)
            env[node] = obj
        elif node.op == "call_function":
            args_, kwargs = map_aggregate(node.args, load), map_aggregate(node.kwargs, load)
            if node.target is stop:
                env[node] = args_[0].detach()
            elif node.target is torch.ops.aten.copy.default:
                # (functionalization's form of ``copy_``, which has no derivative formula of
                # its own: run as the in-place copy eager ran, whose backward gives ``self``
                # zeros and ``src`` the gradient)
                env[node] = torch.ops.aten.copy_.default(args_[0].clone(), *args_[1:], **kwargs)
            elif node.target is torch.ops.aten.embedding_renorm.default:
                # (``F.embedding(max_norm=)``'s ``embedding_renorm_``, which eager runs in
                # place under no_grad: the weight's gradient passes through it unchanged, as
                # a clone's; the functional op has no derivative formula, and its kernel no
                # fake one: ``ops/_nn.embedding_renorm``)
                env[node] = args_[0].clone()
            else:
                env[node] = node.target(*args_, **kwargs)
        elif node.op == "output":
            out = node.args[0]
            return list(map_aggregate(out if isinstance(out, list | tuple) else (out,), load))
        else:
            raise RuntimeError(f"torch2xla internal error: unexpected node {node.format_node()}")
    raise RuntimeError("torch2xla internal error: graph has no output node")
