"""Session 30: programs under the Dynamo settings users turn on (capture_scalar_outputs,
capture_dynamic_output_shape_ops, dynamic=True), compared with eager call by call.

A graph cut around a data-dependent op (``x[mask]``) gives its later pieces sizes computed
from the unbacked size and sizes the piece does not take (``x.shape[0] - y.shape[0]``): the
piece takes such an int as a SymInt input, which the bucketing's symbolic trace held at the
first call's value. Its padded programs then padded (or cropped) by the first call's amount
on every later call: wrong shapes, silently."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from tests._util import assert_same


@pytest.fixture(autouse=True)
def _capture():
    with torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        yield


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def pad_to_input_length(x):
    y = x[x[:, 0] > 0]
    return F.pad(y, (0, 0, 0, x.shape[0] - y.shape[0])).cumsum(0), y[: y.shape[0] // 2]


def pad_by_item_minus_count(x, k):
    # (a negative amount crops: the padding proven exact for one sign is not for the other)
    y = x[x[:, 0] > 0]
    return F.pad(y, (0, 0, 0, k.item() - y.shape[0])).cumsum(0)


def zeros_to_full_length(x):
    y = x[x.sum(1) > 0]
    fill = y.new_zeros(x.shape[0] - y.shape[0], x.shape[1])
    return torch.cat([y, fill]).softmax(0)


CASES = {
    pad_to_input_length: [(n,) for n in (6, 4, 7, 9, 5)],
    pad_by_item_minus_count: [(6, 5), (5, 1), (7, 3), (4, 0), (9, 6), (8, 2)],
    zeros_to_full_length: [(n,) for n in (6, 5, 9, 3, 8)],
}


@pytest.mark.parametrize("fn", list(CASES), ids=[f.__name__ for f in CASES])
def test_piece_sizes_from_unbacked_and_input_sizes_follow_each_call(fn):
    """Inference calls (the ones bucketing pads) of a cut graph whose later piece takes an
    int of the unbacked size and the input's size: eager's shapes and values at every call
    (the first call's pad amount was kept: (6, 2) for eager's (4, 2))."""
    compiled = torch.compile(fn, backend="xla", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch2xla.FallbackWarning)
        warnings.simplefilter("ignore", torch2xla.BucketingWarning)
        for n, *rest in CASES[fn]:
            args = (_rand(n, 2 if fn is not zeros_to_full_length else 3, seed=n),)
            args += tuple(torch.tensor(k) for k in rest)
            got, want = compiled(*args), fn(*args)
            for g, w in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, want))):
                assert g.shape == w.shape, (n, rest, g.shape, w.shape)
            assert_same(got, want)


def test_piece_taking_a_foreign_size_is_not_padded():
    """The piece's report says why its sizes are not padded (the int it takes)."""
    from torch2xla.guards.bucketing import _bucket

    reasons = []
    original = _bucket.Bucketing.__init__

    def spy(self, gm, key, spec, args):
        original(self, gm, key, spec, args)
        reasons.extend(self.refused.values())

    compiled = torch.compile(pad_to_input_length, backend="xla", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _bucket.Bucketing.__init__ = spy
        try:
            compiled(_rand(6, 2, seed=6))
        finally:
            _bucket.Bucketing.__init__ = original
    assert any(
        "sub = s" in r and "an int computed from sizes it does not take" in r for r in reasons
    ), reasons
