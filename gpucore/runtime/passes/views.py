"""View passes: chains of view ops become one ``strided`` view of a contiguous tensor.

After ``compose_views`` every view in the graph reads a tensor that some compute node (or the
graph's inputs) produced, with its whole layout (shape, element strides, offset) in one node:
the planner then decides once whether it aliases its source (contiguous, or read in place by a
consumer that accepts strides: gemm's transposed operands, attention's permuted heads) or is
copied. Views of constants are left to constant folding.
"""

from __future__ import annotations

from ..ir.graph import Graph
from ..ir.ops import data_start, op_info, proto_array


def _is_view(graph: Graph, name: str) -> bool:
    node = graph.producer.get(name)
    return node is not None and op_info(node.op).view is not None


def layout_of(shape: tuple, itemsize: int, chain: list) -> tuple:
    """(shape, element strides, element offset) of the views ``chain`` [(op, attrs), ...]
    applied in order to a C-contiguous array of ``shape``."""
    arr = proto_array(shape, itemsize)
    start = data_start(arr)
    for op, attrs in chain:
        arr = op_info(op).view(arr, attrs)
    offset = (data_start(arr) - start) // itemsize
    return arr.shape, tuple(s // itemsize for s in arr.strides), offset


def compose_views(graph: Graph) -> bool:
    """Replace each view whose source is another view (or any registry view op) by one
    ``strided`` node reading the chain's root."""
    changed = False
    for node in list(graph.order()):
        info = op_info(node.op)
        if info.view is None or node.op == "strided" and not _is_view(graph, node.inputs[0]):
            continue
        if node.output in graph.outputs:
            continue  # outputs keep their names (the planner copies or aliases them as they are)
        chain = [(node.op, node.attrs)]
        root = node.inputs[0]
        while _is_view(graph, root):
            src = graph.producer[root]
            chain.append((src.op, src.attrs))
            root = src.inputs[0]
        if graph.is_constant(root):
            continue
        chain.reverse()
        rinfo = graph.tensors[root]
        shape, strides, offset = layout_of(rinfo.shape, rinfo.dtype.itemsize, chain)
        attrs = {"shape": shape, "strides": strides, "offset": offset}
        out = graph.tensors[node.output]
        new = graph.add_node("strided", [root], out.shape, out.dtype, attrs)
        graph.replace_uses(node.output, new.output)
        graph.remove_node(node)
        changed = True
    for node in reversed(graph.order()):  # the chains' inner views, now read by nothing
        if node.op == "strided" and not graph.consumers[node.output]:
            if node.output not in graph.outputs:
                graph.remove_node(node)
    return changed


def is_contiguous_layout(shape: tuple, strides: tuple) -> bool:
    """Whether element strides describe a C-contiguous layout of shape."""
    acc = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != acc:
            return False
        acc *= s
    return True


def sink_views(graph: Graph) -> bool:
    """``u(reshape(y))`` for a one-input elementwise op u and a contiguous reshape read only
    there becomes ``reshape(u(y))``, so that u meets y's producer (a gemm then takes u as its
    epilogue, whatever reshape the model wrote between them)."""
    changed = False
    for node in list(graph.order()):
        if node not in graph.nodes or len(node.inputs) != 1 or not op_info(node.op).inplace:
            continue
        view = graph.producer.get(node.inputs[0])
        if view is None or view.op != "strided" or graph.sole_consumer(view.output) is not node:
            continue
        a = view.attrs
        if a["offset"] != 0 or not is_contiguous_layout(a["shape"], a["strides"]):
            continue
        src = graph.tensors[view.inputs[0]]
        out = graph.tensors[node.output]
        if out.dtype is not src.dtype or graph.producer.get(src.name) is None:
            continue
        inner = graph.add_node(node.op, [src.name], src.shape, out.dtype, dict(node.attrs))
        outer = graph.add_node("strided", [inner.output], out.shape, out.dtype, dict(a))
        graph.bypass(node, outer.output)
        changed = True
    return changed
