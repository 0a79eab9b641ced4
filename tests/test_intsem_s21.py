"""Integer, ordering and autocast semantics found by scripts/probe_intsem.py (session 21).

- ``topk(largest=False)`` on integers reversed the order by negation, which wraps: uint8's 0
  stayed the largest value and int8/int16/int32/int64's minimum its own negation, so the
  smallest elements came back wrong. Values and indices are compared exactly.
- ``nn.LSTM`` under CPU autocast: eager runs it through oneDNN, whose operands autocast casts,
  and returns the autocast dtype; the export's decomposition returned float32 (its float32
  states undo the products' casts). Dtypes are compared exactly; values against a float64
  run of the layer on the operands rounded to bfloat16 (what autocast gives the layer): ours
  no further from it than eager's, plus one bfloat16 rounding of the output's scale (oneDNN
  and XLA accumulate in their own orders).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils._pytree import tree_leaves

from tests._util import clone_args, skip_unless_onednn_bf16_lstm

BF16 = torch.bfloat16
INF = float("inf")
INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _compiled(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _equal_as_eager(fn, *args):
    torch._dynamo.reset()
    ref = fn(*clone_args(args))
    out = _compiled(fn)(*clone_args(args))
    for o, r in zip(tree_leaves(out), tree_leaves(ref), strict=True):
        assert o.dtype == r.dtype and o.shape == r.shape, (o, r)
        assert torch.equal(o, r), (o, r)


# --- topk's smallest elements of integers ------------------------------------------------------
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_topk_smallest_integers(dtype):
    ii = torch.iinfo(dtype)
    x = torch.tensor([1, ii.min, 3, ii.max, 2, 5, ii.min + 1, 0], dtype=dtype)
    _equal_as_eager(
        lambda x: (
            x.topk(3, largest=False),
            x.topk(1, largest=False),
            torch.topk(x, 8, largest=False),
            x.topk(2, largest=False, sorted=True).values.sum(dtype=torch.int64),
        ),
        x,
    )


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_topk_smallest_integers_2d(dtype):
    ii = torch.iinfo(dtype)
    x = torch.tensor(
        [[10, ii.max, 7], [ii.min, 1, 9], [3, ii.max - 1, ii.min + 2], [5, 6, 4]], dtype=dtype
    )
    _equal_as_eager(lambda x: (x.topk(2, dim=0, largest=False), x.topk(1, dim=1, largest=False)), x)


# --- nn.LSTM under CPU autocast ----------------------------------------------------------------
# (eager's oneDNN bfloat16 LSTM needs AVX-512: on an AVX2-only CPU it raises, checked at run time)
_ONEDNN_SKIP = skip_unless_onednn_bf16_lstm()


def _lstm_reference(layer, x, state=None):
    """The layer in float64 on its operands rounded to bfloat16."""
    ref = copy.deepcopy(layer).to(BF16).double()
    rounded = None if state is None else tuple(s.detach().to(BF16).double() for s in state)
    return ref(x.to(BF16).double(), rounded)


def _check_against_reference(out, eager, ref):
    for o, e, r in zip(tree_leaves(out), tree_leaves(eager), tree_leaves(ref), strict=True):
        assert o.dtype == e.dtype == BF16 and o.shape == e.shape, (o.dtype, e.dtype)
        r = r.detach()
        ours = (o.detach().double() - r).abs().max().item()
        theirs = (e.detach().double() - r).abs().max().item()
        rounding = torch.finfo(BF16).eps * r.abs().max().item()
        assert ours <= theirs + rounding, (ours, theirs, rounding)


@_ONEDNN_SKIP
@pytest.mark.parametrize(
    "kw",
    [{}, {"batch_first": True}, {"num_layers": 2, "bidirectional": True}],
    ids=["plain", "batch_first", "2layer_bidir"],
)
def test_lstm_under_outer_autocast_returns_its_dtype(kw):
    torch.manual_seed(0)
    layer = torch.nn.LSTM(8, 16, **kw)
    x = torch.randn(4, 12, 8)
    torch._dynamo.reset()
    with torch.autocast("cpu", dtype=BF16):
        eager = layer(x)
        out = _compiled(layer)(x)
    _check_against_reference(out, eager, _lstm_reference(layer, x))


@_ONEDNN_SKIP
def test_lstm_autocast_inside_and_nested_disabled():
    torch.manual_seed(0)
    layer = torch.nn.LSTM(8, 16)

    def f(x):
        with torch.autocast("cpu", dtype=BF16):
            y = layer(x)
            with torch.autocast("cpu", enabled=False):
                z = layer(x)[0]
        return y, z

    x = torch.randn(10, 3, 8)
    torch._dynamo.reset()
    eager_y, eager_z = f(x)
    out_y, out_z = _compiled(f)(x)
    _check_against_reference(out_y, eager_y, _lstm_reference(layer, x))
    assert out_z.dtype == eager_z.dtype == torch.float32
    torch.testing.assert_close(out_z, eager_z)


@_ONEDNN_SKIP
def test_lstm_autocast_gradients_are_float32():
    """Given states and weights get float32 gradients (autocast's casts are differentiable),
    close to eager's within bfloat16's rounding of their scale."""
    torch.manual_seed(0)
    layer = torch.nn.LSTM(6, 8, num_layers=2)
    x = torch.randn(7, 3, 6)
    h0 = torch.randn(2, 3, 8, requires_grad=True)
    c0 = torch.randn(2, 3, 8)

    def run(fn):
        layer.zero_grad()
        h0.grad = None
        with torch.autocast("cpu", dtype=BF16):
            out, (h, c) = fn(x, (h0, c0))
        assert out.dtype == h.dtype == c.dtype == BF16
        (out.float().pow(2).sum() + c.float().sum()).backward()
        return [h0.grad.clone(), *(p.grad.clone() for p in layer.parameters())]

    torch._dynamo.reset()
    eager = run(layer)
    ours = run(_compiled(layer))
    for o, e in zip(ours, eager, strict=True):
        assert o.dtype == e.dtype == torch.float32
        scale = e.abs().max().item()
        assert (o - e).abs().max().item() <= 4 * torch.finfo(BF16).eps * scale


def test_gru_and_rnn_under_autocast_keep_eagers_dtypes():
    """Not oneDNN's in eager: the decomposition casts as eager's does (GRU float32, RNN
    bfloat16)."""
    torch.manual_seed(0)
    x = torch.randn(5, 3, 8)
    for layer in (torch.nn.GRU(8, 6), torch.nn.RNN(8, 6)):
        torch._dynamo.reset()
        with torch.autocast("cpu", dtype=BF16):
            eager = layer(x)
            out = _compiled(layer)(x)
        for o, e in zip(tree_leaves(out), tree_leaves(eager), strict=True):
            assert o.dtype == e.dtype, (type(layer), o.dtype, e.dtype)


# --- searchsorted/bucketize: eager's binary search ---------------------------------------------
# jnp.searchsorted orders NaN last and halves its range its own way: a NaN value went before a
# NaN boundary (eager: past every boundary) and unsorted sequences gave other insertion points.
NAN = float("nan")


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_nan_and_unsorted_as_eager(right):
    seqs = [
        torch.tensor([-INF, 0.0, 1.0, 1.0, 1.0, 3.0, INF, NAN]),
        torch.tensor([NAN, 0.0, 2.0, NAN, 1.0]),
        torch.tensor([3.0, 1.0, 2.0, 1.0, 0.0, -1.0]),
        torch.tensor([NAN]),
    ]
    values = torch.tensor([NAN, -INF, 1.0, 0.5, INF, 3.0, -0.0, 7.0, -2.0])
    for seq in seqs:
        _equal_as_eager(
            lambda s, v: (
                torch.searchsorted(s, v, right=right),
                torch.searchsorted(s, v, side="right" if right else "left", out_int32=True),
                torch.searchsorted(s, v, sorter=s.argsort(stable=True), right=right),
                torch.bucketize(v, s, right=right),
                torch.bucketize(v, s, out_int32=True, right=right),
            ),
            seq,
            values,
        )


def test_searchsorted_batched_mixed_dtypes_and_scalars():
    seq = torch.tensor([[1, 2, 2, 5], [0, 0, 3, 3]])
    values = torch.tensor([[2.5, 0.0, 5.0], [3.0, NAN, -1.0]])
    _equal_as_eager(
        lambda s, v: (
            torch.searchsorted(s, v),
            torch.searchsorted(s, v, side="right"),
            torch.searchsorted(s.to(torch.int8), (v.nan_to_num() + 200).long(), right=True),
            torch.searchsorted(s[0], 2),
            torch.bucketize(3, s[1]),
            torch.searchsorted(s.float(), v[:, :0]),
        ),
        seq,
        values,
    )
