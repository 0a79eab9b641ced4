"""Probe complex elementary functions against eager on the CPU, element by element: a grid of
special parts (0, -0, finite, large, inf, -inf, NaN in each part), finite values of every
magnitude (overflow and underflow of intermediates, points near the branch points), and
gradients over the grid's finite values.

    PYTHONPATH=. python scripts/probe_complex.py [op ...]

Prints per op and dtype ``ok`` or the number of differing elements and the first few
(input -> ours vs eager). Values: NaN/inf/signed-zero positions exactly, finite parts within
4 ulps of the larger part; gradients: 8 ulps where eager's are finite, and no NaN where eager
has none. Known and left (see the session's report): eager's subnormal results (XLA's CPU
flushes them), complex128 acos near 1 (glibc's cacos loses digits there, ours are nearer the
true value), pow's finite values where exp(w log z) amplifies the rounding of w log z.
"""

from __future__ import annotations

import sys
import warnings

import torch

import torch2xla  # noqa: F401

warnings.simplefilter("ignore")
NAN, INF = float("nan"), float("inf")
PARTS = [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN, 1e30, 0.25, 100.0, 0.5]
OPS = {
    n: getattr(torch, n)
    for n in (
        *("sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh"),
        *("atanh", "exp", "exp2", "expm1", "log", "log1p", "sqrt", "angle"),
    )
}
OPS |= {
    "square": lambda z: z * z,
    "pow3": lambda z: z**3,
    "pow_complex": lambda z: z ** (0.5 + 1j),
    "pow_real": lambda z: z**2.5,
    "pow_tensor": lambda z: torch.pow(z, z.flip(0)),
    "rpow": lambda z: 2.0**z,
}


def grid(dtype):
    re = torch.tensor(PARTS).repeat_interleave(len(PARTS))
    im = torch.tensor(PARTS).repeat(len(PARTS))
    return torch.complex(re, im).to(dtype)


def magnitudes(dtype):
    big = 3e38 if dtype == torch.complex64 else 1e308
    p = [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-7, 1.0000001, 0.9999999, 88.5, -89.5, 709.5, 710.6]
    p = torch.tensor(p + [-720.0, big, -big, 1e19, 2e-38, 1e-300, 3.0, -20.0], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    r = torch.randn(2, 1000, generator=g, dtype=torch.float64)
    r = r * torch.exp(torch.randn(2, 1000, generator=g, dtype=torch.float64) * 3)
    re = torch.cat([p.repeat_interleave(len(p)), r[0]])
    im = torch.cat([p.repeat(len(p)), r[1]])
    return torch.complex(re, im).to(dtype)


def differing(o, r, ulps, zero_signs=True):
    o, r = torch.view_as_real(o), torch.view_as_real(r)
    scale = r.double().abs().nan_to_num(0.0, 0.0, 0.0).amax(-1, keepdim=True).expand_as(r)
    bad = o.isnan() != r.isnan()
    bad |= (r.isinf() | o.isinf()) & (o != r) & ~(o.isnan() | r.isnan())
    if zero_signs:
        bad |= (r == 0) & (o == 0) & (o.signbit() != r.signbit())
    fin = r.isfinite() & o.isfinite()
    bad |= fin & ((o.double() - r.double()).abs() > ulps * torch.finfo(r.dtype).eps * scale)
    return bad.any(-1)


def as_complex(t):
    return t if t.is_complex() else torch.complex(t, torch.zeros_like(t))


def report(label, z, out, ref, ulps, zero_signs=True):
    m = differing(as_complex(out), as_complex(ref), ulps, zero_signs)
    if not m.any():
        return f"ok    {label}"
    shown = [
        f"{complex(z[i])} -> {complex(out[i])} vs {complex(ref[i])}" for i in m.nonzero()[:4, 0]
    ]
    return f"DIFF  {label}: {int(m.sum())} of {len(z)}; " + "; ".join(shown)


def values(name, fn, dtype, z):
    torch._dynamo.reset()
    return report(f"{name} {dtype}", z, torch.compile(fn, backend="xla")(z), fn(z), 4)


def gradients(name, fn, dtype):
    z0 = grid(dtype)
    z0 = z0[torch.view_as_real(z0).isfinite().all(-1)]

    def grad(f):
        z = z0.clone().requires_grad_()
        w = f(z)
        return torch.autograd.grad(w, z, torch.ones_like(w))[0]

    ref = grad(fn)
    torch._dynamo.reset()
    out = grad(torch.compile(fn, backend="xla"))
    fin = torch.view_as_real(ref).isfinite().all(-1)
    nan = ~torch.view_as_real(ref).isnan().any(-1) & torch.view_as_real(out).isnan().any(-1)
    if nan.any():
        return f"DIFF  grad {name} {dtype}: NaN where eager has none at {z0[nan][:4].tolist()}"
    # (a zero part's sign in a gradient is not compared: ours conjugates the cotangent twice)
    return report(f"grad {name} {dtype}", z0[fin], out[fin], ref[fin], 8, zero_signs=False)


def main(argv):
    names = argv or list(OPS)
    lines = []
    for dtype in (torch.complex64, torch.complex128):
        for name in names:
            fn = OPS[name]
            lines.append(values(name, fn, dtype, grid(dtype)))
            lines.append(values(f"{name} (magnitudes)", fn, dtype, magnitudes(dtype)))
            if name not in ("angle",):
                lines.append(gradients(name, fn, dtype))
            print(lines[-3], lines[-2], lines[-1], sep="\n", flush=True)
    ok = sum(line.startswith("ok") for line in lines)
    print(f"{ok}/{len(lines)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
