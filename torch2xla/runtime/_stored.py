"""Graph signatures restored from the persistent cache, without export, tracing or lowering.

A new process that compiles a graph torch2xla compiled before still pays for Dynamo's trace,
the ATen export, JAX's tracing and the StableHLO lowering, even when XLA's executables come
from the persistent cache. So the first call of each whole-graph signature is recorded
(``remember``): the executables' keys, and what calling them needs (which inputs are lifted
parameters, which outputs are written back to mutated inputs, how outputs are packed, which
residuals the backward reads, which gradients each cotangent reaches, the split backward's
chain). The record is keyed by ``graph_key``: everything the export and the lowering read.
A later process with the same key builds the signature from the record (``restore``): a
``StoredProgram``, which runs the stored executables through ``XlaProgram``'s own call path.
The backward's executables are loaded at the first backward.

What a record does not hold (another set of differentiated inputs, a backward that keeps the
graph, a ``create_graph`` backward) is built the usual way the first time it is needed
(``StoredProgram.full``: the export and the lowering then run, once).

The key, ``graph_key``, and what it holds: ``_stored_key.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import torch

from torch2xla.autodiff import _residuals, _train_fns
from torch2xla.autodiff._absent import absent
from torch2xla.autodiff._split import Run, SplitBackward
from torch2xla.capture._lower import LoweredGraph
from torch2xla.guards import _persistent
from torch2xla.runtime._build_state import BuildState
from torch2xla.runtime._host_writes import write_positions
from torch2xla.runtime._interop import (
    ViewCache,
    cuda_to_torch,
    cut_cpu,
    cut_cpu_views,
    direct_call,
    no_stack_capture,
    to_torch_cpu,
)
from torch2xla.runtime._jax_scope import x64
from torch2xla.runtime._program import XlaProgram
from torch2xla.runtime._steady import steady_call

log = logging.getLogger("torch2xla")


# -- records ------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Exe:
    """A stored executable: its key and the pytrees it is called and returns with."""

    key: str
    in_tree: Any
    out_tree: Any


@dataclasses.dataclass
class _Training:
    diff_in: tuple[int, ...]
    aux_out: tuple[int, ...]
    input_pos: tuple[int, ...]  # the forward's inputs the backward reads (-1: the seed)
    deps: tuple[frozenset[int], ...]
    forward: _Exe
    backward: _Exe | None  # one program, or
    split: dict | None  # the split chain (``SplitBackward.plan``)
    packing: Any  # how the backward packs the gradients (``_pack.Packing`` or None)
    # the outputs whose cotangents the stored backward takes as ``Absent`` (older records:
    # none, as they were built)
    absent: tuple[int, ...] = ()


@dataclasses.dataclass
class _Record:
    """One signature of a graph, as ``restore`` rebuilds it."""

    key: str
    lifted: tuple[str, ...]
    mutations: tuple[int, ...]
    num_user_outputs: int
    tensor_pos: tuple[int, ...]
    n_inputs: int
    single_output: bool
    diff_out: tuple[int, ...]
    num_outputs: int
    packing: Any
    rng: bool
    wide: bool  # some input or output is 64-bit (calls run inside x64)
    options: dict  # the XlaProgram options (remat, compiler_options, auto_layouts, split)
    mark_untracked: bool  # outputs connected to no differentiated input are not tracked
    checks: tuple = ()  # the runtime checks (``_checks.StoredCheck``) whose status comes last
    inference: _Exe | None = None
    training: _Training | None = None
    # the leaves' inputs in eager's order of accumulation (``XlaProgram.accumulate_order``)
    order: tuple[int, ...] = ()


def remember(
    key: str | None,
    lowered: LoweredGraph,
    program: XlaProgram,
    inputs: Sequence,
    program_options: dict,
    user_nodes: Sequence[torch.fx.Node] = (),
) -> None:
    """Record the signature whose build just compiled ``program`` for ``inputs``: now for an
    inference program, at the first freed backward for a training one. ``user_nodes``: the
    Dynamo graph's nodes (the runtime checks' lines are found again from them on restore)."""
    if key is None or _persistent.store() is None:
        return
    tensors = [inputs[i] for i in program.tensor_pos]
    diff_in = tuple(k for k, t in enumerate(tensors) if t.requires_grad)
    base = {
        "key": key,
        "lifted": lowered.lifted_names,
        "mutations": lowered.mutations,
        "num_user_outputs": lowered.num_user_outputs,
        "tensor_pos": program.tensor_pos,
        "n_inputs": len(inputs),
        "single_output": program.single_output,
        "diff_out": program.diff_out,
        "num_outputs": program.num_outputs,
        "packing": program.packing,
        "rng": program.rng,
        "wide": program.wide,
        "mark_untracked": program.mark_untracked,
        "options": dict(program_options),
    }
    if len(lowered.lifted_names) != len(lowered.lifted):
        return
    # What a record does not hold, such signatures are built again in each process: inputs
    # that share memory (``_aliases``), outputs viewed with eager's strides (``OutputLayout``),
    # tensors on another device than the program's.
    if (
        lowered.aliasing is not None
        or getattr(
            program, "in_place", ()
        )  # (its executable donates inputs: the record would not say so)
        or program._layouts
        or program.foreign_in
        or program.foreign_out
    ):
        return
    if not (torch.is_grad_enabled() and diff_in and program.diff_out):
        exe = program._infer
        if exe.exe_key is None or exe.compiled is None:
            return
        # the runtime checks whose status the executable returns last (``_checks``)
        checks = tuple(c.portable(user_nodes) for c in program._flat_fn.checks)
        _write(
            _Record(
                **base,
                checks=checks,
                inference=_Exe(exe.exe_key, exe.compiled.in_tree, exe.compiled.out_tree),
            )
        )
        return
    fns = program.train_fns(diff_in)
    fns.bwd.on_compiled = functools.partial(
        _remember_training, base, fns, diff_in, program, tuple(user_nodes)
    )


def _remember_training(
    base: dict,
    fns: _train_fns.TrainFns,
    diff_in: tuple[int, ...],
    program: XlaProgram,
    user_nodes: Sequence[torch.fx.Node] = (),
) -> None:
    fwd, bwd = fns.fwd, fns.bwd
    if fns.deps is None:  # (found where first needed, which a backward may not have been)
        fns.deps = program.connected(diff_in)
    compiled = getattr(fwd, "compiled", None)
    stage = getattr(compiled, "_stage", None)  # the jax Compiled inside _residuals._Wrapped
    layout = fwd.layout
    if fwd.exe_key is None or stage is None or layout is None or fns.deps is None:
        return
    split = bwd._split if bwd._split not in (None, False) else None
    backward = plan = None
    if split is not None:
        plan = split.plan()
        if plan is None:
            return
        absent = split.absent
    else:
        exe, key = bwd._compiled.get(True), bwd.exe_keys.get(True)
        if exe is None or key is None:
            return
        backward, absent = _Exe(key, exe.in_tree, exe.out_tree), bwd.absent[True]
    checks = tuple(c.portable(user_nodes) for c in getattr(program.checked_fn(), "checks", ()))
    training = _Training(
        diff_in=diff_in,
        aux_out=fns.aux_out,
        input_pos=layout.input_pos,
        deps=fns.deps,
        forward=_Exe(fwd.exe_key, stage.in_tree, stage.out_tree),
        backward=backward,
        split=plan,
        packing=bwd.packing,
        absent=absent,
    )
    order = program.accumulate_order()
    _write(_Record(**base, checks=checks, training=training, order=order))


def _write(record: _Record) -> None:
    store = _persistent.store()
    if store is None:
        return
    try:
        payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        log.debug("torch2xla: signature not recorded in the persistent cache: %s", e)
        return
    store.write(_persistent.GRAPHS, record.key, payload)


def load(key: str | None) -> _Record | None:
    """The record ``key`` (None when absent, unsound or unusable)."""
    store = _persistent.store()
    if key is None or store is None:
        return None
    payload = store.read(_persistent.GRAPHS, key)
    if payload is None:
        return None
    try:
        record = pickle.loads(payload)
    except Exception as e:  # noqa: BLE001  (whatever unpickling raises: the entry is unusable)
        store.reject(_persistent.GRAPHS, key, f"it could not be read ({type(e).__name__}: {e})")
        return None
    if not isinstance(record, _Record) or record.key != key:
        store.reject(_persistent.GRAPHS, key, "it is not the record of this signature")
        return None
    return record


# -- restoring ----------------------------------------------------------------------------------
class _Loaded:
    """A stored executable, called as ``_program._Aot`` calls one: arguments it rejects (an
    array in another layout) are laid out as it takes them, and passed again."""

    __slots__ = ("call", "compiled", "direct", "exe_key", "steady")

    def __init__(self, compiled, key: str) -> None:
        self.compiled, self.exe_key = compiled, key
        self.call = compiled  # then its call without Compiled.__call__ (``direct_call``)
        self.direct = None  # ``call`` once it ran (as ``_program._Aot.direct``)
        self.steady = None  # (as ``_program._Aot.steady``)

    def __call__(self, *args):
        call = self.call
        try:
            out = call(*args)
        except (TypeError, ValueError):  # raised before it runs anything
            return self.fallback(*args)
        if call is self.compiled:  # it ran: from now on called directly
            self.steady = steady_call(call)
            self.call = self.direct = direct_call(call)
        return out

    def fallback(self, *args):
        """The call of arguments the executable rejected: laid out as it takes them."""
        formats = self.compiled.input_formats[0]
        return self.compiled(*jax.tree.map(_conform, tuple(args), tuple(formats)))


def _conform(x, fmt):
    if fmt is None or (fmt.layout is None and fmt.sharding is None):
        return x
    return jax.device_put(x, fmt)


class _Layout:
    """What ``TrainFns.saved_positions`` reads of the forward's residual layout."""

    def __init__(self, input_pos: tuple[int, ...]) -> None:
        self.input_pos = input_pos


@jax.tree_util.register_pytree_node_class
class _StoredResiduals:
    """The residuals of a stored forward: the arrays it computed, and the inputs it read (a
    pytree of both, as ``_residuals.Residuals`` is)."""

    __slots__ = ("inputs", "kept")

    def __init__(self, kept: list, inputs: list) -> None:
        self.kept, self.inputs = kept, inputs

    def tree_flatten(self):
        return (self.kept, self.inputs), None

    @classmethod
    def tree_unflatten(cls, _, children):
        return cls(*children)


class _StoredForward:
    """``(seed, diff, rest) -> (diff_outs, aux_outs, residuals)`` from a stored executable."""

    def __init__(self, exe: _Loaded, t: _Training, num_inputs: int) -> None:
        self.exe, self.exe_key, self.layout = exe, exe.exe_key, _Layout(t.input_pos)
        rest = [k for k in range(num_inputs) if k not in frozenset(t.diff_in)]
        where = {k: (True, i) for i, k in enumerate(t.diff_in)}
        where.update({k: (False, i) for i, k in enumerate(rest)})
        self._fetch = [(None, None) if k < 0 else where[k] for k in t.input_pos]

    def __call__(self, seed, diff: Sequence, rest: Sequence):
        douts, aux, kept = self.exe(seed, diff, rest)
        inputs = [seed if d is None else (diff if d else rest)[i] for d, i in self._fetch]
        return douts, aux, _StoredResiduals(kept, inputs)

    def steady(self) -> tuple | None:
        """As ``_residuals._Wrapped.steady``: the executable's C++ call once it ran, the input
        positions the residuals hold, and what makes them."""
        if self.exe.direct is None:
            return None
        return self.exe.direct, self.layout.input_pos, _StoredResiduals


class _StoredBackward:
    """The freed graph's backward from stored executables (loaded at the first backward,
    ``_Pending``); a backward that keeps the graph, or one whose executables turned out
    unusable, runs the program's own (``StoredProgram.full``) on the stored forward's
    residuals."""

    def __init__(self, program: StoredProgram, t: _Training, pending: dict[str, _Pending]) -> None:
        self.program, self.diff_in, self.packing = program, t.diff_in, t.packing
        self._split_plan, self._pending = t.split, pending
        self._absent = tuple(t.absent)  # (the stored executables take no other structure)
        self._runner: Callable | None = None  # (kept, inputs, cts) -> gradients
        self.on_compiled = None

    def _stored_runner(self) -> Callable | None:
        if self._runner is None and self._pending:
            if self._split_plan is None:
                self._runner = self._pending["backward"].result()
            else:
                n = len(self._split_plan["segments"])
                exes = [self._pending[f"segment{i}"].result() for i in range(n)]
                if None not in exes:
                    split = SplitBackward.restored(self._split_plan, [_segment(e) for e in exes])
                    self._runner = split
            self._pending = {}
        return self._runner

    def steady(self) -> Callable | None:
        """As ``_residuals.Backward.steady``: the stored freed backward's C++ call once it
        ran; None before, and where it is split or rebuilt."""
        runner = self._runner
        return runner.direct if isinstance(runner, _Loaded) else None

    def ready(self) -> tuple[int, ...]:
        """As ``_residuals.Backward.ready``: from the record (a backward that runs otherwise
        hands every gradient out at once, which the chain of nodes also takes)."""
        return () if self._split_plan is None else tuple(self._split_plan["ready"])

    def __call__(self, res: _StoredResiduals, cts, donate: bool = False):
        if donate:
            runner = self._stored_runner()
            if runner is not None and absent(cts) == self._absent:
                return runner(res.kept, res.inputs, cts)
        # (traced inside x64, as every trace: the caller may run outside it, where it changes
        # nothing for the calls themselves: ``_autograd._Plan.bare_backward``)
        with x64(), no_stack_capture():
            fns, layout = self.program.full_training(self.diff_in)
            grads = fns.bwd(
                _residuals.Residuals(res.kept, list(res.inputs), layout), cts, donate=donate
            )
        # (known once it ran: the caller unpacks by ours)
        if not isinstance(grads, Run) and fns.bwd.packing != self.packing:
            raise RuntimeError(
                "torch2xla internal error: a backward rebuilt from the persistent cache packs "
                "its gradients otherwise than the stored one; please report this (workaround: "
                "TORCH2XLA_PERSISTENT_CACHE=0)"
            )
        return grads


class _Checked:
    """Stands in for a stored program's traced function: what ``XlaProgram`` and training read
    of it after a call, the runtime checks whose status its executables return last."""

    def __init__(self, checks: tuple) -> None:
        self.checks = checks

    def __call__(self, *args):
        raise AssertionError("a stored program is not traced")


class StoredProgram(XlaProgram):
    """An ``XlaProgram`` restored from a record: the same call path, the stored executables.

    ``materialize()`` builds the program the usual way (export, lowering), for what the record
    does not hold; that happens at most once.
    """

    def __init__(
        self,
        record: _Record,
        device: jax.Device,
        exes: dict[str, Any],
        materialize: Callable[[], XlaProgram],
        state: BuildState | None = None,
    ) -> None:
        # (XlaProgram.__init__ is not called: it traces the graph)
        self._state = state if state is not None else contextlib.nullcontext()
        opts = record.options
        self.gm = None
        self.split_backward, self.remat = opts["split_backward"], opts["remat"]
        self.compiler_options, self.auto_layouts = opts["compiler_options"], opts["auto_layouts"]
        self.device = device
        self.torch_device = (
            torch.device("cpu") if device.platform == "cpu" else torch.device("cuda", device.id)
        )
        self.rng = record.rng
        # (``remember`` records no program with these; see there)
        self._layouts, self.foreign_in, self.foreign_out, self.in_place = (), (), (), ()
        self._flat_fn = _Checked(record.checks)
        self.mark_untracked = record.mark_untracked
        self.tensor_pos = record.tensor_pos
        self._order = getattr(record, "order", ())  # (records of before it: none)
        self.single_output = record.single_output
        self.packing, self.diff_out, self.num_outputs = (
            record.packing,
            record.diff_out,
            record.num_outputs,
        )
        self._cuda = device.platform != "cpu"
        self._all_tensors = self.tensor_pos == tuple(range(record.n_inputs))
        self._views = ViewCache(len(self.tensor_pos), writes=self._cuda)
        self._host_views = not self._cuda
        self._write_pos = (  # (as ``XlaProgram._write_pos``)
            None
            if self._cuda
            else write_positions(record.packing, record.mutations, record.tensor_pos)
        )
        self.to_torch = cuda_to_torch(device) if self._cuda else to_torch_cpu
        self.cut = None if self._cuda else cut_cpu
        # (an inference call's packed outputs are the new values of mutated inputs, which the
        # entry copies into them: views of one tensor, ``cut_cpu_views``)
        self.cut_writes = None if self._cuda else cut_cpu_views
        default = jax.config.jax_default_device or jax.devices()[0]
        self._place = default != device
        self.wide = record.wide
        self.scoped = self._place or record.wide
        self._train_cache = {}
        self.plans: dict = {}  # ``_autograd._Plan`` per diff_in (``apply_differentiable``)
        self._remat_fn = None
        self._materialize, self._full, self._lock = materialize, None, threading.Lock()
        self._rebuilt_forward: dict[tuple[int, ...], Any] = {}
        inference = exes.get("inference")
        self._infer = inference if inference is not None else _Rebuilt(self)
        t = record.training
        self.stored_training = t is not None  # (else: an inference program)
        if t is not None:
            fwd = _StoredForward(exes["forward"], t, len(self.tensor_pos))
            later = {role: p for role, p in exes.items() if isinstance(p, _Pending)}
            bwd = _StoredBackward(self, t, later)
            self._train_cache[t.diff_in] = _train_fns.TrainFns(fwd, bwd, t.aux_out, deps=t.deps)

    def full(self) -> XlaProgram:
        """The program built the usual way (export and lowering run once, at the first need)."""
        with self._lock:
            if self._full is None:
                log.info(
                    "torch2xla: %s: building what the persistent cache does not hold",
                    getattr(self, "label", "program"),
                )
                self._full = self._materialize()
            return self._full

    def full_training(self, diff_in: tuple[int, ...]):
        """The built program's ``TrainFns`` for ``diff_in``, its forward traced (so that its
        residual layout, which the stored forward's residuals follow, is known)."""
        full = self.full()
        fns = full.train_fns(diff_in)
        layout = getattr(fns.fwd, "layout", None)
        if layout is None:
            stored = self._train_cache[diff_in].fwd.exe.compiled
            # (as precompile traced it: CUDA inputs arrive as arrays on the device, CPU ones
            # as numpy views; a lowering of other argument kinds would not hit the cache)
            sharding = jax.sharding.SingleDeviceSharding(self.device) if self._cuda else None
            args = jax.tree.map(
                lambda i: jax.ShapeDtypeStruct(i.shape, i.dtype, sharding=sharding),
                stored.args_info[0],
            )
            with self._state:  # (lowerings read torch's state as they trace)
                compiled = fns.fwd.trace(*args).lower().compile()  # sets the layout, formats
            fns.fwd.adopt(compiled, compiled.exe_key)
            layout = fns.fwd.layout
        return fns, layout

    def train_fns(self, diff_in: tuple[int, ...]):
        fns = self._train_cache.get(diff_in)
        if fns is None:
            fns = self._train_cache[diff_in] = self.full().train_fns(diff_in)
        return fns

    def train_flat_fn(self):
        return self.full().train_flat_fn()

    def accumulate_order(self) -> tuple[int, ...]:
        return self._order

    def connected(self, diff_in: tuple[int, ...]) -> tuple[frozenset[int], ...]:
        # (a record stores the connections of the training programs it holds; a training
        # program built later, as for an inference record differentiated through
        # ``torch.enable_grad()`` inside the graph, finds them on the built program)
        return self.full().connected(diff_in)

    def live_inputs(self, diff_in: tuple[int, ...], active: tuple[int, ...]):
        # (the record's connections stand, unless the program was built for another need:
        # building it only to refine them would undo what the record saves)
        full = self._full
        return None if full is None else full.live_inputs(diff_in, active)

    # eager's autograd graph of the ATen graph, which a create_graph backward differentiates
    # again (``_double_backward.VjpProgram``): the record holds no graph, the built program has it
    def input_metas(self) -> list:
        return self.full().input_metas()

    def output_metas(self) -> list:
        return self.full().output_metas()

    def autograd_outputs(self, tensors) -> list:
        return self.full().autograd_outputs(tensors)

    @property
    def _graph_diff_out(self) -> tuple[int, ...]:
        return self.full()._graph_diff_out

    def checked_fn(self):
        return self._flat_fn


class _Rebuilt:
    """The inference executable of a restored program whose record holds none."""

    direct = steady = None  # (``_program._Aot.direct``: every call goes through __call__)

    def __init__(self, program: StoredProgram) -> None:
        self.program = program

    def __call__(self, *args):
        return self.program.full()._infer(*args)


def _segment(exe: _Loaded) -> Callable:
    return lambda args: exe(*args)


class _Pending:
    """An executable loaded at its first use (the backward's, at the first backward):
    ``result()`` is a ``_Loaded``, or None where its entry turned out unusable.

    NOTE: loaded in the thread that needs it, with jaxlib's stack capture off as every compile
    of torch2xla is (``_interop.no_stack_capture``). A background thread loading while another
    thread switches the process-wide capture failed in jaxlib ("Expecting an IFRT
    LoadedExecutable to have a user context"), and saved nothing measurable.
    """

    _UNSET = object()

    def __init__(self, store, exe: _Exe, device: jax.Device) -> None:
        self._args, self._loaded = (store, exe, device), self._UNSET

    def result(self) -> _Loaded | None:
        if self._loaded is self._UNSET:
            store, exe, device = self._args
            with no_stack_capture():
                self._loaded = _load(store, exe, device)
        return self._loaded


def _load(store, exe: _Exe, device: jax.Device) -> _Loaded | None:
    compiled = _persistent.load_executable(store, exe.key, exe.in_tree, exe.out_tree, device)
    return None if compiled is None else _Loaded(compiled, exe.key)


def fetch(key: str, device: jax.Device):
    """``(record, executables to load, device)`` of the signature ``key``; None where there
    is no usable record or one of its executables has no entry (the signature is then built
    as usual, which writes them)."""
    record = load(key)
    store = _persistent.store()
    if record is None or store is None:
        return None
    exes = _executables(record)
    programs = store.path / _persistent.PROGRAMS
    if not all((programs / e.key).is_file() for e in exes.values()):
        return None
    return record, {role: _Pending(store, e, device) for role, e in exes.items()}, device


def _executables(record: _Record) -> dict[str, _Exe]:
    wanted: dict[str, _Exe] = {}
    if record.inference is not None:
        wanted["inference"] = record.inference
    t = record.training
    if t is not None:
        wanted["forward"] = t.forward
        if t.backward is not None:
            wanted["backward"] = t.backward
        if t.split is not None:
            for i, (key, in_tree, out_tree) in enumerate(t.split["executables"]):
                wanted[f"segment{i}"] = _Exe(key, in_tree, out_tree)
    return wanted


def restore(
    fetched,
    gm: torch.fx.GraphModule,
    materialize: Callable[[], XlaProgram],
    state: BuildState | None = None,
) -> tuple[LoweredGraph, StoredProgram] | None:
    """The lowered-graph stand-in and the program of ``fetch``'s result (None where the
    executables needed first are unusable: the signature is then built as usual). The
    backward's executables are loaded at the first backward. ``state``: torch's state of the
    restoring call, under which ``materialize`` runs and the built program is traced."""
    if fetched is None:
        return None
    record, pending, device = fetched
    named = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers())}
    if any(n not in named for n in record.lifted):
        return None
    lifted = tuple(named[n] for n in record.lifted)
    exes: dict[str, Any] = {}
    for role, p in pending.items():
        if role in ("inference", "forward"):
            loaded = p.result()
            if loaded is None:
                return None
            exes[role] = loaded
        else:
            exes[role] = p
    if record.checks:  # (their lines: this process's, from its Dynamo graph)
        nodes = list(gm.graph.nodes)
        record = dataclasses.replace(record, checks=tuple(c.at(nodes) for c in record.checks))
    program = StoredProgram(record, device, exes, materialize, state)
    lowered = LoweredGraph(
        None, lifted, record.mutations, record.num_user_outputs, lifted_names=record.lifted
    )
    _persistent.count_hit(len(exes))
    return lowered, program


def arg_spec(args: Sequence) -> list:
    """What ``example_args`` needs to make arguments like ``args`` (no tensor is kept)."""
    spec = []
    for a in args:
        if isinstance(a, torch.Tensor):
            value = a.item() if a.dim() == 0 and a.numel() == 1 and not a.is_cuda else None
            spec.append(
                (
                    "tensor",
                    tuple(a.shape),
                    tuple(a.stride()),
                    a.dtype,
                    a.device,
                    a.requires_grad,
                    value,
                    a.storage_offset(),
                )
            )
        else:
            spec.append(("value", a))
    return spec


def example_args(spec: list) -> list:
    """Arguments with the metadata (and the 0-d values) ``arg_spec`` recorded.

    NOTE: the storage offset too, which the stored key holds: a graph calling ``as_strided``
    reads it (its explicit offset counts from the storage's start), and the program built
    later (a backward that keeps the graph) was lowered for offset 0 where the stored one
    was for the call's, reading other elements or raising."""
    out = []
    for s in spec:
        if s[0] == "value":
            out.append(s[1])
            continue
        _, shape, stride, dtype, device, requires_grad, value, offset = s
        extent = 1 + sum((n - 1) * st for n, st in zip(shape, stride)) if all(shape) else 0
        storage = torch.empty(offset + extent, dtype=dtype, device=device).untyped_storage()
        t = torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)
        if value is not None:
            t.fill_(value)
        out.append(t.requires_grad_(requires_grad))
    return out
