"""Run by test_persistent_cache.py in a fresh process: compile a small model, compare with eager.

    python tests/_persistent_worker.py '{"models": ["mlp"], "scale": 1.0, "train": true}'

``options``: the backend's options; ``device``: where the model runs. ``models``: each of
``mlp`` (Linear, GELU, LayerNorm, Linear, times ``scale``), ``sin`` or
``cos`` (one elementwise op; the two graphs differ only in it). One inference call under
``no_grad``; with ``train``, two training steps (forward, backward, SGD step); with ``retain``, a
``retain_graph`` backward and a second one through a third forward; each compared with the
same steps in eager. Prints one JSON line:
ATen exports (``torch2xla._backend.lower`` calls), XLA compiles (backend compiles JAX
reported), entries loaded from the persistent cache, the largest differences from eager, the
cache directory, torch2xla's warnings and the torch2xla logger's warnings.
"""

import copy
import json
import logging
import sys
import warnings

import jax
import torch
from torch import nn

import torch2xla
import torch2xla._backend
from torch2xla.guards import _persistent

config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}

compiles: list[str] = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: (
        compiles.append(event) if event == "/jax/core/compile/backend_compile_duration" else None
    )
)
exports = []
_lower = torch2xla._backend.lower


def _counting_lower(gm, args):
    exports.append(1)
    return _lower(gm, args)


torch2xla._backend.lower = _counting_lower
logged: list[str] = []


class _Collect(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logged.append(record.getMessage())


logging.getLogger("torch2xla").addHandler(_Collect(logging.WARNING))


class Scaled(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
        self.scale = scale

    def forward(self, x):
        return self.net(x) * self.scale


class Elementwise(nn.Module):
    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = getattr(torch, op)
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 16))

    def forward(self, x):
        return self.op(x * self.w)


class Embed(nn.Module):
    """An embedding: its lowering checks the indices at run time (``checks``)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 16)

    def forward(self, i):
        return self.emb(i).tanh()


def build(name: str) -> nn.Module:
    torch.manual_seed(0)
    if name == "mlp":
        return Scaled(config.get("scale", 1.0))
    if name == "embed":
        return Embed()
    return Elementwise(name)


def bad_index(name: str, compiled, device) -> None:
    """The error of a call with an index out of range (eager raises IndexError)."""
    try:
        compiled(torch.tensor([1, 2, 3, 12, 0, 4, 5, 6], device=device))  # (same signature)
    except IndexError as e:
        errors[name] = [type(e).__name__, str(e)]
    else:
        errors[name] = None


def max_diff(a, b) -> float:
    return (a - b).abs().max().item()


def grad_diff(model, ref) -> float:
    return max(max_diff(p.grad, q.grad) for p, q in zip(model.parameters(), ref.parameters()))


def check(name: str) -> None:
    device = config.get("device", "cpu")
    model = build(name).to(device)
    compiled = torch.compile(model, backend="xla", options=config.get("options"))
    x = torch.randn(8, 16, device=device)
    if name == "embed":
        x = torch.tensor([1, 2, 3, 9, 0, 4, 5, 6], device=device)
    with torch.no_grad():
        diffs[f"{name} inference"] = max_diff(compiled(x), model(x))
        if name == "embed":
            bad_index(f"{name} inference", compiled, device)
    if not config.get("train", False):
        return
    if name == "embed":
        ref = copy.deepcopy(model)
        for net in (compiled, ref):
            net(x).sum().backward()
        diffs[f"{name} grads"] = grad_diff(model, ref)
        bad_index(f"{name} training", compiled, device)
        return
    ref = copy.deepcopy(model)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref)]
    for step in range(2):
        xs = torch.randn(8, 16, device=device)
        for net, opt in zip((compiled, ref), opts):
            net(xs).square().mean().backward()
            opt.step()
        diffs[f"{name} grads {step}"] = grad_diff(model, ref)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
    if config.get("retain", False):
        xs = torch.randn(8, 16, device=device)
        for net in (compiled, ref):  # a backward that keeps the graph, then a second one
            loss = net(xs).sum()
            loss.backward(retain_graph=True)
            loss.backward()
        diffs[f"{name} retained"] = grad_diff(model, ref)


diffs = {}
errors = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for name in config.get("models", ["mlp"]):
        check(name)
print(
    json.dumps(
        {
            "exports": len(exports),
            "xla_compiles": len(compiles),
            "loaded": _persistent.hits(),
            "diffs": diffs,
            "errors": errors,
            "dir": str(torch2xla.persistent_cache_dir()),
            "warnings": [str(w.message) for w in caught if "torch2xla" in str(w.message)],
            "logged": logged,
        }
    )
)
