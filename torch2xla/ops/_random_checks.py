"""Errors eager raises for the constant arguments of random ops, which tracing does not raise
(their meta kernels check shapes only): ``uniform_``'s and ``random_``/``randint``'s bounds
against the dtype, ``multinomial``'s sample count, ``randperm``'s ``n`` for float dtypes.
``RANDOM_CHECKS`` joins ``_arg_checks.CHECKS`` (same checker signature: the node's arguments
by schema name and the node, None for a decomposition's call; eager's message or None)."""

from __future__ import annotations

import torch
from torch._ops import ops

from torch2xla.ops._check_args import _value
from torch2xla.runtime._interop import dtype_name

aten = ops.aten


def _result_dtype(kwargs: dict, node: torch.fx.Node | None) -> torch.dtype:
    """The dtype of the tensor the op fills: its output's (the node's fake value), else the
    ``dtype`` argument, ``self``'s, or int64 (``randint``'s default)."""
    val = node.meta.get("val") if node is not None else None
    if isinstance(val, torch.Tensor):
        return val.dtype
    self = _value(kwargs, "self")
    return kwargs.get("dtype") or (self.dtype if self is not None else torch.int64)


def _limits(dtype: torch.dtype) -> tuple[float, float] | None:
    """The lowest and largest value of ``dtype`` (None: no bounds checked)."""
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        return float(info.min), float(info.max)
    if dtype == torch.bool:
        return 0, 1
    if dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        info = torch.iinfo(dtype)
        return info.min, info.max
    return None


def _out_of_bounds(dtype: torch.dtype, *named: tuple[str, float]) -> str | None:
    """Eager's ``CHECK_OUT_OF_BOUNDS``: the first of ``(name, value)`` outside ``dtype``'s
    range (NaN included)."""
    limits = _limits(dtype)
    if limits is None:
        return None
    for name, value in named:
        if not limits[0] <= value <= limits[1]:
            return f"{name} is out of bounds for {dtype_name(dtype, 'c')}"
    return None


def _uniform_range(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    """``uniform_``'s bounds: inside the dtype (a complex tensor's parts), ordered, and a
    range the dtype can hold."""
    low, high = kwargs.get("from", 0.0), kwargs.get("to", 1.0)
    self = _value(kwargs, "self")
    if not isinstance(low, int | float) or not isinstance(high, int | float) or self is None:
        return None
    dtype = self.dtype.to_real() if self.dtype.is_complex else self.dtype
    if not dtype.is_floating_point:  # (eager's kernel is not implemented: _dtype_probes)
        return None
    rejected = _out_of_bounds(dtype, ("from", low), ("to", high))
    if rejected is not None:
        return rejected
    if low > high:
        return (
            f"uniform_ expects to return a [from, to) range, but found from={low:g} > to={high:g}"
        )
    if float(high) - float(low) > torch.finfo(dtype).max:
        return (
            f"uniform_ expects to-from <= std::numeric_limits<{dtype_name(dtype, 'eager')}>::max(),"
            f" but found to={high:g} and from={low:g} which result in to-from to exceed the limit"
        )
    return None


def _random_range(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    """``random_``/``randint``/``randint_like``'s range: not empty, and ``from`` and ``to - 1``
    values of the dtype drawn (``to - 1 is out of bounds for unsigned char``)."""
    low = kwargs.get("low", kwargs.get("from", 0))
    high = kwargs.get("high", kwargs.get("to"))
    if not isinstance(low, int):
        return None
    dtype = _result_dtype(kwargs, node)
    if high is None:  # (random_(from, None): up to the dtype's largest value)
        return _out_of_bounds(dtype, ("from", low))
    if not isinstance(high, int):
        return None
    if low >= high:
        return f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
    return _out_of_bounds(dtype, ("from", low), ("to - 1", high - 1))


def _bernoulli_p(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    p = kwargs.get("p", 0.5)
    if not isinstance(p, int | float) or 0 <= p <= 1:
        return None
    return f"bernoulli_ expects p to be in [0, 1], but got p={p:g}"


def _multinomial_input(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    x = _value(kwargs, "self")
    if x is not None and not x.dtype.is_floating_point:
        name = dtype_name(x.dtype, "eager")
        return f"multinomial only supports floating-point dtypes for input, got: {name}"
    n = kwargs.get("num_samples")
    if not isinstance(n, int) or x is None:  # (the meta kernel checks the other arguments)
        return None
    if n <= 0:
        return "cannot sample n_sample <= 0 samples"
    categories = x.shape[-1] if x.dim() else 1
    if not kwargs.get("replacement", False) and isinstance(categories, int) and n > categories:
        return "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
    if isinstance(categories, int) and categories > 2**24:
        return "number of categories cannot exceed 2^24"
    return None


# the largest n whose permutation a float dtype holds exactly, and eager's words for it
_RANDPERM_LIMITS = {
    torch.float16: (2**11 + 1, "2049 for Half"),
    torch.float32: (2**24 + 1, "2^24+1 for Float"),
    torch.float64: (2**53 + 1, "2^53+1 for Double"),
}


def _randperm_n(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    n, limit = kwargs.get("n"), _RANDPERM_LIMITS.get(_result_dtype(kwargs, node))
    if not isinstance(n, int) or limit is None or n <= limit[0]:
        return None
    return f"n cannot be greater than {limit[1]} type."


RANDOM_CHECKS = {
    aten.uniform.default: _uniform_range,
    aten.randint.default: _random_range,
    aten.randint.low: _random_range,
    aten.randint_like.default: _random_range,
    aten.randint_like.low_dtype: _random_range,
    aten.random.to: _random_range,
    getattr(aten.random, "from"): _random_range,
    aten.bernoulli.p: _bernoulli_p,
    aten.multinomial.default: _multinomial_input,
    aten.randperm.default: _randperm_n,
}
