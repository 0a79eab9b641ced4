"""Where eager raises, we raise: indices out of range, integer division by zero, negative integer
powers and operands of different dtypes (issue 22, item 7).

Each case is written as users write it, compiled with ``backend="xla"``, and must raise the
exception type eager raises, with a message that names the op and the user's source line.
Valid neighbours of each case (negative indices in range, ``ignore_index``, empty index tensors,
autocast, type promotion) must still match eager.
"""

from __future__ import annotations

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
