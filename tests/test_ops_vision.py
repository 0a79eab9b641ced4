"""torchvision's ops (``ops/_vision.py``) against eager.

Without torchvision installed, a stand-in ``torchvision::roi_align`` with torchvision's schema
is defined here from a reference written with torch ops (from the definition of torchvision's
CPU kernel), so the lowering, its lazy registration and its gradient are tested either way;
with torchvision, eager is torchvision's own kernel.
"""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from tests._util import assert_same, run_both
from torch2xla.ops import LOWERINGS

HAVE_TORCHVISION = importlib.util.find_spec("torchvision") is not None
SCHEMA = (
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"
)


def _bilinear(plane, y, x):
    c, h, w = plane.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return plane.new_zeros(c)
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= h - 1:
        y_low = y_high = h - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= w - 1:
        x_low = x_high = w - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = y - y_low, x - x_low
    hy, hx = 1 - ly, 1 - lx
    return (
        hy * hx * plane[:, y_low, x_low]
        + hy * lx * plane[:, y_low, x_high]
        + ly * hx * plane[:, y_high, x_low]
        + ly * lx * plane[:, y_high, x_high]
    )


def roi_align_reference(
    input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned
):
    """torchvision's roi_align: each bin is the mean of a grid of bilinear samples."""
    offset = 0.5 if aligned else 0.0
    out = []
    for roi in rois.tolist():
        plane = input[int(roi[0])]
        x1, y1, x2, y2 = (v * spatial_scale - offset for v in roi[1:])
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / pooled_height, roi_w / pooled_width
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_h / pooled_height)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_w / pooled_width)
        count = max(grid_h * grid_w, 1)
        rows = []
        for py in range(pooled_height):
            row = []
            for px in range(pooled_width):
                acc = plane.new_zeros(plane.shape[0])
                for iy in range(grid_h):
                    y = y1 + py * bin_h + (iy + 0.5) * bin_h / grid_h
                    for ix in range(grid_w):
                        x = x1 + px * bin_w + (ix + 0.5) * bin_w / grid_w
                        acc = acc + _bilinear(plane, y, x)
                row.append(acc / count)
            rows.append(torch.stack(row, -1))
        out.append(torch.stack(rows, -2))
    if not out:
        return input.new_zeros(0, input.shape[1], pooled_height, pooled_width)
    return torch.stack(out)


_STAND_IN = []


@pytest.fixture(scope="module")
def roi_align():
    """``torch.ops.torchvision.roi_align``: torchvision's, or the stand-in."""
    if HAVE_TORCHVISION:
        import torchvision  # noqa: F401

        return torch.ops.torchvision.roi_align
    if not _STAND_IN:
        lib = torch.library.Library("torchvision", "DEF")
        lib.define(SCHEMA)
        lib.impl("roi_align", lambda *a: roi_align_reference(*a).detach(), "CPU")

        @torch.library.register_fake("torchvision::roi_align", lib=lib)
        def _(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
            return input.new_empty(rois.shape[0], input.shape[1], pooled_height, pooled_width)

        def backward(ctx, grad):
            with torch.enable_grad():
                x = ctx.input.detach().requires_grad_()
                out = roi_align_reference(x, ctx.rois, *ctx.args)
                return torch.autograd.grad(out, x, grad)[0], None, None, None, None, None, None

        def setup_context(ctx, inputs, output):
            ctx.input, ctx.rois, *ctx.args = inputs

        torch.library.register_autograd(
            "torchvision::roi_align", backward, setup_context=setup_context, lib=lib
        )
        _STAND_IN.append(lib)  # the registration lives as long as the library object
    return torch.ops.torchvision.roi_align


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, 12)
    rois = torch.tensor(
        [
            [0, 1.0, 1.5, 14.0, 9.0],  # spatial_scale 0.5 maps it into the 10x12 map
            [1, -3.0, 2.0, 6.5, 25.0],  # partly outside
            [1, 8.0, 8.0, 7.5, 7.0],  # malformed (x2 < x1): forced to 1x1 unless aligned
            [0, 0.0, 0.0, 23.0, 19.0],  # the whole map
        ]
    )
    return x, rois


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [2, -1], ids=["sampling-2", "adaptive"])
def test_roi_align_matches_eager(roi_align, sampling_ratio, aligned, lowered_ops):
    def f(x, rois):
        return roi_align(x, rois, 0.5, 3, 4, sampling_ratio, aligned) * 2

    x, rois = _inputs()
    out, ref, *_ = run_both(f, x, rois)
    assert_same(out, ref)
    assert torch.ops.torchvision.roi_align.default in lowered_ops
    assert torch.ops.torchvision.roi_align.default in LOWERINGS

    def grad(fn):
        leaf = x.clone().requires_grad_()
        out = fn(leaf, rois)
        weights = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape) / out.numel()
        return torch.autograd.grad((out * weights).sum(), leaf)[0]

    compiled = torch.compile(f, backend="xla", options={"strict": True})
    assert_same(grad(compiled), grad(f))


def test_roi_align_reference_matches_torchvision():
    # Keeps the stand-in honest where torchvision is installed.
    if not HAVE_TORCHVISION:
        pytest.skip("torchvision is not installed")
    import torchvision

    x, rois = _inputs()
    for sampling_ratio in (2, -1):
        for aligned in (False, True):
            ref = roi_align_reference(x, rois, 0.5, 3, 4, sampling_ratio, aligned)
            got = torchvision.ops.roi_align(x, rois, (3, 4), 0.5, sampling_ratio, aligned)
            assert_same(ref, got)


def test_roi_align_through_torchvision_ops():
    if not HAVE_TORCHVISION:
        pytest.skip("torchvision is not installed")
    import torchvision

    def f(x, boxes):
        return torchvision.ops.roi_align(
            x, [boxes], output_size=(2, 2), spatial_scale=0.5, sampling_ratio=2, aligned=True
        )

    x, rois = _inputs()
    out, ref, *_ = run_both(f, x[:1], rois[:, 1:])
    assert_same(out, ref)
