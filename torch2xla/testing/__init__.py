"""torch2xla.testing: hypothesis strategies and parity assertions between XLA and eager PyTorch.

For our own test suite and for users who want to know whether ``backend="xla"`` gives their
model eager PyTorch's numbers across many inputs, and the smallest input where it does not::

    import torch
    from torch2xla.testing import assert_parity, parity_test, tensors

    assert_parity(model, torch.randn(8, 16), grad=True)

    @parity_test(tensors(torch.float32, (4, 16)))
    def test_model(x):
        return model(x)

Needs ``hypothesis`` (``pip install "torch2xla[test]"``). Names load on first use, so the
pytest plugin (``torch2xla.testing.pytest_plugin``) imports nothing heavy at pytest startup.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEFAULT_TOLERANCES": "_compare",
    "ParityError": "_compare",
    "default_tolerance": "_compare",
    "KNOWN_LIMITATIONS": "_limits",
    "Limitation": "_limits",
    "ParityReport": "_parity",
    "assert_parity": "_parity",
    "xla_graph_runs": "_parity",
    "parity_settings": "_decorator",
    "parity_test": "_decorator",
    "DEFAULT_RANGE": "_strategies",
    "FLOAT_DTYPES": "_strategies",
    "INT_DTYPES": "_strategies",
    "LAYOUTS": "_strategies",
    "broadcastable_tensors": "_strategies",
    "dtypes": "_strategies",
    "elements": "_strategies",
    "layouts": "_strategies",
    "module_inputs": "_strategies",
    "mutually_broadcastable_shapes": "_strategies",
    "scalars": "_strategies",
    "shapes": "_strategies",
    "special_values": "_strategies",
    "tensors": "_strategies",
}

__all__ = [
    "DEFAULT_RANGE",
    "DEFAULT_TOLERANCES",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "KNOWN_LIMITATIONS",
    "LAYOUTS",
    "Limitation",
    "ParityError",
    "ParityReport",
    "assert_parity",
    "broadcastable_tensors",
    "default_tolerance",
    "dtypes",
    "elements",
    "layouts",
    "module_inputs",
    "mutually_broadcastable_shapes",
    "parity_settings",
    "parity_test",
    "scalars",
    "shapes",
    "special_values",
    "tensors",
    "xla_graph_runs",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'torch2xla.testing' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(f"torch2xla.testing.{module}"), name)
    except ModuleNotFoundError as e:
        if e.name == "hypothesis":
            raise ImportError(
                "torch2xla.testing needs hypothesis: pip install 'torch2xla[test]'"
            ) from e
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
