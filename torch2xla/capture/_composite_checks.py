"""Value checks of torch composites that the traced decomposition skips.

Eager's ``torch.istft`` (C++) computes the overlap-add of the squared window and raises where
its smallest magnitude in the returned span is below 1e-11 (the division by it would not
invert the STFT: a zero window, or a hop that leaves samples uncovered). The composite torch
traces (``torch._refs.istft``, registered for ``CompositeImplicitAutograd``) divides by the
envelope without asking, so a compiled call returned NaN or infinities. ``checked_istft``
replaces ``torch.istft`` calls on the Dynamo graph (``_eager_calls.margin_losses``): it computes
the same envelope and asserts it (``_assert_async``, raised after the program ran with eager's
message, naming the op and the user's line), then calls ``torch.istft``.
"""

from __future__ import annotations

import torch
from torch._prims_common import corresponding_real_dtype

_LEGACY = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}


def _flag(value) -> str:
    """How eager's message writes a bool or an optional (C++ ``<<``)."""
    if value is None:
        return "None"
    return str(int(value)) if isinstance(value, bool) else str(value)


def _message(input, n_fft, hop, win, window, center, normalized, onesided, length, complex_):
    device = input.device.type
    kind = f"{device.upper()}{_LEGACY.get(input.dtype, input.dtype)}Type"
    if window is None:
        w = "None"
    else:
        prefix = "torch.cuda." if window.device.type == "cuda" else "torch."
        w = f"{prefix}{_LEGACY.get(window.dtype, window.dtype)}Tensor{{[{window.shape[0]}]}}"
    sizes = ", ".join(str(s) for s in input.shape)
    return (
        f"istft({kind}[{sizes}], n_fft={n_fft}, hop_length={hop}, win_length={win}, "
        f"window={w}, center={_flag(center)}, normalized={_flag(normalized)}, "
        f"onesided={_flag(onesided)}, length={_flag(length)}, "
        f"return_complex={_flag(complex_)}) window overlap add min: 1\n"
        f"[ {device.upper()}BoolType{{}} ]"
    )


def checked_istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    """``torch.istft`` with eager's check of the window's overlap-add envelope."""
    args = (hop_length, win_length, window, center, normalized, onesided, length, return_complex)
    hop = hop_length if hop_length is not None else n_fft // 4
    win = win_length if win_length is not None else n_fft
    frames = input.shape[-1] if input.dim() in (2, 3) else 0
    valid = 0 < hop <= win <= n_fft and frames > 0  # (else torch.istft raises eager's error)
    if valid and (window is None or tuple(window.shape) == (win,)):
        real = corresponding_real_dtype(input.dtype) if input.is_complex() else input.dtype
        w = window if window is not None else torch.ones(win, dtype=real, device=input.device)
        left = (n_fft - win) // 2
        w = torch.nn.functional.pad(w, (left, n_fft - win - left))
        total = n_fft + hop * (frames - 1)
        envelope = torch.ops.aten.unfold_backward(
            w.pow(2).expand(frames, n_fft), [total], 0, n_fft, hop
        )
        start = n_fft // 2 if center else 0
        if length is not None:
            end = start + length
        else:
            end = total - n_fft // 2 if center else total
        envelope = envelope[start:end]
        if envelope.numel():
            message = _message(
                input, n_fft, hop, win, window, center, normalized, onesided, length, return_complex
            )
            torch._assert_async(~(envelope.abs().min() < 1e-11), message)
    return torch.istft(input, n_fft, *args)


checked_istft.__name__ = checked_istft.__qualname__ = "istft"
