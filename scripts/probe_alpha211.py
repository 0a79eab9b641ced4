"""Which rounding eager's CPU half-precision ``add(alpha=)``/``sub(alpha=)``/``lerp`` follow on
this torch (tests/test_trainloop_s29's alpha values differed on torch 2.11's GPU host): for
each element, the candidate formulas that give eager's value, and where the compiled result
differs. Candidates (``h``: alpha/weight rounded to the tensors' dtype first; ``32``: kept
in float32), each computed in float64 and rounded as named:

- add: ``fma``: a + b * alpha rounded once to float32, then to the dtype (a vector FMA);
  ``ma``: the product rounded to float32, the sum to float32, then to the dtype;
  ``S``: the product rounded to the dtype, then the sum (the scalar loop's rule).
- lerp: ``V``: coeff * (e - s) + base (coeff, base = (w, s) where |w| < 0.5, else
  (w - 1, e)) as one FMA; ``S``: s + w * (e - s) or e - (e - s) * (1 - w) in float32.

    PYTHONPATH=. python scripts/probe_alpha211.py

Session 30, on the GPU host (torch 2.11.0+cu130, jax 0.11.2, Xeon AVX512), eager only (the
device runs the main checkout): every element follows the same rule as torch 2.13 here (add:
``fmah`` in the vector blocks, ``Sh`` in the last 37 % 32; lerp: the weight in float32), and
``_common._loop_block_bytes()`` is 64 there too. Run there with torch2xla (16 threads), the
test's ``_alpha`` differs from eager only in its in-place chain ``x.add_(y, alpha=-s).sub_(y,
alpha=s / 2).lerp_(y, 1 - s)`` (bfloat16 s=0.3: elements 6, 32, 33; float16 s=1.0005: 13 of
37); the out-of-place add/sub/lerp with the same numbers equal eager. A replica in plain JAX
of the program torch 2.13 captures for that chain (its jaxpr) gives eager's values on jax
0.11.2 too, so the graph torch 2.11 captures for the chain is the suspect: next, dump it there
(``TORCH2XLA_DUMP_DIR``) and compare with the one here (add.Tensor(alpha=-0.3),
sub.Tensor(alpha=0.15), lerp.Scalar(0.7)).
"""

from __future__ import annotations

import sys
import warnings

import torch

import torch2xla  # noqa: F401

warnings.simplefilter("ignore")
F32, F64 = torch.float32, torch.float64
NAN, INF = float("nan"), float("inf")
VALUES = [0.1, 0.3, 1e-3, -0.0, 0.0, 1 + 2**-11 + 2**-40, 16777216.5, NAN, INF, 3e-8]
TENSORS = {
    torch.bfloat16: [0.1, -0.0, 0.0, NAN, INF, 1e-3, 2.5, -3, 0.1000001, 1e30],
    torch.float16: [0.1, -0.0, 0.0, NAN, INF, 1e-3, 2.5, -3, 0.25, 1.5],
}


def f32(v):
    return v.to(F32).to(F64)


def rnd(v, dtype):
    return v.to(F32).to(dtype).to(F64)


def same(a, b):
    return (a == b) & (a.signbit() == b.signbit()) | (a.isnan() & b.isnan())


def add_candidates(a, b, alpha, dtype, sign):
    a64, b64 = a.to(F64), b.to(F64)
    out = {}
    for name, al in (
        ("h", float(torch.tensor(alpha).to(dtype))),
        ("32", float(torch.tensor(alpha, dtype=F32))),
    ):
        al = sign * al
        out["fma" + name] = rnd(f32(a64 + b64 * al), dtype)
        out["ma" + name] = rnd(f32(f32(b64 * al) + a64), dtype)
        out["S" + name] = rnd(f32(a64 + rnd(b64 * al, dtype)), dtype)
    return out


def lerp_candidates(s, e, w, dtype):
    s64, e64 = s.to(F64), e.to(F64)
    out = {}
    for name, wv in (
        ("h", float(torch.tensor(w).to(dtype))),
        ("32", float(torch.tensor(w, dtype=F32))),
    ):
        diff = f32(e64 - s64)
        small = abs(wv) < 0.5
        coeff, base = (wv, s64) if small else (f32(torch.tensor(wv - 1.0, dtype=F64)), e64)
        out["V" + name] = rnd(f32(coeff * diff + base), dtype)
        if small:
            out["S" + name] = rnd(f32(s64 + f32(wv * diff)), dtype)
        else:
            out["S" + name] = rnd(
                f32(e64 - f32(diff * f32(torch.tensor(1 - wv, dtype=F64)))), dtype
            )
    return out


def codes(eager, cands):
    """One letter per element: the first candidate that matches (its index), '.' none."""
    names = list(cands)
    line = []
    for i in range(eager.numel()):
        hit = [k for k, n in enumerate(names) if bool(same(eager[i].to(F64), cands[n][i]))]
        line.append(str(hit[0]) if hit else ".")
    return "".join(line), names


def main():
    print(torch.__version__, torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())
    for dtype in (torch.bfloat16, torch.float16):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(37, generator=gen).to(dtype)
        y = torch.tensor(TENSORS[dtype] * 3 + [1.5] * 7, dtype=dtype)
        for s in VALUES:
            if dtype == torch.float16 and not s < 65504:
                continue
            rows = {
                "add": (x.add(y, alpha=s), add_candidates(x, y, s, dtype, 1)),
                "sub-": (torch.sub(x, y, alpha=-s), add_candidates(x, y, s, dtype, 1)),
                "lerp": (x.lerp(y, s), lerp_candidates(x, y, s, dtype)),
            }
            fns = {
                "add": lambda x, y, s=s: x.add(y, alpha=s),
                "sub-": lambda x, y, s=s: torch.sub(x, y, alpha=-s),
                "lerp": lambda x, y, s=s: x.lerp(y, s),
            }
            for name, (eager, cands) in rows.items():
                torch._dynamo.reset()
                got = torch.compile(fns[name], backend="xla")(x, y)
                line, names = codes(eager, cands)
                bad = "".join(
                    "x" if not bool(same(g.to(F64), e.to(F64))) else "." for g, e in zip(got, eager)
                )
                print(
                    f"{str(dtype)[6:]:9s} {name:5s} s={s!r:22s} eager={line} xla-diff={bad} {names}"
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
