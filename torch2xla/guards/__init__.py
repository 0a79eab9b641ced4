"""Caches of compiled programs, their keys, and recompile accounting."""

from torch2xla.guards._cache import ProgramCache
from torch2xla.guards._key import SignatureKey

__all__ = ["ProgramCache", "SignatureKey"]
