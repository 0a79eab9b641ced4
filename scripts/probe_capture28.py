"""Probe (session 28, GPU): can one XLA executable's run be captured into a torch CUDA graph?

The idea: torch begins a stream capture; the import of the inputs into JAX makes JAX's
external-ready stream wait on an event of the capturing stream (so that stream, and XLA's
compute stream behind it, join the capture); the export of the outputs makes the capturing stream
wait on XLA's definition events (joining them back). If that holds, a steady call is one graph
replay. What could break it: XLA querying or synchronizing on a captured event, host callbacks
captured into the graph (they would run again on every replay), and XLA's temporary buffers,
freed back to its pool after the captured run and handed to other arrays, which a replay would
then overwrite.

Found on an H200 (torch 2.11, jax 0.11.2): XLA's kernels join the capture, but it cannot end
(CUDA_ERROR_STREAM_CAPTURE_UNJOINED): PJRT's host callbacks after a run sit on streams of its own
(docs/benchmarks.md, session 28).

Each scenario runs in its own process (a broken capture can poison the CUDA context) and prints
one JSON line. Usage: python scripts/probe_capture28.py [scenario ...]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

SCENARIOS = (
    "tiny",
    "mlp",
    "mlp_nocb",
    "persistent_flag",
    "drv_tiny",
    "drv_mlp_nocb",
    "drv_mlp_extjoin",
)


def _dot_counts(path):
    with open(path) as f:
        text = f.read()
    kinds = re.findall(
        r"\b(KERNEL|HOST|MEMCPY|MEMSET|EVENT_RECORD|WAIT_EVENT|GRAPH|MEM_ALLOC|MEM_FREE|EMPTY)\b",
        text,
    )
    out = {}
    for k in kinds:
        out[k] = out.get(k, 0) + 1
    return out


NODE_TYPES = {
    0: "KERNEL",
    1: "MEMCPY",
    2: "MEMSET",
    3: "HOST",
    4: "GRAPH",
    5: "EMPTY",
    6: "WAIT_EVENT",
    7: "EVENT_RECORD",
    10: "MEM_ALLOC",
    11: "MEM_FREE",
    13: "CONDITIONAL",
}


class Driver:
    """Stream capture through CUDA's driver API (ctypes), so that the work XLA's own streams
    leave unjoined can be joined before the capture ends, and its host nodes inspected."""

    def __init__(self):
        import ctypes

        self.c = ctypes
        self.lib = ctypes.CDLL("libcuda.so.1")

    def ck(self, r, what):
        if r != 0:
            raise RuntimeError(f"{what}: CUDA driver error {r}")

    def begin(self, stream):
        self.ck(self.lib.cuStreamBeginCapture_v2(self.c.c_void_p(stream), 2), "begin")  # relaxed

    def graph_of(self, stream):
        c = self.c
        status, cid, graph = c.c_int(), c.c_ulonglong(), c.c_void_p()
        deps, edata, ndeps = c.c_void_p(), c.c_void_p(), c.c_size_t()
        self.ck(
            self.lib.cuStreamGetCaptureInfo_v3(
                c.c_void_p(stream),
                c.byref(status),
                c.byref(cid),
                c.byref(graph),
                c.byref(deps),
                c.byref(edata),
                c.byref(ndeps),
            ),
            "capture info",
        )
        return graph

    def nodes(self, graph):
        c = self.c
        n = c.c_size_t(0)
        self.ck(self.lib.cuGraphGetNodes(graph, None, c.byref(n)), "nodes")
        arr = (c.c_void_p * n.value)()
        self.ck(self.lib.cuGraphGetNodes(graph, arr, c.byref(n)), "nodes")
        return list(arr)

    def edges(self, graph):
        c = self.c
        n = c.c_size_t(0)
        self.ck(self.lib.cuGraphGetEdges_v2(graph, None, None, None, c.byref(n)), "edges")
        a = (c.c_void_p * max(n.value, 1))()
        b = (c.c_void_p * max(n.value, 1))()
        self.ck(self.lib.cuGraphGetEdges_v2(graph, a, b, None, c.byref(n)), "edges")
        return list(zip(a[: n.value], b[: n.value]))

    def kind(self, node):
        t = self.c.c_int()
        self.ck(self.lib.cuGraphNodeGetType(self.c.c_void_p(node), self.c.byref(t)), "type")
        return NODE_TYPES.get(t.value, str(t.value))

    def join_leaves(self, stream, graph):
        nodes = self.nodes(graph)
        has_out = {a for a, _ in self.edges(graph)}
        leaves = [n for n in nodes if n not in has_out]
        arr = (self.c.c_void_p * len(leaves))(*leaves)
        self.ck(
            self.lib.cuStreamUpdateCaptureDependencies_v2(
                self.c.c_void_p(stream), arr, None, len(leaves), 0
            ),
            "update deps",
        )
        return [self.kind(n) for n in leaves]

    def end(self, stream):
        g = self.c.c_void_p()
        self.ck(self.lib.cuStreamEndCapture(self.c.c_void_p(stream), self.c.byref(g)), "end")
        return g

    def drop_hosts(self, graph):
        dropped = 0
        for n in self.nodes(graph):
            if self.kind(n) == "HOST":
                self.ck(self.lib.cuGraphDestroyNode(self.c.c_void_p(n)), "destroy")
                dropped += 1
        return dropped

    def instantiate(self, graph):
        e = self.c.c_void_p()
        self.ck(
            self.lib.cuGraphInstantiateWithFlags(self.c.byref(e), graph, self.c.c_ulonglong(0)),
            "instantiate",
        )
        return e

    def launch(self, exe, stream):
        self.ck(self.lib.cuGraphLaunch(exe, self.c.c_void_p(stream)), "launch")


def run(name):
    import jax
    import jax.numpy as jnp
    import torch

    res = {"scenario": name}
    nocb = name.endswith("_nocb")
    opts = {"xla_gpu_enable_command_buffer": ""} if nocb else {}
    if name == "persistent_flag":
        f = jax.jit(lambda x: jnp.sin(x) @ x.T)
        try:
            f.lower(jnp.ones((64, 64))).compile(
                compiler_options={"xla_gpu_enable_persistent_temp_buffers": True}
            )
            res["accepted"] = True
        except Exception as e:  # noqa: BLE001 (the probe's finding is the error text)
            res["accepted"] = False
            res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return res

    if "tiny" in name:
        shape = (8,)

        def fn(x, y):
            return x * y + 1

    else:
        shape = (256, 1024)

        def fn(x, y):
            h = jnp.tanh(x @ y.T)  # (256, 256): a temporary between the two products
            return jnp.sin(h @ x) + y

    dev = torch.device("cuda")
    xs = torch.randn(shape, device=dev)
    ys = torch.randn(shape, device=dev)
    compiled = jax.jit(fn).lower(jnp.zeros(shape), jnp.zeros(shape)).compile(compiler_options=opts)

    def call(x, y):
        jx = jax.dlpack.from_dlpack(x)
        jy = jax.dlpack.from_dlpack(y)
        return torch.from_dlpack(compiled(jx, jy))

    ref = call(xs, ys)
    torch.cuda.synchronize()
    # warm the capture stream's side: torch.cuda.graph uses a side stream
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            call(xs, ys)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()

    if name.startswith("drv_"):
        return _run_driver(name, res, call, xs, ys, ref, shape, dev, compiled)
    g = torch.cuda.CUDAGraph()
    g.enable_debug_mode()
    static_out = torch.empty_like(ref)
    t0 = time.perf_counter()
    try:
        with torch.cuda.graph(g, capture_error_mode="relaxed"):
            out = call(xs, ys)
            static_out.copy_(out)
        res["captured"] = True
    except Exception as e:  # noqa: BLE001 (the probe's finding is the error text)
        res["captured"] = False
        res["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        return res
    res["capture_s"] = round(time.perf_counter() - t0, 4)
    dot = f"/tmp/probe_{name}.dot"
    try:
        g.debug_dump(dot)
        res["nodes"] = _dot_counts(dot)
    except Exception as e:  # noqa: BLE001 (the probe's finding is the error text)
        res["dump_error"] = str(e)[:200]
    torch.cuda.synchronize()

    # replay with new values in the static inputs
    errs = []
    for i in range(5):
        xs.copy_(torch.randn(shape, device=dev))
        ys.copy_(torch.randn(shape, device=dev))
        g.replay()
        torch.cuda.synchronize()
        want = call(xs.clone(), ys.clone())
        torch.cuda.synchronize()
        errs.append(float((static_out - want).abs().max()))
    res["replay_max_err"] = max(errs)

    if name == "mlp_reuse":
        # other JAX arrays allocated after the capture: does a replay overwrite them?
        keep = [jnp.full((256, 256), float(i)) for i in range(40)]
        keep += [jnp.full(shape, float(i)) for i in range(40)]
        jax.block_until_ready(keep)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        bad = 0
        for i, a in enumerate(keep):
            v = float(i % 40)
            if not bool(jnp.all(a == v)):
                bad += 1
        res["overwritten_arrays"] = bad

    # per call: eager-style call (import, run, export, sync-free) vs replay with input copies
    n = 300
    newx = torch.randn(shape, device=dev)
    for label, body in (
        ("jax_call_us", lambda: call(newx, ys)),
        ("replay_us", lambda: (xs.copy_(newx), g.replay(), static_out.clone())),
    ):
        for _ in range(20):
            body()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                body()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t) / n * 1e6)
        res[label] = round(sorted(ts)[2], 1)
    return res


def _run_driver(name, res, call, xs, ys, ref, shape, dev, compiled):
    import jax
    import jax.numpy as jnp
    import torch

    drv = Driver()
    static_out = torch.empty_like(ref)
    s = torch.cuda.Stream()
    sp = s.cuda_stream
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.stream(s):
        drv.begin(sp)
        try:
            out = call(xs, ys)
            static_out.copy_(out)
            graph = drv.graph_of(sp)
            kinds = {}
            for n in drv.nodes(graph):
                k = drv.kind(n)
                kinds[k] = kinds.get(k, 0) + 1
            res["nodes_in_capture"] = kinds
            if "extjoin" in name:
                ext = jax.devices()[0].get_stream_for_external_ready_events()
                ev = torch.cuda.Event()
                ev.record(torch.cuda.ExternalStream(ext))
                s.wait_event(ev)
                res["ext_stream_joined"] = True
            res["leaves"] = drv.join_leaves(sp, graph)
        finally:
            try:
                g = drv.end(sp)
            except RuntimeError as e:
                res["end_error"] = str(e)
                return res
    res["capture_s"] = round(time.perf_counter() - t0, 4)
    kinds = {}
    for n in drv.nodes(g):
        k = drv.kind(n)
        kinds[k] = kinds.get(k, 0) + 1
    res["nodes"] = kinds
    if "keephost" not in name:
        res["hosts_dropped"] = drv.drop_hosts(g)
    exe = drv.instantiate(g)
    keep_alive = (out, xs, ys)  # the graph reads and writes these addresses

    def replay():
        drv.launch(exe, torch.cuda.current_stream().cuda_stream)

    errs = []
    for _ in range(5):
        xs.copy_(torch.randn(shape, device=dev))
        ys.copy_(torch.randn(shape, device=dev))
        replay()
        torch.cuda.synchronize()
        want = call(xs.clone(), ys.clone())
        torch.cuda.synchronize()
        errs.append(float((static_out - want).abs().max()))
    res["replay_max_err"] = max(errs)
    if "reuse" in name:
        keep = [jnp.full((256, 256), float(i)) for i in range(40)]
        keep += [jnp.full(shape, float(i)) for i in range(40)]
        more = [
            call(torch.randn(shape, device=dev), torch.randn(shape, device=dev)) for _ in range(10)
        ]
        jax.block_until_ready(keep)
        torch.cuda.synchronize()
        snap = [m.clone() for m in more]
        for _ in range(3):
            replay()
        torch.cuda.synchronize()
        res["overwritten_arrays"] = sum(
            not bool(jnp.all(a == float(i % 40))) for i, a in enumerate(keep)
        )
        res["overwritten_outputs"] = sum(not torch.equal(a, b) for a, b in zip(more, snap))
    n = 300
    newx = torch.randn(shape, device=dev)
    for label, body in (
        ("jax_call_us", lambda: call(newx, ys)),
        ("replay_us", lambda: (xs.copy_(newx), replay(), static_out.clone())),
    ):
        for _ in range(20):
            body()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                body()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t) / n * 1e6)
        res[label] = round(sorted(ts)[2], 1)
    del keep_alive
    # a later ordinary call and process exit must still work
    call(xs, ys)
    torch.cuda.synchronize()
    res["after_ok"] = True
    return res


def main():
    names = sys.argv[1:] or list(SCENARIOS)
    if os.environ.get("_PROBE_CHILD"):
        try:
            res = run(names[0])
        except Exception as e:  # noqa: BLE001 (the probe's finding is the error text)
            res = {"scenario": names[0], "crashed": f"{type(e).__name__}: {str(e)[:500]}"}
        print("RESULT " + json.dumps(res), flush=True)
        return
    for name in names:
        env = dict(os.environ, _PROBE_CHILD="1")
        try:
            p = subprocess.run(
                [sys.executable, __file__, name],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if lines:
                print(lines[-1][7:], flush=True)
            else:
                print(
                    json.dumps({"scenario": name, "rc": p.returncode, "stderr": p.stderr[-1500:]}),
                    flush=True,
                )
        except subprocess.TimeoutExpired:
            print(json.dumps({"scenario": name, "timeout": True}), flush=True)


if __name__ == "__main__":
    main()
