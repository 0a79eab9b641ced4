"""CPU convolution stacks: odd input channel counts padded to a multiple of 4, batch norm and
relu's gradient computed channels-last after a convolution (``ops/_nn.py``,
``ops/_batch_norm.py``, ``ops/_elementwise.py``).

Values and gradients are compared with eager PyTorch for every convolution variant (those the
padding applies to and those it leaves alone); the layout tests read the optimized HLO of the
programs XLA compiles: the padded convolution's operand, and the layout copies of a residual
block's training programs against the same block lowered without the channels-last batch norm
and gradients.
"""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.test_relu_layout import _layout_copies
from torch2xla.ops import _elementwise, _nn

TOLS = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-10, 1e-10), torch.bfloat16: (2e-2, 2e-2)}


def _check(model: nn.Module, x: torch.Tensor, dtype=torch.float32) -> None:
    """Output, input gradient and parameter gradients of ``model(x)`` against eager's."""
    model = model.to(dtype)
    model.zero_grad(set_to_none=True)
    x = x.to(dtype)
    ref_model = copy.deepcopy(model)
    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    out = torch.compile(model, backend="xla")(x1)
    ref = ref_model(x2)
    rtol, atol = TOLS[dtype]
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    cot = torch.randn_like(ref)
    out.backward(cot)
    ref.backward(cot)
    torch.testing.assert_close(x1.grad, x2.grad, rtol=rtol, atol=atol)
    for (name, p), p_ref in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, rtol=rtol, atol=atol, msg=name)
    for b, b_ref in zip(model.buffers(), ref_model.buffers()):  # batch norm running stats
        torch.testing.assert_close(b, b_ref, rtol=rtol, atol=atol)


# (module, input shape): the padding applies to the first group, not to the second.
PADDED = {
    "conv2d_3ch": (lambda: nn.Conv2d(3, 8, 3, padding=1), (2, 3, 9, 9)),
    "conv2d_5ch_strided_dilated": (
        lambda: nn.Conv2d(5, 6, 3, stride=2, padding=2, dilation=2, bias=False),
        (2, 5, 11, 10),
    ),
    "conv2d_7ch_1x1": (lambda: nn.Conv2d(7, 4, 1, stride=2), (3, 7, 8, 8)),
    "conv2d_9ch_unbatched": (lambda: nn.Conv2d(9, 4, 3), (9, 7, 7)),
    "conv1d_3ch": (lambda: nn.Conv1d(3, 4, 5, padding=2), (2, 3, 17)),
    "conv3d_3ch": (lambda: nn.Conv3d(3, 4, 3, padding=1), (2, 3, 5, 6, 5)),
    "conv2d_3ch_padding_mode": (
        lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
        (2, 3, 6, 6),
    ),
}
UNPADDED = {
    "conv2d_1ch": (lambda: nn.Conv2d(1, 4, 3), (2, 1, 8, 8)),
    "conv2d_6ch": (lambda: nn.Conv2d(6, 4, 3), (2, 6, 8, 8)),
    "conv2d_3ch_groups": (lambda: nn.Conv2d(3, 6, 3, groups=3), (2, 3, 8, 8)),
    "conv2d_9ch_groups3": (lambda: nn.Conv2d(9, 6, 3, groups=3), (2, 9, 8, 8)),
    "conv_transpose2d_3ch": (
        lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1),
        (2, 3, 5, 5),
    ),
    "conv_transpose1d_5ch": (lambda: nn.ConvTranspose1d(5, 3, 4, stride=3), (2, 5, 7)),
}


@pytest.mark.parametrize("case", [*PADDED, *UNPADDED])
def test_convolutions_match_eager(case):
    torch.manual_seed(0)
    make, shape = {**PADDED, **UNPADDED}[case]
    _check(make(), torch.randn(shape))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_padded_convolution_other_dtypes(dtype):
    torch.manual_seed(0)
    _check(nn.Conv2d(3, 8, 3, padding=1), torch.randn(2, 3, 8, 8), dtype)


def test_padded_convolution_keeps_nan_and_inf_where_eager_has_them():
    """The added channels are zeros times zero weights: they add no NaN (0 * inf would)."""
    conv = nn.Conv2d(3, 2, 1, bias=False)
    x = torch.ones(1, 3, 2, 2)
    x[0, 0, 0, 0] = float("inf")
    x[0, 1, 1, 1] = float("nan")
    got = torch.compile(conv, backend="xla")(x)
    want = conv(x)
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got.nan_to_num(), want.nan_to_num())


def _programs(model: nn.Module, x: torch.Tensor, train: bool) -> dict[str, str]:
    """Optimized HLO of the programs ``model(x)`` compiles to, by program name (inference;
    forward and backward when ``train``)."""
    with tempfile.TemporaryDirectory() as d:
        compiled = torch.compile(model, backend="xla", options={"dump_dir": d})
        if train:
            compiled(x).sum().backward()
        else:
            with torch.no_grad():
                compiled(x)
        programs = {p.name.split(".")[2]: p.read_text() for p in Path(d).rglob("*.hlo.txt")}
    torch._dynamo.reset()
    return programs


def _conv_operand_channels(hlo: str) -> list[int]:
    """Input-channel counts of the convolutions in ``hlo`` (the dim labelled ``f`` of each
    convolution's first operand)."""
    shapes = {m.group(1): m.group(2) for m in re.finditer(r"%(\S+) = f32\[([\d,]*)\]", hlo)}
    channels = []
    for m in re.finditer(r"convolution\(%(\S+), %\S+\).*?dim_labels=(\w+)_", hlo):
        dims = [int(d) for d in shapes[m.group(1)].split(",")]
        channels.append(dims[m.group(2).index("f")])
    return channels


def test_three_channel_convolution_runs_on_four():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3)).eval()
    (hlo,) = _programs(model, torch.randn(2, 3, 8, 8), train=False).values()
    assert sorted(_conv_operand_channels(hlo)) == [4, 8]


# -- batch norm after a convolution (channels-last on CPU) --------------------------------------
class Block(nn.Module):
    """conv -> batch norm -> relu -> conv -> batch norm, + a strided 1x1 shortcut, relu (the
    benchmark CNN's residual block), in 2-D or 3-D."""

    def __init__(self, c_in: int, c_out: int, nd: int = 2, affine: bool = True) -> None:
        super().__init__()
        conv = nn.Conv2d if nd == 2 else nn.Conv3d
        norm = nn.BatchNorm2d if nd == 2 else nn.BatchNorm3d
        self.conv1 = conv(c_in, c_out, 3, 2, 1, bias=False)
        self.bn1 = norm(c_out, affine=affine)
        self.conv2 = conv(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = norm(c_out, affine=affine)
        self.short = nn.Sequential(conv(c_in, c_out, 1, 2, bias=False), norm(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.short(x))


@pytest.mark.parametrize(
    "nd,affine,dtype",
    [
        (2, True, torch.float32),
        (2, False, torch.float32),
        (3, True, torch.float32),
        (2, True, torch.float64),
    ],
    ids=["2d", "2d_no_affine", "3d", "2d_float64"],
)
def test_batch_norm_after_convolution_matches_eager(nd, affine, dtype):
    """Values, gradients (input, weights, batch norm's scale and shift) and running
    statistics, in training mode; then eval mode (running statistics)."""
    torch.manual_seed(0)
    model = Block(4, 8, nd, affine)
    shape = (3, 4, 9, 8) if nd == 2 else (2, 4, 5, 6, 5)
    x = torch.randn(shape) * 3 + 1
    _check(model, x, dtype)
    model.eval()
    torch._dynamo.reset()
    _check(model, x, dtype)


SEQUENCES = {
    # channels-last: no running statistics; relu6 (hardtanh's gradient)
    "no_running_stats": (
        lambda: nn.Sequential(
            nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8, track_running_stats=False), nn.ReLU()
        ),
        (3, 4, 8, 8),
    ),
    "relu6": (
        lambda: nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU6()),
        (3, 4, 8, 8),
    ),
    # NCHW: a batch norm reading the input itself; a 3-D (Conv1d) activation
    "input_batch_norm": (
        lambda: nn.Sequential(nn.BatchNorm2d(3), nn.ReLU(), nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)),
        (4, 3, 7, 7),
    ),
    "conv1d": (lambda: nn.Sequential(nn.Conv1d(4, 8, 3), nn.BatchNorm1d(8), nn.ReLU()), (3, 4, 9)),
}


@pytest.mark.parametrize("case", SEQUENCES)
def test_batch_norm_sequences_match_eager(case):
    torch.manual_seed(0)
    make, shape = SEQUENCES[case]
    _check(make(), torch.randn(shape))


def _training_copies(monkeypatch, channels_last: bool) -> tuple[int, int]:
    """Layout copies in the optimized HLO of a residual block's (forward, backward)
    programs; ``channels_last=False`` lowers its batch norms and relu in NCHW."""
    with monkeypatch.context() as m:
        if not channels_last:
            m.setattr(_nn, "_channels_last_bn", lambda x: False)
            m.setattr(_elementwise, "_after_cpu_convolution", lambda x: False)
        torch.manual_seed(0)
        programs = _programs(Block(16, 32), torch.randn(8, 16, 16, 16), train=True)
    return _layout_copies(programs["forward"]), _layout_copies(programs["backward"])


def test_training_programs_have_fewer_layout_copies(monkeypatch):
    """Batch norm and relu's gradient channels-last: fewer layout copies in the backward (the
    benchmark CNN's training step: 53 -> 43 ms on one core), none more in the forward."""
    fwd, bwd = _training_copies(monkeypatch, channels_last=True)
    fwd_nchw, bwd_nchw = _training_copies(monkeypatch, channels_last=False)
    assert fwd <= fwd_nchw, (fwd, fwd_nchw)
    assert bwd < bwd_nchw, (bwd, bwd_nchw)
