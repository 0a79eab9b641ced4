"""Where eager raises, we raise: indices out of range, integer division by zero, negative integer
powers and operands of different dtypes (issue 22, item 7).

Each case is written as users write it, compiled with ``backend="xla"``, and must raise the
exception type eager raises, with a message that names the op and the user's source line.
Valid neighbours of each case (negative indices in range, ``ignore_index``, empty index tensors,
autocast, type promotion) must still match eager.
"""

from __future__ import annotations

import itertools
import traceback

import jax
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2xla
from tests._util import ProgramCounter, assert_same

THIS = __file__


def _i(*values):
    return torch.tensor(values)


def _x():
    return torch.randn(4, 3)


def _logp():
    return torch.randn(2, 3, 2, 2).log_softmax(1)


# -- indices out of range ---------------------------------------------------------------------
# (name, function, arguments, the user's line as it appears in the message)
def getitem(x, i):
    return x[i] * 2


def getitem_dim1(x, i):
    return x[:, i] * 2


def setitem(x, i):
    x = x.clone()
    x[i] = 1.0
    return x


def index_put_(x, i, v):
    x = x.clone()
    x.index_put_((i,), v, accumulate=True)
    return x


def index_select(x, i):
    return x.index_select(1, i) + 1


def gather(x, i):
    return x.gather(1, i) + 1


def scatter(x, i):
    return x.scatter(1, i, 2.0)


def scatter_add(x, i, src):
    return x.scatter_add(0, i, src)


def scatter_reduce(x, i, src):
    return x.scatter_reduce(0, i, src, "amax")


def embedding(w, i):
    return F.embedding(i, w) * 2


def embedding_bag(w, i, offsets):
    return F.embedding_bag(i, w, offsets, mode="sum")


def cross_entropy(logits, target):
    return F.cross_entropy(logits, target)


def nll_loss_2d(logp, target):
    return F.nll_loss(logp, target, ignore_index=-1)


def take(x, i):
    return x.take(i) * 2


def put(x, i, v):
    return x.put(i, v)


def index_add(x, i, src):
    return x.index_add(0, i, src)


def index_copy(x, i, src):
    return x.index_copy(0, i, src)


def index_fill(x, i):
    return x.index_fill(0, i, -1.0)


def index_reduce(x, i, src):
    return x.index_reduce(0, i, src, "prod")


_SRC = torch.ones(2, 3)
INDEX_CASES = [
    ("getitem", getitem, (_x(), _i(0, 4)), "return x[i] * 2"),
    ("getitem_negative", getitem, (_x(), _i(-5, 1)), "return x[i] * 2"),
    ("getitem_dim1", getitem_dim1, (_x(), _i(3)), "return x[:, i] * 2"),
    ("setitem", setitem, (_x(), _i(1, 7)), "x[i] = 1.0"),
    (
        "index_put_",
        index_put_,
        (_x(), _i(-9), torch.ones(3)),
        "x.index_put_((i,), v, accumulate=True)",
    ),
    ("index_select", index_select, (_x(), _i(0, 3)), "x.index_select(1, i)"),
    ("index_select_negative", index_select, (_x(), _i(-1)), "x.index_select(1, i)"),
    ("gather", gather, (_x(), _i(0, 1, 2, 3).view(4, 1)), "x.gather(1, i)"),
    ("gather_negative", gather, (_x(), _i(0, -1, 2, 1).view(4, 1)), "x.gather(1, i)"),
    ("scatter", scatter, (_x(), _i(0, 1, 5, 1).view(4, 1)), "x.scatter(1, i, 2.0)"),
    (
        "scatter_add",
        scatter_add,
        (_x(), _i(0, 4, 1).view(1, 3), torch.ones(1, 3)),
        "x.scatter_add(0, i, src)",
    ),
    (
        "scatter_reduce",
        scatter_reduce,
        (_x(), _i(0, -1, 1).view(1, 3), torch.ones(1, 3)),
        "x.scatter_reduce(0, i, src",
    ),
    ("embedding", embedding, (_x(), _i(1, 4, 0)), "F.embedding(i, w)"),
    ("embedding_negative", embedding, (_x(), _i(-1)), "F.embedding(i, w)"),
    ("embedding_bag", embedding_bag, (_x(), _i(0, 2, 4), _i(0, 1)), "F.embedding_bag(i, w"),
    ("cross_entropy", cross_entropy, (_x(), _i(0, 1, 3, 2)), "F.cross_entropy(logits, target)"),
    (
        "cross_entropy_negative",
        cross_entropy,
        (_x(), _i(0, -2, 1, 2)),
        "F.cross_entropy(logits, target)",
    ),
    (
        "nll_loss_2d",
        nll_loss_2d,
        (_logp(), torch.tensor([[[0, 1], [2, -1]], [[3, 0], [0, 0]]])),
        "F.nll_loss(logp, target",
    ),
    ("take", take, (_x(), _i(0, 12)), "x.take(i)"),
    ("take_negative", take, (_x(), _i(-13)), "x.take(i)"),
    ("put", put, (_x(), _i(12), torch.ones(1)), "x.put(i, v)"),
    ("index_add", index_add, (_x(), _i(0, 4), _SRC), "x.index_add(0, i, src)"),
    ("index_add_negative", index_add, (_x(), _i(0, -1), _SRC), "x.index_add(0, i, src)"),
    ("index_copy", index_copy, (_x(), _i(5, 0), _SRC), "x.index_copy(0, i, src)"),
    ("index_fill", index_fill, (_x(), _i(1, -5)), "x.index_fill(0, i, -1.0)"),
    ("index_reduce", index_reduce, (_x(), _i(4, 0), _SRC), 'x.index_reduce(0, i, src, "prod")'),
]


def _eager_error(fn, args) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


def _assert_names_op_and_line(err: BaseException, line: str) -> None:
    message = str(err)
    assert "op: aten." in message, message
    assert f"user code: {THIS}:" in message and line in message, message


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("name, fn, args, line", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_out_of_range_raises_what_eager_raises(name, fn, args, line):
    eager = _eager_error(fn, args)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    err = info.value
    assert isinstance(err, torch2xla.OpIndexError)
    # Eager raises IndexError for some of these ops and RuntimeError for others: ours is both.
    assert isinstance(err, IndexError) and isinstance(err, RuntimeError)
    _assert_names_op_and_line(err, line)


def test_the_message_names_the_bad_index_as_eager_does():
    x, i = _x(), _i(0, 7)
    eager = _eager_error(getitem, (x, i))
    with pytest.raises(IndexError) as info:
        torch.compile(getitem, backend="xla")(x, i)
    assert str(info.value).startswith(str(eager))  # "index 7 is out of bounds for dimension 0 ..."
    assert str(_eager_error(cross_entropy, (x, _i(0, 1, 9, 2)))) == "Target 9 is out of bounds."
    with pytest.raises(IndexError, match="^Target 9 is out of bounds.") as info:
        torch.compile(cross_entropy, backend="xla")(x, _i(0, 1, 9, 2))
    assert "nll_loss" in str(info.value)


VALID_INDEX_CASES = [
    ("getitem_negative", getitem, (_x(), _i(-4, -1, 3))),
    ("getitem_empty", getitem, (_x(), torch.tensor([], dtype=torch.long))),
    ("getitem_empty_dim", getitem, (torch.zeros(0, 3), torch.tensor([], dtype=torch.long))),
    ("getitem_int32", getitem, (_x(), torch.tensor([3, -4], dtype=torch.int32))),
    ("setitem_negative", setitem, (_x(), _i(-1, -4))),
    ("index_put_negative", index_put_, (_x(), _i(-1, -1), torch.ones(3))),
    ("index_select_empty", index_select, (_x(), torch.tensor([], dtype=torch.long))),
    ("gather_in_range", gather, (_x(), _i(0, 1, 2, 0).view(4, 1))),
    ("gather_empty", gather, (_x(), torch.zeros(4, 0, dtype=torch.long))),
    ("embedding_bag", embedding_bag, (_x(), _i(0, 2, 3, 3), _i(0, 1))),
    ("embedding_empty", embedding, (_x(), torch.zeros(0, 2, dtype=torch.long))),
    ("cross_entropy_ignore_index", cross_entropy, (_x(), _i(0, -100, 1, -100))),
    (
        "nll_loss_2d_ignore_index",
        nll_loss_2d,
        (_logp(), torch.tensor([[[0, 1], [2, -1]], [[-1, 0], [0, 2]]])),
    ),
    ("take_negative", take, (_x(), _i(-12, 11))),
    ("put_negative", put, (_x(), _i(-12), torch.ones(1))),
    ("index_fill_negative", index_fill, (_x(), _i(-4, 3))),
    ("index_add_in_range", index_add, (_x(), _i(3, 3), _SRC)),
]


@pytest.mark.parametrize("name, fn, args", VALID_INDEX_CASES, ids=[c[0] for c in VALID_INDEX_CASES])
def test_valid_indices_match_eager(name, fn, args):
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert_same(out, fn(*args))


def cross_entropy_ignoring_5(logits, target):
    return F.cross_entropy(logits, target, ignore_index=5)


def test_ignore_index_out_of_range_is_ignored():
    # ignore_index itself may be out of range: its targets are skipped, as in eager
    args = (_x(), _i(0, 5, 1, 5))
    out = torch.compile(cross_entropy_ignoring_5, backend="xla")(*args)
    assert_same(out, cross_entropy_ignoring_5(*args))


def test_a_failed_call_keeps_its_program_and_later_calls_run():
    bad = (_x(), _i(0, 9))
    compiled = torch.compile(getitem, backend="xla")
    with pytest.raises(IndexError):
        compiled(*bad)
    x, i = _x(), _i(3, 0)
    assert_same(compiled(x, i), getitem(x, i))
    info = torch2xla.cache_info(compiled)
    assert sum(len(g.signatures) for g in info.graphs) == 1, info  # not compiled again


# -- integer division by zero -----------------------------------------------------------------
def floor_div(a, b):
    return a // b + 1


def mod(a, b):
    return a % b + 1


def div_floor(a, b):
    return torch.div(a, b, rounding_mode="floor")


def div_trunc(a, b):
    return torch.div(a, b, rounding_mode="trunc")


def fmod(a, b):
    return torch.fmod(a, b)


def remainder(a, b):
    return torch.remainder(a, b)


def floor_div_by_literal(a):
    return a // 0


def mod_by_literal(a):
    return a % 0


def scalar_mod_tensor(b):
    return 7 % b


_A, _B = torch.tensor([7, -7, 3]), torch.tensor([2, 0, 1])
DIV_CASES = [
    ("floor_div", floor_div, (_A, _B), "return a // b + 1"),
    ("mod", mod, (_A, _B), "return a % b + 1"),
    ("div_floor", div_floor, (_A, _B), 'torch.div(a, b, rounding_mode="floor")'),
    ("div_trunc", div_trunc, (_A, _B), 'torch.div(a, b, rounding_mode="trunc")'),
    ("fmod", fmod, (_A, _B), "torch.fmod(a, b)"),
    ("remainder", remainder, (_A, _B), "torch.remainder(a, b)"),
    (
        "int32_broadcast",
        floor_div,
        (_A.int(), torch.tensor(0, dtype=torch.int32)),
        "return a // b + 1",
    ),
    ("uint8", mod, (_A.abs().to(torch.uint8), _B.to(torch.uint8)), "return a % b + 1"),
    ("floor_div_by_literal", floor_div_by_literal, (_A,), "return a // 0"),
    ("mod_by_literal", mod_by_literal, (_A,), "return a % 0"),
    ("scalar_mod_tensor", scalar_mod_tensor, (_B,), "return 7 % b"),
]


@pytest.mark.parametrize("name, fn, args, line", DIV_CASES, ids=[c[0] for c in DIV_CASES])
def test_integer_division_by_zero_raises_what_eager_raises(name, fn, args, line):
    eager = _eager_error(fn, args)
    assert type(eager) is RuntimeError and str(eager) == "ZeroDivisionError"
    with pytest.raises(RuntimeError, match="^ZeroDivisionError") as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert isinstance(info.value, torch2xla.OpZeroDivisionError)
    assert isinstance(info.value, ZeroDivisionError)
    _assert_names_op_and_line(info.value, line)


VALID_DIV_CASES = [
    ("floor_div", floor_div, (_A, torch.tensor([2, -3, 1]))),
    ("mod_negative", mod, (_A, torch.tensor([-2, 3, -1]))),
    ("float_by_zero", floor_div, (_A.double(), _B.double())),
    ("int_by_float_zero", floor_div, (_A, torch.tensor(0.0))),
    ("true_div_int_by_zero", lambda a, b: a / b, (_A, _B)),
    ("empty_by_zero", floor_div, (torch.tensor([], dtype=torch.long), torch.tensor(0))),
]


@pytest.mark.parametrize("name, fn, args", VALID_DIV_CASES, ids=[c[0] for c in VALID_DIV_CASES])
def test_valid_divisions_match_eager(name, fn, args):
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert_same(out, fn(*args))


# -- ops whose result is never used -----------------------------------------------------------
# Eager runs them and raises; the ATen export drops dead ops, so their checks are kept alive.
def _unused(fn):
    def unused_result(*args):
        fn(*args)  # the result is never read
        return args[0] + 1

    return unused_result


DEAD_CASES = [(f"dead_{c[0]}", _unused(c[1]), *c[2:]) for c in INDEX_CASES + DIV_CASES]


@pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
@pytest.mark.parametrize("name, fn, args, line", DEAD_CASES, ids=[c[0] for c in DEAD_CASES])
def test_ops_whose_result_is_unused_raise_what_eager_raises(name, fn, args, line):
    eager = _eager_error(fn, args)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert isinstance(info.value, torch2xla.OpError)
    _assert_names_op_and_line(info.value, line)


def set_unused_copy(x, i):
    y = x.clone()
    y[i] = 1.0
    return x * 2


def gather_unused(x, i):
    z = torch.gather(x, 1, i)
    w = z.exp()  # noqa: F841  (dead too)
    return x.sum()


def divide_unused(a, b):
    q = a // b  # noqa: F841
    return a + 1


def embed_twice(w, i, j):
    F.embedding(j, w)
    return F.embedding(i, w).sum()


@pytest.mark.parametrize(
    "fn, args, line",
    [
        (set_unused_copy, (_x(), _i(1, 4)), "y[i] = 1.0"),
        (gather_unused, (_x(), _i(0, 3, 1, 1).view(4, 1)), "z = torch.gather(x, 1, i)"),
        (divide_unused, (_A, _B), "q = a // b"),
        (embed_twice, (_x(), _i(1), _i(5)), "F.embedding(j, w)"),
    ],
    ids=["setitem", "gather", "floor_div", "embedding"],
)
@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_unused_results_of_user_code_raise_as_eager(fn, args, line, grad):
    args = tuple(a.clone().requires_grad_(grad and a.is_floating_point()) for a in args)
    eager = _eager_error(fn, args)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    _assert_names_op_and_line(info.value, line)
    # valid indices and divisors: eager's values (and gradients)
    good = tuple(a.clamp(-1, 1) if not a.is_floating_point() else a for a in args)
    good = tuple(a if a.is_floating_point() or fn is not divide_unused else a + 3 for a in good)
    out = torch.compile(fn, backend="xla", options={"strict": True})(*good)
    assert_same(out, fn(*good))


@torch.no_grad()
def test_unused_results_without_checks_are_dropped(monkeypatch):
    counter = ProgramCounter(monkeypatch)

    def unused(x, i, a):
        x.sin()
        (a / 2).floor()  # (a float division: nothing to check)
        torch.gather(x, 1, i)
        return x.cos()

    compiled = torch.compile(unused, backend="xla")
    x, i = _x(), _i(0, 1, 2, 0).view(4, 1)
    assert_same(compiled(x, i, _A.double()), unused(x, i, _A.double()))
    (program,) = counter.programs
    targets = {n.target for n in program.gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.sin.default not in targets and torch.ops.aten.div.Tensor not in targets
    assert torch.ops.aten.gather.default in targets  # (kept for its check)
    assert len(program._flat_fn.checks) == 1


# -- integer powers ---------------------------------------------------------------------------
def int_pow_literal(a):
    return a**-1


def test_negative_integer_power_raises_at_compile_time():
    a = torch.tensor([2, 1, -1])
    eager = _eager_error(int_pow_literal, (a,))
    message = "^Integers to negative integer powers are not allowed"
    with pytest.raises(RuntimeError, match=message) as info:
        torch.compile(int_pow_literal, backend="xla")(a)
    assert str(info.value).startswith(str(eager))
    assert isinstance(info.value, torch2xla.OpError)
    _assert_names_op_and_line(info.value, "return a**-1")


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a ** torch.tensor(-1),  # a tensor exponent: eager computes (0, 1 or -1)
        lambda a: a ** torch.tensor([-1, -2, -3]),
        lambda a: 2 ** (-a),
        lambda a: a.pow(-1.0),
        lambda a: a**2,
    ],
    ids=["tensor_exponent_0d", "tensor_exponent", "scalar_base", "float_exponent", "positive"],
)
def test_integer_powers_eager_computes_match(fn):
    a = torch.tensor([2, 1, -1])
    out = torch.compile(fn, backend="xla", options={"strict": True})(a)
    assert_same(out, fn(a))


# -- dtypes eager rejects ---------------------------------------------------------------------
def matmul(a, b):
    return a @ b


def linear(x, w, b):
    return F.linear(x, w, b)


def mv(m, v):
    return torch.mv(m, v)


def layer_norm(x, w):
    return F.layer_norm(x, (3,), w)


def conv_transpose_bias(x, w, b):
    return F.conv_transpose1d(x, w, b)


def index_put_values(x, i, v):
    return x.index_put((i,), v)


def index_add_source(x, i, v):
    return x.index_add(0, i, v)


def setitem_tensor(x, i, v):
    x = x.clone()
    x[i] = v
    return x


_D = torch.float64
DTYPE_CASES = [
    ("matmul", matmul, (torch.randn(2, 3, dtype=_D), torch.randn(3, 2)), "return a @ b"),
    (
        "matmul_batched_2d",
        matmul,
        (torch.randn(4, 2, 3), torch.randn(3, 2, dtype=_D)),
        "return a @ b",
    ),
    (
        "linear_weight",
        linear,
        (torch.randn(2, 3), torch.randn(4, 3, dtype=_D), None),
        "F.linear(x, w, b)",
    ),
    (
        "linear_bias",
        linear,
        (torch.randn(2, 3), torch.randn(4, 3), torch.randn(4, dtype=_D)),
        "F.linear(x, w, b)",
    ),
    ("mv", mv, (torch.randn(2, 3), torch.randn(3, dtype=_D)), "torch.mv(m, v)"),
    ("matmul_vector", matmul, (torch.randn(2, 3), torch.randn(3, dtype=_D)), "return a @ b"),
    (
        "layer_norm",
        layer_norm,
        (torch.randn(2, 3), torch.randn(3, dtype=_D)),
        "F.layer_norm(x, (3,), w)",
    ),
    (
        "index_put_values",
        index_put_values,
        (torch.randn(3, 2), _i(0), torch.randn(2, dtype=_D)),
        "x.index_put((i,), v)",
    ),
    (
        "index_add_source",
        index_add_source,
        (torch.randn(3, 2), _i(0), torch.randn(1, 2, dtype=_D)),
        "x.index_add(0, i, v)",
    ),
    (
        "setitem_tensor",
        setitem_tensor,
        (torch.zeros(3, dtype=_D), _i(0), torch.tensor([1.0])),
        "x[i] = v",
    ),
]


@pytest.mark.parametrize("name, fn, args, line", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_mismatched_dtypes_raise_what_eager_raises(name, fn, args, line):
    eager = _eager_error(fn, args)
    assert type(eager) is RuntimeError
    with pytest.raises(RuntimeError) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert isinstance(info.value, torch2xla.OpError), info.value
    # (eager's message of this torch: mv's changed from 2.11 to 2.13)
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    _assert_names_op_and_line(info.value, line)


def test_mm_dtype_message_is_eagers():
    args = (torch.randn(2, 2, dtype=_D), torch.randn(2, 2))
    eager = _eager_error(matmul, args)
    with pytest.raises(RuntimeError) as info:
        torch.compile(matmul, backend="xla")(*args)
    assert str(info.value).startswith(str(eager))


def autocast_matmul(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return a @ b


def autocast_linear_norm(x, w, b, g):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return F.layer_norm(F.linear(x, w, b), (4,), g)


def setitem_scalar(x, i):
    x = x.clone()
    x[i] = 1
    x[x > 0.5] = 2
    return x


VALID_DTYPE_CASES = [
    ("autocast_matmul", autocast_matmul, (torch.randn(2, 3), torch.randn(3, 2))),
    (
        "autocast_linear_norm",
        autocast_linear_norm,
        (torch.randn(2, 3), torch.randn(4, 3), torch.randn(4), torch.randn(4)),
    ),
    ("promoting_add", lambda a, b: a + b, (torch.randn(2, dtype=_D), torch.randn(2))),
    (
        "promoting_where",
        lambda a, b: torch.where(a > 0, a, b),
        (torch.randn(2, dtype=_D), torch.randn(2)),
    ),
    ("bf16_layer_norm_float_weight", layer_norm, (torch.randn(2, 3).bfloat16(), torch.randn(3))),
    ("setitem_scalar_float64", setitem_scalar, (torch.rand(3, dtype=_D), _i(0))),
    ("setitem_scalar_int", setitem_scalar, (torch.arange(3), _i(2))),
    # (eager's transposed convolutions accept a bias of another dtype)
    (
        "conv_transpose_bias",
        conv_transpose_bias,
        (torch.randn(1, 2, 5), torch.randn(2, 3, 2), torch.randn(3, dtype=_D)),
    ),
    ("float64_matmul", matmul, (torch.randn(2, 3, dtype=_D), torch.randn(3, 2, dtype=_D))),
]


@pytest.mark.parametrize("name, fn, args", VALID_DTYPE_CASES, ids=[c[0] for c in VALID_DTYPE_CASES])
def test_valid_dtype_mixes_match_eager(name, fn, args):
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    ref = fn(*args)
    if ref.dtype == torch.bfloat16:
        assert_same(out, ref, rtol=1.6e-2, atol=1e-2)  # bfloat16 results: one ulp
    else:
        assert_same(out, ref)


# -- training, remat, split graphs, options ---------------------------------------------------
class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 5)

    def forward(self, tokens, target):
        logits = self.head(self.embed(tokens).mean(1))
        return F.cross_entropy(logits, target)


@pytest.mark.parametrize("options", [{}, {"remat": True}], ids=["plain", "remat"])
def test_training_forward_raises_and_good_steps_match_eager(options):
    torch.manual_seed(0)
    model = Classifier()
    ref = Classifier()
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="xla", options={"strict": True, **options})
    tokens, target = torch.randint(0, 10, (4, 3)), torch.randint(0, 5, (4,))
    compiled(tokens, target).backward()
    ref(tokens, target).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert_same(p.grad, q.grad)
    with pytest.raises(IndexError, match="Target 7 is out of bounds") as info:
        compiled(tokens, torch.tensor([0, 7, 1, 2]))
    assert "F.cross_entropy(logits, target)" in str(info.value)
    with pytest.raises(IndexError, match="index out of range in self") as info:
        compiled(torch.tensor([[1, 2, 10]] * 4), target)
    assert "self.embed(tokens)" in str(info.value)


def test_checks_run_in_the_partitions_of_a_split_graph():
    def f(x, i):
        return x.sin()[i]  # sin runs in eager (eager_ops), the index in XLA

    options = {"eager_ops": [torch.ops.aten.sin.default]}
    compiled = torch.compile(f, backend="xla", options=options)
    x = _x()
    assert_same(compiled(x, _i(1, -1)), f(x, _i(1, -1)))
    with pytest.raises(torch2xla.OpIndexError, match="index 4 is out of bounds"):  # (from XLA)
        compiled(_x(), _i(4))


def test_checks_with_packed_outputs(monkeypatch):
    # mutated buffers are packed (one flat buffer): the status output must not be packed with them
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("a", torch.zeros(3))
            self.register_buffer("b", torch.zeros(3))

        def forward(self, x, i):
            self.a.add_(1)
            self.b.sub_(1)
            return x[i] + self.a

    counter = ProgramCounter(monkeypatch)
    m, ref = M(), M()
    compiled = torch.compile(m, backend="xla")
    x = _x()
    assert_same(compiled(x, _i(1)), ref(x, _i(1)))
    assert_same((m.a, m.b), (ref.a, ref.b))
    (program,) = counter.programs
    assert program.packing is not None and program._flat_fn.checks
    with pytest.raises(IndexError):
        compiled(x, _i(4))


def _outputs_of(program) -> int:
    return len(jax.tree_util.tree_leaves(program._infer.compiled.out_info))


@torch.no_grad()
def test_graphs_without_checks_have_no_extra_output(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    plain = torch.compile(lambda x, w: (x @ w).relu() + x.sum(), backend="xla")
    plain(torch.randn(3, 3), torch.randn(3, 3))
    indexed = torch.compile(lambda x, i: (x[i], x.sum()), backend="xla")
    indexed(_x(), _i(1))
    off = torch.compile(lambda x, i: (x[i], x.sum()), backend="xla", options={"checks": False})
    off(_x(), _i(1))
    p_plain, p_indexed, p_off = counter.programs
    assert p_plain._flat_fn.checks == () and _outputs_of(p_plain) == 1
    assert len(p_indexed._flat_fn.checks) == 1 and _outputs_of(p_indexed) == 3  # + the status
    assert p_off._flat_fn.checks == () and _outputs_of(p_off) == 2


def test_checks_off_gives_xla_values_without_raising():
    fn = torch.compile(getitem, backend="xla", options={"checks": False})
    assert fn(_x(), _i(0, 9)).shape == (2, 3)  # XLA clamps or fills: unspecified values


def test_checks_option_is_validated():
    with pytest.raises(ValueError, match="checks must be 'auto', True or False"):
        torch2xla.Options.parse(None, {"checks": "yes"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("checks", ["auto", True])
def test_gpu_checks_by_option(checks):
    x, i = torch.randn(4, 3, device="cuda"), torch.tensor([0, 9], device="cuda")
    fn = torch.compile(getitem, backend="xla", options={"checks": checks})
    if checks is True:  # a device->host read per call
        with pytest.raises(IndexError, match="index 9 is out of bounds"):
            fn(x, i)
    else:  # "auto": off on GPUs (no read, no sync)
        assert fn(x, i).shape == (2, 3)
    # eager's CUDA kernels do not raise for an integer division by zero: nor do we
    a, b = torch.tensor([4, 5], device="cuda"), torch.tensor([0, 2], device="cuda")
    fdiv = torch.compile(floor_div, backend="xla", options={"checks": checks})
    assert fdiv(a, b).shape == (2,)


# -- side effects of a call that raises (issue 22) --------------------------------------------
# Eager has applied every in-place change before the failing op when it raises, and none after.
# A compiled call is run again in eager PyTorch from the same inputs to reproduce them.
def _raises_like_eager(fn, make_args, error_type, line):
    """Calls ``fn`` compiled and eager on fresh copies of ``make_args()``; both raise
    ``error_type``; returns (compiled args after, eager args after)."""
    a_xla, a_eager = make_args(), make_args()
    with pytest.raises(error_type) as eager:
        fn(*a_eager)
    with pytest.raises(error_type) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*a_xla)
    assert isinstance(info.value, torch2xla.OpError)
    assert info.value.replayed and type(info.value.__cause__) is type(eager.value)
    _assert_names_op_and_line(info.value, line)
    return a_xla, a_eager


def mutate_then_index(x, counter, i):
    x.add_(1)
    counter += 1
    y = x[i]
    x.mul_(10)  # after the failing op: not applied
    return y


def mask_assign_then_divide(t, mask, v, a, b):
    t[mask] = v
    q = a // b
    t.zero_()
    return q


def test_mutations_before_a_failed_index_are_applied_as_in_eager():
    def make():
        return torch.zeros(3), torch.tensor(0), _i(0, 3)

    a_xla, a_eager = _raises_like_eager(mutate_then_index, make, IndexError, "y = x[i]")
    assert_same(a_xla, a_eager)
    assert a_xla[0].tolist() == [1.0, 1.0, 1.0] and a_xla[1].item() == 1


def test_mask_assignment_before_a_division_by_zero_is_applied_as_in_eager():
    def make():
        t = torch.zeros(2, 3)
        mask = torch.tensor([[True, False, True], [False, True, False]])
        return t, mask, torch.tensor([10.0, 20.0, 30.0]), _A, _B

    a_xla, a_eager = _raises_like_eager(mask_assign_then_divide, make, RuntimeError, "q = a // b")
    assert_same(a_xla, a_eager)
    assert a_xla[0].tolist() == [[10.0, 0.0, 20.0], [0.0, 30.0, 0.0]]


def mutate_then_matmul(x, a, b):
    x.add_(1)
    return a @ b


def test_mutations_before_a_dtype_error_are_applied_as_in_eager():
    def make():
        return torch.zeros(2), torch.randn(2, 2, dtype=_D), torch.randn(2, 2)

    a_xla, a_eager = _raises_like_eager(mutate_then_matmul, make, RuntimeError, "return a @ b")
    assert a_xla[0].tolist() == a_eager[0].tolist() == [1.0, 1.0]


class Counted(nn.Module):
    """A model whose forward updates buffers (batch norm statistics, a step counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.norm = nn.BatchNorm1d(4)
        self.register_buffer("steps", torch.tensor(0))

    def forward(self, tokens, target):
        self.steps += 1
        h = self.norm(self.embed(tokens).mean(1))
        return F.cross_entropy(h, target)


@pytest.mark.parametrize("grad", [True, False], ids=["training", "no_grad"])
def test_buffer_updates_before_a_failed_target_are_applied_as_in_eager(grad):
    torch.manual_seed(0)
    model, ref = Counted(), Counted()
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="xla")
    tokens, good, bad = torch.randint(0, 10, (4, 3)), _i(0, 1, 2, 3), _i(0, 1, 9, 3)
    with torch.set_grad_enabled(grad):
        assert_same(compiled(tokens, good), ref(tokens, good))
        with pytest.raises(IndexError, match="Target 9 is out of bounds"):
            ref(tokens, bad)
        with pytest.raises(IndexError, match="Target 9 is out of bounds") as info:
            compiled(tokens, bad)
    assert "F.cross_entropy(h, target)" in str(info.value)
    assert_same(dict(model.named_buffers()), dict(ref.named_buffers()))
    assert model.steps.item() == 2
    with torch.set_grad_enabled(grad):  # and the program is kept
        assert_same(compiled(tokens, good), ref(tokens, good))
    assert_same(dict(model.named_buffers()), dict(ref.named_buffers()))


def dropout_then_index(x, acc, i):
    acc.add_(F.dropout(x, 0.5))
    return acc[i]


def test_a_failed_call_leaves_the_random_generator_as_eager_does():
    def run(fn):
        torch.manual_seed(1)
        x, acc = torch.ones(8), torch.zeros(8)
        with pytest.raises(IndexError):
            fn(x, acc, _i(9))
        return acc, torch.rand(4)  # the generator's next numbers

    compiled = torch.compile(dropout_then_index, backend="xla")
    assert_same(run(compiled), run(dropout_then_index))
    assert_same(run(compiled), run(dropout_then_index))  # a call of the cached program too


class _CountingGenerator:
    """``torch.default_generator``, counting the reads of its state."""

    def __init__(self, generator: torch.Generator) -> None:
        self.generator, self.reads = generator, 0

    def get_state(self) -> torch.Tensor:
        self.reads += 1
        return self.generator.get_state()

    def __getattr__(self, name: str):
        return getattr(self.generator, name)


def test_the_generator_state_is_read_only_for_calls_that_can_raise_after_drawing(monkeypatch):
    # The state is for the replay of a call that raises after drawing random numbers: a graph
    # whose program has no runtime checks cannot, and its calls do not copy the state.
    def dropout_only(x, acc):
        acc.add_(F.dropout(x, 0.5))
        return acc * 2

    x, acc = torch.ones(8), torch.zeros(8)
    unchecked = torch.compile(dropout_only, backend="xla")
    checked = torch.compile(dropout_then_index, backend="xla")
    unchecked(x, acc), checked(x, acc, _i(1))  # (built: the first call takes the state)
    counting = _CountingGenerator(torch.default_generator)
    monkeypatch.setattr(torch, "default_generator", counting)
    for _ in range(3):
        unchecked(x, acc)
    assert counting.reads == 0
    for _ in range(3):
        checked(x, acc, _i(1))
    assert counting.reads == 3


def mutate_then_index_other(x, w, i):
    x.add_(1)
    y = w[i]
    x.mul_(3)
    return y + x.sum()


def test_mutations_before_a_failed_index_in_a_padded_program():
    # x's size is padded to a bucket: the replay runs on the real inputs
    compiled = torch.compile(mutate_then_index_other, backend="xla")
    for n in (3, 5):
        x, x_eager, w = torch.zeros(n), torch.zeros(n), torch.ones(4)
        torch._dynamo.mark_dynamic(x, 0)
        assert_same(compiled(x, w, _i(1)), mutate_then_index_other(x_eager, w, _i(1)))
        with pytest.raises(IndexError):
            mutate_then_index_other(x_eager, w, _i(7))
        with pytest.raises(IndexError):
            compiled(x, w, _i(7))
        assert_same(x, x_eager)
    (graph,) = torch2xla.cache_info(compiled).graphs
    assert graph.bucketed == ("x dim 0",), graph


# -- dtype errors, the class: ops whose eager kernels reject operands of different dtypes -------
# Each case raises in eager. Where Dynamo's fake tensors raise it (their meta kernels check),
# the graph breaks there and eager raises its own error from the user's line; the
# rest reach the ATen graph (some decomposed: linalg_cross, nll_loss, binary_cross_entropy),
# where we raise eager's message naming the op and the user's line.
r = torch.randn


def _f64(*shape):
    return torch.randn(*shape, dtype=_D)


def _probs(*shape, dtype=torch.float32):
    return torch.rand(*shape, dtype=dtype)


# (name, function, arguments, the user's line as it appears in the message)
DTYPE_CLASS_OURS = [
    ("linalg_cross", lambda a, b: torch.linalg.cross(a, b), (r(2, 3), _f64(2, 3)), "linalg.cross"),
    ("cross", lambda a, b: torch.cross(a, b, dim=1), (_f64(2, 3), r(2, 3)), "torch.cross(a, b"),
    (
        "nll_loss_weight",
        lambda x, t, w: F.nll_loss(x, t, weight=w),
        (r(4, 3), _i(0, 1, 2, 0), _probs(3, dtype=_D)),
        "F.nll_loss(x, t, weight=w)",
    ),
    (
        "nll_loss2d_weight",
        lambda x, t, w: F.nll_loss(x, t, weight=w),
        (_f64(2, 3, 2, 2), torch.zeros(2, 2, 2, dtype=torch.long), _probs(3)),
        "F.nll_loss(x, t, weight=w)",
    ),
    (
        "cross_entropy_weight",
        lambda x, t, w: F.cross_entropy(x, t, weight=w),
        (r(4, 3), _i(0, 1, 2, 0), _probs(3, dtype=_D)),
        "F.cross_entropy(x, t, weight=w)",
    ),
    (
        "binary_cross_entropy_target",
        lambda x, t: F.binary_cross_entropy(x, t),
        (_probs(4), _probs(4, dtype=_D)),
        "F.binary_cross_entropy(x, t)",
    ),
    (
        "embedding_bag_per_sample_weights",
        lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        (r(4, 3), _i(0, 1, 2), _i(0, 1), _f64(3)),
        "F.embedding_bag(i, w, o",
    ),
    ("mm", lambda a, b: torch.mm(a, b), (r(2, 3), _f64(3, 2)), "torch.mm(a, b)"),
    ("addmm_self", lambda s, a, b: torch.addmm(s, a, b), (_f64(2, 2), r(2, 3), r(3, 2)), "addmm"),
    (
        "addbmm_self",
        lambda s, a, b: torch.addbmm(s, a, b),
        (r(2, 2), r(2, 2, 3), _f64(2, 3, 2)),
        "torch.addbmm(s, a, b)",
    ),
    (
        "addbmm_batches",
        lambda s, a, b: torch.addbmm(s, a, b),
        (r(2, 2), _f64(2, 2, 3), r(2, 3, 2)),
        "torch.addbmm(s, a, b)",
    ),
    ("linear_weight", lambda x, w: F.linear(x, w), (r(2, 3), _f64(4, 3)), "F.linear(x, w)"),
    (
        "layer_norm_bias",
        lambda x, w, b: F.layer_norm(x, (3,), w, b),
        (r(2, 3), r(3), _f64(3)),
        "F.layer_norm(x, (3,), w, b)",
    ),
    (
        "layer_norm_weight_only_bias",
        lambda x, b: F.layer_norm(x, (3,), None, b),
        (r(2, 3), _f64(3)),
        "F.layer_norm(x, (3,), None, b)",
    ),
    (
        "group_norm_weight",
        lambda x, w: F.group_norm(x, 1, w),
        (r(2, 3, 4), _f64(3)),
        "F.group_norm(x, 1, w)",
    ),
    (
        "batch_norm_stats",
        lambda x, m, v: F.batch_norm(x, m, v),
        (r(2, 3), torch.zeros(3, dtype=_D), torch.ones(3, dtype=_D)),
        "F.batch_norm(x, m, v)",
    ),
    (
        "index_add_source",
        lambda x, i, s: x.index_add(0, i, s),
        (r(3, 2), _i(0), _f64(1, 2)),
        "x.index_add(0, i, s)",
    ),
    (
        "index_copy_source",
        lambda x, i, s: x.index_copy(0, i, s),
        (r(3, 2), _i(0), _f64(1, 2)),
        "x.index_copy(0, i, s)",
    ),
    (
        "index_put_values",
        lambda x, i, v: x.index_put((i,), v, accumulate=True),
        (r(3, 2), _i(0), _f64(2)),
        "x.index_put((i,), v",
    ),
    ("put_source", lambda x, i, s: x.put(i, s), (r(3), _i(0), _f64(1)), "x.put(i, s)"),
    ("cdist", lambda a, b: torch.cdist(a, b), (r(2, 3), _f64(2, 3)), "torch.cdist(a, b)"),
    ("heaviside", lambda a, b: torch.heaviside(a, b), (r(3), _f64(3)), "torch.heaviside(a, b)"),
    ("complex", lambda a, b: torch.complex(a, b), (r(3), _f64(3)), "torch.complex(a, b)"),
    (
        "grid_sample",
        lambda x, g: F.grid_sample(x, g, align_corners=False),
        (r(1, 1, 3, 3), _f64(1, 2, 2, 2)),
        "F.grid_sample(x, g",
    ),
    (
        "index_select_float_index",
        lambda x, i: x.index_select(0, i),
        (r(3), torch.tensor([0.0])),
        "x.index_select(0, i)",
    ),
    (
        "index_add_short_index",
        lambda x, i, s: x.index_add(0, i, s),
        (r(3), torch.tensor([0], dtype=torch.int16), r(1)),
        "x.index_add(0, i, s)",
    ),
    (
        "index_copy_int_index",
        lambda x, i, s: x.index_copy(0, i, s),
        (r(3), torch.tensor([0], dtype=torch.int32), r(1)),
        "x.index_copy(0, i, s)",
    ),
    (
        "index_fill_int_index",
        lambda x, i: x.index_fill(0, i, 1.0),
        (r(3), torch.tensor([0], dtype=torch.int32)),
        "x.index_fill(0, i, 1.0)",
    ),
    (
        "index_put_float_index",
        lambda x, i: x.index_put((i,), torch.tensor(1.0)),
        (r(3), torch.tensor([0.0])),
        "x.index_put((i,), torch.tensor(1.0))",
    ),
]

DTYPE_CLASS_DYNAMO = [
    ("dot", lambda a, b: torch.dot(a, b), (r(3), _f64(3))),
    ("vdot", lambda a, b: torch.vdot(a, b), (r(3), _f64(3))),
    ("inner", lambda a, b: torch.inner(a, b), (r(2, 3), _f64(2, 3))),
    ("bmm", lambda a, b: torch.bmm(a, b), (r(2, 2, 3), _f64(2, 3, 2))),
    ("baddbmm", lambda s, a, b: torch.baddbmm(s, a, b), (_f64(2, 2, 2), r(2, 2, 3), r(2, 3, 2))),
    ("addmv", lambda s, a, b: torch.addmv(s, a, b), (_f64(2), r(2, 3), r(3))),
    ("addmv_vec", lambda s, a, b: torch.addmv(s, a, b), (r(2), r(2, 3), _f64(3))),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), (r(2, 3), _f64(3, 2))),
    ("conv2d_bias", lambda x, w, b: F.conv2d(x, w, b), (r(1, 2, 4, 4), r(3, 2, 2, 2), _f64(3))),
    ("prelu", lambda x, w: F.prelu(x, w), (r(2, 3), _f64(3))),
    ("scatter_src", lambda x, i, s: x.scatter(0, i, s), (r(3, 2), _i(0, 1).view(1, 2), _f64(1, 2))),
    ("masked_scatter", lambda x, m, s: x.masked_scatter(m, s), (r(3), _i(1, 0, 1).bool(), _f64(3))),
    ("lerp_end", lambda a, b: torch.lerp(a, b, 0.5), (r(3), _f64(3))),
    ("lerp_weight", lambda a, b, w: torch.lerp(a, b, w), (r(3), r(3), _f64(3))),
    ("linalg_solve", lambda a, b: torch.linalg.solve(a, b), (r(3, 3) + 3 * torch.eye(3), _f64(3))),
    (
        "sdpa",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        (r(1, 2, 3, 4), _f64(1, 2, 3, 4), r(1, 2, 3, 4)),
    ),
    ("take_float_index", lambda x, i: x.take(i), (r(3), torch.tensor([0.0]))),
    ("gather_float_index", lambda x, i: x.gather(0, i), (r(3), torch.tensor([0.0]))),
]


@pytest.mark.parametrize(
    "name, fn, args, line", DTYPE_CLASS_OURS, ids=[c[0] for c in DTYPE_CLASS_OURS]
)
def test_dtype_class_raises_what_eager_raises(name, fn, args, line):
    eager = _eager_error(fn, args)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert isinstance(info.value, torch2xla.OpError), info.value
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    _assert_names_op_and_line(info.value, line)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    "name, fn, args", DTYPE_CLASS_DYNAMO, ids=[c[0] for c in DTYPE_CLASS_DYNAMO]
)
def test_dtype_class_dynamo_raises_naming_the_users_line(name, fn, args):
    """Where torch's meta kernel checks the dtypes (2.13), Dynamo's fake run refuses the call
    and breaks the graph there (``capture/_fake_errors.py``): eager raises its own error from
    the user's line; where it does not (2.11's bmm), our check raises eager's error (OpError)
    naming the op and the user's line; where eager accepts them (2.11's addmv of a float64
    ``self``), the call returns eager's results."""
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    try:
        fn(*args)
    except Exception as e:
        eager = e
    else:
        assert_same(compiled(*args), fn(*args))
        return
    with pytest.raises(type(eager)) as info:
        compiled(*args)
    message = str(info.value)
    if isinstance(info.value, torch2xla.OpError):
        assert message.startswith(str(eager)), (message, str(eager))
        assert "op: aten." in message, message
        assert f"user code: {THIS}:{fn.__code__.co_firstlineno}:" in message, message
    else:
        assert type(info.value) is type(eager) and message == str(eager), (info.value, eager)
        frames = traceback.extract_tb(info.value.__traceback__)
        assert any(f.filename.endswith(THIS) for f in frames), frames


VALID_DTYPE_CLASS = [
    (
        "solve_triangular_mixed",
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
        (r(3, 3).triu() + 3 * torch.eye(3), _f64(3, 2)),
    ),
    (
        "solve_triangular_mixed_float64_matrix",
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
        (_f64(3, 3).triu() + 3 * torch.eye(3), r(3, 2)),
    ),
    ("cross_same", lambda a, b: torch.linalg.cross(a, b), (_f64(2, 3), _f64(2, 3))),
    (
        "bf16_layer_norm_float_params",
        lambda x, w, b: F.layer_norm(x, (3,), w, b),
        (r(2, 3).bfloat16(), r(3), r(3)),
    ),
    ("copysign_promotes", lambda a, b: torch.copysign(a, b), (r(3), _f64(3))),
    ("cat_promotes", lambda a, b: torch.cat([a, b]), (r(2), _f64(2))),
    (
        "index_put_int32_index",
        lambda x, i: x.index_put((i,), torch.tensor(1.0)),
        (r(3), _i(1).int()),
    ),
    ("index_add_int32_index", lambda x, i, s: x.index_add(0, i, s), (r(3), _i(1).int(), r(1))),
]


@pytest.mark.parametrize("name, fn, args", VALID_DTYPE_CLASS, ids=[c[0] for c in VALID_DTYPE_CLASS])
def test_valid_dtype_class_matches_eager(name, fn, args):
    out = torch.compile(fn, backend="xla", options={"strict": True})(*args)
    ref = fn(*args)
    if ref.dtype == torch.bfloat16:
        assert_same(out, ref, rtol=1.6e-2, atol=1e-2)  # bfloat16 results: one ulp
    elif name.startswith("solve_triangular") and ref.dtype == torch.float32:
        assert_same(out, ref, rtol=1e-5, atol=1e-5)  # a float32 solve
    else:
        assert_same(out, ref)


def test_norm_dtype_rule_matches_eager_on_every_mix():
    # eager's CPU "mixed dtype" rule, over every dtype of input, weight and bias (no compile:
    # the checker is called as a decomposition calls it)
    from torch2xla.ops._arg_checks import CHECKS

    aten = torch.ops.aten
    dtypes = [None, torch.float32, torch.float64, torch.bfloat16]
    for x_dtype in (torch.float32, torch.float64, torch.bfloat16):
        for w_dtype, b_dtype in itertools.product(dtypes, dtypes):
            x = torch.randn(2, 3, dtype=x_dtype)
            w = None if w_dtype is None else torch.randn(3, dtype=w_dtype)
            b = None if b_dtype is None else torch.randn(3, dtype=b_dtype)
            for op, call, shaped in (
                (aten.native_layer_norm.default, F.layer_norm, (x, (3,), w, b)),
                (aten.native_group_norm.default, F.group_norm, (x.view(2, 3, 1), 1, w, b)),
            ):
                try:
                    call(*shaped)
                    eager = None
                except RuntimeError as e:
                    eager = str(e)
                ours = CHECKS[op]({"input": x, "weight": w, "bias": b}, None)
                assert ours == eager, (op, x_dtype, w_dtype, b_dtype)


# -- matrices eager's linear algebra rejects (torch.linalg.LinAlgError) ------------------------
_NOT_PD = torch.tensor([[4.0, 2.0, 1.0], [2.0, 1.0, 3.0], [1.0, 3.0, 5.0]])  # minor 2 is not
_SINGULAR = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
_FACTOR = torch.tensor([[1.0, 0.0], [2.0, 0.0]])  # a Cholesky factor with a zero pivot

# (name, function, argument, the user's line as it appears in the message)
LINALG_CASES = [
    ("cholesky", lambda a: torch.cholesky(a), _NOT_PD, "torch.cholesky(a)"),
    ("cholesky_upper", lambda a: torch.cholesky(a, upper=True), _NOT_PD, "upper=True"),
    (
        "cholesky_batched",
        lambda a: torch.cholesky(a),
        torch.stack([torch.eye(3), _NOT_PD]),
        "torch.cholesky(a)",
    ),
    ("linalg_cholesky", lambda a: torch.linalg.cholesky(a), _NOT_PD, "linalg.cholesky(a)"),
    ("cholesky_inverse", lambda a: torch.cholesky_inverse(a), _FACTOR, "cholesky_inverse(a)"),
    ("inv", lambda a: torch.linalg.inv(a), _SINGULAR, "torch.linalg.inv(a)"),
    ("inverse", lambda a: torch.inverse(a) + 1, _SINGULAR, "torch.inverse(a)"),
    (
        "inv_batched",
        lambda a: torch.linalg.inv(a),
        torch.stack([torch.eye(2), _SINGULAR]),
        "torch.linalg.inv(a)",
    ),
    ("solve", lambda a: torch.linalg.solve(a, torch.ones(2)), _SINGULAR, "linalg.solve(a"),
    ("matrix_power", lambda a: torch.linalg.matrix_power(a, -1), _SINGULAR, "matrix_power"),
    ("lu_factor", lambda a: torch.linalg.lu_factor(a), torch.zeros(2, 2), "lu_factor(a)"),
]


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("name, fn, a, line", LINALG_CASES, ids=[c[0] for c in LINALG_CASES])
def test_linalg_errors_raise_what_eager_raises(name, fn, a, line):
    eager = _eager_error(fn, (a,))
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(a)
    if "is now removed" in str(eager):  # torch.cholesky on torch >= 2.14: the same error
        assert str(info.value) == str(eager)
        return
    assert isinstance(info.value, torch2xla.OpError), info.value
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    _assert_names_op_and_line(info.value, line)
    if isinstance(eager, torch.linalg.LinAlgError):
        assert isinstance(info.value, torch2xla.OpLinAlgError)


@pytest.mark.parametrize(
    "a",
    [_NOT_PD, torch.stack([torch.eye(3), -torch.eye(3), _NOT_PD]), torch.eye(3), _NOT_PD[:0, :0]],
    ids=["not_pd", "batched", "pd", "empty"],
)
def test_cholesky_ex_reports_eagers_info_without_raising(a):
    def f(a):
        return torch.linalg.cholesky_ex(a).info

    assert_same(torch.compile(f, backend="xla")(a), f(a))


def _one_hot(t):
    return F.one_hot(t, 3)


@pytest.mark.parametrize("classes", [[3], [-1], [0, 2]], ids=["too-large", "negative", "valid"])
def test_asserts_of_decompositions_raise_what_eager_raises(classes):
    """F.one_hot's decomposition asserts its classes are in range (aten._assert_async): in
    strict mode it compiled not at all, without checks it gave a row of zeros."""
    t = torch.tensor(classes)
    compiled = torch.compile(_one_hot, backend="xla", options={"strict": True})
    if min(classes) >= 0 and max(classes) < 3:
        assert torch.equal(compiled(t), _one_hot(t))
        return
    eager = _eager_error(_one_hot, (t,))
    with pytest.raises(type(eager), match=str(eager)) as info:
        compiled(t)
    _assert_names_op_and_line(info.value, "return F.one_hot(t, 3)")


def _bce(p, t):
    return F.binary_cross_entropy(p, t)


@pytest.mark.parametrize("p", [1.5, -0.1, float("nan")])
def test_binary_cross_entropy_of_a_non_probability_raises_as_eager(p):
    args = (torch.tensor([0.5, p]), torch.tensor([1.0, 0.0]))
    eager = _eager_error(_bce, args)
    with pytest.raises(type(eager), match=str(eager)) as info:
        torch.compile(_bce, backend="xla", options={"strict": True})(*args)
    _assert_names_op_and_line(info.value, "return F.binary_cross_entropy(p, t)")


def _not_pd(n, bad, dtype=torch.float64, seed=0):
    a = torch.randn(n, n, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    a = a @ a.mH / n + torch.eye(n, dtype=dtype)
    a[bad, bad] = -5
    return a


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize(
    "a",
    [
        _not_pd(5, 3),
        _not_pd(40, 0, torch.float32),
        _not_pd(100, 70),
        torch.stack(
            [_not_pd(6, 2), _not_pd(6, 5, seed=1).mT @ _not_pd(6, 5, seed=1), -_not_pd(6, 4)]
        ),
        _not_pd(4, 2, torch.complex128),
    ],
    ids=["5x5", "first_pivot_f32", "100x100", "batched", "complex"],
)
def test_cholesky_ex_factor_of_a_matrix_not_positive_definite_is_eagers(a, upper):
    """What LAPACK's potrf leaves: the factor's columns before the failed pivot, that pivot's
    Schur complement, the rest of the input's triangle (as eager's MKL leaves it up to 128)."""

    def f(a):
        return torch.linalg.cholesky_ex(a, upper=upper)

    got, expected = torch.compile(f, backend="xla")(a), f(a)
    assert_same(got.info, expected.info)
    torch.testing.assert_close(got.L, expected.L)


def multi_margin_weight(x, y, w):
    return F.multi_margin_loss(x, y, weight=w)


def multi_margin_int_target(x, y, w):
    return nn.MultiMarginLoss()(x, y.int())


def multilabel_margin_int_target(x, y, w):
    return F.multilabel_margin_loss(x, y.int())


# torch decomposes these two at the Autograd key, before any table of ours sees the ATen op
MARGIN_DTYPE_CASES = [
    ("multi_margin_weight", multi_margin_weight, "F.multi_margin_loss(x, y, weight=w)", _D),
    ("multi_margin_int_target", multi_margin_int_target, "nn.MultiMarginLoss()(x, y.int())", None),
    (
        "multilabel_margin_int_target",
        multilabel_margin_int_target,
        "F.multilabel_margin_loss(x, y.int())",
        None,
    ),
]


@pytest.mark.parametrize(
    "name, fn, line, wdtype", MARGIN_DTYPE_CASES, ids=[c[0] for c in MARGIN_DTYPE_CASES]
)
def test_margin_loss_dtypes_raise_what_eager_raises(name, fn, line, wdtype):
    y = torch.tensor([1, 0, 3]) if "multilabel" not in name else torch.tensor([[1, -1, 0, 0]] * 3)
    args = (torch.randn(3, 4), y, torch.ones(4, dtype=wdtype or torch.float32))
    eager = _eager_error(fn, args)
    with pytest.raises(RuntimeError) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    err = info.value
    assert isinstance(err, torch2xla.OpError), err
    assert str(err).startswith(str(eager)), (err, eager)
    assert "op: F.multi" in str(err) and f"user code: {THIS}:" in str(err) and line in str(err)


def bucketize_2d(x, b):
    return torch.bucketize(x, b, right=True)


@pytest.mark.parametrize("boundaries", [torch.rand(3, 4), torch.tensor(0.5)], ids=["2d", "0d"])
def test_bucketize_boundaries_of_another_rank_raise_what_eager_raises(boundaries):
    args = (torch.rand(3, 4), boundaries)
    eager = _eager_error(bucketize_2d, args)
    with pytest.raises(RuntimeError) as info:
        torch.compile(bucketize_2d, backend="xla", options={"strict": True})(*args)
    assert isinstance(info.value, torch2xla.OpError), info.value
    assert str(info.value).startswith(str(eager))
    _assert_names_op_and_line(info.value, "torch.bucketize(x, b, right=True)")


def index_add_rows(y, idx, src):
    y = y.clone()
    y.index_add_(1, idx, src)
    return y


def index_reduce_rows(y, idx, src):
    return y.index_reduce(0, idx, src, "amax")


def masked_scatter_byte_mask(x, mask, src):
    return x.masked_scatter(mask.to(torch.uint8), src)


def uniform_reversed(x, mask, src):
    return x.clone().uniform_(3.5, -1.25) + src.sum()


_INDEX_ROWS = (torch.ones(5, 5), torch.tensor([0, 1, 1, 1, 2]))
_MASK_ARGS = (
    torch.zeros(2, 3),
    torch.tensor([[True, False, True], [False, True, True]]),
    torch.ones(6),
)
_INDEX_REDUCE_BETA = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")
_UINT8_MASK = pytest.mark.filterwarnings(
    "ignore:masked_scatter_ received a mask with dtype torch.uint8"
)
# Arguments eager's kernels reject and the trace does not: (function, arguments, the user's line)
KERNEL_REJECTS = [
    pytest.param(
        index_add_rows,
        (*_INDEX_ROWS, torch.randn(1, 5)),
        "y.index_add_(1, idx, src)",
        id="index_add_broadcast",
        marks=_INDEX_REDUCE_BETA,
    ),
    pytest.param(
        index_reduce_rows,
        (*_INDEX_ROWS, torch.randn(5, 4)),
        'y.index_reduce(0, idx, src, "amax")',
        id="index_reduce",
        marks=_INDEX_REDUCE_BETA,
    ),
    pytest.param(
        masked_scatter_byte_mask,
        _MASK_ARGS,
        "x.masked_scatter(mask.to(torch.uint8), src)",
        id="masked_scatter_uint8_mask",
        marks=_UINT8_MASK,
    ),
    pytest.param(
        uniform_reversed,
        _MASK_ARGS,
        "x.clone().uniform_(3.5, -1.25)",
        id="uniform_from_above_to",
        marks=_UINT8_MASK,
    ),
]


@pytest.mark.parametrize("fn, args, line", KERNEL_REJECTS)
def test_arguments_eagers_kernel_rejects_raise_what_eager_raises(fn, args, line):
    eager = _eager_error(fn, args)
    with pytest.raises(RuntimeError) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(*args)
    assert isinstance(info.value, torch2xla.OpError), info.value
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    assert f"user code: {THIS}:" in str(info.value) and line in str(info.value)


# -- probabilities eager's multinomial rejects, softmax of integers -------------------------------
def multinomial(p, n, replacement):
    return torch.multinomial(p, n, replacement) + 0


_INF, _NAN = float("inf"), float("nan")
# (probability rows, whether eager rejects them)
MULTINOMIAL_ROWS = {
    "negative": ([[0.5, -0.1, 0.6], [1.0, 1.0, 1.0]], True),
    "inf": ([[0.5, _INF, 0.6], [1.0, 1.0, 1.0]], True),
    "nan": ([[1.0, 1.0, 1.0], [_NAN, 0.2, 0.3]], True),
    "zero_row": ([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], True),
    # (the scan meets the zero row first)
    "inf_after_zero_row": ([[0.0, 0.0, 0.0], [1.0, _INF, 1.0]], True),
    "nan_1d": ([_NAN, 1.0, 1.0], True),
    # rows eager accepts: one category left, a subnormal weight (XLA's CPU flushes it), -0.0
    "one_nonzero": ([[0.0, 0.0, 1.0]], False),
    "subnormal": ([[1e-45, 0.0, 0.0]], False),
    "negative_zero": ([[-0.0, 2.0, 0.0]], False),
}


def _multinomial_rows(rejected: bool) -> list[str]:
    return [name for name, (_, bad) in MULTINOMIAL_ROWS.items() if bad is rejected]


@pytest.mark.parametrize(("n", "replacement"), [(1, False), (2, False), (1, True), (2, True)])
def test_multinomial_bad_probabilities(n, replacement):
    # every rejected case through one compiled function: the rows of one shape share its
    # program (each still raises eager's error, from the program's check, not its compile)
    compiled = torch.compile(multinomial, backend="xla")
    for case in _multinomial_rows(rejected=True):
        p = torch.tensor(MULTINOMIAL_ROWS[case][0])
        eager = _eager_error(multinomial, (p, n, replacement))
        with pytest.raises(type(eager)) as info:
            compiled(p, n, replacement)
        assert str(info.value).startswith(str(eager)), (case, str(info.value), str(eager))
        _assert_names_op_and_line(info.value, "torch.multinomial(p, n, replacement)")


@pytest.mark.filterwarnings("error:torch2xla")  # (not a replay of eager's results)
def test_multinomial_valid_edge_probabilities():
    # (every accepted row through one compiled function: one shape, one program)
    compiled = torch.compile(multinomial, backend="xla")
    for case in _multinomial_rows(rejected=False):
        p = torch.tensor(MULTINOMIAL_ROWS[case][0])
        assert compiled(p, 1, False).tolist() == multinomial(p, 1, False).tolist(), case


def log_softmax_last(x):
    return F.log_softmax(x, -1)


def softmax_first(x):
    return torch.softmax(x, 0)


def softmin_last(x):
    return F.softmin(x, -1)


# (bool is left out: Dynamo's fake run of log_softmax subtracts two bool tensors and raises its
# own error before any backend sees the graph)
@pytest.mark.parametrize("fn", [log_softmax_last, softmax_first, softmin_last])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_softmax_of_integers_raises_what_eager_raises(fn, dtype):
    x = torch.arange(6).reshape(2, 3).to(dtype)
    eager = _eager_error(fn, (x,))
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla")(x)
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))


def test_softmax_of_integers_with_a_float_dtype_runs():
    def fn(x):
        return F.softmax(x, -1, dtype=torch.float32), F.log_softmax(x[:0], -1)

    x = torch.arange(6).reshape(2, 3)
    assert_same(torch.compile(fn, backend="xla")(x), fn(x))


# -- writes into a tensor whose elements share memory --------------------------------------------
def _into_expanded_copy(write):
    """``y = x.clone()``, ``write(y.expand(4, 3))``, ``y``."""

    def fn(x):
        y = x.clone()
        write(y.expand(4, 3))
        return y

    return fn


def _iadd(view):
    view += 1


def _setitem_column(view):
    view[:, 0] = 5.0


def _setitem_row(view):
    view[1] = 7.0  # one row: no element of the view shares memory


def changed_then_expand_mul_(x):
    x.add_(1)  # applied by eager before the failing write: replayed
    x.expand(2, 3).mul_(2)
    return x


def expanded_read(x):
    return x.expand(4, 3) * 2 + x.expand(4, 3).sum(0)


# (function, what eager does: "raises", "writes" (the write is one eager accepts) or "no
# overlap" (no element is written twice))
OVERLAPPING_WRITES = {
    "expand_add_": (_into_expanded_copy(lambda view: view.add_(1)), "raises"),
    "expand_iadd": (_into_expanded_copy(_iadd), "raises"),
    "expand_setitem_column": (_into_expanded_copy(_setitem_column), "raises"),
    "expand_relu_inplace": (_into_expanded_copy(lambda view: F.relu(view, inplace=True)), "raises"),
    "changed_then_expand_mul_": (changed_then_expand_mul_, "raises"),
    "expand_fill_": (_into_expanded_copy(lambda view: view.fill_(2.0)), "writes"),
    "expand_masked_fill_": (
        _into_expanded_copy(
            lambda view: view.masked_fill_(torch.ones(4, 3, dtype=torch.bool), 3.0)
        ),
        "writes",
    ),
    "expand_setitem_row": (_into_expanded_copy(_setitem_row), "no overlap"),
    "expanded_read": (expanded_read, "no overlap"),
}


def _overlapping_writes(eager: str) -> list:
    return [pytest.param(fn, id=name) for name, (fn, e) in OVERLAPPING_WRITES.items() if e == eager]


@pytest.mark.parametrize("fn", _overlapping_writes("raises"))
def test_write_into_overlapping_memory_raises_what_eager_raises(fn):
    x, x_eager = torch.randn(1, 3), torch.randn(1, 3)
    x_eager.copy_(x)
    eager = _eager_error(fn, (x_eager,))
    assert "more than one element of the written-to tensor" in str(eager)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla")(x)
    # (not here: copy_, out= and uniform_, whose fake kernels check: Dynamo raises)
    assert str(info.value).startswith(str(eager))
    assert f"user code: {THIS}:" in str(info.value)
    assert torch.equal(x, x_eager)  # (eager's side effects before the failing write)


@pytest.mark.filterwarnings("ignore:Use of masked_fill_ on expanded tensors is deprecated")
@pytest.mark.parametrize("fn", _overlapping_writes("writes"))
def test_writes_eager_accepts_into_overlapping_memory_run_in_eager(fn):
    # Functionalization would add the expanded copies up on the way back to the base: the
    # graph runs in eager PyTorch, with a warning (strict mode raises).
    x = torch.randn(1, 3)
    with pytest.warns(torch2xla.FallbackWarning, match="share memory"):
        out = torch.compile(fn, backend="xla")(x.clone())
    assert_same(out, fn(x.clone()))
    torch._dynamo.reset()
    with pytest.raises(torch2xla.UnsupportedOpsError, match="share memory"):
        torch.compile(fn, backend="xla", options={"strict": True})(x.clone())


@pytest.mark.parametrize("fn", _overlapping_writes("no overlap"))
def test_writes_into_expanded_tensors_without_overlap_compile(monkeypatch, fn):
    counter = ProgramCounter(monkeypatch)
    x = torch.randn(1, 3)
    out = torch.compile(fn, backend="xla", options={"strict": True})(x.clone())
    assert_same(out, fn(x.clone()))
    assert counter.count == 1


def test_write_into_an_expanded_input_raises_what_eager_raises():
    def f(x):
        x.mul_(2)
        return x

    x = torch.randn(1, 3).expand(4, 3)
    eager = _eager_error(f, (x,))
    with pytest.raises(type(eager)) as info:
        torch.compile(f, backend="xla")(x)
    assert str(info.value).startswith(str(eager))


@pytest.mark.filterwarnings("ignore:Use of index_put_ on expanded tensors is deprecated")
def test_masked_write_into_an_expanded_tensor_runs_in_eager():
    def f(x, v):
        y = x.clone()
        y.expand(4, 3)[y.expand(4, 3) > 0] = v
        return y

    x, v = torch.randn(1, 3), torch.tensor(9.0)
    with pytest.warns(torch2xla.FallbackWarning, match="share memory"):
        out = torch.compile(f, backend="xla")(x, v)
    assert_same(out, f(x, v))


# -- out= tensors and arguments eager's kernels reject -------------------------------------------
def multinomial_into_float(p):
    return torch.multinomial(p, 2, out=torch.empty(2))


def multinomial_of_integers(p):
    return torch.multinomial(p.long(), 2)


def multinomial_no_samples(p):
    return torch.multinomial(p, 0)


def aminmax_into_mixed(x):
    return torch.aminmax(x, dim=0, out=(torch.empty(()), torch.empty((), dtype=torch.float64)))


def complex_into_complex64(x):
    return torch.complex(x.double(), x.double(), out=torch.empty(3, dtype=torch.complex64))


@pytest.mark.parametrize(
    "fn",
    [
        multinomial_into_float,
        multinomial_of_integers,
        multinomial_no_samples,
        aminmax_into_mixed,
        complex_into_complex64,
    ],
)
def test_out_tensors_and_arguments_eager_rejects(fn):
    x = torch.ones(3)
    eager = _eager_error(fn, (x,))
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla")(x)
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    assert f"user code: {THIS}:" in str(info.value)


def out_tensors_eager_accepts(x):
    a = torch.multinomial(x, 2, out=torch.empty(2, dtype=torch.long))
    b = torch.exp(x, out=torch.empty(3, dtype=torch.float64))  # (float32 into float64: allowed)
    lo, hi = torch.aminmax(x, dim=0, out=(torch.empty(()), torch.empty(())))
    return a * 0, b * 2, lo + hi  # (a: random draws; its dtype and shape)


def test_out_tensors_eager_accepts_compile():
    x = torch.ones(3)
    assert_same(
        torch.compile(out_tensors_eager_accepts, backend="xla")(x), out_tensors_eager_accepts(x)
    )


# -- bool, integer and complex tensors eager's kernels do not implement ---------------------------
# The meta kernels behind tracing rarely check these dtypes, so the calls traced and XLA computed
# them (``x.argmax(1)`` of a bool tensor gave zeros). Each is checked on the Dynamo graph, where
# the call is the user's: the error must be eager's, naming the user's call and line.
def _bools(*shape):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(0)) > 0.5


def _longs(*shape, dtype=torch.int64):
    return torch.randint(-3, 4, shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def _complex(*shape):
    return torch.randn(*shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))


# (name, function, argument, the user's line as it appears in the message)
UNIMPLEMENTED_DTYPES = [
    ("argmax_bool", lambda x: x.argmax(1) + 1, _bools(3, 4), "x.argmax(1)"),
    ("argmax_all_bool", lambda x: torch.argmax(x) + 1, _bools(3, 4), "torch.argmax(x)"),
    ("argmin_bool", lambda x: x.argmin(dim=0) * 2, _bools(3, 4), "x.argmin(dim=0)"),
    ("topk_bool", lambda x: x.topk(2).indices + 1, _bools(3, 4), "x.topk(2)"),
    ("kthvalue_bool", lambda x: x.kthvalue(2, 1).values, _bools(3, 4), "x.kthvalue(2, 1)"),
    ("median_bool", lambda x: x.median(), _bools(3, 4), "x.median()"),
    ("sort_complex", lambda x: torch.sort(x)[0] + 1, _complex(5), "torch.sort(x)"),
    ("argsort_complex", lambda x: x.argsort() + 1, _complex(5), "x.argsort()"),
    ("mode_complex", lambda x: x.mode().values, _complex(5), "x.mode()"),
    ("cummax_complex", lambda x: x.cummax(0).values, _complex(5), "x.cummax(0)"),
    ("amax_complex", lambda x: x.amax(0) + 1, _complex(2, 3), "x.amax(0)"),
    ("max_complex", lambda x: x.max() + 1, _complex(5), "x.max()"),
    ("clamp_complex", lambda x: x.clamp(0, 1), _complex(5), "x.clamp(0, 1)"),
    ("nansum_complex", lambda x: x.nansum() * 2, _complex(5), "x.nansum()"),
    ("relu_bool", lambda x: torch.relu(x).long(), _bools(5), "torch.relu(x)"),
    ("abs_bool", lambda x: x.abs().long(), _bools(5), "x.abs()"),
    ("floor_bool", lambda x: x.floor().long(), _bools(5), "x.floor()"),
    ("frac_int", lambda x: x.frac() + 1, _longs(5), "x.frac()"),
    ("gelu_int", lambda x: F.gelu(x) + 1, _longs(5), "F.gelu(x)"),
    ("silu_int", lambda x: F.silu(x) + 1, _longs(5, dtype=torch.int32), "F.silu(x)"),
    ("softplus_int", lambda x: F.softplus(x) + 1, _longs(5), "F.softplus(x)"),
    ("hardswish_int", lambda x: F.hardswish(x) + 1, _longs(5), "F.hardswish(x)"),
    ("mish_int", lambda x: F.mish(x) + 1, _longs(5), "F.mish(x)"),
    ("logsigmoid_int", lambda x: F.logsigmoid(x) + 1, _longs(5), "F.logsigmoid(x)"),
    ("lerp_int", lambda x: torch.lerp(x, x, 0.5) + 1, _longs(5), "torch.lerp(x, x, 0.5)"),
    ("hypot_int", lambda x: torch.hypot(x, x) + 1, _longs(5), "torch.hypot(x, x)"),
    ("logaddexp_int", lambda x: torch.logaddexp(x, x), _longs(5), "torch.logaddexp(x, x)"),
    ("mm_bool", lambda x: torch.mm(x, x.T).long(), _bools(3, 3), "torch.mm(x, x.T)"),
    ("matmul_bool", lambda x: (x @ x).long(), _bools(3, 3), "(x @ x)"),
    ("dot_bool", lambda x: torch.dot(x, x).long(), _bools(3), "torch.dot(x, x)"),
    ("addcmul_bool", lambda x: torch.addcmul(x, x, x).long(), _bools(3), "torch.addcmul(x, x, x)"),
    ("lshift_bool", lambda x: torch.bitwise_left_shift(x, x).long(), _bools(3), "left_shift(x"),
    ("max_pool1d_int", lambda x: F.max_pool1d(x, 2) + 1, _longs(1, 2, 6), "F.max_pool1d(x, 2)"),
    ("avg_pool1d_int", lambda x: F.avg_pool1d(x, 2), _longs(1, 2, 6, dtype=torch.int32), "avg_"),
    ("adaptive_avg_pool_int", lambda x: F.adaptive_avg_pool1d(x, 2), _longs(1, 2, 6), "adaptive"),
    (
        "interpolate_int",
        lambda x: F.interpolate(x, scale_factor=2) + 1,
        _longs(1, 2, 3),
        "F.interpolate(x, scale_factor=2)",
    ),
    (
        "interpolate_linear_complex",
        lambda x: F.interpolate(x, scale_factor=2, mode="linear") + 1,
        _complex(1, 2, 3),
        'F.interpolate(x, scale_factor=2, mode="linear")',
    ),
    ("reflect_pad_bool", lambda x: F.pad(x, (1, 1), mode="reflect").long(), _bools(1, 4), "F.pad"),
    (
        "scatter_reduce_mean_bool",
        lambda x: x.scatter_reduce(0, torch.tensor([0, 0]), x, "mean").long(),
        _bools(2),
        "x.scatter_reduce(0",
    ),
    (
        "searchsorted_bool",
        lambda x: torch.searchsorted(x, x) + 1,
        torch.tensor([False, True]),
        "torch.searchsorted(x, x)",
    ),
]


@pytest.mark.parametrize(
    "name, fn, x, line", UNIMPLEMENTED_DTYPES, ids=[c[0] for c in UNIMPLEMENTED_DTYPES]
)
def test_dtypes_eagers_kernels_do_not_implement_raise_what_eager_raises(name, fn, x, line):
    eager = _eager_error(fn, (x,))
    assert isinstance(eager, RuntimeError), eager  # (NotImplementedError is one)
    with pytest.raises(type(eager)) as info:
        torch.compile(fn, backend="xla", options={"strict": True})(x)
    assert isinstance(info.value, torch2xla.OpError), info.value
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    assert "op: " in str(info.value), info.value
    assert f"user code: {THIS}:" in str(info.value) and line in str(info.value), info.value


# (name, function, argument): the same ops in the dtypes eager implements, the calls whose
# errors a stand-in dtype would not tell from a dtype's (a mask of ones too long for the values,
# an integer division by a literal zero: values, checked at run time)
IMPLEMENTED_DTYPES = [
    ("argmax_int", lambda x: x.argmax(1), _longs(3, 4)),
    ("argmin_uint8", lambda x: x.argmin(), _longs(3, 4).abs().to(torch.uint8)),
    ("max_bool", lambda x: (x.max(), x.amax(0), x.max(1).values), _bools(3, 4)),
    ("sort_bool", lambda x: torch.sort(x.long() * 2 + torch.arange(4)).values, _bools(3, 4)),
    ("topk_int_values", lambda x: x.topk(2).values, _longs(3, 4)),
    ("cumsum_bool", lambda x: (x.cumsum(0), x.sum(1)), _bools(3, 4)),
    ("abs_clamp_relu_int", lambda x: (x.abs(), x.clamp(-1, 1), torch.relu(x)), _longs(5)),
    ("mm_int", lambda x: torch.mm(x, x.T), _longs(3, 3)),
    ("lshift_int", lambda x: torch.bitwise_left_shift(x.abs(), 1), _longs(3)),
    ("bitwise_bool", lambda x: (x & ~x, x | x, x ^ x), _bools(3)),
    ("max_pool1d_float", lambda x: F.max_pool1d(x.float(), 2), _longs(1, 2, 6)),
    (
        "interpolate_uint8",
        lambda x: F.interpolate(x.abs().to(torch.uint8), scale_factor=2),
        _longs(1, 2, 3),
    ),
    ("constant_pad_bool", lambda x: F.pad(x, (1, 1)), _bools(1, 4)),
    (
        "index_select_int32",
        lambda x: x.index_select(0, torch.tensor([1, 0], dtype=torch.int32)),
        _longs(3),
    ),
    ("masked_fill_complex", lambda x: x.masked_fill(x.real > 0, 0), _complex(5)),
    ("where_bool", lambda x: torch.where(x, x, ~x), _bools(5)),
    ("sort_complex_real", lambda x: torch.sort(x.real).values, _complex(5)),
]


def _mask_too_long(t):
    t = t.clone()
    t[t > 0] = torch.tensor([1.0, 2.0])
    return t


@pytest.mark.parametrize("name, fn, x", IMPLEMENTED_DTYPES, ids=[c[0] for c in IMPLEMENTED_DTYPES])
def test_dtypes_eagers_kernels_implement_match_eager(name, fn, x):
    out = torch.compile(fn, backend="xla", options={"strict": True})(x)
    assert_same(out, fn(x))


def test_a_mask_eager_refuses_by_its_values_raises_eagers_error():
    # (a bool mask of ones selects 3 places for 2 values: an error of the values, not the
    # dtype, though an int64 stand-in index would run)
    t = torch.tensor([1.0, -1.0, 2.0, 3.0])
    eager = _eager_error(_mask_too_long, (t,))
    with pytest.raises(type(eager)) as info:
        torch.compile(_mask_too_long, backend="xla")(t)
    assert str(info.value).startswith(str(eager)), (str(info.value), str(eager))
    good = torch.tensor([1.0, -1.0, 2.0, -3.0])
    assert_same(torch.compile(_mask_too_long, backend="xla")(good), _mask_too_long(good))
