"""Hypothesis strategies for torch tensors: dtypes, shapes, values, special values, layouts.

Built on ``hypothesis.strategies`` and ``hypothesis.extra.numpy``: values are drawn as numpy
arrays and handed to torch, so hypothesis shrinks them (toward zeros and small shapes) the way
it shrinks any numpy array.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from torch2xla.testing import _settings

__all__ = [
    "DEFAULT_RANGE",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "LAYOUTS",
    "broadcastable_tensors",
    "dtypes",
    "elements",
    "layouts",
    "module_inputs",
    "mutually_broadcastable_shapes",
    "scalars",
    "shapes",
    "special_values",
    "tensors",
]

FLOAT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
)
"""Floating dtypes drawn by default, most common first (hypothesis shrinks toward the first)."""

INT_DTYPES: tuple[torch.dtype, ...] = (
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
)
"""Integer dtypes drawn by default. uint16/32/64 are left out: eager PyTorch lacks most of
their kernels on CPU; pass them explicitly where an op supports them."""

LAYOUTS: tuple[str, ...] = ("contiguous", "transposed", "sliced", "offset", "expanded")
"""Memory layouts :func:`tensors` can give a tensor:

- ``contiguous``: row-major, storage offset 0.
- ``transposed``: the same values stored with every dim reversed (column-major).
- ``sliced``: every dim of size > 1 is a step-2 slice of a larger buffer whose other elements
  hold poison values (NaN, or the dtype's max for integers), so reading outside the view shows.
- ``offset``: contiguous at storage offset 1 (data not aligned to 64 bytes); element 0 of the
  storage holds a poison value.
- ``expanded``: the first dim of size > 1 has stride 0 (its values repeat along that dim).
  Eager PyTorch refuses in-place writes to such tensors: keep it for inputs that are only read.
"""

DEFAULT_RANGE: float = 10.0
"""Floats drawn without bounds lie in ``[-DEFAULT_RANGE, DEFAULT_RANGE]``, finite, as a
model's inputs, weights and activations: a product or a sum of a few such values stays far
from the dtype's maximum (float16's is 65504); nonzero magnitudes stay above the square root
of the smallest normal, so that a product of two is not subnormal. Pass ``full_range=True``
(or run pytest with ``--parity-full-range``) to draw the dtype's whole range with infinities,
NaN and the extremes, where XLA and eager PyTorch are known to differ (see
``torch2xla/testing/README.md``, "Limitations"), or pass ``min_value``/``max_value``."""

_NUMPY_DTYPE: dict[torch.dtype, np.dtype] = {
    torch.float64: np.dtype(np.float64),
    torch.float32: np.dtype(np.float32),
    torch.float16: np.dtype(np.float16),
    # NOTE: numpy has no native bfloat16; values are drawn as float32 already rounded to bf16.
    torch.bfloat16: np.dtype(np.float32),
    torch.int64: np.dtype(np.int64),
    torch.int32: np.dtype(np.int32),
    torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8),
    torch.uint8: np.dtype(np.uint8),
    torch.uint16: np.dtype(np.uint16),
    torch.uint32: np.dtype(np.uint32),
    torch.uint64: np.dtype(np.uint64),
    torch.bool: np.dtype(np.bool_),
}


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in _NUMPY_DTYPE:
        raise ValueError(
            f"torch2xla.testing: cannot draw tensors of dtype {dtype}; supported: "
            f"{', '.join(str(d) for d in _NUMPY_DTYPE)}"
        )


def dtypes(
    *, floats: bool = True, ints: bool = True, bools: bool = True, half: bool = True
) -> st.SearchStrategy[torch.dtype]:
    """Strategy for torch dtypes.

    Args:
        floats: include float32 and float64 (and the half types when ``half``).
        ints: include :data:`INT_DTYPES`.
        bools: include ``torch.bool``.
        half: include float16 and bfloat16.

    Returns:
        A strategy that shrinks toward float32.

    Example:
        >>> @given(dtype=dtypes(ints=False, bools=False))
        ... def test(dtype): ...
    """
    choices: list[torch.dtype] = []
    if floats:
        choices += [d for d in FLOAT_DTYPES if half or d not in (torch.float16, torch.bfloat16)]
    if ints:
        choices += list(INT_DTYPES)
    if bools:
        choices.append(torch.bool)
    if not choices:
        raise ValueError("torch2xla.testing.dtypes: every dtype family was excluded")
    return st.sampled_from(choices)


def shapes(
    *, min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4
) -> st.SearchStrategy[tuple[int, ...]]:
    """Strategy for tensor shapes (0-d and 0-size dims included by default).

    Each distinct shape compiles a new XLA program: in property tests prefer a small fixed set,
    ``st.sampled_from([(), (0, 3), (2, 3)])``, and let hypothesis vary the values instead.

    Example:
        >>> shapes(min_dims=1, max_side=3).example()  # doctest: +SKIP
        (2, 0, 3)
    """
    return hnp.array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
    )


def mutually_broadcastable_shapes(
    num_shapes: int = 2,
    *,
    base_shape: tuple[int, ...] = (),
    min_dims: int = 0,
    max_dims: int = 3,
    min_side: int = 0,
    max_side: int = 4,
) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    """Strategy for ``num_shapes`` shapes that broadcast together (torch's rules are numpy's).

    Returns:
        A strategy for a tuple of ``num_shapes`` shapes.
    """
    return hnp.mutually_broadcastable_shapes(
        num_shapes=num_shapes,
        base_shape=base_shape,
        min_dims=min_dims,
        max_dims=max_dims,
        min_side=min_side,
        max_side=max_side,
    ).map(lambda b: tuple(b.input_shapes))


def special_values(dtype: torch.dtype) -> tuple[Any, ...]:
    """The values of ``dtype`` where torch and XLA most often disagree.

    Floats: 0, -0.0, +-1, +-inf, NaN, the smallest subnormal (drawn only when subnormals are
    allowed), the smallest normal and +-max.
    Integers: 0, +-1, min and max (for overflow wrap-around). Bool: False, True.
    """
    _check_dtype(dtype)
    if dtype is torch.bool:
        return (False, True)
    if dtype.is_floating_point:
        fi = torch.finfo(dtype)
        subnormal = fi.tiny * fi.eps
        return (
            0.0,
            -0.0,
            1.0,
            -1.0,
            math.inf,
            -math.inf,
            math.nan,
            subnormal,
            -subnormal,
            fi.tiny,
            fi.max,
            -fi.max,
        )
    ii = torch.iinfo(dtype)
    return tuple(dict.fromkeys(v for v in (0, 1, -1, ii.min, ii.max) if ii.min <= v <= ii.max))


def _inward(v: float, width: int, up: bool) -> float:
    """``v`` rounded to the nearest float of ``width`` bits on the inner side of the bound."""
    t = {16: np.float16, 32: np.float32, 64: np.float64}[width]
    r = t(v)
    if up and float(r) < v:
        r = np.nextafter(r, t(np.inf))
    elif not up and float(r) > v:
        r = np.nextafter(r, t(-np.inf))
    return float(r)


def _round_bf16(x: float) -> float:
    return float(ml_dtypes.bfloat16(x))


def elements(
    dtype: torch.dtype,
    *,
    min_value: float | None = None,
    max_value: float | None = None,
    allow_nan: bool | None = None,
    allow_infinity: bool | None = None,
    allow_subnormal: bool = False,
    specials: bool = True,
    full_range: bool | None = None,
) -> st.SearchStrategy[Any]:
    """Strategy for Python scalars exactly representable in ``dtype``.

    Args:
        dtype: the torch dtype the values must fit.
        min_value, max_value: bounds (inclusive); for integer dtypes they clip the dtype's range.
            Floats without bounds lie in ``[-DEFAULT_RANGE, DEFAULT_RANGE]`` unless
            ``full_range``.
        allow_nan, allow_infinity: ``None`` means allowed when no bound excludes them (with
            ``full_range``); ``True`` adds them even to bounded values (finite values in
            range, plus NaN/inf).
        allow_subnormal: draw subnormal floats. Off by default: XLA on CPU flushes subnormal
            results to zero and mishandles subnormal inputs of some functions (``log``,
            ``rsqrt``, ``ceil``...), where eager PyTorch keeps them; turn them on to see where
            that matters. Float64 values subnormal in float32 are left out too (beside float32
            tensors eager converts them to float32).
        specials: also draw :func:`special_values` (within the bounds) with high probability.
        full_range: floats without bounds span the dtype's whole range, with infinities, NaN
            and the extremes. ``None``: the run's default (False; ``pytest
            --parity-full-range`` makes it True). Integers always span their dtype.

    Returns:
        A strategy for ``bool``, ``int`` or ``float`` values.
    """
    _check_dtype(dtype)
    full = _settings.full_range if full_range is None else full_range
    model_range = dtype.is_floating_point and not full and min_value is None and max_value is None
    if model_range:
        min_value, max_value = -DEFAULT_RANGE, DEFAULT_RANGE
    if dtype is torch.bool:
        return st.booleans()
    if not dtype.is_floating_point:
        ii = torch.iinfo(dtype)
        lo = ii.min if min_value is None else max(ii.min, math.ceil(min_value))
        hi = ii.max if max_value is None else min(ii.max, math.floor(max_value))
        base: st.SearchStrategy[Any] = st.integers(lo, hi)
        extra = [v for v in special_values(dtype) if lo <= v <= hi]
        return st.one_of(base, st.sampled_from(extra)) if specials and extra else base

    bounded = min_value is not None or max_value is not None
    nan = (not bounded) if allow_nan is None else allow_nan
    fi = torch.finfo(dtype)
    width = {torch.float16: 16, torch.float64: 64}.get(dtype, 32)
    lo = -fi.max if min_value is None else _inward(max(min_value, -fi.max), width, up=True)
    hi = fi.max if max_value is None else _inward(min(max_value, fi.max), width, up=False)
    base = st.floats(
        min_value=lo,
        max_value=hi,
        allow_nan=False,
        allow_infinity=False,
        allow_subnormal=allow_subnormal,
        width=width,
    )
    if dtype is torch.bfloat16:
        base = base.map(_round_bf16).filter(lambda v: lo <= v <= hi)
    if model_range:  # no tiny magnitudes: a product of two of them would be subnormal
        small = math.sqrt(fi.tiny)
        base = base.filter(lambda v: v == 0 or abs(v) >= small)
    # A float64 beside float32 tensors (a 0-d tensor, a Python number) is converted to float32:
    # where it is subnormal there, XLA's CPU flush to zero shows again. Not drawn by default.
    narrow_tiny = torch.finfo(torch.float32).tiny if width == 64 else fi.tiny
    if not allow_subnormal and narrow_tiny > fi.tiny:
        base = base.filter(lambda v: v == 0 or abs(v) >= narrow_tiny)

    def keep(v: float) -> bool:
        if math.isnan(v):
            return nan
        if math.isinf(v):
            if allow_infinity is not None:
                return allow_infinity
            return (v > 0 and max_value is None) or (v < 0 and min_value is None)
        if v != 0 and abs(v) < narrow_tiny and not allow_subnormal:
            return False
        if model_range and v != 0 and abs(v) < math.sqrt(fi.tiny):  # (see base)
            return False
        return lo <= v <= hi

    extra = [v for v in special_values(dtype) if keep(v)]
    return st.one_of(base, st.sampled_from(extra)) if specials and extra else base


def _poison(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point:
        return math.nan
    if dtype is torch.bool:
        return True
    return torch.iinfo(dtype).max


def _relayout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``t``'s values stored in ``layout`` (layouts that do not apply to ``t`` leave it as is)."""
    if layout in ("contiguous", "expanded") or t.ndim == 0:
        return t  # "expanded" is built while drawing; here it has no dim of size > 1
    if layout == "transposed":
        rev = tuple(reversed(range(t.ndim)))
        return t.permute(rev).contiguous().permute(rev)
    if layout == "sliced":
        big = torch.full([2 * s if s > 1 else s for s in t.shape], _poison(t.dtype), dtype=t.dtype)
        view = big[tuple(slice(None, None, 2) if s > 1 else slice(None) for s in t.shape)]
        view.copy_(t)
        return view
    if layout == "offset":
        flat = torch.full((t.numel() + 1,), _poison(t.dtype), dtype=t.dtype)
        flat[1:] = t.reshape(-1)
        return flat[1:].view(t.shape)
    raise ValueError(f"torch2xla.testing: unknown layout {layout!r}; known: {LAYOUTS}")


def layouts(*names: str) -> st.SearchStrategy[str]:
    """Strategy for memory layout names (default: all of :data:`LAYOUTS`, shrinking to
    ``contiguous``). Pass the result as ``tensors(..., layout=layouts())``."""
    for n in names:
        if n not in LAYOUTS:
            raise ValueError(f"torch2xla.testing: unknown layout {n!r}; known: {LAYOUTS}")
    return st.sampled_from(names or LAYOUTS)


def _maybe_draw(draw: Any, value: Any) -> Any:
    return draw(value) if isinstance(value, st.SearchStrategy) else value


def _as_shape(shape: Any) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)


@st.composite
def _tensors(
    draw: Any, dtype: Any, shape: Any, elem: Any, elem_kw: dict, layout: Any, requires_grad: bool
) -> torch.Tensor:
    dt = _maybe_draw(draw, dtype)
    _check_dtype(dt)
    sh = _as_shape(_maybe_draw(draw, shape))
    lay = _maybe_draw(draw, layout)
    if lay not in LAYOUTS:
        raise ValueError(f"torch2xla.testing: unknown layout {lay!r}; known: {LAYOUTS}")
    expand_dim = next((i for i, s in enumerate(sh) if s > 1), None) if lay == "expanded" else None
    draw_shape = sh if expand_dim is None else sh[:expand_dim] + (1,) + sh[expand_dim + 1 :]
    strategy = elem if elem is not None else elements(dt, **elem_kw)
    arr = draw(hnp.arrays(_NUMPY_DTYPE[dt], draw_shape, elements=strategy))
    t = torch.from_numpy(np.array(arr, order="C", copy=True)).to(dt)
    if t.dtype is not dt:  # pragma: no cover - from_numpy covers every dtype we draw
        raise AssertionError(f"drew {t.dtype}, wanted {dt}")
    t = t.expand(sh) if expand_dim is not None else _relayout(t, lay)
    if requires_grad and dt.is_floating_point:
        t.requires_grad_(True)
    return t


def tensors(
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] = torch.float32,
    shape: int | Sequence[int] | st.SearchStrategy[tuple[int, ...]] = (3,),
    *,
    elements: st.SearchStrategy[Any] | None = None,
    min_value: float | None = None,
    max_value: float | None = None,
    allow_nan: bool | None = None,
    allow_infinity: bool | None = None,
    allow_subnormal: bool = False,
    specials: bool = True,
    layout: str | st.SearchStrategy[str] = "contiguous",
    requires_grad: bool = False,
    full_range: bool | None = None,
) -> st.SearchStrategy[torch.Tensor]:
    """Strategy for CPU tensors.

    Float values lie in ``[-DEFAULT_RANGE, DEFAULT_RANGE]`` unless bounded otherwise or
    ``full_range`` (see :func:`elements`).

    Args:
        dtype: a dtype or a strategy for one (see :func:`dtypes`).
        shape: a shape or a strategy for one (see :func:`shapes`). Keep the set of shapes small:
            each new shape compiles a new program.
        elements: strategy for the values; by default :func:`elements` of ``dtype`` with the
            bounds and flags below (special values included).
        min_value, max_value, allow_nan, allow_infinity, allow_subnormal, specials,
            full_range: passed to :func:`elements` when ``elements`` is not given.
        layout: a name from :data:`LAYOUTS` or a strategy for one (see :func:`layouts`).
        requires_grad: make floating tensors leaves that require grad.

    Returns:
        A strategy for ``torch.Tensor`` values that shrinks toward zeros.

    Example:
        >>> from hypothesis import given, strategies as st
        >>> @given(x=tensors(dtypes(ints=False), st.sampled_from([(2, 3), (0, 3)])))
        ... def test_exp(x): ...
    """
    elem_kw = {
        "min_value": min_value,
        "max_value": max_value,
        "allow_nan": allow_nan,
        "allow_infinity": allow_infinity,
        "allow_subnormal": allow_subnormal,
        "specials": specials,
        "full_range": full_range,
    }
    return _tensors(dtype, shape, elements, elem_kw, layout, requires_grad)


@st.composite
def _broadcastable(draw: Any, n: int, dtype: Any, shape_strategy: Any, kw: dict) -> tuple:
    shapes_ = draw(shape_strategy)
    return tuple(draw(tensors(dtype, s, **kw)) for s in shapes_[:n])


def broadcastable_tensors(
    n: int = 2,
    dtype: torch.dtype | st.SearchStrategy[torch.dtype] = torch.float32,
    *,
    shapes: st.SearchStrategy[tuple[tuple[int, ...], ...]] | None = None,
    **tensor_kwargs: Any,
) -> st.SearchStrategy[tuple[torch.Tensor, ...]]:
    """Strategy for ``n`` tensors whose shapes broadcast together.

    Args:
        n: how many tensors.
        dtype: a dtype, or a strategy drawn once per tensor (mixed dtypes test type promotion).
        shapes: strategy for the tuple of shapes (default :func:`mutually_broadcastable_shapes`).
        tensor_kwargs: passed to :func:`tensors` (bounds, special values, layout).

    Returns:
        A strategy for a tuple of ``n`` tensors.
    """
    if shapes is None:
        shapes = mutually_broadcastable_shapes(n)
    return _broadcastable(n, dtype, shapes, tensor_kwargs)


def _not_subnormal_in_float32(v: float) -> bool:
    return v == 0 or not abs(v) < torch.finfo(torch.float32).tiny


def scalars(
    *types: type,
    allow_nan: bool = True,
    allow_infinity: bool = True,
    allow_subnormal: bool = False,
) -> st.SearchStrategy[bool | int | float]:
    """Strategy for Python scalars as torch's type promotion sees them (``bool``, ``int``,
    ``float``; by default all three).

    Ints span int64 and include its limits and values just past int32's; floats include
    -0.0, inf and NaN unless excluded, and no value subnormal in float32 unless
    ``allow_subnormal`` (a Python float beside float32 tensors is converted to float32, where
    XLA on CPU flushes subnormals to zero: the "subnormal" limitation).
    """
    types = types or (bool, int, float)
    parts: list[st.SearchStrategy[Any]] = []
    for t in types:
        if t is bool:
            parts.append(st.booleans())
        elif t is int:
            edges = [0, 1, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]
            parts.append(st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from(edges)))
        elif t is float:
            floats = st.floats(allow_nan=allow_nan, allow_infinity=allow_infinity)
            if not allow_subnormal:
                floats = floats.filter(_not_subnormal_in_float32)
            parts.append(floats)
        else:
            raise TypeError(f"torch2xla.testing.scalars: {t} is not bool, int or float")
    return st.one_of(*parts)


def _random_like(ex: torch.Tensor, shape: tuple, gen: torch.Generator) -> torch.Tensor:
    """Random values shaped ``shape`` that look like ``ex``: normal with its mean and spread
    for floats, uniform over its range for integers, fair coin flips for bools."""
    if ex.dtype is torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    if ex.dtype.is_floating_point:
        ref = ex.detach().double()
        ref = ref[torch.isfinite(ref)]
        mean = float(ref.mean()) if ref.numel() else 0.0
        std = float(ref.std()) if ref.numel() > 1 else 1.0
        std = std if math.isfinite(std) and std > 0 else 1.0
        return (torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean).to(ex.dtype)
    lo, hi = (int(ex.min()), int(ex.max())) if ex.numel() else (0, 1)
    # (numpy's bound is inclusive: torch.randint's exclusive hi + 1 overflows at int64's max)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    drawn = np.random.default_rng(seed).integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    return torch.from_numpy(drawn).to(ex.dtype)


@st.composite
def _module_inputs(
    draw: Any,
    examples: tuple,
    dims: Mapping[int, Sequence[int]] | None,
    varied: Sequence[int],
    sizes: Any,
    random: bool,
    kw: dict,
) -> tuple:
    drawn_sizes = {d: _maybe_draw(draw, sizes) for d in varied}
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1))) if random else None
    out = []
    for i, ex in enumerate(examples):
        if not isinstance(ex, torch.Tensor):
            out.append(ex)
            continue
        vary = varied if dims is None else dims.get(i, ())
        shape = list(ex.shape)
        for d in vary:
            if ex.ndim and -ex.ndim <= d < ex.ndim:
                shape[d % ex.ndim] = drawn_sizes[d]
        rg = ex.requires_grad
        if gen is not None:
            t = _random_like(ex, tuple(shape), gen)
            out.append(t.requires_grad_(True) if rg and t.dtype.is_floating_point else t)
            continue
        if kw:
            out.append(draw(tensors(ex.dtype, tuple(shape), requires_grad=rg, **kw)))
            continue
        if ex.dtype is torch.bool or not ex.numel():
            el = elements(ex.dtype, specials=False, allow_nan=False, allow_infinity=False)
        elif ex.dtype.is_floating_point:
            bound = max(1.0, float(ex.detach().abs().max()))
            el = elements(
                ex.dtype, min_value=-bound, max_value=bound, allow_subnormal=False, specials=False
            )
        else:
            el = elements(
                ex.dtype, min_value=int(ex.min()), max_value=int(ex.max()), specials=False
            )
        out.append(draw(tensors(ex.dtype, tuple(shape), elements=el, requires_grad=rg)))
    return tuple(out)


def module_inputs(
    *example_inputs: Any,
    dims: Sequence[int] | Mapping[int, Sequence[int]] = (0,),
    sizes: Sequence[int] | st.SearchStrategy[int] = (1, 2, 3),
    random: bool = True,
    **tensor_kwargs: Any,
) -> st.SearchStrategy[tuple[Any, ...]]:
    """Strategy for argument tuples shaped like ``example_inputs`` (e.g. a model's inputs).

    Each tensor keeps its dtype and rank; the sizes of the dims in ``dims`` are drawn from
    ``sizes`` (one size per dim index, shared by every input, so batch dims stay equal).
    By default (``random=True``) values are random draws from a seed hypothesis picks: floats
    normal with the example's mean and standard deviation, integers (token ids, class labels)
    uniform between the example's min and max, bools fair coin flips. Realistic activations
    keep normalization layers and ReLU/max ties well conditioned, so gradients compare
    meaningfully; hypothesis still shrinks the sizes. With ``random=False`` every element is
    drawn by hypothesis within the example's range (floats in ``[-m, m]``, ``m`` its largest
    magnitude), constant and degenerate tensors included. Non-tensor inputs pass unchanged.

    Args:
        example_inputs: one valid call's positional arguments.
        dims: dims to vary (negative counts from the end), for every tensor; or a mapping from
            argument index to the dims varied on that argument.
        sizes: the sizes to draw from: keep the set small, each one compiles a program.
        random: random values from a drawn seed (see above) instead of hypothesis-drawn ones.
        tensor_kwargs: with ``random=False``, passed to :func:`tensors` instead of the
            example-derived value range.

    Returns:
        A strategy for a tuple of arguments.

    Example:
        >>> module_inputs(torch.randn(4, 16), dims=(0,), sizes=(1, 4, 7))  # doctest: +SKIP
    """
    if isinstance(sizes, st.SearchStrategy):
        size_strategy: Any = sizes
    else:
        size_strategy = st.sampled_from(tuple(sizes))
    if isinstance(dims, Mapping):
        varied = sorted({d for ds in dims.values() for d in ds})
        mapping: Mapping[int, Sequence[int]] | None = dims
    else:
        varied, mapping = list(dims), None
    if random and tensor_kwargs:
        raise TypeError("torch2xla.testing.module_inputs: tensor options need random=False")
    return _module_inputs(
        example_inputs, mapping, varied, size_strategy, random, dict(tensor_kwargs)
    )
