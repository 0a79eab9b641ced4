"""FFT, signal processing and complex tensors as users write them, against eager (session 33):
``torch.fft`` with ``n=``/``s=``/``dim=``/``norm=`` on odd and even lengths, padding and
truncation; ``fftshift``/``fftfreq`` with their ``dtype``/``device`` keywords; ``stft``/``istft``
with the options ``probe_science30`` leaves out; window functions and ``torch.signal.windows``;
spectrogram and mel-like pipelines; FFT convolution; complex autograd through ``.real``/``.imag``/
``.abs``/``.angle``/``view_as_real``/``polar``/``complex``/``conj``; conjugate bits; complex type
promotion; half inputs; eager's errors.

    PYTHONPATH=. python scripts/probe_fft33.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_fft33.py   # torch's own

Observations: values (rtol 1e-5 for float32, 1e-12 for float64), dtypes, shapes, strides,
conjugate and negative bits, ``requires_grad``, the None-ness of gradients, mutated inputs and
errors (type, and eager's message at the start of ours), eager's warnings.

Differences left (session 33): a gradient eager hands back as a lazy conjugate
(``fft_hfft_n6_*``, ``cx_conj``, ``cx_resolve_conj``, ``cx_view_as_real_of_conj``: ours
resolved, same values); strides of a view with gaps of an intermediate that requires grad
(``pipe_fft_conv_same``, ``cx_conj_mul``, ``cx_conj_input_grad``,
``fft_grad_complex_leaf_only_imag``: docs/design.md, Output strides) and of a double
backward's gradient (``grad_twice_fft``); ``pipe_db_spectrogram`` (float32 rounding: eager's
and ours are as far from float64's); eager's warnings that Dynamo alone changes
(``stft_no_window_hop_default``, ``stft_return_complex_false_err``, ``fft_half_irfft_err``,
``istft_normalized_length_longer``: warned once per process, aot_eager alike).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import difference, observations, run, same_error_or_value, same_items

import torch2xla  # noqa: F401

warnings.simplefilter("ignore")
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}


def describe(v):
    if isinstance(v, torch.Tensor):
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            v.stride() if v.layout == torch.strided else None,
            (v.is_conj(), v.is_neg(), v.requires_grad),
            v.detach().resolve_conj().resolve_neg().clone(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} vs {b[0]} ({a[1:3]} vs {b[1:3]})"
    if a[0] == "L":
        return same_items(a, b, path, same)
    if a[0] != "T":
        return same_error_or_value(a, b, path)
    for n, x, y in zip(("dtype", "shape", "stride", "conj/neg/rg"), a[1:5], b[1:5]):
        if x != y:
            return f"{path}: {n} {x} (xla) vs {y} (eager)"
    x, y = a[5], b[5]
    if x.is_floating_point() or x.is_complex():
        dbl = x.dtype in (torch.float64, torch.complex128)
        lo = x.dtype in (torch.float16, torch.bfloat16, torch.complex32)
        tol = (1e-12, 1e-12) if dbl else (2e-2, 2e-2) if lo else (1e-5, 1e-5)
        if x.dtype == torch.complex32:
            x, y = x.to(torch.complex64), y.to(torch.complex64)
        if not torch.allclose(x, y, rtol=tol[0], atol=tol[1], equal_nan=True):
            return f"{path}: values differ, max {(x - y).abs().max().item():.3g}\n{x}\n{y}"
    elif not torch.equal(x, y):
        return f"{path}: values {x} vs {y}"
    return None


def _observe(fn, C) -> list:
    """``observations`` and eager's warnings (not torch2xla's or Dynamo's own)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs = observations(fn, C, describe)
    msgs = sorted(
        {
            str(w.message).split("\n")[0][:100]
            for w in caught
            if not (type(w.message).__module__ or "").startswith("torch2xla")
            and "torch/_dynamo" not in (w.filename or "")
            and "torch2xla" not in (w.filename or "")
        }
    )
    return [*obs, ("warnings", ("V", msgs))]


def compare(name, fn) -> str:
    def C(f, **kw):
        return torch.compile(f, backend=BACKEND, **kw)

    got = _observe(fn, C)
    exp = _observe(fn, lambda f, **kw: f)
    d = difference(got, exp, same)
    return f"DIFF  {name}: {d}" if d else f"ok    {name}"


def x_(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.randn(*shape, generator=g, dtype=torch.complex128).to(dtype)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def grad_case(name, f, make):
    """Outputs, then the gradients of every float/complex input (None-ness included) of the
    real sum of every output that requires grad, then the inputs (mutations)."""

    def sc(C, rec):
        g = C(f)
        args = [a.clone().requires_grad_(a.is_floating_point() or a.is_complex()) for a in make()]
        out = g(*args)
        rec("out", out)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        ts = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if ts:
            tot = sum(
                (o.real if o.is_complex() else o).sum() + (o.imag.sum() if o.is_complex() else 0)
                for o in ts
            )
            tot.backward()
        rec("grads", [a.grad for a in args])

    SCENARIOS[name] = sc


def val_case(name, f, make):
    def sc(C, rec):
        args = make()
        rec("out", C(f)(*args))
        rec("args", list(args))

    SCENARIOS[name] = sc


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# ============================================================================================
# torch.fft: n=, s=, dim=, norm= on odd and even lengths
for _norm in ("forward", "backward", "ortho"):
    for _n in (5, 6, 9):
        grad_case(
            f"fft_fft_n{_n}_{_norm}",
            lambda x, n=_n, m=_norm: torch.fft.fft(x, n=n, norm=m),
            lambda: (x_(2, 7),),
        )
        grad_case(
            f"fft_ifft_complex_n{_n}_{_norm}",
            lambda x, n=_n, m=_norm: torch.fft.ifft(x, n=n, dim=0, norm=m),
            lambda: (x_(7, 3, dtype=torch.complex64),),
        )
        grad_case(
            f"fft_irfft_n{_n}_{_norm}",
            lambda x, n=_n, m=_norm: torch.fft.irfft(x, n=n, norm=m),
            lambda: (x_(3, 4, dtype=torch.complex64),),
        )
        grad_case(
            f"fft_rfft_n{_n}_{_norm}",
            lambda x, n=_n, m=_norm: torch.fft.rfft(x, n=n, norm=m),
            lambda: (x_(3, 7),),
        )
        grad_case(
            f"fft_hfft_n{_n}_{_norm}",
            lambda x, n=_n, m=_norm: torch.fft.hfft(x, n=n, norm=m),
            lambda: (x_(2, 4, dtype=torch.complex64),),
        )
        grad_case(
            f"fft_ihfft_n{_n}_{_norm}",
            lambda x, n=_n, m=_norm: torch.fft.ihfft(x, n=n, norm=m),
            lambda: (x_(2, 7),),
        )
grad_case(
    "fft_rfftn_s_dim_odd",
    lambda x: torch.fft.rfftn(x, s=(3, 5), dim=(0, 2), norm="forward"),
    lambda: (x_(4, 2, 6),),
)
grad_case(
    "fft_irfftn_s_dim_odd",
    lambda x: torch.fft.irfftn(x, s=(3, 7), dim=(0, 2), norm="ortho"),
    lambda: (x_(4, 2, 3, dtype=torch.complex64),),
)
grad_case(
    "fft_irfftn_default_s",
    lambda x: torch.fft.irfftn(x),
    lambda: (x_(3, 5, dtype=torch.complex64),),
)
grad_case("fft_fft2_s_pad_trunc", lambda x: torch.fft.fft2(x, s=(7, 3)), lambda: (x_(2, 5, 6),))
grad_case("fft_fft2_dims_neg", lambda x: torch.fft.fft2(x, dim=(-1, -3)), lambda: (x_(3, 2, 4),))
grad_case(
    "fft_fftn_dim_only", lambda x: torch.fft.fftn(x, dim=1, norm="ortho"), lambda: (x_(3, 4),)
)
grad_case("fft_fftn_dim_empty", lambda x: torch.fft.fftn(x, dim=()), lambda: (x_(3, 4),))
grad_case(
    "fft_ifftn_complex_all",
    lambda x: torch.fft.ifftn(x),
    lambda: (x_(2, 3, 4, dtype=torch.complex64),),
)
grad_case(
    "fft_hfft2_s",
    lambda x: torch.fft.hfft2(x, s=(3, 5), norm="forward"),
    lambda: (x_(4, 4, dtype=torch.complex64),),
)
grad_case(
    "fft_ihfftn_s_dim",
    lambda x: torch.fft.ihfftn(x, s=(5,), dim=(0,)),
    lambda: (x_(6, 2),),
)
grad_case("fft_rfft2_s_odd", lambda x: torch.fft.rfft2(x, s=(5, 5)), lambda: (x_(4, 6),))
grad_case(
    "fft_irfft2_s_odd",
    lambda x: torch.fft.irfft2(x, s=(4, 5)),
    lambda: (x_(4, 3, dtype=torch.complex64),),
)
grad_case(
    "fft_f64_all",
    lambda x: (
        torch.fft.fft(x, n=9),
        torch.fft.irfft(torch.fft.rfft(x), n=9, norm="forward"),
        torch.fft.hfft(torch.fft.ihfft(x), n=8),
    ),
    lambda: (x_(3, 8, dtype=torch.float64),),
)
grad_case(
    "fft_c128_all",
    lambda x: (torch.fft.fft(x, n=5), torch.fft.ifft2(x, norm="ortho"), torch.fft.hfft(x)),
    lambda: (x_(3, 4, dtype=torch.complex128),),
)
grad_case("fft_transposed_in", lambda x: torch.fft.rfft(x.t()), lambda: (x_(6, 3),))
grad_case("fft_fft_dim0_strides", lambda x: torch.fft.fft(x, dim=0), lambda: (x_(6, 3),))
grad_case("fft_rfft_dim0_strides", lambda x: torch.fft.rfft(x, dim=0), lambda: (x_(6, 3),))
grad_case(
    "fft_irfft_dim0_strides",
    lambda x: torch.fft.irfft(x, dim=0),
    lambda: (x_(4, 3, dtype=torch.complex64),),
)
grad_case("fft_fft2_dim0_2", lambda x: torch.fft.fft2(x, dim=(0, 2)), lambda: (x_(4, 3, 2),))
grad_case("fft_sliced_input", lambda x: torch.fft.fft(x[:, ::2]), lambda: (x_(3, 10),))
grad_case("fft_expanded_input", lambda x: torch.fft.rfft(x.expand(3, 6)), lambda: (x_(1, 6),))
grad_case("fft_0d_scalar_mul", lambda x: torch.fft.fft(x) * torch.tensor(2.0), lambda: (x_(5),))
grad_case(
    "fft_of_real_part", lambda z: torch.fft.fft(z.real), lambda: (x_(5, dtype=torch.complex64),)
)
val_case(
    "fft_int32_input",
    lambda x: torch.fft.rfft(x, norm="ortho"),
    lambda: (torch.arange(7, dtype=torch.int32),),
)
val_case("fft_int_ifft", lambda x: torch.fft.ifft(x, n=4), lambda: (torch.arange(6),))
val_case("fft_int_hfft", lambda x: torch.fft.ihfft(x), lambda: (torch.arange(6),))
val_case(
    "fft_uint8_fft2",
    lambda x: torch.fft.fft2(x),
    lambda: (torch.arange(6, dtype=torch.uint8).view(2, 3),),
)
val_case("fft_bf16_err", lambda x: torch.fft.rfft(x), lambda: (x_(8, dtype=torch.bfloat16),))
val_case("fft_half_odd_err", lambda x: torch.fft.fft(x), lambda: (x_(7, dtype=torch.float16),))
val_case(
    "fft_half_irfft_err", lambda x: torch.fft.irfft(x), lambda: (x_(4, dtype=torch.complex32),)
)
val_case(
    "fft_rfft_complex_err", lambda x: torch.fft.rfft(x), lambda: (x_(4, dtype=torch.complex64),)
)
val_case(
    "fft_ihfft_complex_err", lambda x: torch.fft.ihfft(x), lambda: (x_(4, dtype=torch.complex64),)
)
val_case(
    "fft_irfft_n0_err", lambda x: torch.fft.irfft(x, n=0), lambda: (x_(4, dtype=torch.complex64),)
)
val_case(
    "fft_irfft_n_neg_err",
    lambda x: torch.fft.irfft(x, n=-2),
    lambda: (x_(4, dtype=torch.complex64),),
)
val_case(
    "fft_irfft_len1_default_err",
    lambda x: torch.fft.irfft(x),
    lambda: (x_(1, dtype=torch.complex64),),
)
val_case("fft_fft2_dim_dup_err", lambda x: torch.fft.fft2(x, dim=(0, 0)), lambda: (x_(3, 4),))
val_case("fft_rfftn_dim_oob_err", lambda x: torch.fft.rfftn(x, dim=(0, 3)), lambda: (x_(3, 4),))
val_case("fft_fftn_s_neg1", lambda x: torch.fft.fftn(x, s=(-1, 3)), lambda: (x_(3, 4),))
val_case("fft_fft_0d_err", lambda x: torch.fft.fft(x), lambda: (torch.tensor(1.0),))
val_case(
    "fft_hfft_empty_err",
    lambda x: torch.fft.hfft(x),
    lambda: (torch.zeros(0, dtype=torch.complex64),),
)
val_case("fft_norm_none", lambda x: torch.fft.fft(x, norm=None), lambda: (x_(5),))
val_case(
    "fft_rfft_out_kw",
    lambda x, o: torch.fft.rfft(x, out=o),
    lambda: (x_(6), torch.empty(4, dtype=torch.complex64)),
)


# fftshift / fftfreq
val_case(
    "shift_odd_dims",
    lambda x: (
        torch.fft.fftshift(x, dim=(0, -1)),
        torch.fft.ifftshift(x, dim=1),
        torch.fft.ifftshift(torch.fft.fftshift(x)),
        torch.fft.fftshift(x, dim=-2),
    ),
    lambda: (x_(3, 5, 4),),
)
val_case("shift_complex", lambda x: torch.fft.fftshift(x), lambda: (x_(5, dtype=torch.complex64),))
val_case("shift_int", lambda x: torch.fft.ifftshift(x), lambda: (torch.arange(7),))
grad_case("shift_grad", lambda x: torch.fft.fftshift(torch.fft.fft(x)).abs(), lambda: (x_(7),))
val_case(
    "freq_kwargs",
    lambda x: (
        torch.fft.fftfreq(5, d=0.25, dtype=torch.float64),
        torch.fft.rfftfreq(9, 1 / 16, dtype=torch.float64, device="cpu"),
        torch.fft.fftfreq(1),
        torch.fft.rfftfreq(1),
        torch.fft.fftfreq(6, device=x.device),
        torch.fft.rfftfreq(x.shape[0], d=2.0) * x[: x.shape[0] // 2 + 1],
    ),
    lambda: (x_(10),),
)
val_case(
    "freq_requires_grad",
    lambda x: torch.fft.fftfreq(4, requires_grad=True) * x,
    lambda: (x_(4),),
)
val_case(
    "freq_half",
    lambda x: torch.fft.fftfreq(8, dtype=torch.float16) + x,
    lambda: (x_(8, dtype=torch.float16),),
)
val_case(
    "freq_int_dtype_err",
    lambda x: torch.fft.fftfreq(8, dtype=torch.int64) + x,
    lambda: (torch.arange(8),),
)
val_case("freq_d_int", lambda x: torch.fft.rfftfreq(8, d=3) + x, lambda: (x_(5),))
val_case(
    "freq_default_dtype_f64",
    lambda x: _with_default(torch.float64, lambda: torch.fft.fftfreq(4) + x),
    lambda: (x_(4, dtype=torch.float64),),
)


def _with_default(dt, f):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dt)
    try:
        return f()
    finally:
        torch.set_default_dtype(old)


# ============================================================================================
# stft / istft
def _stft(**kw):
    return lambda x: torch.view_as_real(torch.stft(x, return_complex=True, **kw))


for _pm in ("reflect", "replicate", "circular", "constant"):
    grad_case(
        f"stft_pad_{_pm}",
        _stft(n_fft=8, hop_length=3, window=torch.hann_window(8), pad_mode=_pm),
        lambda: (x_(2, 21),),
    )
grad_case(
    "stft_winlen_lt_nfft",
    _stft(n_fft=10, hop_length=4, win_length=7, window=torch.hamming_window(7, periodic=False)),
    lambda: (x_(33),),
)
grad_case("stft_no_window_hop_default", _stft(n_fft=12), lambda: (x_(50),))
grad_case(
    "stft_normalized_window",
    _stft(n_fft=8, hop_length=2, window=torch.hann_window(8), normalized=True, onesided=True),
    lambda: (x_(24),),
)
grad_case(
    "stft_complex_input",
    _stft(n_fft=8, hop_length=4, window=torch.hann_window(8)),
    lambda: (x_(30, dtype=torch.complex64),),
)
grad_case(
    "stft_f64",
    _stft(n_fft=9, hop_length=3, window=torch.kaiser_window(9, dtype=torch.float64)),
    lambda: (x_(40, dtype=torch.float64),),
)
val_case(
    "stft_return_complex_false_err",
    lambda x: torch.stft(x, 8, window=torch.hann_window(8), return_complex=False),
    lambda: (x_(32),),
)
val_case(
    "stft_nfft_too_big_err",
    lambda x: torch.stft(x, 64, window=torch.hann_window(64), center=False, return_complex=True),
    lambda: (x_(32),),
)
val_case(
    "stft_window_size_err",
    lambda x: torch.stft(x, 16, window=torch.hann_window(8), return_complex=True),
    lambda: (x_(64),),
)
val_case(
    "stft_reflect_too_short_err",
    lambda x: torch.stft(x, 16, window=torch.hann_window(16), return_complex=True),
    lambda: (x_(6),),
)


def _istft_rt(n_fft, hop, win, **kw):
    def f(x):
        s = torch.stft(
            x,
            n_fft,
            hop_length=hop,
            window=win,
            return_complex=True,
            **{k: v for k, v in kw.items() if k in ("center", "normalized", "onesided")},
        )
        return torch.istft(s, n_fft, hop_length=hop, window=win, **kw)

    return f


grad_case(
    "istft_center_false", _istft_rt(8, 2, torch.hann_window(8), center=False), lambda: (x_(34),)
)
grad_case(
    "istft_normalized_length_longer",
    _istft_rt(8, 2, torch.hann_window(8), normalized=True, length=70),
    lambda: (x_(64),),
)
grad_case(
    "istft_length_shorter",
    _istft_rt(16, 4, torch.hamming_window(16), length=40),
    lambda: (x_(2, 64),),
)
grad_case(
    "istft_onesided_false",
    lambda x: torch.istft(
        torch.stft(
            x, 8, hop_length=2, window=torch.hann_window(8), return_complex=True, onesided=False
        ),
        8,
        hop_length=2,
        window=torch.hann_window(8),
        onesided=False,
    ),
    lambda: (x_(32),),
)
grad_case(
    "istft_return_complex",
    lambda z: torch.view_as_real(
        torch.istft(
            torch.stft(z, 8, hop_length=2, window=torch.hann_window(8), return_complex=True),
            8,
            hop_length=2,
            window=torch.hann_window(8),
            onesided=False,
            return_complex=True,
        )
    ),
    lambda: (x_(32, dtype=torch.complex64),),
)
grad_case(
    "istft_from_spec",
    lambda s: torch.istft(s, 14, hop_length=7, window=torch.hann_window(14)),
    lambda: (x_(8, 9, dtype=torch.complex64),),
)
val_case(
    "istft_bad_window_size_err",
    lambda s: torch.istft(s, 14, hop_length=7, window=torch.hann_window(10)),
    lambda: (x_(8, 9, dtype=torch.complex64),),
)
val_case(
    "istft_real_input_err",
    lambda s: torch.istft(s, 14, hop_length=7, window=torch.hann_window(14)),
    lambda: (x_(8, 9),),
)
val_case(
    "istft_wrong_freq_bins_err",
    lambda s: torch.istft(s, 16, hop_length=4, window=torch.hann_window(16)),
    lambda: (x_(8, 9, dtype=torch.complex64),),
)
val_case(
    "istft_hop_gt_win_err",
    lambda s: torch.istft(s, 8, hop_length=10, window=torch.hann_window(8)),
    lambda: (x_(5, 9, dtype=torch.complex64),),
)


# ============================================================================================
# windows
val_case(
    "windows_torch",
    lambda x: (
        torch.hann_window(8, periodic=False),
        torch.hann_window(1),
        torch.hann_window(0),
        torch.hamming_window(9, periodic=False, alpha=0.5, beta=0.4),
        torch.kaiser_window(8, periodic=False, beta=8.0),
        torch.kaiser_window(7, beta=5.0, dtype=torch.float64),
        torch.blackman_window(9, periodic=False, dtype=torch.float64),
        torch.bartlett_window(8, periodic=False),
        torch.bartlett_window(1),
        torch.hann_window(x.shape[0]) * x,
    ),
    lambda: (x_(6),),
)
val_case(
    "windows_signal",
    lambda x: (
        torch.signal.windows.gaussian(7, std=1.5),
        torch.signal.windows.gaussian(8, std=2.0, sym=False),
        torch.signal.windows.cosine(7),
        torch.signal.windows.exponential(8, tau=2.0, sym=False),
        torch.signal.windows.exponential(7, tau=3.0),
        torch.signal.windows.hann(6, sym=False),
        torch.signal.windows.hamming(6),
        torch.signal.windows.blackman(7),
        torch.signal.windows.bartlett(7),
        torch.signal.windows.general_hamming(8, alpha=0.6, sym=False),
        torch.signal.windows.general_cosine(7, a=[0.5, 0.3, 0.2]),
        torch.signal.windows.nuttall(9),
        torch.signal.windows.kaiser(7, beta=6.0, dtype=torch.float64),
        x,
    ),
    lambda: (x_(1),),
)
val_case(
    "windows_signal_errs",
    lambda x: torch.signal.windows.gaussian(7, std=-1.0) + x,
    lambda: (x_(7),),
)
val_case("windows_neg_err", lambda x: torch.hann_window(-1) + x, lambda: (x_(1),))
val_case(
    "windows_int_dtype_err", lambda x: torch.hann_window(4, dtype=torch.int64) + x, lambda: (x_(4),)
)
val_case(
    "kaiser_from_shape",
    lambda x: torch.kaiser_window(x.shape[-1], beta=4.0, periodic=False) * x,
    lambda: (x_(2, 9),),
)


# ============================================================================================
# pipelines
def _mel_fb(n_freq, n_mels):
    f = torch.linspace(0, 1, n_freq)
    c = torch.linspace(0, 1, n_mels + 2)
    lo, mid, hi = c[:-2, None], c[1:-1, None], c[2:, None]
    return torch.clamp(torch.minimum((f - lo) / (mid - lo), (hi - f) / (hi - mid)), min=0).T


_FB = _mel_fb(9, 5)


def _power(s):
    return s.real**2 + s.imag**2


grad_case(
    "pipe_log_mel",
    lambda x: torch.log1p(
        torch.stft(x, 16, hop_length=4, window=torch.hann_window(16), return_complex=True)
        .abs()
        .pow(2)
        .transpose(-1, -2)
        @ _FB
    ),
    lambda: (x_(2, 64),),
)
grad_case(
    "pipe_db_spectrogram",
    lambda x: (
        10
        * torch.log10(
            torch.clamp(
                torch.stft(
                    x, 16, hop_length=8, window=torch.hann_window(16), return_complex=True
                ).abs()
                ** 2,
                min=1e-10,
            )
        )
    ),
    lambda: (x_(64),),
)
grad_case(
    "pipe_power_via_real_imag",
    lambda x: _power(torch.fft.rfft(x * torch.hann_window(x.shape[-1]))),
    lambda: (x_(3, 16),),
)
grad_case(
    "pipe_fft_conv_same",
    lambda a, b: torch.fft.irfft(
        torch.fft.rfft(a, n=a.shape[-1] + b.shape[-1] - 1)
        * torch.fft.rfft(b, n=a.shape[-1] + b.shape[-1] - 1),
        n=a.shape[-1] + b.shape[-1] - 1,
    )[..., : a.shape[-1]],
    lambda: (x_(2, 11), x_(5, seed=1)),
)
grad_case(
    "pipe_fft_conv2d",
    lambda a, k: torch.fft.irfft2(
        torch.fft.rfft2(a) * torch.fft.rfft2(k, s=a.shape[-2:]), s=a.shape[-2:]
    ),
    lambda: (x_(6, 7), x_(3, 3, seed=1)),
)
grad_case(
    "pipe_cross_correlation",
    lambda a, b: torch.fft.irfft(torch.fft.rfft(a) * torch.fft.rfft(b).conj(), n=a.shape[-1]),
    lambda: (x_(9), x_(9, seed=1)),
)
grad_case(
    "pipe_hilbert_envelope",
    lambda x: torch.fft.ifft(
        torch.fft.fft(x)
        * torch.cat([torch.ones(1), 2 * torch.ones(3), torch.ones(1), torch.zeros(3)])
    ).abs(),
    lambda: (x_(8),),
)
grad_case(
    "pipe_phase_vocoder",
    lambda x: torch.polar(torch.fft.rfft(x).abs(), torch.fft.rfft(x).angle() + 0.1),
    lambda: (x_(12),),
)
grad_case(
    "pipe_spectral_loss",
    lambda x, y: (torch.fft.rfft(x).abs() - torch.fft.rfft(y).abs()).pow(2).mean(),
    lambda: (x_(2, 16), x_(2, 16, seed=1)),
)
grad_case(
    "pipe_autocorr",
    lambda x: torch.fft.irfft(torch.fft.rfft(x, n=2 * x.shape[-1]).abs().pow(2))[
        ..., : x.shape[-1]
    ],
    lambda: (x_(10),),
)
grad_case(
    "pipe_fno_layer",
    lambda x, w: torch.fft.irfft(
        torch.einsum("bix,iox->box", torch.fft.rfft(x)[..., :3], torch.view_as_complex(w)),
        n=x.shape[-1],
    ),
    lambda: (x_(2, 3, 8), x_(3, 4, 3, 2, seed=1)),
)


# ============================================================================================
# complex autograd
grad_case("cx_abs_angle", lambda z: (z.abs(), z.angle()), lambda: (x_(5, dtype=torch.complex64),))
grad_case(
    "cx_abs_at_zero", lambda z: (z * 0).abs() + z.real, lambda: (x_(3, dtype=torch.complex64),)
)
grad_case("cx_real_imag", lambda z: z.real * 2 + z.imag**2, lambda: (x_(5, dtype=torch.complex64),))
grad_case(
    "cx_view_as_real_loss",
    lambda z: torch.view_as_real(z * z).pow(2).sum(),
    lambda: (x_(4, dtype=torch.complex64),),
)
grad_case("cx_view_as_complex", lambda w: torch.view_as_complex(w) ** 2, lambda: (x_(3, 2),))
grad_case(
    "cx_view_as_complex_f64",
    lambda w: torch.view_as_complex(w).exp().abs(),
    lambda: (x_(3, 2, dtype=torch.float64),),
)
grad_case("cx_polar", lambda r, t: torch.polar(r, t), lambda: (x_(4).abs(), x_(4, seed=1)))
grad_case("cx_complex_fn", lambda a, b: torch.complex(a, b).abs(), lambda: (x_(4), x_(4, seed=1)))
grad_case("cx_complex_one_grad", lambda a: torch.complex(a, torch.ones(4)) ** 2, lambda: (x_(4),))
grad_case("cx_conj", lambda z: z.conj(), lambda: (x_(4, dtype=torch.complex64),))
grad_case("cx_conj_mul", lambda z: (z * z.conj()).real, lambda: (x_(4, dtype=torch.complex64),))
grad_case(
    "cx_conj_physical",
    lambda z: torch.conj_physical(z) * 2j,
    lambda: (x_(4, dtype=torch.complex64),),
)
grad_case(
    "cx_resolve_conj", lambda z: z.conj().resolve_conj(), lambda: (x_(4, dtype=torch.complex64),)
)
grad_case("cx_conj_then_real", lambda z: z.conj().imag, lambda: (x_(4, dtype=torch.complex64),))
grad_case("cx_sgn", lambda z: z.sgn(), lambda: (x_(4, dtype=torch.complex64),))
grad_case(
    "cx_matmul",
    lambda a, b: (a @ b).abs().sum(),
    lambda: (x_(3, 4, dtype=torch.complex64), x_(4, 2, seed=1, dtype=torch.complex64)),
)
grad_case(
    "cx_mixed_real_complex",
    lambda a, z: (a * z).angle(),
    lambda: (x_(4), x_(4, dtype=torch.complex64)),
)
grad_case("cx_exp_1j_phase", lambda t: torch.exp(1j * t), lambda: (x_(5),))
grad_case(
    "cx_sum_abs_sq", lambda z: (z.abs() ** 2).sum(), lambda: (x_(2, 3, dtype=torch.complex128),)
)
grad_case(
    "cx_vdot",
    lambda a, b: torch.vdot(a, b),
    lambda: (x_(4, dtype=torch.complex64), x_(4, seed=1, dtype=torch.complex64)),
)
grad_case(
    "cx_linalg_norm", lambda z: torch.linalg.vector_norm(z), lambda: (x_(5, dtype=torch.complex64),)
)
grad_case(
    "cx_real_of_fft_loss",
    lambda x: torch.fft.fft(x).real.mean() + torch.fft.fft(x).imag.std(),
    lambda: (x_(8),),
)
grad_case(
    "cx_view_as_real_of_conj",
    lambda z: torch.view_as_real(z.conj().resolve_conj()),
    lambda: (x_(3, dtype=torch.complex64),),
)
val_case(
    "cx_view_as_real_conj_err",
    lambda z: torch.view_as_real(z.conj()),
    lambda: (x_(3, dtype=torch.complex64),),
)


@scenario
def cx_conj_bits_outputs(C, rec):
    def f(z):
        return z.conj(), z.conj().conj(), torch.conj_physical(z), z.conj() * 1, (-z).conj()

    z = x_(4, dtype=torch.complex64)
    outs = C(f)(z)
    rec("outs", outs)
    rec("bits", [(o.is_conj(), o.is_neg()) for o in outs])


@scenario
def cx_conj_output_aliases(C, rec):
    def f(z):
        return z.conj()

    z = x_(4, dtype=torch.complex64)
    c = C(f)(z)
    z.mul_(2)
    rec("c_after_write", c)
    rec("same_storage", c.untracked_storage().data_ptr() == z.untracked_storage().data_ptr())


@scenario
def cx_real_imag_inplace_write(C, rec):
    def f(z):
        z.real.mul_(2)
        z.imag.zero_()
        return z.abs()

    z = x_(4, dtype=torch.complex64)
    rec("out", C(f)(z))
    rec("z", z)


@scenario
def cx_view_as_real_inplace_write(C, rec):
    def f(z):
        torch.view_as_real(z)[..., 1].neg_()
        return z * 2

    z = x_(4, dtype=torch.complex64)
    rec("out", C(f)(z))
    rec("z", z)


@scenario
def cx_real_assign(C, rec):
    def f(z, a):
        z.real = a
        z.imag[1:] = 0.5
        return z

    z, a = x_(4, dtype=torch.complex64), x_(4)
    rec("out", C(f)(z, a))
    rec("z", z)


@scenario
def cx_conj_input_values(C, rec):
    def f(z):
        return z * 2, z.is_conj()

    z = x_(4, dtype=torch.complex64).conj()
    rec("out", C(f)(z))


@scenario
def cx_conj_input_grad(C, rec):
    def f(z):
        return (z * z).real

    z0 = x_(4, dtype=torch.complex64).requires_grad_()
    z = z0.conj()
    out = C(f)(z)
    rec("out", out)
    out.sum().backward()
    rec("grad", z0.grad)


@scenario
def cx_fft_of_conj_input(C, rec):
    z = x_(5, dtype=torch.complex64).conj()
    rec("out", C(lambda z: torch.fft.fft(z))(z))


@scenario
def cx_grad_complex_leaf_hook(C, rec):
    z = x_(4, dtype=torch.complex64).requires_grad_()
    out = C(lambda z: torch.fft.ifft(z).abs().sum())(z)
    (g,) = torch.autograd.grad(out, z)
    rec("g", g)


# ============================================================================================
# complex type promotion
val_case(
    "promo_scalars",
    lambda z, x, i: (
        z * 2.5,
        z * torch.tensor(2.5, dtype=torch.float64),
        z * torch.ones(4, dtype=torch.float64),
        i * 1j,
        i.to(torch.int32) * (1 + 2j),
        x * 1j,
        x + 1j,
        x.double() * 1j,
        (i > 0) * 1j,
        z + torch.tensor(1j),
        z.to(torch.complex128) * x,
        torch.tensor(1j) * x.double(),
        z * torch.tensor(3),
    ),
    lambda: (x_(4, dtype=torch.complex64), x_(4, seed=1), torch.arange(4)),
)
val_case("promo_half_1j", lambda x: x * 1j, lambda: (x_(4, dtype=torch.float16),))
val_case("promo_bf16_1j", lambda x: x * 1j, lambda: (x_(4, dtype=torch.bfloat16),))
val_case(
    "promo_complex_half_fn",
    lambda a, b: torch.complex(a, b),
    lambda: (x_(3, dtype=torch.float16), x_(3, seed=1, dtype=torch.float16)),
)
val_case(
    "promo_complex_mixed_err",
    lambda a, b: torch.complex(a, b),
    lambda: (x_(3), x_(3, dtype=torch.float64)),
)
val_case("promo_complex_int_err", lambda a: torch.complex(a, a), lambda: (torch.arange(3),))
val_case(
    "promo_polar_f64",
    lambda r, t: torch.polar(r, t),
    lambda: (x_(3, dtype=torch.float64).abs(), x_(3, dtype=torch.float64)),
)
val_case(
    "promo_inplace_float_from_complex_err",
    lambda x, z: x.mul_(z),
    lambda: (x_(3), x_(3, dtype=torch.complex64)),
)
val_case(
    "promo_inplace_complex_by_double",
    lambda z, x: z.mul_(x),
    lambda: (x_(3, dtype=torch.complex64), x_(3, dtype=torch.float64)),
)
val_case(
    "promo_to_real_warns", lambda z: z.to(torch.float32), lambda: (x_(3, dtype=torch.complex64),)
)
val_case(
    "promo_real_of_real",
    lambda x: (x.real, torch.real(x), torch.imag(x.to(torch.complex64))),
    lambda: (x_(3),),
)
val_case("promo_imag_of_real_err", lambda x: x.imag, lambda: (x_(3),))
val_case(
    "promo_complex_pow_int",
    lambda z: (z**2, z**-1, z**0.5, 2**z),
    lambda: (x_(3, dtype=torch.complex64),),
)
val_case(
    "promo_complex_div_int",
    lambda z, i: (z / i, i / z, z // 1 if False else z / 2),
    lambda: (x_(3, dtype=torch.complex64), torch.tensor([1, 2, 3])),
)
val_case(
    "promo_complex_sum_mean",
    lambda z: (z.sum(), z.mean(), z.prod(), z.cumsum(0), z.var(), z.std()),
    lambda: (x_(5, dtype=torch.complex64),),
)
val_case(
    "promo_isclose_complex",
    lambda z: (torch.isclose(z, z * 1.0000001), z == z.conj(), torch.isreal(z)),
    lambda: (x_(3, dtype=torch.complex64),),
)


# ============================================================================================
# second wave: modules with complex parameters, in-place complex writes, masks, dynamic sizes
class _SpectralConv(torch.nn.Module):
    def __init__(self, modes=3, ch=2):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.modes = modes
        self.w = torch.nn.Parameter(torch.randn(ch, ch, modes, generator=g, dtype=torch.cfloat))

    def forward(self, x):
        xf = torch.fft.rfft(x)
        out = torch.zeros(x.shape[0], self.w.shape[1], xf.shape[-1], dtype=torch.cfloat)
        out[..., : self.modes] = torch.einsum("bix,iox->box", xf[..., : self.modes], self.w)
        return torch.fft.irfft(out, n=x.shape[-1])


@scenario
def mod_spectral_conv_train_steps(C, rec):
    m = _SpectralConv()
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    step = C(lambda x: m(x).pow(2).mean())
    for k in range(3):
        opt.zero_grad()
        loss = step(x_(4, 2, 10, seed=k))
        loss.backward()
        rec(f"loss{k}", loss)
        rec(f"grad{k}", m.w.grad)
        opt.step()
    rec("w", m.w)


@scenario
def mod_complex_param_sgd_inside(C, rec):
    w = torch.nn.Parameter(x_(4, dtype=torch.complex64))

    def step(x):
        loss = (torch.fft.fft(x) * w).abs().sum()
        loss.backward()
        with torch.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad = None
        return loss

    f = C(step)
    for k in range(2):
        rec(f"loss{k}", f(x_(4, seed=k)))
    rec("w", w)


@scenario
def inplace_fft_output_write(C, rec):
    def f(x):
        y = torch.fft.fft(x)
        y[0] = 0
        y[1:3] *= 2j
        return y, torch.fft.ifft(y).real

    rec("out", C(f)(x_(6)))


@scenario
def inplace_complex_input_ops(C, rec):
    def f(z, w):
        z.mul_(1j)
        z.add_(w.conj())
        z.conj_physical_()
        w.copy_(z.conj())
        return z.sum()

    z, w = x_(4, dtype=torch.complex64), x_(4, seed=1, dtype=torch.complex64)
    rec("out", C(f)(z, w))
    rec("zw", [z, w])


@scenario
def inplace_real_of_real_aliases(C, rec):
    def f(x):
        x.real.mul_(2)
        return torch.real(x) + 1

    x = x_(4)
    rec("out", C(f)(x))
    rec("x", x)


@scenario
def inplace_complex_mask_put(C, rec):
    def f(z):
        z = z.clone()
        z[z.abs() > 1] = 0
        z[z.real < 0] *= -1
        return z, torch.where(z.abs() > 0.5, z, 0), torch.where(z.imag > 0, z, 1.5)

    rec("out", C(f)(x_(8, dtype=torch.complex64)))


val_case(
    "cat_stack_promotion",
    lambda z, x: (
        torch.cat([z, x]),
        torch.stack([z.real, z.imag], -1),
        torch.cat([z, x.double()]),
        torch.isnan(z),
        torch.isfinite(z / 0),
        z.abs().max(),
        z.sum(dtype=torch.complex128),
        torch.angle(x),
        torch.angle(x.double() * 0 - 1),
    ),
    lambda: (x_(3, dtype=torch.complex64), x_(3, seed=1)),
)
grad_case("angle_of_real_grad", lambda x: torch.angle(x), lambda: (x_(4),))
grad_case(
    "sgn_at_zero_grad",
    lambda z: (z * torch.tensor([0, 1, 1])).sgn(),
    lambda: (x_(3, dtype=torch.complex64),),
)
val_case(
    "view_as_complex_noncontig_err", lambda w: torch.view_as_complex(w.t()), lambda: (x_(2, 4),)
)
val_case("view_as_complex_lastdim_err", lambda w: torch.view_as_complex(w), lambda: (x_(4, 3),))
val_case("view_as_complex_strided_ok", lambda w: torch.view_as_complex(w[::2]), lambda: (x_(6, 2),))
val_case(
    "view_as_real_complex32",
    lambda z: torch.view_as_real(z) * 2,
    lambda: (x_(3, dtype=torch.complex64).to(torch.complex32),),
)
val_case(
    "polar_negative_abs", lambda r, t: torch.polar(r, t), lambda: (-x_(3).abs(), x_(3, seed=1))
)
val_case(
    "complex_to_real_warns",
    lambda z: z.to(torch.float32) + 1,
    lambda: (x_(3, dtype=torch.complex64),),
)
val_case(
    "complex_to_int_warns", lambda z: z.to(torch.int64), lambda: (x_(3, dtype=torch.complex64) * 5,)
)
val_case("complex_max_err", lambda z: z.max(), lambda: (x_(3, dtype=torch.complex64),))
val_case("complex_sort_err", lambda z: torch.sort(z), lambda: (x_(3, dtype=torch.complex64),))
val_case("complex_clamp_err", lambda z: z.clamp(0, 1), lambda: (x_(3, dtype=torch.complex64),))
val_case("complex_lt_err", lambda z: z < 1, lambda: (x_(3, dtype=torch.complex64),))
val_case(
    "stft_f64_input_f32_window_err",
    lambda x: torch.stft(x, 8, window=torch.hann_window(8), return_complex=True),
    lambda: (x_(32, dtype=torch.float64),),
)
grad_case(
    "istft_no_window_center",
    lambda s: torch.istft(s, 8, hop_length=2),
    lambda: (torch.stft(x_(30), 8, hop_length=2, return_complex=True),),
)
grad_case(
    "istft_center_false_no_length",
    lambda s: torch.istft(s, 8, hop_length=4, window=torch.hann_window(8), center=False),
    lambda: (
        torch.stft(
            x_(36), 8, hop_length=4, window=torch.hann_window(8), center=False, return_complex=True
        ),
    ),
)


def _dyn_case(name, f, makes):
    def sc(C, rec):
        g = C(f, dynamic=True)
        for k, make in enumerate(makes):
            args = [a.clone().requires_grad_(a.is_floating_point()) for a in make()]
            out = g(*args)
            rec(f"out{k}", out)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            tot = sum((o.real if o.is_complex() else o).sum() for o in outs if o.requires_grad)
            if isinstance(tot, torch.Tensor):
                tot.backward()
                rec(f"grads{k}", [a.grad for a in args])

    SCENARIOS[name] = sc


_dyn_case(
    "dyn_fft_lengths",
    lambda x: (torch.fft.rfft(x), torch.fft.fft(x, n=x.shape[-1] + 1), torch.fft.ihfft(x)),
    [lambda: (x_(8),), lambda: (x_(9, seed=1),), lambda: (x_(12, seed=2),)],
)
_dyn_case(
    "dyn_irfft_from_shape",
    lambda x: torch.fft.irfft(torch.fft.rfft(x), n=x.shape[-1]) * torch.hann_window(x.shape[-1]),
    [lambda: (x_(2, 8),), lambda: (x_(2, 9, seed=1),), lambda: (x_(2, 11, seed=2),)],
)
_dyn_case(
    "dyn_freq_shift",
    lambda x: torch.fft.fftshift(torch.fft.fft(x).abs() * torch.fft.fftfreq(x.shape[0])),
    [lambda: (x_(6),), lambda: (x_(7, seed=1),), lambda: (x_(10, seed=2),)],
)
_dyn_case(
    "dyn_stft_lengths",
    lambda x: torch.stft(
        x, 8, hop_length=2, window=torch.hann_window(8), return_complex=True
    ).abs(),
    [lambda: (x_(32),), lambda: (x_(37, seed=1),), lambda: (x_(41, seed=2),)],
)
_dyn_case(
    "dyn_fft_conv",
    lambda a, b: torch.fft.irfft(
        torch.fft.rfft(a, n=a.shape[-1] + b.shape[-1] - 1)
        * torch.fft.rfft(b, n=a.shape[-1] + b.shape[-1] - 1),
        n=a.shape[-1] + b.shape[-1] - 1,
    ),
    [
        lambda: (x_(8), x_(3, seed=1)),
        lambda: (x_(9, seed=2), x_(4, seed=3)),
        lambda: (x_(13), x_(5)),
    ],
)


# third wave: gradients at zero bins, learnable windows and filters, manual framing
grad_case("zero_bins_abs_grad", lambda x: torch.fft.rfft(x).abs(), lambda: (torch.ones(8),))
grad_case("zero_bins_angle_grad", lambda x: torch.fft.rfft(x).angle(), lambda: (torch.ones(8),))
grad_case("zero_bins_power_grad", lambda x: torch.fft.rfft(x).abs() ** 2, lambda: (torch.ones(8),))
grad_case(
    "zero_bins_log_abs",
    lambda x: torch.log(torch.fft.rfft(x).abs() + 1e-6),
    lambda: (torch.ones(8),),
)
grad_case("zero_bins_sgn", lambda x: torch.fft.fft(x).sgn(), lambda: (torch.ones(6),))
grad_case(
    "zero_bins_sqrt_parts",
    lambda x: torch.sqrt(_power(torch.fft.rfft(x))),
    lambda: (torch.ones(8),),
)
grad_case(
    "zero_complex_pow_grad", lambda z: (z * 0) ** 2 + z, lambda: (x_(3, dtype=torch.complex64),)
)
grad_case(
    "zero_complex_pow_half",
    lambda z: torch.pow(z * torch.tensor([0, 1, 1]), 0.5),
    lambda: (x_(3, dtype=torch.complex64),),
)
grad_case(
    "abs_inf_complex",
    lambda z: (z * torch.tensor([float("inf"), 1, 1])).abs(),
    lambda: (x_(3, dtype=torch.complex64),),
)
grad_case(
    "learnable_window_stft",
    lambda x, w: torch.stft(x, 8, hop_length=4, window=w, return_complex=True).abs(),
    lambda: (x_(32), torch.hann_window(8) + 0.1),
)
grad_case(
    "learnable_window_istft",
    lambda s, w: torch.istft(s, 8, hop_length=2, window=w),
    lambda: (
        torch.stft(x_(32), 8, hop_length=2, window=torch.hann_window(8), return_complex=True),
        torch.hann_window(8) + 0.5,
    ),
)
grad_case(
    "manual_framing_unfold",
    lambda x: torch.fft.rfft(x.unfold(-1, 8, 4) * torch.hann_window(8)).abs().pow(2).mean(-1),
    lambda: (x_(2, 40),),
)
grad_case(
    "freq_filter_complex_param",
    lambda x, h: torch.fft.irfft(torch.fft.rfft(x) * h, n=x.shape[-1]),
    lambda: (x_(3, 8), x_(5, seed=1, dtype=torch.complex64)),
)
grad_case(
    "freq_filter_real_param_f64",
    lambda x, h: torch.fft.irfft(torch.fft.rfft(x) * h, n=x.shape[-1]),
    lambda: (x_(3, 9), x_(5, seed=1, dtype=torch.float64)),
)
grad_case(
    "complex_matmul_real_loss",
    lambda a, b: torch.view_as_real(torch.view_as_complex(a) @ torch.view_as_complex(b)).norm(),
    lambda: (x_(3, 4, 2), x_(4, 2, 2, seed=1)),
)
grad_case(
    "fft_grad_complex_leaf_only_imag",
    lambda z: torch.fft.fft(z).imag,
    lambda: (x_(6, dtype=torch.complex128),),
)


@scenario
def grad_twice_fft(C, rec):
    x = x_(6).requires_grad_()
    f = C(lambda x: torch.fft.rfft(x).abs().pow(2).sum())
    y = f(x)
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    rec("g", g)
    (gg,) = torch.autograd.grad(g.sum(), x)
    rec("gg", gg)


@scenario
def no_grad_fft_outputs(C, rec):
    x = x_(6).requires_grad_()
    f = C(lambda x: torch.fft.fft(x))
    with torch.no_grad():
        rec("out", f(x))
    with torch.inference_mode():
        out = f(x)
        rec("out_inf", out)
        rec("is_inf", out.is_inference())


# fourth wave: complex factories and constants, Python complex numbers, DFT by matmul
_N = 6
_DFT = torch.exp(-2j * torch.pi * torch.arange(_N)[:, None] * torch.arange(_N) / _N)
val_case(
    "factories_complex",
    lambda x: (
        torch.tensor(3 + 4j) * x,
        torch.full((3,), 1j),
        torch.full((2,), 1 + 1j, dtype=torch.complex128),
        torch.zeros(3, dtype=torch.cfloat) + 1j,
        torch.ones_like(x, dtype=torch.cdouble),
        torch.linspace(0, 1, 5, dtype=torch.cfloat),
        torch.eye(3, dtype=torch.cfloat),
        torch.arange(4) * torch.exp(1j * x[:4]),
        torch.tensor([1, 2j, 3]),
        torch.as_tensor([1.5, 2]) * 1j,
        torch.empty(0, dtype=torch.cfloat).sum(),
    ),
    lambda: (x_(6),),
)
grad_case(
    "dft_by_matmul",
    lambda x: _DFT.to(x.dtype.to_complex()) @ x.to(_DFT.dtype),
    lambda: (x_(_N, 2),),
)
grad_case(
    "dft_matmul_vs_fft",
    lambda x: (_DFT @ x.to(torch.cfloat)) - torch.fft.fft(x, dim=0),
    lambda: (x_(_N, 3),),
)
val_case(
    "python_complex_out",
    lambda z: (complex(z.sum()), z.sum().item(), abs(z[0].item())),
    lambda: (x_(3, dtype=torch.complex64),),
)
val_case("python_complex_in", lambda x, c: x * c + c.conjugate(), lambda: (x_(3), 1.5 - 2j))
val_case("python_complex_tensor_div", lambda x: (1 + 2j) / x, lambda: (x_(3),))
val_case(
    "int_to_cfloat",
    lambda i: (i.to(torch.cfloat), i.to(torch.cdouble) * 1j, torch.complex(i.float(), i.float())),
    lambda: (torch.arange(-2, 3),),
)
val_case("bool_to_cfloat", lambda b: b.to(torch.cfloat) + b, lambda: (torch.tensor([True, False]),))
grad_case(
    "abs_sq_vs_conj",
    lambda z: (z.abs() ** 2, (z * z.conj()).real.clone()),
    lambda: (x_(4, dtype=torch.complex64),),
)
val_case(
    "complex_sum_dim_keepdim",
    lambda z: (z.sum(0, keepdim=True), z.mean(-1), z.cumprod(1), z.norm(), z.norm(dim=1)),
    lambda: (x_(3, 4, dtype=torch.complex64),),
)
val_case(
    "complex_eq_ne",
    lambda z: (z == z[0], z != 1j, torch.equal(z, z.clone()), z.allclose(z)),
    lambda: (x_(3, dtype=torch.complex64),),
)


# fifth wave: in-place complex writes under autograd, hooks on complex tensors
@scenario
def ag_inplace_real_of_intermediate(C, rec):
    def f(z):
        y = z * 2
        y.real.mul_(3)
        y.imag.add_(z.real)
        return y.abs()

    z = x_(4, dtype=torch.complex64).requires_grad_()
    out = C(f)(z)
    rec("out", out)
    out.sum().backward()
    rec("grad", z.grad)


@scenario
def ag_view_as_real_write(C, rec):
    def f(z, w):
        y = z.clone()
        torch.view_as_real(y)[:, 0] = w
        return y * y

    z = x_(4, dtype=torch.complex64).requires_grad_()
    w = x_(4, seed=1).requires_grad_()
    out = C(f)(z, w)
    rec("out", out)
    torch.view_as_real(out).sum().backward()
    rec("grads", [z.grad, w.grad])


@scenario
def ag_complex_hook(C, rec):
    seen = []

    def f(z):
        y = torch.fft.fft(z)
        y.register_hook(lambda g: seen.append(g.clone()) or g * 2)
        return y.abs().sum()

    z = x_(5, dtype=torch.complex64).requires_grad_()
    out = C(f)(z)
    out.backward()
    rec("grad", z.grad)
    rec("seen", seen)


@scenario
def ag_complex_retain_grad(C, rec):
    def f(x):
        s = torch.fft.rfft(x)
        s.retain_grad()
        return s, s.abs().sum()

    x = x_(6).requires_grad_()
    s, out = C(f)(x)
    out.backward()
    rec("s", s)
    rec("s_grad", s.grad)
    rec("x_grad", x.grad)


@scenario
def ag_complex_leaf_inplace_err(C, rec):
    def f(z):
        z.mul_(1j)
        return z

    z = x_(3, dtype=torch.complex64).requires_grad_()
    rec("out", C(f)(z))


@scenario
def ag_complex_grad_accumulates(C, rec):
    z = x_(4, dtype=torch.complex64).requires_grad_()
    f = C(lambda z: torch.fft.ifft(z * 1j).real.sum())
    for _ in range(2):
        f(z).backward()
    rec("grad", z.grad)


def main(argv: list[str]) -> int:
    return run(argv, SCENARIOS, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
