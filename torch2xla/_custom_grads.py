"""Whether the JAX gradient of a user's lowering (``register_lowering``) agrees with the
autograd formula the op registered for eager (``register_autograd``).

Training differentiates a lowering with ``jax.vjp``; eager runs the registered formula. They
differ where the formula is not the derivative of the op (a straight-through estimator:
``round`` forward, identity backward; gradient clipping or reversal), and the gradient was
then silently another (``jax.round``'s is zero). Before a gradient flows through such a node,
both are computed once per signature on seeded random inputs of the node's shapes and dtypes
(as ``torch.library.opcheck`` tests an op's registrations against each other); where they
differ, the node runs in eager PyTorch wherever a gradient flows through it
(``ops.NO_JAX_GRADIENT``), so the formula is eager's.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import jax
import numpy as np
import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from torch2xla.runtime._interop import jax_dtype
from torch2xla.runtime._jax_scope import x64

log = logging.getLogger(__name__)

_FLOATS = (torch.float32, torch.float64)


def gradient_differs(
    ov: torch._ops.OpOverload, fn: Any, node: torch.fx.Node, formula: tuple = ()
) -> bool:
    """Whether ``jax.vjp`` of the lowering ``fn`` gives other gradients than ``ov``'s
    registered autograd formula for ``node``'s arguments (False where it cannot tell: inputs
    that are not float32/float64 tensors of static shapes, or an eager run that raises;
    eager runs on the node's device).
    ``formula`` (the registered functions) keys the answer with ``fn`` and the signature."""
    args = _signature(node)
    if args is None:
        return False
    return _differs(ov, fn, args, formula)


def _signature(node: torch.fx.Node) -> tuple | None:
    """``node``'s arguments, tensors as ``("T", shape, dtype)`` (hashable), or None."""
    if node.kwargs:
        return None

    def one(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("val")
            if not isinstance(v, torch.Tensor) or v.device.type == "meta":
                raise _Unknown
            if not all(isinstance(s, int) for s in v.shape):
                raise _Unknown
            return ("T", tuple(v.shape), v.dtype, v.device)
        if isinstance(a, (list, tuple)):
            return tuple(one(x) for x in a)
        if isinstance(a, (int, float, bool, str, type(None), torch.dtype, torch.device)):
            return a
        raise _Unknown

    try:
        return tuple(one(a) for a in node.args)
    except _Unknown:
        return None


class _Unknown(Exception):
    """An argument the check cannot make an example of."""


@functools.lru_cache(maxsize=256)
def _differs(ov: torch._ops.OpOverload, fn: Any, args: tuple, formula: tuple) -> bool:
    gen = torch.Generator().manual_seed(0)
    leaves: list[torch.Tensor] = []

    def make(a: Any) -> Any:
        if isinstance(a, tuple) and a[:1] == ("T",):
            _, shape, dtype, device = a
            if dtype in _FLOATS:
                t = torch.randn(shape, generator=gen, dtype=torch.float64).to(device, dtype)
                leaves.append(t.requires_grad_())
                return t
            if dtype.is_floating_point or dtype.is_complex:
                raise _Unknown
            return torch.zeros(shape, dtype=dtype, device=device)  # (indices, counts, masks)
        if isinstance(a, tuple):
            return [make(x) for x in a]
        return a

    with unset_fake_temporarily(), torch.enable_grad():
        try:
            torch_args = [make(a) for a in args]
        except _Unknown:
            return False
        if not leaves:
            return False
        try:
            out = ov(*torch_args)
        except Exception as e:  # noqa: BLE001  (the user's kernel on made-up inputs)
            log.debug("torch2xla: %s on example inputs raised %r; gradient not checked", ov, e)
            return False
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if not diff or any(o.dtype not in _FLOATS for o in diff):
            return False
        cots = [
            torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
            for o in diff
        ]
        try:
            want = torch.autograd.grad(diff, leaves, cots, allow_unused=True)
        except Exception as e:  # noqa: BLE001  (the user's formula on made-up inputs)
            log.debug("torch2xla: %s's backward on example inputs raised %r", ov, e)
            return False
        got = _jax_grads(fn, torch_args, leaves, outs, diff, cots)
    if got is None:
        return False
    for w, g, leaf in zip(want, got, leaves):
        w = torch.zeros_like(leaf) if w is None else w.detach()
        w = w.cpu()
        tol = 1e-9 if leaf.dtype == torch.float64 else 1e-4
        if not torch.allclose(g.to(w.dtype), w, rtol=tol, atol=tol * (1 + w.abs().max().item())):
            return True
    return False


def _jax_grads(fn, torch_args, leaves, outs, diff, cots) -> list[torch.Tensor] | None:
    """``jax.vjp`` of ``fn`` at ``torch_args`` with respect to ``leaves``, given ``cots`` for
    the outputs ``diff`` among ``outs`` (zeros for the others)."""
    ids = {id(t): i for i, t in enumerate(leaves)}

    def to_jax(t: torch.Tensor) -> jax.Array:
        return jax.numpy.asarray(t.detach().cpu().numpy())

    def rebuild(a: Any, xs: tuple) -> Any:
        if isinstance(a, torch.Tensor):
            return xs[ids[id(a)]] if id(a) in ids else to_jax(a)
        if isinstance(a, list):
            return [rebuild(x, xs) for x in a]
        return a

    with x64():
        primals = tuple(to_jax(t) for t in leaves)
        try:
            res, vjp = jax.vjp(lambda *xs: fn(*[rebuild(a, xs) for a in torch_args]), *primals)
        except Exception as e:  # noqa: BLE001  (the user's lowering on made-up inputs)
            log.debug("torch2xla: the lowering %r on example inputs raised %r", fn, e)
            return None
        flat = res if isinstance(res, (list, tuple)) else [res]
        if len(flat) != len(outs):
            return None
        by_id = {id(o): c for o, c in zip(diff, cots)}
        ct = []
        for o, r in zip(outs, flat):
            c = by_id.get(id(o))
            if c is None:
                ct.append(np.zeros(r.shape, dtype=jax.dtypes.float0 if _is_int(r) else r.dtype))
            else:
                ct.append(jax.numpy.asarray(c.cpu().numpy(), dtype=jax_dtype(o.dtype)))
        grads = vjp(type(res)(ct) if isinstance(res, (list, tuple)) else ct[0])
    return [torch.from_numpy(np.asarray(g).copy()) for g in grads]


def _is_int(a: jax.Array) -> bool:
    return not jax.numpy.issubdtype(a.dtype, jax.numpy.inexact)
