"""Issue 28.2: a split backward hands each gradient to autograd when the segment that computes
it ends (``_release.Gate``), so that hooks on gradients (DDP's buckets, a post-accumulate-grad
hook) run while later segments are still to come; gradients and their semantics as eager's."""

from __future__ import annotations

import copy
import tempfile

import pytest
import torch
from torch import nn

from tests._training import assert_grads
from torch2xla.autodiff import _split

SPLIT = {"strict": True, "split_backward": 0.002}  # MiB of residuals per segment: several


class _Deep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(16, 48), nn.Linear(48, 48), nn.Linear(48, 48), nn.Linear(48, 8)]
        )
        self.unused = nn.Parameter(torch.randn(3))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.tanh(layer(x))
        return self.layers[-1](x)


@pytest.fixture
def segments_run(monkeypatch):
    """A list whose length is the number of segment programs run so far."""
    ran: list[int] = []
    original = _split._Program.__call__

    def call(self, args):
        out = original(self, args)
        ran.append(1)
        return out

    monkeypatch.setattr(_split._Program, "__call__", call)
    return ran


def _twins():
    torch.manual_seed(0)
    model = _Deep()
    ref = copy.deepcopy(model)
    return torch.compile(model, backend="xla", options=SPLIT), model, ref


def _loss(out):
    return out.square().mean()


@pytest.fixture(params=["alone", "process group"])
def process_group(request):
    """In a process group (one rank, gloo), where the split is decided by the first forward,
    or outside one, where the first backward decides; the steps whose hooks must come early."""
    import torch.distributed as dist

    if request.param == "alone":
        yield range(1, 3)
        return
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            yield range(3)
        finally:
            dist.destroy_process_group()


def test_gradients_reach_hooks_before_the_last_segment(segments_run, process_group):
    compiled, model, ref = _twins()
    x = torch.randn(64, 16)
    at_hook: dict[str, int] = {}

    def hook(name):
        return lambda p: at_hook.update({name: len(segments_run)})

    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(hook(name))
    # in a process group from the first step on (DDP orders its buckets by the first step's
    # gradients), else from the second
    for step in range(3):
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        at_hook.clear()
        segments_run.clear()
        _loss(compiled(x)).backward()
        _loss(ref(x)).backward()
        total = len(segments_run)
        assert total >= 3, "the backward should run as several segments"
        assert_grads(model, ref, rtol=1e-5, atol=1e-6)
        if step not in process_group:
            continue
        assert "unused" not in at_hook and model.unused.grad is None
        # the last layer's gradients are final early; the first layer's in a later segment
        assert at_hook["layers.3.weight"] < total, at_hook
        assert at_hook["layers.3.weight"] < at_hook["layers.0.weight"], at_hook
        assert len(set(at_hook.values())) >= 2, at_hook


@pytest.mark.parametrize("which", ["first_group", "last_group", "both"])
def test_autograd_grad_with_inputs(which):
    compiled, model, ref = _twins()
    x = torch.randn(64, 16)
    _loss(compiled(x)).backward()
    names = {
        "first_group": ["layers.3.weight"],
        "last_group": ["layers.0.weight"],
        "both": ["layers.0.bias", "layers.3.weight"],
    }[which]
    params, ref_params = dict(model.named_parameters()), dict(ref.named_parameters())
    got = torch.autograd.grad(_loss(compiled(x)), [params[n] for n in names])
    expected = torch.autograd.grad(_loss(ref(x)), [ref_params[n] for n in names])
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)


def test_retain_graph_then_freed_then_error():
    compiled, model, ref = _twins()
    x = torch.randn(64, 16)
    _loss(compiled(x)).backward()
    _loss(ref(x)).backward()
    loss, ref_loss = _loss(compiled(x)), _loss(ref(x))
    loss.backward(retain_graph=True)
    ref_loss.backward(retain_graph=True)
    loss.backward()
    ref_loss.backward()
    assert_grads(model, ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_double_backward_through_the_chain():
    compiled, model, ref = _twins()
    x = torch.randn(64, 16)
    _loss(compiled(x)).backward()
    model.zero_grad(set_to_none=True)
    for m, run in ((model, compiled), (ref, ref)):
        params = [p for p in m.parameters() if p is not m.unused]
        grads = torch.autograd.grad(_loss(run(x)), params, create_graph=True)
        sum(g.square().sum() for g in grads).backward()
    assert_grads(model, ref, rtol=1e-4, atol=1e-6)


def test_input_gradient_through_the_chain():
    compiled, model, ref = _twins()
    x = torch.randn(64, 16)
    _loss(compiled(x)).backward()
    xs = [torch.randn(64, 16, generator=torch.Generator().manual_seed(1)) for _ in range(2)]
    xs = [t.requires_grad_() for t in xs]
    _loss(compiled(xs[0] * 2)).backward()
    _loss(ref(xs[1] * 2)).backward()
    torch.testing.assert_close(xs[0].grad, xs[1].grad, rtol=1e-5, atol=1e-6)
