"""Per-call overhead of a tiny compiled function: eager, inductor and xla in one run.

    python benchmarks/overhead.py [--rounds 15] [--calls 2000] [--json benchmarks/results/overhead.json]

One thread for torch and XLA, modes interleaved in a shuffled order every round, medians over
rounds. The function works on 8 floats, so its time is the framework's per-call overhead. Two
floors are measured alongside: ``identity`` (a backend that runs the captured graph as it is:
the cost of Dynamo's frame guards and graph call, which every backend pays) and ``jax.jit`` (the
same arithmetic as a jitted JAX function on JAX arrays: the cost of JAX's dispatch alone). A tiny
training step (Linear(8, 8), forward and backward) shows the overhead of the autograd path, and
``--breakdown`` times the pieces of xla's call. Beside the times, a count that load does not
change: the Python calls of one steady call (``sys.setprofile``'s ``call`` and ``c_call``
events, Dynamo's included), and those of torch2xla's own code.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import types

_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]  # (this checkout's torch2xla, not an installed one)
import _common
import torch

import torch2xla


def _tiny(x, y):
    return x * y + 1


def _fresh_tiny():
    """``_tiny`` as a function of its own code object: Dynamo keeps its compiled entries per code
    object, so a function compiled with another backend adds no entry to ``_tiny``'s."""
    return types.FunctionType(_tiny.__code__.replace(), globals(), "tiny")


def _identity(gm, example_inputs):
    return gm.forward


def _compile(fn, mode: str):
    if mode == "identity":
        return torch.compile(fn, backend=_identity)
    return _common.compile_fn(fn, mode)


def python_calls(step) -> tuple[int, int]:
    """Python calls of one call of ``step`` (function and builtin calls, ``sys.setprofile``):
    all, and those of torch2xla's code (frames in its package, builtins they call)."""
    root = str(pathlib.Path(torch2xla.__file__).parent)
    counts = [0, 0]

    def profile(frame, event, arg):
        if event == "call" or event == "c_call":
            counts[0] += 1
            counts[1] += frame.f_code.co_filename.startswith(root)

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return counts[0] - 1, counts[1]  # (less the setprofile(None) call itself)


def inference_steps(device: str) -> dict:
    x, y = torch.randn(8, device=device), torch.randn(8, device=device)
    fns = {mode: _compile(_tiny, mode) for mode in (*_common.MODES, "identity")}
    steps = {name: (lambda f=f: f(x, y)) for name, f in fns.items()}

    import jax
    import jax.numpy as jnp

    jx, jy = jnp.asarray(x.cpu().numpy()), jnp.asarray(y.cpu().numpy())
    jitted = jax.jit(lambda a, b: a * b + 1)
    # back to back as the other modes (the last result awaited), and awaited every call
    steps["jax.jit"] = lambda: jitted(jx, jy)
    steps["jax.jit, each awaited"] = lambda: jitted(jx, jy).block_until_ready()
    return steps


def training_steps(device: str) -> dict:
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 8).to(device)
    x = torch.randn(4, 8, device=device)
    steps = {}
    for mode in (*_common.MODES, "identity"):
        model = torch.nn.Linear(8, 8).to(device)
        model.load_state_dict(base.state_dict())
        fn = _compile(model, mode)

        def step(fn=fn, model=model):
            model.zero_grad(set_to_none=True)
            fn(x).sum().backward()

        steps[mode] = step
    return steps


def breakdown(device: str, calls: int, rounds: int, clock=time.perf_counter) -> dict[str, float]:
    """Microseconds per call of each piece of xla's call path on the tiny function, and of the
    training step's forward and backward. On the CPU, three floors beside them: Dynamo's frame
    around a backend that returns a list it holds (no work at all), the executable's steady
    call and the output's conversion with none of our bookkeeping, alone and as a backend
    (what no Python of ours could go below), and ``CompiledGraph`` right after an eager op,
    against the two apart (a call costs more after other code than back to back: its code
    and data leave the caches)."""
    from torch2xla import xla_backend
    from torch2xla.runtime import _program
    from torch2xla.runtime._jax_scope import x64

    torch._dynamo.reset()  # compile afresh, so that the program is built (and captured) here
    # (a program restored from the persistent cache is no XlaProgram: built here, it is; the
    # cache stays off for the rest of the process, which measures nothing after this)
    torch2xla.set_persistent_cache(None)
    programs = []
    original = _program.XlaProgram.__init__

    def capture(self, *a, **kw):
        original(self, *a, **kw)
        programs.append(self)

    _program.XlaProgram.__init__ = capture
    graphs = []

    def capture_graph(gm, example_inputs, **kwargs):
        graph = xla_backend(gm, example_inputs, **kwargs)
        graphs.append(graph)
        return graph

    try:
        x, y = torch.randn(8, device=device), torch.randn(8, device=device)
        compiled = torch.compile(_tiny, backend=capture_graph)
        with torch.no_grad():
            compiled(x, y), compiled(x, y)
    finally:
        _program.XlaProgram.__init__ = original
    (program,) = programs
    (graph,) = graphs
    args = (x, y)
    with x64():
        views = program.jax_inputs(args)
        out = program._infer(None, *views)[0]

    def executable_call():  # what XlaProgram.__call__ runs: contexts only for scoped programs
        if program.scoped:
            with x64(), program.placement():
                return program._infer(None, *views)
        return program._infer(None, *views)

    pieces = {
        "torch.compile call (all)": lambda: compiled(x, y),
        "CompiledGraph (key, cache, entry)": lambda: graph(x, y),
        "XlaProgram.__call__": lambda: program(args),
        "jax_inputs (cached views)": lambda: program.jax_inputs(args),
        "x64 + device contexts (64-bit programs only)": lambda: _enter_contexts(program.device),
        "executable call (Compiled)": executable_call,
        "to_torch (1 output)": lambda: program.to_torch(out),
    }
    with torch.no_grad():
        pieces.update(_floors(program, x, y, graph))
        times = _common.interleaved(pieces, rounds, calls, device, clock=clock)
    result = {k: _common.summary(v)["median"] * 1e6 for k, v in times.items()}

    # The training step of training_steps, in two parts.
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8).to(device)
    fn = torch.compile(model, backend="xla")
    xt = torch.randn(4, 8, device=device)

    def step():
        model.zero_grad(set_to_none=True)
        fn(xt).sum().backward()

    # The same step with Dynamo's frame left out: the graph xla_backend returned, called with
    # the arguments Dynamo passes it (recorded once, on a second copy of the model).
    twin = torch.nn.Linear(8, 8).to(device)
    twin.load_state_dict(model.state_dict())
    graphs.clear()
    recorded: list = []

    def record_args(gm, example_inputs, **kwargs):
        graph = capture_graph(gm, example_inputs, **kwargs)

        def call(*args):
            recorded.append(args)
            return graph(*args)

        return call

    torch.compile(twin, backend=record_args)(xt)
    twin_graph, twin_args = graphs[0], recorded[0]

    def step_without_dynamo():
        twin.zero_grad(set_to_none=True)
        twin_graph(*twin_args)[0].sum().backward()

    for _ in range(3):
        step()
        step_without_dynamo()
    pieces = {"forward": lambda: fn(xt), "step": step, "graph step": step_without_dynamo}
    times = _common.interleaved(pieces, rounds, max(calls // 4, 50), device, clock=clock)
    fwd, whole, graph_step = (
        _common.summary(times[k])["median"] * 1e6 for k in ("forward", "step", "graph step")
    )
    result["training: forward call (grad on)"] = fwd
    result["training: zero_grad, sum, backward (step - forward)"] = whole - fwd
    result["training: step without Dynamo's frame (graph called directly)"] = graph_step
    return result


def _floors(program, x, y, graph) -> dict:
    """``breakdown``'s floors (see there), for a CPU program whose steady call runs (else
    none)."""
    fast = program._views._fast
    steady = getattr(fast, "trusted", None)
    if program._cuda or not steady:
        return {}
    views, run, handlers, to_torch = fast.views, steady.run, steady.handlers, program.to_torch

    def bare(*args):  # (the executable on the cached views, the output converted: no checks)
        return list(map(to_torch, run(views).consume_with_handlers(handlers)))

    held = [torch.randn(8)]
    nothing = torch.compile(_fresh_tiny(), backend=lambda gm, example_inputs: lambda *a: held)
    floor = torch.compile(_fresh_tiny(), backend=lambda gm, example_inputs: bare)
    nothing(x, y), floor(x, y)

    def after_eager():
        _tiny(x, y)
        graph(x, y)

    return {
        "floor: Dynamo's frame, a backend doing nothing": lambda: nothing(x, y),
        "floor: executable + to_torch, bare": lambda: bare(x, y),
        "floor: executable + to_torch as the backend": lambda: floor(x, y),
        "eager x * y + 1": lambda: _tiny(x, y),
        "eager x * y + 1, then CompiledGraph": after_eager,
    }


def profile_xla(device: str, calls: int) -> str:
    """cProfile of ``calls`` steady calls of xla's compiled tiny function, functions sorted by
    their own time: where a call's host time goes, ours and JAX's."""
    import cProfile
    import io
    import pstats

    x, y = torch.randn(8, device=device), torch.randn(8, device=device)
    fn = _compile(_tiny, "xla")
    with torch.no_grad():
        for _ in range(20):
            fn(x, y)
        _common.sync(device)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fn(x, y)
        _common.sync(device)
        prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO()).stats
    rows = []
    for (path, line, name), (_, ncalls, own, cum, _) in stats.items():
        where = f"{pathlib.Path(path).name}:{line}({name})" if line else name
        rows.append((own / calls * 1e6, cum / calls * 1e6, ncalls / calls, where))
    lines = [
        f"{calls} steady calls of xla's x * y + 1 on {device} (cProfile; µs per compiled call)",
        f"{'own':>8s} {'cumul.':>8s} {'calls':>6s}  function",
    ]
    for key, title in ((0, "by own time"), (1, "by cumulative time")):
        lines.append(f"-- {title}")
        for own, cum, n, where in sorted(rows, key=lambda r: -r[key])[:35]:
            lines.append(f"{own:8.2f} {cum:8.2f} {n:6.1f}  {where}")
    return "\n".join(lines) + "\n"


def _enter_contexts(device) -> None:
    import jax

    from torch2xla.runtime._jax_scope import x64

    with x64(), jax.default_device(device):
        pass


def measure(device: str, rounds: int, calls: int, clock=time.perf_counter) -> dict:
    result = {"machine": _common.machine(), "device": device, "rounds": rounds, "calls": calls}
    result["clock"] = clock.__name__
    with torch.no_grad():
        steps = inference_steps(device)
        for step in steps.values():  # compile and warm up
            for _ in range(3):
                step()
        times = _common.interleaved(steps, rounds, calls, device, clock=clock)
        result["inference_calls"] = {k: python_calls(v) for k, v in steps.items()}
    result["inference_us"] = {k: _us(v) for k, v in times.items()}
    steps = training_steps(device)
    for step in steps.values():
        for _ in range(3):
            step()
    times = _common.interleaved(steps, rounds, max(calls // 4, 50), device, clock=clock)
    result["training_us"] = {k: _us(v) for k, v in times.items()}
    result["training_calls"] = {k: python_calls(v) for k, v in steps.items()}
    return result


def _us(samples: list[float]) -> dict[str, float]:
    return {k: round(v * 1e6, 2) for k, v in _common.summary(samples).items()}


def report(result: dict) -> str:
    inf, tr = result["inference_us"], result["training_us"]
    counts = (result.get("inference_calls", {}), result.get("training_calls", {}))
    lines = [
        (
            f"per-call overhead on {result['device']} ({result['rounds']} interleaved rounds of "
            f"{result['calls']} calls, 1 thread, {result.get('clock', 'perf_counter')}), "
            "microseconds, median [q1, q3]; Python calls of one call (all / torch2xla's)"
        ),
        f"{'':10s} {'inference':>22s} {'calls':>9s} {'training step':>22s} {'calls':>9s}",
    ]
    for mode in ("eager", "inductor", "xla", "identity", "jax.jit", "jax.jit, each awaited"):
        cells = []
        for table, count in zip((inf, tr), counts):
            s = table.get(mode)
            cells.append(f"{s['median']:8.1f} [{s['q1']:.1f}, {s['q3']:.1f}]" if s else "-")
            c = count.get(mode)
            cells.append(f"{c[0]} / {c[1]}" if c else "-")
        lines.append(f"{mode:22s} {cells[0]:>22s} {cells[1]:>9s} {cells[2]:>22s} {cells[3]:>9s}")
    lines.append(
        f"xla / inductor: inference {inf['xla']['median'] / inf['inductor']['median']:.2f}x, "
        f"training {tr['xla']['median'] / tr['inductor']['median']:.2f}x; "
        f"xla / eager training {tr['xla']['median'] / tr['eager']['median']:.2f}x; "
        f"xla - identity: inference {inf['xla']['median'] - inf['identity']['median']:.1f} us, "
        f"training {tr['xla']['median'] - tr['identity']['median']:.1f} us"
    )
    if "breakdown_us" in result:
        lines.append("xla call, piece by piece (median us):")
        lines += [f"  {k:48s} {v:6.2f}" for k, v in result["breakdown_us"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this core")
    parser.add_argument("--breakdown", action="store_true", help="time the pieces of xla's call")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write results here")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the process's CPU time (time.process_time), not the wall clock: on a "
        "loaded machine it is less changed by other processes (CPU device only)",
    )
    parser.add_argument(
        "--profile",
        type=pathlib.Path,
        default=None,
        help="write a cProfile of xla's steady calls of the tiny function here (by own time)",
    )
    args = parser.parse_args(argv)
    _common.one_thread(args.cpu)
    clock = time.process_time if args.cpu_time else time.perf_counter
    result = measure(args.device, args.rounds, args.calls, clock)
    if args.breakdown:
        result["breakdown_us"] = breakdown(args.device, args.calls, args.rounds, clock)
    if args.profile:
        args.profile.parent.mkdir(parents=True, exist_ok=True)
        args.profile.write_text(profile_xla(args.device, args.calls))
    print(report(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
