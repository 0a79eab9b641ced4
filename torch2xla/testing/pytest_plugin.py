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
  Without it, hypothesis's settings decide (its profiles: ``--hypothesis-profile=ci``).
- option ``--parity-full-range``: strategies draw floats over their dtype's whole range, with
  infinities and NaN, instead of values a model sees (``DEFAULT_RANGE``).

The kit itself (torch, hypothesis) is imported only when a test uses it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any

import pytest

_TRACE_ENV = ("TORCH_TRACE", "TORCH_DTRACE", "TORCH_COMPILE_DEBUG")


class _DropRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


_DROP = _DropRecords()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torch2xla", "torch2xla parity testing")
    group.addoption(
        "--parity-examples",
        type=int,
        default=None,
        metavar="N",
        help="examples per torch2xla parity test (overrides each test's max_examples)",
    )
    group.addoption(
        "--parity-full-range",
        action="store_true",
        default=False,
        help="torch2xla strategies draw floats over the dtype's whole range (inf, NaN, "
        "extremes) instead of values a model sees",
    )


def pytest_configure(config: pytest.Config) -> None:
    # torch's structured trace log (for TORCH_TRACE) records every compile at DEBUG for its
    # own handler; pytest (9+) attaches its log capture to that non-propagating logger too,
    # which printed dozens of empty "DEBUG torch.__trace" lines under every failing test that
    # compiles. Unless a trace is asked for, nothing else reads those records.
    if not any(os.environ.get(v) for v in _TRACE_ENV):
        trace_log = logging.getLogger("torch.__trace")
        if _DROP not in trace_log.filters:
            trace_log.addFilter(_DROP)
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
    if config.getoption("--parity-full-range"):
        from torch2xla.testing import _settings

        _settings.full_range = True


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("--parity-examples") is not None:
        from torch2xla.testing import _settings

        _settings.max_examples_override = None
    if config.getoption("--parity-full-range"):
        from torch2xla.testing import _settings

        _settings.full_range = False


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
