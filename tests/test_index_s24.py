"""Session 24: indexing, masking, scatter and gather as users write them, against eager
(values, gradients and their None-ness, errors with the user's line). Found by
``scripts/probe_index24.py``.
"""

from __future__ import annotations

import pytest
import torch

import torch2xla
from tests._util import assert_same

THIS = "test_index_s24.py"


def _compiled(fn, strict=True):
    return torch.compile(fn, backend="xla", options={"strict": True} if strict else {})


def _weights(t):
    return (torch.arange(t.numel(), dtype=torch.float64).reshape(t.shape) % 7 - 2.5).to(t.dtype)


def _step(fn, make, compiled: bool, strict=True):
    """(output, each input's ``.grad`` after ``backward`` of a weighted sum; None stays None)."""
    torch._dynamo.reset()
    args = make()
    out = (_compiled(fn, strict) if compiled else fn)(*args)
    (out * _weights(out)).sum().backward()
    return out.detach(), [a.grad if isinstance(a, torch.Tensor) else None for a in args]


def _assert_grads_as_eager(fn, make, strict=True):
    got, want = _step(fn, make, True, strict), _step(fn, make, False)
    assert_same(got[0], want[0])
    assert [g is None for g in got[1]] == [g is None for g in want[1]]
    for g, w in zip(got[1], want[1]):
        if w is not None:
            assert g.layout == w.layout
            assert_same(g.to_dense(), w.to_dense())


def _eager_error(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return e
    raise AssertionError("eager raised nothing")


def _assert_raises_as_eager(fn, make):
    """The compiled call raises eager's error type and message, naming the user's line."""
    expected = _eager_error(fn, *make())
    torch._dynamo.reset()
    with pytest.raises(type(expected)) as info:
        _compiled(fn)(*make())
    assert str(expected).splitlines()[0] in str(info.value)
    assert isinstance(info.value, torch2xla.OpError)
    assert THIS in str(info.value)  # the user's line


def _leaf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).float().requires_grad_()


def i(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


# -- index_select: a 0-d index keeps the dim; a 2-d index raises -------------------------------
def test_index_select_of_a_0d_index_keeps_the_dim():
    # eager: (1, 3); the lowering's take dropped the dim: (3,)
    x = torch.randn(4, 3)
    out = _compiled(lambda x, ix: x.index_select(0, ix) * 2)(x, torch.tensor(-1 + 4))
    assert_same(out, x.index_select(0, torch.tensor(3)) * 2)


def test_index_select_of_a_2d_index_raises_as_eager():
    _assert_raises_as_eager(
        lambda x, ix: x.index_select(0, ix), lambda: (torch.randn(4, 3), i(0, 1, 2, 3).view(2, 2))
    )


# -- index shapes eager refuses -----------------------------------------------------------------
def _set(t, index, v):
    t[index] = v
    return t


def _set2(t, a, c, v):
    t[a, c] = v
    return t


@pytest.mark.parametrize(
    "fn, make",
    [
        # a mask shorter than the dim it covers (the lowering raised a TypeError)
        (_set, lambda: (torch.randn(4, 3), torch.tensor([True, False, True]), 1.0)),
        # a mask over two dims, its second wrong
        (_set, lambda: (torch.randn(4, 3), torch.ones(4, 2, dtype=torch.bool), torch.tensor(2.0))),
        # integer indices that do not broadcast together (the meta kernel's RuntimeError)
        (_set2, lambda: (torch.randn(4, 5), i(0, 3, 1), i(1, 2), 1.0)),
        (
            lambda t, m, v: torch.index_put(t, (m,), v),
            lambda: (torch.randn(3), torch.tensor([True, False, True, True]), torch.randn(1)),
        ),
    ],
    ids=["short mask", "mask's second dim", "indices do not broadcast", "index_put long mask"],
)
def test_index_shapes_eager_refuses_raise_its_index_error(fn, make):
    _assert_raises_as_eager(fn, make)


# -- gradients ----------------------------------------------------------------------------------
def test_index_fill_value_gradient_counts_each_position_once():
    # eager: grad.index_select(dim, unique(index)).sum(); duplicates were counted twice
    _assert_grads_as_eager(
        lambda x, ix, v: x.index_fill(1, ix, v),
        lambda: (_leaf(3, 4), i(3, 0, 3), torch.tensor(2.0, requires_grad=True)),
    )


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("op", ["scatter_reduce", "index_reduce"])
def test_extreme_reductions_share_the_gradient_as_eager(op, reduce, include_self):
    # Ties share each result's gradient evenly; eager's formula counts ``self`` among them
    # where it equals the result, also with include_self=False (whose own gradient is zero
    # there): with include_self=False the scattered values got g/2 where eager gives g/3.
    def fn(x, ix, s):
        return getattr(x, op)(0, ix, s, reduce, include_self=include_self)

    def make():
        x = torch.tensor([1.0, 2, 3, 0, 2]).requires_grad_()
        s = torch.tensor([1.0, 2, 3, 3, 0, 3]).requires_grad_()
        return x, i(0, 0, 1, 2, 2, 2), s

    _assert_grads_as_eager(fn, make)


def test_scatter_pooling_trains_as_eager():
    # a graph-pooling step (segment max of node features) with ties between the nodes
    def fn(h, batch):
        index = batch[:, None].expand_as(h)
        return torch.zeros(3, 2).scatter_reduce(0, index, h, "amax", include_self=False)

    def make():
        # (ties between nodes, and a segment maximum equal to the zeros it is scattered into)
        h = torch.tensor([[1.0, 0], [1, 2], [0, 2], [-1, 0], [-1, 3]]).requires_grad_()
        return h, i(0, 0, 0, 1, 2)

    _assert_grads_as_eager(fn, make)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_legacy_scatter_reduce_backward_raises_as_eager(reduce):
    # eager has no derivative: "derivative for aten::scatter is not implemented" at backward;
    # multiply failed to compile (JAX's scatter-multiply gradient needs unique indices)
    def fn(x, s):
        return x.scatter(0, i(0, 2), s, reduce=reduce)

    x, s = _leaf(4), _leaf(2, seed=1)
    out = _compiled(fn)(x, s)
    assert_same(out.detach(), fn(x, s).detach())
    with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
        out.sum().backward()


def test_scatter_of_a_larger_src_raises_at_backward_as_eager():
    # eager's ScatterBackward0 returns src's gradient in the index's shape, which its engine
    # refuses; we returned a gradient
    def fn(x, s):
        return x.scatter(0, i(3, 0), s)

    x, s = _leaf(4), _leaf(5, seed=1)
    out = _compiled(fn)(x, s)
    assert_same(out.detach(), fn(x, s).detach())
    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 1"):
        out.sum().backward()


def test_gather_with_sparse_grad_gives_eager_sparse_gradient():
    # the gradient was dense; the gather a gradient reaches runs in eager (default options)
    with pytest.warns(torch2xla.FallbackWarning, match="sparse_grad=True"):
        _assert_grads_as_eager(
            lambda x, ix: torch.gather(x, 1, ix, sparse_grad=True),
            lambda: (_leaf(3, 4), i(1, 1, 0, 3, 3, 3).view(3, 2)),
            strict=False,
        )
    x, ix = torch.randn(3, 4), i(1, 1, 0, 3, 3, 3).view(3, 2)  # (without gradient: in XLA)
    assert_same(
        _compiled(lambda x, ix: torch.gather(x, 1, ix, sparse_grad=True))(x, ix), x.gather(1, ix)
    )


def test_masked_write_module_trains_as_eager():
    # h[pad] = p, h[h > 1] += q, h[:, 0] = r: values, the writes' gradients and None-ness
    class MaskedWrite(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.fill = torch.nn.Parameter(torch.tensor(0.5))
            self.rows = torch.nn.Parameter(torch.randn(4))
            self.unused = torch.nn.Parameter(torch.randn(2))

        def forward(self, x, pad):
            h = self.lin(x)
            h[pad] = self.fill
            h[h > 1.0] += self.rows[0]
            h[:, 0] = self.rows[1:3].sum()
            return (h**2).sum()

    torch.manual_seed(0)
    model = MaskedWrite()
    ref = MaskedWrite()
    ref.load_state_dict(model.state_dict())
    x, pad = torch.randn(3, 4), torch.tensor([True, False, True])
    _compiled(model)(x, pad).backward()
    ref(x, pad).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None)
        if q.grad is not None:
            assert_same(p.grad, q.grad)


@pytest.mark.parametrize(
    "fn",
    [lambda x, ix: x.gather(0, ix), lambda x, ix: torch.take_along_dim(x, ix, 0)],
    ids=["gather", "take_along_dim"],
)
def test_gather_gradient_of_bfloat16_sums_in_float32(fn):
    # eager's gather backward is a scatter_add, whose CPU kernel accumulates in float32: 600
    # gradients into one element give 296 (295 rounded once), JAX's transpose gave 320
    _assert_grads_as_eager(
        fn,
        lambda: (
            torch.ones(3, dtype=torch.bfloat16, requires_grad=True),
            torch.zeros(600, dtype=torch.int64),
        ),
    )


def _no_grad_index(x, ix):
    with torch.no_grad():
        y = x[ix] * 2
    return y + x.sum()


def _func_grad_gather(x, ix):
    return torch.func.grad(lambda x: x.gather(0, ix).pow(2).sum())(x)


@pytest.mark.parametrize(
    "fn, args",
    [
        (_no_grad_index, (torch.randn(4, 4, requires_grad=True), i(1, 4))),
        (_func_grad_gather, (torch.randn(4), i(1, 4, 3))),
    ],
    ids=["no_grad", "func.grad"],
)
def test_an_error_inside_a_with_block_leaves_eagers_state(fn, args):
    # The call that raises runs again in eager PyTorch (the replay), whose graph enters the
    # user's ``with`` block as a node and leaves it in a later node: the error skipped it, and
    # grad mode stayed off (the caller's next training step computed no gradient), or
    # torch.func.grad's disabled saved-tensor hooks stayed disabled.
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="xla")
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(*args)
    assert torch.is_grad_enabled()
    assert torch._C._autograd._saved_tensors_hooks_is_enabled()
    assert torch._C._functorch.get_dynamic_layer_stack_depth() == 0


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, ix: x.scatter_add_(0, ix, x),
        lambda x, ix: x.index_copy_(0, ix, x),
        lambda x, ix: x.put_(ix, x),
        lambda x, ix: x.index_put_((ix,), x),
        lambda x, ix: torch.index_select(x, 0, ix, out=x),
    ],
    ids=["scatter_add_", "index_copy_", "put_", "index_put_", "index_select out="],
)
def test_an_in_place_op_reading_its_own_target_raises_as_eager(fn):
    # eager's kernels that check overlap refuse the written tensor as another argument (a full
    # overlap); only views of it were looked for, and the call returned a value
    _assert_raises_as_eager(fn, lambda: (torch.randn(4), i(1, 0, 3, 2)))


def test_an_in_place_op_reading_its_own_target_runs_where_eager_does():
    def fn(x):
        x.add_(x)
        return x.mul_(x)

    x = torch.randn(4)
    assert_same(_compiled(fn)(x.clone()), fn(x.clone()))


# -- 0-d integer tensors as subscripts: gathered and scattered in XLA ----------------------------
def _set_at(x, k, v):
    x[k] = v
    return x


def _set_col(x, k, v):
    x[:, k] = v
    return x


def _augmented(x, k):
    x[k] += 1
    x[k] *= x[0].sum()
    x[:, k] -= x[k, 0]
    return x


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, k: x[k] * 2, lambda: (torch.randn(4, 3, 5), torch.tensor(-1))),
        (lambda x, k: x[:, k].exp(), lambda: (torch.randn(4, 3, 5), torch.tensor(2))),
        (
            lambda x, k: x[..., k] + 1,
            lambda: (torch.randn(4, 3, 5), torch.tensor(4, dtype=torch.int32)),
        ),
        (
            lambda x, a, c: x[a, :, c] * 3,
            lambda: (torch.randn(4, 3, 5), torch.tensor(3), torch.tensor(-5)),
        ),
        (lambda x, k: x[None, 1, k] - 1, lambda: (torch.randn(4, 3, 5), torch.tensor(1))),
        (_set_at, lambda: (torch.randn(4, 3, 5), torch.tensor(2), torch.randn(1, 3, 5))),
        (_set_col, lambda: (torch.randn(4, 3, 5), torch.tensor(1), torch.randn(4, 5))),
        (_set_col, lambda: (torch.randn(4, 3, 5), torch.tensor(1), 2.5)),
        (_augmented, lambda: (torch.randn(4, 3, 5), torch.tensor(2))),
    ],
    ids=[
        "row",
        "column",
        "ellipsis int32",
        "two",
        "None and int",
        "set row",
        "set column",
        "fill",
        "x[k] += v",
    ],
)
def test_a_0d_tensor_subscript_runs_in_xla_as_eager(fn, make):
    # eager selects at the index's value (.item()); the export could not read it, so the op
    # ran in eager (strict mode refused it)
    torch._dynamo.reset()
    args = make()
    out = _compiled(fn)(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    assert_same(out, fn(*args))


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x, k: x[k] * 2, lambda: (torch.randn(4, 3, 5), torch.tensor(4))),
        (lambda x, k: x[:, k] * 2, lambda: (torch.randn(4, 3, 5), torch.tensor(-4))),
        (lambda x, k: x[None, :, k] * 2, lambda: (torch.randn(4, 3, 5), torch.tensor(3))),
        (
            lambda x, a, c: x[a, :, c] * 3,
            lambda: (torch.randn(4, 3, 5), torch.tensor(3), torch.tensor(-6)),
        ),
        (_set_col, lambda: (torch.randn(4, 3, 5), torch.tensor(3), 1.0)),
    ],
    ids=["row", "column", "after None", "second", "set column"],
)
def test_a_0d_tensor_subscript_out_of_range_raises_as_eager(fn, make):
    # eager's select names the dim by the index's position in the subscript (advanced
    # indexing numbers the indexed dims: "dimension 0" where eager says 1). Dynamo traces
    # each index value anew (its trace raises for one out of range), so the graph it made for
    # an index in range is called with one out of range directly.
    expected = _eager_error(fn, *make())
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(
            torch._dynamo.lookup_backend("xla")(gm, example_inputs, options={"strict": True})
        )
        return graphs[-1]

    torch._dynamo.reset()
    in_range = [
        torch.tensor(0) if isinstance(a, torch.Tensor) and a.ndim == 0 else a for a in make()
    ]
    torch.compile(fn, backend=backend)(*in_range)
    (graph,) = graphs
    with pytest.raises(type(expected)) as info:
        graph(*[a for a in make() if isinstance(a, torch.Tensor)])
    assert str(expected) in str(info.value)
    assert isinstance(info.value, torch2xla.OpError) and THIS in str(info.value)


def test_a_0d_tensor_subscript_whose_view_is_seen_stays_a_view():
    # where the view eager returns can be told from a copy (returned, written through, its
    # base written while it is read), the op keeps running in eager
    def fn(x, k):
        row = x[k]
        row.mul_(2)
        return x.sum(), x[k]

    x = torch.randn(4, 3)
    with pytest.warns(torch2xla.FallbackWarning, match="row = x"):
        got = torch.compile(fn, backend="xla")(x.clone(), torch.tensor(1))
    want = fn(x.clone(), torch.tensor(1))
    assert_same(got, want)


def test_a_ring_buffer_written_at_a_tensor_step_trains_no_eager_op():
    class Ring(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mem", torch.zeros(3, 2))
            self.register_buffer("step", torch.tensor(0))

        def forward(self, v):
            self.mem[self.step % 3] = v
            self.step += 1
            return self.mem.sum(0)

    torch._dynamo.reset()
    model, ref = Ring(), Ring()
    compiled = _compiled(model)  # (strict: any op left to eager raises)
    for k in range(4):
        v = torch.full((2,), float(k + 1))
        assert_same(compiled(v), ref(v))
    assert_same((model.mem, model.step), (ref.mem, ref.step))
