"""torch2xla: ``torch.compile(model, backend="xla")`` runs PyTorch models through JAX/XLA."""

from torch2xla._backend import FallbackWarning, xla_backend
from torch2xla._errors import LoweringError, UnsupportedOpsError
from torch2xla._options import Options
from torch2xla.guards import (
    BucketingWarning,
    CacheInfo,
    GraphInfo,
    PersistentCacheWarning,
    RecompileLimitWarning,
    SignatureInfo,
    cache_info,
    clear_caches,
    persistent_cache_dir,
    set_persistent_cache,
)

__all__ = [
    "BucketingWarning",
    "CacheInfo",
    "FallbackWarning",
    "GraphInfo",
    "LoweringError",
    "Options",
    "PersistentCacheWarning",
    "RecompileLimitWarning",
    "SignatureInfo",
    "UnsupportedOpsError",
    "cache_info",
    "clear_caches",
    "persistent_cache_dir",
    "set_persistent_cache",
    "xla_backend",
]
