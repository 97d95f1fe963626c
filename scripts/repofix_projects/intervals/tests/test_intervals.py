import unittest

from intervals import Interval, IntervalSet, IntervalTree


class IntervalTest(unittest.TestCase):
    def test_length(self):
        self.assertEqual(Interval(3, 7).length(), 5)
        self.assertEqual(Interval(4, 4).length(), 1)

    def test_empty_is_refused(self):
        with self.assertRaises(ValueError):
            Interval(5, 4)

    def test_contains(self):
        self.assertEqual(Interval(1, 3).contains(3), True)
        self.assertEqual(Interval(1, 3).contains(4), False)
        self.assertEqual(Interval(1, 3).contains(0), False)

    def test_overlaps(self):
        self.assertEqual(Interval(1, 5).overlaps(Interval(5, 9)), True)
        self.assertEqual(Interval(1, 4).overlaps(Interval(5, 9)), False)
        self.assertEqual(Interval(6, 9).overlaps(Interval(1, 5)), False)

    def test_touches(self):
        self.assertEqual(Interval(1, 4).touches(Interval(5, 9)), True)
        self.assertEqual(Interval(1, 3).touches(Interval(5, 9)), False)
        self.assertEqual(Interval(10, 12).touches(Interval(5, 9)), True)

    def test_intersection(self):
        self.assertEqual(Interval(1, 6).intersection(Interval(4, 9)), Interval(4, 6))
        self.assertEqual(Interval(1, 2).intersection(Interval(4, 9)), None)

    def test_hull(self):
        self.assertEqual(Interval(1, 2).hull(Interval(7, 9)), Interval(1, 9))

    def test_subtract_middle(self):
        self.assertEqual(
            Interval(1, 10).subtract(Interval(4, 6)), [Interval(1, 3), Interval(7, 10)]
        )

    def test_subtract_edges(self):
        self.assertEqual(Interval(1, 10).subtract(Interval(0, 4)), [Interval(5, 10)])
        self.assertEqual(Interval(1, 10).subtract(Interval(8, 20)), [Interval(1, 7)])
        self.assertEqual(Interval(1, 10).subtract(Interval(0, 20)), [])
        self.assertEqual(Interval(1, 10).subtract(Interval(12, 20)), [Interval(1, 10)])

    def test_order_and_repr(self):
        self.assertEqual(
            sorted([Interval(3, 4), Interval(1, 9), Interval(1, 2)]),
            [Interval(1, 2), Interval(1, 9), Interval(3, 4)],
        )
        self.assertEqual(repr(Interval(2, 5)), "Interval(2, 5)")


class IntervalSetTest(unittest.TestCase):
    def test_add_merges_overlapping(self):
        s = IntervalSet([Interval(1, 3), Interval(2, 6)])
        self.assertEqual(s.as_pairs(), [(1, 6)])

    def test_add_merges_adjacent(self):
        s = IntervalSet([Interval(1, 3), Interval(4, 6), Interval(10, 12)])
        self.assertEqual(s.as_pairs(), [(1, 6), (10, 12)])

    def test_add_bridges_many(self):
        s = IntervalSet([Interval(1, 2), Interval(5, 6), Interval(9, 10)])
        s.add(Interval(3, 8))
        self.assertEqual(s.as_pairs(), [(1, 10)])

    def test_add_keeps_sorted(self):
        s = IntervalSet([Interval(20, 30), Interval(1, 2), Interval(10, 11)])
        self.assertEqual(s.as_pairs(), [(1, 2), (10, 11), (20, 30)])

    def test_size(self):
        s = IntervalSet([Interval(1, 3), Interval(10, 10)])
        self.assertEqual(s.size(), 4)
        self.assertEqual(len(s), 2)

    def test_remove(self):
        s = IntervalSet([Interval(1, 10), Interval(20, 30)])
        s.remove(Interval(5, 22))
        self.assertEqual(s.as_pairs(), [(1, 4), (23, 30)])

    def test_contains(self):
        s = IntervalSet([Interval(1, 3), Interval(7, 9), Interval(20, 25)])
        self.assertEqual(
            [p for p in range(0, 27) if s.contains(p)], [1, 2, 3, 7, 8, 9, 20, 21, 22, 23, 24, 25]
        )

    def test_union(self):
        a = IntervalSet([Interval(1, 3)])
        b = IntervalSet([Interval(4, 5), Interval(9, 9)])
        self.assertEqual(a.union(b).as_pairs(), [(1, 5), (9, 9)])
        self.assertEqual(a.as_pairs(), [(1, 3)])

    def test_intersection(self):
        a = IntervalSet([Interval(1, 10), Interval(20, 30)])
        b = IntervalSet([Interval(5, 25)])
        self.assertEqual(a.intersection(b).as_pairs(), [(5, 10), (20, 25)])

    def test_gaps(self):
        s = IntervalSet([Interval(1, 3), Interval(7, 9), Interval(12, 15)])
        self.assertEqual([(g.low, g.high) for g in s.gaps()], [(4, 6), (10, 11)])
        self.assertEqual(IntervalSet([Interval(1, 3)]).gaps(), [])

    def test_repr(self):
        self.assertEqual(
            repr(IntervalSet([Interval(1, 3), Interval(5, 6)])), "IntervalSet([1, 3], [5, 6])"
        )


class IntervalTreeTest(unittest.TestCase):
    def setUp(self):
        self.items = [
            Interval(1, 5),
            Interval(3, 9),
            Interval(8, 12),
            Interval(15, 20),
            Interval(18, 18),
            Interval(0, 30),
            Interval(22, 25),
        ]
        self.tree = IntervalTree(self.items)

    def brute_stab(self, p):
        return sorted(i for i in self.items if i.contains(p))

    def test_stab_matches_brute_force(self):
        for p in range(-2, 33):
            self.assertEqual(self.tree.stab(p), self.brute_stab(p))

    def test_stab_examples(self):
        self.assertEqual(self.tree.stab(4), [Interval(0, 30), Interval(1, 5), Interval(3, 9)])
        self.assertEqual(self.tree.stab(31), [])

    def test_overlapping_matches_brute_force(self):
        for low in range(-2, 32, 3):
            for high in range(low, low + 7):
                want = sorted(i for i in self.items if i.overlaps(Interval(low, high)))
                self.assertEqual(self.tree.overlapping(low, high), want)

    def test_overlapping_example(self):
        self.assertEqual(self.tree.overlapping(13, 16), [Interval(0, 30), Interval(15, 20)])

    def test_insert(self):
        self.tree.insert(Interval(40, 41))
        self.assertEqual(len(self.tree), 8)
        self.assertEqual(self.tree.stab(40), [Interval(40, 41)])

    def test_empty_tree(self):
        self.assertEqual(IntervalTree().stab(3), [])
        self.assertEqual(IntervalTree().depth(), 0)

    def test_depth_is_logarithmic(self):
        tree = IntervalTree([Interval(i, i + 1) for i in range(0, 200, 3)])
        self.assertLessEqual(tree.depth(), 10)
