"""GEMM passes: matmul and linear become ``gemm`` nodes, and what a GEMM can absorb is folded
into its flags: transposed operands (``trans_a`` / ``trans_b``, the source read in place) and
multiplications by a scalar constant, of an operand or of the result (``alpha``); a product of
rows flattened to 2-D and reshaped back (how ``[*, K] @ [K, N]`` is traced) is computed in the
batched shape, so that what reads it (a bias, an activation) meets the gemm.

Run before constant folding: folding would materialise a transposed weight and hide the
pattern.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Graph
from ..ir.ops import op_info
from .views import is_contiguous_layout, layout_of


def matmul_to_gemm(graph: Graph) -> bool:
    """``matmul(a, b)`` with both operands at least 2-D, and ``linear(x, w[, b])``, become
    ``gemm`` (linear: ``trans_b``; its bias stays the gemm's bias)."""
    changed = False
    for node in list(graph.order()):
        if node.op == "matmul":
            a, b = (graph.tensors[n] for n in node.inputs)
            if len(a.shape) < 2 or len(b.shape) < 2:
                continue
            attrs = {"trans_a": False, "trans_b": False, "alpha": 1.0, "act": None}
        elif node.op == "linear":
            if len(graph.tensors[node.inputs[0]].shape) < 1:
                continue
            attrs = {"trans_a": False, "trans_b": True, "alpha": 1.0, "act": None}
        else:
            continue
        node.op = "gemm"
        node.attrs = attrs
        changed = True
    if changed:
        graph._order = None
    return changed


def _swaps_last_two(graph: Graph, name: str):
    """The source tensor when ``name`` is a ``strided`` view that only swaps the last two dims of
    a contiguous tensor (a ``.T`` / ``transpose(-2, -1)``), else None."""
    node = graph.producer.get(name)
    if node is None or node.op != "strided" or node.attrs["offset"] != 0:
        return None
    src = graph.tensors[node.inputs[0]]
    shape = src.shape
    if len(shape) < 2 or node.attrs["shape"] != shape[:-2] + (shape[-1], shape[-2]):
        return None
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    strides = tuple(reversed(strides))
    want = strides[:-2] + (strides[-1], strides[-2])
    dims = node.attrs["shape"]
    if any(d != 1 and s != w for d, s, w in zip(dims, node.attrs["strides"], want)):
        return None
    return node.inputs[0]


def absorb_transposes(graph: Graph) -> bool:
    """A gemm operand that is a transpose of the last two dims reads its source with the flag
    flipped; an operand that is a strided view with its rows along the second-last dim (unit
    stride there, not in the last) is read as the view with the last two dims swapped."""
    changed = False
    for node in list(graph.nodes):
        if node.op != "gemm":
            continue
        for i, flag in ((0, "trans_a"), (1, "trans_b")):
            src = _swaps_last_two(graph, node.inputs[i])
            if src is None:
                src = _swapped_view(graph, node.inputs[i])
            if src is not None:
                graph.set_input(node, i, src)
                node.attrs[flag] = not node.attrs[flag]
                changed = True
    return changed


def _swapped_view(graph: Graph, name: str):
    """For a ``strided`` view whose last stride is not 1 but whose second-last is, a new
    ``strided`` view of the same source with the last two dims swapped."""
    node = graph.producer.get(name)
    if node is None or node.op != "strided" or len(node.attrs["shape"]) < 2:
        return None
    shape, strides = node.attrs["shape"], node.attrs["strides"]
    if strides[-1] == 1 or strides[-2] != 1 or shape[-1] == 1:
        return None
    attrs = {
        "shape": shape[:-2] + (shape[-1], shape[-2]),
        "strides": strides[:-2] + (strides[-1], strides[-2]),
        "offset": node.attrs["offset"],
    }
    info = graph.tensors[name]
    new = graph.add_node("strided", [node.inputs[0]], attrs["shape"], info.dtype, attrs)
    return new.output


def _scalar_constant(graph: Graph, name: str):
    info = graph.tensors[name]
    if info.data is None or info.data.size != 1 or info.data.dtype.kind != "f":
        return None
    return float(info.data.reshape(-1)[0])


def _scalar_factor(graph: Graph, node):
    """(the non-scalar input, factor) when node multiplies or divides by a scalar constant."""
    if node.op not in ("mul", "div") or len(node.inputs) != 2:
        return None
    a, b = node.inputs
    c = _scalar_constant(graph, b)
    if c is not None:
        return a, (c if node.op == "mul" else 1.0 / c if c else None)
    c = _scalar_constant(graph, a)
    if c is not None and node.op == "mul":
        return b, c
    return None


def fold_scalars(graph: Graph) -> bool:
    """``gemm(a * c, b)``, ``gemm(a, b / c)`` and ``gemm(a, b) * c`` (c a scalar constant, the
    intermediate read only there, no activation yet) fold c into the gemm's alpha."""
    changed = False
    for node in list(graph.order()):
        if node.op != "gemm" or node not in graph.nodes:
            continue
        for i in (0, 1):
            src = graph.producer.get(node.inputs[i])
            hit = _scalar_factor(graph, src) if src is not None else None
            if hit is None or hit[1] is None or graph.sole_consumer(node.inputs[i]) is not node:
                continue
            if graph.tensors[hit[0]].shape != graph.tensors[node.inputs[i]].shape:
                continue  # the scalar broadcast the operand: not a pure scale
            graph.set_input(node, i, hit[0])
            node.attrs["alpha"] *= hit[1]
            changed = True
        reader = graph.sole_consumer(node.output)
        hit = _scalar_factor(graph, reader) if reader is not None else None
        if hit is None or hit[1] is None or hit[0] != node.output or node.attrs["act"]:
            continue
        if len(node.inputs) > 2 or graph.tensors[reader.output].shape != _shape(graph, node):
            continue  # alpha would not scale the bias; or the scalar broadcasts the result
        node.attrs["alpha"] *= hit[1]
        graph.bypass(reader, node.output)
        changed = True
    return changed


def _shape(graph: Graph, node) -> tuple:
    return graph.tensors[node.output].shape


def constant_is_vector(graph: Graph, name: str, n: int) -> np.ndarray | None:
    """The constant ``name`` as an [n] vector when it broadcasts along the last dim only."""
    info = graph.tensors[name]
    if info.data is None or info.data.size != n or (info.shape and info.shape[-1] != n):
        return None
    return info.data.reshape(-1)


def _is_reshape(graph: Graph, node) -> bool:
    """Whether ``node`` is a view op that only reshapes its source (contiguous, no offset)."""
    if op_info(node.op).view is None:
        return False
    src = graph.tensors[node.inputs[0]]
    shape, strides, offset = layout_of(src.shape, src.dtype.itemsize, [(node.op, node.attrs)])
    return offset == 0 and is_contiguous_layout(shape, strides)


def _reshape_root(graph: Graph, name: str) -> str | None:
    """The contiguous tensor that ``name`` is (a computed tensor or graph input) or reshapes;
    None for constants (left to folding) and other views."""
    node = graph.producer.get(name)
    if node is None:
        return None if graph.is_constant(name) else name
    if op_info(node.op).view is None:
        return name  # computed tensors are contiguous
    return _reshape_root(graph, node.inputs[0]) if _is_reshape(graph, node) else None


def _contiguous_strides(shape: tuple) -> tuple:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


def batch_gemm_rows(graph: Graph) -> bool:
    """``gemm(a [M, K], w [K, N]) -> reshape to [*lead, N]`` (prod(lead) = M; a a contiguous
    tensor or a reshape of one; w 2-D, either flag; the product read only by the reshape)
    becomes the gemm of a reshaped to ``[*lead, K]``, of shape ``[*lead, N]``: gemm multiplies
    a 2-D right operand by all rows at once (one GEMM of M rows, the same bits), and the bias
    add or activation that reads the product can then fuse into the gemm's epilogue
    (fuse.py). Consumers first, so that a chain of products (an MLP) goes batched in one run."""
    changed = False
    for node in reversed(graph.order()):
        if node.op != "gemm" or node not in graph.nodes or node.attrs["trans_a"]:
            continue
        a, b = node.inputs[:2]
        if len(graph.tensors[a].shape) != 2 or len(graph.tensors[b].shape) != 2:
            continue
        m, n = graph.tensors[node.output].shape
        k = graph.tensors[a].shape[1]
        view = graph.sole_consumer(node.output)
        if view is None or not _is_reshape(graph, view):
            continue
        shape = tuple(graph.tensors[view.output].shape)
        if len(shape) < 3 or shape[-1] != n or math.prod(shape[:-1]) != m:
            continue  # (an [M, N] view of the product is no reshape)
        root = _reshape_root(graph, a)
        if root is None:
            continue
        want = shape[:-1] + (k,)
        info = graph.tensors[a]
        if graph.tensors[root].shape != want:
            attrs = {"shape": want, "strides": _contiguous_strides(want), "offset": 0}
            root = graph.add_node("strided", [root], want, info.dtype, attrs).output
        out = graph.tensors[view.output]
        inputs = [root, *node.inputs[1:]]
        fused = graph.add_node("gemm", inputs, shape, out.dtype, dict(node.attrs))
        graph.bypass(view, fused.output)
        graph.remove_node(node)
        src = graph.producer.get(a)
        while src is not None and op_info(src.op).view is not None and not graph.consumers[a]:
            graph.remove_node(src)  # the flattening views, now read by nothing
            a = src.inputs[0]
            src = graph.producer.get(a)
        changed = True
    return changed
