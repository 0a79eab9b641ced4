"""Bucketing's padded programs against eager, strictly: values (NaN positions too), dtypes,
strides, inputs written in place, errors, and no fallback. Each case is a class of silent
wrong answers that padding to a bucket once gave (``scripts/probe_bucketing.py`` finds them):
padded positions reaching a scan or a triangle through a flattened dim, non-finite padded
keys and values in attention, runtime checks reading padded positions, graphs that record
autograd inside, and unpadded outputs with the padded sizes' strides."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import assert_same, clone_args

SIZES = (3, 6)  # buckets 4 and 8: every call padded
_W = torch.randn(10, 4)
_E = torch.nn.Embedding(10, 4)
_LIN = torch.nn.Linear(4, 4)


def _x2(n):
    return (torch.randn(2, n),)


def _x3(n):
    return (torch.randn(2, n, 4),)


def _pos3(n):
    return (torch.rand(2, n, 4) + 0.5,)


def _idx(n):  # indices 1..9: ``i - 1`` is valid at real positions, -1 at padded ones
    return (torch.randint(1, 10, (2, n)),)


def _outer(x, op):
    m = x.reshape(-1)  # (2 * n): the padded n inside
    return op(m.unsqueeze(1), m.unsqueeze(0))


def _flat_causal(x):
    q = x.reshape(1, 1, -1, 4)  # keys: batch and sequence flattened
    return F.scaled_dot_product_attention(q, q, q, is_causal=True)


def _attend_inverse(x):
    q = x[:, None]
    return F.scaled_dot_product_attention(q, q, 1 / q)  # padded values: 1 / 0 = inf


def _causal_inverse(x):
    q = x[:, None]
    return F.scaled_dot_product_attention(q, 1 / q, 1 / q, is_causal=True)


def _grad_inside(x):
    with torch.enable_grad():
        out = _LIN(1 / x).sum(1)
    return out


def _targets(n):
    return torch.randn(2, n, 5), torch.randint(1, 6, (2, n))


S, B = ("x dim 1",), ("x dim 0", "x dim 1")  # padded: the sequence; batch and sequence
# name -> (function, inputs of size n, labels that stay padded, {label: words of its refusal})
CASES = {
    # 1. scans and triangles along a dim flattened with a padded dim inside it: refused for
    # the inner dim (padded positions lay between real ones); the outer one stays padded
    "cumsum_flat": (
        lambda x: x.exp().reshape(-1).cumsum(0),
        _x2,
        ("x dim 0",),
        {"x dim 1": "scans"},
    ),
    "cumprod_flat": (lambda x: (x + 3).reshape(-1).cumprod(0), _x2, (), {"x dim 1": "scans"}),
    "cummax_flat": (lambda x: (-x.abs() - 1).reshape(-1).cummax(0), _x2, (), {"x dim 1": "scans"}),
    "logcumsumexp_flat": (lambda x: x.reshape(-1).logcumsumexp(0), _x2, (), {"x dim 1": "scans"}),
    "cumsum_written_back": (
        lambda x: x.view(-1).copy_(x.reshape(-1).exp().cumsum(0)),
        _x2,
        (),
        {"x dim 1": "scans"},
    ),
    # (the padded sequence outermost in the flattened dim: exact, stays padded)
    "cumsum_outer_padded": (lambda x: x.exp().flatten(1).cumsum(1), _x3, B, {"x dim 2": "scans"}),
    "tril_flat": (lambda x: torch.tril(_outer(x, torch.add), -1), _x2, (), {"x dim 1": "triangle"}),
    "triu_flat": (lambda x: torch.triu(_outer(x, torch.mul), 2), _x2, (), {"x dim 1": "triangle"}),
    "tril_seq": (lambda x: torch.tril(x @ x.transpose(1, 2), -1), _x3, B, {}),
    # 2. causal attention over flattened keys
    "causal_flat_keys": (_flat_causal, _x3, (), {"x dim 1": "flattened", "x dim 0": "flattened"}),
    # 3. non-finite padded keys and values (0 * inf in the hidden keys)
    "attention_inf_values": (_attend_inverse, _pos3, B, {}),
    "causal_attention_inf_keys_values": (_causal_inverse, _pos3, B, {}),
    # 4. runtime checks read padded positions (-1 there): no error, no eager fallback
    "embedding": (lambda i: _E(i - 1), _idx, ("i dim 0", "i dim 1"), {}),
    "embedding_flat": (lambda i: _E((i - 1).reshape(-1)), _idx, ("i dim 0", "i dim 1"), {}),
    "index_select": (lambda i: _W.index_select(0, (i - 1)[0]), _idx, ("i dim 1",), {}),
    "advanced_index": (lambda i: _W[i - 1], _idx, ("i dim 0", "i dim 1"), {}),
    "cross_entropy_flat_targets": (
        lambda x, t: F.cross_entropy(x.reshape(-1, 5), (t - 1).reshape(-1), reduction="none"),
        _targets,
        B,
        {},
    ),
    "floor_divide": (lambda i: 100 // i, _idx, ("i dim 0", "i dim 1"), {}),
    "remainder_flat": (lambda i: 100 % i.reshape(-1), _idx, ("i dim 0", "i dim 1"), {}),
    # 5. grad enabled inside the compiled region (called under no_grad): never padded
    "grad_inside": (_grad_inside, _x3, (), {"x dim 0": "enables grad", "x dim 1": "enables grad"}),
    # 6. outputs' strides after the padding is cut off
    "transposed_flat": (lambda x: (x * 2).reshape(-1, 4).t(), _x3, B, {}),
    "expanded": (lambda x: x.sum(0, keepdim=True).expand(3, -1), _x2, B, {}),
    "flattened_output": (lambda x: (x * 2).flatten(1), _x3, B, {}),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=1), _x3, B, {}),
}


def _assert_strides(out, ref):
    outs = out if isinstance(out, tuple | list) else (out,)
    refs = ref if isinstance(ref, tuple | list) else (ref,)
    for o, r in zip(outs, refs):
        assert o.stride() == r.stride(), (o.stride(), r.stride(), tuple(r.shape))


def _run(fn, make, sizes=SIZES):
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    for n in sizes:
        args = make(n)
        ours, theirs = clone_args(args), clone_args(args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = compiled(*ours)
        fallbacks = [
            str(w.message)
            for w in caught
            if str(w.message).startswith("torch2xla")
            and not issubclass(w.category, torch2xla.BucketingWarning)
        ]
        assert not fallbacks, fallbacks
        want = fn(*theirs)
        assert_same(got, want)
        _assert_strides(got, want)
        assert_same(ours, theirs)  # (inputs written in place)
    return torch2xla.cache_info(compiled)


@pytest.mark.parametrize("name", list(CASES))
@torch.no_grad()
def test_padded_programs_match_eager(name):
    fn, make, padded, refused = CASES[name]
    info = _run(fn, make)
    bucketed = {label for g in info for label in g.bucketed}
    assert set(padded) <= bucketed, (padded, [g.not_bucketed for g in info])
    for label, words in refused.items():
        reasons = [g.not_bucketed.get(label, "") for g in info]
        assert any(words in r for r in reasons), (label, reasons)


def test_gradients_recorded_inside_a_no_grad_call_match_eager():
    # Padded, the rows 1 / 0 = inf met a zero cotangent in the weight's gradient: NaN.
    compiled = torch.compile(_grad_inside, backend="xla", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in SIZES:
            x = torch.rand(2, n, 4) + 0.5
            grads = []
            for fn in (compiled, _grad_inside):
                _LIN.zero_grad()
                with torch.no_grad():
                    out = fn(x)
                assert out.requires_grad
                out.sum().backward()
                grads.append((out.detach(), _LIN.weight.grad.clone(), _LIN.bias.grad.clone()))
            assert_same(grads[0], grads[1])
    # (the default buckets say once why this graph compiles per size)
    ours = [str(w.message) for w in caught if "torch2xla" in str(w.message)]
    assert len(ours) == 1 and "enables grad inside" in ours[0], ours


@torch.no_grad()
def test_checked_indices_past_the_real_end_still_raise():
    # Valid values fill only the padded positions: a real index out of range raises as eager.
    fn = lambda i: _E(i - 1)
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    compiled(torch.randint(1, 10, (2, 3)))
    bad = torch.randint(1, 10, (2, 6))
    bad[1, 4] = 11
    with pytest.raises(IndexError) as eager:
        fn(bad)
    with pytest.raises(IndexError) as ours:
        compiled(bad)
    assert str(ours.value).startswith(str(eager.value).splitlines()[0])
    assert "i dim 1" in torch2xla.cache_info(compiled)[0].bucketed


@torch.no_grad()
def test_integer_division_by_a_real_zero_still_raises():
    fn = lambda a, b: a // b
    compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
    a, b = torch.randint(0, 9, (2, 6)), torch.randint(1, 9, (2, 6))
    assert_same(compiled(a, b), fn(a, b))
    b[0, 5] = 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, b)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(a, b)
    assert "a dim 1" in torch2xla.cache_info(compiled)[0].bucketed


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: ((x >= 0).nonzero(), x.sum(0)),  # (padded zeros are >= 0)
        lambda x: (x[x >= 0] * 2, x.sum(0)),
    ],
    ids=["nonzero", "mask"],
)
@torch.no_grad()
def test_graphs_with_ops_in_eager_inside_are_not_padded(fn):
    # Data-dependent ops run in eager PyTorch inside the graph (the graph is cut around them):
    # on padded inputs they would see the padding, so such graphs compile per size.
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(fn, backend="xla", dynamic=True, options={"buckets": "pow2"})
        for n in (3, 5, 6, 7):
            x = torch.randn(n, 2, generator=torch.Generator().manual_seed(n))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = compiled(x)
            assert_same(got, fn(x))
