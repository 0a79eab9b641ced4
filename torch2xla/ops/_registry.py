"""The one lowering registry: ``dict[OpOverload, Lowering]``, plus the per-node context."""

from __future__ import annotations

import contextvars
import dataclasses
import linecache
import os
import re
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import jax
import torch

Lowering = Callable[..., Any]


class _Lowerings(dict):
    """``dict[OpOverload, Lowering]`` that runs a deferred registration (``defer``) the first
    time it is asked about an op of that registration's namespace."""

    def _load(self, op: Any) -> None:
        namespace = getattr(op, "namespace", None)
        if namespace in _DEFERRED_NAMESPACES:
            # Another thread waits here until the loader has registered everything; the
            # loader's own lookups (register's check) find nothing left to load.
            with _LOAD_LOCK:
                loader = _DEFERRED.pop(namespace, None)
                if loader is not None:
                    loader()

    def __contains__(self, op: Any) -> bool:
        self._load(op)
        return super().__contains__(op)

    def __missing__(self, op: Any) -> Lowering:
        self._load(op)
        if super().__contains__(op):
            return super().__getitem__(op)
        raise KeyError(op)

    def get(self, op: Any, default: Any = None) -> Any:
        self._load(op)
        return super().get(op, default)


LOWERINGS: dict[torch._ops.OpOverload, Lowering] = _Lowerings()
# Where each registered lowering lives, ``torch2xla/ops/_elementwise.py:123`` (``where_is``).
_WHERE: dict[torch._ops.OpOverload, str] = {}
_DEFERRED: dict[str, Callable[[], None]] = {}
_DEFERRED_NAMESPACES: set[str] = set()
_LOAD_LOCK = threading.RLock()


def defer(namespace: str, loader: Callable[[], None]) -> None:
    """Run ``loader`` (which registers lowerings) when an op of ``namespace`` is first looked
    up: for the ops of optional libraries (torchvision), whose op objects exist only once the
    user has imported the library; torch2xla never imports it."""
    if namespace in _DEFERRED_NAMESPACES:
        raise RuntimeError(f"torch2xla: a second deferred registration for {namespace}")
    _DEFERRED_NAMESPACES.add(namespace)
    _DEFERRED[namespace] = loader


def register(*ops: Any) -> Callable[[Lowering], Lowering]:
    """Register ``fn`` as the lowering of each op overload in ``ops``.

    An ``OpOverloadPacket`` (``aten.add``) registers all of its overloads that are not
    registered explicitly elsewhere; use explicit overloads whenever their schemas differ.
    A second registration of the same overload raises at import.
    """

    def deco(fn: Lowering) -> Lowering:
        filename, line, own = _registered_at(fn, sys._getframe(1))
        for op in ops:
            overloads = (
                [getattr(op, name) for name in op.overloads()]
                if isinstance(op, torch._ops.OpOverloadPacket)
                else [op]
            )
            for ov in overloads:
                if ov in LOWERINGS:
                    raise RuntimeError(f"torch2xla: a second lowering registered for {ov}")
                LOWERINGS[ov] = fn
                _WHERE[ov] = _location(filename, line if own else _row(filename, line, ov, op))
        if ops:
            _name_after(fn, ops[0])
        return fn

    return deco


def _made(fn: Any) -> bool:
    """Whether ``fn`` was made by a factory (``_pointwise(jnp.abs)``): a closure."""
    return isinstance(fn, types.FunctionType) and (
        "<locals>" in fn.__qualname__ or hasattr(fn, "_torch2xla_op")
    )


def _name_after(fn: Any, op: Any) -> None:
    """Name a factory-made lowering after its op (``abs``, not ``_pointwise.<locals>.lowering``)
    in reprs, registry dumps and tracebacks. Functions of their own keep their names."""
    if not _made(fn) or hasattr(fn, "_torch2xla_op"):
        return
    name = getattr(op, "overloadpacket", op).__name__
    fn.__name__ = fn.__qualname__ = name
    fn._torch2xla_op = str(op)  # type: ignore[attr-defined]
    code = fn.__code__  # (shared by the factory's closures: each gets a renamed copy)
    names = {"co_name": name, **({"co_qualname": name} if hasattr(code, "co_qualname") else {})}
    fn.__code__ = code.replace(**names)


def _registered_at(fn: Any, frame: types.FrameType) -> tuple[str, int, bool]:
    """(file, line, whether it is the function's own) of a lowering: a function's ``def``;
    for a factory-made one or a callable object, its registration (out of helpers such as
    ``_unary`` that register for their caller: up to the first frame of another file or a
    module's top level)."""
    code = getattr(fn, "__code__", None)
    if isinstance(fn, types.FunctionType) and not _made(fn) and code is not None:
        return code.co_filename, code.co_firstlineno, True
    while (
        frame.f_code.co_name != "<module>"
        and frame.f_back is not None
        and frame.f_back.f_code.co_filename == frame.f_code.co_filename
    ):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno, False


def _row(filename: str, line: int, ov: Any, op: Any) -> int:
    """The line at or above a registration ``line`` that names ``ov`` (``aten.eq.Tensor``),
    the ``op`` it was registered through or its packet (``aten.eq``): a table's row, for a
    loop that registers a table; else ``line``. The search stops at the enclosing top-level ``def``/``class``."""
    named = dict.fromkeys((ov, op, ov.overloadpacket))  # aten.eq.Tensor, aten.eq
    names = [re.compile(re.escape(str(o)) + r"(?!\w)") for o in named]
    for n in range(line, max(line - _TABLE_ROWS, 0), -1):
        text = linecache.getline(filename, n)
        if any(p.search(text) for p in names):
            return n
        if n < line and text.startswith(("def ", "class ", "@")):
            break
    return line


_TABLE_ROWS = 200


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _location(filename: str, line: int) -> str:
    """``torch2xla/ops/_elementwise.py:123`` (relative to the package's folder when inside)."""
    path = os.path.abspath(filename)
    if path.startswith(_ROOT + os.sep):
        path = os.path.relpath(path, _ROOT)
    return f"{path}:{line}"


def where_is(op: torch._ops.OpOverload) -> str:
    """Where the lowering of ``op`` lives, as ``file:line``.

    Args:
        op: an ATen (or other) op overload, e.g. ``torch.ops.aten.relu.default``, or a
            higher-order op (``torch.ops.higher_order.cond``).

    Returns:
        ``torch2xla/ops/_elementwise.py:123``: the lowering's ``def``, or for one made by a
        factory (a table of pointwise ops), the line that registers it. A lowering registered
        with ``torch2xla.register_lowering`` gives its function's file and line.

    Raises:
        TypeError: ``op`` is not an op overload (``aten.add``: pick ``aten.add.Tensor``).
        KeyError: ``op`` has no lowering (``torch2xla.ops.NOT_LOWERED`` may say why).

    Example::

        >>> torch2xla.ops.where_is(torch.ops.aten.relu.default)
        'torch2xla/ops/_elementwise.py:278'
    """
    if not isinstance(op, torch._ops.OpOverload | torch._ops.HigherOrderOperator):
        raise TypeError(
            f"torch2xla.ops.where_is: expected an op overload such as torch.ops.aten.add.Tensor, "
            f"got {type(op).__name__} {op}"
        )
    fn = LOWERINGS.get(op)  # (loads a deferred registration of op's namespace)
    if fn is None:
        raise KeyError(f"torch2xla: {op} has no lowering")
    where = _WHERE.get(op)
    if where is not None:
        return where
    user = getattr(fn, "_torch2xla_user_fn", fn)  # torch2xla.register_lowering
    code = getattr(user, "__code__", None)
    if code is None:
        raise KeyError(f"torch2xla: the lowering of {op} ({user!r}) has no source location")
    return _location(code.co_filename, code.co_firstlineno)


# The ``node.meta`` keys that the analysis passes (``torch2xla/capture/_annotate.py``) set
# before translation: a lowering reads its arguments and its own node, never its neighbours;
# what it needs to know of them is here. A lowering works without them (a graph translated
# unannotated), taking the choice that is right for any graph.
AFTER_CONVOLUTION = "torch2xla.after_convolution"
"""relu, hardtanh and training batch norms: bool, whether the first argument is a
convolution's output through at most ``CONVOLUTION_PATH`` elementwise, batch-norm or getitem
nodes (absent: False)."""
KEPT_BY_USERS = "torch2xla.kept_by_users"
"""relu: ``"none"``, ``"some"`` or ``"every"``: how many of the node's users keep its output,
unconverted, for their backward (a convolution or matrix product reading it directly; absent:
``"none"``)."""
UNEXPANDED = "torch2xla.unexpanded"
"""bmm: None, or ``(operand, source, first)``: the operand (0 or 1) is the graph node
``source`` expanded over the batch (through views that keep its shape); ``first``: take
``source[0]`` (``source`` has a batch dim of 1). Absent: None."""
STORAGE_ORDER = "torch2xla.storage_order"
"""as_strided, as_strided_copy, as_strided_scatter, _reshape_alias_copy: the first argument's
dims ordered outermost-first in memory (from its strides), or None where it is not dense in
memory (overlapping or with gaps). Absent: a contiguous argument."""
STORAGE_OFFSET = "torch2xla.storage_offset"
"""as_strided, as_strided_copy, as_strided_scatter: the first argument's storage offset (an
explicit ``storage_offset`` counts from its storage's start, the lowering from the argument's
first element), or None where it is symbolic. Absent: 0."""
ON_CUDA = "torch2xla.on_cuda"
"""_assert_async (an op without an output to take the device from): bool, whether its
argument is on a CUDA device. Absent: the node's output's device (``LoweringContext.on_cuda``)."""
CONVOLUTION_PATH = 8  # how many elementwise/batch-norm nodes back a relu looks for a convolution


@dataclasses.dataclass
class LoweringContext:
    """What a lowering may ask about the node it is lowering."""

    node: torch.fx.Node
    rng: RngState | None
    env: dict | None = None  # the values of the nodes lowered so far
    checks: list | None = None  # this trace's runtime checks (``_checks``); None: checks off

    @property
    def checking(self) -> bool:
        """Whether runtime checks are on (``check`` registers them)."""
        return self.checks is not None

    def check(
        self,
        failed: Any,
        message: str,
        value: Any = None,
        error: type | None = None,
        explain: Callable | None = None,
    ) -> None:
        """Register a runtime check of this node: ``failed`` (a traced bool scalar) is True
        where eager raises ``error`` (an ``OpError`` class; default ``OpError``) with
        ``message``, whose ``{value}`` is filled with ``value`` (a traced integer scalar), or
        what ``explain(value)`` returns (message, error class). The program reports it after
        it ran (``torch2xla/runtime/_checks.py``); a no-op when checks are off.
        """
        if self.checks is None:
            return
        from torch2xla._errors import OpError
        from torch2xla.runtime._checks import Check, Registered

        check = Check(self.node, error or OpError, message, explain)
        self.checks.append(Registered(check, failed, value))

    def value(self, node: torch.fx.Node) -> Any:
        """The lowered value of an earlier node of the graph (``node.args`` hold nodes)."""
        if self.env is None or node not in self.env:
            raise LookupError(f"torch2xla: no lowered value for {node}")
        return self.env[node]

    @property
    def out(self) -> Any:
        """The node's fake output value (tensor, tuple, ...): ground truth for dtypes/shapes."""
        return self.node.meta.get("val")

    @property
    def on_cuda(self) -> bool:
        """Whether the node runs on a CUDA device (``ON_CUDA`` where a pass recorded it, else
        its first tensor output's device)."""
        if ON_CUDA in self.node.meta:
            return self.node.meta[ON_CUDA]
        outs = self.out if isinstance(self.out, list | tuple) else (self.out,)
        for out in outs:
            device = getattr(out, "device", None)
            if device is not None:
                return device.type == "cuda"
        return False

    def next_key(self) -> jax.Array:
        if self.rng is None:
            raise RuntimeError("torch2xla: random op lowered without an RNG key")
        return self.rng.next_key()


class RngState:
    """Derives one independent PRNG key per random node from the per-call seed."""

    def __init__(self, seed: jax.Array) -> None:
        typed_key = jax.dtypes.issubdtype(getattr(seed, "dtype", None), jax.dtypes.prng_key)
        self._key = seed if typed_key else jax.random.key(seed)
        self._count = 0

    def next_key(self) -> jax.Array:
        self._count += 1
        return jax.random.fold_in(self._key, self._count)


_CURRENT: contextvars.ContextVar[LoweringContext] = contextvars.ContextVar("torch2xla_lowering")


def ctx() -> LoweringContext:
    """The context of the node being lowered (valid only inside a lowering)."""
    return _CURRENT.get()


def lowering_on_cuda() -> bool:
    """Whether the node being lowered runs on CUDA; False outside a lowering (a constant
    folded at trace time follows the CPU's rule)."""
    c = _CURRENT.get(None)
    return c is not None and c.on_cuda


def set_ctx(c: LoweringContext) -> contextvars.Token:
    return _CURRENT.set(c)


def reset_ctx(token: contextvars.Token) -> None:
    _CURRENT.reset(token)
