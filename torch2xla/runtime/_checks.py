"""Runtime checks: the errors eager raises from tensor values (an index out of range, an integer
division by zero), which an XLA program cannot raise.

A lowering that can fail registers a check with its node's context (``ctx().check``): a traced
boolean, True where eager would raise; the message; and optionally a traced integer the
message names (the offending index). The interpreter folds one trace's checks into a single
small output, the int64 pair ``[code, value]`` (``code`` 0: every check passed; else 1 + the
position of the first failed check in graph order), after the graph's outputs. The caller reads
it once after the program ran and raises that check's error (``raise_failed``), which names the
op and the user's source line. A graph without checks has no such output, and checks that are
off (``options={"checks": False}``) are never traced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import torch

from torch2xla._errors import OpError, source_line

_HINT = (
    "(torch2xla checks this after the XLA program ran; options={'checks': False} turns the "
    "checks off)"
)


# (the failed check's value -> eager's message and the error class), for messages that are
# not one template (``torch.linalg``'s, made by its own kernel); picklable (records keep it)
Explain = Callable[[int], "tuple[str, type[OpError]]"]


def _raised(error: type[OpError], message: str, value: int, explain: Explain | None):
    if explain is not None:
        message, error = explain(value)
        return error, message
    return error, message.format(value=value)


@dataclasses.dataclass(frozen=True, eq=False)
class Check:
    """What a failed check raises: ``error(message.format(value=...), node)``, or what
    ``explain(value)`` says."""

    node: torch.fx.Node
    error: type[OpError]
    message: str
    explain: Explain | None = None

    def exception(self, value: int) -> OpError:
        error, message = _raised(self.error, self.message, value, self.explain)
        e = error(message, self.node, hint=_HINT)
        e.after_run = True
        return e

    def portable(self, user_nodes: Sequence[torch.fx.Node] = ()) -> StoredCheck:
        """The same check without its node (for the persistent cache's records): the op and
        the user's line are kept as text, and the position among ``user_nodes`` (the Dynamo
        graph's) of the first node with the user's line, from which a process that restores
        the record names its own line (``StoredCheck.at``); without a line (code without a
        source file, ``python -c``'s), the node the check's op came from (its
        ``source_fn_stack``), so that a process that has the line names it."""
        trace = self.node.meta.get("stack_trace")
        source = (self.node.meta.get("source_fn_stack") or [(None, None)])[-1][0]
        at = next(
            (i for i, n in enumerate(user_nodes) if trace and n.meta.get("stack_trace") == trace),
            None,
        )
        if at is None and not trace:
            at = next((i for i, n in enumerate(user_nodes) if n.name == source), None)
        return StoredCheck(
            self.error,
            self.message,
            self.error("", self.node).args[0],
            source_line(self.node),
            self.explain,
            at,
        )


@dataclasses.dataclass(frozen=True)
class StoredCheck:
    """A ``Check`` restored from a record: raises the same error with the same text."""

    error: type[OpError]
    message: str
    details: str  # the op and the user's line, as ``OpError`` writes them after the message
    source: str
    explain: Explain | None = None
    user_node: int | None = None  # the position of a Dynamo graph node with the user's line

    def at(self, user_nodes: Sequence[torch.fx.Node]) -> StoredCheck:
        """This check naming the line of the code that calls it in this process: the graph
        key holds no source line, so an identical function in another file (or a moved file)
        restores a record another process wrote."""
        i = self.user_node
        if i is None or i >= len(user_nodes):
            return self
        # (a graph without lines, traced from code without a source file such as ``python
        # -c``'s: "<unknown source>", never the line of the process that wrote the record)
        source = source_line(user_nodes[i])
        marker = f"user code: {self.source}"
        if marker not in self.details:
            return self
        details = self.details.replace(marker, f"user code: {source}")
        return dataclasses.replace(self, details=details, source=source)

    def exception(self, value: int) -> OpError:
        error, message = _raised(self.error, self.message, value, self.explain)
        e = error(message + self.details, hint=_HINT)
        e.message = message
        e.source = self.source
        e.after_run = True
        return e


class Registered(NamedTuple):
    """A check registered during one trace, with its traced condition and value."""

    check: Check
    failed: Any  # bool scalar (traced)
    value: Any  # integer scalar (traced) or None


def fold(registered: Sequence[Registered]) -> jax.Array:
    """(traced) The status ``[code, value]`` of ``registered`` (see the module docstring)."""
    # A chain of selects, last check first: one small fusion (an argmax over a stacked vector
    # took three on XLA's CPU backend, each a separately dispatched kernel).
    code, value = jnp.int64(0), jnp.int64(0)
    for k in reversed(range(len(registered))):
        r = registered[k]
        failed = jnp.asarray(r.failed, bool).reshape(())
        code = jnp.where(failed, jnp.int64(k + 1), code)
        if r.value is not None:
            value = jnp.where(failed, jnp.asarray(r.value).astype(jnp.int64).reshape(()), value)
    return jnp.stack([code, value])


def chain(statuses: Sequence[tuple[jax.Array, int]]) -> jax.Array:
    """(traced) One status for several functions' statuses, each with the number of checks
    before its own (its offset): the first failed check of the first function that failed."""
    result = jnp.zeros(2, jnp.int64)
    for status, offset in reversed(statuses):
        shifted = jnp.stack([status[0] + offset, status[1]])
        result = jnp.where(status[0] > 0, shifted, result)
    return result


def raise_failed(status: Any, checks: Sequence[Check]) -> None:
    """Raise the error of the failed check that ``status`` (a program's status output) names;
    nothing when all passed. Reading ``status`` waits for the program (on a GPU, a sync)."""
    code, value = np.asarray(status).tolist()
    if code:
        raise checks[code - 1].exception(value)


def enabled(option: Any, cuda: bool) -> bool:
    """Whether programs on a GPU (``cuda``) or the CPU check, by ``options["checks"]``: ``"auto"``
    checks on the CPU only, where a check costs a few us a call; on a GPU reading the status
    would wait for the device at every call."""
    return option is True or (option == "auto" and not cuda)


__all__ = ["Check", "Registered", "StoredCheck", "chain", "enabled", "fold", "raise_failed"]
