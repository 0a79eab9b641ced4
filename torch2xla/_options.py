"""The options a user passes through ``torch.compile(..., backend="xla", mode=, options=)``."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

# What each torch.compile mode asks of XLA's compiler (DebugOptions, as ``jax.jit``'s
# ``compiler_options`` take them). XLA's CPU compiler ignores the ``xla_gpu_*`` options, so on
# CPU every mode compiles the same program. NOTE: XLA's GPU default already records runs of
# kernels into CUDA graphs ("command buffers"); "reduce-overhead" records every kind of command
# it can, however short the run, and "max-autotune" searches GEMM tilings exhaustively.
_COMMAND_BUFFERS = "FUSION,CUBLAS,CUBLASLT,CUDNN,CUSTOM_CALL,COLLECTIVES,CONDITIONAL,WHILE"
_AUTOTUNE = {"xla_gpu_autotune_level": 4, "xla_gpu_exhaustive_tiling_search": True}
_ALL_GRAPHS = {"xla_gpu_enable_command_buffer": _COMMAND_BUFFERS, "xla_gpu_graph_min_graph_size": 1}
MODE_COMPILER_OPTIONS: dict[str | None, dict[str, Any]] = {
    None: {},
    "default": {},
    "reduce-overhead": _ALL_GRAPHS,
    "max-autotune": {**_AUTOTUNE, **_ALL_GRAPHS},
    "max-autotune-no-cudagraphs": {**_AUTOTUNE, "xla_gpu_enable_command_buffer": ""},
}


@dataclasses.dataclass(frozen=True)
class Options:
    """Validated backend options.

    Attributes:
        strict: raise one error listing every unsupported op instead of running them in eager.
        remat: checkpoint activations per module call (``jax.checkpoint`` per top-level layer):
            keep only layer inputs for the backward, which recomputes the rest.
        cache_size: most compiled programs kept per graph (least recently used are dropped).
        mode: the ``torch.compile`` mode string.
        passes: graph passes run on the ATen graph before translation to JAX (see ``_passes``).
        dump_dir: directory to write each graph's FX, ATen, jaxpr, StableHLO and optimized HLO
            to (default: the ``TORCH2XLA_DUMP_DIR`` environment variable; unset: no dumps).
        eager_ops: ATen ops (overloads, or packets for all overloads) to run in eager PyTorch.
        buckets: pad dynamic dimensions to bucket sizes where the graph proves padding cannot
            change real results (see ``torch2xla/guards``), so that a graph compiles one
            program per bucket rather than per size: ``"auto"`` (the default: powers of two),
            ``"pow2"``, a list of sizes, or None (one program per size).
        residual_layouts: ``"auto"``: XLA chooses the layouts of the activations the training
            forward keeps for the backward (a convolution's NHWC output stays NHWC);
            ``"default"``: they are row-major like every other output.
        compiler_options: XLA compiler options (``DebugOptions`` fields, as
            ``jax.jit(compiler_options=)`` takes them), over those ``mode`` sets; checked when
            the options are parsed (an unknown name or a bad value raises there).
        split_backward: run the training backward as a chain of programs that free the
            residuals as they go (``_split``): ``"auto"`` on GPU when the residuals pass 256
            MiB, ``True`` always (cut as ``"auto"`` cuts: for the lowest estimated peak),
            ``False`` never, or a number: MiB of residuals per segment.
    """

    strict: bool = False
    remat: bool = False
    cache_size: int = 64
    mode: str | None = None
    passes: tuple = ()
    dump_dir: str | None = None
    eager_ops: frozenset = frozenset()
    buckets: Any = "auto"
    residual_layouts: str = "auto"
    compiler_options: tuple = ()  # sorted (name, value) pairs; see ``xla_compiler_options``
    split_backward: Any = "auto"

    def xla_compiler_options(self) -> dict[str, Any] | None:
        """What every ``jax.jit`` of this graph passes to XLA: the mode's, then the user's."""
        merged = {**MODE_COMPILER_OPTIONS[self.mode], **dict(self.compiler_options)}
        return merged or None

    @classmethod
    def parse(cls, mode: str | None = None, options: dict[str, Any] | None = None) -> Options:
        if mode not in MODES:
            raise ValueError(f"torch2xla: unknown mode {mode!r}; known modes: {MODES[1:]}")
        options = dict(options or {})
        known = sorted(f.name for f in dataclasses.fields(cls) if f.name != "mode")
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ValueError(
                f"torch2xla: unknown option(s) {unknown}; known options: {known}"
            )
        options = _normalize_debug_options(options)
        opts = cls(mode=mode, **options)
        if isinstance(opts.buckets, list):
            opts = dataclasses.replace(opts, buckets=tuple(opts.buckets))
        from torch2xla.guards import BucketSpec

        BucketSpec.parse(opts.buckets)  # raises on a bad value
        if opts.residual_layouts not in ("auto", "default"):
            raise ValueError(
                "torch2xla: residual_layouts must be 'auto' or 'default', got "
                f"{opts.residual_layouts!r}"
            )
        split = opts.split_backward
        if not (split == "auto" or isinstance(split, bool) or (
                isinstance(split, int | float) and not isinstance(split, bool) and split > 0)):
            raise ValueError(
                "torch2xla: split_backward must be 'auto', True, False or a positive number "
                f"of MiB per segment, got {split!r}"
            )
        if not isinstance(opts.cache_size, int) or opts.cache_size < 1:
            raise ValueError(f"torch2xla: cache_size must be a positive int, got {opts.cache_size!r}")
        return opts


def _normalize_debug_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate ``passes``, ``dump_dir`` and ``eager_ops`` into hashable, canonical values."""
    import os

    import torch

    if "passes" in options:
        passes = options["passes"]
        if callable(passes):
            passes = [passes]
        passes = tuple(passes)
        bad = [p for p in passes if not callable(p)]
        if bad:
            raise TypeError(
                f"torch2xla: options['passes'] must be callables taking a torch.fx.GraphModule, "
                f"got {bad!r}"
            )
        options["passes"] = passes
    if options.get("dump_dir") is not None:
        options["dump_dir"] = os.fspath(options["dump_dir"])
    if "compiler_options" in options:
        options["compiler_options"] = _check_compiler_options(options["compiler_options"])
    if "eager_ops" in options:
        ops: set = set()
        for op in options["eager_ops"]:
            if isinstance(op, torch._ops.OpOverloadPacket):
                ops.update(getattr(op, name) for name in op.overloads())
            elif isinstance(op, torch._ops.OpOverload):
                ops.add(op)
            else:
                raise TypeError(
                    "torch2xla: options['eager_ops'] takes ATen ops such as "
                    f"torch.ops.aten.sin.default or torch.ops.aten.sin, got {op!r}"
                )
        options["eager_ops"] = frozenset(ops)
    return options


def _check_compiler_options(given: Any) -> tuple:
    """``given`` as sorted (name, value) pairs, after XLA accepted them on a trivial program (so
    a misspelt option raises at the first call, not after a model's trace)."""
    if not isinstance(given, dict) or not all(isinstance(k, str) for k in given):
        raise TypeError(
            "torch2xla: options['compiler_options'] must be a dict of XLA option names to "
            f"values, e.g. {{'xla_gpu_autotune_level': 0}}, got {given!r}"
        )
    bad = {k: v for k, v in given.items() if not isinstance(v, bool | int | float | str)}
    if bad:
        raise TypeError(
            f"torch2xla: options['compiler_options'] values must be bool, int, float or str, got {bad!r}"
        )
    pairs = tuple(sorted(given.items()))
    _accepted_by_xla(pairs)
    return pairs


@functools.lru_cache(maxsize=32)
def _accepted_by_xla(pairs: tuple) -> None:
    import jax
    import numpy as np

    try:
        jax.jit(lambda x: x, compiler_options=dict(pairs)).lower(np.float32(0)).compile()
    except jax.errors.JaxRuntimeError as e:  # XLA's message names the option; ours, where from
        raise ValueError(f"torch2xla: XLA rejected options['compiler_options']: {e}") from e
