"""An LRU cache with optional time-to-live, statistics and a memoizing decorator."""

from lrucache.cache import LRUCache
from lrucache.memo import memoize

__all__ = ["LRUCache", "memoize"]
