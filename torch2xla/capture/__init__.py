"""Graph-level work before translation: rewrites of the Dynamo and ATen graphs
(``_rewrites``) and the analyses that annotate an ATen graph's nodes for their lowerings
(``_annotate``; the ``node.meta`` keys are in ``torch2xla/ops/_registry.py``)."""

from torch2xla.capture._annotate import annotate
from torch2xla.capture._rewrites import preserve_rnns, preserve_sdpa, strip_effect_tokens

__all__ = ["annotate", "preserve_rnns", "preserve_sdpa", "strip_effect_tokens"]
