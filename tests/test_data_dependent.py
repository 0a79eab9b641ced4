"""Issue 22 item 10: ops whose output shape (or Python value) depends on tensor values, traced
into the graph by Dynamo's capture_dynamic_output_shape_ops / capture_scalar_outputs (with
fullgraph=True or not): eager PyTorch runs them inside the graph, XLA the rest, with eager's
results; strict mode names each of them and its line instead."""

import copy
import re
import warnings

import pytest
import torch

import torch2xla
from tests._training import assert_grads
from tests._util import ProgramCounter, assert_same


@pytest.fixture(autouse=True)
def _capture():
    with torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        yield


def nonzero(x):
    idx = torch.nonzero(x > 0)
    return idx * 2, x.exp()


def where_one_arg(x):
    (rows,) = torch.where(x > 0.5)
    return x[rows] + rows


def unique(x):
    values, counts = torch.unique(x.round(), return_counts=True)
    return values * counts, (x * 3).sum()


def masked_select(x):
    return torch.masked_select(x, x < 0).sin().sum() + x.mean()


def item(x):
    scale = x.abs().max().item()
    return x / scale, scale + 1  # a Python float, as eager returns it


def bool_index(x):
    y = x.clone()
    y[y > 0] = 0.0
    return y[x < 0.3] * 2, y


def narrow_tensor_start(x, start):
    return torch.narrow(x, 0, start, 3) * 2


def tensor_split_tensor_indices(x, idx):
    a, b, c = torch.tensor_split(x, idx)
    return a.sum() - b.sum() + c.exp().sum()


def take_tensor(x):
    return torch.take(x, torch.nonzero(x.flatten() > 0).squeeze(-1)) + x.sum()


def narrow_tensor_length(x, length):
    return torch.narrow(x, 0, 1, length).exp()


def repeat_interleave(x):
    return torch.repeat_interleave(x, (x > 0).long() + 1) * 2


def size_from_item(x):
    n = (x > 0).sum().item()
    return torch.ones(n) * x.sum(), x[:n] + 1


CASES = {
    "nonzero": (nonzero, lambda: (torch.randn(6, 3),)),
    "where": (where_one_arg, lambda: (torch.rand(10),)),
    "unique": (unique, lambda: (torch.randn(12) * 2,)),
    "masked_select": (masked_select, lambda: (torch.randn(4, 5),)),
    "item": (item, lambda: (torch.randn(7),)),
    "bool_index": (bool_index, lambda: (torch.randn(9),)),
    "narrow": (narrow_tensor_start, lambda: (torch.randn(8), torch.tensor(2))),
    "tensor_split": (tensor_split_tensor_indices, lambda: (torch.randn(9), torch.tensor([2, 5]))),
    "take": (take_tensor, lambda: (torch.randn(3, 4),)),
    "narrow_length": (narrow_tensor_length, lambda: (torch.randn(8), torch.randint(1, 6, ()))),
    "repeat_interleave": (repeat_interleave, lambda: (torch.randn(6),)),
    "size_from_item": (size_from_item, lambda: (torch.randn(8),)),
}


@pytest.mark.parametrize("fullgraph", [True, False], ids=["fullgraph", "graph-breaks-allowed"])
@pytest.mark.parametrize("case", list(CASES))
def test_data_dependent_ops_match_eager(case, fullgraph):
    fn, make = CASES[case]
    compiled = torch.compile(fn, backend="xla", fullgraph=fullgraph)
    for seed in range(2):  # new values, new data-dependent sizes
        torch.manual_seed(seed)
        args = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.FallbackWarning)
            out = compiled(*args)
        assert_same(out, fn(*args))


def test_warns_once_naming_each_op_and_line(monkeypatch):
    counter = ProgramCounter(monkeypatch)
    compiled = torch.compile(nonzero, backend="xla", fullgraph=True)
    x = torch.randn(6, 3)
    with pytest.warns(torch2xla.FallbackWarning) as record:
        assert_same(compiled(x), nonzero(x))
    assert len(record) == 1
    message = str(record[0].message)
    assert "torch.nonzero: data-dependent output shape" in message
    assert re.search(r"test_data_dependent\.py:\d+: idx = torch\.nonzero\(x > 0\)", message)
    assert counter.count >= 1  # the rest ran in XLA
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(compiled(x), nonzero(x))


@pytest.mark.parametrize("case", ["nonzero", "item", "bool_index", "narrow"])
def test_strict_mode_names_each_op_and_line(case):
    fn, make = CASES[case]
    compiled = torch.compile(fn, backend="xla", fullgraph=True, options={"strict": True})
    with pytest.raises(torch2xla.UnsupportedOpsError) as info:
        compiled(*make())
    message = str(info.value)
    assert "AOTAutograd" not in message and "Traceback" not in message
    assert "test_data_dependent.py" in message and "strict" in message
    assert info.value.unsupported


def test_strict_mode_message_for_item():
    compiled = torch.compile(item, backend="xla", fullgraph=True, options={"strict": True})
    with pytest.raises(torch2xla.UnsupportedOpsError, match=r"Tensor\.item: reads a tensor value"):
        compiled(torch.randn(5))


class _Router(torch.nn.Module):
    """Token routing as mixture-of-experts code writes it: indices from a mask, gather,
    transform, scatter back."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(4, 1)
        self.expert = torch.nn.Linear(4, 4)

    def forward(self, x):
        chosen = torch.nonzero(self.gate(x).squeeze(-1) > 0).squeeze(-1)
        out = torch.zeros_like(x)
        out[chosen] = self.expert(x[chosen])
        return out + x


def test_training_through_data_dependent_ops_matches_eager():
    torch.manual_seed(0)
    model = _Router()
    ref = copy.deepcopy(model)
    x = torch.randn(10, 4)
    compiled = torch.compile(model, backend="xla", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = compiled(x)
    expected = ref(x)
    assert_same(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    assert_grads(model, ref, rtol=1.3e-6, atol=1e-5)


def test_mutations_around_data_dependent_ops():
    def f(x, counts):
        pos = x[x > 0]
        counts.add_(pos.numel())  # an input mutated with a data-dependent value
        x.mul_(2)
        return pos.sum()

    x, counts = torch.randn(8), torch.zeros((), dtype=torch.int64)
    ex, ecounts = x.clone(), counts.clone()
    compiled = torch.compile(f, backend="xla", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = compiled(x, counts)
    assert_same(out, f(ex, ecounts))
    assert_same((x, counts), (ex, ecounts))


def test_no_grad_region_stays_untracked():
    w = torch.randn(6, requires_grad=True)

    def f(x):
        with torch.no_grad():
            kept = (x * w)[x > 0]  # eager does not track this
        return kept.sum() + (x * w).sum()

    x = torch.randn(6)
    compiled = torch.compile(f, backend="xla", fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        out = compiled(x)
    ref = f(x)
    assert_same(out, ref)
    assert out.requires_grad == ref.requires_grad
    (g,) = torch.autograd.grad(out, w)
    (g_ref,) = torch.autograd.grad(ref, w)
    assert_same(g, g_ref)


# -- x.data = y of a graph input: the storage swap runs in eager inside the graph ----------------
def _scale_data(x):
    x.data = x.data * 3
    return x + 1


def _new_shape_data(x):
    x.data = torch.ones(5)
    return x * 2


def _grad_then_data(w, x):
    before = (w * x).sum()  # differentiated before the swap
    w.data = w.data.clamp(-0.5, 0.5)  # weight clipping (WGAN)
    return before + (w * x).sum()


@pytest.mark.parametrize("fn", [_scale_data, _new_shape_data])
def test_set_data_of_an_input_matches_eager(fn):
    x = torch.randn(3)
    x_eager = x.clone()
    with pytest.warns(torch2xla.FallbackWarning, match=r"x\.data = y"):
        out = torch.compile(fn, backend="xla")(x)
    assert_same(out, fn(x_eager))
    assert_same(x, x_eager)


def test_set_data_of_a_parameter_trains_as_eager():
    w, x = torch.randn(3, requires_grad=True), torch.randn(3)
    w_eager = w.detach().clone().requires_grad_()
    with pytest.warns(torch2xla.FallbackWarning, match=r"x\.data = y"):
        out = torch.compile(_grad_then_data, backend="xla")(w, x)
    ref = _grad_then_data(w_eager, x)
    out.backward()
    ref.backward()
    assert_same(out, ref)
    assert_same(w, w_eager)
    assert_same(w.grad, w_eager.grad)


def test_set_data_of_an_input_in_strict_mode_names_the_line():
    with pytest.raises(torch2xla.UnsupportedOpsError, match=r"x\.data = x\.data \* 3"):
        torch.compile(_scale_data, backend="xla", options={"strict": True})(torch.randn(3))


class _CastsItself(torch.nn.Module):
    """SwitchTransformers' and NLLB-MoE's routers: ``self.classifier.to(self.dtype)`` in the
    forward sets each parameter's ``.data`` to itself."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        self.lin = self.lin.to(torch.float32)
        return self.lin(x)


def test_set_data_to_itself_stays_in_xla():
    torch.manual_seed(0)
    model, x = _CastsItself(), torch.randn(2, 4)
    ref = copy.deepcopy(model)
    versions = [p._version for p in model.parameters()]  # (a deep copy's start at 0)
    out = torch.compile(model, backend="xla", options={"strict": True})(x)  # (no eager set_)
    expected = ref(x)
    out.sum().backward()
    expected.sum().backward()
    assert_same(out, expected)
    for p, q, v in zip(model.parameters(), ref.parameters(), versions):
        assert_same(p.grad, q.grad)
        assert p._version - v == q._version  # (``.data =`` bumps no version)


# -- sizes Dynamo asserts at run time (``_assert_scalar`` of an unbacked size) -------------------
def last_selected_row(x):
    y = x[x.sum(-1) > 0]
    return y[-1]


def last_row_of_a_computed_selection(x):
    y = x[x.sum(-1) > 0]
    return (y * 2)[-1], y.shape[0] * 2


def fourth_selected_row(x):
    y = x[x.sum(-1) > 0]
    return y[3]


def max_of_selected_rows(x):
    y = x[x.sum(-1) > 0]
    return y.max(0).values


def softmax_of_a_prefix(x):
    k = int((x > 0).sum())
    return x.reshape(-1)[:k].softmax(0)


def element_before_a_count(x):
    k = int((x > 0).sum())
    return x.reshape(-1)[k - 1] * 2


def prefix_and_columns(x):
    k = (x > 0).sum().item()
    return x.reshape(-1)[:k].softmax(0), x[:, : k // 3 + 1].sum()


def users_check(x):
    k = int((x > 0).sum())
    torch._check(k > 2)
    return x.reshape(-1)[:k].softmax(0)


SIZE_ASSERT_CASES = [
    last_selected_row,
    last_row_of_a_computed_selection,
    fourth_selected_row,
    max_of_selected_rows,
    softmax_of_a_prefix,
    element_before_a_count,
    prefix_and_columns,
    users_check,
]
# inputs of other shapes (a recompile: dynamic sizes of the inputs beside the unbacked ones)
# and values that select every row, none, or a few
_SIZE_ASSERT_INPUTS = [
    lambda: torch.randn(5, 3, generator=torch.Generator().manual_seed(0)),
    lambda: torch.randn(4, 4, generator=torch.Generator().manual_seed(1)),
    lambda: -torch.ones(4, 3),
    lambda: torch.ones(2, 3),
    lambda: torch.randn(6, 3, generator=torch.Generator().manual_seed(2)),
]


@pytest.mark.parametrize("fn", SIZE_ASSERT_CASES, ids=[f.__name__ for f in SIZE_ASSERT_CASES])
def test_runtime_size_asserts_give_eagers_values_and_errors(fn):
    """Where Dynamo assumed a size (``u0 >= 1`` for ``y[-1]``) and a call breaks it, eager's
    own error is raised (an IndexError), not the assert's; where it holds, eager's values
    (the asserts' sizes once came back from a compiled piece as tensors, and crashed)."""
    compiled = torch.compile(fn, backend="xla")
    for make in _SIZE_ASSERT_INPUTS:
        x = make()
        try:
            ref = fn(x)
        except Exception as e:
            with pytest.raises(type(e)) as info, warnings.catch_warnings():
                warnings.simplefilter("ignore", torch2xla.FallbackWarning)
                compiled(x)
            # (eager's message, then the op and the user's line where the check is ours)
            assert str(info.value).split("\n")[0] == str(e), (str(info.value), str(e))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.FallbackWarning)
            assert_same(compiled(x), ref)
