"""Errors eager raises from an op's dtypes or constant arguments that tracing does not raise.

Tracing runs each op's meta kernel on fake tensors, and the meta kernels of ``mm``, ``addmm``,
``mv``, the norms, ``index_put`` and others skip the checks of eager's kernels: ``float64 @
float32`` traces to a float64 ``mm`` where eager raises "expected m1 and m2 to have the same
dtype". ``check_graph`` checks the ATen graph before translation and raises eager's error
(``OpError``) naming the op and the user's source line. The ATen graph is checked, not the
user's calls: autocast's casts are nodes of their own by then, so the operands of a matmul
under autocast have one dtype, and type-promoting ops never reach these checks.

Ops that reach the ATen graph decomposed (``linalg_cross``, ``nll_loss_forward``, ...) are
checked where they are decomposed: ``checked_decompositions`` wraps their entries of the
decomposition table so that, during an export inside ``recording()``, a call eager rejects is
recorded with the user's stack trace; ``mark_decomposed`` then finds the first node that
decomposition made (its ``original_aten`` and stack trace) and marks it, and ``check_graph``
raises for it in graph order. One table, ``CHECKS``, serves both.

Dtypes a kernel does not implement are found by calling eager (``_dtype_probes``); their
errors are raised here too, in graph order.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Iterator

import torch
from torch._ops import ops

from torch2xla._errors import OpError, OpIndexError, OpNotImplementedError
from torch2xla.ops._dtype_probes import REFUSED_CALL, kernel_refuses, unsupported_dtype
from torch2xla.ops._empty_checks import EMPTY_CHECKS
from torch2xla.ops._random_checks import RANDOM_CHECKS
from torch2xla.runtime._interop import dtype_name

aten = ops.aten
log = logging.getLogger(__name__)


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


def _pairs(*pairs: tuple[str, str, str]) -> Checker:
    """A checker of operands that must share a dtype: ``(a, b, message)`` per pair, the
    message formatted with ``{a}``/``{b}`` (eager's names) and ``{ca}``/``{cb}`` (C++ names)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        for a, b, message in pairs:
            da, db = _dtype(kwargs, a), _dtype(kwargs, b)
            if da is not None and db is not None and da != db:
                return message.format(a=_name(da), b=_name(db), ca=_c_name(da), cb=_c_name(db))
        return None

    return checker


def _probed(
    op: torch._ops.OpOverload, shapes: dict[str, tuple[int, ...]], constants: tuple = ()
) -> Checker:
    """A checker by eager itself: ``op`` called on small tensors (``shapes``, by argument name)
    of the arguments' dtypes, on their device; eager's error, or None where it accepts them.
    For ops whose checks and messages changed between torch versions: torch 2.11's ``addmv``
    accepts a ``self`` of another dtype (the result has the matrix's) and rejects a vector of
    another dtype with "expected scalar type", 2.13's rejects both naming all three dtypes.
    ``constants``: (name, value) pairs of the other arguments the probe passes."""
    names = tuple(shapes)

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        values = [_value(kwargs, name) for name in names]
        if any(v is None for v in values) or len({v.device for v in values}) != 1:
            return None  # (tensors on two devices: eager's device error, raised by tracing)
        dtypes = tuple(v.dtype for v in values)
        rejected, dtype = _eager_call(
            op, dtypes, str(values[0].device), tuple(shapes.items()), constants
        )
        traced = node.meta.get("val") if node is not None else None
        if rejected is None and isinstance(traced, torch.Tensor) and traced.dtype != dtype:
            # (torch 2.11's meta kernel of addmv promotes a float64 ``self`` where eager's
            # kernel gives the matrix's dtype: the graph after it is traced in the wrong
            # dtype; the call is run again in eager, which returns eager's results)
            return (
                f"torch {torch.__version__}'s trace of {op} gives a {_name(traced.dtype)} "
                f"result where eager gives {_name(dtype)} (torch2xla runs the call in eager)"
            )
        return rejected

    return checker


@functools.cache
def _eager_call(op, dtypes: tuple, device: str, shapes: tuple, constants: tuple = ()) -> tuple:
    """Eager's message for ``op`` called on ones of ``shapes`` and ``dtypes`` (and the
    ``constants``) and None, or None and the dtype of its result."""
    # (outside the modes of an export in progress: a real call, not a traced one)
    with torch.utils._python_dispatch._disable_current_modes():
        args = {n: torch.ones(s, dtype=d, device=device) for (n, s), d in zip(shapes, dtypes)}
        args.update(constants)
        try:
            return None, op(**args).dtype
        except RuntimeError as e:
            return str(e), None


def _norm(*params: str) -> Checker:
    """CPU norms, by eager's "mixed dtype" rule (ATen's ``cpu/mixed_data_type.h``): the first
    given parameter in another dtype than the input's makes the call mixed, where every
    parameter must be float32 and the input of reduced precision; otherwise the kernel reads
    every parameter in the input's dtype."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        x = _value(kwargs, "input")
        if x is None or x.device.type != "cpu":
            return None
        dtypes = [d for d in (_dtype(kwargs, p) for p in params) if d is not None]
        if not dtypes or dtypes[0] == x.dtype:  # not mixed
            other = next((d for d in dtypes if d != x.dtype), None)
            return None if other is None else _SCALAR_TYPE.format(a=_name(x.dtype), b=_name(other))
        if any(d != torch.float32 for d in dtypes):
            return "mixed dtype (CPU): expect parameter to have scalar type of Float"
        if x.dtype not in (torch.float16, torch.bfloat16):
            return "mixed dtype (CPU): all inputs must share same datatype."
        return None

    return checker


def _index_select_index(kwargs: dict, node: torch.fx.Node | None) -> str | tuple | None:
    index = _value(kwargs, "index")
    if index is None:
        return None
    if index.dtype not in (torch.int32, torch.int64):
        return "index_select(): Expected dtype int32 or int64 for index"
    if index.dim() > 1:  # (the meta kernel takes any shape: the result had the index's dims)
        return "index_select(): Index is supposed to be a vector", OpIndexError
    return None


def _embedding_bag_weights(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    w, p = _dtype(kwargs, "weight"), _dtype(kwargs, "per_sample_weights")
    if w is None or p is None or w == p:
        return None
    return (
        "Expected tensor for argument #1 'weight' to have the same type as tensor for argument "
        f"#1 'per_sample_weights'; but type torch.{_name(w)}Tensor does not equal "
        f"torch.{_name(p)}Tensor (while checking arguments for embedding_bag)"
    )


def _integer_power(kwargs: dict, node: torch.fx.Node | None) -> str | None:
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


def _bool_alpha(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (eager's alpha_check on the result's dtype; the meta kernels check a float alpha only)
    result = node.meta.get("val") if node is not None else None
    alpha = kwargs.get("alpha")
    if isinstance(alpha, bool) and isinstance(result, torch.Tensor) and result.dtype != torch.bool:
        return "Boolean alpha only supported for Boolean results."
    return None


def _bool_subtraction(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (a Python bool operand included: ``x - True`` and ``True - x`` raise in eager, which
    # wraps it as a bool tensor; the meta kernels see a number)
    for name in ("self", "other"):
        value = kwargs.get(name)
        if isinstance(value, bool) or _dtype(kwargs, name) == torch.bool:
            return (
                "Subtraction, the `-` operator, with a bool tensor is not supported. If you "
                "are trying to invert a mask, use the `~` or `logical_not()` operator instead."
            )
    return None


_INDEX_DTYPES = (torch.int64, torch.int32, torch.uint8, torch.bool)
_I32_64 = (torch.int32, torch.int64)
# ops decomposed to index_put: (the index dtypes eager accepts, (its message, error class))
_INDEX_RULES = {
    aten.index_add: (
        _I32_64,
        ("index_add_(): Expected dtype int32/int64 for index but got: {d}", OpError),
    ),
    aten.index_add_: (
        _I32_64,
        ("index_add_(): Expected dtype int32/int64 for index but got: {d}", OpError),
    ),
    aten.index_copy: (
        (torch.int64,),
        ("index_copy_(): Expected a long tensor for index, but got {d}", OpError),
    ),
    aten.index_copy_: (
        (torch.int64,),
        ("index_copy_(): Expected a long tensor for index, but got {d}", OpError),
    ),
    aten.index_fill: (
        (torch.int64,),
        ("index_fill_(): Expected dtype int64 for index.", OpIndexError),
    ),
    aten.index_fill_: (
        (torch.int64,),
        ("index_fill_(): Expected dtype int64 for index.", OpIndexError),
    ),
}


def _fills_mask(kwargs: dict, indices) -> bool:
    """Whether eager's ``index_put_`` runs as ``masked_fill_(mask, values.item())``, which casts
    the value: one value on the CPU, no accumulation, and one index, a bool or uint8 mask
    (``t[t > 0] = torch.tensor(2.5)`` into an integer ``t``)."""
    values = _value(kwargs, "values")
    given = [i for i in indices if i is not None]
    if kwargs.get("accumulate") or values is None or len(given) != 1:
        return False
    mask = given[0].meta.get("val") if isinstance(given[0], torch.fx.Node) else given[0]
    return (
        values.numel() == 1
        and values.device.type == "cpu"
        and isinstance(mask, torch.Tensor)
        and mask.dtype in (torch.bool, torch.uint8)
    )


def _index_put_source(kwargs: dict, node: torch.fx.Node | None) -> str | tuple | None:
    # eager's message is that of the op the user called (index_add and index_copy decompose
    # to index_put)
    called = getattr(node and node.meta.get("original_aten"), "overloadpacket", None)
    indices = kwargs.get("indices") or ()
    for index in indices:
        if isinstance(index, torch.fx.Node):
            index = index.meta.get("val")
        d = index.dtype if isinstance(index, torch.Tensor) else None
        if d is None or d in _INDEX_RULES.get(called, (_INDEX_DTYPES, None))[0]:
            continue
        if called in _INDEX_RULES:
            message, error = _INDEX_RULES[called][1]
            return message.format(d=_name(d)), error
        return "tensors used as indices must be long, int, byte or bool tensors", OpIndexError
    s, v = _dtype(kwargs, "self"), _dtype(kwargs, "values")
    if _fills_mask(kwargs, indices):
        (mask,) = [_value({"i": i}, "i") for i in indices if i is not None]
        if mask.dtype == torch.uint8:  # (eager's masked_fill_ refuses it)
            return "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char"
        return None
    if s is None or v is None or s == v:
        return None
    if called in (aten.index_fill, aten.index_fill_):
        return None  # (eager fills ``value.item()``, cast: index_put's lowering checks overflow)
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


def _index_fill_value(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (a complex number or 0-d tensor: the decomposition's ``scalar_tensor`` of self's dtype
    # took its real part)
    value, s = kwargs.get("value"), _dtype(kwargs, "self")
    v = _dtype(kwargs, "value")
    if s is None:
        return None
    if not s.is_complex and (isinstance(value, complex) or (v and v.is_complex)):
        return "index_fill_(): Converting complex Scalar to non-complex type is not supported"
    return _overflow(value, s)


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


@functools.lru_cache(maxsize=256)
def _eager_overflow(value, dtype: torch.dtype, numel: int) -> str | None:
    # (outside the modes of an export in progress: a real call, not a traced one)
    with torch.utils._python_dispatch._disable_current_modes():
        try:
            torch.empty(numel, dtype=dtype).fill_(value)
        except RuntimeError as e:  # (eager's verdict on the conversion; not other errors)
            if "without overflow" in str(e):
                return str(e)
    return None


def _converts(name: str, fills: bool = False) -> Checker:
    """A checker of the number ``name`` that the op's kernel converts to its result's dtype
    (``masked_fill_``, ``scatter_`` of a value; ``fills``: ``fill_`` and ``full``, by the
    number of elements as eager's kernel)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        out = node.meta.get("val") if node is not None else None
        if not isinstance(out, torch.Tensor):
            return None  # (checked on the ATen graph's nodes)
        index = _value(kwargs, "index")
        if index is not None and index.numel() == 0:
            return None  # (eager's scatter_ of no index converts nothing)
        return _overflow(kwargs.get(name), out.dtype, out.numel() if fills else 2)

    return checker


def _index_shapes(kwargs: dict, node: torch.fx.Node | None) -> tuple | None:
    """Eager's IndexErrors for index tensors that do not fit ``self`` (``aten.index``,
    ``index_put``), which the meta kernels skip or raise as another error: a mask (bool or
    uint8) whose sizes are not those of the dims it covers (the lowering failed on it), and
    integer indices that do not broadcast together (``x[i, j] = v``: a RuntimeError of the
    meta kernel's). Masks beside integer indices broadcast by their number of True elements,
    checked at run time (``_index._put_by_positions``)."""
    self = _value(kwargs, "self")
    indices = [i.meta.get("val") if isinstance(i, torch.fx.Node) else i for i in kwargs["indices"]]
    if self is None or not all(i is None or isinstance(i, torch.Tensor) for i in indices):
        return None
    shapes = [self.shape, *(i.shape for i in indices if i is not None)]
    if not all(isinstance(n, int) for shape in shapes for n in shape):
        return None  # (symbolic sizes: the trace checks them)
    dim, masks = 0, False
    for index in indices:
        if index is None or index.dtype not in (torch.bool, torch.uint8):
            dim += 1
            continue
        masks = True
        for j, n in enumerate(index.shape):
            if dim + j < self.dim() and n != self.shape[dim + j]:
                message = (
                    f"The shape of the mask {list(index.shape)} at index {j} does not match "
                    f"the shape of the indexed tensor {list(self.shape)} at index {dim + j}"
                )
                return message, OpIndexError
        dim += index.dim()
    if masks:
        return None
    given = [tuple(i.shape) for i in indices if i is not None]
    try:
        torch.broadcast_shapes(*given)
    except RuntimeError:
        listed = ", ".join(str(list(s)) for s in given)
        message = (
            f"shape mismatch: indexing tensors could not be broadcast together with shapes {listed}"
        )
        return message, OpIndexError
    return None


def _index_put_shape(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    """Eager's error for values that do not broadcast to the indexed shape (``x[i] = v``); the
    meta kernel broadcasts nothing, and the lowering failed on it. Integer indices only (a
    mask's indexed shape depends on its values; the values' leading ones are dropped, as
    eager's ``setitem`` drops them)."""
    self, values = _value(kwargs, "self"), _value(kwargs, "values")
    indices = [i.meta.get("val") if isinstance(i, torch.fx.Node) else i for i in kwargs["indices"]]
    if self is None or values is None:
        return None
    for index in indices:
        if index is not None and (
            not isinstance(index, torch.Tensor) or index.dtype in (torch.bool, torch.uint8)
        ):
            return None
    shapes = [self.shape, values.shape, *(i.shape for i in indices if i is not None)]
    if not all(isinstance(n, int) for shape in shapes for n in shape):
        return None  # (symbolic sizes: the trace checks them)
    meta = [
        None if i is None else torch.empty(i.shape, dtype=torch.long, device="meta")
        for i in indices
    ]
    result = torch.ops.aten.index.Tensor(torch.empty(self.shape, device="meta"), meta).shape
    given = list(values.shape)
    while len(given) > len(result) and given[0] == 1:
        given.pop(0)
    try:
        if torch.broadcast_shapes(tuple(given), result) == result:
            return None
    except RuntimeError:
        pass
    return (
        f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
        f"indexing result of shape {list(result)}"
    )


def _empty_dim(name: str) -> Checker:
    """Eager's error for a reduction of ``name`` along an empty dimension, which the meta
    kernels of ``median``, ``max``/``min`` along a dimension and ``mode`` skip (the values
    were NaN here, or the lowering failed)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> tuple | None:
        self, dim = _value(kwargs, "self"), kwargs.get("dim", -1)
        if self is None or self.dim() == 0 or not isinstance(dim, int):
            return None
        dim = dim % self.dim()
        if self.shape[dim] != 0:
            return None
        return f"{name}(): Expected reduction dim {dim} to have non-zero size.", OpIndexError

    return checker


def _empty_whole(name: str) -> Checker:
    """Eager's error for ``max``/``min`` of a tensor without elements (no dimension given)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        self = _value(kwargs, "self")
        if self is None or self.numel() != 0:
            return None
        return (
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify "
            "the reduction dim with the 'dim' argument."
        )

    return checker


_median_dim = _empty_dim("median")


_SCALAR_TYPE = "expected scalar type {a} but found {b}"
_DOT = "dot : expected both vectors to have same dtype, but found {a} and {b}"


def _bucketize_boundaries(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    boundaries = _value(kwargs, "boundaries")
    if boundaries is None or boundaries.dim() == 1:
        return None
    return f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})"


def _masked_scatter_mask(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    mask = _dtype(kwargs, "mask")
    if mask is None or mask == torch.bool:
        return None
    return f"masked_scatter_ only supports boolean masks, but got mask with dtype {_name(mask)}"


def _softmax_dtype(prefix: str) -> Checker:
    """Eager's softmax kernels are implemented for floating dtypes only (the meta kernel
    accepts any, so ``F.softmax(int_tensor, -1)`` traced to an integer result)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> tuple | None:
        x = _value(kwargs, "self")
        if x is None or x.dtype.is_floating_point or x.numel() == 0:
            return None
        dim, ndim = kwargs.get("dim", -1), x.dim()
        if x.device.type == "cuda":
            kernel = "host_softmax"
        else:  # (the CPU kernel of the last dimension, of a 0-d or 1-d input too)
            last = ndim <= 1 or dim % ndim == ndim - 1
            kernel = f"{prefix}softmax{'_lastdim' if last else ''}_kernel_impl"
        return f"\"{kernel}\" not implemented for '{_name(x.dtype)}'", OpNotImplementedError

    return checker


def _mvlgamma_p(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (eager then checks the values, ``self > (p - 1) / 2``; Dynamo breaks the graph there)
    p = kwargs.get("p")
    return "p has to be greater than or equal to 1" if isinstance(p, int) and p < 1 else None


def _searchsorted_side(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    side = kwargs.get("side")
    if side is None or side in ("left", "right"):
        return None
    return f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}"


def _index_reduce_mode(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    reduce = kwargs.get("reduce")
    if not isinstance(reduce, str) or reduce in ("prod", "mean", "amax", "amin"):
        return None
    return (
        f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}."
    )


def _first(*checkers: Checker) -> Checker:
    """The first of ``checkers``' rejections, in eager's order."""

    def checker(kwargs: dict, node: torch.fx.Node | None):
        return next((r for c in checkers if (r := c(kwargs, node)) is not None), None)

    return checker


def _index_add_source(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    self, source, dim = _value(kwargs, "self"), _value(kwargs, "source"), kwargs.get("dim")
    if self is None or source is None or not isinstance(dim, int):
        return None
    self_sizes, source_sizes = list(self.shape), list(source.shape)
    if self.dim() and source.dim():  # (eager's rule: sizes outside dim, 0-d tensors as they are)
        d = dim % self.dim()
        del self_sizes[d]
        if d < source.dim():
            del source_sizes[d]
    if self_sizes == source_sizes:
        return None
    return (
        "source tensor shape must match self tensor shape, excluding the specified dimension. "
        f"Got self.shape = {list(self.shape)} source.shape = {list(source.shape)}"
    )


def _floating_input(name: str) -> Checker:
    """std/var and their ``_mean`` forms of an integer or bool tensor (their meta kernels
    compute a float result where eager raises)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        dtype = _dtype(kwargs, "self")
        if dtype is None or dtype.is_floating_point or dtype.is_complex:
            return None
        return f"{name} only support floating point and complex dtypes"

    return checker


def _batch_norm_weight(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (eager's CPU backward kernel reads the weight as a vector: a weight of C elements in
    # another shape, which the forward accepts, fails there; the fake kernel takes it)
    weight = _value(kwargs, "weight")
    if weight is None or weight.device.type != "cpu" or weight.dim() == 1:
        return None
    return f"TensorAccessor expected 1 dims but tensor has {weight.dim()}"


def _nll_loss2d_grad_input(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (eager's CPU backward kernel writes the gradient into ``zeros_like(self)`` and refuses it
    # unless contiguous: ``F.nll_loss`` of a channels_last input fails there; the fake kernel
    # takes it)
    self = _value(kwargs, "self")
    if self is None or self.device.type != "cpu":
        return None
    if torch.empty_like(self).is_contiguous():  # (``zeros_like``'s layout: fake or real)
        return None
    return "grad_input must be contiguous"


def _complex_parts(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    """``torch.complex`` of parts that are not float16, float32 or float64 (eager checks the
    kinds before the parts' agreement)."""
    real, imag = _dtype(kwargs, "real"), _dtype(kwargs, "imag")
    if real is None or imag is None:
        return None
    allowed = (torch.float16, torch.float32, torch.float64)
    if real in allowed and imag in allowed:
        return None
    return (
        "Expected both inputs to be Half, Float or Double tensors but got "
        f"{_name(real)} and {_name(imag)}"
    )


CHECKS: dict[torch._ops.OpOverload, Checker] = {
    **RANDOM_CHECKS,
    **EMPTY_CHECKS,
    aten.var.correction: _floating_input("std and var"),
    aten.var.dim: _floating_input("std and var"),
    aten.std.correction: _floating_input("std and var"),
    aten.std.dim: _floating_input("std and var"),
    aten.var_mean.correction: _floating_input("var_mean"),
    aten.std_mean.correction: _floating_input("std_mean"),
    aten.index_add.default: _index_add_source,
    aten.masked_scatter.default: _masked_scatter_mask,
    aten.mvlgamma.default: _mvlgamma_p,
    aten.searchsorted.Tensor: _searchsorted_side,
    aten.searchsorted.Scalar: _searchsorted_side,
    aten.bucketize.Tensor: _bucketize_boundaries,
    aten.bucketize.Scalar: _bucketize_boundaries,
    aten.mm.default: _pairs(
        ("self", "mat2", "expected m1 and m2 to have the same dtype, but got: {ca} != {cb}")
    ),
    aten.bmm.default: _pairs(("self", "mat2", _SCALAR_TYPE)),
    aten.addmm.default: _pairs(
        ("mat1", "mat2", "mat1 and mat2 must have the same dtype, but got {a} and {b}"),
        ("self", "mat2", "self and mat2 must have the same dtype, but got {a} and {b}"),
    ),
    aten.addbmm.default: _pairs(
        ("self", "batch2", "self and mat2 must have the same dtype, but got {a} and {b}"),
        ("batch1", "batch2", "mat1 and mat2 must have the same dtype, but got {a} and {b}"),
    ),
    aten.baddbmm.default: _pairs(
        ("batch1", "batch2", _SCALAR_TYPE),
        ("self", "batch1", "Input dtypes must be the same, got: input {ca}, batch1: {cb}"),
    ),
    aten.mv.default: _probed(aten.mv.default, {"self": (1, 1), "vec": (1,)}),
    aten.addmv.default: _probed(aten.addmv.default, {"self": (1,), "mat": (1, 1), "vec": (1,)}),
    aten.dot.default: _pairs(("self", "tensor", _DOT)),
    aten.vdot.default: _pairs(("self", "other", _DOT)),
    aten._cdist_forward.default: _pairs(("x1", "x2", _SCALAR_TYPE)),
    # (eager's transposed convolutions accept a bias of another dtype)
    aten.convolution.default: _pairs(
        ("input", "weight", "Input type ({ca}) and weight type ({cb}) should be the same")
    ),
    aten.grid_sampler_2d.default: _pairs(("input", "grid", _SCALAR_TYPE)),
    aten.grid_sampler_3d.default: _pairs(("input", "grid", _SCALAR_TYPE)),
    aten.complex.default: _first(
        _complex_parts,
        _pairs(
            (
                "real",
                "imag",
                "Expected object of scalar type {a} but got scalar type {b} for second argument",
            )
        ),
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
    aten.index_reduce.default: _first(
        _index_reduce_mode,  # (eager's meta function checks the mode first)
        _index_add_source,  # (eager's meta function checks shapes before its kernel dtypes)
        _pairs(
            (
                "self",
                "source",
                "index_reduce_(): self ({a}) and source ({b}) must have the same scalar type",
            )
        ),
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
    aten.index_put.default: _first(_index_put_source, _index_shapes, _index_put_shape),
    aten.index.Tensor: _index_shapes,
    aten.fill.Scalar: _converts("value", fills=True),
    aten.masked_fill.Scalar: _converts("value"),
    aten.scatter.value: _converts("value"),
    aten.full.default: _converts("fill_value", fills=True),
    aten.full_like.default: _converts("fill_value", fills=True),
    aten.new_full.default: _converts("fill_value", fills=True),
    aten.index_fill.int_Scalar: _index_fill_value,  # (decomposed to ``index_put``)
    aten.index_fill.int_Tensor: _index_fill_value,
    aten.median.dim: _median_dim,
    aten.nanmedian.dim: _median_dim,
    aten.max.dim: _empty_dim("max"),
    aten.min.dim: _empty_dim("min"),
    aten.mode.default: _empty_dim("mode"),
    aten.max.default: _empty_whole("max"),
    aten.min.default: _empty_whole("min"),
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
    aten.add.Tensor: _bool_alpha,
    aten.add.Scalar: _bool_alpha,
    aten.sub.Tensor: _first(_bool_subtraction, _bool_alpha),
    aten.sub.Scalar: _first(_bool_subtraction, _bool_alpha),
    aten.rsub.Tensor: _first(_bool_subtraction, _bool_alpha),
    aten.rsub.Scalar: _first(_bool_subtraction, _bool_alpha),
    aten._softmax.default: _softmax_dtype(""),
    aten._log_softmax.default: _softmax_dtype("log_"),
    aten.index_select.default: _index_select_index,
    aten._embedding_bag.default: _embedding_bag_weights,
    aten._embedding_bag_forward_only.default: _embedding_bag_weights,
    # decomposed before they reach the graph (``checked_decompositions``)
    aten.linalg_cross.default: _pairs(("self", "other", _SCALAR_TYPE)),
    aten.nll_loss_forward.default: _pairs(("self", "weight", _SCALAR_TYPE)),
    aten.nll_loss2d_forward.default: _pairs(("self", "weight", _SCALAR_TYPE)),
    aten.multi_margin_loss.default: _pairs(("self", "weight", _SCALAR_TYPE)),
    aten.binary_cross_entropy.default: _pairs(
        ("target", "self", "Found dtype {a} but expected {b}")
    ),
    # Backward kernels: checked in the fake backward of eager's graph (autodiff/_eager_backward)
    aten.native_batch_norm_backward.default: _batch_norm_weight,
    aten.nll_loss2d_backward.default: _nll_loss2d_grad_input,
    aten.huber_loss_backward.default: _pairs(
        ("target", "self", "Found dtype {a} but expected {b}")
    ),
    # (torch 2.11's kernel rejects a target of another dtype, 2.13's accepts it)
    aten.mse_loss_backward.default: _probed(
        aten.mse_loss_backward.default,
        {"grad_output": (1,), "self": (1,), "target": (1,)},
        (("reduction", 0),),
    ),
}


def _by_name(node: torch.fx.Node) -> dict:
    """``node``'s arguments by their names in the ATen schema (defaults left out)."""
    names = [a.name for a in node.target._schema.arguments]
    return {**dict(zip(names, node.args)), **node.kwargs}


def check_graph(gm: torch.fx.GraphModule) -> None:
    """Raise eager's error (``OpError``) for the first node of ``gm`` whose arguments eager
    rejects by their dtypes or constant values (``CHECKS``), or that ``mark_decomposed`` or
    ``mark_calls`` marked."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        rejected = node.meta.get(_REJECTED)
        checker = CHECKS.get(node.target)
        if rejected is None and checker is not None:
            rejected = checker(_by_name(node), node)
        if rejected is None:
            rejected = unsupported_dtype(node)
        if rejected is not None:
            message, error = rejected if isinstance(rejected, tuple) else (rejected, OpError)
            raise error(message, node)
        if REFUSED_CALL in node.meta:  # (named by the user's call: F.max_pool1d)
            message, error, call = node.meta[REFUSED_CALL]
            raise error(message, call)


# -- ops checked where they are decomposed ------------------------------------------------------
REJECTED = _REJECTED = "torch2xla.rejected"  # node.meta: eager's error for a decomposed call
# (op, the user's stack trace, eager's message) per rejected call of the export in progress
_recorded: contextvars.ContextVar[list | None] = contextvars.ContextVar("recorded", default=None)


def checked_decompositions(table: dict) -> dict:
    """``table`` (op -> decomposition) with its decompositions wrapped to record the calls
    eager rejects (inside ``recording()``): by ``CHECKS``, and CPU kernels without half
    precision (``kernel_refuses``)."""
    return {op: _checked(op, fn) for op, fn in table.items()}


def _checked(op: torch._ops.OpOverload, decomposition: Callable) -> Callable:
    checker, names = CHECKS.get(op), [a.name for a in op._schema.arguments]

    def decompose(*args, **kwargs):
        recorded = _recorded.get()
        if recorded is not None:
            rejected = None
            if checker is not None:
                rejected = checker({**dict(zip(names, args)), **kwargs}, None)
            if rejected is None:  # (a CPU kernel without half precision, decomposed here)
                rejected = kernel_refuses(op, args, kwargs)
            if rejected is not None:
                stack = torch.fx.traceback.get_current_meta().get("stack_trace")
                recorded.append((op, stack, rejected))
        return decomposition(*args, **kwargs)

    decompose.__name__ = decompose.__qualname__ = op.__name__
    return decompose


@contextlib.contextmanager
def recording() -> Iterator[list]:
    """Record the decomposed calls eager rejects during an export (``mark_decomposed``)."""
    token = _recorded.set([])
    try:
        yield _recorded.get()
    finally:
        _recorded.reset(token)


def mark_decomposed(gm: torch.fx.GraphModule, recorded: list) -> None:
    """Mark the first node each ``recorded`` call's decomposition made in ``gm`` (same
    ``original_aten`` and stack trace) with eager's message, for ``check_graph``."""
    for op, stack, rejected in recorded:
        # (by name: node metas hold copies of the op object)
        made = [
            n
            for n in gm.graph.nodes
            if n.op == "call_function" and str(n.meta.get("original_aten")) == str(op)
        ]
        node = next((n for n in made if n.meta.get("stack_trace") == stack), None)
        if node is None and not made:
            message, error = rejected if isinstance(rejected, tuple) else (rejected, OpError)
            raise error(f"{message}\n  op: {op}")
        node = node if node is not None else made[0]
        node.meta.setdefault(_REJECTED, rejected)


__all__ = [
    "CHECKS",
    "REJECTED",
    "check_graph",
    "checked_decompositions",
    "mark_decomposed",
    "recording",
]
