"""relu and hardtanh (relu6): eager's exact values and gradients, and the channels-last layout
that lets XLA's CPU compiler keep a convolution stack free of transposed copies.

Values are compared bit for bit with eager PyTorch (sign of zero, NaN, subnormals), gradients
exactly; the layout test counts the layout copies in the optimized HLO of a small NCHW
convolution stack, against the same stack with relu written as ``jnp.maximum(x, 0)``.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torch2xla.capture._annotate import annotate
from torch2xla.capture._lower import lower
from torch2xla.ops._interpret import to_jax_function
from torch2xla.ops._registry import LOWERINGS
from torch2xla.runtime._jax_scope import x64

aten = torch.ops.aten
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _specials(dtype: torch.dtype) -> torch.Tensor:
    fi = torch.finfo(dtype)
    sub = fi.tiny * fi.eps  # the smallest subnormal
    vals = [-0.0, 0.0, float("nan"), -float("nan"), -1.0, 1.0, float("inf"), -float("inf")]
    vals += [sub, -sub, 4 * sub, -4 * sub, fi.tiny, -fi.tiny, fi.max, -fi.max, 6.0, -6.0, 7.5]
    vals += [-1.0 + fi.eps, 1.0 + fi.eps]
    return torch.tensor(vals, dtype=dtype)


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal dtype, NaN positions, signs (of zeros too) and values, with no tolerance."""
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    assert torch.equal(torch.signbit(got) | got.isnan(), torch.signbit(want) | want.isnan()), (
        got,
        want,
    )
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (got, want)


ACTIVATIONS = {
    "relu": torch.relu,
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "hardtanh_zero": lambda x: F.hardtanh(x, -0.0, 6.0),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_values_and_gradients_match_eager(name, dtype):
    fn = ACTIVATIONS[name]
    x = _specials(dtype)
    if name != "relu":
        # NOTE: XLA on CPU rewrites a select against a nonzero bound into min/max, which flush
        # subnormals (the suite's "subnormal" limitation); relu compares only against 0.
        x = x[(x == 0) | (x.abs() >= torch.finfo(dtype).tiny) | x.isnan()]
    x = x.requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    # A second cotangent with NaN shows where the gradient is passed rather than zeroed.
    cots = (torch.ones_like(x), torch.full_like(x, float("nan")))
    compiled = torch.compile(fn, backend="xla")
    for cot in cots:
        got, want = compiled(x), fn(x_ref)
        _assert_same_bits(got.detach(), want.detach())
        (g,) = torch.autograd.grad(got, x, cot)
        (g_ref,) = torch.autograd.grad(want, x_ref, cot)
        # (eager's hardtanh gradient at NaN is 0 in its vectorized loop and the cotangent in
        # its scalar one: ours follows the position, ops/_loops.py)
        _assert_same_bits(g, g_ref)


def test_float64_stays_64_bit():
    x = torch.tensor([1 + 2**-40, -(1 + 2**-40), 2.0**-1030, 1e300], dtype=torch.float64)
    got = torch.compile(torch.relu, backend="xla")(x)
    _assert_same_bits(got, torch.relu(x))


class ConvStack(nn.Module):
    """NCHW conv -> batch norm -> act -> conv -> batch norm (+ residual) -> act -> conv; the
    first act reads ``specials`` where ``mask`` is set (still a convolution's path)."""

    def __init__(self, c: int = 16, act=F.relu) -> None:
        super().__init__()
        self.act = act
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor, specials: torch.Tensor, mask: torch.Tensor):
        y1 = self.act(torch.where(mask, specials, self.bn1(self.conv1(x))))
        y2 = self.act(self.bn2(self.conv2(y1)) + y1)
        return self.conv3(y2), y1


@pytest.mark.parametrize("act", [F.relu, F.relu6], ids=["relu", "relu6"])
def test_conv_path_matches_eager(act):
    """The channels-last path (an activation reading a convolution, on CPU): the special
    values' results bit for bit, their gradients with exact zeros where eager's are zero."""
    torch.manual_seed(0)
    model = ConvStack(8, act)
    fi = torch.finfo(torch.float32)
    # (no subnormals: the select before the activation, XLA's, flushes them on CPU)
    s = torch.tensor([-0.0, 0.0, fi.tiny, -fi.tiny, -1.0, 1.0, 6.0, -6.0, 7.5, 0.0, -0.0])
    x = torch.randn(2, 8, 6, 6)
    mask = torch.zeros(2, 8, 6, 6, dtype=torch.bool)
    specials = torch.zeros(2, 8, 6, 6)
    mask.view(-1)[: s.numel()] = True
    specials.view(-1)[: s.numel()] = s
    specials.requires_grad_()
    out, y1 = torch.compile(model, backend="xla")(x, specials, mask)
    out_ref, y1_ref = model(x, specials, mask)
    _assert_same_bits(y1.detach().view(-1)[: s.numel()], y1_ref.detach().view(-1)[: s.numel()])
    torch.testing.assert_close(out, out_ref)
    (g,) = torch.autograd.grad(out.sum(), specials)
    (g_ref,) = torch.autograd.grad(out_ref.sum(), specials)
    torch.testing.assert_close(g, g_ref)
    assert torch.equal(g.view(-1)[: s.numel()] == 0, g_ref.view(-1)[: s.numel()] == 0)


# -- layout: the optimized HLO of a convolution stack ------------------------------------------


def _layout_copies(hlo: str) -> int:
    """Entry-level instructions of activation size that transpose or copy data (alone or in a
    fusion): the layout copies XLA's CPU compiler adds between NCHW and its channels-last
    convolutions."""
    bodies = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^%(\S+) .*?\{\n(.*?)\n\}", hlo, re.MULTILINE | re.DOTALL)
    }
    entry = re.search(r"^ENTRY .*?\{\n(.*?)\n\}", hlo, re.MULTILINE | re.DOTALL).group(1)
    count = 0
    for line in entry.splitlines():
        m = re.match(r"\s*(?:ROOT )?%\S+ = \w+\[([\d,]*)\]\S* (\w+)\(", line)
        if m is None or np.prod([int(d) for d in m.group(1).split(",") if d]) < 1024:
            continue  # tuples, weights and per-channel vectors
        called = re.search(r"calls=%([\w.\-]+)", line)
        body = bodies.get(called.group(1), "") if called else ""
        if m.group(2) in ("copy", "transpose") or re.search(r" (copy|transpose)\(", body):
            count += 1
    return count


class _Stack(nn.Module):
    def __init__(self, act) -> None:
        super().__init__()
        self.stack = ConvStack(16, act).eval()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.stack(x, x, x > 1e9)[0],)


def _inference_program(act, max_form: bool) -> str:
    """Optimized HLO of the lowered stack (eval mode)."""
    torch.manual_seed(0)
    x = torch.randn(4, 16, 16, 16)
    lowered = lower(torch.fx.symbolic_trace(_Stack(act)), [x])
    saved = {op: LOWERINGS[op] for op in (aten.relu.default, aten.hardtanh.default)}
    if max_form:
        LOWERINGS[aten.relu.default] = lambda a: jnp.maximum(a, 0)
        LOWERINGS[aten.hardtanh.default] = lambda a, lo=-1.0, hi=1.0: jnp.clip(a, lo, hi)
    try:
        fn = to_jax_function(annotate(lowered.gm))
        args = [jnp.asarray(t.detach().numpy()) for t in (*lowered.lifted, x)]
        with x64():
            return jax.jit(lambda *a: fn(None, *a)).lower(*args).compile().as_text()
    finally:
        LOWERINGS.update(saved)


@pytest.mark.parametrize("act", [F.relu, F.relu6], ids=["relu", "relu6"])
def test_conv_stack_layout_no_worse_than_maximum(act):
    """The exact lowering costs no more layout copies than ``jnp.maximum(x, 0)`` (a select of
    ``x`` computed in NCHW costs two transposed copies of each activation: 8 here against 7).

    Training programs are checked in tests/test_conv_cpu.py
    (``test_training_programs_have_fewer_layout_copies``): relu's gradient mask and batch
    norm's kept input are computed channels-last there too.
    """
    exact = _layout_copies(_inference_program(act, max_form=False))
    fast = _layout_copies(_inference_program(act, max_form=True))
    assert exact <= fast, f"{exact} layout copies, maximum form {fast}"
