"""Probe eager fallback the way users hit it: ops XLA cannot run (no lowering, sparse and nested
layouts, dtypes without an XLA type, rare linalg/special/stft options, user ``torch.library``
ops), mixed with in-place mutations, gradients, training steps, random ops, strict mode and
tensor subclasses. Each scenario runs once with plain eager functions and once with
``torch.compile(backend="xla")``; every observation is compared strictly (tensor values, dtype,
shape, layout, requires_grad, grad_fn presence; .grad None-ness and values; errors, by type and
first line). The compiled run also checks its warnings: each ``FallbackWarning`` names the op
and the user's source line, and a second call warns no more.

    PYTHONPATH=. python scripts/probe_fallback.py [substring ...]
    PROBE_BACKEND=aot_eager PYTHONPATH=. python scripts/probe_fallback.py   # torch's own

A scenario is ``fn(C, rec)``: ``C(f)`` is ``f`` itself in the eager run and the compiled ``f``
in the other (``C(f, strict=True)`` for strict mode); ``rec(label, value)`` records what is
compared. An error stops the scenario and is recorded as its last observation. Prints one line
per scenario: ``ok``, ``DIFF`` (the first difference), ``TORCH`` (a difference Dynamo with
``backend="eager"`` shows too: torch's own), ``WARN`` (a warning problem) or ``CRASH`` (the
probe itself failed).
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

import torch2xla

BACKEND = os.environ.get("PROBE_BACKEND", "xla")
SCENARIOS: dict = {}
# scenarios whose compiled run must warn (FallbackWarning) and name these in the warning
EXPECT_WARN: dict[str, str] = {}


def scenario(fn=None, *, warns: str | None = None):
    def register(f):
        SCENARIOS[f.__name__] = f
        if warns is not None:
            EXPECT_WARN[f.__name__] = warns
        return f

    return register(fn) if fn is not None else register


def leaf(*shape, seed=0, dtype=torch.float32, rg=True):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)
    return t.requires_grad_(rg)


def describe(v):
    """A comparable summary of one observation."""
    if isinstance(v, torch.Tensor):
        if v.is_nested:
            return ("N", v.dtype, [describe(t) for t in v.unbind()])
        dense = v.to_dense() if v.layout != torch.strided else v
        return (
            "T",
            v.dtype,
            tuple(v.shape),
            v.layout,
            type(v).__name__,
            v.requires_grad,
            v.grad_fn is None,
            dense.detach().clone(),
        )
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160])
    return ("V", v)


def same(a, b, path="") -> str | None:
    if a[0] != b[0]:
        return f"{path}: kind {a[0]} vs {b[0]}  ({a[1:3]} vs {b[1:3]})"
    if a[0] == "T":
        names = ("dtype", "shape", "layout", "type", "requires_grad", "grad_fn is None")
        for n, x, y in zip(names, a[1:7], b[1:7]):
            if x != y:
                return f"{path}: {n} {x} (xla) vs {y} (eager)"
        x, y = a[7], b[7]
        if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.complex32):
            x, y = (
                x.to(torch.complex64 if x.is_complex() else torch.float32),
                y.to(x.dtype).to(torch.complex64 if x.is_complex() else torch.float32),
            )
        if x.dtype in (torch.uint16, torch.uint32, torch.uint64):
            x, y = x.to(torch.int64), y.to(torch.int64)
        if x.is_floating_point() or x.is_complex():
            tol = {"rtol": 1e-4, "atol": 1e-5}
            if x.dtype in (torch.bfloat16, torch.float16, torch.complex32):
                tol = {"rtol": 2e-2, "atol": 2e-2}
            if not torch.allclose(x, y, equal_nan=True, **tol):
                return f"{path}: values differ, max {(x - y).abs().max().item():.3g}\n{x}\n{y}"
        elif not torch.equal(x, y):
            return f"{path}: values {x} vs {y}"
        return None
    if a[0] in ("L", "N"):
        if a[1] != b[1] or len(a[2]) != len(b[2]):
            return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
        for i, (x, y) in enumerate(zip(a[2], b[2])):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a[0] == "E":  # (ours may be a subclass of eager's: OpNotImplementedError)
        if not issubclass(a[1], b[1]) or a[2] != b[2]:
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        return None
    if a[1] != b[1]:
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


def observe(fn, compiled: bool):
    obs: list = []

    def rec(label, value):
        obs.append((label, describe(value)))

    def C(f, strict=False, **kw):
        if not compiled:
            return f
        options = {"strict": True} if strict and BACKEND == "xla" else None
        return torch.compile(f, backend=BACKEND, options=options, **kw)

    C.compiled = compiled

    torch._dynamo.reset()
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(C, rec)
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            obs.append(("raised", describe(e)))
    fallback = [w for w in caught if issubclass(w.category, torch2xla.FallbackWarning)]
    return obs, fallback


def check_warnings(name: str, fallback: list) -> str | None:
    """Each FallbackWarning names an op and a source line of this file; none repeats."""
    texts = [str(w.message) for w in fallback]
    want = EXPECT_WARN.get(name)
    if want is not None and not any(want in t for t in texts):
        return f"expected a FallbackWarning naming {want!r}, got {texts}"
    for w, t in zip(fallback, texts):
        if w.filename != __file__:
            return f"warning attributed to {w.filename}:{w.lineno}, not the user's line: {t}"
        if "probe_fallback.py:" not in t and "<unknown source>" in t:
            return f"warning without the user's line: {t}"
    if len(set(texts)) != len(texts):
        return f"the same FallbackWarning {len(texts) - len(set(texts)) + 1} times: {texts[0]}"
    return None


def compare(name, fn) -> str:
    got, fallback = observe(fn, True)
    exp, _ = observe(fn, False)
    labels_g = [label for label, _ in got]
    labels_e = [label for label, _ in exp]
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"DIFF  {name}: observation {lg!r} (xla) vs {le!r} (eager): {g} / {e}"
        d = same(g, e, lg)
        if d:
            return f"DIFF  {name}: {d}"
    if len(got) != len(exp):
        return f"DIFF  {name}: observations {labels_g} (xla) vs {labels_e} (eager)"
    if BACKEND == "xla":
        w = check_warnings(name, fallback)
        if w:
            return f"WARN  {name}: {w}"
    return f"ok    {name}  ({len(fallback)} fallback warning(s))"


def twice(f, *args):
    """Two calls (the second must not warn again): the second's result."""
    f(*args)
    return f(*args)


# ============================================================================================
# ops without a lowering (NOT_LOWERED in ops/_coverage.py), the data-dependent ones
@scenario
def unique_consecutive(C, rec):
    def f(x):
        v, inv, cnt = torch.unique_consecutive(x * 2, return_inverse=True, return_counts=True)
        return v + 1, inv, cnt

    x = torch.tensor([1.0, 1.0, 2.0, 2.0, 3.0, 1.0])
    rec("out", list(twice(C(f), x)))


@scenario
def unique_dim(C, rec):
    def f(x):
        return torch.unique(x + 0, dim=0, return_counts=True)

    x = torch.tensor([[1, 2], [1, 2], [3, 4]])
    rec("out", list(twice(C(f), x)))


@scenario
def nonzero_then_grad(C, rec):
    def f(x):
        idx = torch.nonzero(x > 0)
        return x[idx[:, 0], idx[:, 1]].sum() * 2

    x = leaf(3, 4)
    out = C(f)(x)
    out.backward()
    rec("out", out)
    rec("grad", x.grad)


# ============================================================================================
# sparse and nested tensors
@scenario  # (Dynamo breaks the graph at to_sparse: no warning of ours)
def to_sparse_values(C, rec):
    def f(x):
        s = (x * 2).to_sparse()
        return s, s.to_dense() + 1

    x = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    out = twice(C(f), x)
    rec("out", list(out))


@scenario
def sparse_mm(C, rec):
    def f(s, d):
        return torch.sparse.mm(s, d * 2) + 1

    s = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()
    d = leaf(2, 3)
    out = twice(C(f), s, d)
    out.sum().backward()
    rec("out", out)
    rec("grad", d.grad)


@scenario
def sparse_input_grad(C, rec):
    def f(s, d):
        return (torch.sparse.mm(s, d)).sum()

    s = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse().requires_grad_()
    d = leaf(2, 3)
    out = C(f)(s, d)
    out.backward()
    rec("out", out)
    rec("grads", [s.grad, d.grad])


@scenario
def sparse_csr(C, rec):
    def f(x):
        return (x * 3).to_sparse_csr().to_dense() - 1

    rec("out", twice(C(f), leaf(3, 3, rg=False)))


@scenario
def nested_tensor_input(C, rec):
    def f(nt):
        return nt * 2 + 1

    nt = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(4, 3)])
    rec("out", twice(C(f), nt))


@scenario
def nested_jagged(C, rec):
    def f(nt):
        return (nt.sin() * 2).values()

    nt = torch.nested.nested_tensor(
        [torch.arange(6.0).view(2, 3), torch.arange(12.0).view(4, 3)], layout=torch.jagged
    )
    rec("out", twice(C(f), nt))


@scenario
def nested_built_inside(C, rec):
    def f(a, b):
        nt = torch.nested.as_nested_tensor([a * 2, b * 2], layout=torch.jagged)
        return nt.cos().values()

    rec("out", twice(C(f), leaf(2, 3, rg=False), leaf(4, 3, seed=1, rg=False)))


# ============================================================================================
# dtypes without an XLA type
@scenario(warns="complex32")
def complex32(C, rec):
    def f(x):
        y = (x * 2).to(torch.complex32)
        return y * y, (y + y).to(torch.complex64)

    x = torch.tensor([1.0 + 2j, 0.5 - 1j], dtype=torch.complex64)
    rec("out", list(twice(C(f), x)))


@scenario
def float8_roundtrip(C, rec):
    def f(x):
        y = (x * 3).to(torch.float8_e4m3fn)
        return y, y.to(torch.float32) + 1

    x = leaf(8, rg=False)
    rec("out", list(twice(C(f), x)))


@scenario
def float8_e5m2_grad(C, rec):
    def f(x):
        return (x * 3).to(torch.float8_e5m2).to(torch.float32) * x

    x = leaf(8)
    out = C(f)(x)
    out.sum().backward()
    rec("out", out)
    rec("grad", x.grad)


@scenario
def float8_scaled_mm_like(C, rec):
    def f(a, b):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn)
        return a8.to(torch.float32) @ b8.to(torch.float32)

    rec("out", twice(C(f), leaf(4, 4, rg=False), leaf(4, 4, seed=1, rg=False)))


@scenario
def uint16_ops(C, rec):
    def f(x):
        y = x.to(torch.uint16)
        return y, y + 3, y * 2, (y >> 1), y.to(torch.int32).sum()

    x = torch.tensor([0, 1, 65535, 1000], dtype=torch.int32)
    rec("out", list(twice(C(f), x)))


@scenario
def unsigned_supported_ops(C, rec):
    def f(a, b, c):
        return (
            a * 3,
            a.sum(),
            a.cumsum(0),
            a & a,
            a == 7,
            b * 2,
            b.sum(),
            b.sort().values,
            c.to(torch.float64),
            c * 2,
            torch.cat([a, a]),
            b.to(torch.int64).max(),
        )

    a = torch.tensor([0, 7, 65535, 300], dtype=torch.uint16)
    b = torch.tensor([0, 7, 2**32 - 1, 9], dtype=torch.uint32)
    c = torch.tensor([0, 7, 2**63 + 5, 1], dtype=torch.uint64)
    rec("out", list(twice(C(f), a, b, c)))


@scenario
def uint32_input(C, rec):
    def f(x):
        return x + 1, x.max(), x.to(torch.int64) * 2

    x = torch.tensor([0, 7, 4_000_000_000], dtype=torch.uint32)
    rec("out", list(twice(C(f), x)))


@scenario
def uint64_input(C, rec):
    def f(x):
        return x + 1, x.to(torch.float64)

    x = torch.tensor([0, 7, 2**63 + 5], dtype=torch.uint64)
    rec("out", list(twice(C(f), x)))


# ============================================================================================
# torch.linalg with rare options, torch.special rare functions, stft/istft
@scenario
def linalg_matrix_norm_nuc(C, rec):
    def f(a):
        return torch.linalg.matrix_norm(a, ord="nuc"), torch.linalg.matrix_norm(a, ord=-2)

    a = leaf(3, 3, dtype=torch.float64)
    out = twice(C(f), a)
    (out[0] + out[1]).backward()
    rec("out", list(out))
    rec("grad", a.grad)


@scenario
def linalg_lstsq_gelsd(C, rec):
    def f(a, b):
        return torch.linalg.lstsq(a, b, driver="gelsd")

    a, b = leaf(4, 3, dtype=torch.float64, rg=False), leaf(4, 2, seed=1, dtype=torch.float64)
    out = C(f)(a, b)
    rec("sol", out.solution)
    rec("residuals", out.residuals)
    rec("rank", out.rank)
    rec("sv", out.singular_values)


@scenario
def linalg_eigh_upper(C, rec):
    def f(a):
        s = a + a.mT
        w, v = torch.linalg.eigh(s, UPLO="U")
        return w, v.abs()

    a = leaf(3, 3, dtype=torch.float64)
    w, v = C(f)(a)
    (w.sum() + v.sum()).backward()
    rec("out", [w, v])
    rec("grad", a.grad)


@scenario
def linalg_ldl(C, rec):
    def f(a):
        s = a @ a.mT + 3 * torch.eye(3, dtype=a.dtype)
        ld, piv = torch.linalg.ldl_factor(s, hermitian=True)
        return torch.linalg.ldl_solve(ld, piv, torch.ones(3, 1, dtype=a.dtype))

    rec("out", twice(C(f), leaf(3, 3, dtype=torch.float64, rg=False)))


@scenario
def linalg_lu_pivot_false(C, rec):
    def f(a):
        return torch.linalg.lu_factor_ex(a, pivot=True)

    rec("out", list(twice(C(f), leaf(3, 3, dtype=torch.float64, rg=False))))


@scenario
def linalg_matrix_exp_grad(C, rec):
    def f(a):
        return torch.linalg.matrix_exp(a).sum()

    a = leaf(3, 3, dtype=torch.float64)
    out = C(f)(a)
    out.backward()
    rec("out", out)
    rec("grad", a.grad)


@scenario
def linalg_svd_driver(C, rec):
    def f(a):
        return torch.linalg.svdvals(a, driver=None), torch.linalg.cond(a, p="fro")

    rec("out", list(twice(C(f), leaf(3, 3, dtype=torch.float64, rg=False))))


@scenario
def special_rare(C, rec):
    def f(x):
        p = x.abs() + 0.5
        return (
            torch.special.airy_ai(x),
            torch.special.bessel_j0(x),
            torch.special.bessel_y1(p),
            torch.special.modified_bessel_k1(p),
            torch.special.scaled_modified_bessel_k0(p),
            torch.special.spherical_bessel_j0(x),
            torch.special.chebyshev_polynomial_t(x, 3),
            torch.special.hermite_polynomial_h(x, 4),
            torch.special.laguerre_polynomial_l(x, 2),
            torch.special.legendre_polynomial_p(x, 3),
            torch.special.zeta(p + 1, p),
            torch.special.multigammaln(p + 2, 3),
            torch.special.polygamma(2, p),
            torch.special.log_ndtr(x),
            torch.special.ndtri(torch.sigmoid(x)),
            torch.special.erfcx(x),
            torch.special.i1e(x),
            torch.special.xlog1py(x, p),
            torch.special.entr(p),
            torch.special.sinc(x),
        )

    rec("out", list(twice(C(f), leaf(6, dtype=torch.float64, rg=False))))


@scenario
def special_grad(C, rec):
    def f(x):
        p = x.abs() + 0.5
        return (
            torch.special.i0e(x) + torch.special.polygamma(1, p) + torch.special.erfcx(x)
        ).sum() + torch.special.log_ndtr(x).sum()

    x = leaf(6, dtype=torch.float64)
    out = C(f)(x)
    out.backward()
    rec("out", out)
    rec("grad", x.grad)


@scenario
def stft_variants(C, rec):
    def f(x, w):
        a = torch.stft(x, 16, hop_length=4, window=w, return_complex=True)
        b = torch.stft(x, 16, hop_length=4, center=False, onesided=False, return_complex=True)
        c = torch.stft(x, 16, window=w, normalized=True, pad_mode="constant", return_complex=True)
        return a.abs(), b.real, c.angle()

    x = leaf(2, 64, rg=False)
    rec("out", list(twice(C(f), x, torch.hann_window(16))))


@scenario
def stft_istft_grad(C, rec):
    def f(x, w):
        s = torch.stft(x, 16, hop_length=4, window=w, return_complex=True)
        return torch.istft(s * 2, 16, hop_length=4, window=w, length=x.shape[-1])

    x = leaf(64, dtype=torch.float64)
    w = torch.hann_window(16, dtype=torch.float64)
    out = C(f)(x, w)
    out.pow(2).sum().backward()
    rec("out", out)
    rec("grad", x.grad)


@scenario
def istft_onesided_false(C, rec):
    def f(s):
        return torch.istft(s, 8, hop_length=2, onesided=False, return_complex=True)

    x = torch.randn(32, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    s = torch.stft(x, 8, hop_length=2, onesided=False, return_complex=True)
    rec("out", twice(C(f), s))


# ============================================================================================
# user torch.library ops, with and without a fake kernel
@torch.library.custom_op("t2x_probe::twist", mutates_args=())
def twist(x: torch.Tensor) -> torch.Tensor:
    return x.sin() * 2 + x.numpy().sum() * 0  # (a real eager-only kernel: numpy)


@twist.register_fake
def _(x):
    return torch.empty_like(x)


twist.register_autograd(
    lambda ctx, g: g * 2 * ctx.saved_tensors[0].cos(),
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
)


@torch.library.custom_op("t2x_probe::nofake", mutates_args=())
def nofake(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@torch.library.custom_op("t2x_probe::nograd", mutates_args=())
def nograd(x: torch.Tensor) -> torch.Tensor:
    return x.cos()


@nograd.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("t2x_probe::bump_", mutates_args=("x",))
def bump_(x: torch.Tensor, y: torch.Tensor) -> None:
    x.add_(y.numpy().sum())


@bump_.register_fake
def _(x, y):
    return None


@torch.library.custom_op("t2x_probe::two_out", mutates_args=())
def two_out(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.clone() * 2, (x > 0).to(torch.int64)


@two_out.register_fake
def _(x):
    return torch.empty_like(x), torch.empty_like(x, dtype=torch.int64)


lib = torch.library.Library("t2x_probe2", "DEF")
lib.define("meta_only(Tensor x) -> Tensor")
lib.impl("meta_only", lambda x: x * 5 + 1, "CPU")
lib.impl("meta_only", lambda x: torch.empty_like(x), "Meta")


@scenario(warns="t2x_probe.twist")
def custom_op_fake_grad(C, rec):
    def f(x):
        h = torch.ops.t2x_probe.twist(x * 2)
        return (h + 1).sum(), h

    x = leaf(4)
    out, h = C(f)(x)
    out.backward()
    rec("out", [out, h])
    rec("grad", x.grad)
    x.grad = None
    out, h = C(f)(x)
    rec("again", [out, h])


@scenario
def custom_op_no_fake(C, rec):
    def f(x):
        return torch.ops.t2x_probe.nofake(x + 1) * 2

    rec("out", twice(C(f), leaf(4, rg=False)))


@scenario
def custom_op_no_fake_grad(C, rec):
    def f(x):
        return torch.ops.t2x_probe.nofake(x + 1) * 2

    x = leaf(4)
    out = C(f)(x)
    rec("out", out)
    out.sum().backward()
    rec("grad", x.grad)


@scenario
def custom_op_no_autograd(C, rec):
    def f(x):
        return torch.ops.t2x_probe.nograd(x * 2).sum()

    x = leaf(4)
    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("grad", x.grad)


@scenario
def custom_op_mutating(C, rec):
    def f(x, y):
        x.mul_(2)
        torch.ops.t2x_probe.bump_(x, y)
        return x + 1

    x, y = leaf(4, rg=False), leaf(3, seed=1, rg=False)
    out = C(f)(x, y)
    rec("out", out)
    rec("x", x)


@scenario
def custom_op_two_out(C, rec):
    def f(x):
        a, b = torch.ops.t2x_probe.two_out(x - 0.1)
        return a * b, b.sum()

    rec("out", list(twice(C(f), leaf(5, rg=False))))


@scenario
def custom_op_meta_only(C, rec):
    def f(x):
        return torch.ops.t2x_probe2.meta_only(x.exp()) - 1

    rec("out", twice(C(f), leaf(4, rg=False)))


# ============================================================================================
# in-place mutations of inputs before and after an op that runs in eager
@scenario
def mutation_around_island(C, rec):
    def f(x, y):
        x.add_(1)
        h = torch.ops.t2x_probe.twist(x)  # must see x + 1
        x.mul_(h)  # after the island
        y.copy_(h)
        return h.sum()

    x, y = leaf(4, rg=False), torch.zeros(4)
    out = twice(C(f), x, y)
    rec("out", out)
    rec("x", x)
    rec("y", y)


@scenario
def mutation_island_reads_view(C, rec):
    def f(x):
        x[0].add_(5)
        v = x[:, 1]
        h = torch.ops.t2x_probe.twist(v)
        v.mul_(2)
        return h

    x = leaf(3, 3, rg=False)
    out = C(f)(x)
    rec("out", out)
    rec("x", x)


@scenario
def mutation_island_is_mutator(C, rec):
    def f(x, y):
        y.sub_(1)
        torch.ops.t2x_probe.bump_(x, y)  # eager op writes x
        x.div_(2)
        return x * y.sum()

    x, y = leaf(4, rg=False), leaf(2, seed=1, rg=False)
    out = C(f)(x, y)
    rec("out", out)
    rec("x", x)
    rec("y", y)


@scenario
def mutation_of_input_requiring_grad_path(C, rec):
    def f(w, buf):
        buf.mul_(0.5)
        h = torch.ops.t2x_probe.twist(w * buf)
        buf.add_(h.detach())
        return h.sum()

    w, buf = leaf(4), torch.ones(4)
    out = C(f)(w, buf)
    out.backward()
    rec("out", out)
    rec("buf", buf)
    rec("grad", w.grad)


@scenario
def mutation_with_complex32_island(C, rec):
    def f(x, acc):
        acc.add_(x)
        c = acc.to(torch.complex32)
        acc.mul_(2)
        return (c * c).to(torch.complex64)

    x, acc = leaf(3, rg=False), torch.ones(3)
    out = twice(C(f), x, acc)
    rec("out", out)
    rec("acc", acc)


@scenario
def mutation_sparse_island(C, rec):
    def f(x, s):
        x.add_(1)
        y = torch.sparse.mm(s, x)
        x.mul_(3)
        return y

    x = leaf(2, 2, rg=False)
    s = torch.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()
    out = C(f)(x, s)
    rec("out", out)
    rec("x", x)


@torch.library.custom_op("t2x_probe::check_pos", mutates_args=())
def check_pos(x: torch.Tensor) -> torch.Tensor:
    if (x < 0).any():
        raise ValueError("check_pos: negative input")
    return x.sqrt()


@check_pos.register_fake
def _(x):
    return torch.empty_like(x)


@scenario
def island_raises_after_mutation(C, rec):
    def f(x, y):
        x.add_(1)
        y.mul_(2)
        h = torch.ops.t2x_probe.check_pos(x)
        x.mul_(10)
        return h

    g = C(f)
    x, y = torch.tensor([4.0, 1.0]), torch.ones(2)
    rec("ok_call", g(x, y))
    rec("x", x)
    x[0] = -5.0
    for k in range(2):  # (the first call of the signature, then its cached entry)
        try:
            g(x, y)
        except ValueError as e:
            rec(f"raised{k}", e)
        rec(f"x{k}", x)
        rec(f"y{k}", y)
        x[0] = -5.0


@scenario
def island_raises_no_mutation(C, rec):
    def f(x):
        return torch.ops.t2x_probe.check_pos(x * 2) + 1

    g = C(f)
    rec("ok", g(torch.ones(3)))
    rec("raises", g(-torch.ones(3)))


@scenario
def island_raises_rng_state(C, rec):
    def f(x):
        a = torch.rand(5)
        h = torch.ops.t2x_probe.check_pos(x + a)
        return h + torch.rand(5)

    g = C(f)
    torch.manual_seed(1)
    try:
        g(-torch.ones(5) * 3)
    except ValueError as e:
        rec("raised", e)
    rec("next_draw", torch.rand(3))


@scenario
def island_raises_module_buffers(C, rec):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)

        def forward(self, x):
            return torch.ops.t2x_probe.check_pos(self.bn(x))

    m = M()
    try:
        C(m)(leaf(4, 3, rg=False))
    except ValueError as e:
        rec("raised", e)
    rec("running", [m.bn.running_mean, m.bn.running_var, m.bn.num_batches_tracked])


@scenario
def island_raises_training(C, rec):
    def f(w, buf):
        buf.add_(1)
        return torch.ops.t2x_probe.check_pos(w * buf).sum()

    w, buf = leaf(3), torch.zeros(3)
    g = C(f)
    try:
        g(w, buf)
    except ValueError as e:
        rec("raised", e)
    rec("buf", buf)
    rec("grad", w.grad)


# ============================================================================================
# gradients through an eager island: values and None-ness
@scenario
def grad_none_ness(C, rec):
    def f(a, b, c):
        h = torch.ops.t2x_probe.twist(a * 2)
        return (h * b).sum(), c * 2

    a, b, c = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    out, oc = C(f)(a, b, c)
    out.backward()
    rec("out", [out, oc])
    rec("grads", [a.grad, b.grad, c.grad])


@scenario
def grad_island_output_only(C, rec):
    def f(a, b):
        return torch.ops.t2x_probe.twist(a), b.detach() * 2

    a, b = leaf(3), leaf(3, seed=1)
    h, d = C(f)(a, b)
    rec("outs", [h, d])
    h.sum().backward()
    rec("grads", [a.grad, b.grad])


@scenario
def grad_island_no_grad_input(C, rec):
    def f(a, b):
        h = torch.ops.t2x_probe.twist(b)  # b needs no grad
        return (a * h).sum(), h

    a, b = leaf(3), leaf(3, seed=1, rg=False)
    out, h = C(f)(a, b)
    rec("outs", [out, h])
    out.backward()
    rec("grads", [a.grad, b.grad])


@scenario
def grad_retain_and_twice(C, rec):
    def f(a):
        return torch.ops.t2x_probe.twist(a.exp()).sum()

    a = leaf(3)
    out = C(f)(a)
    out.backward(retain_graph=True)
    out.backward()
    rec("grad", a.grad)


@scenario
def grad_nonzero_island(C, rec):
    def f(a):
        m = a > 0
        v = torch.masked_select(a * 3, m)
        return v.pow(2).sum() + a.sum()

    a = leaf(6)
    out = C(f)(a)
    out.backward()
    rec("out", out)
    rec("grad", a.grad)


@scenario
def grad_autograd_grad_allow_unused(C, rec):
    def f(a, b):
        return torch.ops.t2x_probe.twist(a).sum() + b.sum() * 0

    a, b, c = leaf(3), leaf(3, seed=1), leaf(3, seed=2)
    out = C(f)(a, b)
    g = torch.autograd.grad(out, [a, b, c], allow_unused=True)
    rec("grads", list(g))


@scenario
def island_in_no_grad_region(C, rec):
    def f(a):
        with torch.no_grad():
            h = torch.ops.t2x_probe.twist(a * 2)
        return (a * h).sum(), h

    a = leaf(3)
    out, h = C(f)(a)
    rec("outs", [out, h])
    out.backward()
    rec("grad", a.grad)


@scenario
def island_under_enable_grad_in_no_grad_call(C, rec):
    def f(a):
        with torch.enable_grad():
            h = torch.ops.t2x_probe.twist(a * 2)
        return h

    a = leaf(3)
    with torch.no_grad():
        h = C(f)(a)
    rec("out", h)
    h.sum().backward()
    rec("grad", a.grad)


@scenario
def island_inference_mode(C, rec):
    def f(a):
        return torch.ops.t2x_probe.twist(a + 1) * 2

    with torch.inference_mode():
        out = C(f)(leaf(3, rg=False))
    rec("out", out)
    rec("inference", out.is_inference())


def _eager_mm(C, f, *args):
    """``f`` compiled with aten.mm run in eager (``eager_ops``), else ``f``."""
    if not C.compiled or BACKEND != "xla":
        return f(*args)
    opts = {"eager_ops": [torch.ops.aten.mm.default]}
    return torch.compile(f, backend="xla", options=opts)(*args)


@scenario
def eager_op_autocast_disabled_inside(C, rec):
    # autocast is baked into the graph: the eager mm must not be autocast again at run time
    def f(x, w):
        with torch.autocast("cpu", enabled=False):
            return x.float() @ w.float()

    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _eager_mm(C, f, leaf(3, 4, rg=False), leaf(4, 2, seed=1, rg=False))
    rec("out", out)


@scenario
def eager_op_under_autocast(C, rec):
    def f(x, w):
        return (x @ w).relu(), torch.mm(x.double(), w.double())

    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = _eager_mm(C, f, leaf(3, 4, rg=False), leaf(4, 2, seed=1, rg=False))
    rec("out", list(out))


@scenario
def view_as_complex32_of_input(C, rec):
    def f(x):
        return x.view(torch.complex32)

    x = torch.randn(4, 2).half()
    out = twice(C(f), x)
    rec("out", out)
    rec("is_view", out._base is x)


@scenario
def island_output_mutated_later(C, rec):
    def f(a):
        h = torch.ops.t2x_probe.twist(a)
        h.mul_(2)
        return h, h + 1

    a = leaf(3)
    h, g = C(f)(a)
    rec("outs", [h, g])
    (h.sum() + g.sum()).backward()
    rec("grad", a.grad)


# ============================================================================================
# training step of an nn.Module with an unsupported op
class IslandNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        h = self.bn(self.fc1(x))
        h = torch.ops.t2x_probe.twist(h)
        return self.fc2(F.relu(h))


@scenario
def train_step_sgd(C, rec):
    m = IslandNet()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    step = C(m)
    x, t = leaf(5, 6, rg=False), torch.tensor([0, 1, 2, 0, 1])
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(step(x), t)
        loss.backward()
        opt.step()
        rec("loss", loss)
    rec("params", [p.detach() for p in m.parameters()])
    rec("running", [m.bn.running_mean, m.bn.running_var, m.bn.num_batches_tracked])


@scenario
def train_step_adam_whole(C, rec):
    m = IslandNet()
    opt = torch.optim.Adam(m.parameters(), lr=0.01)

    def step(x, t):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), t)
        loss.backward()
        opt.step()
        return loss

    cstep = C(step)
    x, t = leaf(5, 6, rg=False), torch.tensor([0, 1, 2, 0, 1])
    for _ in range(3):
        rec("loss", cstep(x, t))
    # (not fc1.bias: a batch norm follows, so its gradient is rounding noise, which Adam
    # normalizes to steps of lr; torch's aot_eager differs from eager there too)
    rec("params", [p.detach() for n, p in m.named_parameters() if n != "fc1.bias"])


class SparseNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.emb = nn.Embedding(10, 4, sparse=True)
        self.fc = nn.Linear(4, 1)

    def forward(self, i):
        return self.fc(self.emb(i)).sum()


@scenario
def train_sparse_embedding(C, rec):
    m = SparseNet()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    step = C(m)
    i = torch.tensor([1, 3, 3, 7])
    for _ in range(2):
        opt.zero_grad()
        loss = step(i)
        loss.backward()
        rec("emb_grad_layout", str(m.emb.weight.grad.layout))
        opt.step()
        rec("loss", loss)
    rec("params", [p.detach() for p in m.parameters()])


# ============================================================================================
# random ops around an eager island
@scenario
def random_around_island_seeded(C, rec):
    def f(x):
        a = torch.rand_like(x)
        h = torch.ops.t2x_probe.twist(x + a)
        b = torch.randn(3, 4)
        return h, a, b, F.dropout(h, 0.5)

    x = leaf(3, 4, rg=False)
    g = C(f)
    torch.manual_seed(11)
    r1 = g(x)
    torch.manual_seed(11)
    r2 = g(x)
    rec("reproducible", all(torch.equal(p, q) for p, q in zip(r1, r2)))
    rec("shapes", [list(t.shape) for t in r1])
    rec("dtypes", [str(t.dtype) for t in r1])
    r3 = g(x)
    rec("different_after", not torch.equal(r1[1], r3[1]))
    big = C(lambda n: (torch.ops.t2x_probe.twist(torch.rand(n, n)), torch.randn(n, n)))(200)
    rec("rand_stats", [round(big[0].mean().item() * 0 + 1, 1)])  # ran
    rec("randn_mean~0", abs(big[1].mean().item()) < 0.02)
    rec("randn_std~1", abs(big[1].std().item() - 1) < 0.02)


@scenario
def random_island_dropout_grad(C, rec):
    def f(x):
        h = F.dropout(x, 0.5, training=True)
        return torch.ops.t2x_probe.twist(h), h

    x = leaf(400)
    out, h = C(f)(x)
    out.sum().backward()
    kept = h != 0
    # the gradient is zero exactly where dropout dropped, 2*2cos(2h)... where kept
    expect = torch.where(kept, 2 * 2 * torch.cos(h.detach()), torch.zeros(()))
    rec("grad_matches_mask", torch.allclose(x.grad, expect, atol=1e-5))
    rec("kept_fraction~0.5", abs(kept.float().mean().item() - 0.5) < 0.1)


@scenario
def random_generator_arg(C, rec):
    def f(x, g):
        return torch.ops.t2x_probe.twist(x) + torch.rand(x.shape, generator=g)

    x = leaf(4, rg=False)
    out = C(f)(x, torch.Generator().manual_seed(5))
    rec("out", out)


# ============================================================================================
# strict mode: raises naming the op and the user's source line
@scenario
def strict_custom_op(C, rec):
    def f(x):
        return torch.ops.t2x_probe.twist(x) + 1

    _strict(C, rec, f, (leaf(3, rg=False),), "t2x_probe.twist", "return torch.ops.t2x_probe.twist")


def _strict(C, rec, f, args, op, line):
    """The strict run raises UnsupportedOpsError naming ``op`` and ``line``; eager returns
    (what eager computes is then compared with eager's: the observations line up)."""
    if not C.compiled or BACKEND != "xla":
        rec("names_op", True)
        rec("names_line", True)
        rec("out", f(*args))
        return
    try:
        C(f, strict=True)(*args)
        rec("names_op", "did not raise")
    except torch2xla.UnsupportedOpsError as e:
        m = str(e)
        rec("names_op", op in m or m)
        rec("names_line", ("probe_fallback.py" in m and line in m) or m)
    rec("out", f(*args))


@scenario
def strict_complex32(C, rec):
    def f(x):
        return (x.to(torch.complex32) * 2).to(torch.complex64)

    x = torch.tensor([1 + 1j], dtype=torch.complex64)
    _strict(C, rec, f, (x,), "complex32", "return (x.to(torch.complex32) * 2)")


@scenario
def strict_sparse(C, rec):
    # (Dynamo breaks the graph at to_sparse: nothing for strict mode to refuse)
    def f(x):
        return x.to_sparse().to_dense() * 2

    rec("out", C(f, strict=True)(leaf(2, 2, rg=False)))


@scenario
def strict_float8_fnuz(C, rec):
    def f(x):
        return x.to(torch.float8_e4m3fnuz).to(torch.float32) * 2

    _strict(
        C, rec, f, (leaf(4, rg=False),), "float8_e4m3fnuz", "return x.to(torch.float8_e4m3fnuz)"
    )


@scenario
def strict_uint16(C, rec):
    # (uint16 has an XLA type: strict mode runs it)
    def f(x):
        return (x.to(torch.uint16) * 3).to(torch.int32)

    rec("out", C(f, strict=True)(torch.arange(4)))


@scenario
def strict_no_fake(C, rec):
    # (Dynamo itself needs the fake kernel: it raises before any backend sees the graph)
    def f(x):
        return torch.ops.t2x_probe.nofake(x) + 1

    rec("out", C(f, strict=True)(leaf(3, rg=False)))


@scenario
def lowering_fails_strict(C, rec):
    from torch2xla.ops import LOWERINGS

    aten = torch.ops.aten

    def broken(x):
        raise ValueError("planted")

    def f(x):
        return torch.tan(x) + 1

    saved = LOWERINGS[aten.tan.default]
    LOWERINGS[aten.tan.default] = broken
    try:
        if C.compiled and BACKEND == "xla":
            try:
                C(f, strict=True)(leaf(3, rg=False))
                rec("names_op", "did not raise")
            except torch2xla.LoweringError as e:
                m = str(e)
                rec("names_op", "aten.tan" in m or m)
                rec("names_line", "return torch.tan(x) + 1" in m or m)
                rec("original", type(e.original).__name__)
        else:
            rec("names_op", True)
            rec("names_line", True)
            rec("original", "ValueError")
        rec("out", f(leaf(3, rg=False)))
    finally:
        LOWERINGS[aten.tan.default] = saved


@scenario
def lowering_fails_fallback(C, rec):
    from torch2xla.ops import LOWERINGS

    aten = torch.ops.aten

    def broken(x):
        raise ValueError("planted")

    def f(x):
        h = torch.tan(x)
        return h + 1, h.sum()

    saved = LOWERINGS[aten.tan.default]
    LOWERINGS[aten.tan.default] = broken
    try:
        x = leaf(3)
        out = twice(C(f), x)
        out[1].backward()
        rec("out", list(out))
        rec("grad", x.grad)
    finally:
        LOWERINGS[aten.tan.default] = saved


# ============================================================================================
# tensor subclasses with __torch_function__
class Tagged(torch.Tensor):
    """A subclass that only keeps its type through ops (the default __torch_function__)."""


class Logged(torch.Tensor):
    calls: ClassVar[list] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Logged.calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


class Scaled(torch.Tensor):
    """__torch_function__ that changes values: every add doubles."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__):
            out = out * 2
        return out


@scenario
def subclass_plain(C, rec):
    def f(x):
        return x * 2 + 1, (x.sin() @ x.T).sum()

    x = torch.arange(6.0).view(2, 3).as_subclass(Tagged)
    rec("out", list(twice(C(f), x)))


@scenario
def subclass_logged(C, rec):
    def f(x):
        return torch.relu(x) * 3

    Logged.calls.clear()
    x = (torch.arange(4.0) - 2).as_subclass(Logged)
    out = C(f)(x)
    rec("out", out)
    rec("calls", sorted(set(Logged.calls)))


@scenario
def subclass_scaled(C, rec):
    def f(x, y):
        return torch.add(x, y) * 1, x + y

    x = torch.ones(3).as_subclass(Scaled)
    rec("out", list(twice(C(f), x, torch.ones(3))))


@scenario
def subclass_grad(C, rec):
    def f(x):
        return (x.exp() * 2).sum()

    base = leaf(3)
    x = base.as_subclass(Tagged)
    out = C(f)(x)
    rec("out", out)
    out.backward()
    rec("grad", base.grad)


@scenario
def subclass_parameter(C, rec):
    class P(nn.Parameter):
        pass

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = P(torch.ones(3) * 2)

        def forward(self, x):
            return (x * self.w).sum()

    m = M()
    out = C(m)(leaf(3, rg=False))
    out.backward()
    rec("out", out)
    rec("grad", m.w.grad)


@scenario
def subclass_dispatch_two_tensor(C, rec):
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        return (x * 2).sin() + 1

    t = TwoTensor(leaf(3, rg=False), leaf(3, seed=1, rg=False))
    out = twice(C(f), t)
    rec("type", type(out).__name__)
    rec("parts", [out.a, out.b])


@scenario
def subclass_dispatch_two_tensor_island(C, rec):
    from torch.testing._internal.two_tensor import TwoTensor

    def f(x):
        return torch.ops.t2x_probe.nograd(x * 2) + 1

    t = TwoTensor(leaf(3, rg=False), leaf(3, seed=1, rg=False))
    out = C(f)(t)
    rec("type", type(out).__name__)
    rec("parts", [out.a, out.b])


@scenario
def forward_ad_island(C, rec):
    import torch.autograd.forward_ad as fwAD

    def f(x):
        return (x.sin() * 2).exp()

    g = C(f)
    with fwAD.dual_level():
        d = fwAD.make_dual(leaf(3, rg=False), torch.ones(3))
        out = g(d)
        p, t = fwAD.unpack_dual(out)
        rec("primal", p)
        rec("tangent", t)


@scenario
def func_jvp_vmap_grad(C, rec):
    def f(x):
        return torch.ops.t2x_probe.twist(x).sum()

    g = C(f)
    x = leaf(3, rg=False)
    rec("grad", torch.func.grad(g)(x))


@scenario
def func_vmap_island(C, rec):
    def f(x):
        return torch.ops.t2x_probe.nograd(x) * 2

    rec("vmap", torch.func.vmap(C(f))(leaf(4, 3, rg=False)))


# ============================================================================================
# warnings: one per graph, naming op and line, not on every call
@scenario(warns="t2x_probe.twist")
def warn_once_many_calls(C, rec):
    def f(x):
        return torch.ops.t2x_probe.twist(x) * 2

    g = C(f)
    x = leaf(3, rg=False)
    for _ in range(4):
        out = g(x)
    rec("out", out)
    for n in (4, 5):  # new shapes: recompiles; each may warn once for its own graph at most
        rec(f"out{n}", g(leaf(n, rg=False)))


@scenario(warns="t2x_probe.twist")
def warn_once_training(C, rec):
    m = IslandNet()
    step = C(m)
    x = leaf(5, 6, rg=False)
    for _ in range(3):
        loss = step(x).sum()
        loss.backward()
    rec("loss", loss)
    rec("grads", [p.grad for p in m.parameters()])


def main(argv) -> int:
    warnings.simplefilter("ignore")
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = 0
    global BACKEND
    for n in names:
        try:
            line = compare(n, SCENARIOS[n])
            if line.startswith("DIFF") and BACKEND == "xla":
                # torch's own difference where Dynamo with backend="eager" differs too
                BACKEND = "eager"
                try:
                    if compare(n, SCENARIOS[n]).startswith("DIFF"):
                        line = "TORCH" + line[4:] + "  [backend='eager' differs too]"
                finally:
                    BACKEND = "xla"
        except Exception:  # noqa: BLE001  (a failure of the probe itself)
            line = f"CRASH {n}: {traceback.format_exc().strip().splitlines()[-1]}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
