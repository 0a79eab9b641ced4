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
from torch2xla.ops._arg_warnings import WARNINGS, warn_node
from torch2xla.ops._check_args import Checker, _c_name, _dtype, _name, _overflow, _value
from torch2xla.ops._dtype_probes import REFUSED_CALL, kernel_refuses, unsupported_dtype
from torch2xla.ops._empty_checks import EMPTY_CHECKS
from torch2xla.ops._index_checks import (
    _embedding_bag_weights,
    _index_add_source,
    _index_fill_value,
    _index_put_shape,
    _index_put_source,
    _index_reduce_mode,
    _index_select_index,
    _index_shapes,
    _masked_scatter_mask,
)
from torch2xla.ops._random_checks import RANDOM_CHECKS

aten = ops.aten
log = logging.getLogger(__name__)


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


def _output_padding(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    # (eager's CPU transposed convolutions check it in their shape checks; the fake kernel
    # only sizes the output by it)
    weight, out_pad = _value(kwargs, "weight"), kwargs.get("output_padding")
    if not kwargs.get("transposed") or weight is None or not out_pad:
        return None
    nd = weight.ndim - 2

    def per_dim(v):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v * nd if len(v) == 1 else v

    out_pad, stride = per_dim(out_pad), per_dim(kwargs.get("stride", 1))
    dilation = per_dim(kwargs.get("dilation", 1))
    if not all(isinstance(v, int) for v in (*out_pad, *stride, *dilation)):
        return None
    if all(o < s or o < d for o, s, d in zip(out_pad, stride, dilation)):
        return None
    if nd == 1:  # (eager runs it as a 2-d one of height 1)
        out_pad, stride, dilation = [0, *out_pad], [1, *stride], [1, *dilation]
    names = ("depth", "height", "width")[-len(out_pad) :]
    got = " ".join(
        f"{what}_{n}: {v}"
        for what, values in (
            ("output_padding", out_pad),
            ("stride", stride),
            ("dilation", dilation),
        )
        for n, v in zip(names, values)
    )
    return f"output padding must be smaller than either stride or dilation, but got {got}"


def _scalar_shift(kernel: str) -> Checker:
    """``2.5 << t`` (``bitwise_left_shift.Scalar_Tensor``): eager's shift kernels take integer
    and bool dtypes only; this overload has no meta kernel to refuse a float result."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> tuple | None:
        other = _value(kwargs, "other")
        value = node.meta.get("val") if node is not None else None
        if other is None or not isinstance(value, torch.Tensor):
            return None
        if not (value.dtype.is_floating_point or value.dtype.is_complex):
            return None
        device = "cuda" if other.device.type == "cuda" else "cpu"
        return f"\"{kernel}_{device}\" not implemented for '{_name(value.dtype)}'", (
            OpNotImplementedError
        )

    return checker


def _first(*checkers: Checker) -> Checker:
    """The first of ``checkers``' rejections, in eager's order."""

    def checker(kwargs: dict, node: torch.fx.Node | None):
        return next((r for c in checkers if (r := c(kwargs, node)) is not None), None)

    return checker


def _floating_input(name: str) -> Checker:
    """std/var and their ``_mean`` forms of an integer or bool tensor (their meta kernels
    compute a float result where eager raises)."""

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        dtype = _dtype(kwargs, "self")
        if dtype is None or dtype.is_floating_point or dtype.is_complex:
            return None
        return f"{name} only support floating point and complex dtypes"

    return checker


def _logsumexp_no_dims(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    """``logsumexp(x, dim=())`` of a tensor with dims, by eager: its kernel reduces over every
    dim (``sum``) but keeps the maximum's dims to add it back, and raises "output with shape []
    doesn't match the broadcast shape [1, 1]" unless ``keepdim``; the meta kernel takes it."""
    x, dim = _value(kwargs, "self"), kwargs.get("dim")
    if x is None or not isinstance(dim, list | tuple) or dim or x.dim() == 0:
        return None
    keepdim = bool(kwargs.get("keepdim", False))
    constants = (("dim", ()), ("keepdim", keepdim))
    shapes = (("self", (1,) * x.dim()),)
    return _eager_call(aten.logsumexp.default, (x.dtype,), "cpu", shapes, constants)[0]


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


def _encoder_layer_dtypes() -> Checker:
    """``nn.TransformerEncoderLayer``'s fast path: its kernel's products reject an input of
    another dtype than the weights (the lowering would promote). Asked of eager with autocast
    off: the ATen graph has autocast's casts already (``capture/_autocast.py``)."""
    e = 2  # (embed_dim 2, one head, a feed-forward of width 2)
    vectors = ("qkv_bias", "proj_bias", "norm_weight_1", "norm_bias_1", "norm_weight_2")
    shapes = {
        "src": (1, 1, e),
        "qkv_weight": (3 * e, e),
        "proj_weight": (e, e),
        "ffn_weight_1": (e, e),
        "ffn_weight_2": (e, e),
        **{n: (3 * e,) if n == "qkv_bias" else (e,) for n in vectors},
        "norm_bias_2": (e,),
        "ffn_bias_1": (e,),
        "ffn_bias_2": (e,),
    }
    constants = (
        ("embed_dim", e),
        ("num_heads", 1),
        ("use_gelu", False),
        ("norm_first", False),
        ("eps", 1e-5),
    )
    probe = _probed(aten._transformer_encoder_layer_fwd.default, shapes, constants)

    def checker(kwargs: dict, node: torch.fx.Node | None) -> str | None:
        with torch.autocast("cpu", enabled=False):
            return probe(kwargs, node)

    return checker


CHECKS: dict[torch._ops.OpOverload, Checker] = {
    **RANDOM_CHECKS,
    **EMPTY_CHECKS,
    aten.var.correction: _floating_input("std and var"),
    aten.logsumexp.default: _logsumexp_no_dims,
    aten.var.dim: _floating_input("std and var"),
    aten.std.correction: _floating_input("std and var"),
    aten.std.dim: _floating_input("std and var"),
    aten.var_mean.correction: _floating_input("var_mean"),
    aten.std_mean.correction: _floating_input("std_mean"),
    aten.index_add.default: _index_add_source,
    aten.bitwise_left_shift.Scalar_Tensor: _scalar_shift("lshift"),
    aten.bitwise_right_shift.Scalar_Tensor: _scalar_shift("rshift"),
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
    aten._transformer_encoder_layer_fwd.default: _encoder_layer_dtypes(),
    aten.vdot.default: _pairs(("self", "other", _DOT)),
    aten._cdist_forward.default: _pairs(("x1", "x2", _SCALAR_TYPE)),
    # (eager's transposed convolutions accept a bias of another dtype)
    aten.convolution.default: _first(
        _pairs(("input", "weight", "Input type ({ca}) and weight type ({cb}) should be the same")),
        _output_padding,
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
    ``mark_calls`` marked; issue eager's warnings of the nodes before it (``_arg_warnings``)."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        rejected = node.meta.get(_REJECTED)
        checker = CHECKS.get(node.target)
        by_name = _by_name(node) if checker is not None or node.target in WARNINGS else None
        if rejected is None and checker is not None:
            rejected = checker(by_name, node)
        if rejected is None:
            rejected = unsupported_dtype(node)
        if rejected is not None:
            message, error = rejected if isinstance(rejected, tuple) else (rejected, OpError)
            raise error(message, node)
        if REFUSED_CALL in node.meta:  # (named by the user's call: F.max_pool1d)
            message, error, call = node.meta[REFUSED_CALL]
            raise error(message, call)
        if by_name is not None:
            warn_node(node, by_name)  # eager's warnings from shapes and constants


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
