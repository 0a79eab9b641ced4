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

from torch2xla.ops import DATA_DEPENDENT
from torch2xla.runtime._interop import dtype_name

from .harness import ERROR, FORWARD, GRAD, INPLACE, Expect

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
    # Found by the widened suite (reference_inputs, error_inputs, bfloat16 gradients):
    RUNTIME_CHECK = "XLA programs do not check tensor values at run time (issue 22 item 7)"
    KERNEL_CHECK = (
        "eager's kernel rejects the input; torch's fake kernel, which tracing "
        "runs, accepts it, and nothing checks it later"
    )
    FAKE_KERNEL = "torch's fake kernel rejects the input with another error than eager's"
    OUT_ARGUMENT = (
        "eager checks the out= tensor; the functionalized call does not, or "
        "Dynamo refuses the call with its own error"
    )
    DYNAMO_SEMANTICS = "Dynamo traces a call that eager's Python rejects"
    LOWERING_ERROR = "our lowering rejects the input with its own error, not eager's"
    MISSING = "no lowering yet for the overload reference_inputs reach"
    WRONG = "our lowering's result is wrong (found by reference_inputs; to be fixed)"
    UNDEFINED = "eager's value is C++ undefined behaviour (an out-of-range float to integer)"
    EXTREMAL = "differs from eager only at infinite, NaN, huge or pole inputs"
    KINK = "at a point where the function has no derivative, eager picks another gradient"
    BF16_GRADIENT = (
        "bfloat16 gradient less accurate than eager's: JAX's autodiff sums or "
        "rounds in bfloat16 where torch's kernels accumulate in float32"
    )


@dataclasses.dataclass(frozen=True)
class XFail:
    """An expected failure of ``op`` for ``checks`` in ``dtypes`` (None: every dtype)."""

    op: str
    cause: Cause
    reason: str
    dtypes: tuple[torch.dtype, ...] | None = None
    checks: tuple[str, ...] = ALL_CHECKS

    def matches(self, check: str, dtype: str) -> bool:
        in_dtypes = self.dtypes is None or dtype in {dtype_name(d) for d in self.dtypes}
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
_DD, _DY, _NJ, _TI, _DT, _DU, _GR = (
    Cause.DATA_DEPENDENT,
    Cause.DYNAMO,
    Cause.NO_JAX,
    Cause.TIES,
    Cause.DTYPE,
    Cause.DUPLICATES,
    Cause.GRADIENT,
)
_EX, _EG = Cause.EXPORT, Cause.EAGER
_RC, _KC, _FK, _OA = Cause.RUNTIME_CHECK, Cause.KERNEL_CHECK, Cause.FAKE_KERNEL, Cause.OUT_ARGUMENT
_DS, _LE, _MI, _WR = Cause.DYNAMO_SEMANTICS, Cause.LOWERING_ERROR, Cause.MISSING, Cause.WRONG
_XT, _KI, _BF = Cause.EXTREMAL, Cause.KINK, Cause.BF16_GRADIENT
_E, _F, _G = (ERROR,), (FORWARD,), (GRAD,)


def _no_lowering(op: torch._ops.OpOverload) -> str:
    """The reason of an entry whose ATen op ``op`` has no lowering, in the words of its
    ``NOT_LOWERED`` record (one source for that fact; lowering ``op`` fails here at import)."""
    return f"{op} has no lowering: {DATA_DEPENDENT[op]}"


_aten = torch.ops.aten
_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
_OLD = _TORCH < (2, 14)  # torch 2.11-2.13

XFAILS: tuple[XFail, ...] = (
    # Data-dependent shapes or Python values: XLA programs have static shapes.
    XFail("allclose", _DD, "returns a Python bool computed from tensor values"),
    XFail("equal", _DD, "returns a Python bool computed from tensor values"),
    XFail("masked_select", _DD, _no_lowering(_aten.masked_select.default)),
    XFail("nonzero", _DD, _no_lowering(_aten.nonzero.default)),
    XFail("argwhere", _DD, _no_lowering(_aten.nonzero.default)),
    XFail("unique", _DD, _no_lowering(_aten._unique2.default)),
    XFail("unique_consecutive", _DD, _no_lowering(_aten.unique_consecutive.default)),
    XFail(
        "repeat_interleave",
        _DD,
        "with a repeats tensor (4th float32 sample) the output length is its sum",
        dtypes=(f32,),
        checks=(FORWARD,),
    ),
    XFail("bincount", _DD, "output length is the largest input value"),
    XFail("nn.functional.one_hot", _DD, "num_classes=-1 takes the class count from the data"),
    # New in torch 2.14; they run in eager (fallback), with their gradients.
    *(
        ()
        if _OLD
        else (
            XFail("linalg.matrix_sqrth", _MI, "new in torch 2.14: no lowering yet"),
            XFail("linalg.polar", _MI, "new in torch 2.14: no lowering yet"),
        )
    ),
    # torch 2.14 implements combinations without masked_select: it passes there.
    *((XFail("combinations", _DD, "torch implements it with masked_select"),) if _OLD else ()),
    *(
        ()
        if _OLD
        else (
            XFail(
                "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
                Cause.WRONG,
                "torch 2.14's bfloat16 CPU kernel puts one element of sample 1 0.0059 from ours, "
                "ours further from the float32 result than twice eager's error; not analysed yet",
                dtypes=(bf16,),
            ),
        )
    ),
    XFail("cov", _DD, "torch's implementation checks weights with a data-dependent branch"),
    XFail("corrcoef", _DD, "torch's implementation checks weights with a data-dependent branch"),
    XFail("narrow", _DD, "a tensor start index is read with .item()"),
    XFail("tensor_split", _DD, "tensor split points are read with .item()"),
    XFail(
        "take",
        _DD,
        "for a 0-d index (3rd float32 sample) torch's bounds check reads the index value (.item())",
        dtypes=(f32,),
        checks=(FORWARD, GRAD),
    ),
    XFail("nn.functional.ctc_loss", _DD, "aten._ctc_loss has a data-dependent output shape"),
    XFail("nn.functional.gaussian_nll_loss", _DD, "validates var with a data-dependent branch"),
    XFail("linalg.lstsq", _DD, "aten.linalg_lstsq has a data-dependent output shape"),
    XFail("linalg.lstsq.grad_oriented", _DD, "aten.linalg_lstsq has a data-dependent output shape"),
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
    XFail("as_strided.partial_views", _DY, "in-place view op on a graph input", checks=(INPLACE,)),
    *(
        XFail(
            f"polygamma.polygamma_n_{n}",
            _EX,
            "aten.polygamma_ takes self first but is not functionalized (its schema puts n second)",
            checks=(INPLACE,),
        )
        for n in range(5)
    ),
    # No JAX counterpart.
    XFail("chalf", _DT, "JAX has no complex32"),
    XFail("linalg.ldl_factor", _NJ, "no LDL^T factorization in JAX"),
    XFail("linalg.ldl_factor_ex", _NJ, "no LDL^T factorization in JAX"),
    XFail(
        "special.bessel_y1",
        _EG,
        "eager's float64 bessel_y1 is off by up to ~3e-7 (at "
        "x=5.57606: eager -0.0489863143, scipy and ours -0.0489859933)",
        dtypes=(f64,),
        checks=(FORWARD,),
    ),
    # Ties and duplicates: torch's own answer is one of several valid ones.
    XFail(
        "sort",
        _TI,
        "torch's unstable sort orders ties its own way (ours is stable)",
        dtypes=(bf16, b8),
        checks=(FORWARD,),
    ),
    XFail(
        "argsort",
        _TI,
        "torch's unstable sort orders ties its own way (ours is stable)",
        dtypes=(bf16, b8),
        checks=(FORWARD,),
    ),
    XFail(
        "topk",
        _TI,
        "which of equal elements topk returns is unspecified",
        dtypes=(bf16, i64),
        checks=(FORWARD,),
    ),
    XFail(
        "as_strided_scatter",
        _EG,
        "eager's gradient for self is nonzero where src overwrites "
        "self and zero where self is kept (the reverse of the function's derivative)",
        checks=(GRAD,),
    ),
    XFail(
        "special.bessel_j0",
        _EG,
        "eager's float64 bessel_j0 is off by up to ~2e-7 (at "
        "x=-5.4215: eager -0.0337815018, mpmath and ours -0.0337813128)",
        dtypes=(f64,),
        checks=(FORWARD,),
    ),
    XFail(
        "linalg.eigvals",
        _GR,
        "JAX differentiates eigenvalues of non-symmetric matrices "
        "through eig's eigenvector rule, which it refuses",
        checks=(GRAD,),
    ),
    XFail("linalg.ldl_solve", _NJ, "no LDL^T solve in JAX"),
    # Missing gradient rules in JAX.
    XFail(
        "linalg.eig",
        _GR,
        "JAX differentiates eigenvectors of non-symmetric matrices only "
        "under assumptions it cannot check",
        checks=(GRAD,),
    ),
    XFail("ormqr", _GR, "JAX has no gradient for ormqr", checks=(GRAD,)),
    XFail(
        "linalg.householder_product",
        _GR,
        "JAX has no gradient for householder_product",
        checks=(GRAD,),
    ),
    # -- error_inputs: eager raises, the compiled call does not (or raises something else) --
    *(
        XFail(
            name,
            _DS,
            f"Dynamo traces Tensor.{name}(3, t), the unbound method called on an "
            "int, as the operator; eager's Python rejects the descriptor call (TypeError)",
            checks=_E,
        )
        for name in ("__radd__", "__rand__", "__rmul__", "__ror__", "__rxor__")
    ),
    XFail(
        "kthvalue",
        _OA,
        "eager rejects an out= tensor that aliases the input; Dynamo refuses "
        "the out= call with its own error (shape mismatch)",
        checks=_E,
    ),
    XFail(
        "take",
        _OA,
        "eager rejects an out= tensor that aliases the input; Dynamo refuses "
        "the out= call with its own error (shape mismatch)",
        checks=_E,
    ),
    XFail(
        "narrow_copy",
        _FK,
        "an out-of-range dim: the fake kernel raises IndexError, eager RuntimeError",
        checks=_E,
    ),
    XFail(
        "linalg.lstsq",
        _DD,
        "Dynamo stops at aten.linalg_lstsq's data-dependent output "
        "shape before eager's dimension check",
        checks=_E,
    ),
    XFail(
        "linalg.lstsq.grad_oriented",
        _DD,
        "Dynamo stops at aten.linalg_lstsq's "
        "data-dependent output shape before eager's dimension check",
        checks=_E,
    ),
    XFail(
        "masked_select",
        _DD,
        "Dynamo stops at the data-dependent output shape before "
        "eager's check of an out= tensor aliasing the input",
        checks=_E,
    ),
    XFail(
        "nn.functional.gaussian_nll_loss",
        _DD,
        "a data-dependent branch (checking var) "
        "comes before eager's check of the reduction argument",
        checks=_E,
    ),
    # -- reference_inputs --------------------------------------------------------------------
    XFail(
        "special.airy_ai",
        _EG,
        "eager's float64 airy_ai is off by up to ~3e-6 (at "
        "x=-2.11799: eager 0.1515886824, mpmath and ours 0.1515861425)",
        dtypes=(f64,),
        checks=_F,
    ),
    XFail(
        "special.bessel_j1",
        _EG,
        "eager's float64 bessel_j1 is off by up to ~4e-7 (at "
        "x=-5.03513: eager 0.3313086118, mpmath and ours 0.3313082011)",
        dtypes=(f64,),
        checks=_F,
    ),
    XFail(
        "special.bessel_y0",
        _EG,
        "eager's float64 bessel_y0 is off by up to ~2e-7 (at "
        "x=5.09131: eager -0.3206007309, mpmath and ours -0.3206008730)",
        dtypes=(f64,),
        checks=_F,
    ),
    # -- bfloat16 gradients ------------------------------------------------------------------
    XFail(
        "nn.functional.cosine_similarity",
        _BF,
        "torch's composite rounds its steps in bfloat16 at other points than our lowerings "
        "(sample 1, the second input's gradient: 1.2e-3 from float64, eager's 1.0e-3)",
        dtypes=(bf16,),
        checks=_G,
    ),
    XFail(
        "renorm",
        _BF,
        "we differentiate torch's decomposition, which rounds the norm factor's "
        "cotangent to bfloat16; eager's renorm_backward keeps it float32",
        dtypes=(bf16,),
        checks=_G,
    ),
    *(
        XFail(
            name,
            _BF,
            "cotangents of repeated extremes are scattered and summed in bfloat16",
            dtypes=(bf16,),
            checks=_G,
        )
        for name in ("cummax", "cummin")
    ),
    XFail(
        "frexp",
        _BF,
        "the mantissa's gradient (2^-e) is rounded through a bfloat16 "
        "intermediate; eager's is exact",
        dtypes=(bf16,),
        checks=_G,
    ),
    *(
        XFail(
            name,
            _TI,
            "bfloat16 samples have ties, which torch's unstable sort orders its own "
            "way (ours is stable), so the gradient goes to other positions",
            dtypes=(bf16,),
            checks=_G,
        )
        for name in ("sort", "msort")
    ),
    XFail(
        "topk",
        _TI,
        "which of equal bfloat16 elements topk returns is unspecified",
        dtypes=(bf16,),
        checks=_G,
    ),
)

# -- random and uninitialized values -----------------------------------------------------------
_RNG = "random values: XLA draws from its own generator (seeded from torch's)"
_EMPTY = "uninitialized values"
RANDOM: tuple[Random, ...] = (
    *(
        Random(name, _RNG)
        for name in (
            "bernoulli",
            "normal",
            "normal.number_mean",
            "normal.in_place",
            "uniform",
            "cauchy",
            "exponential",
            "geometric",
            "log_normal",
            "multinomial",
            "rand_like",
            "randn_like",
            "randint_like",
            "randint",
            "randn",
            "nn.functional.dropout",
            "nn.functional.dropout2d",
            "nn.functional.dropout3d",
            "nn.functional.alpha_dropout",
            "nn.functional.feature_alpha_dropout.with_train",
            "nn.functional.rrelu",
            "nn.functional.fractional_max_pool2d",
            "nn.functional.fractional_max_pool3d",
            "svd_lowrank",
            "pca_lowrank",
        )
    ),
    *(
        Random(name, _EMPTY)
        for name in (
            "empty",
            "empty_like",
            "new_empty",
            "new_empty_strided",
            "empty_strided",
            "empty_permuted",
        )
    ),
    Random(
        "nn.functional.scaled_dot_product_attention",
        "samples with dropout",
        lambda s: s.kwargs.get("dropout_p", 0) > 0,
    ),
    # dropout_p is the 11th positional argument of multi_head_attention_forward.
    Random(
        "nn.functional.multi_head_attention_forward",
        "samples with dropout",
        lambda s: s.kwargs.get("training", True) and len(s.args) > 9 and s.args[9] > 0,
    ),
)

NORMALIZE: tuple[Normalize, ...] = (
    Normalize("linalg.eigh", _eigenvectors, "eigenvectors are unique up to sign"),
    Normalize("linalg.eig", _eigenvectors, "eigenvectors are unique up to a unit factor"),
)

# -- the fast default subset -------------------------------------------------------------------
DEFAULT_SUBSET: tuple[str, ...] = (
    # elementwise
    "abs",
    "add",
    "sub",
    "mul",
    "div.no_rounding_mode",
    "div.floor_rounding",
    "div.trunc_rounding",
    "pow",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "sin",
    "tanh",
    "sigmoid",
    "erf",
    "clamp",
    "where",
    "maximum",
    "fmod",
    "remainder",
    "atan2",
    "lerp",
    "addcmul",
    "bitwise_and",
    "eq",
    "lt",
    "logical_and",
    "isnan",
    "nan_to_num",
    "sign",
    "round",
    "floor_divide",
    "xlogy",
    "__rsub__",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.relu",
    "nn.functional.leaky_relu",
    "nn.functional.elu",
    "nn.functional.softplus",
    "nn.functional.hardtanh",
    "logit",
    "digamma",
    "polygamma.polygamma_n_1",
    "special.i0e",
    # reductions and scans
    "sum",
    "mean",
    "prod",
    "amax",
    "argmax",
    "max.reduction_with_dim",
    "var",
    "std_mean",
    "logsumexp",
    "all",
    "any",
    "cumsum",
    "cumprod",
    "linalg.vector_norm",
    "nansum",
    "count_nonzero",
    "median",
    "kthvalue",
    "cummax",
    "logcumsumexp",
    # shapes and views
    "reshape",
    "view",
    "permute",
    "transpose",
    "expand",
    "squeeze",
    "unsqueeze",
    "cat",
    "stack",
    "split",
    "chunk",
    "flip",
    "roll",
    "repeat",
    "tile",
    "select",
    "slice",
    "diagonal",
    "tril",
    "unfold",
    "movedim",
    "flatten",
    "constant_pad_nd",
    "nn.functional.pad.reflect",
    "as_strided",
    "view_as_real",
    # indexing
    "index_select",
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce.sum",
    "index_put",
    "index_add",
    "__getitem__",
    "masked_fill",
    "masked_scatter",
    "take_along_dim",
    "put",
    "sort",
    "topk",
    "searchsorted",
    "histc",
    # creation
    "arange",
    "full",
    "zeros_like",
    "ones",
    "linspace",
    "eye",
    "tril_indices",
    # linear algebra
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "einsum",
    "linalg.solve",
    "linalg.inv",
    "linalg.cholesky",
    "linalg.qr",
    "linalg.svd",
    "linalg.eigh",
    "linalg.det",
    "cdist",
    # neural networks
    "nn.functional.conv2d",
    "nn.functional.conv_transpose2d",
    "nn.functional.conv1d",
    "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d",
    "nn.functional.adaptive_max_pool2d",
    "nn.functional.batch_norm",
    "nn.functional.layer_norm",
    "nn.functional.group_norm",
    "nn.functional.rms_norm",
    "softmax",
    "log_softmax",
    "nn.functional.cross_entropy",
    "nn.functional.nll_loss",
    "nn.functional.mse_loss",
    "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.embedding",
    "nn.functional.embedding_bag",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.interpolate.nearest",
    "nn.functional.linear",
    "nn.functional.unfold",
    # fft, special functions
    "fft.fft",
    "fft.rfft",
    "fft.irfft",
    "special.bessel_j0",
    "special.chebyshev_polynomial_t",
    # random (shapes and dtypes here; distributions in test_random_distribution)
    "bernoulli",
    "normal",
    "rand_like",
    "randint",
    "nn.functional.dropout",
    "multinomial",
    # expected failures stay honest
    "nonzero",
    "unique",
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
