"""The ops that have no lowering, each with a typed reason.

``tests/test_ops_coverage.py`` checks that every overload tagged ``torch.Tag.core``, and every
copying variant of a view (``select_copy``, ...), is lowered, decomposed before it reaches us,
or listed here.
"""

from __future__ import annotations

import dataclasses
import enum

import torch
import torch.utils._pytree as pytree
from torch._ops import ops

from torch2xla.runtime._interop import TORCH_TO_JAX_DTYPE

aten = ops.aten


class Why(enum.Enum):
    """Why an op has no lowering."""

    #: The output's shape (or a Python value) depends on tensor values; XLA needs static shapes.
    DATA_DEPENDENT = "data-dependent output shape"
    #: The op mutates or writes an ``out=`` argument; functionalization replaces it by a
    #: functional op before the graph reaches the backend, so it never needs a lowering.
    FUNCTIONALIZED = "replaced by functionalization"
    #: Dynamo refuses to trace the op (a graph break), so no graph handed to the backend has it.
    NOT_TRACED = "not traced by Dynamo"
    #: The op reads or builds a sparse or nested tensor; XLA arrays are dense and strided.
    LAYOUT = "sparse or nested layout"
    #: The op makes or reads forward-mode AD dual tensors; the backend differentiates in
    #: reverse mode only.
    FORWARD_AD = "forward-mode AD"
    #: The op makes or reads a quantized tensor (``torch.qint8``, ...): XLA has no such type.
    QUANTIZED = "quantized dtype"
    #: An op that only torch's own test suite calls.
    TORCH_TESTS = "torch's own tests"


@dataclasses.dataclass(frozen=True)
class NotLowered:
    """An op without a lowering: which one, the kind of reason, and the details."""

    op: torch._ops.OpOverload
    why: Why
    detail: str

    def __str__(self) -> str:
        return f"{self.op}: {self.why.value} ({self.detail})"


NOT_LOWERED: tuple[NotLowered, ...] = (
    NotLowered(aten.nonzero.default, Why.DATA_DEPENDENT, "one row per nonzero element"),
    NotLowered(aten.masked_select.default, Why.DATA_DEPENDENT, "one element per True"),
    NotLowered(
        aten._local_scalar_dense.default,
        Why.DATA_DEPENDENT,
        "reads a tensor value into Python (.item())",
    ),
    NotLowered(aten.unique_dim.default, Why.DATA_DEPENDENT, "one entry per distinct value"),
    NotLowered(aten._unique2.default, Why.DATA_DEPENDENT, "one entry per distinct value"),
    NotLowered(aten.unique_consecutive.default, Why.DATA_DEPENDENT, "one entry per run"),
    NotLowered(
        aten._native_batch_norm_legit.default,
        Why.FUNCTIONALIZED,
        "updates running stats in place; becomes _native_batch_norm_legit_functional",
    ),
    NotLowered(aten.atan2.out, Why.FUNCTIONALIZED, "out= variant; becomes atan2.default"),
    NotLowered(
        aten.resize_.default,
        Why.NOT_TRACED,
        "resizes a tensor's storage in place; Dynamo breaks the graph on Tensor.resize_",
    ),
    # The copying variants of views (functionalization's form of each view) without a lowering.
    *(
        NotLowered(op, Why.LAYOUT, "a view of a sparse tensor's parts")
        for op in (
            aten._indices_copy.default,
            aten._values_copy.default,
            aten.indices_copy.default,
            aten.values_copy.default,
            aten.crow_indices_copy.default,
            aten.col_indices_copy.default,
            aten.ccol_indices_copy.default,
            aten.row_indices_copy.default,
            aten._sparse_broadcast_to_copy.default,
        )
    ),
    *(
        NotLowered(op, Why.LAYOUT, "a view between a nested tensor and its buffer")
        for op in (
            aten._nested_get_values_copy.default,
            aten._nested_view_from_buffer_copy.default,
            aten._nested_view_from_jagged_copy.default,
        )
    ),
    *(
        NotLowered(op, Why.QUANTIZED, "quantized tensors (torch.qint8, ...) have no XLA type")
        for op in (
            aten.quantize_per_tensor.default,
            aten.quantize_per_tensor.tensor_qparams,
            aten.quantize_per_tensor.tensors,
            aten.quantize_per_tensor_dynamic.default,
            aten.quantize_per_channel.default,
            aten.dequantize.self,
            aten.dequantize.tensors,
            aten.int_repr.default,
            aten.q_scale.default,
            aten.q_zero_point.default,
            aten.q_per_channel_scales.default,
            aten.q_per_channel_zero_points.default,
            aten.q_per_channel_axis.default,
            aten._make_per_tensor_quantized_tensor.default,
            aten._make_per_channel_quantized_tensor.default,
        )
    ),
    NotLowered(aten._fw_primal_copy.default, Why.FORWARD_AD, "the primal of a dual tensor"),
    NotLowered(aten._make_dual_copy.default, Why.FORWARD_AD, "makes a dual tensor"),
    NotLowered(
        aten._test_autograd_multiple_dispatch_view_copy.default,
        Why.TORCH_TESTS,
        "tests autograd's dispatch of views",
    ),
)

#: op -> reason, for the ops that must run in eager PyTorch whatever we do.
DATA_DEPENDENT: dict[torch._ops.OpOverload, str] = {
    r.op: r.detail for r in NOT_LOWERED if r.why is Why.DATA_DEPENDENT
}

#: op -> reason, for the ops of quantized tensors (and every op of torch's ``quantized``
#: namespace, ``quantized_reason``): they run in eager PyTorch.
QUANTIZED: dict[torch._ops.OpOverload, str] = {
    r.op: r.detail for r in NOT_LOWERED if r.why is Why.QUANTIZED
}


def quantized_reason(op: object) -> str | None:
    """Why ``op`` runs in eager PyTorch where it reads or makes a quantized tensor, else None."""
    if op in QUANTIZED:
        return QUANTIZED[op]
    if getattr(op, "namespace", None) == "quantized":
        return "a quantized kernel: quantized tensors (torch.qint8, ...) have no XLA type"
    return None


def dtype_without_xla(node: torch.fx.Node) -> torch.dtype | None:
    """A dtype of ``node``'s output or tensor arguments that XLA has no type for (complex32,
    the float8 variants ml_dtypes lacks, ...): such a node runs in eager PyTorch."""
    values = [node.meta.get("val"), *(a.meta.get("val") for a in node.all_input_nodes)]
    for value in pytree.tree_leaves(values):
        if isinstance(value, torch.Tensor) and value.dtype not in TORCH_TO_JAX_DTYPE:
            return value.dtype
    return None
