"""``torch2xla::stop_gradient``: where eager autograd stops tracking a value.

The ATen graph is exported without autograd, so ``.detach()``, ``.data`` and values computed
under ``torch.no_grad()`` reach it as plain aliases or ops. ``torch2xla.capture._stop_gradient`` marks
those points in the Dynamo graph with this op, which survives export and lowers to
``lax.stop_gradient``, so ``jax.vjp`` gives the gradients eager autograd gives.
"""

from __future__ import annotations

import torch
from jax import lax

from torch2xla.ops._registry import register


@torch.library.custom_op("torch2xla::stop_gradient", mutates_args=())
def stop_gradient(self: torch.Tensor) -> torch.Tensor:
    """A copy of ``self`` that autograd does not track (eager ``self.detach().clone()``)."""
    return self.detach().clone()


@stop_gradient.register_fake
def _(self: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(self)


def _no_gradient(ctx, inputs, output) -> None:
    # as ``detach()``: the eager kernel's output is not tracked at all (not tracked with a
    # zero gradient), where it runs in eager PyTorch
    ctx.mark_non_differentiable(output)


stop_gradient.register_autograd(lambda ctx, grad: None, setup_context=_no_gradient)


@stop_gradient.register_vmap
def _(info, in_dims, self: torch.Tensor):
    # elementwise: the batched value goes through as it is
    return stop_gradient(self), in_dims[0]


@register(torch.ops.torch2xla.stop_gradient.default)
def stop_gradient_lowering(self):
    return lax.stop_gradient(self)
