"""The op registry: one lowering per ATen overload, one module per op family.

``LOWERINGS`` maps ``torch.ops.aten.<op>.<overload>`` objects to functions that take the
overload's arguments (JAX arrays in place of tensors) and return JAX arrays.
``NOT_LOWERED`` lists the ops deliberately left without a lowering, each with a typed reason;
``DATA_DEPENDENT`` holds those of them that always run in eager PyTorch because their output
shape depends on tensor values. ``where_is(aten.relu.default)`` says where a lowering lives
(``torch2xla/ops/_elementwise.py:278``); lowerings made by a factory are named after their op.

Modules: ``_elementwise`` (pointwise math, type promotion), ``_activations`` (gelu, silu,
hardtanh/relu6, elu, softplus, logit), ``_clamp`` (clamp, fmax and fmin
with each torch version's derivative), ``_reduction``, ``_shape`` (views,
creation, strided views), ``_index`` (gather/scatter), ``_sort`` (order statistics, cumulative
extremes, sorted search, histograms), ``_linalg`` (products), ``_norms`` (vector norms,
distances), ``_linalg_extra`` (factorizations, solvers), ``_nn`` (conv, norms, softmax, attention), ``_pooling``
(max, average and adaptive average pooling), ``_nn_extra`` (adaptive max pool, grid sampling,
embedding bags, anti-aliased resize),
``_rnn`` (LSTM/GRU/RNN layers as scans), ``_sdpa`` (sdpa kept whole through export),
``_padded`` (ops reading a padded dimension's real length at run time, for bucketing),
``_hops`` (higher-order ops: ``torch.cond``, loops, scans, ``flex_attention``), ``_fft``, ``_fake_quant`` (fake quantization for QAT), ``_random`` (with ``_gamma_grad``: eager's derivative of gamma draws), ``_special`` (special functions, complex views), ``_derivatives`` (ops
lowered with eager's derivative formulas at boundaries and zeros), ``_vision`` (torchvision's
ops, registered once torchvision is loaded), ``_transformers`` (transformers' grouped product
of mixtures of experts, likewise), ``_backward`` (ATen backward
ops), ``_activation_backward`` (activations' backward ops with eager's kernels at NaN), ``_effects`` (value checks and effect tokens), ``_coverage`` (what is not lowered and
why).
"""

from torch2xla.ops import (  # noqa: F401
    _activation_backward,
    _activations,
    _arithmetic,
    _autodiff,
    _backward,
    _binary_math,
    _checks,
    _clamp,
    _custom_function,
    _derivatives,
    _distance,
    _effects,
    _elementwise,
    _fake_quant,
    _fft,
    _gamma_grad,
    _hops,
    _index,
    _linalg,
    _linalg_extra,
    _minmax,
    _nn,
    _nn_extra,
    _norms,
    _padded,
    _pooling,
    _random,
    _reduction,
    _resize,
    _rnn,
    _sdpa,
    _shape,
    _sort,
    _special,
    _transformers,
    _vision,
)
from torch2xla.ops._coverage import (
    DATA_DEPENDENT,
    NOT_LOWERED,
    NotLowered,
    Why,
    dtype_without_xla,
    quantized_reason,
)
from torch2xla.ops._linalg_extra import NO_JAX_GRADIENT, no_jax_gradient
from torch2xla.ops._registry import LOWERINGS, ctx, defer, register, where_is

defer("torchvision", _vision.register_lowerings)
defer("transformers", _transformers.register_lowerings)

__all__ = [
    "DATA_DEPENDENT",
    "LOWERINGS",
    "NOT_LOWERED",
    "NO_JAX_GRADIENT",
    "NotLowered",
    "Why",
    "ctx",
    "dtype_without_xla",
    "no_jax_gradient",
    "quantized_reason",
    "register",
    "where_is",
]
