"""The ``torch2xla`` logger, its switches, and the recompile-limit warning.

Two switches turn the logs on. ``TORCH2XLA_LOG=info`` (or ``debug``) is ours. ``TORCH_LOGS``
is torch.compile's convention and works the same: ``TORCH_LOGS="torch2xla"`` logs every compile
and recompile, ``"+torch2xla"`` adds each compile stage (debug), and ``TORCH_LOGS="recompiles"``
shows torch2xla's per-signature recompiles (a new size of a dynamic graph: Dynamo does not trace
again, so its own ``recompiles`` log is silent) beside Dynamo's. ``configure`` reads
``TORCH2XLA_LOG`` when the first graph is compiled: importing torch2xla touches no logger.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading

import torch

from torch2xla._errors import warn

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


class IntArgumentWarning(UserWarning):
    """A graph compiles one program per value of an int argument: it uses the int as a size (or
    otherwise than as a value), so each value is a constant of its program."""


class RecompileLimitWarning(UserWarning):
    """Dynamo hit its recompile limit for a frame compiled with ``backend="xla"``: from then on
    the frame runs in eager PyTorch."""


def configure_from_env() -> None:
    """``TORCH2XLA_LOG=info`` (or ``1``) logs compiles and recompiles to stderr; ``debug`` more."""
    # (TORCH_LOGS="torch2xla" needs nothing of ours: torch sets up the logger of any
    # importable module it names, as torch._logging.set_logs(modules={"torch2xla": ...}) does.)
    value = os.environ.get(LOG_ENV, "").strip().lower()
    if value in _OFF:
        return
    level = _LEVELS.get(value)
    if level is None:
        warn(
            f"torch2xla: {LOG_ENV}={value!r} is not one of {sorted(set(_LEVELS) | {'0'})}; "
            "logging stays off",
            UserWarning,
        )
        return
    if not log.handlers:  # (TORCH_LOGS="torch2xla" gave it torch's handler already)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        handler._torch2xla = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    log.setLevel(level)


_configured = False


def configure() -> None:
    """Set up logging once, when the first graph is compiled (``GraphGuards``), not on import:
    ``TORCH2XLA_LOG``'s handler, and the filter that turns Dynamo's recompile-limit message
    about our frames into a ``RecompileLimitWarning``."""
    global _configured
    if _configured:
        return
    _configured = True
    configure_from_env()
    install_recompile_limit_filter()


_recompiles: logging.Logger | None = None


def compile_log(first: bool) -> logging.Logger:
    """The logger of a compile: ``torch2xla``; a recompile (``first`` False) goes to torch's
    ``recompiles`` artifact (``torch2xla.__recompiles``) when ``TORCH_LOGS`` turns it on."""
    global _recompiles
    if first or not torch._logging._internal.log_state.is_artifact_enabled("recompiles"):
        return log
    if _recompiles is None:
        _recompiles = torch._logging.getArtifactLogger("torch2xla", "recompiles")
        if not _recompiles.hasHandlers():  # torch sets up handlers only for its own logs
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(torch._logging._internal.TorchLogsFormatter())
            _recompiles.addHandler(handler)
    return _recompiles


# -- Dynamo's recompile limit ------------------------------------------------------------------
# Frames that produced a graph for this backend, as Dynamo names them in its limit message:
# "'forward' (/path/model.py:12)".
_frames: set[str] = set()
_frames_lock = threading.Lock()
_LIMIT_PREFIX = "torch._dynamo hit config."


def frame_name(code) -> str:
    """The frame as Dynamo's messages name it: ``'forward' (/path/model.py:12)``."""
    return f"'{code.co_name}' ({code.co_filename}:{code.co_firstlineno})"


def frame_label(code, f_locals: dict) -> str:
    """The user's function or module that Dynamo compiled, for logs and reports.

    ``'Net.forward' (/path/model.py:12)``; ``'Net.forward' (/path/model.py:15, after a graph
    break)`` for the rest of a function after a graph break. Dynamo compiles a ``torch.nn``
    module (an ``nn.Sequential``) through a wrapper frame of its own (``inner`` in
    ``torch/_dynamo/external_utils.py``): the label names the module it wraps,
    ``'Sequential' (torch.nn.Sequential)``.
    """
    wrapped = f_locals.get("fn") if is_dynamo_wrapper(code) else None
    if isinstance(wrapped, torch.nn.Module):
        cls = type(wrapped)
        if getattr(torch.nn, cls.__name__, None) is cls:
            return f"'{cls.__name__}' (torch.nn.{cls.__name__})"
        wrapped = cls.forward
    inner = getattr(wrapped, "__code__", None)
    if inner is not None:
        code = inner
    name = getattr(code, "co_qualname", code.co_name)  # (Python 3.11+)
    where = f"{code.co_filename}:{code.co_firstlineno}"
    resumed = _RESUME.fullmatch(code.co_name)
    if resumed:  # Dynamo's function for the rest of a frame after a graph break
        owner = name.rpartition(".")[0]
        name = f"{owner}.{resumed[1]}" if owner else resumed[1]
        where = f"{code.co_filename}:{resumed[2]}, after a graph break"
    return f"'{name}' ({where})"


_RESUME = re.compile(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)")


def is_dynamo_wrapper(code) -> bool:
    from torch._dynamo import external_utils

    return code.co_name == "inner" and code.co_filename == external_utils.__file__


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
            warn(
                f"torch2xla: Dynamo hit torch._dynamo.config.{limit_type} ({limit}) for "
                f"{func}: from now on calls that miss its compiled graphs run in eager "
                f"PyTorch, not XLA. Last recompile reason: {reason}. To avoid this, mark the "
                "changing sizes dynamic (torch.compile(..., dynamic=True) or "
                "torch._dynamo.mark_dynamic(x, dim)) and optionally bucket them "
                "(options={'buckets': 'pow2'}), pass changing Python numbers as tensors, or "
                f"raise torch._dynamo.config.{limit_type}.",
                RecompileLimitWarning,
            )
        return True


_FILTER = _RecompileLimitFilter()


def install_recompile_limit_filter() -> None:
    logger = logging.getLogger(torch._dynamo.convert_frame.__name__)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
