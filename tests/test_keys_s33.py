"""Stale programs, session 33: one compiled function called alternately with inputs that
differ in one property its program was specialized to (``scripts/probe_keys33.py`` finds
more), each call strictly against eager."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _r(*shape, seed=0, rg=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(rg)


def _same(got, exp):
    if isinstance(exp, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert (got.dtype, got.shape, got.stride()) == (exp.dtype, exp.shape, exp.stride())
        assert got.requires_grad == exp.requires_grad
        torch.testing.assert_close(got.detach(), exp.detach(), rtol=0, atol=0)
    elif isinstance(exp, list | tuple):
        assert type(got) is type(exp) and len(got) == len(exp)
        for g, e in zip(got, exp):
            _same(g, e)
    else:
        assert got == exp


# -- outputs that are views of inputs, where Dynamo's example inputs shared memory ------------
def _views(a, b):
    return b.t(), a.unsqueeze(0), b[1:], b.view(-1)[::2]


@pytest.mark.parametrize("dynamic", [False, True])
def test_output_views_follow_their_input_after_aliased_examples(dynamic):
    # traced for f(x.view(-1), x): every input of the examples' storage looked alike, and the
    # first one was taken for every view; f(a, m)'s m.t() was a view of a
    f = torch.compile(_views, backend="xla", dynamic=dynamic)

    def use(fn, a, b):
        outs = fn(a, b)
        bases = [o._base is a or o._base is b for o in outs]
        outs[0].add_(100)  # seen through the other views of b only
        return [o.clone() for o in outs], a.clone(), b.clone(), bases

    def aliased():
        base = _r(3, 2)
        return base.view(-1), base

    def apart():
        return _r(6, seed=1), _r(3, 2, seed=2)

    for make in (aliased, apart, aliased, apart):
        _same(use(f, *make()), use(_views, *make()))


def test_output_views_gradients_after_aliased_examples():
    def body(a, b):
        return a * 2, b.t(), b[0]

    f = torch.compile(body, backend="xla")

    def use(fn, kind):
        w = _r(4, seed=1, rg=True)
        v = _r(2, 2, seed=3, rg=True)
        outs = fn(w, w.view(2, 2) if kind == "aliased" else v)
        (outs[0].sum() + (outs[1] * outs[1]).sum() + outs[2].sum() * 3).backward()
        return outs, w.grad, v.grad  # (v.grad: None where v is not passed, as eager's)

    for kind in ("aliased", "apart", "aliased", "apart"):
        _same(use(f, kind), use(body, kind))


# -- the overlap signature's memo, where an input's strides are symbols of their own ---------
def test_overlap_signature_follows_strides_changed_in_place():
    # one tensor object given other strides in place keeps its data pointer: the memo of the
    # overlap signature gave the old strides' signature, and the program that took ``b`` out
    # of the shared base at stride 4 served stride 5
    def body(a, b):
        a.add_(1)
        return b * 2

    f = torch.compile(body, backend="xla")
    base_e, base_c = torch.arange(20.0), torch.arange(20.0)
    ae, be = base_e[0:2], base_e.as_strided((2, 1), (3, 1), 0)
    ac, bc = base_c[0:2], base_c.as_strided((2, 1), (3, 1), 0)
    for n in (3, 4, 5, 6, 1, 7, 5):
        be.as_strided_((2, 1), (n, 1), 0)
        bc.as_strided_((2, 1), (n, 1), 0)
        _same(f(ac, bc), body(ae, be))
        _same(base_c, base_e)


# -- the memo of eager's verdict on converting a Python number -------------------------------
@pytest.mark.parametrize("first", ["float", "int"])
def test_overflow_verdict_memo_keeps_int_and_float_apart(first):
    from torch2xla.ops._check_args import _overflow

    def eager(v):
        try:
            torch.empty(2, dtype=torch.int64).fill_(v)
        except RuntimeError as e:
            return str(e)
        return None

    # 2**63 == float(2**63): one entry of an untyped memo answered for both
    values = [float(2**63), 2**63] if first == "float" else [2**63, float(2**63)]
    for v in values * 2:
        assert _overflow(v, torch.int64) == eager(v)
