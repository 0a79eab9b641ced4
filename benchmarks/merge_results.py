"""Merge suite runs fetched from the GPU machine into the committed results.

    python benchmarks/merge_results.py SRC.json [SRC.json ...] --note "session N run at abc1234"
        [--into benchmarks/results/cuda.json]

Each run of the sources replaces the run of the same (case, task, dtype) in ``--into`` and gets
``--note``; the machine description becomes the sources' (rows keep their own notes). Then
``python benchmarks/report.py`` rewrites docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def merge(into: dict, sources: list[dict], note: str) -> list[tuple[str, str, str]]:
    """``into`` with the runs of ``sources`` in place of its runs of the same key; the keys
    replaced or added."""
    new = {}
    for src in sources:
        for run in src["runs"]:
            new[(run["case"], run["task"], run["dtype"])] = {**run, "note": note}
        into["machine"] = {**src["machine"], "torch2xla_commit": "see each row"}
    keys = list(new)
    runs = [
        new.pop(key, run)
        for run in into["runs"]
        for key in [(run["case"], run["task"], run["dtype"])]
    ]
    into["runs"] = runs + list(new.values())
    return keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", type=pathlib.Path)
    parser.add_argument("--note", required=True)
    parser.add_argument("--into", type=pathlib.Path, default=HERE / "results" / "cuda.json")
    args = parser.parse_args()
    into = json.loads(args.into.read_text())
    keys = merge(into, [json.loads(p.read_text()) for p in args.sources], args.note)
    args.into.write_text(json.dumps(into, indent=1))
    print(f"{args.into}: {len(keys)} runs merged: " + ", ".join(":".join(k) for k in keys))


if __name__ == "__main__":
    main()
