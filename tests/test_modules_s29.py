"""torch.nn modules as users use them (session 29, ``scripts/probe_modules29.py``).

- Dynamo's example value of ``F.pad``/``torch.constant_pad_nd`` made under ``no_grad`` is a
  leaf that requires grad; the backend read outputs' ``requires_grad`` from it: the compiled
  ``nn.ZeroPad2d`` in an eval loop under ``no_grad`` returned an output that required grad,
  with a training node (``capture/_no_grad_values.py``).
- Adaptive pooling and ``F.interpolate`` from or to an empty size: eager raises, the compiled
  call returned a value or failed with another error (``capture/_empty_calls.py``,
  ``ops/_empty_checks.py``).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2xla  # noqa: F401
from tests._util import assert_same


def _compiled(fn, **kw):
    torch._dynamo.reset()
    return torch.compile(fn, backend="xla", **kw)


# -- outputs made under no_grad ---------------------------------------------------------------


class PaddedKernel(nn.Module):
    """A module that returns a parameter padded (a kernel laid out for a larger window)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))
        self.pad = nn.ZeroPad2d((1, -1, 2, 0))

    def forward(self, x):
        return x @ self.w, self.pad(self.w)


def test_zero_pad_module_under_no_grad_after_training_call():
    torch.manual_seed(0)
    m = PaddedKernel()
    cm = _compiled(m)
    x = torch.randn(2, 3)
    got, want = cm(x), m(x)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [True, True]
    assert_same(got, want)
    with torch.no_grad():
        for _ in range(2):
            got, want = cm(x), m(x)
            assert [t.requires_grad for t in got] == [t.requires_grad for t in want]
            assert [t.grad_fn for t in got] == [None, None]
            assert_same(got, want)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.pad(x, (1, 1, 2, 0)),
        lambda x: F.pad(x, (1, -1, 0, 1), value=2.5),
        lambda x: torch.constant_pad_nd(x, (2, 1)),
        lambda x: nn.ConstantPad1d((1, 2), 3.0)(x),
    ],
    ids=["pad", "pad_negative", "constant_pad_nd", "ConstantPad1d"],
)
def test_pad_of_leaf_that_requires_grad_under_no_grad(fn):
    x = torch.randn(2, 3, 4, requires_grad=True)
    with torch.no_grad():
        want = fn(x)
        got = _compiled(fn)(x)
    assert got.requires_grad == want.requires_grad is False
    assert got.grad_fn is None
    assert_same(got, want)


def test_no_grad_outputs_autograd_still_tracks():
    """Under no_grad, views of a leaf that requires grad, in-place writes into one and
    factories asked to require grad do require grad: left as they are."""

    def fn(x, y):
        v = x[:, 1:]  # (a view: requires grad through its base)
        p = F.pad(y, (1, 1))
        p.add_(1)  # (in place into a tensor that requires no grad)
        z = torch.zeros(2, requires_grad=True)
        return v, p, z

    x = torch.randn(3, 4, requires_grad=True)
    y = torch.randn(3, 4, requires_grad=True)
    with torch.no_grad():
        want = fn(x, y)
        got = _compiled(fn)(x, y)
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [True, False, True]
    assert got[0]._base is x
    assert_same(got, want)


def test_pad_under_enable_grad_inside_no_grad_call():
    def fn(x):
        with torch.enable_grad():
            return F.pad(x, (1, 1)) * 2

    x = torch.randn(2, 3, requires_grad=True)
    with torch.no_grad():
        got, want = _compiled(fn)(x), fn(x)
    assert got.requires_grad == want.requires_grad is True
    got.sum().backward()
    g = x.grad
    x.grad = None
    want.sum().backward()
    assert_same(g, x.grad)


# -- empty sizes --------------------------------------------------------------------------------

_EMPTY = [
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 2), (1, 2, 0, 3)),
    ("AdaptiveAvgPool3d", lambda x: nn.AdaptiveAvgPool3d(2)(x), (1, 0, 2, 3, 3)),
    ("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, 2), (2, 3, 3, 0)),
    ("interpolate_nearest", lambda x: F.interpolate(x, size=(2, 2)), (1, 2, 0, 3)),
    (
        "interpolate_bilinear",
        lambda x: F.interpolate(x, size=(2, 2), mode="bilinear"),
        (1, 2, 0, 3),
    ),
    ("interpolate_to_empty", lambda x: F.interpolate(x, size=(0, 2), mode="bicubic"), (1, 2, 3, 3)),
    ("upsample_small_scale", lambda x: nn.Upsample(scale_factor=0.2)(x), (1, 2, 3, 3)),
    ("interpolate_linear", lambda x: F.interpolate(x, size=2, mode="linear"), (1, 2, 0)),
    (
        "interpolate_trilinear",
        lambda x: F.interpolate(x, size=(2, 2, 2), mode="trilinear"),
        (1, 2, 0, 3, 3),
    ),
    (
        "interpolate_nearest_exact",
        lambda x: F.interpolate(x, scale_factor=2, mode="nearest-exact"),
        (1, 0, 3, 3),
    ),
]


def _eager_error(fn, x):
    with pytest.raises(Exception) as eager:
        fn(x)
    return eager.value


@pytest.mark.parametrize("name,fn,shape", _EMPTY, ids=[c[0] for c in _EMPTY])
def test_empty_sizes_raise_eagers_error(name, fn, shape):
    def user(x):
        return fn(x * 2) + 1  # (the call inside a graph)

    x = torch.randn(*shape, requires_grad=True)
    eager = _eager_error(user, x)
    with pytest.raises(type(eager)) as got:
        _compiled(user)(x)
    assert str(eager).split("\n")[0] in str(got.value)


_TAKEN = [
    ("adaptive_avg_pool2d_no_channels", lambda x: F.adaptive_avg_pool2d(x, 2), (2, 0, 3, 3)),
    ("adaptive_avg_pool2d_unbatched_empty", lambda x: F.adaptive_avg_pool2d(x, 2), (0, 3, 3)),
    (
        "interpolate_empty_batch",
        lambda x: F.interpolate(x, size=(2, 2), mode="bilinear"),
        (0, 2, 3, 3),
    ),
    ("area_to_empty", lambda x: F.interpolate(x, size=(0, 2), mode="area"), (1, 2, 3, 3)),
]


@pytest.mark.parametrize("name,fn,shape", _TAKEN, ids=[c[0] for c in _TAKEN])
def test_empty_sizes_eager_takes_still_compute(name, fn, shape):
    """Empty sizes eager accepts: the same empty results."""
    x = torch.randn(*shape)
    want = fn(x)
    got = _compiled(fn)(x)
    assert_same(got, want)


def test_empty_adaptive_pool_fullgraph_raises_eagers_message():
    fn = lambda x: F.adaptive_avg_pool2d(x, 2)
    x = torch.randn(1, 2, 0, 3)
    eager = _eager_error(fn, x)
    with pytest.raises(RuntimeError) as got:
        _compiled(fn, fullgraph=True)(x)
    assert str(eager).split("\n")[0] in str(got.value)


# -- channels_last through resampling and channel shuffle ---------------------------------------

_CL = [
    ("bilinear", nn.Upsample(scale_factor=2, mode="bilinear"), (2, 4, 5, 6)),
    ("bilinear_align", nn.Upsample(size=(7, 3), mode="bilinear", align_corners=True), (2, 4, 5, 6)),
    ("bicubic", nn.Upsample(scale_factor=1.5, mode="bicubic"), (2, 3, 4, 4)),
    ("trilinear", nn.Upsample(scale_factor=(2, 1, 1.5), mode="trilinear"), (1, 3, 2, 3, 4)),
    ("channel_shuffle", nn.ChannelShuffle(2), (2, 4, 3, 3)),
    ("channel_shuffle_3d", nn.ChannelShuffle(3), (1, 6, 2, 2, 3)),
]


@pytest.mark.parametrize("name,m,shape", _CL, ids=[c[0] for c in _CL])
def test_channels_last_input_keeps_eagers_layout(name, m, shape):
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = torch.randn(*shape).to(memory_format=fmt).requires_grad_()
    want = m(x)
    w = torch.randn(want.shape)
    (want * w).sum().backward()
    want_grad, x.grad = x.grad, None
    got = _compiled(m)(x)
    assert got.stride() == want.stride()
    assert_same(got, want)
    (got * w).sum().backward()
    assert x.grad.stride() == want_grad.stride()
    assert_same(x.grad, want_grad)
