"""Grad modes inside and around code compiled with backend="xla", strictly against eager:
``torch.inference_mode()`` blocks inside the compiled function (what they make, what is
tracked, eager's error where a tracked op saves a tensor made in one), and
``torch.set_grad_enabled(False)`` called as a function inside, which leaves grad off for
the caller (``scripts/probe_gradmode32.py`` probes more)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from _util import strict_compiled

import torch2xla


def _leaf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_()


def _meta(t):
    return (t.requires_grad, t.grad_fn is None, t.is_leaf, t.is_inference())


def _detached_in_block(x):
    with torch.inference_mode():
        k = x.detach() * 2
    return k, x * 3


def _views_in_block(x):
    with torch.inference_mode():
        v = x[1:]
        w = x.view(3)
    return v, w, x * 2


def _nested_modes(x):
    with torch.inference_mode():
        a = x * 2
        with torch.enable_grad():
            b = x * 3  # (inference mode wins: not tracked)
        with torch.inference_mode(False):
            c = x * 4  # (tracked again)
    return a, b, c, x * 5


@pytest.mark.parametrize("fn", [_detached_in_block, _views_in_block, _nested_modes])
def test_inference_mode_block_inside_compiled_code(fn):
    """The export failed on ``x.detach()`` in the block ("Cannot set version_counter for
    inference tensor") and left the thread in inference mode: the eager run it fell back to
    raised "Inference tensors cannot be saved for backward" at ``x * 3`` after the block.
    Under ``enable_grad()`` inside the block the output required grad where eager's does
    not."""
    torch._dynamo.reset()
    x, xc = _leaf(3), _leaf(3)
    want = fn(x)
    got = strict_compiled(fn)(xc)
    assert not torch.is_inference_mode_enabled()
    assert [_meta(t) for t in got] == [_meta(t) for t in want]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    sum(t.sum() for t in want if t.requires_grad).backward()
    sum(t.sum() for t in got if t.requires_grad).backward()
    torch.testing.assert_close(xc.grad, x.grad, rtol=0, atol=0)


def test_tensor_of_inference_block_saved_by_tracked_op_raises_eagers_error():
    """``x * s``, ``s`` made in an inference-mode block of the compiled function: eager's
    autograd saves ``s`` and raises; the program computed a value."""

    def f(x):
        with torch.inference_mode():
            s = x.detach() * 2
        return (x * s).sum()

    torch._dynamo.reset()
    with pytest.raises(RuntimeError) as eager:
        f(_leaf(3))
    with pytest.raises(RuntimeError) as ours:
        torch.compile(f, backend="xla")(_leaf(3))
    assert str(eager.value).split("\n")[0] in str(ours.value)
    assert not torch.is_inference_mode_enabled()

    def g(x):  # (``x + s`` saves nothing: eager runs it, and so do we)
        with torch.inference_mode():
            s = x.detach() * 2
        return (x + s).sum()

    x, xc = _leaf(3), _leaf(3)
    g(x).backward()
    strict_compiled(g)(xc).backward()
    torch.testing.assert_close(xc.grad, x.grad, rtol=0, atol=0)


def test_set_grad_enabled_called_inside_leaves_grad_off_as_eager():
    """Dynamo records ``torch.set_grad_enabled(False)`` as a switch the graph's run makes and
    nothing after it sets back; the program left grad on, and the caller's next ops (and the
    frame's code after a graph break) were tracked where eager's are not."""

    def f(x):
        a = x * 2
        torch.set_grad_enabled(False)
        return a, x * 3

    def g(x):
        a = x * 2
        torch.set_grad_enabled(False)
        b = a * 3
        torch._dynamo.graph_break()
        c = b + x
        return a, b, c

    for fn in (f, g):
        torch._dynamo.reset()
        want, got = [], []
        for run, out in ((fn, want), (torch.compile(fn, backend="xla"), got)):
            try:
                for _ in range(2):  # (the second call under the mode the first left)
                    torch.set_grad_enabled(True)
                    res = run(_leaf(3))
                    out.append(([_meta(t) for t in res], torch.is_grad_enabled()))
                    out.append((_leaf(3) * 1).requires_grad)  # (the caller's next op)
            finally:
                torch.set_grad_enabled(True)
        assert got == want


def test_set_grad_enabled_true_inside_no_grad_caller():
    def f(x):
        torch.set_grad_enabled(True)
        return x * 2

    torch._dynamo.reset()
    res = []
    for run in (f, strict_compiled(f)):
        x = _leaf(3)
        try:
            with torch.no_grad():
                y = run(x)
                inside = torch.is_grad_enabled()
        finally:
            torch.set_grad_enabled(True)
        y.sum().backward()
        res.append((_meta(y), inside, x.grad.tolist()))
    assert res[1] == res[0]


def test_saved_tensors_hooks_around_a_training_call_apply_as_in_eager():
    """Eager's backward computes from what ``unpack`` returns and packs every tensor it
    saves; a program's backward read its own residuals, which the hooks never saw (a pack
    that zeroes left our gradient unchanged, the hooks fired once and never unpacked)."""

    def f(x):
        return (x.exp() * x).sum()

    torch._dynamo.reset()
    seen = []
    for run in (f, torch.compile(f, backend="xla")):
        calls: list = []
        x = _leaf(3)
        said = (
            contextlib.nullcontext()
            if run is f
            else pytest.warns(torch2xla.FallbackWarning, match="saved_tensors_hooks")
        )
        with (
            said,
            torch.autograd.graph.saved_tensors_hooks(
                lambda t, calls=calls: calls.append("pack") or t * 0,
                lambda t, calls=calls: calls.append("unpack") or t,
            ),
        ):
            out = run(x)
        out.backward()
        y = _leaf(3)
        run(y).backward()  # (no hooks: the program's gradient)
        seen.append((out.item(), x.grad.tolist(), calls, y.grad.tolist()))
    assert seen[1] == seen[0]


@pytest.mark.parametrize("around", ["save_on_cpu", "checkpoint"])
def test_torchs_value_keeping_hooks_around_a_training_call_stay_compiled(around):
    torch._dynamo.reset()
    lin = torch.nn.Linear(3, 2)
    compiled = strict_compiled(lin)  # (strict: a call run in eager raises)
    x = _leaf(4, 3).detach()
    if around == "save_on_cpu":
        with torch.autograd.graph.save_on_cpu():
            out = compiled(x)
    else:
        out = torch.utils.checkpoint.checkpoint(compiled, x, use_reentrant=False)
    out.pow(2).sum().backward()
    got = [p.grad.clone() for p in lin.parameters()]
    lin.zero_grad()
    lin(x).pow(2).sum().backward()
    for g, p in zip(got, lin.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_inference_mode_false_block_called_in_inference_mode():
    """Eager tracks what an ``inference_mode(False)`` block makes even where the caller is in
    inference mode; the program's outputs were all inference tensors (no gradient)."""

    def f(x):
        a = x * 2
        with torch.inference_mode(False):
            b = x.exp()
        return a, b

    torch._dynamo.reset()
    seen = []
    for run in (f, torch.compile(f, backend="xla")):
        x = _leaf(3)
        said = (
            contextlib.nullcontext()
            if run is f
            else pytest.warns(torch2xla.FallbackWarning, match="inference_mode")
        )
        with said, torch.inference_mode():
            a, b = run(x)
        b.sum().backward()
        seen.append(([_meta(a), _meta(b)], a.tolist(), b.tolist(), x.grad.tolist()))
    assert seen[1] == seen[0]
