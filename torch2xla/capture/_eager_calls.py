"""Calls retargeted to eager's semantics on the Dynamo graph (``margin_losses``):
``F.multi_margin_loss``/``F.multilabel_margin_loss`` (torch decomposes both at the Autograd
key, before any table of ours: the multilabel decomposition counts the positions after a
target list's ``-1`` as targets, and neither checks dtypes nor keeps a 1-D input's 0-d
result), ``F.one_hot`` (torch 2.11 decomposes it at the Autograd key without eager's checks of
its classes; ``_one_hot`` asserts them), ``torch.quantile``/``nanquantile``'s ``q`` (call or
method) asserted as eager checks it, and ``torch.istft``'s window envelope
(``_composite_checks``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
import torch.nn.functional as F

from torch2xla._errors import OpError
from torch2xla.capture._composite_checks import checked_istft
from torch2xla.capture._rewrites import _rewritten
from torch2xla.ops import _autodiff, _dtype_probes
from torch2xla.runtime._interop import dtype_name


# -- margin losses as eager computes them -------------------------------------------------------
def margin_losses(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm``, or a copy whose margin-loss calls compute eager's values and shapes (``gm``
    itself is never changed). Arguments eager rejects by their dtypes raise eager's error,
    naming the user's line; targets out of range and quantiles' ``q`` out of [0, 1] (which
    torch's decompositions do not check) raise eager's error after the program ran."""
    return _rewritten(gm, _replaced, _retarget_margin)


def _replaced(node: torch.fx.Node) -> bool:
    if node.op == "call_method":
        return node.target in _REPLACED_METHODS
    if node.op != "call_function" or node.target not in _REPLACED:
        return False
    # (inside torch.func transforms (vmap, grad) torch's own call, its batching rules: the
    # composites' ``_assert_async`` has none, and the export failed)
    return not any(_transformed(a) for a in node.all_input_nodes)


def _transformed(node: torch.fx.Node) -> bool:
    value = node.meta.get("example_value")
    return isinstance(value, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(
        value
    )


def _retarget_margin(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    if node.op == "call_method":  # (self is the first argument of the function too)
        node.op, node.target = "call_function", _REPLACED_METHODS[node.target]
        return
    if node.target in _MARGIN_LOSSES:
        bound = inspect.signature(node.target).bind(*node.args, **node.kwargs).arguments
        meta = {k: getattr(v, "meta", {}).get("example_value") for k, v in bound.items()}
        _check_margin_dtypes(meta, node)
        _check_margin_differentiable(meta, node)
    node.target = _REPLACED[node.target]


def _check_margin_dtypes(meta: dict, node: torch.fx.Node) -> None:
    """Eager's kernels' dtype errors: a Long target, a weight of the input's dtype, and (on
    the CPU) a half-precision input, which their kernels do not implement."""
    x, target, weight = meta.get("input"), meta.get("target"), meta.get("weight")
    for t, want in ((target, torch.long), (weight, getattr(x, "dtype", None))):
        if isinstance(t, torch.Tensor) and want is not None and t.dtype != want:
            raise OpError(
                f"expected scalar type {dtype_name(want, 'eager')} but found "
                f"{dtype_name(t.dtype, 'eager')}",
                node,
            )
    if isinstance(x, torch.Tensor) and isinstance(target, torch.Tensor):
        rejected = _dtype_probes.kernel_refuses(_MARGIN_KERNELS[node.target], (x, target), {})
        if rejected is not None:
            message, error = rejected
            raise error(message, node)


def _check_margin_differentiable(meta: dict, node: torch.fx.Node) -> None:
    """Eager's autograd error for an argument its kernel has no derivative for that requires
    grad where grad mode is on (the call's result requires grad): Dynamo's fake run goes through
    torch's Python decomposition registered for the Autograd key, which skips the check, so a
    compiled call computed a gradient for ``multi_margin_loss``'s ``weight``."""
    out = node.meta.get("example_value")
    if not (isinstance(out, torch.Tensor) and out.requires_grad):
        return
    name, arguments = _MARGIN_NOT_DIFFERENTIABLE.get(node.target, ("", ()))
    for argument in arguments:
        t = meta.get(argument)
        if isinstance(t, torch.Tensor) and t.requires_grad:
            raise OpError(
                f"The function '{name}' is not differentiable with respect to argument "
                f"'{argument}'. This input cannot have requires_grad True.",
                node,
            )


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        return torch.nn._reduction.legacy_get_string(size_average, reduce)
    return reduction


def _multi_margin_loss(
    input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """``F.multi_margin_loss`` whose unreduced loss is 0-d for a 0-d target, as eager's
    (``target.dim() > 0`` gives one loss per sample, of an unbatched input too), with eager's
    check of the targets."""
    reduction = _reduction(size_average, reduce, reduction)
    classes = input.shape[-1] if input.dim() else 1
    torch._assert_async(torch.all((target >= 0) & (target < classes)), "target out of range")
    x = torch.atleast_2d(input)
    checked = p in (1, 2) and x.dim() == 2 and x.shape[1] != 0 and target.dim() <= 1
    checked = checked and target.numel() == x.shape[0]
    checked = checked and (weight is None or (weight.dim() <= 1 and weight.numel() == x.shape[1]))
    if not checked:  # (the decomposition raises eager's error)
        return F.multi_margin_loss(input, target, p, margin, weight, reduction=reduction)
    x = _once_differentiable(x, "aten::multi_margin_loss_backward")
    # eager's kernel adds z = margin - x[target] + x[i] for i != target only where z > 0 (a
    # NaN score is left out); the decomposition's clamp_min(z, 0) kept it
    t = target.reshape(-1, 1)
    z = margin - torch.gather(x, 1, t) + x
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * weight.reshape(-1)[t]
    idx = torch.arange(x.shape[-1], device=x.device)
    h = torch.where((z > 0) & (idx != t), h, 0)
    loss = h.sum(-1) / x.shape[-1]
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape(()) if target.dim() == 0 else loss


def _multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``F.multilabel_margin_loss`` as eager's kernel computes it: per sample, the targets are
    the entries of ``target`` before the first -1 (a repeated one counts again), and the loss
    is ``sum over targets j and non-targets i of max(0, 1 - (x[j] - x[i])) / dim``."""
    reduction = _reduction(size_average, reduce, reduction)
    x, t = torch.atleast_2d(input), torch.atleast_2d(target)
    x = _once_differentiable(x, "aten::multilabel_margin_loss_backward")
    dim = x.shape[-1]
    # (eager checks every entry, those after the first -1 too)
    torch._assert_async(torch.all((t >= -1) & (t < dim)), "argument #2 'target' is out of range")
    idx = torch.arange(dim, device=x.device)
    end = torch.amin(torch.where(t == -1, idx, dim), dim=-1, keepdim=True)
    listed = idx < end  # (N, dim): target positions before the first -1
    tidx = torch.where(listed, t, 0)
    u = torch.gather(x, -1, tidx)  # (N, dim): the score of each listed target
    is_target = ((idx == tidx.unsqueeze(-1)) & listed.unsqueeze(-1)).any(dim=1)  # (N, dim)
    z = 1 - u.unsqueeze(-1) + x.unsqueeze(1)  # (N, target pos, class)
    # (eager adds z where z > 0: a NaN is left out)
    z = torch.where(listed.unsqueeze(-1) & ~is_target.unsqueeze(1) & (z > 0), z, 0)
    loss = z.sum(dim=(1, 2)) / dim
    if input.dim() < 2:
        loss = loss.reshape(())
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _once_differentiable(x, backward: str):
    """``x`` whose gradient eager's backward kernel ``backward`` gives: a double backward
    through it raises eager's error (its derivative is not implemented) where the composite
    would be differentiated again."""
    return _autodiff.once_differentiable(x, backward)


_MARGIN_LOSSES = {
    F.multi_margin_loss: _multi_margin_loss,
    F.multilabel_margin_loss: _multilabel_margin_loss,
}


def _one_hot(input, num_classes=-1):
    """``F.one_hot`` with eager's checks of its classes, raised by the asserts' lowering with
    eager's messages. Without ``num_classes`` (inferred from the values) or of a dtype other
    than int64, ``F.one_hot`` itself (its own errors)."""
    if num_classes == -1 or input.dtype != torch.int64:
        return F.one_hot(input, num_classes)
    torch._assert_async(torch.all(input >= 0), "Class values must be non-negative.")
    torch._assert_async(
        torch.all(input < num_classes), "Class values must be smaller than num_classes."
    )
    classes = torch.arange(num_classes, dtype=input.dtype, device=input.device)
    return (input.unsqueeze(-1) == classes).to(torch.int64)


def _checked_quantile(quantile: Callable) -> Callable:
    """``quantile`` (``torch.quantile``, ``torch.nanquantile``) with eager's check that a
    tensor ``q`` is in [0, 1] (its composite checks it on the host; the trace does not)."""

    def checked(input, q, *args, **kwargs):
        if isinstance(q, torch.Tensor):
            torch._assert_async(
                torch.all((q >= 0) & (q <= 1)), "quantile() q values must be in the range [0, 1]"
            )
        return quantile(input, q, *args, **kwargs)

    checked.__name__ = checked.__qualname__ = quantile.__name__
    return checked


_QUANTILES = {torch.quantile: _checked_quantile(torch.quantile)}
_QUANTILES[torch.nanquantile] = _checked_quantile(torch.nanquantile)
_REPLACED = {**_MARGIN_LOSSES, F.one_hot: _one_hot, **_QUANTILES, torch.istft: checked_istft}
_REPLACED_METHODS = {"quantile": _QUANTILES[torch.quantile]}
_REPLACED_METHODS["nanquantile"] = _QUANTILES[torch.nanquantile]
_REPLACED_METHODS["istft"] = checked_istft
# (the ATen kernels behind them, for their dtype support: ``_dtype_probes.kernel_refuses``)
_MARGIN_KERNELS = {
    F.multi_margin_loss: torch.ops.aten.multi_margin_loss.default,
    F.multilabel_margin_loss: torch.ops.aten.multilabel_margin_loss.default,
}
# (their ATen name and the floating arguments eager's autograd has no derivative for: the
# target of ``multilabel_margin_loss`` is an integer tensor, which cannot require grad)
_MARGIN_NOT_DIFFERENTIABLE = {F.multi_margin_loss: ("multi_margin_loss", ("weight",))}
