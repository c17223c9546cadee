"""Chained Linear layers with their hidden activations stored transposed (the compiled CPU
executor's layout decision).

A Linear layer ``h = relu(x @ W^T + b)`` whose batch tiles the GEMM's register tile badly (32
rows against 14 x 32 tiles on AVX-512) runs swapped inside the GEMM: it computes ``h^T = W x^T``
(the weight's rows along the tile's rows), packs ``x^T`` per call and transposes ``h^T`` back into
``h``. When the next node is another GEMM that reads ``h`` as its A operand and nothing else reads
``h``, the transposes in between serve nobody: here ``h``'s arena memory holds ``h^T`` instead
(its bytes are private to the two nodes), the producer computes ``h^T`` directly with the bias
per row (gemm_ex's ``bias_rows``), and the consumer reads it as a transposed A, which the GEMM
reads in place (a k x 32 row-major operand is what its packed B panels are). Measured on Zen 4,
a 32 x 512 x 512 layer on one thread: 160 -> 150 us; two threads ~97 -> ~83 us (no per-thread
copy of ``x^T`` from lines the other core wrote, no transposing pass).

The graph's inputs and outputs keep the user's layout: the first layer of a chain reads ``x`` as
before and writes ``h^T``; the last reads ``h^T`` and writes its output as usual. The sums are
those of the untransposed call (every GEMM mode sums each element in the same K blocks, in the
same order; the bias is one rounded add, relu a select, as the Linear's epilogue), so compiled
and interpreted executors keep the same bits.

``transposed(plan)`` returns, per gemm node output, ``(in_t, out_t)``: its A operand's memory
holds A^T, and / or it writes its output transposed. fused.py's ``gemm_layout_calls`` lowers
them.
"""

from __future__ import annotations

import numpy as np

from ..ir import packing

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# Products of up to this many rows run gemm.c's small-m path (gemv order), whose bits the
# transposed product (a blocked one) would not give: only larger batches take the layout.
_MIN_ROWS = max(packing.SMALL_M.values())


def _gemm_2d(graph, node) -> bool:
    """A 2-D gemm with alpha 1 whose A is not transposed and whose B is a C-contiguous
    constant."""
    if node.op != "gemm" or node.attrs["trans_a"] or node.attrs["alpha"] != 1.0:
        return False
    out = graph.tensors[node.output]
    a, b = (graph.tensors[n] for n in node.inputs[:2])
    if len(out.shape) != 2 or len(a.shape) != 2 or len(b.shape) != 2:
        return False
    if out.dtype.np not in _FLOATS or a.dtype != out.dtype or b.dtype != out.dtype:
        return False
    return b.data is not None and b.data.flags.c_contiguous and node.output not in node.inputs


def _dims(graph, node) -> tuple:
    """(m, n, k, trans_b) of a 2-D gemm node."""
    m, n = graph.tensors[node.output].shape
    b = graph.tensors[node.inputs[1]]
    tb = int(node.attrs["trans_b"])
    return m, n, b.shape[1] if tb else b.shape[0], tb


def _blocked(graph, node) -> bool:
    """Whether the node's product runs gemm.c's blocked path as laid out here: sizes known, more
    than the small-m path's rows, not the narrow-N path (both sum in the gemv order; as a
    transposed A operand, which the narrow-N path does not take, the consumer would run blocked:
    other bits)."""
    m, n, k, tb = _dims(graph, node)
    if not all(isinstance(v, int) for v in (m, n, k)) or m <= _MIN_ROWS:
        return False
    return not packing._narrow(m, n, k, 0, tb, graph.tensors[node.output].dtype.itemsize)


def _writes_transposed(graph, node, kinds: dict) -> bool:
    """Whether ``node`` (a 2-D gemm) may write its output transposed: bias none or a constant
    vector, act none or relu (the rows' epilogue), its product run swapped by the GEMM (packing's
    rule), its A contiguous in the arena (an input or a computed tensor, not a view)."""
    if node.attrs["act"] not in (None, "relu") or kinds.get(node.inputs[0]) == "view":
        return False
    if len(node.inputs) > 2:
        bias = graph.tensors[node.inputs[2]]
        if bias.data is None or bias.data.ndim != 1 or not bias.data.flags.c_contiguous:
            return False
    if not _blocked(graph, node):
        return False
    m, n, k, _ = _dims(graph, node)
    if n <= _MIN_ROWS:  # (C^T's rows: the small-m path)
        return False
    return packing._swap(m, n, k, graph.tensors[node.output].dtype.np) == 1


def transposed(plan) -> dict:
    """gemm node output -> (in_t, out_t) for the chained gemm steps of ``plan`` (module
    docstring); nodes not listed run as planned."""
    graph = plan.graph
    kinds = {s.node.output: s.kind for s in plan.steps}
    out: dict = {}
    for step in plan.steps:
        node = step.node
        if step.kind != "kernel" or not _gemm_2d(graph, node):
            continue
        nxt = graph.sole_consumer(node.output)
        if (
            nxt is None
            or kinds.get(nxt.output) != "kernel"
            or not _gemm_2d(graph, nxt)
            or nxt.inputs[0] != node.output
            or node.output in nxt.inputs[1:]
            or not _blocked(graph, nxt)
            or not _writes_transposed(graph, node, kinds)
        ):
            continue
        in_t = out.get(node.output, (0, 0))[0]
        out[node.output] = (in_t, 1)
        out[nxt.output] = (1, 0)
    return out
