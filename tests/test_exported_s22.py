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
