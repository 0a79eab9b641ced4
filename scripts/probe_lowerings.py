"""Scan torch's OpInfo and ModuleInfo databases for ATen ops that reach the op registry without
a lowering (or whose lowering fails), the way ``probe_fallback.py`` finds them one scenario at
a time: every case is compiled with ``options={"strict": True}``, whose ``UnsupportedOpsError``
lists each op that would run in eager PyTorch (``LoweringError``/``CompileError``: a lowering
or XLA failed). Nothing is compared with eager here: the ops it lists get lowerings, and those
get strict tests against eager (``tests/test_lowerings_s21.py``).

Backward ops reach the registry only where a derivative is taken inside the compiled
function (the bridge's own backward is ``jax.vjp`` of the forward lowerings), so each case
runs in up to four modes:

- ``fwd``: the op itself;
- ``vjp``: ``torch.func.grad`` of the sum of its floating outputs, inside the compiled
  function (AOT puts the ops' ``*_backward`` into the graph);
- ``gradgrad``: ``torch.func.grad`` of that gradient's sum (float64, ops that support it);
- ``train``: the compiled op, then ``.sum().backward(create_graph=True)`` and a second
  backward outside (the bridge's double backward).

For CPU, float32 and float64, the first ``PROBE_SAMPLES`` samples (default 1) of each OpInfo
and ModuleInfo; ``PROBE_MODES`` (default ``vjp,gradgrad``: the modes whose ops no other test
runs in strict mode). Each mode of an op compiles one function of all its samples.

    PYTHONPATH=. python scripts/probe_lowerings.py [substring ...]
    PROBE_SAMPLES=1 PROBE_MODES=fwd,vjp PYTHONPATH=. python scripts/probe_lowerings.py conv

Prints each case with a missing or failing op as it finds it, then the table
``op -> cases`` (the first three cases of each op).
"""

from __future__ import annotations

import collections
import itertools
import os
import sys
import time
import traceback
import warnings

import torch
import torch.utils._pytree as pytree

import torch2xla
from torch2xla._errors import LoweringError, op_name

SAMPLES = int(os.environ.get("PROBE_SAMPLES", "1"))
# (fwd and train: the forward lowerings, which tests/test_opinfo.py already runs in strict mode)
MODES = tuple(os.environ.get("PROBE_MODES", "vjp,gradgrad").split(","))
DTYPES = (torch.float32, torch.float64)
# (ops whose samples are slow to compile, or that only test torch's machinery)
SKIP = ("_refs.", "_masked.", "linalg.", "fft.", "special.", "sparse.")

FOUND: dict[str, list[str]] = collections.defaultdict(list)


def compile_strict(fn):
    return torch.compile(fn, backend="xla", options={"strict": True}, dynamic=False)


def _floats(x) -> list[torch.Tensor]:
    return [
        t
        for t in pytree.tree_leaves(x)
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    ]


def _total(out) -> torch.Tensor:
    parts = [t.real.sum() if t.is_complex() else t.sum() for t in _floats(out)]
    if not parts:
        raise _NoOutput
    return sum(parts[1:], parts[0])


class _NoOutput(Exception):
    pass


def _record(case: str, e: BaseException) -> bool:
    """Record the ops ``e`` names (strict mode's errors); False for other errors."""
    if isinstance(e, torch2xla.UnsupportedOpsError):
        ops = sorted({op_name(u.node) for u in e.unsupported})
        reason = "no lowering"
    elif isinstance(e, LoweringError):
        ops = [op_name(e.node) if e.node is not None else "?"]
        reason = f"lowering failed: {str(e).splitlines()[0][:100]}"
    elif isinstance(e, torch2xla.CompileError):
        ops = [f"<graph: stage {e.stage}>"]
        reason = str(e).splitlines()[0][:120]
    else:
        return False
    for op in ops:
        FOUND[op].append(case)
    print(f"MISSING {case}: {', '.join(ops)} ({reason})", flush=True)
    return True


def _try(case: str, thunk) -> bool:
    """Run ``thunk``, recording the ops strict mode names; False where it raised otherwise."""
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            thunk()
    except _NoOutput:
        pass
    except Exception as e:  # noqa: BLE001  (eager's own errors: not ours to list)
        if _record(case, e):
            return True
        if os.environ.get("PROBE_VERBOSE"):
            print(f"error {case}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        return False
    return True


def _with(args: list, diff: list[int], values) -> list:
    out = list(args)
    for i, v in zip(diff, values):
        out[i] = v
    return out


class Case:
    """One sample: ``call(*args)``, differentiated with respect to its floating tensors that
    require grad (``diff``)."""

    def __init__(self, name: str, call, args: list, gradgrad: bool, dtype: torch.dtype):
        self.name, self.call, self.gradgrad, self.dtype = name, call, gradgrad, dtype
        self.diff = [
            i
            for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and a.is_floating_point() and a.requires_grad
        ]
        self.plain = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        self.inputs = [self.plain[i] for i in self.diff]

    def fwd(self):
        return self.call(*self.plain)

    def _grad_fn(self, *ts):
        return _total(self.call(*_with(self.plain, self.diff, ts)))

    def vjp(self):
        argnums = tuple(range(len(self.diff)))
        return torch.func.grad(self._grad_fn, argnums)(*self.inputs)

    def gradgrad_(self):
        argnums = tuple(range(len(self.diff)))

        def second(*ts):
            return _total(torch.func.grad(self._grad_fn, argnums)(*ts))

        return torch.func.grad(second, argnums)(*self.inputs)

    def train(self):
        leaves = [t.clone().requires_grad_() for t in self.inputs]
        out = compile_strict(lambda *t: self.call(*_with(self.plain, self.diff, t)))(*leaves)
        grads = torch.autograd.grad(_total(out), leaves, create_graph=True, allow_unused=True)
        live = [g for g in grads if g is not None and g.requires_grad]
        if live:
            _total(live).backward()

    def modes(self) -> list[str]:
        out = ["fwd"]
        if self.diff:
            out.append("vjp")
            if self.gradgrad and self.dtype == torch.float64:
                out.append("gradgrad")
            if self.gradgrad:
                out.append("train")
        return [m for m in out if m in MODES]


def _run_batch(label: str, cases: list[Case]) -> None:
    """Every mode of ``cases`` (one op's samples), each mode one compiled function of all its
    cases; where that raises an error that is not strict mode's, each case alone (an eager
    error of one sample hides the ops of the others)."""
    for mode in ("fwd", "vjp", "gradgrad", "train"):
        todo = [c for c in cases if mode in c.modes()]
        if not todo:
            continue
        method = "gradgrad_" if mode == "gradgrad" else mode
        if mode == "train":  # (compiles inside: one at a time)
            for c in todo:
                _try(f"{c.name} {mode}", c.train)
            continue

        def batch(todo=todo, method=method):
            return [getattr(c, method)() for c in todo]

        if _try(f"{label} {mode}", lambda: compile_strict(batch)()) is False and len(todo) > 1:
            for c in todo:
                _try(f"{c.name} {mode}", lambda c=c, m=method: compile_strict(getattr(c, m))())


def scan_ops(filters: list[str]) -> int:
    from torch.testing._internal.common_methods_invocations import op_db

    n = 0
    for op in op_db:
        name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if name.startswith(SKIP) or (filters and not any(f in name for f in filters)):
            continue
        cases = []
        for dtype in DTYPES:
            if dtype not in op.supported_dtypes("cpu"):
                continue
            try:
                samples = list(
                    itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=True), SAMPLES)
                )
            except Exception:  # noqa: BLE001, S112  (a sample generator torch itself breaks)
                continue
            grads = op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
            for k, s in enumerate(samples):
                kwargs = s.kwargs

                def call(*a, fn=op.op, kwargs=kwargs):
                    return fn(*a, **kwargs)

                args = [s.input, *s.args]
                if not grads:
                    args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
                cases.append(
                    Case(f"op {name} {dtype} #{k}", call, args, op.supports_gradgrad, dtype)
                )
        _run_batch(f"op {name}", cases)
        n += len(cases)
    return n


def scan_modules(filters: list[str]) -> int:
    from torch.testing._internal.common_modules import module_db

    n = 0
    for info in module_db:
        name = info.module_cls.__name__
        if filters and not any(f in name for f in filters):
            continue
        cases = []
        for dtype in DTYPES:
            try:
                inputs = info.module_inputs_func(
                    info, device="cpu", dtype=dtype, requires_grad=True, training=True
                )
            except Exception:  # noqa: BLE001, S112  (a generator torch itself breaks)
                continue
            for k, mi in enumerate(inputs[:SAMPLES]):
                if mi.forward_input is None:
                    continue
                try:
                    torch.manual_seed(0)
                    m = info.module_cls(
                        *mi.constructor_input.args, **mi.constructor_input.kwargs
                    ).to(dtype)
                except Exception:  # noqa: BLE001, S112  (a constructor torch itself breaks)
                    continue
                fkw = mi.forward_input.kwargs

                def call(*a, m=m, fkw=fkw):
                    return m(*a, **fkw)

                args = list(mi.forward_input.args)
                cases.append(Case(f"module {name} {dtype} #{k}", call, args, True, dtype))
        _run_batch(f"module {name}", cases)
        n += len(cases)
    return n


def main(argv: list[str]) -> int:
    torch._dynamo.config.cache_size_limit = 64
    start = time.time()
    n = 0
    try:
        if not argv or argv[0] != "--modules":
            n += scan_ops([a for a in argv if not a.startswith("--")])
        if not argv or argv[0] != "--ops":
            n += scan_modules([a for a in argv if not a.startswith("--")])
    except KeyboardInterrupt:
        traceback.print_exc()
    print(f"\n{n} cases in {time.time() - start:.0f}s; ops without a lowering or failing:")
    for op, cases in sorted(FOUND.items()):
        print(f"  {op}  ({len(cases)}): {'; '.join(cases[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
