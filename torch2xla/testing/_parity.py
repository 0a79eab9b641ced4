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
from torch2xla.testing._state import (
    alias_mismatches,
    aliasing,
    clone_args,
    grad_leaves,
    leaf_grads,
    named_tensors,
    observable,
    state_mismatches,
    state_tensors,
)

_clone_args = clone_args  # (the kit's tests reach it by this name)

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

    ``fn`` runs twice, eagerly (Dynamo disabled) and compiled, each on its own copy of the
    inputs (same strides, storage offsets and aliasing; modules and optimizers among them, and
    ``fn``'s module, deep-copied; the caller's objects are never touched). Then, strictly
    (the contract: ``torch2xla/testing/README.md``):

    - outputs: same structure and Python types, dtypes, shapes, devices, strides,
      ``requires_grad`` and ``is_leaf``; values within tolerance (see
      :data:`DEFAULT_TOLERANCES`; a float64 reference widens it by eager's own rounding
      error only), NaN in the same positions, infinities equal; the same aliasing of inputs
      and of each other;
    - side effects: every input tensor after the call (in-place ops) with its ``.grad``, the
      modules' parameters, buffers (persistent or not), ``.grad`` and ``training`` flags,
      optimizers' state, and whether torch's default generator was drawn from;
    - with ``grad=True``: gradients of the inputs that require grad (all floating inputs if
      none does) and of the module's parameters, after a backward pass from the same random
      cotangents on both sides (None is not zeros).

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
        check_errors: when eager raises, require the compiled call to raise an instance of
            eager's error type (instead of re-raising eager's error, which means the input
            was invalid for ``fn``).
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
    fn = _uncompiled(fn)
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

    e_args, e_kwargs = clone_args((args, kwargs), {})
    x_args, x_kwargs = clone_args((args, kwargs), {})
    e_leaves = grad_leaves((e_args, e_kwargs), grad)
    x_leaves = grad_leaves((x_args, x_kwargs), grad)

    def report(head: str, body: list[str], what: str) -> ParityError:
        return _report(fn, f"{_name(fn)} {head}", body, args, kwargs, given, what)

    rng = torch.get_rng_state()
    eager_error: BaseException | None = None
    try:
        # (torch.compile'd code the function calls runs eagerly too: eager is the reference)
        with torch._dynamo.config.patch(disable=True):
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
    e_state = _state_after(e_args, e_kwargs, e_owner)
    x_state = _state_after(x_args, x_kwargs, x_owner)
    # The float64 reference, computed once and only where floating values differ.
    reference = functools.cache(
        lambda: _Reference.run(owner, fn, args, kwargs, grad, rng, eager_out)
    )

    def values(ref: _Reference | None) -> list[Mismatch]:
        out = compare_trees(
            "output", eager_out, xla_out, **tol, reference=None if ref is None else ref.out
        )
        return out + state_mismatches(e_state, x_state, tol, None if ref is None else ref.state)

    mismatches = values(None)
    if any(m.by_value for m in mismatches) and reference() is not None:
        mismatches = values(reference())
    mismatches += alias_mismatches(
        aliasing(eager_out, state_tensors(e_state)), aliasing(xla_out, state_tensors(x_state))
    )
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
        e_grads = _grads(e_leaves, e_owner)
        x_grads = _grads(x_leaves, x_owner)

        def gradients(ref: _Reference | None) -> list[Mismatch]:
            r_grads = {} if ref is None or ref.grads is None else ref.grads
            return [
                m
                for n, g in e_grads.items()
                for m in compare_trees(
                    f"grad of {n}", g, x_grads.get(n), **gtol, reference=r_grads.get(n)
                )
            ]

        mismatches = gradients(None)
        if any(m.by_value for m in mismatches) and reference() is not None:
            mismatches = gradients(reference())
    if mismatches:
        raise _fail(fn, mismatches, args, kwargs, eager_out, given)
    return ParityReport(eager_out, xla_out, runs, _max_abs_diff(eager_out, xla_out))


def _uncompiled(fn: Any) -> Any:
    """The function or module ``torch.compile`` wrapped (given a compiled one, the eager run
    would run XLA too and compare it with itself)."""
    if isinstance(fn, torch._dynamo.eval_frame.OptimizedModule):
        return fn._orig_mod
    return getattr(fn, "_torchdynamo_orig_callable", fn)


def _state_after(args: tuple, kwargs: dict, owner: torch.nn.Module | None) -> dict:
    """What a caller sees of the inputs and the module after the call (``observable``),
    with the ``.grad`` of each input leaf."""
    state = observable({"args": args, "kwargs": kwargs, "module": owner})
    state[".grad"] = leaf_grads({**named_tensors(args, "args"), **named_tensors(kwargs, "kwargs")})
    return state


def _grads(leaves: Mapping[str, torch.Tensor], owner: torch.nn.Module | None) -> dict[str, Any]:
    """The gradients compared after the backward: of the inputs, and the module's."""
    grads = {n: t.grad for n, t in leaves.items()}
    if owner is not None:
        grads.update({n: p.grad for n, p in owner.named_parameters()})
    return grads


@dataclasses.dataclass
class _Reference:
    """The call computed eagerly in float64 (``compare_tensors``'s reference): its outputs,
    the state after it, and with ``grad`` the gradients from eager's cotangents."""

    out: Any
    state: dict
    grads: dict[str, Any] | None

    @staticmethod
    def run(
        owner: torch.nn.Module | None,
        fn: Any,
        args: tuple,
        kwargs: Mapping,
        grad: bool,
        rng: torch.Tensor,
        eager_out: Any,
    ) -> _Reference | None:
        """None where the function does not run in float64 (a float32 weight it closes
        over, an optimizer's float32 state): the comparison then stays with eager's values."""
        r_args, r_kwargs = clone_args((args, dict(kwargs)), {}, upcast=True)
        leaves = grad_leaves((r_args, r_kwargs), grad)
        r_owner = None
        if owner is not None:
            r_owner = copy.deepcopy(owner).double()
            for p in r_owner.parameters():
                p.grad = None
        r_fn = fn if owner is None else r_owner if owner is fn else getattr(r_owner, fn.__name__)
        after = torch.get_rng_state()
        torch.set_rng_state(rng)
        try:
            with warnings.catch_warnings(), torch._dynamo.config.patch(disable=True):
                warnings.simplefilter("ignore")
                out = r_fn(*r_args, **r_kwargs)
                state = _state_after(r_args, r_kwargs, r_owner)
                grads = None
                pairs = _cotangents(eager_out)
                r_outs = [o for o in pytree.tree_leaves(out) if _requires_grad(o)]
                if grad and len(r_outs) == len(pairs):
                    torch.autograd.backward(
                        r_outs,
                        [
                            c.to(torch.float64 if o.is_floating_point() else o.dtype)
                            for (_, c), o in zip(pairs, r_outs, strict=True)
                        ],
                    )
                    grads = _grads(leaves, r_owner)
        # A reference is an aid: a function that cannot run in float64 is compared as it is.
        except (RuntimeError, TypeError, ValueError, IndexError, AttributeError):
            return None
        finally:
            torch.set_rng_state(after)
        return _Reference(out, state, grads)


def _requires_grad(o: Any) -> bool:
    return isinstance(o, torch.Tensor) and o.requires_grad


_DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(assert_parity).parameters.items()
    if p.default is not inspect.Parameter.empty
}
