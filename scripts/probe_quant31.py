"""Probe quantization workflows and bit manipulation as users write them: each case runs once
in eager PyTorch (CPU) and once through ``torch.compile(backend="xla")``.

    PYTHONPATH=. python scripts/probe_quant31.py [substring ...]
    PROBE_BACKEND=aot_eager python scripts/probe_quant31.py   # torch's own differences

``probe_intsem.py`` and ``probe_edges.py`` cover integer division, out-of-range casts and
shifts of tensors by tensors; this one looks at what quantization code does with them:

- ``fq_*``: fake quantization for QAT (per tensor and per channel, scale and zero point as
  tensors and as numbers, the learnable variants), values and straight-through gradients
  (None-ness included), ``FakeQuantize``/``FusedMovingAvgObsFakeQuantize`` modules in train mode
  (observer buffers after several steps), ``prepare_qat`` then a few SGD steps.
- ``wq_*``: hand-written weight-only quantization: int8 per-channel quantize/dequantize, int4
  packing into uint8 with shifts and masks, signed nibbles, ``1 << t``, ``torch._int_mm``.
- ``bit_*``: wraparound in int8/int16/uint8 arithmetic, rounding (decimals, ties to even),
  view-casts between dtypes, bitwise ops on bool and integers, popcount idioms.
- ``q_*``: ``torch.quantize_per_tensor`` and quantized tensors: eager fallback, no crash.

Prints ``ok`` / ``DIFF`` / ``CRASH`` per case and a summary.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import torch
from torch import nn

import torch2xla  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _probe_common import describe as _describe
from _probe_common import difference, observations, r, ri, run
from probe_dtypes import same
from probe_intsem import same_scaled

warnings.simplefilter("ignore")
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
BACKEND = os.environ.get("PROBE_BACKEND", "xla")
CASES: dict = {}
I8, U8, I16, I32, I64, B = (
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
)
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def describe(v):
    if v is None:
        return ("V", "None")
    return _describe(v)


def scenario(name, fn):
    assert name not in CASES, name
    CASES[name] = fn


def case(name, f, make, grad=False, scaled=False):
    """``f(*make())`` compiled against eager: the outputs, the inputs after the call and, with
    ``grad``, every input's ``.grad`` after a backward of a fixed weighting of the outputs."""

    def run_case(C, rec):
        args = make()
        out = C(f)(*args)
        rec("out", out)
        rec("inputs", [a.detach() for a in args if isinstance(a, torch.Tensor)])
        if grad:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            loss = sum(
                (o * torch.linspace(-1, 2, o.numel()).reshape(o.shape)).sum()
                for o in outs
                if isinstance(o, torch.Tensor) and o.requires_grad
            )
            loss.backward()
            rec("grads", [describe(a.grad) for a in args if isinstance(a, torch.Tensor)])

    run_case.scaled = scaled  # (products: compared within ``same_scaled``'s bound)
    scenario(name, run_case)


def compare(name, fn):
    def C(f):
        return torch.compile(f, backend=BACKEND)

    exp = observations(fn, lambda f: f, describe)
    got = observations(fn, C, describe)
    d = difference(got, exp, same_scaled if getattr(fn, "scaled", False) else same)
    return f"DIFF {name}: {d}" if d else f"ok {name}"


def ties(*shape, seed=0):
    """Values with many exact .5 ties after division by 0.1 / 0.25 scales."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-60, 60, shape, generator=g) * 0.125).float()


def leaf(t):
    return t.clone().requires_grad_(True)


# -- fake quantization --------------------------------------------------------------------
FQ = torch.fake_quantize_per_tensor_affine
for qmin, qmax in [(-128, 127), (0, 255), (0, 15)]:
    case(
        f"fq_tensor_numbers_{qmin}_{qmax}",
        lambda x, a=qmin, b=qmax: FQ(x, 0.25, 3, a, b),
        lambda: (leaf(ties(4, 33) * 4),),
        grad=True,
    )
    case(
        f"fq_tensor_tensors_{qmin}_{qmax}",
        lambda x, s, z, a=qmin, b=qmax: FQ(x, s, z, a, b),
        lambda: (leaf(ties(4, 33) * 4), torch.tensor(0.25), torch.tensor(3, dtype=I32)),
        grad=True,
    )
case(
    "fq_tensor_odd_scale",
    lambda x: FQ(x, 0.1, 0, -128, 127),
    lambda: (leaf(ties(64) * 0.8 + 0.05),),
    grad=True,
)
case(
    "fq_channel",
    lambda x, s, z: torch.fake_quantize_per_channel_affine(x, s, z, 0, -128, 127),
    lambda: (
        leaf(ties(3, 40) * 8),
        torch.tensor([0.1, 0.25, 0.03]),
        torch.tensor([0, 5, -3], dtype=I32),
    ),
    grad=True,
)
case(
    "fq_channel_axis1",
    lambda x, s, z: torch.fake_quantize_per_channel_affine(x, s, z, 1, 0, 255),
    lambda: (
        leaf(ties(6, 4, 5) * 4),
        torch.tensor([0.1, 0.25, 0.03, 0.5]),
        torch.tensor([0, 5, 100, 255], dtype=I32),
    ),
    grad=True,
)
case(
    "fq_channel_float_zp",
    lambda x, s, z: torch.fake_quantize_per_channel_affine(x, s, z, 0, -128, 127),
    lambda: (
        leaf(ties(3, 40) * 8),
        torch.tensor([0.1, 0.25, 0.03]),
        torch.tensor([0.0, 5.5, -3.25]),
    ),
    grad=True,
)
case(
    "fq_learnable_tensor",
    lambda x, s, z: torch._fake_quantize_learnable_per_tensor_affine(x, s, z, -128, 127, 1.0),
    lambda: (leaf(ties(4, 33) * 4), leaf(torch.tensor([0.25])), leaf(torch.tensor([3.0]))),
    grad=True,
)
case(
    "fq_learnable_tensor_gradfactor",
    lambda x, s, z: torch._fake_quantize_learnable_per_tensor_affine(x, s, z, 0, 255, 0.5),
    lambda: (leaf(r(4, 33) * 20), leaf(torch.tensor([0.1])), leaf(torch.tensor([128.0]))),
    grad=True,
)
case(
    "fq_learnable_channel",
    lambda x, s, z: torch._fake_quantize_learnable_per_channel_affine(x, s, z, 0, -128, 127, 1.0),
    lambda: (
        leaf(r(3, 20) * 10),
        leaf(torch.tensor([0.1, 0.25, 0.03])),
        leaf(torch.tensor([0.0, 5.0, -3.0])),
    ),
    grad=True,
)
case(
    "fq_learnable_only_x_grad",
    lambda x, s, z: torch._fake_quantize_learnable_per_tensor_affine(x, s, z, -128, 127, 1.0),
    lambda: (leaf(r(4, 33) * 20), torch.tensor([0.25]), torch.tensor([3.0])),
    grad=True,
)
case(
    "fq_bf16_input",
    lambda x: FQ(x, 0.25, 0, -128, 127),
    lambda: (ties(64).to(BF16),),
)
case(
    "fq_cachemask",
    lambda x, s, z: torch.fake_quantize_per_tensor_affine(x, s, z, -8, 7) * 2,
    lambda: (leaf(ties(64)), torch.tensor(0.5), torch.tensor(1, dtype=I32)),
    grad=True,
)


def fq_module(make_module, steps=4):
    def run_case(C, rec):
        torch.manual_seed(0)
        m = make_module()
        m.train()
        f = C(m)
        for i in range(steps):
            x = leaf(r(4, 8, seed=i) * (i + 1))
            y = f(x)
            y.sum().backward()
            rec(f"y{i}", y)
            rec(f"g{i}", describe(x.grad))
        rec("buffers", [b.detach().clone() for _, b in sorted(m.named_buffers())])
        rec("names", [n for n, _ in sorted(m.named_buffers())])
        m.eval()
        rec("eval", f(r(4, 8, seed=9)))

    return run_case


def _ma_fake_quant():
    from torch.ao.quantization import FakeQuantize, MovingAverageMinMaxObserver

    return FakeQuantize(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255)


def _hist_fake_quant():
    from torch.ao.quantization import FakeQuantize, MinMaxObserver

    return FakeQuantize(
        observer=MinMaxObserver,
        quant_min=-128,
        quant_max=127,
        dtype=torch.qint8,
        qscheme=torch.per_tensor_symmetric,
    )


def _perchannel_fake_quant():
    from torch.ao.quantization import FakeQuantize, MovingAveragePerChannelMinMaxObserver

    return FakeQuantize(
        observer=MovingAveragePerChannelMinMaxObserver,
        quant_min=-128,
        quant_max=127,
        dtype=torch.qint8,
        qscheme=torch.per_channel_symmetric,
        ch_axis=1,
    )


def _fused_fake_quant():
    from torch.ao.quantization import FusedMovingAvgObsFakeQuantize

    return FusedMovingAvgObsFakeQuantize(quant_min=0, quant_max=255)


scenario("fq_module_moving_avg", fq_module(_ma_fake_quant))
scenario("fq_module_minmax_sym", fq_module(_hist_fake_quant))
scenario("fq_module_perchannel", fq_module(_perchannel_fake_quant))
scenario("fq_module_fused", fq_module(_fused_fake_quant))


class _Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.fc1 = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.fc2(self.relu(self.fc1(self.quant(x)))))


def _qat_scenario(C, rec):
    torch.manual_seed(0)
    m = _Small()
    m.train()
    m.qconfig = torch.ao.quantization.get_default_qat_qconfig("fbgemm")
    torch.ao.quantization.prepare_qat(m, inplace=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    f = C(m)
    for i in range(3):
        x = r(5, 8, seed=i)
        loss = f(x).square().mean()
        opt.zero_grad()
        loss.backward()
        rec(f"loss{i}", loss)
        rec(f"grads{i}", [describe(p.grad) for _, p in m.named_parameters()])
        opt.step()
    rec("params", [p.detach().clone() for _, p in m.named_parameters()])
    rec("buffers", [b.detach().clone() for _, b in m.named_buffers()])


scenario("fq_prepare_qat_train", _qat_scenario)


# -- weight-only quantization ---------------------------------------------------------------
def quant_int8(w):
    s = w.abs().amax(dim=1, keepdim=True) / 127
    w_q = torch.round(w / s).clamp(-128, 127).to(torch.int8)
    return w_q, s


case("wq_int8_quant", quant_int8, lambda: (r(8, 16),))
case(
    "wq_int8_linear",
    lambda x, w_q, s: x @ (w_q.to(x.dtype) * s).t(),
    lambda: (leaf(r(3, 16)), quant_int8(r(8, 16))[0], quant_int8(r(8, 16))[1]),
    grad=True,
    scaled=True,
)
case(
    "wq_int8_linear_bf16",
    lambda x, w_q, s: torch.nn.functional.linear(x, w_q.to(x.dtype) * s.to(x.dtype)),
    lambda: (r(3, 16).to(BF16), quant_int8(r(8, 16))[0], quant_int8(r(8, 16))[1]),
)


def pack4(q):  # q: int8 in [-8, 7], even last dim
    u = (q & 0xF).to(torch.uint8)
    return u[..., ::2] | (u[..., 1::2] << 4)


def unpack4(p):
    lo = (p & 0xF).to(torch.int8)
    hi = ((p >> 4) & 0xF).to(torch.int8)
    lo = torch.where(lo > 7, lo - 16, lo)
    hi = torch.where(hi > 7, hi - 16, hi)
    return torch.stack([lo, hi], dim=-1).flatten(-2)


def unpack4_shift(p):  # sign extension by shifting left then arithmetic right
    lo = (p.to(torch.int8) << 4) >> 4
    hi = p.to(torch.int8) >> 4
    return torch.stack([lo, hi], dim=-1).flatten(-2)


case("wq_pack4", pack4, lambda: (ri(4, 16, lo=-8, hi=8, dtype=I8),))
case("wq_unpack4", unpack4, lambda: (ri(4, 8, lo=0, hi=256, dtype=U8),))
case("wq_unpack4_shift", unpack4_shift, lambda: (ri(4, 8, lo=0, hi=256, dtype=U8),))
case("wq_roundtrip4", lambda q: unpack4(pack4(q)), lambda: (ri(4, 16, lo=-8, hi=8, dtype=I8),))
case(
    "wq_pack4_int32",
    lambda q: (q[..., 0] & 0xF) | ((q[..., 1] & 0xF) << 4) | ((q[..., 7] & 0xF) << 28),
    lambda: (ri(4, 8, lo=-8, hi=8, dtype=I32),),
)
case(
    "wq_unpack_int32_nibbles",
    lambda p: torch.stack([(p >> (4 * i)) & 0xF for i in range(8)], -1),
    lambda: (ri(5, lo=-(2**31), hi=2**31 - 1, dtype=I32),),
)
case(
    "wq_unpack_shifts_tensor",
    lambda p, sh: (p.unsqueeze(-1) >> sh) & 0xF,
    lambda: (ri(5, lo=0, hi=256, dtype=U8), torch.tensor([0, 4], dtype=U8)),
)
case(
    "wq_unpack_shifts_arange",
    lambda p: (p.unsqueeze(-1) >> torch.arange(0, 32, 4, dtype=torch.int32)) & 0xF,
    lambda: (ri(5, lo=-(2**31), hi=2**31 - 1, dtype=I32),),
)
for dt in (I8, U8, I16, I32, I64):
    case(f"wq_one_shl_t_{dt}", lambda t: 1 << t, lambda dt=dt: (ri(10, lo=0, hi=8, dtype=dt),))
    case(
        f"wq_one_shl_t_wide_{dt}",
        lambda t: (1 << t, 3 >> t, -17 >> t, torch.bitwise_left_shift(5, t)),
        lambda dt=dt: (
            torch.tensor([0, 1, 6, 7, 8, 9, 15, 16, 31, 32, 63, 64, 65, 100], dtype=I64)
            .clamp(max=torch.iinfo(dt).max)
            .to(dt),
        ),
    )
    case(
        f"wq_shl_neg_{dt}",
        lambda t: (1 << t, 100 >> t, torch.bitwise_right_shift(-100, t)),
        lambda dt=dt: (
            torch.tensor([-1, -2, -8, -64, 0, 3], dtype=dt)
            if dt != U8
            else torch.tensor([255, 0, 3], dtype=U8),
        ),
    )
case("wq_one_shl_bool", lambda t: 1 << t, lambda: (torch.tensor([True, False]),))
case("wq_float_shl_t", lambda t: (torch.bitwise_left_shift(2, t),), lambda: (ri(6, lo=0, hi=5),))
case("wq_shl_float_tensor", lambda t: 1 << t, lambda: (torch.tensor([1.0, 2.0]),))
case(
    "wq_int_mm",
    lambda a, b: torch._int_mm(a, b),
    lambda: (ri(32, 16, lo=-128, hi=128, dtype=I8), ri(16, 24, lo=-128, hi=128, dtype=I8)),
)
case(
    "wq_int_mm_extreme",
    lambda a, b: torch._int_mm(a, b),
    lambda: (torch.full((17, 64), -128, dtype=I8), torch.full((64, 8), -128, dtype=I8)),
)
case(
    "wq_int_mm_small",
    lambda a, b: torch._int_mm(a, b),
    lambda: (ri(2, 3, lo=-128, hi=128, dtype=I8), ri(3, 5, lo=-128, hi=128, dtype=I8)),
)
case(
    "wq_int_mm_bad_dtype",
    lambda a, b: torch._int_mm(a, b),
    lambda: (ri(32, 16, dtype=I32), ri(16, 24, dtype=I8)),
)
case(
    "wq_int_mm_bad_shape",
    lambda a, b: torch._int_mm(a, b),
    lambda: (ri(32, 16, dtype=I8), ri(17, 24, dtype=I8)),
)
case(
    "wq_int_mm_3d",
    lambda a, b: torch._int_mm(a, b),
    lambda: (ri(2, 32, 16, dtype=I8), ri(16, 24, dtype=I8)),
)
case(
    "wq_int_mm_scaled",
    lambda x, w_q, s: (
        torch._int_mm(torch.round(x / x.abs().amax(1, keepdim=True) * 127).to(I8), w_q.t()).float()
        * s.t()
        * (x.abs().amax(1, keepdim=True) / 127)
    ),
    lambda: (r(32, 16), quant_int8(r(8, 16))[0], quant_int8(r(8, 16))[1]),
)

# -- bits -----------------------------------------------------------------------------------
for dt in (I8, U8, I16):
    case(
        f"bit_wrap_add_{dt}",
        lambda a, b: (a + b, a * b, a - b, -a, a * 3, a + 200),
        lambda dt=dt: (
            ri(20, lo=torch.iinfo(dt).min, hi=torch.iinfo(dt).max, dtype=dt),
            ri(20, lo=torch.iinfo(dt).min, hi=torch.iinfo(dt).max, seed=1, dtype=dt),
        ),
    )
    case(
        f"bit_wrap_inplace_{dt}",
        lambda a: a.add_(100).mul_(3),
        lambda dt=dt: (ri(20, lo=torch.iinfo(dt).min, hi=torch.iinfo(dt).max, dtype=dt),),
    )
    case(
        f"bit_wrap_sum_{dt}",
        lambda a, dt=dt: (a.sum(dtype=dt), a.cumsum(0, dtype=dt), a.prod(dtype=dt)),
        lambda dt=dt: (ri(20, lo=0, hi=torch.iinfo(dt).max, dtype=dt),),
    )
    case(
        f"bit_abs_min_{dt}",
        lambda a: (a.abs(), torch.neg(a)),
        lambda dt=dt: (torch.tensor([torch.iinfo(dt).min, -1, 0, torch.iinfo(dt).max], dtype=dt),),
    )
case(
    "bit_round_decimals",
    lambda x: (torch.round(x, decimals=2), torch.round(x, decimals=-1), torch.round(x, decimals=0)),
    lambda: (torch.tensor([0.125, 0.135, 2.5, -2.5, 15.0, 25.0, 35.0, 1.005, 123.456, -0.5]),),
)
case("bit_round_decimals_f16", lambda x: torch.round(x, decimals=1), lambda: (ties(20).half() / 4,))
case("bit_round_decimals_bf16", lambda x: torch.round(x, decimals=3), lambda: (r(20).to(BF16),))
case(
    "bit_round_decimals_f64", lambda x: torch.round(x, decimals=3), lambda: (r(20).double() * 100,)
)
case(
    "bit_round_decimals_grad",
    lambda x: torch.round(x, decimals=2),
    lambda: (leaf(r(10)),),
    grad=True,
)
case(
    "bit_round_half_even",
    lambda x: (torch.round(x), x.round(), torch.round(x * 2) / 2),
    lambda: (torch.arange(-10, 10) + 0.5,),
)
case("bit_round_int", lambda x: torch.round(x), lambda: (ri(10, dtype=I32),))
case(
    "bit_to_int8_oor",
    lambda x: (x.to(I8), x.to(U8), x.to(I16)),
    lambda: (
        torch.tensor(
            [-300.0, -129.0, -128.7, 127.9, 128.0, 200.0, 255.5, 256.0, 1000.0, -1.0, -0.5]
        ),
    ),
)
case(
    "bit_to_uint8_neg",
    lambda x: x.to(U8),
    lambda: (torch.tensor([-1.0, -2.5, -128.0, -255.0, -256.0]),),
)
case(
    "bit_int_to_int8",
    lambda x: (x.to(I8), x.to(U8)),
    lambda: (torch.tensor([300, -300, 255, 128, -129], dtype=I32),),
)
case(
    "bit_view_f32_i32",
    lambda x: (x.view(torch.int32), x.view(torch.int32) >> 23 & 0xFF),
    lambda: (torch.tensor([1.0, -2.0, 0.5, float("inf"), float("nan"), -0.0, 1e-40]),),
)
case(
    "bit_view_i32_f32",
    lambda x: (x | 0x3F800000).view(torch.float32),
    lambda: (ri(8, lo=0, hi=2**23, dtype=I32),),
)
case("bit_view_u8", lambda x: x.view(torch.uint8), lambda: (r(3, 4),))
case("bit_view_u8_bf16", lambda x: x.view(torch.uint8), lambda: (r(3, 4).to(BF16),))
case(
    "bit_view_i16_from_u8",
    lambda x: x.view(torch.int16),
    lambda: (ri(3, 8, lo=0, hi=256, dtype=U8),),
)
case(
    "bit_view_f32_from_u8",
    lambda x: x.view(torch.float32) * 1,
    lambda: (ri(2, 8, lo=0, hi=256, dtype=U8),),
)
case(
    "bit_view_bad_size", lambda x: x.view(torch.int32), lambda: (ri(3, 6, lo=0, hi=256, dtype=U8),)
)
case(
    "bit_view_bf16_i16",
    lambda x: (x.view(torch.int16), x.view(torch.int16).view(BF16) + 1),
    lambda: (r(6).to(BF16),),
)
case(
    "bit_view_f32_bf16_trunc",
    lambda x: (x.view(torch.int32) >> 16).to(torch.int16).view(BF16),
    lambda: (r(6),),
)
case(
    "bit_bool_ops",
    lambda a, b: (a & b, a | b, a ^ b, ~a, torch.bitwise_not(a), a ^ True),
    lambda: (torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])),
)
for dt in (I8, U8, I16, I32, I64):
    case(
        f"bit_int_ops_{dt}",
        lambda a, b: (
            a & b,
            a | b,
            a ^ b,
            ~a,
            a & 0x0F,
            a | -1 if a.dtype != U8 else a | 255,
            a ^ 0x55,
        ),
        lambda dt=dt: (
            ri(12, lo=max(-100, torch.iinfo(dt).min), hi=100, dtype=dt),
            ri(12, lo=max(-100, torch.iinfo(dt).min), hi=100, seed=2, dtype=dt),
        ),
    )


def popcount(x):
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return (x * 0x01010101) >> 24 & 0xFF


def popcount_loop(x):
    c = torch.zeros_like(x)
    for i in range(8):
        c += (x >> i) & 1
    return c


case("bit_popcount_swar", popcount, lambda: (ri(16, lo=0, hi=2**31 - 1, dtype=I32),))
case("bit_popcount_swar_i64", popcount, lambda: (ri(16, lo=0, hi=2**31 - 1, dtype=I64),))
case("bit_popcount_loop_u8", popcount_loop, lambda: (ri(16, lo=0, hi=256, dtype=U8),))
case(
    "bit_popcount_bits_sum",
    lambda x: ((x.unsqueeze(-1) >> torch.arange(8)) & 1).sum(-1),
    lambda: (ri(16, lo=0, hi=256, dtype=U8),),
)
case(
    "bit_mask_bits_bool",
    lambda x: (x.unsqueeze(-1) & (1 << torch.arange(8))).bool(),
    lambda: (ri(5, lo=0, hi=256, dtype=I64),),
)
case(
    "bit_packbits",
    lambda b: (b.view(-1, 8).to(U8) << torch.arange(8, dtype=U8)).sum(-1, dtype=U8),
    lambda: (torch.rand(32, generator=torch.Generator().manual_seed(0)) > 0.5,),
)
case(
    "bit_xor_hash",
    lambda x: ((x * 2654435761) ^ (x >> 16)) & 0xFFFFFFFF,
    lambda: (ri(10, lo=0, hi=2**40, dtype=I64),),
)
case(
    "bit_i64_shl_overflow",
    lambda x: (x << 62, x << 63, (x << 32) >> 32),
    lambda: (ri(8, lo=-5, hi=5, dtype=I64),),
)
case(
    "bit_u8_sub_wrap",
    lambda a, b: (a - b, (a.int() - b.int()).to(U8), a // 3, a % 7),
    lambda: (ri(10, lo=0, hi=256, dtype=U8), ri(10, lo=0, hi=256, seed=3, dtype=U8)),
)
case("bit_sign_extend_i8", lambda x: x.to(I8).to(I32), lambda: (ri(10, lo=0, hi=256, dtype=U8),))
case(
    "bit_nan_to_int",
    lambda x: torch.nan_to_num(x).round().clamp(-128, 127).to(I8),
    lambda: (torch.tensor([float("nan"), float("inf"), -float("inf"), 126.5, -127.5]),),
)

# -- quantized tensors ----------------------------------------------------------------------
case(
    "q_quantize_per_tensor",
    lambda x: torch.quantize_per_tensor(x, 0.1, 10, torch.quint8).dequantize() * 2,
    lambda: (r(10),),
)
case(
    "q_quantize_int_repr",
    lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8).int_repr(),
    lambda: (r(10) * 20,),
)
case(
    "q_quantize_tensor_args",
    lambda x, s, z: torch.quantize_per_tensor(x, s, z, torch.qint8).dequantize(),
    lambda: (r(10), torch.tensor(0.05), torch.tensor(2)),
)
case(
    "q_quantize_per_channel",
    lambda x: (
        torch.quantize_per_channel(
            x, torch.tensor([0.1, 0.2]), torch.tensor([0, 1]), 0, torch.qint8
        ).dequantize()
        + 1
    ),
    lambda: (r(2, 5),),
)
case(
    "q_quantized_input",
    lambda q: q.dequantize() + 1,
    lambda: (torch.quantize_per_tensor(r(10), 0.1, 10, torch.quint8),),
)
case(
    "q_quantized_output",
    lambda x: torch.quantize_per_tensor(x + 1, 0.1, 10, torch.quint8),
    lambda: (r(10),),
)
case(
    "q_dynamic_quant",
    lambda x: torch.quantize_per_tensor_dynamic(x, torch.quint8, False).dequantize(),
    lambda: (r(10),),
)


def _dynamic_quant_scenario(C, rec):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    q = torch.ao.quantization.quantize_dynamic(m, {nn.Linear}, dtype=torch.qint8)
    f = C(q)
    for i in range(2):
        rec(f"y{i}", f(r(3, 8, seed=i)))


def _static_quant_scenario(C, rec):
    torch.manual_seed(0)
    m = _Small().eval()
    m.qconfig = torch.ao.quantization.get_default_qconfig("fbgemm")
    torch.ao.quantization.prepare(m, inplace=True)
    m(r(5, 8))
    torch.ao.quantization.convert(m, inplace=True)
    f = C(m)
    rec("y", f(r(5, 8, seed=1)))


scenario("q_dynamic_quant_linear", _dynamic_quant_scenario)
scenario("q_static_quant_model", _static_quant_scenario)

# -- fake quantization: what eager refuses --------------------------------------------------
_PC = torch.fake_quantize_per_channel_affine
for _name, _f, _make in [
    ("zp_out_of_range", lambda x: FQ(x, 0.25, 300, -128, 127), lambda: (r(8),)),
    ("qmin_gt_qmax", lambda x: FQ(x, 0.25, 0, 10, 5), lambda: (r(8),)),
    (
        "t_zp_out_of_range",
        lambda x, s, z: FQ(x, s, z, 0, 255),
        lambda: (r(8), torch.tensor(0.1), torch.tensor(-3, dtype=I32)),
    ),
    (
        "t_scale_f64",
        lambda x, s, z: FQ(x, s, z, 0, 255),
        lambda: (r(8), torch.tensor(0.1, dtype=torch.float64), torch.tensor(3, dtype=I32)),
    ),
    (
        "t_zp_i64",
        lambda x, s, z: FQ(x, s, z, 0, 255),
        lambda: (r(8), torch.tensor(0.1), torch.tensor(3)),
    ),
    (
        "t_zp_float",
        lambda x, s, z: FQ(x, s, z, 0, 255),
        lambda: (r(8), torch.tensor(0.1), torch.tensor(3.0)),
    ),
    (
        "t_scale_grad",
        lambda x, s, z: FQ(x, s, z, 0, 255),
        lambda: (leaf(r(8)), leaf(torch.tensor(0.1)), torch.tensor(3, dtype=I32)),
    ),
    (
        "c_scale_f64",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (
            r(2, 4),
            torch.tensor([0.1, 0.2], dtype=torch.float64),
            torch.tensor([0, 1], dtype=I32),
        ),
    ),
    (
        "c_zp_i64",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (r(2, 4), torch.tensor([0.1, 0.2]), torch.tensor([0, 1])),
    ),
    (
        "c_zp_range",
        lambda x, s, z: _PC(x, s, z, 0, 0, 255),
        lambda: (r(2, 4), torch.tensor([0.1, 0.2]), torch.tensor([0, -1], dtype=I32)),
    ),
    (
        "c_axis",
        lambda x, s, z: _PC(x, s, z, 2, -128, 127),
        lambda: (r(2, 4), torch.tensor([0.1, 0.2]), torch.tensor([0, 1], dtype=I32)),
    ),
    (
        "c_axis_neg",
        lambda x, s, z: _PC(x, s, z, -1, -128, 127),
        lambda: (
            r(2, 4),
            torch.tensor([0.1, 0.2, 0.3, 0.4]),
            torch.tensor([0, 1, 2, 3], dtype=I32),
        ),
    ),
    (
        "c_size",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (r(2, 4), torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2], dtype=I32)),
    ),
    (
        "c_zp_size",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (r(2, 4), torch.tensor([0.1, 0.2]), torch.tensor([0, 1, 2], dtype=I32)),
    ),
    (
        "c_scale_bf16",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (r(2, 4), torch.tensor([0.1, 0.2]).to(BF16), torch.tensor([0, 1], dtype=I32)),
    ),
    (
        "c_scale_grad",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (leaf(r(2, 4)), leaf(torch.tensor([0.1, 0.2])), torch.tensor([0, 1], dtype=I32)),
    ),
    ("int_input", lambda x: FQ(x, 0.25, 0, -128, 127), lambda: (ri(8),)),
    (
        "c_int_input",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (ri(2, 4), torch.tensor([0.1, 0.2]), torch.tensor([0, 1], dtype=I32)),
    ),
    (
        "c_0d",
        lambda x, s, z: _PC(x, s, z, 0, -128, 127),
        lambda: (r(()), torch.tensor([0.1]), torch.tensor([0], dtype=I32)),
    ),
    ("empty", lambda x: FQ(x, 0.25, 0, -128, 127), lambda: (leaf(r(0, 3)),)),
    ("noncontig", lambda x: FQ(x.t(), 0.25, 0, -128, 127), lambda: (leaf(ties(4, 6)),)),
]:
    case(f"fq_err_{_name}", _f, _make, grad=True)


# -- more user idioms -----------------------------------------------------------------------
def _fused_obs(x, obs_on, fq_on, rmin, rmax, scale, zp):
    return torch.fused_moving_avg_obs_fake_quant(
        x, obs_on, fq_on, rmin, rmax, scale, zp, 0.01, 0, 255, 0, False, False
    )


case(
    "mo_fused_moving_avg_obs_direct",
    _fused_obs,
    lambda: (
        leaf(r(4, 8) * 3),
        torch.ones(1, dtype=torch.long),
        torch.ones(1, dtype=torch.long),
        torch.tensor([-1.0]),
        torch.tensor([1.0]),
        torch.tensor([0.1]),
        torch.tensor([0], dtype=I32),
    ),
    grad=True,
)


def _observer_scenario(C, rec):
    from torch.ao.quantization import MinMaxObserver, PerChannelMinMaxObserver

    for make in (MinMaxObserver, lambda: PerChannelMinMaxObserver(ch_axis=0)):
        obs = make()
        f = C(obs)
        for i in range(3):
            rec(f"y{i}", f(r(4, 8, seed=i) * (i + 1)))
        rec("buffers", [b.clone() for b in obs.buffers()])
        rec("qparams", list(obs.calculate_qparams()))


scenario("mo_observers", _observer_scenario)


def _toggle_scenario(C, rec):
    from torch.ao.quantization import FakeQuantize

    fq = FakeQuantize()
    f = C(fq)
    rec("a", f(r(16)))
    fq.disable_fake_quant()
    rec("b", f(r(16, seed=1)))
    fq.enable_fake_quant()
    fq.disable_observer()
    rec("c", f(r(16, seed=2) * 5))
    rec("buffers", [b.clone() for b in fq.buffers()])


scenario("mo_fakequant_toggle", _toggle_scenario)
case(
    "mo_manual_quant_u8_zp",
    lambda w, zp, s: ((w - zp).float() * s, (w.float() - zp) * s, (w.int() - zp) * s),
    lambda: (ri(4, 8, lo=0, hi=256, dtype=U8), torch.tensor(128, dtype=U8), torch.tensor(0.02)),
)
case(
    "mo_manual_fake_quant",
    lambda x, s, z: (torch.clamp(torch.round(x / s) + z, 0, 255) - z) * s,
    lambda: (leaf(ties(40) * 3), torch.tensor(0.1), torch.tensor(7, dtype=I32)),
    grad=True,
)
case(
    "mo_ste_detach",
    lambda x, s: x + ((torch.round(x / s) * s).clamp(-1, 1) - x).detach(),
    lambda: (leaf(ties(40)), torch.tensor(0.25)),
    grad=True,
)
case(
    "mo_round_decimals_big",
    lambda x: (
        torch.round(x, decimals=10),
        torch.round(x, decimals=40),
        torch.round(x, decimals=-40),
        torch.round(x, decimals=400),
        torch.round(x, decimals=-3),
        torch.round(x.double(), decimals=-3),
        torch.round(x.double(), decimals=320),
        torch.round(x, decimals=7),
        torch.round(x.bfloat16(), decimals=-2),
    ),
    lambda: (torch.cat([r(200) * 10**5, torch.arange(-2500.0, 2500.0, 250.0), r(50)]),),
)
case(
    "mo_round_decimals_f16_big",
    lambda x: (torch.round(x, decimals=4), torch.round(x, decimals=-3)),
    lambda: ((r(8) * 100).half(),),
)
case(
    "mo_scalar_bits_beyond_dtype",
    lambda a, b: (a & 0x1FF, a | 0x100, b ^ 0xFF, b & 255, a ^ -1),
    lambda: (ri(8, lo=0, hi=256, dtype=U8), ri(8, lo=-128, hi=128, dtype=I8)),
)
case("mo_view_noncontig", lambda x: x.t().view(torch.uint8), lambda: (r(4, 6),))
case("mo_view_noncontig_same", lambda x: x.t().view(torch.int32), lambda: (r(4, 6),))
case(
    "mo_view_i64_u8",
    lambda x: x.view(torch.uint8).view(-1, 8).flip(-1).view(torch.int64),
    lambda: (ri(5, lo=-(2**40), hi=2**40),),
)
case(
    "mo_view_slice_u8",
    lambda x: x[:, 1:].view(torch.int16),
    lambda: (ri(3, 5, lo=0, hi=256, dtype=U8),),
)
case(
    "mo_frexp_ldexp",
    lambda x: (*torch.frexp(x), torch.ldexp(x, torch.tensor([3]))),
    # (no subnormal: XLA's CPU reads frexp(1e-40) as frexp(0), the documented "subnormal"
    # limitation; eager's mantissa is 0.5444)
    lambda: (torch.tensor([0.0, -0.0, 1.0, 3.5, 1e-30, float("inf"), float("nan"), -7e30]),),
)
case(
    "mo_pow2_scale",
    lambda x: torch.exp2(torch.ceil(torch.log2(x.abs().amax() / 127))),
    lambda: (r(20),),
)
case(
    "mo_quint4x2",
    lambda x: torch.quantize_per_tensor(x, 0.5, 0, torch.quint4x2).dequantize(),
    lambda: (r(8),),
)
case(
    "mo_int8_matmul_float",
    lambda a, b: (a.float() @ b.float()).to(I32),
    lambda: (ri(4, 64, lo=-128, hi=128, dtype=I8), ri(64, 3, lo=-128, hi=128, dtype=I8)),
)
case(
    "mo_int_matmul",
    lambda a, b: (a @ b, a.to(I32) @ b.to(I32)),
    lambda: (ri(4, 64, lo=-128, hi=128, dtype=I64), ri(64, 3, lo=-128, hi=128, dtype=I64)),
)
case(
    "mo_int8_sum_wrap",
    lambda a: (a.sum(), a.sum(dtype=I8), (a * a).sum(-1)),
    lambda: (ri(4, 64, lo=-128, hi=128, dtype=I8),),
)

case(
    "mo_int4_view_int8_shift",
    lambda p: (p.view(torch.int8) >> 4, (p >> 4).to(I8) - 8, (p & 0xF).to(I8) - 8),
    lambda: (ri(4, 8, lo=0, hi=256, dtype=U8),),
)
case(
    "mo_blockwise_absmax",
    lambda x: (
        torch.round(x.view(-1, 16) / x.view(-1, 16).abs().amax(-1, keepdim=True) * 127).to(I8),
        x.view(-1, 16).abs().amax(-1),
    ),
    lambda: (r(64) * 3,),
)
case(
    "mo_group_dequant",
    lambda wq, s, z: ((wq.view(4, 2, 8).float() - z[..., None]) * s[..., None]).view(4, 16),
    lambda: (ri(4, 16, lo=0, hi=16, dtype=U8), r(4, 2).abs() / 10, torch.full((4, 2), 8.0)),
)
_F8 = [
    0.0,
    -0.0,
    1.0,
    448.0,
    449.0,
    464.0,
    500.0,
    1e6,
    -1e6,
    float("inf"),
    -float("inf"),
    float("nan"),
    1e-3,
    2.0**-9,
    2.0**-10,
    3 * 2.0**-11,
    57344.0,
    61440.0,
    1.0625,
    1.03125,
    240.0,
    1e-40,
    65504.0,
    70000.0,
]
for _f8 in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _f8):
        _d = getattr(torch, _f8)
        case(
            f"mo_cast_{_f8}",
            lambda x, d=_d: (x.to(d).float(), x.half().to(d).float(), x.bfloat16().to(d).float()),
            lambda: (torch.tensor(_F8),),
        )
        case(
            f"mo_scaled_{_f8}",
            lambda x, d=_d: (
                (x / x.abs().amax() * torch.finfo(d).max).to(d).view(torch.uint8),
                (x.clamp(torch.finfo(d).min, torch.finfo(d).max)).to(d).float(),
            ),
            lambda: (r(32) * 100,),
        )


def main(argv):
    return run(argv, CASES, compare)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
