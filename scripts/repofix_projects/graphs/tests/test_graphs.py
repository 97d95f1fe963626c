import unittest

from graphs import (
    CycleError,
    Graph,
    bfs_order,
    connected_components,
    dijkstra,
    kruskal,
    shortest_path,
    topological_sort,
)


def roads():
    g = Graph()
    for a, b, w in [
        ("a", "b", 4),
        ("a", "c", 1),
        ("c", "b", 2),
        ("b", "d", 1),
        ("c", "d", 5),
        ("d", "e", 3),
        ("f", "e", 1),
    ]:
        g.add_edge(a, b, w)
    return g


class GraphTest(unittest.TestCase):
    def test_nodes_edges(self):
        g = roads()
        self.assertEqual(g.nodes(), ["a", "b", "c", "d", "e", "f"])
        self.assertEqual(len(g.edges()), 7)
        self.assertEqual(g.neighbours("a"), [("b", 4), ("c", 1)])

    def test_degrees(self):
        g = roads()
        self.assertEqual((g.in_degree("b"), g.out_degree("b")), (2, 1))
        self.assertEqual((g.in_degree("a"), g.out_degree("a")), (0, 2))

    def test_undirected(self):
        g = Graph(directed=False)
        g.add_edge(2, 1, 7)
        self.assertEqual(g.neighbours(1), [(2, 7)])
        self.assertEqual(g.edges(), [(1, 2, 7)])
        g.remove_edge(1, 2)
        self.assertEqual(g.edges(), [])

    def test_negative_weight(self):
        with self.assertRaises(ValueError):
            Graph().add_edge(1, 2, -1)


class AlgorithmTest(unittest.TestCase):
    def test_bfs(self):
        self.assertEqual(bfs_order(roads(), "a"), ["a", "b", "c", "d", "e"])
        self.assertEqual(bfs_order(roads(), "f"), ["f", "e"])

    def test_dijkstra(self):
        dist, prev = dijkstra(roads(), "a")
        self.assertEqual(dist, {"a": 0, "b": 3, "c": 1, "d": 4, "e": 7})
        self.assertEqual(prev["b"], "c")

    def test_shortest_path(self):
        self.assertEqual(shortest_path(roads(), "a", "e"), (7, ["a", "c", "b", "d", "e"]))
        self.assertEqual(shortest_path(roads(), "a", "a"), (0, ["a"]))
        self.assertEqual(shortest_path(roads(), "e", "a"), None)
        with self.assertRaises(KeyError):
            shortest_path(roads(), "a", "z")

    def test_zero_weight_edges(self):
        g = Graph()
        g.add_edge(1, 2, 0)
        g.add_edge(2, 3, 0)
        g.add_edge(1, 3, 1)
        self.assertEqual(shortest_path(g, 1, 3), (0, [1, 2, 3]))

    def test_topological_sort(self):
        self.assertEqual(topological_sort(roads()), ["a", "c", "b", "d", "f", "e"])
        g = Graph()
        for a, b in [(3, 1), (2, 1), (5, 2), (4, 3)]:
            g.add_edge(a, b)
        self.assertEqual(topological_sort(g), [4, 3, 5, 2, 1])

    def test_cycle(self):
        g = roads()
        g.add_edge("e", "a")
        with self.assertRaises(CycleError):
            topological_sort(g)

    def test_components(self):
        g = Graph()
        for a, b in [(1, 2), (3, 2), (5, 6), (7, 7)]:
            g.add_edge(a, b)
        g.add_node(4)
        self.assertEqual(connected_components(g), [[1, 2, 3], [4], [5, 6], [7]])


class KruskalTest(unittest.TestCase):
    def test_mst(self):
        g = Graph(directed=False)
        for a, b, w in [(1, 2, 3), (2, 3, 1), (1, 3, 2), (3, 4, 4), (2, 4, 5), (5, 6, 1)]:
            g.add_edge(a, b, w)
        self.assertEqual(kruskal(g), (8, [(1, 3, 2), (2, 3, 1), (3, 4, 4), (5, 6, 1)]))

    def test_ties_and_directed(self):
        g = Graph(directed=False)
        for a, b in [(1, 2), (2, 3), (1, 3)]:
            g.add_edge(a, b, 1)
        self.assertEqual(kruskal(g), (2, [(1, 2, 1), (1, 3, 1)]))
        with self.assertRaises(ValueError):
            kruskal(roads())

    def test_union_find_chain(self):
        g = Graph(directed=False)
        for i in range(20):
            g.add_edge(i, i + 1, i % 3)
        total, edges = kruskal(g)
        self.assertEqual((total, len(edges)), (sum(i % 3 for i in range(20)), 20))
