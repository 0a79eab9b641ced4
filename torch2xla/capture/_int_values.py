"""Int arguments that a graph uses only as values, passed to its programs as 0-d int64 tensors.

Dynamo hands a changing Python int (HF's sliding-window cache length, ``cumulative_length_int``,
one more every token) to the graph as a SymInt input. Lowered as it is, every value is a
constant of its program, so every value compiled a program of its own. Where the graph uses the
int only as a value (arithmetic on it, then an operand of elementwise ops on tensors, or a
number it returns), the values share one program: the graph is rewritten to take a 0-d int64
tensor there instead, its int arithmetic becomes arithmetic on that tensor, and each call passes
the int as such a tensor (``IntValues.tensors``).

An int input stays an int (one program per value, as before, unless bucketing pads it as a
size: ``guards/bucketing/_bucket.py``) where its symbol sizes a tensor anywhere in the graph (a shape, a slice bound, an ``arange`` length) or where it reaches any op
outside the few whose results are proven the same for an int and for a 0-d int64 tensor: the
rewritten node's fake result must have the original's dtype, shape and device, and no 0-d
integer tensor (whose dtype a 0-d int64 tensor would widen) takes part. ``IntValues.kept`` says
why, per input, for the recompile warning (``guards/_graph.py``). An int in the storage offsets of views
only (``x[pos]``, ``cache[:, pos:pos + 1] = k``) is taken as a tensor too, those views and
writes rewritten to gather and scatter at it (``_int_offsets.py`` says when).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence

import torch
from torch.fx.node import map_aggregate

from torch2xla._errors import op_name, source_line
from torch2xla.capture import _int_offsets

_MEMO_LIMIT = 4096

# Int arithmetic (SymInt in, SymInt out): the same operator on 0-d int64 tensors computes the
# same value (``//`` and ``%`` on integer tensors round as Python's do).
_INT_OPS = frozenset(
    {
        operator.add,
        operator.sub,
        operator.mul,
        operator.floordiv,
        operator.mod,
        operator.neg,
        operator.pos,
        operator.abs,
    }
)
# SymInt max/min -> their tensor forms (``_Plan._tensor_form``).
_MAX_MIN = {
    torch.sym_max: (torch.maximum, torch.clamp_min),
    torch.sym_min: (torch.minimum, torch.clamp_max),
}

# Ops on tensors whose int operand may be a 0-d int64 tensor instead: elementwise arithmetic and
# comparisons, where torch promotes a 0-d tensor as it does a Python int beside a tensor that
# has dims (its dtype only counts against a 0-d operand, refused below).
_BINARY = ("add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder")
_COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
_VALUE_FUNCTIONS = frozenset(
    {
        operator.add,
        operator.sub,
        operator.mul,
        operator.truediv,
        operator.floordiv,
        operator.mod,
        operator.lt,
        operator.le,
        operator.gt,
        operator.ge,
        operator.eq,
        operator.ne,
        *(getattr(torch, name) for name in (*_BINARY, *_COMPARE)),
    }
)
_VALUE_METHODS = frozenset({*_BINARY, *_COMPARE})
_HALF = frozenset({torch.float16, torch.bfloat16, torch.complex32})


@dataclasses.dataclass
class IntValues:
    """The int inputs of one graph that its programs take as 0-d int64 tensors.

    Attributes:
        positions: the placeholders (by position) rewritten to take a 0-d int64 tensor.
        device: where those tensors are made (the graph's first tensor input's device).
        kept: per int input still taken as an int (by its label), why.
    """

    positions: tuple[int, ...]
    device: torch.device
    kept: dict[str, str]
    _tensors: dict = dataclasses.field(default_factory=dict)

    def tensors(self, args: Sequence) -> list:
        """``args`` with the ints at ``positions`` as 0-d int64 tensors (one tensor per input and
        value, made once: never written, they are reused)."""
        args = list(args)
        cache = self._tensors
        for i in self.positions:
            value = args[i]
            t = cache.get((i, value))
            if t is None:
                if len(cache) > _MEMO_LIMIT:
                    cache.clear()
                t = torch.scalar_tensor(value, dtype=torch.int64, device=self.device)
                if isinstance(value, int):
                    cache[(i, value)] = t
            args[i] = t
        return args


def _symbols(value, offsets: bool | None = True) -> set:
    """The free symbols of the sizes, strides and (``offsets``; None: only) offsets of the
    tensors in ``value`` (also in the shape environment's canonical form: a symbol Dynamo
    replaced by another)."""
    out: set = set()

    def add(v):
        if isinstance(v, torch.Tensor):
            strided = v.layout == torch.strided
            numbers = () if offsets is None else (*v.shape, *(v.stride() if strided else ()))
            if offsets is not False and strided:
                numbers = (*numbers, v.storage_offset())
            for n in numbers:
                if isinstance(n, torch.SymInt):
                    expr = n.node.expr
                    out.update(expr.free_symbols, n.node.shape_env.replace(expr).free_symbols)
        return v

    map_aggregate(value, add) if isinstance(value, list | tuple | dict) else add(value)
    return out


def graph_fake_mode(gm: torch.fx.GraphModule):
    """The fake mode of ``gm``'s example values (None where it has none)."""
    from torch._subclasses.fake_tensor import FakeTensor

    for node in gm.graph.nodes:
        ex = node.meta.get("example_value")
        if isinstance(ex, FakeTensor):
            return ex.fake_mode
    return None


def _fake_mode(gm: torch.fx.GraphModule):
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    return graph_fake_mode(gm) or detect_fake_mode() or FakeTensorMode()


def _device(gm: torch.fx.GraphModule) -> torch.device:
    for node in gm.graph.find_nodes(op="placeholder"):
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.Tensor):
            return ex.device
    return torch.device("cpu")


def _label(node: torch.fx.Node) -> str:
    from torch2xla.guards._key import placeholder_label

    return placeholder_label(node)


def _where(node: torch.fx.Node) -> str:
    line = source_line(node)
    return f"{op_name(node)}" + ("" if line.startswith("<") else f", at {line}")


def _made_of(node: torch.fx.Node, views: set) -> bool:
    """Whether ``node`` takes a tensor input that is one of ``views`` or made of one (recorded
    in ``views``: the views of a rewritten read are views of its copy)."""
    if any(n in views for n in node.all_input_nodes):
        views.add(node)
        return True
    return False


def _same(a, b) -> bool:
    """Whether two fake results have the same dtype, device, and shape (the same expressions)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.dtype != b.dtype or a.device != b.device or a.ndim != b.ndim:
        return False
    exprs = lambda t: [n.node.expr if isinstance(n, torch.SymInt) else n for n in t.shape]
    return exprs(a) == exprs(b)


class _Plan:
    """The rewrite of one set of int inputs, checked on fake values before the graph changes."""

    def __init__(self, gm: torch.fx.GraphModule, inputs) -> None:
        self.fake = _fake_mode(gm)
        self.device = _device(gm)
        with self.fake:  # (one each: inputs with one fake value would seem to share memory)
            zeros = [torch.empty((), dtype=torch.int64, device=self.device) for _ in inputs]
        # node -> its new fake value (the inputs, and int arithmetic now on 0-d tensors)
        self.values: dict[torch.fx.Node, torch.Tensor] = dict(zip(inputs, zeros))
        # node -> the inputs it derives from
        self.origin: dict[torch.fx.Node, set] = {p: {p} for p in inputs}
        # int arithmetic node -> its tensor form (target, args)
        self.calls: dict[torch.fx.Node, tuple] = {}
        self.refused: dict[torch.fx.Node, str] = {}  # input -> why it stays an int
        # views and writes at a position the inputs give, rewritten (``_int_offsets``)
        self.positions: dict[torch.fx.Node, _int_offsets.Position] = {}
        for node in gm.graph.nodes:
            ins = [n for n in node.all_input_nodes if n in self.values]
            if not ins or node.op in ("output", "placeholder"):
                continue
            why = self._check(node)
            origin = set().union(*(self.origin[n] for n in ins))
            if why is None:
                if node in self.values:
                    self.origin[node] = origin
                continue
            for p in origin:
                self.refused.setdefault(p, why)
        self._check_offsets(gm)

    def _check_offsets(self, gm: torch.fx.GraphModule) -> None:
        """Refuse the inputs in whose storage offsets a node that is not one of the rewritten
        reads (or a view made of one) is, and those of rewritten reads that a graph output is
        made of without a copy or that are followed by an in-place write (the copy would not
        see it, the view would)."""
        symbols = {}
        for p in self.origin:
            if p.op == "placeholder":
                expr = p.meta["example_value"].node.expr
                symbols[expr] = p
                symbols[p.meta["example_value"].node.shape_env.replace(expr)] = p
        reads = {n for n, pos in self.positions.items() if not pos.write}
        nodes = list(gm.graph.nodes)
        last_write = max(
            (i for i, n in enumerate(nodes) if _int_offsets.writes(n) and n not in self.positions),
            default=-1,
        )
        outputs = set(nodes[-1].all_input_nodes)
        views = set(reads)  # the rewritten reads and the views made of them
        for i, node in enumerate(nodes):
            if node.op in ("output", "placeholder"):
                continue
            found = _symbols(node.meta.get("example_value"), offsets=None) & symbols.keys()
            if not found and node not in reads:
                continue
            origin = {symbols[s] for s in found}
            if node in reads:
                origin |= self.origin[self.positions[node].start]
            why = None
            if node not in reads and not _made_of(node, views):
                why = f"it is the storage offset of {_where(node)}"
            elif node in outputs:
                why = f"a view at its position is returned ({_where(node)})"
            elif i < last_write:
                why = f"a view at its position is read before an in-place write ({_where(node)})"
            if why is not None:
                for p in origin:
                    self.refused.setdefault(p, why)

    def _load(self, a):
        if isinstance(a, torch.fx.Node):
            return self.values.get(a, a.meta.get("example_value"))
        return a

    def _run(self, node: torch.fx.Node, target, args: tuple):
        args = map_aggregate(args, self._load)
        kwargs = map_aggregate(node.kwargs, self._load)
        with self.fake:
            if node.op == "call_method":
                return getattr(args[0], target)(*args[1:], **kwargs)
            return target(*args, **kwargs)

    def _check(self, node: torch.fx.Node) -> str | None:
        """None where ``node`` computes the same with its int operands as 0-d int64 tensors
        (recording the new value of int arithmetic), else why not."""
        example = node.meta.get("example_value")
        where = _where(node)
        pos = _int_offsets.position(node, self.values)
        if pos is not None:
            why, _ = _int_offsets.check(pos, self._load, self.fake)
            if why is not None:
                return f"{why} ({where})"
            self.positions[node] = pos
            return None
        direct = {a for a in (*node.args, *node.kwargs.values()) if isinstance(a, torch.fx.Node)}
        if any(n in self.values and n not in direct for n in node.all_input_nodes):
            return f"it is part of an argument of {where}"
        if isinstance(example, torch.SymInt):
            if node.op != "call_function" or not (
                node.target in _INT_OPS or node.target in _MAX_MIN
            ):
                return f"it is an argument of {where}"
            target, args = self._tensor_form(node)
            try:
                value = self._run(node, target, args)
            except Exception as e:  # noqa: BLE001 -- any failure keeps the int
                return f"{where} does not take it as a tensor ({type(e).__name__})"
            if not (
                isinstance(value, torch.Tensor) and value.ndim == 0 and value.dtype == torch.int64
            ):
                return f"{where} computes otherwise on a tensor"
            self.values[node] = value
            self.calls[node] = (target, args)
            return None
        if isinstance(example, torch.SymBool | torch.SymFloat | bool | float):
            kind = "compared" if isinstance(example, torch.SymBool | bool) else "made a float"
            return f"it is {kind} ({where})"
        allowed = (node.op == "call_function" and node.target in _VALUE_FUNCTIONS) or (
            node.op == "call_method" and node.target in _VALUE_METHODS
        )
        if not allowed or not isinstance(example, torch.Tensor):
            return f"it is an argument of {where}"
        from torch2xla.capture._float_values import _composite_part

        if _composite_part(node):  # (its number is eager's Scalar, converted with a check)
            return f"it is the value of an addcdiv or addcmul ({where}: Dynamo split it)"
        for a in direct - self.values.keys():
            ex = a.meta.get("example_value")
            if (
                isinstance(ex, torch.Tensor)
                and ex.ndim == 0
                and not (ex.is_floating_point() or ex.is_complex())
                and ex.dtype not in (torch.bool, torch.int64)
            ):
                return f"it meets a 0-d {ex.dtype} tensor in {where}"
            if isinstance(ex, torch.Tensor) and ex.dtype in _HALF:
                # (eager computes a Python int with a half-precision tensor in float32, where
                # it neither rounds nor overflows; a 0-d int64 tensor is cast to the half type)
                return f"it meets a {ex.dtype} tensor in {where}"
        try:
            value = self._run(node, node.target, node.args)
        except Exception as e:  # noqa: BLE001 -- any failure keeps the int
            return f"{where} does not take it as a tensor ({type(e).__name__})"
        if not _same(value, example):
            return f"{where} gives another result for it as a tensor"
        return None

    def _tensor_form(self, node: torch.fx.Node) -> tuple:
        """(target, args) of int arithmetic on 0-d tensors: the same operator, or for a
        SymInt max/min, ``maximum``/``minimum`` of two tensors or a clamp of one by a number."""
        pair = _MAX_MIN.get(node.target)
        if pair is None:
            return node.target, node.args
        both, clamp = pair
        a, b = node.args
        if a in self.values and b in self.values:
            return both, (a, b)
        return clamp, (a, b) if a in self.values else (b, a)


def int_values(gm: torch.fx.GraphModule) -> IntValues | None:
    """Rewrite ``gm`` (in place) to take 0-d int64 tensors for the int inputs it uses only as
    values; None where it has no int input. Call before anything reads ``gm``'s metadata: the
    rewritten nodes' example values become their tensor forms'."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    ints = {}
    for i, p in enumerate(placeholders):
        ex = p.meta.get("example_value")
        # (a symbol Dynamo replaced by an expression of others, or a constant, stays an int)
        if isinstance(ex, torch.SymInt) and ex.node.shape_env.replace(ex.node.expr).is_Symbol:
            ints[p] = i
    if not ints:
        return None
    kept: dict[str, str] = {}
    sized: dict = {}  # symbol -> the first node whose tensor it sizes
    for node in gm.graph.nodes:
        if node.op != "output":  # (offsets: only views at a position, ``_check_offsets``)
            for s in _symbols(node.meta.get("example_value"), offsets=False):
                sized.setdefault(s, node)
    for p in list(ints):
        ex = p.meta["example_value"]
        n = sized.get(ex.node.expr) or sized.get(ex.node.shape_env.replace(ex.node.expr))
        if n is not None:
            if n.op != "placeholder":  # (an input's size is no int argument: not reported)
                kept[_label(p)] = f"it sizes a tensor ({_where(n)})"
            del ints[p]
    plan = None
    while ints:
        plan = _Plan(gm, ints)
        if not plan.refused:
            break
        for p, why in plan.refused.items():
            kept[_label(p)] = why
            del ints[p]
    if not ints:
        return IntValues((), _device(gm), kept)
    for node, value in plan.values.items():
        node.meta["example_value"] = value
    for node, (target, args) in plan.calls.items():
        node.target, node.args = target, args
    for pos in plan.positions.values():
        _int_offsets.rewrite(gm, pos, plan.fake)
    gm.graph.lint()
    gm.recompile()
    return IntValues(tuple(sorted(ints.values())), plan.device, kept)
