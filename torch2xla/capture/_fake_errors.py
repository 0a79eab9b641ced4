"""Errors Dynamo's fake run raises while tracing (shapes or dtypes eager rejects): a graph
break at the op, so that eager runs it and raises its own error from the user's line.

Dynamo runs every op it traces on fake tensors. Where the op's fake (meta) kernel raises (an
``mm`` of mismatched inner sizes, operands that do not broadcast, ``view`` of a tensor whose
strides cannot take the shape, ``reshape`` to another number of elements, ``cat`` of
mismatched sizes, a float tensor as an index), Dynamo raises its own ``TorchRuntimeError``
("RuntimeError when making fake tensor call ... got RuntimeError('a and b must have same
reduction dim...')"), before any backend runs: the meta kernel's words, not eager's ("mat1
and mat2 shapes cannot be multiplied (2x3 and 4x2)"), and always a RuntimeError where eager
raises an ``IndexError``, ``ValueError`` or ``TypeError``. Dynamo makes this error from a
graph break that it turns into an error (``_wrap_graph_break_with_torch_runtime_err``).
Errors of other types (an ``IndexError`` of ``x[pos]``, ``ValueError``) leave the fake run as
the meta kernel wrote them, which names a symbol where the value changes between calls
(``index s24 is out of bounds``: Dynamo traces a changing int as a size symbol).

``install`` has both be the graph break for frames compiled with torch2xla: the graph
before the op compiles as usual, the op runs in eager PyTorch and raises eager's error, type
and message, with the user's line in its traceback (and computes eager's value where the
meta kernel refuses what eager's kernel takes). Under ``fullgraph=True`` (one graph asked
for: no graph break) and other backends, Dynamo's error is raised as before; Dynamo's own
exceptions and ``AssertionError`` (its internal checks) pass through.
"""

from __future__ import annotations

import contextlib
import functools

from torch2xla.capture import _device_checks, _empty_calls

# what eager's kernels raise for values and arguments they refuse, besides RuntimeError (which
# Dynamo itself turns into its error, handled where it does)
_EAGER_ERRORS = (IndexError, ValueError, TypeError, NotImplementedError, ArithmeticError)


def _ours(compiler_fn) -> bool:
    """Whether Dynamo's ``compiler_fn`` (wrapped by its debug wrapper and ``torch.compile``'s)
    is torch2xla's backend."""
    seen = 0
    while compiler_fn is not None and seen < 8:
        if getattr(compiler_fn, "__module__", "").startswith("torch2xla."):
            return True
        if getattr(compiler_fn, "compiler_name", None) == "xla":
            return True
        inner = getattr(compiler_fn, "__wrapped__", None) or getattr(
            compiler_fn, "compiler_fn", None
        )
        if inner is None and isinstance(compiler_fn, functools.partial):
            inner = compiler_fn.func
        compiler_fn, seen = inner, seen + 1
    return False


def _breaks(tx) -> bool:
    """Whether a graph break may stand for the error in the frame ``tx`` traces: torch2xla's
    frame, not compiled as one graph, and not inside the body of a higher-order op (``torch.cond``
    refuses a graph break there with its own error, where eager's ``cond`` raises Dynamo's)."""
    if tx is None or tx.one_graph or getattr(tx, "error_on_graph_break", False):
        return False
    tracer = getattr(tx.output, "current_tracer", None)
    if tracer is None or getattr(tracer, "parent", None) is not None:
        return False
    return _ours(getattr(tx.output, "compiler_fn", None))


def _current_tx():
    from torch._dynamo.symbolic_convert import InstructionTranslator

    try:
        return InstructionTranslator.current_tx()
    except AttributeError:  # (no frame being traced)
        return None


@functools.cache
def install() -> None:
    """Patch Dynamo's conversion of a fake run's graph break into its error, and its fake run
    (left as they are where the installed torch lays its internals out otherwise)."""
    try:
        from torch._dynamo import utils
        from torch._dynamo.exc import TorchDynamoException, unimplemented
        from torch._dynamo.symbolic_convert import InstructionTranslator
    except ImportError:
        return
    wrap = getattr(utils, "_wrap_graph_break_with_torch_runtime_err", None)
    fake_value = getattr(utils, "_get_fake_value_impl", None)
    if wrap is None or fake_value is None or not hasattr(InstructionTranslator, "current_tx"):
        return

    @functools.wraps(wrap)
    def graph_break_in_our_frames(gb_fn):
        if _breaks(_current_tx()):
            gb_fn()  # raises Dynamo's graph break (Unsupported), the fake error its cause
        return wrap(gb_fn)

    _device_checks.install()

    @functools.wraps(fake_value)
    def fake_value_breaking_at_errors(node, tx, *args, **kwargs):
        ours = tx is not None and _ours(getattr(tx.output, "compiler_fn", None))
        try:
            # (in torch2xla's frames the fake run also refuses the devices eager's CUDA
            # kernels refuse: a CPU 0-d tensor beside CUDA ones where the op checks)
            with _device_checks.checking() if ours else contextlib.nullcontext():
                result = fake_value(node, tx, *args, **kwargs)
            # (an empty size eager refuses and the fake run takes: ``_empty_calls``)
            refused = _empty_calls.refused(node, result) if ours else None
            if refused is not None and _breaks(_current_tx()):
                unimplemented(
                    gb_type=f"{type(refused).__name__} of eager for an empty size",
                    context=f"{node.op} {node.target}",
                    explanation=f"torch2xla: the call runs in eager PyTorch, which raises its "
                    f"error: {refused}",
                    hints=[],
                    from_exc=refused,
                )
            return result
        except _EAGER_ERRORS as e:
            if isinstance(e, TorchDynamoException) or not _breaks(_current_tx()):
                raise
            unimplemented(
                gb_type=f"{type(e).__name__} when making fake tensor call",
                context=f"{node.op} {node.target}",
                explanation=f"torch2xla: the op runs in eager PyTorch, which raises its error: {e}",
                hints=[],
                from_exc=e,
            )

    utils._wrap_graph_break_with_torch_runtime_err = graph_break_in_our_frames
    utils._get_fake_value_impl = fake_value_breaking_at_errors
