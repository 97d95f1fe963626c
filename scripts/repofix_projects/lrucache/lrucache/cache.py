"""LRUCache: a bounded mapping that evicts the least recently used entry."""

from lrucache.linked import LinkedList, Node

_MISSING = object()


class LRUCache:
    """At most ``capacity`` entries; ``ttl`` seconds of life per entry (None: forever).

    ``clock`` is a zero-argument function returning the time in seconds.
    """

    def __init__(self, capacity, ttl=None, clock=None, on_evict=None):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock or (lambda: 0.0)
        self.on_evict = on_evict
        self._map = {}
        self._order = LinkedList()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self):
        self._purge()
        return len(self._map)

    def __contains__(self, key):
        node = self._map.get(key)
        return node is not None and not self._expired(node)

    def _expired(self, node):
        return node.expires is not None and self.clock() >= node.expires

    def _drop(self, node, evicted):
        self._order.unlink(node)
        del self._map[node.key]
        if evicted:
            self.evictions += 1
            if self.on_evict is not None:
                self.on_evict(node.key, node.value)

    def _purge(self):
        for node in list(self._map.values()):
            if self._expired(node):
                self._drop(node, evicted=False)

    def get(self, key, default=None):
        node = self._map.get(key)
        if node is None:
            self.misses += 1
            return default
        if self._expired(node):
            self._drop(node, evicted=False)
            self.misses += 1
            return default
        self.hits += 1
        self._order.move_to_front(node)
        return node.value

    def peek(self, key, default=None):
        """The value without touching recency or statistics."""
        node = self._map.get(key)
        if node is None or self._expired(node):
            return default
        return node.value

    def put(self, key, value, ttl=_MISSING):
        life = self.ttl if ttl is _MISSING else ttl
        expires = None if life is None else self.clock() + life
        node = self._map.get(key)
        if node is not None:
            node.value = value
            node.expires = expires
            self._order.move_to_front(node)
            return
        if len(self._map) >= self.capacity:
            self._purge()
        if len(self._map) >= self.capacity:
            self._drop(self._order.back(), evicted=True)
        node = Node(key, value, expires)
        self._map[key] = node
        self._order.push_front(node)

    def pop(self, key, default=_MISSING):
        node = self._map.get(key)
        if node is None or self._expired(node):
            if default is _MISSING:
                raise KeyError(key)
            return default
        self._drop(node, evicted=False)
        return node.value

    def keys(self):
        """Keys from most to least recently used."""
        self._purge()
        return self._order.keys()

    def resize(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        while len(self._map) > capacity:
            self._drop(self._order.back(), evicted=True)

    def stats(self):
        total = self.hits + self.misses
        ratio = self.hits / total if total else 0.0
        return {
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "hit_ratio": round(ratio, 3),
        }
