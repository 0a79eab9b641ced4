"""Attention as users write it (session 31): ``F.scaled_dot_product_attention`` with every
option, ``nn.MultiheadAttention``, the ``nn.Transformer*`` modules (train and eval, fast paths
included), flex attention, and small GPT/BERT blocks trained a few steps.

    PYTHONPATH=. python scripts/probe_attn31.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_attn31.py   # torch's own

The harness is ``probe_grads26``'s (three runs: compiled and eager in float32, eager with
float64 as the default dtype as the reference); half-precision cases compare with eager
directly (``halfcase``).
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
# Differences that are torch's own (PROBE_BACKEND=aot_eager or eager's other kernels show them).
KNOWN = {
    "sdpa_float_mask_large_negative": "eager's: its CPU flash kernel's backward takes a row of "
    "finfo.min scores as exp(s - lse) = 1 per key (its math kernel, as ours, 1/S)",
    "mha_fastpath_fully_padded_batch": "torch's own: eager's MHA fast path gives NaN for a "
    "fully padded row, Dynamo traces the regular path (sdpa: zeros); aot_eager does the same",
}
sdpa = F.scaled_dot_product_attention


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def attempt(rec, label, thunk):
    try:
        rec(label, thunk())
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        rec(label, e)


def qkv(b=2, hq=2, L=4, S=5, E=8, hk=None, Ev=None, rg=True):
    hk = hq if hk is None else hk
    Ev = E if Ev is None else Ev
    return (
        leaf(b, hq, L, E, seed=1, rg=rg),
        leaf(b, hk, S, E, seed=2, rg=rg),
        leaf(b, hk, S, Ev, seed=3, rg=rg),
    )


def wsum(out, seed=7):
    return (out * h.leaf(*out.shape, seed=seed, rg=False)).sum()


def run_grads(C, rec, fn, inputs, label="", **kw):
    """``fn(*inputs)`` compiled: output, then the gradients of every input (None-ness)."""
    out = C(fn, **kw)(*inputs)
    rec(f"{label}out", out)
    ts = [out] if isinstance(out, torch.Tensor) else [o for o in out if o is not None]
    loss = sum(wsum(t, 7 + i) for i, t in enumerate(ts) if t.requires_grad)
    if isinstance(loss, torch.Tensor):
        loss.backward()
    rec(f"{label}grads", [x.grad if isinstance(x, torch.Tensor) else None for x in inputs])


def mkmod(ctor, seed=0):
    dt = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        torch.manual_seed(seed)
        m = ctor()
    finally:
        torch.set_default_dtype(dt)
    return m.to(dt)


def pgrads(m):
    return {n.replace("_orig_mod.", ""): p.grad for n, p in m.named_parameters()}


def pvals(m):
    return {n.replace("_orig_mod.", ""): p.detach().clone() for n, p in m.named_parameters()}


# ============================================================================================
# F.scaled_dot_product_attention


@scenario
def sdpa_bool_mask_b11s(C, rec):
    q, k, v = qkv()
    m = torch.tensor([[True, True, True, False, False], [True] * 5]).view(2, 1, 1, 5)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, attn_mask=m), (q, k, v))


@scenario
def sdpa_bool_mask_ss_2d(C, rec):
    q, k, v = qkv(L=5)
    m = torch.ones(5, 5, dtype=torch.bool).tril()
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, m), (q, k, v, m))


@scenario
def sdpa_float_mask_2d_grad(C, rec):
    q, k, v = qkv()
    m = leaf(4, 5, seed=4)
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, m), (q, k, v, m))


@scenario
def sdpa_float_mask_b1ls_grad(C, rec):
    q, k, v = qkv()
    m = leaf(2, 1, 4, 5, seed=4)
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, m), (q, k, v, m))


@scenario
def sdpa_float_mask_1hls_grad_only_mask(C, rec):
    q, k, v = qkv(rg=False)
    m = leaf(1, 2, 4, 5, seed=4)
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, m), (q, k, v, m))


@scenario
def sdpa_float_mask_b11s_expanded(C, rec):
    q, k, v = qkv()
    m = leaf(2, 1, 1, 5, seed=4).expand(2, 2, 4, 5)
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, m), (q, k, v, m))


@scenario
def sdpa_causal_l_lt_s(C, rec):
    q, k, v = qkv(L=3, S=6)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))


@scenario
def sdpa_causal_l_gt_s(C, rec):
    q, k, v = qkv(L=6, S=3)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))


@scenario
def sdpa_causal_and_mask_raises(C, rec):
    q, k, v = qkv(L=5, S=5)
    m = torch.ones(5, 5, dtype=torch.bool)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, m, is_causal=True))(q, k, v))


@scenario
def sdpa_scale_values(C, rec):
    q, k, v = qkv()
    for s in (0.0, -0.7, 3.0):
        for x in (q, k, v):
            x.grad = None
        run_grads(C, rec, lambda q, k, v, s=s: sdpa(q, k, v, scale=s), (q, k, v), label=f"{s} ")


@scenario
def sdpa_scale_tensor_item(C, rec):
    q, k, v = qkv()
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, scale=q.shape[-1] ** -0.25), (q, k, v))


@scenario
def sdpa_gqa_causal(C, rec):
    q, k, v = qkv(hq=6, hk=2, L=5, S=5)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=True), (q, k, v))


@scenario
def sdpa_gqa_bool_mask_per_head(C, rec):
    q, k, v = qkv(hq=4, hk=2)
    m = torch.rand(2, 4, 4, 5, generator=torch.Generator().manual_seed(3)) > 0.4
    m[..., 0] = True
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, m, enable_gqa=True), (q, k, v))


@scenario
def sdpa_gqa_float_mask_grad(C, rec):
    q, k, v = qkv(hq=4, hk=1)
    m = leaf(1, 4, 1, 5, seed=4)
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, m, enable_gqa=True), (q, k, v, m))


@scenario
def sdpa_gqa_not_divisible_raises(C, rec):
    q, k, v = qkv(hq=3, hk=2)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, enable_gqa=True))(q, k, v))


@scenario
def sdpa_heads_differ_no_gqa_raises(C, rec):
    q, k, v = qkv(hq=4, hk=2)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v))(q, k, v))


@scenario
def sdpa_gqa_flag_same_heads(C, rec):
    q, k, v = qkv()
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, enable_gqa=True), (q, k, v))


@scenario
def sdpa_fully_masked_bool_rows(C, rec):
    q, k, v = qkv()
    m = torch.ones(2, 2, 4, 5, dtype=torch.bool)
    m[0, :, 1] = False
    m[1, 1, 3] = False
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, attn_mask=m), (q, k, v))


@scenario
def sdpa_fully_masked_float_rows_grad(C, rec):
    q, k, v = qkv()
    m = torch.zeros(2, 1, 4, 5)
    m[:, :, 2] = float("-inf")
    m = m.requires_grad_()
    run_grads(C, rec, lambda q, k, v, m: sdpa(q, k, v, attn_mask=m), (q, k, v, m))


@scenario
def sdpa_fully_masked_kpm_all_keys(C, rec):
    # one batch element whose every key is padding
    q, k, v = qkv()
    m = torch.tensor([[True] * 5, [False] * 5]).view(2, 1, 1, 5)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, attn_mask=m), (q, k, v))


@scenario
def sdpa_float_mask_large_negative(C, rec):
    q, k, v = qkv()
    m = torch.zeros(2, 1, 4, 5)
    m[:, :, 1] = torch.finfo(torch.get_default_dtype()).min
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, attn_mask=m), (q, k, v))


@scenario
def sdpa_float_mask_inf_plus(C, rec):
    q, k, v = qkv()
    m = torch.zeros(4, 5)
    m[1, 2] = float("inf")
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, attn_mask=m), (q, k, v))


@scenario
def sdpa_nan_in_masked_key(C, rec):
    # a masked-out key holding NaN: eager's math multiplies 0 * NaN = NaN
    q, k, v = qkv(rg=False)
    v = v.clone()
    v[:, :, 4] = float("nan")
    m = torch.tensor([True, True, True, True, False])
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, m))(q, k, v))


@scenario
def sdpa_3d(C, rec):
    q, k, v = leaf(3, 4, 8, seed=1), leaf(3, 6, 8, seed=2), leaf(3, 6, 5, seed=3)
    m = torch.rand(4, 6, generator=torch.Generator().manual_seed(2)) > 0.3
    m[:, 0] = True
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, m), (q, k, v))


@scenario
def sdpa_3d_causal(C, rec):
    q, k, v = leaf(3, 4, 8, seed=1), leaf(3, 6, 8, seed=2), leaf(3, 6, 8, seed=3)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))


@scenario
def sdpa_5d(C, rec):
    q, k, v = leaf(2, 2, 2, 4, 8, seed=1), leaf(2, 2, 2, 5, 8, seed=2), leaf(2, 2, 2, 5, 8, seed=3)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v), (q, k, v))


@scenario
def sdpa_2d(C, rec):
    q, k, v = leaf(4, 8, seed=1), leaf(5, 8, seed=2), leaf(5, 8, seed=3)
    attempt(rec, "out", lambda: C(sdpa)(q, k, v))


@scenario
def sdpa_broadcast_batch(C, rec):
    # key/value of batch 1 against queries of batch 2
    q, k, v = leaf(2, 2, 4, 8, seed=1), leaf(1, 2, 5, 8, seed=2), leaf(1, 2, 5, 8, seed=3)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v), (q, k, v))


@scenario
def sdpa_zero_query_len(C, rec):
    q, k, v = qkv(L=0)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v), (q, k, v))


@scenario
def sdpa_zero_key_len(C, rec):
    q, k, v = qkv(S=0)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v))(q, k, v))


@scenario
def sdpa_zero_key_len_grads(C, rec):
    q, k, v = qkv(S=0)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v), (q, k, v))


@scenario
def sdpa_zero_batch(C, rec):
    q, k, v = qkv(b=0)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v), (q, k, v))


@scenario
def sdpa_zero_head_dim(C, rec):
    q, k, v = qkv(E=0, Ev=3)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v))(q, k, v))


@scenario
def sdpa_value_width_differs(C, rec):
    q, k, v = qkv(Ev=3)
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))


@scenario
def sdpa_noncontig_inputs(C, rec):
    x = leaf(2, 5, 3 * 8, seed=1)

    def f(x):
        q, k, v = x.view(2, 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        y = sdpa(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(2, 5, 8)

    run_grads(C, rec, f, (x,))


def _heads_view(dropout_p=0.0, autocast=False, is_causal=True):
    def f(x):
        B, T, C3 = x.shape
        q, k, v = x.view(B, T, 3, 2, C3 // 6).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = sdpa(q, k, v, is_causal=is_causal, dropout_p=dropout_p)
        return y, y.transpose(1, 2).view(B, T, C3 // 3)  # (no .contiguous(): eager's layout)

    return f


@scenario
def sdpa_output_layout_view(C, rec):
    x = leaf(2, 5, 24, seed=1)
    out = C(_heads_view())(x)
    rec("strides", [t.stride() for t in out])
    rec("out", list(out))
    (wsum(out[0]) + wsum(out[1], 3)).backward()
    rec("grad", x.grad)


@scenario
def sdpa_output_layout_view_nograd(C, rec):
    x = leaf(2, 5, 24, seed=1, rg=False)
    with torch.no_grad():
        out = C(_heads_view(is_causal=False))(x)
    rec("strides", [t.stride() for t in out])
    rec("out", list(out))


@scenario
def sdpa_output_layout_view_autocast(C, rec):
    x = leaf(2, 5, 24, seed=1)
    out = C(_heads_view(autocast=True))(x)
    rec("strides", [t.stride() for t in out])
    rec("dtype", [t.dtype for t in out])


@scenario
def sdpa_output_layout_dropout(C, rec):
    x = leaf(2, 5, 24, seed=1)
    attempt(rec, "strides", lambda: [t.stride() for t in C(_heads_view(dropout_p=0.3))(x)])


@scenario
def sdpa_int_mask_raises(C, rec):
    q, k, v = qkv(rg=False)
    m = torch.ones(4, 5, dtype=torch.int64)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, m))(q, k, v))


@scenario
def sdpa_mask_dtype_mismatch_raises(C, rec):
    q, k, v = qkv(rg=False)
    m = torch.zeros(4, 5, dtype=torch.float16)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, m))(q, k, v))


@scenario
def sdpa_mask_bad_shape_raises(C, rec):
    q, k, v = qkv(rg=False)
    m = torch.zeros(3, 5)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, m))(q, k, v))


@scenario
def sdpa_qkv_dtype_mismatch_raises(C, rec):
    q, k, v = qkv(rg=False)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k.half(), v))(q, k, v))


@scenario
def sdpa_int_inputs_raises(C, rec):
    q, k, v = (torch.ones(2, 2, 4, 8, dtype=torch.int64) for _ in range(3))
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v))(q, k, v))


@scenario
def sdpa_dropout_eval_is_identity_p0(C, rec):
    q, k, v = qkv()
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, dropout_p=0.0), (q, k, v))


@scenario
def sdpa_dropout_one(C, rec):
    q, k, v = qkv()
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, dropout_p=1.0))(q, k, v))


@scenario
def sdpa_dropout_statistics(C, rec):
    # q = k = 0: every weight 1/S; v = I: out[i, j] = keep_ij / (1 - p) / S
    S, p = 64, 0.3
    q, k = torch.zeros(4, 2, 64, 8), torch.zeros(4, 2, S, 8)
    v = torch.eye(S).expand(4, 2, S, S).contiguous().requires_grad_()
    out = C(lambda q, k, v: sdpa(q, k, v, dropout_p=p))(q, k, v)
    kept = out * S * (1 - p)
    rec("values are 0 or 1", bool(((kept - 1).abs() < 1e-4).logical_or(kept.abs() < 1e-6).all()))
    frac = (kept.abs() < 1e-6).float().mean().item()
    rec("drop rate near p", abs(frac - p) < 5 * (p * (1 - p) / kept.numel()) ** 0.5)
    out.sum().backward()
    # d out.sum / d v[k, j] = sum_i w_ij (keep_ij / (1-p)) -> the same mask read columnwise
    g = v.grad * S * (1 - p)
    rec(
        "grad is the mask's", bool((g - kept.sum(-2).unsqueeze(-1).expand_as(g)).abs().max() < 1e-3)
    )


@scenario
def sdpa_dropout_same_seed_same_mask(C, rec):
    q, k, v = qkv(L=16, S=16, rg=False)
    f = C(lambda q, k, v: sdpa(q, k, v, dropout_p=0.5))
    torch.manual_seed(3)
    a = f(q, k, v)
    torch.manual_seed(3)
    b = f(q, k, v)
    c = f(q, k, v)
    rec("same", torch.equal(a, b))
    rec("differs", not torch.equal(b, c))


@scenario
def sdpa_dropout_nograd(C, rec):
    q, k, v = qkv(rg=False)
    with torch.no_grad():
        out = C(lambda q, k, v: sdpa(q, k, v, dropout_p=0.5))(q, k, v)
    rec("shape", out.shape)
    rec("dtype", out.dtype)


@scenario
def sdpa_double_backward(C, rec):
    q, k, v = qkv()

    def f(q, k, v):
        out = sdpa(q, k, v, is_causal=True)
        (g,) = torch.autograd.grad(out.sum(), q, create_graph=True)
        return g

    attempt(rec, "out", lambda: C(f)(q, k, v).pow(2).sum())


@scenario
def sdpa_grad_of_outside(C, rec):
    q, k, v = qkv()
    out = C(lambda q, k, v: sdpa(q, k, v))(q, k, v)
    (gq, _gv) = torch.autograd.grad(out.pow(2).sum(), (q, v), create_graph=True)
    rec("gq", gq)
    attempt(rec, "second", lambda: torch.autograd.grad(gq.sum(), k))


@scenario
def sdpa_nograd_inference(C, rec):
    q, k, v = qkv(rg=False)
    with torch.inference_mode():
        rec("out", C(lambda q, k, v: sdpa(q, k, v, is_causal=True))(q, k, v))


@scenario
def sdpa_float64_inputs(C, rec):
    q, k, v = (t.double() for t in qkv(rg=False))
    q.requires_grad_()
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))


@scenario
def sdpa_mask_float64_with_float32(C, rec):
    q, k, v = qkv(rg=False)
    m = torch.zeros(4, 5, dtype=torch.float64)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, m))(q, k, v))


@scenario
def sdpa_in_autocast_region_with_float_mask(C, rec):
    q, k, v = qkv()
    m = leaf(4, 5, seed=4, rg=False)

    def f(q, k, v):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return sdpa(q, k, v, m).float()

    out = C(f)(q, k, v)
    rec("dtype", out.dtype)


# ============================================================================================
# half precision against eager directly

HALF: dict = {}


def halfcase(fn):
    HALF[fn.__name__] = fn
    return fn


@halfcase
def half_sdpa_bool_mask(dt):
    q, k, v = (t.detach().to(dt).requires_grad_() for t in qkv())
    m = torch.tensor([[True, True, True, False, False], [True] * 5]).view(2, 1, 1, 5)
    return lambda q, k, v: sdpa(q, k, v, m), (q, k, v)


@halfcase
def half_sdpa_float_mask(dt):
    q, k, v = (t.detach().to(dt).requires_grad_() for t in qkv())
    m = leaf(2, 1, 4, 5, seed=4).detach().to(dt).requires_grad_()
    return lambda q, k, v, m: sdpa(q, k, v, m), (q, k, v, m)


@halfcase
def half_sdpa_causal_gqa(dt):
    q, k, v = (t.detach().to(dt).requires_grad_() for t in qkv(hq=4, hk=2, L=6, S=6))
    return lambda q, k, v: sdpa(q, k, v, is_causal=True, enable_gqa=True), (q, k, v)


@halfcase
def half_sdpa_fully_masked(dt):
    q, k, v = (t.detach().to(dt).requires_grad_() for t in qkv())
    m = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    m[:, :, 2] = False
    return lambda q, k, v: sdpa(q, k, v, m), (q, k, v)


@halfcase
def half_sdpa_large_scale(dt):
    q, k, v = (t.detach().to(dt).mul(8).requires_grad_() for t in qkv(E=64))
    return lambda q, k, v: sdpa(q, k, v, scale=1.0), (q, k, v)


@halfcase
def half_mha(dt):
    m = nn.MultiheadAttention(8, 2, batch_first=True).to(dt)
    x = leaf(2, 5, 8, seed=1).detach().to(dt).requires_grad_()
    kpm = torch.tensor([[False] * 3 + [True] * 2, [False] * 5])
    return lambda x: m(x, x, x, key_padding_mask=kpm)[0], (x,)


@halfcase
def half_tel_train(dt):
    m = mkmod(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)).to(dt)
    x = leaf(2, 5, 8, seed=1).detach().to(dt).requires_grad_()
    return lambda x: m(x, src_key_padding_mask=_kpm()), (x,)


@halfcase
def half_mha_causal_need_weights(dt):
    m = mkmod(lambda: nn.MultiheadAttention(8, 2)).to(dt)
    x = leaf(5, 2, 8, seed=1).detach().to(dt).requires_grad_()
    am = nn.Transformer.generate_square_subsequent_mask(5, dtype=dt)
    return lambda x: torch.cat([t.flatten() for t in m(x, x, x, attn_mask=am)]), (x,)


def compare_half(name, make, dt) -> str:
    torch._dynamo.reset()
    torch.manual_seed(0)
    fn, inputs = make(dt)
    xs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    rs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    rd = [x.detach().double().requires_grad_(x.requires_grad) for x in inputs]
    try:
        opts = {"options": {"strict": True}} if h.BACKEND == "xla" else {}
        got = torch.compile(fn, backend=h.BACKEND, **opts)(*xs)
    except Exception as e:  # noqa: BLE001
        return f"CRASH {name}[{dt}]: {type(e).__name__}: {str(e)[:300]}"
    exp = fn(*rs)
    if got.dtype != exp.dtype or got.shape != exp.shape:
        return f"DIFF  {name}[{dt}]: {got.dtype}{tuple(got.shape)} vs {exp.dtype}{tuple(exp.shape)}"
    # float64 reference: the module's own weights in double where there are any
    ref = None
    try:
        ref = fn(*rd)
    except Exception:  # noqa: BLE001  (modules of half weights: no double reference)
        ref = exp.double()
    ref = ref.double()
    ge, ee = (got.double() - ref).abs(), (exp.double() - ref).abs()
    if not torch.equal(got.isnan(), exp.isnan()):
        return f"DIFF  {name}[{dt}]: NaN positions\n{got}\n{exp}"
    fin = ref.isfinite()
    eps = torch.finfo(dt).eps
    if (ge[fin].max() if fin.any() else 0) > 2 * max(ee[fin].max() if fin.any() else 0, eps):
        return f"DIFF  {name}[{dt}]: out err {ge[fin].max():.3g} vs eager {ee[fin].max():.3g}"
    ct = torch.randn(exp.shape, generator=torch.Generator().manual_seed(5))
    got.backward(ct.to(dt))
    exp.backward(ct.to(dt))
    for i, (x, r) in enumerate(zip(xs, rs)):
        if (x.grad is None) != (r.grad is None):
            return f"DIFF  {name}[{dt}]: grad {i} None-ness"
        if x.grad is not None:
            if x.grad.dtype != r.grad.dtype:
                return f"DIFF  {name}[{dt}]: grad {i} dtype {x.grad.dtype} vs {r.grad.dtype}"
            if not torch.equal(x.grad.isnan(), r.grad.isnan()):
                return f"DIFF  {name}[{dt}]: grad {i} NaN positions"
            scale = r.grad.double().abs().max().item()
            err = (x.grad.double() - r.grad.double()).abs().nan_to_num().max().item()
            if err > 8 * eps * max(scale, 1):
                return f"DIFF  {name}[{dt}]: grad {i} err {err:.3g} (scale {scale:.3g})"
    return f"ok    {name}[{dt}]"


# ============================================================================================
# nn.MultiheadAttention


def mha_steps(C, rec, ctor, args, kw, modes=("train", "eval", "nograd")):
    m = mkmod(ctor)
    cm = C(m)
    for mode in modes:
        m.train(mode == "train")
        for x in args:
            if isinstance(x, torch.Tensor):
                x.grad = None
        ctx = torch.no_grad() if mode == "nograd" else torch.enable_grad()
        with ctx:
            out = cm(*args, **kw)
        rec(f"{mode} out", list(out) if isinstance(out, tuple) else out)
        if mode != "nograd":
            ts = [o for o in (out if isinstance(out, tuple) else [out]) if o is not None]
            sum(wsum(t, 3 + i) for i, t in enumerate(ts)).backward()
            rec(f"{mode} grads", pgrads(m))
            rec(f"{mode} input grads", [x.grad for x in args if isinstance(x, torch.Tensor)])
            m.zero_grad(set_to_none=True)


def _kpm(B=2, S=5, pad=(2, 0)):
    return torch.tensor([[j >= S - pad[b] for j in range(S)] for b in range(B)])


@scenario
def mha_bf_kpm_float_need_weights_per_head(C, rec):
    x = leaf(2, 5, 8, seed=1)
    kpm = torch.zeros(2, 5).masked_fill(_kpm(), float("-inf"))
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": kpm, "average_attn_weights": False},
    )


@scenario
def mha_bf_kpm_bool_attn_mask_bool_2d(C, rec):
    x = leaf(2, 5, 8, seed=1)
    am = ~torch.ones(5, 5, dtype=torch.bool).tril()
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": _kpm(), "attn_mask": am, "need_weights": False},
    )


@scenario
def mha_bf_attn_mask_3d_float(C, rec):
    x = leaf(2, 5, 8, seed=1)
    am = leaf(4, 5, 5, seed=5, rg=False)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"attn_mask": am},
    )


@scenario
def mha_bf_cross_kdim_vdim_kpm(C, rec):
    q, k, v = leaf(2, 3, 8, seed=1), leaf(2, 5, 6, seed=2), leaf(2, 5, 4, seed=3)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True, kdim=6, vdim=4),
        (q, k, v),
        {"key_padding_mask": _kpm(), "need_weights": False},
    )


@scenario
def mha_bias_kv_zero_attn_need_weights_false(C, rec):
    x = leaf(5, 2, 8, seed=1)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
        (x, x, x),
        {"need_weights": False, "attn_mask": ~torch.ones(5, 5, dtype=torch.bool).tril()},
    )


@scenario
def mha_bias_kv_float_kpm(C, rec):
    x = leaf(5, 2, 8, seed=1)
    kpm = torch.zeros(2, 5).masked_fill(_kpm(), -1e4)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 4, add_bias_kv=True),
        (x, x, x),
        {"key_padding_mask": kpm},
    )


@scenario
def mha_fastpath_kpm_selfattn(C, rec):
    # eval + no_grad + batch_first + self attention: _native_multi_head_attention
    x = leaf(2, 5, 8, seed=1, rg=False)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": _kpm()},
        modes=("nograd",),
    )


@scenario
def mha_fastpath_kpm_need_weights_false(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": _kpm(), "need_weights": False},
        modes=("nograd",),
    )


@scenario
def mha_fastpath_fully_padded_batch(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": _kpm(pad=(5, 1)), "need_weights": False},
        modes=("nograd",),
    )


@scenario
def mha_fastpath_attn_mask_and_kpm(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    am = ~torch.ones(5, 5, dtype=torch.bool).tril()
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": _kpm(), "attn_mask": am, "need_weights": False},
        modes=("nograd",),
    )


@scenario
def mha_fastpath_cross_attn_same_kv(C, rec):
    q, kv = leaf(2, 3, 8, seed=1, rg=False), leaf(2, 5, 8, seed=2, rg=False)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (q, kv, kv),
        {"key_padding_mask": _kpm(), "need_weights": False},
        modes=("nograd",),
    )


@scenario
def mha_fastpath_float_kpm(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    kpm = torch.zeros(2, 5).masked_fill(_kpm(), float("-inf"))
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {"key_padding_mask": kpm},
        modes=("nograd",),
    )


@scenario
def mha_fastpath_causal(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        (x, x, x),
        {
            "attn_mask": nn.Transformer.generate_square_subsequent_mask(5),
            "is_causal": True,
            "need_weights": False,
        },
        modes=("nograd",),
    )


@scenario
def mha_dropout_train_determinism(C, rec):
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True))
    x = leaf(2, 6, 8, seed=1)
    cm = C(m)
    torch.manual_seed(1)
    a, wa = cm(x, x, x)
    torch.manual_seed(1)
    b, wb = cm(x, x, x)
    rec("same out", torch.equal(a, b))
    rec("same weights", torch.equal(wa, wb))
    # dropped weights are exact zeros; kept ones are scaled by 2
    m.eval()
    _, w_eval = cm(x, x, x)
    rec("weights zero or scaled", bool(((wa == 0) | ((wa - 2 * w_eval).abs() < 1e-5)).all()))
    (a.sum() + wa.sum()).backward()
    rec("grad None-ness", {n: p.grad is None for n, p in m.named_parameters()})


@scenario
def mha_need_weights_is_causal_no_mask_raises(C, rec):
    x = leaf(2, 5, 8, seed=1)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, batch_first=True))
    attempt(rec, "out", lambda: C(m)(x, x, x, is_causal=True))


@scenario
def mha_kpm_wrong_dtype_raises(C, rec):
    x = leaf(2, 5, 8, seed=1)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, batch_first=True))
    kpm = torch.zeros(2, 5, dtype=torch.int64)
    attempt(rec, "out", lambda: C(m)(x, x, x, key_padding_mask=kpm))


@scenario
def mha_mask_types_mismatch(C, rec):
    # bool kpm with float attn_mask: eager warns and converts
    x = leaf(5, 2, 8, seed=1)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2))
    am = leaf(5, 5, seed=3, rg=False)
    out = C(m)(x, x, x, key_padding_mask=_kpm(), attn_mask=am)
    rec("out", list(out))


@scenario
def mha_unbatched_kpm(C, rec):
    x = leaf(5, 8, seed=1)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2))
    out = C(m)(x, x, x, key_padding_mask=torch.tensor([False, False, False, True, True]))
    rec("out", list(out))
    (out[0].sum() + out[1].sum()).backward()
    rec("grads", pgrads(m))


@scenario
def mha_unbatched_fastpath(C, rec):
    x = leaf(5, 8, seed=1, rg=False)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, batch_first=True)).eval()
    with torch.no_grad():
        out = C(m)(x, x, x, need_weights=False)
    rec("out", list(out))


@scenario
def mha_separate_proj_weights(C, rec):
    # kdim != embed_dim: q_proj_weight/k_proj_weight/v_proj_weight, in train and eval
    q, kv = leaf(2, 4, 8, seed=1), leaf(2, 5, 3, seed=2)
    mha_steps(
        C,
        rec,
        lambda: nn.MultiheadAttention(8, 4, batch_first=True, kdim=3, vdim=3, bias=False),
        (q, kv, kv),
        {"attn_mask": ~torch.ones(4, 5, dtype=torch.bool).tril()},
    )


# ============================================================================================
# nn.Transformer*


def layers_steps(C, rec, ctor, args, kw, modes=("train", "eval", "nograd")):
    mha_steps(C, rec, ctor, args, kw, modes)


@scenario
def te_mask_check_false_eval_nested(C, rec):
    enc = lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        2,
        enable_nested_tensor=True,
        mask_check=False,
    )
    x = leaf(2, 5, 8, seed=1, rg=False)
    layers_steps(C, rec, enc, (x,), {"src_key_padding_mask": _kpm()}, modes=("nograd",))


@scenario
def te_eval_grad_kpm(C, rec):
    # eval with grad on: no fast path in eager
    enc = lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        2,
        enable_nested_tensor=False,
    )
    x = leaf(2, 5, 8, seed=1)
    layers_steps(C, rec, enc, (x,), {"src_key_padding_mask": _kpm()}, modes=("eval",))


@scenario
def tel_fastpath_kpm_nograd(C, rec):
    # one layer, eval, no grad: _transformer_encoder_layer_fwd with a padding mask
    x = leaf(2, 5, 8, seed=1, rg=False)
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        (x,),
        {"src_key_padding_mask": _kpm()},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_float_kpm_nograd(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    kpm = torch.zeros(2, 5).masked_fill(_kpm(), float("-inf"))
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        (x,),
        {"src_key_padding_mask": kpm},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_src_mask_nograd(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation="gelu"),
        (x,),
        {"src_mask": nn.Transformer.generate_square_subsequent_mask(5), "is_causal": True},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_bool_src_mask_nograd(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True),
        (x,),
        {"src_mask": ~torch.ones(5, 5, dtype=torch.bool).tril()},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_fully_padded(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        (x,),
        {"src_key_padding_mask": _kpm(pad=(5, 0))},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_finite_float_src_mask(C, rec):
    # the kernel reads a float mask as bool: every nonzero entry drops its key
    x = leaf(2, 5, 8, seed=1, rg=False)
    am = torch.zeros(5, 5)
    am[:, 3] = -2.0
    am[1, 1] = 0.5
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        (x,),
        {"src_mask": am},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_finite_float_kpm_and_mask(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    kpm = torch.tensor([[0.0, 0.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0, -1e9]])
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=True),
        (x,),
        {"src_key_padding_mask": kpm, "src_mask": leaf(5, 5, seed=3, rg=False).clamp(max=0)},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_3d_src_mask(C, rec):
    x = leaf(2, 5, 8, seed=1, rg=False)
    am = torch.rand(4, 5, 5, generator=torch.Generator().manual_seed(1)) > 0.6
    am[1, 2] = True
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        (x,),
        {"src_mask": am},
        modes=("nograd",),
    )


@scenario
def tel_fastpath_seq1_batch1(C, rec):
    x = leaf(1, 1, 8, seed=1, rg=False)
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        (x,),
        {"src_key_padding_mask": torch.tensor([[False]])},
        modes=("nograd",),
    )


@scenario
def te_fastpath_stack_fully_padded_no_nested(C, rec):
    enc = lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
        2,
        enable_nested_tensor=False,
        norm=nn.LayerNorm(8),
    )
    x = leaf(2, 5, 8, seed=1, rg=False)
    layers_steps(C, rec, enc, (x,), {"src_key_padding_mask": _kpm(pad=(5, 2))}, modes=("nograd",))


@scenario
def te_dynamic_seq_len(C, rec):
    m = mkmod(
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2
        )
    )
    cm = C(m, dynamic=True)
    for T in (5, 7, 3):
        x = leaf(2, T, 8, seed=T)
        kpm = _kpm(S=T, pad=(1, 0))
        out = cm(
            x, mask=nn.Transformer.generate_square_subsequent_mask(T), src_key_padding_mask=kpm
        )
        rec(f"out{T}", out)
        out.sum().backward()
        rec(f"grads{T}", pgrads(m))
        m.zero_grad()


@scenario
def sdpa_dynamic_causal(C, rec):
    f = C(lambda q, k, v: sdpa(q, k, v, is_causal=True), dynamic=True)
    for L, S in ((3, 5), (4, 7), (6, 6)):
        q, k, v = qkv(L=L, S=S)
        out = f(q, k, v)
        rec(f"out{L}{S}", out)
        out.sum().backward()
        rec(f"g{L}{S}", [q.grad, k.grad, v.grad])


@scenario
def tel_fastpath_bf16(C, rec):
    m = mkmod(lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, activation="gelu"))
    m = m.to(torch.bfloat16).eval()
    x = leaf(2, 5, 8, seed=1, rg=False).to(torch.bfloat16)
    with torch.no_grad():
        rec("out", C(m)(x, src_key_padding_mask=_kpm()))


@scenario
def mha_fastpath_fp16(C, rec):
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, batch_first=True)).to(torch.float16).eval()
    x = leaf(2, 5, 8, seed=1, rg=False).to(torch.float16)
    with torch.no_grad():
        rec("out", list(C(m)(x, x, x, key_padding_mask=_kpm())))


@scenario
def tel_fastpath_inference_mode(C, rec):
    m = mkmod(lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)).eval()
    x = leaf(2, 5, 8, seed=1, rg=False)
    kpm = torch.tensor([[0.0, 0.0, 0.0, -1.0, 0.0], [0.0] * 5])
    with torch.inference_mode():
        rec("out", C(m)(x, src_key_padding_mask=kpm))


@scenario
def tel_fastpath_toggled(C, rec):
    m = mkmod(lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)).eval()
    x = leaf(2, 5, 8, seed=1, rg=False)
    kpm = torch.tensor([[0.0, 0.0, 0.0, -1.0, 0.0], [0.0] * 5])
    cm = C(m)
    try:
        with torch.no_grad():
            rec("fast", cm(x, src_key_padding_mask=kpm))
            torch.backends.mha.set_fastpath_enabled(False)
            rec("slow", cm(x, src_key_padding_mask=kpm))
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


@scenario
def mha_float_kpm_requires_grad(C, rec):
    x = leaf(2, 5, 8, seed=1)
    kpm = leaf(2, 5, seed=4)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, batch_first=True))
    out, w = C(m)(x, x, x, key_padding_mask=kpm)
    rec("out", [out, w])
    (wsum(out) + wsum(w, 3)).backward()
    rec("grads", [x.grad, kpm.grad, pgrads(m)])


@scenario
def mha_float_attn_mask_requires_grad_need_weights_false(C, rec):
    x = leaf(2, 5, 8, seed=1)
    am = leaf(5, 5, seed=4)
    m = mkmod(lambda: nn.MultiheadAttention(8, 2, batch_first=True))
    out, w = C(m)(x, x, x, attn_mask=am, need_weights=False)
    rec("out", out)
    rec("w", w)
    wsum(out).backward()
    rec("grads", [x.grad, am.grad, pgrads(m)])


@scenario
def sdpa_dynamic_scale(C, rec):
    import math

    def f(q, k, v):
        return sdpa(q, k, v, scale=1.0 / math.sqrt(q.size(-1)) * 0.5)

    cf = C(f, dynamic=True)
    for E in (8, 6):
        q, k, v = qkv(E=E)
        run_grads(lambda g, **kw: cf, rec, f, (q, k, v), label=f"{E} ")


@scenario
def sdpa_gqa_3d(C, rec):
    q, k, v = leaf(4, 3, 8, seed=1), leaf(2, 5, 8, seed=2), leaf(2, 5, 8, seed=3)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, enable_gqa=True))(q, k, v))


@scenario
def sdpa_gqa_kv_heads_differ(C, rec):
    q, k, v = leaf(1, 4, 3, 8, seed=1), leaf(1, 2, 5, 8, seed=2), leaf(1, 1, 5, 8, seed=3)
    attempt(rec, "out", lambda: C(lambda q, k, v: sdpa(q, k, v, enable_gqa=True))(q, k, v))


@scenario
def sdpa_dropout_causal_l_ne_s_grads_none(C, rec):
    q, k, v = qkv(L=3, S=6)
    k.requires_grad_(False)
    out = C(lambda q, k, v: sdpa(q, k, v, is_causal=True, dropout_p=0.2))(q, k, v)
    rec("shape", out.shape)
    out.sum().backward()
    rec("None-ness", [t.grad is None for t in (q, k, v)])


@scenario
def sdpa_bool_mask_requires_grad_float_other(C, rec):
    # the mask a comparison of a tensor that requires grad
    q, k, v = qkv()
    lengths = leaf(2, seed=5)

    def f(q, k, v, lengths):
        m = torch.arange(5)[None, :] < (lengths.abs() * 3 + 1)[:, None]
        return sdpa(q, k, v, m[:, None, None, :])

    run_grads(C, rec, f, (q, k, v, lengths))


@scenario
def sdpa_out_then_inplace(C, rec):
    q, k, v = qkv()

    def f(q, k, v):
        y = sdpa(q, k, v)
        y.mul_(2)
        return y

    run_grads(C, rec, f, (q, k, v))


@scenario
def sdpa_strided_mask_view(C, rec):
    q, k, v = qkv(L=5, S=5)
    big = leaf(10, 10, seed=6, rg=False)
    m = big[::2, 1::2]  # a non-contiguous view
    run_grads(C, rec, lambda q, k, v: sdpa(q, k, v, m), (q, k, v))


@scenario
def tel_dropout_train_determinism(C, rec):
    m = mkmod(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.3, batch_first=True))
    x = leaf(2, 5, 8, seed=1)
    cm = C(m)
    torch.manual_seed(4)
    a = cm(x, src_key_padding_mask=_kpm())
    torch.manual_seed(4)
    b = cm(x, src_key_padding_mask=_kpm())
    rec("same", torch.equal(a, b))
    rec("shape", a.shape)
    a.sum().backward()
    rec("grad None-ness", {n: p.grad is None for n, p in m.named_parameters()})


@scenario
def tdl_tgt_is_causal_no_mask(C, rec):
    tgt, mem = leaf(2, 4, 8, seed=1), leaf(2, 5, 8, seed=2)
    layers_steps(
        C,
        rec,
        lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
        (tgt, mem),
        {"tgt_is_causal": True, "tgt_key_padding_mask": _kpm(S=4)},
    )


@scenario
def td_stack_float_masks(C, rec):
    tgt, mem = leaf(4, 2, 8, seed=1), leaf(5, 2, 8, seed=2)
    dec = lambda: nn.TransformerDecoder(
        nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation="gelu"),
        2,
        norm=nn.LayerNorm(8),
    )
    kpm = torch.zeros(2, 5).masked_fill(_kpm(), float("-inf"))
    layers_steps(
        C,
        rec,
        dec,
        (tgt, mem),
        {
            "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4),
            "memory_key_padding_mask": kpm,
            "memory_mask": leaf(4, 5, seed=9, rg=False),
        },
    )


@scenario
def transformer_bf_norm_first_callable(C, rec):
    src, tgt = leaf(2, 5, 8, seed=1), leaf(2, 4, 8, seed=2)
    layers_steps(
        C,
        rec,
        lambda: nn.Transformer(
            8, 2, 2, 1, 16, dropout=0.0, batch_first=True, norm_first=True, activation=F.gelu
        ),
        (src, tgt),
        {
            "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4),
            "tgt_is_causal": True,
            "src_key_padding_mask": _kpm(),
            "memory_key_padding_mask": _kpm(),
            "tgt_key_padding_mask": _kpm(S=4, pad=(1, 0)),
        },
    )


@scenario
def mask_generated_inside(C, rec):
    m = mkmod(lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True))

    def f(x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        return m(x, src_mask=mask, is_causal=True)

    x = leaf(2, 5, 8, seed=1)
    run_grads(C, rec, f, (x,))
    rec("grads", pgrads(m))


@scenario
def mask_generated_inside_dtype(C, rec):
    def f(n):
        return nn.Transformer.generate_square_subsequent_mask(n.shape[0], dtype=torch.float16)

    attempt(rec, "mask", lambda: C(f)(torch.zeros(6)))


# ============================================================================================
# flex attention


@scenario
def flex_causal_block_mask_alibi(C, rec):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    slopes = torch.tensor([0.5, 0.25])

    def alibi(s, b, h, i, j):
        return s - slopes[h] * (i - j)

    def causal(b, h, i, j):
        return j <= i

    bm = create_block_mask(causal, None, None, 8, 8, "cpu")
    q, k, v = qkv(L=8, S=8, rg=False)
    attempt(
        rec,
        "out",
        lambda: C(lambda q, k, v: flex_attention(q, k, v, alibi, block_mask=bm, scale=0.5))(
            q, k, v
        ),
    )


@scenario
def flex_padding_mask_from_lengths(C, rec):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    lengths = torch.tensor([5, 8])

    def pad(b, h, i, j):
        return j < lengths[b]

    bm = create_block_mask(pad, 2, None, 8, 8, "cpu")
    q, k, v = qkv(L=8, S=8, rg=False)
    attempt(
        rec,
        "out",
        lambda: C(lambda q, k, v: flex_attention(q, k, v, block_mask=bm, return_lse=True))(q, k, v),
    )


@scenario
def flex_block_mask_created_inside(C, rec):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def f(q, k, v):
        bm = create_block_mask(lambda b, h, i, j: j <= i, None, None, 8, 8, "cpu")
        return flex_attention(q, k, v, block_mask=bm)

    q, k, v = qkv(L=8, S=8, rg=False)
    attempt(rec, "out", lambda: C(f)(q, k, v))


@scenario
def flex_fully_masked_rows(C, rec):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    bm = create_block_mask(lambda b, h, i, j: (i > 3) & (j <= i), None, None, 8, 8, "cpu")
    q, k, v = qkv(L=8, S=8, rg=False)
    attempt(
        rec,
        "out",
        lambda: C(lambda q, k, v: flex_attention(q, k, v, block_mask=bm, return_lse=True))(q, k, v),
    )


# ============================================================================================
# user-style blocks, trained


class GPTBlock(nn.Module):
    def __init__(self, d=16, h=4, dropout=0.0):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(
            nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d)
        )
        self.dropout = dropout

    def forward(self, x, pad=None):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        if pad is None:
            y = sdpa(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        else:
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            mask = causal[None, None] & ~pad[:, None, None, :]
            mask = mask | torch.eye(T, dtype=torch.bool)  # every row attends to itself
            y = sdpa(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, D))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=11, d=16, n=2, T=8, dropout=0.0):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(GPTBlock(d, dropout=dropout) for _ in range(n))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, idx, pad=None, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x, pad)
        logits = self.head(self.ln(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)


def _tokens(seed, B=3, T=8, vocab=11):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (B, T), generator=g)


def train(C, rec, model, batch, steps=3, compile_step=False):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    cm = C(model)
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = batch(cm, i)
        loss.backward()
        rec(f"loss{i}", loss)
        rec(f"grads{i}", pgrads(model))
        opt.step()
        rec(f"params{i}", pvals(model))


@scenario
def user_gpt_causal_train(C, rec):
    model = mkmod(lambda: TinyGPT())

    def batch(cm, i):
        idx = _tokens(i)
        return cm(idx, targets=idx.roll(-1, 1))[1]

    train(C, rec, model, batch)


@scenario
def user_gpt_padding_train(C, rec):
    model = mkmod(lambda: TinyGPT())
    pad = torch.tensor([[False] * 8, [False] * 5 + [True] * 3, [False] * 2 + [True] * 6])

    def batch(cm, i):
        idx = _tokens(i)
        tgt = idx.roll(-1, 1).masked_fill(pad, -1)
        return cm(idx, pad, targets=tgt)[1]

    train(C, rec, model, batch)


@scenario
def user_gpt_eval_generate(C, rec):
    model = mkmod(lambda: TinyGPT()).eval()
    cm = C(model)
    idx = _tokens(0, B=2, T=3)
    with torch.no_grad():
        for _ in range(4):
            logits = cm(idx)
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], 1)
    rec("idx", idx)


class BertLike(nn.Module):
    def __init__(self, vocab=13, d=16, n=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(1, 8, d) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d, 4, 32, dropout=0.0, batch_first=True, activation="gelu"
        )
        self.enc = nn.TransformerEncoder(layer, n, enable_nested_tensor=False)
        self.cls = nn.Linear(d, 3)

    def forward(self, ids):
        pad = ids == 0
        h = self.enc(self.emb(ids) + self.pos[:, : ids.shape[1]], src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(1) / keep.sum(1)
        return self.cls(pooled)


def _ids(seed):
    ids = _tokens(seed, B=4, T=8, vocab=13).clamp(min=1)
    ids[1, 6:] = 0
    ids[2, 3:] = 0
    return ids


@scenario
def user_bert_kpm_train(C, rec):
    model = mkmod(lambda: BertLike())
    labels = torch.tensor([0, 1, 2, 1])

    def batch(cm, i):
        return F.cross_entropy(cm(_ids(i)), labels)

    train(C, rec, model, batch)


@scenario
def user_bert_kpm_eval_nograd(C, rec):
    model = mkmod(lambda: BertLike()).eval()
    cm = C(model)
    with torch.no_grad():
        for i in range(2):
            rec(f"logits{i}", cm(_ids(i)))


@scenario
def user_bert_nested_eval_nograd(C, rec):
    # enable_nested_tensor=True (the default): eager's fast path
    model = mkmod(lambda: BertLike())
    model.enc = mkmod(
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, activation="gelu"), 2
        )
    )
    model.eval()
    cm = C(model)
    with torch.no_grad():
        for i in range(2):
            rec(f"logits{i}", cm(_ids(i)))


@scenario
def user_mha_pooling_train(C, rec):
    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Parameter(torch.randn(1, 1, 8))
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.0)
            self.out = nn.Linear(8, 1)

        def forward(self, x, pad):
            q = self.q.expand(x.shape[0], -1, -1)
            y, w = self.attn(q, x, x, key_padding_mask=pad)
            return self.out(y.squeeze(1)).squeeze(-1), w

    model = mkmod(Pool)
    pad = _kpm(B=3, S=6, pad=(0, 2, 5))
    tgt = torch.tensor([0.5, -1.0, 2.0])

    def batch(cm, i):
        y, w = cm(leaf(3, 6, 8, seed=i, rg=False), pad)
        return F.mse_loss(y, tgt) + w.pow(2).mean()

    train(C, rec, model, batch)


class LlamaAttn(nn.Module):
    def __init__(self, d=16, hq=4, hk=2):
        super().__init__()
        self.hq, self.hk, self.hd = hq, hk, d // hq
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * hk * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, pad):
        B, T, _ = x.shape
        q = self.q(x).view(B, T, self.hq, self.hd).transpose(1, 2)
        k, v = self.kv(x).view(B, T, 2, self.hk, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        # HF's 4-D float mask: causal and padding, finfo.min where masked
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        allowed = causal[None, None] & ~pad[:, None, None, :]
        mask = torch.zeros(allowed.shape, dtype=x.dtype).masked_fill(
            ~allowed, torch.finfo(x.dtype).min
        )
        y = sdpa(q, k, v, attn_mask=mask.to(q.dtype), enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(B, T, -1))


@scenario
def user_llama_gqa_autocast_train(C, rec):
    model = mkmod(lambda: nn.Sequential(nn.Linear(6, 16), nn.Identity()))
    attn = mkmod(LlamaAttn)
    head = mkmod(lambda: nn.Linear(16, 1))
    full = nn.ModuleDict({"emb": model, "attn": attn, "head": head})
    pad = torch.tensor([[True, False, False, False, False], [False] * 5])  # left padding

    def fwd(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = full["emb"](x)
            h = full["attn"](h, pad)
            return full["head"](h).float().squeeze(-1)

    def batch(cm, i):
        y = cm(leaf(2, 5, 6, seed=i, rg=False))
        return (y[:, 1:] ** 2).mean()  # (the padded position's output unused)

    fwd_c = C(fwd)
    opt = torch.optim.AdamW(full.parameters(), lr=1e-2)
    for i in range(2):
        opt.zero_grad()
        loss = batch(fwd_c, i)
        loss.backward()
        rec(f"loss{i}", loss)
        rec(f"grads{i}", pgrads(full))
        opt.step()


@scenario
def sdpa_vmap_over_batch(C, rec):
    q, k, v = qkv()

    def f(q, k, v):
        return torch.func.vmap(lambda a, b, c: sdpa(a, b, c, is_causal=True))(q, k, v)

    run_grads(C, rec, f, (q, k, v))


def compare(name, fn) -> str:
    """``probe_grads26.compare`` with the compiled run strict (an op or graph left to eager
    raises instead of passing unnoticed), unless PROBE_LENIENT is set."""
    strict = h.BACKEND == "xla" and not os.environ.get("PROBE_LENIENT")

    def C(f, **kw):
        if strict:
            kw.setdefault("options", {"strict": True})
        return torch.compile(f, backend=h.BACKEND, **kw)

    got = h.observations(fn, C, torch.float32)
    exp = h.observations(fn, lambda f, **kw: f, torch.float32)
    ref = h.observations(fn, lambda f, **kw: f, torch.float64)
    if len(ref) != len(exp):
        ref = exp
    for (lg, g), (le, e), (_, r) in zip(got, exp, ref):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} {g[:3]} (xla) vs {le!r} {e[:3]} (eager)"
        d = h.same(g, e, r, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return f"ok    {name}"


def main(argv) -> int:
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = total = 0
    for n in names:
        total += 1
        try:
            line = compare(n, SCENARIOS[n])
        except Exception as e:  # noqa: BLE001  (a failure of the probe itself)
            line = f"CRASH {n}: {type(e).__name__}: {e}"
        if not line.startswith("ok"):
            if n in KNOWN:
                line = f"known {n}: {KNOWN[n]}"
            else:
                bad += 1
        print(line, flush=True)
    for n, make in HALF.items():
        if argv and not any(a in n for a in argv):
            continue
        for dt in (torch.bfloat16, torch.float16):
            total += 1
            try:
                line = compare_half(n, make, dt)
            except Exception as e:  # noqa: BLE001
                line = f"CRASH {n}[{dt}]: {type(e).__name__}: {e}"
            if not line.startswith("ok"):
                bad += 1
            print(line, flush=True)
    print(f"{total - bad}/{total} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
