"""Known differences between XLA and eager PyTorch, recorded as data with a reproducer."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from torch2xla.runtime._interop import dtype_name
from torch2xla.testing._compare import Mismatch, ParityError

__all__ = ["KNOWN_LIMITATIONS", "Limitation"]

# detect(tensors, mismatches): the inputs' and eager outputs' tensors, and what differs.
Detector = Callable[[Sequence[torch.Tensor], Sequence[Mismatch]], bool]


@dataclasses.dataclass(frozen=True)
class Limitation:
    """A known difference between ``backend="xla"`` and eager PyTorch: an expected failure
    recorded as data (which op, which dtypes, why), with an input that shows it.

    Property tests leave ``op`` out for the listed ``dtypes`` (:meth:`applies`), and a test
    calls :meth:`check` on each limitation: it fails once the difference is gone, so the
    record is removed rather than left to hide a regression.

    Attributes:
        op: the op's name, as the test's op table spells it.
        reason: what differs, when, and why.
        dtypes: the input dtypes affected (empty: every dtype).
        fn: a function that shows the difference on ``args``.
        args: the inputs that show it.
        before: argument tuples to call ``fn`` with first, for differences that need an
            earlier compile (a cached program reused on a later input).
        options: extra :func:`assert_parity` options for the check.
        detect: for the kit's general limitations (:data:`KNOWN_LIMITATIONS`), whether a
            failure hits this one, from the tensors of its inputs and eager outputs and the
            mismatches; a hit is named in the ``ParityError``.

    Example:
        >>> Limitation("gelu", "torch's float32 kernel gives NaN at +inf, XLA inf",
        ...            (torch.float32,), torch.nn.functional.gelu, (torch.tensor([math.inf]),))
    """

    op: str
    reason: str
    dtypes: tuple[torch.dtype, ...] = ()
    fn: Callable | None = dataclasses.field(default=None, compare=False)
    args: tuple[Any, ...] = dataclasses.field(default=(), compare=False)
    before: tuple[tuple[Any, ...], ...] = dataclasses.field(default=(), compare=False)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    detect: Detector | None = dataclasses.field(default=None, compare=False)

    def applies(self, op: str, dtype: torch.dtype | None = None) -> bool:
        """Whether this limitation covers ``op`` on inputs of ``dtype``."""
        return op == self.op and (not self.dtypes or dtype is None or dtype in self.dtypes)

    def check(self) -> ParityError:
        """Show the difference still exists: returns the :class:`ParityError` of ``fn(*args)``.

        Raises:
            AssertionError: when XLA now matches eager (remove this record), or when the
                limitation has no reproducer.
        """
        from torch2xla.testing._parity import assert_parity

        if self.fn is None:
            raise AssertionError(f"limitation {self} has no reproducer (fn, args)")
        for args in (*self.before, self.args):
            try:
                assert_parity(self.fn, *args, **dict(self.options))
            except ParityError as e:
                return e
        raise AssertionError(
            f"limitation of {self.op!r} no longer shows ({self.reason}); remove its record"
        )

    def __str__(self) -> str:
        dts = ",".join(dtype_name(d) for d in self.dtypes) or "all"
        return f"{self.op}[{dts}]"


def _floats(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach() for t in tensors if t.dtype.is_floating_point and t.numel()]


def _has_extremes(tensors: Sequence[torch.Tensor], mismatches: Sequence[Mismatch]) -> bool:
    """Infinities, NaN or values past the square root of the dtype's maximum (whose products
    overflow) in the inputs, and a difference in which results are inf or NaN (or in an
    integer conversion of them)."""
    extreme = any(
        bool((~torch.isfinite(t)).any() or (t.abs() >= math.sqrt(torch.finfo(t.dtype).max)).any())
        for t in _floats(tensors)
    )
    return extreme and any(m.nonfinite or m.integral for m in mismatches)


def _has_subnormals(tensors: Sequence[torch.Tensor], mismatches: Sequence[Mismatch]) -> bool:
    """Subnormal values among the inputs or eager's outputs."""
    return any(
        bool(((t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)).any()) for t in _floats(tensors)
    )


KNOWN_LIMITATIONS: tuple[Limitation, ...] = (
    Limitation(
        "extremes",
        "with infinities, NaN or values near the dtype's maximum, XLA and eager PyTorch can "
        "differ in which results are inf or NaN (add/sub with alpha, dot products whose terms "
        "overflow, GELU at +inf, conversions to integers)",
        fn=lambda a, b: torch.sub(a, b, alpha=3),
        args=(
            torch.tensor([[math.inf, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float32),
            torch.tensor(1.1342745902071442e38, dtype=torch.float32),
        ),
        detect=_has_extremes,
    ),
    Limitation(
        "subnormal",
        "XLA on CPU flushes subnormal values to zero (log, rsqrt, ceil... of them differ); "
        "eager PyTorch keeps them",
        fn=torch.log,
        args=(torch.tensor([1e-45], dtype=torch.float32),),
        detect=_has_subnormals,
    ),
)
"""The kit's general limitations: a ``ParityError`` that hits one says so. The strategies'
defaults avoid them (floats in ``[-DEFAULT_RANGE, DEFAULT_RANGE]``, no subnormals);
``full_range=True`` and ``allow_subnormal=True`` draw them. Per-op records live with the
property tests that leave those ops out (``tests/test_properties_*.py``)."""
