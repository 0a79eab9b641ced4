"""Neural-network ops: convolution, normalization, softmax, embedding, attention (pooling:
``_pooling``)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from torch._ops import ops

from torch2xla.ops import _saved
from torch2xla.ops._batch_norm import batch_norm_train, batch_norm_train_channels_last
from torch2xla.ops._bounds import check_index
from torch2xla.ops._common import as_dtype, is_half, opmath_dtype, out_dtype, rounded_to
from torch2xla.ops._linalg import _half_out, precision
from torch2xla.ops._registry import AFTER_CONVOLUTION, ctx, register
from torch2xla.runtime._interop import jax_dtype

aten = ops.aten


def _tuple(v, n: int) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    v = tuple(v)
    return v * n if len(v) == 1 else v


# -- convolution ----------------------------------------------------------------------------------
@register(aten.convolution.default)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return conv(
        input,
        weight,
        bias,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        out_dtype(),
    )


def conv(
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, result
):
    """``aten.convolution`` with an explicit result dtype (also used by its backward)."""
    nd = weight.ndim - 2
    stride, padding, dilation = _tuple(stride, nd), _tuple(padding, nd), _tuple(dilation, nd)
    unbatched = input.ndim == nd + 1
    x = input[None] if unbatched else input
    x, w = as_dtype(x, result), as_dtype(weight, result)
    geometry = (stride, padding, dilation, transposed, _tuple(output_padding, nd), groups)
    x, w = _even_channels(x, w, geometry)
    if is_half(result) and not _half_out():
        out = _half_conv(x, w, geometry)  # float32, not yet rounded
    else:
        out = _conv_core(x, w, geometry)
    if bias is not None:
        # Before rounding where the product is float32 (CPU), as torch's CPU kernels add it; on
        # CUDA after, as torch's cuDNN path adds it.
        out = out + as_dtype(bias, out.dtype).reshape((1, -1) + (1,) * nd)
    out = as_dtype(out, result)
    return out[0] if unbatched else out


def _even_channels(x, w, geometry):
    """``x`` and ``w`` with zero input channels added up to a multiple of 4 where their count
    is odd (CPU, not transposed, one group): the same convolution (the added products are
    zero times zero, never NaN), up to the order of its sums.

    XLA's CPU convolutions (YNNPACK) run an odd channel count on a slow path: a 3-channel
    image's 3x3 convolution to 32 channels (16x32x32, one core) takes 1.04 ms, with a fourth
    zero channel 0.25 ms (torch 0.32 ms); 5, 7, 9, 17 and 33 channels likewise (1.15 -> 0.44,
    1.20 -> 0.44, 1.29 -> 0.64, 1.79 -> 1.13, 2.85 -> 2.30 ms); even counts run fast.
    The benchmark CNN's inference step: -7%.
    """
    transposed, groups = geometry[3], geometry[5]
    c = x.shape[1]
    if (
        transposed
        or groups != 1
        or c % 2 == 0
        or c == 1
        or ctx().on_cuda
        or not jnp.issubdtype(x.dtype, jnp.floating)
    ):
        return x, w
    widths = [(0, 0)] * x.ndim
    widths[1] = (0, -c % 4)
    return jnp.pad(x, widths), jnp.pad(w, widths)


def _conv_core(x, w, geometry, preferred=None):
    """The convolution proper (no bias) on batched ``x``; ``geometry`` holds stride, padding,
    dilation, transposed, output_padding and groups."""
    stride, padding, dilation, transposed, output_padding, groups = geometry
    nd = w.ndim - 2
    spatial = "DHW"[-nd:] if nd <= 3 else None
    dn = lax.conv_dimension_numbers(
        x.shape, w.shape, (f"NC{spatial}", f"OI{spatial}", f"NC{spatial}")
    )
    if not transposed:
        return lax.conv_general_dilated(
            x,
            w,
            stride,
            [(p, p) for p in padding],
            rhs_dilation=dilation,
            dimension_numbers=dn,
            feature_group_count=groups,
            precision=precision(),
            preferred_element_type=preferred,
        )
    # Transposed conv = conv over the stride-dilated input with the flipped, in/out-swapped
    # kernel. weight is (C_in, C_out/groups, k...); regroup to (C_out, C_in/groups, k...).
    c_in, c_out_g = w.shape[:2]
    k = w.shape[2:]
    w = w.reshape((groups, c_in // groups, c_out_g) + k)
    w = jnp.swapaxes(w, 1, 2).reshape((groups * c_out_g, c_in // groups) + k)
    w = jnp.flip(w, axis=tuple(range(2, 2 + nd)))
    pads = [
        (d * (kk - 1) - p, d * (kk - 1) - p + op)
        for kk, p, d, op in zip(k, padding, dilation, output_padding)
    ]
    dn = lax.conv_dimension_numbers(
        x.shape, w.shape, (f"NC{spatial}", f"OI{spatial}", f"NC{spatial}")
    )
    return lax.conv_general_dilated(
        x,
        w,
        (1,) * nd,
        pads,
        lhs_dilation=stride,
        rhs_dilation=dilation,
        dimension_numbers=dn,
        feature_group_count=groups,
        precision=precision(),
        preferred_element_type=preferred,
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _half_conv(x, w, geometry):
    """A half-precision convolution accumulated and returned in float32 (rounded once by the
    caller, after the bias, as torch's kernels round).

    NOTE: its gradients are half-precision convolutions, as torch's backward computes them;
    JAX's own rule would differentiate the float32-accumulated forward into float32
    convolutions, far slower on GPU. (Without preferred_element_type XLA's CPU convolution of
    bfloat16 operands loses several units in the last place to torch's.)
    """
    return _conv_core(x, w, geometry, np.float32)


def _half_conv_fwd(x, w, geometry):
    return _half_conv(x, w, geometry), (x, w)


def _half_conv_bwd(geometry, residuals, ct):
    x, w = residuals
    # float32 convolutions of the half-precision values, rounded once (``half_product``'s
    # backward says why)
    wide = np.float32
    _, vjp = jax.vjp(lambda a, b: _conv_core(a, b, geometry), x.astype(wide), w.astype(wide))
    dx, dw = vjp(ct.astype(x.dtype).astype(wide))
    return rounded_to(dx, x.dtype), rounded_to(dw, w.dtype)


_half_conv.defvjp(_half_conv_fwd, _half_conv_bwd)


# -- normalization ----------------------------------------------------------------------------------
def _channels_last_bn(x) -> bool:
    """Whether the batch norm being lowered computes on channels-last data: a 4-D or 5-D
    activation read from a convolution (``AFTER_CONVOLUTION``, ``capture/_annotate.py``) on
    CPU (see ``batch_norm_train_channels_last``; CPU CNN training step -8%, with relu's
    channels-last gradient -19%)."""
    return not ctx().on_cuda and x.ndim in (4, 5) and ctx().node.meta.get(AFTER_CONVOLUTION, False)


def _bn_train(input, weight, bias, eps):
    """(output in the input's dtype, mean, biased variance, invstd), statistics in float32
    for half-precision inputs; the gradient is torch's closed form (_batch_norm)."""
    acc = opmath_dtype(input.dtype)
    c = input.shape[1]
    # NOTE: torch's batch norm takes a weight and bias of any shape with C elements.
    w = jnp.ones((c,), acc) if weight is None else as_dtype(weight, acc).reshape(c)
    b = jnp.zeros((c,), acc) if bias is None else as_dtype(bias, acc).reshape(c)
    # (the input is widened inside, so that its backward keeps it in its own dtype)
    if _channels_last_bn(input):
        out, mean, var = batch_norm_train_channels_last(input, w, b, eps)
    else:
        out, mean, var = batch_norm_train(input, w, b, eps)
    return as_dtype(out, input.dtype), mean, var, lax.rsqrt(var + eps)


def _bn_apply(x, axes, mean, invstd, weight, bias, dtype):
    shape = [1] * x.ndim
    shape[1] = -1
    out = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * as_dtype(weight, x.dtype).reshape(shape)
    # (eager adds a shift, bias - mean * scale, even without bias: -0.0 + 0.0 is +0.0)
    out = _saved.add_bias(out, None if bias is None else as_dtype(bias, x.dtype).reshape(shape))
    return as_dtype(out, dtype)


@register(aten._native_batch_norm_legit_functional.default)
def batch_norm_functional(input, weight, bias, running_mean, running_var, training, momentum, eps):
    if not training:
        out, m, s = batch_norm_no_training(
            input, weight, bias, running_mean, running_var, momentum, eps
        )
        return out, m, s, running_mean, running_var
    out, mean, var, invstd = _bn_train(input, weight, bias, eps)
    n = input.size // input.shape[1]
    # NOTE: running_var is updated with the unbiased variance, normalization uses the biased one.
    unbiased = lax.stop_gradient(var) * (n / max(n - 1, 1))
    m = as_dtype(momentum, running_mean.dtype)
    new_mean = (1 - m) * running_mean + m * as_dtype(lax.stop_gradient(mean), running_mean.dtype)
    new_var = (1 - m) * running_var + m * as_dtype(unbiased, running_var.dtype)
    # torch returns the saved statistics in the input's dtype on CPU.
    return out, as_dtype(mean, out_dtype(1)), as_dtype(invstd, out_dtype(2)), new_mean, new_var


@register(aten._native_batch_norm_legit_no_training.default)
def batch_norm_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    acc = opmath_dtype(input.dtype)
    x = as_dtype(input, acc)
    axes = (0,) + tuple(range(2, x.ndim))
    invstd = lax.rsqrt(as_dtype(running_var, acc) + eps)
    out = _bn_apply(x, axes, as_dtype(running_mean, acc), invstd, weight, bias, input.dtype)
    return out, jnp.zeros((0,), out_dtype(1)), jnp.zeros((0,), out_dtype(2))


@register(aten._native_batch_norm_legit.no_stats)
def batch_norm_no_stats(input, weight, bias, training, momentum, eps):
    out, mean, _var, invstd = _bn_train(input, weight, bias, eps)
    return out, as_dtype(mean, out_dtype(1)), as_dtype(invstd, out_dtype(2))


@register(aten.native_layer_norm.default)
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    if jnp.issubdtype(input.dtype, jnp.floating):  # the backward keeps input, mean and rstd
        return _saved.layer_norm(input, weight, bias, axes, eps, (out_dtype(1), out_dtype(2)))
    acc = opmath_dtype(input.dtype)
    x = as_dtype(input, acc)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    rstd = lax.rsqrt(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * as_dtype(weight, acc)
    if bias is not None:
        out = out + as_dtype(bias, acc)
    # torch returns mean and rstd in the input's dtype on CPU (float32 accumulation inside).
    return as_dtype(out, input.dtype), as_dtype(mean, out_dtype(1)), as_dtype(rstd, out_dtype(2))


@register(aten.native_group_norm.default)
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    acc = opmath_dtype(input.dtype)
    x = as_dtype(input, acc).reshape((N, group, -1))
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    rstd = lax.rsqrt(var + eps)
    out = ((x - mean) * rstd).reshape(input.shape)
    shape = (1, C) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * as_dtype(weight, acc).reshape(shape)
    if bias is not None:
        out = out + as_dtype(bias, acc).reshape(shape)
    return (
        as_dtype(out, input.dtype),
        as_dtype(mean.reshape(N, group), out_dtype(1)),
        as_dtype(rstd.reshape(N, group), out_dtype(2)),
    )


# -- softmax ---------------------------------------------------------------------------------------
def _softmax_impl(fn, self, dim, half_to_float):
    result = out_dtype()
    if self.ndim and jnp.issubdtype(self.dtype, jnp.floating):  # the backward keeps the output
        return _saved.softmax(self, dim, result, fn is jax.nn.log_softmax)
    x = as_dtype(self, opmath_dtype(self.dtype))
    if x.ndim == 0:
        return as_dtype(fn(x[None], axis=0)[0], result)
    return as_dtype(fn(x, axis=dim), result)


@register(aten._softmax.default)
def _softmax(self, dim, half_to_float):
    return _softmax_impl(jax.nn.softmax, self, dim, half_to_float)


@register(aten._log_softmax.default)
def _log_softmax(self, dim, half_to_float):
    return _softmax_impl(jax.nn.log_softmax, self, dim, half_to_float)


# -- embedding -------------------------------------------------------------------------------------
@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # (sparse=True runs in eager PyTorch, whose gradient is a sparse tensor: _partition)
    check_index(indices, weight.shape[0], 0)
    if padding_idx is not None and padding_idx >= 0:
        # NOTE: torch gives the padding row no gradient.
        weight = weight.at[padding_idx].set(lax.stop_gradient(weight[padding_idx]))
    if scale_grad_by_freq:
        return _take_by_freq(weight, indices)
    return jnp.take(weight, indices, axis=0)


@jax.custom_vjp
def _take_by_freq(weight, indices):
    """``take(weight, indices)`` whose gradient of each looked-up row is divided by how often
    its index occurs in ``indices`` (``scale_grad_by_freq``), as eager's backward scales."""
    return jnp.take(weight, indices, axis=0)


def _take_by_freq_fwd(weight, indices):
    return jnp.take(weight, indices, axis=0), (indices, jnp.zeros(weight.shape[:1], weight.dtype))


def _take_by_freq_bwd(residuals, g):
    indices, rows = residuals
    idx = indices.reshape(-1)
    g = g.reshape(idx.shape[0], -1)
    counts = jnp.zeros(rows.shape, g.dtype).at[idx].add(1)
    g = g / counts[idx][:, None]
    return jnp.zeros((rows.shape[0], g.shape[1]), g.dtype).at[idx].add(g), None


_take_by_freq.defvjp(_take_by_freq_fwd, _take_by_freq_bwd)


@register(aten.embedding_renorm.default)
def embedding_renorm(self, indices, max_norm, norm_type):
    """``F.embedding(..., max_norm=)``'s in-place renormalization, functional: each row that
    ``indices`` name (once however often named) whose ``norm_type`` norm passes ``max_norm``
    is scaled by ``max_norm / (norm + 1e-7)``, as eager's kernel does.

    NOTE: eager renormalizes under no_grad, then differentiates the embedding with respect to
    the renormalized weight, which is the leaf itself: the value is renormalized, the
    derivative the identity (the op's own derivative is not implemented in eager; running it
    in eager under autograd made the backward raise)."""
    # eager's kernel selects each named row (a bad index touches no row here)
    shape = list(self.shape)
    message = f"select(): index {{value}} out of range for tensor of size {shape} at dimension 0"
    check_index(indices, self.shape[0], 0, message)
    rows = indices.reshape(-1)
    rows = jnp.where(rows < 0, rows + self.shape[0], rows)  # (select(): -1 is the last row)
    touched = jnp.zeros((self.shape[0],), bool).at[rows].set(True, mode="drop")
    w = lax.stop_gradient(self)
    norm = jnp.linalg.norm(w.astype(opmath_dtype(w.dtype)), ord=norm_type, axis=1)
    scale = jnp.where(touched & (norm > max_norm), max_norm / (norm + 1e-7), 1.0)
    renormed = (w * scale[:, None].astype(w.dtype)).astype(w.dtype)
    return renormed + (self - w)  # (exactly the renormed value; the derivative of self)


# -- dropout ---------------------------------------------------------------------------------------
@register(aten.native_dropout.default)
def native_dropout(input, p, train):
    # NOTE: train=None means training, as in eager's kernel.
    if train is False or p == 0:
        return input, jnp.ones(input.shape, bool)
    if p >= 1:  # (eager's ``input * 0``: -0.0 for negative inputs, NaN for infinite ones)
        return input * 0, jnp.zeros(input.shape, bool)
    return _saved.dropout(input, ctx().next_key(), p)


# -- attention -------------------------------------------------------------------------------------
def attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    scale=None,
    enable_gqa=False,
    seed=None,
):
    """(softmax(q k^T * scale + mask) v, logsumexp of the scores per row), with torch's mask
    conventions (bool: True attends). Dropout draws its mask from ``seed`` (a uint32 scalar;
    None: from the node's key)."""
    result = query.dtype
    acc = opmath_dtype(query.dtype)
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    if enable_gqa:  # (key and value each repeated to the query's heads: they may differ)
        key, value = (
            t
            if t.shape[-3] == query.shape[-3]
            else jnp.repeat(t, query.shape[-3] // t.shape[-3], -3)
            for t in (key, value)
        )
    # NOTE: without a head dim every score is an empty sum, 0 whatever the scale (eager's
    # 1/sqrt(0) never meets a number): the scale is 1 there, not inf (0 * inf is NaN).
    scale = (1.0 / math.sqrt(E) if E else 1.0) if scale is None else scale
    # Leading dims that broadcast (one key/value head for all query heads: Falcon's and
    # GPT-BigCode's multi-query attention) are broadcast first: the math below would give NaN
    # rows where a row's every key is masked (left padding), which eager's kernels give as 0.
    batch = jnp.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    query, key, value = (jnp.broadcast_to(t, (*batch, *t.shape[-2:])) for t in (query, key, value))
    if S == 0:  # no keys: zeros, as eager's (a logsumexp of nothing: -inf)
        return jnp.zeros((*batch, L, value.shape[-1]), result), jnp.full((*batch, L), -jnp.inf, acc)
    if jnp.issubdtype(query.dtype, jnp.floating):
        # the backward keeps what fused attention keeps (_saved.attention)
        mask = bias = None
        if attn_mask is not None:
            mask, bias = (attn_mask, None) if attn_mask.dtype == jnp.bool_ else (None, attn_mask)
        if dropout_p > 0 and seed is None:
            seed = jax.random.bits(ctx().next_key(), (), jnp.uint32)
        return _saved.attention(
            query,
            key,
            value,
            mask,
            bias,
            scale=scale,
            is_causal=is_causal,
            precision=precision(),
            dropout_p=dropout_p,
            seed=seed,
        )
    scores = jnp.matmul(
        query, jnp.swapaxes(key, -1, -2), precision=precision(), preferred_element_type=acc
    ) * as_dtype(scale, acc)
    if is_causal:
        causal = jnp.tril(jnp.ones((L, S), bool))
        scores = jnp.where(causal, scores, -jnp.inf)
    if attn_mask is not None:
        if attn_mask.dtype == jnp.bool_:
            scores = jnp.where(attn_mask, scores, -jnp.inf)
        else:
            scores = scores + as_dtype(attn_mask, acc)
    weights = jax.nn.softmax(scores, axis=-1)
    if dropout_p > 0:
        rng = ctx().next_key() if seed is None else jax.random.key(seed)
        weights = _saved.dropout(weights, rng, dropout_p)[0]
    out = jnp.matmul(
        as_dtype(weights, _saved.probs_dtype(result)),
        value,
        precision=precision(),
        preferred_element_type=acc,
    )
    return as_dtype(out, result), jax.nn.logsumexp(scores, axis=-1)


@register(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p=0.0,
    is_causal=False,
    *,
    scale=None,
    enable_gqa=False,
):
    fast = cudnn_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    if fast is not None:
        return fast
    return attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)[0]


# Query lengths up to this run through XLA's attention on CUDA too (``cudnn_attention``).
_FEW_QUERIES = 16


def cudnn_attention(query, key, value, attn_mask, dropout_p, is_causal, scale):
    """cuDNN's fused attention (``jax.nn.dot_product_attention``) where the node runs on CUDA
    in half precision without dropout; None where that kernel does not apply.

    Not for a few queries over many keys (a decoded token over its KV cache): cuDNN takes
    (B, T, N, H) operands, so XLA would transpose the whole cache of each layer every token
    (24 transposes and ~0.15 ms of a GPT-2 token on an H200) to save a product whose scores
    are a single row; XLA's own attention reads the cache where it lies."""
    if (
        not ctx().on_cuda
        or not is_half(query.dtype)
        or dropout_p > 0
        or query.ndim != 4
        or 0 in (key.shape[2], query.shape[3])
        or not (query.shape[1] == key.shape[1] == value.shape[1])
        or query.shape[2] <= _FEW_QUERIES
    ):
        return None
    q, k, v = (jnp.swapaxes(t, 1, 2) for t in (query, key, value))  # (B, T, N, H) for JAX
    mask = bias = None
    if attn_mask is not None:
        if attn_mask.dtype == jnp.bool_:
            mask = attn_mask
        else:
            bias = attn_mask.astype(query.dtype)

    def fused(q, k, v, mask, bias):
        return jax.nn.dot_product_attention(
            q, k, v, bias=bias, mask=mask, scale=scale, is_causal=is_causal, implementation="cudnn"
        )

    def math_path(q, k, v, mask, bias):  # where cuDNN refuses the backward (_saved)
        t = [jnp.swapaxes(x, 1, 2) for x in (q, k, v)]
        s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        out = _saved.attention(*t, mask, bias, scale=s, is_causal=is_causal, precision=precision())[
            0
        ]
        return jnp.swapaxes(out, 1, 2)

    def padded(q, k, v, mask, bias):
        return _even_length_attention(q, k, v, mask, bias, scale, is_causal)

    # cuDNN computes the backward of even sequence lengths only (ViT's 197 tokens are refused):
    # there it runs padded by one masked step, and the math rule is the last resort.
    odd = q.shape[1] % 2 or k.shape[1] % 2
    slow = (lambda *a: _saved.with_fallback_vjp(padded, math_path, *a)) if odd else math_path
    try:
        out = _saved.with_fallback_vjp(fused, slow, q, k, v, mask, bias)
    except (ValueError, NotImplementedError, TypeError):
        return None  # a shape, mask or cuDNN version the kernel refuses: XLA's own attention
    return jnp.swapaxes(out, 1, 2)


def _even_length_attention(q, k, v, mask, bias, scale, is_causal):
    """cuDNN attention over (B, T, N, H) inputs whose odd query/key lengths are padded by one
    step: the padded key is excluded through ``key_value_seq_lengths`` (cuDNN's padding mask),
    the padded query row is dropped (its cotangent is zero). The padding sits after the last
    step, so a causal mask stays the same for the real rows."""
    T, S = q.shape[1], k.shape[1]
    pt, ps = T % 2, S % 2

    def pad_seq(x, n):
        return jnp.pad(x, [(0, 0), (0, n), (0, 0), (0, 0)]) if n else x

    def pad_scores(x, fill):  # a mask/bias over (..., T or 1, S or 1)
        if x is None:
            return None
        x = x.reshape((1,) * (4 - x.ndim) + x.shape)
        widths = [
            (0, 0),
            (0, 0),
            (0, pt if x.shape[2] == T else 0),
            (0, ps if x.shape[3] == S else 0),
        ]
        return jnp.pad(x, widths, constant_values=fill)

    B = q.shape[0]
    out = jax.nn.dot_product_attention(
        pad_seq(q, pt),
        pad_seq(k, ps),
        pad_seq(v, ps),
        bias=pad_scores(bias, 0),
        mask=pad_scores(mask, True),
        scale=scale,
        is_causal=is_causal,
        query_seq_lengths=jnp.full((B,), T, jnp.int32),
        key_value_seq_lengths=jnp.full((B,), S, jnp.int32),
        implementation="cudnn",
    )
    return out[:, :T]


@register(aten._scaled_dot_product_flash_attention_for_cpu.default)
def sdpa_flash_cpu(
    query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None
):
    out, lse = attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    return out, as_dtype(lse, out_dtype(1))


# The CUDA kernels sdpa dispatches to when autograd records it (training). Only the output and
# the logsumexp carry values; the rest (RNG state, sequence bookkeeping, debug masks) feed the
# fused kernels' own backward, which jax.vjp replaces: they come back as zeros of the fake
# output's shape and dtype.
def _fused_sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale):
    out, lse = attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    fast = cudnn_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    out = out if fast is None else fast  # XLA drops the unused math path
    metas = ctx().out
    # NOTE: the efficient kernel pads logsumexp's last dim (to a multiple of 32) or leaves it
    # empty when not asked for it; follow the fake output's shape.
    width = metas[1].shape[-1]
    lse = lse[..., :width]
    if lse.shape[-1] < width:
        pad = [(0, 0)] * (lse.ndim - 1) + [(0, width - lse.shape[-1])]
        lse = jnp.pad(lse, pad)
    rest = [
        m if not hasattr(m, "shape") else jnp.zeros(tuple(m.shape), jax_dtype(m.dtype))
        for m in metas[2:]
    ]
    return (out, as_dtype(lse, jax_dtype(metas[1].dtype)), *rest)


@register(aten._scaled_dot_product_efficient_attention.default)
def sdpa_efficient(
    query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None
):
    return _fused_sdpa(query, key, value, attn_bias, dropout_p, is_causal, scale)


@register(aten._scaled_dot_product_flash_attention.default)
def sdpa_flash(
    query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None
):
    return _fused_sdpa(query, key, value, None, dropout_p, is_causal, scale)


@register(aten._scaled_dot_product_cudnn_attention.default)
def sdpa_cudnn(
    query,
    key,
    value,
    attn_bias,
    compute_log_sumexp,
    dropout_p=0.0,
    is_causal=False,
    return_debug_mask=False,
    *,
    scale=None,
):
    return _fused_sdpa(query, key, value, attn_bias, dropout_p, is_causal, scale)


@register(aten._transformer_encoder_layer_fwd.default)
def transformer_encoder_layer_fwd(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    ffn_bias_1,
    ffn_weight_2,
    ffn_bias_2,
    mask=None,
    mask_type=None,
):
    """nn.TransformerEncoderLayer's eval fast path (batch-first, no dropout)."""
    B, T, E = src.shape
    head_dim = embed_dim // num_heads

    def linear(x, w, b):
        from torch2xla.ops._linalg import matmul

        return matmul(x, jnp.swapaxes(w, 0, 1)) + b

    def norm(x, w, b):  # (this node's outputs are not layer norm's: no out_dtype here)
        return _saved.layer_norm(x, w, b, (x.ndim - 1,), eps, (x.dtype, x.dtype))[0]

    def self_attention(x):
        qkv = linear(x, qkv_weight, qkv_bias).reshape(B, T, 3, num_heads, head_dim)
        q, k, v = (jnp.moveaxis(qkv[:, :, i], 1, 2) for i in range(3))
        if mask is None:
            out = attention(q, k, v)[0]
        else:
            # NOTE: the kernel's masked softmax reads the mask as bool, True dropping the key:
            # a float mask (the module passes its masks as floats, 0 and -inf) drops every
            # key of a nonzero entry, finite ones too (not added as sdpa adds them), and a row
            # that drops every key is NaN (sdpa's is zeros). mask_type 1: a (B, T) padding mask.
            drop = mask if mask.dtype == jnp.bool_ else mask != 0
            drop = drop.reshape(B, 1, 1, T) if mask_type == 1 else drop
            out = attention(q, k, v, ~drop)[0]
            out = jnp.where(jnp.all(drop, axis=-1, keepdims=True), jnp.nan, out)
        return linear(jnp.moveaxis(out, 1, 2).reshape(B, T, E), proj_weight, proj_bias)

    def feed_forward(x):
        from torch2xla.ops._elementwise import relu_value  # keeps -0.0, as torch's relu

        h = linear(x, ffn_weight_1, ffn_bias_1)
        h = _saved.gelu(h, False) if use_gelu else relu_value(h)
        return linear(h, ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = x + self_attention(norm(x, norm_weight_1, norm_bias_1))
        x = x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    else:
        x = norm(x + self_attention(x), norm_weight_1, norm_bias_1)
        x = norm(x + feed_forward(x), norm_weight_2, norm_bias_2)
    return x
