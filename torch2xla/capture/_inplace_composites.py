"""Dynamo's splitting of in-place ``addcdiv_``/``addcmul_``/``add_(alpha=)`` on an integer or
bool tensor, made the same on every torch version.

Dynamo writes ``s.addcdiv_(t1, t2, value=v)`` without ``v`` among the graph's inputs: torch
2.13 as ``s.copy_(fma(t1 / t2, v, s))``, torch 2.11 as ``s.add_(t1 / t2 * v)`` (``addcmul_``
through a polyfill of the same form, ``add_(o, alpha=a)`` as ``s.add_(o * a)``).
``_rewrites.pointwise_composites`` puts either back whole, so that eager's checks of the call
hold. On an integer ``s`` torch 2.11's form cannot even be traced: ``t1 / t2`` (or ``* 0.5``)
is a float, which ``add_`` refuses to write into ``s`` ("Promotion of int.add/sub_(float) in
in-place ops are not possible"), so Dynamo raised its own error where eager raises addcdiv's
("Integer division with addcdiv is no longer supported") or returns a value
(``addcmul_(.., value=0.5)`` of an integer tensor: ``v`` cast to the tensor's type first).
``install`` has Dynamo write torch 2.13's form for an integer or bool ``s`` (and ``add_`` with
a number ``alpha`` whole, as torch 2.13 records it); a float ``s`` keeps the installed torch's
own form, which traces.
"""

from __future__ import annotations

import functools


@functools.cache
def install() -> None:
    """Wrap Dynamo's ``TensorVariable.method_addcdiv_``/``method_addcmul_``/``method_add_``
    for an integer or bool ``self`` (identical to torch 2.13's own where it is installed)."""
    import torch

    try:
        from torch._dynamo import config
        from torch._dynamo.variables.tensor import TensorVariable
        from torch._dynamo.variables.torch import TorchInGraphFunctionVariable
        from torch._inductor import inductor_prims
    except ImportError:  # (another layout of Dynamo's internals: left as it is)
        return
    methods = ("method_addcdiv_", "method_addcmul_", "method_add_")
    if not all(hasattr(TensorVariable, m) for m in methods):
        return

    def integral(var) -> bool:
        dtype = getattr(var, "dtype", None)
        return isinstance(dtype, torch.dtype) and not (dtype.is_floating_point or dtype.is_complex)

    def composite(part_fn, traced):
        @functools.wraps(traced)
        def method(self, tx, tensor1, tensor2, *, value=None):
            if value is None or not config.enable_dynamo_decompositions or not integral(self):
                return traced(self, tx, tensor1, tensor2, value=value)
            part = TorchInGraphFunctionVariable(part_fn).call_function(tx, [tensor1, tensor2], {})
            fma = TorchInGraphFunctionVariable(inductor_prims.fma)
            return self.call_method(
                tx, "copy_", [fma.call_function(tx, [part, value, self], {})], {}
            )

        return method

    TensorVariable.method_addcdiv_ = composite(torch.div, TensorVariable.method_addcdiv_)
    TensorVariable.method_addcmul_ = composite(torch.mul, TensorVariable.method_addcmul_)
    traced_add = TensorVariable.method_add_

    @functools.wraps(traced_add)
    def method_add_(self, tx, other, *, alpha=None):
        if alpha is not None and integral(self) and not isinstance(alpha, TensorVariable):
            return None  # (recorded whole: eager's checks of a float alpha hold)
        return traced_add(self, tx, other, alpha=alpha)

    TensorVariable.method_add_ = method_add_
