"""torch2xla.explain reports, compile stages and progress, profiler ranges, XLA cost analysis."""

from __future__ import annotations

import contextlib
import copy
import html
import io
import logging
import os
import pathlib
import re
import sys
import types

import jax
import pytest
import torch
from torch import nn

import torch2xla
from torch2xla.debug import _stages

aten = torch.ops.aten


class BreakAndFallback(nn.Module):
    """Two graphs (a graph break at print) and one op forced to eager PyTorch."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x):
        h = self.bn(self.fc(x)).relu()
        print("graph break here")
        return torch.sin(h).sum(-1)  # sin is listed in eager_ops below


def _explained(x, **options):
    model = BreakAndFallback().train()
    ref_model = copy.deepcopy(model)
    report = torch2xla.Explanation(model, options={"eager_ops": [aten.sin], **options}).run(x)
    return model, ref_model, report


def test_explain_reports_graphs_breaks_ops_and_times(capsys):
    x = torch.randn(4, 8)
    model, ref_model, report = _explained(x)
    ref = ref_model(x)
    # The function ran once, compiled, with eager's values and side effects (BatchNorm stats).
    torch.testing.assert_close(report.output, ref)
    assert model.bn.num_batches_tracked.item() == 1
    torch.testing.assert_close(model.bn.running_mean, ref_model.bn.running_mean)
    assert capsys.readouterr().out.count("graph break here") == 2  # ours once, eager once

    assert len(report.graphs) == 2
    assert len(report.breaks) == 1
    brk = report.breaks[0]
    assert "print" in brk.reason
    assert any("test_explain.py" in f and 'print("graph break here")' in f for f in brk.frames)

    first, second = report.graphs
    (rec0,) = first.records
    (rec1,) = second.records
    assert rec0.mode == "training" and rec1.mode == "split"
    assert {op.target for op in rec0.ops} >= {"aten.addmm.default", "aten.relu.default"}
    assert all(op.where == "xla" for op in rec0.ops)
    (sin,) = [op for op in rec1.ops if op.target == "aten.sin.default"]
    assert sin.where == "eager"
    assert sin.reason == "listed in options['eager_ops']"
    assert "test_explain.py" in sin.source and "torch.sin(h)" in sin.source
    # Every stage was timed; Dynamo's capture is attributed to each graph.
    assert set(rec0.times) == set(_stages.STAGES) - {"capture"}
    assert all(t > 0 for t in rec0.times.values())
    assert first.capture_time > 0 and second.capture_time > 0
    assert rec0.cost["flops"] > 0 and rec0.cost["bytes accessed"] > 0
    assert first.cache_entries == 1

    text = str(report)
    for needle in (
        "Dynamo captured 2 graphs with 1 graph break",
        'print("graph break here")',
        f"{first.name}.s0: training",
        "aten.sin.default  [eager]  listed in options['eager_ops']",
        "torch.sin(h)",
        "compile time: lowering",
        "XLA cost:",
        "Dynamo recompiles: none",
    ):
        assert needle in text, needle
    page = report._repr_html_()
    assert page.startswith("<div") and "<table>" in page
    assert "aten.sin.default" in page and "graph break here" in page
    assert "<b>Failed" in page or "<b>" in page


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z0-9_.]+", text))


def _html_words(page: str) -> set[str]:
    return _words(html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_explain_split_graph_names_inputs_and_renders_its_text_as_html():
    """A split graph's XLA partitions compile during explain's call, timed into its record;
    inputs carry the user's names; the HTML says what the text says (and "1 entry")."""
    x = torch.randn(4, 8)
    model, ref_model, report = _explained(x)
    torch.testing.assert_close(report.output, ref_model(x))
    first, second = report.graphs
    (rec0,), (rec1,) = first.records, second.records
    assert rec0.inputs.startswith("self.fc.weight: f32[16, 8]*, self.fc.bias: f32[16]*")
    assert "x: f32[4, 8]" in rec0.inputs
    assert rec1.inputs.startswith("h: f32[4, 16]*")
    assert first.frame.startswith("'BreakAndFallback.forward' (") and __file__ in first.frame
    assert second.frame.endswith(", after a graph break)")
    assert f"{first.name} {first.frame}: " in str(report)
    assert rec1.mode == "split" and list(rec1.partitions.values()) == [True]
    assert {"lowering", "tracing", "stablehlo", "xla"} <= set(rec1.times)
    assert rec1.cost and rec1.cost["flops"] > 0
    text = str(report)
    assert "compile on first call" not in text
    assert "1 XLA partition, compiled on first call" in text
    page = report._repr_html_()
    assert "1 entries" not in page and "cache: 1 entry" in page
    missing = _words(text) - _html_words(page)
    assert not missing, missing


def _masked_sum(x):
    y = x.relu()
    return x[y > 0].sum() + y


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_explain_of_a_graph_cut_around_data_dependent_ops_lists_its_xla_pieces():
    """A graph cut around ``x[mask]`` runs its other ops in XLA pieces, compiled as graphs of
    their own during explain's call: explain said "0 XLA partitions" and counted 0 ops in XLA.
    Now it names the pieces and reports each (its ops in XLA, its compile), in text and HTML;
    Dynamo's graph count stays Dynamo's."""
    x = torch.randn(6)
    with torch.no_grad(), pytest.warns(torch2xla.FallbackWarning):
        report = torch2xla.explain(_masked_sum, x)
    torch.testing.assert_close(report.output, _masked_sum(x))
    text = str(report)
    assert "Dynamo captured 1 graph with 0 graph breaks." in text
    assert "0 XLA partitions" not in text
    top, *pieces = report.graphs
    (rec,) = top.records
    assert rec.mode == "split" and len(rec.pieces) == len(pieces) >= 2
    assert [p.name for p in pieces] == rec.pieces
    for piece in pieces:
        assert piece.piece_of == top.name and f", a piece of {top.name}" in piece.title
        (prec,) = piece.records
        assert prec.mode == "inference" and prec.ops and all(op.where == "xla" for op in prec.ops)
        assert "xla" in prec.times
        assert f"{prec.name}: inference" in text
    assert f"XLA pieces compiled as graphs of their own: {', '.join(rec.pieces)}" in text
    page = report._repr_html_()
    missing = _words(text) - _html_words(page)
    assert not missing, missing


def test_cache_info_renders_its_text_as_html():
    f = torch.compile(lambda x: x.cos() * 2, backend="xla", dynamic=True)
    f(torch.randn(3))
    f(torch.randn(5))
    info = torch2xla.cache_info(f)
    page = info._repr_html_()
    assert page.startswith("<div") and "<table>" in page
    missing = _words(str(info)) - _html_words(page)
    assert not missing, missing
    missing = _words(str(info[0])) - _html_words(info[0]._repr_html_())
    assert not missing, missing


def test_version_and_typed_marker():
    import importlib.metadata

    assert torch2xla.__version__ == importlib.metadata.version("torch2xla")
    assert (pathlib.Path(torch2xla.__file__).parent / "py.typed").is_file()


def test_explain_records_recompiles_and_new_signatures():
    def f(x):
        return (x * 2).tanh().sum(0)

    x4, x6 = torch.randn(4, 3), torch.randn(6, 3)
    report = torch2xla.explain(f, x4)
    torch.testing.assert_close(report.output, f(x4))
    report.run(x6)
    torch.testing.assert_close(report.output, f(x6))
    assert report.recompiles and "size mismatch" in report.recompiles[0]
    signatures = [r.inputs for g in report.graphs for r in g.records]
    assert "f32[4, 3]" in signatures[0]
    assert any("6" in s for s in signatures[1:])
    assert "Dynamo recompiles:\n" in str(report)


def test_explain_shows_torch2xla_recompile_reasons_with_dynamic_shapes():
    def f(x):
        return torch.softmax(x, dim=-1) * x.shape[0]

    x4, x6 = torch.randn(4, 3), torch.randn(6, 3)
    # buckets None: one program per shape (sizes 4 and 6 would share bucket 8)
    report = torch2xla.Explanation(f, dynamic=True, options={"buckets": None}).run(x4).run(x6)
    torch.testing.assert_close(report.output, f(x6))
    (graph,) = report.graphs  # Dynamo traced once; torch2xla compiled one program per shape
    assert [r.index for r in graph.records] == [0, 1]
    assert graph.cache_entries == 2
    assert graph.recompile_reasons and "4 -> 6" in graph.recompile_reasons[0]
    assert f"recompiled: {graph.recompile_reasons[0]}" in str(report)
    assert not report.recompiles


def test_a_signature_has_one_record_and_one_label_everywhere(caplog):
    """Issue 26: cache_info called a signature ``#1`` where explain, dumps and logs said
    ``graph_0.s0``, from two records numbered apart. Now one record, one label."""
    caplog.set_level(logging.DEBUG, logger="torch2xla")

    def f(x):
        return torch.softmax(x, dim=-1) * x.shape[0]

    report = torch2xla.Explanation(f, dynamic=True, options={"buckets": None})
    report.run(torch.randn(4, 3)).run(torch.randn(6, 3))
    (graph,) = report.graphs
    names = [f"{graph.name}.s0", f"{graph.name}.s1"]
    assert [r.name for r in graph.records] == names
    (info,) = torch2xla.cache_info(graph.compiled)
    assert [s.name for s in info.signatures] == names
    # the very objects: cache_info's timing and explain's stages are one record's
    assert [id(r) for r in graph.compiled.guards.cache.records] == [id(r) for r in graph.records]
    text = str(info)
    assert f"  {names[0]} " in text and f"  {names[1]} " in text and "#" not in text
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("torch2xla")]
    for name, verb in zip(names, ("compiled", "recompiled"), strict=True):
        assert any(m.startswith(f"{name} ") and f": {verb} (" in m for m in messages), messages
        assert f"{name}: lowering" in messages  # the stages (debug)


def test_explain_does_not_use_up_the_recompile_limit():
    def f(x):
        return x.cos() + 1

    x = torch.randn(3)
    for _ in range(torch._dynamo.config.recompile_limit + 1):
        report = torch2xla.explain(f, x)
    assert len(report.graphs) == 1 and report.graphs[0].records


def test_explain_lists_breaks_that_cut_no_graph():
    def f(x):
        idx = torch.nonzero(x)  # a graph break before any op: no graph carries its reason
        return idx.float().sum() * x

    x = torch.randn(6)
    report = torch2xla.explain(f, x)
    torch.testing.assert_close(report.output, f(x))
    assert any("nonzero" in b.reason and not b.frames for b in report.breaks), report.breaks
    assert "(Dynamo kept no source line)" in str(report)


def test_explain_unwraps_compiled_modules():
    model = nn.Linear(3, 2)
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(5, 3)
    with torch.no_grad():
        report = torch2xla.explain(compiled, x)
        torch.testing.assert_close(report.output, model(x))
    assert report.fn is model
    assert report.graphs[0].records[0].mode == "inference"


# -- the ahead-of-time compile is free ----------------------------------------------------------
class _Compiles:
    """Counts XLA backend compiles (JAX's monitoring events)."""

    count = 0
    registered = False

    @classmethod
    def listen(cls):
        if not cls.registered:
            jax.monitoring.register_event_duration_secs_listener(cls._on_event)
            cls.registered = True

    @classmethod
    def _on_event(cls, event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            cls.count += 1


def _compiles_over_three_steps(training: bool, detailed: bool = False) -> int:
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(3, 5)
    before = _Compiles.count
    with torch.set_grad_enabled(training):
        for step in range(3):
            with _stages.detailed() if detailed and step == 0 else contextlib.nullcontext():
                out = compiled(x)
            torch.testing.assert_close(out, model(x))
            if training:
                out.sum().backward()
    return _Compiles.count - before


@pytest.mark.parametrize("training", [False, True])
def test_compiling_in_stages_costs_no_extra_compile(training, monkeypatch):
    """The executables compiled ahead (to time and dump the stages) are the ones calls use."""
    _Compiles.listen()
    with_stages = _compiles_over_three_steps(training)
    with_backward_ahead = _compiles_over_three_steps(training, detailed=True)  # as explain does
    mode = "training" if training else "inference"
    monkeypatch.setattr(_stages, "precompile", lambda *args, **kwargs: (mode, []))
    torch._dynamo.reset()
    without = _compiles_over_three_steps(training)
    # NOTE: calls may recompile once when parameter views change kind (numpy on first sight,
    # DLPack later: _interop.ViewCache); compiling ahead must never add a compile.
    assert with_stages <= without
    assert with_backward_ahead <= without
    assert with_stages >= (2 if training else 1)


def test_explain_times_and_costs_the_backward():
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh())
    x = torch.randn(3, 5)
    report = torch2xla.explain(model, x)
    report.output.sum().backward()
    (rec,) = report.graphs[0].records
    plain = torch2xla.explain(lambda x: model(x).detach(), x).graphs[0].records[0]
    assert rec.mode == "training" and plain.mode == "inference"
    assert rec.cost["flops"] > plain.cost["flops"]  # forward + backward


def test_cost_analysis_counts_matmul_flops():
    m, k, n = 32, 64, 16
    a, b = torch.randn(m, k), torch.randn(k, n)
    report = torch2xla.explain(lambda a, b: a @ b, a, b)
    torch.testing.assert_close(report.output, a @ b)
    flops = report.graphs[0].records[0].cost["flops"]
    assert flops == pytest.approx(2 * m * k * n, rel=0.05)


# -- long compiles report progress ---------------------------------------------------------------
def test_long_compile_progress_is_logged(monkeypatch, caplog):
    monkeypatch.setattr(_stages, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(_stages, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(_stages, "PROGRESS_TICK_S", 0.01)
    caplog.set_level(logging.INFO, logger="torch2xla.compile")
    f = torch.compile(lambda x: torch.cumsum(x, 0).exp(), backend="xla")
    x = torch.randn(6)
    torch.testing.assert_close(f(x), torch.cumsum(x, 0).exp())
    messages = [r.getMessage() for r in caplog.records if r.name == "torch2xla.compile"]
    assert any(m.startswith("compiling graph_") and "elapsed" in m for m in messages), messages
    assert any(".s0 compiled in" in m and "xla" in m for m in messages), messages


def test_progress_bar_in_a_notebook(monkeypatch):
    """In a running IPython kernel, a long compile shows (and finishes) an HTML progress bar."""
    for name in ("CI", "TORCH2XLA_PROGRESS"):  # CI quiets the progress display
        monkeypatch.delenv(name, raising=False)
    shown = []

    class Handle:
        def update(self, obj):
            shown.append(obj.data)

    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    display_mod = types.ModuleType("IPython.display")
    display_mod.HTML = lambda data: types.SimpleNamespace(data=data)
    display_mod.display = lambda obj, display_id=False: Handle()
    monkeypatch.setitem(sys.modules, "IPython", fake)
    monkeypatch.setitem(sys.modules, "IPython.display", display_mod)
    monkeypatch.setattr(_stages, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(_stages, "PROGRESS_TICK_S", 0.01)
    f = torch.compile(lambda x: x.sin() * 3, backend="xla")
    x = torch.randn(5)
    torch.testing.assert_close(f(x), x.sin() * 3)
    assert shown and "<progress" in shown[0]
    assert "done" in shown[-1] and 'value="5" max="5"' in shown[-1]


# -- profiling -----------------------------------------------------------------------------------
def test_profiler_trace_has_a_range_per_graph_and_backward():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(2, 4)
    compiled(x).sum().backward()  # compile outside the profiled region
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        compiled(x).sum().backward()
    names = {e.name for e in prof.events()}
    graph_ranges = {n for n in names if n.startswith("torch2xla:graph_")}
    assert any(not n.endswith(":backward") for n in graph_ranges), names
    assert any(n.endswith(":backward") for n in graph_ranges), names


def test_jax_profiler_trace_of_a_region(tmp_path):
    f = torch.compile(lambda x: (x @ x).relu(), backend="xla")
    x = torch.randn(8, 8)
    f(x)
    with torch2xla.profile(tmp_path):
        out = f(x)
    torch.testing.assert_close(out, (x @ x).relu())
    traces = [os.path.join(d, n) for d, _, ns in os.walk(tmp_path) for n in ns]
    xplanes = [p for p in traces if p.endswith(".xplane.pb")]
    assert xplanes, traces
    assert any(b"torch2xla:graph_" in pathlib.Path(p).read_bytes() for p in xplanes)
    # The region ended cleanly (a new one can start); regions do not nest.
    with (
        torch2xla.profile(tmp_path / "again"),
        pytest.raises(RuntimeError, match="already being captured"),
        torch2xla.profile(tmp_path / "nested"),
    ):
        pass


class _Terminal(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    "tty, env, shown",
    [
        (True, {}, True),
        (True, {"CI": "true"}, False),
        (False, {}, False),
        (True, {"TORCH2XLA_PROGRESS": "0"}, False),
        (False, {"TORCH2XLA_PROGRESS": "1"}, True),
    ],
    ids=["terminal", "ci", "log-file", "switched-off", "forced"],
)
def test_long_compile_progress_in_a_terminal(monkeypatch, tty, env, shown):
    """On by default on an interactive terminal; quiet in CI and where stderr is a log."""
    for name in ("CI", "TORCH2XLA_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stderr = _Terminal(tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(_stages, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(_stages, "PROGRESS_TICK_S", 0.01)
    f = torch.compile(lambda x: x.cos() * 5, backend="xla")
    x = torch.randn(5)
    torch.testing.assert_close(f(x), x.cos() * 5)
    text = stderr.getvalue()
    if shown:
        assert "\rtorch2xla: compiling graph_" in text and ".s0: stage " in text
        assert re.search(r"torch2xla: graph_\d+\.s0 compiled in [\d.]+s *\n$", text), text
    else:
        assert "torch2xla" not in text
