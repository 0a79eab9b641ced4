"""The jitted forward and backward of a program differentiated with ``jax.vjp`` (``TrainFns``),
and the conversions of torch gradients to JAX cotangents and back."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import torch

from torch2xla.autodiff import _residuals
from torch2xla.runtime._interop import jax_dtype, to_jax
from torch2xla.runtime._jax_scope import x64


@dataclasses.dataclass
class TrainFns:
    """The jitted functions of one program differentiated with respect to ``diff_in``.

    Attributes:
        fwd: ``(seed, diff, rest) -> (diff_outs, aux_outs, residuals)`` (``_residuals.Forward``:
            the residuals are a ``Residuals`` pytree, the computed arrays plus the inputs the
            backward needs, which are not copied). Where the function has runtime checks
            (``flat_fn.checks``), their status follows the aux outputs.
        bwd: ``(residuals, cotangents, donate=False) -> input gradients`` (one per
            ``diff_in``); ``donate=True`` when the graph is freed by this backward: the
            computed residuals are given to the program (``_residuals.Backward``).
        aux_out: positions of the outputs that are not differentiated.
        deps: per differentiated output, the positions in ``diff_in`` connected to it in
            eager's autograd graph (the program's ``connected``; None until first needed).
        plan: what ``XlaFunction`` decided once for these functions (``_Plan``; None until
            their first call).
    """

    fwd: Callable
    bwd: Callable
    aux_out: tuple[int, ...]
    deps: tuple[frozenset[int], ...] | None = None
    plan: Any = None

    def __iter__(self):
        """Unpacks as ``fwd, bwd, aux_out``."""
        return iter((self.fwd, self.bwd, self.aux_out))

    def saved_positions(self) -> tuple[int, ...] | None:
        """The positions among the program's inputs whose values the backward reads (None
        until the forward was traced): saving those tensors on the autograd node makes an
        in-place change before the backward raise eager's error."""
        layout = getattr(self.fwd, "layout", None)
        if layout is None:
            return None
        return tuple(k for k in layout.input_pos if k >= 0)

    def saved_inputs(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The tensors among ``tensors`` (the program's inputs) whose values the backward reads
        (known after the forward's first call)."""
        return tuple(tensors[k] for k in self.saved_positions() or ())


def build_train_fns(
    flat_fn: Callable,
    num_inputs: int,
    diff_in: tuple[int, ...],
    diff_out: tuple[int, ...],
    num_outputs: int,
    recompute_layout: bool = True,
    compiler_options: dict | None = None,
    auto_layouts: bool = True,
    pack_limit: int | None = None,
    split: Callable[[int], int | None] | None = None,
    device: jax.Device | None = None,
) -> TrainFns:
    """``TrainFns`` for ``flat_fn(seed, *inputs) -> outputs`` differentiated with respect to the
    inputs ``diff_in`` and the outputs ``diff_out``.

    With ``recompute_layout`` the backward recomputes layout copies (transposes, reshapes,
    broadcasts) instead of keeping them (``_residuals.saveable``). Pass False for a function
    that checkpoints its own segments (remat): an outer ``jax.checkpoint`` policy would
    override theirs and keep what they recompute. ``compiler_options`` go to XLA with both
    programs; with ``auto_layouts`` XLA chooses the computed residuals' layouts. Gradients of
    at most ``pack_limit`` bytes reach torch packed (``_pack``; None: none are). ``split`` maps
    the residuals' bytes to the bytes per segment of a split backward (``_split``; None, or it
    returning None: one program). ``device``: where the programs run, for the persistent cache
    (None: they are not stored).
    """
    diff_set, out_set = frozenset(diff_in), frozenset(diff_out)
    aux_out = tuple(i for i in range(num_outputs) if i not in out_set)

    def vjp(seed, diff, rest):
        def f(*d):
            di, ri = iter(d), iter(rest)
            full = [next(di) if k in diff_set else next(ri) for k in range(num_inputs)]
            outs = flat_fn(seed, *full)
            # (the status of runtime checks, where flat_fn returns one, is the last aux output)
            aux = [outs[i] for i in aux_out] + list(outs[num_outputs:])
            return [outs[i] for i in diff_out], aux

        g = _residuals.differentiated(f) if recompute_layout else f
        douts, vjp_fn, aux = jax.vjp(g, *diff, has_aux=True)
        return douts, aux, vjp_fn

    forward = _residuals.Forward(vjp, diff_in, num_inputs, compiler_options, auto_layouts, device)
    return TrainFns(forward, _residuals.Backward(forward, pack_limit, split), aux_out)


def conj(x):
    return jax.numpy.conj(x) if jax.numpy.iscomplexobj(x) else x


def jax_values(tensors: Sequence[torch.Tensor]) -> list:
    """``tensors`` as JAX values: zero-copy views, the empty ones (no memory to view) made by
    one cached program (``zeros``)."""
    empty = tuple((tuple(t.shape), jax_dtype(t.dtype)) for t in tensors if not t.numel())
    if not empty:
        return [to_jax(t) for t in tensors]
    made = iter(zeros(empty))
    return [to_jax(t) if t.numel() else next(made) for t in tensors]


def zeros(metas: tuple) -> tuple:
    """Zero arrays of ``metas`` ((shape, dtype) each) from one cached program, on the default
    device. Made one by one in eager JAX, each cost a host-to-device copy of its scalar and
    two dispatches (on an H200 ~0.4 ms each, 25 a GPT-2 training step whose key/value caches
    get no gradient), the device idle meanwhile; each call of the program makes new arrays
    (a backward may donate them, torch may write into gradients made of them)."""
    make = _ZEROS.get(metas)
    if make is None:
        if len(_ZEROS) > 256:  # (shapes of outputs seen once)
            _ZEROS.clear()
        make = _ZEROS[metas] = jax.jit(lambda: tuple(jax.numpy.zeros(s, d) for s, d in metas))
    with x64():  # (float64 and complex128 zeros stay 64-bit)
        return make()


_ZEROS: dict[tuple, Callable] = {}


def cotangent(g: torch.Tensor, dtype: np.dtype):
    """A torch gradient as a JAX cotangent of ``dtype``.

    NOTE: torch's gradient of a complex value is the conjugate of JAX's cotangent (torch
    follows the conjugate Wirtinger convention), so complex cotangents are conjugated on the
    way in and the resulting gradients on the way out (``from_cotangent``). An empty ``g``
    has no memory to view: its cotangent is one of ``zeros``.
    """
    if not g.numel():
        return zeros(((tuple(g.shape), dtype),))[0]
    return to_jax(g.conj() if g.is_complex() else g)


def from_cotangent(g: torch.Tensor) -> torch.Tensor:
    return g.conj().resolve_conj() if g.is_complex() else g
