"""Eager's checks of the Python numbers a call takes, which tracing skips.

A Python number argument reaches eager's kernel as a Scalar, which it converts to the type it
computes in with an overflow check ("value cannot be converted to type float without
overflow": ``f16.clamp(min=1e5)``, ``torch.where(c, int_t, 1e39)``, ``int8_t.fill_(300)``,
``torch.add(x, y, alpha=1e39)``); and an in-place call whose result is of a higher kind than
the tensor it writes raises ("result type Float can't be cast to the desired output type
Long": ``long_t.mul_(0.7)``, ``bool_t.add_(1)``). Fake kernels skip both for some ops, and the
traced graph casts. Which type a kernel converts to depends on the op and the tensor's dtype
(``where`` converts to float32 but not to float16, ``lerp`` and ``addcdiv`` to their opmath
type, ``hardtanh`` on an integer tensor to int64 first), so no op table is kept here: a call
whose number may not fit (``number_overflows``, a cheap superset) or whose result may be of a
higher kind (``promotes_past``) is run once more by eager PyTorch on small real tensors of the
arguments' dtypes, and only eager's conversion error is taken from it (``check_numbers``).

A float that changes between calls reaches the Dynamo graph as a 0-d tensor read back with
``.item()``; where the graph keeps it a number (``_float_values``), each value compiles a
program of its own, and ``check_call_values`` checks the graph's calls with this call's value.
Where the graph takes it as a 0-d tensor, ``_float_values`` checks it in the program
(``torch2xla::fits``).
"""

from __future__ import annotations

import functools
import logging
import math
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx.node import map_aggregate

from torch2xla._errors import OpError
from torch2xla._quiet import quiet
from torch2xla.capture._probe_rng import kept_rng

log = logging.getLogger(__name__)

CAST = "can't be cast to the desired output type"
OVERFLOW = "cannot be converted to type"


def check_numbers(node: torch.fx.Node, args: Any, kwargs: Any, written: Any) -> None:
    """Raise eager's error (``OpError`` naming ``node``) where the call ``node`` with the
    example values ``args``/``kwargs`` (writing into ``written``, if any) converts a Python
    number it does not fit, or casts its result into a tensor of a lower kind."""
    if _promotes_past(written, node, args, kwargs):
        message = _cast_error(node, args, kwargs)
        if message is not None:
            raise OpError(message, node)
    if _number_overflows(written, node, args, kwargs):
        message = _overflow_error(node, args, kwargs)
        if message is not None:
            raise OpError(message, node)


def check_call_values(gm: torch.fx.GraphModule, args: Sequence) -> None:
    """``check_numbers`` for the calls of the Dynamo graph ``gm`` that take a number whose
    value is this call's, with its value in ``args``: a float the graph reads from a 0-d input
    with ``.item()``, an int input (a SymInt), or a number computed from them (``s * 2``). The
    program compiled for ``args`` holds those values (one program per value: a float kept a
    number by ``_float_values``, an int kept an int by ``_int_values``). Calls whose result's
    sizes depend on such an int (it is a size there) are left to the export."""
    from torch2xla.capture._hinted import examples_at_hints
    from torch2xla.capture._lower import scalar_placeholders
    from torch2xla.capture._written import _example, _written

    known: dict = {}
    symbols: set = set()
    scalars = scalar_placeholders(gm)
    for i, (node, a) in enumerate(zip(gm.graph.find_nodes(op="placeholder"), args)):
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.SymInt) and isinstance(a, int) and not isinstance(a, bool):
            known[node] = a
            symbols |= ex.node.expr.free_symbols
        elif i in scalars:
            for item in node.users:
                if item.op == "call_method" and item.target == "item":
                    known[item] = a.item()
    if not known:
        return
    sized = {n for n in gm.graph.nodes if symbols & _size_symbols(n.meta.get("example_value"))}

    def value(a: Any) -> Any:
        return known[a] if isinstance(a, torch.fx.Node) and a in known else _example(a)

    with examples_at_hints(gm):
        for node in gm.graph.nodes:
            if node.op not in ("call_method", "call_function") or node in known:
                continue
            if node in sized or not any(a in known for a in node.all_input_nodes):
                continue
            call_args = map_aggregate(node.args, value)
            call_kwargs = map_aggregate(node.kwargs, value)
            leaves = _leaves((call_args, call_kwargs))
            number = isinstance(node.meta.get("example_value"), _NUMBERS)
            if number and node.op == "call_function" and not any(map(_symbolic_or_tensor, leaves)):
                # (Python arithmetic on the number: its value, for the calls that take it)
                try:
                    known[node] = node.target(*call_args, **call_kwargs)
                except Exception as e:  # noqa: BLE001 - not a number to follow; eager's error
                    # is the user's own, raised by eager where the graph runs
                    log.debug("torch2xla: %s not followed: %r", node.format_node(), e)
                continue
            check_numbers(node, call_args, call_kwargs, _written(node, call_args, call_kwargs))
            message = _eager_error(node, call_args, call_kwargs)
            if message is not None:
                raise OpError(message, node)


# Eager's checks of a Scalar's kind that Dynamo's trace makes of a constant number but cannot
# make of a changing one (``torch.add(bool_t, bool_t, alpha=1.5)``)
_KIND_CHECKS = (
    "argument alpha must not be a floating point number",
    "Boolean alpha only supported for Boolean results",
    # (``addcdiv`` of integer tensors: Dynamo splits it into a true division and a sum)
    "Integer division with addcdiv is no longer supported",
)


def joined(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The Dynamo graph ``gm`` with its ``addcdiv``/``addcmul`` calls that Dynamo split
    joined again (``_rewrites.pointwise_composites(numbers=True)``): the graph whose calls
    ``check_call_values`` checks (the parts convert no number with eager's checks), and the
    one a call that raised runs again in eager."""
    from torch2xla.capture._rewrites import pointwise_composites

    return pointwise_composites(gm, numbers=True)


def check_composites(gm: torch.fx.GraphModule) -> None:
    """``check_numbers``'s and eager's ``_KIND_CHECKS`` errors for the joined calls of
    ``gm`` (``joined``'s) with constant values."""
    from torch2xla.capture._rewrites import COMPOSITE
    from torch2xla.capture._written import _example, _written

    for node in gm.graph.nodes:
        if not node.meta.get(COMPOSITE):
            continue
        args, kwargs = map_aggregate(node.args, _example), map_aggregate(node.kwargs, _example)
        if any(isinstance(a, torch.SymInt | torch.SymFloat) for a in _leaves((args, kwargs))):
            continue  # (a changing value: ``check_call_values`` checks each call's)
        check_numbers(node, args, kwargs, _written(node, args, kwargs))
        message = _eager_error(node, args, kwargs)
        if message is not None:
            raise OpError(message, node)


def _eager_error(node: torch.fx.Node, args: Any, kwargs: Any) -> str | None:
    """Eager's ``_KIND_CHECKS`` error for the call ``node`` on small real tensors of the
    arguments' dtypes (ones, then zeros), or None."""
    for fill in (1, 0):
        real_args, real_kwargs = map_aggregate((args, kwargs), functools.partial(_real, fill=fill))
        message = eager_raises(
            node, real_args, real_kwargs, lambda m: any(k in m for k in _KIND_CHECKS)
        )
        if message is not None:
            return message
    return None


def _real(t: Any, fill: int) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    shape = t.shape if _small(t) else (1,) * min(t.dim(), 1)
    return torch.full(shape, fill, dtype=t.dtype, device="cpu")


def _call(node: torch.fx.Node, args: Any, kwargs: Any) -> Any:
    if node.op == "call_method":
        self, *rest = args
        return getattr(self, node.target)(*rest, **kwargs)
    return node.target(*args, **kwargs)


def _size_symbols(value: Any) -> set:
    """The free symbols of the sizes of the tensors in ``value``."""
    found: set = set()
    for leaf in _leaves(value):
        if isinstance(leaf, torch.Tensor):
            for n in leaf.shape:
                if isinstance(n, torch.SymInt):
                    found |= n.node.expr.free_symbols
    return found


_NUMBERS = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)


def _leaves(tree: Any) -> list:
    found: list = []
    map_aggregate(tree, found.append)
    return found


def _symbolic_or_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor | torch.SymInt | torch.SymFloat | torch.SymBool)


def eager_raises(node: torch.fx.Node, args: Any, kwargs: Any, wanted) -> str | None:
    """Eager's error for the call ``node`` with the real ``args``/``kwargs`` where
    ``wanted(message)``, else None. Other errors are not eager's answer for the user's call
    (values of zeros or ones may fail where the user's do not)."""
    try:
        # (the generator's state is restored where the op draws: ``uniform_``; warnings are
        # eager's deprecation warnings of writes it accepts, which the user's call gives itself)
        with torch.no_grad(), kept_rng(node.target), quiet():
            _call(node, args, kwargs)
    except (RuntimeError, IndexError, TypeError, ValueError) as e:
        # (an index of ones out of a one-element tensor raises IndexError: not the user's)
        if isinstance(e, RuntimeError) and wanted(str(e)):
            return str(e)
        log.debug("torch2xla: eager check of %s could not run: %r", node.format_node(), e)
    return None


CAST = "can't be cast to the desired output type"


# (bool before int: a bool is an int)
_NUMBER_KINDS = ((bool, 0), (int, 1), (float, 2), (complex, 3))


def _category(value: Any) -> int:
    """bool 0 < integer 1 < floating 2 < complex 3, of a dtype or a Python number."""
    if isinstance(value, torch.dtype):
        return 3 if value.is_complex else 2 if value.is_floating_point else int(value != torch.bool)
    return next(kind for number, kind in _NUMBER_KINDS if isinstance(value, number))


def _promotes_past(written: Any, node: torch.fx.Node, args: Any, kwargs: Any) -> bool:
    """Whether an in-place call may compute in a dtype of a higher kind than the tensor it
    writes (``bool_t.mul_(2)``, ``long_t.addcmul_(f, f)``, ``float_t.add_(1j)``)."""
    if not isinstance(written, torch.Tensor) or node.target is operator.setitem:
        return False
    if node.op == "call_function" and "out" in kwargs:
        return False  # (``_out_error``)
    own = _category(written.dtype)
    for value in _leaves((args, kwargs)):
        if isinstance(value, torch.Tensor):
            if _category(value.dtype) > own:
                return True
        elif isinstance(value, bool | int | float | complex) and _category(value) > own:
            return True
    return False


def _cast_error(node: torch.fx.Node, args: Any, kwargs: Any) -> str | None:
    """Eager's error where the in-place call ``node`` cannot cast its result into the tensor
    it writes (fake kernels skip the check for some: ``mul_`` with a Python number,
    ``addcmul_``), found by calling eager on one-element tensors of the arguments' dtypes
    (0-dim ones stay 0-dim: they promote differently); None where it casts."""

    def small(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        return torch.ones((1,) * min(t.dim(), 1), dtype=t.dtype, device="cpu")

    real_args, real_kwargs = map_aggregate((args, kwargs), small)
    return eager_raises(node, real_args, real_kwargs, lambda m: CAST in m)


OVERFLOW = "cannot be converted to type"


def _number_overflows(written: Any, node: torch.fx.Node, args: Any, kwargs: Any) -> bool:
    """Whether a Python number among the call's arguments does not fit the dtype of the
    tensor it writes or returns (``int8_t.fill_(300)``, ``long_t.masked_fill(m, nan)``):
    eager's kernels convert such a Scalar with an overflow check; the traced graph casts."""
    if node.target is operator.setitem:
        return False  # (Dynamo's fake kernels raise eager's error)
    result = written if isinstance(written, torch.Tensor) else node.meta.get("example_value")
    if isinstance(result, list | tuple):  # (a foreach op's: its tensors share the dtype)
        result = next((t for t in result if isinstance(t, torch.Tensor)), None)
    if not isinstance(result, torch.Tensor) or result.dtype == torch.bool:
        return False
    dtype = result.dtype
    for value in _leaves((args, kwargs)):
        if isinstance(value, bool) or not isinstance(value, int | float | complex):
            continue
        if isinstance(value, complex):
            if not dtype.is_complex and value.imag != 0:
                return True
            value = value.real
        if dtype.is_complex:
            continue
        if dtype.is_floating_point:
            if math.isfinite(value) and abs(value) > torch.finfo(dtype).max:
                return True
            continue
        info = torch.iinfo(dtype)
        if not math.isfinite(value) or not info.min <= value <= info.max:
            return True
    return False


def _overflow_error(node: torch.fx.Node, args: Any, kwargs: Any) -> str | None:
    """Eager's error converting a Python number argument of ``node`` to its tensor's dtype,
    from eager's kernel called on tensors of the arguments' sizes where small (a one-element
    tensor takes another path in ``fill_``), else of one element; ones, then zeros (values an
    index argument accepts)."""
    for fill in (1, 0):
        real_args, real_kwargs = map_aggregate((args, kwargs), functools.partial(_real, fill=fill))
        message = eager_raises(node, real_args, real_kwargs, lambda m: OVERFLOW in m)
        if message is not None:
            return message
    return None


def _small(t: torch.Tensor) -> bool:
    return all(isinstance(n, int) for n in t.shape) and t.numel() <= 1 << 12
