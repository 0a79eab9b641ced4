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

Python arithmetic on the number that a 0-d float64 tensor computes bit for bit (``-lr``,
``1 - beta``, ``lr * 0.5``, ``lr / 3``: negation, ``abs``, ``+``, ``-``, ``*`` with other such
numbers of the same input and float or int constants, ``/`` by a nonzero constant) is
rewritten as those ops on the 0-d tensor, whose result is then an operand as above: the
double eager's Python computes (the lowering keeps constants behind optimization barriers,
so XLA's simplifier does not reassociate them; ``ops/_arithmetic``). In-place arithmetic of a
floating tensor (``m.mul_(beta)``) takes it as its out-of-place form does.

More uses are rewritten to such an operand, as eager computes them (an optimizer's step
with a learning rate that a scheduler changes: SGD's ``p.add_(grad, alpha=-lr)``, Adam's
``lr / bias_correction`` of a step tensor):

- ``s / x`` of a tensor ``x`` is ``x.reciprocal() * s`` (``Tensor.__rtruediv__``);
- ``s ** x`` is ``torch.pow(s, x)``, whose kernel converts ``s`` to the result's dtype as
  it converts the 0-d tensor (Adam's ``beta1 ** step`` of a step tensor);
- ``x.lerp(end, s)`` (in place too; Adam's ``exp_avg.lerp_(grad, 1 - beta1)`` under a
  schedule of its betas, OneCycleLR's) of float32/float64 tensors takes ``s`` as a 0-d
  tensor of their dtype, as eager's kernel converts it;
- ``_foreach_mul(xs, s)`` (``div``, in place too) of float32/float64 tensors takes
  its 0-d tensor overload, and ``_foreach_add(xs, ys, alpha=s)`` is
  ``_foreach_add(xs, _foreach_mul(ys, s))`` as ``add``'s alpha below (the foreach optimizers');
- ``x.add(y, alpha=s)`` and ``x.sub(y, alpha=s)`` (in place too) of float32/float64 tensors
  are ``x.add(y * s)``: eager's kernel rounds ``s`` to the operands' dtype and computes
  ``fmadd(y, s, x)``; XLA's CPU compiler contracts the product and the sum into the same
  fused multiply-add, as it does for the constant ``alpha``. (Half-precision kernels keep the
  product in float32 or not by position, ``ops/_arithmetic._half_alpha_product``: there the
  number stays a constant.)

Other Python arithmetic on a number of Dynamo's input (below) is done in Python on the host at
each call where every number it gives is used as above: those numbers are new inputs of a
copy of the graph (``_host_numbers``; AdamW's ``1 - lr * weight_decay``).

The number stays a constant (keyed by value) where any use is elsewhere: other Python
arithmetic on it (``**``, ``math`` functions, ``/`` by a number, which Python raises for at
zero where a tensor gives an infinity, a number of another input), a product of it in a
float64 sum (``lr * 3 + 0.2``, ``x64 + lr * 0.1``, AdamW's ``1 - lr * weight_decay``: XLA's
CPU compiler fuses the two into one multiply-add, rounded once), an op whose Scalar overload
is another kernel (``clamp``: its Scalar kernel compares in opmath, its Tensor kernel in the
tensor's dtype; ``pow``: special exponents), the ``value`` of a split ``addcdiv``/``addcmul``
(RMSprop's), foreach ops, complex operands, or a returned value.
"""

from __future__ import annotations

import copy
import operator

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from torch2xla.capture._host_numbers import HostNumbers, host_numbers
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
# In-place arithmetic (``m.mul_(beta)``): on a floating tensor only, whose dtype the result keeps
# either way (an integer one raises in eager where the number is a float: ``_numbers``)
_IN_PLACE = {f"{n}_": (1,) for n in _ARITHMETIC}
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
    elif node.op == "call_method" and node.target in _IN_PLACE:
        self = _example(node.args[0]) if node.args else None
        floating = isinstance(self, torch.Tensor) and self.is_floating_point()
        allowed = _IN_PLACE[node.target] if floating else None
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


# Python arithmetic on floats that a 0-d float64 tensor computes bit for bit (IEEE double
# operations, rounded once each), with the number of operands each takes
_NUMBER_OPS = {
    operator.neg: 1,
    operator.pos: 1,
    operator.abs: 1,
    operator.add: 2,
    operator.sub: 2,
    operator.mul: 2,
    operator.truediv: 2,
}


# XLA's CPU compiler contracts a float64 product and the sum that takes it into one fused
# multiply-add (``s * 3 + 0.2``: rounded once, where Python rounds twice); optimization
# barriers do not stop it (the CPU pipeline drops them before it fuses). A product of the
# number (``*``, and ``-`` or ``+`` of one) is kept out of float64 sums.
_SUMS = frozenset({operator.add, operator.sub, torch.add, torch.sub, "add", "sub", "add_", "sub_"})
_PRODUCTS = (operator.mul,)
_SIGNS = (operator.neg, operator.pos, operator.abs)


def _constant(a) -> bool:
    """A Python constant that Python's float arithmetic and a float64 tensor op take as the
    same double (an int past 2**53 could round differently; a bool is left out)."""
    if isinstance(a, bool):
        return False
    return isinstance(a, float) or (isinstance(a, int) and abs(a) <= 2**53)


def _number_op(node: torch.fx.Node, numbers, products) -> bool:
    """Whether ``node`` is Python arithmetic on ``numbers`` (nodes) and constants that a 0-d
    float64 tensor computes exactly as Python does (not a sum of one of ``products``)."""
    if node.op != "call_function" or node.target not in _NUMBER_OPS or node.kwargs:
        return False
    if len(node.args) != _NUMBER_OPS[node.target]:
        return False
    if not isinstance(node.meta.get("example_value"), float | torch.SymFloat):
        return False
    operands = [isinstance(a, torch.fx.Node) and a in numbers for a in node.args]
    if not any(operands) or not all(o or _constant(a) for o, a in zip(operands, node.args)):
        return False
    if node.target in _SUMS and any(a in products for a in node.args):
        return False
    if node.target is operator.truediv:
        # (Python raises ZeroDivisionError where the tensor gives an infinity or NaN: only a
        # nonzero constant divisor)
        return not operands[1] and node.args[1] != 0
    return True


def _example(a):
    return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a


def _dtype_for(node: torch.fx.Node, item: torch.fx.Node, fake_mode) -> torch.dtype | None:
    """The dtype of a 0-d tensor that ``node`` computes with exactly as with the Python
    float ``item`` (None if none)."""
    example = node.meta.get("example_value")
    if not isinstance(example, torch.Tensor) or example.is_complex():
        return None
    args = [a for k, a in enumerate(node.args) if not (node.target is torch.where and k == 0)]
    if "other" in node.kwargs:  # (``x.mul(other=s)``)
        args = [*args, node.kwargs["other"]]
    return _dtype_among([_example(a) if a is not item else item for a in args], item, fake_mode)


def _dtype_among(args: list, item, fake_mode) -> torch.dtype | None:
    """The dtype of a 0-d tensor that an elementwise op of the example operands ``args``
    computes with exactly as with the Python float they hold as ``item`` (None if none)."""
    operands = [a for a in args if a is not item and a is not None]
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    if not tensors or any(t.is_complex() for t in tensors):
        return None
    if any(not isinstance(t, torch.Tensor | int | float | bool) for t in operands):
        return None
    kind = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
    with_number = [1.0 if a is item else a for a in args]
    want = elementwise_dtypes(*with_number, type_promotion_kind=kind)
    for dtype in (torch.float64, torch.get_default_dtype()):
        with fake_mode:
            zero = torch.empty((), dtype=dtype, device=tensors[0].device)
        with_tensor = [zero if a is item else a for a in args]
        if elementwise_dtypes(*with_tensor, type_promotion_kind=kind) == want:
            return dtype
    return None


# ``x.add(y, alpha=s)``: the ops whose ``alpha`` is rewritten as a product ``y * s``
_ALPHA_METHODS = frozenset({"add", "sub", "add_", "sub_"})
_ALPHA_FUNCTIONS = frozenset({torch.add, torch.sub})
_ALPHA_DTYPES = frozenset({torch.float32, torch.float64})


def _rewritten_use(node: torch.fx.Node, item: torch.fx.Node, numbers) -> tuple | None:
    """``("rdiv", x)`` where ``node`` is ``item / x`` of a tensor ``x``, ``("rpow", x)`` where
    it is ``item ** x``; ``("lerp", None)`` where it is ``_lerp_weight``; ``("alpha", y)``
    where it is ``x.add(y, alpha=item)`` (or ``sub``, in place too) of float32/float64 tensors;
    else None."""
    if node.op == "call_function" and node.target is operator.truediv and not node.kwargs:
        if len(node.args) == 2 and node.args[0] is item and node.args[1] not in numbers:
            x = _example(node.args[1])
            if isinstance(x, torch.Tensor) and not x.is_complex():
                return ("rdiv", node.args[1])
        return None
    if node.op == "call_function" and node.target in (operator.pow, torch.pow):
        if len(node.args) == 2 and not node.kwargs and node.args[0] is item:
            x = _example(node.args[1])
            if node.args[1] not in numbers and isinstance(x, torch.Tensor):
                return ("rpow", node.args[1])
        return None
    if _lerp_weight(node, item, numbers):
        return ("lerp", None)
    if node.op == "call_function" and node.target in _FOREACH:
        return _foreach_use(node, item, numbers)
    method = node.op == "call_method" and node.target in _ALPHA_METHODS
    if not (method or (node.op == "call_function" and node.target in _ALPHA_FUNCTIONS)):
        return None
    if node.kwargs.get("alpha") is not item or set(node.kwargs) - {"alpha", "other"}:
        return None
    args = [*node.args, *([node.kwargs["other"]] if "other" in node.kwargs else [])]
    if len(args) != 2 or any(a is item or a in numbers for a in args):
        return None
    examples = [_example(a) for a in (*args, node)]
    if not all(isinstance(t, torch.Tensor) and t.dtype in _ALPHA_DTYPES for t in examples):
        return None
    return ("alpha", args[1])


# Foreach ops of a list and a number with an overload taking a 0-d tensor instead
# (``_foreach_mul_(exp_avg_sqs, beta2)``, AdamW's ``_foreach_mul_(params, 1 - lr * wd)``), and
# ``_foreach_add_(params, grads, alpha=-lr)`` (SGD's), whose alpha is a factor as ``add``'s
_FOREACH = frozenset(
    getattr(torch, f"_foreach_{n}{s}") for n in ("add", "mul", "div") for s in ("", "_")
)


def _float_list(value) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(_example(a), torch.Tensor) for a in value)
        and all(_example(a).dtype in _ALPHA_DTYPES for a in value)
    )


def _foreach_use(node: torch.fx.Node, item: torch.fx.Node, numbers) -> tuple | None:
    """``("foreach", None)`` where ``node`` is ``_foreach_mul(xs, item)`` (add, div; in place
    too) of float32/float64 tensors; ``("foreach_alpha", ys)`` where it is
    ``_foreach_add(xs, ys, alpha=item)``; else None."""
    args, kwargs = node.args, node.kwargs
    if not args or not _float_list(args[0]) or any(a is item for a in args[0]):
        return None
    # (``_foreach_add(xs, s)``'s 0-d overload has no decomposition: add's stays a constant)
    scaled = node.target not in (torch._foreach_add, torch._foreach_add_)
    if scaled and len(args) == 2 and args[1] is item and not kwargs:
        return ("foreach", None)
    alpha = node.target in (torch._foreach_add, torch._foreach_add_)
    if not (alpha and len(args) == 2 and kwargs == {"alpha": item} and _float_list(args[1])):
        return None
    if any(a is item or a in numbers for a in args[1]):
        return None
    return ("foreach_alpha", args[1])


def _lerp_weight(node: torch.fx.Node, item: torch.fx.Node, numbers) -> bool:
    """Whether ``node`` is ``x.lerp(end, item)`` (in place too) of float32/float64 tensors of
    one dtype: eager's Scalar kernel converts the weight to that dtype and computes as its
    Tensor kernel does with a weight of that dtype (one lowering for both)."""
    method = node.op == "call_method" and node.target in ("lerp", "lerp_")
    if not (method or (node.op == "call_function" and node.target is torch.lerp)):
        return False
    if set(node.kwargs) - {"weight"}:
        return False
    args = [*node.args, *([node.kwargs["weight"]] if "weight" in node.kwargs else [])]
    if len(args) != 3 or args[2] is not item or any(a in numbers for a in args[:2]):
        return False
    examples = [_example(a) for a in (*args[:2], node)]
    return all(isinstance(t, torch.Tensor) and t.dtype in _ALPHA_DTYPES for t in examples) and (
        len({t.dtype for t in examples}) == 1
    )


def _rewrite_use(gm, user: torch.fx.Node, form: tuple, value: torch.fx.Node, fake_mode) -> None:
    """``user`` (``_rewritten_use``'s ``form``) computed with the 0-d tensor ``value`` as a
    factor: ``x.reciprocal() * value``, or ``x.add(y * value)``."""
    kind, operand = form
    if kind in ("lerp", "foreach"):  # (the weight, of the tensors' dtype; the 0-d overload)
        user.replace_input_with(operand, value)
        return
    if kind == "foreach_alpha":  # (``_foreach_add_(xs, _foreach_mul(ys, value))``)
        with gm.graph.inserting_before(user):
            products = gm.graph.call_function(torch._foreach_mul, (list(operand), value))
        with fake_mode:
            examples = torch._foreach_mul([_example(a) for a in operand], _example(value))
        products.meta = {**user.meta, "example_value": examples}
        parts = []
        for k, example in enumerate(examples):
            with gm.graph.inserting_before(user):
                part = gm.graph.call_function(operator.getitem, (products, k))
            part.meta = {**user.meta, "example_value": example}
            parts.append(part)
        user.args = (user.args[0], parts)
        user.kwargs = {}
        return
    if kind == "rpow":  # (``torch.pow(s, x)``: eager's ``Tensor.__rpow__``)
        with gm.graph.inserting_before(user):
            power = gm.graph.call_function(torch.pow, (value, operand))
        with fake_mode:
            example = torch.pow(_example(value), _example(operand))
        power.meta = {**user.meta, "example_value": example}
        user.replace_all_uses_with(power)
        gm.graph.erase_node(user)
        return
    with gm.graph.inserting_before(user):
        if kind == "rdiv":
            recip = gm.graph.call_method("reciprocal", (operand,))
            with fake_mode:
                recip.meta = {**user.meta, "example_value": _example(operand).reciprocal()}
            product = gm.graph.call_function(operator.mul, (recip, value))
        else:
            product = gm.graph.call_function(torch.mul, (operand, value))
    with fake_mode:
        example = torch.mul(_example(product.args[0]), _example(value))
    product.meta = {**user.meta, "example_value": example}
    if kind == "rdiv":
        user.replace_all_uses_with(product)
        gm.graph.erase_node(user)
        return
    kwargs = {k: v for k, v in user.kwargs.items() if k != "alpha"}
    if "other" in kwargs:
        kwargs["other"] = product
    else:
        user.args = (user.args[0], product, *user.args[2:])
    user.kwargs = kwargs


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


def use_plan(user, number, numbers, products, fake_mode) -> tuple | str:
    """How the elementwise ``user`` takes the Python float ``number`` (one of ``numbers``) as
    a 0-d tensor, ``(user, number, dtype, form)`` (``form`` a ``_rewritten_use`` or None); or
    why it cannot."""
    form = None
    if _operand_slots(user, number) is None:
        form = _rewritten_use(user, number, numbers)
        if form is None:
            return f"it is used by {user.target if user.op != 'output' else 'output'}"
    # (a factor, ``y * s``, is no term: ``x.add(y, alpha=lr * 0.5)``)
    sum_term = form is None and user.target in _SUMS and _float64_sum(user)
    if number in products and sum_term:
        return f"its product is a term of a float64 sum ({user.target})"
    if _composite_part(user):
        return "it is the value of an addcdiv or addcmul (Dynamo split the call)"
    if form is None:
        dtype = _dtype_for(user, number, fake_mode)
    elif form[0] == "rpow":
        dtype = _dtype_among([number, _example(form[1])], number, fake_mode)
    elif form[0] == "lerp":
        dtype = _example(user).dtype
        form = ("lerp", number)
    elif form[0].startswith("foreach"):  # (beside float32/float64 tensors: as the number)
        dtype = torch.float64
        form = (form[0], number if form[0] == "foreach" else form[1])
    else:  # (the number as a factor: ``x.reciprocal() * s``, ``y * s``)
        factor = _example(form[1])
        if form[0] == "rdiv":
            with fake_mode:
                factor = factor.reciprocal()
        dtype = _dtype_among([factor, number], number, fake_mode)
    if dtype is None:
        return f"{user.target} promotes it otherwise than a tensor"
    return (user, number, dtype, form)


def _numbers_of(items: list) -> tuple[list, list, str | None]:
    """The Python arithmetic on the ``.item()`` nodes ``items`` that is rewritten as tensor
    ops (``_number_op``, in graph order), the elementwise uses of the numbers (``(user,
    number, dtype, form)``, ``form`` a ``_rewritten_use`` or None), and why the number stays
    a constant (None if it needs not)."""
    numbers = set(items)
    products: set = set()
    derived: list = []
    plan: list = []
    fake_mode = graph_fake_mode(items[0].graph.owning_module)
    for user in items[0].graph.nodes:  # (in graph order: a sum's operands are known first)
        taken = [n for n in user.all_input_nodes if n in numbers]
        if not taken or user in numbers:
            continue
        if _number_op(user, numbers, products):
            numbers.add(user)
            derived.append(user)
            if user.target in _PRODUCTS or (user.target in _SIGNS and user.args[0] in products):
                products.add(user)
            continue
        for number in taken:
            entry = use_plan(user, number, numbers, products, fake_mode)
            if isinstance(entry, str):
                return [], [], entry
            plan.append(entry)
    return derived, plan, None


def _float64_sum(user: torch.fx.Node) -> bool:
    """Whether the elementwise ``user`` may compute a float64 sum (a float64 result, or a
    number's: Python arithmetic)."""
    out = user.meta.get("example_value")
    return not isinstance(out, torch.Tensor) or out.dtype == torch.float64


def _as_tensor_ops(gm, p: torch.fx.Node, items: list, derived: list, fake_mode) -> dict:
    """Tensor ops on the 0-d float64 input ``p`` for the arithmetic ``derived``: per number
    (an ``.item()`` of ``p`` or one of ``derived``), its 0-d float64 tensor."""
    tensors = dict.fromkeys(items, p)
    for node in derived:
        args = tuple(tensors.get(a, a) if isinstance(a, torch.fx.Node) else a for a in node.args)
        with gm.graph.inserting_before(node):
            op = gm.graph.call_function(node.target, args)
        with fake_mode:
            op.meta = {**node.meta, "example_value": node.target(*(_example(a) for a in args))}
        tensors[node] = op
    return tensors


def _float_inputs(gm: torch.fx.GraphModule, placeholders: list, fake_mode):
    """Per 0-d float64 placeholder read only with ``.item()``: it and its ``.item()`` nodes."""
    for p in placeholders:
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
        yield p, items


def _planned(fake_mode):
    def planned(user, number):
        return not isinstance(use_plan(user, number, {number}, set(), fake_mode), str)

    return planned


def _with_host_numbers(gm: torch.fx.GraphModule, fake_mode) -> bool:
    """Whether some float input of ``gm`` needs Python arithmetic done on the host."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    for p, items in _float_inputs(gm, placeholders, fake_mode):
        if p.meta.get("grapharg") is None or _numbers_of(items)[2] is None:
            continue
        if host_numbers(gm, p, items, _planned(fake_mode), fake_mode, rewrite=False):
            return True
    return False


def float_values(
    gm: torch.fx.GraphModule,
) -> tuple[torch.fx.GraphModule, dict[str, str], list[HostNumbers]]:
    """Rewrite ``gm`` (in place) to take the 0-d tensors of the Python floats it uses only
    as elementwise operands (directly, through exact Python arithmetic, or through Python
    arithmetic done on the host: ``_host_numbers``) as tensors there (no ``.item()``).
    Returns the graph (a copy of ``gm`` with new inputs at the end of its own where the host
    computes numbers), per input kept a number (keyed by value: one program per value), why;
    and the host's arithmetic, whose numbers are those new inputs (``with_host_numbers``)."""
    from torch2xla.guards._key import placeholder_label

    fake_mode = graph_fake_mode(gm)
    kept: dict[str, str] = {}
    hosts: list[HostNumbers] = []
    changed = False
    if _with_host_numbers(gm, fake_mode):
        copied = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
        copied.meta.update(gm.meta)
        gm = copied
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    # (``placeholders`` grows: the host's numbers are float inputs too)
    for p, items in _float_inputs(gm, placeholders, fake_mode):
        derived, plan, why = _numbers_of(items)
        if why is not None and p.meta.get("grapharg") is not None:  # (Dynamo's input)
            on_host = host_numbers(gm, p, items, _planned(fake_mode), fake_mode)
            if on_host is not None:
                hosts.append(on_host[0])
                placeholders.extend(on_host[1])
                changed = True
                items = [u for u in p.users if u.op == "call_method" and u.target == "item"]
                if not items:
                    continue
                derived, plan, why = _numbers_of(items)
        if why is not None:
            kept[placeholder_label(p)] = why
            continue
        tensors = _as_tensor_ops(gm, p, items, derived, fake_mode)
        casts: dict = {}
        for user, number, dtype, form in plan:
            tensor = tensors[number]
            checked = None if form is not None else _checked(gm, tensor, user, fake_mode)
            if checked is not None:  # (the float itself, checked: not shared with other uses)
                user.replace_input_with(number, _cast(gm, checked, dtype, user, fake_mode))
                continue
            value = casts.get((tensor, dtype))
            if value is None:
                # (after the tensor: before every use; ``p``'s before its first ``.item()``)
                before = items[0] if tensor is p else tensor.next
                value = casts[tensor, dtype] = _cast(gm, tensor, dtype, before, fake_mode)
            if form is not None:
                _rewrite_use(gm, user, form, value, fake_mode)
                continue
            user.replace_input_with(number, value)
            if user.target in _COMMUTED and user.args[0] is value and len(user.args) == 2:
                user.args = (user.args[1], value)
        for node in [*reversed(derived), *items]:
            gm.graph.erase_node(node)
        changed = True
    if changed:
        gm.graph.lint()
        gm.recompile()
    return gm, kept, hosts
