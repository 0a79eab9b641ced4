"""XLA compiles each program once: calls after the first never compile again."""

import torch
from jax import monitoring

_COMPILES = [0]


def _listener(name, *args, **kwargs):
    if name == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


monitoring.register_event_duration_secs_listener(_listener)


def _compiles_per_call(step, calls=4):
    counts = []
    for _ in range(calls):
        before = _COMPILES[0]
        step()
        counts.append(_COMPILES[0] - before)
    return counts


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_inference_compiles_once():
    c = torch.compile(_mlp(), backend="xla")
    x = torch.randn(3, 4)

    def step():
        with torch.no_grad():
            c(x)

    assert _compiles_per_call(step) == [1, 0, 0, 0]


def test_new_input_tensors_each_call_do_not_recompile():
    c = torch.compile(_mlp(), backend="xla")

    def step():
        with torch.no_grad():
            c(torch.randn(3, 4))

    assert _compiles_per_call(step) == [1, 0, 0, 0]


def test_training_compiles_forward_and_backward_once():
    model = _mlp()
    c = torch.compile(model, backend="xla")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)

    def step():
        c(x).square().sum().backward()
        opt.step()
        opt.zero_grad()

    counts = _compiles_per_call(step)
    assert counts[0] == 2 and counts[1:] == [0, 0, 0], counts
