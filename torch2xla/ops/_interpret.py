"""ATen graph -> JAX function: walks the nodes and calls the op registry."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import jax
import torch
from torch.fx.node import map_aggregate

from torch2xla._errors import LoweringError, OpError, describe
from torch2xla.ops import LOWERINGS
from torch2xla.ops._registry import LoweringContext, RngState, reset_ctx, set_ctx
from torch2xla.runtime import _checks, _interop


def uses_rng(gm: torch.fx.GraphModule) -> bool:
    """Whether ``gm`` draws random numbers (in a higher-order op's subgraph too)."""
    return any(
        n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded in n.target.tags
        for n in gm.graph.nodes
    ) or any(uses_rng(sub) for sub in subgraphs(gm))


def subgraphs(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """The graph modules ``gm``'s ``get_attr`` nodes name: higher-order ops' subgraphs."""
    found = (_get_attr(gm, n.target) for n in gm.graph.find_nodes(op="get_attr"))
    return [m for m in found if isinstance(m, torch.fx.GraphModule)]


def to_jax_function(gm: torch.fx.GraphModule, checks: bool = False) -> Callable[..., tuple]:
    """A pure function ``f(seed, *inputs) -> tuple(outputs)`` equivalent to ``gm``.

    ``seed`` is a uint32 scalar or a PRNG key (a higher-order op's subgraph: ``ops/_hops.py``),
    ignored when the graph draws no random numbers; ``inputs``
    follow ``gm``'s placeholders. The function is meant to be traced under ``jax.jit``.
    Lowerings read the analyses ``capture.annotate`` recorded in ``gm``'s nodes (run it first;
    without them they take the forms right for any graph).

    With ``checks``, lowerings register runtime checks (``_checks``): where a trace registered
    any, ``f`` returns one more output after ``gm``'s, their status, and ``f.checks`` holds
    them in its order (empty where ``f`` returns no status).
    """
    nodes = list(gm.graph.nodes)
    constants = {n.target: _get_attr(gm, n.target) for n in nodes if n.op == "get_attr"}
    constants = {  # (a higher-order op's subgraph is handed to its lowering as it is)
        k: v if isinstance(v, torch.fx.GraphModule) else _interop.jnp_array(v)
        for k, v in constants.items()
    }

    def run(seed: jax.Array, *inputs: Any) -> tuple:
        rng = RngState(seed) if seed is not None else None
        registered: list | None = [] if checks else None
        env: dict[torch.fx.Node, Any] = {}
        args_iter = iter(inputs)
        load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a
        for node in nodes:
            if node.op == "placeholder":
                env[node] = next(args_iter)
            elif node.op == "get_attr":
                env[node] = constants[node.target]
            elif node.op == "call_function":
                args = map_aggregate(node.args, load)
                kwargs = map_aggregate(node.kwargs, load)
                env[node] = _call(node, args, kwargs, rng, env, registered)
            elif node.op == "output":
                out = node.args[0]
                outs = tuple(map_aggregate(out if isinstance(out, list | tuple) else (out,), load))
                run.checks = tuple(r.check for r in registered or ())
                return (*outs, _checks.fold(registered)) if registered else outs
            else:
                raise LoweringError(
                    f"torch2xla: unexpected node kind {node.op} in {describe(node)}"
                )
        raise LoweringError("torch2xla: graph has no output node")

    run.checks = ()
    return run


def _get_attr(gm: torch.nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _call(
    node: torch.fx.Node,
    args: Sequence,
    kwargs: dict,
    rng: RngState | None,
    env: dict,
    checks: list | None = None,
) -> Any:
    if node.target is operator.getitem:
        return args[0][args[1]]
    lowering = LOWERINGS.get(node.target)
    if lowering is None:
        raise LoweringError(f"torch2xla: no lowering for {describe(node)}")
    token = set_ctx(LoweringContext(node, rng, env, checks))
    try:
        return lowering(*args, **kwargs)
    except (LoweringError, OpError):  # (OpError: eager's own error for these arguments)
        raise
    except Exception as e:
        raise LoweringError(f"torch2xla: lowering {describe(node)} failed: {e}") from e
    finally:
        reset_ctx(token)
