"""Views, aliasing and in-place writes as users write them, compared with eager: the values,
the inputs' final contents and versions, and which outputs are (views of) the inputs."""

import warnings

import pytest
import torch

from tests._util import assert_same, clone_args

T = torch.tensor


def _both(fn, *args, options=None):
    """(compiled output, eager output, compiled args after, eager args after); no warning."""
    a_xla, a_eager = clone_args(args), clone_args(args)
    compiled = torch.compile(fn, backend="xla", options=options or {"strict": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compiled(*a_xla)
    return out, fn(*a_eager), a_xla, a_eager


# In-place methods return their input itself: ``y = x.masked_fill_(m, 0)`` is ``x``.
IN_PLACE_RETURNED = {
    "masked_fill_": lambda x, i: x.masked_fill_(x > 4, -1.5),
    "masked_scatter_": lambda x, i: x.masked_scatter_(x > 4, -torch.arange(12.0)),
    "index_add_": lambda x, i: x.index_add_(0, i, torch.ones(3, 4), alpha=2),
    "index_copy_": lambda x, i: x.index_copy_(0, i[:2], -torch.ones(2, 4)),
    "index_fill_": lambda x, i: x.index_fill_(1, i, 9),
    "index_reduce_": lambda x, i: x.index_reduce_(0, i, torch.ones(3, 4), "amax"),
    "scatter_": lambda x, i: x.scatter_(1, i.view(3, 1), 2.5),
    "scatter_reduce_": lambda x, i: x.scatter_reduce_(
        1, i.view(3, 1), torch.ones(3, 1), "sum", include_self=False
    ),
    "put_": lambda x, i: x.put_(i, T([7.0, 8, 9]), accumulate=True),
    "add_then_mul_": lambda x, i: x.add_(1).mul_(2),
    "iadd": lambda x, i: x.__iadd__(1),
}


@pytest.mark.parametrize("write", IN_PLACE_RETURNED.values(), ids=IN_PLACE_RETURNED.keys())
def test_in_place_result_is_the_input(write):
    out, ref, (x, _), (ex, _) = _both(write, torch.arange(12.0).reshape(3, 4), T([0, 2, 0]))
    assert ref is ex and out is x
    assert_same(x, ex)
    assert x._version == ex._version


@pytest.mark.parametrize(
    "value", [T(-2.5), T([3.5]), T(2.5, dtype=torch.float64), T(True), T(7)], ids=str
)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.float32, torch.bool])
def test_mask_assignment_of_one_value_of_another_dtype(value, dtype):
    # eager's index_put_ fills a mask with one CPU value as masked_fill_(mask, value.item()),
    # which casts it; other indices require the value's dtype (below)
    def fn(t, v):
        t[t > 2] = v
        return t

    out, ref, args, eager_args = _both(fn, torch.arange(6).reshape(2, 3).to(dtype), value)
    assert_same((out, args), (ref, eager_args))


@pytest.mark.parametrize(
    "write",
    [
        lambda t, v: t.__setitem__(T([0, 2]), v),  # integer indices
        lambda t, v: t.index_put_((t > 2,), v, accumulate=True),
        lambda t, v: t.__setitem__(t > 2, v.expand(3)),  # one value per element
    ],
    ids=["int_index", "accumulate", "values"],
)
def test_index_put_of_another_dtype_still_raises(write):
    t = torch.arange(6)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination"):
        write(t.clone(), T(2.5))
    with pytest.raises(RuntimeError, match="Index put requires the source and destination"):
        torch.compile(write, backend="xla")(t.clone(), T(2.5))


OVERLAPPING_WINDOWS = {
    "unfold_mul_": lambda x: x.unfold(0, 3, 1).mul_(10),
    "unfold_slice_iadd": lambda x: x.unfold(0, 3, 2)[1:3].__iadd__(1),
    "unfold_row_setitem": lambda x: x.unfold(0, 3, 1).__setitem__(1, T([7.0, 8, 9])),
    "unfold_row_add_": lambda x: x.unfold(0, 4, 2)[2].add_(5),
    "as_strided_copy_": lambda x: x.as_strided((3, 3), (2, 1)).copy_(torch.ones(3, 3)),
}


@pytest.mark.parametrize("write", OVERLAPPING_WINDOWS.values(), ids=OVERLAPPING_WINDOWS.keys())
def test_writes_through_overlapping_windows(write):
    # eager writes each element of a view whose windows overlap in order (no error: only
    # stride-0 overlap is refused); functionalization refuses the graph, so it runs in eager
    def fn(x):
        write(x)
        return x * 2

    x, ex = torch.arange(10.0), torch.arange(10.0)
    with pytest.warns(UserWarning, match="share memory"):
        out = torch.compile(fn, backend="xla")(x)
    assert_same((out, x), (fn(ex), ex))
    assert x._version == ex._version


def test_interleaved_view_without_overlap_compiles():
    # strides (3, 2) over sizes (2, 3) interleave without sharing an element: compiled
    def fn(x):
        x.as_strided((2, 3), (3, 2)).add_(1)
        return x

    out, ref, args, eager_args = _both(fn, torch.arange(10.0))
    assert_same((out, args), (ref, eager_args))


def test_detached_views_of_inputs_are_not_tracked():
    # ``x.detach()`` is a view of ``x`` that autograd does not follow: its gradient must not
    # reach ``x``, and writing through it changes ``x``
    def fn(x):
        return x.detach(), x.detach()[1:], x * 2

    x = torch.randn(3, requires_grad=True)
    ex = x.detach().clone().requires_grad_()
    out, ref = torch.compile(fn, backend="xla")(x), fn(ex)
    assert [o.requires_grad for o in out] == [o.requires_grad for o in ref] == [False, False, True]
    sum(o.sum() for o in out).backward()  # (the detached ones raise if tracked... or add up)
    ref[2].sum().backward()
    assert_same(x.grad, ex.grad)
    out[1].mul_(10)
    ref[1].mul_(10)
    assert_same(x, ex)


def test_view_taken_under_no_grad_is_returned_as_eager_does():
    def fn(x):
        with torch.no_grad():
            v = x[1:]
        return v, x * 2

    x = torch.randn(3, requires_grad=True)
    ex = x.detach().clone().requires_grad_()
    (v, y), (ev, ey) = torch.compile(fn, backend="xla")(x), fn(ex)
    assert (v.requires_grad, v.grad_fn, v._base is x) == (ev.requires_grad, None, True)
    (v.sum() + y.sum()).backward()  # (raised "Expected gradient function to be set")
    (ev.sum() + ey.sum()).backward()
    assert_same(x.grad, ex.grad)


OUTPUTS_OF_OUTPUTS = {
    "row": lambda y: (y, y[0]),
    "transpose_first": lambda y: (y.t(), y),
    "detach": lambda y: (y, y.detach()),
    "reshape_and_slice": lambda y: (y, y.view(-1)[::2], y[:, 1:]),
}


@pytest.mark.parametrize("views", OUTPUTS_OF_OUTPUTS.values(), ids=OUTPUTS_OF_OUTPUTS.keys())
@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_outputs_that_are_views_of_other_outputs(views, grad):
    # eager returns views of one new tensor: a write through one shows in the others
    def fn(x):
        return views(x * 2 + 1)

    x = torch.arange(12.0).reshape(3, 4).requires_grad_(grad)
    ex = x.detach().clone().requires_grad_(grad)
    out, ref = torch.compile(fn, backend="xla")(x), fn(ex)
    assert_same(out, ref)
    assert [o.requires_grad for o in out] == [o.requires_grad for o in ref]
    if grad:
        sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in out).backward()
        sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in ref).backward()
        assert_same(x.grad, ex.grad)
    with torch.no_grad():
        out[-1].fill_(-7)
        ref[-1].fill_(-7)
    assert_same(out, ref)


def _shift(x):
    x[1:] = x[:-1]


PARTIAL_OVERLAPS = {
    "setitem_shifted": _shift,
    "add_row": lambda x: x.add_(x[0]),
    "index_add_slice": lambda x: x.index_add_(0, T([0]), x[1:2]),
    "index_put_slice": lambda x: x.__setitem__(T([0, 1]), x[1:3]),
    "addcmul_rows": lambda x: x.addcmul_(x[0], x[1]),
    "out_view": lambda x: torch.add(x[0], 1, out=x.view(-1)[2:6]),
}


@pytest.mark.parametrize("write", PARTIAL_OVERLAPS.values(), ids=PARTIAL_OVERLAPS.keys())
@pytest.mark.parametrize("of", ["input", "intermediate"])
def test_write_reading_memory_it_writes_raises_as_eager(write, of):
    # eager refuses an in-place write whose other operand partially overlaps the written memory
    def fn(x):
        y = x if of == "input" else x * 1
        write(y)
        return y

    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to"):
        fn(torch.arange(12.0).reshape(3, 4))
    x = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to"):
        torch.compile(fn, backend="xla")(x)
    assert_same(x, torch.arange(12.0).reshape(3, 4))


NO_PARTIAL_OVERLAP = {
    "other_row": lambda x: x[0].add_(x[1]),
    "itself": lambda x: x.mul_(x),
    "same_memory": lambda x: x.view(-1)[:4].copy_(x[0]),
    "mask_element": lambda x: x.__setitem__(x > 5, x[0, 0]),
}


@pytest.mark.parametrize("write", NO_PARTIAL_OVERLAP.values(), ids=NO_PARTIAL_OVERLAP.keys())
def test_writes_eager_accepts_reading_their_memory(write):
    def fn(x):
        write(x)
        return x

    out, ref, args, eager_args = _both(fn, torch.arange(12.0).reshape(3, 4))
    assert_same((out, args), (ref, eager_args))


I8 = torch.int8
NUMBER_OVERFLOWS = {
    "fill_": (lambda x: x.fill_(300), I8),
    "fill_nan_into_long": (lambda x: x.fill_(float("nan")), torch.int64),
    "fill_inf_into_int": (lambda x: x.fill_(float("inf")), torch.int32),
    "fill_into_half": (lambda x: x.fill_(70000.0), torch.float16),
    "fill_into_float": (lambda x: x.fill_(1e300), torch.float32),
    "masked_fill_": (lambda x: x.masked_fill_(x > 0, -129), I8),
    "masked_fill": (lambda x: x.masked_fill(x > 0, 300), torch.uint8),
    "index_fill_": (lambda x: x.index_fill_(0, T([1]), 300), I8),
    "scatter_value": (lambda x: x.scatter_(0, T([1]), 300), I8),
    "full_like": (lambda x: torch.full_like(x, 300), I8),
    "clamp_": (lambda x: x.clamp_(min=-1000), I8),
    "where": (lambda x: torch.where(x > 0, x, 300), I8),
}


@pytest.mark.parametrize("fn, dtype", NUMBER_OVERFLOWS.values(), ids=NUMBER_OVERFLOWS.keys())
def test_python_number_that_overflows_the_dtype_raises_as_eager(fn, dtype):
    # eager's kernels convert a Scalar argument with an overflow check; the graph would cast
    x = torch.arange(3).to(dtype)
    with pytest.raises(RuntimeError, match="cannot be converted to type") as eager:
        fn(x.clone())
    with pytest.raises(RuntimeError, match="cannot be converted to type") as ours:
        torch.compile(fn, backend="xla")(x)
    assert str(eager.value) in str(ours.value)
    assert_same(x, torch.arange(3).to(dtype))


@pytest.mark.parametrize(
    "fn, dtype",
    [
        (lambda x: x.add_(300), I8),
        (lambda x: x * 300, I8),
        (lambda x: x.fill_(float("inf")), torch.float16),
    ],
    ids=["add_", "mul", "inf_into_half"],
)
def test_python_numbers_eager_wraps_or_keeps(fn, dtype):
    out, ref, args, eager_args = _both(fn, torch.arange(3).to(dtype))
    assert_same((out, args), (ref, eager_args))


def test_conjugate_view_of_an_input_is_returned_conjugated():
    # ``x.conj()`` is a view with the conjugate bit: returned as a plain view of ``x`` it gave
    # back ``x`` unconjugated
    def fn(x):
        return x.conj(), x.conj()[1:], x.conj().imag

    x = torch.randn(3, dtype=torch.complex64)
    out, ref = torch.compile(fn, backend="xla")(x), fn(x)
    assert_same(out, ref)
    assert [o.is_conj() for o in out[:2]] == [True, True] and out[2].is_neg()
    assert out[0]._base is x


REINTERPRETING_VIEWS = {
    "view_as_real": (lambda x: torch.view_as_real(x), torch.complex64),
    "view_as_complex": (lambda x: torch.view_as_complex(x.view(3, 2)), torch.float32),
    "view_int32": (lambda x: x.view(torch.int32)[1:], torch.float32),
    "slice_view_uint8": (lambda x: x[1:].view(torch.uint8), torch.float32),
}


@pytest.mark.parametrize(
    "fn, dtype", REINTERPRETING_VIEWS.values(), ids=REINTERPRETING_VIEWS.keys()
)
def test_views_reinterpreting_an_input_write_through(fn, dtype):
    x = torch.randn(6 if dtype == torch.float32 else 3).to(dtype)
    ex = x.clone()
    out, ref = torch.compile(fn, backend="xla")(x), fn(ex)
    assert_same(out, ref)
    assert out.stride() == ref.stride()
    out.zero_()
    ref.zero_()
    assert_same(x, ex)


def test_views_of_outputs_in_a_dynamic_graph():
    def fn(x):
        y = x * 2
        return y, y[1:]

    compiled = torch.compile(fn, backend="xla", dynamic=True)
    for n in (5, 7):
        y, tail = compiled(torch.ones(n, 2))
        tail.fill_(3)
        assert_same(y, torch.cat([torch.full((1, 2), 2.0), torch.full((n - 1, 2), 3.0)]))


def _grads_both(fn, make):
    """Gradients (and final values) of eager and compiled runs of ``fn`` on ``make()``'s
    (leaves, args); the loss reads every output and every argument after the call."""
    results = []
    for f in (fn, torch.compile(fn, backend="xla")):
        torch.manual_seed(0)
        leaves, args = make()
        out = f(*args)
        outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
        loss = sum((o * torch.arange(1.0, o.numel() + 1).view(o.shape)).sum() for o in outs)
        loss = loss + sum((a * 3).sum() for a in args if a.requires_grad)
        loss.backward()
        results.append(([a.detach() for a in args], [leaf.grad for leaf in leaves]))
    return results


def _through(*values):
    def make():
        w = torch.randn(3, requires_grad=True)
        z = torch.randn(3, requires_grad=True)
        return [w, z], [w * 1 if v == "w" else z if v == "z" else torch.randn(3) for v in values]

    return make


RECORDED_WRITES = {
    # (eager's write into a tensor that requires grad rebases its history on the new value)
    "mul_returned": (lambda y, z: y.mul_(2), _through("w", "z")),
    "mul_by_input": (lambda y, z: (y.mul_(z), y.add_(1), z * 1)[2], _through("w", "z")),
    "copy_": (lambda y, z: y.copy_(z * 2), _through("w", "z")),
    "setitem": (lambda y, z: (y.__setitem__(0, z.sum()), y * 1)[1], _through("w", "z")),
    "view_mul_": (lambda y, z: (y[1:].mul_(z[1:]), z * 1)[1], _through("w", "z")),
    "exp_": (lambda y, z: (y.exp_(), y.sum())[1], _through("w", "z")),
    # (a tensor without grad written with one that has it: eager's write makes it require grad)
    "into_tensor_without_grad": (lambda y, z: y.copy_(z * 2), _through("none", "z")),
}


@pytest.mark.parametrize("fn, make", RECORDED_WRITES.values(), ids=RECORDED_WRITES.keys())
def test_write_into_input_that_requires_grad_is_differentiated(fn, make):
    (args, grads), (eager_args, eager_grads) = _grads_both(fn, make)
    assert_same(args, eager_args)
    assert [g is None for g in grads] == [g is None for g in eager_grads]
    assert_same([g for g in grads if g is not None], [g for g in eager_grads if g is not None])


def _mul_under_no_grad(y, z):
    with torch.no_grad():
        y.mul_(2)
    return y * z


UNRECORDED_WRITES = {
    "no_grad": _mul_under_no_grad,
    "data": lambda y, z: (y.data.mul_(2), y * z)[1],
    "detach": lambda y, z: (y.detach().mul_(2), y * z)[1],
}


@pytest.mark.parametrize("fn", UNRECORDED_WRITES.values(), ids=UNRECORDED_WRITES.keys())
def test_write_autograd_does_not_record_keeps_the_inputs_history(fn):
    (args, grads), (eager_args, eager_grads) = _grads_both(fn, _through("w", "z"))
    assert_same(args, eager_args)
    assert_same(grads, eager_grads)


@pytest.mark.parametrize("value", [T(5), T(2.5), 5], ids=["same_dtype", "float", "number"])
def test_uint8_mask_assignment_of_one_value_raises_as_eager(value):
    # eager fills a mask with one value through masked_fill_, which refuses uint8 masks
    def fn(t, m):
        t[m] = value
        return t

    mask = T([1, 0, 1], dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks") as eager:
        fn(torch.arange(3), mask)
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks") as ours:
        torch.compile(fn, backend="xla")(torch.arange(3), mask)
    assert str(eager.value) in str(ours.value)


OVERFLOWING_TENSOR_VALUES = [
    (torch.int8, T(300)),
    (torch.int8, T(127.9)),
    (torch.uint8, T(-2.5)),
    (torch.int64, T(float("nan"))),
    (torch.int32, T(float("inf"))),
    (torch.float16, T(65520.0)),
    (torch.float32, T(1 + 1j)),
]


@pytest.mark.parametrize("dtype, value", OVERFLOWING_TENSOR_VALUES, ids=str)
@pytest.mark.parametrize("how", ["setitem", "masked_fill_"])
def test_one_value_tensor_that_overflows_the_dtype_raises_as_eager(dtype, value, how):
    # eager reads the value with .item() and converts it with an overflow check: at run time
    if how == "masked_fill_" and value.is_complex():
        pytest.skip("Dynamo's fake masked_fill_ raises its own error for a complex value")

    def fn(t, v):
        if how == "setitem":
            t[t > 0] = v
        else:
            t.masked_fill_(t > 0, v)
        return t

    with pytest.raises(RuntimeError, match="cannot be converted to type") as eager:
        fn(torch.arange(3).to(dtype), value)
    x = torch.arange(3).to(dtype)
    with pytest.raises(RuntimeError, match="cannot be converted to type") as ours:
        torch.compile(fn, backend="xla")(x, value)
    assert str(eager.value) in str(ours.value)
    assert_same(x, torch.arange(3).to(dtype))


@pytest.mark.parametrize(
    "dtype, value",
    [(torch.int8, T(127)), (torch.int8, T(-128.5 + 1)), (torch.float16, T(float("inf")))],
    ids=str,
)
def test_one_value_tensor_that_fits_the_dtype(dtype, value):
    def fn(t, v):
        t[t > 0] = v
        return t.masked_fill(t == 0, v)

    out, ref, args, eager_args = _both(fn, torch.arange(3).to(dtype), value)
    assert_same((out, args), (ref, eager_args))


def test_index_fill_with_a_tensor_value_of_another_dtype():
    # eager fills ``value.item()``: cast (no dtype error), with the overflow check
    def fn(t, v):
        return t.index_fill_(0, T([1]), v)

    out, ref, args, eager_args = _both(fn, torch.arange(3, dtype=torch.int8), T(3))
    assert_same((out, args), (ref, eager_args))
    with pytest.raises(RuntimeError, match="cannot be converted to type int8_t without overflow"):
        torch.compile(fn, backend="xla")(torch.arange(3, dtype=torch.int8), T(300))


def _recorded_then_unrecorded(y, z):
    y.mul_(z)
    with torch.no_grad():
        y.mul_(3)  # eager: not in y's history
    return y * 1


def test_input_written_with_and_without_autograds_record_runs_in_eager():
    with pytest.warns(UserWarning, match="written both in grad mode and without"):
        (args, grads), (eager_args, eager_grads) = _grads_both(
            _recorded_then_unrecorded, _through("w", "z")
        )
    assert_same((args, grads), (eager_args, eager_grads))


def _recorded_and_other_unrecorded(y, z, u):
    y.mul_(z)
    with torch.no_grad():
        u.mul_(3)  # another input: y's writes are all recorded
    return y * u


def test_recorded_write_beside_an_unrecorded_write_of_another_input():
    def make():
        w, z, v = (torch.randn(3, requires_grad=True) for _ in range(3))
        return [w, z, v], [w * 1, z, v * 1]

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        (args, grads), (eager_args, eager_grads) = _grads_both(_recorded_and_other_unrecorded, make)
    assert not [w for w in seen if "torch2xla" in str(w.message)]  # (compiled, not in eager)
    assert_same((args, grads), (eager_args, eager_grads))


@pytest.mark.parametrize(
    "fn",
    [torch.view_as_complex, lambda t: torch.view_as_complex(t.view(6).view(3, 2))[1:]],
    ids=["view_as_complex", "of-a-reshape"],
)
def test_a_returned_complex_view_of_a_real_input_keeps_its_gradient(fn):
    # The view was taken with Tensor.view(dtype), which autograd does not follow: the output
    # did not require grad where eager's does (view_as_complex is differentiable).
    x = torch.randn(3, 2, requires_grad=True)
    got, want = torch.compile(fn, backend="xla")(x), fn(x)
    assert got.requires_grad and got._base is x
    assert_same(got.detach(), want.detach())
    (g1,) = torch.autograd.grad(got.abs().sum(), x)
    (g2,) = torch.autograd.grad(want.abs().sum(), x)
    assert_same(g1, g2)
