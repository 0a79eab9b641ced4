"""Run-wide settings of the kit, set by the pytest plugin (``--parity-examples``).

Kept free of heavy imports so the plugin can set them before anything else loads.
"""

from __future__ import annotations

max_examples_override: int | None = None
"""Set by ``pytest --parity-examples=N``: overrides every parity test's ``max_examples``."""

full_range: bool = False
"""The default of the strategies' ``full_range`` (``pytest --parity-full-range`` sets it):
False draws floats a model sees (``DEFAULT_RANGE``), True the dtype's whole range with
infinities, NaN and the extremes."""
