"""Small gradients and written-back buffers reach torch packed (torch2xla/runtime/_pack.py): the values,
the optimizer's view of them and the buffers must be eager's, step after step."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from tests._training import assert_grads
from tests._util import ProgramCounter, assert_same
from tests.models import CNN


def _train(model, compiled, xs, opt, steps, zero_to_none=True, accumulate=1):
    losses = []
    for x in xs[:steps]:
        opt.zero_grad(set_to_none=zero_to_none)
        for _ in range(accumulate):
            loss = compiled(x).square().mean()
            loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def _pair(model, **opt_kw):
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    return (
        (compiled, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **opt_kw)),
        (ref, torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, **opt_kw)),
    )


@pytest.mark.parametrize(
    "zero_to_none, accumulate",
    [(True, 1), (False, 1), (True, 2)],
    ids=["set_to_none", "zero_in_place", "accumulate_two_backwards"],
)
def test_batchnorm_cnn_training_with_packed_outputs_matches_eager(
    monkeypatch, zero_to_none, accumulate
):
    counter = ProgramCounter(monkeypatch)
    torch.manual_seed(0)
    model = CNN()
    (compiled, opt), (ref, ref_opt) = _pair(model)
    xs = [torch.randn(4, 3, 16, 16) for _ in range(3)]
    got = _train(model, compiled, xs, opt, 3, zero_to_none, accumulate)
    want = _train(ref, ref, xs, ref_opt, 3, zero_to_none, accumulate)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert_grads(model, ref)
    assert_same(dict(model.named_parameters()), dict(ref.named_parameters()), rtol=1e-4, atol=1e-5)
    # running means, variances and num_batches_tracked (int64): written back from packed buffers
    assert_same(dict(model.named_buffers()), dict(ref.named_buffers()), rtol=1e-4, atol=1e-5)
    # The packed paths ran: buffers written back from a packed program output, and the small
    # gradients lie in one buffer, each a tensor of its own as eager's are (not a view).
    (program,) = counter.programs
    assert program.packing is not None
    grads = [p.grad for p in model.parameters()]
    assert _adjacent(grads)
    assert not any(g._is_view() for g in grads)


def test_large_gradients_are_not_packed_and_mixed_dtypes_are_grouped():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 3))
    model[0].double()  # float64 weights next to float32 ones: one buffer per dtype
    model.insert(0, _Cast(torch.float64))
    model.insert(3, _Cast(torch.float32))
    big = nn.Linear(512, 64)  # 128 KiB of weight: above the CPU limit, its own export
    full = nn.Sequential(big, model)
    ref = copy.deepcopy(full)
    compiled = torch.compile(full, backend="xla", options={"strict": True})
    x = torch.randn(5, 512)
    compiled(x).square().sum().backward()
    ref(x).square().sum().backward()
    assert_grads(full, ref)
    for p in full.parameters():
        assert p.grad.dtype == p.dtype and p.grad.shape == p.shape
    assert big.weight.grad.untyped_storage().nbytes() == big.weight.numel() * 4
    f64 = [p.grad for p in full.parameters() if p.dtype == torch.float64]
    assert len(_adjacent(f64)) == len(f64) - 1  # one buffer


def _adjacent(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    """Pairs of positions whose memory follows one another's directly: pieces of one packed
    buffer (tensors torch allocated apart never touch: each allocation has a header)."""
    spans = [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors]
    return [(i, j) for i, a in enumerate(spans) for j, b in enumerate(spans) if a[1] == b[0]]


class _Cast(nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.dtype)


def test_user_outputs_are_not_views_of_a_packed_buffer():
    """Several small outputs the user gets back: each may be changed in place, as in eager."""

    def f(x, w):
        return (x * w).sum(0), (x + w).sum(0), torch.relu(w)

    w = torch.randn(4, requires_grad=True)
    x = torch.randn(3, 4)
    outs = torch.compile(f, backend="xla")(x, w)
    ref = f(x, w)
    for o, r in zip(outs, ref):
        with torch.no_grad():
            o.add_(1)
            r.add_(1)
    assert_same(list(outs), list(ref))
    # relu saves its output: eager's backward then refuses the changed one, and so does ours
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as eager:
        sum(r.sum() for r in ref).backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        sum(o.sum() for o in outs).backward()
    assert eager.value is not None
    w.grad = None
    outs = torch.compile(f, backend="xla")(x, w)
    ref = f(x, w.detach().clone().requires_grad_())
    with torch.no_grad():
        outs[0].add_(1)  # (mul's and add's outputs are not saved: both backwards run)
    sum(o.sum() for o in outs[:2]).backward()


def test_packing_plan_groups_by_dtype_and_limit():
    from torch2xla.runtime import _pack

    metas = [
        ((3,), torch.float32),
        ((2, 2), torch.float32),
        ((5,), torch.int64),
        ((1000,), torch.float32),
        ((4,), torch.float32),
        ((2,), torch.int64),
    ]
    p = _pack.plan(metas, range(6), limit=100)
    assert p is not None
    groups = {g.dtype.name: g.positions for g in p.groups}
    assert groups == {"float32": (0, 1, 4), "int64": (2, 5)}
    assert p.rest == (3,)
    assert _pack.plan(metas, [0, 2, 3], limit=100) is None  # no two of a dtype
