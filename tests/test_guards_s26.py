"""Calls from other threads while a graph compiles (``scripts/probe_guards26.py`` finds more):
a build must change nothing that another thread's eager code or compiled calls read, and a
signature's program must be keyed by the state its build saw.

- the export turned oneDNN off process-wide: eager ops of other threads ran without it (gelu
  gave -0 where oneDNN gives +0), and a compiled gelu called there keyed "oneDNN off" and
  stored the program it then built with oneDNN on under that key, which later calls with
  oneDNN really off were served (a swapped cache entry);
- the key of a missed call is taken again under the build lock, so state that changed while
  the call waited for another build keys the program the build makes.
"""

from __future__ import annotations

import contextlib
import threading

import torch
import torch.nn.functional as F
from torch import nn

from tests._util import assert_same

# (negative inputs whose gelu is zero: oneDNN's AVX2 kernel gives +0, torch's own -0)
_ZEROS = torch.tensor([-30.0, -0.0, -8.0, 1.0, -0.5, 2.0])


@contextlib.contextmanager
def _onednn(enabled: bool):
    """oneDNN on or off within (``torch.backends.mkldnn.flags`` would warn about TF32)."""
    prev = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(enabled)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(prev)


def _same_signs(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert_same(out, ref)
    assert torch.equal(out.signbit(), ref.signbit()), (out, ref)


def _run_beside_compiles(task, compiles: int = 3) -> int:
    """Runs ``task()`` in a thread, over and over, while this thread compiles ``compiles``
    new functions; returns how many times it ran."""
    stop, count, errors = threading.Event(), [0], []

    def loop():
        while not stop.is_set() or count[0] == 0:
            try:
                task()
            except BaseException as e:  # (re-raised below, in the test's thread)
                errors.append(e)
                return
            count[0] += 1

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    for k in range(compiles):
        f = torch.compile(
            lambda y, k=k: sum(torch.sin(y * j).cumsum(0) for j in range(1, 16)) + k,
            backend="xla",
        )
        f(torch.randn(7))
    stop.set()
    t.join(120)
    assert not t.is_alive(), "the thread did not finish"
    if errors:
        raise errors[0]
    return count[0]


def test_eager_and_compiled_gelu_in_a_thread_while_another_compiles():
    model = nn.Sequential(nn.Linear(6, 6), nn.GELU())
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(6))
        model[0].bias.zero_()
    compiled = torch.compile(model, backend="xla")
    with torch.no_grad():
        _same_signs(compiled(_ZEROS), model(_ZEROS))
        want_eager, want_model = F.gelu(_ZEROS), model(_ZEROS)

        def task():
            # eager's gelu in this thread keeps the process's oneDNN setting, and so does
            # the compiled model's call (the model's Linear turns -0 into +0 before its gelu)
            for _ in range(20):
                _same_signs(F.gelu(_ZEROS), want_eager)
            _same_signs(compiled(_ZEROS), want_model)

        assert _run_beside_compiles(task) > 0
        # every signature cached was built under the oneDNN setting its key names
        for enabled in (False, True, False):
            with _onednn(enabled):
                _same_signs(compiled(_ZEROS), model(_ZEROS))


def test_state_changed_while_a_call_waited_for_another_build():
    f = torch.compile(lambda x: F.gelu(x) * 2, backend="xla")
    x = _ZEROS.clone()
    lock = torch._dynamo.convert_frame.compile_lock
    results: list = []
    t = threading.Thread(target=lambda: results.append(f(x)), daemon=True)
    with _onednn(True):
        f(x)  # (Dynamo's trace and the first program, oneDNN on)
        # another build in progress, which turned oneDNN off for a moment
        with lock, _onednn(False):
            t.start()  # the thread's call keys "off" and waits for the lock
            t.join(2)
        t.join(120)
        assert not t.is_alive()
        _same_signs(results[0], F.gelu(x) * 2)
    with _onednn(False):
        _same_signs(f(x), F.gelu(x) * 2)


def test_first_calls_from_four_threads_with_other_signatures():
    def fn(x, w):
        return (torch.tanh(x @ w) * x.shape[0]).cumsum(0), x.abs().sum()

    compiled = torch.compile(fn, backend="xla")
    w = torch.randn(4, 3, dtype=torch.float64)
    inputs = [
        (torch.randn(5, 4), w.float()),
        (torch.randn(5, 4, dtype=torch.float64), w),
        (torch.randn(2, 4), w.float().requires_grad_()),
        (torch.randn(7, 4), w.float()),
    ]
    barrier, results = threading.Barrier(4), [None] * 4

    def worker(i):
        barrier.wait()
        x, wi = inputs[i]
        if i == 3:
            with torch.no_grad():
                results[i] = compiled(x, wi)
        else:
            results[i] = compiled(x, wi)

    ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not any(t.is_alive() for t in ts)
    for i, (x, wi) in enumerate(inputs):
        with torch.set_grad_enabled(i != 3):
            ref = fn(x, wi)
        assert_same(results[i], ref)
        assert [r.requires_grad for r in results[i]] == [r.requires_grad for r in ref]
    (g,) = torch.autograd.grad(results[2][0].sum(), inputs[2][1])
    (want,) = torch.autograd.grad(fn(*inputs[2])[0].sum(), inputs[2][1])
    assert_same(g, want)
