"""``options={"remat": True}``: activation checkpointing per module call.

The ATen graph is cut into runs of consecutive nodes that come from the same top-level module
call (``node.meta["nn_module_stack"]``; e.g. each block of a transformer, each layer of an
``nn.Sequential``). Each run becomes one JAX function wrapped in ``jax.checkpoint``: the forward
keeps only the inputs of each run for the backward, and the backward recomputes a run's
activations. The memory kept from forward to backward falls from every layer's activations to
the layer inputs, at the cost of a second forward. How much of that the peak keeps is up to
XLA's scheduler: on CPU (jax 0.10) the backward still holds most layers' recomputed activations
at once (6 GPT-2 blocks: residuals 603 -> 30 MiB, step peak 633 -> 460 MiB by XLA's memory
analysis; ``benchmarks/train_step.py``).

Checkpointing the whole graph as one function would save nothing at the peak: the backward
would recompute every activation before using the first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import torch
from torch.fx.passes.split_module import split_module

from torch2xla.capture._annotate import annotate
from torch2xla.ops._interpret import to_jax_function
from torch2xla.runtime import _checks


def segment_keys(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, int]:
    """Segment index per computing node: a new segment starts wherever the outermost module
    call (the first entry of ``nn_module_stack``) changes between consecutive nodes."""
    keys: dict[torch.fx.Node, int] = {}
    index, previous = 0, object()
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        stack = node.meta.get("nn_module_stack") or {}
        outer = next(iter(stack.values()))[0] if stack else None
        if outer != previous:
            index, previous = index + 1, outer
        keys[node] = index
    for node in gm.graph.find_nodes(op="get_attr"):  # constants go with their first user
        keys[node] = min((keys[u] for u in node.users if u in keys), default=1)
    return keys


def checkpointed_function(gm: torch.fx.GraphModule, checks: bool = False) -> Callable[..., tuple]:
    """Like ``to_jax_function(gm, checks)``: ``f(seed, *inputs) -> tuple(outputs)`` (and the
    status of the runtime checks, listed in ``f.checks``), with every module-call segment of
    ``gm`` wrapped in ``jax.checkpoint``. Build it inside ``x64()``. ``gm`` is annotated
    (``capture.annotate``); each segment is annotated again, as the graph it is translated as."""
    keys = segment_keys(gm)
    if len(set(keys.values())) <= 1:
        inner = to_jax_function(gm, checks)
        outer = jax.checkpoint(inner)

        def whole(seed, *inputs) -> tuple:
            outs = outer(seed, *inputs)
            whole.checks = inner.checks
            return outs

        whole.checks = ()
        return whole
    split = split_module(gm, gm, lambda node: keys[node], keep_original_order=True)
    steps: list[tuple[str, Any]] = []
    for node in split.graph.nodes:
        if node.op == "call_module":
            sub = getattr(split, node.target)
            single = _force_tuple_output(sub)
            n_out = len(sub.graph.find_nodes(op="output")[0].args[0])
            inner = to_jax_function(annotate(sub), checks)
            steps.append(("call", (node, jax.checkpoint(inner), inner, single, n_out, len(steps))))
        elif node.op == "call_function":  # getitem on a segment's outputs
            steps.append(("function", node))
        elif node.op not in ("placeholder", "output"):
            raise NotImplementedError(f"torch2xla: remat cannot run {node.op} node {node}")
    placeholders = split.graph.find_nodes(op="placeholder")
    output = split.graph.find_nodes(op="output")[0]

    def run(seed, *inputs) -> tuple:
        env: dict[torch.fx.Node, Any] = dict(zip(placeholders, inputs))
        statuses: list = []  # (status, offset) of each segment with runtime checks
        found: list = []

        def load(a):
            return torch.fx.node.map_aggregate(
                a, lambda v: env[v] if isinstance(v, torch.fx.Node) else v
            )

        for kind, step in steps:
            if kind == "call":
                node, fn, inner, single, n_out, i = step
                outs = fn(_segment_seed(seed, i), *load(node.args))
                if len(outs) > n_out:  # the segment's runtime checks failed or passed
                    statuses.append((outs[n_out], len(found)))
                    found.extend(inner.checks)
                    outs = outs[:n_out]
                env[node] = outs[0] if single else outs
            else:
                env[step] = step.target(*load(step.args), **load(step.kwargs))
        result = load(output.args[0])
        result = tuple(result) if isinstance(result, list | tuple) else (result,)
        run.checks = tuple(found)
        return (*result, _checks.chain(statuses)) if statuses else result

    run.checks = ()
    return run


def _force_tuple_output(sub: torch.fx.GraphModule) -> bool:
    """Make ``sub`` return a tuple; True when it returned one bare value."""
    out = sub.graph.find_nodes(op="output")[0]
    if isinstance(out.args[0], list | tuple):
        return False
    out.args = ((out.args[0],),)
    sub.recompile()
    return True


def _segment_seed(seed, index: int):
    """A seed of its own per segment, so that segments draw independent random numbers."""
    if seed is None:
        return None
    key = jax.random.fold_in(jax.random.key(seed), index)
    return jax.random.bits(key, (), jnp.uint32)
