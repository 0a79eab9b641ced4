"""``assert_parity``: run a function or module eagerly and through ``backend="xla"``, compare."""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import functools
import hashlib
import html
import inspect
import io
import pickle
import re
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from torch2xla._backend import FallbackWarning, xla_backend
from torch2xla._options import Options
from torch2xla.testing._compare import (
    Mismatch,
    ParityError,
    compare_trees,
    describe_tensor,
    describe_value,
)
from torch2xla.testing._limits import KNOWN_LIMITATIONS

__all__ = ["ParityReport", "assert_parity", "xla_graph_runs"]

# Dynamo silently runs a frame eagerly once it hits its recompile limit (8): a property test
# that draws many dtypes and shapes would then compare eager with eager. During the compiled
# call the limit is raised to this, and ``require_xla`` checks that XLA really ran.
_RECOMPILE_LIMIT = 64


class _Counter:
    runs = 0


def xla_graph_runs() -> int:
    """How many compiled graphs ``assert_parity``'s backend has run in this process."""
    return _Counter.runs


class _CountingGraph:
    """A compiled graph that counts its calls, so ``assert_parity`` knows XLA really ran."""

    def __init__(self, compiled: Callable) -> None:
        self.compiled = compiled

    def __call__(self, *args: Any) -> Any:
        _Counter.runs += 1
        return self.compiled(*args)


@functools.cache
def _backend(options: tuple[tuple[str, Any], ...]) -> Callable:
    # One backend object per option set: Dynamo's cache only reuses entries compiled by the same
    # backend, so a fresh closure per call would recompile every time.
    opts = dict(options)

    def torch2xla_parity(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return _CountingGraph(xla_backend(gm, example_inputs, options=opts))

    return torch2xla_parity


@dataclasses.dataclass(frozen=True)
class ParityReport:
    """What ``assert_parity`` compared (returned when they agree).

    Attributes:
        eager: the eager outputs (None when both raised, see ``check_errors``).
        xla: the outputs of the compiled call.
        xla_runs: compiled graphs run during the compiled call (0: nothing ran in XLA).
        max_abs_diff: largest ``|xla - eager|`` over finite floating output elements.
        error: the exception both sides raised, when ``check_errors`` and eager raised.
    """

    eager: Any
    xla: Any
    xla_runs: int
    max_abs_diff: float
    error: BaseException | None = None

    def _outputs(self) -> str:
        leaves = pytree.tree_leaves(self.xla)
        shown = [describe_tensor(t) if isinstance(t, torch.Tensor) else repr(t) for t in leaves]
        text = ", ".join(shown[:4]) + (f", ... ({len(shown)} in all)" if len(shown) > 4 else "")
        return text or "none"

    def __repr__(self) -> str:
        if self.error is not None:
            return (
                f"ParityReport(both raised {type(self.error).__name__}, xla_runs={self.xla_runs})"
            )
        return (
            f"ParityReport(agree, outputs: {self._outputs()}, xla_runs={self.xla_runs}, "
            f"max_abs_diff={self.max_abs_diff:.3g})"
        )

    def _repr_html_(self) -> str:
        rows = (
            [("result", f"both raised {type(self.error).__name__}: {self.error}")]
            if self.error is not None
            else [
                ("result", "XLA agrees with eager PyTorch"),
                ("outputs", self._outputs()),
                ("max |xla - eager|", f"{self.max_abs_diff:.3g}"),
            ]
        )
        rows.append(("XLA graphs run", str(self.xla_runs)))
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in rows
        )
        return f"<table class='torch2xla-parity'><caption>ParityReport</caption>{body}</table>"


def _clone_args(tree: Any, memo: dict) -> Any:
    """Copies of every tensor in ``tree`` with the same sizes, strides, storage offsets and
    aliasing (tensors sharing a storage share the copy), so layouts and views reach both runs.

    Modules and optimizers among the arguments are deep copies (one memo, so an optimizer's
    parameters stay its copied model's): a training step run eagerly must not change the
    model the compiled run gets."""
    deep = memo.setdefault("deepcopy", {})

    def clone(t: Any) -> Any:
        if isinstance(t, (torch.nn.Module, torch.optim.Optimizer)):
            return copy.deepcopy(t, deep)
        if not isinstance(t, torch.Tensor):
            return t
        storage = t.untyped_storage()
        key = (storage.data_ptr(), t.device) if storage.nbytes() else None
        new_storage = memo.get(key) if key is not None else None
        if new_storage is None:
            new_storage = storage.clone()
            if key is not None:
                memo[key] = new_storage
        with torch.no_grad():
            new = torch.empty(0, dtype=t.dtype, device=t.device)
            new.set_(new_storage, t.storage_offset(), t.size(), t.stride())
        if isinstance(t, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
        elif t.requires_grad:
            new.requires_grad_(True)
        if t.is_leaf and t.grad is not None:
            new.grad = t.grad.detach().clone()
        deep[id(t)] = new
        return new

    return pytree.tree_map(clone, tree)


def _observable(tree: Any) -> Any:
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


def _named_tensors(tree: Any, prefix: str) -> dict[str, torch.Tensor]:
    return {
        prefix + pytree.keystr(path): t
        for path, t in pytree.tree_flatten_with_path(tree, is_leaf=_is_none)[0]
        if isinstance(t, torch.Tensor)
    }


def _is_none(v: Any) -> bool:
    return v is None


def _aliasing(outputs: Any, sources: Mapping[str, torch.Tensor]) -> dict[str, str]:
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
    for name, o in _named_tensors(outputs, "output").items():
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


def _alias_mismatches(eager: dict[str, str], xla: dict[str, str]) -> list[Mismatch]:
    return [
        Mismatch(
            name,
            f"aliasing differs: eager gives {eager[name]}, XLA {xla.get(name)} (an in-place "
            "change to one reaches the other only on one side)",
        )
        for name in eager
        if eager[name] != xla.get(name)
    ]


def _leaf_grads(named: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """``.grad`` of every leaf tensor (None included: a missing gradient is not zeros)."""
    return {n: t.grad for n, t in named.items() if t.is_leaf}


def _grad_leaves(tree: Any, want: bool) -> dict[str, torch.Tensor]:
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


def _cotangents(outputs: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(output, cotangent) for every output that requires grad; same draws for both runs."""
    gen = torch.Generator().manual_seed(0)
    pairs = []
    for o in pytree.tree_leaves(outputs):
        if isinstance(o, torch.Tensor) and o.requires_grad:
            ct = torch.randn(o.shape, generator=gen, dtype=torch.float64)
            pairs.append((o, ct.to(dtype=o.dtype, device=o.device)))
    return pairs


def _backward(outputs: Any) -> None:
    pairs = _cotangents(outputs)
    if pairs:
        torch.autograd.backward([o for o, _ in pairs], [c for _, c in pairs])


def _max_abs_diff(eager: Any, xla: Any) -> float:
    best = 0.0
    for e, x in zip(pytree.tree_leaves(eager), pytree.tree_leaves(xla)):
        if (
            isinstance(e, torch.Tensor)
            and isinstance(x, torch.Tensor)
            and e.dtype.is_floating_point
            and e.shape == x.shape
            and e.numel()
        ):
            d = (x.detach().to(torch.float64) - e.detach().to(torch.float64)).abs()
            d = d[torch.isfinite(d)]
            if d.numel():
                best = max(best, float(d.max()))
    return best


def _name(fn: Any) -> str:
    if isinstance(fn, torch.nn.Module):
        return type(fn).__name__
    return getattr(fn, "__qualname__", None) or repr(fn)


def _inputs_text(args: tuple, kwargs: Mapping) -> str:
    lines = [f"  args[{i}]: {describe_value(a)}" for i, a in enumerate(args)]
    lines += [f"  kwargs[{k!r}]: {describe_value(v)}" for k, v in kwargs.items()]
    return "inputs:\n" + "\n".join(lines) if lines else "inputs: none"


# How the function under test is named in a failure's reproduction (``parity_test`` sets it:
# the test's name is bound to the hypothesis test, the function is its ``parity_target``).
_REPRODUCE_AS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "torch2xla_parity_reproduce_as", default=None
)
_SHOWN = 3  # differing values a report shows (the others are counted)


def _final_example() -> bool:
    """False while hypothesis explores and shrinks (only its final replay is reported)."""
    try:
        import hypothesis
        from hypothesis.control import current_build_context
    except ImportError:
        return True
    if not hypothesis.currently_in_test_context():
        return True
    return bool(getattr(current_build_context(), "is_final", True))


def _reproduction(fn: Any, args: tuple, kwargs: Mapping, options: Mapping) -> str | None:
    """Code that runs the failing check again on the exact inputs, saved to a file (None while
    hypothesis is still shrinking; a note when the inputs cannot be saved)."""
    if not _final_example():
        return None
    buffer = io.BytesIO()
    try:
        torch.save({"args": args, "kwargs": dict(kwargs)}, buffer)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        return f"(the inputs could not be saved: {type(e).__name__}: {e})"
    data = buffer.getvalue()
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", _name(fn))[:60]
    path = Path(tempfile.gettempdir()) / "torch2xla-parity"
    path = path / f"{stem}-{hashlib.sha1(data).hexdigest()[:10]}.pt"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as e:
        return f"(the inputs could not be saved: {e})"
    name = _REPRODUCE_AS.get() or _call_name(fn)
    extra = "".join(f", {k}={v!r}" for k, v in options.items())
    call, _, comment = name.partition("  #")
    return (
        f"inputs = torch.load({str(path)!r}, weights_only=False)\n"
        f'torch2xla.testing.assert_parity({call}, *inputs["args"], kwargs=inputs["kwargs"]'
        f"{extra})" + (f"  #{comment}" if comment else "")
    )


def _call_name(fn: Any) -> str:
    """How a reproduction calls ``fn``: its name, or a placeholder and a comment naming it."""
    if isinstance(fn, torch.nn.Module):
        return f"model  # model: your {_name(fn)}"
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() else f"fn  # fn: your {_name(fn)}"


def _report(
    fn: Any,
    head: str,
    body: list[str],
    args: tuple,
    kwargs: Mapping,
    options: Mapping,
    what: str,
    limitations: tuple = (),
) -> ParityError:
    """A ``ParityError`` whose message is the short report: what differs, inputs, known
    limitations hit, how to reproduce."""
    lines = [head, *body, _inputs_text(args, kwargs)]
    for lim in limitations:
        lines.append(
            f"known limitation ({lim.op}): {lim.reason}. The default strategies avoid it; see "
            'torch2xla/testing/README.md, "Limitations".'
        )
    reproduce = _reproduction(fn, args, kwargs, options)
    if reproduce is not None:
        lines.append("reproduce:\n" + "\n".join(f"  {line}" for line in reproduce.splitlines()))
    error = ParityError("\n".join(lines), what)
    error.limitations = tuple(limitations)
    error.reproduce = reproduce if reproduce and not reproduce.startswith("(") else None
    return error


def _limitations_hit(tensors: list[torch.Tensor], mismatches: list[Mismatch]) -> tuple:
    return tuple(lim for lim in KNOWN_LIMITATIONS if lim.detect and lim.detect(tensors, mismatches))


def _fail(
    fn: Any,
    mismatches: list[Mismatch],
    args: tuple,
    kwargs: Mapping,
    eager_out: Any,
    options: Mapping,
) -> ParityError:
    shown = mismatches[:_SHOWN]
    body = [str(m) for m in shown]
    if len(mismatches) > len(shown):
        rest = ", ".join(m.what for m in mismatches[len(shown) :])
        body.append(f"... and {len(mismatches) - len(shown)} more: {rest}")
    tensors = [
        t for t in pytree.tree_leaves((args, kwargs, eager_out)) if isinstance(t, torch.Tensor)
    ]
    return _report(
        fn,
        f'{_name(fn)} gives different results with backend="xla" than in eager PyTorch:',
        body,
        args,
        kwargs,
        options,
        shown[0].what,
        _limitations_hit(tensors, mismatches),
    )


def assert_parity(
    fn: Callable | torch.nn.Module,
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    grad: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    check_dtype: bool = True,
    check_signed_zero: bool = False,
    check_stride: bool = True,
    check_errors: bool = False,
    allow_fallback: bool = False,
    require_xla: bool = True,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    options: Mapping[str, Any] | None = None,
) -> ParityReport:
    """Check that ``torch.compile(fn, backend="xla")`` matches eager PyTorch on these inputs.

    ``fn`` runs twice, eagerly and compiled, each on its own copy of the inputs (same strides,
    storage offsets and aliasing; the caller's tensors and module are never touched). Then:

    - outputs: same structure, dtypes, shapes, devices and ``requires_grad``; values within
      tolerance; NaN in the same positions (see :data:`DEFAULT_TOLERANCES`);
    - side effects: every input tensor after the call (in-place ops), and for a module its
      parameters and buffers (e.g. BatchNorm running stats);
    - with ``grad=True``: gradients of the inputs that require grad (all floating inputs if
      none does) and of the module's parameters, after a backward pass from the same random
      cotangents on both sides.

    Args:
        fn: a function or ``nn.Module``.
        args: positional arguments for ``fn``.
        kwargs: keyword arguments for ``fn``.
        grad: also compare gradients.
        rtol, atol: tolerances for every floating comparison; ``None`` uses the per-dtype
            default (the defaults of ``torch.testing.assert_close``).
        check_dtype: require equal dtypes.
        check_signed_zero: also require -0.0 and 0.0 to match (in outputs and inputs after
            the call; not in gradients, where a zero's sign is an artifact of the formula).
        check_stride: require equal strides (on dims of size > 1) of outputs and inputs
            after the call: a caller sees them (``.stride()``, ``.is_contiguous()``, whether
            ``.view()`` works).
        check_errors: when eager raises, require the compiled call to raise too (instead of
            re-raising eager's error, which means the input was invalid for ``fn``).
        allow_fallback: let ops XLA cannot run execute in eager PyTorch (by default the
            backend runs in strict mode, so such ops raise instead of passing unchecked).
        require_xla: fail when no XLA graph ran during the compiled call (Dynamo graph-broke
            everything, or hit its recompile limit and ran the frame eagerly).
        fullgraph, dynamic: passed to ``torch.compile``.
        options: extra backend options (e.g. ``{"remat": True}``).

    Returns:
        A :class:`ParityReport` when the results agree.

    Raises:
        ParityError: (an ``AssertionError``) naming each differing value, its worst element
            with absolute and relative error, and the inputs, printed exactly.

    Example:
        >>> assert_parity(torch.nn.Linear(4, 2), torch.randn(3, 4), grad=True)  # doctest: +SKIP
    """
    __tracebackhide__ = True  # pytest shows the user's frame, not the kit's
    given = {
        "grad": grad,
        "rtol": rtol,
        "atol": atol,
        "check_dtype": check_dtype,
        "check_signed_zero": check_signed_zero,
        "check_stride": check_stride,
        "check_errors": check_errors,
        "allow_fallback": allow_fallback,
        "require_xla": require_xla,
        "fullgraph": fullgraph,
        "dynamic": dynamic,
        "options": options,
    }
    given = {k: v for k, v in given.items() if v != _DEFAULTS[k]}  # for the reproduction
    kwargs = dict(kwargs or {})
    opts = {"strict": not allow_fallback, **dict(options or {})}
    Options.parse(None, opts)  # (an OptionError now, not Dynamo's wrapping of it)
    backend = _backend(tuple(sorted(opts.items())))
    compile_kw = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    # The module whose state the call can change: ``fn`` itself, or the owner of a bound
    # method (``model.generate``). Each run gets its own copy, without gradients.
    owner = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    owner = owner if isinstance(owner, torch.nn.Module) else None
    e_owner = x_owner = None
    if owner is not None:
        e_owner, x_owner = copy.deepcopy(owner), copy.deepcopy(owner)
        for m in (e_owner, x_owner):
            for p in m.parameters():
                p.grad = None
    if owner is fn:
        eager_fn: Any = e_owner
        xla_fn = torch.compile(x_owner, **compile_kw)
    elif owner is not None:
        eager_fn = getattr(e_owner, fn.__name__)
        xla_fn = torch.compile(getattr(x_owner, fn.__name__), **compile_kw)
    else:
        eager_fn = fn
        xla_fn = torch.compile(fn, **compile_kw)

    e_args, e_kwargs = _clone_args((args, kwargs), {})
    x_args, x_kwargs = _clone_args((args, kwargs), {})
    e_leaves = _grad_leaves((e_args, e_kwargs), grad)
    x_leaves = _grad_leaves((x_args, x_kwargs), grad)

    def report(head: str, body: list[str], what: str) -> ParityError:
        return _report(fn, f"{_name(fn)} {head}", body, args, kwargs, given, what)

    rng = torch.get_rng_state()
    eager_error: BaseException | None = None
    try:
        eager_out = eager_fn(*e_args, **e_kwargs)
    except Exception as e:
        if not check_errors:
            if hasattr(e, "add_note"):
                e.add_note(
                    "torch2xla parity: eager PyTorch raised this before XLA ran, so the input "
                    "is invalid for the function (pass check_errors=True to require XLA to "
                    "raise as well)"
                )
            raise
        eager_error, eager_out = e, None
    rng_eager = torch.get_rng_state()

    torch.set_rng_state(rng)
    runs_before = _Counter.runs
    try:
        with (
            warnings.catch_warnings(),
            torch._dynamo.config.patch(
                recompile_limit=max(torch._dynamo.config.recompile_limit, _RECOMPILE_LIMIT)
            ),
        ):
            if allow_fallback:
                warnings.simplefilter("ignore", FallbackWarning)
            xla_out = xla_fn(*x_args, **x_kwargs)
    except Exception as e:
        if eager_error is None:
            raise report(
                'ran in eager PyTorch but raised with backend="xla":',
                [f"{type(e).__name__}: {e}"],
                "error",
            ) from e
        if not isinstance(e, type(eager_error)):
            raise report(
                'raised another type of error with backend="xla" than in eager PyTorch '
                f"(an XLA error must be an instance of eager's {type(eager_error).__name__}):",
                [
                    f"eager raised {type(eager_error).__name__}: {eager_error}",
                    f"XLA raised {type(e).__name__}: {e}",
                ],
                "error",
            ) from e
        return ParityReport(None, None, _Counter.runs - runs_before, 0.0, eager_error)
    runs = _Counter.runs - runs_before
    rng_xla = torch.get_rng_state()
    if eager_error is not None:
        raise report(
            'raised in eager PyTorch but returned with backend="xla":',
            [f"eager raised {type(eager_error).__name__}: {eager_error}"],
            "error",
        ) from eager_error
    if require_xla and runs == 0:
        raise ParityError(
            f"no XLA graph ran while calling {_name(fn)} compiled, so nothing "
            "was compared. Dynamo may have graph-broken every op (try fullgraph=True to see "
            "why) or hit its recompile limit; pass require_xla=False if the function really "
            "has no ops.",
            "xla",
        )

    tol = {
        "rtol": rtol,
        "atol": atol,
        "check_dtype": check_dtype,
        "check_signed_zero": check_signed_zero,
        "check_stride": check_stride,
    }
    e_state = _observable({"args": e_args, "kwargs": e_kwargs, "module": e_owner})
    x_state = _observable({"args": x_args, "kwargs": x_kwargs, "module": x_owner})
    for state, a, k in ((e_state, e_args, e_kwargs), (x_state, x_args, x_kwargs)):
        state[".grad"] = _leaf_grads({**_named_tensors(a, "args"), **_named_tensors(k, "kwargs")})
    mismatches = compare_trees("output", eager_out, xla_out, **tol)
    mismatches += _alias_mismatches(
        _aliasing(eager_out, _state_tensors(e_state)), _aliasing(xla_out, _state_tensors(x_state))
    )
    mismatches += _state_mismatches(e_state, x_state, tol)
    drew = (not torch.equal(rng_eager, rng), not torch.equal(rng_xla, rng))
    if drew[0] != drew[1]:
        side = ("eager", "XLA") if drew[0] else ("XLA", "eager")
        mismatches.append(
            Mismatch(
                "torch's default generator",
                f"{side[0]} drew random numbers from it during the call, {side[1]} did not "
                "(the next torch.rand gives other values)",
            )
        )
    if grad and not mismatches:
        if not _cotangents(eager_out):
            raise ValueError(
                f"torch2xla parity: grad=True but no output of {_name(fn)} requires grad "
                "(are the inputs floating, and is grad mode on?)"
            )
        _backward(eager_out)
        try:
            _backward(xla_out)
        except Exception as e:
            raise report(
                'ran backward in eager PyTorch but its backward raised with backend="xla":',
                [f"{type(e).__name__}: {e}"],
                "grad",
            ) from e
        # The sign of a zero gradient is an artifact of the backward formula: not compared.
        gtol = {**tol, "check_signed_zero": False}
        for n, t in e_leaves.items():
            mismatches += compare_trees(f"grad of {n}", t.grad, x_leaves[n].grad, **gtol)
        if owner is not None:
            x_params = dict(x_owner.named_parameters())
            for n, p in e_owner.named_parameters():
                mismatches += compare_trees(f"grad of {n}", p.grad, x_params[n].grad, **gtol)
    if mismatches:
        raise _fail(fn, mismatches, args, kwargs, eager_out, given)
    return ParityReport(eager_out, xla_out, runs, _max_abs_diff(eager_out, xla_out))


def _state_tensors(state: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors a call's outputs may alias: inputs, parameters and buffers, by name."""
    named = _named_tensors(state["args"], "args")
    named.update(_named_tensors(state["kwargs"], "kwargs"))
    module = state["module"]
    if module is not None:
        for part in ("parameters", "buffers"):
            named.update({f"module {n}": t for n, t in module[part].items()})
    return named


def _state_mismatches(e_state: dict, x_state: dict, tol: Mapping[str, Any]) -> list[Mismatch]:
    """Inputs (and modules, optimizers among them), the module's parameters, buffers,
    ``.grad`` and ``training`` flags, after the call."""
    out = compare_trees("args after the call", e_state["args"], x_state["args"], **tol)
    out += compare_trees("kwargs after the call", e_state["kwargs"], x_state["kwargs"], **tol)
    for n, g in e_state[".grad"].items():
        out += compare_trees(f"{n}.grad after the call", g, x_state[".grad"].get(n), **tol)
    if e_state["module"] is not None:
        e_mod, x_mod = e_state["module"], x_state["module"]
        for part, suffix in (("parameters", ""), ("buffers", ""), (".grad", ".grad")):
            for n, v in e_mod[part].items():
                out += compare_trees(
                    f"module {n}{suffix} after the call", v, x_mod[part].get(n), **tol
                )
        out += compare_trees(
            "module training flags after the call", e_mod["training"], x_mod["training"], **tol
        )
    return out


_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(assert_parity).parameters.items()
    if p.default is not inspect.Parameter.empty
}
