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
        remat: rematerialize activations in the backward (``jax.checkpoint``) to save memory.
        cache_size: most compiled programs kept per graph (least recently used are dropped).
        mode: the ``torch.compile`` mode string.
        buckets: pad dynamic dimensions to bucket sizes, ``"pow2"`` or a list of sizes, where
            the graph proves padding cannot change real results (see ``torch2xla/guards``).
    """

    strict: bool = False
    remat: bool = False
    cache_size: int = 64
    mode: str | None = None
    buckets: Any = None

    @classmethod
    def parse(cls, mode: str | None = None, options: dict[str, Any] | None = None) -> "Options":
        if mode not in MODES:
            raise ValueError(f"torch2xla: unknown mode {mode!r}; known modes: {MODES[1:]}")
        options = dict(options or {})
        known = sorted(f.name for f in dataclasses.fields(cls) if f.name != "mode")
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ValueError(
                f"torch2xla: unknown option(s) {unknown}; known options: {known}"
            )
        opts = cls(mode=mode, **options)
        if isinstance(opts.buckets, list):
            opts = dataclasses.replace(opts, buckets=tuple(opts.buckets))
        from torch2xla.guards import BucketSpec

        BucketSpec.parse(opts.buckets)  # raises on a bad value
        if not isinstance(opts.cache_size, int) or opts.cache_size < 1:
            raise ValueError(f"torch2xla: cache_size must be a positive int, got {opts.cache_size!r}")
        return opts
