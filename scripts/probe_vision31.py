"""Image resampling, pooling and patch ops as users write them (session 31): interpolate in
every mode, grid_sample / affine_grid, pooling of every kind (indices included), unpooling,
pixel/channel shuffles, unfold/fold, pads, roll/flip/rot90, transposed convolutions, and a
U-Net-like block and an augmentation function. Each case runs eagerly and under
``torch.compile(..., backend="xla", options={"strict": True})``: dtypes, shapes and strides of
the outputs must match, values within 1e-5 relative for float32/float64 (NaN where NaN; exact
for integers), one rounding for half precision; gradients of every input that requires them
(None where None), and errors of eager's type.

    OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/probe_vision31.py [substring ...]
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _probe_common import r, run

warnings.simplefilter("ignore")
H, B, F32, F64, U8 = torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8
CASES: dict = {}
CL = torch.channels_last
CL3 = torch.channels_last_3d


def case(name, fn, *make, grad=True, strides=True):
    CASES[name] = (fn, make, grad, strides)


def img(*shape, seed=0, dtype=F32, fmt=None, rg=True):
    def make():
        x = r(*shape, seed=seed, dtype=dtype)
        if fmt is not None:
            x = x.contiguous(memory_format=fmt)
        if rg and x.is_floating_point():
            x.requires_grad_()
        return x

    return make


def ints(*shape, lo=0, hi=256, dtype=U8, fmt=None):
    def make():
        g = torch.Generator().manual_seed(0)
        x = torch.randint(lo, hi, shape, generator=g).to(dtype)
        return x if fmt is None else x.contiguous(memory_format=fmt)

    return make


def const(v):
    return lambda: v


TOL = {F32: 1e-5, F64: 1e-10, H: 1e-3, B: 8e-3}


def compare_tensors(o, e, path, strides=True):
    if not isinstance(o, torch.Tensor):
        return f"{path}: {type(o).__name__} vs tensor"
    if o.dtype != e.dtype or o.shape != e.shape:
        return f"{path}: {o.dtype}{tuple(o.shape)} vs {e.dtype}{tuple(e.shape)}"
    if strides and o.numel() > 1 and o.stride() != e.stride():
        return f"{path}: STRIDES {o.stride()} vs {e.stride()}"
    o, e = o.detach(), e.detach()
    if not o.is_floating_point():
        if torch.equal(o, e):
            return None
        bad = (o != e).nonzero()[:3].tolist()
        return f"{path}: INT VALUES at {bad}: {o[o != e][:4].tolist()} vs {e[o != e][:4].tolist()}"
    if not torch.equal(o.isnan(), e.isnan()):
        return f"{path}: NaN positions differ ({int(o.isnan().sum())} vs {int(e.isnan().sum())})"
    fin = ~e.isnan()
    of, ef = o[fin].double(), e[fin].double()
    tol = TOL.get(e.dtype, 1e-5)
    bad = ~torch.isclose(of, ef, rtol=tol, atol=tol * 0.1)
    if bad.any():
        err = ((of - ef).abs() / ef.abs().clamp(min=1e-6))[bad].max()
        return f"{path}: VALUE ({int(bad.sum())} bad, rel {err:.2e}) xla={of[bad][:3].tolist()} eager={ef[bad][:3].tolist()}"
    return None


def compare_values(o, e, path, strides=True):
    if isinstance(e, torch.Tensor):
        return compare_tensors(o, e, path, strides)
    if isinstance(e, (list, tuple)):
        if not isinstance(o, (list, tuple)) or len(o) != len(e):
            return f"{path}: structure {type(o)} vs {type(e)}"
        for i, (a, b) in enumerate(zip(o, e)):
            d = compare_values(a, b, f"{path}[{i}]", strides)
            if d:
                return d
        return None
    return None if o == e else f"{path}: {o!r} vs {e!r}"


def _flat(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    return []


def _go(fn, args, grad):
    out = fn(*args)
    grads = None
    if grad:
        fl = [t for t in _flat(out) if t.requires_grad]
        if fl:
            loss = sum(
                (t.float() * torch.linspace(-1, 2, t.numel()).reshape(t.shape)).sum() for t in fl
            )
            loss.backward()
        grads = [a.grad if isinstance(a, torch.Tensor) else None for a in args]
    return out, grads


def compare(name, entry):
    fn, make, grad, strides = entry
    torch.manual_seed(0)
    args_e = [m() for m in make]
    torch.manual_seed(0)
    args_x = [m() for m in make]
    torch.manual_seed(0)
    try:
        exp = _go(fn, args_e, grad)
    except Exception as err:  # noqa: BLE001
        exp = err
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    torch.manual_seed(0)
    try:
        got = _go(compiled, args_x, grad)
    except Exception as err:  # noqa: BLE001
        got = err
    if isinstance(exp, Exception) or isinstance(got, Exception):
        if isinstance(exp, Exception) and isinstance(got, type(exp)):
            return f"ok   {name} (both raise {type(exp).__name__})"
        return f"BAD  {name}: xla {got!r:.300} vs eager {exp!r:.300}"
    d = compare_values(got[0], exp[0], "out", strides)
    if d is None and grad:
        for i, (a, b) in enumerate(zip(got[1], exp[1])):
            if (a is None) != (b is None):
                d = f"arg{i}.grad None-ness: xla {a is None} eager {b is None}"
                break
            if b is not None:
                d = compare_tensors(a, b, f"arg{i}.grad", strides)
                if d:
                    break
    if d is None:
        for i, (a, b) in enumerate(zip(args_x, args_e)):
            if isinstance(b, torch.Tensor):
                d = compare_tensors(a, b, f"arg{i} after", False)
                if d:
                    break
    return f"ok   {name}" if d is None else f"BAD  {name}: {d}"


# ---------------------------------------------------------------- interpolate
X4 = (2, 3, 7, 9)
for mode, nd in (
    ("nearest", 1),
    ("nearest", 2),
    ("nearest", 3),
    ("nearest-exact", 1),
    ("nearest-exact", 2),
    ("nearest-exact", 3),
    ("linear", 1),
    ("bilinear", 2),
    ("bicubic", 2),
    ("trilinear", 3),
    ("area", 1),
    ("area", 2),
    ("area", 3),
):
    shape = {1: (2, 3, 11), 2: X4, 3: (1, 2, 5, 6, 7)}[nd]
    ac_opts = [None] if mode.startswith("nearest") or mode == "area" else [False, True]
    for ac in ac_opts:
        tag = f"{mode}{nd}d" + ("" if ac is None else f"_ac{int(ac)}")
        kw = {} if ac is None else {"align_corners": ac}
        for sz_name, sz in (("up", 2.0), ("down", 0.6), ("odd", 1.7), ("third", 1 / 3)):
            case(
                f"interp_{tag}_scale_{sz_name}",
                lambda x, sz=sz, kw=kw, mode=mode: F.interpolate(
                    x, scale_factor=sz, mode=mode, **kw
                ),
                img(*shape),
            )
            if mode != "area":
                case(
                    f"interp_{tag}_scale_{sz_name}_recompute",
                    lambda x, sz=sz, kw=kw, mode=mode: F.interpolate(
                        x, scale_factor=sz, mode=mode, recompute_scale_factor=True, **kw
                    ),
                    img(*shape),
                )
        sizes = {1: (5,), 2: (4, 13), 3: (3, 8, 4)}[nd]
        case(
            f"interp_{tag}_size",
            lambda x, s=sizes, kw=kw, mode=mode: F.interpolate(x, size=s, mode=mode, **kw),
            img(*shape),
        )
        if nd >= 2:
            fmt = CL if nd == 2 else CL3
            case(
                f"interp_{tag}_cl",
                lambda x, s=sizes, kw=kw, mode=mode: F.interpolate(x, size=s, mode=mode, **kw),
                img(*shape, fmt=fmt),
            )
            case(
                f"interp_{tag}_cl_scale",
                lambda x, kw=kw, mode=mode: F.interpolate(x, scale_factor=1.5, mode=mode, **kw),
                img(*shape, fmt=fmt),
            )
        for dt in (H, B):
            case(
                f"interp_{tag}_{str(dt)[6:]}",
                lambda x, s=sizes, kw=kw, mode=mode: F.interpolate(x, size=s, mode=mode, **kw),
                img(*shape, dtype=dt),
            )
        case(
            f"interp_{tag}_f64",
            lambda x, s=sizes, kw=kw, mode=mode: F.interpolate(x, size=s, mode=mode, **kw),
            img(*shape, dtype=F64),
        )
        case(
            f"interp_{tag}_uint8",
            lambda x, s=sizes, kw=kw, mode=mode: F.interpolate(x, size=s, mode=mode, **kw),
            ints(*shape),
            grad=False,
        )
        if nd >= 2:
            case(
                f"interp_{tag}_uint8_cl",
                lambda x, s=sizes, kw=kw, mode=mode: F.interpolate(x, size=s, mode=mode, **kw),
                ints(*shape, fmt=CL if nd == 2 else CL3),
                grad=False,
            )
    # scale tuple with different per-axis factors
    if nd >= 2:
        sf = (1.5, 0.5) if nd == 2 else (2.0, 0.5, 1.25)
        kw = {} if mode.startswith("nearest") or mode == "area" else {"align_corners": False}
        case(
            f"interp_{mode}{nd}d_scale_tuple",
            lambda x, sf=sf, kw=kw, mode=mode: F.interpolate(x, scale_factor=sf, mode=mode, **kw),
            img(*shape),
        )

for mode in ("bilinear", "bicubic"):
    for ac in (False, True):
        for sz in ((3, 4), (5, 20), (14, 4)):
            case(
                f"interp_aa_{mode}_ac{int(ac)}_{sz[0]}x{sz[1]}",
                lambda x, sz=sz, mode=mode, ac=ac: F.interpolate(
                    x, size=sz, mode=mode, align_corners=ac, antialias=True
                ),
                img(2, 3, 11, 13),
            )
        case(
            f"interp_aa_{mode}_ac{int(ac)}_scale",
            lambda x, mode=mode, ac=ac: F.interpolate(
                x, scale_factor=0.37, mode=mode, align_corners=ac, antialias=True
            ),
            img(2, 3, 11, 13),
        )
        case(
            f"interp_aa_{mode}_ac{int(ac)}_cl",
            lambda x, mode=mode, ac=ac: F.interpolate(
                x, size=(4, 5), mode=mode, align_corners=ac, antialias=True
            ),
            img(2, 3, 11, 13, fmt=CL),
        )
        case(
            f"interp_aa_{mode}_ac{int(ac)}_uint8",
            lambda x, mode=mode, ac=ac: F.interpolate(
                x, size=(4, 5), mode=mode, align_corners=ac, antialias=True
            ),
            ints(2, 3, 11, 13),
            grad=False,
        )
        case(
            f"interp_aa_{mode}_ac{int(ac)}_bf16",
            lambda x, mode=mode, ac=ac: F.interpolate(
                x, size=(4, 5), mode=mode, align_corners=ac, antialias=True
            ),
            img(2, 3, 11, 13, dtype=B),
        )

case("upsample_module_nearest", lambda x: nn.Upsample(scale_factor=2)(x), img(*X4))
case(
    "upsample_module_bilinear",
    lambda x: nn.Upsample(size=(5, 6), mode="bilinear", align_corners=True)(x),
    img(*X4),
)
case(
    "interp_3d_input_to_bilinear_err",
    lambda x: F.interpolate(x, size=4, mode="bilinear"),
    img(2, 3, 5),
)
case(
    "interp_bad_size_len_err", lambda x: F.interpolate(x, size=(4, 5, 6), mode="nearest"), img(*X4)
)
case(
    "interp_unbatched_3d_nearest", lambda x: F.interpolate(x[None], scale_factor=2)[0], img(3, 4, 5)
)
case(
    "interp_nearest_inf_nan",
    lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),
    const(torch.tensor([[[[1.0, float("inf"), 2.0], [float("nan"), 0.0, -float("inf")]]]])),
    grad=False,
)
case(
    "interp_bicubic_inf",
    lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    const(torch.tensor([[[[1.0, float("inf"), 2.0], [3.0, 0.0, 1.0]]]])),
    grad=False,
)
case(
    "interp_area_inf",
    lambda x: F.interpolate(x, size=(1, 2), mode="area"),
    const(torch.tensor([[[[1.0, float("inf"), 2.0], [3.0, 0.0, 1.0]]]])),
    grad=False,
)
case(
    "interp_nearest_int64",
    lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    ints(1, 2, 3, 4, dtype=torch.int64),
    grad=False,
)
case(
    "interp_bilinear_int_err",
    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    ints(1, 2, 3, 4, dtype=torch.int64),
    grad=False,
)
case(
    "interp_noncontig_input",
    lambda x: F.interpolate(x.transpose(2, 3), size=(5, 5), mode="bilinear"),
    img(*X4),
)
case(
    "interp_nearest_bool",
    lambda x: F.interpolate(x, scale_factor=2),
    const(torch.rand(1, 1, 3, 3) > 0.5),
    grad=False,
)


# ---------------------------------------------------------------- grid_sample / affine_grid
def grid2(n=2, h=5, w=6, scale=1.3, seed=1):
    return lambda: (
        (torch.rand(n, h, w, 2, generator=torch.Generator().manual_seed(seed)) * 2 - 1) * scale
    )


for mode in ("bilinear", "nearest", "bicubic"):
    for pm in ("zeros", "border", "reflection"):
        for ac in (False, True):
            tag = f"{mode}_{pm}_ac{int(ac)}"

            def gs(x, g, mode=mode, pm=pm, ac=ac):
                return F.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac)

            def mkgrid(seed=1):
                def m():
                    g = grid2(seed=seed)()
                    return g.requires_grad_()

                return m

            case(f"grid_sample2d_{tag}", gs, img(2, 3, 4, 7), mkgrid())
            case(f"grid_sample2d_{tag}_cl", gs, img(2, 3, 4, 7, fmt=CL), mkgrid())
            if mode != "bicubic":

                def mk5(seed=2):
                    def m():
                        g = torch.rand(2, 3, 4, 5, 3, generator=torch.Generator().manual_seed(seed))
                        return ((g * 2 - 1) * 1.4).requires_grad_()

                    return m

                case(f"grid_sample3d_{tag}", gs, img(2, 2, 3, 4, 5), mk5())
case(
    "grid_sample_f64",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    img(1, 2, 4, 5, dtype=F64),
    lambda: grid2(1)().double().requires_grad_(),
)
case(
    "grid_sample_nograd_grid",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    img(1, 2, 4, 5),
    grid2(1),
)
case(
    "grid_sample_bf16",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    img(1, 2, 4, 5, dtype=B),
    lambda: grid2(1)().to(B),
)
case(
    "grid_sample_far_outside",
    lambda x, g: F.grid_sample(x, g * 10, padding_mode="reflection", align_corners=False),
    img(1, 2, 4, 5),
    grid2(1),
)
case(
    "grid_sample_nan_grid",
    lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=False),
    img(1, 2, 4, 5, rg=False),
    const(torch.tensor([[[[float("nan"), 0.0], [0.2, float("inf")]]]])),
    grad=False,
)
case(
    "grid_sample_dtype_mismatch_err",
    lambda x, g: F.grid_sample(x, g, align_corners=False),
    img(1, 2, 4, 5),
    lambda: grid2(1)().double(),
)
for ac in (False, True):
    case(
        f"affine_grid2d_ac{int(ac)}",
        lambda th, ac=ac: F.affine_grid(th, (2, 3, 5, 7), align_corners=ac),
        lambda: (torch.eye(2, 3)[None].repeat(2, 1, 1) + 0.1 * r(2, 2, 3)).requires_grad_(),
    )
    case(
        f"affine_grid3d_ac{int(ac)}",
        lambda th, ac=ac: F.affine_grid(th, (2, 3, 4, 5, 3), align_corners=ac),
        lambda: (torch.eye(3, 4)[None].repeat(2, 1, 1) + 0.1 * r(2, 3, 4)).requires_grad_(),
    )
    case(
        f"affine_then_sample_ac{int(ac)}",
        lambda x, th, ac=ac: F.grid_sample(
            x, F.affine_grid(th, (2, 3, 6, 6), align_corners=ac), align_corners=ac
        ),
        img(2, 3, 8, 8),
        lambda: (torch.eye(2, 3)[None].repeat(2, 1, 1) * 0.8 + 0.1 * r(2, 2, 3)).requires_grad_(),
    )
case(
    "affine_grid_bad_theta_err",
    lambda th: F.affine_grid(th, (2, 3, 5, 7), align_corners=False),
    img(2, 3, 3),
)


# ---------------------------------------------------------------- pooling
def awkward(*shape, dtype=F32, fmt=None, rg=True):
    def make():
        torch.manual_seed(0)
        x = F.relu(torch.randn(shape)).to(dtype)
        rows = x.view(-1, shape[-1])
        rows[1, 1] = float("nan")
        rows[-1, :3] = float("-inf")
        if fmt is not None:
            x = x.contiguous(memory_format=fmt)
        return x.requires_grad_(rg and dtype.is_floating_point)

    return make


for nd in (1, 2, 3):
    shape = {1: (2, 3, 10), 2: (2, 3, 9, 8), 3: (1, 2, 5, 6, 7)}[nd]
    mp = getattr(F, f"max_pool{nd}d")
    ap = getattr(F, f"avg_pool{nd}d")
    for k, s, p, d, cm in (
        (2, None, 0, 1, False),
        (3, 2, 1, 1, True),
        (3, 2, 1, 2, False),
        (2, 3, 1, 1, True),
    ):
        tag = f"{nd}d_k{k}s{s}p{p}d{d}c{int(cm)}"
        case(
            f"maxpool_{tag}",
            lambda x, mp=mp, k=k, s=s, p=p, d=d, cm=cm: mp(x, k, s, p, d, cm, return_indices=True),
            awkward(*shape),
        )
        if nd >= 2:
            case(
                f"maxpool_{tag}_cl",
                lambda x, mp=mp, k=k, s=s, p=p, d=d, cm=cm: mp(
                    x, k, s, p, d, cm, return_indices=True
                ),
                awkward(*shape, fmt=CL if nd == 2 else CL3),
            )
        if d == 1:
            for cip in (True, False):
                case(
                    f"avgpool_{tag}_cip{int(cip)}",
                    lambda x, ap=ap, k=k, s=s, p=p, cm=cm, cip=cip: ap(x, k, s, p, cm, cip),
                    img(*shape),
                )
                if nd >= 2:
                    case(
                        f"avgpool_{tag}_cip{int(cip)}_div3",
                        lambda x, ap=ap, k=k, s=s, p=p, cm=cm, cip=cip: ap(x, k, s, p, cm, cip, 3),
                        img(*shape),
                    )
                    case(
                        f"avgpool_{tag}_cip{int(cip)}_cl",
                        lambda x, ap=ap, k=k, s=s, p=p, cm=cm, cip=cip: ap(x, k, s, p, cm, cip),
                        img(*shape, fmt=CL if nd == 2 else CL3),
                    )
    case(
        f"maxpool_{nd}d_unbatched",
        lambda x, mp=mp: mp(x, 2, return_indices=True),
        awkward(*shape[1:]),
    )
    case(f"avgpool_{nd}d_unbatched", lambda x, ap=ap: ap(x, 2), img(*shape[1:]))
    case(f"avgpool_{nd}d_bf16", lambda x, ap=ap: ap(x, 3, 2, 1), img(*shape, dtype=B))
    case(
        f"avgpool_{nd}d_f16",
        lambda x, ap=ap: ap(x, 3, 2, 1, count_include_pad=False),
        img(*shape, dtype=H),
    )
    case(
        f"maxpool_{nd}d_int",
        lambda x, mp=mp: mp(x, 3, 2, 1, return_indices=True),
        ints(*shape, hi=4, dtype=torch.int32),
        grad=False,
    )
    case(
        f"maxpool_{nd}d_f16",
        lambda x, mp=mp: mp(x, 3, 2, 1, return_indices=True),
        awkward(*shape, dtype=H),
    )
    case(
        f"maxpool_{nd}d_big_kernel",
        lambda x, mp=mp: mp(x, 5, 1, 2, ceil_mode=True, return_indices=True),
        awkward(*shape),
    )
    case(f"maxpool_{nd}d_pad_too_big_err", lambda x, mp=mp: mp(x, 2, 2, 2), img(*shape))
    case(
        f"avgpool_{nd}d_int_err",
        lambda x, ap=ap: ap(x, 2),
        ints(*shape, dtype=torch.int64),
        grad=False,
    )
    case(
        f"avgpool_{nd}d_int32",
        lambda x, ap=ap: ap(x, 2),
        ints(*shape, dtype=torch.int32),
        grad=False,
    )
    case(f"avgpool_{nd}d_uint8", lambda x, ap=ap: ap(x, 3, 2, 1), ints(*shape), grad=False)
    for p in (1, 2, 3.0):
        lp = getattr(F, f"lp_pool{nd}d", None)
        if lp is not None:
            case(f"lppool_{nd}d_p{p}", lambda x, lp=lp, p=p: lp(x, p, 2, 2), img(*shape))
            case(
                f"lppool_{nd}d_p{p}_ceil",
                lambda x, lp=lp, p=p: lp(x, p, 3, 2, ceil_mode=True),
                img(*shape),
            )
    amp = getattr(F, f"adaptive_max_pool{nd}d")
    aap = getattr(F, f"adaptive_avg_pool{nd}d")
    for osz in ({1: 3, 2: (3, 5), 3: (2, 4, 3)}[nd], {1: 7, 2: (4, 3), 3: (3, 5, 4)}[nd], 1):
        case(
            f"adamax_{nd}d_{osz}",
            lambda x, amp=amp, osz=osz: amp(x, osz, return_indices=True),
            awkward(*shape),
        )
        case(f"adaavg_{nd}d_{osz}", lambda x, aap=aap, osz=osz: aap(x, osz), img(*shape))
        if nd >= 2:
            case(
                f"adamax_{nd}d_{osz}_cl",
                lambda x, amp=amp, osz=osz: amp(x, osz, return_indices=True),
                awkward(*shape, fmt=CL if nd == 2 else CL3),
            )
            case(
                f"adaavg_{nd}d_{osz}_cl",
                lambda x, aap=aap, osz=osz: aap(x, osz),
                img(*shape, fmt=CL if nd == 2 else CL3),
            )
    case(f"adaavg_{nd}d_bf16", lambda x, aap=aap: aap(x, 3), img(*shape, dtype=B))
    case(
        f"adamax_{nd}d_int_err",
        lambda x, amp=amp: amp(x, 3),
        ints(*shape, dtype=torch.int64),
        grad=False,
    )
    case(
        f"adaavg_{nd}d_none",
        lambda x, aap=aap, nd=nd: aap(x, (None,) * (nd - 1) + (2,)),
        img(*shape),
    )
    case(
        f"adamax_{nd}d_larger",
        lambda x, amp=amp, nd=nd: amp(x, (12,) * nd, return_indices=True),
        awkward(*shape),
    )
    case(f"adaavg_{nd}d_larger", lambda x, aap=aap, nd=nd: aap(x, (12,) * nd), img(*shape))
    mu = getattr(F, f"max_unpool{nd}d")
    case(
        f"maxunpool_{nd}d",
        lambda x, mp=mp, mu=mu: mu(*mp(x, 2, return_indices=True), 2),
        img(*shape),
    )
    case(
        f"maxunpool_{nd}d_output_size",
        lambda x, mp=mp, mu=mu, shape=shape: mu(
            *mp(x, 3, 2, 1, return_indices=True), 3, 2, 1, output_size=shape[2:]
        ),
        img(*shape),
    )
    case(
        f"maxunpool_{nd}d_bad_size_err",
        lambda x, mp=mp, mu=mu, nd=nd: mu(*mp(x, 2, return_indices=True), 2, output_size=[3] * nd),
        img(*shape),
    )

case(
    "maxunpool2d_cl",
    lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
    img(2, 3, 8, 8, fmt=CL),
)
case(
    "maxunpool2d_dup_indices",
    lambda x, i: F.max_unpool2d(x, i, 2),
    img(1, 1, 2, 2),
    const(torch.tensor([[[[0, 0], [5, 5]]]])),
)
case(
    "maxunpool2d_oob_err",
    lambda x, i: F.max_unpool2d(x, i, 2),
    img(1, 1, 2, 2),
    const(torch.tensor([[[[0, 1], [5, 99]]]])),
)
case(
    "maxpool2d_all_nan_window",
    lambda x: F.max_pool2d(x, 2, return_indices=True),
    const(torch.tensor([[[[float("nan"), float("nan")], [float("nan"), 1.0]]]]).requires_grad_()),
)
case(
    "maxpool2d_ties_grad",
    lambda x: F.max_pool2d(x, 3, 1, 1),
    const(torch.ones(1, 1, 4, 4).requires_grad_()),
)
case("avgpool2d_kernel_gt_input_err", lambda x: F.avg_pool2d(x, 5), img(1, 1, 3, 3))
case(
    "avgpool2d_ceil_overhang_only_pad",
    lambda x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=True),
    img(1, 1, 4, 4),
)
case(
    "avgpool2d_ceil_overhang_only_pad_noinc",
    lambda x: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False),
    img(1, 1, 4, 4),
)
case("avgpool1d_ceil_overhang", lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), img(1, 1, 6))
case(
    "avgpool3d_ceil_div",
    lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, divisor_override=5),
    img(1, 1, 6, 5, 4),
)
case(
    "avgpool2d_inf",
    lambda x: F.avg_pool2d(x, 2, 1),
    const(torch.tensor([[[[1.0, float("inf"), 2.0], [3.0, 0.0, -float("inf")]]]])),
    grad=False,
)
case("avgpool2d_neg_divisor_err", lambda x: F.avg_pool2d(x, 2, divisor_override=0), img(1, 1, 4, 4))
case("lppool2d_neg_values_p1", lambda x: F.lp_pool2d(x, 1, 2), img(1, 2, 4, 4))
case(
    "lppool2d_zero_window",
    lambda x: F.lp_pool2d(x, 2, 2),
    const(torch.zeros(1, 1, 4, 4).requires_grad_()),
)
case("lppool1d_inf_p", lambda x: F.lp_pool1d(x, float("inf"), 2), img(1, 2, 6))

# fractional max pool with fixed samples
for nd in (2, 3):
    fm = getattr(F, f"fractional_max_pool{nd}d")
    shape = (2, 3, 9, 10) if nd == 2 else (1, 2, 7, 8, 9)
    osz = (5, 4) if nd == 2 else (4, 5, 3)
    case(
        f"fracmax_{nd}d_samples",
        lambda x, s, fm=fm, osz=osz: fm(
            x, 2, output_size=osz, return_indices=True, _random_samples=s
        ),
        awkward(*shape),
        lambda nd=nd, shape=shape: torch.rand(
            shape[0], shape[1], nd, generator=torch.Generator().manual_seed(3)
        ),
    )
    case(
        f"fracmax_{nd}d_ratio_samples",
        lambda x, s, fm=fm: fm(x, 3, output_ratio=0.5, return_indices=True, _random_samples=s),
        awkward(*shape),
        lambda nd=nd, shape=shape: torch.rand(
            shape[0], shape[1], nd, generator=torch.Generator().manual_seed(4)
        ),
    )
    case(
        f"fracmax_{nd}d_random_shape",
        lambda x, fm=fm, osz=osz: fm(x, 2, output_size=osz)[..., :0].shape,
        img(*shape, rg=False),
        grad=False,
    )

# ---------------------------------------------------------------- shuffles, unfold/fold, pads
case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), img(2, 8, 3, 4))
case("pixel_shuffle_cl", lambda x: F.pixel_shuffle(x, 2), img(2, 8, 3, 4, fmt=CL))
case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), img(2, 2, 6, 4))
case("pixel_unshuffle_cl", lambda x: F.pixel_unshuffle(x, 2), img(2, 2, 6, 4, fmt=CL))
case("pixel_shuffle_5d", lambda x: F.pixel_shuffle(x, 2), img(2, 3, 8, 3, 4))
case("pixel_shuffle_bad_err", lambda x: F.pixel_shuffle(x, 2), img(2, 6, 3, 4))
case("pixel_unshuffle_bad_err", lambda x: F.pixel_unshuffle(x, 2), img(2, 2, 5, 4))
case("pixel_shuffle_int", lambda x: F.pixel_shuffle(x, 2), ints(1, 4, 2, 2), grad=False)
case("channel_shuffle", lambda x: F.channel_shuffle(x, 3), img(2, 6, 3, 4))
case("channel_shuffle_cl", lambda x: F.channel_shuffle(x, 2), img(2, 6, 3, 4, fmt=CL))
case("channel_shuffle_module", lambda x: nn.ChannelShuffle(2)(x), img(2, 4, 3, 3))
case("channel_shuffle_bad_err", lambda x: F.channel_shuffle(x, 4), img(2, 6, 3, 4))
case("native_channel_shuffle", lambda x: torch.native_channel_shuffle(x, 3), img(2, 6, 3, 4))
for k, d, p, s in ((2, 1, 0, 1), (3, 2, 1, 2), ((2, 3), (1, 2), (1, 0), (2, 1))):
    tag = f"k{k}d{d}p{p}s{s}".replace(" ", "")
    case(f"unfold_{tag}", lambda x, k=k, d=d, p=p, s=s: F.unfold(x, k, d, p, s), img(2, 3, 7, 8))
    case(
        f"unfold_{tag}_cl",
        lambda x, k=k, d=d, p=p, s=s: F.unfold(x, k, d, p, s),
        img(2, 3, 7, 8, fmt=CL),
    )
    case(
        f"fold_roundtrip_{tag}",
        lambda x, k=k, d=d, p=p, s=s: F.fold(F.unfold(x, k, d, p, s), (7, 8), k, d, p, s),
        img(2, 3, 7, 8),
    )
case("fold_unbatched", lambda x: F.fold(x, (4, 5), 2, stride=1), img(12, 12))
case("fold_bad_err", lambda x: F.fold(x, (4, 5), 2, stride=1), img(2, 11, 12))
case("unfold_unbatched", lambda x: F.unfold(x, 2), img(3, 4, 4))
case("unfold_int", lambda x: F.unfold(x, 2), ints(1, 2, 4, 4, dtype=torch.int64), grad=False)
case("unfold_bf16", lambda x: F.unfold(x, 3, padding=1), img(1, 2, 4, 4, dtype=B))
case("fold_bf16", lambda x: F.fold(x, (4, 5), 2), img(1, 8, 12, dtype=B))
case(
    "tensor_unfold_patches",
    lambda x: x.unfold(2, 3, 2).unfold(3, 3, 2).contiguous(),
    img(2, 3, 7, 8),
)
case("tensor_unfold_patches_view", lambda x: x.unfold(2, 3, 2).unfold(3, 3, 2) * 1, img(2, 3, 7, 8))
for mode in ("reflect", "replicate", "circular"):
    for nd, shape, pad in (
        (1, (2, 3, 7), (2, 3)),
        (2, (2, 3, 5, 6), (1, 2, 3, 0)),
        (3, (1, 2, 3, 4, 5), (1, 1, 2, 0, 1, 2)),
    ):
        case(
            f"pad_{mode}_{nd}d", lambda x, mode=mode, pad=pad: F.pad(x, pad, mode=mode), img(*shape)
        )
        if nd >= 2:
            case(
                f"pad_{mode}_{nd}d_cl",
                lambda x, mode=mode, pad=pad: F.pad(x, pad, mode=mode),
                img(*shape, fmt=CL if nd == 2 else CL3),
            )
        case(
            f"pad_{mode}_{nd}d_unbatched",
            lambda x, mode=mode, pad=pad: F.pad(x, pad, mode=mode),
            img(*shape[1:]),
        )
        case(
            f"pad_{mode}_{nd}d_neg",
            lambda x, mode=mode, pad=pad: F.pad(
                x, tuple(-1 if i == 0 else q for i, q in enumerate(pad)), mode=mode
            ),
            img(*shape),
        )
    case(f"pad_{mode}_too_big_err", lambda x, mode=mode: F.pad(x, (8, 1), mode=mode), img(2, 3, 7))
    case(
        f"pad_{mode}_int",
        lambda x, mode=mode: F.pad(x, (1, 2, 2, 1), mode=mode),
        ints(1, 2, 4, 4, dtype=torch.int64),
        grad=False,
    )
    case(
        f"pad_{mode}_bf16",
        lambda x, mode=mode: F.pad(x, (1, 2, 2, 1), mode=mode),
        img(1, 2, 4, 4, dtype=B),
    )
case("pad_reflect_full", lambda x: F.pad(x, (3, 3), mode="reflect"), img(1, 2, 4))
case("pad_circular_full", lambda x: F.pad(x, (4, 4), mode="circular"), img(1, 2, 4))
case("pad_circular_too_big_err", lambda x: F.pad(x, (5, 0), mode="circular"), img(1, 2, 4))
case("pad_constant_neg", lambda x: F.pad(x, (-1, 2, 1, -2), value=3.5), img(2, 3, 5, 6))
case("pad_constant_neg_cl", lambda x: F.pad(x, (-1, 2, 1, -2), value=3.5), img(2, 3, 5, 6, fmt=CL))
case("pad_constant_all_neg", lambda x: F.pad(x, (-2, -1, -1, -1)), img(2, 3, 5, 6))
case("pad_constant_to_empty", lambda x: F.pad(x, (-3, -3)), img(2, 3, 6))
case("pad_constant_too_neg_err", lambda x: F.pad(x, (-4, -3)), img(2, 3, 6))
case(
    "pad_constant_int_float_value",
    lambda x: F.pad(x, (1, 1), value=2.7),
    ints(1, 2, 3, dtype=torch.int64),
    grad=False,
)
case(
    "pad_constant_uint8_neg_value", lambda x: F.pad(x, (1, 1), value=-1), ints(1, 2, 3), grad=False
)
case(
    "pad_constant_bool",
    lambda x: F.pad(x, (1, 1), value=True),
    const(torch.tensor([[True, False]])),
    grad=False,
)
case("pad_constant_cl", lambda x: F.pad(x, (1, 1, 2, 0)), img(2, 3, 4, 5, fmt=CL))
case(
    "pad_replicate_cl_3d",
    lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate"),
    img(1, 2, 3, 3, 3, fmt=CL3),
)
case("pad_reflect_2d_on_3d_input", lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), img(3, 4, 5))
case("pad_reflect_bad_dims_err", lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"), img(4, 5))
case(
    "pad_reflect_inf",
    lambda x: F.pad(x, (2, 2), mode="reflect"),
    const(torch.tensor([[[1.0, float("inf"), float("nan"), 2.0]]])),
    grad=False,
)

# ---------------------------------------------------------------- roll / flip / rot90
case("roll_hw", lambda x: torch.roll(x, (1, -2), (2, 3)), img(2, 3, 5, 6))
case("roll_cl", lambda x: torch.roll(x, 2, 3), img(2, 3, 5, 6, fmt=CL))
case("roll_flat", lambda x: torch.roll(x, 7), img(2, 3, 4))
case("roll_big_shift", lambda x: torch.roll(x, (13, -27), (2, 3)), img(1, 2, 5, 6))
case("roll_empty_dim", lambda x: torch.roll(x, 3, 1), img(2, 0, 3))
case("roll_len_mismatch_err", lambda x: torch.roll(x, (1, 2), (1,)), img(2, 3))
case("flip_hw", lambda x: torch.flip(x, (2, 3)), img(2, 3, 5, 6))
case("flip_cl", lambda x: torch.flip(x, (3,)), img(2, 3, 5, 6, fmt=CL))
case("flip_neg_dims", lambda x: x.flip(-1, -2), img(2, 3, 5, 6))
case("flip_dup_err", lambda x: x.flip(2, 2), img(2, 3, 5, 6))
case("fliplr", lambda x: torch.fliplr(x), img(4, 5))
case("flipud_int", lambda x: torch.flipud(x), ints(4, 5), grad=False)
for k in (-3, -1, 0, 1, 2, 3, 5):
    case(f"rot90_k{k}", lambda x, k=k: torch.rot90(x, k, (2, 3)), img(2, 3, 4, 5))
case("rot90_cl", lambda x: torch.rot90(x, 1, (2, 3)), img(2, 3, 4, 5, fmt=CL))
case("rot90_dims_rev", lambda x: torch.rot90(x, 1, (3, 2)), img(2, 3, 4, 5))
case("rot90_same_dims_err", lambda x: torch.rot90(x, 1, (2, 2)), img(2, 3, 4, 5))

# ---------------------------------------------------------------- conv_transpose
for cfg in (
    {"stride": 2, "output_padding": 1},
    {"stride": 3, "padding": 1, "output_padding": 2, "dilation": 1},
    {"stride": 2, "padding": 2, "output_padding": 1, "dilation": 2},
    {"stride": 2, "groups": 2, "output_padding": 1},
    {"stride": (2, 1), "padding": (1, 0), "output_padding": (1, 0), "groups": 4},
):
    tag = "_".join(f"{k}{v}" for k, v in cfg.items()).replace(" ", "")

    def ctf(x, w, b, cfg=cfg):
        return F.conv_transpose2d(x, w, b, **cfg)

    g = cfg.get("groups", 1)
    case(
        f"convT2d_{tag}",
        ctf,
        img(2, 4, 5, 6),
        img(4, 6 // g * 1 if g > 1 else 3, 3, 3, seed=1),
        img(6 // g * g if g > 1 else 3, seed=2),
    )
    case(
        f"convT2d_{tag}_cl",
        ctf,
        img(2, 4, 5, 6, fmt=CL),
        img(4, 6 // g if g > 1 else 3, 3, 3, seed=1),
        img(6 if g > 1 else 3, seed=2),
    )
case(
    "convT2d_out_pad_too_big_err",
    lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2),
    img(1, 2, 3, 3),
    img(2, 2, 3, 3),
)
case(
    "convT1d_groups",
    lambda x, w: F.conv_transpose1d(x, w, stride=2, groups=2, output_padding=1, dilation=2),
    img(2, 4, 7),
    img(4, 3, 3),
)
case(
    "convT3d",
    lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1),
    img(1, 2, 3, 4, 3),
    img(2, 3, 3, 3, 3),
)
case(
    "convT3d_cl",
    lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1),
    img(1, 2, 3, 4, 3, fmt=CL3),
    img(2, 3, 3, 3, 3),
)
case(
    "convT2d_module_output_size",
    lambda x: nn.ConvTranspose2d(2, 3, 3, stride=2).eval()(x, output_size=(8, 10)),
    img(1, 2, 4, 5),
)
case(
    "convT2d_bf16",
    lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1),
    img(1, 2, 3, 3, dtype=B),
    img(2, 2, 3, 3, dtype=B),
)
case(
    "convT2d_nobias_nograd_w",
    lambda x, w: F.conv_transpose2d(x, w, stride=2),
    img(1, 2, 3, 3),
    img(2, 2, 3, 3, rg=False),
)


# ---------------------------------------------------------------- user-style
class Down(nn.Module):
    def __init__(self, ci, co):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(ci, co, 3, padding=1), nn.BatchNorm2d(co), nn.ReLU())

    def forward(self, x):
        return self.conv(F.max_pool2d(x, 2))


class UNet(nn.Module):
    def __init__(self, up="interp"):
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.down = Down(8, 16)
        self.up_mode = up
        self.upT = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.red = nn.Conv2d(16, 8, 1)
        self.out = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        a = self.inc(x)
        b = self.down(a)
        if self.up_mode == "interp":
            u = self.red(F.interpolate(b, size=a.shape[-2:], mode="bilinear", align_corners=False))
        elif self.up_mode == "nearest":
            u = self.red(F.interpolate(b, scale_factor=2, mode="nearest"))
        else:
            u = self.upT(b)
        return self.out(torch.cat([a, u], 1))


def _unet_train(up, cl):
    def scenario(*_):
        torch.manual_seed(0)
        m = UNet(up)
        x = torch.randn(2, 3, 8, 8)
        tgt = torch.randn(2, 2, 8, 8)
        if cl:
            m = m.to(memory_format=CL)
            x = x.contiguous(memory_format=CL)
        return m, x, tgt

    return scenario


def _train(fn_compile):
    def run_it(up, cl):
        m, x, tgt = _unet_train(up, cl)()
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(x, tgt):
            opt.zero_grad()
            out = m(x)
            loss = F.mse_loss(out, tgt)
            loss.backward()
            return loss, out

        step_c = fn_compile(step)
        res = []
        for _ in range(3):
            loss, out = step_c(x, tgt)
            res.append(loss.detach().clone())
        res.append(out.detach().clone())
        res.extend(p.detach().clone() for p in m.parameters())
        res.extend(b.clone() for b in m.buffers())
        return res

    return run_it


def unet_compare(name, up, cl):
    torch.manual_seed(0)
    exp = _train(lambda f: f)(up, cl)
    torch._dynamo.reset()
    got = _train(lambda f: torch.compile(f, backend="xla", options={"strict": True}))(up, cl)
    d = compare_values(got, exp, "train", strides=True)
    return f"ok   {name}" if d is None else f"BAD  {name}: {d}"


SPECIAL = {}
for up in ("interp", "nearest", "convT"):
    for cl in (False, True):
        SPECIAL[f"unet_train_{up}_cl{int(cl)}"] = (up, cl)


def augment(img, flip: bool, top: int, left: int):
    if flip:
        img = img.flip(-1)
    img = img[..., top : top + 6, left : left + 6]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    return (img.float() / 255 - mean) / std


case("augment_uint8_flip", lambda x: augment(x, True, 1, 2), ints(3, 8, 9), grad=False)
case("augment_uint8_noflip", lambda x: augment(x, False, 2, 0), ints(3, 8, 9), grad=False)
case("augment_uint8_cl", lambda x: augment(x, True, 1, 2), ints(2, 3, 8, 9, fmt=CL), grad=False)
case("augment_float_grad", lambda x: augment(x, True, 0, 1), img(3, 8, 9))
case(
    "augment_resize_crop",
    lambda x: (
        F.interpolate(x[None].float(), size=(10, 10), mode="bilinear", antialias=False)[
            0, :, 2:8, 1:7
        ]
        .round()
        .clamp(0, 255)
        .to(torch.uint8)
    ),
    ints(3, 7, 9),
    grad=False,
)
case(
    "augment_random_flip_where",
    lambda x, m: torch.where(m.view(-1, 1, 1, 1), x.flip(-1), x),
    img(4, 3, 5, 6),
    const(torch.tensor([True, False, True, False])),
)


def main(argv):
    table = dict(CASES)
    table.update({k: ("SPECIAL", v) for k, v in SPECIAL.items()})

    def cmp(name, entry):
        if entry[0] == "SPECIAL":
            return unet_compare(name, *entry[1])
        return compare(name, entry)

    return run(argv, table, cmp)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
