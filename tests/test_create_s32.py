"""Tensor creation as users write it inside compiled code, against eager (session 32):
``torch.logspace`` in every dtype (eager's CPU kernel, not torch's decomposition), factories of
a dtype eager's CPU kernel lacks (``arange`` of bool, ``eye`` of uint16) and comparisons of a
real tensor with a complex number, which eager refuses."""

from __future__ import annotations

import contextlib

import pytest
import torch

from tests._util import bits_equal, strict_compiled

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
LOGSPACE_DTYPES = [F32, F64, F16, BF16, torch.int64, torch.int32, torch.int16, torch.uint8]
LOGSPACE_DTYPES += [torch.int8, torch.complex64]


def _logspaces(dtype):
    def fn(x):
        return (
            torch.logspace(-1, 2, 5, dtype=dtype),  # (uint8: -1 wraps to 255 first)
            torch.logspace(2, -1, 7, base=2, dtype=dtype),
            torch.logspace(0.5, 3.7, 9, base=3, dtype=dtype),
            torch.logspace(2, 2.5, 11, dtype=dtype),  # (integers: 2.5 truncated to 2)
            torch.logspace(-3, 3, 100, base=0.5, dtype=dtype),
            torch.logspace(1.5, 2, 1, dtype=dtype),  # (one step: base ** start, uncast)
            torch.logspace(0, 3, 0, dtype=dtype),
        )

    return fn


def _assert_logspaces_are_eagers(dtype):
    fn = _logspaces(dtype)
    torch._dynamo.reset()
    outs, refs = strict_compiled(fn)(torch.zeros(1)), fn(torch.zeros(1))
    for out, ref in zip(outs, refs, strict=True):
        bits_equal(out, ref)


@pytest.mark.parametrize("dtype", LOGSPACE_DTYPES, ids=str)
def test_logspace_is_eagers_bit_for_bit(dtype):
    _assert_logspaces_are_eagers(dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16, torch.uint8, torch.int8, torch.int64], ids=str)
def test_logspace_computed_in_the_program_is_eagers(dtype, monkeypatch):
    # where eager cannot compute it for the program (CUDA, a length padded to its bucket);
    # complex: XLA's complex power is not std::pow's to the last bit
    import torch2xla.ops._shape as shape_ops

    monkeypatch.setattr(shape_ops, "_constant", lambda *args: False)
    _assert_logspaces_are_eagers(dtype)


@pytest.mark.parametrize("op", ["ge", "lt", "le_", "gt"])
@pytest.mark.parametrize("dtype", [torch.int64, F32, F64, torch.bool])
def test_ordering_a_real_tensor_with_a_complex_number_raises_eagers_error(op, dtype):
    def fn(x):
        return getattr(x, op)(1j)

    x = torch.tensor([1, 0, 3]).to(dtype)
    with pytest.raises(NotImplementedError) as eager:
        fn(x.clone())
    torch._dynamo.reset()
    with pytest.raises(NotImplementedError, match=str(eager.value).splitlines()[0]):
        strict_compiled(fn)(x.clone())


SCALAR_CALLS = {
    "and_float": lambda x: x & 2.5,
    "or_float_bool": lambda x: x.bool() | 0.5,
    "and_complex": lambda x: x & 1j,
    "lerp_complex_weight": lambda x: torch.lerp(x, x, 1j),
    "add_complex_alpha_bool": lambda x: torch.add(x.bool(), x.bool(), alpha=1j),
    "addcmul_complex_bool": lambda x: torch.addcmul(x.bool(), x.bool(), x.bool(), value=1j),
    # (and calls eager runs)
    "mul_float": lambda x: x * 2.5,
    "clamp_float": lambda x: x.clamp(min=0.5),
    "and_int": lambda x: x & 6,
    "masked_fill_float": lambda x: x.masked_fill(x > 1, 2.5),
    "where_complex": lambda x: torch.where(x > 1, x, 1j),
}


@pytest.mark.parametrize("name", SCALAR_CALLS)
def test_a_python_number_that_changes_an_integer_calls_dtype_is_checked_as_eager(name):
    fn, x = SCALAR_CALLS[name], torch.tensor([1, 2, 3])
    want = _outcome(fn, x, contextlib.nullcontext)
    torch._dynamo.reset()
    got = _outcome(strict_compiled(fn), x, contextlib.nullcontext)
    _same_outcome(got, want)


def test_equality_with_a_complex_number_still_runs():
    def fn(x):
        return x == 1j, x != 2 + 0j, torch.where(x > 0, x, 1j)

    x = torch.tensor([1.0, -2.0])
    torch._dynamo.reset()
    for out, ref in zip(strict_compiled(fn)(x), fn(x), strict=True):
        bits_equal(out, ref)


REFUSED_FACTORIES = {
    "arange_bool": lambda: torch.arange(0, 2, dtype=torch.bool),
    "arange_complex": lambda: torch.arange(3, dtype=torch.complex64),
    "arange_uint16": lambda: torch.arange(3, dtype=torch.uint16),
    "arange_float8": lambda: torch.arange(3, dtype=torch.float8_e4m3fn),
    "linspace_bool": lambda: torch.linspace(0, 1, 3, dtype=torch.bool),
    "logspace_uint16": lambda: torch.logspace(0, 1, 3, dtype=torch.uint16),
    "eye_uint16": lambda: torch.eye(2, dtype=torch.uint16),
    "randperm_bool": lambda: torch.randperm(3, dtype=torch.bool),
}


@pytest.mark.parametrize("name", REFUSED_FACTORIES)
def test_factory_of_a_dtype_eager_lacks_raises_eagers_error(name):
    factory = REFUSED_FACTORIES[name]
    with pytest.raises(NotImplementedError) as eager:
        factory()
    torch._dynamo.reset()
    with pytest.raises(NotImplementedError, match=str(eager.value).splitlines()[0]):
        strict_compiled(lambda x: factory())(torch.zeros(1))


def test_factories_of_dtypes_eager_has_still_run_and_keep_the_generator():
    def fn(x):
        return (
            torch.full((2,), 1, dtype=torch.uint16),
            torch.zeros(2, dtype=torch.float8_e4m3fn),
            torch.linspace(0, 1, 3, dtype=torch.complex64),
            torch.eye(2, dtype=torch.int8),
            torch.randperm(4, dtype=torch.int16).sort().values,
        )

    torch._dynamo.reset()
    compiled = strict_compiled(fn)
    drawn = []
    for _ in range(2):  # (the first call probes eager's randperm: the generator must not move)
        torch.manual_seed(0)
        outs = compiled(torch.zeros(1))
        drawn.append(torch.rand(3))
    assert torch.equal(drawn[0], drawn[1])
    for out, ref in zip(outs, fn(torch.zeros(1)), strict=True):
        assert out.dtype == ref.dtype
        if ref.dtype != torch.float8_e4m3fn:
            bits_equal(out, ref)


# -- a default dtype other than float32 -----------------------------------------------------
def test_first_compile_under_a_half_precision_default_dtype_runs(tmp_path):
    # (torch2xla's import asked eager's quantile of default-dtype tensors: float16 and
    # bfloat16 raised "quantile() input tensor must be either float or double dtype")
    import subprocess
    import sys

    script = tmp_path / "half_default.py"
    script.write_text(
        "import torch\n"
        "torch.set_default_dtype(torch.bfloat16)\n"
        "f = lambda x: x / 2 + torch.ones(2)\n"
        "x = torch.tensor([1, 3])\n"
        "out, ref = torch.compile(f, backend='xla')(x), f(x)\n"
        "assert out.dtype == ref.dtype == torch.bfloat16 and torch.equal(out, ref), (out, ref)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("default", [F16, BF16, F64], ids=str)
def test_probes_of_eager_ignore_the_default_dtype(default):
    from torch2xla.capture._host_checks import _asks_equal
    from torch2xla.ops._common import _e4m3fn_saturates
    from torch2xla.ops._half_product import _lanes
    from torch2xla.ops._sort import _all_nan_position

    probes = [
        _asks_equal,
        _e4m3fn_saturates.__wrapped__,
        lambda: _lanes.__wrapped__("bfloat16"),
        lambda: _all_nan_position.__wrapped__(5),
    ]
    want = [probe() for probe in probes]
    saved = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        got = [probe() for probe in probes]
    finally:
        torch.set_default_dtype(saved)
    assert got == want


MODEL_CASES = {
    "mlp": lambda m, x, seq, spec: m[0](x),
    "lstm": lambda m, x, seq, spec: m[1](seq)[0],
    "istft": lambda m, x, seq, spec: torch.istft(spec, 16),
    "float8": lambda m, x, seq, spec: (x * 100).to(torch.float8_e4m3fn).float(),
    "nanmedian": lambda m, x, seq, spec: torch.where(x > 0, float("nan"), x).nanmedian(0),
}


@pytest.mark.parametrize("default", [F16, F64], ids=str)
def test_float32_code_under_another_default_dtype_is_eagers(default):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    models = (mlp, torch.nn.LSTM(3, 4, batch_first=True))
    args = (
        torch.randn(5, 4),
        torch.randn(2, 3, 3),
        torch.stft(torch.randn(64), 16, return_complex=True),
    )
    saved = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        for name, fn in MODEL_CASES.items():
            torch._dynamo.reset()
            out, ref = strict_compiled(fn)(models, *args), fn(models, *args)
            outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
            for o, r in zip(outs, refs, strict=True):
                assert o.dtype == r.dtype and o.shape == r.shape, name
                torch.testing.assert_close(o, r, rtol=2e-6, atol=1e-6, msg=name)
    finally:
        torch.set_default_dtype(saved)


# -- a default device other than the CPU ------------------------------------------------------
# (meta stands in for a GPU host's ``torch.set_default_device("cuda")``: the probes of eager's
# CPU kernels ran on the default device, the empty outputs of a CPU program were made there)
DEVICE_CASES = {
    "complex_order": (lambda x: x >= 1j, torch.tensor([1, 2])),
    "int_gelu": (lambda x: torch.nn.functional.gelu(x), torch.tensor([1, 2])),
    "bool_argmax": (lambda x: (x > 1).argmax(), torch.tensor([1.0, 2.0])),
    "fill_overflow": (lambda x: x.to(torch.int8).fill_(300), torch.tensor([1.0, 2.0])),
    "half_log_ndtr": (lambda x: torch.special.log_ndtr(x.half()), torch.tensor([1.0, 2.0])),
    "empty_output": (lambda x: (x[:0] * 2, x.split([2, 0])), torch.tensor([1.0, 2.0])),
    "random": (lambda x: torch.rand_like(x) * 0 + x, torch.tensor([1.0, 2.0])),
}


def _same_outcome(got, want):
    if want[0] == "error":
        assert got[0] == "error" and isinstance(got[1], type(want[1])), (got, want)
        assert str(want[1]).splitlines()[0] in str(got[1])
        return
    assert got[0] == "value", got[1]
    outs, refs = torch.utils._pytree.tree_leaves(got[1]), torch.utils._pytree.tree_leaves(want[1])
    for out, ref in zip(outs, refs, strict=True):
        assert out.device == ref.device == torch.device("cpu")
        bits_equal(out, ref)


def _outcome(fn, x, setting):
    with setting():
        try:
            return ("value", fn(x.clone()))
        except Exception as e:  # (the error is the outcome compared)
            return ("error", e)


@pytest.mark.parametrize("how", ["set_default_device", "context"])
@pytest.mark.parametrize("name", DEVICE_CASES)
def test_cpu_code_under_another_default_device_is_eagers(name, how):
    @contextlib.contextmanager
    def set_default():
        torch.set_default_device("meta")
        try:
            yield
        finally:
            torch.set_default_device(None)

    setting = set_default if how == "set_default_device" else lambda: torch.device("meta")
    fn, x = DEVICE_CASES[name]
    want = _outcome(fn, x, setting)
    torch._dynamo.reset()
    got = _outcome(strict_compiled(fn), x, setting)
    _same_outcome(got, want)
