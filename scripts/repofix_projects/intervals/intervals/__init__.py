"""Closed integer intervals, an interval set and a centred interval tree."""

from intervals.interval import Interval
from intervals.intervalset import IntervalSet
from intervals.tree import IntervalTree

__all__ = ["Interval", "IntervalSet", "IntervalTree"]
