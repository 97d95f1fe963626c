"""A closed interval [low, high] of integers."""


class Interval:
    """The integers low..high, both included; low <= high."""

    __slots__ = ("low", "high")

    def __init__(self, low, high):
        if low > high:
            raise ValueError(f"empty interval: {low} > {high}")
        self.low = low
        self.high = high

    def __repr__(self):
        return f"Interval({self.low}, {self.high})"

    def __eq__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return self.low == other.low and self.high == other.high

    def __hash__(self):
        return hash((self.low, self.high))

    def __lt__(self, other):
        return (self.low, self.high) < (other.low, other.high)

    def length(self):
        """How many integers the interval holds."""
        return self.high - self.low + 1

    def contains(self, point):
        return self.low <= point <= self.high

    def overlaps(self, other):
        """Whether the two intervals share at least one integer."""
        return self.low <= other.high and other.low <= self.high

    def touches(self, other):
        """Whether the intervals overlap or are adjacent (so their union is one interval)."""
        return self.low <= other.high + 1 and other.low <= self.high + 1

    def intersection(self, other):
        """The common part, or None."""
        if not self.overlaps(other):
            return None
        return Interval(max(self.low, other.low), min(self.high, other.high))

    def hull(self, other):
        """The smallest interval that covers both."""
        return Interval(min(self.low, other.low), max(self.high, other.high))

    def subtract(self, other):
        """The parts of self not in other, as a list of 0, 1 or 2 intervals."""
        if not self.overlaps(other):
            return [self]
        parts = []
        if self.low < other.low:
            parts.append(Interval(self.low, other.low - 1))
        if other.high < self.high:
            parts.append(Interval(other.high + 1, self.high))
        return parts
