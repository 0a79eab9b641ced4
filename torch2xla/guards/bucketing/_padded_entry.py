"""A bucket's program at a call: the inputs padded to the bucket, the outputs (and the inputs
written in place) sliced back to the real sizes, size outputs taken at the real sizes, views
made again where eager returns views (``PaddedEntry``; the plan is ``_bucket.Bucketing``'s)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sympy
import torch

from torch2xla.guards._key import _expr
from torch2xla.guards.bucketing._padding import SizeValue

if TYPE_CHECKING:
    from torch2xla.guards.bucketing._bucket import Bucketing

_MEMO_LIMIT = 4096


@dataclasses.dataclass(frozen=True)
class _CallPlan:
    inputs: tuple[tuple[int, tuple[int, ...]], ...]  # (position, padded shape)
    ints: tuple[tuple[int, int], ...]  # (position, padded value)
    outputs: tuple  # per user output: None, or per dim (padded atom sizes, real atom sizes)
    writeback: tuple[int, ...]  # padded inputs updated in place
    expected: tuple  # per user output: eager's shape (from Dynamo's metadata), or None
    device: torch.device  # where the real sizes of a rewritten program go


class PaddedEntry:
    """Runs a bucket's program on padded copies of the inputs; returns real-size outputs."""

    def __init__(self, bucketing: Bucketing, inner, padded: tuple) -> None:
        self.bucketing, self.inner, self.padded = bucketing, inner, padded
        # The real sizes this program reads (kept: ``Bucketing.give_up`` drops the plan's).
        self.lengths = bucketing.lengths
        self._plans: dict[tuple, _CallPlan] = {}
        # Entries of the wrapped program that other code reads (explain, tests).
        self.program = getattr(inner, "program", None)

    def __call__(self, args: Sequence):
        values = self.bucketing.key.symbol_values(args)
        if values == self.padded and not self.lengths:
            return self.inner(args)
        new_args, plan = self.pad(args, values)
        # (views of inputs are made below, of the caller's tensors: the inner entry's would be
        # of the padded copies, with the recorded strides, which a dense copy may not hold)
        if getattr(self.inner, "aliases", ()):
            outs = self.inner(new_args, views=False)
        else:
            outs = self.inner(new_args)
        # eager's version bumps per input (``_entry.eager_versions``), where not the copy's one
        versions = getattr(self.inner, "versions", None)
        with torch.no_grad():
            for i in plan.writeback:
                before = args[i]._version if not args[i].is_inference() else None
                args[i].copy_(new_args[i][tuple(slice(0, n) for n in args[i].shape)])
                bumps = versions[i] if versions is not None else None
                if before is not None and bumps is not None and bumps != 1:
                    # (off the CPU never below the copy's bump: _entry.set_versions)
                    if args[i].device.type != "cpu":
                        bumps = max(bumps, 1)
                    torch._C._autograd._unsafe_set_version_counter((args[i],), (before + bumps,))
        result = [_unpad(o, spec) for o, spec in zip(outs, plan.outputs)]
        # Views of inputs: of the caller's tensors, not of their padded copies (``_aliases``)
        for alias in getattr(self.inner, "aliases", ()):
            result[alias.output] = alias.regenerate(args, result)
            out = result[alias.output]
            # (``x.detach()``; an input returned itself stays that object, as in ``Entry``)
            if alias.output in getattr(self.inner, "detach", ()) and out.requires_grad:
                result[alias.output] = out.detach()
        # Views of one intermediate: of one tensor with eager's layouts for the real sizes
        for group in getattr(self.inner, "shared", ()):
            group.regenerate(args, result)
        # The only view of an intermediate (HF's sliding-window cache keeps a slice of its
        # keys; Dynamo guards its ``_base``): still a view once unpadded to a dense copy
        for i in getattr(self.inner, "lone", ()):
            if result[i]._base is None:
                result[i] = result[i].view_as(result[i])
        for k, (o, shape) in enumerate(zip(result, plan.expected)):
            if shape is not None and isinstance(o, torch.Tensor) and tuple(o.shape) != shape:
                raise RuntimeError(
                    f"torch2xla: bucketing bug: output {k} has shape {tuple(o.shape)} after "
                    f"unpadding, eager's is {shape}; please report it (options "
                    "{'buckets': None} avoids it)"
                )
        return result

    def pad(self, args: Sequence, values: tuple) -> tuple[list, _CallPlan]:
        plan = self._plans.get(values)
        if plan is None:
            if len(self._plans) > _MEMO_LIMIT:
                self._plans.clear()
            plan = self._plans[values] = self._plan(args, values)
        new_args = list(args)
        with torch.no_grad():
            for i, shape in plan.inputs:
                t = args[i]
                p = _zeros_in_layout_of(t, shape)
                p[tuple(slice(0, n) for n in t.shape)] = t
                new_args[i] = p
        for i, v in plan.ints:
            new_args[i] = v
        if self.lengths:
            new_args.extend(self.bucketing.length_tensors(self.lengths, values, plan.device))
        return new_args, plan

    def _plan(self, args: Sequence, values: tuple) -> _CallPlan:
        b = self.bucketing
        key = b.key
        # Every symbol at its keyed value (the bucket's for padded ones, the real one else):
        # an input dim Dynamo sizes by an expression (s0 + 1) is padded to its value there.
        binding = {src.symbol: sympy.Integer(v) for src, v in zip(key.sources, self.padded)}

        def at(expr, n):
            if expr is None or not expr.free_symbols <= binding.keys():
                return n
            return int(expr.xreplace(binding))

        inputs, ints = [], []
        for i, node in enumerate(key.placeholders):
            ex = node.meta.get("example_value")
            if isinstance(ex, torch.Tensor) and isinstance(args[i], torch.Tensor):
                shape = tuple(at(_expr(s), n) for s, n in zip(ex.shape, args[i].shape))
                if shape != tuple(args[i].shape):
                    inputs.append((i, shape))
            elif isinstance(ex, torch.SymInt) and at(_expr(ex), args[i]) != args[i]:
                ints.append((i, at(_expr(ex), args[i])))
        device = next(
            (args[i].device for i, _ in inputs),
            next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu")),
        )
        real = {s: v for s, v in zip(b._our_syms, values) if s.is_Symbol}
        pad = {s: v for s, v in zip(b._our_syms, self.padded) if s.is_Symbol}
        outputs = []
        analysis = b.analysis
        for state in analysis.outputs if analysis is not None else ():
            if isinstance(state, SizeValue):
                outputs.append(_RealValue(state.expr.xreplace(real)))
                continue
            if (
                state is None
                or isinstance(state, list)
                or not any(s is not None for dim in state for _, s in dim)
            ):
                outputs.append(None)
                continue
            dims = []
            for dim in state:
                padded_atoms = tuple(int(e.xreplace(pad)) for e, _ in dim)
                real_atoms = tuple(int(e.xreplace(real)) for e, _ in dim)
                dims.append((padded_atoms, real_atoms))
            outputs.append(tuple(dims))
        padded_inputs = {i for i, _ in inputs}
        writeback = tuple(
            i for i in (analysis.mutated_inputs if analysis else ()) if i in padded_inputs
        )
        binding = {src.symbol: sympy.Integer(v) for src, v in zip(key.sources, values)}
        return _CallPlan(
            tuple(inputs),
            tuple(ints),
            tuple(outputs),
            writeback,
            _eager_shapes(b.gm, binding),
            device,
        )


def _eager_shapes(gm: torch.fx.GraphModule, binding: dict) -> tuple:
    """Each output's shape as eager computes it for the sizes ``binding`` (None: unknown)."""
    out = gm.graph.find_nodes(op="output")[0].args[0]
    shapes = []
    for node in out if isinstance(out, list | tuple) else (out,):
        ex = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        shape = None
        if isinstance(ex, torch.Tensor):
            dims = [
                sympy.sympify(s).xreplace(binding)
                if _expr(s) is None
                else _expr(s).xreplace(binding)
                for s in ex.shape
            ]
            if all(d.is_Integer for d in dims):
                shape = tuple(int(d) for d in dims)
        shapes.append(shape)
    return tuple(shapes)


def _dims_outermost_first(t: torch.Tensor) -> list[int]:
    """``t``'s dims in memory order, outermost first, as TensorIterator orders them for an
    elementwise result (``_loops._order``): an expanded dim (stride 0) tells nothing, so an
    expanded input keeps the row-major order eager's results have (sorted by stride alone, its
    stride-0 dim went innermost: ``x * 2`` of ``expand(3, 4)`` came back transposed)."""
    from torch2xla.ops._loops import _order

    return list(reversed(_order(tuple(t.shape), (tuple(t.stride()),))))


def _zeros_in_layout_of(t: torch.Tensor, shape) -> torch.Tensor:
    """Zeros of ``shape`` laid out in memory as ``t`` is (its dims in the same order, dense):
    the padded program sees the input's layout, so its outputs have eager's (a channels_last
    input gives a channels_last result)."""
    if t.is_contiguous() or t.ndim < 2:
        return t.new_zeros(shape)
    return torch.empty_permuted(
        shape, _dims_outermost_first(t), dtype=t.dtype, device=t.device
    ).zero_()


@dataclasses.dataclass(frozen=True)
class _RealValue:
    """A size output's value at the real sizes (sympy: an Integer or a boolean)."""

    value: Any


def _unpad(out, spec):
    if isinstance(spec, _RealValue):  # (the program returns the bucket's, a 0-d tensor)
        if not isinstance(out, torch.Tensor):
            return type(out)(spec.value)
        return torch.full_like(
            out, bool(spec.value) if out.dtype == torch.bool else int(spec.value)
        )
    if spec is None or not isinstance(out, torch.Tensor):
        return out
    if all(len(p) == 1 for p, _ in spec):
        if all(p == r for p, r in spec):
            return out
        real = out[tuple(slice(0, r[0]) for _, r in spec)]
    else:
        atoms = [n for p, _ in spec for n in p]
        index = tuple(slice(0, n) for _, r in spec for n in r)
        real = out.reshape(atoms)[index].reshape([math.prod(r) for _, r in spec])
    return _in_layout_of(real, out)


def _in_layout_of(real: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``real`` (the real part of the padded output ``out``) with the strides eager gives it:
    dense, its dims in memory in ``out``'s order (row-major for most outputs; a transposed or
    channels_last result keeps its order), the dims ``out`` expands (stride 0) still expanded.
    A slice of ``out`` has the padded sizes' strides, and a reshape of one may be a view too."""
    shape = real.shape
    expanded = [d for d in range(out.ndim) if out.stride(d) == 0 and shape[d] > 1]
    kept = [1 if d in expanded else n for d, n in enumerate(shape)]
    # (size-1 dims, whose strides are free, go inside the dims of their stride)
    order = sorted(range(out.ndim), key=lambda d: (-out.stride(d), kept[d] == 1))
    want, step = [0] * out.ndim, 1
    for d in reversed(order):
        want[d] = 0 if d in expanded else step
        step *= kept[d]
    if real.stride() == tuple(want):
        return _own(real, out)
    src = real
    for d in expanded:
        src = src.narrow(d, 0, 1)
    dense = torch.empty_permuted(kept, order, dtype=out.dtype, device=out.device).copy_(src)
    # (the copy's bump: the version eager's output has, ``out``'s; inference tensors have none)
    if not (dense.requires_grad or dense.is_inference() or out.is_inference()):
        torch._C._autograd._unsafe_set_version_counter((dense,), (out._version,))
    return dense.expand(shape) if expanded else dense


def _own(real: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``real``, a slice of the padded output ``out``, as a tensor of its own over the same
    memory, as eager's result is: no ``_base`` (a view's ``detach_()`` raises "Can't detach
    views in-place"), ``out``'s version."""
    if real._base is None or real.requires_grad:
        return real
    with torch.inference_mode(out.is_inference()):
        own = torch.empty((0,), dtype=real.dtype, device=real.device)
        own.set_(real.untyped_storage(), real.storage_offset(), real.shape, real.stride())
    if not own.is_inference():  # (``set_`` bumped it; inference tensors have no version)
        torch._C._autograd._unsafe_set_version_counter((own,), (out._version,))
    return own
