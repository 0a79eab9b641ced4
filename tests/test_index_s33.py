"""Bad and unusual indices (session 33), against eager: a uint8 tensor that a call reads as an
integer index (not a mask) is refused where eager refuses it, and a runtime check restored from
the persistent cache names this process's line, or none, never another process's."""

from __future__ import annotations

import pathlib
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch2xla
from torch2xla.guards import _persistent

U8 = torch.tensor([1, 3], dtype=torch.uint8)


def _put(x, i, s):
    return x.put_(i, s)


def _put_accumulate(x, i, s):
    return x.put(i, s, accumulate=True)


def _one_hot(x, i, s):
    return F.one_hot(i, 5) + x.long()


def _index_copy(x, i, s):
    return x.index_copy(0, i, s)


def _mask_read(x, i, s):
    return x[i.repeat(3)[:5]]


def _mask_write(x, i, s):
    x[i.repeat(3)[:5]] = s.sum()
    return x


def _mask_accumulate(x, i, s):
    return x.index_put((i.repeat(3)[:5],), s.sum(), accumulate=True)


@pytest.mark.parametrize(
    "fn",
    [_put, _put_accumulate, _one_hot, _index_copy, _mask_read, _mask_write, _mask_accumulate],
)
def test_uint8_index_as_eager(fn):
    """``x.put_(i, v)`` and ``F.one_hot(i)`` refuse a uint8 ``i`` in eager (a long index
    only); the compiled call computed them. Where a call reads uint8 as a mask (``x[m]``,
    ``index_put``), it still does."""
    args = (torch.zeros(5), U8, torch.tensor([1.0, 2.0]))
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (eager's deprecation of uint8 masks)
        try:
            want = fn(*(a.clone() for a in args))
        except RuntimeError as eager:
            with pytest.raises(type(eager)) as info:
                torch.compile(fn, backend="xla")(*(a.clone() for a in args))
            assert str(info.value).startswith(str(eager).splitlines()[0]), str(info.value)
            assert "test_index_s33.py" in str(info.value), str(info.value)
            return
        got = torch.compile(fn, backend="xla")(*(a.clone() for a in args))
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


_SOURCE = """
def lookup(table, i):
    rows = table * 2
    return rows[i]  # {tag}
"""


def _from_file(path: pathlib.Path):
    import importlib.util

    path.write_text("\n" * 5 + _SOURCE.format(tag="in a file"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lookup


def _without_file():
    scope: dict = {}
    exec(compile(_SOURCE.format(tag="without a file"), "<string>", "exec"), scope)
    return scope["lookup"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    torch2xla.set_persistent_cache(tmp_path / "cache")
    yield
    monkeypatch.undo()
    _persistent._explicit = _persistent._UNSET
    _persistent._wanted_path = None
    _persistent._store = None


def _error(fn) -> str:
    torch._dynamo.reset()
    with pytest.raises(torch2xla.OpIndexError) as info:
        torch.compile(fn, backend="xla")(torch.randn(4, 3), torch.tensor([1, 9]))
    return str(info.value)


@pytest.mark.parametrize("file_first", [True, False], ids=["file-first", "no-file-first"])
def test_restored_check_names_this_process_line_or_none(tmp_path, cache, file_first):
    """The same function from a file and from ``exec`` (no source: ``python -c``, a
    notebook's ``exec``) restores one record: a record written from the file named the file's
    line for the code without one; one written without a line named none for the file."""
    in_file, no_file = _from_file(tmp_path / "user_mod.py"), _without_file()
    order = [in_file, no_file] if file_first else [no_file, in_file]
    messages = {}
    hits = _persistent.hits()
    for fn in order:
        messages[fn] = _error(fn)
    assert _persistent.hits() > hits  # (the second restored the first's record)
    assert f"{tmp_path / 'user_mod.py'}:9" in messages[in_file], messages[in_file]
    assert "user code: <unknown source>" in messages[no_file], messages[no_file]
    assert "user_mod.py" not in messages[no_file], messages[no_file]


def _write_mask(x, m):
    x[m] = torch.tensor([1.0, 2.0])
    return x


def _augmented_mask(x, m):
    x[m] += 1
    return x


def _write_two_masks(x, m):
    y = x.reshape(3, 1).expand(3, 3).clone()
    y[m, m] = 5.0
    return y


def _accumulate_mask(x, m):
    return x.index_put((m,), torch.tensor([1.0, 2.0]), accumulate=True)


def _write_bool_mask(x, m):
    x[m.bool()] = torch.tensor([1.0, 2.0])
    return x


def _eager_warnings(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    kept = [w for w in caught if "torch/_dynamo" not in w.filename]
    # (eager's C++ warnings end with where they were triggered inside torch)
    text = [str(w.message).split(" (Triggered internally at")[0] for w in kept]
    return out, [(t, w.category, w.filename, w.lineno) for t, w in zip(text, kept)]


@pytest.mark.parametrize(
    "fn", [_write_mask, _augmented_mask, _write_two_masks, _accumulate_mask, _write_bool_mask]
)
def test_uint8_mask_writes_warn_as_eager(fn):
    """Eager deprecates uint8 masks at every index tensor of a read or a write; Dynamo's fake
    run of a read warns, of a write (``index_put``) not: the compiled call said nothing."""
    m = torch.tensor([1, 0, 1], dtype=torch.uint8)
    want, want_warnings = _eager_warnings(fn, torch.arange(3.0), m)
    torch._dynamo.reset()
    got, got_warnings = _eager_warnings(torch.compile(fn, backend="xla"), torch.arange(3.0), m)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got_warnings == want_warnings


class _PickGrad(torch.autograd.Function):
    """A Function whose backward indexes the gradient with a saved index."""

    @staticmethod
    def forward(ctx, x, i):
        ctx.save_for_backward(i)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (i,) = ctx.saved_tensors
        return g[i] * 3, None


def _pick(x, i):
    return _PickGrad.apply(x, i).sin()


def _pick_grad(fn, i):
    x = torch.linspace(-1, 1, 3, requires_grad=True)
    out = fn(x, i)
    out.backward(torch.tensor([1.0, 2.0, 3.0]))
    return out.detach(), x.grad


# NOTE: the custom_vjp's backward (``ops/_custom_function.py``) is a JAX function without the
# status output runtime checks need, and backward programs have none: an index out of range
# that only a Function's backward reads (not its forward, as ``x[i]`` then ``index_add`` would)
# gives a gradient where eager raises. Keeping such Functions in eager cost a program split
# to every custom gather/scatter Function (``test_autofn_s23.test_integer_tensor_input``);
# the fix is a status the forward computes for the backward's checks, raised at backward.
_BACKWARD_UNCHECKED = pytest.mark.xfail(
    strict=True, raises=pytest.fail.Exception, reason="checks in a Function's backward"
)


@pytest.mark.parametrize(
    "index",
    [
        [2, 1, 0],
        pytest.param([2, 1, 3], marks=_BACKWARD_UNCHECKED),
        pytest.param([-1, 0, -4], marks=_BACKWARD_UNCHECKED),
    ],
    ids=["ok", "oob", "neg"],
)
def test_custom_backward_index_checked_as_eager(index):
    """A Function's backward subgraph runs in the program without runtime checks: an index
    out of range in it reads a clamped row, and the gradient comes back without an error."""
    i = torch.tensor(index)
    torch._dynamo.reset()
    compiled = torch.compile(_pick, backend="xla")
    try:
        want = _pick_grad(_pick, i)
    except IndexError as eager:
        with pytest.raises(IndexError) as info:
            _pick_grad(compiled, i)
        assert str(info.value).startswith(str(eager).splitlines()[0]), str(info.value)
        return
    got = _pick_grad(compiled, i)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
