"""What the checkers of eager's argument errors (``_arg_checks``, ``_index_checks``,
``_random_checks``) share: an argument of a graph node or of a decomposition's call by its
schema name, eager's names of dtypes, and eager's verdict on converting a Python number."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from torch2xla._errors import OpError
from torch2xla.runtime._interop import dtype_name


def _name(dtype: torch.dtype) -> str:
    """Eager's name of ``dtype`` in messages (``Float``)."""
    return dtype_name(dtype, "eager")


def _c_name(dtype: torch.dtype) -> str:
    """The C++ name of ``dtype`` (``float``), as some of eager's messages give it."""
    return dtype_name(dtype, "c")


# (arguments by schema name: graph nodes, or the tensors a decomposition is called with;
# the node, None for a decomposition's call) -> eager's message, or the message and the
# error class where eager raises another than RuntimeError; None where eager accepts them
Checker = Callable[[dict, "torch.fx.Node | None"], "str | tuple[str, type[OpError]] | None"]


def _value(kwargs: dict, name: str) -> torch.Tensor | None:
    value = kwargs.get(name)
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    return value if isinstance(value, torch.Tensor) else None


def _dtype(kwargs: dict, name: str) -> torch.dtype | None:
    value = _value(kwargs, name)
    return None if value is None else value.dtype


def _overflow(value, dtype: torch.dtype | None, numel: object = 2) -> str | None:
    """Eager's error where its kernel converts the Python number ``value`` to ``dtype``
    (``checked_convert``: "value cannot be converted to type int8_t without overflow") for a
    result of ``numel`` elements, else None. Tracing raised it where the number was a constant
    of the trace; a float Dynamo passed as an input (``dynamic=True``) is made a constant after
    it (``_lower``), unchecked."""
    if dtype is None or isinstance(value, bool) or not isinstance(value, int | float | complex):
        return None
    # NOTE: eager's ``fill_`` of one element converts unchecked into floating dtypes
    # (``fill_(1e10)`` of one float16 is inf, of two an error); other kernels always check.
    return _eager_overflow(value, dtype, min(numel, 2) if isinstance(numel, int) else 2)


# (typed: ``2**63 == float(2**63)``, one entry for both, and eager converts the float into
# int64 where it rejects the int: whichever came first answered for the other)
@functools.lru_cache(maxsize=256, typed=True)
def _eager_overflow(value, dtype: torch.dtype, numel: int) -> str | None:
    # (outside the modes of an export in progress: a real call, not a traced one)
    with torch.utils._python_dispatch._disable_current_modes():
        try:
            torch.empty(numel, dtype=dtype, device="cpu").fill_(value)
        except RuntimeError as e:  # (eager's verdict on the conversion; not other errors)
            if "without overflow" in str(e):
                return str(e)
    return None
