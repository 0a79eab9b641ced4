"""Tensors our CUDA programs exported handed back to JAX as the arrays they were made from
(``runtime/_exported.py``): only while torch has not written to them, only the same tensor,
and a training loop whose compiled optimizer step reads the compiled backward's gradients
(with torch's writes between: clipping, accumulation) gives eager's parameters."""

from __future__ import annotations

import gc

import jax.numpy as jnp
import pytest
import torch

from torch2xla.runtime import _exported


def test_the_array_is_given_back_while_the_tensor_is_unwritten():
    t, a = torch.ones(4), jnp.ones(4)
    assert _exported.note(t, a) is t
    assert _exported.array_of(t) is a
    assert _exported.array_of(t.view(4)) is None  # (another tensor object: imported)
    t.add_(1)  # (torch's write, on torch's stream: only an import orders JAX after it)
    assert _exported.array_of(t) is None


def test_a_deleted_array_or_a_dead_tensor_is_forgotten():
    t, a = torch.ones(3), jnp.ones(3)
    _exported.note(t, a)
    a.delete()
    assert _exported.array_of(t) is None
    u = torch.ones(5)
    ptr = u.data_ptr()
    _exported.note(u, jnp.ones(5))
    del u
    gc.collect()
    assert ptr not in _exported._EXPORTS


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _loop(compile_: bool, clip: bool, accumulate: int):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    fwd = torch.compile(model, backend="xla") if compile_ else model
    step = torch.compile(opt.step, backend="xla") if compile_ else opt.step
    gen = torch.Generator().manual_seed(1)
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        for _ in range(accumulate):
            x = torch.randn(8, 16, generator=gen).cuda()
            fwd(x).square().mean().backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        step()
    return [p.detach().cpu() for p in model.parameters()]


@cuda
@pytest.mark.parametrize("clip", [False, True], ids=["plain", "clipped"])
@pytest.mark.parametrize("accumulate", [1, 2])
def test_optimizer_reading_compiled_gradients_matches_eager(clip, accumulate):
    got = _loop(True, clip, accumulate)
    expected = _loop(False, clip, accumulate)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


def test_imports_past_the_ordered_ones_ask_for_a_fence():
    """A call's first imports wait for torch's stream themselves; past them the imports are
    unordered and the call asks for a fence (one ordered import last)."""
    from torch2xla.runtime._interop import _ORDERED_IMPORTS, ViewCache
    from torch2xla.runtime._jax_scope import x64

    few, many = _ORDERED_IMPORTS, _ORDERED_IMPORTS + 1
    for n, fence in ((few, False), (many, True)):
        cache = ViewCache(n)  # (``writes``: a CUDA program's cache, here over CPU tensors)
        with x64():
            for _ in range(3):  # (new tensors every call: every position imported)
                tensors = [torch.randn(4) for _ in range(n)]
                views, fenced = cache(tensors)
                assert fenced is fence
                for v, t in zip(views, tensors, strict=True):
                    assert torch.equal(torch.from_dlpack(v), t)


@cuda
def test_many_fresh_inputs_written_by_torch_just_before_are_read_after_the_writes():
    """Forty new inputs whose values torch's stream writes right before the call (behind a
    long matmul): the program reads the written values (the fence orders every import)."""
    big = torch.randn(4096, 4096, device="cuda")
    f = torch.compile(lambda *xs: torch.stack(xs).sum(0), backend="xla")
    for _ in range(3):
        xs = [torch.zeros(64, device="cuda") for _ in range(40)]
        for _ in range(8):
            big = big @ big * 1e-3  # (keeps torch's stream busy)
        for i, x in enumerate(xs):
            x.fill_(float(i))
        out = f(*xs)
        assert torch.equal(out.cpu(), torch.full((64,), float(sum(range(40)))))
