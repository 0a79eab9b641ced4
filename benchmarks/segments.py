"""How the split backward's number of segments costs time: one suite row's xla training step
built once per way of cutting the backward, in one process, timed interleaved (the order
shuffled every round), with each variant's segment count (peaks: ``suite.py --memory-only``).
Issue 25: this host's noise across machine starts (20-37 ms for one ResNet-50 step) is larger
than the differences, so variants are only compared within one call.

    python benchmarks/segments.py --case resnet50 --dtype fp32 --rounds 9

Variants: ``one`` (``split_backward=False``), ``auto`` (today's policy) and ``atmost2`` (the
``auto`` cut limited to two segments with no bound on the residuals one segment frees, plus
the halved first segment where it holds the peak) and ``half`` (at most half the residuals
per segment, the fewest segments within 3% of the residuals of the lowest estimated peak);
``--variants`` picks among them (at most one of ``atmost2`` and ``half`` per cache directory).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common
import suite


@contextlib.contextmanager
def _at_most(segments: int):
    """While compiling: ``cuts_for_peak`` for at most ``segments`` segments, uncapped."""
    from torch2xla.autodiff import _segments

    cls = _segments._Usage
    original = cls.cuts_for_peak

    def cuts(self, max_segments):
        self.cap = self.alive_from[0]
        return original(self, segments)

    cls.cuts_for_peak = cuts
    try:
        yield
    finally:
        cls.cuts_for_peak = original


@contextlib.contextmanager
def _usage(cap: float, slack: float):
    """While compiling: ``auto``'s cut with another cap and slack (fractions of the residuals)."""
    from torch2xla.autodiff import _segments

    cls = _segments._Usage
    saved = cls.CAP, cls.SLACK
    cls.CAP, cls.SLACK = cap, slack
    try:
        yield
    finally:
        cls.CAP, cls.SLACK = saved


# name -> (split_backward option, context active during the first call)
VARIANTS = {
    "one": (False, contextlib.nullcontext),
    "auto": ("auto", contextlib.nullcontext),
    # True is ``auto``'s schedule on the GPU: a distinct option, so no cache mixes the two
    # (time at most one of the variants with True per persistent cache directory)
    "atmost2": (True, lambda: _at_most(2)),
    # half the residuals per segment at most, fewer segments within 3% of the lowest peak
    "half": (True, lambda: _usage(1 / 2, 3 / 100)),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="resnet50")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--memory",
        default=None,
        help="only this variant's steady step peak (suite.memory_only); run it after a timing "
        "process filled the persistent cache, so that no autotuning scratch counts",
    )
    args = parser.parse_args(argv)
    import torch2xla  # noqa: F401  (the backend)
    from torch2xla.autodiff import _split

    if args.memory:
        option, during = VARIANTS[args.memory]
        with during():
            mem = suite.memory_only(
                args.case, "train", args.dtype, args.device, {"split_backward": option}
            )
        print(json.dumps({"case": args.case, "dtype": args.dtype, args.memory: mem}))
        return

    base, inputs, loss_fn, autocast = suite._setup(args.case, args.dtype, args.device)
    steps, result = {}, {"case": args.case, "dtype": args.dtype, "variants": {}}
    calls: list[int] = []
    original_call = _split.SplitBackward.__call__

    def counting(self, kept, inputs_, cts):
        run = original_call(self, kept, inputs_, cts)
        calls.append(run.n_segments)
        return run

    _split.SplitBackward.__call__ = counting
    for name in args.variants.split(","):
        option, during = VARIANTS[name]
        step, first = suite._make_step(
            copy.deepcopy(base),
            "xla",
            "train",
            inputs,
            loss_fn,
            autocast,
            args.device,
            compile_kw={"options": {"split_backward": option}},
        )
        calls.clear()
        t0 = time.perf_counter()
        with during():
            first()
            _common.sync(args.device)
        first_s = time.perf_counter() - t0
        for _ in range(3):
            step()
        _common.sync(args.device)
        segments = calls[-1] if calls else 1
        steps[name] = step
        result["variants"][name] = {"first_s": round(first_s, 2), "segments": segments}
    times = _common.interleaved(steps, args.rounds, args.steps, args.device)
    for name, samples in times.items():
        s = _common.summary(samples)
        result["variants"][name].update(
            {k: round(v * 1e3, 2) for k, v in s.items()}
            | {"samples_ms": [round(t * 1e3, 2) for t in samples]}
        )
    result["machine"] = _common.machine()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
