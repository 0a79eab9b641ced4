"""Probe (session 28, GPU): CPU tensors beside CUDA tensors, written as users write them.

Each case runs eagerly and compiled with torch2xla on fresh copies of its arguments; outputs
(devices, dtypes, values), the arguments after the call (in-place writes), the gradients of
arguments that require grad (None-ness exact) and errors (type) must be eager's. Prints one line
per case and a summary; exit status 1 on a mismatch. Usage: python scripts/probe_devices28.py
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings

import torch

import torch2xla

DEV = os.environ.get("T2X_PROBE_DEVICE", "cuda")


def _leaf(t, grad=False):
    return t.detach().clone().requires_grad_(grad)


def cases():
    c = {}
    x = lambda *s: torch.randn(*s, device=DEV)
    c["add 0-d float"] = (lambda a, n: a + n, lambda: (x(4), torch.tensor(2.5)))
    c["mul 0-d int"] = (lambda a, n: a * n, lambda: (x(4), torch.tensor(3)))
    c["add 0-d bool"] = (lambda a, n: a + n, lambda: (x(4), torch.tensor(True)))
    c["0-d int + cuda int"] = (
        lambda a, n: a + n,
        lambda: (torch.arange(4, device=DEV), torch.tensor(7)),
    )
    c["0-d float64 * cuda float32"] = (
        lambda a, n: a * n,
        lambda: (x(4), torch.tensor(1.5, dtype=torch.float64)),
    )
    c["where cpu scalar"] = (
        lambda a, n: torch.where(a > 0, a, n),
        lambda: (x(6), torch.tensor(-1.0)),
    )
    c["compare with cpu 0-d"] = (lambda a, n: (a > n, a == n), lambda: (x(6), torch.tensor(0.0)))
    c["masked_fill cpu 0-d"] = (
        lambda a, n: a.masked_fill(a < 0, n),
        lambda: (x(6), torch.tensor(9.0)),
    )
    c["clamp cpu 0-d bounds"] = (
        lambda a, lo, hi: a.clamp(lo, hi),
        lambda: (x(6), torch.tensor(-0.5), torch.tensor(0.5)),
    )
    c["add_ cpu 0-d in place"] = (lambda a, n: a.add_(n), lambda: (x(4), torch.tensor(1.0)))
    c["index with cpu 0-d"] = (lambda a, i: a[i] * 2, lambda: (x(5, 3), torch.tensor(2)))
    c["index with cpu long"] = (lambda a, i: a[i] + 1, lambda: (x(5, 3), torch.tensor([0, 4, 4])))
    c["index with cpu bool mask"] = (
        lambda a, m: a[m] * 2,
        lambda: (x(5), torch.tensor([True, False, True, True, False])),
    )
    c["setitem cpu mask cuda value"] = (
        lambda a, m: a.__setitem__(m, 0.0) or a,
        lambda: (x(5), torch.tensor([True, False, True, True, False])),
    )
    c["setitem cuda mask cpu 0-d"] = (
        lambda a, n: a.__setitem__(a > 0, n) or a,
        lambda: (x(8), torch.tensor(5.0)),
    )
    c["index_put cuda idx cpu 0-d"] = (
        lambda a, i, n: a.index_put_((i,), n),
        lambda: (x(6), torch.tensor([1, 3], device=DEV), torch.tensor(2.0)),
    )
    c["arange of cpu 0-d"] = (
        lambda a, n: a[: n.item()] + torch.arange(n.item(), device=DEV),
        lambda: (x(8), torch.tensor(5)),
    )
    c["step counter"] = (
        lambda a, step: (a * (step + 1), step.add_(1)),
        lambda: (x(3), torch.tensor(0)),
    )
    c["lr schedule"] = (
        lambda w, g, step: w.sub_(g * (0.1 / (step + 1).sqrt())),
        lambda: (x(4), x(4), torch.tensor(3.0)),
    )
    c["grad to cpu scalar"] = (
        lambda a, s: (a * s).square().sum(),
        lambda: (_leaf(x(4), True), _leaf(torch.tensor(2.0), True)),
    )
    c["grad cuda only, cpu scalar constant"] = (
        lambda a, s: (a * s).sum(),
        lambda: (_leaf(x(4), True), torch.tensor(2.0)),
    )
    c["cpu 0-d result stays cpu"] = (
        lambda a, n: (a.sum(), n * 2, n + a.sum().cpu()),
        lambda: (x(4), torch.tensor(1.5)),
    )
    c["to cpu and back"] = (lambda a: (a.cpu() * 2).to(DEV) + a, lambda: (x(4),))
    c["item of cuda"] = (lambda a: a * a.max().item(), lambda: (x(4),))
    c["cpu 1-d + cuda raises"] = (lambda a, b: a + b, lambda: (x(3), torch.randn(3)))
    c["cat cpu and cuda raises"] = (lambda a, b: torch.cat([a, b]), lambda: (x(3), torch.randn(3)))
    c["matmul cpu and cuda raises"] = (lambda a, b: a @ b, lambda: (x(3, 3), torch.randn(3, 3)))
    c["index_select cpu index"] = (
        lambda a, i: a.index_select(0, i),
        lambda: (x(5, 2), torch.tensor([1, 1, 0])),
    )
    c["gather cpu index raises"] = (
        lambda a, i: a.gather(0, i),
        lambda: (x(5), torch.tensor([1, 2])),
    )
    c["embedding cpu ids"] = (
        lambda w, i: torch.nn.functional.embedding(i, w),
        lambda: (x(10, 4), torch.tensor([[1, 2], [3, 9]])),
    )
    c["full of cpu 0-d"] = (
        lambda a, n: a + torch.full((4,), n.item(), device=DEV),
        lambda: (x(4), torch.tensor(0.25)),
    )
    c["cpu scalar pow"] = (lambda a, n: a.abs() ** n, lambda: (x(4), torch.tensor(0.5)))
    c["int div by cpu 0-d"] = (
        lambda a, n: torch.div(a, n, rounding_mode="floor"),
        lambda: (torch.arange(6, device=DEV), torch.tensor(4)),
    )
    return c


def _run(fn, args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.FallbackWarning)
            out = fn(*args)
    except Exception as e:  # noqa: BLE001 (an error is an outcome compared with eager's)
        return ("error", type(e), str(e).splitlines()[0][:160])
    outs = out if isinstance(out, tuple) else (out,)
    loss = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad and o.numel() == 1]
    if loss:
        loss[0].backward()
    return ("ok", [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs])


def _same(a, b):
    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return f"{type(a)} vs {type(b)}"
    if not isinstance(a, torch.Tensor):
        return None if a == b else f"{a} vs {b}"
    if a.device != b.device or a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.device}/{a.dtype}/{tuple(a.shape)} vs {b.device}/{b.dtype}/{tuple(b.shape)}"
    if not torch.allclose(a.cpu(), b.cpu(), rtol=1e-5, atol=1e-6, equal_nan=True):
        return f"values {a.cpu()} vs {b.cpu()}"
    return None


def main():
    bad = 0
    only = sys.argv[1:]
    for name, (fn, make) in cases().items():
        if only and not any(o in name for o in only):
            continue
        torch._dynamo.reset()
        torch.manual_seed(0)
        base = make()
        ref_args = [_leaf(a, a.requires_grad) if isinstance(a, torch.Tensor) else a for a in base]
        got_args = [_leaf(a, a.requires_grad) if isinstance(a, torch.Tensor) else a for a in base]
        ref = _run(fn, ref_args)
        try:
            got = _run(torch.compile(fn, backend="xla"), got_args)
        except Exception:  # noqa: BLE001 (reported as a mismatch)
            got = ("crash", traceback.format_exc()[-300:])
        problems = []
        if ref[0] != got[0]:
            problems.append(f"eager {ref[0]} {ref[2] if ref[0] == 'error' else ''} / ours {got}")
        elif ref[0] == "error":
            if not issubclass(got[1], ref[1]):
                problems.append(
                    f"error type {got[1].__name__} vs eager's {ref[1].__name__}: {got[2]}"
                )
        else:
            for i, (a, b) in enumerate(zip(got[1], ref[1])):
                p = _same(a, b)
                if p:
                    problems.append(f"output {i}: {p}")
        for i, (a, b) in enumerate(zip(got_args, ref_args)):
            if isinstance(a, torch.Tensor):
                p = _same(a.detach(), b.detach())
                if p:
                    problems.append(f"argument {i} after the call: {p}")
                if (a.grad is None) != (b.grad is None):
                    problems.append(
                        f"argument {i} grad None-ness: ours {a.grad is None}, eager {b.grad is None}"
                    )
                elif a.grad is not None:
                    p = _same(a.grad, b.grad)
                    if p:
                        problems.append(f"argument {i} grad: {p}")
        bad += bool(problems)
        print(
            ("FAIL " if problems else "ok   ") + name + ("".join("\n     " + p for p in problems)),
            flush=True,
        )
    print(f"{bad} mismatching case(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
