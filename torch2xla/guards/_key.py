"""The per-call cache key: only what Dynamo does not already guard, and what each part means."""

from __future__ import annotations

import cmath
import dataclasses
import math
import operator
import re
from collections.abc import Callable, Sequence

import sympy
import torch
from torch._dynamo.source import is_from_unspecialized_param_buffer_source

from torch2xla.capture._input_aliasing import alias_signature, may_alias
from torch2xla.capture._lower import scalar_placeholders, written_inputs
from torch2xla.capture._stop_gradient import leaf_written, written_with_grad
from torch2xla.capture._untracked import untracked_state
from torch2xla.capture._written import self_overlapping, symbolic_layout


def _expr(value) -> sympy.Expr | None:
    """The sympy expression of a SymInt (None for anything else)."""
    if isinstance(value, torch.SymInt):
        return value.node.expr
    return None


def source_label(source, fallback: str) -> str:
    """A short user-facing name for a Dynamo source: ``x``, ``x dim 1``, ``self.ln.eps``."""
    if source is None:
        return fallback
    prop, idx = getattr(source, "prop", None), getattr(source, "idx", None)
    base = getattr(source, "base", None)
    if prop is not None and idx is not None and base is not None and prop.name == "SIZE":
        return f"{source_label(base, fallback)} dim {idx}"
    name = source.name
    name = name() if callable(name) else str(name)
    name = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", name)
    name = re.sub(r"\._(?:modules|parameters|buffers)\['([^']+)'\]", r".\1", name)
    return re.sub(r"\.size\(\)\[(\d+)\]", r" dim \1", name)


def placeholder_label(node: torch.fx.Node) -> str:
    grapharg = node.meta.get("grapharg")
    return source_label(getattr(grapharg, "source", None), node.name)


def scalar_key(v):
    """A Python scalar as a cache key: itself, except where ``==`` conflates values that a
    program specialized to one of them computes differently. ``0.0 == -0.0``, so a program
    built for ``x * 0.0`` served ``x * -0.0`` (``1 / (x * s)`` gave ``inf`` for ``-inf``), and
    ``nan != nan``, so a NaN was never found again (one compile per call, evicting the rest):
    zeros and NaNs are keyed by their ``repr`` (a ``str``, never equal to a number)."""
    t = type(v)
    if t is float:
        return v if v != 0.0 and not math.isnan(v) else repr(v)
    if t is complex:
        return v if v.real != 0.0 and v.imag != 0.0 and not cmath.isnan(v) else repr(v)
    return v


def _strided(node: torch.fx.Node) -> bool:
    ex = node.meta.get("example_value")
    return isinstance(ex, torch.Tensor) and ex.layout == torch.strided


def _target_name(node: torch.fx.Node) -> str:
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_function":
        return getattr(node.target, "__name__", None) or str(node.target)
    return ""


def _module_state(node: torch.fx.Node) -> bool:
    """Whether the placeholder ``node`` is a module's parameter or buffer (Dynamo's source)."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    return source is not None and is_from_unspecialized_param_buffer_source(source)


def _is_typed_value(v) -> bool:
    return isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], type)


def _size_symbols(placeholders: Sequence[torch.fx.Node]) -> set:
    out: set = set()
    for node in placeholders:
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.Tensor):
            for d in ex.shape:
                e = _expr(d)
                if e is not None:
                    out |= e.free_symbols
        elif _expr(ex) is not None:  # x.shape[1] of an input the graph does not take itself
            source = getattr(node.meta.get("grapharg"), "source", None)
            if getattr(getattr(source, "prop", None), "name", None) == "SIZE":
                out |= _expr(ex).free_symbols
    return out


def _layout_only(gm: torch.fx.GraphModule, placeholders: Sequence[torch.fx.Node]):
    """Stride symbols the program does not depend on, and the inputs whose strides hold them.

    Dynamo makes a stride that changed a symbol of its own (``ids[:, -1:]`` of a sequence one
    longer every token: stride ``(n, 1)``) and passes it to the graph. Where the graph never
    reads it (no user, no size of it, no ``as_strided``), the program is the same for every
    value: inputs reach XLA as dense arrays, and eager's output layouts follow the inputs'
    stride order, density and size-1 strides (``layout_class``), which key it instead. Keyed
    by value, each token compiled a program of its own."""
    if any("as_strided" in _target_name(n) for n in gm.graph.nodes):
        return frozenset(), ()
    sizes = _size_symbols(placeholders)
    unread = set()
    for node in placeholders:
        e = _expr(node.meta.get("example_value"))
        if isinstance(e, sympy.Symbol) and not node.users and e not in sizes:
            unread.add(e)
    if not unread:
        return frozenset(), ()
    found, pos = set(), []
    for i, node in enumerate(placeholders):
        ex = node.meta.get("example_value")
        if not _strided(node):
            continue
        syms = set().union(*(_free(s) for s in ex.stride())) | _free(ex.storage_offset())
        if syms & unread:
            found |= syms & unread
            pos.append(i)
    return frozenset(found), tuple(pos)


def _free(value) -> set:
    e = _expr(value)
    return set(e.free_symbols) if e is not None else set()


def layout_class(t: torch.Tensor) -> tuple:
    """What eager's output layouts read of an input's strides: the order of its dims of size
    above 1, the strides of its size-1 dims (``clone`` of a dense tensor keeps them), and
    whether it is dense (``clone``, ``empty_like`` and elementwise results keep a dense input's
    strides, give a gapped one row-major ones)."""
    shape, stride = t.shape, t.stride()
    order = tuple(sorted((d for d in range(t.ndim) if shape[d] > 1), key=lambda d: -stride[d]))
    ones = tuple(stride[d] for d in range(t.ndim) if shape[d] == 1)
    dense, step = True, 1
    for d in reversed(order):
        dense, step = dense and stride[d] == step, step * shape[d]
    return order, ones, dense


@dataclasses.dataclass(frozen=True)
class SymbolSource:
    """Where the value of one of Dynamo's size symbols is read from at every call.

    ``dim`` is None when the placeholder at ``index`` is the SymInt itself.
    """

    symbol: sympy.Symbol
    index: int
    dim: int | None
    label: str

    def read(self, args: Sequence) -> int:
        a = args[self.index]
        return a if self.dim is None else a.shape[self.dim]


class SignatureKey:
    """Computes the cache key of one call of a Dynamo graph.

    Dynamo guards every static property of the graph's inputs (dtype, device, requires_grad,
    static sizes) and the grad mode, and it guards that the inputs' sizes agree with the
    graph's size symbols. So what varies between calls of one Dynamo graph is the values of
    its size symbols (``s0``, ``s1``...), which the key reads once each, plus inputs Dynamo
    does not describe (keyed in full) and Python scalars Dynamo passes as 0-d tensors (keyed by
    value, since lowering specializes them). A static graph's key is ``(grad_mode,)``.

    The key is a flat tuple; ``labels[i]`` says in words what ``key[i]`` is, and
    :meth:`describe` turns two keys into recompile reasons. With bucketing on, the values of
    bucketed symbols are replaced by their bucket (see :meth:`set_bucketing`).
    """

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        placeholders = list(gm.graph.find_nodes(op="placeholder"))
        self.placeholders = placeholders
        self.requires_grad = False
        # Inputs whose strides hold a symbol of their own (``ids[:, -1:]`` of a sequence one
        # longer every token): keyed by their layout, not by that stride (``_layout_only``).
        layout_syms, self.layout_pos = _layout_only(gm, placeholders)
        sources: dict[sympy.Symbol, SymbolSource] = {}
        # SymInt placeholders first: reading an int is cheaper than a tensor's shape.
        for i, node in enumerate(placeholders):
            expr = _expr(node.meta.get("example_value"))
            if isinstance(expr, sympy.Symbol) and expr not in sources and expr not in layout_syms:
                sources[expr] = SymbolSource(expr, i, None, placeholder_label(node))
        shape_pos, value_pos = [], []
        for i, node in enumerate(placeholders):
            ex = node.meta.get("example_value", node.meta.get("val"))
            if isinstance(ex, torch.Tensor):
                self.requires_grad |= bool(ex.requires_grad)
                exprs = [_expr(s) for s in ex.shape]
                for d, e in enumerate(exprs):
                    if isinstance(e, sympy.Symbol) and e not in sources:
                        sources[e] = SymbolSource(e, i, d, f"{placeholder_label(node)} dim {d}")
                if any(e is not None and not e.free_symbols <= set(sources) for e in exprs):
                    shape_pos.append(i)
            elif isinstance(_expr(ex), sympy.Symbol):  # (a size symbol, or a stride: layout_pos)
                continue
            else:
                value_pos.append(i)
        self.sources = tuple(sources.values())
        # The symbols that size a tensor (the others are int arguments' values): read now,
        # while Dynamo's metadata is complete (it drops ``grapharg`` later).
        self.size_symbols = frozenset(_size_symbols(placeholders))
        self.shape_pos = tuple(shape_pos)
        self.value_pos = tuple(value_pos)
        # 0-d tensors holding Python scalars are specialized by value when lowering.
        self.scalar_pos = scalar_placeholders(gm)
        # Written inputs overlapping in memory are lowered as one base (_input_aliasing.InputAliasing).
        # ``aliasing``: Dynamo's example inputs shared memory (it guards nothing about overlap
        # then). Where they did not, it guards that the inputs are distinct tensors, not that
        # their memory is: a program built for distinct inputs ran on ``f(x[:4], x[2:6])`` as
        # if they were (a write into one not seen through the other, eager's overlap error not
        # raised). So every graph that writes into an input keys the overlap of its inputs
        # (``checks_overlap``: the key's last element, ``()`` where none overlap).
        self.aliasing = may_alias(gm)
        written = written_inputs(gm)
        self.checks_overlap = self.aliasing or bool(written)
        # The inputs whose overlap is looked for: every strided tensor where the examples
        # overlapped; else the written ones and those that are not a module's parameters or
        # buffers (their sharing memory with each other after the trace is not looked for:
        # ~0.2 us a tensor per call, the hundreds of a model's parameters would cost more
        # than the rest of the key).
        # Where the graph writes a tensor that is not module state (an argument, a global),
        # the parameters and buffers are looked for too: ``f(m.w.detach())`` writing its
        # argument changes the ``m.w`` that the graph reads after the write.
        every = self.aliasing or any(not _module_state(placeholders[i]) for i in written)
        self.overlap_pos = tuple(
            i
            for i, node in enumerate(placeholders)
            if _strided(node) and (every or i in written or not _module_state(node))
        )
        # Written inputs whose example's layout is symbolic: ``check_writes`` (eager's handling
        # of writes into tensors whose elements share memory, ``x.unfold(0, 4, 2).add_(1)``)
        # reads the example, so whether each call's input overlaps itself is keyed.
        self.self_overlap_pos = tuple(
            i for i in sorted(written) if symbolic_layout(placeholders[i].meta.get("example_value"))
        )
        # Dynamo does not guard storage offsets; ``as_strided``'s explicit one counts from the
        # storage's start, so the program depends on where each input starts in its storage.
        self.offset_pos = (
            tuple(i for i, node in enumerate(placeholders) if _strided(node))
            if any("as_strided" in _target_name(n) for n in gm.graph.nodes)
            else ()
        )
        # Process state the build reads that Dynamo does not guard (oneDNN's switch for LSTMs
        # under CPU autocast, opt_einsum's for einsum): read at every call, a change builds
        # another program (``capture/_untracked.py``).
        self.state = untracked_state(gm)
        # Inputs that require grad and are written with grad mode on (per grad mode of the
        # call): eager refuses the write where the input is a leaf or a view of one, and
        # Dynamo guards ``requires_grad``, not leafness: a program built for ``f(x * 2)`` served
        # ``f(x)``, writing the leaf without eager's error. Keyed; such a call runs in eager.
        self.grad_writes = {g: written_with_grad(gm, g) for g in (False, True)}
        self.leaf_pos = tuple(sorted(self.grad_writes[False] | self.grad_writes[True]))
        self.labels: tuple[str, ...] = (
            "grad mode",
            *(s.label for s in self.sources),
            *(f"shape of {placeholder_label(placeholders[i])}" for i in self.shape_pos),
            *(placeholder_label(placeholders[i]) for i in self.value_pos),
            *(placeholder_label(placeholders[i]) for i in self.scalar_pos),
            *(f"storage offset of {placeholder_label(placeholders[i])}" for i in self.offset_pos),
            *(f"layout of {placeholder_label(placeholders[i])}" for i in self.layout_pos),
            *(label for label, _ in self.state),
            *(f"{placeholder_label(placeholders[i])} is a leaf" for i in self.leaf_pos),
            *(
                f"{placeholder_label(placeholders[i])} overlaps itself"
                for i in self.self_overlap_pos
            ),
            *(("inputs overlapping in memory",) if self.checks_overlap else ()),
        )
        # the key's trailing positions that say "memory shared": such calls are never padded
        self._unpaddable = len(self.self_overlap_pos) + bool(self.checks_overlap)
        self.num_symbols = len(self.sources)
        self._bucket: Callable[[tuple, bool], tuple] | None = None
        # ``compute(args)``, the key of a call: what ``__call__`` runs (one frame less).
        self.compute: Callable[[Sequence], tuple] = self._make()

    # -- the per-call key -------------------------------------------------------------------
    def __call__(self, args: Sequence) -> tuple:
        return self.compute(args)

    def _make(self) -> Callable[[Sequence], tuple]:
        grad_enabled = torch.is_grad_enabled
        sources = tuple((s.index, s.dim) for s in self.sources)
        shape_pos, value_pos, scalar_pos = self.shape_pos, self.value_pos, self.scalar_pos
        offset_pos, layout_pos = self.offset_pos, self.layout_pos
        bucket, requires_grad, aliasing = self._bucket, self.requires_grad, self.checks_overlap
        self_overlap_pos, unpaddable = self.self_overlap_pos, self._unpaddable
        overlap_pos = self.overlap_pos
        state = tuple(read for _, read in self.state)
        leaf_pos = self.leaf_pos

        def symbol_values(args) -> tuple:
            return tuple(args[i] if d is None else args[i].shape[d] for i, d in sources)

        overlap = _alias_memo(overlap_pos, symbol_values, layout_pos) if aliasing else None

        def rest(args) -> tuple:
            out: list = []
            for i in shape_pos:
                a = args[i]
                out.append(tuple(a.shape) if isinstance(a, torch.Tensor) else None)
            for i in value_pos:
                a = args[i]
                out.append(
                    (tuple(a.shape), a.dtype, a.device, a.requires_grad)
                    if isinstance(a, torch.Tensor)
                    else (type(a), scalar_key(a))
                )
            for i in scalar_pos:
                out.append(scalar_key(args[i].item()))
            for i in offset_pos:
                out.append(args[i].storage_offset())
            for i in layout_pos:
                out.append(layout_class(args[i]))
            for read in state:
                out.append(read())
            for i in leaf_pos:
                out.append(leaf_written(args[i]))
            for i in self_overlap_pos:
                out.append(self_overlapping(args[i]))
            if overlap is not None:
                out.append(overlap(args))
            return tuple(out)

        plain = not (
            shape_pos
            or value_pos
            or scalar_pos
            or offset_pos
            or layout_pos
            or state
            or leaf_pos
            or unpaddable
        )
        if not sources and plain:
            return lambda args: (grad_enabled(),)
        if bucket is None:
            if plain:
                return lambda args: (grad_enabled(), *symbol_values(args))
            return lambda args: (grad_enabled(), *symbol_values(args), *rest(args))

        def bucketed(args) -> tuple:
            grad = grad_enabled()
            others = rest(args)
            # Calls that record autograd compile per exact size (see guards/README.md), and so
            # do calls whose inputs overlap (padding copies each input: writes through the
            # shared memory would part).
            exact = (grad and requires_grad) or (
                unpaddable > 0 and any(others[len(others) - unpaddable :])
            )
            return (grad, *bucket(symbol_values(args), exact), *others)

        return bucketed

    def leaf_writes(self, args: Sequence) -> list[int]:
        """The inputs this call writes with grad mode on that are leaves requiring grad (or
        views of one): eager raises at the write."""
        return [
            i for i in sorted(self.grad_writes[torch.is_grad_enabled()]) if leaf_written(args[i])
        ]

    def shares_memory(self, key: tuple) -> bool:
        """Whether the call of ``key`` has inputs that overlap each other or themselves (such
        calls compile their exact sizes: padded copies would not share the memory)."""
        n = self._unpaddable
        return n > 0 and any(key[len(key) - n :])

    def set_bucketing(self, bucket: Callable[[tuple, bool], tuple] | None) -> None:
        """Install ``bucket(symbol_values, exact) -> keyed values`` (None: exact sizes)."""
        self._bucket = bucket
        self.compute = self._make()

    def exact(self, args: Sequence) -> tuple:
        """The key of a call at its exact sizes (no bucket)."""
        key, values = self.compute(args), self.symbol_values(args)
        return (key[0], *values, *key[1 + len(values) :])

    def symbol_values(self, args: Sequence) -> tuple[int, ...]:
        """The exact value of every size symbol in this call, in ``self.sources`` order."""
        return tuple(s.read(args) for s in self.sources)

    # -- words ------------------------------------------------------------------------------
    def _label(self, i: int, bucketed: frozenset[int]) -> str:
        return f"{self.labels[i]} (bucket)" if i in bucketed else self.labels[i]

    def describe(self, old: tuple, new: tuple, bucketed: frozenset[int] = frozenset()) -> list[str]:
        """What changed between two keys, as ``"x dim 1: 128 -> 256"`` lines.

        ``bucketed`` holds the key positions that are bucket sizes rather than exact sizes.
        """
        if len(old) != len(new):
            return ["signature layout changed"]
        changes = []
        for i, (a, b) in enumerate(zip(old, new)):
            if a == b:
                continue
            if i == 0:
                a, b = ("on" if a else "off"), ("on" if b else "off")
            elif _is_typed_value(a) and _is_typed_value(b):
                a, b = a[1], b[1]
            changes.append(f"{self._label(i, bucketed)}: {a} -> {b}")
        return changes

    def format(self, key: tuple, bucketed: frozenset[int] = frozenset()) -> str:
        """A signature in words: ``grad mode on, x dim 1=128`` (sizes only; scalars are in
        ``describe`` when they change)."""
        parts = [f"grad mode {'on' if key[0] else 'off'}"]
        for i in range(1, 1 + self.num_symbols + len(self.shape_pos)):
            v = key[i][1] if _is_typed_value(key[i]) else key[i]
            parts.append(f"{self._label(i, bucketed)}={v}")
        return ", ".join(parts)


_data_ptr = torch.Tensor.data_ptr


def _alias_memo(
    positions: tuple[int, ...], symbol_values: Callable, layout_pos: tuple[int, ...] = ()
) -> Callable[[Sequence], tuple]:
    """``alias_signature(args, positions)`` per call, reused while the same tensor objects
    arrive at ``positions`` with the same data pointers, the same symbol values and the same
    strides at ``layout_pos`` (so the same memory spans: Dynamo guards the rest of their
    layout). Reading every tensor's storage costs ~1.3 us a tensor: ~250 us of each token of a
    GPT-2 decode whose cache writes make every parameter an overlap position; the check is two
    maps in C.

    NOTE: the strides at ``layout_pos`` hold symbols of their own that no symbol value says
    (``SignatureKey`` keys them by layout class): one tensor object given other strides in
    place (``b.as_strided_((2, 1), (n, 1))``, ``set_``) kept its data pointer, and the memo
    gave the signature of its old strides: the program that took ``b`` out of the shared base
    at stride 4 served stride 5."""
    if not positions:
        return lambda args: ()
    # (``itemgetter`` of one position returns the element, of several a tuple)
    pick = operator.itemgetter(*positions, *positions) if len(positions) == 1 else None
    pick = pick or operator.itemgetter(*positions)
    laid = tuple(i for i in layout_pos if i in positions)
    last: list = [None]  # (ids, data pointers, symbol values, signature): one tuple, swapped whole

    def signature(args: Sequence) -> tuple:
        tensors = pick(args)
        ids, ptrs, syms = list(map(id, tensors)), list(map(_data_ptr, tensors)), symbol_values(args)
        if laid:
            syms = (syms, tuple(args[i].stride() for i in laid))
        memo = last[0]
        if memo is not None and memo[0] == ids and memo[1] == ptrs and memo[2] == syms:
            return memo[3]
        sig = alias_signature(args, positions)
        last[0] = (ids, ptrs, syms, sig)
        return sig

    return signature
