"""A memory-aware topological order (Kahn's algorithm with a greedy choice).

Among the nodes whose inputs are ready, run the one that frees the most bytes net of what it
allocates (inputs whose last reader it is, minus its output unless that output is a view), so
that short-lived branches finish before new ones start; ties go to the capture order, which
keeps the order stable and readable.
"""

from __future__ import annotations

import math

from ..ir.graph import Graph
from ..ir.ops import op_info


def _nbytes(graph: Graph, name: str) -> int:
    info = graph.tensors[name]
    return info.dtype.itemsize * math.prod(info.shape)


def memory_order(graph: Graph) -> list:
    """The nodes of ``graph`` in a topological order that keeps few bytes live at once."""
    position = {id(n): i for i, n in enumerate(graph.order())}
    ready_names = set(graph.inputs) | {n for n, t in graph.tensors.items() if t.data is not None}
    waiting = {id(n): len({i for i in n.inputs if i not in ready_names}) for n in graph.nodes}
    readers_left = {name: len(graph.readers(name)) for name in graph.tensors}
    ready = [n for n in graph.nodes if waiting[id(n)] == 0]
    order = []
    while ready:
        best = max(ready, key=lambda n: (_score(graph, n, readers_left), -position[id(n)]))
        ready.remove(best)
        order.append(best)
        for name in set(best.inputs):
            readers_left[name] -= 1
        for reader in graph.readers(best.output):
            waiting[id(reader)] -= 1
            if waiting[id(reader)] == 0:
                ready.append(reader)
    if len(order) != len(graph.nodes):
        raise ValueError("memory_order: the graph has a cycle")
    return order


def _score(graph: Graph, node, readers_left: dict) -> int:
    freed = sum(
        _nbytes(graph, name)
        for name in set(node.inputs)
        if readers_left[name] == 1
        and graph.tensors[name].data is None
        and name not in graph.outputs
    )
    alloc = 0 if op_info(node.op).view is not None else _nbytes(graph, node.output)
    return freed - alloc
