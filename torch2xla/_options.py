"""The options a user passes through ``torch.compile(..., backend="xla", mode=, options=)``."""

from __future__ import annotations

import dataclasses
from typing import Any

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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
        buckets: pad dynamic dimensions to bucket sizes, ``"pow2"`` or a list of sizes, where
            the graph proves padding cannot change real results (see ``torch2xla/guards``).
    """

    strict: bool = False
    remat: bool = False
    cache_size: int = 64
    mode: str | None = None
    passes: tuple = ()
    dump_dir: str | None = None
    eager_ops: frozenset = frozenset()
    buckets: Any = None

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
