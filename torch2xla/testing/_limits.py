"""Known differences between XLA and eager PyTorch, recorded as data with a reproducer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch

from torch2xla.testing._compare import ParityError
from torch2xla.testing._parity import assert_parity

__all__ = ["Limitation"]


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

    def applies(self, op: str, dtype: torch.dtype | None = None) -> bool:
        """Whether this limitation covers ``op`` on inputs of ``dtype``."""
        return op == self.op and (not self.dtypes or dtype is None or dtype in self.dtypes)

    def check(self) -> ParityError:
        """Show the difference still exists: returns the :class:`ParityError` of ``fn(*args)``.

        Raises:
            AssertionError: when XLA now matches eager (remove this record), or when the
                limitation has no reproducer.
        """
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
        dts = ",".join(str(d).removeprefix("torch.") for d in self.dtypes) or "all"
        return f"{self.op}[{dts}]"
