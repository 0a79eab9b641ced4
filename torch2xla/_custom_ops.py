"""``torch2xla.register_lowering``: a JAX implementation for the user's own ``torch.library`` op.

A custom op (``torch.library.custom_op``) is opaque to torch2xla: without a lowering it runs in
eager PyTorch between XLA partitions (a ``FallbackWarning``), or strict mode refuses it. Its
author gives it a JAX implementation here, which enters the op registry beside torch2xla's own
lowerings; XLA then compiles it with the rest of the graph, and training differentiates it with
``jax.vjp`` like every other lowering.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jax
import torch

from torch2xla._custom_grads import gradient_differs
from torch2xla._errors import LoweringError
from torch2xla.ops._linalg_extra import NO_JAX_GRADIENT
from torch2xla.ops._registry import LOWERINGS, ctx
from torch2xla.runtime._interop import jax_dtype

F = TypeVar("F", bound=Callable[..., Any])

# Namespaces whose ops torch2xla lowers itself (or that torch decomposes before it sees them).
_OURS = frozenset({"aten", "prims", "torch2xla"})

# The overloads registered through register_lowering: only these may be registered again.
_USER_OPS: set[torch._ops.OpOverload] = set()


def register_lowering(op: Any, fn: F | None = None) -> Any:
    """Give the custom op ``op`` a JAX implementation, so that XLA runs it.

    Args:
        op: the op, as ``torch.library.custom_op`` returned it, or ``torch.ops.mylib.my_op``
            (every overload) or one overload (``torch.ops.mylib.my_op.default``). Functional
            ops only (``mutates_args=()``).
        fn: the implementation: called with the op's arguments in schema order, JAX arrays in
            place of tensors (other arguments as they are), it returns JAX arrays of the
            shapes and dtypes the op's fake implementation gives (checked when a graph is
            compiled). It must be traceable by ``jax.jit`` (``jax.numpy``/``jax.lax``).
            Omit it to use ``register_lowering`` as a decorator.

    Returns:
        ``fn`` (or, without ``fn``, a decorator that registers and returns its function).

    Gradients come from JAX's differentiation of ``fn`` (use ``jax.custom_vjp`` inside it to
    match a backward registered with ``register_autograd``); where that differs from the
    registered formula on seeded example inputs of the node's shapes (a straight-through
    estimator without the ``custom_vjp``), the op runs in eager PyTorch wherever a gradient
    flows through it (a ``FallbackWarning``), so the formula is eager's. A ``custom_op`` without a
    registered autograd formula raises on the backward, as in eager PyTorch; an op defined
    with ``torch.library.Library`` and no autograd kernel runs in eager PyTorch wherever a
    gradient flows through it, where torch's autograd fallback differentiates its kernel. Registering again replaces
    the implementation for graphs compiled from then on (``torch2xla.clear_caches()``
    recompiles the others).

    Raises:
        ValueError: ``op`` is an ATen (or torch2xla) op, mutates its inputs, or is decomposed
            by torch before torch2xla sees it (a CompositeImplicitAutograd kernel).
        TypeError: ``op`` is not an op or ``fn`` is not callable.

    Example::

        @torch.library.custom_op("mylib::scaled_sin", mutates_args=())
        def scaled_sin(x: torch.Tensor, scale: float) -> torch.Tensor:
            return x.sin() * scale

        @scaled_sin.register_fake
        def _(x, scale):
            return torch.empty_like(x)

        @torch2xla.register_lowering(scaled_sin)
        def _(x, scale):
            return jnp.sin(x) * scale
    """
    overloads = _overloads(op)
    for ov in overloads:
        _check_op(ov)

    def register(impl: F) -> F:
        if not callable(impl):
            raise TypeError(
                f"torch2xla.register_lowering: the implementation of {overloads[0]} must be "
                f"callable, got {type(impl).__name__}"
            )
        for ov in overloads:
            if ov in LOWERINGS and ov not in _USER_OPS:
                raise ValueError(f"torch2xla.register_lowering: {ov} already has a lowering")
            LOWERINGS[ov] = _lowering(ov, impl, op)
            NO_JAX_GRADIENT[ov] = functools.partial(_fallback_gradient, op, ov)
            _USER_OPS.add(ov)
        return impl

    return register if fn is None else register(fn)


def is_user_lowering(lowering: Any) -> bool:
    """Whether a registry entry came from ``register_lowering``."""
    return getattr(lowering, "_torch2xla_user_fn", None) is not None


def _overloads(op: Any) -> list[torch._ops.OpOverload]:
    op = getattr(op, "_opoverload", op)  # a CustomOpDef (torch.library.custom_op)
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    raise TypeError(
        "torch2xla.register_lowering: expected an op (what torch.library.custom_op returns, "
        f"or torch.ops.<namespace>.<name>[.<overload>]), got {type(op).__name__}"
    )


def _check_op(ov: torch._ops.OpOverload) -> None:
    if ov.namespace in _OURS:
        raise ValueError(
            f"torch2xla.register_lowering: {ov} is an op torch2xla lowers itself; only your "
            "own torch.library ops take a lowering this way. To run an ATen op in eager "
            f'PyTorch instead, pass options={{"eager_ops": [torch.ops.{ov}]}}.'
        )
    if ov._schema.is_mutable:
        raise ValueError(
            f"torch2xla.register_lowering: {ov} mutates its inputs ({ov._schema}); only "
            "functional ops (mutates_args=()) can be lowered: return new tensors instead."
        )
    if torch._C._dispatch_has_kernel_for_dispatch_key(ov.name(), "CompositeImplicitAutograd"):
        raise ValueError(
            f"torch2xla.register_lowering: {ov} has a CompositeImplicitAutograd kernel, so "
            "torch decomposes it into the ops it calls before torch2xla sees it: a lowering "
            "would never be used (those ops are lowered already)."
        )


def _has_backward(op: Any, ov: torch._ops.OpOverload) -> bool:
    """Whether eager PyTorch can differentiate ``ov`` (False: its backward raises)."""
    opdef = _opdef(op, ov)
    if opdef is not None:  # torch.library.custom_op knows whether register_autograd ran
        return getattr(opdef, "_backward_fn", None) is not None
    # Other ops: an Autograd kernel of the op's own (torch.library.impl(..., "Autograd")).
    return torch._C._dispatch_has_kernel_for_dispatch_key(ov.name(), "Autograd")


def _fallback_gradient(op: Any, ov: torch._ops.OpOverload, node: torch.fx.Node) -> str | None:
    """Why a gradient through ``ov`` cannot come from its lowering (None: it can): a
    registered autograd formula that ``jax.vjp`` of the lowering does not reproduce (a
    straight-through estimator: ``_custom_grads``); an op defined with
    ``torch.library.Library`` and no autograd kernel of its own is differentiated
    in eager by torch's autograd fallback, through whatever its kernel records (a Python or
    composite kernel: its ops' gradients; an opaque one: none), with torch's warning; JAX's
    derivative of the lowering is neither, and raising (as for a ``custom_op`` without
    ``register_autograd``, whose own autograd kernel raises in eager) refused what eager runs.
    The node then runs in eager PyTorch where a gradient flows through it."""
    if _has_backward(op, ov):
        fn = getattr(LOWERINGS.get(ov), "_torch2xla_user_fn", None)
        opdef = _opdef(op, ov)
        formula = (getattr(opdef, "_backward_fn", None), getattr(opdef, "_setup_context_fn", None))
        if fn is not None and gradient_differs(ov, fn, node, formula):
            return (
                "its registered autograd formula gives other gradients than jax.vjp of its "
                "lowering (checked on example inputs): eager's formula is kept (a "
                "jax.custom_vjp in the lowering gives XLA the formula)"
            )
        return None
    if _opdef(op, ov) is not None:
        return None
    return (
        "no autograd kernel of its own: eager's autograd fallback differentiates its kernel "
        "(torch.library.register_autograd gives the lowering a backward)"
    )


def _opdef(op: Any, ov: torch._ops.OpOverload) -> Any:
    """The ``torch.library.custom_op`` definition of ``ov`` (None: another kind of op)."""
    return op if hasattr(op, "_backward_fn") else _custom_op_defs().get(ov.name())


def _custom_op_defs() -> dict:
    from torch._library import custom_ops

    return getattr(custom_ops, "OPDEFS", {})


def _lowering(ov: torch._ops.OpOverload, fn: Callable, op: Any) -> Callable:
    def lowering(*args: Any, **kwargs: Any) -> Any:
        # (asked at each compile: register_autograd may come after register_lowering)
        impl = fn if _has_backward(op, ov) else _no_backward(ov, fn)
        out = impl(*args, **kwargs)
        _check_outputs(ov, fn, out, ctx().out)
        return out

    functools.update_wrapper(lowering, fn)
    lowering._torch2xla_user_fn = fn  # type: ignore[attr-defined]
    return lowering


def _no_backward(ov: torch._ops.OpOverload, fn: Callable) -> Callable:
    """``fn`` whose backward raises eager PyTorch's error (the op has no autograd formula)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        flat, tree = jax.tree.flatten((args, kwargs))
        arrays = [i for i, a in enumerate(flat) if isinstance(a, jax.Array)]

        @jax.custom_vjp
        def op(*xs: jax.Array) -> Any:
            full = list(flat)
            for i, x in zip(arrays, xs):
                full[i] = x
            a, k = jax.tree.unflatten(tree, full)
            return fn(*a, **k)

        def fwd(*xs: jax.Array) -> tuple[Any, None]:
            return op(*xs), None

        def bwd(_: None, __: Any) -> tuple:
            raise RuntimeError(
                f"Trying to backward through {ov} but no autograd formula was registered. "
                "Please use register_autograd to add one."
            )

        op.defvjp(fwd, bwd)
        return op(*[flat[i] for i in arrays])

    return call


def _check_outputs(ov: torch._ops.OpOverload, fn: Callable, out: Any, expected: Any) -> None:
    """Raise if ``out`` differs in structure, shape or dtype from the fake output."""
    where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
    got, want = _describe(out), _describe(expected)
    if got != want:
        raise LoweringError(
            f"torch2xla: the lowering of {ov} registered with torch2xla.register_lowering "
            f"({where}) returned {got}, but the op's fake implementation gives {want}. "
            "Return JAX arrays of the op's shapes and dtypes."
        )


def _describe(value: Any) -> str:
    if isinstance(value, list | tuple):
        return f"({', '.join(_describe(v) for v in value)})"
    if isinstance(value, torch.Tensor):
        return f"{jax_dtype(value.dtype).name}{list(value.shape)}"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{dtype.name}{list(shape)}"
    return type(value).__name__
