"""Compiled code split by graph breaks or running Python side effects (session 22,
scripts/probe_breaks.py), against eager strictly.

- An error a graph raises when it runs (an index out of range, an integer division by zero,
  ``cholesky`` of a matrix that is not positive-definite, a failed ``assert``) inside a user's
  ``try`` block reaches its ``except`` branch (and its ``finally``) as in eager: Dynamo's
  bytecode calls the graph outside any ``try``, so the frame runs in eager PyTorch
  (``capture/_try_blocks.py``); frames it calls compile as usual. Import guards, handlers of
  errors no op raises (HF's ``except NotImplementedError`` around ``index_copy_``) and
  ``finally`` blocks that only restore Python state (HF's forward wrapper) still compile.
- A graph given a tensor that requires grad and a detached alias of it (``d = h.detach()``
  before a graph break, both used after it) that it writes through the alias: the outputs
  computed from ``h`` require grad and its history gets their gradients (the group's base
  was taken from the detached alias), and the other inputs get theirs (the example values'
  links indexed the Dynamo graph's inputs, not the program's, which puts each group's base
  after the other inputs: ``autodiff/_connected.examples_hold``).
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2xla
from tests._util import ProgramCounter, check_scenario, leaf

# (each frame run in eager because of its try block says so once, with a FallbackWarning:
# ``test_a_frame_run_in_eager_for_its_try_says_so_once`` checks it)
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*runs inside a try block:torch2xla._backend.FallbackWarning"
)


def _x(*shape, seed=0):
    return leaf(*shape, seed=seed, rg=False)


# -- try/except around ops that raise from values --------------------------------------------
def _index(x, i):
    try:
        return x[i] * 2
    except IndexError:
        return x.sum(0, keepdim=True) * 0 - 1


def _gather(x, i):
    try:
        return torch.gather(x, 0, i)
    except RuntimeError:
        return torch.zeros_like(i, dtype=x.dtype) - 1


def _embedding(x, i):
    try:
        return F.embedding(i, x.reshape(-1, 1)).flatten()
    except IndexError:
        return x[:1] * 0


def _index_put(x, i):
    x = x.clone()
    try:
        x[i] = 1.0
    except IndexError:
        x.fill_(-1)
    return x


def _floor_div(x, i):
    try:
        return torch.tensor([7, 8]) // (9 - i)
    except RuntimeError:  # (eager: RuntimeError("ZeroDivisionError"))
        return i * 0 - 1


def _assert(x, i):
    try:
        assert (i < 3).all(), "too big"
        return x[i]
    except AssertionError:
        return x[:1] * 0


def _bare_except(x, i):
    try:
        y = x[i].exp()
    except:  # noqa: E722  (what the test is about)
        y = x.sum(0, keepdim=True)
    return y


def _except_exception_tuple(x, i):
    try:
        y = x[i].exp()
    except (KeyError, Exception):
        y = x.sum(0, keepdim=True)
    return y


def _suppress(x, i):
    y = x[:1] * 0
    with contextlib.suppress(IndexError):
        y = x[i] + 1
    return y


class _Swallow:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is IndexError


@contextlib.contextmanager
def _swallowing():
    try:
        yield
    except IndexError:
        pass


def _swallow_class(x, i):
    y = x[:1] * 0
    with _Swallow():
        y = x[i] + 1
    return y


def _swallow_generator(x, i):
    y = x[:1] * 0
    with _swallowing():
        y = x[i] + 1
    return y


_CASES = [_index, _gather, _embedding, _index_put, _floor_div, _assert]
_CASES += [_bare_except, _except_exception_tuple, _suppress, _swallow_class, _swallow_generator]


@pytest.mark.parametrize("fn", _CASES, ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("first_bad", [False, True])
def test_except_branch_runs_as_in_eager(fn, first_bad):
    good, bad = torch.tensor([1]), torch.tensor([9])

    def scenario(C, rec):
        g = C(fn)
        for k, i in enumerate((bad, good, bad) if first_bad else (good, bad, good)):
            rec(f"call {k}", g(_x(3), i))

    check_scenario(scenario, None, 1e-6)


def test_a_frame_run_in_eager_for_its_try_says_so_once():
    def g(x, i):
        try:
            y = x[i] * 2
        except IndexError:
            y = x.sum()
        return y

    import warnings

    compiled = torch.compile(g, backend="xla")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in (1, 9, 2):
            compiled(torch.arange(4.0), torch.tensor([i]))
    ours = [w for w in seen if issubclass(w.category, torch2xla._backend.FallbackWarning)]
    assert len(ours) == 1, [str(w.message) for w in seen]
    assert "runs inside a try block" in str(ours[0].message)
    assert "test_breaks_s22.py" in str(ours[0].message)


def test_except_in_caller_of_an_inlined_helper_keeps_writes():
    def pick(x, i):
        return x[i].exp()

    def f(x, i, buf):
        buf.add_(1)
        try:
            y = pick(x, i)
        except IndexError:
            y = x * 0
        buf.add_(1)
        return y

    def scenario(C, rec):
        g, buf = C(f), torch.zeros(2)
        for k, i in enumerate((1, 9, 2)):
            rec(f"call {k}", [g(_x(3), torch.tensor([i]), buf), buf.clone()])

    check_scenario(scenario, None, 1e-6)


def test_try_in_a_called_frame_reaches_the_eager_caller():
    """The caller runs in eager (no graph of its own): the callee compiles, its error reaches
    the caller's handler."""

    def pick(x, i):
        return x[i].exp()

    def scenario(C, rec):
        g = C(pick)
        for k, i in enumerate((1, 9)):
            try:
                rec(f"call {k}", g(_x(3), torch.tensor([i])))
            except IndexError:
                rec(f"call {k}", "caught")

    check_scenario(scenario, None, 1e-6)


def test_finally_writes_land_where_the_graph_raises():
    def f(x, i, buf):
        try:
            return x[i] * 2
        finally:
            buf.add_(1)

    def scenario(C, rec):
        g, buf = C(f), torch.zeros(2)
        rec("ok", [g(_x(3), torch.tensor([1]), buf), buf.clone()])
        with pytest.raises(IndexError):
            g(_x(3), torch.tensor([9]), buf)
        rec("buf", buf)

    check_scenario(scenario, None, 1e-6)


def test_training_with_a_try_in_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x, idx):
            h = self.lin(x)
            try:
                h = h[:, idx]
            except IndexError:
                h = h.mean(1, keepdim=True)
            return h.square().sum()

    def scenario(C, rec):
        torch.manual_seed(0)
        m = M()
        f = C(m)
        for k, idx in enumerate((torch.tensor([1, 0]), torch.tensor([2]), torch.tensor([0]))):
            m.zero_grad()
            loss = f(_x(4, 3, seed=k), idx)
            loss.backward()
            rec(f"step {k}", [loss, *(p.grad for p in m.parameters())])

    check_scenario(scenario, None, 1e-5)


# -- what still compiles ------------------------------------------------------------------------
def _import_guard(x):
    try:
        import numpy  # noqa: F401
    except ImportError:
        pass
    return x.sin() * 2


def _not_implemented_guard(x):
    cache = torch.zeros(4, 3)
    try:  # (HF's static cache: index_copy_ where a device has it)
        cache.index_copy_(0, torch.tensor([1]), x[None])
    except NotImplementedError:
        cache[torch.tensor([1])] = x[None]
    return cache * 2


class _Config:
    flag = None


def _restoring_finally(x):
    old = _Config.flag
    _Config.flag = True
    try:  # (HF's forward wrapper: the finally restores Python state only)
        return x.cos() + 1
    finally:
        _Config.flag = old


class _Passing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _passing_context_manager(x):
    with _Passing(), torch.no_grad():
        return x.sin() + 2


def _try_around_python_only(x):
    try:
        n = int("3")
    except ValueError:
        n = 0
    return x * n


@pytest.mark.parametrize(
    "fn",
    [
        _import_guard,
        _not_implemented_guard,
        _restoring_finally,
        _try_around_python_only,
        _passing_context_manager,
    ],
    ids=lambda f: f.__name__[1:],
)
def test_blocks_that_cannot_catch_a_graph_error_still_compile(fn, monkeypatch):
    torch._dynamo.reset()
    programs = ProgramCounter(monkeypatch)
    x = _x(3)
    out = torch.compile(fn, backend="xla")(x)
    assert programs.count == 1
    want = fn(x)
    assert out.dtype == want.dtype
    torch.testing.assert_close(out, want, rtol=0, atol=1e-6)


def test_fullgraph_keeps_one_graph_and_raises_eagers_type(monkeypatch):
    torch._dynamo.reset()
    programs = ProgramCounter(monkeypatch)
    g = torch.compile(_index, backend="xla", fullgraph=True)
    torch.testing.assert_close(g(_x(3), torch.tensor([1])), _index(_x(3), torch.tensor([1])))
    assert programs.count == 1
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        g(_x(3), torch.tensor([9]))


try:  # (a function defined in a try block runs outside it when called later)

    def _defined_in_a_try(x):
        return x.tan() + 1

except Exception:  # pragma: no cover
    _defined_in_a_try = None


def test_a_function_defined_in_a_try_block_still_compiles(monkeypatch):
    test_blocks_that_cannot_catch_a_graph_error_still_compile(_defined_in_a_try, monkeypatch)


def test_a_lambda_called_inside_a_try_counts():
    def apply(fn, x):
        return fn(x)

    def f(x, i):
        try:
            return apply(lambda t: t[i] * 2, x)
        except IndexError:
            return x[:1] * 0

    def scenario(C, rec):
        g = C(f)
        for k, i in enumerate((1, 9)):
            rec(f"call {k}", g(_x(3), torch.tensor([i])))

    check_scenario(scenario, None, 1e-6)


# -- a detached alias written beside the tensor it aliases ---------------------------------
def _write_alias_then_read(d, h, w):
    d.add_(1)
    return (h * w).sum(), d * 2, h.exp()


def _read_then_write_alias_unsaved(h, d, w):
    y = h + w  # (add saves neither)
    d.mul_(2)
    return y.sum(), h * 3


@pytest.mark.parametrize("fn", [_write_alias_then_read, _read_then_write_alias_unsaved])
def test_graph_writing_a_detached_alias_keeps_gradients(fn):
    def scenario(C, rec):
        g = C(fn)
        for k in range(2):
            x = leaf(3, seed=k)
            w = leaf(3, seed=5)
            h = x * 2
            d = h.detach()
            args = (d, h, w) if fn is _write_alias_then_read else (h, d, w)
            outs = g(*args)
            rec(f"outs {k}", [*outs, d, h, type(h.grad_fn).__name__])
            sum(o.sum() for o in outs if o.requires_grad).backward()
            rec(f"grads {k}", [x.grad, w.grad])

    check_scenario(scenario, None, 1e-6)


def test_detached_alias_written_after_a_break():
    def f(x, w):
        h = x * w
        d = h.detach()
        torch._dynamo.graph_break()
        d.add_(1)
        return (h * w).sum(), d

    def scenario(C, rec):
        x, w = leaf(3), leaf(3, seed=1)
        s, d = C(f)(x, w)
        rec("outs", [s, d])
        s.backward()
        rec("grads", [x.grad, w.grad])

    check_scenario(scenario, None, 1e-6)
