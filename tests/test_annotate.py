"""The analyses that annotate an ATen graph's nodes for their lowerings (``capture/_annotate.py``).

Each pass is run on a small exported ATen graph and its ``node.meta`` answer checked; then the
lowerings are shown to read that answer (a graph translated with and without it gives other
programs) and to work without it, with eager's values.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.split_module import split_module

from torch2xla._errors import LoweringError
from torch2xla.capture._annotate import annotate
from torch2xla.capture._lower import lower
from torch2xla.ops._interpret import to_jax_function
from torch2xla.ops._registry import (
    AFTER_CONVOLUTION,
    CONVOLUTION_PATH,
    KEPT_BY_USERS,
    ON_CUDA,
    STORAGE_ORDER,
    UNEXPANDED,
)
from torch2xla.runtime._jax_scope import x64

aten = torch.ops.aten


class _Fn(nn.Module):
    """``fn`` as a module with parameters ``params`` and a tuple output (as export wants)."""

    def __init__(self, fn, **params: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        for name, module in params.items():
            setattr(self, name, module)

    def forward(self, x):
        return (self.fn(self, x),)


class _Fn2(_Fn):
    def forward(self, x, y):
        return (self.fn(self, x, y),)


def _lowered(fn, *args, **params):
    module = (_Fn if len(args) == 1 else _Fn2)(fn, **params)
    return lower(torch.fx.symbolic_trace(module), list(args))


def _nodes(gm: torch.fx.GraphModule, target) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is target]


def _run(lowered, args, annotated: bool):
    """The lowered graph's outputs (NumPy) and its jaxpr's text, annotated or not."""
    gm = annotate(lowered.gm) if annotated else lowered.gm
    fn = to_jax_function(gm)
    inputs = [jnp.asarray(t.detach().numpy()) for t in lowered.inputs(args)]
    with x64():
        outs = fn(None, *inputs)
        text = str(jax.make_jaxpr(lambda *a: fn(None, *a))(*inputs))
    return [jax.device_get(o) for o in outs], text


def _batch_dims(jaxpr: str) -> list[str]:
    """The lhs batch dims of each product in ``jaxpr``."""
    return re.findall(r"dimension_numbers=\(\(\[[\d, ]*\], \[[\d, ]*\]\), \((\[[\d, ]*\])", jaxpr)


def _conv_relu(m, x):
    return F.relu(m.conv(x))


CONV = {"conv": nn.Conv2d(3, 4, 3)}


# -- AFTER_CONVOLUTION ---------------------------------------------------------------------------
def test_relu_after_a_convolution_is_annotated():
    gm = annotate(_lowered(_conv_relu, torch.randn(2, 3, 6, 6), **CONV).gm)
    (relu,) = _nodes(gm, aten.relu.default)
    assert relu.meta[AFTER_CONVOLUTION] is True


def test_relu_of_an_input_is_not():
    gm = annotate(_lowered(lambda m, x: F.relu(x), torch.randn(2, 3, 6, 6)).gm)
    (relu,) = _nodes(gm, aten.relu.default)
    assert relu.meta[AFTER_CONVOLUTION] is False


@pytest.mark.parametrize("steps", [CONVOLUTION_PATH, CONVOLUTION_PATH + 1])
def test_convolution_found_through_at_most_the_path_length_of_elementwise_ops(steps):
    def fn(m, x):
        y = m.conv(x)
        for _ in range(steps):
            y = y * 1.5
        return F.relu(y)

    gm = annotate(_lowered(fn, torch.randn(2, 3, 6, 6), **CONV).gm)
    assert len(_nodes(gm, aten.mul.Tensor)) == steps
    (relu,) = _nodes(gm, aten.relu.default)
    assert relu.meta[AFTER_CONVOLUTION] is (steps <= CONVOLUTION_PATH)


def test_residual_add_and_batch_norm_pass_a_convolution_on():
    """conv -> batch norm -> (+ input) -> relu6: the batch norm and hardtanh (relu6) both read
    a convolution's output; a reduction does not pass it on."""

    def fn(m, x):
        y = F.relu6(m.bn(m.conv(x)) + x[:, :4, :4, :4])
        return F.relu(y.sum(dim=1, keepdim=True))

    gm = annotate(
        _lowered(fn, torch.randn(2, 4, 6, 6), conv=nn.Conv2d(4, 4, 3), bn=nn.BatchNorm2d(4)).gm
    )
    (bn,) = _nodes(gm, aten._native_batch_norm_legit_functional.default)
    (hardtanh,) = _nodes(gm, aten.hardtanh.default)
    (relu,) = _nodes(gm, aten.relu.default)
    assert bn.meta[AFTER_CONVOLUTION] is True
    assert hardtanh.meta[AFTER_CONVOLUTION] is True
    assert relu.meta[AFTER_CONVOLUTION] is False


def test_batch_norm_of_an_input_is_not():
    gm = annotate(_lowered(lambda m, x: m.bn(x), torch.randn(2, 4, 5, 5), bn=nn.BatchNorm2d(4)).gm)
    (bn,) = _nodes(gm, aten._native_batch_norm_legit_functional.default)
    assert bn.meta[AFTER_CONVOLUTION] is False


# -- KEPT_BY_USERS -------------------------------------------------------------------------------
def _shortcut(m, y):
    return m.conv2(y) + y[:, :, 1:-1, 1:-1]


@pytest.mark.parametrize(
    "users,fn",
    [
        ("every", lambda m, x: m.conv2(F.relu(m.conv(x)))),
        ("some", lambda m, x: _shortcut(m, F.relu(m.conv(x)))),
        ("none", lambda m, x: F.relu(m.conv(x)).sum()),
    ],
)
def test_relu_output_kept_by_users(users, fn):
    """A convolution keeps its input for its backward: the relu feeding it may recompute its
    mask from that output (every user keeps it; some do, beside a shortcut add; none)."""
    gm = annotate(
        _lowered(fn, torch.randn(2, 3, 8, 8), conv=nn.Conv2d(3, 4, 3), conv2=nn.Conv2d(4, 4, 3)).gm
    )
    (relu,) = _nodes(gm, aten.relu.default)
    assert relu.meta[KEPT_BY_USERS] == users


def test_relu_feeding_a_matrix_product_is_kept():
    gm = annotate(
        _lowered(lambda m, x: m.lin(F.relu(x)), torch.randn(5, 4), lin=nn.Linear(4, 3)).gm
    )
    (relu,) = _nodes(gm, aten.relu.default)
    assert relu.meta[KEPT_BY_USERS] == "every"


# -- UNEXPANDED ----------------------------------------------------------------------------------
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("batch_of_one", [False, True], ids=["matrix", "batch_of_one"])
def test_bmm_operand_expanded_from_one_matrix(side, batch_of_one):
    w = torch.randn(1, 4, 4) if batch_of_one else torch.randn(4, 4)
    x = torch.randn(3, 4, 4)

    def fn(m, x, w):
        big = w.expand(3, 4, 4)
        return torch.bmm(x, big) if side == "right" else torch.bmm(big, x)

    lowered = _lowered(fn, x, w)
    # Without the annotation the lowering multiplies a batch (the product has batch dims);
    # with it, the matrix itself; eager's values either way.
    want = fn(None, x, w)
    for annotated in (False, True):
        (got,), jaxpr = _run(lowered, (x, w), annotated)
        assert _batch_dims(jaxpr) == (["[]"] if annotated else ["[0]"]), jaxpr
        torch.testing.assert_close(torch.tensor(got), want)
    (bmm,) = _nodes(lowered.gm, aten.bmm.default)
    operand, source, first = bmm.meta[UNEXPANDED]
    assert operand == (1 if side == "right" else 0)
    assert source.op == "placeholder" and source.graph is lowered.gm.graph
    assert first is batch_of_one


def test_bmm_of_two_batches_is_not_annotated():
    gm = annotate(
        _lowered(lambda m, a, b: torch.bmm(a, b), torch.randn(3, 2, 4), torch.randn(3, 4, 5)).gm
    )
    (bmm,) = _nodes(gm, aten.bmm.default)
    assert bmm.meta[UNEXPANDED] is None


def test_bmm_against_a_batch_of_one_broadcast_to_a_batch_of_one_is_not():
    """A (1, m, n) source expanded to a batch of 1 is no smaller than the operand."""
    gm = annotate(
        _lowered(
            lambda m, a, b: torch.bmm(a, b.expand(1, 4, 5)),
            torch.randn(1, 2, 4),
            torch.randn(1, 4, 5),
        ).gm
    )
    (bmm,) = _nodes(gm, aten.bmm.default)
    assert bmm.meta[UNEXPANDED] is None


# -- STORAGE_ORDER -------------------------------------------------------------------------------
def _transposed_as_strided(m, x):
    return x.t().as_strided((2, 3), (1, 2)) * 2


def _transposed_as_strided_scatter(m, x):
    return x.t().as_strided_scatter(torch.ones(2, 3), (2, 3), (1, 2)) * 2


@pytest.mark.parametrize(
    "fn,target",
    [
        (_transposed_as_strided, aten.as_strided.default),
        (_transposed_as_strided_scatter, aten.as_strided_scatter.default),
    ],
    ids=["as_strided", "as_strided_scatter"],
)
def test_as_strided_reads_its_inputs_storage_order_from_its_own_node(fn, target):
    """as_strided indexes its input's storage: the pass records the input's dims in storage
    order (a transposed input: (1, 0)); the lowering reads that, not the input node's fake
    value (removed here after annotating), and gives eager's values."""
    x = torch.randn(3, 4)
    lowered = _lowered(fn, x)
    annotate(lowered.gm)
    (node,) = _nodes(lowered.gm, target)
    assert node.meta[STORAGE_ORDER] == (1, 0)
    del node.args[0].meta["val"]
    (got,), _ = _run(lowered, (x,), annotated=False)
    torch.testing.assert_close(torch.tensor(got), fn(None, x))


def test_as_strided_of_an_input_not_dense_in_memory_is_recorded_as_such():
    """A strided (every other column) input: no storage order (None); its lowering refuses."""
    x = torch.randn(3, 4)
    lowered = _lowered(lambda m, x: x[:, ::2].as_strided((2, 2), (1, 2)), x)
    (node,) = _nodes(annotate(lowered.gm), aten.as_strided.default)
    assert node.meta[STORAGE_ORDER] is None
    with pytest.raises(LoweringError, match="not dense in memory"):
        _run(lowered, (x,), annotated=False)


# -- ON_CUDA -------------------------------------------------------------------------------------
def test_assert_async_reads_its_arguments_device_from_its_own_node():
    """F.one_hot asserts its classes are in range (aten._assert_async, which has no output to
    take a device from): the pass records its argument's device; the lowering checks on CPU
    only (on CUDA eager's assert is device-side), reading the record, not the argument's
    fake value (on CPU here, while the record is set by hand)."""
    t = torch.tensor([0, 2])
    lowered = _lowered(lambda m, t: F.one_hot(t, 3), t)
    gm = annotate(lowered.gm)
    asserts = _nodes(gm, aten._assert_async.msg) + _nodes(gm, aten._assert_async.default)
    assert asserts and all(n.meta[ON_CUDA] is False for n in asserts)
    inputs = [jnp.asarray(a.numpy()) for a in lowered.inputs((t,))]
    for on_cuda in (False, True):
        for node in asserts:
            node.meta[ON_CUDA] = on_cuda
        fn = to_jax_function(gm, checks=True)
        with x64():
            fn(None, *inputs)
        assert len(fn.checks) == (0 if on_cuda else len(asserts))


# -- the lowerings read the annotation, and work without it --------------------------------------
def test_relu_and_batch_norm_lowerings_read_the_annotation_and_work_without_it():
    """conv -> batch norm -> relu on CPU: channels-last (transposed) where annotated, NCHW
    where not (the form right for any graph); eager's values both ways."""

    def fn(m, x):
        return F.relu(m.bn(m.conv(x)))

    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 6)
    module = _Fn(fn, conv=nn.Conv2d(3, 4, 3), bn=nn.BatchNorm2d(4))
    lowered = lower(torch.fx.symbolic_trace(module), [x])
    (want,) = module(x)
    outs, plain = _run(lowered, (x,), annotated=False)
    for node in lowered.gm.graph.nodes:
        assert AFTER_CONVOLUTION not in node.meta and KEPT_BY_USERS not in node.meta
    outs_annotated, annotated = _run(lowered, (x,), annotated=True)
    assert plain.count("transpose") < annotated.count("transpose"), (plain, annotated)
    for got in (outs[-1], outs_annotated[-1]):
        torch.testing.assert_close(torch.tensor(got), want.detach())


def test_annotation_is_of_the_graph_as_translated():
    """Meta copied from another graph (``split_module`` copies it) is overwritten: a relu
    that starts a partition reads a placeholder there, not the convolution before it."""
    gm = annotate(_lowered(_conv_relu, torch.randn(2, 3, 6, 6), **CONV).gm)
    (relu,) = _nodes(gm, aten.relu.default)
    assert relu.meta[AFTER_CONVOLUTION] is True
    split = split_module(gm, gm, lambda n: 1 if n is relu else 0, keep_original_order=True)
    (copied,) = _nodes(split.submod_1, aten.relu.default)
    assert copied.meta[AFTER_CONVOLUTION] is True  # (as copied)
    annotate(split.submod_1)
    assert copied.meta[AFTER_CONVOLUTION] is False
