"""Reliability, session 30: the compiled call as an object in a user's program
(``scripts/probe_reliab30.py`` runs ~100 scenarios of user exceptions and the state they
leave, threads, and compiled modules as Python objects, against eager).

Found and fixed:
- Threads whose first ``torch.compile(..., backend="xla")`` overlapped raised
  ``AssertionError: duplicate name: xla`` from Dynamo's backend registry in all but one
  thread (``_registration.py``).
- A lambda defined inside a ``try`` block and compiled (``torch.compile(lambda x: ...)`` in a
  worker's ``try``) ran in eager with a ``FallbackWarning``: its graph's lines were read as
  inside the ``try`` (``capture/_try_blocks.py``).
- A call that failed inside the user's ``with`` block, run again in eager to raise eager's
  error, left the context entered: ``inference_mode()`` stayed on for the thread,
  ``autocast``'s cache of casts was never cleared again (a later autocast region used the
  weights from before an in-place update), ``fwAD.dual_level()`` stayed open (the next one
  raised), ``sdpa_kernel(...)``'s backends stayed restricted (``_unwind.py``).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import warnings

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel

import torch2xla
from tests._util import ProgramCounter

_ROOT = pathlib.Path(__file__).resolve().parent.parent


# -- the backend registry: first compiles from several threads at once ----------------------
_FIRST_COMPILES = """
import threading, torch
n = 6
errors, barrier = [], threading.Barrier(n)
def work(i):
    barrier.wait()
    try:
        f = torch.compile(lambda x: x.sin() + i, backend="xla")
        assert torch.equal(f(torch.ones(3)), torch.ones(3).sin() + i)
    except BaseException as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
[t.start() for t in threads]; [t.join() for t in threads]
assert not errors, errors
import torch2xla
from torch._dynamo.backends.registry import lookup_backend, register_backend
assert lookup_backend("xla") is torch2xla.xla_backend and "xla" in torch._dynamo.list_backends()
register_backend(torch2xla.xla_backend, name="xla")  # (the same backend again: a no-op)
try:
    register_backend(lambda gm, args: gm, name="xla")
except AssertionError as e:
    assert "duplicate name: xla" in str(e)
else:
    raise AssertionError("another backend took the name xla")
print("ok")
"""


def test_threads_first_compiles_at_once_register_the_backend_once():
    env = {**os.environ, "PYTHONPATH": str(_ROOT), "OMP_NUM_THREADS": "1"}
    res = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _FIRST_COMPILES],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().endswith("ok")


# -- a lambda defined inside a try block ----------------------------------------------------
def test_a_lambda_compiled_inside_a_try_block_compiles(monkeypatch):
    torch._dynamo.reset()
    programs = ProgramCounter(monkeypatch)
    x = torch.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", torch2xla.FallbackWarning)
        try:
            f = torch.compile(lambda t: t.cos() * 3, backend="xla")
            out = f(x)
        except ValueError:  # pragma: no cover  (the handler the lambda is inside of)
            out = None
    assert programs.count == 1
    torch.testing.assert_close(out, x.cos() * 3, rtol=1e-6, atol=1e-6)


# -- contexts a failed call entered: the state after it, as eager leaves it -----------------
def _inference_mode(x, idx):
    y = x * 2
    with torch.inference_mode():
        z = y[idx] + 1
    return z * 3


def _inference_state():
    w = torch.ones(2, requires_grad=True)
    return [torch.is_inference_mode_enabled(), torch.is_grad_enabled(), (w * 2).requires_grad]


_lin = torch.nn.Linear(4, 4)


def _autocast(x, idx):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = _lin(x)
        z = y[idx]
    return z


def _autocast_state():
    # autocast caches its casts of the weights until the outermost region leaves: the cache of
    # a region the failed call left open kept the weights from before the update
    x = torch.ones(1, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = _lin(x)
    with torch.no_grad():
        _lin.weight.add_(1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        after = _lin(x)
    with torch.no_grad():
        _lin.weight.sub_(1.0)
    return [torch.is_autocast_enabled("cpu"), torch.equal(before, after)]


def _dual_level(x, idx):
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.ones_like(x))
        y = (d * 2)[idx]
        t = fwAD.unpack_dual(y).tangent
    return t


def _dual_state():
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.ones(2), torch.ones(2))
        return [fwAD.unpack_dual(d * 3).tangent.tolist()]


def _sdpa(q, idx):
    with sdpa_kernel(SDPBackend.MATH):
        y = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        z = y[idx]
    return z


def _sdpa_state():
    return [str(b) for b in _cur_sdpa_kernel_backends(with_priority=True)]


@pytest.mark.parametrize(
    "fn, args, state",
    [
        (_inference_mode, (torch.ones(4, requires_grad=True),), _inference_state),
        (_autocast, (torch.ones(2, 4),), _autocast_state),
        (_dual_level, (torch.ones(3),), _dual_state),
        (_sdpa, (torch.ones(1, 2, 3, 4),), _sdpa_state),
    ],
    ids=["inference_mode", "autocast", "dual_level", "sdpa_kernel"],
)
def test_a_failed_call_leaves_the_users_with_block(fn, args, state):
    torch._dynamo.reset()
    want = state()
    with pytest.raises(IndexError) as eager:
        fn(*args, torch.tensor([9]))
    assert state() == want  # (eager's with block left on the way out)
    compiled = torch.compile(fn, backend="xla")
    with pytest.raises(IndexError) as ours:
        compiled(*args, torch.tensor([9]))
    assert str(eager.value).splitlines()[0] in str(ours.value)
    assert state() == want
    # the next good call and the state after it, as eager's
    good = torch.tensor([0])
    torch.testing.assert_close(compiled(*args, good), fn(*args, good), rtol=0, atol=0)
    assert state() == want


def test_nested_contexts_left_innermost_first():
    def f(x, idx):
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.inference_mode():  # noqa: SIM117
            with torch.autocast("cpu", enabled=False):
                y = (x @ x.T)[idx]
        return y

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="xla")
    x = torch.ones(3, 3)
    with pytest.raises(IndexError):
        compiled(x, torch.tensor([7]))
    assert _inference_state() == [False, True, True]
    assert _autocast_state() == [False, False]
    torch.testing.assert_close(compiled(x, torch.tensor([1])), f(x, torch.tensor([1])))
