"""torch2xla: ``torch.compile(model, backend="xla")`` runs PyTorch models through JAX/XLA."""

from torch2xla._backend import FallbackWarning, xla_backend
from torch2xla._connected import GradientConnectivityWarning
from torch2xla._errors import (
    CompileError,
    LoweringError,
    OpError,
    OpIndexError,
    OpZeroDivisionError,
    PassError,
    UnsupportedOpsError,
)
from torch2xla._explain import Explanation, explain
from torch2xla._options import OptionError, Options
from torch2xla._passes import fold_constants
from torch2xla._profile import profile
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
    "CompileError",
    "Explanation",
    "FallbackWarning",
    "GradientConnectivityWarning",
    "GraphInfo",
    "LoweringError",
    "OpError",
    "OpIndexError",
    "OpZeroDivisionError",
    "OptionError",
    "Options",
    "PassError",
    "PersistentCacheWarning",
    "RecompileLimitWarning",
    "SignatureInfo",
    "UnsupportedOpsError",
    "cache_info",
    "clear_caches",
    "explain",
    "fold_constants",
    "persistent_cache_dir",
    "profile",
    "set_persistent_cache",
    "xla_backend",
]
