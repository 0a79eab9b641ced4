"""The per-call path: cached JAX views of parameters must never serve stale or wrong data.

``ViewCache`` imports a tensor that comes back at the same input position once and then reuses
its zero-copy JAX view. Every way torch can change such a tensor between calls is checked
against eager here.
"""

import copy
import gc
import weakref

import pytest
import torch
from torch import nn

from tests._util import assert_same
from torch2xla.runtime._interop import ViewCache
from torch2xla.runtime._jax_scope import x64


def _pair(model):
    ref = copy.deepcopy(model)
    return torch.compile(model, backend="xla", options={"strict": True}), model, ref


@torch.no_grad()
def test_in_place_parameter_updates_are_seen():
    compiled, model, ref = _pair(nn.Linear(6, 3))
    x = torch.randn(4, 6)
    for step in range(4):
        assert_same(compiled(x), ref(x))
        for p, q in zip(model.parameters(), ref.parameters()):
            p.mul_(0.5).add_(step)  # what an optimizer step does
            q.mul_(0.5).add_(step)


@torch.no_grad()
def test_reassigned_data_is_seen():
    compiled, model, ref = _pair(nn.Linear(6, 3))
    x = torch.randn(4, 6)
    compiled(x), compiled(x)
    new = torch.randn(3, 6)
    model.weight.data = new.clone()
    ref.weight.data = new.clone()
    assert_same(compiled(x), ref(x))
    model.weight.data.add_(1.0)  # through .data: the version counter of weight does not move
    ref.weight.data.add_(1.0)
    assert_same(compiled(x), ref(x))


@torch.no_grad()
def test_inputs_changing_every_call():
    compiled, _, ref = _pair(nn.Linear(6, 3))
    for _ in range(4):
        x = torch.randn(4, 6)
        assert_same(compiled(x), ref(x))
    x = torch.randn(4, 6)
    compiled(x), compiled(x)
    x.add_(3.0)  # the same input tensor, written in place between calls
    assert_same(compiled(x), ref(x))


@torch.no_grad()
def test_misaligned_parameter_is_not_cached_stale():
    # A parameter 4 bytes into its storage: JAX copies such data, so the copy must not be reused.
    model = nn.Linear(6, 3)
    base = torch.randn(3 * 6 + 1)
    model.weight = nn.Parameter(base[1:].view(3, 6))
    assert model.weight.data_ptr() % 64 != 0
    compiled, model, ref = _pair(model)
    x = torch.randn(2, 6)
    for _ in range(3):
        assert_same(compiled(x), ref(x))
        model.weight.add_(1.0)
        ref.weight.add_(1.0)


def test_batchnorm_buffers_across_calls():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    compiled, model, ref = _pair(model)
    for _ in range(3):
        x = torch.randn(2, 3, 8, 8)
        with torch.no_grad():
            assert_same(compiled(x), ref(x))
        assert_same(dict(model.named_buffers()), dict(ref.named_buffers()))


@torch.no_grad()
def test_bfloat16_and_int64_parameters():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(5).bfloat16())
            self.register_buffer("big", torch.tensor([2**40 + 1, -(2**35)]))

        def forward(self, x, i):
            return x * self.w, i + self.big

    compiled, model, ref = _pair(M())
    x, i = torch.randn(5).bfloat16(), torch.tensor([3, 2**33])
    for _ in range(3):
        assert_same(compiled(x, i), ref(x, i))
        model.big.add_(2**41)
        ref.big.add_(2**41)


@torch.no_grad()
def test_int64_constant_inside_graph():
    def f(x):
        return x + torch.tensor([2**40 + 1, 7])

    x = torch.tensor([1, 2])
    out = torch.compile(f, backend="xla")(x)
    assert out.dtype == torch.int64
    assert out.tolist() == [2**40 + 2, 9]


@torch.no_grad()
def test_outputs_do_not_alias_parameters():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4))

        def forward(self, x):
            return self.w.clone(), x + 0

    model = M()
    compiled = torch.compile(model, backend="xla")
    x = torch.randn(4)
    compiled(x), compiled(x)
    w, y = compiled(x)
    before = model.w.clone()
    w.add_(1.0)
    y.add_(1.0)
    assert torch.equal(model.w, before)
    assert not torch.equal(x, y)


def test_view_cache_pins_neither_inputs_nor_dead_parameters():
    cache = ViewCache(2)
    param = torch.randn(64)
    with x64():
        for _ in range(3):
            x = torch.randn(64)
            views, _ = cache([param, x])
            assert torch.equal(torch.from_dlpack(views[0]), param)
        assert cache._views[0] is not None  # the parameter is cached
        assert cache._views[1] is None  # the changing input is not
        x_ref = weakref.ref(x)
        del x, views
        cache([param, torch.randn(64)])
        gc.collect()
        assert x_ref() is None
        p_ref = weakref.ref(param)
        del param
        gc.collect()
        assert p_ref() is None
        assert cache._views[0] is None  # dropped with its tensor


def test_view_cache_fence_after_write():
    cache = ViewCache(1)
    p = torch.randn(8)
    with x64():
        cache([p]), cache([p])  # the second call caches p
        assert cache([p])[1] is False  # nothing written, nothing imported: no fence needed
        p.add_(1.0)
        assert cache([p])[1] is True  # written since: a CUDA call must fence
        assert cache([p])[1] is False


def test_view_cache_steady_path_sees_swaps_writes_and_new_objects():
    # After two calls the cache checks its cached positions in one pass (ids, data pointers):
    # a swapped .data, another tensor object, a dead parameter whose id a new tensor reuses,
    # and torch's writes (a fence where nothing was imported afresh) all go the long way.
    cache = ViewCache(3)
    p, q = torch.randn(8), torch.randn(8)

    def check(tensors, fence=None):
        views, fenced = cache(tensors)
        for v, t in zip(views, tensors):
            assert torch.equal(torch.from_dlpack(v), t)
        if fence is not None:
            assert fenced is fence
        return views

    with x64():
        for _ in range(3):
            check([p, q, torch.randn(8)], fence=False)  # (the third is imported every call)
        assert cache._fast is not None and cache._fast.volatile == (2,)
        p.add_(1.0)
        check([p, q, torch.randn(8)], fence=False)  # imported afresh: no fence needed
        p.data = torch.randn(8)  # same object, other memory
        check([p, q, torch.randn(8)])
        check([q, p, torch.randn(8)])  # other objects at the positions
        for _ in range(2):
            check([p, q, q], fence=False)  # every position cached
        q.mul_(2.0)
        check([p, q, q], fence=True)
        check([p, q, q], fence=False)
        del q
        gc.collect()
        assert cache._fast is None  # a cached tensor died
        for _ in range(3):
            r = torch.randn(8)  # (may reuse the dead one's id)
            check([p, r, r])


def test_view_cache_of_a_cpu_program_tracks_no_writes():
    cache = ViewCache(1, writes=False)  # (a CPU program's: its calls need no fence)
    p = torch.randn(8)
    with x64():
        cache([p]), cache([p])
        p.add_(1.0)
        views, fence = cache([p])
    assert fence is False
    assert torch.equal(torch.from_dlpack(views[0]), p)  # the cached view sees the write


def test_steady_calls_skip_compiled_call_frame_and_keep_eager_results(monkeypatch):
    # After its first call, an executable is called through the C++ callable that
    # jax.stages.Compiled.__call__ hands every call to (``direct_call``): inference, the
    # training forward and the backward alike, with eager's results step after step.
    import jax

    from tests._util import ProgramCounter

    counter = ProgramCounter(monkeypatch)
    torch.manual_seed(0)
    compiled, model, ref = _pair(nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2)))
    x = torch.randn(4, 6)
    for _ in range(3):
        with torch.no_grad():
            assert_same(compiled(x), ref(x))
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        compiled(x).square().sum().backward()
        ref(x).square().sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad)
    # (Dynamo traces the no_grad call and the training call as two graphs)
    (inference,) = [p for p in counter.programs if p._infer.compiled is not None]
    (training,) = [p for p in counter.programs if p._train_cache]
    if getattr(inference._infer.compiled, "_call", None) is None:
        pytest.skip("this jax's Compiled keeps no C++ callable: called as it is")
    assert inference._infer.call is not inference._infer.compiled
    assert not isinstance(inference._infer.call, jax.stages.Compiled)
    (fns,) = training._train_cache.values()
    assert fns.fwd.compiled._direct is not None
    assert fns.bwd._direct  # the freed graph's backward


def test_half_precision_product_gradients_are_rounded_once():
    # On the CPU a half-precision product's gradients are torch's: products of the half
    # values (exact in float32), accumulated in float32 and rounded once to the half dtype,
    # a rounding XLA keeps even where the gradient is widened again (autocast's float32 leaf).
    # (On CUDA products return half precision directly: ``_linalg._half_out``.)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from torch2xla.ops._linalg import half_product

    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((4, 64)), jnp.bfloat16)
    b = jnp.asarray(rng.standard_normal((64, 3)), jnp.bfloat16)
    ct = jnp.asarray(rng.standard_normal((4, 3)), jnp.bfloat16)

    def widened(a, b):  # (the consumer widens the gradients again)
        _, vjp = jax.vjp(half_product, a, b)
        return [g.astype(jnp.float32) for g in vjp(ct.astype(jnp.float32))]

    da, db = jax.jit(widened)(a, b)
    a64, b64, ct64 = (np.asarray(v, np.float64) for v in (a, b, ct))
    want_a = np.asarray(jnp.asarray(ct64 @ b64.T, jnp.float32).astype(jnp.bfloat16), np.float32)
    want_b = np.asarray(jnp.asarray(a64.T @ ct64, jnp.float32).astype(jnp.bfloat16), np.float32)
    # (float32 accumulation of 64 or 4 exact products, rounded once: at most the float64 sum's
    # bfloat16 rounding, or its neighbour where the float32 sum lands across a tie)
    for got, want in ((np.asarray(da), want_a), (np.asarray(db), want_b)):
        assert np.array_equal(got.astype(jnp.bfloat16).astype(np.float32), got)  # rounded
        ulp = np.abs(want) * 2.0**-7
        assert (np.abs(got - want) <= ulp).all()


def test_bfloat16_linear_and_conv_gradients_match_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(), nn.Linear(8 * 36, 5))
    model = model.to(torch.bfloat16)
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    x = torch.randn(4, 3, 6, 6, dtype=torch.bfloat16)
    out, expected = compiled(x), ref(x)
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)
    out.float().square().sum().backward()
    expected.float().square().sum().backward()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        assert p.grad.dtype == torch.bfloat16
        torch.testing.assert_close(p.grad, q.grad, atol=5e-2, rtol=5e-2)


# -- outputs (to_torch_cpu) and parameters as jax.Arrays (ViewCache), through Compiled ------------
_OUTPUT_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.bool,
    torch.complex64,
]


@torch.no_grad()
def test_outputs_of_every_dtype_are_writable_and_match_eager():
    def f(x, k):
        return [(x * k).to(d) for d in _OUTPUT_DTYPES] + [x.sum(), x[:0], (x > 4).to(torch.uint8)]

    compiled = torch.compile(f, backend="xla", options={"strict": True})
    x = torch.rand(3, 5) * 8  # non-negative: float -> uint8 of negatives is undefined in C
    for k in (1.0, 2.0, 3.0):  # later calls take the cached path
        outs, refs = compiled(x, k), f(x, k)
        assert_same(outs, refs)
        for o, r in zip(outs, refs):
            if o.numel() and o.dtype != torch.bool:
                o.add_(1)  # outputs are plain writable tensors, as eager's
                r.add_(1)
        assert_same(outs, refs)


@torch.no_grad()
def test_output_lives_after_everything_else_is_gone():
    compiled = torch.compile(lambda x: x * 3, backend="xla")
    x = torch.arange(6.0)
    outs = [compiled(x) for _ in range(4)]
    del compiled
    gc.collect()
    for o in outs:
        assert o.tolist() == (torch.arange(6.0) * 3).tolist()


@torch.no_grad()
def test_parameter_with_arbitrary_strides_of_size_one_dims():
    # Contiguous in torch, but strides (1, 6) for shape (6, 1): imported with canonical strides,
    # or the ahead-of-time executable would reject it (a layout mismatch).
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(1, 6).t())

        def forward(self, x):
            return x @ self.w

    from jax import monitoring

    compiles = []
    monitoring.register_event_duration_secs_listener(
        lambda name, *a, **k: (
            compiles.append(name) if name == "/jax/core/compile/backend_compile_duration" else None
        )
    )
    model = M()
    assert model.w.stride() == (1, 6) and model.w.is_contiguous()
    compiled, model, ref = _pair(model)
    x = torch.randn(3, 6)
    for _ in range(4):
        assert_same(compiled(x), ref(x))
        model.w.add_(1.0)
        ref.w.add_(1.0)
    assert len(compiles) == 1  # the cached view is one the first executable accepts


def test_training_steps_see_parameter_updates():
    # Parameters become cached jax.Arrays after the first calls: steps must keep matching eager.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = torch.randn(4, 6)
    for _ in range(4):
        loss, ref_loss = compiled(x).square().sum(), ref(x).square().sum()
        assert_same(loss, ref_loss)
        loss.backward()
        ref_loss.backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad)
        opt.step(), ref_opt.step()
        opt.zero_grad(), ref_opt.zero_grad()


def test_compiled_call_falls_back_to_the_jit_for_other_arguments():
    import jax
    import numpy as np

    from torch2xla.runtime._program import _Aot

    call = _Aot(jax.jit(lambda a: a * 2))
    a = torch.arange(4.0)
    with x64():
        first = call(a.numpy())
        b = torch.tensor([2**40 + 1, 3])  # another dtype and shape: the executable rejects it
        second = call(b.numpy())
    assert torch.equal(torch.tensor(np.asarray(first)), a * 2)
    assert torch.equal(torch.tensor(np.asarray(second)), b * 2)


@torch.no_grad()
def test_64_bit_values_computed_from_32_bit_inputs():
    # No 64-bit input: calls skip JAX's x64 scope, the executable (compiled in x64) still
    # computes and returns 64-bit values.
    def f(x):
        return x.argmax() + 2**40, x.double() * (1 + 2**-40)

    compiled = torch.compile(f, backend="xla", options={"strict": True})
    x = torch.randn(7)
    for _ in range(4):
        assert_same(compiled(x), f(x), rtol=0, atol=0)
        x.add_(1.0)


def test_float64_output_of_float32_parameters_trains_like_eager():
    # A float64 output gets float64 cotangents: this program's calls run inside x64.
    torch.manual_seed(0)
    model = nn.Linear(5, 3)
    ref = copy.deepcopy(model)
    compiled = torch.compile(lambda x: model(x).double() * (1 + 2**-40), backend="xla")
    x = torch.randn(4, 5)
    for _ in range(3):
        out, expected = compiled(x), ref(x).double() * (1 + 2**-40)
        assert_same(out, expected)
        out.sum().backward()
        expected.sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert_same(p.grad, q.grad)


# -- the training step's fast path (_autograd._Plan): what it learns at the first call must not
# leak into later calls that take the slow path --------------------------------------------------
class _TwoHeads(nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.body = nn.Linear(4, 4, dtype=dtype)
        self.a, self.b = nn.Linear(4, 2, dtype=dtype), nn.Linear(4, 3, dtype=dtype)

    def forward(self, x):
        h = self.body(x).tanh()
        return self.a(h), self.b(h)


def _step_pair(compiled, ref, x, loss, **backward):
    got, expected = loss(compiled(x)), loss(ref(x))
    assert_same(got, expected)
    got.backward(**backward)
    expected.backward(**backward)


def _assert_grads_match(model, ref):
    for (name, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
        if q.grad is None:
            assert p.grad is None, name
        else:
            assert p.grad is not None, name
            assert_same(p.grad, q.grad)


def test_steps_alternating_all_and_missing_cotangents():
    # Dense steps (both heads in the loss) take the fast path; a step that uses one head gets a
    # None cotangent, and the parameters only the other head reaches must get no gradient.
    torch.manual_seed(0)
    model = _TwoHeads()
    compiled, model, ref = _pair(model)
    both = lambda o: o[0].square().sum() + o[1].sum()
    first = lambda o: o[0].square().sum()
    second = lambda o: o[1].exp().sum()
    for loss in (both, both, first, both, second, first, both):
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        _step_pair(compiled, ref, torch.randn(3, 4), loss)
        _assert_grads_match(model, ref)


def test_steps_alternating_retained_and_freed_graphs():
    # A freed graph donates its residuals to the backward; a retained one keeps them.
    torch.manual_seed(0)
    compiled, model, ref = _pair(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)))
    for retain in (False, True, False, False, True):
        x = torch.randn(3, 4)
        outs = [net(x).square().sum() for net in (compiled, ref)]
        assert_same(*outs)
        for out in outs:
            out.backward(retain_graph=retain)
            if retain:
                out.backward()  # the retained graph runs again
        _assert_grads_match(model, ref)


def test_create_graph_between_plain_steps():
    # The same program's backward, first plain (fast path), then differentiable, then plain.
    torch.manual_seed(0)
    compiled, model, ref = _pair(nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1)))
    for create_graph in (False, False, True, False, True):
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        x = torch.randn(5, 4)
        penalties, tracked = [], []
        for net, params in ((compiled, list(model.parameters())), (ref, list(ref.parameters()))):
            out = net(x).square().sum()
            grads = torch.autograd.grad(out, params, create_graph=create_graph)
            tracked.append([g.requires_grad for g in grads])
            if create_graph:
                penalty = sum(g.square().sum() for g in grads)
                penalty.backward()
                penalties.append(penalty.detach())
            else:
                penalties.append(torch.stack([g.sum() for g in grads]))
        assert tracked[0] == tracked[1] and any(tracked[0]) == create_graph
        assert_same(*penalties)
        _assert_grads_match(model, ref)


def test_in_place_change_after_fast_steps_raises_like_eager():
    torch.manual_seed(0)
    compiled, model, ref = _pair(nn.Linear(4, 3))
    x = torch.randn(5, 4, requires_grad=True)  # the input's gradient needs the weight
    for _ in range(3):  # the fast path learns which inputs the backward reads
        _step_pair(compiled, ref, x, lambda o: o.square().sum())
    _assert_grads_match(model, ref)
    for net in (compiled, ref):
        loss = net(x).square().sum()
        with torch.no_grad():
            (model if net is compiled else ref).weight.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_complex_steps_match_eager():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, dtype=torch.complex64))
            self.v = nn.Parameter(torch.randn(3))

        def forward(self, x):
            z = self.w * x + self.v
            return z, (z * z.conj()).real.sum()

    torch.manual_seed(0)
    compiled, model, ref = _pair(M())
    for loss in (lambda o: o[1], lambda o: o[0].abs().sum() + o[1], lambda o: o[0].abs().sum()):
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        _step_pair(compiled, ref, torch.randn(3, dtype=torch.complex64), loss)
        _assert_grads_match(model, ref)


def test_steps_with_integer_output_and_frozen_input():
    # Not every output differentiated and not every input: the plan's general (non-dense) path.
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.frozen = (
                nn.Linear(4, 4),
                nn.Parameter(torch.randn(4), requires_grad=False),
            )

        def forward(self, x):
            y = self.lin(x) * self.frozen
            return y.argmax(-1), y, y.detach()

    torch.manual_seed(0)
    compiled, model, ref = _pair(M())
    for _ in range(3):
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        x = torch.randn(2, 4)
        got, expected = compiled(x), ref(x)
        assert_same(got, expected)
        assert not got[0].requires_grad and got[1].requires_grad and not got[2].requires_grad
        got[1].sum().backward()
        expected[1].sum().backward()
        _assert_grads_match(model, ref)


def test_backward_of_64_bit_intermediates_after_steps_outside_x64():
    # No 64-bit input or output: after its first backward, a step's backward runs outside JAX's
    # x64 scope; a variant compiled later (a retained graph's) is still traced in 64 bits.
    def f(w):
        big = torch.arange(6) + 2**33  # int64 values past int32
        index = (big - 2**33 + 5) % 6  # (the backward's scatter reads it)
        return (w.gather(0, index) * w * (big // 2**32).float()).sum()

    compiled = torch.compile(f, backend="xla", options={"strict": True})
    w = torch.randn(6, requires_grad=True)
    ref = w.detach().clone().requires_grad_(True)
    for retain in (False, False, True, False, True):
        w.grad = ref.grad = None
        outs = [compiled(w), f(ref)]
        assert_same(*outs)
        for out in outs:
            out.backward(retain_graph=retain)
            if retain:
                out.backward()  # the retained graph runs again
        assert_same(w.grad, ref.grad)
