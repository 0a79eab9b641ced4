"""Bucketing: pad dynamic dimensions to bucket sizes so that many sizes share one program.

``options={"buckets": "pow2"}`` (or a list of sizes) turns it on for a graph. On the graph's
first call, ``Bucketing`` traces the graph with symbolic sizes and runs the padding analysis
(``_padding.py``); the size symbols it proves safe are padded from then on, the others keep
one program per size. Per call, ``bucket`` maps the exact symbol values to the keyed values
(memoized), and ``PaddedEntry`` (``_padded_entry.py``) pads the inputs, runs the bucket's
program and slices the outputs (and in-place updated inputs) back to the real sizes.

Where the analysis needs the real sizes at run time (its ``Fix``es: masked reductions and
attention, ``cat`` along a padded dimension), the symbolic ATen graph is rewritten once
(``_rewrite.py``) and every bucket's program is lowered from it, with the real sizes as extra
0-d int64 inputs; ``PaddedEntry`` appends them to each call.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from torch2xla.guards._key import SignatureKey, _expr, placeholder_label, scalar_key
from torch2xla.guards.bucketing._guards import equalities, guards_hold, one_way_ties
from torch2xla.guards.bucketing._padded_entry import _MEMO_LIMIT, PaddedEntry
from torch2xla.guards.bucketing._padding import Analysis, analyze, linear_in
from torch2xla.guards.bucketing._rewrite import rewrite

NOT_A_SIZE = "it is an int argument, not a tensor's size (each value compiles its own program)"
OVERLAPPING = "inputs may overlap in memory, and padded copies would not share it"
RUNS_EAGER_OPS = (
    "the graph runs ops in eager PyTorch inside it (data-dependent sizes, hooks), which would "
    "see the padded sizes"
)
FOREIGN_SIZE = (
    "the graph takes {}, an int computed from sizes it does not take (a data-dependent size "
    "of the graph it was cut from): its value is a constant of the symbolic trace, and "
    "padding proven exact for one value is not for another (a negative pad crops)"
)
RECORDS_AUTOGRAD = (
    "it enables grad inside (torch.enable_grad, requires_grad_): its calls record autograd "
    "whatever the caller's grad mode, and padded rows would reach the gradients"
)


@dataclasses.dataclass(frozen=True)
class BucketSpec:
    """Bucket sizes: ``"pow2"`` (the next power of two) or a sorted tuple of sizes.

    Sizes above the largest listed bucket are not padded. ``"auto"`` (the default) is
    ``"pow2"`` that the user did not ask for: refusals warn once per graph, not per dimension.
    """

    sizes: tuple[int, ...] | None  # None: powers of two
    auto: bool = False

    @classmethod
    def parse(cls, value: Any) -> BucketSpec | None:
        if value is None or value is False:
            return None
        if value == "auto":
            return cls(None, auto=True)
        if value == "pow2":
            return cls(None)
        if (
            isinstance(value, list | tuple)
            and value
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        ):
            return cls(tuple(sorted(set(value))))
        raise ValueError(
            f"torch2xla: buckets must be 'auto', None, 'pow2' or a non-empty list of positive "
            f"ints, got {value!r}"
        )

    def __call__(self, n: int) -> int:
        if self.sizes is None:
            return 1 << (n - 1).bit_length() if n > 1 else n
        i = bisect.bisect_left(self.sizes, n)
        return self.sizes[i] if i < len(self.sizes) else n

    def __str__(self) -> str:
        if self.auto:
            return "auto (pow2)"
        return "pow2" if self.sizes is None else str(list(self.sizes))


def _sym_eval(expr: sympy.Expr, symbols: dict) -> Any:
    """Evaluate a size expression with SymInts (or ints) in place of its symbols."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return symbols[expr]
    args = [_sym_eval(a, symbols) for a in expr.args]
    name = type(expr).__name__
    if name == "Add":
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if name == "Mul":
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if name == "FloorDiv":
        return args[0] // args[1]
    if name in ("Mod", "PythonMod"):
        return args[0] % args[1]
    if name == "Pow" and expr.args[1].is_Integer and int(expr.args[1]) >= 0:
        return args[0] ** int(expr.args[1])
    raise NotImplementedError(f"size expression {expr} ({name})")


class Bucketing:
    """The bucketing plan of one graph: which size symbols are padded, and how.

    Attributes:
        spec: the bucket sizes.
        safe: indices into ``key.sources`` of the symbols that are padded.
        refused: ``label -> reason`` for the symbols that are not.
    """

    def __init__(self, gm: torch.fx.GraphModule, key: SignatureKey, spec: BucketSpec, args):
        self.gm, self.key, self.spec = gm, key, spec
        self.safe: tuple[int, ...] = ()
        self.refused: dict[str, str] = {}
        self.analysis: Analysis | None = None
        # Key positions whose size is an expression of a padded symbol's (an attention mask
        # one longer than the cache): padded to that expression of its bucket. Position ->
        # (expression, its symbol, the key position of that symbol).
        self.derived: dict[int, tuple[sympy.Expr, Any, int]] = {}
        # Key positions padded to another's bucket plus their real distance from it (a guard
        # orders the two one way): follower -> leader (``one_way_ties``).
        self.ties: dict[int, int] = {}
        # With fixes: the rewritten ATen graph, and the key positions of the real sizes it reads.
        self.masked: torch.fx.GraphModule | None = None
        self.lengths: tuple[int, ...] = ()
        # Python floats that Dynamo passes as 0-d tensors are constants of the trace
        # (``_lower._specialize_scalars``), and the trace reads process state Dynamo does not
        # guard (``SignatureKey.state``): one rewritten graph per tuple of their values.
        self._masked_graphs: dict[tuple, tuple[torch.fx.GraphModule, _Symbolic]] = {}
        # Key positions whose size the symbolic trace made a constant (a guard pinned it): the
        # rewritten graph holds it, so each value of it has a rewritten graph of its own.
        self._specialized: list[int] = []
        self._candidates: set = set()
        self._int_sizes: frozenset[int] = frozenset()
        self._base: dict = {}  # padded symbol -> a key position holding it
        self._length_tensors: dict[tuple, torch.Tensor] = {}
        self._memo: dict[tuple, tuple] = {}
        self._dynamo_guards: list = []
        self._dynamo_ranges: dict = {}
        self._ours: list = []
        self._our_guards: list = []
        self._our_ranges: dict = {}
        if not key.sources:
            return
        if key.aliasing:  # (padding copies each input: writes through shared memory would part)
            self.refused = {s.label: OVERLAPPING for s in key.sources}
            return
        if records_autograd(gm):
            self.refused = {s.label: RECORDS_AUTOGRAD for s in key.sources}
            return
        foreign = _foreign_sizes(key)
        if foreign:
            reason = FOREIGN_SIZE.format(foreign)
            self.refused = {s.label: reason for s in key.sources}
            return
        try:
            sym = _trace_symbolic(gm, key, args)
        except Exception as e:  # noqa: BLE001 -- any trace failure means "cannot prove it safe"
            reason = f"could not trace the graph with symbolic sizes ({type(e).__name__}: {e})"
            self.refused = {s.label: reason for s in key.sources}
            return
        env, ours = sym.env, sym.ours
        self._ours = ours
        self._int_sizes = sym.int_sizes
        candidates: dict = {}
        derived = {}
        sizes = key.size_symbols
        for j, s in enumerate(ours):
            replaced = env.replace(s)
            if key.sources[j].symbol not in sizes and j not in sym.int_sizes:
                self.refused[key.sources[j].label] = NOT_A_SIZE
            elif replaced.is_Symbol:
                candidates.setdefault(replaced, []).append(j)
            elif replaced.free_symbols:
                derived[j] = replaced
            else:
                self.refused[key.sources[j].label] = (
                    "makes this size a constant (its guards pin it)"
                )
                self._specialized.append(j)
        try:
            analysis = analyze(sym.gm, set(candidates), sym.num_lifted, sym.mutations, sym.n_user)
        except Exception as e:  # noqa: BLE001 -- an analysis bug must not break the call
            reason = f"the padding analysis failed ({type(e).__name__}: {e}); please report it"
            self.refused.update(
                {key.sources[j].label: reason for js in candidates.values() for j in js}
            )
            return
        safe = {j for s in analysis.safe for j in candidates[s]}
        for s, reason in analysis.refused.items():
            for j in candidates[s]:
                self.refused[key.sources[j].label] = reason
        for j, e in derived.items():
            free = e.free_symbols
            base = next(iter(free)) if len(free) == 1 else None
            if base in analysis.safe and linear_in(e, base):
                safe.add(j)
                self.derived[j] = (e, base, candidates[base][0])
            else:
                self.refused[key.sources[j].label] = (
                    f"its size is {e} in other sizes, which are not all padded"
                )
        self._base = {s: js[0] for s, js in candidates.items()}
        self.safe = tuple(sorted(safe))
        # Key positions that are one size in the trace and two symbols in Dynamo's (HF's
        # sliding-window cache: its int length and its keys' length) take one padded value.
        for s, (first, *others) in candidates.items():
            lead = key.sources[first].symbol
            for j in others if s in analysis.safe else ():
                self.derived[j] = (lead, lead, first)
        self.analysis = analysis
        if analysis.fixes and self.safe:
            self._candidates = set(candidates)
            try:
                self.masked = rewrite(sym.gm, analysis)
            except Exception as e:  # noqa: BLE001 -- a rewrite bug must not break the call
                self.give_up(f"rewriting the graph failed ({type(e).__name__}: {e})")
                return
            self.lengths = tuple(self._base[s] for s in analysis.lengths)
            self._masked_graphs[self._scalar_values(args)] = (self.masked, sym)
        self._our_syms = [env.replace(s) for s in ours]
        self._our_guards = [env.replace(g.expr) for g in env.guards]
        self._our_ranges = dict(env.var_to_range)
        dynamo_env = _dynamo_shape_env(key)
        if dynamo_env is not None:
            # In canonical symbols: a guard may name a symbol Dynamo later replaced (s1 -> s0).
            self._dynamo_guards = [dynamo_env.replace(g.expr) for g in dynamo_env.guards]
            self._dynamo_ranges = dict(dynamo_env.var_to_range)
            self._derive_from(self._dynamo_guards)

    def _derive_from(self, guards: Sequence[sympy.Expr]) -> None:
        """Pad symbols that Dynamo's guards tie to another padded one (``s1 == s0 + 1``,
        guarded as two inequalities) by that expression of its bucket: padded separately,
        the guard would fail and no call would be padded. Symbols a guard orders one way
        only (``s0 + 1 <= s1``) are tied instead (``self.ties``)."""
        position = {src.symbol: j for j, src in enumerate(self.key.sources) if j in self.safe}
        for eq in equalities(guards):
            free = [s for s in eq.free_symbols if s in position]
            if len(free) != 2 or len(eq.free_symbols) != 2:
                continue
            # Derive the larger of the two, so the other is padded to a bucket size.
            for dep, base in (tuple(free), tuple(reversed(free))):
                j, k = position[dep], position[base]
                if j in self.derived or k in self.derived:
                    continue
                sols = sympy.solve(eq, dep)
                sol = sols[0] if len(sols) == 1 else None
                if (
                    sol is not None
                    and linear_in(sol, base)
                    and sympy.Poly(sol, base).coeff_monomial(1) >= 0
                ):
                    self.derived[j] = (sol, base, k)
                    break
        free = {self.key.sources[j].symbol: j for j in self.safe if j not in self.derived}
        if len(free) == len([j for j in self.safe if j not in self.derived]):
            for dep, lead in one_way_ties(guards, set(free)):
                self.ties[free[dep]] = free[lead]

    def give_up(self, why: str) -> None:
        """Pad nothing from now on (programs already built stay); ``why`` goes to the report."""
        self.refuse(f"{why}; please report it (options {{'buckets': None}} avoids it)")

    def refuse(self, reason: str) -> None:
        """Pad nothing from now on, every padded symbol refused for ``reason``."""
        for j in self.safe:
            self.refused[self.key.sources[j].label] = reason
        self.safe, self.derived, self.masked, self.lengths = (), {}, None, ()
        self.ties = {}

    def traced_for(self, values: tuple) -> bool:
        """Whether the symbolic trace holds for these symbol values: an int argument traced
        as a size was assumed at least 2 (Dynamo, which gives tensor sizes 0 and 1 graphs of
        their own, passes any int to one graph)."""
        return all(values[j] >= 2 for j in self._int_sizes)

    # -- per call ---------------------------------------------------------------------------
    def bucket(self, values: tuple, exact: bool) -> tuple:
        """The keyed symbol values of a call: bucket sizes for safe symbols, unless ``exact``."""
        if exact or not self.safe:
            return values
        out = self._memo.get(values)
        if out is None:
            if len(self._memo) > _MEMO_LIMIT:
                self._memo.clear()
            out = self._memo[values] = self._choose(values)
        return out

    def _choose(self, values: tuple) -> tuple:
        if not self.traced_for(values):
            return values
        if self.analysis is not None and self.analysis.assumptions:
            real = {s: sympy.Integer(v) for s, v in zip(self._our_syms, values) if s.is_Symbol}
            if not all((a.xreplace(real) >= 0) is sympy.true for a in self.analysis.assumptions):
                return values
        buckets = {j: self.spec(values[j]) for j in self.safe}
        if self.ties:
            # A guard orders two padded sizes one way (``kv + 1 <= mask``): the larger keeps
            # its real distance from the other's bucket, for every call (one program per
            # bucket of the leader, not one more where both buckets happen to keep the guard).
            tied = dict(buckets)
            for j, k in self.ties.items():
                tied[j] = buckets[k] + values[j] - values[k]
            tied = self._binding(values, tied)
            if self._holds(tied, values):
                return tied
        padded = self._binding(values, buckets)
        if padded == values or self._holds(padded, values):
            return padded
        # A bucket past the largest size the graph's guards allow (a mask padded out to a
        # static cache of 16: Dynamo's ``16 - s > 0``): that largest size is the last bucket.
        capped = {}
        for j in self.safe:
            vr = self._dynamo_ranges.get(self.key.sources[j].symbol)
            top = vr.upper if vr is not None else None
            bucket = self.spec(values[j])
            if top is not None and top.is_Integer and values[j] <= int(top) < bucket:
                bucket = int(top)
            capped[j] = bucket
        capped = self._binding(values, capped)
        if capped != padded and capped != values and self._holds(capped, values):
            return capped
        return values

    def _binding(self, values: tuple, buckets: dict) -> tuple:
        """``values`` with each safe symbol at its bucket in ``buckets`` (derived ones follow)."""
        padded = list(values)
        for j in self.safe:
            if j not in self.derived:
                padded[j] = buckets[j]
        for j, (e, base, k) in self.derived.items():
            padded[j] = int(e.xreplace({base: sympy.Integer(padded[k])}))
        return tuple(padded)

    def _holds(self, padded: tuple, values: tuple) -> bool:
        """Whether Dynamo's guards and ours hold at the bucket ``padded`` (real ``values``)."""
        dynamo = {s.symbol: v for s, v in zip(self.key.sources, padded)}
        ours = {s: v for s, v in zip(self._our_syms, padded) if s.is_Symbol}
        real = {s.symbol: v for s, v in zip(self.key.sources, values)}
        if not guards_hold(self._dynamo_guards, self._dynamo_ranges, dynamo, real):
            return False
        return guards_hold(self._our_guards, self._our_ranges, ours)

    def make_entry(self, args: Sequence, padded: tuple, build) -> PaddedEntry:
        """Build the program of the bucket ``padded`` (symbol values) from padded ``args``."""
        entry = PaddedEntry(self, None, padded)
        new_args, _ = entry.pad(args, self.key.symbol_values(args))
        if self.masked is None:
            entry.inner = build(new_args)
        else:
            masked, sym = self._masked_graph(args)

            def lowering(args):
                from torch2xla.capture._lower import relower

                return relower(masked, sym.lifted, list(args), sym.mutations, sym.n_user)

            entry.inner = build(new_args, lowering)
        entry.program = getattr(entry.inner, "program", None)
        return entry

    def _scalar_values(self, args: Sequence) -> tuple:
        scalars = tuple(scalar_key(args[i].item()) for i in self.key.scalar_pos)
        sizes = ()
        if self._specialized:
            values = self.key.symbol_values(args)
            sizes = tuple(values[j] for j in self._specialized)
        baked = tuple(_value_key(args[i]) for i in baked_positions(self.key))
        return scalars + tuple(read() for _, read in self.key.state) + sizes + baked

    def _masked_graph(self, args: Sequence) -> tuple[torch.fx.GraphModule, _Symbolic]:
        """The rewritten graph for the Python scalars of ``args``, the process state now and
        the sizes the trace specialized (traced again for new ones)."""
        values = self._scalar_values(args)
        got = self._masked_graphs.get(values)
        if got is not None:
            return got
        sym = _trace_symbolic(self.gm, self.key, args)
        analysis = analyze(sym.gm, self._candidates, sym.num_lifted, sym.mutations, sym.n_user)
        if analysis.safe != self.analysis.safe or analysis.lengths != self.analysis.lengths:
            raise RuntimeError(
                "torch2xla: bucketing bug: the graph pads other sizes for other values of its "
                "Python scalars; please report it (options {'buckets': None} avoids it)"
            )
        got = self._masked_graphs[values] = (rewrite(sym.gm, analysis), sym)
        return got

    @property
    def fixes(self) -> tuple[str, ...]:
        """What the rewritten graph does to keep padded dims exact, one line per fix."""
        if self.masked is None or self.analysis is None:
            return ()
        from torch2xla._errors import source_line

        return tuple(
            f"{f.what} ({f.node.target}, at {source_line(f.node)})" for f in self.analysis.fixes
        )

    def length_tensors(
        self, lengths: tuple[int, ...], values: tuple, device: torch.device
    ) -> list[torch.Tensor]:
        """The real sizes a rewritten program reads (``lengths``: their key positions), as 0-d
        int64 tensors on ``device``."""
        out = []
        for j in lengths:
            key = (device, values[j])
            t = self._length_tensors.get(key)
            if t is None:
                if len(self._length_tensors) > _MEMO_LIMIT:
                    self._length_tensors.clear()
                t = self._length_tensors[key] = torch.tensor(
                    values[j], dtype=torch.int64, device=device
                )
            out.append(t)
        return out


def records_autograd(gm: torch.fx.GraphModule) -> bool:
    """Whether the Dynamo graph records autograd even when called under ``no_grad``: it
    switches grad on (``torch.enable_grad()`` inside), makes a tensor require grad, or returns
    an output that requires grad. Calls that record autograd are never padded (a zero
    cotangent times inf or NaN in a padded row poisons the real rows' gradients), and the
    key's grad mode is the caller's, not the graph's."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and target is torch._C._set_grad_enabled and node.args[0]:
            return True
        if target == "requires_grad_" or target is torch.Tensor.requires_grad_:
            return True
    outputs: list = []
    for out in gm.graph.find_nodes(op="output"):
        torch.fx.node.map_arg(out.args, outputs.append)
    return any(
        isinstance(n.meta.get("example_value"), torch.Tensor)
        and n.meta["example_value"].requires_grad
        for n in outputs
    )


def _dynamo_shape_env(key: SignatureKey):
    for node in key.placeholders:
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.SymInt):
            return ex.node.shape_env
        if isinstance(ex, torch.Tensor):
            for s in ex.shape:
                if isinstance(s, torch.SymInt):
                    return s.node.shape_env
    return None


def _trace_symbolic(gm: torch.fx.GraphModule, key: SignatureKey, args: Sequence):
    """The graph's ATen graph with one fresh size symbol per Dynamo size symbol."""
    from torch._dynamo.source import LocalSource
    from torch._functorch.aot_autograd import aot_export_module
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    from torch2xla.capture._dead import prune_kept
    from torch2xla.capture._lower import decomposition_table, export_scope, prepare
    from torch2xla.capture._rewrites import strip_effect_tokens
    from torch2xla.ops import _arg_checks, _dtype_probes

    env = ShapeEnv(duck_shape=False)
    fake_mode = FakeTensorMode(shape_env=env)
    ours, symbols = [], {}
    sizes = key.size_symbols
    int_sizes = set()
    for j, src in enumerate(key.sources):
        value = src.read(args)
        source = LocalSource(f"torch2xla_{src.symbol}")
        if src.symbol in sizes:
            sym = env.create_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
        elif value >= 2 and _sizes_a_tensor(gm, src.symbol):
            # An int argument that sizes a tensor the graph makes (``arange(n)`` after a graph
            # break: the resumed frame gets the length as an int, no input carries it) is a
            # size like an input's: traced as one (so at least 2), padded where the analysis
            # proves it exact; a call whose value is below 2 runs its exact program.
            sym = env.create_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
            int_sizes.add(j)
        else:  # an int argument: any sign, never padded
            sym = env.create_unspecified_symbol(
                value, source=source, dynamic_dim=DimDynamic.DYNAMIC
            )
        symbols[src.symbol] = env.create_symintnode(sym, hint=value, source=source)
        ours.append(sym)

    def size(s):
        e = _expr(s)
        return int(s) if e is None else _sym_eval(e, symbols)

    fakes = []
    for node, a in zip(key.placeholders, args):
        ex = node.meta.get("example_value")
        if isinstance(a, torch.Tensor):
            shape = [size(s) for s in ex.shape] if isinstance(ex, torch.Tensor) else a.shape
            with fake_mode:
                fakes.append(torch.empty(shape, dtype=a.dtype, device=a.device))
        elif isinstance(ex, torch.SymInt):  # (a stride the key holds as a layout: its value)
            fakes.append(size(ex) if _expr(ex).free_symbols <= symbols.keys() else a)
        else:
            fakes.append(a)
    # (eager's dtype errors, as ``_lower.lower`` marks them: the padded programs are lowered
    # from this graph)
    refused = _dtype_probes.refused_calls(gm)
    gm = prepare(gm, list(args))
    with export_scope() as rejected:
        aten_gm, sig = aot_export_module(
            gm, fakes, trace_joint=False, decompositions=decomposition_table()
        )
    _arg_checks.mark_decomposed(aten_gm, rejected)
    _dtype_probes.mark_calls(aten_gm, refused)
    strip_effect_tokens(aten_gm, len(sig.input_tokens), len(sig.output_tokens))
    prune_kept(aten_gm)
    placeholders = [n.name for n in aten_gm.graph.find_nodes(op="placeholder")]
    index = {name: i for i, name in enumerate(placeholders)}
    buffer_placeholder = {b: p for p, b in sig.inputs_to_buffers.items()}
    num_mutated = len(sig.buffers_to_mutate) + len(sig.user_inputs_to_mutate)
    outputs = aten_gm.graph.find_nodes(op="output")[0].args[0]
    mutations = []
    for out in outputs[:num_mutated]:
        if out.name in sig.user_inputs_to_mutate:
            target = sig.user_inputs_to_mutate[out.name]
        else:
            target = buffer_placeholder[sig.buffers_to_mutate[out.name]]
        mutations.append(index[target])
    named = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers())}
    lifted = tuple(named[n] for n in [*sig.parameters, *sig.buffers])
    return _Symbolic(
        aten_gm,
        env,
        ours,
        len(lifted),
        tuple(mutations),
        len(sig.user_outputs),
        lifted,
        frozenset(int_sizes),
    )


def baked_positions(key: SignatureKey) -> tuple[int, ...]:
    """The inputs whose value (or shape) the symbolic trace holds as a constant: the size
    expressions of a cut graph's piece over sizes it does not take (``s77 - u0``, the unbacked
    ``u0`` of a boolean mask that ran in eager before it), other Python values, and tensors
    Dynamo gave no example of. Their values are keyed (``SignatureKey.value_pos``), so each
    value has a rewritten graph of its own: one traced for another value computed with it
    (``F.pad(y, (0, 0, 0, x.shape[0] - y.shape[0]))`` padded by the first call's amount).
    Inputs the graph does not read (a stride's symbol, keyed by its layout) change nothing."""
    symbols = {s.symbol for s in key.sources}
    out = []
    for i, node in enumerate(key.placeholders):
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.Tensor) or not node.users:
            continue
        e = _expr(ex)
        if e is None or not e.free_symbols <= symbols:
            out.append(i)
    return tuple(out)


def _foreign_sizes(key: SignatureKey) -> str:
    """The inputs (``label = expression``) that are SymInts or SymBools of sizes the graph
    does not take, which the symbolic trace would hold at one value (``baked_positions``)."""
    return ", ".join(
        f"{placeholder_label(key.placeholders[i])} = {ex}"
        for i in baked_positions(key)
        if isinstance(
            ex := key.placeholders[i].meta.get("example_value"), torch.SymInt | torch.SymBool
        )
    )


def _value_key(a) -> tuple:
    if isinstance(a, torch.Tensor):
        return (tuple(a.shape), a.dtype)
    return (type(a), scalar_key(a))


def _sizes_a_tensor(gm: torch.fx.GraphModule, symbol) -> bool:
    """Whether some tensor of the Dynamo graph ``gm`` has a dimension whose size involves
    ``symbol`` (an int argument's: what it sizes is made inside the graph)."""
    for node in gm.graph.nodes:
        ex = node.meta.get("example_value")
        if isinstance(ex, torch.Tensor) and any(
            (e := _expr(n)) is not None and symbol in e.free_symbols for n in ex.shape
        ):
            return True
    return False


@dataclasses.dataclass
class _Symbolic:
    """The graph's ATen graph with symbolic sizes and how its inputs and outputs map."""

    gm: torch.fx.GraphModule
    env: Any  # the ShapeEnv
    ours: list  # one fresh symbol per key source
    num_lifted: int
    mutations: tuple[int, ...]
    n_user: int
    lifted: tuple[torch.Tensor, ...]
    int_sizes: frozenset[int] = frozenset()  # key positions of int arguments traced as sizes
