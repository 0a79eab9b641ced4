"""How an output eager returns with other strides than row-major, or as a lazy conjugate or
negative view, is returned by the program and handed to torch (``OutputLayout``)."""

from __future__ import annotations

import dataclasses
import math

import jax
import torch

from torch2xla.runtime._interop import _row_major


@dataclasses.dataclass(frozen=True)
class OutputLayout:
    """How an output eager returns with other strides than row-major is handed to torch.

    Eager's strides are the ATen graph's output value's (fake kernels follow eager's). Where
    they are a permutation of a row-major layout (channels_last, the result of a transpose or
    of an elementwise op on one), the program returns the array transposed to that order
    (XLA fuses the transpose into the op that computes the output) and torch views it back:
    no copy. Dims eager expands (stride 0) are returned with size 1 and expanded again (of a
    one-dim output too: ``x.sum().expand(4)``).
    Other strides (a strided slice's gaps, a diagonal) come back row-major.
    Eager's conjugate and negative bits (``torch.fft.ihfft``'s result, ``(-z).conj()``,
    ``y.conj().imag``: lazy views of an intermediate) are kept the same way: the program
    returns the memory eager's view reads (``conj(y)``, ``-y``) and torch views it back with
    ``conj()``/``_neg_view`` (``view_as_real`` of it raises as eager's).

    Attributes:
        order: the output's dims, outermost first, as the program returns them.
        inverse: the ``permute`` that views the program's array in the output's dims.
        expanded: the dims eager expands (size 1 in the program's array), or ().
        shape: the output's shape.
        strides: eager's strides where the view has other ones (size-1 dims), else None.
        conj, neg: eager's output has its conjugate, negative bit set.
    """

    order: tuple[int, ...]
    inverse: tuple[int, ...]
    expanded: tuple[int, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    conj: bool = False
    neg: bool = False

    @classmethod
    def of(cls, val) -> OutputLayout | None:
        if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
            return None
        layout = cls._strided(val)
        if not (val.is_conj() or val.is_neg()):
            return layout
        if layout is None:  # (row-major, or strides with gaps: no transpose)
            same = tuple(range(val.ndim))
            layout = cls(same, same, (), (), None)
        return dataclasses.replace(layout, conj=val.is_conj(), neg=val.is_neg())

    @property
    def _permuted(self) -> bool:
        identity = self.order == tuple(range(len(self.order)))
        return bool(self.expanded) or self.strides is not None or not identity

    @classmethod
    def _strided(cls, val) -> OutputLayout | None:
        # (one dim: only an expanded one, ``x.sum().expand(4)``, is not row-major and dense)
        if val.ndim < 1:
            return None
        shape, stride = tuple(val.shape), tuple(val.stride())
        if not all(isinstance(n, int) for n in (*shape, *stride)) or math.prod(shape) <= 1:
            return None
        if stride == _row_major(shape):
            return None
        expanded = tuple(d for d in range(val.ndim) if stride[d] == 0 and shape[d] > 1)
        kept = [1 if d in expanded else n for d, n in enumerate(shape)]
        # size-1 dims, whose strides are free, go inside the dims of their stride
        order = tuple(sorted(range(val.ndim), key=lambda d: (-stride[d], kept[d] == 1)))
        got = [0] * val.ndim
        step = 1
        for d in reversed(order):
            got[d] = 0 if d in expanded else step
            step *= kept[d]
        if any(got[d] != stride[d] for d in range(val.ndim) if kept[d] != 1):
            return None  # not a permutation of row-major: gaps or overlaps
        inverse = tuple(order.index(d) for d in range(val.ndim))
        return cls(order, inverse, expanded, shape, None if tuple(got) == stride else stride)

    def _kept(self, x, take):
        """``x`` with the expanded dims cut to size 1 (``take(x, dim)``)."""
        for d in self.expanded:
            x = take(x, d)
        return x

    def physical(self, val: torch.Tensor) -> torch.Tensor:
        """(fake) ``val`` as the program returns it."""
        val = self._kept(val, lambda x, d: x.narrow(d, 0, 1)).permute(self.order).contiguous()
        return val.resolve_conj().resolve_neg()

    def compute(self, y):
        """(traced) The output ``y`` as the program returns it."""
        y = self._kept(y, lambda x, d: jax.lax.slice_in_dim(x, 0, 1, axis=d))
        y = jax.numpy.transpose(y, self.order)
        # (eager's lazy view reads its memory conjugated, negated: that memory is conj(y), -y)
        if self.conj:
            y = jax.numpy.conj(y)
        return -y if self.neg else y

    def view(self, out: torch.Tensor) -> torch.Tensor:
        """The program's row-major ``out`` with eager's strides and conjugate and negative
        bits (a lazy view of it, as eager's is of its intermediate)."""
        if self._permuted:
            out = self._strided_view(out)
        if self.conj:
            out = out.conj()
        return torch._neg_view(out) if self.neg else out

    def _strided_view(self, out: torch.Tensor) -> torch.Tensor:
        """The program's row-major ``out`` with eager's strides: a tensor of its own over the
        same memory (eager's permuted result is no view, ``_base`` None: Dynamo guards an
        input's ``_base``), a view where expanded (as eager's ``expand``)."""
        if self.expanded or out.requires_grad:
            out = out.permute(self.inverse)
            if self.expanded:
                out = out.expand(self.shape)
            return out if self.strides is None else out.as_strided(self.shape, self.strides)
        strides = self.strides
        if strides is None:
            strides = out.permute(self.inverse).stride()
        own = torch.empty((0,), dtype=out.dtype, device=out.device)
        own.set_(out.untyped_storage(), out.storage_offset(), self.shape, strides)
        # (``set_`` bumped the version of a tensor eager makes at 0; ``OutputMarks.versions``
        # sets eager's other counts)
        if not own.is_inference():  # (inference tensors have no version)
            torch._C._autograd._unsafe_set_version_counter((own,), (0,))
        return own
