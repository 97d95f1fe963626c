"""An adjacency-map graph."""


class Graph:
    def __init__(self, directed=True):
        self.directed = directed
        self._adj = {}

    def add_node(self, node):
        self._adj.setdefault(node, {})

    def add_edge(self, a, b, weight=1):
        if weight < 0:
            raise ValueError("negative weights are not supported")
        self.add_node(a)
        self.add_node(b)
        self._adj[a][b] = weight
        if not self.directed:
            self._adj[b][a] = weight

    def remove_edge(self, a, b):
        del self._adj[a][b]
        if not self.directed:
            del self._adj[b][a]

    def nodes(self):
        return sorted(self._adj)

    def neighbours(self, node):
        """(neighbour, weight) pairs sorted by neighbour."""
        return sorted(self._adj[node].items())

    def edges(self):
        """(a, b, weight) triples, each undirected edge once (a <= b)."""
        out = []
        for a in sorted(self._adj):
            for b, w in sorted(self._adj[a].items()):
                if self.directed or a <= b:
                    out.append((a, b, w))
        return out

    def in_degree(self, node):
        return sum(1 for a in self._adj if node in self._adj[a])

    def out_degree(self, node):
        return len(self._adj[node])

    def __contains__(self, node):
        return node in self._adj

    def __len__(self):
        return len(self._adj)
