"""Issue 22: op semantics at the edges, written as users write the code and compared with eager.

Boolean-mask assignment, dropout's ``train=None``, batch norm with non-1-D weights, gradients
that must follow eager's formulas, and the ``*_copy`` view variants.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import assert_same, run_both

aten = torch.ops.aten
_DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def _compiled(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _grads(fn, *args):
    """(``fn(*args)``, ``torch.autograd.grad`` of a weighted sum of it for the args that
    require grad)."""
    leaves = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    out = fn(*leaves)
    weights = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape) / out.numel()
    wanted = [x for x in leaves if x.requires_grad]
    return out.detach(), torch.autograd.grad((out * weights).sum(), wanted)


def _grads_both(fn, *args):
    """``_grads`` by XLA and by eager."""
    return _grads(_compiled(fn), *args), _grads(fn, *args)


# -- 1. t[mask] = v -----------------------------------------------------------------------------
def _assign(t, mask, v):
    t[mask] = v
    return t


def test_mask_assign_fills_true_positions_in_row_major_order():
    # The example: values go to the True positions in order, not along the last dim.
    t = torch.zeros(2, 3)
    mask = torch.tensor([[True, False, True], [False, True, False]])
    out, ref, *_ = run_both(_assign, t, mask, torch.tensor([10.0, 20.0, 30.0]))
    assert_same(out, ref)
    assert out.tolist() == [[10, 0, 20], [0, 30, 0]]


def test_mask_assign_with_data_dependent_count():
    def positives(x, vals):
        x[x > 0] = vals
        return x

    c = _compiled(positives)
    for data in ([1.0, -1, 2, -3, 4, 5], [-1.0, 7, 2, 3, -4, 5], [0.0, -2, 1, 1, 1, 1]):
        x, vals = torch.tensor(data), torch.tensor([7.0, 8, 9, 10])
        assert_same(c(x.clone(), vals), positives(x.clone(), vals))


def _eager_error(fn, *args):
    try:
        fn(*(a.clone() for a in args))
    except (RuntimeError, IndexError) as e:
        return e
    raise AssertionError("eager raised nothing")


@pytest.mark.parametrize("case", ["values", "values with a trailing dim", "mask beside an index"])
def test_mask_assign_with_the_wrong_number_of_values_raises_as_eager(case):
    # ``x[x > 0] = vals`` where the data has another number of positives than ``vals``: eager
    # raises (shape mismatch); the first N True positions must not be written silently.
    if case == "values":
        fn, args = (
            _assign,
            (
                torch.zeros(2, 3),
                torch.tensor([[1, 0, 1], [0, 1, 1]]).bool(),
                torch.tensor([10.0, 20.0, 30.0]),
            ),
        )
    elif case == "values with a trailing dim":
        fn, args = (
            _assign,
            (torch.zeros(2, 3, 4), torch.tensor([[1, 0, 1], [0, 1, 0]]).bool(), torch.randn(2, 4)),
        )
    else:

        def fn(t, i, mask, v):
            t[i, mask] = v
            return t

        args = (
            torch.zeros(3, 4),
            torch.tensor([0, 2]),
            torch.tensor([1, 1, 1, 0]).bool(),
            torch.tensor([1.0, 2.0]),
        )
    expected = _eager_error(fn, *args)
    c = _compiled(fn)
    with pytest.raises(type(expected), match="shape mismatch") as info:
        c(*(a.clone() for a in args))
    assert isinstance(info.value, torch2xla.OpError)
    assert "test_semantics_ops.py" in str(info.value)  # the user's line


@pytest.mark.parametrize(
    "value",
    [0.5, torch.tensor(2.5), torch.tensor([3.5])],
    ids=["python-scalar", "0-d", "1-element"],
)
def test_mask_assign_broadcasts_a_single_value(value):
    def f(x, value):
        x[x > 0] = value
        return x

    out, ref, *_ = run_both(f, torch.randn(4, 5), value)
    assert_same(out, ref)


@pytest.mark.parametrize(
    ("shape", "mask_shape", "value_shape"),
    [
        ((5, 3, 4), (5,), (3, 3, 4)),  # rows: one value row per True row
        ((5, 3, 4), (5,), (3, 4)),  # one row broadcast to every True row
        ((5, 3, 4), (5,), (3, 1, 4)),  # per-row values broadcast inside each row
        ((4, 3, 2), (4, 3), (6, 2)),  # a mask of lower rank than t
        ((4, 3, 2), (4, 3), (6, 1)),
        ((4, 3, 2), (4, 3), (2,)),
        ((4, 3, 2), (4, 3, 2), (12,)),
    ],
)
def test_mask_assign_over_leading_dims(shape, mask_shape, value_shape):
    torch.manual_seed(0)
    mask = torch.zeros(mask_shape, dtype=torch.bool).flatten()
    n = value_shape[0] if len(value_shape) == len(shape) - len(mask_shape) + 1 else 5
    mask[torch.randperm(mask.numel())[:n]] = True
    mask = mask.reshape(mask_shape)
    out, ref, *_ = run_both(_assign, torch.randn(shape), mask, torch.randn(value_shape))
    assert_same(out, ref)


def test_mask_assign_on_an_inner_dim():
    def f(t, mask, v):
        t[:, mask] = v
        return t

    mask = torch.tensor([True, False, True, True])
    for v in (torch.randn(3, 3), torch.randn(3, 1), torch.randn(3)):
        out, ref, *_ = run_both(f, torch.randn(3, 4), mask, v)
        assert_same(out, ref)


@pytest.mark.parametrize("accumulate", [False, True])
def test_mask_index_put_accumulate(accumulate):
    def f(t, mask, v):
        return t.index_put_((mask,), v, accumulate=accumulate)

    mask = torch.tensor([[True, False, True], [True, True, False]])
    for v in (torch.tensor([1.0, 2, 3, 4]), torch.tensor(5.0)):
        out, ref, *_ = run_both(f, torch.randn(2, 3), mask, v)
        assert_same(out, ref)


_ROWS = torch.tensor([True, False, True, False, True, False])  # 3 of t's 6 rows
_COLS = torch.tensor([1, 3, 0])
_INNER = torch.tensor([True, True, False, True])  # 3 of t's 4 columns


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize(
    ("index", "value_shape"),
    [
        ((_ROWS, _COLS), (3, 5)),  # a row mask beside a column index
        ((_ROWS, _COLS), (5,)),
        ((_ROWS, _COLS[:1]), (3, 5)),  # a one-element index broadcasts to the count
        ((_ROWS, None, _COLS), (3, 4)),  # not adjacent: the count axis goes first
        ((_COLS[:, None], _INNER), (3, 3, 5)),  # the mask's count axis broadcasts last
        ((_COLS[:, None], _INNER), (3, 1, 5)),
        ((_COLS[:2, None], _INNER, _COLS[:1]), (2, 3)),
    ],
    ids=[
        "mask-index",
        "mask-index-bcast",
        "index-of-one",
        "mask-none-index",
        "index-mask",
        "index-mask-bcast",
        "three",
    ],
)
def test_mask_mixed_with_integer_indices(index, value_shape, accumulate):
    torch.manual_seed(0)

    def f(t, v, *index):
        return aten.index_put_(t, index, v, accumulate)  # Tensor.index_put_ refuses None

    out, ref, *_ = run_both(f, torch.randn(6, 4, 5), torch.randn(value_shape), *index)
    assert_same(out, ref)


def test_mask_and_index_assignment_as_users_write_it():
    def f(t, rows, cols, inner, v):
        t[rows, cols] = v
        t[cols, inner] += 1
        t[rows, :, cols[:1]] = v[:, :1]
        return t

    out, ref, *_ = run_both(f, torch.randn(6, 4, 2), _ROWS, _COLS, _INNER, torch.randn(3, 2))
    assert_same(out, ref)


def _random_index_put(rng):
    """A random index_put: t's shape, indices (None, integer or boolean, masks over one or two
    dims), values shaped as the indexing result or broadcast to it; None when eager refuses."""
    shape = [int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 5)))]
    indices, d = [], 0
    while d < len(shape) and rng.random() < 0.8:
        kind = rng.choice(["none", "int", "mask", "mask"])
        if kind == "none":
            indices.append(None)
            d += 1
        elif kind == "int":
            size = [(), (1,), (2,), (3,), (2, 1)][int(rng.integers(5))]
            indices.append(torch.from_numpy(rng.integers(-shape[d], shape[d], size)))
            d += 1
        else:
            m = int(rng.integers(1, min(2, len(shape) - d) + 1))
            indices.append(torch.from_numpy(rng.random(shape[d : d + m]) < rng.random()))
            d += m
    if all(i is None for i in indices):
        return None
    t = torch.randn(shape)
    try:
        result = t[tuple(slice(None) if i is None else i for i in indices)].shape
    except IndexError:
        return None
    choices = [result, result[1:], (1, *result[1:])] if result else [result]
    values = torch.randn(choices[int(rng.integers(len(choices)))])
    accumulate = bool(rng.random() < 0.5)
    try:
        aten.index_put(t, indices, values, accumulate)
    except RuntimeError:
        return None
    return t, indices, values, accumulate


def test_index_put_with_masks_on_random_cases():
    # The class, not the listed examples: masks of one or two dims among None and integer
    # indices (adjacent or not, broadcasting), values with and without the count axis.
    rng = np.random.default_rng(0)
    cases = []
    while len(cases) < 8:
        case = _random_index_put(rng)
        if case is not None and any(i is not None and i.dtype == torch.bool for i in case[1]):
            cases.append(case)
    for t, indices, values, accumulate in cases:

        def f(t, values, *indices, accumulate=accumulate):
            return aten.index_put(t, indices, values, accumulate)

        torch._dynamo.reset()
        out, ref, *_ = run_both(f, t, values, *indices)
        assert_same(out, ref)


def test_mask_assign_of_bool_and_int_tensors():
    mask = torch.tensor([True, False, True, True])
    for t, v in (
        (torch.zeros(4, dtype=torch.bool), torch.tensor([True, False, True])),
        (torch.arange(4), torch.tensor([7, 8, 9])),
    ):
        out, ref, *_ = run_both(_assign, t, mask, v)
        assert_same(out, ref)


def test_mask_assign_gradients():
    def f(x, v):
        y = x * 2
        y[x > 0] = v * 3
        return y

    x = torch.tensor([[1.0, -1, 2], [-3, 4, 5]], requires_grad=True)
    v = torch.randn(4, requires_grad=True)
    (out, grads), (ref, ref_grads) = _grads_both(f, x, v)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


def test_mask_accumulate_gradients():
    def f(x, mask, v):
        return x.index_put((mask,), v.exp(), accumulate=True)

    mask = torch.tensor([[True, False, True], [False, True, True]])
    x, v = torch.randn(2, 3, requires_grad=True), torch.randn(4, requires_grad=True)
    (out, grads), (ref, ref_grads) = _grads_both(f, x, mask, v)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


def test_mask_mixed_with_index_gradients():
    def f(x, mask, cols, v):
        y = x.clone()
        y[mask, cols] = v.sin()
        return y

    mask = torch.tensor([True, False, True, True])
    x, v = torch.randn(4, 5, requires_grad=True), torch.randn(3, requires_grad=True)
    (out, grads), (ref, ref_grads) = _grads_both(f, x, mask, torch.tensor([4, 0, 2]), v)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


# -- 2. optional arguments whose None has a meaning -----------------------------------------------
@pytest.mark.parametrize("train", [None, True, False])
def test_native_dropout_train_none_means_training(train):
    x = torch.ones(100, 100)
    out, mask = _compiled(lambda x: torch.native_dropout(x, 0.25, train))(x)
    ref, ref_mask = torch.native_dropout(x, 0.25, train)
    assert out.dtype == ref.dtype and mask.dtype == ref_mask.dtype == torch.bool
    if train is False:
        assert_same((out, mask), (ref, ref_mask))
        return
    assert abs(mask.float().mean().item() - 0.75) < 0.02  # dropped, as eager drops
    torch.testing.assert_close(out, mask * x / 0.75)


def test_any_all_over_no_dims_is_elementwise():
    def f(x):
        return x.any(dim=()), torch.all(x, dim=()), x.any(), (x > 0).all(dim=(0, 1))

    out, ref, *_ = run_both(f, torch.tensor([[0.0, 2.0], [float("nan"), 0.0]]))
    assert_same(out, ref)


@pytest.mark.parametrize(("p", "train"), [(0.5, False), (0.0, True), (0.0, None)])
def test_native_dropout_output_is_a_copy_as_in_eager(p, train):
    # torch's fake kernel returns the input itself here; eager's kernel returns a copy.
    x = torch.randn(5)
    out, mask = _compiled(lambda x: torch.native_dropout(x, p, train))(x)
    before = x.clone()
    out.add_(1)
    assert_same(x, before)
    assert_same(out, before + 1)
    assert mask.all()


# -- 3. batch norm with a weight and bias of any shape holding C elements ------------------------
_BN_SHAPES = [(1, 3, 1, 1), (3, 1, 1), (1, 3)]


@pytest.mark.parametrize("shape", _BN_SHAPES)
@pytest.mark.parametrize("mode", ["no-stats", "train", "eval"])
def test_batch_norm_weight_of_any_shape(shape, mode):
    def f(x, w, b, mean, var):
        if mode == "no-stats":
            return F.batch_norm(x, None, None, w, b, training=True)
        return F.batch_norm(x, mean, var, w, b, training=mode == "train")

    torch.manual_seed(0)
    args = (
        torch.randn(2, 3, 4, 4, requires_grad=True),
        torch.randn(shape, requires_grad=True),
        torch.randn(shape, requires_grad=True),
        torch.randn(3),
        torch.rand(3) + 0.5,
    )
    out, ref, a_xla, a_eager = run_both(f, *args)
    assert_same(out, ref)
    assert_same(a_xla[3:], a_eager[3:])  # running stats updated as in eager
    # Eager's CPU backward refuses such a weight ("TensorAccessor expected 1 dims"): so does
    # ours, with eager's message, for every shape (the (1, 3) weight once raised the autograd
    # engine's shape check instead, the others computed a gradient).
    with pytest.raises(RuntimeError) as eager:
        _grads(f, *args)
    with pytest.raises(RuntimeError) as ours:
        _grads(_compiled(f), *args)
    assert "TensorAccessor expected 1 dims" in str(eager.value)
    assert str(eager.value) in str(ours.value)


# -- 5. gradients by eager's formulas -------------------------------------------------------------
def _pd(n, dtype, *batch, junk=0.0, upper=False):
    """A positive-definite matrix whose other triangle (the one torch does not read) has
    ``junk`` added."""
    torch.manual_seed(0)
    b = torch.randn(*batch, n, n, dtype=dtype)
    a = b @ b.mH + n * torch.eye(n, dtype=dtype)
    noise = torch.randn(*batch, n, n, dtype=dtype) * junk
    return a + (noise.tril(-1) if upper else noise.triu(1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex128])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, upper: torch.linalg.cholesky(a, upper=upper),
        lambda a, upper: torch.cholesky(a, upper=upper),
        lambda a, upper: torch.linalg.cholesky_ex(a, upper=upper)[0],
    ],
    ids=["linalg.cholesky", "cholesky", "cholesky_ex"],
)
@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_cholesky_reads_one_triangle_and_differentiates_as_eager(fn, upper, dtype):
    # Eager's backward returns the symmetric gradient built from L alone (cholesky_backward);
    # JAX's rule gave an unsymmetric one (up to 0.6 off in float32), and upper=True read the
    # lower triangle.
    def f(a):
        out = fn(a, upper)
        return torch.view_as_real(out) if out.is_complex() else out

    compiled = _compiled(f)
    # a symmetric input, then junk in the triangle torch does not read: the same program (only
    # the values differ)
    for junk in (0.0, 3.0):
        a = _pd(4, dtype, 2, junk=junk, upper=upper).requires_grad_()
        try:
            f(a)
        except RuntimeError as e:  # torch.cholesky is removed since torch 2.14: the same error
            assert "is now removed" in str(e), e
            with pytest.raises(RuntimeError) as info:
                compiled(a)
            assert str(info.value) == str(e)
            continue
        (out, grads), (ref, ref_grads) = _grads(compiled, a), _grads(f, a)
        tol = (
            {"rtol": 1e-5, "atol": 1e-5}
            if dtype == torch.float32
            else {"rtol": 1e-10, "atol": 1e-12}
        )
        assert_same(out, ref, **tol)
        assert_same(grads, ref_grads, **tol)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle_under_autograd(uplo):
    # JAX's eigh symmetrizes the whole input whenever it is differentiated.
    a = _pd(4, torch.float64, junk=3.0, upper=uplo == "U").requires_grad_()

    def f(a):
        w, v = torch.linalg.eigh(a, UPLO=uplo)
        return w * 2 + torch.linalg.eigvalsh(a, UPLO=uplo) + v.abs().sum(-2)

    (out, grads), (ref, ref_grads) = _grads_both(f, a)
    assert_same(out, ref, rtol=1e-10, atol=1e-12)
    assert_same(grads, ref_grads, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_gradients_of_the_factor(upper, dtype):
    # Eager differentiates both as functions of the whole factor: the triangle they do not
    # read gets a gradient too.
    torch.manual_seed(0)
    factor = torch.linalg.cholesky(_pd(3, dtype), upper=upper).requires_grad_()
    b = torch.randn(3, 2, dtype=dtype, requires_grad=True)

    def f(factor, b):
        out = (
            torch.cholesky_solve(b, factor, upper=upper)
            + torch.cholesky_inverse(factor, upper=upper)[:, :2]
        )
        return torch.view_as_real(out) if out.is_complex() else out

    (out, grads), (ref, ref_grads) = _grads_both(f, factor, b)
    assert_same(out, ref, rtol=1e-10, atol=1e-12)
    assert_same(grads, ref_grads, rtol=1e-10, atol=1e-12)


def test_logcumsumexp_gradient_is_as_accurate_as_eager_against_float64():
    # Measured (OpInfo's sample: a first slice of 10000, float32): eager's gradient is up to
    # 2.8e-3 from eager's float64 gradient, ours 2.4e-7 (torch's float32 kernel loses the
    # difference x - out, which ours forms in float64). So both are compared with float64, and
    # ours must be at least as close as eager's (and within float32's accuracy).
    torch.manual_seed(0)
    x = torch.randn(5, 5, 5) * 3
    x[0] = 10000
    cot = torch.randn(5, 5, 5)

    def grad(fn, x):
        x = x.clone().requires_grad_()
        return torch.autograd.grad(fn(x), x, cot.to(x.dtype))[0]

    for dim in (0, 1):

        def f(x, dim=dim):
            return torch.logcumsumexp(x, dim)

        ours, eager, exact = grad(_compiled(f), x), grad(f, x), grad(f, x.double())
        ours_error = (ours.double() - exact).abs().max()
        eager_error = (eager.double() - exact).abs().max()
        assert ours.dtype == eager.dtype == torch.float32
        assert ours_error <= max(eager_error, 4e-7 * exact.abs().max()), (ours_error, eager_error)
        assert_same(ours.double(), exact, rtol=1e-6, atol=1e-6)
    # float64: the same formula as eager, to float64 precision.
    xd = x.double()
    assert_same(grad(_compiled(f), xd), grad(f, xd), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_max_unpool_gradient_with_repeated_indices(nd, batched):
    # Overlapping pooling windows repeat indices; eager's gradient reads the output gradient
    # at every index (JAX's scatter rule gave it to one of the repeated elements only).
    pool = getattr(F, f"max_pool{nd}d")
    unpool = getattr(F, f"max_unpool{nd}d")
    torch.manual_seed(0)
    x = torch.randn((2, 3) + (5,) * nd if batched else (3,) + (5,) * nd)
    pooled, indices = pool(x, 3, stride=1, return_indices=True)

    def f(p, indices):
        return unpool(p * 2, indices, 3, stride=1, output_size=x.shape[-nd:])

    (out, grads), (ref, ref_grads) = _grads_both(f, pooled.requires_grad_(), indices)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


def test_as_strided_scatter_gradient_is_the_derivative():
    # Deliberately not eager's: eager's gradient for self is the output gradient where src
    # overwrites self and zero where self is kept, the reverse of the derivative (torch's own
    # OpInfo marks as_strided_scatter's gradcheck an expected failure). Ours is checked
    # against float64 finite differences, and src's gradient against eager.
    def f(x, src):
        return torch.as_strided_scatter(x * 1.5, src.sin(), (2, 2), (3, 1), 1)

    torch.manual_seed(0)
    x = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    src = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_compiled(f), (x, src))
    assert not torch.autograd.gradcheck(f, (x, src), raise_exception=False)
    (out, grads), (ref, ref_grads) = _grads_both(f, x, src)
    assert_same(out, ref)
    assert_same(grads[1], ref_grads[1])


# -- 13. the copying variants of views -----------------------------------------------------------
_COPIES = {
    "select_copy.int": (lambda x: torch.select_copy(x, 1, -1) * 2, torch.randn(3, 4)),
    "slice_copy.Tensor": (lambda x: torch.slice_copy(x, 1, 1, None, 2) + 1, torch.randn(3, 5)),
    "split_copy.Tensor": (lambda x: [t * 2 for t in torch.split_copy(x, 2, 1)], torch.randn(3, 5)),
    "detach_copy.default": (lambda x: x * torch.detach_copy(x), torch.randn(4)),
    "view_as_real_copy.default": (
        lambda z: torch.view_as_real_copy(z * 2),
        torch.randn(3, dtype=torch.complex64),
    ),
    "view_as_complex_copy.default": (
        lambda r: torch.view_as_complex_copy(r * 2),
        torch.randn(3, 2),
    ),
    "_reshape_alias_copy.default": (
        lambda x: aten._reshape_alias_copy(x, [2, 3], [1, 2]),
        torch.randn(6),
    ),
    "_conj_copy.default": (
        lambda z: torch._conj_copy(z) * 1j,
        torch.randn(3, dtype=torch.complex64),
    ),
    "_neg_view_copy.default": (lambda x: torch._neg_view_copy(x) + 1, torch.randn(3)),
}


@pytest.mark.parametrize("name", sorted(_COPIES))
def test_view_copies_are_lowered(name, lowered_ops):
    fn, x = _COPIES[name]
    out, ref, *_ = run_both(fn, x)
    assert_same(out, ref)
    packet, _, overload = name.partition(".")
    assert getattr(getattr(aten, packet), overload) in lowered_ops


def test_detach_copy_backward_raises_as_eager():
    # Eager's detach_copy has no derivative: its backward raises "not implemented", ours too
    # (autodiff/_eager_backward.py); the forward's value is still computed in XLA.
    def f(x):
        return x * torch.detach_copy(x)

    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        f(x).sum().backward()
    out = _compiled(f)(x)
    assert_same(out, f(x))
    with pytest.raises(RuntimeError) as ours:
        out.sum().backward()
    assert (
        str(ours.value) == str(eager.value) == "derivative for aten::detach_copy is not implemented"
    )


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_complex32_runs_in_eager_with_a_warning():
    # XLA has no complex32: ops that make or read it run in eager PyTorch (the rest in XLA).
    def f(x):
        half = (x * 2).to(torch.chalf)
        return half, torch.view_as_real(half).float().sin()

    x = torch.randn(3, dtype=torch.complex64)
    with pytest.warns(UserWarning, match=r"_to_copy.default: torch.complex32 has no XLA type"):
        out = torch.compile(f, backend="xla")(x)
    ref = f(x)
    assert out[0].dtype == ref[0].dtype == torch.complex32
    assert torch.equal(torch.view_as_real(out[0]), torch.view_as_real(ref[0]))
    assert_same(out[1], ref[1])
    torch._dynamo.reset()
    with pytest.raises(torch2xla.UnsupportedOpsError, match="complex32 has no XLA type"):
        _compiled(f)(x)


# -- casts and integer powers where C++ leaves the value to the platform -------------------------
_UNDEFINED_CASTS = [float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, -0.7, -2.5]
_UNDEFINED_CASTS += [255.9, 256.0, -1.0, 65504.0, -200.0, 2.0**31, -(2.0**31), 2.0**63]


@pytest.mark.parametrize("source", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_float_to_int_casts_give_eager_values(source):
    """NaN, infinities and out-of-range floats cast to integers as eager's CPU kernels cast
    them (``(x * 255).byte()`` of a negative pixel is 255 - 1, not 0)."""
    x = torch.tensor(_UNDEFINED_CASTS, dtype=source)

    def fn(x, into):
        casts = [x.to(d) for d in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)]
        return casts, x.long() + 1, into.copy_(x), x.bool()

    out, ref, into, into_ref = run_both(fn, x, torch.zeros(len(x), dtype=torch.int32))
    for o, r in zip(torch.utils._pytree.tree_leaves(out), torch.utils._pytree.tree_leaves(ref)):
        assert o.dtype == r.dtype and torch.equal(o, r), (o, r)
    assert torch.equal(into[1], into_ref[1])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32, torch.int64])
def test_integer_powers_wrap_as_eager(dtype):
    info = torch.iinfo(dtype)
    base = torch.tensor([2, 3, info.max, 0, 1, 7, 2, -1 if info.min else 5], dtype=dtype)
    exponent = torch.tensor([info.max // 2 + 1, 100, 63, 0, 5, info.max, 7, 3], dtype=dtype)
    out, ref, *_ = run_both(lambda a, b: (a**b, 2**b, a ** b.abs()), base, exponent)
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype and torch.equal(o, r), (o, r)


# -- gradients where eager's formula decides ties, zeros and duplicates --------------------------
def _backward_grads(fn, *args):
    """Each arg's ``.grad`` after ``fn(*args).sum().backward()``, by XLA and by eager (None
    for args that do not require grad)."""
    results = []
    for f in (_compiled(fn), fn):
        leaves = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        f(*leaves).sum().backward()
        results.append([x.grad for x in leaves])
    return results


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.max(dim=0).values,  # ties: the gradient goes to the index max returns
        lambda x: torch.min(x + 1, 1)[0],  # a constant row ties everywhere
        lambda x: x.std(dim=1),  # a constant row: 0, not NaN
        lambda x: torch.std_mean(x, dim=1)[0],
        lambda x: x ** torch.arange(3.0),  # 0 ** 0: 0, not NaN
        lambda x: x**0.0,
        lambda x: torch.pow(2.0, x) + torch.pow(x.relu(), x),
        lambda x: torch.atan2(x, x.relu()),  # atan2(0, 0): 0, not NaN
    ],
    ids=[
        "max-dim-ties",
        "min-dim-constant-row",
        "std-const",
        "std_mean",
        "pow-0-0",
        "pow-0.0",
        "pow-base-0",
        "atan2-origin",
    ],
)
def test_gradients_at_ties_and_zeros_follow_eager(fn):
    x = torch.tensor([[1.0, 0.0, 2.0], [1.0, 0.0, -2.0], [0.0, 0.0, 0.0]])
    got, expected = _backward_grads(fn, x.requires_grad_())
    torch.testing.assert_close(got, expected, equal_nan=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda t, v: t.index_put((torch.tensor([0, 0, 2]),), v),
        lambda t, v: _assign_at(t, torch.tensor([2, 0, 2]), v),
        lambda t, v: t.scatter(0, torch.tensor([0, 0, 1]), v),
        lambda t, v: t.put(torch.tensor([1, 1, 0]), v),
        lambda t, v: _assign(t.clone(), torch.tensor([True, False, True, False]), v[:2]),
    ],
    ids=["index_put", "setitem", "scatter", "put", "mask"],
)
def test_values_written_twice_get_the_gradient_of_their_position(fn):
    """Eager's gradient of written values is the output's gradient where each was written,
    duplicates included (JAX gives it to the value that won the position only)."""
    t = torch.zeros(4, requires_grad=True)
    v = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    weighted = lambda t, v: fn(t, v) * torch.arange(1.0, 5.0)
    got, expected = _backward_grads(weighted, t, v)
    torch.testing.assert_close(got, expected)


def _assign_at(t, i, v):
    t = t.clone()
    t[i] = v
    return t


_EDGES = {  # an op and inputs on its edges: boundaries of pieces, zeros
    "hardsigmoid": (F.hardsigmoid, [torch.tensor([-3.0, 3.0, 0.0, 4.0, -2.9])]),
    "hardswish": (F.hardswish, [torch.tensor([-3.0, 3.0, 0.0, 4.0, -2.9])]),
    "rrelu-eval": (lambda x: F.rrelu(x, training=False), [torch.tensor([0.0, -0.0, 1.0, -1.0])]),
    "bce-at-0-and-1": (
        lambda p, t: F.binary_cross_entropy(p, t, reduction="none"),
        [torch.tensor([0.0, 1.0, 0.5, 1.0, 0.0]), torch.tensor([0.0, 1.0, 1.0, 0.0, 0.3])],
    ),
    "bce-of-saturated-sigmoid": (
        lambda z, t: F.binary_cross_entropy(torch.sigmoid(z), t),
        [torch.tensor([40.0, -120.0, 0.5]), torch.tensor([1.0, 0.0, 1.0])],
    ),
    "xlogy": (
        torch.xlogy,
        [torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([0.0, 1.0, 0.0, 3.0])],
    ),
    "xlog1py": (
        torch.special.xlog1py,
        [torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([-1.0, 1.0, 0.0, 3.0])],
    ),
    "sinc": (torch.sinc, [torch.tensor([0.0, 1.0, 0.5, -2.5])]),
    "logit": (torch.logit, [torch.tensor([0.0, 1.0, 0.5, -0.1, 1.1])]),
    "logit-eps": (lambda x: torch.logit(x, eps=0.1), [torch.tensor([0.0, 0.1, 0.9, 0.5, 1.0])]),
    "angle": (torch.angle, [torch.tensor([0j, 1 + 1j, -1 + 0j])]),
    "l1-norm": (
        lambda x: torch.linalg.vector_norm(x, 1, dim=1),
        [torch.tensor([[0.0, 1.0], [0.0, 0.0]])],
    ),
    "inf-norm": (lambda x: torch.linalg.vector_norm(x, float("inf"), dim=1), [torch.zeros(2, 3)]),
    "cdist-p1": (
        lambda a, b: torch.cdist(a, b, p=1),
        [torch.tensor([[0.0, 1.0], [2.0, 2.0]]), torch.tensor([[0.0, 1.0], [1.0, 1.0]])],
    ),
}


@pytest.mark.parametrize("name", sorted(_EDGES))
def test_gradients_at_edges_follow_eager_formulas(name):
    fn, args = _EDGES[name]

    def weighted(*a):
        out = fn(*a)
        out = out.real if out.is_complex() else out
        return out * torch.linspace(0.5, 1.5, out.numel()).reshape(out.shape)

    got, expected = _backward_grads(weighted, *(a.requires_grad_() for a in args))
    torch.testing.assert_close(got, expected, equal_nan=True)


# -- loss dtypes -----------------------------------------------------------------------------
# Eager's huber, soft-margin and binary-cross-entropy kernels write the loss into a tensor of
# the input's dtype: a float64 target or weight does not widen it (torch's decompositions do).
WIDER_ARGUMENT_LOSSES = {
    "huber": lambda x, t, w: F.huber_loss(x, t, delta=0.5),
    "huber_none": lambda x, t, w: F.huber_loss(x, t, reduction="none"),
    "huber_sum": lambda x, t, w: F.huber_loss(x, t, reduction="sum"),
    "soft_margin": lambda x, t, w: F.soft_margin_loss(x, t),
    "soft_margin_none": lambda x, t, w: torch.nn.SoftMarginLoss(reduction="none")(x, t),
    "bce_weight": lambda x, t, w: F.binary_cross_entropy(x.sigmoid(), t.to(x.dtype).sigmoid(), w),
    "bce_weight_sum": lambda x, t, w: torch.nn.BCELoss(w, reduction="sum")(
        x.sigmoid(), t.to(x.dtype).sigmoid()
    ),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", list(WIDER_ARGUMENT_LOSSES))
def test_loss_with_a_wider_target_or_weight_keeps_the_input_dtype(name, dtype):
    fn = WIDER_ARGUMENT_LOSSES[name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, generator=gen).to(dtype).requires_grad_()
    t = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    w = torch.rand(6, 5, generator=gen, dtype=torch.float64)
    if name.startswith("huber"):  # eager's huber_loss_backward raises on the float64 target
        x = x.detach()
        got, expected = _compiled(fn)(x, t, w), fn(x, t, w)
    else:
        (got, got_grads), (expected, expected_grads) = _grads_both(lambda x: fn(x, t, w), x)
        torch.testing.assert_close(got_grads, expected_grads)
    assert got.dtype == expected.dtype == dtype
    torch.testing.assert_close(got, expected)


# -- margin losses -------------------------------------------------------------------------------
# A target list ends at its first -1 (later entries are not targets); a repeated target counts
# again; an unbatched input's unreduced loss is 0-d. torch's decomposition of
# multilabel_margin_loss counted the positions after -1 as targets (class 0).
MULTILABEL_TARGETS = {
    "ends_at_minus_one": [[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 0, 0]],
    "repeated": [[1, 1, -1, 2], [2, 0, 2, -1], [-1, 3, 3, 3]],
}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("targets", list(MULTILABEL_TARGETS))
def test_multilabel_margin_loss_values_and_gradients(targets, reduction):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()
    y = torch.tensor(MULTILABEL_TARGETS[targets])
    fn = lambda x: F.multilabel_margin_loss(x, y, reduction=reduction)
    assert_same(*_grads_both(fn, x))
    module = torch.nn.MultiLabelMarginLoss(reduction=reduction)
    assert_same(*_grads_both(lambda x: module(x[0], y[0]), x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: F.multilabel_margin_loss(x[0], y[0], reduction="none"),
        lambda x, y: F.multi_margin_loss(x[0], y[0, 0], reduction="none"),
        lambda x, y: F.multi_margin_loss(
            x[0], y[0, 0], p=2, weight=x[1].detach(), reduction="none"
        ),
    ],
    ids=["multilabel", "multi", "multi_p2_weight"],
)
def test_unbatched_margin_loss_is_0d_as_eager(fn):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).requires_grad_()
    y = torch.tensor([[2, 0, -1, 1]])
    (got, got_grads), (expected, expected_grads) = _grads_both(lambda x: fn(x, y), x)
    assert got.shape == expected.shape == ()
    assert_same((got, got_grads), (expected, expected_grads))


@pytest.mark.parametrize("start, length", [(-20, 20), (-3, 2), (-20, 0), (5, 10)])
def test_narrow_copy_counts_a_negative_start_from_the_end(start, length):
    x = torch.arange(200.0).reshape(10, 20)
    fn = lambda x: torch.narrow_copy(x, 1, start, length) * 2
    assert_same(_compiled(fn)(x), fn(x))


def test_xlog1py_of_a_python_number_and_its_gradient():
    """torch decomposes it with prims.scalar_tensor for the number (issue 22 item 4)."""
    y = torch.rand(5, generator=torch.Generator().manual_seed(0)).requires_grad_()
    assert_same(*_grads_both(lambda y: torch.special.xlog1py(2.0, y), y))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "fn",
    [F.hardsigmoid, F.hardswish, torch.nn.Hardswish(inplace=True)],
    ids=["hardsigmoid", "hardswish", "hardswish_"],
)
def test_hard_activations_at_their_kinks_differentiate_as_eager(fn, dtype):
    """Eager's kernels: hardsigmoid's gradient is 0 at x = +-3, hardswish's 0 at -3 and 1 at
    3 (torch's decompositions clamp, whose gradient passes at the bounds)."""
    x = torch.tensor([-3.0, 3.0, -4.0, -1.0, 0.0, 2.5, 6.0, float("nan")], dtype=dtype)
    assert_same(*_grads_both(lambda x: fn(x * 1), x.requires_grad_()))


def test_rrelu_in_eval_mode_differentiates_at_zero_as_eager():
    x = torch.tensor([-2.0, -0.0, 0.0, 1.5]).requires_grad_()
    module = torch.nn.RReLU(0.1, 0.3).eval()
    assert_same(*_grads_both(lambda x: module(x * 1), x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_copysign_gradient_at_zero_infinity_and_nan_is_eagers(dtype):
    """Eager's formula: the cotangent times result / self, 0 where self is 0 (so NaN at +-inf
    and NaN); the sign's operand gets zeros."""
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 2.0], dtype=dtype)
    y = torch.tensor([1.0, -1.0, -1.0, -1.0, 1.0, -3.0], dtype=dtype)
    assert_same(*_grads_both(torch.copysign, x.requires_grad_(), y.requires_grad_()))
    assert_same(*_grads_both(lambda x: torch.copysign(x, -2.0), x))


# -- clamp's gradient: eager's masks (NaN passes nothing; bounds get it where they win) ---------
_NAN = float("nan")


@pytest.mark.parametrize(
    ("fn", "bounds_require_grad"),
    [
        (lambda x, lo, hi: x.clamp_min(0.0), (False, False)),
        (lambda x, lo, hi: x.clamp(-0.5, 0.5), (False, False)),
        (lambda x, lo, hi: torch.clamp(x, max=0.0), (False, False)),
        (lambda x, lo, hi: torch.clamp(x, min=lo), (True, False)),
        (lambda x, lo, hi: torch.clamp(x, lo, hi), (True, True)),  # last: lo > hi, hi wins
        (lambda x, lo, hi: torch.clamp(x, max=hi), (False, True)),
        (lambda x, lo, hi: F.margin_ranking_loss(x, lo, hi, reduction="none"), (True, False)),
    ],
    ids=["clamp_min", "clamp", "clamp_max", "min_tensor", "min_max_tensors", "max_tensor", "mrl"],
)
def test_clamp_gradient_at_nan_ties_and_crossed_bounds(fn, bounds_require_grad):
    # (position 0 gets no cotangent from _grads' weights: the NaN is at 1)
    x = torch.tensor([1.0, _NAN, -1.0, 0.5, -0.5], requires_grad=True)
    lo = torch.tensor([0.0, 0.0, 0.0, 0.5, 2.0], requires_grad=bounds_require_grad[0])
    hi = torch.tensor([0.5, 1.0, 1.0, 0.5, 1.0], requires_grad=bounds_require_grad[1])
    (out, grads), (ref, ref_grads) = _grads_both(fn, x, lo, hi)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


# -- trigamma (digamma's gradient, polygamma(1, x)) as eager's own formula -----------------------
_TRIGAMMA_POINTS = [-2.0, -3.973, 0.0, float("inf"), -float("inf"), -1e30, 1e30, 1e-30, 2.5, _NAN]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_trigamma_at_poles_infinities_and_huge_values(dtype):
    # Eager evaluates calc_trigamma: finite at the poles (sin of the rounded pi x), 0 at +inf,
    # NaN at -inf; jax.scipy's polygamma gave inf, NaN, inf there.
    x = torch.tensor([1.0, *_TRIGAMMA_POINTS], dtype=dtype, requires_grad=True)
    (out, grads), (ref, ref_grads) = _grads_both(torch.digamma, x)
    # (bfloat16: ours and eager's are each within one bfloat16 ulp of the float64 reference,
    # on either side of it: at -3.96875, 187 and 186 for 186.74; torch's bfloat16 tolerance)
    tol = {"rtol": 1.6e-2, "atol": 1e-5} if dtype == torch.bfloat16 else {}
    assert_same(grads, ref_grads, **tol)
    assert_same(
        _compiled(lambda x: torch.polygamma(1, x))(x.detach()), torch.polygamma(1, x.detach())
    )


@pytest.mark.parametrize(
    "fn",
    [torch.special.scaled_modified_bessel_k0, torch.special.scaled_modified_bessel_k1],
    ids=["k0e", "k1e"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_scaled_modified_bessel_k_at_large_x(fn, dtype):
    # ~sqrt(pi / 2x) far out: the quadrature's step was wider than the integrand there (1e20
    # gave 1/32).
    x = torch.tensor([0.5, 30.0, 64.0, 64.5, 1e3, 1e20, 3e38, float("inf")], dtype=dtype)
    assert_same(_compiled(fn)(x), fn(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("eps", [0.6, 0.5])
def test_logit_clamps_as_eager_when_eps_exceeds_one_half(eps, dtype):
    # Eager clamps logit's input by x < eps ? eps : (x > 1 - eps ? 1 - eps : x): with eps > 0.5
    # the lower end wins below it; jnp.clip gave the upper end everywhere (0.81 off).
    x = torch.tensor([0.0, 0.1, 0.45, 0.5, 0.55, 0.9, 1.0, float("nan")], dtype=dtype)
    x.requires_grad_()

    def f(x):
        return torch.logit(x, eps=eps) * 2

    (out, grads), (ref, ref_grads) = _grads_both(f, x)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [None, 0.2, 0.01, 0.0, 0.3])
def test_logit_gradient_is_eagers_kernel_in_every_dtype(eps, dtype):
    # Eager's logit_backward computes dy / (x * (1 - x)) in the input's dtype, each operation
    # rounded to it (half precision: in float32, rounded per operation), inside [lo, hi] with
    # lo = eps and hi = 1 - lo in that dtype, both ends included; 0 outside (NaN without
    # eps). Ours multiplied by a float32 1 / (x (1 - x)) and compared x with 1 - eps in
    # float64: bfloat16 at eps=0.2 was 0.03 off inside and 10.5 off at hi = 0.80078125.
    x = torch.cat([torch.linspace(-0.1, 1.1, 601), torch.tensor([0.0, 1.0, 0.2, 0.8, 0.99])])
    x = x.to(dtype).requires_grad_()
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(dtype)

    def f(x):
        return torch.logit(x, eps)

    (got,) = torch.autograd.grad(_compiled(f)(x), x, g)
    (want,) = torch.autograd.grad(f(x), x, g)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


_NDTR_X = [-1e30, -1e10, -1e4, -1e3, -100.0, -38.0, -30.0, -10.0, -3.0, -1.5, -1.0, 0.0, 1.0]
_NDTR_X += [3.0, 5.0, 8.0, 10.0, float("inf"), -float("inf"), float("nan")]


def test_log_ndtr_values_as_eager_and_gradients_as_float64():
    # Values: eager's formula (JAX's log_ndtr was 4% off at x = 5 in float32, 7% at 8 in
    # float64). Gradients: eager's formula exp(-(log_ndtr(x) + x^2 / 2)) / sqrt(2 pi) cancels
    # in the lower tail, where eager's float32 gradient is 4% off at -1000, 0 at -1e10 and NaN
    # at -1e30 (float64: inf at -1e10); ours (sqrt(2 / pi) / erfcx(-x / sqrt(2)) there) is
    # compared with eager's float64 gradient where that is finite, else with the asymptote
    # |x| + 1/|x| (exact to 1e-12 there), and must be closer to it than eager's. Where eager's
    # gradient is accurate (x >= -10) both agree.
    f = torch.special.log_ndtr
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(_NDTR_X, dtype=dtype)
        assert_same(_compiled(f)(x), f(x))
        leaves = [x.clone().requires_grad_() for _ in range(3)]
        x64 = leaves[2].detach().double().requires_grad_()
        grads = [
            torch.autograd.grad(fn(v).sum(), v)[0].double()
            for fn, v in ((_compiled(f), leaves[0]), (f, leaves[1]), (f, x64))
        ]
        ours, eager, exact = grads
        far = ~exact.isfinite() & x64.isfinite()
        exact[far] = -x64[far] - 1 / x64[far]
        torch.testing.assert_close(ours, exact, rtol=1e-6, atol=0, equal_nan=True)
        accurate = x >= -10
        assert_same(ours[accurate].to(dtype), eager[accurate].to(dtype))
        known = exact.isfinite() & (exact != 0)
        ours_err = ((ours - exact).abs() / exact.abs())[known]
        eager_err = ((eager - exact).abs() / exact.abs()).nan_to_num(float("inf"))[known]
        assert (ours_err <= eager_err.clamp_min(1.2e-7)).all()


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("n", [5, 33, 100, 40001], ids=lambda n: f"n{n}")
@pytest.mark.parametrize(
    "fn",
    [F.relu6, lambda x: F.hardtanh(x, -2.0, 3.0), lambda x: torch.logit(x, 0.2)],
    ids=["relu6", "hardtanh", "logit"],
)
def test_gradients_at_nan_follow_eagers_kernel_loops(fn, n, dtype, device):
    # Eager's CPU kernels compare NaN false in their vectorized loop (gradient 0) and in their
    # scalar loop for the elements after the last whole block (hardtanh: the cotangent; logit:
    # NaN), per thread's chunk above 32768 elements; ours follows the position. On CUDA every
    # element takes the scalar rule.
    gen = torch.Generator().manual_seed(n)
    x = torch.rand(n, generator=gen).to(dtype) * 4 - 1
    x[torch.rand(n, generator=gen) < 0.3] = float("nan")
    g = torch.randn(n, generator=gen).to(dtype)
    x, g = x.to(device), g.to(device)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    (got,) = torch.autograd.grad(_compiled(fn)(a), a, g)
    (want,) = torch.autograd.grad(fn(b), b, g)
    if device == "cpu":
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        return
    # CUDA's kernels round their products in another order than the CPU's (which ours
    # follows bit for bit): where eager gives NaN or zero, so do we; elsewhere each element is
    # as close to the float64 gradient of the same inputs as eager's, or within the rounding
    # bound of the formula: logit's g / (x (1 - x)) rounds at most four times (1 - x, the
    # product, the division, the cotangent's product), so 4 units in the last place of the
    # dtype (relu6's and hardtanh's gradients are g or 0, exact).
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got == 0, want == 0)
    x64 = x.cpu().double().requires_grad_()
    (exact,) = torch.autograd.grad(fn(x64), x64, g.cpu().double())
    ulp = torch.finfo(dtype).eps * exact.abs()
    live = ~want.isnan().cpu()
    ours_err = (got.cpu().double() - exact).abs()[live]
    eager_err = (want.cpu().double() - exact).abs()[live]
    assert (ours_err <= torch.maximum(eager_err, 4 * ulp[live])).all()


def test_hardtanh_gradient_at_nan_in_a_channels_last_tensor():
    x = torch.rand(2, 3, 5, 7, generator=torch.Generator().manual_seed(0)) * 4 - 1
    x[x > 2] = float("nan")
    x = x.to(memory_format=torch.channels_last)
    g = torch.randn_like(x)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    (got,) = torch.autograd.grad(_compiled(F.relu6)(a), a, g)
    (want,) = torch.autograd.grad(F.relu6(b), b, g)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


_GRID = [0.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan")]
_X, _LO, _HI = (torch.tensor(v) for v in zip(*itertools.product(_GRID, repeat=3), strict=True))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, lo, hi: torch.clamp(x, min=lo, max=hi),
        lambda x, lo, hi: torch.clamp(x, min=lo) + torch.clamp(x, max=hi) * 2,
        lambda x, lo, hi: torch.clamp_min(x, lo) + torch.clamp_max(x, hi) * 2,
        lambda x, lo, hi: torch.fmax(x, lo) + torch.fmin(x, hi) * 2,
        lambda x, lo, hi: torch.clamp(x, 1.0, 2.0) + torch.clamp(x, min=1.0) + x.clamp(max=1.0) * 2,
    ],
    ids=["clamp", "clamp-one-bound", "clamp_min-max", "fmax-fmin", "scalar-bounds"],
)
def test_clamp_fmax_fmin_gradients_at_ties_nan_and_crossed_bounds_are_eagers(fn):
    # torch 2.14 changed these rules (ties split as maximum's, NaN passes the gradient, a scalar
    # bound passes none at the bound); the running torch's eager is the reference.
    args = [t.clone().requires_grad_() for t in (_X, _LO, _HI)]
    out = _compiled(fn)(*args)
    grads = torch.autograd.grad(out.sum(), args, allow_unused=True, materialize_grads=True)
    ref = fn(*args)
    ref_grads = torch.autograd.grad(ref.sum(), args, allow_unused=True, materialize_grads=True)
    assert_same(out, ref)
    assert_same(grads, ref_grads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64])
def test_heaviside_at_nan_zero_and_subnormals(dtype):
    # eager: values where x == 0, else x > 0: 0 at NaN (jnp.heaviside gave NaN), 1 at a
    # positive subnormal (XLA on CPU compares it as zero).
    if dtype.is_floating_point:
        x = torch.tensor([float("nan"), 0.0, -0.0, 1e-40, -1e-40, -2.0, 3.0, float("inf")])
        x = x.to(dtype)
    else:
        x = torch.tensor([0, -3, 4, 0])
    values = torch.arange(x.numel()).to(dtype) + 5
    out, ref, _, _ = run_both(torch.heaviside, x, values)
    assert_same(out, ref)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_embedding_max_norm_trains_as_eager(norm_type):
    # F.embedding(max_norm=) renormalizes the named rows in place under no_grad; its op had no
    # lowering, ran in eager under autograd, and the backward raised "the derivative for
    # 'embedding_renorm' is not implemented"
    torch.manual_seed(0)
    model = torch.nn.Embedding(10, 4, max_norm=1.0, norm_type=norm_type)
    ref = torch.nn.Embedding(10, 4, max_norm=1.0, norm_type=norm_type)
    ref.load_state_dict(model.state_dict())
    idx = torch.tensor([[1, 2, 1], [9, 0, 3]])
    weights = torch.linspace(-1, 1, 24).reshape(2, 3, 4)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    for _ in range(2):
        out, want = compiled(idx), ref(idx)
        assert_same(out, want)
        (out * weights).sum().backward()
        (want * weights).sum().backward()
        assert_same(model.weight.detach(), ref.weight.detach())
        assert_same(model.weight.grad, ref.weight.grad)


def test_var_and_std_of_complex_tensors_use_the_imaginary_parts():
    # (the input was cast to the real result dtype first, which dropped the imaginary parts)
    def fn(x):
        return x.var(), x.std(0), x.var(1, correction=0), torch.var_mean(x), torch.std_mean(x, 1)

    x = torch.randn(3, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    assert_same(_compiled(fn)(x), fn(x))
