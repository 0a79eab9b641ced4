"""Session 23: an int argument that only positions a view or a write (``x[pos]``,
``x.narrow(0, start, 3)``, ``cache[:, pos:pos + 1] = k``) shares one program across its values
(``capture/_int_offsets.py``), with eager's values, gradients, in-place writes and errors; where
the copy it reads could be told apart from eager's view, the int stays a constant."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla
from tests._util import assert_same, fresh_dynamo


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


READS = {
    "select": lambda x, p: x[p] * 2,
    "select_method": lambda x, p: x.select(1, p) + 1,
    "select_derived": lambda x, p: x[p - 1] + x[p + 1],
    "narrow": lambda x, p: x.narrow(0, p, 3).exp(),
    "slice": lambda x, p: x[p : p + 3].sum(0),
    "slice_step": lambda x, p: x[p : p + 5 : 2] * 3,
    "slice_inner": lambda x, p: x[:, p : p + 2].cumsum(1),
    "ellipsis": lambda x, p: x[..., p : p + 2] - 1,  # (x[..., p]: Dynamo specializes p)
    "view_of_read": lambda x, p: x[p].view(2, 4) @ x[0].view(4, 2),
    "with_value_use": lambda x, p: x[p] * p,
}


@pytest.mark.parametrize("name", list(READS))
def test_int_positions_of_reads_share_one_program(name):
    fn = READS[name]
    with fresh_dynamo(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.IntArgumentWarning)
        compiled = torch.compile(fn, backend="xla")
        w = _rand(10, 8, seed=9).requires_grad_()
        for p in (1, 2, 4, 3, 5, 2):
            x, xe = _rand(10, 8, seed=p) * w, _rand(10, 8, seed=p) * w
            out, ref = compiled(x, p), fn(xe, p)
            assert_same(out, ref)
            (gw,) = torch.autograd.grad(out.square().sum(), w)
            (ge,) = torch.autograd.grad(ref.square().sum(), w)
            assert_same(gw, ge)
        info = torch2xla.cache_info(compiled)
    assert [g.misses for g in info] == [1, 1]  # the first value static, then one program


def test_cache_write_at_int_position_shares_one_program():
    def step(cache, k, pos):
        cache[:, pos : pos + 1] = k
        return cache.sum(1)

    def step_broadcast(cache, k, pos):
        cache[:, pos : pos + 1] = k  # broadcast (4,) into (2, 1, 4), cast from float64
        cache[:, pos + 1 : pos + 2] = 0.5  # a number
        return cache * 2

    for fn, make_k in (
        (step, lambda p: _rand(2, 1, 4, seed=p)),
        (step_broadcast, lambda p: _rand(4, seed=p).double()),
    ):
        with fresh_dynamo():
            compiled = torch.compile(fn, backend="xla")
            cache, ref_cache = torch.zeros(2, 16, 4), torch.zeros(2, 16, 4)
            for pos in range(7):
                k = make_k(pos)
                assert_same(compiled(cache, k, pos), fn(ref_cache, k.clone(), pos))
                assert torch.equal(cache, ref_cache)
            assert [g.misses for g in torch2xla.cache_info(compiled)] == [1, 1]


def test_write_gradients_through_int_position():
    def fn(x, v, pos):
        y = x * 1
        y[pos] = v * 3
        return (y * torch.arange(1.0, 7.0)[:, None]).sum()

    with fresh_dynamo():
        compiled = torch.compile(fn, backend="xla")
        for pos in (1, 4, 2):
            x, v = _rand(6, 3).requires_grad_(), _rand(3, seed=1).requires_grad_()
            xe, ve = x.detach().clone().requires_grad_(), v.detach().clone().requires_grad_()
            assert_same(compiled(x, v, pos), fn(xe, ve, pos))
            gx, gv = torch.autograd.grad(compiled(x, v, pos), (x, v))
            ge = torch.autograd.grad(fn(xe, ve, pos), (xe, ve))
            assert_same((gx, gv), ge)
        assert [g.misses for g in torch2xla.cache_info(compiled)] == [1, 1]


def _read_then_write(x, p):
    v = x[p]
    x.add_(1)
    return v * 1


KEPT = {
    # a returned view: eager's output is a view of x (written through later)
    "returned_view": lambda x, p: x[p],
    # read, then written in place: eager's view sees the write
    "read_then_write": lambda x, p: _read_then_write(x, p),
    # from the end: x[-p] wraps
    "negative": lambda x, p: x[-p] * 2,
    # a transposed base: the view is not row-major
    "transposed": lambda x, p: x.t()[p : p + 2] * 2,
}


@pytest.mark.parametrize("name", list(KEPT))
def test_views_the_copy_would_change_keep_the_int(name):
    fn = KEPT[name]
    with fresh_dynamo(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.IntArgumentWarning)
        compiled = torch.compile(fn, backend="xla")
        for p in (1, 2, 3):
            x, xe = _rand(6, 4, seed=p), _rand(6, 4, seed=p)
            out, ref = compiled(x, p), fn(xe, p)
            assert_same(out, ref)
            assert out.stride() == ref.stride()
            assert torch.equal(x, xe)
            if name == "returned_view":
                out.fill_(7.0)
                ref.fill_(7.0)
                assert torch.equal(x, xe)


def test_position_out_of_range_raises_eagers_error():
    fn = lambda x, p: x[p] * 2
    with fresh_dynamo():
        compiled = torch.compile(fn, backend="xla")
        for p in (1, 2):
            assert_same(compiled(_rand(5, 3), p), fn(_rand(5, 3), p))
        with pytest.raises(IndexError, match="out of bounds"):
            fn(_rand(5, 3), 7)
        with pytest.raises(IndexError):  # (Dynamo's fake select: "index s87 out of range")
            compiled(_rand(5, 3), 7)
