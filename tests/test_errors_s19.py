"""Where eager raises from tensor values, we raise (session 19, ``scripts/probe_errors.py``).

Each class below returned garbage (or a wrong message) before: checks eager's kernels make on
values that our lowerings skipped, checks that torch's decompositions drop before our table
sees the op, dead calls whose results are tuples, and messages that eager words otherwise
than our rule (by dimension, mode or kernel path). Every case must raise eager's exception
type with eager's message, naming the op and the user's line; valid neighbours match eager.

PYTEST_DONT_REWRITE: (the user's ``assert`` on a tensor below must stay a plain ``assert``)
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import assert_same

THIS = __file__


def _eager_error(fn, args) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


def _assert_raises_as_eager(fn, args, line, *, op=True):
    eager = _eager_error(fn, [a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    err = info.value
    assert isinstance(err, torch2xla.OpError), (type(err), err)
    message = str(err)
    assert message.startswith(str(eager)), (message, str(eager))
    if op:
        assert "op: " in message, message
    assert f"user code: {THIS}:" in message and line in message, message
    return err


def _i(*values):
    return torch.tensor(values)


_SINGULAR = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
_NOT_PD = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
_MASK = torch.tensor([[True, False, True], [False, True, True]])


# -- value checks of eager's kernels that the lowerings skipped ----------------------------------
def masked_scatter(x, mask, src):
    return x.masked_scatter(mask, src) * 2


def masked_scatter_broadcast(x, mask, src):
    return x.masked_scatter(mask[0], src)


def searchsorted_sorter(s, v, sorter):
    return torch.searchsorted(s, v, sorter=sorter) + 1


def max_unpool1d(x, idx):
    return F.max_unpool1d(x, idx, 2)


def max_unpool2d(x, idx):
    return F.max_unpool2d(x, idx, 2)


def max_unpool3d(x, idx):
    return F.max_unpool3d(x, idx, 2)


def normal_std(mean, std):
    return torch.normal(mean, std).shape


def normal_scalar_mean(std):
    return torch.normal(0.0, std) * 0


def bernoulli(p):
    return torch.bernoulli(p) * 0


def bernoulli_tensor_p(x, p):
    return x.bernoulli_(p) * 0


def poisson(rate):
    return torch.poisson(rate) * 0


def assert_async(x):
    torch._assert_async(x)
    return x + 1


def cholesky_ex(a):
    return torch.linalg.cholesky_ex(a, check_errors=True).L


def inv_ex(a):
    return torch.linalg.inv_ex(a, check_errors=True).inverse


def solve_ex(a, b):
    return torch.linalg.solve_ex(a, b, check_errors=True).result


def lu_factor_ex(a):
    return torch.linalg.lu_factor_ex(a, check_errors=True).LU


VALUE_CASES = [
    (
        "masked_scatter",
        masked_scatter,
        (torch.zeros(2, 3), _MASK, torch.ones(3)),
        "x.masked_scatter(mask, src)",
    ),
    (
        "masked_scatter_broadcast_mask",
        masked_scatter_broadcast,
        (torch.zeros(2, 3), _MASK, torch.ones(3)),
        "x.masked_scatter(mask[0], src)",
    ),
    (
        "searchsorted_sorter_too_large",
        searchsorted_sorter,
        (torch.tensor([3.0, 1.0, 2.0]), torch.tensor([1.5]), _i(1, 2, 3)),
        "torch.searchsorted(s, v, sorter=sorter)",
    ),
    (
        "searchsorted_sorter_negative",
        searchsorted_sorter,
        (torch.tensor([[3.0, 1.0, 2.0]]), torch.tensor([[1.5]]), _i(1, -1, 0).view(1, 3)),
        "torch.searchsorted(s, v, sorter=sorter)",
    ),
    (
        "max_unpool1d",
        max_unpool1d,
        (torch.ones(1, 1, 2), _i(0, 9).view(1, 1, 2)),
        "F.max_unpool1d(x, idx, 2)",
    ),
    (
        "max_unpool2d_negative",
        max_unpool2d,
        (torch.ones(1, 1, 2, 2), _i(0, -1, 8, 10).view(1, 1, 2, 2)),
        "F.max_unpool2d(x, idx, 2)",
    ),
    (
        "max_unpool3d",
        max_unpool3d,
        (torch.ones(1, 1, 1, 1, 2), _i(0, 40).view(1, 1, 1, 1, 2)),
        "F.max_unpool3d(x, idx, 2)",
    ),
    (
        "normal_negative_std",
        normal_std,
        (torch.zeros(3), torch.tensor([1.0, -1.0, 1.0])),
        "torch.normal(mean, std)",
    ),
    (
        "normal_nan_std",
        normal_scalar_mean,
        (torch.tensor([1.0, float("nan")]),),
        "torch.normal(0.0, std)",
    ),
    ("bernoulli_above_one", bernoulli, (torch.tensor([0.5, 1.5]),), "torch.bernoulli(p)"),
    ("bernoulli_negative", bernoulli, (torch.tensor([[-0.5, 0.5]]),), "torch.bernoulli(p)"),
    (
        "bernoulli__tensor_p",
        bernoulli_tensor_p,
        (torch.zeros(2), torch.tensor([0.5, 2.0])),
        "x.bernoulli_(p)",
    ),
    ("poisson_negative", poisson, (torch.tensor([1.0, -1.0]),), "torch.poisson(rate)"),
    ("assert_async_zero", assert_async, (torch.tensor(0),), "torch._assert_async(x)"),
    ("assert_async_false", assert_async, (torch.tensor(False),), "torch._assert_async(x)"),
    ("cholesky_ex", cholesky_ex, (_NOT_PD,), "torch.linalg.cholesky_ex(a, check_errors=True)"),
    (
        "cholesky_ex_batched",
        cholesky_ex,
        (torch.stack([torch.eye(2), _NOT_PD]),),
        "torch.linalg.cholesky_ex(a, check_errors=True)",
    ),
    ("inv_ex", inv_ex, (_SINGULAR,), "torch.linalg.inv_ex(a, check_errors=True)"),
    (
        "solve_ex",
        solve_ex,
        (_SINGULAR, torch.ones(2)),
        "torch.linalg.solve_ex(a, b, check_errors=True)",
    ),
    (
        "lu_factor_ex",
        lu_factor_ex,
        (torch.zeros(2, 2),),
        "torch.linalg.lu_factor_ex(a, check_errors=True)",
    ),
]


@pytest.mark.parametrize("name, fn, args, line", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_eagers_kernels_reject_raise_what_eager_raises(name, fn, args, line):
    err = _assert_raises_as_eager(fn, args, line)
    if "linalg" in line:
        assert isinstance(err, torch.linalg.LinAlgError) == (name != "lu_factor_ex")


VALID_VALUE_CASES = [
    ("masked_scatter_more_source", masked_scatter, (torch.zeros(2, 3), _MASK, torch.arange(6.0))),
    ("masked_scatter_no_true", masked_scatter, (torch.zeros(2, 3), _MASK & False, torch.ones(0))),
    (
        "searchsorted_sorter",
        searchsorted_sorter,
        (torch.tensor([3.0, 1.0, 2.0]), torch.tensor([1.5, 2.5]), _i(1, 2, 0)),
    ),
    (
        "max_pool_then_unpool",
        lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
        (torch.randn(1, 2, 4, 4),),
    ),
    ("normal_zero_std", normal_std, (torch.zeros(3), torch.tensor([1.0, 0.0, 2.0]))),
    ("bernoulli_edges", bernoulli, (torch.tensor([0.0, 1.0, 0.5]),)),
    ("poisson_zero", poisson, (torch.tensor([0.0, 2.0]),)),
    ("assert_async_true", assert_async, (torch.tensor(0.5),)),
    ("cholesky_ex_pd", cholesky_ex, (torch.eye(2) * 4,)),
    ("inv_ex_regular", inv_ex, (torch.tensor([[2.0, 1.0], [1.0, 3.0]]),)),
    ("inv_ex_unchecked", lambda a: torch.linalg.inv_ex(a).info, (_SINGULAR,)),
]


@pytest.mark.parametrize("name, fn, args", VALID_VALUE_CASES, ids=[c[0] for c in VALID_VALUE_CASES])
def test_valid_values_match_eager(name, fn, args):
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert_same(out, fn(*args))


# -- checks torch's decompositions drop ---------------------------------------------------------
def quantile(x, q):
    return torch.quantile(x, q)


def nanquantile_method(x, q):
    return x.nanquantile(q, dim=0)


def multi_margin(x, t):
    return F.multi_margin_loss(x, t)


def multilabel_margin(x, t):
    return F.multilabel_margin_loss(x, t)


_X = torch.randn(5, 4)
DECOMPOSED_CASES = [
    ("quantile_above_one", quantile, (_X[:, 0], torch.tensor([0.5, 1.5])), "torch.quantile(x, q)"),
    (
        "nanquantile_method_negative",
        nanquantile_method,
        (_X, torch.tensor([-0.1])),
        "x.nanquantile(q, dim=0)",
    ),
    (
        "quantile_nan_q",
        nanquantile_method,
        (_X, torch.tensor(float("nan"))),
        "x.nanquantile(q, dim=0)",
    ),
    ("multi_margin_too_large", multi_margin, (_X, _i(0, 4, 1, 2, 3)), "F.multi_margin_loss(x, t)"),
    ("multi_margin_negative", multi_margin, (_X, _i(0, -1, 1, 2, 3)), "F.multi_margin_loss(x, t)"),
    (
        "multilabel_margin_after_the_end",
        multilabel_margin,
        (_X[:2], _i(0, 3, -1, 5, 1, -1, 0, 0).view(2, 4)),
        "F.multilabel_margin_loss(x, t)",
    ),
    (
        "multilabel_margin_below_minus_one",
        multilabel_margin,
        (_X[:2], _i(0, -2, -1, 0, 1, -1, 0, 0).view(2, 4)),
        "F.multilabel_margin_loss(x, t)",
    ),
]


@pytest.mark.parametrize(
    "name, fn, args, line", DECOMPOSED_CASES, ids=[c[0] for c in DECOMPOSED_CASES]
)
def test_checks_decompositions_drop_raise_what_eager_raises(name, fn, args, line):
    _assert_raises_as_eager(fn, args, line)


_MODES = ("linear", "lower", "higher", "midpoint", "nearest")
_Q2 = torch.tensor([0.25, 1.0])
VALID_DECOMPOSED_CASES = [
    ("quantile_edges", quantile, (_X[:, 0], torch.tensor([0.0, 0.3, 1.0]))),
    ("quantile_float_q", lambda x: torch.quantile(x, 0.25), (_X[:, 0],)),
    ("nanquantile_method", nanquantile_method, (_X, torch.tensor([0.5]))),
    (
        "quantile_modes_keepdim",
        lambda x, q: [torch.quantile(x, q, 1, True, interpolation=m) for m in _MODES],
        (_X, torch.tensor([0.0, 0.3, 1.0])),
    ),
    ("nanquantile_out", lambda x, q: torch.nanquantile(x, q, out=torch.empty(2)), (_X, _Q2)),
    ("multi_margin", multi_margin, (_X, _i(0, 3, 1, 2, 3))),
    ("multilabel_margin", multilabel_margin, (_X[:2], _i(0, 3, -1, 1, 1, -1, 0, 0).view(2, 4))),
]


@pytest.mark.parametrize(
    "name, fn, args", VALID_DECOMPOSED_CASES, ids=[c[0] for c in VALID_DECOMPOSED_CASES]
)
def test_valid_decomposed_calls_match_eager(name, fn, args):
    # (whole graphs: torch 2.11's quantile composites broke Dynamo's graph at their q check)
    out = torch.compile(fn, backend="xla", fullgraph=True, options={"strict": True})(*args)
    assert_same(out, fn(*args))


# -- dead calls: eager raises although nothing reads the result --------------------------------
def dead_masked_scatter(x, mask, src):
    x.masked_scatter(mask, src)
    return x + 1


def dead_inv_ex(a):
    torch.linalg.inv_ex(a, check_errors=True)  # (a tuple nothing reads)
    return a + 1


def dead_quantile(x, q):
    torch.quantile(x, q)
    return x + 1


@pytest.mark.parametrize(
    "fn, args, line",
    [
        (dead_masked_scatter, (torch.zeros(2, 3), _MASK, torch.ones(3)), "x.masked_scatter("),
        (dead_inv_ex, (_SINGULAR,), "torch.linalg.inv_ex(a, check_errors=True)"),
        (dead_quantile, (_X[:, 0], torch.tensor([2.0])), "torch.quantile(x, q)"),
    ],
    ids=["masked_scatter", "inv_ex_tuple", "quantile"],
)
def test_dead_calls_raise_what_eager_raises(fn, args, line):
    _assert_raises_as_eager(fn, args, line)


# -- eager's message where it words the same check otherwise ------------------------------------
def index_add_dim1(x, i, src):
    return x.index_add(1, i, src)


def index_add_1d(x, i, src):
    return x.index_add(0, i, src)


def index_fill_dim2(x, i):
    return x.index_fill(2, i, 0.0)


def embedding_bag_max(w, i, offsets):
    return F.embedding_bag(i, w, offsets, mode="max")


def embedding_bag_2d(w, i):
    return F.embedding_bag(i, w)


def addmm_self_and_mat2(c, a, b):
    return torch.addmm(c, a, b)


MESSAGE_CASES = [
    (
        "index_add_dim1",
        index_add_dim1,
        (torch.zeros(2, 3), _i(0, 3), torch.ones(2, 2)),
        "x.index_add(1, i, src)",
    ),
    ("index_add_1d", index_add_1d, (torch.zeros(4), _i(0, 4), torch.ones(2)), "x.index_add(0"),
    ("index_fill_dim2", index_fill_dim2, (torch.zeros(3, 2, 2), _i(2)), "x.index_fill(2, i, 0.0)"),
    (
        "embedding_bag_max",
        embedding_bag_max,
        (torch.randn(5, 3), _i(0, 5, 1), _i(0, 1)),
        'F.embedding_bag(i, w, offsets, mode="max")',
    ),
    (
        "embedding_bag_2d",
        embedding_bag_2d,
        (torch.randn(5, 3), _i(0, 9, 1, 2).view(2, 2)),
        "F.embedding_bag(i, w)",
    ),
    (
        "addmm_self_and_mat2",
        addmm_self_and_mat2,
        (torch.zeros(2, 2), torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)),
        "torch.addmm(c, a, b)",
    ),
]


@pytest.mark.parametrize("name, fn, args, line", MESSAGE_CASES, ids=[c[0] for c in MESSAGE_CASES])
def test_messages_are_eagers(name, fn, args, line):
    _assert_raises_as_eager(fn, args, line)


def test_our_message_is_kept_where_it_extends_eagers():
    def embed(w, i):
        return F.embedding(i, w)

    w, i = torch.randn(5, 3), _i(0, 5)
    eager = _eager_error(embed, (w, i))
    with pytest.raises(IndexError) as info:
        torch.compile(embed, backend="xla")(w, i)
    assert str(info.value).startswith(f"{eager} (index 5, dimension 0 of size 5)")


def test_take_in_a_bucketed_program_says_what_eager_says():
    def take(x, i):
        return torch.take(x, i) + 1

    compiled = torch.compile(take, backend="xla", dynamic=True)
    assert_same(compiled(torch.arange(8.0), _i(7)), take(torch.arange(8.0), _i(7)))
    x, i = torch.arange(5.0), _i(5)  # in the bucket of 8, out of the 5 elements
    eager = _eager_error(take, (x, i))
    with pytest.raises(IndexError) as info:
        compiled(x, i)
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))


# -- values of another shape than the indexed one; an op of a split graph that raises in eager ---
def setitem_values_of_another_shape(x, i, v):
    x[i] = v
    return x


def setitem_around_a_slice(x, i, j, v):
    x[i, :, j] = v
    return x


@pytest.mark.parametrize(
    "fn, args, line",
    [
        (setitem_values_of_another_shape, (torch.zeros(3), _i(0, 1), torch.ones(3)), "x[i] = v"),
        (
            setitem_around_a_slice,
            (torch.zeros(3, 2, 4), _i(0, 1), _i(1, 3), torch.ones(2, 3)),
            "x[i, :, j] = v",
        ),
    ],
    ids=["setitem", "setitem_around_a_slice"],
)
def test_values_that_do_not_broadcast_raise_what_eager_raises(fn, args, line):
    """The lowering failed on them (a warning asking for a bug report) and the op ran in
    eager, whose error came without the user's line."""
    _assert_raises_as_eager(fn, args, line)


@pytest.mark.parametrize(
    "v", [torch.ones(1, 2), torch.ones(2), torch.tensor(1.0)], ids=["leading_one", "same", "0d"]
)
def test_values_that_broadcast_match_eager(v):
    args = (torch.zeros(3), _i(0, 1), v)
    compiled = torch.compile(
        setitem_values_of_another_shape, backend="xla", options={"strict": True}
    )
    assert_same(compiled(*[a.clone() for a in args]), setitem_values_of_another_shape(*args))


def add_then_repeat(x, y, rep):
    y.add_(1)
    return x.repeat_interleave(rep, dim=0) * 2


def test_an_op_run_in_eager_raises_eagers_own_error():
    """(An op of a split graph run in eager; the graph writes an input, so the call runs again
    in eager: the error raised was torch2xla's internal EagerOpRaised.)"""
    args = (torch.ones(3), torch.zeros(2), _i(1, -1, 2))
    want = [a.clone() for a in args]
    eager = _eager_error(add_then_repeat, want)
    config = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
    with config, pytest.raises(RuntimeError) as info:
        torch.compile(add_then_repeat, backend="xla")(*args)
    assert type(info.value) is type(eager) and str(info.value) == str(eager)
    assert_same(args, want)


# -- a failed call: eager's writes before the failing op, none after; the next call works -------
def add_then_masked_scatter(x, y, mask, src):
    y.add_(1)
    x.masked_scatter_(mask, src)
    y.mul_(10)
    return x


def test_failed_call_leaves_eagers_writes_and_the_next_call_runs():
    def make(n):
        return torch.zeros(2, 3), torch.zeros(2), _MASK, torch.arange(float(n))

    compiled = torch.compile(add_then_masked_scatter, backend="xla")
    got, want = make(3), make(3)
    eager = _eager_error(add_then_masked_scatter, want)
    with pytest.raises(RuntimeError) as info:
        compiled(*got)
    assert str(info.value).startswith(str(eager))
    assert info.value.replayed
    assert_same(got, want)  # y added once, x untouched
    got, want = make(4), make(4)
    assert_same(compiled(*got), add_then_masked_scatter(*want))
    assert_same(got, want)


# -- segments, empty medians, embedding renormalization ------------------------------------------
def segment_sum_lengths(d, lengths):
    return torch.segment_reduce(d, "sum", lengths=lengths)


def segment_max_offsets(d, offsets):
    return torch.segment_reduce(d, "max", offsets=offsets)


def median_dim1(a):
    return torch.median(a, 1).values


def nanmedian_dim0(a):
    return a.nanmedian(0).indices


def embedding_renorm(w, i):
    return torch.embedding_renorm_(w, i, 1.0, 2.0)


_D5 = torch.randn(5)
SHAPE_AND_SEGMENT_CASES = [
    ("lengths_sum", segment_sum_lengths, (_D5, _i(2, 2)), "torch.segment_reduce("),
    ("lengths_negative", segment_sum_lengths, (_D5, _i(-1, 6)), "torch.segment_reduce("),
    ("offsets_decreasing", segment_max_offsets, (_D5, _i(0, 6, 5)), "torch.segment_reduce("),
    ("median_empty_dim", median_dim1, (torch.zeros(2, 0),), "torch.median(a, 1)"),
    ("nanmedian_empty_dim", nanmedian_dim0, (torch.zeros(0),), "a.nanmedian(0)"),
    (
        "embedding_renorm_too_large",
        embedding_renorm,
        (torch.randn(4, 2), _i(0, 4)),
        "torch.embedding_renorm_(w, i, 1.0, 2.0)",
    ),
    (
        "embedding_renorm_negative",
        embedding_renorm,
        (torch.randn(4, 2), _i(-5)),
        "torch.embedding_renorm_(w, i, 1.0, 2.0)",
    ),
]


@pytest.mark.parametrize(
    "name, fn, args, line", SHAPE_AND_SEGMENT_CASES, ids=[c[0] for c in SHAPE_AND_SEGMENT_CASES]
)
def test_segments_medians_and_renorm_raise_what_eager_raises(name, fn, args, line):
    err = _assert_raises_as_eager(fn, args, line)
    assert isinstance(err, IndexError) == ("median" in name or "renorm" in name)


VALID_SHAPE_AND_SEGMENT_CASES = [
    ("lengths", segment_sum_lengths, (_D5, _i(2, 0, 3))),
    (
        "unsafe",
        lambda d, n: torch.segment_reduce(d, "sum", lengths=n, unsafe=True),
        (_D5, _i(2, 2)),
    ),
    # (eager starts at offsets[0] and ends at offsets[-1]: the rest is in no segment)
    ("offsets_not_from_zero", segment_max_offsets, (_D5, _i(1, 2, 4))),
    ("median_other_dim_empty", lambda a: torch.median(a, 0).values, (torch.zeros(2, 0),)),
    ("embedding_renorm_negative", embedding_renorm, (torch.randn(4, 2) * 3, _i(0, -1))),
]


@pytest.mark.parametrize(
    "name, fn, args",
    VALID_SHAPE_AND_SEGMENT_CASES,
    ids=[c[0] for c in VALID_SHAPE_AND_SEGMENT_CASES],
)
def test_valid_segments_medians_and_renorm_match_eager(name, fn, args):
    got = [a.clone() for a in args]
    out = torch.compile(fn, backend="xla", options={"strict": True})(*got)
    assert_same(out, fn(*args))
    assert_same(got, list(args))


# -- constant arguments of random ops that eager's kernels refuse ---------------------------------
def bernoulli_float_p(x):
    return torch.bernoulli(x, 1.5)


def bernoulli__float_p(x):
    return x.bernoulli_(-0.5) * 0


def randint_like_range(x):
    return torch.randint_like(x, 3, 1)


def randint_like_high(x):
    return torch.randint_like(x, 0) + 1


@pytest.mark.parametrize(
    "fn, line",
    [
        (bernoulli_float_p, "torch.bernoulli(x, 1.5)"),
        (bernoulli__float_p, "x.bernoulli_(-0.5)"),
        (randint_like_range, "torch.randint_like(x, 3, 1)"),
        (randint_like_high, "torch.randint_like(x, 0)"),
    ],
    ids=["bernoulli_p", "bernoulli__p", "randint_like_range", "randint_like_high"],
)
def test_random_arguments_eager_refuses_raise_what_eager_raises(fn, line):
    _assert_raises_as_eager(fn, (torch.zeros(3),), line)


def test_random_arguments_eager_accepts_run():
    def draw(x):
        return torch.bernoulli(x, 1.0), torch.randint_like(x, 2, 3), x.bernoulli_(0.0)

    out = torch.compile(draw, backend="xla", options={"strict": True})(torch.zeros(3))
    assert_same(out, draw(torch.zeros(3)))  # (every draw is certain)


# -- a Python assert on a tensor ------------------------------------------------------------------
def python_assert(x):
    assert x.sum() > 0, "the sum must be positive"
    return x * 2


def assert_async_message(x):
    torch._assert_async(x.sum() > 0, "the sum must be positive")
    return x * 2


def test_a_python_assert_on_a_tensor_raises_assertion_error():
    """Dynamo traces it to ``torch._assert_async``, whose error was a RuntimeError."""
    compiled = torch.compile(python_assert, backend="xla")
    err = _assert_raises_as_eager(python_assert, (-torch.ones(3),), "assert x.sum() > 0")
    assert isinstance(err, AssertionError) and isinstance(err, torch2xla.OpAssertionError)
    assert_same(compiled(torch.ones(3)), python_assert(torch.ones(3)))


def test_assert_async_called_directly_raises_runtime_error():
    err = _assert_raises_as_eager(assert_async_message, (-torch.ones(3),), "torch._assert_async(")
    assert not isinstance(err, AssertionError)
