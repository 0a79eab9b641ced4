"""Diagnostic (session 15, torch 2.11): overlapping mutated views after a compile in a thread."""

import sys
import threading

import torch

import torch2xla  # noqa: F401
from torch2xla.guards import _key

seen = []
orig = _key.may_alias


def spy(gm):
    r = orig(gm)
    exs = [n.meta.get("example_value") for n in gm.graph.find_nodes(op="placeholder")]
    seen.append(
        (
            r,
            [
                (type(e).__name__, id(e.untyped_storage()) if isinstance(e, torch.Tensor) else None)
                for e in exs
            ],
        )
    )
    return r


_key.may_alias = spy


def shift_and_scale(a, b):
    a.mul_(2)
    b.add_(1)
    return a.sum() + b.sum(), b * 3


def run(backend):
    torch._dynamo.reset()
    x = torch.arange(8.0, device=sys.argv[1])
    out = torch.compile(shift_and_scale, backend=backend)(x[0:4], x[2:6])
    return out[0].item()


print("before thread:", {b: run(b) for b in ("aot_eager", "xla")}, seen)
seen.clear()
if len(sys.argv) > 2:
    sys.path.insert(0, ".")
    from tests.test_threads import test_eight_threads_compile_and_run_concurrently as eight

    eight()
    print("threads:", seen[-3:])
    seen.clear()
else:
    wave = torch.compile(lambda x: torch.sin(x) * 2, backend="xla")
    t = threading.Thread(target=lambda: wave(torch.randn(4, 3)))
    t.start()
    t.join()
print("after thread:", {b: run(b) for b in ("aot_eager", "xla")}, seen)
import torch._dynamo.config as c

print({k: v for k, v in c.get_config_copy().items() if "alias" in k or "dynamic" in k})
print(
    torch._guards.TracingContext.try_get(),
    torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE),
)
