"""The fake run refuses a CPU 0-d tensor beside CUDA ones where eager's CUDA kernel does
(``capture/_device_checks.py``), with fake CUDA tensors, which need no GPU; the user-level
cases run on the GPU in tests/test_gpu.py."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from torch2xla.capture import _device_checks

aten = torch.ops.aten


@pytest.fixture
def fake():
    with FakeTensorMode():
        yield torch.empty(3, device="cuda"), torch.empty((), device="cpu")


@pytest.mark.parametrize(
    "op", [aten.clamp.Tensor, aten.clamp_min.Tensor, aten.logaddexp.default, aten.gcd.default]
)
def test_ops_with_device_checks_refuse_a_cpu_scalar(fake, op):
    x, s = fake
    error = _device_checks.mixed_device_error(op, [x, s])
    assert isinstance(error, RuntimeError)
    assert "Expected all tensors to be on the same device" in str(error)
    assert _device_checks.mixed_device_error(op, [x, x]) is None  # one device


@pytest.mark.parametrize(
    "op", [aten.add.Tensor, aten.mul.Tensor, aten.where.self, aten.masked_fill.Tensor]
)
def test_tensor_iterator_ops_take_a_cpu_scalar(fake, op):
    x, s = fake
    assert _device_checks.mixed_device_error(op, [x, s]) is None


def test_fake_runs_check_only_inside_checking(fake):
    _device_checks.install()
    x, s = fake
    assert torch.clamp(x, s, s).device.type == "cuda"  # outside: fake tensors' own rule
    with _device_checks.checking():
        with pytest.raises(RuntimeError, match="wrapper_CUDA_clamp_Tensor"):
            torch.clamp(x, s, s)
        assert torch.add(x, s).device.type == "cuda"
    assert torch.clamp(x, s, s).device.type == "cuda"
