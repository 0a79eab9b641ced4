"""Loss functions as users write them in training code (session 31): each scenario runs
eagerly and under ``torch.compile(..., backend="xla")``; values, dtypes, gradients of inputs
and weights (None-ness included), every ``reduction`` and errors compared strictly.

    PYTHONPATH=. python scripts/probe_losses31.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_losses31.py   # torch's own

The harness is ``probe_grads26``'s (compiled and eager in float32, eager with float64 as the
default dtype as the reference).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import probe_grads26 as h

warnings.simplefilter("ignore")
SCENARIOS: dict = {}
leaf = h.leaf


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def fdt():
    return torch.get_default_dtype()


def run_loss(C, rec, f, inputs, *, cot_seed=7):
    """``f(*inputs)`` compiled by ``C``: its value, then the gradients of every input that
    requires grad (a seeded cotangent for unreduced losses)."""
    out = C(f)(*inputs)
    rec("out", out)
    if isinstance(out, torch.Tensor) and out.requires_grad:
        if out.dim() == 0:
            out.backward()
        else:
            out.backward(leaf(*out.shape, seed=cot_seed, rg=False).to(out.dtype))
        for i, t in enumerate(inputs):
            if (
                isinstance(t, torch.Tensor)
                and t.is_leaf
                and (t.requires_grad or t.is_floating_point())
            ):
                rec(f"grad{i}", t.grad)


REDUCTIONS = ("mean", "sum", "none")


def per_reduction(make):
    """One scenario per reduction: ``make(reduction)`` -> ``(f, inputs)``."""

    def deco(fn):
        for red in REDUCTIONS:

            def sc(C, rec, red=red):
                f, inputs = fn(red)
                run_loss(C, rec, f, inputs)

            SCENARIOS[f"{fn.__name__}_{red}"] = sc
        return fn

    return deco if make is None else deco(make)


def targets(*shape, n=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, shape, generator=g)


# ============================================================================================
# cross_entropy / nll_loss


@per_reduction
def ce_indices(red):
    return (lambda x, t: F.cross_entropy(x, t, reduction=red)), (leaf(6, 5), targets(6))


@per_reduction
def ce_weight_ignore_smooth(red):
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    t = targets(8)
    t[2] = -100
    t[5] = -100

    def f(x, t):
        return F.cross_entropy(
            x, t, weight=w, ignore_index=-100, label_smoothing=0.1, reduction=red
        )

    return f, (leaf(8, 5), t)


@per_reduction
def ce_weight_param_ignore(red):
    w = leaf(5, seed=3).abs().detach().add(0.1).requires_grad_()
    t = targets(8)
    t[1] = 2

    def f(x, t, w):
        return F.cross_entropy(x, t, weight=w, ignore_index=2, reduction=red)

    return f, (leaf(8, 5), t, w)


@per_reduction
def ce_smooth_no_weight_ignore(red):
    t = targets(7)
    t[0] = 4

    def f(x, t):
        return F.cross_entropy(x, t, ignore_index=4, label_smoothing=0.25, reduction=red)

    return f, (leaf(7, 5), t)


@per_reduction
def ce_probs(red):
    p = torch.softmax(leaf(6, 5, seed=2, rg=False), -1)
    return (lambda x, p: F.cross_entropy(x, p, reduction=red)), (leaf(6, 5), p)


@per_reduction
def ce_probs_weight_smooth(red):
    p = torch.softmax(leaf(6, 5, seed=2, rg=False), -1).requires_grad_()
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    return (lambda x, p: F.cross_entropy(x, p, weight=w, label_smoothing=0.2, reduction=red)), (
        leaf(6, 5),
        p,
    )


@per_reduction
def ce_kdim(red):
    w = leaf(4, seed=3, rg=False).abs() + 0.1
    t = targets(2, 3, 5, n=4)
    t[0, 1, 2] = 255
    return (
        lambda x, t: F.cross_entropy(
            x, t, weight=w, ignore_index=255, label_smoothing=0.1, reduction=red
        )
    ), (leaf(2, 4, 3, 5), t)


@per_reduction
def ce_kdim_probs(red):
    p = torch.softmax(leaf(2, 4, 3, 5, seed=2, rg=False), 1)
    return (lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1, reduction=red)), (
        leaf(2, 4, 3, 5),
        p,
    )


@per_reduction
def ce_all_ignored(red):
    t = torch.full((4,), -100)
    return (lambda x, t: F.cross_entropy(x, t, reduction=red)), (leaf(4, 5), t)


@per_reduction
def ce_all_ignored_smooth_weight(red):
    t = torch.full((4,), 3)
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    return (
        lambda x, t: F.cross_entropy(
            x, t, weight=w, ignore_index=3, label_smoothing=0.3, reduction=red
        )
    ), (leaf(4, 5), t)


@per_reduction
def ce_1d_input(red):
    return (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction=red)), (
        leaf(5),
        torch.tensor(3),
    )


@per_reduction
def nll_weight_ignore(red):
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    t = targets(8)
    t[3] = 1

    def f(x, t):
        return F.nll_loss(F.log_softmax(x, -1), t, weight=w, ignore_index=1, reduction=red)

    return f, (leaf(8, 5), t)


@per_reduction
def nll_kdim(red):
    t = targets(2, 3, 3, n=4)
    return (lambda x, t: F.nll_loss(x, t, reduction=red)), (leaf(2, 4, 3, 3), t)


@per_reduction
def nll_3d(red):  # (N, C, d1): nll_loss on 3-D input goes through a reshape
    w = leaf(4, seed=3, rg=False).abs() + 0.1
    t = targets(2, 6, n=4)
    return (lambda x, t: F.nll_loss(x, t, weight=w, reduction=red)), (leaf(2, 4, 6), t)


@per_reduction
def nll_all_ignored_weight(red):
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    t = torch.full((3,), 0)
    return (lambda x, t: F.nll_loss(x, t, weight=w, ignore_index=0, reduction=red)), (leaf(3, 5), t)


@per_reduction
def nll_zero_weight_class(red):
    w = torch.ones(5)
    w[2] = 0
    t = torch.full((3,), 2)
    return (lambda x, t: F.nll_loss(x, t, weight=w, reduction=red)), (leaf(3, 5), t)


def _err(fn):
    """An error scenario: ``fn()`` -> (f, inputs); the compiled call must raise as eager."""

    def sc(C, rec):
        f, inputs = fn()
        out = C(f)(*inputs)
        rec("out", out)

    SCENARIOS[fn.__name__] = sc
    return fn


@_err
def err_ce_target_oob():
    return (lambda x, t: F.cross_entropy(x, t)), (leaf(4, 5), torch.tensor([0, 1, 5, 2]))


@_err
def err_ce_target_negative():
    return (lambda x, t: F.cross_entropy(x, t)), (leaf(4, 5), torch.tensor([0, -1, 3, 2]))


@_err
def err_ce_target_oob_smooth():
    return (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1)), (
        leaf(4, 5),
        torch.tensor([0, 1, 7, 2]),
    )


@_err
def err_ce_target_oob_sum_none():
    return (lambda x, t: F.cross_entropy(x, t, reduction="none")), (
        leaf(4, 5),
        torch.tensor([0, 1, 9, 2]),
    )


@_err
def err_ce_kdim_oob():
    t = targets(2, 3, n=4)
    t[1, 1] = 4
    return (lambda x, t: F.cross_entropy(x, t)), (leaf(2, 4, 3), t)


@_err
def err_ce_seg_oob_255_not_ignored():
    t = targets(2, 3, 3, n=4)
    t[0, 0, 0] = 255
    return (lambda x, t: F.cross_entropy(x, t)), (leaf(2, 4, 3, 3), t)


@_err
def err_ce_wrong_batch():
    return (lambda x, t: F.cross_entropy(x, t)), (leaf(4, 5), targets(3))


@_err
def err_ce_probs_wrong_shape():
    return (lambda x, p: F.cross_entropy(x, p)), (
        leaf(4, 5),
        torch.softmax(leaf(4, 4, rg=False), -1),
    )


@_err
def err_ce_weight_wrong_size():
    return (lambda x, t: F.cross_entropy(x, t, weight=torch.ones(4))), (leaf(4, 5), targets(4))


@_err
def err_ce_float_targets_class_shape():
    return (lambda x, t: F.cross_entropy(x, t)), (leaf(4, 5), targets(4).float())


@_err
def err_nll_oob():
    return (lambda x, t: F.nll_loss(x, t)), (leaf(4, 5), torch.tensor([0, 1, 5, 2]))


@_err
def err_nll_smoothing_gt1():
    return (lambda x, t: F.cross_entropy(x, t, label_smoothing=1.5)), (leaf(4, 5), targets(4))


@_err
def err_bce_target_gt1():
    return (lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t)), (
        leaf(4),
        torch.tensor([0.0, 1.0, 1.5, 0.5]),
    )


@_err
def err_bce_input_gt1():
    return (lambda x, t: F.binary_cross_entropy(x, t)), (
        torch.tensor([0.2, 1.2, 0.5, 0.5]),
        torch.tensor([0.0, 1.0, 0.5, 0.5]),
    )


@_err
def err_bce_shape():
    return (lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t)), (leaf(4, 1), torch.rand(4))


@_err
def err_bcelogits_shape():
    return (lambda x, t: F.binary_cross_entropy_with_logits(x, t)), (leaf(4, 1), torch.rand(4))


@_err
def err_mse_shape_broadcast_ok():  # eager warns and broadcasts
    return (lambda x, t: F.mse_loss(x, t)), (leaf(4, 1), leaf(4, rg=False))


@_err
def err_gaussian_var_shape():
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v)), (
        leaf(4, 3),
        leaf(4, 3, rg=False),
        torch.ones(4, 2),
    )


@_err
def err_gaussian_var_negative():
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v)), (
        leaf(4, 3),
        leaf(4, 3, rg=False),
        torch.tensor([1.0, -1.0, 1.0, 1.0]).unsqueeze(1),
    )


@_err
def err_kl_bad_reduction():
    return (lambda x, t: F.kl_div(x, t, reduction="avg")), (leaf(4, 3), leaf(4, 3, rg=False))


@_err
def err_multi_margin_oob():
    return (lambda x, t: F.multi_margin_loss(x, t)), (leaf(4, 5), torch.tensor([0, 1, 5, 2]))


@_err
def err_multilabel_margin_oob():
    return (lambda x, t: F.multilabel_margin_loss(x, t)), (
        leaf(2, 4),
        torch.tensor([[0, 4, -1, 0], [1, -1, 0, 0]]),
    )


@_err
def err_ctc_negative_length():
    lp = F.log_softmax(leaf(6, 2, 4), -1)
    tg = torch.tensor([[1, 2], [1, 1]])
    return (lambda lp, tg: F.ctc_loss(lp, tg, (6, 6), (2, -1))), (lp.detach().requires_grad_(), tg)


@_err
def err_ctc_input_length_too_long():
    lp = F.log_softmax(leaf(6, 2, 4), -1)
    tg = torch.tensor([[1, 2], [1, 1]])
    return (lambda lp, tg: F.ctc_loss(lp, tg, (7, 6), (2, 2))), (lp.detach().requires_grad_(), tg)


# ============================================================================================
# binary cross entropy


@per_reduction
def bce_weight(red):
    w = leaf(4, 3, seed=3, rg=False).abs()
    t = torch.rand(4, 3, generator=torch.Generator().manual_seed(2)).to(fdt())

    def f(x, t):
        return F.binary_cross_entropy(torch.sigmoid(x), t, weight=w, reduction=red)

    return f, (leaf(4, 3), t)


@per_reduction
def bce_exact_01(red):
    p = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.5], dtype=fdt()).requires_grad_()
    t = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=fdt())
    return (lambda p, t: F.binary_cross_entropy(p, t, reduction=red)), (p, t)


@per_reduction
def bce_target_requires_grad(red):
    t = torch.rand(5, generator=torch.Generator().manual_seed(2)).to(fdt()).requires_grad_()
    return (lambda x, t: F.binary_cross_entropy(torch.sigmoid(x), t, reduction=red)), (leaf(5), t)


@per_reduction
def bcel_pos_weight(red):
    pw = leaf(3, seed=4, rg=False).abs() + 0.5
    w = leaf(4, 1, seed=5, rg=False).abs()
    t = (torch.rand(4, 3, generator=torch.Generator().manual_seed(2)) > 0.5).to(fdt())

    def f(x, t):
        return F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw, reduction=red)

    return f, (leaf(4, 3), t)


@per_reduction
def bcel_large_logits(red):
    x = torch.tensor([100.0, -100.0, 50.0, -50.0, 0.0, 1e4], dtype=fdt()).requires_grad_()
    t = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 0.0], dtype=fdt())
    pw = torch.tensor(3.0, dtype=fdt())
    return (lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction=red)), (
        x,
        t,
    )


@per_reduction
def bcel_grads_all(red):
    pw = (leaf(3, seed=4, rg=False).abs() + 0.5).requires_grad_()
    w = (leaf(3, seed=5, rg=False).abs()).requires_grad_()
    t = torch.rand(2, 3, generator=torch.Generator().manual_seed(2)).to(fdt()).requires_grad_()

    def f(x, t, w, pw):
        return F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw, reduction=red)

    return f, (leaf(2, 3), t, w, pw)


# ============================================================================================
# kl_div, regression losses


@per_reduction
def kl_log_target(red):
    t = F.log_softmax(leaf(4, 5, seed=2), -1).detach().requires_grad_()
    return (lambda x, t: F.kl_div(F.log_softmax(x, -1), t, reduction=red, log_target=True)), (
        leaf(4, 5),
        t,
    )


@per_reduction
def kl_prob_target_zeros(red):
    t = torch.softmax(leaf(4, 5, seed=2, rg=False), -1)
    t[0, 1] = 0
    t = t.requires_grad_()
    return (lambda x, t: F.kl_div(F.log_softmax(x, -1), t, reduction=red)), (leaf(4, 5), t)


def kl_batchmean(C, rec):
    t = torch.softmax(leaf(4, 5, seed=2, rg=False), -1)
    run_loss(
        C,
        rec,
        lambda x, t: F.kl_div(F.log_softmax(x, -1), t, reduction="batchmean"),
        (leaf(4, 5), t),
    )


SCENARIOS["kl_batchmean"] = kl_batchmean


def kl_batchmean_log_target_module(C, rec):
    m = nn.KLDivLoss(reduction="batchmean", log_target=True)
    t = F.log_softmax(leaf(3, 2, 5, seed=2, rg=False), -1)
    run_loss(C, rec, lambda x, t: m(F.log_softmax(x, -1), t), (leaf(3, 2, 5), t))


SCENARIOS["kl_batchmean_log_target_module"] = kl_batchmean_log_target_module


@per_reduction
def mse_l1(red):
    t = leaf(4, 3, seed=2)
    return (lambda x, t: F.mse_loss(x, t, reduction=red) + F.l1_loss(x, t, reduction=red)), (
        leaf(4, 3),
        t,
    )


@per_reduction
def l1_ties(red):
    x = torch.tensor([1.0, 2.0, 3.0], dtype=fdt()).requires_grad_()
    t = torch.tensor([1.0, 2.5, 3.0], dtype=fdt()).requires_grad_()
    return (
        lambda x, t: (
            F.l1_loss(x, t, reduction=red) + F.smooth_l1_loss(x, t, reduction=red, beta=0.0)
        )
    ), (x, t)


@per_reduction
def smooth_l1_beta0(red):
    return (lambda x, t: F.smooth_l1_loss(x, t, reduction=red, beta=0.0)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
    )


@per_reduction
def smooth_l1_beta(red):
    return (lambda x, t: F.smooth_l1_loss(x, t, reduction=red, beta=0.5)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
    )


@per_reduction
def huber_delta(red):
    return (lambda x, t: F.huber_loss(x, t, reduction=red, delta=0.3)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
    )


@per_reduction
def mse_broadcast_target(red):
    return (lambda x, t: F.mse_loss(x, t, reduction=red)), (leaf(4, 1), leaf(4, seed=2))


@per_reduction
def poisson_log_input(red):
    t = torch.poisson(torch.full((4, 3), 3.0), generator=torch.Generator().manual_seed(1)).to(fdt())
    return (lambda x, t: F.poisson_nll_loss(x, t, log_input=True, full=True, reduction=red)), (
        leaf(4, 3),
        t,
    )


@per_reduction
def poisson_rate_input(red):
    t = torch.poisson(torch.full((4, 3), 3.0), generator=torch.Generator().manual_seed(1)).to(fdt())
    x = (leaf(4, 3).detach().abs()).requires_grad_()
    with torch.no_grad():
        x[0, 0] = 0
    return (
        lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, eps=1e-3, reduction=red)
    ), (x, t)


@per_reduction
def gaussian_full(red):
    v = (leaf(4, 1, seed=3, rg=False).abs() + 0.01).requires_grad_()
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True, eps=1e-2, reduction=red)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
        v,
    )


@per_reduction
def gaussian_var_nodim(red):  # var of shape (4,): one dim fewer, unsqueezed
    v = (leaf(4, seed=3, rg=False).abs() + 0.01).requires_grad_()
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction=red)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
        v,
    )


@per_reduction
def gaussian_var_small_clamped(red):
    v = torch.tensor([1e-9, 0.5, 2.0, 1e-3], dtype=fdt()).unsqueeze(1).requires_grad_()
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v, eps=1e-2, reduction=red)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
        v,
    )


def gaussian_var_scalar(C, rec):
    run_loss(C, rec, lambda x, t: F.gaussian_nll_loss(x, t, 0.5), (leaf(4, 3), leaf(4, 3, seed=2)))


SCENARIOS["gaussian_var_scalar"] = gaussian_var_scalar


# ============================================================================================
# ctc


def _ctc_inputs(T=8, N=3, C=5, S=3, seed=0):
    lp = F.log_softmax(leaf(T, N, C, seed=seed, rg=False), -1).requires_grad_()
    g = torch.Generator().manual_seed(seed + 1)
    tg = torch.randint(1, C, (N, S), generator=g)
    return lp, tg


@per_reduction
def ctc_padded_tuple_lengths(red):
    lp, tg = _ctc_inputs()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 7, 6), (3, 2, 1), reduction=red)), (lp, tg)


@per_reduction
def ctc_tensor_lengths(red):
    lp, tg = _ctc_inputs()
    il, tl = torch.tensor([8, 7, 6]), torch.tensor([3, 2, 1])
    return (lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl, reduction=red)), (lp, tg, il, tl)


@per_reduction
def ctc_concat_targets(red):
    lp, tg = _ctc_inputs()
    flat = torch.cat([tg[0, :3], tg[1, :2], tg[2, :1]])
    il, tl = torch.tensor([8, 7, 6]), torch.tensor([3, 2, 1])
    return (lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl, reduction=red)), (lp, flat, il, tl)


@per_reduction
def ctc_infeasible_zero_inf(red):
    lp, tg = _ctc_inputs(T=3, S=3)
    tg[0] = torch.tensor([1, 1, 1])  # needs 5 frames
    return (
        lambda lp, tg: F.ctc_loss(lp, tg, (3, 3, 3), (3, 2, 1), reduction=red, zero_infinity=True)
    ), (lp, tg)


@per_reduction
def ctc_infeasible_inf(red):
    lp, tg = _ctc_inputs(T=3, S=3)
    tg[0] = torch.tensor([1, 1, 1])
    return (lambda lp, tg: F.ctc_loss(lp, tg, (3, 3, 3), (3, 2, 1), reduction=red)), (lp, tg)


@per_reduction
def ctc_blank_last(red):
    lp, tg = _ctc_inputs()
    tg = tg - 1  # 0..3, blank 4
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8, 5), (3, 3, 2), blank=4, reduction=red)), (
        lp,
        tg,
    )


def ctc_module_unbatched(C, rec):
    m = nn.CTCLoss(blank=0)
    lp = F.log_softmax(leaf(7, 5, rg=False), -1).requires_grad_()
    tg = torch.tensor([1, 3, 2])
    run_loss(C, rec, lambda lp, tg: m(lp, tg, torch.tensor(7), torch.tensor(3)), (lp, tg))


SCENARIOS["ctc_module_unbatched"] = ctc_module_unbatched


def ctc_zero_target_length(C, rec):
    lp, tg = _ctc_inputs()
    run_loss(C, rec, lambda lp, tg: F.ctc_loss(lp, tg, (8, 7, 6), (3, 0, 1)), (lp, tg))


SCENARIOS["ctc_zero_target_length"] = ctc_zero_target_length


# ============================================================================================
# margin and embedding losses


@per_reduction
def margin_ranking(red):
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=fdt())
    return (lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3, reduction=red)), (
        leaf(4),
        leaf(4, seed=2),
        y,
    )


@per_reduction
def hinge_embedding(red):
    y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], dtype=fdt())
    return (lambda x, y: F.hinge_embedding_loss(x, y, margin=0.5, reduction=red)), (leaf(2, 3), y)


@per_reduction
def cosine_embedding(red):
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=fdt())
    return (lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1, reduction=red)), (
        leaf(4, 6),
        leaf(4, 6, seed=2),
        y,
    )


@per_reduction
def cosine_embedding_zero_vec(red):
    y = torch.tensor([1.0, -1.0], dtype=fdt())
    a = leaf(2, 3).detach()
    a[0] = 0
    a.requires_grad_()
    return (lambda a, b, y: F.cosine_embedding_loss(a, b, y, reduction=red)), (
        a,
        leaf(2, 3, seed=2),
        y,
    )


@per_reduction
def triplet(red):
    return (
        lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=0.5, p=1.0, swap=True, reduction=red)
    ), (
        leaf(4, 6),
        leaf(4, 6, seed=2),
        leaf(4, 6, seed=3),
    )


@per_reduction
def triplet_distance_fn(red):
    def f(a, p, n):
        return F.triplet_margin_with_distance_loss(
            a,
            p,
            n,
            distance_function=lambda x, y: 1 - F.cosine_similarity(x, y),
            margin=0.2,
            swap=True,
            reduction=red,
        )

    return f, (leaf(4, 6), leaf(4, 6, seed=2), leaf(4, 6, seed=3))


@per_reduction
def triplet_default_distance(red):
    return (lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, reduction=red)), (
        leaf(4, 6),
        leaf(4, 6, seed=2),
        leaf(4, 6, seed=3),
    )


@per_reduction
def multi_margin_p2_weight(red):
    w = (leaf(5, seed=3, rg=False).abs() + 0.1).requires_grad_()
    t = targets(6)
    return (lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.7, weight=w, reduction=red)), (
        leaf(6, 5),
        t,
        w,
    )


@per_reduction
def multi_margin_1d(red):
    return (lambda x, t: F.multi_margin_loss(x, t, reduction=red)), (leaf(5), torch.tensor([2]))


@per_reduction
def multilabel_margin(red):
    t = torch.tensor([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 0, 0, 0]])
    return (lambda x, t: F.multilabel_margin_loss(x, t, reduction=red)), (leaf(3, 4), t)


@per_reduction
def multilabel_soft_margin(red):
    w = leaf(4, seed=3, rg=False).abs()
    t = (torch.rand(3, 4, generator=torch.Generator().manual_seed(2)) > 0.5).to(fdt())
    return (lambda x, t: F.multilabel_soft_margin_loss(x, t, weight=w, reduction=red)), (
        leaf(3, 4),
        t,
    )


@per_reduction
def soft_margin(red):
    y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], dtype=fdt())
    return (lambda x, y: F.soft_margin_loss(x * 30, y, reduction=red)), (leaf(2, 3), y)


# ============================================================================================
# low precision


def _amp(red, dtype):
    def sc(C, rec):
        lin = nn.Linear(6, 5)
        x = leaf(8, 6, rg=False)
        t = targets(8)
        t[0] = -100

        def f(x, t):
            with torch.autocast("cpu", dtype=dtype):
                logits = lin(x)
                return F.cross_entropy(logits, t, label_smoothing=0.1, reduction=red), logits.dtype

        out, dt = C(f)(x, t)
        rec("out", out)
        rec("dt", dt)
        (out.sum() if out.dim() else out).backward()
        rec("gw", lin.weight.grad)
        rec("gb", lin.bias.grad)

    return sc


for _red in REDUCTIONS:
    for _dt in (torch.bfloat16, torch.float16):
        SCENARIOS[f"amp_ce_{str(_dt)[6:]}_{_red}"] = _amp(_red, _dt)


def _half(red, dtype, kind):
    def sc(C, rec):
        x = leaf(6, 5).detach().to(dtype).requires_grad_()
        if kind == "ce":
            t = targets(6)
            t[1] = -100
            w = (leaf(5, seed=3, rg=False).abs() + 0.1).to(dtype)
            f = lambda x, t: F.cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction=red)
        elif kind == "bcel":
            t = torch.rand(6, 5, generator=torch.Generator().manual_seed(2)).to(dtype)
            f = lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=red)
        elif kind == "kl":
            t = torch.softmax(leaf(6, 5, seed=2, rg=False), -1).to(dtype)
            f = lambda x, t: F.kl_div(F.log_softmax(x, -1), t, reduction=red)
        elif kind == "mse":
            t = leaf(6, 5, seed=2, rg=False).to(dtype)
            f = lambda x, t: F.mse_loss(x, t, reduction=red) + F.smooth_l1_loss(x, t, reduction=red)
        run_loss(C, rec, f, (x, t))

    return sc


for _red in REDUCTIONS:
    for _dt in (torch.bfloat16, torch.float16):
        for _k in ("ce", "bcel", "kl", "mse"):
            SCENARIOS[f"half_{_k}_{str(_dt)[6:]}_{_red}"] = _half(_red, _dt, _k)


# ============================================================================================
# modules and training


@scenario
def mod_losses_sum(C, rec):
    mods = [
        nn.CrossEntropyLoss(label_smoothing=0.05),
        nn.MSELoss(reduction="sum"),
        nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0, 0.5, 1.0])),
        nn.SmoothL1Loss(beta=0.2),
        nn.HuberLoss(delta=2.0),
        nn.NLLLoss(ignore_index=1),
        nn.MultiLabelSoftMarginLoss(),
    ]
    x = leaf(4, 3)
    t = targets(4, n=3)
    tb = (torch.rand(4, 3, generator=torch.Generator().manual_seed(2)) > 0.5).to(fdt())

    def f(x, t, tb):
        return [
            mods[0](x, t),
            mods[1](x, tb),
            mods[2](x, tb),
            mods[3](x, tb),
            mods[4](x, tb),
            mods[5](F.log_softmax(x, 1), t),
            mods[6](x, tb),
        ]

    outs = C(f)(x, t, tb)
    for i, o in enumerate(outs):
        rec(f"o{i}", o)
    sum(outs).backward()
    rec("g", x.grad)


@scenario
def train_classifier_smooth_weight(C, rec):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 4)).to(fdt())
    crit = nn.CrossEntropyLoss(
        weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), label_smoothing=0.1, ignore_index=-1
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
        return loss

    cstep = C(step)
    for i in range(3):
        x = leaf(8, 6, seed=10 + i, rg=False)
        y = targets(8, n=4, seed=20 + i)
        y[i] = -1
        rec(f"loss{i}", cstep(x, y))
        for n, p in model.named_parameters():
            rec(f"p{i}.{n}", p.detach())


@scenario
def train_classifier_model_compiled(C, rec):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)).to(fdt())
    crit = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5, 1.5]), label_smoothing=0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    cm = C(model)
    for i in range(3):
        x = leaf(8, 6, seed=10 + i, rg=False)
        y = targets(8, n=4, seed=20 + i)
        opt.zero_grad()
        loss = crit(cm(x), y)
        loss.backward()
        opt.step()
        rec(f"loss{i}", loss)
        for n, p in model.named_parameters():
            rec(f"p{i}.{n}", p.detach())


class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Conv2d(4, 5, 1)
        self.crit = nn.CrossEntropyLoss(ignore_index=255)

    def forward(self, x, y):
        logits = self.head(F.relu(self.bn(self.conv(x))))
        return self.crit(logits, y), logits


@scenario
def train_segmentation_ignore255(C, rec):
    torch.manual_seed(0)
    m = Seg().to(fdt())
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    cm = C(m)
    for i in range(2):
        x = leaf(2, 3, 6, 6, seed=i, rg=False)
        y = targets(2, 6, 6, seed=5 + i)
        y[:, :2] = 255
        if i == 1:
            y[:] = 255
        opt.zero_grad()
        loss, _ = cm(x, y)
        rec(f"loss{i}", loss)
        loss.backward()
        for n, p in m.named_parameters():
            rec(f"g{i}.{n}", p.grad)
        opt.step()


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 6)
        self.mu = nn.Linear(6, 2)
        self.logvar = nn.Linear(6, 2)
        self.dec = nn.Sequential(nn.Linear(2, 6), nn.ReLU(), nn.Linear(6, 8), nn.Sigmoid())

    def forward(self, x, eps):
        h = F.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + eps * torch.exp(0.5 * logvar)
        recon = self.dec(z)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld, bce, kld


@scenario
def train_vae(C, rec):
    torch.manual_seed(0)
    m = VAE().to(fdt())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    cm = C(m)
    for i in range(3):
        x = torch.rand(4, 8, generator=torch.Generator().manual_seed(i)).to(fdt())
        x[0, 0] = 1.0
        x[0, 1] = 0.0
        eps = leaf(4, 2, seed=30 + i, rg=False)
        opt.zero_grad()
        loss, bce, kld = cm(x, eps)
        rec(f"l{i}", (loss, bce, kld))
        loss.backward()
        opt.step()
        for n, p in m.named_parameters():
            rec(f"p{i}.{n}", p.detach())


@scenario
def train_loss_fn_compiled_weight_requires_grad(C, rec):
    """Weights of a loss learned (class weights as a parameter)."""
    w = nn.Parameter(torch.ones(4, dtype=fdt()))
    x = leaf(6, 4)
    t = targets(6, n=4)
    t[0] = -100

    def f(x, t):
        return F.cross_entropy(x, t, weight=w.softmax(0) * 4, label_smoothing=0.1)

    run_loss(C, rec, f, (x, t))
    rec("gw", w.grad)


@scenario
def ce_mean_then_item_eval_no_grad(C, rec):
    x = leaf(6, 5)
    t = targets(6)

    @torch.no_grad()
    def f(x, t):
        return F.cross_entropy(x, t, reduction="sum") / t.numel(), (x.argmax(1) == t).float().mean()

    rec("o", C(f)(x, t))


@scenario
def ce_targets_int32(C, rec):
    x = leaf(6, 5)
    t = targets(6).int()
    run_loss(C, rec, lambda x, t: F.cross_entropy(x, t), (x, t))


@scenario
def ce_targets_uint8(C, rec):
    x = leaf(6, 5)
    t = targets(6).to(torch.uint8)
    run_loss(C, rec, lambda x, t: F.cross_entropy(x, t), (x, t))


@scenario
def nll_targets_int32(C, rec):
    x = leaf(6, 5)
    t = targets(6).int()
    run_loss(C, rec, lambda x, t: F.nll_loss(x, t), (x, t))


# ============================================================================================
# round 2: dynamic batches, legacy arguments, mixed dtypes, empty batches, layouts


@scenario
def dyn_batch_ce_ignore(C, rec):
    """The last batch of an epoch is smaller (automatic dynamic shapes after a second size)."""
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    f = C(lambda x, t: F.cross_entropy(x, t, weight=w, ignore_index=0, label_smoothing=0.1))
    for i, n in enumerate((8, 6, 4, 1)):
        x = leaf(n, 5, seed=i)
        t = targets(n, seed=i)
        out = f(x, t)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", x.grad)


@scenario
def dyn_batch_reductions(C, rec):
    def f(x, t, tb, y):
        return (
            F.mse_loss(x, tb),
            F.binary_cross_entropy_with_logits(x, tb, reduction="sum"),
            F.kl_div(F.log_softmax(x, 1), F.softmax(tb, 1), reduction="batchmean"),
            F.nll_loss(F.log_softmax(x, 1), t, reduction="none"),
            F.multilabel_soft_margin_loss(x, tb),
            F.margin_ranking_loss(x[:, 0], x[:, 1], y),
            F.cosine_embedding_loss(x, tb, y),
            F.multi_margin_loss(x, t),
        )

    cf = C(f)
    for i, n in enumerate((5, 3, 7)):
        x = leaf(n, 4, seed=i)
        tb = torch.rand(n, 4, generator=torch.Generator().manual_seed(i)).to(fdt())
        y = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0).to(fdt())
        outs = cf(x, targets(n, n=4, seed=i), tb, y)
        rec(f"o{i}", outs)
        sum(o.sum() for o in outs).backward()
        rec(f"g{i}", x.grad)


@scenario
def dyn_ctc_lengths_change(C, rec):
    f = C(lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl))
    for i, (T, S) in enumerate(((8, 3), (10, 4), (6, 2))):
        lp, tg = _ctc_inputs(T=T, S=S, seed=i)
        il = torch.tensor([T, T - 1, T - 2])
        tl = torch.tensor([S, S - 1, 1])
        out = f(lp, tg, il, tl)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", lp.grad)


@scenario
def dyn_ctc_tuple_lengths_change(C, rec):
    f = C(lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl, zero_infinity=True))
    for i, (il, tl) in enumerate(
        (((8, 7, 6), (3, 2, 1)), ((8, 8, 8), (3, 3, 3)), ((5, 2, 8), (1, 2, 3)))
    ):
        lp, tg = _ctc_inputs(seed=i)
        out = f(lp, tg, il, tl)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", lp.grad)


@scenario
def legacy_size_average_reduce(C, rec):
    def f(x, t, tb):
        return (
            F.cross_entropy(x, t, size_average=False),
            F.nll_loss(F.log_softmax(x, 1), t, reduce=False),
            F.mse_loss(x, tb, size_average=True, reduce=True),
            F.l1_loss(x, tb, reduce=False),
            F.binary_cross_entropy_with_logits(x, tb, size_average=False),
            F.kl_div(F.log_softmax(x, 1), F.softmax(tb, 1), size_average=False),
            nn.MSELoss(size_average=False)(x, tb),
        )

    x = leaf(4, 3)
    outs = C(f)(x, targets(4, n=3), leaf(4, 3, seed=2, rg=False).sigmoid())
    rec("o", outs)
    sum(o.sum() for o in outs).backward()
    rec("g", x.grad)


def _mixed(kind):
    def sc(C, rec):
        x = leaf(4, 3)
        t = leaf(4, 3, seed=2, rg=False).sigmoid().double().requires_grad_()
        fns = {
            "mse": lambda x, t: F.mse_loss(x, t),
            "l1": lambda x, t: F.l1_loss(x, t, reduction="none"),
            "smoothl1": lambda x, t: F.smooth_l1_loss(x, t, reduction="sum"),
            "huber": lambda x, t: F.huber_loss(x, t),
            "bce": lambda x, t: F.binary_cross_entropy(x.sigmoid(), t, reduction="none"),
            "bcel": lambda x, t: F.binary_cross_entropy_with_logits(x, t),
            "bcel_pw": lambda x, t: F.binary_cross_entropy_with_logits(
                x, t, pos_weight=torch.ones(3, dtype=torch.float64)
            ),
            "kl": lambda x, t: F.kl_div(x, t, reduction="batchmean"),
            "kl_none": lambda x, t: F.kl_div(x, t, reduction="none"),
            "poisson": lambda x, t: F.poisson_nll_loss(x, t, reduction="none"),
            "gaussian": lambda x, t: F.gaussian_nll_loss(x, t, torch.ones(4, 1)),
            "soft_margin": lambda x, t: F.soft_margin_loss(x, t, reduction="none"),
            "msl": lambda x, t: F.multilabel_soft_margin_loss(x, t),
            "ce_probs": lambda x, t: F.cross_entropy(x, t.softmax(1)),
            "ce_probs_none": lambda x, t: F.cross_entropy(x, t.softmax(1), reduction="none"),
            "margin_ranking": lambda x, t: F.margin_ranking_loss(
                x, t, torch.ones(4, 3), reduction="none"
            ),
            "hinge": lambda x, t: F.hinge_embedding_loss(x, t.sign(), reduction="none"),
            "cosine": lambda x, t: F.cosine_embedding_loss(x, t, torch.ones(4)),
            "triplet": lambda x, t: F.triplet_margin_loss(x, t, t.flip(0), reduction="none"),
        }
        run_loss(C, rec, fns[kind], (x, t))

    return sc


for _k in [
    "mse",
    "l1",
    "smoothl1",
    "huber",
    "bce",
    "bcel",
    "bcel_pw",
    "kl",
    "kl_none",
    "poisson",
    "gaussian",
    "soft_margin",
    "msl",
    "ce_probs",
    "ce_probs_none",
    "margin_ranking",
    "hinge",
    "cosine",
    "triplet",
]:
    SCENARIOS[f"mixed_f64_target_{_k}"] = _mixed(_k)


def _empty(kind):
    def sc(C, rec):
        x = leaf(0, 4)
        fns = {
            "ce": lambda x: F.cross_entropy(x, torch.zeros(0, dtype=torch.long)),
            "ce_sum": lambda x: F.cross_entropy(
                x, torch.zeros(0, dtype=torch.long), reduction="sum"
            ),
            "ce_smooth": lambda x: F.cross_entropy(
                x, torch.zeros(0, dtype=torch.long), label_smoothing=0.1
            ),
            "ce_probs": lambda x: F.cross_entropy(x, torch.zeros(0, 4)),
            "nll_w": lambda x: F.nll_loss(
                x, torch.zeros(0, dtype=torch.long), weight=torch.ones(4)
            ),
            "mse": lambda x: F.mse_loss(x, torch.zeros(0, 4)),
            "l1": lambda x: F.l1_loss(x, torch.zeros(0, 4)),
            "smoothl1": lambda x: F.smooth_l1_loss(x, torch.zeros(0, 4)),
            "huber": lambda x: F.huber_loss(x, torch.zeros(0, 4)),
            "soft_margin": lambda x: F.soft_margin_loss(x, torch.zeros(0, 4)),
            "mse_f64t": lambda x: F.mse_loss(x, torch.zeros(0, 4, dtype=torch.float64)),
            "huber_f64t": lambda x: F.huber_loss(x, torch.zeros(0, 4, dtype=torch.float64)),
            "bce_f64t": lambda x: F.binary_cross_entropy(
                x.sigmoid(), torch.zeros(0, 4, dtype=torch.float64)
            ),
            "poisson": lambda x: F.poisson_nll_loss(x, torch.zeros(0, 4)),
            "gaussian": lambda x: F.gaussian_nll_loss(x, torch.zeros(0, 4), torch.ones(0, 4)),
            "kl": lambda x: F.kl_div(x, torch.zeros(0, 4), reduction="mean"),
            "mr": lambda x: F.margin_ranking_loss(x, x, torch.zeros(0, 4)),
            "hinge": lambda x: F.hinge_embedding_loss(x, torch.zeros(0, 4)),
            "triplet": lambda x: F.triplet_margin_loss(x, x, x),
            "bce": lambda x: F.binary_cross_entropy(x.sigmoid(), torch.zeros(0, 4)),
            "bcel": lambda x: F.binary_cross_entropy_with_logits(x, torch.zeros(0, 4)),
            "kl_bm": lambda x: F.kl_div(x, torch.zeros(0, 4), reduction="batchmean"),
            "mm": lambda x: F.multi_margin_loss(x, torch.zeros(0, dtype=torch.long)),
            "msl": lambda x: F.multilabel_soft_margin_loss(x, torch.zeros(0, 4)),
            "cos": lambda x: F.cosine_embedding_loss(x, x, torch.zeros(0)),
        }
        run_loss(C, rec, fns[kind], (x,))

    return sc


for _k in [
    "ce",
    "ce_sum",
    "ce_smooth",
    "ce_probs",
    "nll_w",
    "mse",
    "l1",
    "smoothl1",
    "huber",
    "soft_margin",
    "mse_f64t",
    "huber_f64t",
    "bce_f64t",
    "poisson",
    "gaussian",
    "kl",
    "mr",
    "hinge",
    "triplet",
    "bce",
    "bcel",
    "kl_bm",
    "mm",
    "msl",
    "cos",
]:
    SCENARIOS[f"empty_{_k}"] = _empty(_k)


@per_reduction
def ce_transposed_logits(red):  # (C, N) logits transposed: non-contiguous
    t = targets(6)
    return (lambda x, t: F.cross_entropy(x.t(), t, label_smoothing=0.1, reduction=red)), (
        leaf(5, 6),
        t,
    )


@per_reduction
def ce_channels_last(red):
    x = leaf(2, 4, 3, 3).detach().to(memory_format=torch.channels_last).requires_grad_()
    t = targets(2, 3, 3, n=4)
    return (lambda x, t: F.cross_entropy(x, t, reduction=red) * 1), (x, t)


@per_reduction
def ce_masked_logits_smooth(red):
    """Logits masked with -inf (a vocabulary mask) and label smoothing: eager gives inf/nan."""
    mask = torch.tensor([True, True, False, True, False])
    t = targets(4, n=2)

    def f(x, t):
        return F.cross_entropy(
            x.masked_fill(~mask, float("-inf")), t, label_smoothing=0.1, reduction=red
        )

    return f, (leaf(4, 5), t)


@per_reduction
def ce_masked_logits(red):
    mask = torch.tensor([True, True, False, True, False])
    t = targets(4, n=2)
    return (lambda x, t: F.cross_entropy(x.masked_fill(~mask, float("-inf")), t, reduction=red)), (
        leaf(4, 5),
        t,
    )


@per_reduction
def ce_masked_logits_min(red):
    mask = torch.tensor([True, True, False, True, False])
    t = targets(4, n=2)

    def f(x, t):
        return F.cross_entropy(
            x.masked_fill(~mask, torch.finfo(x.dtype).min), t, label_smoothing=0.2, reduction=red
        )

    return f, (leaf(4, 5), t)


@per_reduction
def ce_large_logits(red):
    x = (leaf(4, 5).detach() * 1e4).requires_grad_()
    return (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction=red)), (x, targets(4))


@per_reduction
def ce_one_class(red):
    return (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, reduction=red)), (
        leaf(4, 1),
        torch.zeros(4, dtype=torch.long),
    )


@per_reduction
def hinge_nonpm1_targets(red):
    y = torch.tensor([[1.0, 0.0, -1.0], [2.0, -1.0, 1.0]], dtype=fdt())
    return (lambda x, y: F.hinge_embedding_loss(x, y, reduction=red)), (leaf(2, 3), y)


@per_reduction
def cosine_unbatched(red):
    return (
        lambda a, b: F.cosine_embedding_loss(a, b, torch.tensor(-1.0), margin=-0.5, reduction=red)
    ), (
        leaf(6),
        leaf(6, seed=2),
    )


@per_reduction
def margin_ranking_broadcast(red):
    return (lambda a, b, y: F.margin_ranking_loss(a, b, y, reduction=red)), (
        leaf(4, 1),
        leaf(1, 3, seed=2),
        torch.tensor([1.0, -1.0, 1.0], dtype=fdt()),
    )


@per_reduction
def triplet_unbatched_p3(red):
    return (lambda a, p, n: F.triplet_margin_loss(a, p, n, p=3, eps=1e-3, reduction=red)), (
        leaf(6),
        leaf(6, seed=2),
        leaf(6, seed=3),
    )


@per_reduction
def triplet_identical_inputs(
    red,
):  # distance 0: pairwise_distance's eps keeps the norm's grad finite
    a = leaf(3, 4)
    return (lambda a, n: F.triplet_margin_loss(a, a, n, reduction=red)), (a, leaf(3, 4, seed=3))


@per_reduction
def poisson_no_full_zero_targets(red):
    t = torch.tensor([[0.0, 1.0, 2.0], [5.0, 0.0, 1.5]], dtype=fdt())
    return (lambda x, t: F.poisson_nll_loss(x, t, log_input=True, full=True, reduction=red)), (
        leaf(2, 3),
        t,
    )


@per_reduction
def gaussian_3d_var(red):
    v = (leaf(2, 4, seed=3, rg=False).abs() + 0.1).requires_grad_()
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True, reduction=red)), (
        leaf(2, 4, 3),
        leaf(2, 4, 3, seed=2),
        v,
    )


@per_reduction
def gaussian_unbatched_var(red):  # var of shape (3,) for input (4, 3): homoscedastic per feature
    v = (leaf(3, seed=3, rg=False).abs() + 0.1).requires_grad_()
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction=red)), (
        leaf(4, 3),
        leaf(4, 3, seed=2),
        v,
    )


@per_reduction
def gaussian_var_one(red):  # var of shape (4, 1) vs input (4, 1)
    v = (leaf(4, 1, seed=3, rg=False).abs() + 0.1).requires_grad_()
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction=red)), (
        leaf(4, 1),
        leaf(4, 1, seed=2),
        v,
    )


@scenario
def ctc_float64_int32(C, rec):
    lp = F.log_softmax(leaf(8, 2, 5, rg=False).double(), -1).requires_grad_()
    tg = targets(2, 3, n=4).int() + 1
    run_loss(
        C,
        rec,
        lambda lp, tg: F.ctc_loss(
            lp, tg, torch.tensor([8, 6], dtype=torch.int32), torch.tensor([3, 2], dtype=torch.int32)
        ),
        (lp, tg),
    )


@scenario
def ctc_raw_logits_list_lengths(C, rec):
    x = leaf(8, 2, 5)
    tg = targets(2, 3, n=4) + 1
    run_loss(C, rec, lambda x, tg: F.ctc_loss(x, tg, [8, 6], [3, 2], reduction="sum"), (x, tg))


@scenario
def ctc_log_softmax_in_graph_grad(C, rec):
    lin = nn.Linear(4, 5).to(fdt())
    feats = leaf(8, 2, 4, rg=False)
    tg = targets(2, 3, n=4) + 1

    def f(feats, tg):
        lp = lin(feats).log_softmax(-1)
        return F.ctc_loss(lp, tg, (8, 7), (3, 3), zero_infinity=True)

    rec("o", C(f)(feats, tg))
    C(f)(feats, tg).backward()
    rec("gw", lin.weight.grad)
    rec("gb", lin.bias.grad)


@scenario
def ctc_repeated_labels(C, rec):
    lp, tg = _ctc_inputs(T=6)
    tg[:] = torch.tensor([2, 2, 3])
    run_loss(
        C,
        rec,
        lambda lp, tg: F.ctc_loss(
            lp, tg, (6, 5, 4), (3, 3, 2), reduction="none", zero_infinity=True
        ),
        (lp, tg),
    )


@scenario
def loss_item_graph_break(C, rec):
    model = nn.Linear(4, 3).to(fdt())
    logs = []

    def step(x, t):
        loss = F.cross_entropy(model(x), t, label_smoothing=0.1)
        logs.append(loss.item())
        loss.backward()
        return loss.detach()

    cs = C(step)
    for i in range(2):
        rec(f"o{i}", cs(leaf(5, 4, seed=i, rg=False), targets(5, n=3, seed=i)))
    rec("logs", logs)
    rec("gw", model.weight.grad)


@scenario
def module_reduction_attr_changed(C, rec):
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)
    f = C(lambda x, t: crit(x, t))
    x, t = leaf(4, 5), targets(4)
    rec("a", f(x, t))
    crit.reduction = "none"
    rec("b", f(x, t))
    crit.label_smoothing = 0.0
    crit.ignore_index = 1
    rec("c", f(x, t))


@scenario
def eval_loop_accumulate(C, rec):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(fdt()).eval()

    @torch.no_grad()
    def evaluate(x, t):
        logits = model(x)
        loss = F.cross_entropy(logits, t, reduction="sum")
        correct = (logits.argmax(1) == t).sum()
        return loss, correct

    ce = C(evaluate)
    total, n_ok = 0.0, 0
    for i, n in enumerate((6, 6, 2)):
        loss, c = ce(leaf(n, 4, seed=i, rg=False), targets(n, n=3, seed=i))
        total += loss.item()
        n_ok += int(c)
    rec("total", total)
    rec("ok", n_ok)


@scenario
def bce_weight_requires_grad(C, rec):
    w = leaf(4, seed=3).detach().abs().requires_grad_()
    t = torch.rand(4, generator=torch.Generator().manual_seed(2)).to(fdt())
    run_loss(
        C, rec, lambda x, t, w: F.binary_cross_entropy(x.sigmoid(), t, weight=w), (leaf(4), t, w)
    )


@scenario
def bce_weight_broadcast(C, rec):
    w = leaf(3, seed=3, rg=False).abs()
    t = torch.rand(4, 3, generator=torch.Generator().manual_seed(2)).to(fdt())
    run_loss(C, rec, lambda x, t: F.binary_cross_entropy(x.sigmoid(), t, weight=w), (leaf(4, 3), t))


@scenario
def bcel_pos_weight_image(C, rec):  # pos_weight (C, 1, 1) for (N, C, H, W)
    pw = leaf(3, 1, 1, seed=3, rg=False).abs() + 0.5
    t = (torch.rand(2, 3, 2, 2, generator=torch.Generator().manual_seed(2)) > 0.5).to(fdt())
    run_loss(
        C,
        rec,
        lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
        (leaf(2, 3, 2, 2), t),
    )


@scenario
def ce_probs_under_autocast_bf16(C, rec):
    lin = nn.Linear(6, 5)
    x = leaf(4, 6, rg=False)
    p = torch.softmax(leaf(4, 5, seed=2, rg=False), -1)

    def f(x, p):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(lin(x), p, label_smoothing=0.1)

    out = C(f)(x, p)
    rec("o", out)
    out.backward()
    rec("gw", lin.weight.grad)


@scenario
def amp_bce_logits_mse(C, rec):
    lin = nn.Linear(6, 5)
    x = leaf(4, 6, rg=False)
    t = torch.rand(4, 5, generator=torch.Generator().manual_seed(2))

    def f(x, t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = lin(x)
            return (
                F.binary_cross_entropy_with_logits(y, t),
                F.mse_loss(y, t),
                F.l1_loss(y, t),
                F.smooth_l1_loss(y, t),
                F.kl_div(y.log_softmax(-1), t, reduction="batchmean"),
                F.nll_loss(y.log_softmax(-1), t.argmax(-1)),
                F.binary_cross_entropy(y.sigmoid().float(), t),
            )

    outs = C(f)(x, t)
    rec("o", outs)
    sum(outs).backward()
    rec("gw", lin.weight.grad)


@_err
def err_mse_long_target():
    return (lambda x, t: F.mse_loss(x, t)), (leaf(4), torch.arange(4))


@_err
def err_bce_weight_shape():
    return (lambda x, t: F.binary_cross_entropy(x.sigmoid(), t, weight=torch.ones(2))), (
        leaf(4, 3),
        torch.rand(4, 3),
    )


@_err
def err_bcel_pos_weight_shape():
    return (lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=torch.ones(2))), (
        leaf(4, 3),
        torch.rand(4, 3),
    )


@_err
def err_nll_3d_target_shape():
    return (lambda x, t: F.nll_loss(x, t)), (leaf(2, 4, 3), targets(2, 4, n=4))


@_err
def err_ce_probs_kdim_shape():
    return (lambda x, p: F.cross_entropy(x, p)), (leaf(2, 4, 3), torch.rand(2, 4, 5))


@_err
def err_margin_ranking_shape():
    return (lambda a, b: F.margin_ranking_loss(a, b, torch.ones(3))), (leaf(4), leaf(4, seed=2))


@_err
def err_cosine_target_shape():
    return (lambda a, b: F.cosine_embedding_loss(a, b, torch.ones(3))), (
        leaf(4, 2),
        leaf(4, 2, seed=2),
    )


@_err
def err_triplet_shape():
    return (lambda a, p, n: F.triplet_margin_loss(a, p, n)), (
        leaf(4, 2),
        leaf(4, 3, seed=2),
        leaf(4, 2, seed=3),
    )


@_err
def err_ctc_target_length_exceeds():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8, 8), (4, 2, 1))), (lp, tg)


@_err
def err_ctc_target_length_exceeds_tensor():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl)), (
        lp,
        tg,
        torch.tensor([8, 8, 8]),
        torch.tensor([4, 2, 1]),
    )


@_err
def err_ctc_negative_length_tensor():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl)), (
        lp,
        tg,
        torch.tensor([8, 8, 8]),
        torch.tensor([3, -2, 1]),
    )


@_err
def err_ctc_input_length_tensor_too_long():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl)), (
        lp,
        tg,
        torch.tensor([9, 8, 8]),
        torch.tensor([3, 2, 1]),
    )


@_err
def err_ctc_lengths_count():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8), (3, 2, 1))), (lp, tg)


@_err
def err_ctc_blank_oob():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8, 8), (3, 2, 1), blank=5)), (lp, tg)


@_err
def err_ctc_concat_sum_mismatch():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8, 8), (3, 2, 2))), (lp, tg.flatten()[:6])


@_err
def err_poisson_bad_reduction():
    return (lambda x, t: F.poisson_nll_loss(x, t, reduction="batchmean")), (leaf(4), torch.rand(4))


@_err
def err_ce_smoothing_negative():
    return (lambda x, t: F.cross_entropy(x, t, label_smoothing=-0.1)), (leaf(4, 5), targets(4))


@_err
def err_multilabel_soft_margin_shape():
    return (lambda x, t: F.multilabel_soft_margin_loss(x, t)), (leaf(4, 3), torch.rand(4, 2))


# ============================================================================================
# round 3: user-written losses built on the library ones, double backward, module forms


@scenario
def focal_loss(C, rec):
    alpha = torch.tensor([0.25, 0.5, 0.75, 1.0, 1.0])

    def focal(x, t, gamma=2.0):
        ce = F.cross_entropy(x, t, reduction="none", ignore_index=-100)
        pt = torch.exp(-ce)
        a = alpha.to(x.dtype)[t.clamp(min=0)]
        return (a * (1 - pt) ** gamma * ce).sum() / (t != -100).sum().clamp(min=1)

    t = targets(8)
    t[3] = -100
    run_loss(C, rec, focal, (leaf(8, 5), t))


@scenario
def binary_focal_logits(C, rec):
    def focal(x, t):
        p = torch.sigmoid(x)
        ce = F.binary_cross_entropy_with_logits(x, t, reduction="none")
        p_t = p * t + (1 - p) * (1 - t)
        loss = ce * ((1 - p_t) ** 2)
        a_t = 0.25 * t + 0.75 * (1 - t)
        return (a_t * loss).mean()

    t = (torch.rand(4, 6, generator=torch.Generator().manual_seed(2)) > 0.7).to(fdt())
    run_loss(C, rec, focal, (leaf(4, 6), t))


@scenario
def dice_plus_ce(C, rec):
    def f(x, t):
        p = x.softmax(1)
        oh = F.one_hot(t, 3).permute(0, 3, 1, 2).to(x.dtype)
        inter = (p * oh).sum((2, 3))
        dice = 1 - (2 * inter + 1) / (p.sum((2, 3)) + oh.sum((2, 3)) + 1)
        return dice.mean() + F.cross_entropy(x, t)

    run_loss(C, rec, f, (leaf(2, 3, 4, 4), targets(2, 4, 4, n=3)))


@scenario
def infonce_arange_targets(C, rec):
    def f(a, b, temp):
        a = F.normalize(a, dim=-1)
        b = F.normalize(b, dim=-1)
        logits = a @ b.t() / temp
        labels = torch.arange(a.shape[0], device=a.device)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2

    cf = C(f)
    for i, n in enumerate((6, 4, 8)):
        a, b = leaf(n, 5, seed=i), leaf(n, 5, seed=10 + i)
        out = cf(a, b, 0.07)
        rec(f"o{i}", out)
        out.backward()
        rec(f"ga{i}", a.grad)
        rec(f"gb{i}", b.grad)


@scenario
def distillation_kl_T(C, rec):
    teacher = nn.Linear(4, 5).to(fdt())
    student = nn.Linear(4, 5).to(fdt())

    def f(x, t, T):
        with torch.no_grad():
            tl = teacher(x)
        sl = student(x)
        kd = (
            F.kl_div(F.log_softmax(sl / T, -1), F.softmax(tl / T, -1), reduction="batchmean")
            * T
            * T
        )
        return 0.5 * kd + 0.5 * F.cross_entropy(sl, t)

    cf = C(f)
    for i, T in enumerate((2.0, 4.0)):
        out = cf(leaf(6, 4, seed=i, rg=False), targets(6, seed=i), T)
        rec(f"o{i}", out)
        out.backward()
    rec("gs", student.weight.grad)
    rec("gt", teacher.weight.grad)


@scenario
def lm_shifted_loss(C, rec):
    emb = nn.Embedding(7, 6).to(fdt())
    head = nn.Linear(6, 7).to(fdt())

    def f(ids, labels):
        logits = head(emb(ids))
        shift_logits = logits[:, :-1, :].contiguous()
        shift_labels = labels[:, 1:].contiguous()
        return F.cross_entropy(
            shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1), ignore_index=-100
        )

    ids = targets(2, 5, n=7)
    labels = ids.clone()
    labels[0, 3:] = -100
    out = C(f)(ids, labels)
    rec("o", out)
    out.backward()
    rec("ge", emb.weight.grad)
    rec("gh", head.weight.grad)


@scenario
def lm_loss_half_logits_float(C, rec):
    head = nn.Linear(6, 7).to(fdt())

    def f(h, labels):
        logits = head(h).to(torch.bfloat16)
        return F.cross_entropy(
            logits.float().view(-1, 7), labels.view(-1), ignore_index=-100, reduction="sum"
        )

    labels = targets(2, 5, n=7)
    labels[1, :2] = -100
    out = C(f)(leaf(2, 5, 6, rg=False), labels)
    rec("o", out)
    out.backward()
    rec("gh", head.weight.grad)


@scenario
def gradient_penalty_double_backward(C, rec):
    D = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).to(fdt())
    cD = C(D)
    x = leaf(4, 3)
    out = cD(x)
    loss = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
    rec("gp", gp)
    (loss + 10 * gp).backward()
    rec("gw", D[0].weight.grad)


@scenario
def gradient_penalty_in_compiled(C, rec):
    D = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).to(fdt())

    def f(x):
        x = x.detach().requires_grad_()
        out = D(x)
        loss = F.mse_loss(out, torch.ones_like(out))
        (g,) = torch.autograd.grad(loss, x, create_graph=True)
        return loss + ((g.norm(2, dim=1) - 1) ** 2).mean()

    out = C(f)(leaf(4, 3, rg=False))
    rec("o", out)
    out.backward()
    rec("gw", D[0].weight.grad)


@scenario
def adaptive_log_softmax(C, rec):
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 7], div_value=2.0).to(fdt())
    x = leaf(6, 8)
    t = torch.tensor([0, 5, 9, 3, 8, 6])
    out = C(lambda x, t: m(x, t))(x, t)
    rec("out", out.output)
    rec("loss", out.loss)
    out.loss.backward()
    rec("gx", x.grad)
    rec("gh", m.head.weight.grad)
    rec("gt0", m.tail[0][1].weight.grad)


@scenario
def compiled_criterion_module(C, rec):
    crit = C(
        nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0, 1.0, 1.0]), label_smoothing=0.1)
    )
    x = leaf(6, 5)
    for i in range(2):
        t = targets(6, seed=i)
        t[i] = -100
        out = crit(x, t)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", x.grad)


@scenario
def modules_gaussian_poisson(C, rec):
    g = nn.GaussianNLLLoss(full=True, eps=1e-3)
    p = nn.PoissonNLLLoss(log_input=False, full=True)
    tm = nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(p=1), margin=0.5)
    mm = nn.MultiMarginLoss(p=2, margin=0.5, weight=torch.tensor([1.0, 2.0, 0.5]))
    ml = nn.MultiLabelMarginLoss()
    sm = nn.SoftMarginLoss(reduction="sum")
    he = nn.HingeEmbeddingLoss(margin=2.0, reduction="none")
    ce = nn.CosineEmbeddingLoss(margin=0.2)
    mr = nn.MarginRankingLoss(margin=0.1)
    x = leaf(4, 3)
    v = leaf(4, 1, seed=3, rg=False).abs() + 0.1
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=fdt())

    def f(x):
        return [
            g(x, x.detach() * 0.5, v),
            p(x.abs() + 0.1, torch.full((4, 3), 2.0, dtype=x.dtype)),
            tm(x, x.flip(0), x.roll(1, 0)),
            mm(x, torch.tensor([0, 2, 1, 1])),
            ml(x, torch.tensor([[0, -1, 0], [2, 1, -1], [1, 1, 2], [-1, 0, 0]])),
            sm(x, y[:3].expand(4, 3)),
            he(x, y[:3].expand(4, 3)),
            ce(x, x.roll(1, 0), y),
            mr(x[:, 0], x[:, 1], y),
        ]

    outs = C(f)(x)
    rec("o", outs)
    sum(o.sum() for o in outs).backward()
    rec("g", x.grad)


@scenario
def ctc_autocast_bf16(C, rec):
    lin = nn.Linear(4, 5)
    feats = leaf(8, 2, 4, rg=False)
    tg = targets(2, 3, n=4) + 1

    def f(feats, tg):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lp = lin(feats).log_softmax(-1)
            return F.ctc_loss(lp, tg, (8, 7), (3, 3)), lp.dtype

    out, dt = C(f)(feats, tg)
    rec("o", out)
    rec("dt", dt)
    out.backward()
    rec("gw", lin.weight.grad)


@scenario
def ctc_zero_input_length(C, rec):
    lp, tg = _ctc_inputs()
    run_loss(
        C, rec, lambda lp, tg: F.ctc_loss(lp, tg, (8, 0, 0), (3, 0, 1), reduction="none"), (lp, tg)
    )


@scenario
def ctc_zero_input_length_zinf(C, rec):
    lp, tg = _ctc_inputs()
    run_loss(
        C,
        rec,
        lambda lp, tg: F.ctc_loss(lp, tg, (8, 0, 0), (3, 0, 1), zero_infinity=True),
        (lp, tg),
    )


@scenario
def nll_1d_input(C, rec):
    run_loss(
        C,
        rec,
        lambda x, t: F.nll_loss(x, t, weight=torch.ones(5) * 2, reduction="none"),
        (leaf(5), torch.tensor(3)),
    )


@scenario
def nll_1d_input_mean_ignored(C, rec):
    run_loss(C, rec, lambda x, t: F.nll_loss(x, t, ignore_index=3), (leaf(5), torch.tensor(3)))


@scenario
def ce_nonleaf_view_input(C, rec):
    w = leaf(5, 5)

    def f(x, t):
        logits = (x @ w)[:, ::2]
        return F.cross_entropy(logits, t, label_smoothing=0.3)

    run_loss(C, rec, f, (leaf(4, 5), targets(4, n=3)))
    rec("gw", w.grad)


@_err
def err_bcel_bool_target():
    return (lambda x, t: F.binary_cross_entropy_with_logits(x, t)), (
        leaf(4),
        torch.tensor([True, False, True, True]),
    )


@_err
def err_bcel_long_target():
    return (lambda x, t: F.binary_cross_entropy_with_logits(x, t)), (
        leaf(4),
        torch.tensor([1, 0, 1, 1]),
    )


@_err
def err_bce_long_target():
    return (lambda x, t: F.binary_cross_entropy(x.sigmoid(), t)), (
        leaf(4),
        torch.tensor([1, 0, 1, 1]),
    )


@_err
def err_ce_weight_f64():
    return (lambda x, t: F.cross_entropy(x, t, weight=torch.ones(5, dtype=torch.float64))), (
        leaf(4, 5),
        targets(4),
    )


@_err
def err_ce_f64_weight_f32():
    return (
        lambda x, t: F.cross_entropy(x.double(), t, weight=torch.ones(5, dtype=torch.float32))
    ), (leaf(4, 5), targets(4))


@_err
def err_nll_float_target():
    return (lambda x, t: F.nll_loss(x, t)), (leaf(4, 5), torch.rand(4, 5))


@_err
def err_kl_shape_mismatch():
    return (lambda x, t: F.kl_div(x, t, reduction="batchmean")), (leaf(4, 5), torch.rand(4, 4))


@_err
def err_huber_negative_delta():
    return (lambda x, t: F.huber_loss(x, t, delta=-1.0)), (leaf(4), torch.rand(4))


@_err
def err_smooth_l1_negative_beta():
    return (lambda x, t: F.smooth_l1_loss(x, t, beta=-1.0)), (leaf(4), torch.rand(4))


@_err
def err_ctc_fp16():
    lp = F.log_softmax(leaf(8, 2, 5, rg=False), -1).half().requires_grad_()
    tg = targets(2, 3, n=4) + 1
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8), (3, 3))), (lp, tg)


@_err
def err_ctc_targets_float():
    lp = F.log_softmax(leaf(8, 2, 5, rg=False), -1).requires_grad_()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8), (3, 3))), (lp, torch.ones(2, 3))


@_err
def err_multi_margin_p3():
    return (lambda x, t: F.multi_margin_loss(x, t, p=3)), (leaf(4, 5), targets(4))


@_err
def err_gaussian_var_shape_3d():
    return (lambda x, t, v: F.gaussian_nll_loss(x, t, v)), (
        leaf(2, 4, 3),
        leaf(2, 4, 3, rg=False),
        torch.ones(2, 3),
    )


# ============================================================================================
# round 4: non-finite values, invalid arguments


def _nan_row(x, row=1):
    x = x.detach().clone()
    x[row] = float("nan")
    return x.requires_grad_()


@per_reduction
def ce_nan_row_ignored(red):
    t = targets(4)
    t[1] = -100
    return (lambda x, t: F.cross_entropy(x, t, reduction=red)), (_nan_row(leaf(4, 5)), t)


@per_reduction
def ce_nan_row_ignored_smooth_weight(red):
    t = targets(4)
    t[1] = -100
    w = leaf(5, seed=3, rg=False).abs() + 0.1
    return (lambda x, t: F.cross_entropy(x, t, weight=w, label_smoothing=0.1, reduction=red)), (
        _nan_row(leaf(4, 5)),
        t,
    )


@per_reduction
def nll_nan_ignored(red):
    t = targets(4)
    t[1] = 2
    return (lambda x, t: F.nll_loss(x, t, ignore_index=2, reduction=red)), (_nan_row(leaf(4, 5)), t)


@per_reduction
def nll_nan_non_target_class(red):  # a NaN in a column no target picks
    x = leaf(4, 5).detach().clone()
    x[:, 4] = float("nan")
    t = targets(4, n=4)
    return (lambda x, t: F.nll_loss(x, t, reduction=red)), (x.requires_grad_(), t)


@per_reduction
def nll_inf_weight_zero(red):
    x = leaf(4, 5).detach().clone()
    x[0, 2] = float("-inf")
    t = torch.tensor([2, 0, 1, 3])
    w = torch.ones(5)
    w[2] = 0
    return (lambda x, t: F.nll_loss(x, t, weight=w, reduction=red)), (x.requires_grad_(), t)


@per_reduction
def ce_inf_logit(red):
    x = leaf(4, 5).detach().clone()
    x[0, 1] = float("inf")
    x[2, 3] = float("-inf")
    return (lambda x, t: F.cross_entropy(x, t, reduction=red)), (
        x.requires_grad_(),
        torch.tensor([1, 0, 3, 2]),
    )


@per_reduction
def ce_probs_nan(red):
    p = torch.softmax(leaf(4, 5, seed=2, rg=False), -1)
    p[1, 1] = float("nan")
    return (lambda x, p: F.cross_entropy(x, p, reduction=red)), (leaf(4, 5), p)


@per_reduction
def bcel_nan_inf(red):
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), 1.0], dtype=fdt()).requires_grad_()
    t = torch.tensor([1.0, 1.0, 0.0, float("nan")], dtype=fdt())
    return (
        lambda x, t: F.binary_cross_entropy_with_logits(
            x, t, pos_weight=torch.tensor(2.0), reduction=red
        )
    ), (x, t)


@per_reduction
def mse_inf(red):
    x = torch.tensor([float("inf"), 1.0, 2.0], dtype=fdt()).requires_grad_()
    t = torch.tensor([float("inf"), float("nan"), 2.0], dtype=fdt())
    return (lambda x, t: F.mse_loss(x, t, reduction=red) + F.smooth_l1_loss(x, t, reduction=red)), (
        x,
        t,
    )


@per_reduction
def kl_inf(red):
    x = torch.tensor(
        [[float("-inf"), -1.0, -0.5], [-1.0, -2.0, float("nan")]], dtype=fdt()
    ).requires_grad_()
    t = torch.tensor([[0.0, 0.5, 0.5], [0.2, 0.8, 0.0]], dtype=fdt())
    return (lambda x, t: F.kl_div(x, t, reduction=red)), (x, t)


@_err
def err_bce_input_nan():
    return (lambda x, t: F.binary_cross_entropy(x, t)), (
        torch.tensor([0.2, float("nan"), 0.5]),
        torch.tensor([0.0, 1.0, 0.5]),
    )


@_err
def err_bce_target_nan():
    return (lambda x, t: F.binary_cross_entropy(x, t)), (
        torch.tensor([0.2, 0.3, 0.5]),
        torch.tensor([0.0, float("nan"), 0.5]),
    )


@_err
def err_bce_target_negative():
    return (lambda x, t: F.binary_cross_entropy(x, t)), (
        torch.tensor([0.2, 0.3, 0.5]),
        torch.tensor([0.0, -0.5, 0.5]),
    )


@_err
def err_ce_reduction_invalid():
    return (lambda x, t: F.cross_entropy(x, t, reduction="avg")), (leaf(4, 5), targets(4))


@_err
def err_bcel_reduction_invalid():
    return (lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="avg")), (
        leaf(4),
        torch.rand(4),
    )


@_err
def err_ctc_reduction_invalid():
    lp, tg = _ctc_inputs()
    return (lambda lp, tg: F.ctc_loss(lp, tg, (8, 8, 8), (3, 2, 1), reduction="avg")), (lp, tg)


@_err
def err_margin_ranking_reduction_invalid():
    return (lambda a, b: F.margin_ranking_loss(a, b, torch.ones(4), reduction="batchmean")), (
        leaf(4),
        leaf(4, seed=2),
    )


@_err
def err_triplet_distance_margin_nonpositive():
    return (lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=0.0)), (
        leaf(4, 2),
        leaf(4, 2, seed=2),
        leaf(4, 2, seed=3),
    )


@_err
def err_smooth_l1_direct_negative_beta():
    return (lambda x, t: torch._C._nn.smooth_l1_loss(x, t, 1, -0.5)), (leaf(4), torch.rand(4))


@_err
def err_smooth_l1_module_negative_beta():
    m = nn.SmoothL1Loss(beta=-0.1, reduction="none")
    return (lambda x, t: m(x, t)), (leaf(4), torch.rand(4))


@_err
def err_smooth_l1_mixed_dtype_negative_beta():
    return (lambda x, t: F.smooth_l1_loss(x, t, beta=-1.0)), (
        leaf(4),
        torch.rand(4, dtype=torch.float64),
    )


@_err
def err_ce_kdim_weight_f16():
    return (lambda x, t: F.cross_entropy(x, t, weight=torch.ones(4, dtype=torch.float16))), (
        leaf(2, 4, 3),
        targets(2, 3, n=4),
    )


@per_reduction
def float64_inputs(red):
    x = leaf(4, 5).detach().double().requires_grad_()
    w = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def f(x, t):
        return F.cross_entropy(
            x, t, weight=w, label_smoothing=0.1, reduction=red
        ) + F.multi_margin_loss(x, t, weight=w, reduction=red)

    return f, (x, targets(4))


# ============================================================================================
# round 5: functorch, dynamic=True, grad scaler, accumulation


@scenario
def per_sample_grads_vmap(C, rec):
    model = nn.Linear(4, 3).to(fdt())
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss_fn(p, x, t):
        out = torch.func.functional_call(model, p, (x.unsqueeze(0),))
        return F.cross_entropy(out, t.unsqueeze(0), label_smoothing=0.1)

    f = torch.func.vmap(torch.func.grad(loss_fn), in_dims=(None, 0, 0))
    g = C(f)(params, leaf(5, 4, rg=False), targets(5, n=3))
    rec("g", g)


@scenario
def func_grad_of_losses(C, rec):
    def loss_fn(x, t, tb):
        return (
            F.nll_loss(x.log_softmax(-1), t, weight=torch.ones(4, dtype=x.dtype) * 2)
            + F.binary_cross_entropy(x.sigmoid(), tb)
            + F.smooth_l1_loss(x, tb, beta=0.5)
            + F.kl_div(x.log_softmax(-1), tb.softmax(-1), reduction="batchmean")
        )

    tb = torch.rand(3, 4, generator=torch.Generator().manual_seed(2)).to(fdt())
    rec("g", C(torch.func.grad(loss_fn))(leaf(3, 4, rg=False), targets(3, n=4), tb))


@scenario
def dynamic_true_ce_kdim(C, rec):
    w = torch.tensor([1.0, 0.5, 2.0, 1.0])
    f = C(
        lambda x, t: F.cross_entropy(x, t, weight=w, ignore_index=255, label_smoothing=0.1),
        dynamic=True,
    )
    for i, (n, hw) in enumerate(((2, 3), (3, 5), (1, 2))):
        x = leaf(n, 4, hw, hw, seed=i)
        t = targets(n, hw, hw, n=4, seed=i)
        t[0, 0, 0] = 255
        out = f(x, t)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", x.grad)


@scenario
def dynamic_true_ctc(C, rec):
    f = C(lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl, reduction="sum"), dynamic=True)
    for i, (T, S) in enumerate(((8, 3), (12, 5))):
        lp, tg = _ctc_inputs(T=T, S=S, seed=i)
        out = f(lp, tg, torch.tensor([T, T - 2, 3]), torch.tensor([S, 2, 1]))
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", lp.grad)


@scenario
def grad_scaler_fp16_step(C, rec):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)

    def fwd(x, t):
        with torch.autocast("cpu", dtype=torch.float16):
            return F.cross_entropy(model(x), t, label_smoothing=0.1)

    cf = C(fwd)
    for i in range(2):
        opt.zero_grad()
        loss = cf(leaf(6, 4, seed=i, rg=False).float(), targets(6, n=3, seed=i))
        rec(f"l{i}", loss)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        rec(f"w{i}", model[0].weight.detach())


@scenario
def grad_accumulation(C, rec):
    torch.manual_seed(0)
    model = nn.Linear(4, 3).to(fdt())
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)

    def micro(x, t):
        loss = crit(model(x), t) / 3
        loss.backward()
        return loss.detach()

    cm = C(micro)
    for i in range(3):
        rec(f"l{i}", cm(leaf(4, 4, seed=i, rg=False), targets(4, n=3, seed=i)))
    rec("g", model.weight.grad)


@scenario
def retain_graph_two_backwards(C, rec):
    x = leaf(4, 5)
    t = targets(4)
    out = C(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2) + F.multi_margin_loss(x, t))(
        x, t
    )
    out.backward(retain_graph=True)
    rec("g1", x.grad.clone())
    out.backward()
    rec("g2", x.grad)


@scenario
def weights_grad_none_when_frozen(C, rec):
    """A loss's weight tensor that does not require grad: its .grad stays None; the logits'
    gradient flows; the targets' (float probabilities) None."""
    model = nn.Linear(4, 3).to(fdt())
    w = torch.ones(3, dtype=fdt())
    p = torch.softmax(leaf(5, 3, seed=2, rg=False), -1)

    def f(x, p):
        return F.cross_entropy(model(x), p, weight=w, label_smoothing=0.1)

    out = C(f)(leaf(5, 4, rg=False), p)
    out.backward()
    rec("gw", model.weight.grad)
    rec("w", w.grad)
    rec("p", p.grad)


# ============================================================================================
# round 6: every loss in half precision, and with a target of another dtype


def _lowp_losses(t_dt):
    def mk(x, kind):
        n, c = x.shape
        tb = torch.rand(n, c, generator=torch.Generator().manual_seed(2)).to(t_dt)
        ti = targets(n, n=c)
        y = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0).to(t_dt)
        return {
            "nll_w": lambda x: F.nll_loss(
                x, ti, weight=torch.rand(c, generator=torch.Generator().manual_seed(4)).to(x.dtype)
            ),
            "bce": lambda x: F.binary_cross_entropy(x.sigmoid(), tb, weight=tb),
            "bcel_pw": lambda x: F.binary_cross_entropy_with_logits(
                x, tb, pos_weight=torch.ones(c, dtype=t_dt) * 2
            ),
            "l1": lambda x: F.l1_loss(x, tb, reduction="none"),
            "huber": lambda x: F.huber_loss(x, tb, delta=0.5, reduction="none"),
            "smoothl1": lambda x: F.smooth_l1_loss(x, tb, beta=0.5),
            "poisson": lambda x: F.poisson_nll_loss(x, tb, full=True),
            "poisson_rate": lambda x: F.poisson_nll_loss(
                x.abs(), tb * 4, log_input=False, reduction="none"
            ),
            "gaussian": lambda x: F.gaussian_nll_loss(x, tb, tb + 0.5, full=True),
            "soft_margin": lambda x: F.soft_margin_loss(x, tb, reduction="none"),
            "msl": lambda x: F.multilabel_soft_margin_loss(x, tb, weight=torch.ones(c, dtype=t_dt)),
            "mm": lambda x: F.multi_margin_loss(x, ti, p=2, weight=torch.ones(c, dtype=x.dtype)),
            "mlm": lambda x: F.multilabel_margin_loss(x, torch.zeros(n, c, dtype=torch.long)),
            "mr": lambda x: F.margin_ranking_loss(x[:, 0], x[:, 1], y, margin=0.1),
            "hinge": lambda x: F.hinge_embedding_loss(x, y[:, None].expand(n, c), reduction="none"),
            "cosine": lambda x: F.cosine_embedding_loss(x, tb, y),
            "triplet": lambda x: F.triplet_margin_loss(
                x, x.roll(1, 0), x.roll(2, 0), reduction="none"
            ),
            "kl_lt": lambda x: F.kl_div(
                x.log_softmax(-1), tb.log(), log_target=True, reduction="batchmean"
            ),
            "ce_probs_w": lambda x: F.cross_entropy(
                x, tb.softmax(-1), weight=torch.ones(c, dtype=x.dtype), label_smoothing=0.1
            ),
            "ce_kdim": lambda x: F.cross_entropy(
                x.view(n // 2, 2, c).transpose(1, 2), ti.view(n // 2, 2), label_smoothing=0.1
            ),
        }[kind]

    return mk


LOWP_KINDS = [
    "nll_w",
    "bce",
    "bcel_pw",
    "l1",
    "huber",
    "smoothl1",
    "poisson",
    "poisson_rate",
    "gaussian",
    "soft_margin",
    "msl",
    "mm",
    "mlm",
    "mr",
    "hinge",
    "cosine",
    "triplet",
    "kl_lt",
    "ce_probs_w",
    "ce_kdim",
]


def _lowp(kind, x_dt, t_dt):
    def sc(C, rec):
        x = leaf(6, 4).detach().to(x_dt).requires_grad_()
        f = _lowp_losses(t_dt)(x, kind)
        run_loss(C, rec, f, (x,))

    return sc


for _k in LOWP_KINDS:
    for _xd, _td, _nm in (
        (torch.bfloat16, torch.bfloat16, "bf16"),
        (torch.float16, torch.float16, "f16"),
        (torch.bfloat16, torch.float32, "bf16_f32t"),
        (torch.float32, torch.bfloat16, "f32_bf16t"),
    ):
        SCENARIOS[f"lowp_{_k}_{_nm}"] = _lowp(_k, _xd, _td)


# ============================================================================================
# round 7: a bad batch later in training (the program already compiled)


def _attempt(rec, label, thunk):
    try:
        rec(label, thunk())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


@scenario
def bad_target_at_step2_train_step(C, rec):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(fdt())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss.detach()

    cs = C(step)
    for i in range(3):
        y = targets(5, n=3, seed=i)
        if i == 1:
            y[2] = 3
        _attempt(rec, f"l{i}", lambda i=i, y=y: cs(leaf(5, 4, seed=i, rg=False), y))
        rec(f"w{i}", model[0].weight.detach())
        rec(f"g{i}", model[0].weight.grad)


@scenario
def bad_target_at_step2_model_compiled(C, rec):
    torch.manual_seed(0)
    seg = Seg().to(fdt())
    cm = C(seg)
    for i in range(3):
        y = targets(2, 6, 6, seed=5 + i)
        y[:, :1] = 255
        if i == 1:
            y[1, 3, 3] = 7
        x = leaf(2, 3, 6, 6, seed=i, rg=False)
        _attempt(rec, f"l{i}", lambda x=x, y=y: cm(x, y)[0])
        rec(f"rm{i}", seg.bn.running_mean)
        rec(f"nb{i}", seg.bn.num_batches_tracked)


@scenario
def bad_ctc_lengths_later(C, rec):
    f = C(lambda lp, tg, il, tl: F.ctc_loss(lp, tg, il, tl))
    lp, tg = _ctc_inputs()
    for i, (il, tl) in enumerate(
        (
            ([8, 7, 6], [3, 2, 1]),
            ([8, 9, 6], [3, 2, 1]),
            ([8, 7, 6], [3, 4, 1]),
            ([8, 7, 6], [3, -1, 1]),
            ([8, 8, 8], [1, 1, 1]),
        )
    ):
        _attempt(rec, f"o{i}", lambda il=il, tl=tl: f(lp, tg, torch.tensor(il), torch.tensor(tl)))


@scenario
def bad_bce_values_later(C, rec):
    lin = nn.Linear(3, 3).to(fdt())
    f = C(lambda x, t: F.binary_cross_entropy(torch.sigmoid(lin(x)), t))
    for i, bad in enumerate((None, 1.2, -0.1, float("nan"), None)):
        t = torch.rand(4, 3, generator=torch.Generator().manual_seed(i)).to(fdt())
        if bad is not None:
            t[1, 1] = bad
        _attempt(rec, f"o{i}", lambda i=i, t=t: f(leaf(4, 3, seed=i, rg=False), t))


@scenario
def bad_multi_margin_and_nll_later(C, rec):
    f = C(lambda x, t: (F.multi_margin_loss(x, t), F.nll_loss(x, t, ignore_index=-1)))
    x = leaf(4, 5)
    for i, tt in enumerate(([0, 1, 2, 3], [0, -1, 2, 3], [0, 1, 5, 3], [0, 1, -2, 3])):
        _attempt(rec, f"o{i}", lambda tt=tt: f(x, torch.tensor(tt)))


@scenario
def detection_positives_mask(C, rec):
    """Box regression over the positive anchors only (``pred[pos]``): a batch without any."""
    head = nn.Linear(4, 4).to(fdt())

    def f(feats, boxes, labels):
        pred = head(feats)
        pos = labels > 0
        reg = F.smooth_l1_loss(
            pred[pos], boxes[pos], beta=1 / 9, reduction="sum"
        ) / pos.sum().clamp(min=1)
        reg_mean = F.huber_loss(pred[pos], boxes[pos])
        cls = F.binary_cross_entropy_with_logits(pred[:, 0], pos.to(pred.dtype))
        return reg, reg_mean, cls

    cf = C(f)
    for i, npos in enumerate((3, 0, 2)):
        labels = torch.zeros(6, dtype=torch.long)
        labels[:npos] = 1
        out = cf(leaf(6, 4, seed=i, rg=False), leaf(6, 4, seed=10 + i, rg=False), labels)
        rec(f"o{i}", out)
        (out[0] + out[2]).backward()
        rec(f"g{i}", head.weight.grad)


# ============================================================================================
# round 8: the torch.* and ATen spellings, more empty shapes


@scenario
def torch_namespace_losses(C, rec):
    x = leaf(4, 3)
    tb = torch.rand(4, 3, generator=torch.Generator().manual_seed(2)).to(fdt())
    y = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=fdt())

    def f(x, tb):
        return (
            torch.binary_cross_entropy_with_logits(
                x, tb, None, torch.ones(3, dtype=x.dtype) * 2, 1
            ),
            torch.kl_div(x.log_softmax(1), tb, 2, True),
            torch.poisson_nll_loss(x, tb, True, True, 1e-8, 0),
            torch.cosine_embedding_loss(x, tb, y, 0.1, 1),
            torch.margin_ranking_loss(x[:, 0], x[:, 1], y, 0.2, 2),
            torch.hinge_embedding_loss(x, y[:3].expand(4, 3), 1.0, 0),
            torch.triplet_margin_loss(x, tb, x.flip(0), 1.0, 2.0, 1e-6, True, 1),
            torch.nn.functional.nll_loss(x.log_softmax(1), torch.tensor([0, 2, 1, 1])),
            torch._C._nn.nll_loss_nd(x.log_softmax(1), torch.tensor([0, 2, 1, 1]), None, 1, -100),
            torch._C._nn.cross_entropy_loss(x, torch.tensor([0, 2, 1, 1]), None, 1, -100, 0.1),
        )

    outs = C(f)(x, tb)
    rec("o", outs)
    sum(o.sum() for o in outs).backward()
    rec("g", x.grad)


@_err
def err_aten_multi_margin_oob():
    return (lambda x, t: torch._C._nn.multi_margin_loss(x, t, 1, 1.0, None, 1)), (
        leaf(4, 5),
        torch.tensor([0, 1, 5, 2]),
    )


@_err
def err_aten_multilabel_margin_oob():
    return (lambda x, t: torch._C._nn.multilabel_margin_loss(x, t, 1)), (
        leaf(2, 4),
        torch.tensor([[0, 4, -1, 0], [1, -1, 0, 0]]),
    )


@_err
def err_torch_ctc_negative_lengths():
    lp, tg = _ctc_inputs()
    return (
        lambda lp, tg: torch.ctc_loss(
            lp, tg, torch.tensor([8, 8, 8]), torch.tensor([3, -1, 1]), 0, 1, False
        )
    ), (lp, tg)


@_err
def err_aten_cross_entropy_oob():
    return (lambda x, t: torch._C._nn.cross_entropy_loss(x, t, None, 1, -100, 0.1)), (
        leaf(4, 5),
        torch.tensor([0, 1, 5, 2]),
    )


@_err
def err_torch_bce_oob():
    return (
        (lambda x, t: torch.binary_cross_entropy(x, t)),
        (torch.tensor([0.5, 1.5]), torch.tensor([0.5, 0.5]))
        if hasattr(torch, "binary_cross_entropy")
        else (lambda x, t: torch._C._nn.binary_cross_entropy(x, t)),
        (torch.tensor([0.5, 1.5]), torch.tensor([0.5, 0.5])),
    )


def _empty2(kind):
    def sc(C, rec):
        fns = {
            "ce_kdim": (
                lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
                (leaf(2, 4, 0), torch.zeros(2, 0, dtype=torch.long)),
            ),
            "nll_kdim_w": (
                lambda x, t: F.nll_loss(x, t, weight=torch.ones(4)),
                (leaf(2, 4, 0, 3), torch.zeros(2, 0, 3, dtype=torch.long)),
            ),
            "ce_probs_kdim": (
                lambda x, t: F.cross_entropy(x, t),
                (leaf(2, 4, 0), torch.zeros(2, 4, 0)),
            ),
            "ctc_n0": (
                lambda lp, tg: F.ctc_loss(
                    lp, tg, torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
                ),
                (leaf(5, 0, 4), torch.zeros(0, 3, dtype=torch.long)),
            ),
            "mlm": (
                lambda x, t: F.multilabel_margin_loss(x, t),
                (leaf(0, 4), torch.zeros(0, 4, dtype=torch.long)),
            ),
            "ce_none": (
                lambda x, t: F.cross_entropy(x, t, reduction="none"),
                (leaf(0, 4), torch.zeros(0, dtype=torch.long)),
            ),
            "bcel_pw": (
                lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=torch.ones(4)),
                (leaf(0, 4), torch.zeros(0, 4)),
            ),
            "huber_sum": (
                lambda x, t: F.huber_loss(x, t, reduction="sum"),
                (leaf(0, 4), torch.zeros(0, 4)),
            ),
            "bce_w": (
                lambda x, t: F.binary_cross_entropy(x.sigmoid(), t, weight=torch.ones(4)),
                (leaf(0, 4), torch.zeros(0, 4)),
            ),
        }
        f, inputs = fns[kind]
        run_loss(C, rec, f, inputs)

    return sc


for _k in [
    "ce_kdim",
    "nll_kdim_w",
    "ce_probs_kdim",
    "ctc_n0",
    "mlm",
    "ce_none",
    "bcel_pw",
    "huber_sum",
    "bce_w",
]:
    SCENARIOS[f"empty2_{_k}"] = _empty2(_k)


@scenario
def dyn_batch_goes_empty(C, rec):
    f = C(
        lambda x, t: (
            F.mse_loss(x, t),
            F.smooth_l1_loss(x, t),
            F.cross_entropy(x, t.argmax(1) if t.numel() else t.long().sum(1)),
        )
    )
    for i, n in enumerate((4, 3, 0, 2)):
        x = leaf(n, 3, seed=i)
        t = leaf(n, 3, seed=10 + i, rg=False)
        out = f(x, t)
        rec(f"o{i}", out)
        sum(out).backward()
        rec(f"g{i}", x.grad)


@per_reduction
def ctc_long_sequence(red):
    lp, tg = _ctc_inputs(T=150, N=2, C=6, S=40, seed=3)
    return (lambda lp, tg: F.ctc_loss(lp, tg, (150, 120), (40, 31), reduction=red)), (lp, tg)


@scenario
def ctc_blank_in_targets(C, rec):
    lp, tg = _ctc_inputs()
    tg[0, 1] = 0
    run_loss(
        C, rec, lambda lp, tg: F.ctc_loss(lp, tg, (8, 8, 8), (3, 2, 1), reduction="none"), (lp, tg)
    )


@scenario
def ctc_raw_logits_grad_none_reduction(C, rec):
    x = (leaf(8, 3, 5).detach() * 3).requires_grad_()
    tg = targets(3, 3, n=4) + 1
    run_loss(
        C,
        rec,
        lambda x, tg: F.ctc_loss(x, tg, (8, 6, 7), (3, 1, 2), reduction="none", zero_infinity=True),
        (x, tg),
    )


@scenario
def ctc_unbatched_targets_1d_tuple(C, rec):
    lp = F.log_softmax(leaf(7, 5, rg=False), -1).requires_grad_()
    run_loss(
        C,
        rec,
        lambda lp, tg: F.ctc_loss(lp, tg, (7,), (3,), reduction="sum"),
        (lp, torch.tensor([1, 3, 3])),
    )


# ============================================================================================
# round 9: transformers' loss functions


@scenario
def hf_causal_lm_loss_num_items(C, rec):
    from transformers.loss.loss_utils import ForCausalLMLoss

    head = nn.Linear(6, 7).to(fdt())

    def f(h, labels, n):
        return ForCausalLMLoss(head(h).to(torch.bfloat16), labels, 7, num_items_in_batch=n)

    labels = targets(2, 5, n=7)
    labels[0, :2] = -100
    cf = C(f)
    for i, n in enumerate((torch.tensor(7), torch.tensor(9))):
        out = cf(leaf(2, 5, 6, seed=i, rg=False), labels, n)
        rec(f"o{i}", out)
        out.backward()
    rec("g", head.weight.grad)


@scenario
def hf_qa_loss_clamped_positions(C, rec):
    from transformers.loss.loss_utils import ForQuestionAnsweringLoss

    def f(s, e, sp, ep):
        return ForQuestionAnsweringLoss(s, e, sp, ep)

    s, e = leaf(3, 6), leaf(3, 6, seed=2)
    run_loss(C, rec, f, (s, e, torch.tensor([[1], [7], [5]]), torch.tensor([[2], [9], [6]])))


@scenario
def hf_ctc_loss(C, rec):
    from transformers.loss.loss_utils import ForCTCLoss

    x = leaf(2, 10, 5)
    labels = torch.tensor([[1, 2, 3, -100], [4, 4, -100, -100]])

    def f(x, labels, ll):
        return ForCTCLoss(x, labels, ll, blank_token_id=0, zero_infinity=True)

    run_loss(C, rec, f, (x, labels, torch.tensor([10, 7])))


@scenario
def hf_semantic_seg_loss(C, rec):
    from transformers.loss.loss_utils import ForSemanticSegmentationLoss

    labels = targets(2, 8, 8, n=4)
    labels[:, :2] = 255
    run_loss(
        C,
        rec,
        lambda x, a, lab: ForSemanticSegmentationLoss(x, lab, auxiliary_logits=a),
        (leaf(2, 4, 4, 4), leaf(2, 4, 4, 4, seed=2), labels),
    )


@scenario
def hf_seq_cls_problem_types(C, rec):
    from types import SimpleNamespace

    from transformers.loss.loss_utils import ForSequenceClassificationLoss

    for i, (nl, lab) in enumerate(
        ((1, leaf(4, 1, rg=False)), (3, targets(4, n=3)), (3, torch.rand(4, 3).to(fdt())))
    ):
        cfg = SimpleNamespace(num_labels=nl, problem_type=None)
        x = leaf(4, nl, seed=i)
        out = C(lambda lab, x, cfg=cfg: ForSequenceClassificationLoss(lab, x, cfg))(lab, x)
        rec(f"o{i}", out)
        out.backward()
        rec(f"g{i}", x.grad)
        rec(f"pt{i}", cfg.problem_type)


# ============================================================================================
# round 10: channels_last inputs of the 2-d losses (eager's CPU nll_loss2d backward refuses
# a non-contiguous gradient buffer)


@per_reduction
def nll_channels_last_direct(red):
    x = leaf(2, 4, 3, 3).detach().to(memory_format=torch.channels_last).requires_grad_()
    return (lambda x, t: F.nll_loss(x, t, reduction=red)), (x, targets(2, 3, 3, n=4))


@per_reduction
def nll_log_softmax_channels_last(red):
    x = leaf(2, 4, 3, 3).detach().to(memory_format=torch.channels_last).requires_grad_()
    return (lambda x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction=red, weight=torch.ones(4))), (
        x,
        targets(2, 3, 3, n=4),
    )


@per_reduction
def nll_permuted_nhwc_logits(red):
    x = leaf(2, 3, 3, 4)
    return (lambda x, t: F.nll_loss(x.permute(0, 3, 1, 2), t, reduction=red)), (
        x,
        targets(2, 3, 3, n=4),
    )


@per_reduction
def nll_permuted_then_log_softmax(red):
    x = leaf(2, 3, 3, 4)
    return (lambda x, t: F.nll_loss(x.log_softmax(-1).permute(0, 3, 1, 2), t, reduction=red)), (
        x,
        targets(2, 3, 3, n=4),
    )


@scenario
def seg_model_channels_last_nll(C, rec):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 1).to(fdt()).to(memory_format=torch.channels_last)
    x = leaf(2, 3, 3, 3, rg=False).to(memory_format=torch.channels_last)
    t = targets(2, 3, 3, n=4)

    def f(x, t):
        return F.nll_loss(conv(x), t), F.cross_entropy(conv(x), t, label_smoothing=0.1)

    a, b = C(f)(x, t)
    rec("a", a)
    rec("b", b)
    b.backward()
    rec("gw", conv.weight.grad)
    _attempt(rec, "ga", lambda: a.backward())


@scenario
def nll_channels_last_no_grad(C, rec):
    x = leaf(2, 4, 3, 3).detach().to(memory_format=torch.channels_last)
    rec("o", C(lambda x, t: F.nll_loss(x, t, reduction="none"))(x, targets(2, 3, 3, n=4)))


@per_reduction
def nll_3d_transposed(red):
    x = leaf(2, 5, 4)
    return (lambda x, t: F.nll_loss(x.transpose(1, 2), t, reduction=red)), (x, targets(2, 5, n=4))


@per_reduction
def nll_5d_channels_last_3d(red):
    x = leaf(2, 4, 2, 3, 3).detach().to(memory_format=torch.channels_last_3d).requires_grad_()
    return (lambda x, t: F.nll_loss(x, t, reduction=red)), (x, targets(2, 2, 3, 3, n=4))


@per_reduction
def ce_5d_channels_last_3d(red):
    x = leaf(2, 4, 2, 3, 3).detach().to(memory_format=torch.channels_last_3d).requires_grad_()
    return (lambda x, t: F.cross_entropy(x, t, reduction=red)), (x, targets(2, 2, 3, 3, n=4))


@per_reduction
def nll_expanded_input(red):
    x = leaf(2, 4, 1, 3)
    return (lambda x, t: F.nll_loss(x.expand(2, 4, 3, 3), t, reduction=red)), (
        x,
        targets(2, 3, 3, n=4),
    )


# ============================================================================================
# round 11: second derivatives of losses (create_graph through the compiled call)


def _second(kind):
    def sc(C, rec):
        x = leaf(4, 5)
        tb = torch.rand(4, 5, generator=torch.Generator().manual_seed(2)).to(fdt())
        ti = targets(4)
        fns = {
            "ce_smooth_w": lambda x: F.cross_entropy(
                x, ti, weight=tb[0] + 0.5, label_smoothing=0.1
            ),
            "ce_probs": lambda x: F.cross_entropy(x, tb.softmax(1)),
            "nll": lambda x: F.nll_loss(x.log_softmax(1), ti, reduction="sum"),
            "bce": lambda x: F.binary_cross_entropy(x.sigmoid(), tb),
            "bcel_pw": lambda x: F.binary_cross_entropy_with_logits(x, tb, pos_weight=tb[0] + 1),
            "mse": lambda x: F.mse_loss(x, tb),
            "l1": lambda x: F.l1_loss(x * x, tb),
            "smooth_l1": lambda x: F.smooth_l1_loss(x, tb, beta=0.5),
            "huber": lambda x: F.huber_loss(x, tb, delta=0.5),
            "kl": lambda x: F.kl_div(x.log_softmax(1), tb, reduction="batchmean"),
            "poisson": lambda x: F.poisson_nll_loss(x, tb),
            "gaussian": lambda x: F.gaussian_nll_loss(x, tb, x.exp()),
            "soft_margin": lambda x: F.soft_margin_loss(x, tb * 2 - 1),
            "msl": lambda x: F.multilabel_soft_margin_loss(x, tb.round()),
            "mm": lambda x: F.multi_margin_loss(x, ti, p=2),
            "mlm": lambda x: F.multilabel_margin_loss(x, torch.tensor([[1, 0, -1, 0, 0]] * 4)),
            "cosine": lambda x: F.cosine_embedding_loss(x, tb, torch.tensor([1.0, -1, 1, -1])),
            "triplet": lambda x: F.triplet_margin_loss(x, tb, x.flip(0)),
            "hinge": lambda x: F.hinge_embedding_loss(x, tb.round() * 2 - 1),
            "ctc": lambda x: F.ctc_loss(
                x.view(4, 1, 5).log_softmax(-1), torch.tensor([[1, 2]]), (4,), (2,)
            ),
        }
        f = C(fns[kind])
        loss = f(x)
        rec("loss", loss)
        (g,) = torch.autograd.grad(loss, x, create_graph=True)
        rec("g", g)
        (g * tb).sum().backward()
        rec("hvp", x.grad)

    return sc


for _k in [
    "ce_smooth_w", "ce_probs", "nll", "bce", "bcel_pw", "mse", "l1", "smooth_l1", "huber", "kl",
    "poisson", "gaussian", "soft_margin", "msl", "mm", "mlm", "cosine", "triplet", "hinge", "ctc",
]:  # fmt: skip
    SCENARIOS[f"second_{_k}"] = _second(_k)


def main(argv) -> int:
    h.SCENARIOS.clear()
    h.SCENARIOS.update(SCENARIOS)
    return h.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
