"""torch2xla: ``torch.compile(model, backend="xla")`` runs PyTorch models through JAX/XLA."""

from torch2xla._backend import FallbackWarning, xla_backend
from torch2xla._errors import LoweringError, UnsupportedOpsError
from torch2xla._options import Options

__all__ = [
    "FallbackWarning",
    "LoweringError",
    "Options",
    "UnsupportedOpsError",
    "xla_backend",
]
