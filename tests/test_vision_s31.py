"""Image resampling, padding and transposed convolutions against eager (session 31,
``scripts/probe_vision31.py``):

- uint8 bilinear/bicubic resizes, anti-aliased or not, follow eager's fixed-point kernels
  (``ops/_resize_uint8.py``): anti-aliased ones returned all zeros, the others were off by one
  or did not lower;
- reflection pads with negative widths crop, as eager's (the lowering raised);
- a transposed convolution's ``output_padding`` not smaller than its stride or dilation raises
  eager's error (the compiled call returned a result);
- roll along dims, 3-dim reflection/replication pads and ``max_unpool2d`` keep a
  channels-last input's memory format, as eager's kernels (the results were contiguous).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from torch2xla._errors import OpError

CL, CL3 = torch.channels_last, torch.channels_last_3d


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="xla", options={"strict": True})


def _assert_identical(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert got.stride() == want.stride(), f"{what}: strides {got.stride()} vs {want.stride()}"
    assert torch.equal(got, want), f"{what}: {(got.int() - want.int()).abs().max()} off"


# (size or scale_factor, mode, align_corners, antialias)
RESIZES = [
    ((3, 4), "bilinear", False, True),
    ((5, 20), "bilinear", True, True),
    ((14, 4), "bicubic", False, True),
    ((4, 5), "bicubic", True, True),
    ((4, 13), "bilinear", False, False),
    ((4, 13), "bilinear", True, False),
    ((15, 6), "bicubic", False, False),
    ((15, 6), "bicubic", True, False),
    ((11, 7), "bilinear", False, False),  # one axis kept
    (0.37, "bilinear", False, True),
    (1.7, "bicubic", False, False),
]


@pytest.mark.parametrize("fmt", [torch.contiguous_format, CL], ids=["contiguous", "channels_last"])
def test_uint8_resizes_match_eager_bit_for_bit(fmt):
    def f(x):
        out = []
        for size, mode, ac, aa in RESIZES:
            kw = {"size": size} if isinstance(size, tuple) else {"scale_factor": size}
            out.append(F.interpolate(x, mode=mode, align_corners=ac, antialias=aa, **kw))
        return out

    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (2, 3, 11, 13), generator=g, dtype=torch.uint8)
    x = x.contiguous(memory_format=fmt)
    for config, got, want in zip(RESIZES, _compiled(f)(x), f(x)):
        _assert_identical(got, want, config)


def test_uint8_resize_of_many_channels_and_saturation():
    # more than 4 channels (eager's generic separable loops), values at 0 and 255 where the
    # cubic's negative lobes overshoot
    def f(x):
        return (
            F.interpolate(x, size=(9, 3), mode="bicubic", antialias=True),
            F.interpolate(x, size=(17, 10), mode="bicubic"),
        )

    x = torch.zeros(1, 6, 8, 8, dtype=torch.uint8)
    x[..., ::2, 1::2] = 255
    x[:, :3, :, :4] = 255
    for i, (got, want) in enumerate(zip(_compiled(f)(x), f(x))):
        _assert_identical(got, want, i)


def test_reflection_pad_negative_widths():
    def f(a, b, c):
        return (
            F.pad(a, (-1, 2), mode="reflect"),
            F.pad(a, (3, -2), mode="reflect"),
            F.pad(b, (-1, 2, 3, -1), mode="reflect"),
            F.pad(c, (-1, 1, 1, 0, 2, -1), mode="reflect"),
        )

    def leaves():
        torch.manual_seed(0)
        return [
            torch.randn(*s, requires_grad=True) for s in ((2, 3, 5), (2, 3, 5, 6), (1, 2, 3, 4, 5))
        ]

    ours, ref = leaves(), leaves()
    got, want = _compiled(f)(*ours), f(*ref)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.stride() == w.stride()
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    cots = [torch.randint(-8, 8, w.shape).float() for w in want]
    torch.autograd.backward(got, cots)
    torch.autograd.backward(want, cots)
    for a, b in zip(ours, ref):
        assert torch.equal(a.grad, b.grad)  # small integers: exact in any order


@pytest.mark.parametrize(
    ("nd", "kw"),
    [
        (1, {"stride": 2, "output_padding": 2}),
        (2, {"stride": 2, "output_padding": (0, 3), "dilation": 3}),
        (3, {"stride": 2, "output_padding": (0, 2, 0)}),
    ],
)
def test_conv_transpose_output_padding_too_large_raises(nd, kw):
    conv = getattr(F, f"conv_transpose{nd}d")

    def f(x, w):
        return conv(x, w, **kw)

    x, w = torch.randn((1, 2) + (3,) * nd), torch.randn((2, 2) + (3,) * nd)
    with pytest.raises(RuntimeError) as eager:
        f(x, w)
    with pytest.raises(OpError) as ours:
        _compiled(f)(x, w)
    assert isinstance(ours.value, RuntimeError)
    assert str(eager.value) in str(ours.value)


def test_conv_transpose_output_padding_below_dilation_runs():
    def f(x, w):
        return F.conv_transpose2d(x, w, stride=2, output_padding=(1, 2), dilation=3)

    x, w = torch.randn(1, 2, 3, 3), torch.randn(2, 2, 3, 3)
    torch.testing.assert_close(_compiled(f)(x, w), f(x, w))


def test_channels_last_layouts_of_roll_pads_and_unpool():
    def f(x, v):
        pooled, idx = F.max_pool2d(x, 2, return_indices=True)
        return (
            torch.roll(x, 1, 3),
            x.roll((1, -2), (2, 3)),
            torch.roll(x, 5),  # flattened: contiguous
            torch.roll(v, 1, 2),
            F.pad(v, (1, 1, 1, 1, 1, 1), mode="reflect"),
            F.pad(v, (1, 0, 2, 1, 0, 1), mode="replicate"),
            F.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate"),  # 4-d read as a volume
            F.pad(v, (1, 1, 1, 1, 1, 1), mode="circular"),
            F.max_unpool2d(pooled, idx, 2),
        )

    torch.manual_seed(0)
    x = torch.randn(2, 3, 6, 4).contiguous(memory_format=CL).requires_grad_()
    v = torch.randn(1, 2, 3, 4, 5).contiguous(memory_format=CL3)
    got, want = _compiled(f)(x, v), f(x, v)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.stride() == w.stride(), (i, g.stride(), w.stride())
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize("antialias", [False, True])
def test_uint8_resampling_on_cuda_runs_in_eager(antialias):
    """The uint8 lowerings follow eager's CPU fixed-point kernels; on CUDA, whose kernels round
    otherwise, the node is left to eager (``capture/_partition``). Checked on a fake CUDA
    tensor's graph, as CI has no GPU (the GPU machine runs the call itself)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch2xla.capture._partition import find_unsupported

    def f(x):
        return F.interpolate(x, size=(5, 7), mode="bilinear", antialias=antialias)

    for device, left in (("cpu", False), ("cuda", True)):
        with FakeTensorMode(allow_non_fake_inputs=True):
            x = torch.empty(1, 3, 8, 8, dtype=torch.uint8, device=device)
            gm = make_fx(f, pre_dispatch=False)(x)
        reasons = [u.reason for u in find_unsupported(gm)]
        assert any("uint8 resampling on CUDA" in r for r in reasons) == left, (device, reasons)
