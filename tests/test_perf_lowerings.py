"""The lowerings chosen for speed (RNN layers as scans; convolution, pooling and batch norm)
against eager PyTorch: values, dtypes and gradients."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from tests._training import grad_parity
from tests._util import assert_same
from torch2xla.ops import LOWERINGS

RNN_OPS = {
    "lstm": torch.ops.torch2xla.lstm.default,
    "gru": torch.ops.torch2xla.gru.default,
    "rnn_tanh": torch.ops.torch2xla.rnn_tanh.default,
    "rnn_relu": torch.ops.torch2xla.rnn_relu.default,
}


class _Recurrent(nn.Module):
    """An RNN layer returning its output and final state(s), flattened into one tensor."""

    def __init__(self, kind: str, **kw) -> None:
        super().__init__()
        if kind == "lstm":
            self.rnn = nn.LSTM(**kw)
        elif kind == "gru":
            self.rnn = nn.GRU(**kw)
        else:
            self.rnn = nn.RNN(nonlinearity=kind.removeprefix("rnn_"), **kw)

    def forward(self, x, *state):
        hx = None if not state else state[0] if len(state) == 1 else tuple(state)
        out, h = self.rnn(x, hx)
        return torch.cat([t.flatten() for t in (out, *(h if isinstance(h, tuple) else (h,)))])


def _loss(out):
    if isinstance(out, torch.Tensor):
        out = (out,)
    return sum((o * torch.linspace(-1, 2, o.numel()).reshape(o.shape)).sum() for o in out)


@pytest.mark.parametrize(
    ("kind", "kw"),
    [
        ("lstm", {"num_layers": 2, "batch_first": True}),
        ("lstm", {"num_layers": 2, "bidirectional": True}),
        ("lstm", {"num_layers": 1, "bias": False, "batch_first": True}),
        ("gru", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
        ("rnn_tanh", {"num_layers": 2}),
        ("rnn_relu", {"num_layers": 1, "bidirectional": True}),
    ],
)
def test_rnn_layer_runs_as_one_op_with_eager_values_and_grads(kind, kw, lowered_ops):
    torch.manual_seed(0)
    model = _Recurrent(kind, input_size=5, hidden_size=7, **kw)
    shape = (3, 6, 5) if kw.get("batch_first") else (6, 3, 5)
    x = torch.randn(shape, requires_grad=True)
    grad_parity(model, x, loss=_loss)
    assert RNN_OPS[kind] in lowered_ops
    assert torch.ops.aten.sigmoid.default not in lowered_ops  # no unrolled cell left


def test_lstm_with_initial_state_float64():
    torch.manual_seed(0)
    model = _Recurrent("lstm", input_size=4, hidden_size=6, num_layers=2).double()
    x = torch.randn(5, 2, 4, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 2, 6, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(2, 2, 6, dtype=torch.float64, requires_grad=True)
    grad_parity(model, x, h0, c0, loss=_loss, rtol=1e-10, atol=1e-10)


def test_lstm_inference_under_no_grad():
    torch.manual_seed(0)
    model = _Recurrent("lstm", input_size=8, hidden_size=16, num_layers=2, batch_first=True)
    model.eval()
    x = torch.randn(4, 9, 8)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    with torch.no_grad():
        out, ref = compiled(x), model(x)
    assert_same(out, ref)


def test_inter_layer_dropout_in_training_runs_each_layer_as_a_scan(lowered_ops):
    # (the stack is written one call per layer with eager's dropout between them,
    # ``capture/_rnn_dropout.py``: torch's decomposition of the stacked call drops nothing)
    model = _Recurrent("lstm", input_size=5, hidden_size=7, num_layers=2, dropout=0.5)
    out = torch.compile(model, backend="xla", options={"strict": True})(torch.randn(4, 2, 5))
    assert out.shape == (4 * 2 * 7 + 2 * 2 * 2 * 7,)
    assert lowered_ops.count(RNN_OPS["lstm"]) == 2


def test_rnn_custom_ops_run_eagerly_with_autograd():
    # The eager kernels (used if a partition is left to torch) match aten's op, gradients too.
    torch.manual_seed(0)
    rnn = nn.GRU(3, 4, num_layers=2)
    x = torch.randn(5, 2, 3, requires_grad=True)
    h = torch.randn(2, 2, 4, requires_grad=True)
    params = list(rnn._flat_weights)
    args = (True, 2, 0.0, True, False, False)
    out = torch.ops.torch2xla.gru(x, h, params, *args)
    ref = torch.ops.aten.gru.input(x, h, params, *args)
    assert_same(out, ref)
    got = torch.autograd.grad(_loss(out), [x, h, *params])
    want = torch.autograd.grad(_loss(ref), [x, h, *params])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_rnn_ops_have_lowerings():
    assert all(op in LOWERINGS for op in RNN_OPS.values())


class _Norm(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.norm = norm

    def forward(self, x):
        return torch.relu(self.norm(x))


@pytest.mark.parametrize(
    ("norm", "shape"),
    [
        (nn.BatchNorm2d(6), (4, 6, 5, 3)),
        (nn.BatchNorm1d(5, affine=False), (7, 5, 3)),
        (nn.BatchNorm3d(3, momentum=None), (2, 3, 2, 3, 4)),
        (nn.BatchNorm1d(4, track_running_stats=False), (9, 4)),
    ],
)
def test_batch_norm_training_closed_form_gradient(norm, shape):
    # Closed-form gradient (_batch_norm): input, weight and bias gradients, running stats.
    torch.manual_seed(0)
    model = _Norm(norm).train()
    x = (torch.randn(shape) * 3 + 1).requires_grad_()
    grad_parity(model, x, loss=_loss)


def test_batch_norm_gradient_through_its_statistics_float64():
    # Compiled graphs stop gradients at native_batch_norm's saved statistics (as eager does),
    # so the cotangents of mean and variance are exercised here directly, against torch
    # autograd of the same three outputs.
    import jax
    import numpy as np

    from torch2xla.ops._batch_norm import batch_norm_train

    torch.manual_seed(0)
    x, w, b = (
        torch.randn(5, 3, 4, dtype=torch.float64),
        torch.randn(3, dtype=torch.float64),
        torch.randn(3, dtype=torch.float64),
    )
    cts = [
        torch.randn(5, 3, 4, dtype=torch.float64),
        torch.randn(3, dtype=torch.float64),
        torch.randn(3, dtype=torch.float64),
    ]
    xs = [t.clone().requires_grad_() for t in (x, w, b)]
    mean = xs[0].mean(dim=(0, 2))
    var = xs[0].var(dim=(0, 2), unbiased=False)
    out = (xs[0] - mean[:, None]) * torch.rsqrt(var + 1e-5)[:, None] * xs[1][:, None] + xs[2][
        :, None
    ]
    want = torch.autograd.grad((out, mean, var), xs, cts)
    with jax.enable_x64(True):
        prims, vjp = jax.vjp(lambda *a: batch_norm_train(*a, 1e-5), *(t.numpy() for t in (x, w, b)))
        got = vjp(tuple(c.numpy() for c in cts))
    for p, r in zip(prims, (out, mean, var), strict=True):
        np.testing.assert_allclose(np.asarray(p), r.detach().numpy(), rtol=1e-12, atol=1e-12)
    for g, r in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), r.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("train", [False, True])
def test_bmm_against_an_expanded_matrix_is_one_product(tmp_path, train):
    # Under autocast, nn.MultiheadAttention's input projection of a batch-first input reaches
    # XLA as bmm(x, W expanded over x's batch) (torch's matmul decomposition of a
    # non-contiguous 3-D x @ W). Multiplied as a batch, XLA's GPU compiler ran it as many small
    # GEMMs (ViT: 3x slower); it is multiplied by W itself.
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(64, 4, batch_first=True)
    ref_mha = copy.deepcopy(mha)
    compiled = torch.compile(
        mha, backend="xla", options={"strict": True, "dump_dir": str(tmp_path)}
    )
    x = torch.randn(8, 17, 64)
    xs = [x.clone().requires_grad_(train) for _ in range(2)]
    with torch.set_grad_enabled(train), torch.autocast("cpu", dtype=torch.bfloat16):
        out = compiled(xs[0], xs[0], xs[0], need_weights=False)[0]
        ref = ref_mha(xs[1], xs[1], xs[1], need_weights=False)[0]
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1e-2)
    aten = next(tmp_path.rglob("*.aten.txt")).read_text()
    assert "aten.bmm" in aten and "aten.expand" in aten, "the graph no longer has the pattern"
    programs = ("forward", "backward") if train else ("inference",)
    dots = [
        line
        for p in programs
        for line in next(tmp_path.rglob(f"*.{p}.stablehlo.mlir")).read_text().splitlines()
        if "stablehlo.dot_general" in line
    ]
    # (17, 8, 64) x (64, 192): no batch dims; the attention's own products keep theirs.
    assert any("tensor<17x8x192x" in line and "batching_dims" not in line for line in dots), dots
    if train:
        out.float().square().sum().backward()
        ref.float().square().sum().backward()
        torch.testing.assert_close(xs[0].grad, xs[1].grad, atol=2e-2, rtol=2e-2)
        for a, b in zip(mha.parameters(), ref_mha.parameters(), strict=True):
            # bf16 gradients of magnitude ~100: compared relative to their size
            assert (a.grad - b.grad).norm() <= 1e-2 * b.grad.norm()


def _tn_dots(hlo: str) -> list[str]:
    """2-D products of the optimized HLO that contract both operands over their first dim."""
    return [
        line.strip()
        for line in hlo.splitlines()
        if " dot(" in line
        and "lhs_batch_dims" not in line
        and "lhs_contracting_dims={0}, rhs_contracting_dims={0}" in line
    ]


def test_weight_gradients_on_cpu_are_plain_products(tmp_path):
    # XLA's CPU compiler runs a product contracting both operands over their first dim (the
    # weight gradient x^T ct, over the tokens) at half the rate of a plain one in one output
    # orientation; ops/_linalg.cpu_product computes it from a materialized transpose.
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(32, 96), nn.Tanh(), nn.Linear(96, 16), nn.Tanh(), nn.Linear(16, 8)
    )
    compiled = torch.compile(
        copy.deepcopy(model), backend="xla", options={"strict": True, "dump_dir": str(tmp_path)}
    )
    x = torch.randn(4, 64, 32, requires_grad=True)
    compiled(x).square().mean().backward()
    hlo = next(tmp_path.rglob("*.backward.hlo.txt")).read_text()
    assert " dot(" in hlo
    assert not _tn_dots(hlo), _tn_dots(hlo)
    grad_parity(model, torch.randn(4, 64, 32, requires_grad=True))


def test_cpu_product_second_derivative_matches_eager():
    a = torch.randn(130, 5, dtype=torch.float64, requires_grad=True)  # cpu_product: >= 128 rows
    b = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)

    def fn(a, b):
        return torch.tanh(a @ b).sum()

    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    grads = torch.autograd.grad(compiled(a, b), (a, b), create_graph=True)
    expected = torch.autograd.grad(fn(a, b), (a, b), create_graph=True)
    for g, e in zip(grads, expected, strict=True):
        torch.testing.assert_close(g, e)
    second = torch.autograd.grad(sum(g.square().sum() for g in grads), (a, b))
    expected2 = torch.autograd.grad(sum(e.square().sum() for e in expected), (a, b))
    for g, e in zip(second, expected2, strict=True):
        torch.testing.assert_close(g, e)


def test_gelu_values_and_tail():
    # torch computes x / 2 * (1 + erf(x / sqrt2)) (CPU and CUDA): -0.0 at -6, where
    # x * erfc(-x / sqrt2) / 2 (jax.nn.gelu's form) gives -5.9e-9. A contiguous float32 input
    # of 2+ elements runs oneDNN's gelu in eager, whose AVX2 kernel (AMD EPYC) gives +0 there
    # (float64: -5.9e-9; oneDNN's AVX-512 kernel and torch's own give -0): followed by probing
    # eager (ops/_activations._onednn_gelu_zero_is_positive).
    x = torch.cat([torch.linspace(-8, 8, 1001), torch.tensor([-0.0, 0.0, 30.0, -30.0])])
    out = torch.compile(nn.functional.gelu, backend="xla")(x)
    ref = nn.functional.gelu(x)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1.3e-6)  # jax.nn.gelu: the same
    assert torch.equal(out[ref == 0].signbit(), ref[ref == 0].signbit())


def test_gelu_zero_signs_follow_eagers_onednn_path():
    """Eager's float32 gelu runs oneDNN only with oneDNN enabled, on a contiguous input of
    more than one element (``use_mkldnn``); otherwise torch's kernel (-0 where the result is
    zero). Each call is compared with eager, the switch flipped between calls of one compiled
    function."""
    f = torch.compile(lambda x, y: (nn.functional.gelu(x), nn.functional.gelu(y)), backend="xla")
    x = torch.tensor([-0.0, -8.0, -30.0, 1.0, -1e30, 0.0])
    cases = [(x, x[:1]), (x, x[::2])]
    for enabled in (True, False, True):
        with torch.backends.mkldnn.flags(enabled=enabled):
            for a, b in cases:
                for o, r in zip(f(a, b), (nn.functional.gelu(a), nn.functional.gelu(b))):
                    torch.testing.assert_close(o, r)
                    assert torch.equal(o.signbit(), r.signbit()), (enabled, o, r)


def _softmax_edges(fn, *args) -> list[list[str]]:
    """For each row reduction in ``fn``'s jaxpr, the paths of primitives from it to each op
    that brings it back to the reduced operand's shape (branches that never do, such as a
    logsumexp output, are left out); ``const`` marks a literal second operand, ``output`` a
    value the function also returns (a residual)."""
    import jax
    import jax.extend.core as jcore

    jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    outputs = {v for v in jaxpr.outvars if not isinstance(v, jcore.Literal)}
    users: dict = {}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:
            if not isinstance(v, jcore.Literal):
                users.setdefault(v, []).append(eqn)

    def paths(v, full, path):
        for step in users.get(v, []):
            others = [u for u in step.invars if u is not v]
            name = step.primitive.name + "".join(
                " const" if isinstance(u, jcore.Literal) else " value" for u in others
            )
            if step.outvars[0] in outputs:
                name += " output"
            if step.outvars[0].aval.shape == full:
                yield path
            else:
                yield from paths(step.outvars[0], full, [*path, name])

    return [
        path
        for eqn in jaxpr.eqns
        if eqn.primitive.name in ("reduce_max", "reduce_sum")
        for path in paths(eqn.outvars[0], eqn.invars[0].aval.shape, [])
    ]


@pytest.mark.parametrize("fn", ["attention", "safe_softmax"])
def test_softmax_reductions_reach_their_rows_through_constants_only(fn):
    # XLA's GPU compiler fuses a softmax into one kernel per row where each row reduction
    # reaches the row's values through ops with at most a constant second operand and no
    # other reader; a select there (rows that attend nowhere), or the row maximum and sum
    # kept for the backward, split it into several passes over the scores.
    import jax.numpy as jnp
    from jax import lax

    from torch2xla.ops import _saved

    x = jnp.zeros((2, 3, 5), jnp.float32)
    if fn == "attention":  # the forward inside the custom_vjp
        edges = _softmax_edges(
            lambda q, k, v: _saved._attention_fwd(
                q, k, v, None, None, None, 0.5, True, lax.Precision.DEFAULT, 0.0, jnp.float32
            ),
            x,
            x,
            x,
        )
    else:
        edges = _softmax_edges(lambda s: _saved.safe_softmax.fun(s, -1, jnp.float32), x)
    assert len(edges) == 2, edges  # the row maximum and the row sum, each to its rows
    for path in edges:
        assert all(
            p.split()[0] in ("broadcast_in_dim", "stop_gradient", "max", "add", "mul")
            and "value" not in p
            and "output" not in p
            for p in path
        ), path


def test_softmax_of_rows_that_attend_nowhere_is_zero_as_eager():
    q, k, v = (torch.randn(2, 3, 4, 8) for _ in range(3))
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    mask[1] = False  # a row that attends nowhere
    bias = torch.zeros(4, 4).masked_fill(~mask, float("-inf"))
    for m in (mask, bias):
        ref = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
        out = torch.compile(nn.functional.scaled_dot_product_attention, backend="xla")(
            q, k, v, attn_mask=m
        )
        torch.testing.assert_close(out, ref)
        assert torch.equal(out[:, :, 1], torch.zeros_like(out[:, :, 1]))
    x = torch.randn(3, 5).masked_fill(torch.tensor([False, True, False])[:, None], float("-inf"))
    ref = torch.ops.aten._safe_softmax(x, -1)
    out = torch.compile(lambda t: torch.ops.aten._safe_softmax(t, -1), backend="xla")(x)
    torch.testing.assert_close(out, ref)
    assert torch.equal(out[1], torch.zeros(5))
