"""Writes into a program's inputs made in place on a GPU: the input is donated to the program.

A graph that writes into its inputs (an optimizer step's parameters and moments, a static KV
cache, BatchNorm's running statistics) returns their new values as outputs, which the entry
copies into the inputs (``_entry.Entry``): on a GPU a second pass over that memory (8 ms a
step for a ~1B model's AdamW) and a second buffer of that size while it runs. Donated to the
program (``jax.jit``'s ``donate_argnums``), a DLPack import of a CUDA tensor is a buffer XLA
writes its output into (checked on an H200: the output's pointer is the tensor's, torch reads
the new values, and the memory stays torch's after the output dies), so the copy is skipped
where the value already sits in the input's memory.

What is donated (``donations``): on CUDA only (XLA's CPU client copies a donated import, and
CPU inputs reach JAX as numpy views), without runtime checks (a call that raises must leave
its inputs as they were; GPU programs do not check by default), never in a differentiated
call (a training forward keeps inputs as residuals), and only inputs whose new value JAX
pairs with that input: JAX pairs each output, in order, with the first donated input of the
same shape and dtype left, so a pairing that crosses (two caches of one shape written in
another order than they are passed) drops the donations of that shape and dtype.

``TORCH2XLA_IN_PLACE=0`` turns it off (the writes are copied back, as on the CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch2xla._options import env_flag
from torch2xla.runtime._interop import _DLPACK_DTYPES

ENABLED = env_flag("TORCH2XLA_IN_PLACE", True)


def donations(
    writes: Sequence[int],
    tensor_pos: Sequence[int],
    inputs: Sequence,
    metas: Sequence,
    skip: frozenset[int] = frozenset(),
) -> dict[int, int]:
    """``{output: tensor position}`` of the writes to donate: ``writes[i]`` is the position among
    ``inputs`` (the program's arguments) that output ``i`` is the new value of; ``metas`` the
    outputs (fake tensors); outputs in ``skip`` are not donated (written with autograd's
    record)."""
    if not ENABLED:
        return {}
    position = {p: k for k, p in enumerate(tensor_pos)}
    out: dict[int, int] = {}
    seen: set[int] = set()
    for i, p in enumerate(writes):
        k = position.get(p)
        if k is None or i in skip or k in seen:
            continue
        seen.add(k)
        t, m = inputs[p], metas[i]
        if _donatable(t, m):
            out[i] = k
    return out


def _donatable(t, meta) -> bool:
    return (
        isinstance(t, torch.Tensor)
        and isinstance(meta, torch.Tensor)
        and t.is_cuda
        and t.dtype in _DLPACK_DTYPES
        and t.numel() > 0
        and t.is_contiguous()
        and t.storage_offset() == 0
        and not (t.is_conj() or t.is_neg())
        and meta.dtype == t.dtype
        and tuple(meta.shape) == tuple(t.shape)
    )


def paired(donated: dict[int, int], in_avals: Sequence, out_avals: Sequence) -> dict[int, int]:
    """The subset of ``donated`` (output -> input position) that JAX pairs as asked: for each
    output in order, the first donated input of its aval left (``in_avals``/``out_avals``: a
    hashable shape and dtype per tensor input and per output, in the order the jitted function
    takes and returns them)."""
    donated = dict(donated)
    while donated:
        wrong = _crossed(donated, in_avals, out_avals)
        if not wrong:
            break
        donated = {o: k for o, k in donated.items() if in_avals[k] not in wrong}
    return donated


def _crossed(donated: dict[int, int], in_avals: Sequence, out_avals: Sequence) -> set:
    queues: dict = {}
    for k in sorted(donated.values()):
        queues.setdefault(in_avals[k], []).append(k)
    wanted = {k: o for o, k in donated.items()}
    wrong = set()
    for o, aval in enumerate(out_avals):
        queue = queues.get(aval)
        if queue:
            k = queue.pop(0)
            if wanted[k] != o:
                wrong.add(aval)
    return wrong


def written_in_place(value: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether ``value`` (an output exported from JAX) already is ``target``'s memory."""
    return value.data_ptr() == target.data_ptr() and target.is_contiguous()


def exported(pairs: Sequence[tuple[int, int]], outs: list, tensors: Sequence, to_torch) -> list:
    """The torch tensors of a call's outputs ``outs`` (JAX arrays): an output XLA wrote into
    its donated input's memory (``pairs``: output, input position) is that input's own tensor
    (detached), not a DLPack export of it (~5 us each: 24 caches a decoded token, three
    tensors a parameter in an AdamW step). One output of the call is always exported: torch's
    current stream then waits for the program, whose outputs share one completion event, so
    torch reads the inputs' new values after XLA wrote them."""
    kept = {}
    for o, k in pairs:
        t = tensors[k]
        if outs[o].unsafe_buffer_pointer() == t.data_ptr() and t.is_contiguous():
            kept[o] = t.detach() if t.requires_grad else t
    if kept and not any(a.size for i, a in enumerate(outs) if i not in kept):
        del kept[min(kept)]  # (nothing else exported with a stream to wait on: this one is)
    return [kept[i] if i in kept else to_torch(a) for i, a in enumerate(outs)]
