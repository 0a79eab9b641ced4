"""Python floats that a graph uses only as operands of elementwise ops, passed to its programs
as 0-d tensors (one program for all their values).

Dynamo hands a float argument that changes between calls (a warm-up schedule's scale, a loss
weight, ``x * x.sum().item()`` after a graph break) to the graph as a 0-d float64 tensor the
graph reads back with ``.item()``. Lowered as it is, the value is a constant of the program
(``_lower._specialize_scalars``), keyed by value: every value compiled a program of its own.

Where every use of the number is an operand of an op in which eager treats a Python float
exactly as a 0-d tensor of some dtype ``D`` (the same kernel, the same computation and result
dtypes), the graph is rewritten to pass the 0-d tensor there instead. A Python float in an
eager op is a "wrapped number": a 0-d float64 tensor that differs from any other 0-d tensor
only in type promotion. So ``D`` is float64 where promotion is the same for both (beside
floating tensors: float32 and bfloat16 ops keep their dtype and compute as with the number),
else the default float dtype (beside integer tensors, whose op the number makes a float op);
``torch._prims_common.elementwise_dtypes`` checks both dtypes on the fake operands. Beside a
float16/bfloat16 tensor the lowering treats the 0-d operand as eager's kernels treat a CPU
scalar (``_elementwise._operands``: mul and div read it in float32, add and sub round it to
the tensor's dtype first, through float32 as c10 converts a double).

The number stays a constant (keyed by value) where any use is elsewhere: Python arithmetic on
it, an op whose Scalar overload is another kernel (``clamp``: its Scalar kernel compares in
opmath, its Tensor kernel in the tensor's dtype; ``pow``: special exponents), ``s / x``
(eager computes ``x.reciprocal() * s``), complex operands, or a returned value.
"""

from __future__ import annotations

import operator

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from torch2xla.capture._int_values import graph_fake_mode

# Binary ops whose Python-number operand eager wraps into their Tensor overload.
_ARITHMETIC = ("add", "sub", "mul", "div", "true_divide")
_COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
_FUNCTIONS = {
    **{getattr(operator, n): (0, 1) for n in ("add", "sub", "mul", *_COMPARE)},
    operator.truediv: (1,),  # (``s / x`` is ``x.reciprocal() * s`` in eager)
    **{getattr(torch, n): (1,) for n in (*_ARITHMETIC, *_COMPARE)},
    torch.where: (1, 2),
}
_METHODS = {n: (1,) for n in (*_ARITHMETIC, *_COMPARE)}
# ``s * x`` and ``s + x``: eager's ``x.__rmul__(s)`` and ``x.__radd__(s)`` take the number as
# the second operand, which its CPU kernels read in opmath (the tensor's dtype, not the
# number's, for a float16 first operand); the graph's operator.mul(s, x) is swapped back.
_COMMUTED = (operator.mul, operator.add)
# keyword arguments that may hold the number ('other'), and those the op may have besides
_KEYWORDS = frozenset({"other"})
_OTHER_KEYWORDS = frozenset({"alpha", "other"})


def _operand_slots(node: torch.fx.Node, item: torch.fx.Node) -> list | None:
    """The positions (ints) and keywords (strs) where ``node`` takes ``item``, where all of
    them are ones it may take a 0-d tensor at; else None."""
    if node.op == "call_function":
        allowed = _FUNCTIONS.get(node.target)
    elif node.op == "call_method":
        allowed = _METHODS.get(node.target)
    else:
        allowed = None
    if allowed is None or set(node.kwargs) - _OTHER_KEYWORDS:
        return None
    if node.target is torch.where and (len(node.args) != 3 or node.kwargs):
        return None
    slots: list = []
    for k, a in enumerate(node.args):
        if a is item:
            if k not in allowed:
                return None
            slots.append(k)
        elif isinstance(a, list | tuple | dict | slice):
            return None
    for k, a in node.kwargs.items():
        if a is item:
            if k not in _KEYWORDS:
                return None
            slots.append(k)
    if len(slots) != 1:  # (``s * s``: Python arithmetic, no tensor)
        return None
    return slots


def _example(a):
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a


def _dtype_for(node: torch.fx.Node, item: torch.fx.Node, fake_mode) -> torch.dtype | None:
    """The dtype of a 0-d tensor that ``node`` computes with exactly as with the Python
    float ``item`` (None if none)."""
    example = node.meta.get("example_value")
    if not isinstance(example, torch.Tensor) or example.is_complex():
        return None
    args = [a for k, a in enumerate(node.args) if not (node.target is torch.where and k == 0)]
    operands = [_example(a) for a in (*args, node.kwargs.get("other")) if a not in (None, item)]
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    if not tensors or any(t.is_complex() for t in tensors):
        return None
    if any(not isinstance(t, torch.Tensor | int | float | bool) for t in operands):
        return None
    kind = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    if "other" in node.kwargs:  # (``x.mul(other=s)``)
        args = [*args, node.kwargs["other"]]
    with_number = [1.0 if a is item else _example(a) for a in args]
    want = elementwise_dtypes(*with_number, type_promotion_kind=kind)
    for dtype in (torch.float64, torch.get_default_dtype()):
        with fake_mode:
            zero = torch.empty((), dtype=dtype, device=tensors[0].device)
        with_tensor = [zero if a is item else _example(a) for a in args]
        if elementwise_dtypes(*with_tensor, type_promotion_kind=kind) == want:
            return dtype
    return None


def _cast(gm, value: torch.fx.Node, dtype: torch.dtype, before, fake_mode) -> torch.fx.Node:
    """``value`` (a 0-d float64 tensor) as ``dtype``, computed before the node ``before``."""
    if dtype == torch.float64:
        return value
    with gm.graph.inserting_before(before):
        cast = gm.graph.call_method("to", (value, dtype))
    with fake_mode:
        cast.meta["example_value"] = value.meta["example_value"].to(dtype)
    return cast


# ``torch.where`` with a Python number converts it to its float32 result with eager's
# overflow check (not to a float16, bfloat16 or float64 one; nor do the arithmetic and
# comparison ops: they compute with the number as a double)
_CHECKED = {torch.where: (torch.float32,)}


def _checked(gm, p: torch.fx.Node, user: torch.fx.Node, fake_mode) -> torch.fx.Node | None:
    """``torch2xla::fits`` of the 0-d float64 input ``p`` (where the op ``user`` converts the
    float with eager's check: each call's value is checked in the program), else None."""
    out = user.meta.get("example_value")
    if not isinstance(out, torch.Tensor) or out.dtype not in _CHECKED.get(user.target, ()):
        return None
    from torch2xla.ops._fits import fits  # noqa: F401  (defines torch.ops.torch2xla.fits)

    with gm.graph.inserting_before(user):
        checked = gm.graph.call_function(torch.ops.torch2xla.fits.default, (p, out.dtype))
    checked.meta = {**user.meta}
    with fake_mode:
        checked.meta["example_value"] = torch.empty_like(p.meta["example_value"])
    return checked


def _composite_part(node: torch.fx.Node) -> bool:
    """Whether ``node`` is the product of a ``value`` in an ``addcdiv``/``addcmul`` call
    that Dynamo split (``_rewrites.pointwise_composites``): the call, joined again, takes the
    number as eager's Scalar, converted with eager's check (``_numbers``) and computed in
    the kernel's opmath type, not rounded per part."""
    from torch2xla.capture._rewrites import _split_composite

    return any(_split_composite(u, numbers=True) is not None for u in node.users)


def float_values(gm: torch.fx.GraphModule) -> dict[str, str]:
    """Rewrite ``gm`` (in place) to take the 0-d tensors of the Python floats it uses only
    as elementwise operands as tensors there (no ``.item()``). Returns, per input kept a
    number (keyed by value: one program per value), why."""
    from torch2xla.guards._key import placeholder_label

    fake_mode = graph_fake_mode(gm)
    kept: dict[str, str] = {}
    changed = False
    for p in list(gm.graph.find_nodes(op="placeholder")):
        items = [u for u in p.users if u.op == "call_method" and u.target == "item"]
        if not items or len(items) != len(p.users):
            continue
        example = p.meta.get("example_value")
        if (
            fake_mode is None
            or not isinstance(example, torch.Tensor)
            or example.dtype != torch.float64
            or example.ndim != 0
        ):
            continue
        plan = []  # (user, item, dtype)
        why = None
        for item in items:
            for user in item.users:
                if _operand_slots(user, item) is None:
                    why = f"it is used by {user.target if user.op != 'output' else 'output'}"
                    break
                if _composite_part(user):
                    why = "it is the value of an addcdiv or addcmul (Dynamo split the call)"
                    break
                dtype = _dtype_for(user, item, fake_mode)
                if dtype is None:
                    why = f"{user.target} promotes it otherwise than a tensor"
                    break
                plan.append((user, item, dtype))
            if why is not None:
                break
        if why is not None:
            kept[placeholder_label(p)] = why
            continue
        casts: dict = {}
        for user, item, dtype in plan:
            checked = _checked(gm, p, user, fake_mode)
            if checked is not None:  # (the float itself, checked: not shared with other uses)
                user.replace_input_with(item, _cast(gm, checked, dtype, user, fake_mode))
                continue
            value = casts.get(dtype)
            if value is None:
                value = casts[dtype] = _cast(gm, p, dtype, items[0], fake_mode)
            user.replace_input_with(item, value)
            if user.target in _COMMUTED and user.args[0] is value and len(user.args) == 2:
                user.args = (user.args[1], value)
        for item in items:
            gm.graph.erase_node(item)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return kept
