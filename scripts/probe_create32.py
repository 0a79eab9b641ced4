"""Tensor creation, dtype defaults and process-global state as users write them inside
compiled code (session 32): arange/linspace/logspace/full/tensor/new_*/eye/tril_indices/...,
the default dtype and device changed between calls, generators, manual_seed, Python-scalar
promotion with 0-d tensors. Each case runs eagerly and under
``torch.compile(..., backend="xla")``; dtypes, shapes, strides, devices and values must match
exactly (floats within 1e-6 relative where the op rounds), errors must match in type.

    OMP_NUM_THREADS=1 PYTHONPATH=. python scripts/probe_create32.py [substring ...]
"""

from __future__ import annotations

import cmath
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _probe_common import run

warnings.simplefilter("ignore")
CASES: dict = {}


def case(name, fn, *make, exact=True, rand=False):
    CASES[name] = (fn, make, exact, rand)


def cmp_t(o, e, path, exact, rand):
    if not isinstance(o, torch.Tensor):
        return f"{path}: {type(o).__name__} vs tensor"
    if o.dtype != e.dtype or o.shape != e.shape or o.device != e.device:
        return (
            f"{path}: {o.dtype}{tuple(o.shape)}@{o.device} vs {e.dtype}{tuple(e.shape)}@{e.device}"
        )
    if o.numel() > 1 and o.stride() != e.stride():
        return f"{path}: stride {o.stride()} vs {e.stride()}"
    if o.requires_grad != e.requires_grad:
        return f"{path}: requires_grad {o.requires_grad} vs {e.requires_grad}"
    if rand:
        return None
    o, e = o.detach(), e.detach()
    if o.is_complex():
        o, e = torch.view_as_real(o), torch.view_as_real(e)
    if not o.is_floating_point():
        return None if torch.equal(o, e) else f"{path}: {o.tolist()} vs {e.tolist()}"
    if exact:
        ok = (
            torch.equal(o, e)
            or torch.equal(o.isnan(), e.isnan())
            and torch.equal(o[~o.isnan()], e[~e.isnan()])
        )
    else:
        ok = torch.allclose(o.double(), e.double(), rtol=1e-6, atol=0, equal_nan=True)
    return None if ok else f"{path}: {o.tolist()} vs {e.tolist()}"


def _nan(v) -> bool:
    return isinstance(v, float | complex) and cmath.isnan(v)


def _masked_set(y, v):
    y[y.bool()] = v
    return y


def cmp(o, e, path, exact, rand):
    if isinstance(e, torch.Tensor):
        return cmp_t(o, e, path, exact, rand)
    if isinstance(e, (list, tuple)):
        if type(o) is not type(e) or len(o) != len(e):
            return f"{path}: {type(o).__name__}[{len(o) if hasattr(o, '__len__') else '?'}] vs {type(e).__name__}[{len(e)}]"
        for i, (a, b) in enumerate(zip(o, e)):
            d = cmp(a, b, f"{path}[{i}]", exact, rand)
            if d:
                return d
        return None
    if rand:
        return None
    return (
        None
        if (o == e or (_nan(o) and _nan(e))) and type(o) is type(e)
        else f"{path}: {o!r} vs {e!r}"
    )


def compare(name, entry):
    fn, make, exact, rand = entry
    torch.manual_seed(0)
    args_e = [m() for m in make]
    torch.manual_seed(0)
    args_x = [m() for m in make]
    torch.manual_seed(0)
    try:
        exp = fn(*args_e)
    except Exception as err:  # noqa: BLE001
        exp = err
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="xla", options={"strict": True})
    torch.manual_seed(0)
    try:
        got = compiled(*args_x)
    except Exception as err:  # noqa: BLE001
        got = err
    if isinstance(exp, Exception) or isinstance(got, Exception):
        if isinstance(exp, Exception) and isinstance(got, type(exp)):
            return f"ok   {name} (both raise {type(exp).__name__})"
        return f"BAD  {name}: xla {got!r:.300} vs eager {exp!r:.300}"
    d = cmp(got, exp, "out", exact, rand)
    if d is None:
        for i, (a, b) in enumerate(zip(args_x, args_e)):
            if isinstance(b, torch.Tensor):
                d = cmp_t(a, b, f"arg{i} after", exact, rand)
                if d:
                    break
    return f"ok   {name}" if d is None else f"BAD  {name}: {d}"


F16, BF, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I8, U8, I16, I32, I64, BOOL = (
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
)
x4 = lambda: torch.randn(4)
x23 = lambda: torch.randn(2, 3)

# ------------------------------------------------------------------ arange
for args in [
    (0, 1, 0.1),
    (1, 2.5, 0.3),
    (0, 1, 1 / 3),
    (2.5, 0, -0.5),
    (1, -1, -0.1),
    (0.0, 5),
    (-3, 3, 0.7),
    (0, 10, 3),
    (10, 0, -3),
    (0.5,),
    (1e-3, 1e-2, 1e-3),
    (0, 2**24 + 3, 2**22),
]:
    case(
        f"arange{args}",
        lambda x, a=args: x + torch.arange(*a).sum() * 0 if False else (torch.arange(*a), x),
        x4,
    )
    for dt in (F64, I64, I32, F16, BF, U8):
        case(f"arange{args}_{dt}", lambda x, a=args, dt=dt: torch.arange(*a, dtype=dt), x4)
case("arange_tensor_end", lambda x: torch.arange(x.shape[0] * 0.5), x4)
case("arange_float_like", lambda x: torch.arange(0, 1, 0.25, dtype=x.dtype) * x, x4)
case("arange_step0", lambda x: torch.arange(0, 1, 0), x4)
case("arange_badsign", lambda x: torch.arange(0, 1, -0.1), x4)
case("arange_empty", lambda x: torch.arange(1, 1), x4)
case("arange_out", lambda x: torch.arange(0, 4, out=x), x4)

# ------------------------------------------------------------------ linspace / logspace
for steps in (0, 1, 2, 5, 7):
    for dt in (None, I64, I32, U8, F64, F16, BF):
        case(
            f"linspace_s{steps}_{dt}",
            lambda x, s=steps, dt=dt: torch.linspace(-3, 7.5, s, dtype=dt),
            x4,
        )
        case(
            f"linspace_rev_s{steps}_{dt}",
            lambda x, s=steps, dt=dt: torch.linspace(10, 1, s, dtype=dt),
            x4,
        )
        case(
            f"logspace_s{steps}_{dt}",
            lambda x, s=steps, dt=dt: torch.logspace(-1, 2, s, dtype=dt),
            x4,
        )
        case(
            f"logspace_b2_s{steps}_{dt}",
            lambda x, s=steps, dt=dt: torch.logspace(0, 6, s, base=2, dtype=dt),
            x4,
        )
case("linspace_int_frac", lambda x: torch.linspace(0, 10, 4, dtype=I64), x4)
case("linspace_neg_int", lambda x: torch.linspace(-5, 5, 4, dtype=I64), x4)
case("linspace_neg_steps", lambda x: torch.linspace(0, 1, -1), x4)
case(
    "linspace_tensor_ends",
    lambda s, e: torch.linspace(s, e, 5),
    lambda: torch.tensor(1.0),
    lambda: torch.tensor(3.0),
)
case("logspace_base_half", lambda x: torch.logspace(0, 4, 5, base=0.5), x4)
case("logspace_int_base", lambda x: torch.logspace(0, 4, 5, base=3, dtype=I64), x4)
case("linspace_big_f32", lambda x: torch.linspace(0, 1e7, 11), x4)
case("linspace_complex", lambda x: torch.linspace(0, 1 + 1j, 5), x4)

# ------------------------------------------------------------------ full / full_like
for fill in (True, 3, -2, 2.5, 1e20, float("inf"), float("nan"), 1 + 2j, 0):
    case(f"full_{fill!r}", lambda x, f=fill: torch.full((2, 3), f), x4)
    case(f"full_like_{fill!r}", lambda x, f=fill: torch.full_like(x, f), x4)
    case(f"full_like_int_{fill!r}", lambda x, f=fill: torch.full_like(x.long(), f), x4)
    for dt in (I64, U8, BOOL, F16, I8):
        case(f"full_{fill!r}_{dt}", lambda x, f=fill, dt=dt: torch.full((3,), f, dtype=dt), x4)
case("full_like_dtype", lambda x: torch.full_like(x, 7, dtype=I32), x4)
case("full_0d", lambda x: torch.full((), 2), x4)
case("full_tensor_fill", lambda x: torch.full((3,), x.sum()), x4)
case("full_uint8_neg", lambda x: torch.full((3,), -1, dtype=U8), x4)
case("full_int8_300", lambda x: torch.full((3,), 300, dtype=I8), x4)
case(
    "full_like_cl",
    lambda x: torch.full_like(x, 1.0),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case(
    "ones_like_cl",
    lambda x: torch.ones_like(x),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case("zeros_like_t", lambda x: torch.zeros_like(x), lambda: torch.randn(3, 4).t())
case(
    "empty_like_cl_fill",
    lambda x: torch.empty_like(x, memory_format=torch.channels_last).fill_(1),
    lambda: torch.randn(2, 3, 4, 5),
)
case(
    "empty_like_preserve",
    lambda x: torch.empty_like(x).fill_(2),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case(
    "zeros_like_cont",
    lambda x: torch.zeros_like(x, memory_format=torch.contiguous_format),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case("zeros_like_dtype", lambda x: torch.zeros_like(x, dtype=I64) + 1, x23)
case(
    "rand_like_cl",
    lambda x: torch.rand_like(x),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
    rand=True,
)
case("zeros_like_sliced", lambda x: torch.zeros_like(x[:, ::2]), lambda: torch.randn(3, 8))
case("ones_like_expanded", lambda x: torch.ones_like(x.expand(3, 4)), lambda: torch.randn(1, 4))
case(
    "x_plus_zeros_like_cl",
    lambda x: x + torch.zeros_like(x),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)

# ------------------------------------------------------------------ torch.tensor inside
case("tensor_floats", lambda x: x + torch.tensor([1.5, 2.0, 3.25, -1.0]), x4)
case("tensor_ints", lambda x: torch.tensor([1, 2, 3]), x4)
case("tensor_bools", lambda x: torch.tensor([True, False]), x4)
case("tensor_mixed", lambda x: torch.tensor([1, 2.5, True]), x4)
case("tensor_nested", lambda x: torch.tensor([[1, 2], [3, 4]]) * 2, x4)
case("tensor_scalar_f", lambda x: torch.tensor(2.5), x4)
case("tensor_scalar_i", lambda x: torch.tensor(3) + x, x4)
case("tensor_big_int", lambda x: torch.tensor([2**40 + 1]), x4)
case("tensor_f64_prec", lambda x: torch.tensor([0.1], dtype=F64), x4)
case("tensor_dtype_i8", lambda x: torch.tensor([1, 2], dtype=I8), x4)
case("tensor_of_shape", lambda x: torch.tensor(x.shape), x23)
case("tensor_complex", lambda x: torch.tensor([1 + 2j, 3]), x4)
case("as_tensor_list", lambda x: torch.as_tensor([1.0, 2.0]) * x[:2], x4)
case("as_tensor_dtype", lambda x: torch.as_tensor(x, dtype=F64), x4)
case("as_tensor_int", lambda x: torch.as_tensor(3), x4)
case("tensor_from_item", lambda x: torch.tensor([x.shape[0], 1.5]), x4)
case("tensor_neg_uint8", lambda x: torch.tensor([-1], dtype=U8), x4)
case("tensor_inf", lambda x: torch.tensor([float("inf"), -float("inf")]) * 1, x4)
case("scalar_tensor", lambda x: torch.scalar_tensor(3), x4)
case("scalar_tensor_i", lambda x: torch.scalar_tensor(3, dtype=I64) + x, x4)

# ------------------------------------------------------------------ new_*
case("new_zeros", lambda x: x.new_zeros(2, 3), lambda: torch.randn(4, dtype=F64))
case("new_ones_dtype", lambda x: x.new_ones((2,), dtype=I32), x4)
case("new_full_int", lambda x: x.long().new_full((3,), 2.7), x4)
case("new_full_bool", lambda x: x.new_full((3,), True), x4)
case("new_full_on_int", lambda x: x.new_full((3,), 7), lambda: torch.arange(4))
case("new_tensor", lambda x: x.new_tensor([1, 2, 3]), lambda: torch.randn(4, dtype=F16))
case("new_tensor_float_on_int", lambda x: x.new_tensor([1.7, -2.7]), lambda: torch.arange(4))
case("new_empty_fill", lambda x: x.new_empty(2, 3).fill_(3.5), lambda: torch.arange(4))
case("new_empty_fill_f", lambda x: x.new_empty((2,)).fill_(3.5), lambda: torch.randn(4, dtype=BF))
case("new_empty_strided", lambda x: x.new_empty_strided((2, 3), (1, 2)).fill_(1), x4)
case("empty_strided_fill", lambda x: torch.empty_strided((2, 3), (1, 2)).fill_(1) + x[:3], x4)
case(
    "new_ones_cl",
    lambda x: x.new_ones(x.shape),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case("fill_int_float", lambda x: x.clone().fill_(2.7), lambda: torch.arange(4))
case("fill_tensor", lambda x: torch.zeros(3, dtype=I64).fill_(x.sum()), x4)
case("fill_uint8_neg", lambda x: torch.zeros(3, dtype=U8).fill_(-1), x4)
case("fill_bool_2", lambda x: torch.zeros(3, dtype=BOOL).fill_(2), x4)
case("zero_", lambda x: x.clone().zero_(), x4)

# ------------------------------------------------------------------ eye / indices / misc creation
for nm in [(3,), (3, 5), (5, 3), (0,), (1, 0), (4, 4)]:
    case(f"eye{nm}", lambda x, a=nm: torch.eye(*a), x4)
    case(f"eye{nm}_int", lambda x, a=nm: torch.eye(*a, dtype=I64), x4)
    case(f"eye{nm}_bool", lambda x, a=nm: torch.eye(*a, dtype=BOOL), x4)
for args in [(3, 3), (4, 3, 1), (4, 3, -1), (3, 4, 2), (3, 4, -5), (0, 0), (5, 5, 10), (3, 5, -2)]:
    case(f"tril_indices{args}", lambda x, a=args: torch.tril_indices(*a), x4)
    case(f"triu_indices{args}", lambda x, a=args: torch.triu_indices(*a), x4)
    case(f"tril_indices{args}_i32", lambda x, a=args: torch.tril_indices(*a, dtype=I32), x4)
case(
    "triu_indices_use", lambda x: x[torch.triu_indices(4, 4, 1).unbind()], lambda: torch.randn(4, 4)
)
case("polar", lambda a, b: torch.polar(a, b), x4, x4, exact=False)
case(
    "polar_f64",
    lambda a, b: torch.polar(a, b),
    lambda: torch.rand(4, dtype=F64),
    lambda: torch.randn(4, dtype=F64),
    exact=False,
)
case("complex", lambda a, b: torch.complex(a, b), x4, x4)
case(
    "complex_f64",
    lambda a, b: torch.complex(a, b),
    lambda: torch.randn(3, dtype=F64),
    lambda: torch.randn(3, dtype=F64),
)
case(
    "complex_bcast",
    lambda a, b: torch.complex(a, b),
    lambda: torch.randn(3, 1),
    lambda: torch.randn(4),
)
case("complex_mixed_err", lambda a, b: torch.complex(a, b), lambda: torch.randn(3, dtype=F64), x4)
case(
    "complex_half",
    lambda a, b: torch.complex(a, b),
    lambda: torch.randn(3, dtype=F16),
    lambda: torch.randn(3, dtype=F16),
)
case(
    "heaviside",
    lambda a, b: torch.heaviside(a, b),
    lambda: torch.tensor([-1.0, 0.0, 2.0, -0.0, float("nan")]),
    lambda: torch.tensor([0.5, 0.25, 0.75, 0.1, 0.2]),
)
case(
    "heaviside_int",
    lambda a, b: torch.heaviside(a, b),
    lambda: torch.tensor([-1, 0, 2]),
    lambda: torch.tensor([5, 6, 7]),
)
case(
    "heaviside_mixed",
    lambda a, b: torch.heaviside(a, b),
    lambda: torch.tensor([-1, 0, 2]),
    lambda: torch.tensor([0.5, 0.5, 0.5]),
)
case(
    "heaviside_0d",
    lambda a: torch.heaviside(a, torch.tensor(0.5)),
    lambda: torch.tensor([-1.0, 0.0, 2.0]),
)
case(
    "heaviside_0d_f64",
    lambda a: torch.heaviside(a, torch.tensor(0.5, dtype=F64)),
    lambda: torch.tensor([-1.0, 0.0, 2.0]),
)
for inc in (False, True):
    for N in (None, 0, 1, 2, 4):
        case(
            f"vander_N{N}_inc{inc}",
            lambda x, N=N, inc=inc: torch.vander(x, N=N, increasing=inc),
            lambda: torch.tensor([1.0, 2.0, -3.0, 0.5]),
        )
        case(
            f"vander_int_N{N}_inc{inc}",
            lambda x, N=N, inc=inc: torch.vander(x, N=N, increasing=inc),
            lambda: torch.tensor([1, 2, -3, 5]),
        )
case("vander_bool", lambda x: torch.vander(x), lambda: torch.tensor([True, False]))
case("linalg_vander", lambda x: torch.linalg.vander(x), lambda: torch.tensor([1.0, 2.0, 3.0]))
case(
    "linalg_vander_N", lambda x: torch.linalg.vander(x, N=5), lambda: torch.tensor([[1, 2], [3, 4]])
)
case(
    "cartesian_prod",
    lambda a, b: torch.cartesian_prod(a, b),
    lambda: torch.tensor([1, 2, 3]),
    lambda: torch.tensor([4, 5]),
)
case("cartesian_prod_1", lambda a: torch.cartesian_prod(a), lambda: torch.tensor([1, 2, 3]))
case(
    "cartesian_prod_3",
    lambda a, b, c: torch.cartesian_prod(a, b, c),
    lambda: torch.tensor([1.0, 2.0]),
    lambda: torch.tensor([4.0, 5.0]),
    lambda: torch.tensor([6.0]),
)
for r_ in (0, 1, 2, 3, 5):
    for wr in (False, True):
        case(
            f"combinations_r{r_}_{wr}",
            lambda x, r_=r_, wr=wr: torch.combinations(x, r_, with_replacement=wr),
            lambda: torch.tensor([1, 2, 3, 4]),
        )
case("combinations_empty", lambda x: torch.combinations(x), lambda: torch.tensor([], dtype=F32))
for ind in ("ij", "xy"):
    case(
        f"meshgrid_{ind}",
        lambda a, b, i=ind: torch.meshgrid(a, b, indexing=i),
        lambda: torch.tensor([1, 2, 3]),
        lambda: torch.tensor([4.0, 5.0]),
    )
    case(
        f"meshgrid3_{ind}",
        lambda a, b, c, i=ind: torch.meshgrid(a, b, c, indexing=i),
        lambda: torch.arange(2),
        lambda: torch.arange(3),
        lambda: torch.arange(4),
    )
    case(
        f"meshgrid_0d_{ind}",
        lambda a, b, i=ind: torch.meshgrid(a, b, indexing=i),
        lambda: torch.tensor(2.0),
        lambda: torch.tensor([4.0, 5.0]),
    )
    case(
        f"meshgrid_grid_{ind}",
        lambda i=ind: torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing=i), -1),
    )
case(
    "meshgrid_list",
    lambda a, b: torch.meshgrid([a, b], indexing="ij"),
    lambda: torch.arange(2),
    lambda: torch.arange(3),
)
case("meshgrid_1", lambda a: torch.meshgrid(a, indexing="xy"), lambda: torch.arange(2))
case(
    "meshgrid_add",
    lambda a, b: sum(torch.meshgrid(a, b, indexing="xy")),
    lambda: torch.arange(2.0),
    lambda: torch.arange(3.0),
)
case("zeros_int_shape", lambda x: torch.zeros(x.shape[0], 2, dtype=I64), x4)
case("ones_bool", lambda x: torch.ones(3, dtype=BOOL) & (x[:3] > 0), x4)
case("empty_0", lambda x: torch.empty(0, 3), x4)
case("randn_shape", lambda x: torch.randn(x.shape, dtype=F64), x4, rand=True)

# ------------------------------------------------------------------ scalar promotion
SCAL = {"int": 2, "float": 2.5, "bool": True, "neg": -1, "big": 300, "cplx": 1j}
for dt in (BOOL, U8, I8, I16, I32, I64, F16, BF, F32, F64):
    n = str(dt).split(".")[1]
    mk = lambda dt=dt: torch.tensor([1, 0, 3, 5]).to(dt)
    mk0 = lambda dt=dt: torch.tensor(3).to(dt)
    for sn, sv in SCAL.items():
        for op in ("add", "mul", "sub", "div", "floordiv", "pow", "rsub", "ge"):
            f = {
                "add": lambda x, s=sv: x + s,
                "mul": lambda x, s=sv: x * s,
                "sub": lambda x, s=sv: x - s,
                "div": lambda x, s=sv: x / s,
                "floordiv": lambda x, s=sv: x // s,
                "pow": lambda x, s=sv: x**s,
                "rsub": lambda x, s=sv: s - x,
                "ge": lambda x, s=sv: x >= s,
            }[op]
            case(
                f"prom_{n}_{op}_{sn}", f, mk, exact=dt not in (F16, BF) or op not in ("pow", "div")
            )
            case(
                f"prom0d_{n}_{op}_{sn}",
                f,
                mk0,
                exact=dt not in (F16, BF) or op not in ("pow", "div"),
            )
        case(f"iprom_{n}_add_{sn}", lambda x, s=sv: x.add_(s), mk)
        case(f"iprom_{n}_mul_{sn}", lambda x, s=sv: x.mul_(s), mk)
        case(f"iprom_{n}_div_{sn}", lambda x, s=sv: x.div_(s), mk)
    for dt2 in (BOOL, U8, I8, I32, I64, F16, BF, F32, F64):
        n2 = str(dt2).split(".")[1]
        m0 = lambda dt2=dt2: torch.tensor(2).to(dt2)
        case(f"prom_{n}_t0d_{n2}", lambda x, y: x + y, mk, m0)
        case(f"prom_{n}_t0d_{n2}_mul", lambda x, y: x * y, mk, m0)
        case(f"iprom_{n}_t0d_{n2}", lambda x, y: x.add_(y), mk, m0)
        case(f"prom0d_{n}_t0d_{n2}", lambda x, y: x - y, mk0, m0)
        case(f"prom_{n}_t1_{n2}", lambda x, y: x + y, mk, lambda dt2=dt2: torch.tensor([2]).to(dt2))
case("uint8_wrap", lambda x: x - 1, lambda: torch.tensor([0, 1, 255], dtype=U8))
case("uint8_wrap_add", lambda x: x + 300, lambda: torch.tensor([0, 1, 255], dtype=U8))
case("int8_wrap", lambda x: x * 100, lambda: torch.tensor([2, -3, 127], dtype=I8))
case(
    "int8_plus_0d_i64",
    lambda x, y: x + y,
    lambda: torch.tensor([100, -100], dtype=I8),
    lambda: torch.tensor(100),
)
case(
    "f16_plus_0d_f64",
    lambda x, y: x + y,
    lambda: torch.tensor([1.0, 2.0], dtype=F16),
    lambda: torch.tensor(0.1, dtype=F64),
)
case(
    "f16_plus_big_f64_0d",
    lambda x, y: x + y,
    lambda: torch.tensor([1.0, 2.0], dtype=F16),
    lambda: torch.tensor(1e6, dtype=F64),
)
case("f16_plus_big_scalar", lambda x: x + 1e6, lambda: torch.tensor([1.0, 2.0], dtype=F16))
case("bf16_plus_third", lambda x: x + (1 / 3), lambda: torch.tensor([1.0, 2.0], dtype=BF))
case("bool_times_true", lambda x: x * True, lambda: torch.tensor([True, False]))
case("bool_plus_true", lambda x: x + True, lambda: torch.tensor([True, False]))
case("bool_sub_err", lambda x: x - True, lambda: torch.tensor([True, False]))
case("bool_neg_err", lambda x: -x, lambda: torch.tensor([True, False]))
case("int_div_int", lambda x: x / 2, lambda: torch.tensor([3, -3, 5]))
case("int_floordiv_neg", lambda x: x // -2, lambda: torch.tensor([3, -3, 5]))
case("int_mod_float", lambda x: x % 2.5, lambda: torch.tensor([3, -3, 5]))
case("int_pow_neg_err", lambda x: x**-1, lambda: torch.tensor([3, -3, 5]))
case("int_pow_float", lambda x: x**0.5, lambda: torch.tensor([4, 9, 5]))
case(
    "int_true_div_0d_f16",
    lambda x, y: x / y,
    lambda: torch.tensor([3, 4]),
    lambda: torch.tensor(2.0, dtype=F16),
)
case("int_iadd_float_err", lambda x: x.add_(2.5), lambda: torch.tensor([3, 4]))
case("int_imul_float_err", lambda x: x.mul_(torch.tensor(2.5)), lambda: torch.tensor([3, 4]))
case("int_idiv_err", lambda x: x.div_(2), lambda: torch.tensor([3, 4]))
case("int_ifloordiv", lambda x: x.floor_divide_(2), lambda: torch.tensor([3, -4]))
case("int_idiv_trunc", lambda x: x.div_(2, rounding_mode="trunc"), lambda: torch.tensor([3, -4]))
case("bool_iadd_err", lambda x: x.add_(1), lambda: torch.tensor([True, False]))
case(
    "f16_iadd_f64_0d",
    lambda x, y: x.add_(y),
    lambda: torch.tensor([1.0, 2.0], dtype=F16),
    lambda: torch.tensor(0.1, dtype=F64),
)
case(
    "f32_iadd_f64_vec",
    lambda x, y: x.add_(y),
    lambda: torch.tensor([1.0, 2.0]),
    lambda: torch.tensor([0.1, 1e-9], dtype=F64),
)
case(
    "int_iadd_f32_vec_err",
    lambda x, y: x.add_(y),
    lambda: torch.tensor([1, 2]),
    lambda: torch.tensor([0.1, 0.2]),
)
case(
    "complex_plus_f64_0d",
    lambda x, y: x + y,
    lambda: torch.tensor([1 + 1j]),
    lambda: torch.tensor(0.1, dtype=F64),
)
case("iadd_complex_to_float_err", lambda x: x.add_(1j), x4)
case("where_scalar", lambda x: torch.where(x > 0, x, 2), lambda: torch.tensor([1, -2, 3]))
case("where_float_scalar", lambda x: torch.where(x > 0, 1.5, 0), lambda: torch.tensor([1, -2, 3]))
case(
    "where_f16_scalar",
    lambda x: torch.where(x > 0, x, 1e6),
    lambda: torch.tensor([1.0, -2.0], dtype=F16),
)
case("clamp_int_float", lambda x: x.clamp(0.5, 2.5), lambda: torch.tensor([0, 1, 3]))
case("clamp_u8_neg", lambda x: x.clamp(-1, 300), lambda: torch.tensor([0, 1, 3], dtype=U8))
case(
    "maximum_0d",
    lambda x, y: torch.maximum(x, y),
    lambda: torch.tensor([1, 5], dtype=I8),
    lambda: torch.tensor(3.5),
)
case(
    "lerp_scalar",
    lambda a, b: torch.lerp(a, b, 0.3),
    lambda: torch.tensor([1.0], dtype=F16),
    lambda: torch.tensor([3.0], dtype=F16),
    exact=False,
)
case(
    "addcmul_int_value_err",
    lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
    lambda: torch.tensor([1]),
    lambda: torch.tensor([2]),
    lambda: torch.tensor([3]),
)
case("sum_bool_dtype", lambda x: (x > 0).sum(), x4)
case("mean_int_err", lambda x: x.mean(), lambda: torch.tensor([1, 2]))
case("cumsum_u8", lambda x: x.cumsum(0), lambda: torch.tensor([200, 100], dtype=U8))
case("prod_i8", lambda x: x.prod(), lambda: torch.tensor([100, 100], dtype=I8))
case("sum_i8", lambda x: x.sum(), lambda: torch.tensor([100, 100], dtype=I8))

# ------------------------------------------------------------------ more creation
import numpy as np

case("ones_requires_grad", lambda x: torch.ones(3, requires_grad=True) * 2, x4)
case("zeros_requires_grad_leaf", lambda x: torch.zeros(3, requires_grad=True), x4)
case("tensor_requires_grad", lambda x: torch.tensor([1.0, 2.0], requires_grad=True) + x[:2], x4)
case("from_numpy", lambda x: torch.from_numpy(np.arange(4)) + x, x4)
case("as_tensor_np_f32", lambda x: torch.as_tensor(np.ones(4, dtype=np.float32)) * x, x4)
case("as_tensor_np_f64", lambda x: x * torch.as_tensor(np.array([0.1, 0.2, 0.3, 0.4])), x4)
case("new_tensor_copy", lambda x: x.new_tensor(x) * 2, x4)
case("full_symint_fill", lambda x: torch.full((2,), x.shape[0]), x4)
case("full_symint_half", lambda x: torch.full((2,), x.shape[0] / 3), x4)
case("tensor_shape_float", lambda x: torch.tensor(x.shape[0] / 3), x4)
case("tensor_shape_list_f", lambda x: torch.tensor([x.shape[0] / 3, 1]), x4)
case("arange_shape_f", lambda x: torch.arange(x.shape[0] / 3), lambda: torch.randn(10))
case("linspace_shape", lambda x: torch.linspace(0, 1, x.shape[0]) * x, lambda: torch.randn(10))
case("randint_like", lambda x: torch.randint_like(x, 3, 7), lambda: torch.randn(100), rand=True)
case(
    "randint_like_range", lambda x: torch.randint_like(x, 3, 7).min() >= 3, lambda: torch.randn(100)
)
case("rand_like_int_err", lambda x: torch.rand_like(x), lambda: torch.arange(4))
case("randn_int_err", lambda x: torch.randn(3, dtype=torch.int64), x4)
case(
    "randint_float_dtype", lambda x: torch.randint(0, 5, (100,), dtype=torch.float32).max() < 5, x4
)
case("randperm_sorted", lambda x: torch.randperm(50).sort().values, x4)
case("randperm_f16_sorted", lambda x: torch.randperm(20, dtype=torch.float16).sort().values, x4)
case("rand_range", lambda x: ((torch.rand(1000) >= 0) & (torch.rand(1000) < 1)).all(), x4)
case("rand_f16_range", lambda x: (torch.rand(1000, dtype=F16) < 1).all(), x4)
case(
    "bernoulli_p",
    lambda x: (
        torch.bernoulli(torch.full((1000,), 0.0)).sum()
        + torch.bernoulli(torch.full((1000,), 1.0)).sum()
    ),
    x4,
)
case("normal_std0", lambda x: torch.normal(torch.arange(4.0), 0.0), x4)
case("normal_scalar_size", lambda x: torch.normal(2.0, 0.0, size=(3,)), x4)
case("uniform_eq", lambda x: torch.empty(4).uniform_(2.0, 2.0), x4)
case(
    "multinomial_onehot",
    lambda x: torch.multinomial(torch.tensor([0.0, 0.0, 1.0]), 4, replacement=True),
    x4,
)
case(
    "multinomial_noreplace_all",
    lambda x: torch.multinomial(torch.tensor([1.0, 2.0, 3.0]), 3).sort().values,
    x4,
)
case("multinomial_2d", lambda x: torch.multinomial(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 1), x4)
case("multinomial_too_many_err", lambda x: torch.multinomial(torch.tensor([1.0, 0.0, 1.0]), 3), x4)
case("multinomial_neg_err", lambda x: torch.multinomial(torch.tensor([1.0, -1.0]), 1), x4)
case("poisson_0", lambda x: torch.poisson(torch.zeros(4)), x4)
case("exponential_pos", lambda x: (torch.empty(100).exponential_() > 0).all(), x4)
case("geometric_ge1", lambda x: (torch.empty(100).geometric_(0.5) >= 1).all(), x4)
case("cauchy_dtype", lambda x: torch.empty(3, dtype=F64).cauchy_().dtype == F64, x4)
case("log_normal_pos", lambda x: (torch.empty(100).log_normal_() > 0).all(), x4)
case("random_int8", lambda x: torch.empty(200, dtype=I8).random_(-3, 3).unique().numel(), x4)
case("random_to", lambda x: (torch.empty(200, dtype=I64).random_(5) < 5).all(), x4)
case("random_bool", lambda x: torch.empty(200, dtype=BOOL).random_().unique().numel(), x4)
case("random_f16_default", lambda x: (torch.empty(200, dtype=F16).random_() <= 2048).all(), x4)
case("dropout_p1", lambda x: torch.nn.functional.dropout(x, 1.0), x4)
case("dropout_p0", lambda x: torch.nn.functional.dropout(x, 0.0), x4)
case("eye_dtype_f16", lambda x: torch.eye(3, dtype=F16), x4)
case("eye_out_of_shape", lambda x: torch.eye(x.shape[0], 2), x4)
case("diag_embed_zeros", lambda x: torch.diag_embed(x), x4)
case("diagflat_off", lambda x: torch.diagflat(x, 1), x4)
case("tril_ones", lambda x: torch.ones(3, 4).tril(-1), x4)
case("triu_bool", lambda x: torch.ones(3, 3, dtype=BOOL).triu(1), x4)
case("bartlett", lambda x: torch.bartlett_window(5), x4, exact=False)
case("hann_periodic", lambda x: torch.hann_window(6, periodic=False, dtype=F64), x4, exact=False)
case("kaiser", lambda x: torch.kaiser_window(5), x4, exact=False)
case("blackman_1", lambda x: torch.blackman_window(1), x4)
case("hamming_0", lambda x: torch.hamming_window(0), x4)
case("zeros_bool_sum", lambda x: torch.zeros(3, dtype=BOOL).sum(), x4)
case("empty_strided_stride", lambda x: torch.empty_strided((2, 3), (1, 2)).fill_(0).stride(), x4)
case("full_like_strided", lambda x: torch.full_like(x, 2), lambda: torch.randn(3, 4)[:, ::2])
case(
    "zeros_like_perm", lambda x: torch.zeros_like(x), lambda: torch.randn(2, 3, 4).permute(2, 0, 1)
)
case(
    "zeros_like_perm_add",
    lambda x: torch.zeros_like(x) + x,
    lambda: torch.randn(2, 3, 4).permute(2, 0, 1),
)
case(
    "empty_like_perm_fill",
    lambda x: torch.empty_like(x).fill_(1),
    lambda: torch.randn(2, 3, 4).permute(2, 0, 1),
)
case(
    "ones_like_cl3d",
    lambda x: torch.ones_like(x),
    lambda: torch.randn(1, 2, 3, 4, 5).to(memory_format=torch.channels_last_3d),
)
case("empty_cl", lambda x: torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).fill_(1), x4)
case(
    "zeros_like_cl_dtype",
    lambda x: torch.zeros_like(x, dtype=F64),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case(
    "new_zeros_cl",
    lambda x: x.new_zeros(x.shape),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case(
    "clone_cl",
    lambda x: x.clone(),
    lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
)
case("clone_preserve_perm", lambda x: x.clone(), lambda: torch.randn(2, 3, 4).permute(2, 0, 1))
case(
    "contig_cl",
    lambda x: x.contiguous(memory_format=torch.channels_last),
    lambda: torch.randn(2, 3, 4, 5),
)
case(
    "to_cl", lambda x: x.to(memory_format=torch.channels_last) * 2, lambda: torch.randn(2, 3, 4, 5)
)
case("range_float", lambda x: torch.range(0, 1, 0.1), x4)
case("range_int", lambda x: torch.range(0, 5), x4)
case("arange_1e-1_big", lambda x: torch.arange(-1.0, 1.0, 0.1), x4)
case("arange_long_f32", lambda x: torch.arange(0, 100000, 0.7), x4)
case("arange_f16_big", lambda x: torch.arange(0, 3000, 1, dtype=F16), x4)
case("arange_bf16_frac", lambda x: torch.arange(0, 10, 0.3, dtype=BF), x4)
case("arange_int_dtype_float_args", lambda x: torch.arange(0.5, 5.5, 1.5, dtype=I64), x4)
case("arange_neg_int_dtype_float", lambda x: torch.arange(-2.5, 2.5, 0.9, dtype=I32), x4)
case("arange_u8_neg_start", lambda x: torch.arange(-3, 3, dtype=U8), x4)
case("arange_bool_err", lambda x: torch.arange(0, 2, dtype=BOOL), x4)
case("arange_inf_err", lambda x: torch.arange(0, float("inf")), x4)
case("arange_nan_err", lambda x: torch.arange(0, float("nan")), x4)
case("vander_f16", lambda x: torch.vander(x, 3), lambda: torch.tensor([1.5, 2.0], dtype=F16))
case("vander_u8_wrap", lambda x: torch.vander(x, 4), lambda: torch.tensor([5, 7], dtype=U8))
case("vander_i8", lambda x: torch.vander(x, 4), lambda: torch.tensor([5, 7], dtype=I8))
case("vander_complex", lambda x: torch.vander(x, 3), lambda: torch.tensor([1 + 1j, 2]))
case(
    "cartesian_prod_mixed_err",
    lambda a, b: torch.cartesian_prod(a, b),
    lambda: torch.tensor([1, 2]),
    lambda: torch.tensor([1.0]),
)
case(
    "combinations_bool",
    lambda x: torch.combinations(x, 2),
    lambda: torch.tensor([True, False, True]),
)
case("combinations_2d_err", lambda x: torch.combinations(x), lambda: torch.ones(2, 2))
case(
    "polar_neg_abs",
    lambda a, b: torch.polar(a, b),
    lambda: torch.tensor([-1.0, 2.0]),
    lambda: torch.tensor([0.5, 1.0]),
    exact=False,
)
case(
    "polar_int_err",
    lambda a, b: torch.polar(a, b),
    lambda: torch.tensor([1, 2]),
    lambda: torch.tensor([1, 2]),
)
case(
    "complex_int_err",
    lambda a, b: torch.complex(a, b),
    lambda: torch.tensor([1, 2]),
    lambda: torch.tensor([1, 2]),
)
case(
    "complex_inf",
    lambda a, b: torch.complex(a, b),
    lambda: torch.tensor([float("inf"), float("nan")]),
    lambda: torch.tensor([float("nan"), -0.0]),
)
case("view_as_complex", lambda x: torch.view_as_complex(x), lambda: torch.randn(3, 2))
case(
    "heaviside_complex_err",
    lambda a, b: torch.heaviside(a, b),
    lambda: torch.tensor([1j]),
    lambda: torch.tensor([1j]),
)
case(
    "heaviside_dtype_err",
    lambda a, b: torch.heaviside(a, b),
    lambda: torch.tensor([1.0]),
    lambda: torch.tensor([1.0], dtype=F64),
)
case(
    "heaviside_bool",
    lambda a, b: torch.heaviside(a, b),
    lambda: torch.tensor([True, False]),
    lambda: torch.tensor([True, True]),
)
case(
    "heaviside_inplace",
    lambda a, b: a.heaviside_(b),
    lambda: torch.tensor([-1.0, 0.0, 2.0]),
    lambda: torch.tensor([0.5]),
)
case(
    "meshgrid_noindexing",
    lambda a, b: torch.meshgrid(a, b),
    lambda: torch.arange(2),
    lambda: torch.arange(3),
)
case(
    "meshgrid_mixed_dtype_err",
    lambda a, b: torch.meshgrid(a, b, indexing="ij"),
    lambda: torch.arange(2),
    lambda: torch.arange(3.0),
)
case(
    "meshgrid_write",
    lambda a, b: [g.clone().add_(1) for g in torch.meshgrid(a, b, indexing="ij")],
    lambda: torch.arange(2.0),
    lambda: torch.arange(3.0),
)
case(
    "meshgrid_strides",
    lambda a, b: [g.stride() for g in torch.meshgrid(a, b, indexing="xy")],
    lambda: torch.arange(2.0),
    lambda: torch.arange(3.0),
)
case("tril_indices_big_off", lambda x: torch.tril_indices(3, 3, -10), x4)
case("tril_indices_zero_col", lambda x: torch.tril_indices(3, 0), x4)
case("triu_indices_neg_err", lambda x: torch.triu_indices(-1, 3), x4)
case("tensor_empty_list", lambda x: torch.tensor([]), x4)
case("tensor_empty_nested", lambda x: torch.tensor([[], []]), x4)
case("tensor_ragged_err", lambda x: torch.tensor([[1, 2], [3]]), x4)
case("tensor_of_tensors", lambda x: torch.tensor([x[0], x[1]]), x4)
case("stack_of_scalars", lambda x: torch.stack([x[0], torch.tensor(1.0)]), x4)
case("tensor_int_overflow_err", lambda x: torch.tensor([2**63]), x4)
case("tensor_uint8_300", lambda x: torch.tensor([300], dtype=U8), x4)
case("tensor_float_to_int", lambda x: torch.tensor([2.7, -2.7], dtype=I64), x4)
case("tensor_nan_to_int", lambda x: torch.tensor([float("nan")], dtype=I32), x4)
case("tensor_bool_from_float", lambda x: torch.tensor([0.0, 0.5, -0.0], dtype=BOOL), x4)
case("tensor_big_f16", lambda x: torch.tensor([70000.0], dtype=F16), x4)
case("tensor_f32_round", lambda x: torch.tensor([0.1, 1 / 3, 16777217.0]), x4)
case("tensor_int_f16_round", lambda x: torch.tensor([2049, 4097], dtype=F16), x4)
case("tensor_bf16_round", lambda x: torch.tensor([1.00390625, 257.0, 1 / 3], dtype=BF), x4)
case("full_f16_round", lambda x: torch.full((2,), 1 / 3, dtype=F16), x4)
case("full_bf16_round", lambda x: torch.full((2,), 1.00390625, dtype=BF), x4)
case("full_f16_double_round", lambda x: torch.full((1,), 1.0009765625 + 2**-30, dtype=F16), x4)
case("full_bf16_double_round", lambda x: torch.full((1,), 1.00390625 + 2**-40, dtype=BF), x4)
case("tensor_bf16_double_round", lambda x: torch.tensor([1.00390625 + 2**-40], dtype=BF), x4)
case("tensor_f16_double_round", lambda x: torch.tensor([1.0009765625 + 2**-30], dtype=F16), x4)
case("add_bf16_double_round", lambda x: x + (1.00390625 + 2**-40), lambda: torch.zeros(2, dtype=BF))
case(
    "mul_f16_scalar_round", lambda x: x * (1.0009765625 + 2**-30), lambda: torch.ones(2, dtype=F16)
)
case(
    "fill_bf16_double_round",
    lambda x: x.fill_(1.00390625 + 2**-40),
    lambda: torch.zeros(2, dtype=BF),
)
case("f32_full_double_round", lambda x: torch.full((1,), 1 + 2**-24 + 2**-60), x4)
case("f32_tensor_double_round", lambda x: torch.tensor([1 + 2**-24 + 2**-60]), x4)
case("f32_add_double_round", lambda x: x + (1 + 2**-24 + 2**-60), lambda: torch.zeros(1))

# ------------------------------------------------------------------ scalars written into tensors
IT = lambda: torch.tensor([1, -2, 3])
U8T = lambda: torch.tensor([1, 2, 250], dtype=U8)
BT = lambda: torch.tensor([True, False, True])
HT = lambda: torch.tensor([1.0, -2.0, 3.0], dtype=F16)
for tn, mk in (("int", IT), ("u8", U8T), ("bool", BT), ("f16", HT)):
    for sn, sv in (
        ("f", 2.5),
        ("i", 7),
        ("neg", -1),
        ("big", 1000),
        ("b", True),
        ("c", 1j),
        ("inf", float("inf")),
        ("nan", float("nan")),
    ):
        case(f"masked_fill_{tn}_{sn}", lambda x, v=sv: x.masked_fill(x.bool(), v), mk)
        case(
            f"masked_fill_t_{tn}_{sn}", lambda x, v=sv: x.masked_fill(x.bool(), torch.tensor(v)), mk
        )
        case(f"index_fill_{tn}_{sn}", lambda x, v=sv: x.index_fill(0, torch.tensor([0, 2]), v), mk)
        case(f"fill_{tn}_{sn}", lambda x, v=sv: x.clone().fill_(v), mk)
        case(f"fill_t_{tn}_{sn}", lambda x, v=sv: x.clone().fill_(torch.tensor(v)), mk)
        case(f"setitem_{tn}_{sn}", lambda x, v=sv: x.clone().__setitem__(0, v), mk)
        case(
            f"setitem_mask_{tn}_{sn}",
            lambda x, v=sv: _masked_set(x.clone(), v),
            mk,
        )
        case(f"where_{tn}_{sn}", lambda x, v=sv: torch.where(x.bool(), x, v), mk)
        case(f"clamp_min_{tn}_{sn}", lambda x, v=sv: x.clamp(min=v), mk)
        case(f"full_like_{tn}_{sn}", lambda x, v=sv: torch.full_like(x, v), mk)
        case(f"new_full_{tn}_{sn}", lambda x, v=sv: x.new_full((2,), v), mk)
        case(f"scatter_{tn}_{sn}", lambda x, v=sv: x.scatter(0, torch.tensor([1]), v), mk)
        case(
            f"index_put_{tn}_{sn}",
            lambda x, v=sv: x.index_put((torch.tensor([1]),), torch.tensor(v)),
            mk,
        )
        case(f"add_alpha_{tn}_{sn}", lambda x, v=sv: torch.add(x, x, alpha=v), mk)
        case(f"mul_{tn}_{sn}", lambda x, v=sv: x.clone().mul_(v), mk)
        case(f"sub_{tn}_{sn}", lambda x, v=sv: x.clone().sub_(v), mk)
        case(f"lt_{tn}_{sn}", lambda x, v=sv: x < v, mk)
        case(f"eq_{tn}_{sn}", lambda x, v=sv: x == v, mk)
        case(f"remainder_{tn}_{sn}", lambda x, v=sv: torch.remainder(x, v), mk)
        case(f"fmod_{tn}_{sn}", lambda x, v=sv: torch.fmod(x, v), mk)
        case(f"pow_{tn}_{sn}", lambda x, v=sv: torch.pow(x, v), mk)
        case(f"rpow_{tn}_{sn}", lambda x, v=sv: v**x, mk)
        case(f"bitand_{tn}_{sn}", lambda x, v=sv: x & v, mk)
        case(f"lshift_{tn}_{sn}", lambda x, v=sv: x << v, mk)
        case(f"maximum_{tn}_{sn}", lambda x, v=sv: torch.maximum(x, torch.tensor(v)), mk)
        case(f"lerp_{tn}_{sn}", lambda x, v=sv: torch.lerp(x, x, v), mk)
        case(f"addcmul_{tn}_{sn}", lambda x, v=sv: torch.addcmul(x, x, x, value=v), mk)
        case(f"div_floor_{tn}_{sn}", lambda x, v=sv: torch.div(x, v, rounding_mode="floor"), mk)
        case(f"copysign_{tn}_{sn}", lambda x, v=sv: torch.copysign(x, v), mk)
        case(f"xlogy_{tn}_{sn}", lambda x, v=sv: torch.xlogy(x, v), mk, exact=False)
        case(
            f"hypot_{tn}_{sn}",
            lambda x, v=sv: torch.hypot(x.float(), torch.tensor(v)),
            mk,
            exact=False,
        )


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], CASES, compare))
