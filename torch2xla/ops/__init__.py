"""The op registry: one lowering per ATen overload, one module per op family.

``LOWERINGS`` maps ``torch.ops.aten.<op>.<overload>`` objects to functions that take the
overload's arguments (JAX arrays in place of tensors) and return JAX arrays.
``DATA_DEPENDENT`` lists ops that are lowered nowhere because their output shape depends on
tensor values; they always run in eager PyTorch.
"""

from torch._ops import ops as _ops

from torch2xla.ops import _autodiff, _checks, _elementwise, _index, _linalg, _nn, _random, _reduction, _shape  # noqa: F401
from torch2xla.ops._registry import LOWERINGS, ctx, register

_aten = _ops.aten

DATA_DEPENDENT: dict = {
    _aten.nonzero.default: "output shape depends on tensor values",
    _aten.masked_select.default: "output shape depends on tensor values",
    _aten._local_scalar_dense.default: "reads a tensor value into Python (.item())",
    _aten.unique_dim.default: "output shape depends on tensor values",
    _aten._unique2.default: "output shape depends on tensor values",
    _aten.unique_consecutive.default: "output shape depends on tensor values",
}

__all__ = ["DATA_DEPENDENT", "LOWERINGS", "ctx", "register"]
