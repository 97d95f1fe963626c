"""Kruskal's minimum spanning forest with a union-find."""


class UnionFind:
    def __init__(self, items):
        self.parent = {item: item for item in items}
        self.rank = {item: 0 for item in items}

    def find(self, item):
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.rank[ra] < self.rank[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        if self.rank[ra] == self.rank[rb]:
            self.rank[ra] += 1
        return True


def kruskal(graph):
    """(total weight, sorted edge list) of a minimum spanning forest of an undirected graph."""
    if graph.directed:
        raise ValueError("kruskal needs an undirected graph")
    sets = UnionFind(graph.nodes())
    chosen = []
    total = 0
    for a, b, w in sorted(graph.edges(), key=lambda e: (e[2], e[0], e[1])):
        if sets.union(a, b):
            chosen.append((a, b, w))
            total += w
    return total, sorted(chosen)
