"""The ``torch2xla`` logger, its environment switch, and the recompile-limit warning."""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings

import torch

LOG_ENV = "TORCH2XLA_LOG"
log = logging.getLogger("torch2xla")

_LEVELS = {
    "1": logging.INFO,
    "on": logging.INFO,
    "true": logging.INFO,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "warning": logging.WARNING,
}
_OFF = ("", "0", "off", "false", "no")


class BucketingWarning(UserWarning):
    """Bucketing was asked for, but a dynamic dimension cannot be padded safely."""


class RecompileLimitWarning(UserWarning):
    """Dynamo hit its recompile limit for a frame compiled with ``backend="xla"``: from then on
    the frame runs in eager PyTorch."""


def configure_from_env() -> None:
    """``TORCH2XLA_LOG=info`` (or ``1``) logs compiles and recompiles to stderr; ``debug`` more."""
    value = os.environ.get(LOG_ENV, "").strip().lower()
    if value in _OFF:
        return
    level = _LEVELS.get(value)
    if level is None:
        warnings.warn(
            f"torch2xla: {LOG_ENV}={value!r} is not one of {sorted(set(_LEVELS) | {'0'})}; "
            "logging stays off",
            stacklevel=2,
        )
        return
    if not any(getattr(h, "_torch2xla", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        handler._torch2xla = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    log.setLevel(level)


# -- Dynamo's recompile limit ------------------------------------------------------------------
# Frames that produced a graph for this backend, as Dynamo names them in its limit message:
# "'forward' (/path/model.py:12)".
_frames: set[str] = set()
_frames_lock = threading.Lock()
_LIMIT_PREFIX = "torch._dynamo hit config."


def frame_name(code) -> str:
    return f"'{code.co_name}' ({code.co_filename}:{code.co_firstlineno})"


def note_frame(name: str) -> None:
    with _frames_lock:
        _frames.add(name)


class _RecompileLimitFilter(logging.Filter):
    """Turns Dynamo's recompile-limit log line about one of our frames into a warning.

    Dynamo logs the limit once, then runs the frame eagerly for good (silently, for most
    users); the warning says that XLA no longer runs it and what to do instead.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg, args = record.msg, record.args
        ours = isinstance(args, tuple) and len(args) >= 4 and args[2] in _frames
        if ours and isinstance(msg, str) and msg.startswith(_LIMIT_PREFIX):
            limit_type, limit, func, reason = args[:4]
            warnings.warn(
                f"torch2xla: Dynamo hit torch._dynamo.config.{limit_type} ({limit}) for "
                f"{func}: from now on calls that miss its compiled graphs run in eager "
                f"PyTorch, not XLA. Last recompile reason: {reason}. To avoid this, mark the "
                "changing sizes dynamic (torch.compile(..., dynamic=True) or "
                "torch._dynamo.mark_dynamic(x, dim)) and optionally bucket them "
                "(options={'buckets': 'pow2'}), pass changing Python numbers as tensors, or "
                f"raise torch._dynamo.config.{limit_type}.",
                RecompileLimitWarning,
                stacklevel=2,
            )
        return True


_FILTER = _RecompileLimitFilter()


def install_recompile_limit_filter() -> None:
    logger = logging.getLogger(torch._dynamo.convert_frame.__name__)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
