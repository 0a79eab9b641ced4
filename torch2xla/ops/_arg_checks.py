"""Errors eager raises from an op's dtypes or constant arguments that tracing does not raise.

Tracing runs each op's meta kernel on fake tensors, and the meta kernels of ``mm``, ``addmm``,
``mv``, the norms, ``index_put`` and others skip the checks of eager's kernels: ``float64 @
float32`` traces to a float64 ``mm`` where eager raises "expected m1 and m2 to have the same
dtype". ``check_graph`` checks the ATen graph before translation and raises eager's error
(``OpError``) naming the op and the user's source line. The ATen graph is checked, not the
user's calls: autocast's casts are nodes of their own by then, so the operands of a matmul
under autocast have one dtype, and type-promoting ops never reach these checks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import ops

from torch2xla._errors import OpError
from torch2xla.runtime._interop import dtype_name

aten = ops.aten


def _name(dtype: torch.dtype) -> str:
    """Eager's name of ``dtype`` in messages (``Float``)."""
    return dtype_name(dtype, "eager")


def _c_name(dtype: torch.dtype) -> str:
    """The C++ name of ``dtype`` (``float``), as some of eager's messages give it."""
    return dtype_name(dtype, "c")


Checker = Callable[[dict, torch.fx.Node], "str | None"]


def _dtype(kwargs: dict, name: str) -> torch.dtype | None:
    value = kwargs.get(name)
    val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) else None


def _pairs(*pairs: tuple[str, str, str]) -> Checker:
    """A checker of operands that must share a dtype: ``(a, b, message)`` per pair, the
    message formatted with ``{a}``/``{b}`` (eager's names) and ``{ca}``/``{cb}`` (C++ names)."""

    def checker(kwargs: dict, node: torch.fx.Node) -> str | None:
        for a, b, message in pairs:
            da, db = _dtype(kwargs, a), _dtype(kwargs, b)
            if da is not None and db is not None and da != db:
                return message.format(a=_name(da), b=_name(db), ca=_c_name(da), cb=_c_name(db))
        return None

    return checker


def _norm(*params: str) -> Checker:
    """CPU norms: every parameter in the input's dtype, or float32 ones for a reduced-precision
    input (eager's "mixed dtype" rule)."""

    def checker(kwargs: dict, node: torch.fx.Node) -> str | None:
        x = _dtype(kwargs, "input")
        if x is None or node.meta["val"][0].device.type != "cpu":
            return None
        dtypes = {d for d in (_dtype(kwargs, p) for p in params) if d is not None}
        if not dtypes or dtypes == {x}:
            return None
        if x in (torch.float16, torch.bfloat16) and dtypes == {torch.float32}:
            return None
        if x in (torch.float16, torch.bfloat16):
            return "mixed dtype (CPU): all inputs must share same datatype."
        return f"mixed dtype (CPU): expect parameter to have scalar type of {_name(x)}"

    return checker


def _integer_power(kwargs: dict, node: torch.fx.Node) -> str | None:
    exponent, base = kwargs.get("exponent"), _dtype(kwargs, "self")
    if (
        base is not None
        and not base.is_floating_point
        and not base.is_complex
        and isinstance(exponent, int)
        and exponent < 0
    ):
        return "Integers to negative integer powers are not allowed."
    return None


def _index_put_source(kwargs: dict, node: torch.fx.Node) -> str | None:
    # eager's message is that of the op the user called (index_add and index_copy decompose
    # to index_put)
    s, v = _dtype(kwargs, "self"), _dtype(kwargs, "values")
    if s is None or v is None or s == v:
        return None
    called = getattr(node.meta.get("original_aten"), "overloadpacket", None)
    if called in (aten.index_add, aten.index_add_):
        return (
            f"index_add_(): self ({_name(s)}) and source ({_name(v)}) must have the same scalar "
            "type"
        )
    if called in (aten.index_copy, aten.index_copy_):
        return (
            "index_copy_(): self and source expected to have the same dtype, but got (self) "
            f"{_name(s)} and (source) {_name(v)}"
        )
    return (
        f"Index put requires the source and destination dtypes match, got {_name(s)} for the "
        f"destination and {_name(v)} for the source."
    )


_SCALAR_TYPE = "expected scalar type {a} but found {b}"
_DOT = "dot : expected both vectors to have same dtype, but found {a} and {b}"

CHECKS: dict[torch._ops.OpOverload, Checker] = {
    aten.mm.default: _pairs(
        ("self", "mat2", "expected m1 and m2 to have the same dtype, but got: {ca} != {cb}")
    ),
    aten.bmm.default: _pairs(("self", "mat2", _SCALAR_TYPE)),
    aten.addmm.default: _pairs(
        ("mat1", "mat2", "mat1 and mat2 must have the same dtype, but got {a} and {b}"),
        ("self", "mat2", "self and mat2 must have the same dtype, but got {a} and {b}"),
    ),
    aten.addbmm.default: _pairs(
        ("batch1", "batch2", "batch1 and batch2 must have the same dtype, but got {a} and {b}"),
        ("self", "batch2", "self and mat2 must have the same dtype, but got {a} and {b}"),
    ),
    aten.baddbmm.default: _pairs(
        ("batch1", "batch2", _SCALAR_TYPE),
        ("self", "batch1", "Input dtypes must be the same, got: input {ca}, batch1: {cb}"),
    ),
    aten.mv.default: _pairs(
        ("self", "vec", "addmv input tensors must have the same dtype, but got {a} and {b}")
    ),
    aten.addmv.default: _pairs(
        ("mat", "vec", "addmv input tensors must have the same dtype, but got {a} and {b}"),
        ("self", "mat", "addmv input tensors must have the same dtype, but got {a} and {b}"),
    ),
    aten.dot.default: _pairs(("self", "tensor", _DOT)),
    aten.vdot.default: _pairs(("self", "other", _DOT)),
    aten._cdist_forward.default: _pairs(("x1", "x2", _SCALAR_TYPE)),
    # (eager's transposed convolutions accept a bias of another dtype)
    aten.convolution.default: _pairs(
        ("input", "weight", "Input type ({ca}) and weight type ({cb}) should be the same")
    ),
    aten.grid_sampler_2d.default: _pairs(("input", "grid", _SCALAR_TYPE)),
    aten.grid_sampler_3d.default: _pairs(("input", "grid", _SCALAR_TYPE)),
    aten.complex.default: _pairs(
        (
            "real",
            "imag",
            "Expected object of scalar type {a} but got scalar type {b} for second argument",
        )
    ),
    aten.polar.default: _pairs(
        (
            "abs",
            "angle",
            "Expected object of scalar type {a} but got scalar type {b} for second argument",
        )
    ),
    aten.heaviside.default: _pairs(
        ("self", "values", "heaviside is not yet implemented for tensors with different dtypes.")
    ),
    aten.index_reduce.default: _pairs(
        (
            "self",
            "source",
            "index_reduce_(): self ({a}) and source ({b}) must have the same scalar type",
        )
    ),
    aten.put.default: _pairs(
        (
            "self",
            "source",
            (
                "put_(): self and source expected to have the same dtype, but got "
                "self.dtype = {a} and source.dtype = {b}"
            ),
        )
    ),
    aten.index_put.default: _index_put_source,
    aten.native_layer_norm.default: _norm("weight", "bias"),
    aten.native_group_norm.default: _norm("weight", "bias"),
    aten._native_batch_norm_legit.no_stats: _norm("weight", "bias"),
    aten._native_batch_norm_legit_no_training.default: _norm(
        "weight", "bias", "running_mean", "running_var"
    ),
    aten._native_batch_norm_legit_functional.default: _norm(
        "weight", "bias", "running_mean", "running_var"
    ),
    aten.pow.Tensor_Scalar: _integer_power,
}


def _by_name(node: torch.fx.Node) -> dict:
    """``node``'s arguments by their names in the ATen schema (defaults left out)."""
    names = [a.name for a in node.target._schema.arguments]
    return {**dict(zip(names, node.args)), **node.kwargs}


def check_graph(gm: torch.fx.GraphModule) -> None:
    """Raise eager's error (``OpError``) for the first node of ``gm`` whose arguments eager
    rejects by their dtypes or constant values (``CHECKS``)."""
    for node in gm.graph.nodes:
        checker = CHECKS.get(node.target) if node.op == "call_function" else None
        if checker is None:
            continue
        message = checker(_by_name(node), node)
        if message is not None:
            raise OpError(message, node)


__all__ = ["CHECKS", "check_graph"]
