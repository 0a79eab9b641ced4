"""Issue 22 item 9: where a program runs when its tensors live on several devices (CPU 0-d
tensors beside CUDA tensors). The CUDA behaviour itself is tested in tests/test_gpu.py; the
choice is a pure function, tested here on any machine."""

import torch

from tests._util import assert_same
from torch2xla.runtime._interop import program_device, same_device

CPU, CUDA, CUDA1 = torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda", 1)


def test_an_accelerator_input_wins_over_cpu_inputs_in_any_position():
    assert program_device([CPU, CUDA]) == CUDA  # a step counter first, the model's tensors after
    assert program_device([CUDA, CPU, CPU]) == CUDA
    assert program_device([CPU, CUDA1, CUDA]) == CUDA1  # the first accelerator


def test_outputs_decide_only_without_accelerator_inputs():
    assert program_device([CPU], [CUDA]) == CUDA  # x.cuda() inside the graph
    assert program_device([], [CPU, CUDA]) == CUDA  # factories only
    assert program_device([CUDA], [CPU]) == CUDA  # .cpu() inside the graph
    assert program_device([CPU, CPU], [CPU]) == CPU
    assert program_device([], []) == CPU


def test_same_device_reads_no_index_as_device_zero():
    assert same_device(torch.device("cuda"), CUDA)
    assert not same_device(CUDA, CUDA1)
    assert not same_device(CPU, CUDA)
    assert same_device(torch.device("cpu"), torch.device("cpu", 0))


def test_cpu_scalars_and_a_mutated_cpu_counter_on_cpu():
    # The CPU side of the GPU tests: same patterns, one device.
    def f(x, n, step):
        step.add_(1)
        return x + n, x * step

    x, n = torch.randn(4), torch.tensor(3)
    step, ref_step = torch.tensor(0), torch.tensor(0)
    compiled = torch.compile(f, backend="xla", options={"strict": True})
    for _ in range(3):
        assert_same(compiled(x, n, step), f(x, n, ref_step))
        assert_same(step, ref_step)
