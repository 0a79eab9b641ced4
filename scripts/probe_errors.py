"""Probe error parity: where eager PyTorch raises, a function compiled with
``torch.compile(backend="xla")`` must raise too (eager's exception type, a message with eager's
first line that names the op and the user's source line), never return garbage; where eager
runs, the compiled function runs and gives eager's values.

    PYTHONPATH=. python scripts/probe_errors.py [substring ...]

``case(name, f, make, good=None)``: ``make()`` builds fresh inputs. Observed, eager vs compiled:
the outputs or the error (type, eager's first line in ours, and in ours the file of this probe:
the user's line), every input tensor after the call (a failed call must leave eager's partial
writes and no others), and then, where ``good`` builds valid inputs, a second call of the same
compiled function on them (a call after a failed one must work). ``scenario`` functions take
``(C, rec)`` for cases with modules, training steps or loops.
Prints ``ok`` / ``DIFF`` / ``NOLINE`` (raised, without the user's line) / ``CRASH`` per case.
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
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
THIS = os.path.basename(__file__)
CASES: dict = {}


def case(name, f, make, good=None, dynamic=None):
    def run(C, rec):
        compiled = C(f, dynamic=dynamic)
        args = make()
        try:
            out = compiled(*args)
            rec("out", out)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            rec("raised", e)
        rec("inputs", [a for a in args if isinstance(a, torch.Tensor)])
        if good is not None:
            args = good()
            rec("good", compiled(*args))
            rec("good inputs", [a for a in args if isinstance(a, torch.Tensor)])

    assert name not in CASES, name
    CASES[name] = run


def scenario(fn):
    CASES[fn.__name__] = fn
    return fn


def same(a, b, path=""):
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} {a[1:3]} (xla) vs {b[0]} {b[1:3]} (eager)"
    if a[0] == "T":
        for n, x, y in zip(("dtype", "shape"), a[1:3], b[1:3]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[3], b[3]
        if x.is_floating_point() or x.is_complex():
            tol = {"rtol": 1e-5, "atol": 1e-6}
            if x.dtype in (torch.bfloat16, torch.float16):
                tol = {"rtol": 1e-3, "atol": 1e-3}
            if not torch.allclose(x, y, equal_nan=True, **tol):
                return f"{path}: values differ\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values\n{x} (xla)\n{y} (eager)"
        return None
    if a[0] == "L":
        return same_items(a, b, path, same)
    return same_error_or_value(a, b, path)


def observe(fn, compiled):
    def C(f, dynamic=None, **kw):
        if not compiled:
            return f
        return torch.compile(f, backend=BACKEND, dynamic=dynamic, **kw)

    return observations(fn, C, describe)


def compare(name, fn):
    exp = observe(fn, False)
    got = observe(fn, True)
    d = difference(got, exp, same)
    if d:
        return f"DIFF  {name}: {d}"
    for label, g in got:
        if g[0] == "E" and THIS not in g[3]:
            return f"NOLINE {name}: {g[1].__name__}: {g[3][:300]!r}"
    raised = any(g[0] == "E" for _, g in got)
    return f"ok    {name}{' (raises)' if raised else ''}"


def i(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def ints(*values):
    return torch.tensor(values)


_SING = lambda: torch.tensor([[1.0, 2.0], [2.0, 4.0]])
_NOTPD = lambda: torch.tensor([[1.0, 2.0], [2.0, 1.0]])


# ============================================================================================
# indices out of range, per indexing op (each with a valid follow-up call)
def gather(x, idx):
    return x.gather(1, idx) + 1


case(
    "gather_oob",
    gather,
    lambda: (r(3, 4), i(0, 4, 1).view(3, 1)),
    lambda: (r(3, 4), i(0, 3, 1).view(3, 1)),
)
case("gather_neg", gather, lambda: (r(3, 4), i(0, -1, 1).view(3, 1)))
case(
    "gather_dim0_oob",
    lambda x, idx: torch.gather(x, 0, idx),
    lambda: (r(3, 4), i(3, 0, 0, 0).view(1, 4)),
)
case("gather_int32", gather, lambda: (r(3, 4), i(0, 9, 1, dtype=torch.int32).view(3, 1)))


def scatter_(x, idx, src):
    x.scatter_(1, idx, src)
    return x.sum()


case(
    "scatter__oob_inplace",
    scatter_,
    lambda: (r(3, 4), i(0, 5, 1).view(3, 1), r(3, 1)),
    lambda: (r(3, 4), i(0, 3, 1).view(3, 1), r(3, 1)),
)
case(
    "scatter_value_oob",
    lambda x, idx: x.scatter(0, idx, 1.5),
    lambda: (r(3, 4), i(3, 0).view(1, 2)),
)
case(
    "scatter_reduce_add_oob",
    lambda x, idx, s: x.scatter(0, idx, s, reduce="add"),
    lambda: (r(3, 4), i(7, 0).view(1, 2), r(1, 2)),
)
case(
    "scatter_add__oob",
    lambda x, idx, s: x.scatter_add_(0, idx, s),
    lambda: (r(3, 4), i(1, -1).view(1, 2), r(1, 2)),
)
for _red in ("sum", "prod", "mean", "amax", "amin"):
    case(
        f"scatter_reduce_{_red}_oob",
        lambda x, idx, s, _red=_red: x.scatter_reduce(1, idx, s, _red, include_self=False),
        lambda: (r(3, 4), i(0, 4).view(1, 2), r(1, 2)),
    )
case("index_select_oob", lambda x, idx: x.index_select(0, idx), lambda: (r(3, 4), i(0, 3)))
case("index_select_neg", lambda x, idx: torch.index_select(x, 0, idx), lambda: (r(3, 4), i(-1)))
case("index_select_1d", lambda x, idx: x.index_select(0, idx), lambda: (r(5), i(5)))
case(
    "index_select_0d_index", lambda x, idx: x.index_select(0, idx), lambda: (r(5), torch.tensor(6))
)
case(
    "index_add__oob",
    lambda x, idx, s: x.index_add_(0, idx, s),
    lambda: (r(3, 2), i(3), r(1, 2)),
    lambda: (r(3, 2), i(2), r(1, 2)),
)
case(
    "index_add_alpha_oob",
    lambda x, idx, s: x.index_add(1, idx, s, alpha=2),
    lambda: (r(3, 2), i(2), r(3, 1)),
)
case(
    "index_copy__oob",
    lambda x, idx, s: x.index_copy_(0, idx, s),
    lambda: (r(3, 2), i(0, 3), r(2, 2)),
)
case(
    "index_copy_neg",
    lambda x, idx, s: x.index_copy(0, idx, s),
    lambda: (r(3, 2), i(0, -1), r(2, 2)),
)
case("index_fill__oob", lambda x, idx: x.index_fill_(1, idx, 0.0), lambda: (r(3, 2), i(2)))
case(
    "index_fill_tensor_value_oob",
    lambda x, idx, v: x.index_fill(0, idx, v),
    lambda: (r(3, 2), i(4), torch.tensor(1.0)),
)
case(
    "index_put_acc_oob",
    lambda x, idx, v: x.index_put_((idx,), v, accumulate=True),
    lambda: (r(3), i(0, 3), r(2)),
)
case(
    "index_put_noacc_oob",
    lambda x, idx, v: x.index_put_((idx,), v, accumulate=False),
    lambda: (r(3), i(0, 3), r(2)),
)
case(
    "index_put_2idx_oob",
    lambda x, a, b, v: x.index_put((a, b), v),
    lambda: (r(3, 4), i(0, 2), i(1, 4), r(2)),
)
case(
    "index_put_2idx_acc_neg",
    lambda x, a, b, v: x.index_put((a, b), v, True),
    lambda: (r(3, 4), i(0, -4), i(1, 3), r(2)),
)
case("take_oob", lambda x, idx: torch.take(x, idx), lambda: (r(3, 4), i(12)))
case(
    "take_along_dim_oob",
    lambda x, idx: torch.take_along_dim(x, idx, dim=1),
    lambda: (r(3, 4), i(0, 4, 1).view(3, 1)),
)
case(
    "take_along_dim_flat_oob",
    lambda x, idx: torch.take_along_dim(x, idx),
    lambda: (r(3, 4), i(0, 12)),
)
case(
    "take_along_dim_neg",
    lambda x, idx: torch.take_along_dim(x, idx, dim=1),
    lambda: (r(3, 4), i(0, -1, 1).view(3, 1)),
)
case(
    "embedding_oob",
    lambda w, idx: F.embedding(idx, w),
    lambda: (r(5, 3), i(0, 5)),
    lambda: (r(5, 3), i(0, 4)),
)
case(
    "embedding_padding_idx_oob",
    lambda w, idx: F.embedding(idx, w, padding_idx=0),
    lambda: (r(5, 3), i(0, 6)),
)
case(
    "embedding_max_norm_oob",
    lambda w, idx: F.embedding(idx, w, max_norm=1.0),
    lambda: (r(5, 3), i(0, 6)),
)
case("embedding_module_oob", lambda idx: nn.Embedding(4, 2)(idx), lambda: (i(4),))
case(
    "embedding_bag_psw_oob",
    lambda w, idx, o, p: F.embedding_bag(idx, w, o, per_sample_weights=p),
    lambda: (r(5, 3), i(0, 5, 1), i(0, 1), r(3)),
)
case(
    "embedding_bag_max_oob",
    lambda w, idx, o: F.embedding_bag(idx, w, o, mode="max"),
    lambda: (r(5, 3), i(0, 5, 1), i(0, 1)),
)
case(
    "embedding_bag_2d_oob",
    lambda w, idx: F.embedding_bag(idx, w),
    lambda: (r(5, 3), i(0, 9, 1, 2).view(2, 2)),
)
case("getitem_2d_idx_oob", lambda x, idx: x[idx], lambda: (r(3, 4), i(0, 1, 2, 3).view(2, 2)))
case("getitem_two_idx_oob", lambda x, a, b: x[a, b], lambda: (r(3, 4), i(0, 2), i(1, 4)))
case("getitem_idx_slice_oob", lambda x, a: x[1:, a], lambda: (r(3, 4), i(-5)))
case("getitem_ellipsis_oob", lambda x, a: x[..., a], lambda: (r(2, 3, 4), i(4)))
case("getitem_0d_tensor_oob", lambda x, a: x[a], lambda: (r(3, 4), torch.tensor(3)))
case("getitem_0d_tensor_neg_oob", lambda x, a: x[a] * 2, lambda: (r(3, 4), torch.tensor(-4)))
case("getitem_int32_0d_oob", lambda x, a: x[a], lambda: (r(3), torch.tensor(3, dtype=torch.int32)))
case("getitem_list_of_tensors_oob", lambda x, a: x[[a, a]], lambda: (r(3, 4), i(0, 3)))


def setitem_(x, idx, v):
    x[idx] = v
    return x


case("setitem_oob_inplace", setitem_, lambda: (r(3), i(0, 3), r(2)), lambda: (r(3), i(0, 2), r(2)))
case("setitem_0d_oob", setitem_, lambda: (r(3), torch.tensor(3), torch.tensor(1.0)))


def iadd_item(x, idx, v):
    x[idx] += v
    return x


case("setitem_iadd_oob", iadd_item, lambda: (r(3), i(1, 5), r(2)))
case("setitem_2d_oob", lambda x, a, b: x.__setitem__((a, b), 0.0), lambda: (r(3, 4), i(0), i(4)))
case(
    "masked_scatter_few_src",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(4), torch.tensor([True, True, False, True]), r(2)),
)
case(
    "masked_scatter__few_src",
    lambda x, m, s: x.masked_scatter_(m, s),
    lambda: (r(2, 2), torch.tensor([[True, True], [True, False]]), r(2)),
)
case(
    "masked_scatter_enough_src",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(4), torch.tensor([True, True, False, True]), r(3)),
)
case("put__oob", lambda x, idx, v: x.put_(idx, v), lambda: (r(3, 2), i(6), r(1)))
case(
    "put__acc_oob",
    lambda x, idx, v: x.put_(idx, v, accumulate=True),
    lambda: (r(3, 2), i(-7), r(1)),
)
case(
    "nll_loss_weight_oob",
    lambda x, t, w: F.nll_loss(x, t, weight=w),
    lambda: (r(3, 4).log_softmax(1), i(0, 4, 1), r(4).abs()),
)
case(
    "nll_loss_sum_oob",
    lambda x, t: F.nll_loss(x, t, reduction="sum"),
    lambda: (r(3, 4), i(0, 1, -2)),
)
case(
    "nll_loss_none_oob",
    lambda x, t: F.nll_loss(x, t, reduction="none"),
    lambda: (r(3, 4), i(0, 1, 5)),
)
case("nll_loss_1d_input_oob", lambda x, t: F.nll_loss(x, t), lambda: (r(4), torch.tensor(4)))
case(
    "cross_entropy_smoothing_oob",
    lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    lambda: (r(3, 4), i(0, 4, 1)),
)
case(
    "cross_entropy_ignore_oob_other",
    lambda x, t: F.cross_entropy(x, t, ignore_index=2),
    lambda: (r(3, 4), i(0, 2, 7)),
)
case(
    "cross_entropy_3d_oob",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(2, 4, 3), i(0, 1, 2, 3, 4, 0).view(2, 3)),
)
case(
    "cross_entropy_probs", lambda x, t: F.cross_entropy(x, t), lambda: (r(2, 4), r(2, 4).softmax(1))
)
case(
    "cross_entropy_module_oob", lambda x, t: nn.CrossEntropyLoss()(x, t), lambda: (r(2, 4), i(0, 9))
)
case("one_hot_oob", lambda t: F.one_hot(t, 4), lambda: (i(0, 4),))
case("one_hot_neg", lambda t: F.one_hot(t, 4), lambda: (i(0, -1),))
case("one_hot_infer", lambda t: F.one_hot(t), lambda: (i(0, 2),))
case("one_hot_infer_neg", lambda t: F.one_hot(t), lambda: (i(0, -2),))
case("bincount_neg", lambda t: torch.bincount(t), lambda: (i(0, -1, 2),))
case("bincount_ok", lambda t: torch.bincount(t, minlength=5), lambda: (i(0, 1, 2),))
case(
    "multinomial_neg", lambda p: torch.multinomial(p, 1), lambda: (torch.tensor([0.5, -0.2, 0.7]),)
)
case("multinomial_zero_sum", lambda p: torch.multinomial(p, 1), lambda: (torch.zeros(2, 3),))
case(
    "multinomial_too_many",
    lambda p: torch.multinomial(p, 3),
    lambda: (torch.tensor([0.5, 0.0, 0.5]),),
)
case(
    "searchsorted_sorter_oob",
    lambda s, v, so: torch.searchsorted(s, v, sorter=so),
    lambda: (r(4), r(3), i(0, 1, 2, 4)),
)
case(
    "searchsorted_sorter_neg",
    lambda s, v, so: torch.searchsorted(s, v, sorter=so),
    lambda: (r(4), r(3), i(0, 1, -1, 2)),
)
case(
    "repeat_interleave_neg",
    lambda x, rep: x.repeat_interleave(rep, dim=0),
    lambda: (r(3), i(1, -1, 2)),
)
case("repeat_interleave_only_neg", lambda rep: torch.repeat_interleave(rep), lambda: (i(1, -1, 2),))
case(
    "repeat_interleave_size_mismatch",
    lambda x, rep: x.repeat_interleave(rep, dim=0),
    lambda: (r(3), i(1, 2)),
)
case(
    "unravel_index_oob",
    lambda idx: torch.stack(torch.unravel_index(idx, (2, 3))),
    lambda: (i(0, 6),),
)
case(
    "unravel_index_neg",
    lambda idx: torch.stack(torch.unravel_index(idx, (2, 3))),
    lambda: (i(0, -1),),
)
case(
    "bucketize_ok",
    lambda x, b: torch.bucketize(x, b),
    lambda: (r(5), torch.tensor([-1.0, 0.0, 1.0])),
)
case(
    "grid_sample_far",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    lambda: (r(1, 1, 3, 3), r(1, 2, 2, 2) * 5),
)
case("index_float_tensor", lambda x, idx: x[idx], lambda: (r(3), torch.tensor([0.0, 1.0])))
case(
    "index_select_float_index",
    lambda x, idx: x.index_select(0, idx),
    lambda: (r(3), torch.tensor([0.0])),
)
case("gather_int32_ok", lambda x, idx: x.gather(0, idx), lambda: (r(3), i(0, 2, dtype=torch.int32)))
case("narrow_tensor_start_oob", lambda x, s: x.narrow(0, s, 2), lambda: (r(4), torch.tensor(3)))
case("select_tensor_oob", lambda x, s: x.select(0, s.item()), lambda: (r(4), torch.tensor(4)))
case("roll_ok", lambda x: x.roll(5), lambda: (r(3),))
case("diag_embed_ok", lambda x: torch.diag_embed(x, offset=5), lambda: (r(3),))
case(
    "index_reduce_oob",
    lambda x, idx, s: x.index_reduce(0, idx, s, "mean"),
    lambda: (r(3, 2), i(3), r(1, 2)),
)
case(
    "index_put_bool_mask_shape",
    lambda x, m: x.index_put((m,), torch.tensor(1.0)),
    lambda: (r(3), torch.tensor([True, False])),
)
case("getitem_bool_mask_shape", lambda x, m: x[m], lambda: (r(3), torch.tensor([True, False])))
case(
    "kthvalue_tensor",
    lambda x, k: torch.kthvalue(x, k.item()).values,
    lambda: (r(3), torch.tensor(4)),
)
case("nll_loss_ignore_neg100", lambda x, t: F.nll_loss(x, t), lambda: (r(3, 4), i(0, -100, 3)))
case(
    "ctc_ok",
    lambda lp, t: F.ctc_loss(lp, t, torch.tensor([5]), torch.tensor([2])),
    lambda: (r(5, 1, 4).log_softmax(2), i(1, 2).view(1, 2)),
)
case(
    "ctc_target_oob",
    lambda lp, t: F.ctc_loss(lp, t, torch.tensor([5]), torch.tensor([2])),
    lambda: (r(5, 1, 4).log_softmax(2), i(1, 7).view(1, 2)),
)
case("multi_margin_oob", lambda x, t: F.multi_margin_loss(x, t), lambda: (r(3, 4), i(0, 4, 1)))
case(
    "multilabel_margin_oob",
    lambda x, t: F.multilabel_margin_loss(x, t),
    lambda: (r(2, 4), i(0, 5, -1, 0, 1, 2, 3, -1).view(2, 4)),
)
case(
    "max_unpool_oob",
    lambda x, idx: F.max_unpool1d(x, idx, 2),
    lambda: (r(1, 1, 2), i(0, 9).view(1, 1, 2)),
)
case(
    "index_put_broadcast_vals_oob",
    lambda x, idx: x.index_put((idx,), torch.tensor(2.0)),
    lambda: (r(3, 2), i(-4)),
)

# value checks of other kernels (random ops, quantiles, eigen decompositions, histograms)
case(
    "normal_neg_std",
    lambda m, s: torch.normal(m, s) * 0,
    lambda: (r(3), torch.tensor([1.0, -1.0, 1.0])),
)
case(
    "normal_scalar_mean_neg_std",
    lambda s: torch.normal(0.0, s) * 0,
    lambda: (torch.tensor([1.0, -1.0]),),
)
case("bernoulli_p_above_1", lambda p: torch.bernoulli(p) * 0, lambda: (torch.tensor([0.5, 1.5]),))
case("bernoulli_p_neg", lambda p: torch.bernoulli(p) * 0, lambda: (torch.tensor([0.5, -0.5]),))
case(
    "bernoulli__tensor_p_oob",
    lambda x, p: x.bernoulli_(p) * 0,
    lambda: (r(2), torch.tensor([0.5, 2.0])),
)
case("poisson_neg", lambda p: torch.poisson(p) * 0, lambda: (torch.tensor([1.0, -1.0]),))
case(
    "binomial_neg",
    lambda c, p: torch.binomial(c, p) * 0,
    lambda: (torch.tensor([5.0, -1.0]), torch.tensor([0.5, 0.5])),
)
case("quantile_q_oob", lambda x, q: torch.quantile(x, q), lambda: (r(5), torch.tensor([0.5, 1.5])))
case(
    "nanquantile_q_neg", lambda x, q: torch.nanquantile(x, q), lambda: (r(5), torch.tensor([-0.5]))
)
case(
    "quantile_ok", lambda x, q: torch.quantile(x, q), lambda: (r(5), torch.tensor([0.0, 0.3, 1.0]))
)
case(
    "eig_nan",
    lambda a: torch.linalg.eigvals(a).real,
    lambda: (torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]),),
)
case(
    "eig_inf",
    lambda a: torch.linalg.eig(a).eigenvalues.real,
    lambda: (torch.tensor([[float("inf"), 0.0], [0.0, 1.0]]),),
)
case("histc_nan", lambda x: torch.histc(x, bins=4), lambda: (torch.tensor([1.0, float("nan")]),))
case("histc_inf", lambda x: torch.histc(x, bins=4), lambda: (torch.tensor([1.0, float("inf")]),))
case("histc_ok", lambda x: torch.histc(x, bins=4, min=-1, max=1), lambda: (r(6),))
case(
    "max_unpool2d_oob",
    lambda x, idx: F.max_unpool2d(x, idx, 2),
    lambda: (r(1, 1, 2, 2), i(0, 2, 8, 16).view(1, 1, 2, 2)),
)
case(
    "max_unpool2d_neg",
    lambda x, idx: F.max_unpool2d(x, idx, 2),
    lambda: (r(1, 1, 2, 2), i(0, -1, 8, 10).view(1, 1, 2, 2)),
)
case(
    "max_unpool3d_oob",
    lambda x, idx: F.max_unpool3d(x, idx, 2),
    lambda: (r(1, 1, 1, 1, 2), i(0, 40).view(1, 1, 1, 1, 2)),
)
case(
    "max_pool_unpool_ok",
    lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
    lambda: (r(1, 1, 4, 4),),
)
case(
    "searchsorted_sorter_ok",
    lambda s, v, so: torch.searchsorted(s, v, sorter=so),
    lambda: (r(4), r(3), i(3, 1, 2, 0)),
)
case(
    "searchsorted_sorter_2d_oob",
    lambda s, v, so: torch.searchsorted(s, v, sorter=so, right=True),
    lambda: (r(2, 3), r(2, 2), i(0, 1, 2, 0, 3, 1).view(2, 3)),
)
case(
    "masked_scatter_2d_bcast_few",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(2, 3), torch.tensor([True, False, True]), r(3)),
)
case(
    "masked_scatter_empty_src_none",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(3), torch.tensor([False, False, False]), r(0)),
)
case(
    "masked_scatter_ok_more_src",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(2, 2), torch.tensor([[True, False], [True, True]]), r(5)),
)
case("assert_async_int", lambda x: torch._assert_async(x) or x + 1, lambda: (torch.tensor(0),))
case(
    "assert_async_float_ok", lambda x: torch._assert_async(x) or x + 1, lambda: (torch.tensor(0.5),)
)
case(
    "addmm_mat1_mixed",
    lambda c, a, b: torch.addmm(c, a, b),
    lambda: (r(2, 2), r(2, 2, dtype=torch.float64), r(2, 2)),
)
case(
    "addmm_all_mixed",
    lambda c, a, b: torch.addmm(c, a, b),
    lambda: (r(2, 2, dtype=torch.float16), r(2, 2, dtype=torch.float64), r(2, 2)),
)
case(
    "addbmm_mixed",
    lambda c, a, b: torch.addbmm(c, a, b),
    lambda: (r(2, 2), r(1, 2, 2), r(1, 2, 2, dtype=torch.float64)),
)
case(
    "baddbmm_mixed",
    lambda c, a, b: torch.baddbmm(c, a, b),
    lambda: (r(1, 2, 2), r(1, 2, 2), r(1, 2, 2, dtype=torch.float64)),
)
case("index_add_1d_oob", lambda x, idx, s: x.index_add(0, idx, s), lambda: (r(4), i(0, 4), r(2)))
case(
    "index_add_dim1_oob",
    lambda x, idx, s: x.index_add(1, idx, s),
    lambda: (r(2, 3), i(0, 3), r(2, 2)),
)
case(
    "index_add_dim2_oob",
    lambda x, idx, s: x.index_add(2, idx, s),
    lambda: (r(2, 2, 3), i(5), r(2, 2, 1)),
)
case(
    "index_add_dim0_neg",
    lambda x, idx, s: x.index_add(0, idx, s),
    lambda: (r(3, 2), i(-1), r(1, 2)),
)
case("index_fill_dim1_neg", lambda x, idx: x.index_fill(1, idx, 0.0), lambda: (r(3, 2), i(-3)))
case("index_fill_dim2_oob", lambda x, idx: x.index_fill(2, idx, 0.0), lambda: (r(3, 2, 2), i(2)))
case(
    "index_copy_dim1_oob",
    lambda x, idx, s: x.index_copy(1, idx, s),
    lambda: (r(3, 2), i(2), r(3, 1)),
)
case("index_copy_1d_oob", lambda x, idx, s: x.index_copy(0, idx, s), lambda: (r(3), i(3), r(1)))
case(
    "index_reduce_dim1_oob",
    lambda x, idx, s: x.index_reduce(1, idx, s, "amax"),
    lambda: (r(3, 2), i(2), r(3, 1)),
)
case("index_select_dim2_oob", lambda x, idx: x.index_select(2, idx), lambda: (r(2, 2, 3), i(3)))
case("gather_1d_oob", lambda x, idx: x.gather(0, idx), lambda: (r(3), i(3)))
case("scatter_1d_oob", lambda x, idx: x.scatter(0, idx, 1.0), lambda: (r(3), i(3)))
case(
    "embedding_max_norm_neg",
    lambda w, idx: F.embedding(idx, w, max_norm=1.0),
    lambda: (r(5, 3), i(-1)),
)
case(
    "embedding_bag_mean_2d_oob",
    lambda w, idx: F.embedding_bag(idx, w, mode="mean"),
    lambda: (r(5, 3), i(0, 1, 2, -1).view(2, 2)),
)
case(
    "embedding_bag_max_2d_oob",
    lambda w, idx: F.embedding_bag(idx, w, mode="max"),
    lambda: (r(5, 3), i(0, 1, 2, 5).view(2, 2)),
)
case(
    "embedding_bag_sum_psw_oob",
    lambda w, idx, o, p: F.embedding_bag(idx, w, o, mode="sum", per_sample_weights=p),
    lambda: (r(5, 3), i(0, 5, 1), i(0, 1), r(3)),
)
case(
    "embedding_bag_module_oob",
    lambda idx: nn.EmbeddingBag(4, 2)(idx),
    lambda: (i(0, 4).view(1, 2),),
)
case("multi_margin_neg", lambda x, t: F.multi_margin_loss(x, t), lambda: (r(3, 4), i(0, -1, 1)))
case("multi_margin_1d_oob", lambda x, t: F.multi_margin_loss(x, t), lambda: (r(4), torch.tensor(4)))
case(
    "multilabel_margin_neg2",
    lambda x, t: F.multilabel_margin_loss(x, t),
    lambda: (r(2, 4), i(0, -2, -1, 0, 1, 2, 3, -1).view(2, 4)),
)
case(
    "multilabel_margin_ok",
    lambda x, t: F.multilabel_margin_loss(x, t),
    lambda: (r(2, 4), i(0, 3, -1, 5, 1, 2, 3, -1).view(2, 4)),
)

# dead results of checking ops still raise
case(
    "dead_masked_scatter",
    lambda x, m, s: (x.masked_scatter(m, s), x + 1)[1],
    lambda: (r(3), torch.tensor([True, True, True]), r(2)),
)
case(
    "dead_searchsorted",
    lambda s, v, so: (torch.searchsorted(s, v, sorter=so), v + 1)[1],
    lambda: (r(4), r(3), i(0, 1, 2, 4)),
)
case(
    "dead_max_unpool",
    lambda x, idx: (F.max_unpool1d(x, idx, 2), x + 1)[1],
    lambda: (r(1, 1, 2), i(0, 9).view(1, 1, 2)),
)
case(
    "dead_inv_ex_check",
    lambda a: (torch.linalg.inv_ex(a, check_errors=True), a + 1)[1],
    lambda: (_SING(),),
)
case(
    "dead_normal",
    lambda m, s: (torch.normal(m, s), m + 1)[1],
    lambda: (r(3), torch.tensor([1.0, -1.0, 1.0])),
)
case(
    "dead_quantile",
    lambda x, q: (torch.quantile(x, q), x + 1)[1],
    lambda: (r(5), torch.tensor([1.5])),
)
case(
    "dead_multi_margin",
    lambda x, t: (F.multi_margin_loss(x, t), x + 1)[1],
    lambda: (r(3, 4), i(0, 4, 1)),
)
case(
    "quantile_method_q_oob",
    lambda x, q: x.quantile(q, dim=0),
    lambda: (r(5, 2), torch.tensor([0.5, 1.5])),
)
case(
    "nanquantile_method_q_nan",
    lambda x, q: x.nanquantile(q),
    lambda: (r(5), torch.tensor([float("nan")])),
)
case(
    "quantile_2d_q",
    lambda x, q: torch.quantile(x, q, dim=1, keepdim=True),
    lambda: (r(3, 5), torch.tensor([0.1, -0.1])),
)

# more value checks: lengths, bins, dtypes of targets and indices
case(
    "ctc_input_lengths_too_long",
    lambda lp, t: F.ctc_loss(lp, t, torch.tensor([7]), torch.tensor([2])),
    lambda: (r(5, 1, 4).log_softmax(2), i(1, 2).view(1, 2)),
)
case(
    "ctc_target_lengths_too_long",
    lambda lp, t: F.ctc_loss(lp, t, torch.tensor([5]), torch.tensor([3])),
    lambda: (r(5, 1, 4).log_softmax(2), i(1, 2).view(1, 2)),
)
case(
    "ctc_1d_targets_lengths_sum",
    lambda lp, t: F.ctc_loss(lp, t, torch.tensor([5, 5]), torch.tensor([2, 3])),
    lambda: (r(5, 2, 4).log_softmax(2), i(1, 2, 3, 1)),
)
case(
    "segment_reduce_bad_lengths",
    lambda d, l: torch.segment_reduce(d, "sum", lengths=l),
    lambda: (r(5), i(2, 2)),
)
case(
    "segment_reduce_ok",
    lambda d, l: torch.segment_reduce(d, "sum", lengths=l),
    lambda: (r(5), i(2, 3)),
)
case(
    "repeat_interleave_output_size_neg",
    lambda x, rep: x.repeat_interleave(rep, dim=0, output_size=3),
    lambda: (r(3), i(2, -1, 2)),
)
case(
    "repeat_interleave_output_size_wrong",
    lambda x, rep: x.repeat_interleave(rep, dim=0, output_size=4),
    lambda: (r(3), i(1, 1, 1)),
)
case(
    "repeat_interleave_output_size_ok",
    lambda x, rep: x.repeat_interleave(rep, dim=0, output_size=4),
    lambda: (r(3), i(1, 1, 2)),
)
case(
    "histogram_bins_decreasing",
    lambda x, b: torch.histogram(x, b).hist,
    lambda: (r(5), torch.tensor([1.0, 0.0, 2.0])),
)
case(
    "nll_loss_int32_target",
    lambda x, t: F.nll_loss(x, t),
    lambda: (r(2, 3), i(0, 1, dtype=torch.int32)),
)
case(
    "cross_entropy_int32_target",
    lambda x, t: F.cross_entropy(x, t),
    lambda: (r(2, 3), i(0, 1, dtype=torch.int32)),
)
case("getitem_int16_index", lambda x, idx: x[idx], lambda: (r(3), i(0, 1, dtype=torch.int16)))
case("getitem_uint8_index", lambda x, idx: x[idx], lambda: (r(3), i(0, 1, 1, dtype=torch.uint8)))
case(
    "index_fill_int32_index",
    lambda x, idx: x.index_fill(0, idx, 1.0),
    lambda: (r(3), i(0, dtype=torch.int32)),
)
case(
    "scatter_int32_index",
    lambda x, idx: x.scatter(0, idx, 1.0),
    lambda: (r(3), i(0, dtype=torch.int32)),
)
case(
    "index_add_int32_index_ok",
    lambda x, idx, s: x.index_add(0, idx, s),
    lambda: (r(3), i(0, dtype=torch.int32), r(1)),
)
case(
    "istft_zero_window",
    lambda s, w: torch.istft(s, 4, window=w),
    lambda: (torch.stft(r(16), 4, window=torch.ones(4), return_complex=True), torch.zeros(4)),
)
case(
    "gaussian_nll_neg_var",
    lambda x, t, v: F.gaussian_nll_loss(x, t, v),
    lambda: (r(3), r(3), torch.tensor([1.0, -1.0, 1.0])),
)
case(
    "kl_div_ok",
    lambda x, t: F.kl_div(x, t, reduction="batchmean"),
    lambda: (r(2, 3), r(2, 3).softmax(1)),
)
case(
    "pack_padded_unsorted",
    lambda x, l: torch.nn.utils.rnn.pack_padded_sequence(x, l, batch_first=True).data,
    lambda: (r(2, 3, 1), i(2, 3)),
)
case(
    "fractional_max_pool_samples_oob",
    lambda x, s: F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=s),
    lambda: (r(1, 1, 4, 4), torch.tensor([[[1.5, 0.5]]])),
)
case(
    "adaptive_log_softmax_target_oob",
    lambda x, t: nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2])(x, t).loss,
    lambda: (r(2, 4), i(0, 6)),
)
case("unique_dim_ok", lambda x: torch.unique(x, dim=0), lambda: (i(1, 2, 1, 2).view(2, 2),))
case("topk_k_tensor", lambda x, k: torch.topk(x, int(k)).values, lambda: (r(3), torch.tensor(4)))
case("interpolate_ok", lambda x: F.interpolate(x, scale_factor=2), lambda: (r(1, 1, 2),))
case(
    "embedding_renorm_oob",
    lambda w, idx: torch.embedding_renorm_(w, idx, 1.0, 2.0),
    lambda: (r(4, 2), i(0, 4)),
)
case("index_copy_dup_ok", lambda x, idx, s: x.index_copy(0, idx, s), lambda: (r(3), i(1, 1), r(2)))
case("nonzero_static_ok", lambda x: torch.nonzero_static(x, size=4), lambda: (i(0, 1, 0, 2),))
case("cdist_ok", lambda a, b: torch.cdist(a, b), lambda: (r(2, 3), r(4, 3)))
case("dist_ok", lambda a, b: torch.dist(a, b, p=0), lambda: (r(3), r(3)))
case("renorm_ok", lambda a: a.renorm(2, 0, 1.0), lambda: (r(3, 2),))
case("cummax_empty_ok", lambda a: torch.cummax(a, 0).values, lambda: (r(0),))
case("logsumexp_int", lambda a: torch.logsumexp(a, 0), lambda: (A(),))
case("argmax_empty_dim", lambda a: a.argmax(1), lambda: (r(3, 0),))
case("max_empty_dim_int", lambda a: a.max(1).values, lambda: (torch.zeros(3, 0, dtype=torch.long),))
case("mode_empty", lambda a: torch.mode(a, 0).values, lambda: (r(0, 2),))
case("median_empty_dim", lambda a: torch.median(a, 0).values, lambda: (r(0, 2),))
case("kthvalue_empty", lambda a: torch.kthvalue(a, 1, 0).values, lambda: (r(0, 2),))
case("prod_empty_ok", lambda a: a.prod(0), lambda: (r(0, 2),))
case("std_empty_ok", lambda a: a.std(0), lambda: (r(0, 2),))
case("amax_empty_dim", lambda a: a.amax(0), lambda: (r(0, 2),))
case("topk_empty", lambda a: torch.topk(a, 1).values, lambda: (r(0),))

case(
    "segment_reduce_neg_lengths",
    lambda d, l: torch.segment_reduce(d, "max", lengths=l),
    lambda: (r(5), i(-1, 6)),
)
case(
    "segment_reduce_offsets_decreasing",
    lambda d, o: torch.segment_reduce(d, "sum", offsets=o),
    lambda: (r(5), i(0, 6, 5)),
)
case(
    "segment_reduce_offsets_ok",
    lambda d, o: torch.segment_reduce(d, "sum", offsets=o),
    lambda: (r(5), i(1, 2, 5)),
)
case(
    "segment_reduce_unsafe_ok",
    lambda d, l: torch.segment_reduce(d, "sum", lengths=l, unsafe=True),
    lambda: (r(5), i(2, 2)),
)
case("nanmedian_empty_dim", lambda a: torch.nanmedian(a, 1).values, lambda: (r(2, 0),))
case("median_empty_other_dim_ok", lambda a: torch.median(a, 0).values, lambda: (r(2, 0),))
case(
    "embedding_renorm_neg_ok",
    lambda w, idx: torch.embedding_renorm_(w, idx, 1.0, 2.0),
    lambda: (r(4, 2), i(0, -1)),
)
case(
    "embedding_renorm_neg_oob",
    lambda w, idx: torch.embedding_renorm_(w, idx, 1.0, 2.0),
    lambda: (r(4, 2), i(0, -5)),
)

case("normal_float_std_neg", lambda m: torch.normal(m, -1.0), lambda: (r(3),))
case("normal__neg_std", lambda x: x.normal_(0.0, -1.0), lambda: (r(3),))
case("uniform__ok", lambda x: x.uniform_(0.0, 1.0).shape, lambda: (r(3),))
case("random__bad_range", lambda x: x.random_(3, 1), lambda: (r(3),))
case("random__to_zero", lambda x: x.random_(0), lambda: (r(3),))
case("randint_like_high_zero", lambda x: torch.randint_like(x, 0), lambda: (r(3),))
case("bernoulli__float_p_oob", lambda x: x.bernoulli_(-0.5), lambda: (r(3),))
case("bernoulli_p_float_oob", lambda x: torch.bernoulli(x, 1.5), lambda: (r(3),))
case("exponential_neg", lambda x: x.exponential_(-1.0), lambda: (r(3),))
case("geometric_p_oob", lambda x: x.geometric_(1.5), lambda: (r(3),))
case("randint_like_bad_range", lambda x: torch.randint_like(x, 3, 1), lambda: (r(3),))
case("dropout_p_oob", lambda x: F.dropout(x, 1.5), lambda: (r(3),))
case("log_normal_neg_std", lambda x: x.log_normal_(0.0, -1.0), lambda: (r(3),))
case("cauchy_neg_sigma", lambda x: x.cauchy_(0.0, -1.0), lambda: (r(3),))
case(
    "multinomial_2d_one_bad_row",
    lambda p: torch.multinomial(p, 1),
    lambda: (torch.tensor([[0.5, 0.5], [-1.0, 2.0]]),),
)


# ============================================================================================
# integer division by zero
A, B0 = (lambda: ints(7, -7, 3)), (lambda: ints(2, 0, 1))


def ifloordiv(a, b):
    a //= b
    return a


def imod(a, b):
    a %= b
    return a


case("ifloordiv_inplace", ifloordiv, lambda: (A(), B0()), lambda: (A(), ints(2, 3, 1)))
case("imod_inplace", imod, lambda: (A(), B0()))
case("floor_divide_", lambda a, b: a.floor_divide_(b), lambda: (A(), B0()))
case("remainder_", lambda a, b: a.remainder_(b), lambda: (A(), B0()))
case("fmod_", lambda a, b: a.fmod_(b), lambda: (A(), B0()))
case("div__floor", lambda a, b: a.div_(b, rounding_mode="floor"), lambda: (A(), B0()))
case("div__trunc", lambda a, b: a.div_(b, rounding_mode="trunc"), lambda: (A(), B0()))
case("fmod_scalar_zero", lambda a: torch.fmod(a, 0), lambda: (A(),))
case("div_trunc_scalar_zero", lambda a: torch.div(a, 0, rounding_mode="trunc"), lambda: (A(),))
case("div_floor_scalar_zero", lambda a: torch.div(a, 0, rounding_mode="floor"), lambda: (A(),))
case("floordiv_0d", lambda a, b: a // b, lambda: (A(), torch.tensor(0)))
case("floordiv_int8", lambda a, b: a // b, lambda: (A().to(torch.int8), B0().to(torch.int8)))
case("floordiv_int16", lambda a, b: a // b, lambda: (A().to(torch.int16), B0().to(torch.int16)))
case("mod_int32", lambda a, b: a % b, lambda: (A().int(), B0().int()))
case("rfloordiv_scalar", lambda b: 7 // b, lambda: (B0(),))
case("rmod_scalar", lambda b: 7 % b, lambda: (B0(),))
case(
    "floordiv_bool",
    lambda a, b: a // b,
    lambda: (torch.tensor([True, False]), torch.tensor([True, False])),
)
case(
    "remainder_bool",
    lambda a, b: torch.remainder(a, b),
    lambda: (torch.tensor([True, False]), torch.tensor([True, False])),
)
case("floordiv_int_by_float0", lambda a: a // 0.0, lambda: (A(),))
case("floordiv_python_int_arg", lambda a, n: a // n, lambda: (A(), 0))
case("mod_python_int_arg", lambda a, n: a % n, lambda: (A(), 0))
case("floordiv_python_int_arg_dyn", lambda a, n: a // n, lambda: (A(), 0), dynamic=True)
case("floordiv_item_divisor", lambda a, b: a // b.max().item(), lambda: (A(), ints(0, 0)))
case("floordiv_sum_divisor", lambda a, b: a // b.sum(), lambda: (A(), ints(1, -1)))
case("floordiv_dead_inplace", lambda a, b: (a.clone().floor_divide_(b), a)[1], lambda: (A(), B0()))
case("int_mean_by_zero_ok", lambda a: a / 0, lambda: (A(),))
case(
    "floordiv_uint8", lambda a, b: a // b, lambda: (A().abs().to(torch.uint8), B0().to(torch.uint8))
)
case("fmod_int_0d_zero", lambda a, b: torch.fmod(a, b), lambda: (A(), torch.tensor(0)))
case("remainder_scalar_tensor_zero", lambda b: torch.remainder(5, b), lambda: (B0(),))
case(
    "floordiv_scalar_tensor_zero", lambda b: torch.floor_divide(torch.tensor(5), b), lambda: (B0(),)
)
case(
    "div_mode_int_scalar_zero_arg",
    lambda a, n: torch.div(a, n, rounding_mode="floor"),
    lambda: (A(), 0),
)
case("lcm_gcd_zero_ok", lambda a, b: (torch.gcd(a, b), torch.lcm(a, b)), lambda: (A(), B0()))
case("bitwise_shift_ok", lambda a: (a << 65, a >> 70), lambda: (A(),))

# integer powers
case("pow_int_neg_scalar", lambda a: torch.pow(a, -2), lambda: (A(),))
case("pow__int_neg", lambda a: a.pow_(-1), lambda: (A(),))
case("ipow_int_neg", lambda a: a.__ipow__(-1), lambda: (A(),))
case("pow_int_neg_arg", lambda a, n: a**n, lambda: (A(), -1))
case("pow_int_neg_arg_dyn", lambda a, n: a**n, lambda: (A(), -1), dynamic=True)
case("pow_int_tensor_neg_exp", lambda a, e: a**e, lambda: (A(), ints(-1, -1, -1)))
case("pow_int_scalar_tensor_neg_exp", lambda e: torch.pow(2, e), lambda: (ints(-1, 2),))
case("pow_int8_neg", lambda a: a ** (-3), lambda: (A().to(torch.int8),))
case("pow_uint8_neg", lambda a: a ** (-3), lambda: (A().abs().to(torch.uint8),))
case("pow_bool_neg", lambda a: a ** (-1), lambda: (torch.tensor([True, False]),))
case("float_power_int_neg_ok", lambda a: torch.float_power(a, -1), lambda: (A(),))

# ============================================================================================
# dtypes eager rejects
case("add__int_float", lambda a, b: a.add_(b), lambda: (A(), r(3)))
case("add__int_float_scalar", lambda a: a.add_(1.5), lambda: (A(),))
case("mul__bool_int", lambda a, b: a.mul_(b), lambda: (torch.tensor([True, False]), ints(1, 2)))
case("iadd_int_float_tensor", lambda a, b: a.__iadd__(b), lambda: (A(), r(3)))
case("sub__int_float_0d", lambda a, b: a.sub_(b), lambda: (A(), torch.tensor(0.5)))
case("div__int_true", lambda a: a.div_(2), lambda: (A(),))
case("clamp__int_float", lambda a: a.clamp_(min=0.5), lambda: (A(),))
case("setitem_int_float_value", lambda a: a.__setitem__(0, 1.5), lambda: (A(),))
case("copy__float_to_int_ok", lambda a, b: a.copy_(b), lambda: (A(), r(3)))
case("copy__bool", lambda a, b: a.copy_(b), lambda: (torch.zeros(3, dtype=torch.bool), r(3)))
case(
    "index_add_src_dtype",
    lambda x, idx, s: x.index_add(0, idx, s),
    lambda: (r(3), i(0), r(1, dtype=torch.float64)),
)
case(
    "index_copy_src_dtype",
    lambda x, idx, s: x.index_copy(0, idx, s),
    lambda: (r(3), i(0), r(1, dtype=torch.float64)),
)
case(
    "scatter_src_dtype",
    lambda x, idx, s: x.scatter(0, idx, s),
    lambda: (r(3), i(0), r(1, dtype=torch.float64)),
)
case(
    "scatter_add_src_dtype",
    lambda x, idx, s: x.scatter_add(0, idx, s),
    lambda: (r(3), i(0), r(1, dtype=torch.float64)),
)
case(
    "scatter_reduce_src_dtype",
    lambda x, idx, s: x.scatter_reduce(0, idx, s, "sum"),
    lambda: (r(3), i(0), r(1, dtype=torch.float64)),
)
case(
    "gather_out_int32_idx_ok",
    lambda x, idx: x.gather(0, idx),
    lambda: (r(3), i(2, dtype=torch.int32)),
)
case(
    "index_fill_tensor_value_dtype",
    lambda x, idx, v: x.index_fill(0, idx, v),
    lambda: (r(3), i(0), torch.tensor(2, dtype=torch.int64)),
)
case(
    "masked_fill_float_on_int_ok",
    lambda x, m: x.masked_fill(m, 1.5),
    lambda: (A(), torch.tensor([True, False, True])),
)
case(
    "masked_fill_tensor_value_dtype",
    lambda x, m, v: x.masked_fill(m, v),
    lambda: (A(), torch.tensor([True, False, True]), torch.tensor(1.5)),
)
case(
    "masked_fill_value_not_0d",
    lambda x, m, v: x.masked_fill(m, v),
    lambda: (r(3), torch.tensor([True, False, True]), r(2)),
)
case("masked_fill_float_mask", lambda x, m: x.masked_fill(m, 0.0), lambda: (r(3), r(3)))
case(
    "masked_scatter_src_dtype",
    lambda x, m, s: x.masked_scatter(m, s),
    lambda: (r(3), torch.tensor([True, False, True]), r(3, dtype=torch.float64)),
)
case("masked_select_float_mask", lambda x, m: x.masked_select(m), lambda: (r(3), r(3)))
case("where_float_cond", lambda c, x: torch.where(c, x, 0.0), lambda: (r(3), r(3)))
case(
    "where_mixed_promotes",
    lambda c, x, y: torch.where(c, x, y),
    lambda: (torch.tensor([True, False]), r(2), ints(1, 2)),
)
case("lerp_mixed", lambda a, b: torch.lerp(a, b, 0.5), lambda: (r(3), r(3, dtype=torch.float64)))
case(
    "lerp_weight_mixed",
    lambda a, b, w: torch.lerp(a, b, w),
    lambda: (r(3), r(3), r(3, dtype=torch.float64)),
)
case("cat_mixed_ok", lambda a, b: torch.cat([a, b]), lambda: (r(3), ints(1, 2)))
case("matmul_int_float", lambda a, b: a @ b, lambda: (ints(1, 2, 3, 4).view(2, 2), r(2, 2)))
case(
    "addmm_mixed",
    lambda c, a, b: torch.addmm(c, a, b),
    lambda: (r(2, 2), r(2, 2), r(2, 2, dtype=torch.float64)),
)
case(
    "addmm_self_mixed",
    lambda c, a, b: torch.addmm(c, a, b),
    lambda: (r(2, 2, dtype=torch.float64), r(2, 2), r(2, 2)),
)
case(
    "bmm_mixed", lambda a, b: torch.bmm(a, b), lambda: (r(1, 2, 2), r(1, 2, 2, dtype=torch.float64))
)
case(
    "einsum_mixed",
    lambda a, b: torch.einsum("ij,jk->ik", a, b),
    lambda: (r(2, 2), r(2, 2, dtype=torch.float64)),
)
case("dot_int_float", lambda a, b: torch.dot(a, b), lambda: (A(), r(3)))
case("matmul_int_ok", lambda a, b: a @ b, lambda: (A().view(1, 3), A().view(3, 1)))
case(
    "conv_mixed", lambda x, w: F.conv1d(x, w), lambda: (r(1, 1, 4), r(1, 1, 2, dtype=torch.float64))
)
case("linear_int_input", lambda x, w: F.linear(x, w), lambda: (ints(1, 2).view(1, 2), r(3, 2)))
case(
    "embedding_float_idx",
    lambda w, idx: F.embedding(idx, w),
    lambda: (r(3, 2), torch.tensor([0.0, 1.0])),
)
case("bitwise_and_float", lambda a, b: a & b, lambda: (r(3), r(3)))
case("bitwise_not_float", lambda a: ~a, lambda: (r(3),))
case("logical_ok", lambda a, b: torch.logical_and(a, b), lambda: (r(3), r(3)))
case("sort_bool_ok", lambda a: torch.sort(a), lambda: (torch.tensor([True, False]),))
case("cumsum_bool_ok", lambda a: torch.cumsum(a, 0), lambda: (torch.tensor([True, False]),))
case("neg_bool", lambda a: -a, lambda: (torch.tensor([True, False]),))
case(
    "sub_bool",
    lambda a, b: a - b,
    lambda: (torch.tensor([True, False]), torch.tensor([True, True])),
)
case("abs_bool_ok", lambda a: a.abs(), lambda: (torch.tensor([True, False]),))
case("mean_int", lambda a: a.mean(), lambda: (A(),))
case("var_int", lambda a: a.var(), lambda: (A(),))
case("norm_int", lambda a: a.norm(), lambda: (A(),))
case("softmax_int", lambda a: a.softmax(0), lambda: (A(),))
case("sigmoid_int_ok", lambda a: a.sigmoid(), lambda: (A(),))
case("sigmoid__int", lambda a: a.sigmoid_(), lambda: (A(),))
case("exp__int", lambda a: a.exp_(), lambda: (A(),))
case("floor_int_ok", lambda a: a.floor(), lambda: (A(),))
case("ceil__int_ok", lambda a: a.ceil_(), lambda: (A(),))
case("round_decimals_int", lambda a: torch.round(a, decimals=1), lambda: (A(),))
case("trunc_int_ok", lambda a: torch.trunc(a), lambda: (A(),))
case("signbit_bool", lambda a: torch.signbit(a), lambda: (torch.tensor([True]),))
case("isnan_int_ok", lambda a: torch.isnan(a), lambda: (A(),))
case(
    "out_dtype_mismatch",
    lambda a, o: torch.add(a, a, out=o),
    lambda: (r(3), torch.empty(3, dtype=torch.int64)),
)
case(
    "out_int_from_float_sum",
    lambda a, o: torch.sum(a, 0, out=o),
    lambda: (r(3, 2), torch.empty(2, dtype=torch.int64)),
)
case("fill__float_tensor_on_int", lambda a, v: a.fill_(v), lambda: (A(), torch.tensor(1.5)))
case("fill__nonzero_dim_value", lambda a, v: a.fill_(v), lambda: (r(3), r(2)))
case("addcmul__int_float", lambda a, b, c: a.addcmul_(b, c), lambda: (A(), r(3), r(3)))
case("lerp__int", lambda a, b: a.lerp_(b, 0.5), lambda: (A(), A()))
case(
    "index_put_int_float_values",
    lambda x, idx, v: x.index_put_((idx,), v),
    lambda: (A(), i(0), r(1)),
)
case(
    "scatter_reduce_bad_mode",
    lambda x, idx, s: x.scatter_reduce(0, idx, s, "max"),
    lambda: (r(3), i(0), r(1)),
)
case(
    "complex_to_float_add_",
    lambda a, b: a.add_(b),
    lambda: (r(3), torch.ones(3, dtype=torch.complex64)),
)
case("float_to_half_add__ok", lambda a, b: a.add_(b), lambda: (r(3, dtype=torch.float16), r(3)))
case("int32_add__int64_ok", lambda a, b: a.add_(b), lambda: (A().int(), A()))
case("uint8_add__int64_ok", lambda a, b: a.add_(b), lambda: (A().abs().to(torch.uint8), A()))
case(
    "bool_add__bool_ok",
    lambda a, b: a.add_(b),
    lambda: (torch.tensor([True, False]), torch.tensor([True, True])),
)
case("bool_add__int", lambda a, b: a.add_(b), lambda: (torch.tensor([True, False]), ints(1, 2)))
case(
    "where__dtype",
    lambda a, c, b: a.where(c, b),
    lambda: (A(), torch.tensor([True, False, True]), r(3)),
)
case("clamp_tensor_mixed", lambda a, lo: a.clamp_(min=lo), lambda: (A(), r(3)))
case("mul__int_by_float_scalar_tensor", lambda a, s: a.mul_(s), lambda: (A(), torch.tensor(2.5)))
case("cumsum__int_float_dtype", lambda a: a.cumsum_(0, dtype=torch.float32), lambda: (A(),))

# ============================================================================================
# shapes (runtime sizes), dynamic shapes
case("add_broadcast_dyn", lambda a, b: a + b, lambda: (r(3), r(4)), dynamic=True)
case("matmul_shape_dyn", lambda a, b: a @ b, lambda: (r(2, 3), r(4, 2)), dynamic=True)
case("cat_shape_dyn", lambda a, b: torch.cat([a, b], 1), lambda: (r(2, 3), r(3, 3)), dynamic=True)
case("view_dyn", lambda a: a.view(-1, 4), lambda: (r(3, 3),), dynamic=True)
case("reshape_dyn_ok", lambda a: a.reshape(-1, 3), lambda: (r(3, 3),), dynamic=True)
case("copy__shape", lambda a, b: a.copy_(b), lambda: (r(3), r(4)))
case("expand_as_dyn", lambda a, b: a.expand_as(b), lambda: (r(3), r(2, 4)), dynamic=True)
case(
    "index_put_vals_shape", lambda x, idx, v: x.index_put((idx,), v), lambda: (r(3), i(0, 1), r(3))
)
case("setitem_vals_shape", lambda x, idx, v: x.__setitem__(idx, v), lambda: (r(3), i(0, 1), r(3)))
case(
    "masked_fill_mask_shape",
    lambda x, m: x.masked_fill(m, 0.0),
    lambda: (r(3), torch.tensor([True, False])),
)
case("split_size_dyn", lambda a: torch.split(a, [2, 2]), lambda: (r(3),), dynamic=True)
case("unflatten_dyn", lambda a: a.unflatten(0, (2, -1)), lambda: (r(5),), dynamic=True)
case("narrow_dyn", lambda a, n: a.narrow(0, 0, n), lambda: (r(3), 4), dynamic=True)
case(
    "arange_neg_step_dyn",
    lambda a, n: torch.arange(0, n, -1) + a.sum(),
    lambda: (r(3), 4),
    dynamic=True,
)
case("zeros_neg_dyn", lambda a, n: torch.zeros(n) + a.sum(), lambda: (r(3), -1), dynamic=True)
case("layer_norm_shape", lambda x, w: F.layer_norm(x, (4,), w), lambda: (r(2, 4), r(3)))
case("mse_shape_warn", lambda a, b: F.mse_loss(a, b), lambda: (r(3, 2), r(4, 2)))


def dyn_size_marked(C, rec):
    f = C(lambda a, b: a * b)
    a, b = r(4), r(4)
    torch._dynamo.mark_dynamic(a, 0)
    torch._dynamo.mark_dynamic(b, 0)
    rec("ok", f(a, b))
    a, b = r(5), r(6)
    torch._dynamo.mark_dynamic(a, 0)
    torch._dynamo.mark_dynamic(b, 0)
    try:
        rec("out", f(a, b))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("good", f(r(7), r(7)))


scenario(dyn_size_marked)


def dyn_view_sizes(C, rec):
    f = C(lambda a: a.view(2, -1) * 2, dynamic=True)
    rec("ok", f(r(4)))
    rec("ok6", f(r(6)))
    try:
        rec("out", f(r(5)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


scenario(dyn_view_sizes)


def dyn_index_oob_second_size(C, rec):
    f = C(lambda x, idx: x[idx] + 1, dynamic=True)
    rec("ok", f(r(8), i(7, 0)))
    try:
        rec("out", f(r(5), i(7, 0)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("good", f(r(6), i(5, 0)))


scenario(dyn_index_oob_second_size)


def dyn_bucketed_oob(C, rec):
    # a padded (bucketed) program: the index is in the bucket but not in the real size
    f = C(lambda x, idx: x.index_select(0, idx) * 2, dynamic=True)
    rec("ok", f(r(8, 2), i(7)))
    try:
        rec("out", f(r(5, 2), i(6)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("good", f(r(5, 2), i(4)))


scenario(dyn_bucketed_oob)


def dyn_bucketed_gather_oob(C, rec):
    f = C(lambda x, idx: torch.gather(x, 0, idx).sum(0), dynamic=True)
    rec("ok", f(r(8, 2), i(7, 7).view(1, 2)))
    for n in (5, 6):
        try:
            rec("out", f(r(n, 2), i(6, 0).view(1, 2)))
        except Exception as e:  # noqa: BLE001
            rec("raised", e)


scenario(dyn_bucketed_gather_oob)


def dyn_bucketed_embedding_oob(C, rec):
    emb = nn.Embedding(10, 3)
    f = C(lambda idx: emb(idx).sum(1), dynamic=True)
    rec("ok", f(i(1, 2, 3, 4, 5).view(1, 5)))
    try:
        rec("out", f(i(1, 2, 3, 4, 5, 6, 10).view(1, 7)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("good", f(i(1, 2, 3, 4, 5, 6, 9).view(1, 7)))


scenario(dyn_bucketed_embedding_oob)


def dyn_bucketed_take_flat(C, rec):
    f = C(lambda x, idx: torch.take(x, idx) + 1, dynamic=True)
    rec("ok", f(r(8), i(7)))
    try:
        rec("out", f(r(5), i(5)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


scenario(dyn_bucketed_take_flat)


def dyn_bucketed_cross_entropy(C, rec):
    f = C(lambda x, t: F.cross_entropy(x, t), dynamic=True)
    rec("ok", f(r(8, 8), i(*range(8))))
    try:
        rec("out", f(r(5, 5), i(0, 1, 2, 3, 6)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


scenario(dyn_bucketed_cross_entropy)


def dyn_bucketed_setitem(C, rec):
    def g(x, idx):
        x = x.clone()
        x[idx] = 0.0
        return x

    f = C(g, dynamic=True)
    rec("ok", f(r(8), i(7)))
    try:
        rec("out", f(r(5), i(6)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


scenario(dyn_bucketed_setitem)


def dyn_bucketed_one_hot(C, rec):
    f = C(lambda t, x: F.one_hot(t, 8) * x.sum(), dynamic=True)
    rec("ok", f(i(1, 7), r(8)))
    try:
        rec("out", f(i(1, 7, 8), r(5)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


scenario(dyn_bucketed_one_hot)


def dyn_bucketed_index_dim1(C, rec):
    f = C(lambda x, idx: x[:, idx].sum(), dynamic=True)
    rec("ok", f(r(2, 8), i(7)))
    try:
        rec("out", f(r(2, 5), i(-6)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)


scenario(dyn_bucketed_index_dim1)


# ============================================================================================
# linear algebra
case(
    "solve_ex_check",
    lambda a, b: torch.linalg.solve_ex(a, b, check_errors=True).result,
    lambda: (_SING(), r(2)),
)
case(
    "inv_ex_check", lambda a: torch.linalg.inv_ex(a, check_errors=True).inverse, lambda: (_SING(),)
)
case(
    "cholesky_ex_check",
    lambda a: torch.linalg.cholesky_ex(a, check_errors=True).L,
    lambda: (_NOTPD(),),
)
case("inv_ex_no_check", lambda a: torch.linalg.inv_ex(a).info, lambda: (_SING(),))
case(
    "solve_batched_broadcast",
    lambda a, b: torch.linalg.solve(a, b),
    lambda: (torch.stack([torch.eye(2), _SING()]), r(2, 2)),
)
case(
    "solve_left_false",
    lambda a, b: torch.linalg.solve(a, b, left=False),
    lambda: (_SING(), r(3, 2)),
)
case("cholesky_solve_ok", lambda b, a: torch.cholesky_solve(b, a), lambda: (r(2, 1), torch.eye(2)))
case(
    "lu_solve_singular",
    lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b),
    lambda: (torch.zeros(2, 2), r(2, 1)),
)
case("tensorinv_singular", lambda a: torch.linalg.tensorinv(a, ind=1), lambda: (_SING(),))
case("tensorsolve_singular", lambda a, b: torch.linalg.tensorsolve(a, b), lambda: (_SING(), r(2)))
case("inverse_float64", lambda a: torch.inverse(a), lambda: (_SING().double(),))
case("cholesky_f64", lambda a: torch.linalg.cholesky(a), lambda: (_NOTPD().double(),))
case(
    "cholesky_nan",
    lambda a: torch.linalg.cholesky(a),
    lambda: (torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]),),
)
case(
    "inv_nan",
    lambda a: torch.linalg.inv(a),
    lambda: (torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]),),
)
case("inv_int", lambda a: torch.linalg.inv(a), lambda: (ints(1, 0, 0, 1).view(2, 2),))
case("inv_non_square", lambda a: torch.linalg.inv(a), lambda: (r(2, 3),))
case("det_singular_ok", lambda a: torch.linalg.det(a), lambda: (_SING(),))
case("slogdet_singular_ok", lambda a: torch.linalg.slogdet(a).logabsdet, lambda: (_SING(),))
case("pinv_singular_ok", lambda a: torch.linalg.pinv(a), lambda: (_SING(),))
case(
    "matrix_power_neg_singular_batched",
    lambda a: torch.linalg.matrix_power(a, -2),
    lambda: (torch.stack([torch.eye(2), _SING()]),),
)
case(
    "eigh_nan",
    lambda a: torch.linalg.eigh(a).eigenvalues,
    lambda: (torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]),),
)
case(
    "svd_nan",
    lambda a: torch.linalg.svdvals(a),
    lambda: (torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]),),
)
case(
    "cholesky_complex_notpd",
    lambda a: torch.linalg.cholesky(a),
    lambda: (_NOTPD().to(torch.complex64),),
)
case(
    "solve_triangular_singular_ok",
    lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
    lambda: (torch.zeros(2, 2), r(2, 1)),
)
case(
    "ldl_factor_ex_check",
    lambda a: torch.linalg.ldl_factor_ex(a, check_errors=True).LD,
    lambda: (torch.zeros(2, 2),),
)
case(
    "lu_factor_ex_check",
    lambda a: torch.linalg.lu_factor_ex(a, check_errors=True).LU,
    lambda: (torch.zeros(2, 2),),
)
case("cholesky_inverse_ok", lambda a: torch.cholesky_inverse(a), lambda: (torch.eye(2) * 2,))
case(
    "inv_then_inplace_input",
    lambda a, y: (y.add_(1), torch.linalg.inv(a))[1],
    lambda: (_SING(), r(2)),
)


# ============================================================================================
# asserts and checks in user code
def user_assert(x):
    torch._assert(x.sum() > 0, "sum must be positive")
    return x * 2


def user_check(x):
    torch._check(x.sum().item() > 0, lambda: "sum must be positive")
    return x * 2


def python_assert(x):
    assert x.sum() > 0, "sum must be positive"
    return x * 2


def item_branch(x):
    if x.sum().item() > 0:
        return x * 2
    raise ValueError("negative sum")


def tensor_bool_check(x):
    if bool((x < 0).any()):
        raise RuntimeError("negative value")
    return x + 1


def assert_async_user(x):
    torch._assert_async(x.sum() > 0)
    return x * 2


def assert_async_msg(x):
    torch._assert_async(x.sum() > 0, "custom async message")
    return x * 2


case("user_torch_assert", user_assert, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case("user_torch_check_item", user_check, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case("user_python_assert", python_assert, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case("user_item_branch", item_branch, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case("user_tensor_bool", tensor_bool_check, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case("user_assert_async", assert_async_user, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case("user_assert_async_msg", assert_async_msg, lambda: (-r(3).abs(),), lambda: (r(3).abs(),))
case(
    "user_check_index",
    lambda x, n: torch._check_index(n.item() < 3, lambda: "bad") or x,
    lambda: (r(3), ints(3)),
)
case(
    "user_assert_tensor_eq",
    lambda x: torch._assert(torch.equal(x, x.abs()), "not abs") or x,
    lambda: (r(3),),
)


# ============================================================================================
# training steps, graph breaks, loops
class Clf(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, tok, target):
        return F.cross_entropy(self.head(self.emb(tok).mean(1)), target)


def _train(C, rec, tok_bad, tgt_bad):
    torch.manual_seed(0)
    model = Clf()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = C(model)
    tok, tgt = torch.tensor([[0, 1], [2, 3]]), torch.tensor([0, 2])
    step(tok, tgt).backward()
    opt.step()
    opt.zero_grad()
    try:
        loss = step(tok_bad, tgt_bad)
        loss.backward()
        rec("bad", loss)
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("grads", [p.grad for p in model.parameters() if p.grad is not None])
    loss = step(tok, tgt)
    loss.backward()
    rec("after", [loss] + [p.grad for p in model.parameters()])
    rec("params", list(model.parameters()))


scenario(lambda C, rec: _train(C, rec, torch.tensor([[0, 1], [2, 6]]), torch.tensor([0, 2])))
CASES["train_embedding_oob"] = CASES.pop("<lambda>")
scenario(lambda C, rec: _train(C, rec, torch.tensor([[0, 1], [2, 3]]), torch.tensor([0, 3])))
CASES["train_target_oob"] = CASES.pop("<lambda>")


def train_backward_index_oob(C, rec):
    # an index out of range that only the backward reads (a gather whose output is detached
    # is never differentiated; here the gather is in the forward)
    w = nn.Parameter(r(4, 3))

    def f(idx):
        return (w[idx] ** 2).sum()

    g = C(f)
    rec("ok", g(i(0, 3)))
    try:
        loss = g(i(0, 4))
        loss.backward()
        rec("bad", loss)
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("grad", w.grad)


scenario(train_backward_index_oob)


def train_int_div_inside(C, rec):
    w = nn.Parameter(r(3))

    def f(x, a, b):
        return (w * x * (a // b)).sum()

    g = C(f)
    try:
        loss = g(r(3), A(), B0())
        loss.backward()
        rec("bad", loss)
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("grad", w.grad)


scenario(train_int_div_inside)


def graph_break_then_oob(C, rec):
    def f(x, idx):
        y = x * 2
        torch._dynamo.graph_break()
        return y[idx]

    g = C(f)
    try:
        rec("out", g(r(3), i(3)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("good", g(r(3), i(2)))


scenario(graph_break_then_oob)


def graph_break_oob_before_break(C, rec):
    def f(x, idx, log):
        y = x.index_select(0, idx)
        log.append(1)  # a side effect after the op (graph break by list mutation? no: traced)
        torch._dynamo.graph_break()
        return y * 2

    log: list = []
    g = C(f)
    try:
        rec("out", g(r(3), i(5), log))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("log", len(log))


scenario(graph_break_oob_before_break)


def graph_break_inplace_then_fail(C, rec):
    def f(x, a, b):
        x.add_(1)
        torch._dynamo.graph_break()
        x.mul_(2)
        return a // b

    x = r(3)
    g = C(f)
    try:
        rec("out", g(x, A(), B0()))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("x", x)


scenario(graph_break_inplace_then_fail)


def generate_loop_oob(C, rec):
    torch.manual_seed(0)
    emb = nn.Embedding(5, 4)
    head = nn.Linear(4, 7)  # logits beyond the vocabulary: argmax may pick 5 or 6

    def step(tok):
        return head(emb(tok)).argmax(-1)

    g = C(step)
    tok = torch.tensor([[1]])
    out = []
    try:
        for _ in range(6):
            tok = g(tok)
            out.append(tok)
        rec("out", out)
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
        rec("partial", out)


scenario(generate_loop_oob)


def generate_loop_with_cache(C, rec):
    cache = torch.zeros(4, 2)

    def step(pos, v):
        cache[pos] = v
        return cache.sum()

    g = C(step)
    try:
        for p in range(6):
            rec(f"s{p}", g(torch.tensor(p), r(2, seed=p)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("cache", cache)


scenario(generate_loop_with_cache)


def generate_loop_int_pos(C, rec):
    cache = torch.zeros(4, 2)

    def step(pos, v):
        cache[pos] = v
        return cache.sum()

    g = C(step)
    try:
        for p in range(6):
            rec(f"s{p}", g(p, r(2, seed=p)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("cache", cache)


scenario(generate_loop_int_pos)


# ============================================================================================
# failed calls: partial writes, inputs after the call, and the next call
def write_then_oob(x, y, idx):
    x.mul_(2)
    y[idx] = 5.0  # fails: y unchanged, x already doubled in eager
    x.add_(100)
    return x


case(
    "partial_write_then_oob",
    write_then_oob,
    lambda: (r(3), r(3), i(1, 3)),
    lambda: (r(3), r(3), i(1, 2)),
)


def scatter_partial(x, idx):
    x.scatter_(0, idx, 7.0)  # eager checks all indices first: x unchanged
    return x


case("scatter_partial_write", scatter_partial, lambda: (r(4), i(0, 1, 9)))


def index_add_partial(x, idx, s):
    x.index_add_(0, idx, s)
    return x


case("index_add_partial_write", index_add_partial, lambda: (r(4), i(0, 9), r(2)))


def put_partial(x, idx, s):
    x.put_(idx, s)
    return x


case("put_partial_write", put_partial, lambda: (r(4), i(0, 9), r(2)))


def div_partial(a, b):
    a.floor_divide_(b)
    return a


case("div_partial_write", div_partial, lambda: (ints(8, 9, 10), ints(2, 0, 3)))


def buffer_then_fail(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros((), dtype=torch.long))
            self.emb = nn.Embedding(4, 2)

        def forward(self, idx):
            self.count += 1
            return self.emb(idx)

    m = M()
    g = C(m)
    try:
        rec("out", g(i(4)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("count", m.count)
    rec("good", g(i(3)))
    rec("count2", m.count)


scenario(buffer_then_fail)


def bn_then_fail(C, rec):
    bn = nn.BatchNorm1d(3)
    emb = nn.Embedding(4, 3)

    def f(x, idx):
        return bn(x) + emb(idx)

    g = C(f)
    try:
        rec("out", g(r(2, 3), i(0, 4)))
    except Exception as e:  # noqa: BLE001
        rec("raised", e)
    rec("stats", [bn.running_mean, bn.running_var, bn.num_batches_tracked])


scenario(bn_then_fail)


def error_twice_then_ok(C, rec):
    g = C(lambda x, idx: x[idx])
    for k, idx in enumerate([i(3), i(-4), i(2), i(5), i(0)]):
        try:
            rec(f"c{k}", g(r(3), idx))
        except Exception as e:  # noqa: BLE001
            rec(f"e{k}", e)


scenario(error_twice_then_ok)


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
