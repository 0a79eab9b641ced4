"""The final hidden and cell states of torch's Python decomposition of ``aten::lstm`` keep
eager's shape ``(layers * directions, batch, hidden)`` on every torch version.

torch 2.11's ``torch._decomp.decompositions.one_layer_lstm`` (the layer the decomposition
takes wherever eager's kernel does not take oneDNN: oneDNN off, projections, a dtype oneDNN
lacks) squeezes its ``(1, batch, hidden)`` final states at dim 1, a no-op for a batch of more
than one, so ``h_n``/``c_n`` came out ``(layers * directions, 1, batch, hidden)``. Dynamo's
fake tensors run that decomposition: the graph's shapes were wrong from there on (``h[-1]``
of shape ``(1, batch, hidden)``, ``h.view(h.shape[1], -1)`` baked as ``view(1, -1)``), and
so was the exported ATen graph of any LSTM call ``preserve_rnns`` does not keep whole (under
CPU autocast, with projections): silently wrong shapes where eager's kernel is right.
torch 2.13 squeezes dim 0. ``install`` asks the installed layer once, on a batch of two,
and where it keeps the extra dimension wraps it to drop it; a torch whose layer is right is
left as it is.
"""

from __future__ import annotations

import functools


@functools.cache
def install() -> None:
    """Wrap torch's ``one_layer_lstm`` where its final states keep the squeezed dimension."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes

    try:
        from torch._decomp import decompositions
    except ImportError:  # (another layout of torch's decompositions: left as it is)
        return
    layer = getattr(decompositions, "one_layer_lstm", None)
    if layer is None:
        return
    batch, hidden = 2, 1
    cpu = {"dtype": torch.float32, "device": "cpu"}  # (not the user's defaults)
    weights = [torch.zeros(4 * hidden, 1, **cpu), torch.zeros(4 * hidden, hidden, **cpu)]
    states = (torch.zeros(batch, hidden, **cpu), torch.zeros(batch, hidden, **cpu))
    with _disable_current_modes(), torch.no_grad():
        _, (h, c) = layer(torch.zeros(1, batch, 1, **cpu), states, weights, False)
    if h.shape == states[0].shape and c.shape == states[1].shape:
        return

    @functools.wraps(layer)
    def one_layer_lstm(inp, hidden, params, has_biases, reverse=False):
        out, (h, c) = layer(inp, hidden, params, has_biases, reverse=reverse)
        # (``(1, batch, size)`` where the batch is not 1: eager's kernel gives (batch, size))
        return out, (h.squeeze(0) if h.dim() == 3 else h, c.squeeze(0) if c.dim() == 3 else c)

    decompositions.one_layer_lstm = one_layer_lstm
