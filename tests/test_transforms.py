"""Issue 22 item 12: torch2xla's custom ops under torch's transforms (vmap, autocast,
functionalization), eagerly and inside compiled graphs, against eager PyTorch."""

import copy

import pytest
import torch
import torch.nn.functional as F

from tests._training import assert_grads
from tests._util import assert_same

T = torch.ops.torch2xla


def _custom_ops() -> list[str]:
    import torch2xla.ops  # noqa: F401  (defines them)

    return sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("torch2xla::"))


def test_every_custom_op_has_a_batching_rule():
    # Without one, functorch runs the op once per element (with a warning) or refuses it.
    ops = _custom_ops()
    assert {"torch2xla::stop_gradient", "torch2xla::sdpa", "torch2xla::lstm"} <= set(ops)
    has_rule = torch._C._dispatch_has_kernel_for_dispatch_key
    missing = [n for n in ops if not has_rule(n, "FuncTorchBatched")]
    assert not missing


def _stacked(fn, *per_element_args):
    """The reference of a vmap: ``fn`` on each batch element, results stacked."""
    results = [fn(*args) for args in zip(*per_element_args)]
    if isinstance(results[0], torch.Tensor):
        return torch.stack(results)
    return tuple(torch.stack(parts) for parts in zip(*results))


def test_stop_gradient_under_vmap_is_detach():
    w = torch.randn(4, requires_grad=True)
    x = torch.randn(3, 4)

    def f(row, op):
        h = row * w
        return h * op(h)

    out = torch.vmap(lambda r: f(r, T.stop_gradient))(x)
    ref = torch.vmap(lambda r: f(r, torch.Tensor.detach))(x)
    assert_same(out, ref)
    (g,) = torch.autograd.grad(out.sum(), w)
    (g_ref,) = torch.autograd.grad(ref.sum(), w)
    assert_same(g, g_ref)
    # eagerly, outside any transform, it is detach(): not tracked at all
    assert not T.stop_gradient(w).requires_grad


@pytest.mark.parametrize("case", ["all", "mask", "dim1-key-unbatched", "3d"])
def test_sdpa_under_vmap(case):
    q, k, v = torch.randn(3, 2, 4, 5, 8), torch.randn(3, 2, 4, 6, 8), torch.randn(3, 2, 4, 6, 8)
    mask = None
    in_dims: tuple = (0, 0, 0)
    if case == "mask":
        mask = torch.randn(3, 5, 6)
    elif case == "dim1-key-unbatched":
        q, k, v = q.movedim(0, 1), k[0], v[0]
        in_dims = (1, None, None)
    elif case == "3d":
        q, k, v = q[:, 0], k[:, 0], v[:, 0]

    def ours(q, k, v, m=None):
        return T.sdpa(q, k, v, m, case == "3d", None, False, None)

    def eager(q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, m, is_causal=case == "3d")

    args = (q, k, v) if mask is None else (q, k, v, mask)
    dims = in_dims if mask is None else (*in_dims, 0)
    out = torch.vmap(ours, in_dims=dims)(*args)
    per = [a.movedim(d, 0) if d is not None else [a] * 3 for a, d in zip(args, dims)]
    assert_same(out, _stacked(eager, *per))


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("batched", ["input", "state", "weights"])
def test_rnn_ops_under_vmap(kind, batched):
    torch.manual_seed(0)
    layer = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN}[kind](
        6, 4, num_layers=2, bidirectional=kind != "gru", batch_first=kind == "gru"
    )
    params = [p.detach() for p in layer._flat_weights]
    d = 2 if kind != "gru" else 1
    x = torch.randn(3, 5, 2, 6)  # vmap dim, then (time, batch) or (batch, time), features
    h = torch.randn(3, 2 * d, 2 if kind != "gru" else 5, 4)
    op, aten = getattr(T, kind), getattr(torch.ops.aten, kind).input
    flags = (True, 2, 0.0, False, kind != "gru", kind == "gru")

    def call(f, x, h, ps):
        state = [h, torch.zeros_like(h)] if kind == "lstm" else h
        return f(x, state, ps, *flags)

    ws = [torch.stack([p * (1 + 0.1 * i) for i in range(3)]) for p in params]
    if batched == "input":
        out = torch.vmap(lambda x: call(op, x, h[0], params))(x)
        ref = _stacked(lambda x: call(aten, x, h[0], params), x)
    elif batched == "state":
        out = torch.vmap(lambda h: call(op, x[0], h, params), in_dims=1)(h.movedim(0, 1))
        ref = _stacked(lambda h: call(aten, x[0], h, params), h)
    else:
        out = torch.vmap(lambda x, ws: call(op, x, h[0], ws))(x, ws)
        ref = _stacked(lambda x, *ws: call(aten, x, h[0], list(ws)), x, *ws)
    # (the fold runs one RNN over vmap size * batch sequences: float32 sums in another order)
    assert_same(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_sdpa_dropout_under_vmap_draws_vmaps_masks(randomness):
    q, k, v = torch.randn(3, 2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)

    def f(q):
        seed = torch.randint(0, 2**31 - 1, (), dtype=torch.int32)
        return T.sdpa_dropout(q, k, v, None, 0.5, False, None, False, None, seed), seed

    torch.manual_seed(0)
    out, seeds = torch.vmap(f, randomness=randomness)(q)
    assert seeds.shape == (3,)
    ref = torch.stack(
        [
            T.sdpa_dropout(q[i], k, v, None, 0.5, False, None, False, None, seeds[i])
            for i in range(3)
        ]
    )
    assert_same(out, ref)
    if randomness == "same":  # one mask for every element: same output for the same query
        out2, _ = torch.vmap(f, randomness="same")(q[:1].expand(3, -1, -1, -1))
        assert_same(out2[0], out2[1])


def test_custom_ops_under_autocast_and_functionalization():
    # Autocast falls through our ops: stop_gradient keeps its dtype as detach() does, and sdpa
    # casts only as its autocast_dtype argument says (the compile-time autocast state).
    x = torch.randn(2, 3, 4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert T.stop_gradient(x).dtype == torch.float32
        ours = T.sdpa(x, x, x, None, False, None, False, torch.bfloat16)
        ref = F.scaled_dot_product_attention(x, x, x)
    assert_same(ours, ref)
    ours = T.sdpa(x, x, x, None, False, None, False, None)
    assert_same(ours, F.scaled_dot_product_attention(x, x, x))

    def f(x):
        y = x.clone()
        y.add_(1)
        return T.sdpa(y, y, T.stop_gradient(y), None, True, None, False, None)

    assert_same(torch.func.functionalize(f)(x), f(x))
    gm = torch.fx.experimental.proxy_tensor.make_fx(torch.func.functionalize(f))(x)
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert T.sdpa.default in targets and torch.ops.aten.add_.Tensor not in targets


class _VmappedScan(torch.nn.Module):
    """A selective-scan-like block: a per-sequence function vmapped over the batch, with a
    detached normalizer inside (as Mamba-style code writes it)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.decay = torch.nn.Parameter(torch.rand(6))

    def forward(self, x):
        def per_sequence(seq):
            h = torch.tanh(self.proj(seq))
            scale = h.abs().amax().detach() + 1  # not differentiated, as eager says
            states = torch.cumsum(h * self.decay, dim=0) / scale
            with torch.no_grad():
                gate = torch.sigmoid(states.mean())
            return states * gate

        return torch.vmap(per_sequence)(x)


def test_compiled_vmap_with_detach_trains_like_eager():
    torch.manual_seed(0)
    model = _VmappedScan()
    ref = copy.deepcopy(model)
    x = torch.randn(3, 5, 6)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    out = compiled(x)
    expected = ref(x)
    assert_same(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    assert_grads(model, ref, rtol=1.3e-6, atol=1e-5)


def test_hf_mamba_trains_like_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=32,
        hidden_size=8,
        state_size=4,
        num_hidden_layers=1,
        expand=2,
        conv_kernel=3,
        time_step_rank=2,
    )
    model = transformers.MambaForCausalLM(config)
    ref = copy.deepcopy(model)
    ids = torch.randint(0, 32, (2, 5))
    loss = torch.compile(model, backend="xla")(ids, labels=ids).loss
    expected = ref(ids, labels=ids).loss
    assert_same(loss, expected)
    loss.backward()
    expected.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert_same(p.grad, q.grad)
