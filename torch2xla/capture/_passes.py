"""Graph passes over the functional ATen graph, run after export and before translation to JAX.

A pass is any callable ``pass_(gm: torch.fx.GraphModule) -> torch.fx.GraphModule | None`` that
rewrites ``gm`` in place (returning None) or returns a new graph module. Users add their own
with ``torch.compile(..., backend="xla", options={"passes": [my_pass]})``; torch2xla's own
passes (causal masks as ``is_causal``, ``_causal.py``; dead code elimination) run through the
same hook, first.

A pass must keep the graph's inputs and outputs (placeholders, and the number of values the
output node returns: mutated inputs' new values, then user outputs). Nodes a pass adds need no
``meta["val"]``: it is filled in by fake-tensor propagation after the pass.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from torch2xla._errors import PassError
from torch2xla.capture._causal import causal_masks

GraphPass = Callable[[torch.fx.GraphModule], "torch.fx.GraphModule | None"]


def eliminate_dead_code(gm: torch.fx.GraphModule) -> None:
    """Remove nodes whose values are never used (random ops are kept, as in eager)."""
    if gm.graph.eliminate_dead_code():
        gm.recompile()


# Elements above which ``fold_constants`` leaves a value to XLA: large folded constants would
# be embedded in the program, making it bigger and slower to compile than the ops computing them.
FOLD_MAX_NUMEL = 4096


def fold_constants(gm: torch.fx.GraphModule) -> None:
    """Evaluate parameter-free subgraphs once, in eager PyTorch, and use their values as constants.

    A node folds when all of its inputs are constants (literals, graph constants or other folded
    nodes), it draws no random numbers, and its value has at most ``FOLD_MAX_NUMEL`` elements.
    Example: ``options={"passes": [torch2xla.fold_constants]}``.
    """
    graph = gm.graph
    values: dict[torch.fx.Node, torch.Tensor] = {}
    for node in graph.nodes:
        if node.op == "get_attr":
            obj = operator.attrgetter(node.target)(gm)
            if isinstance(obj, torch.Tensor):
                values[node] = obj
    folded: list[torch.fx.Node] = []
    with unset_fake_temporarily():
        for node in list(graph.nodes):
            if not _foldable(node, values):
                continue
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.__getitem__)
            out = node.target(*args, **kwargs)
            if not isinstance(out, torch.Tensor) or out.numel() > FOLD_MAX_NUMEL:
                continue
            values[node] = out
            folded.append(node)
    # Replace only folded nodes that something unfolded still uses; the rest become dead.
    count = 0
    for node in folded:
        if all(user in values for user in node.users):
            continue
        name = f"_folded_constant_{count}"
        while hasattr(gm, name):
            count += 1
            name = f"_folded_constant_{count}"
        count += 1
        gm.register_buffer(name, values[node])
        with graph.inserting_before(node):
            const = graph.get_attr(name)
        const.meta.update(node.meta)
        node.replace_all_uses_with(const)
    graph.eliminate_dead_code()
    gm.recompile()


def _foldable(node: torch.fx.Node, values: dict) -> bool:
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if torch.Tag.nondeterministic_seeded in node.target.tags or node.target._schema.is_mutable:
        return False
    inputs = node.all_input_nodes
    if any(n not in values for n in inputs):
        return False
    # Sizes and scalars that come from SymInts are not constants.
    return not any(
        isinstance(a, torch.SymInt | torch.SymFloat | torch.SymBool)
        for a in pytree.tree_leaves((node.args, node.kwargs))
    )


BUILTIN_PASSES: tuple[GraphPass, ...] = (causal_masks, eliminate_dead_code)


def run_passes(
    gm: torch.fx.GraphModule, passes: Sequence[GraphPass], graph_name: str
) -> torch.fx.GraphModule:
    """Run the built-in passes, then ``passes``, on the ATen graph ``gm`` of ``graph_name``.

    The user's passes are checked after each run (contract, lint) and may leave nodes without
    fake values; the built-in ones keep the graph valid themselves, so they cost no checks.
    """
    for pass_ in BUILTIN_PASSES:
        pass_(gm)
    for pass_ in passes:
        placeholders = len(gm.graph.find_nodes(op="placeholder"))
        outputs = _num_outputs(gm)
        name = getattr(pass_, "__qualname__", repr(pass_))
        try:
            result = pass_(gm)
        except Exception as e:
            raise PassError(
                f"torch2xla: graph pass {name} failed on {graph_name}: {type(e).__name__}: {e}\n"
                "Fix the pass, or remove it from options['passes']."
            ) from e
        if result is not None:
            if not isinstance(result, torch.fx.GraphModule):
                raise PassError(
                    f"torch2xla: graph pass {name} returned {type(result).__name__}; a pass "
                    "returns None (after rewriting the graph in place) or a torch.fx.GraphModule."
                )
            gm = result
        if len(gm.graph.find_nodes(op="placeholder")) != placeholders or (
            _num_outputs(gm) != outputs
        ):
            raise PassError(
                f"torch2xla: graph pass {name} changed the inputs or outputs of {graph_name} "
                f"({placeholders} inputs, {outputs} outputs before). A pass may rewrite the "
                "graph's nodes but must keep its placeholders and its output values."
            )
        try:
            gm.graph.lint()
        except Exception as e:
            raise PassError(f"torch2xla: graph pass {name} left {graph_name} malformed: {e}") from e
        gm.recompile()
        _fill_fake_values(gm)
    return gm


def _num_outputs(gm: torch.fx.GraphModule) -> int:
    out = gm.graph.find_nodes(op="output")[0].args[0]
    return len(out) if isinstance(out, list | tuple) else 1


def _fill_fake_values(gm: torch.fx.GraphModule) -> None:
    """Give nodes that a pass added their ``meta["val"]`` (lowerings read dtypes from it)."""
    missing = [
        n for n in gm.graph.nodes if n.op in ("call_function", "get_attr") and "val" not in n.meta
    ]
    if not missing:
        return
    inputs = [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]
    fake_mode = torch._guards.detect_fake_mode(inputs)
    if fake_mode is None:
        fake_mode = torch._subclasses.FakeTensorMode()
    FakeTensorProp(gm, fake_mode).propagate_dont_convert_inputs(*inputs)
