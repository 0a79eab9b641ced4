"""Outputs that eager returns as views of inputs (or of one intermediate: ``SharedBase``,
``lone_views``).

XLA programs return fresh buffers. Where eager's output is a view of a graph input (``x.t()``,
``x.view(-1)``, a slice), later in-place writes to one would show in the other in eager; so the
output is regenerated as a view of the real input, from Dynamo's fake-tensor metadata, as
AOTAutograd does for other backends.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

import sympy
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from torch2xla.capture._data_dependent import STORAGE_REPLACED_LATER


@dataclasses.dataclass(frozen=True)
class OutputAlias:
    """Output ``output`` is ``inputs[input].as_strided(size, stride, offset)`` in eager, or the
    input itself when ``size`` is None (a mutated input returned by the function)."""

    output: int
    input: int
    size: tuple | None = None
    stride: tuple | None = None
    offset: Any = 0  # relative to the input's own storage offset (Dynamo does not guard it)
    # Of a dynamic-shape graph: ``size``, ``stride`` and ``offset`` hold sympy expressions of
    # the size symbols, each the value of the graph's input at its position here.
    symbols: tuple[tuple[sympy.Symbol, int], ...] = ()
    # How autograd sees eager's view (Dynamo's example value): "tracked" (made with grad
    # enabled: a grad_fn), "untracked" (made under no_grad: requires grad through its base,
    # no grad_fn) or "detached" (of ``x.detach()``: a view of a new tensor, no grad). The
    # call's own grad mode may be another (a function that enables grad itself).
    grad: str = "tracked"
    # A view of output ``input`` (``return y, y[0]``), not of an input; the strides of that
    # output in eager, which the view's strides count in.
    of_output: tuple | None = None
    # the view's conjugate and negative bits differ from its base's (``x.conj()``)
    conj: bool = False
    neg: bool = False
    # the view's dtype where it reinterprets the input's memory (``view_as_real``)
    dtype: torch.dtype | None = None
    # a "detached" output that is no view in eager (``x.detach()``, ``x[0].detach()``: a new
    # tensor over the memory, ``_is_view()`` False, ``_base`` None), as ``x.detach()[0]`` is
    detached_view: bool = True

    def regenerate(self, args, outs=()) -> torch.Tensor:
        if self.size is None:
            return args[self.input]
        if self.of_output is not None:
            base = outs[self.input]
            if tuple(base.stride()) != self._ints(self.of_output, args) or (
                base.dtype != outs[self.output].dtype
            ):
                return outs[self.output]  # (not laid out as eager's: left a copy)
            if self.grad == "tracked":
                return self._view(args, base)
            if self.grad == "detached":  # (``y.detach()[0]``: a view of a detached y)
                view = self._view(args, base.detach())
                return view if self.detached_view else view.detach()
            # (``with no_grad(): v = y[0]; return v, y``: eager's v has no history, and a
            # tracked view of y took v's gradient into y's)
            with torch.no_grad():
                return self._view(args, base)
        base = args[self.input]
        if self.grad == "detached" and base.requires_grad:
            base = base.detach()
        if self.dtype is not None:
            base = _reinterpret(base, self.dtype)
            if base is None:
                return outs[self.output]  # (a layout ``view(dtype)`` refuses: left a copy)
        with torch.set_grad_enabled(self.grad == "tracked"):
            view = self._view(args, base)
        return view if self.detached_view or self.grad != "detached" else view.detach()

    def _ints(self, exprs: tuple, args) -> tuple:
        if not self.symbols:
            return exprs
        values = {s: int(args[i]) for s, i in self.symbols}
        return tuple(int(sympy.sympify(e).xreplace(values)) for e in exprs)

    def _view(self, args, base: torch.Tensor) -> torch.Tensor:
        size, stride = self._ints(self.size, args), self._ints(self.stride, args)
        (offset,) = self._ints((self.offset,), args)
        view = base.as_strided(size, stride, base.storage_offset() + offset)
        if self.conj:
            view = view.conj()
        if self.neg:
            view = torch._neg_view(view)
        return view


def _reinterpret(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """``t``'s memory as ``dtype`` (a view of ``t``, which autograd follows), or None."""
    if t.is_complex() and dtype == t.real.dtype:
        return torch.view_as_real(t.resolve_conj() if t.is_conj() else t)
    if dtype.is_complex and not t.is_complex() and t.dtype == dtype.to_real():
        # (view_as_complex, which autograd follows: ``view(dtype)`` has no derivative)
        pairs = t if t.shape[-1:] == (2,) and t.stride(-1) == 1 else None
        try:
            return torch.view_as_complex(pairs if pairs is not None else t.view(-1, 2))
        except RuntimeError:
            return None
    try:
        return t.view(dtype)
    except RuntimeError:
        return None


def _flips(base: torch.Tensor, view: torch.Tensor) -> tuple[bool, bool]:
    """Whether ``view``'s conjugate and negative bits differ from ``base``'s."""
    return base.is_conj() != view.is_conj(), base.is_neg() != view.is_neg()


def _symbolic(e: Any) -> bool:
    return isinstance(e, sympy.Expr) and not e.is_Integer


def _static(values, symbols: dict | None = None) -> tuple | None:
    """``values`` as ints, or (with ``symbols``: the size symbols that inputs of the graph
    give) as sympy expressions of those symbols; None where another symbol is in them."""
    out = []
    for v in values:
        if isinstance(v, torch.SymInt) and symbols is not None:
            expr = v.node.expr
            if not expr.free_symbols <= symbols.keys():
                return None
            v = int(expr) if expr.is_Integer else expr
        elif not isinstance(v, int):
            return None
        out.append(v)
    return tuple(out)


# Calls whose fake kernel returns its input where the eager kernel returns a copy: torch's
# native_dropout decomposition returns ``input`` itself unless ``train and p != 0`` (so also for
# ``train=None``, which eager reads as training).
_FRESH_IN_EAGER = (
    torch.native_dropout,
    torch.ops.aten.native_dropout,
    torch.ops.aten.native_dropout.default,
)


def _fresh_in_eager(node: torch.fx.Node) -> bool:
    while node.op == "call_function" and node.target is operator.getitem:
        node = node.args[0]
    return node.op == "call_function" and node.target in _FRESH_IN_EAGER


def _plain(ex):
    """``ex``, or None for a functorch wrapper (a value of a ``torch.func`` transform that
    escapes it: ``weight_norm``'s module attribute set inside ``functional_call``), which has
    no storage to alias an input's."""
    if isinstance(ex, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(ex):
        return None
    return ex


_CREATION = torch._C._autograd.CreationMeta


def _creation(ex: torch.Tensor):
    """How autograd made the view ``ex`` (``CreationMeta``; None: not a view autograd follows)."""
    return torch._C._autograd._get_creation_meta(ex) if ex._is_view() else None


def _tracking(ex: torch.Tensor) -> str:
    """ "tracked" or "untracked" (see ``OutputAlias.grad``), for a view that requires grad.
    NOTE: not read from its ``grad_fn`` where it was made under no_grad: autograd raises on
    reading that of a no_grad view written in place (``with no_grad(): return x[0].add_(1)``,
    as eager's would on the user's read, which eager's program need not make)."""
    if _creation(ex) == _CREATION.NO_GRAD_MODE:
        return "untracked"
    return "untracked" if ex.grad_fn is None else "tracked"


@dataclasses.dataclass(frozen=True)
class OutputMarks:
    """What ``Entry`` does to some outputs once they are made, from Dynamo's example values
    (``output_marks``).

    ``multi``: outputs eager returns as one of the views a single op made of a tensor autograd
    follows (``x.split(2)``, ``unbind``, ``chunk``), which autograd refuses to write in place;
    ours are marked so (the error names the view op ``AsStrided`` and output 0, eager's the
    user's op and the view's index). Only views autograd follows and that are not marked
    already (one made under no_grad keeps its own refusal); an output left a copy (a layout no
    view could give) accepts writes, as it did.

    ``fresh``: outputs made from no tensor the graph reads (``torch.zeros(2)``,
    ``torch.empty(n)``). Dynamo breaks the graph before eager code that resizes such a tensor
    (``torch.add(a, 1, out=torch.zeros(2))``, ``o.resize_(3)``), and torch cannot grow a
    storage over the program's memory ("Trying to resize storage that is not resizable"):
    they are handed over in memory of torch's own (a copy; empty outputs are torch's already,
    ``runtime/_interop.to_torch_cpu``)."""

    multi: tuple[int, ...] = ()
    fresh: tuple[int, ...] = ()
    # Some output the program makes requires grad in eager under a call without grad: the
    # function enables grad itself (``program_grads``).
    enables_grad: bool = False
    # ``versions``: outputs (not views of inputs) whose version in eager is not the 0 ours
    # have (``y = x * 2; y.add_(1)``: 1, the graph's example value's), with eager's. Only
    # outputs without grad are set: one autograd follows may be saved for its backward at its
    # version. (Our own ``set_`` and copies of outputs set them back to 0 themselves.)
    versions: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.multi or self.fresh or self.versions)

    def apply(self, outs: list) -> None:
        for i in self.multi:
            t = outs[i]
            if t.requires_grad and t._is_view() and _creation(t) == _CREATION.DEFAULT:
                torch._C._autograd._set_creation_meta(t, _CREATION.MULTI_OUTPUT_NODE)
        for i in self.fresh:
            t = outs[i]
            if not t.requires_grad and not t.untyped_storage().resizable():
                outs[i] = t.clone()
        if self.versions:
            set_to = [
                (outs[i], v)
                for i, v in self.versions
                if not outs[i].requires_grad and not outs[i].is_inference()
            ]
            if set_to:
                tensors, versions = zip(*set_to)
                torch._C._autograd._unsafe_set_version_counter(tensors, versions)


def program_grads(output_requires_grad: Sequence[bool], aliases: Sequence) -> tuple[bool, ...]:
    """Per output, whether the program's own value of it is one autograd follows, where the
    function enables grad itself (``torch.enable_grad()`` inside a call under no_grad): not for
    views of inputs (``aliases``), made again of the caller's tensors (one taken under no_grad
    requires grad through its base, and the program has nothing to differentiate for it)."""
    remade = {a.output for a in aliases if a.of_output is None and a.dtype is None}
    return tuple(bool(g) and i not in remade for i, g in enumerate(output_requires_grad))


def output_marks(
    gm: torch.fx.GraphModule, aliases: Sequence = (), output_requires_grad: Sequence[bool] = ()
) -> OutputMarks:
    """The ``OutputMarks`` of the Dynamo graph ``gm`` (its ``output_aliases`` and outputs'
    ``requires_grad``, for ``enables_grad``)."""
    reads = set()  # (the nodes that read a tensor the graph is given or holds)
    for node in gm.graph.nodes:
        ex = node.meta.get("example_value")
        if node.op in ("placeholder", "get_attr"):
            if isinstance(ex, torch.Tensor) or node.op == "get_attr":
                reads.add(node)
        elif any(n in reads for n in node.all_input_nodes):
            reads.add(node)
    out = gm.graph.find_nodes(op="output")[0].args[0]
    out = out if isinstance(out, list | tuple) else (out,)
    exs = [
        _plain(node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None)
        for node in out
    ]
    # (storages that several outputs share: ``z, z[1:]`` keep sharing it, uncopied)
    counts = collections.Counter(
        StorageWeakRef(ex.untyped_storage())
        for ex in exs
        if isinstance(ex, torch.Tensor) and ex.layout == torch.strided
    )
    multi, fresh, versions = [], [], []
    remade = {a.output for a in aliases}
    for k, (node, ex) in enumerate(zip(out, exs)):
        if not isinstance(ex, torch.Tensor):
            continue
        strided = ex.layout == torch.strided and not ex.is_inference()
        if k not in remade and strided and ex._version:
            versions.append((k, ex._version))
        if ex.requires_grad and _creation(ex) == _CREATION.MULTI_OUTPUT_NODE:
            multi.append(k)
        elif (
            node not in reads
            and ex.layout == torch.strided
            and ex._base is None
            and counts[StorageWeakRef(ex.untyped_storage())] == 1
        ):
            fresh.append(k)
    enables = any(program_grads(output_requires_grad, aliases))
    return OutputMarks(tuple(multi), tuple(fresh), enables, tuple(versions))


def _view_source(node: torch.fx.Node, position: dict, ex: torch.Tensor) -> int | None:
    """The input that the output ``node`` (example ``ex``) is a view of, followed through the
    graph: the first argument of each view (or in-place op, or the list a ``split`` made; the
    ``out=`` tensor of an out call) back to a placeholder sharing ``ex``'s memory; None where
    the chain ends elsewhere.

    The example values' storages alone do not say which: where Dynamo's example inputs shared
    memory (``f(x, x.view(2, 2))``), every input of that storage matches, and the first one
    was taken for all, keyed nowhere: ``f(a, m)``'s ``m.t()`` was remade as a view of ``a``.
    The input the graph takes the view of is the one for every call."""
    ref = StorageWeakRef(ex.untyped_storage())
    seen = set()
    while isinstance(node, torch.fx.Node) and node not in seen:
        seen.add(node)
        val = _plain(node.meta.get("example_value"))
        if isinstance(val, torch.Tensor):
            if val.layout != torch.strided or StorageWeakRef(val.untyped_storage()) != ref:
                return None
        elif node.op == "placeholder" or not isinstance(val, list | tuple):
            return None
        if node.op == "placeholder":  # (not one whose storage the graph replaces: ``storages``)
            return None if node.meta.get(STORAGE_REPLACED_LATER) else position.get(node)
        if node.op not in ("call_function", "call_method"):
            return None
        out = node.kwargs.get("out")  # (``torch.add(a, 1, out=b)`` is ``b``)
        if not isinstance(out, torch.fx.Node) and not node.args:
            return None
        node = out if isinstance(out, torch.fx.Node) else node.args[0]
    return None


def output_aliases(gm: torch.fx.GraphModule) -> tuple[OutputAlias, ...]:
    """Outputs of a Dynamo graph that are views of its tensor inputs (static layouts only)."""
    storages = {}
    placeholders = gm.graph.find_nodes(op="placeholder")
    position = {node: i for i, node in enumerate(placeholders)}
    for i, node in enumerate(placeholders):
        ex = _plain(node.meta.get("example_value"))
        # (an input whose storage the graph replaces afterwards, ``x.data = y``: its example
        # value shares the storage of ``y``, which is no view of it here)
        if isinstance(ex, torch.Tensor) and not node.meta.get(STORAGE_REPLACED_LATER):
            storages.setdefault(StorageWeakRef(ex.untyped_storage()), i)
    # (a dynamic-shape graph: its size symbols, by the position of the input giving each)
    symbols = {}
    for i, node in enumerate(placeholders):
        ex = _plain(node.meta.get("example_value"))
        if isinstance(ex, torch.SymInt) and isinstance(ex.node.expr, sympy.Symbol):
            symbols.setdefault(ex.node.expr, i)
    out = gm.graph.find_nodes(op="output")[0].args[0]
    out = out if isinstance(out, list | tuple) else (out,)
    # outputs that own their memory, which other outputs may be views of (``y, y[0]``)
    owners: dict = {}
    tracked: dict = {}  # (storage -> whether its owner so far requires grad)
    for k, node in enumerate(out):
        ex = _plain(node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None)
        if isinstance(ex, torch.Tensor) and ex.layout == torch.strided and ex._base is None:
            ref = StorageWeakRef(ex.untyped_storage())
            # (an output that requires grad owns its memory before an untracked one sharing
            # it, ``return y.detach(), y``: ``y`` remade as a view of the detached ``y`` had
            # no history, so it did not require grad and the loss got no gradient)
            if ref in storages or _fresh_in_eager(node):
                continue
            if (
                ex.storage_offset()
                or ex.numel() * ex.element_size() != ex.untyped_storage().nbytes()
            ):
                # (``y[0].detach()``: a new tensor over part of y's memory, which the
                # program's own tensor of it does not hold: ``y.detach()[1]`` is no view of it)
                continue
            if ref not in owners or (ex.requires_grad and not tracked[ref]):
                owners[ref], tracked[ref] = k, ex.requires_grad
    found = []
    for k, node in enumerate(out):
        if isinstance(node, torch.fx.Node) and node in position:
            found.append(OutputAlias(k, position[node]))
            continue
        ex = _plain(node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None)
        if not isinstance(ex, torch.Tensor) or _fresh_in_eager(node):
            continue
        # an in-place op's result is its input itself (``return x.masked_fill_(m, 0)``)
        same = [i for i, p in enumerate(placeholders) if p.meta.get("example_value") is ex]
        if same:
            found.append(OutputAlias(k, same[0]))
            continue
        src = _view_source(node, position, ex)
        if src is None:
            src = storages.get(StorageWeakRef(ex.untyped_storage()))
        size, stride = _static(ex.shape, symbols), _static(ex.stride(), symbols)
        offset = ex.storage_offset()
        if src is not None:
            offset = offset - placeholders[src].meta["example_value"].storage_offset()
        offset = (_static((offset,), symbols) or (None,))[0]
        owner = owners.get(StorageWeakRef(ex.untyped_storage()))
        if src is None and owner not in (None, k) and size is not None and stride is not None:
            base = out[owner].meta["example_value"]
            if ex.requires_grad and not base.requires_grad:
                # (``return y.detach(), y.view(-1)``: a view of the detached output has no
                # history; the view is left a copy of its own, with y's)
                continue
            base_stride = _static(base.stride(), symbols)
            if offset is not None and base_stride is not None and base.dtype == ex.dtype:
                flips = _flips(base, ex)
                used = [e for e in (*size, *stride, offset, *base_stride) if _symbolic(e)]
                free = set().union(*(e.free_symbols for e in used))
                bound = tuple((sym, i) for sym, i in symbols.items() if sym in free)
                grad = "detached" if not ex.requires_grad else _tracking(ex)
                alias = OutputAlias(
                    k,
                    owner,
                    size,
                    stride,
                    offset,
                    bound,
                    grad,
                    of_output=base_stride,
                    detached_view=ex._is_view(),
                )
                found.append(dataclasses.replace(alias, conj=flips[0], neg=flips[1]))
            continue
        # Views that reinterpret the dtype (view_as_real, view(dtype)) are taken of the input
        # reinterpreted (``_reinterpret``); their offset counts the view's elements.
        dtype = None
        if src is not None and placeholders[src].meta["example_value"].dtype != ex.dtype:
            base = placeholders[src].meta["example_value"]
            start = base.storage_offset() * base.element_size()
            if offset is None or _symbolic(offset) or start % ex.element_size():
                continue
            offset, dtype = ex.storage_offset() - start // ex.element_size(), ex.dtype
        if src is not None and size is not None and stride is not None and offset is not None:
            used = {e for e in (*size, *stride, offset) if isinstance(e, sympy.Expr)}
            free = set().union(*(e.free_symbols for e in used))
            bound = tuple((sym, i) for sym, i in symbols.items() if sym in free)
            grad = "detached" if not ex.requires_grad else _tracking(ex)
            conj, neg = _flips(placeholders[src].meta["example_value"], ex)
            alias = OutputAlias(k, src, size, stride, offset, bound, grad, None, conj, neg, dtype)
            found.append(dataclasses.replace(alias, detached_view=ex._is_view()))
    return tuple(found)


@dataclasses.dataclass(frozen=True)
class SharedBase:
    """Outputs ``outputs`` that eager returns as views of one tensor the graph does not return
    (``y = x.exp(); return y[:2], y[1:]``): a write into one shows in the others, and their
    ``_base`` is one tensor. The program returns each as a tensor of its own; ``regenerate``
    copies them into one new tensor and returns views of it with eager's sizes, strides and
    offsets (``views``; ``length`` elements), which autograd follows through the copies (the
    gradient of a shared element reaches the graph through one of them, whose value it is).
    Of a dynamic-shape graph, sizes are sympy expressions of the size symbols (``symbols``:
    each the value of the graph's input at its position)."""

    outputs: tuple[int, ...]
    views: tuple[tuple[tuple, tuple, Any], ...]
    length: Any
    symbols: tuple[tuple[sympy.Symbol, int], ...] = ()
    # the outputs eager made under no_grad (views that require grad through their base and
    # have no history: ``with no_grad(): v = y.view(-1)``): made so too
    untracked: frozenset[int] = frozenset()
    # one output that owns its memory (eager's ``_base`` is None): the new tensor itself, laid
    # out as eager's (``as_strided_``), not a view of it
    owner: bool = False

    def regenerate(self, args, outs: list) -> None:
        values = {s: int(args[i]) for s, i in self.symbols}

        def ints(exprs) -> tuple[int, ...]:
            return tuple(int(sympy.sympify(e).xreplace(values)) for e in exprs)

        views = [
            (ints(size), ints(stride), ints((offset,))[0]) for size, stride, offset in self.views
        ]
        first = outs[self.outputs[0]]
        # (an empty view's extent, offset + 1 - stride, can be below 0: it needs no memory)
        length = max(ints((self.length,))[0], 0)
        base = torch.empty(length, dtype=first.dtype, device=first.device)
        # (the views eager made under no_grad first, without history: an element a tracked
        # view holds takes its gradient from that view's copy, the last one written there;
        # ``with no_grad(): v = y.view(-1)`` copied after ``y[0]`` took y[0]'s gradient)
        order = sorted(zip(self.outputs, views), key=lambda kv: kv[0] not in self.untracked)
        for k, (size, stride, offset) in order:
            with torch.set_grad_enabled(torch.is_grad_enabled() and k not in self.untracked):
                base.as_strided(size, stride, offset).copy_(outs[k])
        # (the copies bumped the version of views eager makes at 0; ``OutputMarks.versions``
        # sets eager's other counts)
        if not base.is_inference():  # (inference tensors have no version)
            torch._C._autograd._unsafe_set_version_counter((base,), (0,))
        if self.owner:
            ((size, stride, offset),) = views
            outs[self.outputs[0]] = base.as_strided_(size, stride, offset)
            return
        for k, (size, stride, offset) in zip(self.outputs, views):
            with torch.set_grad_enabled(torch.is_grad_enabled() and k not in self.untracked):
                outs[k] = base.as_strided(size, stride, offset)


def _views_of_intermediates(gm: torch.fx.GraphModule) -> tuple[dict, dict, dict]:
    """The Dynamo graph's outputs that eager returns as views of a tensor that is not an
    input, grouped by that tensor's storage (``(output, example value)``); the outputs that
    own their memory, by storage (``(output, example value, whether an input's)``); the
    graph's size symbols by the input giving each."""
    inputs = set()
    symbols = {}
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        ex = _plain(node.meta.get("example_value"))
        if isinstance(ex, torch.Tensor) and ex.layout == torch.strided:
            inputs.add(StorageWeakRef(ex.untyped_storage()))
        if isinstance(ex, torch.SymInt) and isinstance(ex.node.expr, sympy.Symbol):
            symbols.setdefault(ex.node.expr, i)
    out = gm.graph.find_nodes(op="output")[0].args[0]
    out = out if isinstance(out, list | tuple) else (out,)
    groups: dict = {}
    owned: dict = {}
    for k, node in enumerate(out):
        ex = _plain(node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None)
        if not isinstance(ex, torch.Tensor) or ex.layout != torch.strided or _fresh_in_eager(node):
            continue
        ref = StorageWeakRef(ex.untyped_storage())
        if ex._base is None:
            owned.setdefault(ref, []).append((k, ex, ref in inputs))
        elif ref not in inputs:
            groups.setdefault(ref, []).append((k, ex))
    return groups, owned, symbols


def lone_views(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """The Dynamo graph's outputs that eager returns as the only view of a tensor that is
    neither an input nor an output (``return x.exp()[1:]``): the program returns a tensor of
    its own, which the user gets as a view of it (``view_as``, no copy), so that it is a view
    as eager's is (``detach_()`` raises eager's error; a write into it shows in the program's
    output, which the backward checks as eager checks the intermediate it saved)."""
    groups, owned, symbols = _views_of_intermediates(gm)
    return tuple(
        members[0][0]
        for ref, members in groups.items()
        if ref not in owned
        and len({k for k, _ in members}) == 1
        and not _strided_alone(members, symbols)
    )


def untracked_views(gm: torch.fx.GraphModule, outputs: Sequence[int]) -> tuple[int, ...]:
    """Those of the Dynamo graph's ``outputs`` that eager makes as views under no_grad (they
    require grad through their base and have no history, ``_tracking``)."""
    out = gm.graph.find_nodes(op="output")[0].args[0]
    out = out if isinstance(out, list | tuple) else (out,)
    found = []
    for k in outputs:
        ex = _plain(out[k].meta.get("example_value"))
        if isinstance(ex, torch.Tensor) and ex.requires_grad and _tracking(ex) != "tracked":
            found.append(k)
    return tuple(found)


def _strided_alone(members: list, symbols: dict) -> bool:
    """Whether ``members`` is one view eager returns with strides or an offset that a dense
    tensor of its own lacks (``(x * 2)[:, 1:]``: strides (4, 1), offset 1; ``y[::2]``), made
    without grad: ``shared_bases`` copies it into a base laid out as eager's (one copy), where
    ``lone_views`` left the program's row-major tensor. (One autograd follows stays a lone
    view: the backward checks writes into it.)"""
    if len({k for k, _ in members}) != 1:
        return False
    ex = members[0][1]
    if ex.requires_grad or ex.is_conj() or ex.is_neg():
        return False
    # (read as sympy expressions of the inputs' size symbols: no guard on an unbacked size,
    # ``x[mask]`` before the view; sizes of other symbols stay a lone view)
    size, stride = _static(ex.shape, symbols), _static(ex.stride(), symbols)
    offset = _static((ex.storage_offset(),), symbols)
    if size is None or stride is None or offset is None or any(st == 0 for st in stride):
        return False
    extent = 1 + sum((n - 1) * st for n, st in zip(size, stride))
    gap = sympy.expand(sympy.sympify(extent) - sympy.Mul(*size))
    return bool(sympy.sympify(offset[0]) != 0 or gap != 0)


def shared_bases(gm: torch.fx.GraphModule) -> tuple[SharedBase, ...]:
    """Groups of the Dynamo graph's outputs that are views of one tensor that is neither an
    input nor an output (layouts given by the graph's size symbols, one dtype, one autograd
    status, no conjugate or negative bits)."""
    groups, owned, symbols = _views_of_intermediates(gm)
    found = []
    for ref, members in groups.items():
        if (
            ref in owned
            or len({k for k, _ in members}) < 2
            and not _strided_alone(members, symbols)
        ):
            continue  # (one output: ``lone_views``)
        exs = [ex for _, ex in members]
        kinds = {(ex.dtype, ex.requires_grad, ex.is_conj(), ex.is_neg()) for ex in exs}
        if len(kinds) > 1 or any(ex.is_conj() or ex.is_neg() for ex in exs):
            continue
        views = []
        for ex in exs:
            size, stride = _static(ex.shape, symbols), _static(ex.stride(), symbols)
            offset = _static((ex.storage_offset(),), symbols)
            views.append((size, stride, offset[0] if offset is not None else None))
        if any(v is None for view in views for v in view):
            continue
        # (eager's base holds at least the elements its views reach)
        extents = [
            offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))
            for size, stride, offset in views
        ]
        length = sympy.Max(*extents) if len(extents) > 1 else extents[0]
        used = {e for view in views for e in (*view[0], *view[1], view[2]) if _symbolic(e)}
        used |= {length} if _symbolic(length) else set()
        free = set().union(*(e.free_symbols for e in used))
        bound = tuple((sym, i) for sym, i in symbols.items() if sym in free)
        untracked = frozenset(
            k for k, ex in members if ex.requires_grad and _tracking(ex) != "tracked"
        )
        outputs = tuple(k for k, _ in members)
        found.append(SharedBase(outputs, tuple(views), length, bound, untracked))
    # Outputs that own memory eager lays out with gaps or an offset (``y.as_strided_((2, 2),
    # (1, 3))`` of an intermediate, ``torch.empty_strided``), not an input's, no other output
    # sharing it, made without grad: one copy into memory laid out as eager's, the output
    # itself (no ``_base``; session 32: row-major). (One autograd follows stays the program's
    # output: the backward checks writes into it, as ``_strided_alone``.)
    for ref, owners in owned.items():
        if len(owners) != 1 or owners[0][2] or ref in groups:
            continue
        k, ex, _ = owners[0]
        if not _strided_alone([(k, ex)], symbols):
            continue
        size, stride = _static(ex.shape, symbols), _static(ex.stride(), symbols)
        (offset,) = _static((ex.storage_offset(),), symbols)
        length = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride))
        used = {e for e in (*size, *stride, offset, length) if _symbolic(e)}
        free = set().union(*(e.free_symbols for e in used))
        bound = tuple((sym, i) for sym, i in symbols.items() if sym in free)
        found.append(SharedBase((k,), ((size, stride, offset),), length, bound, owner=True))
    return tuple(found)
