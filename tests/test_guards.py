"""The program cache: one compile per signature, counted; LRU bound; threads; visibility.

Compile counts are the assertions: ``cache_info`` counts torch2xla's compiles and a JAX
monitoring listener counts the programs JAX lowers, so a recompile anywhere shows up.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import jax
import pytest
import torch

import torch2xla
from tests._util import assert_same
from torch2xla.guards import SignatureKey, _log

_LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"


class _Lowerings:
    """Counts JAX lowerings (each jit compile, persistent-cache hit or not, lowers once)."""

    count = 0
    installed = False

    @classmethod
    def listener(cls, event: str, duration: float, **kwargs) -> None:
        if event == _LOWERING:
            cls.count += 1


@pytest.fixture
def lowerings():
    if not _Lowerings.installed:
        jax.monitoring.register_event_duration_secs_listener(_Lowerings.listener)
        _Lowerings.installed = True
    start = _Lowerings.count
    return lambda: _Lowerings.count - start


def _mlp(x, w):
    return torch.relu(x @ w) * 2.0 + 1.0


W = torch.randn(8, 5)


def _compiled(fn=_mlp, **kw):
    # One program per size (no buckets): these tests count signatures and their reasons.
    kw.setdefault("options", {"strict": True})
    kw["options"].setdefault("buckets", None)
    return torch.compile(fn, backend="xla", **kw)


@torch.no_grad()
def test_known_signature_never_recompiles():
    f = _compiled()
    for _ in range(3):
        x = torch.randn(4, 8)  # a fresh tensor every call, as in real inference
        assert_same(f(x, W), _mlp(x, W))
    info = torch2xla.cache_info(f)
    assert (len(info), info.misses, info.hits, info.entries) == (1, 1, 2, 1)
    assert info[0].signatures[0].reason == "first call"


@torch.no_grad()
def test_cache_hits_lower_nothing_in_jax(lowerings):
    f = _compiled()
    f(torch.randn(4, 8), W)
    after_first = lowerings()
    for _ in range(3):
        f(torch.randn(4, 8), W)
    assert lowerings() == after_first


@torch.no_grad()
def test_dynamic_sizes_compile_once_each_with_reasons_in_words():
    f = _compiled(dynamic=True)
    sizes = [4, 8, 4, 16, 8, 16]
    for n in sizes:
        x = torch.randn(3, n)
        w = torch.randn(n, 5)
        assert_same(f(x, w), _mlp(x, w))
    info = torch2xla.cache_info(f)
    assert len(info) == 1  # one Dynamo graph for every size
    g = info[0]
    assert (g.misses, g.hits, g.entries) == (3, 3, 3)
    assert g.recompile_reasons == ["x dim 1: 4 -> 8", "x dim 1: 4 -> 16"]
    assert [s.hits for s in g.signatures] == [1, 1, 1]
    assert "x dim 1=16" in g.signatures[2].signature
    assert "because: x dim 1: 4 -> 16" in str(info)


def test_signature_key_describes_changes():
    keys: list = []

    def backend(gm, example_inputs):
        key = SignatureKey(gm)

        def run(*args):
            keys.append((key, key(args)))
            return gm(*args)

        return run

    f = torch.compile(lambda x: x * 2, backend=backend, dynamic=True)
    f(torch.randn(4, 6))
    f(torch.randn(4, 12))
    (key, old), (same_key, new) = keys
    assert same_key is key
    assert key.labels[:3] == ("grad mode", "x dim 0", "x dim 1")
    assert key.describe(old, new) == ["x dim 1: 6 -> 12"]
    assert key.describe(old, (False, *old[1:])) == ["grad mode: on -> off"]
    assert key.format(new) == "grad mode on, x dim 0=4, x dim 1=12"


@torch.no_grad()
def test_lru_bound_evicts_and_says_so():
    f = _compiled(dynamic=True, options={"strict": True, "cache_size": 2})
    for n in [2, 3, 4, 2]:
        x = torch.randn(n, 8)
        assert_same(f(x, W), _mlp(x, W))
    g = torch2xla.cache_info(f)[0]
    assert (g.misses, g.entries, g.evictions) == (4, 2, 2)
    assert "evicted" in g.signatures[-1].reason and "cache_size=2" in g.signatures[-1].reason
    assert [s.cached for s in g.signatures] == [False, False, True, True]


@torch.no_grad()
def test_clear_caches_recompiles_with_reason():
    f = _compiled()
    x = torch.randn(4, 8)
    f(x, W)
    assert torch2xla.clear_caches() >= 1
    assert torch2xla.cache_info(f).entries == 0
    assert_same(f(x, W), _mlp(x, W))
    g = torch2xla.cache_info(f)[0]
    assert g.misses == 2
    assert g.signatures[1].reason == "caches were cleared (torch2xla.clear_caches())"


@torch.no_grad()
def test_threads_compile_each_signature_once():
    f = _compiled(dynamic=True)
    f(torch.randn(2, 8), W)  # Dynamo traces once; the threads only meet torch2xla's cache
    sizes = [3, 5, 7]
    barrier = threading.Barrier(6)
    errors: list = []

    @torch.no_grad()  # grad mode is per thread, and Dynamo guards it
    def worker(k: int) -> None:
        barrier.wait()
        for i in range(6):
            x = torch.randn(sizes[(i + k) % 3], 8)
            out = f(x, W)
            if not torch.allclose(out, _mlp(x, W), atol=1e-5):
                errors.append((k, i))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    g = torch2xla.cache_info(f)[0]
    assert g.misses == 1 + len(sizes)
    # Calls made while another thread traced ran eagerly (FX's tracing flag is global).
    assert 0 < g.hits <= 6 * 6 - len(sizes)


def test_dynamo_recompile_reason_is_recorded():
    f = _compiled()
    x = torch.randn(4, 8)
    f(x, W)
    f(x.clone().requires_grad_(), W)  # Dynamo guards requires_grad: a second graph
    info = torch2xla.cache_info(f)
    assert len(info) == 2
    assert info[0].dynamo_reason is None
    assert "requires_grad" in info[1].dynamo_reason
    assert "requires_grad" in info[1].signatures[0].reason


def test_cache_info_of_modules_and_errors():
    m = torch.nn.Linear(8, 3)
    cm = torch.compile(m, backend="xla")
    with torch.no_grad():
        cm(torch.randn(2, 8))
    assert torch2xla.cache_info(cm).misses == 1
    assert torch2xla.cache_info(_compiled()).misses == 0  # compiled, never called
    with pytest.raises(TypeError, match="not something torch.compile"):
        torch2xla.cache_info(m)


def test_logger_reports_compiles_and_recompiles(caplog):
    caplog.set_level(logging.INFO, logger="torch2xla")
    f = _compiled(dynamic=True)
    with torch.no_grad():
        f(torch.randn(2, 8), W)
        f(torch.randn(2, 8), W)
        f(torch.randn(3, 8), W)
    msgs = [r.getMessage() for r in caplog.records if r.name == "torch2xla"]
    assert len(msgs) == 2
    name = torch2xla.cache_info(f)[0].name
    assert msgs[0].startswith(f"{name}.s0 ") and ": compiled (" in msgs[0]
    assert "first call" in msgs[0]
    assert msgs[1].startswith(f"{name}.s1 ") and ": recompiled (" in msgs[1]
    assert "x dim 0: 2 -> 3" in msgs[1]


def test_log_env_var(monkeypatch):
    log = logging.getLogger("torch2xla")
    before_level, before_handlers = log.level, list(log.handlers)
    try:
        monkeypatch.setenv("TORCH2XLA_LOG", "0")
        _log.configure_from_env()
        assert log.handlers == before_handlers
        monkeypatch.setenv("TORCH2XLA_LOG", "debug")
        _log.configure_from_env()
        assert log.level == logging.DEBUG
        assert any(getattr(h, "_torch2xla", False) for h in log.handlers)
        monkeypatch.setenv("TORCH2XLA_LOG", "loud")
        with pytest.warns(UserWarning, match="TORCH2XLA_LOG"):
            _log.configure_from_env()
    finally:
        log.handlers[:] = before_handlers
        log.setLevel(before_level)


def test_importing_leaves_logging_alone_until_the_first_compile(tmp_path):
    """Issue 26: importing torch2xla set up its logger and a filter on Dynamo's logger (an
    import side effect); now the first compiled graph does, and TORCH2XLA_LOG works as before."""
    code = (
        "import logging, torch, torch2xla\n"
        "from torch2xla.guards import _log\n"
        "ours, dynamo = logging.getLogger('torch2xla'), logging.getLogger(\n"
        "    torch._dynamo.convert_frame.__name__)\n"
        "assert not ours.handlers and _log._FILTER not in dynamo.filters\n"
        "f = torch.compile(lambda x: x.sin(), backend='xla')\n"
        "f(torch.randn(3))\n"
        "assert ours.handlers and _log._FILTER in dynamo.filters\n"
    )
    env = {**os.environ, "TORCH2XLA_LOG": "info", "TORCH2XLA_CACHE_DIR": str(tmp_path)}
    env.pop("TORCH_LOGS", None)
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "[torch2xla] graph_0.s0 '<lambda>'" in res.stderr and ": compiled (" in res.stderr


@torch._dynamo.config.patch(recompile_limit=2)
def test_recompile_limit_fallback_warns():
    f = _compiled(dynamic=False)
    with torch.no_grad():
        for n in (2, 3):
            f(torch.randn(n, 8), W)
        x = torch.randn(4, 8)
        with pytest.warns(torch2xla.RecompileLimitWarning, match="dynamic=True") as rec:
            out = f(x, W)
    assert "runs in eager" in str(rec[0].message) or "eager PyTorch" in str(rec[0].message)
    assert rec[0].filename == __file__  # the user's call, not torch's logging
    assert_same(out, _mlp(x, W))  # eager now, still correct
    assert torch2xla.cache_info(f).misses == 2


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc(x)
        torch._dynamo.graph_break()
        return h.relu()


def test_graphs_are_named_by_the_users_module_or_function(caplog):
    """Logs and cache_info name the user's module or function, never Dynamo's wrapper frame."""
    caplog.set_level(logging.INFO, logger="torch2xla")
    seq = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 3)), backend="xla")
    net = torch.compile(_Net(), backend="xla")
    fn = _compiled()
    with torch.no_grad():
        seq(torch.randn(2, 8))
        net(torch.randn(2, 8))
        fn(torch.randn(2, 8), W)
    line = _Net.forward.__code__.co_firstlineno
    assert [g.frame for g in torch2xla.cache_info(seq)] == ["'Sequential' (torch.nn.Sequential)"]
    assert [g.frame for g in torch2xla.cache_info(net)] == [
        f"'_Net.forward' ({__file__}:{line})",
        f"'_Net.forward' ({__file__}:{line + 2}, after a graph break)",
    ]
    assert [g.frame for g in torch2xla.cache_info(fn)] == [
        f"'_mlp' ({__file__}:{_mlp.__code__.co_firstlineno})"
    ]
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "torch2xla")
    assert "external_utils" not in text and "'inner'" not in text
    assert ".s0 'Sequential' (torch.nn.Sequential): compiled (" in text


def _nonzero_sum(x):
    y = x.sin()
    return torch.nonzero(y).float().sum() + y


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_pieces_of_a_graph_cut_around_eager_ops_are_named_by_the_users_function(caplog):
    """A graph cut around a data-dependent op compiles its pieces as graphs of their own,
    after Dynamo's compile: their logs and cache_info named no function (``graph_3.s0:``)."""
    caplog.set_level(logging.INFO, logger="torch2xla")
    f = torch.compile(_nonzero_sum, backend="xla")
    x = torch.randn(5)
    with pytest.warns(torch2xla.FallbackWarning):
        assert_same(f(x), _nonzero_sum(x))
    frame = f"'_nonzero_sum' ({__file__}:{_nonzero_sum.__code__.co_firstlineno})"
    compiles = [r.getMessage() for r in caplog.records if r.name == "torch2xla"]
    compiles = [m for m in compiles if ": compiled (" in m]
    assert len(compiles) >= 2 and all(f".s0 {frame}: compiled (" in m for m in compiles), compiles


def test_torch_logs_shows_compiles_and_recompiles(tmp_path):
    """TORCH_LOGS, torch.compile's switch: "+torch2xla" logs our compiles with their stages,
    "recompiles" our per-size recompiles (which Dynamo's own recompile log never sees)."""
    code = (
        "import torch\n"
        "f = torch.compile(lambda x: x.sin() * 2, backend='xla', dynamic=True,\n"
        "                  options={'buckets': None})  # (one program per size: a recompile)\n"
        "f(torch.randn(3)); f(torch.randn(4))\n"
    )

    def stderr(setting: str) -> str:
        env = {**os.environ, "TORCH_LOGS": setting, "TORCH2XLA_CACHE_DIR": str(tmp_path)}
        env.pop("TORCH2XLA_LOG", None)
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
        )
        assert res.returncode == 0, res.stderr
        return res.stderr

    text = stderr("recompiles,+torch2xla")
    assert "graph_0.s0: lowering" in text  # +torch2xla (debug): the stages
    assert "graph_0.s0 '<lambda>'" in text and ": compiled (" in text
    # The per-size recompile goes to torch's recompiles log (torch prints its name).
    assert "[__recompiles] graph_0.s1 '<lambda>'" in text and "x dim 0: 3 -> 4" in text
