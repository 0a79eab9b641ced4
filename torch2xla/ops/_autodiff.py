"""``torch2xla::stop_gradient``: where eager autograd stops tracking a value, and
``torch2xla::straight_through``: where eager writes a value it does not record.

The ATen graph is exported without autograd, so ``.detach()``, ``.data`` and values computed
under ``torch.no_grad()`` reach it as plain aliases or ops. ``torch2xla.capture._stop_gradient`` marks
those points in the Dynamo graph with this op, which survives export and lowers to
``lax.stop_gradient``, so ``jax.vjp`` gives the gradients eager autograd gives.

An in-place write that eager autograd does not record (under ``no_grad``, or through
``.data`` / ``.detach()``) changes a tracked tensor's value but not its place in the autograd
graph: a later use is differentiated as if the tensor still held the value it had before the
write. ``straight_through(value, source)`` is ``value`` with the gradient of ``source``.

Some ops reach the ATen graph as composites where eager runs one kernel whose backward kernel
it does not differentiate (``multi_margin_loss``, ``multilabel_margin_loss``: "derivative for
aten::multi_margin_loss_backward is not implemented"). ``once_differentiable(self, backward)``
marks the composite's input: identity in JAX (the first-order gradient is the composite's),
while eager's autograd of the ATen graph, which the double backward's connectivity and errors
come from (``autodiff/_connected.py``), makes the gradient require grad and raise eager's error
on a backward through it.
"""

from __future__ import annotations

import jax
import torch
from jax import lax

from torch2xla.ops import _vmap
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


@torch.library.custom_op("torch2xla::straight_through", mutates_args=())
def straight_through(value: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``value`` (a copy) whose gradient goes to ``source`` unchanged (same shape and dtype):
    a tracked tensor after a write eager autograd did not record, ``source`` its value
    before the write."""
    return value.detach().clone()


@straight_through.register_fake
def _(value: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(value)


straight_through.register_autograd(
    lambda ctx, grad: (None, grad), setup_context=lambda ctx, inputs, output: None
)


@straight_through.register_vmap
def _(info, in_dims, value: torch.Tensor, source: torch.Tensor):
    if in_dims[0] == in_dims[1]:  # elementwise: the batched values go through as they are
        return straight_through(value, source), in_dims[0]
    n = info.batch_size
    return straight_through(
        _vmap.front(value, in_dims[0], n), _vmap.front(source, in_dims[1], n)
    ), 0


@jax.custom_jvp
def _straight_through(value, source):
    return value


@_straight_through.defjvp
def _(primals, tangents):
    return primals[0], tangents[1]


@register(torch.ops.torch2xla.straight_through.default)
def straight_through_lowering(value, source):
    return _straight_through(value, source)


@torch.library.custom_op("torch2xla::once_differentiable", mutates_args=())
def once_differentiable(self: torch.Tensor, backward: str) -> torch.Tensor:
    """A copy of ``self`` whose gradient cannot be differentiated again: eager's error names
    the ATen op ``backward`` (a loss whose ``*_backward`` kernel eager does not differentiate,
    computed here as a composite that JAX would differentiate twice)."""
    return self.clone()


@once_differentiable.register_fake
def _(self: torch.Tensor, backward: str) -> torch.Tensor:
    return torch.empty_like(self)


class _NotTwice(torch.autograd.Function):
    """The gradient ``grad``, as eager's backward kernel's result: it requires grad where
    ``self`` does (create_graph), and a backward through it raises eager's error."""

    @staticmethod
    def forward(ctx, grad, self, backward: str):
        ctx.backward = backward
        return grad.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for {ctx.backward} is not implemented")


def _save_self(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])
    ctx.backward = inputs[1]


def _once_backward(ctx, grad):
    (self,) = ctx.saved_tensors
    return _NotTwice.apply(grad, self, ctx.backward), None


once_differentiable.register_autograd(_once_backward, setup_context=_save_self)


@once_differentiable.register_vmap
def _(info, in_dims, self: torch.Tensor, backward: str):
    return once_differentiable(self, backward), in_dims[0]


@register(torch.ops.torch2xla.once_differentiable.default)
def once_differentiable_lowering(self, backward):
    return self
