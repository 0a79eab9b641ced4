"""The backward as a chain of programs (torch2xla/autodiff/_split.py): gradients, buffers and optimizer
steps as eager's, and each residual freed by the segment that uses it last."""

from __future__ import annotations

import copy
import itertools
import weakref

import pytest
import torch

import torch2xla
from tests._training import assert_grads, twins
from tests._util import assert_same
from tests.models import CNN, MLP, LSTMTagger, TinyGPT
from torch2xla.autodiff import _segments, _split

SEGMENT_MIB = 0.004  # ~4 KiB of residuals per segment: many segments for these small models


def _cases():
    torch.manual_seed(0)
    return {
        "mlp": (MLP(), lambda: torch.randn(16, 32)),
        "cnn_batchnorm": (CNN(), lambda: torch.randn(4, 3, 16, 16)),
        "tiny_gpt": (TinyGPT(), lambda: torch.randint(0, 128, (2, 24))),
        "lstm": (LSTMTagger(), lambda: torch.randn(3, 7, 16)),
    }


class _Spy:
    """Counts split backward calls and segments, and checks after each segment that exactly
    the residuals whose last use it was are gone."""

    def __init__(self, monkeypatch) -> None:
        self.calls, self.segments, self.freed_early = 0, 0, 0
        spy, original = self, _split.SplitBackward.__call__

        def call(split, kept, inputs, cts):
            spy.calls += 1
            refs = [weakref.ref(x) for x in kept]
            programs = split._programs
            wrapped = [_checking(p, seg, refs, spy) for p, seg in zip(programs, split.segments)]
            split._programs = wrapped
            try:
                return original(split, kept, inputs, cts)
            finally:
                split._programs = programs

        monkeypatch.setattr(_split.SplitBackward, "__call__", call)


def _checking(program, seg, refs, spy):
    n_kept = len(refs)

    def run(args):
        out = program(args)
        spy.segments += 1
        gone = {k for k in seg.ins if k < n_kept and refs[k]() is None}
        expected = {seg.ins[p] for p in seg.last if seg.ins[p] < n_kept}
        # args still holds this segment's inputs: they go once the call returns
        assert not gone - expected, "a residual was freed before its last use"
        spy.freed_early += len(expected)
        return out

    return run


@pytest.mark.parametrize("case", ["mlp", "cnn_batchnorm", "tiny_gpt", "lstm"])
def test_split_training_matches_eager(case, monkeypatch):
    model, make_input = _cases()[case]
    spy = _Spy(monkeypatch)
    ref = copy.deepcopy(model)
    compiled = torch.compile(
        model, backend="xla", options={"strict": True, "split_backward": SEGMENT_MIB}
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    for step in range(3):
        x = make_input()
        for m, fn, o in ((model, compiled, opt), (ref, ref, ref_opt)):
            o.zero_grad(set_to_none=True)
            out = fn(x)
            out.float().square().mean().backward()
            if m is ref:
                assert_grads(model, ref)
            o.step()
        assert_same(model.state_dict(), ref.state_dict(), rtol=1e-4, atol=1e-5)
    assert spy.calls == 3
    assert spy.segments >= 2 * spy.calls, "the backward ran as one program"
    assert spy.freed_early > 0


def test_residuals_freed_as_segments_end(monkeypatch):
    """After each segment, the residuals whose last use it was are no longer alive (only the
    segment's own argument list held them), while later segments' residuals are."""
    torch.manual_seed(0)
    model = TinyGPT()
    compiled = torch.compile(model, backend="xla", options={"split_backward": SEGMENT_MIB})
    x = torch.randint(0, 128, (2, 24))
    compiled(x).square().mean().backward()  # traces and compiles the segments
    alive_after: list[tuple[int, int]] = []
    original = _split.SplitBackward.__call__

    def call(split, kept, inputs, cts):
        refs = [weakref.ref(r) for r in kept]
        last_seg = {}
        for j, seg in enumerate(split.segments):
            for k in seg.ins:
                if k < len(refs):
                    last_seg[k] = j
        programs = split._programs

        def after(j, program):
            def run(args):
                out = program(args)
                del args[:]
                alive = {k for k, r in enumerate(refs) if r() is not None}
                should = {k for k, s in last_seg.items() if s > j}
                alive_after.append((len(alive - should), len(should - alive)))
                return out

            return run

        split._programs = [after(j, p) for j, p in enumerate(programs)]
        try:
            return original(split, kept, inputs, cts)
        finally:
            split._programs = programs

    monkeypatch.setattr(_split.SplitBackward, "__call__", call)
    compiled(x).square().mean().backward()
    assert len(alive_after) >= 2
    assert all(extra == 0 for extra, _ in alive_after), (
        f"residuals outlived their last use: {alive_after}"
    )
    assert all(missing == 0 for _, missing in alive_after), (
        f"residuals freed too early: {alive_after}"
    )


def test_retained_graph_runs_one_program(monkeypatch):
    """retain_graph keeps the residuals for a second backward: that backward is one program;
    the second one frees the graph and runs split. Gradients accumulate as eager's."""
    spy = _Spy(monkeypatch)
    torch.manual_seed(0)
    model = MLP()
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"split_backward": SEGMENT_MIB})
    x = torch.randn(8, 32)
    loss = compiled(x).square().mean()
    loss.backward(retain_graph=True)
    loss.backward()
    ref_loss = ref(x).square().mean()
    ref_loss.backward(retain_graph=True)
    ref_loss.backward()
    assert_grads(model, ref)
    assert spy.calls == 1


def test_auto_is_one_program_on_cpu(monkeypatch):
    spy = _Spy(monkeypatch)
    model = MLP()
    compiled = torch.compile(model, backend="xla")
    compiled(torch.randn(8, 32)).sum().backward()
    assert spy.calls == 0
    assert _split.policy("auto", cuda=False) is None
    assert _split.policy("auto", cuda=True)(100 << 20) is None  # small: one program
    # a bucket-sized graph of Dynamo's DDP optimizer: four dispatches cost more than they save
    assert _split.policy("auto", cuda=True)(600 << 20) is None
    assert _split.policy("auto", cuda=True)(1 << 30) == _split.Schedule()  # cut for the peak
    assert _split.policy(4, cuda=False)(1 << 30) == _split.Schedule(segment_bytes=4 << 20)


@pytest.mark.parametrize("bad", ["yes", 0, -1.5, None])
def test_bad_option_raises(bad):
    with pytest.raises(ValueError, match="split_backward must be"):
        torch2xla.Options.parse(None, {"split_backward": bad})


def test_partition_covers_every_step_once():
    import jax
    import jax.numpy as jnp

    def f(kept, inputs, cts):
        a, b, c = kept
        (w,) = inputs
        (g,) = cts
        h = jnp.tanh(g @ w.T) * a
        h = (h @ w) * b + jnp.transpose(c).T
        return [h.sum(0), (h * a).sum()]

    arr = jnp.ones((64, 64))
    closed = jax.make_jaxpr(f)([arr, arr, arr], [arr], [arr])
    flat = _segments.flatten(closed)
    segments = _segments.partition(flat, n_kept=3, segment_bytes=1)
    assert len(segments) >= 2
    steps = [s for seg in segments for s in seg.steps]
    assert sorted(map(id, steps)) == sorted(id(s) for s in flat.steps)
    defined = set(range(flat.n_in))
    for seg in segments:  # every segment reads only what exists before it
        assert set(seg.ins) <= defined
        defined |= {k for s in seg.steps for k in s.outs}


def test_cuts_for_peak_keep_the_first_segment_small():
    """Every residual is alive while the first segment runs: cut for the lowest estimated peak,
    it frees less than the quarter a fixed cut gives it, and no segment frees more than a
    quarter of the residuals (XLA's temporaries grow with a segment's length)."""
    import jax
    import jax.numpy as jnp

    def f(kept, inputs, cts):
        (w,) = inputs
        (h,) = cts
        grads = []
        for a in reversed(kept):  # a backward reads the last residual first
            grads.append((h * a).sum(0))  # a gradient: it lives to the end
            h = jnp.tanh(h @ w) * a
        return [h, *grads]

    arr = jnp.ones((32, 32))
    n_kept = 32
    flat = _segments.flatten(jax.make_jaxpr(f)([arr] * n_kept, [arr], [arr]))
    order = _segments._order(flat, n_kept)
    usage = _segments._Usage(order, flat, n_kept)
    quarter = n_kept * arr.nbytes // 4
    cuts = usage.cuts_for_peak(max_segments=6)
    fixed = usage.cuts_by_bytes(quarter)
    assert usage.peak(cuts) < usage.peak(fixed)
    bounds = [0, *cuts, len(order)]
    freed = [sum(usage.freed_at[a:b]) for a, b in itertools.pairwise(bounds)]
    assert freed[0] < quarter and max(freed) <= quarter, freed
    segments = _segments.partition(flat, n_kept)
    assert [len(seg.steps) for seg in segments] == [b - a for a, b in itertools.pairwise(bounds)]


def test_first_segment_is_halved_where_it_holds_the_peak():
    """Layers of one size, cut into segments of equal length by the bound on a segment's
    residuals: the first, where every residual is alive, is cut in two, so what it holds
    beside them (XLA's temporaries grow with its length) is about half; the estimate is no
    higher for it."""
    import jax
    import jax.numpy as jnp

    def f(kept, inputs, cts):
        (w,) = inputs
        (h,) = cts
        grads = []
        for a in reversed(kept):
            grads.append((h * a).sum(0))
            h = jnp.tanh(h @ w) * a
        return [h, *grads]

    arr = jnp.ones((32, 32))
    n_kept = 24
    flat = _segments.flatten(jax.make_jaxpr(f)([arr] * n_kept, [arr], [arr]))
    usage = _segments._Usage(_segments._order(flat, n_kept), flat, n_kept)
    cuts = usage.cuts_for_peak(max_segments=6)
    lengths = [b - a for a, b in itertools.pairwise([0, *cuts, len(usage.inner)])]
    # two halves of a segment as long as the others (the last also holds the final steps)
    assert max(lengths[:2]) < min(lengths[2:-1]) <= lengths[0] + lengths[1], lengths
    assert usage.peak(cuts) <= usage.peak(cuts[1:])


def test_split_with_remat_matches_eager(monkeypatch):
    """remat's per-layer checkpoints are inlined into the segments; gradients as eager's."""
    spy = _Spy(monkeypatch)
    torch.manual_seed(0)
    model = TinyGPT()
    ref = copy.deepcopy(model)
    compiled = torch.compile(
        model, backend="xla", options={"remat": True, "split_backward": SEGMENT_MIB}
    )
    x = torch.randint(0, 128, (2, 24))
    compiled(x).square().mean().backward()
    ref(x).square().mean().backward()
    assert_grads(model, ref)
    assert spy.calls == 1 and spy.segments >= 2


def test_relu_masks_are_not_handed_between_segments(monkeypatch):
    """JAX's checkpoint recomputes every relu mask at the start of the backward; each must run
    next to its reader instead, not be made in the first segment and handed to the one that
    reads it (on an H100, 579 MiB of ResNet-50's masks were)."""
    made = []
    original = _split.SplitBackward.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(_split.SplitBackward, "__init__", init)
    torch.manual_seed(0)
    layers = []
    for _ in range(
        8
    ):  # relu's output feeds the next Linear, which keeps it: the mask is recomputed
        layers += [torch.nn.Linear(64, 64), torch.nn.ReLU()]
    compiled, model, ref = twins(
        torch.nn.Sequential(*layers), options={"split_backward": SEGMENT_MIB}
    )
    x = torch.randn(32, 64)
    for m in (compiled, ref):
        m(x).square().mean().backward()
    assert_grads(model, ref)
    (split,) = made
    assert len(split.segments) >= 4
    avals = {
        k: v.aval
        for seg in split.segments
        for s in seg.steps
        for k, v in zip(s.outs, s.eqn.outvars)
    }
    handed = [avals[k] for seg in split.segments[:-1] for k in seg.outs if k not in split._finals]
    assert handed and not [a for a in handed if a.dtype == bool], handed


@pytest.mark.parametrize(
    "fn", [lambda x: x * 2.0, lambda x: x.clone(), lambda x: x.sum()], ids=["scale", "clone", "sum"]
)
def test_backward_of_at_most_one_step_is_not_cut(fn):
    x = torch.randn(4, requires_grad=True)
    ref = x.detach().clone().requires_grad_()
    torch.compile(fn, backend="xla", options={"split_backward": True})(x).sum().backward()
    fn(ref).sum().backward()
    assert_same(x.grad, ref.grad)


def test_attention_dropout_through_segments_has_eager_gradient_on_average(monkeypatch):
    """Attention with dropout, its backward in segments (the mask is drawn again from a PRNG
    key inside one). The loss is linear in the output, so the gradient averaged over masks is
    eager's gradient without dropout (each kept weight is scaled by 1 / (1 - p))."""
    spy = _Spy(monkeypatch)
    import torch.nn.functional as F

    def f(q, k, v, p):
        out = F.scaled_dot_product_attention(q.tanh(), k.tanh(), v.tanh(), dropout_p=p)
        return (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum()

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 32, 8, requires_grad=True) for _ in range(3))
    compiled = torch.compile(f, backend="xla", options={"split_backward": True, "strict": True})
    total = [torch.zeros_like(t) for t in (q, k, v)]
    draws = 300
    for _ in range(draws):
        for t, g in zip(total, torch.autograd.grad(compiled(q, k, v, 0.1), (q, k, v))):
            t += g / draws
    assert spy.calls == draws and spy.segments > draws
    for got, want in zip(total, torch.autograd.grad(f(q, k, v, 0.0), (q, k, v)), strict=True):
        assert (got - want).norm() <= 0.05 * want.norm(), ((got - want).norm() / want.norm()).item()
