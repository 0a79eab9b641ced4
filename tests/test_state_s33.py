"""State changed between compiled calls (session 33): JAX's global configuration that a user
who also runs JAX code sets in the same process (rank promotion "raise", ``debug_nans``,
``disable_jit``, transfer guards, ...). Eager PyTorch never sees it; our traces, compiles and
calls run with JAX's defaults (``runtime/_jax_scope.x64``), so every call equals eager's."""

from __future__ import annotations

import contextlib

import jax
import pytest
import torch
import torch.nn.functional as F
from torch import nn


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))


def _fn(m):
    def f(x, t):
        out = m(x)
        # (NaN and -inf outputs, as eager returns them; int, float64 and broadcast ops)
        odd = x.log() + x[:, :1] * torch.arange(4)
        return F.cross_entropy(out, t), odd, (x.int() // 2).sum() + (x.double() * 0.5).sum()

    return f


def _fn32(m):
    def f(x, t):  # (32-bit values only: ``t`` unused)
        return m(x).logsumexp(-1).mean(), x.log(), (x * 2).amax()

    return f


def _run(compiled: bool, scope) -> list:
    torch._dynamo.reset()
    m = _model()
    f = torch.compile(_fn(m), backend="xla") if compiled else _fn(m)
    t = torch.tensor([0, 2, 1, 1, 0])
    seen = []
    for i in range(3):  # (the third call is a steady one)
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(i))
        x[0, 0] = 0.0  # (log: -inf)
        with scope():
            loss, odd, ints = f(x, t)
            loss.backward()
        seen += [loss.detach(), odd, ints] + [p.grad.clone() for p in m.parameters()]
        m.zero_grad(set_to_none=True)
    return seen


def _assert_same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)


_EAGER = None


def _eager() -> list:
    global _EAGER
    if _EAGER is None:
        _EAGER = _run(False, contextlib.nullcontext)
    return _EAGER


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("jax_numpy_rank_promotion", "raise"),
        ("jax_numpy_dtype_promotion", "strict"),
        ("jax_debug_nans", True),
        ("jax_debug_infs", True),
        ("jax_disable_jit", True),
        ("jax_default_matmul_precision", "bfloat16"),
        ("jax_transfer_guard", "disallow"),
        ("jax_transfer_guard_host_to_device", "disallow"),
    ],
)
def test_global_jax_config_set_between_calls(name, value):
    old = getattr(jax.config, name)
    jax.config.update(name, value)
    try:
        got = _run(True, contextlib.nullcontext)
    finally:
        jax.config.update(name, old)
    _assert_same(got, _eager())


def test_jax_scoped_switches_around_calls():
    # (thread-local switches, as a user's ``with`` block around a compiled call)
    @contextlib.contextmanager
    def scope():
        with (
            jax.debug_nans(True),
            jax.numpy_rank_promotion("raise"),
            jax.disable_jit(True),
            jax.transfer_guard("disallow"),
        ):
            yield

    _assert_same(_run(True, scope), _eager())


_SWITCHES = [
    ("jax_debug_nans", True),
    ("jax_debug_infs", True),
    ("jax_disable_jit", True),
    ("jax_numpy_rank_promotion", "raise"),
    ("jax_transfer_guard", "disallow"),
    ("jax_transfer_guard", "allow"),
]


@pytest.mark.parametrize(
    "first",
    [
        [(None, None)] * 3,  # (steady calls first)
        [("jax_numpy_rank_promotion", "raise")],  # (the first call under a switch)
    ],
    ids=["steady_first", "switched_first"],
)
@pytest.mark.parametrize("bits", [64, 32])  # (a program with 64-bit values runs in x64)
def test_jax_config_set_between_calls_of_one_function(first, bits):
    # one compiled function, each switch set globally for two calls
    def run(compiled: bool) -> list:
        torch._dynamo.reset()
        m = _model()
        fn = _fn(m) if bits == 64 else _fn32(m)
        f = torch.compile(fn, backend="xla") if compiled else fn
        t = torch.tensor([0, 2, 1, 1, 0])
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
        seen = []
        for name, value in first + [s for s in _SWITCHES for _ in range(2)]:
            old = getattr(jax.config, name) if name else None
            if name:
                jax.config.update(name, value)
            try:
                loss, odd, ints = f(x, t)
                loss.backward()
                with torch.no_grad():
                    _, odd2, _ = f(x, t)
            finally:
                if name:
                    jax.config.update(name, old)
            seen += [loss.detach(), odd, odd2, ints] + [p.grad.clone() for p in m.parameters()]
            m.zero_grad(set_to_none=True)
        return seen

    _assert_same(run(True), run(False))


def test_pinned_switches_leave_persistent_keys_alone():
    # (the programs are the same whatever the user set: a restored one still serves)
    from torch2xla.guards import _persistent

    before = _persistent.environment()
    for name, value in _SWITCHES:
        old = getattr(jax.config, name)
        jax.config.update(name, value)
        try:
            assert _persistent.environment() == before, name
        finally:
            jax.config.update(name, old)
