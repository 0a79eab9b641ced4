"""Errors that name the graph, the ATen node and the user's source line."""

from __future__ import annotations

import dataclasses
import functools
import linecache
import operator
import os
import re
import sys
import sysconfig
import traceback
import warnings

import torch


def source_line(node: torch.fx.Node) -> str:
    """``file:line: code`` of the user code that produced ``node``, or '<unknown>'."""
    frame = _user_frame(node)
    if frame is None:
        return "<unknown source>"
    file, line, code = frame
    return f"{file}:{line}: {code.strip()}"


def _user_frame(node: torch.fx.Node) -> tuple[str, str, str] | None:
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)', trace)
    if not frames:
        return None
    # The innermost frame outside torch itself (a functional collective's trace ends in torch).
    user = [f for f in frames if not f[0].startswith(_TORCH_DIR)]
    return (user or frames)[-1]


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def op_name(node: torch.fx.Node) -> str:
    """The op a node calls, as a user would write it: ``aten.mm.default``, ``torch.nonzero``,
    ``Tensor.item``."""
    target = node.target
    if node.op == "call_method":
        return f"Tensor.{target}"
    if isinstance(target, str | torch._ops.OpOverload):
        return str(target)
    if target in _OPERATORS:
        return _OPERATORS[target]
    name = getattr(target, "__name__", None)
    if name is not None and getattr(torch, name, None) is target:
        return f"torch.{name}"
    # torch.unique is a Python wrapper in torch.functional; F.relu and co. in torch.nn.functional
    for namespace, shown in (("torch.functional", "torch"), ("torch.nn.functional", "F")):
        for public, value in vars(_module(namespace)).items():
            if value is target:
                return f"{shown}.{public}"
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module and name else repr(target)


_OPERATORS = {
    operator.getitem: "Tensor.__getitem__ (indexing)",
    operator.setitem: "Tensor.__setitem__ (indexed assignment)",
}


def _module(name: str):
    import importlib

    return importlib.import_module(name)


def warn(message: str, category: type[Warning], *, node: torch.fx.Node | None = None) -> None:
    """Issue a warning attributed to the user's code, not to torch's or ours.

    The warning's file and line are ``node``'s source line when it has one (the line the
    message names), else the innermost frame of the current call stack outside torch, JAX,
    torch2xla and the standard library (the user's call of the compiled function). Warning
    filters on the user's module (``filterwarnings(module=...)``) apply, as for a warning the
    user's own code raised.
    """
    where = _user_frame(node) if node is not None else None
    if where is not None:
        filename, lineno = where[0], int(where[1])
        module_globals = _module_globals(filename)
    else:
        frame = _caller_frame()
        if frame is None:
            warnings.warn(message, category, stacklevel=2)
            return
        filename, lineno, module_globals = frame.f_code.co_filename, frame.f_lineno, frame.f_globals
    module = (module_globals or {}).get("__name__")
    registry = (
        None if module_globals is None else module_globals.setdefault("__warningregistry__", {})
    )
    if module_globals is not None and _no_source(module_globals):
        module_globals = None  # (its registry kept: "once" filters still count per module)
    warnings.warn_explicit(
        message,
        category,
        filename,
        lineno,
        module=module,
        registry=registry,
        module_globals=module_globals,
    )


@functools.cache
def _library_dirs() -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """(torch's, JAX's and torch2xla's directories, the standard library's, site-packages')."""
    import jax

    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep
    libs = (_TORCH_DIR, os.path.dirname(jax.__file__) + os.sep, ours)
    paths = sysconfig.get_paths()
    site = tuple(paths[k].rstrip(os.sep) + os.sep for k in ("purelib", "platlib") if paths.get(k))
    return libs, paths["stdlib"].rstrip(os.sep) + os.sep, site


def _is_library(filename: str) -> bool:
    libs, stdlib, site = _library_dirs()
    if filename.startswith(("<", *libs)):
        return True
    # (on a system install, site-packages lies inside the standard library's directory)
    return filename.startswith(stdlib) and not filename.startswith(site)


def _caller_frame():
    """The innermost frame of the call stack that is the user's (see ``warn``), or None."""
    frame = sys._getframe(2)
    while frame is not None and _is_library(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _no_source(module_globals: dict) -> bool:
    """Whether ``module_globals``' loader cannot give their source: code run from stdin or by
    ``python -c`` (``__main__``'s loader is ``BuiltinImporter``), whose ``get_source`` raises
    ImportError inside ``warnings.warn_explicit`` (every fallback warning crashed the call)."""
    import importlib.machinery

    loader = module_globals.get("__loader__")
    builtin = (importlib.machinery.BuiltinImporter, importlib.machinery.FrozenImporter)
    return (
        isinstance(loader, type)
        and issubclass(loader, builtin)
        and module_globals.get("__name__") not in sys.builtin_module_names
    )


def _module_globals(filename: str) -> dict | None:
    """The globals of the imported module whose file is ``filename`` (None if none is)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == filename:
            return vars(module)
    main = sys.modules.get("__main__")
    if main is not None and os.path.abspath(getattr(main, "__file__", "") or "") == filename:
        return vars(main)
    return None


def is_custom_op(target: object) -> bool:
    """Whether ``target`` is a user's ``torch.library`` op (not ATen's, prims' or ours)."""
    return isinstance(target, torch._ops.OpOverload) and target.namespace not in (
        "aten",
        "prims",
        "torch2xla",
        "_c10d_functional",
        "c10d_functional",
        "_c10d_functional_autograd",
    )


def describe(node: torch.fx.Node) -> str:
    return f"{node.target} (node {node.name!r}) from {source_line(node)}"


@dataclasses.dataclass(frozen=True)
class Unsupported:
    """An ATen node that cannot run in XLA, and why."""

    node: torch.fx.Node
    reason: str
    # True for ops that run in eager by design (collectives): no warning, allowed in strict mode.
    by_design: bool = False

    def __str__(self) -> str:
        # (a reason that names the input: the placeholder's name, L_x_, is Dynamo's)
        named = self.node.op == "placeholder" and self.reason.startswith("input ")
        what = "" if named else f"{op_name(self.node)}: "
        return f"  {what}{self.reason}\n      at {source_line(self.node)}"


class CompileError(RuntimeError):
    """torch2xla could not compile a graph; the message names the graph and the stage.

    Attributes:
        graph: the graph's name (``graph_0``), as in dumps, profiler ranges and ``explain``.
        stage: the compile stage that failed (``lowering``, ``passes``, ``tracing``, ``xla``).
    """

    def __init__(self, message: str, *, graph: str | None = None, stage: str | None = None):
        super().__init__(message)
        self.graph = graph
        self.stage = stage


class UnsupportedOpsError(CompileError):
    """Raised in strict mode when a graph holds ops that torch2xla cannot lower (a
    ``CompileError`` whose ``stage`` is None: no stage failed; ``unsupported`` lists them)."""

    def __init__(self, graph_name: str, unsupported: list[Unsupported]) -> None:
        listing = "\n".join(str(u) for u in unsupported)
        custom = sorted({str(u.node.target) for u in unsupported if is_custom_op(u.node.target)})
        todo = []
        if custom:
            todo.append(
                f"give your op{'s' * (len(custom) > 1)} ({', '.join(custom)}) a JAX "
                'implementation with torch2xla.register_lowering (README: "Custom ops")'
            )
        todo.append("drop options={'strict': True} to run them in eager PyTorch")
        if len(custom) < len(unsupported):
            todo.append("open an issue asking for the missing lowering")
        super().__init__(
            f"torch2xla: graph {graph_name} has {len(unsupported)} op(s) that cannot run in XLA:"
            f"\n{listing}\nWhat to do: {'; or '.join(todo)}.",
            graph=graph_name,
        )
        self.unsupported = unsupported


class OpError(RuntimeError):
    """An op of a compiled graph met inputs for which eager PyTorch raises: an index out of
    range, an integer division by zero, operands of different dtypes. The message starts with
    eager's and names the op and the user's source line.

    Errors found from tensor values are raised after the XLA program ran (it cannot raise
    inside); those found from dtypes or constant arguments, when the graph is compiled.
    ``IndexError`` and ``ZeroDivisionError`` cases raise the subclasses ``OpIndexError`` and
    ``OpZeroDivisionError``, which are ``RuntimeError`` too (as eager's are, by op).

    Before the error reaches the user, the call is run again in eager PyTorch from the same
    inputs (the compiled graph's ``replay``), so that what eager changed before the failing op
    (in-place updates of inputs and buffers) is changed, and nothing after it; not for value
    errors of CUDA programs, where eager's kernels would assert on the device.

    Attributes:
        node: the ATen node (None where unknown).
        source: ``file:line: code`` of the user code that called the op.
        after_run: found from tensor values after the XLA program ran (a runtime check).
        replayed: the call ran again in eager PyTorch, which raised the error (its own is the
            ``__cause__``), with eager's side effects.
    """

    after_run: bool = False
    replayed: bool = False

    def __init__(self, message: str, node: torch.fx.Node | None = None, *, hint: str = "") -> None:
        self.message = message  # (eager's part: what ``with_eager_message`` replaces)
        self.node = node
        self.source = source_line(node) if node is not None else "<unknown source>"
        text = message
        if node is not None:
            text += f"\n  op: {user_op(node)} (node {node.name!r})\n  user code: {self.source}"
        if hint:
            text += f"\n{hint}"
        super().__init__(text)

    def with_eager_message(self, eager: BaseException) -> OpError:
        """This error saying what ``eager`` (eager's error for the same call) says, where
        eager's first line does not start ours (ours may add the bad index to it), followed
        by the op and the user's line."""
        text, said = str(self), str(eager)
        if not text.startswith(self.message) or text.startswith(
            said.splitlines()[0] if said else ""
        ):
            return self
        self.args = (said + text[len(self.message) :], *self.args[1:])
        self.message = said
        return self


class OpIndexError(OpError, IndexError):
    """An index out of range (eager raises IndexError or RuntimeError, depending on the op)."""


class OpZeroDivisionError(OpError, ZeroDivisionError):
    """An integer division or remainder by zero (eager's CPU kernels raise
    ``RuntimeError("ZeroDivisionError")``)."""


class OpLinAlgError(OpError, torch.linalg.LinAlgError):
    """A matrix eager's linear algebra rejects: singular, not positive-definite (eager raises
    ``torch.linalg.LinAlgError``)."""


class OpAssertionError(OpError, AssertionError):
    """A Python ``assert`` on a tensor failed (Dynamo traces ``assert t, msg`` to
    ``torch._assert_async(t, msg)``; eager raises ``AssertionError``)."""


def from_assert_statement(node: torch.fx.Node) -> bool:
    """Whether ``node`` comes from a Python ``assert`` statement of the user's code."""
    frame = _user_frame(node)
    return frame is not None and re.match(r"assert\b", frame[2].strip()) is not None


class OpNotImplementedError(OpError, NotImplementedError):
    """A dtype eager's kernel has no implementation for (eager raises ``NotImplementedError``:
    ``"softmax_lastdim_kernel_impl" not implemented for 'Long'``)."""


def user_op(node: torch.fx.Node) -> str:
    """The op the user called for ``node``: the op a decomposition came from
    (``aten.nll_loss_forward.default`` for its ``gather``), else the node's own."""
    original = node.meta.get("original_aten")
    if original is not None and str(original) != str(node.target):
        return f"{original} (decomposed; this node: {node.target})"
    return op_name(node)  # (a Dynamo node's function by its public name: F.multi_margin_loss)


class PassError(CompileError):
    """A graph pass from ``options["passes"]`` failed or broke the graph's contract."""


class LoweringError(CompileError):
    """A lowering failed while tracing a graph to JAX.

    Raised inside a lowering, it records the ATen node being lowered (``node``).
    """

    def __init__(self, message: str, *, node: torch.fx.Node | None = None, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.node = node if node is not None else _node_being_lowered()


def _node_being_lowered() -> torch.fx.Node | None:
    from torch2xla.ops._registry import _CURRENT

    current = _CURRENT.get(None)
    return None if current is None else current.node


# TORCH2XLA_TRACEBACK=full keeps the whole chain of tracebacks (JAX's tracing frames included)
# on errors that torch2xla otherwise reports concisely.
FULL_TRACEBACK_ENV = "TORCH2XLA_TRACEBACK"


def full_traceback() -> bool:
    return os.environ.get(FULL_TRACEBACK_ENV, "").lower() == "full"


def lowering_failed(err: LoweringError, graph: str) -> LoweringError:
    """The concise error for a failed lowering: graph, ATen node, user line, our line, what to do.

    The original exception stays available as ``.original``.
    """
    original = err.__cause__ if err.__cause__ is not None else err
    node = err.node
    if node is None:
        head = f"torch2xla: {graph} could not be compiled: {err}"
        where = ""
        todo = "This is a bug in torch2xla; please report it with this message."
    else:
        what = f"{type(original).__name__}: {original}" if original is not err else str(err)
        head = (
            f"torch2xla: {graph} could not be compiled: the lowering of {node.target} "
            f"(node {node.name!r}) raised {what}"
        )
        where = f"\n  user code: {source_line(node)}"
        ours = _lowering_frame(original, node)
        if ours:
            where += f"\n  lowering:  {ours}"
        todo = (
            "This is a bug in torch2xla's lowering; please report it with this message. "
            'Meanwhile, run this op in eager PyTorch: torch.compile(..., backend="xla", '
            f'options={{"eager_ops": [torch.ops.{node.target}]}}).'
        )
        if user_lowering(node) is not None:
            todo = (
                "The lowering is yours (torch2xla.register_lowering): fix it, or run the op in "
                'eager PyTorch: torch.compile(..., backend="xla", '
                f'options={{"eager_ops": [torch.ops.{node.target}]}}).'
            )
    message = (
        f"{head}{where}\nWhat to do: {todo}\n"
        f"(Set {FULL_TRACEBACK_ENV}=full to see the full traceback.)"
    )
    new = LoweringError(message, node=node, graph=graph, stage="tracing")
    new.original = original
    return new


def user_lowering(node: torch.fx.Node):
    """The user's function behind ``node``'s lowering (``register_lowering``), else None."""
    from torch2xla.ops import LOWERINGS

    return getattr(LOWERINGS.get(node.target), "_torch2xla_user_fn", None)


def _lowering_frame(exc: BaseException, node: torch.fx.Node) -> str:
    """``file:line, in fn: code`` of the innermost frame of ``node``'s lowering in ``exc``'s
    traceback (or, for a wrapped lowering, of the op modules), else ''."""
    from torch2xla.ops import LOWERINGS

    code = getattr(user_lowering(node) or LOWERINGS.get(node.target), "__code__", None)
    ops_dir = f"torch2xla{os.sep}ops{os.sep}"
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code is code or (code is None and ops_dir in frame.f_code.co_filename):
            found = (frame.f_code, lineno)
    if found is None:
        return ""
    fcode, lineno = found
    line = linecache.getline(fcode.co_filename, lineno).strip()
    return f"{fcode.co_filename}:{lineno}, in {fcode.co_name}: {line}"
