"""Graphs traced from inside a user's ``try`` block: their frame runs in eager PyTorch.

Dynamo compiles a frame's ``try: ... except E: ...`` into one graph call whose bytecode no
longer holds the ``try``: an error the graph raises when it runs (an index out of range, an
integer division by zero, ``cholesky`` of a matrix that is not positive-definite, a failed
``assert`` on tensor values, every error eager raises from tensor values) leaves the
compiled frame instead of running the ``except`` branch (or the ``finally`` block) as eager
does. torch2xla raises eager's error type, but no program can jump to the handler: the
backend asks Dynamo to run the frame in eager PyTorch instead (``SkipFrame``), where a node
of the graph comes from a line inside such a block (of any function Dynamo inlined into the
frame). Frames called from it compile as usual: an error raised by their graphs reaches the
eager ``try`` of the caller, as in eager.

Counted: ``try`` blocks with a handler that can catch what a graph raises (``except``,
``except Exception``, ``RuntimeError``, ``IndexError``, ``AssertionError``... ``_CAUGHT``),
``try`` blocks with a ``finally`` the graph computes some of (its tensor writes would be lost),
``with contextlib.suppress(...)`` of such errors, and ``with name(...)`` where ``name`` is,
in the module the file was loaded as, a class whose ``__exit__`` may return a true value or
a ``contextlib.contextmanager`` function whose ``yield`` sits in such a ``try``. Not
counted: handlers of other errors only (an import guard; HF's ``except NotImplementedError`` around its static cache's
``index_copy_``), a ``finally`` that changes only Python state (HF's ``try: forward finally:``
restoring its config), context managers not found by name in the module (``with
self.guard():``) or not the user's, blocks in torch's own files, and graphs compiled with
``fullgraph=True`` (which asks for one graph: eager's error type is raised, the handler does
not run).
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import re
import sys
import textwrap
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# Code that holds no ``try`` statement of its own: a frame running it is inside a ``try`` only
# through the frame that called it, whose line the stack shows too (a lambda defined inside a
# ``try`` block and compiled, ``torch.compile(lambda x: ...)``, runs outside it when called).
_NO_TRY = frozenset({"<lambda>", "<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"})

# what a handler must catch to catch an error a graph raises when it runs (eager's types for
# values it rejects: IndexError, RuntimeError and its kin, AssertionError; ValueError too) or
# that Dynamo raises while tracing a later call (its TorchRuntimeError for shapes eager
# rejects): a handler naming only other errors (an import guard, HF's
# ``except NotImplementedError`` around ``index_copy_`` for devices without it, a user's own
# error class) cannot catch them
_CAUGHT = frozenset(
    {
        "BaseException",
        "Exception",
        "RuntimeError",
        "IndexError",
        "LookupError",
        "ValueError",
        "ArithmeticError",
        "ZeroDivisionError",
        "AssertionError",
        "LinAlgError",
        "TorchRuntimeError",
    }
)


def _type_names(node: ast.expr | None) -> list[str] | None:
    """The names a handler's type expression catches (None: a bare ``except``)."""
    if node is None:
        return None
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return [
        item.attr if isinstance(item, ast.Attribute) else getattr(item, "id", "?") for item in items
    ]


def _catching(names: list[str] | None) -> bool:
    return names is None or any(n in _CAUGHT for n in names)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _lines(statements: list[ast.stmt], stop: int | None = None) -> frozenset[int]:
    """The lines of ``statements`` (up to ``stop``), less those of the functions and classes
    they define: a function defined in a ``try`` block runs outside it when called later
    (its caller's line says where it runs)."""
    if not statements:
        return frozenset()
    last = statements[-1].end_lineno or statements[-1].lineno
    lines = set(range(statements[0].lineno, (stop if stop is not None else last + 1)))
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, _DEFS):
                first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
                lines.difference_update(range(first, (node.end_lineno or node.lineno) + 1))
    return frozenset(lines)


class _Block(NamedTuple):
    """A ``try`` block (or ``with contextlib.suppress(...)``): the lines it protects, whether
    a handler catches what a graph raises, the lines of its ``finally`` (which matters where
    the graph computes some of it: ``HF``'s ``try: forward finally: restore the config``
    writes no tensor)."""

    body: frozenset[int]
    catches: bool
    finally_lines: frozenset[int]


def _suppressed(item: ast.withitem) -> list[str] | None | bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name != "suppress":
        return False
    names: list[str] = []
    for arg in call.args:
        names.extend(_type_names(arg) or [])
    return names


def _module(filename: str):
    """The module loaded from ``filename``, if any."""
    for m in list(sys.modules.values()):
        if getattr(m, "__file__", None) == filename:
            return m
    return None


def _swallows(module_of: Callable[[], Any], item: ast.withitem) -> bool:
    """Whether ``with name(...):`` in ``filename`` enters a context manager of the user's that
    may swallow an error: a class whose ``__exit__`` may return a true value, or a
    ``contextlib.contextmanager`` function whose ``yield`` sits in a ``try`` with a handler
    (resolved by name in the module loaded from ``filename``; others are not looked at)."""
    call = item.context_expr
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return False
    target = getattr(module_of(), call.func.id, None)
    if isinstance(target, type):
        target = getattr(target, "__exit__", None)
        returns = True
    else:
        target = getattr(target, "__wrapped__", None)  # (``contextlib.contextmanager``'s)
        returns = False
    code = getattr(target, "__code__", None)
    if code is None or code.co_filename.startswith(_TORCH_DIR):
        return False
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(target)))
    except (OSError, TypeError, SyntaxError):
        return False
    for node in ast.walk(tree):
        value = node.value if returns and isinstance(node, ast.Return) else None
        if value is not None and not (isinstance(value, ast.Constant) and not value.value):
            return True
        if not returns and isinstance(node, ast.Try) and node.handlers:
            inner = [n for s in node.body for n in ast.walk(s)]
            if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in inner) and any(
                _catching(_type_names(h.type)) for h in node.handlers
            ):
                return True
    return False


@functools.lru_cache(maxsize=256)
def _blocks(filename: str, size: int) -> tuple[_Block, ...]:
    """The ``try`` blocks of ``filename`` that may act where eager raises; ``size`` (its
    length in lines) keys an edited file anew."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return ()
    kinds = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
    found = []
    module_of = functools.cache(lambda: _module(filename))  # (looked up once, where needed)
    for block in ast.walk(tree):
        if isinstance(block, kinds):
            catches = any(_catching(_type_names(h.type)) for h in block.handlers)
            body = _lines(block.body)
            if block.finalbody:  # (an error in a handler or ``else`` runs the ``finally`` too)
                after = [*block.body, *block.handlers, *block.orelse]
                body = _lines(after, block.finalbody[0].lineno)
            if catches or block.finalbody:
                found.append(_Block(body, catches, _lines(block.finalbody)))
        elif isinstance(block, ast.With | ast.AsyncWith):
            for item in block.items:
                names = _suppressed(item)
                if (names is not False and _catching(names)) or _swallows(module_of, item):
                    found.append(_Block(_lines(block.body), True, frozenset()))
    return tuple(found)


def _frames(trace: str) -> list[tuple[str, int]]:
    return [
        (f, int(line))
        for f, line, name in _FRAME.findall(trace)
        if not f.startswith(_TORCH_DIR) and not f.startswith("<") and name not in _NO_TRY
    ]


def node_in_try(gm: torch.fx.GraphModule) -> torch.fx.Node | None:
    """The first node of ``gm`` computed inside a user's ``try`` block that may act on what
    it raises (see the module docstring), or None."""
    nodes = [
        (n, _frames(n.meta.get("stack_trace") or ""))
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module")
    ]
    traced = {frame for _, frames in nodes for frame in frames}  # (the lines the graph runs)
    known: dict[tuple[str, int], bool] = {}
    for node, frames in nodes:
        for frame in frames:
            found = known.get(frame)
            if found is None:
                found = known[frame] = _protected(frame, traced)
            if found:
                return node
    return None


def _protected(frame: tuple[str, int], traced: set[tuple[str, int]]) -> bool:
    filename, line = frame
    size = len(linecache.getlines(filename))
    return any(
        line in block.body
        and (block.catches or any((filename, k) in traced for k in block.finally_lines))
        for block in (_blocks(filename, size) if size else ())
    )


def one_graph() -> bool:
    """Whether the Dynamo compile in progress must give one graph (``fullgraph=True``)."""
    from torch._dynamo import symbolic_convert

    tx = getattr(symbolic_convert.tls, "current_tx", None)
    return bool(getattr(tx, "one_graph", False) or getattr(tx, "error_on_graph_break", False))


_WARNED: set[str] = set()


def skip_frame_in_try(gm: torch.fx.GraphModule, category: type[Warning] = UserWarning) -> None:
    """Raise Dynamo's ``SkipFrame`` where ``gm`` has a node inside a user's ``try`` block
    (the frame then runs in eager PyTorch, its ``except`` branch with it), warning once per
    line with ``category`` (the backend's ``FallbackWarning``): the user learns why that code
    is not compiled, and that moving the ``try`` out of the compiled function compiles it."""
    node = node_in_try(gm)
    if node is None or one_graph():
        return
    from torch._dynamo.exc import SkipFrame

    from torch2xla._errors import source_line

    message = (
        f"torch2xla: {source_line(node)} runs inside a try block: an error the compiled "
        "graph raised could not reach its handler, so the frame runs in eager PyTorch"
    )
    where = source_line(node)
    if where not in _WARNED:
        _WARNED.add(where)
        warnings.warn(
            message + " (move the try out of the compiled function to compile this code)",
            category,
            stacklevel=2,
        )
    raise SkipFrame(message)


__all__ = ["node_in_try", "one_graph", "skip_frame_in_try"]
