"""Eager's errors for index operands that tracing lets through: index dtypes
(``index_select``, ``index_put`` and the ops decomposed to it, by the op the user called),
masks and index tensors that do not fit the indexed tensor, values that do not broadcast to
the indexed shape, and the source of ``index_add``/``masked_scatter``/``embedding_bag``.
Their entries are in ``_arg_checks.CHECKS``."""

from __future__ import annotations

import torch
from torch._ops import ops

from torch2xla._errors import OpError, OpIndexError
from torch2xla.ops._check_args import _dtype, _name, _overflow, _value

aten = ops.aten


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


def _masked_scatter_mask(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    mask = _dtype(kwargs, "mask")
    if mask is None or mask == torch.bool:
        return None
    return f"masked_scatter_ only supports boolean masks, but got mask with dtype {_name(mask)}"


def _index_reduce_mode(kwargs: dict, node: torch.fx.Node | None) -> str | None:
    reduce = kwargs.get("reduce")
    if not isinstance(reduce, str) or reduce in ("prod", "mean", "amax", "amin"):
        return None
    return (
        f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}."
    )


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
