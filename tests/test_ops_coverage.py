"""Every core ATen overload is lowered, decomposed before it reaches the backend, or listed in
``NOT_LOWERED`` with a typed reason; and the reasons given there hold."""

from __future__ import annotations

import dataclasses
import linecache
import pathlib

import pytest
import torch

import torch2xla  # (registers the backend's lowerings)
from torch2xla.capture._lower import decomposition_table
from torch2xla.ops import (
    DATA_DEPENDENT,
    LOWERINGS,
    NOT_LOWERED,
    NotLowered,
    Why,
    register,
    where_is,
)

aten = torch.ops.aten


def core_overloads() -> list[torch._ops.OpOverload]:
    """Every registered ATen overload tagged core (``torch.ops.aten`` creates its packets
    lazily, so they are looked up from the dispatcher's list of op names)."""
    ops = []
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("aten::"):
            continue
        packet_name, _, overload = qualified.removeprefix("aten::").partition(".")
        op = getattr(getattr(aten, packet_name), overload or "default")
        if torch.Tag.core in op.tags:
            ops.append(op)
    return ops


def _decomposes_while_tracing(op: torch._ops.OpOverload) -> bool:
    """CompositeImplicitAutograd ops turn into other ops during tracing, before any backend."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")


def classify(op: torch._ops.OpOverload) -> str:
    listed = {r.op for r in NOT_LOWERED}
    if op in LOWERINGS:
        return "lowered"
    if op in listed:
        return "listed"
    if op in decomposition_table() or _decomposes_while_tracing(op):
        return "decomposed"
    return "missing"


def test_core_set_is_found():
    ops = core_overloads()
    assert len(ops) > 150, "the core tag lookup found too few ops; did torch rename the tag?"
    assert aten.add.Tensor in ops and aten.convolution.default in ops


def test_every_core_op_is_lowered_decomposed_or_listed():
    missing = [str(op) for op in core_overloads() if classify(op) == "missing"]
    assert not missing, (
        f"{len(missing)} core ATen op(s) have no lowering, no decomposition and no NOT_LOWERED "
        f"record: {missing}"
    )


def _is_view(op: torch._ops.OpOverload) -> bool:
    returns = op._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


def view_copy_overloads() -> list[torch._ops.OpOverload]:
    """The copying variant (``X_copy``) of every ATen view op ``X``, as functionalization
    writes views: every overload but the ``out=`` ones."""
    names = {
        q.removeprefix("aten::").partition(".")[0]
        for q in torch._C._dispatch_get_all_op_names()
        if q.startswith("aten::")
    }
    ops = []
    for name in sorted(names):
        view = name.removesuffix("_copy")
        if view == name or view not in names:
            continue
        view_packet = getattr(aten, view)
        if not any(_is_view(getattr(view_packet, o)) for o in view_packet.overloads()):
            continue
        packet = getattr(aten, name)
        ops += [getattr(packet, o) for o in packet.overloads() if "out" not in o]
    return ops


def test_view_copy_set_is_found():
    ops = view_copy_overloads()
    assert aten.select_copy.int in ops and aten.view_as_real_copy.default in ops
    assert aten._to_copy.default not in ops and aten.index_copy.default not in ops


def test_every_view_copy_is_lowered_decomposed_or_listed():
    missing = [str(op) for op in view_copy_overloads() if classify(op) == "missing"]
    assert not missing, (
        f"{len(missing)} copying variant(s) of views have no lowering, no decomposition and "
        f"no NOT_LOWERED record: {missing}"
    )


def test_view_copies_of_lowered_views_are_lowered_or_decomposed():
    # A view the backend lowers has a copying variant it runs too (none falls back).
    for op in view_copy_overloads():
        view = getattr(aten, op.__name__.partition(".")[0].removesuffix("_copy"))
        if any(getattr(view, o) in LOWERINGS for o in view.overloads()):
            assert classify(op) in ("lowered", "decomposed"), op


def test_core_ops_are_nearly_all_lowered_directly():
    ops = core_overloads()
    kinds = [classify(op) for op in ops]
    lowered = kinds.count("lowered")
    listed = [op for op, k in zip(ops, kinds) if k == "listed"]
    # Only ops that cannot reach the backend as such may stay unlowered.
    allowed = (Why.DATA_DEPENDENT, Why.FUNCTIONALIZED, Why.NOT_TRACED)
    assert all(next(r for r in NOT_LOWERED if r.op is op).why in allowed for op in listed)
    assert lowered / len(ops) >= 0.95, f"only {lowered}/{len(ops)} core ops lowered"


def test_not_lowered_records_are_typed_and_consistent():
    seen = set()
    for record in NOT_LOWERED:
        assert isinstance(record, NotLowered)
        assert dataclasses.is_dataclass(record) and type(record).__dataclass_params__.frozen
        assert isinstance(record.op, torch._ops.OpOverload)
        assert isinstance(record.why, Why) and record.detail
        assert record.op not in LOWERINGS, f"{record.op} is both lowered and listed"
        assert record.op not in seen, f"{record.op} listed twice"
        seen.add(record.op)
    assert DATA_DEPENDENT == {r.op: r.detail for r in NOT_LOWERED if r.why is Why.DATA_DEPENDENT}


def test_second_registration_raises():
    with pytest.raises(RuntimeError, match="second lowering"):
        register(aten.add.Tensor)(lambda *a: None)


# -- where each lowering lives ------------------------------------------------------------------
_REPO = pathlib.Path(torch2xla.__file__).parent.parent


def _line(where: str) -> str:
    path, _, line = where.rpartition(":")
    return linecache.getline(str(_REPO / path), int(line))


@pytest.mark.parametrize(
    ("op", "text"),
    [
        # decorator-made: the function's own definition (its @register line)
        (aten.sum.dim_IntList, "@register(aten.sum.dim_IntList"),
        (aten.addmm.default, "aten.addmm.default"),
        # a factory's closure registered by a helper (_unary) or from a table of ops: the row
        (aten.relu.default, "_unary(aten.relu.default"),
        (aten.sin.default, "(aten.sin, _complex_trig.sin)"),
        (aten.eq.Scalar, "(aten.eq.Tensor, aten.eq.Scalar)"),
        (aten.special_i1.default, "(aten.special_i1.default, _i1)"),
        (aten.special_hermite_polynomial_h.x_scalar, "(aten.special_hermite_polynomial_h, "),
    ],
)
def test_where_is_names_the_line_of_the_lowering(op, text):
    """Issue 26: one hop from an op to its lowering, whether a def or a table's row."""
    where = where_is(op)
    assert where.startswith("torch2xla/ops/_") and where.rpartition(":")[2].isdigit(), where
    assert text in _line(where), (where, _line(where))


def test_every_lowering_has_a_place():
    for op in list(LOWERINGS):
        if getattr(LOWERINGS[op], "_torch2xla_user_fn", None) is not None:
            continue  # (a test's own register_lowering)
        assert _line(where_is(op)).strip(), (op, where_is(op))


def test_where_is_refuses_what_it_cannot_place():
    with pytest.raises(TypeError, match="op overload"):
        where_is(aten.add)
    with pytest.raises(KeyError, match="no lowering"):
        where_is(aten.nonzero.default)


def test_factory_made_lowerings_are_named_after_their_op():
    """``_pointwise(jnp.sin)``'s closure reads ``sin`` in reprs and tracebacks, not
    ``_pointwise.<locals>.lowering``; functions of their own keep their names."""
    made = [
        fn
        for fn in LOWERINGS.values()
        if "<locals>" in getattr(fn, "__qualname__", "")
        and getattr(fn, "__module__", "").startswith("torch2xla")  # (not other tests' ones)
    ]
    assert not made, made[:5]
    sin = LOWERINGS[aten.sin.default]
    assert sin.__name__ == sin.__qualname__ == sin.__code__.co_name == "sin"
    assert LOWERINGS[aten.eq.Scalar] is LOWERINGS[aten.eq.Tensor]
    assert LOWERINGS[aten.eq.Scalar].__name__ == "eq"
    assert LOWERINGS[aten.sum.dim_IntList].__name__ == "sum_"


# -- the FUNCTIONALIZED records: those ops never reach the backend -------------------------------
def test_out_variant_is_functionalized_away():
    def fn(a, b, out):
        torch.atan2(a, b, out=out)
        return out * 2

    a, b = torch.randn(4, 3), torch.randn(4, 3)
    out_eager, out_xla = torch.empty(4, 3), torch.empty(4, 3)
    expected = fn(a, b, out_eager)
    got = torch.compile(fn, backend="xla", options={"strict": True})(a, b, out_xla)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(out_xla, out_eager)


def test_resize_is_not_traced():
    def fn(x):
        return x.resize_(6) * 2

    with pytest.raises(torch._dynamo.exc.Unsupported, match="resize_"):
        torch.compile(fn, backend="xla", fullgraph=True)(torch.randn(2, 3))


def test_batch_norm_with_running_stats_is_functionalized_away():
    def fn(x, mean, var, w, b):
        return torch.ops.aten._native_batch_norm_legit.default(x, w, b, mean, var, True, 0.1, 1e-5)

    x = torch.randn(8, 3, 4, 4)
    w, b = torch.randn(3), torch.randn(3)
    stats_eager = [torch.zeros(3), torch.ones(3)]
    stats_xla = [torch.zeros(3), torch.ones(3)]
    expected = fn(x, *stats_eager, w, b)
    got = torch.compile(fn, backend="xla", options={"strict": True})(x, *stats_xla, w, b)
    torch.testing.assert_close(got, expected)
    # The running stats are updated in place, as eager updates them.
    torch.testing.assert_close(stats_xla, stats_eager)
    assert not torch.equal(stats_xla[0], torch.zeros(3))


# -- value checks: the linalg error checks raise torch's own error ---------------------------------
def test_singular_matrix_raises_like_eager():
    fn = torch.linalg.inv
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    a = torch.randn(3, 3)
    torch.testing.assert_close(compiled(a), fn(a))
    singular = torch.zeros(3, 3)
    with pytest.raises(torch.linalg.LinAlgError) as eager_error:
        fn(singular)
    message = str(eager_error.value)
    with pytest.raises(Exception, match="input matrix is singular") as xla_error:
        compiled(singular)
    assert message in str(xla_error.value)


def test_not_positive_definite_raises_like_eager():
    fn = torch.linalg.cholesky
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    a = torch.randn(4, 4, dtype=torch.float64)
    spd = a @ a.T + 4 * torch.eye(4, dtype=torch.float64)
    torch.testing.assert_close(compiled(spd), fn(spd))
    with pytest.raises(Exception, match="not positive-definite"):
        compiled(-spd)


# -- explicitly called core backward ops match eager ---------------------------------------------
def test_core_backward_ops_match_eager():
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    grad = torch.randn(2, 4, 6, 6)

    def conv_bwd(g, x, w):
        return aten.convolution_backward(
            g, x, w, [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True]
        )

    values, indices = torch.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)
    pool_grad = torch.randn_like(values)

    def pool_bwd(g, x, i):
        return aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, i)

    def avg_bwd(g, x):
        return aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], False, True, None)

    def adaptive_bwd(g, x):
        return aten._adaptive_avg_pool2d_backward(g, x)

    cases = [
        (conv_bwd, (grad, x, w)),
        (pool_bwd, (pool_grad, x, indices)),
        (avg_bwd, (pool_grad, x)),
        (adaptive_bwd, (torch.randn(2, 3, 3, 3), x)),
    ]
    for fn, args in cases:
        got = torch.compile(fn, backend="xla", options={"strict": True})(*args)
        torch.testing.assert_close(got, fn(*args), rtol=1e-5, atol=1e-5)
