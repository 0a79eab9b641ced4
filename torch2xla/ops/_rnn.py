"""Recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) as one ``lax.scan`` each.

AOT export decomposes ``aten.lstm.input`` (a CompositeImplicitAutograd op) into one cell per
time step, which XLA compiles as a long unrolled program. ``capture/_rewrites.preserve_rnns``
retargets the Dynamo graph's ``torch.lstm``/``torch.gru``/``torch.rnn_tanh``/``torch.rnn_relu``
calls to functional custom ops of the same schema (``torch.ops.torch2xla.*``), which export keeps
intact; their lowerings run the time loop as a scan: the input projection of every step as
one matmul, the recurrent matmul and the fused cell in the loop. An LSTM layer has its own
gradient (``_lstm_recurrence``): a reverse scan that computes the gate gradients only, then
the weight and input gradients as one matmul each over all steps, as cuDNN and ATen do.

Calls these lowerings do not cover keep the decomposition: LSTM projections (``proj_size``),
packed sequences, unbatched or half-precision inputs, and graphs under autocast, except LSTM calls under CPU autocast (``capture/_autocast.py``: eager's
oneDNN layer, float32 inside on operands rounded to the autocast dtype). A stack with
dropout between layers in training reaches them as one call per layer
(``capture/_rnn_dropout.py``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch
from jax import lax

from torch2xla.ops import _linalg, _vmap
from torch2xla.ops._linalg import precision
from torch2xla.ops._registry import ctx, register


# -- custom ops: aten's RNN schemas, kept whole by export ------------------------------------------
def _check_args(input, params, has_biases, num_layers, bidirectional) -> int:
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if input.dim() != 3 or len(params) != num_layers * directions * per:
        raise ValueError(
            "torch2xla RNN ops take batched input and no projections: got input of "
            f"{input.dim()} dims and {len(params)} weights for {num_layers} layer(s)"
        )
    return directions


def _out_shapes(input, hidden_size, num_layers, directions, batch_first):
    t, b = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    out = (b, t, directions * hidden_size) if batch_first else (t, b, directions * hidden_size)
    return out, (num_layers * directions, b, hidden_size)


def _new_output(input, shape, batch_first):
    """The (fake) output of an RNN op, laid out as eager's: its kernels run time-major, so a
    ``batch_first`` output is the transpose of a (time, batch, features) tensor."""
    if not batch_first:
        return input.new_empty(shape)
    return input.new_empty((shape[1], shape[0], shape[2])).transpose(0, 1)


def _recompute_backward(aten_op, n_outputs):
    """Autograd of a custom op run eagerly (a partition left to torch): recompute aten's op
    with autograd on and differentiate it."""

    def setup_context(ctx, inputs, output):
        ctx.inputs = inputs

    def backward(ctx, *grads):
        tensors, rebuild = _differentiable(ctx.inputs)
        # (a create_graph backward runs in grad mode: its gradients are differentiated again,
        # so they are computed from the inputs themselves, not detached copies)
        create = torch.is_grad_enabled()
        with torch.enable_grad():
            if create:
                leaves = list(tensors)
            else:
                leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in tensors]
            outs = aten_op(*rebuild(leaves))[:n_outputs]
            pairs = [(o, g) for o, g in zip(outs, grads, strict=True) if g is not None]
            wanted = [leaf for leaf in leaves if leaf.requires_grad]
            if not pairs or not wanted:
                return rebuild([None] * len(leaves), grads_only=True)
            got = torch.autograd.grad(
                [o for o, _ in pairs],
                wanted,
                [g for _, g in pairs],
                allow_unused=True,
                create_graph=create,
            )
        got = iter(got)
        flat = [next(got) if leaf.requires_grad else None for leaf in leaves]
        return rebuild(flat, grads_only=True)

    return setup_context, backward


def _differentiable(inputs):
    """The tensors among ``inputs`` (an RNN op's arguments: tensor, tensor or list, list, then
    scalars), and a function that puts replacements back in their places."""
    input, hx, params, *rest = inputs
    hx_list = isinstance(hx, list | tuple)
    hxs = list(hx) if hx_list else [hx]
    tensors = [input, *hxs, *params]

    def rebuild(values, grads_only=False):
        values = list(values)
        x, hv, pv = values[0], values[1 : 1 + len(hxs)], values[1 + len(hxs) :]
        hv_out = list(hv) if hx_list else hv[0]
        if grads_only:
            return (x, hv_out, list(pv), *([None] * len(rest)))
        return (x, hv_out, list(pv), *rest)

    return tensors, rebuild


@torch.library.custom_op("torch2xla::lstm", mutates_args=())
def lstm(
    input: torch.Tensor,
    hx: list[torch.Tensor],
    params: list[torch.Tensor],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten.lstm.input``, kept whole through export (see the module docstring)."""
    out = torch.ops.aten.lstm.input(
        input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
    )
    return tuple(t.clone() for t in out)


@lstm.register_fake
def _lstm_fake(
    input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
):
    directions = _check_args(input, params, has_biases, num_layers, bidirectional)
    out, state = _out_shapes(input, hx[0].shape[-1], num_layers, directions, batch_first)
    out = _new_output(input, out, batch_first)
    return out, hx[0].new_empty(state), hx[1].new_empty(state)


_setup, _backward = _recompute_backward(torch.ops.aten.lstm.input, 3)
lstm.register_autograd(_backward, setup_context=_setup)


def _batching_rule(op):
    """``register_vmap`` rule of an RNN op: the vmapped dimension joins the RNN's own batch
    dimension (one call over ``vmap size * batch`` sequences), unless the weights are batched
    or dropout draws masks, where the op runs once per batch element."""

    def rule(
        info,
        in_dims,
        input,
        hx,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
    ):
        args = (
            input,
            hx,
            params,
            has_biases,
            num_layers,
            dropout,
            train,
            bidirectional,
            batch_first,
        )
        if any(d is not None for d in in_dims[2]) or (train and dropout > 0):
            return _vmap.per_element(op, info, in_dims, args)
        size = info.batch_size
        # (time, batch, features) or (batch, time, features): vmap's dimension goes next to
        # the batch; the states are (layers * directions, batch, hidden).
        x = _vmap.front(input, in_dims[0], size)
        n = x.shape[1] if batch_first else x.shape[2]
        x = x.flatten(0, 1) if batch_first else x.movedim(0, 1).flatten(1, 2)
        states = hx if isinstance(hx, list | tuple) else [hx]
        state_dims = in_dims[1] if isinstance(hx, list | tuple) else [in_dims[1]]
        states = [
            _vmap.front(h, d, size).movedim(0, 1).flatten(1, 2)
            for h, d in zip(states, state_dims, strict=True)
        ]
        outs = op(x, states if isinstance(hx, list | tuple) else states[0], *args[2:])
        out, *new_states = outs
        out = out.unflatten(0, (size, n)) if batch_first else out.unflatten(1, (size, n))
        new_states = [h.unflatten(1, (size, n)) for h in new_states]
        return (out, *new_states), (0 if batch_first else 1, *[1] * len(new_states))

    return rule


lstm.register_vmap(_batching_rule(lstm))


def _single_state_op(name: str, aten_op):
    @torch.library.custom_op(f"torch2xla::{name}", mutates_args=())
    def op(
        input: torch.Tensor,
        hx: torch.Tensor,
        params: list[torch.Tensor],
        has_biases: bool,
        num_layers: int,
        dropout: float,
        train: bool,
        bidirectional: bool,
        batch_first: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = aten_op(
            input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
        )
        return tuple(t.clone() for t in out)

    @op.register_fake
    def _fake(
        input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
    ):
        directions = _check_args(input, params, has_biases, num_layers, bidirectional)
        out, state = _out_shapes(input, hx.shape[-1], num_layers, directions, batch_first)
        return _new_output(input, out, batch_first), hx.new_empty(state)

    setup_context, backward = _recompute_backward(aten_op, 2)
    op.register_autograd(backward, setup_context=setup_context)
    op.register_vmap(_batching_rule(op))
    return op


gru = _single_state_op("gru", torch.ops.aten.gru.input)
rnn_tanh = _single_state_op("rnn_tanh", torch.ops.aten.rnn_tanh.input)
rnn_relu = _single_state_op("rnn_relu", torch.ops.aten.rnn_relu.input)


# -- lowerings ----------------------------------------------------------------------------------
def _matmul(a, b):
    return jnp.matmul(a, b, precision=precision())


def _gate_first(w):
    """``w``'s rows of the four gates (i, f, g, o, as torch orders them) in the order g, i, f, o:
    the cell's tanh gate first (see ``_lstm_activations``)."""
    i, f, g, o = jnp.split(w, 4, axis=0)
    return jnp.concatenate([g, i, f, o], axis=0)


def _lstm_activations(pre):
    """The gates' activations of pre-activations ``pre`` (batch, 4 hidden; gates g, i, f, o):
    the sigmoid over the whole width, the tanh over the first quarter, both materialized.

    NOTE: XLA's CPU compiler runs an elementwise fusion that slices columns out of a row at an
    offset (``sigmoid(pre[:, h:2h])``) several times slower than the same work over whole rows
    or a slice at offset 0 (one thread, batch 16, hidden 256: the fused cell took 45 us a step;
    this, 11). The barrier keeps the compiler from fusing the activations back into the slices
    the cell reads.
    """
    hidden = pre.shape[-1] // 4
    return lax.optimization_barrier((jax.nn.sigmoid(pre), jnp.tanh(pre[:, :hidden])))


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _lstm_recurrence(x, w_ih, h0, c0, w_hh, bias, on_cuda):
    """One LSTM layer and direction over time-major ``x`` (time, batch, input): the input
    projections of every step as one product, then the steps; ``bias`` is both biases' sum,
    added in the step (with the recurrent product, in the activations' fusion). Returns
    (outputs, h_n, c_n). ``on_cuda``: whether it runs on CUDA (the weight gradients' form)."""
    ys, h, c, _ = _lstm_forward(x, w_ih, h0, c0, w_hh, bias)
    return ys, h, c


def _lstm_forward(x, w_ih, h0, c0, w_hh, bias):
    t, b, _ = x.shape
    # the steps' pre-activations in the gate order g, i, f, o (the reordered recurrent weight
    # is the transposed copy the loop's product reads anyway)
    gx = _matmul(x.reshape(t * b, -1), _gate_first(w_ih).T).reshape(t, b, -1)
    w_hh_t = _gate_first(w_hh).T
    bias = _gate_first(bias)

    def step(carry, g_x):
        h, c = carry
        sig, g = _lstm_activations(g_x + _matmul(h, w_hh_t) + bias)
        _, i, f, o = jnp.split(sig, 4, axis=-1)
        c = f * c + i * g
        h = o * jnp.tanh(c)
        return (h, c), (h, c, sig, g)

    (h, c), (ys, cs, sigs, gs) = lax.scan(step, (h0, c0), gx)
    return ys, h, c, (cs, sigs, gs)


def _lstm_recurrence_fwd(x, w_ih, h0, c0, w_hh, bias, on_cuda):
    ys, h, c, (cs, sigs, g) = _lstm_forward(x, w_ih, h0, c0, w_hh, bias)
    # What the backward's steps read, computed once over every step. NOTE: XLA's CPU compiler
    # runs a fusion that slices columns out of the loop's row of a stacked array (a dynamic
    # slice) several times slower than the same work on whole rows, so the gates are split
    # here, outside the loop: per step, the backward reads whole rows only.
    _, i, f, o = jnp.split(sigs, 4, axis=-1)
    c_prev = jnp.concatenate([c0[None], cs[:-1]], axis=0)
    tc = jnp.tanh(cs)
    # d pre-activations = [dc, dc, dc, dh] * coef (the gates' derivatives from their values)
    coef = jnp.concatenate(
        [g * i * (1 - i), c_prev * f * (1 - f), i * (1 - g * g), tc * o * (1 - o)], -1
    )
    return (ys, h, c), (x, w_ih, h0, w_hh, ys, coef, o * (1 - tc * tc), f)


def _lstm_recurrence_bwd(on_cuda, res, cts):
    x, w_ih, h0, w_hh, ys, coef, o_dtanh, f = res
    d_ys, d_h, d_c = cts
    t, b, hidden = ys.shape

    def step(carry, xs):
        dh, dc = carry  # dc: the next step's, times its forget gate
        dy, k, od, f_t = xs
        dh = dh + dy
        dc = dc + dh * od
        d_pre = jnp.concatenate([dc, dc, dc, dh], -1) * k
        return (_matmul(d_pre, w_hh), dc * f_t), d_pre

    (dh0, dc0), d_gx = lax.scan(step, (d_h, d_c), (d_ys, coef, o_dtanh, f), reverse=True)
    # Each weight's gradient as one product over every step, in the weight's orientation:
    # d_gx^T x and d_gx^T h_prev, from one materialized d_gx^T (see _linalg.cpu_product).
    d_gx = d_gx.reshape(t * b, 4 * hidden)
    h_prev = jnp.concatenate([h0[None], ys[:-1]], axis=0)
    d_gx_t = d_gx.T if on_cuda else lax.optimization_barrier(d_gx.T)
    x2 = x.reshape(t * b, -1)
    d_w_ih = _matmul(d_gx_t, x2)
    d_w_hh = _matmul(d_gx_t, h_prev.reshape(t * b, hidden))
    d_x = _matmul(d_gx, w_ih).reshape(x.shape)
    return d_x, d_w_ih, dh0, dc0, d_w_hh, d_gx.sum(0)


_lstm_recurrence.defvjp(_lstm_recurrence_fwd, _lstm_recurrence_bwd)


def _gru_recurrence(gx, h0, w_hh_t, b_hh):
    hidden = h0.shape[-1]

    def step(h, g_x):
        g_h = _matmul(h, w_hh_t) + b_hh
        r = jax.nn.sigmoid(g_x[:, :hidden] + g_h[:, :hidden])
        z = jax.nn.sigmoid(g_x[:, hidden : 2 * hidden] + g_h[:, hidden : 2 * hidden])
        n = jnp.tanh(g_x[:, 2 * hidden :] + r * g_h[:, 2 * hidden :])
        h = (1 - z) * n + z * h
        return h, h

    h, ys = lax.scan(step, h0, gx)
    return ys, h


def _simple_recurrence(gx, h0, w_hh_t, activation):
    def step(h, g_x):
        h = activation(g_x + _matmul(h, w_hh_t))
        return h, h

    h, ys = lax.scan(step, h0, gx)
    return ys, h


def _layer(kind, x, states, weights, has_biases, reverse):
    """One layer and direction over time-major ``x``; returns (outputs, final states)."""
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    if kind == "lstm":
        bias = b_ih + b_hh if has_biases else jnp.zeros(w_hh.shape[0], x.dtype)
        if reverse:
            x = jnp.flip(x, 0)
        ys, h, c = _lstm_recurrence(x, w_ih, states[0], states[1], w_hh, bias, ctx().on_cuda)
        return (jnp.flip(ys, 0) if reverse else ys), (h, c)
    t, b, _ = x.shape
    gx = _linalg.product(x.reshape(t * b, -1), w_ih.T)[0].reshape(t, b, -1)
    if has_biases:
        # NOTE: the GRU's recurrent bias stays inside the reset gate's product, as torch's.
        gx = gx + (b_ih if kind == "gru" else b_ih + b_hh)
    if reverse:
        gx = jnp.flip(gx, 0)
    if kind == "gru":
        bias = b_hh if has_biases else jnp.zeros((), gx.dtype)
        ys, h = _gru_recurrence(gx, states[0], w_hh.T, bias)
        new = (h,)
    else:
        activation = jnp.tanh if kind == "rnn_tanh" else jax.nn.relu
        ys, h = _simple_recurrence(gx, states[0], w_hh.T, activation)
        new = (h,)
    return (jnp.flip(ys, 0) if reverse else ys), new


def _rnn(
    kind, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
):
    if train and dropout > 0 and num_layers > 1:
        raise NotImplementedError("torch2xla: RNN inter-layer dropout is left to the decomposition")
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    x = jnp.swapaxes(input, 0, 1) if batch_first else input
    finals: list[list] = [[] for _ in hx]
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            states = [h[k] for h in hx]
            ys, new = _layer(kind, x, states, params[k * per : (k + 1) * per], has_biases, d == 1)
            outs.append(ys)
            for acc, s in zip(finals, new, strict=True):
                acc.append(s)
        x = outs[0] if directions == 1 else jnp.concatenate(outs, axis=-1)
    out = jnp.swapaxes(x, 0, 1) if batch_first else x
    return (out, *(jnp.stack(f) for f in finals))


@register(torch.ops.torch2xla.lstm.default)
def lstm_lowering(
    input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
):
    return _rnn(
        "lstm",
        input,
        list(hx),
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
    )


def _single_state_lowering(kind):
    def lowering(
        input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
    ):
        return _rnn(
            kind,
            input,
            [hx],
            params,
            has_biases,
            num_layers,
            dropout,
            train,
            bidirectional,
            batch_first,
        )

    return lowering


for _kind in ("gru", "rnn_tanh", "rnn_relu"):
    register(getattr(torch.ops.torch2xla, _kind).default)(_single_state_lowering(_kind))
