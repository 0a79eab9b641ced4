"""A tensor eager's graph saves, changed in place later inside the same graph through an input
the graph writes (the input itself, or another view of its memory: ``v.mul_(x[1])`` with ``v``
= ``x[0]``), makes eager's backward raise "modified by an inplace operation"; ours raised
nothing and returned gradients. The fake backward that finds eager's errors
(``autodiff/_eager_backward.backward_errors``) stopped at the written inputs' new history,
above the write's nodes, instead of at where the graph's history begins.
"""

from __future__ import annotations

import pytest

from tests._util import assert_same_recorded, leaf, observe_scenario

pytestmark = pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")

# eager's error up to the saved tensor's description (its grad_fn's name differs for views:
# see ``test_saved_view_changed_through_another_view_raises``)
_PREFIX = "one of the variables needed for gradient computation has been modified by an inplace"


def _check(scenario, whole_message: bool = True) -> list:
    want = observe_scenario(scenario, False)
    got = observe_scenario(scenario, True)
    assert [label for label, _ in got] == [label for label, _ in want], (got, want)
    for (label, g), (_, w) in zip(got, want):
        if label == "raised":
            assert g[0] is w[0], (g, w)
            if whole_message:
                assert g[1] == w[1], (g, w)
            else:
                assert w[1].startswith(_PREFIX) and g[1].startswith(_PREFIX), (g, w)
                assert g[1].split("]")[0] == w[1].split("]")[0], (g, w)  # dtype and shape
        else:
            assert_same_recorded(g, w, label, 1e-6)
    return want


def _raises(want: list) -> None:
    assert want[-1][0] == "raised" and want[-1][1][1].startswith(_PREFIX), want


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, v: v.mul_(x[1]).sum(),  # the saved x[1] changed through v = x[0]
        lambda x, v: (v * x[2]).sum() + x[2].add_(1).sum(),
    ],
    ids=["other_view_written", "saved_view_written_after"],
)
def test_saved_view_changed_through_another_view_raises(fn):
    # (eager names the saved view by the AsStrided node it regenerates for a view whose base
    # changed, session 22: ``_versions.regenerated``)
    def scenario(C, rec):
        a = leaf(3, 4)
        x = a * 1
        out = C(fn)(x, x[0])
        rec("out", out)
        out.backward()
        rec("grad", a.grad)

    _raises(_check(scenario))


def test_saved_view_written_through_the_same_input_raises():
    def f(x):
        x[0].mul_(x[1])
        return x.sum()

    def scenario(C, rec):
        a = leaf(3, 4)
        out = C(f)(a * 1)
        rec("out", out)
        out.backward()
        rec("grad", a.grad)

    _raises(_check(scenario, whole_message=False))


@pytest.mark.parametrize("aliased", [False, True])
def test_saved_input_written_later_in_the_graph_raises(aliased):
    def f(x, v):
        y = x.sin()
        (v if aliased else x).mul_(2)
        return y.sum()

    def scenario(C, rec):
        a = leaf(3, 4)
        x = a * 1
        out = C(f)(x, x[0] if aliased else x.detach().clone())
        rec("out", out)
        out.backward()
        rec("grad", a.grad)

    _raises(_check(scenario))


def test_written_input_whose_saved_values_are_not_changed_runs():
    # exp saves its output, not the input the graph writes afterwards: no error
    def f(x, v):
        y = v.exp()
        x.add_(1)
        return y.sum() + x.sum()

    def scenario(C, rec):
        a = leaf(3, 4)
        x = a * 1
        out = C(f)(x, x[0])
        rec("out", out)
        out.backward()
        rec("grad", a.grad)
        rec("x", x)

    want = _check(scenario)
    assert want[-1][0] == "x"


def test_write_before_the_save_runs():
    # the write comes before the op that saves: eager saves the new value, nothing changes
    def f(x, v):
        v.mul_(2)
        return (x[1] * v).sum()

    def scenario(C, rec):
        a = leaf(3, 4)
        x = a * 1
        out = C(f)(x, x[0])
        rec("out", out)
        out.backward()
        rec("grad", a.grad)

    want = _check(scenario)
    assert want[-1][0] == "grad"
