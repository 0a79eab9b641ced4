"""Run by test_pcache_s21.py in a fresh process (the persistent cache on, at
``TORCH2XLA_CACHE_DIR``): each scenario once in eager and once compiled, what it observes
compared strictly. Prints one JSON line: per scenario, the first difference (None: none),
and the number of signatures restored from records.

    python tests/_pcache_worker.py [scenario ...]

A scenario ``fn(C)`` returns a list of tensors (or an error it raised, as its last item);
``C(f)`` is ``f`` in the eager run and ``torch.compile(f, backend="xla")`` in the other.
Each builds what its record does not hold after the forward, under other torch state than
the forward's (a backward that keeps the graph runs with grad mode off, outside autocast,
after the default dtype changed back; a ``create_graph`` backward differentiates the graph).
"""

from __future__ import annotations

import json
import sys
import traceback

import torch
from torch import nn

from torch2xla.guards import _persistent

SCENARIOS: dict = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def leaf(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).requires_grad_()


@scenario
def two_heads_detach(C):
    # the first backward keeps the graph for the second head's
    torch.manual_seed(0)
    trunk, h1, h2 = nn.Linear(4, 4), nn.Linear(4, 2), nn.Linear(4, 2)

    def f(x):
        return h1(trunk(x).detach()), h2(x)

    x = leaf(3, 4)
    a, b = C(f)(x)
    a.sum().backward()
    b.sum().backward()
    return [x.grad, *[p.grad for m in (trunk, h1, h2) for p in m.parameters()]]


@scenario
def no_grad_region_retained(C):
    def f(x, w):
        h = x * w
        with torch.no_grad():
            s = h.exp().sum()
        return (h.sin() * s).sum()

    x, w = leaf(5), leaf(5, seed=1)
    out = C(f)(x, w)
    out.backward(retain_graph=True)
    g1 = [x.grad.clone(), w.grad.clone()]
    out.backward()
    return [*g1, x.grad, w.grad]


@scenario
def data_write_retained(C):
    # a write into .data that autograd does not record: gradients as of the old value
    def f(x, w):
        h = x * w
        h.data.mul_(2)
        return (h * x).sum()

    x, w = leaf(4), leaf(4, seed=1)
    out = C(f)(x, w)
    out.backward(retain_graph=True)
    out.backward()
    return [out, x.grad, w.grad]


@scenario
def autocast_forward_retained(C):
    # the forward under autocast, its backward outside
    def f(x, w):
        return (x @ w).relu().sum()

    x, w = leaf(4, 8), leaf(8, 3, seed=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = C(f)(x, w)
    out.backward(retain_graph=True)
    out.backward()
    return [out, x.grad, w.grad]


@scenario
def default_dtype_retained(C):
    # a factory that follows the default dtype, which is back to float32 at the backward
    def f(x):
        return (x * torch.arange(4.0) + torch.full((4,), 0.1)).sin().sum()

    x = leaf(4, dtype=torch.float64)
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out = C(f)(x)
    finally:
        torch.set_default_dtype(saved)
    out.backward(retain_graph=True)
    out.backward()
    return [out, x.grad]


@scenario
def detach_double_backward(C):
    def f(x):
        return (x.sin() * x.detach().cos()).sum()

    x = leaf(4)
    out = C(f)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)
    g.sum().backward()
    return [out, g, x.grad]


def _observe(fn, compiled: bool) -> list:
    def C(f):
        return torch.compile(f, backend="xla") if compiled else f

    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        return list(fn(C))
    except Exception as e:
        return [e]


def _difference(got: list, exp: list) -> str | None:
    if len(got) != len(exp):
        return f"{len(got)} observations vs {len(exp)}: {got[-1]!r} / {exp[-1]!r}"
    for i, (g, e) in enumerate(zip(got, exp)):
        if isinstance(e, BaseException) or isinstance(g, BaseException):
            if type(g) is not type(e) or str(e).split("\n")[0] not in str(g):
                return f"[{i}] {g!r} vs {e!r}"
            continue
        if (g is None) != (e is None):
            return f"[{i}] None-ness {g is None} vs {e is None}"
        if g is None:
            continue
        if (g.dtype, g.shape, g.requires_grad) != (e.dtype, e.shape, e.requires_grad):
            return f"[{i}] {g.dtype} {tuple(g.shape)} {g.requires_grad} vs {e.dtype} ..."
        # (float32 round-off of the same ops fused otherwise; bfloat16: eager's own casts)
        tol = 2e-2 if g.dtype == torch.bfloat16 else 1e-5
        if not torch.allclose(g.detach(), e.detach(), rtol=tol, atol=tol):
            return f"[{i}] values {g} vs {e}"
    return None


def main(names: list[str]) -> None:
    diffs = {}
    for name in names or SCENARIOS:
        try:
            diffs[name] = _difference(
                _observe(SCENARIOS[name], True), _observe(SCENARIOS[name], False)
            )
        except Exception:
            diffs[name] = traceback.format_exc()[-2000:]
    print(json.dumps({"diffs": diffs, "restored": _persistent.hits()}))


if __name__ == "__main__":
    main(sys.argv[1:])
