"""IR dumps: the option and the environment variable write every stage of every graph, one
folder per process, with an index of graphs, signatures, stages and files."""

from __future__ import annotations

import json
import re

import pytest
import torch
from torch import nn

from torch2xla.debug import _dump

aten = torch.ops.aten


@pytest.fixture(autouse=True)
def _fresh_runs(monkeypatch):
    # Each test is a new "process" as far as dumps go: its own run folder under its root.
    monkeypatch.setattr(_dump, "_runs", {})


def _run_dir(root):
    (run,) = root.iterdir()
    assert re.fullmatch(r"run-\d{8}-\d{6}-pid\d+(-\d+)?", run.name), run.name
    return run


def _graph_names(directory) -> set[str]:
    return {p.name.split(".")[0] for p in directory.iterdir() if p.name.startswith("graph_")}


def test_dump_option_writes_every_stage_of_an_inference_graph(tmp_path):
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU())
    x = torch.randn(4, 6)
    compiled = torch.compile(model, backend="xla", options={"dump_dir": str(tmp_path)})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    run = _run_dir(tmp_path)
    (graph,) = _graph_names(run)
    assert re.fullmatch(r"graph_\d+", graph)
    files = {p.name: p.read_text() for p in run.iterdir()}
    assert set(files) == {
        "index.json",
        "index.html",
        f"{graph}.dynamo.txt",
        f"{graph}.s0.aten.txt",
        f"{graph}.s0.inference.jaxpr.txt",
        f"{graph}.s0.inference.stablehlo.mlir",
        f"{graph}.s0.inference.hlo.txt",
        f"{graph}.s0.summary.txt",
    }
    assert "torch._C._nn.linear" in files[f"{graph}.dynamo.txt"]
    assert "torch.ops.aten.addmm.default" in files[f"{graph}.s0.aten.txt"]
    assert "dot_general" in files[f"{graph}.s0.inference.jaxpr.txt"]
    assert "stablehlo.dot_general" in files[f"{graph}.s0.inference.stablehlo.mlir"]
    assert "HloModule" in files[f"{graph}.s0.inference.hlo.txt"]
    summary = files[f"{graph}.s0.summary.txt"]
    assert f"{graph}.s0: inference, inputs (" in summary and "f32[4, 6]" in summary
    assert "aten.addmm.default  [xla]" in summary and "XLA cost:" in summary


def test_dump_index_lists_graphs_signatures_stages_and_files(tmp_path):
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU())
    compiled = torch.compile(model, backend="xla", options={"dump_dir": str(tmp_path)})
    with torch.no_grad():
        compiled(torch.randn(4, 6))
    run = _run_dir(tmp_path)
    index = json.loads((run / "index.json").read_text())
    assert index["torch"] == torch.__version__ and index["pid"] > 0
    (graph,) = index["graphs"]
    assert graph["frame"] == "'Sequential' (torch.nn.Sequential)"
    assert graph["dynamo"] == f"{graph['name']}.dynamo.txt"
    (sig,) = graph["signatures"]
    assert sig["name"] == f"{graph['name']}.s0" and sig["mode"] == "inference"
    assert sig["inputs"] == "self.0.weight: f32[5, 6]*, self.0.bias: f32[5]*, input: f32[4, 6]"
    assert [s["stage"] for s in sig["stages"]] == [
        "lowering",
        "passes",
        "tracing",
        "stablehlo",
        "xla",
    ]
    assert set(sig["programs"]["inference"]) == {"tracing", "stablehlo", "xla"}
    listed = {graph["dynamo"], *sig["files"].values(), *sig["programs"]["inference"].values()}
    assert listed | {"index.json", "index.html"} == {p.name for p in run.iterdir()}
    page = (run / "index.html").read_text()
    assert all(f"href='{name}'" in page for name in listed)


def test_two_runs_into_one_dump_dir_do_not_mix(tmp_path, monkeypatch):
    """Issue 27: a second model's graph_0.s0.* landed beside the first run's stale files."""

    def first(x):
        return (x @ x.T).relu()

    def second(x):
        return x.sin() * 2

    x = torch.randn(3, 3, requires_grad=True)
    torch.compile(first, backend="xla", options={"dump_dir": tmp_path})(x).sum().backward()
    monkeypatch.setattr(_dump, "_runs", {})  # a new process, as far as dumps go
    with torch.no_grad():
        torch.compile(second, backend="xla", options={"dump_dir": tmp_path})(x)
    runs = sorted(tmp_path.iterdir())
    assert len(runs) == 2
    programs = []
    for run in runs:
        (graph,) = json.loads((run / "index.json").read_text())["graphs"]
        programs.append(sorted(graph["signatures"][0]["programs"]))
        assert _graph_names(run) == {graph["name"]}
    assert sorted(programs) == [["backward", "forward"], ["inference"]]


def test_dump_env_var_writes_forward_and_backward_per_signature(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH2XLA_DUMP_DIR", str(tmp_path))
    model = nn.Linear(3, 4)
    compiled = torch.compile(model, backend="xla", dynamic=False)
    for batch in (2, 5):  # two signatures: s0 and s1 of one graph, or two graphs
        x = torch.randn(batch, 3)
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
        out.sum().backward()
    run = _run_dir(tmp_path)
    names = sorted(p.name for p in run.iterdir())
    for program in ("forward", "backward"):
        assert sum(n.endswith(f".{program}.hlo.txt") for n in names) == 2, names
        assert sum(n.endswith(f".{program}.jaxpr.txt") for n in names) == 2, names
    summaries = [p.read_text() for p in run.glob("*.summary.txt")]
    assert sorted("f32[2, 3]" in s for s in summaries) == [False, True]
    assert all(": training, inputs" in s for s in summaries)


def test_dump_of_a_graph_with_eager_ops_lists_them(tmp_path):
    def f(x):
        return torch.sin(x).cos() + 1

    x = torch.randn(5)
    options = {"dump_dir": tmp_path, "eager_ops": [aten.sin.default]}
    out = torch.compile(f, backend="xla", options=options)(x)
    torch.testing.assert_close(out, f(x))
    run = _run_dir(tmp_path)
    (summary,) = run.glob("*.s0.summary.txt")
    text = summary.read_text()
    assert ": split, inputs" in text
    assert "aten.sin.default  [eager]  listed in options['eager_ops']" in text
    assert "torch.sin(x).cos() + 1" in text  # the user's source line
    assert "XLA partition, compiled on first call" in text  # rewritten after the partition
    (aten_dump,) = run.glob("*.s0.aten.txt")
    assert "aten.sin.default" in aten_dump.read_text()
    # The XLA partition's programs are dumped and indexed too.
    (graph,) = json.loads((run / "index.json").read_text())["graphs"]
    (sig,) = graph["signatures"]
    assert sig["partitions"] == ["fused_0"]
    assert set(sig["programs"]) == {"fused_0.inference"}
    assert (run / sig["programs"]["fused_0.inference"]["xla"]).is_file()
