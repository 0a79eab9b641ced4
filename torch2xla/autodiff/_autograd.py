"""jax.vjp <-> torch.autograd.Function.

The forward runs ``jax.vjp`` inside ``jax.jit``: it returns the outputs and ``vjp_fn``, a
``jax.tree_util.Partial`` whose leaves are the residuals (JAX arrays). The backward hands the
cotangents to a second jitted function that applies ``vjp_fn``. JAX derives the backward from
the forward lowerings, so no backward lowerings are needed.

Eager autograd semantics kept here:

- Residuals are freed when the backward has run (unless ``retain_graph=True``), as eager frees
  saved tensors; a second backward through a freed graph raises eager's error. Our node
  stands for all of eager's nodes of the graph, so it frees and raises as they would, per
  output (``_eager_backward.output_saves``): ``a, c = f(x); a.sum().backward();
  c.sum().backward()`` runs where eager's backwards of ``a`` and ``c`` share no node that
  saves tensors, and raises eager's error where they do; the residuals are kept while some
  output's backward could still run.
- An input gets a gradient when an output that received a cotangent is connected to it in
  eager's autograd graph, zeros where the derivative is zero (``x.round()``, an empty ``x``),
  and None otherwise, as eager leaves ``.grad`` of such a parameter None (``_connected``).
- A tensor that eager's graph saves, changed in place between the call and a backward that
  runs a node saving it, makes that backward raise eager's error; a backward through the
  other outputs runs (``_versions``).
- Outputs eager would not track (integer, ``.detach()``, argmax) are non-differentiable.
- Double backward works: with ``create_graph=True`` the backward runs the program's vjp as a
  differentiable program of its own (``VjpProgram``, recomputing from the inputs), so its
  gradients can be differentiated again, to any order.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence

import jax
import numpy as np
import torch
from torch.autograd import _profiler_enabled

from torch2xla.autodiff import _split, _versions
from torch2xla.autodiff._absent import Absent
from torch2xla.autodiff._accumulate import ordered_groups
from torch2xla.autodiff._double_backward import VjpProgram
from torch2xla.autodiff._eager_backward import anomaly_replay
from torch2xla.autodiff._release import Chain, Gate, chain_groups, distributed, token_gradient
from torch2xla.autodiff._train_fns import TrainFns, cotangent, from_cotangent, zeros
from torch2xla.autodiff._versions import Watch, nodes
from torch2xla.debug import _profile
from torch2xla.debug._profile import profiled_backward
from torch2xla.runtime import _checks, _fork
from torch2xla.runtime._interop import host_view, no_stack_capture, to_jax
from torch2xla.runtime._jax_scope import D2D, D2H, H2D, INFS, NANS, NO_JIT, PINNING, unchecked, x64

# NOTE: torch exposes whether the running backward keeps the graph (retain_graph) only through
# this private hook, which AOTAutograd uses for the same purpose. Without it we keep the
# residuals until the autograd graph dies, which is correct but holds memory longer.
_keep_graph: Callable[[], bool] = getattr(
    torch._C._autograd, "_get_current_graph_task_keep_graph", lambda: True
)


# A tensor saved on every node that saves no other, only so that autograd tells us (by raising
# eager's error on ``ctx.saved_tensors``) when a backward runs through a graph whose buffers
# were freed (any saved tensor raises so).
_FREED_MARKER = torch.empty(0, device="cpu")

_functorch_active: Callable[[], bool] = torch._C._are_functorch_transforms_active
_anomaly_enabled: Callable[[], bool] = torch.is_anomaly_enabled
_check_nan: Callable[[], bool] = torch.is_anomaly_check_nan_enabled
_version = operator.attrgetter("_version")
_detach = torch.Tensor.detach
_backward_hooks = operator.attrgetter("_backward_hooks")
_post_hooks = operator.attrgetter("_post_accumulate_grad_hooks")


class _Plan:
    """What ``XlaFunction`` decides once per program and set of differentiated inputs, so that
    a training step does only the work that depends on its values.

    Known from the start: where the differentiated and the other inputs and outputs are. Known
    after the first forward (the program's signature is fixed, so they never change): which
    inputs the backward reads (saved on the autograd node), the cotangents' shapes and dtypes,
    and whether cotangents and gradients need the complex or empty-tensor handling. Once
    needed: which inputs each output is connected to (``deps``), and those that all of them
    reach together.
    """

    __slots__ = (
        "backward_ran",
        "bare_backward",
        "conj_grads",
        "convert",
        "cut",
        "dense_out",
        "dense_release",
        "diff_in",
        "diff_meta",
        "diff_out",
        "every_out",
        "flat_fn",
        "fns",
        "groups",
        "hook_groups",
        "hook_inputs",
        "hook_pick",
        "live_sets",
        "live_slots",
        "n_inputs",
        "plain_cts",
        "program",
        "rest_in",
        "saved_out",
        "saved_pos",
        "saves",
        "scoped",
        "steady",
        "steady_bwd",
        "to_jax",
        "untracked",
        "views",
        "watch",
    )

    def __init__(self, program, fns: TrainFns, diff_in: tuple[int, ...]) -> None:
        n = len(program.tensor_pos)
        diff_set = frozenset(diff_in)
        self.program, self.fns, self.diff_in, self.n_inputs = program, fns, diff_in, n
        self.flat_fn = program.checked_fn()  # its ``checks``: those of the forward's status
        # None: every input is differentiated, in order (the views are passed as they are)
        self.rest_in = (
            None if len(diff_in) == n else tuple(k for k in range(n) if k not in diff_set)
        )
        self.diff_out = program.diff_out
        # Every output is differentiated, in order: no reordering, nothing to mark.
        self.dense_out = program.diff_out == tuple(range(program.num_outputs))
        self.scoped = program.scoped
        # the program's ``ViewCache`` where its views need nothing more (``XlaProgram``)
        self.views = program._views if getattr(program, "_host_views", False) else None
        self.convert = program.to_torch
        # a cotangent's JAX value (a CPU program's: ``to_jax`` without its frame; the numpy
        # view lives only as long as the backward's call)
        self.to_jax = to_jax if getattr(program, "_cuda", True) else host_view
        self.cut = getattr(program, "cut", None)  # packed gradients' pieces (``_pack``)
        self.saved_pos: tuple[int, ...] | None = None
        # outputs eager's graph saves (``XlaProgram.saved_outputs``): saved on the node too
        self.saved_out: tuple[int, ...] = getattr(program, "saved_outputs", ())
        # the tensors whose versions the backward checks (``Watch``; None until known)
        self.watch: Watch | None = None
        # per differentiated output, the nodes of eager's graph that save tensors and that its
        # backward runs (``_eager_backward.output_saves``; None: not known)
        saves = getattr(program, "output_saves", None) or {}
        self.saves: tuple[frozenset[int] | None, ...] = tuple(map(saves.get, self.diff_out))
        self.diff_meta: tuple | None = None
        self.plain_cts = False  # no complex or empty cotangent (set after the first forward)
        self.conj_grads = True  # some gradient is complex (set after the first forward)
        self.live_slots: tuple[tuple[int, int], ...] | None = None
        # per set of differentiated outputs given cotangents, the positions in diff_in that
        # get gradients, or the error eager's backward through them raises (``live``)
        self.live_sets: dict[tuple[int, ...], frozenset[int] | Exception] = {}
        # Positions in diff_in per group of the chained backward (``chain_groups``): () for
        # one node, None until the backward decided whether it is split.
        self.groups: tuple[tuple[int, ...], ...] | None = None
        # The leaves' input positions in eager's order of accumulation, and the groups of the
        # chain that accumulates them in it where they have hooks (``_accumulate``; None: not
        # known yet).
        self.hook_inputs: tuple[int, ...] | None = None
        self.hook_groups: tuple[tuple[int, ...], ...] = ()
        # tensors -> those at ``hook_inputs`` (two or more: a tuple), once they are known
        self.hook_pick: Callable | None = None
        self.backward_ran = False
        # The backward runs outside JAX's config contexts (x64, placement): where they change
        # nothing (``XlaProgram.scoped``), once its one program is compiled (a split's
        # segments trace as they run; ``Backward`` enters x64 itself where it compiles).
        self.bare_backward = False
        # Differentiated outputs connected to no differentiated input, which eager would not
        # track: marked non-differentiable where the program asks (``mark_untracked``).
        self.untracked: tuple[int, ...] = ()
        self.every_out = tuple(range(len(self.diff_out)))  # ``active`` when all are
        # (``ctx.freed``, freed) after the first backward through every output (``_release``)
        self.dense_release: tuple | None = None
        # The steady forward, once its executable ran (``_steady_forward``): (its C++ call,
        # the input positions the residuals hold, what makes the residuals of the arrays it
        # computed and those inputs); False where there is none (views that need more than
        # the ``ViewCache``, JAX's config contexts, a seed among the residuals).
        self.steady: tuple | None | bool = None if self.views is not None else False
        # The freed graph's backward executable's C++ call, once it ran (``_residuals.Backward.
        # steady``): ``(kept, inputs, cotangents) -> gradients``; None: not known (yet).
        self.steady_bwd: Callable | None = None

    @classmethod
    def of(cls, program, diff_in: tuple[int, ...]) -> _Plan:
        fns = program.train_fns(diff_in)
        plan = fns.plan
        if plan is None or plan.program is not program:
            plan = fns.plan = cls(program, fns, diff_in)
        return plan

    def find_steady(self) -> None:
        """Sets ``steady`` once the forward's executable ran (``_autograd._forward`` runs it
        until then): its C++ call and what the residuals are made of, from the forward
        (``_residuals._Wrapped.steady``, ``_stored._StoredForward.steady``)."""
        if self.scoped:
            self.steady = False
            return
        fwd = self.fns.fwd
        target = getattr(fwd, "direct", None) or fwd  # (``_program._Aot``: what it calls)
        steady = getattr(target, "steady", None)
        found = steady() if steady is not None else False
        if found is not None:
            self.steady = found if found and -1 not in found[1] else False

    def learn(self, douts: Sequence, tensors: Sequence[torch.Tensor]) -> None:
        """Record what the first forward call shows (see the class docstring)."""
        meta = tuple((tuple(o.shape), np.dtype(o.dtype)) for o in douts)
        self.plain_cts = all(d.kind != "c" and all(shape) for shape, d in meta)
        self.conj_grads = any(tensors[k].is_complex() for k in self.diff_in)
        if getattr(self.program, "mark_untracked", False):
            self.untracked = tuple(i for i, d in zip(self.diff_out, self.deps()) if not d)
        self.diff_meta = meta

    def deps(self) -> tuple[frozenset[int], ...]:
        """Per differentiated output, the positions in ``diff_in`` connected to it in eager's
        autograd graph (found once, ``connected``)."""
        fns = self.fns
        if fns.deps is None:
            fns.deps = self.program.connected(self.diff_in)
        return fns.deps

    def dense_slots(self) -> tuple[tuple[int, int], ...]:
        """``(position in diff_in, input position)`` of the inputs that get a gradient when
        every output has a cotangent."""
        if self.live_slots is None:
            live = self.live(self.every_out)
            self.live_slots = tuple((p, k) for p, k in enumerate(self.diff_in) if p in live)
        return self.live_slots

    def live(self, active: Sequence[int]) -> frozenset[int]:
        """The positions in ``diff_in`` that get a gradient from a backward through the
        differentiated outputs ``active``: those connected to them (``deps``), less those to
        which eager's backward passes none where connectivity cannot tell (the program's
        ``live_inputs``; found once per set). Raises the error eager's backward raises there,
        where the run that found them raised it (a derivative not implemented)."""
        key = tuple(active)
        found = self.live_sets.get(key)
        if found is None:
            deps = self.deps()
            found = frozenset().union(*(deps[j] for j in key))
            exact = getattr(self.program, "live_inputs", None)
            if found and exact is not None:
                try:
                    refined = exact(self.diff_in, key)
                except (RuntimeError, NotImplementedError) as e:  # (eager's backward's own)
                    refined = e
                if isinstance(refined, frozenset):
                    found &= refined
                elif refined is not None:
                    found = refined
            self.live_sets[key] = found
        if isinstance(found, BaseException):  # (raised by every backward through the set)
            raise type(found)(str(found))
        return found


def apply_differentiable(program, diff_in: tuple[int, ...], seed, tensors: Sequence) -> tuple:
    """``program``'s outputs for ``tensors``, tracked by autograd with respect to the inputs
    ``diff_in`` (``XlaFunction``)."""
    plan = program.plans.get(diff_in)  # (``_Plan.of`` once: its lookups are frames)
    if plan is None:
        plan = program.plans[diff_in] = _Plan.of(program, diff_in)
    if _functorch_active():
        return XlaFunction.apply(plan, seed, None, *tensors)
    groups = plan.groups if plan.groups is not None else chain_groups(plan)
    # Leaves with hooks get their gradients one by one in eager's order, whether the backward
    # is one program, split into segments (whose order is the segments', not eager's) or not
    # decided yet (the first call, where it may be split). (Inline: a frame per call counts,
    # tests/test_overhead_s20.py.)
    hooked = ()
    hook_inputs = plan.hook_inputs
    if hook_inputs is None:
        hook_inputs = _hook_inputs(plan)
    if hook_inputs:
        leaves = plan.hook_pick(tensors)
        # (``_accumulate.hooked``, in C: a tensor hook of a leaf, or a post-accumulate-grad
        # hook, removed ones included, as there)
        if any(map(_backward_hooks, leaves)) or any(
            map(operator.is_not, map(_post_hooks, leaves), itertools.repeat(None))
        ):
            hooked = plan.hook_groups
    if groups is None and distributed():  # the split is decided by this first call
        return _apply_first(plan, seed, tensors, hooked)
    if hooked:
        return _apply_chained(plan, hooked, seed, Chain(plan, hooked), tensors)
    if groups is None:  # (decided by the first backward, where one runs)
        return _apply(plan, seed, None, *tensors)
    if groups:
        return _apply_chained(plan, groups, seed, Chain(plan, groups), tensors)
    # NOTE: ``Function.apply`` only adds, outside functorch transforms, an unwrapping of dead
    # functorch wrappers (none exist outside a transform) before calling this, its base.
    return _apply(plan, seed, None, *tensors)


def _hook_inputs(plan: _Plan) -> tuple[int, ...]:
    """Sets ``plan.hook_inputs`` and ``plan.hook_groups`` (``_accumulate``)."""
    order = getattr(plan.program, "accumulate_order", None)
    order = order() if order is not None else ()
    plan.hook_groups = ordered_groups(plan.diff_in, order)
    plan.hook_inputs = order if plan.hook_groups else ()
    if plan.hook_inputs:  # (two or more: ``ordered_groups`` makes none for fewer)
        plan.hook_pick = operator.itemgetter(*plan.hook_inputs)
    return plan.hook_inputs


def _apply_first(plan: _Plan, seed, tensors: Sequence, hooked: tuple = ()) -> tuple:
    """The first call, in a process group, of a program whose backward may be split: the
    forward runs first, and the backward is cut (and compiled) on its residuals, so that the
    gates come before the program's node from the first step on (DDP orders its buckets by
    the order the first step's gradients come in). Outside a process group the first
    backward decides, as it runs: a forward whose graph is never differentiated (an
    evaluation without ``torch.no_grad()``) then compiles no backward, and the gates start
    with the second step."""
    with x64(), plan.program.placement():
        pending = _forward(plan, seed, tensors)
        douts, _, vjp_fn = pending
        plan.fns.bwd.decide_split(vjp_fn, [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in douts])
    groups = chain_groups(plan) or ()
    groups = hooked or groups  # (eager's order where hooks can tell, ``apply_differentiable``)
    chain = Chain(plan, groups, pending)
    if groups:
        return _apply_chained(plan, groups, seed, chain, tensors)
    return _apply(plan, seed, chain, *tensors)


def _apply_chained(plan: _Plan, groups: tuple, seed, chain: Chain, tensors: Sequence) -> tuple:
    diff_in, token = plan.diff_in, None
    for g in range(len(groups) - 1, 0, -1):
        token = Gate.apply(chain, g, token, *(tensors[diff_in[p]] for p in groups[g]))
    return _apply(plan, seed, chain, *tensors, token)


class XlaFunction(torch.autograd.Function):
    """Runs an ``XlaProgram`` differentiably: ``apply(plan, seed, chain, *tensors)``
    (``apply_differentiable`` makes the plan; ``chain``: None, or a ``Chain``: with groups,
    its first gate's token follows the tensors)."""

    @staticmethod
    def forward(ctx, plan: _Plan, seed, chain: Chain | None, *tensors):
        pending = None
        if chain is not None:
            pending, chain.pending = chain.pending, None
            if chain.groups:  # (its token last)
                tensors = tensors[:-1]
            else:
                chain = None
        steady = plan.steady
        if steady and chain is None:  # (the steady step: in this frame, ``_steady_forward``)
            exe, held, residuals = steady
            views = plan.views(tensors)[0]
            rest_in = plan.rest_in
            if rest_in is None:
                diff, rest = views, []
            else:
                take = views.__getitem__
                diff, rest = list(map(take, plan.diff_in)), list(map(take, rest_in))
            try:
                douts, aux, kept = exe(seed, diff, rest)
            except (TypeError, ValueError):  # (rejected before it ran: the general path)
                douts, aux, vjp_fn = _forward(plan, seed, tensors)
            else:
                vjp_fn = residuals(kept, list(map(views.__getitem__, held)))
        elif pending is not None:
            douts, aux, vjp_fn = pending
            del pending
        elif plan.scoped:  # JAX's config contexts, where they change something (XlaProgram)
            with x64(), plan.program.placement():
                douts, aux, vjp_fn = _forward(plan, seed, tensors)
        else:
            douts, aux, vjp_fn = _forward(plan, seed, tensors)
            if steady is None:
                plan.find_steady()
        checks = getattr(plan.flat_fn, "checks", ())
        if checks:  # the last aux output is their status (``_checks``)
            _checks.raise_failed(aux[-1], checks)
            aux = aux[:-1]
        if plan.diff_meta is None:
            plan.learn(douts, tensors)
        convert = plan.convert
        if plan.dense_out:
            outs = tuple(map(convert, douts))
            if plan.untracked:
                ctx.mark_non_differentiable(*(outs[i] for i in plan.untracked))
        else:
            full: list = [None] * plan.program.num_outputs
            for i, o in zip(plan.diff_out, douts):
                full[i] = convert(o)
            aux_out = plan.fns.aux_out
            for i, o in zip(aux_out, aux):
                full[i] = convert(o)
            if aux_out or plan.untracked:
                ctx.mark_non_differentiable(*(full[i] for i in (*aux_out, *plan.untracked)))
            outs = tuple(full)
        # Unused outputs get None, not zeros: an input reached only through them gets no grad.
        # NOTE: what ``ctx.set_materialize_grads(False)`` and ``ctx.save_for_backward`` set,
        # set here without their Python frames (attributes of autograd's C++ context).
        ctx.materialize_grads = False
        saved = plan.saved_pos
        if saved is None:  # (those our backward reads, and those eager's would)
            ours = plan.fns.saved_positions()
            saved = tuple(sorted({*(ours or ()), *getattr(plan.program, "saved_inputs", ())}))
            if ours is not None:
                plan.saved_pos = saved
        if saved or plan.saved_out:  # (any saved tensor raises as the marker would)
            ctx.to_save = (*map(tensors.__getitem__, saved), *map(outs.__getitem__, plan.saved_out))
        else:
            ctx.to_save = (_FREED_MARKER,)
        watch = plan.watch
        if watch is None:
            watch = Watch.of(plan, plan.fns.saved_positions())
        if watch.inputs or watch.outputs:
            # (outputs detached: they share the version counter, and hold no reference to
            # this node)
            # (no comprehension: a Python frame on every training step)
            watched = ctx.watched = [
                *map(tensors.__getitem__, watch.inputs),
                *map(_detach, map(outs.__getitem__, watch.outputs)),
            ]
            try:
                ctx.versions = [*map(_version, watched)]
            except RuntimeError:  # (an inference tensor: eager's error where eager saves it)
                ctx.versions = _versions.versions_with_inference(plan.program, watch, watched)
            made = nodes.made
            if made is not None:  # (an entry that writes after the call: ``restamp``)
                made.append(ctx)
        else:
            ctx.watched = ()
        ctx.plan, ctx.chain, ctx.vjp_fn = plan, chain, vjp_fn
        # whether a backward without retain_graph ran (autograd then released what the node
        # saved), and the nodes of eager's graph that freed (``_freed_after``)
        ctx.released, ctx.freed = False, frozenset()
        # For a create_graph backward only (it recomputes from them); no copy is made.
        ctx.inputs, ctx.seed = tensors, seed
        return outs

    @staticmethod
    # NOTE: autograd runs this from the user's frame: for ``loss.backward()`` inside a
    # compiled function, the graph break's eager region, where Dynamo would trace it.
    @torch.compiler.disable
    def backward(ctx, *grads):
        if (
            NANS.value or INFS.value or NO_JIT.value or H2D.value or D2H.value or D2D.value
        ) and not PINNING.on:  # (``_jax_scope.switched``, inline: no frame)
            with unchecked():
                return XlaFunction.backward(ctx, *grads)
        # (``_is_batched`` of each cotangent, in C: no frame per cotangent)
        given = [*itertools.compress(grads, map(operator.is_not, grads, itertools.repeat(None)))]
        if any(map(_functorch.is_batchedtensor, given)) or any(
            map(_functorch.is_legacy_batchedtensor, given)
        ):
            return _batched_backward(ctx, grads)
        if _anomaly_enabled() and _check_nan():  # (eager's node named: ``anomaly_replay``)
            inputs = ctx.inputs  # (before the backward frees them)
            result = _first_or_profiled_backward(ctx, *grads)
            anomaly_replay(ctx.plan, inputs, grads, result)
            return result
        # (``profiled_backward`` inlined: one frame less on every backward)
        if ctx.plan.backward_ran and not (
            _fork.IN_CHILD or _profile._jax_tracing or _profiler_enabled()
        ):
            return _backward(ctx, grads)
        return _first_or_profiled_backward(ctx, *grads)


@profiled_backward
def _first_or_profiled_backward(ctx, *grads, keep: bool = False):
    if _fork.IN_CHILD:  # (XLA would wait forever: raised instead)
        raise RuntimeError(_fork.PARENT_GRAPH)
    plan = ctx.plan
    if not plan.backward_ran:  # the first backward traces and compiles (no_stack_capture)
        with no_stack_capture():
            result = _backward(ctx, grads, keep)
        plan.backward_ran = True
        return result
    return _backward(ctx, grads, keep)


_apply = super(torch.autograd.Function, XlaFunction).apply


def _forward(plan: _Plan, seed, tensors: Sequence):
    # parameters imported once, not every step (on the CPU without ``jax_inputs``' frame)
    cache = plan.views
    views = cache(tensors)[0] if cache is not None else plan.program.jax_inputs(tensors)
    rest_in = plan.rest_in
    if rest_in is None:
        diff, rest = views, []
    else:
        take = views.__getitem__
        diff, rest = list(map(take, plan.diff_in)), list(map(take, rest_in))
    fwd = plan.fns.fwd
    direct = getattr(fwd, "direct", None)  # (``_program._Aot.direct``: a frame less)
    if direct is None:
        return fwd(seed, diff, rest)
    try:
        return direct(seed, diff, rest)
    except (TypeError, ValueError):  # (rejected before it ran)
        return fwd.fallback(seed, diff, rest)


_functorch = torch._C._functorch


def _is_batched(g) -> bool:
    return g is not None and (
        _functorch.is_legacy_batchedtensor(g) or _functorch.is_batchedtensor(g)
    )


def _unbatched(g: torch.Tensor) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A batched cotangent's values with the batch first, and how to batch a result again
    (``torch.autograd.grad``'s ``is_grads_batched`` batches with the legacy vmap, ``torch.func``
    with functorch's)."""
    if _functorch.is_legacy_batchedtensor(g):
        level = torch._C._vmapmode_increment_nesting() - 1  # (the innermost level)
        torch._C._vmapmode_decrement_nesting()
        return torch._remove_batch_dim(g, level, 0, 0), lambda t: torch._add_batch_dim(t, 0, level)
    level = _functorch.maybe_get_level(g)
    value = _functorch.get_unwrapped(g).movedim(_functorch.maybe_get_bdim(g), 0)
    return value, lambda t: _functorch._add_batch_dim(t, 0, level)


def _batched_backward(ctx, grads: tuple) -> tuple:
    """The backward for cotangents batched by a vmap (``torch.autograd.grad(...,
    is_grads_batched=True)``, ``jacobian(vectorize=True)``): one backward per cotangent of the
    batch (the residuals kept until the last), the gradients batched again."""
    if ctx.chain is not None:
        raise NotImplementedError(
            "torch2xla: batched cotangents (is_grads_batched=True, a vmap over a backward) "
            "through a backward split into segments; pass options={'split_backward': False}"
        )
    batch, cts = None, []
    for g in grads:
        if _is_batched(g):
            g, batch = _unbatched(g)
            cts.append((True, g))
            size = g.shape[0]
        else:
            cts.append((False, g))
    per_item = [
        _first_or_profiled_backward(
            ctx, *(g[b] if batched else g for batched, g in cts), keep=b < size - 1
        )
        for b in range(size)
    ]
    return tuple(None if got[0] is None else batch(torch.stack(got)) for got in zip(*per_item))


def _backward(ctx, grads: tuple, keep: bool = False) -> tuple:
    plan, chain = ctx.plan, ctx.chain
    diff_grads = grads if plan.dense_out else [grads[i] for i in plan.diff_out]
    # (every output got a cotangent: the common case, checked in C)
    dense = all(map(operator.is_not, diff_grads, itertools.repeat(None)))
    active = plan.every_out if dense else [j for j, g in enumerate(diff_grads) if g is not None]
    if ctx.released and (ctx.vjp_fn is None or _blocked(plan.saves, ctx.freed, active)):
        # (raises eager's error when a backward without retain_graph released what this one
        # needs)
        ctx.saved_tensors  # noqa: B018
    watched = ctx.watched
    if watched:  # (eager's error where a tensor its backward reads changed in place)
        if not dense:
            plan.watch.check(ctx, active)
        elif [*map(_version, watched)] != ctx.versions:
            plan.watch.check(ctx, None)
    vjp_fn, inputs = ctx.vjp_fn, ctx.inputs
    freed = False
    if not (keep or _keep_graph()):
        ctx.released = True
        if dense and not ctx.freed:  # (the first backward through every output: known once)
            if plan.dense_release is None:
                plan.dense_release = _release(plan.saves, ctx.freed, active)
            ctx.freed, freed = plan.dense_release
        else:
            ctx.freed, freed = _release(plan.saves, ctx.freed, active)
        if freed:
            ctx.vjp_fn = ctx.inputs = None
            ctx.watched = ()
    fns = plan.fns
    n_args = 3 + plan.n_inputs + (chain is not None)  # (plan, seed, chain, *tensors, token)
    if not active:
        if chain is not None:
            chain.source = None
        return (None,) * n_args
    if dense:
        slots = plan.live_slots or plan.dense_slots()
    else:
        live = plan.live(active)
        slots = tuple((p, k) for p, k in enumerate(plan.diff_in) if p in live)
    if torch.is_grad_enabled():  # create_graph=True: differentiable gradients
        source = _differentiable_backward(ctx, plan, inputs, diff_grads, active, slots)
    else:  # (grad mode is off from here)
        bwd = fns.bwd
        if plan.bare_backward:  # (see _Plan: no config context changes anything)
            # (``_cotangents``' common case inlined: every cotangent, real and non-empty)
            if dense and plan.plain_cts:
                cts = list(map(plan.to_jax, diff_grads))
            else:
                cts = _cotangents(plan, dense, diff_grads)
            steady = plan.steady_bwd if freed else None
            if steady is None:
                source = bwd(vjp_fn, cts, donate=freed)
                if freed:  # (its C++ call, once it ran: ``Backward.steady``)
                    plan.steady_bwd = getattr(bwd, "steady", _none)()
            else:
                try:
                    source = steady(vjp_fn.kept, vjp_fn.inputs, cts)
                except (TypeError, ValueError):  # (rejected before it ran: ``Backward``)
                    source = bwd(vjp_fn, cts, donate=True)
        else:
            with x64(), plan.program.placement():
                source = bwd(vjp_fn, _cotangents(plan, dense, diff_grads), donate=freed)
            # (decided once the backward is one program: a split's segments trace later)
            plan.bare_backward = not plan.scoped and bwd.ready() == ()
        if chain is None and not isinstance(source, _split.Run):
            # the common case: the gradients straight into autograd's list
            result: list = [None] * n_args
            packing, conj = bwd.packing, plan.conj_grads
            if packing is not None:  # small gradients: cut from one buffer, all converted here
                source = packing.unpack(source, plan.convert, plan.cut)
                for p, k in slots:
                    result[3 + k] = from_cotangent(source[p]) if conj else source[p]
            else:
                convert = plan.convert
                for p, k in slots:
                    result[3 + k] = (
                        from_cotangent(convert(source[p])) if conj else convert(source[p])
                    )
            return tuple(result)
        if not isinstance(source, _split.Run):
            source = _converted(plan, bwd.packing, source, slots)
    result = [None] * n_args
    if chain is None:
        if isinstance(source, _split.Run):
            got = source.take([p for p, _ in slots], plan.convert)
            del source
            for (_, k), g in zip(slots, got):
                result[3 + k] = from_cotangent(g) if plan.conj_grads else g
        else:
            for p, k in slots:
                result[3 + k] = source.pop(p)
        return tuple(result)
    chain.source, chain.live = source, frozenset(p for p, _ in slots)
    del source
    later = ctx.needs_input_grad[-1] and chain.more_after(0)
    got = chain.take(0, later)
    diff_in = plan.diff_in
    for p, g in got.items():
        result[3 + diff_in[p]] = g
    if later:
        result[-1] = token_gradient(plan.program.torch_device)
    return tuple(result)


# ``ctx.freed`` once an output whose eager nodes are not known ran a freeing backward
_EVERY: frozenset[int] = frozenset({-1})


def _blocked(saves: Sequence, freed: frozenset[int], outs: Sequence[int]) -> bool:
    """Whether eager's backward through the differentiated outputs ``outs`` runs a node whose
    saved tensors a backward without retain_graph freed (``freed``, after one ran: an output
    whose nodes are unknown, None in ``saves``, counts as running them all)."""
    if freed is _EVERY:
        return True
    return any(saves[j] is None or not saves[j].isdisjoint(freed) for j in outs)


def _release(saves: Sequence, freed: frozenset[int], outs: Sequence[int]) -> tuple:
    """``ctx.freed`` after a backward without retain_graph through the outputs ``outs``, and
    whether the residuals are freed (no output's backward can run any more), as eager frees
    saved tensors."""
    freed = _freed_after(saves, freed, outs)
    return freed, all(_blocked(saves, freed, (j,)) for j in range(len(saves)))


def _freed_after(saves: Sequence, freed: frozenset[int], outs: Sequence[int]) -> frozenset[int]:
    """``freed`` after a backward without retain_graph through the outputs ``outs``."""
    if freed is _EVERY or any(saves[j] is None for j in outs):
        return _EVERY
    return freed.union(*(saves[j] for j in outs))


def _cotangents(plan: _Plan, dense: bool, diff_grads: Sequence) -> list:
    """The cotangents of the differentiated outputs as JAX values (``Absent`` where None: the
    backward does not go through that output, as eager's does not)."""
    if dense and plan.plain_cts:  # the common case: every cotangent, real and non-empty
        return list(map(to_jax, diff_grads))
    # (empty cotangents, no memory to view, are zeros made by one cached program)
    metas = plan.diff_meta
    empty = [g is not None and not g.numel() for g in diff_grads]
    missing = tuple(meta for meta, z in zip(metas, empty) if z)
    made = iter(zeros(missing) if missing else ())
    return [
        Absent(shape, dtype) if g is None else next(made) if z else cotangent(g, dtype)
        for g, z, (shape, dtype) in zip(diff_grads, empty, metas)
    ]


def _converted(plan: _Plan, packing, in_grads, slots) -> dict:
    """The gradients of one program's backward (``in_grads``, packed by ``packing``) at
    ``slots``, as torch tensors by position in ``diff_in``."""
    convert = plan.convert
    if packing is not None:  # small gradients: cut from one buffer, all converted here
        in_grads = packing.unpack(in_grads, convert, plan.cut)
        convert = _same
    if plan.conj_grads:
        return {p: from_cotangent(convert(in_grads[p])) for p, _ in slots}
    return {p: convert(in_grads[p]) for p, _ in slots}


def _same(g: torch.Tensor) -> torch.Tensor:
    return g


def _none() -> None:
    return None


def _differentiable_backward(ctx, plan: _Plan, inputs, diff_grads, active, slots) -> dict:
    """A create_graph backward: gradients that autograd tracks (``_differentiable_vjp``), by
    position in ``diff_in``."""
    in_grads = _differentiable_vjp(
        plan, ctx.seed, inputs, [diff_grads[j] for j in active], tuple(active)
    )
    return {p: in_grads[p] for p, _ in slots}


def _differentiable_vjp(
    plan: _Plan, seed, inputs: Sequence[torch.Tensor], cts: Sequence, active: tuple[int, ...]
) -> tuple:
    """The input gradients of a create_graph backward, tracked by autograd: the program's vjp
    run as a program of its own, differentiable in the inputs and the cotangents ``cts`` of
    the differentiated outputs ``active`` (those that got one)."""
    program, diff_in = plan.program, plan.diff_in
    vjp_program = VjpProgram.of(program, diff_in, active)
    tensors = (*inputs, *cts)
    diff = tuple(k for k, t in enumerate(tensors) if t.requires_grad)
    if not diff:
        with torch.no_grad():
            return tuple(vjp_program.call_untracked(seed, tensors))
    return apply_differentiable(vjp_program, diff, seed, tensors)
