"""Eager's dtype errors found by calling eager: the kernels and user's calls that refuse a dtype.

Meta kernels rarely check dtypes, so a call eager's kernel refuses traces, and XLA computes
it. Two probes call eager on small tensors of the same dtypes and sizes, once per signature,
with the generator's state kept: ``kernel_refuses`` for half precision at the ATen level (CPU
kernels without bfloat16 or float16), ``refused_calls`` for bool, integer and complex tensors
(and Python numbers that make a call complex or floating, and the dtype a factory names) at
the user's calls on the Dynamo graph, marked on the ATen graph by ``mark_calls``.
``_arg_checks.check_graph`` raises both in graph order.
"""

from __future__ import annotations

import functools
import logging
import math
import operator
import re
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.node import map_aggregate
from torch.utils._pytree import tree_leaves

from torch2xla._errors import OpError, OpIndexError, OpNotImplementedError
from torch2xla._quiet import quiet
from torch2xla.capture._hinted import hinted_shape
from torch2xla.capture._probe_rng import kept_rng

log = logging.getLogger(__name__)
REFUSED_CALL = "torch2xla.refused_call"  # node.meta: eager's error for the user's call


# -- CPU kernels without half precision ---------------------------------------------------------
# (and the float8 types, whose CPU kernels are fewer still: ``-x``, ``x + y``, ``x.sum()``,
# ``x > 0``, ``x.flip(0)`` raise; casts, copies, ``==`` and indexing run)
_HALF = frozenset((torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2))
_HALF_NAMES = ("Half", "BFloat16", "Float8_e4m3fn", "Float8_e5m2")
_PROBE_ELEMENTS = 1 << 16
_NOT_IMPLEMENTED = re.compile(r"not implemented for '(\w+)'")


def unsupported_dtype(node: torch.fx.Node) -> tuple[str, type[OpError]] | None:
    """Eager's "... not implemented for 'BFloat16'" for a node with half-precision tensors on
    the CPU whose CPU kernel has no such dtype (``special.log_ndtr``, ...): XLA computes them
    in any dtype (``kernel_refuses``)."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return None

    def value(a: Any) -> Any:
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

    args, kwargs = map_aggregate((node.args, node.kwargs), value)
    return kernel_refuses(node.target, args, kwargs)


def kernel_refuses(op, args: Any, kwargs: Any) -> tuple[str, type[OpError]] | None:
    """Eager's error where ``op``'s CPU kernel has no implementation for the half-precision
    dtype of some argument (values: fake or real tensors, numbers), else None. Found by
    calling eager's kernel, once per op and signature (dtypes and numbers of dims of the
    tensors, the other arguments), on ones (else zeros) of the same sizes where those are small,
    else of the same number of dims."""
    tensors = [v for v in tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]
    if not any(t.dtype in _HALF for t in tensors):
        return None
    if any(t.device.type != "cpu" or t.layout != torch.strided for t in tensors):
        return None
    return _probed(op, op, args, kwargs, tensors, _half_refusal)


def _probed(key: Any, fn: Callable, args: Any, kwargs: Any, tensors: list, probe: Callable):
    """``probe(fn, args, kwargs, probe_shape, fill)``'s answer, with ones, else zeros (where
    it answers ``_FAILED``), cached per ``key`` and signature for the process."""

    # the tensors' own sizes where they are small (kernels check sizes before dtypes: a
    # pooling window larger than ones of one element fails first; ``max`` of one element
    # takes a path that implements every dtype), symbolic ones at their hints; else ones
    sizes = [hinted_shape(t) for t in tensors]
    small = (
        all(size is not None for size in sizes)
        and sum(math.prod(size) for size in sizes) <= _PROBE_ELEMENTS
    )

    def probe_shape(t: torch.Tensor) -> tuple:
        return (hinted_shape(t) or ()) if small else (1,) * t.dim()

    def shape(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return ("tensor", value.dtype, probe_shape(value))
        if isinstance(value, bool | int | float | str | torch.dtype | None):
            return value
        return ("value", type(value).__name__)  # (a SymInt: called with 1)

    signature = map_aggregate((args, kwargs), shape)
    cache_key = (key, repr(signature))
    if cache_key in _refusals:
        return _refusals[cache_key]

    found = None
    for fill in (1, 0):  # (ones, else zeros: a class index of 1 is out of range for one class)
        outcome = probe(fn, args, kwargs, probe_shape, fill)
        if outcome is not _FAILED:
            found = outcome
            break
    if len(_refusals) < 4096:
        _refusals[cache_key] = found
    return found


_refusals: dict = {}  # (op, signature) -> eager's error or None, for the process
_FAILED = object()  # (a probe whose arguments eager refused for another reason)


def _half_refusal(op, args: Any, kwargs: Any, probe_shape: Callable, fill: int) -> Any:
    """Eager's half-precision error for ``op`` called on tensors of ``fill`` shaped by
    ``probe_shape`` (None where it runs; ``_FAILED`` where it refuses them otherwise)."""
    e = _call(op, args, kwargs, probe_shape, fill)
    if e is None:
        return None
    m = _NOT_IMPLEMENTED.search(str(e)) if isinstance(e, RuntimeError) else None
    if m is not None and m.group(1) in _HALF_NAMES:
        message = str(e).splitlines()[0]
        error = OpNotImplementedError if isinstance(e, NotImplementedError) else OpError
        return message, error
    return _FAILED


def _call(
    fn: Callable,
    args: Any,
    kwargs: Any,
    probe_shape: Callable,
    fill: int,
    replace: dict | None = None,
) -> Exception | None:
    """The error of eager's ``fn`` called on tensors of ``fill`` shaped by ``probe_shape``
    (those of a dtype in ``replace`` made its value; ``complex`` made ``float`` or ``int``:
    the complex numbers their real parts, or those made whole; ``float`` made ``int``: the
    floats whole), or None where it runs."""
    replace = replace or {}

    def real(value: Any) -> Any:
        if isinstance(value, complex) and complex in replace:
            return value.real if replace[complex] is float else _whole(value.real)
        if type(value) is float and float in replace:
            return _whole(value)
        if isinstance(value, torch.Tensor):
            dtype = replace.get(value.dtype, value.dtype)
            return torch.full(probe_shape(value), fill, dtype=dtype, device="cpu")
        if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
            return 1
        if isinstance(value, torch.dtype):  # (``dtype=torch.bool``)
            return replace.get(value, value)
        return value

    # (the generator's state is restored where the op draws: a random op's probe must not
    # move the user's stream, nor rewind another thread's draws where it does not draw)
    with (
        torch.utils._python_dispatch._disable_current_modes(),
        torch.no_grad(),
        kept_rng(fn),
    ):
        try:
            real_args, real_kwargs = map_aggregate((args, kwargs), real)
            with quiet():
                fn(*real_args, **real_kwargs)
        except Exception as e:  # noqa: BLE001 - the probe's answer
            log.debug("torch2xla: probe of %s, fill %s, replaced %s: %r", fn, fill, replace, e)
            return e
    return None


# -- the user's calls of dtypes eager's kernels do not implement ---------------------------------
# Bool, integer and complex tensors: eager's CPU kernels implement each op for some of them
# (``argmax`` of bool, ``sort`` of complex, ``gelu`` of integers, ``max_pool1d`` of integers
# raise; uint16/32/64 have little beyond copies, ``mul``, ``sum`` and bitwise ops: ``+``,
# ``<``, ``max`` and ``>>`` raise), and the meta kernels behind tracing rarely check, so the calls traced and XLA
# computed them. Checked on the Dynamo graph, where the calls are the user's (torch's
# ``F.max_pool1d`` of a CPU tensor without grad runs ``max_pool1d_impl``, which refuses
# integers; its traced form, ``max_pool2d_with_indices``, takes them; ``F.interpolate``'s
# decomposition meets none of its kernel's checks).
_VARYING = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
)
# the dtypes a probed dtype is replaced by, to tell a dtype's error from another: float32
# and an integer type; for a mask's (bool, uint8) one that indexes as it does, or not at all
# (with int64 for bool, ``t[mask] = v`` of a ``v`` too short for a mask of ones runs)
# (a complex number's: its real part)
_STAND_INS = {
    torch.bool: (torch.float32, torch.uint8),
    torch.uint8: (torch.float32, torch.int16),
    complex: (float, int),
    float: (int,),
}
_STAND_INS_ELSE = (torch.float32, torch.int64)
# a uint8 tensor that a call does not read as a mask is an integer index, whose calls eager
# refuses unless it is int64 (``x.put_(i, v)``, ``F.one_hot(i)``: a long index only) or int32:
# int64 stands in for it too, except in the calls that read uint8 as a mask
_UINT8_AS_INDEX = (torch.int64,)
_MASK_CALLS = frozenset(
    (
        operator.getitem,
        operator.setitem,
        ("method", "__getitem__"),
        ("method", "__setitem__"),
        ("method", "index_put"),
        ("method", "index_put_"),
        torch.index_put,
        torch.index_put_,
        torch.ops.aten.index.Tensor,
        torch.ops.aten.index_put.default,
        torch.ops.aten.index_put_.default,
        torch.ops.aten.index,
        torch.ops.aten.index_put,
        torch.ops.aten.index_put_,
    )
)
# errors from values, which runtime checks raise (an integer ``x // 0``: ops/_bounds.py), not
# from dtypes, though a float32 stand-in runs
_VALUE_ERRORS = frozenset(("ZeroDivisionError",))
# where the functions of Dynamo's call_function nodes that are eager's ops live
_OP_MODULES = frozenset(
    (
        "torch",
        "torch.functional",
        "torch.nn.functional",
        "torch._C._nn",
        "torch._C._linalg",
        "torch._C._special",
        "torch._C._fft",
        "torch._C._VariableFunctions",
        "_operator",
    )
)


def refused_calls(gm: torch.fx.GraphModule) -> dict[str, tuple[str, type[OpError], Any]]:
    """The calls of the Dynamo graph ``gm`` whose bool, integer or complex CPU tensors eager's
    kernel does not implement (``call_refuses``), by node name: eager's message, the error
    class, and the node (for ``mark_calls``). The ``addcdiv_``/``addcmul_`` calls Dynamo split
    are probed whole, as the user wrote them (a bool ``addcmul_``'s parts are each eager's)."""
    from torch2xla.capture._rewrites import pointwise_composites

    refused = {}
    for node in pointwise_composites(gm).graph.nodes:
        fn = _eager_function(node)
        if fn is None:
            continue

        def value(a: Any) -> Any:
            return a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a

        args, kwargs = map_aggregate((node.args, node.kwargs), value)
        key = ("method", node.target) if node.op == "call_method" else node.target
        rejected = call_refuses(key, fn, args, kwargs, node.meta.get("example_value"))
        if rejected is not None:
            refused[node.name] = (*rejected, node)
    return refused


def mark_calls(gm: torch.fx.GraphModule, refused: dict) -> None:
    """Mark the last node of the exported ``gm`` that each ``refused`` call made (its
    ``source_fn_stack`` names the Dynamo node), for ``check_graph``, which raises them in
    graph order, after the ATen checks of the call's nodes (eager's same message, named by
    the ATen op); a call that made no node (its value unused) raises here."""
    last = {}
    for node in gm.graph.nodes:
        source = node.meta.get("source_fn_stack") or [(None, None)]
        if node.op == "call_function" and source[-1][0] in refused:
            last[source[-1][0]] = node
    for name, rejected in refused.items():
        if name not in last:
            message, error, call = rejected
            raise error(message, call)
        last[name].meta[REFUSED_CALL] = rejected


def _eager_function(node: torch.fx.Node) -> Callable | None:
    """What eager runs for a Dynamo graph's ``node``: a tensor method, or an op of torch
    (ATen's, ``torch.*``, ``F.*``, the operators); None for anything else (higher-order ops,
    collectives, user ops, modules)."""
    if node.op == "call_method" and isinstance(node.target, str):
        name = node.target

        def method(self, *args, **kwargs):
            return getattr(self, name)(*args, **kwargs)

        method.__name__ = name  # (what ``kept_rng`` looks up)
        return method
    if node.op != "call_function":
        return None
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target if target.namespace == "aten" else None
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target if target._qualified_op_name.startswith("aten::") else None
    if isinstance(target, torch._ops.HigherOrderOperator):
        return None
    return target if getattr(target, "__module__", None) in _OP_MODULES else None


def call_refuses(key: Any, fn: Callable, args: Any, kwargs: Any, out: Any = None) -> tuple | None:
    """Eager's error where ``fn`` (eager's function for ``key``) called on ``args`` and
    ``kwargs`` (fake or real tensors, numbers) raises for the bool, integer or complex dtype of
    a CPU tensor, else None: ``"argmax(): does not support bool input"``, ``"GeluKernelImpl"
    not implemented for 'Long'``. Found by calling ``fn`` as ``kernel_refuses`` calls a
    kernel; an error counts as the dtype's only where the same call with float32 or an
    integer type in place of that dtype runs (``_varying_refusal``). A factory (no tensor
    arguments) is probed for the dtype it names where its output ``out`` (the call's example
    value) is a small CPU tensor: ``torch.arange(2, dtype=torch.bool)``, ``torch.eye(2,
    dtype=torch.uint16)``, ``torch.randperm(3, dtype=torch.bool)``."""
    leaves = tree_leaves((args, kwargs))
    tensors = [v for v in leaves if isinstance(v, torch.Tensor)]
    # (the dtypes of the tensors, and those the call names: ``x.cumsum(0, dtype=torch.bool)``)
    kinds = [t.dtype for t in tensors] + [v for v in leaves if isinstance(v, torch.dtype)]
    # (and a complex Python number, which makes a real tensor's call complex: ``x >= 1j``; a
    # float one, which makes an integer or bool tensor's call floating: ``x & 2.5``)
    kinds += [complex] if any(isinstance(v, complex) for v in leaves) else []
    exact = any(not (t.is_floating_point() or t.is_complex()) for t in tensors)
    kinds += [float] if exact and any(type(v) is float for v in leaves) else []
    varies = _varies if tensors else _factory_varies
    if not any(varies(d) for d in kinds):
        return None
    if not tensors and not _small_cpu_output(out):
        return None
    if any(t.device.type != "cpu" or t.layout != torch.strided for t in tensors):
        return None
    dtypes = tuple(dict.fromkeys(d for d in kinds if varies(d)))
    masks = key in _MASK_CALLS
    return _probed(
        key, fn, args, kwargs, tensors, functools.partial(_varying_refusal, dtypes, masks)
    )


def _whole(value: float) -> int:
    return int(value) if math.isfinite(value) else 1


def _varies(dtype: torch.dtype | type) -> bool:
    return dtype in (complex, float) or dtype in _VARYING or dtype.is_complex


def _factory_varies(dtype: torch.dtype | type) -> bool:
    """A dtype some CPU factory kernel lacks (``arange`` of bool, complex, uint16 and
    float8; ``randperm`` of bool)."""
    return _varies(dtype) or dtype in _HALF


def _small_cpu_output(out: Any) -> bool:
    """Whether ``out`` (a factory's example value) is CPU tensors of known sizes, small enough
    to make in eager."""
    tensors = [v for v in tree_leaves(out) if isinstance(v, torch.Tensor)]
    if not tensors or any(t.device.type != "cpu" or t.layout != torch.strided for t in tensors):
        return False
    sizes = [hinted_shape(t) for t in tensors]
    return all(n is not None for n in sizes) and sum(map(math.prod, sizes)) <= _PROBE_ELEMENTS


def _stand_ins(dtype: torch.dtype | type, masks: bool) -> tuple:
    """The dtypes that stand in for ``dtype`` in a call that reads uint8 as a mask (``masks``)
    or not (``_UINT8_AS_INDEX``)."""
    stand_ins = _STAND_INS.get(dtype, _STAND_INS_ELSE)
    return stand_ins if masks or dtype != torch.uint8 else stand_ins + _UINT8_AS_INDEX


def _varying_refusal(
    dtypes: tuple,
    masks: bool,
    fn: Callable,
    args: Any,
    kwargs: Any,
    probe_shape: Callable,
    fill: int,
) -> Any:
    """``fn``'s error on tensors of ``fill`` shaped by ``probe_shape`` where it runs once the
    tensors of one of ``dtypes`` (or of all) are float32 or an integer type instead
    (``_STAND_INS``: ``argmax`` of bool runs on float32, ``bitwise_left_shift`` of bool on
    uint8; a complex number's real part, a float made whole: ``x & 2.5``); None where
    it runs; else ``_FAILED`` (the arguments are refused for another reason: an index of 1 out
    of range, a singular matrix of ones)."""
    error = _call(fn, args, kwargs, probe_shape, fill)
    if error is None:
        return None
    if not isinstance(error, RuntimeError | IndexError) or str(error) in _VALUE_ERRORS:
        return _FAILED  # (not a kernel's dtype error)
    # (one kind at a time, then all at once: ``torch.lerp(x, x, 1j)`` of an integer ``x``
    # runs only once both the tensors and the weight are float)
    replacements = [{d: like} for d in dtypes for like in _stand_ins(d, masks)]
    if len(dtypes) > 1:
        replacements.append({d: _STAND_INS.get(d, _STAND_INS_ELSE)[0] for d in dtypes})
    runs = (_call(fn, args, kwargs, probe_shape, fill, r) is None for r in replacements)
    if not any(runs):
        return _FAILED
    message = str(error).splitlines()[0]
    if isinstance(error, IndexError):  # ("index_fill_(): Expected dtype int64 for index.")
        return message, OpIndexError
    return message, OpNotImplementedError if isinstance(error, NotImplementedError) else OpError


__all__ = [
    "REFUSED_CALL",
    "call_refuses",
    "kernel_refuses",
    "mark_calls",
    "refused_calls",
    "unsupported_dtype",
]
