"""Stale programs, session 22: module, process and input state changed between calls of a
compiled model, each call compared strictly with eager (``scripts/probe_modstate.py`` runs ~35
such sequences, and ``--warm`` again on a warm persistent cache).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch2xla
from tests._util import skip_unless_onednn_bf16_lstm

_ONEDNN_SKIP = skip_unless_onednn_bf16_lstm()


def _same(got, want):
    """Strict: the same structure, dtypes, shapes and values (float32: round-off of one op)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    tol = 1e-2 if want.dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


@_ONEDNN_SKIP
def test_lstm_under_autocast_follows_onednn_switch_between_calls():
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
        # (the flags() context: another test of the process may have called torch's
        # disable_global_flags, after which setting the flag itself raises)
        onednn, bf16 = torch.backends.mkldnn.flags(enabled=on), torch.bfloat16
        with onednn, torch.no_grad(), torch.autocast("cpu", dtype=bf16):
            want, got = m(x), f(x)
        _same(got[0], want[0])
        _same(got[1], want[1])
        dtypes.append(want[0].dtype)
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():  # (eager itself differs between the two)
        assert dtypes == [torch.bfloat16, torch.float32] * 2
    info = torch2xla.cache_info(f)
    assert "torch.backends.mkldnn.enabled: True -> False" in str(info)


@_ONEDNN_SKIP
def test_bucketed_graph_with_lstm_follows_onednn_switch():
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
        onednn, bf16 = torch.backends.mkldnn.flags(enabled=on), torch.bfloat16
        with onednn, torch.no_grad(), torch.autocast("cpu", dtype=bf16):
            want, got = g(x, y), f(x, y)
        _same(got[0][0], want[0][0])
        _same(got[0][1], want[0][1])
        _same(got[1], want[1])
    assert "(bucket)" in str(torch2xla.cache_info(f))


@pytest.fixture
def opt_einsum():
    oe = torch.backends.opt_einsum
    before = oe.enabled, oe.strategy
    yield oe
    if before[1] is not None:
        oe.enabled = True
        oe.strategy = before[1]
    oe.enabled = before[0]


def _einsum(a, b, c):
    return torch.einsum("ij,jk,kl->il", a, b, c)


def _einsum_operands():
    """Operands whose products overflow float32 in one contraction order only: opt_einsum
    takes ``a (b c)`` (finite), left to right ``(a b) c`` overflows to inf."""
    g = torch.Generator().manual_seed(0)
    a = torch.rand(50, 2, generator=g) * 1e20
    b = torch.rand(2, 40, generator=g) * 1e20
    c = torch.rand(40, 3, generator=g) * 1e-30
    return a, b, c


@pytest.mark.skipif(not torch.backends.opt_einsum.is_available(), reason="needs opt_einsum")
def test_einsum_follows_opt_einsum_between_calls(opt_einsum):
    # The export decomposes einsum in the order opt_einsum chooses, as eager does. Dynamo
    # does not guard the switch: the program of the first call served the others (another
    # order: finite values where eager overflowed, another layout).
    f = torch.compile(_einsum, backend="xla")
    for enabled in (True, False, True, False):
        opt_einsum.enabled = enabled
        for a, b, c in (
            _einsum_operands(),
            (torch.randn(3, 40), torch.randn(40, 2), torch.randn(2, 50)),
        ):
            want, got = _einsum(a, b, c), f(a, b, c)
            assert got.stride() == want.stride()
            _same(got, want)
        assert _einsum(*_einsum_operands()).isfinite().all() == enabled
    assert "torch.backends.opt_einsum (enabled, strategy): (True, 'auto') -> (False, 'auto')" in (
        str(torch2xla.cache_info(f))
    )


@pytest.fixture
def fresh_cache(monkeypatch):
    from torch2xla.guards import _persistent

    yield
    monkeypatch.undo()
    _persistent._explicit = _persistent._UNSET
    _persistent._wanted_path = None
    _persistent._store = None


@pytest.mark.skipif(not torch.backends.opt_einsum.is_available(), reason="needs opt_einsum")
def test_stored_einsum_record_is_keyed_by_opt_einsum(tmp_path, fresh_cache, opt_einsum):
    # The persistent cache's record of the graph was keyed without opt_einsum's switch: a
    # process (here: the same one, its graph traced again) with it off was served the record
    # stored with it on.
    from torch2xla.guards import _persistent

    torch2xla.set_persistent_cache(tmp_path / "cache")
    a, b, c = _einsum_operands()
    hits = []
    for enabled in (True, False, True):
        opt_einsum.enabled = enabled
        torch._dynamo.reset()
        before = _persistent.hits()
        got = torch.compile(_einsum, backend="xla")(a, b, c)
        hits.append(_persistent.hits() - before)
        want = _einsum(a, b, c)
        _same(got, want)
        assert want.isfinite().all() == enabled
    assert hits[1] == 0 and hits[2] > 0, hits


@pytest.fixture
def deterministic():
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.utils.deterministic.fill_uninitialized_memory,
    )
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.utils.deterministic.fill_uninitialized_memory = before[2]


def _empties(x):
    return (
        torch.empty(3),
        torch.empty_like(x, dtype=torch.int32),
        x.new_empty(2, dtype=torch.complex64),
        torch.empty_strided((2, 2), (1, 2), dtype=torch.float16),
        torch.empty(2, dtype=torch.bool),
        torch.empty(2, dtype=torch.uint8),
        x.new_empty_strided((2,), (1,), dtype=torch.int8),
    )


def test_empty_under_deterministic_algorithms_is_eagers_fill(deterministic):
    # Under torch.use_deterministic_algorithms(True) eager fills uninitialized memory (NaN,
    # the largest integer, True: torch.utils.deterministic.fill_uninitialized_memory, on by
    # default); the lowering gave zeros. The fill switch is not guarded by Dynamo: it is in
    # the cache key of graphs traced under deterministic mode.
    f = torch.compile(_empties, backend="xla")
    x = torch.randn(3)
    for det, fill in ((True, True), (True, False), (True, True), (False, True)):
        torch.use_deterministic_algorithms(det)
        torch.utils.deterministic.fill_uninitialized_memory = fill
        got, want = f(x), _empties(x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            if det and fill:  # (otherwise eager's contents are undefined)
                assert torch.equal(g, w) or (g.isnan().all() and w.isnan().all()), (g, w)
                if g.is_complex():
                    assert torch.equal(torch.view_as_real(g)[..., 1], torch.zeros(2))
    x = x.clone().requires_grad_()
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    g = torch.compile(lambda x: x.new_empty(3).copy_(x * 2).sum(), backend="xla")
    g(x).backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
