"""Double backward: a program's vjp as a differentiable program of its own (``VjpProgram``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import torch

from torch2xla.autodiff._connected import traced_links, traced_live
from torch2xla.autodiff._half_sums import float32_sums
from torch2xla.autodiff._train_fns import TrainFns, build_train_fns, conj, jax_values
from torch2xla.ops._grad_mode import differentiable_backward
from torch2xla.runtime._jax_scope import x64


class VjpProgram:
    """``(*inputs, *cotangents) -> input gradients`` of a program differentiated with respect
    to ``diff_in``, for the cotangents of its differentiated outputs ``active``, in torch's
    gradient convention, with the interface ``XlaFunction`` runs (so it can be differentiated
    again). The forward is recomputed from the inputs.

    Which gradient is connected to which input or cotangent is eager's double backward graph:
    the base program's outputs computed by torch on fake tensors and differentiated with
    ``create_graph=True`` (``autograd_outputs``); a gradient connected to no differentiated
    input is not tracked (``mark_untracked``), as eager's ``round`` backward returns zeros
    that do not require grad.
    """

    scoped = True  # its calls run inside JAX's config contexts (x64, placement)
    mark_untracked = True

    def __init__(self, program, diff_in: tuple[int, ...], active: tuple[int, ...]) -> None:
        n = len(program.tensor_pos)
        flat_fn = program.train_flat_fn()
        outs_active = [program.diff_out[j] for j in active]
        diff_set = frozenset(diff_in)

        def vjp_flat_fn(seed, *tensors):
            # (the derivative rules traced here are eager's grad-mode ones, ``_grad_mode``)
            with differentiable_backward():
                return vjp_in_grad_mode(seed, *tensors)

        def vjp_in_grad_mode(seed, *tensors):
            inputs, cts = tensors[:n], tensors[n:]

            def f(*d):
                di = iter(d)
                full = [next(di) if k in diff_set else inputs[k] for k in range(n)]
                outs = flat_fn(seed, *full)
                return [outs[i] for i in outs_active]

            _, vjp = jax.vjp(f, *(inputs[k] for k in diff_in))
            # NOTE: torch's convention, see cotangent
            grads = float32_sums(vjp)([conj(ct) for ct in cts])
            return tuple(conj(g) for g in grads)

        self._base, self._base_diff_in, self._active, self._n = program, diff_in, active, n
        self._flat_fn = vjp_flat_fn
        self.tensor_pos = tuple(range(n + len(active)))
        # The forward is recomputed from the inputs and cotangents as they are at the next
        # backward: an in-place change of one since raises eager's error (``_versions``),
        # where eager's double backward would read the values it saved or raise.
        self.saved_inputs = self.tensor_pos
        self.diff_out = tuple(range(len(diff_in)))
        self._graph_diff_out = self.diff_out
        self.num_outputs = len(diff_in)
        self.device, self.to_torch = program.device, program.to_torch
        self.torch_device = program.torch_device
        self.compiler_options = program.compiler_options
        self.auto_layouts = program.auto_layouts
        self.label = f"{getattr(program, 'label', 'torch2xla')}:vjp"
        self._train_cache: dict[tuple[int, ...], TrainFns] = {}
        self.plans: dict = {}  # ``_autograd._Plan`` per diff_in (``apply_differentiable``)
        self._untracked = jax.jit(vjp_flat_fn, compiler_options=self.compiler_options)
        self._links: dict[tuple[int, ...], tuple[int, ...]] = {}

    @classmethod
    def of(cls, program, diff_in: tuple[int, ...], active: tuple[int, ...]) -> VjpProgram:
        cache = program.__dict__.setdefault("_vjp_programs", {})
        key = (diff_in, active)
        if key not in cache:
            cache[key] = cls(program, diff_in, active)
        return cache[key]

    def train_flat_fn(self) -> Callable:
        return self._flat_fn

    checked_fn = train_flat_fn

    def train_fns(self, diff_in: tuple[int, ...]) -> TrainFns:
        if diff_in not in self._train_cache:
            self._train_cache[diff_in] = build_train_fns(
                self._flat_fn,
                len(self.tensor_pos),
                diff_in,
                self.diff_out,
                self.num_outputs,
                compiler_options=self.compiler_options,
                auto_layouts=self.auto_layouts,
                device=self.device,
            )
        return self._train_cache[diff_in]

    # -- eager's autograd graph (``_connected``) ------------------------------------------
    def input_metas(self) -> list:
        """Tensors with the shape, stride, dtype and device of the inputs (fake)."""
        base = self._base
        outs = base.output_metas()
        return [*base.input_metas(), *(outs[base._graph_diff_out[j]] for j in self._active)]

    def output_metas(self) -> list:
        inputs = self._base.input_metas()
        return [inputs[k] for k in self._base_diff_in]

    def autograd_outputs(self, tensors: Sequence[torch.Tensor]) -> list:
        """The gradients torch computes with ``create_graph=True`` for ``tensors`` (fake, with
        autograd on); None where eager gives none."""
        base, n = self._base, self._n
        inputs, cts = tensors[:n], tensors[n:]
        outs = base.autograd_outputs(inputs)
        pairs = [(outs[base._graph_diff_out[j]], ct) for j, ct in zip(self._active, cts)]
        pairs = [(o, ct) for o, ct in pairs if isinstance(o, torch.Tensor) and o.requires_grad]
        leaves = [inputs[k] for k in self._base_diff_in]
        if not pairs:
            return [None] * len(leaves)
        grads = torch.autograd.grad(
            [o for o, _ in pairs],
            leaves,
            [ct for _, ct in pairs],
            create_graph=True,
            allow_unused=True,
        )
        return list(grads)

    def connected(self, diff_in: tuple[int, ...]) -> tuple[frozenset[int], ...]:
        """Per gradient, the positions in ``diff_in`` connected to it in eager's double
        backward graph (the base's differentiated inputs require grad, as in the call)."""
        if diff_in not in self._links:
            base = frozenset(self._base_diff_in)
            grad = [k in diff_in or k in base for k in range(len(self.tensor_pos))]
            self._links[diff_in] = traced_links(
                self.autograd_outputs, self.input_metas(), grad, self.num_outputs, self.label
            )
        links = self._links[diff_in]
        return tuple(
            frozenset(p for p, k in enumerate(diff_in) if links[i] >> k & 1)
            for i in self._graph_diff_out
        )

    def live_inputs(self, diff_in: tuple[int, ...], active: tuple[int, ...]) -> frozenset[int]:
        """The positions in ``diff_in`` that eager's double backward through the gradients
        ``active`` reaches with a gradient (``_connected.traced_live``: a norm's or a
        convolution's double backward node passes None to inputs it is connected to)."""
        base = frozenset(self._base_diff_in)
        grad = [k in diff_in or k in base for k in range(len(self.tensor_pos))]
        found = traced_live(self.autograd_outputs, self.input_metas(), grad, active, self.label)
        return (
            None if found is None else frozenset(p for p, k in enumerate(diff_in) if found >> k & 1)
        )

    def placement(self):
        return jax.default_device(self.device)

    def jax_inputs(self, tensors: Sequence[torch.Tensor]) -> list:
        return jax_values(tensors)

    def call_untracked(self, seed, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        with x64(), jax.default_device(self.device):
            outs = self._untracked(seed, *self.jax_inputs(tensors))
        return [self.to_torch(o) for o in outs]
