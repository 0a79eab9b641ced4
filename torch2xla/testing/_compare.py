"""Comparing eager and XLA results: tolerances per dtype, NaN positions, readable mismatches."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

__all__ = ["DEFAULT_TOLERANCES", "ParityError", "default_tolerance", "describe_value"]

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

    Attributes:
        what: which value differs, e.g. ``"output[0]"``, ``"args[1] after the call"`` or
            ``"grad of args[0]"``.
    """

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """Why one value differs; ``str()`` is the failure message's body."""

    what: str
    summary: str
    details: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "\n".join((f"{self.what}: {self.summary}", *(f"  {d}" for d in self.details)))


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s)
        flat //= s
    return tuple(reversed(idx))


def _fmt(v: Any) -> str:
    return repr(v.item() if isinstance(v, torch.Tensor) else v)


def compare_tensors(
    what: str,
    eager: torch.Tensor,
    xla: torch.Tensor,
    *,
    rtol: float | None,
    atol: float | None,
    check_dtype: bool = True,
    check_signed_zero: bool = False,
) -> Mismatch | None:
    """The first way ``xla`` differs from ``eager`` (metadata, then values), or None."""
    if not isinstance(xla, torch.Tensor):
        return Mismatch(what, f"eager gave a Tensor, XLA gave {type(xla).__name__}: {xla!r}")
    if check_dtype and xla.dtype != eager.dtype:
        return Mismatch(what, f"dtype differs: eager {eager.dtype}, XLA {xla.dtype}")
    if xla.shape != eager.shape:
        return Mismatch(what, f"shape differs: eager {tuple(eager.shape)}, XLA {tuple(xla.shape)}")
    if xla.device != eager.device:
        return Mismatch(what, f"device differs: eager {eager.device}, XLA {xla.device}")
    if xla.requires_grad != eager.requires_grad:
        return Mismatch(
            what,
            f"requires_grad differs: eager {eager.requires_grad}, XLA {xla.requires_grad}",
        )
    e, x = eager.detach(), xla.detach()
    if e.numel() == 0:
        return None
    if e.is_complex():
        for part, fn in (("real", torch.real), ("imag", torch.imag)):
            m = compare_tensors(
                f"{what}.{part}",
                fn(e),
                fn(x).to(fn(e).dtype),
                rtol=rtol,
                atol=atol,
                check_signed_zero=check_signed_zero,
            )
            if m is not None:
                return m
        return None
    if not e.dtype.is_floating_point:
        x = x.to(e.dtype)
        bad = (e != x).reshape(-1)
        n_bad = int(bad.sum())
        if not n_bad:
            return None
        first = int(bad.nonzero()[0, 0])
        ef, xf = e.reshape(-1), x.reshape(-1)
        where = _index(first, tuple(e.shape))
        return Mismatch(
            what,
            f"{n_bad} of {e.numel()} elements differ ({e.dtype} must match exactly)",
            (f"first at index {where}: eager={_fmt(ef[first])} xla={_fmt(xf[first])}",),
        )
    d_rtol, d_atol = default_tolerance(e.dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    ef = e.reshape(-1).to(torch.float64)
    xf = x.reshape(-1).to(torch.float64)
    e_nan, x_nan = ef.isnan(), xf.isnan()
    equal = (ef == xf) | (e_nan & x_nan)
    abs_err = (xf - ef).abs()
    allowed = atol + rtol * ef.abs()
    ok = equal | (abs_err <= allowed)
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
        f"worst at index {where}: eager={ev!r} xla={xv!r} abs err {err:.3g}, rel err {rel:.3g}",
    ]
    nan_only_x = int((x_nan & ~e_nan).sum())
    nan_only_e = int((e_nan & ~x_nan).sum())
    if nan_only_x or nan_only_e:
        details.append(
            f"NaN positions differ: {nan_only_x} NaN only in XLA, {nan_only_e} only in eager"
        )
    finite = ok | (torch.isfinite(ef) & torch.isfinite(xf))
    if not bool(finite.all()):
        details.append(f"{int((~finite).sum())} element(s) differ in NaN/inf")
    kind = "signed zeros or values" if check_signed_zero else "values"
    return Mismatch(
        what,
        f"{n_bad} of {e.numel()} elements ({100.0 * n_bad / e.numel():.1f}%) differ in {kind} "
        f"beyond rtol={rtol:g}, atol={atol:g} ({e.dtype})",
        tuple(details),
    )


def compare_trees(
    what: str,
    eager: Any,
    xla: Any,
    *,
    rtol: float | None,
    atol: float | None,
    check_dtype: bool = True,
    check_signed_zero: bool = False,
) -> list[Mismatch]:
    """Every mismatch between two pytrees of outputs (structure, tensors, Python values)."""
    from torch.utils import _pytree as pytree

    e_leaves, e_spec = pytree.tree_flatten(eager)
    x_leaves, x_spec = pytree.tree_flatten(xla)
    if e_spec != x_spec:
        return [Mismatch(what, f"structure differs:\n  eager {e_spec}\n  XLA   {x_spec}")]
    paths = [what + pytree.keystr(k) for k, _ in pytree.tree_flatten_with_path(eager)[0]]
    out = []
    for path, e, x in zip(paths, e_leaves, x_leaves):
        if isinstance(e, torch.Tensor):
            m = compare_tensors(
                path,
                e,
                x,
                rtol=rtol,
                atol=atol,
                check_dtype=check_dtype,
                check_signed_zero=check_signed_zero,
            )
        elif type(e) is not type(x):
            m = Mismatch(
                path, f"type differs: eager {type(e).__name__} {e!r}, XLA {type(x).__name__} {x!r}"
            )
        elif isinstance(e, float) and math.isnan(e) and math.isnan(x):
            m = None
        elif e != x:
            m = Mismatch(path, f"value differs: eager {e!r}, XLA {x!r}")
        else:
            m = None
        if m is not None:
            out.append(m)
    return out


def describe_value(v: Any, limit: int = 64) -> str:
    """A faithful, bounded description of an input: exact element values for small tensors
    (``repr`` of Python floats round-trips), a summary for large ones, and the memory layout
    when it is not contiguous."""
    if not isinstance(v, torch.Tensor):
        return repr(v)
    t = v.detach()
    head = f"tensor(shape={tuple(t.shape)}, dtype={t.dtype}"
    if t.requires_grad or v.requires_grad:
        head += ", requires_grad=True"
    if not t.is_contiguous() or t.storage_offset():
        head += f", stride={t.stride()}, storage_offset={t.storage_offset()}"
    if t.numel() <= limit:
        return f"{head}, values={t.cpu().tolist()!r})"
    flat = t.reshape(-1).cpu()
    shown = flat[:8].tolist()
    if t.dtype.is_floating_point:
        f = flat.to(torch.float64)
        fin = f[torch.isfinite(f)]
        stats = (
            f"nan={int(f.isnan().sum())}, inf={int(f.isinf().sum())}, "
            f"finite min={fin.min().item() if fin.numel() else None!r}, "
            f"finite max={fin.max().item() if fin.numel() else None!r}"
        )
    else:
        stats = f"min={flat.min().item()!r}, max={flat.max().item()!r}"
    return f"{head}, first values={shown!r}, {stats})"
