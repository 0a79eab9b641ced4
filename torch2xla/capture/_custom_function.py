"""A ``torch.autograd.Function`` with its own backward, kept inside the XLA program.

Dynamo keeps such a Function as the ``autograd_function_apply`` op, with its forward and
backward traced as subgraphs. The ATen export, traced without autograd, would inline the
forward and drop the backward. Where the Function's backward is one that JAX can run exactly
as eager does, the op is replaced before the export (``preserve_custom_functions``) by
``torch2xla::custom_function(args, key)``, which the export keeps whole; its lowering
(``ops/_custom_function.py``) is a ``jax.custom_vjp`` whose forward and backward are the two
subgraphs, each exported to ATen here and translated through the op registry. The graph
stays one XLA program (before, the op ran in eager PyTorch between two programs:
``_data_dependent._is_custom_backward``).

What stays in eager (``lowerable`` is False), where JAX's rules would differ from eager's:

- a backward whose grad mode is not the backward call's (``@once_differentiable``, a
  ``no_grad`` inside it, a source that cannot be read: ``_custom_backward``'s analysis), whose
  second derivative eager gives differently or refuses;
- traced hooks (``register_hook`` as torch 2.11 traces it), ``ctx.mark_dirty`` (in-place);
- a backward returning None for an input that requires grad (eager leaves that input's
  gradient None, where the Function's autograd node reaches it), or a gradient whose shape
  or kind differs from its input's (eager reduces or raises);
- an output that is an input or a view of one (eager's view/rebase rules), forward values
  that are not tensors, subgraphs that draw random numbers, hold attributes or write inputs.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import operator

import torch

from torch2xla.capture import _custom_backward as _cb

_TRACKED: dict[int, Entry] = {}
_KEYS = itertools.count()


@dataclasses.dataclass(frozen=True)
class Entry:
    """One Function call's subgraphs as ATen graphs: ``fwd(*args) -> (*outputs, *saved)``,
    ``bwd(*grads, *saved) -> grads`` (only those of ``grad_inputs``, in order)."""

    fwd: torch.fx.GraphModule
    bwd: torch.fx.GraphModule
    outputs: tuple  # the outputs' example values (shapes and dtypes)
    saved: tuple  # per saved value: ("input", k), ("output", j) or ("other", None)
    non_differentiable: frozenset[int]
    grad_inputs: tuple[int, ...]  # the inputs the backward returns a gradient for


def entry(key: int) -> Entry:
    return _TRACKED[key]


def _is_apply(node: torch.fx.Node) -> bool:
    target = node.target
    return (
        isinstance(target, torch._ops.HigherOrderOperator)
        and target.name() == "autograd_function_apply"
    )


def _subgraphs(node: torch.fx.Node):
    owner = node.graph.owning_module
    fwd, bwd = node.args[:2]
    if owner is None or getattr(fwd, "op", None) != "get_attr" or bwd.op != "get_attr":
        return None
    return getattr(owner, fwd.target), getattr(owner, bwd.target)


def _outputs(gm: torch.fx.GraphModule):
    return gm.graph.find_nodes(op="output")[0].args[0]


def _value(a):
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a


def _grad_mode_as_eager(node, fwd, bwd) -> bool:
    """Whether the backward runs in the backward call's grad mode in eager (no
    ``@once_differentiable``, no grad-mode switch of its own), as ``_custom_backward`` tells."""
    if _cb._second_hook(node) or _cb.is_traced_hook(node) or _cb._reads_own_input(fwd, bwd):
        return False
    lines = (node.meta.get("stack_trace") or "").strip().splitlines()
    if lines and ".register_hook(" in lines[-1]:
        return False
    frames = _cb._backward_frames(node, bwd)
    switches = _cb._switches(bwd)
    if len(switches) != 2 or switches[0].args != (False,) or switches[1].args != (True,):
        return False
    if _names_unsupported(node, fwd):
        return False
    if frames == set():
        return _cb._declared_once(node, fwd) is False
    return bool(frames) and not any(
        _cb._is_once_wrapper(f) or _cb._changes_grad_mode(f) for f in frames
    )


# what a Function's class may call that its traced subgraphs do not show: grads handed to the
# backward as None (not zeros), in-place outputs
_UNSEEN = frozenset({"set_materialize_grads", "mark_dirty", "once_differentiable"})


def _names_unsupported(node: torch.fx.Node, fwd: torch.fx.GraphModule) -> bool:
    """Whether the Function's class (found from its forward's ops' frames, in the source)
    names one of ``_UNSEEN``; True where it cannot be found."""
    cls = _function_class(node, fwd)
    return cls is None or any(_cb._names(cls, word) for word in _UNSEEN)


def _function_class(node: torch.fx.Node, fwd: torch.fx.GraphModule) -> ast.ClassDef | None:
    """The class of the Function called at ``node``, in its source: the class whose method
    holds the first op of the forward ``fwd`` (None where no op or source tells)."""
    site = len(_cb._frames(node))
    for n in fwd.graph.nodes:
        if n.op not in _cb._CALLS or n.target is torch._C._set_grad_enabled:
            continue
        for filename, line, name in _cb._frames(n)[site:]:
            tree = _cb._parsed(filename)
            for cls in ast.walk(tree) if tree is not None else ():
                if not isinstance(cls, ast.ClassDef):
                    continue
                for f in cls.body:
                    if (
                        isinstance(f, ast.FunctionDef)
                        and f.name == name
                        and f.lineno <= line <= (f.end_lineno or f.lineno)
                    ):
                        return cls
    return None


@dataclasses.dataclass(frozen=True)
class CtxSaves:
    """What a Function call saves with ``ctx.save_for_backward`` that eager checks the
    versions of at its backward (an in-place change after the call raises): the example
    values of those ``inputs`` and of those ``outputs`` with each one's version as the call
    returned it (the writes its forward made into it counted), and the name eager's error gives
    the Function's node (``SaveOutBackward``; None where its class is not found). Tensors the
    forward made and saved are not the user's to change; tensors kept as ``ctx`` attributes
    eager does not check."""

    inputs: tuple[torch.Tensor, ...] = ()
    outputs: tuple[tuple[torch.Tensor, int], ...] = ()
    name: str | None = None

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (*self.inputs, *(t for t, _ in self.outputs))


def saved_by_ctx(node: torch.fx.Node) -> CtxSaves:
    """The ``CtxSaves`` of the Function call ``node`` (read from its subgraphs)."""
    subs = _subgraphs(node) if _is_apply(node) else None
    if subs is None:
        return CtxSaves()
    fwd = subs[0]
    out = _outputs(fwd)
    if not (isinstance(out, tuple | list) and len(out) == 2):
        return CtxSaves()
    outs, saved = out
    outs = tuple(outs) if isinstance(outs, tuple | list) else (outs,)
    by_ctx = node.kwargs.get("saved_for_backward_idx")
    by_ctx = range(len(saved)) if by_ctx is None else by_ctx
    value = node.meta.get("example_value")
    values = tuple(value) if isinstance(value, tuple | list) else (value,)
    args = node.args[2:]
    kinds = _saved_kinds(fwd, outs, tuple(saved))
    inputs, outputs = [], []
    for k in by_ctx:
        kind, at = kinds[k]
        if kind == "input" and at < len(args) and isinstance(_value(args[at]), torch.Tensor):
            inputs.append(_value(args[at]))
        elif kind == "output" and len(values) == len(outs):
            made = _value(outs[at])  # (the forward's own value: its writes, not the graph's)
            if isinstance(values[at], torch.Tensor) and isinstance(made, torch.Tensor):
                outputs.append((values[at], made._version))
    cls = _function_class(node, fwd)
    return CtxSaves(tuple(inputs), tuple(outputs), None if cls is None else f"{cls.name}Backward")


def lowerable(node: torch.fx.Node) -> bool:
    """Whether the ``autograd_function_apply`` ``node`` can be lowered as a ``custom_vjp``
    whose first derivatives (values and None-ness) and second are eager's."""
    if not _is_apply(node) or node.kwargs.get("dirty_idx"):
        return False
    subs = _subgraphs(node)
    if subs is None:
        return False
    fwd, bwd = subs
    if not _grad_mode_as_eager(node, fwd, bwd):
        return False
    args = node.args[2:]
    if not all(isinstance(_value(a), torch.Tensor) for a in args):
        return False
    out = _outputs(fwd)
    if not (isinstance(out, tuple | list) and len(out) == 2):
        return False
    outs, saved = out
    outs = outs if isinstance(outs, tuple | list) else (outs,)
    if not all(isinstance(_value(o), torch.Tensor) for o in (*outs, *saved)):
        return False
    placeholders = set(fwd.graph.find_nodes(op="placeholder"))
    if any(_returns_input(o, placeholders) for o in outs):
        return False
    grads = _outputs(bwd)
    grads = tuple(grads) if isinstance(grads, tuple | list) else (grads,)
    if len(grads) != len(args):
        return False
    for a, g in zip(args, grads):
        value = _value(a)
        if g is None:
            if value.requires_grad:
                return False  # eager: None, where the autograd graph reaches the input
            continue
        grad = _value(g)
        if not isinstance(grad, torch.Tensor) or grad.shape != value.shape:
            return False
        if not (value.is_floating_point() or value.is_complex()):
            return False
        if (
            grad.is_complex() != value.is_complex()
            or not grad.is_floating_point()
            and not (grad.is_complex())
        ):
            return False
    if _detaches(bwd):
        return False
    return not any(n.op == "get_attr" for g in (fwd, bwd) for n in g.graph.nodes)


def _detaches(bwd: torch.fx.GraphModule) -> bool:
    """Whether the backward stops tracking a value itself (``.detach()``, ``.data``), which a
    create_graph backward honours: its subgraph, traced without autograd, cannot show it to
    the export's stop-point pass (``_stop_gradient``)."""
    for n in bwd.graph.nodes:
        name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
        if isinstance(name, str) and (name.startswith("detach") or name == "data"):
            return True
        if n.op == "call_function" and "data" in str(n.target).split("."):
            return True
    return False


def _returns_input(out: torch.fx.Node, placeholders: set) -> bool:
    """An output that is a forward input or a view of one (``view_as`` of it included)."""
    seen = out
    while isinstance(seen, torch.fx.Node):
        if seen in placeholders:
            return True
        value = _value(seen)
        base = value._base if isinstance(value, torch.Tensor) else None
        if base is None and seen.op not in ("call_method", "call_function"):
            return False
        if seen.op == "call_method" and seen.target in _VIEWS or base is not None:
            seen = seen.args[0] if seen.args else None
            continue
        return False
    return False


_VIEWS = frozenset(
    {"view", "view_as", "reshape", "expand", "transpose", "permute", "t", "squeeze", "unsqueeze"}
)


def kept_in_program(node: torch.fx.Node) -> bool:
    """Whether the Function call ``node`` is lowered inside the XLA program (not run in eager
    PyTorch): ``lowerable``, and its subgraphs export."""
    return lowerable(node) and _prepared(node) is not None


def preserve_custom_functions(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose lowerable Function calls whose outputs autograd tracks target
    ``torch2xla::custom_function`` (``gm`` itself is never changed)."""
    calls = [
        n for n in gm.graph.nodes if n.op == "call_function" and _tracked(n) and kept_in_program(n)
    ]
    if not calls:
        return gm
    import torch2xla.ops._custom_function  # noqa: F401  (registers the op)

    new = copy.copy(gm)
    new.graph = graph = copy.deepcopy(gm.graph)
    by_name = {n.name: n for n in graph.nodes}
    for call in calls:
        key = _prepared(call)
        node = by_name[call.name]
        args = list(node.args[2:])
        fwd_attr, bwd_attr = node.args[:2]
        with graph.inserting_before(node):
            op = graph.call_function(torch.ops.torch2xla.custom_function.default, (args, key))
        op.meta = dict(node.meta)
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            with graph.inserting_after(op):
                first = graph.call_function(operator.getitem, (op, 0))
            first.meta = dict(node.meta)
            node.replace_all_uses_with(first)
        else:
            node.replace_all_uses_with(op)
        graph.erase_node(node)
        for attr in (fwd_attr, bwd_attr):
            if not attr.users:
                graph.erase_node(attr)
    new.recompile()
    return new


def _tracked(node: torch.fx.Node) -> bool:
    if not _is_apply(node):
        return False
    value = node.meta.get("example_value")
    values = value if isinstance(value, tuple | list) else (value,)
    return any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


_PREPARED_KEY = "torch2xla.custom_function_key"
NOT_LOWERED_WHY = "torch2xla.custom_function_not_lowered"


def _prepared(node: torch.fx.Node) -> int | None:
    """The key of ``node``'s exported subgraphs (exported at the first ask), or None where
    they cannot be exported as needed."""
    if _PREPARED_KEY in node.meta:
        return node.meta[_PREPARED_KEY]
    try:
        key = _export(node)
    except _NotExportable as e:
        key = None
        node.meta[NOT_LOWERED_WHY] = str(e)  # (why it stays in eager, for debugging)
    node.meta[_PREPARED_KEY] = key
    return key


class _NotExportable(Exception):
    pass


def _export(node: torch.fx.Node) -> int:
    from torch2xla.capture._annotate import annotate
    from torch2xla.capture._lower import lower
    from torch2xla.capture._partition import find_unsupported
    from torch2xla.ops._interpret import uses_rng

    fwd, bwd = _subgraphs(node)
    outs, saved = _outputs(fwd)
    outs = tuple(outs) if isinstance(outs, tuple | list) else (outs,)
    saved = tuple(saved)
    grads = _outputs(bwd)
    grads = tuple(grads) if isinstance(grads, tuple | list) else (grads,)
    grad_inputs = tuple(k for k, g in enumerate(grads) if g is not None)
    fwd_flat = _flat(fwd, (*outs, *saved))
    bwd_flat = _flat(bwd, tuple(grads[k] for k in grad_inputs))
    fwd_args = [_concrete(_value(a)) for a in node.args[2:]]
    bwd_args = [_concrete(_value(p)) for p in bwd.graph.find_nodes(op="placeholder")]
    lowered = []
    for gm, args in ((fwd_flat, fwd_args), (bwd_flat, bwd_args)):
        if any(a is None for a in args):
            raise _NotExportable
        # (no stop points: the subgraphs' values, traced without autograd, look untracked;
        # a backward with stop points of its own stays in eager, ``_detaches``)
        try:
            with torch.no_grad():
                low = lower(gm, args)
        except Exception as e:  # (a data-dependent op inside: kept in eager, as before)
            raise _NotExportable(f"{type(e).__name__}: {e}") from e
        if low.lifted or low.mutations or low.aliasing is not None or uses_rng(low.gm):
            raise _NotExportable("inputs written, attributes held or random numbers drawn")
        n_in = len(low.gm.graph.find_nodes(op="placeholder"))
        unsupported = find_unsupported(low.gm, [True] * n_in if gm is bwd_flat else None)
        if unsupported:
            raise _NotExportable(f"{unsupported[0].reason}")
        lowered.append(annotate(low.gm))
    value = node.meta.get("example_value")
    values = tuple(value) if isinstance(value, tuple | list) else (value,)
    key = next(_KEYS)
    _TRACKED[key] = Entry(
        lowered[0],
        lowered[1],
        tuple(_value(o) for o in outs) if len(values) == len(outs) else values,
        _saved_kinds(fwd, outs, saved),
        frozenset(node.kwargs.get("non_differentiable_idx") or ()),
        grad_inputs,
    )
    return key


def _saved_kinds(fwd: torch.fx.GraphModule, outs: tuple, saved: tuple) -> tuple:
    """What each saved value is to eager's autograd: an input (differentiated as itself), an
    output (through the Function's own backward: a saved output), or a value the forward
    made without autograd (a constant to a second backward)."""
    inputs = list(fwd.graph.find_nodes(op="placeholder"))
    kinds = []
    for v in saved:
        if v in inputs:
            kinds.append(("input", inputs.index(v)))
        elif v in outs:
            kinds.append(("output", outs.index(v)))
        else:
            kinds.append(("other", None))
    return tuple(kinds)


def _flat(gm: torch.fx.GraphModule, outputs: tuple) -> torch.fx.GraphModule:
    """``gm`` returning the flat tuple ``outputs`` (its own nodes), without the grad-mode
    switches Dynamo put around it (the export runs without autograd). Nodes nothing reads
    stay: an in-place call whose result is unused (``out.scatter_(-1, i, g)``) writes a value
    that is read, and fx's dead-code elimination, which knows no method call's effects,
    dropped it (the export's functional graph drops what is truly dead)."""
    graph = copy.deepcopy(gm.graph)
    env = dict(zip(gm.graph.nodes, graph.nodes))
    for n in list(graph.nodes):
        if n.op == "call_function" and n.target is torch._C._set_grad_enabled:
            graph.erase_node(n)
    out = graph.find_nodes(op="output")[0]
    out.args = (tuple(env[o] for o in outputs),)
    new = torch.fx.GraphModule(gm, graph)
    new.meta.update(gm.meta)
    return new


def _concrete(value):
    """A real tensor of ``value``'s (an example value's) shape, dtype and device to export
    with, or None where it has symbolic sizes."""
    if not isinstance(value, torch.Tensor):
        return None
    if any(not isinstance(s, int) for s in value.shape):
        return None
    return torch.zeros(value.shape, dtype=value.dtype, device=value.device)
