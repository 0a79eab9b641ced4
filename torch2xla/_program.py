"""One compiled XLA program: a functional ATen graph traced to JAX, jitted, and called on torch
tensors. Training calls go through ``_autograd.XlaFunction``."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import torch

from torch2xla import _pack, _split
from torch2xla._autograd import TrainFns, apply_differentiable, build_train_fns
from torch2xla._interop import (
    ViewCache,
    jax_device,
    no_stack_capture,
    to_jax,
    to_torch,
    to_torch_cpu,
    x64,
)
from torch2xla._interpret import to_jax_function, uses_rng
from torch2xla._profile import profiled
from torch2xla._remat import checkpointed_function
from torch2xla.guards import _persistent


def _is_float(meta) -> bool:
    return isinstance(meta, torch.Tensor) and (meta.dtype.is_floating_point or meta.dtype.is_complex)


_NO_PLACEMENT = contextlib.nullcontext()

# Dtypes that JAX truncates to 32 bits outside ``x64()``.
_WIDE = frozenset({torch.int64, torch.uint64, torch.float64, torch.complex128})


def _program_device(gm: torch.fx.GraphModule, example_args: Sequence) -> jax.Device:
    """The JAX device a program runs on: that of its tensor inputs (CPU tensors run on JAX's CPU
    device even where JAX's default backend is a GPU), else that of its outputs."""
    for a in example_args:
        if isinstance(a, torch.Tensor):
            return jax_device(a.device)
    out = gm.graph.find_nodes(op="output")[0].args[0]
    for o in out if isinstance(out, list | tuple) else (out,):
        val = o.meta.get("val") if isinstance(o, torch.fx.Node) else None
        if isinstance(val, torch.Tensor):
            return jax_device(val.device)
    return jax_device(torch.device("cpu"))


class _Aot:
    """A jitted function called through its ahead-of-time compiled executable.

    The first call compiles what ``precompile`` traced (the executable it compiled, from JAX's
    caches), or else its own arguments; later calls go to the executable directly. NOTE:
    ``jax.jit`` keys its executables on the kind of each argument, and a cached parameter
    arrives as a numpy view on the first calls and as a ``jax.Array`` later (``ViewCache``):
    called through the jit, the program would compile twice. A ``Compiled`` accepts both
    kinds. It rejects arguments of other types or layouts than it was compiled for
    (``TypeError``, ``ValueError``, raised before it runs anything), which the jit then handles.
    """

    __slots__ = ("compiled", "device", "exe_key", "jitted", "options", "traced")

    def __init__(self, jitted, device: jax.Device | None = None,
                 options: dict | None = None) -> None:
        self.jitted = jitted
        self.compiled = None
        self.traced = None
        # Where the executable runs and the jit's compiler options: part of its key in the
        # persistent cache (``exe_key``, None where it is not stored).
        self.device, self.options = device, options
        self.exe_key: str | None = None

    def adopt(self, compiled, key: str | None) -> None:
        """Use ``compiled`` (what ``precompile`` compiled from ``trace``) from the first call."""
        self.compiled, self.exe_key, self.traced = compiled, key, None

    def trace(self, *args):
        """``jax.jit(...).trace``, remembered for the first call (which may pass arguments of
        another kind than the ones traced ahead)."""
        traced = self.traced = self.jitted.trace(*args)
        return traced

    def __getattr__(self, name: str):
        # What the wrapped function says about itself (``_residuals.Forward.layout``).
        if name in _Aot.__slots__:
            raise AttributeError(name)
        return getattr(self.jitted, name)

    def __call__(self, *args):
        compiled = self.compiled
        if compiled is None:
            with x64(), no_stack_capture():  # traced as precompile traces (callers may skip x64)
                traced = self.traced or self.jitted.trace(*args)
                compiled, self.exe_key = _persistent.compile_any(
                    traced.lower(), self.options, self.device
                )
                self.compiled = compiled
            self.traced = None
        try:
            return compiled(*args)
        except (TypeError, ValueError):  # arguments unlike the first call's: the jit takes them
            with x64():
                with no_stack_capture():  # traced and compiled here, into JAX's caches
                    self.jitted.lower(*args).compile()
                # NOTE: executed outside (see no_stack_capture). Not through the Compiled just
                # made: jax 0.10 drops the hoisted constants of some programs (linalg.pinv) when
                # a Compiled is called, which raises the TypeError that brought us here.
                return self.jitted(*args)


def _draw_seed() -> np.uint32:
    # Drawn from torch's default generator, so torch.manual_seed makes XLA's randomness repeat.
    return np.uint32(torch.randint(0, 2**31 - 1, ()).item())


class XlaProgram:
    """Runs an ATen graph through XLA.

    Args:
        gm: functional ATen graph; its placeholders are the program's inputs.
        example_args: one call's arguments; non-tensor arguments are baked in as constants.
        output_requires_grad: per output, whether eager would track it (None: every float output).
        remat: checkpoint activations per module call when differentiating (``_remat``).
        compiler_options: XLA compiler options for every program it compiles (``Options``).
        auto_layouts: XLA chooses the layouts of training residuals (``_residuals``).
        packable: outputs that only torch2xla reads (the new values of mutated inputs), which
            may reach torch packed with others (``_pack``).
        split_backward: the backend option of that name (``_split.policy``).
    """

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_args: Sequence,
        output_requires_grad: Sequence[bool] | None = None,
        remat: bool = False,
        compiler_options: dict | None = None,
        auto_layouts: bool = True,
        packable: Sequence[int] = (),
        split_backward: Any = "auto",
    ) -> None:
        self.gm = gm
        self.split_backward = split_backward
        self.compiler_options = compiler_options
        self.auto_layouts = auto_layouts
        self.device = _program_device(gm, example_args)
        with x64(), jax.default_device(self.device):  # graph constants land where the program runs
            fn = to_jax_function(gm)
        self.rng = uses_rng(gm)
        self.tensor_pos = tuple(i for i, a in enumerate(example_args) if isinstance(a, torch.Tensor))
        statics = {i: a for i, a in enumerate(example_args) if not isinstance(a, torch.Tensor)}
        n_args = len(example_args)

        def bind(fn):  # fn(seed, *all args) -> flat_fn(seed, *tensor args)
            def flat_fn(seed, *tensors):
                it = iter(tensors)
                full = [statics[i] if i in statics else next(it) for i in range(n_args)]
                outs = fn(seed, *full)
                return outs if self.packing is None else self.packing.pack(outs)

            return flat_fn

        self._flat_fn = flat_fn = bind(fn)
        self._bind = bind
        out_metas = gm.graph.find_nodes(op="output")[0].args[0]
        # A fused partition with one output returns it bare; the program always returns a list.
        self.single_output = not isinstance(out_metas, list | tuple)
        if self.single_output:
            out_metas = (out_metas,)
        metas = [o.meta.get("val") if isinstance(o, torch.fx.Node) else o for o in out_metas]
        if output_requires_grad is None:
            output_requires_grad = [True] * len(metas)
        diff_out = [
            i for i, (m, rg) in enumerate(zip(metas, output_requires_grad)) if rg and _is_float(m)
        ]
        self._cuda = self.device.platform != "cpu"
        # diff_out and num_outputs describe the outputs as the (packed) function returns them.
        self.packing = _pack.plan(
            [(m.shape, m.dtype) if isinstance(m, torch.Tensor) else ((), None) for m in metas],
            [i for i in packable if i not in diff_out], _pack.limit_for(self._cuda),
        )
        if self.packing is None:
            self.diff_out, self.num_outputs = tuple(diff_out), len(metas)
        else:
            self.diff_out = tuple(self.packing.index(i) for i in diff_out)
            self.num_outputs = len(self.packing.rest) + len(self.packing.groups)
        self.remat = remat
        # keep_unused: a program waits for every argument, so a fence argument (see ViewCache)
        # orders it even where the graph does not read that tensor.
        self._infer = _Aot(jax.jit(flat_fn, keep_unused=True, compiler_options=compiler_options),
                           self.device, compiler_options)
        self._all_tensors = self.tensor_pos == tuple(range(n_args))
        self._views = ViewCache(len(self.tensor_pos))
        self.to_torch = to_torch if self._cuda else to_torch_cpu
        # Arguments JAX has not placed (numpy views, first calls) go to JAX's default device:
        # name ours only where that default is another device (a GPU machine, CPU tensors).
        default = jax.config.jax_default_device or jax.devices()[0]
        self._place = default != self.device
        # Calls run inside JAX's config contexts (x64, placement) only where they change
        # something: a 64-bit input or output (cotangents are outputs' dtypes), or a device
        # other than JAX's default. Tracing and compiling always run inside x64.
        dtypes = [a.dtype for a in (*example_args, *metas) if isinstance(a, torch.Tensor)]
        self.wide = any(d in _WIDE for d in dtypes)
        self.scoped = self._place or self.wide
        self._train_cache: dict[tuple[int, ...], TrainFns] = {}
        self._remat_fn = None

    # -- inference -------------------------------------------------------------------------
    # The hot path: everything that can be decided once is decided in __init__.
    @profiled  # a torch.profiler range named after the graph; one check when not profiling
    def __call__(self, args: Sequence) -> list[torch.Tensor]:
        tensors = args if self._all_tensors else [args[i] for i in self.tensor_pos]
        if self.diff_out and torch.is_grad_enabled():
            # (float or complex, by torch's rule)
            diff_in = tuple([k for k, t in enumerate(tensors) if t.requires_grad])
            if diff_in:
                seed = _draw_seed() if self.rng else None
                outs = list(apply_differentiable(self, diff_in, seed, tensors))
                return outs if self.packing is None else self.packing.unpack(outs, None)
        seed = _draw_seed() if self.rng else None
        if self.scoped:
            # (a context object of JAX's config holds its previous value: one per call)
            with x64(), self.placement():
                outs = self._infer(seed, *self.jax_inputs(tensors))
        else:
            outs = self._infer(seed, *self.jax_inputs(tensors))
        convert = self.to_torch
        if self.packing is None:
            return [convert(o) for o in outs]
        return self.packing.unpack([convert(o) for o in outs], None)

    def placement(self):
        """The context every call of this program's executables runs in (and the ahead-of-time
        compile too: JAX keys executables on the default-device context, so using it on one
        path and not the other compiles the program twice)."""
        # (a context object of JAX's config holds its previous value: one per call, not shared)
        return jax.default_device(self.device) if self._place else _NO_PLACEMENT

    def jax_inputs(self, tensors: Sequence[torch.Tensor]) -> list:
        """Zero-copy JAX views of the program's tensor inputs, parameters imported once
        (``ViewCache``) and ordered against torch's current CUDA stream. Call inside ``x64()``
        where ``self.scoped``."""
        views, fence = self._views(tensors)
        if fence and self._cuda:
            views[0] = to_jax(tensors[0])
        return views

    # -- training --------------------------------------------------------------------------
    def train_fns(self, diff_in: tuple[int, ...]) -> TrainFns:
        """Jitted forward-with-vjp and backward for the inputs ``diff_in`` being differentiated."""
        fns = self._train_cache.get(diff_in)
        if fns is None:
            fns = self._train_cache[diff_in] = build_train_fns(
                self.train_flat_fn(), len(self.tensor_pos), diff_in, self.diff_out,
                self.num_outputs, recompute_layout=not self.remat,
                compiler_options=self.compiler_options, auto_layouts=self.auto_layouts,
                pack_limit=_pack.limit_for(self._cuda),
                split=_split.policy(self.split_backward, self._cuda), device=self.device,
            )
            # parameters change kind after the first calls (see _Aot)
            fns.fwd = _Aot(fns.fwd, self.device, self.compiler_options)
        return fns

    def train_flat_fn(self):
        """``flat_fn(seed, *tensors)`` as training differentiates it (remat: checkpointed)."""
        if not self.remat:
            return self._flat_fn
        if self._remat_fn is None:  # activation checkpointing per module call
            with x64(), jax.default_device(self.device):
                self._remat_fn = self._bind(checkpointed_function(self.gm))
        return self._remat_fn
