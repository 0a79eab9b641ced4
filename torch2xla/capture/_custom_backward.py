"""The backward of a custom ``torch.autograd.Function`` run in eager inside a graph, with the
grad mode eager's autograd gives it.

Dynamo keeps such a Function as the ``autograd_function_apply`` op, with its forward and
backward traced as subgraphs (``_data_dependent`` runs the op in eager PyTorch). It traces the
backward with autograd off: its subgraph starts with ``_set_grad_enabled(False)`` and ends with
``_set_grad_enabled(True)``. Eager runs a backward in the grad mode of the backward call
(``create_graph``), so that a create_graph backward records the backward's own ops and can be
differentiated again: run as traced, the gradients were constants and second derivatives came
out silently wrong (an HVP, a gradient penalty through the Function's saved tensors).

So the backward is run in the backward call's grad mode (``_ambient``: the two switches
dropped) wherever that is what eager does, which the graph cannot show by itself:

- ``@once_differentiable`` wraps the backward in ``torch.no_grad()``: Dynamo inlines the
  wrapper into the same graph (autograd is off there already). Its frame in the nodes' stack
  traces tells it apart (``_once_differentiable``); its gradients are then marked as eager's
  wrapper marks them (``_once``: a second backward through them raises eager's error).
- A backward without ops of its own (``return g``: a straight-through estimator) leaves no
  frame: the ``backward`` beside the ``forward`` in the source tells (``_declared_once``).
- A ``torch.no_grad()`` (or ``enable_grad``, ``set_grad_enabled``, ``inference_mode``) inside
  the backward leaves no trace where it changes nothing at trace time. Where the backward's
  source (the functions of its frames) names one, or cannot be read, which of its values eager
  records is unknown: its gradients raise when differentiated again, where its incoming
  gradients or saved tensors require grad (a clear error instead of wrong numbers).
- torch 2.11's Dynamo traces ``y.register_hook(fn)`` on an intermediate as a Function whose
  forward is ``y.view_as(y)`` and whose backward is ``fn``; where ``fn`` reads ``y`` itself,
  the second backward's gradient through that read reaches ``y`` past the hook, where eager's
  passes through it (``_reads_own_input``): differentiated again, it raises (``_HOOK``). A
  Function of the user's returning its input and reading it in its backward looks the same;
  it raises too (eager's numbers, or the error: never other numbers). A second hook on the
  same tensor is a Function on the first one's output, whose backward runs first: eager runs
  hooks in the order they were registered (``_second_hook``: its backward raises ``_ORDER``).
"""

from __future__ import annotations

import ast
import copy
import functools
import linecache
import operator
import re

import torch

# eager's message (torch.autograd.function.once_differentiable)
_ONCE = "trying to differentiate twice a function that was marked with @once_differentiable"

_TWICE = (
    "torch2xla: differentiating twice through the backward of a torch.autograd.Function "
    "called inside a compiled function is not supported where its backward changes the grad "
    "mode (torch.no_grad(), enable_grad, set_grad_enabled, inference_mode) or its source "
    "cannot be read: torch.compile traces its backward without autograd, so which of its "
    "values eager would record is unknown. Call the Function outside the compiled region "
    "(torch.compiler.disable) to differentiate its backward."
)

_HOOK = (
    "torch2xla: differentiating twice through a tensor hook (register_hook) that reads the "
    "hooked tensor, or through a torch.autograd.Function that returns its input and reads it "
    "in its backward, called inside a compiled function, is not supported on this torch: "
    "its Dynamo traces the hook as such a Function, whose second derivative differs from "
    "eager's. Register the hook outside the compiled region (torch.compiler.disable)."
)

_ORDER = (
    "torch2xla: two hooks (register_hook) on one intermediate tensor inside a compiled "
    "function are not supported on this torch: its Dynamo traces them so that they run in "
    "the reverse of the order eager runs them. Register them outside the compiled region "
    "(torch.compiler.disable), or combine them into one hook."
)

_GRAD_MODES = frozenset(
    {"no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "_set_grad_enabled"}
)

_CALLS = ("call_function", "call_method", "call_module")

_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (\S+)\s*$')


def eager_backward(
    call: torch.fx.Node, fwd: torch.fx.GraphModule, bwd: torch.fx.GraphModule
) -> torch.fx.GraphModule:
    """The backward subgraph ``bwd`` (of the Function called at ``call``, forward ``fwd``) to
    run in eager: in the backward call's grad mode, or marked as not differentiable again."""
    if _second_hook(call):
        return _raising(bwd, _ORDER)
    if _reads_own_input(fwd, bwd):
        return _marked(fwd, bwd, _HOOK, saved_too=True)
    frames = _backward_frames(call, bwd)
    switches = _switches(bwd)
    if frames == set():  # no op of its own (``return g``: a straight-through estimator)
        once = _declared_once(call, fwd)
        if once is None:
            return _marked(fwd, bwd, _TWICE, saved_too=True)
        return _marked(fwd, bwd, _ONCE, saved_too=False) if once else _ambient(bwd, switches)
    if frames and any(_is_once_wrapper(f) for f in frames):
        return _marked(fwd, bwd, _ONCE, saved_too=False)
    if frames and len(switches) == 2 and not any(map(_changes_grad_mode, frames)):
        return _ambient(bwd, switches)
    return _marked(fwd, bwd, _TWICE, saved_too=True)


def _switches(bwd: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [
        n
        for n in bwd.graph.nodes
        if n.op == "call_function" and n.target is torch._C._set_grad_enabled
    ]


def _ambient(bwd: torch.fx.GraphModule, switches: list[torch.fx.Node]) -> torch.fx.GraphModule:
    """``bwd`` without the grad-mode switches Dynamo put around it (autograd off, then on)."""
    first, last = switches
    if first.args != (False,) or last.args != (True,):
        raise AssertionError(f"unexpected grad-mode switches {first.args}, {last.args}")
    graph = copy.deepcopy(bwd.graph)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            graph.erase_node(node)
    new = torch.fx.GraphModule(bwd, graph)
    new.meta.update(bwd.meta)
    return new


def _reads_own_input(fwd: torch.fx.GraphModule, bwd: torch.fx.GraphModule) -> bool:
    """Whether the forward returns an input of its own (``view_as`` itself, as torch's
    forward tracing returns an input) that it also hands the backward, which reads it."""
    (outs, saved), *_ = fwd.graph.find_nodes(op="output")[0].args
    returned = {
        o.args[0]
        for o in outs
        if isinstance(o, torch.fx.Node)
        and o.op == "call_method"
        and o.target == "view_as"
        and o.args[0] is o.args[1]
        and o.args[0].op == "placeholder"
    }
    inputs = tuple(bwd.graph.find_nodes(op="placeholder"))
    n_grads = len(inputs) - len(saved)  # (the saved values follow the gradients)
    return any(
        s in returned and any(map(_differentiable_read, inputs[n_grads + k].users))
        for k, s in enumerate(saved)
    )


def is_traced_hook(call: torch.fx.Node) -> bool:
    """Whether the ``autograd_function_apply`` node ``call`` is a ``register_hook`` as torch
    2.11's Dynamo traces it: a forward returning its input, and a backward whose ops are no
    Function's ``backward`` (the hook's own, or none)."""
    owner = call.graph.owning_module
    fwd, bwd = call.args[:2]
    if owner is None or getattr(fwd, "op", None) != "get_attr" or bwd.op != "get_attr":
        return False
    fwd, bwd = getattr(owner, fwd.target), getattr(owner, bwd.target)
    ops = [
        n for n in fwd.graph.nodes if n.op in _CALLS and n.target is not torch._C._set_grad_enabled
    ]
    identity = bool(ops) and all(
        n.op == "call_method" and n.target == "view_as" and n.args[0] is n.args[1] for n in ops
    )
    site = len(_frames(call))
    tops = {
        own[site][2] for n in bwd.graph.nodes if n.op in _CALLS if len(own := _frames(n)) > site
    }
    return identity and "backward" not in tops


def _second_hook(call: torch.fx.Node) -> bool:
    """Whether ``call`` is a traced hook on the output of another (``is_traced_hook``)."""
    arg = call.args[2] if len(call.args) == 3 else None
    prev = (
        arg.args[0] if isinstance(arg, torch.fx.Node) and arg.target is operator.getitem else None
    )
    return (
        isinstance(prev, torch.fx.Node)
        and isinstance(prev.target, torch._ops.HigherOrderOperator)
        and prev.target.name() == "autograd_function_apply"
        and is_traced_hook(prev)
        and is_traced_hook(call)
    )


def _raising(bwd: torch.fx.GraphModule, message: str) -> torch.fx.GraphModule:
    """A copy of ``bwd`` that raises ``message`` when run."""
    graph = copy.deepcopy(bwd.graph)
    output = graph.find_nodes(op="output")[0]
    with graph.inserting_before(output):
        output.args = (graph.call_function(_raise, (output.args[0], message)),)
    new = torch.fx.GraphModule(bwd, graph)
    new.meta.update(bwd.meta)
    return new


def _raise(outputs, message: str):
    raise RuntimeError(message)


def _differentiable_read(node: torch.fx.Node) -> bool:
    return not (
        node.op == "call_method"
        and node.target == "detach"
        or node.op == "call_function"
        and node.target in (torch.detach, torch.Tensor.detach)
    )


# -- where the backward's ops come from -------------------------------------------------------
def _frames(node: torch.fx.Node) -> list[tuple[str, int, str]]:
    trace = node.meta.get("stack_trace") or ""
    out = []
    for line in trace.splitlines():
        m = _FRAME.match(line)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def _backward_frames(call: torch.fx.Node, bwd: torch.fx.GraphModule) -> set | None:
    """The frames (file, line, function) of the backward's ops below the Function's call
    site, or None where an op has no stack trace."""
    site = len(_frames(call))
    frames: set = set()
    for node in bwd.graph.nodes:
        if node.op not in _CALLS or node.target is torch._C._set_grad_enabled:
            continue
        own = _frames(node)
        if len(own) <= site:
            return None
        frames.update(own[site:])
    return frames


@functools.cache
def _once_wrapper_lines() -> tuple[str, str, frozenset[int]]:
    code = torch.autograd.function.once_differentiable(lambda ctx: None).__code__
    return code.co_filename, code.co_name, frozenset(ln for *_, ln in code.co_lines() if ln)


def _is_once_wrapper(frame: tuple[str, int, str]) -> bool:
    filename, name, lines = _once_wrapper_lines()
    return frame[0] == filename and frame[2] == name and frame[1] in lines


def _changes_grad_mode(frame: tuple[str, int, str]) -> bool:
    """Whether the function running at ``frame`` names a grad-mode switch (True where its
    source cannot be read)."""
    filename, line, name = frame
    tree = _parsed(filename)
    if tree is None:
        return True
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            end = getattr(node, "end_lineno", None) or node.lineno
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            if start <= line <= end and (best is None or node.lineno >= best.lineno):
                best = node
    if best is None or getattr(best, "name", name) != name and name != "<lambda>":
        return True
    for node in ast.walk(best):
        if isinstance(node, ast.Name) and node.id in _GRAD_MODES:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _GRAD_MODES:
            return True
    return False


def _declared_once(call: torch.fx.Node, fwd: torch.fx.GraphModule) -> bool | None:
    """Whether the ``backward`` beside the Function's ``forward`` (found from the forward's
    ops' frames, in the source) is decorated ``@once_differentiable``; None where not known."""
    site = len(_frames(call))
    for node in fwd.graph.nodes:
        if node.op not in _CALLS or node.target is torch._C._set_grad_enabled:
            continue
        for filename, line, name in _frames(node)[site:]:
            tree = _parsed(filename)
            for cls in ast.walk(tree) if tree is not None else ():
                if not isinstance(cls, ast.ClassDef):
                    continue
                methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
                own = methods.get(name)
                if own is None or not own.lineno <= line <= (own.end_lineno or own.lineno):
                    continue
                backward = methods.get("backward")
                if backward is None:
                    return None
                return any(_names(d, "once_differentiable") for d in backward.decorator_list)
    return None


def _names(tree: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Name) and n.id == name or isinstance(n, ast.Attribute) and n.attr == name
        for n in ast.walk(tree)
    )


@functools.lru_cache(maxsize=64)
def _parsed(filename: str) -> ast.Module | None:
    source = "".join(linecache.getlines(filename))
    if not source:
        return None
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


# -- a backward not differentiable again -------------------------------------------------------
def _marked(
    fwd: torch.fx.GraphModule, bwd: torch.fx.GraphModule, message: str, saved_too: bool
) -> torch.fx.GraphModule:
    """A copy of ``bwd`` (as traced: autograd off) whose gradients raise ``message`` when
    differentiated again, where a create_graph backward runs it with incoming gradients (or,
    with ``saved_too``, saved values) that require grad (``_once``)."""
    (_, saved), *_ = fwd.graph.find_nodes(op="output")[0].args
    graph = copy.deepcopy(bwd.graph)
    inputs = tuple(graph.find_nodes(op="placeholder"))
    n_grads = len(inputs) - len(saved)  # (the saved values follow the gradients)
    watched = inputs if saved_too else inputs[:n_grads]
    output = graph.find_nodes(op="output")[0]
    with graph.inserting_before(output):
        marked = graph.call_function(_once, (output.args[0], watched, message))
    output.args = (marked,)
    new = torch.fx.GraphModule(bwd, graph)
    new.meta.update(bwd.meta)
    return new


def _once(outputs, watched: tuple, message: str):
    """``outputs`` (a backward's gradients), marked as ``@once_differentiable`` marks them
    where a create_graph backward runs it with ``watched`` values that require grad."""
    if not torch.is_grad_enabled() or not any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in watched
    ):
        return outputs
    single = not isinstance(outputs, tuple | list)
    flat = (outputs,) if single else tuple(outputs)
    tensors = [k for k, o in enumerate(flat) if isinstance(o, torch.Tensor)]
    if not tensors:
        return outputs
    error = torch._C._functions.DelayedError(message.encode(), len(tensors))
    marked = error(*(flat[k].detach().requires_grad_() for k in tensors))
    marked = marked if isinstance(marked, tuple | list) else (marked,)
    out = list(flat)
    for k, t in zip(tensors, marked):
        out[k] = t
    return out[0] if single else type(outputs)(out)
