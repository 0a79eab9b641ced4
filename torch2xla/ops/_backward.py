"""ATen backward ops, for graphs that call them explicitly (the bridge's own backward comes from
``jax.vjp`` of the forward lowerings and never needs them).

Each is the ``jax.vjp`` of the matching forward lowering, except max pooling, whose gradient
goes to the recorded ``indices`` exactly as torch's kernel sends it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from torch._ops import ops

from torch2xla.ops._common import as_dtype, opmath_dtype, out_dtype
from torch2xla.ops._nn import attention, conv
from torch2xla.ops._pooling import _avg_pool, adaptive_avg_pool
from torch2xla.ops._registry import ctx, register
from torch2xla.ops._shape import replication_pad

aten = ops.aten


@register(aten.convolution_backward.default)
def convolution_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    def forward(x, w):
        return conv(
            x,
            w,
            None,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            grad_output.dtype,
        )

    _, vjp = jax.vjp(forward, input, weight)
    grad_input, grad_weight = vjp(as_dtype(grad_output, grad_output.dtype))
    nd = weight.ndim - 2
    batched = grad_output.ndim == nd + 2
    axes = (0, *range(2, grad_output.ndim)) if batched else tuple(range(1, grad_output.ndim))
    grad_bias = jnp.sum(grad_output, axis=axes)
    return _masked((grad_input, grad_weight, grad_bias), output_mask)


def _masked(grads, output_mask) -> tuple:
    """A backward op's outputs: those not asked for (``output_mask`` False) are undefined
    tensors in eager (None in the graph's values: no node reads them), or zeros where the
    graph holds a tensor; the others in the node's dtypes."""
    out = []
    for i, (g, want) in enumerate(zip(grads, output_mask)):
        val = ctx().out[i]
        if val is None:
            out.append(None)
        elif want and g is not None:
            out.append(as_dtype(g, out_dtype(i)))
        else:
            out.append(jnp.zeros(tuple(val.shape), out_dtype(i)))
    return tuple(out)


@register(
    aten.max_pool2d_with_indices_backward.default, aten.max_pool3d_with_indices_backward.default
)
def max_pool_with_indices_backward(
    grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    nd = 3 if ctx().node.target is aten.max_pool3d_with_indices_backward.default else 2
    return _to_indices(grad_output, self, indices, nd)


@register(aten.adaptive_max_pool2d_backward.default, aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool_backward(grad_output, self, indices):
    nd = 3 if ctx().node.target is aten.adaptive_max_pool3d_backward.default else 2
    return _to_indices(grad_output, self, indices, nd)


def _to_indices(grad_output, self, indices, nd: int):
    """Zeros of ``self``'s shape with each element of ``grad_output`` added at its plane's
    flat spatial index ``indices`` (the maximum the forward recorded), as eager's kernels."""
    lead = self.ndim - nd
    flat_shape = self.shape[:lead] + (-1,)
    grad = jnp.zeros(self.shape[:lead] + (math.prod(self.shape[lead:]),), grad_output.dtype)
    idx = indices.reshape(flat_shape)
    lead_idx = tuple(
        jnp.arange(n).reshape((-1,) + (1,) * (lead - i)) for i, n in enumerate(self.shape[:lead])
    )
    grad = grad.at[(*lead_idx, idx)].add(grad_output.reshape(flat_shape))
    return grad.reshape(self.shape)


@register(
    aten.replication_pad1d_backward.default,
    aten.replication_pad2d_backward.default,
    aten.replication_pad3d_backward.default,
)
def replication_pad_backward(grad_output, self, padding):
    _, vjp = jax.vjp(lambda x: replication_pad(x, padding), self)
    return vjp(as_dtype(grad_output, self.dtype))[0]


@register(aten.avg_pool2d_backward.default, aten.avg_pool3d_backward.default)
def avg_pool_backward(
    grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    nd = 3 if ctx().node.target is aten.avg_pool3d_backward.default else 2

    def forward(x):
        return _avg_pool(
            x,
            kernel_size,
            stride,
            padding,
            ceil_mode,
            count_include_pad,
            divisor_override,
            nd,
            grad_output.shape,
        )

    _, vjp = jax.vjp(forward, self)
    return vjp(as_dtype(grad_output, self.dtype))[0]


@register(aten._adaptive_avg_pool2d_backward.default, aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool_backward(grad_output, self):
    nd = 3 if ctx().node.target is aten._adaptive_avg_pool3d_backward.default else 2
    _, vjp = jax.vjp(lambda x: adaptive_avg_pool(x, grad_output.shape[-nd:]), self)
    return vjp(as_dtype(grad_output, self.dtype))[0]


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = grad_output.shape[-1]
    idx = indices.reshape(-1)
    grad = grad_output.reshape(-1, d)
    keep = idx != padding_idx
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), grad.dtype).at[idx].add(1)
        grad = grad / jnp.maximum(counts[idx], 1)[:, None]
    grad = jnp.where(keep[:, None], grad, 0)
    return jnp.zeros((num_weights, d), grad_output.dtype).at[idx].add(grad)


def _norm_backward(forward, grad_out, input, weight, bias, output_mask):
    args = [input] + [t for t in (weight, bias) if t is not None]
    _, vjp = jax.vjp(forward, *args)
    grads = list(vjp(grad_out))
    full = [
        grads.pop(0),
        grads.pop(0) if weight is not None else None,
        grads.pop(0) if bias is not None else None,
    ]
    return _masked(full, output_mask)


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(
    grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask
):
    # eager's closed form over the saved mean and rstd, in the input's opmath dtype:
    # dx = a*g + b*x + c with g = dy*w, a = rstd, b = (sum(g)*mean - sum(g*x))*rstd^3/n and
    # c = -b*mean - sum(g)*rstd/n (a vjp through a recomputed forward rounds ~4x further
    # from float64's gradient than eager does)
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    batch = tuple(range(input.ndim - len(normalized_shape)))
    acc = opmath_dtype(input.dtype)
    stat_shape = tuple(input.shape[a] for a in batch) + (1,) * len(axes)
    x, dy = as_dtype(input, acc), as_dtype(grad_out, acc)
    m, a = (as_dtype(t, acc).reshape(stat_shape) for t in (mean, rstd))
    n = math.prod(input.shape[d] for d in axes)
    g = dy if weight is None else dy * as_dtype(weight, acc)
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        ds = jnp.sum(g * x, axis=axes, keepdims=True)
        db = jnp.sum(g, axis=axes, keepdims=True)
        b = (db * m - ds) * a * a * a / n
        c = -b * m - db * a / n
        grad_input = as_dtype(a * g + b * x + c, input.dtype)
    if output_mask[1] and weight is not None:
        grad_weight = as_dtype(jnp.sum(dy * (x - m) * a, axis=batch), weight.dtype)
    if output_mask[2] and bias is not None:
        grad_bias = as_dtype(jnp.sum(dy, axis=batch), bias.dtype)
    return grad_input, grad_weight, grad_bias


def _eps_from(var, rstd):
    """The eps the forward used, recovered from its saved rstd: 1/rstd**2 - var."""
    return jax.lax.stop_gradient(jnp.mean(1 / jnp.square(rstd.reshape(var.shape)) - var))


@register(aten.native_group_norm_backward.default)
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    shape = (1, C) + (1,) * (input.ndim - 2)

    def forward(x, *affine):
        g = x.reshape((N, group, -1))
        m = jnp.mean(g, axis=-1, keepdims=True)
        v = jnp.mean(jnp.square(g - m), axis=-1, keepdims=True)
        y = ((g - m) * jax.lax.rsqrt(v + _eps_from(v, rstd))).reshape(x.shape)
        it = iter(affine)
        if weight is not None:
            y = y * next(it).reshape(shape)
        return y

    grad_input, grad_weight, _ = _norm_backward(forward, grad_out, input, weight, None, output_mask)
    # There is no bias argument, but its gradient is an output: the per-channel sum.
    axes = (0, *range(2, grad_out.ndim))
    grad_bias = _masked((None, None, jnp.sum(grad_out, axis=axes)), (False, False, output_mask[2]))[
        2
    ]
    return grad_input, grad_weight, grad_bias


# -- masked scatter, zero tensors --------------------------------------------------------------
@register(aten.masked_scatter_backward.default)
def masked_scatter_backward(grad_output, mask, sizes):
    # source's gradient: the gradient at the mask's k-th True position is its k-th element,
    # the rest zeros (eager's masked_select, padded to source's size)
    flat_mask = jnp.broadcast_to(mask, grad_output.shape).reshape(-1)
    grad = grad_output.reshape(-1)
    n = math.prod(sizes)
    pos = jnp.where(flat_mask, jnp.cumsum(flat_mask.astype(jnp.int64)) - 1, n)
    out = jnp.zeros((n,), grad.dtype).at[pos].set(grad, mode="drop")
    return out.reshape(tuple(sizes))


@register(aten._efficientzerotensor.default)
def _efficientzerotensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    # (torch's derivative formulas make these for gradients known to be zero: abs's second
    # derivative; eager materializes them as zeros wherever they are read)
    return jnp.zeros(tuple(size), out_dtype())


@register(aten._new_zeros_with_same_feature_meta.default)
def _new_zeros_with_same_feature_meta(self, other, self_num_batch_dims=0):
    # (forward-mode AD's tangent of ``other``'s layout: ``torch.func.hessian``, ``jvp``)
    return jnp.zeros(tuple(ctx().out.shape), out_dtype())


# -- embedding bags ----------------------------------------------------------------------------
def _bags(indices, offsets, n_bags: int):
    """The bag of each index (eager's ``offset2bag``), from the offsets."""
    bag = jnp.searchsorted(offsets, jnp.arange(indices.shape[0]), side="right") - 1
    return jnp.clip(bag, 0, max(n_bags - 1, 0))


@register(aten._embedding_bag_backward.default)
def _embedding_bag_backward(
    grad,
    indices,
    offsets,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    sparse,
    per_sample_weights=None,
    padding_idx=-1,
):
    # (sparse=True and scale_grad_by_freq run in eager: capture/_partition.py)
    n_bags, d = grad.shape
    out = jnp.zeros((num_weights, d), grad.dtype)
    if mode == 2:
        # each bag's gradient goes to the row that held the maximum, per feature; empty bags
        # (no index but the padding one) send none
        live = (bag_size > 0)[:, None] & (maximum_indices >= 0)
        rows = jnp.where(live, maximum_indices, num_weights)
        feats = jnp.broadcast_to(jnp.arange(d), rows.shape)
        return out.at[rows, feats].add(grad, mode="drop")
    # each index adds its bag's gradient times eager's scale: 1 / its bag's size (mean), * its
    # sample's weight
    acc = opmath_dtype(grad.dtype)
    bag = _bags(indices, offsets, n_bags)
    scale = jnp.ones(indices.shape, acc)
    if mode == 1:
        size = bag_size[bag].astype(acc)
        scale = jnp.where(size != 0, scale / size, scale)
    if per_sample_weights is not None:
        scale = scale * as_dtype(per_sample_weights, acc)
    if padding_idx is not None and padding_idx >= 0:
        scale = jnp.where(indices == padding_idx, 0, scale)
    rows = as_dtype(grad, acc)[bag] * scale[:, None]
    return as_dtype(out.astype(acc).at[indices].add(rows), out_dtype())


@register(aten._embedding_bag_per_sample_weights_backward.default)
def _embedding_bag_per_sample_weights_backward(
    grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1
):
    # each sample's weight multiplied its row in its bag's sum: the dot product of the two
    bag = _bags(indices, offsets, grad.shape[0])
    acc = opmath_dtype(grad.dtype)
    dots = jnp.sum(as_dtype(grad, acc)[bag] * as_dtype(weight, acc)[indices], axis=-1, dtype=acc)
    if padding_idx is not None and padding_idx >= 0:
        dots = jnp.where(indices == padding_idx, 0, dots)
    return as_dtype(dots, out_dtype())


# -- attention ---------------------------------------------------------------------------------
@register(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def sdpa_flash_cpu_backward(
    grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    # the derivative of the forward lowering (the logsumexp's cotangent is zero)
    def forward(q, k, v):
        return attention(q, k, v, attn_mask, dropout_p, is_causal, scale)[0]

    _, vjp = jax.vjp(forward, query, key, value)
    grads = vjp(as_dtype(grad_out, out.dtype))
    return tuple(as_dtype(g, out_dtype(i)) for i, g in enumerate(grads))
