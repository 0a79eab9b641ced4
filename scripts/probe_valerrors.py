"""Probe value errors beyond ``probe_errors.py`` (session 23): where an eager kernel checks the
VALUES of its inputs and raises (a label out of range, a negative weight, a window whose
overlap-add vanishes, a singular matrix), the compiled function raises eager's exception type
with eager's message, naming the op and the user's line; written the way users write it
(a model's forward with a bad label in the batch, ``x[idx]`` with ``idx`` from data), in
inference and in training (the loss's backward), under the default options and under
``strict``.

    PYTHONPATH=. python scripts/probe_valerrors.py [substring ...]

Each case ``name`` runs as ``name/default`` and ``name/strict``; cases made by ``train`` run
a training step (forward, ``backward``, the gradients as observations) where the others call
the function once. Observed as in ``probe_errors.py``: the outputs or the error, the inputs
after the call, then a valid call of the same compiled function where ``good`` is given.
Prints ``ok`` / ``DIFF`` / ``NOLINE`` (raised, without the user's line) / ``CRASH`` per case.

Left (session 23): ``TorchRuntimeError`` DIFFs are Dynamo's fake run raising before any backend
(``topk``'s k, ``histc``'s range, ``F.dropout``'s p: Dynamo's type and words, not eager's);
NOLINEs are errors eager itself raises after a graph break (``.item()``, ``torch.distributions``'
``validate_args``, ``torch.cov``'s weights), with eager's traceback; NaN matrices
(``eigvalsh``, ``slogdet``, ``solve``, ``lu_factor``) propagate NaN otherwise than LAPACK.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import (
    describe,
    difference,
    observations,
    r,
    run,
    same_error_or_value,
    same_items,
)

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
torch._logging.set_logs(graph_breaks=False, recompiles=False)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
CASES: dict = {}
MODES = {"default": {}, "strict": {"strict": True}}


def _register(name, fn):
    for mode, options in MODES.items():
        key = f"{name}/{mode}"
        assert key not in CASES, key
        CASES[key] = (fn, options)


def case(name, f, make, good=None):
    def run(C, rec):
        compiled = C(f)
        args = make()
        try:
            rec("out", compiled(*args))
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            rec("raised", e)
        rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        if good is not None:
            args = good()
            rec("good", compiled(*args))

    _register(name, run)


def train(name, build, make, good=None):
    """``build()`` -> (module, loss_fn(module, *batch)); one step on ``make()``, the loss, its
    error and the gradients recorded, then one on ``good()``."""

    def run(C, rec):
        torch.manual_seed(0)
        model, loss_fn = build()
        step = C(lambda *batch: loss_fn(model, *batch))
        try:
            loss = step(*make())
            loss.backward()
            rec("loss", loss)
        except Exception as e:  # noqa: BLE001
            rec("raised", e)
        rec("grads", [p.grad for p in model.parameters() if p.grad is not None])
        if good is not None:
            model.zero_grad()
            loss = step(*good())
            loss.backward()
            rec("good", [loss] + [p.grad for p in model.parameters()])

    _register(f"train_{name}", run)


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape"), a[1:3], b[1:3]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[3], b[3]
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def compare(name, entry):
    fn, options = entry

    def C(f):
        return torch.compile(f, backend=BACKEND, options=options)

    exp = observations(fn, lambda f: f, describe)
    got = observations(fn, C, describe)
    d = difference(got, exp, same)
    if d:
        return f"DIFF  {name}: {d}"
    for _, g in got:
        if g[0] == "E" and THIS not in g[3]:
            return f"NOLINE {name}: {g[1].__name__}: {g[3][:300]!r}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


def i(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


_SING = lambda: torch.tensor([[1.0, 2.0], [2.0, 4.0]])
_NOTPD = lambda: torch.tensor([[1.0, 2.0], [2.0, 1.0]])


# ============================================================================================
# labels: nll_loss / cross_entropy and their variants
def ce(x, t, **kw):
    return F.cross_entropy(x, t, **kw)


case("ce_weight_oob", lambda x, t, w: ce(x, t, weight=w), lambda: (r(3, 4), i(0, 4, 1), r(4).abs()))
case("ce_smoothing_oob", lambda x, t: ce(x, t, label_smoothing=0.1), lambda: (r(3, 4), i(0, 4, 1)))
case(
    "ce_smoothing_weight_oob",
    lambda x, t, w: ce(x, t, weight=w, label_smoothing=0.2),
    lambda: (r(3, 4), i(0, 7, 1), r(4).abs()),
)
case("ce_ignore0_neg", lambda x, t: ce(x, t, ignore_index=0), lambda: (r(3, 4), i(0, -1, 1)))
case("ce_ignore_neg1_oob", lambda x, t: ce(x, t, ignore_index=-1), lambda: (r(3, 4), i(-1, 4, 1)))
case("ce_ignore_neg1_ok", lambda x, t: ce(x, t, ignore_index=-1), lambda: (r(3, 4), i(-1, 3, 1)))
case("ce_ignore_big_ok", lambda x, t: ce(x, t, ignore_index=9), lambda: (r(3, 4), i(9, 3, 1)))
case("ce_none_oob", lambda x, t: ce(x, t, reduction="none"), lambda: (r(3, 4), i(0, 4, 1)))
case("ce_sum_neg", lambda x, t: ce(x, t, reduction="sum"), lambda: (r(3, 4), i(0, -2, 1)))
case("ce_3d_oob", lambda x, t: ce(x, t), lambda: (r(2, 4, 3), i(0, 1, 2, 3, 4, 0).view(2, 3)))
case("ce_4d_oob", lambda x, t: ce(x, t), lambda: (r(1, 3, 2, 2), i(0, 1, 2, 3).view(1, 2, 2)))
case(
    "ce_4d_none_neg",
    lambda x, t: ce(x, t, reduction="none"),
    lambda: (r(1, 3, 2, 2), i(0, 1, -2, 2).view(1, 2, 2)),
)
case(
    "ce_4d_weight_oob",
    lambda x, t, w: ce(x, t, weight=w),
    lambda: (r(1, 3, 2, 2), i(0, 1, 2, 5).view(1, 2, 2), r(3).abs()),
)
case("ce_unbatched_oob", lambda x, t: ce(x, t), lambda: (r(4), torch.tensor(4)))
case("ce_probs_target_ok", lambda x, t: ce(x, t), lambda: (r(3, 4), r(3, 4).softmax(1)))
case("nll_1d_oob", lambda x, t: F.nll_loss(x, t), lambda: (r(4).log_softmax(0), torch.tensor(5)))
case(
    "nll_weight_mean_oob",
    lambda x, t, w: F.nll_loss(x, t, weight=w),
    lambda: (r(3, 4), i(0, 1, 9), r(4).abs()),
)
case(
    "nll_module_oob",
    lambda x, t: nn.NLLLoss(ignore_index=2)(x, t),
    lambda: (r(3, 4), i(2, 2, 4)),
    lambda: (r(3, 4), i(2, 2, 3)),
)
case(
    "ce_module_oob",
    lambda x, t: nn.CrossEntropyLoss()(x, t),
    lambda: (r(3, 4), i(0, 3, 4)),
    lambda: (r(3, 4), i(0, 3, 2)),
)
case(
    "ce_bf16_autocast_oob",
    lambda x, t: _autocast_ce(x, t),
    lambda: (r(3, 4), i(0, 4, 1)),
)


def _autocast_ce(x, t):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return F.cross_entropy(x @ torch.eye(4), t)


case("ce_int32_target_oob", lambda x, t: ce(x, t.int().long()), lambda: (r(3, 4), i(0, 4, 1)))
case("ce_from_argmax_oob", lambda x, y: ce(x, y.argmax(1)), lambda: (r(3, 4), r(3, 6)))
case(
    "multi_margin_weight_oob", lambda x, t: F.multi_margin_loss(x, t), lambda: (r(3, 4), i(0, 4, 1))
)
case(
    "multilabel_soft_ok",
    lambda x, t: F.multilabel_soft_margin_loss(x, t),
    lambda: (r(3, 4), (r(3, 4) > 0).float()),
)


class Classifier(nn.Module):
    def __init__(self, vocab=6, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, 4)
        self.head = nn.Linear(4, classes)

    def forward(self, tok):
        return self.head(self.emb(tok).mean(1))


def _clf():
    return Classifier(), lambda m, tok, y: F.cross_entropy(m(tok), y)


_TOK = lambda: i(0, 1, 2, 3).view(2, 2)
train("ce_target_neg", _clf, lambda: (_TOK(), i(0, -1)), lambda: (_TOK(), i(0, 2)))
train("ce_target_oob_smoothing", lambda: (Classifier(), _ls), lambda: (_TOK(), i(0, 3)))


def _ls(m, tok, y):
    return F.cross_entropy(m(tok), y, label_smoothing=0.1)


train("embedding_neg", _clf, lambda: (i(0, -1, 2, 3).view(2, 2), i(0, 1)))
train(
    "nll_ignore_oob",
    lambda: (Classifier(), lambda m, tok, y: F.nll_loss(m(tok).log_softmax(1), y, ignore_index=-1)),
    lambda: (_TOK(), i(-1, 3)),
    lambda: (_TOK(), i(-1, 2)),
)
train(
    "seq_lm_oob",
    lambda: (
        Classifier(vocab=6, classes=6),
        lambda m, tok, y: F.cross_entropy(m.head(m.emb(tok)).flatten(0, 1), y.flatten()),
    ),
    lambda: (_TOK(), i(1, 2, 3, 6).view(2, 2)),
)
train(
    "pick_logits_oob",
    lambda: (Classifier(), lambda m, tok, y: -m(tok).log_softmax(1)[torch.arange(2), y].mean()),
    lambda: (_TOK(), i(0, 3)),
    lambda: (_TOK(), i(0, 2)),
)
train(
    "gather_logits_oob",
    lambda: (Classifier(), lambda m, tok, y: -m(tok).gather(1, y[:, None]).sum()),
    lambda: (_TOK(), i(0, -1)),
)
train(
    "one_hot_loss_oob",
    lambda: (Classifier(), lambda m, tok, y: -(m(tok).log_softmax(1) * F.one_hot(y, 3)).sum()),
    lambda: (_TOK(), i(0, 3)),
)
train(
    "bce_prob_oob",
    lambda: (Classifier(classes=1), lambda m, tok, y: F.binary_cross_entropy(m(tok)[:, 0], y)),
    lambda: (_TOK(), r(2)),
)
train(
    "multi_margin_oob",
    lambda: (Classifier(), lambda m, tok, y: F.multi_margin_loss(m(tok), y)),
    lambda: (_TOK(), i(0, 3)),
)
train(
    "scatter_add_oob",
    lambda: (
        Classifier(),
        lambda m, tok, y: torch.zeros(2, 3).scatter_add(1, y[:, None], m(tok)).sum(),
    ),
    lambda: (_TOK(), i(0, 3)),
)
train(
    "index_add_oob",
    lambda: (Classifier(), lambda m, tok, y: torch.zeros(2, 3).index_add(0, y, m(tok)).sum()),
    lambda: (_TOK(), i(0, 2)),
)
train(
    "index_select_neg",
    lambda: (Classifier(), lambda m, tok, y: m(tok).index_select(1, y).sum()),
    lambda: (_TOK(), i(0, -1)),
)
train(
    "take_along_dim_oob",
    lambda: (Classifier(), lambda m, tok, y: torch.take_along_dim(m(tok), y[:, None], 1).sum()),
    lambda: (_TOK(), i(0, 3)),
)
train(
    "cholesky_notpd",
    lambda: (
        nn.Linear(2, 2, bias=False),
        lambda m, a: torch.linalg.cholesky(m(a) @ m(a).T - 5 * torch.eye(2)).sum(),
    ),
    lambda: (torch.eye(2),),
)
train(
    "inv_singular",
    lambda: (nn.Linear(2, 2, bias=False), lambda m, a: torch.linalg.inv(m(a) * 0).sum()),
    lambda: (torch.eye(2),),
)
train(
    "int_div_zero",
    lambda: (nn.Linear(2, 2), lambda m, x, a, b: (m(x) * (a // b)).sum()),
    lambda: (r(1, 2), i(4, 5), i(2, 0)),
)
# ============================================================================================
# indices from data
case("getitem_argmax_oob", lambda x, y: x[y.argmax()], lambda: (r(3), r(5)))
case("getitem_sum_idx", lambda x, y: x[y.sum()], lambda: (r(3), i(2, 2)))
case("getitem_nonzero_oob", lambda x, y: x[y.nonzero()[:, 0]], lambda: (r(3), r(5)))
case(
    "index_put_acc_neg_2d",
    lambda x, a, v: x.index_put((a,), v, True),
    lambda: (r(3, 2), i(0, -4), r(2, 2)),
)
case(
    "scatter_dim_neg_oob",
    lambda x, idx: x.scatter(-1, idx, 1.0),
    lambda: (r(2, 3), i(0, 3).view(2, 1)),
)
case(
    "gather_dim2_oob",
    lambda x, idx: x.gather(2, idx),
    lambda: (r(2, 2, 3), i(0, 1, 2, 3).view(2, 2, 1)),
)
case(
    "gather_sparse_grad_oob",
    lambda x, idx: torch.gather(x, 1, idx, sparse_grad=False),
    lambda: (r(2, 3), i(3, 0).view(2, 1)),
)
case(
    "scatter_reduce_mean_neg",
    lambda x, idx, s: x.scatter_reduce(0, idx, s, "mean"),
    lambda: (r(3), i(0, -1), r(2)),
)
case(
    "scatter_multiply_oob",
    lambda x, idx: x.scatter(0, idx, 2.0, reduce="multiply"),
    lambda: (r(3), i(3)),
)
case("put_oob_neg", lambda x, idx, v: x.put(idx, v), lambda: (r(2, 2), i(-5), r(1)))
case("index_fill_neg_dim0_ok", lambda x, idx: x.index_fill(0, idx, 0.0), lambda: (r(3, 2), i(-1)))
case(
    "embedding_int32_oob",
    lambda w, idx: F.embedding(idx, w),
    lambda: (r(5, 3), i(0, 5, dtype=torch.int32)),
)
case(
    "embedding_scale_grad_oob",
    lambda w, idx: F.embedding(idx, w, scale_grad_by_freq=True),
    lambda: (r(5, 3), i(0, 5)),
)
case(
    "embedding_padding_neg",
    lambda w, idx: F.embedding(idx, w, padding_idx=-1),
    lambda: (r(5, 3), i(0, -1)),
)
case(
    "embedding_bag_offsets_oob",
    lambda w, idx, o: F.embedding_bag(idx, w, o, mode="sum"),
    lambda: (r(5, 3), i(0, 1, 2), i(0, 4)),
)
case(
    "embedding_bag_padding_oob",
    lambda w, idx, o: F.embedding_bag(idx, w, o, padding_idx=0),
    lambda: (r(5, 3), i(0, 6, 2), i(0, 1)),
)
case(
    "categorical_log_prob_oob",
    lambda lg, v: torch.distributions.Categorical(logits=lg, validate_args=False).log_prob(v),
    lambda: (r(2, 3), i(0, 3)),
)
case(
    "max_unpool1d_oob",
    lambda x, idx: F.max_unpool1d(x, idx, 2),
    lambda: (r(1, 1, 2), i(0, 4).view(1, 1, 2)),
)
case("unravel_index_ok", lambda idx: torch.unravel_index(idx, (2, 3))[0], lambda: (i(0, 7),))
case("tensor_split_oob_ok", lambda x, idx: torch.tensor_split(x, idx)[1], lambda: (r(4), i(1, 9)))
case(
    "bucketize_ok",
    lambda x, b: torch.bucketize(x, b),
    lambda: (r(4), torch.tensor([-1.0, 0.0, 1.0])),
)

# ============================================================================================
# values eager's kernels check
case(
    "istft_zero_window", lambda s, w: torch.istft(s, 4, window=w), lambda: (_spec(), torch.zeros(4))
)
case(
    "istft_zero_window_center_false_ok",
    lambda s, w: torch.istft(s, 4, window=w, center=False),
    lambda: (_spec(), torch.ones(4)),
)
case(
    "istft_hann_ok",
    lambda s, w: torch.istft(s, 4, window=w),
    lambda: (_spec(), torch.hann_window(4)),
)
case(
    "istft_half_window",
    lambda s, w: torch.istft(s, 4, window=w),
    lambda: (_spec(), torch.tensor([1.0, 0.0, 0.0, 0.0])),
)


def _spec():
    return torch.stft(r(16), 4, window=torch.ones(4), return_complex=True)


case(
    "binomial_neg_count",
    lambda c, p: torch.binomial(c, p) * 0,
    lambda: (torch.tensor([5.0, -1.0]), torch.tensor([0.5, 0.5])),
)
case(
    "binomial_p_oob",
    lambda c, p: torch.binomial(c, p) * 0,
    lambda: (torch.tensor([5.0, 1.0]), torch.tensor([0.5, 1.5])),
)
case("cov_fweights_neg", lambda x, f: torch.cov(x, fweights=f), lambda: (r(2, 3), i(1, -1, 2)))
case(
    "cov_aweights_neg",
    lambda x, a: torch.cov(x, aweights=a),
    lambda: (r(2, 3), torch.tensor([1.0, -1.0, 2.0])),
)
case("cov_fweights_ok", lambda x, f: torch.cov(x, fweights=f), lambda: (r(2, 3), i(1, 0, 2)))
case("mvlgamma_domain", lambda x: torch.mvlgamma(x, 3), lambda: (torch.tensor([2.0, 0.5]),))
case("mvlgamma_ok", lambda x: torch.special.multigammaln(x, 2), lambda: (torch.tensor([2.0, 1.5]),))
case(
    "bernoulli_nan_p",
    lambda p: torch.bernoulli(p) * 0,
    lambda: (torch.tensor([0.5, float("nan")]),),
)
case(
    "normal_nan_std",
    lambda m, s: torch.normal(m, s) * 0,
    lambda: (r(2), torch.tensor([1.0, float("nan")])),
)
case("poisson_nan", lambda x: torch.poisson(x) * 0, lambda: (torch.tensor([1.0, float("nan")]),))
case(
    "multinomial_softmax_nan",
    lambda lg: torch.multinomial(lg.softmax(-1), 1),
    lambda: (torch.tensor([[0.0, float("nan")]]),),
)
case(
    "multinomial_too_many",
    lambda p: torch.multinomial(p, 4),
    lambda: (torch.tensor([0.2, 0.3, 0.5]),),
)
case(
    "multinomial_too_few_nonzero",
    lambda p: torch.multinomial(p, 2),
    lambda: (torch.tensor([0.0, 0.0, 1.0]),),
)
case("histc_min_gt_max", lambda x: torch.histc(x, bins=4, min=3, max=1), lambda: (r(6),))
case("histc_bins_zero", lambda x: torch.histc(x, bins=0), lambda: (r(6),))
case(
    "histogram_range_bad",
    lambda x: torch.histogram(x, bins=3, range=(2.0, 1.0)).hist,
    lambda: (r(6),),
)
case("randint_bad_range", lambda x: x + torch.randint(3, 3, (2,)), lambda: (r(2),))
case("uniform_from_gt_to", lambda x: x.clone().uniform_(3.0, 1.0), lambda: (r(3),))
case("normal_neg_std_const", lambda x: x + torch.normal(0.0, -1.0, (3,)), lambda: (r(3),))
case("normal_tensor_mean_neg_std", lambda m: torch.normal(m, -1.0) * 0, lambda: (r(3),))
case("cdist_neg_p", lambda a, b: torch.cdist(a, b, p=-1.0), lambda: (r(2, 3), r(2, 3)))
case("pdist_neg_p", lambda a: F.pdist(a, p=-1.0), lambda: (r(3, 2),))
case("polygamma_neg_n", lambda x: torch.polygamma(-1, x), lambda: (r(3),))
case("clamp_min_gt_max_ok", lambda x: x.clamp(min=1.0, max=-1.0), lambda: (r(4),))
case(
    "clamp_tensor_min_gt_max_ok",
    lambda x, lo, hi: torch.clamp(x, lo, hi),
    lambda: (r(4), torch.ones(4), -torch.ones(4)),
)
case(
    "bce_target_oob_ok",
    lambda p, t: F.binary_cross_entropy(p, t),
    lambda: (torch.rand(3), torch.tensor([0.0, 2.0, -1.0])),
)
case(
    "bce_weight_nan_input",
    lambda p, t: F.binary_cross_entropy(p, t),
    lambda: (torch.tensor([0.5, float("nan")]), torch.ones(2)),
)
case(
    "kl_div_neg_target_ok",
    lambda x, t: F.kl_div(x, t, reduction="batchmean"),
    lambda: (r(2, 3), r(2, 3)),
)
case("poisson_nll_ok", lambda x, t: F.poisson_nll_loss(x, t), lambda: (r(3), r(3).abs()))
case(
    "grid_sample_outside_ok",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    lambda: (r(1, 1, 3, 3), r(1, 2, 2, 2) * 3),
)
case("renorm_neg_p", lambda x: x.renorm(-1.0, 0, 1.0), lambda: (r(2, 3),))
case("dropout_p_tensor_ok", lambda x: F.dropout(x, 0.0), lambda: (r(3),))
case(
    "gaussian_nll_neg_var_full",
    lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True),
    lambda: (r(3), r(3), -r(3).abs()),
)


# ============================================================================================
# integer division, powers
def _ifd(a, b):
    a //= b
    return a


for _dt in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
    _n = str(_dt).split(".")[1]
    case(
        f"div_floor_{_n}",
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda _dt=_dt: (i(4, 5, dtype=_dt), i(2, 0, dtype=_dt)),
    )
    case(
        f"remainder_{_n}",
        lambda a, b: a % b,
        lambda _dt=_dt: (i(4, 5, dtype=_dt), i(2, 0, dtype=_dt)),
    )
    case(f"fmod_scalar0_{_n}", lambda a: torch.fmod(a, 0), lambda _dt=_dt: (i(4, 5, dtype=_dt),))
    case(
        f"ifloordiv_0d_{_n}", _ifd, lambda _dt=_dt: (i(4, 5, dtype=_dt), torch.tensor(0, dtype=_dt))
    )


case("floordiv_broadcast_row", lambda a, b: a // b, lambda: (i(1, 2, 3, 4).view(2, 2), i(1, 0)))
case("floordiv_int_by_bool", lambda a, b: a // b, lambda: (i(4, 5), torch.tensor([True, False])))
case(
    "remainder_by_mask_sum",
    lambda a, m: a % m.sum(),
    lambda: (i(4, 5), torch.tensor([False, False])),
)
case(
    "div_trunc_count",
    lambda a, m: torch.div(a, (m > 0).long().sum(), rounding_mode="trunc"),
    lambda: (i(4, 5), -r(2).abs()),
)
case("mean_by_count_ok", lambda a, m: a.sum() / (m > 0).sum(), lambda: (r(2), -r(2).abs()))
case("floordiv_float_by_zero_ok", lambda a, b: a // b, lambda: (r(2), torch.zeros(2)))
case("pow_int_tensor_exp_neg", lambda a, e: a**e, lambda: (i(2, 3), i(1, -1)))
case("pow_int_scalar_base_neg_exp", lambda e: 2**e, lambda: (i(1, -1),))
case("pow_int_0d_neg", lambda a, e: torch.pow(a, e.item()), lambda: (i(2, 3), torch.tensor(-1)))
case("bitwise_shift_neg_ok", lambda a: a << -1, lambda: (i(2, 3),))

# ============================================================================================
# linear algebra, as users call it
case("lu_factor_singular", lambda a: torch.linalg.lu_factor(a).LU, lambda: (torch.zeros(2, 2),))
case("lu_singular_ok", lambda a: torch.linalg.lu(a).U, lambda: (torch.zeros(2, 2),))
case(
    "solve_singular_batched_second",
    lambda a, b: torch.linalg.solve(a, b),
    lambda: (torch.stack([torch.eye(2), _SING()]), r(2, 2, 1)),
)
case(
    "inv_batched_second",
    lambda a: torch.linalg.inv(a),
    lambda: (torch.stack([torch.eye(2), _SING(), _SING()]),),
)
case("inverse_method", lambda a: a.inverse(), lambda: (_SING(),))
case("cholesky_upper_notpd", lambda a: torch.linalg.cholesky(a, upper=True), lambda: (_NOTPD(),))
case("cholesky_method_notpd", lambda a: a.cholesky(), lambda: (_NOTPD(),))
case(
    "cholesky_batched_second",
    lambda a: torch.linalg.cholesky(a),
    lambda: (torch.stack([torch.eye(2), _NOTPD()]),),
)
case(
    "ldl_factor_singular_ok", lambda a: torch.linalg.ldl_factor(a).LD, lambda: (torch.zeros(2, 2),)
)
case(
    "cholesky_ex_batched_info",
    lambda a: torch.linalg.cholesky_ex(a).info,
    lambda: (torch.stack([_NOTPD(), torch.eye(2)]),),
)
case(
    "inv_ex_batched_info",
    lambda a: torch.linalg.inv_ex(a).info,
    lambda: (torch.stack([torch.eye(2), _SING()]),),
)
case("solve_ex_info", lambda a, b: torch.linalg.solve_ex(a, b).info, lambda: (_SING(), r(2)))
case("matrix_power_neg_singular", lambda a: torch.linalg.matrix_power(a, -1), lambda: (_SING(),))
case(
    "lstsq_singular_ok",
    lambda a, b: torch.linalg.lstsq(a, b).solution,
    lambda: (torch.eye(2), r(2, 1)),
)
case(
    "cholesky_inverse_notpd",
    lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a)),
    lambda: (_NOTPD(),),
)
case(
    "mvn_notpd",
    lambda m, c: torch.distributions.MultivariateNormal(m, c).log_prob(m),
    lambda: (r(2), _NOTPD()),
)
case(
    "lobpcg_like_solve_f64",
    lambda a, b: torch.linalg.solve(a.double(), b.double()),
    lambda: (_SING(), r(2)),
)

# ============================================================================================
# torch.distributions with validate_args
case(
    "dist_normal_neg_scale",
    lambda m, s: torch.distributions.Normal(m, s, validate_args=True).mean,
    lambda: (r(2), -r(2).abs()),
)
case(
    "dist_categorical_log_prob_oob",
    lambda lg, v: torch.distributions.Categorical(logits=lg, validate_args=True).log_prob(v),
    lambda: (r(2, 3), i(0, 3)),
)
case(
    "dist_bernoulli_probs",
    lambda p: torch.distributions.Bernoulli(probs=p, validate_args=True).mean,
    lambda: (torch.tensor([0.5, 1.5]),),
)
case(
    "dist_normal_ok",
    lambda m, s: torch.distributions.Normal(m, s, validate_args=True).log_prob(m),
    lambda: (r(2), r(2).abs()),
)

# ============================================================================================
# sizes from .item()
case("arange_item_neg", lambda n: torch.arange(n.item()), lambda: (torch.tensor(-2),))
case("narrow_item_oob", lambda x, s: x.narrow(0, s.item(), 2), lambda: (r(4), torch.tensor(3)))
case("split_item_bad", lambda x, s: x.split([s.item(), 1]), lambda: (r(4), torch.tensor(2)))
case("zeros_item_neg", lambda x, n: x.new_zeros(n.item()), lambda: (r(2), torch.tensor(-1)))
case("x_item_index_oob", lambda x, n: x[n.item()], lambda: (r(3), torch.tensor(3)))
case("unbind_then_index", lambda x, n: x.unbind(0)[n.item()], lambda: (r(3, 2), torch.tensor(3)))

# ============================================================================================
# arguments eager's kernels check and the fake kernels do not (constants of the graph)
case("multinomial_n_gt_classes_2d", lambda p: torch.multinomial(p, 3), lambda: (torch.ones(2, 2),))
case(
    "multinomial_n_eq_classes_ok",
    lambda p: torch.multinomial(p, 2).sort(-1).values,
    lambda: (torch.ones(2, 2),),
)
case(
    "multinomial_replacement_many_ok",
    lambda p: torch.multinomial(p, 5, True) * 0,
    lambda: (torch.ones(2),),
)
case("multinomial_zero_classes", lambda p: torch.multinomial(p, 1), lambda: (torch.ones(2, 0),))
case("bincount_minlength_neg", lambda x: torch.bincount(x, minlength=-1), lambda: (i(0, 1),))
case("kthvalue_k0", lambda x: torch.kthvalue(x, 0).values, lambda: (r(3),))
case("kthvalue_k_big", lambda x: torch.kthvalue(x, 4).values, lambda: (r(3),))
case("topk_k_big", lambda x: torch.topk(x, 4).values, lambda: (r(3),))
case("topk_k_neg", lambda x: torch.topk(x, -1).values, lambda: (r(3),))
case("linspace_neg_steps", lambda x: x + torch.linspace(0, 1, -1), lambda: (r(1),))
case("tril_indices_neg", lambda x: x + torch.tril_indices(-1, 3).sum(), lambda: (r(1),))
case("combinations_neg_r", lambda x: torch.combinations(x, -1), lambda: (r(3),))
case("rrelu_lower_gt_upper", lambda x: F.rrelu(x, 0.5, 0.1, training=False), lambda: (r(3),))
case("glu_odd", lambda x: F.glu(x, -1), lambda: (r(2, 3),))
case("pixel_shuffle_bad", lambda x: F.pixel_shuffle(x, 2), lambda: (r(1, 3, 2, 2),))
case("unfold_step0", lambda x: x.unfold(0, 2, 0), lambda: (r(4),))
case("chunk_zero", lambda x: x.chunk(0), lambda: (r(4),))
case("avg_pool_kernel0", lambda x: F.avg_pool1d(x, 0), lambda: (r(1, 1, 4),))
case("max_pool_stride0", lambda x: F.max_pool1d(x, 2, 0), lambda: (r(1, 1, 4),))
case("conv_stride0", lambda x, w: F.conv1d(x, w, stride=0), lambda: (r(1, 1, 4), r(1, 1, 2)))
case("pad_reflect_too_big", lambda x: F.pad(x, (4, 0), mode="reflect"), lambda: (r(1, 1, 3),))
case("interpolate_neg_scale", lambda x: F.interpolate(x, scale_factor=-1.0), lambda: (r(1, 1, 4),))
case("interpolate_size0", lambda x: F.interpolate(x, size=0), lambda: (r(1, 1, 4),))
case("cross_dim_not3", lambda a, b: torch.linalg.cross(a, b, dim=0), lambda: (r(2, 3), r(2, 3)))
case("stft_hop0", lambda x: torch.stft(x, 4, hop_length=0, return_complex=True), lambda: (r(16),))
case("one_hot_classes0", lambda t: F.one_hot(t, 0), lambda: (i(0, 1),))
case(
    "embedding_max_norm_neg_ok",
    lambda w, idx: F.embedding(idx, w, max_norm=-1.0),
    lambda: (r(5, 3), i(0, 1)),
)
case("normalize_p0_ok", lambda x: F.normalize(x, p=0.0), lambda: (r(2, 3),))
case("gumbel_tau0", lambda x: F.gumbel_softmax(x, tau=0.0) * 0, lambda: (r(2, 3),))
case(
    "repeat_interleave_wrong_len", lambda x, rep: x.repeat_interleave(rep), lambda: (r(3), i(1, 2))
)
case("randperm_neg", lambda x: x + torch.randperm(-1).sum(), lambda: (r(1),))
case(
    "fractional_ratio_big",
    lambda x: F.fractional_max_pool2d(x, 2, output_ratio=1.5),
    lambda: (r(1, 1, 4, 4),),
)
case("lp_pool_neg_p", lambda x: F.lp_pool1d(x, -1.0, 2), lambda: (r(1, 1, 4).abs(),))
case("local_response_norm_ok", lambda x: F.local_response_norm(x, 2), lambda: (r(1, 3, 4),))
case("log_softmax_dim_oob", lambda x: F.log_softmax(x, 2), lambda: (r(2, 3),))
case("mvlgamma_p0", lambda x: torch.mvlgamma(x, 0), lambda: (r(3).abs() + 2,))
case("diag_embed_dims_same", lambda x: torch.diag_embed(x, dim1=0, dim2=0), lambda: (r(3),))
case(
    "searchsorted_side_bad",
    lambda s, x: torch.searchsorted(s, x, side="middle"),
    lambda: (torch.arange(3.0), r(2)),
)
case(
    "searchsorted_side_right_conflict",
    lambda s, x: torch.searchsorted(s, x, right=False, side="right"),
    lambda: (torch.arange(3.0), r(2)),
)
case("histc_bins_neg", lambda x: torch.histc(x, bins=-1), lambda: (r(6),))
case("quantile_q_float_oob", lambda x: torch.quantile(x, 1.5), lambda: (r(5),))
case("quantile_interp_bad", lambda x: torch.quantile(x, 0.5, interpolation="bad"), lambda: (r(5),))
case(
    "nll_reduction_bad",
    lambda x, t: F.nll_loss(x, t, reduction="bad"),
    lambda: (r(3, 4), i(0, 1, 2)),
)
case(
    "embedding_bag_mode_bad",
    lambda w, idx, o: F.embedding_bag(idx, w, o, mode="bad"),
    lambda: (r(5, 3), i(0, 1), i(0)),
)
case(
    "scatter_reduce_mode_bad",
    lambda x, idx, s: x.scatter_reduce(0, idx, s, "bad"),
    lambda: (r(3), i(0), r(1)),
)
case(
    "index_reduce_mode_bad",
    lambda x, idx, s: x.index_reduce(0, idx, s, "bad"),
    lambda: (r(3), i(0), r(1)),
)
case(
    "grid_sample_mode_bad",
    lambda x, g: F.grid_sample(x, g, mode="bad"),
    lambda: (r(1, 1, 3, 3), r(1, 2, 2, 2)),
)
case("clamp_none_both", lambda x: torch.clamp(x), lambda: (r(3),))
case("norm_p_str_bad", lambda x: torch.linalg.vector_norm(x, ord=float("nan")), lambda: (r(3),))
case("matrix_norm_ord_bad", lambda x: torch.linalg.matrix_norm(x, ord=3), lambda: (r(2, 2),))
case(
    "vector_norm_neg_inf_ok",
    lambda x: torch.linalg.vector_norm(x, ord=-float("inf")),
    lambda: (r(3),),
)
case("pow_int_neg_scalar_exp_tensor", lambda a: torch.pow(a, -1), lambda: (i(2, 3),))
case("logit_eps_ok", lambda x: torch.logit(x, eps=2.0), lambda: (torch.rand(3),))
case("bernoulli_p_float_1_ok", lambda x: torch.bernoulli(x, 1.0), lambda: (r(3),))
case("log_normal_std0", lambda x: x.clone().log_normal_(0.0, 0.0), lambda: (r(3),))
case("cauchy_sigma0", lambda x: x.clone().cauchy_(0.0, 0.0) * 0, lambda: (r(3),))
case("exponential_lambda0", lambda x: x.clone().exponential_(0.0) * 0, lambda: (r(3),))
case("geometric_p0", lambda x: x.clone().geometric_(0.0), lambda: (r(3),))
case("geometric_p1_ok", lambda x: x.clone().geometric_(1.0), lambda: (r(3),))
case("normal_std0_ok", lambda x: x.clone().normal_(1.0, 0.0), lambda: (r(3),))
case("uniform_inf", lambda x: x.clone().uniform_(0.0, float("inf")) * 0, lambda: (r(3),))
case("uniform_range_too_big", lambda x: x.clone().uniform_(-3e38, 3e38) * 0, lambda: (r(3),))
case("random_to_too_big_int8", lambda x: x.random_(0, 300), lambda: (i(0, 1, dtype=torch.int8),))
case(
    "randint_like_big_uint8",
    lambda x: torch.randint_like(x, 0, 300),
    lambda: (i(0, 1, dtype=torch.uint8),),
)
case("dropout2d_p_neg", lambda x: F.dropout2d(x, -0.5), lambda: (r(1, 2, 2, 2),))
case("alpha_dropout_p_big", lambda x: F.alpha_dropout(x, 1.5, training=True), lambda: (r(3),))
case(
    "binomial_inf_count",
    lambda c, p: torch.binomial(c, p) * 0,
    lambda: (torch.tensor([float("inf")]), torch.tensor([0.5])),
)
case("poisson_inf", lambda x: torch.poisson(x) * 0, lambda: (torch.tensor([float("inf")]),))
case(
    "standard_gamma_neg",
    lambda a: torch._standard_gamma(a) * 0,
    lambda: (torch.tensor([-1.0, 1.0]),),
)
case(
    "dirichlet_neg", lambda a: torch._sample_dirichlet(a) * 0, lambda: (torch.tensor([-1.0, 1.0]),)
)

# ============================================================================================
# non-finite matrices
_NANM = lambda: torch.tensor([[float("nan"), 0.0], [0.0, 1.0]])
case("eigvalsh_nan", lambda a: torch.linalg.eigvalsh(a), lambda: (_NANM(),))
case("qr_nan", lambda a: torch.linalg.qr(a).R, lambda: (_NANM(),))
case("lstsq_nan", lambda a, b: torch.linalg.lstsq(a, b).solution, lambda: (_NANM(), r(2, 1)))
case("cond_nan", lambda a: torch.linalg.cond(a), lambda: (_NANM(),))
case("matrix_rank_nan", lambda a: torch.linalg.matrix_rank(a), lambda: (_NANM(),))
case("pinverse_nan", lambda a: torch.pinverse(a), lambda: (_NANM(),))
case("svd_full_nan", lambda a: torch.linalg.svd(a).S, lambda: (_NANM(),))
case(
    "svd_inf",
    lambda a: torch.linalg.svdvals(a),
    lambda: (torch.tensor([[float("inf"), 0.0], [0.0, 1.0]]),),
)
case("slogdet_nan_ok", lambda a: torch.linalg.slogdet(a).sign, lambda: (_NANM(),))
case("solve_nan", lambda a, b: torch.linalg.solve(a, b), lambda: (_NANM(), r(2)))
case("lu_factor_nan", lambda a: torch.linalg.lu_factor(a).LU, lambda: (_NANM(),))
case(
    "eigh_inf",
    lambda a: torch.linalg.eigh(a).eigenvalues,
    lambda: (torch.tensor([[float("inf"), 0.0], [0.0, 1.0]]),),
)
case("matrix_exp_nan_ok", lambda a: torch.linalg.matrix_exp(a), lambda: (_NANM(),))
case("norm2_nan", lambda a: torch.linalg.matrix_norm(a, ord=2), lambda: (_NANM(),))
case("nuc_nan", lambda a: torch.linalg.matrix_norm(a, ord="nuc"), lambda: (_NANM(),))
case("max_dim_empty", lambda x: x.max(1).values, lambda: (r(3, 0),))
case("mode_empty", lambda x: torch.mode(x, 0).values, lambda: (r(0, 2),))
case("min_whole_empty", lambda x: x.min(), lambda: (r(0),))
case("svd_lowrank_ok", lambda a: torch.linalg.svdvals(a @ a.T), lambda: (r(3, 2),))


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
