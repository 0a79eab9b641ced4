"""Signatures restored from the persistent cache behave exactly as the ones compiled fresh:
what a record does not hold (a backward that keeps the graph, a ``create_graph`` backward) is
built later under the torch state of the call that restored it, not the backward's (grad mode
off: ``.detach()`` and ``no_grad`` stop points were lost, and the rebuilt forward kept other
residuals than the stored one, an IndexError). Two processes on one cache directory (cold,
then warm), each comparing every scenario with eager (``_pcache_worker.py``)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import torch

from torch2xla.runtime import _build_state, _stored_key

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(cache: pathlib.Path) -> dict:
    env = dict(os.environ, TORCH2XLA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "_pcache_worker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_restored_signatures_match_eager_where_the_rest_is_built_later(tmp_path):
    cold = _run(tmp_path)
    assert cold["restored"] == 0
    assert all(d is None for d in cold["diffs"].values()), cold["diffs"]
    warm = _run(tmp_path)
    assert warm["restored"] > 0, warm
    assert all(d is None for d in warm["diffs"].values()), warm["diffs"]


def test_build_state_puts_back_the_state_and_restores_the_callers():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        state = _build_state.BuildState()  # grad on, autocast on
    key = _stored_key._build_state.describe()
    with torch.no_grad():
        assert not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
        with state:
            assert torch.is_grad_enabled() and torch.is_autocast_enabled("cpu")
            assert torch.get_autocast_dtype("cpu") == torch.bfloat16
            with state:  # (re-entered: the same state, then the outer one's again)
                assert torch.is_grad_enabled()
            assert torch.is_autocast_enabled("cpu")
        assert not torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16  # (autocast's default)
    assert _stored_key._build_state.describe() == key


def test_build_state_describes_every_switch_it_sets():
    # the key (``_stored_key``) and the state put back are one table
    described = _build_state.describe()
    for name, _, _ in _build_state.SWITCHES:
        assert repr(name) in described
    assert "inference_mode" in described
