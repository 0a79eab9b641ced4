"""Session 24: the per-call key's overlap check reused while the inputs stay put
(``guards/_key._alias_memo``), and CUDA programs called without JAX's per-argument checks
once their checked call ran (``XlaProgram._steady_of``)."""

import pytest
import torch

from tests._util import assert_same


def _write_then_read(a, b):
    a.add_(1)
    return a * 2 + b


def _twice(f, make):
    """``f`` and eager on inputs made by ``make(base)``: outputs and the base after the call."""
    base, ref_base = torch.arange(8.0), torch.arange(8.0)
    out, ref = f(*make(base)), _write_then_read(*make(ref_base))
    assert_same(out, ref)
    assert_same(base, ref_base)


def test_same_tensors_then_storage_swapped_under_one_of_them():
    """The same two tensor objects on every call, then one of them set onto the other's
    memory: the overlap of the inputs changes with the same objects (the check reads the data
    pointers, not only the objects)."""
    f = torch.compile(_write_then_read, backend="xla")
    a, b = torch.arange(4.0), torch.arange(4.0) + 10
    ra, rb = a.clone(), b.clone()
    for _ in range(3):
        assert_same(f(a, b), _write_then_read(ra, rb))
        assert_same((a, b), (ra, rb))
    b.set_(a.untyped_storage(), 0, a.shape, a.stride())
    rb.set_(ra.untyped_storage(), 0, ra.shape, ra.stride())
    for _ in range(2):
        assert_same(f(a, b), _write_then_read(ra, rb))
        assert_same((a, b), (ra, rb))


@pytest.mark.parametrize(
    "order",
    [("apart", "overlap", "apart"), ("overlap", "overlap", "apart", "overlap")],
)
def test_fresh_views_alternating_overlap(order):
    """New view objects every call over the same memory (the same data pointers, other
    objects), overlapping or not in turns."""
    f = torch.compile(_write_then_read, backend="xla")
    views = {"apart": lambda t: (t[:4], t[4:]), "overlap": lambda t: (t[:4], t[2:6])}
    for name in order:
        _twice(f, views[name])


def test_same_pointers_other_objects_after_free():
    """Inputs freed and made again between calls, the allocator handing back the same memory:
    the overlap is recomputed for the new objects and stays right."""
    f = torch.compile(_write_then_read, backend="xla")
    for k in range(4):
        base = torch.zeros(8)
        ref = base.clone()
        pair = (base[:4], base[4:]) if k % 2 else (base[:4], base[1:5])
        rpair = (ref[:4], ref[4:]) if k % 2 else (ref[:4], ref[1:5])
        assert_same(f(*pair), _write_then_read(*rpair))
        assert_same(base, ref)
        del base, pair


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA programs only")
def test_cuda_program_runs_unchecked_after_its_first_call():
    """A decoding step's shape: a 64-bit position, a cache written in place, fresh token ids
    every call. From the second call the program runs through ``execute_sharded`` (the steady
    call) and its results and writes stay eager's."""
    from torch2xla.runtime._program import XlaProgram

    programs = []
    init = XlaProgram.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        programs.append(self)

    def step(cache, pos, ids, w):
        cache.index_copy_(0, pos, (ids.float() @ w).unsqueeze(0))
        return cache.sum(0) * 2

    XlaProgram.__init__ = spy
    try:
        f = torch.compile(step, backend="xla")
        w = torch.randn(3, 5, device="cuda")
        cache, ref_cache = torch.zeros(6, 5, device="cuda"), torch.zeros(6, 5, device="cuda")
        for k in range(5):
            ids = torch.randint(0, 4, (3,), device="cuda")
            pos = torch.tensor([k], device="cuda")
            with torch.no_grad():
                out = f(cache, pos, ids, w)
                ref = step(ref_cache, pos, ids, w)
            torch.testing.assert_close(out, ref)
            torch.testing.assert_close(cache, ref_cache)
    finally:
        XlaProgram.__init__ = init
    assert any(p._gpu_steady is not None for p in programs)
