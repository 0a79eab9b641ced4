"""What a call can change and a caller can observe: copies of the inputs for each run,
the state of modules and optimizers after the call, which outputs alias what."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils import _pytree as pytree

from torch2xla.testing._compare import Mismatch, compare_trees

__all__ = [
    "alias_mismatches",
    "aliasing",
    "clone_args",
    "grad_leaves",
    "leaf_grads",
    "named_tensors",
    "observable",
    "state_mismatches",
    "state_tensors",
]


def clone_args(tree: Any, memo: dict, upcast: bool = False) -> Any:
    """Copies of every tensor in ``tree`` with the same sizes, strides, storage offsets and
    aliasing (tensors sharing a storage share the copy), so layouts and views reach both runs.

    Modules and optimizers among the arguments are deep copies (one memo, so an optimizer's
    parameters stay its copied model's): a training step run eagerly must not change the
    model the compiled run gets.

    ``upcast``: floating tensors (and modules) in float64, complex ones in complex128, for
    the float64 reference."""
    deep = memo.setdefault("deepcopy", {})

    def clone(t: Any) -> Any:
        if isinstance(t, (torch.nn.Module, torch.optim.Optimizer)):
            new_obj = copy.deepcopy(t, deep)
            return new_obj.double() if upcast and isinstance(new_obj, torch.nn.Module) else new_obj
        if not isinstance(t, torch.Tensor):
            return t
        dtype = _wide(t.dtype) if upcast else t.dtype
        storage = t.untyped_storage()
        key = (storage.data_ptr(), t.device) if storage.nbytes() else None
        new_storage = memo.get(key) if key is not None else None
        if new_storage is None:
            if dtype is t.dtype:
                new_storage = storage.clone()
            else:  # the whole storage, converted element by element
                whole = torch.empty(0, dtype=t.dtype, device=t.device)
                whole.set_(storage, 0, (storage.nbytes() // t.element_size(),), (1,))
                new_storage = whole.to(dtype).untyped_storage()
            if key is not None:
                memo[key] = new_storage
        with torch.no_grad():
            new = torch.empty(0, dtype=dtype, device=t.device)
            new.set_(new_storage, t.storage_offset(), t.size(), t.stride())
        if isinstance(t, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
        elif t.requires_grad:
            new.requires_grad_(True)
        if t.is_leaf and t.grad is not None:
            new.grad = t.grad.detach().to(dtype, copy=True)
        deep[id(t)] = new
        return new

    return pytree.tree_map(clone, tree)


def _wide(dtype: torch.dtype) -> torch.dtype:
    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else dtype


def observable(tree: Any) -> Any:
    """``tree`` with each module replaced by what a caller can observe of it after a call
    (parameters, buffers, persistent or not, their ``.grad``, ``training`` flags) and each
    optimizer by its ``state_dict()``."""

    def state(v: Any) -> Any:
        if isinstance(v, torch.nn.Module):
            params = dict(v.named_parameters(remove_duplicate=False))
            return {
                "parameters": params,
                "buffers": dict(v.named_buffers(remove_duplicate=False)),
                ".grad": {n: p.grad for n, p in params.items()},
                "training": {n or "(root)": m.training for n, m in v.named_modules()},
            }
        if isinstance(v, torch.optim.Optimizer):
            return v.state_dict()
        return v

    return pytree.tree_map(state, tree)


def named_tensors(tree: Any, prefix: str) -> dict[str, torch.Tensor]:
    return {
        prefix + pytree.keystr(path): t
        for path, t in pytree.tree_flatten_with_path(tree, is_leaf=_is_none)[0]
        if isinstance(t, torch.Tensor)
    }


def _is_none(v: Any) -> bool:
    return v is None


def aliasing(outputs: Any, sources: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """For each output tensor, what it aliases: an input (or parameter, buffer) itself, a view
    of one's storage (with its offset), an earlier output; or "a new tensor"."""
    by_id = {id(t): n for n, t in sources.items()}
    by_storage: dict[Any, list[str]] = {}
    for n, t in sources.items():
        key = _storage_key(t)
        if key is not None:
            by_storage.setdefault(key, []).append(n)
    seen_id: dict[int, str] = {}
    seen_storage: dict[Any, str] = {}
    out = {}
    for name, o in named_tensors(outputs, "output").items():
        key = _storage_key(o)
        if id(o) in by_id:
            desc = f"{by_id[id(o)]} itself"
        elif id(o) in seen_id:
            desc = f"the same tensor as {seen_id[id(o)]}"
        elif key in by_storage:
            desc = (
                f"a view of {' and '.join(by_storage[key])} (storage offset {o.storage_offset()})"
            )
        elif key in seen_storage:
            desc = f"a view sharing {seen_storage[key]}'s storage (offset {o.storage_offset()})"
        else:
            desc = "a new tensor"
        seen_id.setdefault(id(o), name)
        if key is not None:
            seen_storage.setdefault(key, name)
        out[name] = desc
    return out


def _storage_key(t: torch.Tensor) -> Any:
    storage = t.untyped_storage()
    return (storage.data_ptr(), t.device) if storage.nbytes() else None


def alias_mismatches(eager: dict[str, str], xla: dict[str, str]) -> list[Mismatch]:
    return [
        Mismatch(
            name,
            f"aliasing differs: eager gives {eager[name]}, XLA {xla.get(name)} (an in-place "
            "change to one reaches the other only on one side)",
        )
        for name in eager
        if eager[name] != xla.get(name)
    ]


def leaf_grads(named: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """``.grad`` of every leaf tensor (None included: a missing gradient is not zeros)."""
    return {n: t.grad for n, t in named.items() if t.is_leaf}


def grad_leaves(tree: Any, want: bool) -> dict[str, torch.Tensor]:
    """Tensors of ``(args, kwargs)`` whose gradients are compared, by name (``args[0]``...).

    Those that require grad; with ``want`` and none requiring grad, every floating tensor."""
    named = {
        ("args" if path[0].idx == 0 else "kwargs") + pytree.keystr(path[1:]): t
        for path, t in pytree.tree_flatten_with_path(tree)[0]
        if isinstance(t, torch.Tensor)
    }
    tracked = {n: t for n, t in named.items() if t.requires_grad}
    if want and not tracked:
        tracked = {n: t for n, t in named.items() if t.dtype.is_floating_point or t.is_complex()}
        for t in tracked.values():
            t.requires_grad_(True)
    return tracked


def state_tensors(state: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors a call's outputs may alias: inputs, parameters and buffers, by name."""
    named = named_tensors(state["args"], "args")
    named.update(named_tensors(state["kwargs"], "kwargs"))
    module = state["module"]
    if module is not None:
        for part in ("parameters", "buffers"):
            named.update({f"module {n}": t for n, t in module[part].items()})
    return named


def state_mismatches(
    e_state: dict, x_state: dict, tol: Mapping[str, Any], r_state: dict | None = None
) -> list[Mismatch]:
    """Inputs (and modules, optimizers among them), the module's parameters, buffers,
    ``.grad`` and ``training`` flags, after the call (``observable`` states; ``r_state``:
    the float64 reference's)."""
    r = r_state or {"args": None, "kwargs": None, ".grad": {}, "module": None}
    out = compare_trees(
        "args after the call", e_state["args"], x_state["args"], **tol, reference=r["args"]
    )
    out += compare_trees(
        "kwargs after the call",
        e_state["kwargs"],
        x_state["kwargs"],
        **tol,
        reference=r["kwargs"],
    )
    for n, g in e_state[".grad"].items():
        out += compare_trees(
            f"{n}.grad after the call",
            g,
            x_state[".grad"].get(n),
            **tol,
            reference=r[".grad"].get(n),
        )
    if e_state["module"] is not None:
        e_mod, x_mod, r_mod = e_state["module"], x_state["module"], r["module"]
        for part, suffix in (("parameters", ""), ("buffers", ""), (".grad", ".grad")):
            for n, v in e_mod[part].items():
                out += compare_trees(
                    f"module {n}{suffix} after the call",
                    v,
                    x_mod[part].get(n),
                    **tol,
                    reference=None if r_mod is None else r_mod[part].get(n),
                )
        out += compare_trees(
            "module training flags after the call", e_mod["training"], x_mod["training"], **tol
        )
    return out
