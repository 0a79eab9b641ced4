"""Probe torch2xla's guards and caches, part four: calls from several threads at once (first
calls racing one compile, steady calls beside another thread's compile, backward in threads,
thread-local grad, inference and autocast state), signatures alternating across a small cache
and options, and one property at a time changed on a compiled module (its parameters, buffers,
attributes, mode) or on the process (seed, default dtype, autocast dtype).

    PYTHONPATH=. python scripts/probe_guards26.py [substring ...]

The harness is ``probe_guards.py``'s: a scenario is ``fn(C, call)``, every call compared with
eager (dtype, shape, strides, requires_grad, grad_fn presence, values). A thread scenario
records each thread's results after joining them in order; a thread still alive after its
timeout is recorded as ``deadlock`` (the eager run records nothing of the kind).
"""

from __future__ import annotations

import os
import sys
import threading

import torch
from torch import nn

sys.path[:0] = [
    os.path.dirname(os.path.abspath(__file__)),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
]
import probe_guards as pg
from probe_guards import rand

SCENARIOS: dict = {}
TIMEOUT = 120.0


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def in_threads(call, label, tasks):
    """Runs ``tasks`` (thunks) in threads started together; records each one's result."""
    barrier = threading.Barrier(len(tasks))
    results: list = [None] * len(tasks)

    def worker(i, task):
        barrier.wait()
        try:
            results[i] = task()
        except Exception as e:  # noqa: BLE001  (the error is an observation)
            results[i] = e

    ts = [threading.Thread(target=worker, args=(i, t), daemon=True) for i, t in enumerate(tasks)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(TIMEOUT)
    for i, t in enumerate(ts):
        call.rec(f"{label} thread {i}", "deadlock" if t.is_alive() else results[i])


# ============================================================================================
# threads
@scenario
def threads_first_call_same_signature(C, call):
    f = C(lambda x, w: torch.tanh(x @ w) * 2 + x.sum())
    w = rand(4, 3, seed=9)
    in_threads(call, "first", [lambda i=i: f(rand(5, 4, seed=i), w) for i in range(4)])
    in_threads(call, "steady", [lambda i=i: f(rand(5, 4, seed=10 + i), w) for i in range(4)])


@scenario
def threads_first_call_other_shapes(C, call):
    f = C(lambda x: (x.softmax(-1) * x.shape[0], x.cumsum(0)))
    in_threads(call, "first", [lambda i=i: f(rand(2 + i, 3 + i, seed=i)) for i in range(4)])
    in_threads(call, "again", [lambda i=i: f(rand(2 + i, 3 + i, seed=5 + i)) for i in range(4)])


@scenario
def threads_first_call_other_dtypes(C, call):
    f = C(lambda x: x * 3 + x.abs().sum(0))
    dts = (torch.float32, torch.float64, torch.int64, torch.bfloat16)
    in_threads(call, "first", [lambda dt=dt: f(rand(3, 4, dtype=dt)) for dt in dts])
    in_threads(call, "again", [lambda dt=dt: f(rand(3, 4, seed=1, dtype=dt)) for dt in dts])


@scenario
def threads_dynamic_other_sizes(C, call):
    f = C(lambda x, y: (x @ y).relu().sum(-1) + x.shape[1], dynamic=True)
    in_threads(
        call,
        "first",
        [lambda i=i: f(rand(i + 2, i + 3, seed=i), rand(i + 3, 2, seed=i + 1)) for i in range(4)],
    )
    in_threads(
        call,
        "mixed",
        [lambda i=i: f(rand(5 - i, 4 - i, seed=i), rand(4 - i, 2, seed=i)) for i in range(4)],
    )


@scenario
def threads_bucketed_same_bucket(C, call):
    # sizes 5..8 share the bucket 8: padded programs called at once with other real sizes
    f = C(lambda x: (x.sum(0), x.amax(0), x[-1] * 2), dynamic=True)
    call("warm", lambda: f(rand(6, 3)))
    in_threads(call, "bucket", [lambda i=i: f(rand(5 + i, 3, seed=i)) for i in range(4)])
    in_threads(call, "again", [lambda i=i: f(rand(8 - i, 3, seed=i)) for i in range(4)])


@scenario
def threads_grad_and_no_grad_first_call(C, call):
    f = C(lambda x, w: (x * w).sin().sum(0))
    x, w = rand(3, 4), rand(4, seed=1, rg=True)

    def nograd():
        with torch.no_grad():
            return f(x, w)

    def inference():
        with torch.inference_mode():
            return f(x, w)

    def grad():
        out = f(x, w)
        return out, torch.autograd.grad(out.sum(), w)

    in_threads(call, "first", [nograd, grad, inference, grad])
    in_threads(call, "again", [grad, nograd, grad, inference])


@scenario
def threads_autocast_thread_local(C, call):
    f = C(lambda x, w: x @ w + 1)
    x, w = rand(4, 8), rand(8, 3, seed=1)

    def cast(dt):
        with torch.autocast("cpu", dtype=dt):
            return f(x, w)

    in_threads(
        call,
        "first",
        [
            lambda: cast(torch.bfloat16),
            lambda: f(x, w),
            lambda: cast(torch.float16),
            lambda: f(x, w),
        ],
    )
    in_threads(
        call,
        "again",
        [
            lambda: f(x, w),
            lambda: cast(torch.bfloat16),
            lambda: f(x, w),
            lambda: cast(torch.float16),
        ],
    )


@scenario
def threads_backward_module(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    f = C(m)

    def step(i):
        x = rand(3, 4, seed=i, rg=True)
        out = f(x)
        loss = (out**2).sum()
        return (out, *torch.autograd.grad(loss, [x, *m.parameters()]))

    in_threads(call, "first", [lambda i=i: step(i) for i in range(4)])
    in_threads(call, "steady", [lambda i=i: step(10 + i) for i in range(4)])


@scenario
def threads_two_functions(C, call):
    f = C(lambda x: x.exp().cumsum(0))
    g = C(lambda x: (x * x).log1p().flip(0))
    in_threads(
        call,
        "first",
        [
            lambda: f(rand(5)),
            lambda: g(rand(5, seed=1)),
            lambda: f(rand(5, seed=2)),
            lambda: g(rand(5)),
        ],
    )
    in_threads(
        call,
        "new shapes",
        [
            lambda: g(rand(7)),
            lambda: f(rand(7, seed=1)),
            lambda: g(rand(9, seed=2)),
            lambda: f(rand(9)),
        ],
    )


@scenario
def threads_steady_while_compiling(C, call):
    f = C(lambda x: x * 2 + 1)
    big = C(lambda x: sum(torch.sin(x * k).cumsum(0) for k in range(1, 30)))
    call("warm", lambda: f(rand(4)))
    stop = threading.Event()
    steady: list = []

    def loop():
        i = 0
        while not stop.is_set() and i < 2000:
            x = rand(4, seed=i % 7)
            out = f(x)
            if not torch.equal(out, x * 2 + 1):
                steady.append((i, out))
            i += 1

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    call("compile big", lambda: big(rand(6)))
    stop.set()
    t.join(TIMEOUT)
    call.rec("steady mismatches", len(steady))
    call.rec("steady alive", t.is_alive())


@scenario
def threads_inplace_inputs(C, call):
    def g(x, y):
        x.mul_(2)
        y.add_(x)
        return x + y

    f = C(g)
    xs = [rand(4, seed=i) for i in range(4)]
    ys = [rand(4, seed=10 + i) for i in range(4)]
    in_threads(call, "first", [lambda i=i: f(xs[i], ys[i]) for i in range(4)])
    for i in range(4):
        call.rec(f"x{i}", xs[i])
        call.rec(f"y{i}", ys[i])


@scenario
def threads_int_argument_values(C, call):
    f = C(lambda x, n: x * n + n)
    in_threads(call, "first", [lambda i=i: f(rand(3), i + 2) for i in range(4)])
    in_threads(call, "again", [lambda i=i: f(rand(3, seed=1), 7 - i) for i in range(4)])


@scenario
def threads_float_argument_values(C, call):
    f = C(lambda x, s: x * s - s)
    in_threads(call, "first", [lambda i=i: f(rand(3), 0.5 * i + 0.25) for i in range(4)])
    in_threads(
        call,
        "again",
        [lambda i=i: f(rand(3, seed=1), -0.0 if i == 1 else i * 1.5) for i in range(4)],
    )


@scenario
def threads_train_eval_modules(C, call):
    torch.manual_seed(0)
    m1 = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    m2 = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).eval()
    f1, f2 = C(m1), C(m2)
    with torch.no_grad():
        in_threads(call, "first", [lambda: f1(rand(5, 4)), lambda: f2(rand(5, 4, seed=1))])
    call.rec("m1 mean", m1[1].running_mean)
    call.rec("m2 mean", m2[1].running_mean)


@scenario
def threads_set_grad_enabled_while_other_compiles(C, call):
    f = C(lambda x, w: (x @ w).relu())
    x, w = rand(3, 4), rand(4, 2, seed=1, rg=True)

    def flip():
        outs = []
        for k in range(30):
            with torch.set_grad_enabled(k % 2 == 0):
                outs.append(f(x, w).requires_grad)
        return outs

    in_threads(call, "flip", [flip, flip, lambda: f(x + 1, w), flip])


# ============================================================================================
# one property at a time
@scenario
def alternating_signatures_small_cache(C, call):
    f = C(lambda x, s: (x * s).sum(-1) + x.shape[-1], dynamic=True, options={"cache_size": 2})
    sigs = [
        (rand(3, 4), 2.0),
        (rand(3, 5, dtype=torch.float64), 2.0),
        (rand(3, 4), -0.0),
        (rand(3, 6), 2.0),
    ]
    for k in range(3):
        for j, (x, s) in enumerate(sigs):
            call(f"round {k} sig {j}", lambda x=x, s=s: f(x, s))


@scenario
def alternating_dtype_grad_shape(C, call):
    f = C(lambda x: (x.float() * 2).sum(0) if x.dtype != torch.float64 else x.cos())
    sigs = [
        rand(3, 4),
        rand(3, 4, dtype=torch.float64),
        rand(3, 4, rg=True),
        rand(5, 4),
        rand(3, 4, dtype=torch.bfloat16),
        rand(5, 4, rg=True),
    ]
    for k in range(2):
        for j, x in enumerate(sigs):
            out = call(f"round {k} sig {j}", lambda x=x: f(x))
            if isinstance(out, torch.Tensor) and out.requires_grad:
                call(f"grad {k} {j}", lambda out=out, x=x: torch.autograd.grad(out.sum(), x))


@scenario
def same_function_two_option_sets(C, call):
    def g(x):
        return torch.cat([x, x[-1:] * 2]).softmax(0)

    a = C(g, dynamic=True)
    b = C(g, dynamic=True, options={"buckets": None})
    for n in (5, 6, 5, 7, 3, 6):
        call(f"a {n}", lambda n=n: a(rand(n, 2, seed=n)))
        call(f"b {n}", lambda n=n: b(rand(n, 2, seed=n)))


@scenario
def zero_d_vs_one_element(C, call):
    f = C(lambda x, y: x * y + y.sum())
    x = rand(3)
    for y in (torch.tensor(2.0), torch.tensor([2.0]), torch.tensor(3.0), torch.tensor([[4.0]])):
        call(f"y {tuple(y.shape)}", lambda y=y: f(x, y))


@scenario
def none_vs_tensor_argument(C, call):
    def g(x, bias=None, scale=None):
        out = x * 2
        if bias is not None:
            out = out + bias
        if scale is not None:
            out = out * scale
        return out

    f = C(g)
    x, b = rand(3), rand(3, seed=1)
    for label, kw in (
        ("none", {}),
        ("bias", {"bias": b}),
        ("scale", {"scale": 2.0}),
        ("both", {"bias": b, "scale": b}),
        ("none again", {}),
        ("bias again", {"bias": b * 3}),
    ):
        call(label, lambda kw=kw: f(x, **kw))


@scenario
def bool_int_float_same_value(C, call):
    f = C(lambda x, k: (x * k, torch.full((2,), k)))
    x = rand(3)
    for k in (True, 1, 1.0, False, 0, 0.0, True, 2):
        call(f"{type(k).__name__} {k}", lambda k=k: f(x, k))


@scenario
def list_argument_length_and_values(C, call):
    f = C(lambda x, ks: sum(x * k for k in ks) + len(ks))
    x = rand(3)
    for ks in ([1.0], [1.0, 2.0], [1.0, 3.0], (1.0, 2.0), [2, 3], [1.0, 2.0, 3.0], [1.0]):
        call(f"{ks}", lambda ks=ks: f(x, ks))


@scenario
def dict_argument_values(C, call):
    f = C(lambda x, cfg: x * cfg["a"] + cfg.get("b", 0))
    x = rand(3)
    for cfg in ({"a": 2}, {"a": 3}, {"a": 3, "b": rand(3)}, {"a": 2.5}, {"a": 2}):
        call(f"{sorted(cfg)} {cfg['a']}", lambda cfg=cfg: f(x, cfg))


@scenario
def storage_offset_and_channels_last(C, call):
    f = C(lambda x: (x * 2).sum(1) + x.mean())
    base = rand(2, 3, 4, 5)
    variants = [
        ("contig", base),
        ("channels_last", base.contiguous(memory_format=torch.channels_last)),
        ("offset", rand(200)[7 : 7 + 120].view(2, 3, 4, 5)),
        ("transposed", base.transpose(1, 3).contiguous().transpose(1, 3)),
        ("sliced", rand(2, 3, 4, 10)[..., ::2]),
        ("contig again", base),
    ]
    for label, x in variants:
        call(label, lambda x=x: f(x))


@scenario
def module_parameter_replaced_and_mutated(C, call):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    f = C(m)
    x = rand(4, 3)
    call("first", lambda: f(x))
    m.weight = nn.Parameter(torch.ones(2, 3))
    call("new weight", lambda: f(x))
    with torch.no_grad():
        m.weight.mul_(3)
    call("mutated", lambda: f(x))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for k in range(3):
        opt.zero_grad()
        out = call(f"train {k}", lambda: f(x))
        out.sum().backward()
        call.rec(f"grad {k}", m.weight.grad)
        opt.step()
    m.bias = nn.Parameter(torch.zeros(2, dtype=torch.float32), requires_grad=False)
    out = call("frozen bias", lambda: f(x))
    call("frozen bias grad", lambda: torch.autograd.grad(out.sum(), m.weight))
    m.weight.requires_grad_(False)
    call("all frozen", lambda: f(x))


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.scale = 1.5
        self.register_buffer("shift", torch.zeros(3))
        self.use_shift = True

    def forward(self, x):
        out = self.lin(x) * self.scale
        if self.use_shift:
            out = out + self.shift
        return out


@scenario
def module_attribute_buffer_flag(C, call):
    torch.manual_seed(0)
    m = _Scaled()
    f = C(m)
    x = rand(2, 3)
    call("first", lambda: f(x))
    m.scale = 2.5
    call("scale 2.5", lambda: f(x))
    m.shift = torch.ones(3)
    call("shift reassigned", lambda: f(x))
    m.shift.add_(1)
    call("shift mutated", lambda: f(x))
    m.use_shift = False
    call("no shift", lambda: f(x))
    m.scale = 1.5
    m.use_shift = True
    call("back", lambda: f(x))
    m.shift = torch.ones(3, dtype=torch.float64)
    call("shift float64", lambda: f(x))


@scenario
def two_instances_compiled_forward(C, call):
    torch.manual_seed(0)
    m1, m2 = _Scaled(), _Scaled()
    m2.scale = -1.0
    m2.shift = torch.full((3,), 5.0)
    fwd = C(_Scaled.forward)
    x = rand(2, 3)
    for k in range(2):
        call(f"m1 {k}", lambda: fwd(m1, x))
        call(f"m2 {k}", lambda: fwd(m2, x))
    c1, c2 = C(m1), C(m2)
    for k in range(2):
        call(f"c1 {k}", lambda: c1(x))
        call(f"c2 {k}", lambda: c2(x))


@scenario
def closure_tensor_rebound(C, call):
    w = rand(3)

    def g(x):
        return x * w + w.sum()

    f = C(g)
    x = rand(3, seed=1)
    call("first", lambda: f(x))
    w = rand(3, seed=2)  # (read by g through its cell)
    call("rebound", lambda: f(x))
    w = rand(3, seed=2, dtype=torch.float64)
    call("rebound float64", lambda: f(x))
    w = rand(4, seed=3)
    call("rebound shape", lambda: f(rand(4)))


@scenario
def dropout_same_seed_repeats(C, call):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    f = C(m)
    x = rand(4, 8)
    outs = []
    for _ in range(2):
        torch.manual_seed(123)
        a = f(x)
        b = f(x)
        outs.append((a, b))
    call.rec(
        "same seed repeats",
        torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1]),
    )
    call.rec("fresh per call", not torch.equal(outs[0][0], outs[0][1]))
    m.eval()
    call("eval", lambda: f(x))
    m.train()
    torch.manual_seed(123)
    call.rec("train again repeats", torch.equal(f(x), outs[0][0]))


@scenario
def autocast_dtype_switch(C, call):
    torch.manual_seed(0)
    m = nn.Linear(8, 4)
    f = C(m)
    x = rand(2, 8)
    for dt in (None, torch.bfloat16, torch.float16, None, torch.bfloat16):
        if dt is None:
            call("off", lambda: f(x))
        else:
            with torch.autocast("cpu", dtype=dt):
                call(str(dt), lambda: f(x))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        call("disabled ctx", lambda: f(x))


@scenario
def default_dtype_switch(C, call):
    f = C(lambda x: x + torch.ones(3) * 0.1 + torch.tensor(0.3))
    x = rand(3, dtype=torch.float64)
    old = torch.get_default_dtype()
    try:
        for dt in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(dt)
            call(str(dt), lambda: f(x))
    finally:
        torch.set_default_dtype(old)


@scenario
def requires_grad_toggle_each_input(C, call):
    f = C(lambda x, y: (x * y).sum() + x.exp().mean())
    for rx, ry in ((False, False), (True, False), (False, True), (True, True), (False, False)):
        x, y = rand(3, rg=rx), rand(3, seed=1, rg=ry)
        out = call(f"{rx} {ry}", lambda x=x, y=y: f(x, y))
        ins = [t for t in (x, y) if t.requires_grad]
        if ins:
            call(f"grads {rx} {ry}", lambda out=out, ins=ins: torch.autograd.grad(out, ins))


@scenario
def static_dynamic_static_shapes(C, call):
    f = C(lambda x: x.reshape(-1, 2).sum(1) * x.shape[0])
    for n in (4, 6, 8, 4, 6, 10, 4):
        call(f"{n}", lambda n=n: f(rand(n, 3, seed=n)))


@scenario
def deterministic_and_flags(C, call):
    f = C(lambda x, i: torch.zeros(5).index_add(0, i, x))
    x, i = rand(4), torch.tensor([0, 1, 1, 3])
    for det in (False, True, False):
        torch.use_deterministic_algorithms(det)
        try:
            call(f"det {det}", lambda: f(x, i))
        finally:
            torch.use_deterministic_algorithms(False)
    for en in (False, True):
        with torch.backends.mkldnn.flags(enabled=en):
            call(f"mkldnn {en}", lambda: f(x, i))


def main(argv: list[str]) -> int:
    names = [n for n in SCENARIOS if not argv or any(a in n for a in argv)]
    bad = 0
    for name in names:
        try:
            line = pg.compare(name, SCENARIOS[name])
        except Exception as e:  # noqa: BLE001
            line = f"CRASH {name}: {type(e).__name__}: {e}"
        bad += not line.startswith("ok")
        print(line, flush=True)
    print(f"{len(names) - bad}/{len(names)} ok")
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
