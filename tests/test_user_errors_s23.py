"""A graph whose export fails on the user's own error (an argument eager rejects) raises
eager's error, without a FallbackWarning that calls it a bug in torch2xla; a graph whose
export fails where eager runs still warns."""

import warnings

import pytest
import torch

import torch2xla


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return (type(e), str(e))


def _int_add_float_alpha(x, y):
    x.add_(y, alpha=2.5)
    return x * 2


def _int_add_float_alpha_of_a_view(x, y):
    x[1:].add_(y[1:], alpha=0.5)
    return x + 1


@pytest.mark.parametrize("fn", [_int_add_float_alpha, _int_add_float_alpha_of_a_view])
def test_user_error_at_export_raises_eagers_error_without_a_bug_warning(fn):
    x, y = torch.arange(4), torch.ones(4, dtype=torch.long)
    want = _outcome(fn, x.clone(), y)
    assert want[0] is not "ok"  # noqa: F632  (eager rejects these)
    compiled = torch.compile(fn, backend="xla")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = _outcome(compiled, x.clone(), y)
        again = _outcome(compiled, x.clone(), y)
    assert got == want and again == want
    assert not [w for w in record if issubclass(w.category, torch2xla.FallbackWarning)]


def test_export_failure_where_eager_runs_still_warns_once(monkeypatch):
    from torch2xla.runtime import _program

    def failing(*args, **kwargs):
        raise RuntimeError("INTERNAL: planted compile failure")

    monkeypatch.setattr(_program.jax.stages.Lowered, "compile", failing)

    def f(a, b):
        return torch.sin(a) * b

    a, b = torch.randn(5), torch.randn(5)
    compiled = torch.compile(f, backend="xla")
    with pytest.warns(torch2xla.FallbackWarning, match="failed in stage xla") as record:
        out = compiled(a, b)
        out2 = compiled(a, b)
    torch.testing.assert_close(out, f(a, b), rtol=0, atol=0)
    torch.testing.assert_close(out2, f(a, b), rtol=0, atol=0)
    assert len([w for w in record if issubclass(w.category, torch2xla.FallbackWarning)]) == 1
    warned = next(w for w in record if issubclass(w.category, torch2xla.FallbackWarning))
    assert warned.filename == __file__  # (the user's line, as before the warning waited)
