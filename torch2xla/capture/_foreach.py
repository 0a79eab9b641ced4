"""The ``_foreach_*`` ops as one op per tensor, for the ATen export's decomposition table.

Optimizers with ``foreach=True`` (their default on CUDA), ``clip_grad_norm_`` and
``clip_grad_value_`` (by default wherever foreach kernels exist, the CPU too) and EMA updates
call the ``_foreach_*`` ops on lists of tensors. torch's core-ATen table does not decompose them,
so each one reached the lowering as an op without a lowering and ran in eager PyTorch (a whole
compiled ``opt.step`` on CUDA). Eager's own slow path (``ForeachOpsKernels.cpp``) is the
per-tensor op; so is this decomposition, which XLA fuses as it likes. Only the functional
overloads are listed: functionalization reaches them first.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

# Ops whose per-tensor op has another name (eager's slow path uses the same kernels).
_RENAMED = {
    "maximum": "clamp_min",  # _foreach_maximum.Scalar is clamp_min's kernel
    "minimum": "clamp_max",
}


def _per_tensor(op: torch._ops.OpOverload):
    base = op.__name__.split(".")[0].removeprefix("_foreach_")
    schema = op._schema
    arguments = schema.arguments
    overload = schema.overload_name

    def decompose(*args, **kwargs):
        bound = {a.name: a.default_value for a in arguments if a.has_default_value()}
        bound.update(zip((a.name for a in arguments), args))
        bound.update(kwargs)
        values = [bound[a.name] for a in arguments if not a.kwarg_only]
        keywords = {a.name: bound[a.name] for a in arguments if a.kwarg_only}
        lists = [k for k, a in enumerate(arguments) if not a.kwarg_only and _is_list(a)]
        n = len(values[lists[0]])
        out = []
        for i in range(n):
            per = [v[i] if k in lists else v for k, v in enumerate(values)]
            out.append(_one(base, overload, per, keywords))
        return out

    decompose.__name__ = decompose.__qualname__ = str(op).replace(".", "_")
    return decompose


def _is_list(argument) -> bool:
    return isinstance(argument.type, torch.ListType) or (
        # addcmul/addcdiv's ``scalars``: a 1-D tensor, one value per tensor
        argument.name == "scalars" and str(argument.type) == "Tensor"
    )


def _call(name: str, *args, **kwargs):
    return getattr(aten, name)(*args, **kwargs)


def _one(base: str, overload: str, per: list, keywords: dict):
    """The per-tensor op of ``_foreach_<base>.<overload>`` on one position's arguments."""
    if base in ("addcmul", "addcdiv"):
        self, t1, t2, value = per
        if isinstance(value, torch.Tensor):  # (the .Tensor overload's element: a 0-d tensor)
            term = t1 * t2 if base == "addcmul" else t1 / t2
            return self + value * term
        return _call(base, self, t1, t2, value=value)
    if base == "norm":
        self, ord, dtype = per
        return _call("linalg_vector_norm", self, ord, dtype=dtype)
    if base == "max":
        return _call("amax", per[0], [])
    if base == "zero":
        return _call("zeros_like", per[0])
    if base == "copy":
        self, src, _ = per
        return _call("copy", self, src)
    if base in _RENAMED and overload in ("Scalar", "ScalarList"):
        return _call(_RENAMED[base], *per)
    if base in ("clamp_min", "clamp_max") and overload == "List":
        return getattr(aten, base).Tensor(*per)
    return _call(base, *per, **keywords)


def decompositions() -> dict:
    """Every functional ``aten._foreach_*`` overload -> its per-tensor decomposition."""
    table = {}
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::_foreach_"):
            continue
        base, _, overload = name.removeprefix("aten::").partition(".")
        if base.endswith("_") or base == "_foreach_powsum":  # (powsum: left to eager)
            continue
        op = getattr(getattr(aten, base), overload or "default")
        if any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments):
            continue  # (out= variants)
        table[op] = _per_tensor(op)
    return table


__all__ = ["decompositions"]
