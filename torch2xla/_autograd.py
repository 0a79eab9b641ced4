"""jax.vjp <-> torch.autograd.Function.

The forward runs ``jax.vjp`` inside ``jax.jit``: it returns the outputs and ``vjp_fn``, a
``jax.tree_util.Partial`` whose leaves are the residuals (JAX arrays). The backward hands the
cotangents to a second jitted function that applies ``vjp_fn``. JAX derives the backward from
the forward lowerings, so no backward lowerings are needed.

Eager autograd semantics kept here:

- Residuals are freed when the backward has run (unless ``retain_graph=True``), as eager frees
  saved tensors; a second backward through a freed graph raises eager's error.
- An input gets no gradient (None, not zeros) when none of the outputs that received a
  cotangent depends on it differentiably, as eager leaves ``.grad`` of such a parameter None.
- Outputs eager would not track (integer, ``.detach()``, argmax) are non-differentiable.
- Double backward (``create_graph=True`` then differentiating the gradients) raises a clear
  error when the second backward reaches the compiled region.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np
import torch

from torch2xla._interop import to_jax, x64
from torch2xla._profile import profiled_backward

# NOTE: torch exposes whether the running backward keeps the graph (retain_graph) only through
# this private hook, which AOTAutograd uses for the same purpose. Without it we keep the
# residuals until the autograd graph dies, which is correct but holds memory longer.
_keep_graph: Callable[[], bool] = getattr(
    torch._C._autograd, "_get_current_graph_task_keep_graph", lambda: True
)


@dataclasses.dataclass
class TrainFns:
    """The jitted functions of one program differentiated with respect to ``diff_in``.

    Attributes:
        fwd: ``(seed, diff, rest) -> (diff_outs, aux_outs, vjp_fn)``.
        bwd: ``(vjp_fn, cotangents) -> input gradients`` (one per ``diff_in``).
        aux_out: positions of the outputs that are not differentiated.
        deps: per differentiated output, the positions in ``diff_in`` that its gradient reaches
            (found from the backward's jaxpr at the first backward; None until then).
    """

    fwd: Callable
    bwd: Callable
    aux_out: tuple[int, ...]
    deps: tuple[frozenset[int], ...] | None = None

    def __iter__(self):
        """Unpacks as ``fwd, bwd, aux_out``."""
        return iter((self.fwd, self.bwd, self.aux_out))


def build_train_fns(
    flat_fn: Callable,
    num_inputs: int,
    diff_in: tuple[int, ...],
    diff_out: tuple[int, ...],
    num_outputs: int,
) -> TrainFns:
    """``TrainFns`` for ``flat_fn(seed, *inputs) -> outputs`` differentiated with respect to the
    inputs ``diff_in`` and the outputs ``diff_out``."""
    diff_set, out_set = frozenset(diff_in), frozenset(diff_out)
    aux_out = tuple(i for i in range(num_outputs) if i not in out_set)

    def fwd(seed, diff, rest):
        def f(*d):
            di, ri = iter(d), iter(rest)
            full = [next(di) if k in diff_set else next(ri) for k in range(num_inputs)]
            outs = flat_fn(seed, *full)
            return [outs[i] for i in diff_out], [outs[i] for i in aux_out]

        douts, vjp_fn, aux = jax.vjp(f, *diff, has_aux=True)
        return douts, aux, vjp_fn

    return TrainFns(jax.jit(fwd), jax.jit(_apply_vjp), aux_out)


def _apply_vjp(vjp_fn, cts):
    return vjp_fn(cts)


# A tensor saved on every node, only so that autograd tells us (by raising eager's error on
# ``ctx.saved_tensors``) when a backward runs through a graph whose buffers were freed.
_FREED_MARKER = torch.empty(0)


class XlaFunction(torch.autograd.Function):
    """Runs an ``XlaProgram`` differentiably: ``apply(program, diff_in, seed, *tensors)``."""

    @staticmethod
    def forward(ctx, program, diff_in: tuple[int, ...], seed, *tensors):
        fns: TrainFns = program.train_fns(diff_in)
        diff_set = set(diff_in)
        with x64(), jax.default_device(program.device):
            views = program.jax_inputs(tensors)  # parameters imported once, not every step
            jdiff = [views[k] for k in diff_in]
            jrest = [v for k, v in enumerate(views) if k not in diff_set]
            douts, aux, vjp_fn = fns.fwd(seed, jdiff, jrest)
        convert = program.to_torch
        outs: list = [None] * program.num_outputs
        for i, o in zip(program.diff_out, douts):
            outs[i] = convert(o)
        for i, o in zip(fns.aux_out, aux):
            outs[i] = convert(o)
        ctx.mark_non_differentiable(*(outs[i] for i in fns.aux_out))
        # Unused outputs get None, not zeros: an input reached only through them gets no grad.
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(_FREED_MARKER)
        ctx.program, ctx.fns, ctx.diff_in, ctx.n_inputs = program, fns, diff_in, len(tensors)
        ctx.vjp_fn = vjp_fn
        ctx.diff_meta = [(o.shape, o.dtype) for o in douts]
        return tuple(outs)

    @staticmethod
    @profiled_backward
    def backward(ctx, *grads):
        ctx.saved_tensors  # noqa: B018  (raises eager's error when the graph was freed)
        vjp_fn = ctx.vjp_fn
        if not _keep_graph():
            ctx.vjp_fn = None  # free the residuals now, as eager frees saved tensors
        program, fns = ctx.program, ctx.fns
        diff_grads = [grads[i] for i in program.diff_out]
        active = [j for j, g in enumerate(diff_grads) if g is not None]
        result: list = [None] * ctx.n_inputs
        if active:
            with torch.no_grad(), x64(), jax.default_device(program.device):
                cts = [
                    jax.numpy.zeros(shape, dtype) if g is None else _cotangent(g, dtype)
                    for g, (shape, dtype) in zip(diff_grads, ctx.diff_meta)
                ]
                if fns.deps is None:
                    fns.deps = _dependencies(vjp_fn, cts)
                in_grads = fns.bwd(vjp_fn, cts)
            live = frozenset().union(*(fns.deps[j] for j in active))
            convert = program.to_torch
            for pos, (k, g) in enumerate(zip(ctx.diff_in, in_grads)):
                if pos in live:
                    result[k] = _from_cotangent(convert(g))
        if torch.is_grad_enabled():  # create_graph=True: the gradients may be differentiated
            result = list(_NoDoubleBackward.apply(_GRAD_ANCHOR, *result))[1:]
        return (None, None, None, *result)


def _cotangent(g: torch.Tensor, dtype: np.dtype):
    """A torch gradient as a JAX cotangent of ``dtype``.

    NOTE: torch's gradient of a complex value is the conjugate of JAX's cotangent (torch
    follows the conjugate Wirtinger convention), so complex cotangents are conjugated on the
    way in and the resulting gradients on the way out (``_from_cotangent``).
    """
    if g.is_complex():
        g = g.conj()
    return to_jax(g) if g.numel() else jax.numpy.zeros(g.shape, dtype)


def _from_cotangent(g: torch.Tensor) -> torch.Tensor:
    return g.conj().resolve_conj() if g.is_complex() else g


def _dependencies(vjp_fn, cts: Sequence) -> tuple[frozenset[int], ...]:
    """Per cotangent, the input gradients of ``vjp_fn`` that it reaches (structurally, through
    the backward's jaxpr; gradients no cotangent reaches are symbolic zeros)."""
    closed = jax.make_jaxpr(_apply_vjp)(vjp_fn, list(cts))
    n_res = len(jax.tree_util.tree_leaves(vjp_fn))
    jaxpr = closed.jaxpr
    n_ct = len(jaxpr.invars) - n_res
    seeds = [frozenset()] * n_res + [frozenset({j}) for j in range(n_ct)]
    out_deps = _propagate(jaxpr, seeds)
    per_ct: list[set[int]] = [set() for _ in range(n_ct)]
    for k, ds in enumerate(out_deps):
        for j in ds:
            per_ct[j].add(k)
    return tuple(frozenset(s) for s in per_ct)


def _propagate(jaxpr: jcore.Jaxpr, in_deps: Sequence[frozenset]) -> list[frozenset]:
    """Which of the seeds in ``in_deps`` each output of ``jaxpr`` depends on."""
    env: dict[Any, frozenset] = dict(zip(jaxpr.invars, in_deps))

    def read(v) -> frozenset:
        return frozenset() if isinstance(v, jcore.Literal) else env.get(v, frozenset())

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        sub = _inner_jaxpr(eqn)
        if sub is not None:
            outs = _propagate(sub, ins)
        else:  # conservative: every output depends on every input
            union = frozenset().union(*ins)
            outs = [union] * len(eqn.outvars)
        for v, d in zip(eqn.outvars, outs):
            env[v] = d
    return [read(v) for v in jaxpr.outvars]


def _inner_jaxpr(eqn) -> jcore.Jaxpr | None:
    """The jaxpr an equation calls one-to-one (pjit, remat, custom calls), if any."""
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = eqn.params.get(name)
        if isinstance(sub, jcore.ClosedJaxpr):
            sub = sub.jaxpr
        if (
            isinstance(sub, jcore.Jaxpr)
            and len(sub.invars) == len(eqn.invars)
            and len(sub.outvars) == len(eqn.outvars)
        ):
            return sub
    return None


# The input that makes ``_NoDoubleBackward``'s outputs tracked, so differentiating them reaches
# its backward (the gradients themselves are computed untracked).
_GRAD_ANCHOR = torch.empty(0, requires_grad=True)


class _NoDoubleBackward(torch.autograd.Function):
    """Passes gradients through; differentiating them raises a clear error."""

    @staticmethod
    def forward(ctx, anchor, *grads):
        return (anchor.detach(), *(None if g is None else g.view_as(g) for g in grads))

    @staticmethod
    def backward(ctx, *_):
        raise RuntimeError(
            "torch2xla: double backward through a torch.compile(backend='xla') region is not "
            "supported: the gradients it computed with create_graph=True cannot be "
            "differentiated again. Compute higher-order gradients in eager PyTorch (or run "
            "the region eagerly with torch.compiler.disable)."
        )
