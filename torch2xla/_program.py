"""One compiled XLA program: a functional ATen graph traced to JAX, jitted, and called on torch
tensors. Training calls go through ``_autograd.XlaFunction``."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
import torch

from torch2xla._interpret import to_jax_function, uses_rng
from torch2xla._autograd import XlaFunction
from torch2xla._interop import to_jax, to_torch, x64


def _is_float(meta) -> bool:
    return isinstance(meta, torch.Tensor) and (meta.dtype.is_floating_point or meta.dtype.is_complex)


def _draw_seed() -> np.uint32:
    # Drawn from torch's default generator, so torch.manual_seed makes XLA's randomness repeat.
    return np.uint32(torch.randint(0, 2**31 - 1, ()).item())


class XlaProgram:
    """Runs an ATen graph through XLA.

    Args:
        gm: functional ATen graph; its placeholders are the program's inputs.
        example_args: one call's arguments; non-tensor arguments are baked in as constants.
        output_requires_grad: per output, whether eager would track it (None: every float output).
        remat: wrap the forward in ``jax.checkpoint`` when differentiating.
    """

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_args: Sequence,
        output_requires_grad: Sequence[bool] | None = None,
        remat: bool = False,
    ) -> None:
        self.gm = gm
        fn = to_jax_function(gm)
        self.rng = uses_rng(gm)
        self.tensor_pos = tuple(i for i, a in enumerate(example_args) if isinstance(a, torch.Tensor))
        statics = {i: a for i, a in enumerate(example_args) if not isinstance(a, torch.Tensor)}
        n_args = len(example_args)

        def flat_fn(seed, *tensors):
            it = iter(tensors)
            full = [statics[i] if i in statics else next(it) for i in range(n_args)]
            return fn(seed, *full)

        self._flat_fn = flat_fn
        out_metas = gm.graph.find_nodes(op="output")[0].args[0]
        metas = [o.meta.get("val") if isinstance(o, torch.fx.Node) else o for o in out_metas]
        if output_requires_grad is None:
            output_requires_grad = [True] * len(metas)
        self.diff_out = tuple(
            i for i, (m, rg) in enumerate(zip(metas, output_requires_grad)) if rg and _is_float(m)
        )
        self.num_outputs = len(metas)
        self.remat = remat
        self._infer = jax.jit(flat_fn)
        self._train_cache: dict[tuple[int, ...], tuple] = {}

    # -- inference -------------------------------------------------------------------------
    def __call__(self, args: Sequence) -> list[torch.Tensor]:
        seed = _draw_seed() if self.rng else None
        tensors = [args[i] for i in self.tensor_pos]
        if torch.is_grad_enabled():
            diff_in = tuple(
                k for k, t in enumerate(tensors) if t.requires_grad and t.dtype.is_floating_point
            )
            if diff_in and self.diff_out:
                return list(XlaFunction.apply(self, diff_in, seed, *tensors))
        jargs = [to_jax(t) for t in tensors]
        with x64():
            outs = self._infer(seed, *jargs)
        return [to_torch(o) for o in outs]

    # -- training --------------------------------------------------------------------------
    def train_fns(self, diff_in: tuple[int, ...]):
        """Jitted (forward-with-vjp, backward) for inputs ``diff_in`` being differentiated."""
        fns = self._train_cache.get(diff_in)
        if fns is None:
            fns = self._train_cache[diff_in] = self._build_train(diff_in)
        return fns

    def _build_train(self, diff_in: tuple[int, ...]):
        flat_fn, diff_out = self._flat_fn, self.diff_out
        diff_set, out_set = set(diff_in), set(diff_out)
        aux_out = tuple(i for i in range(self.num_outputs) if i not in out_set)

        def fwd(seed, diff, rest):
            def f(*d):
                di, ri = iter(d), iter(rest)
                full = [next(di) if k in diff_set else next(ri) for k in range(len(d) + len(rest))]
                outs = flat_fn(seed, *full)
                return [outs[i] for i in diff_out], [outs[i] for i in aux_out]

            if self.remat:
                f = jax.checkpoint(f)
            douts, vjp_fn, aux = jax.vjp(f, *diff, has_aux=True)
            return douts, aux, vjp_fn

        bwd = jax.jit(lambda vjp_fn, cts: vjp_fn(cts))
        return jax.jit(fwd), bwd, aux_out
