"""The persistent compilation cache: reused by a second process, isolated by versions,
switchable, and corrupt entries detected and recompiled."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import zlib

import jax
import pytest
import torch

import torch2xla
from torch2xla.guards import _persistent

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run_worker(cache_root: pathlib.Path) -> dict:
    env = dict(os.environ, TORCH2XLA_CACHE_DIR=str(cache_root), PYTHONPATH=str(ROOT))
    env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "_persistent_worker.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _entries(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in (directory / "xla").iterdir() if p.name.endswith("-cache"))


def test_second_process_hits_and_corrupt_entries_recompile(tmp_path):
    first = _run_worker(tmp_path)
    directory = tmp_path / _persistent.version_tag()
    assert first["dir"] == str(directory)
    assert first["xla_compiles"] >= 1 and first["max_diff"] < 1e-5 and not first["warnings"]
    entries = _entries(directory)
    manifest = json.loads((directory / "checksums.json").read_text())
    assert entries and {e.name for e in entries} <= set(manifest)

    second = _run_worker(tmp_path)
    assert second["xla_compiles"] == 0 and second["hits"] >= 1  # XLA compiled nothing
    assert second["max_diff"] < 1e-5 and not second["warnings"]

    for e in entries:  # same size, garbage in the middle
        data = bytearray(e.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 16] = os.urandom(16)
        e.write_bytes(bytes(data))
    third = _run_worker(tmp_path)
    assert third["xla_compiles"] >= 1 and third["max_diff"] < 1e-5
    assert any("corrupt persistent cache entr" in w for w in third["warnings"])
    assert _persistent.verify(directory) == []  # rewritten and recorded, all sound again
    assert _entries(directory)


def test_verify_deletes_unreadable_and_changed_entries(tmp_path):
    xla = tmp_path / "xla"
    xla.mkdir()
    good = zlib.compress(b"executable" * 100)
    (xla / "a-cache").write_bytes(good)
    (xla / "b-cache").write_bytes(good)
    (xla / "c-cache").write_bytes(good[:-7])  # truncated, never recorded: does not decompress
    with pytest.warns(torch2xla.PersistentCacheWarning, match="1 corrupt"):
        assert _persistent.verify(tmp_path) == ["c-cache"]
    (xla / "b-cache").write_bytes(good[:-3] + b"xyz")  # recorded, then changed
    with pytest.warns(torch2xla.PersistentCacheWarning):
        assert _persistent.verify(tmp_path) == ["b-cache"]
    assert sorted(p.name for p in xla.iterdir()) == ["a-cache"]
    assert _persistent.verify(tmp_path) == []


def test_versions_isolate_entries(monkeypatch):
    tag = _persistent.version_tag()
    assert f"torch-{torch.__version__}" in tag and f"jax-{jax.__version__}" in tag
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert _persistent.version_tag() != tag
    monkeypatch.setattr(_persistent, "torch2xla_version", lambda: "0.0.0-other")
    assert "torch2xla-0.0.0-other" in _persistent.version_tag()


@pytest.fixture
def restore_persistent_cache(monkeypatch):
    yield
    monkeypatch.undo()
    monkeypatch.setattr(_persistent, "_explicit", _persistent._UNSET)
    _persistent.activate()


def test_switches(tmp_path, monkeypatch, restore_persistent_cache):
    chosen = torch2xla.set_persistent_cache(tmp_path)
    assert chosen == tmp_path / _persistent.version_tag() == torch2xla.persistent_cache_dir()
    assert jax.config.jax_compilation_cache_dir == str(chosen / "xla")
    assert torch2xla.set_persistent_cache(None) is None
    assert jax.config.jax_compilation_cache_dir is None
    assert torch2xla.persistent_cache_dir() is None

    monkeypatch.setattr(_persistent, "_explicit", _persistent._UNSET)
    monkeypatch.setenv("TORCH2XLA_PERSISTENT_CACHE", "0")
    _persistent.activate()
    assert torch2xla.persistent_cache_dir() is None
    monkeypatch.setenv("TORCH2XLA_PERSISTENT_CACHE", "1")
    monkeypatch.setenv("TORCH2XLA_CACHE_DIR", str(tmp_path / "env"))
    assert torch2xla.persistent_cache_dir() == tmp_path / "env" / _persistent.version_tag()


def test_users_own_jax_cache_dir_wins(tmp_path, restore_persistent_cache):
    torch2xla.set_persistent_cache(None)
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
    try:
        torch2xla.set_persistent_cache(tmp_path / "ours")
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
        assert torch2xla.persistent_cache_dir() == tmp_path / "mine"
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
