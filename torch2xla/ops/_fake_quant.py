"""Fake quantization (quantization-aware training): eager's CPU kernels, value for value.

``torch.fake_quantize_per_tensor_affine``/``per_channel_affine`` (and the ``FakeQuantize``
modules) reach the graph as the ``*_cachemask`` ops: the fake-quantized value and the mask of
the elements inside ``[quant_min, quant_max]``, through which the gradient passes (straight
through, zero outside). The learnable variants are not lowered (their backward has formulas of
its own for scale and zero point): they run in eager PyTorch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from torch._ops import ops

from torch2xla.ops._registry import ctx, register

aten = ops.aten
_INT64_MIN = np.iinfo(np.int64).min


def _to_int64(v):
    """``static_cast<int64_t>(v)`` (and ``lrint``) as x86 computes it: NaN and values out of
    int64's range give INT64_MIN.

    # NOTE: C++ leaves the conversion undefined there; XLA's convert saturates. This follows
    # eager's x86 builds (an ARM build saturates): fake quantization of inf per channel is
    # quant_min there, not quant_max.
    """
    bad = ~(jnp.abs(v) < 2.0**63)
    return jnp.where(bad, _INT64_MIN, jnp.where(bad, 0, v).astype(jnp.int64))


def _opmath(x):
    """The dtype eager multiplies ``x`` by a float scale in: float64 for float64, else float32
    (``c10::Half * float`` is float)."""
    return jnp.float64 if x.dtype == jnp.float64 else jnp.float32


@jax.custom_jvp
def _straight_through(x, value, mask):
    """``value``, with ``x``'s tangent passed where ``mask`` (eager's
    ``fake_quantize_per_tensor_affine_cachemask_backward``: ``grad * mask``)."""
    return value


@_straight_through.defjvp
def _straight_through_jvp(primals, tangents):
    _, value, mask = primals
    tx = tangents[0]
    return value, tx * mask.astype(tx.dtype)  # (NaN * 0 is NaN, as eager's product)


def _per_tensor(x, scale, zero_point, quant_min: int, quant_max: int, enabled=None):
    # eager's ``fake_quantize_tensor_cachemask_kernel``:
    #   qval_f = z + nearbyint(x * (1.0f / sc))            (in float; double for double x)
    #   qval = (int64) fmin(fmax(qval_f, quant_min), quant_max)     (NaN: quant_min)
    #   out = (qval - z) * sc                              (in float, for every dtype)
    #   mask = quant_min <= qval_f && qval_f <= quant_max
    # and where ``enabled`` is False, out = x and mask = true.
    c = _opmath(x)
    scale = jnp.asarray(scale, jnp.float32)
    inv = (jnp.float32(1.0) / scale).astype(c)
    z = jnp.asarray(zero_point, jnp.int64)
    qf = z.astype(c) + jnp.round(x.astype(c) * inv)
    clipped = jnp.where(jnp.isnan(qf), quant_min, jnp.clip(qf, quant_min, quant_max))
    q = clipped.astype(jnp.int64)
    value = ((q - z).astype(jnp.float32) * scale).astype(x.dtype)
    mask = (qf >= quant_min) & (qf <= quant_max)
    if enabled is not None:
        value, mask = jnp.where(enabled, value, x), jnp.where(enabled, mask, True)
    return _straight_through(x, jax.lax.stop_gradient(value), mask), mask


@register(aten.fake_quantize_per_tensor_affine_cachemask.default)
def fake_quantize_per_tensor_affine_cachemask(self, scale, zero_point, quant_min, quant_max):
    return _per_tensor(self, scale, zero_point, quant_min, quant_max)


@register(aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default)
def _fake_quantize_per_tensor_affine_cachemask_tensor_qparams(
    self, scale, zero_point, fake_quant_enabled, quant_min, quant_max
):
    # (scale read as float, the zero point as int32: eager's kernel reads their first element)
    # (the gradient passes through the mask alone: a ``where`` on the output would add a zero
    # of the wrong sign to eager's ``grad * mask``)
    return _per_tensor(
        self,
        scale.reshape(-1)[0].astype(jnp.float32),
        zero_point.reshape(-1)[0].astype(jnp.int32),
        quant_min,
        quant_max,
        fake_quant_enabled.reshape(-1)[0] != 0,
    )


@register(aten.fake_quantize_per_channel_affine_cachemask.default)
def fake_quantize_per_channel_affine_cachemask(self, scale, zero_point, axis, quant_min, quant_max):
    # eager's ``fake_quant_per_channel_cachemask_cpu``: with an integer zero point
    #   qval = (int64)(zp + nearbyint(x * (1.0f / scale)))
    # with a floating one
    #   qval = lrint(zp + x * (1.0f / scale))
    # then out = (fmin(fmax(qval, quant_min), quant_max) - zp) * scale in double, and
    # mask = quant_min <= qval <= quant_max.
    if zero_point.size:  # (eager checks the values: a runtime check, see ``ctx().check``)
        outside = (jnp.min(zero_point) < quant_min) | (jnp.max(zero_point) > quant_max)
        ctx().check(outside, "`zero_point` must be between `quant_min` and `quant_max`.")
    c = _opmath(self)
    shape = [1] * self.ndim
    shape[axis] = -1
    scale = scale.astype(jnp.float32).reshape(shape)
    inv = (jnp.float32(1.0) / scale).astype(c)
    if jnp.issubdtype(zero_point.dtype, jnp.floating):
        zp = zero_point.astype(jnp.float32).reshape(shape)
        q = _to_int64(jnp.round(zp.astype(c) + self.astype(c) * inv))
    else:
        zp = zero_point.astype(jnp.int32).reshape(shape)
        q = _to_int64(zp.astype(c) + jnp.round(self.astype(c) * inv))
    clipped = jnp.clip(q, quant_min, quant_max).astype(jnp.float64)
    value = ((clipped - zp.astype(jnp.float64)) * scale.astype(jnp.float64)).astype(self.dtype)
    mask = (q >= quant_min) & (q <= quant_max)
    return _straight_through(self, jax.lax.stop_gradient(value), mask), mask
