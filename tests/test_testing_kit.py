"""The parity kit itself: strategies draw what they promise, and assert_parity / parity_test
fail on planted discrepancies (functions that behave differently under torch.compile)."""

import math

import hypothesis
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch2xla.ops import LOWERINGS
from torch2xla.testing import (
    DEFAULT_RANGE,
    FLOAT_DTYPES,
    KNOWN_LIMITATIONS,
    LAYOUTS,
    Limitation,
    ParityError,
    _settings,
    assert_parity,
    broadcastable_tensors,
    default_tolerance,
    dtypes,
    elements,
    layouts,
    module_inputs,
    mutually_broadcastable_shapes,
    parity_settings,
    parity_test,
    scalars,
    shapes,
    special_values,
    tensors,
)
from torch2xla.testing._parity import _clone_args

pytest_plugins = ["pytester"]

compiling = torch.compiler.is_compiling
fast = hypothesis.settings(max_examples=60, deadline=None)


# -- strategies ---------------------------------------------------------------------------------
@fast
@given(data=st.data(), dtype=dtypes(), shape=shapes(), layout=layouts())
def test_tensors_have_the_drawn_dtype_shape_and_layout(data, dtype, shape, layout):
    t = data.draw(tensors(dtype, shape, layout=layout))
    assert t.dtype == dtype and tuple(t.shape) == shape
    big = [i for i, s in enumerate(shape) if s > 1] if t.numel() else []
    if layout == "transposed" and len(big) >= 2:
        assert not t.is_contiguous()
        assert t.stride()[big[0]] < t.stride()[big[-1]]
    if layout == "sliced" and big:
        assert not t.is_contiguous()
        base = torch.empty(0, dtype=dtype).set_(t.untyped_storage())
        assert base.numel() > t.numel()
        if dtype.is_floating_point:  # the elements between the slices are poison
            assert base.isnan().sum() == base.numel() - t.numel() + t.isnan().sum()
    if layout == "offset" and t.ndim:
        assert t.storage_offset() == 1
    if layout == "expanded" and big:
        assert t.stride()[big[0]] == 0
    if layout == "contiguous":
        assert t.is_contiguous() and t.storage_offset() == 0


@fast
@given(data=st.data(), dtype=st.sampled_from(FLOAT_DTYPES))
def test_float_elements_respect_bounds_and_flags(data, dtype):
    lo, hi = -3.5, 1e3
    t = data.draw(tensors(dtype, (6,), min_value=lo, max_value=hi))
    assert bool(((t >= lo) & (t <= hi)).all()), t
    finite = data.draw(
        tensors(dtype, (6,), allow_nan=False, allow_infinity=False, allow_subnormal=False)
    )
    assert bool(torch.isfinite(finite).all())
    # float64: nothing subnormal in float32 either (eager converts a 0-d float64 beside float32
    # tensors to float32, where XLA's CPU flushes it to zero)
    tiny = torch.finfo(torch.float32 if dtype == torch.float64 else dtype).tiny
    assert not bool(((finite != 0) & (finite.abs() < tiny)).any())


@fast
@given(data=st.data(), dtype=st.sampled_from([torch.int8, torch.uint8, torch.int64]))
def test_int_elements_fit_the_dtype_and_bounds(data, dtype):
    v = data.draw(elements(dtype, min_value=-5, max_value=300))
    ii = torch.iinfo(dtype)
    assert max(ii.min, -5) <= v <= min(ii.max, 300)


@pytest.mark.parametrize(
    ("dtype", "predicate"),
    [
        (torch.float32, lambda t: bool(t.isnan().any())),
        (torch.float32, lambda t: bool((t == math.inf).any())),
        (torch.float32, lambda t: bool(((t == 0) & t.signbit()).any())),
        (torch.float32, lambda t: bool(((t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)).any())),
        (torch.float16, lambda t: bool((t == torch.finfo(t.dtype).max).any())),
        (torch.bfloat16, lambda t: bool(t.isnan().any())),
        (torch.int8, lambda t: bool((t == -128).any())),
        (torch.int64, lambda t: bool((t == 2**63 - 1).any())),
    ],
)
def test_special_values_are_reachable(dtype, predicate):
    search = hypothesis.settings(max_examples=2000, derandomize=True, database=None)
    found = hypothesis.find(tensors(dtype, (4,), allow_subnormal=True), predicate, settings=search)
    assert predicate(found)
    assert set(special_values(torch.bool)) == {False, True}


def test_bfloat16_values_are_exact():
    @fast
    @given(t=tensors(torch.bfloat16, (8,), allow_nan=False))
    def check(t):
        assert torch.equal(t, t.float().to(torch.bfloat16))

    check()


@fast
@given(shapes_=mutually_broadcastable_shapes(3))
def test_mutually_broadcastable_shapes_broadcast(shapes_):
    assert len(shapes_) == 3
    torch.broadcast_shapes(*shapes_)


@fast
@given(ts=broadcastable_tensors(2, dtypes()))
def test_broadcastable_tensors_broadcast(ts):
    torch.broadcast_shapes(*(t.shape for t in ts))


@fast
@given(v=scalars(int, float))
def test_scalars_are_python_numbers(v):
    assert type(v) in (int, float)
    if type(v) is int:
        assert -(2**63) <= v < 2**63


@fast
@given(
    inputs=module_inputs(
        torch.randn(4, 6) * 3, torch.randint(2, 9, (4, 5)), 7, dims=(0,), sizes=(1, 5), random=False
    )
)
def test_module_inputs_keep_dtype_rank_and_range(inputs):
    x, ids, k = inputs
    assert k == 7
    assert x.dtype == torch.float32 and x.shape[1:] == (6,) and x.shape[0] in (1, 5)
    assert ids.dtype == torch.int64 and ids.shape == (x.shape[0], 5)
    assert bool(((ids >= 2) & (ids <= 8)).all())
    assert bool(torch.isfinite(x).all())


@fast
@given(
    inputs=module_inputs(
        torch.randn(50, 6) * 3 + 10,
        torch.randint(2, 9, (50, 5)),
        torch.zeros(50, 2, dtype=torch.bool),
        dims={0: (0, 1), 1: (0,), 2: (0,)},
        sizes=(4, 7),
    )
)
def test_module_inputs_random_values_look_like_the_example(inputs):
    x, ids, mask = inputs
    assert x.shape[0] == ids.shape[0] == mask.shape[0] and x.shape[0] in (4, 7)
    assert x.shape[1] in (4, 7) and ids.shape[1] == 5 and mask.shape[1] == 2
    assert 5 < float(x.mean()) < 15, "normal around the example's mean 10 (std 3)"
    assert bool(((ids >= 2) & (ids <= 8)).all()) and mask.dtype == torch.bool


def test_strategies_reject_bad_arguments():
    with pytest.raises(TypeError, match="random=False"):
        module_inputs(torch.randn(2), min_value=0)
    with pytest.raises(ValueError, match="unknown layout"):
        layouts("diagonal")
    with pytest.raises(ValueError, match="every dtype family"):
        dtypes(floats=False, ints=False, bools=False)
    with pytest.raises(ValueError, match="cannot draw"):
        hypothesis.find(tensors(torch.complex64, (2,)), lambda t: True)
    assert set(LAYOUTS) >= {"contiguous", "transposed", "sliced", "offset"}


def test_clone_args_keeps_layout_and_aliasing():
    base = torch.arange(12.0).reshape(3, 4)
    a, b = base.t(), base[1:, ::2]
    ca, cb = _clone_args((a, b), {})
    assert ca.stride() == a.stride() and cb.stride() == b.stride()
    assert cb.storage_offset() == b.storage_offset()
    assert torch.equal(ca, a) and torch.equal(cb, b)
    assert ca.untyped_storage().data_ptr() == cb.untyped_storage().data_ptr()
    assert ca.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()


# -- assert_parity ------------------------------------------------------------------------------
def test_parity_passes_on_agreeing_function():
    x, y = torch.randn(3, 4), torch.randn(4)

    def f(x, y):
        return x * y + 1, (x > 0).sum(), x.to(torch.float64)

    report = assert_parity(f, x, y)
    assert report.xla_runs == 1
    assert report.max_abs_diff < 1e-5
    assert report.eager[1].dtype == torch.int64


def test_planted_value_discrepancy_is_caught_with_worst_element_and_inputs():
    def f(x):
        return torch.where(x > 100, x + 1, x) if compiling() else x * 1

    x = torch.tensor([1.0, 200.0, 3.0, 250.5])
    with pytest.raises(ParityError) as info:
        assert_parity(f, x)
    msg = str(info.value)
    assert info.value.what == "output"
    assert "2 of 4 elements" in msg
    # The worst element is the one furthest outside its tolerance atol + rtol * |eager|.
    assert "worst at index (1,): eager=200.0, xla=201.0 (abs err 1, rel err 0.005)" in msg
    assert "args[0]: float32[4] = [1.0, 200.0, 3.0, 250.5]" in msg
    assert torch.equal(x, torch.tensor([1.0, 200.0, 3.0, 250.5]))


def test_planted_dtype_discrepancy_is_caught():
    def f(x):
        return x.double() if compiling() else x * 1

    with pytest.raises(ParityError, match="dtype differs: eager torch.float32, XLA torch.float64"):
        assert_parity(f, torch.randn(3))
    assert_parity(f, torch.randn(3), check_dtype=False)


def test_nan_positions_must_match():
    def f(x):
        return torch.where(x > 0, x.log(), x) if compiling() else torch.where(x > 0, x, x)

    x = torch.tensor([-1.0, 0.5])
    assert_parity(lambda x: x.log(), x)  # NaN in the same place on both sides passes
    with pytest.raises(ParityError, match="non-finite: 1 NaN only in XLA"):
        assert_parity(lambda x: (x.log() if compiling() else x * 0 + 1) + 0, x)
    with pytest.raises(ParityError, match="worst at index"):
        assert_parity(f, x)


def test_signed_zero_is_checked_only_on_request():
    def f(x):
        return x * 0 if compiling() else -(x * 0)

    x = torch.tensor([1.0, 2.0])
    assert_parity(f, x)
    with pytest.raises(ParityError, match="signed zeros"):
        assert_parity(f, x, check_signed_zero=True)


def test_tolerance_defaults_follow_dtype_and_can_be_tightened():
    def f(x):
        return x * (1 + 1e-7) if compiling() else x * 1

    assert default_tolerance(torch.float32) == (1.3e-6, 1e-5)
    assert default_tolerance(torch.int32) == (0.0, 0.0)
    x = torch.tensor([1.0, 3.0], dtype=torch.float64)
    assert_parity(f, x, rtol=1e-6)
    with pytest.raises(ParityError, match="beyond rtol=0, atol=0"):
        assert_parity(f, x, rtol=0, atol=0)


def test_integer_results_must_be_exact():
    def f(x):
        return x + 1 if compiling() else x * 1

    with pytest.raises(ParityError, match=r"1 of 1 elements differ \(int32 must match"):
        assert_parity(f, torch.tensor([7], dtype=torch.int32))


def test_planted_input_mutation_is_caught():
    def f(x):
        if compiling():
            x.add_(1)
        return x.sum()

    x = torch.ones(3)
    with pytest.raises(ParityError, match=r"args after the call\[0\]"):
        assert_parity(f, x)
    assert torch.equal(x, torch.ones(3)), "assert_parity must work on copies of the inputs"


def test_inputs_mutated_alike_pass():
    def f(x, y):
        x.mul_(2)
        y[0] = 5
        return x + y

    assert_parity(f, torch.randn(3), torch.zeros(3, dtype=torch.int64))


def test_planted_gradient_discrepancy_is_caught():
    def f(x):
        return x + (x - x.detach()) if compiling() else x * 1

    x = torch.randn(4)
    assert_parity(f, x)  # same values: only the gradient differs
    with pytest.raises(ParityError, match=r"grad of args\[0\]"):
        assert_parity(f, x, grad=True)


def test_gradients_of_modules_compared():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    report = assert_parity(model, torch.randn(5, 4), grad=True)
    assert report.xla_runs >= 1
    assert all(p.grad is None for p in model.parameters()), "the caller's module is untouched"


def test_planted_module_buffer_discrepancy_is_caught():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros((), dtype=torch.int64))

        def forward(self, x):
            self.count += 2 if compiling() else 1
            return x * 2

    with pytest.raises(ParityError, match="module count after the call"):
        assert_parity(Counter(), torch.randn(3))


def test_batchnorm_running_stats_compared():
    bn = torch.nn.BatchNorm1d(3).train()
    assert_parity(bn, torch.randn(6, 3))


def test_grad_without_differentiable_output_is_a_clear_error():
    with pytest.raises(ValueError, match="no output .* requires grad"):
        assert_parity(lambda x: (x > 0).sum(), torch.randn(3), grad=True)


def test_no_xla_graph_is_an_error_unless_allowed():
    def identity(x):
        return x

    with pytest.raises(ParityError, match="no XLA graph ran"):
        assert_parity(identity, torch.randn(2))
    assert assert_parity(identity, torch.randn(2), require_xla=False).xla_runs == 0


def test_ops_without_lowering_raise_unless_fallback_allowed(monkeypatch):
    monkeypatch.delitem(LOWERINGS, torch.ops.aten.cos.default)
    x = torch.randn(3)
    with pytest.raises(ParityError, match="aten.cos"):
        assert_parity(lambda x: torch.cos(x) + 1, x)
    assert_parity(lambda x: torch.cos(x) * 2, x, allow_fallback=True)


def test_eager_errors_reraise_or_must_match():
    def bad(x, y):
        return x + y

    x, y = torch.randn(3), torch.randn(4)
    with pytest.raises(RuntimeError, match="size of tensor") as info:
        assert_parity(bad, x, y)
    assert any("eager PyTorch raised" in n for n in getattr(info.value, "__notes__", []))
    report = assert_parity(bad, x, y, check_errors=True)
    assert isinstance(report.error, RuntimeError)


def test_compiled_only_error_is_a_parity_error(monkeypatch):
    def planted(*args):
        raise ValueError("planted")

    monkeypatch.setitem(LOWERINGS, torch.ops.aten.sin.default, planted)
    with pytest.raises(ParityError, match='raised with backend="xla":\n.*ValueError: planted'):
        assert_parity(lambda x: torch.sin(x) + 1, torch.randn(2))


@parity_settings(max_examples=8)
@given(x=tensors(torch.float32, (3, 4), layout=layouts(), min_value=-1e30, max_value=1e30))
def test_layouts_reach_the_compiled_function(x):
    assert_parity(lambda x: x * 2 + x.sum(0), x)


# -- parity_test --------------------------------------------------------------------------------
def test_parity_test_runs_examples_on_a_bounded_set_of_shapes():
    seen = set()

    @parity_test(tensors(torch.float32, st.sampled_from([(2,), (2, 3)])), max_examples=8)
    def exp_plus(x):
        seen.add(tuple(x.shape))
        return torch.exp(x) + 1

    exp_plus()
    assert seen and seen <= {(2,), (2, 3)}
    assert exp_plus.__name__ == "exp_plus"


def test_parity_test_catches_and_shrinks_a_planted_discrepancy():
    eager_inputs = []

    @parity_test(
        tensors(
            torch.float32, st.sampled_from([(1,), (3,), (2, 3)]), min_value=-1e4, max_value=1e4
        ),
        max_examples=200,
        settings={"derandomize": True},
    )
    def planted(x):
        if compiling():
            return torch.where(x > 100, x * 1.001, x)
        eager_inputs.append(x.clone())
        return x * 1

    with pytest.raises(ParityError) as info:
        planted()
    minimal = eager_inputs[-1]  # hypothesis replays the shrunk example last
    assert minimal.shape == (1,)
    assert 100 < minimal.item() <= 101
    assert "worst at index (0,)" in str(info.value)


def test_parity_test_draws_kwargs_and_rejects_unknown_options():
    @parity_test(
        tensors(torch.float32, (2, 3)), kwargs={"dim": st.sampled_from([0, 1])}, max_examples=4
    )
    def summed(x, dim):
        return x.sum(dim)

    summed()
    with pytest.raises(TypeError, match="options of assert_parity"):
        parity_test(tensors(), tolerance=1)


def test_parity_test_says_what_its_strategy_arguments_take():
    """``args=(s1, s2)`` (a tuple, not a strategy) failed at import with "'tuple' object has
    no attribute 'map'"; a tensor where a strategy belongs, deep inside hypothesis."""
    x, w = tensors(torch.float32, (4, 8)), tensors(torch.float32, (8, 3))
    with pytest.raises(TypeError, match=r"args= takes one strategy .* parity_test\(s1, s2\)"):
        parity_test(args=(x, w))
    with pytest.raises(TypeError, match="argument 1 must be a hypothesis strategy, got Tensor"):
        parity_test(x, torch.ones(3))
    with pytest.raises(TypeError, match="kwargs\\['dim'\\] must be a hypothesis strategy, got int"):
        parity_test(x, kwargs={"dim": 0})


def test_parity_settings_follow_the_command_line_override(monkeypatch):
    assert parity_settings(7).max_examples == 7
    assert parity_settings().max_examples == hypothesis.settings().max_examples  # the profile's
    assert parity_settings(7).deadline is None
    monkeypatch.setattr(_settings, "max_examples_override", 3)
    assert parity_settings(7).max_examples == 3


# -- pytest plugin ------------------------------------------------------------------------------
PLUGIN_TESTS = """
import pytest, torch
from torch2xla.testing import parity_test, tensors

CALLS = []

@parity_test(tensors(torch.float32, (2,)), max_examples=50)
def test_counted(x):
    if not torch.compiler.is_compiling():
        CALLS.append(1)
    return x + 1

def test_count_is_the_option():
    assert len(CALLS) == 3

def test_fixture_catches_planted(parity):
    f = lambda x: x + 1e-3 if torch.compiler.is_compiling() else x * 1
    with pytest.raises(AssertionError, match="gives different results"):
        parity(f, torch.ones(3))

@pytest.mark.parity(atol=1e-2)
def test_marker_sets_defaults(parity):
    f = lambda x: x + 1e-3 if torch.compiler.is_compiling() else x * 1
    parity(f, torch.ones(3))
"""


def test_pytest_plugin_fixture_marker_and_examples_option(pytester):
    pytester.makepyfile(PLUGIN_TESTS)
    result = pytester.runpytest_inprocess("--parity-examples=3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    assert _settings.max_examples_override is None


# -- Limitation ---------------------------------------------------------------------------------
def test_limitation_check_fails_once_the_difference_is_gone():
    def planted(x):
        return x + 1 if compiling() else x * 1

    lim = Limitation(
        "planted", "adds one when compiled", (torch.float32,), planted, (torch.ones(2),)
    )
    assert isinstance(lim.check(), ParityError)
    assert lim.applies("planted", torch.float32) and not lim.applies("planted", torch.float64)
    assert not lim.applies("other", torch.float32)
    assert str(lim) == "planted[float32]"
    fixed = Limitation("fixed", "no longer differs", (), lambda x: x * 2, (torch.ones(2),))
    with pytest.raises(AssertionError, match="no longer shows"):
        fixed.check()
    with pytest.raises(AssertionError, match="no reproducer"):
        Limitation("empty", "no fn").check()


# -- issue 27: the parity tester's first hour --------------------------------------------------
@hypothesis.settings(max_examples=100, deadline=None)
@given(
    x=tensors(torch.float32, (16,), full_range=False),
    h=tensors(torch.float16, (16,), full_range=False),
)
def test_default_values_are_what_a_model_sees(x, h):
    for t in (x, h):
        v = t.double()
        assert bool(torch.isfinite(v).all())
        assert float(v.abs().max()) <= DEFAULT_RANGE
        assert not bool(((v != 0) & (v.abs() < math.sqrt(torch.finfo(t.dtype).tiny))).any())


def test_full_range_is_a_documented_switch(monkeypatch):
    search = hypothesis.settings(max_examples=300, derandomize=True, database=None)
    inf = hypothesis.find(
        tensors(torch.float32, (4,), full_range=True),
        lambda t: bool(t.isinf().any()),
        settings=search,
    )
    assert inf.isinf().any()
    # The run-wide switch (pytest --parity-full-range) is the default of full_range=None.
    monkeypatch.setattr(_settings, "full_range", False)
    with pytest.raises(hypothesis.errors.NoSuchExample):
        hypothesis.find(
            tensors(torch.float32, (4,)), lambda t: bool((t.abs() > 10).any()), settings=search
        )


W16 = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))


def test_the_obvious_first_test_passes_with_default_values():
    """Issue 27: gelu(x @ w) over default float32 tensors failed with eager=nan xla=inf."""

    @parity_test(
        tensors(torch.float32, (4, 16), full_range=False),
        max_examples=25,
        settings={"derandomize": True, "database": None},
    )
    def gelu_of_product(x):
        return torch.nn.functional.gelu(x @ W16)

    gelu_of_product()


def test_a_failure_on_extreme_values_names_the_documented_limitation():
    x, y = torch.tensor([[math.inf, 0.0], [0.0, 0.0]]), torch.tensor(1.1342745902071442e38)
    with pytest.raises(ParityError) as info:  # XLA rounds 3 * y (inf) before the sub: NaN
        assert_parity(lambda x, y: torch.sub(x, y, alpha=3), x, y)
    assert "extremes" in [lim.op for lim in info.value.limitations]
    assert "known limitation (extremes)" in str(info.value)
    assert "torch2xla/testing/README.md" in str(info.value)
    with pytest.raises(ParityError) as info:
        assert_parity(torch.log, torch.tensor([1e-45, 2.0]))
    assert [lim.op for lim in info.value.limitations] == ["subnormal"]
    with pytest.raises(ParityError) as info:  # an ordinary bug hits no limitation
        assert_parity(lambda x: x + 1 if compiling() else x * 1, torch.ones(3))
    assert info.value.limitations == () and "known limitation" not in str(info.value)


@pytest.mark.parametrize("lim", KNOWN_LIMITATIONS, ids=str)
def test_known_limitations_still_hold_and_are_detected(lim):
    error = lim.check()
    assert lim in error.limitations


def test_failure_report_is_short_and_reproduces(tmp_path):
    def planted(x):
        return x + 1e-3 if compiling() else x * 1

    x = torch.randn(6, 20)
    with pytest.raises(ParityError) as info:
        assert_parity(planted, x, grad=True)
    error = info.value
    message = str(error)
    assert type(error).__module__ == "torch2xla.testing"
    lines = message.splitlines()
    assert len(lines) <= 12, message
    assert lines[0].endswith('gives different results with backend="xla" than in eager PyTorch:')
    assert "output float32[6, 20]: 120 of 120 elements" in message  # shape, dtype, count
    assert "beyond rtol=1.3e-06, atol=1e-05 (float32 default)" in message  # the tolerance
    assert "worst at index" in message
    assert "args[0]: float32[6, 20] in [" in message  # inputs: shape, dtype, range
    assert "grad=True" in error.reproduce
    scope = {"torch": torch, "torch2xla": __import__("torch2xla.testing"), "planted": planted}
    with pytest.raises(ParityError):  # the reproduction fails the same way, on the same inputs
        exec(error.reproduce, scope)


def test_parity_report_repr_is_compact_with_html():
    # (positive data: a sum of 4096 numbers of both signs near 0 is ill-conditioned, and its
    # rounding, not the report, is what a draw could fail on; this test is about the report)
    report = assert_parity(lambda x: (x * 2, x.sum()), torch.rand(64, 64))
    text = repr(report)
    assert "tensor(" not in text and len(text) < 120, text
    assert "float32[64, 64], float32[]" in text and "xla_runs=1" in text
    page = report._repr_html_()
    assert page.startswith("<table") and "float32[64, 64]" in page


FAILING_PARITY_TEST = """
import torch
from torch2xla.testing import parity_test, tensors

W = torch.randn(16, 8)

@parity_test(tensors(torch.float32, (4, 16)), max_examples=30)
def test_planted(x):
    y = torch.nn.functional.gelu(x @ W)
    return y + 1e-3 if torch.compiler.is_compiling() else y
"""


def test_a_failing_parity_test_prints_a_short_report(pytester):
    """Issue 27: ~250 lines, most of them the kit's frames, torch's trace log and hypothesis's
    explanation of the kit's own lines."""
    pytester.makepyfile(FAILING_PARITY_TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "torch2xla.testing.ParityError: test_planted gives different results" in out
    assert "torch2xla/testing/_parity.py" not in out  # no kit frames
    assert "torch.__trace" not in out  # no torch trace-log lines
    assert "always and only run by failing test cases" not in out
    assert "reproduce:" in out and "test_planted.parity_target" in out
    # Under CI (CI=true) pytest repeats the whole message in its short summary, and
    # hypothesis's ci profile adds its reproduce_failure line: the report before it is bounded.
    report = out.split("short test summary info")[0]
    assert len(report.splitlines()) <= 45, out


PROFILE_TESTS = """
import torch
from torch2xla.testing import parity_test, tensors

CALLS = {"profile": 0, "asked": 0}

@parity_test(tensors(torch.float32, (3,)))
def test_follows_the_profile(x):
    if not torch.compiler.is_compiling():
        CALLS["profile"] += 1
    return x * 2

@parity_test(tensors(torch.float32, (3,)), max_examples=5)
def test_asks_for_five(x):
    if not torch.compiler.is_compiling():
        CALLS["asked"] += 1
    return x * 2

def test_counts():
    assert CALLS == {"profile": 3, "asked": 5}, CALLS
"""


def test_hypothesis_profiles_are_respected(pytester):
    """Issue 27: `pytest --hypothesis-profile=ci` with max_examples=3 still ran 20 examples."""
    pytester.makeconftest(
        "from hypothesis import settings\n"
        "settings.register_profile('three', max_examples=3, database=None)\n"
    )
    pytester.makepyfile(PROFILE_TESTS)
    previous = hypothesis.settings.get_current_profile_name()
    try:
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "--hypothesis-profile=three"
        )
    finally:
        hypothesis.settings.load_profile(previous)
    result.assert_outcomes(passed=3)
