"""Custom graph passes on the ATen graph (options["passes"]) and the built-in ones."""

from __future__ import annotations

import pytest
import torch

import torch2xla

aten = torch.ops.aten


def sin_to_cos(gm: torch.fx.GraphModule) -> None:
    """A user pass: every aten.sin becomes aten.cos (new nodes, without fake values)."""
    for node in list(gm.graph.nodes):
        if node.target is aten.sin.default:
            with gm.graph.inserting_after(node):
                cos = gm.graph.call_function(aten.cos.default, node.args)
            node.replace_all_uses_with(cos)
            gm.graph.erase_node(node)


def f(x):
    return torch.sin(x) * 2 + 1


def test_a_pass_changes_the_compiled_program(tmp_path):
    x = torch.randn(4, 3)
    options = {"passes": [sin_to_cos], "dump_dir": tmp_path, "strict": True}
    out = torch.compile(f, backend="xla", options=options)(x)
    torch.testing.assert_close(out, torch.cos(x) * 2 + 1)
    assert not torch.allclose(out, f(x))
    (jaxpr,) = tmp_path.rglob("*.jaxpr.txt")
    assert "cos" in jaxpr.read_text() and "sin" not in jaxpr.read_text()


def test_a_pass_may_return_a_new_graph_module():
    seen = []

    def copy_and_rewrite(gm):
        new = torch.fx.GraphModule(gm, gm.graph)
        sin_to_cos(new)
        seen.append(new)
        return new

    x = torch.randn(5)
    out = torch.compile(f, backend="xla", options={"passes": [copy_and_rewrite]})(x)
    torch.testing.assert_close(out, torch.cos(x) * 2 + 1)
    assert seen and all(n.target is not aten.sin.default for n in seen[0].graph.nodes)


def test_passes_see_the_functional_aten_graph_in_order():
    calls = []

    def record(tag):
        def pass_(gm):
            calls.append(
                (tag, sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"}))
            )

        return pass_

    x = torch.randn(3)
    out = torch.compile(f, backend="xla", options={"passes": [record("a"), record("b")]})(x)
    torch.testing.assert_close(out, f(x))
    assert [tag for tag, _ in calls] == ["a", "b"]
    assert calls[0][1] == ["aten.add.Tensor", "aten.mul.Tensor", "aten.sin.default"]


def test_fold_constants_evaluates_parameter_free_subgraphs():
    def g(x):
        table = torch.arange(6, dtype=torch.float32).exp().reshape(2, 3)
        return x * table + torch.ones(3).cumsum(0)

    graphs = []
    x = torch.randn(2, 3)
    passes = [torch2xla.fold_constants, graphs.append]
    out = torch.compile(g, backend="xla", options={"passes": passes, "strict": True})(x)
    torch.testing.assert_close(out, g(x))
    targets = {n.target for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert targets == {aten.mul.Tensor, aten.add.Tensor}
    assert len(graphs[0].graph.find_nodes(op="get_attr")) == 2


def test_fold_constants_keeps_random_ops_and_large_values():
    def g(x):
        big = torch.ones(torch2xla.capture._passes.FOLD_MAX_NUMEL + 1).cumsum(0)
        return x + big.sum(), torch.rand(3)

    graphs = []
    x = torch.randn(1)
    passes = [torch2xla.fold_constants, graphs.append]
    out, noise = torch.compile(g, backend="xla", options={"passes": passes})(x)
    torch.testing.assert_close(out, g(x)[0])
    assert noise.shape == (3,) and ((noise >= 0) & (noise < 1)).all()
    targets = {n.target for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert aten.cumsum.default in targets
    assert any("rand" in str(t) for t in targets)


def test_a_failing_pass_names_itself_and_the_graph():
    def broken(gm):
        raise KeyError("oops")

    compiled = torch.compile(f, backend="xla", options={"passes": [broken]})
    with pytest.raises(
        torch2xla.PassError, match=r"graph pass .*broken failed on graph_\d+: KeyError"
    ):
        compiled(torch.randn(2))


def test_a_pass_must_keep_the_graph_outputs():
    def drop_outputs(gm):
        out = gm.graph.find_nodes(op="output")[0]
        out.args = ((),)

    compiled = torch.compile(f, backend="xla", options={"passes": [drop_outputs]})
    with pytest.raises(torch2xla.PassError, match="changed the inputs or outputs"):
        compiled(torch.randn(2))


def test_a_pass_returning_something_else_is_rejected():
    compiled = torch.compile(f, backend="xla", options={"passes": [lambda gm: "nope"]})
    with pytest.raises(torch2xla.PassError, match="returned str"):
        compiled(torch.randn(2))


def test_pass_and_eager_ops_options_are_validated():
    with pytest.raises(TypeError, match="passes"):
        torch2xla.Options.parse(options={"passes": [1]})
    with pytest.raises(TypeError, match="eager_ops"):
        torch2xla.Options.parse(options={"eager_ops": ["aten.sin"]})
    opts = torch2xla.Options.parse(options={"passes": sin_to_cos, "eager_ops": [aten.sin]})
    assert opts.passes == (sin_to_cos,)
    assert aten.sin.default in opts.eager_ops
