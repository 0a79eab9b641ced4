"""Sweep the probes with the persistent cache on, cold then warm: every signature a warm
process restores from a record must behave exactly as the one compiled fresh (values,
gradients, errors, autograd metadata), which each probe compares with eager.

    PYTHONPATH=. python scripts/probe_pcache.py [probe.py ...] [-- substring ...]

Each probe (default: ``probe_autograd*.py``, ``probe_userprog.py``, ``probe_views.py``,
``probe_semantics.py``) runs in two processes on one fresh cache directory: the cold one
writes the records, the warm one is served by them. Prints, per probe, the scenarios whose
warm line differs from the cold one (``WARM``: a restored signature behaves otherwise than
the fresh one) and those that differ from eager in both (``BOTH``: not the cache's), then
how many graphs the warm process restored.
"""

from __future__ import annotations

import glob
import os
import re
import runpy
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT = [
    *sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "probe_autograd*.py"))),
    "probe_userprog.py",
    "probe_views.py",
    "probe_semantics.py",
]
_LINE = re.compile(r"^(ok|DIFF|CRASH)\s+(\S+?):?(\s|$)")


def child(probe: str, argv: list[str]) -> None:
    """Run ``probe`` in this process (the persistent cache on), then say how many signatures
    it restored from records."""
    sys.path[:0] = [HERE, ROOT]
    from torch2xla.guards import _persistent

    sys.argv = [probe, *argv]
    try:
        runpy.run_path(os.path.join(HERE, probe), run_name="__main__")
    except SystemExit:
        pass
    print(f"HITS {_persistent.hits()}", flush=True)


def _run(probe: str, cache: str, argv: list[str]) -> tuple[dict[str, str], str]:
    env = dict(os.environ, TORCH2XLA_PERSISTENT_CACHE="1", TORCH2XLA_CACHE_DIR=cache)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", probe, *argv],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    lines, hits = {}, "?"
    for line in proc.stdout.splitlines():
        m = _LINE.match(line)
        if m:
            lines[m.group(2)] = line
        elif line.startswith("HITS "):
            hits = line.split()[1]
    if proc.returncode:
        lines["<process>"] = f"CRASH exit {proc.returncode}: {proc.stderr.strip()[-400:]}"
    return lines, hits


def sweep(probe: str, argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as cache:
        cold, _ = _run(probe, cache, argv)
        warm, hits = _run(probe, cache, argv)
    bad = 0
    for name in sorted(set(cold) | set(warm)):
        c, w = cold.get(name, "(missing)"), warm.get(name, "(missing)")
        if c.split()[0] != w.split()[0] or (not w.startswith("ok") and c != w):
            bad += 1
            print(f"WARM  {probe} {name}\n   cold: {c}\n   warm: {w}", flush=True)
        elif not w.startswith("ok"):
            print(f"BOTH  {probe} {w}", flush=True)
    print(f"{probe}: {len(warm)} scenarios, {bad} differ warm, {hits} restored", flush=True)
    return bad


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(argv[1], argv[2:])
        return 0
    sub = argv.index("--") if "--" in argv else len(argv)
    probes, wanted = argv[:sub] or DEFAULT, argv[sub + 1 :]
    bad = sum(sweep(p, wanted) for p in probes)
    print(f"{bad} scenario(s) differ warm")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
