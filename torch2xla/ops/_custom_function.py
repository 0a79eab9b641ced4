"""``torch2xla::custom_function``: a ``torch.autograd.Function`` with its own backward, as
``jax.custom_vjp``.

``capture/_custom_function.py`` replaces a Function call (Dynamo's ``autograd_function_apply``)
whose backward JAX can run as eager does by ``custom_function(args, key)``, with its forward
and backward subgraphs exported to ATen under ``key``. The lowering's primal is the forward
subgraph, its backward the backward subgraph, both translated through the registry. As eager:

- an output the forward marked non-differentiable (``ctx.mark_non_differentiable``) passes
  no gradient back (``lax.stop_gradient``), and the backward sees zeros for it;
- an output the loss does not use gives the backward zeros (eager's materialized grads);
- a gradient comes back in its input's dtype (eager's engine casts it);
- the backward is differentiable again where a create_graph backward differentiates the
  program's backward (eager records the backward's ops in the call's grad mode).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from torch2xla.capture._custom_function import entry
from torch2xla.ops._registry import ctx as lowering_ctx
from torch2xla.ops._registry import register
from torch2xla.ops._vmap import per_element
from torch2xla.runtime import _interop


@torch.library.custom_op("torch2xla::custom_function", mutates_args=())
def custom_function(args: list[torch.Tensor], key: int) -> list[torch.Tensor]:
    """The outputs of the forward subgraph of the Function call ``key`` on ``args``."""
    e = entry(key)
    outs = torch.fx.Interpreter(e.fwd).run(*args)
    return [o.clone() for o in outs[: len(e.outputs)]]


@custom_function.register_fake
def _(args: list[torch.Tensor], key: int) -> list[torch.Tensor]:
    return [torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in entry(key).outputs]


@custom_function.register_vmap
def _(info, in_dims, args: list[torch.Tensor], key: int):
    # (a Function's call under torch.vmap: its forward once per batch element, as functorch's
    # fallback would, without the fallback's warning)
    outs, dims = per_element(lambda a: custom_function(a, key), info, in_dims[:1], (args,))
    return list(outs), list(dims)


def _setup(ctx, inputs, output) -> None:
    args, key = inputs
    ctx.key = key
    ctx.save_for_backward(*args)
    nondiff = [output[k] for k in sorted(entry(key).non_differentiable)]
    if nondiff:
        ctx.mark_non_differentiable(*nondiff)


def _backward(c, grads):
    # (eager PyTorch's run of the op: an ATen graph run on fake tensors for connectivity)
    e = entry(c.key)
    args = c.saved_tensors
    saved = torch.fx.Interpreter(e.fwd).run(*args)[len(e.outputs) :]
    grads = [
        torch.zeros(o.shape, dtype=o.dtype, device=o.device) if g is None else g
        for g, o in zip(grads, e.outputs)
    ]
    got = torch.fx.Interpreter(e.bwd).run(*grads, *saved)
    out: list = [None] * len(args)
    for k, g in zip(e.grad_inputs, got):
        out[k] = g.to(args[k].dtype)
    return out, None


custom_function.register_autograd(_backward, setup_context=_setup)


def _zeros_for(ct: Any, meta: torch.Tensor) -> Any:
    """A cotangent the backward subgraph can read: zeros in the output's dtype where JAX has
    none (an integer output's ``float0``)."""
    dtype = _interop.jax_dtype(meta.dtype)
    if getattr(ct, "dtype", None) == jax.dtypes.float0:
        return jnp.zeros(meta.shape, dtype)
    return _torch_convention(jnp.asarray(ct, dtype))


def _torch_convention(t: Any) -> Any:
    """A complex cotangent in torch's convention from JAX's, or back: its conjugate."""
    return jnp.conj(t) if jnp.iscomplexobj(t) else t


def _cotangent_for(x: Any, grad: Any) -> Any:
    if not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
        return np.zeros(np.shape(x), jax.dtypes.float0)
    if grad is None:
        return jnp.zeros_like(x)
    return _torch_convention(jnp.asarray(grad, jnp.result_type(x)))


@register(torch.ops.torch2xla.custom_function.default)
def custom_function_lowering(args: Any, key: int) -> tuple:
    from torch2xla.ops._hops import _register_checks, _Subgraph
    from torch2xla.ops._interpret import to_jax_function

    e = entry(key)
    n_out = len(e.outputs)
    forward = _Subgraph(e.fwd)
    backward = to_jax_function(e.bwd)

    def run(*xs):
        outs, status = forward(None, *xs)
        return (tuple(outs[:n_out]), status), tuple(outs[n_out:])

    @jax.custom_vjp
    def apply(*xs):
        return run(*xs)[0]

    def apply_bwd(res, cts):
        xs, saved = res
        out_cts, _ = cts
        grads = [_zeros_for(g, m) for g, m in zip(out_cts, e.outputs)]
        got = backward(None, *grads, *saved)
        by_input = dict(zip(e.grad_inputs, got))
        return tuple(_cotangent_for(x, by_input.get(k)) for k, x in enumerate(xs))

    def apply_fwd(*xs):
        # The saved values as eager's autograd sees them where a second backward
        # differentiates the backward: an input as itself, an output through this same rule
        # (``apply``: a straight-through output's derivative is the user's, not its ops'),
        # anything else the forward made without autograd as a constant.
        (_, status), saved = run(*xs)
        custom = apply(*xs)[0]
        saved = tuple(
            xs[k] if kind == "input" else custom[k] if kind == "output" else lax.stop_gradient(v)
            for (kind, k), v in zip(e.saved, saved)
        )
        return (custom, status), (xs, saved)

    apply.defvjp(apply_fwd, apply_bwd)
    outs, status = apply(*args)
    _register_checks(forward, status)
    outs = tuple(
        lax.stop_gradient(o) if k in e.non_differentiable else o for k, o in enumerate(outs)
    )
    metas = lowering_ctx().out
    metas = tuple(metas) if isinstance(metas, list | tuple) else (metas,)
    return [jnp.asarray(o, _interop.jax_dtype(m.dtype)) for o, m in zip(outs, metas)]
