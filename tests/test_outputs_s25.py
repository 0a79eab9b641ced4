"""Session 25: what users do with the tensors a compiled call returns, against eager
(``scripts/probe_outputs25.py``, 81 scenarios: resizes, ``set_``, in-place ops and ``out=``
into outputs, ``.numpy()``, ``torch.save``, deepcopy, outputs fed back call after call,
outputs aliasing inputs or each other).

What was wrong: outputs' version counters (eager's count of the in-place ops the function made
on them; ours 0, or 1-3 from our own ``set_`` and copies: a transposed result, a bucketed
``cat``, views of one intermediate); ``x.detach()`` returned came back as a view
(``_is_view()`` True, eager's is a new tensor); the only view of an intermediate eager returns
with gaps or an offset (``(x * 2)[:, 1:]``, ``y[::2]``) came back dense, so ``.view(-1)``
worked where eager raises. Not fixed: outputs over the program's memory cannot grow
(``resize_``, ``out=`` of another size, ``untyped_storage().resize_(0)``).
"""

from __future__ import annotations

import copy
import io

import pytest
import torch

from tests._util import leaf


def _meta(t: torch.Tensor) -> tuple:
    return (
        t.dtype,
        tuple(t.shape),
        t.stride(),
        t.storage_offset(),
        t.is_contiguous(),
        t._is_view(),
        t._base is None,
        t.requires_grad,
        t.grad_fn is None,
        t._version,
    )


def _observe(scenario, compiled: bool) -> list:
    seen: list = []

    def C(f, **kw):
        return torch.compile(f, backend="xla", **kw) if compiled else f

    def rec(label, value):
        if isinstance(value, torch.Tensor):
            value = (_meta(value), value.detach().clone())
        elif isinstance(value, (list, tuple)):
            value = [(_meta(v), v.detach().clone()) for v in value]
        seen.append((label, value))

    torch._dynamo.reset()
    try:
        scenario(C, rec)
    except RuntimeError as e:
        seen.append(("raised", (type(e), str(e).split("\n")[0])))
    return seen


def _check(scenario) -> list:
    want = _observe(scenario, False)
    got = _observe(scenario, True)
    assert [label for label, _ in got] == [label for label, _ in want], (got, want)
    for (label, g), (_, w) in zip(got, want):
        if label == "raised":
            assert g == w, label
            continue
        pairs = zip(g, w) if isinstance(w, list) else [(g, w)]
        for (gm, gv), (wm, wv) in pairs:
            assert gm == wm, (label, gm, wm)
            torch.testing.assert_close(gv, wv, rtol=1e-6, atol=1e-6, msg=label)
    return want


# -- version counters of outputs -----------------------------------------------------------
def _written_in_graph(C, rec):
    def f(x):
        y = x * 2
        y.add_(1)
        y.view(12).mul_(2)
        return y, x + 1

    y, w = C(f)(leaf(3, 4, rg=False))
    rec("outs", [y, w])
    y.add_(1)
    rec("after", y)


def _transposed(C, rec):
    f = C(lambda x: x.t() * 2)
    for _ in range(2):
        rec("out", f(leaf(3, 4, rg=False)))
    g = C(lambda x: x * 2)
    rec("channels_last", g(leaf(2, 3, 4, 5, rg=False).to(memory_format=torch.channels_last)))


def _kv_cache(C, rec):
    f = C(lambda cache, k: torch.cat([cache, k], 1), dynamic=True)
    cache = leaf(2, 1, 4, rg=False)
    for i in range(5):
        cache = f(cache, leaf(2, 1, 4, seed=i + 1, rg=False))
        rec(f"cache {i}", cache)


def _views_of_one_intermediate(C, rec):
    def two(x):
        y = x * 2
        return y[:2], y[1:]

    rec("two", list(C(two)(leaf(3, 4, rg=False))))
    rec("split", list(C(lambda x: (x * 2).split(2))(leaf(3, 4, rg=False))))
    outs = C(lambda x: (x * 2).unbind(0))(leaf(3, 4))
    rec("unbind grad", list(outs))


@pytest.mark.parametrize(
    "scenario",
    [_written_in_graph, _transposed, _kv_cache, _views_of_one_intermediate],
    ids=["written_in_graph", "transposed", "kv_cache_cat", "views_of_one_intermediate"],
)
def test_output_versions_are_eagers(scenario):
    _check(scenario)


# -- outputs that alias inputs or intermediates --------------------------------------------
def _detach_returned(C, rec):
    f = C(lambda x: (x.detach(), x[0].detach(), x.detach()[1]))
    x = leaf(3, 4)
    a, b, c = f(x)
    rec("outs", [a, b, c])
    a.add_(1)  # (writes x, as eager's)
    rec("x", x)


def _single_strided_view(C, rec):
    x = leaf(3, 4, rg=False)
    a = C(lambda x: (x * 2)[:, 1:])(x)
    b = C(lambda x: (x * 2)[::2])(x)
    c = C(lambda x: x.exp()[1:].t())(x)
    rec("views", [a, b, c])
    a.fill_(0)
    rec("a", a)
    a.view(-1)  # eager raises: not contiguous


def _single_strided_view_no_grad(C, rec):
    x = leaf(4)
    with torch.no_grad():
        y = C(lambda x: x.exp()[1:])(x)
    rec("y", y)
    y.detach_()  # eager raises: a view cannot be detached in place


@pytest.mark.parametrize(
    "scenario",
    [_detach_returned, _single_strided_view, _single_strided_view_no_grad],
    ids=["detach_returned", "single_strided_view", "single_strided_view_no_grad"],
)
def test_aliasing_outputs_are_eagers(scenario):
    want = _check(scenario)
    assert want[-1][0] == "raised" or scenario is _detach_returned


def _single_strided_view_dynamic(C, rec):
    f = C(lambda x: (x * 2)[:, 1:], dynamic=True)
    g = C(lambda x: (x * 2)[::2], dynamic=True)
    for n in (3, 5, 6):
        x = leaf(n, n + 1, seed=n, rg=False)
        rec(f"views {n}", [f(x), g(x)])


def test_single_strided_view_of_dynamic_graph_is_eagers():
    _check(_single_strided_view_dynamic)


# -- what users do with outputs (pins what held) -------------------------------------------
def _numpy_save_deepcopy(C, rec):
    o = C(lambda x: x * 2)(leaf(3, 4, rg=False))
    o.numpy()[0, 0] = 42.0
    rec("numpy write", o)
    buf = io.BytesIO()
    torch.save({"o": o, "v": o[1]}, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    loaded["v"].fill_(5)  # (one storage: o's copy too)
    rec("loaded", [loaded["o"], loaded["v"]])
    pair = copy.deepcopy([o, o[0]])
    pair[1].fill_(3)
    rec("deepcopy", pair)
    o.share_memory_()
    o.add_(1)
    rec("shared", o)


def _fed_back(C, rec):
    def f(step, buf, x):
        buf.mul_(0.9).add_(x)
        return step + 1, buf * step

    cf = C(f)
    step, buf = torch.zeros((), dtype=torch.int64), torch.zeros(3)
    for i in range(3):
        step, y = cf(step, buf, leaf(3, seed=i, rg=False))
        rec(f"step {i}", [step, y, buf])


def _write_one_of_aliased(C, rec):
    def f(x):
        y = x * 2
        return y, y[1], y.t()

    y, row, t = C(f)(leaf(3, 4, rg=False))
    row.fill_(0)
    t[0].fill_(7)
    rec("outs", [y, row, t])


@pytest.mark.parametrize(
    "scenario",
    [_numpy_save_deepcopy, _fed_back, _write_one_of_aliased],
    ids=["numpy_save_deepcopy", "fed_back", "write_one_of_aliased"],
)
def test_outputs_used_as_eagers(scenario):
    _check(scenario)


def test_resize_of_program_output_not_fixed():
    """Known gap (design.md): torch cannot grow a storage over the program's memory."""
    o = torch.compile(lambda x: x * 2, backend="xla")(leaf(3, rg=False))
    with pytest.raises(RuntimeError, match="not resizable"):
        o.resize_(10)
