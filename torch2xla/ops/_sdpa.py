"""``scaled_dot_product_attention`` kept whole through AOT export.

AOT export traces with fake tensors, and torch picks sdpa's kernel from them: for fake CUDA
tensors ``torch._fused_sdp_choice`` answers MATH where the real tensors get the efficient or
cuDNN kernel. Export then decomposed every CUDA sdpa into two batched products around a
``_safe_softmax``, in float32 even under bf16 autocast, and training kept every (L, S)
probability matrix where eager's fused kernels keep the output and a logsumexp per row.

``capture/_rewrites.preserve_sdpa`` retargets the Dynamo graph's sdpa calls to
``torch2xla::sdpa``, a functional custom op of sdpa's schema that export keeps intact, lowered
by the registry's sdpa lowering:
cuDNN's fused attention for half precision on CUDA, elsewhere attention whose backward keeps
what fused attention keeps (``_saved.attention``). Under autocast the op carries autocast's
dtype and casts as autocast casts sdpa (float operands but float64 to the autocast dtype).

Calls with dropout become ``torch2xla::sdpa_dropout``, whose mask is drawn from a seed the
graph draws first (``torch.randint`` on the CPU), so that the backward draws the same mask
again instead of keeping it, whether lowered (JAX's generator) or run eagerly (torch's).

Graphs that enter and leave ``torch.autocast`` regions themselves (transformers' rotary
embeddings turn it off around their float32 math) give each call the dtype of its region
(``_rewrites._autocast_dtypes``). Calls left to the decomposition: graphs whose regions have
arguments that are not constants or do not nest, a dropout probability of 1 or more, and
arguments that are not constants.
"""

from __future__ import annotations

import jax.numpy as jnp
import torch

from torch2xla.ops import _vmap
from torch2xla.ops._nn import attention, scaled_dot_product_attention
from torch2xla.ops._registry import register
from torch2xla.runtime._interop import jax_dtype, torch_dtype


def _cast_to(dtype: torch.dtype, autocast_dtype: torch.dtype | None) -> torch.dtype:
    """The dtype autocast gives an sdpa operand of ``dtype``."""
    if autocast_dtype is None or not dtype.is_floating_point or dtype == torch.float64:
        return dtype
    return autocast_dtype


def _autocast_cast(t: torch.Tensor | None, dtype: torch.dtype | None) -> torch.Tensor | None:
    return t if t is None else t.to(_cast_to(t.dtype, dtype))


def _eager(query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype):
    q, k, v, m = (_autocast_cast(t, autocast_dtype) for t in (query, key, value, attn_mask))
    with torch.autocast(q.device.type, enabled=False):
        return torch.ops.aten.scaled_dot_product_attention.default(
            q, k, v, m, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa
        )


@torch.library.custom_op("torch2xla::sdpa", mutates_args=())
def sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    autocast_dtype: torch.dtype | None,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` without dropout, its floating operands first cast to
    ``autocast_dtype`` as autocast casts them (see the module docstring)."""
    out = _eager(query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype)
    return out.clone() if out._base is not None else out


@sdpa.register_fake
def _sdpa_fake(query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype):
    # As sdpa's own checks: with symbolic sizes this makes the two lengths one symbol.
    torch._check(
        key.shape[-2] == value.shape[-2],
        lambda: f"sdpa: key and value lengths differ ({key.shape[-2]}, {value.shape[-2]})",
    )
    # NOTE: sdpa's result has the layout its kernel chooses (the CPU flash kernel's follows the
    # query's: a (B, T, H, E) buffer seen as (B, H, T, E) gives one), which user code can rely
    # on (``y.transpose(1, 2).view(B, T, H * E)``) and Dynamo traced with: the fake runs sdpa's
    # own fake kernel. On CUDA that kernel picks a fused backend by its own checks (mask
    # alignment, dropout's RNG state), which fake tensors failed (rows that attend nowhere,
    # dropout on the H200: the graph fell back): there the result is row-major, as before.
    if query.device.type != "cpu":
        dtype = _cast_to(query.dtype, autocast_dtype)
        return query.new_empty((*query.shape[:-1], value.shape[-1]), dtype=dtype)
    out = _eager(query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype)
    return out.clone() if out._base is not None else out


def _setup(ctx, inputs, output):
    ctx.inputs = inputs


def _recomputing_backward(eager):
    """Autograd of an op run eagerly (a partition left to torch): ``eager`` (the op's kernel)
    recomputed with autograd on and differentiated; its first four arguments are q, k, v and
    the mask."""

    def backward(ctx, grad):
        query, key, value, attn_mask, *rest = ctx.inputs
        tensors = [query, key, value, attn_mask]
        wanted = [i for i, t in enumerate(tensors) if t is not None and t.requires_grad]
        # (a create_graph backward runs in grad mode: its gradients are differentiated again,
        # so they are computed from the inputs themselves, not detached copies)
        create = torch.is_grad_enabled()
        if not wanted:
            return (None,) * (len(tensors) + len(rest))
        with torch.enable_grad():
            leaves = [
                t if create or t is None else t.detach().requires_grad_(i in wanted)
                for i, t in enumerate(tensors)
            ]
            out = eager(*leaves, *rest)
            got = torch.autograd.grad(
                out, [leaves[i] for i in wanted], grad, allow_unused=True, create_graph=create
            )
        grads: list = [None] * (len(tensors) + len(rest))
        for i, g in zip(wanted, got):
            grads[i] = g
        return tuple(grads)

    return backward


sdpa.register_autograd(_recomputing_backward(_eager), setup_context=_setup)


@sdpa.register_vmap
def _sdpa_vmap(
    info, in_dims, query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype
):
    # Attention treats every dimension before the last two (three with GQA: the heads) as a
    # batch, so vmap's dimension becomes one more: folded into the first batch dimension where
    # query, key and value share it (the 4-D layout fused kernels take), else put in front.
    size = info.batch_size
    q, k, v = (_vmap.front(t, d, size) for t, d in zip((query, key, value), in_dims))
    mask = attn_mask
    if mask is not None:
        mask = _vmap.front(mask, in_dims[3], size) if in_dims[3] is not None else mask[None]
        mask = mask.reshape(mask.shape[0], *[1] * (q.dim() - mask.dim()), *mask.shape[1:])
    fold = q.dim() >= 4 and q.dim() == k.dim() == v.dim() and q.shape[1] == k.shape[1] == v.shape[1]
    if fold:
        n = q.shape[1]
        q, k, v = (t.flatten(0, 1) for t in (q, k, v))
        if mask is not None:
            mask = mask.expand(size, n, *mask.shape[2:]).flatten(0, 1)
    out = sdpa(q, k, v, mask, is_causal, scale, enable_gqa, autocast_dtype)
    return (out.unflatten(0, (size, n)) if fold else out), 0


def _eager_dropout(
    query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, autocast_dtype, seed
):
    """sdpa's math with dropout, its mask from torch's generator seeded with ``seed``."""
    q, k, v, m = (_autocast_cast(t, autocast_dtype) for t in (query, key, value, attn_mask))
    with torch.autocast(q.device.type, enabled=False):
        if enable_gqa and k.shape[-3] != q.shape[-3]:
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
            v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
        s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
        if is_causal:
            s = s.masked_fill(
                ~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), float("-inf")
            )
        if m is not None:
            s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
        w = torch.ops.aten._safe_softmax(s, -1)
        generator = torch.Generator(w.device).manual_seed(int(seed))
        draws = torch.rand(w.shape, generator=generator, dtype=torch.float32, device=w.device)
        keep = draws >= dropout_p
        return (w * keep / (1 - dropout_p)) @ v


@torch.library.custom_op("torch2xla::sdpa_dropout", mutates_args=())
def sdpa_dropout(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    autocast_dtype: torch.dtype | None,
    seed: torch.Tensor,
) -> torch.Tensor:
    """``sdpa`` with dropout, its mask drawn from ``seed`` (an int32 scalar on the CPU): the
    same seed gives the same mask."""
    return _eager_dropout(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, autocast_dtype, seed
    )


@sdpa_dropout.register_fake
def _sdpa_dropout_fake(
    query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, autocast_dtype, seed
):
    return _sdpa_fake(query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype)


# the same seed draws the same mask, so the recomputation is the forward
sdpa_dropout.register_autograd(_recomputing_backward(_eager_dropout), setup_context=_setup)


@sdpa_dropout.register_vmap
def _sdpa_dropout_vmap(info, in_dims, *args):
    # Once per batch element: each element's mask is drawn from its own seed, which is the
    # same one for all (randomness="same") or one per element ("different") as vmap drew it.
    return _vmap.per_element(sdpa_dropout, info, in_dims, args)


def _autocast_operands(autocast_dtype, *xs):
    if autocast_dtype is None:
        return xs

    def cast(x):
        if x is None or not jnp.issubdtype(x.dtype, jnp.floating):
            return x
        return x.astype(jax_dtype(_cast_to(torch_dtype(x.dtype), autocast_dtype)))

    return tuple(cast(x) for x in xs)


@register(torch.ops.torch2xla.sdpa.default)
def _sdpa_lowering(query, key, value, attn_mask, is_causal, scale, enable_gqa, autocast_dtype):
    query, key, value, attn_mask = _autocast_operands(autocast_dtype, query, key, value, attn_mask)
    return scaled_dot_product_attention(
        query, key, value, attn_mask, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa
    )


@register(torch.ops.torch2xla.sdpa_dropout.default)
def _sdpa_dropout_lowering(
    query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, autocast_dtype, seed
):
    query, key, value, attn_mask = _autocast_operands(autocast_dtype, query, key, value, attn_mask)
    return attention(
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        is_causal,
        scale,
        enable_gqa,
        seed=seed.astype(jnp.uint32),
    )[0]


__all__ = ["sdpa", "sdpa_dropout"]
