"""Run an OpInfo's sample inputs through ``torch.compile(backend="xla")`` and through eager
PyTorch, and report every difference as an ``Outcome``.

Samples come from ``sample_inputs`` and, where the op defines wider ones, ``reference_inputs``
(broadcasting, non-contiguous and extremal values, type promotion): a few of those that
``sample_inputs`` does not already give, chosen deterministically (``_take_samples``). Gradients
are compared with their None-ness exact: eager's None must be our None, eager's zeros our zeros.
``error_inputs`` (inputs eager rejects) must make the compiled call raise too (``run_errors``).

Compile overhead dominates, so the samples of one check (every forward dtype of an op, or every
gradient dtype) are traced together: one generated straight-line function calls the op on each
sample, Dynamo traces it once (``fullgraph=True``, so a graph break is an error rather than a
silent eager fallback) and XLA compiles one program. Only when that combined program fails to
build is each dtype compiled on its own, so a failure is attributed to the right dtype.
``options={"strict": True}`` makes an op without a lowering an error, and the harness counts
XLA program calls, so a graph that never reached XLA is reported as not lowered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.testing import _utils as _testing_utils
from torch.testing._internal import common_methods_invocations
from torch.testing._internal.common_device_type import onlyCUDA
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import (
    ErrorInput,
    OpInfo,
    SampleInput,
    gradcheck_wrapper_masked_operation,
    gradcheck_wrapper_masked_pointwise_operation,
)

from torch2xla import _errors
from torch2xla.runtime import _program

FORWARD, INPLACE, GRAD, ERROR = "forward", "inplace", "grad", "error"
# The dtype an ``error`` outcome is recorded under (its inputs have dtypes of their own).
ANY_DTYPE = "any"
PASS, FAIL, NA = "pass", "fail", "n/a"

FORWARD_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool)
GRAD_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
# Samples per dtype: compile time grows with the program, so only the first few are used.
FORWARD_SAMPLES = {torch.float32: 4}
GRAD_SAMPLES = {torch.float32: 3}
OTHER_SAMPLES = 2
# Reference samples (beyond sample_inputs) per check and dtype, and where they come from:
# those of at most REFERENCE_NUMEL elements in all, not among sample_inputs' shapes and
# arguments, among the first REFERENCE_SCAN that reference_inputs yields; as many as asked,
# evenly spaced over them (float32) or the first ones (the others: found sooner).
REFERENCE_SAMPLES = {(FORWARD, torch.float32): 4, (GRAD, torch.float32): 2}
OTHER_REFERENCE_SAMPLES = 1
REFERENCE_SCAN = 120
REFERENCE_NUMEL = 4096
# Error inputs per op (one per distinct expected error first): each compiles on its own.
ERROR_SAMPLES = 4


# Gradients flow through different (but equivalent) formulas in JAX and in torch's autograd,
# so they get a little more room than forward values (torch.testing's defaults).
# (bfloat16: torch.testing's defaults, and the float32 reference.)
GRAD_TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7)}


def _call(op: Callable, *args: Any, **kwargs: Any) -> Any:
    return op(*args, **kwargs)


# op_db wraps random ops (and a few others) in `wrapper_set_seed`, which reseeds torch's global
# generator so that two eager runs agree. Dynamo cannot trace the reseeding, and random values
# are compared by their statistics rather than one by one, so the harness calls them plainly.
common_methods_invocations.wrapper_set_seed = _call
_RESEEDING_WRAPPERS = (_testing_utils.wrapper_set_seed,)  # also used as gradcheck wrappers


def op_name(op: OpInfo) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def cpu_ops() -> dict[str, OpInfo]:
    """Every op_db entry that eager PyTorch runs on CPU, by ``name.variant``."""
    return {op_name(op): op for op in op_db if onlyCUDA not in op.decorators}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The result of one check of one op in one dtype."""

    op: str
    check: str  # FORWARD | INPLACE | GRAD
    dtype: str
    status: str  # PASS | FAIL | NA
    reason: str = ""
    samples: int = 0


@dataclasses.dataclass(frozen=True)
class Expect:
    """How the harness compares one op (from ``expectations``)."""

    values: bool = True  # False: random/uninitialized values, compare shapes and dtypes only
    tol: Callable[[str, torch.dtype], tuple[float, float] | None] = lambda check, dtype: None
    # Samples whose values are random (e.g. attention with dropout): shapes and dtypes only.
    random_sample: Callable[[SampleInput], bool] = lambda sample: False
    # Applied to actual and expected outputs before comparing (e.g. eigenvector signs).
    normalize: Callable[[Any], Any] | None = None

    def compares_values(self, sample: SampleInput) -> bool:
        return self.values and not self.random_sample(sample)


# -- generated functions ------------------------------------------------------------------------
class _Source:
    """Builds the source of a straight-line function calling ops on samples' arguments.

    Tensors become parameters ``t0, t1, ...``, one per distinct tensor object of a sample (so
    aliasing between one call's arguments is kept, while samples that share a tensor get
    their own copies, as in separate eager calls); everything else becomes a global constant
    ``c0, c1, ...``. ``calls[k]`` maps the k-th call's tensors (by id) to parameter positions.
    """

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []
        self._index: dict[int, int] = {}
        self.globals: dict[str, Any] = {}
        self.lines: list[str] = []
        self.calls: list[dict[int, int]] = []
        self.fn: Callable | None = None

    def const(self, value: Any) -> str:
        name = f"c{len(self.globals)}"
        self.globals[name] = value
        return name

    def expr(self, x: Any) -> str:
        if isinstance(x, torch.Tensor):
            if id(x) not in self._index:
                self._index[id(x)] = len(self.tensors)
                self.tensors.append(x)
            return f"t{self._index[id(x)]}"
        if type(x) is list:
            return "[" + ", ".join(self.expr(v) for v in x) + "]"
        if type(x) is tuple:
            return "(" + "".join(self.expr(v) + ", " for v in x) + ")"
        if type(x) is dict:
            return "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in x.items()) + "}"
        return self.const(x)

    def call(self, fn: Callable, sample: SampleInput, wrapper: Callable | None = None) -> None:
        self._index = {}
        args = [self.expr(sample.input), *(self.expr(a) for a in sample.args)]
        args += [f"{k}={self.expr(v)}" for k, v in sample.kwargs.items()]
        f = self.const(fn)
        if wrapper is not None:
            args.insert(0, f)
            f = self.const(wrapper)
        self.lines.append(f"{f}({', '.join(args)})")
        self.calls.append(self._index)

    def build(self, name: str) -> Callable:
        params = ", ".join(f"t{i}" for i in range(len(self.tensors)))
        body = "".join(f"        {line},\n" for line in self.lines)
        src = f"def fn({params}):\n    return [\n{body}    ]\n"
        scope = dict(self.globals)
        exec(compile(src, f"<opinfo {name}>", "exec"), scope)
        return scope["fn"]


def _clone(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(t.requires_grad)


def _rebuild(x: Any, mapping: dict[int, torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        return mapping[id(x)]
    if type(x) is list:
        return [_rebuild(v, mapping) for v in x]
    if type(x) is tuple:
        return tuple(_rebuild(v, mapping) for v in x)
    if type(x) is dict:
        return {k: _rebuild(v, mapping) for k, v in x.items()}
    return x


def _tensors(x: Any) -> Iterator[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, list | tuple):
        for v in x:
            yield from _tensors(v)
    elif type(x) is dict:
        for v in x.values():
            yield from _tensors(v)


def _sample_tensors(s: SampleInput) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for t in _tensors((s.input, s.args, s.kwargs)):
        seen.setdefault(id(t), t)
    return list(seen.values())


# -- comparison ---------------------------------------------------------------------------------
def _short(e: BaseException) -> str:
    msg = str(e).strip()
    lines = [ln for ln in msg.splitlines() if ln.strip()]
    if "cannot run in XLA" in msg:
        ops = re.findall(r"^\s+([\w.]+): ([^\n]+)$", msg, re.MULTILINE)
        msg = "not lowered: " + ", ".join(sorted({f"{o} ({r})" for o, r in ops}))
    elif isinstance(e, torch._dynamo.exc.Unsupported):
        head = next((ln for ln in lines if ln.strip().startswith("Explanation")), None)
        msg = (lines[0] if lines else "") + (f" ({head.strip()})" if head else "")
    else:
        msg = " ".join(lines[:2])
    msg = re.sub(r"0x[0-9a-f]+", "0x..", msg)
    return f"{type(e).__name__}: {msg}"[:300]


# torch.testing.assert_close's defaults.
_DEFAULT_TOL = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
}


def _as_accurate(actual: torch.Tensor, expected: torch.Tensor, ref: torch.Tensor, tol) -> bool:
    """Whether every element of ``actual`` is within ``tol`` of eager's ``expected`` or about
    as close to the higher-precision ``ref`` as eager is (within twice eager's error, or two
    units in the last place)."""
    if ref.shape != actual.shape or not actual.dtype.is_floating_point:
        return False
    rtol, atol = tol if tol is not None else _DEFAULT_TOL[actual.dtype]
    a, e, r = (t.detach().to(torch.float64) for t in (actual, expected, ref))
    eps = torch.finfo(actual.dtype).eps
    # Where eager overflowed to NaN but the reference did not, hold XLA to the reference.
    eager_error = torch.where(e.isnan() & ~r.isnan(), 0, (e - r).abs())
    bound = 2 * torch.maximum(eager_error, eps * r.abs()) + torch.finfo(actual.dtype).tiny
    ok = ((a - r).abs() <= bound) | ((a - e).abs() <= atol + rtol * e.abs()) | (a == e) | (a == r)
    return bool((ok | (a.isnan() & e.isnan())).all())


def _as_accurate_overall(actual: torch.Tensor, expected: torch.Tensor, ref: torch.Tensor) -> bool:
    """Whether ``actual`` is, as a whole, at least as close to the higher-precision ``ref`` as
    eager's ``expected`` is (L2 norm of the error; each element must still be finite where
    eager's is, and equal to ``ref`` or NaN with eager's where ``ref`` is not finite).

    For gradients: a gradient sums contributions whose rounding differs between JAX's formulas
    and torch's, so a few elements of ours can lie further from the reference than eager's
    while the whole is no further (the measure issue 22 item 6 holds gradients to)."""
    if ref.shape != actual.shape or not actual.dtype.is_floating_point:
        return False
    a, e, r = (t.detach().to(torch.float64) for t in (actual, expected, ref))
    finite = r.isfinite()
    edge = ~finite & ~((a == r) | (a.isnan() & e.isnan()))
    if bool(edge.any()) or bool((a.isnan() & ~e.isnan()).any()):
        return False
    a, e, r = a[finite], e[finite], r[finite]
    eager_error = torch.where(e.isnan(), 0, (e - r).abs())
    ours = torch.where(a.isnan(), 0, (a - r).abs())  # (NaN only where eager's is NaN too)
    return bool(ours.norm() <= eager_error.norm())


def _compare(
    actual: Any,
    expected: Any,
    values: bool,
    tol,
    path: str = "out",
    ref: Any = None,
    notes: list[str] | None = None,
    overall: bool = False,
) -> str | None:
    """None if ``actual`` matches ``expected``, else what differs.

    Values match within ``tol`` (torch.testing's per-dtype default when None) or, where a
    higher-precision eager result ``ref`` is given, when they are as accurate as eager's:
    element by element, or with ``overall`` (gradients) as a whole.
    """
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{path}: {type(actual).__name__} where eager gives a tensor"
        if actual.dtype != expected.dtype:
            return f"{path}: dtype {dtype_name(actual.dtype)}, eager {dtype_name(expected.dtype)}"
        if actual.shape != expected.shape:
            return f"{path}: shape {tuple(actual.shape)}, eager {tuple(expected.shape)}"
        if not values:
            return None
        rtol, atol = tol if tol is not None else (None, None)
        try:
            torch.testing.assert_close(
                actual.detach(),
                expected.detach(),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                check_stride=False,
                check_layout=False,
            )
        except AssertionError as e:
            if isinstance(ref, torch.Tensor) and (
                _as_accurate(actual, expected, ref, tol)
                or (overall and _as_accurate_overall(actual, expected, ref))
            ):
                if notes is not None:
                    notes.append(path)
                return None
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            detail = next((ln for ln in lines if ln.startswith("Greatest absolute")), lines[0])
            return f"{path}: values differ ({detail})"
        return None
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple):
            return f"{path}: {type(actual).__name__} where eager gives a sequence"
        if len(actual) != len(expected):
            return f"{path}: {len(actual)} items, eager {len(expected)}"
        refs = (
            ref
            if isinstance(ref, list | tuple) and len(ref) == len(expected)
            else [None] * len(expected)
        )
        for i, (a, e, r) in enumerate(zip(actual, expected, refs)):
            err = _compare(a, e, values, tol, f"{path}[{i}]", r, notes, overall)
            if err:
                return err
        return None
    if not values:
        return None
    if isinstance(expected, float) and isinstance(actual, float):
        if actual == expected or (math.isnan(actual) and math.isnan(expected)):
            return None
        return (
            None
            if abs(actual - expected) <= 1e-6 * (1 + abs(expected))
            else (f"{path}: {actual} != eager {expected}")
        )
    if actual != expected:
        return f"{path}: {actual!r} != eager {expected!r}"
    return None


# -- counting XLA calls -------------------------------------------------------------------------
_xla_calls = 0


@contextlib.contextmanager
def _count_xla_calls() -> Iterator[Callable[[], int]]:
    """Counts calls of compiled XLA programs, to tell a graph that ran in XLA from none."""
    original = _program.XlaProgram.__call__

    def counted(self, args):
        global _xla_calls
        _xla_calls += 1
        return original(self, args)

    start = _xla_calls
    _program.XlaProgram.__call__ = counted
    try:
        yield lambda: _xla_calls - start
    finally:
        _program.XlaProgram.__call__ = original


def _compile(fn: Callable) -> Callable:
    return torch.compile(fn, backend="xla", options={"strict": True}, dynamic=False, fullgraph=True)


# -- groups -------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Group:
    """The samples of one (check, dtype), each with eager's result."""

    check: str
    dtype: torch.dtype
    fn: Callable
    wrapper: Callable | None
    samples: list[SampleInput]
    expected: list[Any]  # eager outputs per sample
    after: list[list[torch.Tensor]]  # eager's sample tensors after the call (mutation check)
    grads: list[Any] = dataclasses.field(default_factory=list)  # eager input grads per sample
    eager_wrapper: bool = False  # apply ``wrapper`` after the compiled call, in eager
    cotangents: list[list[torch.Tensor]] = dataclasses.field(default_factory=list)
    refs: list[Any] = dataclasses.field(default_factory=list)  # higher-precision eager results
    ref_after: list[Any] = dataclasses.field(default_factory=list)  # ... and inputs after
    ref_grads: list[Any] = dataclasses.field(default_factory=list)  # ... and input grads
    skipped: str = ""


def _seed(name: str, dtype: torch.dtype, check: str) -> None:
    torch.manual_seed(zlib.crc32(f"{name}/{dtype}/{check}".encode()))


def _take_samples(
    op: OpInfo, dtype: torch.dtype, n: int, n_ref: int, requires_grad: bool, spread: bool = False
) -> list:
    """The first ``n`` of ``sample_inputs``, then ``n_ref`` of ``reference_inputs`` that
    ``sample_inputs`` does not give (same shapes, strides, dtypes and other arguments) and
    that hold at most ``REFERENCE_NUMEL`` elements, among its first ``REFERENCE_SCAN``:
    evenly spaced over those with ``spread``, else the first ones."""
    out, seen = [], set()
    for s in op.sample_inputs("cpu", dtype, requires_grad=requires_grad):
        if len(out) < n:
            out.append(s)
        elif not n_ref:
            break
        seen.add(_signature(s))
    if not n_ref or op.reference_inputs_func is None:
        return out
    found = []
    refs = iter(op.reference_inputs("cpu", dtype, requires_grad=requires_grad))
    for i in range(REFERENCE_SCAN):
        if not spread and len(found) == n_ref:
            break
        try:
            s = next(refs)
        except StopIteration:
            break
        except ValueError:
            # torch's own generator fails part-way for some ops (reference_inputs_where makes
            # an int64 tensor that requires grad): the samples found so far are used.
            break
        sig = _signature(s)
        if sig in seen or sum(t.numel() for t in _sample_tensors(s)) > REFERENCE_NUMEL:
            continue
        seen.add(sig)
        found.append(s)
    if spread and len(found) > n_ref:
        found = [found[(2 * j + 1) * len(found) // (2 * n_ref)] for j in range(n_ref)]
    return out + [_Reference(s) for s in found[:n_ref]]


class _Reference(SampleInput):
    """A sample taken from ``reference_inputs`` (named so in failure reasons)."""

    def __init__(self, s: SampleInput) -> None:
        super().__init__(
            s.input,
            args=s.args,
            kwargs=s.kwargs,
            output_process_fn_grad=s.output_process_fn_grad,
            broadcasts_input=s.broadcasts_input,
            name=s.name,
        )


def _which(group: _Group, i: int) -> str:
    """``sample 3``, with ``(reference input)`` and ``with inf/nan`` where they apply."""
    s = group.samples[i]
    notes = []
    if isinstance(s, _Reference):
        notes.append("reference input")
    if any(t.is_floating_point() and not bool(t.isfinite().all()) for t in _sample_tensors(s)):
        notes.append("with inf/nan")
    return f"sample {i}" + (f" ({', '.join(notes)})" if notes else "")


def _signature(s: SampleInput) -> Any:
    """A sample's structure: tensors by shape, stride and dtype, other values by repr."""

    def sig(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            strided = x.layout == torch.strided  # (sparse tensors have no strides)
            return ("tensor", tuple(x.shape), x.stride() if strided else x.layout, x.dtype)
        if isinstance(x, list | tuple):
            return (type(x).__name__, *(sig(v) for v in x))
        if isinstance(x, dict):
            return ("dict", *sorted((k, sig(v)) for k, v in x.items()))
        return repr(x)

    return sig((s.input, s.args, s.kwargs))


def _diff_outputs(out: Any) -> list[torch.Tensor]:
    return [t for t in _tensors(out) if t.requires_grad and t.grad_fn is not None]


def _run_eager(
    group: _Group,
    sample: SampleInput,
    upcast: torch.dtype | None = None,
    cotangents: list[torch.Tensor] | None = None,
) -> tuple | None:
    """Eager result of one sample: (outputs, inputs after, input grads, cotangents).

    With ``upcast``, tensors of the group's dtype are first converted to ``upcast``: the
    higher-precision reference that low-precision results are judged against.
    """
    originals = _sample_tensors(sample)
    if upcast is None:
        clones = [_clone(t) for t in originals]
    else:
        clones = [
            t.detach().to(upcast).requires_grad_(t.requires_grad)
            if t.dtype == group.dtype
            else _clone(t)
            for t in originals
        ]
    mapping = {id(o): c for o, c in zip(originals, clones)}
    inp, args, kwargs = _rebuild((sample.input, sample.args, sample.kwargs), mapping)
    if group.wrapper is not None:
        out = group.wrapper(group.fn, inp, *args, **kwargs)
    else:
        out = group.fn(inp, *args, **kwargs)
    if group.check != GRAD:
        return out, clones, None, []
    out = sample.output_process_fn_grad(out)
    diff = _diff_outputs(out)
    leaves = [c for c in clones if c.requires_grad]
    if not diff or not leaves:
        return None
    if cotangents is None:
        cts = [torch.randn_like(t) for t in diff]
    else:
        cts = [c.to(t.dtype) for c, t in zip(cotangents, diff)]
    grads = torch.autograd.grad(diff, leaves, cts, allow_unused=True)
    return out, clones, grads, cts


# Low-precision results are also judged against eager run in this higher precision.
_REFERENCE = {
    (FORWARD, torch.bfloat16): torch.float32,
    (FORWARD, torch.float32): torch.float64,
    (INPLACE, torch.float32): torch.float64,
    (GRAD, torch.float32): torch.float64,
    (GRAD, torch.bfloat16): torch.float32,
}
# Passing outcomes judged by that reference (not within tolerance of eager) say so.
BY_REFERENCE = "as accurate as eager against a higher-precision eager result"


# Gradient-check wrappers that Dynamo cannot trace (they pass the op function around and read
# its __name__): they post-process the op's output, so the harness compiles the op alone and
# applies the wrapper to the compiled output in eager, where autograd still reaches XLA.
_EAGER_WRAPPERS = (gradcheck_wrapper_masked_operation, gradcheck_wrapper_masked_pointwise_operation)


def _returning(fn: Callable, out: Any) -> Callable:
    """A stand-in for ``fn`` (same name) that returns the already computed ``out``."""

    @functools.wraps(fn)
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return out

    return stand_in


def _make_group(op: OpInfo, name: str, check: str, dtype: torch.dtype) -> _Group:
    _seed(name, dtype, check)
    if check == GRAD:
        fn, wrapper = op.op, op.gradcheck_wrapper
        if wrapper in _RESEEDING_WRAPPERS:
            wrapper = None
        n = GRAD_SAMPLES.get(dtype, OTHER_SAMPLES)
    elif check == INPLACE:
        fn, wrapper = op.inplace_variant, None
        n = FORWARD_SAMPLES.get(dtype, OTHER_SAMPLES)
    else:
        fn, wrapper = op.op, None
        n = FORWARD_SAMPLES.get(dtype, OTHER_SAMPLES)
    n_ref = REFERENCE_SAMPLES.get((check, dtype), OTHER_REFERENCE_SAMPLES)
    group = _Group(check, dtype, fn, wrapper, [], [], [])
    group.eager_wrapper = wrapper in _EAGER_WRAPPERS
    upcast = _REFERENCE.get((check, dtype))
    errors = []
    spread = (check, dtype) in REFERENCE_SAMPLES
    for s in _take_samples(op, dtype, n, n_ref, requires_grad=check == GRAD, spread=spread):
        if check == INPLACE and s.broadcasts_input:
            continue  # the in-place variant cannot write a broadcast result into its input
        try:
            with torch.enable_grad() if check == GRAD else torch.no_grad():
                result = _run_eager(group, s)
        except Exception as e:
            errors.append(_short(e))
            continue
        if result is None:
            continue
        out, after, grads, cts = result
        ref = ref_after = ref_grads = None
        if upcast is not None:
            try:
                with torch.enable_grad() if check == GRAD else torch.no_grad():
                    r = _run_eager(group, s, upcast, cts)
                if r is not None:
                    ref, ref_after, ref_grads = r[0], r[1], r[2]
            except Exception:
                ref = None
        group.samples.append(s)
        group.expected.append(out)
        group.after.append(after)
        group.grads.append(grads)
        group.cotangents.append(cts)
        group.refs.append(ref)
        group.ref_after.append(ref_after)
        group.ref_grads.append(ref_grads)
    if not group.samples:
        group.skipped = f"eager: {errors[0]}" if errors else "no differentiable samples"
    return group


# -- running ------------------------------------------------------------------------------------
def _build_fn(groups: Sequence[_Group], name: str) -> _Source:
    src = _Source()
    for g in groups:
        for s in g.samples:
            src.call(g.fn, s, None if g.eager_wrapper else g.wrapper)
    src.fn = src.build(name)
    return src


def _run_compiled(groups: Sequence[_Group], name: str, grad: bool) -> tuple[list, list, int]:
    """Compiled outputs per sample (flattened over groups), per sample the map from its
    tensors (by id) to the compiled call's inputs (as they are after the call), and the
    number of XLA program calls."""
    src = _build_fn(groups, name)
    clones = [_clone(t) for t in src.tensors]
    with _count_xla_calls() as calls, torch.enable_grad() if grad else torch.no_grad():
        outs = _compile(src.fn)(*clones)
        n_calls = calls()
    mappings = [{key: clones[pos] for key, pos in call.items()} for call in src.calls]
    return outs, mappings, n_calls


def _tolerance(group: _Group, expect: Expect):
    tol = expect.tol(group.check, group.dtype)
    if tol is None and group.check == GRAD:
        tol = GRAD_TOL.get(group.dtype)
    return tol


def _check_outputs(
    group: _Group, outs: list, mappings: list, expect: Expect, name: str
) -> Outcome | tuple[list, bool]:
    """Compare outputs and inputs after the call: the outcome, or for gradient checks that got
    this far the backward jobs ``(sample, differentiable outputs, leaves)`` and whether a
    comparison needed the higher-precision reference."""
    dt = dtype_name(group.dtype)
    n = len(group.samples)
    tol = _tolerance(group, expect)
    jobs: list = []
    notes: list[str] = []
    for i, (s, out, exp, after) in enumerate(zip(group.samples, outs, group.expected, group.after)):
        if group.check == GRAD:
            if group.eager_wrapper:
                inp, args, kwargs = _rebuild((s.input, s.args, s.kwargs), mappings[i])
                out = group.wrapper(_returning(group.fn, out), inp, *args, **kwargs)
            out = s.output_process_fn_grad(out)
        ref = group.refs[i]
        values = expect.compares_values(s)
        if expect.normalize is not None:
            out, exp = expect.normalize(out), expect.normalize(exp)
            ref = expect.normalize(ref) if ref is not None else None
        err = _compare(out, exp, values, tol, ref=ref, notes=notes)
        if err:
            return Outcome(name, group.check, dt, FAIL, f"{_which(group, i)}: {err}", n)
        mine = [mappings[i][id(t)] for t in _sample_tensors(s)]
        err = _compare(mine, after, values, None, "input", group.ref_after[i], notes)
        if err:
            return Outcome(
                name, group.check, dt, FAIL, f"{_which(group, i)}: after the call, {err}", n
            )
        if group.check == GRAD:
            diff = _diff_outputs(out)
            n_exp = len(group.cotangents[i])
            if len(diff) != n_exp:
                return Outcome(
                    name,
                    group.check,
                    dt,
                    FAIL,
                    f"{_which(group, i)}: {len(diff)} differentiable outputs, eager {n_exp}",
                    n,
                )
            jobs.append((i, diff, [c for c in mine if c.requires_grad]))
    if group.check != GRAD:
        return Outcome(name, group.check, dt, PASS, BY_REFERENCE if notes else "", n)
    return jobs, bool(notes)


def _check_grads(
    group: _Group, jobs: list, grads: Sequence, expect: Expect, name: str, by_reference: bool
) -> Outcome:
    dt, n, tol = dtype_name(group.dtype), len(group.samples), _tolerance(group, expect)
    notes: list[str] = ["forward"] if by_reference else []
    start = 0
    for i, _, leaves in jobs:
        mine = grads[start : start + len(leaves)]
        start += len(leaves)
        refs = group.ref_grads[i] or [None] * len(mine)
        values = expect.compares_values(group.samples[i])
        for j, (g, e, r) in enumerate(zip(mine, group.grads[i], refs)):
            # None-ness is exact: eager's None (no path in its autograd graph) is None here,
            # eager's zeros (a path through ops of zero derivative) are zeros here.
            if e is None or g is None:
                if (e is None) != (g is None):
                    ours = "None" if g is None else "a tensor"
                    theirs = "None" if e is None else "a tensor"
                    return Outcome(
                        name,
                        GRAD,
                        dt,
                        FAIL,
                        f"{_which(group, i)}: grad[{j}] is {ours} where eager's is {theirs}",
                        n,
                    )
                continue
            err = _compare(g, e, values, tol, f"grad[{j}]", r, notes, overall=True)
            if err:
                return Outcome(name, GRAD, dt, FAIL, f"{_which(group, i)}: {err}", n)
    return Outcome(name, GRAD, dt, PASS, BY_REFERENCE if notes else "", n)


def _check_batch(
    batch: list[_Group], outs: list, mappings: list, n_calls: int, expect: Expect, name: str
) -> list[Outcome]:
    if n_calls == 0:
        return [
            Outcome(
                name,
                g.check,
                dtype_name(g.dtype),
                FAIL,
                "no XLA program ran (Dynamo produced no graph)",
                len(g.samples),
            )
            for g in batch
        ]
    results: dict[int, Outcome] = {}
    pending = []
    start = 0
    for k, g in enumerate(batch):
        k_end = start + len(g.samples)
        checked = _check_outputs(g, outs[start:k_end], mappings[start:k_end], expect, name)
        start += len(g.samples)
        if isinstance(checked, Outcome):
            results[k] = checked
        elif checked[0]:
            pending.append((k, g, *checked))
        else:
            results[k] = Outcome(
                name,
                g.check,
                dtype_name(g.dtype),
                PASS,
                BY_REFERENCE if checked[1] else "",
                len(g.samples),
            )
    if pending:
        # One backward for the whole batch: its outputs share one autograd node, whose
        # residuals (like eager's saved tensors) the first backward through it frees.
        outputs = [t for _, _, jobs, _ in pending for _, diff, _ in jobs for t in diff]
        cts = [c for _, g, jobs, _ in pending for i, _, _ in jobs for c in g.cotangents[i]]
        leaves = [t for _, _, jobs, _ in pending for _, _, ls in jobs for t in ls]
        try:
            flat = torch.autograd.grad(outputs, leaves, cts, allow_unused=True)
        except Exception as e:
            for k, g, _, _ in pending:
                results[k] = Outcome(
                    name, GRAD, dtype_name(g.dtype), FAIL, f"backward: {_short(e)}", len(g.samples)
                )
        else:
            start = 0
            for k, g, jobs, by_ref in pending:
                count = sum(len(ls) for _, _, ls in jobs)
                results[k] = _check_grads(
                    g, jobs, flat[start : start + count], expect, name, by_ref
                )
                start += count
    return [results[k] for k in range(len(batch))]


def _run_groups(groups: list[_Group], name: str, expect: Expect, grad: bool) -> list[Outcome]:
    """Compile all groups as one program; on failure compile each group alone."""
    runnable = [g for g in groups if g.samples]
    results = [
        Outcome(name, g.check, dtype_name(g.dtype), NA, g.skipped) for g in groups if not g.samples
    ]
    if not runnable:
        return results
    batches = [runnable]
    try:
        outs, mapping, n_calls = _run_compiled(runnable, name, grad)
    except Exception:
        batches = [[g] for g in runnable]
        outs = None
    for batch in batches:
        if outs is None:
            torch._dynamo.reset()
            try:
                outs, mapping, n_calls = _run_compiled(batch, name, grad)
            except Exception as e:
                g = batch[0]
                results.append(
                    Outcome(name, g.check, dtype_name(g.dtype), FAIL, _short(e), len(g.samples))
                )
                outs = None
                continue
        results += _check_batch(batch, outs, mapping, n_calls, expect, name)
        outs = None
    return results


# -- error inputs -------------------------------------------------------------------------------
# Errors that say the call could not be compiled, not that the input was rejected.
_NOT_COMPILED = (
    _errors.CompileError,
    _errors.UnsupportedOpsError,
    torch._dynamo.exc.Unsupported,
    torch._dynamo.exc.BackendCompilerFailed,
    torch._dynamo.exc.InternalTorchDynamoError,
)


def _rejects_like_eager(e: BaseException, eager: BaseException, case: ErrorInput) -> bool:
    """Whether the compiled call's error ``e`` is eager's rejection of the input: its message
    matches the op's expected error (Dynamo wraps errors from tracing in its own types), it
    is of eager's type without saying that the call could not be compiled, or it is Dynamo's
    report that the traced Python code (under ``fullgraph=True``) or the op's fake kernel
    raises an exception of eager's type."""
    msg = str(e)
    if case.error_regex and re.search(case.error_regex, msg):
        return True
    if str(eager).strip() and str(eager).strip().splitlines()[0] in msg:
        return True
    kind = type(eager).__name__
    if isinstance(e, torch._dynamo.exc.Unsupported) and msg.startswith("Observed exception"):
        return f"raised exception {kind}(" in msg
    if "when making fake tensor call" in msg:  # the op's fake kernel rejected the input
        return msg.startswith(f"{kind} when making") or f"got {kind}(" in msg
    return isinstance(e, type(eager)) and not isinstance(e, _NOT_COMPILED)


def _eager_error(op: OpInfo, s: SampleInput) -> BaseException | None:
    inp, args, kwargs = _rebuild(
        (s.input, s.args, s.kwargs), {id(t): _clone(t) for t in _sample_tensors(s)}
    )
    try:
        with torch.no_grad():
            op.op(inp, *args, **kwargs)
    except Exception as e:
        return e
    return None


def _pick_errors(cases: list[ErrorInput]) -> list[ErrorInput]:
    """At most ``ERROR_SAMPLES`` of ``cases``, in order: the first of each distinct expected
    error (type and message), then the rest evenly spaced."""
    if len(cases) <= ERROR_SAMPLES:
        return cases
    firsts: dict[tuple, int] = {}
    for i, c in enumerate(cases):
        firsts.setdefault((c.error_type, c.error_regex), i)
    chosen = sorted(firsts.values())[:ERROR_SAMPLES]
    rest = [i for i in range(len(cases)) if i not in chosen]
    need = ERROR_SAMPLES - len(chosen)
    chosen += [rest[(2 * j + 1) * len(rest) // (2 * need)] for j in range(need)]
    return [cases[i] for i in sorted(chosen)]


def run_errors(op: OpInfo) -> list[Outcome]:
    """The op's ``error_inputs`` (at most ``ERROR_SAMPLES``, ``_pick_errors``): where eager
    raises on CPU, the compiled call must raise too, eager's error (``_rejects_like_eager``).
    One outcome for all of them, under the dtype ``ANY_DTYPE``."""
    name = op_name(op)
    if op.error_inputs_func is None:
        return []
    _seed(name, torch.float32, ERROR)
    cases = _pick_errors(list(op.error_inputs("cpu")))
    problems, tried = [], 0
    for i, case in enumerate(cases):
        s = case.sample_input
        eager = _eager_error(op, s)
        if eager is None:
            continue  # eager accepts it on CPU (some error inputs are device-specific)
        tried += 1
        src = _Source()
        src.call(op.op, s)
        fn = src.build(f"{name} error {i}")
        torch._dynamo.reset()
        try:
            with torch.no_grad():
                _compile(fn)(*[_clone(t) for t in src.tensors])
        except Exception as e:
            if not _rejects_like_eager(e, eager, case):
                problems.append(f"error input {i}: {_short(e)}, where eager raises {_short(eager)}")
            continue
        problems.append(f"error input {i}: no error, where eager raises {_short(eager)}")
    if not tried:
        return [Outcome(name, ERROR, ANY_DTYPE, NA, "eager accepts every error input on CPU")]
    if problems:
        return [Outcome(name, ERROR, ANY_DTYPE, FAIL, "; ".join(problems)[:600], tried)]
    return [Outcome(name, ERROR, ANY_DTYPE, PASS, "", tried)]


def run_op(op: OpInfo, expect: Expect = Expect()) -> list[Outcome]:
    """Every check of ``op``: forward per dtype, in-place (float32), gradients (float32,
    float64, bfloat16), error inputs."""
    name = op_name(op)
    supported = op.supported_dtypes("cpu")
    fwd = [_make_group(op, name, FORWARD, d) for d in FORWARD_DTYPES if d in supported]
    if op.inplace_variant is not None and torch.float32 in supported:
        fwd.append(_make_group(op, name, INPLACE, torch.float32))
    outcomes = _run_groups(fwd, name, expect, grad=False)
    if op.supports_autograd:
        bwd_supported = op.supported_backward_dtypes("cpu")
        grads = [_make_group(op, name, GRAD, d) for d in GRAD_DTYPES if d in bwd_supported]
        outcomes += _run_groups(grads, name, expect, grad=True)
    outcomes += run_errors(op)
    return outcomes
