"""jax.vjp <-> torch.autograd.Function.

The forward runs ``jax.vjp`` inside ``jax.jit``: it returns the outputs and ``vjp_fn``, a
``jax.tree_util.Partial`` whose leaves are the residuals (JAX arrays). The backward hands the
cotangents to a second jitted function that applies ``vjp_fn``. JAX derives the backward from
the forward lowerings, so no backward lowerings are needed.

Eager autograd semantics kept here:

- Residuals are freed when the backward has run (unless ``retain_graph=True``), as eager frees
  saved tensors; a second backward through a freed graph raises eager's error.
- An input gets no gradient (None, not zeros) when none of the outputs that received a
  cotangent depends on it differentiably, as eager leaves ``.grad`` of such a parameter None.
- Outputs eager would not track (integer, ``.detach()``, argmax) are non-differentiable.
- Double backward works: with ``create_graph=True`` the backward runs the program's vjp as a
  differentiable program of its own (``_VjpProgram``, recomputing from the inputs), so its
  gradients can be differentiated again, to any order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np
import torch

from torch2xla import _residuals
from torch2xla._interop import jax_dtype, no_stack_capture, to_jax, torch_dtype, x64
from torch2xla._profile import profiled_backward

# NOTE: torch exposes whether the running backward keeps the graph (retain_graph) only through
# this private hook, which AOTAutograd uses for the same purpose. Without it we keep the
# residuals until the autograd graph dies, which is correct but holds memory longer.
_keep_graph: Callable[[], bool] = getattr(
    torch._C._autograd, "_get_current_graph_task_keep_graph", lambda: True
)


@dataclasses.dataclass
class TrainFns:
    """The jitted functions of one program differentiated with respect to ``diff_in``.

    Attributes:
        fwd: ``(seed, diff, rest) -> (diff_outs, aux_outs, residuals)`` (``_residuals.Forward``:
            the residuals are a ``Residuals`` pytree, the computed arrays plus the inputs the
            backward needs, which are not copied).
        bwd: ``(residuals, cotangents, donate=False) -> input gradients`` (one per
            ``diff_in``); ``donate=True`` when the graph is freed by this backward: the
            computed residuals are given to the program (``_residuals.Backward``).
        aux_out: positions of the outputs that are not differentiated.
        deps: per differentiated output, the positions in ``diff_in`` that its gradient reaches
            (found from the backward's jaxpr at the first backward; None until then).
        plan: what ``XlaFunction`` decided once for these functions (``_Plan``; None until
            their first call).
    """

    fwd: Callable
    bwd: Callable
    aux_out: tuple[int, ...]
    deps: tuple[frozenset[int], ...] | None = None
    plan: Any = None

    def __iter__(self):
        """Unpacks as ``fwd, bwd, aux_out``."""
        return iter((self.fwd, self.bwd, self.aux_out))

    def saved_positions(self) -> tuple[int, ...] | None:
        """The positions among the program's inputs whose values the backward reads (None
        until the forward was traced): saving those tensors on the autograd node makes an
        in-place change before the backward raise eager's error."""
        layout = getattr(self.fwd, "layout", None)
        if layout is None:
            return None
        return tuple(k for k in layout.input_pos if k >= 0)

    def saved_inputs(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The tensors among ``tensors`` (the program's inputs) whose values the backward reads
        (known after the forward's first call)."""
        return tuple(tensors[k] for k in self.saved_positions() or ())


def build_train_fns(
    flat_fn: Callable,
    num_inputs: int,
    diff_in: tuple[int, ...],
    diff_out: tuple[int, ...],
    num_outputs: int,
    recompute_layout: bool = True,
    compiler_options: dict | None = None,
    auto_layouts: bool = True,
    pack_limit: int | None = None,
    split: Callable[[int], int | None] | None = None,
    device: jax.Device | None = None,
) -> TrainFns:
    """``TrainFns`` for ``flat_fn(seed, *inputs) -> outputs`` differentiated with respect to the
    inputs ``diff_in`` and the outputs ``diff_out``.

    With ``recompute_layout`` the backward recomputes layout copies (transposes, reshapes,
    broadcasts) instead of keeping them (``_residuals.saveable``). Pass False for a function
    that checkpoints its own segments (remat): an outer ``jax.checkpoint`` policy would
    override theirs and keep what they recompute. ``compiler_options`` go to XLA with both
    programs; with ``auto_layouts`` XLA chooses the computed residuals' layouts. Gradients of
    at most ``pack_limit`` bytes reach torch packed (``_pack``; None: none are). ``split`` maps
    the residuals' bytes to the bytes per segment of a split backward (``_split``; None, or it
    returning None: one program). ``device``: where the programs run, for the persistent cache
    (None: they are not stored).
    """
    diff_set, out_set = frozenset(diff_in), frozenset(diff_out)
    aux_out = tuple(i for i in range(num_outputs) if i not in out_set)

    def vjp(seed, diff, rest):
        def f(*d):
            di, ri = iter(d), iter(rest)
            full = [next(di) if k in diff_set else next(ri) for k in range(num_inputs)]
            outs = flat_fn(seed, *full)
            return [outs[i] for i in diff_out], [outs[i] for i in aux_out]

        g = _residuals.differentiated(f) if recompute_layout else f
        douts, vjp_fn, aux = jax.vjp(g, *diff, has_aux=True)
        return douts, aux, vjp_fn

    forward = _residuals.Forward(vjp, diff_in, num_inputs, compiler_options, auto_layouts, device)
    return TrainFns(forward, _residuals.Backward(forward, pack_limit, split), aux_out)


def _apply_vjp(res, cts):
    return _residuals.apply_vjp(res, cts)


# A tensor saved on every node, only so that autograd tells us (by raising eager's error on
# ``ctx.saved_tensors``) when a backward runs through a graph whose buffers were freed.
_FREED_MARKER = torch.empty(0)

_functorch_active: Callable[[], bool] = torch._C._are_functorch_transforms_active


class _Plan:
    """What ``XlaFunction`` decides once per program and set of differentiated inputs, so that
    a training step does only the work that depends on its values.

    Known from the start: where the differentiated and the other inputs and outputs are. Known
    after the first forward (the program's signature is fixed, so they never change): which
    inputs the backward reads (saved on the autograd node), the cotangents' shapes and dtypes,
    and whether cotangents and gradients need the complex or empty-tensor handling. After the
    first backward: which inputs the cotangents reach when all of them are present.
    """

    __slots__ = (
        "conj_grads",
        "convert",
        "dense_out",
        "diff_in",
        "diff_meta",
        "diff_out",
        "fns",
        "live_slots",
        "n_inputs",
        "plain_cts",
        "program",
        "rest_in",
        "saved_pos",
        "scoped",
    )

    def __init__(self, program, fns: TrainFns, diff_in: tuple[int, ...]) -> None:
        n = len(program.tensor_pos)
        diff_set = frozenset(diff_in)
        self.program, self.fns, self.diff_in, self.n_inputs = program, fns, diff_in, n
        # None: every input is differentiated, in order (the views are passed as they are)
        self.rest_in = None if len(diff_in) == n else tuple(k for k in range(n) if k not in diff_set)
        self.diff_out = program.diff_out
        # Every output is differentiated, in order: no reordering, nothing to mark.
        self.dense_out = program.diff_out == tuple(range(program.num_outputs))
        self.scoped = program.scoped
        self.convert = program.to_torch
        self.saved_pos: tuple[int, ...] | None = None
        self.diff_meta: tuple | None = None
        self.plain_cts = False  # no complex or empty cotangent (set after the first forward)
        self.conj_grads = True  # some gradient is complex (set after the first forward)
        self.live_slots: tuple[tuple[int, int], ...] | None = None

    @classmethod
    def of(cls, program, diff_in: tuple[int, ...]) -> _Plan:
        fns = program.train_fns(diff_in)
        plan = fns.plan
        if plan is None or plan.program is not program:
            plan = fns.plan = cls(program, fns, diff_in)
        return plan

    def learn(self, douts: Sequence, tensors: Sequence[torch.Tensor]) -> None:
        """Record what the first forward call shows (see the class docstring)."""
        meta = tuple((tuple(o.shape), np.dtype(o.dtype)) for o in douts)
        self.plain_cts = all(d.kind != "c" and all(shape) for shape, d in meta)
        self.conj_grads = any(tensors[k].is_complex() for k in self.diff_in)
        self.diff_meta = meta

    def dense_slots(self) -> tuple[tuple[int, int], ...]:
        """``(position in diff_in, input position)`` of the gradients that the cotangents reach
        when all of them are present (after the first backward)."""
        if self.live_slots is None:
            live = frozenset().union(*self.fns.deps)
            self.live_slots = tuple((p, k) for p, k in enumerate(self.diff_in) if p in live)
        return self.live_slots


def apply_differentiable(program, diff_in: tuple[int, ...], seed, tensors: Sequence) -> tuple:
    """``program``'s outputs for ``tensors``, tracked by autograd with respect to the inputs
    ``diff_in`` (``XlaFunction``)."""
    plan = _Plan.of(program, diff_in)
    if _functorch_active():
        return XlaFunction.apply(plan, seed, *tensors)
    # NOTE: ``Function.apply`` only adds, outside functorch transforms, an unwrapping of dead
    # functorch wrappers (none exist outside a transform) before calling this, its base.
    return _apply(plan, seed, *tensors)


class XlaFunction(torch.autograd.Function):
    """Runs an ``XlaProgram`` differentiably: ``apply(plan, seed, *tensors)``
    (``apply_differentiable`` makes the plan)."""

    @staticmethod
    def forward(ctx, plan: _Plan, seed, *tensors):
        if plan.scoped:  # JAX's config contexts, where they change something (XlaProgram)
            with x64(), plan.program.placement():
                douts, aux, vjp_fn = _forward(plan, seed, tensors)
        else:
            douts, aux, vjp_fn = _forward(plan, seed, tensors)
        if plan.diff_meta is None:
            plan.learn(douts, tensors)
        convert = plan.convert
        if plan.dense_out:
            outs = tuple([convert(o) for o in douts])
        else:
            full: list = [None] * plan.program.num_outputs
            for i, o in zip(plan.diff_out, douts):
                full[i] = convert(o)
            aux_out = plan.fns.aux_out
            for i, o in zip(aux_out, aux):
                full[i] = convert(o)
            if aux_out:
                ctx.mark_non_differentiable(*(full[i] for i in aux_out))
            outs = tuple(full)
        # Unused outputs get None, not zeros: an input reached only through them gets no grad.
        ctx.set_materialize_grads(False)
        saved = plan.saved_pos
        if saved is None:
            saved = plan.saved_pos = plan.fns.saved_positions()
        if saved:
            ctx.save_for_backward(_FREED_MARKER, *[tensors[k] for k in saved])
        else:
            ctx.save_for_backward(_FREED_MARKER)
        ctx.plan, ctx.fns, ctx.diff_meta = plan, plan.fns, plan.diff_meta
        ctx.vjp_fn = vjp_fn
        # For a create_graph backward only (it recomputes from them); no copy is made.
        ctx.inputs, ctx.seed = tensors, seed
        return outs

    @staticmethod
    @profiled_backward
    def backward(ctx, *grads):
        if ctx.fns.deps is None:  # the first backward traces and compiles (see no_stack_capture)
            with no_stack_capture():
                return _backward(ctx, grads)
        return _backward(ctx, grads)


_apply = super(torch.autograd.Function, XlaFunction).apply


def _forward(plan: _Plan, seed, tensors: Sequence):
    views = plan.program.jax_inputs(tensors)  # parameters imported once, not every step
    rest_in = plan.rest_in
    if rest_in is None:
        return plan.fns.fwd(seed, views, [])
    return plan.fns.fwd(seed, [views[k] for k in plan.diff_in], [views[k] for k in rest_in])


def _backward(ctx, grads: tuple) -> tuple:
    ctx.saved_tensors  # noqa: B018  (raises eager's error when the graph was freed)
    plan = ctx.plan
    vjp_fn, inputs = ctx.vjp_fn, ctx.inputs
    freed = not _keep_graph()
    if freed:
        ctx.vjp_fn = ctx.inputs = None  # free the residuals now, as eager frees saved tensors
    fns = plan.fns
    diff_grads = grads if plan.dense_out else [grads[i] for i in plan.diff_out]
    active = [j for j, g in enumerate(diff_grads) if g is not None]
    if not active:
        return (None, None, *([None] * plan.n_inputs))
    if torch.is_grad_enabled():  # create_graph=True: differentiable gradients
        return _differentiable_backward(ctx, plan, vjp_fn, inputs, diff_grads, active)
    # (grad mode is off from here)
    dense = len(active) == len(diff_grads)
    with x64(), plan.program.placement():
        if dense and plan.plain_cts:  # the common case: every cotangent, real and non-empty
            cts = [to_jax(g) for g in diff_grads]
        else:
            cts = [
                jax.numpy.zeros(shape, dtype) if g is None else _cotangent(g, dtype)
                for g, (shape, dtype) in zip(diff_grads, plan.diff_meta)
            ]
        if fns.deps is None:
            fns.deps = _dependencies(vjp_fn, cts)
        in_grads = fns.bwd(vjp_fn, cts, donate=freed)
    packing = fns.bwd.packing
    if packing is not None:  # small gradients: torch views of one buffer (converted below)
        in_grads = packing.unpack(in_grads, plan.convert)
    if dense:
        slots = plan.dense_slots()
    else:
        live = frozenset().union(*(fns.deps[j] for j in active))
        slots = tuple((p, k) for p, k in enumerate(plan.diff_in) if p in live)
    convert = plan.convert
    result: list = [None] * (2 + plan.n_inputs)  # (no gradient for plan and seed)
    if packing is not None:
        convert = _converting(convert)
    if plan.conj_grads:
        for p, k in slots:
            result[2 + k] = _from_cotangent(convert(in_grads[p]))
    else:
        for p, k in slots:
            result[2 + k] = convert(in_grads[p])
    return tuple(result)


def _converting(convert: Callable) -> Callable:
    """``convert`` for a mix of JAX arrays and torch tensors (unpacked gradients)."""
    return lambda g: g if isinstance(g, torch.Tensor) else convert(g)


def _differentiable_backward(ctx, plan: _Plan, vjp_fn, inputs, diff_grads, active) -> tuple:
    """A create_graph backward: gradients that autograd tracks (``_differentiable_vjp``)."""
    fns = plan.fns
    if fns.deps is None:
        with torch.no_grad(), x64(), plan.program.placement():
            cts = [jax.numpy.zeros(shape, dtype) for shape, dtype in plan.diff_meta]
            fns.deps = _dependencies(vjp_fn, cts)
    live = frozenset().union(*(fns.deps[j] for j in active))
    in_grads = _differentiable_vjp(plan, ctx.seed, inputs, diff_grads)
    result: list = [None] * (2 + plan.n_inputs)
    for p, (k, g) in enumerate(zip(plan.diff_in, in_grads)):
        if p in live:
            result[2 + k] = g
    return tuple(result)


def _differentiable_vjp(plan: _Plan, seed, inputs: Sequence[torch.Tensor], diff_grads: Sequence) -> tuple:
    """The input gradients of a create_graph backward, tracked by autograd: the program's vjp
    run as a program of its own, differentiable in the inputs and the cotangents."""
    program, diff_in = plan.program, plan.diff_in
    vjp_program = _VjpProgram.of(program, diff_in)
    cts = [
        torch.zeros(shape, dtype=torch_dtype(dtype), device=inputs[0].device) if g is None else g
        for g, (shape, dtype) in zip(diff_grads, plan.diff_meta)
    ]
    tensors = (*inputs, *cts)
    diff = tuple(k for k, t in enumerate(tensors) if t.requires_grad)
    if not diff:
        with torch.no_grad():
            return tuple(vjp_program.call_untracked(seed, tensors))
    return apply_differentiable(vjp_program, diff, seed, tensors)


class _VjpProgram:
    """``(*inputs, *cotangents) -> input gradients`` of a program differentiated with respect
    to ``diff_in``, in torch's gradient convention, with the interface ``XlaFunction`` runs (so
    it can be differentiated again). The forward is recomputed from the inputs."""

    scoped = True  # its calls run inside JAX's config contexts (x64, placement)

    def __init__(self, program, diff_in: tuple[int, ...]) -> None:
        n = len(program.tensor_pos)
        flat_fn, diff_out = program.train_flat_fn(), program.diff_out
        diff_set = frozenset(diff_in)

        def vjp_flat_fn(seed, *tensors):
            inputs, cts = tensors[:n], tensors[n:]

            def f(*d):
                di = iter(d)
                full = [next(di) if k in diff_set else inputs[k] for k in range(n)]
                outs = flat_fn(seed, *full)
                return [outs[i] for i in diff_out]

            _, vjp = jax.vjp(f, *(inputs[k] for k in diff_in))
            grads = vjp([_conj(ct) for ct in cts])  # NOTE: torch's convention, see _cotangent
            return tuple(_conj(g) for g in grads)

        self._flat_fn = vjp_flat_fn
        self.tensor_pos = tuple(range(n + len(diff_out)))
        self.diff_out = tuple(range(len(diff_in)))
        self.num_outputs = len(diff_in)
        self.device, self.to_torch = program.device, program.to_torch
        self.compiler_options = program.compiler_options
        self.auto_layouts = program.auto_layouts
        self.label = f"{getattr(program, 'label', 'torch2xla')}:vjp"
        self._train_cache: dict[tuple[int, ...], TrainFns] = {}
        self._vjp_programs: dict[tuple[int, ...], _VjpProgram] = {}
        self._untracked = jax.jit(vjp_flat_fn, compiler_options=self.compiler_options)

    @classmethod
    def of(cls, program, diff_in: tuple[int, ...]) -> _VjpProgram:
        cache = program.__dict__.setdefault("_vjp_programs", {})
        if diff_in not in cache:
            cache[diff_in] = cls(program, diff_in)
        return cache[diff_in]

    def train_flat_fn(self) -> Callable:
        return self._flat_fn

    def train_fns(self, diff_in: tuple[int, ...]) -> TrainFns:
        if diff_in not in self._train_cache:
            self._train_cache[diff_in] = build_train_fns(
                self._flat_fn, len(self.tensor_pos), diff_in, self.diff_out, self.num_outputs,
                compiler_options=self.compiler_options, auto_layouts=self.auto_layouts,
                device=self.device,
            )
        return self._train_cache[diff_in]

    def placement(self):
        return jax.default_device(self.device)

    def jax_inputs(self, tensors: Sequence[torch.Tensor]) -> list:
        return [_jax_value(t) for t in tensors]

    def call_untracked(self, seed, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        with x64(), jax.default_device(self.device):
            outs = self._untracked(seed, *self.jax_inputs(tensors))
        return [self.to_torch(o) for o in outs]


def _conj(x):
    return jax.numpy.conj(x) if jax.numpy.iscomplexobj(x) else x


def _jax_value(t: torch.Tensor):
    return to_jax(t) if t.numel() else jax.numpy.zeros(t.shape, jax_dtype(t.dtype))


def _cotangent(g: torch.Tensor, dtype: np.dtype):
    """A torch gradient as a JAX cotangent of ``dtype``.

    NOTE: torch's gradient of a complex value is the conjugate of JAX's cotangent (torch
    follows the conjugate Wirtinger convention), so complex cotangents are conjugated on the
    way in and the resulting gradients on the way out (``_from_cotangent``).
    """
    if g.is_complex():
        g = g.conj()
    return to_jax(g) if g.numel() else jax.numpy.zeros(g.shape, dtype)


def _from_cotangent(g: torch.Tensor) -> torch.Tensor:
    return g.conj().resolve_conj() if g.is_complex() else g


def _dependencies(vjp_fn, cts: Sequence) -> tuple[frozenset[int], ...]:
    """Per cotangent, the input gradients of ``vjp_fn`` that it reaches (structurally, through
    the backward's jaxpr; gradients no cotangent reaches are symbolic zeros)."""
    closed = jax.make_jaxpr(_apply_vjp)(vjp_fn, list(cts))
    n_res = len(jax.tree_util.tree_leaves(vjp_fn))
    jaxpr = closed.jaxpr
    n_ct = len(jaxpr.invars) - n_res
    seeds = [frozenset()] * n_res + [frozenset({j}) for j in range(n_ct)]
    out_deps = _propagate(jaxpr, seeds)
    per_ct: list[set[int]] = [set() for _ in range(n_ct)]
    for k, ds in enumerate(out_deps):
        for j in ds:
            per_ct[j].add(k)
    return tuple(frozenset(s) for s in per_ct)


def _propagate(jaxpr: jcore.Jaxpr, in_deps: Sequence[frozenset]) -> list[frozenset]:
    """Which of the seeds in ``in_deps`` each output of ``jaxpr`` depends on."""
    env: dict[Any, frozenset] = dict(zip(jaxpr.invars, in_deps))

    def read(v) -> frozenset:
        return frozenset() if isinstance(v, jcore.Literal) else env.get(v, frozenset())

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        sub = _inner_jaxpr(eqn)
        if sub is not None:
            outs = _propagate(sub, ins)
        else:  # conservative: every output depends on every input
            union = frozenset().union(*ins)
            outs = [union] * len(eqn.outvars)
        for v, d in zip(eqn.outvars, outs):
            env[v] = d
    return [read(v) for v in jaxpr.outvars]


def _inner_jaxpr(eqn) -> jcore.Jaxpr | None:
    """The jaxpr an equation calls one-to-one (pjit, remat, custom calls), if any."""
    for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = eqn.params.get(name)
        if isinstance(sub, jcore.ClosedJaxpr):
            sub = sub.jaxpr
        if (
            isinstance(sub, jcore.Jaxpr)
            and len(sub.invars) == len(eqn.invars)
            and len(sub.outvars) == len(eqn.outvars)
        ):
            return sub
    return None
