"""Weighted directed graphs: shortest paths, topological order, components, minimum spanning tree."""

from graphs.algorithms import (
    CycleError,
    bfs_order,
    connected_components,
    dijkstra,
    shortest_path,
    topological_sort,
)
from graphs.graph import Graph
from graphs.mst import kruskal

__all__ = [
    "CycleError",
    "Graph",
    "bfs_order",
    "connected_components",
    "dijkstra",
    "kruskal",
    "shortest_path",
    "topological_sort",
]
