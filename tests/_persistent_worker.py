"""Run by test_persistent_cache.py in a fresh process: compile a small model once and report.

Prints one JSON line: JAX persistent-cache hits, XLA compiles, the first call's time, the largest
difference from eager, the cache directory and torch2xla's warnings.
"""

import json
import time
import warnings

import jax
import torch
from torch import nn

import torch2xla

events: list[str] = []
jax.monitoring.register_event_listener(lambda event, **kw: events.append(event))

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).eval()
x = torch.randn(8, 16)
with warnings.catch_warnings(record=True) as caught, torch.no_grad():
    warnings.simplefilter("always")
    t0 = time.perf_counter()
    out = torch.compile(model, backend="xla")(x)
    first = time.perf_counter() - t0
    diff = (out - model(x)).abs().max().item()
print(
    json.dumps(
        {
            "hits": events.count("/jax/compilation_cache/cache_hits"),
            # Requests that the persistent cache did not serve were compiled by XLA.
            "xla_compiles": events.count("/jax/compilation_cache/compile_requests_use_cache")
            - events.count("/jax/compilation_cache/cache_hits"),
            "first_call_s": first,
            "max_diff": diff,
            "dir": str(torch2xla.persistent_cache_dir()),
            "warnings": [str(w.message) for w in caught if "torch2xla" in str(w.message)],
        }
    )
)
