"""IR dumps: the option and the environment variable write every stage of every graph."""

from __future__ import annotations

import re

import torch
from torch import nn

aten = torch.ops.aten


def _graph_names(directory) -> set[str]:
    return {p.name.split(".")[0] for p in directory.iterdir()}


def test_dump_option_writes_every_stage_of_an_inference_graph(tmp_path):
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU())
    x = torch.randn(4, 6)
    compiled = torch.compile(model, backend="xla", options={"dump_dir": str(tmp_path)})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    (graph,) = _graph_names(tmp_path)
    assert re.fullmatch(r"graph_\d+", graph)
    files = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert set(files) == {
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


def test_dump_env_var_writes_forward_and_backward_per_signature(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH2XLA_DUMP_DIR", str(tmp_path))
    model = nn.Linear(3, 4)
    compiled = torch.compile(model, backend="xla", dynamic=False)
    for batch in (2, 5):  # two signatures: s0 and s1 of one graph, or two graphs
        x = torch.randn(batch, 3)
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
        out.sum().backward()
    names = sorted(p.name for p in tmp_path.iterdir())
    for program in ("forward", "backward"):
        assert sum(n.endswith(f".{program}.hlo.txt") for n in names) == 2, names
        assert sum(n.endswith(f".{program}.jaxpr.txt") for n in names) == 2, names
    summaries = [p.read_text() for p in tmp_path.glob("*.summary.txt")]
    assert sorted("f32[2, 3]" in s for s in summaries) == [False, True]
    assert all(": training, inputs" in s for s in summaries)


def test_dump_of_a_graph_with_eager_ops_lists_them(tmp_path):
    def f(x):
        return torch.sin(x).cos() + 1

    x = torch.randn(5)
    options = {"dump_dir": tmp_path, "eager_ops": [aten.sin.default]}
    out = torch.compile(f, backend="xla", options=options)(x)
    torch.testing.assert_close(out, f(x))
    (summary,) = tmp_path.glob("*.s0.summary.txt")
    text = summary.read_text()
    assert ": split, inputs" in text
    assert "aten.sin.default  [eager]  listed in options['eager_ops']" in text
    assert "torch.sin(x).cos() + 1" in text  # the user's source line
    (aten_dump,) = tmp_path.glob("*.s0.aten.txt")
    assert "aten.sin.default" in aten_dump.read_text()
