"""Caches of compiled programs, their keys, bucketing, the persistent cache, and visibility.

See ``torch2xla/guards/README.md`` for the design and a map of the files.
"""

from torch2xla.guards._cache import CompileRecord, ProgramCache
from torch2xla.guards._graph import BUILD_LOCK, GraphGuards
from torch2xla.guards._info import CacheInfo, GraphInfo, SignatureInfo, cache_info, clear_caches
from torch2xla.guards._key import SignatureKey
from torch2xla.guards._log import BucketingWarning, IntArgumentWarning, RecompileLimitWarning
from torch2xla.guards._persistent import (
    PersistentCacheWarning,
    persistent_cache_dir,
    set_persistent_cache,
)
from torch2xla.guards.bucketing._bucket import Bucketing, BucketSpec

__all__ = [
    "BUILD_LOCK",
    "BucketSpec",
    "Bucketing",
    "BucketingWarning",
    "CacheInfo",
    "CompileRecord",
    "GraphGuards",
    "GraphInfo",
    "IntArgumentWarning",
    "PersistentCacheWarning",
    "ProgramCache",
    "RecompileLimitWarning",
    "SignatureInfo",
    "SignatureKey",
    "cache_info",
    "clear_caches",
    "persistent_cache_dir",
    "set_persistent_cache",
]
