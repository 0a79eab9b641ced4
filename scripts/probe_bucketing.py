"""Probe bucketing for silent wrong answers: many small user-style functions, each compiled with
``buckets="pow2"`` and ``dynamic=True``, run on several sizes and compared strictly with eager
(values with NaN positions, dtype, shape, strides, errors, inputs written in place).

    PYTHONPATH=. python scripts/probe_bucketing.py [substring ...]

Prints one line per case: ``ok``, ``DIFF`` (with the first difference) or ``CRASH``, and which
dims were bucketed; the cases that differ are what ``tests/test_bucketing_parity.py`` covers.
"""

from __future__ import annotations

import math
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F

import torch2xla

SIZES = (3, 5, 6, 9, 3)
g = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=g)


def nonfinite(*shape):
    x = randn(*shape)
    flat = x.view(-1)
    flat[:: max(1, flat.numel() // 3)] = float("inf")
    flat[1 :: max(1, flat.numel() // 2)] = float("nan")
    return x


def ints(hi, *shape):
    return torch.randint(0, hi, shape, generator=g)


W = randn(10, 4)
E = torch.nn.Embedding(10, 4)


def _sdpa(q, k, v, **kw):
    return F.scaled_dot_product_attention(q, k, v, **kw)


# name -> (fn, make_args(n))
CASES: dict = {}


def case(name, make):
    def deco(fn):
        CASES[name] = (fn, make)
        return fn

    return deco


x3 = lambda n: (randn(2, n, 4),)
x2 = lambda n: (randn(2, n),)
neg2 = lambda n: (-randn(2, n).abs() - 1,)


# -- class 1: scans and tril/triu over a flattened dim with a padded inner factor ------------
case("flat_cumsum_exp", x2)(lambda x: x.exp().reshape(-1).cumsum(0))
case("flat_cumprod", lambda n: (randn(2, n) + 3,))(lambda x: x.reshape(-1).cumprod(0))
case("flat_cummax", neg2)(lambda x: x.reshape(-1).cummax(0))
case("flat_cummin", lambda n: (randn(2, n).abs() + 1,))(lambda x: x.reshape(-1).cummin(0))
case("flat_logcumsumexp", x2)(lambda x: x.reshape(-1).logcumsumexp(0))
case("flat3_cumsum", x3)(lambda x: x.exp().flatten(1).cumsum(1))
case("outer_flat_cumsum", x3)(lambda x: x.exp().reshape(2, -1).cumsum(1))  # (s, 4): fine
case("cumsum_seq", x3)(lambda x: x.exp().cumsum(1))


def _outer(x, op):
    m = x.reshape(-1)
    return op(m.unsqueeze(1), m.unsqueeze(0))


case("flat_tril", x2)(lambda x: torch.tril(_outer(x, torch.add), -1))
case("flat_triu", x2)(lambda x: torch.triu(_outer(x, torch.mul), 2))
case("flat_tril0", x2)(lambda x: torch.tril(_outer(x, torch.mul)))
case("flat_tril_mixed", x2)(lambda x: torch.tril(x.reshape(-1).unsqueeze(1) * x[0].unsqueeze(0)))
case("flat_outer_tril", x3)(lambda x: torch.tril(x.reshape(-1, 4) @ x.reshape(-1, 4).t(), -2))


# -- class 2: causal attention over flattened padded keys -------------------------------------
@case("causal_flat_keys", lambda n: (randn(2, n, 4),))
def _(x):
    q = x.reshape(1, 1, -1, 4)  # keys: batch x seq flattened
    return _sdpa(q, q, q, is_causal=True)


@case("causal_tril_mask_flat", lambda n: (randn(2, n, 4),))
def _(x):
    q = x.reshape(-1, 4)
    n = q.shape[0]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    att = (q @ q.t()).masked_fill(~mask, float("-inf")).softmax(-1)
    return att @ q


@case("causal_arange_mask_flat", lambda n: (randn(2, n, 4),))
def _(x):
    q = x.reshape(-1, 4)
    i = torch.arange(q.shape[0])
    mask = i[:, None] >= i[None, :]
    return (q @ q.t()).masked_fill(~mask, float("-inf")).softmax(-1) @ q


@case("causal_sdpa", lambda n: (randn(2, n, 4),))
def _(x):
    q = x[:, None]
    return _sdpa(q, q, q, is_causal=True)


@case("causal_tril_softmax", lambda n: (randn(2, n, 4),))
def _(x):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    att = (x @ x.transpose(1, 2)).masked_fill(~mask, float("-inf")).softmax(-1)
    return att @ x


# -- class 3: non-finite values in padded keys/values -----------------------------------------
@case("sdpa_log_values", lambda n: (randn(2, n, 4).abs() + 0.5,))
def _(x):
    q = x[:, None]
    return _sdpa(q, q, q.log() - (1 / (x[:, None] - x[:, None])).nan_to_num(0, 0, 0))


@case("sdpa_inf_in_pads", lambda n: (randn(2, n, 4).abs() + 0.5,))
def _(x):
    q = x[:, None]
    v = 1 / q  # the padded zeros become inf
    return _sdpa(q, q, v)


@case("sdpa_causal_inf_in_pads", lambda n: (randn(2, n, 4).abs() + 0.5,))
def _(x):
    q = x[:, None]
    return _sdpa(q, 1 / q, 1 / q, is_causal=True)


@case("sdpa_keys_inf_in_pads", lambda n: (randn(2, n, 4).abs() + 0.5,))
def _(x):
    q = x[:, None]
    return _sdpa(q, 1 / q, q)


@case("attn_manual_inf_values", lambda n: (randn(2, n, 4).abs() + 0.5,))
def _(x):
    att = (x @ x.transpose(1, 2)).softmax(-1)
    return att @ (1 / x)


@case("causal_manual_inf_values", lambda n: (randn(2, n, 4).abs() + 0.5,))
def _(x):
    n = x.shape[1]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    att = (x @ x.transpose(1, 2)).masked_fill(~mask, float("-inf")).softmax(-1)
    return att @ (1 / x)


case("sum_inf_in_pads", x3)(lambda x: (1 / x.exp().sub(1).abs().add(1).log()).sum(1))
case("gram_inf_in_pads", x3)(lambda x: (1 / x).transpose(1, 2) @ (1 / x))
case("nonfinite_inputs_sum", lambda n: (nonfinite(2, n, 4),))(lambda x: x.sum(1))
case("nonfinite_inputs_softmax", lambda n: (nonfinite(2, n, 4),))(lambda x: x.softmax(1))
case("nonfinite_inputs_max", lambda n: (nonfinite(2, n, 4),))(lambda x: x.amax(1))
case("nonfinite_inputs_mm", lambda n: (nonfinite(2, n, 4),))(lambda x: x.transpose(1, 2) @ x)
case("prod_inf", x3)(lambda x: (1 / x).prod(1))
case("logsumexp_log", lambda n: (randn(2, n, 4).abs(),))(lambda x: x.log().logsumexp(1))
case("norm_inf", x3)(lambda x: torch.linalg.vector_norm(1 / x, dim=1))
case("nansum", x3)(lambda x: (x.log()).nansum(1))
case("nanmean", x3)(lambda x: (x.log()).nanmean(1))
case("matmul_vec", x3)(lambda x: (1 / x).transpose(1, 2) @ torch.ones(x.shape[1]))
case("einsum_contract", x3)(lambda x: torch.einsum("bsh,bsk->bhk", 1 / x, 1 / x))
case("mv", x2)(lambda x: torch.mv(1 / x, 1 / x[0]))
case("dot", x2)(lambda x: torch.dot(1 / x[0], 1 / x[1]))


# -- class 4: runtime checks reading padded positions -----------------------------------------
case("embedding_minus_one", lambda n: (ints(9, 2, n) + 1,))(lambda i: E(i - 1))
case("index_select_minus_one", lambda n: (ints(9, n) + 1,))(lambda i: W.index_select(0, i - 1))
case("gather_minus_one", lambda n: (randn(2, n, 4), ints(3, 2, n, 4) + 1))(
    lambda x, i: x.gather(2, i - 1)
)
case("advanced_index_minus_one", lambda n: (ints(9, 2, n) + 1,))(lambda i: W[i - 1])
case("int_div", lambda n: (ints(9, 2, n) + 1,))(lambda i: 100 // i)
case("int_remainder", lambda n: (ints(9, 2, n) + 1,))(lambda i: 100 % i)
case("int_div_tensor", lambda n: (ints(9, 2, n), ints(9, 2, n) + 1))(lambda a, b: a // b)
case("one_hot_minus_one", lambda n: (ints(5, 2, n) + 1,))(lambda i: F.one_hot(i - 1, 5))
case("nll_loss_none", lambda n: (randn(n, 5), ints(5, n) + 1))(
    lambda x, t: F.nll_loss(x, t - 1, reduction="none")
)
case("cross_entropy_none", lambda n: (randn(n, 5), ints(5, n) + 1))(
    lambda x, t: F.cross_entropy(x, t - 1, reduction="none")
)
case("scatter_add_minus_one", lambda n: (randn(2, 4), ints(4, 2, n) + 1))(
    lambda x, i: x.scatter_add(1, i - 1, torch.ones(i.shape))
)
case("bce", lambda n: (torch.rand(2, n, generator=g), torch.rand(2, n, generator=g)))(
    lambda p, t: F.binary_cross_entropy(p * 0.5 + 0.25, t, reduction="none")
)
case("take", lambda n: (ints(9, 2, n) + 1,))(lambda i: W.take(i - 1))
case("flat_embedding", lambda n: (ints(9, 2, n) + 1,))(lambda i: E((i - 1).reshape(-1)))
case("flat_targets", lambda n: (randn(2, n, 5), ints(5, 2, n) + 1))(
    lambda x, t: F.cross_entropy(x.reshape(-1, 5), (t - 1).reshape(-1), reduction="none")
)
case("flat_int_div", lambda n: (ints(9, 2, n) + 1,))(lambda i: 100 // i.reshape(-1))
case("embedding_bag_like", lambda n: (ints(9, 2, n) + 1,))(lambda i: E(i - 1).sum(1))


# -- class 5: grad enabled inside the compiled region -----------------------------------------
LIN = torch.nn.Linear(4, 4)


@case("enable_grad_inside", x3)
def _(x):
    with torch.enable_grad():
        y = (1 / x).requires_grad_()
        z = y.exp().sum(1).sum()
        (gr,) = torch.autograd.grad(z, y)
    return gr


@case("enable_grad_linear", lambda n: (randn(2, n, 4),))
def _(x):
    with torch.enable_grad():
        out = LIN(1 / x).sum()
    return out.detach()


# -- class 6: output strides and dtypes -------------------------------------------------------
case("transpose_out", x3)(lambda x: (x * 2).transpose(1, 2))
case("permute_out", x3)(lambda x: (x * 2).permute(2, 0, 1))
case("flat_out", x3)(lambda x: (x * 2).reshape(-1, 4))
case("flat_t_out", x3)(lambda x: (x * 2).reshape(-1, 4).t())
case("expand_out", x2)(lambda x: x.sum(0, keepdim=True).expand(3, -1))
case("unsqueeze_out", x2)(lambda x: (x + 1)[:, None, :])
case("channels_last", lambda n: (randn(2, 3, n, 5).to(memory_format=torch.channels_last),))(
    lambda x: x * 2
)
case("half_sum", lambda n: (randn(2, n, 4).half(),))(lambda x: x.sum(1))
case("int_sum", lambda n: (ints(5, 2, n),))(lambda i: i.sum(1))
case("bool_any", lambda n: (randn(2, n) > 1,))(lambda b: b.any(1))
case("argmax_out", x3)(lambda x: x.argmax(1))
case("flat_argmax", x3)(lambda x: x.argmax())
case("view_of_input", x3)(lambda x: x[:, :, 0])
case("out_and_view", x3)(lambda x: (x.transpose(1, 2), x + 1))
case("slice_last_dim", x3)(lambda x: (x * 1)[..., :2])  # (a known limitation: gaps)
case("t_of_2d", x2)(lambda x: (x + 1).t())
case("matmul_t", x3)(lambda x: (x @ torch.ones(4, 3)).transpose(0, 1))
case("size_int_out", x3)(lambda x: (x * 2, x.shape[1] * 2))

# -- views, reshapes, indexing, in place -----------------------------------------------------
case("split_heads", x3)(lambda x: x.view(2, x.shape[1], 2, 2).transpose(1, 2) * 3)
case("flatten_linear", x3)(lambda x: LIN(x.reshape(-1, 4)).reshape(2, -1, 4))
case("last", x3)(lambda x: x[:, -1])
case("neg_index_select", x3)(lambda x: x.select(1, -2))
case("narrow_first", x3)(lambda x: x.narrow(1, 0, 2))
case("stride2_slice", x3)(lambda x: x[:, ::2])
case("cat_padded", x3)(lambda x: torch.cat([x, x * 2], 1))
case("stack_padded", x3)(lambda x: torch.stack([x, x * 2], 1).sum(1))
case("pad_seq", x3)(lambda x: F.pad(x, (0, 0, 1, 1)))
case("pad_seq_sum", x3)(lambda x: F.pad(x, (0, 0, 1, 1)).exp().sum(1))
case("roll", x3)(lambda x: x.roll(1, 1))
case("where_arange", x3)(lambda x: torch.where(torch.arange(x.shape[1])[:, None] < 2, x, -x))
case("mask_fill_seq", x3)(lambda x: x.masked_fill(x > 0, 1.0).sum(1))
case("sort", x3)(lambda x: x.sort(1).values)
case("topk", x3)(lambda x: x.topk(2, 1).values)
case("mean", x3)(lambda x: x.mean(1))
case("std", x3)(lambda x: x.std(1))
case("layer_norm_h", x3)(lambda x: F.layer_norm(x, (4,)))
case("max_dim", x3)(lambda x: tuple(x.max(1)))
case("min_neg", lambda n: (randn(2, n, 4).abs() + 1,))(lambda x: x.min(1).values)
case("amax_neg", lambda n: (-randn(2, n, 4).abs() - 1,))(lambda x: x.amax(1))
case("all_bool", lambda n: (randn(2, n) > -5,))(lambda b: b.all(1))
case("prod_seq", lambda n: (randn(2, n, 4) + 2,))(lambda x: x.prod(1))
case("count_nonzero", x3)(lambda x: torch.count_nonzero(x, 1))
case("diff", x3)(lambda x: torch.diff(x, dim=1))
case("unfold", x3)(lambda x: x.unfold(1, 2, 1).sum(-1))
case("conv1d_seq", x3)(lambda x: F.conv1d(x.transpose(1, 2), torch.ones(4, 4, 3)))
case("avg_pool_seq", x3)(lambda x: F.avg_pool1d(x.transpose(1, 2), 2))
case("interpolate", x3)(lambda x: F.interpolate(x.transpose(1, 2), scale_factor=2))
case("repeat_interleave", x3)(lambda x: x.repeat_interleave(2, dim=1))
case("repeat", x3)(lambda x: x.repeat(1, 2, 1))
case("tile_flat", x3)(lambda x: x.reshape(-1).repeat(2).cumsum(0))
case("index_arange_rev", x3)(lambda x: x[:, torch.arange(x.shape[1]).flip(0)])
case("index_arange_minus", x3)(lambda x: x[:, torch.arange(x.shape[1]) - 1])
case("index_put_arange", x3)(
    lambda x: torch.zeros(2, x.shape[1], 4).index_put((torch.arange(x.shape[1]),), x[0])
)
case("arange_size_value", x3)(lambda x: x * torch.arange(x.shape[1])[None, :, None] / x.shape[1])
case("linspace_size", x3)(lambda x: x * torch.linspace(0, 1, x.shape[1])[None, :, None])
case("size_float_value", x3)(lambda x: x * math.sqrt(x.shape[1]))
case("numel_value", x3)(lambda x: x / x.numel())
case("full_like_sum", x3)(lambda x: torch.full_like(x, 2.0).sum(1))
case("ones_sum", x3)(lambda x: torch.ones(x.shape[1]).sum() * x)
case("arange_sum", x3)(lambda x: torch.arange(x.shape[1]).sum() + x)
case("arange_float_cumsum", x3)(lambda x: torch.arange(x.shape[1], dtype=torch.float).cumsum(0))
case("randperm_like", x3)(lambda x: x.new_ones(x.shape[1]).cumsum(0))
case("int_index_input", lambda n: (randn(2, 7, 4), ints(7, 2, n)))(
    lambda x, i: x.gather(1, i[..., None].expand(-1, -1, 4))
)
case("index_select_input", lambda n: (randn(7, 4), ints(7, n)))(lambda w, i: w.index_select(0, i))
case("clamp_index", lambda n: (ints(9, 2, n),))(lambda i: W[(i - 1).clamp(min=0)])


@case("inplace_add", lambda n: (randn(2, n, 4),))
def _(x):
    x.add_(1)
    return x.sum(1)


@case("inplace_cumsum_write", lambda n: (randn(2, n, 4),))
def _(x):
    x.copy_(x.exp().cumsum(1))
    return x * 1


@case("inplace_flat", lambda n: (randn(2, n),))
def _(x):
    x.view(-1).copy_(x.reshape(-1).exp().cumsum(0))
    return x


@case("inplace_index_put", lambda n: (randn(2, n, 4), ints(9, n) + 1))
def _(x, i):
    W2 = torch.zeros(10, 4)
    W2.index_put_((i - 1,), x[0], accumulate=True)
    return W2


@case("tril_plain", x3)
def _(x):
    return torch.tril(x @ x.transpose(1, 2), -1).exp().sum(-1)


@case("triu_diag", x3)
def _(x):
    return torch.triu(x @ x.transpose(1, 2), 1)


@case("unique_consecutive_like", lambda n: (ints(3, n),))
def _(i):
    return (i[1:] != i[:-1]).sum()


# -- data-dependent shapes --------------------------------------------------------------------
case("nonzero", x3)(lambda x: torch.nonzero(x > 0))
case("masked_select", x3)(lambda x: x[x > 0])
case("unique", lambda n: (ints(4, 2, n),))(lambda i: torch.unique(i))
case("bool_index_sum", x3)(lambda x: x[x > 0].sum())
case("item_size", x3)(lambda x: x * (x > 0).sum().item())
case("repeat_interleave_tensor", lambda n: (ints(3, n),))(
    lambda r: torch.repeat_interleave(torch.arange(r.shape[0]), r)
)
case("where_one_arg", x3)(lambda x: torch.where(x > 0)[1])
# (with Dynamo capturing them: the ops run in eager inside the graph, around padded pieces)
DATA_DEPENDENT = {"nonzero", "masked_select", "unique", "bool_index_sum", "item_size"}
DATA_DEPENDENT |= {"repeat_interleave_tensor", "where_one_arg", "nonzero_lt", "count_item"}
case("nonzero_lt", x3)(lambda x: torch.nonzero(x < 1))
case("count_item", x3)(lambda x: torch.arange((x < 1).sum().item()) * x.shape[1])


# -- the harness ------------------------------------------------------------------------------
def _leaves(out):
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(out)


def compare(out, ref) -> str | None:
    outs, refs = _leaves(out), _leaves(ref)
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, eager {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(r, torch.Tensor):
            if o != r:
                return f"output {k}: {o!r}, eager {r!r}"
            continue
        if not isinstance(o, torch.Tensor):
            return f"output {k}: {type(o)}"
        if o.dtype != r.dtype:
            return f"output {k}: dtype {o.dtype}, eager {r.dtype}"
        if o.shape != r.shape:
            return f"output {k}: shape {tuple(o.shape)}, eager {tuple(r.shape)}"
        strides = [(a, b) for a, b, n in zip(o.stride(), r.stride(), r.shape) if n > 1]
        if any(a != b for a, b in strides):
            return f"output {k}: strides {o.stride()}, eager {r.stride()} (shape {tuple(r.shape)})"
        try:
            torch.testing.assert_close(o, r, rtol=1e-4, atol=1e-4, equal_nan=True)
        except AssertionError as e:
            return f"output {k}: values differ: {str(e).splitlines()[1:4]}"
    return None


def run_case(name, fn, make, sizes=SIZES, buckets="pow2"):
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": buckets})
    problems = []
    for n in sizes:
        args = make(n)
        a_c = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        a_e = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        err_e = err_c = None
        try:
            ref = fn(*a_e)
        except Exception as e:  # noqa: BLE001 -- eager's error is part of the comparison
            err_e = e
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = compiled(*a_c)
            ours = [
                w
                for w in caught
                if "torch2xla" in str(w.message)
                and not issubclass(w.category, torch2xla.BucketingWarning)
                and "run in eager PyTorch, the rest in XLA" not in str(w.message)
            ]
            if ours:
                problems.append(f"n={n}: warns {str(ours[0].message)[:300]!r}")
        except Exception as e:  # noqa: BLE001 -- so is ours
            err_c = e
        if err_e is not None or err_c is not None:
            if type(err_e) is not type(err_c) and not (
                err_e is not None and err_c is not None and isinstance(err_c, type(err_e))
            ):
                what = f"{type(err_c).__name__}: {str(err_c)[:200]}" if err_c else "no error"
                ew = f"{type(err_e).__name__}: {str(err_e)[:120]}" if err_e else "no error"
                problems.append(f"n={n}: error {what!s}; eager {ew}")
            continue
        diff = compare(out, ref)
        if diff is None:
            diff = compare(a_c, a_e)
            if diff is not None:
                diff = "inputs after: " + diff
        if diff:
            problems.append(f"n={n}: {diff}")
    try:
        info = torch2xla.cache_info(compiled)
        bucketed = [list(gi.bucketed) for gi in info]
    except Exception:  # noqa: BLE001 -- the report only
        bucketed = "?"
    return problems, bucketed


def main(filters):
    bad = 0
    for name, (fn, make) in CASES.items():
        if filters and not any(f in name for f in filters):
            continue
        torch._dynamo.reset()
        captures = torch._dynamo.config.patch(
            capture_dynamic_output_shape_ops=name in DATA_DEPENDENT,
            capture_scalar_outputs=name in DATA_DEPENDENT,
        )
        try:
            with torch.no_grad(), captures:
                problems, bucketed = run_case(name, fn, make)
        except Exception:  # noqa: BLE001 -- a crash is a finding
            print(f"CRASH {name}: {traceback.format_exc().splitlines()[-1][:300]}", flush=True)
            bad += 1
            continue
        if problems:
            bad += 1
            with torch.no_grad():
                torch._dynamo.reset()
                unpadded, _ = run_case(name, fn, make, buckets=None)
            also = " [ALSO WITHOUT BUCKETS]" if unpadded else ""
            print(f"DIFF  {name}{also} (bucketed {bucketed}): {problems[0][:400]}", flush=True)
        else:
            print(f"ok    {name} (bucketed {bucketed})", flush=True)
    print(f"{bad} of {len(CASES)} cases differ or crash")


if __name__ == "__main__":
    main(sys.argv[1:])
