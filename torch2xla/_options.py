"""The options a user passes through ``torch.compile(..., backend="xla", mode=, options=)``."""

from __future__ import annotations

import dataclasses
import functools
import numbers
import os
from collections.abc import Callable
from typing import Any

# "1": strict mode for every compile of the process (Options.strict)
STRICT_ENV = "TORCH2XLA_STRICT"
# The spellings of an environment switch (``env_flag``), any case.
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def env_flag(name: str, default: bool | None) -> bool | None:
    """The switch ``name`` of the environment: True for 1/on/true/yes, False for
    0/off/false/no (any case), ``default`` where unset or empty; another value warns once
    (naming the variable and what it takes) and gives ``default``, so a misspelt switch is
    never read silently (``TORCH2XLA_STRICT=true`` was not strict)."""
    value = os.environ.get(name, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    if value:
        _unknown_switch(name, value, default)
    return default


@functools.cache
def _unknown_switch(name: str, value: str, default: bool | None) -> None:
    import warnings

    said = {True: "on", False: "off", None: "its default"}[default]
    warnings.warn(
        f"torch2xla: {name}={value!r} is not one of {'/'.join(_ON)} or {'/'.join(_OFF)}; "
        f"{name} stays {said}",
        UserWarning,
        stacklevel=4,
    )


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


class OptionError(ValueError, TypeError):
    """A backend option or mode that torch2xla does not take: names the option, the value given
    and the values accepted. A ``ValueError`` and a ``TypeError``, whichever the value got wrong.

    ``torch.compile`` hands the options to the backend when Dynamo compiles the first frame,
    so they are checked on the compiled function's first call, before anything is traced.
    """

    __module__ = "torch2xla"


class _Rejected(Exception):
    """Raised by a check's ``convert``; the argument, if any, says more than ``accepts``."""


@dataclasses.dataclass(frozen=True)
class Check:
    """How one option is checked.

    Attributes:
        accepts: the values it takes, in words (the error quotes it).
        convert: the canonical (hashable) value of a given one; raises ``_Rejected`` otherwise.
    """

    accepts: str
    convert: Callable[[Any], Any]


def _option(default: Any, accepts: str, convert: Callable[[Any], Any]) -> Any:
    return dataclasses.field(default=default, metadata={"check": Check(accepts, convert)})


def _flag(value: Any) -> bool:
    if isinstance(value, bool):  # not "false", not 1: a string or int means a mistake
        return value
    raise _Rejected


def _one_of(*choices: Any) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        for c in choices:
            if value is c or (type(value) is type(c) and value == c):
                return c
        raise _Rejected

    return convert


def _positive_int(value: Any) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0:
        return int(value)
    raise _Rejected


def _passes(value: Any) -> tuple:
    passes = (value,) if callable(value) else value
    if isinstance(passes, list | tuple) and all(callable(p) for p in passes):
        return tuple(passes)
    raise _Rejected


def _directory(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
    raise _Rejected


def _aten_ops(value: Any) -> frozenset:
    import torch

    ops = (
        (value,)
        if isinstance(value, torch._ops.OpOverload | torch._ops.OpOverloadPacket)
        else value
    )
    if not isinstance(ops, list | tuple | set | frozenset):
        raise _Rejected
    out: set = set()
    for op in ops:
        if isinstance(op, torch._ops.OpOverloadPacket):
            out.update(getattr(op, name) for name in op.overloads())
        elif isinstance(op, torch._ops.OpOverload):
            out.add(op)
        else:
            raise _Rejected(f"{op!r} is not an ATen op")
    return frozenset(out)


def _buckets(value: Any) -> Any:
    from torch2xla.guards import BucketSpec

    try:
        BucketSpec.parse(value)
    except ValueError:
        raise _Rejected from None
    return tuple(value) if isinstance(value, list | tuple) else value


def _split_backward(value: Any) -> Any:
    if (isinstance(value, str) and value == "auto") or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Real) and value > 0:
        return value
    raise _Rejected


def _compiler_options(given: Any) -> tuple:
    """``given`` as sorted (name, value) pairs, after XLA accepted them on a trivial program (so
    a misspelt option raises at the first call, not after a model's trace)."""
    if not isinstance(given, dict) or not all(isinstance(k, str) for k in given):
        raise _Rejected
    bad = {k: v for k, v in given.items() if not isinstance(v, bool | int | float | str)}
    if bad:
        raise _Rejected(f"not a bool, int, float or str: {bad!r}")
    pairs = tuple(sorted(given.items()))
    _accepted_by_xla(pairs)
    return pairs


@dataclasses.dataclass(frozen=True)
class Options:
    """Validated backend options.

    Each field is one option, with its ``Check`` (``dataclasses.fields(Options)[i].metadata``):
    a new option is one line here, and ``parse`` rejects a value its check does not accept.

    Attributes:
        strict: raise one error listing every unsupported op instead of running them in eager,
            and raise where a compile fails instead of running the graph in eager (default:
            True where the ``TORCH2XLA_STRICT`` environment variable is ``1``, for every
            compile of the process, as Dynamo's minifier needs).
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
        checks: raise eager's error for the inputs eager rejects by their values (an index out
            of range, an integer division by zero; ``torch2xla/runtime/_checks.py``), after the
            program ran: ``"auto"`` in programs on the CPU, ``True`` on GPUs too (each call
            then waits for the device to read the result), ``False`` never (such inputs give
            unspecified values, as XLA clamps or fills).
    """

    strict: bool = _option(False, "True or False", _flag)
    remat: bool = _option(False, "True or False", _flag)
    cache_size: int = _option(64, "a positive int", _positive_int)
    mode: str | None = _option(None, f"one of {', '.join(map(repr, MODES))}", _one_of(*MODES))
    passes: tuple = _option(
        (), "a callable taking a torch.fx.GraphModule, or a list of them", _passes
    )
    dump_dir: str | None = _option(None, "None or a directory (str or os.PathLike)", _directory)
    eager_ops: frozenset = _option(
        frozenset(),
        "a list of ATen ops such as torch.ops.aten.sin.default or torch.ops.aten.sin",
        _aten_ops,
    )
    buckets: Any = _option(
        "auto", "'auto', 'pow2', None or a non-empty list of positive ints", _buckets
    )
    residual_layouts: str = _option("auto", "'auto' or 'default'", _one_of("auto", "default"))
    compiler_options: tuple = _option(  # sorted (name, value) pairs; see xla_compiler_options
        (), "a dict of XLA option names to bool, int, float or str values", _compiler_options
    )
    split_backward: Any = _option(
        "auto", "'auto', True, False or a positive number of MiB per segment", _split_backward
    )
    checks: Any = _option("auto", "'auto', True or False", _one_of("auto", True, False))

    def xla_compiler_options(self) -> dict[str, Any] | None:
        """What every ``jax.jit`` of this graph passes to XLA: the mode's, then the user's."""
        merged = {**MODE_COMPILER_OPTIONS[self.mode], **dict(self.compiler_options)}
        return merged or None

    @classmethod
    def parse(cls, mode: str | None = None, options: dict[str, Any] | None = None) -> Options:
        """``torch.compile``'s ``mode`` and ``options`` as Options; raises ``OptionError``
        naming the option, the value and the values accepted."""
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise OptionError(
                "torch2xla: options must be a dict of option names to values, got "
                f"{options!r} ({type(options).__name__})"
            )
        checks = {f.name: f.metadata["check"] for f in dataclasses.fields(cls)}
        known = sorted(name for name in checks if name != "mode")
        unknown = sorted(set(options) - set(known), key=str)
        if unknown:
            raise OptionError(f"torch2xla: unknown option(s) {unknown}; known options: {known}")
        values = {}
        for name, value in {**options, "mode": mode}.items():
            check = checks[name]
            try:
                values[name] = check.convert(value)
            except _Rejected as e:
                given = f"{value!r} ({type(value).__name__})"
                if e.args:
                    given += f": {e.args[0]}"
                if name == "mode":
                    message = f"unknown mode {given}; mode must be {check.accepts}"
                else:
                    message = f"option {name} must be {check.accepts}, got {given}"
                raise OptionError(f"torch2xla: {message}") from e.__cause__
        if "strict" not in options and env_flag(STRICT_ENV, False):
            values["strict"] = True
        return cls(**values)


@functools.lru_cache(maxsize=32)
def _accepted_by_xla(pairs: tuple) -> None:
    import jax
    import numpy as np

    from torch2xla.runtime._interop import no_stack_capture

    try:
        with no_stack_capture():  # the executable is cached: it keeps no frame of the caller's
            jax.jit(lambda x: x, compiler_options=dict(pairs)).lower(np.float32(0)).compile()
    except jax.errors.JaxRuntimeError as e:  # XLA's message names the option; ours, where from
        raise _Rejected(f"XLA rejected it: {e}") from e
