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


@torch.library.custom_op("t2x_counts::opaque", mutates_args=())
def _opaque(x: torch.Tensor) -> torch.Tensor:
    """An op no lowering exists for: the graph splits around it."""
    return x.sin()


@_opaque.register_fake
def _(x):
    return torch.empty_like(x)


def test_split_graph_partitions_compile_once_each():
    # XLA partitions of a split graph compile on their first call (ahead of it, once);
    # their parameters become cached jax.Arrays on later calls without a second compile.
    import warnings

    import torch2xla

    lin, lin2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)

    def f(x):
        return lin2(torch.ops.t2x_counts.opaque(lin(x).relu())).tanh()

    c = torch.compile(f, backend="xla")
    x = torch.randn(3, 4)

    def step():
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", torch2xla.FallbackWarning)
            torch.testing.assert_close(c(x), f(x))

    assert _compiles_per_call(step) == [2, 0, 0, 0]
