"""Where a compiled training step's time goes (issue 24 item 3): floors under xla's step.

    OMP_NUM_THREADS=1 taskset -c 0 python scripts/probe_trainstep.py [--rounds 15]

The step is ``benchmarks/overhead.py``'s: Linear(8, 8) on a (4, 8) input, ``zero_grad``, the
forward, ``.sum().backward()``. Timed interleaved in one process (shuffled every round, medians
of CPU time per step), five ways that each add one layer:

- ``eager``: no compile.
- ``identity``: Dynamo's frame, the captured graph run as it is (eager autograd).
- ``function``: Dynamo's frame and an ``autograd.Function`` computing the same in torch ops
  (the node torch2xla's programs are run through; its backward under ``torch.compiler.disable``
  as ours is).
- ``executables``: the same node running only what xla's steady step cannot do without: the
  inputs' cached views, the forward's and the backward's XLA executables (xla's own, taken from
  a compiled model), the output's and the gradients' conversions to torch, the cotangent's view.
- ``xla``: ``torch.compile(backend="xla")``.

``executables - function`` is what the two XLA executions and the conversions cost inside a
training step (far more than the same calls in a loop of their own: the step's code evicts
theirs); ``xla - executables`` is torch2xla's own Python around them.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

import torch2xla  # noqa: F401
from torch2xla.runtime._interop import ViewCache, host_view
from torch2xla.runtime._program import XlaProgram


def _program_of(model: torch.nn.Module, x: torch.Tensor):
    """A compiled model's XlaProgram, once its steady training step ran."""
    fn = torch.compile(model, backend="xla")
    for _ in range(5):
        model.zero_grad(set_to_none=True)
        fn(x).sum().backward()
    seen = []
    original = XlaProgram.__call__

    def spy(self, args, *rest):
        seen.append(self)
        return original(self, args, *rest)

    XlaProgram.__call__ = spy
    try:
        fn(x)
    finally:
        XlaProgram.__call__ = original
    return seen[0]


def _function_floor() -> type:
    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w, b, x):
            ctx.save_for_backward(x)
            return torch.addmm(b, x, w.t())

        @staticmethod
        @torch.compiler.disable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g.t() @ x, g.sum(0), None

    return Linear


def _executables_floor(program) -> type:
    (plan,) = program.plans.values()
    forward, held, _ = plan.steady  # (the forward executable's C++ call)
    backward = plan.steady_bwd
    packing, convert, cut = plan.fns.bwd.packing, plan.convert, plan.cut
    cache = ViewCache(3, writes=False)
    if plan.steady is False or backward is None or tuple(held) != (2,):
        raise SystemExit("xla's step is not the steady one this probe knows (CPU, one program)")

    class Executables(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w, b, x):
            views = cache((w, b, x))[0]
            douts, _, kept = forward(None, views[:2], views[2:])
            ctx.res = (kept, views[2:])
            ctx.materialize_grads = False
            return convert(douts[0])

        @staticmethod
        @torch.compiler.disable
        def backward(ctx, g):
            kept, inputs = ctx.res
            gw, gb = packing.unpack(backward(kept, inputs, [host_view(g)]), convert, cut)
            return gw, gb, None

    return Executables


def _node_backend(function: type):
    def backend(gm, example_inputs):
        return lambda *args: [function.apply(*args)]

    return backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    base = torch.nn.Linear(8, 8)
    program = _program_of(base, x)
    backends = {
        "eager": None,
        "identity": lambda gm, example_inputs: gm.forward,
        "function": _node_backend(_function_floor()),
        "executables": _node_backend(_executables_floor(program)),
        "xla": "xla",
    }
    steps, grads = {}, {}
    for name, backend in backends.items():
        model = torch.nn.Linear(8, 8)
        model.load_state_dict(base.state_dict())
        fn = model if backend is None else torch.compile(model, backend=backend)

        def step(model=model, fn=fn):
            model.zero_grad(set_to_none=True)
            fn(x).sum().backward()

        for _ in range(20):
            step()
        steps[name], grads[name] = step, model
    for name, model in grads.items():  # (every floor computes eager's gradients)
        torch.testing.assert_close(model.weight.grad, grads["eager"].weight.grad)
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.rounds):
        for name in random.sample(list(steps), len(steps)):
            step = steps[name]
            t0 = time.process_time()
            for _ in range(args.steps):
                step()
            times[name].append((time.process_time() - t0) / args.steps * 1e6)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("training step, CPU us per step (median of rounds), and the layer each adds")
    previous = None
    for name, us in med.items():
        added = "" if previous is None else f"  (+{us - med[previous]:.1f} over {previous})"
        print(f"  {name:12s} {us:7.1f}{added}")
        previous = name
    print(f"  xla / eager {med['xla'] / med['eager']:.2f}x")


if __name__ == "__main__":
    main()
