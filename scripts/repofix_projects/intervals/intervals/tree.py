"""A centred interval tree answering stabbing and overlap queries."""

from intervals.interval import Interval


class _Node:
    __slots__ = ("center", "by_low", "by_high", "left", "right")

    def __init__(self, center, members):
        self.center = center
        self.by_low = sorted(members, key=lambda i: i.low)
        self.by_high = sorted(members, key=lambda i: i.high, reverse=True)
        self.left = None
        self.right = None


def _build(intervals):
    if not intervals:
        return None
    points = sorted([i.low for i in intervals] + [i.high for i in intervals])
    center = points[len(points) // 2]
    left = [i for i in intervals if i.high < center]
    right = [i for i in intervals if i.low > center]
    here = [i for i in intervals if i.low <= center <= i.high]
    node = _Node(center, here)
    node.left = _build(left)
    node.right = _build(right)
    return node


class IntervalTree:
    """Static tree over a list of intervals (rebuilt on insert)."""

    def __init__(self, intervals=()):
        self._intervals = list(intervals)
        self._root = _build(self._intervals)

    def __len__(self):
        return len(self._intervals)

    def insert(self, interval):
        self._intervals.append(interval)
        self._root = _build(self._intervals)

    def stab(self, point):
        """Every interval containing ``point``, sorted."""
        found = []
        node = self._root
        while node is not None:
            if point < node.center:
                for item in node.by_low:
                    if item.low > point:
                        break
                    found.append(item)
                node = node.left
            elif point > node.center:
                for item in node.by_high:
                    if item.high < point:
                        break
                    found.append(item)
                node = node.right
            else:
                found.extend(node.by_low)
                break
        return sorted(found)

    def overlapping(self, low, high):
        """Every interval sharing an integer with [low, high], sorted."""
        query = Interval(low, high)
        found = []
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            for item in node.by_low:
                if item.overlaps(query):
                    found.append(item)
            if low < node.center:
                stack.append(node.left)
            if high > node.center:
                stack.append(node.right)
        return sorted(found)

    def depth(self):
        def walk(node):
            if node is None:
                return 0
            return 1 + max(walk(node.left), walk(node.right))

        return walk(self._root)
