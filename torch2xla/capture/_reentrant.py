"""A reentrant checkpoint (``checkpoint(fn, x, use_reentrant=True)``) none of whose tensor
arguments requires grad: traced as eager runs it, ``fn`` under ``torch.no_grad()`` with
eager's warning, so that its outputs do not require grad and the parameters inside get none.

Eager's reentrant checkpoint is an ``autograd.Function`` of the tensors passed to it as
arguments (not those nested in lists, not the parameters ``fn`` reads): where none requires
grad, it warns ("None of the inputs have requires_grad=True. Gradients will be None"), runs
``fn`` without recording and returns outputs that require no grad. Dynamo traces every
checkpoint as the ``tag_activation_checkpoint`` op, whose operands are the arguments and the
tensors ``fn`` reads, all alike: a parameter inside ``fn`` makes its outputs require grad and
receive gradients, with any backend. ``install`` has Dynamo trace such a call as
``_without_grad`` instead (the rest as it traces them). Keyword arguments for ``fn``, which
eager's reentrant checkpoint refuses ("Unexpected keyword arguments"), Dynamo passed on to
``fn``: such a call raises eager's ``ValueError`` instead (``_refused``).
"""

from __future__ import annotations

import functools
import warnings

import torch

_WARNING = "None of the inputs have requires_grad=True. Gradients will be None"


def _without_grad(function, *args):
    """What eager's reentrant checkpoint does where no tensor argument requires grad."""
    warnings.warn(_WARNING, UserWarning, stacklevel=2)
    with torch.no_grad():
        return function(*args)


# the keyword arguments ``checkpoint`` takes itself (the rest are for ``fn``: reentrant
# checkpoints refuse them)
_OWN = frozenset(
    {
        "use_reentrant",
        "preserve_rng_state",
        "context_fn",
        "determinism_check",
        "debug",
        "early_stop",
    }
)


def _refused(*names: str):
    """Eager's error for keyword arguments a reentrant checkpoint does not pass to ``fn``."""
    raise ValueError("Unexpected keyword arguments: " + ",".join(names))


def _reentrant(kwargs) -> bool:
    """Whether Dynamo's checkpoint call (``kwargs``: variable trackers) is reentrant, as eager
    takes ``use_reentrant`` (None: True, with eager's warning)."""
    flag = kwargs.get("use_reentrant")
    return flag is None or (flag.is_python_constant() and flag.as_python_constant() in (None, True))


def _reentrant_without_grad(args, kwargs) -> bool:
    """Whether Dynamo's checkpoint call (``args``: the function and its arguments, ``kwargs``:
    variable trackers) is reentrant, takes no keyword argument eager refuses there, and none
    of its tensor arguments requires grad."""
    flag = kwargs.get("use_reentrant")
    if flag is not None and (
        not flag.is_python_constant() or flag.as_python_constant() not in (None, True)
    ):
        return False
    if set(kwargs) - {"use_reentrant", "preserve_rng_state"}:
        return False  # (eager raises for these: Dynamo's tracing is left to say so)
    tensors = [a for a in args[1:] if a.is_tensor()]
    return not any(getattr(a, "requires_grad", True) for a in tensors)


@functools.cache
def install() -> None:
    """Patch Dynamo's tracing of ``torch.utils.checkpoint.checkpoint`` (left as it is where
    the installed torch lays its internals out otherwise)."""
    try:
        from torch._dynamo.variables import VariableTracker
        from torch._dynamo.variables.higher_order_ops import CheckpointHigherOrderVariable
    except ImportError:
        return
    name = "_call_function" if "_call_function" in vars(CheckpointHigherOrderVariable) else None
    if name is None:
        return
    traced = getattr(CheckpointHigherOrderVariable, name)

    @functools.wraps(traced)
    def call(self, tx, args, kwargs):
        extra = [k for k in kwargs if k not in _OWN]
        if args and extra and _reentrant(kwargs):  # (Dynamo passed them on to ``fn``)
            helper = VariableTracker.build(tx, _refused)
            return helper.call_function(tx, [VariableTracker.build(tx, k) for k in extra], {})
        if args and _reentrant_without_grad(args, kwargs):
            helper = VariableTracker.build(tx, _without_grad)
            return helper.call_function(tx, list(args), {})
        return traced(self, tx, args, kwargs)

    setattr(CheckpointHigherOrderVariable, name, call)
