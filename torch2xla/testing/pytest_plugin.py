"""pytest plugin of torch2xla (entry point ``pytest11``): parity tests in a line or two.

- fixture ``parity``: :func:`torch2xla.testing.assert_parity`, with defaults taken from the
  test's ``parity`` marker::

      @pytest.mark.parity(grad=True, atol=1e-4)
      def test_model(parity):
          parity(MyModel(), torch.randn(8, 16))

- marker ``parity(**options)``: default options (``grad``, ``rtol``, ``atol``, ...) for the
  ``parity`` fixture.
- option ``--parity-examples=N``: examples per ``@parity_test`` / ``parity_settings()`` test,
  overriding their own ``max_examples`` (small for quick runs, large for nightly ones).

The kit itself (torch, hypothesis) is imported only when a test uses it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torch2xla", "torch2xla parity testing")
    group.addoption(
        "--parity-examples",
        type=int,
        default=None,
        metavar="N",
        help="examples per torch2xla parity test (overrides each test's max_examples)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "parity(**options): default assert_parity options (grad, rtol, atol, ...) for the "
        "`parity` fixture of torch2xla",
    )
    n = config.getoption("--parity-examples")
    if n is not None:
        if n < 1:
            raise pytest.UsageError(f"--parity-examples must be at least 1, got {n}")
        from torch2xla.testing import _settings

        _settings.max_examples_override = n


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("--parity-examples") is not None:
        from torch2xla.testing import _settings

        _settings.max_examples_override = None


@pytest.fixture
def parity(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``assert_parity`` with the options of the test's ``parity`` marker as defaults.

    Call it as ``parity(fn_or_module, *args, **options)``; it returns the ``ParityReport``.
    """
    from torch2xla.testing import assert_parity

    defaults: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("parity"))):
        if marker.args:
            raise pytest.UsageError("the parity marker takes keyword options only")
        defaults.update(marker.kwargs)
    return functools.partial(assert_parity, **defaults)
