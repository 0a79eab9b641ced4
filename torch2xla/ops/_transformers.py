"""transformers' ops (``torch.ops.transformers``): the grouped matrix product of its mixtures
of experts.

Under ``torch.compile``, transformers runs the experts of every mixture-of-experts model
(Mixtral, Qwen-MoE, ...) through ``torch.ops.transformers.grouped_mm_fallback`` unless the
weights are bfloat16 (then ``torch._grouped_mm``): an opaque custom op whose eager kernel loops
over the experts' row ranges. torch2xla never imports transformers: ``register_lowerings`` runs
the first time the registry is asked about an op of the ``transformers`` namespace.
"""

from __future__ import annotations

import jax
import torch

from torch2xla.ops._common import out_dtype
from torch2xla.ops._linalg import grouped_product
from torch2xla.ops._registry import register


def register_lowerings() -> None:
    ops = torch.ops.transformers
    if hasattr(ops, "grouped_mm_fallback"):
        register(ops.grouped_mm_fallback.default)(grouped_mm_fallback)
    if hasattr(ops, "grouped_mm_fallback_backward"):
        register(ops.grouped_mm_fallback_backward.default)(grouped_mm_fallback_backward)


def grouped_mm_fallback(input, weight, offs):
    """Rows ``offs[g-1]:offs[g]`` of ``input`` (S, K) times ``weight[g]`` (G, K, N); rows past
    ``offs[-1]`` are zeros, as transformers' kernel leaves them."""
    return grouped_product(input, weight, offs, out_dtype())


def grouped_mm_fallback_backward(input, weight, offs, grad_output):
    """(grad_input, grad_weight) of ``grouped_mm_fallback``: zeros for the rows past
    ``offs[-1]`` and for the experts that got no rows, as transformers' kernel."""
    result = out_dtype(0)
    _, vjp = jax.vjp(lambda i, w: grouped_product(i, w, offs, result), input, weight)
    return vjp(grad_output.astype(result))
