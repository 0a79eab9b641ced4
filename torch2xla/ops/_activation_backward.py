"""Activations' backward ops (``aten.*_backward``) whose eager CPU kernels disagree with
themselves at NaN, and the derivatives of their forward lowerings, as one function per op
(``*_grad``) that both share.

AOT puts the backward ops into the graphs we lower wherever a derivative is taken inside the
compiled function (``torch.func.grad``/``vjp``/``jacrev``/``jacfwd``/``hessian``, a vmapped
grad, ``torch.autograd.grad(create_graph=True)``); torch's decompositions of them take one
rule at NaN everywhere. Eager's kernels take their scalar loop's rule on some elements and
their vectorized loop's on others (``_loops``, whose ``walk`` reads the backward op's
``self``, its argument ``arg``):

| op | scalar loop at NaN | vectorized loop at NaN |
|---|---|---|
| hardtanh_backward, hardshrink_backward, softshrink_backward | the gradient | 0 |
| elu_backward (``is_result`` or not) | the gradient times ``scale`` | NaN |
| hardswish_backward | the gradient | NaN |
| logit_backward with eps | NaN | 0 |
| logit_backward at -0 | +inf * the gradient | the gradient / -0 |

(The ``*_grad`` functions live with their forwards, in ``_activations`` and ``_derivatives``.)
Other
activations' backward ops (threshold, leaky_relu, gelu, silu, mish, softplus, tanh, sigmoid,
log_sigmoid, hardsigmoid) take one rule in both loops and keep their decompositions.
"""

from __future__ import annotations

import jax.numpy as jnp
from torch._ops import ops

from torch2xla.ops import _loops
from torch2xla.ops._activations import (
    SHRINK_KERNELS,
    _elu_kernel,
    _hardtanh_kernel,
    _logit_kernel,
    elu_grad,
    hardtanh_grad,
    logit_grad,
    shrink_grad,
)
from torch2xla.ops._common import as_dtype, opmath_dtype, out_dtype
from torch2xla.ops._derivatives import HARDSWISH_KERNEL, hardswish_partial
from torch2xla.ops._registry import ctx, register

aten = ops.aten


def _compute(*arrays):
    """The arrays in the dtype eager's kernels compute the node's result in (float32 for half
    precision: they convert, compute and round once)."""
    dtype = opmath_dtype(out_dtype())
    return tuple(as_dtype(a, dtype) for a in arrays)


@register(aten.hardtanh_backward.default)
def hardtanh_backward(grad_output, self, min_val, max_val):
    lo, hi = float(min_val), float(max_val)
    vec = _loops.mask(
        _loops.walk(_hardtanh_kernel, lo, hi, arg=1, operands=(0, 1)), grad_output, self
    )
    return as_dtype(hardtanh_grad(self, grad_output, lo, hi, vec), out_dtype())


@register(aten.hardshrink_backward.default, aten.softshrink_backward.default)
def shrink_backward(grad_out, self, lambd):
    kernel = SHRINK_KERNELS[ctx().node.target is aten.softshrink_backward.default]
    vec = _loops.mask(_loops.walk(kernel, float(lambd), arg=1, operands=(0, 1)), grad_out, self)
    return as_dtype(shrink_grad(self, grad_out, float(lambd), vec), out_dtype())


@register(aten.elu_backward.default)
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    params = (float(alpha), float(scale), float(input_scale), bool(is_result))
    vec = _loops.mask(
        _loops.walk(_elu_kernel, *params, arg=5, operands=(0, 5)), grad_output, self_or_result
    )
    x, t = _compute(self_or_result, grad_output)
    return as_dtype(elu_grad(x, t, *params, vec), out_dtype())


@register(aten.hardswish_backward.default)
def hardswish_backward(grad_output, self):
    vec = _loops.mask(_loops.walk(HARDSWISH_KERNEL, arg=1, operands=(0, 1)), grad_output, self)
    x, t = _compute(self, grad_output)
    return as_dtype(t * hardswish_partial(x, vec), out_dtype())


@register(aten.logit_backward.default)
def logit_backward(grad_output, self, eps=None):
    eps_arg = None if eps is None else float(eps)
    walk = _loops.walk(_logit_kernel, eps_arg, arg=1, operands=(0, 1))
    vec = _loops.mask(walk, grad_output, self)
    return as_dtype(logit_grad(self, grad_output, eps, vec), out_dtype())


@register(aten.rrelu_with_noise_backward.default)
def rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training, self_is_result):
    # Eager's kernel: in training the gradient times the noise the forward drew (its slopes;
    # torch's decomposition takes leaky_relu's rule where lower == upper, which differs at NaN,
    # whose noise is 1), else leaky_relu's backward with the mean slope (NaN takes the slope,
    # in both of its loops).
    if training:
        return as_dtype(grad_output * as_dtype(noise, grad_output.dtype), out_dtype())
    slope = as_dtype((float(lower) + float(upper)) / 2, grad_output.dtype)
    passes = self > 0
    return as_dtype(jnp.where(passes, grad_output, grad_output * slope), out_dtype())
