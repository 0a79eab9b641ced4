"""Generation paths found in session 23 (ProphetNet's greedy ``generate``), compiled with
backend="xla", against eager: exact values and a bounded number of programs.

The class: an int argument that sizes a tensor the graph makes, no input carrying that size.
ProphetNet's n-gram attention breaks the graph at a data-dependent check
(``torch_compilable_check(position_ids[0][0] == key_sequence_length - 1)``); the resumed frame
gets ``key_sequence_length`` as a Python int and builds ``arange(key_sequence_length)`` (the
relative-position buckets) from it. Dynamo makes the int a symbol of its own (no tensor input
has that size), and bucketing refused it as "an int argument, not a tensor's size": one
program per generated token. Such an int is now traced as a size and padded to buckets like
an input's dimension, where the padding analysis proves it exact."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import torch2xla
from tests._util import assert_same, fresh_dynamo


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    with fresh_dynamo():
        yield


def _run(fn, calls, programs=None, warns=False):
    compiled = torch.compile(fn, backend="xla")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if warns else "error", torch2xla.IntArgumentWarning)
        for args in calls:
            assert_same(compiled(*args), fn(*args))
    info = torch2xla.cache_info(compiled)
    if programs is not None:
        assert info.misses <= programs, info
    return info


def _bucketed(info, label):
    return any(label in b for g in info for b in g.bucketed)


def _positions(n):
    return torch.tensor([[n - 1], [max(n - 3, 0)]])


def test_arange_of_an_int_argument():
    # ProphetNet's pattern: relative positions arange(n) - pos, bucketed by a log distance
    def fn(pos, n):
        rel = torch.arange(0, n).unsqueeze(0).repeat(2, 1) - pos
        rel = torch.max(-rel, torch.zeros_like(rel))
        large = 4 + torch.log(rel.float() / 4) / math.log(4) * 4
        return torch.where(rel < 4, rel, large.clamp(max=7).int()).view(-1, n)

    sizes = range(3, 20)
    # first value static (Dynamo), then buckets 4, 8, 16, 32 of n
    info = _run(fn, [(_positions(n), n) for n in sizes], programs=5)
    assert _bucketed(info, "n"), info


@pytest.mark.parametrize(
    "case", ["zeros", "cumsum", "as_value", "softmax", "matmul", "index_input", "two_ints"]
)
def test_int_argument_sizing_a_tensor(case):
    w = torch.randn(5, 3)

    def fn(x, n):
        if case == "zeros":
            return torch.zeros(n, 3) + x.sum()
        if case == "cumsum":
            return torch.ones(n, 2).cumsum(0) * x.sum()
        if case == "as_value":  # the real value, not the bucket
            return (torch.arange(n) + n) * 2, torch.full((2,), 1.0) * n
        if case == "softmax":  # reductions over the int's dim see no padding
            y = torch.arange(n, dtype=torch.float32).unsqueeze(0) * x[:, :1]
            return y.softmax(-1), y.sum(-1), y.amax(-1)
        if case == "matmul":  # contracting over it
            y = torch.arange(n, dtype=torch.float32).unsqueeze(1) * x[:1, :3] + 1
            return (y.t() @ y) + w.sum()
        if case == "index_input":  # indexes a real input with arange(n)
            return x[:, torch.arange(n) % x.shape[1]]
        m = n + 1  # noqa: F841 (two ints, one derived)
        return torch.arange(n).unsqueeze(1) * torch.arange(3)

    x = torch.randn(2, 5)
    sizes = [3, 4, 5, 6, 7, 9, 12, 17, 2, 3, 1, 5]
    info = _run(fn, [(x, n) for n in sizes], programs=8)
    assert _bucketed(info, "n"), info


def test_small_and_negative_values_run_exact_programs():
    # traced as a size (at least 2): 0, 1 and negative values are not padded
    def fn(x, n):
        return torch.arange(max(n, 0)).float() * 2 + x.sum(), x[:n].sum(0)

    x = torch.randn(6, 3)
    info = _run(fn, [(x, n) for n in (4, 5, 7, 1, 0, -2, 3, 6, -1, 2)], warns=True)
    signatures = [s.signature for g in info for s in g.signatures]
    assert any("n (bucket)=8" in s for s in signatures), signatures
    # (lowered from Dynamo's graph, not from the trace that assumed n >= 2)
    small = [s for s in signatures if any(f"n={v}" in s for v in (1, 0, -2, -1))]
    assert len(small) == 4 and not any("(bucket)" in s for s in small), signatures


def test_an_int_argument_used_otherwise_still_warns():
    # a reshape of a real input by the int: not padded, one program per value, warned once
    def fn(x, n):
        return x.reshape(n, -1).cumsum(0)

    compiled = torch.compile(fn, backend="xla")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for n in (2, 3, 4, 6, 12):
            x = torch.randn(12)
            assert_same(compiled(x, n), fn(x, n))
    assert any(issubclass(w.category, torch2xla.IntArgumentWarning) for w in seen)


# -- ProphetNet -----------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")


@pytest.mark.slow  # (about 40 s on 2 cores; the class is covered above)
@torch.no_grad()
def test_prophetnet_greedy_generate_programs_bounded():
    from scripts._hf_archs3 import NEW3

    torch.manual_seed(0)
    model = NEW3["prophetnet"].build().eval()
    torch.manual_seed(1)
    ids = torch.randint(3, 90, (1, 7))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def generate(n):
        kw = {"max_new_tokens": n, "min_new_tokens": n, "do_sample": False, "num_beams": 1}
        return model.generate(**inputs, **kw, disable_compile=True)

    expected = generate(14)
    model.forward = compiled = torch.compile(model.forward, backend="xla")
    assert torch.equal(generate(14), expected)
    info = torch2xla.cache_info(compiled)
    # The decoder's graphs between ProphetNet's graph breaks each compile per bucket of the
    # cache's length (2, 4, 8, 16), not per token: the relative-position graph included.
    per_graph = {g.name: g.misses for g in info}
    rel = [g for g in info if "get_predict_relative_pos_embeddings" in (g.frame or "")]
    assert any("key_sequence_length" in b for g in rel for b in g.bucketed), info
    assert max(g.misses for g in rel) <= 4, per_graph
    assert max(per_graph.values()) <= 6, per_graph
