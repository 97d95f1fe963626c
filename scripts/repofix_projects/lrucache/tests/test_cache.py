import unittest

from lrucache import LRUCache, memoize


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class CacheTest(unittest.TestCase):
    def test_get_put(self):
        c = LRUCache(2)
        c.put("a", 1)
        self.assertEqual(c.get("a"), 1)
        self.assertEqual(c.get("b"), None)
        self.assertEqual(c.get("b", 7), 7)

    def test_evicts_least_recent(self):
        c = LRUCache(2)
        c.put("a", 1)
        c.put("b", 2)
        c.get("a")
        c.put("c", 3)
        self.assertEqual(c.keys(), ["c", "a"])
        self.assertEqual("b" in c, False)

    def test_update_moves_to_front(self):
        c = LRUCache(2)
        c.put("a", 1)
        c.put("b", 2)
        c.put("a", 10)
        c.put("c", 3)
        self.assertEqual(c.keys(), ["c", "a"])
        self.assertEqual(c.get("a"), 10)

    def test_capacity_one(self):
        c = LRUCache(1)
        c.put(1, "x")
        c.put(2, "y")
        self.assertEqual(c.keys(), [2])
        self.assertEqual(len(c), 1)

    def test_bad_capacity(self):
        with self.assertRaises(ValueError):
            LRUCache(0)

    def test_peek_does_not_touch(self):
        c = LRUCache(2)
        c.put("a", 1)
        c.put("b", 2)
        self.assertEqual(c.peek("a"), 1)
        c.put("c", 3)
        self.assertEqual(c.keys(), ["c", "b"])
        self.assertEqual(c.stats()["hits"], 0)

    def test_pop(self):
        c = LRUCache(3)
        c.put("a", 1)
        self.assertEqual(c.pop("a"), 1)
        self.assertEqual(c.pop("a", None), None)
        with self.assertRaises(KeyError):
            c.pop("a")
        self.assertEqual(len(c), 0)

    def test_stats(self):
        c = LRUCache(1)
        c.put("a", 1)
        c.get("a")
        c.get("a")
        c.get("z")
        c.put("b", 2)
        self.assertEqual(c.stats(), {"hits": 2, "misses": 1, "evictions": 1, "hit_ratio": 0.667})

    def test_stats_empty(self):
        self.assertEqual(LRUCache(3).stats()["hit_ratio"], 0.0)

    def test_on_evict(self):
        seen = []
        c = LRUCache(2, on_evict=lambda k, v: seen.append((k, v)))
        for i in range(5):
            c.put(i, i * i)
        self.assertEqual(seen, [(0, 0), (1, 1), (2, 4)])

    def test_resize(self):
        c = LRUCache(4)
        for i in range(4):
            c.put(i, i)
        c.resize(2)
        self.assertEqual(c.keys(), [3, 2])
        self.assertEqual(c.stats()["evictions"], 2)
        with self.assertRaises(ValueError):
            c.resize(0)


class TTLTest(unittest.TestCase):
    def setUp(self):
        self.clock = Clock()
        self.cache = LRUCache(3, ttl=10, clock=self.clock)

    def test_alive_before_expiry(self):
        self.cache.put("a", 1)
        self.clock.now = 9.5
        self.assertEqual(self.cache.get("a"), 1)

    def test_expires_exactly_at_ttl(self):
        self.cache.put("a", 1)
        self.clock.now = 10
        self.assertEqual(self.cache.get("a"), None)
        self.assertEqual(self.cache.stats()["misses"], 1)

    def test_per_entry_ttl(self):
        self.cache.put("a", 1, ttl=2)
        self.cache.put("b", 2, ttl=None)
        self.clock.now = 100
        self.assertEqual(self.cache.get("a"), None)
        self.assertEqual(self.cache.get("b"), 2)

    def test_expired_entries_make_room_without_eviction(self):
        self.cache.put("a", 1, ttl=1)
        self.cache.put("b", 2)
        self.cache.put("c", 3)
        self.clock.now = 5
        self.cache.put("d", 4)
        self.assertEqual(self.cache.keys(), ["d", "c", "b"])
        self.assertEqual(self.cache.stats()["evictions"], 0)

    def test_len_and_contains_skip_expired(self):
        self.cache.put("a", 1, ttl=1)
        self.cache.put("b", 2)
        self.clock.now = 3
        self.assertEqual("a" in self.cache, False)
        self.assertEqual("b" in self.cache, True)
        self.assertEqual(len(self.cache), 1)

    def test_put_refreshes_ttl(self):
        self.cache.put("a", 1)
        self.clock.now = 8
        self.cache.put("a", 2)
        self.clock.now = 15
        self.assertEqual(self.cache.get("a"), 2)


class MemoizeTest(unittest.TestCase):
    def test_caches_calls(self):
        calls = []

        @memoize(capacity=2)
        def square(x):
            calls.append(x)
            return x * x

        self.assertEqual([square(3), square(3), square(4)], [9, 9, 16])
        self.assertEqual(calls, [3, 4])
        self.assertEqual(square.__name__, "square")

    def test_kwargs_are_part_of_the_key(self):
        @memoize()
        def power(x, p=2):
            return x**p

        self.assertEqual(power(2), 4)
        self.assertEqual(power(2, p=3), 8)
        self.assertEqual(power(2, p=3), 8)
        self.assertEqual(power.cache.stats()["hits"], 1)

    def test_capacity_bound(self):
        @memoize(capacity=2)
        def ident(x):
            return x

        for i in range(5):
            ident(i)
        self.assertEqual(ident.cache.keys(), [(4,), (3,)])

    def test_none_results_are_cached(self):
        calls = []

        @memoize()
        def nothing(x):
            calls.append(x)

        nothing(1)
        nothing(1)
        self.assertEqual(calls, [1])
