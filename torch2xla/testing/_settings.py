"""Run-wide settings of the kit, set by the pytest plugin (``--parity-examples``).

Kept free of heavy imports so the plugin can set them before anything else loads.
"""

from __future__ import annotations

DEFAULT_MAX_EXAMPLES = 20
"""Examples per ``@parity_test`` when neither the test nor the command line says otherwise."""

max_examples_override: int | None = None
"""Set by ``pytest --parity-examples=N``: overrides every parity test's ``max_examples``."""
