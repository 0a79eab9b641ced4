"""Python arithmetic on a changing float that a program cannot compute as eager's Python does,
computed on the host at each call instead.

AdamW's step multiplies each parameter by ``1 - lr * weight_decay``: Python rounds the product,
then the difference. As tensor ops in the program, XLA's CPU compiler fuses the two into one
multiply-add, rounded once (``_float_values``), so the learning rate stayed a constant of the
program, keyed by value: a scheduler changing it compiled a program per step. Here the Python
arithmetic on the float (every ``operator`` or ``math`` function of it and of constants) runs
in Python at each call, on the value Dynamo passes (a 0-d float64 tensor), and each number
that a tensor op takes is passed to the program as a new 0-d float64 input. ``_float_values``
then takes those as tensors, as it takes Dynamo's own.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence

import torch

# Python arithmetic the host runs as the user's code ran it (on Python numbers)
_OPERATORS = frozenset(
    getattr(operator, n)
    for n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs")
)


# ``math.sqrt(s)`` of Dynamo's symbolic float is ``torch._sym_sqrt``: on a float, ``math``'s
_SYM_MATH = frozenset(
    getattr(torch, n) for n in dir(torch) if n.startswith("_sym_") and callable(getattr(torch, n))
)


def _host_op(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.kwargs:
        return False
    target = node.target
    if target in _OPERATORS or target in _SYM_MATH or target is torch.sym_float:
        return True
    return getattr(target, "__module__", None) == "math"


def _number(value) -> bool:
    return isinstance(value, float | int | torch.SymFloat | torch.SymInt) and not isinstance(
        value, bool
    )


@dataclasses.dataclass(frozen=True)
class HostNumbers:
    """The arithmetic on the float input at ``index`` (a 0-d float64 tensor), as ``steps``
    (``(function, args)``, an arg ``_Slot`` for a number computed before it, slot 0 the
    input's), whose ``outputs`` (slots) are the program's new inputs, in order."""

    index: int
    steps: tuple
    outputs: tuple[int, ...]

    def numbers(self, args: Sequence) -> list[torch.Tensor]:
        source = args[self.index]
        slots = [source.item()]
        for fn, fn_args in self.steps:
            slots.append(fn(*(slots[a.k] if isinstance(a, _Slot) else a for a in fn_args)))
        return [
            torch.scalar_tensor(slots[k], dtype=torch.float64, device=source.device)
            for k in self.outputs
        ]


@dataclasses.dataclass(frozen=True)
class _Slot:
    k: int


def host_numbers(
    gm: torch.fx.GraphModule,
    p: torch.fx.Node,
    items: list,
    planned: Callable[[torch.fx.Node, torch.fx.Node], bool],
    fake_mode,
    rewrite: bool = True,
) -> tuple[HostNumbers, list[torch.fx.Node]] | None:
    """Rewrite ``gm`` so that the Python arithmetic on ``p``'s ``.item()`` nodes ``items`` is
    done on the host: each number of it that a tensor op takes becomes a new placeholder (a
    0-d float64 tensor, read with ``.item()``). Only where every such use is ``planned``
    (``_float_values`` takes the number there as a tensor): else None, ``gm`` untouched.
    Returns the host's computation and the new placeholders (``rewrite=False``: whether it
    would, ``gm`` untouched: a Dynamo graph, whose placeholders Dynamo reads after the
    backend returns, is copied first)."""
    derived: list[torch.fx.Node] = []
    numbers = set(items)
    for node in gm.graph.nodes:  # (graph order: operands first)
        if node in numbers or not _host_op(node):
            continue
        inputs = node.all_input_nodes
        if not inputs or any(a not in numbers for a in inputs):
            continue
        if not all(isinstance(a, torch.fx.Node) or _number(a) for a in node.args):
            continue
        if not _number(node.meta.get("example_value")):
            continue
        numbers.add(node)
        derived.append(node)
    taken = set(derived)
    frontier = [n for n in derived if any(u not in taken for u in n.users)]
    if not frontier:
        return None
    for number in (*items, *frontier):
        if not all(planned(u, number) for u in number.users if u not in taken):
            return None
    if not all(isinstance(n.meta.get("example_value"), float | torch.SymFloat) for n in frontier):
        return None  # (an int or a bool: keyed by value as before)
    if not rewrite:
        return HostNumbers(-1, (), ()), []
    slots = dict.fromkeys(items, 0)
    steps = []
    for node in derived:
        slots[node] = len(steps) + 1
        args = tuple(_Slot(slots[a]) if isinstance(a, torch.fx.Node) else a for a in node.args)
        steps.append((node.target, args))
    index = list(gm.graph.find_nodes(op="placeholder")).index(p)
    host = HostNumbers(index, tuple(steps), tuple(slots[n] for n in frontier))
    last = list(gm.graph.find_nodes(op="placeholder"))[-1]
    placeholders = []
    device = p.meta["example_value"].device  # (the float's 0-d tensor: not the default device)
    for number in frontier:
        with gm.graph.inserting_after(last):
            q = last = gm.graph.placeholder(f"{number.name}_on_host")
        with fake_mode:
            q.meta["example_value"] = torch.empty((), dtype=torch.float64, device=device)
        with gm.graph.inserting_before(number):
            value = gm.graph.call_method("item", (q,))
        value.meta = {**number.meta}
        number.replace_all_uses_with(value, delete_user_cb=lambda u: u not in taken)
        placeholders.append(q)
    for node in reversed([*items, *derived]):
        if not node.users:
            gm.graph.erase_node(node)
    return host, placeholders


def with_host_numbers(hosts: Sequence[HostNumbers], args: Sequence) -> list:
    """``args`` and the new inputs of every ``hosts`` (in the order of their placeholders)."""
    out = list(args)
    for host in hosts:
        out.extend(host.numbers(args))
    return out
