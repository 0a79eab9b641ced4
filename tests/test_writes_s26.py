"""Writes and in-place semantics as users write them (session 26, ``scripts/probe_writes26.py``):
masked and index writes, scatters, writes through views, aliased arguments, module state, all
against eager PyTorch strictly (values, dtypes, the inputs' contents and versions after the
call, which outputs are the inputs themselves). And the one class the probe found wrong: a
write through ``unfold`` windows that leave elements of their dim out zeroed those elements
(functionalization writes the windows back with ``unfold_backward``, which knows no base):
such writes run in eager PyTorch, with a warning naming the op and the line."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla
from tests._util import no_fallback


def _seeded(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _assert_same(got, want, where=""):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), where
        assert (got.dtype, got.shape, got._version) == (want.dtype, want.shape, want._version), (
            where
        )
        if want.is_floating_point():  # (sums in another order: float32 rounding)
            torch.testing.assert_close(got, want, rtol=1.3e-6, atol=1e-5, msg=where)
        else:
            assert torch.equal(got, want), f"{where}\n{got}\n{want}"
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def _check(fn, make, compile_kw=None, calls=2, strict=True):
    """``fn`` compiled (strict: no op runs in eager) gives eager's outputs, leaves its inputs
    as eager leaves them (values, versions) and returns an input where eager returns it."""
    options = {"strict": True} if strict else None
    compiled = torch.compile(fn, backend="xla", options=options, **(compile_kw or {}))
    for call in range(calls):
        args, ref_args = make(call), make(call)
        want = fn(*ref_args)
        got = compiled(*args)
        _assert_same(got, want, f"{fn.__name__} out {call}")
        _assert_same(list(args), list(ref_args), f"{fn.__name__} args {call}")
        outs = got if isinstance(got, tuple) else (got,)
        ref_outs = want if isinstance(want, tuple) else (want,)
        for o, w in zip(outs, ref_outs):
            assert [o is a for a in args] == [w is a for a in ref_args], fn.__name__


# -- masked writes ------------------------------------------------------------------------------
def masked_writes(x, v, row, rows_mask):
    x[x > 1.5] = 1.5  # a Python scalar
    x[x < -1.5] = v  # a 0-d tensor
    x[rows_mask] = row  # a mask of lower rank: whole rows
    x[x > 100] = 7.0  # no element selected
    x[x.abs() > 1] += 1
    m = x < 0
    x[m] = x[m] * 2
    return x


def masked_ops(x, y, v):
    x.masked_fill_(x > 0, v)
    y.masked_scatter_(y < 0, torch.arange(20.0))
    out = torch.empty(4, 5)
    torch.where(x > -1, x, y, out=out)
    return out, x.masked_fill(torch.tensor([True, False, True, False, False]), -3.0)


def masked_into_ints(x, v):
    x[x > 0] = v  # a float 0-d tensor into an int64 tensor: truncated
    x.masked_fill_(x < -2, 2.7)
    return x


def _mask_args(call):
    return (
        _seeded(4, 5, seed=call),
        torch.tensor(-9.0),
        _seeded(5, seed=9),
        torch.tensor([True, False, call == 0, False]),
    )


def test_masked_writes_as_eager():
    _check(masked_writes, _mask_args)
    _check(masked_ops, lambda c: (_seeded(4, 5, seed=c), _seeded(4, 5, seed=c + 1), 3.0))
    ints = lambda c: (torch.arange(20).view(4, 5) - 10 + c, torch.tensor(3.7))
    _check(masked_into_ints, ints)


# -- integer and tensor index writes ----------------------------------------------------------
def index_writes(x, idx, cols, v):
    x[idx] = 5.0  # duplicate and negative indices
    x[:, cols] = v
    x[idx, cols[:1]] += 1  # duplicates add once, as eager's gather-add-scatter
    x[..., 0] = 3.0
    x[None, 1] = -1.0
    x[torch.tensor([True, False, True, True]), torch.tensor([0, 4, 1])] = -5.0
    return x


def index_ops(x, i, s):
    x.index_put_((i,), s[0], accumulate=True)
    x.index_add_(0, i[:2], s[:2], alpha=2)
    x.index_copy_(0, torch.tensor([3, 0]), s[2:])
    x.index_fill_(1, torch.tensor([0, -1]), -2.0)
    x.put_(torch.tensor([0, 7, 7]), torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    return x


def scatters(x, i, s):
    a = x.clone().scatter_(0, i, s)
    b = x.clone().scatter_add_(0, i, s)
    c = [x.clone().scatter_reduce_(0, i, s, r, include_self=inc) for r, inc in _REDUCES]
    return a, b, c


_REDUCES = [(r, inc) for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)]


def test_index_writes_as_eager():
    _check(
        index_writes,
        lambda c: (_seeded(4, 5, seed=c), torch.tensor([1, 1, -1]), torch.tensor([0, 2]), 0.5),
    )
    _check(index_ops, lambda c: (_seeded(4, 5, seed=c), torch.tensor([1, 1, 3, 1]), _seeded(4, 5)))
    i = torch.tensor([[0, 1, 2, 0, 0], [0, 1, 2, 3, 3]])
    _check(scatters, lambda c: (_seeded(4, 5, seed=c), i, _seeded(2, 5, seed=7)))


# -- writes through views, aliased arguments ------------------------------------------------------
def view_writes(x):
    x.view(-1)[3] = 100.0
    x.t()[0] = 1.0
    x[::2] += 1
    x.diagonal().fill_(0)
    x.unsqueeze(0).add_(1)
    x.narrow(1, -2, 2).mul_(3)
    x[1:3, 2:] = 0.0
    v = x[1]
    x.add_(1)
    return v, x.sum(1)


def aliased(a, b):
    a.add_(1)
    b.mul_(2)  # b is a row of a
    return a + 0


def test_view_writes_as_eager():
    _check(view_writes, lambda c: (_seeded(4, 5, seed=c),))

    def make(call):
        a = _seeded(4, 5, seed=call)
        return a, a[0]

    _check(aliased, make)


# -- writes through unfold windows ---------------------------------------------------------------
def unfold_tail(x):
    x.unfold(1, 2, 2).mul_(3)  # 5 columns: the last is in no window
    return x


def unfold_gap(x):
    x.unfold(1, 2, 3)[:, 0].fill_(-1)  # a gap of one column between the windows
    return x


def unfold_gap_new_tensor(x):
    y = torch.ones(4, 6)
    y.unfold(dimension=1, size=2, step=3).zero_()
    return y * x.sum()


@pytest.mark.parametrize("fn", [unfold_tail, unfold_gap, unfold_gap_new_tensor])
def test_writes_through_unfold_windows_with_gaps_run_in_eager(fn):
    x = torch.arange(20.0).view(4, 5)
    want = fn(x.clone())
    with pytest.warns(torch2xla.FallbackWarning, match="unfold windows that leave elements out"):
        got = torch.compile(fn, backend="xla")(x.clone())
    assert torch.equal(got, want)  # (the elements no window holds were zeroed)
    torch._dynamo.reset()
    with pytest.raises(torch2xla.UnsupportedOpsError) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(x.clone())
    assert f"{__file__}:" in str(info.value)  # (the user's line)
    assert "unfold windows that leave elements out" in str(info.value)


def unfold_covered(x):
    u = x.unfold(0, 2, 2)  # 4 rows in windows of 2: every row in one
    u.add_(1)
    return u.sum(), x


def test_writes_through_unfold_windows_that_cover_their_dim_compile():
    _check(unfold_covered, lambda c: (_seeded(4, 5, seed=c),))


def test_writes_through_unfold_of_a_dynamic_dim():
    # (whether the windows leave an element out changes with the size: every size runs in
    # eager, right)
    torch._dynamo.reset()
    compiled = torch.compile(unfold_tail, backend="xla", dynamic=True)
    for n in (5, 4, 6, 7):
        x = torch.arange(4.0 * n).view(4, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the fallback's warning; buckets')
            got = compiled(x.clone())
        assert torch.equal(got, unfold_tail(x.clone())), n


# -- module state, no_grad writes of parameters --------------------------------------------------
class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("step", torch.tensor(0))
        self.register_buffer("avg", torch.zeros(5))
        self.lin = torch.nn.Linear(5, 5)

    def forward(self, x):
        self.step += 1
        self.avg.mul_(0.9).add_(x.mean(0), alpha=0.1)
        with torch.no_grad():
            self.lin.weight.mul_(0.99)
        return self.lin(x) * self.step


def test_module_state_writes_as_eager():
    torch.manual_seed(0)
    m, ref = Counter(), Counter()
    ref.load_state_dict(m.state_dict())
    before = [t._version for t in (m.step, m.avg, ref.step, ref.avg)]
    cm = torch.compile(m, backend="xla")
    for i in range(3):
        x = _seeded(3, 5, seed=i)
        got, want = no_fallback(cm, x), ref(x)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for (name, a), b in zip(m.state_dict().items(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6, msg=name)
    after = [t._version for t in (m.step, m.avg, ref.step, ref.avg)]
    assert [a - b for a, b in zip(after[:2], before)] == [
        a - b for a, b in zip(after[2:], before[2:])
    ]


# -- gradients through writes ------------------------------------------------------------------
def grad_writes(w, v):
    x = w * 2
    x[x > 0] = v
    x[torch.tensor([0, 2])] += w[1]
    x.diagonal().mul_(3)
    for i in range(1, 4):
        x[i] = x[i] + x[i - 1]
    return x.index_put((torch.tensor([0, 0, 3]),), w[:3], accumulate=True)


def _value_and_grads(fn, leaves):
    leaves = [t.clone().requires_grad_() for t in leaves]
    out = fn(*leaves)
    out.square().sum().backward()
    return [out.detach()] + [t.grad for t in leaves]


def test_gradients_through_writes_as_eager():
    # float32 sums in another order: ours is as close to the float64 result as eager's
    compiled = torch.compile(grad_writes, backend="xla", options={"strict": True})
    for call in range(2):
        leaves = [_seeded(4, 5, seed=call), torch.tensor(2.0)]
        exact = _value_and_grads(grad_writes, [t.double() for t in leaves])
        want = _value_and_grads(grad_writes, leaves)
        got = _value_and_grads(compiled, leaves)
        for g, w, e in zip(got, want, exact):
            assert (g.dtype, g.shape) == (w.dtype, w.shape)
            bound = 4 * (w.double() - e).abs().max() + 1e-6 * e.abs().max()
            assert (g.double() - e).abs().max() <= bound, (g, w, e)
