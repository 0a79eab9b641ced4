"""``torch.utils.swap_tensors`` of tensors that torch2xla's caches remember.

``swap_tensors`` refuses a tensor that has weak references. torch swaps a module's parameters
with it in ``nn.Module._apply`` (``m.double()``, ``m.to("cuda")``, ``m.to_empty(...)``) and in
``load_state_dict`` where ``torch.__future__.set_swap_module_params_on_conversion(True)``, and
for tensor subclasses; eager and torch's backends leave parameters without weak references,
so those calls ran there and raised "Cannot swap t1 because it has weakref associated with
it" after a compiled call here. Two caches hold weak references to the tensors they remember
(dropping what they keep when a tensor dies, so that they pin no memory): the programs'
imported views of parameters and buffers (``_interop.ViewCache``) and the JAX arrays behind
tensors CUDA programs exported (``_exported``). ``install`` wraps ``swap_tensors``: both
forget the two tensors first (their weak references go), then the swap runs as in eager;
the next call imports the swapped tensors again.
"""

from __future__ import annotations

import functools
import weakref

import torch

from torch2xla.runtime import _exported

# Every live ``ViewCache`` (each has ``forget(t)``).
CACHES: weakref.WeakSet = weakref.WeakSet()


def forget(t: torch.Tensor) -> None:
    """Every cache drops what it remembers of ``t`` (and its weak reference to it)."""
    for cache in list(CACHES):
        cache.forget(t)
    _exported.forget(t)


@functools.cache
def install() -> None:
    """Make ``torch.utils.swap_tensors`` forget its tensors in our caches first."""
    original = torch.utils.swap_tensors

    @functools.wraps(original)
    def swap_tensors(t1, t2):
        for t in (t1, t2):
            if isinstance(t, torch.Tensor):
                forget(t)
        return original(t1, t2)

    torch.utils.swap_tensors = swap_tensors
