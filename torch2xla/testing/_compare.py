"""Comparing eager and XLA results: tolerances per dtype, NaN positions, readable mismatches."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from torch2xla.runtime._interop import dtype_name

__all__ = [
    "DEFAULT_TOLERANCES",
    "REFERENCE_CAP",
    "REFERENCE_MULTIPLIER",
    "ParityError",
    "default_tolerance",
    "describe_value",
]

DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
"""``(rtol, atol)`` per floating dtype, the defaults of ``torch.testing.assert_close``.

An element passes when ``|xla - eager| <= atol + rtol * |eager|``, or when both are equal
(infinities of the same sign), or when both are NaN. Integer and bool tensors must be equal.
"""


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` used for tensors of ``dtype`` (``(0, 0)``: exact, for ints and bool)."""
    return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))


class ParityError(AssertionError):
    """The XLA path and eager PyTorch disagree.

    Its message is a short report: each differing value with its worst element and the
    tolerance, the inputs' shapes and dtypes, a known limitation the failure hits (if any),
    and how to reproduce it.

    Attributes:
        what: which value differs, e.g. ``"output[0]"``, ``"args[1] after the call"`` or
            ``"grad of args[0]"``.
        limitations: the known limitations (``Limitation``) the failure hits.
        reproduce: Python code that runs the failing check again (None when not saved).
    """

    __module__ = "torch2xla.testing"

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what
        self.limitations: tuple = ()
        self.reproduce: str | None = None


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """Why one value differs; ``str()`` is the failure message's body.

    Attributes:
        what: which value (``output[0]``, ``grad of args[1]``).
        summary: how it differs.
        details: the worst element, NaN positions.
        desc: the eager value's dtype and shape (``float32[4, 8]``), '' for non-tensors.
        nonfinite: the worst element is infinite or NaN on one side.
        integral: an integer or bool tensor differs.
        by_value: floating values differ (a float64 reference may explain it).
    """

    what: str
    summary: str
    details: tuple[str, ...] = ()
    desc: str = ""
    nonfinite: bool = False
    integral: bool = False
    by_value: bool = False

    def __str__(self) -> str:
        head = f"{self.what} {self.desc}" if self.desc else self.what
        return "\n".join((f"{head}: {self.summary}", *(f"  {d}" for d in self.details)))


def short_dtype(dtype: torch.dtype) -> str:
    return dtype_name(dtype)


def describe_tensor(t: torch.Tensor) -> str:
    """``float32[4, 8]``."""
    return f"{short_dtype(t.dtype)}[{', '.join(str(s) for s in t.shape)}]"


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


def _fmt(v: Any) -> str:
    return repr(v.item() if isinstance(v, torch.Tensor) else v)


REFERENCE_MULTIPLIER = 2.0
REFERENCE_CAP = 32.0
"""The float64 reference (``assert_parity`` computes it only when values differ): eager's
own error in a floating output, measured as the RMS of ``eager - reference`` over its finite
elements, is what rounding in the output's dtype gives when it is at most ``REFERENCE_CAP``
epsilons of the reference's RMS magnitude. Then an element XLA computes otherwise also passes
when ``|xla - reference| <= atol + rtol * |reference| + REFERENCE_MULTIPLIER * error``: XLA
is as close to the exact value as eager's rounding is. Beyond the cap (the function relies on
rounding, as ``(x + 2**23) - 2**23`` does) the reference is not used. Infinities, NaN and
integers are never judged by it."""


def _usable_reference(reference: Any, eager: torch.Tensor) -> torch.Tensor | None:
    if not isinstance(reference, torch.Tensor) or reference.shape != eager.shape:
        return None
    if not (reference.dtype.is_floating_point or reference.is_complex()):
        return None
    if reference.is_complex() != eager.is_complex():
        return None
    return reference.detach()


def _eager_error(ef: torch.Tensor, rf: torch.Tensor, dtype: torch.dtype) -> float | None:
    """Eager's RMS error against the float64 reference, or None where it is beyond what
    rounding in ``dtype`` explains (``REFERENCE_CAP``)."""
    both = torch.isfinite(ef) & torch.isfinite(rf)
    if not bool(both.any()):
        return None
    error = float((ef[both] - rf[both]).square().mean().sqrt())
    scale = float(rf[both].square().mean().sqrt())
    if not error <= REFERENCE_CAP * torch.finfo(dtype).eps * scale:
        return None
    return error


def compare_tensors(
    what: str,
    eager: torch.Tensor,
    xla: torch.Tensor,
    *,
    rtol: float | None,
    atol: float | None,
    check_dtype: bool = True,
    check_signed_zero: bool = False,
    check_stride: bool = True,
    reference: torch.Tensor | None = None,
) -> Mismatch | None:
    """The first way ``xla`` differs from ``eager`` (metadata, then values), or None.

    ``reference``: the same value computed in float64 (see :data:`REFERENCE_CAP`); where
    given, a floating element also passes when XLA is as close to it as eager's rounding
    explains.

    Infinities must be equal (same sign) and NaN in the same places: an infinite or NaN
    element never passes by tolerance. Strides are compared on the dims of size > 1 (the
    others are not observable through indexing or ``is_contiguous``)."""
    desc = describe_tensor(eager)
    if not isinstance(xla, torch.Tensor):
        return Mismatch(
            what, f"eager gave a Tensor, XLA gave {type(xla).__name__}: {xla!r}", desc=desc
        )
    if check_dtype and xla.dtype != eager.dtype:
        return Mismatch(what, f"dtype differs: eager {eager.dtype}, XLA {xla.dtype}", desc=desc)
    if xla.shape != eager.shape:
        return Mismatch(
            what, f"shape differs: eager {tuple(eager.shape)}, XLA {tuple(xla.shape)}", desc=desc
        )
    if xla.device != eager.device:
        return Mismatch(what, f"device differs: eager {eager.device}, XLA {xla.device}", desc=desc)
    if check_stride and not _same_strides(eager, xla):
        return Mismatch(
            what,
            f"strides differ: eager {eager.stride()}, XLA {xla.stride()} (the layout is "
            "observable: .stride(), .is_contiguous(), whether .view() works; "
            "check_stride=False to compare values only)",
            desc=desc,
        )
    if xla.requires_grad != eager.requires_grad:
        return Mismatch(
            what,
            f"requires_grad differs: eager {eager.requires_grad}, XLA {xla.requires_grad}",
            desc=desc,
        )
    if eager.requires_grad and (eager.grad_fn is None) != (xla.grad_fn is None):
        return Mismatch(
            what,
            "is_leaf differs: eager "
            + ("a leaf (no grad_fn)" if eager.grad_fn is None else "not a leaf (has a grad_fn)")
            + ", XLA "
            + ("a leaf (no grad_fn)" if xla.grad_fn is None else "not a leaf (has a grad_fn)"),
            desc=desc,
        )
    e, x = eager.detach(), xla.detach()
    if e.numel() == 0:
        return None
    if x.dtype != e.dtype:  # check_dtype=False: the values compared in a common dtype
        common = torch.promote_types(e.dtype, x.dtype)
        e, x = e.to(common), x.to(common)
    ref = _usable_reference(reference, e)
    if e.is_complex():
        for part, fn in (("real", torch.real), ("imag", torch.imag)):
            m = compare_tensors(
                f"{what}.{part}",
                fn(e),
                fn(x),
                rtol=rtol,
                atol=atol,
                check_signed_zero=check_signed_zero,
                check_stride=False,
                reference=None if ref is None else fn(ref.to(torch.complex128)),
            )
            if m is not None:
                return m
        return None
    if not e.dtype.is_floating_point:
        bad = (e != x).reshape(-1)
        n_bad = int(bad.sum())
        if not n_bad:
            return None
        first = int(bad.nonzero()[0, 0])
        ef, xf = e.reshape(-1), x.reshape(-1)
        where = _index(first, tuple(e.shape))
        return Mismatch(
            what,
            f"{n_bad} of {e.numel()} elements differ ({short_dtype(e.dtype)} must match exactly)",
            (f"first at index {where}: eager={_fmt(ef[first])}, xla={_fmt(xf[first])}",),
            desc,
            integral=True,
        )
    d_rtol, d_atol = default_tolerance(e.dtype)
    given = rtol is not None or atol is not None
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    ef = e.reshape(-1).to(torch.float64)
    xf = x.reshape(-1).to(torch.float64)
    e_nan, x_nan = ef.isnan(), xf.isnan()
    equal = (ef == xf) | (e_nan & x_nan)
    abs_err = (xf - ef).abs()
    allowed = atol + rtol * ef.abs()
    # An infinity or NaN passes only by equality: |inf - x| <= atol + rtol * inf would let a
    # finite (or -inf) XLA value pass where eager gave inf.
    finite = torch.isfinite(ef) & torch.isfinite(xf)
    ok = equal | (finite & (abs_err <= allowed))
    ref_note = None
    if ref is not None and not bool(ok.all()):
        rf = ref.reshape(-1).to(torch.float64)
        error = _eager_error(ef, rf, e.dtype)
        if error is None:
            ref_note = (
                "float64 reference not used: eager's own error against it is more than "
                f"rounding in {short_dtype(e.dtype)} explains (the function relies on it)"
            )
        else:
            ref_allowed = atol + rtol * rf.abs() + REFERENCE_MULTIPLIER * error
            near = finite & torch.isfinite(rf) & ((xf - rf).abs() <= ref_allowed)
            ok |= near
            ref_note = (
                None
                if error == 0
                else (
                    f"float64 reference: XLA also differs from it by more than rtol, atol and "
                    f"{REFERENCE_MULTIPLIER:g} x eager's RMS error against it ({error:.3g})"
                )
            )
    if check_signed_zero:
        ok &= ~((ef == 0) & (xf == 0) & (ef.signbit() != xf.signbit()))
    if bool(ok.all()):
        return None
    # Badness: how many tolerances away; NaN/inf disagreements are infinitely bad.
    with torch.no_grad():
        # -1 for elements that pass, so a sign-only mismatch (badness 0) still ranks above them.
        badness = torch.where(
            ok, torch.full_like(abs_err, -1.0), abs_err / allowed.clamp_min(1e-300)
        )
        badness = torch.where(
            ~ok & ~torch.isfinite(badness), torch.full_like(badness, math.inf), badness
        )
        worst = int(torch.argmax(torch.nan_to_num(badness, nan=math.inf)))
    n_bad = int((~ok).sum())
    ev, xv = ef[worst].item(), xf[worst].item()
    err = abs(xv - ev)
    rel = err / abs(ev) if ev != 0 else math.inf
    where = _index(worst, tuple(e.shape))
    details = [
        f"worst at index {where}: eager={ev!r}, xla={xv!r} (abs err {err:.3g}, rel err {rel:.3g})",
    ]
    nan_only_x = int((x_nan & ~e_nan).sum())
    nan_only_e = int((e_nan & ~x_nan).sum())
    inf_only = int((~ok & ~e_nan & ~x_nan & ~(torch.isfinite(ef) & torch.isfinite(xf))).sum())
    parts = [
        f"{n} {what_}"
        for n, what_ in (
            (nan_only_e, "NaN only in eager"),
            (nan_only_x, "NaN only in XLA"),
            (inf_only, "with an infinity on one side"),
        )
        if n
    ]
    if parts:
        details.append(f"non-finite: {', '.join(parts)}")
    if ref_note is not None:
        details.append(ref_note)
    kind = "signed zeros or values" if check_signed_zero else "values"
    source = "given" if given else f"{short_dtype(e.dtype)} default"
    return Mismatch(
        what,
        f"{n_bad} of {e.numel()} elements ({100.0 * n_bad / e.numel():.1f}%) differ in {kind} "
        f"beyond rtol={rtol:g}, atol={atol:g} ({source})",
        tuple(details),
        desc,
        nonfinite=not (math.isfinite(ev) and math.isfinite(xv)),
        by_value=True,
    )


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal strides on every dim of size > 1 (all equal when a tensor is empty)."""
    if a.numel() == 0:
        return True
    return all(sa == sb for n, sa, sb in zip(a.shape, a.stride(), b.stride(), strict=True) if n > 1)


def _kind(v: Any) -> str:
    if v is None:
        return "None"
    if isinstance(v, torch.Tensor):
        return f"a Tensor {describe_tensor(v)}"
    return f"{type(v).__name__} {v!r}"


def compare_trees(
    what: str,
    eager: Any,
    xla: Any,
    *,
    rtol: float | None,
    atol: float | None,
    check_dtype: bool = True,
    check_signed_zero: bool = False,
    check_stride: bool = True,
    reference: Any = None,
) -> list[Mismatch]:
    """Every mismatch between two pytrees of outputs (structure, tensors, Python values).

    ``reference``: the tree computed in float64 (``compare_tensors``), used where its
    structure is eager's.

    Python numbers must be equal (NaN equals NaN; with ``check_signed_zero`` a zero's sign
    counts); ``None`` differs from any tensor (a missing gradient is not zeros)."""
    from torch.utils import _pytree as pytree

    if (eager is None) != (xla is None) or (
        isinstance(eager, torch.Tensor) != isinstance(xla, torch.Tensor)
    ):
        return [Mismatch(what, f"eager gave {_kind(eager)}, XLA {_kind(xla)}")]

    def is_none(v: Any) -> bool:
        return v is None

    e_leaves, e_spec = pytree.tree_flatten(eager, is_leaf=is_none)
    x_leaves, x_spec = pytree.tree_flatten(xla, is_leaf=is_none)
    if e_spec != x_spec:
        return [Mismatch(what, f"structure differs:\n  eager {e_spec}\n  XLA   {x_spec}")]
    paths = [
        what + pytree.keystr(k) for k, _ in pytree.tree_flatten_with_path(eager, is_leaf=is_none)[0]
    ]
    r_leaves: list = [None] * len(e_leaves)
    if reference is not None:
        leaves, spec = pytree.tree_flatten(reference, is_leaf=is_none)
        if spec == e_spec:
            r_leaves = leaves
    out = []
    for path, e, x, r in zip(paths, e_leaves, x_leaves, r_leaves, strict=True):
        if e is None or x is None:
            m = None if e is x else Mismatch(path, f"eager gave {_kind(e)}, XLA {_kind(x)}")
        elif isinstance(e, torch.Tensor):
            m = compare_tensors(
                path,
                e,
                x,
                rtol=rtol,
                atol=atol,
                check_dtype=check_dtype,
                check_signed_zero=check_signed_zero,
                check_stride=check_stride,
                reference=r,
            )
        elif type(e) is not type(x):
            m = Mismatch(
                path, f"type differs: eager {type(e).__name__} {e!r}, XLA {type(x).__name__} {x!r}"
            )
        elif isinstance(e, (float, complex)) and _same_number(e, x, check_signed_zero):
            m = None
        elif isinstance(e, (float, complex)) or e != x:
            m = Mismatch(path, f"value differs: eager {e!r}, XLA {x!r}")
        else:
            m = None
        if m is not None:
            out.append(m)
    return out


def _same_number(e: complex, x: complex, signed_zero: bool) -> bool:
    """Python floats (complex: both parts): equal, NaN in both, the zero's sign on request."""
    if isinstance(e, complex):
        return _same_number(e.real, x.real, signed_zero) and _same_number(
            e.imag, x.imag, signed_zero
        )
    if math.isnan(e) or math.isnan(x):
        return math.isnan(e) and math.isnan(x)
    return e == x and not (signed_zero and math.copysign(1, e) != math.copysign(1, x))


def describe_value(v: Any, limit: int = 8) -> str:
    """A one-line description of an input: ``float32[4, 16] in [-9.5, 10.0]``; the exact
    values (``repr`` of floats round-trips) of tensors up to ``limit`` elements; the memory
    layout when it is not contiguous, NaN and infinities when present."""
    if isinstance(v, torch.nn.Module):
        n = sum(1 for _ in v.parameters())
        return f"{type(v).__name__} module ({n} parameters, {sum(1 for _ in v.buffers())} buffers)"
    if isinstance(v, torch.optim.Optimizer):
        return f"{type(v).__name__} optimizer ({len(v.state)} parameters with state)"
    if not isinstance(v, torch.Tensor):
        return repr(v)
    t = v.detach()
    parts = [describe_tensor(t)]
    if v.requires_grad:
        parts.append("requires_grad")
    if not t.is_contiguous() or t.storage_offset():
        parts.append(f"stride={t.stride()}, offset={t.storage_offset()}")
    if t.numel() <= limit:
        parts.append(f"= {t.cpu().tolist()!r}")
        return " ".join(parts)
    flat = t.reshape(-1).cpu()
    if t.dtype.is_floating_point or t.is_complex():
        f = flat.to(torch.complex128 if t.is_complex() else torch.float64)
        if t.is_complex():
            f = torch.view_as_real(f).reshape(-1)
        fin = f[torch.isfinite(f)]
        if fin.numel():
            parts.append(f"in [{fin.min().item():.5g}, {fin.max().item():.5g}]")
        n_nan, n_inf = int(f.isnan().sum()), int(f.isinf().sum())
        if n_nan or n_inf:
            parts.append(f"({n_nan} NaN, {n_inf} inf)")
    elif flat.numel():
        parts.append(f"in [{flat.min().item()!r}, {flat.max().item()!r}]")
    return " ".join(parts)
