"""Traversal and path algorithms."""

import heapq
from collections import deque


class CycleError(ValueError):
    pass


def bfs_order(graph, start):
    """Nodes in breadth-first order from ``start``, neighbours in sorted order."""
    seen = {start}
    order = []
    queue = deque([start])
    while queue:
        node = queue.popleft()
        order.append(node)
        for nxt, _ in graph.neighbours(node):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return order


def dijkstra(graph, source):
    """(distance, predecessor) maps from ``source`` over reachable nodes."""
    dist = {source: 0}
    prev = {source: None}
    heap = [(0, source)]
    done = set()
    while heap:
        d, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        for nxt, weight in graph.neighbours(node):
            candidate = d + weight
            if nxt not in dist or candidate < dist[nxt]:
                dist[nxt] = candidate
                prev[nxt] = node
                heapq.heappush(heap, (candidate, nxt))
    return dist, prev


def shortest_path(graph, source, target):
    """(total weight, node list) of a shortest path, or None when unreachable."""
    if source not in graph or target not in graph:
        raise KeyError("unknown node")
    dist, prev = dijkstra(graph, source)
    if target not in dist:
        return None
    path = []
    node = target
    while node is not None:
        path.append(node)
        node = prev[node]
    path.reverse()
    return dist[target], path


def topological_sort(graph):
    """Kahn's algorithm; ties broken by smallest node first. CycleError on a cycle."""
    indegree = {node: 0 for node in graph.nodes()}
    for _, b, _ in graph.edges():
        indegree[b] += 1
    ready = [node for node, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for nxt, _ in graph.neighbours(node):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    if len(order) != len(graph):
        raise CycleError("the graph has a cycle")
    return order


def connected_components(graph):
    """Components of the graph seen as undirected, each sorted, ordered by smallest node."""
    undirected = {node: set() for node in graph.nodes()}
    for a, b, _ in graph.edges():
        undirected[a].add(b)
        undirected[b].add(a)
    seen = set()
    components = []
    for node in graph.nodes():
        if node in seen:
            continue
        stack = [node]
        seen.add(node)
        component = []
        while stack:
            current = stack.pop()
            component.append(current)
            for nxt in undirected[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        components.append(sorted(component))
    return components
