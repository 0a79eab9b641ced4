"""Per-call overhead (issue 24): what a steady compiled call runs of torch2xla's own code.

Wall time on a shared machine says little; the Python calls a steady call makes in torch2xla's
code (function frames and the builtins they call, ``sys.setprofile``) are the same on every run
and grow with every frame added to the hot path. The bounds below are the counts measured when
the path was trimmed (session 19: inference 14, fresh inputs 39, training steps 64 and 68;
before: 28, 47, 101 and 111) with a little headroom. Every call is also checked against eager.
"""

from __future__ import annotations

import copy
import functools
import gc
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch import nn

import torch2xla
import torch2xla.runtime._interop
from tests._util import assert_same
from torch2xla.runtime._interop import ViewCache, to_torch_cpu
from torch2xla.runtime._jax_scope import x64
from torch2xla.runtime._program import _Aot, map_list

_ROOT = str(pathlib.Path(torch2xla.__file__).parent)


def _our_calls(fn) -> tuple[int, list[str]]:
    """The Python calls (frames and builtins) ``fn()`` makes in torch2xla's code, and the names
    of its frames."""
    count, names = [0], []

    def profile(frame, event, arg):
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(_ROOT):
            count[0] += 1
            if event == "call":
                names.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0], names


def _tiny(x, y):
    return x * y + 1


# The call counts are those of a CPU program on a machine whose JAX default device is the CPU:
# where it is a GPU, a CPU program's calls run inside JAX's placement context (more frames).
_CPU_DEFAULT = pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="JAX's default device is not the CPU here"
)


@pytest.fixture
def on_cpu():
    """JAX arrays made in the test go to the CPU device (a GPU machine's default is the GPU)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


@_CPU_DEFAULT
@torch.no_grad()
def test_steady_inference_call_stays_small():
    compiled = torch.compile(_tiny, backend="xla", options={"strict": True})
    x, y = torch.randn(8), torch.randn(8)
    for _ in range(3):
        assert_same(compiled(x, y), _tiny(x, y))
    counts = {_our_calls(lambda: compiled(x, y))[0] for _ in range(3)}
    assert len(counts) == 1  # the same every call
    (n,) = counts
    _, names = _our_calls(lambda: compiled(x, y))
    # (the inputs' views and the executable's call run in XlaProgram's frame: no jax_inputs,
    # _Aot.__call__ or direct_call frame)
    assert not {"jax_inputs", "direct_call", "views", "<listcomp>"} & set(names)
    # (the one output's conversion, one frame: outputs leave through the numpy route, see
    # ``_interop.to_torch_cpu``)
    assert names.count("to_torch_cpu") == 1, names
    # (one Python frame per output since CPU outputs leave through the numpy route again:
    # ``_interop.to_torch_cpu`` says why)
    assert n <= 19, (n, names)
    x.add_(1.0)  # (cached views see torch's writes)
    assert_same(compiled(x, y), _tiny(x, y))


@_CPU_DEFAULT
@torch.no_grad()
def test_inference_call_with_fresh_inputs_stays_small():
    compiled = torch.compile(_tiny, backend="xla", options={"strict": True})
    for _ in range(3):
        x, y = torch.randn(8), torch.randn(8)
        assert_same(compiled(x, y), _tiny(x, y))
    x, y = torch.randn(8), torch.randn(8)
    n, names = _our_calls(lambda: compiled(x, y))
    # (one Python frame per output since CPU outputs leave through the numpy route again:
    # ``_interop.to_torch_cpu`` says why)
    assert n <= 45, (n, names)
    assert_same(compiled(x, y), _tiny(x, y))


@_CPU_DEFAULT
@pytest.mark.parametrize("depth", [1, 2])
def test_training_step_stays_small(depth):
    torch.manual_seed(0)
    layers = [nn.Linear(8, 8)] if depth == 1 else [nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8)]
    model = nn.Sequential(*layers)
    ref = copy.deepcopy(model)
    compiled = torch.compile(model, backend="xla", options={"strict": True})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    losses = []

    def step(net, optimizer):
        optimizer.zero_grad(set_to_none=True)
        loss = net(x).square().sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    for _ in range(3):
        assert_same(step(compiled, opt), step(ref, ref_opt))
    n, names = _our_calls(lambda: losses.append(step(compiled, opt)))
    losses.append(step(ref, ref_opt))
    assert_same(losses[0], losses[1])
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        assert_same(p, q)
    # (one Python frame per output since CPU outputs leave through the numpy route again:
    # ``_interop.to_torch_cpu`` says why)
    assert n <= (72 if depth == 1 else 76), (n, names)


# -- the pieces ----------------------------------------------------------------------------------
_DTYPES = [
    jnp.float32,
    jnp.float64,
    jnp.float16,
    jnp.bfloat16,
    jnp.int64,
    jnp.int32,
    jnp.int8,
    jnp.uint8,
    jnp.bool_,
    jnp.complex64,
]


@pytest.mark.parametrize("shape", [(), (1,), (5,), (1, 6), (6, 1), (2, 1, 3), (0,), (3, 0)])
def test_cpu_outputs_are_eager_like_tensors(shape, on_cpu):
    # Eager's strides (size-1 and empty dims too), writable, alive after the JAX array is gone,
    # values and dtypes as JAX computed them; one by one and as the program maps its list.
    with x64():
        arrays = [
            jax.jit(lambda d=d: (jnp.arange(int(np.prod(shape))) % 3).astype(d).reshape(shape))()
            for d in _DTYPES
        ]
    for convert in (to_torch_cpu, functools.partial(map_list, to_torch_cpu)):
        if convert is to_torch_cpu:
            tensors = [to_torch_cpu(a) for a in arrays]
        else:
            tensors = convert(arrays)
        for a, t in zip(arrays, tensors, strict=True):
            with x64():
                want = torch.from_numpy(np.asarray(a.real.astype(jnp.float64)).copy())
            assert t.dtype == torch2xla.runtime._interop.torch_dtype(a.dtype)
            assert t.shape == torch.Size(shape)
            assert t.stride() == torch.empty(shape).stride()
            assert torch.equal((t.real if t.is_complex() else t).double(), want)
    with x64():
        a = jax.jit(lambda: jnp.arange(6.0).reshape(2, 3))()
    t = map_list(to_torch_cpu, [a])[0]
    del a
    gc.collect()
    t.add_(1.0)
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_direct_call_then_rejected_arguments_fall_back_to_the_jit(on_cpu):
    # What XlaProgram does with ``_Aot.direct``: steady calls go to the executable's C++ call,
    # arguments it rejects (before running anything) to ``fallback``, the jit.
    call = _Aot(jax.jit(lambda a: a * 2))
    assert call.direct is None
    a = torch.arange(4.0)
    with x64():
        call(a.numpy())
        assert call.direct is not None
        assert torch.equal(torch.from_dlpack(call.direct(a.numpy())), a * 2)
        b = np.array([2**40 + 1, 3])
        with pytest.raises((TypeError, ValueError)):
            call.direct(b)
        assert np.array_equal(np.asarray(call.fallback(b)), b * 2)


def test_view_cache_one_cached_position_beside_new_tensors():
    # One position cached, the others new every call: its check picks that tensor alone, and
    # torch's writes to it still ask for a fence where nothing was imported afresh.
    cache = ViewCache(2)
    p = torch.randn(8)
    with x64():
        for _ in range(3):
            x = torch.randn(8)
            views, _ = cache([x, p])
            assert torch.equal(torch.from_dlpack(views[0]), x)
            assert torch.equal(torch.from_dlpack(views[1]), p)
        assert cache._fast is not None and cache._fast.volatile == (0,)
        q = torch.randn(8)
        for _ in range(2):
            cache([q, p])  # (q cached at its second sighting, served by the volatile check)
        p.add_(1.0)
        views, fence = cache([q, p])
        assert fence is True
        assert torch.equal(torch.from_dlpack(views[1]), p)
        for _ in range(2):
            views, fence = cache([torch.randn(8), torch.randn(8)])  # nothing cached any more
        assert fence is False and cache._fast is None
