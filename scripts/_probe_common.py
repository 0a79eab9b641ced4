"""The harness the probes share (each probe keeps its own ``describe``/``same``, what it
observes and how strictly it compares):

- ``describe(v)``: an observation without strides: ``("T", dtype, shape, values)``,
  ``("L", container, items)``, ``("E", type, first line, message)`` or ``("V", value)``.
- ``same_items``/``same_error_or_value``: ``same``'s branches for containers, errors and
  plain values.
- ``observations(fn, C, describe)``: what a scenario ``fn(C, rec)`` records, ``C`` compiling
  or not; an error ends it, recorded as the observation ``raised``.
- ``difference(got, exp, same)``: the first observation that differs, in words, or None.
- ``run(argv, table, compare)``: a probe's ``main``, one line per case whose name contains
  one of the substrings in ``argv`` (every case without), then ``n/m ok``.
- ``r``/``ri``: seeded float and integer inputs.
"""

from __future__ import annotations

import traceback

import torch


def describe(v):
    if isinstance(v, torch.Tensor):
        return ("T", v.dtype, tuple(v.shape), v.detach().clone())
    if isinstance(v, (list, tuple)):
        return ("L", type(v).__name__, [describe(x) for x in v])
    if isinstance(v, BaseException):
        return ("E", type(v), str(v).strip().split("\n")[0][:160], str(v))
    return ("V", v)


def same_items(a, b, path, same) -> str | None:
    """Two ``L`` observations: the same container and length, items compared by ``same``."""
    if a[1] != b[1] or len(a[2]) != len(b[2]):
        return f"{path}: container {a[1]}[{len(a[2])}] vs {b[1]}[{len(b[2])}]"
    for i, (x, y) in enumerate(zip(a[2], b[2])):
        d = same(x, y, f"{path}[{i}]")
        if d:
            return d
    return None


def same_error_or_value(a, b, path) -> str | None:
    """Two ``E`` observations (ours may be a subclass of eager's error, as OpIndexError is an
    IndexError and a RuntimeError; eager's message starts ours) or two ``V`` (NaN is NaN)."""
    if a[0] == "E":
        if not issubclass(a[1], b[1]):
            return f"{path}: error {a[1].__name__}: {a[2]} (xla) vs {b[1].__name__}: {b[2]} (eager)"
        if b[2][:50] not in a[3]:
            return f"{path}: MSG {a[1].__name__}: {a[2]!r} (xla) vs {b[2]!r} (eager)"
        return None
    if a[1] != b[1] and not (a[1] != a[1] and b[1] != b[1]):
        return f"{path}: {a[1]!r} vs {b[1]!r}"
    return None


def observations(fn, C, describe, obs: list | None = None) -> list:
    """``obs`` (a new list unless given) filled with ``(label, describe(value))`` for every
    ``rec(label, value)`` of ``fn(C, rec)``, after a fresh Dynamo and seed."""
    obs = [] if obs is None else obs

    def rec(label, value):
        obs.append((label, describe(value)))

    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        fn(C, rec)
    except Exception as e:  # noqa: BLE001  (the error is an observation)
        obs.append(("raised", describe(e)))
    return obs


def difference(got: list, exp: list, same) -> str | None:
    """The first of the compiled observations ``got`` that differs from eager's ``exp``
    (label, then ``same(g, e, label)``), or their number."""
    for (lg, g), (le, e) in zip(got, exp):
        if lg != le:
            return f"observation {lg!r} {g[1:3]} (xla) vs {le!r} {e[1:3]} (eager)"
        d = same(g, e, lg)
        if d:
            return d
    if len(got) != len(exp):
        return f"observations {[x for x, _ in got]} vs {[x for x, _ in exp]}"
    return None


def run(argv: list[str], table: dict, compare) -> int:
    names = [n for n in table if not argv or any(a in n for a in argv)]
    bad = 0
    for n in names:
        try:
            line = compare(n, table[n])
        except Exception:  # noqa: BLE001  (a failure of the probe itself)
            line = f"CRASH {n}: {traceback.format_exc().strip().splitlines()[-1]}"
        if not line.startswith("ok"):
            bad += 1
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return 0


def r(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def ri(*shape, lo=-5, hi=6, seed=0, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)
