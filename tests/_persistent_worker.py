"""Run by test_persistent_cache.py in a fresh process: compile a small model once and report.

Prints one JSON line: JAX persistent-cache hits, the first call's time, the largest difference
from eager, the cache directory and torch2xla's warnings.
"""

import json
import time
import warnings

import jax
import torch
from torch import nn

import torch2xla

hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None
)

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
            "hits": len(hits),
            "first_call_s": first,
            "max_diff": diff,
            "dir": str(torch2xla.persistent_cache_dir()),
            "warnings": [str(w.message) for w in caught if "torch2xla" in str(w.message)],
        }
    )
)
