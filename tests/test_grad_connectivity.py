"""Issue 22 item 4: which inputs get a gradient (a tensor, zeros where the derivative is zero)
and which get None follows eager's autograd graph (``torch2xla/autodiff/_connected.py``), on every path:
one program, a graph split around an op run in eager, a split backward, packed gradients,
create_graph. Written as users write it, compared with eager including None-ness."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests._training import ran_in_xla
from torch2xla.autodiff import _split
from torch2xla.runtime import _pack

F = nn.functional


def _compile(fn, **options):
    return torch.compile(fn, backend="xla", options={"strict": True, **options})


def _leaf(*shape, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=dtype) * 3).requires_grad_()


def _copies(leaves):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in leaves]


def _grads(fn, leaves, **kwargs):
    """``torch.autograd.grad`` of ``fn(*copies).sum()`` for fresh copies of ``leaves``, or the
    error it raises (type and message)."""
    xs = _copies(leaves)
    try:
        out = fn(*xs)
        return torch.autograd.grad(out.sum(), xs, **kwargs)
    except RuntimeError as e:
        return e


def _assert_same(got, expected):
    """Same gradients, None where eager has None, or the same error."""
    if isinstance(expected, Exception):
        assert isinstance(got, type(expected)), f"eager raised {expected!r}, we gave {got!r}"
        return
    assert not isinstance(got, Exception), f"eager gave {expected}, we raised {got!r}"
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert (g is None) == (e is None), f"grad[{i}]: {g} where eager gives {e}"
        if e is not None:
            assert g.shape == e.shape and g.dtype == e.dtype, i
            torch.testing.assert_close(g, e)


# Functions whose inputs reach the output only through ops whose derivative is zero (or
# through an empty tensor): eager's gradient is zeros, not None.
ZERO_DERIVATIVE = {
    "round": lambda x, w: x.round() * 2 + w,
    "floor": lambda x, w: x.floor() + w,
    "ceil_trunc": lambda x, w: x.ceil() * x.trunc() + w,
    "sign_sgn": lambda x, w: torch.sign(x) + torch.sgn(x) * w,
    "nan_to_num_clamps": lambda x, w: torch.nan_to_num(x + float("inf"), posinf=1.0) + w,
    "fill_": lambda x, w: x.clone().fill_(2.0) * w,
    "zero_": lambda x, w: x.clone().zero_() + w,
    "relu6_saturated": lambda x, w: F.relu6(x.abs() + 7) + w,
    "hardtanh_saturated": lambda x, w: F.hardtanh(x.abs() + 2) * w,
    "empty_slice": lambda x, w: torch.cat([x[:0], w]),
    "bernoulli": lambda x, w: torch.bernoulli(torch.full_like(x, 0.5) + x * 0) + w,
    "masked_fill_all": lambda x, w: x.masked_fill(torch.ones_like(x, dtype=torch.bool), 1.0) + w,
}


@pytest.mark.parametrize("name", list(ZERO_DERIVATIVE))
def test_autograd_grad_through_zero_derivative_ops_gives_zeros(name):
    fn = ZERO_DERIVATIVE[name]
    leaves = (_leaf(4), _leaf(4, seed=1))
    compiled = _compile(fn)
    _assert_same(_grads(compiled, leaves), _grads(fn, leaves))
    assert ran_in_xla(compiled(*_copies(leaves)))


def test_round_of_a_compiled_output_and_inside():
    x = _leaf(5)
    (g,) = torch.autograd.grad(_compile(lambda x: x * 2)(x).round().sum(), x)
    torch.testing.assert_close(g, torch.zeros(5))
    (g,) = torch.autograd.grad(_compile(lambda x: (x * 2).round())(x).sum(), x)
    torch.testing.assert_close(g, torch.zeros(5))


# Inputs eager does not connect: None, and torch.autograd.grad raises without allow_unused.
NOT_CONNECTED = {
    "detach": lambda x, w: x.detach() * w,
    "integer": lambda x, w: x.long().float() + w,
    "comparison": lambda x, w: (x > 0).float() * w,
    "argmax": lambda x, w: w * x.argmax(),
    "factory": lambda x, w: torch.zeros_like(x) + torch.ones(x.shape[0]) * w,
    "histc": lambda x, w: torch.histc(x, bins=4) + w,
    "unused": lambda x, w: w * 2,
    # connected, but the p = 0 norm's backward returns an undefined gradient, which stays
    # undefined down the graph (through x * 2 too)
    "vector_norm_ord0": lambda x, w: torch.linalg.vector_norm(x * 2, ord=0) * w,
    "norm_p0": lambda x, w: torch.norm(x, p=0) + w,
    "linalg_norm_ord0_dim": lambda x, w: torch.linalg.norm(x[None], ord=0, dim=1) * w,
    "pairwise_distance_p0": lambda x, w: F.pairwise_distance(x[None], w[None].detach(), p=0) + w,
}


@pytest.mark.parametrize("name", list(NOT_CONNECTED))
@pytest.mark.parametrize("allow_unused", [True, False])
def test_unconnected_inputs_get_none_as_in_eager(name, allow_unused):
    fn = NOT_CONNECTED[name]
    leaves = (_leaf(4), _leaf(4, seed=1))
    _assert_same(
        _grads(_compile(fn), leaves, allow_unused=allow_unused),
        _grads(fn, leaves, allow_unused=allow_unused),
    )


def test_no_grad_region_cuts_but_round_does_not():
    def f(x, w, v):
        with torch.no_grad():
            a = x * 2
        return a * w.round() + v.detach()

    leaves = (_leaf(3), _leaf(3, seed=1), _leaf(3, seed=2))
    _assert_same(
        _grads(_compile(f), leaves, allow_unused=True), _grads(f, leaves, allow_unused=True)
    )


def test_empty_input_gets_zeros_of_its_shape():
    def f(x, e):
        return x.sum() + e.sum() + (e * 2).mean(0).sum()

    leaves = (_leaf(3), _leaf(0, 3, seed=1))
    got = _grads(_compile(f), leaves)
    _assert_same(got, _grads(f, leaves))
    assert got[1].shape == (0, 3)


def test_dot_grad_after_backward_is_zeros_for_a_floor_only_parameter():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.step = nn.Parameter(torch.full((4,), 0.7))
            self.unused = nn.Parameter(torch.ones(4))

        def forward(self, x):
            return self.lin(x) + self.step.floor()

    torch.manual_seed(0)
    model, ref = M(), M()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 4)
    _compile(model)(x).sum().backward()
    ref(x).sum().backward()
    torch.testing.assert_close(model.step.grad, torch.zeros(4))
    assert ref.step.grad is not None and model.unused.grad is None and ref.unused.grad is None


def _optimizer_run(model, x, compiled: bool):
    net = _compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5)
    for _ in range(2):
        opt.zero_grad()
        net(x).square().mean().backward()
        opt.step()
    return model


def test_adamw_steps_a_parameter_that_only_feeds_floor_and_skips_an_unused_one():
    """Eager gives the floor-only parameter zeros, so AdamW decays it; the unused one gets
    None, so AdamW leaves it alone. Both must happen here too."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.offset = nn.Parameter(torch.full((3,), 1.5))
            self.unused = nn.Parameter(torch.full((3,), 2.0))

        def forward(self, x):
            return self.lin(x) + self.offset.floor()

    torch.manual_seed(0)
    base = M()
    x = torch.randn(4, 3)
    ours, ref = M(), M()
    ours.load_state_dict(base.state_dict())
    ref.load_state_dict(base.state_dict())
    _optimizer_run(ours, x, True)
    _optimizer_run(ref, x, False)
    assert not torch.equal(ref.offset, base.offset)  # decayed in eager
    for (name, p), r in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, r, msg=lambda m, n=name: f"{n}: {m}")
        assert (p.grad is None) == (r.grad is None), name


# -- the other paths ---------------------------------------------------------------------------
def test_graph_split_around_an_eager_op():
    """An op run in eager splits the graph; each XLA partition finds connectivity itself."""

    def f(x, w, v):
        h = x.round() * w  # partition 1
        h = h.sin()  # eager
        return h * v.floor() + w.detach()  # partition 2

    leaves = (_leaf(4), _leaf(4, seed=1), _leaf(4, seed=2))
    compiled = torch.compile(f, backend="xla", options={"eager_ops": [torch.ops.aten.sin]})
    got = _grads(compiled, leaves, allow_unused=True)
    _assert_same(got, _grads(f, leaves, allow_unused=True))


def test_norm_p0_in_a_split_graph_and_beside_a_connected_use():
    """The ATen partition's own fake run sees the p = 0 norm's undefined gradient too (x:
    None through the eager sin); a second, differentiable use of an input still gives it a
    gradient (v)."""

    def f(x, w, v):
        n = torch.linalg.vector_norm(x.sin(), ord=0)  # sin runs in eager
        return n * w + torch.linalg.vector_norm(v, ord=0) * v.cos()

    leaves = (_leaf(4), _leaf(4, seed=1), _leaf(4, seed=2))
    compiled = torch.compile(f, backend="xla", options={"eager_ops": [torch.ops.aten.sin]})
    for allow_unused in (True, False):
        _assert_same(
            _grads(compiled, leaves, allow_unused=allow_unused),
            _grads(f, leaves, allow_unused=allow_unused),
        )


def test_split_partition_output_eager_would_not_track_is_not_tracked():
    def f(x):
        a = x.detach() * 2  # partition output not connected to x
        return a.sin(), (x * 3).sin()

    x = _leaf(3)
    compiled = torch.compile(f, backend="xla", options={"eager_ops": [torch.ops.aten.sin]})
    got = compiled(x)
    expected = f(x)
    assert [o.requires_grad for o in got] == [o.requires_grad for o in expected]


class _FloorNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
        self.scale = nn.Parameter(torch.full((16,), 1.3))
        self.shift = nn.Parameter(torch.full((16,), -0.4))
        self.unused = nn.Parameter(torch.ones(16))

    def forward(self, x):
        h = self.a(x).tanh() * self.scale.round()
        return self.b(h) + self.shift.ceil()


@pytest.mark.parametrize(
    "options", [{"split_backward": 0.0005}, {}], ids=["split_backward", "packed"]
)
def test_split_backward_and_packed_gradients(options, monkeypatch):
    """Small gradients reach torch packed in one buffer (CPU); a split backward runs as
    segments. Zeros for the round/ceil-only parameters, None for the unused one."""
    seen = []
    for cls in (_split.SplitBackward, _pack.Packing):
        method = "__call__" if cls is _split.SplitBackward else "unpack"
        original = getattr(cls, method)
        monkeypatch.setattr(
            cls, method, lambda self, *a, _o=original, _c=cls: (seen.append(_c), _o(self, *a))[1]
        )
    torch.manual_seed(0)
    model, ref = _FloorNet(), _FloorNet()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(8, 16)
    _compile(model, **options)(x).square().sum().backward()
    ref(x).square().sum().backward()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (r.grad is None), name
        if r.grad is not None:
            torch.testing.assert_close(p.grad, r.grad, rtol=1e-4, atol=1e-5)
    assert model.unused.grad is None and torch.equal(model.scale.grad, torch.zeros(16))
    assert (_split.SplitBackward in seen) == ("split_backward" in options)
    assert _pack.Packing in seen or "split_backward" in options


# -- create_graph ------------------------------------------------------------------------------
def _second_order(fn, leaves, *, allow_unused=True):
    xs = _copies(leaves)
    try:
        first = torch.autograd.grad(fn(*xs).sum(), xs, create_graph=True, allow_unused=True)
        tracked = tuple(g is not None and g.requires_grad for g in first)
        total = sum(g.sum() for g in first if g is not None and g.requires_grad)
        if not torch.is_tensor(total):
            return first, tracked, None
        second = torch.autograd.grad(total, xs, allow_unused=allow_unused)
        return first, tracked, second
    except RuntimeError as e:
        return e, None, None


@pytest.mark.parametrize(
    "name,fn",
    [
        ("floor_times_x", lambda x, w: x.floor() * x + w * w),
        ("round_only", lambda x, w: x.round() + w.exp()),
        ("detached", lambda x, w: x.detach() * w * w),
        ("sign_times_w", lambda x, w: torch.sign(x) * w),
    ],
)
def test_create_graph_gradients_and_their_gradients(name, fn):
    leaves = (_leaf(4), _leaf(4, seed=1))
    got, expected = _second_order(_compile(fn), leaves), _second_order(fn, leaves)
    _assert_same(got[0], expected[0])
    assert got[1] == expected[1], "which first-order gradients are tracked"
    if expected[2] is not None:
        _assert_same(got[2], expected[2])


def test_a_graph_torch_cannot_run_on_fake_tensors_warns_and_gives_gradients(monkeypatch):
    """Where the fake run fails, every input requiring grad gets a gradient (zeros, never a
    missing one), and a warning says so."""
    import torch2xla
    from torch2xla.autodiff import _connected

    def broken(gm, args):
        raise RuntimeError("no fake kernel")

    monkeypatch.setattr(_connected, "run_fake", broken)
    monkeypatch.setattr("torch2xla.runtime._program.run_fake", broken)

    def f(x, w):
        return (x.round() * w).sin()

    leaves = (_leaf(4), _leaf(4, seed=1))
    compiled = torch.compile(f, backend="xla", options={"eager_ops": [torch.ops.aten.sin]})
    with pytest.warns(torch2xla.GradientConnectivityWarning, match="no fake kernel") as record:
        got = _grads(compiled, leaves)
    _assert_same(got, _grads(f, leaves))
    assert record[0].filename == __file__  # the user's call, not torch2xla's frame


def test_a_whole_graph_reads_connectivity_from_dynamo_without_running_anything(monkeypatch):
    def no_fake_run(*args, **kwargs):
        raise AssertionError("a whole graph ran on fake tensors")

    monkeypatch.setattr("torch2xla.runtime._program.traced_links", no_fake_run)
    fn = ZERO_DERIVATIVE["round"]
    leaves = (_leaf(4), _leaf(4, seed=1))
    _assert_same(_grads(_compile(fn), leaves), _grads(fn, leaves))
