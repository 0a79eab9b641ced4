"""The contexts a Dynamo graph run in eager PyTorch left open where one of its ops raised.

Dynamo turns the user's ``with`` blocks into pairs of nodes: ``_enter_inference_mode`` and
``_exit_inference_mode``, ``torch.amp._enter_autocast`` and ``_exit_autocast``,
``_enter_dual_level`` and ``_exit_dual_level``, two ``_sdpa_kernel`` calls. Run in eager (a
failed call replayed, a graph that runs whole in eager), the graph's code stops at the failing
op and its exit nodes never run, where eager's ``with`` blocks leave on the way out: an
IndexError inside ``torch.inference_mode()`` left the thread in inference mode (the next
training step's outputs required no grad), one inside ``autocast`` left autocast's nesting
count up, so its cache of casts was never cleared (a later autocast region used the weights
from before an optimizer step), one inside ``fwAD.dual_level()`` left the level open (the next
``dual_level()`` raised "Nested forward mode AD is not supported"), one inside
``sdpa_kernel(...)`` left the backends restricted.

``unwind(gm, error)`` runs, newest first, the exit nodes of ``gm`` whose enter node ran and
which did not: the generated code's frame in ``error``'s traceback binds a node's name once
it ran (to ``None`` after its last use), so a name that is missing did not run. The
``_sdpa_kernel`` pairs call one function for both ends, so a graph holding them has the
backends taken before it runs and set back (``sdpa_state``).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch


@functools.cache
def _exits() -> frozenset:
    """The functions Dynamo's exit nodes call with their enter node's value (those this torch
    has)."""
    names = [
        ("torch.autograd.grad_mode", "_exit_inference_mode"),
        ("torch.amp", "_exit_autocast"),
        ("torch.amp.autocast_mode", "_exit_autocast"),
        ("torch._functorch.predispatch", "_exit_dual_level"),
        ("torch._C", "_exit_dual_level"),
    ]
    found = set()
    for module, name in names:
        try:
            target = getattr(__import__(module, fromlist=[name]), name, None)
        except ImportError:
            target = None
        if target is not None:
            found.add(target)
    return frozenset(found)


def _sdpa_kernel() -> Callable | None:
    attention = getattr(torch.nn, "attention", None)
    return getattr(attention, "_sdpa_kernel", None)


def _plan(gm: torch.fx.GraphModule) -> tuple[list[torch.fx.Node], bool]:
    """(``gm``'s exit nodes, whether it sets sdpa's backends), kept on the graph."""
    plan = gm.__dict__.get("_torch2xla_unwind")
    if plan is None:
        exits, sdpa = _exits(), _sdpa_kernel()
        nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        plan = (
            [n for n in nodes if n.target in exits],
            sdpa is not None and any(n.target is sdpa for n in nodes),
        )
        gm.__dict__["_torch2xla_unwind"] = plan
    return plan


def sdpa_state(gm: torch.fx.GraphModule) -> Any:
    """sdpa's backends (in priority order) where ``gm`` sets them, else None."""
    if not _plan(gm)[1]:
        return None
    from torch.nn.attention import _cur_sdpa_kernel_backends

    return _cur_sdpa_kernel_backends(with_priority=True)


def _frame(gm: torch.fx.GraphModule, error: BaseException) -> types.FrameType | None:
    code = getattr(getattr(type(gm), "forward", None), "__code__", None)
    tb, found = error.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            found = tb.tb_frame  # (the innermost: a graph that calls itself is not one)
        tb = tb.tb_next
    return found


def unwind(gm: torch.fx.GraphModule, error: BaseException, sdpa: Any) -> None:
    """Leave the contexts ``gm``'s code entered and did not leave before ``error``, newest
    first; set sdpa's backends back to ``sdpa`` (``sdpa_state``)."""
    exits, _ = _plan(gm)
    frame = _frame(gm, error) if exits else None
    if frame is not None:
        names = frame.f_locals
        for node in reversed(exits):
            if node.name in names:
                continue  # (it ran)
            args = _bound(node, names)
            if args is not None:
                node.target(*args[0], **args[1])
    if sdpa is not None:
        _sdpa_kernel()(sdpa, set_priority=True)


def _bound(node: torch.fx.Node, names: dict) -> tuple[tuple, dict] | None:
    """``node``'s arguments with the values its code bound to their nodes; None where one of
    them did not run (its context was never entered) or was released."""
    missing = False

    def value(n: torch.fx.Node) -> Any:
        nonlocal missing
        v = names.get(n.name)
        if v is None:
            missing = True
        return v

    args = torch.fx.node.map_arg((node.args, node.kwargs), value)
    return None if missing else (tuple(args[0]), dict(args[1]))
