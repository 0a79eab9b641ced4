"""Metadata-mutating ops and ``out=`` on inputs and views as users write them (session 32,
``scripts/probe_meta32.py``), against eager PyTorch strictly, in the classes the probe found
wrong:

- an ``out=`` tuple tensor overlapping what the op reads (``torch.max(x, 0, out=(x[0], i))``)
  ran where eager raises its partial-overlap error (the check read ``out=`` as one tensor);
- a write eager accepts although it reads memory it writes, whose eager result is not the
  functional graph's (``torch.sum(x, 0, out=x[0])``: eager fills the out tensor with the sum's
  identity before reading ``x``; ``torch.matmul(x, x, out=x)``: zeros; ``x.addmm_(x, x)``,
  ``x.masked_scatter_(m, x)``, ``x[:2, :2] = x[:2, :2].t()``: eager reads what it wrote), was
  compiled to the functional answer;
- the same, where the memory is shared by two inputs of the call (``torch.sum(x, 0, out=y)``
  called with ``b, b[0]``; ``a.addmm_(b, b)`` with ``a is b``);
- a one-dim expanded output (``x.sum().expand(4)``) came back dense (stride 1), so a later
  ``out=`` into it ran where eager raises its overlap error;
- outputs that own memory eager lays out with gaps or an offset (``y.as_strided_((2, 2),
  (1, 3))`` of an intermediate, ``torch.empty_strided``) came back row-major;
- outputs of a program padded to a size bucket were views of the padded result (``_base`` set,
  ``detach_()`` raised "Can't detach views in-place").
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch2xla


def _r(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _long(*shape):
    return torch.zeros(shape, dtype=torch.long)


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except RuntimeError as e:
        return None, e


# -- out= tuples overlapping the input --------------------------------------------------------------
def max_into_row(x):
    torch.max(x, 0, out=(x[0], _long(4)))
    return x


def min_into_row(x):
    torch.min(x, 0, out=(x[0], _long(4)))
    return x


def max_into_expanded(x, c):
    torch.max(x, 0, out=(c.expand(4), _long(4)))
    return x


@pytest.mark.parametrize("fn", [max_into_row, min_into_row, max_into_expanded])
def test_out_tuple_overlapping_raises_as_eager(fn):
    args = [_r(3, 4), torch.zeros(1)][: fn.__code__.co_argcount]
    _, want = _outcome(fn, *[a.clone() for a in args])
    assert want is not None
    x = [a.clone() for a in args]
    with pytest.raises(RuntimeError, match="unsupported operation") as got:
        torch.compile(fn, backend="xla")(*x)
    assert str(want).split(".")[0] in str(got.value)
    assert torch.equal(x[0], args[0])  # (nothing written)


# -- writes reading memory they write, eager accepting them ------------------------------------------
def sum_into_row(x):
    torch.sum(x, 0, out=x[0])
    return x


def sort_into_shifted(x):
    torch.sort(x[:, :3], 1, out=(x[:, 1:], _long(x.shape[0], 3)))
    return x


def exp_into_self(x):
    torch.exp(x, out=x)
    return x


def cummax_into_self(x):
    torch.cummax(x, 1, out=(x, _long(3, 4)))
    return x


def add_itself(x):
    return x.add_(x)


def matmul_into_self(x):
    torch.matmul(x, x, out=x)  # (eager's product into an operand: zeros)
    return x


def mm_into_second(x):
    y = x * 2
    torch.mm(x, y, out=y)
    return x, y


def addmm_self(x):
    return x.addmm_(x, x)


def baddbmm_self(x):
    x = x.view(2, 2, 4)[:, :, :2].contiguous()
    return x.baddbmm_(x, x)


def masked_scatter_self(x):
    return x.masked_scatter_(x > 0, x)


def block_transposed_in_place(x):
    x[:2, :2] = x[:2, :2].t()
    return x


def amax_into_row(x):
    torch.amax(x, 0, out=x[0])
    return x


def prod_into_row(x):
    torch.prod(x, 0, out=x[0])
    return x


@pytest.mark.parametrize(
    "fn",
    [
        sum_into_row,
        sort_into_shifted,
        matmul_into_self,
        mm_into_second,
        addmm_self,
        baddbmm_self,
        masked_scatter_self,
        block_transposed_in_place,
        amax_into_row,
        prod_into_row,
    ],
)
def test_write_reading_itself_eager_computes_otherwise_runs_in_eager(fn):
    want = fn(_r(4, 4))
    x = _r(4, 4)
    with warnings.catch_warnings():  # (a FallbackWarning where our graph holds the write)
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        got = torch.compile(fn, backend="xla")(x)
    if isinstance(want, tuple):
        assert got[0] is x
        for g, w in zip(got, want):
            assert torch.equal(g, w)
    else:
        assert torch.equal(got, want)


def sum_into(x, y):
    torch.sum(x, 0, out=y)
    return x


def addmm_of(a, b):
    return a.addmm_(b, b)


def block_of(a, b):
    a[:2, :2] = b[:2, :2].t()
    return a


@pytest.mark.parametrize(
    "fn, make",
    [
        (sum_into, lambda b: (b, b[0])),
        (addmm_of, lambda b: (b, b)),
        (block_of, lambda b: (b, b)),
    ],
)
def test_write_reading_another_input_of_its_memory_as_eager(fn, make):
    want = fn(*make(_r(4, 4)))
    got = fn(*make(_r(4, 4)))
    assert torch.equal(got, want)
    f = torch.compile(fn, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        got = f(*make(_r(4, 4)))
        # the same graph with distinct inputs compiles the functional answer
        b, c = _r(4, 4), _r(4, 4, seed=1)
        distinct = f(b, c[0] if fn is sum_into else c)
    assert torch.equal(got, want)
    other = _r(4, 4, seed=1)
    torch.testing.assert_close(distinct, fn(_r(4, 4), other[0] if fn is sum_into else other))


@pytest.mark.parametrize("fn", [exp_into_self, cummax_into_self, add_itself])
def test_write_reading_itself_as_the_functional_graph_compiles(fn):
    want = fn(_r(3, 4))
    x = _r(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.FallbackWarning)
        got = torch.compile(fn, backend="xla")(x)
    assert got is x
    torch.testing.assert_close(got, want, rtol=0, atol=0)


# -- one-dim expanded outputs --------------------------------------------------------------------------
def sum_expanded(x):
    return x.sum().expand(4), (x * 2).sum(0).expand(5)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_one_dim_expanded_output_keeps_stride_0(requires_grad):
    x = _r(3).requires_grad_(requires_grad)
    want = sum_expanded(x)
    got = torch.compile(sum_expanded, backend="xla")(x)
    for g, w in zip(got, want):
        assert (g.shape, g.stride(), g.requires_grad) == (w.shape, w.stride(), w.requires_grad)
        assert torch.equal(g, w)
    if requires_grad:
        (gx,) = torch.autograd.grad(sum(o.sum() for o in got), x)
        (wx,) = torch.autograd.grad(sum(o.sum() for o in want), x)
        assert torch.equal(gx, wx)
    else:
        # a write into it raises as eager's (more than one element refers to one location)
        _, we = _outcome(lambda: torch.exp(x, out=want[0][:3]))
        _, ge = _outcome(lambda: torch.exp(x, out=got[0][:3]))
        assert we is not None and ge is not None and str(ge) == str(we)


def out_into_expanded(x):
    torch.exp(x[0], out=torch.zeros(1).expand(4))
    return x


def test_out_into_a_one_dim_expanded_tensor_raises_as_eager():
    _, want = _outcome(out_into_expanded, _r(3, 4))
    assert want is not None
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.compile(out_into_expanded, backend="xla")(_r(3, 4))


# -- outputs of a padded program ---------------------------------------------------------------------
def double(x):
    return x * 2, x.sum(1)


def test_padded_programs_outputs_are_not_views():
    f = torch.compile(double, backend="xla")
    for n in (2, 3, 5, 6):  # (3, 5, 6: one program per bucket, padded to 4 and 8)
        x = _r(n, 2, seed=n)
        got, want = f(x), double(x)
        for g, w in zip(got, want):
            assert torch.equal(g, w)
            assert (g.stride(), g._base is None, g._version) == (
                w.stride(),
                w._base is None,
                w._version,
            )
            g.detach_()  # (a view raised "Can't detach views in-place")
            g.view(-1)
    with torch.inference_mode():
        got, want = f(_r(7, 2)), double(_r(7, 2))
    for g, w in zip(got, want):
        assert g.is_inference() and g._base is None and torch.equal(g, w)


# -- outputs owning memory eager lays out with gaps ----------------------------------------------------
def as_strided_in_place(x):
    y = x * 2
    y.as_strided_((2, 2), (1, 3))
    z = x + 1
    z.as_strided_((2, 2), (4, 1), 1)
    w = torch.empty_strided((2, 2), (1, 3))
    w.copy_(x[:2, :2])
    return y, z, w


@pytest.mark.filterwarnings("ignore::torch2xla.BucketingWarning")
@pytest.mark.parametrize("dynamic", [False, True])
def test_outputs_owning_memory_with_gaps_keep_eagers_layout(dynamic):
    f = torch.compile(as_strided_in_place, backend="xla", dynamic=dynamic)
    for n in (3, 5):
        x = _r(n, 4, seed=n)
        for g, w in zip(f(x), as_strided_in_place(x)):
            assert torch.equal(g, w)
            assert (g.stride(), g.storage_offset(), g._base is None, g._version) == (
                w.stride(),
                w.storage_offset(),
                w._base is None,
                w._version,
            )
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                g.view(-1)  # (as eager's: its strides cannot take one dim)
