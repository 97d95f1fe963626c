"""A set of integers stored as sorted, disjoint, non-adjacent intervals."""

from intervals.interval import Interval


class IntervalSet:
    def __init__(self, intervals=()):
        self._items = []
        for item in intervals:
            self.add(item)

    def __iter__(self):
        return iter(list(self._items))

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return "IntervalSet(" + ", ".join(f"[{i.low}, {i.high}]" for i in self._items) + ")"

    def as_pairs(self):
        return [(i.low, i.high) for i in self._items]

    def size(self):
        """How many integers the set holds."""
        return sum(i.length() for i in self._items)

    def add(self, interval):
        """Insert an interval, merging every interval it touches."""
        merged = interval
        kept = []
        for item in self._items:
            if item.touches(merged):
                merged = merged.hull(item)
            else:
                kept.append(item)
        kept.append(merged)
        kept.sort()
        self._items = kept

    def remove(self, interval):
        """Delete every integer of ``interval`` from the set."""
        kept = []
        for item in self._items:
            kept.extend(item.subtract(interval))
        self._items = kept

    def contains(self, point):
        """Binary search for the interval holding ``point``."""
        lo, hi = 0, len(self._items) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            item = self._items[mid]
            if point < item.low:
                hi = mid - 1
            elif point > item.high:
                lo = mid + 1
            else:
                return True
        return False

    def union(self, other):
        out = IntervalSet(self._items)
        for item in other:
            out.add(item)
        return out

    def intersection(self, other):
        out = IntervalSet()
        for a in self._items:
            for b in other:
                common = a.intersection(b)
                if common is not None:
                    out.add(common)
        return out

    def gaps(self):
        """The intervals between consecutive members, in order."""
        out = []
        for left, right in zip(self._items, self._items[1:]):
            out.append(Interval(left.high + 1, right.low - 1))
        return out
