"""jax.vjp <-> torch.autograd.Function."""

from __future__ import annotations

import jax
import torch
from torch.autograd.function import once_differentiable

from torch2xla._interop import to_jax, x64
from torch2xla._profile import profiled_backward


class XlaFunction(torch.autograd.Function):
    """Forward runs ``jax.vjp`` inside ``jax.jit`` and keeps the residuals as JAX arrays;
    backward hands the cotangents to a second jitted function that applies the vjp."""

    @staticmethod
    def forward(ctx, program, diff_in: tuple[int, ...], seed, *tensors):
        fwd, _, aux_out = program.train_fns(diff_in)
        diff_set = set(diff_in)
        with x64(), jax.default_device(program.device):
            views = program.jax_inputs(tensors)  # parameters imported once, not every step
            jdiff = [views[k] for k in diff_in]
            jrest = [v for k, v in enumerate(views) if k not in diff_set]
            douts, aux, vjp_fn = fwd(seed, jdiff, jrest)
        convert = program.to_torch
        outs: list = [None] * program.num_outputs
        for i, o in zip(program.diff_out, douts):
            outs[i] = convert(o)
        for i, o in zip(aux_out, aux):
            outs[i] = convert(o)
        ctx.mark_non_differentiable(*(outs[i] for i in aux_out))
        ctx.program, ctx.diff_in, ctx.vjp_fn, ctx.n_inputs = program, diff_in, vjp_fn, len(tensors)
        ctx.diff_meta = [(o.shape, o.dtype) for o in douts]
        return tuple(outs)

    @staticmethod
    @profiled_backward
    @once_differentiable
    def backward(ctx, *grads):
        program = ctx.program
        _, bwd, _ = program.train_fns(ctx.diff_in)
        with x64(), jax.default_device(program.device):
            cts = [
                jax.numpy.zeros(shape, dtype) if grads[i] is None else to_jax(grads[i])
                for i, (shape, dtype) in zip(program.diff_out, ctx.diff_meta)
            ]
            in_grads = bwd(ctx.vjp_fn, cts)
        result: list = [None] * ctx.n_inputs
        convert = program.to_torch
        for k, g in zip(ctx.diff_in, in_grads):
            result[k] = convert(g)
        return (None, None, None, *result)
