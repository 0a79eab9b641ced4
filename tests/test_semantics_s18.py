"""Forward semantics found by scripts/probe_semantics.py (session 18): each test is a class of
user code where the compiled call answered otherwise than eager PyTorch (a value, an error, a
crash where eager runs), compared strictly against eager."""

from __future__ import annotations

import pytest
import torch

from tests._util import assert_same, clone_args


def _compiled(fn):
    return torch.compile(fn, backend="xla", options={"strict": True})


def _same_as_eager(fn, *args):
    """Outputs and the inputs after the call (in-place writes) equal eager's, bit for bit for
    integer and bool tensors, or the error is eager's (its type, its first line)."""
    a_xla, a_eager = clone_args(args), clone_args(args)
    try:
        ref = fn(*a_eager)
    except Exception as eager:  # (eager's error is what is compared)
        with pytest.raises(type(eager)) as info:
            _compiled(fn)(*a_xla)
        first = str(eager).splitlines()[0]
        assert str(info.value).startswith(first), (str(info.value), first)
        assert_same(a_xla, a_eager, rtol=0, atol=0)  # (eager's writes before the error)
        return info.value
    out = _compiled(fn)(*a_xla)
    assert_same(out, ref, rtol=0, atol=0)
    assert_same(a_xla, a_eager, rtol=0, atol=0)
    return out


# --- a write through a view of one input reading another input that overlaps it ---------------
def _add_shifted(a, b):
    return a[:-1].add_(b)


def _mul_strided(a, b):
    a[1:].mul_(b[::2])
    return a


def _copy_into_row(a, b):
    return a[0, 1:3].copy_(b[0])


@pytest.mark.parametrize(
    "fn, views",
    [
        (_add_shifted, lambda t: (t, t[1:])),  # eager: partial overlap, raises
        (_add_shifted, lambda t: (t[:5], t[2:6])),
        (_mul_strided, lambda t: (t[:4], t[1:7])),
        (_add_shifted, lambda t: (t[:4], t[5:])),  # no overlap: runs
        (_add_shifted, lambda t: (t[:5], t[:4])),  # identical memory read and written: runs
        (_copy_into_row, lambda t: (t.view(2, 4), t[2:6].view(2, 2))),  # raises
        (_copy_into_row, lambda t: (t.view(2, 4), t[4:].view(2, 2))),
    ],
)
def test_write_into_a_view_of_an_input_reading_an_overlapping_input(fn, views):
    def call(run):
        t = torch.arange(8.0)
        try:
            out = run(*views(t))
        except RuntimeError as e:
            return ("raised", str(e).splitlines()[0], t)
        return ("ran", out.clone(), t)

    torch._dynamo.reset()
    got, want = call(_compiled(fn)), call(fn)
    assert got[0] == want[0], (got, want)
    if want[0] == "raised":
        assert got[1] == want[1]
        assert torch.equal(got[2], want[2])  # (nothing written before eager's check)
    else:
        assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])


# --- in-place index writes into bool tensors ----------------------------------------------------
_B = torch.tensor([False, True, False, False])
_I = torch.tensor([1, 1, 3])
_V = torch.tensor([True, True, False])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i, v: x.index_put_((i,), v, accumulate=True),
        lambda x, i, v: x.index_put_((i,), v),
        lambda x, i, v: x.put_(i, v, accumulate=True),
        lambda x, i, v: x.index_add_(0, i, v),
        lambda x, i, v: x.index_copy_(0, i[1:], v[1:]),
        lambda x, i, v: x.scatter_(0, i, v),
        lambda x, i, v: x.scatter_add_(0, i, v),
        lambda x, i, v: x.index_fill_(0, i, True),
        lambda x, i, v: x.scatter_reduce_(0, i, v, "amax", include_self=False),
    ],
)
def test_in_place_index_writes_into_bool_tensors(fn):
    """The compile-time check of a write whose arguments are of a higher kind than the written
    tensor (an int64 index into a bool one) ran eager on one-element tensors of ones, whose
    index is out of range: its IndexError ended the compile where eager runs."""
    _same_as_eager(fn, _B.clone(), _I, _V)


# --- scatters that accumulate in half precision ---------------------------------------------------
_N = 600
_IDX = torch.zeros(_N, dtype=torch.long)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "fn, shape",
    [
        (lambda x, v: x.scatter_add(0, _IDX, v), (2,)),
        (
            lambda x, v: x.scatter_add_(0, _IDX[:, None].expand(_N, 3), v[:, None].expand(_N, 3)),
            (2, 3),
        ),
        (lambda x, v: x.scatter_reduce(0, _IDX, v, "sum"), (2,)),
        (lambda x, v: x.scatter_reduce(0, _IDX, v, "sum", include_self=False), (2,)),
        (lambda x, v: x.scatter_reduce(0, _IDX, v, "mean"), (2,)),
        (lambda x, v: x.scatter_reduce(0, _IDX, v, "mean", include_self=False), (2,)),
        (lambda x, v: (x + 1).scatter_reduce(0, _IDX, v * 0 + 1.01, "prod"), (2,)),
        (lambda x, v: x.scatter(0, _IDX, v, reduce="add"), (2,)),
        (lambda x, v: x.index_add(0, _IDX, v), (2,)),
        (lambda x, v: x.index_put((_IDX,), v, accumulate=True), (2,)),  # (eager: in bf16)
    ],
)
def test_scatters_accumulate_half_precision_as_eager(fn, shape, dtype):
    """Eager's CPU scatter kernels add (multiply) float16/bfloat16 values in float32 and round
    once (a mean's total before it is divided): 600 bf16 ones scattered into one element make
    600; added in bf16 they stop at 256."""
    value = 1.0 if dtype == torch.bfloat16 else 0.1
    _same_as_eager(fn, torch.zeros(shape, dtype=dtype), torch.full((_N,), value, dtype=dtype))


# --- -0.0 plus a constant zero ------------------------------------------------------------------
def _accumulate(x):
    acc = torch.zeros_like(x)
    acc += x
    return acc


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 0.0,
        lambda x: 0.0 + x,
        lambda x: x - (-0.0),
        lambda x: x - 0.0,
        lambda x: x + torch.zeros(3),
        lambda x: torch.zeros(3, dtype=torch.float64) + x,
        lambda x: x + torch.tensor(0.0),
        lambda x: x + torch.tensor([0.0, 0.0, 0.0]),
        lambda x: x - torch.tensor(-0.0),
        lambda x: x + torch.full((3,), -0.0),
        lambda x: x + x.new_zeros(()).expand(3),
        lambda x: torch.add(x, 0.0, alpha=3),
        lambda x: x.to(torch.bfloat16) + 0,
        _accumulate,
    ],
)
def test_negative_zero_plus_a_constant_zero_is_positive_zero(fn):
    """XLA's simplifier rewrote ``x + 0`` with a zero constant of the program to ``x``:
    -0.0 + 0.0 gave -0.0 where eager (IEEE) gives +0.0 (seen by signbit, copysign, 1 / x)."""
    out = _same_as_eager(fn, torch.tensor([-0.0, 0.0, 1.5]))
    want = fn(torch.tensor([-0.0, 0.0, 1.5]))
    assert torch.equal(out.signbit(), want.signbit()), (out, want)


# --- histc of data whose range is not finite ---------------------------------------------------
@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([1.0, float("nan")]),
        torch.tensor([1.0, float("inf")]),
        torch.tensor([-float("inf"), 2.5, 1.0]),
        torch.tensor([float("nan"), 1.0], dtype=torch.float64),
        torch.tensor([0.5, 1.0, 2.0, 0.25]),  # runs
        torch.tensor([1.0, float("nan")]).half(),
    ],
)
def test_histc_of_data_whose_range_is_not_finite_raises_as_eager(x):
    """histc without min/max takes the data's range; eager raises where it holds a NaN or an
    infinity (the lowering had mapped the ends to 0 and counted)."""
    _same_as_eager(lambda t: torch.histc(t, 3), x)


# --- arithmetic with constants is not reassociated ----------------------------------------------
_MAGIC = 12582912.0  # 1.5 * 2**23: adding and subtracting it rounds a float32 to an integer


def _fake_quant(x):
    return torch.clamp((x / 0.05 + _MAGIC) - _MAGIC, -128, 127) * 0.05


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x + _MAGIC) - _MAGIC,
        lambda x: x.add(_MAGIC).sub(_MAGIC),
        lambda x: x.clone().add_(_MAGIC).sub_(_MAGIC),
        lambda x: (x + torch.tensor(_MAGIC)) - torch.tensor(_MAGIC),
        lambda x: (x + torch.full((64,), _MAGIC)) - _MAGIC,
        lambda x: (x - 0.7) + 0.7,
        lambda x: (x + 0.1) + 0.2,
        lambda x: (x * 0.1) * 3.0,
        lambda x: torch.add(x, x, alpha=0.1) * 3.0,
        lambda x: (x.double() + 2.0**52 * 1.5) - 2.0**52 * 1.5,
        lambda x: (x.half() + 1024.0) - 1024.0,
    ],
)
def test_arithmetic_with_constants_rounds_each_step_as_eager(fn):
    """XLA's simplifier reassociated sums and products with constants as if floats were reals:
    ``(x + 12582912.0) - 12582912.0`` (rounding to an integer, as fake quantization writes it)
    returned ``x``. Eager rounds each step: the values are bit for bit eager's."""
    x = torch.randn(64, generator=torch.Generator().manual_seed(0)) * 100
    _same_as_eager(fn, x)


def test_fake_quantization_by_the_rounding_constant_as_eager():
    x = torch.randn(256, generator=torch.Generator().manual_seed(1))
    _same_as_eager(_fake_quant, x)  # (bit for bit)


# --- exp's overflow is not simplified away ------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.log(torch.exp(x)),
        lambda x: x.exp().log_(),
        lambda x: torch.exp(x) / torch.exp(x * 0.5),
        lambda x: x.exp().div(x.mul(0.5).exp()),
        lambda x: x.exp() / x.exp().sum(),  # (no rewrite: unchanged)
    ],
)
def test_exp_overflow_is_not_simplified_away(fn):
    """XLA rewrote log(exp(x)) to x and exp(a) / exp(b) to exp(a - b): where eager's exp
    overflows (x = 100 in float32) eager gives inf, the rewrite a finite value. (No values
    whose exp is subnormal: XLA's CPU flushes those, a documented limitation.)"""
    x = torch.tensor([100.0, 89.0, 50.0, 1.0, 0.0, -1.0, -3.0, -50.0])
    out, ref = _compiled(fn)(x.clone()), fn(x.clone())
    assert torch.equal(out.isinf(), ref.isinf()) and torch.equal(out.isnan(), ref.isnan())
    # Finite values: XLA's exp and log and eager's vectorized ones (which vary with the CPU's
    # vector unit) are each within 1 ulp of the float64 value, so within 2 ulps of each other.
    finite = ref.isfinite()
    wide = fn(x.double())[finite]
    ulp = torch.finfo(torch.float32).eps * wide.abs().clamp_min(1.0)
    assert ((ref[finite].double() - wide).abs() <= ulp).all()  # (the bound holds for eager)
    assert ((out[finite].double() - wide).abs() <= ulp).all()


# --- addcdiv/addcmul that Dynamo splits ---------------------------------------------------------
def _addcdiv(x, y):
    return torch.addcdiv(x, x, y, value=0.1)


def _addcdiv_(x, y):
    return x.clone().addcdiv_(x, y, value=-0.1)


def _addcmul_(x, y):
    return x.clone().addcmul_(x, y, value=0.1)


def _written_out(x, y):
    return x + torch.div(x, y) * 0.1  # (three ops, each rounded: left as written)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("fn", [_addcdiv, _addcdiv_, _addcmul_, _written_out])
def test_addcdiv_and_addcmul_round_once_as_eager(fn, dtype):
    """Dynamo splits ``torch.addcdiv(s, t1, t2, value=v)`` into div, mul, add and
    ``s.addcdiv_``/``s.addcmul_`` into div/mul and fma: each part was rounded to bf16 where
    eager's kernel rounds once (bf16 optimizer steps drifted), and t1 / t2 * v is not eager's
    v * t1 / t2 in float32 either. The calls are put back whole."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(512, generator=g) * 10).to(dtype)
    y = (torch.randn(512, generator=g) * 10).to(dtype)
    if fn is _written_out and dtype == torch.float32:
        pytest.skip("XLA's CPU contracts a * b + c into an fma (1 ulp): not bit for bit")
    _same_as_eager(fn, x, y)


# --- add/sub with alpha on half-precision tensors ----------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n", [5, 37, 50, 100, 4005])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: torch.add(x, m, alpha=0.1),
        lambda x, m: x.clone().sub_(m, alpha=0.3),
        lambda x, m: torch.add(x, m[0], alpha=0.1),
    ],
)
def test_half_precision_add_with_alpha_as_eager(fn, n, dtype):
    """Eager's vectorized loop multiplies by alpha rounded to the dtype and rounds once (an
    SGD step ``p.add_(grad, alpha=-lr)``); only its scalar tail rounds the product first,
    which the lowering had done everywhere."""
    g = torch.Generator().manual_seed(n)
    x = (torch.randn(n, generator=g) * 10).to(dtype)
    m = (torch.randn(n, generator=g) * 10).to(dtype)
    _same_as_eager(fn, x, m)


# --- a dtype the call names that eager's kernel does not implement ------------------------------
@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda t: t.cumsum(0, dtype=torch.bool), torch.tensor([True, False, True])),
        (lambda t: t.cumprod(0, dtype=torch.bool), torch.tensor([True, False, True])),
        (lambda t: t.cumsum(0, dtype=torch.bool), torch.tensor([1.0, 2.0])),
        (lambda t: t.sum(dtype=torch.bool), torch.tensor([True, False, True])),  # runs
        (lambda t: t.cumsum(0, dtype=torch.int8), torch.tensor([100, 100, 3])),  # runs
    ],
)
def test_a_dtype_argument_eager_does_not_implement_raises_as_eager(fn, x):
    """The probe of eager's dtype refusals replaced the tensors' dtypes only: a refusal of the
    ``dtype=`` the call names (``cumsum(dtype=torch.bool)``: "cumsum_out_cpu" not implemented
    for 'Bool') looked like another error, and XLA computed it."""
    _same_as_eager(fn, x)


@pytest.mark.parametrize("zero", ["python", "zeros_like"])
def test_sum_with_a_constant_zero_keeps_its_gradient_where_it_is_zero(zero):
    """The sum is +0.0 where it is zero, and its gradient is still the identity's there
    (margin_ranking_loss with margin 0 at a tie: eager's gradient passes the clamp)."""

    def f(x):
        z = 0.0 if zero == "python" else torch.zeros_like(x)
        return (x * 0.5 + z).clamp_min(0.0)

    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 0.5], requires_grad=True)
    ct = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    out = torch.compile(f, backend="xla")(x)
    (got,) = torch.autograd.grad(out, x, ct)
    ref = f(x)
    (want,) = torch.autograd.grad(ref, x, ct)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert torch.equal(out.signbit(), ref.signbit())
    torch.testing.assert_close(got, want, rtol=0, atol=0)
