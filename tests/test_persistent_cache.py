"""The persistent cache: a second process skips the export, JAX's tracing and XLA's compile;
entries verify themselves (a swapped, torn or corrupt entry is never loaded); a moved cache
still hits; an unusable location warns once and the run goes on; files are not
world-writable; keys change with everything a program depends on."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import warnings

import jax
import pytest
import torch

import torch2xla
from torch2xla.guards import _persistent
from torch2xla.runtime import _stored_key

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOL = 1e-5  # float32 round-off: the same programs as eager's ops, fused differently


def _run_worker(cache_root: pathlib.Path, **config) -> dict:
    env = dict(os.environ, TORCH2XLA_CACHE_DIR=str(cache_root), PYTHONPATH=str(ROOT))
    env.pop("TORCH2XLA_PERSISTENT_CACHE", None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "_persistent_worker.py"), json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(d < TOL for d in result["diffs"].values()), result
    return result


def _files(root: pathlib.Path) -> dict[pathlib.Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _sound(root: pathlib.Path) -> bool:
    """Every entry under ``root`` reads back whole and under its own name."""
    store = _persistent.Store(root / _persistent.version_tag())
    return all(
        store.read(p.parent.name, p.name) is not None for p in root.rglob("*") if p.is_file()
    )


def test_warm_start_keeps_the_runtime_checks(tmp_path):
    # An embedding checks its indices at run time: its programs return the checks' status,
    # and a restored program must raise eager's IndexError, naming the op and the user's line.
    first = _run_worker(tmp_path, models=["embed"], train=True)
    warm = _run_worker(tmp_path, models=["embed"], train=True)
    assert warm["exports"] == 0 and warm["xla_compiles"] == 0, warm
    for run in (first, warm):
        for mode in ("inference", "training"):
            kind, message = run["errors"][f"embed {mode}"]
            assert kind == "OpIndexError", run["errors"]
            assert "index out of range" in message and "_persistent_worker.py" in message
    assert warm["errors"] == first["errors"]


def test_warm_start_in_a_moved_cache_skips_export_tracing_and_compile(tmp_path):
    first = _run_worker(tmp_path / "a", train=True)
    assert first["dir"] == str(tmp_path / "a" / _persistent.version_tag())
    assert first["exports"] == 2 and first["xla_compiles"] >= 3 and not first["warnings"]
    shutil.move(tmp_path / "a", tmp_path / "b")  # keys hold no path: a moved cache hits
    second = _run_worker(tmp_path / "b", train=True)
    # inference and training graphs: no ATen export, no XLA compile, nothing traced again
    assert second["exports"] == 0 and second["xla_compiles"] == 0, second
    assert second["loaded"] >= 3 and not second["warnings"] and not second["logged"]


def test_split_backward_after_a_warm_start(tmp_path):
    split = {"split_backward": 0.001}  # MiB per segment: several segments even here
    first = _run_worker(tmp_path, train=True, options=split)
    warm = _run_worker(tmp_path, train=True, options=split)
    assert warm["exports"] == 0 and warm["xla_compiles"] == 0, warm
    assert warm["loaded"] >= first["xla_compiles"] >= 4  # inference, forward, 2+ segments


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("split", [False, True])
def test_warm_start_on_cuda(tmp_path, split):
    options = {"split_backward": 0.001 if split else False}
    _run_worker(tmp_path, train=True, retain=True, device="cuda", options=options)
    warm = _run_worker(tmp_path, train=True, retain=True, device="cuda", options=options)
    assert warm["exports"] == 1 and warm["xla_compiles"] == 0, warm  # (1: retain_graph)


def test_backward_that_keeps_the_graph_after_a_warm_start(tmp_path):
    _run_worker(tmp_path, train=True, retain=True)
    warm = _run_worker(tmp_path, train=True, retain=True)
    # retain_graph=True is not in the record: that graph is exported once, nothing compiles
    assert warm["exports"] == 1 and warm["xla_compiles"] == 0, warm


def test_unusable_backward_entry_after_a_warm_forward(tmp_path):
    """The backward's executables load in the background; one found corrupt then is built the
    usual way, on the residuals of the stored forward that already ran."""
    import pickle

    _run_worker(tmp_path, train=True)
    store = _persistent.Store(tmp_path / _persistent.version_tag())
    records = [
        pickle.loads(store.read(_persistent.GRAPHS, p.name))
        for p in (store.path / _persistent.GRAPHS).iterdir()
    ]
    (training,) = [r.training for r in records if r.training is not None]
    entry = store.path / _persistent.PROGRAMS / training.backward.key
    data = entry.read_bytes()
    entry.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    warm = _run_worker(tmp_path, train=True)  # (gradients against eager checked there)
    assert warm["exports"] == 1 and warm["xla_compiles"] == 1, warm
    assert any("do not match its digest" in m for m in warm["logged"]), warm["logged"]


def test_swapped_entries_are_never_loaded(tmp_path):
    """Two programs' entries exchanged (names kept, contents swapped; no manifest to consult):
    the next process still computes each function, and logs what it ignored."""
    _run_worker(tmp_path, models=["sin", "cos"])
    for kind in (_persistent.GRAPHS, _persistent.PROGRAMS):
        a, b = sorted((tmp_path / _persistent.version_tag() / kind).iterdir())
        data_a, data_b = a.read_bytes(), b.read_bytes()
        a.write_bytes(data_b)
        b.write_bytes(data_a)
    again = _run_worker(tmp_path, models=["sin", "cos"])  # (diffs against eager checked there)
    assert again["exports"] == 2 and again["xla_compiles"] == 2, again
    assert sum("ignored: it is the entry of another program" in m for m in again["logged"]) >= 2
    assert _sound(tmp_path)  # rewritten


def test_a_constant_of_the_model_is_in_the_key(tmp_path):
    """Two processes compile one model class whose Python float attribute differs (Dynamo
    passes it as a 0-d tensor the export specializes): no record serves the other."""
    _run_worker(tmp_path, scale=2.0, train=True)
    other = _run_worker(tmp_path, scale=3.0, train=True)  # (values against eager checked there)
    assert other["exports"] == 2, other


def test_torn_and_corrupt_entries_are_recompiled(tmp_path):
    _run_worker(tmp_path)
    for i, (p, data) in enumerate(sorted(_files(tmp_path).items())):
        if i % 2:
            p.write_bytes(data[: len(data) // 2])  # torn
        else:
            p.write_bytes(data[:-9] + bytes(b ^ 0x55 for b in data[-9:]))  # same size, garbled
    again = _run_worker(tmp_path)
    assert again["exports"] == 1 and again["xla_compiles"] == 1, again
    assert sum("persistent cache entry" in m for m in again["logged"]) >= 1
    assert sum("corrupt or mismatched" in w for w in again["warnings"]) == 1
    assert _sound(tmp_path)


def test_key_differs_for_every_input_of_the_program(monkeypatch):
    captured = []

    def capture(gm, example):
        captured.append((gm, list(example)))
        return gm.forward

    def key_of(fn, *args, options=None):
        captured.clear()
        torch._dynamo.reset()
        torch.compile(fn, backend=capture)(*args)
        ((gm, example),) = captured
        return _stored_key.graph_key(gm, example, torch2xla.Options.parse(None, options))

    x = torch.randn(4, 3)
    base = key_of(lambda t: t * 2.0, x)
    assert base is not None and base == key_of(lambda t: t * 2.0, x)  # deterministic
    others = {
        "constant": key_of(lambda t: t * 3.0, x),
        "op": key_of(lambda t: t / 2.0, x),
        "dtype": key_of(lambda t: t * 2.0, x.double()),
        "shape": key_of(lambda t: t * 2.0, torch.randn(4, 4)),
        "strides": key_of(lambda t: t * 2.0, torch.randn(3, 4).t()),
        "requires_grad": key_of(lambda t: t * 2.0, x.clone().requires_grad_()),
        "options": key_of(lambda t: t * 2.0, x, options={"remat": True}),
        "xla options": key_of(
            lambda t: t * 2.0, x, options={"compiler_options": {"xla_cpu_enable_fast_math": True}}
        ),
    }
    with torch.no_grad():
        others["grad mode"] = key_of(lambda t: t * 2.0, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        others["autocast"] = key_of(lambda t: t * 2.0, x)
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        others["matmul precision"] = key_of(lambda t: t * 2.0, x)
    finally:
        torch.set_float32_matmul_precision(prev)
    with monkeypatch.context() as m:
        m.setattr(_stored_key, "_source_digest", lambda: "another torch2xla")
        others["torch2xla source"] = key_of(lambda t: t * 2.0, x)
    with monkeypatch.context() as m:
        m.setattr(torch, "__version__", "9.9.9")
        others["torch version"] = key_of(lambda t: t * 2.0, x)
    with monkeypatch.context() as m:
        m.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
        others["XLA flags"] = key_of(lambda t: t * 2.0, x)
    assert None not in others.values()
    assert base not in others.values(), [k for k, v in others.items() if v == base]
    assert len(set(others.values())) == len(others)


def test_the_source_digest_reads_every_module_of_the_package(monkeypatch):
    # A changed lowering (ops/) must change the key: the digest read runtime/ alone once the
    # key's module moved there, and a record would then restore a stale executable.
    read = []
    real = pathlib.Path.read_bytes
    monkeypatch.setattr(pathlib.Path, "read_bytes", lambda self: read.append(self) or real(self))
    _stored_key._source_digest.__wrapped__()
    package = pathlib.Path(torch2xla.__file__).resolve().parent
    assert set(read) == set(package.rglob("*.py"))


def test_key_holds_every_option_that_can_change_a_program():
    """Options added later are in the key too (only cache_size and dump_dir are left out)."""
    import dataclasses

    gm = torch.fx.symbolic_trace(lambda t: t * 2.0)
    x = torch.randn(3)
    base = torch2xla.Options.parse()
    key = _stored_key.graph_key(gm, [x], base)
    for field in dataclasses.fields(base):
        other = dataclasses.replace(base, **{field.name: "another value"})
        if field.name in ("cache_size", "dump_dir"):
            assert _stored_key.graph_key(gm, [x], other) == key
        elif field.name == "passes":
            assert _stored_key.graph_key(gm, [x], other) is None  # user code: never recorded
        else:
            assert _stored_key.graph_key(gm, [x], other) != key, field.name


def test_key_holds_constant_tensors_and_user_functions():
    captured = []

    def capture(gm, example):
        captured.append((gm, list(example)))
        return gm.forward

    def key_of(fn, *args):
        captured.clear()
        torch._dynamo.reset()
        torch.compile(fn, backend=capture)(*args)
        ((gm, example),) = captured
        return _stored_key.graph_key(gm, example, torch2xla.Options.parse())

    x = torch.randn(3)
    a = key_of(lambda t: t + torch.tensor([1.0, 2.0, 3.0]), x)
    b = key_of(lambda t: t + torch.tensor([1.0, 2.0, 4.0]), x)
    assert None not in (a, b) and a != b


@pytest.fixture
def fresh_cache(monkeypatch):
    """Restores the settings after a test that changes them."""
    yield
    monkeypatch.undo()
    _persistent._explicit = _persistent._UNSET
    _persistent._wanted_path = None
    _persistent._store = None


def _compile_and_check(scale: float) -> None:
    f = torch.compile(lambda t: (t * scale).sin(), backend="xla")
    x = torch.randn(5)
    torch.testing.assert_close(f(x), (x * scale).sin())


def _unusable_locations(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    return {"a file": a_file, "under a file": a_file / "cache", "/proc": pathlib.Path("/proc/x")}


@pytest.mark.parametrize("where", ["a file", "under a file", "/proc"])
def test_unusable_location_warns_once_and_runs(tmp_path, fresh_cache, where):
    path = _unusable_locations(tmp_path)[where]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch2xla.set_persistent_cache(path) is None
        _compile_and_check(2.0)
        _compile_and_check(3.0)
    ours = [w for w in caught if issubclass(w.category, torch2xla.PersistentCacheWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert str(path) in str(ours[0].message) and "without it" in str(ours[0].message)
    assert ours[0].filename == __file__  # the user's line, not torch2xla's


@pytest.mark.parametrize("error", [errno.EROFS, errno.EACCES])
def test_read_only_location_warns_once_and_runs(tmp_path, fresh_cache, monkeypatch, error):
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if str(path).startswith(str(tmp_path)) and flags & os.O_CREAT:
            raise OSError(error, os.strerror(error), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch2xla.set_persistent_cache(tmp_path)
        _compile_and_check(2.0)
        _compile_and_check(3.0)
    ours = [w for w in caught if issubclass(w.category, torch2xla.PersistentCacheWarning)]
    assert len(ours) == 1 and os.strerror(error) in str(ours[0].message)
    assert ours[0].filename == __file__


def test_full_disk_warns_once_and_runs(tmp_path, fresh_cache, monkeypatch):
    torch2xla.set_persistent_cache(tmp_path)
    real_write = os.write

    def full(fd, data):
        if len(data) > 100:  # entries (the probe of the directory writes 2 bytes)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compile_and_check(2.0)
        _compile_and_check(3.0)
    ours = [w for w in caught if issubclass(w.category, torch2xla.PersistentCacheWarning)]
    assert len(ours) == 1 and "no space left" in str(ours[0].message), [
        str(w.message) for w in caught
    ]
    assert ours[0].filename == __file__
    assert torch2xla.persistent_cache_dir() is None  # off for the rest of the process
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == [], leftovers  # no torn temporary files


def test_cache_directory_removed_while_running(tmp_path, fresh_cache):
    torch2xla.set_persistent_cache(tmp_path / "c")
    _compile_and_check(2.0)
    shutil.rmtree(tmp_path / "c")  # a user clearing the cache meanwhile
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.PersistentCacheWarning)
        _compile_and_check(3.0)
    assert list((tmp_path / "c").rglob("*/programs/*"))


def test_files_are_not_world_writable_whatever_the_umask(tmp_path, fresh_cache):
    old = os.umask(0)
    try:
        torch2xla.set_persistent_cache(tmp_path / "new" / "cache")
        _compile_and_check(2.0)
    finally:
        os.umask(old)
    made = [p for p in (tmp_path / "new").rglob("*")] + [tmp_path / "new"]
    assert any(p.is_file() for p in made)
    writable = [p for p in made if p.stat().st_mode & stat.S_IWOTH]
    assert writable == []


def test_versions_isolate_entries(monkeypatch):
    tag = _persistent.version_tag()
    assert f"torch-{torch.__version__}" in tag and f"jax-{jax.__version__}" in tag
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert _persistent.version_tag() != tag
    monkeypatch.setattr(_persistent, "torch2xla_version", lambda: "0.0.0-other")
    assert "torch2xla-0.0.0-other" in _persistent.version_tag()


def test_switches(tmp_path, monkeypatch, fresh_cache):
    chosen = torch2xla.set_persistent_cache(tmp_path)
    assert chosen == tmp_path / _persistent.version_tag() == torch2xla.persistent_cache_dir()
    assert torch2xla.set_persistent_cache(None) is None
    assert torch2xla.persistent_cache_dir() is None

    monkeypatch.setattr(_persistent, "_explicit", _persistent._UNSET)
    monkeypatch.setenv("TORCH2XLA_PERSISTENT_CACHE", "0")
    assert torch2xla.persistent_cache_dir() is None
    monkeypatch.setenv("TORCH2XLA_PERSISTENT_CACHE", "1")
    monkeypatch.setenv("TORCH2XLA_CACHE_DIR", str(tmp_path / "env"))
    assert torch2xla.persistent_cache_dir() == tmp_path / "env" / _persistent.version_tag()


def test_jax_cache_settings_are_left_alone(tmp_path, fresh_cache):
    before = jax.config.jax_compilation_cache_dir
    torch2xla.set_persistent_cache(tmp_path)
    _compile_and_check(2.0)
    assert jax.config.jax_compilation_cache_dir == before


_LOOKUP = """
import torch


def lookup(table, i):
    rows = table * 2
    return rows[i]  # {tag}
"""


def _load(path: pathlib.Path, name: str, padding: int):
    import importlib.util

    path.write_text("\n" * padding + _LOOKUP.format(tag=name))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lookup


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_a_restored_check_names_the_line_of_the_code_that_calls_it(tmp_path, fresh_cache, train):
    """Two files hold the same function at different lines: the graph key holds no source
    line, so the second one's call restores the first one's record; its runtime check must
    name the second file's line."""
    torch2xla.set_persistent_cache(tmp_path / "cache")
    first = _load(tmp_path / "first.py", "first", padding=0)
    second = _load(tmp_path / "second.py", "second", padding=7)
    table = torch.randn(4, 3, requires_grad=train)
    good = torch.tensor([1, 3])
    out = torch.compile(first, backend="xla")(table, good)
    if train:
        out.sum().backward()  # (a training record is written at the first freed backward)
    torch._dynamo.reset()
    hits = _persistent.hits()
    with pytest.raises(torch2xla.OpIndexError) as info:
        torch.compile(second, backend="xla")(table, torch.tensor([1, 9]))
    assert _persistent.hits() > hits  # restored, not built again
    message = str(info.value)
    assert f"{tmp_path / 'second.py'}:14" in message and "# second" in message, message
    assert "first.py" not in message, message
    assert info.value.source.startswith(str(tmp_path / "second.py")), info.value.source


def test_grad_enabled_inside_a_restored_inference_program(tmp_path, fresh_cache):
    """Called under no_grad with ``torch.enable_grad()`` inside, a graph's record holds an
    inference program; its restored program differentiated the outputs with no connections
    found (``StoredProgram`` had no ``connected``: AttributeError in the backward)."""
    torch2xla.set_persistent_cache(tmp_path / "cache")
    w = torch.randn(4, requires_grad=True)

    def f(x):
        with torch.enable_grad():
            return (x * w).exp().sum()

    x = torch.randn(3, 4)

    def run(compiled: bool):
        torch._dynamo.reset()
        with torch.no_grad():
            out = torch.compile(f, backend="xla")(x) if compiled else f(x)
        return out.detach(), torch.autograd.grad(out, w)[0]

    want = run(compiled=False)
    torch.testing.assert_close(run(compiled=True), want)  # (stored)
    hits = _persistent.hits()
    torch.testing.assert_close(run(compiled=True), want)  # (restored)
    assert _persistent.hits() > hits


def test_programs_of_one_text_with_arguments_grouped_otherwise(tmp_path, fresh_cache):
    """``y.copy_(z * 2)`` differentiated in ``y`` and ``z``, then in ``z`` alone: jit drops
    the unused ``y`` from both, whose StableHLO texts are then the same; the stored executable
    maps its parameters to the first one's arguments and must not serve the second."""
    torch2xla.set_persistent_cache(tmp_path / "cache")

    def fn(y, z):
        return y.copy_(z * 2)

    w, z = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    torch.compile(fn, backend="xla")(w * 1, z)
    torch._dynamo.reset()
    y, z = torch.randn(3), torch.randn(3, requires_grad=True)
    out = torch.compile(fn, backend="xla")(y, z)
    torch.testing.assert_close(out.detach(), z.detach() * 2)


def test_double_backward_through_a_restored_training_program(tmp_path, fresh_cache):
    """create_graph=True through a restored training program: its vjp program reads eager's
    autograd graph of the ATen graph, which a record does not hold (``StoredProgram`` had no
    ``output_metas``: AttributeError '_graph_metas' in every warm start's double backward)."""
    torch2xla.set_persistent_cache(tmp_path / "cache")

    def f(x, w):
        return (x.sin() * w).sum()

    def run(compiled: bool, create_graph: bool):
        torch._dynamo.reset()
        x, w = (torch.linspace(-1, 1, 5).add(s).requires_grad_() for s in (0.0, 0.5))
        out = torch.compile(f, backend="xla")(x, w) if compiled else f(x, w)
        if not create_graph:  # (a training record is written at the first freed backward)
            out.backward()
            return x.grad, w.grad
        gx, gw = torch.autograd.grad(out, [x, w], create_graph=True)
        (gx.square().sum() + (gw * gx).sum()).backward()
        return gx.detach(), gw.detach(), x.grad, w.grad

    torch.testing.assert_close(run(True, False), run(False, False))  # (stored)
    hits = _persistent.hits()
    torch.testing.assert_close(run(True, True), run(False, True))  # (restored)
    assert _persistent.hits() > hits
