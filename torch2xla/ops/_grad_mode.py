"""Whether the backward being traced runs in grad mode: a ``create_graph`` backward, whose
gradients are differentiated again (``autodiff/_double_backward.VjpProgram`` traces under
``differentiable_backward``).

Some of eager's derivative formulas pick their computation by ``GradMode::is_enabled()``
(``cumprod_backward``, ``prod_backward``): without grad mode a cheap formula, exact in value
but whose own derivative is not the second derivative (zeros masked away); in grad mode one
whose derivative is. A derivative rule (a ``custom_jvp``'s, run while the backward is traced)
asks ``backward_grad_mode()`` to take the same one.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_GRAD_MODE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "torch2xla_backward_grad_mode", default=False
)


@contextlib.contextmanager
def differentiable_backward() -> Iterator[None]:
    """Trace the derivative rules run inside as eager's backward in grad mode."""
    token = _GRAD_MODE.set(True)
    try:
        yield
    finally:
        _GRAD_MODE.reset(token)


def backward_grad_mode() -> bool:
    """Whether the derivative rule being traced is a grad-mode (``create_graph``) backward's."""
    return _GRAD_MODE.get()
