"""What the training forward keeps for the backward, and how little of it is a copy.

``jax.vjp`` inside ``jax.jit`` returns its residuals as outputs of the forward program, and an
output of an XLA program is always a fresh buffer. Three things follow, each fixed here:

- **Inputs the backward needs** (a weight for the input's gradient, the indices of a gather)
  would come back as copies: every weight of a model, once more. The forward returns only the
  residuals it computed; those that are its own inputs are recorded by position at trace time
  (the residual *is* the input tracer) and the backward gets the input arrays again. The torch
  tensors they view are saved on the autograd node (``TrainFns.saved_inputs``), so an in-place
  change between forward and backward raises eager's error instead of giving gradients of
  the new values.
- **Layout copies of other values** (a transposed weight, a reshaped activation, a broadcast
  mask) would be residuals of their own next to their source. The differentiated function runs
  under ``jax.checkpoint`` with a policy that saves everything except those layout ops
  (``saveable``): the backward recomputes them from what it has, which XLA fuses into their
  consumers.
- **The backward's arguments** are live until it ends. When the graph will not be used again
  (``retain_graph=False``) the computed residuals are donated to the backward program, so XLA
  may reuse their buffers for its outputs; a retained graph runs a second executable that
  donates nothing.
- **Residual layouts.** An XLA program's outputs are row-major by default, so an activation
  XLA computes in another layout (a convolution's NHWC output on GPU and CPU) would be
  transposed at the end of the forward and transposed back in the backward. XLA chooses the
  computed residuals' layouts (``Layout.AUTO``), and the backward is compiled to take the
  layouts the forward chose. The backend option ``residual_layouts="default"`` turns this off.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental.layout import Format, Layout

from torch2xla._quiet import quiet
from torch2xla.autodiff import _split
from torch2xla.autodiff._absent import absent, pullback
from torch2xla.autodiff._half_sums import float32_sums
from torch2xla.guards import _persistent
from torch2xla.runtime import _pack
from torch2xla.runtime._interop import direct_call, no_stack_capture, pin_row_major
from torch2xla.runtime._jax_scope import x64

# Primitives whose results are recomputed in the backward rather than kept: they only move,
# repeat or pad data, and their operand is kept anyway or is a program input (free).
RECOMPUTED = frozenset(
    {"transpose", "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "pad"}
)


# Integer ops on a float's bits: eager-exact masks (relu's gradient is 0 where its output is
# zero, read from the bits) are recomputed in the backward from the float, which is kept anyway
# as the next layer's input, instead of being kept as a mask of their own.
_BIT_OPS = frozenset({"bitcast_convert_type", "and", "eq"})

# Primitives that can make a complex value from real operands.
_MAKES_COMPLEX = frozenset({"complex", "fft"})


def saveable(prim, *avals, **params) -> bool:
    """``jax.checkpoint`` policy: keep every value except layout copies (``RECOMPUTED``),
    slices that keep most of their operand (``_trims``), float conversions that widen (the
    narrower operand is kept instead) and integer ops on a float's bits (``_BIT_OPS``).

    NOTE: jax 0.10 cannot keep a complex value across ``jax.checkpoint`` with a policy (it
    passes kept values through ``reduce_precision``, which rejects complex dtypes), so complex
    values are recomputed in the backward from the real values they came from.
    """
    if prim.name in RECOMPUTED or prim.name in _MAKES_COMPLEX:
        return False
    if prim.name == "slice" and avals and _trims(avals[0], params):
        return False
    if prim.name in _BIT_OPS and avals and _bits_of_float(prim.name, avals, params):
        return False
    if any(_is_complex(getattr(a, "dtype", None)) for a in avals):
        return False
    if prim.name == "convert_element_type" and _is_complex(params["new_dtype"]):
        return False
    if prim.name == "convert_element_type" and avals:
        old, new = np.dtype(avals[0].dtype), np.dtype(params["new_dtype"])
        return not (_is_float(old) and _is_float(new) and new.itemsize > old.itemsize)
    return True


def _trims(aval, params) -> bool:
    """Whether a slice keeps at least 7/8 of its operand: it undoes a padding (attention run
    at an even length, ``ops/_nn.py``), whose padded result is kept anyway, so taking the slice
    again in the backward keeps nothing more; where the operand is not kept otherwise, it is
    kept instead of the slice, at most 1/7 more bytes. Smaller slices (a fused projection's
    q, k and v, an LSTM's gates) are kept as they are."""
    strides = params.get("strides") or (1,) * len(aval.shape)
    bounds = zip(params["start_indices"], params["limit_indices"], strides)
    kept = math.prod(-(-(hi - lo) // st) for lo, hi, st in bounds)
    return 8 * kept >= 7 * math.prod(aval.shape)


def _bits_of_float(name: str, avals, params) -> bool:
    """Whether an op of ``_BIT_OPS`` works on the bits of a float (a float reinterpreted as an
    integer, or integers of a float's width): cheap to recompute from the float."""
    if name == "bitcast_convert_type":
        old, new = np.dtype(avals[0].dtype), np.dtype(params["new_dtype"])
        return _is_float(old) and new.kind in "iu" and old.itemsize == new.itemsize
    return all(np.dtype(a.dtype).kind in "iu" and np.dtype(a.dtype).itemsize >= 2 for a in avals)


def _is_float(dtype: np.dtype) -> bool:
    # NOTE: numpy gives ml_dtypes' bfloat16 and float8 types kind "V", not "f".
    return jax.numpy.issubdtype(dtype, jax.numpy.floating)


def _is_complex(dtype) -> bool:
    return dtype is not None and jax.numpy.issubdtype(dtype, jax.numpy.complexfloating)


@jax.tree_util.register_pytree_node_class
class Residuals:
    """A vjp closure split into the arrays the forward computed (``kept``) and the program
    inputs it closes over (``inputs``, views of torch tensors, never copied)."""

    def __init__(self, kept: list, inputs: list, layout: _Layout) -> None:
        self.kept, self.inputs, self.layout = kept, inputs, layout

    def tree_flatten(self):
        return (self.kept, self.inputs), self.layout

    @classmethod
    def tree_unflatten(cls, layout, children):
        return cls(*children, layout)

    def vjp_fn(self) -> Callable:
        """The ``jax.vjp`` closure (call inside a trace)."""
        return self.layout.rebuild(self.kept, self.inputs)


class _Layout:
    """Where each leaf of the vjp closure comes from: the forward's outputs or its inputs."""

    def __init__(self, treedef, sources: tuple[tuple[bool, int], ...], input_pos: tuple[int, ...]):
        self.treedef, self.sources, self.input_pos = treedef, sources, input_pos

    def rebuild(self, kept: Sequence, inputs: Sequence):
        leaves = [inputs[i] if from_input else kept[i] for from_input, i in self.sources]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def _key(self):
        return (self.treedef, self.sources, self.input_pos)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Layout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class Forward:
    """``(seed, diff, rest) -> (diff_outs, aux_outs, Residuals)``: the jitted forward, whose
    residual outputs are only the arrays it computed.

    Args:
        vjp: ``(seed, diff, rest) -> (diff_outs, aux_outs, vjp_fn)``, traceable.
        diff_in: positions of ``diff`` among the program's tensor inputs (the rest are ``rest``).
        num_inputs: number of tensor inputs.
        compiler_options: XLA compiler options, for the backward too.
        auto_layouts: XLA chooses the layouts of the computed residuals.
        device: the device it runs on, for the persistent cache (None: not stored).
    """

    def __init__(
        self,
        vjp: Callable,
        diff_in: tuple[int, ...],
        num_inputs: int,
        compiler_options: dict | None = None,
        auto_layouts: bool = True,
        device: jax.Device | None = None,
    ) -> None:
        diff_set = frozenset(diff_in)
        rest_in = [k for k in range(num_inputs) if k not in diff_set]
        # input position -> (in diff?, index in diff or rest); the seed is position -1
        self._where = {k: (True, i) for i, k in enumerate(diff_in)}
        self._where.update({k: (False, i) for i, k in enumerate(rest_in)})
        self._vjp = vjp
        self.layout: _Layout | None = None
        # the kept residuals' formats, as the compiled forward returns them (None: row-major)
        self.kept_formats: list | None = None
        self._formats_read = False  # (``_read_formats``)
        self._auto_layouts = auto_layouts
        layouts = {"out_shardings": (None, None, Format(Layout.AUTO))} if auto_layouts else {}
        self.compiler_options = compiler_options
        self.device = device  # where it runs (None: its executables are not stored)
        # keep_unused: an executable in the persistent cache is found by its StableHLO text,
        # which names no argument jit dropped (``_persistent.compile``)
        self._jitted = jax.jit(
            self._traced, keep_unused=True, compiler_options=compiler_options, **layouts
        )
        self._fetch: list[tuple[bool, int]] | None = None  # for each input residual, from where

    def _traced(self, seed, diff, rest):
        douts, aux, vjp_fn = self._vjp(seed, diff, rest)
        if self._auto_layouts:
            # NOTE: next to AUTO outputs, JAX lets XLA choose the unspecified outputs' layouts
            # too; the outputs torch reads must be row-major.
            douts, aux = [pin_row_major(d) for d in douts], [pin_row_major(a) for a in aux]
        leaves, treedef = jax.tree_util.tree_flatten(vjp_fn)
        inputs = {id(x): k for k, x in self._positions(seed, diff, rest)}
        kept, input_pos, sources = [], [], []
        for leaf in leaves:
            k = inputs.get(id(leaf))
            if k is None:
                sources.append((False, len(kept)))
                kept.append(leaf)
            else:
                if k not in input_pos:
                    input_pos.append(k)
                sources.append((True, input_pos.index(k)))
        layout = _Layout(treedef, tuple(sources), tuple(input_pos))
        if self.layout is not None and layout != self.layout:
            raise RuntimeError(
                "torch2xla internal error: two traces of one training forward kept different "
                "residuals; please report this with the model"
            )
        self.layout = layout
        self._fetch = [(None, None) if k < 0 else self._where[k] for k in input_pos]
        return douts, aux, kept

    def _positions(self, seed, diff, rest):
        if seed is not None:
            yield -1, seed
        for k, (is_diff, i) in self._where.items():
            yield k, (diff if is_diff else rest)[i]

    def __call__(self, seed, diff: Sequence, rest: Sequence):
        douts, aux, kept = self._jitted(seed, diff, rest)
        if not self._formats_read:
            self._read_formats(kept)
        return douts, aux, self.residuals(kept, seed, diff, rest)

    def _read_formats(self, kept: Sequence) -> None:
        """The kept residuals' formats, from the first call of the jitted forward (a compiled
        one sets them at its compile, ``_Wrapped.compile``): the backward must be compiled to
        take them. NOTE: a program given an array of another layout than it was compiled for
        reads its memory as its own layout (jax 0.10, CPU): a double backward through a
        convolution, whose residual XLA laid out (0, 2, 1), got wrong second derivatives."""
        self._formats_read = True
        if self._auto_layouts and self.kept_formats is None:
            formats = [k.format for k in kept]
            if any(not _row_major(f) for f in formats):
                self.kept_formats = formats

    def residuals(self, kept: list, seed, diff: Sequence, rest: Sequence) -> Residuals:
        inputs = [seed if d is None else (diff if d else rest)[i] for d, i in self._fetch]
        return Residuals(kept, inputs, self.layout)

    def trace(self, seed, diff, rest) -> _TracedForward:
        """``jax.jit(...).trace`` of the forward, its residual output described as ``Residuals``."""
        return _TracedForward(self, self._jitted.trace(seed, diff, rest), seed, diff, rest)

    def lower(self, seed, diff, rest):
        return self._jitted.lower(seed, diff, rest)


class _TracedForward:
    """A traced forward whose ``out_info`` describes the residuals as ``Forward`` returns them;
    ``lower().compile()`` gives an executable that returns them so too."""

    def __init__(self, fwd: Forward, traced, seed, diff, rest) -> None:
        self._fwd, self._traced = fwd, traced
        douts, aux, kept = traced.out_info
        inputs = [_struct(seed if d is None else (diff if d else rest)[i]) for d, i in fwd._fetch]
        self.out_info = (douts, aux, Residuals(list(kept), inputs, fwd.layout))

    def lower(self, *args, **kwargs) -> _Wrapped:
        return _Wrapped(self._fwd, self._traced.lower(*args, **kwargs))

    def __getattr__(self, name: str):
        return getattr(self._traced, name)


class _Wrapped:
    """A lowered or compiled forward (``jax.stages``) whose call returns ``Residuals``."""

    def __init__(self, fwd: Forward, stage) -> None:
        self._fwd, self._stage = fwd, stage
        self.exe_key: str | None = None  # the compiled stage's key in the persistent cache
        self._direct = None  # the compiled stage's call, once it ran (``direct_call``)

    def compile(self) -> _Wrapped:
        compiled, key = _persistent.compile_any(
            self._stage, self._fwd.compiler_options, self._fwd.device
        )
        douts, aux, kept = compiled.output_formats
        if not all(_row_major(f) for f in (*douts, *aux)):  # torch reads them as row-major
            raise RuntimeError(
                "torch2xla internal error: a training forward returns an output in a layout "
                "other than row-major; please report this with the model (workaround: "
                "options={'residual_layouts': 'default'})"
            )
        formats = list(kept)
        if any(not _row_major(f) for f in formats):
            self._fwd.kept_formats = formats  # the backward is compiled to take these
        wrapped = _Wrapped(self._fwd, compiled)
        wrapped.exe_key = key
        return wrapped

    def __call__(self, seed, diff: Sequence, rest: Sequence):
        call = self._direct
        if call is None:
            douts, aux, kept = self._stage(seed, diff, rest)
            self._direct = direct_call(self._stage)
        else:
            douts, aux, kept = call(seed, diff, rest)
        return douts, aux, self._fwd.residuals(kept, seed, diff, rest)

    def steady(self) -> tuple | None:
        """What a steady caller runs instead of this call (``_autograd._Plan.steady``): the
        executable's C++ call, the input positions the residuals hold (-1: the seed), and
        ``(kept, inputs) -> Residuals``; None until it ran."""
        layout = self._fwd.layout
        if self._direct is None or layout is None:
            return None
        return self._direct, layout.input_pos, functools.partial(Residuals, layout=layout)

    def __getattr__(self, name: str):
        return getattr(self._stage, name)


def _row_major(fmt) -> bool:
    order = getattr(fmt.layout, "major_to_minor", None)
    return order is None or tuple(order) == tuple(range(len(order)))


def _struct(x) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype)


def apply_vjp(res: Residuals, cts):
    """The input gradients of the vjp closure ``res`` for the cotangents ``cts`` (half-precision
    sums accumulated in float32, ``_half_sums``; an ``Absent`` cotangent a symbolic zero)."""
    return float32_sums(_pullback(res.vjp_fn()))(cts)


def _apply_split(kept, inputs, cts, layout):
    return float32_sums(_pullback(layout.rebuild(kept, inputs)))(cts)


def _pullback(vjp_fn: Callable) -> Callable:
    """``vjp_fn`` taking ``Absent`` cotangents: the outputs a backward does not go through
    get symbolic zeros, so that their derivatives are not computed (``0 * inf``, NaN)."""
    return functools.partial(pullback, vjp_fn)


_NOT_USABLE = "Some donated buffers were not usable"


class Backward:
    """``(Residuals, cotangents, donate=False) -> input gradients``; with ``donate`` the
    computed residuals are given to the program (they are deleted by the call).

    Each variant is called through its ahead-of-time compiled executable, which accepts the
    input views as numpy arrays (a parameter's first calls on CPU) and as ``jax.Array``s alike
    (``jax.jit`` would compile once for each kind); arguments it rejects go through the jit.
    The computed residuals are taken in the layouts ``forward`` returns them in (a residual in
    another layout, from a forward compiled again for other arguments, is relaid by JAX).
    """

    def __init__(
        self,
        forward: Forward | None = None,
        pack_limit: int | None = None,
        split: Callable[[int], int | None] | None = None,
    ) -> None:
        self._forward = forward
        # Freed graphs: bytes of residuals per segment of a split backward, by their total
        # (``_split.policy``); the SplitBackward once decided (False: one program).
        self._split_policy = split
        self._split: _split.SplitBackward | bool | None = None if split else False
        self._keep = None  # jax.jit of apply_vjp
        self._donate = None  # jax.jit of _apply_split for the forward's layout, donating
        self._compiled: dict[bool, Any] = {}
        self._direct: dict[bool, Any] = {}  # their calls, once they ran (``direct_call``)
        # NOTE: each executable takes the cotangents' pytree structure it was compiled for,
        # which holds the outputs whose cotangents are ``Absent``; JAX rejects a call with
        # another (``TypeError``, before it runs: the jit then traces for it).
        self.absent: dict[bool, tuple[int, ...]] = {}  # per variant, its absent outputs
        self.exe_keys: dict[bool, str | None] = {}  # per variant, its persistent cache key
        self._pack_limit = pack_limit
        # How the gradients are packed (``_pack``), known once traced; None: they are not.
        self.packing: _pack.Packing | None = None
        # Called once, when the freed graph's backward (one program or the split) is compiled
        # (the persistent cache records the signature then: ``torch2xla/runtime/_stored.py``).
        self.on_compiled: Callable[[], None] | None = None

    def _compiled_freed(self) -> None:
        hook, self.on_compiled = self.on_compiled, None
        if hook is not None:
            hook()

    def _packed(self, grads: Sequence) -> Sequence:
        """(traced) The gradients as the program returns them: those of at most
        ``pack_limit`` bytes packed (the packing is recorded for the caller to undo)."""
        if self._pack_limit is None:
            return grads
        packing = self.packing = _pack.plan(
            [(g.shape, g.dtype) for g in grads], range(len(grads)), self._pack_limit
        )
        return grads if packing is None else packing.pack(grads)

    def _backward_retained(self, res: Residuals, cts):
        return self._packed(apply_vjp(res, cts))

    def _backward_freed(self, kept, inputs, cts, layout):
        return self._packed(_apply_split(kept, inputs, cts, layout))

    def _jitted(self, layout: _Layout, donate: bool):
        """The jit of one variant, built at its first use: after the forward was compiled,
        whose residual layouts it takes."""
        fwd = self._forward
        formats = fwd.kept_formats if fwd is not None else None
        options = fwd.compiler_options if fwd is not None else None
        if donate:
            if self._donate is None:
                shardings = {"in_shardings": (formats, None, None)} if formats else {}
                self._donate = jax.jit(
                    functools.partial(self._backward_freed, layout=layout),
                    donate_argnums=(0,),
                    keep_unused=True,  # (as the forward's)
                    compiler_options=options,
                    **shardings,
                )
            return self._donate
        if self._keep is None:
            shardings = (
                {"in_shardings": (Residuals(formats, None, layout), None)} if formats else {}
            )
            self._keep = jax.jit(
                self._backward_retained, keep_unused=True, compiler_options=options, **shardings
            )
        return self._keep

    def _args(self, res: Residuals, cts, donate: bool) -> tuple:
        return (res.kept, res.inputs, cts) if donate else (res, cts)

    def steady(self) -> Callable | None:
        """The freed graph's backward as a steady caller runs it (``_autograd._Plan.
        steady_bwd``): the executable's C++ call, ``(kept, inputs, cotangents) ->
        gradients``, once it ran; None before, and where the backward is split."""
        return None if self._split is not False else self._direct.get(True)

    def ready(self) -> tuple[int, ...] | None:
        """Per gradient, the number of segments of the split backward that must run before it
        is known (``_split.SplitBackward.ready``); () where a freed graph's backward is one
        program, None until that is decided."""
        split = self._split
        if split is None:
            return None
        return split.ready if isinstance(split, _split.SplitBackward) else ()

    def __call__(self, res: Residuals, cts, donate: bool = False):
        """The gradients; for a freed graph whose backward is split, a ``_split.Run`` that
        hands them out segment by segment."""
        if donate and self._split is not False:
            split = self._split if self._split is not None else self._decide_split(res, cts)
            # (cut for the absent outputs of the first freed call; other calls run one program)
            if split is not False and split.absent == absent(cts):
                return split(res.kept, res.inputs, cts)
        args = self._args(res, cts, donate)
        call = self._direct.get(donate)
        if call is not None:
            try:
                return call(*args)
            except TypeError:  # arguments unlike the first call's kinds: the jit takes them
                return self._fallback(res, args, donate)
        exe = self._compiled.get(donate)
        if exe is None:
            # (inside x64 as every trace: callers may skip it, ``_Plan.bare_backward``)
            # (XLA reuses a donated buffer only for an output of its shape and frees the
            # others when the call ends, as without donation; JAX warns about those)
            with x64(), no_stack_capture(), quiet(_NOT_USABLE):
                exe, self.exe_keys[donate] = _persistent.compile_any(
                    self.lower(res, cts, donate), *self._target()
                )
                self._compiled[donate], self.absent[donate] = exe, absent(cts)
            if donate:
                self._compiled_freed()
        try:
            grads = exe(*args)
        except TypeError:  # arguments unlike the first call's kinds: the jit takes them
            return self._fallback(res, args, donate)
        self._direct[donate] = direct_call(exe)
        return grads

    def _fallback(self, res: Residuals, args: tuple, donate: bool):
        with x64(), no_stack_capture(), quiet(_NOT_USABLE):  # (traced: inside x64)
            return self._jitted(res.layout, donate)(*args)

    def _target(self) -> tuple[dict | None, jax.Device | None]:
        """The compiler options and the device of the programs (for the persistent cache)."""
        fwd = self._forward
        return (None, None) if fwd is None else (fwd.compiler_options, fwd.device)

    def decide_split(self, res: Residuals, cts) -> None:
        """Decides, where not done yet, whether a freed graph's backward is split (``ready``
        tells after), from the first forward's residuals (``cts``: arrays or
        ``ShapeDtypeStruct``s)."""
        if self._split is None:
            self._decide_split(res, cts)

    def _decide_split(self, res: Residuals, cts):
        """At the first freed call: a SplitBackward where the policy asks for segments and the
        backward has at least two, else False (one program)."""
        total = sum(getattr(x, "nbytes", 0) for x in res.kept)
        schedule = self._split_policy(total)
        split = False
        if schedule is not None:
            fwd = self._forward
            with no_stack_capture():
                # (unpacked: each segment packs the gradients it computes)
                split = _split.SplitBackward(
                    functools.partial(_apply_split, layout=res.layout),
                    res.kept,
                    res.inputs,
                    cts,
                    schedule,
                    kept_formats=fwd.kept_formats if fwd is not None else None,
                    compiler_options=fwd.compiler_options if fwd is not None else None,
                    device=fwd.device if fwd is not None else None,
                    pack_limit=self._pack_limit,
                )
            if len(split.segments) < 2:
                split = False
            elif self._pack_limit is not None and self.packing is None:
                # how the one program (a retained graph's) packs them, as its trace would say
                metas = split.out_metas
                self.packing = _pack.plan(metas, range(len(metas)), self._pack_limit)
        self._split = split
        if split is not False:
            self._compiled_freed()
        return split

    def trace(self, res: Residuals, cts):
        return self._jitted(res.layout, False).trace(res, cts)

    def lower(self, res: Residuals, cts, donate: bool = False):
        """The lowered backward as a retained (``donate=False``) or freed graph runs it."""
        if not donate:
            return self._jitted(res.layout, False).lower(res, cts)
        with quiet(_NOT_USABLE):
            return self._jitted(res.layout, True).lower(res.kept, res.inputs, cts)


def differentiated(fn: Callable) -> Callable:
    """``fn`` as training differentiates it: layout copies are recomputed, not kept."""
    return jax.checkpoint(fn, policy=saveable, prevent_cse=False)


__all__ = ["Backward", "Forward", "Residuals", "apply_vjp", "differentiated", "saveable"]
