"""Gradients released segment by segment: the chain of autograd nodes (``Gate``) that hands
each group of a split backward's gradients to autograd as its segment ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from torch2xla.autodiff import _split
from torch2xla.autodiff._train_fns import from_cotangent
from torch2xla.debug._profile import profiled_backward

if TYPE_CHECKING:
    from torch2xla.autodiff._autograd import _Plan

# -- gradients released segment by segment ------------------------------------------------------
#
# A split backward (``_split``) computes the gradients in segments; each one is final when the
# segment that computes it ends. So that each leaves the backward then (DDP's bucket hooks and
# FSDP2's reduce-scatter, fired as autograd accumulates a parameter's gradient, overlap the
# segments after it; a post-accumulate-grad hook sees it early), the forward builds a chain of
# autograd nodes in front of the program's node: one ``Gate`` per later group of inputs
# (grouped by the segment that finishes their gradients), each taking its group's tensors and a
# token from the next gate. The program's node takes the first group's gradients and hands a
# token gradient on, which makes autograd run the next gate's backward: it runs the segments
# its group needs (the state is shared: ``Chain``), returns their gradients, which autograd
# accumulates, and hands the token on. Every input also stays an input of the program's node,
# whose backward returns None for the later groups (their gradients come from the gates).


def chain_groups(plan: _Plan) -> tuple[tuple[int, ...], ...] | None:
    """The positions in ``diff_in`` grouped by the segment after which their gradients are
    known, in order (``plan.groups``; None until the backward decided whether it is split)."""
    ready = plan.fns.bwd.ready()
    if ready is None:
        return None
    by: dict[int, list[int]] = {}
    if len(ready) == len(plan.diff_in):
        for p, r in enumerate(ready):
            by.setdefault(max(r, 1), []).append(p)
    groups = tuple(tuple(by[r]) for r in sorted(by))
    plan.groups = groups if len(groups) > 1 else ()
    return plan.groups


def distributed() -> bool:
    """Whether a process group runs (DDP and FSDP2 order their buckets by the first step)."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized()


class Chain:
    """What the nodes of one chained call share: the gradients of the running backward
    (``source``: a ``_split.Run``, or a dict from position in ``diff_in`` to gradient), and
    which positions have one (``live``); ``pending``: the outputs of a forward that ran
    before its node was made (``_apply_first``)."""

    __slots__ = ("groups", "live", "pending", "plan", "source")

    def __init__(self, plan: _Plan, groups: tuple[tuple[int, ...], ...], pending=None) -> None:
        self.plan, self.groups, self.pending = plan, groups, pending
        self.source: _split.Run | dict | None = None
        self.live: frozenset[int] = frozenset()

    def more_after(self, g: int) -> bool:
        """Whether a group after ``g`` has a gradient."""
        return self.source is not None and any(
            p in self.live for h in self.groups[g + 1 :] for p in h
        )

    def take(self, g: int, later: bool) -> dict[int, torch.Tensor]:
        """Group ``g``'s gradients by position. Where a later gate runs (``later``), the
        segment after the ones it needs is started first, so that the device has work while
        torch takes these; else the backward's values are let go."""
        source, live = self.source, self.live
        positions = [p for p in self.groups[g] if p in live]
        if isinstance(source, _split.Run):
            if later:
                need = max((source.ready[p] for p in positions), default=source.done)
                source.advance(max(need, source.done) + 1)
            plan = self.plan
            got = source.take(positions, plan.convert)
            if plan.conj_grads:
                got = [from_cotangent(t) for t in got]
            out = dict(zip(positions, got))
        else:
            out = {p: source.pop(p) for p in positions}
        if not later:
            self.source = None  # the rest of the backward's values go now
        return out


_TOKEN_GRADS: dict[torch.device, torch.Tensor] = {}


def token_gradient(device: torch.device) -> torch.Tensor:
    t = _TOKEN_GRADS.get(device)
    if t is None:
        t = _TOKEN_GRADS[device] = torch.empty(0, device=device)
    return t


class Gate(torch.autograd.Function):
    """One later group of the chain (``_apply_chained``): ``apply(chain, g, token, *tensors)``
    returns a token; its backward returns group ``g``'s gradients."""

    @staticmethod
    def forward(ctx, chain: Chain, g: int, token, *tensors):
        ctx.set_materialize_grads(False)
        ctx.chain, ctx.g, ctx.plan, ctx.n = chain, g, chain.plan, len(tensors)
        return torch.empty(0, device=chain.plan.program.torch_device)

    @staticmethod
    @profiled_backward
    def backward(ctx, token_grad):
        chain, g = ctx.chain, ctx.g
        if token_grad is None or chain.source is None:
            return (None, None, None, *([None] * ctx.n))
        later = chain.more_after(g)
        grads = chain.take(g, later)
        group = chain.groups[g]
        next_token = token_gradient(token_grad.device) if later else None
        return (None, None, next_token, *(grads.get(p) for p in group))
