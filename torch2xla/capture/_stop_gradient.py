"""Keep eager autograd's stop points (``.detach()``, ``.data``, ``torch.no_grad()`` regions) in
the exported graph, so that ``jax.vjp`` differentiates exactly what eager autograd does.

The ATen graph is exported with autograd off: there ``x.detach()`` is a plain alias and the
grad-mode switches of a ``no_grad`` block are gone, so ``jax.vjp`` would send gradients through
them. Dynamo records, for every node of its graph, whether eager would track the value
(``meta["example_value"].requires_grad``). A float value that eager does not track although an
input of its node is tracked is a stop point; this pass routes its uses through
``torch2xla::stop_gradient`` (``lax.stop_gradient`` in JAX) and drops the grad-mode switches.

An in-place write eager does not record (under ``no_grad``, or into ``.data`` / ``.detach()``
of a tracked tensor: an optimizer step, ``nn.init.zeros_(w)``) changes the value of the
tracked tensors sharing its memory, not their gradients: eager differentiates later uses as
if the tensor had been that value all along. Each such tensor still read after the write is
taken again after it as ``torch2xla::straight_through(new value, value before)``.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from torch2xla.capture._inference import ENTER_INFERENCE, EXIT_INFERENCE
from torch2xla.capture._wrappers import shares_memory
from torch2xla.ops._autodiff import stop_gradient  # noqa: F401  (defines the ops)

_STOP = torch.ops.torch2xla.stop_gradient.default
_STRAIGHT = torch.ops.torch2xla.straight_through.default
_GRAD_MODE_SWITCHES = frozenset({torch._C._set_grad_enabled})
_IN_PLACE_FUNCTIONS = frozenset({operator.setitem})
_KEPT = "torch2xla_straight_through"  # meta key of the nodes ``_straight_through_after`` adds


def insert_stop_gradients(gm: torch.fx.GraphModule, grad_enabled: bool) -> torch.fx.GraphModule:
    """``gm``, or a copy of it with eager's stop points marked by ``torch2xla::stop_gradient``
    (when ``grad_enabled``, the grad mode ``gm`` was traced in) and grad-mode switches removed.

    ``gm`` itself is left untouched: a Dynamo graph is lowered once per input signature.
    """
    stops = grad_enabled and any(_is_stop_point(n) for n in gm.graph.nodes)
    # Higher-order ops' subgraphs (``torch.cond``'s branches, a scan's step), which the export
    # keeps and ``ops/_hops.py`` translates, have their stop points marked the same way.
    subgraphs = {}
    for node in gm.graph.find_nodes(op="get_attr"):
        sub = gm
        for part in node.target.split("."):
            sub = getattr(sub, part, None)
        if isinstance(sub, torch.fx.GraphModule) and node.target not in subgraphs:
            marked = insert_stop_gradients(sub, grad_enabled)
            if marked is not sub:
                subgraphs[node.target] = marked
    if (
        not stops
        and not subgraphs
        and not any(_is_switch(n) or _nesting(n) for n in gm.graph.nodes)
    ):
        return gm
    graph = copy.deepcopy(gm.graph)
    if grad_enabled:
        _keep_unrecorded_writes(graph)
    made, recorded = _history(graph)
    regions = _regions(graph)
    stops_at: dict = {}  # (stop point, where its stop is placed) -> the stop
    views: set = set()  # views of stop points (and of those views), read through a stop too
    depth = 0  # of torch.func transforms that differentiate (grad, vjp, jacrev)
    for node in list(graph.nodes):
        if _nesting(node):
            # The export itself runs their autograd (into ATen ops), with grad enabled as
            # torch.func enables it whatever the caller's mode (Dynamo records no switch
            # where the mode was on already); the switches inside them are kept.
            depth += _nesting(node)
            with graph.inserting_after(node):
                graph.call_function(torch._C._set_grad_enabled, (depth > 0,))
        elif _is_switch(node) and depth == 0:
            graph.erase_node(node)
        elif grad_enabled and (node in views or _is_stop_point(node, made)):
            for user in list(node.users):
                if node in _written(user):
                    if recorded.get(user) and node not in views:
                        # (a recorded write: eager tracks the value from there, and only
                        # what the write adds: the memory takes its stopped value first,
                        # later reads are not stopped)
                        _restart_history(graph, user, node)
                        break
                    continue  # an in-place write must still reach the value itself
                through = None if node in views else _recorded_write_through(user, node, recorded)
                if through is not None:  # (the same through a view, ``t[1:3].add_(w)``)
                    _restart_history(graph, user, node)
                    break
                if _view_of(user, node, made):
                    # (a view, as ``c.diagonal().fill_(1)``: a write through it must reach the
                    # value too; its own reads are stopped in turn)
                    views.add(user)
                    continue
                # (read inside a torch.func transform the value is outside of: stopped
                # before the transform starts, at the value's own functorch level)
                inner = regions[user][len(regions[node]) :]
                at = inner[0] if inner else user
                stop = stops_at.get((node, at))
                if stop is None:
                    with graph.inserting_before(at):
                        stop = stops_at[node, at] = graph.call_function(_STOP, (node,))
                    stop.meta = {k: v for k, v in node.meta.items() if k != "example_value"}
                    stop.meta["example_value"] = node.meta["example_value"]
                user.replace_input_with(node, stop)
    new = torch.fx.GraphModule(gm, graph)
    new.meta.update(gm.meta)
    for target, marked in subgraphs.items():
        new.set_submodule(target, marked)
    return new


def grad_mode_after(gm: torch.fx.GraphModule) -> bool | None:
    """The grad mode the Dynamo graph ``gm`` leaves set (its last switch), None where it
    switches none. Dynamo records ``torch.set_grad_enabled(False)`` called as a function as
    a switch the graph's run makes and nothing after it sets back: eager's, and a graph run
    in eager, leave grad off for the caller (and the frame's code after a graph break); a
    program leaves the mode as it was, so the backend sets this one after each call. A
    ``with`` block's last switch sets back the mode the graph is called in (Dynamo guards
    it): setting it changes nothing."""
    # (an inference-mode block sets grad mode too, and back on leaving: a switch inside it,
    # ``enable_grad()`` in the block, is not the graph's last word)
    mode, before = None, []  # (None: the mode the graph is called in)
    for node in gm.graph.nodes:
        if _is_switch(node):
            mode = bool(node.args[0])
        elif node.op == "call_function" and node.target is ENTER_INFERENCE:
            before.append(mode)
            mode = not (bool(node.args[0]) if node.args else True)
        elif node.op == "call_function" and node.target is EXIT_INFERENCE and before:
            mode = before.pop()
    return mode


def _history(graph: torch.fx.Graph) -> tuple[dict, dict]:
    """Per node, whether eager tracks its value when it is made (``made``), and per in-place
    write, whether eager records it (``recorded``). Dynamo's example value is the tensor as
    the graph leaves it: a value made under ``no_grad`` (untracked) and then written with a
    tracked one (``t.add_(x)``) requires grad there."""
    enabled, now, made, recorded = True, {}, {}, {}

    def tracked(n):
        return now[n] if n in now else _tracked(n)

    for node in graph.nodes:
        if _is_switch(node):
            enabled = bool(node.args[0])
            continue
        targets = _written(node)
        if targets:
            rec = enabled and any(map(tracked, node.all_input_nodes))
            recorded[node] = rec
            for t in targets:
                now[t] = now.get(t, False) or rec or tracked(t)
            now[node] = made[node] = tracked(targets[0])
        elif node.op == "placeholder" or enabled or node.meta.get(_KEPT):
            now[node] = made[node] = _tracked(node)
        else:  # (under no_grad: untracked whatever later writes make it)
            now[node] = made[node] = False
    return made, recorded


def _recorded_write_through(user: torch.fx.Node, node: torch.fx.Node, recorded: dict):
    """A recorded in-place write into ``user``, a view of ``node``'s memory, if any."""
    if _storage(user) is None or _storage(user) != _storage(node):
        return None
    return next((u for u in user.users if user in _written(u) and recorded.get(u)), None)


def _view_of(user: torch.fx.Node, node: torch.fx.Node, made: dict) -> bool:
    """Whether ``user`` returns a view of ``node``'s value that eager does not track either
    (their example values share memory; ``made``: whether eager tracks a value when it is
    made, ``_history``: a view taken under ``no_grad`` of a leaf that requires grad requires
    grad too, untracked, as ``x.t()[0]`` of ``x.t()[0].zero_()``)."""
    a, b = user.meta.get("example_value"), node.meta.get("example_value")
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if made.get(user, _requires_grad(a)):
        return False
    if a.layout != torch.strided or b.layout != torch.strided:
        return False
    # (inside torch.func transforms, jacrev's basis inside an outer jacrev or hessian: the
    # wrappers' memory at the same levels)
    return shares_memory(a, b)


def _is_switch(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in _GRAD_MODE_SWITCHES


# torch.func's grad levels: entered and left around a differentiating transform's function.
_NESTING = {
    torch._C._functorch._grad_increment_nesting: 1,
    torch._C._functorch._grad_decrement_nesting: -1,
}


def _nesting(node: torch.fx.Node) -> int:
    return _NESTING.get(node.target, 0) if node.op == "call_function" else 0


# Every torch.func transform's levels (vmap and jvp too): entered, left.
_ENTER = frozenset(
    {
        torch._C._functorch._grad_increment_nesting,
        torch._C._functorch._vmap_increment_nesting,
        torch._C._functorch._jvp_increment_nesting,
    }
)
_LEAVE = frozenset(
    {
        torch._C._functorch._grad_decrement_nesting,
        torch._C._functorch._vmap_decrement_nesting,
        torch._C._functorch._jvp_decrement_nesting,
    }
)


def _regions(graph: torch.fx.Graph) -> dict[torch.fx.Node, tuple[torch.fx.Node, ...]]:
    """Per node, the nodes entering the torch.func transforms it runs inside, outermost
    first."""
    out, open_ = {}, ()
    for node in graph.nodes:
        out[node] = open_
        if node.op == "call_function" and node.target in _ENTER:
            open_ = (*open_, node)
        elif node.op == "call_function" and node.target in _LEAVE and open_:
            open_ = open_[:-1]
    return out


def _requires_grad(value: torch.Tensor) -> bool:
    """Whether eager autograd tracks ``value``. Inside ``torch.vmap`` a value is a batched
    wrapper whose own ``requires_grad`` is always False: autograd tracks the tensor it wraps."""
    while torch._C._functorch.is_functorch_wrapped_tensor(value):
        value = torch._C._functorch.get_unwrapped(value)
    return value.requires_grad


def _tracked(node: torch.fx.Node) -> bool:
    """Whether eager tracks ``node``'s value; a tuple (``x.max(0)``) counts as tracked when
    any element is or any input of its node is (its elements are read through getitem)."""
    value = node.meta.get("example_value")
    if isinstance(value, torch.Tensor):
        return _requires_grad(value)
    if isinstance(value, (tuple, list)):
        if any(isinstance(v, torch.Tensor) and _requires_grad(v) for v in value):
            return True
        return any(_tracked(n) for n in node.all_input_nodes)
    return False


def _is_stop_point(node: torch.fx.Node, made: dict | None = None) -> bool:
    if node.op not in ("call_function", "call_method", "call_module"):
        return False
    value = node.meta.get("example_value")
    if not isinstance(value, torch.Tensor):
        return False
    if made.get(node, _requires_grad(value)) if made is not None else _requires_grad(value):
        return False
    if not (value.dtype.is_floating_point or value.dtype.is_complex):
        return False  # integer values carry no gradient in JAX either
    return any(_tracked(n) for n in node.all_input_nodes)


def _mutates(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Whether ``user`` may write into ``node``'s value in place."""
    if user.kwargs.get("inplace") is True:
        return True
    if user.op == "call_function" and user.target in _IN_PLACE_FUNCTIONS:
        return bool(user.args) and user.args[0] is node
    name = user.target if user.op == "call_method" else getattr(user.target, "__name__", "")
    if not isinstance(name, str) or not name.endswith("_"):
        return False
    return not name.startswith("_") or name.startswith("_foreach_")


def _written(node: torch.fx.Node) -> tuple[torch.fx.Node, ...]:
    """The values ``node`` writes into in place (its first argument, each tensor of a list as
    ``torch._foreach_mul_``'s first, or ``out=``), if any."""
    out = node.kwargs.get("out")
    if isinstance(out, torch.fx.Node):
        return (out,)
    if node.op in ("call_function", "call_method", "call_module") and node.args:
        first = node.args[0]
        if isinstance(first, torch.fx.Node):
            return (first,) if _mutates(node, first) else ()
        if (
            isinstance(first, (list, tuple))
            and first
            and all(isinstance(a, torch.fx.Node) for a in first)
            and _mutates(node, None)
        ):
            return tuple(first)
    return ()


def _storage(node: torch.fx.Node) -> StorageWeakRef | None:
    value = node.meta.get("example_value")
    if not isinstance(value, torch.Tensor) or not (
        value.dtype.is_floating_point or value.dtype.is_complex
    ):
        return None
    while torch._C._functorch.is_functorch_wrapped_tensor(value):
        value = torch._C._functorch.get_unwrapped(value)
    return StorageWeakRef(value.untyped_storage())


def _keep_unrecorded_writes(graph: torch.fx.Graph) -> None:
    """After each in-place write eager autograd does not record, take every tracked tensor
    sharing its memory and still read later as ``straight_through(new, before)`` (see the
    module docstring). Runs before the grad-mode switches are removed."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    last_use = {n: max((order[u] for u in n.users), default=-1) for n in graph.nodes}
    made, _ = _history(graph)
    enabled = True
    tracked: list[torch.fx.Node] = []  # tracked float values so far, in graph order
    for node in list(graph.nodes):
        if _is_switch(node):
            enabled = bool(node.args[0])
            continue
        targets = _written(node)
        unrecorded = [t for t in targets if not (enabled and _tracked(t))]
        if unrecorded:
            _stop_sources(graph, node, targets)
        for target in unrecorded:
            memory = _storage(target)  # (None for an integer tensor: no gradient to keep)
            written = memory is not None and [
                t for t in tracked if last_use[t] > order[node] and _storage(t) == memory
            ]
            if written:
                _straight_through_after(graph, node, written)
        if made.get(node, True) and _tracked(node) and _storage(node) is not None:
            tracked.append(node)
        # (a value made untracked is tracked from its first recorded write)
        tracked.extend(t for t in targets if t not in unrecorded and t not in tracked)


def _restart_history(graph: torch.fx.Graph, write: torch.fx.Node, node: torch.fx.Node) -> None:
    """Before ``write``, the first recorded in-place write into the untracked ``node``: its
    memory takes ``stop_gradient`` of its value (for the reads and writes after it)."""
    with graph.inserting_before(write):
        stop = graph.call_function(_STOP, (node,))
        copy = graph.call_method("copy_", (node, stop))
    for n in (stop, copy):
        n.meta = {k: v for k, v in node.meta.items() if k != "example_value"}
        n.meta["example_value"] = node.meta["example_value"]


def _stop_sources(graph: torch.fx.Graph, write: torch.fx.Node, targets: tuple) -> None:
    """The tracked values an unrecorded in-place ``write`` reads besides its ``targets`` (``w``
    in ``buf.lerp_(w, 0.5)`` under ``no_grad``), read through ``stop_gradient``: the written
    values carry no history in eager, so later reads of ``target`` get no gradient through
    them."""
    for source in write.all_input_nodes:
        if source in targets or not _tracked(source) or _storage(source) is None:
            continue
        with graph.inserting_before(write):
            stop = graph.call_function(_STOP, (source,))
        stop.meta = {k: v for k, v in source.meta.items() if k != "example_value"}
        stop.meta["example_value"] = source.meta["example_value"]
        write.replace_input_with(source, stop)


def write_records(gm: torch.fx.GraphModule) -> tuple[bool, dict[int, frozenset[bool]]]:
    """Of the Dynamo graph ``gm`` traced with grad enabled: whether eager autograd records
    every in-place write (none under ``no_grad``, into ``.data`` or ``.detach()``), and per
    input (placeholder position) written through, whether its writes are recorded (True),
    not (False) or both. Eager rebases a written input's history on a recorded write."""
    from torch2xla.capture._written import _root

    position = {n: i for i, n in enumerate(gm.graph.find_nodes(op="placeholder"))}
    enabled, every = True, True
    per_input: dict[int, set[bool]] = {}
    for node in gm.graph.nodes:
        if _is_switch(node):
            enabled = bool(node.args[0])
            continue
        for target in _written(node):
            recorded = enabled and _tracked(target)
            every = every and recorded
            root = _root(target)
            if root in position:
                per_input.setdefault(position[root], set()).add(recorded)
    return every, {i: frozenset(kinds) for i, kinds in per_input.items()}


def written_with_grad(gm: torch.fx.GraphModule, enabled: bool) -> frozenset[int]:
    """The inputs (placeholder positions) of the Dynamo graph ``gm`` that it writes into (or
    into a view of) with autograd's record, while grad mode is on for a call made with grad
    mode ``enabled`` (the graph's own ``set_grad_enabled`` switches followed), whose example
    requires grad: eager refuses such a write into a leaf, or a view of one
    (``leaf_written``)."""
    from torch2xla.capture._written import _root

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    position = {n: i for i, n in enumerate(placeholders)}
    found = set()
    for node in gm.graph.nodes:
        if _is_switch(node):
            enabled = bool(node.args[0])
            continue
        if not enabled:
            continue
        for target in _written(node):
            # (a write autograd records: not through ``.data`` or ``.detach()``, which eager
            # lets write a leaf)
            i = position.get(_root(target)) if _tracked(target) else None
            example = placeholders[i].meta.get("example_value") if i is not None else None
            if isinstance(example, torch.Tensor) and _requires_grad(example):
                found.add(i)
    return frozenset(found)


def leaf_written(t) -> bool:
    """Whether eager refuses an in-place write into ``t`` with grad mode on: a leaf that
    requires grad, or a view of one ("a leaf Variable that requires grad is being used in an
    in-place operation"). Dynamo guards ``requires_grad`` only: a graph traced for
    ``f(x * 2)`` served ``f(x)`` and wrote the leaf."""
    if not t.requires_grad:
        return False
    base = t._base
    return (t if base is None else base).grad_fn is None


def _straight_through_after(
    graph: torch.fx.Graph, write: torch.fx.Node, written: list[torch.fx.Node]
) -> None:
    before = []
    for t in written:
        with graph.inserting_before(write):
            before.append(graph.call_method("clone", (t,)))
    anchor = write
    for t, b in zip(written, before):
        with graph.inserting_after(anchor):
            value = graph.call_function(_STRAIGHT, (t, b))
        with graph.inserting_after(value):
            anchor = graph.call_method("copy_", (t, value))
        for n in (b, value, anchor):
            n.meta["example_value"] = t.meta["example_value"]
            n.meta[_KEPT] = True  # (tracked, though under no_grad: ``_history``)
