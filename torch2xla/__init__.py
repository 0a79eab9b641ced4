"""torch2xla: ``torch.compile(model, backend="xla")`` runs PyTorch models through JAX/XLA."""

import importlib.metadata as _metadata

from torch2xla._backend import FallbackWarning, xla_backend
from torch2xla._custom_ops import register_lowering
from torch2xla._errors import (
    CompileError,
    LoweringError,
    OpAssertionError,
    OpError,
    OpIndexError,
    OpLinAlgError,
    OpNotImplementedError,
    OpZeroDivisionError,
    PassError,
    UnsupportedOpsError,
)
from torch2xla._options import OptionError, Options
from torch2xla.autodiff._connected import GradientConnectivityWarning
from torch2xla.capture._passes import fold_constants
from torch2xla.debug._explain import Explanation, explain
from torch2xla.debug._profile import profile
from torch2xla.guards import (
    BucketingWarning,
    CacheInfo,
    GraphInfo,
    IntArgumentWarning,
    PersistentCacheWarning,
    RecompileLimitWarning,
    SignatureInfo,
    cache_info,
    clear_caches,
    persistent_cache_dir,
    set_persistent_cache,
)

try:
    __version__ = _metadata.version("torch2xla")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BucketingWarning",
    "CacheInfo",
    "CompileError",
    "Explanation",
    "FallbackWarning",
    "GradientConnectivityWarning",
    "GraphInfo",
    "IntArgumentWarning",
    "LoweringError",
    "OpAssertionError",
    "OpError",
    "OpIndexError",
    "OpLinAlgError",
    "OpNotImplementedError",
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
    "register_lowering",
    "set_persistent_cache",
    "xla_backend",
]
