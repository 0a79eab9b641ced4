"""Ops whose output shape depends on tensor values, kept in eager PyTorch inside a graph.

With ``torch._dynamo.config.capture_dynamic_output_shape_ops`` / ``capture_scalar_outputs``
(or ``fullgraph=True`` with them), Dynamo puts ``nonzero``, boolean indexing, ``unique``,
``masked_select``, ``.item()``... into the graph with unbacked sizes (``u0``). An XLA program
needs static shapes, and our ATen export traces with concrete sizes, where these ops raise.
So the Dynamo graph is cut around them (``split``): the data-dependent nodes, and the Python
scalar arithmetic on their results, run in eager PyTorch in graph order; each run of the
other nodes between them becomes a graph of its own, compiled by the backend like any Dynamo
graph (per signature, training and mutations included), and sees the data-dependent sizes as
concrete values at each call.

Which nodes are data-dependent: those Dynamo recorded as binding new unbacked symbols
(``unbacked_bindings``), and those the export finds (``failing_node``), which Dynamo traced
with sizes it already knew (``narrow`` with a tensor start reads it with ``.item()``).
Hooks on intermediates (``y.register_hook(fn)``) are cut out the same way: the export, traced
without autograd, cannot register them; so is ``x.data = y`` of a graph input (Dynamo's
``Tensor.set_(x, y)``), which swaps the input's storage: the export keeps no ``set_`` of an
input (AOTAutograd's "Encountered a set_ on a graph input" assertion).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.fx.node import map_arg

from torch2xla._errors import Unsupported
from torch2xla.capture._custom_backward import eager_backward, is_traced_hook
from torch2xla.capture._custom_function import kept_in_program

# What the ATen export raises on a data-dependent op traced with concrete sizes.
EXPORT_ERRORS: tuple[type[Exception], ...] = (
    torch._subclasses.fake_tensor.DynamicOutputShapeException,
    torch._subclasses.fake_tensor.DataDependentOutputException,
    GuardOnDataDependentSymNode,
)

# (the words of ops.Why.DATA_DEPENDENT; importing the op registry here would load it before
# torch._prims, whose ops it registers)
REASON = "data-dependent output shape: runs in eager PyTorch inside the graph"
REASON_VALUE = "reads a tensor value into Python: runs in eager PyTorch inside the graph"


# ``y.register_hook(fn)`` on an intermediate: Dynamo keeps it in the graph as this op, which
# the ATen export (traced without autograd) cannot run. Run in eager PyTorch on the value the
# XLA partition before it returns, the hook changes its gradient as eager's does.
def _is_hook(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.HigherOrderOperator) and target.name() == "register_hook"


REASON_HOOK = (
    "registers an autograd hook on an intermediate: runs in eager PyTorch inside the graph"
)


# A ``torch.autograd.Function`` whose outputs autograd tracks: Dynamo keeps it as this op,
# with its forward and backward as subgraphs; the ATen export, traced without autograd,
# inlines the forward and drops the backward (JAX would differentiate the forward: a
# straight-through estimator's ``round`` gave zeros). Run in eager PyTorch, the user's
# backward (and ``ctx``'s rules: materialize_grads, once_differentiable) runs as in eager.
def _is_custom_backward(node: torch.fx.Node) -> bool:
    target = node.target
    return (
        isinstance(target, torch._ops.HigherOrderOperator)
        and target.name() == "autograd_function_apply"
        and _requires_grad(node.meta.get("example_value"))
        and not kept_in_program(node)
    )


def _made_by_hook(node: torch.fx.Node) -> bool:
    """Whether the ``autograd_function_apply`` ``node`` is torch 2.11's form of a hook on an
    intermediate (an identity forward whose backward calls the hook; 2.13: ``register_hook``),
    told by the user's line."""
    lines = (node.meta.get("stack_trace") or "").strip().splitlines()
    return bool(lines) and ".register_hook(" in lines[-1]


REASON_FUNCTION = (
    "a torch.autograd.Function with its own backward, in a graph that records autograd: "
    "runs in eager PyTorch inside the graph"
)


# ``x.data = y`` of a graph input: Dynamo records ``Tensor.set_(x, y)`` (under no_grad, which
# the eager node keeps: ``_eager_node``).
def _sets_input(node: torch.fx.Node) -> bool:
    self = node.args[0] if node.args else None
    return _is_set(node) and isinstance(self, torch.fx.Node) and self.op == "placeholder"


def drop_noop_sets(gm: torch.fx.GraphModule) -> None:
    """Removes each ``x.data = y`` of ``gm`` where ``y`` is ``x`` itself: ``module.to(dtype)`` in a forward (SwitchTransformers' and
    NLLB-MoE's routers: ``self.classifier.to(self.dtype)``) sets every parameter's ``.data``
    to ``p.to(dtype)``, which is ``p`` where the dtype is already its own. Such a ``set_``
    changes nothing, but would cut the graph around an eager ``set_`` (``_sets_input``). Its
    version-count decrement (Dynamo's ``_lower_version_count_by_1``, undoing ``set_``'s bump)
    goes with it."""
    for node in list(gm.graph.nodes):
        if not _is_set(node) or len(node.args) != 2 or node.kwargs:
            continue
        x, y = node.args
        if not (isinstance(x, torch.fx.Node) and isinstance(y, torch.fx.Node)):
            continue
        if not _same_tensor(x.meta.get("example_value"), y.meta.get("example_value")):
            continue
        for user in list(node.users):
            if getattr(user.target, "__name__", "").startswith("_lower_version_count_by_"):
                if user.users:
                    user.replace_all_uses_with(x)
                gm.graph.erase_node(user)
        node.replace_all_uses_with(x)
        gm.graph.erase_node(node)
    gm.recompile()


def _is_set(node: torch.fx.Node) -> bool:
    return (node.op == "call_function" and node.target is torch.Tensor.set_) or (
        node.op == "call_method" and node.target == "set_"
    )


def _same_tensor(a, b) -> bool:
    """``a`` and ``b`` (example values) are one tensor: its fake tensor itself (``p.to(dtype)``
    returning ``p``). Storages cannot tell: Dynamo's tracing ran the ``set_`` on the fakes, so
    after it every swapped input shares its new value's storage."""
    return isinstance(a, torch.Tensor) and a is b


# placeholder meta of a piece: the graph replaces this input's storage after the piece
STORAGE_REPLACED_LATER = "torch2xla.storage_replaced_later"

REASON_SET = (
    "replaces a graph input's storage (x.data = y), which the functional export cannot keep: "
    "runs in eager PyTorch inside the graph"
)


def data_dependent_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The nodes of a Dynamo graph that bind new unbacked symbols (data-dependent sizes or
    values read into Python), those that register autograd hooks (``_is_hook``), and those
    that replace an input's storage (``_sets_input``)."""
    calls = ("call_function", "call_method", "call_module")
    return [
        n
        for n in gm.graph.nodes
        if n.op in calls
        and (
            (n.meta.get("unbacked_bindings") and not _specialized(n))
            or _is_hook(n)
            or _sets_input(n)
            or _is_custom_backward(n)
        )
    ]


def _specialized(node: torch.fx.Node) -> bool:
    """``x.item()`` of a graph input: the export bakes in the value, and the signature's key
    holds it (``_lower.scalar_placeholders``), so it is no data-dependent op."""
    return (
        node.op == "call_method"
        and node.target == "item"
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].op == "placeholder"
    )


def failing_node(exc: Exception, gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The node of ``gm`` whose data-dependent op made the export raise ``exc`` (FX's
    interpreter names it in the message: ``While executing %name``), or None."""
    if not isinstance(exc, EXPORT_ERRORS):
        return None
    names = {n.name: n for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    for name in reversed(re.findall(r"While executing %(\w+)", str(exc))):
        if name in names:
            return names[name]
    return None


def reason(node: torch.fx.Node) -> str:
    """Why ``node`` runs in eager PyTorch: it makes a data-dependent shape or a Python value,
    or registers a hook."""
    if _is_hook(node) or (
        _is_custom_backward(node) and (is_traced_hook(node) or _made_by_hook(node))
    ):
        return REASON_HOOK
    if _is_custom_backward(node):
        return REASON_FUNCTION
    if _sets_input(node):
        return REASON_SET
    return REASON if _is_value(node.meta.get("example_value")) else REASON_VALUE


def unsupported(nodes: list[torch.fx.Node]) -> list[Unsupported]:
    return [Unsupported(n, reason(n)) for n in nodes]


def _is_value(v) -> bool:
    """A tensor, or a tuple/list of them (what an XLA partition may compute)."""
    if isinstance(v, torch.Tensor):
        return True
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(t, torch.Tensor) for t in v)


def _writes_tensor(node: torch.fx.Node) -> bool:
    """An in-place write to a tensor (``t[i] = v``, ``t.add_(1)``), whose value Dynamo
    records as None: a tensor computation all the same. Not ``operator.and_``/``or_``, named
    for Python's keywords: on the unbacked sizes' SymBools (``(0 < u0) & (0 < u0 + 1)``) they
    are size arithmetic, which a compiled piece returned as a tensor."""
    if node.target is operator.setitem:
        return True
    if node.op == "call_function" and getattr(node.target, "__module__", None) == "_operator":
        return False
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return isinstance(name, str) and name.endswith("_") and not name.startswith("_")


def eager_nodes(
    gm: torch.fx.GraphModule, data_dependent: list[torch.fx.Node]
) -> set[torch.fx.Node]:
    """The nodes that run in eager PyTorch: the data-dependent ones, every node that is not a
    tensor computation and reads (through any path) a data-dependent result: size arithmetic
    and checks (``sym_size``, ``_assert_scalar``) on the unbacked sizes, and the size
    arithmetic those read."""
    eager = set(data_dependent)
    tainted = set(data_dependent)
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module") or node in eager:
            continue
        if any(i in tainted for i in node.all_input_nodes):
            tainted.add(node)
            if not (_is_value(node.meta.get("example_value")) or _writes_tensor(node)):
                eager.add(node)
            elif node.target is operator.getitem and node.args[0] in eager:
                eager.add(node)  # an element of an eager node's tuple (``torch.where(m)[0]``)
    # Python values an eager node reads run in eager too, whatever they read: a compiled piece
    # returns tensors, so ``u1 <= s27*s77`` (a bound of a slice's length, asserted) compared
    # with the product of two input sizes made in a piece gave a tensor to ``_assert_scalar``
    for node in reversed(gm.graph.nodes):
        if node not in eager:
            continue
        for i in node.all_input_nodes:
            if i.op in ("call_function", "call_method") and not (
                _is_value(i.meta.get("example_value")) or _writes_tensor(i)
            ):
                eager.add(i)
    return eager


def _untracked(target) -> Callable:
    """``target`` (a function, or a method name) called with autograd off: a node eager does
    not track although it reads tracked values (under ``torch.no_grad()`` in the user's code)."""

    def call(*args, **kwargs):
        with torch.no_grad():
            if isinstance(target, str):
                return getattr(args[0], target)(*args[1:], **kwargs)
            return target(*args, **kwargs)

    name = target if isinstance(target, str) else getattr(target, "__name__", "op")
    call.__name__ = call.__qualname__ = f"untracked_{name}"
    return call


def _requires_grad(v) -> bool:
    if isinstance(v, torch.Tensor):
        return v.requires_grad
    return isinstance(v, list | tuple) and any(_requires_grad(t) for t in v)


def split(
    gm: torch.fx.GraphModule,
    eager: set[torch.fx.Node],
    compile_piece: Callable[[torch.fx.GraphModule], torch.nn.Module],
) -> torch.fx.GraphModule:
    """``gm`` with the nodes ``eager`` run as they are and each maximal run of other nodes
    between them (in graph order, so side effects keep their order) replaced by
    ``compile_piece(piece)``, where ``piece`` is a Dynamo-style graph of that run: its inputs
    are the values it reads from before it, its outputs the values read after it."""
    top = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    # Inputs whose storage an eager node replaces later (``x.data = y``): their example
    # values share ``y``'s storage (Dynamo traced the swap), which would make an earlier
    # piece's output ``y`` look like a view of its input ``x`` (``_aliases.output_aliases``).
    replaced = {n.args[0] for n in eager if _sets_input(n)}
    modules: dict[str, torch.nn.Module] = {}
    nodes = list(gm.graph.nodes)
    output = nodes[-1]
    run: list[torch.fx.Node] = []

    def flush() -> None:
        if not run:
            return
        inside = set(run)
        inputs = list(dict.fromkeys(i for n in run for i in n.all_input_nodes if i not in inside))
        outputs = [n for n in run if any(u not in inside for u in n.users)]
        sub = torch.fx.Graph()
        local: dict[torch.fx.Node, torch.fx.Node] = {}
        # subgraphs of higher-order ops (a Function's forward and backward) stay attributes of
        # the piece, so that its lowering sees them (``_custom_function.lowerable``)
        for i in [i for i in inputs if _is_subgraph(gm, i)]:
            local[i] = sub.get_attr(i.target)
            local[i].meta = dict(i.meta)
            inputs.remove(i)
        for i in inputs:
            p = sub.placeholder(i.name)
            # what a Dynamo placeholder carries: the example value (the key reads its sizes)
            p.meta = {k: v for k, v in i.meta.items() if k in ("example_value", "grapharg")}
            if "example_value" not in p.meta and i.op == "get_attr":
                p.meta["example_value"] = operator.attrgetter(i.target)(gm)
            if i in replaced:
                p.meta[STORAGE_REPLACED_LATER] = True
            local[i] = p
        for n in run:
            local[n] = sub.node_copy(n, lambda a: local[a])
        sub.output(tuple(local[o] for o in outputs))
        name = f"piece_{len(modules)}"
        piece = torch.fx.GraphModule(gm, sub)
        piece.meta.update(gm.meta)
        modules[name] = compile_piece(piece)
        call = top.call_module(name, tuple(env[i] for i in inputs))
        for k, o in enumerate(outputs):
            env[o] = top.call_function(operator.getitem, (call, k))
            env[o].meta = dict(o.meta)
        run.clear()

    failed: list[torch.fx.Node] = []  # (the deferred asserts' results: None, or a message)
    for node in nodes:
        if node.op in ("placeholder", "get_attr"):
            env[node] = top.node_copy(node, lambda a: env[a])
        elif node is output:
            flush()
            if failed:
                top.call_function(_raise_failed, tuple(failed))
            top.output(map_arg(node.args[0], lambda a: env[a]))
        elif node in eager and _is_users_check(node):
            # (eager's ``torch._check`` itself: its message; Dynamo's names the expression)
            env[node] = top.call_function(torch._check, (env[node.args[0]],))
            env[node].meta = dict(node.meta)
        elif node in eager and _is_deferred_assert(node):
            flush()
            env[node] = top.call_function(_failed_assert, map_arg(node.args, lambda a: env[a]))
            env[node].meta = dict(node.meta)
            failed.append(env[node])
        elif node in eager:
            flush()
            env[node] = _eager_node(top, node, env)
            if _sets_input(node):
                replaced.discard(node.args[0])
        else:
            run.append(node)
    targets = _targets(gm, nodes)
    for node in eager:
        fwd, bwd = node.args[:2] if _is_custom_backward(node) else (None, None)
        if getattr(fwd, "op", None) == "get_attr" and getattr(bwd, "op", None) == "get_attr":
            targets[bwd.target] = eager_backward(node, targets[fwd.target], targets[bwd.target])
    return torch.fx.GraphModule({**targets, **modules}, top)


# Dynamo's runtime asserts on unbacked sizes: facts its tracing assumed (``u0 >= 1``: the
# ``y[-1]`` of a boolean-indexed ``y`` is in range). Where one fails, eager raises its own error
# at the op that needed the fact (an IndexError), which the graph reaches later: the assert
# only records its failure (``_failed_assert``), raised after the graph's last node where
# nothing raised before (``_raise_failed``). A ``torch._check`` of the user's is kept in the
# graph (``_fx_runtime_assert_preserve``) and raises where eager's does, with its message.
def _is_deferred_assert(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function"
        and node.target is torch.ops.aten._assert_scalar.default
        and not node.meta.get("_fx_runtime_assert_preserve")
    )


def _is_users_check(node: torch.fx.Node) -> bool:
    """The assert of a ``torch._check(cond)`` of the user's (one with a message function is a
    graph break: it runs in eager itself)."""
    source = node.meta.get("source_fn_stack") or [(None, None)]
    return (
        node.op == "call_function"
        and node.target is torch.ops.aten._assert_scalar.default
        and bool(node.meta.get("_fx_runtime_assert_preserve"))
        and source[-1][1] in (torch._check, torch._check_is_size)
    )


def _failed_assert(condition, message: str) -> str | None:
    """``message`` where ``condition`` is false, else None."""
    return None if condition else message


def _raise_failed(*failed: str | None) -> None:
    """Raise the first assert that failed (``_is_deferred_assert``)."""
    for message in failed:
        if message is not None:
            raise RuntimeError(message)


def _eager_node(top: torch.fx.Graph, node: torch.fx.Node, env: dict) -> torch.fx.Node:
    """``node`` in the top graph, called with autograd off where eager did not track it."""
    value = node.meta.get("example_value")
    reads_tracked = any(_requires_grad(i.meta.get("example_value")) for i in node.all_input_nodes)
    untracked = _is_value(value) and not _requires_grad(value)
    if node.op in ("call_function", "call_method") and (
        reads_tracked and untracked or _sets_input(node)
    ):
        args = map_arg(node.args, lambda a: env[a])
        kwargs = map_arg(node.kwargs, lambda a: env[a])
        new = top.call_function(_untracked(node.target), args, kwargs)
    else:
        new = top.node_copy(node, lambda a: env[a])
    new.meta = dict(node.meta)
    return new


def _is_subgraph(gm: torch.fx.GraphModule, node: torch.fx.Node) -> bool:
    return node.op == "get_attr" and isinstance(
        operator.attrgetter(node.target)(gm), torch.fx.GraphModule
    )


def _targets(gm: torch.fx.GraphModule, nodes: list[torch.fx.Node]) -> dict:
    """What the ``get_attr`` and ``call_module`` nodes of ``gm`` name, by their targets."""
    out = {}
    for n in nodes:
        if n.op == "get_attr":
            out[n.target] = operator.attrgetter(n.target)(gm)
        elif n.op == "call_module":
            out[n.target] = gm.get_submodule(n.target)
    return out
