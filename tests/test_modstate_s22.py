"""Stale programs, session 22: module, process and input state changed between calls of a
compiled model, each call compared strictly with eager (``scripts/probe_modstate.py`` runs ~35
such sequences, and ``--warm`` again on a warm persistent cache).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch2xla


@pytest.fixture
def mkldnn():
    before = torch.backends.mkldnn.enabled
    yield
    torch.backends.mkldnn.enabled = before


def _same(got, want):
    """Strict: the same structure, dtypes, shapes and values (float32: round-off of one op)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    tol = 1e-2 if want.dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN not built")
def test_lstm_under_autocast_follows_onednn_switch_between_calls(mkldnn):
    # Eager's LSTM under CPU autocast runs through oneDNN, which returns the autocast dtype;
    # with oneDNN off it returns float32. The lowering reads the switch (capture/_autocast.py),
    # Dynamo does not guard it: the program built with oneDNN on served the calls after
    # ``torch.backends.mkldnn.enabled = False`` (bfloat16 outputs where eager gave float32).
    torch.manual_seed(0)
    m = nn.LSTM(4, 5, batch_first=True)
    f = torch.compile(m, backend="xla")
    x = torch.randn(2, 3, 4)
    dtypes = []
    for on in (True, False, True, False):
        torch.backends.mkldnn.enabled = on
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want, got = m(x), f(x)
        _same(got[0], want[0])
        _same(got[1], want[1])
        dtypes.append(want[0].dtype)
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():  # (eager itself differs between the two)
        assert dtypes == [torch.bfloat16, torch.float32] * 2
    info = torch2xla.cache_info(f)
    assert "torch.backends.mkldnn.enabled: True -> False" in str(info)


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN not built")
def test_bucketed_graph_with_lstm_follows_onednn_switch(mkldnn):
    # A padded program is lowered from the graph the bucketing traced once, under the state of
    # its first call: the key told the two oneDNN states apart, but both built from one trace
    # (bfloat16 LSTM outputs where eager gave float32).
    torch.manual_seed(0)
    m = nn.LSTM(4, 5, batch_first=True)

    def g(x, y):
        return m(x), y.softmax(0)

    f = torch.compile(g, backend="xla")
    x = torch.randn(2, 3, 4)
    for n, on in ((3, True), (5, True), (6, False), (9, True), (10, False)):
        y = torch.randn(n, 2)
        torch._dynamo.mark_dynamic(y, 0)
        torch.backends.mkldnn.enabled = on
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want, got = g(x, y), f(x, y)
        _same(got[0][0], want[0][0])
        _same(got[0][1], want[0][1])
        _same(got[1], want[1])
    assert "(bucket)" in str(torch2xla.cache_info(f))
