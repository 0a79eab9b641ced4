"""Autograd classes found by scripts/probe_autograd4.py (session 20), against eager strictly:
values, dtypes, None-ness of gradients, errors (type and message).

- A tensor eager's graph saves, changed in place after the call, is checked per output as
  eager's nodes check it (``autodiff/_versions.py``): a backward through an output whose path
  saves nothing that changed runs; one through an output whose path saved it raises eager's
  error. Inputs the graph writes and eager saves after the write are checked from the end of
  the call; outputs that are views of one saved intermediate the graph does not return are
  checked through the base the user gets. The error is eager's, message included.
- An output eager returns as the only view of an intermediate is a view (of the program's
  output): ``detach_()`` raises eager's error, ``_is_view()`` is eager's.
"""

from __future__ import annotations

import pytest
import torch

from tests._util import assert_same_recorded, leaf, observe_scenario

pytestmark = pytest.mark.filterwarnings("ignore::torch2xla.FallbackWarning")


def _check(scenario) -> list:
    """``scenario`` compiled records what it records in eager; eager's records."""
    want = observe_scenario(scenario, False)
    got = observe_scenario(scenario, True)
    assert [label for label, _ in got] == [label for label, _ in want], (got, want)
    for (label, g), (_, w) in zip(got, want):
        if label == "raised":  # (eager's message, whole: the saved tensor's op, versions)
            assert g[0] is w[0] and g[1] == w[1], (g, w)
        else:
            assert_same_recorded(g, w, label, 1e-6)
    return want


def _raised(want: list) -> str:
    assert want[-1][0] == "raised", want
    return want[-1][1][1]


_MODIFIED = "one of the variables needed for gradient computation has been modified"


# -- saved tensors changed in place after the call, checked per output ------------------------
def _other_output_changed(C, rec):
    def f(x):
        return x.tanh(), x.sigmoid()  # both save their outputs

    x = leaf(4)
    a, b = C(f)(x)
    b.add_(1)
    a.sum().backward()  # tanh's node only: runs
    rec("grad", x.grad)
    b.sum().backward()


def _other_output_changed_autograd_grad(C, rec):
    def f(x):
        return x.sigmoid(), x * 2

    x = leaf(3)
    a, b = C(f)(x)
    a.zero_()
    rec("g", list(torch.autograd.grad(b.sum(), x, retain_graph=True)))
    torch.autograd.grad(a.sum(), x)


def _input_saved_for_other_output(C, rec):
    def f(x, w):
        return x.exp(), (x * w).sum()  # only the second one's path saves w

    x, w = leaf(4), leaf(4, seed=1)
    a, s = C(f)(x, w)
    with torch.no_grad():
        w.add_(1)
    a.sum().backward()
    rec("grads", [x.grad, w.grad])
    s.backward()


def _input_saved_for_other_output_autograd_grad(C, rec):
    def f(x, w, v):
        return (x * w).sum(), (x * 3 + v).sum()

    x, w, v = leaf(4), leaf(4, seed=1), leaf(4, seed=2)
    a, b = C(f)(x, w, v)
    with torch.no_grad():
        w.mul_(2)
    rec("g", list(torch.autograd.grad(b, [x, v])))
    torch.autograd.grad(a, [x])


def _nonleaf_input_saved_changed(C, rec):
    def f(x, h):
        return x.exp(), (x * h).sum()

    x, w = leaf(3), leaf(3, seed=1)
    h = w * 1
    a, s = C(f)(x, h)
    h.add_(1)
    a.sum().backward()
    rec("grads", [x.grad, w.grad])
    s.backward()


def _views_of_one_saved_intermediate(C, rec):
    def f(x):
        h = x.exp()  # saved by exp's node; the graph returns two views of it
        return h[:2], h[2:]

    x = leaf(4)
    a, b = C(f)(x)
    a.mul_(2)
    b.sum().backward()


def _view_of_unsaved_intermediate_changed(C, rec):
    def f(x, w):
        h = x * 2  # saved by nobody: a write into its view is fine
        return h[:2], (h.exp() * w).sum()

    x, w = leaf(4), leaf(4, seed=1)
    a, s = C(f)(x, w)
    a.mul_(2)
    s.backward()
    rec("grads", [x.grad, w.grad])


def _input_written_inside_then_changed(C, rec):
    def f(x, w):
        x.mul_(2)  # mul saves x after this write
        return (x * w).sum()

    x, w = leaf(3, rg=False), leaf(3, seed=1)
    s = C(f)(x, w)
    rec("x", [x, x._version])
    x.add_(1)
    s.backward()


def _input_written_inside_unchanged(C, rec):
    def f(x, w):
        x.mul_(2)
        return (x * w).sum()

    x, w = leaf(3, rg=False), leaf(3, seed=1)
    s = C(f)(x, w)
    s.backward()
    rec("grad", w.grad)
    rec("x", [x, x._version])


def _written_input_and_shared_views(C, rec):
    def f(x, w, buf):
        buf.add_(1)
        h = (x * w).sigmoid()
        return h[:2], h[2:], (buf * w).sum()

    x, w, buf = leaf(4), leaf(4, seed=1), torch.zeros(4)
    a, b, s = C(f)(x, w, buf)
    s.backward(retain_graph=True)
    rec("g1", [x.grad, w.grad])
    (a.sum() + b.sum()).backward(retain_graph=True)
    rec("g2", [x.grad, w.grad])
    buf.mul_(2)
    s.backward()


def _retained_then_output_changed(C, rec):
    def f(x):
        return x.exp()

    x = leaf(3)
    y = C(f)(x)
    y.sum().backward(retain_graph=True)
    rec("g1", x.grad)
    y.add_(1)
    y.sum().backward()


def _module_input_changed(C, rec):
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    x = leaf(4, 3, rg=False)
    out = C(lin)(x).sum()  # saves x for the weight's gradient
    x.mul_(2)
    out.backward()


def _detached_alias_of_saved_output_changed(C, rec):
    def f(x):
        return x.sigmoid()

    x = leaf(3)
    y = C(f)(x)
    y.detach().zero_()  # shares the version counter
    y.sum().backward()


_RAISING = {
    "other_output_changed": _other_output_changed,
    "other_output_changed_autograd_grad": _other_output_changed_autograd_grad,
    "input_saved_for_other_output": _input_saved_for_other_output,
    "input_saved_for_other_output_autograd_grad": _input_saved_for_other_output_autograd_grad,
    "nonleaf_input_saved_changed": _nonleaf_input_saved_changed,
    "views_of_one_saved_intermediate": _views_of_one_saved_intermediate,
    "input_written_inside_then_changed": _input_written_inside_then_changed,
    "written_input_and_shared_views": _written_input_and_shared_views,
    "retained_then_output_changed": _retained_then_output_changed,
    "module_input_changed": _module_input_changed,
    "detached_alias_of_saved_output_changed": _detached_alias_of_saved_output_changed,
}


@pytest.mark.parametrize("name", list(_RAISING))
def test_saved_tensor_changed_raises_where_eager_does(name):
    want = _check(_RAISING[name])
    assert _MODIFIED in _raised(want)


@pytest.mark.parametrize(
    "scenario",
    [_view_of_unsaved_intermediate_changed, _input_written_inside_unchanged],
    ids=["view_of_unsaved_intermediate", "input_written_inside"],
)
def test_change_eager_does_not_check_runs(scenario):
    want = _check(scenario)
    assert all(label != "raised" for label, _ in want)


# -- version counters of the inputs ------------------------------------------------------------
def _versions(C, rec):
    def f(x, y, z, o):
        x.add_(1)
        y[0] = 5.0
        torch.sin(z, out=o)
        return x + y + z

    ts = [torch.zeros(3) for _ in range(4)]
    before = [t._version for t in ts]
    C(f)(*ts)
    rec("changed", [t._version > v for t, v in zip(ts, before)])


def test_written_inputs_versions_change_as_eagers():
    assert _check(_versions) == [("changed", [True, True, False, True])]


# -- an output eager returns as the only view of an intermediate -------------------------------
def _lone_views(C, rec):
    def f(x):
        return x.exp()[1:], x.sin().t(), (x * 2).view(-1)

    x = leaf(3, 4)
    a, b, c = C(f)(x)
    rec("views", [t._is_view() for t in (a, b, c)])
    rec("strides", [list(t.stride()) for t in (a, b, c)])
    c[:4].mul_(3)  # (x * 2) is saved by nobody: eager runs
    (a.sum() + b.sum() + (c * c).sum()).backward()
    rec("grad", x.grad)
    rec("c", c)


def _lone_view_detach_inplace(C, rec):
    cell = torch.nn.RNNCell(3, 4)

    def f(xs, h):
        hs = []
        for t in range(xs.shape[0]):
            h = cell(xs[t], h)
            hs.append(h)
        return torch.stack(hs)[-1]  # a view of the stacked states

    h = C(f)(leaf(2, 5, 3, rg=False), torch.zeros(5, 4))
    rec("h", h)
    h.detach_()


def _lone_view_no_grad(C, rec):
    def f(x):
        return x.exp()[1:]

    x = leaf(4)
    with torch.no_grad():
        y = C(f)(x)
    rec("y", [y, y._is_view()])
    y.detach_()


def _lone_view_of_saved_written(C, rec):
    def f(x):
        return x.exp()[1:]

    x = leaf(4)
    y = C(f)(x)
    y.mul_(2)
    y.sum().backward()


@pytest.mark.parametrize(
    "scenario",
    [_lone_views, _lone_view_detach_inplace, _lone_view_no_grad, _lone_view_of_saved_written],
    ids=["views", "detach_inplace_raises", "no_grad_detach_inplace_raises", "saved_written"],
)
def test_output_eager_returns_as_lone_view_is_a_view(scenario):
    _check(scenario)
