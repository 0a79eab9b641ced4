"""Ops whose CUDA kernel takes no CPU 0-d tensor beside CUDA ones: eager raises, so we do.

Eager lets most ops take a CPU 0-d tensor beside CUDA tensors (a step counter, a scale): the
ops marked ``device_check: NoCheck`` in ATen's ``native_functions.yaml`` (TensorIterator's
ops: add, mul, where, masked_fill, ...). Every other op with a CUDA kernel checks first that
all its tensors are on one device, CPU 0-d tensors included (``clamp(x, lo, hi)`` with 0-d CPU
bounds: "Expected all tensors to be on the same device, but got min is on cpu, different from
other tensors on cuda:0 (when checking argument in method wrapper_CUDA_clamp_Tensor)"; also
``logaddexp``, ``gcd``/``lcm``, ``igamma``, ``equal``). Fake tensors take a CPU 0-d tensor
anywhere, so Dynamo's fake run did not see it, and the XLA program computed a value.

``install`` makes that fake run raise eager's error for such an op in torch2xla's frames
(``_fake_errors`` sets ``checking()``): the op becomes a graph break, eager runs it and raises
its own error from the user's line (under ``fullgraph=True``, Dynamo's error). Which ops check
is read from the ``native_functions.yaml`` that torch ships in ``torchgen``; without it nothing
is checked here (and the op computes, as before).
"""

from __future__ import annotations

import contextlib
import functools
import pathlib
import threading

import torch

_local = threading.local()


@contextlib.contextmanager
def checking():
    """Fake runs inside check devices as eager's kernels do (one of torch2xla's frames)."""
    before = getattr(_local, "on", False)
    _local.on = True
    try:
        yield
    finally:
        _local.on = before


@functools.cache
def _checked_names() -> frozenset[str]:
    """The ``name.overload`` of every ATen op with a CUDA kernel and no ``device_check:
    NoCheck`` (the overload ``default`` as its bare name), from torch's own
    ``native_functions.yaml``; empty where the file is not there."""
    try:
        import torchgen
    except ImportError:
        return frozenset()
    path = pathlib.Path(torchgen.__file__).parent / "packaged/ATen/native/native_functions.yaml"
    if not path.is_file():
        return frozenset()
    entries: dict[str, dict] = {}
    entry: dict | None = None
    in_dispatch = False
    for line in path.read_text().splitlines():
        if line.startswith("- func:"):
            name = line[len("- func:") :].strip().split("(", 1)[0]
            entry = entries[name] = {"nocheck": False, "cuda": False, "delegate": None}
            in_dispatch = False
            continue
        if entry is None:
            continue
        stripped = line.strip()
        if line.startswith("  ") and not line.startswith("   "):
            in_dispatch = stripped == "dispatch:"
            if stripped.startswith("device_check:") and "NoCheck" in stripped:
                entry["nocheck"] = True
            elif stripped.startswith("structured_delegate:"):
                entry["delegate"] = stripped.split(":", 1)[1].strip()
        elif in_dispatch and line.startswith("    ") and ":" in stripped:
            keys = stripped.split(":", 1)[0]
            if "CUDA" in (k.strip() for k in keys.split(",")):
                entry["cuda"] = True

    def cuda(e: dict, depth: int = 0) -> bool:
        if e["cuda"]:
            return True
        delegate = entries.get(e["delegate"] or "")
        return delegate is not None and depth < 4 and cuda(delegate, depth + 1)

    return frozenset(n for n, e in entries.items() if not e["nocheck"] and cuda(e))


def _name(func) -> str:
    schema = func._schema
    name = schema.name.split("::", 1)[-1]
    return f"{name}.{schema.overload_name}" if schema.overload_name else name


def mixed_device_error(func, flat_args) -> RuntimeError | None:
    """Eager's error for ``func`` called with ``flat_args`` (fake tensors) where its CUDA
    kernel refuses tensors on another device (a CPU 0-d one); None where eager takes them."""
    devices = [
        a.device for a in flat_args if isinstance(a, torch.Tensor) and a.device.type != "meta"
    ]
    if len(set(devices)) < 2 or not any(d.type == "cuda" for d in devices):
        return None
    if not isinstance(func, torch._ops.OpOverload) or _name(func) not in _checked_names():
        return None
    cuda = next(d for d in devices if d.type == "cuda")
    other = next(d for d in devices if d != cuda)
    kernel = _name(func).replace(".", "_")
    return RuntimeError(
        f"Expected all tensors to be on the same device, but got a tensor on {other}, "
        f"different from other tensors on {cuda} (when checking argument in method "
        f"wrapper_CUDA_{kernel})"
    )


@functools.cache
def install() -> None:
    """Have fake tensors' dispatch raise ``mixed_device_error`` while ``checking()``, before
    their cache of op results (which a run outside ``checking()`` fills) is consulted."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_leaves

    original = FakeTensorMode.__dict__.get("__torch_dispatch__")
    if original is None or not callable(original):
        return

    @functools.wraps(original)
    def torch_dispatch(self, func, types, args=(), kwargs=None):
        if getattr(_local, "on", False):
            error = mixed_device_error(func, tree_leaves((args, kwargs or {})))
            if error is not None:
                raise error
        if kwargs is None:
            return original(self, func, types, args)
        return original(self, func, types, args, kwargs)

    FakeTensorMode.__torch_dispatch__ = torch_dispatch
