"""Errors name the graph, the ATen node and the user's line, say what to do, and stay short;
Dynamo's minifier works with backend="xla"."""

from __future__ import annotations

import os
import runpy
import sys
import traceback

import jax.numpy as jnp
import pytest
import torch

import torch2xla
from torch2xla.ops import LOWERINGS

aten = torch.ops.aten


def _broken_cos(x):
    return jnp.cos(x).reshape(7, 7)  # a lowering bug: raises inside JAX for a 4x4 input


def _wrong_cos(x):
    return jnp.sin(x)  # a lowering bug: wrong values


def f(x, y):
    a = torch.sin(x) + y
    b = a.relu() * 2
    c = torch.cos(b)
    return (c.exp() + a).sum(0)


@pytest.fixture
def broken_cos(monkeypatch):
    monkeypatch.setitem(LOWERINGS, aten.cos.default, _broken_cos)


def _args():
    return torch.randn(4, 4), torch.randn(4, 4)


def test_failing_lowering_names_graph_node_user_line_and_what_to_do(broken_cos):
    with pytest.raises(torch2xla.LoweringError) as info:
        torch.compile(f, backend="xla", options={"strict": True})(*_args())
    err = info.value
    message = str(err)
    assert message.startswith("torch2xla: graph_")
    assert "the lowering of aten.cos.default (node 'cos') raised TypeError" in message
    assert "cannot reshape array" in message
    assert f"{__file__}:" in message and "c = torch.cos(b)" in message  # the user's line
    assert "_broken_cos" in message  # our (here: the planted) lowering's line
    assert 'options={"eager_ops": [torch.ops.aten.cos.default]}' in message
    assert "TORCH2XLA_TRACEBACK=full" in message
    assert err.graph.startswith("graph_") and err.node.target is aten.cos.default
    assert isinstance(err.original, TypeError)
    # No wall of JAX tracebacks: no chained exceptions, no frames inside JAX.
    assert err.__cause__ is None and err.__suppress_context__
    text = "".join(traceback.format_exception(err))
    assert "jax/_src" not in text and "The above exception" not in text
    assert len(traceback.extract_tb(err.__traceback__)) < 15


def test_following_the_advice_runs_the_op_in_eager(broken_cos):
    x, y = _args()
    options = {"eager_ops": [aten.cos.default]}
    out = torch.compile(f, backend="xla", options=options)(x, y)
    torch.testing.assert_close(out, f(x, y))


def test_full_traceback_on_request(broken_cos, monkeypatch):
    monkeypatch.setenv("TORCH2XLA_TRACEBACK", "full")
    with pytest.raises(torch2xla.LoweringError) as info:
        torch.compile(f, backend="xla", options={"strict": True})(*_args())
    assert isinstance(info.value.__cause__, torch2xla.LoweringError)


def test_a_failing_lowering_runs_its_op_in_eager_with_a_warning(broken_cos, monkeypatch):
    # Outside strict mode a lowering bug costs speed, not the run: the op runs in eager (every
    # node of it in this graph), the rest in XLA, with a warning naming op, line and the bug.
    x, y = _args()
    g = torch.compile(f, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning) as record:
        out = g(x, y)
    torch.testing.assert_close(out, f(x, y))
    message = str(record[0].message)
    assert "aten.cos.default: its lowering raised TypeError" in message
    assert "c = torch.cos(b)" in message and "bug in torch2xla" in message
    a, b = (t.clone().requires_grad_() for t in (x, y))
    torch.compile(f, backend="xla")(a, b).sum().backward()  # training: gradients through it
    a2, b2 = (t.clone().requires_grad_() for t in (x, y))
    f(a2, b2).sum().backward()
    torch.testing.assert_close((a.grad, b.grad), (a2.grad, b2.grad))


def test_a_graph_xla_cannot_compile_runs_in_eager_with_a_warning(monkeypatch):
    # A failure after the lowering (here: XLA's compile) runs the whole graph in eager.
    from torch2xla.runtime import _program

    def failing(*args, **kwargs):
        raise RuntimeError("INTERNAL: planted compile failure")

    monkeypatch.setattr(_program.jax.stages.Lowered, "compile", failing)
    x, y = _args()
    g = torch.compile(f, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning, match="failed in stage xla"):
        out = g(x, y)
    torch.testing.assert_close(out, f(x, y))
    torch.testing.assert_close(g(y, x), f(y, x))  # later calls too
    with pytest.raises(torch2xla.CompileError, match="planted compile failure"):
        torch.compile(f, backend="xla", options={"strict": True})(x, y)


def test_strict_mode_error_names_graph_op_and_line():
    def g(x):
        return torch.sin(x) + 1

    options = {"strict": True, "eager_ops": [aten.sin.default], "passes": []}
    out = torch.compile(g, backend="xla", options=options)(torch.ones(2))
    torch.testing.assert_close(out, g(torch.ones(2)))  # user-chosen eager ops are allowed


# -- Dynamo's minifier ---------------------------------------------------------------------------
@pytest.fixture
def isolated_minifier(tmp_path, monkeypatch):
    """Run the minifier in tmp_path; undo the config and environment its launcher changes."""
    configs = [torch._dynamo.config, torch._inductor.config, torch._functorch.config]
    saved = [c.get_config_copy() for c in configs]
    environ = dict(os.environ)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for c, before in zip(configs, saved):
        for key, value in c.get_config_copy().items():
            if value != before[key]:
                setattr(c, key, before[key])
    os.environ.clear()
    os.environ.update(environ)


@pytest.mark.parametrize(
    ("level", "lowering"), [(2, _broken_cos), (4, _wrong_cos)], ids=["error", "accuracy"]
)
def test_dynamo_minifier_reduces_a_planted_failure(isolated_minifier, monkeypatch, level, lowering):
    monkeypatch.setitem(LOWERINGS, aten.cos.default, lowering)
    # (outside strict mode a failing lowering runs its op in eager; the launcher, which
    # compiles with backend="xla" and no options, keeps the TORCH* environment)
    monkeypatch.setenv("TORCH2XLA_STRICT", "1")
    with (
        torch._dynamo.config.patch(
            repro_after="dynamo", repro_level=level, debug_dir_root=str(isolated_minifier / "dbg")
        ),
        pytest.raises(Exception) as info,
    ):
        torch.compile(f, backend="xla")(*_args())
    err = info.value
    launcher = next(
        getattr(e, "minifier_path", None)
        for e in (err, err.__cause__, getattr(err, "inner_exception", None))
        if getattr(e, "minifier_path", None)
    )
    assert os.path.exists(launcher)
    monkeypatch.setattr(sys, "argv", [launcher])
    runpy.run_path(launcher, run_name="__main__")
    repro = (isolated_minifier / "repro.py").read_text()
    forward = repro[repro.index("def forward") :]
    assert "torch.cos" in forward
    for other in ("torch.sin", "relu", "exp", "sum"):
        assert other not in forward, forward
