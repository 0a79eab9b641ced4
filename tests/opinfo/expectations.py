"""What the OpInfo suite expects of each op: expected failures with their cause, ops whose values
are random, comparison rules, and the fast default subset.

Every record names an op_db entry (``name.variant``); ``tests/test_opinfo.py`` checks that each
still exists, that every expected failure still fails (so a fixed op gets its record removed),
and ``scripts/gen_ops_doc.py`` prints the reasons in ``docs/ops.md``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import torch

from .harness import FORWARD, GRAD, INPLACE, Expect

f32, f64, bf16, i64, b8 = torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool
ALL_CHECKS = (FORWARD, INPLACE, GRAD)


class Cause(enum.Enum):
    """Why an op fails, by kind."""

    DATA_DEPENDENT = "output shape or a Python value depends on tensor values"
    DYNAMO = "Dynamo cannot capture the call as one graph"
    NO_JAX = "no JAX counterpart to lower to"
    TIES = "order of equal elements is unspecified"
    DTYPE = "dtype without a JAX counterpart"
    DUPLICATES = "result with repeated indices is unspecified"
    GRADIENT = "JAX has no gradient rule for it"
    EXPORT = "AOTAutograd cannot export it"
    EAGER = "eager's own result is wrong (checked by hand)"


@dataclasses.dataclass(frozen=True)
class XFail:
    """An expected failure of ``op`` for ``checks`` in ``dtypes`` (None: every dtype)."""

    op: str
    cause: Cause
    reason: str
    dtypes: tuple[torch.dtype, ...] | None = None
    checks: tuple[str, ...] = ALL_CHECKS

    def matches(self, check: str, dtype: str) -> bool:
        in_dtypes = self.dtypes is None or dtype in {str(d).removeprefix("torch.") for d in
                                                    self.dtypes}
        return check in self.checks and in_dtypes


@dataclasses.dataclass(frozen=True)
class Random:
    """An op whose values are random or uninitialized: compared by shape and dtype (its
    distribution is checked in ``test_opinfo.py::test_random_distribution``)."""

    op: str
    reason: str
    # Only these samples are random (None: all of them).
    sample: Callable[[Any], bool] | None = None


@dataclasses.dataclass(frozen=True)
class Normalize:
    """Outputs defined only up to a gauge (eigenvector signs): both sides are brought to one
    representative before comparing."""

    op: str
    fn: Callable[[Any], Any]
    reason: str


def _column_signs(v: torch.Tensor) -> torch.Tensor:
    """Each column scaled so that its largest-magnitude entry is real and positive."""
    if v.numel() == 0:
        return v
    idx = v.abs().argmax(dim=-2, keepdim=True)
    pivot = v.gather(-2, idx)
    phase = pivot / pivot.abs().clamp_min(torch.finfo(v.abs().dtype).tiny)
    return v / phase


def _eigenvectors(out: Any) -> Any:
    values, vectors = out
    return values, _column_signs(vectors)


# -- expected failures ---------------------------------------------------------------------------
_DD, _DY, _NJ, _TI, _DT, _DU, _GR = (Cause.DATA_DEPENDENT, Cause.DYNAMO, Cause.NO_JAX, Cause.TIES,
                                     Cause.DTYPE, Cause.DUPLICATES, Cause.GRADIENT)
_EX, _EG = Cause.EXPORT, Cause.EAGER

XFAILS: tuple[XFail, ...] = (
    # Data-dependent shapes or Python values: XLA programs have static shapes.
    XFail("allclose", _DD, "returns a Python bool computed from tensor values"),
    XFail("equal", _DD, "returns a Python bool computed from tensor values"),
    XFail("masked_select", _DD, "one output element per True in the mask"),
    XFail("nonzero", _DD, "one output row per nonzero element"),
    XFail("argwhere", _DD, "one output row per nonzero element"),
    XFail("unique", _DD, "one output element per distinct value"),
    XFail("unique_consecutive", _DD, "one output element per run of equal values"),
    XFail("repeat_interleave", _DD, "with a repeats tensor (4th float32 sample) the output "
          "length is its sum", dtypes=(f32,), checks=(FORWARD,)),
    XFail("bincount", _DD, "output length is the largest input value"),
    XFail("nn.functional.one_hot", _DD, "num_classes=-1 takes the class count from the data"),
    XFail("combinations", _DD, "torch implements it with masked_select"),
    XFail("cov", _DD, "torch's implementation checks weights with a data-dependent branch"),
    XFail("corrcoef", _DD, "torch's implementation checks weights with a data-dependent branch"),
    XFail("narrow", _DD, "a tensor start index is read with .item()"),
    XFail("tensor_split", _DD, "tensor split points are read with .item()"),
    XFail("take", _DD, "for a 0-d index (3rd float32 sample) torch's bounds check reads the "
          "index value (.item())", dtypes=(f32,), checks=(FORWARD, GRAD)),
    XFail("nn.functional.ctc_loss", _DD, "aten._ctc_loss has a data-dependent output shape"),
    XFail("nn.functional.gaussian_nll_loss", _DD, "validates var with a data-dependent branch"),
    XFail("linalg.lstsq", _DD, "aten.linalg_lstsq has a data-dependent output shape"),
    XFail("linalg.lstsq.grad_oriented", _DD,
          "aten.linalg_lstsq has a data-dependent output shape"),
    # Dynamo refuses or breaks the graph.
    XFail("sparse.sampled_addmm", _DY, "torch.compile does not support sparse tensors"),
    XFail("sparse.mm.reduce", _DY, "torch.compile does not support sparse tensors"),
    XFail("to_sparse", _DY, "torch.compile does not support sparse tensors"),
    XFail("resize_", _DY, "Dynamo does not trace Tensor.resize_"),
    XFail("resize_as_", _DY, "Dynamo does not trace Tensor.resize_as_"),
    XFail("nn.functional.linear_cross_entropy.chunked", _DY, "calls warnings.warn"),
    XFail("nn.functional.linear_cross_entropy.chunked_none", _DY, "calls warnings.warn"),
    XFail("squeeze", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    XFail("squeeze.multiple", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    XFail("unsqueeze", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    XFail("transpose", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    XFail("t", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    XFail("as_strided", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    XFail("as_strided.partial_views", _DY, "in-place view op on a graph input",
          checks=(INPLACE,)),
    *(XFail(f"polygamma.polygamma_n_{n}", _EX, "aten.polygamma_ takes self first but is not "
            "functionalized (its schema puts n second)", checks=(INPLACE,)) for n in range(5)),
    # No JAX counterpart.
    XFail("chalf", _DT, "JAX has no complex32"),
    XFail("linalg.ldl_factor", _NJ, "no LDL^T factorization in JAX"),
    XFail("linalg.ldl_factor_ex", _NJ, "no LDL^T factorization in JAX"),
    XFail("special.bessel_y1", _EG, "eager's float64 bessel_y1 is off by up to ~3e-7 (at "
          "x=5.57606: eager -0.0489863143, scipy and ours -0.0489859933)", dtypes=(f64,),
          checks=(FORWARD,)),
    # Ties and duplicates: torch's own answer is one of several valid ones.
    XFail("sort", _TI, "torch's unstable sort orders ties its own way (ours is stable)",
          dtypes=(bf16, b8), checks=(FORWARD,)),
    XFail("argsort", _TI, "torch's unstable sort orders ties its own way (ours is stable)",
          dtypes=(bf16, b8), checks=(FORWARD,)),
    XFail("topk", _TI, "which of equal elements topk returns is unspecified",
          dtypes=(bf16, i64), checks=(FORWARD,)),
    XFail("kthvalue", _TI, "which of equal elements kthvalue indexes is unspecified",
          dtypes=(i64,), checks=(FORWARD,)),
    XFail("as_strided_scatter", _EG, "eager's gradient for self is nonzero where src overwrites "
          "self and zero where self is kept (the reverse of the function's derivative)",
          checks=(GRAD,)),
    XFail("special.bessel_j0", _EG, "eager's float64 bessel_j0 is off by up to ~2e-7 (at "
          "x=-5.4215: eager -0.0337815018, mpmath and ours -0.0337813128)", dtypes=(f64,),
          checks=(FORWARD,)),
    XFail("linalg.eigvals", _GR, "JAX differentiates eigenvalues of non-symmetric matrices "
          "through eig's eigenvector rule, which it refuses", checks=(GRAD,)),
    XFail("linalg.ldl_solve", _NJ, "no LDL^T solve in JAX"),
    # Missing gradient rules in JAX.
    XFail("linalg.eig", _GR, "JAX differentiates eigenvectors of non-symmetric matrices only "
          "under assumptions it cannot check", checks=(GRAD,)),
    XFail("ormqr", _GR, "JAX has no gradient for ormqr", checks=(GRAD,)),
    XFail("linalg.householder_product", _GR, "JAX has no gradient for householder_product",
          checks=(GRAD,)),
)

# -- random and uninitialized values -----------------------------------------------------------
_RNG = "random values: XLA draws from its own generator (seeded from torch's)"
_EMPTY = "uninitialized values"
RANDOM: tuple[Random, ...] = (
    *(Random(name, _RNG) for name in (
        "bernoulli", "normal", "normal.number_mean", "normal.in_place", "uniform", "cauchy",
        "exponential", "geometric", "log_normal", "multinomial", "rand_like", "randn_like",
        "randint_like", "randint", "randn", "nn.functional.dropout", "nn.functional.dropout2d",
        "nn.functional.dropout3d", "nn.functional.alpha_dropout",
        "nn.functional.feature_alpha_dropout.with_train", "nn.functional.rrelu",
        "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
        "svd_lowrank", "pca_lowrank",
    )),
    *(Random(name, _EMPTY) for name in (
        "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
        "empty_permuted",
    )),
    Random("nn.functional.scaled_dot_product_attention", "samples with dropout",
           lambda s: s.kwargs.get("dropout_p", 0) > 0),
    # dropout_p is the 11th positional argument of multi_head_attention_forward.
    Random("nn.functional.multi_head_attention_forward", "samples with dropout",
           lambda s: s.kwargs.get("training", True) and len(s.args) > 9 and s.args[9] > 0),
)

NORMALIZE: tuple[Normalize, ...] = (
    Normalize("linalg.eigh", _eigenvectors, "eigenvectors are unique up to sign"),
    Normalize("linalg.eig", _eigenvectors, "eigenvectors are unique up to a unit factor"),
)

# -- the fast default subset -------------------------------------------------------------------
DEFAULT_SUBSET: tuple[str, ...] = (
    # elementwise
    "abs", "add", "sub", "mul", "div.no_rounding_mode", "div.floor_rounding",
    "div.trunc_rounding", "pow", "exp", "log", "sqrt", "rsqrt", "sin", "tanh", "sigmoid", "erf",
    "clamp", "where", "maximum", "fmod", "remainder", "atan2", "lerp", "addcmul", "bitwise_and",
    "eq", "lt", "logical_and", "isnan", "nan_to_num", "sign", "round", "floor_divide", "xlogy",
    "__rsub__", "nn.functional.gelu", "nn.functional.silu", "nn.functional.relu",
    "nn.functional.leaky_relu", "nn.functional.elu", "nn.functional.softplus",
    "nn.functional.hardtanh", "logit", "digamma", "polygamma.polygamma_n_1", "special.i0e",
    # reductions and scans
    "sum", "mean", "prod", "amax", "argmax", "max.reduction_with_dim", "var", "std_mean",
    "logsumexp", "all", "any", "cumsum", "cumprod", "linalg.vector_norm", "nansum",
    "count_nonzero", "median", "kthvalue", "cummax", "logcumsumexp",
    # shapes and views
    "reshape", "view", "permute", "transpose", "expand", "squeeze", "unsqueeze", "cat", "stack",
    "split", "chunk", "flip", "roll", "repeat", "tile", "select", "slice", "diagonal", "tril",
    "unfold", "movedim", "flatten", "constant_pad_nd", "nn.functional.pad.reflect",
    "as_strided", "view_as_real",
    # indexing
    "index_select", "gather", "scatter", "scatter_add", "scatter_reduce.sum", "index_put",
    "index_add", "__getitem__", "masked_fill", "masked_scatter", "take_along_dim", "put", "sort",
    "topk", "searchsorted", "histc",
    # creation
    "arange", "full", "zeros_like", "ones", "linspace", "eye", "tril_indices",
    # linear algebra
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linalg.solve", "linalg.inv",
    "linalg.cholesky", "linalg.qr", "linalg.svd", "linalg.eigh", "linalg.det", "cdist",
    # neural networks
    "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.conv1d",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.adaptive_max_pool2d", "nn.functional.batch_norm", "nn.functional.layer_norm",
    "nn.functional.group_norm", "nn.functional.rms_norm", "softmax", "log_softmax",
    "nn.functional.cross_entropy", "nn.functional.nll_loss", "nn.functional.mse_loss",
    "nn.functional.binary_cross_entropy_with_logits", "nn.functional.embedding",
    "nn.functional.embedding_bag", "nn.functional.scaled_dot_product_attention",
    "nn.functional.interpolate.nearest", "nn.functional.linear", "nn.functional.unfold",
    # fft, special functions
    "fft.fft", "fft.rfft", "fft.irfft", "special.bessel_j0", "special.chebyshev_polynomial_t",
    # random (shapes and dtypes here; distributions in test_random_distribution)
    "bernoulli", "normal", "rand_like", "randint", "nn.functional.dropout", "multinomial",
    # expected failures stay honest
    "nonzero", "unique",
)


def xfail_for(name: str, check: str, dtype: str) -> XFail | None:
    return next((x for x in XFAILS if x.op == name and x.matches(check, dtype)), None)


def expect_for(name: str) -> Expect:
    random = next((r for r in RANDOM if r.op == name), None)
    normalize = next((n.fn for n in NORMALIZE if n.op == name), None)
    if random is None:
        return Expect(normalize=normalize)
    if random.sample is None:
        return Expect(values=False, normalize=normalize)
    return Expect(random_sample=random.sample, normalize=normalize)


def all_records() -> list[Any]:
    return [*XFAILS, *RANDOM, *NORMALIZE]
