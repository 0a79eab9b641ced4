"""Session 22 probe of higher-order ops (scripts/probe_hops.py): ``torch.cond``, ``while_loop``,
``map``, ``scan``, ``nested_compile_region`` and ``flex_attention`` lowered to JAX control flow
(``ops/_hops.py``), checked strictly against eager (values, dtypes, gradients and their
None-ness, errors); what cannot be lowered runs in eager with a warning naming the op."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch._higher_order_ops import while_loop
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan

import torch2xla
from tests._util import assert_same

STRICT = {"strict": True}  # (raises where any op would run in eager)


def _leaves(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_(True) for s in shapes]


def _grads(fn, shapes, seed=0):
    """(output, gradients) of ``fn`` from float64 leaves of ``shapes``."""
    xs = _leaves(*shapes, seed=seed)
    out = fn(*xs)
    (out * torch.linspace(-1, 2, out.shape[-1], dtype=out.dtype)).sum().backward()
    return out.detach(), [x.grad for x in xs]


def _grads_both(fn, shapes, options=STRICT, seed=0):
    """(output, gradients) of ``fn`` compiled and in eager, from the same float64 leaves."""
    compiled = torch.compile(fn, backend="xla", options=options)
    return [_grads(compiled, shapes, seed), _grads(fn, shapes, seed)]


# -- cond --------------------------------------------------------------------------------------
def _branchy(x, y):
    return torch.cond(x.sum() > 0, lambda a, b: a.sin() * b, lambda a, b: a.cos() + 2 * a, (x, y))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cond_values_and_gradients_in_xla(seed):
    # ran in eager with "cond: no lowering"; the untaken branch's operand y gets zeros, not None
    got, want = _grads_both(_branchy, [(5,), (5,)], seed=seed)
    assert_same(got[0], want[0])
    assert [g is None for g in got[1]] == [g is None for g in want[1]] == [False, False]
    assert_same(got[1], want[1])


def test_cond_over_module_parameters_and_nested():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4).double(), nn.Linear(4, 4).double()

        def inner(self, x):
            return torch.cond(x.max() > 1, lambda x: self.a(x) * 3, lambda x: x - 3, (x,))

        def forward(self, x):
            pred = x.mean() > 0
            return torch.cond(pred, lambda x: self.inner(x).relu(), lambda x: self.b(x), (x,))

    torch.manual_seed(0)
    m = M()
    compiled = torch.compile(m, backend="xla", options=STRICT)
    for seed in (0, 1, 4, 5):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        grads = []
        for f in (compiled, m):
            m.zero_grad(set_to_none=True)
            out = f(x)
            out.sum().backward()
            grads.append((out.detach(), [p.grad for p in m.parameters()]))
        (got, got_g), (want, want_g) = grads
        assert_same(got, want)
        assert [g is None for g in got_g] == [g is None for g in want_g]
        assert_same([g for g in got_g if g is not None], [g for g in want_g if g is not None])


def test_cond_multiple_outputs_keep_dtypes():
    def f(x, n):
        return torch.cond(
            n.sum() > 3,
            lambda x, n: (x * 2, n + 1, (x > 0).sum()),
            lambda x, n: (x - 1, n * 3, (x < 0).sum()),
            (x, n),
        )

    compiled = torch.compile(f, backend="xla", options=STRICT)
    for n in (torch.tensor([1, 2]), torch.tensor([3, 4])):
        x = torch.randn(4, dtype=torch.float64)
        assert_same(compiled(x, n), f(x, n))


def test_cond_index_check_only_in_the_taken_branch():
    def f(x, i):
        return torch.cond(i.sum() > 0, lambda x, i: x[i] * 2, lambda x, i: x[:2] + 1, (x, i))

    compiled = torch.compile(f, backend="xla", options=STRICT)
    x = torch.randn(4)
    assert_same(compiled(x, torch.tensor([-9, 7])), f(x, torch.tensor([-9, 7])))  # untaken
    with pytest.raises(IndexError) as want:
        f(x, torch.tensor([1, 9]))
    with pytest.raises(IndexError) as got:
        compiled(x, torch.tensor([1, 9]))
    assert str(want.value).splitlines()[0] in str(got.value)


@torch.library.custom_op("t2x_s22::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


_twice.register_fake(lambda x: torch.empty_like(x))


def test_cond_with_an_op_xla_cannot_run_inside_warns_naming_both():
    def f(x):
        return torch.cond(x.sum() > 0, lambda x: _twice(x).sin(), lambda x: x.cos(), (x,))

    compiled = torch.compile(f, backend="xla")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x in (torch.ones(3), -torch.ones(3)):
            assert_same(compiled(x), f(x))
    texts = [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    assert len(texts) == 1, texts
    assert "higher_order.cond" in texts[0] and "t2x_s22.twice" in texts[0]
    assert "test_hops_s22.py:" in texts[0]


def _loop_scan(combine, init, xs):
    """``scan(combine, init, xs)`` as eager runs it step by step: the reference for a scan whose
    init requires no grad (torch 2.11's eager scan gave the steps before the last a zero
    gradient there, pytorch#184528, fixed in later versions)."""
    carry, ys = init, []
    for x in xs:
        carry, y = combine(carry, x)
        ys.append(y)
    return carry, torch.stack(ys)


def test_stop_points_inside_subgraphs_stop_gradients():
    # a branch's or a scan step's .detach() and no_grad were differentiated through (2x grads)
    def branch(x):
        with torch.no_grad():
            y = x * 3
        return y * x + x.detach() * x

    def f(x, xs, scan=scan):
        a = torch.cond(x.sum() > 0, branch, lambda x: x * 2, (x,))
        c = scan(lambda c, x: (c + x.detach() * x, c * x), torch.zeros(3, dtype=x.dtype), xs)[0]
        return a + c

    for seed in (0, 1):
        compiled = torch.compile(lambda x, xs: f(x.abs(), xs), backend="xla", options=STRICT)
        got = _grads(compiled, [(3,), (4, 3)], seed)
        want = _grads(lambda x, xs: f(x.abs(), xs, _loop_scan), [(3,), (4, 3)], seed)
        assert_same(got, want)


# -- while_loop --------------------------------------------------------------------------------
def test_while_loop_runs_in_xla():
    # failed to export ('NoneType' object has no attribute 'ignore_fresh_unbacked_symbols')
    def f(x, n):
        return while_loop(
            lambda i, x: i < n, lambda i, x: (i + 1, x * 1.5 + 1), (torch.tensor(0), x)
        )

    def g(x):
        return while_loop(lambda x: x.sum() < 100, lambda x: (x * 2 + 1,), (x.abs(),))

    cf = torch.compile(f, backend="xla", options=STRICT)
    cg = torch.compile(g, backend="xla", options=STRICT)
    for n in (0, 4, 7):
        x = torch.randn(3)
        assert_same(cf(x, torch.tensor(n)), f(x, torch.tensor(n)))
        assert_same(cg(x), g(x))


def test_while_loop_with_gradient_runs_in_eager_and_warns():
    def f(x):
        return while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x.sin()), (torch.tensor(0), x))

    compiled = torch.compile(f, backend="xla")
    results = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in (compiled, f):
            (x,) = _leaves((3,))
            out = fn(x)
            out[1].sum().backward()
            results.append((out, x.grad))
    assert_same(results[0], results[1])
    texts = [str(w.message) for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    assert any("higher_order.while_loop" in t and "test_hops_s22.py:" in t for t in texts), texts


# -- map and scan ------------------------------------------------------------------------------
def test_map_gradients():
    def f(xs, y, w):
        return hop_map(lambda x, y: (x * y + w).sin(), xs, y)

    got, want = _grads_both(f, [(3, 4), (4,), (4,)])
    assert_same(got, want)


def test_scan_reverse_over_dim_with_parameters():
    lin = nn.Linear(4, 4).double()

    def combine(c, x):
        h = torch.tanh(lin(x) + c)
        return h, h * 2

    def f(init, xs):
        # (ys: stacked along dim 1 as xs from torch 2.13 on, along dim 0 before: as eager)
        c, ys = scan(combine, init, xs, dim=1, reverse=True)
        return ys, c

    results = []
    for fn in (torch.compile(f, backend="xla", options=STRICT), f):
        lin.zero_grad(set_to_none=True)
        init, xs = _leaves((2, 4), (2, 6, 4))
        out = fn(init, xs)
        weights = torch.linspace(-1, 2, out[0].numel(), dtype=out[0].dtype)
        ((out[0].flatten() * weights).pow(2).sum() + out[1].pow(2).sum()).backward()
        results.append((out, init.grad, xs.grad, lin.weight.grad, lin.bias.grad))
    assert_same(results[0], results[1])


def test_scan_draws_new_random_numbers_each_step():
    def f(xs):
        step = lambda c, x: (c + 1, torch.nn.functional.dropout(x, 0.5, training=True))
        return scan(step, torch.zeros(()), xs)[1]

    ys = torch.compile(f, backend="xla", options=STRICT)(torch.ones(6, 64))
    assert set(ys.unique().tolist()) == {0.0, 2.0}
    assert (ys[1:] != ys[:1]).any(1).all()


def test_higher_order_ops_are_not_padded_to_buckets():
    # bucketing padded cond/scan operands: wrong shapes ("bucketing bug") or wrong values
    def f(x, y):
        return torch.cond(x.mean() > 0, lambda a, b: a.sin() + b, lambda a, b: a.cos() * b, (x, y))

    def g(init, xs):
        return scan(lambda c, x: (c + x, (c * x).sin()), init, xs)

    for fn in (f, g):
        compiled = torch.compile(fn, backend="xla", options=STRICT, dynamic=True)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.BucketingWarning)
            for n in (3, 5, 6):
                x, y = torch.randn(4, n) + 0.1, torch.randn(4, n)
                assert_same(compiled(x, y), fn(x, y))


# -- nested_compile_region (invoke_subgraph) ---------------------------------------------------
def test_nested_compile_region_gradients_not_none():
    # each later call's example value is the first call's: every gradient came back None
    @torch.compiler.nested_compile_region
    def block(x, w):
        return (x @ w).relu() + x

    def f(x, w1, w2):
        return block(block(x, w1), w2).sum(0)

    got, want = _grads_both(f, [(3, 4), (4, 4), (4, 4)])
    assert all(g is not None for g in got[1])
    assert_same(got, want)


# -- flex_attention ----------------------------------------------------------------------------
def _flex_args(gqa=False, rg=False, dtype=torch.float32):
    B, H, L, D = 2, 4, 8, 16
    Hk = 2 if gqa else H
    g = torch.Generator().manual_seed(0)
    shapes = [(B, H, L, D), (B, Hk, L, D), (B, Hk, L, D)]
    return [torch.randn(*s, generator=g, dtype=dtype).requires_grad_(rg) for s in shapes]


_BIAS = torch.randn(8, generator=torch.Generator().manual_seed(3))


def _score_mod(s, b, h, i, j):
    return torch.tanh(s / 5) * 5 + _BIAS[j] * (h + 1) - (i - j).abs() * 0.1


def _sliding(b, h, i, j):
    return (i - j).abs() <= 2


def _masked_rows(b, h, i, j):
    return (i > 2) & (j < i)


@pytest.mark.parametrize("mask_mod", [None, _sliding, _masked_rows], ids=["none", "win", "rows"])
@pytest.mark.parametrize("gqa", [False, True])
def test_flex_attention_forward_matches_eager(mask_mod, gqa):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = None if mask_mod is None else create_block_mask(mask_mod, 2, 4, 8, 8, "cpu")

    def f(q, k, v):
        return flex_attention(
            q, k, v, _score_mod, block_mask=block_mask, enable_gqa=gqa, return_lse=True
        )

    args = _flex_args(gqa)
    assert_same(torch.compile(f, backend="xla", options=STRICT)(*args), f(*args))


def test_flex_attention_float64_statistics_are_float64_as_eager():
    # the fake kernel says float32 for the lse whatever the query's dtype: return_lse gave it
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 4, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 12, 8, generator=g, dtype=torch.float64) for _ in range(2))
    block_mask = create_block_mask(lambda b, h, i, j: j <= i + 8, None, None, 4, 12, "cpu")

    def f(q, k, v, mod=lambda s, b, h, i, j: torch.tanh(s) * 2 - (i - j).abs() * 0.1):
        return flex_attention(q, k, v, mod, block_mask=block_mask, scale=0.3, return_lse=True)

    assert_same(torch.compile(f, backend="xla", options=STRICT)(q, k, v), f(q, k, v))


def test_flex_attention_score_mod_index_out_of_range_raises_eagers_error():
    from torch.nn.attention.flex_attention import flex_attention

    def f(q, k, v):
        return flex_attention(q, k, v, _score_mod)  # (_BIAS has 8 entries, the keys 12)

    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 4, 8, generator=g)
    k, v = (torch.randn(1, 2, 12, 8, generator=g) for _ in range(2))
    with pytest.raises(IndexError) as want:
        f(q, k, v)
    with pytest.raises(IndexError) as got:
        torch.compile(f, backend="xla")(q, k, v)
    assert str(want.value).splitlines()[0] in str(got.value)


def _dense_reference(q, k, v, score_mod, mask_mod):
    """softmax(score_mod(q k^T / sqrt(d))) v in float64, fully masked rows zero (as eager)."""
    B, H, L, D = q.shape
    group = H // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) / D**0.5
    b, h, i, j = torch.meshgrid(*(torch.arange(n) for n in s.shape), indexing="ij")
    s = score_mod(s, b, h, i, j)
    if mask_mod is not None:
        s = s.masked_fill(~mask_mod(b, h, i, j), float("-inf"))
    dead = (s == float("-inf")).all(-1, keepdim=True)
    return torch.softmax(s.masked_fill(dead, 0), -1).masked_fill(dead, 0) @ v


@pytest.mark.parametrize("mask_mod", [None, _sliding, _masked_rows], ids=["none", "win", "rows"])
def test_flex_attention_gradients_match_a_float64_reference(monkeypatch, mask_mod):
    # eager's CPU flex_attention refuses inputs that require grad; its device check is lifted
    # (as on a GPU) so the XLA backward can be compared with the dense float64 reference
    from torch.nn.attention import flex_attention as fa

    monkeypatch.setattr(fa, "_validate_device", lambda *a: None)
    block_mask = None if mask_mod is None else fa.create_block_mask(mask_mod, 2, 4, 8, 8, "cpu")

    def f(q, k, v):
        return fa.flex_attention(q, k, v, _score_mod, block_mask=block_mask, enable_gqa=True)

    weights = torch.linspace(-1, 1, 16)
    qkv = _flex_args(gqa=True, rg=True)
    out = torch.compile(f, backend="xla", options=STRICT)(*qkv)
    (out * weights).sum().backward()
    ref_in = [t.detach().double().requires_grad_(True) for t in qkv]
    ref = _dense_reference(*ref_in, _score_mod, mask_mod)
    (ref * weights.double()).sum().backward()
    # float32 against float64: a few float32 ulps of the scores' magnitude
    torch.testing.assert_close(out, ref.float(), rtol=1e-5, atol=1e-5)
    for got, want in zip(qkv, ref_in):
        torch.testing.assert_close(got.grad, want.grad.float(), rtol=1e-5, atol=1e-5)


def test_flex_attention_gradient_of_a_learned_bias_the_score_mod_reads(monkeypatch):
    from torch.nn.attention import flex_attention as fa

    monkeypatch.setattr(fa, "_validate_device", lambda *a: None)
    bias = torch.randn(4, generator=torch.Generator().manual_seed(1), requires_grad=True)

    def rel(s, b, h, i, j):
        return s + bias[h] * (i - j)

    qkv = _flex_args(rg=True)
    out = torch.compile(lambda q, k, v: fa.flex_attention(q, k, v, rel), backend="xla")(*qkv)
    out.sum().backward()
    ref_bias = bias.detach().double().requires_grad_(True)
    ref_in = [t.detach().double().requires_grad_(True) for t in qkv]
    ref = _dense_reference(*ref_in, lambda s, b, h, i, j: s + ref_bias[h] * (i - j), None)
    ref.sum().backward()
    torch.testing.assert_close(out, ref.float(), rtol=1e-5, atol=1e-5)
    for got, want in zip([*qkv, bias], [*ref_in, ref_bias]):
        torch.testing.assert_close(got.grad, want.grad.float(), rtol=1e-5, atol=1e-5)
